"""``mininet.examples``: Mininet's own examples where Debian installs them
(/usr/share/doc/mininet/examples), except the cluster edition's modules, which
fidelnet replaces with a clear refusal (nodes on other machines over ssh: fidelnet
runs a network on one machine)."""

import os

_HERE = os.path.dirname(__file__)
_DEBIAN = "/usr/share/doc/mininet/examples"
__path__ = [_HERE] + ([_DEBIAN] if os.path.isdir(_DEBIAN) else [])
