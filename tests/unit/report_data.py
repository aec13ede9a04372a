"""Synthetic results for the report tests: hand-made result models of every kind,
with verdicts (trusted, degraded, untrusted, none) and run monitor records, and a
set shaped like `fidelnet bench line`'s (two stacks at the same rates)."""

from __future__ import annotations

import random

from hdrh.histogram import HdrHistogram

from fidelnet.fidelity.record import CoreSeries, CpuSeries, MonitorRecord
from fidelnet.fidelity.verdict import Reason, Verdict
from fidelnet.measure.latency import summary_from_histogram
from fidelnet.measure.provenance import Machine, Provenance
from fidelnet.measure.results import (
    Flag,
    FloorSummary,
    Interval,
    LatencySummary,
    ResultFile,
    SelftestResult,
    TcpFlowResult,
    TcpInterval,
    TcpResult,
    Trial,
    UdpFlowResult,
    UdpResult,
    ZeroLossResult,
)

HOSTILE = '<script>alert("x")</script>'

# --- synthetic results --------------------------------------------------------------


def latency(seed: int, median_ns: float = 60_000) -> LatencySummary:
    rng = random.Random(seed)
    h = HdrHistogram(1, 60 * 10**9, 3)
    for _ in range(2000):
        h.record_value(int(rng.lognormvariate(0, 0.3) * median_ns))
    return summary_from_histogram(h)


def provenance(
    command: str = "fidelnet measure udp", topo: str | None = "sha256:ab12"
) -> Provenance:
    return Provenance(
        command=command.split(),
        time_utc="2025-03-01T12:00:00+00:00",
        tools={"pktgen": "0.1.0"},
        backends={"link:tc": 3, "node:host": 2},
        topology_hash=topo,
        machine=Machine(hostname="bench", kernel="6.1.0", cpus=8, cpu_model="EPYC 7551P"),
    )


def udp(rate: float, src: str = "h1", flags: tuple[Flag, ...] = ()) -> UdpResult:
    lat = latency(int(rate))
    got = min(rate, 270e3)
    flows = [
        UdpFlowResult(
            id=i,
            src=src,
            dst="h2",
            dst_addr="10.0.0.2",
            sent=int(rate * 2.5),
            received=int(got * 2.5),
            unique=int(got * 2.5),
            lost=int((rate - got) * 2.5),
            loss_ratio=(rate - got) / rate,
            duplicates=0,
            reordered=0,
            latency=lat,
        )
        for i in range(2)
    ]
    return UdpResult(
        src=src,
        dst="h2",
        size=84,
        pattern="cbr",
        requested_pps=rate,
        achieved_pps=rate,
        rate_reached=True,
        duration_s=5.0,
        sent=int(rate * 5),
        received=int(got * 5),
        unique=int(got * 5),
        lost=int((rate - got) * 5),
        loss_ratio=(rate - got) / rate,
        duplicates=0,
        reordered=3,
        malformed=0,
        socket_drops=17,
        receive_pps=got,
        latency=lat,
        flows=flows,
        intervals=[
            Interval(
                t_s=0.5 * (i + 1),
                packets=int(got / 2),
                frame_bytes=int(got / 2) * 84,
                rate_pps=got,
                rate_bps=got * 84 * 8,
                latency_max_ns=lat.max_ns - i,
            )
            for i in range(10)
        ],
        interval_s=0.5,
        flags=list(flags),
    )


FLOOR = FloorSummary(
    latency_p50_ns=9_000,
    latency_p999_ns=40_000,
    latency_max_ns=120_000,
    max_send_pps=900e3,
    measured_at="2025-03-01T11:00:00+00:00",
    source="selftest.json",
)


def zero_loss() -> ZeroLossResult:
    trials = [
        Trial(
            rate_pps=rate,
            achieved_pps=rate,
            sent=int(rate),
            received=int(rate * (1 - loss)),
            loss_ratio=loss,
            generator_limited=False,
            socket_drops=0,
            latency=latency(i),
        )
        for i, (rate, loss) in enumerate([(500e3, 0.1), (250e3, 0.0), (375e3, 0.002)])
    ]
    return ZeroLossResult(
        src="h1",
        dst="h2",
        size=84,
        pattern="cbr",
        trial_s=1.0,
        resolution_pps=10e3,
        low_pps=0,
        high_pps=500e3,
        pdr_loss=0.005,
        ndr_pps=250e3,
        pdr_pps=375e3,
        trials=trials,
        flags=[Flag(code="search-coarse", message="resolution & range <coarse>")],
    )


