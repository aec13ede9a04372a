"""MLD snooping on the BPF switch, on real namespaces: IPv6 multicast reaches the nodes
that joined the group (across switches), not the others; a leave stops it; a link
that goes down and up is learnt again; ff02::1 and neighbour discovery still work;
``mld_snooping: false`` floods; a trunk carries a group only toward a switch with a
member, or toward a switch that does not snoop."""

from __future__ import annotations

import subprocess
import time

import pytest

from fidelnet import Network
from fidelnet.nodes.node import Node, Switch
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

GROUP = "ff15::1234"
_LISTEN = (
    "import socket, struct, sys, time\n"
    "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
    "s.bind(('', 5000))\n"
    "mreq = socket.inet_pton(socket.AF_INET6, sys.argv[1])"
    " + struct.pack('@I', socket.if_nametoindex(sys.argv[2]))\n"
    "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP, mreq)\n"
    "print('joined', flush=True)\n"
    "time.sleep(120)\n"
)
_SEND = (
    "import socket, struct, sys\n"
    "s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)\n"
    "s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF,"
    " struct.pack('@I', socket.if_nametoindex(sys.argv[2])))\n"
    "for _ in range(int(sys.argv[3])):\n"
    "    s.sendto(b'x' * 64, (sys.argv[1], 5000))\n"
)


def _spec(snooping: bool = True) -> TopologySpec:
    """h1, h2 on s1; h3 on s2; s1-s2 (a trunk)."""
    t = TopologySpec()
    for s in ("s1", "s2"):
        t.add_node(NodeSpec(s, kind="switch", mld_snooping=snooping))
    for h in ("h1", "h2", "h3"):
        t.add_node(NodeSpec(h))
    t.add_link(LinkSpec("h1", "s1"))
    t.add_link(LinkSpec("h2", "s1"))
    t.add_link(LinkSpec("s1", "s2"))
    t.add_link(LinkSpec("h3", "s2"))
    return t


def _star(s3_snooping: bool = True) -> TopologySpec:
    """s1 with h1 and h2, s2 with h3, s3 with h4; trunks s1-s2 and s1-s3."""
    t = TopologySpec()
    for s in ("s1", "s2", "s3"):
        t.add_node(NodeSpec(s, kind="switch", mld_snooping=s3_snooping or s != "s3"))
    for h in ("h1", "h2", "h3", "h4"):
        t.add_node(NodeSpec(h))
    for a, b in (("h1", "s1"), ("h2", "s1"), ("s1", "s2"), ("s1", "s3"), ("h3", "s2")):
        t.add_link(LinkSpec(a, b))
    t.add_link(LinkSpec("h4", "s3"))
    return t


def _rx(node: Node) -> int:
    return int(node.cmd(f"cat /sys/class/net/{node.name}-eth0/statistics/rx_packets").strip())


