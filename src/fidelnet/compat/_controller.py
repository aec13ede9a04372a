"""Mininet's controllers: accepted, started and stopped as no-ops.

fidelnet's switches are learning switches; OpenFlow control is out of scope for
now. A controller is a node in the host's namespace (``cmd`` runs there, as in
Mininet) that runs no controller program. Constructing any controller other than
:class:`NullController` logs one warning per process saying so.

Classes: :class:`Controller`, :class:`OVSController`, :class:`RemoteController`,
:class:`NullController`, :class:`DefaultController`, and :func:`findController`.
"""

from __future__ import annotations

from typing import Any

from fidelnet.compat import _context
from fidelnet.compat._node import Node
from fidelnet.topology.spec import NodeSpec

__all__ = [
    "Controller",
    "DefaultController",
    "NullController",
    "OVSController",
    "RemoteController",
    "findController",
]


class Controller(Node):
    """An OpenFlow controller, accepted and not run."""

    fn_silent = False

    def __init__(
        self,
        name: str,
        inNamespace: bool = False,
        command: str = "controller",
        cargs: str = "ptcp:%d",
        cdir: str | None = None,
        ip: str = "127.0.0.1",
        port: int = 6653,
        protocol: str = "tcp",
        verbose: bool = False,
        **params: Any,
    ) -> None:
        if not self.fn_silent:
            _context.warn_once(
                "controller",
                f"OpenFlow control is out of scope for now: controller {name} "
                f"({type(self).__name__}) is accepted but not run; switches are learning "
                "switches",
            )
        self.command = command
        self.cargs = cargs
        self.cdir = cdir
        self.fn_cip = ip
        self.port = port
        self.protocol = protocol
        self.verbose = verbose
        super().__init__(name, inNamespace=inNamespace, **params)

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        return NodeSpec(name, kind="host", in_namespace=False)

    @property
    def ip(self) -> str | None:
        return self.fn_cip

    def IP(self, intf: Any = None) -> str | None:
        return self.fn_cip

    def checkListening(self) -> None:
        """Nothing listens: no controller program runs."""

    def start(self) -> None:
        """No-op: OpenFlow control is out of scope."""

    def stop(self, *args: Any, **kwargs: Any) -> None:
        """No-op beyond ending the node's own shell."""
        del args, kwargs
        self.terminate()

    def isListening(self, ip: str, port: int) -> bool:
        del ip, port
        return False

    @classmethod
    def isAvailable(cls) -> bool:
        return True

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}: {self.fn_cip}:{self.port} pid=None> "


class OVSController(Controller):
    """Open vSwitch's test controller (not run)."""


class RemoteController(Controller):
    """A controller elsewhere (not contacted)."""

    def __init__(
        self, name: str, ip: str = "127.0.0.1", port: int | None = None, **kwargs: Any
    ) -> None:
        super().__init__(name, ip=ip, port=port or 6653, **kwargs)


class DefaultController(Controller):
    """The controller ``mn`` picks by default (not run)."""


class NullController(Controller):
    """No controller at all (no warning)."""

    fn_silent = True


def findController(controllers: Any = None) -> type[Controller]:
    """The default controller class."""
    del controllers
    return DefaultController
