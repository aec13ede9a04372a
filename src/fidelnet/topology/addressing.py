"""Ports, interface names, IP and MAC addresses for a :class:`TopologySpec` (pure data).

Follows what Mininet does when it builds a network from a ``Topo``:

- ports: each node numbers its ports "highest port used so far + 1", starting at
  0 on hosts and routers and at 1 on switches (Mininet's ``Switch.portBase``);
  explicit ports are honoured; links are processed in list order. The default
  interface name is ``f"{node}-eth{port}"``.
- addresses: every non-switch node, in natural name order (``h2`` before ``h10``),
  takes the next number ``n``; a node without an address gets ``ip_base + n``
  and, with ``auto_set_macs``, the MAC ``mac_for(n)`` (``Mininet.addHost``).
  ``n`` starts at the host part of ``ip_base`` (1 when that is 0, the usual case),
  as in Mininet.

Holds:

- :func:`natural_key`: Mininet's natural sort key.
- :func:`mac_for`: the MAC Mininet derives from a host number.
- :func:`parse_ip_base`, :func:`address_capacity`, :func:`parse_cidr`: address parsing.
- :class:`PortPlan`, :func:`plan_ports`: the ports and names links will get,
  computed without changing the spec.
- :func:`assign_ports`: writes that plan into the spec.
- :class:`Interface`, :func:`interfaces`: every link end with its effective
  address and MAC (the node's own ``ip``/``mac`` belong to its lowest port,
  Mininet's default interface).
- :func:`numbered_nodes`, :func:`first_host_number`, :func:`plan_ips`: Mininet's
  host numbering, computed without changing the spec.
- :func:`assign_ips`: fills host addresses (and MACs) the way Mininet does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import LinkSpec, NodeSpec, TopologySpec

__all__ = [
    "Interface",
    "PortPlan",
    "address_capacity",
    "assign_ips",
    "assign_ports",
    "default_intf_name",
    "first_host_number",
    "interfaces",
    "mac_for",
    "natural_key",
    "numbered_nodes",
    "parse_cidr",
    "parse_ip_base",
    "plan_ips",
    "plan_ports",
]

_DIGITS = re.compile(r"([0-9]+)")
_MAX_MAC = 2**48 - 1
_DEFAULT_PREFIX = 24  # Mininet's netParse: an ip_base without "/len" is a /24


def natural_key(name: str) -> tuple[str | int, ...]:
    """Sort key putting ``h2`` before ``h10`` (Mininet's ``util.natural``)."""
    parts = _DIGITS.split(str(name))
    # re.split with a capture group puts the digit runs at the odd indexes.
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts))


def mac_for(n: int) -> str:
    """The MAC Mininet gives host number ``n``: ``mac_for(1) == "00:00:00:00:00:01"``."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_MAC:
        raise ValidationError("mac", f"host number must be an integer in 0..{_MAX_MAC}", n)
    return ":".join(f"{(n >> shift) & 0xFF:02x}" for shift in range(40, -8, -8))


def parse_ip_base(ip_base: str) -> IPv4Network:
    """``ip_base`` as a network; without ``/len`` it is a /24, as in Mininet."""
    if not isinstance(ip_base, str):
        raise ValidationError("ip_base", "must be an IPv4 network like 10.0.0.0/8", ip_base)
    text = ip_base if "/" in ip_base else f"{ip_base}/{_DEFAULT_PREFIX}"
    try:
        return IPv4Network(text, strict=False)
    except ValueError as exc:
        raise ValidationError(
            "ip_base", "must be an IPv4 network like 10.0.0.0/8", ip_base
        ) from exc


def address_capacity(net: IPv4Network) -> int:
    """Highest host number usable in ``net`` (the broadcast address is excluded)."""
    if net.prefixlen <= 30:
        return net.num_addresses - 2
    return net.num_addresses - 1  # /31: one number after the base; /32: none


def first_host_number(net: IPv4Network, ip_base: str) -> int:
    """Mininet's first ``nextIP``: the host part of ``ip_base``, or 1 when it is 0."""
    host_text = ip_base.split("/", 1)[0]
    try:
        host_part = int(IPv4Interface(host_text).ip) & int(net.hostmask)
    except ValueError:
        host_part = 0
    return host_part if host_part > 0 else 1


