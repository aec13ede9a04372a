"""The measurement floor: pktgen's sender and receiver over a bare veth pair.

What the generator and receiver add by themselves (latency) and the most they can
do (rate) on this machine. Every report carries this floor, so a reader can tell
a property of the network from one of the measurement. The last floor measured
is kept in :func:`floor_path` and found again by :func:`load_floor` when the
machine and the generator are the same.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
from collections.abc import Callable
from pathlib import Path

from fidelnet.errors import MeasurementError
from fidelnet.measure.packets import udp, zero_loss_rate
from fidelnet.measure.pktgen import TrafficSpec, find_pktgen
from fidelnet.measure.provenance import machine, tool_version
from fidelnet.measure.results import Flag, FloorSummary, SelftestResult, UdpResult
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec

__all__ = ["floor_path", "load_floor", "selftest", "topology"]

LATENCY_RATES = (10_000.0, 100_000.0)
PROBE_RATE = 5_000_000.0  # beyond any generator here: it reports what it reached


def topology() -> TopologySpec:
    """Two hosts, ``gen`` and ``rcv``, joined by one bare veth pair."""
    spec = TopologySpec()
    spec.add_node(NodeSpec("gen", ip="10.254.0.1/30"))
    spec.add_node(NodeSpec("rcv", ip="10.254.0.2/30"))
    spec.add_link(LinkSpec("gen", "rcv"))
    return spec


def floor_path() -> Path:
    """$FIDELNET_FLOOR, else /var/lib/fidelnet/floor.json as root, else
    ~/.cache/fidelnet/floor.json."""
    env = os.environ.get("FIDELNET_FLOOR")
    if env:
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/fidelnet/floor.json")
    return Path.home() / ".cache" / "fidelnet" / "floor.json"


def _source() -> str:
    m = machine()
    version = tool_version([find_pktgen(), "--version"]) or "pktgen ?"
    return f"{m.hostname} {m.kernel} {m.cpus} cpus; {version}"


def load_floor() -> FloorSummary | None:
    """The floor measured last on this machine with this generator, or None."""
    path = floor_path()
    try:
        floor = FloorSummary.model_validate_json(path.read_text())
    except (OSError, ValueError):
        return None
    try:
        same = floor.source == _source()
    except MeasurementError:  # no generator: no floor to match
        return None
    return floor if same else None


def _save_floor(floor: FloorSummary) -> None:
    path = floor_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(floor.model_dump(mode="json"), indent=1) + "\n")
    tmp.replace(path)


def selftest(
    *,
    duration: float = 3.0,
    size: int = 64,
    search: bool = True,
    save: bool = True,
    progress: Callable[[str], None] | None = None,
) -> SelftestResult:
    """Measure the floor in a network of its own (built and torn down here)."""
    from fidelnet.network import Network  # measurement sits above orchestration

    TrafficSpec(PROBE_RATE, size, duration).check()
    say = progress or (lambda _msg: None)
    runs: list[UdpResult] = []
    with Network(topology(), command="fidelnet measure selftest") as net:
        for rate in LATENCY_RATES:
            say(f"latency floor at {rate / 1000:.0f} kpps, {duration:g} s")
            runs.append(udp(net, "gen", "rcv", rate, size=size, duration=duration))
        for mode in ("udp", "gso"):
            say(f"highest send rate, --mode {mode}")
            probe = udp(
                net, "gen", "rcv", PROBE_RATE, size=size, duration=min(duration, 2.0), mode=mode
            )
            runs.append(probe)
        max_send = max(r.achieved_pps for r in runs[len(LATENCY_RATES) :])
        max_zero = None
        if search:
            say("highest zero-loss rate (binary search)")
            z = zero_loss_rate(
                net,
                "gen",
                "rcv",
                size=size,
                low_pps=10_000.0,
                high_pps=max(max_send, 20_000.0),
                trial_s=1.0,
                resolution_pps=max(max_send / 50, 1000.0),
            )
            max_zero = z.ndr_pps
    base = runs[0]
    floor = FloorSummary(
        latency_p50_ns=base.latency.p50_ns,
        latency_p999_ns=base.latency.p999_ns,
        latency_max_ns=base.latency.max_ns,
        max_send_pps=max_send,
        max_zero_loss_pps=max_zero,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        source=_source(),
    )
    latency_runs = runs[: len(LATENCY_RATES)]
    flags = [f for r in latency_runs for f in r.flags]
    if any(r.lost for r in latency_runs):
        flags.append(
            Flag(
                code="floor_loss",
                message="the generator and receiver lost packets over a bare veth pair at "
                + ", ".join(f"{r.requested_pps / 1000:.0f} kpps" for r in latency_runs if r.lost),
            )
        )
    if save:
        _save_floor(floor)
    return SelftestResult(
        size=size,
        runs=runs,
        max_send_pps=max_send,
        max_zero_loss_pps=max_zero,
        floor=floor,
        flags=flags,
    )
