"""fidelnet: a network emulator for CI and for measurements you can trust.

The public surface::

    from fidelnet import Network
    from fidelnet.topology import linear

    with Network(linear(3)) as net:
        print(net["h1"].cmd("ping -c1 10.0.0.3"))

Mininet scripts run unchanged through ``fidelnet mn script.py`` or with
``PYTHONPATH=$(fidelnet compat-path)``.
"""

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
from fidelnet.links import Link
from fidelnet.log import set_log_level
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
