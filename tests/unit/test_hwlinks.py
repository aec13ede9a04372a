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
