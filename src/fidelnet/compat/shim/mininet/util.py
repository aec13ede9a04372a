"""mininet.util, provided by fidelnet.compat.util."""

from fidelnet.compat.util import *  # noqa: F403
from fidelnet.compat.util import __all__  # noqa: F401
