"""Partitioning a topology over machines without a cluster: METIS cuts lines,
rings and dumbbells where the links are thin, keeps hosts with their switch and
links whose delay the network between machines cannot honour in one piece, sizes
parts by capacity and max weight, refuses by name, and does so deterministically."""

from __future__ import annotations

import datetime as _dt

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fidelnet._version import __version__
from fidelnet.cluster import (
    UNSHAPED_MBPS,
    VM_WEIGHT,
    MachineSpec,
    Partition,
    PartitionError,
    link_weight,
    node_weight,
    partition,
)
from fidelnet.errors import ValidationError
from fidelnet.fidelity import profile as prof
from fidelnet.fidelity.machine import machine
from fidelnet.fidelity.profile import Forwarding, Profile
from fidelnet.topology import builders
from fidelnet.topology.spec import LinkParams, LinkSpec, NodeSpec, TopologySpec, VMSpec

NEAR = 4e-4  # 0.4 ms between machines


def _machines(n: int, **kw: float) -> list[MachineSpec]:
    return [MachineSpec(f"m{i}", 1.0, **kw) for i in range(1, n + 1)]


def _delays(n: int, owd: float = NEAR) -> dict[tuple[str, str], float]:
    return {(f"m{i}", f"m{j}"): owd for i in range(1, n + 1) for j in range(i + 1, n + 1)}


def _routers(n: int, *, ring: bool = False, bw: float = 100e6, delay: float = 5e-3) -> TopologySpec:
    spec = TopologySpec()
    for i in range(1, n + 1):
        spec.add_node(NodeSpec(f"r{i}", kind="router"))
    for i in range(1, n if not ring else n + 1):
        j = i % n + 1
        spec.add_link(LinkSpec(f"r{i}", f"r{j}", params=LinkParams(bw=bw, delay=delay)))
    return spec


def _cut_names(p: Partition) -> set[str]:
    return {c.name for c in p.cut}


@pytest.mark.parametrize(("parts", "cuts"), [(2, 1), (3, 2)])
def test_a_line_is_split_in_balanced_parts_with_few_cuts(parts: int, cuts: int) -> None:
    p = partition(_routers(30), _machines(parts), _delays(parts))
    assert sorted(p.weights) == [f"m{i}" for i in range(1, parts + 1)]
    assert all(abs(w - 30 / parts) <= 1 for w in p.weights.values()), p.weights
    assert len(p.cut) == cuts
    assert p.cut_weight == 100 * cuts  # Mbit/s
    # a line's parts are runs of consecutive routers
    for m in p.weights:
        idx = [int(n[1:]) for n in p.nodes_on(m)]
        assert idx == list(range(min(idx), max(idx) + 1))


def test_thin_links_are_cut_and_fat_ones_kept() -> None:
    spec = _routers(8, ring=True, bw=10e9)
    for link in spec.links:
        if (link.a, link.b) in (("r2", "r3"), ("r6", "r7")):
            link.params = LinkParams(bw=10e6, delay=5e-3)
    p = partition(spec, _machines(2), _delays(2))
    assert _cut_names(p) == {"r2-r3", "r6-r7"}
    assert p.cut_weight == 20
    assert link_weight(LinkSpec("a", "b")) == UNSHAPED_MBPS
    assert (
        link_weight(LinkSpec("a", "b", params=LinkParams(bw=10e6), params_ba=LinkParams(bw=1e9)))
        == 1000
    )


def test_a_dumbbell_is_cut_at_its_bottleneck() -> None:
    # two rings of 6 routers at 1 Gbit/s, joined by one 10 Mbit/s link
    spec = _routers(6, ring=True, bw=1e9)
    right = _routers(6, ring=True, bw=1e9)
    for node in right.nodes.values():
        spec.add_node(NodeSpec("x" + node.name, kind="router"))
    for link in right.links:
        spec.add_link(LinkSpec("x" + link.a, "x" + link.b, params=link.params))
    spec.add_link(LinkSpec("r1", "xr4", params=LinkParams(bw=10e6, delay=2e-3)))
    p = partition(spec, _machines(2), _delays(2))
    assert _cut_names(p) == {"r1-xr4"}
    assert {p.placement[f"r{i}"] for i in range(1, 7)} != {
        p.placement[f"xr{i}"] for i in range(1, 7)
    }
    # and the builder's dumbbell: hosts go with their switch, the cut is s1-s2
    p = partition(builders.dumbbell(4, LinkParams(bw=10e6)), _machines(2), _delays(2))
    assert _cut_names(p) == {"s1-s2"}
    assert p.weights == {"m1": 5, "m2": 5}


