"""Mininet's contract, as Mininet's own tests and the libraries built on it rely on it
(docs/mininet-contract.md), in our words: names of deleted and stopped nodes are free
again and nothing of them stays open, a switch lists its control interface, output
formats scripts parse, a killed run's leftover in the host's namespace, real-time CPU
shares, and a library of Mininet subclasses run unchanged."""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import host_links
from fidelnet.compat import _context, shim_path
from fidelnet.compat.cli import CLI
from fidelnet.compat.link import Link
from fidelnet.compat.log import setLogLevel
from fidelnet.compat.net import Mininet
from fidelnet.compat.node import CPULimitedHost, LinuxBridge, Node, NullController
from fidelnet.compat.topo import SingleSwitchTopo
from fidelnet.compat.util import custom
from fidelnet.kernel.state import STATE_DIR

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parent / "data"
HAS_RT = os.path.exists("/sys/fs/cgroup/cpu/cpu.rt_runtime_us")


@pytest.fixture
def stop_all() -> Iterator[None]:
    try:
        yield
    finally:
        _context.stop_all()
        setLogLevel("output")


def _net(topo: object = None, **kwargs: object) -> Mininet:
    return Mininet(topo=topo, switch=LinuxBridge, controller=NullController, **kwargs)  # type: ignore[arg-type]


def _shim_env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=f"{shim_path()}:{ROOT / 'src'}")


def test_a_library_of_mininet_subclasses_runs_unchanged() -> None:
    """data/mininet_library.py: a router, a host, an interface and a switch subclass,
    a Topo with link options, runtime nodes deleted and added again, standalone nodes
    made twice; built, pinged (IPv4 and IPv6) and torn down."""
    done = subprocess.run(
        [sys.executable, str(DATA / "mininet_library.py")],
        env=_shim_env(),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd="/",
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "library: all checks passed" in out, out
    assert "Traceback" not in out and "warning" not in out.lower(), out


def test_the_library_killed_mid_run_is_cleaned_completely() -> None:
    """The same library killed with SIGKILL, its network built and its daemons
    running: ``fidelnet clean`` removes the run (namespaces, interfaces, cgroups, state)
    and ends the daemons its subclasses started, which no ``terminate()`` ran for.
    The library's own working directory is its own: fidelnet never knew it."""
    proc = subprocess.Popen(
        [sys.executable, str(DATA / "mininet_library.py"), "--hold"],
        env=_shim_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd="/",
    )
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("READY") or len(lines) > 200:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert lines and lines[-1].startswith("READY"), "".join(lines)
    rid, workdir, *pids = lines[-1].split()[1:]
    assert len(pids) == 2 and os.path.exists(f"{STATE_DIR}/{rid}.jsonl")
    assert [n for n in os.listdir("/run/netns") if n.startswith(f"fn{rid}-")]
    done = subprocess.run(
        [sys.executable, "-m", "fidelnet", "clean"],
        env=_shim_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert not os.path.exists(f"{STATE_DIR}/{rid}.jsonl")
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"fn{rid}-")]
    assert not [n for n in host_links() if n.startswith(("r1-", "h1-", "h2-", "s1-"))]
    for pid in pids:  # the daemons: ended and reaped by the time clean returns
        assert not os.path.exists(f"/proc/{pid}"), pid
    assert os.path.isdir(workdir)  # the library's: fidelnet never knew it
    shutil.rmtree(workdir)


