"""mininet.log, provided by fidelnet.compat.log."""

from fidelnet.compat.log import *  # noqa: F403
from fidelnet.compat.log import __all__  # noqa: F401
