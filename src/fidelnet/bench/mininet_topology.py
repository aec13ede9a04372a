#!/usr/bin/python3
"""Stock Mininet's side of ``fidelnet bench hvnet``: any routed topology of plain
nodes joined by veth links, built by Debian's ``mininet`` package from a plan that
fidelnet computed, held open while fidelnet measures through it.

Run by fidelnet with the Python that has Mininet (``/usr/bin/python3``), as root;
not imported by fidelnet. The plan is the first line of stdin, JSON::

    {"nodes": ["h1", ...], "routers": ["h1", ...],
     "links": [["h1", "h2", "h1-eth0", "h2-eth0", "10.0.1.1/24", "10.0.1.2/24"], ...],
     "commands": {"h1": [["ip", "route", "replace", ...], ...], ...}}

Optional: ``"switches": ["s1", ...]`` are Linux bridges (``LinuxBridge``, no STP),
and a link's seventh element ``{"bw": MBIT}`` makes it a ``TCLink`` of that rate
(Mininet's 1 Gbit/s ceiling on ``bw``, ``TCIntf.bwParamMax``, is raised so that the
rate is the one asked: ``fidelnet bench vt``).

Routers forward (``net.ipv4.ip_forward=1``); each node's commands (its routes and
the flows' rules and tables) run as argv lists in the node, never through a shell.
Then it prints ``{"nodes": {name: pid}, "mininet": version}`` and waits for stdin
to close, stops the network and prints ``{"stopped": true}``. Mininet's
machine-wide ``fixLimits()`` settings are put back at once (:mod:`peer_limits`).
Cleanup never uses ``mn -c``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fidelnet.bench import peer_limits
    from fidelnet.bench.mininet_line import Router
else:  # the system Python runs this file without fidelnet: its helpers are beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import peer_limits
    from mininet_line import Router

try:
    from mininet.link import Link, TCIntf, TCLink
    from mininet.log import setLogLevel
    from mininet.net import VERSION, Mininet
    from mininet.node import Node
    from mininet.nodelib import LinuxBridge
except ImportError as exc:  # pragma: no cover - depends on the machine
    sys.exit(f"mininet_topology: cannot import mininet ({exc}); install Debian's 'mininet'")


def build(plan: dict[str, Any]) -> Any:
    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False)
    routers = set(plan.get("routers", []))
    for name in plan["nodes"]:
        net.addHost(name, cls=Router if name in routers else Node, ip=None)
    for name in plan.get("switches", []):
        net.addSwitch(name, cls=LinuxBridge, stp=False)
    TCIntf.bwParamMax = 1_000_000  # Mbit/s: the rates asked, not capped at 1 Gbit/s
    for a, b, ai, bi, aip, bip, *rest in plan["links"]:
        params = rest[0] if rest else {}
        net.addLink(
            a, b, intfName1=ai, intfName2=bi, params1={"ip": aip} if aip else {},
            params2={"ip": bip} if bip else {}, cls=TCLink if params else Link, **params,
        )  # fmt: skip
    net.build()
    net.start()
    for name, commands in plan.get("commands", {}).items():
        node = net.get(name)
        for argv in commands:
            p = node.popen([str(x) for x in argv])
            out, err = p.communicate()
            if p.returncode != 0:
                raise RuntimeError(f"{name}: {' '.join(map(str, argv))}: {err or out}")
    return net


def main() -> int:
    setLogLevel("error")
    plan = json.loads(sys.stdin.readline())
    saved = peer_limits.snapshot()
    try:
        net = build(plan)
    finally:
        peer_limits.restore(saved)
    pids = {h.name: h.pid for h in net.hosts}
    try:
        print(json.dumps({"nodes": pids, "mininet": VERSION}), flush=True)
        sys.stdin.read()  # until the caller closes our stdin
    finally:
        net.stop()
        peer_limits.restore(saved)
        alive = [p for p in pids.values() if os.path.exists(f"/proc/{p}")]
        print(json.dumps({"stopped": True, "alive": alive}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
