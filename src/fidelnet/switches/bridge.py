"""The Linux bridge datapath: one bridge per switch in the fabric namespace, the
kernel's STP when the switch asks for it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fidelnet.kernel.state import mark_for

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch

__all__ = ["BridgeDatapath"]

_STP_PENDING = (1, 2)  # listening, learning


class BridgeDatapath:
    """Switches as Linux bridges."""

    kind = "bridge"

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id

    def add_switch(self, switch: Switch) -> None:
        nl = switch.netlink()
        switch.bridge_index = nl.add_bridge(switch.name, switch.spec.stp)
        nl.set_link(switch.bridge_index, state="up", ifalias=mark_for(self.run_id))

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        return {"master": switch.bridge_index}

    def add_port(self, switch: Switch, intf: Interface) -> None:
        del switch, intf  # enslaved when it was brought up (port_attrs)

    def link_added(self, switch: Switch, intf: Interface, peer: Interface) -> None:
        del switch, intf, peer  # nothing to do on the other end

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        del switch, intf  # the bridge lets go of a deleted port itself

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        del switch, intf, up  # the bridge follows its ports' carrier itself

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        switch.netlink().set_link(switch.bridge_index, state="up" if up else "down")

    def waits(self, switch: Switch) -> bool:
        return switch.spec.stp

    def forwarding(self, switch: Switch) -> bool:
        if not switch.spec.stp:
            return True
        states = switch.netlink().bridge_port_states(switch.bridge_index)
        return not any(s in _STP_PENDING for s in states)

    def stats(self, switch: Switch) -> dict[str, Any]:
        return {"datapath": self.kind, "device": switch.name, "stp": switch.spec.stp}

    def close(self) -> None:
        """Nothing held: the bridges go with the fabric namespace."""
