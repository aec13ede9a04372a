"""linkd with more than one engine loop (``engine_threads``): links spread over the
loops, each link forwarding with its own delay and rate on its loop, runtime changes
reaching the right loop, a TCP transfer intact across links on different loops, and
one process (with its threads) torn down at the end."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import pytest
from _servers import payload_file
from _servers import transfer as send_file

from fidelnet import Network
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

PORT = 5301
SIZE = 8 << 20


def chain(threads: int, delay: float, endpoint: str) -> Network:
    """h1 - s1 - s2 - h2 over three engine links of ``delay`` each."""
    spec = TopologySpec(engine_threads=threads)
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    for s in ("s1", "s2"):
        spec.add_node(NodeSpec(s, kind="switch"))
    for u, v in (("h1", "s1"), ("s1", "s2"), ("s2", "h2")):
        link = LinkSpec(u, v, params=LinkParams(delay=delay))
        link.backend = "engine"
        link.endpoint = endpoint  # type: ignore[assignment]
        spec.add_link(link)
    return Network(spec)


def rtts(net: Network, count: int) -> list[float]:
    out, err, code = net["h1"].pexec(["ping", "-n", "-c", str(count), "-i", "0.05", "10.0.0.2"])
    assert code == 0, out + err
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]


def engine_report(net: Network) -> dict[str, Any]:
    assert net.engine is not None
    return net.engine.loop_stats()


@pytest.mark.parametrize("endpoint", ["tap", "af_xdp"])
def test_links_spread_over_two_loops_and_keep_their_delay(endpoint: str) -> None:
    with chain(2, 0.005, endpoint) as net:
        assert net.engine is not None and net.engine.pid is not None
        pid = net.engine.pid
        # The control thread and two engine loops, named by linkd.
        names = sorted(
            Path(f"/proc/{pid}/task/{t}/comm").read_text().strip()
            for t in os.listdir(f"/proc/{pid}/task")
        )
        assert names == ["fidelnet-linkd", "linkd-loop0", "linkd-loop1"], names
        assert "2 engine loops" in net.engine.release
        rtts(net, 1)  # ARP
        got = rtts(net, 20)
        # Three links of 5 ms each way: 30 ms, whichever loop carries each link.
        assert min(got) >= 30.0 and sorted(got)[10] < 32.0, got
        report = engine_report(net)
        assert report["threads"] == 2
        assert [loop["links"] for loop in report["loops"]] == [2, 1]
        assert report["links"] == 3
        # A runtime change reaches the loop that carries the link: each new link
        # went to the loop with the fewest, so the middle one is the second loop's.
        net.links[1].set(delay="15ms")
        got = rtts(net, 10)
        assert min(got) >= 50.0 and sorted(got)[5] < 52.0, got
        stats = net.links[1].stats()
        assert stats["ab"]["tx_packets"] >= 31 and stats["ab"]["drops"]["queue"] == 0
    assert not os.path.exists(f"/proc/{pid}"), "linkd and its loops are gone"


def test_tcp_across_loops_arrives_intact_and_in_order(tmp_path: Path) -> None:
    path, (digest, _) = payload_file(tmp_path, SIZE)
    with chain(2, 0.001, "tap") as net:
        # Shape the middle link (the second loop's) so that super-frames are cut
        # into chunks there (2 Gbit/s: 50 µs chunks of about eight frames).
        net.links[1].set(bw="2Gbit")
        got, n = send_file(net["h1"], net["h2"], "10.0.0.2", path, PORT)
        assert (got, n) == (digest, SIZE)
        middle = net.links[1].stats()["ab"]
        assert middle["offload"]["chunks"] > 0, middle["offload"]
        assert middle["offload"]["errors"] == 0
