"""TCP goodput with iperf3, measured the way Hardin et al. say it must be.

B. Hardin, D. Comer, A. Rastegarnia, "On the Unreliability of Network Simulation
Results from Mininet and iPerf" (2023) found that iperf over an emulated link can
report rates the link cannot carry: the *sender*'s figure soars above capacity
(data written to a socket is not data delivered), the first second is not the
steady state, large windows make flows share a link unequally, and a bidirectional
iperf test reached only about 80% of the link in each direction. :func:`tcp` turns
their findings into rules (docs/measure-tcp.md has each rule with its source):

- the figure is the **receiver's goodput**, from the server's own ``-J`` report every
  ``interval`` (0.1 s; Hardin §IV.A.4: short intervals show what one average hides);
- a **warm-up** is dropped: by default ``max(1 s, 4 x RTT)`` with the RTT from the
  configured delays of the path there and back (Hardin §IV.A.4: "discard values
  reported during the first second (or more depending on latency)"); the goodput is
  the receiver's bytes over the seconds of the intervals after it;
- the sender's figure over the same span is kept and a difference above 5% is flagged
  (``sender_receiver_discrepancy``; Hardin §IV.A.2-3);
- goodput plus headers must fit the path's bottleneck (Hardin §IV.A.1: goodput plus
  header overhead above capacity is an invalid result): flagged
  (``exceeds_bottleneck``) above 1.01 x capacity over the measured span, and per
  interval above 1.10 x capacity (counted);
- a **window** is suggested from the bandwidth-delay product shared by the flows on
  the bottleneck (Hardin Table II and equation 1), and passed as ``-w`` on request;
- several flows get **Jain's fairness index** of their goodputs (Hardin §IV.B);
- ``bidirectional`` runs two independent one-way sessions, never iperf3's
  ``--bidir`` (Hardin §IV.C and recommendation 4).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fidelnet.errors import ValidationError
from fidelnet.measure import iperf3
from fidelnet.measure.fairness import jain
from fidelnet.measure.iperf3 import MIN_MEASURED_S, MIN_WARMUP_S
from fidelnet.measure.path import Hop, Path, path
from fidelnet.measure.results import Flag, TcpFlowResult, TcpInterval, TcpResult
from fidelnet.measure.verdicts import judged, watch
from fidelnet.topology.units import parse_size

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = [
    "BIDIRECTIONAL_NOTE",
    "DISCREPANCY_LIMIT",
    "FRAME_OVERHEAD_BYTES",
    "INTERVAL_TOLERANCE",
    "SPAN_TOLERANCE",
    "FlowPlan",
    "analyse",
    "bottleneck_flags",
    "default_warmup",
    "discrepancy_flag",
    "flow_result",
    "measured",
    "plan_flows",
    "suggest_for",
    "suggest_window",
    "tcp",
    "wire_rate",
]

FRAME_OVERHEAD_BYTES = 66
"""Bytes on an Ethernet frame (without FCS) besides the TCP payload: TCP header 20 +
timestamp option 12 + IPv4 20 + Ethernet 14. What the link engine and htb count."""

DISCREPANCY_LIMIT = 0.05
SPAN_TOLERANCE = 1.01
INTERVAL_TOLERANCE = 1.10
WARMUP_RTTS = 4.0
INITIAL_WINDOW_SEGMENTS = 10
"""RFC 6928's initial window; no suggestion is smaller than this many segments."""

TIMEOUT_MARGIN_S = 10.0
TIMEOUT_RTTS = 10.0

BIDIRECTIONAL_NOTE = (
    "bidirectional: each pair ran as two independent one-way iperf3 sessions at the same "
    "time (a->b and b->a, separate servers and ports), not iperf3's --bidir: Hardin et al. "
    "(2023, section IV.C) found a single bidirectional iPerf test reached only about 80% of "
    "the link capacity in each direction, and recommend independent senders instead. Each "
    "direction's ACKs share the other direction's link and are not counted in wire_bps."
)


@dataclass(frozen=True)
class FlowPlan:
    """One flow before it runs: ``path`` there, ``rtt_s`` the configured round trip
    (the delays there and back), its server ``port``."""

    src: str
    dst: str
    port: int
    path: Path
    rtt_s: float

    @property
    def label(self) -> str:
        return f"{self.src}->{self.dst}:{self.port}"


