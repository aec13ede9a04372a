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

``node="vm"`` (``--node vm``) is CIMininet's "VM with veth" variant: a third line
whose routers h1..hn are QEMU VMs (docs/vm.md), one vCPU each pinned to the
receiver's CPU, the generator and receiver namespaces as before, measured beside
the namespace line and Mininet in the same run. The VM line gets its own search
range (a VM forwards orders of magnitude fewer packets than a namespace, all the
more under TCG), and every result carries its verdict: a VM under TCG says so.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fidelnet.bench.peer import MininetLine
from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.fidelity.monitor import watching
from fidelnet.fidelity.record import MonitorRecord
from fidelnet.measure import packets, pktgen
from fidelnet.measure.provenance import Provenance, collect, tool_version
from fidelnet.measure.results import FloorSummary, UdpResult, ZeroLossResult, save_result
from fidelnet.measure.verdicts import judged
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec, VMSpec

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["RATES_KPPS", "RATES_VM_KPPS", "LineOptions", "Stack", "run", "topology"]

RATES_KPPS: tuple[float, ...] = (50, 100, 200, 300, 500, 700, 900, 1000)
RATES_VM_KPPS: tuple[float, ...] = (2, 5, 10, 20, 50, 100, 200, 500, 1000)
"""With VM routers: the namespace rates and the low ones a VM line can carry."""
FRAME = 64
NODES = ("netns", "vm")


def topology(n: int = 7, vm: VMSpec | None = None) -> TopologySpec:
    """lg - h1 - ... - hn - rx; link i joins chain[i] (10.10.i.1/24) and chain[i+1]
    (10.10.i.2/24), as ``mininet_line.py`` builds it. With ``vm``, h1..hn are VM
    nodes of that machine (lg and rx stay namespaces)."""
    spec = TopologySpec(auto_routes=True)
    names = ["lg", *[f"h{i}" for i in range(1, n + 1)], "rx"]
    for name in names:
        if name in ("lg", "rx"):
            spec.add_node(NodeSpec(name, kind="host"))
        elif vm is not None:
            spec.add_node(NodeSpec(name, kind="router", backend="qemu", vm=vm))
        else:
            spec.add_node(NodeSpec(name, kind="router"))
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
    node: str = "netns"  # "vm": a third line, its routers QEMU VMs
    vm_memory_mb: int = 256
    vm_high_pps: float = 200_000.0  # the VM line's search range and resolution
    vm_resolution_pps: float = 500.0

    def check(self) -> None:
        if not 2 <= self.n <= 64:
            raise ValidationError("n", "the line needs 2..64 routers", self.n)
        if self.node not in NODES:
            raise ValidationError("node", "unknown node kind", self.node, NODES)
        if self.node == "vm" and self.n > 16:
            raise ValidationError("n", "a line of VM routers takes at most 16", self.n)
        if self.node == "vm" and self.fastpath:
            raise ValidationError(
                "fastpath", "VM routers forward in their own kernel, not in XDP", self.fastpath
            )
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
    net: Network | None = None  # fidelnet's: its nodes are watched by the monitor
    low_pps: float = 10_000.0
    high_pps: float | None = None  # None: the options' high_pps
    resolution_pps: float | None = None
    settle_s: float = 0.0  # idle time before each measurement (queues drain)
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
        time.sleep(stack.settle_s)
        with watching(stack.net) as mon:
            mon.begin()
            result = pktgen.run(
                stack.src,
                stack.dst,
                stack.dst_addr,
                spec,
                sender_cpu=self.place.sender,
                receiver_cpu=self.place.receiver,
                hdr_log=str(self.opts.out / f"{name}.hlog"),
            )
            mon.end()
        result = judged(result, mon.record(), capacity_limited=False)
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

        records: dict[float, MonitorRecord] = {}

        def trial(rate: float) -> UdpResult:
            spec = pktgen.TrafficSpec(rate, FRAME, o.trial_s, shape, o.burst, mode=o.mode)  # type: ignore[arg-type]
            time.sleep(stack.settle_s)
            with watching(stack.net) as mon:
                mon.begin()
                got = pktgen.run(
                    stack.src,
                    stack.dst,
                    stack.dst_addr,
                    spec,
                    sender_cpu=self.place.sender,
                    receiver_cpu=self.place.receiver,
                )
                mon.end()
            records[float(round(rate))] = mon.record()
            return got

        self.say(f"{stack.name}: zero-loss search, {shape}")
        low = stack.low_pps
        high = stack.high_pps or o.high_pps
        resolution = stack.resolution_pps or o.resolution_pps
        ndr, pdr, trials = packets.search(
            trial,
            low_pps=low,
            high_pps=high,
            resolution_pps=resolution,
            pdr_loss=0.005,
            max_trials=30,
        )
        result = packets.finish(
            "lg", "rx", FRAME, shape, o.burst, o.trial_s, resolution, low, high,
            0.005, ndr, pdr, trials,
        )  # fmt: skip
        result = judged(result, records.get(float(round(ndr))), capacity_limited=False)
        save_result(o.out, f"{stack.name}-zero-loss-{shape}", result, stack.provenance, self.floor)
        stack.searches[shape] = result
        return result


