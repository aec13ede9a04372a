"""Mininet's ``Intf`` and ``TCIntf`` on fidelnet's interfaces.

An ``Intf`` is constructed the Mininet way, ``Intf(name, node=..., port=...,
link=..., **params)``, after the kernel interface exists (a ``Link`` creates the
veth pair first): it takes the place of fidelnet's record of that interface on
its node and applies ``config(**params)``. Addresses, MACs and up/down go
through netlink; ``ifconfig(*args)`` runs ``ifconfig`` in the node, as in Mininet.

``TCIntf.config`` reads Mininet's units (``bw=10`` is 10 Mbit/s, ``delay='5ms'``)
into :class:`~fidelnet.topology.spec.LinkParams`. The link applies them on its
backend: the kernel's tc where the kernel can do all that is asked, the link engine
otherwise, moving a running link onto the engine when a change needs it (Mininet
prints an error when ``sch_netem`` is missing and carries on without the delay;
fidelnet never drops it silently).

Names: :class:`Intf`, :class:`TCIntf`, :func:`tc_params`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import re
from typing import Any

from fidelnet.compat import _context
from fidelnet.compat._params import set_param
from fidelnet.compat.log import debug, info
from fidelnet.errors import KernelError, NodeError, ValidationError
from fidelnet.kernel.netlink import NetlinkError
from fidelnet.links.params import PARAM_NAMES, format_params, parse_params
from fidelnet.nodes.intf import Interface
from fidelnet.topology.spec import LinkParams

__all__ = ["Intf", "TCIntf", "tc_params"]

_IP_RE = re.compile(r"\d+\.\d+\.\d+\.\d+")
_MAC_RE = re.compile(r"..:..:..:..:..:..")


def _lend(name: str, node: Any) -> int:
    """Move the host's interface ``name`` into ``node`` (recorded first, given back at
    the end: :mod:`fidelnet.kernel.hostintf`); a switch makes it a port. Returns its
    index in the node's namespace."""
    from fidelnet.kernel import hostintf

    if node.netns is None:
        raise NodeError(
            f"{node.name}: shares the host's namespace, where {name!r} already is; "
            "lend the interface to a node in a namespace of its own"
        )
    hostintf.lend(name, os.path.basename(node.netns), node.net.state_record)
    return int(node.netlink().index(name))


