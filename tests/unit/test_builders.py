"""Builders (fidelnet.topology.builders) against what Mininet's Topo classes produce.

Expected values are worked out from Mininet's build() methods: node insertion
order, links in the order ``addLink`` is called, and the port numbers that order
implies (Topo.addPort).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fidelnet.errors import ValidationError
from fidelnet.topology import (
    LinkParams,
    TopologySpec,
    assign_ips,
    assign_ports,
    dumbbell,
    fattree,
    from_mn_spec,
    line,
    linear,
    minimal,
    problems,
    reversed_,
    single,
    torus,
    tree,
)


def pairs(spec: TopologySpec) -> list[tuple[str, str]]:
    return [(link.a, link.b) for link in spec.links]


def port_map(spec: TopologySpec) -> dict[str, dict[int, tuple[str, int]]]:
    """Like Mininet's Topo.ports: ports[node][port] = (peer, peer_port)."""
    assign_ports(spec)
    ports: dict[str, dict[int, tuple[str, int]]] = {}
    for link in spec.links:
        assert link.a_port is not None and link.b_port is not None
        ports.setdefault(link.a, {})[link.a_port] = (link.b, link.b_port)
        ports.setdefault(link.b, {})[link.b_port] = (link.a, link.a_port)
    return ports


def test_minimal() -> None:
    spec = minimal()
    assert list(spec.nodes) == ["s1", "h1", "h2"]
    assert pairs(spec) == [("h1", "s1"), ("h2", "s1")]
    assert [n.name for n in spec.switches()] == ["s1"]


def test_single() -> None:
    spec = single(3)
    assert list(spec.nodes) == ["s1", "h1", "h2", "h3"]
    assert pairs(spec) == [("h1", "s1"), ("h2", "s1"), ("h3", "s1")]
    assert port_map(spec)["s1"] == {1: ("h1", 0), 2: ("h2", 0), 3: ("h3", 0)}


def test_single_default_is_two_hosts() -> None:
    assert list(single().nodes) == ["s1", "h1", "h2"]


def test_linear_one_host_per_switch() -> None:
    spec = linear(3)
    assert list(spec.nodes) == ["s1", "h1", "s2", "h2", "s3", "h3"]
    assert pairs(spec) == [("h1", "s1"), ("h2", "s2"), ("s2", "s1"), ("h3", "s3"), ("s3", "s2")]
    ports = port_map(spec)
    assert ports["s2"] == {1: ("h2", 0), 2: ("s1", 2), 3: ("s3", 2)}


def test_linear_several_hosts_uses_mininet_names() -> None:
    spec = linear(2, 2)
    # Mininet's LinearTopo names host j of switch i "h{j}s{i}".
    assert list(spec.nodes) == ["s1", "h1s1", "h2s1", "s2", "h1s2", "h2s2"]
    assert pairs(spec) == [
        ("h1s1", "s1"),
        ("h2s1", "s1"),
        ("h1s2", "s2"),
        ("h2s2", "s2"),
        ("s2", "s1"),
    ]


def test_reversed_ports() -> None:
    spec = reversed_(3)
    assert pairs(spec) == [("h1", "s1"), ("h2", "s1"), ("h3", "s1")]
    assert [(link.a_port, link.b_port) for link in spec.links] == [(0, 3), (0, 2), (0, 1)]


def test_tree_2_2_order_and_ports() -> None:
    spec = tree(2, 2)
    assert list(spec.nodes) == ["s1", "s2", "h1", "h2", "s3", "h3", "h4"]
    # TreeTopo.addTree links a switch to a child after building the child's subtree.
    assert pairs(spec) == [
        ("s2", "h1"),
        ("s2", "h2"),
        ("s1", "s2"),
        ("s3", "h3"),
        ("s3", "h4"),
        ("s1", "s3"),
    ]
    ports = port_map(spec)
    assert ports["s1"] == {1: ("s2", 3), 2: ("s3", 3)}
    assert ports["s2"] == {1: ("h1", 0), 2: ("h2", 0), 3: ("s1", 1)}


def test_tree_counts() -> None:
    spec = tree(3, 3)
    assert len(spec.switches()) == 1 + 3 + 9
    assert [n.name for n in spec.hosts()] == [f"h{i}" for i in range(1, 28)]
    assert len(spec.links) == 39


def test_tree_default_is_depth_1_fanout_2() -> None:
    spec = tree()
    assert list(spec.nodes) == ["s1", "h1", "h2"]
    assert pairs(spec) == [("s1", "h1"), ("s1", "h2")]