def parse_cidr(field: str, text: object) -> IPv4Interface:
    """An IPv4 address with prefix length (``"10.0.0.1/8"``), or ValidationError."""
    example = "an IPv4 address with prefix length like 10.0.0.1/8"
    if not isinstance(text, str) or "/" not in text:
        raise ValidationError(field, f"must be {example}", text)
    try:
        return IPv4Interface(text)
    except ValueError as exc:
        raise ValidationError(field, f"must be {example}", text) from exc


def default_intf_name(node: str, port: int) -> str:
    """Mininet's default interface name, ``h1-eth0``."""
    return f"{node}-eth{port}"


@dataclass(frozen=True)
class PortPlan:
    """Ports and interface names of one link's two ends."""

    a_port: int
    b_port: int
    a_intf: str
    b_intf: str


def _is_port(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _port_base(spec: TopologySpec, node: str) -> int:
    found = spec.nodes.get(node)
    return 1 if found is not None and found.kind == "switch" else 0


def _take_port(spec: TopologySpec, next_free: dict[str, int], node: str, port: int | None) -> int:
    """``port`` if given, else the node's next port; either way, remember the highest."""
    if port is None:
        port = next_free.get(node, _port_base(spec, node))
    if _is_port(port):
        next_free[node] = max(next_free.get(node, 0), port + 1)
    return port


def plan_ports(spec: TopologySpec) -> list[PortPlan]:
    """The ports and interface names :func:`assign_ports` would set, one per link."""
    next_free: dict[str, int] = {}  # highest port used so far + 1, per node
    plans = []
    for link in spec.links:
        a_port = _take_port(spec, next_free, link.a, link.a_port)
        b_port = _take_port(spec, next_free, link.b, link.b_port)
        a_intf = link.a_intf if link.a_intf is not None else default_intf_name(link.a, a_port)
        b_intf = link.b_intf if link.b_intf is not None else default_intf_name(link.b, b_port)
        plans.append(PortPlan(a_port, b_port, a_intf, b_intf))
    return plans


def assign_ports(spec: TopologySpec) -> TopologySpec:
    """Fill every link's ports and interface names in place; returns ``spec``."""
    for link, plan in zip(spec.links, plan_ports(spec), strict=True):
        link.a_port, link.b_port = plan.a_port, plan.b_port
        link.a_intf, link.b_intf = plan.a_intf, plan.b_intf
    return spec


@dataclass(frozen=True)
class Interface:
    """One link end: where it is, its name, and its effective address and MAC.

    ``ip_field``/``mac_field`` say where the value came from (``links[0].a_ip`` or
    ``nodes.h1.ip``); ``default`` marks the node's lowest-numbered port.
    """

    node: str
    link: int
    side: str
    port: int
    name: str
    default: bool
    ip: str | None
    ip_field: str | None
    mac: str | None
    mac_field: str | None


def _default_ends(spec: TopologySpec, plans: list[PortPlan]) -> set[tuple[int, str]]:
    lowest: dict[str, tuple[int, int, str]] = {}
    for index, (link, plan) in enumerate(zip(spec.links, plans, strict=True)):
        for node, port, side in ((link.a, plan.a_port, "a"), (link.b, plan.b_port, "b")):
            rank = port if _is_port(port) else 2**31
            if node not in lowest or rank < lowest[node][0]:
                lowest[node] = (rank, index, side)
    return {(index, side) for _, index, side in lowest.values()}


def _end_value(
    link_value: str | None, link_field: str, node: NodeSpec | None, attr: str, default: bool
) -> tuple[str | None, str | None]:
    if link_value is not None:
        return link_value, link_field
    node_value = getattr(node, attr) if node is not None and default else None
    if node_value is not None and node is not None:
        return node_value, f"nodes.{node.name}.{attr}"
    return None, None


def _interface(
    spec: TopologySpec, link: LinkSpec, index: int, side: str, plan: PortPlan, default: bool
) -> Interface:
    node_name = link.a if side == "a" else link.b
    node = spec.nodes.get(node_name)
    link_ip = link.a_ip if side == "a" else link.b_ip
    link_mac = link.a_mac if side == "a" else link.b_mac
    ip, ip_field = _end_value(link_ip, f"links[{index}].{side}_ip", node, "ip", default)
    mac, mac_field = _end_value(link_mac, f"links[{index}].{side}_mac", node, "mac", default)
    return Interface(
        node=node_name,
        link=index,
        side=side,
        port=plan.a_port if side == "a" else plan.b_port,
        name=plan.a_intf if side == "a" else plan.b_intf,
        default=default,
        ip=ip,
        ip_field=ip_field,
        mac=mac,
        mac_field=mac_field,
    )


def interfaces(spec: TopologySpec, plans: list[PortPlan] | None = None) -> list[Interface]:
    """Every link end, in link order (``a`` before ``b``), with effective addresses.

    Ports and names come from :func:`plan_ports`, so this is exact whether or not
    :func:`assign_ports` has run (pass ``plans`` if already computed). A link's own
    ``a_ip``/``a_mac`` win; otherwise the node's ``ip``/``mac`` apply to its default
    (lowest-port) interface only.
    """
    if plans is None:
        plans = plan_ports(spec)
    defaults = _default_ends(spec, plans)
    result = []
    for index, (link, plan) in enumerate(zip(spec.links, plans, strict=True)):
        for side in ("a", "b"):
            result.append(_interface(spec, link, index, side, plan, (index, side) in defaults))
    return result


def _nodes_with_link_addresses(spec: TopologySpec) -> set[str]:
    named = set()
    for link in spec.links:
        if link.a_ip is not None:
            named.add(link.a)
        if link.b_ip is not None:
            named.add(link.b)
    return named


def numbered_nodes(spec: TopologySpec) -> list[NodeSpec]:
    """Non-switch nodes in the order Mininet numbers them (natural name order)."""
    others = [n for n in spec.nodes.values() if n.kind != "switch"]
    return sorted(others, key=lambda n: natural_key(n.name))


def plan_ips(spec: TopologySpec) -> list[tuple[NodeSpec, int, str | None]]:
    """Per non-switch node, in numbering order: (node, its number, the address it
    would get or None). Raises ValidationError (``ip_base``) when it cannot."""
    net = parse_ip_base(spec.ip_base)
    capacity = address_capacity(net)
    addressed_by_links = _nodes_with_link_addresses(spec)
    plan: list[tuple[NodeSpec, int, str | None]] = []
    for number, node in enumerate(numbered_nodes(spec), start=first_host_number(net, spec.ip_base)):
        ip = None
        if node.ip is None and node.name not in addressed_by_links:
            if number > capacity:
                raise ValidationError(
                    "ip_base",
                    f"too few addresses: node {node.name} needs host number {number} "
                    f"but the highest usable one in {net} is {max(capacity, 0)}",
                    spec.ip_base,
                )
            ip = f"{net.network_address + number}/{net.prefixlen}"
        plan.append((node, number, ip))
    return plan


def assign_ips(spec: TopologySpec) -> TopologySpec:
    """Give addresses (and MACs with ``auto_set_macs``) like ``Mininet.addHost``.

    Non-switch nodes are numbered in natural name order; a node with its own
    ``ip`` keeps it but still uses up its number. A node without ``ip`` whose links
    carry addresses for it (``a_ip``/``b_ip``) keeps ``ip`` None: it is addressed
    per interface. Raises :class:`ValidationError` (field ``ip_base``) before
    changing anything if ``ip_base`` is malformed or too small. Returns ``spec``.
    """
    for node, number, ip in plan_ips(spec):
        if ip is not None:
            node.ip = ip
        if spec.auto_set_macs and node.mac is None:
            node.mac = mac_for(number)
    return spec
