"""A host's own interface lent to a node (Mininet's ``Intf('eth1', node=s1)``,
hwintf.py), and given back.

:func:`check` refuses, before anything moves, an interface that does not exist, the
loopback, the interface of the host's default route (moving it would cut the machine
off), and one that is a port of a bridge or bond. :func:`lend` records the interface's
name, index, MTU, up/down state and addresses in the run state, then moves it into
the node's namespace. :func:`give_back` (a normal stop, or ``fidelnet clean`` after a
crash) moves it back into the namespace of the process doing it and restores its
name, MTU, MAC, alias, addresses and state (and, for a hardware pair's end, removes the
qdiscs the run put on it). When the node's namespace is already gone the kernel
has put a physical device back into the initial namespace itself, possibly under
another name (virtual devices are destroyed with their namespace), and it is found
there by its index.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

from fidelnet.errors import KernelError, ValidationError
from fidelnet.kernel import ns, tc
from fidelnet.kernel.netlink import Netlink

__all__ = ["add_macvlan", "check", "check_parent", "give_back", "lend"]


def _default_route_ifindexes(nl: Netlink) -> set[int]:
    out = set()
    for family in (2, 10):
        for route in nl.ipr.get_default_routes(family=family):
            oif = route.get_attr("RTA_OIF")
            if oif is not None:
                out.add(int(oif))
    return out


def _existing(nl: Netlink, name: str, where: str) -> int:
    """The index of ``name`` here, or an error listing the interfaces there are."""
    idx = nl.index_or_none(name)
    if idx is None:
        names = sorted(
            str(m.get_attr("IFLA_IFNAME"))
            for m in nl.ipr.get_links()
            if m.get_attr("IFLA_IFNAME") != "lo"
        )
        raise ValidationError(where, "no such interface on this machine", name, names)
    return int(idx)


def check(name: str, where: str = "intf", free: bool = False) -> None:
    """Refuse ``name`` as an interface to lend, with a message naming why; with
    ``free`` (a hardware pair's end), also one that is up with addresses (in use)."""
    nl = Netlink(None)
    try:
        idx = _existing(nl, name, where)
        msg = nl.ipr.get_links(idx)[0]
        if msg["flags"] & 0x8:  # IFF_LOOPBACK
            raise ValidationError(where, "is the loopback; lend a real interface", name)
        if idx in _default_route_ifindexes(nl):
            raise ValidationError(
                where,
                "carries this machine's default route; moving it into a node would cut "
                "the machine off: lend another interface",
                name,
            )
        if msg.get_attr("IFLA_MASTER"):
            raise ValidationError(
                where, "is a port of a bridge or bond (in use); release it first", name
            )
        if free and msg["flags"] & 0x1:  # IFF_UP
            used = [a for a in nl.addresses(idx) if not a.startswith("fe80:")]
            if used:
                raise ValidationError(
                    where,
                    f"is up with addresses ({', '.join(used)}): in use on this machine; "
                    "take it down and remove them, or name another interface",
                    name,
                )
    finally:
        nl.close()


def check_parent(name: str, where: str) -> None:
    """Refuse ``name`` as the parent of a macvlan: it must exist and not be the loopback
    (the host's default-route interface is fine: the host keeps it)."""
    nl = Netlink(None)
    try:
        idx = _existing(nl, name, where)
        if nl.ipr.get_links(idx)[0]["flags"] & 0x8:
            raise ValidationError(where, "is the loopback; give a real interface", name)
    finally:
        nl.close()


def add_macvlan(
    parent: str, netns: str, name: str, record: Callable[..., None], where: str = "intf"
) -> None:
    """A macvlan (bridge mode) on the host's ``parent``, made straight in namespace
    ``netns`` (a name in /run/netns) as ``name``: recorded first, it goes with the
    namespace; the host keeps ``parent``."""
    check_parent(parent, where)
    nl = Netlink(None)
    try:
        record("link", ifname=name, netns=netns, parent=parent)
        fd = os.open(ns.path_of(netns), os.O_RDONLY)
        try:
            nl.ipr.link(
                "add",
                ifname=name,
                kind="macvlan",
                link=nl.index(parent),
                macvlan_mode="bridge",
                net_ns_fd=fd,
            )
        except Exception as exc:
            raise KernelError(f"{where}: a macvlan on {parent} in {netns}: {exc}") from exc
        finally:
            os.close(fd)
    finally:
        nl.close()


def lend(
    name: str,
    netns: str,
    record: Callable[..., None],
    rename: str | None = None,
    where: str = "intf",
    free: bool = False,
) -> None:
    """Record ``name``'s configuration, then move it into namespace ``netns`` (a
    name in /run/netns), named ``rename`` there when given."""
    check(name, where, free)
    nl = Netlink(None)
    try:
        idx = nl.index(name)
        info = nl.link_info(idx)
        addrs = nl.addresses(idx)
        record(
            "hostintf",
            ifname=name,
            index=idx,
            netns=netns,
            mtu=info["mtu"],
            up=info["up"],
            addrs=addrs,
            as_name=rename or name,
            mac=info["mac"],
            alias=info.get("alias") or "",
            # A hardware pair's end is shaped by the run: its qdiscs go at give-back.
            qdiscs=free,
        )
        if rename and rename != name:
            nl.set_link(idx, state="down")
        nl.set_link(idx, net_ns_fd=ns.path_of(netns))
    finally:
        nl.close()
    if rename and rename != name:
        there = Netlink(ns.path_of(netns))
        try:
            moved = there.index_or_none(name)
            if moved is None:
                raise KernelError(f"{name}: moved into {netns} and not found there")
            there.set_link(moved, ifname=rename)
        finally:
            there.close()


def _find(rec: dict[str, Any]) -> tuple[Netlink, int] | None:
    """The lent interface: in its node's namespace, or (the namespace gone) back here."""
    name, idx, netns = str(rec["ifname"]), int(rec["index"]), str(rec["netns"])
    if ns.exists(netns):
        nl = Netlink(ns.path_of(netns))
        found = nl.index_or_none(str(rec.get("as_name") or name))
        if found is None:
            found = nl.index_or_none(name)
        if found is None:
            with contextlib.suppress(Exception):
                nl.ipr.get_links(idx)
                found = idx
        if found is not None:
            return nl, found
        nl.close()
    nl = Netlink(None)
    with contextlib.suppress(Exception):
        if nl.link_info(idx):
            return nl, idx
    found = nl.index_or_none(name) or nl.index_or_none(str(rec.get("as_name") or name))
    if found is not None:
        return nl, found
    nl.close()
    return None


def give_back(rec: dict[str, Any], _run_id: str = "") -> None:
    """Move the interface of record ``rec`` back here and restore it."""
    name = str(rec["ifname"])
    located = _find(rec)
    if located is None:
        raise KernelError(
            f"{name}: lent to a node and not found any more (a virtual interface is "
            "destroyed with its namespace)"
        )
    nl, idx = located
    try:
        if rec.get("qdiscs"):
            with contextlib.suppress(KernelError, OSError):
                tc.clear_root(nl, idx)
                tc.remove_clsact(nl, idx)
        if nl.path is not None:
            nl.set_link(idx, state="down")
            fd = os.open(ns.own_path(), os.O_RDONLY)
            try:
                nl.set_link(idx, net_ns_fd=fd)
            finally:
                os.close(fd)
    finally:
        nl.close()
    home = Netlink(None)
    try:
        idx = (
            home.index_or_none(name)
            or home.index_or_none(str(rec.get("as_name") or name))
            or int(rec["index"])
        )
        info = home.link_info(idx)
        if info["ifname"] != name:
            home.set_link(idx, state="down")
            home.set_link(idx, ifname=name)
        if rec.get("mtu") and info["mtu"] != rec["mtu"]:
            home.set_link(idx, mtu=int(rec["mtu"]))
        if rec.get("mac") and str(info["mac"]).lower() != str(rec["mac"]).lower():
            home.set_link(idx, state="down")
            home.set_link(idx, address=str(rec["mac"]))
        if "alias" in rec and (info.get("alias") or "") != rec["alias"]:
            home.set_link(idx, ifalias=str(rec["alias"]))  # the run's mark goes
        have = set(home.addresses(idx))
        for cidr in rec.get("addrs") or []:
            if cidr not in have and not str(cidr).startswith("fe80:"):
                home.add_address(idx, str(cidr))
        home.set_link(idx, state="up" if rec.get("up") else "down")
    finally:
        home.close()
