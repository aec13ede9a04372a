"""Port, interface-name, IP and MAC assignment (fidelnet.topology.addressing)."""

from __future__ import annotations

import pytest

from fidelnet.errors import ValidationError
from fidelnet.topology import (
    LinkSpec,
    NodeSpec,
    TopologySpec,
    assign_ips,
    assign_ports,
    line,
    linear,
    mac_for,
    natural_key,
    reversed_,
    single,
)
from fidelnet.topology.addressing import interfaces, plan_ports


def make(nodes: list[tuple[str, str]], links: list[LinkSpec], **opts: object) -> TopologySpec:
    spec = TopologySpec(**opts)  # type: ignore[arg-type]
    for name, kind in nodes:
        spec.add_node(NodeSpec(name, kind=kind))  # type: ignore[arg-type]
    for link in links:
        spec.add_link(link)
    return spec


def ends(spec: TopologySpec) -> list[tuple[int | None, int | None, str | None, str | None]]:
    return [(link.a_port, link.b_port, link.a_intf, link.b_intf) for link in spec.links]


def test_natural_key_orders_like_mininet() -> None:
    names = ["h10", "h2", "h1", "s1", "h1s2", "h1s10", "h1s1", "a", "h"]
    assert sorted(names, key=natural_key) == [
        "a", "h", "h1", "h1s1", "h1s2", "h1s10", "h2", "h10", "s1",
    ]  # fmt: skip


def test_natural_key_ignores_non_ascii_digits() -> None:
    assert natural_key("h²") == ("h²",)


@pytest.mark.parametrize(
    ("n", "mac"),
    [
        (1, "00:00:00:00:00:01"),
        (255, "00:00:00:00:00:ff"),
        (256, "00:00:00:00:01:00"),
        (2**48 - 1, "ff:ff:ff:ff:ff:ff"),
    ],
)
def test_mac_for(n: int, mac: str) -> None:
    assert mac_for(n) == mac


@pytest.mark.parametrize("n", [-1, 2**48, True])
def test_mac_for_out_of_range(n: int) -> None:
    with pytest.raises(ValidationError) as info:
        mac_for(n)
    assert info.value.field == "mac"


def test_assign_ports_single() -> None:
    spec = assign_ports(single(2))
    assert ends(spec) == [(0, 1, "h1-eth0", "s1-eth1"), (0, 2, "h2-eth0", "s1-eth2")]


def test_assign_ports_linear_switch_uplinks() -> None:
    spec = assign_ports(linear(3))
    # (s2, s1): s2 already used port 1 for h2, s1 used port 1 for h1.
    assert ends(spec)[2] == (2, 2, "s2-eth2", "s1-eth2")
    assert ends(spec)[4] == (2, 3, "s3-eth2", "s2-eth3")


def test_assign_ports_reversed_keeps_explicit_ports() -> None:
    spec = assign_ports(reversed_(3))
    assert ends(spec) == [
        (0, 3, "h1-eth0", "s1-eth3"),
        (0, 2, "h2-eth0", "s1-eth2"),
        (0, 1, "h3-eth0", "s1-eth1"),
    ]


def test_assign_ports_next_is_max_plus_one() -> None:
    spec = make(
        [("s1", "switch"), ("h1", "host"), ("h2", "host"), ("h3", "host")],
        [LinkSpec("h1", "s1", b_port=5), LinkSpec("h2", "s1"), LinkSpec("h3", "s1", a_port=3)],
    )
    assign_ports(spec)
    assert ends(spec) == [
        (0, 5, "h1-eth0", "s1-eth5"),
        (0, 6, "h2-eth0", "s1-eth6"),
        (3, 7, "h3-eth3", "s1-eth7"),
    ]


def test_assign_ports_explicit_interface_names() -> None:
    spec = make(
        [("r1", "router"), ("r2", "router")],
        [LinkSpec("r1", "r2", a_intf="wan0"), LinkSpec("r1", "r2", b_intf="lan7")],
    )
    assign_ports(spec)
    assert ends(spec) == [(0, 0, "wan0", "r2-eth0"), (1, 1, "r1-eth1", "lan7")]


def test_routers_start_at_port_zero() -> None:
    assert ends(assign_ports(line(3))) == [
        (0, 0, "h1-eth0", "h2-eth0"),
        (1, 0, "h2-eth1", "h3-eth0"),
    ]


def test_plan_ports_does_not_change_the_spec() -> None:
    spec = single(2)
    plans = plan_ports(spec)
    assert [p.b_intf for p in plans] == ["s1-eth1", "s1-eth2"]
    assert spec.links[0].b_port is None
    assert spec.links[0].b_intf is None


def test_assign_ips_natural_order() -> None:
    spec = single(12)
    spec.nodes["h11"].ip = "192.168.9.9/24"  # keeps it, and still uses up number 11
    assign_ips(spec)
    ips = {n.name: n.ip for n in spec.hosts()}
    assert ips["h1"] == "10.0.0.1/8"
    assert ips["h2"] == "10.0.0.2/8"
    assert ips["h10"] == "10.0.0.10/8"
    assert ips["h11"] == "192.168.9.9/24"
    assert ips["h12"] == "10.0.0.12/8"
    assert spec.nodes["s1"].ip is None


