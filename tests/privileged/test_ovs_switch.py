"""OVS switches on the run's own Open vSwitch (issue 16, first part): the run starts
its own ovsdb-server and ovs-vswitchd in its fabric namespace, its bridges forward
(OVS's userspace datapath where the kernel module is absent), and nothing of it is
left after a stop, or after the owner is killed and `fidelnet clean` runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.kernel import ovs
from fidelnet.kernel.state import STATE_DIR
from fidelnet.topology import ControllerSpec, linear

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

CHILD = """
import sys, time
from fidelnet import Network
from fidelnet.topology import ControllerSpec, linear
spec = linear(2)
spec.datapath = "ovs"
with Network(spec) as net:
    print(net.run_id, net.datapaths["ovs"].daemons.dir, flush=True)
    time.sleep(600)
"""


def _pids_in(directory: str) -> list[int]:
    pids = []
    for name in ("ovsdb-server.pid", "ovs-vswitchd.pid"):
        path = Path(directory) / name
        if path.exists():
            pids.append(int(path.read_text().strip()))
    return pids


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] != "Z"


def test_ovs_bridges_forward_and_go_with_the_run() -> None:
    assert ovs.missing() is None  # make test installs openvswitch-switch
    system_db = Path("/var/run/openvswitch/db.sock").exists()
    spec = linear(3)
    spec.datapath = "ovs"
    with Network(spec) as net:
        daemons = net.datapaths["ovs"].daemons  # type: ignore[attr-defined]
        assert daemons is not None and daemons.dir.startswith(STATE_DIR)
        assert sorted(daemons.vsctl("list-br").split()) == ["s1", "s2", "s3"]
        assert "s1-eth1" in daemons.vsctl("list-ports", "s1").split()
        kind = daemons.vsctl("get", "bridge", "s1", "datapath_type").strip()
        assert kind == ovs.datapath_type()
        assert net.ping_all() == 0.0
        # The OVS tools typed in a node's shell reach this run's OVS, not the machine's.
        assert net["h1"].cmd("ovs-vsctl list-br").split() == ["s1", "s2", "s3"]
        assert "actions=NORMAL" in net["h2"].cmd("ovs-ofctl dump-flows s2")
        assert net["s1"].datapath_stats()["datapath"] == "ovs"
        pids = _pids_in(daemons.dir)
        assert len(pids) == 2 and all(_alive(p) for p in pids)
        directory = daemons.dir
    assert not os.path.exists(directory)
    assert not any(_alive(p) for p in pids)
    # The machine's own OVS was never started or touched.
    assert Path("/var/run/openvswitch/db.sock").exists() == system_db


def test_a_killed_runs_ovs_is_removed_by_clean() -> None:
    with subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            run_id, directory = proc.stdout.readline().split()
            pids = _pids_in(directory)
            assert len(pids) == 2
        finally:
            proc.kill()
            proc.wait()
    out = subprocess.run(
        [str(Path(sys.executable).with_name("fidelnet")), "clean"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"run {run_id}" in out
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, pids
        time.sleep(0.05)
    assert not os.path.exists(directory)


def test_switches_connect_to_the_runs_controller_and_forward_through_it() -> None:
    spec = linear(3)
    spec.datapath = "ovs"
    spec.controllers = [ControllerSpec("c0")]
    with Network(spec) as net:  # returns once every bridge is connected
        daemons = net.datapaths["ovs"].daemons  # type: ignore[attr-defined]
        assert daemons.vsctl("get-fail-mode", "s2").strip() == "secure"
        assert daemons.vsctl("get-controller", "s2").split() == ["tcp:127.0.0.1:6653"]
        assert all(net[s].forwarding() for s in ("s1", "s2", "s3"))
        assert net.ping_all() == 0.0
        # The controller (ovs-testcontroller, a learning switch) put its flows in.
        flows = net["h1"].cmd("ovs-ofctl dump-flows s2")
        assert "dl_dst=" in flows, flows
        controller = int((Path(daemons.dir) / "controller-c0.pid").read_text().strip())
        pids = [*_pids_in(daemons.dir), controller]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
    assert not any(_alive(p) for p in pids)
