"""Per-flow policy routing on real namespaces: a seeded random topology with random
flows (HVNet's experiment, small); each flow's packets take its configured path,
which the interface counters show: every link of the path carries them, no other
link does. Also from a scenario file's ``routing.flows``."""

from __future__ import annotations

import pytest

from fidelnet import Network
from fidelnet.topology.randomnet import random_flows, random_topology
from fidelnet.topology.spec import FlowSpec, TopologySpec

pytestmark = pytest.mark.privileged

PACKETS = 400

SEND = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for _ in range(int(sys.argv[3])):
    s.sendto(b"x" * 300, (sys.argv[1], int(sys.argv[2])))
"""


def _rx(net: Network) -> dict[tuple[str, str], int]:
    out = {}
    for node in net:
        for msg in node.netlink().ipr.get_links():
            name = msg.get_attr("IFLA_IFNAME")
            stats = msg.get_attr("IFLA_STATS64") or {}
            if name != "lo":
                out[node.name, name] = int(stats.get("rx_packets", 0))
    return out


def _ingress(spec: TopologySpec, here: str, there: str) -> tuple[str, str]:
    """The interface of ``there`` on the (first) link from ``here``."""
    for link in spec.links:
        if {link.a, link.b} == {here, there}:
            return there, str(link.b_intf if link.b == there else link.a_intf)
    raise AssertionError(f"no link {here}-{there}")


def _check_paths(net: Network, flows: list[FlowSpec]) -> None:
    for flow in flows:
        dst = net[flow.dst]
        addr = str(dst.spec.ip).split("/")[0]
        before = _rx(net)
        src = net[flow.src]
        _out, err, code = src.pexec(
            ["python3", "-c", SEND, addr, str(flow.port), str(PACKETS)], timeout=60
        )
        assert code == 0, err
        after = _rx(net)
        on_path = {_ingress(net.spec, a, b) for a, b in zip(flow.path, flow.path[1:], strict=False)}
        for key, value in after.items():
            delta = value - before.get(key, 0)
            if key in on_path:
                assert delta >= PACKETS, (flow, key, delta)
            else:  # a few ICMP port-unreachable replies and neighbour traffic at most
                assert delta < PACKETS // 4, (flow, key, delta)


def test_random_flows_take_their_own_paths() -> None:
    t = random_topology(8, seed=3, degree=2.5)
    t.flows = random_flows(t, 6, seed=3, hops=(2, 4))
    with Network(t) as net:
        _check_paths(net, t.flows)


def test_two_flows_between_the_same_nodes_take_different_paths() -> None:
    """r1 to r3 over r2, and over r4: the destination routes alone would send both
    one way."""
    from fidelnet.topology import LinkSpec, NodeSpec

    t = TopologySpec(auto_routes=True)
    for name in ("r1", "r2", "r3", "r4"):
        t.add_node(NodeSpec(name, kind="router"))
    for i, (a, b) in enumerate((("r1", "r2"), ("r2", "r3"), ("r1", "r4"), ("r4", "r3")), 1):
        t.add_link(LinkSpec(a, b, a_ip=f"10.0.{i}.1/24", b_ip=f"10.0.{i}.2/24"))
    t.nodes["r1"].ip = "10.0.1.1/24"
    t.nodes["r3"].ip = "10.0.2.2/24"
    t.flows = [FlowSpec("up", ("r1", "r2", "r3"), 7000), FlowSpec("down", ("r1", "r4", "r3"), 7001)]
    with Network(t) as net:
        _check_paths(net, t.flows)
        rules = net["r1"].cmd("ip rule show")
        assert "ipproto udp dport 7000 lookup 1000" in rules, rules
        assert "ipproto udp dport 7001 lookup 1001" in rules, rules
