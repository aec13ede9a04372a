"""Switch datapaths on real namespaces: the BPF learning switch learns, forwards to
one port, floods the rest, follows ports and switches going down and up, carries
engine links, makes no device per switch; STP switches keep a Linux bridge."""

from __future__ import annotations

import time

import pytest

from fidelnet import Network
from fidelnet.nodes.node import Node, Switch
from fidelnet.topology import (
    LinkParams,
    LinkSpec,
    NodeSpec,
    TopologySpec,
    single,
    torus,
    tree,
)

pytestmark = pytest.mark.privileged


def _rx(node: Node) -> int:
    return int(node.cmd(f"cat /sys/class/net/{node.name}-eth0/statistics/rx_packets").strip())


def _pings(src: Node, dst: Node, n: int = 1) -> bool:
    return " 0% packet loss" in src.cmd(f"ping -c{n} -i0.05 -W1 {dst.ip}")


def _bridges(net: Network) -> list[str]:
    return net["s1"].cmd("ip -o link show type bridge").split("\n")[0:-1]


def test_bpf_switch_learns_forwards_to_one_port_and_floods_the_unknown() -> None:
    spec = single(3)
    spec.ipv6 = False  # no IPv6 multicast to blur the counts
    with Network(spec) as net:
        h1, h2, h3 = net["h1"], net["h2"], net["h3"]
        s1 = net["s1"]
        assert isinstance(s1, Switch) and s1.datapath_stats()["datapath"] == "bpf"
        assert _bridges(net) == []  # no device per switch
        assert _pings(h1, h2)  # ARP broadcast flooded, reply learnt
        fdb = s1.datapath_stats()["fdb"]
        assert fdb[h1.mac] == "s1-eth1" and fdb[h2.mac] == "s1-eth2"
        before = _rx(h3)
        assert _pings(h1, h2, 50)
        assert _rx(h3) - before <= 2  # unicast to one port, not flooded to h3
        counters = s1.datapath_stats()["counters_all_switches"]
        assert counters["forwarded"] >= 100 and counters["flooded"] >= 1
        assert _pings(h3, h1)  # an address h3 never saw: flooded, then learnt
        assert net.ping_all() == 0.0


def test_bpf_switch_follows_ports_and_switches_going_down_and_up() -> None:
    spec = single(3)
    spec.ipv6 = False
    with Network(spec) as net:
        h1, h2 = net["h1"], net["h2"]
        s1 = net["s1"]
        assert isinstance(s1, Switch)
        assert _pings(h2, h1)
        link = next(lk for lk in net.links if "h1" in (lk.spec.a, lk.spec.b))
        fabric = s1.netlink()
        drops_before = fabric.link_drops()["s1-eth1"][2]
        link.down()
        assert not _pings(h2, h1, 3)
        # Nothing was sent to the port that is down (a bridge sends nothing either):
        # frames for h1's learnt address were flooded to the ports that are up.
        assert fabric.link_drops()["s1-eth1"][2] == drops_before
        assert s1.datapath_stats()["ports"] == ["s1-eth1", "s1-eth2", "s1-eth3"]
        link.up()
        time.sleep(0.2)
        assert _pings(h2, h1, 3)
        s1.set_forwarding(False)
        assert not _pings(h2, h1, 2)
        assert s1.datapath_stats()["counters_all_switches"]["switch_down"] > 0
        s1.set_forwarding(True)
        assert _pings(h2, h1, 2)


def test_same_tree_on_both_datapaths_and_a_switch_on_each_in_one_topology() -> None:
    for datapath in ("bridge", "bpf"):
        spec = tree(2, 2)
        spec.datapath = datapath
        with Network(spec) as net:
            assert net.ping_all() == 0.0
            kinds = {s.datapath_stats()["datapath"] for s in net.switches if isinstance(s, Switch)}
            assert kinds == {datapath}
            assert len(_bridges(net)) == (3 if datapath == "bridge" else 0)
    spec = TopologySpec()
    for name in ("h1", "h2"):
        spec.add_node(NodeSpec(name))
    spec.add_node(NodeSpec("s1", kind="switch"))
    spec.add_node(NodeSpec("s2", kind="switch", stp=True, datapath="bridge"))
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(LinkSpec("s1", "s2"))
    spec.add_link(LinkSpec("s2", "h2"))
    with Network(spec) as net:
        s1, s2 = net["s1"], net["s2"]
        assert isinstance(s1, Switch) and isinstance(s2, Switch)
        assert s1.datapath_stats()["datapath"] == "bpf"
        assert s2.datapath_stats()["datapath"] == "bridge"
        assert [b.split(":")[1].strip() for b in _bridges(net)] == ["s2"]
        assert _pings(net["h1"], net["h2"], 2)


