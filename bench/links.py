"""Link fidelity: how closely engine links deliver the rate, delay, jitter, loss,
fairness and packet rate they are configured for, measured on the receiving side.

A benchmark, not a test: it asserts nothing. For each target it prints the
configured value, the measured one, the error, pass or fail against the goal of
the link-engine issue, and a reference measured in the same run on the same
machine where one exists (htb, a plain veth pair, the engine with nothing to
do). Run it as root with the project's virtualenv::

    make bench-links                       # installs what is missing, then this
    .venv/bin/python bench/links.py        # every target, about 5 minutes
    .venv/bin/python bench/links.py --quick --only delay,loss

Targets (``--only`` takes a comma-separated list of them):

- ``rate``: TCP and UDP through one link at 10 Mb/s, 100 Mb/s and 1 Gb/s, engine
  and htb (backend ``tc``) side by side; the delivered rate per 10 ms window
  from a receiver-side capture (tcpdump), its deviation from the configured rate.
- ``delay``: RTT minus twice the configured delay (1, 10, 50 ms) under 10 Mb/s
  of UDP load, with an unshaped veth pair and an engine link of delay 0 as the
  references, and the engine's own lateness percentiles.
- ``jitter``: one-way delay quantiles for 10 ms +- 2 ms, uniform and normal,
  with probes spaced wider and narrower than the jitter; reordering.
- ``loss``: random loss of 1 % and 10 % against the 99 % binomial interval;
  Gilbert-Elliott burst lengths against 1/r.
- ``fairness``: Jain's index of four UDP flows through a 10 Mb/s dumbbell
  bottleneck, HiFi queue and drop-tail.
- ``capacity``: the highest zero-loss rate of 64-byte frames through one engine
  link, a chain of six, and a plain veth pair (the generator's ceiling).

Raw figures and a provenance header go to ``bench/results/links-<UTC
timestamp>.json``; bench/README.md explains every measure.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import itertools
import json
import math
import os
import platform
import random
import resource
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fidelnet import Network
from fidelnet.nodes.node import Node
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.builders import dumbbell
from fidelnet.topology.spec import GilbertElliott

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import _benchlib as bl  # noqa: E402
import _pcap  # noqa: E402

TARGETS = ("rate", "delay", "jitter", "loss", "fairness", "capacity")
PROBE = str(HERE / "_probe.py")
MBIT = 1e6
US = 1e3  # ns per microsecond


# -- small statistics -----------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) of ``values``, interpolating linearly between order
    statistics (numpy's default)."""
    s = sorted(values)
    if not s:
        return math.nan
    pos = q * (len(s) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def binomial_interval(n: int, p: float, confidence: float = 0.99) -> tuple[int, int]:
    """The central ``confidence`` interval of a Binomial(n, p) count, exactly (the
    smallest k whose CDF reaches alpha/2, and the smallest whose CDF reaches
    1 - alpha/2)."""
    alpha = 1 - confidence
    if p <= 0:
        return 0, 0
    if p >= 1:
        return n, n
    log_p, log_q = math.log(p), math.log1p(-p)
    base = math.lgamma(n + 1)
    cdf = 0.0
    lo = hi = None
    for k in range(n + 1):
        cdf += math.exp(
            base - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
        )
        if lo is None and cdf >= alpha / 2:
            lo = k
        if cdf >= 1 - alpha / 2:
            hi = k
            break
    return (lo or 0), (hi if hi is not None else n)


def jain(xs: Sequence[float]) -> float:
    """Jain's fairness index: 1 when all equal, 1/n when one takes everything."""
    total = sum(xs)
    squares = sum(x * x for x in xs)
    return total * total / (len(xs) * squares) if squares else math.nan


def fmt_rate(bps: float) -> str:
    if bps >= 1e9:
        return f"{bps / 1e9:g} Gb/s"
    return f"{bps / 1e6:g} Mb/s"


def fmt_pct(x: float, digits: int = 2) -> str:
    return "-" if math.isnan(x) else f"{x:+.{digits}f}%"


def verdict(ok: bool | None) -> str:
    return {True: "PASS", False: "FAIL", None: "-"}[ok]


# -- machine load ---------------------------------------------------------------------

HZ = os.sysconf("SC_CLK_TCK")


@dataclass
class CpuMark:
    wall: float
    busy: int  # jiffies in user, nice, system over all CPUs
    steal: int
    own: float  # CPU seconds of this process and its reaped children


def cpu_mark() -> CpuMark:
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, _irq, _softirq, steal = fields[:8]
    own = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        ru = resource.getrusage(who)
        own += ru.ru_utime + ru.ru_stime
    return CpuMark(time.monotonic(), user + nice + system, steal, own)


def cpu_since(mark: CpuMark, also_ours: float = 0.0) -> dict[str, float]:
    """What the rest of the machine used since ``mark``, in cores on average: the
    user and system time of all CPUs minus this process and its children (the
    probes, iperf3, tcpdump and linkd are all children and are reaped by then);
    and the time the hypervisor stole. Packet processing in softirq is left out of
    both. Kernel threads and other people's jobs make up ``other_cores``.
    ``also_ours``: CPU seconds of our processes still running (linkd), to leave out."""
    now = cpu_mark()
    wall = max(1e-9, now.wall - mark.wall)
    other = ((now.busy - mark.busy) / HZ - (now.own - mark.own) - also_ours) / wall
    return {
        "wall_s": wall,
        "other_cores": max(0.0, other),
        "steal_cores": (now.steal - mark.steal) / HZ / wall,
        "loadavg_end": os.getloadavg()[0],
    }


def proc_cpu_s(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has used; NaN if unknown."""
    if pid is None:
        return math.nan
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            rest = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(rest[11]) + int(rest[12])) / HZ


# -- networks and processes -----------------------------------------------------------


@dataclass
class Pair:
    """Two hosts ``a<i>`` (10.0.<i>.1) and ``b<i>`` (10.0.<i>.2) joined by one link."""

    label: str
    backend: str  # "engine", "tc", or "veth" (nothing asked of the link)
    ab: LinkParams
    ba: LinkParams


def pairs_spec(pairs: Sequence[Pair], seed: int) -> TopologySpec:
    spec = TopologySpec(seed=seed, auto_static_arp=True)
    for i, p in enumerate(pairs, 1):
        spec.add_node(NodeSpec(f"a{i}", ip=f"10.0.{i}.1/24"))
        spec.add_node(NodeSpec(f"b{i}", ip=f"10.0.{i}.2/24"))
        link = LinkSpec(f"a{i}", f"b{i}", params_ab=p.ab, params_ba=p.ba)
        link.backend = "auto" if p.backend == "veth" else p.backend  # type: ignore[assignment]
        spec.add_link(link)
    return spec


def start(node: Node, argv: Sequence[str]) -> subprocess.Popen[str]:
    return node.popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_stderr(proc: subprocess.Popen[str], needle: str, timeout: float = 10.0) -> str:
    """Read ``proc``'s stderr until a line holds ``needle``; return what was read."""
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([proc.stderr], [], [], left)[0]:
            raise RuntimeError(f"{proc.args!r}: no {needle!r} on stderr within {timeout} s")
        line = proc.stderr.readline()
        if not line:
            raise RuntimeError(f"{proc.args!r} exited before {needle!r}: {''.join(seen)}")
        seen.append(line)
        if needle in line:
            return "".join(seen)


def finish(proc: subprocess.Popen[str], timeout: float = 10.0) -> tuple[str, str]:
    """Wait for ``proc`` (ending it, by its pid, if it overstays) and return its
    output."""
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=3)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    return out or "", err or ""


def wait_listening(node: Node, port: int, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out, _, _ = node.pexec(["ss", "-Hltn", "sport", "=", f":{port}"])
        if out.strip():
            return
        time.sleep(0.02)
    raise RuntimeError(f"{node.name}: nothing listens on TCP port {port} after {timeout} s")


def iperf_server(node: Node, port: int = 5201) -> subprocess.Popen[str]:
    proc = start(node, ["iperf3", "-s", "-1", "-p", str(port), "-J"])
    wait_listening(node, port)
    return proc


def iperf_json(out: str, err: str, what: str) -> dict[str, Any]:
    try:
        result: dict[str, Any] = json.loads(out)
    except ValueError:
        raise RuntimeError(f"{what}: iperf3 gave no JSON: {(out + err)[-400:]}") from None
    if "error" in result:
        raise RuntimeError(f"{what}: iperf3: {result['error']}")
    return result


def probe_json(out: str, err: str, what: str) -> dict[str, Any]:
    line = out.strip().splitlines()[-1] if out.strip() else ""
    try:
        result: dict[str, Any] = json.loads(line)
    except ValueError:
        raise RuntimeError(f"{what}: the probe gave no result: {(out + err)[-400:]}") from None
    return result


def own_stats(stats: dict[str, Any]) -> dict[str, Any]:
    """A link's stats without the encoded histograms (too bulky for the JSON)."""
    out = {}
    for k, v in stats.items():
        if isinstance(v, dict):
            out[k] = {kk: vv for kk, vv in v.items() if kk != "lateness_hdr"}
        else:
            out[k] = v
    return out


@dataclass
class Ctx:
    args: argparse.Namespace
    tmp: Path
    python: str


# -- tables ---------------------------------------------------------------------------


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    widths = [len(h) for h in headers]
    for r in rows:
        widths = [max(w, len(c)) for w, c in zip(widths, r, strict=True)]
    print(f"\n{title}")
    line = "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


# -- rate -----------------------------------------------------------------------------

RATES = (10e6, 100e6, 1e9)
RATE_GOAL = 1.0  # percent, |deviation| at the 95th percentile of 10 ms windows
WINDOW_NS = 10_000_000
WARMUP_NS = 1_000_000_000
DATA_FRAME = 1000  # bytes: frames at least this long are the bulk transfer's


def capture(node: Node, ifname: str, path: Path) -> subprocess.Popen[str]:
    """tcpdump of what arrives at ``ifname``: 128 bytes per frame (the headers),
    nanosecond timestamps, written as root into our private directory."""
    proc = start(
        node,
        [
            "tcpdump",
            "-i",
            ifname,
            "-Q",
            "in",
            "-n",
            "-s",
            "128",
            "-B",
            "32768",
            "--time-stamp-precision=nano",
            "-Z",
            "root",
            "-w",
            str(path),
        ],
    )
    wait_stderr(proc, "listening on")
    return proc


def stop_capture(proc: subprocess.Popen[str]) -> int:
    """Stop tcpdump (SIGINT, by its pid: it flushes the file) and return the frames
    the kernel dropped before tcpdump read them."""
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    _, err = finish(proc)
    for line in err.splitlines():
        if "dropped by kernel" in line:
            return int(line.split()[0])
    return -1


def measure_rate(
    ctx: Ctx, net: Network, i: int, rate: float, proto: str, seconds: int
) -> dict[str, Any]:
    a, b = net[f"a{i}"], net[f"b{i}"]
    link = net.links[i - 1]
    pcap = ctx.tmp / f"rate-{i}-{proto}-{int(rate)}.pcap"
    tcpdump = capture(b, f"b{i}-eth0", pcap)
    server = iperf_server(b)
    argv = ["iperf3", "-c", f"10.0.{i}.2", "-t", str(seconds), "-J"]
    if proto == "udp":
        # offered 10 % above the rate (payload bits; frames are 1514 bytes)
        argv += ["-u", "-l", "1472", "-b", str(int(rate * 1.1))]
    linkd = net.engine.pid if net.engine is not None and link.backend == "engine" else None
    mark, cpu0 = cpu_mark(), proc_cpu_s(linkd)
    try:
        client = start(a, argv)
        out, err = finish(client, seconds + 30)
        finish(server, 5)
    finally:
        dropped = stop_capture(tcpdump)
    cpu1 = proc_cpu_s(linkd)
    load = cpu_since(mark, cpu1 - cpu0 if linkd else 0.0)
    iperf = iperf_json(out, err, f"rate {proto} {fmt_rate(rate)}")
    try:
        arrivals = list(_pcap.frames(pcap))
    finally:
        pcap.unlink(missing_ok=True)
    data = [t for t, size in arrivals if size >= DATA_FRAME]
    if len(data) < 2:
        raise RuntimeError(f"rate {proto} {fmt_rate(rate)}: no bulk frames captured")
    begin, end = data[0] + WARMUP_NS, data[-1] - 50_000_000
    rates = _pcap.window_rates(arrivals, begin, end, WINDOW_NS)
    dev = [(r - rate) / rate * 100 for r in rates]
    span_bits = sum(size * 8 for t, size in arrivals if begin < t <= end)
    stats = own_stats(link.stats())
    return {
        "_dev": dev,
        "frames": len(arrivals),
        "capture_dropped": dropped,
        "windows": len(rates),
        "mean_bps": span_bits / ((end - begin) / 1e9) if end > begin else math.nan,
        "dev_p5": pct(dev, 0.05),
        "dev_p50": pct(dev, 0.50),
        "dev_p95": pct(dev, 0.95),
        "absdev_p95": pct([abs(d) for d in dev], 0.95),
        "dev_min": min(dev, default=math.nan),
        "dev_max": max(dev, default=math.nan),
        "iperf_sender_bps": iperf["end"]["sum_sent"]["bits_per_second"],
        "iperf_received_bps": iperf["end"]["sum_received"]["bits_per_second"],
        "iperf_cpu": iperf["end"]["cpu_utilization_percent"],
        "linkd_cpu_percent": 100 * (cpu1 - cpu0) / load["wall_s"] if linkd else None,
        "machine_load": load,
        "link_stats": stats,
    }


def target_rate(ctx: Ctx) -> dict[str, Any]:
    seconds = 3 if ctx.args.quick else 5
    reps = ctx.args.repeat or (1 if ctx.args.quick else 2)
    results: list[dict[str, Any]] = []
    for rep in range(reps):
        for rate in RATES:
            for proto in ("udp", "tcp"):
                pairs = [
                    Pair("engine", "engine", LinkParams(bw=rate), LinkParams()),
                    Pair("htb", "tc", LinkParams(bw=rate), LinkParams()),
                ]
                if rep % 2:
                    pairs.reverse()  # alternate which side goes first
                with Network(pairs_spec(pairs, ctx.args.seed + rep)) as net:
                    for i, p in enumerate(pairs, 1):
                        print(
                            f"# rate {fmt_rate(rate)} {proto} {p.label}, run {rep + 1}", flush=True
                        )
                        r = measure_rate(ctx, net, i, rate, proto, seconds)
                        r.update(rate_bps=rate, proto=proto, backend=p.label, repetition=rep)
                        results.append(r)
    summary = []
    for rate in RATES:
        for proto in ("udp", "tcp"):
            row: dict[str, Any] = {"rate_bps": rate, "proto": proto}
            for backend in ("engine", "htb"):
                mine = [
                    r
                    for r in results
                    if r["backend"] == backend and r["rate_bps"] == rate and r["proto"] == proto
                ]
                dev = [d for r in mine for d in r.pop("_dev")]  # windows of every run, pooled
                lat = [r["link_stats"].get("ab", {}).get("lateness", {}) for r in mine]
                row[backend] = {
                    "windows": len(dev),
                    "mean_bps": statistics.fmean(r["mean_bps"] for r in mine),
                    "dev_p5": pct(dev, 0.05),
                    "dev_p50": pct(dev, 0.50),
                    "dev_p95": pct(dev, 0.95),
                    "absdev_p95": pct([abs(d) for d in dev], 0.95),
                    "absdev_p95_per_run": [r["absdev_p95"] for r in mine],
                    "capture_dropped": sum(max(0, r["capture_dropped"]) for r in mine),
                    "steal_cores_max": max(r["machine_load"]["steal_cores"] for r in mine),
                    "other_cores_max": max(r["machine_load"]["other_cores"] for r in mine),
                    "linkd_cpu_percent": [r["linkd_cpu_percent"] for r in mine],
                    "lateness_p50_us_max": max((x.get("p50_ns", 0) / US for x in lat), default=0),
                    "lateness_p99_us_max": max((x.get("p99_ns", 0) / US for x in lat), default=0),
                    "lateness_max_us": max((x.get("max_ns", 0) / US for x in lat), default=0),
                }
            eng = row["engine"]
            row["ok"] = eng["absdev_p95"] <= RATE_GOAL and eng["capture_dropped"] == 0
            summary.append(row)
    rows = []
    for row in summary:
        e, h = row["engine"], row["htb"]
        cpu = [c for c in e["linkd_cpu_percent"] if c is not None]
        disturbed = max(e["other_cores_max"], h["other_cores_max"]) > 0.25
        rows.append(
            [
                f"{fmt_rate(row['rate_bps'])} {row['proto'].upper()}",
                f"{e['mean_bps'] / MBIT:.2f}",
                f"{fmt_pct(e['dev_p5'])} {fmt_pct(e['dev_p50'])} {fmt_pct(e['dev_p95'])}",
                f"{e['absdev_p95']:.2f}% ("
                + " ".join(f"{x:.1f}" for x in e["absdev_p95_per_run"])
                + ")",
                verdict(row["ok"]),
                f"{h['mean_bps'] / MBIT:.2f}; {fmt_pct(h['dev_p5'])} "
                f"{fmt_pct(h['dev_p50'])} {fmt_pct(h['dev_p95'])}; {h['absdev_p95']:.2f}% ("
                + " ".join(f"{x:.1f}" for x in h["absdev_p95_per_run"])
                + ")",
                f"{e['lateness_p50_us_max']:.0f} / {e['lateness_p99_us_max']:.0f} / "
                f"{e['lateness_max_us']:.0f}",
                f"{max(cpu, default=math.nan):.0f}%",
                f"{max(e['steal_cores_max'], h['steal_cores_max']):.2f}"
                + (" busy!" if disturbed else "")
                + (
                    f" capture lost {e['capture_dropped']}/{h['capture_dropped']}"
                    if e["capture_dropped"] or h["capture_dropped"]
                    else ""
                ),
            ]
        )
    print_table(
        "RATE: delivered rate per 10 ms window, first second skipped, windows of "
        f"{reps} run(s) of {seconds} s pooled; bits = 8 x L2 frame without FCS; goal: "
        f"|deviation| <= {RATE_GOAL:g}% in 95% of windows",
        [
            "configured",
            "engine Mb/s",
            "engine dev p5 p50 p95",
            "error |dev| p95 (per run)",
            "pass",
            "reference htb (tc): Mb/s; dev p5 p50 p95; |dev| p95 (per run)",
            "engine lateness p50/p99/max us",
            "linkd CPU",
            "steal",
        ],
        rows,
    )
    return {"summary": summary, "runs": results, "seconds": seconds, "repeat": reps}


# -- delay ----------------------------------------------------------------------------

DELAYS = (0.001, 0.010, 0.050)
DELAY_GOAL_P50_US = 20.0
DELAY_GOAL_P999_US = 200.0


def target_delay(ctx: Ctx) -> dict[str, Any]:
    count = 1000 if ctx.args.quick else 5000
    interval = 0.001
    pairs = [
        Pair("veth (stack)", "veth", LinkParams(), LinkParams()),
        Pair("engine delay 0", "engine", LinkParams(), LinkParams()),
    ] + [
        Pair(f"engine delay {d * 1e3:g} ms", "engine", LinkParams(delay=d), LinkParams(delay=d))
        for d in DELAYS
    ]
    delays = [0.0, 0.0, *DELAYS]
    runs: list[dict[str, Any]] = []
    with Network(pairs_spec(pairs, ctx.args.seed)) as net:
        for i, (p, d) in enumerate(zip(pairs, delays, strict=True), 1):
            print(f"# delay: {p.label}", flush=True)
            a, b = net[f"a{i}"], net[f"b{i}"]
            load_s = math.ceil(count * interval + 2 * d + 3)
            server = iperf_server(b)
            load = start(
                a, ["iperf3", "-c", f"10.0.{i}.2", "-u", "-b", "10M", "-t", str(load_s), "-J"]
            )
            time.sleep(0.5)
            out, err, _ = a.pexec(
                [
                    ctx.python,
                    PROBE,
                    "ping",
                    "--dst",
                    f"10.0.{i}.2",
                    "--count",
                    str(count),
                    "--interval",
                    str(interval),
                    "--wait",
                    str(2 * d + 1),
                ]
            )
            lout, lerr = finish(load, load_s + 30)
            finish(server, 5)
            ping = probe_json(out, err, f"delay {p.label}")
            lj = iperf_json(lout, lerr, f"delay {p.label} load")
            errs_us = [(r - 2 * d * 1e9) / US for r in ping["rtt_ns"]]
            stats = own_stats(net.links[i - 1].stats()) if p.backend == "engine" else {}
            runs.append(
                {
                    "label": p.label,
                    "delay_s": d,
                    "sent": ping["sent"],
                    "received": ping["received"],
                    "err_p50_us": pct(errs_us, 0.5),
                    "err_p99_us": pct(errs_us, 0.99),
                    "err_p999_us": pct(errs_us, 0.999),
                    "err_min_us": min(errs_us, default=math.nan),
                    "err_max_us": max(errs_us, default=math.nan),
                    "load_received_bps": lj["end"]["sum_received"]["bits_per_second"],
                    "load_lost_percent": lj["end"]["sum_received"]["lost_percent"],
                    "link_stats": stats,
                }
            )
    veth, floor = runs[0], runs[1]
    rows = []
    for r in runs:
        ref = ""
        ok: bool | None = None
        if r is veth:
            what = "RTT (unshaped veth: the stack's own)"
        elif r is floor:
            what = "RTT (engine, delay 0: its own floor)"
            ref = f"veth p50 {veth['err_p50_us']:.1f} p99.9 {veth['err_p999_us']:.1f}"
        else:
            what = f"RTT 2 x {r['delay_s'] * 1e3:g} ms"
            ok = r["err_p50_us"] <= DELAY_GOAL_P50_US and r["err_p999_us"] <= DELAY_GOAL_P999_US
            ref = (
                f"floor p50 {floor['err_p50_us']:.1f} p99.9 {floor['err_p999_us']:.1f}; "
                f"veth p50 {veth['err_p50_us']:.1f} p99.9 {veth['err_p999_us']:.1f}"
            )
        r["ok"] = ok
        lost = r["sent"] - r["received"]
        rows.append(
            [
                what,
                f"{r['err_p50_us']:.1f} / {r['err_p99_us']:.1f} / {r['err_p999_us']:.1f} / "
                f"{r['err_max_us']:.1f}",
                f"{r['err_min_us']:.1f}",
                "p50 <= 20, p99.9 <= 200" if ok is not None else "(reference)",
                verdict(ok),
                ref,
                f"{r['received']}" + (f" ({lost} lost)" if lost else ""),
            ]
        )
    print_table(
        "DELAY: RTT error = measured RTT - 2 x configured delay, us, with 10 Mb/s UDP "
        "load on the link (ICMP echo, kernel receive stamps)",
        [
            "case",
            "error p50 / p99 / p99.9 / max",
            "min",
            "goal (us)",
            "pass",
            "reference (us)",
            "samples",
        ],
        rows,
    )
    lat_rows = []
    for r in runs:
        for direction in ("ab", "ba"):
            lat = r["link_stats"].get(direction, {}).get("lateness")
            if not lat:
                continue
            lat_rows.append(
                [
                    r["label"],
                    direction,
                    str(lat["count"]),
                    f"{lat['p50_ns'] / US:.1f}",
                    f"{lat['p90_ns'] / US:.1f}",
                    f"{lat['p99_ns'] / US:.1f}",
                    f"{lat['p999_ns'] / US:.1f}",
                    f"{lat['max_ns'] / US:.1f}",
                ]
            )
    print_table(
        "DELAY: the engine's own lateness (departure - scheduled departure), us, from "
        "link.stats(); ab carries the load and the echo requests",
        ["link", "dir", "packets", "p50", "p90", "p99", "p99.9", "max"],
        lat_rows,
    )
    return {"runs": runs, "count": count, "interval_s": interval}


# -- jitter ---------------------------------------------------------------------------

JITTER_DELAY = 0.010
JITTER = 0.002
JITTER_GOAL = 0.10  # of the configured jitter, per quantile
QUANTILES = (0.10, 0.50, 0.90)


def configured_quantile(dist: str, q: float) -> float:
    """Seconds: the q-quantile of delay + jitter as configured."""
    if dist == "uniform":
        return JITTER_DELAY + JITTER * (2 * q - 1)
    return JITTER_DELAY + JITTER * statistics.NormalDist().inv_cdf(q)


def order_kept_model(dist: str, send_ns: Sequence[int], seed: int, reps: int = 5) -> list[float]:
    """One-way delays (s) the engine's rule gives for these send times when order is
    kept: departure = max(send + delay + jitter sample, previous departure)."""
    rng = random.Random(seed)
    d, j = JITTER_DELAY * 1e9, JITTER * 1e9
    out = []
    for _ in range(reps):
        prev = -math.inf
        for s in send_ns:
            jit = rng.uniform(-j, j) if dist == "uniform" else rng.gauss(0, j)
            dep = max(s + max(0.0, d + jit), prev)
            prev = dep
            out.append((dep - s) / 1e9)
    return out


def owd_runs(
    ctx: Ctx, net: Network, idxs: Sequence[int], count: int, spacing: float
) -> dict[int, dict[str, Any]]:
    """Probe flows a<i> -> b<i> for every i in ``idxs`` at once, ``count`` datagrams
    ``spacing`` apart each; the receivers' records by i."""
    recvs = {}
    for i in idxs:
        recvs[i] = start(
            net[f"b{i}"],
            [ctx.python, PROBE, "udp-recv", "--port", "9000", "--count", str(count), "--idle", "1"],
        )
    for proc in recvs.values():
        wait_stderr(proc, "ready")
    senders = {}
    for i in idxs:
        senders[i] = start(
            net[f"a{i}"],
            [
                ctx.python,
                PROBE,
                "udp-send",
                "--dst",
                f"10.0.{i}.2",
                "--port",
                "9000",
                "--count",
                str(count),
                "--interval",
                str(spacing),
            ],
        )
    out: dict[int, dict[str, Any]] = {}
    for i in idxs:
        sent = probe_json(*finish(senders[i], count * spacing + 60), f"jitter sender {i}")
        got = probe_json(*finish(recvs[i], 30), f"jitter receiver {i}")
        reordered, highest = 0, -1
        for seq in got["seq"]:
            if seq < highest:
                reordered += 1
            highest = max(highest, seq)
        got["reordered"] = reordered
        got["send_errors"] = sent["send_errors"]
        got["sent"] = count
        out[i] = got
    return out


def target_jitter(ctx: Ctx) -> dict[str, Any]:
    flows = 2 if ctx.args.quick else 4  # parallel links per sparse case
    sparse_n, dense_n = (250, 2000) if ctx.args.quick else (750, 6000)
    sparse, dense = 0.010, 0.0005

    def params(dist: str, reorder: bool = False) -> LinkParams:
        return LinkParams(
            delay=JITTER_DELAY,
            jitter=JITTER,
            jitter_dist=dist,  # type: ignore[arg-type]
            reorder=reorder or None,
        )

    # (label, dist or None for a reference, spacing, packets per flow, reorder, links)
    cases: list[tuple[str, str | None, float, int, bool, list[Pair]]] = [
        (
            f"uniform, {sparse * 1e3:g} ms apart",
            "uniform",
            sparse,
            sparse_n,
            False,
            [Pair("u", "engine", params("uniform"), LinkParams()) for _ in range(flows)]
            + [
                Pair("floor", "engine", LinkParams(), LinkParams()),
                Pair("veth", "veth", LinkParams(), LinkParams()),
            ],
        ),
        (
            f"normal, {sparse * 1e3:g} ms apart",
            "normal",
            sparse,
            sparse_n,
            False,
            [Pair("n", "engine", params("normal"), LinkParams()) for _ in range(flows)],
        ),
        (
            f"uniform, {dense * 1e3:g} ms apart",
            "uniform",
            dense,
            dense_n,
            False,
            [Pair("u", "engine", params("uniform"), LinkParams())],
        ),
        (
            f"normal, {dense * 1e3:g} ms apart",
            "normal",
            dense,
            dense_n,
            False,
            [Pair("n", "engine", params("normal"), LinkParams())],
        ),
        (
            f"uniform, {dense * 1e3:g} ms apart, reorder=True",
            "uniform",
            dense,
            dense_n,
            True,
            [Pair("r", "engine", params("uniform", True), LinkParams())],
        ),
    ]
    runs = []
    refs: dict[str, list[float]] = {}
    for label, dist, spacing, n, reorder, pairs in cases:
        assert dist is not None
        print(
            f"# jitter: {label}" + (f" ({len(pairs)} links at once)" if len(pairs) > 1 else ""),
            flush=True,
        )
        with Network(pairs_spec(pairs, ctx.args.seed)) as net:
            got = owd_runs(ctx, net, range(1, len(pairs) + 1), n, spacing)
            lateness = own_stats(net.links[0].stats())["ab"]["lateness"]
        owd: list[float] = []
        send_ns: list[list[int]] = []
        reordered = received = sent = 0
        for i, p in enumerate(pairs, 1):
            g = got[i]
            delays = [(r - t) / 1e9 for t, r in zip(g["send_ns"], g["recv_ns"], strict=True)]
            if p.label in ("floor", "veth"):
                refs[p.label] = delays
                continue
            owd += delays
            send_ns.append(sorted(g["send_ns"]))
            reordered += g["reordered"]
            received += len(delays)
            sent += g["sent"]
        measured = {q: pct(owd, q) for q in QUANTILES}
        configured = {q: configured_quantile(dist, q) for q in QUANTILES}
        model = None
        if spacing < 2 * JITTER and not reorder:
            sim = [x for times in send_ns for x in order_kept_model(dist, times, ctx.args.seed)]
            model = {q: pct(sim, q) for q in QUANTILES}
        expect = model or configured
        worst = max(abs(measured[q] - expect[q]) for q in QUANTILES) / JITTER
        reorder_ok = reordered > 0 if reorder else reordered == 0
        runs.append(
            {
                "label": label,
                "dist": dist,
                "spacing_s": spacing,
                "reorder": reorder,
                "links": len([p for p in pairs if p.label not in ("floor", "veth")]),
                "sent": sent,
                "received": received,
                "reordered": reordered,
                "measured_s": {str(q): v for q, v in measured.items()},
                "configured_s": {str(q): v for q, v in configured.items()},
                "order_kept_model_s": {str(q): v for q, v in model.items()} if model else None,
                "worst_error_of_jitter": worst,
                "ok": worst <= JITTER_GOAL and reorder_ok,
                "mean_s": statistics.fmean(owd) if owd else math.nan,
                "stdev_s": statistics.pstdev(owd) if len(owd) > 1 else math.nan,
                "lateness_first_link": lateness,
            }
        )
    references = {
        name: {str(q): pct(v, q) for q in (0.1, 0.5, 0.9, 0.99)} for name, v in refs.items()
    }
    rows = []
    for r in runs:
        ms = [float(r["measured_s"][str(q)]) * 1e3 for q in QUANTILES]
        cf = [float(r["configured_s"][str(q)]) * 1e3 for q in QUANTILES]
        kept = r["order_kept_model_s"]
        mo = [float(kept[str(q)]) * 1e3 for q in QUANTILES] if kept else None
        rows.append(
            [
                r["label"],
                " / ".join(f"{x:.3f}" for x in cf),
                " / ".join(f"{x:.3f}" for x in ms),
                " / ".join(f"{x:.3f}" for x in mo) if mo else "(= configured)",
                f"{r['worst_error_of_jitter'] * 100:.1f}% vs {'model' if mo else 'configured'}",
                f"{r['reordered']}" + (" (> 0 wanted)" if r["reorder"] else ""),
                verdict(r["ok"]),
                f"{r['received']}/{r['sent']}",
                f"{r['lateness_first_link']['p50_ns'] / US:.0f} / "
                f"{r['lateness_first_link']['p99_ns'] / US:.0f}",
            ]
        )
    print_table(
        f"JITTER: one-way delay quantiles p10 / p50 / p90, ms, delay {JITTER_DELAY * 1e3:g} ms "
        f"jitter {JITTER * 1e3:g} ms; goal: each quantile within {JITTER_GOAL * 100:g}% of the "
        "jitter (200 us), no reordering unless asked",
        [
            "case (distribution, probe spacing)",
            "configured",
            "measured",
            "order-kept model",
            "worst error (of jitter)",
            "reordered",
            "pass",
            "received",
            "lateness p50/p99 us",
        ],
        rows,
    )
    if references:
        print(
            "reference, same run as the sparse uniform case, one-way delay p10 / p50 / p90 / "
            "p99 in us: "
            + "; ".join(
                f"{'engine, delay 0' if k == 'floor' else 'unshaped veth'} "
                + " / ".join(f"{v[str(q)] * 1e6:.0f}" for q in (0.1, 0.5, 0.9, 0.99))
                for k, v in references.items()
            )
        )
    print(
        "Probes spaced wider than the jitter's range see the configured distribution. "
        "Spaced closer, a packet never leaves\nbefore the one ahead of it (order kept), so "
        "short draws wait for their predecessor: delays shift up and narrow.\nThe "
        "order-kept model replays the send times through departure = max(send + delay + "
        "jitter, previous departure)."
    )
    return {"runs": runs, "references_s": references}


# -- loss -----------------------------------------------------------------------------


def target_loss(ctx: Ctx) -> dict[str, Any]:
    n_random, n_ge = (10000, 20000) if ctx.args.quick else (30000, 50000)
    interval = 0.0001
    ge = GilbertElliott(p=1.0, r=25.0)
    cases: list[tuple[str, LinkParams, int]] = [
        ("random 1%", LinkParams(loss=1.0), n_random),
        ("random 10%", LinkParams(loss=10.0), n_random),
        ("Gilbert-Elliott p=1% r=25%", LinkParams(loss_model=ge), n_ge),
    ]
    pairs = [Pair(label, "engine", params, LinkParams()) for label, params, _ in cases]
    runs = []
    with Network(pairs_spec(pairs, ctx.args.seed)) as net:
        for i, ((label, params, n), _p) in enumerate(zip(cases, pairs, strict=True), 1):
            print(f"# loss: {label}", flush=True)
            a, b = net[f"a{i}"], net[f"b{i}"]
            link = net.links[i - 1]
            before = link.stats()["ab"]
            recv = start(
                b,
                [ctx.python, PROBE, "udp-recv", "--port", "9000", "--count", str(n), "--idle", "1"],
            )
            wait_stderr(recv, "ready")
            out, err, _ = a.pexec(
                [
                    ctx.python,
                    PROBE,
                    "udp-send",
                    "--dst",
                    f"10.0.{i}.2",
                    "--port",
                    "9000",
                    "--count",
                    str(n),
                    "--interval",
                    str(interval),
                ]
            )
            sent = probe_json(out, err, f"loss {label} sender")
            rout, rerr = finish(recv, 60)
            got = probe_json(rout, rerr, f"loss {label} receiver")
            after = link.stats()["ab"]
            seqs = set(got["seq"])
            lost = n - len(seqs)
            bursts: list[int] = []
            run = 0
            for s in range(n):
                if s in seqs:
                    if run:
                        bursts.append(run)
                    run = 0
                else:
                    run += 1
            if run:
                bursts.append(run)
            r: dict[str, Any] = {
                "label": label,
                "sent": n,
                "send_errors": sent["send_errors"],
                "send_s": sent["elapsed_s"],
                "received": len(seqs),
                "lost": lost,
                "engine_loss_drops": after["drops"]["loss"] - before["drops"]["loss"],
                "engine_queue_drops": after["drops"]["queue"] - before["drops"]["queue"],
                "bursts": len(bursts),
                "mean_burst": statistics.fmean(bursts) if bursts else math.nan,
            }
            if params.loss_model is None:
                assert params.loss is not None
                lo, hi = binomial_interval(n, params.loss / 100)
                r.update(interval_99=[lo, hi], ok=lo <= lost <= hi)
            else:
                m = params.loss_model
                r["expected_mean_burst"] = 100 / m.r
                pb = m.p / (m.p + m.r)
                r["expected_loss_percent"] = 100 * (pb * m.loss_bad + (1 - pb) * m.loss_good) / 100
                if len(bursts) > 1:
                    half = 2.576 * statistics.stdev(bursts) / math.sqrt(len(bursts))
                    r["mean_burst_ci99"] = [r["mean_burst"] - half, r["mean_burst"] + half]
                    r["ok"] = (
                        r["mean_burst_ci99"][0]
                        <= r["expected_mean_burst"]
                        <= r["mean_burst_ci99"][1]
                    )
                else:
                    r["ok"] = False
            runs.append(r)
    rows = []
    for r in runs:
        measured = f"{r['lost']}/{r['sent']} = {100 * r['lost'] / r['sent']:.3f}%"
        if "interval_99" in r:
            lo, hi = r["interval_99"]
            rows.append(
                [
                    r["label"],
                    measured,
                    f"99% binomial interval {lo}..{hi} lost",
                    verdict(r["ok"]),
                    f"engine counted {r['engine_loss_drops']}",
                    f"mean burst {r['mean_burst']:.2f}",
                ]
            )
        else:
            ci = r.get("mean_burst_ci99", [math.nan, math.nan])
            rows.append(
                [
                    r["label"],
                    f"{measured}; {r['bursts']} bursts, mean {r['mean_burst']:.2f} "
                    f"(99% CI {ci[0]:.2f}..{ci[1]:.2f})",
                    f"1/r = {r['expected_mean_burst']:.2f} inside the CI "
                    f"(loss {r['expected_loss_percent']:.2f}% expected)",
                    verdict(r["ok"]),
                    f"engine counted {r['engine_loss_drops']}",
                    "",
                ]
            )
    print_table(
        "LOSS: UDP probes at 10 kpps, counted by the receiver (sequence numbers)",
        ["configured", "measured", "goal", "pass", "cross-check", "note"],
        rows,
    )
    return {"runs": runs, "interval_s": interval}


# -- fairness -------------------------------------------------------------------------

FAIR_FLOWS = 4
FAIR_OFFERED = 5e6
FAIR_GOAL = 0.99


def fairness_run(ctx: Ctx, queue: str, seconds: int, seed: int) -> dict[str, Any]:
    bottleneck = LinkParams(bw=10e6, max_queue_size=100, queue=queue)  # type: ignore[arg-type]
    spec = dumbbell(FAIR_FLOWS, bottleneck)
    spec.seed = seed
    spec.auto_static_arp = True
    spec.links[0].backend = "engine"
    with Network(spec) as net:
        senders = [net[f"h{k}"] for k in range(1, FAIR_FLOWS + 1)]
        receivers = [net[f"h{k + FAIR_FLOWS}"] for k in range(1, FAIR_FLOWS + 1)]
        servers = [iperf_server(r) for r in receivers]
        clients = []
        for s, r in zip(senders, receivers, strict=True):
            assert r.ip is not None
            clients.append(
                start(
                    s,
                    [
                        "iperf3",
                        "-c",
                        r.ip,
                        "-u",
                        "-l",
                        "1472",
                        "-b",
                        str(int(FAIR_OFFERED)),
                        "-t",
                        str(seconds),
                        "-J",
                    ],
                )
            )
        flows = []
        for k, c in enumerate(clients):
            out, err = finish(c, seconds + 30)
            j = iperf_json(out, err, f"fairness {queue} flow {k + 1}")
            flows.append(
                {
                    "sent_bps": j["end"]["sum_sent"]["bits_per_second"],
                    "received_bps": j["end"]["sum_received"]["bits_per_second"],
                    "lost_percent": j["end"]["sum_received"]["lost_percent"],
                }
            )
        for srv in servers:
            finish(srv, 5)
        stats = own_stats(net.links[0].stats())
    received = [f["received_bps"] for f in flows]
    return {
        "queue": queue,
        "flows": flows,
        "jain": jain(received),
        "total_received_bps": sum(received),
        "bottleneck": stats.get("ab", {}),
    }


def target_fairness(ctx: Ctx) -> dict[str, Any]:
    seconds, reps = (5, 1) if ctx.args.quick else (8, 3)
    runs = []
    for rep in range(reps):
        for queue in ("hifi", "droptail"):
            print(f"# fairness: {queue}, run {rep + 1}/{reps}", flush=True)
            r = fairness_run(ctx, queue, seconds, ctx.args.seed + rep)
            r["repetition"] = rep
            runs.append(r)
    summary = {}
    for queue in ("hifi", "droptail"):
        js = [r["jain"] for r in runs if r["queue"] == queue]
        summary[queue] = {"median": statistics.median(js), "min": min(js), "max": max(js)}
    ok = summary["hifi"]["median"] >= FAIR_GOAL
    rows = []
    for queue in ("hifi", "droptail"):
        mine = [r for r in runs if r["queue"] == queue]
        rows.append(
            [
                f"queue={queue}",
                f"{summary[queue]['median']:.4f}",
                " ".join(f"{r['jain']:.4f}" for r in mine),
                "; ".join(
                    " ".join(f"{f['received_bps'] / MBIT:.2f}" for f in r["flows"]) for r in mine
                ),
                f">= {FAIR_GOAL}" if queue == "hifi" else "(reference)",
                verdict(ok if queue == "hifi" else None),
                " ".join(str(r["bottleneck"].get("drops", {}).get("queue", "-")) for r in mine),
            ]
        )
    print_table(
        f"FAIRNESS: {FAIR_FLOWS} UDP flows of {FAIR_OFFERED / MBIT:g} Mb/s each (iperf3, "
        f"{seconds} s) through a 10 Mb/s engine bottleneck (queue 100 packets) of a dumbbell; "
        "Jain's index of the payload rates received",
        [
            "case",
            "Jain median",
            "Jain per run",
            "per flow Mb/s, per run",
            "goal",
            "pass",
            "queue drops per run",
        ],
        rows,
    )
    return {
        "runs": runs,
        "summary": summary,
        "ok": ok,
        "seconds": seconds,
        "offered_bps": FAIR_OFFERED,
    }


# -- capacity -------------------------------------------------------------------------

SMALL_PAYLOAD = 18  # bytes of UDP payload: 60-byte frames, 64 with the FCS
SMALL_FRAME = 60  # bytes as the engine counts them (no FCS)
SOCKET_BUFFER = "8M"  # iperf3 -w: both ends' socket buffers, so a receiver's burst is not lost


def chain_links(spec: TopologySpec, n: int) -> None:
    """Hosts x1 (10.0.99.1) and x2 (10.0.99.2) joined through n-1 switches by n engine
    links."""
    spec.add_node(NodeSpec("x1", ip="10.0.99.1/24"))
    spec.add_node(NodeSpec("x2", ip="10.0.99.2/24"))
    hops = ["x1"] + [f"w{k}" for k in range(1, n)] + ["x2"]
    for name in hops[1:-1]:
        spec.add_node(NodeSpec(name, kind="switch"))
    for u, v in itertools.pairwise(hops):
        link = LinkSpec(u, v)
        link.backend = "engine"
        spec.add_link(link)


def counters(net: Network, src: Node, dst: Node) -> dict[str, int]:
    """Where packets can be lost on the way: the sender's interface queue (a TAP's
    queue fills when linkd reads too slowly), the engine (queue drops, failed TAP
    writes), the receiver's interface and its UDP socket buffers."""
    out: dict[str, int] = {}
    for node, key, direction in (
        (src, "sender_tx_dropped", "tx"),
        (dst, "receiver_rx_dropped", "rx"),
    ):
        intf = node.default_intf()
        assert intf is not None
        text, _, _ = node.pexec(["ip", "-j", "-s", "link", "show", "dev", intf.name])
        link = json.loads(text)[0]
        out[key] = int(link["stats64"][direction]["dropped"])
    text, _, _ = dst.pexec(["cat", "/proc/net/snmp"])
    udp = [line.split() for line in text.splitlines() if line.startswith("Udp:")]
    if len(udp) >= 2:
        out["receiver_udp_rcvbuf_errors"] = int(
            dict(zip(udp[0], udp[1], strict=False))["RcvbufErrors"]
        )
    queue = writes = 0
    if net.engine is not None:
        for dirs in net.engine.stats().values():
            for d in ("ab", "ba"):
                if isinstance(dirs.get(d), dict):
                    queue += dirs[d]["drops"]["queue"]
                    writes += dirs[d].get("write_errors", 0)
    out["engine_queue_drops"] = queue
    out["engine_write_errors"] = writes
    return out


def small_trial(
    net: Network, src: Node, dst: Node, ip: str, pps: float | None, seconds: int
) -> dict[str, Any]:
    """One iperf3 run of 18-byte UDP payloads at ``pps`` (None: as fast as it goes)."""
    server = iperf_server(dst)
    bps = "0" if pps is None else str(int(pps * SMALL_PAYLOAD * 8))
    linkd = net.engine.pid if net.engine is not None else None
    before = counters(net, src, dst)
    cpu0 = proc_cpu_s(linkd)
    argv = ["iperf3", "-c", ip, "-u", "-l", str(SMALL_PAYLOAD), "-b", bps, "-t", str(seconds), "-J"]
    client = start(src, [*argv, "-w", SOCKET_BUFFER])
    out, err = finish(client, seconds + 30)
    cpu1 = proc_cpu_s(linkd)
    finish(server, 5)
    after = counters(net, src, dst)
    j = iperf_json(out, err, "capacity")
    rx = j["end"]["sum_received"]
    sent = j["end"]["sum_sent"]
    secs = sent["seconds"] or math.nan
    return {
        "offered_pps": pps,
        "sent_packets": sent["packets"],
        "lost": rx["lost_packets"],
        "seconds": sent["seconds"],
        "achieved_pps": sent["packets"] / secs,
        "generator_cpu_percent": j["end"]["cpu_utilization_percent"]["host_total"],
        "receiver_cpu_percent": j["end"]["cpu_utilization_percent"]["remote_total"],
        # linkd's CPU time over the seconds iperf3 sent (it idles before and after)
        "linkd_cpu_percent": 100 * (cpu1 - cpu0) / secs if linkd else None,
        "lost_at": {k: after[k] - before[k] for k in after if after[k] != before[k]},
    }


def search(net: Network, src: Node, dst: Node, ip: str, steps: int, label: str) -> dict[str, Any]:
    """The highest rate with no loss in a 1 s trial: first as fast as the generator
    goes (if nothing is lost there, the generator is the limit), then a binary search
    on the offered rate between 0 and that."""
    trials = [small_trial(net, src, dst, ip, None, 1)]
    ceiling = trials[0]["achieved_pps"]
    print(f"#   unlimited: {ceiling:.0f} pps sent, {trials[0]['lost']} lost", flush=True)
    best: dict[str, Any] | None = trials[0] if trials[0]["lost"] == 0 else None
    first_lossy: dict[str, Any] | None = trials[0] if best is None else None
    if best is None:
        lo, hi = 0.0, ceiling
        for _ in range(steps):
            mid = (lo + hi) / 2
            t = small_trial(net, src, dst, ip, mid, 1)
            trials.append(t)
            print(
                f"#   {mid:.0f} pps offered: {t['achieved_pps']:.0f} sent, {t['lost']} lost"
                + (
                    f" ({', '.join(f'{k} {v}' for k, v in t['lost_at'].items())})"
                    if t["lost"]
                    else ""
                ),
                flush=True,
            )
            if t["lost"] == 0:
                lo = mid
                if best is None or t["achieved_pps"] > best["achieved_pps"]:
                    best = t
            else:
                hi = mid
                first_lossy = t
    return {
        "label": label,
        "generator_ceiling_pps": ceiling,
        "zero_loss_pps": best["achieved_pps"] if best else 0.0,
        "generator_limited": best is trials[0],
        "best": best,
        "lowest_lossy": first_lossy,
        "trials": trials,
    }


def target_capacity(ctx: Ctx) -> dict[str, Any]:
    steps = 5 if ctx.args.quick else 7
    pairs = [
        Pair("veth", "veth", LinkParams(), LinkParams()),
        Pair("engine", "engine", LinkParams(), LinkParams()),
    ]
    spec = pairs_spec(pairs, ctx.args.seed)
    chain_links(spec, 6)
    results = []
    with Network(spec) as net:
        for label, src, dst, ip in (
            ("veth pair (reference)", "a1", "b1", "10.0.1.2"),
            ("one engine link", "a2", "b2", "10.0.2.2"),
            ("six engine links, 5 switches", "x1", "x2", "10.0.99.2"),
        ):
            print(f"# capacity: {label}", flush=True)
            results.append(search(net, net[src], net[dst], ip, steps, label))
    veth = results[0]
    rows = []
    for r in results:
        b = r["best"] or {}
        ratio = r["zero_loss_pps"] / veth["zero_loss_pps"] if veth["zero_loss_pps"] else math.nan
        linkd = b.get("linkd_cpu_percent")
        lossy = r["lowest_lossy"] or {}
        where = ", ".join(f"{k} {v}" for k, v in lossy.get("lost_at", {}).items())
        rows.append(
            [
                r["label"],
                f"{r['zero_loss_pps'] / 1e3:.1f} kpps"
                + (" (generator-limited)" if r["generator_limited"] else ""),
                f"{r['zero_loss_pps'] * SMALL_FRAME * 8 / MBIT:.1f}",
                f"{r['generator_ceiling_pps'] / 1e3:.1f} kpps",
                "(reference)" if r is veth else f"{ratio:.2f}",
                f"gen {b.get('generator_cpu_percent', math.nan):.0f}% recv "
                f"{b.get('receiver_cpu_percent', math.nan):.0f}%"
                + (f" linkd {linkd:.0f}%" if linkd is not None and r is not veth else ""),
                (
                    f"{lossy['achieved_pps'] / 1e3:.1f} kpps: {lossy['lost']} lost"
                    + (f" ({where})" if where else "")
                )
                if lossy
                else "-",
            ]
        )
    print_table(
        "CAPACITY: highest zero-loss rate of 64-byte frames (18-byte UDP payload, iperf3 -w "
        f"{SOCKET_BUFFER}, 1 s trials, binary search on the offered rate); rough until "
        "fidelnet's own packet generator exists",
        [
            "path",
            "zero-loss rate",
            "Mb/s (60 B)",
            "generator, unlimited",
            "ratio to veth",
            "CPU at that rate",
            "lowest lossy trial: where lost",
        ],
        rows,
    )
    return {"runs": results, "steps": steps}


# -- driver ---------------------------------------------------------------------------

RUNNERS: dict[str, Callable[[Ctx], dict[str, Any]]] = {
    "rate": target_rate,
    "delay": target_delay,
    "jitter": target_jitter,
    "loss": target_loss,
    "fairness": target_fairness,
    "capacity": target_capacity,
}


def provenance(args: argparse.Namespace, linkd: str | None) -> dict[str, Any]:
    try:
        commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    cpu = None
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    linkd_info: dict[str, Any] = {"path": linkd}
    if linkd:
        st = os.stat(linkd)
        linkd_info["mtime_utc"] = dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc).isoformat(
            timespec="seconds"
        )
        linkd_info["size"] = st.st_size
    return {
        "benchmark": "links",
        "command": [sys.executable, *sys.argv],
        "started_utc": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "git_commit": commit,
        "machine": {
            "kernel": platform.release(),
            "nproc": os.cpu_count(),
            "cpu": cpu,
            "mem_total_kib": bl.mem_total_kib(),
            "loadavg_start": os.getloadavg(),
            "ci": os.environ.get("CI"),
        },
        "linkd": linkd_info,
        "settings": {
            "quick": args.quick,
            "only": args.only,
            "seed": args.seed,
            "repeat": args.repeat,
        },
        "tools": {
            "iperf3": _first_line(["iperf3", "--version"]),
            "tcpdump": _first_line(["tcpdump", "--version"]),
        },
    }


def _first_line(argv: list[str]) -> str | None:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, check=False).stdout
    except OSError:
        return None
    return out.splitlines()[0] if out else None


