"""A built network's layer 3: forwarding, routes, static ARP, the fast path of
routers that ask for one, and the ping tests. :class:`fidelnet.Network` calls these;
they use only its nodes, spec and run state."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from fidelnet.errors import KernelError
from fidelnet.measure import tools
from fidelnet.topology import flows, routing

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.nodes.node import Node

__all__ = ["configure", "flow_routes", "ping_pairs", "static_arp", "static_routes"]


def configure(net: Network) -> None:
    """Forwarding, routes and static ARP, once nodes and links exist; then the
    routers' fast path (:mod:`fidelnet.fastpath`)."""
    for node in net.nodes.values():
        node.configure()
    if net.spec.auto_routes:
        static_routes(net)
    for node in net.nodes.values():
        if node.spec.default_route:
            _default_route(node, node.spec.default_route)
    if net.spec.flows:
        flow_routes(net)
    if net.spec.auto_static_arp:
        static_arp(net)
    from fidelnet import fastpath

    fastpath.set_up(net)


def static_routes(net: Network) -> None:
    """Shortest-path static routes between routed nodes (:mod:`fidelnet.topology.routing`)."""
    for name, routes in routing.static_routes(net.spec).items():
        node = net.nodes[name]
        batch = []
        for r in routes:
            intf = node.intf(r.dev)
            batch.append((r.dst, r.via, intf.index if intf else None))
        node.interior().add_routes(batch)


def flow_routes(net: Network) -> None:
    """Each flow's rules and tables on the nodes it leaves (:mod:`fidelnet.topology.flows`)."""
    for name, policy in flows.plan(net.spec).items():
        node = net.nodes[name]
        tables = []
        for table, (gateway, ifname) in sorted(policy.tables.items()):
            intf = node.intf(ifname)
            if intf is None:
                raise KernelError(f"{name}: flow table {table}: no interface {ifname}")
            tables.append((table, gateway, intf.index))
        node.interior().add_flow_routes(tables, policy.rules)


def _default_route(node: Node, target: str) -> None:
    inside = node.interior()
    try:
        ipaddress.ip_address(target)
    except ValueError:
        intf = node.intf(target)
        inside.add_routes([("0.0.0.0/0", None, intf.index if intf else None)])
        return
    inside.add_routes([("0.0.0.0/0", target, None)])


def static_arp(net: Network) -> None:
    """Fill every host's ARP table with every other host's address (Mininet's
    ``autoStaticArp``)."""
    hosts = [h for h in net.hosts if h.default_intf() is not None and h.ip]
    entries = [(h.ip, h.mac) for h in hosts]
    for h in hosts:
        d = h.default_intf()
        assert d is not None
        for ip, mac in entries:
            if ip != h.ip and ip and mac:
                h.interior().add_neighbour(d.index, ip, mac)


def ping_all(hosts: list[Node], timeout: float = 1.0) -> float:
    """Ping between every ordered pair of ``hosts``; the percent dropped."""
    results = ping_pairs(hosts, timeout)
    if not results:
        return 0.0
    lost = sum(1 for ok in results.values() if not ok)
    return 100.0 * lost / len(results)


def ping_pairs(hosts: list[Node], timeout: float = 1.0) -> dict[tuple[str, str], bool]:
    """Ping between every ordered pair of ``hosts``: which answered."""
    results: dict[tuple[str, str], bool] = {}
    for src in hosts:
        for dst in hosts:
            if src is dst or not dst.ip:
                continue
            _, _, code = tools.pexec(src, ["ping", "-c1", f"-W{max(1, round(timeout))}", dst.ip])
            results[(src.name, dst.name)] = code == 0
    return results
