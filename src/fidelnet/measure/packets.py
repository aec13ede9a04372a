"""Packet-generator measurements over a running network: :func:`udp` runs one
load, :func:`zero_loss_rate` searches the highest rate without loss.

CPU placement matters more than anything else on a small machine: a generator
that shares its core with the kernel's forwarding cannot pass about 150 kpps
here (../shared/MACHINE.md). With ``pin=True`` (the default on machines with two
or more cores) the sender runs on CPU 0, the receiver on the last CPU, and the
first hop's receive processing is steered there too (RPS on the interface that
receives the sender's packets), so the generator has a core of its own.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from fidelnet.errors import ValidationError
from fidelnet.events import Event, Timeline
from fidelnet.kernel import nic
from fidelnet.measure import outage, tools
from fidelnet.measure.pktgen import Mode, Pattern, TrafficSpec, prepare_gso, run
from fidelnet.measure.results import EventRecord, Flag, Trial, UdpResult, ZeroLossResult
from fidelnet.measure.verdicts import judged, path_nodes, precheck, watch

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

__all__ = [
    "Placement",
    "finish",
    "first_hop",
    "placement",
    "search",
    "steer_rps",
    "udp",
    "zero_loss_rate",
]


class Placement:
    """CPUs for the sender and receiver (None: not pinned)."""

    def __init__(self, sender: int | None, receiver: int | None) -> None:
        self.sender = sender
        self.receiver = receiver


def placement(pin: bool, sender_cpu: int | None, receiver_cpu: int | None) -> Placement:
    """Explicit CPUs win; else with ``pin`` and two or more CPUs, sender on the first
    allowed CPU and receiver on the last."""
    allowed = sorted(os.sched_getaffinity(0))
    for field, cpu in (("sender_cpu", sender_cpu), ("receiver_cpu", receiver_cpu)):
        if cpu is not None and cpu not in allowed:
            raise ValidationError(field, "not a CPU this process may use", cpu, map(str, allowed))
    if not pin or len(allowed) < 2:
        return Placement(sender_cpu, receiver_cpu)
    return Placement(
        allowed[0] if sender_cpu is None else sender_cpu,
        allowed[-1] if receiver_cpu is None else receiver_cpu,
    )


def steer_rps(node: Node, dev: str, cpu: int) -> None:
    """Steer receive processing of ``dev`` in ``node`` to ``cpu`` (RPS). The node's
    own sysfs shows its namespace's devices; the values go as arguments, never into
    the script text."""
    _out, err, rc = tools.pexec(node, nic.rps_argv(dev, cpu), timeout=10)
    if rc != 0:
        raise ValidationError(
            "pin", f"cannot steer receive processing of {node.name}:{dev} to CPU {cpu}", err.strip()
        )


def first_hop(net: Network, src: str) -> tuple[Node, str] | None:
    """The node and interface that receive what ``src`` sends first."""
    for link in net.links:
        if link.intf1.node.name == src:
            return link.intf2.node, link.intf2.name
        if link.intf2.node.name == src:
            return link.intf1.node, link.intf1.name
    return None


def _node(net: Network, field: str, name: str) -> Node:
    if name not in net:
        raise ValidationError(field, "unknown node", name, [n.name for n in net][:30])
    return net[name]


def _prepare(
    net: Network,
    src: str,
    dst: str,
    dst_addr: str | None,
    pin: bool,
    sender_cpu: int | None,
    receiver_cpu: int | None,
    mode: Mode = "udp",
) -> tuple[Node, Node, str, Placement]:
    s = _node(net, "src", src)
    d = _node(net, "dst", dst)
    if src == dst:
        raise ValidationError("dst", "must differ from src", dst)
    addr = dst_addr or d.ip
    if not addr:
        raise ValidationError("dst_addr", f"{dst} has no address; give dst_addr", dst_addr)
    place = placement(pin, sender_cpu, receiver_cpu)
    # A VM node's programs run on its own vCPUs: host CPU numbers mean nothing there.
    if not s.backend.host_cpus:
        place.sender = None
    if not d.backend.host_cpus:
        place.receiver = None
    if place.receiver is not None and pin:
        hop = first_hop(net, src)
        if hop is not None and hop[0].netns is not None and hop[0].backend.host_cpus:
            steer_rps(hop[0], hop[1], place.receiver)
    if mode == "gso":
        prepare_gso(s, [i.name for i in s.intf_list()])
    return s, d, addr, place


def udp(
    net: Network,
    src: str,
    dst: str,
    rate_pps: float,
    *,
    size: int = 64,
    duration: float = 2.0,
    pattern: Pattern = "cbr",
    burst: int = 100,
    flows: int = 1,
    seed: int | None = None,
    dst_addr: str | None = None,
    pin: bool = True,
    sender_cpu: int | None = None,
    receiver_cpu: int | None = None,
    hdr_log: str | None = None,
    mode: Mode = "udp",
    monitor: bool = True,
    interval_ms: int = 100,
    events: Sequence[Event] = (),
) -> UdpResult:
    """Send ``rate_pps`` packets/s of ``size``-byte frames from ``src`` to ``dst`` for
    ``duration`` seconds and measure loss, one-way latency and the received rate
    (its series in ``interval_ms`` windows).
    With ``monitor`` (the default) the run is watched and the result carries its
    verdict (:mod:`fidelnet.fidelity`). ``events`` (:mod:`fidelnet.events`) happen
    at their ``at``, in seconds after the first packet is due, and each one's outage
    is told from the packets (``result.events``, ``result.outages``)."""
    spec = TrafficSpec(rate_pps, size, duration, pattern, burst, flows, seed, mode=mode)
    spec.check()
    timeline = Timeline(net, events) if events else None
    if timeline is not None and timeline.last_at > duration:
        raise ValidationError(
            "events",
            f"an event at {timeline.last_at:g} s is after the traffic's {duration:g} s",
            timeline.last_at,
        )
    s, d, addr, place = _prepare(net, src, dst, dst_addr, pin, sender_cpu, receiver_cpu, mode)
    nodes, shaped = path_nodes(net, src, dst) if monitor else ([], False)
    if monitor:
        precheck(net, src, dst, rate_pps, size, f"udp {rate_pps:,.0f} pps of {size} B")
    with watch(net, nodes, monitor) as mon:
        if mon is not None:
            mon.begin()
        result = run(
            s,
            d,
            addr,
            spec,
            sender_cpu=place.sender,
            receiver_cpu=place.receiver,
            hdr_log=hdr_log,
            interval_ms=interval_ms,
            on_start=_starter(timeline),
        )
        if mon is not None:
            mon.end()
    if timeline is not None:
        result = with_events(result, timeline)
    if mon is None:
        return result
    return judged(result, mon.record(), capacity_limited=shaped)


def _starter(timeline: Timeline | None) -> Callable[[int], None] | None:
    if timeline is None:
        return None

    def begin(t0_ns: int) -> None:
        timeline.start(t0_ns)

    return begin


def with_events(result: UdpResult, timeline: Timeline) -> UdpResult:
    """``result`` with what each event of ``timeline`` did and the outage after it."""
    happened = timeline.wait(timeout=30.0)
    t0 = timeline.t0_ns or 0
    records = []
    breaking = [h for h in happened if h.action not in ("up", "node_up")]
    for h in happened:
        rec: dict[str, object] = {}
        if h in breaking:
            later = [b.planned_ns for b in breaking if b.planned_ns > h.planned_ns]
            began = h.effective_ns if h.exact else h.started_ns
            got = outage.around(result, began, min(later) if later else None)
            at_s = (began - t0) / 1e9
            end_s = (max(o.end_ns for o in got.outages) - t0) / 1e9 if got.outages else None
            lat = outage.latency_around(result, at_s, end_s)
            rec = {
                "latency_p99_before_ns": lat.before_p99_ns,
                "latency_max_during_ns": lat.during_max_ns,
                "latency_p99_after_ns": lat.after_p99_ns,
                "outage_s": got.outage_s,
                "lost": got.lost,
                "late_packets": got.late,
                "duplicates": lat.duplicates_during,
                "recovered": got.recovered,
                "delay_s": got.delay_s,
            }
        records.append(
            EventRecord(
                name=h.name,
                action=h.action,
                target=h.target,
                at_s=(h.planned_ns - t0) / 1e9,
                late_s=h.late_s,
                took_s=h.took_s,
                effective_s=(h.effective_ns - t0) / 1e9 if h.effective_ns else None,
                exact=h.exact,
                error=h.error,
                **rec,  # type: ignore[arg-type]
            )
        )
    first = min((h.planned_ns for h in happened), default=None)
    kept = [] if first is None else outage.around(result, first).outages
    return result.model_copy(update={"events": records, "outages": list(kept)})


def _trial(result: UdpResult) -> Trial:
    return Trial(
        rate_pps=result.requested_pps,
        achieved_pps=result.achieved_pps,
        sent=result.sent,
        received=result.unique,
        loss_ratio=result.loss_ratio,
        generator_limited=not result.rate_reached,
        socket_drops=result.socket_drops,
        latency=result.latency,
    )


def search(
    trial: Callable[[float], UdpResult],
    *,
    low_pps: float,
    high_pps: float,
    resolution_pps: float,
    pdr_loss: float,
    max_trials: int,
) -> tuple[float, float, list[Trial]]:
    """NDR and PDR by bisection over ``trial(rate)``; trials are shared between the
    two searches. A trial whose generator fell short of the rate did not offer the
    network that rate, and fails; one that fell only just short (a busy machine's
    moment: at least :data:`RETRY_SHARE` of the rate) is run again first, up to
    :data:`GENERATOR_RETRIES` times. ``max_trials`` bounds the rates tried. Returns
    (ndr, pdr, every trial in run order, repeats included)."""
    trials: list[Trial] = []
    cache: dict[float, Trial] = {}

    def at(rate: float) -> Trial:
        rate = float(round(rate))
        if rate not in cache:
            if len(cache) >= max_trials:
                raise _OutOfTrialsError
            for _ in range(1 + GENERATOR_RETRIES):
                cache[rate] = _trial(trial(rate))
                trials.append(cache[rate])
                t = cache[rate]
                if not t.generator_limited or t.achieved_pps < RETRY_SHARE * rate:
                    break
        return cache[rate]

    def bisect(limit: float) -> float:
        def ok(t: Trial) -> bool:
            return not t.generator_limited and t.loss_ratio <= limit

        if ok(at(high_pps)):
            return high_pps
        lo, hi = low_pps, high_pps
        if not ok(at(lo)):
            return 0.0
        # Start from the tightest bracket the shared trials already give (the one
        # that counts at each rate, not a repeated one).
        for t in cache.values():
            if ok(t) and t.rate_pps > lo:
                lo = t.rate_pps
            if not ok(t) and t.rate_pps < hi:
                hi = t.rate_pps
        while hi - lo > resolution_pps:
            mid = (lo + hi) / 2
            if ok(at(mid)):
                lo = mid
            else:
                hi = mid
        return lo

    try:
        ndr = bisect(0.0)
        pdr = bisect(pdr_loss)
    except _OutOfTrialsError:
        ndr = max(
            (t.rate_pps for t in trials if t.loss_ratio == 0 and not t.generator_limited),
            default=0.0,
        )
        pdr = max(
            (t.rate_pps for t in trials if t.loss_ratio <= pdr_loss and not t.generator_limited),
            default=0.0,
        )
    return ndr, pdr, trials


GENERATOR_RETRIES = 2
"""How often a search trial whose generator fell only just short of its rate is run again."""
RETRY_SHARE = 0.95
"""A generator that reached this share of the rate fell short by a moment, not by its
capacity (which a repeat would not change: the search bisects below it instead)."""


class _OutOfTrialsError(Exception):
    pass


def zero_loss_rate(
    net: Network,
    src: str,
    dst: str,
    *,
    size: int = 64,
    low_pps: float = 1000.0,
    high_pps: float = 1_000_000.0,
    trial_s: float = 1.0,
    resolution_pps: float | None = None,
    pdr_loss: float = 0.005,
    pattern: Pattern = "cbr",
    burst: int = 100,
    max_trials: int = 40,
    dst_addr: str | None = None,
    pin: bool = True,
    sender_cpu: int | None = None,
    receiver_cpu: int | None = None,
    mode: Mode = "udp",
    monitor: bool = True,
) -> ZeroLossResult:
    """RFC 2544 throughput: the highest offered rate in [low_pps, high_pps] at which
    no packet is lost (NDR), and the highest with loss at most ``pdr_loss`` (PDR, a
    ratio: 0.005 = 0.5 % as in FD.io CSIT), by binary search down to
    ``resolution_pps`` (default 1 % of ``high_pps``), with trials of ``trial_s``.
    With ``monitor``, every trial is watched and the verdict is that of the trial at
    the NDR (searching past the machine's limit is the point of the other trials)."""
    if not 0 < low_pps < high_pps:
        raise ValidationError("low_pps", "must be > 0 and below high_pps", low_pps)
    resolution = resolution_pps if resolution_pps is not None else high_pps / 100
    if not 0 < resolution < high_pps - low_pps:
        raise ValidationError(
            "resolution_pps", "must be > 0 and smaller than high_pps - low_pps", resolution
        )
    if not 0 <= pdr_loss < 1 or math.isnan(pdr_loss):
        raise ValidationError("pdr_loss", "must be a ratio in [0, 1)", pdr_loss)
    if max_trials < 2:
        raise ValidationError("max_trials", "must be at least 2", max_trials)
    TrafficSpec(high_pps, size, trial_s, pattern, burst, mode=mode).check()
    s, d, addr, place = _prepare(net, src, dst, dst_addr, pin, sender_cpu, receiver_cpu, mode)

    nodes, shaped = path_nodes(net, src, dst) if monitor else ([], False)
    records = {}

    def trial(rate: float) -> UdpResult:
        spec = TrafficSpec(rate, size, trial_s, pattern, burst, mode=mode)
        with watch(net, nodes, monitor) as mon:
            if mon is not None:
                mon.begin()
            got = run(s, d, addr, spec, sender_cpu=place.sender, receiver_cpu=place.receiver)
            if mon is not None:
                mon.end()
        if mon is not None:
            records[float(round(rate))] = mon.record()
        return got

    ndr, pdr, trials = search(
        trial,
        low_pps=low_pps,
        high_pps=high_pps,
        resolution_pps=resolution,
        pdr_loss=pdr_loss,
        max_trials=max_trials,
    )
    result = finish(
        src,
        dst,
        size,
        pattern,
        burst,
        trial_s,
        resolution,
        low_pps,
        high_pps,
        pdr_loss,
        ndr,
        pdr,
        trials,
    )
    if not monitor:
        return result
    return judged(result, records.get(float(round(ndr))), capacity_limited=shaped)


def finish(
    src: str,
    dst: str,
    size: int,
    pattern: str,
    burst: int,
    trial_s: float,
    resolution: float,
    low_pps: float,
    high_pps: float,
    pdr_loss: float,
    ndr: float,
    pdr: float,
    trials: list[Trial],
) -> ZeroLossResult:
    """The ZeroLossResult of a finished search, with its flags."""
    limited = [t for t in trials if t.generator_limited]
    gen_max = max((t.achieved_pps for t in limited), default=None)
    flags = []
    if limited and gen_max is not None and ndr >= 0.9 * min(t.rate_pps for t in limited):
        flags.append(
            Flag(
                code="generator_limited",
                message=(
                    f"the generator reached at most {gen_max:.0f} pps in trials above "
                    f"{ndr:.0f} pps: the result is a lower bound set by the generator"
                ),
            )
        )
    if ndr == 0.0:
        flags.append(
            Flag(code="loss_at_low_rate", message=f"packets were lost even at {low_pps:.0f} pps")
        )
    drops = sum(t.socket_drops for t in trials)
    if drops:
        flags.append(
            Flag(
                code="receiver_socket_drops",
                message=f"{drops} packets were dropped in the receiver's socket over all trials",
            )
        )
    return ZeroLossResult(
        src=src,
        dst=dst,
        size=size,
        pattern=pattern,
        burst=burst if pattern == "burst" else None,
        trial_s=trial_s,
        resolution_pps=resolution,
        low_pps=low_pps,
        high_pps=high_pps,
        pdr_loss=pdr_loss,
        ndr_pps=ndr,
        pdr_pps=pdr,
        generator_max_pps=gen_max,
        trials=trials,
        flags=flags,
    )
