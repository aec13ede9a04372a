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

from fidelnet._lazy import lazy_exports

if TYPE_CHECKING:
    from fidelnet.measure.fairness import jain
    from fidelnet.measure.packets import udp, zero_loss_rate
    from fidelnet.measure.provenance import Provenance
    from fidelnet.measure.results import (
        FloorSummary,
        ResultFile,
        SelftestResult,
        TcpResult,
        UdpResult,
        ZeroLossResult,
        load_result,
    )
    from fidelnet.measure.selftest import load_floor, selftest
    from fidelnet.measure.tcp import tcp
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
    from fidelnet.measure.provenance import collect
    from fidelnet.measure.results import save_result
    from fidelnet.measure.selftest import load_floor

    return save_result(target, name, result, collect(net, tools=tools), load_floor())


# Imported on first use (fidelnet._lazy): the scenario model needs the measurement
# modules' limits without the kernel layer and pydantic results they also carry.
_LAZY = {
    "jain": "fidelnet.measure.fairness",
    "udp": "fidelnet.measure.packets",
    "zero_loss_rate": "fidelnet.measure.packets",
    "Provenance": "fidelnet.measure.provenance",
    "collect": "fidelnet.measure.provenance",
    "FloorSummary": "fidelnet.measure.results",
    "ResultFile": "fidelnet.measure.results",
    "SelftestResult": "fidelnet.measure.results",
    "TcpResult": "fidelnet.measure.results",
    "UdpResult": "fidelnet.measure.results",
    "ZeroLossResult": "fidelnet.measure.results",
    "load_result": "fidelnet.measure.results",
    "save_result": "fidelnet.measure.results",
    "load_floor": "fidelnet.measure.selftest",
    "selftest": "fidelnet.measure.selftest",
    "tcp": "fidelnet.measure.tcp",
}

lazy_exports(__name__, _LAZY)