def _fmt_us(ns: int) -> str:
    return f"{ns / 1000:.1f}"


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}" if b else "n/a"


def tables(
    stacks: list[Stack],
    half: dict[str, UdpResult],
    own: dict[str, UdpResult] | None = None,
) -> list[tuple[str, list[str], list[list[str]]]]:
    """The side-by-side tables (title, header, rows) for the console and the report:
    every figure per stack, and each stack's ratio to the last one (the reference,
    Mininet when it was measured). ``half``: at half the reference's NDR; ``own``:
    at half each stack's own NDR (when that is a different rate)."""
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
    ref = names[-1]
    others = names[:-1] if len(names) >= 2 else []
    summary_header = ["figure", *names, *[f"ratio {n}/{ref}" for n in others]]

    def ratios(vals: list[float]) -> list[str]:
        return [_ratio(v, vals[-1]) for v in vals[:-1]] if others else []

    rows = []
    for shape in shapes:
        for label, attr in (("NDR kpps", "ndr_pps"), ("PDR 0.5% kpps", "pdr_pps")):
            vals = [
                float(getattr(s.searches[shape], attr)) if shape in s.searches else 0.0
                for s in stacks
            ]
            rows.append([f"{shape} {label}", *[f"{v / 1000:.1f}" for v in vals], *ratios(vals)])
    if half:
        vals = [float(half[s.name].latency.p999_ns) if s.name in half else 0.0 for s in stacks]
        rate = next(iter(half.values())).requested_pps
        rows.append(
            [
                f"p99.9 µs at {rate / 1000:.0f} kpps (50% of {ref}'s NDR)",
                *[_fmt_us(int(v)) for v in vals],
                *ratios(vals),
            ]
        )
    if own:
        rows.append(
            [
                "p99.9 µs at 50% of its own NDR (kpps)",
                *[
                    f"{_fmt_us(own[s.name].latency.p999_ns)} "
                    f"({own[s.name].requested_pps / 1000:.1f})"
                    if s.name in own
                    else ""
                    for s in stacks
                ],
                *["" for _ in others],
            ]
        )
    out.append(("Summary", summary_header, rows))
    return out


def _vm_stack(
    opts: LineOptions,
    stack: contextlib.ExitStack,
    place: packets.Placement,
    version: str,
    say: Callable[[str], None],
) -> Stack:
    """The line with VM routers, built (VMs boot in parallel) and held open in ``stack``."""
    from fidelnet.network import Network

    pin = (place.receiver,) if place.receiver is not None else None
    vm = VMSpec(cpus=1, memory_mb=opts.vm_memory_mb, cpupin=pin)
    say(f"building the {opts.n}-router line with VM routers (QEMU, {opts.vm_memory_mb} MiB each)")
    net = stack.enter_context(Network(topology(opts.n, vm), command="fidelnet bench line"))
    lg = net["lg"]
    if opts.mode == "gso":
        pktgen.prepare_gso(lg, [i.name for i in lg.intf_list()])
    return Stack(
        "fidelnet-vm",
        lg,
        net["rx"],
        f"10.10.{opts.n}.2",
        collect(net, tools={"pktgen": version}),
        net=net,
        low_pps=opts.vm_resolution_pps,
        high_pps=min(opts.vm_high_pps, opts.high_pps),
        resolution_pps=opts.vm_resolution_pps,
        # An overloaded VM line holds up to about 0.6 s of packets in its queues
        # (TCG): measured right after, a low rate saw them as its own latency
        # (p99.9 537 ms at 4 kpps, 50 ms with the line idle first).
        settle_s=1.5,
    )


