"""The Mininet-HiFi validation suite (Handigol et al., CoNEXT 2012, sections 2.2 and
2.3), run on fidelnet with a verdict on each test.

TCP tests, every link 100 Mbit/s (tc htb: rate only), one iperf3 flow per pair; what
a host sends queues in a fair queue (``queue: fq``), as on a modern Linux host
(systemd's default qdisc is fq_codel), what a switch sends in one FIFO:

===============  ==============================================  ===================
two-way          h1 <-> h2 through s1, one flow each way          each ~100 Mbit/s
fork-out         h1 -> h2 and h1 -> h3 through s1                 share h1's link
single-switch    h1 -> h2 and h3 -> h4 through s1                 each ~100 Mbit/s
dumbbell         h1 -> h3, h2 -> h4 across a 100 Mbit/s s1-s2     share the bottleneck
===============  ==============================================  ===================

UDP dumbbell (2.3): four constant-rate UDP senders of 5 Mbit/s each (fidelnet's own
generator, 1500-byte frames) through a 10 Mbit/s engine bottleneck with a 100-packet
queue, once with ``droptail`` (periodic flows stay in phase and some starve) and once
with ``hifi`` (random drop). Each test keeps every flow's rate per second, Jain's
index per second (its spread is the CDF) and the verdict of the run.

Why the hosts' fair queue: with one FIFO at h1 (Mininet's model), the fork-out test
depends on which flow starts first. TCP Small Queues lets each socket keep only about
a millisecond of its own pacing rate in the qdisc, so a flow that starts while the
other already fills the FIFO gets a few packets in per turn and can stay at 4-6 Mbit/s
of its 50 for many seconds (measured on kernel 6.18 with cubic, reno and bbr alike,
second flow started 0.3-1 s after the first). A 2012 kernel had no TSQ, and a
host today fair-queues its own flows, so neither starves.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from fidelnet.fidelity.verdict import Level, Verdict, worst
from fidelnet.measure import pktgen
from fidelnet.measure.results import UdpResult
from fidelnet.measure.tcp import tcp
from fidelnet.measure.verdicts import judged, watch
from fidelnet.network import Network
from fidelnet.topology import LinkParams, TopologySpec, dumbbell, single

__all__ = ["Flow", "HifiOutcome", "jain", "run_suite", "tcp_test", "udp_dumbbell"]

TCP_RATE = 100e6
UDP_BOTTLENECK = 10e6
UDP_SENDERS = 4
UDP_OFFERED_BPS = 5e6
UDP_FRAME = 1518
COMMAND = "fidelnet bench hifi"
WHOLE_INTERVAL_S = 0.9  # of iperf3's 1 s intervals


def jain(xs: list[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    total = sum(xs)
    squares = sum(x * x for x in xs)
    return total * total / (len(xs) * squares) if squares > 0 else 1.0


@dataclass
class Flow:
    label: str
    per_second_bps: list[float]

    @property
    def mean_bps(self) -> float:
        return statistics.fmean(self.per_second_bps) if self.per_second_bps else 0.0


@dataclass
class HifiOutcome:
    """One test: its flows' rates per second, Jain's index per second and the
    verdicts of its measurements."""

    name: str
    transport: str
    queue: str
    fair_share_bps: float
    flows: list[Flow]
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def jain_per_second(self) -> list[float]:
        n = min((len(f.per_second_bps) for f in self.flows), default=0)
        return [jain([f.per_second_bps[i] for f in self.flows]) for i in range(n)]

    @property
    def jain_overall(self) -> float:
        return jain([f.mean_bps for f in self.flows])

    @property
    def level(self) -> Level:
        return worst(v.level for v in self.verdicts) if self.verdicts else "degraded"

    @property
    def reasons(self) -> str:
        problems = [r.message for v in self.verdicts for r in v.problems()]
        if not self.verdicts:
            return "not monitored"
        return "; ".join(dict.fromkeys(problems)) if problems else ""


_TCP_TESTS: dict[str, tuple[Callable[[], TopologySpec], list[tuple[str, str]], bool, float]] = {
    # name: (topology, pairs, bidirectional, fair share)
    "two-way": (lambda: single(2), [("h1", "h2")], True, TCP_RATE),
    "fork-out": (lambda: single(3), [("h1", "h2"), ("h1", "h3")], False, TCP_RATE / 2),
    "single-switch": (lambda: single(4), [("h1", "h2"), ("h3", "h4")], False, TCP_RATE),
    "dumbbell": (lambda: dumbbell(2), [("h1", "h3"), ("h2", "h4")], False, TCP_RATE / 2),
}

TCP_TESTS = tuple(_TCP_TESTS)


def tcp_test(name: str, seconds: int = 10) -> HifiOutcome:
    """One of the TCP tests (:data:`TCP_TESTS`), every link at 100 Mbit/s."""
    build, pairs, both, share = _TCP_TESTS[name]
    spec = build()
    for link in spec.links:
        link.params = LinkParams(bw=TCP_RATE)
        if spec.nodes[link.a].kind == "host":
            link.params_ab = LinkParams(queue="fq")
        if spec.nodes[link.b].kind == "host":
            link.params_ba = LinkParams(queue="fq")
    with Network(spec, command=COMMAND) as net:
        r = tcp(net, pairs, duration=seconds, interval=1.0, bidirectional=both)
    # Whole seconds only: iperf3's last interval can be a few ms long, and a burst the
    # receiver reads in it reads as a rate above the link's (161 Mbit/s was seen).
    flows = [
        Flow(
            f"{f.src} -> {f.dst}",
            [
                iv.goodput_bps
                for iv in f.intervals
                if not iv.warmup and (iv.end_s or 0.0) - iv.t_s >= WHOLE_INTERVAL_S
            ],
        )
        for f in r.flows
    ]
    return HifiOutcome(name, "tcp", "fq", share, flows, [r.verdict] if r.verdict else [])


def udp_dumbbell(queue: str, seconds: int = 10) -> HifiOutcome:
    """Four 5 Mbit/s UDP senders through a 10 Mbit/s engine bottleneck whose queue
    (100 packets) is ``queue`` (``droptail`` or ``hifi``)."""
    bottleneck = LinkParams(bw=UDP_BOTTLENECK, max_queue_size=100, queue=queue)  # type: ignore[arg-type]
    spec = dumbbell(UDP_SENDERS, bottleneck)
    spec.links[0].backend = "engine"
    pps = UDP_OFFERED_BPS / (UDP_FRAME * 8)
    results: list[UdpResult | BaseException] = [RuntimeError("not run")] * UDP_SENDERS
    with Network(spec, command=COMMAND) as net:
        pairs = [(f"h{k}", f"h{k + UDP_SENDERS}") for k in range(1, UDP_SENDERS + 1)]
        # Warm ARP and the bridges' tables, so no flow starts late.
        for a, b in pairs:
            net.ping_pairs([net[a], net[b]], timeout=1)

        def one(k: int, src: str, dst: str) -> None:
            addr = net[dst].ip
            assert addr is not None
            spec_k = pktgen.TrafficSpec(pps, UDP_FRAME, float(seconds), seed=k)
            try:
                results[k] = pktgen.run(net[src], net[dst], addr, spec_k, interval_ms=1000)
            except BaseException as exc:  # re-raised below, in the caller's thread
                results[k] = exc

        nodes = [n for pair in pairs for n in pair] + ["s1", "s2"]
        with watch(net, nodes) as mon:
            assert mon is not None
            mon.begin()
            threads = [
                threading.Thread(target=one, args=(k, a, b), name=f"hifi-udp-{k}")
                for k, (a, b) in enumerate(pairs)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            mon.end()
        record = mon.record()
    flows, verdicts = [], []
    for (src, dst), raw in zip(pairs, results, strict=True):
        if isinstance(raw, BaseException):
            raise raw
        got = judged(raw, record, capacity_limited=True)
        if got.verdict is not None:
            verdicts.append(got.verdict)
        # Whole seconds only: the last interval is partial.
        per_s = [iv.frame_bytes * 8.0 for iv in got.intervals][: seconds - 1]
        flows.append(Flow(f"{src} -> {dst}", per_s))
    return HifiOutcome("udp-dumbbell", "udp", queue, UDP_BOTTLENECK / UDP_SENDERS, flows, verdicts)


def run_suite(
    *,
    tcp_seconds: int = 10,
    udp_seconds: int = 10,
    progress: Callable[[str], None] | None = None,
) -> list[HifiOutcome]:
    """Every test, one after the other (never two networks at once)."""
    say = progress or (lambda _m: None)
    out = []
    for name in TCP_TESTS:
        say(f"TCP {name}, {tcp_seconds} s")
        out.append(tcp_test(name, tcp_seconds))
    for queue in ("droptail", "hifi"):
        say(f"UDP dumbbell, queue {queue}, {udp_seconds} s")
        out.append(udp_dumbbell(queue, udp_seconds))
    return out