@pytest.mark.usefixtures("stop_all")
def test_standalone_nodes_free_their_names_when_stopped() -> None:
    """Mininet's hwintf test makes Node('t0'), Node('t1', inNamespace=False) and a Link
    in setUp and stops them in tearDown, for each test: the names come back."""
    for _ in range(3):
        t0 = Node("t0", ip="10.0.0.3/8")
        t1 = Node("t1", inNamespace=False)
        Link(t0, t1)
        t0.configDefault()
        assert "t1-eth0" in host_links()
        assert t0.cmd("ip -o addr show t0-eth0").count("10.0.0.3/8") == 1
        t0.stop(deleteIntfs=True)
        t1.stop(deleteIntfs=True)
        assert "t1-eth0" not in host_links()
        assert t0.net.nodes == {}  # nothing of them is left in the network


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.usefixtures("stop_all")
def test_a_deleted_host_frees_its_name_and_leaks_nothing() -> None:
    """delHost then addHost of the same name, again and again (Mininet's pty leak
    test): the name is free each time, the new host's shell has its pty (``master``,
    ``slave``), and nothing of the deleted one stays open or behind: this process's
    descriptors and the run's namespaces are as many after each round. (Mininet's own
    test compares descriptor numbers, which holds there because a node holds its two
    pty descriptors and nothing else; here a node also holds its netlink handle, made
    with the node, so the numbers shift once while their count does not.)"""
    net = _net(SingleSwitchTopo())
    net.start()
    run = net.fn_net.run_id
    host = net["h1"]
    assert os.isatty(host.slave) and host.master != host.slave
    net.delHost(host)  # a first round: the run's helpers (exec server) now exist
    host = net.addHost("h1")
    ptys = (host.slave, host.master)
    fds = _open_fds()
    namespaces = sorted(n for n in os.listdir("/run/netns") if n.startswith(f"fn{run}"))
    for _ in range(4):
        net.delHost(host)
        host = net.addHost("h1")
        assert (host.slave, host.master) == ptys
        assert _open_fds() == fds
        assert sorted(n for n in os.listdir("/run/netns") if n.startswith(f"fn{run}")) == namespaces
    net.addLink(host, net["s1"])
    host.configDefault()
    assert "1 received" in host.cmd("ping -c1 -W2", net["h2"].IP())
    net.stop()


@pytest.mark.usefixtures("stop_all")
def test_switches_list_their_control_interface(capsys: pytest.CaptureFixture[str]) -> None:
    """Mininet lists a switch's ``lo`` first (its control interface, port 0):
    multilink's test reads ``s1: lo,s1-eth1,...`` from ``intfs``."""
    net = _net(SingleSwitchTopo())
    net.start()
    s1 = net["s1"]
    assert s1.intfNames() == ["lo", "s1-eth1", "s1-eth2"]
    assert s1.defaultIntf().name == "lo" and s1.IP() == "127.0.0.1"
    assert sorted(s1.intfs) == [1, 2]  # ports only: lo is no port of the bridge
    said = s1.controlIntf.ifconfig("down")  # the fabric's loopback, shared: stays up
    assert "stays up" in said and s1.controlIntf.isUp()
    capsys.readouterr()
    script = Path(os.environ.get("TMPDIR", "/tmp")) / f"fn-cli-{os.getpid()}"
    script.write_text("intfs\nnet\nports\ndump\n")
    try:
        CLI(net, script=str(script))
    finally:
        script.unlink()
    out = capsys.readouterr().err
    assert "s1: lo,s1-eth1,s1-eth2\n" in out
    assert "s1 lo:  s1-eth1:h1-eth0 s1-eth2:h2-eth0" in out
    assert "s1 lo:0 s1-eth1:1 s1-eth2:2" in out
    assert re.search(r"<LinuxBridge s1: lo:127\.0\.0\.1,s1-eth1:None,s1-eth2:None pid=", out)
    assert net.pingAll() == 0.0
    net.stop()


@pytest.mark.usefixtures("stop_all")
def test_cmd_print_prints_mininets_header(capsys: pytest.CaptureFixture[str]) -> None:
    net = _net(SingleSwitchTopo())
    net.start()
    setLogLevel("info")
    capsys.readouterr()
    net["h1"].cmdPrint("echo hi")
    assert "*** h1 : ('echo hi',)\nhi" in capsys.readouterr().err
    setLogLevel("output")
    net["h1"].cmd("echo quiet")  # cmd: the header only at debug level
    assert "***" not in capsys.readouterr().err
    net.stop()


_KILLED_RUN = """
import os, sys, time
from mininet.node import Node
from mininet.link import Link
root = Node("root", inNamespace=False)
Link(Node("h9"), root)
print("READY", root.net.run_id, flush=True)
time.sleep(600)
"""


