"""Mininet's ``Node`` and ``Host`` on fidelnet's nodes (``CPULimitedHost`` is in
``_cpuhost``).

A Mininet node is built the Mininet way, ``Host('h1', ip='10.0.0.1', **params)``:
its spec is checked and it joins the current network (see ``_context``), which
creates its namespace at once. Its shell starts the first time it is needed;
``cmd``/``sendCmd``/``monitor``/``waitOutput`` speak Mininet's shell protocol,
``popen``/``pexec`` start processes by argv through ``fidelnet-exec``.

Classes: :class:`Node`, :class:`Host`.
"""

from __future__ import annotations

import os
import select
import subprocess
from collections.abc import Callable
from typing import IO, Any, ClassVar

from fidelnet.compat import _context
from fidelnet.compat._params import set_param
from fidelnet.compat.log import debug, info, warn
from fidelnet.compat.util import decode
from fidelnet.errors import ValidationError
from fidelnet.nodes import node as _core
from fidelnet.nodes.shell import Shell
from fidelnet.topology.spec import NodeSpec
from fidelnet.vt import run as vt_run

__all__ = ["Host", "Node", "Router"]

# Parameters every node accepts besides those its methods name.
_NODE_PARAMS = frozenset(
    {"name", "inNamespace", "privateDirs", "waitExited", "isSwitch", "cls", "tdf"}
)


def _cidr(ip: Any, prefix: int = 8) -> Any:
    """Mininet's ``setIP(ip)`` default: an address without ``/len`` is a /8."""
    if isinstance(ip, str) and ip and "/" not in ip:
        return f"{ip}/{prefix}"
    return ip


class Settable:
    """An attribute Mininet's objects have as a plain attribute (``node.pid``,
    ``node.shell``...) that fidelnet computes: read, it is computed; assigned (as
    Mininet's own code and its subclasses do), the value assigned is kept and read
    back; deleted, it is computed again."""

    def __init__(self, fget: Callable[[Any], Any], doc: str) -> None:
        self.fget = fget
        self.__doc__ = doc
        self.key = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.key = f"_fn_set_{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        found = obj.__dict__.get(self.key, _UNSET)
        return self.fget(obj) if found is _UNSET else found

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.key] = value

    def __delete__(self, obj: Any) -> None:
        obj.__dict__.pop(self.key, None)


_UNSET = object()


class _ShellHandle:
    """``node.shell``: Mininet's shell process (``pid``, ``poll()``…), and callable like
    fidelnet's ``Node.shell()``, which starts the shell when needed."""

    def __init__(self, node: Node) -> None:
        self._node = node

    def __call__(self) -> Shell:
        return self._node.fn_shell()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._node.fn_shell().proc, name)

    def __bool__(self) -> bool:
        return not self._node.fn_terminated


