"""Splitting one topology over several machines (docs/cluster.md).

The topology becomes a weighted graph and METIS (:mod:`fidelnet.cluster._metis`)
cuts it into one part per machine:

- **vertices** are nodes: a namespace host, switch or router weighs 1, a VM node
  :data:`VM_WEIGHT` per virtual CPU (:func:`node_weight`);
- **edges** are links, weighing their rate in Mbit/s (the faster direction; an
  unshaped link or a trace-driven one :data:`UNSHAPED_MBPS`, :func:`link_weight`),
  so a cut goes through thin links rather than fat ones;
- **part sizes** are the machines' capacities (a relative weight: a number, or the
  forwarding capacity of the machine's calibration profile,
  :meth:`MachineSpec.from_profile`), as water-filled under each machine's optional
  hard ``max_weight``.

Some links are never cut, so their ends are contracted into one vertex first: a
host with a single link stays with the node it attaches to (its switch); a link
over a hardware pair stays on its machine; a link whose configured delay in either
direction is below the measured one-way delay between every pair of machines
cannot be carried across any of them.

Each round, METIS cuts the contracted graph, then groups are moved out of machines
over their ``max_weight`` into machines with room, cheapest cut first
(:func:`~fidelnet.cluster._graph.rebalance`). A link cuttable between near machines
but not between far ones is contracted when a round cuts it between far ones, and
the graph is cut again; a machine still over its ``max_weight`` gets a smaller
share next round; a machine in forbidden cuts two rounds running is left out (the
partition's ``notes`` say why); up to :data:`MAX_ROUNDS` rounds. A contracted group
heavier than every machine's ``max_weight``, a topology heavier than all of them
together, or rounds that run out end in :class:`PartitionError` naming the links,
nodes and machines concerned.

A cut link's ends shape their direction to the configured delay minus the
measured one-way delay between the two machines (:class:`CutLink`). Delays are in
seconds, as everywhere in the topology model.

Classes: :class:`MachineSpec`, :class:`CutLink`, :class:`Partition`,
:class:`PartitionError`; function :func:`partition`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from fidelnet.cluster import _metis
from fidelnet.cluster._graph import Graph, Groups, allot, contract_graph, rebalance
from fidelnet.cluster.machines import (
    Delays,
    DelayTable,
    MachineSpec,
    check_machines,
    check_spec,
    delay_table,
)
from fidelnet.errors import FidelnetError
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec

__all__ = [
    "MAX_ROUNDS",
    "UNSHAPED_MBPS",
    "VM_WEIGHT",
    "CutLink",
    "Partition",
    "PartitionError",
    "link_weight",
    "node_weight",
    "partition",
]

UNSHAPED_MBPS = 10_000
"""The edge weight of a link without a rate: as heavy as a 10 Gbit/s link."""
VM_WEIGHT = 8
"""The vertex weight of one virtual CPU of a VM node (a namespace node weighs 1)."""
MAX_ROUNDS = 8
"""How many times the graph is cut before a partition is given up."""


class PartitionError(FidelnetError):
    """No partition honours the topology's links and the machines' limits.
    ``links`` (``"a-b"``), ``nodes`` and ``machines`` name what is concerned."""

    def __init__(
        self,
        message: str,
        *,
        links: Sequence[str] = (),
        nodes: Sequence[str] = (),
        machines: Sequence[str] = (),
    ) -> None:
        self.links = tuple(links)
        self.nodes = tuple(nodes)
        self.machines = tuple(machines)
        super().__init__(message)


@dataclass(frozen=True)
class CutLink:
    """A link whose ends are on two machines. ``delay_ab``/``delay_ba``: the
    configured delay of each direction (None: none configured, the link carries
    the network's own); ``network_ab``/``network_ba``: the measured one-way delay
    from ``a_machine`` to ``b_machine`` and back; ``compensated_ab``/
    ``compensated_ba``: what the sending end shapes, configured minus measured (0
    where no delay is configured)."""

    index: int
    """The link's position in the topology's ``links``."""
    a: str
    b: str
    a_machine: str
    b_machine: str
    weight: int
    delay_ab: float | None
    delay_ba: float | None
    network_ab: float
    network_ba: float
    compensated_ab: float
    compensated_ba: float

    @property
    def name(self) -> str:
        return f"{self.a}-{self.b}"


@dataclass(frozen=True)
class Partition:
    """Where each node goes: ``placement`` (node to machine, in the topology's node
    order), the ``cut`` links in link order, each machine's ``weights`` (every
    machine, in the given order, 0 when it got nothing), the summed weight of the cut
    links ``cut_weight`` (Mbit/s), how many ``rounds`` METIS was asked, and
    ``notes`` on machines left out (too far from the others for the topology's
    delays)."""

    placement: Mapping[str, str]
    cut: tuple[CutLink, ...]
    weights: Mapping[str, int]
    cut_weight: int
    rounds: int
    notes: tuple[str, ...] = ()

    def nodes_on(self, machine: str) -> list[str]:
        """The nodes placed on ``machine``, in the topology's order."""
        return [n for n, m in self.placement.items() if m == machine]

    def summary(self) -> str:
        """One line: each machine's weight, and the cut."""
        parts = ", ".join(f"{m} {w}" for m, w in self.weights.items())
        return f"weights {parts}; {len(self.cut)} cut links, cut weight {self.cut_weight}"


def node_weight(node: NodeSpec) -> int:
    """A node's vertex weight: :data:`VM_WEIGHT` per virtual CPU for a VM node, 1 for
    every namespace node (host, switch, router)."""
    if node.backend == "qemu":
        return VM_WEIGHT * max(1, node.vm.cpus if node.vm is not None else 1)
    return 1


def _mbps(bw: float | None) -> int:
    return UNSHAPED_MBPS if bw is None else max(1, round(bw / 1e6))


def link_weight(link: LinkSpec) -> int:
    """A link's edge weight: the rate of its faster direction in Mbit/s (at least 1);
    a direction without a rate (or driven by a trace) counts :data:`UNSHAPED_MBPS`."""
    ab, ba = link.direction(link.a), link.direction(link.b)
    return max(_mbps(None if ab.trace else ab.bw), _mbps(None if ba.trace else ba.bw))


def _configured(link: LinkSpec) -> tuple[float | None, float | None]:
    """Each direction's configured delay; None where none (or 0) is configured."""
    ab, ba = link.direction(link.a).delay, link.direction(link.b).delay
    return (ab or None), (ba or None)


def _cuttable(link: LinkSpec, ma: str, mb: str, owd: DelayTable) -> bool:
    d_ab, d_ba = _configured(link)
    return (d_ab is None or d_ab >= owd[ma, mb]) and (d_ba is None or d_ba >= owd[mb, ma])


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms"


def _delay_text(link: LinkSpec) -> str:
    d_ab, d_ba = _configured(link)
    if d_ab == d_ba or d_ba is None:
        return f"delay {_ms(d_ab or 0.0)}"
    if d_ab is None:
        return f"delay {_ms(d_ba)}"
    return f"delay {_ms(d_ab)} / {_ms(d_ba)}"


def _group_text(nodes: Sequence[str]) -> str:
    shown = ", ".join(nodes[:8])
    return "{" + shown + (f", ... ({len(nodes)} nodes)" if len(nodes) > 8 else "") + "}"


def _machines_max(machines: Sequence[MachineSpec]) -> str:
    return ", ".join(f"{m.name} {m.max_weight:g}" for m in machines if m.max_weight is not None)


def _room_text(machines: Sequence[MachineSpec], room: float) -> str:
    whole = all(m.max_weight is None or float(m.max_weight).is_integer() for m in machines)
    return f"{_machines_max(machines)}: {room:g}" + ("" if whole else " in whole weights")


def _refuse_heavy(
    graph: Graph,
    machines: Sequence[MachineSpec],
    why: Mapping[int, str],
    spec: TopologySpec,
    notes: Sequence[str],
) -> None:
    """Refuses when a contracted group weighs more than every machine may take."""
    if any(m.max_weight is None for m in machines):
        return
    largest = max(m.max_weight or 0.0 for m in machines)
    for rep, w in zip(graph.reps, graph.vweights, strict=True):
        if w <= largest:
            continue
        nodes = graph.members[rep]
        inside = set(nodes)
        pinned = [i for i in sorted(why) if spec.links[i].a in inside]
        if not pinned:
            head = "hosts stay with the node they attach to"
        else:
            head = why[pinned[0]]
            more = [f"{spec.links[i].a}-{spec.links[i].b}" for i in pinned[1:]]
            if more:
                head += f" (and {len(more)} more: " + ", ".join(more[:5])
                head += ", ...)" if len(more) > 5 else ")"
        raise PartitionError(
            f"{head}; the group {_group_text(nodes)} weighs {w}, more than any machine's "
            f"max weight {largest:g} ({_machines_max(machines)})"
            + "".join(f"; {n}" for n in notes),
            links=[f"{spec.links[i].a}-{spec.links[i].b}" for i in pinned],
            nodes=nodes,
            machines=[m.name for m in machines],
        )


def _apart(owd: DelayTable, a: str, b: str) -> float:
    return max(owd[a, b], owd[b, a])


def _contract(
    spec: TopologySpec,
    names: Sequence[str],
    owd: DelayTable,
    extra: Mapping[int, tuple[str, str, str]],
) -> tuple[Groups, dict[int, str]]:
    """The groups of nodes that stay together on ``names`` (the machines in use), and
    why each contracted link is never cut: hosts with one link, hardware pairs,
    delays below every pair's, and the links ``extra`` a round cut where it may not."""
    groups = Groups(list(spec.nodes))
    why: dict[int, str] = {}
    degree = dict.fromkeys(spec.nodes, 0)
    for link in spec.links:
        if link.a != link.b:
            degree[link.a] += 1
            degree[link.b] += 1
    pairs = [(a, b) for a in names for b in names if a != b]
    near = min(pairs, key=lambda p: (_apart(owd, *p), p)) if pairs else None
    for i, link in enumerate(spec.links):
        if link.a == link.b:
            continue
        if any(spec.nodes[n].kind == "host" and degree[n] == 1 for n in (link.a, link.b)):
            groups.union(link.a, link.b)
        if link.backend == "hw":
            groups.union(link.a, link.b)
            why[i] = f"link {link.a}-{link.b} runs over a hardware pair of one machine"
        elif near is not None and not any(_cuttable(link, ma, mb, owd) for ma, mb in pairs):
            groups.union(link.a, link.b)
            why[i] = (
                f"link {link.a}-{link.b} ({_delay_text(link)}) cannot be cut: machines "
                f"{near[0]}-{near[1]} are {_ms(_apart(owd, *near))} apart"
            )
        elif i in extra:
            groups.union(link.a, link.b)
            why[i] = extra[i][2]
    return groups, why


def _mover(
    spec: TopologySpec, graph: Graph, used: Sequence[str], owd: DelayTable
) -> Callable[[int, int, Sequence[int]], bool]:
    """Whether vertex ``v`` may move to part ``dst`` of ``parts``: no link of it would
    then be cut between machines its delays cannot span."""
    rep_of = {n: r for r in graph.reps for n in graph.members[r]}

    def may_move(v: int, dst: int, parts: Sequence[int]) -> bool:
        for u, i in graph.links[v]:
            if parts[u] == dst:
                continue
            link = spec.links[i]
            here, there = used[dst], used[parts[u]]
            a_here = rep_of[link.a] == graph.reps[v]
            ma, mb = (here, there) if a_here else (there, here)
            if not _cuttable(link, ma, mb, owd):
                return False
        return True

    return may_move


