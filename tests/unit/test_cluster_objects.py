"""The pure parts of the controller and the agent (fidelnet.cluster.objects): the
machines and delays a Topology asks for, the Shard and Pod manifests, a shard's
part of the topology, Lease lapses and the Topology's status. No server."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fidelnet.cluster import MachineSpec, partition
from fidelnet.cluster import objects as o
from fidelnet.errors import FidelnetError, ValidationError
from fidelnet.topology import builders

NOW = datetime(2026, 11, 28, 12, 0, 0, tzinfo=UTC)


def _topo(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": o.API,
        "kind": "Topology",
        "metadata": {"name": "line", "namespace": "default", "uid": "u-topo", **meta},
        "spec": {"scenario": {}},
    }


def _node(name: str, ready: bool = True, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, **meta},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_machines_from_labelled_ready_nodes_with_capacity_and_limit() -> None:
    nodes = [
        _node("a", labels={o.MACHINE_LABEL: ""}, annotations={o.CAPACITY_KEY: "2"}),
        _node("b", labels={o.MACHINE_LABEL: "", o.MAX_WEIGHT_KEY: "5"}),
        _node("c", labels={}),  # not a machine
        _node("d", ready=False, labels={o.MACHINE_LABEL: ""}),
    ]
    assert o.machines_of(_topo(), nodes) == [MachineSpec("a", 2.0), MachineSpec("b", 1.0, 5.0)]


def test_machines_from_the_spec_must_be_nodes() -> None:
    topo = _topo()
    topo["spec"]["machines"] = [{"name": "b", "capacity": 3, "maxWeight": 4}]
    assert o.machines_of(topo, [_node("a"), _node("b")]) == [MachineSpec("b", 3.0, 4)]
    topo["spec"]["machines"] = [{"name": "x"}]
    with pytest.raises(FidelnetError, match=r"no Node named 'x' \(valid: a, b\)"):
        o.machines_of(topo, [_node("a"), _node("b")])


def test_no_machine_and_a_bad_capacity_are_named() -> None:
    with pytest.raises(FidelnetError, match="no Ready Node is labelled fidelnet.dev/machine"):
        o.machines_of(_topo(), [_node("a")])
    bad = _node("a", labels={o.MACHINE_LABEL: ""}, annotations={o.CAPACITY_KEY: "-1"})
    with pytest.raises(FidelnetError, match="Node a: fidelnet.dev/capacity: must be positive"):
        o.machines_of(_topo(), [bad])


def test_delays_from_the_annotation() -> None:
    assert o.delays_of(_topo()) is None
    topo = _topo(annotations={o.DELAYS_KEY: '{"a": {"b": 0.001}}'})
    assert o.delays_of(topo) == {"a": {"b": 0.001}}
    with pytest.raises(FidelnetError, match="not JSON"):
        o.delays_of(_topo(annotations={o.DELAYS_KEY: "{"}))


def test_shard_and_pod_manifests_own_and_place() -> None:
    spec = builders.line(6)
    placed = partition(spec, [MachineSpec("a", 1), MachineSpec("b", 1)], {("a", "b"): 1e-4})
    topo = _topo()
    shards = [o.shard_manifest(topo, spec, placed, m) for m in ("a", "b")]
    nodes = [s["spec"]["part"]["nodes"] for s in shards]
    assert sorted(nodes[0] + nodes[1]) == sorted(spec.nodes)
    assert len(nodes[0]) == len(nodes[1]) == 3
    for shard in shards:
        meta = shard["metadata"]
        assert meta["finalizers"] == [o.FINALIZER]
        assert meta["ownerReferences"] == [
            {
                "apiVersion": o.API,
                "kind": "Topology",
                "name": "line",
                "uid": "u-topo",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"] == {
            o.TOPOLOGY_LABEL: "line",
            o.MACHINE_LABEL: shard["spec"]["machine"],
        }
        (cut,) = shard["spec"]["cutLinks"]  # a line over 2 machines: one cut
        assert {cut["aMachine"], cut["bMachine"]} == {"a", "b"}
        assert cut["measuredAB"] == 1e-4 and "delayAB" not in cut
        part = set(shard["spec"]["part"]["nodes"])
        for i in shard["spec"]["part"]["links"]:
            assert {spec.links[i].a, spec.links[i].b} <= part
    shards[0]["metadata"]["uid"] = "u-shard"
    pod = o.pod_manifest(shards[0])
    assert pod["spec"]["nodeName"] == "a"
    assert pod["spec"]["containers"][0]["image"] == o.POD_IMAGE
    assert pod["metadata"]["ownerReferences"][0]["uid"] == "u-shard"
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "Shard"


def test_part_spec_keeps_the_part_and_refuses_what_is_outside() -> None:
    spec = builders.line(4)
    part = o.part_spec(spec, ["h1", "h2"], [0])
    assert list(part.nodes) == ["h1", "h2"]
    assert [(lk.a, lk.b) for lk in part.links] == [("h1", "h2")]
    assert len(spec.nodes) == 4  # the whole is untouched
    # h3's ip is its default interface's, on the link to h2, which is cut: the
    # half of that link carries it; the link kept has its own ends' addresses.
    far = o.part_spec(spec, ["h3", "h4"], [2])
    assert (spec.nodes["h3"].ip, far.nodes["h3"].ip) == ("10.0.2.2/24", None)
    (kept,) = far.links
    assert (kept.a_ip, kept.b_ip) == ("10.0.3.1/24", "10.0.3.2/24")
    assert (kept.a_intf, kept.b_intf) == ("h3-eth1", "h4-eth0")  # as in the whole
    assert far.nodes["h4"].ip == spec.nodes["h4"].ip == "10.0.3.2/24"
    assert o.part_spec(spec, ["h3"], []).nodes["h3"].ip is None
    with pytest.raises(FidelnetError, match="link h2-h3 has an end outside the part"):
        o.part_spec(spec, ["h1", "h2"], [1])
    with pytest.raises(FidelnetError, match="nodes not in the topology: zz"):
        o.part_spec(spec, ["zz"], [])
    with pytest.raises(FidelnetError, match="link index 9 out of range"):
        o.part_spec(spec, ["h1"], [9])


def _lease(renewed: datetime, seconds: int = 10) -> dict[str, Any]:
    stamp = renewed.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "spec": {"holderIdentity": "a/pid 1", "renewTime": stamp, "leaseDurationSeconds": seconds}
    }


def test_a_lease_lapses_after_its_duration() -> None:
    assert o.lease_lapsed(_lease(NOW - timedelta(seconds=9)), NOW) is None
    why = o.lease_lapsed(_lease(NOW - timedelta(seconds=12)), NOW)
    assert why == "its lease (held by a/pid 1) lapsed 2.0 s ago"
    assert o.lease_lapsed({"spec": {}}, NOW) == "its lease was never renewed"


def _shard(
    machine: str, phase: str | None, agent: str | None = "x", msg: str = ""
) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if phase:
        status["phase"] = phase
    if agent:
        status["agent"] = agent
    if msg:
        status["message"] = msg
    return {"metadata": {"name": f"t-{machine}"}, "spec": {"machine": machine}, "status": status}


def test_topology_status_follows_its_shards_and_leases() -> None:
    fresh = _lease(NOW)
    leases = {"a": fresh, "b": fresh}
    running = [_shard("a", "Running"), _shard("b", "Running")]
    assert o.topology_status(running, leases, NOW) == {
        "phase": "Running",
        "shards": 2,
        "shardsReady": 2,
        "message": "2 shards running",
    }
    half = [_shard("a", "Running"), _shard("b", None, agent=None)]
    st = o.topology_status(half, {"a": fresh, "b": None}, NOW)
    assert (st["phase"], st["shardsReady"]) == ("Starting", 1)
    stale = {"a": fresh, "b": _lease(NOW - timedelta(seconds=30))}
    st = o.topology_status(running, stale, NOW)
    assert st["phase"] == "Failed"
    assert st["message"].startswith("machine b lost: its lease (held by a/pid 1) lapsed")
    st = o.topology_status(running, {"a": fresh, "b": None}, NOW)
    assert st["message"] == "machine b lost: its agent holds no lease"
    failed = [_shard("a", "Running"), _shard("b", "Failed", msg="boom")]
    st = o.topology_status(failed, leases, NOW)
    assert (st["phase"], st["message"]) == ("Failed", "shard t-b on machine b failed: boom")


def test_each_machine_gets_its_half_of_a_cut_link_as_in_the_whole() -> None:
    from fidelnet.cluster.halves import BASE_PORT, halves, ports
    from fidelnet.topology.spec import LinkParams

    spec = builders.line(4)
    spec.links[1].params = LinkParams(delay=0.005, bw=10e6)
    spec.links[1].params_ba = LinkParams(delay=0.002)
    cut = [{"name": "h2-h3", "index": 1, "a": "h2", "b": "h3", "aMachine": "m1",
            "bMachine": "m2", "ordinal": 3}]  # fmt: skip
    (a,) = halves(spec, cut, "m1")
    (b,) = halves(spec, cut, "m2")
    assert halves(spec, cut, "m3") == []
    assert (a.node, a.ifname, a.ip) == ("h2", "h2-eth1", "10.0.2.1/24")
    assert (b.node, b.ifname, b.ip) == ("h3", "h3-eth0", "10.0.2.2/24")
    assert (a.local_port, a.peer_port) == (b.peer_port, b.local_port) == ports(3)
    assert ports(0) == (BASE_PORT, BASE_PORT + 1)
    assert (a.out.delay, a.out.bw, a.back.delay) == (0.005, 10e6, 0.002)
    assert (b.out.delay, b.back.delay, b.back.bw) == (0.002, 0.005, 10e6)
    assert (a.peer_machine, b.peer_machine) == ("m2", "m1")
    with pytest.raises(FidelnetError, match="link 1 is h2-h3"):
        halves(spec, [{**cut[0], "a": "h1"}], "m1")


def test_a_half_shapes_out_without_delay_and_holds_the_delay_back() -> None:
    from fidelnet.links.cut import CutWire, inner_mtu, split
    from fidelnet.topology.spec import LinkParams

    tx, rx = split(
        LinkParams(bw=1e7, delay=0.005, jitter=0.001, loss=0.1),
        LinkParams(bw=2e7, delay=0.002, jitter=0.0005, loss=0.2),
    )
    assert (tx.bw, tx.loss, tx.delay, tx.jitter) == (1e7, 0.1, None, None)
    assert (rx.bw, rx.loss, rx.delay, rx.jitter) == (None, None, 0.002, 0.0005)
    assert inner_mtu(1500) == 1434
    ep = CutWire("10.1.0.1:47000", "10.1.0.2:47001", clock_offset_ns=-30).endpoint("cut0")
    assert ep == {"ifname": "cut0", "kind": "udp", "local": "10.1.0.1:47000",
                  "peer": "10.1.0.2:47001", "clock_offset_ns": -30}  # fmt: skip
    with pytest.raises(ValidationError, match="wire.local"):
        CutWire("10.1.0.1", "10.1.0.2:1").endpoint("cut0")
