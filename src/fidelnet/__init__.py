"""fidelnet: a network emulator for CI and for measurements you can trust.

The public surface::

    from fidelnet import Network
    from fidelnet.topology import linear

    with Network(linear(3)) as net:
        print(net["h1"].cmd("ping -c1 10.0.0.3"))

Mininet scripts run unchanged through ``fidelnet mn script.py`` or with
``PYTHONPATH=$(fidelnet compat-path)``.

The heavy names (``Network``, the nodes, ``Link``, the spec classes) are loaded
on first use (PEP 562), so ``import fidelnet`` and the ``fidelnet`` command
start without pulling in the kernel layer, pyroute2 or pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fidelnet._lazy import lazy_exports
from fidelnet._version import __version__
from fidelnet.errors import (
    FidelnetError,
    KernelError,
    NodeError,
    StateError,
    UnitError,
    UnsupportedError,
    ValidationError,
)
from fidelnet.log import set_log_level

if TYPE_CHECKING:
    from fidelnet.links import Link
    from fidelnet.network import Network
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Host, Node, Router, Switch
    from fidelnet.topology.spec import LinkParams, LinkSpec, NodeSpec, TopologySpec

__all__ = [
    "FidelnetError",
    "Host",
    "Interface",
    "KernelError",
    "Link",
    "LinkParams",
    "LinkSpec",
    "Network",
    "Node",
    "NodeError",
    "NodeSpec",
    "Router",
    "StateError",
    "Switch",
    "TopologySpec",
    "UnitError",
    "UnsupportedError",
    "ValidationError",
    "__version__",
    "set_log_level",
]

# Public name -> the module that defines it; imported on first access.
_LAZY: dict[str, str] = {
    "Link": "fidelnet.links.link",
    "Network": "fidelnet.network",
    "Interface": "fidelnet.nodes.intf",
    "Host": "fidelnet.nodes.node",
    "Node": "fidelnet.nodes.node",
    "Router": "fidelnet.nodes.node",
    "Switch": "fidelnet.nodes.node",
    "LinkParams": "fidelnet.topology.spec",
    "LinkSpec": "fidelnet.topology.spec",
    "NodeSpec": "fidelnet.topology.spec",
    "TopologySpec": "fidelnet.topology.spec",
}

lazy_exports(__name__, _LAZY)
