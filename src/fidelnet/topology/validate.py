"""Checks a :class:`TopologySpec` before anything touches the kernel.

Holds :func:`problems` (every problem, as :class:`ValidationError` values, in a
stable order) and :func:`validate` (raises the first one). Nothing is created or
run; only trace files named by links are read.

Field names point at the culprit: ``ip_base``, ``nodes.h1.ip``, ``links[3].b``,
``links[0].params.loss``. Checked, in this order:

- ``ip_base``: an IPv4 network, with room for the hosts that need an address;
- nodes: name (``^[A-Za-z][A-Za-z0-9_]*$``, 1..64 characters, equal to its key),
  kind, ``stp`` only on switches, ``cpu`` in (0, 1], ``cores`` distinct
  non-negative integers, ``sched`` ``cfs``/``rt`` (CPU limits not on switches),
  ``ip`` CIDR and ``mac`` a unicast, non-zero MAC;
- links: known endpoints, no self-links, ports non-negative integers, interface
  names legal for Linux (at most 15 bytes, no ``/``, ``:`` or whitespace),
  addresses and MACs well formed, ``backend`` one of auto/tc/engine, parameters
  (finite, non-negative, ``bw`` > 0, percentages <= 100, ``max_queue_size`` an
  integer >= 1, ``jitter`` only with a delay, choices for ``queue`` and
  ``jitter_dist``, a Gilbert-Elliott model or a percentage, not both, a trace file
  that parses, reporting ``file:line``, and not with ``bw``);
- across links: duplicate ports or interface names on a node (and among nodes
  sharing the root namespace), default interface names too long for a node name;
- addresses: the same IP address (or MAC) on two interfaces, and a node ``ip``
  that contradicts the address its link gives the same (default) interface.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import TypeGuard

from fidelnet.errors import ValidationError
from fidelnet.topology.addressing import (
    Interface,
    PortPlan,
    interfaces,
    parse_cidr,
    plan_ips,
    plan_ports,
)
from fidelnet.topology.flows import check_flows
from fidelnet.topology.limits import BPF_SWITCH_PORTS, BRIDGE_PORTS, MAX_LINKS, MAX_NODES
from fidelnet.topology.spec import (
    DATAPATHS,
    ENGINE_ENDPOINTS,
    FASTPATHS,
    LINK_BACKENDS,
    NODE_KINDS,
    LinkSpec,
    NodeSpec,
    TopologySpec,
)
from fidelnet.topology.validate_backends import check_node_backends
from fidelnet.topology.validate_containers import check_containers
from fidelnet.topology.validate_hw import check_hardware
from fidelnet.topology.validate_openflow import check_controllers as _check_controllers
from fidelnet.topology.validate_openflow import check_openflow as _check_openflow
from fidelnet.topology.validate_openflow import controller_problems
from fidelnet.topology.validate_params import check_params as _check_params
from fidelnet.topology.validate_params import param_problems
from fidelnet.topology.validate_vt import check_tdf_spec

__all__ = [
    "IFNAMSIZ",
    "NAME_RULE",
    "controller_problems",
    "param_problems",
    "problems",
    "validate",
]

_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_MAC_RE = re.compile(r"[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}")
_MAX_NAME = 64
IFNAMSIZ = 15
"""Longest Linux interface name in bytes (the kernel's IFNAMSIZ minus the NUL)."""
NAME_RULE = (
    "node names must start with a letter, contain only letters, digits and '_', "
    f"and have 1..{_MAX_NAME} characters"
)
_SCHEDS = ("cfs", "rt")
_CHOICES_SHOWN = 8

Problems = Iterator[ValidationError]


def validate(spec: TopologySpec) -> None:
    """Raise the first problem :func:`problems` finds; return None if there is none."""
    found = problems(spec)
    if found:
        raise found[0]


def problems(spec: TopologySpec) -> list[ValidationError]:
    """Every problem in ``spec``, in a stable order; empty when it is usable."""
    sizes = list(_check_sizes(spec))
    if sizes:  # the other checks would take the time the limits are there to bound
        return sizes
    checks: tuple[Callable[[TopologySpec], Problems], ...] = (
        _check_link_backend,
        _check_fastpath,
        _check_datapath,
        _check_controllers,
        _check_openflow,
        _check_engine_threads,
        _check_ipv6,
        _check_ip_base,
        _check_nodes,
        check_node_backends,
        check_containers,
        _check_links,
        check_hardware,
        check_flows,
        check_tdf_spec,
        _check_interfaces,
    )
    return [problem for check in checks for problem in check(spec)]


# --- helpers ---------------------------------------------------------------------


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cidr_problem(field: str, value: object) -> Problems:
    try:
        parse_cidr(field, value)
    except ValidationError as exc:
        yield exc


def _mac_problem(field: str, value: object) -> Problems:
    if not isinstance(value, str) or not _MAC_RE.fullmatch(value):
        yield ValidationError(field, "must be a MAC address like 00:00:00:00:00:01", value)
    elif int(value[:2], 16) & 1:
        yield ValidationError(
            field, "is a multicast MAC (odd first octet); use a unicast one", value
        )
    elif int(value.replace(":", ""), 16) == 0:
        yield ValidationError(field, "the all-zero MAC cannot be given to an interface", value)


# --- ip_base -----------------------------------------------------------------------


def _check_link_backend(spec: TopologySpec) -> Problems:
    if spec.link_backend not in LINK_BACKENDS:
        yield ValidationError(
            "link_backend", "unknown link backend", spec.link_backend, list(LINK_BACKENDS)
        )
    if spec.engine_endpoint not in ENGINE_ENDPOINTS:
        yield ValidationError(
            "engine_endpoint",
            "unknown engine endpoint",
            spec.engine_endpoint,
            list(ENGINE_ENDPOINTS),
        )


ENGINE_THREADS_MAX = 64


def _check_engine_threads(spec: TopologySpec) -> Problems:
    n = spec.engine_threads
    if not _is_int(n) or not 1 <= n <= ENGINE_THREADS_MAX:
        yield ValidationError(
            "engine_threads",
            f"must be a whole number from 1 to {ENGINE_THREADS_MAX}",
            n,
        )


def _check_ipv6(spec: TopologySpec) -> Problems:
    if not isinstance(spec.ipv6, bool):
        yield ValidationError("ipv6", "must be true or false", spec.ipv6, ["true", "false"])


def _check_fastpath(spec: TopologySpec) -> Problems:
    if spec.fastpath is not None and spec.fastpath not in FASTPATHS:
        yield ValidationError("fastpath", "unknown fast path", spec.fastpath, list(FASTPATHS))
    for name, node in spec.nodes.items():
        if node.fastpath is None:
            continue
        if node.fastpath not in FASTPATHS:
            yield ValidationError(
                f"nodes.{name}.fastpath", "unknown fast path", node.fastpath, list(FASTPATHS)
            )
        elif node.kind != "router":
            yield ValidationError(
                f"nodes.{name}.fastpath",
                f"only routers have a fast path, and {name} is a {node.kind} (drop "
                "fastpath, or make the node a router)",
                node.fastpath,
            )


def _check_sizes(spec: TopologySpec) -> Problems:
    if len(spec.nodes) > MAX_NODES:
        yield ValidationError("nodes", f"{len(spec.nodes):,} nodes; the limit is {MAX_NODES:,}")
    if len(spec.links) > MAX_LINKS:
        yield ValidationError("links", f"{len(spec.links):,} links; the limit is {MAX_LINKS:,}")
    degree: dict[str, int] = {}
    for link in spec.links:
        for end in (link.a, link.b):
            degree[end] = degree.get(end, 0) + 1
    bpf_ports = 0
    for name, node in spec.nodes.items():
        if node.kind != "switch":
            continue
        datapath = node.datapath or spec.datapath
        ports = degree.get(name, 0)
        if datapath == "bridge" and ports > BRIDGE_PORTS:
            yield ValidationError(
                f"nodes.{name}",
                f"{ports} ports on a Linux bridge, which holds at most {BRIDGE_PORTS} (the "
                "kernel's BR_MAX_PORTS); use datapath bpf",
            )
        elif datapath in ("auto", "bpf"):
            bpf_ports += ports
    if bpf_ports > BPF_SWITCH_PORTS:
        yield ValidationError(
            "datapath",
            f"{bpf_ports:,} switch ports on the BPF switch, which holds {BPF_SWITCH_PORTS:,} in "
            "all; put some switches on datapath bridge",
        )


def _check_datapath(spec: TopologySpec) -> Problems:
    if spec.datapath not in DATAPATHS:
        yield ValidationError("datapath", "unknown switch datapath", spec.datapath, list(DATAPATHS))
    for name, node in spec.nodes.items():
        if node.mld_snooping is not True and node.kind != "switch":
            yield ValidationError(
                f"nodes.{name}.mld_snooping",
                f"only switches snoop MLD, and {name} is a {node.kind}",
                node.mld_snooping,
            )
        where = f"nodes.{name}.datapath"
        if node.datapath is None:
            continue
        if node.datapath not in DATAPATHS:
            yield ValidationError(where, "unknown switch datapath", node.datapath, list(DATAPATHS))
        elif node.kind != "switch":
            yield ValidationError(
                where, f"only switches have a datapath, and {name} is a {node.kind}", node.datapath
            )


def _check_ip_base(spec: TopologySpec) -> Problems:
    try:
        plan_ips(spec)  # parses ip_base and checks it has room for every number
    except ValidationError as exc:
        yield exc


# --- nodes -------------------------------------------------------------------------


def _check_nodes(spec: TopologySpec) -> Problems:
    for key, node in spec.nodes.items():
        where = f"nodes.{key}"
        yield from _check_name(where, key, node)
        yield from _check_kind(where, node)
        yield from _check_cpu(where, node)
        if node.ip is not None:
            yield from _cidr_problem(f"{where}.ip", node.ip)
        if node.mac is not None:
            yield from _mac_problem(f"{where}.mac", node.mac)


def _check_name(where: str, key: object, node: NodeSpec) -> Problems:
    name = node.name
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or len(name) > _MAX_NAME:
        yield ValidationError(f"{where}.name", NAME_RULE, name)
    elif name != key:
        yield ValidationError(f"{where}.name", f"differs from its key {key!r} in nodes", name)


def _check_kind(where: str, node: NodeSpec) -> Problems:
    if node.kind not in NODE_KINDS:
        yield ValidationError(f"{where}.kind", "unknown node kind", node.kind, NODE_KINDS)
    if node.stp and node.kind != "switch":
        yield ValidationError(f"{where}.stp", "stp applies only to switches", node.stp)


def _check_cpu(where: str, node: NodeSpec) -> Problems:
    limited = [f for f in ("cpu", "cores", "sched") if getattr(node, f) is not None]
    if limited and node.kind == "switch":
        yield ValidationError(
            f"{where}.{limited[0]}",
            "CPU limits apply only to hosts and routers, not switches",
            getattr(node, limited[0]),
        )
    cpu = node.cpu
    if cpu is not None and (not _is_number(cpu) or not 0 < cpu <= 1):
        yield ValidationError(f"{where}.cpu", "must be a fraction of all cores in (0, 1]", cpu)
    if node.cores is not None:
        yield from _check_cores(f"{where}.cores", node.cores)
    if node.sched is not None and node.sched not in _SCHEDS:
        yield ValidationError(f"{where}.sched", "unknown scheduler", node.sched, _SCHEDS)


def _check_cores(field: str, cores: object) -> Problems:
    if not isinstance(cores, tuple | list) or not cores:
        yield ValidationError(field, "must be a non-empty tuple of core numbers", cores)
    elif not all(_is_int(c) and c >= 0 for c in cores):
        yield ValidationError(field, "core numbers must be non-negative integers", cores)
    elif len(set(cores)) != len(cores):
        yield ValidationError(field, "lists a core more than once", cores)


# --- links -------------------------------------------------------------------------


def _check_links(spec: TopologySpec) -> Problems:
    for index, link in enumerate(spec.links):
        where = f"links[{index}]"
        yield from _check_endpoints(spec, where, link)
        for side in ("a", "b"):
            yield from _check_end(f"{where}.{side}", link, side)
        for attr in ("params", "params_ab", "params_ba"):
            params = getattr(link, attr)
            if params is not None:
                yield from _check_params(f"{where}.{attr}", params, link.params, attr)
        if link.backend is not None and link.backend not in LINK_BACKENDS:
            yield ValidationError(
                f"{where}.backend", "unknown link backend", link.backend, list(LINK_BACKENDS)
            )
        if link.endpoint is not None:
            if link.endpoint not in ENGINE_ENDPOINTS:
                yield ValidationError(
                    f"{where}.endpoint",
                    "unknown engine endpoint",
                    link.endpoint,
                    list(ENGINE_ENDPOINTS),
                )
            elif link.endpoint != "auto" and (link.backend or spec.link_backend) == "tc":
                yield ValidationError(
                    f"{where}.endpoint",
                    "an endpoint applies to engine links, and this link's backend is tc "
                    "(drop endpoint, or choose backend 'engine' or 'auto')",
                    link.endpoint,
                )


def _known_choices(spec: TopologySpec) -> tuple[str, list[str]]:
    names = [str(n) for n in spec.nodes]
    if len(names) <= _CHOICES_SHOWN:
        return "unknown node", names
    return f"unknown node (first {_CHOICES_SHOWN} of {len(names)} shown)", names[:_CHOICES_SHOWN]


def _check_endpoints(spec: TopologySpec, where: str, link: LinkSpec) -> Problems:
    for side, name in (("a", link.a), ("b", link.b)):
        if not isinstance(name, str) or name not in spec.nodes:
            problem, choices = _known_choices(spec)
            yield ValidationError(f"{where}.{side}", problem, name, choices)
    if link.a == link.b:
        yield ValidationError(where, "a link cannot connect a node to itself", link.a)


def _check_end(where: str, link: LinkSpec, side: str) -> Problems:
    port = getattr(link, f"{side}_port")
    if port is not None and not (_is_int(port) and port >= 0):
        yield ValidationError(f"{where}_port", "must be a non-negative integer", port)
    intf = getattr(link, f"{side}_intf")
    if intf is not None:
        yield from _check_intf_name(f"{where}_intf", intf)
    ip = getattr(link, f"{side}_ip")
    if ip is not None:
        yield from _cidr_problem(f"{where}_ip", ip)
    mac = getattr(link, f"{side}_mac")
    if mac is not None:
        yield from _mac_problem(f"{where}_mac", mac)


def _check_intf_name(field: str, name: object) -> Problems:
    if not isinstance(name, str) or not name or name in (".", ".."):
        yield ValidationError(field, "must be a non-empty interface name", name)
    elif any(c in name for c in "/:") or any(c.isspace() for c in name):
        yield ValidationError(field, "interface names cannot contain '/', ':' or whitespace", name)
    elif len(name.encode()) > IFNAMSIZ:
        yield ValidationError(
            field,
            f"is {len(name.encode())} bytes; Linux allows at most {IFNAMSIZ}; "
            "choose a shorter name",
            name,
        )


def _namespace(spec: TopologySpec, node: str) -> str:
    """Nodes outside a namespace share the root one, and with it their interface names."""
    found = spec.nodes.get(node)
    return node if found is None or found.in_namespace else "<root namespace>"


def _check_interfaces(spec: TopologySpec) -> Problems:
    plans = plan_ports(spec)
    yield from _check_ports_and_names(spec, plans)
    yield from _check_addresses(spec, plans)


def _check_ports_and_names(spec: TopologySpec, plans: list[PortPlan]) -> Problems:
    ports: dict[tuple[str, object], int] = {}
    names: dict[tuple[str, str], int] = {}
    long_default: set[str] = set()
    for index, (link, plan) in enumerate(zip(spec.links, plans, strict=True)):
        for side, node, port, name in (
            ("a", link.a, plan.a_port, plan.a_intf),
            ("b", link.b, plan.b_port, plan.b_intf),
        ):
            where = f"links[{index}].{side}"
            if _is_int(port) and port >= 0:
                first = ports.setdefault((node, port), index)
                if first != index:
                    yield ValidationError(
                        f"{where}_port",
                        f"port {port} of node {node} is already used by links[{first}]",
                        port,
                    )
            if not isinstance(name, str):
                continue
            first = names.setdefault((_namespace(spec, node), name), index)
            if first != index:
                yield ValidationError(
                    f"{where}_intf",
                    f"interface name {name!r} is already used by links[{first}]",
                    name,
                )
            explicit = getattr(link, f"{side}_intf") is not None
            if not explicit and len(name.encode()) > IFNAMSIZ and node not in long_default:
                long_default.add(node)
                yield _long_default_name(node, name, port)


def _long_default_name(node: str, name: str, port: int) -> ValidationError:
    room = IFNAMSIZ - len(f"-eth{port}")
    return ValidationError(
        f"nodes.{node}.name",
        f"its interface name {name!r} is {len(name.encode())} bytes; Linux allows at most "
        f"{IFNAMSIZ}; use a node name of at most {room} characters (or give the link "
        "explicit interface names)",
        node,
    )


# --- addresses -----------------------------------------------------------------------


def _check_addresses(spec: TopologySpec, plans: list[PortPlan]) -> Problems:
    ends = interfaces(spec, plans)
    yield from _check_default_ip(spec, ends)
    yield from _check_unique(ends, "ip")
    yield from _check_unique(ends, "mac")


def _check_default_ip(spec: TopologySpec, ends: list[Interface]) -> Problems:
    for end in ends:
        node = spec.nodes.get(end.node)
        if node is None or not end.default or node.ip is None or end.ip_field is None:
            continue
        if end.ip_field.startswith("links[") and end.ip != node.ip:
            yield ValidationError(
                f"nodes.{end.node}.ip",
                f"differs from {end.ip_field} ({end.ip}), the address of the same interface "
                f"{end.name}; give one address or make them equal",
                node.ip,
            )


def _check_unique(ends: list[Interface], attr: str) -> Problems:
    owners: dict[str, Interface] = {}
    for end in ends:
        value, field = getattr(end, attr), getattr(end, f"{attr}_field")
        if not isinstance(value, str) or field is None:
            continue
        key = value.split("/", 1)[0] if attr == "ip" else value.lower()
        first = owners.setdefault(key, end)
        if first is not end:
            what = "address" if attr == "ip" else "MAC"
            yield ValidationError(
                field,
                f"{what} {key} is already used by {getattr(first, f'{attr}_field')} "
                f"(interface {first.name} of {first.node})",
                value,
            )
