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
        LinkParams(bw=200e6, loss=1.0),
        LinkParams(delay=0.001, corrupt=1.0),
    ],
    ids=["shaped", "lossy", "corrupting"],
)
def test_tcp_through_a_link_that_needs_wire_packets(
    payload: tuple[str, str], params: LinkParams
) -> None:
    """Cut into wire packets with every checksum recomputed: a wrong checksum would
    make the receiver drop every segment and the transfer stall; a corrupted bit is
    caught by the receiver (the checksum is complete, not left to the device), so
    TCP retransmits it and the file still arrives intact."""
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
    if params.bw is not None:
        # 16 MiB at 200 Mbit/s: at least 0.67 s on the wire.
        assert took >= SIZE * 8 / params.bw * 0.95, took
