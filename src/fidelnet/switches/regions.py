"""What lies behind each trunk port of the BPF datapath, for multicast pruning.

The BPF switch learns, at the edge, which ports have a member of each IPv6 group, in
maps that every switch of the run shares (``bpf/l2switch.bpf.c``). To send a group's
frame out of a port to another switch (a trunk) only when a member lies behind it,
the program needs to know which switches are behind each trunk. In a loop-free part
of the topology that is easy to encode: number the switches in depth-first order
from a root, and the switches behind the port toward a child are one interval of the
numbers (the child's subtree), those behind the port toward the parent are the part's
own interval without the switch's subtree. Each switch carries its number; each
trunk port its :class:`Region`.

Where that cannot be trusted the port gets no region (``None``) and takes all IPv6
multicast, as every trunk did before: in a part with a loop (no tree to number), and
toward any *sink*, a switch behind which members may exist that the program does not
learn (one with MLD snooping off, one with a link to a bridge or Open vSwitch switch).

The edges are the links that can carry frames: between switches with a computed
spanning tree only the tree's links. A link that goes down only shrinks what lies
behind a port, so the regions stay right (a superset) until the tree itself changes;
the datapath numbers again then, and when a link it has not numbered appears.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Numbering", "Region", "number"]


@dataclass(frozen=True)
class Region:
    """Switch numbers ``lo..hi`` without ``xlo..xhi`` (empty when ``xlo > xhi``)."""

    lo: int
    hi: int
    xlo: int = 1
    xhi: int = 0

    def bounds(self) -> tuple[int, int, int, int]:
        return (self.lo, self.hi, self.xlo, self.xhi)

    def __contains__(self, n: object) -> bool:
        return isinstance(n, int) and self.lo <= n <= self.hi and not (self.xlo <= n <= self.xhi)


@dataclass
class Numbering:
    """Each switch's number (from 1, unique over the run) and each trunk end's region
    (``None``: all multicast goes there), keyed by (switch, link key)."""

    numbers: dict[str, int]
    regions: dict[tuple[str, int], Region | None]
    links: set[int]


def number(
    switches: Sequence[str], edges: Iterable[tuple[str, str, int]], sinks: set[str]
) -> Numbering:
    """Number ``switches`` (in their order, each connected part from its first switch)
    and give both ends of every edge ``(a, b, key)`` its region."""
    adj: dict[str, list[tuple[int, str]]] = {s: [] for s in switches}
    keys: set[int] = set()
    for a, b, key in edges:
        if a not in adj or b not in adj:
            continue
        keys.add(key)
        adj[a].append((key, b))
        if a != b:
            adj[b].append((key, a))
    numbers: dict[str, int] = {}
    regions: dict[tuple[str, int], Region | None] = {}
    nxt = 1
    for root in switches:
        if root in numbers:
            continue
        # Iterative depth-first walk: preorder numbers, then subtree sizes and sinks.
        order: list[str] = []
        parent: dict[str, tuple[str, int] | None] = {root: None}
        numbers[root] = nxt
        nxt += 1
        stack = [root]
        part_edges: set[int] = set()
        while stack:
            s = stack.pop()
            order.append(s)
            for key, t in reversed(adj[s]):
                part_edges.add(key)
                if t not in numbers:
                    numbers[t] = -1  # seen; numbered when popped
                    parent[t] = (s, key)
                    stack.append(t)
        # Renumber in pop order (which is a depth-first preorder).
        base = numbers[root]
        for i, s in enumerate(order):
            numbers[s] = base + i
        nxt = base + len(order)
        size = {s: 1 for s in order}
        sunk = {s: int(s in sinks) for s in order}
        for s in reversed(order):
            up = parent[s]
            if up is not None:
                size[up[0]] += size[s]
                sunk[up[0]] += sunk[s]
        tree = len(part_edges) == len(order) - 1
        for s in order:
            for key, _ in adj[s]:
                regions[(s, key)] = None
        if not tree:
            continue
        for s in order:
            up = parent[s]
            if up is None:
                continue
            p, key = up
            lo, last = numbers[s], numbers[s] + size[s] - 1
            # Toward the child s: its subtree. Toward the parent p: the rest of the part.
            regions[(p, key)] = Region(lo, last) if sunk[s] == 0 else None
            rest_sinks = sunk[root] - sunk[s]
            regions[(s, key)] = (
                Region(base, base + len(order) - 1, lo, last) if rest_sinks == 0 else None
            )
    return Numbering(numbers, regions, keys)
