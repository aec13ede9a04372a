"""Topologies as pure data: specs, ready-made builders, addressing, routing, checks.

Nothing in this package performs I/O or touches the kernel. Public names:

- specs (:mod:`.spec`): :class:`TopologySpec`, :class:`NodeSpec`, :class:`LinkSpec`,
  :class:`LinkParams`, ``NODE_KINDS``;
- quantities (:mod:`.units`): :func:`parse_rate`, :func:`parse_duration`,
  :func:`parse_size`, :func:`parse_percent`;
- builders (:mod:`.builders`): :func:`minimal`, :func:`single`, :func:`linear`,
  :func:`reversed_`, :func:`tree`, :func:`torus`, :func:`line`, :func:`dumbbell`,
  :func:`fattree`, :func:`from_mn_spec`;
- addressing (:mod:`.addressing`): :func:`assign_ports`, :func:`assign_ips`,
  :func:`mac_for`, :func:`natural_key`;
- routing (:mod:`.routing`): :class:`Route`, :func:`static_routes`;
- checks (:mod:`.validate`): :func:`validate`, :func:`problems`.
"""

from __future__ import annotations

from fidelnet.topology.addressing import assign_ips, assign_ports, mac_for, natural_key
from fidelnet.topology.builders import (
    dumbbell,
    fattree,
    from_mn_spec,
    line,
    linear,
    minimal,
    reversed_,
    single,
    torus,
    tree,
)
from fidelnet.topology.routing import Route, static_routes
from fidelnet.topology.spec import (
    NODE_KINDS,
    ControllerSpec,
    LinkParams,
    LinkSpec,
    NodeSpec,
    TopologySpec,
)
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate, parse_size
from fidelnet.topology.validate import problems, validate

__all__ = [
    "NODE_KINDS",
    "ControllerSpec",
    "LinkParams",
    "LinkSpec",
    "NodeSpec",
    "Route",
    "TopologySpec",
    "assign_ips",
    "assign_ports",
    "dumbbell",
    "fattree",
    "from_mn_spec",
    "line",
    "linear",
    "mac_for",
    "minimal",
    "natural_key",
    "parse_duration",
    "parse_percent",
    "parse_rate",
    "parse_size",
    "problems",
    "reversed_",
    "single",
    "static_routes",
    "torus",
    "tree",
    "validate",
]
