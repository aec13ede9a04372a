"""mininet.nodelib, provided by fidelnet.compat.nodelib."""

from fidelnet.compat.nodelib import *  # noqa: F403
from fidelnet.compat.nodelib import __all__  # noqa: F401
