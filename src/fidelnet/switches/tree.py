"""The spanning tree of the BPF datapath's STP switches, computed from the topology.

The kernel's STP finds a loop-free tree by exchanging BPDUs, and makes every port wait
twice its forward delay (listening, then learning) before it forwards; on a 10x10
torus that took 17-18 s with the shortest timers the kernel allows, and Mininet's
defaults take twice that. fidelnet knows the topology, so on the ``bpf`` datapath it
computes the tree the protocol would settle on and blocks the other ports:

- the switches are the STP switches of the datapath, the edges the links between
  two of them whose both ends are up;
- in each connected part the root is the switch added first (STP's root is the
  lowest bridge id; fidelnet numbers switches in the order they are made), and the
  tree is breadth first from it, links taken in the order they were made, so each
  switch reaches the root by a fewest-hops path (STP's least root path cost, every
  link costing the same);
- a port on a tree link forwards; a port on any other link between two STP switches
  is blocked at both ends; a port facing a host, a router or a switch without STP
  always forwards.

When a link goes down or comes up, the tree is computed again at once: where the
kernel's STP needs seconds to notice and reconverge, this takes none. Use the
``bridge`` datapath to study STP itself (docs/switches.md).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Edge", "spanning_tree"]


@dataclass(frozen=True)
class Edge:
    """A link between two STP switches (by number), with a key that orders links."""

    a: int
    b: int
    key: int


def spanning_tree(switches: Iterable[int], edges: Iterable[Edge]) -> set[int]:
    """The keys of the edges in the tree: breadth first from the lowest-numbered
    switch of each connected part, lower keys first."""
    nodes = sorted(set(switches))
    adj: dict[int, list[tuple[int, int]]] = {n: [] for n in nodes}
    for e in sorted(edges, key=lambda e: e.key):
        if e.a == e.b or e.a not in adj or e.b not in adj:
            continue
        adj[e.a].append((e.key, e.b))
        adj[e.b].append((e.key, e.a))
    seen: set[int] = set()
    tree: set[int] = set()
    for root in nodes:
        if root in seen:
            continue
        seen.add(root)
        queue = deque([root])
        while queue:
            n = queue.popleft()
            for key, m in adj[n]:
                if m not in seen:
                    seen.add(m)
                    tree.add(key)
                    queue.append(m)
    return tree
