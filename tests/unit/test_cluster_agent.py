"""The shard agent's cut links without a server or root: a fake Kubernetes API (the
Shards of one Topology), a fake run, and the halves recorded instead of built. A cut
link waits for the other machine's wire address and clock, is then carried with the
measured offset, and the whole topology's routes follow; errors are the link's."""

from __future__ import annotations

from typing import Any

import pytest

from fidelnet.cluster import agent as agent_mod
from fidelnet.cluster import objects
from fidelnet.cluster.clock import ClockSample
from fidelnet.cluster.halves import halves, resolved
from fidelnet.errors import FidelnetError
from fidelnet.topology import builders


class FakeKube:
    def __init__(self, shards: list[dict[str, Any]]) -> None:
        self.shards = shards
        self.patches: list[tuple[str, dict[str, Any]]] = []

    def get(self, url: str, **query: str) -> dict[str, Any]:
        assert url.endswith("/shards"), url
        return {"items": self.shards}

    def patch(self, url: str, body: dict[str, Any]) -> dict[str, Any]:
        self.patches.append((url, body))
        return body


class FakeNet:
    def __init__(self) -> None:
        self.nodes: dict[str, Any] = {}


def _shard(machine: str, wire: dict[str, Any] | None) -> dict[str, Any]:
    cut = [{"name": "h3-h4", "index": 2, "a": "h3", "b": "h4", "aMachine": "m1",
            "bMachine": "m2", "ordinal": 0}]  # fmt: skip
    return {
        "metadata": {"name": f"line6-{machine}", "labels": {objects.TOPOLOGY_LABEL: "line6"}},
        "spec": {"topology": "line6", "machine": machine, "cutLinks": cut},
        "status": {"wire": wire} if wire else {},
    }


@pytest.fixture
def setup(monkeypatch: pytest.MonkeyPatch) -> tuple[agent_mod.Agent, FakeKube, list[Any]]:
    spec = builders.line(6)
    mine, theirs = _shard("m1", {"address": "10.1.0.1", "clockPort": 5000}), _shard("m2", None)
    kube = FakeKube([mine, theirs])
    a = agent_mod.Agent(kube, "m1", wire_address="10.1.0.1")  # type: ignore[arg-type]
    name = mine["metadata"]["name"]
    a.runs[name] = FakeNet()  # type: ignore[assignment]
    a.pending[name] = halves(spec, mine["spec"]["cutLinks"], "m1")
    a.carried[name] = [{"name": "h3-h4", "state": "pending"}]
    a.wholes[name] = resolved(spec)
    built: list[Any] = []

    def add_cut_end(net: Any, node: str, ifname: str, out: Any, back: Any, wire: Any,
                    **kw: Any) -> None:  # fmt: skip
        built.append((node, ifname, wire, kw))

    monkeypatch.setattr("fidelnet.links.cut.add_cut_end", add_cut_end)
    monkeypatch.setattr(a, "_routes", lambda name: built.append(("routes", name)))
    return a, kube, built


