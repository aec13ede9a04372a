"""Seeded random topologies and flow sets (HVNet's experiments; pure data).

:func:`random_topology` makes ``n`` routers ``h1``..``hn`` joined directly (no
switches), connected by construction: each node after the first (in a shuffled
order) links to a random earlier one, a random spanning tree, then random extra
links until the mean degree is ``degree`` (no loops, no parallel links). Link ``i``
has its own /24 (``10.<i // 256>.<i % 256>.0/24``: ``.1`` on its ``a`` end, ``.2`` on
``b``), and ``auto_routes`` gives every node destination routes; each link may get
a random rate and delay from the ranges given.

:func:`random_flows` draws flows along random simple paths of ``hops`` (a range)
links, each with its own UDP destination port (from ``base_port``), a rate drawn
from ``rate_mbps`` and packets of ``size`` bytes, HVNet's defaults: 2-5 hops,
1-294 Mbit/s, 363 B. The same seed gives the same topology and flows.
"""

from __future__ import annotations

import random

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import FlowSpec, LinkParams, LinkSpec, NodeSpec, TopologySpec

__all__ = ["MAX_RANDOM_NODES", "random_flows", "random_topology"]

MAX_RANDOM_NODES = 1024
_ATTEMPTS = 200


def _range(field: str, value: tuple[float, float] | None, low: float) -> None:
    if value is None:
        return
    if (
        not isinstance(value, tuple | list)
        or len(value) != 2
        or not all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
        or not low <= value[0] <= value[1]
    ):
        raise ValidationError(
            field, f"must be a range [low, high] with {low} <= low <= high", value
        )


def random_topology(
    n: int,
    seed: int = 1,
    degree: float = 2.5,
    bw_mbps: tuple[float, float] | None = None,
    delay_ms: tuple[float, float] | None = None,
) -> TopologySpec:
    """A connected random topology of ``n`` routers (see the module doc)."""
    if not isinstance(n, int) or isinstance(n, bool) or not 2 <= n <= MAX_RANDOM_NODES:
        raise ValidationError("random.nodes", f"must be a whole number in 2..{MAX_RANDOM_NODES}", n)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValidationError("random.seed", "must be a whole number", seed)
    most = n - 1
    if not isinstance(degree, int | float) or isinstance(degree, bool) or not 1 <= degree <= most:
        raise ValidationError(
            "random.degree", f"mean links per node: must be in 1..{most} for {n} nodes", degree
        )
    _range("random.bw_mbps", bw_mbps, 0.001)
    _range("random.delay_ms", delay_ms, 0.0)
    rng = random.Random(seed)
    names = [f"h{i}" for i in range(1, n + 1)]
    order = names[:]
    rng.shuffle(order)
    edges: list[tuple[str, str]] = []
    seen: set[frozenset[str]] = set()
    for i in range(1, n):
        a, b = order[rng.randrange(i)], order[i]
        edges.append((a, b))
        seen.add(frozenset((a, b)))
    wanted = min(round(n * degree / 2), n * (n - 1) // 2)
    while len(edges) < wanted:
        a, b = rng.sample(names, 2)
        if frozenset((a, b)) not in seen:
            seen.add(frozenset((a, b)))
            edges.append((a, b))
    spec = TopologySpec(auto_routes=True)
    for name in names:
        spec.add_node(NodeSpec(name, kind="router"))
    index = {name: i for i, name in enumerate(names)}
    ordered = sorted((min(e, key=index.__getitem__), max(e, key=index.__getitem__)) for e in edges)
    ordered.sort(key=lambda e: (index[e[0]], index[e[1]]))
    for i, (a, b) in enumerate(ordered, 1):
        bw = round(rng.uniform(*bw_mbps), 3) * 1e6 if bw_mbps is not None else None
        delay = round(rng.uniform(*delay_ms), 3) / 1e3 if delay_ms is not None else None
        params = LinkParams(bw=bw, delay=delay)
        net = f"10.{i // 256}.{i % 256}"
        spec.add_link(LinkSpec(a, b, a_ip=f"{net}.1/24", b_ip=f"{net}.2/24", params=params))
        if spec.nodes[a].ip is None:
            spec.nodes[a].ip = f"{net}.1/24"
        if spec.nodes[b].ip is None:
            spec.nodes[b].ip = f"{net}.2/24"
    return spec


def _neighbours(spec: TopologySpec) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in spec.nodes}
    for link in spec.links:
        out[link.a].append(link.b)
        out[link.b].append(link.a)
    return out


def random_flows(
    spec: TopologySpec,
    count: int,
    seed: int = 1,
    hops: tuple[int, int] = (2, 5),
    rate_mbps: tuple[float, float] = (1.0, 294.0),
    size: int = 363,
    base_port: int = 10_000,
) -> list[FlowSpec]:
    """``count`` flows along random simple paths of ``spec`` (see the module doc)."""
    if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= 10_000:
        raise ValidationError("flows.count", "must be a whole number in 0..10000", count)
    if (
        not isinstance(hops, tuple | list)
        or len(hops) != 2
        or not all(isinstance(h, int) and not isinstance(h, bool) for h in hops)
        or not 1 <= hops[0] <= hops[1]
    ):
        raise ValidationError(
            "flows.hops", "must be a range [low, high] of whole hops, 1 <= low", hops
        )
    _range("flows.rate_mbps", rate_mbps, 0.001)
    if not isinstance(size, int) or not 28 <= size <= 9000:
        raise ValidationError("flows.size", "must be 28..9000 bytes", size)
    if not isinstance(base_port, int) or not 1 <= base_port <= 65535 - count:
        raise ValidationError("flows.base_port", f"must leave {count} ports below 65536", base_port)
    rng = random.Random(seed * 7919 + 1)
    near = _neighbours(spec)
    routers = [n for n, node in spec.nodes.items() if node.kind == "router"]
    if not routers:
        raise ValidationError("flows", "the topology has no routers to send flows through", count)
    flows = []
    for i in range(count):
        want = rng.randint(hops[0], hops[1])
        path = _walk(rng, near, spec, routers, want)
        if path is None:
            raise ValidationError(
                "flows.hops",
                f"found no simple path of {want} hops in {_ATTEMPTS} tries: the topology is "
                "too small or too sparse for it",
                list(hops),
            )
        rate = round(rng.uniform(*rate_mbps), 3) * 1e6
        flows.append(FlowSpec(f"f{i + 1}", tuple(path), base_port + i, "udp", rate, size))
    return flows


def _walk(
    rng: random.Random,
    near: dict[str, list[str]],
    spec: TopologySpec,
    routers: list[str],
    hops: int,
) -> list[str] | None:
    """A random path of ``hops`` links visiting no node twice, whose inner nodes
    forward (routers), or None after many tries."""
    for _ in range(_ATTEMPTS):
        path = [rng.choice(routers)]
        while len(path) <= hops:
            here = path[-1]
            if len(path) > 1 and spec.nodes[here].kind != "router":
                break
            options = [m for m in near[here] if m not in path]
            if not options:
                break
            path.append(rng.choice(options))
        if len(path) == hops + 1:
            return path
    return None
