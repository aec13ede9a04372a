"""Ready-made topologies, as :class:`TopologySpec` values.

Mininet's own topologies keep Mininet's node names, node insertion order and
link order (the order ``Topo.addLink`` is called, which fixes port numbers;
Mininet later *creates* links in natural-sorted order, which changes nothing
visible):

- :func:`minimal`: ``MinimalTopo`` -- s1, h1, h2.
- :func:`single`: ``SingleSwitchTopo`` -- s1 and hosts h1..hk, links (h_i, s1).
- :func:`linear`: ``LinearTopo`` -- switches s1..sk in a chain; host h_i on s_i
  when n == 1, else hosts ``h{j}s{i}`` (host j of switch i, Mininet's spelling).
- :func:`reversed_`: ``SingleSwitchReversedTopo`` -- host h_i on port 0, switch
  port k - i + 1.
- :func:`tree`: ``TreeTopo`` -- depth-first numbering s1.., h1...
- :func:`torus`: ``TorusTopo`` -- switches ``s{i}x{j}``, hosts ``h{i}x{j}``
  (``h{i}x{j}x{m}`` when n > 1); every switch has ``stp=True`` because the torus
  has loops.

fidelnet's own:

- :func:`line`: a routed line of n routers h1..hn with no switches (the
  CIMininet 7-node line); link i joins h_i and h_{i+1} on 10.0.i.0/24.
- :func:`dumbbell`: s1 -- s2 bottleneck, hosts h1..hn on s1 and h(n+1)..h(2n) on s2.
- :func:`fattree`: a k-ary fat tree (names below); every switch has ``stp=True``
  (the tree has loops).

And :func:`from_mn_spec` parses Mininet's ``--topo`` string (``linear,3``).
Every builder checks its arguments and raises :class:`ValidationError` naming
the parameter (field ``"<builder>.<param>"``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fidelnet.errors import ValidationError
from fidelnet.topology.limits import MAX_NODES
from fidelnet.topology.randomnet import random_topology
from fidelnet.topology.spec import LinkParams, LinkSpec, NodeSpec, TopologySpec

__all__ = [
    "MAX_NODES",
    "TOPOS",
    "dumbbell",
    "fattree",
    "from_mn_spec",
    "line",
    "linear",
    "minimal",
    "reversed_",
    "single",
    "torus",
    "tree",
]

# Builders refuse topologies with more nodes than MAX_NODES (a typo like tree,20,20).


def _int_arg(builder: str, param: str, value: object, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValidationError(f"{builder}.{param}", f"must be an integer >= {minimum}", value)
    return value


def _check_size(builder: str, params: str, count: int) -> None:
    if count > MAX_NODES:
        raise ValidationError(
            f"{builder}.{params}", f"would create at least {count} nodes; the limit is {MAX_NODES}"
        )


def _host(spec: TopologySpec, name: str) -> str:
    spec.add_node(NodeSpec(name, kind="host"))
    return name


def _switch(spec: TopologySpec, name: str, **opts: object) -> str:
    spec.add_node(NodeSpec(name, kind="switch", opts=dict(opts)))
    return name


def _stp_switch(spec: TopologySpec, name: str) -> str:
    spec.add_node(NodeSpec(name, kind="switch", stp=True))
    return name


def _link(spec: TopologySpec, a: str, b: str) -> None:
    spec.add_link(LinkSpec(a, b))


def single(k: int = 2) -> TopologySpec:
    """``SingleSwitchTopo``: switch s1 and hosts h1..hk, links (h_i, s1) in order."""
    k = _int_arg("single", "k", k)
    _check_size("single", "k", k + 1)
    spec = TopologySpec()
    switch = _switch(spec, "s1")
    for i in range(1, k + 1):
        _link(spec, _host(spec, f"h{i}"), switch)
    return spec


def minimal() -> TopologySpec:
    """``MinimalTopo``: s1 with h1 and h2."""
    return single(2)


def reversed_(k: int = 2) -> TopologySpec:
    """``SingleSwitchReversedTopo``: like :func:`single`, host h_i on switch port k-i+1."""
    k = _int_arg("reversed", "k", k)
    _check_size("reversed", "k", k + 1)
    spec = TopologySpec()
    switch = _switch(spec, "s1")
    for i in range(1, k + 1):
        spec.add_link(LinkSpec(_host(spec, f"h{i}"), switch, a_port=0, b_port=k - i + 1))
    return spec


def linear(k: int = 2, n: int = 1) -> TopologySpec:
    """``LinearTopo``: switches s1..sk in a chain, n hosts per switch.

    Order per switch i: s_i, its hosts and their links (host, s_i), then the link
    (s_i, s_{i-1}). Hosts are h_i when n == 1, else ``h{j}s{i}``.
    """
    k = _int_arg("linear", "k", k)
    n = _int_arg("linear", "n", n)
    _check_size("linear", "k", k * (n + 1))
    spec = TopologySpec()
    last: str | None = None
    for i in range(1, k + 1):
        switch = _switch(spec, f"s{i}")
        for j in range(1, n + 1):
            _link(spec, _host(spec, f"h{i}" if n == 1 else f"h{j}s{i}"), switch)
        if last is not None:
            _link(spec, switch, last)
        last = switch
    return spec


def _tree_size(depth: int, fanout: int) -> int:
    """Nodes in a tree, counted only until it passes MAX_NODES (depth may be huge)."""
    total, level_size = 0, 1
    for _ in range(depth + 1):
        total += level_size
        if total > MAX_NODES:
            break
        level_size *= fanout
    return total


@dataclass
class _Frame:
    """A switch of :func:`tree` whose subtree is being built."""

    name: str
    level: int
    children_left: int


def tree(depth: int = 1, fanout: int = 2) -> TopologySpec:
    """``TreeTopo``: numbered depth first; a switch links to each child after
    building the child's subtree, so tree(2, 2) links (s2,h1), (s2,h2), (s1,s2),
    (s3,h3), (s3,h4), (s1,s3). (Iterative, so a deep tree cannot overflow the stack.)
    """
    depth = _int_arg("tree", "depth", depth)
    fanout = _int_arg("tree", "fanout", fanout)
    _check_size("tree", "depth", _tree_size(depth, fanout))
    spec = TopologySpec()
    counters = {"s": 1, "h": 1}

    def add(level: int) -> str:
        prefix = "s" if level > 0 else "h"
        name = f"{prefix}{counters[prefix]}"
        counters[prefix] += 1
        return _switch(spec, name) if level > 0 else _host(spec, name)

    stack = [_Frame(add(depth), depth, fanout)]
    while stack:
        top = stack[-1]
        if top.children_left == 0:
            stack.pop()
            if stack:
                _link(spec, stack[-1].name, top.name)
            continue
        top.children_left -= 1
        child = add(top.level - 1)
        if top.level - 1 == 0:
            _link(spec, top.name, child)
        else:
            stack.append(_Frame(child, top.level - 1, fanout))
    return spec


def torus(x: int, y: int, n: int = 1) -> TopologySpec:
    """``TorusTopo``: an x by y grid of switches with wrap-around, n hosts each.

    Switch ``s{i}x{j}`` carries Mininet's dpid (``opts["dpid"]``, hex of
    i*256+j) and ``stp=True``. Links: every host to its switch first, then for
    each switch its (i, j+1) and (i+1, j) neighbours.
    """
    x = _int_arg("torus", "x", x, minimum=3)
    y = _int_arg("torus", "y", y, minimum=3)
    n = _int_arg("torus", "n", n)
    _check_size("torus", "x", x * y * (n + 1))
    spec = TopologySpec()
    switches: dict[tuple[int, int], str] = {}
    for i in range(x):
        for j in range(y):
            loc = f"{i + 1}x{j + 1}"
            switch = _switch(spec, f"s{loc}", dpid=f"{(i + 1) * 256 + (j + 1):x}")
            spec.nodes[switch].stp = True
            switches[i, j] = switch
            for m in range(1, n + 1):
                _link(spec, _host(spec, f"h{loc}" if n == 1 else f"h{loc}x{m}"), switch)
    for i in range(x):
        for j in range(y):
            _link(spec, switches[i, j], switches[i, (j + 1) % y])
            _link(spec, switches[i, j], switches[(i + 1) % x, j])
    return spec


def line(n: int) -> TopologySpec:
    """A routed line of n routers h1..hn and no switches (2 <= n <= 256).

    Link i joins h_i (``10.0.i.1/24``) and h_{i+1} (``10.0.i.2/24``); each node's
    ``ip`` is its first interface's address; ``auto_routes`` is on, so every node
    gets static routes to every subnet.
    """
    n = _int_arg("line", "n", n, minimum=2)
    if n > 256:
        raise ValidationError("line.n", "must be at most 256 (one 10.0.i.0/24 per link)", n)
    spec = TopologySpec(auto_routes=True)
    for i in range(1, n + 1):
        spec.add_node(NodeSpec(f"h{i}", kind="router"))
    for i in range(1, n):
        a_ip, b_ip = f"10.0.{i}.1/24", f"10.0.{i}.2/24"
        spec.add_link(LinkSpec(f"h{i}", f"h{i + 1}", a_ip=a_ip, b_ip=b_ip))
        if spec.nodes[f"h{i}"].ip is None:
            spec.nodes[f"h{i}"].ip = a_ip
        spec.nodes[f"h{i + 1}"].ip = b_ip
    return spec


def dumbbell(n: int, bottleneck: LinkParams | None = None) -> TopologySpec:
    """Two switches joined by one bottleneck link, n hosts on each side.

    Nodes: s1 (left), s2 (right), h1..hn, h(n+1)..h(2n). The bottleneck (s1, s2)
    is the first link, so it is port 1 on both switches; then (h_i, s1) for the
    left hosts and (h_i, s2) for the right ones.
    """
    n = _int_arg("dumbbell", "n", n)
    if bottleneck is not None and not isinstance(bottleneck, LinkParams):
        raise ValidationError("dumbbell.bottleneck", "must be a LinkParams or None", bottleneck)
    _check_size("dumbbell", "n", 2 * n + 2)
    spec = TopologySpec()
    left, right = _switch(spec, "s1"), _switch(spec, "s2")
    spec.add_link(LinkSpec(left, right, params=bottleneck or LinkParams()))
    for i in range(1, 2 * n + 1):
        _link(spec, _host(spec, f"h{i}"), left if i <= n else right)
    return spec


def fattree(k: int) -> TopologySpec:
    """A k-ary fat tree (k even): (k/2)^2 core, k pods of k/2 + k/2 switches, k^3/4 hosts.

    Names: core switches ``c1``..``c{(k/2)^2}``; in pod p (1..k) aggregation
    switches ``a{p}_{i}`` and edge switches ``e{p}_{i}`` (i in 1..k/2); hosts
    ``h1``..``h{k^3/4}`` numbered pod by pod, edge by edge. Aggregation switch i of
    every pod links to cores ``(i-1)*k/2 + 1`` .. ``i*k/2``.

    Link order gives the textbook ports: edge switches use ports 1..k/2 for hosts
    and k/2+1..k for aggregation; aggregation switches 1..k/2 for edges and
    k/2+1..k for cores; core switch ports are pod numbers. Node order: cores, then
    per pod its aggregation, edge switches and hosts.
    """
    k = _int_arg("fattree", "k", k, minimum=2)
    if k % 2:
        raise ValidationError("fattree.k", "must be even", k)
    half = k // 2
    _check_size("fattree", "k", half * half + k * k + k**3 // 4)
    spec = TopologySpec()
    # The tree has loops (k >= 4): without STP the bridges would flood a broadcast
    # storm, so every switch runs it, as torus's do.
    cores = [_stp_switch(spec, f"c{c}") for c in range(1, half * half + 1)]
    host_number = 1
    for pod in range(1, k + 1):
        aggs = [_stp_switch(spec, f"a{pod}_{i}") for i in range(1, half + 1)]
        edges = [_stp_switch(spec, f"e{pod}_{i}") for i in range(1, half + 1)]
        for edge in edges:
            for _ in range(half):
                _link(spec, edge, _host(spec, f"h{host_number}"))
                host_number += 1
        for agg in aggs:
            for edge in edges:
                _link(spec, agg, edge)
        for i, agg in enumerate(aggs):
            for core in cores[i * half : (i + 1) * half]:
                _link(spec, core, agg)
    return spec


def _random(n: int, seed: int = 1, degree: float = 2.5) -> TopologySpec:
    return random_topology(n, seed, degree)


# --- Mininet's --topo option ------------------------------------------------------

_Builder = Callable[..., TopologySpec]

TOPOS: dict[str, tuple[_Builder, tuple[str, ...], int, str]] = {
    # name: (builder, parameter names, how many are required, usage)
    "minimal": (minimal, (), 0, "minimal"),
    "single": (single, ("k",), 0, "single,N"),
    "linear": (linear, ("k", "n"), 0, "linear,K[,N]"),
    "reversed": (reversed_, ("k",), 0, "reversed,N"),
    "tree": (tree, ("depth", "fanout"), 0, "tree,DEPTH[,FANOUT]"),
    "torus": (torus, ("x", "y", "n"), 2, "torus,X,Y[,N]"),
    # fidelnet's own: HVNet's seeded random topologies of routers (randomnet.py)
    "random": (_random, ("n", "seed", "degree"), 1, "random,N[,seed=S][,degree=D]"),
}
"""Mininet's ``mn --topo`` names with their builders (defaults as in Mininet)."""
_USAGES = tuple(entry[3] for entry in TOPOS.values())


