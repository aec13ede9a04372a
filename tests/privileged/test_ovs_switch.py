"""OVS switches on the run's own Open vSwitch (issue 16, first part): the run starts
its own ovsdb-server and ovs-vswitchd in its fabric namespace, its bridges forward
(OVS's userspace datapath where the kernel module is absent), and nothing of it is
left after a stop, or after the owner is killed and `fidelnet clean` runs."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.kernel import ovs
from fidelnet.kernel.state import STATE_DIR
from fidelnet.topology import ControllerSpec, linear
from fidelnet.topology.spec import OpenFlowSpec

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
spec.controllers = [ControllerSpec("c0")]
with Network(spec) as net:
    print(net.run_id, net.datapaths["ovs"].daemons.dir, flush=True)
    time.sleep(600)
"""


class UsersOvs:
    """A stand-in for the machine's own Open vSwitch, with a bridge the user made:
    its own database and daemons in a temporary directory, ovs-vswitchd in a network
    namespace of its own (unshare), so nothing of it reaches the host's namespace."""

    def __init__(self, d: Path) -> None:
        self.dir = d
        self.env = {**os.environ, "OVS_RUNDIR": str(d), "OVS_DBDIR": str(d), "OVS_LOGDIR": str(d)}
        self.db = d / "db.sock"
        conf = d / "conf.db"
        schema = "/usr/share/openvswitch/vswitch.ovsschema"
        subprocess.run(["ovsdb-tool", "create", str(conf), schema], check=True, env=self.env)
        self.procs = [
            subprocess.Popen(
                ["ovsdb-server", str(conf), f"--remote=punix:{self.db}", "--no-chdir",
                 f"--pidfile={d}/ovsdb-server.pid", f"--unixctl={d}/ovsdb-server.ctl"],
                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        ]  # fmt: skip
        self._wait(self.db)
        self.vsctl("--no-wait", "init")
        self.procs.append(
            subprocess.Popen(
                ["unshare", "--net", "--", "ovs-vswitchd", f"unix:{self.db}", "--no-chdir",
                 f"--pidfile={d}/ovs-vswitchd.pid", f"--unixctl={d}/ovs-vswitchd.ctl",
                 f"--log-file={d}/ovs-vswitchd.log"],
                env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
        self._wait(d / "ovs-vswitchd.ctl")
        self.vsctl("add-br", "userbr", "--", "set", "bridge", "userbr", "datapath_type=netdev")

    @staticmethod
    def _wait(path: Path) -> None:
        deadline = time.monotonic() + 10
        while not path.exists():
            assert time.monotonic() < deadline, path
            time.sleep(0.01)

    def vsctl(self, *args: str) -> str:
        argv = ["ovs-vsctl", f"--db=unix:{self.db}", "--timeout=5", *args]
        return subprocess.run(argv, env=self.env, capture_output=True, text=True,
                              check=True).stdout  # fmt: skip

    def stop(self) -> None:
        for p in reversed(self.procs):  # our own children, by their PIDs
            p.kill()
            p.wait()


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


def test_a_killed_runs_ovs_is_removed_by_clean(tmp_path: Path) -> None:
    """kill -9 of a run with OVS switches and a controller, then `fidelnet clean`: no
    daemon, database or controller of that run is left, and a bridge the user made
    in another Open vSwitch (a stand-in for the machine's own) stays, its daemons
    running."""
    users = UsersOvs(tmp_path)
    try:
        with subprocess.Popen(
            [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True
        ) as proc:
            try:
                assert proc.stdout is not None
                run_id, directory = proc.stdout.readline().split()
                controller = int((Path(directory) / "controller-c0.pid").read_text().strip())
                pids = [*_pids_in(directory), controller]
                assert len(pids) == 3 and all(_alive(p) for p in pids)
            finally:
                proc.kill()
                proc.wait()
        assert all(_alive(p) for p in pids)  # orphans until clean
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
        # The user's Open vSwitch: both daemons alive, the bridge still there.
        assert all(p.poll() is None for p in users.procs)
        assert users.vsctl("list-br").split() == ["userbr"]
    finally:
        users.stop()


def test_switches_connect_to_the_runs_controller_and_forward_through_it() -> None:
    spec = linear(3)
    spec.datapath = "ovs"
    spec.controllers = [ControllerSpec("c0")]
    # s3 with Mininet's inband, reconnectms and datapath='user'.
    s3 = OpenFlowSpec(in_band=True, reconnect_ms=2000, datapath_type="user")
    spec.nodes["s3"] = replace(spec.nodes["s3"], openflow=s3)
    with Network(spec) as net:  # returns once every bridge is connected
        daemons = net.datapaths["ovs"].daemons  # type: ignore[attr-defined]
        assert daemons.vsctl("get-fail-mode", "s2").strip() == "secure"
        assert daemons.vsctl("get-controller", "s2").split() == ["tcp:127.0.0.1:6653"]
        assert daemons.vsctl("get-controller", "s3").split() == ["tcp:127.0.0.1:6653"]
        backoff = daemons.vsctl("--columns=max_backoff", "--format=csv", "--no-headings",
                                "list", "controller").split()  # fmt: skip
        assert sorted(backoff) == ["2000", "[]", "[]"], backoff
        band = {s: daemons.vsctl("get", "bridge", s, "other_config") for s in ("s2", "s3")}
        assert "disable-in-band" in band["s2"] and "disable-in-band" not in band["s3"]
        assert daemons.vsctl("get", "bridge", "s3", "datapath_type").strip() == "netdev"
        assert all(net[s].forwarding() for s in ("s1", "s2", "s3"))
        assert net.ping_all() == 0.0
        # The controller (ovs-testcontroller, a learning switch) put its flows in.
        flows = net["h1"].cmd("ovs-ofctl dump-flows s2")
        assert "dl_dst=" in flows, flows
        controller = int((Path(daemons.dir) / "controller-c0.pid").read_text().strip())
        pids = [*_pids_in(daemons.dir), controller]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
    assert not any(_alive(p) for p in pids)
