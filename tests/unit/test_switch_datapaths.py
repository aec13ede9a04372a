"""Switch datapaths: the choice per switch, its checks before anything is built, and
what a switch tells its datapath (with the fake)."""

from __future__ import annotations

from typing import Any

import pytest

from fidelnet.errors import UnsupportedError
from fidelnet.nodes.intf import Interface
from fidelnet.nodes.node import Switch
from fidelnet.scenario import loads
from fidelnet.switches import choose, preflight
from fidelnet.switches.fake import FakeDatapath
from fidelnet.topology import NodeSpec, TopologySpec
from fidelnet.topology.validate import problems


def _there() -> str | None:
    return None


def _missing() -> str:
    return "bpftool (`make install` installs it)"


def topo(**switch: Any) -> TopologySpec:
    t = TopologySpec()
    t.add_node(NodeSpec("s1", kind="switch", **switch))
    t.add_node(NodeSpec("h1"))
    return t


def test_auto_takes_bpf_where_it_runs_and_the_bridge_elsewhere() -> None:
    t = topo()
    assert choose(t.nodes["s1"], t, _there) == "bpf"
    assert choose(t.nodes["s1"], t, _missing) == "bridge"
    t = topo(stp=True)  # a computed spanning tree on bpf, the kernel's STP on a bridge
    assert choose(t.nodes["s1"], t, _there) == "bpf"
    t.datapath = "bridge"
    assert choose(t.nodes["s1"], t, _there) == "bridge"


def test_a_switch_overrides_the_topology() -> None:
    t = topo(datapath="bridge")
    t.datapath = "bpf"
    assert choose(t.nodes["s1"], t, _there) == "bridge"
    t = topo(datapath="bpf")
    t.datapath = "bridge"
    assert choose(t.nodes["s1"], t, _there) == "bpf"


def test_bpf_asked_where_it_cannot_run_is_refused_naming_the_switch_and_the_remedy() -> None:
    t = topo(datapath="bpf")
    with pytest.raises(UnsupportedError) as err:
        preflight(t, _missing)
    msg = str(err.value)
    assert "nodes.s1.datapath bpf" in msg and "bpftool" in msg and "datapath: bridge" in msg
    preflight(topo(), _missing)  # auto falls back to the bridge


def test_validation_names_the_field_and_the_choices() -> None:
    bad = topo(datapath="ofsoftswitch")  # type: ignore[arg-type]
    bad.datapath = "hub"  # type: ignore[assignment]
    errors = [str(e) for e in problems(bad)]
    valid = "valid: auto, bridge, bpf, ovs"
    assert f"datapath: unknown switch datapath (got 'hub'; {valid})" in errors
    assert f"nodes.s1.datapath: unknown switch datapath (got 'ofsoftswitch'; {valid})" in errors
    assert problems(topo(datapath="bpf", stp=True)) == []
    host = TopologySpec()
    host.add_node(NodeSpec("h1", datapath="bpf"))
    errors = [str(e) for e in problems(host)]
    assert any(e.startswith("nodes.h1.datapath: only switches have a datapath") for e in errors)


def test_ovs_is_taken_only_where_asked_and_refused_by_name_where_it_is_missing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fidelnet.kernel import ovs

    t = topo(datapath="ovs")
    monkeypatch.setattr(ovs, "missing", lambda: None)
    assert choose(t.nodes["s1"], t, _there) == "ovs"
    assert choose(topo().nodes["s1"], topo(), _there) == "bpf"  # never by itself
    monkeypatch.setattr(ovs, "missing", lambda: "Open vSwitch (ovs-vswitchd missing)")
    with pytest.raises(UnsupportedError) as err:
        preflight(t, _there)
    msg = str(err.value)
    assert "nodes.s1.datapath ovs" in msg and "ovs-vswitchd" in msg and "bpf or bridge" in msg


def test_scenario_datapath_fields() -> None:
    sc = loads(
        "name: d\ntopology:\n  datapath: bridge\n  nodes:\n    s1: {kind: switch, datapath: bpf}\n"
        "    h1: {}\n    h2: {}\n  links: [{a: h1, b: s1}, {a: h2, b: s1}]\n"
    )
    assert sc.topology.datapath == "bridge"
    assert sc.topology.nodes["s1"].datapath == "bpf"
    with pytest.raises(Exception) as err:
        loads("name: d\ntopology:\n  datapath: hub\n  nodes: {h1: {}}\n")
    assert "datapath" in str(err.value) and "bridge" in str(err.value)


