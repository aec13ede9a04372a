"""A node backend for unit tests: no namespace, no root.

Programs run on this machine as they are (the shell is a plain ``bash``), so what
:class:`~fidelnet.nodes.node.Node` does with a shell and with ``popen`` is tested for
real; the interior records what it is asked, with every interface up and a MAC made
from its index. Every call is appended to ``calls``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Node

__all__ = ["FakeInterior", "FakeNodeBackend"]


class FakeInterior:
    """Records addresses, routes, neighbours, sysctls and link attributes."""

    def __init__(self, calls: list[tuple[Any, ...]], node: str) -> None:
        self.calls = calls
        self.node = node
        self.links: dict[int, dict[str, Any]] = {}
        self.addresses_: dict[int, list[str]] = {}
        self.routes: list[tuple[str, str | None, int | None]] = []
        self.neighbours: dict[tuple[int, str], str] = {}
        self.sysctls: dict[str, str] = {}

    def set_link(self, index: int, **attrs: Any) -> None:
        self.calls.append(("set_link", self.node, index, attrs))
        self.links.setdefault(index, {}).update(attrs)

    def link_info(self, index: int) -> dict[str, Any]:
        attrs = self.links.get(index, {})
        mac = attrs.get("address") or f"02:00:00:00:{index >> 8 & 0xFF:02x}:{index & 0xFF:02x}"
        return {"mac": mac, "up": attrs.get("state", "up") == "up"}

    def add_address(self, index: int, cidr: str) -> None:
        self.calls.append(("add_address", self.node, index, cidr))
        self.addresses_.setdefault(index, []).append(cidr)

    def addresses(self, index: int) -> list[str]:
        return list(self.addresses_.get(index, []))

    def flush_addresses(self, index: int) -> None:
        self.calls.append(("flush_addresses", self.node, index))
        self.addresses_[index] = []

    def add_routes(self, routes: Sequence[tuple[str, str | None, int | None]]) -> None:
        self.calls.append(("add_routes", self.node, list(routes)))
        self.routes.extend(routes)

    def add_neighbour(self, index: int, ip: str, mac: str) -> None:
        self.calls.append(("add_neighbour", self.node, index, ip, mac))
        self.neighbours[(index, ip)] = mac

    def add_flow_routes(
        self,
        tables: Sequence[tuple[int, str, int]],
        rules: Sequence[tuple[int, int, int, int]],
    ) -> None:
        self.calls.append(("add_flow_routes", self.node, list(tables), list(rules)))

    def write_sysctl(self, key: str, value: str) -> str:
        self.calls.append(("write_sysctl", self.node, key, value))
        old = self.sysctls.get(key, "0")
        self.sysctls[key] = value
        return old


class FakeNodeBackend:
    """Nodes that run their programs here, with a recording interior."""

    kind = "fake"
    host_cpus = True

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.interiors: dict[str, FakeInterior] = {}
        self.started: list[str] = []

    def create(self, node: Node) -> None:
        self.calls.append(("create", node.name))
        node.netns = None

    def start(self, nodes: Sequence[Node]) -> None:
        self.calls.append(("start", *(n.name for n in nodes)))
        self.started += [n.name for n in nodes]

    def shell_argv(self, node: Node) -> tuple[list[str], bool]:
        self.calls.append(("shell", node.name))
        return ["bash", "--norc", "--noediting", "-is"], False

    def exec_argv(self, node: Node, argv: Sequence[str], cwd: str | None) -> list[str]:
        self.calls.append(("exec", node.name, *argv))
        if cwd is None:
            return list(argv)
        # No launcher here: env(1) cannot change directory, so a tiny shell does,
        # with the argv passed as arguments, never parsed.
        return ["sh", "-c", 'cd "$0" && exec "$@"', cwd, *argv]

    def intf_added(self, node: Node, intf: Interface) -> None:
        self.calls.append(("intf_added", node.name, intf.name))

    def interior(self, node: Node) -> FakeInterior:
        if node.name not in self.interiors:
            self.interiors[node.name] = FakeInterior(self.calls, node.name)
        return self.interiors[node.name]

    def describe(self, node: Node) -> dict[str, Any]:
        return {"backend": self.kind, "node": node.name}

    def close(self, node: Node) -> None:
        self.calls.append(("close", node.name))
