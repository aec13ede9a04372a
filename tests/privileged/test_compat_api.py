"""Mininet's Python API on fidelnet, in process: nodes, links, shells, shaping, limits,
checks before the kernel is touched, and warnings for parameters nothing uses."""

from __future__ import annotations

import logging
import math
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from fidelnet.compat import _context
from fidelnet.compat.cli import CLI
from fidelnet.compat.link import Link, TCLink
from fidelnet.compat.net import Mininet
from fidelnet.compat.node import CPULimitedHost, Host, LinuxBridge, NullController
from fidelnet.compat.topo import SingleSwitchTopo, Topo
from fidelnet.errors import UnsupportedError, ValidationError

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

HAS_RT = os.path.exists("/sys/fs/cgroup/cpu/cpu.rt_runtime_us")


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    """Messages fidelnet logs at warning level during the test."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                seen.append(record.getMessage())

    handler = Collect()
    logger = logging.getLogger("fidelnet")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def _net(**kwargs: object) -> Mininet:
    return Mininet(controller=NullController, switch=LinuxBridge, **kwargs)  # type: ignore[arg-type]


def test_mid_level_api_and_shell_protocol() -> None:
    net = _net()
    try:
        h1 = net.addHost("h1")
        h2 = net.addHost("h2", ip="10.0.0.9")
        s1 = net.addSwitch("s1")
        net.addLink("h1", "s1")
        link = net.addLink(h2, s1, port2=5)
        h2.setMAC("02:00:00:00:00:09")
        assert h2.MAC() == "02:00:00:00:00:09" == h2.intf().updateMAC()
        net.start()
        assert [h.IP() for h in net.hosts] == ["10.0.0.1", "10.0.0.9"]
        assert h2.intf().prefixLen == 8
        assert h1.intfNames() == ["h1-eth0"] and s1.intfNames() == ["lo", "s1-eth1", "s1-eth5"]
        assert s1.ports[s1.controlIntf] == 0 and 0 not in s1.intfs  # lo is no port
        assert s1.ports[link.intf2] == 5 and link.intf2.name == "s1-eth5"
        assert h1.connectionsTo(s1) == [(h1.intf(), s1.intf("s1-eth1"))]
        assert "s1" in net and net.get("h1", "h2") == [h1, h2] and len(net) == 3
        assert net.pingAll() == 0.0
        assert h1.cmd("echo", "hi").strip() == "hi"
        h1.cmd("cd /tmp; X=42")
        assert h1.cmd("echo $X $PWD").split() == ["42", "/tmp"]
        h1.sendCmd("sleep 0.2; echo done")
        assert h1.waiting
        assert "done" in h1.waitOutput() and not h1.waiting
        h1.cmd("sleep 30 &")
        assert isinstance(h1.lastPid, int)
        proc = h1.popen("echo hello there")
        assert proc.communicate()[0] == b"hello there\n"
        assert h2.pexec(["sh", "-c", "echo out; echo err >&2; exit 3"]) == ("out\n", "err\n", 3)
        h2.setIP("10.1.0.9", 16)
        assert h2.IP() == "10.1.0.9" and h2.intf().prefixLen == 16
        assert h2.intf().updateIP() == "10.1.0.9"
        h2.setIP("10.0.0.9/8")
        net.configLinkStatus("s1", "h2", "down")
        assert not h2.intf().isUp()
        assert net.ping([h1, h2], timeout=1) == 100.0
        net.configLinkStatus("s1", "h2", "up")
        assert net.pingPair() == 0.0
        full = net.pingPairFull()
        assert full[0][0] is h1 and full[0][2][:2] == (1, 1)
    finally:
        net.stop()


def test_topo_build_validates_before_any_kernel_object() -> None:
    before = set(os.listdir("/run/netns"))
    topo = Topo()
    topo.addLink(topo.addHost("h" * 20), topo.addSwitch("s1"))
    with pytest.raises(ValidationError) as exc:
        _net(topo=topo)
    assert "15" in str(exc.value) and exc.value.field == f"nodes.{'h' * 20}.name"
    assert set(os.listdir("/run/netns")) == before


def test_tclink_delay_runs_on_the_engine_and_bad_values_are_refused() -> None:
    before = set(os.listdir("/run/netns"))
    bad = SingleSwitchTopo(2, lopts={"bw": 10, "delay": "-5ms"})
    with pytest.raises(ValidationError, match="delay"):
        _net(topo=bad, link=TCLink)
    assert set(os.listdir("/run/netns")) == before
    net = _net(topo=SingleSwitchTopo(2, lopts={"bw": 10, "delay": "5ms"}), link=TCLink)
    try:
        net.start()
        h1 = net["h1"]
        h1.cmd("ping -c1 -W2 10.0.0.2")  # ARP
        out = h1.cmd("ping -c5 -i0.2 10.0.0.2")
        times = sorted(float(t) for t in re.findall(r"time=([\d.]+) ms", out))
        # two links, 5 ms each way on each: never below 20 ms, the median close to it
        # (single pings may meet one of the engine's rare millisecond stalls)
        assert len(times) == 5 and times[0] >= 20.0, out
        assert times[2] < 22.0 and times[-1] < 40.0, out
        expected = "tc" if os.path.exists("/sys/module/sch_netem") else "engine"
        assert {link.backend for link in net.links} == {expected}
    finally:
        net.stop()


def test_unknown_parameters_warn_once(warnings: list[str]) -> None:
    net = _net(frobnicate=True)
    try:
        h1 = net.addHost("h1", colour="blue")
        s1 = net.addSwitch("s1")
        net.addLink(h1, s1, bw=10, delay="1ms")  # a plain Link: Mininet ignores them
        assert h1.cmd("tc qdisc show dev h1-eth0").find("htb") < 0
    finally:
        net.stop()
    mine = [w for w in warnings if "unknown" in w]
    assert len(mine) == 3, warnings
    assert "frobnicate" in mine[0] and "colour" in mine[1]
    assert "bw, delay" in mine[2] and "TCLink" in mine[2]


def test_tclink_shapes_with_htb() -> None:
    net = _net(topo=SingleSwitchTopo(2), link=TCLink)
    try:
        h1 = net["h1"]
        assert "rate 10Mbit" not in h1.cmd("tc class show dev h1-eth0")
        net.addLink(h1, net["s1"], bw=5, max_queue_size=100)
        assert "rate 5Mbit" in h1.cmd("tc class show dev h1-eth1")
        assert "limit 100p" in h1.cmd("tc qdisc show dev h1-eth1")
        h1.intf("h1-eth1").config(bw=2)
        assert "rate 2Mbit" in h1.cmd("tc class show dev h1-eth1")
        if not os.path.exists("/sys/module/sch_netem"):
            # Mininet allows any change at runtime; without netem the link moves onto
            # the engine and keeps its interface (and its 2 Mbit/s).
            h1.intf("h1-eth1").config(bw=2, delay="5ms")
            link = h1.intf("h1-eth1").link
            assert link is not None and link.backend == "engine"
            assert link.params("ab").bw == 2e6 and link.params("ab").delay == 0.005
    finally:
        net.stop()


def _cfs_quota(host: CPULimitedHost) -> int | None:
    for d in host.cgroup_dirs():
        path = Path(d, "cpu.cfs_quota_us")
        if path.exists():
            return int(path.read_text())
        path = Path(d, "cpu.max")
        if path.exists():
            value = path.read_text().split()[0]
            return -1 if value == "max" else int(value)
    return None


def test_cpu_limited_hosts() -> None:
    ncpu = os.cpu_count() or 1
    net = _net(topo=SingleSwitchTopo(2), host=CPULimitedHost)
    try:
        h1 = net["h1"]
        h1.setCPUFrac(0.1)
        h1.cmd("true")  # the shell (and the node's cgroups) exist from here on
        assert _cfs_quota(h1) == round(0.1 * ncpu * 100_000)
        h1.setCPUFrac(0.25)
        assert _cfs_quota(h1) == round(0.25 * ncpu * 100_000)
        h1.setCPUFrac(-1)
        assert _cfs_quota(h1) == -1
        with pytest.raises(ValidationError):
            h1.setCPUFrac(1.5)
    finally:
        net.stop()


def test_realtime_hosts() -> None:
    if not HAS_RT:
        with pytest.raises(UnsupportedError, match="real-time"):
            _net(topo=SingleSwitchTopo(1), host=CPULimitedHost).addHost(
                "h9", cls=CPULimitedHost, sched="rt", cpu=0.1
            )
        return
    net = _net()
    try:
        h1 = net.addHost("h1", cls=CPULimitedHost, sched="rt", cpu=0.1)
        h1.setCPUFrac(0.1)
        assert os.sched_getscheduler(h1.pid) == os.SCHED_RR
        # Real-time runtime is per CPU: 10% of the machine is, on as few cores as hold
        # it, 10% * ncpus / cores of each of them.
        ncpu = os.cpu_count() or 1
        on = math.ceil(0.1 * ncpu)
        rt = [Path(d, "cpu.rt_runtime_us") for d in h1.cgroup_dirs()]
        assert [int(p.read_text()) for p in rt if p.exists()] == [round(0.1 * ncpu / on * 1e5)]
        sets = [Path(d, "cpuset.cpus") for d in h1.cgroup_dirs()]
        cpus = [p.read_text().strip() for p in sets if p.exists()]
        assert [c for c in cpus if c] == ["0" if on == 1 else f"0-{on - 1}"]
    finally:
        net.stop()


def test_nodes_without_a_mininet_object() -> None:
    """scratchnet.py style: nodes and links made directly, stopped at the end."""
    try:
        h0, h1 = Host("h0"), Host("h1")
        s0 = LinuxBridge("s0")
        Link(h0, s0)
        Link(h1, s0)
        h0.setIP("192.168.123.1/24")
        h1.setIP("192.168.123.2/24")
        assert "1 received" in h0.cmd("ping -c1 192.168.123.2")
        assert h0.net is h1.net is s0.net
    finally:
        _context.stop_all()


def test_cli_script(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "cmds"
    script.write_text(
        "h1 ping -c1 h2  # h2 becomes its address\nlink s1 h2 down\n"
        "h1 ping -c1 -W1 h2\nsh true\npy len(net.hosts)\ndump\n"
    )
    net = _net(topo=SingleSwitchTopo(2))
    try:
        net.start()
        CLI(net, script=str(script))
    finally:
        net.stop()
    err = capsys.readouterr().err
    assert "PING 10.0.0.2" in err and "1 packets transmitted, 1 received" in err
    assert "1 packets transmitted, 0 received" in err
    assert "\n2\n" in err and "<LinuxBridge s1: lo:127.0.0.1,s1-eth1:None,s1-eth2:None" in err


def test_iperf_tcp_and_udp() -> None:
    net = _net(topo=SingleSwitchTopo(2), link=TCLink)
    try:
        net.start()
        tcp = net.iperf(seconds=1)
        assert len(tcp) == 2 and all(r.endswith("bits/sec") for r in tcp)
        udp = net.iperf(l4Type="UDP", udpBw="5M", seconds=1, fmt="m")
        assert udp[0] == "5M" and all(r.endswith("Mbits/sec") for r in udp[1:])
        assert 3.0 < float(udp[1].split()[0]) <= 5.5
    finally:
        net.stop()


def test_popen_output_is_bytes_like_mininet() -> None:
    net = _net(topo=SingleSwitchTopo(1))
    try:
        out = net["h1"].popen(["hostname"], stdout=subprocess.PIPE).communicate()[0]
        assert out == b"h1\n"
    finally:
        net.stop()


def test_wait_listening() -> None:
    from fidelnet.compat.util import waitListening

    net = _net(topo=SingleSwitchTopo(2))
    try:
        h1, h2 = net.hosts
        assert not waitListening(h1, h2, 5201, timeout=0.3)
        server = h2.popen(["iperf3", "-s", "-p", "5201"])
        assert waitListening(h1, h2, 5201, timeout=10)
        server.kill()
        server.wait()
    finally:
        net.stop()