# -- the measurement -----------------------------------------------------------------------


def tcp(
    net: Network,
    pairs: Sequence[tuple[str, str]],
    *,
    duration: float = 10.0,
    interval: float = 0.1,
    warmup: float | None = None,
    window: int | str | None = None,
    apply_window: bool = False,
    bidirectional: bool = False,
    port: int = 5201,
    timeout: float | None = None,
    monitor: bool = True,
) -> TcpResult:
    """Run one iperf3 TCP flow per ``(src, dst)`` pair of node names, all at once, and
    return the receivers' goodput after the warm-up, with flags (module docstring).

    ``duration``: whole seconds each client sends (iperf3's ``-t``); it must exceed the
    warm-up by at least 1 s. ``interval``: the report interval (0.1..60 s).
    ``warmup``: seconds dropped at the start (default ``max(1, 4 x RTT)``). ``window``
    (bytes, or text such as ``"64KiB"``) is passed as ``-w`` to every flow; otherwise
    ``apply_window`` passes each flow's suggestion. ``bidirectional`` adds ``b -> a``
    for every pair. Server ports are ``port``, ``port + 1``, ... in flow order.
    ``timeout``: seconds the clients have after they start (default duration + 10 s +
    10 RTTs). Raises ValidationError for bad arguments (before anything runs) and
    MeasurementError when iperf3 fails or a flow times out (naming it). With
    ``monitor`` (the default) the run is watched over the flows' paths and the result
    carries its verdict (:mod:`fidelnet.fidelity`).

    The window rule is Hardin et al.'s Table II, which follows their equation 1
    (throughput = window / RTT): a window of the bottleneck's bandwidth-delay product
    divided among the flows that share it, ``capacity x RTT / 8 / n`` bytes (15, 7.5,
    5 and about 4 MB for 1 to 4 flows on their 1 Gbit/s link of about 120 ms), never
    below 10 segments.
    """
    seconds = _duration(duration)
    _interval(interval)
    wanted = _window(window)
    _check_span(seconds, _warmup(warmup, 0.0))  # again below, once the RTT is known
    _timeout(timeout, seconds, 0.0)
    names = _flow_names(net, pairs, bidirectional)
    _ports(port, len(names))
    plans = plan_flows(net, names, port)
    rtt = max(p.rtt_s for p in plans)
    warm = _warmup(warmup, rtt)
    _check_span(seconds, warm)
    suggestions = [suggest_for(plan, plans) for plan in plans]
    windows = _windows(wanted, apply_window, suggestions)
    nodes = sorted({n for p in plans for n in p.path.nodes})
    with watch(net, nodes, monitor) as mon:
        if mon is not None:
            mon.begin()
        outputs = iperf3.run(
            [_session(net, plan, w) for plan, w in zip(plans, windows, strict=True)],
            duration=seconds,
            interval=interval,
            timeout=_timeout(timeout, seconds, rtt) * (_dilation(net) if timeout is None else 1),
        )
        if mon is not None:
            mon.end()
    result = analyse(
        plans,
        [(o.client, o.server) for o in outputs],
        warmup=warm,
        interval=interval,
        duration=seconds,
        suggestions=suggestions,
        window_applied=any(w is not None for w in windows),
        bidirectional=bidirectional,
    )
    if mon is None:
        return result
    shaped = any(p.path.capacity_bps is not None for p in plans)
    return judged(result, mon.record(), capacity_limited=shaped)


def _dilation(net: Network) -> float:
    """Real seconds per virtual second at most, for a default timeout: the TDF (the
    adaptive factor's upper bound), 1 for an undilated run."""
    auto = getattr(net.spec, "tdf_auto", None)
    if auto is not None:
        return float(auto.high)
    tdf = getattr(net.spec, "tdf", None)
    return float(tdf) if tdf else 1.0


