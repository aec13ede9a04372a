"""mininet.link, provided by fidelnet.compat.link."""

from fidelnet.compat.link import *  # noqa: F403
from fidelnet.compat.link import __all__  # noqa: F401
