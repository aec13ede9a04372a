"""fidelnet.measure.tcp on real namespaces: iperf3 over a 10 Mbit/s, 5 ms engine link.

At 10 Mbit/s a 1448-byte segment travels in a 1514-byte frame, so the goodput can
be at most 9.564 Mbit/s; the link engine serialises exactly, so a correct run comes
close to that and never above it.
"""

from __future__ import annotations

import time
from itertools import pairwise
from typing import Any

import pytest
from _servers import start_listening

from _precision import precise
from fidelnet import Network
from fidelnet.errors import MeasurementError
from fidelnet.measure.path import path
from fidelnet.measure.tcp import tcp
from fidelnet.nodes.node import Node
from fidelnet.topology import LinkParams, TopologySpec, dumbbell, line, linear

pytestmark = [pytest.mark.privileged, pytest.mark.slow]

LINK = LinkParams(bw=10e6, delay=0.005)
MAX_GOODPUT = 10e6 * 1448 / 1514


def line10() -> TopologySpec:
    """h1 - s1 =(10 Mbit/s, 5 ms, engine)= s2 - h2."""
    spec = linear(2)
    for link in spec.links:
        if {link.a, link.b} == {"s1", "s2"}:
            link.params = LINK
            link.backend = "engine"
    return spec


def bell() -> TopologySpec:
    """h1, h2 - s1 =(10 Mbit/s, 5 ms, engine)= s2 - h3, h4."""
    spec = dumbbell(2, LINK)
    spec.links[0].backend = "engine"
    return spec


def iperf3_left(*nodes: Node) -> list[int]:
    """Pids of iperf3 processes still in the nodes' cgroups."""
    left = []
    for node in nodes:
        for d in node.cgroup_dirs():
            with open(f"{d}/cgroup.procs", encoding="ascii") as f:
                pids = [int(p) for p in f.read().split()]
            for pid in pids:
                try:
                    with open(f"/proc/{pid}/comm", encoding="utf-8") as f:
                        if f.read().strip() == "iperf3":
                            left.append(pid)
                except OSError:
                    continue
    return left


def test_paths_follow_switches_and_routes() -> None:
    with Network(line10()) as net:
        there, back = path(net, "h1", "h2"), path(net, "h2", "h1")
        assert there.nodes == ["h1", "s1", "s2", "h2"] and there.dst_addr == "10.0.0.2"
        assert back.nodes == ["h2", "s2", "s1", "h1"]
        assert there.capacity_bps == back.capacity_bps == 10e6
        assert there.delay_s == pytest.approx(0.005)
        assert there.bottleneck is not None and there.bottleneck.src == "s1"
    spec = line(3)  # routers h1 - h2 - h3, static routes
    spec.links[1].params_ab = LinkParams(bw=20e6, delay=0.002)  # h2 -> h3 only
    with Network(spec) as net:
        there, back = path(net, "h1", "h3"), path(net, "h3", "h1")
        assert there.nodes == ["h1", "h2", "h3"]
        assert there.capacity_bps == 20e6 and there.delay_s == pytest.approx(0.002)
        assert back.nodes == ["h3", "h2", "h1"] and back.capacity_bps is None
    spec = line(3)
    spec.auto_routes = False
    unrouted = r"path h1 -> h3 \(10.0.2.2\): h1 has no route"
    with Network(spec) as net, pytest.raises(MeasurementError, match=unrouted):
        path(net, "h1", "h3")


def test_single_flow_goodput_below_capacity() -> None:
    def measure() -> tuple[Any, float]:
        with Network(line10()) as net:
            start = time.monotonic()
            result = tcp(net, [("h1", "h2")], duration=6)
            elapsed = time.monotonic() - start
            assert iperf3_left(net["h1"], net["h2"]) == []
        # What no load changes: never above the bottleneck, the bookkeeping.
        flow = result.flows[0]
        assert flow.goodput_bps <= MAX_GOODPUT * 1.01
        assert [f.code for f in result.flags if f.code == "exceeds_bottleneck"] == []
        assert result.exceeding_intervals == 0
        assert result.warmup_s == 1.0 and result.rtt_s == pytest.approx(0.010)
        assert result.bottleneck_bps == 10e6 and result.suggested_window_bytes == 14480
        assert result.interval_s == 0.1
        assert len(flow.intervals) >= 60
        assert sum(iv.warmup for iv in flow.intervals) == 10
        assert flow.path == ["h1", "s1", "s2", "h2"] and flow.mss_bytes == 1448
        return result, elapsed

    def miss(got: tuple[Any, float]) -> str | None:
        # The precision: goodput close to the bottleneck, iperf3's 0.1 s reports on
        # time, the whole within 5 s of the flow's 6.
        result, elapsed = got
        flow = result.flows[0]
        starts = [iv.t_s for iv in flow.intervals]
        if (
            8.5e6 < flow.goodput_bps < 9.7e6
            and all(abs(b - a - 0.1) < 0.02 for a, b in pairwise(starts))
            and elapsed < 6 + 5
        ):
            return None
        return f"goodput {flow.goodput_bps}, report starts {starts}, {elapsed:.1f} s"

    precise(measure, miss)