def jsonable(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [jsonable(v) for v in x]
    return x


@contextlib.contextmanager
def private_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="fidelnet-bench-links-"))
    try:
        yield path
    finally:
        for p in path.iterdir():
            p.unlink()
        path.rmdir()


def main() -> int:
    parser = argparse.ArgumentParser(
        description="Link fidelity of the link engine: rate, delay, jitter, loss, fairness, "
        "capacity, measured on the receiving side.",
        epilog="Run as root. Results: bench/results/links-<timestamp>.json",
    )
    parser.add_argument("--quick", action="store_true", help="fewer samples, about 2 minutes")
    parser.add_argument(
        "--only", default=",".join(TARGETS), help=f"comma-separated targets ({','.join(TARGETS)})"
    )
    parser.add_argument(
        "--seed", type=int, default=1, help="seed of every link's random choices (1)"
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="runs per rate measurement, their windows pooled (default 2; --quick: 1)",
    )
    parser.add_argument("--linkd", help="fidelnet-linkd to use (default: fidelnet's own search)")
    parser.add_argument("--out", type=Path, default=HERE / "results")
    args = parser.parse_args()
    only = [t.strip() for t in args.only.split(",") if t.strip()]
    unknown = sorted(set(only) - set(TARGETS))
    if unknown:
        parser.error(
            f"--only: unknown target(s) {', '.join(unknown)}; choose from {', '.join(TARGETS)}"
        )
    if os.geteuid() != 0:
        sys.exit("links: the benchmark builds network namespaces and needs root")
    if args.linkd:
        os.environ["FIDELNET_LINKD"] = str(Path(args.linkd).resolve())
    from fidelnet.links.engine import find_linkd

    try:
        linkd: str | None = find_linkd()
    except Exception as exc:
        sys.exit(f"links: {exc}")
    missing = [tool for tool in ("iperf3", "tcpdump", "ss") if not _which(tool)]
    if missing:
        sys.exit(f"links: missing {', '.join(missing)} (make bench-links installs them)")

    record = provenance(args, linkd)
    record["targets"] = {}
    print(
        f"fidelnet link fidelity, kernel {platform.release()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}, linkd {linkd}",
        flush=True,
    )
    failed = False
    with private_dir() as tmp:
        ctx = Ctx(args, tmp, sys.executable)
        for name in TARGETS:
            if name not in only:
                continue
            mark = cpu_mark()
            try:
                result = RUNNERS[name](ctx)
            except Exception as exc:
                failed = True
                traceback.print_exc()
                result = {"error": f"{type(exc).__name__}: {exc}"}
                print(f"\n{name.upper()}: FAILED: {result['error']}")
            load = cpu_since(mark)
            result["machine_load"] = load
            note = (
                "  <- others were busy: figures may be disturbed"
                if load["other_cores"] > 0.25 or load["steal_cores"] > 0.1
                else ""
            )
            print(
                f"[{name}: {load['wall_s']:.0f} s; the rest of the machine used "
                f"{load['other_cores']:.2f} cores, steal {load['steal_cores']:.2f}{note}]",
                flush=True,
            )
            record["targets"][name] = result
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = args.out / f"links-{stamp}.json"
    path.write_text(json.dumps(jsonable(record), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"\nraw results: {path}")
    return 1 if failed else 0


def _which(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None


if __name__ == "__main__":
    sys.exit(main())
