"""How big a scenario file may be, and what it may ask for: each limit is checked
before the work it bounds is done (reading, expanding YAML aliases, building the
topology), and an overrun is a problem naming the limit and the place
(docs/scenarios.md#limits).

The numbers are far above any scenario this project or its users run (the largest
topology measured is 10,000 nodes, docs/scale.md) and far below what would exhaust
the machine's memory or time while validating.
"""

from __future__ import annotations

from fidelnet.topology.limits import MAX_LINKS, MAX_NODES

__all__ = [
    "MAX_CHECKS",
    "MAX_DEPTH",
    "MAX_EVENTS",
    "MAX_FILE_BYTES",
    "MAX_LINKS",
    "MAX_NODES",
    "MAX_SETUP",
    "MAX_TRAFFIC",
    "MAX_YAML_VALUES",
]

MAX_FILE_BYTES = 4 * 1024 * 1024
"""A scenario file's size (the largest example is under 4 KiB)."""
MAX_YAML_VALUES = 200_000
"""Values in the document once YAML aliases are expanded (an alias counts as often as
it is used: a few lines of nested aliases can otherwise stand for billions)."""
MAX_DEPTH = 64
"""Nesting of mappings and sequences."""
# Nodes in the topology, the builder's included (counted before it builds), and links
# the scenario declares: the topology's own limits.
MAX_TRAFFIC = 1_000
"""Traffic items."""
MAX_CHECKS = 10_000
"""Checks."""
MAX_SETUP = 1_000
"""Setup steps."""
MAX_EVENTS = 10_000
"""Events of one traffic item."""