def test_two_flows_share_the_bottleneck_fairly() -> None:
    # Jain's index in 30 runs of this setup on a 2-vCPU VM (BBR, the machine's
    # default): 0.974 once, 0.995 to 1.000 in the other 29. The total was 9.52 to
    # 9.57 Mbit/s.
    def measure() -> Any:
        with Network(bell()) as net:
            result = tcp(net, [("h1", "h3"), ("h2", "h4")], duration=8)
        assert [f.port for f in result.flows] == [5201, 5202]
        assert [f.code for f in result.flags if f.code == "exceeds_bottleneck"] == []
        assert all(f.path[1:3] == ["s1", "s2"] for f in result.flows)
        return result

    def miss(result: Any) -> str | None:
        if (result.jain or 0.0) > 0.95 and 8.5e6 < result.total_goodput_bps < 9.7e6:
            return None
        return f"Jain {result.jain}, total {result.total_goodput_bps}"

    precise(measure, miss)


def test_bidirectional_runs_two_one_way_sessions() -> None:
    def measure() -> Any:
        with Network(line10()) as net:
            result = tcp(net, [("h1", "h2")], duration=5, bidirectional=True)
        assert [(f.src, f.dst, f.port) for f in result.flows] == [
            ("h1", "h2", 5201),
            ("h2", "h1", 5202),
        ]
        assert result.bidirectional and result.note is not None and "80%" in result.note
        return result

    def miss(result: Any) -> str | None:
        # Measured: 9.0 to 9.4 Mbit/s each way in 9 runs (ACKs share each direction),
        # Jain's index 0.9999 or more: not Hardin's 80% with iperf's own --bidir.
        rates = [f.goodput_bps for f in result.flows]
        if all(8.5e6 < r < 9.7e6 for r in rates) and (result.jain or 0.0) > 0.99:
            return None
        return f"goodput each way {rates}, Jain {result.jain}"

    precise(measure, miss)


def test_apply_window_passes_the_suggestion() -> None:
    def measure() -> Any:
        with Network(line10()) as net:
            result = tcp(net, [("h1", "h2")], duration=4, apply_window=True)
            chosen = tcp(net, [("h1", "h2")], duration=3, window="32KiB", port=5301)
        flow = result.flows[0]
        assert result.window_applied and result.suggested_window_bytes == 14480
        assert flow.window_bytes == 14480  # iperf3's sock_bufsize: the -w it used
        assert flow.sndbuf_bytes is not None and flow.sndbuf_bytes >= 14480
        assert flow.rcvbuf_bytes is not None and flow.rcvbuf_bytes >= 14480  # the receiver too
        assert chosen.window_applied and chosen.flows[0].window_bytes == 32768
        assert chosen.suggested_window_bytes == 14480
        return flow

    # The suggested window fills the path: goodput close to the bottleneck.
    precise(measure, lambda f: None if 8.5e6 < f.goodput_bps < 9.7e6 else f"{f.goodput_bps}")


def test_timeout_names_the_flow_and_stops_every_process() -> None:
    with Network(line10()) as net:
        with pytest.raises(MeasurementError, match=r"flow h1->h2:5201: the client did not finish"):
            tcp(net, [("h1", "h2")], duration=5, timeout=1)
        assert iperf3_left(net["h1"], net["h2"]) == []


def test_port_taken_by_a_server_we_did_not_start() -> None:
    with Network(line10()) as net:
        other = start_listening(net["h2"], ["iperf3", "-s", "-p", "5201"], 5201)
        try:
            with pytest.raises(MeasurementError, match="Address already in use"):
                tcp(net, [("h1", "h2")], duration=3)
        finally:
            other.terminate()
            other.wait(5)
        assert iperf3_left(net["h1"], net["h2"]) == []
