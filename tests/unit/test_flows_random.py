"""Per-flow policy routing and random topologies without root: flows are checked
field by field, planned into each node's tables and rules; random topologies are
connected, seeded and as dense as asked; random flows follow simple paths of the
hop counts asked; scenario files and ``mn --topo`` reach both."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fidelnet.errors import ValidationError
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.builders import from_mn_spec
from fidelnet.topology.flows import plan, table_id
from fidelnet.topology.randomnet import random_flows, random_topology
from fidelnet.topology.spec import FlowSpec
from fidelnet.topology.validate import problems


def _square() -> TopologySpec:
    """r1 - r2 - r3 and r1 - r4 - r3: two paths from r1 to r3."""
    t = TopologySpec(auto_routes=True)
    for name in ("r1", "r2", "r3", "r4"):
        t.add_node(NodeSpec(name, kind="router"))
    for i, (a, b) in enumerate((("r1", "r2"), ("r2", "r3"), ("r1", "r4"), ("r4", "r3")), 1):
        t.add_link(LinkSpec(a, b, a_ip=f"10.0.{i}.1/24", b_ip=f"10.0.{i}.2/24"))
    return t


def _problems(t: TopologySpec) -> list[str]:
    return [str(p) for p in problems(t)]


def test_flows_are_checked_field_by_field() -> None:
    t = _square()
    t.flows = [
        FlowSpec("a", ("r1", "r2", "r3"), 5000),
        FlowSpec("a", ("r1", "r4", "r3"), 5000),  # same name, same port
        FlowSpec("c", ("r1", "r3"), 5001),  # not linked
        FlowSpec("d", ("r1", "x9"), 70000),  # unknown node, bad port
        FlowSpec("e", ("r1", "r2", "r1"), 5003),  # a node twice
    ]
    got = _problems(t)
    assert any(g.startswith("flows[1].name: ") for g in got)
    assert any(g.startswith("flows[1].port: udp port 5000 marks a already") for g in got)
    assert any(g.startswith("flows[2].path[1]: no link joins r1 and r3") for g in got)
    assert any(g.startswith("flows[3].port: must be a port") for g in got)
    assert any(g.startswith("flows[3].path[1]: unknown node") for g in got)
    assert any(g.startswith("flows[4].path: visits a node twice") for g in got)
    t.flows = [
        FlowSpec("a", ("r1", "r2", "r3"), 5000),
        FlowSpec("b", ("r1", "r4", "r3"), 5000, "tcp"),
    ]
    assert _problems(t) == []  # the same port on another protocol is another flow


def test_a_host_does_not_forward_a_flow() -> None:
    t = _square()
    t.nodes["r2"].kind = "host"
    t.flows = [FlowSpec("a", ("r1", "r2", "r3"), 5000)]
    got = _problems(t)
    assert any(g.startswith("flows[0].path[1]: r2 is a host and does not forward") for g in got)


def test_the_plan_sends_each_flow_through_its_own_path() -> None:
    t = _square()
    t.flows = [FlowSpec("up", ("r1", "r2", "r3"), 5000), FlowSpec("down", ("r1", "r4", "r3"), 5001)]
    p = plan(t)
    assert set(p) == {"r1", "r2", "r4"}  # the destination has nothing to do
    # r1: port 0 (to r2, via 10.0.1.2) for "up", port 1 (to r4, via 10.0.3.2) for "down"
    assert p["r1"].tables == {
        table_id(0): ("10.0.1.2", "r1-eth0"),
        table_id(1): ("10.0.3.2", "r1-eth1"),
    }
    assert p["r1"].rules == [(1000, 17, 5000, table_id(0)), (1001, 17, 5001, table_id(1))]
    assert p["r2"].tables == {table_id(1): ("10.0.2.2", "r2-eth1")}
    assert p["r4"].rules == [(1001, 17, 5001, table_id(1))]


def _connected(t: TopologySpec) -> bool:
    near: dict[str, set[str]] = {n: set() for n in t.nodes}
    for link in t.links:
        near[link.a].add(link.b)
        near[link.b].add(link.a)
    start = next(iter(t.nodes))
    seen, todo = {start}, deque([start])
    while todo:
        for m in near[todo.popleft()] - seen:
            seen.add(m)
            todo.append(m)
    return seen == set(t.nodes)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 40), st.integers(0, 10_000), st.floats(1.0, 4.0))
def test_random_topologies_are_connected_simple_and_as_dense_as_asked(
    n: int, seed: int, degree: float
) -> None:
    degree = min(degree, n - 1)
    t = random_topology(n, seed, degree)
    assert _connected(t)
    pairs = [frozenset((link.a, link.b)) for link in t.links]
    assert len(set(pairs)) == len(pairs) and all(len(p) == 2 for p in pairs)
    assert len(t.links) == max(n - 1, min(round(n * degree / 2), n * (n - 1) // 2))
    assert _problems(t) == []
    again = random_topology(n, seed, degree)
    assert [(x.a, x.b) for x in again.links] == [(x.a, x.b) for x in t.links]


def test_random_links_get_parameters_from_the_ranges() -> None:
    t = random_topology(10, 3, 2.0, bw_mbps=(10, 20), delay_ms=(1, 2))
    for link in t.links:
        assert link.params.bw is not None and 10e6 <= link.params.bw <= 20e6
        assert link.params.delay is not None and 1e-3 <= link.params.delay <= 2e-3


def test_random_flows_follow_simple_paths_of_the_hops_asked() -> None:
    t = random_topology(15, 7, 3.0)
    flows = random_flows(t, 40, seed=7)
    assert len({f.port for f in flows}) == 40
    for f in flows:
        assert 2 <= f.hops <= 5 and len(set(f.path)) == len(f.path)
        assert 1e6 <= (f.rate_bps or 0) <= 294e6 and f.size == 363
    t.flows = flows
    assert _problems(t) == []
    assert set(plan(t))  # every flow's path has addresses to route by
    assert random_flows(t, 40, seed=7) == flows


def test_random_inputs_are_refused_naming_the_field() -> None:
    with pytest.raises(ValidationError, match=r"random\.nodes"):
        random_topology(1)
    with pytest.raises(ValidationError, match=r"random\.degree"):
        random_topology(4, 1, 5.0)
    with pytest.raises(ValidationError, match=r"flows\.hops"):
        random_flows(random_topology(3, 1, 1.0), 1, hops=(6, 6))  # a 3-node tree has no 6-hop path
    with pytest.raises(ValidationError, match=r"random\.bw_mbps"):
        random_topology(4, 1, 2.0, bw_mbps=(20, 10))


def test_mn_topo_random() -> None:
    t = from_mn_spec("random,6,seed=4,degree=2")
    assert list(t.nodes) == [f"h{i}" for i in range(1, 7)] and len(t.links) == 6
    with pytest.raises(ValidationError, match="topo"):
        from_mn_spec("random")


def test_a_scenario_with_a_random_builder_and_flows_of_its_own() -> None:
    from fidelnet.scenario.load import loads

    text = """
name: hv
topology:
  builder:
    random: {nodes: 8, seed: 5, degree: 2.5, flows: {count: 6, hops: [2, 3]}}
  routing:
    flows:
      - {path: [h1, h9], port: 9000}
"""
    with pytest.raises(Exception) as exc:
        loads(text, "hv.yaml")
    assert "topology.routing.flows[0].path[1]" in str(exc.value), str(exc.value)
    first = random_topology(8, 5, 2.5).links[0]
    s = loads(text.replace("[h1, h9]", f"[{first.a}, {first.b}]"))
    spec = s.topology_spec()
    assert len(spec.flows) == 7 and spec.flows[-1].name == "flow1"
    assert spec.flows[-1].path == (first.a, first.b) and spec.flows[-1].port == 9000
