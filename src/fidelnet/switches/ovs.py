"""The Open vSwitch datapath: each switch an OVS bridge of the run's own OVS
(:class:`fidelnet.kernel.ovs.OvsDaemons`, started with the first OVS switch).

A bridge without a controller forwards as a learning switch (``fail_mode``
``standalone``: OVS's ``NORMAL`` action); with ``stp`` it runs OVS's STP. With the
topology's controllers (:class:`fidelnet.topology.spec.ControllerSpec`, started with
the first OVS switch, inside the fabric namespace), every bridge connects to all of
them with ``fail_mode`` ``secure`` (Mininet's default: no forwarding without a
controller), and the network waits until each is connected. Ports are added with
``ovs-vsctl add-port`` once they are up in the fabric namespace, and follow their
links' carrier by themselves.

Not there yet (issue 16): remote controllers (on the host or in a node:
docs/decisions/ovs-controllers.md), OpenFlow options (``protocols``, ``failMode``,
``dpid``), the Mininet classes that ask for them, and the CLI's ``dpctl``; a switch
stopped with :meth:`set_switch_up` has its bridge's ports taken down rather than the
bridge deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fidelnet.kernel.ovs import OvsDaemons

if TYPE_CHECKING:
    from collections.abc import Callable

    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch

__all__ = ["OvsDatapath"]


class OvsDatapath:
    """Switches as bridges of the run's own Open vSwitch."""

    kind = "ovs"

    def __init__(self, run_id: str, record: Callable[..., None], gone: Callable[..., None]) -> None:
        self.run_id = run_id
        self._record = record
        self._gone = gone
        self.daemons: OvsDaemons | None = None
        self._up: dict[str, bool] = {}

    def ovs(self, switch: Switch) -> OvsDaemons:
        """The run's OVS daemons (and its controllers), started on first use in the
        switch's namespace."""
        if self.daemons is None:
            daemons = OvsDaemons(self.run_id, switch.netns, self._record, self._gone)
            self.daemons = daemons
            daemons.start()
            for c in switch.net.spec.controllers:
                daemons.start_controller(c.name, c.port)
        return self.daemons

    def add_switch(self, switch: Switch) -> None:
        ovs = self.ovs(switch)
        name = switch.name
        targets = [f"tcp:127.0.0.1:{c.port}" for c in switch.net.spec.controllers]
        ovs.vsctl(
            "--", "add-br", name,
            "--", "set", "bridge", name, f"datapath_type={ovs.datapath_type}",
            f"fail_mode={'secure' if targets else 'standalone'}",
            f"stp_enable={'true' if switch.spec.stp else 'false'}",
        )  # fmt: skip
        if targets:
            ovs.vsctl("set-controller", name, *targets)
        self._up[name] = True

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        del switch
        return {}

    def add_port(self, switch: Switch, intf: Interface) -> None:
        self.ovs(switch).vsctl("--may-exist", "add-port", switch.name, intf.name)

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        if self.daemons is not None:
            self.daemons.vsctl("--if-exists", "del-port", switch.name, intf.name)

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        del switch, intf, up  # OVS follows the port's carrier

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        for intf in switch.intf_list():
            if intf.name != "lo":
                intf.set_up(up)
        self._up[switch.name] = up

    def waits(self, switch: Switch) -> bool:
        """Whether ``switch`` may not forward at once: STP, or a controller to reach."""
        return switch.spec.stp or bool(switch.net.spec.controllers)

    def forwarding(self, switch: Switch) -> bool:
        if self.daemons is None:
            return True
        if switch.net.spec.controllers:
            # Every controller of the bridge connected ("true" per controller row).
            got = self.daemons.vsctl("--columns=is_connected", "find", "controller")
            rows = [line for line in got.splitlines() if "is_connected" in line]
            targets = self.daemons.vsctl("get-controller", switch.name).split()
            if not targets or len(rows) < len(targets) or "false" in got:
                return False
        if not switch.spec.stp:
            return True
        out = self.daemons.vsctl(
            "--columns=status", "--format=csv", "--no-headings", "list", "port"
        )
        return "stp_state=learning" not in out and "stp_state=listening" not in out

    def stats(self, switch: Switch) -> dict[str, Any]:
        dp = self.daemons.datapath_type if self.daemons is not None else None
        return {"datapath": self.kind, "ovs_datapath": dp, "bridge": switch.name}

    def close(self) -> None:
        """Stop the run's OVS daemons and remove their directory."""
        if self.daemons is not None:
            self.daemons.stop()
            self.daemons = None
