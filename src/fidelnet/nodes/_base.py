"""The node backend protocol: what makes a node's interior, and how to reach it.

Every node has a network namespace of its own on the host, where the ends of its
links live (veth ends, TAP devices, shaping, the engine's endpoints): that part is the
same for every node kind, and link backends see nothing else. What differs is the
*interior*, where the node's programs run and its addresses, routes and sysctls are
set:

- ``netns`` (:mod:`fidelnet.nodes.netns`): the namespace itself; programs start in it
  through ``fidelnet-exec``, the interior is configured over netlink;
- ``qemu`` (not built yet, issue 12): a virtual machine whose NICs are TAP devices in
  that namespace, programs started by an agent in the guest;
- ``fake`` (:mod:`fidelnet.nodes.fake`): programs run on this machine as they are,
  the interior records what it is asked; for unit tests without root.

:class:`~fidelnet.nodes.node.Node` asks its backend for argvs and for its interior,
and does the rest (the persistent shell, ``popen``, cgroups, teardown) the same way
for every kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node

__all__ = ["Interior", "NodeBackend"]


class Interior(Protocol):
    """A node's own network configuration, by interface index (the index of the
    link end in the node's namespace; a backend maps it to what the node sees)."""

    def set_link(self, index: int, **attrs: Any) -> None:
        """``state`` ("up"/"down"), ``address`` (MAC), ``mtu``, ``ifalias``..."""

    def link_info(self, index: int) -> dict[str, Any]:
        """At least ``mac`` and ``up``."""

    def add_address(self, index: int, cidr: str) -> None: ...

    def addresses(self, index: int) -> list[str]:
        """The interface's addresses, CIDR, IPv4 and IPv6."""

    def flush_addresses(self, index: int) -> None: ...

    def add_routes(self, routes: Sequence[tuple[str, str | None, int | None]]) -> None:
        """(destination CIDR or "default", gateway or None, interface index or None)."""

    def add_neighbour(self, index: int, ip: str, mac: str) -> None: ...

    def add_flow_routes(
        self,
        tables: Sequence[tuple[int, str, int]],
        rules: Sequence[tuple[int, int, int, int]],
    ) -> None:
        """Per-flow policy routing: ``tables`` (table id, gateway, interface index), one
        default route each; ``rules`` (priority, IP protocol number, destination port,
        table id) sending the packets of that protocol and port to the table."""

    def write_sysctl(self, key: str, value: str) -> str:
        """Set a ``net.*`` sysctl in the node; returns the previous value."""


class NodeBackend(Protocol):
    """How nodes of one kind are made, started, reached and ended. One object per
    kind per run."""

    kind: str
    host_cpus: bool
    """Whether the node's programs run on the host's CPUs (a CPU number in the node
    means the host's), as in a namespace; not in a VM, which has its own."""

    def create(self, node: Node) -> None:
        """Make the node's namespace (recorded first) and whatever else must exist
        before its links; ``node.netns`` is set on return."""

    def start(self, nodes: Sequence[Node]) -> None:
        """Once the links exist: start what runs these nodes (all together), and
        return when each can run commands."""

    def shell_argv(self, node: Node) -> tuple[list[str], bool]:
        """The argv of the node's persistent shell (bash), and whether the run's
        exec server may start it (else this process does)."""

    def exec_argv(self, node: Node, argv: Sequence[str], cwd: str | None) -> list[str]:
        """The argv that runs ``argv`` inside the node, as a child of this process."""

    def intf_added(self, node: Node, intf: Interface) -> None:
        """``intf`` (a link end in the node's namespace, up) was added to a node that
        may already run (a VM gets a NIC for it at once)."""

    def interior(self, node: Node) -> Interior:
        """The node's own network configuration."""

    def describe(self, node: Node) -> dict[str, Any]:
        """What a result's provenance says about how the node ran (its backend, and
        for a VM its accelerator, image, memory, clock)."""

    def close(self, node: Node) -> None:
        """End what the backend runs for the node (its processes are already ended;
        kernel objects are the run's to remove)."""