def test_hosts_stay_with_their_switch() -> None:
    spec = builders.linear(6, n=3)  # 6 switches in a chain, 3 hosts on each
    p = partition(spec, _machines(3), _delays(3))
    for link in spec.links:
        if spec.nodes[link.a].kind == "host":
            assert p.placement[link.a] == p.placement[link.b], link
    assert all(spec.nodes[c.a].kind == "switch" == spec.nodes[c.b].kind for c in p.cut)
    assert sorted(p.weights.values()) == [8, 8, 8]
    # even over thin links to a switch on fat ones: the hosts are not spread
    spec = builders.single(6)
    for link in spec.links:
        link.params = LinkParams(bw=10e6)
    p = partition(spec, _machines(2), _delays(2))
    assert p.cut == () and sorted(p.weights.values()) == [0, 7]


def test_a_link_below_the_network_delay_is_never_cut() -> None:
    spec = _routers(10)
    spec.links[4].params = LinkParams(bw=100e6, delay=1e-4)  # r5-r6, the balanced cut
    p = partition(spec, _machines(2), _delays(2))
    assert "r5-r6" not in _cut_names(p)
    assert p.placement["r5"] == p.placement["r6"]
    assert len(p.cut) == 1


def test_a_partition_that_cannot_honour_a_small_delay_is_refused_by_name() -> None:
    spec = _routers(10, delay=2e-4)
    with pytest.raises(PartitionError) as err:
        partition(spec, _machines(2, max_weight=6), _delays(2))
    msg = str(err.value)
    assert "link r1-r2 (delay 0.2 ms) cannot be cut: machines m1-m2 are 0.4 ms apart" in msg
    assert "weighs 10, more than any machine's max weight 6" in msg
    assert "r1-r2" in err.value.links and "r10" in err.value.nodes
    assert err.value.machines == ("m1", "m2")
    # without a max weight it fits on one machine, uncut
    p = partition(spec, _machines(2), _delays(2))
    assert p.cut == () and sorted(p.weights.values()) == [0, 10]


def test_a_machine_too_far_for_the_delays_is_left_out() -> None:
    spec = _routers(30, delay=1e-3)
    delays = {("m1", "m2"): 1e-4, ("m1", "m3"): 2e-3, ("m2", "m3"): 2e-3}
    p = partition(spec, _machines(3), delays)
    assert p.weights == {"m1": 15, "m2": 15, "m3": 0}
    assert all({c.a_machine, c.b_machine} == {"m1", "m2"} for c in p.cut)
    assert p.notes and p.notes[0].startswith("machine m3 left out: link ")
    with pytest.raises(PartitionError, match=r"m3 left out.*more than the other machines'"):
        partition(spec, _machines(3, max_weight=12), delays)


def test_capacities_two_to_one_give_parts_two_to_one() -> None:
    machines = [MachineSpec("big", 2.0), MachineSpec("small", 1.0)]
    p = partition(_routers(60, ring=True), machines, {("big", "small"): NEAR})
    assert abs(p.weights["big"] - 40) <= 2 and abs(p.weights["small"] - 20) <= 2
    assert len(p.cut) == 2


def test_a_max_weight_caps_a_machine() -> None:
    machines = [MachineSpec("m1", 1.0, max_weight=12), *_machines(3)[1:]]
    p = partition(_routers(60, ring=True), machines, _delays(3))
    assert p.weights["m1"] <= 12
    assert sum(p.weights.values()) == 60
    with pytest.raises(PartitionError, match="weighs 60, more than the machines' max weights"):
        partition(_routers(60, ring=True), _machines(3, max_weight=19), _delays(3))
    with pytest.raises(PartitionError, match=r"m3 20\.5: 60 in whole weights\)$"):
        partition(_routers(61, ring=True), _machines(3, max_weight=20.5), _delays(3))
    # parts sized 3:1:1 but capped at 12 each: the groups (an edge switch and its two
    # hosts weigh 3) are moved until every machine fits
    machines = [MachineSpec("m1", 3.0, 33), *_machines(3, max_weight=33)[1:]]
    p = partition(builders.fattree(6), machines, _delays(3))
    assert p.weights == {"m1": 33, "m2": 33, "m3": 33}
    # four switches with four hosts each do not pack into three machines of 9
    with pytest.raises(PartitionError, match=r"m\d weighs 10 \(max 9\);.* weigh up to \{s2, h1"):
        partition(builders.tree(2, 4), _machines(3, max_weight=9), _delays(3))


