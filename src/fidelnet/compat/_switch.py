"""Mininet's switches, in the run's fabric namespace (docs/switches.md).

- :class:`Switch`: the base class (``dpid``, ``opts``, ``listenPort``; ports from
  1), a learning switch on the topology's datapath.
- :class:`LinuxBridge`: always a Linux bridge; ``stp=True`` turns on the kernel's
  spanning tree.
- :class:`OVSSwitch` (= ``OVSKernelSwitch``), :class:`OVSBridge`, :class:`UserSwitch`:
  bridges of the run's own Open vSwitch, with ``failMode``, ``protocols``, ``dpid``,
  ``stp``, connected to the controllers they are started with
  (:mod:`fidelnet.compat._controller`). ``ovs-vsctl``, ``ovs-ofctl`` and
  ``ovs-appctl`` typed in any node's shell reach the run's Open vSwitch. Where Open
  vSwitch is not installed they run as learning switches, with one warning per
  process naming the package.
- :class:`LearningSwitch`: what ``fidelnet mn`` runs when no controller is asked for.

In a switch that is not Open vSwitch, the one ``ovs-vsctl`` query Mininet scripts commonly
make, ``ovs-vsctl get Interface <intf> ofport``, answers with the port number
fidelnet gave the interface (a shell function defined in the switch's shell);
every other ``ovs-vsctl`` command fails with a message saying why.

``inband``, ``reconnectms`` (the controllers' ``max_backoff``) and ``datapath``
(``user``: OVS's userspace datapath for that bridge) are applied; ``batch`` is
accepted: fidelnet always configures the bridges of a build in one transaction.
"""

from __future__ import annotations

import os
import re
from typing import Any

from fidelnet import openflow
from fidelnet.compat import _context
from fidelnet.compat._controller import Controller, NullController
from fidelnet.compat._intf import Intf
from fidelnet.compat._node import Node
from fidelnet.errors import KernelError, NodeError, UnsupportedError, ValidationError
from fidelnet.kernel.ovs import missing as ovs_missing
from fidelnet.nodes import node as _core
from fidelnet.nodes.intf import Interface
from fidelnet.topology.spec import Datapath, NodeSpec, OpenFlowSpec

__all__ = [
    "IVSSwitch",
    "LearningSwitch",
    "LinuxBridge",
    "OVSBridge",
    "OVSKernelSwitch",
    "OVSSwitch",
    "Switch",
    "UserSwitch",
]


_NO_DPID = (
    "Unable to derive default datapath ID - please either specify a dpid "
    "or use a canonical switch name such as s23."
)


class ControlIntf(Intf):
    """A switch's control interface, Mininet's ``controlIntf``: ``lo`` on port 0, the
    first of its ``intfList()`` (``intfs``, ``net``, ``dump`` and ``ports`` list it, as
    Mininet does for a switch in the host's namespace). It is the loopback of the
    run's fabric namespace, where the switches and their controllers live; it is no
    port of the switch (not in ``intfs``, never given to a datapath), and it is never
    taken down: the run's switches and controllers share it."""

    def __init__(self, node: Any) -> None:
        Interface.__init__(self, node, "lo", 0, _LOOPBACK_INDEX)
        self.link = None
        self.params = {}
        self._fn_fresh = {}
        self._ip, self._prefixlen = "127.0.0.1", 8

    def config(self, *args: Any, **params: Any) -> dict[str, Any] | None:
        """Nothing to configure on the loopback."""
        del args, params
        return {}

    def set_up(self, up: bool = True) -> None:
        if not up:
            raise NodeError(
                f"{self.node.name}: lo is the loopback of the run's fabric namespace, "
                "shared by its switches and controllers; it stays up"
            )

    def updateIP(self) -> str | None:
        return self._ip

    def delete(self) -> None:
        """The loopback is never deleted."""


_LOOPBACK_INDEX = 1  # the loopback is the first device of every namespace


