"""A datapath that records what it is asked, for unit tests of what drives switches."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch

__all__ = ["FakeDatapath"]


class FakeDatapath:
    """Switches and ports kept in dictionaries; every call appended to ``calls``."""

    kind = "fake"

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.ports: dict[str, dict[str, bool]] = {}  # switch -> port -> up
        self.up: dict[str, bool] = {}
        self.closed = False

    def add_switch(self, switch: Switch) -> None:
        self.calls.append(("add_switch", switch.name))
        self.ports[switch.name] = {}
        self.up[switch.name] = True

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        del switch
        return {}

    def add_port(self, switch: Switch, intf: Interface) -> None:
        self.calls.append(("add_port", switch.name, intf.name))
        self.ports[switch.name][intf.name] = True

    def link_added(self, switch: Switch, intf: Interface, peer: Interface) -> None:
        del switch, intf, peer  # nothing to do on the other end

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        self.calls.append(("remove_port", switch.name, intf.name))
        self.ports[switch.name].pop(intf.name, None)

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        self.calls.append(("set_port_up", switch.name, intf.name, str(up)))
        self.ports[switch.name][intf.name] = up

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        self.calls.append(("set_switch_up", switch.name, str(up)))
        self.up[switch.name] = up

    def waits(self, switch: Switch) -> bool:
        return switch.spec.stp

    def forwarding(self, switch: Switch) -> bool:
        return self.up[switch.name]

    def stats(self, switch: Switch) -> dict[str, Any]:
        return {"datapath": self.kind, "ports": dict(self.ports[switch.name])}

    def close(self) -> None:
        self.closed = True