def test_vm_nodes_weigh_more() -> None:
    spec = _routers(9)
    spec.nodes["r1"].backend = "qemu"
    assert node_weight(spec.nodes["r1"]) == VM_WEIGHT == 8
    assert node_weight(NodeSpec("v", kind="router", backend="qemu", vm=VMSpec(cpus=2))) == 16
    assert node_weight(spec.nodes["r2"]) == node_weight(NodeSpec("s", kind="switch")) == 1
    p = partition(spec, _machines(2), _delays(2))
    assert p.nodes_on(p.placement["r1"]) == ["r1"]  # the VM alone balances eight routers
    assert sorted(p.weights.values()) == [8, 8]
    assert _cut_names(p) == {"r1-r2"}


def test_cut_links_carry_the_compensated_delay() -> None:
    spec = _routers(4)
    spec.links[1].params = LinkParams(bw=1e6, delay=5e-3)  # r2-r3, the thinnest
    spec.links[1].params_ba = LinkParams(delay=2e-3)
    delays = {"m1": {"m2": 3e-4}, "m2": {"m1": 5e-4}}
    p = partition(spec, _machines(2), delays)
    (cut,) = p.cut
    assert (cut.index, cut.name, cut.weight) == (1, "r2-r3", 1)
    owd = {("m1", "m2"): 3e-4, ("m2", "m1"): 5e-4}
    assert cut.network_ab == owd[cut.a_machine, cut.b_machine]
    assert cut.network_ba == owd[cut.b_machine, cut.a_machine]
    assert (cut.delay_ab, cut.delay_ba) == (5e-3, 2e-3)
    assert cut.compensated_ab == pytest.approx(5e-3 - cut.network_ab)
    assert cut.compensated_ba == pytest.approx(2e-3 - cut.network_ba)
    # an unshaped cut link has no delay to compensate: it carries the network's
    p = partition(builders.dumbbell(2), _machines(2), _delays(2))
    assert [(c.delay_ab, c.compensated_ab, c.compensated_ba) for c in p.cut] == [(None, 0.0, 0.0)]


def test_one_machine_takes_everything_uncut() -> None:
    spec = builders.fattree(4)
    p = partition(spec, [MachineSpec("solo", 3.0)])
    assert set(p.placement.values()) == {"solo"}
    assert (p.cut, p.cut_weight, p.weights) == ((), 0, {"solo": 36})


def test_the_same_input_gives_the_same_partition() -> None:
    spec = builders.from_mn_spec("torus,4,4")
    runs = [partition(spec, _machines(3), _delays(3)) for _ in range(3)]
    assert runs[0] == runs[1] == runs[2]
    assert partition(spec, _machines(3), _delays(3), seed=7).placement.keys() == spec.nodes.keys()


def _profile(tc_pps: float | None) -> Profile:
    m = machine()
    fwd = (
        [
            Forwarding(
                backend="tc",
                layout="chain",
                links=3,
                frame_bytes=64,
                offered_pps=[tc_pps],
                delivered_pps=[tc_pps],
                breaking_pps=tc_pps,
            )  # fmt: skip
        ]
        if tc_pps
        else []
    )
    return Profile(
        key=prof.machine_key(m),
        fidelnet=__version__,
        machine=m,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(),
        seconds=1.0,
        command=["fidelnet", "calibrate"],
        steal_at_rest_pct=0.0,
        forwarding=fwd,
    )


def test_capacity_from_a_calibration_profile() -> None:
    m = MachineSpec.from_profile("m1", _profile(50_000), max_weight=40)
    assert (m.capacity, m.max_weight) == (150_000, 40)  # 3 links x 50 kpps
    with pytest.raises(ValidationError, match=r"machines\[m1\]\.profile: no forwarding capacity"):
        MachineSpec.from_profile("m1", _profile(50_000), backend="engine")
    with pytest.raises(ValidationError, match="no forwarding capacity calibrated for backend 'tc'"):
        MachineSpec.from_profile("m1", _profile(None))


