"""The BPF datapath: every switch of the run served by one tc BPF learning switch
(``bpf/l2switch.bpf.c``), attached to each port's ingress; no device per switch.

A switch is a number (1, 2, ... in the order switches are added) and a list of flood
slots, one per port in the order ports are added; a port taken down keeps its slot,
empty until it comes up again. Switches with ``stp`` get a spanning tree computed
from the topology (:mod:`fidelnet.switches.tree`): their ports on links to other STP
switches start blocked, as STP ports start listening, and forward once the tree is
computed (when the network waits for its switches to forward), and again each time a
link goes down or up. What the program does with a frame is documented in its
source; how it compares with a Linux bridge in docs/switches.md.

For MLD snooping across switches, every switch also gets a depth-first number and
every port to another switch the region of numbers behind it
(:mod:`fidelnet.switches.regions`), computed from the spec's links before the first
such port exists, and again when the spanning tree changes or a link the numbering
has not seen appears.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from fidelnet.errors import KernelError
from fidelnet.kernel import l2switch
from fidelnet.kernel.state import STATE_DIR
from fidelnet.switches import regions
from fidelnet.switches.tree import Edge, spanning_tree

if TYPE_CHECKING:
    from collections.abc import Callable

    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch
    from fidelnet.topology.spec import NodeSpec, TopologySpec

__all__ = ["BpfDatapath"]


@dataclass
class _Port:
    switch: str
    sw: int
    slot: int
    up: bool = True  # administratively (the interface)
    link: int | None = None  # index in the spec's links, on a link between STP switches
    forwarding: bool = True  # what the maps say
    trunk: bool = False  # the link leads to another switch
    gen: int = 0  # changes each time the port comes up: MLD memberships start afresh
    key: int | None = None  # index in the spec's links (any link)
    region: regions.Region | None = None  # a trunk's: what lies behind (None: all)


def _on_bpf(spec: NodeSpec, topo: TopologySpec) -> bool:
    """Whether switch ``spec`` runs here (this datapath exists, so BPF can run)."""
    return (spec.datapath or topo.datapath) not in ("bridge", "ovs")


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
        self._ports: dict[int, _Port] = {}  # by interface index
        self._stp: set[str] = set()  # switches with a computed spanning tree
        self._ends: dict[tuple[str, str], tuple[int, str]] = {}  # (node, intf): (link, peer)
        self._indexed = 0  # links of the spec already in _ends
        self._tree_dirty = False
        self._gen: dict[str, int] = {}  # switch -> generation of its address table
        self._port_gen = 0  # the last port generation given out
        self._snoop: dict[str, bool] = {}  # switch -> snoops MLD
        self._numbering: regions.Numbering | None = None  # for trunk pruning
        self._tree: set[int] | None = None  # the STP links' tree, once computed
        self._topo: TopologySpec | None = None

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
        self._topo = switch.net.spec
        self._slots[switch.name] = {}
        self._up[switch.name] = True
        if switch.spec.stp:
            self._stp.add(switch.name)
        self._gen[switch.name] = 0
        self._snoop[switch.name] = switch.spec.mld_snooping
        self.program().set_switch(sw, 0, up=True, snoop=switch.spec.mld_snooping)

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        del switch
        return {}

    def add_port(self, switch: Switch, intf: Interface) -> None:
        """Make ``intf`` a port of ``switch``: in the maps, then its filter. Called
        before the switch's end of the link is brought up, so the port sees the first
        frame (and MLD report) its link carries."""
        prog = self.program()
        sw, slots = self._ids[switch.name], self._slots[switch.name]
        port = _Port(switch.name, sw, len(slots), gen=self._next_gen())
        link, peer = self._link_of(switch, intf.name)
        peer_node = switch.net.nodes.get(peer) if peer is not None else None
        port.trunk = peer_node is not None and peer_node.kind == "switch"
        port.key = link
        if port.trunk and link is not None:
            if self._numbering is None or link not in self._numbering.links:
                self._renumber(switch.net.spec)
            assert self._numbering is not None
            port.region = self._numbering.regions.get((switch.name, link))
        if switch.name in self._stp and link is not None and peer in self._stp:
            # A link between two STP switches: blocked until the tree says otherwise.
            port.link, port.forwarding = link, False
            self._tree_dirty = True
        # Known to the maps before the filter sees its first frame.
        self._write_port(intf.index, port)
        slots[intf.index] = port.slot
        self._ports[intf.index] = port
        self._write_switch(switch.name)
        prog.attach(switch.netlink(), intf.index)

    def _next_gen(self) -> int:
        self._port_gen += 1
        return self._port_gen

    def _write_port(self, index: int, port: _Port) -> None:
        self.program().set_port(
            index,
            port.sw,
            port.slot,
            port.forwarding,
            trunk=port.trunk,
            gen=port.gen,
            region=port.region.bounds() if port.region is not None else None,
        )

    def _renumber(self, topo: TopologySpec) -> None:
        """Number the switches and give every trunk port its region, from the spec's
        links between switches on this datapath (between STP switches: the computed
        tree's, none before it exists); rewrite what changed."""
        on = {n.name: n for n in topo.switches() if _on_bpf(n, topo)}
        edges: list[tuple[str, str, int]] = []
        sinks = {name for name, n in on.items() if not n.mld_snooping}
        for key, lk in enumerate(topo.links):
            a, b = topo.nodes.get(lk.a), topo.nodes.get(lk.b)
            if a is None or b is None or a.kind != "switch" or b.kind != "switch":
                continue
            if lk.a not in on or lk.b not in on:
                # A bridge or OVS switch behind: what its side listens to is not learnt.
                sinks.update(n for n in (lk.a, lk.b) if n in on)
                continue
            if on[lk.a].stp and on[lk.b].stp and (self._tree is None or key not in self._tree):
                continue  # blocked until the tree is computed, or off the tree
            edges.append((lk.a, lk.b, key))
        numbering = regions.number(list(on), edges, sinks)
        numbering.links.update(range(len(topo.links)))  # every link in the spec seen
        old = self._numbering
        self._numbering = numbering
        for name in self._ids:
            if old is None or old.numbers.get(name) != numbering.numbers.get(name):
                self._write_switch(name)
        for index, port in self._ports.items():
            if not port.trunk or port.key is None:
                continue
            region = numbering.regions.get((port.switch, port.key))
            if region != port.region:
                port.region = region
                self._write_port(index, port)

    def _link_of(self, switch: Switch, intf: str) -> tuple[int | None, str | None]:
        """The spec's link that ``intf`` of ``switch`` ends, and the node at its other end."""
        links = switch.net.spec.links
        for i in range(self._indexed, len(links)):
            lk = links[i]
            if lk.a_intf and lk.b_intf:
                self._ends[(lk.a, lk.a_intf)] = (i, lk.b)
                self._ends[(lk.b, lk.b_intf)] = (i, lk.a)
        self._indexed = len(links)
        found = self._ends.get((switch.name, intf))
        return found if found is not None else (None, None)

    def link_added(self, switch: Switch, intf: Interface, peer: Interface) -> None:
        del switch, intf, peer  # nothing to do on the other end

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        slot = self._slots.get(switch.name, {}).pop(intf.index, None)
        port = self._ports.pop(intf.index, None)
        if slot is not None:
            self.program().remove_port(intf.index, self._ids[switch.name], slot)
        if port is not None and port.link is not None:
            self._compute_tree()

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        port = self._ports.get(intf.index)
        if port is None:
            return
        port.up = up
        if up:
            port.gen = self._next_gen()  # its node reports what it listens to again
        if port.link is not None:
            self._write_port(intf.index, port)
            self._compute_tree()  # the tree changes at once: no STP timers to wait for
            return
        port.forwarding = up
        self._write_port(intf.index, port)

    def _compute_tree(self) -> None:
        """Block every port between STP switches that is not on the spanning tree of
        the links whose both ends are up; let the tree's ports forward."""
        ends: dict[int, list[int]] = {}
        for index, port in self._ports.items():
            if port.link is not None:
                ends.setdefault(port.link, []).append(index)
        edges = []
        for link, idx in ends.items():
            if len(idx) == 2 and all(self._ports[i].up for i in idx):
                a, b = (self._ports[i].sw for i in idx)
                edges.append(Edge(a, b, link))
        tree = spanning_tree((self._ids[n] for n in self._stp), edges)
        renumber = tree != self._tree
        self._tree = tree
        changed = False
        for index, port in self._ports.items():
            if port.link is None:
                continue
            forwarding = port.up and port.link in tree
            if forwarding != port.forwarding:
                port.forwarding = forwarding
                self._write_port(index, port)
                changed = True
        self._tree_dirty = False
        if renumber and self._topo is not None:
            self._renumber(self._topo)
        if changed:
            # As STP's topology change does: forget what was learnt on the old tree,
            # or frames keep following it into ports that no longer lead anywhere.
            for name in self._stp:
                self._gen[name] += 1
                self._write_switch(name)

    def _write_switch(self, name: str) -> None:
        self.program().set_switch(
            self._ids[name],
            len(self._slots[name]),
            self._up[name],
            self._gen[name],
            snoop=self._snoop[name],
            num=self._numbering.numbers.get(name, 0) if self._numbering else 0,
        )

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        self._up[switch.name] = up
        self._write_switch(switch.name)

    def waits(self, switch: Switch) -> bool:
        return switch.spec.stp

    def forwarding(self, switch: Switch) -> bool:
        """True: a switch without STP forwards as soon as a port exists; one with STP
        once its tree is computed, which is done here when ports were added since."""
        if switch.name in self._stp and self._tree_dirty:
            self._compute_tree()
        return True

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
            "stp": "computed tree" if switch.name in self._stp else False,
            "ports": [names.get(ix, str(ix)) for ix in self._slots[switch.name]],
            "blocked": [
                names.get(ix, str(ix))
                for ix in self._slots[switch.name]
                if ix in self._ports and self._ports[ix].up and not self._ports[ix].forwarding
            ],  # by the spanning tree (a port that is down is not listed)
            "fdb": fdb,
            "counters_all_switches": prog.stats(),
        }

    def close(self) -> None:
        if self._prog is not None:
            self._prog.close()
            self._prog = None
