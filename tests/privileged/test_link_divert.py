"""Every link accepts every parameter at runtime: a veth or tc link asked for what the
kernel cannot do (a delay without sch_netem, a seeded loss) moves onto the engine and
keeps its interfaces, addresses, routes, bridge ports and traffic."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path

import pytest
from _servers import payload_file, start_listening, transfer

from fidelnet import Network
from fidelnet.bench.line import topology
from fidelnet.fastpath import stats as fastpath_stats
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

H2 = "10.0.0.2"


def pair(params: LinkParams | None = None) -> Network:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    spec.add_link(LinkSpec("h1", "h2", params=params or LinkParams()))
    return Network(spec)


def rtts(out: str) -> list[float]:
    return [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]


def test_a_shaped_link_moves_onto_the_engine_without_losing_a_packet() -> None:
    with pair(LinkParams(bw=50e6)) as net:
        link = net.links[0]
        assert link.backend == "tc"
        h1, h2 = net["h1"], net["h2"]
        index = h1.netlink().index("h1-eth0")
        ping = h1.popen(
            ["ping", "-n", "-c", "40", "-i", "0.05", "-W", "2", H2],
            stdout=subprocess.PIPE,
            text=True,
        )
        time.sleep(0.6)
        link.set(delay="10ms", seed=7)  # sch_netem or not: a seed is the engine's
        out, _ = ping.communicate(timeout=30)
        assert "40 received" in out, out  # nothing lost at the switch
        got = rtts(out)
        assert max(got[:5]) < 5.0 and min(got[-10:]) >= 20.0, got
        assert link.backend == "engine"
        assert link.driver.choice.reason.startswith("moved from tc at runtime: ")
        assert link.params("ab") == LinkParams(bw=50e6, delay=0.01, seed=7)
        # The same interface, its address and its routes; the htb gone, the rate kept.
        assert h1.netlink().index("h1-eth0") == index
        assert "10.0.0.1/24" in h1.netlink().addresses(index)
        qdiscs, _, _ = h1.pexec(["tc", "qdisc", "show", "dev", "h1-eth0"])
        assert "htb" not in qdiscs, qdiscs
        # tcx redirects held by linkd, not tc filters (those are the old-kernel path).
        filters, _, _ = h1.pexec(["tc", "filter", "show", "dev", "h1-eth0", "egress"])
        assert "mirred" not in filters, filters
        s = link.stats()
        assert s["backend"] == "engine" and s["ab"]["tx_packets"] >= 20, s
        assert s["ab"]["lateness"]["count"] >= 20
        srv = start_listening(h2, ["iperf3", "-s", "-1"], 5201, stdout=subprocess.DEVNULL)
        out, err, code = h1.pexec(["iperf3", "-c", H2, "-t", "2", "-J"], timeout=60)
        srv.wait(20)
        assert code == 0, out + err
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        assert 40e6 < bps <= 50e6, bps  # the engine shapes now
        # The engine's TAPs are no node interfaces: the node's list is unchanged.
        assert [i.name for i in h1.intfs.values()] == ["h1-eth0"]
        # Down and up through the engine.
        link.down()
        _, _, code = h1.pexec(["ping", "-n", "-c", "1", "-W", "1", H2])
        assert code != 0
        link.up()
        out, err, code = h1.pexec(["ping", "-n", "-c", "2", "-W", "2", H2])
        assert code == 0, out + err


def test_tcp_data_crosses_a_diverted_link_intact(tmp_path: Path) -> None:
    path, expected = payload_file(tmp_path, 16 << 20)
    with pair() as net:
        link = net.links[0]
        assert link.backend == "veth"
        link.set(delay="2ms", loss="0.5%", seed=1)  # loss: TCP retransmits through it
        assert link.backend == "engine"
        assert transfer(net["h1"], net["h2"], H2, path, 5603) == expected
        assert link.stats()["ab"]["drops"]["loss"] > 0


def test_a_link_into_a_bridge_moves_and_the_bridge_keeps_its_port() -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    spec.add_node(NodeSpec("s1", kind="switch"))
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(LinkSpec("s1", "h2"))
    with Network(spec) as net:
        link = net.links[1]  # s1 - h2: the switch end is a bridge port in the fabric
        out, err, code = net["h1"].pexec(["ping", "-n", "-c", "2", "-W", "2", H2])
        assert code == 0, out + err
        link.set(delay="5ms")
        assert link.backend == "engine"
        out, err, code = net["h1"].pexec(["ping", "-n", "-c", "5", "-i", "0.1", "-W", "2", H2])
        assert code == 0, out + err
        assert min(rtts(out)) >= 10.0, out
        port = net["s1"].intfs[link.intf1.port]
        info = net["s1"].netlink().link_info(port.index)
        assert info["up"], info


def test_a_fast_path_router_port_leaves_the_program_when_its_link_moves() -> None:
    spec = topology(3)  # lg - h1 - h2 - h3 - rx, h1..h3 routers
    spec.fastpath = "xdp"
    with Network(spec) as net:
        link = net.links[1]  # h1 - h2
        assert "h1-eth1" in fastpath_stats(net)["h1"]["ports"]
        link.set(delay="3ms")
        assert link.backend == "engine"
        after = fastpath_stats(net)
        assert "h1-eth1" not in after["h1"]["ports"] and "h2-eth0" not in after["h2"]["ports"]
        out, err, code = net["lg"].pexec(["ping", "-n", "-c", "3", "-W", "2", "10.10.3.2"])
        assert code == 0, out + err
        assert min(rtts(out)) >= 6.0, out  # both directions of h1 - h2 delayed


def test_a_bad_change_leaves_the_link_on_its_backend() -> None:
    with pair(LinkParams(bw=10e6)) as net:
        link = net.links[0]
        with pytest.raises(Exception, match="loss"):
            link.set(delay="5ms", loss="150%")
        assert link.backend == "tc" and link.params("ab").delay is None
        assert net.engine is None  # checked before anything was started or diverted


def test_without_tcx_the_redirects_are_tc_mirred_filters(monkeypatch: pytest.MonkeyPatch) -> None:
    # Kernels before 6.6 have no tcx links: linkd's divert is refused, and the same
    # redirects are made as clsact filters with mirred actions.
    from fidelnet.links import engine as engine_mod

    def refuse(self: object, name: str, a: str, b: str) -> None:
        raise engine_mod.LinkEngineError(
            "fidelnet-linkd refused divert: a: attaching the redirect: Invalid argument "
            "(os error 22) (tcx links need Linux 6.6 or later)"
        )

    monkeypatch.setattr(engine_mod.LinkEngine, "divert", refuse)
    with pair(LinkParams(bw=50e6)) as net:
        link = net.links[0]
        link.set(delay="5ms")
        assert link.backend == "engine"
        out, err, code = net["h1"].pexec(["ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", H2])
        assert code == 0, out + err
        assert min(rtts(out)) >= 10.0, out
        filters, _, _ = net["h1"].pexec(["tc", "filter", "show", "dev", "h1-eth0", "egress"])
        assert "mirred" in filters and "h1-eth0-e" in filters, filters
