"""``fidelnet bench vt``: VT-Mininet's three experiments (issue 11), fidelnet with
virtual time beside fidelnet without it and beside stock Mininet, in one run.

- **(a) fidelity** (VT-Mininet Fig. 2 vs 8): one TCP flow (iperf3) through a chain
  of ``switches`` (40) switches, links of 10 µs at 1, 2, 4, 8 and 10 Gbit/s.
- **(b) scalability** (Fig. 3 vs 9): the chain at 4 Gbit/s, 50 µs links, with 10 to
  80 switches.
- **(c) time-overlapping events** (Fig. 5 vs 10): 50 hosts, links of 1 Gbit/s and
  100 µs; phase 1 one flow (h1→h10), phase 2 five at once (h1→h10, h11→h20, ...,
  h41→h50) on paths that share no link. The paper's Fig. 4 is not described in its
  text; here each group of ten hosts hangs off its own switch and the five
  switches form a line, so the five pairs share nothing.

Each point is measured on every stack: ``fidelnet-vt`` (the TDF fidelnet chooses,
``auto``, or a fixed ``--tdf``), ``fidelnet`` (TDF 1) and ``mininet`` (Debian's
2.3.0 with Linux bridges and TCLink). The receiver's goodput is counted after a
warm-up second (iperf3's own omit, done on its intervals), in the programs' time:
virtual time for the dilated stack. Wall time is measured for every point.

Switches: Linux bridges on both sides by default (``--switch ovs`` puts fidelnet's on
Open vSwitch's userspace datapath; stock Mininet needs the kernel module, absent
here, for OVS). Links: fidelnet chooses its backend (tc where the kernel can delay,
the link engine otherwise: without ``sch_netem`` every delayed link is an engine
link). Stock Mininet's TCLink needs ``sch_netem`` for delay: where it is missing,
its links carry the rate only (the summary says so), and its HTB limit of 1 Gbit/s
(``TCIntf.bwParamMax``) is raised so that its rates are the configured ones.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.fidelity.monitor import watching
from fidelnet.measure import iperf3
from fidelnet.measure.fairness import jain
from fidelnet.measure.provenance import Provenance, collect
from fidelnet.measure.results import TcpFlowResult, TcpInterval, TcpResult, save_result
from fidelnet.measure.tcp import tcp as tcp_flows
from fidelnet.measure.verdicts import judged
from fidelnet.topology import addressing
from fidelnet.topology.spec import AutoTdf, LinkParams, LinkSpec, NodeSpec, TopologySpec

__all__ = ["STACKS", "Point", "VtOptions", "chain", "groups", "peer_plan", "run"]

STACKS = ("fidelnet-vt", "fidelnet", "mininet")
_PORT = 5301
_COMMAND = ["fidelnet", "bench", "vt"]


@dataclass
class VtOptions:
    """What to run (the defaults are the paper's sizes)."""

    out: Path
    experiments: tuple[str, ...] = ("a", "b", "c")
    switches: int = 40
    rates_gbps: tuple[float, ...] = (1.0, 2.0, 4.0, 8.0, 10.0)
    sizes: tuple[int, ...] = (10, 20, 40, 60, 80)
    rate_b_gbps: float = 4.0
    duration: int = 5
    warmup: int = 1
    switch: str = "bridge"
    tdf: float | str = "auto"
    tdf_high: float = 256.0
    undilated: bool = True
    peer: bool = True

    def check(self) -> None:
        bad = sorted(set(self.experiments) - {"a", "b", "c"})
        if bad or not self.experiments:
            raise ValidationError("--experiments", "unknown experiment", bad, ["a", "b", "c"])
        if self.switch not in ("bridge", "ovs"):
            raise ValidationError("--switch", "unknown switch", self.switch, ["bridge", "ovs"])
        if not 1 <= self.switches <= 200 or any(not 1 <= n <= 200 for n in self.sizes):
            raise ValidationError("--switches", "chains of 1 to 200 switches", self.switches)
        if any(not 0 < r <= 100 for r in (*self.rates_gbps, self.rate_b_gbps)):
            raise ValidationError("--rates", "rates above 0, at most 100 Gbit/s", self.rates_gbps)
        if not 1 <= self.duration <= 600 or not 0 <= self.warmup <= 60:
            raise ValidationError("--duration", "1 to 600 s, warm-up 0 to 60 s", self.duration)
        if self.tdf != "auto":
            from fidelnet.vt.page import check_tdf

            check_tdf(self.tdf, "--tdf")

    def stacks(self) -> list[str]:
        out = ["fidelnet-vt"]
        if self.undilated:
            out.append("fidelnet")
        if self.peer:
            out.append("mininet")
        return out


@dataclass
class Point:
    """One measurement: an experiment's point on one stack."""

    experiment: str
    x: float  # the configured rate (a), the switches (b), the phase (c)
    stack: str
    goodput_bps: dict[str, float]  # per flow, after the warm-up
    series: dict[str, list[float]]  # per flow, the goodput of each interval (bps)
    wall_s: float
    tdf: tuple[float, float] = (1.0, 1.0)  # the lowest and highest TDF during it
    verdict: str = "unjudged"  # the run monitor's: trusted, degraded, untrusted


# -- topologies ----------------------------------------------------------------------------


def chain(n: int, rate_bps: float, delay_s: float, switch: str) -> TopologySpec:
    """h1 - s1 - ... - sN - h2, every link ``rate_bps`` and ``delay_s``."""
    t = TopologySpec()
    t.datapath = "ovs" if switch == "ovs" else "bridge"
    t.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    names = [f"s{i}" for i in range(1, n + 1)]
    for s in names:
        t.add_node(NodeSpec(s, kind="switch"))
    params = LinkParams(bw=rate_bps, delay=delay_s)
    ends = ["h1", *names, "h2"]
    for a, b in itertools.pairwise(ends):
        t.add_link(LinkSpec(a, b, params=params))
    addressing.assign_ports(t)
    return t


def groups(rate_bps: float, delay_s: float, switch: str) -> TopologySpec:
    """Fig. 4 as read here: 50 hosts, ten on each of five switches s1..s5 in a line."""
    t = TopologySpec()
    t.datapath = "ovs" if switch == "ovs" else "bridge"
    params = LinkParams(bw=rate_bps, delay=delay_s)
    for g in range(5):
        s = f"s{g + 1}"
        t.add_node(NodeSpec(s, kind="switch"))
        if g:
            t.add_link(LinkSpec(f"s{g}", s, params=params))
        for i in range(1, 11):
            h = f"h{10 * g + i}"
            t.add_node(NodeSpec(h, ip=f"10.0.{g}.{i}/16"))
            t.add_link(LinkSpec(h, s, params=params))
    addressing.assign_ports(t)
    return t


PAIRS = [(f"h{10 * g + 1}", f"h{10 * g + 10}") for g in range(5)]
"""Experiment (c)'s five flows."""


def peer_plan(spec: TopologySpec) -> dict[str, Any]:
    """What ``mininet_topology.py`` builds for ``spec``: hosts with their addresses,
    Linux bridges, and TCLinks of the spec's rate (Mbit/s)."""
    hosts = [n for n, s in spec.nodes.items() if s.kind != "switch"]
    switches = [n for n, s in spec.nodes.items() if s.kind == "switch"]
    links = []
    for link in spec.links:
        ip = {
            e: str(spec.nodes[e].ip) if spec.nodes[e].kind != "switch" else None
            for e in (link.a, link.b)
        }
        bw = link.direction(link.a).bw
        params = {"bw": bw / 1e6} if bw else {}
        links.append([link.a, link.b, link.a_intf, link.b_intf, ip[link.a], ip[link.b], params])
    return {"nodes": hosts, "switches": switches, "links": links}


# -- measuring -----------------------------------------------------------------------------


def _addr(spec: TopologySpec, node: str) -> str:
    return str(spec.nodes[node].ip).split("/")[0]


def _flows(
    spec: TopologySpec, nodes: dict[str, Any], pairs: Sequence[tuple[str, str]]
) -> list[iperf3.Flow]:
    return [
        iperf3.Flow(f"{a}>{b}", cast(Any, nodes[a]), cast(Any, nodes[b]), _addr(spec, b), _PORT + i)
        for i, (a, b) in enumerate(pairs)
    ]


def _measure(
    opts: VtOptions,
    spec: TopologySpec,
    stack: _Stack,
    pairs: Sequence[tuple[str, str]],
    tdf_high: float,
) -> TcpResult:
    """The flows of ``pairs`` at once, as a judged TCP result: on a fidelnet network,
    :func:`fidelnet.measure.tcp.tcp` (paths watched by the run monitor); on the
    peer, iperf3 in its namespaces with the machine watched."""
    seconds = opts.warmup + opts.duration
    timeout = seconds * tdf_high * 1.5 + 60  # real seconds: a dilated run takes longer
    if stack.net is not None:
        return tcp_flows(
            stack.net, pairs, duration=seconds, interval=1.0, warmup=opts.warmup,
            timeout=timeout, port=_PORT,
        )  # fmt: skip
    with watching(None) as mon:
        mon.begin()
        outs = iperf3.run(
            _flows(spec, stack.nodes, pairs), duration=seconds, interval=1.0, timeout=timeout
        )
        mon.end()
    flows = []
    for out, (a, b) in zip(outs, pairs, strict=True):
        rows = [
            TcpInterval(t_s=iv.start_s, end_s=iv.end_s, bytes=iv.bytes, goodput_bps=iv.bps,
                        warmup=iv.start_s < opts.warmup - 0.5)
            for iv in out.server.intervals
        ]  # fmt: skip
        kept = [iv for iv in out.server.intervals if iv.start_s >= opts.warmup - 0.5]
        span = sum(iv.seconds for iv in kept)
        goodput = 8.0 * sum(iv.bytes for iv in kept) / span if span else 0.0
        flows.append(
            TcpFlowResult(
                src=a, dst=b, port=out.flow.port, dst_addr=out.flow.addr,
                sender_bps=out.client.sent_bps or 0.0,
                receiver_bps=out.server.received_bps or 0.0,
                goodput_bps=goodput, measured_s=span, intervals=rows, warmup_s=opts.warmup,
            )
        )  # fmt: skip
    result = TcpResult(
        duration_s=seconds, interval_s=1.0, warmup_s=opts.warmup, flows=flows,
        total_goodput_bps=sum(f.goodput_bps for f in flows),
        jain=jain([f.goodput_bps for f in flows]) if len(flows) > 1 else None,
    )  # fmt: skip
    return judged(result, mon.record(), capacity_limited=True)


@dataclass
class _Stack:
    name: str
    nodes: dict[str, Any]
    net: Any = None  # a fidelnet Network
    mininet: str = ""  # the peer's version

    def tdf(self) -> float:
        return float(self.net.tdf_now()) if self.net is not None else 1.0

    def provenance(self) -> Provenance:
        if self.net is not None:
            return collect(self.net, command=_COMMAND)
        prov = collect(None, command=_COMMAND, tools={"mininet": self.mininet})
        return prov.model_copy(update={"backends": {"node:mininet": len(self.nodes)}})


def _timed(
    opts: VtOptions,
    experiment: str,
    x: float,
    stack: _Stack,
    spec: TopologySpec,
    pairs: Sequence[tuple[str, str]],
) -> Point:
    before = len(stack.net.vt_page.history) if stack.net is not None and stack.net.vt_page else 0
    seen = [stack.tdf()]
    began = time.monotonic()
    high = opts.tdf_high if stack.name == "fidelnet-vt" else 1.0
    result = _measure(opts, spec, stack, pairs, high)
    wall = time.monotonic() - began
    if stack.net is not None and stack.net.vt_page is not None:
        seen += [f for _t, f, _w in stack.net.vt_page.history[before:]]
    save_result(opts.out, f"{experiment}-{x:g}-{stack.name}", result, stack.provenance())
    goodput = {f"{f.src}>{f.dst}": f.goodput_bps for f in result.flows}
    series = {f"{f.src}>{f.dst}": [iv.goodput_bps for iv in f.intervals] for f in result.flows}
    verdict = result.verdict.level if result.verdict is not None else "unjudged"
    return Point(experiment, x, stack.name, goodput, series, wall, (min(seen), max(seen)),
                 verdict=verdict)  # fmt: skip


@contextlib.contextmanager
def _stack(opts: VtOptions, name: str, spec: TopologySpec) -> Any:
    """A running stack for ``spec``: a fidelnet network (dilated or not) or Mininet."""
    if name == "mininet":
        from fidelnet.bench.peer import MininetTopology

        with MininetTopology(peer_plan(spec)) as peer:
            yield _Stack(name, dict(peer.nodes), mininet=peer.version)
        return
    from fidelnet.network import Network

    tdf: Any = None
    if name == "fidelnet-vt":
        tdf = AutoTdf(high=opts.tdf_high) if opts.tdf == "auto" else float(opts.tdf)
    own = copy.deepcopy(spec)  # a network changes its spec (its TDF): each stack its own
    own.tdf, own.tdf_auto = None, None
    with Network(own, tdf=tdf, command="fidelnet bench vt") as net:
        yield _Stack(name, {n: net[n] for n in spec.nodes if spec.nodes[n].kind != "switch"}, net)


def _experiment_a(opts: VtOptions, say: Callable[[str], None]) -> list[Point]:
    points = []
    for name in opts.stacks():
        if name == "mininet":  # its TCLinks are fixed when built: one network per rate
            for r in opts.rates_gbps:
                spec = chain(opts.switches, r * 1e9, 10e-6, opts.switch)
                with _stack(opts, name, spec) as st:
                    say(f"(a) {name}: {opts.switches} switches at {r:g} Gbit/s")
                    points.append(_timed(opts, "a", r, st, spec, [("h1", "h2")]))
            continue
        spec = chain(opts.switches, opts.rates_gbps[0] * 1e9, 10e-6, opts.switch)
        with _stack(opts, name, spec) as st:
            for r in opts.rates_gbps:
                for link in st.net.links:
                    link.set(bw=f"{r:g}Gbit")
                say(f"(a) {name}: {opts.switches} switches at {r:g} Gbit/s")
                points.append(_timed(opts, "a", r, st, spec, [("h1", "h2")]))
    return points


def _experiment_b(opts: VtOptions, say: Callable[[str], None]) -> list[Point]:
    points = []
    for n in opts.sizes:
        spec = chain(n, opts.rate_b_gbps * 1e9, 50e-6, opts.switch)
        for name in opts.stacks():
            with _stack(opts, name, spec) as st:
                say(f"(b) {name}: {n} switches at {opts.rate_b_gbps:g} Gbit/s")
                points.append(_timed(opts, "b", n, st, spec, [("h1", "h2")]))
    return points


def _experiment_c(opts: VtOptions, say: Callable[[str], None]) -> list[Point]:
    points = []
    spec = groups(1e9, 100e-6, opts.switch)
    for name in opts.stacks():
        with _stack(opts, name, spec) as st:
            say(f"(c) {name}: phase 1, one flow")
            points.append(_timed(opts, "c", 1, st, spec, PAIRS[:1]))
            say(f"(c) {name}: phase 2, five flows at once")
            points.append(_timed(opts, "c", 2, st, spec, PAIRS))
    return points


def run(opts: VtOptions, say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Run the experiments; the summary (also ``opts.out/summary/vt.json``), with the
    tables and figures of :mod:`fidelnet.bench.vt_report`."""
    from fidelnet.bench import vt_report
    from fidelnet.bench.peer import mininet_python
    from fidelnet.kernel import tc

    opts.check()
    if opts.peer and mininet_python() is None:
        raise MeasurementError(
            "the Mininet peer is not available: install Debian's 'mininet' (make bench does), "
            "or run with --no-peer"
        )
    opts.out.mkdir(parents=True, exist_ok=True)
    netem = "netem" in tc.kernel_qdiscs(("netem",))
    points: list[Point] = []
    walls: dict[str, float] = {}
    for exp, fn in (("a", _experiment_a), ("b", _experiment_b), ("c", _experiment_c)):
        if exp in opts.experiments:
            began = time.monotonic()
            points += fn(opts, say)
            walls[exp] = time.monotonic() - began
    summary = vt_report.summarize(opts, points, walls, netem)
    summary["figures"] = [[t, str(p)] for t, p in vt_report.figures(opts.out, points)]
    (opts.out / "summary").mkdir(exist_ok=True)
    (opts.out / "summary" / "vt.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
