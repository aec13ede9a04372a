"""Hardware links (backend ``hw``) without root: the pool is checked field by field
before anything is built, a hardware link is shaped by tc or refused, scenario files
carry the pool, and the Mininet class joins its pairs to the network's pool."""

from __future__ import annotations

import pytest

from fidelnet.errors import UnsupportedError
from fidelnet.links.choice import choose
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import LinkParams
from fidelnet.topology.validate import problems


def _line(n_links: int = 2, pairs: list[tuple[str, str]] | None = None) -> TopologySpec:
    t = TopologySpec(link_backend="hw")
    for i in range(n_links + 1):
        t.add_node(NodeSpec(f"h{i + 1}"))
    for i in range(n_links):
        t.add_link(LinkSpec(f"h{i + 1}", f"h{i + 2}"))
    t.hardware_pairs = pairs if pairs is not None else [("p0a", "p0b"), ("p1a", "p1b")]
    return t


def _fields(t: TopologySpec) -> list[str]:
    return [str(p) for p in problems(t)]


def test_a_pool_with_a_pair_per_link_is_valid() -> None:
    assert _fields(_line()) == []


def test_the_pool_is_checked_pair_by_pair() -> None:
    got = _fields(_line(1, [("eth1",)]))  # type: ignore[list-item]
    assert got and got[0].startswith("hardware_pairs[0]: must be a pair")
    got = _fields(_line(1, [("eth1", "a" * 16)]))
    assert got and got[0].startswith("hardware_pairs[0][1]: is longer than 15")
    got = _fields(_line(1, [("eth1", "eth 2")]))
    assert got and got[0].startswith("hardware_pairs[0][1]: is not a valid interface name")


def test_the_same_interface_twice_is_refused_naming_both_places() -> None:
    got = _fields(_line(2, [("eth1", "eth2"), ("eth3", "eth1")]))
    assert len(got) == 1 and got[0].startswith("hardware_pairs[1][1]: ")
    assert "already in the pool at hardware_pairs[0][0]" in got[0]


def test_more_hw_links_than_pairs_names_the_first_link_without_one() -> None:
    got = _fields(_line(3))
    assert len(got) == 1 and got[0].startswith("links[2].backend: 3 link(s) ask")
    assert "hardware_pairs has 2" in got[0]
    t = _line(2)
    t.links[1].backend = "auto"  # only one link asks now
    t.hardware_pairs = t.hardware_pairs[:1]
    assert _fields(t) == []


def test_a_node_in_the_host_namespace_cannot_take_a_pair() -> None:
    t = _line(1)
    t.nodes["h1"].in_namespace = False
    got = _fields(t)
    assert any(g.startswith("links[0].backend: h1 is in the host's namespace") for g in got)


def test_an_engine_endpoint_on_a_hw_link_is_refused() -> None:
    t = _line(1)
    t.links[0].endpoint = "tap"
    assert any(g.startswith("links[0].endpoint: ") for g in _fields(t))


def test_a_hw_link_is_shaped_by_tc_or_refused_naming_the_link() -> None:
    rate = LinkParams(bw=100.0)
    assert choose("hw", rate, rate, frozenset({"htb"}), "link h1-h2").backend == "hw"
    assert choose("hw", LinkParams(), LinkParams(), frozenset(), "link h1-h2").backend == "hw"
    delay = LinkParams(delay=0.01)
    with pytest.raises(UnsupportedError, match=r"link h1-h2 \(backend hw"):
        choose("hw", delay, delay, frozenset({"htb"}), "link h1-h2")  # no netem here


def test_a_scenario_carries_the_pool_and_names_its_place_on_error() -> None:
    from fidelnet.scenario.load import loads

    text = """
name: hw
topology:
  link_backend: hw
  hardware:
    pairs: [[enp1s0f0v0, enp2s0f0v0], [enp1s0f0v1, enp1s0f0v0]]
  nodes: {h1: {}, h2: {}, h3: {}}
  links: [{a: h1, b: h2}, {a: h2, b: h3}]
"""
    with pytest.raises(Exception) as exc:
        loads(text, "hw.yaml")
    assert "topology.hardware.pairs[1][1]" in str(exc.value), str(exc.value)
    assert "already in the pool" in str(exc.value)
    good = loads(text.replace("[enp1s0f0v1, enp1s0f0v0]", "[enp1s0f0v1, enp2s0f0v1]"))
    spec = good.topology_spec()
    assert spec.hardware_pairs == [("enp1s0f0v0", "enp2s0f0v0"), ("enp1s0f0v1", "enp2s0f0v1")]
    assert spec.link_backend == "hw"


def test_mininet_hwpair_is_a_link_class_with_a_pool() -> None:
    from fidelnet.compat.link import HwPair, Link

    assert issubclass(HwPair, Link) and HwPair.fn_backend == "hw"
    assert HwPair.available_pairs == []


def test_external_interfaces_are_checked_field_by_field() -> None:
    from fidelnet.topology.spec import ExternalSpec
    from fidelnet.topology.validate_hw import external_name

    t = _line(1, [])
    t.link_backend = "auto"
    t.add_node(NodeSpec("s1", kind="switch"))
    t.external = [
        ExternalSpec("h1", "eth1"),
        ExternalSpec("h1", "eth2", "lend", ip="10.9.0.1/24"),
        ExternalSpec("h9", "eth1"),  # unknown node
        ExternalSpec("s1", "eth3"),  # a switch
        ExternalSpec("h2", "eth2", "lend"),  # lent twice
        ExternalSpec("h2", "eth4", name="h2-eth0"),  # the name of h2's link end
        ExternalSpec("h2", "eth5", ip="10.9.0.300/24"),
    ]
    assert external_name(t, 0) == "h1-ext0" and external_name(t, 1) == "h1-ext1"
    got = _fields(t)
    assert any(g.startswith("external[2].node: unknown node") for g in got)
    assert any(g.startswith("external[3].node: an external interface goes to a host") for g in got)
    assert any(g.startswith("external[4].interface: is lent already by external[1]") for g in got)
    assert any(g.startswith("external[5].name: h2 has an interface h2-eth0") for g in got)
    assert any(g.startswith("external[6].ip: ") for g in got)
    assert not any(g.startswith(("external[0]", "external[1]")) for g in got)


def test_a_scenario_gives_a_node_an_external_interface() -> None:
    from fidelnet.scenario.load import loads

    text = """
name: ext
topology:
  nodes: {h1: {}, h2: {}}
  links: [{a: h1, b: h2}]
  hardware:
    external: [{node: h1, interface: eth1, ip: 192.168.50.2/24}]
"""
    spec = loads(text).topology_spec()
    (ext,) = spec.external
    assert (ext.node, ext.interface, ext.mode, ext.ip) == (
        "h1",
        "eth1",
        "macvlan",
        "192.168.50.2/24",
    )
    with pytest.raises(Exception) as exc:
        loads(text.replace("node: h1", "node: h7"))
    assert "topology.hardware.external[0].node" in str(exc.value), str(exc.value)