def _run_and_kill() -> str:
    """A script that makes ``root-eth0`` in the host's namespace, killed with SIGKILL
    (nothing of it cleaned); its run id."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN],
        env=_shim_env(),
        stdout=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert line.startswith("READY"), line
    return line.split()[1]


@pytest.fixture
def warnings() -> Iterator[list[str]]:
    """What fidelnet logs at warning level during the test."""
    seen: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                seen.append(record.getMessage())

    handler = Collect()
    logging.getLogger("fidelnet").addHandler(handler)
    try:
        yield seen
    finally:
        logging.getLogger("fidelnet").removeHandler(handler)


@pytest.mark.usefixtures("stop_all")
def test_a_killed_runs_host_interface_is_cleaned_with_its_run(warnings: list[str]) -> None:
    """controlnet.py after a run was killed: ``root-eth0`` is still in the host's
    namespace, marked as the dead run's. The next run cleans that run first (one
    warning line) and makes its own."""
    dead = _run_and_kill()
    assert "root-eth0" in host_links() and os.path.exists(f"{STATE_DIR}/{dead}.jsonl")
    root = Node("root", inNamespace=False)
    Link(Node("h9"), root)
    assert not os.path.exists(f"{STATE_DIR}/{dead}.jsonl")
    assert not [n for n in os.listdir("/run/netns") if n.startswith(f"fn{dead}")]
    said = [w for w in warnings if "cleaning that run first" in w]
    assert len(said) == 1 and f"run {dead}" in said[0], said
    _context.stop_all()
    assert "root-eth0" not in host_links()


def test_a_foreign_interface_in_the_way_is_named_not_touched() -> None:
    """An interface of the same name that is not fidelnet's: one line saying whose and
    what to do, and it is left as it was."""
    subprocess.run(
        ["ip", "link", "add", "root-eth0", "type", "veth", "peer", "name", "fn-foreign"], check=True
    )
    try:
        code = (
            "from mininet.node import Node\nfrom mininet.link import Link\n"
            "Link(Node('h9'), Node('root', inNamespace=False))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            env=_shim_env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd="/",
        )
        assert done.returncode == 1
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
        assert "root-eth0" in lines[0] and "not fidelnet's" in lines[0], lines
        assert "ip link del root-eth0" in lines[0]
        assert "root-eth0" in host_links()  # untouched
    finally:
        subprocess.run(["ip", "link", "del", "root-eth0"], check=True)


@pytest.mark.timing
@pytest.mark.skipif(not HAS_RT, reason="no real-time group scheduling (cgroup v1 cpu.rt_*)")
@pytest.mark.usefixtures("stop_all")
def test_realtime_share_is_the_share_asked() -> None:
    """sched='rt' with cpu=0.1: each host gets 10% of the machine, with one busy loop
    (Mininet's test) and with two. Real-time runtime is per CPU; before, one loop got
    10% of one core, half the share on two cores."""
    ncpu = os.cpu_count() or 1
    net = _net(SingleSwitchTopo(2), host=custom(CPULimitedHost, sched="rt", cpu=0.1))
    net.start()
    shares = net.runCpuLimitTest(cpu=0.1, duration=4)
    per_host = [shares[i : i + 4] for i in range(0, len(shares), 4)]
    for samples in per_host:
        assert 7.0 < sum(samples) / len(samples) < 13.0, shares
    # More busy processes than the cores it holds: the share stays the share.
    h1 = net["h1"]
    pids = []
    for _ in range(2):
        h1.cmd("while true; do a=1; done &")
        pids.append(h1.lastPid)
    try:
        usage = _usage_us(h1)
        began = time.monotonic()
        time.sleep(3)
        share = (_usage_us(h1) - usage) / 1e6 / (time.monotonic() - began) / ncpu * 100
    finally:
        h1.cmd("kill -9", *pids)
    assert 7.0 < share < 13.0, share
    assert len(per_host) == 2
    net.stop()


def _usage_us(host: object) -> float:
    from fidelnet.compat._nettests import _cpu_usage_us

    return _cpu_usage_us(host)
