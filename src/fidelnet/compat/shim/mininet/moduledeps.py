"""mininet.moduledeps, provided by fidelnet.compat.moduledeps."""

from fidelnet.compat.moduledeps import *  # noqa: F403
from fidelnet.compat.moduledeps import __all__  # noqa: F401
