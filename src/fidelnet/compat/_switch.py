"""Mininet's switches, all run as learning switches in the run's fabric namespace, on
the topology's datapath (docs/switches.md).

- :class:`Switch`: the base class (``dpid``, ``opts``, ``listenPort``; ports from 1).
- :class:`LinuxBridge`: always a Linux bridge; ``stp=True`` turns on the kernel's
  spanning tree.
- :class:`OVSSwitch` (= ``OVSKernelSwitch``), :class:`OVSBridge`, :class:`UserSwitch`:
  accepted and run as learning switches (``stp=True`` honoured, on a bridge), with
  one warning per process. OpenFlow switching is out of scope for now.

In a switch that is not Open vSwitch, the one ``ovs-vsctl`` query Mininet scripts commonly
make, ``ovs-vsctl get Interface <intf> ofport``, answers with the port number
fidelnet gave the interface (a shell function defined in the switch's shell);
every other ``ovs-vsctl`` command fails with a message saying why.
"""

from __future__ import annotations

import re
import shutil
from typing import Any

from fidelnet.compat import _context
from fidelnet.compat._node import Node
from fidelnet.kernel import procfs
from fidelnet.nodes import node as _core
from fidelnet.topology.spec import Datapath, NodeSpec

__all__ = [
    "LearningSwitch",
    "LinuxBridge",
    "OVSBridge",
    "OVSKernelSwitch",
    "OVSSwitch",
    "Switch",
    "UserSwitch",
]


def ovs_available() -> bool:
    """Whether Open vSwitch could run here (its tools and kernel module)."""
    return shutil.which("ovs-vsctl") is not None and procfs.module_loaded("openvswitch")


class Switch(Node, _core.Switch):
    """A switch: a Linux bridge in the run's fabric namespace."""

    portBase = 1
    dpidLen = 16
    fn_kind = "switch"
    fn_stp = False
    fn_datapath: Datapath | None = None  # None: the topology's (docs/switches.md)
    _fn_ovs_defined = False

    def __init__(
        self,
        name: str,
        dpid: str | None = None,
        opts: str = "",
        listenPort: int | None = None,
        **params: Any,
    ) -> None:
        params.pop("inNamespace", None)  # a switch's place is the fabric namespace
        Node.__init__(self, name, **params)
        self.dpid = self.defaultDpid(dpid)
        self.opts = opts
        self.listenPort = listenPort
        self.controlIntf = None

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        return NodeSpec(name, kind="switch", stp=bool(self.fn_stp), datapath=self.fn_datapath)

    def defaultDpid(self, dpid: str | None = None) -> str | None:
        """``dpid`` without colons, or the number in the name (s12 -> ...0c), padded."""
        if dpid:
            dpid = dpid.replace(":", "")
        else:
            nums = re.findall(r"\d+", self.name)
            if not nums:
                return None  # a bridge needs no datapath id
            dpid = f"{int(nums[0]):x}"
        return "0" * (self.dpidLen - len(dpid)) + dpid

    @property
    def stp(self) -> bool:
        return self.spec.stp

    def connected(self) -> bool:
        """Forwarding: at once without STP; with STP once no port is still listening
        or learning."""
        return self.forwarding()

    def start(self, controllers: Any = None) -> None:
        """Start forwarding (as soon as its ports exist)."""
        del controllers
        self.set_forwarding(True)

    def stop(self, deleteIntfs: bool = True) -> None:
        """Stop forwarding (a bridge is taken down, a BPF switch drops what arrives);
        delete its interfaces if asked."""
        if _context.is_stopping(self.net):
            return
        self.set_forwarding(False)
        if deleteIntfs:
            self.deleteIntfs()

    def dpctl(self, *args: Any) -> str:
        return (
            f"fidelnet: {self.name} is a Linux bridge; there is no OpenFlow datapath "
            f"to run 'dpctl {' '.join(str(a) for a in args)}' on\n"
        )

    def sendCmd(self, *args: Any, **kwargs: Any) -> None:
        text = " ".join(str(a) for a in args)
        if "ovs-vsctl" in text and not self._fn_ovs_defined:
            self._fn_define_ovs_vsctl()
        super().sendCmd(*args, **kwargs)

    def addIntf(self, intf: Any, port: int | None = None, moveIntfFn: Any = None) -> None:
        super().addIntf(intf, port, moveIntfFn)
        self._fn_ovs_defined = False  # the ports changed

    def _fn_define_ovs_vsctl(self) -> None:
        cases = " ".join(f"{i.name}) echo {p};;" for p, i in sorted(self.intfs.items()))
        sh = self.fn_shell()
        sh.run(
            'ovs-vsctl() { if [ "$1" = get ] && [ "$2" = Interface ] && '
            f'[ "$4" = ofport ]; then case "$3" in {cases} '
            '*) echo "ovs-vsctl: no row \\"$3\\" in table Interface" >&2; return 1;; esac; '
            f'else echo "fidelnet: {self.name} is a Linux bridge, not Open vSwitch; '
            "'ovs-vsctl $*' is not emulated\" >&2; return 1; fi; }"
        )
        self._fn_ovs_defined = True


