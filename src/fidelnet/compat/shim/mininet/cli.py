"""mininet.cli, provided by fidelnet.compat.cli."""

from fidelnet.compat.cli import *  # noqa: F403
from fidelnet.compat.cli import __all__  # noqa: F401
