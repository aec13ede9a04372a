"""mininet.clean, provided by fidelnet.compat.clean."""

from fidelnet.compat.clean import *  # noqa: F403
from fidelnet.compat.clean import __all__  # noqa: F401