def test_scenario_controllers() -> None:
    sc = loads(
        "name: d\ntopology:\n  builder: {linear: 3}\n  datapath: ovs\n"
        "  controllers: [{name: c0}, {name: c1, port: 6654}]\n"
    )
    spec = sc.topology_spec()
    assert [(c.name, c.kind, c.port) for c in spec.controllers] == [
        ("c0", "ref", 6653),
        ("c1", "ref", 6654),
    ]
    with pytest.raises(Exception) as err:
        loads("name: d\ntopology:\n  datapath: ovs\n  controllers: [{name: c0, port: 0}]\n")
    assert "controllers" in str(err.value) and "port" in str(err.value)
    with pytest.raises(Exception) as err:  # nothing would connect to it
        loads("name: d\ntopology:\n  builder: {linear: 2}\n  controllers: [{name: c0}]\n")
    assert "only OVS switches connect to controllers" in str(err.value)


class _Net:
    run_id = "t"
    nodes: dict[str, object] = {}
    spec = TopologySpec()


def test_a_switch_tells_its_datapath_about_its_ports() -> None:
    fake = FakeDatapath()
    sw = Switch(_Net(), NodeSpec("s1", kind="switch"))  # type: ignore[arg-type]
    sw.forwarder = fake
    fake.add_switch(sw)
    intf = Interface(sw, "s1-eth1", 1, 7)
    fake.add_port(sw, intf)
    sw.port_changed(intf, False)
    assert fake.ports["s1"]["s1-eth1"] is False
    sw.port_changed(intf, True)
    sw.set_forwarding(False)
    assert not sw.forwarding()
    sw.port_removed(intf)
    assert fake.ports["s1"] == {}
    assert [c[0] for c in fake.calls] == [
        "add_switch",
        "add_port",
        "set_port_up",
        "set_port_up",
        "set_switch_up",
        "remove_port",
    ]


class _Prog:
    """Stands in for the loaded switch program: records map writes and attaches."""

    def __init__(self) -> None:
        self.switches: dict[int, tuple[int, bool]] = {}
        self.ports: dict[int, tuple[int, int, bool]] = {}
        self.removed: list[int] = []
        self.attached: list[int] = []
        self.gens: dict[int, int] = {}
        self.snoop: dict[int, bool] = {}
        self.trunks: dict[int, bool] = {}
        self.port_gens: dict[int, int] = {}
        self.nums: dict[int, int] = {}
        self.regions: dict[int, tuple[int, int, int, int] | None] = {}

    def set_switch(
        self, sw: int, slots: int, up: bool, gen: int = 0, snoop: bool = True, num: int = 0
    ) -> None:
        self.switches[sw] = (slots, up)
        self.gens[sw] = gen
        self.snoop[sw] = snoop
        self.nums[sw] = num

    def set_port(
        self,
        ifindex: int,
        sw: int,
        slot: int,
        up: bool,
        trunk: bool = False,
        gen: int = 0,
        region: tuple[int, int, int, int] | None = None,
    ) -> None:
        self.ports[ifindex] = (sw, slot, up)
        self.trunks[ifindex] = trunk
        self.port_gens[ifindex] = gen
        self.regions[ifindex] = region

    def remove_port(self, ifindex: int, sw: int, slot: int) -> None:
        self.removed.append(ifindex)
        self.ports.pop(ifindex, None)

    def attach(self, nl: object, index: int) -> None:
        self.attached.append(index)


def test_bpf_datapath_numbers_switches_and_slots_and_follows_ports() -> None:
    from fidelnet.switches.bpf import BpfDatapath

    prog = _Prog()
    dp = BpfDatapath("t", lambda *a, **k: None, lambda *a, **k: None, prog)  # type: ignore[arg-type]
    s1 = Switch(_Net(), NodeSpec("s1", kind="switch"))  # type: ignore[arg-type]
    s2 = Switch(_Net(), NodeSpec("s2", kind="switch", mld_snooping=False))  # type: ignore[arg-type]
    for s in (s1, s2):
        s._nl = object()  # type: ignore[assignment]
        dp.add_switch(s)
    a, b, c = (
        Interface(s1, "s1-eth1", 1, 11),
        Interface(s1, "s1-eth2", 2, 12),
        Interface(s2, "s2-eth1", 1, 21),
    )
    dp.add_port(s1, a)
    dp.add_port(s1, b)
    dp.add_port(s2, c)
    assert prog.switches == {1: (2, True), 2: (1, True)}
    assert prog.ports == {11: (1, 0, True), 12: (1, 1, True), 21: (2, 0, True)}
    assert prog.attached == [11, 12, 21]  # after the maps know the port
    assert prog.snoop == {1: True, 2: False}
    assert len(set(prog.port_gens.values())) == 3  # every port its own generation
    dp.set_port_up(s1, a, False)
    assert prog.ports[11] == (1, 0, False)
    down_gen = prog.port_gens[11]
    dp.set_port_up(s1, a, True)  # up again: what was learnt on it is forgotten
    assert prog.ports[11] == (1, 0, True) and prog.port_gens[11] > down_gen
    assert prog.port_gens[11] > max(prog.port_gens[i] for i in (12, 21))
    dp.set_switch_up(s1, False)
    assert prog.switches[1] == (2, False)
    dp.remove_port(s1, b)
    assert prog.removed == [12] and 12 not in prog.ports
    dp.remove_port(s1, b)  # twice: nothing more
    assert prog.removed == [12]