def plan_flows(net: Network, names: Sequence[tuple[str, str]], port: int) -> list[FlowPlan]:
    """A :class:`FlowPlan` per (src, dst), paths looked up once per ordered pair."""
    paths: dict[tuple[str, str], Path] = {}

    def lookup(a: str, b: str) -> Path:
        if (a, b) not in paths:
            paths[a, b] = path(net, a, b)
        return paths[a, b]

    plans = []
    for i, (src, dst) in enumerate(names):
        there, back = lookup(src, dst), lookup(dst, src)
        plans.append(FlowPlan(src, dst, port + i, there, there.delay_s + back.delay_s))
    return plans


def _session(net: Network, plan: FlowPlan, window: int | None) -> iperf3.Flow:
    return iperf3.Flow(
        label=plan.label,
        client=net[plan.src],
        server=net[plan.dst],
        addr=plan.path.dst_addr,
        port=plan.port,
        window=window,
    )


# -- arguments ---------------------------------------------------------------------------------


def _duration(duration: float) -> int:
    if isinstance(duration, bool) or not isinstance(duration, (int, float)):
        raise ValidationError("duration", "must be a number of seconds", duration)
    if not math.isfinite(duration) or duration < 1 or duration != int(duration):
        raise ValidationError(
            "duration", "must be a whole number of seconds, at least 1 (iperf3's -t)", duration
        )
    return int(duration)


def _interval(interval: float) -> None:
    lo, hi = iperf3.MIN_INTERVAL_S, iperf3.MAX_INTERVAL_S
    if isinstance(interval, bool) or not isinstance(interval, (int, float)):
        raise ValidationError("interval", "must be a number of seconds", interval)
    if not lo <= interval <= hi:
        raise ValidationError("interval", f"iperf3 reports every {lo:g} to {hi:g} s", interval)


def _window(window: int | str | None) -> int | None:
    if window is None:
        return None
    size = parse_size("window", window) if isinstance(window, str) else window
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValidationError("window", "must be a positive number of bytes", window)
    return size


def _flow_names(
    net: Network, pairs: Sequence[tuple[str, str]], bidirectional: bool
) -> list[tuple[str, str]]:
    if isinstance(pairs, (str, bytes)) or not pairs:
        raise ValidationError("pairs", "must be a non-empty list of (src, dst) node names", pairs)
    names: list[tuple[str, str]] = []
    for i, pair in enumerate(pairs):
        if isinstance(pair, (str, bytes)) or len(pair) != 2:
            raise ValidationError(f"pairs[{i}]", "must be a (src, dst) pair", pair)
        src, dst = pair
        for name in (src, dst):
            if name not in net:
                raise ValidationError(f"pairs[{i}]", "no such node", name, list(net.nodes)[:20])
        if src == dst:
            raise ValidationError(f"pairs[{i}]", "a flow needs two different nodes", pair)
        names.append((src, dst))
        if bidirectional:
            names.append((dst, src))
    return names


def _ports(port: int, count: int) -> None:
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65536 - count:
        raise ValidationError(
            "port", f"must leave room for {count} server port(s) below 65536", port
        )


def _warmup(warmup: float | None, rtt_s: float) -> float:
    if warmup is None:
        return default_warmup(rtt_s)
    if isinstance(warmup, bool) or not isinstance(warmup, (int, float)):
        raise ValidationError("warmup", "must be a number of seconds", warmup)
    if not math.isfinite(warmup) or warmup < 0:
        raise ValidationError("warmup", "must be at least 0 seconds", warmup)
    return float(warmup)


def _check_span(seconds: int, warm: float) -> None:
    if seconds - warm < MIN_MEASURED_S:
        raise ValidationError(
            "duration",
            f"must exceed the warm-up ({warm:g} s) by at least {MIN_MEASURED_S:g} s",
            seconds,
        )


def _windows(
    wanted: int | None, apply_window: bool, suggestions: list[int | None]
) -> list[int | None]:
    if wanted is not None:
        return [wanted] * len(suggestions)
    if not apply_window:
        return [None] * len(suggestions)
    if any(s is None for s in suggestions):
        raise ValidationError(
            "apply_window",
            "no window to suggest: a flow's path has no link with a rate; pass window=",
            apply_window,
        )
    return list(suggestions)


