"""Mininet's controllers, as the OpenFlow controllers of fidelnet's OVS switches.

A controller is a node (``cmd`` runs in the host's namespace, or in its own with
``inNamespace=True``) and, once started, an OpenFlow controller of every network
whose switches connect to it (:mod:`fidelnet.openflow`):

- :class:`Controller`, :class:`OVSController`, :class:`DefaultController`: Open
  vSwitch's test controller (Debian's ``ovs-testcontroller``; Mininet's own
  ``controller`` program is not packaged), a learning switch. Outside a namespace (the
  default) the run starts it next to its switches, in the fabric namespace, on
  ``127.0.0.1:port`` there: a port taken on the host does not matter, and a
  :class:`RemoteController` at ``127.0.0.1:port`` reaches it, as on Mininet's single
  namespace. With ``inNamespace=True`` it runs inside its node, and switches reach
  it at the node's address.
- :class:`RemoteController`: a controller the run does not start, at ``ip:port``:
  on the host (its loopback included) or, when ``ip`` is a node's address, inside
  that node. Switches reach it through a relay (docs/switches.md).
- :class:`Ryu`, :class:`NOX`: their programs where installed (``ryu-manager``, or
  ``osken-manager`` from os-ken, Ryu's maintained fork), else a clear error naming
  the package.
- :class:`NullController`: no controller.

:func:`findController` gives the default class.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Any

from fidelnet import openflow
from fidelnet.compat._node import Node, Settable
from fidelnet.compat.log import info
from fidelnet.errors import UnsupportedError
from fidelnet.kernel import ns
from fidelnet.topology.spec import ControllerSpec, NodeSpec

__all__ = [
    "NOX",
    "Controller",
    "DefaultController",
    "NullController",
    "OVSController",
    "RemoteController",
    "Ryu",
    "findController",
]

REF_PROGRAM = "ovs-testcontroller"


class Controller(Node):
    """An OpenFlow controller: Open vSwitch's test controller (a learning switch)."""

    fn_program: str | None = REF_PROGRAM
    fn_releasable = False  # it goes with its network

    def __init__(
        self,
        name: str,
        inNamespace: bool = False,
        command: str = REF_PROGRAM,
        cargs: str = "ptcp:%d",
        cdir: str | None = None,
        ip: str = "127.0.0.1",
        port: int = 6653,
        protocol: str = "tcp",
        verbose: bool = False,
        **params: Any,
    ) -> None:
        self.command = command
        self.cargs = cargs
        self.cdir = cdir
        self.fn_cip = ip
        self.port = int(port)
        self.protocol = protocol
        self.verbose = verbose
        self.fn_proc: subprocess.Popen[bytes] | None = None
        self.fn_started = False
        super().__init__(name, inNamespace=inNamespace, **params)

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        return NodeSpec(name, kind="host", in_namespace=bool(self.inNamespace))

    # -- what switches connect to ----------------------------------------------------

    def fn_controller_spec(self) -> ControllerSpec:
        """This controller as seen by a network's switches."""
        if not self.inNamespace:
            return ControllerSpec(self.name, "ref", self.port)
        path = ns.path_of(self.netns) if self.netns else None
        return ControllerSpec(self.name, "remote", self.port, ip=self.IP(), netns=path)

    def fn_register(self, net: Any) -> None:
        """Make this controller one of core network ``net``'s (once)."""
        if not any(c.name == self.name for c in net.spec.controllers):
            openflow.add_controller(net, self.fn_controller_spec())

    def _fn_get_ip(self) -> str | None:
        return self.IP()

    ip = Settable(_fn_get_ip, "The address switches reach the controller at.")

    def IP(self, intf: Any = None) -> str | None:
        if self.inNamespace:
            return super().IP(intf)
        return self.fn_cip

    # -- running ---------------------------------------------------------------------

    def start(self) -> None:
        """Start the controller. Outside a namespace, the network's switches start it
        in the run's fabric (on the first switch that connects); inside one, its
        program runs in this node now."""
        self.fn_started = True
        if not self.inNamespace or self.fn_proc is not None:
            return
        if shutil.which(REF_PROGRAM) is None:
            raise UnsupportedError(
                f"{REF_PROGRAM} (Debian: apt-get install openvswitch-testcontroller)",
                f"controller {self.name}",
            )
        self.fn_proc = self.popen([REF_PROGRAM, f"ptcp:{self.port}"], stdout=subprocess.DEVNULL)

    def stop(self, *args: Any, **kwargs: Any) -> None:
        """Stop the controller's program and end the node's shell."""
        deleteIntfs = kwargs.get("deleteIntfs", False)
        del args
        if self.fn_proc is not None and self.fn_proc.poll() is None:
            self.fn_proc.terminate()
            try:
                self.fn_proc.wait(5)
            except subprocess.TimeoutExpired:
                self.fn_proc.kill()
                self.fn_proc.wait()
        self.fn_proc = None
        self.fn_started = False
        if deleteIntfs and self.inNamespace:
            self.deleteIntfs()
        self.terminate()

    def checkListening(self) -> None:
        """Nothing to check before start: the run's own controllers listen in their
        own namespace, where no other program holds the port."""

    def isListening(self, ip: str, port: int) -> bool:
        del ip
        return self.fn_started and int(port) == self.port

    @classmethod
    def isAvailable(cls) -> bool:
        return shutil.which(REF_PROGRAM) is not None

    def __repr__(self) -> str:
        pid = self.fn_proc.pid if self.fn_proc is not None else None
        return f"<{type(self).__name__} {self.name}: {self.IP()}:{self.port} pid={pid}> "


