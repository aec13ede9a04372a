"""Checks of how each node is made (its backend, :mod:`fidelnet.nodes._base`)."""

from __future__ import annotations

from collections.abc import Iterator

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import NODE_BACKENDS, TopologySpec

__all__ = ["check_node_backends"]


def check_node_backends(spec: TopologySpec) -> Iterator[ValidationError]:
    for name, node in spec.nodes.items():
        where = f"nodes.{name}.backend"
        if node.backend not in NODE_BACKENDS:
            yield ValidationError(where, "unknown node backend", node.backend, list(NODE_BACKENDS))
        elif node.backend != "netns" and node.kind == "switch":
            yield ValidationError(
                where, f"switches run in the fabric, and {name} is a switch", node.backend
            )
        elif node.backend != "netns" and not node.in_namespace:
            yield ValidationError(
                where, f"{name} is in the host namespace: only netns applies", node.backend
            )
