"""Scale: IPv6 off, the kernel's cleanup waited for, limits checked before a build,
and a topology of 1,000 nodes built and reached."""

from __future__ import annotations

import os
import random
import time

import pytest

from fidelnet import Network
from fidelnet.errors import ValidationError
from fidelnet.kernel.limits import Machine
from fidelnet.topology import linear


def test_ipv6_off_hosts_hold_no_ipv6_and_still_carry_ipv4_tcp() -> None:
    spec = linear(2)
    spec.ipv6 = False
    with Network(spec) as net:
        h1, h2 = net["h1"], net["h2"]
        for h in (h1, h2):
            assert h.cmd("cat /proc/sys/net/ipv6/conf/all/disable_ipv6").strip() == "1"
            dev = f"{h.name}-eth0"
            assert h.cmd(f"cat /proc/sys/net/ipv6/conf/{dev}/disable_ipv6").strip() == "1"
            assert h.cmd("ip -6 -o addr show").strip() == ""
        assert net.ping_all(timeout=2.0) == 0.0
        # iperf3's server listens on the IPv6 wildcard by default: it must still work.
        server = h2.popen(["iperf3", "-s", "-1"])
        try:
            deadline = time.monotonic() + 5
            while "5201" not in h2.cmd("ss -Htln"):
                assert time.monotonic() < deadline, "iperf3 server did not listen"
                time.sleep(0.05)
            out = h1.cmd(f"iperf3 -c {h2.ip} -t 1 -J")
            assert '"bits_per_second"' in out and '"error"' not in out
        finally:
            server.kill()
            server.wait()


def test_ipv6_on_hosts_have_link_local_addresses() -> None:
    with Network(linear(2)) as net:
        out = net["h1"].cmd("ip -6 -o addr show dev h1-eth0 scope link")
        assert "fe80::" in out


def test_node_shells_copy_a_small_mount_table_whatever_the_run_size() -> None:
    """A node's mount namespace is copied from a template made before the run's
    namespaces: it does not hold a mount per node (which made each shell cost time
    in proportion to the nodes), and the shell still has its own sysfs, hostname and
    the caller's working directory."""
    with open("/proc/self/mountinfo") as f:
        before = len(f.read().splitlines())
    with Network(linear(60)) as net:
        assert net.mount_template is not None
        with open("/proc/self/mountinfo") as f:
            host_mounts = len(f.read().splitlines())
        assert host_mounts >= before + 60  # one per host namespace file
        h = net["h7"]
        in_node = int(h.cmd("wc -l < /proc/self/mountinfo").strip())
        assert in_node <= before + 2  # the template's copy plus the node's sysfs
        assert h.cmd("hostname").strip() == "h7"
        assert h.cmd("ls /sys/class/net").split() == sorted(["h7-eth0", "lo"])
        assert h.cmd("pwd").strip() == os.getcwd()
        assert net["s3"].cmd("ls /sys/class/net | grep -c '^s3'").strip() != "0"


def test_stop_waits_for_the_kernel_and_reports_timings() -> None:
    net = Network(linear(20))
    net.start()
    net.stop()
    t = net.timings
    assert t["build"] is not None and t["build"] > 0
    assert t["teardown"] is not None and t["teardown"] >= 0
    assert t["kernel_cleanup"] is not None and t["kernel_cleanup"] >= 0
    net2 = Network(linear(2))
    net2.start()
    net2.stop(wait_kernel=False)
    assert net2.timings["kernel_cleanup"] is None


def _netns() -> set[str]:
    try:
        return set(os.listdir("/run/netns"))
    except FileNotFoundError:
        return set()


def test_a_topology_too_big_for_the_machine_is_refused_before_anything_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    small = Machine(
        mem_available=8 << 20,
        nofile_soft=1024,
        nofile_hard=1 << 20,
        open_fds=10,
        pid_max=1 << 22,
        tasks=100,
        max_net_namespaces=1 << 20,
    )
    monkeypatch.setattr("fidelnet.network.limits.machine", lambda: small)
    before = _netns()
    net = Network(linear(50))
    with pytest.raises(ValidationError, match=r"100 nodes need about \d+ MiB of memory"):
        net.start()
    assert _netns() == before
    assert not net.is_open


def test_a_thousand_nodes_build_and_reach_each_other() -> None:
    """linear,500: 500 switches in a chain, 500 hosts, one broadcast domain."""
    spec = linear(500)
    spec.ipv6 = False
    net = Network(spec)
    try:
        net.start()
        hosts = net.hosts
        assert len(net.nodes) == 1000 and len(hosts) == 500
        rng = random.Random(17)
        sample = [hosts[0], hosts[-1], *rng.sample(hosts[1:-1], 4)]
        results = net.ping_pairs(sample, timeout=2.0)
        assert len(results) == 30
        assert all(results.values()), [pair for pair, ok in results.items() if not ok]
    finally:
        net.stop()
    assert net.timings["kernel_cleanup"] is not None


def test_shells_started_together_work_like_shells_started_one_by_one() -> None:
    """``start_shells`` starts every node's shell at once; each is then the node's
    own persistent shell (its namespace, its hostname, state kept between commands),
    recorded in the run state, and ended by teardown."""
    with Network(linear(20)) as net:
        net.start_shells()
        pids = {n.name: n.shell().pid for n in net.nodes.values()}
        assert len(set(pids.values())) == 40
        for name in ("h1", "h20", "s7"):
            node = net[name]
            node.cmd("X=7")
            assert node.cmd("echo $X").strip() == "7"
        assert net["h13"].cmd("hostname").strip() == "h13"
        assert net["h13"].cmd("ls /sys/class/net").split() == ["h13-eth0", "lo"]
        out = net["h1"].cmd(f"ping -c1 -W2 {net['h20'].ip}")
        assert " 0% packet loss" in out
        net.start_shells()  # nothing left to start: the same shells stay
        assert {n.name: n.shell().pid for n in net.nodes.values()} == pids
    for pid in pids.values():
        assert not os.path.exists(f"/proc/{pid}") or _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