def test_torus_3x3() -> None:
    spec = torus(3, 3)
    switches = [f"s{i}x{j}" for i in range(1, 4) for j in range(1, 4)]
    assert [n.name for n in spec.switches()] == switches
    assert [n.name for n in spec.hosts()] == [f"h{i}x{j}" for i in range(1, 4) for j in range(1, 4)]
    assert len(spec.links) == 27
    assert all(n.stp for n in spec.switches())
    assert not any(n.stp for n in spec.hosts())
    assert spec.nodes["s2x3"].opts["dpid"] == "203"
    assert pairs(spec)[:2] == [("h1x1", "s1x1"), ("h1x2", "s1x2")]
    assert pairs(spec)[9:11] == [("s1x1", "s1x2"), ("s1x1", "s2x1")]
    assert pairs(spec)[-2:] == [("s3x3", "s3x1"), ("s3x3", "s1x3")]


def test_torus_several_hosts() -> None:
    spec = torus(3, 4, 2)
    assert len(spec.switches()) == 12
    assert len(spec.hosts()) == 24
    assert "h3x4x2" in spec.nodes
    assert len(spec.links) == 24 + 24


@pytest.mark.parametrize(
    ("args", "field"), [((2, 3), "torus.x"), ((3, 2), "torus.y"), ((3, 3, 0), "torus.n")]
)
def test_torus_too_small(args: tuple[int, ...], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        torus(*args)
    assert info.value.field == field


def test_line_7() -> None:
    spec = line(7)
    assert list(spec.nodes) == [f"h{i}" for i in range(1, 8)]
    assert all(n.kind == "router" for n in spec.nodes.values())
    assert spec.switches() == []
    assert spec.auto_routes is True
    assert pairs(spec) == [(f"h{i}", f"h{i + 1}") for i in range(1, 7)]
    assert [(link.a_ip, link.b_ip) for link in spec.links][2] == ("10.0.3.1/24", "10.0.3.2/24")
    assert spec.nodes["h1"].ip == "10.0.1.1/24"
    assert spec.nodes["h4"].ip == "10.0.3.2/24"
    assert spec.nodes["h7"].ip == "10.0.6.2/24"


@pytest.mark.parametrize("n", [0, 1, 257])
def test_line_bounds(n: int) -> None:
    with pytest.raises(ValidationError) as info:
        line(n)
    assert info.value.field == "line.n"


def test_dumbbell() -> None:
    bottleneck = LinkParams(bw=10e6, delay=0.01)
    spec = dumbbell(2, bottleneck)
    assert list(spec.nodes) == ["s1", "s2", "h1", "h2", "h3", "h4"]
    assert pairs(spec) == [("s1", "s2"), ("h1", "s1"), ("h2", "s1"), ("h3", "s2"), ("h4", "s2")]
    assert spec.links[0].params == bottleneck
    assert all(link.params.is_empty() for link in spec.links[1:])
    assert port_map(spec)["s1"][1] == ("s2", 1)


def test_dumbbell_without_bottleneck_params() -> None:
    spec = dumbbell(1)
    assert spec.links[0].params.is_empty()
    assert len(spec.hosts()) == 2


def test_fattree_4() -> None:
    spec = fattree(4)
    names = list(spec.nodes)
    assert len(spec.switches()) == 20
    assert len(spec.hosts()) == 16
    assert len(spec.links) == 16 + 16 + 16
    assert names[:4] == ["c1", "c2", "c3", "c4"]
    assert {"a1_1", "a4_2", "e1_1", "e4_2", "h1", "h16"} <= set(names)
    assert all(len(name) <= 8 for name in names)


def test_fattree_4_wiring_and_ports() -> None:
    ports = port_map(fattree(4))
    # Edge switch: hosts on ports 1..k/2, aggregation on k/2+1..k.
    assert ports["e1_1"] == {1: ("h1", 0), 2: ("h2", 0), 3: ("a1_1", 1), 4: ("a1_2", 1)}
    # Aggregation switch i of each pod reaches cores (i-1)*k/2+1 .. i*k/2.
    assert ports["a2_2"] == {1: ("e2_1", 4), 2: ("e2_2", 4), 3: ("c3", 2), 4: ("c4", 2)}
    # Core switch ports are pod numbers.
    assert ports["c1"] == {p: (f"a{p}_1", 3) for p in range(1, 5)}
    # Every switch has k ports, every host one.
    assert all(len(p) == 4 for node, p in ports.items() if not node.startswith("h"))
    assert all(len(p) == 1 for node, p in ports.items() if node.startswith("h"))


def test_fattree_2() -> None:
    spec = fattree(2)
    assert list(spec.nodes) == ["c1", "a1_1", "e1_1", "h1", "a2_1", "e2_1", "h2"]


@pytest.mark.parametrize(
    ("build", "field", "fragment"),
    [
        (lambda: single(0), "single.k", "integer >= 1"),
        (lambda: single(True), "single.k", "integer >= 1"),
        (
            lambda: single(2.0),  # type: ignore[arg-type]
            "single.k",
            "integer >= 1",
        ),
        (lambda: linear(0), "linear.k", "integer >= 1"),
        (lambda: linear(2, 0), "linear.n", "integer >= 1"),
        (lambda: reversed_(-1), "reversed.k", "integer >= 1"),
        (lambda: tree(0, 2), "tree.depth", "integer >= 1"),
        (lambda: tree(2, 0), "tree.fanout", "integer >= 1"),
        (lambda: tree(20, 20), "tree.depth", "limit is"),
        (lambda: dumbbell(0), "dumbbell.n", "integer >= 1"),
        (
            lambda: dumbbell(1, 5),  # type: ignore[arg-type]
            "dumbbell.bottleneck",
            "LinkParams",
        ),
        (lambda: fattree(3), "fattree.k", "even"),
        (lambda: fattree(0), "fattree.k", "integer >= 2"),
        (
            lambda: torus("3", 3),  # type: ignore[arg-type]
            "torus.x",
            "integer >= 3",
        ),
    ],
)
def test_builder_arguments_checked(
    build: Callable[[], TopologySpec], field: str, fragment: str
) -> None:
    with pytest.raises(ValidationError) as info:
        build()
    assert info.value.field == field
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    "build",
    [
        minimal,
        lambda: single(4),
        lambda: linear(3, 2),
        lambda: reversed_(3),
        lambda: tree(2, 3),
        lambda: torus(3, 3),
        lambda: line(7),
        lambda: dumbbell(3),
        lambda: fattree(4),
    ],
)
def test_builders_produce_valid_specs(build: Callable[[], TopologySpec]) -> None:
    spec = build()
    assert problems(spec) == []
    assign_ports(spec)
    assign_ips(spec)
    assert problems(spec) == []


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("minimal", minimal),
        ("single", single),
        ("single,3", lambda: single(3)),
        ("single,k=4", lambda: single(4)),
        ("linear", linear),
        ("linear,3", lambda: linear(3)),
        ("linear,3,2", lambda: linear(3, 2)),
        ("linear,k=3,n=2", lambda: linear(3, 2)),
        ("reversed,3", lambda: reversed_(3)),
        ("tree", tree),
        ("tree,2", lambda: tree(2)),
        ("tree,2,3", lambda: tree(2, 3)),
        ("tree,depth=2,fanout=3", lambda: tree(2, 3)),
        ("tree,2,fanout=3", lambda: tree(2, 3)),
        ("torus,3,3", lambda: torus(3, 3)),
        ("torus,3,4,2", lambda: torus(3, 4, 2)),
        (" linear, 4 ", lambda: linear(4)),
    ],
)
def test_from_mn_spec(text: str, expected: Callable[[], TopologySpec]) -> None:
    assert from_mn_spec(text) == expected()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "expected a topology name"),
        ("foo", "unknown topology 'foo'"),
        ("Linear,3", "unknown topology"),
        ("minimal,1", "at most 0 positional"),
        ("linear,1,2,3", "at most 2 positional"),
        ("single,0", "single.k: must be an integer >= 1"),
        ("single,2.5", "single.k: must be an integer"),
        ("single,x", "single.k: must be an integer"),
        ("tree,2,depth=3", "depth is given twice"),
        ("tree,height=3", "no parameter 'height'"),
        ("torus,3", "torus needs y"),
        ("torus,2,3", "torus.x: must be an integer >= 3"),
    ],
)
def test_from_mn_spec_errors(text: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        from_mn_spec(text)
    assert info.value.field == "topo"
    assert fragment in str(info.value)
    assert info.value.choices


def test_from_mn_spec_unknown_name_lists_every_topology() -> None:
    with pytest.raises(ValidationError) as info:
        from_mn_spec("mesh,3")
    assert info.value.choices == (
        "minimal",
        "single,N",
        "linear,K[,N]",
        "reversed,N",
        "tree,DEPTH[,FANOUT]",
        "torus,X,Y[,N]",
        "random,N[,seed=S][,degree=D]",
    )


def test_deep_tree_does_not_overflow_the_stack() -> None:
    spec = tree(2000, 1)
    assert len(spec.nodes) == 2001
    assert pairs(spec)[0] == ("s2000", "h1")
    assert pairs(spec)[-1] == ("s1", "s2")


def test_huge_tree_is_refused_quickly() -> None:
    with pytest.raises(ValidationError, match="limit is 100000"):
        tree(10**7, 2)


def test_fattree_switches_run_stp_because_the_tree_has_loops() -> None:
    spec = fattree(4)
    assert all(s.stp for s in spec.switches())
    assert not any(h.stp for h in spec.hosts())
