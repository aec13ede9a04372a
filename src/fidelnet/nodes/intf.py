"""Runtime interfaces: one end of a link, living in a node's namespace."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from fidelnet.errors import ValidationError

if TYPE_CHECKING:
    from fidelnet.links import Link
    from fidelnet.nodes.node import Node

__all__ = ["Interface"]


class Interface:
    """An interface of ``node`` (a veth end, or a switch's bridge port)."""

    def __init__(self, node: Node, name: str, port: int, index: int) -> None:
        self.node = node
        self.name = name
        self.port = port
        self.index = index
        self.link: Link | None = None
        self._ip: str | None = None
        self._prefixlen: int | None = None
        self._mac: str | None = None

    def __repr__(self) -> str:
        return f"<Interface {self.node.name}:{self.name}>"

    def __str__(self) -> str:
        return self.name

    @property
    def ip(self) -> str | None:
        return self._ip

    @property
    def prefixlen(self) -> int | None:
        return self._prefixlen

    @property
    def mac(self) -> str | None:
        if self._mac is None:
            self._mac = str(self.node.interior().link_info(self.index)["mac"])
        return self._mac

    def set_ip(self, cidr: str, *, replace: bool = True) -> None:
        """Set the interface's IPv4 address (``"10.0.0.1/8"``), replacing any other
        unless ``replace`` is False."""
        try:
            iface = ipaddress.ip_interface(cidr)
        except ValueError as exc:
            raise ValidationError(f"{self.name}.ip", "not an address with prefix", cidr) from exc
        inside = self.node.interior()
        if replace:
            inside.flush_addresses(self.index)
        inside.add_address(self.index, str(iface))
        self._ip, self._prefixlen = str(iface.ip), iface.network.prefixlen

    def set_mac(self, mac: str) -> None:
        self.node.interior().set_link(self.index, address=mac)
        self._mac = mac.lower()

    def set_up(self, up: bool = True) -> None:
        """Bring the interface up or down; a switch's datapath is told first: it stops
        sending to a port before it goes down, and is ready for the first frame (and
        MLD report) that comes in once it is up."""
        self.node.port_changed(self, up)
        self.node.interior().set_link(self.index, state="up" if up else "down")

    def is_up(self) -> bool:
        return bool(self.node.interior().link_info(self.index)["up"])

    def peer(self) -> Interface | None:
        if self.link is None:
            return None
        return self.link.intf2 if self.link.intf1 is self else self.link.intf1
