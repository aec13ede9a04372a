"""Every measurement watched and judged: the glue between :mod:`fidelnet.measure`
and :mod:`fidelnet.fidelity`.

:func:`watch` opens a :class:`~fidelnet.fidelity.monitor.Monitor` over the nodes a
measurement's packets cross; :func:`judged` puts the verdict and the monitor record
on the result. The machine profile is loaded once per process (a missing or foreign
one is said once, as a warning, with what to do). The thresholds in force are
:data:`thresholds` unless a caller (the scenario runner, the pytest plugin) sets
others with :func:`use_thresholds`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, TypeVar

from fidelnet.errors import FidelnetError
from fidelnet.fidelity import profile as _profile
from fidelnet.fidelity.judge import Observation, judge
from fidelnet.fidelity.monitor import Monitor
from fidelnet.fidelity.record import MonitorRecord
from fidelnet.fidelity.thresholds import DEFAULT, Thresholds
from fidelnet.log import logger
from fidelnet.measure.results import TcpResult, UdpResult, ZeroLossResult

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = [
    "current_profile",
    "judged",
    "path_nodes",
    "precheck",
    "use_thresholds",
    "watch",
]

R = TypeVar("R", UdpResult, ZeroLossResult, TcpResult)

_state: dict[str, object] = {"thresholds": DEFAULT}
_profile_cache: list[_profile.Profile | None] = []


def current_profile() -> _profile.Profile | None:
    """This machine's profile (loaded once; a warning once when there is none)."""
    if not _profile_cache:
        found, why = _profile.load()
        if found is None:
            logger.warning("fidelity: %s", why)
        _profile_cache.append(found)
    return _profile_cache[0]


def assume_no_profile() -> None:
    """Judge without a profile from now on, and without the warning: for
    ``fidelnet calibrate``, which is measuring the profile."""
    _profile_cache.clear()
    _profile_cache.append(None)


@contextlib.contextmanager
def use_thresholds(th: Thresholds) -> Iterator[None]:
    """Judge with ``th`` inside the block."""
    old = _state["thresholds"]
    _state["thresholds"] = th
    try:
        yield
    finally:
        _state["thresholds"] = old


def path_nodes(net: Network, src: str, dst: str) -> tuple[list[str], bool]:
    """The nodes packets from ``src`` to ``dst`` cross (both ends when the path cannot
    be found), and whether the path has a configured rate."""
    from fidelnet.measure.path import path

    try:
        found = path(net, src, dst)
    except FidelnetError:
        return [src, dst], False
    return found.nodes, found.capacity_bps is not None


def precheck(net: Network, src: str, dst: str, pps: float, size: int, what: str) -> list[str]:
    """The capacity check (:mod:`fidelnet.fidelity.capacity`) for one measurement
    about to start from a script: each finding is logged as a warning and returned.
    Nothing without a profile (that is said once, by :func:`current_profile`); the
    same finding is logged once per process."""
    from fidelnet.fidelity.capacity import Demand, assess
    from fidelnet.measure.path import path

    profile = current_profile()
    if profile is None:
        return []
    try:
        found = path(net, src, dst)
    except FidelnetError:
        return []
    hops: dict[str, float] = {}
    for hop in found.hops:
        backend = "engine" if hop.backend == "engine" else "tc"
        hops[backend] = hops.get(backend, 0) + 1
    bits = pps * (size - 4) * 8
    demand = Demand(f"{src}->{dst}", pps, hops, what, {k: bits for k in hops})
    out = []
    for finding in assess([demand], profile):
        if finding.message not in _warned:
            _warned.add(finding.message)
            logger.warning("fidelity: %s", finding.message)
        out.append(finding.message)
    return out


_warned: set[str] = set()
"""Findings already logged: a script measuring the same path again is told once."""


@contextlib.contextmanager
def watch(net: Network, nodes: Iterable[str], enabled: bool = True) -> Iterator[Monitor | None]:
    """A started monitor over ``nodes`` (None when ``enabled`` is false)."""
    if not enabled:
        yield None
        return
    mon = Monitor(net, nodes=nodes)
    mon.start()
    try:
        yield mon
    finally:
        mon.stop()


def _observation(result: UdpResult | ZeroLossResult | TcpResult, capacity: bool) -> Observation:
    from fidelnet.measure.selftest import load_floor  # selftest measures with udp()

    floor = load_floor()
    flags = [(f.code, f.message) for f in result.flags]
    if isinstance(result, UdpResult):
        return Observation(
            kind="udp",
            packets=result.sent,
            requested_pps=result.requested_pps,
            achieved_pps=result.achieved_pps,
            socket_drops=result.socket_drops,
            latency_p999_ns=result.latency.p999_ns if result.latency.count else None,
            latency_p50_ns=result.latency.p50_ns if result.latency.count else None,
            src=result.src,
            dst=result.dst,
            floor_p999_ns=floor.latency_p999_ns if floor else None,
            flags=flags,
            capacity_limited=capacity,
        )
    if isinstance(result, ZeroLossResult):
        at_ndr = [t for t in result.trials if t.rate_pps == result.ndr_pps]
        return Observation(
            kind="zero_loss",
            packets=at_ndr[0].sent if at_ndr else 0,
            socket_drops=at_ndr[0].socket_drops if at_ndr else 0,
            flags=flags,
            capacity_limited=capacity,
        )
    packets = int(sum(f.goodput_bps * (f.measured_s or 0) / 8 / 1448 for f in result.flows))
    return Observation(kind="tcp", packets=packets, flags=flags, capacity_limited=capacity)


def judged(
    result: R,
    record: MonitorRecord | None,
    *,
    capacity_limited: bool = True,
) -> R:
    """``result`` with its verdict and monitor record."""
    th = _state["thresholds"]
    assert isinstance(th, Thresholds)
    verdict = judge(_observation(result, capacity_limited), record, current_profile(), th)
    return result.model_copy(update={"verdict": verdict, "monitor": record})
