#!/usr/bin/python3
"""The peer side of the build/teardown benchmark: stock Mininet.

Run it with the Python that has Debian's ``mininet`` package (``/usr/bin/python3``),
as root, with ``brctl`` installed (package ``bridge-utils``)::

    /usr/bin/python3 bench/peer_mininet.py --topo linear,10
    /usr/bin/python3 bench/peer_mininet.py --topo line,50 --json

Topologies (``--topo``):

- ``linear,K`` and ``tree,D,F``: Mininet's ``LinearTopo(k=K)`` and
  ``TreeTopo(depth=D, fanout=F)`` with ``LinuxBridge`` switches and no controller,
  as ``mn --switch lxbr --controller none`` builds them.
- ``single,N``: ``SingleSwitchTopo(k=N)``.
- ``line,N``: a routed line of N ``Node``-based routers (``net.ipv4.ip_forward=1``),
  point-to-point veth links (``rK-eth0`` to the left, ``rK-eth1`` to the right)
  with explicit /24 addresses and no switches, plus the
  static routes that make every subnet reachable from every router (one
  ``ip -batch`` per router), the Mininet counterpart of ``fidelnet.topology.line``.

Build is ``net.build()`` plus ``net.start()``; teardown is ``net.stop()``; both
timed with ``time.perf_counter``. Memory per idle node is the drop in
``MemAvailable`` from just before the build to the idle network after a settle,
divided by the node count; the resident set sizes of the processes the run started
(Mininet's per-node shells) are reported beside it.

The script needs a clean start: it refuses to run if interfaces that the topology
would create already exist in the host namespace (a crashed earlier run) and says
so, instead of running ``mn -c`` before it. After ``net.stop()`` it compares the
host's interfaces and the processes it started with what was there before; if
Mininet left something of this run behind, it removes exactly those objects (by
interface name and by pid) and reports both the leak and the cleanup. It never
runs ``mn -c``: that kills every ``ping`` and ``mininet:`` process and deletes
every ``*-ethN`` interface on the machine, whoever owns them.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1] / "src" / "fidelnet" / "bench"))
import _benchlib as bl
import peer_limits

try:
    from mininet.log import setLogLevel
    from mininet.net import Mininet
    from mininet.node import Node
    from mininet.nodelib import LinuxBridge
    from mininet.topo import LinearTopo, SingleSwitchTopo, Topo
    from mininet.topolib import TorusTopo, TreeTopo
except ImportError as exc:  # pragma: no cover - depends on the machine
    sys.exit(
        f"peer_mininet: cannot import mininet ({exc}); run with /usr/bin/python3 "
        "and install Debian's 'mininet' package (make bench does)"
    )


class LinuxRouter(Node):
    """A node that forwards IPv4 by Linux routing; ``routes`` is a list of
    ``(prefix, via)`` pairs installed with one ``ip -batch`` run."""

    def config(self, **params: Any) -> dict[str, Any]:
        result = super().config(**params)
        self.cmd("sysctl -q -w net.ipv4.ip_forward=1")
        routes = params.get("routes") or []
        if routes:
            batch = "".join(f"route add {prefix} via {via}\\n" for prefix, via in routes)
            self.cmd(f"printf '{batch}' | ip -batch -")
        return result


def _subnet(i: int) -> str:
    """The /24 of link ``i`` (0-based) as its first three octets."""
    return f"10.{(i >> 8) & 0xFF}.{i & 0xFF}"


class RoutedLineTopo(Topo):
    """r1 - r2 - ... - rN; link i joins r(i+1) and r(i+2) in 10.x.y.0/24, the left
    end taking .1 and the right end .2."""

    def build(self, n: int = 50) -> None:  # type: ignore[override]
        links = n - 1
        for k in range(1, n + 1):  # router k sits between link k-2 (left) and k-1 (right)
            routes = []
            for i in range(links):
                if i < k - 2:  # a subnet to the left: via the left neighbour
                    routes.append((f"{_subnet(i)}.0/24", f"{_subnet(k - 2)}.1"))
                elif i > k - 1:  # a subnet to the right: via the right neighbour
                    routes.append((f"{_subnet(i)}.0/24", f"{_subnet(k - 1)}.2"))
            # ip=None: keep Mininet from putting its own 10.0.0.k/8 on the first interface
            self.addHost(f"r{k}", cls=LinuxRouter, ip=None, routes=routes)
        for i in range(links):
            left, right = f"r{i + 1}", f"r{i + 2}"
            self.addLink(
                left,
                right,
                params1={"ip": f"{_subnet(i)}.1/24"},
                params2={"ip": f"{_subnet(i)}.2/24"},
            )


class FatTreeTopo(Topo):
    """A k-ary fat tree with the names, order and ports of ``fidelnet.topology.fattree``
    (Mininet has none of its own); every switch runs STP, as the tree has loops."""

    def build(self, k: int = 4) -> None:  # type: ignore[override]
        half = k // 2
        cores = [self.addSwitch(f"c{c}", stp=True) for c in range(1, half * half + 1)]
        number = 1
        for pod in range(1, k + 1):
            aggs = [self.addSwitch(f"a{pod}_{i}", stp=True) for i in range(1, half + 1)]
            edges = [self.addSwitch(f"e{pod}_{i}", stp=True) for i in range(1, half + 1)]
            for edge in edges:
                for _ in range(half):
                    self.addLink(edge, self.addHost(f"h{number}"))
                    number += 1
            for agg in aggs:
                for edge in edges:
                    self.addLink(agg, edge)
            for i, agg in enumerate(aggs):
                for core in cores[i * half : (i + 1) * half]:
                    self.addLink(core, agg)


def make_topo(spec: str) -> Topo:
    name, *args = spec.split(",")
    try:
        nums = [int(a) for a in args]
    except ValueError:
        sys.exit(f"peer_mininet: --topo {spec!r}: arguments must be integers")
    shapes = {
        "linear": (1, lambda k: LinearTopo(k=k)),
        "single": (1, lambda k: SingleSwitchTopo(k=k)),
        "tree": (2, lambda d, f: TreeTopo(depth=d, fanout=f)),
        "line": (1, lambda n: RoutedLineTopo(n=n)),
        "torus": (2, lambda x, y: TorusTopo(x, y)),
        "fattree": (1, lambda k: FatTreeTopo(k=k)),
    }
    if name not in shapes or len(nums) != shapes[name][0]:
        sys.exit(
            f"peer_mininet: --topo {spec!r} is not supported; "
            "valid: linear,K single,N tree,DEPTH,FANOUT torus,X,Y fattree,K line,N"
        )
    return shapes[name][1](*nums)


def expected_root_links(topo: Topo) -> set[str]:
    """Interface names Mininet creates in the host namespace for ``topo``: the
    bridges and the switch ends of links (hosts live in their own namespaces)."""
    switches = set(topo.switches())
    names = set(switches)
    for a, b, info in topo.links(withInfo=True):
        for end, port in ((a, info["port1"]), (b, info["port2"])):
            if end in switches:
                names.add(f"{end}-eth{port}")
    return names


def mininet_version() -> str:
    try:
        from mininet.net import VERSION

        return str(VERSION)
    except ImportError:
        return "unknown"


def verify(net: Mininet, spec: str) -> float:
    """Percent of pings lost: end to end along a routed line, all pairs otherwise."""
    if spec.startswith("line,"):
        first, last = net.hosts[0], net.hosts[-1]
        sent = 0
        lost = 0
        for target in (last, net.hosts[len(net.hosts) // 2]):
            for intf in target.intfList():
                if intf.IP():
                    sent += 1
                    out = first.cmd(f"ping -c1 -W2 {intf.IP()}")
                    lost += 0 if " 0% packet loss" in out else 1
        return 100.0 * lost / max(sent, 1)
    return float(net.pingAll())


def clean_leftovers(links: list[str], procs: list[str]) -> list[str]:
    """Remove exactly what this run's Mininet left behind (interfaces by name,
    processes by pid), never by pattern: ``mn -c`` would ``killall ping``, ``pkill -f
    mininet:`` and delete every ``*-ethN`` on the machine, other people's included."""
    done = []
    for pid_comm in procs:
        pid = int(pid_comm.split(":", 1)[0])
        try:
            os.kill(pid, signal.SIGKILL)
            done.append(f"killed {pid_comm}")
        except ProcessLookupError:
            pass
    for name in links:
        rc = subprocess.run(["ip", "link", "del", "dev", name], capture_output=True).returncode
        if rc == 0:
            done.append(f"deleted {name}")
    print(f"peer_mininet: Mininet left objects behind; {', '.join(done)}", file=sys.stderr)
    return done