def _timeout(timeout: float | None, seconds: int, rtt_s: float) -> float:
    if timeout is None:
        return seconds + TIMEOUT_MARGIN_S + TIMEOUT_RTTS * rtt_s
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise ValidationError("timeout", "must be a positive number of seconds", timeout)
    return float(timeout)


# -- the rules ---------------------------------------------------------------------------------


def default_warmup(rtt_s: float) -> float:
    """``max(1 s, 4 x RTT)``: Hardin's first second, longer when the RTT is long."""
    return max(MIN_WARMUP_S, WARMUP_RTTS * rtt_s)


def wire_rate(goodput_bps: float, mss: int) -> float:
    """Goodput as L2 frames: each ``mss``-byte segment travels in a frame of ``mss +
    66`` bytes (no FCS, as the link engine and htb count)."""
    return goodput_bps * (mss + FRAME_OVERHEAD_BYTES) / mss


def suggest_window(
    capacity_bps: float, rtt_s: float, flows: int = 1, mss: int = iperf3.DEFAULT_MSS
) -> int:
    """Hardin et al.'s window rule (Table II, equation 1): the bandwidth-delay product
    divided among the ``flows`` that share the bottleneck, ``ceil(capacity x RTT / 8 /
    flows)`` bytes, and never less than 10 segments (RFC 6928's initial window)."""
    if flows < 1:
        raise ValidationError("flows", "must be at least 1", flows)
    share = math.ceil(capacity_bps * rtt_s / 8.0 / flows)
    return max(share, INITIAL_WINDOW_SEGMENTS * mss)


def suggest_for(plan: FlowPlan, plans: Iterable[FlowPlan]) -> int | None:
    """The window for ``plan``: its bottleneck's capacity, its RTT, and the number of
    flows (of ``plans``) crossing that bottleneck in the same direction."""
    hop = plan.path.bottleneck
    if hop is None or hop.bw is None:
        return None
    sharing = sum(1 for p in plans if hop.key in {h.key for h in p.path.hops})
    return suggest_window(hop.bw, plan.rtt_s, sharing)


def measured(intervals: Sequence[iperf3.Interval], warm: float, interval: float) -> list[int]:
    """Indices of the intervals after the warm-up (an interval that starts within half
    an interval of the warm-up's end counts: iperf3's timer is a little late)."""
    return [i for i, iv in enumerate(intervals) if iv.start_s >= warm - interval / 2]


def _rate(intervals: Sequence[iperf3.Interval]) -> tuple[float, float]:
    """(bit/s, seconds) over ``intervals``: their bytes over their seconds."""
    seconds = sum(iv.seconds for iv in intervals)
    total = sum(iv.bytes for iv in intervals)
    return (8.0 * total / seconds if seconds > 0 else 0.0), seconds


def flow_result(
    plan: FlowPlan,
    client: iperf3.Report,
    server: iperf3.Report,
    *,
    warmup: float,
    interval: float,
    suggestion: int | None = None,
) -> TcpFlowResult:
    """One flow's figures from its client (sender) and server (receiver) reports."""
    mss = client.mss or iperf3.DEFAULT_MSS
    chosen = set(measured(server.intervals, warmup, interval))
    goodput, span_s = _rate([server.intervals[i] for i in sorted(chosen)])
    sent = [client.intervals[i] for i in measured(client.intervals, warmup, interval)]
    sender, _ = _rate(sent)
    rows = [
        TcpInterval(
            t_s=iv.start_s,
            end_s=iv.end_s,
            bytes=iv.bytes,
            goodput_bps=iv.bps,
            wire_bps=wire_rate(iv.bps, mss),
            warmup=i not in chosen,
        )
        for i, iv in enumerate(server.intervals)
    ]
    return TcpFlowResult(
        src=plan.src,
        dst=plan.dst,
        dst_addr=plan.path.dst_addr,
        port=plan.port,
        path=plan.path.nodes,
        sender_bps=sender,
        receiver_bps=server.received_bps or 0.0,
        goodput_bps=goodput,
        wire_bps=wire_rate(goodput, mss),
        measured_s=span_s,
        sender_total_bps=client.sent_bps,
        sender_peak_bps=max((iv.bps for iv in client.intervals), default=None),
        retransmits=client.retransmits,
        window_bytes=client.sock_bufsize,
        sndbuf_bytes=client.sndbuf_actual,
        rcvbuf_bytes=server.rcvbuf_actual,
        mss_bytes=mss,
        bottleneck_bps=plan.path.capacity_bps,
        rtt_s=plan.rtt_s,
        suggested_window_bytes=suggestion,
        congestion=client.congestion,
        intervals=rows,
        warmup_s=warmup,
    )