class OVSController(Controller):
    """Open vSwitch's test controller."""


class DefaultController(Controller):
    """The controller ``mn`` picks by default (Open vSwitch's test controller)."""


class RemoteController(Controller):
    """A controller the run does not start, listening at ``ip:port``: on the host, or
    inside the node whose address ``ip`` is."""

    fn_program = None

    def __init__(
        self, name: str, ip: str = "127.0.0.1", port: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(name, ip=ip, port=port or 6653, **kwargs)

    def fn_controller_spec(self) -> ControllerSpec:
        owner = _node_with_ip(self.fn_cip)
        path = ns.path_of(owner.netns) if owner is not None and owner.netns else None
        return ControllerSpec(self.name, "remote", self.port, ip=self.fn_cip, netns=path)

    def IP(self, intf: Any = None) -> str | None:
        return self.fn_cip

    def start(self) -> None:
        """Nothing to start: the switches connect when the network starts them."""
        self.fn_started = True

    def checkListening(self) -> None:
        info(f"Connecting to remote controller at {self.fn_cip}:{self.port}\n")


def _node_with_ip(ip: str) -> Any:
    """A node in a namespace of its own, of a network of this process, that has
    address ``ip``, or None."""
    from fidelnet.compat import _context

    for net in _context.open_networks():
        for node in net.nodes.values():
            if not node.spec.in_namespace or node.netns is None:
                continue
            for intf in node.intf_list():
                if intf.ip == ip:
                    return node
    return None


class _Program(Controller):
    """A controller program that must be installed (Ryu, NOX)."""

    fn_programs: tuple[str, ...] = ()
    fn_package = ""

    def __init__(self, name: str, *args: Any, **kwargs: Any) -> None:
        program = next((p for p in self.fn_programs if shutil.which(p)), None)
        if program is None:
            raise UnsupportedError(
                f"{' or '.join(self.fn_programs)} ({self.fn_package})",
                f"controller {name} ({type(self).__name__})",
                "run it yourself and use RemoteController",
            )
        self.fn_args = [str(a) for a in args]
        self.fn_binary = program
        kwargs.setdefault("port", 6653)
        super().__init__(name, **kwargs)

    def fn_controller_spec(self) -> ControllerSpec:
        if self.inNamespace:
            return super().fn_controller_spec()
        return ControllerSpec(self.name, "remote", self.port, ip="127.0.0.1")

    def start(self) -> None:
        """Run the program in this node (the host's namespace unless
        ``inNamespace=True``)."""
        self.fn_started = True
        if self.fn_proc is None:
            self.fn_proc = self.popen(self.fn_argv(), stdout=subprocess.DEVNULL)

    def fn_argv(self) -> list[str]:
        return [self.fn_binary, *self.fn_args]


class Ryu(_Program):
    """Ryu (``ryu-manager``) or os-ken (``osken-manager``), with the given apps."""

    fn_programs = ("ryu-manager", "osken-manager")
    fn_package = "pip install os-ken"

    def fn_argv(self) -> list[str]:
        return [self.fn_binary, "--ofp-tcp-listen-port", str(self.port), *self.fn_args]


class NOX(_Program):
    """NOX (``nox_core``), where installed."""

    fn_programs = ("nox_core",)
    fn_package = "NOX is not packaged by Debian; build it from source"

    def fn_argv(self) -> list[str]:
        return [self.fn_binary, "--libdir=/usr/lib", f"ptcp:{self.port}", *self.fn_args]


class NullController(Controller):
    """No controller at all."""

    fn_program = None

    def fn_controller_spec(self) -> ControllerSpec:
        raise UnsupportedError("a NullController", "a switch's controller", "connect none")

    def start(self) -> None:
        """Nothing to start."""


def findController(controllers: Any = None) -> type[Controller]:
    """The first available controller class (Mininet's order), else None."""
    for cls in controllers or (Controller, OVSController):
        if cls.isAvailable():
            return cls
    return DefaultController
