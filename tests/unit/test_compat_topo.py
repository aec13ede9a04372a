"""Mininet's Topo API on fidelnet: node order, ports, link keys and info, ready-made topos."""

from __future__ import annotations

from fidelnet.compat.topo import (
    LinearTopo,
    MinimalTopo,
    SingleSwitchReversedTopo,
    SingleSwitchTopo,
    SpecTopo,
    Topo,
)
from fidelnet.compat.topolib import TorusTopo, TreeTopo
from fidelnet.topology.builders import from_mn_spec


def _topo() -> Topo:
    t = Topo()
    for name in ("h10", "h2", "h1"):
        t.addHost(name, ip=None)
    t.addSwitch("s1")
    t.addSwitch("s10", stp=True)
    return t


def test_hosts_sorted_naturally_or_in_insertion_order() -> None:
    t = _topo()
    assert t.hosts() == ["h1", "h2", "h10"]
    assert t.hosts(sort=False) == ["h10", "h2", "h1"]
    assert t.switches() == ["s1", "s10"]
    assert t.nodes() == ["h1", "h2", "h10", "s1", "s10"]
    assert t.isSwitch("s10") and not t.isSwitch("h1")
    assert t.nodeInfo("s10") == {"isSwitch": True, "stp": True}


def test_ports_start_at_zero_on_hosts_and_one_on_switches() -> None:
    t = _topo()
    t.addLink("h1", "s1")
    t.addLink("h2", "s1")
    t.addLink("s1", "s10", port1=7)
    assert t.port("h1", "s1") == (0, 1)
    assert t.port("s1", "h2") == (2, 0)
    assert t.port("s1", "s10") == (7, 1)
    assert t.linkInfo("h2", "s1")["port2"] == 2


def test_links_with_keys_and_info_sorted() -> None:
    t = Topo()
    h1, h2, s1 = t.addHost("h1"), t.addHost("h2"), t.addSwitch("s1")
    assert t.addLink(s1, h2, bw=10) == 1
    assert t.addLink(s1, h1) == 1
    assert t.addLink(s1, h1, delay="1ms") == 2  # a second link between the same pair
    assert t.links(sort=True) == [("s1", "h1"), ("s1", "h1"), ("s1", "h2")]
    rows = t.links(sort=True, withKeys=True, withInfo=True)
    assert [r[:3] for r in rows] == [("s1", "h1", 1), ("s1", "h1", 2), ("s1", "h2", 1)]
    info = rows[1][3]
    assert info == {"delay": "1ms", "node1": "s1", "node2": "h1", "port1": 3, "port2": 1}
    assert t.links(withKeys=True)[0] == ("s1", "h2", 1)  # unsorted: insertion order
    t.setlinkInfo("s1", "h2", {"node1": "s1", "node2": "h2", "x": 1})
    assert t.linkInfo("s1", "h2")["x"] == 1


def test_default_options() -> None:
    t = Topo(hopts={"cpu": 0.5}, lopts={"bw": 5})
    t.addHost("h1")
    t.addHost("h2", ip="10.0.0.9")
    t.addSwitch("s1")
    t.addLink("h1", "s1")
    assert t.nodeInfo("h1") == {"cpu": 0.5}
    assert t.nodeInfo("h2") == {"ip": "10.0.0.9"}
    assert t.linkInfo("h1", "s1")["bw"] == 5


def test_ready_made_topologies() -> None:
    assert SingleSwitchTopo(3).hosts() == ["h1", "h2", "h3"]
    assert MinimalTopo().links() == [("h1", "s1"), ("h2", "s1")]
    rev = SingleSwitchReversedTopo(3)
    assert rev.port("h1", "s1") == (0, 3)
    lin = LinearTopo(3, 2)
    assert lin.hosts() == ["h1s1", "h1s2", "h1s3", "h2s1", "h2s2", "h2s3"]
    assert ("s2", "s1") in lin.links()
    tree = TreeTopo(depth=2, fanout=2)
    assert tree.links(sort=True) == [
        ("s1", "s2"),
        ("s1", "s3"),
        ("s2", "h1"),
        ("s2", "h2"),
        ("s3", "h3"),
        ("s3", "h4"),
    ]
    torus = TorusTopo(3, 3)
    assert len(torus.switches()) == 9 and len(torus.links()) == 27
    assert all(torus.nodeInfo(s)["stp"] for s in torus.switches())
    assert torus.nodeInfo("s1x2")["dpid"] == "102"


def test_spec_topo_matches_mininet_topo() -> None:
    for text, topo in (
        ("linear,3", LinearTopo(3)),
        ("tree,2,3", TreeTopo(2, 3)),
        ("single,4", SingleSwitchTopo(4)),
        ("reversed,3", SingleSwitchReversedTopo(3)),
    ):
        spec = SpecTopo(from_mn_spec(text))
        assert spec.hosts() == topo.hosts(), text
        assert spec.switches() == topo.switches(), text
        assert spec.links(sort=True) == topo.links(sort=True), text
        for a, b in topo.links():
            assert spec.port(a, b) == topo.port(a, b), (text, a, b)
