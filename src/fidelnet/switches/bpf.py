"""The BPF datapath: every switch of the run served by one tc BPF learning switch
(``bpf/l2switch.bpf.c``), attached to each port's ingress; no device per switch.

A switch is a number (1, 2, ... in the order switches are added) and a list of flood
slots, one per port in the order ports are added; a port taken down keeps its slot,
empty until it comes up again. What the program does with a frame is documented in
its source; how it compares with a Linux bridge in docs/switches.md.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from fidelnet.errors import KernelError
from fidelnet.kernel import l2switch
from fidelnet.kernel.state import STATE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch

__all__ = ["BpfDatapath"]


class BpfDatapath:
    """Switches as entries in the run's BPF learning switch."""

    kind = "bpf"

    def __init__(
        self,
        run_id: str,
        record: Callable[..., None],
        gone: Callable[..., None],
        program: l2switch.SwitchProgram | None = None,
    ) -> None:
        self.run_id = run_id
        self._record = record
        self._gone = gone
        self._prog = program
        self._ids: dict[str, int] = {}
        self._slots: dict[str, dict[int, int]] = {}  # switch -> port ifindex -> slot
        self._up: dict[str, bool] = {}

    def program(self) -> l2switch.SwitchProgram:
        """The switch program, loaded on first use."""
        if self._prog is None:
            pins = os.path.join(STATE_DIR, f"{self.run_id}-l2switch")
            self._prog = l2switch.load(
                pins,
                lambda: self._record("mount", path=pins),
                lambda: self._gone("mount", path=pins),
            )
        return self._prog

    def add_switch(self, switch: Switch) -> None:
        sw = len(self._ids) + 1
        if sw >= l2switch.MAX_SWITCHES:
            raise KernelError(
                f"{switch.name}: a run holds at most {l2switch.MAX_SWITCHES - 1} switches "
                "on the bpf datapath"
            )
        self._ids[switch.name] = sw
        self._slots[switch.name] = {}
        self._up[switch.name] = True
        self.program().set_switch(sw, 0, up=True)

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        del switch
        return {}

    def add_port(self, switch: Switch, intf: Interface) -> None:
        prog = self.program()
        sw, slots = self._ids[switch.name], self._slots[switch.name]
        slot = len(slots)
        # Known to the maps before the filter sees its first frame.
        prog.set_port(intf.index, sw, slot, up=True)
        slots[intf.index] = slot
        prog.set_switch(sw, len(slots), self._up[switch.name])
        prog.attach(switch.netlink(), intf.index)

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        slot = self._slots.get(switch.name, {}).pop(intf.index, None)
        if slot is not None:
            self.program().remove_port(intf.index, self._ids[switch.name], slot)

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        slot = self._slots.get(switch.name, {}).get(intf.index)
        if slot is not None:
            self.program().set_port(intf.index, self._ids[switch.name], slot, up)

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        self._up[switch.name] = up
        self.program().set_switch(self._ids[switch.name], len(self._slots[switch.name]), up)

    def forwarding(self, switch: Switch) -> bool:
        del switch
        return True  # no STP: a port forwards as soon as it exists

    def stats(self, switch: Switch) -> dict[str, Any]:
        """The switch's number, ports and learnt addresses, and the program's counters
        (over all switches of the run)."""
        prog = self.program()
        names = {i.index: i.name for i in switch.intfs.values()}
        sw = self._ids[switch.name]
        fdb = {mac: names.get(ix, str(ix)) for mac, ix in prog.fdb(sw).items()}
        return {
            "datapath": self.kind,
            "switch_id": sw,
            "up": self._up[switch.name],
            "ports": [names.get(ix, str(ix)) for ix in self._slots[switch.name]],
            "fdb": fdb,
            "counters_all_switches": prog.stats(),
        }

    def close(self) -> None:
        if self._prog is not None:
            self._prog.close()
            self._prog = None