def discrepancy_flag(flow: TcpFlowResult) -> Flag | None:
    """``sender_receiver_discrepancy`` when the sender's figure over the measured span
    differs from the receiver's goodput by more than 5%."""
    sender, receiver = flow.sender_bps, flow.goodput_bps
    if abs(sender - receiver) <= DISCREPANCY_LIMIT * receiver:
        return None
    apart = f"{abs(sender - receiver) / receiver:.1%} apart" if receiver > 0 else "none received"
    return Flag(
        code="sender_receiver_discrepancy",
        message=(
            f"flow {_label(flow)}: the sender reported {_mbit(sender)}, the receiver "
            f"{_mbit(receiver)} over the same span after the {flow.warmup_s:g} s warm-up "
            f"({apart}; more than {DISCREPANCY_LIMIT:.0%}); the sender counts data written "
            "to its socket, not data delivered: use the receiver's goodput"
        ),
    )


def bottleneck_flags(
    plans: Sequence[FlowPlan], flows: Sequence[TcpFlowResult], interval: float
) -> tuple[list[Flag], int]:
    """``exceeds_bottleneck`` flags and the number of intervals above 1.10 x capacity.

    Every bottleneck hop of some flow is checked with the load of every flow crossing
    it in the same direction: the flows' wire rates as fractions of the hop's frame
    capacity (so different MSS and a per-packet ``overhead`` are counted right), over
    the measured span (limit 1.01) and per report interval (limit 1.10; intervals
    aligned by their index, the last partial one left out).
    """
    flags: list[Flag] = []
    count = 0
    for hop in _bottlenecks(plans):
        users = [
            (plan, flow)
            for plan, flow in zip(plans, flows, strict=True)
            if hop.key in {h.key for h in plan.path.hops}
        ]
        span = _span_flag(hop, users)
        if span is not None:
            flags.append(span)
        over, worst = _intervals_over(hop, users, interval)
        if over:
            count += over
            flags.append(_interval_flag(hop, users, over, worst))
    return flags, count


def _bottlenecks(plans: Sequence[FlowPlan]) -> list[Hop]:
    hops: dict[tuple[int, str], Hop] = {}
    for plan in plans:
        hop = plan.path.bottleneck
        if hop is not None:
            hops.setdefault(hop.key, hop)
    return list(hops.values())


def _frame(flow: TcpFlowResult) -> int:
    return (flow.mss_bytes or iperf3.DEFAULT_MSS) + FRAME_OVERHEAD_BYTES


def _load(hop: Hop, flow: TcpFlowResult, wire_bps: float) -> float:
    capacity = hop.frame_capacity_bps(_frame(flow))
    return wire_bps / capacity if capacity else 0.0


def _span_flag(hop: Hop, users: list[tuple[FlowPlan, TcpFlowResult]]) -> Flag | None:
    load = sum(_load(hop, f, f.wire_bps or 0.0) for _, f in users)
    if load <= SPAN_TOLERANCE:
        return None
    wire = sum(f.wire_bps or 0.0 for _, f in users)
    goodput = sum(f.goodput_bps for _, f in users)
    return Flag(
        code="exceeds_bottleneck",
        message=(
            f"{_hop_text(hop, users)}: {_mbit(wire)} of frames (goodput {_mbit(goodput)} "
            f"plus {FRAME_OVERHEAD_BYTES} bytes per segment) over the measured span, "
            f"{load:.1%} of the capacity (limit {SPAN_TOLERANCE:.0%}): the emulated link "
            "carried more than it was set to"
        ),
    )


