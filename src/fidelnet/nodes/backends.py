"""The choice of a node backend by name (:mod:`fidelnet.nodes._base`)."""

from __future__ import annotations

from fidelnet.errors import UnsupportedError
from fidelnet.nodes._base import NodeBackend
from fidelnet.topology.spec import NODE_BACKENDS

__all__ = ["NODE_BACKENDS", "make_backend"]


def make_backend(kind: str) -> NodeBackend:
    """A new backend of ``kind`` for one run."""
    if kind == "netns":
        from fidelnet.nodes.netns import NetnsBackend

        return NetnsBackend()
    if kind == "qemu":
        from fidelnet.nodes.qemu import QemuBackend

        return QemuBackend()
    if kind == "container":
        from fidelnet.nodes.container import ContainerBackend

        return ContainerBackend()
    raise UnsupportedError(
        f"a node backend {kind!r}", "a node", f"choose one of {', '.join(NODE_BACKENDS)}"
    )