def _listen(node: Node) -> subprocess.Popen[str]:
    p = node.popen(
        ["python3", "-c", _LISTEN, GROUP, f"{node.name}-eth0"], stdout=subprocess.PIPE, text=True
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "joined"
    time.sleep(0.3)  # its report crosses the switches
    return p


def _send(node: Node, n: int = 200) -> None:
    p = node.popen(
        ["python3", "-c", _SEND, GROUP, f"{node.name}-eth0", str(n)],
        stderr=subprocess.PIPE,
        text=True,
    )
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err


def _deltas(net: Network, sender: str, n: int = 200) -> dict[str, int]:
    before = {h: _rx(net[h]) for h in ("h1", "h2", "h3", "h4") if h in net.nodes}
    _send(net[sender], n)
    time.sleep(0.2)
    return {h: _rx(net[h]) - before[h] for h in before if h != sender}


def _settled(net: Network) -> None:
    """Past the hosts' start-up: every link-local address through DAD (a tentative
    address cannot send), and the start-up multicast over."""
    deadline = time.monotonic() + 15
    for h in [h for h in ("h1", "h2", "h3", "h4") if h in net.nodes]:
        while True:
            out = net[h].cmd(f"ip -6 addr show dev {h}-eth0")
            if "fe80::" in out and "tentative" not in out:
                break
            assert time.monotonic() < deadline, out
            time.sleep(0.1)
    time.sleep(0.5)


def test_group_traffic_goes_to_listeners_only_until_they_leave() -> None:
    with Network(_spec()) as net:
        _settled(net)
        listener = _listen(net["h3"])  # behind the trunk
        try:
            got = _deltas(net, "h1")
            assert got["h3"] >= 200
            assert got["h2"] < 20  # not a listener: pruned at s1's edge
            s1 = net["s1"]
            assert isinstance(s1, Switch)
            counters = s1.datapath_stats()["counters_all_switches"]
            assert counters["snooped"] >= 200 and counters["mld_joined"] >= 1
        finally:
            listener.terminate()
            listener.wait()
        time.sleep(0.3)  # the leave report crosses the switches
        got = _deltas(net, "h1")
        assert got["h3"] < 20 and got["h2"] < 20
        assert net["s1"].datapath_stats()["counters_all_switches"]["mld_left"] >= 1


def test_a_listener_is_learnt_again_after_its_link_flaps() -> None:
    with Network(_spec()) as net:
        _settled(net)
        listener = _listen(net["h2"])
        try:
            assert _deltas(net, "h3")["h2"] >= 200
            link = next(lk for lk in net.links if "h2" in (lk.spec.a, lk.spec.b))
            link.down()
            time.sleep(0.2)
            link.up()
            time.sleep(1.5)  # carrier back: the node reports its groups again
            got = _deltas(net, "h3")
            assert got["h2"] >= 200 and got["h1"] < 20
        finally:
            listener.terminate()
            listener.wait()


def test_all_nodes_and_neighbour_discovery_still_reach_everyone() -> None:
    with Network(_spec()) as net:
        _settled(net)
        for i, h in enumerate(("h1", "h2", "h3"), 1):
            net[h].cmd(f"ip -6 addr add 2001:db8::{i}/64 dev {h}-eth0 nodad")
        # Solicited-node multicast reaches the one node that has the address.
        for i in (2, 3):
            out = net["h1"].cmd(f"ping -6 -c2 -i0.2 -W2 2001:db8::{i}")
            assert " 0% packet loss" in out, out
        # All nodes (never snooped): h1 itself, h2, and h3 behind the trunk answer.
        out = net["h1"].cmd("ping -6 -c3 -i0.3 -W2 ff02::1%h1-eth0")
        sources = {line.split()[3] for line in out.splitlines() if "bytes from" in line}
        assert len(sources) == 3, out


def test_without_snooping_group_traffic_floods() -> None:
    with Network(_spec(snooping=False)) as net:
        _settled(net)
        listener = _listen(net["h3"])
        try:
            got = _deltas(net, "h1")
            assert got["h3"] >= 200 and got["h2"] >= 200
        finally:
            listener.terminate()
            listener.wait()


def _trunk_rx(net: Network, port: str) -> int:
    """Frames the switch port ``port`` (in the fabric namespace) sent toward its peer."""
    s = net[port.split("-")[0]]
    out = s.cmd(f"cat /sys/class/net/{port}/statistics/tx_packets")
    return int(out.strip())


def test_a_trunk_carries_a_group_only_toward_a_listener() -> None:
    with Network(_star()) as net:
        _settled(net)
        s1 = net["s1"]
        assert isinstance(s1, Switch)
        listener = _listen(net["h3"])  # behind the trunk to s2
        try:
            to_s3 = _trunk_rx(net, "s1-eth4")
            pruned = s1.datapath_stats()["counters_all_switches"]["trunk_pruned"]
            got = _deltas(net, "h1")
            assert got["h3"] >= 200 and got["h4"] < 20 and got["h2"] < 20
            # s3 has no member: the group's frames did not even cross to it.
            assert _trunk_rx(net, "s1-eth4") - to_s3 < 20
            stats = s1.datapath_stats()["counters_all_switches"]
            assert stats["trunk_pruned"] - pruned >= 200
            # From h4 (behind s3): through s1, to s2 only.
            got = _deltas(net, "h4")
            assert got["h3"] >= 200 and got["h1"] < 20 and got["h2"] < 20
        finally:
            listener.terminate()
            listener.wait()
        time.sleep(0.3)
        got = _deltas(net, "h4")  # left: nobody listens, nothing crosses
        assert got["h3"] < 20


def test_a_trunk_toward_a_switch_that_does_not_snoop_carries_every_group() -> None:
    with Network(_star(s3_snooping=False)) as net:
        _settled(net)
        listener = _listen(net["h4"])  # behind s3, which learns nothing
        try:
            got = _deltas(net, "h3")  # s2 -> s1 -> s3
            assert got["h4"] >= 200 and got["h2"] < 20  # s1 still prunes its edge
        finally:
            listener.terminate()
            listener.wait()
