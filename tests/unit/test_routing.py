"""Shortest-path static routes (fidelnet.topology.routing)."""

from __future__ import annotations

import dataclasses

import pytest

from fidelnet.errors import ValidationError
from fidelnet.topology import (
    LinkSpec,
    NodeSpec,
    Route,
    TopologySpec,
    assign_ips,
    assign_ports,
    line,
    single,
    static_routes,
)


def node(spec: TopologySpec, name: str, kind: str, ip: str | None = None) -> None:
    spec.add_node(NodeSpec(name, kind=kind, ip=ip))  # type: ignore[arg-type]


def prepared(spec: TopologySpec) -> TopologySpec:
    return assign_ips(assign_ports(spec))


def test_line_7_h1_reaches_far_end_through_h2() -> None:
    routes = static_routes(prepared(line(7)))
    assert Route("10.0.6.0/24", "10.0.1.2", "h1-eth0") in routes["h1"]
    assert [r.dst for r in routes["h1"]] == [f"10.0.{i}.0/24" for i in range(2, 7)]
    assert all(r.via == "10.0.1.2" and r.dev == "h1-eth0" for r in routes["h1"])


def test_line_7_middle_and_far_end() -> None:
    routes = static_routes(prepared(line(7)))
    assert routes["h7"][-1] == Route("10.0.1.0/24", "10.0.6.1", "h7-eth0")
    assert len(routes["h7"]) == 5
    h4 = {r.dst: r for r in routes["h4"]}
    assert set(h4) == {"10.0.1.0/24", "10.0.2.0/24", "10.0.5.0/24", "10.0.6.0/24"}
    assert h4["10.0.1.0/24"] == Route("10.0.1.0/24", "10.0.3.1", "h4-eth0")
    assert h4["10.0.6.0/24"] == Route("10.0.6.0/24", "10.0.4.2", "h4-eth1")


def test_line_routes_are_nearest_first() -> None:
    routes = static_routes(prepared(line(5)))
    assert [r.dst for r in routes["h3"]] == ["10.0.1.0/24", "10.0.4.0/24"]


def router_and_switches() -> TopologySpec:
    """h1, h2 -- s1 -- r1 -- s2 -- h3 (r1 addressed per link)."""
    spec = TopologySpec()
    node(spec, "s1", "switch")
    node(spec, "s2", "switch")
    node(spec, "h1", "host", "10.0.1.10/24")
    node(spec, "h2", "host", "10.0.1.11/24")
    node(spec, "r1", "router")
    node(spec, "h3", "host", "10.0.2.10/24")
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(LinkSpec("h2", "s1"))
    spec.add_link(LinkSpec("r1", "s1", a_ip="10.0.1.1/24"))
    spec.add_link(LinkSpec("r1", "s2", a_ip="10.0.2.1/24"))
    spec.add_link(LinkSpec("h3", "s2"))
    spec.auto_routes = True
    return prepared(spec)


def test_router_between_two_switches() -> None:
    routes = static_routes(router_and_switches())
    assert routes == {
        "h1": [Route("10.0.2.0/24", "10.0.1.1", "h1-eth0")],
        "h2": [Route("10.0.2.0/24", "10.0.1.1", "h2-eth0")],
        "r1": [],
        "h3": [Route("10.0.1.0/24", "10.0.2.1", "h3-eth0")],
    }


def test_switch_chain_is_one_segment() -> None:
    # h1 -- s1 -- s2 -- r1 == h2 : h1 reaches r1 across two switches.
    spec = TopologySpec()
    for name, kind in [
        ("s1", "switch"),
        ("s2", "switch"),
        ("r1", "router"),
        ("h1", "host"),
        ("h2", "host"),
    ]:
        node(spec, name, kind)
    spec.nodes["h1"].ip = "10.1.0.2/16"
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(LinkSpec("s1", "s2"))
    spec.add_link(LinkSpec("s2", "r1", b_ip="10.1.0.1/16"))
    spec.add_link(LinkSpec("r1", "h2", a_ip="10.2.0.1/30", b_ip="10.2.0.2/30"))
    routes = static_routes(prepared(spec))
    assert routes["h1"] == [Route("10.2.0.0/30", "10.1.0.1", "h1-eth0")]
    assert routes["h2"] == [Route("10.1.0.0/16", "10.2.0.1", "h2-eth0")]
    assert "s1" not in routes


