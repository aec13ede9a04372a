"""The core on real namespaces: build, run commands, ping, tear down without a trace."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from fidelnet import Network
from fidelnet.errors import UnsupportedError, ValidationError
from fidelnet.kernel.state import list_runs
from fidelnet.topology import (
    LinkParams,
    LinkSpec,
    NodeSpec,
    TopologySpec,
    line,
    linear,
    torus,
    tree,
)

pytestmark = pytest.mark.privileged

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")


def test_linear_pingall_and_shell_semantics() -> None:
    with Network(linear(3)) as net:
        assert net.ping_all() == 0.0
        h1 = net["h1"]
        assert h1.ip == "10.0.0.1"
        # The shell persists: cd and variables survive between commands.
        h1.cmd("cd /tmp; X=42")
        assert h1.cmd("pwd").strip() == "/tmp"
        assert h1.cmd("echo $X").strip() == "42"
        # The node has its own UTS name and sees only its own interfaces.
        assert h1.cmd("hostname").strip() == "h1"
        names = h1.cmd("ls /sys/class/net").split()
        assert sorted(names) == ["h1-eth0", "lo"]
        # A background job yields its pid, and it runs inside the node.
        h1.cmd("sleep 30 &")
        pid = h1.shell().last_pid
        assert pid is not None and os.path.exists(f"/proc/{pid}")
        netns_of_pid = os.readlink(f"/proc/{pid}/ns/net")
        assert netns_of_pid != os.readlink("/proc/self/ns/net")
    # Teardown ended the background job with the rest of the node.
    assert _ended(pid)


def _ended(pid: int) -> bool:
    """Gone, or a zombie waiting for init to reap it (it no longer runs)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_popen_takes_argv_and_runs_in_node() -> None:
    with Network(linear(2)) as net:
        out, err, code = net["h2"].pexec(["ip", "-o", "-4", "addr", "show", "dev", "h2-eth0"])
        assert code == 0, err
        assert "10.0.0.2/8" in out
        # An argument with shell metacharacters reaches the program untouched.
        out, _, _ = net["h1"].pexec(["echo", "$(id); rm -rf /x"])
        assert out == "$(id); rm -rf /x\n"
        with pytest.raises(ValidationError):
            net["h1"].popen("echo hi")  # type: ignore[arg-type]


def test_routed_line_forwards_end_to_end() -> None:
    with Network(line(7)) as net:
        h1, h7 = net["h1"], net["h7"]
        assert h7.ip is not None
        out, _, code = h1.pexec(["ping", "-c1", "-W2", "10.0.6.2"])
        assert code == 0, out
        assert net.ping_all() == 0.0


def test_tree_and_torus_with_stp() -> None:
    with Network(tree(2, 2)) as net:
        assert net.ping_all() == 0.0
    with Network(torus(3, 3)) as net:
        assert net.ping_all() == 0.0


def test_nothing_lands_in_host_namespace() -> None:
    before = set(os.listdir("/sys/class/net"))
    with Network(linear(4)):
        assert set(os.listdir("/sys/class/net")) == before


def test_bad_input_creates_nothing() -> None:
    spec = linear(2)
    spec.add_link(LinkSpec("h1", "nosuchnode"))
    with pytest.raises(ValidationError, match="nosuchnode"):
        Network(spec)
    spec = linear(2)
    spec.links[0].params = LinkParams(delay=0.01)
    spec.links[0].backend = "tc"
    net = Network(spec)
    if "netem" in net.kernel_caps():
        pytest.skip("this kernel has sch_netem: tc can delay")
    with pytest.raises(UnsupportedError, match="sch_netem.*engine"):
        net.start()
    assert not net.is_open


def test_rate_limit_is_applied_by_htb() -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    spec.add_link(LinkSpec("h1", "h2", params=LinkParams(bw=20e6)))
    with Network(spec) as net:
        out, _, code = net["h1"].pexec(["tc", "-s", "class", "show", "dev", "h1-eth0"])
        assert code == 0
        assert "rate 20Mbit" in out


