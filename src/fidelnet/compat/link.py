"""Mininet's ``mininet.link``: links between nodes, on fidelnet's veth pairs.

``Link(node1, node2, port1=None, port2=None, intfName1=None, intfName2=None,
addr1=None, addr2=None, intf=Intf, cls1=None, cls2=None, params1=None,
params2=None, fast=True, **params)`` picks ports and names as Mininet does, checks
the link (names, ports, addresses, shaping) before anything is made, creates it
through the network on the backend its shaping needs (a veth pair shaped by tc, or
the link engine's TAP pair), then builds the two ``Intf`` objects, whose
``config(**params)`` applies addresses (and, for ``TCIntf``, later changes).

Parameters that the interface classes do not take (``bw=`` on a plain ``Link``)
draw one warning per link; Mininet ignores them without a word.

Names: :class:`Link`, :class:`TCLink`, :class:`EngineLink`, :class:`TCULink`, :class:`OVSLink`
(a plain link here), :class:`HwPair` (CIMininet's: a pair of real interfaces),
:class:`Intf`, :class:`TCIntf`, ``OVSIntf`` (= Intf).
"""

from __future__ import annotations

from typing import Any

from fidelnet.compat import _context
from fidelnet.compat._intf import Intf, TCIntf, tc_params
from fidelnet.errors import ValidationError
from fidelnet.links import Link as _CoreLink
from fidelnet.links.params import PARAM_NAMES
from fidelnet.topology.spec import LinkParams, LinkSpec

__all__ = [
    "EngineLink",
    "HwPair",
    "Intf",
    "Link",
    "OVSIntf",
    "OVSLink",
    "TCIntf",
    "TCLink",
    "TCULink",
]

OVSIntf = Intf

# Keys of a Topo link's info dict that are not interface parameters.
LINK_KEYS = frozenset(
    {
        "node1",
        "node2",
        "port1",
        "port2",
        "intfName1",
        "intfName2",
        "addr1",
        "addr2",
        "intf",
        "cls1",
        "cls2",
        "params1",
        "params2",
        "fast",
        "cls",
        "key",
    }
)


def resolve(cls: Any) -> Any:
    """The class a (possibly ``custom()``-wrapped) constructor builds."""
    return getattr(cls, "fn_cls", cls)


def preset(cls: Any) -> dict[str, Any]:
    """Parameters a ``custom()`` constructor adds."""
    return dict(getattr(cls, "fn_params", {}))


def is_tc(cls: Any) -> bool:
    target = resolve(cls)
    return isinstance(target, type) and issubclass(target, TCIntf)


def end_params(cls: Any, params: dict[str, Any], where: str) -> LinkParams | None:
    """Shaping one interface class will apply, or None when it shapes nothing."""
    merged = {**params, **preset(cls)}
    if not is_tc(cls):
        return None
    lp = tc_params(merged, where)
    return None if lp.is_empty() else lp


def drop_auto_ip(node: Any, port: int, ip: Any) -> None:
    """An address given for a node's first interface replaces the address Mininet
    picked for the node automatically (Mininet would overwrite the given one)."""
    if ip is None or not getattr(node, "fn_auto_ip", False):
        return
    if any(p < port for p in node.intfs):
        return
    node.fn_auto_ip = False
    node.params.pop("ip", None)
    node.spec.ip = None


class Link(_CoreLink):
    """A veth pair between two nodes."""

    intf1: Any  # Intf objects (or a user's Intf subclass)
    intf2: Any
    fn_deleted = False

    def __init__(
        self,
        node1: Any,
        node2: Any,
        port1: int | None = None,
        port2: int | None = None,
        intfName1: str | None = None,
        intfName2: str | None = None,
        addr1: str | None = None,
        addr2: str | None = None,
        intf: Any = Intf,
        cls1: Any = None,
        cls2: Any = None,
        params1: dict[str, Any] | None = None,
        params2: dict[str, Any] | None = None,
        fast: bool = True,
        **params: Any,
    ) -> None:
        net = node1.net
        if node2.net is not net and not (
            _context.adopt(node2, net) or _context.adopt(node1, node2.net)
        ):
            raise ValidationError(
                "link",
                "the two nodes belong to different networks (and neither is a node of "
                "the host's namespace without interfaces, which could join the other)",
                f"{node1}-{node2}",
            )
        net = node1.net
        self.fast = fast
        p1, p2 = dict(params1 or {}), dict(params2 or {})
        if port1 is not None:
            p1["port"] = port1
        if port2 is not None:
            p2["port"] = port2
        p1.setdefault("port", node1.newPort())
        p2.setdefault("port", node2.newPort())
        intfName1 = intfName1 or self.intfName(node1, p1["port"])
        intfName2 = intfName2 or self.intfName(node2, p2["port"])
        p1.update(params)
        p2.update(params)
        cls1, cls2 = cls1 or intf, cls2 or intf
        where = f"Link({node1.name}, {node2.name})"
        accepted = _context.accepted_params(resolve(cls1)) | _context.accepted_params(resolve(cls2))
        _context.warn_unknown(
            where,
            set(params) - accepted,
            "they need a TCLink or TCIntf" if set(params) & _TC_NAMES else "",
        )
        drop_auto_ip(node1, p1["port"], p1.get("ip"))
        drop_auto_ip(node2, p2["port"], p2.get("ip"))
        spec = LinkSpec(
            node1.name,
            node2.name,
            a_intf=intfName1,
            b_intf=intfName2,
            a_port=p1["port"],
            b_port=p2["port"],
            a_mac=addr1,
            b_mac=addr2,
            a_ip=_ip_or_none(p1.get("ip")),
            b_ip=_ip_or_none(p2.get("ip")),
            params_ab=end_params(cls1, p1, f"{where}.params1"),
            params_ba=end_params(cls2, p2, f"{where}.params2"),
            backend=getattr(type(self), "fn_backend", None),
        )
        self.fn_pool(net)
        _context.add_link_spec(net, spec)
        try:
            self.fn_before_realize(net)
            net.realize_link(spec)
        except BaseException:
            net.spec.links.remove(spec)
            raise
        port_1, port_2 = p1.pop("port"), p2.pop("port")
        self.spec = spec  # TCIntf.config compares its parameters with the link's
        i1 = cls1(name=intfName1, node=node1, port=port_1, link=self, mac=addr1, **p1)
        i2 = cls2(name=intfName2, node=node2, port=port_2, link=self, mac=addr2, **p2)
        super().__init__(spec, i1, i2)
        net.links.append(self)

    def fn_pool(self, net: Any) -> None:
        """What a link class adds to the network before its link is checked (nothing)."""

    def fn_before_realize(self, net: Any) -> None:
        """What a link class needs to do before its link is made (nothing here)."""

    def intfName(self, node: Any, n: int) -> str:
        """Mininet's interface name: ``h1-eth0``."""
        return f"{node.name}-eth{n}"

    def delete(self) -> None:
        """Delete both ends (a switch is told first) and let the network forget the
        link, so its ports and interface names may be used again. Once is enough: a
        deleted link's ``delete``/``stop`` does nothing."""
        if self.fn_deleted:
            return
        self.fn_deleted = True
        net = self.intf1.node.net if self.intf1.node else None
        stopping = _context.is_stopping(net) if net is not None else False
        for intf in (self.intf1, self.intf2):
            if intf.node is not None and not stopping:
                intf.node.port_removed(intf)  # a switch sends nothing to it from here on
        self.driver.remove()
        self.intf1.delete()
        self.intf2.delete()
        if net is not None and not stopping:
            net.forget_link(self)

    def stop(self) -> None:
        """Delete the link (when the network is stopping, its namespaces take it away)."""
        self.delete()

    def status(self) -> str:
        return f"({self.intf1.status()} {self.intf2.status()})"

    def __str__(self) -> str:
        return f"{self.intf1}<->{self.intf2}"


