"""Spec checks (fidelnet.topology.validate): one test per kind of bad input."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from fidelnet.errors import ValidationError
from fidelnet.topology import (
    LinkParams,
    LinkSpec,
    NodeSpec,
    TopologySpec,
    assign_ips,
    assign_ports,
    line,
    problems,
    single,
    torus,
    validate,
)


def base() -> TopologySpec:
    """A valid spec: h1, h2 -- s1 -- r1 == h3 (r1/h3 addressed on their link)."""
    spec = single(2)
    spec.add_node(NodeSpec("r1", kind="router"))
    spec.add_node(NodeSpec("h3"))
    spec.add_link(LinkSpec("r1", "s1"))
    spec.add_link(LinkSpec("r1", "h3", a_ip="10.5.0.1/24", b_ip="10.5.0.2/24"))
    return spec


def test_base_is_valid() -> None:
    spec = base()
    assert problems(spec) == []
    validate(spec)
    assign_ips(assign_ports(spec))
    assert problems(spec) == []


def rename(spec: TopologySpec, old: str, new: str) -> None:
    spec.nodes[new] = spec.nodes.pop(old)
    spec.nodes[new].name = new


def set_node(node: str, /, **values: object) -> Callable[[TopologySpec], None]:
    def change(spec: TopologySpec) -> None:
        for key, value in values.items():
            setattr(spec.nodes[node], key, value)

    return change


def set_link(index: int, **values: object) -> Callable[[TopologySpec], None]:
    def change(spec: TopologySpec) -> None:
        for key, value in values.items():
            setattr(spec.links[index], key, value)

    return change


def set_params(
    index: int, attr: str = "params", **values: object
) -> Callable[[TopologySpec], None]:
    return set_link(index, **{attr: LinkParams(**values)})  # type: ignore[arg-type]


def add_node_named(name: str) -> Callable[[TopologySpec], None]:
    def change(spec: TopologySpec) -> None:
        spec.nodes[name] = NodeSpec(name)

    return change


def long_node_with_link(spec: TopologySpec) -> None:
    rename(spec, "h2", "averyl0ngname")
    spec.links[1].a = "averyl0ngname"


def same_ip_twice(spec: TopologySpec) -> None:
    spec.nodes["h1"].ip = "10.0.0.1/8"
    spec.nodes["h2"].ip = "10.0.0.1/16"


def same_mac_twice(spec: TopologySpec) -> None:
    spec.nodes["h1"].mac = "02:00:00:00:00:01"
    spec.links[3].b_mac = "02:00:00:00:00:01"


def root_namespace_clash(spec: TopologySpec) -> None:
    spec.add_node(NodeSpec("s2", kind="switch", in_namespace=False))
    spec.nodes["s1"].in_namespace = False
    spec.add_link(LinkSpec("h1", "s2", b_intf="uplink"))
    spec.add_link(LinkSpec("h2", "s1", b_intf="uplink"))


def too_many_hosts(spec: TopologySpec) -> None:
    # h1, h2 need numbers 1 and 2 (h3 and r1 are addressed on their link); a /31 has one.
    spec.ip_base = "10.0.0.0/31"


CASES: list[tuple[str, Callable[[TopologySpec], None], str, str]] = [
    # (id, change, field, message fragment)
    ("name-charset", add_node_named("bad-name"), "nodes.bad-name.name", "start with a letter"),
    ("name-digit-first", add_node_named("1h"), "nodes.1h.name", "only letters, digits and '_'"),
    ("name-trailing-newline", add_node_named("h9\n"), "nodes.h9\n.name", "1..64 characters"),
    ("name-too-long", add_node_named("h" * 65), f"nodes.{'h' * 65}.name", "1..64 characters"),
    ("name-empty", add_node_named(""), "nodes..name", "start with a letter"),
    ("name-differs-from-key", set_node("h1", name="h7"), "nodes.h1.name", "differs from its key"),
    ("kind", set_node("h1", kind="vm"), "nodes.h1.kind", "unknown node kind"),
    ("stp-on-host", set_node("h1", stp=True), "nodes.h1.stp", "only to switches"),
    ("cpu-zero", set_node("h1", cpu=0), "nodes.h1.cpu", "(0, 1]"),
    ("cpu-above-one", set_node("h1", cpu=1.5), "nodes.h1.cpu", "(0, 1]"),
    ("cpu-nan", set_node("h1", cpu=math.nan), "nodes.h1.cpu", "(0, 1]"),
    ("cpu-text", set_node("h1", cpu="50%"), "nodes.h1.cpu", "(0, 1]"),
    ("cpu-on-switch", set_node("s1", cpu=0.5), "nodes.s1.cpu", "not switches"),
    ("cores-negative", set_node("h1", cores=(0, -1)), "nodes.h1.cores", "non-negative integers"),
    ("cores-duplicate", set_node("h1", cores=(1, 1)), "nodes.h1.cores", "more than once"),
    ("cores-float", set_node("h1", cores=(1.0,)), "nodes.h1.cores", "non-negative integers"),
    ("cores-empty", set_node("h1", cores=()), "nodes.h1.cores", "non-empty"),
    ("sched", set_node("h1", sched="fifo"), "nodes.h1.sched", "unknown scheduler"),
    ("node-ip-no-prefix", set_node("h1", ip="10.0.0.1"), "nodes.h1.ip", "prefix length"),
    ("node-ip-octet", set_node("h1", ip="10.0.0.256/8"), "nodes.h1.ip", "IPv4 address"),
    ("node-ip-prefix", set_node("h1", ip="10.0.0.1/40"), "nodes.h1.ip", "IPv4 address"),
    ("node-mac-format", set_node("h1", mac="00:00:00:00:01"), "nodes.h1.mac", "MAC address"),
    ("node-mac-multicast", set_node("h1", mac="01:00:5e:00:00:01"), "nodes.h1.mac", "multicast"),
    ("node-mac-zero", set_node("h1", mac="00:00:00:00:00:00"), "nodes.h1.mac", "all-zero"),
    ("link-unknown-a", set_link(0, a="h9"), "links[0].a", "unknown node"),
    ("link-unknown-b", set_link(2, b="nowhere"), "links[2].b", "unknown node"),
    ("self-link", set_link(3, b="r1"), "links[3]", "to itself"),
    ("port-negative", set_link(0, a_port=-1), "links[0].a_port", "non-negative integer"),
    ("port-text", set_link(0, b_port="1"), "links[0].b_port", "non-negative integer"),
    ("port-duplicate", set_link(1, b_port=1), "links[1].b_port", "already used by links[0]"),
    ("intf-clash", set_link(2, a_intf="r1-eth1"), "links[3].a_intf", "already used by links[2]"),
    ("intf-too-long", set_link(0, a_intf="h1-uplink-eth000"), "links[0].a_intf", "at most 15"),
    ("intf-slash", set_link(0, a_intf="h1/0"), "links[0].a_intf", "'/'"),
    ("intf-space", set_link(0, a_intf="h1 0"), "links[0].a_intf", "whitespace"),
    ("intf-empty", set_link(0, a_intf=""), "links[0].a_intf", "non-empty"),
    ("intf-root-namespace", root_namespace_clash, "links[5].b_intf", "already used by links[4]"),
    (
        "default-intf-too-long",
        long_node_with_link,
        "nodes.averyl0ngname.name",
        "node name of at most 10 characters",
    ),
    ("link-ip", set_link(3, a_ip="10.5.0.1/24/1"), "links[3].a_ip", "IPv4 address"),
    ("link-ip-v6", set_link(3, b_ip="fe80::1/64"), "links[3].b_ip", "IPv4 address"),
    ("link-mac", set_link(3, a_mac="zz:00:00:00:00:01"), "links[3].a_mac", "MAC address"),
    ("same-ip-twice", same_ip_twice, "nodes.h2.ip", "already used by nodes.h1.ip"),
    (
        "same-ip-on-link",
        set_link(3, b_ip="10.5.0.1/16"),
        "links[3].b_ip",
        "already used by links[3].a_ip",
    ),
    (
        "same-mac-twice",
        same_mac_twice,
        "links[3].b_mac",
        "already used by nodes.h1.mac (interface h1-eth0 of h1)",
    ),
    (
        "node-ip-contradicts-link",
        set_node("h3", ip="10.5.0.9/24"),
        "nodes.h3.ip",
        "differs from links[3].b_ip",
    ),
    (
        "node-ip-prefix-contradicts-link",
        set_node("h3", ip="10.5.0.2/16"),
        "nodes.h3.ip",
        "differs from links[3].b_ip",
    ),
    (
        "ip-base-malformed",
        lambda s: setattr(s, "ip_base", "10.0.0.0/99"),
        "ip_base",
        "IPv4 network",
    ),
    ("ip-base-too-small", too_many_hosts, "ip_base", "too few addresses"),
    ("bw-negative", set_params(0, bw=-1.0), "links[0].params.bw", "must not be negative"),
    ("bw-zero", set_params(0, bw=0.0), "links[0].params.bw", "must be positive"),
    ("bw-text", set_params(0, bw="10Mbit"), "links[0].params.bw", "number in bit/s"),
    ("delay-inf", set_params(0, delay=math.inf), "links[0].params.delay", "finite"),
    ("loss-nan", set_params(1, loss=math.nan), "links[1].params.loss", "finite"),
    ("loss-above-100", set_params(1, loss=100.5), "links[1].params.loss", "at most 100"),
    (
        "queue-zero",
        set_params(1, max_queue_size=0),
        "links[1].params.max_queue_size",
        "integer >= 1",
    ),
    (
        "queue-float",
        set_params(1, max_queue_size=10.0),
        "links[1].params.max_queue_size",
        "integer >= 1",
    ),
    (
        "jitter-without-delay",
        set_params(2, jitter=0.001),
        "links[2].params.jitter",
        "needs a delay",
    ),
    (
        "params-ab-negative",
        set_params(2, "params_ab", delay=-0.1),
        "links[2].params_ab.delay",
        "must not be negative",
    ),
    (
        "params-ba-loss",
        set_params(2, "params_ba", loss=200.0),
        "links[2].params_ba.loss",
        "at most 100",
    ),
    ("params-not-linkparams", set_link(2, params={"bw": 1}), "links[2].params", "LinkParams"),
]


@pytest.mark.parametrize(
    ("change", "field", "fragment"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_input(change: Callable[[TopologySpec], None], field: str, fragment: str) -> None:
    spec = base()
    change(spec)
    found = problems(spec)
    assert found, "expected a problem"
    assert found[0].field == field
    assert fragment in str(found[0])
    with pytest.raises(ValidationError) as info:
        validate(spec)
    assert (info.value.field, str(info.value)) == (found[0].field, str(found[0]))


def test_there_are_many_distinct_cases() -> None:
    assert len({c[2] + c[3] for c in CASES}) >= 25


def test_kind_error_lists_choices() -> None:
    spec = base()
    spec.nodes["h1"].kind = "vm"  # type: ignore[assignment]
    assert problems(spec)[0].choices == ("host", "switch", "router")


def test_unknown_node_lists_a_few_known_names() -> None:
    spec = single(20)
    spec.links[0].b = "s9"
    problem = problems(spec)[0]
    assert problem.choices == ("s1", "h1", "h2", "h3", "h4", "h5", "h6", "h7")
    assert "first 8 of 21" in str(problem)


def test_sched_error_lists_choices() -> None:
    spec = base()
    spec.nodes["h1"].sched = "batch"  # type: ignore[assignment]
    assert problems(spec)[0].choices == ("cfs", "rt")


def test_problems_reports_everything_in_order() -> None:
    spec = base()
    spec.nodes["h1"].cpu = 2.0
    spec.links[0].params = LinkParams(loss=101.0)
    spec.ip_base = "nonsense"
    assert [p.field for p in problems(spec)] == [
        "ip_base", "nodes.h1.cpu", "links[0].params.loss",
    ]  # fmt: skip


def test_jitter_with_delay_from_shared_params_is_fine() -> None:
    spec = base()
    spec.links[2].params = LinkParams(delay=0.01)
    spec.links[2].params_ab = LinkParams(jitter=0.002)
    assert problems(spec) == []


def test_node_ip_equal_to_its_link_address_is_fine() -> None:
    spec = assign_ips(assign_ports(line(4)))
    assert problems(spec) == []


def test_stp_on_switch_is_fine() -> None:
    assert problems(torus(3, 3)) == []


def test_long_names_are_fine_without_links() -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h" * 64))
    assert problems(spec) == []


def test_validate_does_not_change_the_spec() -> None:
    spec = base()
    before = repr(spec)
    validate(spec)
    assert repr(spec) == before


@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_ipv6_must_be_a_boolean(bad: object) -> None:
    from fidelnet.topology import linear
    from fidelnet.topology.validate import problems

    spec = linear(2)
    spec.ipv6 = bad  # type: ignore[assignment]
    (e,) = problems(spec)
    assert e.field == "ipv6"
    assert str(e).startswith("ipv6: must be true or false")


def test_ipv6_off_is_a_valid_topology() -> None:
    from fidelnet.topology import linear
    from fidelnet.topology.validate import problems

    spec = linear(2)
    spec.ipv6 = False
    assert problems(spec) == []


def test_topology_size_limits_are_named_before_anything_else_is_checked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import importlib

    from fidelnet.topology import limits
    from fidelnet.topology.builders import single

    validate_mod = importlib.import_module("fidelnet.topology.validate")

    spec = single(1100)
    for node in spec.nodes.values():
        if node.kind == "switch":
            node.datapath = "bridge"
    found = problems(spec)
    assert [p.field for p in found] == ["nodes.s1"]
    assert "1100 ports on a Linux bridge, which holds at most 1024" in str(found[0])
    spec.nodes["s1"].datapath = "bpf"  # the BPF switch has room
    assert problems(spec) == []
    monkeypatch.setattr(validate_mod, "BPF_SWITCH_PORTS", 1000)
    assert [p.field for p in problems(spec)] == ["datapath"]
    monkeypatch.setattr(validate_mod, "MAX_NODES", 100)
    monkeypatch.setattr(validate_mod, "MAX_LINKS", 100)
    found = problems(spec)
    assert [p.field for p in found][:2] == ["nodes", "links"]
    assert "1,101 nodes; the limit is 100" in str(found[0])
    assert limits.MAX_NODES == 100_000
