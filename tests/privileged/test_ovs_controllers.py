"""OpenFlow controllers of the run's OVS switches (issue 16): the run's own reference
controller, a controller of the user's on the host (os-ken with an OpenFlow 1.3
learning-switch app, reached through the relay), a controller inside a node, per-switch
controllers, the switches' OpenFlow options, and an unreachable controller named in the
error within its timeout."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _mnrun import assert_no_trace, run_to_end

from fidelnet import Network, openflow
from fidelnet.errors import KernelError
from fidelnet.topology import ControllerSpec, linear
from fidelnet.topology.spec import OpenFlowSpec

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

DATA = Path(__file__).parent / "data"
OSKEN = Path(sys.executable).with_name("osken-manager")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the controller exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    pytest.fail(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


def test_ref_remote_and_node_controllers_with_openflow_options() -> None:
    spec = linear(3)
    spec.datapath = "ovs"
    spec.nodes["s1"].openflow = OpenFlowSpec(protocols=("OpenFlow10", "OpenFlow13"), dpid="a1")
    spec.nodes["s2"].openflow = OpenFlowSpec(dpid="00:00:00:00:00:00:00:b2", controllers=("c0",))
    # c1 is the host's loopback at c0's port: c0 itself, as on Mininet's one namespace.
    spec.controllers = [ControllerSpec("c0", "ref", 6653), ControllerSpec("c1", "remote", 6653)]
    with Network(spec) as net:  # start() waits until every switch is connected
        ovs = net.datapaths["ovs"].daemons  # type: ignore[attr-defined]
        assert ovs.vsctl("get", "bridge", "s1", "other_config:datapath-id").strip('"\n') == (
            "00000000000000a1"
        )
        assert ovs.vsctl("get", "bridge", "s2", "other_config:datapath-id").strip('"\n') == (
            "00000000000000b2"
        )
        assert ovs.vsctl("get", "bridge", "s1", "protocols").strip() == "[OpenFlow10, OpenFlow13]"
        assert ovs.vsctl("get", "bridge", "s3", "fail_mode").strip() == "secure"
        assert ovs.vsctl("get-controller", "s1").split() == ["tcp:127.0.0.1:6653"]
        assert net.ping_all() == 0.0
        # The ref controller (a learning switch) installed the flows.
        flows = ovs.ofctl("dump-flows", "s3")
        assert "idle_timeout=60" in flows and "actions=output:" in flows
        # A controller inside h3, reached from h3's namespace at h3's address.
        port = 6700
        # OpenFlow 1.0: after del-flows a table miss still goes to the controller.
        proc = net["h3"].popen(["ovs-testcontroller", "-O", "OpenFlow10", f"ptcp:{port}"])
        try:
            ip = net["h3"].intf_list()[0].ip
            openflow.add_controller(net, ControllerSpec("c2", "remote", port, ip=ip, node="h3"))
            openflow.set_controllers(net, "s1", ["c2"])
            assert [c.name for c in openflow.switch_controllers(net, "s1")] == ["c2"]
            start = time.monotonic()
            while not net["s1"].forwarding():
                assert time.monotonic() - start < 10, "s1 did not connect to c2 in h3"
                time.sleep(0.05)
            ovs.ofctl("del-flows", "s1")
            assert net.ping_all() == 0.0
            assert "idle_timeout=60" in ovs.ofctl("dump-flows", "s1")  # c2's flows now
        finally:
            proc.terminate()
            proc.wait()
        with pytest.raises(Exception, match="unknown controller"):
            openflow.set_controllers(net, "s1", ["c9"])


def test_unreachable_controller_is_named_within_the_timeout() -> None:
    spec = linear(2)
    spec.datapath = "ovs"
    port = _free_port()
    spec.controllers = [ControllerSpec("c9", "remote", port, ip="127.0.0.1")]
    net = Network(spec)
    net.build()
    try:
        start = time.monotonic()
        with pytest.raises(KernelError) as err:
            net.wait_stp(timeout=2)
        assert time.monotonic() - start < 10
        assert f"c9 at 127.0.0.1:{port}" in str(err.value)
        assert "['s1', 's2']" in str(err.value)
    finally:
        net.stop()


def test_osken_learning_switch_controls_linear4_over_openflow13() -> None:
    """The issue's acceptance: os-ken with an OpenFlow 1.3 learning switch, started
    by the test on the host's loopback, controls `fidelnet mn --topo linear,4`."""
    assert OSKEN.exists(), "make install installs os-ken (dev extras)"
    port = _free_port()
    ctl = subprocess.Popen(
        [str(OSKEN), "--ofp-tcp-listen-port", str(port), str(DATA / "learning_switch_13.py")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        _wait_listening(port, ctl)
        argv = [
            sys.executable,
            "-m",
            "fidelnet",
            "mn",
            "--topo",
            "linear,4",
            "--switch",
            "ovs,protocols=OpenFlow13",
            "--controller",
            f"remote,ip=127.0.0.1,port={port}",
            "-w",
        ]
        stdin = "pingall\nsh ovs-ofctl -O OpenFlow13 dump-flows s2\nexit\n"
        code, out = run_to_end(argv, stdin, 120, "fidelnet mn with os-ken")
    finally:
        os.killpg(ctl.pid, signal.SIGTERM)
        ctl.wait(10)
    assert code == 0, out
    assert "*** Waiting for switches to connect\ns1 s2 s3 s4" in out, out
    assert "*** Results: 0% dropped (12/12 received)" in out, out
    flows = re.findall(r"priority=1,in_port=\S+,dl_src=\S+,dl_dst=\S+ actions=output:\d+", out)
    assert len(flows) >= 4, out  # the app's flows, seen with ovs-ofctl from the CLI
    assert "OFPST_FLOW reply (OF1.3)" in out
    assert_no_trace([])


def test_tcp_crosses_the_userspace_datapath_at_the_link_rate() -> None:
    """TCP through OVS bridges: on the userspace datapath, segmentation offload is on
    (OVS's userspace TSO), else the hosts' 64 KB segments are dropped at the next port
    and no TCP connection moves data."""
    from fidelnet.measure.tcp import tcp
    from fidelnet.topology.spec import LinkParams

    spec = linear(2)
    spec.datapath = "ovs"
    for link in spec.links:
        link.params = LinkParams(bw=20e6)
    with Network(spec) as net:
        res = tcp(net, [("h1", "h2")], duration=3)
    goodput = res.flows[0].goodput_bps / 1e6
    assert 15.0 < goodput <= 20.0, goodput