def run(
    opts: LineOptions,
    *,
    floor: FloorSummary | None = None,
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, Any]:
    """Build the lines (fidelnet's, with ``node="vm"`` its VM-router line too, and
    Mininet's), measure them alternately, save every result in ``opts.out``; returns
    the summary (also written to ``opts.out/summary/line.json``)."""
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
    stacks: list[Stack] = []
    half: dict[str, UdpResult] = {}
    own: dict[str, UdpResult] = {}
    with contextlib.ExitStack() as held:
        say(f"building the {opts.n}-router line with fidelnet" + (" and Mininet" if peer else ""))
        spec = topology(opts.n)
        spec.fastpath = opts.fastpath  # type: ignore[assignment]
        name = "fidelnet-xdp" if opts.fastpath else "fidelnet"
        net = held.enter_context(Network(spec, command="fidelnet bench line"))
        hop = packets.first_hop(net, "lg")
        if hop is None:
            raise MeasurementError("the line has no link from lg")
        stacks.append(
            Stack(name, net["lg"], net["rx"], addr, collect(net, tools={"pktgen": version}), net)
        )
        if bench.place.receiver is not None:
            packets.steer_rps(hop[0], hop[1], bench.place.receiver)
        if opts.mode == "gso":
            pktgen.prepare_gso(net["lg"], [i.name for i in net["lg"].intf_list()])
        if peer is not None:
            held.enter_context(peer)
            if bench.place.receiver is not None:
                peer.nodes["h1"].steer_rps("h1-eth0", bench.place.receiver)
            if opts.mode == "gso":
                pktgen.prepare_gso(peer.nodes["lg"], ["lg-eth0"])
            prov = collect(None, tools={"pktgen": version, "mininet": peer.version})
            prov = prov.model_copy(
                update={"backends": {"link:veth": opts.n + 1, "node:mininet": opts.n + 2}}
            )
            stacks.append(Stack("mininet", peer.nodes["lg"], peer.nodes["rx"], addr, prov))
        ref = _measure(bench, stacks, stacks[-1], None, half, own)
    vms: dict[str, Any] = {}
    if opts.node == "vm":
        # After the namespace lines are gone: idle VMs pinned to the receiver's core
        # disturbed them (a trial with all three up: fidelnet's p99.9 at 82 kpps
        # went from about 1.5 to 9 ms), and the VM line is measured at the
        # reference's half rate, known only now.
        with contextlib.ExitStack() as held:
            vm_stack = _vm_stack(opts, held, bench.place, version, say)
            _measure(bench, [vm_stack], stacks[-1], ref, half, own)
            vms = vm_stack.provenance.vms
        stacks.insert(0, vm_stack)
    summary = {
        "tables": [{"title": t, "header": h, "rows": r} for t, h, r in tables(stacks, half, own)],
        "placement": {"sender_cpu": bench.place.sender, "receiver_cpu": bench.place.receiver},
        "mode": opts.mode,
        "fastpath": opts.fastpath,
        "node": opts.node,
        "vms": vms,
        "ndr_pps": {s.name: {k: v.ndr_pps for k, v in s.searches.items()} for s in stacks},
        "half_rate_p999_ns": {k: v.latency.p999_ns for k, v in half.items()},
        "own_half_rate_p999_ns": {k: v.latency.p999_ns for k, v in own.items()},
        "verdicts": {
            s.name: {k: v.verdict.summary() for k, v in s.searches.items() if v.verdict}
            for s in stacks
        },
    }
    (opts.out / "summary").mkdir(exist_ok=True)
    (opts.out / "summary" / "line.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def _measure(
    bench: _Bench,
    stacks: list[Stack],
    reference: Stack,
    ref: ZeroLossResult | None,
    half: dict[str, UdpResult],
    own: dict[str, UdpResult],
) -> ZeroLossResult | None:
    """Sweep and search ``stacks`` (alternately), then measure latency at half the
    reference's CBR NDR (``ref``, or the reference's own search when it is among
    ``stacks``) and at half each stack's own NDR when that is another rate. Returns
    the reference's search."""
    opts = bench.opts
    bench.sweep(stacks)
    for shape in opts.shapes:
        for stack in stacks:
            bench.search(stack, shape)
    if ref is None:
        ref = reference.searches.get("cbr")
    if ref is not None and ref.ndr_pps > 0:
        rate = ref.ndr_pps / 2
        for stack in stacks:
            bench.say(
                f"{stack.name}: latency at half of {reference.name}'s NDR ({rate / 1000:.0f} kpps)"
            )
            half[stack.name] = bench.measure(stack, "cbr", rate, 2 * opts.duration)
    for stack in stacks:
        mine = stack.searches.get("cbr")
        if mine is None or mine.ndr_pps <= 0 or stack is reference:
            continue
        if ref is not None and abs(mine.ndr_pps - ref.ndr_pps) < 0.1 * ref.ndr_pps:
            continue  # about the reference's rate: measured just above
        rate = mine.ndr_pps / 2
        bench.say(f"{stack.name}: latency at half of its own NDR ({rate / 1000:.1f} kpps)")
        own[stack.name] = bench.measure(stack, "cbr", rate, 2 * opts.duration)
    return ref
