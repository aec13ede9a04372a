"""The switch datapath protocol, and the choice of a datapath for a switch."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from fidelnet.errors import UnsupportedError
from fidelnet.topology.spec import DATAPATHS

if TYPE_CHECKING:
    from fidelnet.nodes.intf import Interface
    from fidelnet.nodes.node import Switch
    from fidelnet.topology.spec import NodeSpec, TopologySpec

__all__ = ["DATAPATHS", "Datapath", "choose", "make", "preflight"]

log = logging.getLogger("fidelnet")
_TOLD: set[str] = set()  # reasons for falling back to bridges already logged


class Datapath(Protocol):
    """What forwards frames between switches' ports. One object per kind per run;
    every switch of that kind is added to it before its ports."""

    kind: str

    def add_switch(self, switch: Switch) -> None:
        """Make ``switch`` exist (its spec, its fabric netlink handle are set)."""

    def port_attrs(self, switch: Switch) -> dict[str, Any]:
        """Netlink attributes a new port of ``switch`` gets when it is brought up."""

    def add_port(self, switch: Switch, intf: Interface) -> None:
        """``intf`` (up, in the fabric) is a port of ``switch`` from now on."""

    def link_added(self, switch: Switch, intf: Interface, peer: Interface) -> None:
        """``intf``'s link is built; ``peer`` is its other end (another node's)."""

    def remove_port(self, switch: Switch, intf: Interface) -> None:
        """``intf`` is about to be deleted: send nothing to it any more."""

    def set_port_up(self, switch: Switch, intf: Interface, up: bool) -> None:
        """Port ``intf`` was taken down or brought up."""

    def set_switch_up(self, switch: Switch, up: bool) -> None:
        """Start or stop forwarding on ``switch`` (its ports stay)."""

    def waits(self, switch: Switch) -> bool:
        """Whether ``switch`` may not forward as soon as it is built (STP to settle, a
        controller to reach): the network then waits for :meth:`forwarding`."""

    def forwarding(self, switch: Switch) -> bool:
        """Whether ``switch`` forwards on every port (STP has settled, its controllers
        are connected)."""

    def stats(self, switch: Switch) -> dict[str, Any]:
        """What the datapath tells about ``switch``: its kind and counters."""

    def close(self) -> None:
        """Release what this process holds (kernel objects go with the fabric)."""


def choose(spec: NodeSpec, topo: TopologySpec, missing_bpf: Callable[[], str | None]) -> str:
    """The datapath a switch runs on: ``bridge``, ``bpf`` or ``ovs`` (only when asked
    for: the run's own Open vSwitch, :mod:`fidelnet.switches.ovs`). ``missing_bpf`` tells
    why the BPF switch cannot run here (None: it can). With ``stp``, a bridge runs
    the kernel's STP and the BPF switch a spanning tree computed from the topology
    (:mod:`fidelnet.switches.tree`)."""
    requested = spec.datapath or topo.datapath
    if requested == "bridge":
        return "bridge"
    if requested == "ovs":
        from fidelnet.kernel import ovs

        why_ovs = ovs.missing()
        if why_ovs is not None:
            raise UnsupportedError(
                why_ovs, f"nodes.{spec.name}.datapath ovs", "use datapath: bpf or bridge"
            )
        return "ovs"
    why = missing_bpf()
    if requested == "bpf":
        if why is not None:
            raise UnsupportedError(why, f"nodes.{spec.name}.datapath bpf", "use datapath: bridge")
        return "bpf"
    if why is None:
        return "bpf"
    if why not in _TOLD:
        _TOLD.add(why)
        log.info("switches run as Linux bridges: the BPF switch needs %s", why)
    return "bridge"


def make(
    kind: str, run_id: str, owning: tuple[Callable[..., None], Callable[..., None]]
) -> Datapath:
    """A new datapath of ``kind`` for run ``run_id``; ``owning`` is the run state's
    (record, gone) pair, for what the datapath makes outside the fabric namespace."""
    if kind == "bridge":
        from fidelnet.switches.bridge import BridgeDatapath

        return BridgeDatapath(run_id)
    if kind == "bpf":
        from fidelnet.switches.bpf import BpfDatapath

        return BpfDatapath(run_id, *owning)
    if kind == "ovs":
        from fidelnet.switches.ovs import OvsDatapath

        return OvsDatapath(run_id, *owning)
    raise UnsupportedError(f"a switch datapath {kind!r}", "a switch", "choose bridge, bpf or ovs")


def preflight(topo: TopologySpec, missing_bpf: Callable[[], str | None]) -> None:
    """Refuse, before anything is built, a switch that asks for a datapath this
    machine cannot run."""
    for spec in topo.switches():
        choose(spec, topo, missing_bpf)


def ovs_env(net: Any) -> dict[str, str]:
    """With OVS switches, the variables that point the OVS tools at this run's daemons
    (``ovs-vsctl`` typed in a node's shell reaches them, never the machine's)."""
    spec = net.spec
    uses_ovs = spec.datapath == "ovs" or any(
        n.datapath == "ovs" for n in spec.nodes.values() if n.kind == "switch"
    )
    if not uses_ovs:
        return {}
    from fidelnet.kernel.ovs import run_env

    return dict(run_env(net.run_id))
