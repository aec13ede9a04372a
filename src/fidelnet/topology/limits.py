"""How big a topology may be, whichever front door it came through (Python, a
Mininet script or ``--topo``, a scenario file): each limit is checked before any
kernel object exists, and an overrun is a ValidationError naming the limit and the
place (docs/scenarios.md#limits).

The node and link limits are far above the largest topology measured (10,000
nodes, docs/scale.md); the port limits are the kernel's and the BPF switch's.
"""

from __future__ import annotations

__all__ = ["BPF_SWITCH_PORTS", "BRIDGE_PORTS", "MAX_LINKS", "MAX_NODES"]

MAX_NODES = 100_000
"""Nodes in one topology."""
MAX_LINKS = 500_000
"""Links in one topology."""
BRIDGE_PORTS = 1024
"""Ports of one Linux bridge (the kernel's ``BR_MAX_PORTS``)."""
BPF_SWITCH_PORTS = 65_536
"""Ports of all BPF switches of a run together (``MAX_SLOTS`` in
bpf/l2switch.bpf.c)."""