@pytest.mark.parametrize(
    ("machines", "delays", "expected"),
    [
        ([], None, r"^machines: give at least one machine$"),
        ([MachineSpec("m1", 0.0)], None, r"^machines\[m1\]\.capacity: must be a positive"),
        ([MachineSpec("m1", -2.0), MachineSpec("m2", 1.0)], {}, r"capacity.*got -2\.0"),
        (_machines(2), {("m1", "mX"): 1e-4}, r"^delays\['m1', 'mX'\]: not one of the machines "
         r"\(got 'mX'; valid: m1, m2\)$"),
        (_machines(2), {("m1", "m2"): -1e-4}, r"^delays\['m1', 'm2'\]: must be a one-way delay"),
        (_machines(2), {"m1": {"m3": 1e-4}}, r"^delays\['m1'\]: not one of the machines.*m1, m2"),
        (_machines(2), None, r"^delays: give the measured one-way delays.*valid: m1, m2"),
        (_machines(3), _delays(2), r"^delays: no measured delay between m1 and m3"),
        (_machines(2), [[0.0, 1e-4]], r"^delays: a matrix must be 2x2"),
        ([MachineSpec("m1", 1.0), MachineSpec("m1", 1.0)], {}, r"machines\[1\]\.name: names a"),
        (_machines(2, max_weight=0.0), _delays(2), r"machines\[m1\]\.max_weight: must be positive"),
    ],
)  # fmt: skip
def test_bad_input_is_refused_by_field(
    machines: list[MachineSpec], delays: object, expected: str
) -> None:
    with pytest.raises(ValidationError, match=expected):
        partition(_routers(4), machines, delays)  # type: ignore[arg-type]


def test_a_delay_matrix_in_machine_order() -> None:
    p = partition(_routers(10), _machines(2), [[0.0, 3e-4], [6e-4, 0.0]])
    (cut,) = p.cut
    assert {cut.network_ab, cut.network_ba} == {3e-4, 6e-4}
    with pytest.raises(ValidationError, match=r"^links\[0\]\.b: not a node"):
        partition(
            TopologySpec(links=[LinkSpec("r1", "r9")], nodes={"r1": NodeSpec("r1")}),
            _machines(2),
            _delays(2),
        )


@st.composite
def _topologies(
    draw: st.DrawFn,
) -> tuple[TopologySpec, list[MachineSpec], dict[tuple[str, str], float]]:
    n = draw(st.integers(2, 24))
    spec = TopologySpec()
    for i in range(n):
        kind = draw(st.sampled_from(["router", "switch", "host"]))
        spec.add_node(
            NodeSpec(
                f"n{i}",
                kind=kind,
                backend="qemu" if draw(st.booleans()) and kind == "router" else "netns",
            )
        )
    for i in range(1, n):  # a spanning tree, then extra links
        j = draw(st.integers(0, i - 1))
        spec.add_link(LinkSpec(f"n{j}", f"n{i}", params=draw(_params())))
    for _ in range(draw(st.integers(0, n))):
        a, b = draw(st.integers(0, n - 1)), draw(st.integers(0, n - 1))
        if a != b:
            spec.add_link(LinkSpec(f"n{a}", f"n{b}", params=draw(_params())))
    k = draw(st.integers(2, 4))
    machines = [MachineSpec(f"m{i}", draw(st.floats(0.5, 4.0))) for i in range(k)]
    owd = st.floats(1e-5, 2e-3)
    delays = {(f"m{i}", f"m{j}"): draw(owd) for i in range(k) for j in range(k) if i != j}
    return spec, machines, delays


def _params() -> st.SearchStrategy[LinkParams]:
    return st.builds(
        LinkParams,
        bw=st.none() | st.sampled_from([10e6, 100e6, 1e9, 10e9]),
        delay=st.none() | st.floats(0.0, 3e-3),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_topologies())
def test_every_node_placed_once_and_no_contracted_link_cut(
    case: tuple[TopologySpec, list[MachineSpec], dict[tuple[str, str], float]],
) -> None:
    spec, machines, delays = case
    p = partition(spec, machines, delays)
    names = {m.name for m in machines}
    assert list(p.placement) == list(spec.nodes)  # each node exactly once, in order
    assert set(p.placement.values()) <= names
    assert sum(p.weights.values()) == sum(node_weight(n) for n in spec.nodes.values())
    degree = {n: sum(n in (lk.a, lk.b) for lk in spec.links) for n in spec.nodes}
    for c in p.cut:
        link = spec.links[c.index]
        assert p.placement[c.a] != p.placement[c.b]
        for end in (c.a, c.b):  # a host with one link is never cut from it
            assert not (spec.nodes[end].kind == "host" and degree[end] == 1)
        for configured, network in ((c.delay_ab, c.network_ab), (c.delay_ba, c.network_ba)):
            assert configured is None or configured >= network  # never below the network
        assert (c.network_ab, c.network_ba) == (
            delays[c.a_machine, c.b_machine],
            delays[c.b_machine, c.a_machine],
        )
        assert c.weight == link_weight(link)
