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


def test_auto_takes_bpf_where_it_runs_and_the_bridge_for_stp_or_elsewhere() -> None:
    t = topo()
    assert choose(t.nodes["s1"], t, _there) == "bpf"
    assert choose(t.nodes["s1"], t, _missing) == "bridge"
    t = topo(stp=True)
    assert choose(t.nodes["s1"], t, _there) == "bridge"
    t.datapath = "bpf"  # the topology's default does not take STP switches off the bridge
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
    bad = topo(datapath="ovs")
    bad.datapath = "hub"  # type: ignore[assignment]
    errors = [str(e) for e in problems(bad)]
    assert "datapath: unknown switch datapath (got 'hub'; valid: auto, bridge, bpf)" in errors
    assert "nodes.s1.datapath: unknown switch datapath (got 'ovs'; valid: auto, bridge, bpf)" in (
        errors
    )
    errors = [str(e) for e in problems(topo(datapath="bpf", stp=True))]
    assert any(e.startswith("nodes.s1.datapath: STP runs on the Linux bridge") for e in errors)
    host = TopologySpec()
    host.add_node(NodeSpec("h1", datapath="bpf"))
    errors = [str(e) for e in problems(host)]
    assert any(e.startswith("nodes.h1.datapath: only switches have a datapath") for e in errors)


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


class _Net:
    run_id = "t"


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
