"""What one machine builds of the links cut between machines (pure data).

Every machine's run must give a cut link's local end exactly what it has in the
whole topology: the interface name and port, the address and MAC (Mininet's rules
number ports and hosts over the *whole* topology, :mod:`fidelnet.topology.addressing`).
So both the part a shard builds (:func:`part_spec`) and its halves of the cut links
(:func:`halves`) are read off the whole topology with every port, name, address and
MAC resolved (:func:`resolved`).

A half's UDP ports: the ``k``-th cut link of the partition uses
``BASE_PORT + 2k`` at its ``a`` end and ``BASE_PORT + 2k + 1`` at its ``b`` end, so
two machines sharing one address (two agents on one host) never collide. That
allows :data:`MAX_CUT` cut links.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fidelnet.errors import FidelnetError
from fidelnet.topology import addressing
from fidelnet.topology.spec import LinkParams, TopologySpec

__all__ = ["BASE_PORT", "MAX_CUT", "Half", "halves", "part_spec", "ports", "resolved"]

BASE_PORT = 47000
MAX_CUT = (65535 - BASE_PORT) // 2


def ports(k: int) -> tuple[int, int]:
    """The UDP ports of the ``a`` and ``b`` ends of the ``k``-th cut link."""
    if not 0 <= k < MAX_CUT:
        raise FidelnetError(f"cut links: {k + 1} are more than the {MAX_CUT} ports allow")
    return BASE_PORT + 2 * k, BASE_PORT + 2 * k + 1


def resolved(spec: TopologySpec) -> TopologySpec:
    """A copy of ``spec`` with every link's ports and interface names, and every
    link end's effective address and MAC, written out."""
    whole = copy.deepcopy(spec)
    addressing.assign_ips(whole)
    addressing.assign_ports(whole)
    for end in addressing.interfaces(whole):
        link = whole.links[end.link]
        setattr(link, f"{end.side}_ip", end.ip)
        setattr(link, f"{end.side}_mac", end.mac)
    return whole


def part_spec(spec: TopologySpec, nodes: Sequence[str], links: Sequence[int]) -> TopologySpec:
    """The part of ``spec`` one shard builds: ``nodes`` and the links at the indices
    ``links`` (both ends in the part), each end as it is in the whole topology, and
    the flows whose whole path is in the part. A node whose default interface (the
    one its own address and MAC belong to) is on a cut link leaves them to that
    link's half (:func:`halves`)."""
    here = set(nodes)
    unknown = sorted(here - set(spec.nodes))
    if unknown:
        raise FidelnetError(f"part: nodes not in the topology: {', '.join(unknown)}")
    whole = resolved(spec)
    chosen = []
    for i in links:
        if not 0 <= i < len(whole.links):
            raise FidelnetError(f"part: link index {i} out of range (0..{len(whole.links) - 1})")
        link = whole.links[i]
        if link.a not in here or link.b not in here:
            raise FidelnetError(f"part: link {link.a}-{link.b} has an end outside the part")
        chosen.append(link)
    kept = set(links)
    defaults = {
        e.node: e.link for e in addressing.interfaces(whole) if e.default and e.node in here
    }
    part_nodes = {
        name: dataclasses.replace(node, ip=None, mac=None)
        if name in defaults and defaults[name] not in kept
        else node
        for name, node in whole.nodes.items()
        if name in here
    }
    return dataclasses.replace(
        whole,
        nodes=part_nodes,
        links=chosen,
        flows=[f for f in whole.flows if set(f.path) <= here],
    )


@dataclass(frozen=True)
class Half:
    """This machine's end of one cut link: the local ``node`` with its interface
    (``ifname``, ``port``, ``ip``, ``mac``) as in the whole topology, the link's
    direction from it (``out``) and towards it (``back``), its UDP ``local_port``,
    the other end's ``peer_port`` and machine."""

    name: str
    index: int
    node: str
    ifname: str
    port: int | None
    ip: str | None
    mac: str | None
    out: LinkParams
    back: LinkParams
    local_port: int
    peer_port: int
    peer_machine: str


def halves(spec: TopologySpec, cut: Sequence[Mapping[str, Any]], machine: str) -> list[Half]:
    """The halves ``machine`` builds of the cut links ``cut`` (a Shard's
    ``cutLinks``: ``name``, ``index``, ``a``, ``b``, ``aMachine``, ``bMachine``,
    ``ordinal``)."""
    whole = resolved(spec)
    out = []
    for c in cut:
        missing = [k for k in ("name", "index", "a", "b", "aMachine", "bMachine", "ordinal")
                   if k not in c]  # fmt: skip
        if missing:
            raise FidelnetError(f"cut link {c.get('name')}: no {', '.join(missing)}")
        index = int(c["index"])
        if not 0 <= index < len(whole.links):
            raise FidelnetError(f"cut link {c.get('name')}: index {index} out of range")
        link = whole.links[index]
        if (link.a, link.b) != (c["a"], c["b"]):
            raise FidelnetError(
                f"cut link {c.get('name')}: link {index} is {link.a}-{link.b} in the topology"
            )
        pa, pb = ports(int(c["ordinal"]))
        if c["aMachine"] == machine:
            side, peer, mine, theirs = "a", c["bMachine"], pa, pb
        elif c["bMachine"] == machine:
            side, peer, mine, theirs = "b", c["aMachine"], pb, pa
        else:
            continue
        node = getattr(link, side)
        out.append(
            Half(
                name=str(c["name"]),
                index=index,
                node=node,
                ifname=str(getattr(link, f"{side}_intf")),
                port=getattr(link, f"{side}_port"),
                ip=getattr(link, f"{side}_ip"),
                mac=getattr(link, f"{side}_mac"),
                out=link.direction(node),
                back=link.direction(link.b if side == "a" else link.a),
                local_port=mine,
                peer_port=theirs,
                peer_machine=str(peer),
            )
        )
    return out
