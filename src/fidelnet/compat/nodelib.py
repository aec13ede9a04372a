"""Mininet's ``mininet.nodelib``: :class:`LinuxBridge` and :class:`NAT`.

``NAT`` is refused with a clear error: it would change the host's forwarding
and firewall, which fidelnet's ownership records cannot yet undo.
"""

from __future__ import annotations

from typing import Any

from fidelnet.compat._node import Node
from fidelnet.compat._switch import LinuxBridge
from fidelnet.errors import UnsupportedError

__all__ = ["NAT", "LinuxBridge"]


class NAT(Node):
    """Mininet's NAT to the host's network: not supported."""

    def __init__(
        self,
        name: str,
        subnet: str = "10.0/8",
        localIntf: Any = None,
        flush: bool = False,
        **params: Any,
    ) -> None:
        del subnet, localIntf, flush, params
        raise UnsupportedError(
            "NAT support in fidelnet (it would change the host's forwarding and "
            "iptables rules, which fidelnet cannot yet record and undo)",
            f"NAT({name!r})",
            "route to the outside from a node of your own if you need to",
        )
