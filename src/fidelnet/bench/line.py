"""``fidelnet bench line``: the CIMininet 7-node line experiment, fidelnet beside
stock Mininet in the same run.

Topology: ``lg - h1 - ... - h7 - rx``. h1..h7 are routers (kernel IPv4
forwarding, static routes); ``lg`` (load generator) and ``rx`` (receiver) are
namespaces of their own attached to h1 and h7, standing in for the paper's
external MoonGen host. The same line is built by fidelnet and by Debian's
Mininet (``mininet_line.py``); both are up at once and measured alternately with
the same generator, so machine noise falls on both alike.

Traffic: 64-byte frames (84 B on the wire), CBR and bursts of 100 packets, at
50..1000 kpps; the maximum zero-loss rate (NDR, and PDR at 0.5 %) by binary
search for each stack and shape; the one-way latency at half of Mininet's NDR.

CPU placement (2 cores): the generator runs alone on the first CPU; h1's receive
processing is steered with RPS to the last CPU, where the forwarding along the
line and the receiver run. Without this the generator shares its core with
the forwarding softirqs and cannot pass about 150 kpps (../shared/MACHINE.md).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fidelnet.bench.peer import MininetLine
from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.measure import packets, pktgen
from fidelnet.measure.provenance import Provenance, collect, tool_version
from fidelnet.measure.results import FloorSummary, UdpResult, ZeroLossResult, save_result
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec

__all__ = ["RATES_KPPS", "LineOptions", "Stack", "run", "topology"]

RATES_KPPS: tuple[float, ...] = (50, 100, 200, 300, 500, 700, 900, 1000)
FRAME = 64


def topology(n: int = 7) -> TopologySpec:
    """lg - h1 - ... - hn - rx; link i joins chain[i] (10.10.i.1/24) and chain[i+1]
    (10.10.i.2/24), as ``mininet_line.py`` builds it."""
    spec = TopologySpec(auto_routes=True)
    names = ["lg", *[f"h{i}" for i in range(1, n + 1)], "rx"]
    for name in names:
        spec.add_node(NodeSpec(name, kind="host" if name in ("lg", "rx") else "router"))
    for i in range(len(names) - 1):
        a, b = names[i], names[i + 1]
        a_ip, b_ip = f"10.10.{i}.1/24", f"10.10.{i}.2/24"
        spec.add_link(LinkSpec(a, b, a_ip=a_ip, b_ip=b_ip))
        if spec.nodes[a].ip is None:
            spec.nodes[a].ip = a_ip
        if spec.nodes[b].ip is None:
            spec.nodes[b].ip = b_ip
    return spec


@dataclass
class LineOptions:
    out: Path
    n: int = 7
    rates_kpps: tuple[float, ...] = RATES_KPPS
    duration: float = 2.0
    trial_s: float = 1.0
    burst: int = 100
    high_pps: float = 1_000_000.0
    resolution_pps: float = 5_000.0
    peer: bool = True
    shapes: tuple[str, ...] = ("cbr", "burst")
    mode: pktgen.Mode = "gso"
    fastpath: str | None = None  # "xdp": fidelnet's routers forward in XDP

    def check(self) -> None:
        if not 2 <= self.n <= 64:
            raise ValidationError("n", "the line needs 2..64 routers", self.n)
        if not self.rates_kpps or any(r <= 0 or r > 10_000 for r in self.rates_kpps):
            raise ValidationError("rates", "each rate must be in (0, 10000] kpps", self.rates_kpps)
        if self.mode not in pktgen.MODES:
            raise ValidationError("mode", "unknown sender mode", self.mode, pktgen.MODES)
        for s in self.shapes:
            if s not in ("cbr", "burst"):
                raise ValidationError("shapes", "unknown traffic shape", s, ("cbr", "burst"))
        pktgen.TrafficSpec(self.high_pps, FRAME, self.duration, "burst", self.burst).check()
        pktgen.TrafficSpec(self.high_pps, FRAME, self.trial_s).check()
        if self.fastpath not in (None, "xdp"):
            raise ValidationError("fastpath", "unknown fast path", self.fastpath, ["xdp"])


@dataclass
class Stack:
    """One side of the comparison: where to send from and to, and its provenance."""

    name: str
    src: pktgen.Runner
    dst: pktgen.Runner
    dst_addr: str
    provenance: Provenance
    results: dict[str, UdpResult] = field(default_factory=dict)
    searches: dict[str, ZeroLossResult] = field(default_factory=dict)


def _key(shape: str, rate_pps: float) -> str:
    return f"{shape}-{rate_pps / 1000:05.0f}k"


class _Bench:
    def __init__(
        self, opts: LineOptions, floor: FloorSummary | None, say: Callable[[str], None]
    ) -> None:
        self.opts = opts
        self.floor = floor
        self.say = say
        self.place = packets.placement(True, None, None)

    def measure(self, stack: Stack, shape: str, rate: float, duration: float) -> UdpResult:
        spec = pktgen.TrafficSpec(
            rate,
            FRAME,
            duration,
            shape,  # type: ignore[arg-type]
            self.opts.burst,
            mode=self.opts.mode,
        )
        name = f"{stack.name}-{_key(shape, rate)}"
        result = pktgen.run(
            stack.src,
            stack.dst,
            stack.dst_addr,
            spec,
            sender_cpu=self.place.sender,
            receiver_cpu=self.place.receiver,
            hdr_log=str(self.opts.out / f"{name}.hlog"),
        )
        save_result(self.opts.out, name, result, stack.provenance, self.floor)
        return result

    def sweep(self, stacks: list[Stack]) -> None:
        for shape in self.opts.shapes:
            for kpps in self.opts.rates_kpps:
                for stack in stacks:
                    self.say(f"{stack.name}: {shape} {kpps:g} kpps, {self.opts.duration:g} s")
                    r = self.measure(stack, shape, kpps * 1000, self.opts.duration)
                    stack.results[_key(shape, kpps * 1000)] = r

    def search(self, stack: Stack, shape: str) -> ZeroLossResult:
        o = self.opts

        def trial(rate: float) -> UdpResult:
            spec = pktgen.TrafficSpec(rate, FRAME, o.trial_s, shape, o.burst, mode=o.mode)  # type: ignore[arg-type]
            return pktgen.run(
                stack.src,
                stack.dst,
                stack.dst_addr,
                spec,
                sender_cpu=self.place.sender,
                receiver_cpu=self.place.receiver,
            )

        self.say(f"{stack.name}: zero-loss search, {shape}")
        low = 10_000.0
        ndr, pdr, trials = packets.search(
            trial,
            low_pps=low,
            high_pps=o.high_pps,
            resolution_pps=o.resolution_pps,
            pdr_loss=0.005,
            max_trials=30,
        )
        result = packets.finish(
            "lg", "rx", FRAME, shape, o.burst, o.trial_s, o.resolution_pps, low, o.high_pps,
            0.005, ndr, pdr, trials,
        )  # fmt: skip
        save_result(o.out, f"{stack.name}-zero-loss-{shape}", result, stack.provenance, self.floor)
        stack.searches[shape] = result
        return result


def _fmt_us(ns: int) -> str:
    return f"{ns / 1000:.1f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def tables(
    stacks: list[Stack], half: dict[str, UdpResult]
) -> list[tuple[str, list[str], list[list[str]]]]:
    """The side-by-side tables (title, header, rows) for the console and the report."""
    out: list[tuple[str, list[str], list[list[str]]]] = []
    names = [s.name for s in stacks]
    shapes = sorted(
        {k.split("-")[0] for s in stacks for k in s.results}, key=["cbr", "burst"].index
    )
    for shape in shapes:
        header = ["offered kpps"]
        for n in names:
            header += [f"{n} loss %", f"{n} p50 µs", f"{n} p99.9 µs", f"{n} max µs"]
        rows = []
        keys = sorted({k for s in stacks for k in s.results if k.startswith(shape)})
        for k in keys:
            row = [f"{float(k.split('-')[1].rstrip('k')):g}"]
            for s in stacks:
                r = s.results.get(k)
                if r is None:
                    row += ["", "", "", ""]
                    continue
                loss = f"{100 * r.loss_ratio:.3f}" + ("*" if not r.rate_reached else "")
                lat = r.latency
                row += [loss, _fmt_us(lat.p50_ns), _fmt_us(lat.p999_ns), _fmt_us(lat.max_ns)]
            rows.append(row)
        out.append(
            (
                f"{shape}: 64-byte frames through the line (* generator short of the rate)",
                header,
                rows,
            )
        )
    summary_header = ["figure", *names]
    if len(stacks) == 2:
        summary_header.append(f"ratio {names[0]}/{names[1]}")
    rows = []
    for shape in shapes:
        for label, attr in (("NDR kpps", "ndr_pps"), ("PDR 0.5% kpps", "pdr_pps")):
            vals = [
                float(getattr(s.searches[shape], attr)) if shape in s.searches else 0.0
                for s in stacks
            ]
            row = [f"{shape} {label}", *[f"{v / 1000:.1f}" for v in vals]]
            if len(stacks) == 2:
                row.append(_ratio(vals[0], vals[1]))
            rows.append(row)
    if half:
        vals = [float(half[s.name].latency.p999_ns) for s in stacks if s.name in half]
        rate = next(iter(half.values())).requested_pps
        row = [
            f"p99.9 µs at {rate / 1000:.0f} kpps (50% of Mininet's NDR)",
            *[_fmt_us(int(v)) for v in vals],
        ]
        if len(vals) == 2:
            row.append(_ratio(vals[0], vals[1]))
        rows.append(row)
    out.append(("Summary", summary_header, rows))
    return out


def run(
    opts: LineOptions,
    *,
    floor: FloorSummary | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Build both lines, measure, save every result in ``opts.out``; returns the summary
    (also written to ``opts.out/summary/line.json``)."""
    from fidelnet.network import Network

    opts.check()
    opts.out.mkdir(parents=True, exist_ok=True)
    bench = _Bench(opts, floor, say)
    version = tool_version([pktgen.find_pktgen(), "--version"]) or "?"
    addr = f"10.10.{opts.n}.2"
    peer = MininetLine(opts.n) if opts.peer else None
    if peer is not None and peer.python is None:
        raise MeasurementError(
            "the Mininet peer is not available: install Debian's 'mininet' (make bench does), "
            "or run with --no-peer"
        )
    say(f"building the {opts.n}-router line with fidelnet" + (" and Mininet" if peer else ""))
    spec = topology(opts.n)
    spec.fastpath = opts.fastpath  # type: ignore[assignment]
    name = "fidelnet-xdp" if opts.fastpath else "fidelnet"
    with Network(spec, command="fidelnet bench line") as net:
        hop = packets.first_hop(net, "lg")
        if hop is None:
            raise MeasurementError("the line has no link from lg")
        stacks = [Stack(name, net["lg"], net["rx"], addr, collect(net, tools={"pktgen": version}))]
        if bench.place.receiver is not None:
            packets.steer_rps(hop[0], hop[1], bench.place.receiver)
        if opts.mode == "gso":
            pktgen.prepare_gso(net["lg"], [i.name for i in net["lg"].intf_list()])
        if peer is not None:
            peer.__enter__()
        try:
            if peer is not None:
                if bench.place.receiver is not None:
                    peer.nodes["h1"].steer_rps("h1-eth0", bench.place.receiver)
                if opts.mode == "gso":
                    pktgen.prepare_gso(peer.nodes["lg"], ["lg-eth0"])
                prov = collect(None, tools={"pktgen": version, "mininet": peer.version})
                prov = prov.model_copy(
                    update={"backends": {"link:veth": opts.n + 1, "node:mininet": opts.n + 2}}
                )
                stacks.append(Stack("mininet", peer.nodes["lg"], peer.nodes["rx"], addr, prov))
            bench.sweep(stacks)
            for shape in opts.shapes:
                for stack in stacks:
                    bench.search(stack, shape)
            half: dict[str, UdpResult] = {}
            ref = stacks[-1].searches.get("cbr")
            if ref is not None and ref.ndr_pps > 0:
                rate = ref.ndr_pps / 2
                for stack in stacks:
                    say(
                        f"{stack.name}: latency at half of {stacks[-1].name}'s NDR "
                        f"({rate / 1000:.0f} kpps)"
                    )
                    r = bench.measure(stack, "cbr", rate, 2 * opts.duration)
                    half[stack.name] = r
        finally:
            if peer is not None:
                peer.__exit__(None, None, None)
    summary = {
        "tables": [{"title": t, "header": h, "rows": r} for t, h, r in tables(stacks, half)],
        "placement": {"sender_cpu": bench.place.sender, "receiver_cpu": bench.place.receiver},
        "mode": opts.mode,
        "fastpath": opts.fastpath,
        "ndr_pps": {s.name: {k: v.ndr_pps for k, v in s.searches.items()} for s in stacks},
        "half_rate_p999_ns": {k: v.latency.p999_ns for k, v in half.items()},
    }
    (opts.out / "summary").mkdir(exist_ok=True)
    (opts.out / "summary" / "line.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary
