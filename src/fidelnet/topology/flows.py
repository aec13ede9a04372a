"""Per-flow policy routing (HVNet): a flow's packets take the path the flow names,
whatever the destination routes say (pure data; the kernel side is in
:mod:`fidelnet.l3`).

A :class:`FlowSpec` names its path node by node and the UDP (or TCP) destination
port that marks its packets. On every node of the path but the last, one ``ip rule``
(protocol and destination port) sends the flow's packets to a routing table of that
node's interface towards the next node, whose one route is the default route via
the next node's address on that link. Ports are unique per protocol, so a rule
matches one flow. Consecutive nodes of a path must be directly linked and routed
(hosts or routers, not switches); intermediate nodes must be routers (they forward).

:func:`check_flows` names every problem before anything is built; :func:`plan`
turns the flows into the tables and rules of each node.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from fidelnet.errors import ValidationError
from fidelnet.topology.addressing import interfaces
from fidelnet.topology.spec import FlowSpec, TopologySpec

__all__ = [
    "FLOW_PROTOCOLS",
    "FlowSpec",
    "NodePolicy",
    "check_flows",
    "plan",
    "table_id",
]

FLOW_PROTOCOLS: dict[str, int] = {"udp": 17, "tcp": 6}
RULE_PRIORITY = 1000
"""The first flow's rule priority (the main table's rule is 32766: flows come first)."""
TABLE_BASE = 1000
"""A node's table for its interface on port ``p`` is ``TABLE_BASE + p``."""
MAX_FLOWS = 10_000


@dataclass
class NodePolicy:
    """One node's part: ``tables`` {table id: (gateway, interface name)} and ``rules``
    (priority, protocol number, destination port, table id)."""

    tables: dict[int, tuple[str, str]]
    rules: list[tuple[int, int, int, int]]


def table_id(port: int) -> int:
    return TABLE_BASE + port


def _links_between(spec: TopologySpec) -> dict[frozenset[str], int]:
    out: dict[frozenset[str], int] = {}
    for i, link in enumerate(spec.links):
        out.setdefault(frozenset((link.a, link.b)), i)
    return out


def check_flows(spec: TopologySpec) -> Iterator[ValidationError]:
    flows = spec.flows
    if len(flows) > MAX_FLOWS:
        yield ValidationError("flows", f"at most {MAX_FLOWS} flows", len(flows))
        return
    between = _links_between(spec)
    names: set[str] = set()
    ports: dict[tuple[str, int], str] = {}
    for i, flow in enumerate(flows):
        where = f"flows[{i}]"
        if not isinstance(flow, FlowSpec):
            yield ValidationError(where, "must be a FlowSpec", flow)
            continue
        if not flow.name or flow.name in names:
            yield ValidationError(f"{where}.name", "must be a name of its own", flow.name)
        names.add(flow.name)
        if flow.protocol not in FLOW_PROTOCOLS:
            yield ValidationError(
                f"{where}.protocol", "unknown protocol", flow.protocol, list(FLOW_PROTOCOLS)
            )
        elif not isinstance(flow.port, int) or not 1 <= flow.port <= 65535:
            yield ValidationError(f"{where}.port", "must be a port in 1..65535", flow.port)
        elif (flow.protocol, flow.port) in ports:
            yield ValidationError(
                f"{where}.port",
                f"{flow.protocol} port {flow.port} marks {ports[flow.protocol, flow.port]} "
                "already: each flow needs a port of its own",
                flow.port,
            )
        else:
            ports[flow.protocol, flow.port] = flow.name
        if flow.rate_bps is not None and not flow.rate_bps > 0:
            yield ValidationError(f"{where}.rate_bps", "must be > 0", flow.rate_bps)
        if flow.size is not None and not 28 <= flow.size <= 9000:
            yield ValidationError(f"{where}.size", "must be 28..9000 bytes", flow.size)
        yield from _check_path(spec, between, f"{where}.path", flow.path)


def _check_path(
    spec: TopologySpec, between: dict[frozenset[str], int], where: str, path: tuple[str, ...]
) -> Iterator[ValidationError]:
    if not isinstance(path, tuple | list) or len(path) < 2:
        yield ValidationError(where, "needs a source and a destination", path)
        return
    if len(set(path)) != len(path):
        yield ValidationError(where, "visits a node twice", list(path))
        return
    for k, name in enumerate(path):
        node = spec.nodes.get(name)
        if node is None:
            yield ValidationError(f"{where}[{k}]", "unknown node", name, list(spec.nodes)[:20])
            return
        if node.kind == "switch":
            yield ValidationError(
                f"{where}[{k}]", "is a switch: a flow's path lists routed nodes", name
            )
            return
        if 0 < k < len(path) - 1 and node.kind != "router":
            yield ValidationError(
                f"{where}[{k}]", f"{name} is a {node.kind} and does not forward: make it a router",
                name,
            )  # fmt: skip
    for k in range(len(path) - 1):
        if frozenset((path[k], path[k + 1])) not in between:
            yield ValidationError(
                f"{where}[{k + 1}]",
                f"no link joins {path[k]} and {path[k + 1]}: the path is not connected",
                path[k + 1],
            )


def plan(spec: TopologySpec) -> dict[str, NodePolicy]:
    """The tables and rules of every node a flow leaves (ports and addresses as
    :func:`~fidelnet.topology.addressing.interfaces` gives them). Raises a
    :class:`ValidationError` when a next hop has no IPv4 address on the link."""
    between = _links_between(spec)
    ends = {(e.link, e.side): e for e in interfaces(spec)}
    out: dict[str, NodePolicy] = {}
    for i, flow in enumerate(spec.flows):
        proto = FLOW_PROTOCOLS[flow.protocol]
        for k in range(flow.hops):
            here, there = flow.path[k], flow.path[k + 1]
            li = between[frozenset((here, there))]
            link = spec.links[li]
            mine = ends[li, "a" if link.a == here else "b"]
            theirs = ends[li, "b" if link.a == here else "a"]
            if theirs.ip is None or ":" in theirs.ip:
                raise ValidationError(
                    f"flows[{i}].path[{k + 1}]",
                    f"{there} has no IPv4 address on its link to {here}: a flow's next hop "
                    "needs one",
                    there,
                )
            gateway = theirs.ip.split("/")[0]
            node = out.setdefault(here, NodePolicy({}, []))
            table = table_id(mine.port)
            node.tables[table] = (gateway, mine.name)
            node.rules.append((RULE_PRIORITY + i, proto, flow.port, table))
    return out