def test_a_cut_link_waits_for_the_peer_then_is_carried_with_its_clock(
    setup: tuple[agent_mod.Agent, FakeKube, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, kube, built = setup
    shard = kube.shards[0]
    a._carry(shard)  # the other machine has no wire address yet
    assert built == [] and len(a.pending["line6-m1"]) == 1
    assert kube.patches[-1][1]["status"]["cutLinks"] == [{"name": "h3-h4", "state": "pending"}]
    kube.shards[1]["status"] = {"wire": {"address": "10.1.0.2", "clockPort": 5001}}
    probed: list[tuple[str, int]] = []

    def probe(local: str, peer: str, netns: str | None, *, port: int) -> ClockSample:
        probed.append((peer, port))
        return ClockSample(offset_ns=-1234, uncertainty_ns=80_000, one_way_ns=90_000, answered=32)

    monkeypatch.setattr(agent_mod, "probe", probe)
    a._carry(shard)
    (node, ifname, wire, kw), routes = built
    assert (node, ifname, kw["ip"]) == ("h3", "h3-eth1", "10.0.3.1/24")
    assert (wire.local, wire.peer, wire.clock_offset_ns) == (
        "10.1.0.1:47000", "10.1.0.2:47001", -1234,
    )  # fmt: skip
    assert routes == ("routes", "line6-m1")  # every half carried: the whole's routes
    assert probed == [("10.1.0.2", 5001)]
    (c,) = kube.patches[-1][1]["status"]["cutLinks"]
    assert c["state"] == "carried" and c["clock"]["offsetNs"] == -1234
    assert kube.patches[-1][1]["status"]["message"] == "1 cut links carried"
    assert a.pending["line6-m1"] == []


def test_a_half_that_cannot_be_built_is_failed_with_the_error(
    setup: tuple[agent_mod.Agent, FakeKube, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, kube, _built = setup
    kube.shards[1]["status"] = {"wire": {"address": "10.1.0.2", "clockPort": 5001}}
    monkeypatch.setattr(agent_mod, "probe", lambda *_a, **_k: ClockSample(0, 1, 1, 1))

    def refuse(*_a: Any, **_k: Any) -> None:
        raise FidelnetError("wire.peer: must be an address like 10.0.0.1:4789")

    monkeypatch.setattr("fidelnet.links.cut.add_cut_end", refuse)
    a._carry(kube.shards[0])
    (c,) = kube.patches[-1][1]["status"]["cutLinks"]
    assert c["state"] == "failed" and "wire.peer" in c["message"]


def test_without_a_wire_address_the_agent_says_what_to_do(
    setup: tuple[agent_mod.Agent, FakeKube, list[Any]],
) -> None:
    a, kube, built = setup
    a.wire_address = None
    a._carry(kube.shards[0])
    assert built == []
    assert "--wire-address" in kube.patches[-1][1]["status"]["message"]


def test_the_clocks_are_compared_again_and_linkd_told(
    setup: tuple[agent_mod.Agent, FakeKube, list[Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 36: once a cut link is carried, the other machine's clock is measured
    again every period; each new offset goes to linkd (set_clock on the half's engine
    link) and to the link's status, with how far it moved since the first."""
    a, kube, built = setup
    shard = kube.shards[0]
    kube.shards[1]["status"] = {"wire": {"address": "10.1.0.2", "clockPort": 5001}}
    offsets = iter([-1234, -1200, -1100])

    def probe(local: str, peer: str, netns: str | None, *, port: int) -> ClockSample:
        off = next(offsets)
        if off == -1100:
            raise FidelnetError("no answer from 10.1.0.2:5001")
        return ClockSample(offset_ns=off, uncertainty_ns=50_000, one_way_ns=90_000, answered=32)

    monkeypatch.setattr(agent_mod, "probe", probe)
    now = [100.0]
    a.clocks.clock = lambda: now[0]
    told: list[tuple[str, int, int | None]] = []

    class Engine:
        def set_clock(self, name: str, offset_ns: int, uncertainty_ns: int | None) -> None:
            told.append((name, offset_ns, uncertainty_ns))

    net = a.runs["line6-m1"]
    net.link_engine = lambda: Engine()  # type: ignore[attr-defined]
    a._carry(shard)
    assert a.live["line6-m1"][0].name == "h3-h4"
    a._recompare(shard)  # not due yet
    assert told == []
    now[0] += a.clocks.every
    a._recompare(shard)
    assert told == [("h3:h3-eth1", -1200, 50_000)]
    (c,) = kube.patches[-1][1]["status"]["cutLinks"]
    assert c["clock"]["offsetNs"] == -1200 and c["clock"]["updates"] == 1
    assert c["clock"]["driftNs"] == 34
    now[0] += a.clocks.every
    a._recompare(shard)  # no answer: the last offset stands, linkd is not told
    assert len(told) == 1 and a.clocks.kept["m2"].failures == 1