def test_hosts_do_not_forward() -> None:
    # h1 == hx == h2 where hx is a host (not a router): no path through it.
    spec = TopologySpec()
    for name in ("h1", "hx", "h2"):
        node(spec, name, "host")
    spec.add_link(LinkSpec("h1", "hx", a_ip="10.0.1.1/24", b_ip="10.0.1.2/24"))
    spec.add_link(LinkSpec("hx", "h2", a_ip="10.0.2.1/24", b_ip="10.0.2.2/24"))
    routes = static_routes(prepared(spec))
    assert routes == {"h1": [], "hx": [], "h2": []}


def test_shortest_path_wins() -> None:
    # r1 == r2 == r3 and a direct r1 == r3; r3 has a stub network to h3.
    spec = TopologySpec()
    for name in ("r1", "r2", "r3"):
        node(spec, name, "router")
    node(spec, "h3", "host")
    spec.add_link(LinkSpec("r1", "r2", a_ip="10.0.12.1/24", b_ip="10.0.12.2/24"))
    spec.add_link(LinkSpec("r2", "r3", a_ip="10.0.23.2/24", b_ip="10.0.23.3/24"))
    spec.add_link(LinkSpec("r1", "r3", a_ip="10.0.13.1/24", b_ip="10.0.13.3/24"))
    spec.add_link(LinkSpec("r3", "h3", a_ip="10.0.3.1/24", b_ip="10.0.3.10/24"))
    routes = {r.dst: r for r in static_routes(prepared(spec))["r1"]}
    assert routes["10.0.3.0/24"] == Route("10.0.3.0/24", "10.0.13.3", "r1-eth1")
    assert set(routes) == {"10.0.23.0/24", "10.0.3.0/24"}


def test_ties_go_to_the_first_router_in_insertion_order() -> None:
    # h1 -- s1 -- {r2, r1} -- s2 -- h2; r2 is inserted before r1.
    spec = TopologySpec()
    for name, kind in [
        ("s1", "switch"),
        ("s2", "switch"),
        ("h1", "host"),
        ("r2", "router"),
        ("r1", "router"),
        ("h2", "host"),
    ]:
        node(spec, name, kind)
    spec.nodes["h1"].ip = "10.0.1.10/24"
    spec.nodes["h2"].ip = "10.0.2.10/24"
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(LinkSpec("r1", "s1", a_ip="10.0.1.1/24"))
    spec.add_link(LinkSpec("r2", "s1", a_ip="10.0.1.2/24"))
    spec.add_link(LinkSpec("r1", "s2", a_ip="10.0.2.1/24"))
    spec.add_link(LinkSpec("r2", "s2", a_ip="10.0.2.2/24"))
    spec.add_link(LinkSpec("h2", "s2"))
    prepared(spec)
    first = static_routes(spec)
    assert first["h1"] == [Route("10.0.2.0/24", "10.0.1.2", "h1-eth0")]
    assert first["h2"] == [Route("10.0.1.0/24", "10.0.2.2", "h2-eth0")]
    assert static_routes(spec) == first


def test_single_subnet_needs_no_routes() -> None:
    routes = static_routes(prepared(single(3)))
    assert routes == {"h1": [], "h2": [], "h3": []}


def test_unaddressed_nodes_get_no_routes() -> None:
    spec = TopologySpec()
    node(spec, "r1", "router")
    node(spec, "r2", "router")
    spec.add_link(LinkSpec("r1", "r2"))
    assert static_routes(spec) == {"r1": [], "r2": []}


def test_route_is_frozen() -> None:
    route = Route("10.0.0.0/8", "10.0.0.1", "h1-eth0")
    with pytest.raises(dataclasses.FrozenInstanceError):
        route.via = "10.0.0.2"  # type: ignore[misc]


def test_malformed_address_is_reported() -> None:
    spec = line(3)
    spec.links[1].b_ip = "10.0.2.300/24"
    with pytest.raises(ValidationError) as info:
        static_routes(spec)
    assert info.value.field == "links[1].b_ip"
