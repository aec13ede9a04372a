"""Segmentation offloads through engine links: TCP moves in super-frames where the
link treats every packet alike, and as correctly cut wire packets where it shapes,
loses or corrupts. Integrity is checked end to end: the SHA-256 of what arrived
equals that of what was sent."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _servers import payload_file
from _servers import transfer as send_file

from fidelnet import Network
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

PORT = 5601
SIZE = 16 << 20  # bytes sent


def pair(params: LinkParams) -> Network:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    link = LinkSpec("h1", "h2", params_ab=params, params_ba=LinkParams())
    link.backend = "engine"
    link.endpoint = "tap"  # offloads are the TAP endpoint's (AF_XDP carries wire frames)
    spec.add_link(link)
    return Network(spec)


def transfer(net: Network, path: str) -> tuple[str, int]:
    """Send the file at ``path`` from h1 to h2 over TCP; (sha256, bytes) received."""
    return send_file(net["h1"], net["h2"], "10.0.0.2", path, PORT)


@pytest.fixture(scope="module")
def payload(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    path, (digest, _) = payload_file(tmp_path_factory.mktemp("offload"), SIZE)
    return path, digest


def offload(net: Network) -> dict[str, Any]:
    stats: dict[str, Any] = net.links[0].stats()["ab"]["offload"]
    return stats


def test_engine_reports_its_offloads() -> None:
    with pair(LinkParams(delay=0.001)) as net:
        assert net.engine is not None
        assert net.engine.offloads in ("tso+uso", "tso")
        out, _, _ = net["h1"].pexec(["ethtool", "-k", "h1-eth0"])
        assert "tcp-segmentation-offload: on" in out, out


def test_tcp_super_frames_pass_whole_on_a_delay_only_link(payload: tuple[str, str]) -> None:
    path, digest = payload
    with pair(LinkParams(delay=0.002)) as net:
        got, n = transfer(net, path)
        counts = offload(net)
    assert (got, n) == (digest, SIZE)
    # TCP handed the engine super-frames, and they crossed uncut.
    assert counts["whole"] > 0 and counts["split"] == 0 and counts["errors"] == 0, counts


@pytest.mark.parametrize(
    "params",
    [
        LinkParams(bw=200e6, delay=0.001),
        LinkParams(bw=4e9, delay=0.001),
        LinkParams(bw=4e9, max_queue_size=20),
        LinkParams(bw=200e6, loss=1.0),
        LinkParams(delay=0.001, corrupt=1.0),
    ],
    ids=["shaped", "shaped-in-chunks", "chunks-and-queue-drops", "lossy", "corrupting"],
)
def test_tcp_through_a_link_that_needs_wire_packets(
    payload: tuple[str, str], params: LinkParams
) -> None:
    """Cut into wire packets with every checksum recomputed: a wrong checksum would
    make the receiver drop every segment and the transfer stall; a corrupted bit is
    caught by the receiver (the checksum is complete, not left to the device), so
    TCP retransmits it and the file still arrives intact. A fast rate-only link cuts
    chunks of several segments instead (each a smaller super-frame whose checksum the
    receiving stack finishes), and a short queue drops from them exactly as from wire
    packets: TCP recovers and the file arrives intact."""
    path, digest = payload
    with pair(params) as net:
        t0 = time.monotonic()
        got, n = transfer(net, path)
        took = time.monotonic() - t0
        stats = net.links[0].stats()["ab"]
    counts = stats["offload"]
    assert (got, n) == (digest, SIZE), json.dumps(stats)[:2000]
    assert counts["split"] > 0 and counts["errors"] == 0, counts
    assert counts["segments"] > counts["split"], counts
    # Chunks where the rate sends more than one segment in 50 us (--chunk-us).
    fast = params.bw is not None and params.bw > 1e9 and not params.loss
    assert (counts["chunks"] > 0) == fast, counts
    assert stats["tx_packets"] + sum(stats["drops"].values()) == stats["rx_packets"], stats
    if params.max_queue_size is not None:
        assert stats["drops"]["queue"] > 0, stats
        assert stats["queue"]["max_packets"] <= params.max_queue_size, stats
    if params.bw is not None:
        # 16 MiB at 200 Mbit/s: at least 0.67 s on the wire.
        assert took >= SIZE * 8 / params.bw * 0.95, took


def test_chunks_forwarded_by_a_router_arrive_intact(payload: tuple[str, str]) -> None:
    """A chunk is a super-frame the receiving stack takes as GRO'd: a router that
    forwards it out of a plain veth without TSO segments it again in software from
    the checksum seed and headers the engine wrote. A wrong seed, length, ID or
    sequence number there would corrupt or stall the transfer."""
    path, digest = payload
    spec = TopologySpec(auto_routes=True)
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("r1", kind="router"))
    spec.add_node(NodeSpec("h2", ip="10.0.1.2/24"))
    fast = LinkSpec("h1", "r1", a_ip="10.0.0.1/24", b_ip="10.0.0.2/24")
    fast.params_ab = LinkParams(bw=4e9, delay=0.001)
    fast.backend, fast.endpoint = "engine", "tap"
    spec.add_link(fast)
    spec.add_link(LinkSpec("r1", "h2", a_ip="10.0.1.1/24", b_ip="10.0.1.2/24"))
    with Network(spec) as net:
        _, err, code = net["r1"].pexec(["ethtool", "-K", "r1-eth1", "tso", "off", "gso", "off"])
        assert code == 0, err
        got, n = send_file(net["h1"], net["h2"], "10.0.1.2", path, PORT)
        counts = net.links[0].stats()["ab"]["offload"]
    assert (got, n) == (digest, SIZE)
    assert counts["chunks"] > 0 and counts["errors"] == 0, counts