def tcp() -> TcpResult:
    flows = [
        TcpFlowResult(
            src=f"h{i}",
            dst="h9",
            port=5201 + i,
            sender_bps=50e6,
            receiver_bps=49e6,
            goodput_bps=48e6,
            retransmits=4,
            intervals=[TcpInterval(t_s=float(t), goodput_bps=48e6) for t in range(6)],
            warmup_s=1.0,
        )
        for i in range(2)
    ]
    return TcpResult(
        duration_s=6,
        interval_s=1,
        warmup_s=1,
        flows=flows,
        total_goodput_bps=96e6,
        jain=0.9998,
        bottleneck_bps=100e6,
        flags=[Flag(code="tcp-window", message="window limits goodput to 80 Mbit/s")],
    )


def selftest() -> SelftestResult:
    return SelftestResult(size=84, runs=[udp(100e3), udp(400e3)], max_send_pps=900e3, floor=FLOOR)


def rf(
    name: str,
    result: object,
    floor: FloorSummary | None = None,
    prov: Provenance | None = None,
    **kw: str,
) -> ResultFile:
    return ResultFile.model_validate(
        {
            "schema": "fidelnet.result/1",
            "kind": result.kind,  # type: ignore[attr-defined]
            "name": name,
            "provenance": prov or provenance(**kw),
            "floor": floor,
            "result": result,
        }
    )


FLAG_RATE = Flag(code="rate-not-reached", message="the sender made 80 % of the rate")
FLAG_HOSTILE = Flag(code="<b>bad</b>", message=f"node {HOSTILE} & friends")


# --- verdicts and monitor records --------------------------------------------------

DROPS = Reason(
    code="socket_drops",
    level="untrusted",
    message="receiver dropped 1,204 packets in its socket",
    value=1204.0,
    threshold=0.0,
    unit="packets",
    source="receiver",
)
SATURATED = Reason(
    code="cpu_saturated",
    level="degraded",
    message="every core busy for 0.4 s of 2.0 s of traffic (20 %; most softirq: core 1 at 71 %)",
    value=20.0,
    threshold=10.0,
    unit="% of window",
    source="monitor.cpu",
)
TIMER = Reason(
    code="timer_late",
    level="degraded",
    message="a sleeping thread woke up 1.2 ms late at p99 (max 3.4 ms; line 500 µs)",
    value=1.2e6,
    threshold=5e5,
    unit="ns",
    source="monitor.timer",
)
NEAR_FLOOR = Reason(
    code="near_floor",
    level="trusted",
    message="the latency is within twice the measurement's floor",
    value=41_000.0,
    threshold=40_000.0,
    unit="ns",
    source="floor",
)
HOSTILE_REASON = Reason(
    code="flag:<b>bad</b>",
    level="degraded",
    message=f"node {HOSTILE} & friends",
    source="<i>measurement</i>",
)


def verdict(*reasons: Reason, monitored: bool = True) -> Verdict:
    return Verdict.of(reasons, monitored=monitored, profile="bench-2cpu")


TRUSTED = verdict(NEAR_FLOOR)
DEGRADED = verdict(TIMER)
UNTRUSTED = verdict(DROPS, SATURATED, HOSTILE_REASON)


def monitor(
    cores: int = 2,
    seconds: float = 3.0,
    step: float = 0.05,
    window: tuple[float, float] = (0.5, 2.5),
    *,
    pressure: bool = True,
    seed: int = 1,
) -> MonitorRecord:
    """A run monitor's record: idle cores that get busy in the traffic window, the
    last core with the forwarding softirqs."""
    rng = random.Random(seed)
    t = [round(step * (k + 1), 3) for k in range(round(seconds / step))]
    series = []
    for c in range(cores):
        shares: dict[str, list[float]] = {k: [] for k in ("user", "system", "softirq", "irq")}
        steal, iowait, idle = [], [], []
        for tk in t:
            on = window[0] <= tk <= window[1]
            row = {
                "user": (20 if on else 3) + rng.uniform(-2, 2),
                "system": (15 if on else 2) + rng.uniform(-2, 2),
                "softirq": (40 if on and c == cores - 1 else 5 if on else 0.5) + rng.uniform(0, 2),
                "irq": 1.0,
            }
            for k, v in row.items():
                shares[k].append(v)
            steal.append(2.0 if on else 0.0)
            iowait.append(0.0)
            idle.append(max(0.0, 100 - sum(row.values()) - steal[-1]))
        series.append(CoreSeries(cpu=c, steal=steal, iowait=iowait, idle=idle, **shares))
    pressure_pct = (
        [(30 if window[0] <= tk <= window[1] else 2) + rng.uniform(0, 5) for tk in t]
        if pressure
        else None
    )
    return MonitorRecord(
        duration_s=seconds,
        window_s=window,
        cpu=CpuSeries(interval_s=step, t_s=t, cores=series, pressure_pct=pressure_pct),
        overhead_cpu_s=0.05,
        overhead_pct_core=1.5,
    )


