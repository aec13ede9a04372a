"""The Open vSwitch datapath: each switch an OVS bridge of the run's own OVS
(:class:`fidelnet.kernel.ovs.OvsDaemons`, started with the first OVS switch).

A bridge without a controller forwards as a learning switch (``fail_mode``
``standalone``: OVS's ``NORMAL`` action); with ``stp`` it runs OVS's STP. Ports are
added with ``ovs-vsctl add-port`` once they are up in the fabric namespace, and
follow their links' carrier by themselves.

Not there yet (issue 16): controllers and OpenFlow options (``protocols``,
``failMode``, ``dpid``), the Mininet classes that ask for them, and the CLI's
``dpctl``; a switch stopped with :meth:`set_switch_up` has its bridge's ports
taken down rather than the bridge deleted.
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
        """The run's OVS daemons, started on first use in the switch's namespace."""
        if self.daemons is None:
            daemons = OvsDaemons(self.run_id, switch.netns, self._record, self._gone)
            self.daemons = daemons
            daemons.start()
        return self.daemons

    def add_switch(self, switch: Switch) -> None:
        ovs = self.ovs(switch)
        name = switch.name
        ovs.vsctl(
            "--", "add-br", name,
            "--", "set", "bridge", name, f"datapath_type={ovs.datapath_type}",
            "fail_mode=standalone", f"stp_enable={'true' if switch.spec.stp else 'false'}",
        )  # fmt: skip
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

    def forwarding(self, switch: Switch) -> bool:
        if not switch.spec.stp or self.daemons is None:
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
