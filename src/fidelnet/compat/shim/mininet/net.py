"""mininet.net, provided by fidelnet.compat.net."""

from fidelnet.compat.net import *  # noqa: F403
from fidelnet.compat.net import __all__  # noqa: F401