_TC_NAMES = frozenset(PARAM_NAMES)


def _ip_or_none(ip: Any) -> str | None:
    """A link end's address for the checks (an address without ``/len`` is refused
    there, as ``Intf.setIP`` refuses it in Mininet)."""
    return None if ip is None else str(ip)


class TCLink(Link):
    """A link whose interfaces are TCIntf (``bw``, ``delay``, ``loss``…)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("cls1", TCIntf)
        kwargs.setdefault("cls2", TCIntf)
        super().__init__(*args, **kwargs)


class EngineLink(TCLink):
    """fidelnet's own: a TCLink always carried by the link engine (``--link engine``),
    even when the kernel's tc could shape it."""

    fn_backend = "engine"


class TCULink(TCLink):
    """TCLink with checksum offload off (for the user-space switch)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(txo=False, rxo=False)
        super().__init__(*args, **kwargs)


class OVSLink(Link):
    """Mininet's OVS patch link; fidelnet's switches are bridges, so a plain link."""


class HwPair(Link):
    """CIMininet's ``HwPair``: a link carried by a pair of this machine's interfaces
    (two cabled NICs, or two SR-IOV VFs on one VLAN) instead of a veth pair
    (:mod:`fidelnet.hwlinks`). Give the pool first, then build::

        HwPair.available_pairs = [("enp100s0f0v0", "enp33s0f0v0"), ...]
        net = Mininet(topo, link=HwPair)

    Each link takes the next free pair; each interface moves into its node, renamed
    as Mininet names a link's end (``h1-eth0``), and comes back with its own name and
    settings when the network stops (or ``fidelnet clean`` runs after a crash)."""

    available_pairs: list[tuple[str, str]] = []
    fn_backend = "hw"

    def fn_pool(self, net: Any) -> None:
        pool = [(str(a), str(b)) for a, b in type(self).available_pairs]
        taken = set(net.hw_pairs.values())
        for pair in pool:
            if pair not in net.spec.hardware_pairs:
                net.spec.hardware_pairs.append(pair)
        free = [p for p in net.spec.hardware_pairs if (p[0], p[1]) not in taken]
        if not free:
            raise ValidationError(
                "HwPair.available_pairs",
                f"no free pair of interfaces: {len(taken)} in use, "
                f"{len(net.spec.hardware_pairs)} given; add pairs before building",
                pool,
            )

    def fn_before_realize(self, net: Any) -> None:
        from fidelnet import hwlinks

        hwlinks.preflight(net.spec, len(net.hw_pairs), net.sriov_pairs is not None)

    def delete(self) -> None:
        """Give the pair back (Mininet's ``delLink``), not delete it."""
        from fidelnet import hwlinks

        if self.fn_deleted:
            return
        self.fn_deleted = True
        net = self.intf1.node.net if self.intf1.node is not None else None
        for intf in (self.intf1, self.intf2):
            if intf.node is not None and not _context.is_stopping(intf.node.net):
                intf.node.port_removed(intf)
        self.driver.remove()
        if net is not None and not _context.is_stopping(net):
            hwlinks.release(net, self.spec)
        for intf in (self.intf1, self.intf2):
            if intf.node is not None:
                intf.node.delIntf(intf)
                _context.forget_intf(intf.node.net, intf.node.name, intf.name)
            intf.link = None
        if net is not None and not _context.is_stopping(net):
            net.forget_link(self)