def _intervals_over(
    hop: Hop, users: list[tuple[FlowPlan, TcpFlowResult]], interval: float
) -> tuple[int, float]:
    """(intervals above 1.10 x capacity, the worst load). The load of an interval is
    the link time its frames need over its length. iperf3 counts bytes when it reads
    them, so a receiver that was late to read moves bytes into the next interval,
    never into an earlier one: an interval's excess is first set against the spare
    link time of the interval before it, and only what that cannot explain counts."""
    used, length = _link_time(hop, users, interval)
    over: list[float] = []
    measured_rows = {i for _, f in users for i, row in enumerate(f.intervals) if not row.warmup}
    for i in sorted(measured_rows & used.keys()):
        spare = max(0.0, length[i - 1] - used[i - 1]) if i - 1 in used else 0.0
        if used[i] - spare > INTERVAL_TOLERANCE * length[i]:
            over.append(used[i] / length[i])
    return len(over), max(over, default=0.0)


def _link_time(
    hop: Hop, users: list[tuple[FlowPlan, TcpFlowResult]], interval: float
) -> tuple[dict[int, float], dict[int, float]]:
    """Per interval index: seconds of ``hop``'s capacity the flows' frames took, and
    the interval's length (intervals shorter than half of ``interval`` left out)."""
    used: dict[int, float] = {}
    length: dict[int, float] = {}
    for _, flow in users:
        for i, row in enumerate(flow.intervals):
            seconds = (row.end_s or row.t_s) - row.t_s
            if seconds < interval / 2:
                continue
            used[i] = used.get(i, 0.0) + _load(hop, flow, row.wire_bps or 0.0) * seconds
            length[i] = max(length.get(i, 0.0), seconds)
    return used, length


def _interval_flag(
    hop: Hop, users: list[tuple[FlowPlan, TcpFlowResult]], over: int, worst: float
) -> Flag:
    return Flag(
        code="exceeds_bottleneck",
        message=(
            f"{_hop_text(hop, users)}: {over} report interval(s) carried more than "
            f"{INTERVAL_TOLERANCE:.0%} of the capacity as frames (worst {worst:.1%})"
        ),
    )


def _hop_text(hop: Hop, users: list[tuple[FlowPlan, TcpFlowResult]]) -> str:
    names = ", ".join(plan.label for plan, _ in users)
    rate = _mbit(hop.bw or 0.0)
    return f"flow(s) {names} on link {hop.link} ({hop.src} to {hop.dst}, {rate})"


def _label(flow: TcpFlowResult) -> str:
    return f"{flow.src}->{flow.dst}:{flow.port}"


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:.3f} Mbit/s"


def analyse(
    plans: Sequence[FlowPlan],
    reports: Sequence[tuple[iperf3.Report, iperf3.Report]],
    *,
    warmup: float,
    interval: float,
    duration: float,
    suggestions: Sequence[int | None] | None = None,
    window_applied: bool = False,
    bidirectional: bool = False,
) -> TcpResult:
    """The result of a run from each flow's (client, server) reports."""
    if suggestions is None:
        suggestions = [suggest_for(plan, plans) for plan in plans]
    flows = [
        flow_result(plan, c, s, warmup=warmup, interval=interval, suggestion=w)
        for plan, (c, s), w in zip(plans, reports, suggestions, strict=True)
    ]
    flags = [f for f in map(discrepancy_flag, flows) if f is not None]
    over_flags, over = bottleneck_flags(plans, flows, interval)
    capacities = [c for p in plans if (c := p.path.capacity_bps) is not None]
    offered = [w for w in suggestions if w is not None]
    return TcpResult(
        duration_s=float(duration),
        interval_s=interval,
        warmup_s=warmup,
        flows=flows,
        total_goodput_bps=sum(f.goodput_bps for f in flows),
        jain=jain(f.goodput_bps for f in flows) if len(flows) > 1 else None,
        bottleneck_bps=min(capacities, default=None),
        suggested_window_bytes=min(offered, default=None),
        window_applied=window_applied,
        note=BIDIRECTIONAL_NOTE if bidirectional else None,
        flags=flags + over_flags,
        rtt_s=max(p.rtt_s for p in plans),
        bidirectional=bidirectional,
        frame_overhead_bytes=FRAME_OVERHEAD_BYTES,
        exceeding_intervals=over,
    )