class Intf(Interface):
    """One end of a link, as Mininet sees it."""

    node: Any  # a fidelnet.compat node (Mininet's API on top of fidelnet's)

    def __init__(
        self,
        name: str,
        node: Any = None,
        port: int | None = None,
        link: Any = None,
        mac: str | None = None,
        **params: Any,
    ) -> None:
        params.pop("moveIntfFn", None)
        existing = None
        index = -1
        lent = False
        if node is not None:
            existing = next((i for i in node.intfs.values() if i.name == name), None)
            if existing is not None:
                index = existing.index
            else:
                found = node.netlink().index_or_none(name)
                if found is None:
                    found, lent = _lend(name, node), True
                index = found
            if port is None:
                port = existing.port if existing is not None else node.newPort()
        super().__init__(node, name, port if port is not None else -1, index)
        if existing is not None:
            self._ip, self._prefixlen, self._mac = (
                existing._ip,
                existing._prefixlen,
                existing._mac,
            )
        self.link = link
        if mac is not None:
            self._mac = mac.lower()
        # What the interface got when the network made it (up, its address and MAC), so
        # the first config() asking for the same is not sent to the kernel again.
        self._fn_fresh: dict[str, Any] = {}
        if existing is not None:
            self._fn_fresh = {"up": True, "ip": _cidr_of(self), "mac": self._mac}
        if node is not None:
            if existing is not None and existing is not self:
                node.ports.pop(existing, None)
            node.addIntf(self, port=port)
            if lent and getattr(node, "kind", "") == "switch":
                node.forwards_by().add_port(node, self)  # a lent interface: a new port
                self.set_up(True)
        self.params = params
        self.config(**params)
        self._fn_fresh.pop("up", None)

    def _fn_unchanged(self, what: str, value: Any) -> bool:
        """True (once) when ``value`` is what the interface was made with."""
        fresh = self._fn_fresh.pop(what, None)
        return fresh is not None and fresh == value

    # Mininet's Intf keeps these as plain attributes, which its code and subclasses
    # assign: here they are the interface's record of its address and MAC, so an
    # assigned value is what IP()/MAC() give (the kernel is changed by setIP/setMAC).
    @property
    def ip(self) -> str | None:
        return self._ip

    @ip.setter
    def ip(self, value: str | None) -> None:
        self._ip = value

    @property
    def mac(self) -> str | None:
        return super().mac

    @mac.setter
    def mac(self, value: str | None) -> None:
        self._mac = value

    @property
    def prefixLen(self) -> int | None:
        return self.prefixlen

    @prefixLen.setter
    def prefixLen(self, value: int | None) -> None:
        self._prefixlen = value

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        """Run a command in our node."""
        return str(self.node.cmd(*args, **kwargs))

    def ifconfig(self, *args: Any) -> str:
        """``ifconfig NAME args…`` in our node (``up``/``down`` go through netlink)."""
        words = [str(a) for a in args]
        self._fn_fresh.clear()
        if words in (["up"], ["down"]):
            try:
                self.set_up(words[0] == "up")
            except (KernelError, NodeError) as exc:  # said as ifconfig would say it
                return f"{exc}\n"
            return ""
        result = self.cmd("ifconfig", self.name, *words)
        if words:
            self.updateAddr()
        return result

    def setIP(self, ipstr: str, prefixLen: int | None = None) -> str:
        """Set our address (``10.0.0.1/8``, or ``10.0.0.1`` with ``prefixLen``)."""
        if "/" not in str(ipstr):
            if prefixLen is None:
                raise ValidationError(f"{self.name}.ip", "no prefix length given", ipstr)
            ipstr = f"{ipstr}/{prefixLen}"
        if not self._fn_unchanged("ip", _normal_cidr(str(ipstr))):
            self.set_ip(str(ipstr))
        debug(f"{self.node.name}: {self.name} has address {ipstr}\n")
        return ""

    def setMAC(self, macstr: str) -> str:
        if not self._fn_unchanged("mac", str(macstr).lower()):
            self.set_mac(macstr)
        debug(f"{self.node.name}: {self.name} has MAC {macstr}\n")
        return ""

    def updateIP(self) -> str | None:
        """Our IPv4 address as the kernel has it."""
        addrs = [
            a
            for a in self.node.interior().addresses(self.index)
            if isinstance(ipaddress.ip_interface(a), ipaddress.IPv4Interface)
        ]
        if addrs:
            iface = ipaddress.ip_interface(addrs[0])
            self._ip, self._prefixlen = str(iface.ip), iface.network.prefixlen
        else:
            self._ip, self._prefixlen = None, None
        return self._ip

    def updateMAC(self) -> str | None:
        self._mac = None
        return self.mac

    def updateAddr(self) -> tuple[str | None, str | None]:
        return self.updateIP(), self.updateMAC()

    def IP(self) -> str | None:
        return self.ip

    def MAC(self) -> str | None:
        return self.mac

    def isUp(self, setUp: bool = False) -> bool:
        if setUp:
            if not self._fn_unchanged("up", True):
                self.set_up(True)
            return True
        return self.is_up()

    def rename(self, newname: str) -> str:
        """Rename the interface (taken down and up again around it)."""
        self._fn_fresh.clear()
        nl = self.node.netlink()
        nl.set_link(self.index, state="down")
        nl.set_link(self.index, ifname=newname)
        nl.set_link(self.index, state="up")
        if self.node is not None and self.name in self.node.nameToIntf:
            self.node.nameToIntf[newname] = self.node.nameToIntf.pop(self.name)
            _context.forget_intf(self.node.net, self.node.name, self.name)
        self.name = newname
        return ""

    def setParam(self, results: dict[str, Any], method: str, **param: Any) -> Any:
        """Mininet's ``setParam``: see :func:`fidelnet.compat._params.set_param`."""
        return set_param(self, results, method, **param)

    def config(
        self,
        mac: str | None = None,
        ip: str | None = None,
        ifconfig: Any = None,
        up: bool = True,
        **_params: Any,
    ) -> dict[str, Any] | None:
        """Set MAC, address, up state and run ``ifconfig`` arguments, as given."""
        r: dict[str, Any] = {}
        self.setParam(r, "setMAC", mac=mac)
        self.setParam(r, "setIP", ip=ip)
        self.setParam(r, "isUp", up=up)
        self.setParam(r, "ifconfig", ifconfig=ifconfig)
        return r

    def delete(self) -> None:
        """Delete the interface (its veth peer goes with it)."""
        node = self.node
        if node is not None and not _context.is_stopping(node.net):
            with contextlib.suppress(NetlinkError, KernelError):
                node.port_removed(self)  # a switch sends nothing to it from here on
                node.netlink().delete_link(self.index)
        if node is not None:
            node.delIntf(self)
            _context.forget_intf(node.net, node.name, self.name)
        self.link = None

    def status(self) -> str:
        try:
            found = self.node.netlink().index_or_none(self.name)
        except (KernelError, NetlinkError, OSError):
            found = None
        return "OK" if found is not None else "MISSING"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __str__(self) -> str:
        return self.name


