"""The path packets take between two nodes of a running network, and what it can carry.

Hosts and routers route, switches bridge, so a path is found in two alternating
steps, from the source until the destination is reached:

1. **Route** (at a host or router): the kernel's own answer, ``ip -j route get
   ADDR`` run in the node, gives the interface the packet leaves by and the next
   hop (the gateway, or the destination itself when it is on the link). Asking the
   kernel covers every way a route got there: fidelnet's ``auto_routes``
   (:mod:`fidelnet.topology.routing`), a node's ``default_route``, and routes a
   script added with ``ip route``.
2. **Bridge** (through switches): from that interface, a breadth-first walk over
   the topology's links, through switches only, to the node that holds the next
   hop's address. Among equally short ways through a looped switch fabric the walk
   takes the first in link order; with STP the bridges may forward over another one
   of the same length (or a longer one), which this model does not see.

Each link crossed is a :class:`Hop` in the direction of travel, with that
direction's :class:`~fidelnet.topology.spec.LinkParams` as they are now (changes at
runtime included). :attr:`Path.capacity_bps` is the smallest fixed rate (``bw``) of
the hops; a hop without one (an unshaped veth pair, or a trace whose rate varies)
sets no bound of its own, and a path with no rate anywhere has capacity ``None``:
unknown or unlimited, and nothing to check measured rates against.
:attr:`Path.delay_s` is the sum of the configured one-way delays (jitter, queueing
and processing are not included).
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fidelnet.errors import MeasurementError, ValidationError
from fidelnet.measure import tools
from fidelnet.topology.spec import LinkParams

if TYPE_CHECKING:
    from fidelnet.links.link import Link
    from fidelnet.network import Network
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node

__all__ = ["Hop", "Path", "path"]

_MAX_ROUTED_HOPS = 64
_ROUTE_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Hop:
    """One link crossed from node ``src`` to node ``dst``.

    ``link_index`` is the link's place in ``net.links`` and ``direction`` is ``"ab"``
    or ``"ba"`` in the link's own terms, so ``(link_index, direction)`` identifies one
    direction of one link (flows with the same key share it). ``params`` are that
    direction's parameters when the path was taken.
    """

    link_index: int
    link: str
    src: str
    dst: str
    direction: str
    backend: str
    params: LinkParams

    @property
    def key(self) -> tuple[int, str]:
        return (self.link_index, self.direction)

    @property
    def bw(self) -> float | None:
        """The fixed rate of this direction in bit/s, or None (unshaped, or a trace)."""
        return self.params.bw if self.params.trace is None else None

    @property
    def delay_s(self) -> float:
        return self.params.delay or 0.0

    def frame_capacity_bps(self, frame_bytes: int) -> float | None:
        """The rate of ``frame_bytes``-byte L2 frames this hop carries at most: ``bw``,
        less the share a configured per-packet ``overhead`` takes (the link engine
        counts ``length + overhead`` per frame, see docs/links.md)."""
        if self.bw is None:
            return None
        overhead = self.params.overhead or 0
        return self.bw * frame_bytes / (frame_bytes + overhead)


@dataclass(frozen=True)
class Path:
    """The links from ``src`` to ``dst_addr`` (an address of ``dst``), in order."""

    src: str
    dst: str
    dst_addr: str
    hops: tuple[Hop, ...]

    @property
    def nodes(self) -> list[str]:
        """Every node the packets visit, switches included, ``src`` first."""
        return [self.src, *(h.dst for h in self.hops)]

    @property
    def delay_s(self) -> float:
        """The sum of the configured one-way delays along the path."""
        return sum(h.delay_s for h in self.hops)

    @property
    def shaped(self) -> list[Hop]:
        """The hops with a fixed rate."""
        return [h for h in self.hops if h.bw is not None]

    @property
    def bottleneck(self) -> Hop | None:
        """The hop with the smallest fixed rate (the first of equals), or None."""
        shaped = self.shaped
        return min(shaped, key=lambda h: h.bw or 0.0) if shaped else None

    @property
    def capacity_bps(self) -> float | None:
        """The bottleneck's rate in bit/s (L2 frames without FCS), or None."""
        hop = self.bottleneck
        return hop.bw if hop is not None else None

    def frame_capacity_bps(self, frame_bytes: int) -> float | None:
        """The smallest :meth:`Hop.frame_capacity_bps` along the path, or None."""
        rates = [r for h in self.hops if (r := h.frame_capacity_bps(frame_bytes)) is not None]
        return min(rates) if rates else None

    def describe(self) -> str:
        """``h1 -> s1 -> s2 -> h2``."""
        return " -> ".join(self.nodes)