def test_assign_ips_sorts_names_naturally_not_by_insertion() -> None:
    spec = make([("h10", "host"), ("h9", "host"), ("x", "host")], [])
    assign_ips(spec)
    assert [spec.nodes[n].ip for n in ("h9", "h10", "x")] == [
        "10.0.0.1/8", "10.0.0.2/8", "10.0.0.3/8",
    ]  # fmt: skip


def test_assign_ips_macs() -> None:
    spec = single(3)
    spec.auto_set_macs = True
    spec.nodes["h2"].mac = "02:00:00:00:00:aa"
    assign_ips(spec)
    assert spec.nodes["h1"].mac == "00:00:00:00:00:01"
    assert spec.nodes["h2"].mac == "02:00:00:00:00:aa"
    assert spec.nodes["h3"].mac == "00:00:00:00:00:03"
    assert spec.nodes["s1"].mac is None


def test_assign_ips_without_auto_macs_leaves_mac_alone() -> None:
    spec = assign_ips(single(2))
    assert spec.nodes["h1"].mac is None


def test_assign_ips_other_base() -> None:
    spec = single(2)
    spec.ip_base = "192.168.0.0/16"
    assign_ips(spec)
    assert spec.nodes["h2"].ip == "192.168.0.2/16"


def test_assign_ips_base_without_prefix_is_slash_24() -> None:
    spec = single(1)
    spec.ip_base = "172.16.5.0"
    assign_ips(spec)
    assert spec.nodes["h1"].ip == "172.16.5.1/24"


def test_assign_ips_starts_at_host_part_of_base() -> None:
    # Mininet: nextIP starts at the host bits of ipBase when they are not zero.
    spec = single(2)
    spec.ip_base = "10.0.0.100/24"
    spec.auto_set_macs = True
    assign_ips(spec)
    assert spec.nodes["h1"].ip == "10.0.0.100/24"
    assert spec.nodes["h2"].ip == "10.0.0.101/24"
    assert spec.nodes["h2"].mac == "00:00:00:00:00:65"


def test_assign_ips_too_few_addresses() -> None:
    spec = single(3)
    spec.ip_base = "10.0.0.0/30"  # room for .1 and .2 only
    with pytest.raises(ValidationError) as info:
        assign_ips(spec)
    assert info.value.field == "ip_base"
    assert "too few addresses" in str(info.value)
    assert all(n.ip is None for n in spec.hosts())  # nothing half-assigned


def test_assign_ips_fills_exactly_the_available_addresses() -> None:
    spec = single(2)
    spec.ip_base = "10.0.0.0/30"
    assign_ips(spec)
    assert spec.nodes["h2"].ip == "10.0.0.2/30"


@pytest.mark.parametrize("base", ["10.0.0.0/33", "10.0.0/8", "ten/8", "", "fe80::/64"])
def test_assign_ips_malformed_base(base: str) -> None:
    spec = single(1)
    spec.ip_base = base
    with pytest.raises(ValidationError) as info:
        assign_ips(spec)
    assert info.value.field == "ip_base"


def test_routers_with_link_addresses_keep_no_ip() -> None:
    spec = make(
        [("r1", "router"), ("r2", "router"), ("h1", "host")],
        [LinkSpec("r1", "r2", a_ip="10.9.0.1/24", b_ip="10.9.0.2/24"), LinkSpec("h1", "r1")],
    )
    assign_ips(spec)
    assert spec.nodes["r1"].ip is None
    assert spec.nodes["r2"].ip is None
    # h1 is number 1 (h1 < r1 < r2 in natural order).
    assert spec.nodes["h1"].ip == "10.0.0.1/8"


def test_router_without_link_addresses_gets_one() -> None:
    spec = make([("h1", "host"), ("r1", "router")], [LinkSpec("h1", "r1")])
    assign_ips(spec)
    assert spec.nodes["r1"].ip == "10.0.0.2/8"


def test_line_keeps_its_addresses() -> None:
    spec = assign_ips(line(3))
    assert [n.ip for n in spec.nodes.values()] == ["10.0.1.1/24", "10.0.1.2/24", "10.0.2.2/24"]


def test_interfaces_node_ip_belongs_to_lowest_port() -> None:
    spec = make(
        [("s1", "switch"), ("h1", "host")],
        [LinkSpec("h1", "s1", a_port=4), LinkSpec("h1", "s1", a_port=2)],
    )
    spec.nodes["h1"].ip = "10.0.0.1/8"
    found = {(e.node, e.name): e for e in interfaces(spec)}
    assert found["h1", "h1-eth2"].default
    assert found["h1", "h1-eth2"].ip == "10.0.0.1/8"
    assert found["h1", "h1-eth2"].ip_field == "nodes.h1.ip"
    assert found["h1", "h1-eth4"].ip is None


def test_interfaces_link_address_wins() -> None:
    spec = assign_ips(line(2))
    first = interfaces(spec)[0]
    assert (first.node, first.name, first.ip, first.ip_field) == (
        "h1", "h1-eth0", "10.0.1.1/24", "links[0].a_ip",
    )  # fmt: skip