def test_spanning_tree_of_a_torus_and_after_a_link_fails() -> None:
    from fidelnet.switches.tree import Edge, spanning_tree

    # 3x3 torus: 9 switches, 18 links (each switch to its right and lower neighbour).
    def sw(r: int, c: int) -> int:
        return 1 + 3 * (r % 3) + (c % 3)

    edges = [Edge(sw(r, c), sw(r, c + 1), 2 * (3 * r + c)) for r in range(3) for c in range(3)]
    edges += [Edge(sw(r, c), sw(r + 1, c), 2 * (3 * r + c) + 1) for r in range(3) for c in range(3)]
    tree = spanning_tree(range(1, 10), edges)
    assert len(tree) == 8 and _spans(tree, edges, 9)
    assert spanning_tree(range(1, 10), edges) == tree  # the same every time
    cut = [e for e in edges if e.key != min(tree)]
    again = spanning_tree(range(1, 10), cut)
    assert len(again) == 8 and _spans(again, cut, 9) and min(tree) not in again
    # Two parts: a tree in each, and a self-loop is never in one.
    parts = spanning_tree([1, 2, 3, 4], [Edge(1, 2, 0), Edge(3, 4, 1), Edge(4, 4, 2)])
    assert parts == {0, 1}


def _spans(keys: set[int], edges: list[Any], n: int) -> bool:
    reach = {1}
    changed = True
    while changed:
        changed = False
        for e in edges:
            if e.key in keys and (e.a in reach) != (e.b in reach):
                reach |= {e.a, e.b}
                changed = True
    return len(reach) == n


class _SpecNet:
    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.run_id = "t"
        self.nodes = {n: _Kind(s.kind) for n, s in spec.nodes.items()}


class _Kind:
    def __init__(self, kind: str) -> None:
        self.kind = kind


def test_bpf_datapath_blocks_the_ports_off_its_computed_tree_and_follows_failures() -> None:
    from fidelnet.switches.bpf import BpfDatapath
    from fidelnet.topology import LinkSpec

    t = TopologySpec()
    for name in ("s1", "s2", "s3"):
        t.add_node(NodeSpec(name, kind="switch", stp=True))
    t.add_node(NodeSpec("h1"))
    ring = [("s1", "s2"), ("s2", "s3"), ("s3", "s1")]
    for i, (a, b) in enumerate(ring):
        t.add_link(LinkSpec(a, b, a_intf=f"{a}-eth{i + 1}", b_intf=f"{b}-eth{i + 1}"))
    t.add_link(LinkSpec("h1", "s1", a_intf="h1-eth0", b_intf="s1-eth9"))
    net = _SpecNet(t)
    prog = _Prog()
    dp = BpfDatapath("t", lambda *a, **k: None, lambda *a, **k: None, prog)  # type: ignore[arg-type]
    sws = {n: Switch(net, t.nodes[n]) for n in ("s1", "s2", "s3")}  # type: ignore[arg-type]
    for s in sws.values():
        s._nl = object()  # type: ignore[assignment]
        dp.add_switch(s)
    intfs = {}
    index = 10
    for link in t.links:
        for node, ifname in ((link.a, link.a_intf), (link.b, link.b_intf)):
            if node in sws and ifname:
                index += 1
                intfs[ifname] = Interface(sws[node], ifname, index, index)
                dp.add_port(sws[node], intfs[ifname])

    def fwd(name: str) -> bool:
        return prog.ports[intfs[name].index][2]

    # Before the tree: every port between STP switches blocked, the host's open.
    assert not any(fwd(n) for n in intfs if n != "s1-eth9") and fwd("s1-eth9")
    # Ports to other switches are trunks (all multicast goes there), the host's is not.
    assert all(prog.trunks[i.index] == (n != "s1-eth9") for n, i in intfs.items())
    assert dp.forwarding(sws["s1"])
    # Root s1: its links to s2 and s3 are the tree; s2-s3 is blocked at both ends.
    assert fwd("s1-eth1") and fwd("s2-eth1") and fwd("s3-eth3") and fwd("s1-eth3")
    assert not fwd("s2-eth2") and not fwd("s3-eth2")
    # Multicast pruning follows the tree: s1 (root) 1, then s2 and s3 below it.
    num = {n: prog.nums[i] for n, i in (("s1", 1), ("s2", 2), ("s3", 3))}
    assert num["s1"] == 1 and sorted(num.values()) == [1, 2, 3]

    def behind(port: str) -> set[str]:
        r = prog.regions[intfs[port].index]
        assert r is not None
        return {n for n, x in num.items() if r[0] <= x <= r[1] and not r[2] <= x <= r[3]}

    assert behind("s1-eth1") == {"s2"} and behind("s1-eth3") == {"s3"}
    assert behind("s2-eth1") == {"s1", "s3"} and behind("s3-eth3") == {"s1", "s2"}
    gens = dict(prog.gens)
    dp.set_port_up(sws["s1"], intfs["s1-eth1"], False)  # s1-s2 fails: s2 via s3 now
    assert fwd("s2-eth2") and fwd("s3-eth2") and not fwd("s1-eth1") and not fwd("s2-eth1")
    # The tree changed: every STP switch forgets what it learnt (a new generation).
    assert all(prog.gens[sw] == gens[sw] + 1 for sw in (1, 2, 3))
    num = {n: prog.nums[i] for n, i in (("s1", 1), ("s2", 2), ("s3", 3))}
    assert behind("s1-eth3") == {"s3", "s2"} and behind("s3-eth2") == {"s2"}
    assert behind("s2-eth2") == {"s1", "s3"}
    dp.set_port_up(sws["s1"], intfs["s1-eth1"], True)  # back: the first tree again
    assert fwd("s1-eth1") and not fwd("s2-eth2")
    num = {n: prog.nums[i] for n, i in (("s1", 1), ("s2", 2), ("s3", 3))}
    assert behind("s1-eth1") == {"s2"}