class Switch(Node, _core.Switch):
    """A switch: a Linux bridge in the run's fabric namespace."""

    portBase = 1
    dpidLen = 16
    fn_kind = "switch"
    fn_releasable = False  # it goes with its network
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
        # Mininet derives the datapath id once the node exists; here before, so a name
        # it cannot derive one from is refused before anything is made.
        self.name = name
        self.dpid = self.defaultDpid(dpid)
        Node.__init__(self, name, **params)
        self.opts = opts
        self.listenPort = listenPort
        self.controlIntf = ControlIntf(self)
        self.ports[self.controlIntf] = 0
        self.nameToIntf[self.controlIntf.name] = self.controlIntf

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        return NodeSpec(name, kind="switch", stp=bool(self.fn_stp), datapath=self.fn_datapath)

    def defaultDpid(self, dpid: str | None = None) -> str:
        """``dpid`` without colons, or the first number in the name in hex (s12 ->
        ...0c), zero-padded to ``dpidLen`` digits; a name without a number and no
        ``dpid`` is refused with Mininet's message."""
        if dpid:
            dpid = dpid.replace(":", "")
            if len(dpid) > self.dpidLen or not re.fullmatch(r"[0-9A-Fa-f]+", dpid):
                raise ValidationError(
                    f"{self.name}.dpid", f"must be at most {self.dpidLen} hex digits", dpid
                )
        else:
            nums = re.findall(r"\d+", self.name)
            if not nums:
                raise ValidationError(f"switch {self.name}", _NO_DPID, self.name)
            dpid = f"{int(nums[0]):x}"
        return "0" * (self.dpidLen - len(dpid)) + dpid

    def defaultIntf(self) -> Any:
        """The control interface ``lo``, as in Mininet."""
        return self.controlIntf

    def intfList(self) -> list[Any]:
        """``lo`` (port 0), then the switch's ports in order."""
        return [self.controlIntf, *self.intf_list()]

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
    _context.warn_once(
        "ovs-as-bridge",
        f"{ovs_missing()}: {kind} switches run as learning switches "
        "(no OpenFlow, no controller; stp=True is honoured)",
    )


def _dpid(name: str, dpid: str | None, length: int) -> str | None:
    """Mininet's default datapath id: ``dpid`` without colons, or the first number in
    the name, in hex, zero-padded to ``length`` digits."""
    if dpid:
        digits = dpid.replace(":", "")
    else:
        nums = re.findall(r"\d+", name)
        if not nums:
            return None
        digits = f"{int(nums[0]):x}"
    return digits.rjust(length, "0")


def _nonzero(dpid: str | None) -> str | None:
    """A datapath id OVS accepts: an all-zero one (Mininet's for a switch named
    ``cs0``) lets OVS choose, as it does under Mininet."""
    if dpid is None or not re.fullmatch(r"[0-9A-Fa-f]{1,16}", dpid) or int(dpid, 16):
        return dpid
    return None


def _backoff_ms(reconnectms: Any) -> int | None:
    """Mininet's ``reconnectms`` as OVS's ``max_backoff`` (0 or None: OVS's own;
    Open vSwitch takes nothing below a second)."""
    if not reconnectms or os.environ.get("FN_NOBACKOFF"):
        return None
    return max(1000, int(reconnectms))