def test_failed_setup_rolls_back() -> None:
    spec = linear(3)
    net = Network(spec)
    # Make the third node's namespace name collide so creation fails midway.
    net.open()
    clash = f"/run/netns/fn{net.run_id}-h3"
    open(clash, "w").close()
    try:
        with pytest.raises(Exception, match="already exists"):
            net.build()
    finally:
        os.unlink(clash)
    assert not net.is_open


def _script(body: str) -> list[str]:
    code = f"import sys; sys.path.insert(0, {SRC!r})\n" + textwrap.dedent(body)
    return [sys.executable, "-c", code]


def test_sigterm_tears_down() -> None:
    proc = subprocess.Popen(
        _script("""
        import time
        from fidelnet import Network
        from fidelnet.topology import linear
        net = Network(linear(3)).start()
        net["h1"].cmd("sleep 100 &")
        print("ready", flush=True)
        time.sleep(60)
    """),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 128 + signal.SIGTERM
    proc.stdout.close()


def test_clean_removes_stale_run_only() -> None:
    # A crashed run: the owner exits without teardown.
    crashed = subprocess.run(
        _script("""
        import os
        from fidelnet import Network
        from fidelnet.topology import linear
        net = Network(linear(2)).start()
        net["h1"].cmd("sleep 100 &")
        print(net.run_id, flush=True)
        os._exit(0)
    """),
        capture_output=True,
        text=True,
        timeout=30,
    )
    stale_id = crashed.stdout.strip()
    assert stale_id, crashed.stderr
    assert any(r.run_id == stale_id for r in list_runs())
    # A live run of our own must survive `fidelnet clean`.
    with Network(linear(2)) as live:
        res = subprocess.run(
            [sys.executable, "-m", "fidelnet", "clean"],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": SRC},
            timeout=60,
        )
        assert res.returncode == 0, res.stderr
        assert f"run {stale_id}" in res.stdout
        assert not any(r.run_id == stale_id for r in list_runs())
        assert not any(n.startswith(f"fn{stale_id}") for n in os.listdir("/run/netns"))
        assert live.ping_all() == 0.0


def test_two_runs_coexist() -> None:
    with Network(linear(2)) as a, Network(linear(2)) as b:
        assert a.run_id != b.run_id
        assert a.ping_all() == 0.0 and b.ping_all() == 0.0
        assert a["h1"].ip == b["h1"].ip  # same addresses, separate namespaces


def test_stop_is_idempotent() -> None:
    net = Network(linear(5)).start()
    net.stop()
    net.stop()
    assert not net.is_open


def test_switches_forward_ipv6_with_no_address_of_their_own() -> None:
    # The fabric namespace has IPv6 off (docs/scale.md): bridges and their ports hold
    # no address or route, and still carry IPv6 between hosts, global and link-local.
    with Network(linear(3)) as net:
        h1, h3 = net["h1"], net["h3"]
        h1.cmd("ip -6 addr add fd00::1/64 dev h1-eth0 nodad")
        h3.cmd("ip -6 addr add fd00::3/64 dev h3-eth0 nodad")
        out = h1.cmd("ping -6 -n -c2 -W2 -w10 fd00::3")
        assert " 0% packet loss" in out, out
        # The link-local address leaves its tentative state after DAD.
        link_local = ""
        for _ in range(50):
            fields = h3.cmd("ip -6 -o addr show dev h3-eth0 scope link -tentative").split()
            if len(fields) > 3:
                link_local = fields[3].split("/")[0]
                break
            h3.cmd("sleep 0.1")
        assert link_local.startswith("fe80::"), link_local
        out = h1.cmd(f"ping -6 -n -c2 -W2 -w10 {link_local}%h1-eth0")
        assert " 0% packet loss" in out, out
        fabric = net.switches[0]
        assert fabric.cmd("ip -6 -o addr show").strip() == ""
        assert fabric.cmd("ip -6 -o route show table all").strip() == ""