def test_regions_of_a_tree_a_loop_and_sinks() -> None:
    from fidelnet.switches.regions import number

    # s1 - s2 - s3, and s2 - s4 - s5: a tree; s6 alone; s7 = s8 twice (a loop).
    edges = [("s1", "s2", 0), ("s2", "s3", 1), ("s2", "s4", 2), ("s4", "s5", 3)]
    edges += [("s7", "s8", 4), ("s8", "s7", 5)]
    names = [f"s{i}" for i in range(1, 9)]
    n = number(names, edges, sinks=set())
    assert sorted(n.numbers.values()) == list(range(1, 9))  # unique over the run
    assert n.numbers["s1"] == 1

    def behind(sw: str, key: int) -> set[str] | None:
        r = n.regions[(sw, key)]
        return None if r is None else {s for s in names if n.numbers[s] in r}

    assert behind("s1", 0) == {"s2", "s3", "s4", "s5"}
    assert behind("s2", 0) == {"s1"}
    assert behind("s2", 2) == {"s4", "s5"} and behind("s4", 2) == {"s1", "s2", "s3"}
    assert behind("s5", 3) == {"s1", "s2", "s3", "s4"}
    assert behind("s3", 1) == {"s1", "s2", "s4", "s5"}
    assert behind("s7", 4) is None and behind("s8", 5) is None  # a loop: all multicast
    # A sink (snooping off, or a bridge behind it): every port toward it takes all.
    m = number(names, edges, sinks={"s5"})
    assert m.regions[("s1", 0)] is None and m.regions[("s2", 2)] is None
    assert m.regions[("s4", 3)] is None
    assert m.regions[("s2", 1)] is not None and m.regions[("s5", 3)] is not None
    # A chain of 10,000 switches: no recursion limit, every end's region exact.
    chain = [f"c{i}" for i in range(10_000)]
    c = number(chain, [(chain[i], chain[i + 1], i) for i in range(9_999)], set())
    r = c.regions[("c0", 0)]
    assert r is not None and r.bounds() == (2, 10_000, 1, 0)
    r = c.regions[("c9999", 9_998)]
    assert r is not None and 1 in r and 9_999 in r and 10_000 not in r


def test_controllers_are_checked_by_name_kind_port_and_need_an_ovs_switch() -> None:
    from fidelnet.topology import ControllerSpec

    t = topo(datapath="ovs")
    t.controllers = [ControllerSpec("c0"), ControllerSpec("c1", port=6654)]
    assert problems(t) == []
    t.controllers = [
        ControllerSpec("c0"),
        ControllerSpec("c0", port=6654),
        ControllerSpec("c2", kind="nox"),  # type: ignore[arg-type]
        ControllerSpec("c3", port=70000),
        ControllerSpec("c4", port=6653),
    ]
    errors = [str(e) for e in problems(t)]
    assert any(e.startswith("controllers[1].name: must be a unique") for e in errors), errors
    assert any("controllers[2].kind: unknown controller kind" in e and "ref" in e for e in errors)
    assert any(e.startswith("controllers[3].port: must be a TCP port") for e in errors)
    assert "controllers[4].port: c0 listens there too (got 6653)" in errors
    t = topo()  # no OVS switch: nothing would connect
    t.controllers = [ControllerSpec("c0")]
    assert [e.field for e in problems(t)] == ["controllers"]
