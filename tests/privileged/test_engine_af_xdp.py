"""AF_XDP endpoints of engine links on real namespaces: chosen for shaped links,
the XDP program on the veth end beside the node's interface, arrival stamps taken
by the kernel, delay and rate, TCP integrity, the choice recorded, and nothing left
on the interface when the link goes. Precise figures are bench/links.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from _servers import payload_file, start_listening, transfer

from fidelnet import Network
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

H2 = "10.0.0.2"


def pair(ab: LinkParams, ba: LinkParams | None = None, endpoint: str | None = None) -> Network:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    link = LinkSpec("h1", "h2", params_ab=ab, params_ba=ba or ab)
    link.backend = "engine"
    link.endpoint = endpoint  # type: ignore[assignment]
    spec.add_link(link)
    return Network(spec)


def rtts(net: Network, count: int, interval: float = 0.02) -> list[float]:
    out, err, code = net["h1"].pexec(
        ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", "2", H2]
    )
    assert code == 0, out + err
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]


def xdp_attached(net: Network, node: str, dev: str) -> bool:
    out, _, _ = net[node].pexec(["ip", "-j", "-d", "link", "show", "dev", dev])
    return "xdp" in json.loads(out)[0]


def test_a_delayed_link_gets_af_xdp_and_the_kernel_stamps_every_frame() -> None:
    with pair(LinkParams(delay=0.005)) as net:
        link = net.links[0]
        d = link.driver.describe()
        assert d["endpoint"] == "af_xdp", d
        assert "stamps" in d["endpoint_reason"]
        # The node keeps its interface; linkd's veth end sits beside it, with the
        # XDP program, no address and no IPv6.
        for node in ("h1", "h2"):
            assert xdp_attached(net, node, f"{node}-eth0-x")
            assert not xdp_attached(net, node, f"{node}-eth0")
            out, _, _ = net[node].pexec(["ip", "-j", "addr", "show", "dev", f"{node}-eth0-x"])
            assert json.loads(out)[0]["addr_info"] == []
        rtts(net, 2)  # ARP
        got = rtts(net, 30)
        assert len(got) == 30
        assert min(got) >= 10.0, got
        assert sorted(got)[15] < 11.0, got  # the median within 1 ms of 2 x 5 ms
        stats = link.stats()
        ends = stats["endpoints"]
        for side in ("a", "b"):
            assert ends[side]["kind"] == "af_xdp"
            assert ends[side]["xdp_mode"] == "native"
            assert ends[side]["stamped"] >= 32
            assert ends[side]["unstamped"] == 0
        assert stats["ab"]["rx_packets"] == ends["a"]["stamped"]
        assert stats["ab"]["ingress_drops"] == 0 and stats["ba"]["ingress_drops"] == 0
        # The choice is in the run state with the backend's.
        with open(f"/run/fidelnet/{net.run_id}.jsonl", encoding="utf-8") as f:
            records = [json.loads(line) for line in f if line.strip()]
        infos = [r for r in records if r.get("endpoint")]
        assert infos and infos[0]["endpoint"] == "af_xdp", records


def test_rate_is_shaped_through_af_xdp() -> None:
    with pair(LinkParams(bw=10e6)) as net:
        assert net.links[0].driver.describe()["endpoint"] == "af_xdp"
        server = start_listening(net["h2"], ["iperf3", "-s", "-1"], 5201)
        try:
            out, err, code = net["h1"].pexec(
                ["iperf3", "-c", H2, "-u", "-b", "20M", "-t", "3", "-J"]
            )
            assert code == 0, out + err
        finally:
            server.wait(10)
        result: dict[str, Any] = json.loads(out)
        got = result["end"]["sum_received"]["bits_per_second"]
        # UDP payload is 1470 of 1512 bytes per frame on the wire.
        assert 8.8e6 < got < 10.1e6, got
        ab = net.links[0].stats()["ab"]
        assert ab["drops"]["queue"] > 0


@pytest.mark.parametrize(
    "params",
    [LinkParams(delay=0.002, loss=0.5, bw=50e6), LinkParams(delay=0.001, corrupt=1.0)],
    ids=["lossy", "corrupting"],
)
def test_tcp_through_af_xdp_keeps_every_byte(tmp_path: Path, params: LinkParams) -> None:
    """The sender's stack computes every checksum (the node's veth end has transmit
    checksumming off), so the receiver catches a corrupted bit and TCP resends."""
    with pair(params) as net:
        assert net.links[0].driver.describe()["endpoint"] == "af_xdp"
        path, want = payload_file(tmp_path, 8 << 20)
        assert transfer(net["h1"], net["h2"], H2, path) == want
        ab = net.links[0].stats()["ab"]
        assert ab["drops"]["loss"] > 0 or ab["corrupted"] > 0, ab


def test_tap_when_asked_for_or_unshaped() -> None:
    with pair(LinkParams(delay=0.002), endpoint="tap") as net:
        d = net.links[0].driver.describe()
        assert (d["endpoint"], d["endpoint_reason"]) == ("tap", "asked for")
        out, _, _ = net["h1"].pexec(["ip", "-br", "link"])
        assert "-x" not in out
        assert "endpoints" not in net.links[0].stats()
    with pair(LinkParams()) as net:
        assert net.links[0].driver.describe()["endpoint"] == "tap"


def test_af_xdp_by_name_on_an_unshaped_link_and_runtime_changes() -> None:
    with pair(LinkParams(), endpoint="af_xdp") as net:
        link = net.links[0]
        assert link.driver.describe()["endpoint_reason"] == "asked for"
        rtts(net, 2)
        assert sorted(rtts(net, 10))[5] < 5.0
        link.set(delay="10ms")
        got = rtts(net, 10)
        assert min(got) >= 20.0 and sorted(got)[5] < 21.0, got
        link.set(delay="0ms")
        assert sorted(rtts(net, 10))[5] < 5.0


def test_removing_the_link_takes_the_xdp_program_off() -> None:
    with pair(LinkParams(delay=0.001)) as net:
        assert xdp_attached(net, "h1", "h1-eth0-x")
        net.engine.remove_link(net.links[0].driver.name)  # type: ignore[union-attr]
        assert not xdp_attached(net, "h1", "h1-eth0-x")
        assert not xdp_attached(net, "h2", "h2-eth0-x")


def test_a_saturated_engine_leaves_sched_fifo_and_returns_when_calm(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 kpps of 64-byte frames saturate linkd on this machine. At SCHED_FIFO it
    would starve the receiver on its core (before the guard: 68-84k of 400k frames
    lost in the receiver's socket buffer, linkd having delivered them); the guard
    takes it to SCHED_OTHER while busy and back once calm."""
    from fidelnet.kernel import procfs
    from fidelnet.links.engine import REALTIME_PRIORITY
    from fidelnet.measure.packets import udp

    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path))  # no profile: the default
    with pair(LinkParams(delay=0.001), endpoint="af_xdp") as net:
        engine = net.engine
        assert engine is not None and engine.pid is not None
        assert procfs.sched_policy(engine.pid) == ("SCHED_FIFO", REALTIME_PRIORITY)
        before = engine.realtime()
        assert before["guard"] is True and before["demotions"] == 0, before
        r = udp(net, "h1", "h2", 200_000, size=64, duration=2.0, mode="gso")
        during = engine.realtime()
        assert during["demotions"] >= 1, during
        assert r.socket_drops <= 0.01 * r.sent, (r.socket_drops, r.sent, during)
        # The run's monitor record says so.
        assert r.monitor is not None
        assert r.monitor.engine_demotions >= 1, r.monitor.notes
        assert any("left SCHED_FIFO" in n for n in r.monitor.notes)
        # Calm: after 10 windows of little work the loop is real-time again.
        assert rtts(net, 3, 0.1)
        after = engine.realtime()
        assert after["promotions"] >= 1 and after["policy"] == f"SCHED_FIFO {REALTIME_PRIORITY}"
        assert procfs.sched_policy(engine.pid) == ("SCHED_FIFO", REALTIME_PRIORITY)
        assert after["errors"] == 0, after
