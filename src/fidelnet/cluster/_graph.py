"""The graph METIS cuts: nodes contracted into groups, and part sizes.

:class:`Groups` is a union-find over node names; :func:`contract_graph` turns a
topology and its groups into one vertex per group (weights summed) and one edge per
pair of groups that links join (weights summed), in CSR form; :func:`allot` shares
a total among machines in proportion to their capacities under their caps;
:func:`rebalance` moves vertices out of parts heavier than their limit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from fidelnet.topology.spec import TopologySpec

__all__ = ["Graph", "Groups", "allot", "contract_graph", "rebalance"]


class Groups:
    """Union-find over node names; a group's representative is its earliest node."""

    def __init__(self, names: Sequence[str]) -> None:
        self.order = {n: i for i, n in enumerate(names)}
        self.parent = {n: n for n in names}

    def find(self, n: str) -> str:
        root = n
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[n] != root:
            self.parent[n], n = root, self.parent[n]
        return root

    def union(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            first, second = (ra, rb) if self.order[ra] < self.order[rb] else (rb, ra)
            self.parent[second] = first


@dataclass
class Graph:
    """One vertex per group, in the order of the groups' first nodes."""

    reps: list[str]
    """Each vertex's representative node."""
    members: dict[str, list[str]]
    """A representative's nodes, in the topology's order."""
    vweights: list[int]
    xadj: list[int]
    adjncy: list[int]
    eweights: list[int]
    links: list[list[tuple[int, int]]]
    """Each vertex's links to other vertices: (the other vertex, the link's index)."""


def contract_graph(
    spec: TopologySpec, groups: Groups, vweight: Sequence[int], eweight: Sequence[int]
) -> Graph:
    """The contracted graph of ``spec``: ``vweight`` per node (in node order),
    ``eweight`` per link (in link order); links inside a group vanish, parallel ones
    add up."""
    members: dict[str, list[str]] = {}
    node_w: dict[str, int] = {}
    for n, w in zip(spec.nodes, vweight, strict=True):
        members.setdefault(groups.find(n), []).append(n)
        node_w[n] = w
    reps = list(members)
    index = {r: i for i, r in enumerate(reps)}
    vweights = [sum(node_w[n] for n in members[r]) for r in reps]
    adj: list[dict[int, int]] = [{} for _ in reps]
    links: list[list[tuple[int, int]]] = [[] for _ in reps]
    for i, link in enumerate(spec.links):
        u, v = index[groups.find(link.a)], index[groups.find(link.b)]
        if u != v:
            adj[u][v] = adj[u].get(v, 0) + eweight[i]
            adj[v][u] = adj[v].get(u, 0) + eweight[i]
            links[u].append((v, i))
            links[v].append((u, i))
    xadj, adjncy, eweights = [0], [], []
    for row in adj:
        for v in sorted(row):
            adjncy.append(v)
            eweights.append(row[v])
        xadj.append(len(adjncy))
    return Graph(reps, members, vweights, xadj, adjncy, eweights, links)


def allot(total: float, capacity: Sequence[float], caps: Sequence[float]) -> list[float]:
    """Water-filling: ``total`` shared in proportion to ``capacity`` (all positive),
    no share above its cap; when the caps cannot hold it all, in proportion to them."""
    n = len(capacity)
    if sum(caps) <= total:
        scale = total / sum(caps)
        return [c * scale for c in caps]
    share = [0.0] * n
    fixed: set[int] = set()
    while True:
        free = [i for i in range(n) if i not in fixed]
        left = total - sum(share[i] for i in fixed)
        per = left / sum(capacity[i] for i in free)
        over = [i for i in free if per * capacity[i] > caps[i]]
        if not over:
            for i in free:
                share[i] = per * capacity[i]
            return share
        for i in over:
            share[i] = caps[i]
            fixed.add(i)


def rebalance(
    graph: Graph,
    parts: list[int],
    limits: Sequence[float],
    may_move: Callable[[int, int, Sequence[int]], bool],
) -> list[int]:
    """``parts`` with vertices moved, one at a time, out of parts heavier than their
    limit into parts with room for them: each move the one that adds least to the
    cut (``may_move(vertex, part, parts)`` vetoes moves), each vertex at most once. Stops
    when every part fits or no move is left; METIS balances to a tolerance and in
    whole groups, which this repairs where the limits are tight."""
    parts = list(parts)
    load = [0] * len(limits)
    for v, p in enumerate(parts):
        load[p] += graph.vweights[v]
    moved: set[int] = set()
    while True:
        over = {p for p, w in enumerate(load) if w > limits[p]}
        if not over:
            return parts
        best: tuple[int, float, int, int] | None = None
        for v, src in enumerate(parts):
            if src not in over or v in moved:
                continue
            w = graph.vweights[v]
            conn: dict[int, int] = {}
            for j in range(graph.xadj[v], graph.xadj[v + 1]):
                q = parts[graph.adjncy[j]]
                conn[q] = conn.get(q, 0) + graph.eweights[j]
            for dst, room in enumerate(limits):
                if dst == src or load[dst] + w > room or not may_move(v, dst, parts):
                    continue
                key = (
                    conn.get(src, 0) - conn.get(dst, 0),
                    abs(w - (load[src] - limits[src])),
                    v,
                    dst,
                )
                if best is None or key < best:
                    best = key
        if best is None:
            return parts
        _, _, v, dst = best
        load[parts[v]] -= graph.vweights[v]
        load[dst] += graph.vweights[v]
        parts[v] = dst
        moved.add(v)
