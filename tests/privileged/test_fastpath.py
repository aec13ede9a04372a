"""The XDP fast path on a routed line: forwarding by the kernel's FIB in XDP, with
TTL expiry, ICMP errors and the last hop still the kernel's (traceroute shows
every hop), data intact, tc-shaped egress left to the stack, runtime changes
honoured, nothing left behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from _servers import payload_file, start_listening, transfer

from fidelnet import Network
from fidelnet.bench.line import topology
from fidelnet.fastpath import stats
from fidelnet.topology import LinkParams

pytestmark = pytest.mark.privileged

RX = "10.10.3.2"  # the receiver behind three routers


def line(fastpath: bool = True) -> Network:
    spec = topology(3)  # lg - h1 - h2 - h3 - rx, h1..h3 routers
    if fastpath:
        spec.fastpath = "xdp"
    return Network(spec)


def test_traceroute_shows_every_hop_and_packets_take_the_fast_path() -> None:
    with line() as net:
        out, err, code = net["lg"].pexec(["ping", "-n", "-c", "3", "-W", "2", RX])
        assert code == 0, out + err
        out, err, code = net["lg"].pexec(["traceroute", "-n", "-w", "2", "-q", "1", "-m", "8", RX])
        assert code == 0, out + err
        hops = [line.split()[1] for line in out.splitlines()[1:]]
        # Every router answers its TTL expiry; the destination answers the UDP probe
        # with a port unreachable that crosses the fast path back.
        assert hops == ["10.10.0.2", "10.10.1.2", "10.10.2.2", RX], out
        counters = stats(net)
        # Recorded like every backend choice: in every result's provenance.
        from fidelnet.measure.provenance import collect

        assert collect(net).backends["fastpath:xdp"] == 3
    assert set(counters) == {"h1", "h2", "h3"}
    for name, s in counters.items():
        c = s["counters"]
        assert isinstance(c, dict)
        assert c["forwarded"] >= 6, (name, s)  # 3 echo requests + 3 replies at least
        assert c["ttl_expired"] >= 1, (name, s)  # traceroute's probe for this hop
        assert s["ports"] == s["interfaces"], s


def test_tcp_data_crosses_intact(tmp_path: Path) -> None:
    path, expected = payload_file(tmp_path, 8 << 20)
    with line() as net:
        got = transfer(net["lg"], net["rx"], RX, path, 5602)
        forwarded = stats(net)["h2"]["counters"]
    assert got == expected
    assert isinstance(forwarded, dict) and forwarded["forwarded"] > 1000, forwarded


def test_a_shaped_egress_is_left_to_the_stack_and_runtime_changes_leave_the_ports() -> None:
    spec = topology(3)
    spec.fastpath = "xdp"
    # h2 -> h3 shaped with tc on h2's egress: h2 must not redirect there.
    spec.links[2].params_ab = LinkParams(bw=20e6)
    spec.links[2].backend = "tc"
    with Network(spec) as net:
        fp = stats(net)
        assert "h2-eth1" not in fp["h2"]["ports"], fp["h2"]
        assert "h2-eth1" in fp["h2"]["left_out"], fp["h2"]
        srv = start_listening(net["rx"], ["iperf3", "-s", "-1"], 5201, stdout=subprocess.DEVNULL)
        out, err, code = "", "", -1
        try:
            out, err, code = net["lg"].pexec(["iperf3", "-c", RX, "-t", "2", "-J"], timeout=60)
        finally:
            if code != 0:  # a failed client leaves `-s -1` waiting: show why, not a hang
                srv.kill()
            srv.wait(timeout=20)
        assert code == 0, out + err
        bps = json.loads(out)["end"]["sum_received"]["bits_per_second"]
        assert bps <= 20e6 * 1.02, bps  # htb's rate holds: the program did not skip it
        shaped = stats(net)["h2"]["counters"]
        assert isinstance(shaped, dict) and shaped["egress_shaped"] > 0, shaped
        # Shaping a plain link at runtime takes its interfaces out of the ports.
        link = net.links[1]  # h1 - h2, plain veth
        assert "h1-eth1" in stats(net)["h1"]["ports"]
        link.set(bw="50Mbit")
        assert link.backend == "tc"
        after = stats(net)
        assert "h1-eth1" not in after["h1"]["ports"] and "h2-eth0" not in after["h2"]["ports"]
        out, err, code = net["lg"].pexec(["ping", "-n", "-c", "2", "-W", "2", RX])
        assert code == 0, out + err
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        assert not any(" - bpf " in ln and "fidelnet" in ln for ln in f), "bpffs left mounted"


def test_af_xdp_engine_links_are_ports(tmp_path: Path) -> None:
    """Router-to-router links on the engine with AF_XDP endpoints (1 ms each way):
    the routers' interfaces on them are fast-path ports, since linkd does the link's
    work after the router. Frames redirected there are stamped and delayed by linkd;
    TTL expiry and ICMP errors stay the kernel's; data crosses intact."""
    spec = topology(3)  # lg - h1 - h2 - h3 - rx
    spec.fastpath = "xdp"
    for link in spec.links[1:3]:  # h1 - h2, h2 - h3
        link.params_ab = link.params_ba = LinkParams(delay=0.001)
        link.backend = "engine"
        link.endpoint = "af_xdp"
    path, expected = payload_file(tmp_path, 4 << 20)
    with Network(spec) as net:
        fp = stats(net)
        assert fp["h2"]["ports"] == fp["h2"]["interfaces"] == ["h2-eth0", "h2-eth1"], fp["h2"]
        assert "h1-eth1" in fp["h1"]["ports"] and "h3-eth0" in fp["h3"]["ports"], fp
        out, err, code = net["lg"].pexec(["ping", "-n", "-c", "5", "-i", "0.2", "-W", "2", RX])
        assert code == 0, out + err
        rtts = sorted(float(t.split("=")[1]) for t in out.split() if t.startswith("time="))
        assert 4.0 <= rtts[len(rtts) // 2] < 6.0, rtts  # two 1 ms links each way
        out, err, code = net["lg"].pexec(["traceroute", "-n", "-w", "2", "-q", "1", "-m", "8", RX])
        assert code == 0, out + err
        hops = [line.split()[1] for line in out.splitlines()[1:]]
        assert hops == ["10.10.0.2", "10.10.1.2", "10.10.2.2", RX], out
        got = transfer(net["lg"], net["rx"], RX, path, 5603)
        c = stats(net)["h2"]["counters"]
        assert isinstance(c, dict) and c["forwarded"] > 1000, c
        ends = next(iter(net.engine.stats().values()))["endpoints"] if net.engine else {}
        assert ends and all(e["stamped"] > 0 and e["unstamped"] == 0 for e in ends.values()), ends
    assert got == expected
