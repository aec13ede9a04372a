"""Checks of hardware links (backend ``hw``) that need no kernel: the pool's shape,
enough pairs for the links that ask, and ends that can hold a real interface.

What only the machine can say (the interfaces exist, are free, are not the default
route's) is checked by :mod:`fidelnet.hwlinks` before anything is built.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator

from fidelnet.errors import ValidationError
from fidelnet.topology.addressing import interfaces
from fidelnet.topology.spec import EXTERNAL_MODES, TopologySpec

__all__ = ["IFNAME_MAX", "check_hardware", "external_name", "hw_links"]

IFNAME_MAX = 15
"""The longest interface name Linux takes (IFNAMSIZ - 1)."""


def hw_links(spec: TopologySpec) -> list[int]:
    """Indexes of the links that take a hardware pair."""
    return [i for i, link in enumerate(spec.links) if (link.backend or spec.link_backend) == "hw"]


def _ifname_problem(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "must be an interface name"
    if len(name) > IFNAME_MAX:
        return f"is longer than {IFNAME_MAX} characters (no interface can have that name)"
    if name in (".", "..") or any(c in name for c in "/: \t\n\0"):
        return "is not a valid interface name"
    return None


def external_name(spec: TopologySpec, i: int) -> str:
    """The name of ``spec.external[i]`` in its node."""
    ext = spec.external[i]
    if ext.name:
        return ext.name
    k = sum(1 for e in spec.external[:i] if e.node == ext.node)
    return f"{ext.node}-ext{k}"


def _check_external(spec: TopologySpec, pool: dict[str, str]) -> Iterator[ValidationError]:
    lent: dict[str, str] = {}
    names: set[tuple[str, str]] = set()
    if spec.external:
        names = {(e.node, e.name) for e in interfaces(spec)}
    for i, ext in enumerate(spec.external):
        where = f"external[{i}]"
        node = spec.nodes.get(ext.node)
        if node is None:
            yield ValidationError(f"{where}.node", "unknown node", ext.node, list(spec.nodes)[:20])
            continue
        if node.kind == "switch" or not node.in_namespace:
            yield ValidationError(
                f"{where}.node",
                "an external interface goes to a host or router in a namespace of its own",
                ext.node,
            )
        if ext.mode not in EXTERNAL_MODES:
            yield ValidationError(f"{where}.mode", "unknown mode", ext.mode, EXTERNAL_MODES)
        why = _ifname_problem(ext.interface)
        if why is not None:
            yield ValidationError(f"{where}.interface", why, ext.interface)
        elif ext.interface in pool:
            yield ValidationError(
                f"{where}.interface",
                f"is in the hardware pool at {pool[ext.interface]}",
                ext.interface,
            )
        elif ext.mode == "lend" and ext.interface in lent:
            yield ValidationError(
                f"{where}.interface", f"is lent already by {lent[ext.interface]}", ext.interface
            )
        elif ext.mode == "lend":
            lent[ext.interface] = where
        name = external_name(spec, i)
        why = _ifname_problem(name)
        if why is not None:
            yield ValidationError(f"{where}.name", why, name)
        elif (ext.node, name) in names:
            yield ValidationError(f"{where}.name", f"{ext.node} has an interface {name}", name)
        names.add((ext.node, name))
        if ext.ip is not None:
            try:
                ipaddress.ip_interface(ext.ip)
            except ValueError:
                yield ValidationError(f"{where}.ip", "must be an address in CIDR form", ext.ip)


def check_hardware(spec: TopologySpec) -> Iterator[ValidationError]:
    pool = spec.hardware_pairs
    if not isinstance(pool, list | tuple):
        yield ValidationError("hardware_pairs", "must be a list of interface pairs", pool)
        return
    seen: dict[str, str] = {}
    for i, pair in enumerate(pool):
        where = f"hardware_pairs[{i}]"
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            yield ValidationError(
                where, "must be a pair of interfaces, one for each end of a link", pair
            )
            continue
        for j, name in enumerate(pair):
            why = _ifname_problem(name)
            if why is not None:
                yield ValidationError(f"{where}[{j}]", why, name)
                continue
            assert isinstance(name, str)
            if name in seen:
                yield ValidationError(
                    f"{where}[{j}]", f"is already in the pool at {seen[name]}", name
                )
            else:
                seen[name] = f"{where}[{j}]"
    made = 0
    for i, plan in enumerate(spec.sriov):
        where = f"sriov[{i}]"
        pfs = plan.pfs
        if not isinstance(pfs, list | tuple) or len(pfs) != 2:
            yield ValidationError(f"{where}.pfs", "must be two physical functions", pfs)
        else:
            for j, name in enumerate(pfs):
                why = _ifname_problem(name)
                if why is not None:
                    yield ValidationError(f"{where}.pfs[{j}]", why, name)
            if pfs[0] == pfs[1]:
                yield ValidationError(
                    f"{where}.pfs[1]", "the same PF twice: give two PFs joined by a cable", pfs[1]
                )
        if not isinstance(plan.vfs, int) or isinstance(plan.vfs, bool) or plan.vfs < 1:
            yield ValidationError(f"{where}.vfs", "must be a whole number >= 1", plan.vfs)
            continue
        base = plan.vlan_base
        if not isinstance(base, int) or isinstance(base, bool) or not 1 <= base <= 4094:
            yield ValidationError(f"{where}.vlan_base", "must be a VLAN id in 1..4094", base)
        elif base + plan.vfs - 1 > 4094:
            yield ValidationError(
                f"{where}.vlan_base",
                f"{plan.vfs} VFs from VLAN {base} end at {base + plan.vfs - 1}, past 4094",
                base,
            )
        made += plan.vfs
    yield from _check_external(spec, seen)
    asking = hw_links(spec)
    have = len(pool) + made
    if len(asking) > have:
        first = asking[have] if have else asking[0]
        yield ValidationError(
            f"links[{first}].backend",
            f"{len(asking)} link(s) ask for a hardware pair and hardware_pairs has "
            f"{have} (SR-IOV's included): add pairs, or give the rest another backend",
            "hw",
            ["auto", "tc", "engine"],
        )
    for i in asking:
        link = spec.links[i]
        for end in (link.a, link.b):
            node = spec.nodes.get(end)
            if node is not None and not node.in_namespace:
                yield ValidationError(
                    f"links[{i}].backend",
                    f"{end} is in the host's namespace, where the pair already is: a "
                    "hardware link joins nodes in namespaces of their own",
                    "hw",
                )
        if link.endpoint not in (None, "auto"):
            yield ValidationError(
                f"links[{i}].endpoint",
                "an endpoint applies to engine links, and this link is a hardware pair",
                link.endpoint,
            )