def run(spec: str, settle: float, check: bool = False) -> dict[str, Any]:
    topo = make_topo(spec)
    result: dict[str, Any] = {
        "side": "mininet",
        "topo": spec,
        "mininet_version": mininet_version(),
        "python": sys.version.split()[0],
        "kernel": bl.kernel_release(),
    }
    links_before = bl.root_links()
    expected = expected_root_links(topo)
    clash = sorted(expected & links_before)
    if clash:
        result["error"] = (
            f"host namespace already holds {len(clash)} interface(s) this topology "
            f"would create ({', '.join(clash[:5])}{' ...' if len(clash) > 5 else ''}): "
            "left over from a crashed run? Inspect them and delete the stale ones "
            "(ip link del DEV)"
        )
        return result
    procs_before = bl.snapshot_pids()
    shells = {f"mininet:{name}" for name in topo.nodes()}

    def ours(p: bl.Proc) -> bool:
        """An orphan is ours if it is one of this run's node shells."""
        return any(arg in shells for arg in bl.cmdline(p.pid))

    # Loops (torus, fat tree) need the bridges' STP, as `mn --switch lxbr,stp=1`; the
    # build then includes waiting for it to converge, as fidelnet's start() does.
    stp = spec.split(",")[0] in ("torus", "fattree")
    switch = partial(LinuxBridge, stp=True) if stp else LinuxBridge
    # Mininet raises machine-wide sysctls (fixLimits) and never lowers them again.
    saved_limits = peer_limits.snapshot()
    net = Mininet(topo=topo, switch=switch, controller=None, build=False)
    result["nodes"] = len(topo.nodes())
    result["hosts"] = len(topo.hosts())
    result["switches"] = len(topo.switches())
    result["links"] = len(topo.links())
    mem_before = bl.idle_settle(0.1, **bl.sampling(settle))
    started = False
    try:
        t0 = time.perf_counter()
        net.build()
        net.start()
        if stp:
            net.waitConnected()
        result["build_s"] = time.perf_counter() - t0
        started = True
        mem_idle = bl.idle_settle(settle, **bl.sampling(settle))
        procs = bl.started_processes(procs_before)
        result["processes"] = bl.process_summary(procs)
        result["root_links_added"] = len(bl.root_links() - links_before)
        result.update(bl.memory_fields(mem_before, mem_idle, result["nodes"]))
        if check:  # after the idle measurement, so ARP caches etc. do not count
            result["check_loss_pct"] = verify(net, spec)
    finally:
        t0 = time.perf_counter()
        net.stop()
        result["sysctls_restored"] = peer_limits.restore(saved_limits)
        if started:
            result["teardown_s"] = time.perf_counter() - t0
            # The kernel frees the hosts' namespaces after stop() returns; measured as
            # fidelnet's side measures it (bench/_benchlib.wait_kernel_cleanup).
            result["cleanup_s"] = bl.wait_kernel_cleanup()
    result["mem_available_after_teardown_kib"] = bl.idle_settle(
        min(settle, 0.5), **bl.sampling(settle)
    )[0]

    leaks = {
        # Mininet puts nothing but bridges and switch ports in the host namespace and
        # uses no named namespaces; anything else that appeared meanwhile is not ours.
        "root_links": sorted((bl.root_links() - links_before) & expected),
        "processes": [f"{p.pid}:{p.comm}" for p in bl.started_processes(procs_before, ours)],
    }
    result["leaks"] = {k: v for k, v in leaks.items() if v}
    if result["leaks"]:
        result["cleaned"] = clean_leftovers(leaks["root_links"], leaks["processes"])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topo", required=True, help="linear,K | single,N | tree,D,F | line,N")
    parser.add_argument("--settle", type=float, default=2.0, help="idle seconds before memory")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    parser.add_argument(
        "--check", action="store_true", help="ping through the network before teardown"
    )
    parser.add_argument("--loglevel", default="warning", help="Mininet log level")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("peer_mininet: Mininet needs root")
    setLogLevel(args.loglevel)
    result = run(args.topo, args.settle, args.check)
    bl.emit(result, args.json)
    return 1 if "error" in result else 0


if __name__ == "__main__":
    sys.exit(main())