class Node(_core.Node):
    """A Mininet node: a shell in a network namespace."""

    portBase = 0
    fn_kind: ClassVar[str] = "host"
    fn_releasable: ClassVar[bool] = True  # delNode / a standalone stop frees its name
    inToNode: ClassVar[dict[int, Node]] = {}
    outToNode: ClassVar[dict[int, Node]] = {}
    isSetup = True

    def __init__(self, name: str, inNamespace: bool = True, **params: Any) -> None:
        net = _context.current_network()
        name = params.get("name", name)
        self.inNamespace = bool(params.get("inNamespace", inNamespace))
        self.params = params
        self.privateDirs: list[Any] = list(params.get("privateDirs", []))
        self.ports: dict[Any, int] = {}
        self.nameToIntf: dict[str, Any] = {}
        self.readbuf = ""
        self.execed = False
        self.fn_terminated = False
        self.fn_auto_ip = False
        self._fn_file: IO[str] | None = None
        self._fn_slave: tuple[Shell, int] | None = None  # (the shell, its pty slave fd)
        if params.get("tdf") is not None:
            # VT-Mininet's host parameter: here the whole run (nodes and links) is
            # dilated by one factor (docs/virtual-time.md).
            vt_run.enable(net, params["tdf"], f"{name}.tdf")
        spec = self.fn_spec(name, params)
        _context.add_node_spec(net, spec)
        super().__init__(net, spec)
        try:
            net.realize_node(self)
        except BaseException:
            net.spec.nodes.pop(spec.name, None)
            raise
        _context.warn_unknown(
            f"{type(self).__name__}({name!r})",
            set(params) - _NODE_PARAMS - _context.accepted_params(type(self)),
        )
        self.mountPrivateDirs()

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        """The fidelnet spec of this node, from its Mininet parameters."""
        return NodeSpec(
            name,
            kind="host",
            ip=_cidr(params.get("ip")),
            mac=params.get("mac"),
            in_namespace=self.inNamespace,
        )

    @property
    def tdf(self) -> float:
        """The time dilation factor this node runs at (VT-Mininet's ``host.tdf``; 1.0
        for an undilated run)."""
        return float(self.net.tdf_now())

    # -- the shell ---------------------------------------------------------------------

    def fn_shell(self) -> Shell:
        sh = _core.Node.shell(self)
        if sh.fd not in Node.outToNode:
            Node.outToNode[sh.fd] = Node.inToNode[sh.fd] = self
        return sh

    def _fn_get_shell_handle(self) -> _ShellHandle:
        return _ShellHandle(self)

    def _fn_get_pid(self) -> int:
        return self.fn_shell().pid

    def _fn_get_stdout(self) -> IO[str]:
        sh = self.fn_shell()
        if self._fn_file is None or self._fn_file.fileno() != sh.fd:
            self._fn_file = open(sh.fd, encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        return self._fn_file

    def _fn_get_master(self) -> int:
        return self.fn_shell().fd

    def _fn_get_slave(self) -> int:
        sh = self.fn_shell()
        if self._fn_slave is None or self._fn_slave[0] is not sh:
            self._fn_close_slave()
            self._fn_slave = (sh, os.open(sh.slave_name, os.O_RDWR | os.O_NOCTTY))
        return self._fn_slave[1]

    def _fn_close_slave(self) -> None:
        if self._fn_slave is not None:
            os.close(self._fn_slave[1])
            self._fn_slave = None

    def _fn_get_last_pid(self) -> int | None:
        return self._shell.last_pid if self._shell is not None else None

    def _fn_get_last_cmd(self) -> str | None:
        return self._shell.last_cmd if self._shell is not None else None

    shell: Any = Settable(
        _fn_get_shell_handle, "The node's shell: ``pid``, ``poll()``... (started if needed)."
    )
    pid = Settable(_fn_get_pid, "The pid of the node's shell (started if needed).")
    stdout = Settable(_fn_get_stdout, "The shell's terminal, as a file (``fileno()`` for poll).")
    stdin = Settable(_fn_get_stdout, "The shell's terminal, as a file (the same as ``stdout``).")
    master = Settable(_fn_get_master, "The pty master of the node's shell (a descriptor).")
    slave = Settable(
        _fn_get_slave,
        "A descriptor on the pty slave of the node's shell: opened on first use, closed "
        "with the shell (Mininet keeps the slave open for the node's life). While it is "
        "open, as in Mininet, a shell that exits is not seen as an end of output.",
    )
    lastPid = Settable(_fn_get_last_pid, "The pid of the last command sent with ``&``.")
    lastCmd = Settable(_fn_get_last_cmd, "The last command sent to the shell.")

    def _fn_get_ip(self) -> str | None:
        return super().ip

    def _fn_get_mac(self) -> str | None:
        return super().mac

    ip: Any = Settable(
        _fn_get_ip, "The address of the default interface (Mininet code may assign it)."
    )
    mac: Any = Settable(
        _fn_get_mac, "The MAC of the default interface (Mininet code may assign it)."
    )

    @property
    def waiting(self) -> bool:
        return self._shell.waiting if self._shell is not None else False

    @waiting.setter
    def waiting(self, value: bool) -> None:
        if self._shell is not None:
            self._shell.waiting = value

    @classmethod
    def fdToNode(cls, fd: int) -> Node | None:
        return cls.outToNode.get(fd) or cls.inToNode.get(fd)

    def read(self, size: int = 1024) -> str:
        """Buffered read of the shell's output (blocks until some is there)."""
        if len(self.readbuf) < size:
            self.readbuf += self.fn_shell().read(size - len(self.readbuf))
        result, self.readbuf = self.readbuf[:size], self.readbuf[size:]
        return result

    def readline(self) -> str | None:
        """A line of the shell's output without its newline, or None if none is complete."""
        self.readbuf += self.read(1024)
        if "\n" not in self.readbuf:
            return None
        line, self.readbuf = self.readbuf.split("\n", 1)
        return line

    def write(self, data: str) -> None:
        self.fn_shell().write(data)

    def waitReadable(self, timeoutms: int | None = None) -> list[tuple[int, int]] | None:
        if self.readbuf:
            return None
        sh = self.fn_shell()
        return [(sh.fd, select.POLLIN)] if sh.readable(timeoutms) else []

    def sendCmd(self, *args: Any, **kwargs: Any) -> None:
        """Send a command to the shell without waiting (``printPid`` is ignored)."""
        del kwargs
        command: Any = args[0] if len(args) == 1 and isinstance(args[0], list) else args
        if not isinstance(command, str):
            command = " ".join(str(c) for c in command)
        self.fn_shell().send(command)

    def sendInt(self, intr: str = chr(3)) -> None:
        """Interrupt the running command (^C)."""
        self.fn_shell().write(intr)

    def monitor(self, timeoutms: int | None = None, findPid: bool = True) -> str:
        """Output of the running command that is ready (waits up to ``timeoutms``)."""
        return self.fn_shell().monitor(timeoutms, findPid)

    def waitOutput(self, verbose: bool = False, findPid: bool = True) -> str:
        """Wait for the running command to finish and return its output."""
        show: Callable[..., None] = info if verbose else debug
        sh = self.fn_shell()
        out = []
        while sh.waiting:
            data = sh.monitor(find_pid=findPid)
            out.append(data)
            show(data)
        return "".join(out)

    def cmd(self, *args: Any, **kwargs: Any) -> str:
        """Run a command in the node's shell and return its output (Mininet's ``cmd``:
        arguments are joined with spaces; ``verbose=True`` echoes the output)."""
        verbose = bool(kwargs.get("verbose", False))
        if self.fn_terminated:
            warn(f"({self} exited - ignoring cmd{args})\n")
            return ""
        # Mininet's header, at info level when verbose (cmdPrint): "*** h1 : ('ls',)"
        (info if verbose else debug)(f"*** {self.name} : {args}\n")
        self.sendCmd(*args, **kwargs)
        return self.waitOutput(verbose)

    def cmdPrint(self, *args: Any) -> str:
        """Run a command, printing Mininet's ``*** h1 : (args)`` header and the output."""
        return self.cmd(*args, verbose=True)

    def popen(self, *args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        """Start a process in the node: ``popen('ping -c1 h2')`` (split on spaces),
        ``popen(['ping', ...])`` or ``popen('ping', '-c1', ...)``. Output is piped by
        default; ``shell=True`` runs the joined words with ``$SHELL -c``."""
        kwargs.pop("mncmd", None)
        shell = kwargs.pop("shell", False)
        kwargs.setdefault("stdout", subprocess.PIPE)
        kwargs.setdefault("stderr", subprocess.PIPE)
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            argv = [str(a) for a in args[0]]
        elif len(args) == 1 and isinstance(args[0], str):
            argv = [args[0]] if shell else args[0].split()
        elif args:
            argv = [str(a) for a in args]
        else:
            raise ValidationError(f"{self.name}.popen", "needs a command (a string or a list)")
        if shell:
            argv = [os.environ.get("SHELL", "/bin/sh"), "-c", " ".join(argv)]
        return super().popen(argv, **kwargs)

    def pexec(self, *args: Any, **kwargs: Any) -> tuple[str, str, int]:
        """Run a command (as for :meth:`popen`) to completion: (stdout, stderr, exit code)."""
        timeout = kwargs.pop("timeout", None)
        kwargs.update(stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        proc = self.popen(*args, **kwargs)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()  # never left running past the caller's timeout
            proc.communicate()
            raise
        return decode(out or b""), decode(err or b""), proc.returncode

    # -- interfaces ----------------------------------------------------------------------

    def newPort(self) -> int:
        """The next port number: one above the highest in use, else ``portBase``."""
        used = list(self.ports.values()) + list(self.intfs)
        return max(used) + 1 if used else self.portBase

    def addIntf(self, intf: Any, port: int | None = None, moveIntfFn: Any = None) -> None:
        """Record an interface under ``port`` (the kernel side already exists)."""
        del moveIntfFn
        if port is None:
            port = self.newPort()
        old = self.intfs.get(port)
        if old is not None and old is not intf:
            self.ports.pop(old, None)
        self.intfs[port] = intf
        self.ports[intf] = port
        self.nameToIntf[intf.name] = intf
        debug(f"added intf {intf} ({port}) to node {self.name}\n")

    def delIntf(self, intf: Any) -> None:
        port = self.ports.pop(intf, None)
        if port is not None:
            self.intfs.pop(port, None)
        self.nameToIntf.pop(intf.name, None)

    def defaultIntf(self) -> Any:
        """The interface on the lowest port (None, with a warning, if there is none)."""
        intf = self.default_intf()
        if intf is None:
            warn(f"*** defaultIntf: warning: {self.name} has no interfaces\n")
        return intf

    def intf(self, intf: Any = None) -> Any:
        """An interface by name, the default one for None, or ``intf`` itself."""
        if not intf:
            return self.defaultIntf()
        if isinstance(intf, str):
            found = self.nameToIntf.get(intf)
            if found is None:
                raise ValidationError(
                    f"{self.name}.intf", "no such interface", intf, self.intfNames()
                )
            return found
        return intf

    def intfList(self) -> list[Any]:
        """Interfaces sorted by port."""
        return self.intf_list()

    def intfNames(self) -> list[str]:
        return [str(i) for i in self.intfList()]

    def connectionsTo(self, node: Any) -> list[tuple[Any, Any]]:
        """(our interface, theirs) for every link between us and ``node``."""
        found = []
        for intf in self.intfList():
            link = intf.link
            if link is None:
                continue
            if link.intf1.node is self and link.intf2.node is node:
                found.append((intf, link.intf2))
            elif link.intf1.node is node and link.intf2.node is self:
                found.append((intf, link.intf1))
        return found

    def deleteIntfs(self, checkName: bool = True) -> None:
        intfs: list[Any] = list(self.intfs.values())
        for intf in intfs:
            if self.name in intf.name or not checkName:
                intf.delete()

    def intfIsUp(self, intf: Any = None) -> bool:
        return bool(self.intf(intf).isUp())

    # -- addresses and routes ----------------------------------------------------------

    def setIP(self, ip: str, prefixLen: int = 8, intf: Any = None, **kwargs: Any) -> Any:
        """Put ``ip`` (``10.0.0.1`` with ``prefixLen``, or ``10.0.0.1/24``) on an interface."""
        return self.intf(intf).setIP(ip, prefixLen, **kwargs)

    def setMAC(self, mac: str, intf: Any = None) -> Any:
        return self.intf(intf).setMAC(mac)

    def IP(self, intf: Any = None) -> str | None:
        """The address of an interface (default: the default one), or None."""
        found = self.intf(intf) if intf or self.intfs else None
        return found.IP() if found is not None else None

    def MAC(self, intf: Any = None) -> str | None:
        found = self.intf(intf) if intf or self.intfs else None
        return found.MAC() if found is not None else None

    def setARP(self, ip: str, mac: str) -> str:
        """A permanent ARP entry on the default interface."""
        intf = self.defaultIntf()
        if intf is not None:
            self.interior().add_neighbour(intf.index, ip, mac)
        return ""

    def setHostRoute(self, ip: str, intf: Any) -> str:
        return self.cmd("route add -host", ip, "dev", intf)

    def setDefaultRoute(self, intf: Any = None) -> str:
        """``setDefaultRoute('via 10.0.0.1')``, or an interface (object or name)."""
        params = intf if isinstance(intf, str) and " " in intf else f"dev {intf}"
        return self.cmd("ip route del default; ip route add default", params)

    # -- configuration ---------------------------------------------------------------------

    def setParam(self, results: dict[str, Any], method: str, **param: Any) -> Any:
        """Mininet's ``setParam``: see :func:`fidelnet.compat._params.set_param`."""
        return set_param(self, results, method, **param)

    def config(
        self,
        mac: str | None = None,
        ip: str | None = None,
        defaultRoute: Any = None,
        lo: str = "up",
        **_params: Any,
    ) -> dict[str, Any]:
        """Set the default interface's MAC and address and the default route.
        Subclasses override it and call ``super().config(**params)``."""
        r: dict[str, Any] = {}
        self.setParam(r, "setMAC", mac=mac)
        self.setParam(r, "setIP", ip=ip)
        self.setParam(r, "setDefaultRoute", defaultRoute=defaultRoute)
        if lo != "up":  # fidelnet brings every namespace's loopback up when it makes it
            self.cmd("ifconfig lo " + lo)
        return r

    def configDefault(self, **moreParams: Any) -> None:
        self.params.update(moreParams)
        self.config(**self.params)

    def linkTo(self, node: Any, link: Any = None) -> Any:
        from fidelnet.compat.link import Link

        return (link or Link)(self, node)

    # -- private directories ------------------------------------------------------------------

    def mountPrivateDirs(self) -> None:
        for directory in self.privateDirs:
            if isinstance(directory, tuple):
                private = directory[1] % self.__dict__
                self.cmd(
                    f"mkdir -p {private} {directory[0]} && mount --bind {private} {directory[0]}"
                )
            else:
                self.cmd(f"mkdir -p {directory} && mount -n -t tmpfs tmpfs {directory}")

    def unmountPrivateDirs(self) -> None:
        """Nothing to undo: the node's mounts live in its own mount namespace."""

    # -- ending --------------------------------------------------------------------------------

    def terminate(self) -> None:
        """End the node's shell and processes (its namespace goes with the network)."""
        self.unmountPrivateDirs()
        if self._shell is not None:
            Node.outToNode.pop(self._shell.fd, None)
            Node.inToNode.pop(self._shell.fd, None)
        self._fn_file = None
        self.end_processes()
        self.fn_terminated = True
        if _context.is_standalone(self.net):
            _context.release(self)  # no Mininet holds it: its name is free again

    def end_processes(self) -> None:
        """End the shell and the node's processes; the pty slave opened for
        ``slave`` is closed with them."""
        self._fn_close_slave()
        super().end_processes()

    def stop(self, deleteIntfs: bool = False) -> None:
        if deleteIntfs:
            self.deleteIntfs()
        self.terminate()

    def cleanup(self) -> None:
        self.end_processes()

    # -- class setup (Mininet checks for programs here; fidelnet needs none) -------------------

    @classmethod
    def checkSetup(cls) -> None:
        """Nothing to check."""

    @classmethod
    def setup(cls) -> None:
        """Nothing to set up."""

    def __repr__(self) -> str:
        intfs = ",".join(f"{i.name}:{i.IP()}" for i in self.intfList())
        pid = self._shell.pid if self._shell is not None else None
        return f"<{type(self).__name__} {self.name}: {intfs} pid={pid}> "

    def __str__(self) -> str:
        return self.name


class Host(Node):
    """A host is simply a Node."""


class Router(Host):
    """fidelnet's own: a host that forwards IPv4, as the routers of a fidelnet
    topology (``fidelnet mn --topo random,N``: routers joined directly, with static
    routes). Its spec is a router's; forwarding is on once it is configured."""

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        spec = super().fn_spec(name, params)
        spec.kind = "router"
        return spec

    def config(
        self,
        mac: str | None = None,
        ip: str | None = None,
        defaultRoute: Any = None,
        lo: str = "up",
        **params: Any,
    ) -> dict[str, Any]:
        r = super().config(mac=mac, ip=ip, defaultRoute=defaultRoute, lo=lo, **params)
        self.interior().write_sysctl("net.ipv4.ip_forward", "1")
        return r
