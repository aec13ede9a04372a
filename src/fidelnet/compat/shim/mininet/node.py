"""mininet.node, provided by fidelnet.compat.node."""

from fidelnet.compat.node import *  # noqa: F403
from fidelnet.compat.node import __all__  # noqa: F401
