"""Validation of OpenFlow controllers and of OVS switches' OpenFlow options (part of
:mod:`fidelnet.topology.validate`, which runs these checks with the others)."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterator
from typing import TypeGuard

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import (
    CONTROLLER_KINDS,
    FAIL_MODES,
    OPENFLOW_VERSIONS,
    OVS_DATAPATH_TYPES,
    ControllerSpec,
    OpenFlowSpec,
    TopologySpec,
)

__all__ = ["MAX_BACKOFF_MS", "MIN_BACKOFF_MS", "check_controllers", "check_openflow",
           "controller_problems"]  # fmt: skip

Problems = Iterator[ValidationError]
_NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
MIN_BACKOFF_MS = 1000  # Open vSwitch's own floor for a controller's max_backoff
MAX_BACKOFF_MS = 3_600_000


def controller_problems(spec: TopologySpec) -> list[ValidationError]:
    """Every problem in ``spec``'s controllers and switches' OpenFlow options."""
    return [*check_controllers(spec), *check_openflow(spec)]


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def check_controllers(spec: TopologySpec) -> Problems:
    ports: dict[int, str] = {}
    names: set[str] = set()
    for i, c in enumerate(spec.controllers):
        where = f"controllers[{i}]"
        if not isinstance(c, ControllerSpec):
            yield ValidationError(where, "must be a ControllerSpec", c)
            continue
        if not isinstance(c.name, str) or not _NAME_RE.fullmatch(c.name) or c.name in names:
            yield ValidationError(f"{where}.name", "must be a unique node-like name", c.name)
        names.add(str(c.name))
        if c.kind not in CONTROLLER_KINDS:
            yield ValidationError(
                f"{where}.kind", "unknown controller kind", c.kind, list(CONTROLLER_KINDS)
            )
        if not _is_int(c.port) or not 1 <= c.port <= 65535:
            yield ValidationError(f"{where}.port", "must be a TCP port, 1..65535", c.port)
        elif c.kind == "ref" and c.port in ports:
            yield ValidationError(f"{where}.port", f"{ports[c.port]} listens there too", c.port)
        elif c.kind == "ref":
            ports[c.port] = str(c.name)
        yield from _check_controller_place(where, c, spec)
    if spec.controllers and not any(
        (n.datapath or spec.datapath) == "ovs" for n in spec.switches()
    ):
        yield ValidationError(
            "controllers",
            "only OVS switches connect to controllers, and no switch has datapath ovs",
            [c.name for c in spec.controllers],
        )


def _check_controller_place(where: str, c: ControllerSpec, spec: TopologySpec) -> Problems:
    """A remote controller's address and namespace; a ``ref`` one has neither."""
    if c.kind == "ref":
        for field in ("ip", "node", "netns"):
            if getattr(c, field) is not None:
                yield ValidationError(
                    f"{where}.{field}",
                    "only a remote controller has one (a ref controller listens on the "
                    "fabric's loopback)",
                    getattr(c, field),
                )
        return
    if c.ip is not None:
        try:
            ipaddress.ip_address(c.ip)
        except ValueError:
            yield ValidationError(f"{where}.ip", "must be an IPv4 or IPv6 address", c.ip)
    if c.node is not None:
        if c.node not in spec.nodes:
            yield ValidationError(f"{where}.node", "unknown node", c.node, sorted(spec.nodes))
        elif c.netns is not None:
            yield ValidationError(f"{where}.netns", "give node or netns, not both", c.netns)
    if c.netns is not None and (not isinstance(c.netns, str) or not c.netns.startswith("/")):
        yield ValidationError(f"{where}.netns", "must be a namespace's path", c.netns)


def check_openflow(spec: TopologySpec) -> Problems:
    names = {c.name for c in spec.controllers if isinstance(c, ControllerSpec)}
    dpids: dict[int, str] = {}
    for name, node in spec.nodes.items():
        of = node.openflow
        if of is None:
            continue
        where = f"nodes.{name}.openflow"
        if not isinstance(of, OpenFlowSpec):
            yield ValidationError(where, "must be an OpenFlowSpec", of)
            continue
        if node.kind != "switch" or (node.datapath or spec.datapath) != "ovs":
            yield ValidationError(
                where, f"only switches on the ovs datapath speak OpenFlow, and {name} is not one"
            )
            continue
        for proto in of.protocols or ():
            if proto not in OPENFLOW_VERSIONS:
                yield ValidationError(
                    f"{where}.protocols", "unknown OpenFlow version", proto, list(OPENFLOW_VERSIONS)
                )
        if of.protocols is not None and not of.protocols:
            yield ValidationError(f"{where}.protocols", "must name at least one version", [])
        if of.fail_mode is not None and of.fail_mode not in FAIL_MODES:
            yield ValidationError(
                f"{where}.fail_mode", "unknown fail mode", of.fail_mode, list(FAIL_MODES)
            )
        if of.dpid is not None:
            digits = of.dpid.replace(":", "") if isinstance(of.dpid, str) else ""
            if not re.fullmatch(r"[0-9A-Fa-f]{1,16}", digits) or int(digits, 16) == 0:
                yield ValidationError(
                    f"{where}.dpid", "must be 1 to 16 hex digits, not all zero", of.dpid
                )
            elif int(digits, 16) in dpids:
                yield ValidationError(
                    f"{where}.dpid", f"{dpids[int(digits, 16)]} has the same datapath id", of.dpid
                )
            else:
                dpids[int(digits, 16)] = name
        for c in of.controllers or ():
            if c not in names:
                yield ValidationError(
                    f"{where}.controllers", "unknown controller", c, sorted(names)
                )
        if not isinstance(of.in_band, bool):
            yield ValidationError(f"{where}.in_band", "must be true or false", of.in_band)
        ms = of.reconnect_ms
        if ms is not None and (not _is_int(ms) or not MIN_BACKOFF_MS <= ms <= MAX_BACKOFF_MS):
            yield ValidationError(
                f"{where}.reconnect_ms",
                f"must be milliseconds, {MIN_BACKOFF_MS}..{MAX_BACKOFF_MS} (Open vSwitch "
                "backs off at least a second)",
                ms,
            )
        if of.datapath_type is not None and of.datapath_type not in OVS_DATAPATH_TYPES:
            yield ValidationError(
                f"{where}.datapath_type",
                "unknown Open vSwitch datapath",
                of.datapath_type,
                list(OVS_DATAPATH_TYPES),
            )
