"""The XDP fast path for routers (``NodeSpec(kind="router", fastpath="xdp")``, or
``TopologySpec(fastpath="xdp")`` for every router): forwarding by the kernel's own
FIB and neighbour table inside an XDP program, so routed topologies forward
without each packet climbing the IP stack of every router. See docs/fastpath.md.

What it takes, set up once the routes exist (:func:`set_up`):

- the program on every veth-backed interface of the router (tc-shaped ones
  included: their shaping is on their egress, which the program never skips);
- the router's *ports*, the interfaces it may redirect to: those whose egress has
  nothing to honour (backend ``veth``), and those of engine links on AF_XDP
  endpoints, whose work is done after the router, by linkd, from the frame's arrival
  on the veth end beside it. A tc-shaped interface, or an engine link's TAP device,
  is not a port: packets for it go up the normal path;
- receive offload (GRO) on the other end of every plain router interface: a veth
  accepts redirected frames only with its NAPI on (an AF_XDP link's other end has
  linkd's XDP program, which turns NAPI on);
- complete checksums from every host and router: XDP keeps no checksum state, and
  a frame whose transport checksum was left to the device (veth's default) would
  arrive with a bad one. Their veth interfaces compute checksums in software
  (``tx-checksumming off``), which also turns off TSO on them.

A link changed at runtime (:meth:`fidelnet.links.Link.set`) that stops being plain
veth leaves the router's ports at once (:func:`link_changed`); an AF_XDP engine link
stays a port whatever its parameters become, since linkd applies them.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from fidelnet.kernel import xdp
from fidelnet.kernel.state import STATE_DIR

if TYPE_CHECKING:
    from fidelnet.links import Link
    from fidelnet.network import Network
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node
    from fidelnet.topology.spec import TopologySpec

__all__ = ["RouterFastPath", "link_changed", "preflight", "set_up", "stats", "wanted"]

log = logging.getLogger("fidelnet")


@dataclass
class RouterFastPath:
    """What the fast path does on one router: recorded in the run state and shown
    by :func:`stats`."""

    node: str
    interfaces: list[str]
    ports: list[str]
    maps: str
    left_out: dict[str, str] = field(default_factory=dict)  # interface: why not a port


def wanted(spec: TopologySpec) -> list[str]:
    """The routers of ``spec`` that ask for the XDP fast path."""
    return [
        n.name
        for n in spec.nodes.values()
        if n.kind == "router" and (n.fastpath or spec.fastpath) == "xdp"
    ]


def preflight(spec: TopologySpec) -> None:
    """Refuse before anything is built when a fast path is asked and the program or
    bpftool is missing."""
    if wanted(spec):
        xdp.find_object()
        xdp.check_tools()


def _peer(intf: Interface) -> Interface | None:
    link = intf.link
    if link is None:
        return None
    return link.intf2 if link.intf1 is intf else link.intf1


def _veth_backed(intf: Interface) -> bool:
    return intf.link is not None and (intf.link.backend in ("veth", "tc") or _af_xdp(intf))


def _af_xdp(intf: Interface) -> bool:
    """Whether ``intf`` is the node's side of an engine link on AF_XDP endpoints: a
    veth whose other end is linkd's (``<intf>-x``, with linkd's XDP program)."""
    link = intf.link
    if link is None or link.backend != "engine":
        return False
    choice = getattr(link.driver, "endpoint", None)
    return getattr(choice, "kind", None) == "af_xdp"


def _ethtool(node: Node, ifname: str, *features: str) -> None:
    out, err, code = node.pexec(["ethtool", "-K", ifname, *features])
    if code != 0:
        raise xdp.FastPathError(
            f"fastpath: {node.name}: ethtool -K {ifname} {' '.join(features)}: "
            f"{(err or out).strip()}"
        )


def set_up(net: Network) -> None:
    """Attach the fast path to every router that asks for it (after routes)."""
    names = wanted(net.spec)
    if not names:
        return
    obj = xdp.find_object()
    for node in net.nodes.values():
        if node.kind == "switch":
            continue
        for intf in node.intf_list():
            if _veth_backed(intf):
                _ethtool(node, intf.name, "tx", "off")
    pins = os.path.join(STATE_DIR, f"{net.run_id}-bpf")
    net.state_record("mount", path=pins)
    xdp.mount_bpffs(pins)
    for name in names:
        router = net.nodes[name]
        interfaces, ports, left_out = [], [], {}
        for intf in router.intf_list():
            backend = intf.link.backend if intf.link is not None else "none"
            if not _veth_backed(intf):
                left_out[intf.name] = (
                    "engine link on TAP endpoints: the node's side is a TAP device"
                    if backend == "engine"
                    else f"{backend} link: its endpoint is not a veth"
                )
                continue
            interfaces.append(intf.name)
            if _af_xdp(intf):
                ports.append(intf.name)  # its other end has linkd's program: NAPI is on
                continue
            peer = _peer(intf)
            if peer is not None:
                _ethtool(peer.node, peer.name, "gro", "on")
            if backend == "veth":
                ports.append(intf.name)
            else:
                left_out[intf.name] = "shaped with tc: its egress queue must see the packets"
        maps = os.path.join(pins, f"{name}-maps")
        xdp.attach(router.pexec, name, pins, obj, interfaces, ports, keep_pins=True)
        fp = RouterFastPath(name, interfaces, ports, maps, left_out)
        net.fastpath[name] = fp
        net.state_record("info", what="fastpath", node=name, interfaces=interfaces, ports=ports)
        log.info(
            "%s: XDP fast path on %s; redirects to %s",
            name,
            ", ".join(interfaces) or "no interface",
            ", ".join(ports) or "no port",
        )


def link_changed(net: Network, link: Link) -> None:
    """``link`` got new parameters: an interface of a fast-path router on it that is no
    longer plain veth stops being a port (packets for it take the normal path)."""
    for intf in (link.intf1, link.intf2):
        fp = net.fastpath.get(intf.node.name)
        if fp is None or intf.name not in fp.ports or link.backend == "veth" or _af_xdp(intf):
            continue
        xdp.remove_port(intf.node.pexec, fp.maps, intf.name)
        fp.ports.remove(intf.name)
        fp.left_out[intf.name] = f"{link.backend} link since a runtime change"
        log.info("%s: %s left the fast path (now %s)", fp.node, intf.name, link.backend)


def stats(net: Network) -> dict[str, dict[str, object]]:
    """Per fast-path router: its interfaces, ports, what was left out and why, and the
    program's counters summed over its interfaces."""
    out: dict[str, dict[str, object]] = {}
    for name, fp in net.fastpath.items():
        node = net.nodes[name]
        totals = dict.fromkeys(xdp.COUNTERS, 0)
        if fp.interfaces:
            # One program (one set of maps) serves every interface of the router.
            for k, v in xdp.stats(node.pexec, fp.interfaces[0]).items():
                totals[k] = v
        out[name] = {
            "interfaces": list(fp.interfaces),
            "ports": list(fp.ports),
            "left_out": dict(fp.left_out),
            "counters": totals,
        }
    return out