def _cidr_of(intf: Interface) -> str | None:
    return f"{intf.ip}/{intf.prefixlen}" if intf.ip is not None else None


def _normal_cidr(text: str) -> str | None:
    try:
        iface = ipaddress.ip_interface(text)
    except ValueError:
        return None
    return f"{iface.ip}/{iface.network.prefixlen}"


_MN_TC = ("bw", "delay", "jitter", "loss", "max_queue_size")


def tc_params(params: dict[str, Any], where: str) -> LinkParams:
    """Mininet's traffic-control parameters, and fidelnet's further link parameters
    (``reorder``, ``queue``, ``trace``, ``seed``...), as LinkParams in base units.

    ``bw`` is in Mbit/s unless it carries a unit; ``delay`` and ``jitter`` need a
    unit (``'5ms'``); ``loss`` is a percentage; zero delay, jitter or loss mean none,
    as in Mininet.
    """
    wanted = {k: params.get(k) for k in (*_MN_TC, *EXTRA_PARAMS) if params.get(k) is not None}
    return parse_params(wanted, where, mininet_units=True)


EXTRA_PARAMS = tuple(n for n in PARAM_NAMES if n not in _MN_TC)


class TCIntf(Intf):
    """An interface whose link is shaped (``bw``, ``delay``, ``jitter``, ``loss``,
    ``max_queue_size``, and fidelnet's further link parameters). The link's backend
    applies them: the kernel's tc where it can, the link engine otherwise."""

    bwParamMax = 1000
    fn_extra_params = EXTRA_PARAMS

    def config(  # type: ignore[override]
        self,
        bw: Any = None,
        delay: Any = None,
        jitter: Any = None,
        loss: Any = None,
        gro: bool = False,
        txo: bool = True,
        rxo: bool = True,
        speedup: float = 0,
        use_hfsc: bool = False,
        use_tbf: bool = False,
        latency_ms: float | None = None,
        enable_ecn: bool = False,
        enable_red: bool = False,
        max_queue_size: int | None = None,
        **params: Any,
    ) -> dict[str, Any] | None:
        """Configure as :meth:`Intf.config`, then shape this end's egress.

        When the link was built with these parameters already (the usual case: a
        ``TCLink`` passes them to both), nothing changes; otherwise they replace the
        direction's parameters at runtime, without emptying its queue."""
        del gro, txo, rxo, latency_ms
        params.pop("disable_gro", None)
        extra = {k: params.pop(k) for k in EXTRA_PARAMS if k in params}
        result = Intf.config(self, **params)
        where = f"{self.node.name}:{self.name}"
        lp = tc_params(
            {
                "bw": bw,
                "delay": delay,
                "jitter": jitter,
                "loss": loss,
                "max_queue_size": max_queue_size,
                **extra,
            },
            where,
        )
        if lp.is_empty():
            return None
        odd = [
            n
            for n, v in (
                ("speedup", speedup),
                ("use_hfsc", use_hfsc),
                ("use_tbf", use_tbf),
                ("enable_ecn", enable_ecn),
                ("enable_red", enable_red),
            )
            if v
        ]
        if odd:
            _context.warn_once(
                f"tc-odd:{','.join(odd)}",
                f"{where}: {', '.join(odd)} not supported; the link backend shapes",
            )
        link = self.link
        spec = getattr(link, "spec", None)
        if link is None or spec is None:
            raise ValidationError(where, "a shaped interface needs a link", self.name)
        key = "ab" if (spec.a, spec.a_intf) == (self.node.name, self.name) else "ba"
        if lp != spec.direction(spec.a if key == "ab" else spec.b):
            link.configure(lp if key == "ab" else None, lp if key == "ba" else None)
        info(f"({format_params(lp)}) ")
        assert result is not None
        result["tcoutputs"] = []
        result["parent"] = " parent 1:1 "
        return result
