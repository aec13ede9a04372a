"""Shortest-path static routes between IP subnets (pure data).

Holds :class:`Route` and :func:`static_routes`, used when a spec has
``auto_routes=True`` (for example :func:`fidelnet.topology.builders.line`).

Model: switches are layer 2, so every interface attached to one connected group
of switches (or the two ends of a link between two non-switch nodes) shares one
segment; a *subnet* is an IP network on a segment. Nodes of kind ``"router"``
forward between their subnets; hosts never forward (Linux hosts do not, unless
told to), so paths only pass through routers.

Interface names and addresses are the ones :func:`fidelnet.topology.addressing.interfaces`
reports: call :func:`~fidelnet.topology.addressing.assign_ports` and
:func:`~fidelnet.topology.addressing.assign_ips` first so that the spec, the kernel
layer and these routes agree (unassigned ports give the names ``assign_ports``
would choose; interfaces without an address take no part in routing).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network

from fidelnet.topology.addressing import Interface, interfaces, parse_cidr
from fidelnet.topology.spec import TopologySpec

__all__ = ["Route", "static_routes"]


@dataclass(frozen=True)
class Route:
    """``ip route add DST via VIA dev DEV``: ``dst`` is a CIDR network, ``via`` an address."""

    dst: str
    via: str
    dev: str


SubnetKey = tuple[int, IPv4Network]  # (segment id, network)


@dataclass(frozen=True)
class _Attachment:
    node: str
    intf: str
    addr: IPv4Interface


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[object, object] = {}

    def find(self, key: object) -> object:
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: object, b: object) -> None:
        self.parent[self.find(a)] = self.find(b)


def _segments(spec: TopologySpec, ends: list[Interface]) -> dict[tuple[int, str], int]:
    """Segment id of every link end (keyed by (link index, side))."""
    forest = _UnionFind()

    def key(end: Interface) -> object:
        node = spec.nodes.get(end.node)
        if node is not None and node.kind == "switch":
            return ("switch", end.node)
        return ("end", end.link, end.side)

    for a, b in zip(ends[::2], ends[1::2], strict=True):
        forest.union(key(a), key(b))
    ids: dict[object, int] = {}
    return {(e.link, e.side): ids.setdefault(forest.find(key(e)), len(ids)) for e in ends}


class _Graph:
    """Bipartite graph of routed nodes and subnets (only routers forward)."""

    def __init__(self, spec: TopologySpec) -> None:
        self.order = {name: i for i, name in enumerate(spec.nodes)}
        self.node_subnets: dict[str, list[SubnetKey]] = {}
        self.routers: dict[SubnetKey, list[_Attachment]] = {}
        self.attached: dict[tuple[str, SubnetKey], _Attachment] = {}
        ends = interfaces(spec)
        segments = _segments(spec, ends)
        for end in ends:
            node = spec.nodes.get(end.node)
            if node is None or node.kind == "switch" or end.ip is None:
                continue
            addr = parse_cidr(end.ip_field or "ip", end.ip)
            subnet = (segments[end.link, end.side], addr.network)
            attachment = _Attachment(end.node, end.name, addr)
            if (end.node, subnet) not in self.attached:
                self.attached[end.node, subnet] = attachment
                self.node_subnets.setdefault(end.node, []).append(subnet)
                if node.kind == "router":
                    self.routers.setdefault(subnet, []).append(attachment)
        for attached in self.routers.values():
            attached.sort(key=lambda m: self.order[m.node])

    def next_routers(self, subnet: SubnetKey, seen: set[str]) -> list[_Attachment]:
        """Routers on ``subnet`` not seen yet (marked seen), in ``spec.nodes`` order."""
        found = [m for m in self.routers.get(subnet, []) if m.node not in seen]
        seen.update(m.node for m in found)
        return found


def _first_hops(graph: _Graph, source: str) -> list[tuple[SubnetKey, _Attachment, _Attachment]]:
    """BFS from ``source``: every subnet it reaches through routers, with the
    (source interface, next-hop interface) of the first hop, nearest first."""
    seen_nodes = {source}
    seen_subnets: set[SubnetKey] = set(graph.node_subnets.get(source, []))
    first = [
        (hop.node, graph.attached[source, subnet], hop)
        for subnet in graph.node_subnets.get(source, [])
        for hop in graph.next_routers(subnet, seen_nodes)
    ]
    # Ties between equally short paths go to the first hop earliest in spec.nodes.
    first.sort(key=lambda entry: graph.order[entry[0]])
    queue = deque(first)
    result = []
    while queue:
        node, out, via = queue.popleft()
        for subnet in graph.node_subnets.get(node, []):
            if subnet in seen_subnets:
                continue
            seen_subnets.add(subnet)
            result.append((subnet, out, via))
            queue.extend((hop.node, out, via) for hop in graph.next_routers(subnet, seen_nodes))
    return result


def _routes_for(graph: _Graph, source: str) -> list[Route]:
    direct = {network for _, network in graph.node_subnets.get(source, [])}
    routes: list[Route] = []
    done: set[IPv4Network] = set()
    for (_, network), out, via in _first_hops(graph, source):
        if network in direct or network in done:
            continue
        done.add(network)
        routes.append(Route(dst=str(network), via=str(via.addr.ip), dev=out.intf))
    return routes


def static_routes(spec: TopologySpec) -> dict[str, list[Route]]:
    """Routes for every host and router (switches have none), nearest subnet first.

    Each node gets one route to every subnet it is not directly attached to and can
    reach through routers, along a path with the fewest hops; ties go to the
    next hop that comes first in ``spec.nodes``. Raises ValidationError if an
    address is malformed.
    """
    graph = _Graph(spec)
    return {
        name: _routes_for(graph, name) for name, node in spec.nodes.items() if node.kind != "switch"
    }