class LinuxBridge(Switch):
    """A Linux bridge, with the kernel's spanning tree when ``stp=True``: always the
    bridge datapath, since scripts that ask for it may look at the bridge device."""

    fn_datapath: Datapath | None = "bridge"

    nextPrio = 100

    def __init__(
        self, name: str, stp: bool = False, prio: int | None = None, **kwargs: Any
    ) -> None:
        self.fn_stp = bool(stp)
        if prio:
            self.prio = prio
            _context.warn_once(
                "prio",
                f"{name}: prio={prio} not applied; fidelnet's bridges "
                "keep the kernel's default STP priority",
            )
        else:
            self.prio = LinuxBridge.nextPrio
            LinuxBridge.nextPrio += 1
        super().__init__(name, **kwargs)


class LearningSwitch(Switch):
    """A learning switch on the topology's datapath (docs/switches.md), on a Linux
    bridge with the kernel's spanning tree when ``stp=True``: what ``fidelnet mn``
    runs by default when no controller is asked for (Mininet's ``mn`` would run Open
    vSwitch with its default controller)."""

    def __init__(self, name: str, stp: bool = False, **kwargs: Any) -> None:
        self.fn_stp = bool(stp)
        super().__init__(name, **kwargs)


def _warn_bridge(kind: str) -> None:
    why = (
        "Open vSwitch is not available here"
        if not ovs_available()
        else "fidelnet does not drive Open vSwitch"
    )
    _context.warn_once(
        "ovs-as-bridge",
        f"{why}: {kind} switches run as learning switches (no OpenFlow; stp=True is honoured)",
    )


class OVSSwitch(Switch):
    """Mininet's Open vSwitch switch, run as a Linux bridge."""

    def __init__(
        self,
        name: str,
        failMode: str = "secure",
        datapath: str = "kernel",
        inband: bool = False,
        protocols: str | None = None,
        reconnectms: int = 1000,
        stp: bool = False,
        batch: bool = False,
        **params: Any,
    ) -> None:
        _warn_bridge(type(self).__name__)
        self.fn_stp = bool(stp)
        self.failMode = failMode
        self.datapath = datapath
        self.inband = inband
        self.protocols = protocols
        self.reconnectms = reconnectms
        self.batch = batch
        self.commands: list[str] = []
        super().__init__(name, **params)

    def vsctl(self, *args: Any, **kwargs: Any) -> str:
        del kwargs
        return self.cmd("ovs-vsctl", *args)

    def attach(self, intf: Any) -> None:
        """Nothing to do: a link's switch end joins the bridge when it is made."""

    def detach(self, intf: Any) -> None:
        """Nothing to do."""

    @classmethod
    def isOldOVS(cls) -> bool:
        return False


OVSKernelSwitch = OVSSwitch


class OVSBridge(OVSSwitch):
    """Mininet's OVS switch in standalone (learning-bridge) mode."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(failMode="standalone")
        super().__init__(*args, **kwargs)


class UserSwitch(Switch):
    """Mininet's user-space reference switch, run as a Linux bridge."""

    dpidLen = 12

    def __init__(
        self, name: str, dpopts: str = "--no-slicing", stp: bool = False, **kwargs: Any
    ) -> None:
        _warn_bridge(type(self).__name__)
        self.dpopts = dpopts
        self.fn_stp = bool(stp)
        super().__init__(name, **kwargs)
