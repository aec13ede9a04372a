"""Shared pieces of the link fidelity benchmark (``bench/links.py``): small
statistics, machine load, pairs of hosts, processes, tables."""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fidelnet.nodes.node import Node
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

TARGETS = ("rate", "delay", "jitter", "loss", "fairness", "capacity", "tcp")
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
    endpoint: str | None = None  # an engine link's endpoint; None: auto


def pairs_spec(pairs: Sequence[Pair], seed: int) -> TopologySpec:
    spec = TopologySpec(seed=seed, auto_static_arp=True)
    for i, p in enumerate(pairs, 1):
        spec.add_node(NodeSpec(f"a{i}", ip=f"10.0.{i}.1/24"))
        spec.add_node(NodeSpec(f"b{i}", ip=f"10.0.{i}.2/24"))
        link = LinkSpec(f"a{i}", f"b{i}", params_ab=p.ab, params_ba=p.ba)
        link.backend = "auto" if p.backend == "veth" else p.backend  # type: ignore[assignment]
        link.endpoint = p.endpoint  # type: ignore[assignment]
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
