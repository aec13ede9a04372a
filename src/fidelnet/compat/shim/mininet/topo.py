"""mininet.topo, provided by fidelnet.compat.topo."""

from fidelnet.compat.topo import *  # noqa: F403
from fidelnet.compat.topo import __all__  # noqa: F401
