"""``fidelnet bench hvnet``: HVNet's experiment, fidelnet beside stock Mininet.

K seeded random topologies of routers joined directly (:mod:`fidelnet.topology.randomnet`),
each with random flows along simple paths of 2-5 hops, routed by their own paths
(per-flow policy routing, :mod:`fidelnet.topology.flows`). Each topology is built by
fidelnet (its links on the backend asked: ``veth``, ``engine`` or ``hw``) and by
Debian's Mininet (``mininet_topology.py``: the same nodes, links, addresses, routes
and flow rules, on veth), both at once; every flow is then sent at its own fixed
rate, all flows together (:mod:`fidelnet.measure.flowset`), on one stack and then
the other (the order alternates between topologies).

Outputs (the report's first screen): Table I, per hop count the worst-case one-way
delay and jitter of all flows of that length over all topologies, fidelnet beside
Mininet with ratios, and their p99.9; the 5000 worst latency events over time of
the first topology (HVNet Fig. 4/6); per-flow HDR percentile plots grouped by hop
count for the first topology (Fig. 5); the HDR of every jitter value of all
topologies (Fig. 8). Every flow's result file, with its verdict, is kept.

How it differs from HVNet: there one MoonGen load generator on a separate machine
sends all flows (random order from a table) through the VMs and a hardware
timestamper measures; here each flow has its own sender in its source node and its
own receiver in its destination node, with software timestamps on one clock. HVNet's
rates (1-294 Mbit/s per flow) assume hardware links; the default here is a hundredth
of that. At a tenth (8 flows, about 38 kpps through 2-5 hops each, 16 pktgen
processes) this 2-core machine was saturated: every result untrusted (runnable tasks
waited for a CPU 83 % of the window), and a benchmark of the machine's saturation
says nothing about the emulators.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fidelnet.bench.peer import MininetTopology, mininet_python
from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.fidelity.monitor import watching
from fidelnet.measure import pktgen
from fidelnet.measure.flowset import FlowRun, run_flows
from fidelnet.measure.provenance import Provenance, collect, tool_version
from fidelnet.measure.results import FloorSummary, UdpResult, save_result
from fidelnet.measure.verdicts import judged
from fidelnet.topology import addressing, flows, routing
from fidelnet.topology.randomnet import random_flows, random_topology
from fidelnet.topology.spec import TopologySpec

__all__ = ["HvnetOptions", "peer_plan", "run", "topology"]

LINKS = ("veth", "engine", "hw")


@dataclass
class HvnetOptions:
    out: Path
    topologies: int = 3
    nodes: int = 8
    degree: float = 2.5
    flows: int = 8
    hops: tuple[int, int] = (2, 5)
    rate_mbps: tuple[float, float] = (0.1, 2.94)
    size: int = 363
    duration: float = 5.0
    seed: int = 1
    link: str = "veth"
    hardware_pairs: list[tuple[str, str]] = field(default_factory=list)
    peer: bool = True
    worst: int = 5000

    def check(self) -> None:
        if not 1 <= self.topologies <= 100:
            raise ValidationError("topologies", "must be 1..100", self.topologies)
        if not 3 <= self.nodes <= 64:
            raise ValidationError("nodes", "must be 3..64 routers", self.nodes)
        if not 1 <= self.flows <= 256:
            raise ValidationError("flows", "must be 1..256", self.flows)
        if self.link not in LINKS:
            raise ValidationError("link", "unknown link kind", self.link, LINKS)
        if self.link == "hw" and not self.hardware_pairs:
            raise ValidationError("pairs", "--link hw needs the interface pairs (--pairs)")
        if not 0.5 <= self.duration <= 600:
            raise ValidationError("duration", "must be 0.5..600 seconds", self.duration)
        if not 0 <= self.worst <= 100_000:
            raise ValidationError("worst", "must be 0..100000", self.worst)
        # The generators check the rest (ranges, sizes) with the field named.
        topology(self, 0)


def topology(opts: HvnetOptions, k: int) -> TopologySpec:
    """Topology ``k`` (0-based) with its flows, seeded by ``opts.seed + k``."""
    seed = opts.seed + k
    spec = random_topology(opts.nodes, seed, opts.degree)
    spec.flows = random_flows(spec, opts.flows, seed, opts.hops, opts.rate_mbps, opts.size)
    if opts.link == "engine":
        spec.link_backend = "engine"
    elif opts.link == "hw":
        spec.link_backend = "hw"
        spec.hardware_pairs = list(opts.hardware_pairs)
    return spec


def peer_plan(spec: TopologySpec) -> dict[str, Any]:
    """What ``mininet_topology.py`` builds: the same nodes, links (names, addresses),
    destination routes and flow rules, as argv lists per node."""
    ends = addressing.interfaces(spec)
    links = []
    for i, link in enumerate(spec.links):
        a, b = ends[2 * i], ends[2 * i + 1]
        links.append([link.a, link.b, a.name, b.name, a.ip, b.ip])
    commands: dict[str, list[list[str]]] = {name: [] for name in spec.nodes}
    for name, routes in routing.static_routes(spec).items():
        for r in routes:
            commands[name].append(["ip", "route", "replace", r.dst, "via", r.via, "dev", r.dev])
    names = {v: k for k, v in flows.FLOW_PROTOCOLS.items()}
    for name, policy in flows.plan(spec).items():
        for table, (gateway, ifname) in sorted(policy.tables.items()):
            commands[name].append(
                ["ip", "route", "replace", "default", "via", gateway, "dev", ifname,
                 "table", str(table)]
            )  # fmt: skip
        for prio, proto, port, table in policy.rules:
            commands[name].append(
                ["ip", "rule", "add", "pref", str(prio), "ipproto", names[proto], "dport",
                 str(port), "table", str(table)]
            )  # fmt: skip
    return {
        "nodes": list(spec.nodes),
        "routers": [n for n, node in spec.nodes.items() if node.kind == "router"],
        "links": links,
        "commands": {k: v for k, v in commands.items() if v},
    }


@dataclass
class _Stack:
    name: str
    nodes: dict[str, Any]
    provenance: Provenance
    net: Any = None


def _measure(opts: HvnetOptions, spec: TopologySpec, stack: _Stack, k: int) -> dict[str, UdpResult]:
    runs = [
        FlowRun(f, stack.nodes[f.src], stack.nodes[f.dst], str(spec.nodes[f.dst].ip).split("/")[0])
        for f in spec.flows
    ]
    # A short run first, not kept: neighbour entries, caches and the processes'
    # first pages; the stack measured first in a topology was otherwise the slower
    # one, whichever it was (p99.9 2-3x in a first trial).
    run_flows(runs, min(1.0, opts.duration), seed=opts.seed * 1000 + k + 500)
    with watching(stack.net) as mon:
        mon.begin()
        got = run_flows(runs, opts.duration, worst=opts.worst, seed=opts.seed * 1000 + k)
        mon.end()
    record = mon.record()
    return {name: judged(r, record, capacity_limited=False) for name, r in got.items()}


def run(
    opts: HvnetOptions,
    *,
    floor: FloorSummary | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Build, measure and save every topology; returns the summary (also written to
    ``opts.out/summary/hvnet.json``)."""
    from fidelnet.bench import hvnet_report
    from fidelnet.network import Network

    opts.check()
    if opts.peer and mininet_python() is None:
        raise MeasurementError(
            "the Mininet peer is not available: install Debian's 'mininet' (make bench does), "
            "or run with --no-peer"
        )
    opts.out.mkdir(parents=True, exist_ok=True)
    version = tool_version([pktgen.find_pktgen(), "--version"]) or "?"
    measured: list[hvnet_report.Measured] = []
    for k in range(opts.topologies):
        spec = topology(opts, k)
        say(
            f"topology {k + 1}/{opts.topologies}: {opts.nodes} routers, {len(spec.links)} links "
            f"({opts.link}), {len(spec.flows)} flows of "
            f"{min(f.hops for f in spec.flows)}-{max(f.hops for f in spec.flows)} hops"
        )
        with contextlib.ExitStack() as held:
            net = held.enter_context(Network(spec, command="fidelnet bench hvnet"))
            stacks = [
                _Stack(
                    "fidelnet",
                    {n: net[n] for n in spec.nodes},
                    collect(net, tools={"pktgen": version}),
                    net,
                )
            ]
            if opts.peer:
                peer = held.enter_context(MininetTopology(peer_plan(spec)))
                prov = collect(None, tools={"pktgen": version, "mininet": peer.version})
                prov = prov.model_copy(
                    update={"backends": {"link:veth": len(spec.links), "node:mininet": opts.nodes}}
                )
                stacks.append(_Stack("mininet", dict(peer.nodes), prov))
            order = stacks if k % 2 == 0 else stacks[::-1]
            for stack in order:
                say(f"  {stack.name}: {len(spec.flows)} flows for {opts.duration:g} s")
                results = _measure(opts, spec, stack, k)
                for f in spec.flows:
                    save_result(
                        opts.out, f"t{k + 1}-{f.name}-{stack.name}", results[f.name],
                        stack.provenance, floor,
                    )  # fmt: skip
                measured.append(hvnet_report.Measured(k + 1, stack.name, spec, results))
    summary = hvnet_report.summarize(opts, measured)
    summary["figures"] = [
        [title, str(path)] for title, path in hvnet_report.figures(opts.out, measured, opts.worst)
    ]
    (opts.out / "summary").mkdir(exist_ok=True)
    (opts.out / "summary" / "hvnet.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