class _OpenFlowSwitch(Switch):
    """A switch of the run's own Open vSwitch, with Mininet's OpenFlow options (or a
    learning switch, with a warning, where Open vSwitch is not installed)."""

    fn_fail_mode = "secure"

    def fn_setup_openflow(
        self, name: str, dpid: str | None, protocols: str | None, stp: bool
    ) -> None:
        self.fn_ovs = ovs_missing() is None
        if not self.fn_ovs:
            _warn_bridge(type(self).__name__)
        self.fn_stp = bool(stp)
        self.fn_dpid = _dpid(name, dpid, self.dpidLen)
        self.fn_protocols = (
            tuple(p.strip() for p in protocols.split(",") if p.strip()) if protocols else None
        )

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        if not self.fn_ovs:
            return super().fn_spec(name, params)
        return NodeSpec(
            name,
            kind="switch",
            stp=self.fn_stp,
            datapath="ovs",
            openflow=OpenFlowSpec(
                protocols=self.fn_protocols,
                fail_mode=self.fn_fail_mode,  # type: ignore[arg-type]
                dpid=_nonzero(self.fn_dpid),
                controllers=(),  # until start(controllers)
                in_band=bool(getattr(self, "inband", False)),
                reconnect_ms=_backoff_ms(getattr(self, "reconnectms", None)),
                datapath_type="user" if getattr(self, "datapath", None) == "user" else None,
            ),
        )

    def start(self, controllers: Any = None) -> None:
        """Connect to ``controllers`` (each started by the network first) and forward."""
        if self.fn_ovs:
            live = [
                c
                for c in controllers or ()
                if isinstance(c, Controller) and not isinstance(c, NullController)
            ]
            for c in live:
                c.fn_register(self.net)
            openflow.set_controllers(self.net, self.name, [c.name for c in live])
        self.set_forwarding(True)

    def connected(self) -> bool:
        """Connected to at least one of its controllers; a standalone switch always
        is (Mininet's rule)."""
        if not self.fn_ovs:
            return self.forwarding()
        if self.fn_fail_mode == "standalone":
            return True
        ovs = self.fn_daemons()
        conn = ovs.controller_connections()
        datapath = self.forwards_by()
        targets = datapath.targets(self)  # type: ignore[attr-defined]
        return any(conn.get((self.name, t), False) for t in targets)

    def fn_daemons(self) -> Any:
        """The run's OVS daemons, with every change of the build applied."""
        datapath: Any = self.forwards_by()
        datapath.sync()
        return datapath.ovs(self)

    def vsctl(self, *args: Any, **kwargs: Any) -> str:
        """``ovs-vsctl ARGS`` on the run's Open vSwitch."""
        del kwargs
        if not self.fn_ovs:
            return self.cmd("ovs-vsctl", *args)
        try:
            return str(self.fn_daemons().vsctl(*[str(a) for a in args]))
        except KernelError as exc:
            return f"{exc}\n"

    def dpctl(self, *args: Any) -> str:
        """``ovs-ofctl CMD SWITCH ARGS`` (Mininet's ``dpctl``)."""
        if not self.fn_ovs or not args:
            return super().dpctl(*args)
        self.fn_daemons()
        return self.cmd("ovs-ofctl", args[0], self.name, *args[1:])

    def attach(self, intf: Any) -> None:
        """Make ``intf`` a port of this switch (mobility.py)."""
        if self.fn_ovs:
            self.vsctl("--may-exist", "add-port", self.name, str(intf))

    def detach(self, intf: Any) -> None:
        """Remove port ``intf`` from this switch."""
        if self.fn_ovs:
            self.vsctl("--if-exists", "del-port", self.name, str(intf))

    def sendCmd(self, *args: Any, **kwargs: Any) -> None:
        if self.fn_ovs:  # the real ovs-vsctl reaches the run's Open vSwitch
            Node.sendCmd(self, *args, **kwargs)
        else:
            super().sendCmd(*args, **kwargs)


class OVSSwitch(_OpenFlowSwitch):
    """Mininet's Open vSwitch switch: a bridge of the run's own Open vSwitch (kernel
    datapath where the module is loaded, else OVS's userspace datapath)."""

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
        self.failMode = failMode
        self.fn_fail_mode = failMode
        self.datapath = datapath
        self.inband = inband
        self.protocols = protocols
        self.reconnectms = reconnectms
        self.batch = batch
        self.commands: list[str] = []
        self.fn_setup_openflow(name, params.get("dpid"), protocols, stp)
        super().__init__(name, **params)

    @classmethod
    def isOldOVS(cls) -> bool:
        return False

    @classmethod
    def setup(cls) -> None:
        """Nothing to set up: each run starts its own Open vSwitch."""


OVSKernelSwitch = OVSSwitch


class OVSBridge(OVSSwitch):
    """Mininet's OVS switch in standalone (learning-bridge) mode, with no controller."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.update(failMode="standalone")
        super().__init__(*args, **kwargs)

    def start(self, controllers: Any = None) -> None:
        del controllers
        super().start([])


class UserSwitch(_OpenFlowSwitch):
    """Mininet's user-space switch: a bridge on Open vSwitch's userspace datapath
    (Mininet's own ``ofdatapath`` is not packaged); ``dpopts`` and ``opts`` are
    ``ofdatapath``'s and ``ofprotocol``'s, accepted and not used."""

    dpidLen = 12

    def __init__(
        self, name: str, dpopts: str = "--no-slicing", stp: bool = False, **kwargs: Any
    ) -> None:
        self.dpopts = dpopts
        self.datapath = "user"  # OVS's userspace datapath, even beside a kernel one
        self.fn_setup_openflow(name, kwargs.get("dpid"), None, stp)
        super().__init__(name, **kwargs)


class IVSSwitch(Switch):
    """Mininet's Indigo Virtual Switch: refused, it is not packaged for Debian."""

    def __init__(self, name: str, **params: Any) -> None:
        del params
        raise UnsupportedError(
            "ivs-ctl (the Indigo Virtual Switch is not packaged for Debian)",
            f"switch {name} (IVSSwitch)",
            "use OVSSwitch",
        )
