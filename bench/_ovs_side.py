"""One side of bench/ovs_switches.py: a Mininet script, run by stock Mininet
(``/usr/bin/python3``, Debian's ``mininet``) or by fidelnet (the venv's Python with
``fidelnet compat-path`` first on ``sys.path``): the same code on both sides.

    python _ovs_side.py --topo linear,100 --mode standalone

Modes: ``standalone`` (``OVSBridge``: OVS learning bridges, no controller) and
``ref`` (``OVSSwitch`` with ``OVSController``, Open vSwitch's test controller).
Mininet's switches use OVS's userspace datapath (``datapath='user'``, as fidelnet's
do here: this kernel has no ``openvswitch`` module); for the peer this script starts
a private ``ovsdb-server`` and ``ovs-vswitchd`` in a temporary directory (the tools
find them through ``OVS_RUNDIR``) and stops them at the end, so the machine's own
Open vSwitch is never used or started.

Prints one JSON line: ``up`` (build, start and wait until every switch is
connected), ``reach`` (the first host pings the last and back: the network forwards
end to end), ``pingall`` (seconds) and its loss for topologies of at most 16 hosts
(Mininet's pingall pings one pair at a time: on ``linear,100`` through 100 userspace
bridges it ran for over 20 minutes here), ``stop``, and the side.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path


def _private_ovs() -> tuple[str, list[subprocess.Popen[bytes]]]:
    d = tempfile.mkdtemp(prefix="fidelnet-peer-ovs-")
    env = {"OVS_RUNDIR": d, "OVS_DBDIR": d, "OVS_LOGDIR": d}
    os.environ.update(env)
    conf = os.path.join(d, "conf.db")
    subprocess.run(
        ["ovsdb-tool", "create", conf, "/usr/share/openvswitch/vswitch.ovsschema"], check=True
    )
    db = os.path.join(d, "db.sock")
    procs = [
        subprocess.Popen(
            ["ovsdb-server", conf, f"--remote=punix:{db}", "--no-chdir",
             f"--pidfile={d}/ovsdb-server.pid", f"--unixctl={d}/ovsdb-server.ctl"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    ]  # fmt: skip
    while not os.path.exists(db):
        time.sleep(0.01)
    subprocess.run(["ovs-vsctl", f"--db=unix:{db}", "--no-wait", "init"], check=True)
    procs.append(
        subprocess.Popen(
            ["ovs-vswitchd", f"unix:{db}", "--no-chdir", f"--pidfile={d}/ovs-vswitchd.pid",
             f"--unixctl={d}/ovs-vswitchd.ctl", f"--log-file={d}/ovs-vswitchd.log"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    )  # fmt: skip
    while not os.path.exists(os.path.join(d, "ovs-vswitchd.ctl")):
        time.sleep(0.01)
    return d, procs


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--topo", default="linear,10")
    ap.add_argument("--mode", choices=["standalone", "ref"], default="standalone")
    args = ap.parse_args()
    import mininet

    fidelnet = getattr(mininet, "FIDELNET", False)
    private = None
    saved: dict[str, str] = {}
    if not fidelnet:
        # Mininet() raises TCP buffer sizes and other limits for the whole machine,
        # for good (fixLimits): kept here and written back at the end.
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src/fidelnet/bench"))
        import peer_limits

        saved = peer_limits.snapshot()
        private = _private_ovs()
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import OVSBridge, OVSController, OVSSwitch
    from mininet.topo import LinearTopo
    from mininet.topolib import TreeTopo

    setLogLevel("error")
    kind, *nums = args.topo.split(",")
    n = [int(x) for x in nums]
    topo = LinearTopo(k=n[0]) if kind == "linear" else TreeTopo(depth=n[0], fanout=n[1])
    if args.mode == "standalone":
        switch, controller = partial(OVSBridge, datapath="user"), None
    else:
        switch, controller = partial(OVSSwitch, datapath="user"), OVSController
    out: dict[str, object] = {"side": "fidelnet" if fidelnet else "mininet", "topo": args.topo}
    net = None
    try:
        t0 = time.perf_counter()
        net = Mininet(topo=topo, switch=switch, controller=controller, waitConnected=False)
        net.start()
        connected = net.waitConnected(timeout=120)
        out["up"] = time.perf_counter() - t0
        out["connected"] = bool(connected)
        t1 = time.perf_counter()
        out["reach_loss"] = net.ping([net.hosts[0], net.hosts[-1]], timeout=5)
        out["reach"] = time.perf_counter() - t1
        if len(net.hosts) <= 16:
            t1 = time.perf_counter()
            out["loss"] = net.pingAll(timeout=2)
            out["pingall"] = time.perf_counter() - t1
        t2 = time.perf_counter()
        net.stop()
        net = None
        out["stop"] = time.perf_counter() - t2
    finally:
        if net is not None:
            net.stop()
        if private is not None:
            d, procs = private
            for p in reversed(procs):
                p.terminate()
                p.wait(10)
            shutil.rmtree(d, ignore_errors=True)
        if saved:
            peer_limits.restore(saved)
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
