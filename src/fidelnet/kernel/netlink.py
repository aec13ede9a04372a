"""Interfaces, addresses, routes and neighbours over netlink (pyroute2).

One :class:`Netlink` handle talks to one network namespace (or the host's, with
``path=None``). Handles are opened inside the namespace through
:func:`fidelnet.kernel.ns.entered` and stay bound to it, so a single process can
configure every node without forking. Every call takes kernel names and numbers
that were validated above this layer; nothing here builds a command line.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Sequence
from typing import Any

from fidelnet.errors import KernelError
from fidelnet.kernel import ns, rtnl
from fidelnet.kernel._pyroute2 import IPRoute, NetlinkError

__all__ = ["Netlink", "NetlinkError"]

IFF_UP = 0x1


_route_msg = rtnl.route_msg  # kept under its old name for the unit tests
_FAST_LINK_ATTRS = frozenset({"state", "address", "ifalias", "master", "mtu"})


class Netlink:
    """A netlink handle bound to one network namespace."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        if path is None:
            self.ipr: Any = IPRoute()
        else:
            with ns.entered(path):
                self.ipr = IPRoute()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ipr.close()

    # -- links --------------------------------------------------------------

    def index(self, ifname: str) -> int:
        idx = self.index_or_none(ifname)
        if idx is None:
            raise KernelError(f"{ifname}: no such interface in {self.path or 'host namespace'}")
        return idx

    def index_or_none(self, ifname: str) -> int | None:
        # if_nametoindex in the namespace costs microseconds; a netlink dump costs
        # milliseconds once a namespace holds hundreds of bridge ports.
        ctx = ns.entered(self.path) if self.path else contextlib.nullcontext()
        with ctx:
            try:
                return socket.if_nametoindex(ifname)
            except OSError:
                return None

    def add_veth(self, name: str, peer: str, peer_ns: str | None) -> int:
        """Create a veth pair here, with the peer end in the namespace at ``peer_ns``."""
        fd = os.open(peer_ns, os.O_RDONLY) if peer_ns is not None else None
        try:
            rtnl.check(self.ipr, rtnl.veth_msg(1, name, peer, fd))
        except NetlinkError as exc:
            raise KernelError(f"veth {name}/{peer}: {exc}") from exc
        finally:
            if fd is not None:
                os.close(fd)
        return self.index(name)

    def add_bridge(self, name: str, stp: bool) -> int:
        kwargs: dict[str, Any] = {}
        if stp:
            # The kernel's own STP: the shortest forward delay (2 s) and hello time (1 s)
            # it allows, so a tree converges fast, and the default max age (20 s). With
            # a max age of 6 s a 10x10 torus never converged: under the build's load,
            # bridges let stored BPDUs expire and recomputed the tree again and again
            # (docs/scale.md). Max age only bounds how long a silent neighbour is
            # trusted; a link going down is seen at once (carrier).
            kwargs = {
                "br_stp_state": 1,
                "br_forward_delay": 200,
                "br_hello_time": 100,
                "br_max_age": 2000,
            }
        try:
            self.ipr.link("add", ifname=name, kind="bridge", **kwargs)
        except NetlinkError as exc:
            raise KernelError(f"bridge {name}: {exc}") from exc
        return self.index(name)

    def set_link(self, index: int, **attrs: Any) -> None:
        """Set attributes: ``state="up"``, ``master=…``, ``address=…``, ``ifalias=…``,
        ``mtu=…`` (one hand-built request), or any other pyroute2 takes."""
        try:
            if attrs.keys() <= _FAST_LINK_ATTRS and attrs.get("state") in (None, "up", "down"):
                state = attrs.get("state")
                msg = rtnl.setlink_msg(
                    1,
                    index,
                    up=None if state is None else state == "up",
                    address=attrs.get("address"),
                    ifalias=attrs.get("ifalias"),
                    master=attrs.get("master"),
                    mtu=attrs.get("mtu"),
                )
                rtnl.check(self.ipr, msg)
            else:
                self.ipr.link("set", index=index, **attrs)
        except NetlinkError as exc:
            where = self.path or "host namespace"
            raise KernelError(f"link {index} in {where}: set {attrs}: {exc}") from exc

    def delete_link(self, index: int) -> None:
        self.ipr.link("del", index=index)

    def link_info(self, index: int) -> dict[str, Any]:
        msg = self.ipr.get_links(index)[0]
        return {
            "ifname": msg.get_attr("IFLA_IFNAME"),
            "mac": msg.get_attr("IFLA_ADDRESS"),
            "alias": msg.get_attr("IFLA_IFALIAS"),
            "up": bool(msg["flags"] & IFF_UP),
            "operstate": msg.get_attr("IFLA_OPERSTATE"),
            "mtu": msg.get_attr("IFLA_MTU"),
        }

    def link_drops(self) -> dict[str, tuple[int, int, int]]:
        """(index, rx_dropped, tx_dropped) of every interface here, by name (one dump)."""
        out: dict[str, tuple[int, int, int]] = {}
        for msg in self.ipr.get_links():
            stats = msg.get_attr("IFLA_STATS64") or msg.get_attr("IFLA_STATS") or {}
            out[msg.get_attr("IFLA_IFNAME")] = (
                int(msg["index"]),
                int(stats.get("rx_dropped", 0)),
                int(stats.get("tx_dropped", 0)),
            )
        return out

    def bridge_port_states(self, bridge_index: int) -> list[int]:
        """STP states of the bridge's ports (3 = forwarding, 4 = blocking)."""
        states = []
        for msg in self.ipr.get_links(family=7, match={"master": bridge_index}):  # AF_BRIDGE
            for attr in msg.get("attrs", []):
                if attr[0] == "IFLA_PROTINFO":
                    st = attr[1].get_attr("IFLA_BRPORT_STATE")
                    if st is not None:
                        states.append(int(st))
        return states

    # -- addresses and routes -------------------------------------------------

    def flush_addresses(self, index: int, family: int = 2) -> None:
        with contextlib.suppress(NetlinkError):
            self.ipr.flush_addr(index=index, family=family)

    def add_address(self, index: int, cidr: str) -> None:
        try:
            rtnl.check(self.ipr, rtnl.newaddr_msg(1, index, cidr))
        except NetlinkError as exc:
            raise KernelError(f"address {cidr} on link {index}: {exc}") from exc

    def addresses(self, index: int) -> list[str]:
        out = []
        for msg in self.ipr.get_addr(index=index):
            out.append(f"{msg.get_attr('IFA_ADDRESS')}/{msg['prefixlen']}")
        return out

    def add_route(self, dst: str, gateway: str | None = None, index: int | None = None) -> None:
        self.add_routes([(dst, gateway, index)])

    def add_routes(self, routes: Sequence[tuple[str, str | None, int | None]]) -> None:
        """Replace IPv4 routes ``(dst CIDR, gateway or None, out interface index or None)``
        in one netlink batch: one send, then one acknowledgement per route."""
        if not routes:
            return
        msgs = [rtnl.route_msg(seq, dst, gw, oif) for seq, (dst, gw, oif) in enumerate(routes, 1)]
        errors = [
            f"{dst} via {gw or oif}: {os.strerror(err)}"
            for (dst, gw, oif), err in zip(routes, rtnl.request(self.ipr, msgs), strict=True)
            if err
        ]
        if errors:
            raise KernelError(f"routes in {self.path or 'host namespace'}: " + "; ".join(errors))

    def add_flow_routes(
        self,
        tables: Sequence[tuple[int, str, int]],
        rules: Sequence[tuple[int, int, int, int]],
    ) -> None:
        """Per-flow policy routing (:mod:`fidelnet.topology.flows`): one default route
        per table, then one rule per flow (protocol and destination port)."""
        for table, gateway, index in tables:
            try:
                self.ipr.route("replace", dst="0.0.0.0/0", gateway=gateway, oif=index, table=table)
            except NetlinkError as exc:
                raise KernelError(f"table {table}: default via {gateway}: {exc}") from exc
        for priority, proto, port, table in rules:
            try:
                self.ipr.rule(
                    "add",
                    family=socket.AF_INET,
                    priority=priority,
                    table=table,
                    ip_proto=proto,
                    dport_range=f"{port}:{port}",
                )
            except NetlinkError as exc:
                raise KernelError(f"rule {priority}: protocol {proto} port {port}: {exc}") from exc

    def add_neighbour(self, index: int, ip: str, mac: str) -> None:
        try:
            self.ipr.neigh("replace", dst=ip, lladdr=mac, ifindex=index, state="permanent")
        except NetlinkError as exc:
            raise KernelError(f"neighbour {ip} -> {mac}: {exc}") from exc

    # -- sysctl ---------------------------------------------------------------

    def write_sysctl(self, key: str, value: str) -> str:
        """Set a ``net.*`` sysctl in this namespace; returns the previous value."""
        if not key.startswith("net.") or ".." in key:
            raise KernelError(f"sysctl {key}: only net.* keys are per namespace")
        proc = "/proc/sys/" + key.replace(".", "/")
        ctx = ns.entered(self.path) if self.path else contextlib.nullcontext()
        with ctx:
            with open(proc, encoding="ascii") as f:
                old = f.read().strip()
            with open(proc, "w", encoding="ascii") as f:
                f.write(value)
        return old