def judged(result: object, v: Verdict | None, mon: MonitorRecord | None = None) -> object:
    return result.model_copy(update={"verdict": v, "monitor": mon})  # type: ignore[attr-defined]


def everything(floor: FloorSummary | None = FLOOR) -> list[tuple[str, ResultFile]]:
    """One result of each kind: udp-100k trusted (monitored), udp-700k untrusted
    (monitored), the search degraded, the TCP run and the self-test not judged (files
    written before verdicts existed)."""
    fast = udp(700e3, src=HOSTILE, flags=(FLAG_HOSTILE,))
    return [
        (
            "udp-100k",
            rf("udp-100k", judged(udp(100e3, flags=(FLAG_RATE,)), TRUSTED, monitor()), floor),
        ),
        ("udp-700k", rf("udp-700k", judged(fast, UNTRUSTED, monitor(seed=2)), floor)),
        ("search", rf("search", judged(zero_loss(), DEGRADED), floor)),
        ("iperf", rf("iperf", tcp(), floor, command="fidelnet measure tcp --to h9")),
        ("selftest", rf("selftest", selftest())),
    ]


CHECKS = (
    "Checks: line",
    ["check", "status", "verdict", "measured", "expected", "note"],
    [
        ["reach", "PASSED", "—", "3/3", "all", ""],
        ["no-loss", "PASSED", "trusted", "0 %", "<= 1 %", ""],
        ["p99", "INCONCLUSIVE", "untrusted: receiver dropped 17 packets", "143 µs", "<= 1 ms", ""],
    ],
)
"""A scenario's checks table, as `fidelnet test` passes it."""


def stack_provenance(stack: str) -> Provenance:
    p = provenance("fidelnet bench line")
    if stack == "mininet":
        p = p.model_copy(
            update={
                "tools": {"pktgen": "0.1.0", "mininet": "2.3.0"},
                "backends": {"link:veth": 8, "node:mininet": 9},
                "topology_hash": None,
            }
        )
    return p


BENCH_VERDICTS = {
    ("fidelnet", 50e3): TRUSTED,
    ("mininet", 50e3): verdict(SATURATED, TIMER),
    ("fidelnet", 300e3): verdict(SATURATED),
    ("mininet", 300e3): verdict(DROPS, SATURATED),
}


def bench_line() -> list[tuple[str, ResultFile]]:
    """What `fidelnet bench line` writes, in small: fidelnet and Mininet at 50 and
    300 kpps (CBR) and a zero-loss search each; Mininet's latency higher, its search
    not judged."""
    out = []
    for rate in (50e3, 300e3):
        for stack in ("fidelnet", "mininet"):
            r = udp(rate)
            if stack == "mininet":
                r = r.model_copy(update={"latency": latency(int(rate) + 7, median_ns=95_000)})
            r = judged(r, BENCH_VERDICTS[(stack, rate)], monitor(seed=int(rate) + len(stack)))
            name = f"{stack}-cbr-{rate / 1000:05.0f}k"
            out.append((name, rf(name, r, FLOOR, prov=stack_provenance(stack))))
    for stack in ("fidelnet", "mininet"):
        z = judged(zero_loss(), DEGRADED if stack == "fidelnet" else None)
        name = f"{stack}-zero-loss-cbr"
        out.append((name, rf(name, z, FLOOR, prov=stack_provenance(stack))))
    return out


BENCH_TABLES = [
    (
        "cbr: 64-byte frames through the line (* generator short of the rate)",
        [
            "offered kpps",
            "fidelnet loss %",
            "fidelnet p99.9 µs",
            "mininet loss %",
            "mininet p99.9 µs",
        ],
        [["50", "0.000", "81.2", "0.000", "95.0"], ["300", "10.0", "120.4", "10.0", "250.1"]],
    ),
    (
        "Summary",
        ["figure", "fidelnet", "mininet", "ratio fidelnet/mininet"],
        [
            ["cbr NDR kpps", "250.0", "250.0", "1.00"],
            ["cbr PDR 0.5% kpps", "375.0", "375.0", "1.00"],
        ],
    ),
]
