"""Calibration steps that build a network of their own: CPU shares, RTT under load,
rate accuracy per link backend, and forwarding capacity of chains.

Each builds its network with :class:`fidelnet.Network` (recorded and torn down like
any run) and returns a profile entry plus the raw samples the page plots.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from dataclasses import dataclass

from fidelnet.calibrate.host import BUSY, busy, percentile
from fidelnet.fidelity.profile import (
    CpuShare,
    EngineRelease,
    Forwarding,
    RateAccuracy,
    RttUnderLoad,
)
from fidelnet.kernel import procfs
from fidelnet.measure import pktgen
from fidelnet.measure.packets import search, udp, zero_loss_rate
from fidelnet.measure.results import UdpResult
from fidelnet.network import Network
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec, line

__all__ = [
    "RATE_FRAME",
    "ShareSamples",
    "choose_realtime",
    "choose_spin",
    "cpu_shares",
    "engine_release",
    "forwarding",
    "parallel_forwarding",
    "rate_accuracy",
    "rtt_under_load",
]

RATE_FRAME = 1518
"""Frame size (with FCS) of the rate-accuracy traffic: full-size Ethernet frames."""

COMMAND = "fidelnet calibrate"


@dataclass
class ShareSamples:
    share_pct: float
    per_second_pct: list[list[float]]
    """Per process, its CPU (% of one core) in each second."""


def _pair(params: LinkParams | None = None, backend: str | None = None) -> TopologySpec:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.253.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.253.0.2/24"))
    link = LinkSpec("h1", "h2", params=params or LinkParams())
    if backend is not None:
        link.backend = backend  # type: ignore[assignment]
    spec.add_link(link)
    return spec


def cpu_shares(
    processes: int, total: float = 0.5, seconds: int = 3
) -> tuple[CpuShare, ShareSamples]:
    """``processes`` busy processes, each in its own CPU-limited node with an equal
    share of ``total`` of the machine (Mininet's ``cpu=`` semantics): what each got,
    per second (Mininet-HiFi Table 2)."""
    cores = os.cpu_count() or 1
    cpu = total / processes
    share_pct = 100 * cpu * cores
    spec = TopologySpec()
    for i in range(processes):
        spec.add_node(NodeSpec(f"c{i + 1}", cpu=cpu))
    with Network(spec, command=COMMAND) as net:
        procs = [
            net[f"c{i + 1}"].popen(BUSY, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for i in range(processes)
        ]
        try:
            time.sleep(0.5)  # let every period settle
            series: list[list[float]] = [[] for _ in procs]
            last = [procfs.process_cpu_s(p.pid) or 0.0 for p in procs]
            t_last = time.monotonic()
            for _ in range(seconds):
                time.sleep(1.0)
                now = [procfs.process_cpu_s(p.pid) or 0.0 for p in procs]
                t_now = time.monotonic()
                for k, (a, b) in enumerate(zip(last, now, strict=True)):
                    series[k].append(100 * (b - a) / (t_now - t_last))
                last, t_last = now, t_now
        finally:
            for p in procs:
                p.kill()
            for p in procs:
                p.wait()
    flat = [v for s in series for v in s]
    summary = CpuShare(
        processes=processes,
        share_pct=round(share_pct, 2),
        mean_pct=round(sum(flat) / len(flat), 2) if flat else 0.0,
        max_error_pct=round(max((abs(v - share_pct) for v in flat), default=0.0), 2),
    )
    return summary, ShareSamples(share_pct, series)


_RTT = re.compile(r"time=([\d.]+) ms")


def rtt_under_load(
    count: int = 300, interval_s: float = 0.005
) -> tuple[list[RttUnderLoad], dict[str, list[int]]]:
    """Round-trip times of ``count`` pings over a bare veth pair, idle and with one
    busy process per core on the host (Mininet-HiFi Fig. 5)."""
    out: list[RttUnderLoad] = []
    raw: dict[str, list[int]] = {}
    with Network(_pair(), command=COMMAND) as net:
        argv = ["ping", "-n", "-q", "-c", "3", "-i", "0.2", "10.253.0.2"]
        net["h1"].pexec(argv, timeout=10)  # ARP, caches
        for load in ("idle", "busy"):
            with busy((os.cpu_count() or 1) if load == "busy" else 0):
                text, _err, _rc = net["h1"].pexec(
                    ["ping", "-n", "-c", str(count), "-i", f"{interval_s:g}", "10.253.0.2"],
                    timeout=count * interval_s + 30,
                )
            rtts = [round(float(v) * 1e6) for v in _RTT.findall(text)]
            raw[load] = rtts
            out.append(
                RttUnderLoad(
                    load=load,
                    count=len(rtts),
                    p50_ns=percentile(rtts, 50),
                    p99_ns=percentile(rtts, 99),
                    max_ns=max(rtts, default=0),
                )
            )
    return out, raw


def rate_accuracy(
    backend: str, rate_bps: float, seconds: float = 2.0
) -> tuple[RateAccuracy, list[float]]:
    """A ``backend`` link shaped to ``rate_bps``, offered 110 % of it in full-size
    frames: the received rate in each 10 ms window over the configured rate
    (Mininet-HiFi Fig. 2), counting what the shapers charge (the frame without its
    FCS). The first 0.3 s (the queue filling) and the last, partial window are left
    out. A window holds whole frames: at 10 Mbit/s about 8.2, so one frame more or
    less is ±12 %, a floor on the spread, not an error of the link."""
    pps = 1.1 * rate_bps / (RATE_FRAME * 8)
    with Network(_pair(LinkParams(bw=rate_bps), backend), command=COMMAND) as net:
        r = udp(
            net, "h1", "h2", pps, size=RATE_FRAME, duration=seconds, interval_ms=10, monitor=False
        )
    windows = [iv for iv in r.intervals if iv.t_s >= 0.3][:-1]
    ratios = [(iv.frame_bytes - 4 * iv.packets) * 8 / r.interval_s / rate_bps for iv in windows]
    ordered = sorted(ratios)
    n = len(ordered)
    summary = RateAccuracy(
        backend=backend,
        rate_bps=rate_bps,
        windows=n,
        mean_ratio=round(sum(ordered) / n, 5) if n else 0.0,
        p1_ratio=round(ordered[max(0, int(0.01 * n) - 1)], 5) if n else 0.0,
        p99_ratio=round(ordered[min(n - 1, int(0.99 * n))], 5) if n else 0.0,
    )
    return summary, ratios


def forwarding(backend: str, links: int, trial_s: float = 0.5) -> Forwarding:
    """The highest rate of 64-byte frames a routed chain of ``links`` links of
    ``backend`` (``tc``: bare veth; ``engine``) delivers without loss, by binary
    search (Mininet-HiFi Fig. 3/4's breaking point), with every trial's offered and
    delivered rate."""
    spec = line(links + 1)
    for link in spec.links:
        link.backend = backend  # type: ignore[assignment]
    with Network(spec, command=COMMAND) as net:
        z = zero_loss_rate(
            net,
            "h1",
            f"h{links + 1}",
            low_pps=5_000.0,
            high_pps=600_000.0,
            trial_s=trial_s,
            resolution_pps=5_000.0,
            monitor=False,
        )
    trials = sorted(z.trials, key=lambda t: t.rate_pps)
    return Forwarding(
        backend=backend,
        layout="chain",
        links=links,
        frame_bytes=64,
        offered_pps=[round(t.rate_pps) for t in trials],
        delivered_pps=[round(t.received / trial_s) for t in trials],
        breaking_pps=round(z.ndr_pps),
    )


def _parallel_pairs(links: int, backend: str) -> TopologySpec:
    spec = TopologySpec()
    for i in range(1, links + 1):
        spec.add_node(NodeSpec(f"a{i}", ip=f"10.252.{i}.1/24"))
        spec.add_node(NodeSpec(f"b{i}", ip=f"10.252.{i}.2/24"))
        link = LinkSpec(f"a{i}", f"b{i}")
        link.backend = backend  # type: ignore[assignment]
        spec.add_link(link)
    return spec


def _together(results: list[UdpResult], offered: float) -> UdpResult:
    """``results`` of senders run at once, as one trial of the aggregate rate."""
    sent = sum(r.sent for r in results)
    unique = sum(r.unique for r in results)
    return results[0].model_copy(
        update={
            "requested_pps": offered,
            "achieved_pps": sum(r.achieved_pps for r in results),
            "rate_reached": all(r.rate_reached for r in results),
            "sent": sent,
            "unique": unique,
            "received": sum(r.received for r in results),
            "lost": sent - unique,
            "loss_ratio": (sent - unique) / sent if sent else 1.0,
            "socket_drops": sum(r.socket_drops for r in results),
        }
    )


def parallel_forwarding(backend: str, links: int, trial_s: float = 0.5) -> Forwarding:
    """The highest aggregate rate of 64-byte frames ``links`` separate pairs, each
    joined by one ``backend`` link and sending at the same time, deliver without
    loss (Mininet-HiFi's parallel layout), by the same binary search as the chains,
    each trial's rate split evenly over the senders."""
    with Network(_parallel_pairs(links, backend), command=COMMAND) as net:

        def trial(rate: float) -> UdpResult:
            each = pktgen.TrafficSpec(rate / links, 64, trial_s)
            got: list[UdpResult | BaseException] = [RuntimeError("not run")] * links

            def one(i: int) -> None:
                a, b = net[f"a{i + 1}"], net[f"b{i + 1}"]
                try:
                    got[i] = pktgen.run(a, b, f"10.252.{i + 1}.2", each)
                except BaseException as exc:  # re-raised in the caller's thread
                    got[i] = exc

            threads = [threading.Thread(target=one, args=(i,)) for i in range(links)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            done = []
            for g in got:
                if isinstance(g, BaseException):
                    raise g
                done.append(g)
            return _together(done, rate)

        ndr, _pdr, trials = search(
            trial,
            low_pps=5_000.0,
            high_pps=600_000.0,
            resolution_pps=5_000.0,
            pdr_loss=0.005,
            max_trials=20,
        )
    ordered = sorted(trials, key=lambda t: t.rate_pps)
    return Forwarding(
        backend=backend,
        layout="parallel",
        links=links,
        frame_bytes=64,
        offered_pps=[round(t.rate_pps) for t in ordered],
        delivered_pps=[round(t.received / trial_s) for t in ordered],
        breaking_pps=round(ndr),
    )


def engine_release(
    priority: int, spin_us: int = 0, pps: float = 5_000.0, seconds: float = 1.5
) -> EngineRelease:
    """How late the engine releases ``pps`` 64-byte frames on a 10 ms link when it
    runs at real-time ``priority`` (0: the normal policy) and spins up to ``spin_us``
    before each departure, from its own lateness histogram."""
    from fidelnet.links.engine import SPIN_BUDGET_PCT

    spec = _pair(LinkParams(delay=0.010), "engine")
    args = ["--realtime-priority", str(priority), "--spin-us", str(spin_us)]
    args += ["--spin-budget", str(SPIN_BUDGET_PCT)]
    with Network(spec, command=COMMAND, engine_args=args) as net:
        net["h1"].pexec(["ping", "-n", "-q", "-c", "1", "-W", "1", "10.253.0.2"], timeout=10)
        udp(net, "h1", "h2", pps, duration=seconds, monitor=False)
        late = net.links[0].stats()["ab"]["lateness"]
    return EngineRelease(
        realtime_priority=priority,
        spin_us=spin_us,
        packets=int(late.get("count", 0)),
        p50_ns=int(late.get("p50_ns", 0)),
        p999_ns=int(late.get("p999_ns", 0)),
        max_ns=int(late.get("max_ns", 0)),
    )


def _median(runs: list[EngineRelease], priority: int, spin: int, q: str) -> float | None:
    xs = sorted(
        getattr(r, q) for r in runs if r.realtime_priority == priority and r.spin_us == spin
    )
    return float(xs[len(xs) // 2]) if xs else None


def choose_spin(runs: list[EngineRelease], priority: int, spin_us: int) -> int:
    """``spin_us`` when, at ``priority``, spinning at least halved the median p50
    lateness without raising the median p99.9 by more than a quarter; else 0."""
    with_p50 = _median(runs, priority, spin_us, "p50_ns")
    without_p50 = _median(runs, priority, 0, "p50_ns")
    with_tail = _median(runs, priority, spin_us, "p999_ns")
    without_tail = _median(runs, priority, 0, "p999_ns")
    if None in (with_p50, without_p50, with_tail, without_tail):
        return spin_us
    assert with_p50 is not None and without_p50 is not None
    assert with_tail is not None and without_tail is not None
    helps = with_p50 <= 0.5 * without_p50 and with_tail <= 1.25 * without_tail
    return spin_us if helps else 0


def choose_realtime(runs: list[EngineRelease], priority: int) -> int:
    """``priority`` when its runs' median p99.9 lateness (without spinning) is at most
    80 % of the normal policy's, else 0: real-time only where it measurably helps."""

    rt, plain = _median(runs, priority, 0, "p999_ns"), _median(runs, 0, 0, "p999_ns")
    if rt is None or plain is None:
        return priority
    return priority if rt <= 0.8 * plain else 0
