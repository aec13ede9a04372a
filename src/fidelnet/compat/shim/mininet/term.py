"""mininet.term, provided by fidelnet.compat.term."""

from fidelnet.compat.term import *  # noqa: F403
from fidelnet.compat.term import __all__  # noqa: F401