def partition(
    spec: TopologySpec,
    machines: Sequence[MachineSpec],
    delays: Delays | None = None,
    *,
    seed: int = 1,
) -> Partition:
    """Places every node of ``spec`` on one of ``machines`` (see the module doc).
    ``delays``: the measured one-way delays between the machines (required for two
    machines or more). The same input gives the same partition.

    Raises :class:`ValidationError` on bad input, before any partitioning, and
    :class:`PartitionError` when no partition honours the links and the limits."""
    machines = check_machines(machines)
    names = [m.name for m in machines]
    owd = delay_table(delays, names)
    check_spec(spec)
    # weights are whole: a max weight of 12.5 holds 12
    limit = [math.inf if m.max_weight is None else math.floor(m.max_weight) for m in machines]
    vweight = [node_weight(n) for n in spec.nodes.values()]
    total = sum(vweight)
    if total > sum(limit):
        raise PartitionError(
            f"the topology weighs {total}, more than the machines' max weights "
            f"together ({_room_text(machines, sum(limit))})",
            machines=names,
        )
    if len(machines) == 1 or not spec.nodes:
        only = names[0]
        return Partition(
            {n: only for n in spec.nodes}, (), {m: total if m == only else 0 for m in names}, 0, 0
        )

    eweight = [link_weight(link) for link in spec.links]
    caps = list(limit)  # the caps METIS aims under; shrunk where a round overshot
    active = list(range(len(machines)))  # the machines in use
    extra: dict[int, tuple[str, str, str]] = {}  # link -> machines it was cut between, why
    strikes = dict.fromkeys(names, 0)  # rounds in a row a machine was in a forbidden cut
    notes: list[str] = []
    problems: list[str] = []
    bad_links: list[str] = []
    for rounds in range(1, MAX_ROUNDS + 1):
        used = [names[k] for k in active]
        groups, why = _contract(spec, used, owd, extra)
        graph = contract_graph(spec, groups, vweight, eweight)
        _refuse_heavy(graph, [machines[k] for k in active], why, spec, notes)
        total_w = float(sum(graph.vweights))
        shares = allot(total_w, [machines[k].capacity for k in active], [caps[k] for k in active])
        parts = _metis.part_graph(
            len(active),
            graph.xadj,
            graph.adjncy,
            vweights=graph.vweights,
            eweights=graph.eweights,
            tpwgts=[s / total_w for s in shares],
            seed=seed,
        )
        parts = rebalance(graph, parts, [limit[k] for k in active], _mover(spec, graph, used, owd))
        placement_of = {
            n: used[parts[v]] for v, rep in enumerate(graph.reps) for n in graph.members[rep]
        }
        placement = {n: placement_of[n] for n in spec.nodes}
        weights = dict.fromkeys(names, 0)
        for n, where in placement.items():
            weights[where] += node_weight(spec.nodes[n])
        problems = []
        bad_links = []
        involved = dict.fromkeys(names, 0)
        for i, link in enumerate(spec.links):
            ma, mb = placement[link.a], placement[link.b]
            if ma != mb and not _cuttable(link, ma, mb, owd):
                text = (
                    f"link {link.a}-{link.b} ({_delay_text(link)}) cannot be cut between "
                    f"machines {ma}-{mb}: they are {_ms(_apart(owd, ma, mb))} apart"
                )
                extra[i] = (ma, mb, text)
                involved[ma] += 1
                involved[mb] += 1
                problems.append(text)
                bad_links.append(f"{link.a}-{link.b}")
        for j, k in enumerate(active):
            m = machines[k]
            if weights[m.name] > limit[k]:
                # METIS overshot its share by weight/share: aim that much lower, and a bit
                caps[k] = min(caps[k], 0.98 * shares[j] * limit[k] / weights[m.name])
                problems.append(f"{m.name} weighs {weights[m.name]} (max {limit[k]:g})")
        if not problems:
            return _result(spec, placement, weights, eweight, owd, rounds, notes)
        for name in names:
            strikes[name] = strikes[name] + 1 if involved[name] else 0
        # A machine in forbidden cuts two rounds running is too far from the others
        # for this topology's delays: the rest go on without it.
        worst = max(
            active,
            key=lambda k: (
                involved[names[k]],
                sum(_apart(owd, names[k], names[o]) for o in active if o != k),
                -k,
            ),
        )
        if strikes[names[worst]] >= 2 and len(active) > 1:
            gone = names[worst]
            active.remove(worst)
            reason = next(t for a, b, t in extra.values() if gone in (a, b))
            notes.append(f"machine {gone} left out: {reason}")
            extra = {i: e for i, e in extra.items() if gone not in e[:2]}
            strikes = dict.fromkeys(names, 0)
            room = sum(limit[k] for k in active)
            if total > room:
                raise PartitionError(
                    f"{notes[-1]}; the topology weighs {total}, more than the other "
                    f"machines' max weights together "
                    f"({_room_text([machines[k] for k in active], room)})",
                    machines=names,
                )
    heavy = sorted(zip(graph.vweights, graph.reps, strict=True), key=lambda x: (-x[0], x[1]))
    whole = [f"{_group_text(graph.members[r])} {w}" for w, r in heavy[:3] if w > 1]
    if whole:  # groups too coarse to pack under the limits are the likely cause
        notes.append("nodes that stay together weigh up to " + ", ".join(whole))
    raise PartitionError(
        f"no partition found in {MAX_ROUNDS} rounds: " + "; ".join(problems[:5] + notes),
        links=bad_links,
        machines=names,
    )


def _result(
    spec: TopologySpec,
    placement: dict[str, str],
    weights: dict[str, int],
    eweight: Sequence[int],
    owd: DelayTable,
    rounds: int,
    notes: Sequence[str],
) -> Partition:
    cut: list[CutLink] = []
    for i, link in enumerate(spec.links):
        ma, mb = placement[link.a], placement[link.b]
        if ma == mb:
            continue
        d_ab, d_ba = _configured(link)
        n_ab, n_ba = owd[ma, mb], owd[mb, ma]
        cut.append(
            CutLink(
                i,
                link.a,
                link.b,
                ma,
                mb,
                eweight[i],
                d_ab,
                d_ba,
                n_ab,
                n_ba,
                0.0 if d_ab is None else d_ab - n_ab,
                0.0 if d_ba is None else d_ba - n_ba,
            )
        )
    return Partition(
        placement, tuple(cut), weights, sum(c.weight for c in cut), rounds, tuple(notes)
    )
