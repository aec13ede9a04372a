"""Cut links: one half of a link whose other end is on another machine.

A link cut by the partitioner (:mod:`fidelnet.cluster.partition`) is built as two
halves, one by each machine's run. Each half is an engine link in that run's linkd
between a TAP device in the local node (the link's interface, with the name,
address and MAC it has in the whole topology) and a UDP socket that talks to the
other half (linkd's ``udp`` endpoint, docs/linkd.md):

- the half's **outgoing** direction shapes what the link's configuration says of
  that direction (rate, queue, loss, duplication, corruption, a trace) **without
  its delay**, and hands each frame to the other machine stamped with the instant
  it left;
- the half's **incoming** direction holds the *other* direction's delay and jitter,
  counted from the sender's stamp: a frame is released its configured delay after
  it left the other machine, whatever the network between the machines took, as long
  as it took less. The network's delay and its jitter are compensated frame by
  frame; a frame that arrives after its release time leaves at once, and the
  engine counts it late, which the verdict sees (``engine_late``).

The remaining error is the clocks' offset between the machines
(``CutWire.clock_offset_ns``, 0 on one machine).

The interface's MTU is what fits in one datagram of the network between the
machines (:func:`inner_mtu`): a larger frame would be fragmented.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fidelnet.errors import ValidationError
from fidelnet.kernel.state import mark_for
from fidelnet.links.engine_params import direction_seed, to_engine
from fidelnet.topology.spec import LinkParams

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.nodes.intf import Interface

__all__ = ["OVERHEAD", "CutEnd", "CutWire", "add_cut_end", "inner_mtu", "split"]

OVERHEAD = 24 + 8 + 20 + 14
"""Bytes a frame grows by between the machines: linkd's cut-link header, UDP, IPv4,
and the inner frame's own Ethernet header (an MTU counts from the IP header)."""


def inner_mtu(wire_mtu: int) -> int:
    """The largest MTU of a cut link's interfaces on a network of ``wire_mtu``."""
    mtu = wire_mtu - OVERHEAD
    if mtu < 576:
        raise ValidationError(
            "wire_mtu", f"leaves {mtu} bytes for a cut link's frames, below IPv4's 576", wire_mtu
        )
    return mtu


@dataclass(frozen=True)
class CutWire:
    """Where a half talks to the other: ``local`` and ``peer`` addresses
    (``IP:PORT``), in the network namespace ``netns`` (a path; None: linkd's own),
    and the peer's clock minus this machine's, ns."""

    local: str
    peer: str
    netns: str | None = None
    clock_offset_ns: int = 0

    def endpoint(self, label: str) -> dict[str, Any]:
        for field in ("local", "peer"):
            _check_addr(field, getattr(self, field))
        out: dict[str, Any] = {
            "ifname": label,
            "kind": "udp",
            "local": self.local,
            "peer": self.peer,
            "clock_offset_ns": int(self.clock_offset_ns),
        }
        if self.netns is not None:
            out["netns"] = self.netns
        return out


def _check_addr(field: str, text: str) -> None:
    host, sep, port = text.rpartition(":")
    try:
        ipaddress.ip_address(host.strip("[]"))
        ok = bool(sep) and 0 < int(port) < 65536
    except ValueError:
        ok = False
    if not ok:
        raise ValidationError(f"wire.{field}", "must be an address like 10.0.0.1:4789", text)


_AT_RECEIVER = ("delay", "jitter", "jitter_dist", "reorder")


def split(out: LinkParams, back: LinkParams) -> tuple[LinkParams, LinkParams]:
    """The parameters of a half: (outgoing, incoming), from the link's direction
    ``out`` (from the local end) and ``back`` (towards it). The outgoing direction
    shapes everything but the delay; the incoming one has ``back``'s delay and
    jitter alone (the other half shaped the rest)."""
    tx = dataclasses.replace(out, **dict.fromkeys(_AT_RECEIVER))
    rx = LinkParams(**{f: getattr(back, f) for f in _AT_RECEIVER}, seed=back.seed)
    return tx, rx


@dataclass
class CutEnd:
    """A half built in this run: its engine link ``name``, the local interface, and
    the configured delay of each of its directions (``out``: towards the other
    machine, shaped here without delay; ``back``: the delay held here)."""

    name: str
    node: str
    intf: Interface
    wire: CutWire
    delay_back: float
    queue_out: int | None


def add_cut_end(
    net: Network,
    node: str,
    ifname: str,
    out: LinkParams,
    back: LinkParams,
    wire: CutWire,
    *,
    ip: str | None = None,
    mac: str | None = None,
    mtu: int | None = None,
    port: int | None = None,
    seed: int | None = None,
) -> CutEnd:
    """Build this run's half of a cut link: interface ``ifname`` of ``node`` (a host
    or router, or a switch: then a port of it, numbered ``port``; with ``ip``,
    ``mac`` and ``mtu``), carried by the run's linkd to ``wire.peer``, with
    the link's parameters ``out`` (from ``node``) and ``back`` (towards it); see the
    module doc. Everything is checked before anything is created."""
    from fidelnet.realize import setup_end

    where = f"cut link {node}:{ifname}"
    if node not in net.nodes:
        raise ValidationError(f"{where}.node", f"no node {node!r} in this run", node)
    n = net.nodes[node]
    if n.netns is None:
        raise ValidationError(f"{where}.node", "a cut link ends in a namespace", node)
    if any(i.name == ifname for i in n.intf_list()):
        raise ValidationError(f"{where}.ifname", f"{node} has an interface {ifname}", ifname)
    tx, rx = split(out, back)
    name = f"{node}:{ifname}"
    base = seed if seed is not None else net.seed
    ab = to_engine(tx, direction_seed(base, f"{name}/ab"), f"{where}.out")
    ba = to_engine(rx, direction_seed(base, f"{name}/ba"), f"{where}.back")
    b = wire.endpoint(f"cut{len(net.cut_ends)}")
    engine = net.link_engine()
    engine.add_cut_link(name, (n.netns, ifname), b, ab, ba)
    from fidelnet.nodes.intf import Interface as Intf

    nl = n.netlink()
    intf = Intf(n, ifname, port if port is not None else _next_port(n), nl.index(ifname))
    if mtu is not None:
        nl.set_link(intf.index, mtu=mtu)
    setup_end(n, intf, mac, ip, mark_for(net.run_id))
    end = CutEnd(name, node, intf, wire, float(back.delay or 0.0), out.max_queue_size)
    net.cut_ends.append(end)
    net.state_record("info", link=name, backend="engine", cut=True, peer=wire.peer)
    return end


def _next_port(node: Any) -> int:
    ports = [i.port for i in node.intf_list() if isinstance(i.port, int)]
    return max(ports, default=-1) + 1
