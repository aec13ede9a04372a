"""Measurement: packet generator runs, zero-loss search, iperf done right, results.

Everything here runs inside a started :class:`fidelnet.Network` and returns typed
results (:mod:`fidelnet.measure.results`) that save as JSON with their provenance
and the measurement floor::

    from fidelnet.measure import save, tcp, udp, zero_loss_rate

    r = udp(net, "h1", "h2", rate_pps=20_000, duration=2.0)
    save("results", "h1-h2", r, net)

See docs/measure.md.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from fidelnet.measure.fairness import jain
from fidelnet.measure.packets import udp, zero_loss_rate
from fidelnet.measure.provenance import Provenance, collect
from fidelnet.measure.results import (
    FloorSummary,
    ResultFile,
    SelftestResult,
    TcpResult,
    UdpResult,
    ZeroLossResult,
    load_result,
    save_result,
)
from fidelnet.measure.selftest import load_floor, selftest
from fidelnet.measure.tcp import tcp

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = [
    "FloorSummary",
    "Provenance",
    "ResultFile",
    "SelftestResult",
    "TcpResult",
    "UdpResult",
    "ZeroLossResult",
    "jain",
    "load_floor",
    "load_result",
    "save",
    "selftest",
    "tcp",
    "udp",
    "zero_loss_rate",
]


def save(
    directory: str | os.PathLike[str],
    name: str,
    result: UdpResult | ZeroLossResult | SelftestResult | TcpResult,
    net: Network | None = None,
    *,
    tools: dict[str, str] | None = None,
) -> Path:
    """Save ``result`` as ``directory/<name>.json`` with its provenance (from ``net``)
    and the floor last measured on this machine (None if never: the report says so)."""
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    return save_result(target, name, result, collect(net, tools=tools), load_floor())
