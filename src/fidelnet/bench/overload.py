"""Overload on purpose, and clean runs beside it: does the verdict tell them apart?

Each case builds a small network, optionally injects one kind of overload, runs one
monitored pktgen measurement and returns the verdict. The injected kinds are the
ones users meet: busy processes on the host and inside nodes, a CPU-limited node
below what its traffic needs, a routed chain offered more than the machine forwards,
and an engine link whose intake queue (the TAP's transmit queue) is too small for
the engine's stalls. The clean cases stay within what the machine carries.

Used by ``tests/scenarios/test_fidelity_overload.py`` (one run per case) and by
``bench/fidelity.py`` (the full count, with detection and false-alarm rates). Hogs
are processes this module starts and ends by PID, never by name.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fidelnet.fidelity.verdict import Verdict
from fidelnet.measure.packets import udp
from fidelnet.network import Network
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec, line

__all__ = ["CASES", "Case", "Outcome", "run_case"]

_HOG = ["sh", "-c", "while :; do :; done"]


@dataclass(frozen=True)
class Case:
    name: str
    overload: bool
    what: str
    run: Callable[[float], Verdict]


@dataclass(frozen=True)
class Outcome:
    case: str
    overload: bool
    level: str
    summary: str
    overhead_pct_core: float
    # The run's own record accounts for the flag: the kernel ran the link engine as
    # late after its timer as the engine released packets (reason engine_woken_late).
    woken_late: bool = False

    @property
    def flagged(self) -> bool:
        return self.level != "trusted"


def _pair(params: LinkParams | None = None, cpu: float | None = None) -> TopologySpec:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24", cpu=cpu))
    spec.add_link(LinkSpec("h1", "h2", params=params or LinkParams()))
    return spec


@contextmanager
def _hogs(starters: list[Callable[[], subprocess.Popen[bytes]]]) -> Iterator[None]:
    procs = [start() for start in starters]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def _verdict(net: Network, src: str, dst: str, rate: float, duration: float) -> Verdict:
    r = udp(net, src, dst, rate, duration=duration)
    assert r.verdict is not None
    return r.verdict


def _host_proc() -> subprocess.Popen[bytes]:
    return subprocess.Popen(_HOG, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def clean_veth(duration: float) -> Verdict:
    with Network(_pair()) as net:
        return _verdict(net, "h1", "h2", 5_000, duration)


def clean_line(duration: float) -> Verdict:
    with Network(line(4)) as net:
        return _verdict(net, "h1", "h4", 5_000, duration)


def clean_tc(duration: float) -> Verdict:
    with Network(_pair(LinkParams(bw=50e6))) as net:
        return _verdict(net, "h1", "h2", 2_000, duration)


def clean_engine(duration: float) -> Verdict:
    with Network(_pair(LinkParams(delay=0.010))) as net:
        return _verdict(net, "h1", "h2", 1_000, duration)


def host_hogs(duration: float) -> Verdict:
    with Network(_pair()) as net, _hogs([_host_proc, _host_proc]):
        return _verdict(net, "h1", "h2", 5_000, duration)


def node_hogs(duration: float) -> Verdict:
    with Network(line(4)) as net:

        def in_node(name: str) -> Callable[[], subprocess.Popen[bytes]]:
            return lambda: net[name].popen(
                _HOG, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )

        with _hogs([in_node("h2"), in_node("h3")]):
            return _verdict(net, "h1", "h4", 5_000, duration)


def cpu_limited(duration: float) -> Verdict:
    # The receiver's node gets 1 % of the machine (2 % of one core here): its
    # receiver needs more at 20 kpps.
    with Network(_pair(cpu=0.01)) as net:
        return _verdict(net, "h1", "h2", 20_000, duration)


def chain_over_capacity(duration: float) -> Verdict:
    # Five routed hops offered far beyond what two cores forward (about 150 kpps on
    # a 7-node line here, ../shared/MACHINE.md).
    with Network(line(6)) as net:
        return _verdict(net, "h1", "h6", 400_000, duration)


def tiny_engine_queue(duration: float) -> Verdict:
    with Network(_pair(LinkParams(delay=0.010))) as net:
        for end in ("h1", "h2"):
            intf = net[end].intf_list()[0].name
            net[end].pexec(["ip", "link", "set", "dev", intf, "txqueuelen", "2"], timeout=10)
        return _verdict(net, "h1", "h2", 30_000, duration)


CASES: list[Case] = [
    Case("clean-veth", False, "veth pair, 5 kpps", clean_veth),
    Case("clean-line", False, "4-node routed line, 5 kpps", clean_line),
    Case("clean-tc", False, "tc link 50 Mbit/s, 2 kpps", clean_tc),
    Case("clean-engine", False, "engine link 10 ms, 1 kpps", clean_engine),
    Case("host-hogs", True, "two busy loops on the host, veth 5 kpps", host_hogs),
    Case("node-hogs", True, "busy loops in two routers of a line, 5 kpps", node_hogs),
    Case("cpu-limited", True, "receiver node limited to cpu=0.01, 20 kpps", cpu_limited),
    Case("chain-over", True, "6-node line offered 400 kpps", chain_over_capacity),
    Case(
        "tiny-queue", True, "engine link whose TAP queue holds 2 frames, 30 kpps", tiny_engine_queue
    ),
]


def run_case(case: Case, duration: float = 2.0) -> Outcome:
    v = case.run(duration)
    woken = any(r.code == "engine_woken_late" for r in v.reasons)
    return Outcome(case.name, case.overload, v.level, v.summary(3), 0.0, woken)
