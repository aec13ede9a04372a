"""mininet.topolib, provided by fidelnet.compat.topolib."""

from fidelnet.compat.topolib import *  # noqa: F403
from fidelnet.compat.topolib import __all__  # noqa: F401