def path(net: Network, src: str, dst: str) -> Path:
    """The path from node ``src`` to node ``dst``'s address in the running ``net``.

    Raises ValidationError for unknown or equal nodes, MeasurementError when the
    kernel has no route, a next hop is on no node of the segment, or routes loop.
    """
    source, target = net[src], net[dst]
    if source is target:
        raise ValidationError("pairs", "a flow needs two different nodes", (src, dst))
    addr = target.ip
    if not addr:
        raise MeasurementError(f"path {src} -> {dst}: {dst} has no IPv4 address")
    where = f"path {src} -> {dst} ({addr})"
    hops: list[Hop] = []
    node = source
    for _ in range(_MAX_ROUTED_HOPS):
        if node is target:
            return Path(src, dst, addr, tuple(hops))
        dev, next_addr = _route(node, addr, where)
        segment, node = _bridge(net, node, dev, next_addr, where)
        hops.extend(segment)
    raise MeasurementError(f"{where}: more than {_MAX_ROUTED_HOPS} routed hops (a loop?)")


def _route(node: Node, addr: str, where: str) -> tuple[str, str]:
    """(outgoing interface, next-hop address) from the kernel of ``node``."""
    out, err, code = tools.pexec(node, ["ip", "-j", "route", "get", addr], timeout=_ROUTE_TIMEOUT_S)
    if code != 0:
        raise MeasurementError(f"{where}: {node.name} has no route: {(err or out).strip()}")
    try:
        entries: list[dict[str, Any]] = json.loads(out)
        entry = entries[0]
        dev = str(entry["dev"])
    except (ValueError, LookupError, TypeError) as exc:
        raise MeasurementError(f"{where}: unreadable route from {node.name}: {out!r}") from exc
    if entry.get("type") == "local":
        raise MeasurementError(f"{where}: {node.name} holds {addr} itself")
    return dev, str(entry.get("gateway") or addr)


def _bridge(
    net: Network, node: Node, dev: str, next_addr: str, where: str
) -> tuple[list[Hop], Node]:
    """Hops from ``node``'s interface ``dev`` through switches to the node holding
    ``next_addr`` (breadth first, links in ``net.links`` order), and that node."""
    start = _interface(node, dev, where)
    index = {id(link): i for i, link in enumerate(net.links)}
    queue: deque[tuple[Interface, list[Hop]]] = deque([(start, [])])
    seen: set[int] = {id(node)}
    while queue:
        intf, hops = queue.popleft()
        peer = intf.peer()
        if peer is None or intf.link is None or id(intf.link) not in index:
            continue
        far = peer.node
        walked = [*hops, _hop(intf.link, index[id(intf.link)], intf)]
        if far.spec.kind != "switch":
            if _holds(far, next_addr):
                return walked, far
            continue
        if id(far) in seen:
            continue
        seen.add(id(far))
        queue.extend((i, walked) for i in _ports(far) if i is not peer)
    raise MeasurementError(
        f"{where}: no node reachable from {node.name}:{dev} holds the next hop {next_addr}"
    )


def _interface(node: Node, dev: str, where: str) -> Interface:
    for intf in node.intfs.values():
        if intf.name == dev:
            return intf
    raise MeasurementError(f"{where}: {node.name} routes by {dev!r}, which no link of it is")


def _ports(switch: Node) -> Iterable[Interface]:
    return [switch.intfs[p] for p in sorted(switch.intfs)]


def _holds(node: Node, addr: str) -> bool:
    return any(i.ip == addr for i in node.intfs.values()) or node.ip == addr


def _hop(link: Link, link_index: int, leaving: Interface) -> Hop:
    forward = leaving is link.intf1
    direction = "ab" if forward else "ba"
    far = link.intf2 if forward else link.intf1
    return Hop(
        link_index=link_index,
        link=f"{link.spec.a}-{link.spec.b}",
        src=leaving.node.name,
        dst=far.node.name,
        direction=direction,
        backend=link.backend,
        params=link.params(direction),
    )
