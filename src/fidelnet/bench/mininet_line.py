#!/usr/bin/python3
"""Stock Mininet's side of ``fidelnet bench line``: the same routed line, built by
Debian's ``mininet`` package, held open while fidelnet measures through it.

Run by ``fidelnet bench line`` with the Python that has Mininet
(``/usr/bin/python3``), as root; it is not imported by fidelnet. It builds
``lg - h1 - ... - hN - rx`` with Mininet's ``Node`` (plain namespaces, veth links,
no switches and no controller); link ``i`` joins chain[i] (``10.10.i.1/24``) and
chain[i+1] (``10.10.i.2/24``); h1..hN forward (``net.ipv4.ip_forward=1``) and
every node gets a static route to every subnet it is not on. Then it prints one
JSON line ``{"nodes": {name: pid}, "mininet": version}`` on stdout and waits for
stdin to close, then stops the network and prints ``{"stopped": true}``.

Mininet's ``fixLimits()`` raises machine-wide sysctls (TCP buffers, the input
backlog, neighbour limits); they are put back right after the build
(:mod:`peer_limits`), so the line is measured under the machine's own settings, as
fidelnet's is, and nothing outlives the script.

Cleanup never uses ``mn -c`` (which kills processes and deletes interfaces by
name pattern, other people's included): ``net.stop()`` removes what this network
made, and the script checks that none of its node processes survive.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fidelnet.bench import peer_limits
else:  # the system Python runs this file without fidelnet: its helper is beside it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import peer_limits

try:
    from mininet.log import setLogLevel
    from mininet.net import VERSION, Mininet
    from mininet.node import Node
except ImportError as exc:  # pragma: no cover - depends on the machine
    sys.exit(f"mininet_line: cannot import mininet ({exc}); install Debian's 'mininet'")


class Router(Node):  # type: ignore[misc]
    """A Mininet node that forwards IPv4."""

    def config(self, **params: Any) -> Any:
        result = super().config(**params)
        self.cmd("sysctl -q -w net.ipv4.ip_forward=1")
        return result


def chain(n: int) -> list[str]:
    return ["lg", *[f"h{i}" for i in range(1, n + 1)], "rx"]


def routes(names: list[str], k: int) -> list[tuple[str, str]]:
    """(subnet, via) for node k of the chain: subnets to its left go via the left
    neighbour, to its right via the right one."""
    out = []
    for i in range(len(names) - 1):
        if i < k - 1:
            out.append((f"10.10.{i}.0/24", f"10.10.{k - 1}.1"))
        elif i > k:
            out.append((f"10.10.{i}.0/24", f"10.10.{k}.2"))
    return out


def build(n: int) -> Any:
    names = chain(n)
    net = Mininet(topo=None, controller=None, build=False, autoSetMacs=False)
    for name in names:
        cls = Node if name in ("lg", "rx") else Router
        net.addHost(name, cls=cls, ip=None)
    for i in range(len(names) - 1):
        net.addLink(
            names[i],
            names[i + 1],
            params1={"ip": f"10.10.{i}.1/24"},
            params2={"ip": f"10.10.{i}.2/24"},
        )
    net.build()
    net.start()
    for k, name in enumerate(names):
        host = net.get(name)
        for subnet, via in routes(names, k):
            host.cmd(f"ip route add {subnet} via {via}")
    return net


def main() -> int:
    if len(sys.argv) != 2 or not sys.argv[1].isdigit() or not 2 <= int(sys.argv[1]) <= 64:
        print("usage: mininet_line.py N   (2 <= N <= 64 routers)", file=sys.stderr)
        return 2
    setLogLevel("error")
    saved = peer_limits.snapshot()
    try:
        net = build(int(sys.argv[1]))
    finally:
        # Mininet raised TCP buffers, the input backlog and more for the whole machine
        # (fixLimits): put them back before anything is measured, so both sides run
        # under the machine's own settings, and nothing outlives this script.
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
