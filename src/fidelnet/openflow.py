"""OpenFlow controllers of a running network's OVS switches (docs/switches.md).

A topology names its controllers up front (:attr:`TopologySpec.controllers`), and
each OVS switch connects to all of them or to those its
:class:`~fidelnet.topology.spec.OpenFlowSpec` names. Mininet scripts also add
controllers to a running network and choose each switch's controllers when they
start it (``s1.start([c1])``): :func:`add_controller` and :func:`set_controllers`
do that, with the same checks as a topology file, before anything changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from fidelnet.errors import NodeError, ValidationError
from fidelnet.nodes.node import Switch
from fidelnet.topology.spec import ControllerSpec, TopologySpec
from fidelnet.topology.validate import controller_problems

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.switches.ovs import OvsDatapath

__all__ = ["add_controller", "controller", "set_controllers", "switch_controllers"]


def controller(net: Network, name: str) -> ControllerSpec:
    """The network's controller ``name``."""
    for c in net.spec.controllers:
        if c.name == name:
            return c
    raise ValidationError(
        "controller", "unknown controller", name, [c.name for c in net.spec.controllers]
    )


def add_controller(net: Network, spec: ControllerSpec) -> None:
    """Add controller ``spec`` to ``net`` (running or not). It is started (``ref``)
    or relayed to (``remote``) when a switch first connects to it."""
    trial = TopologySpec(
        nodes=net.spec.nodes, datapath=net.spec.datapath, controllers=[*net.spec.controllers, spec]
    )
    problems = [p for p in controller_problems(trial) if p.field != "controllers"]
    if problems:
        raise problems[0]
    net.spec.controllers.append(replace(spec))


def _ovs(net: Network, switch: str) -> tuple[Switch, OvsDatapath]:
    from fidelnet.switches.ovs import OvsDatapath

    node = net.nodes.get(switch)
    if not isinstance(node, Switch):
        raise NodeError(f"{switch}: no such switch")
    datapath = node.forwarder
    if not isinstance(datapath, OvsDatapath):
        kind = datapath.kind if datapath is not None else "none yet"
        raise NodeError(
            f"{switch}: only OVS switches connect to controllers, and its datapath is {kind}"
        )
    return node, datapath


def set_controllers(net: Network, switch: str, names: Sequence[str]) -> None:
    """Connect OVS switch ``switch`` to exactly the controllers ``names`` (none:
    disconnect it)."""
    for name in names:
        controller(net, name)
    node, datapath = _ovs(net, switch)
    datapath.set_controllers(node, tuple(names))


def switch_controllers(net: Network, switch: str) -> list[ControllerSpec]:
    """The controllers OVS switch ``switch`` connects to."""
    node, datapath = _ovs(net, switch)
    return datapath.controllers_of(node)