@pytest.mark.parametrize("endpoint", ["tap", "af_xdp"])
def test_bpf_switch_ports_on_engine_links(endpoint: str) -> None:
    """A delayed link between two BPF switches, carried by linkd on either endpoint."""
    spec = TopologySpec()
    spec.ipv6 = False
    for name in ("h1", "h2"):
        spec.add_node(NodeSpec(name))
    for name in ("s1", "s2"):
        spec.add_node(NodeSpec(name, kind="switch", datapath="bpf"))
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(
        LinkSpec(
            "s1",
            "s2",
            params=LinkParams(delay=0.005, bw=100e6),
            backend="engine",
            endpoint=endpoint,  # type: ignore[arg-type]
        )
    )
    spec.add_link(LinkSpec("s2", "h2"))
    with Network(spec) as net:
        out = net["h1"].cmd(f"ping -c5 -i0.1 -W2 {net['h2'].ip}")
        assert " 0% packet loss" in out, out
        avg = float(out.split("rtt min/avg/max/mdev = ")[1].split("/")[1])
        assert 10.0 <= avg < 15.0, out  # 5 ms each way on the engine link


def test_a_64_host_tree_loses_no_ping_and_the_neighbour_limits_come_back() -> None:
    """Mininet's treeping64 topology: 64 x 63 neighbour entries, more than the
    machine's shared ARP table holds by default (1,024). The run makes room for them
    and gives it back; every round of pings is complete."""
    path = "/proc/sys/net/ipv4/neigh/default/gc_thresh3"
    with open(path) as f:
        before = int(f.read())
    spec = tree(2, 8)
    spec.ipv6 = False
    with Network(spec) as net:
        with open(path) as f:
            assert int(f.read()) >= before + 64 * 63 or before >= 2 * 64 * 63
        hosts = net.hosts
        for _ in range(2):
            for src in hosts:
                dests = " ".join(str(d.ip) for d in hosts if d is not src)
                out = src.cmd(
                    f"for d in {dests}; do ping -c1 -W2 $d >/dev/null || echo LOST $d; done"
                )
                assert "LOST" not in out, f"{src.name}: {out}"
            for h in hosts:
                h.cmd("ip neigh flush all")
    with open(path) as f:
        assert int(f.read()) == before


def test_a_torus_on_the_bpf_switch_gets_a_tree_at_once_and_reconverges_when_a_link_fails() -> None:
    spec = torus(3, 3)
    spec.ipv6 = False
    began = time.perf_counter()
    with Network(spec) as net:
        assert time.perf_counter() - began < 10  # no STP timers to wait for
        sws = [s for s in net.switches if isinstance(s, Switch)]
        assert {s.datapath_stats()["stp"] for s in sws} == {"computed tree"}
        blocked = sum(len(s.datapath_stats()["blocked"]) for s in sws)
        assert blocked == 2 * (18 - 8)  # 18 links between switches, 8 in the tree
        assert net.ping_all() == 0.0
        # Take down a link of the tree: the tree is computed again at once.
        tree_link = next(
            lk
            for lk in net.links
            if lk.spec.a.startswith("s")
            and lk.spec.b.startswith("s")
            and lk.intf1.name not in net[lk.spec.a].datapath_stats()["blocked"]  # type: ignore[attr-defined]
        )
        tree_link.down()
        assert sum(len(s.datapath_stats()["blocked"]) for s in sws) == 2 * (17 - 8)
        assert net.ping_all() == 0.0
        tree_link.up()
        assert sum(len(s.datapath_stats()["blocked"]) for s in sws) == 2 * (18 - 8)
        assert net.ping_all() == 0.0