def _numeric(text: str) -> int | float | str:
    """Mininet's ``makeNumeric``: int, else float, else the text."""
    text = text.strip()
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


def _split_args(text: str) -> tuple[str, list[int | float | str], dict[str, int | float | str]]:
    """Mininet's ``splitArgs``: ``name,arg,...,key=value``."""
    name, *params = text.split(",")
    args = [_numeric(p) for p in params if "=" not in p]
    kwargs = {}
    for p in params:
        if "=" in p:
            key, value = p.split("=", 1)
            kwargs[key.strip()] = _numeric(value)
    return name.strip(), args, kwargs


def _bind(text: str) -> tuple[str, dict[str, int | float | str]]:
    """The topology name and its keyword arguments, checked against its parameters."""
    name, args, kwargs = _split_args(text)
    if name not in TOPOS:
        raise ValidationError("topo", f"unknown topology {name!r}", text, _USAGES)
    _, params, required, usage = TOPOS[name]
    choices = [usage, *(f"{p}=" for p in params)]
    if len(args) > len(params):
        raise ValidationError(
            "topo", f"{name} takes at most {len(params)} positional arguments", text, choices
        )
    bound = dict(zip(params, args, strict=False))
    for key, value in kwargs.items():
        if key not in params:
            raise ValidationError("topo", f"{name} has no parameter {key!r}", text, choices)
        if key in bound:
            raise ValidationError("topo", f"{name}: {key} is given twice", text, choices)
        bound[key] = value
    missing = [p for p in params[:required] if p not in bound]
    if missing:
        raise ValidationError("topo", f"{name} needs {', '.join(missing)}", text, choices)
    return name, bound


def from_mn_spec(text: str) -> TopologySpec:
    """Parse Mininet's ``--topo`` string: ``minimal``, ``single,N``, ``linear,K[,N]``,
    ``reversed,N``, ``tree,D[,F]`` (or ``tree,depth=D,fanout=F``), ``torus,X,Y[,N]``,
    and fidelnet's ``random,N[,seed=S][,degree=D]`` (:mod:`~fidelnet.topology.randomnet`).

    Keywords use the parameter names of Mininet's ``build()``. Any problem raises
    :class:`ValidationError` with field ``"topo"``.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValidationError("topo", "expected a topology name", text, _USAGES)
    name, bound = _bind(text)
    builder = TOPOS[name][0]
    try:
        return builder(**bound)
    except ValidationError as exc:
        raise ValidationError(
            "topo", f"{exc.field}: {exc.problem}", text, [TOPOS[name][3]]
        ) from exc
