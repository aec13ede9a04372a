"""Runtime nodes: hosts, routers and switches of a running network.

- :class:`Node`: a network namespace of its own (where its links end), a lazily
  started persistent shell, processes started by argv, its interfaces. How its
  interior is made and reached is its backend's (:mod:`fidelnet.nodes._base`:
  ``netns`` today, a fake for tests).
- :class:`Host`: an end host (the default node).
- :class:`Router`: a host with IPv4 forwarding on.
- :class:`Switch`: a switch, forwarded by its datapath (a Linux bridge, or the run's
  BPF learning switch: :mod:`fidelnet.switches`). All switches of a run share one
  "fabric" namespace, so nothing is added to the host namespace; a switch's shell
  runs there.

Every process a node starts joins the node's cgroup, so teardown ends all of them,
including daemons that left the shell's session.
"""

from __future__ import annotations

import logging
import os
import subprocess
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from fidelnet.errors import KernelError, NodeError, ValidationError
from fidelnet.kernel import cgroups
from fidelnet.kernel.netlink import Netlink
from fidelnet.kernel.state import process_start_time
from fidelnet.nodes._base import Interior, NodeBackend
from fidelnet.nodes.intf import Interface
from fidelnet.nodes.netns import NetnsBackend
from fidelnet.nodes.shell import Shell, finish_starting
from fidelnet.topology.spec import NodeSpec, TopologySpec
from fidelnet.topology.validate import validate

if TYPE_CHECKING:
    from fidelnet.network import Network
    from fidelnet.switches import Datapath

__all__ = ["Host", "Node", "Router", "Switch"]

log = logging.getLogger("fidelnet")

RT_PRIORITY = 20
"""SCHED_RR priority of a real-time node's shell (Mininet's ``rtprio``)."""

_SHELL_ENV_KEEP = ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "USER", "LOGNAME", "PYTHONPATH")


class Node:
    """A node with its own network namespace."""

    kind = "host"

    def __init__(self, net: Network, spec: NodeSpec) -> None:
        self.net = net
        self.spec = spec
        self.name = spec.name
        # The namespace file's path, set when the network realizes the node;
        # None means the host namespace.
        self.netns: str | None = None
        self.intfs: dict[int, Interface] = {}
        self._nl: Netlink | None = None
        self._shell: Shell | None = None
        self._cgroups: list[str] | None = None
        self._popens: list[subprocess.Popen[Any]] = []
        self.backend: NodeBackend = _backend_for(net, spec)
        self.backend_started = False  # its backend started it (Network.start_nodes)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def __str__(self) -> str:
        return self.name

    # -- kernel handles -----------------------------------------------------------

    def netlink(self) -> Netlink:
        """Netlink in the node's namespace, where its links end (for a ``netns`` node
        that is also its interior)."""
        if self._nl is None:
            self._nl = Netlink(self.netns)
        return self._nl

    def interior(self) -> Interior:
        """The node's own addresses, routes, neighbours and sysctls (its backend's)."""
        return self.backend.interior(self)

    def cgroup_dirs(self) -> list[str]:
        """The node's cgroups, created (and recorded) on first use."""
        if self._cgroups is None:
            fs = self.net.cgroupfs
            limit = None
            rt = self.spec.sched == "rt"
            if self.spec.cpu is not None or self.spec.cores is not None or rt:
                limit = self._cpu_limit(self.spec.cpu, self.spec.cores)
            dirs = fs.node_dirs(self.net.run_id, self.name, limit)
            for d in dirs:
                self.net.state_record("cgroup", path=d)
                cgroups.create(fs, d, limit)
            self._cgroups = dirs
        return self._cgroups

    def set_cpu_limit(self, cpu: float | None, cores: tuple[int, ...] | None = None) -> None:
        """Change the node's CPU limit: ``cpu`` a fraction of all cores, ``cores`` the
        cores it may run on (None lifts either). Applied at once when the node has
        processes, else when its first one starts."""
        validate(TopologySpec(nodes={self.name: replace(self.spec, cpu=cpu, cores=cores)}))
        self.spec.cpu, self.spec.cores = cpu, cores
        if self._cgroups is None:
            return
        fs = self.net.cgroupfs
        limit = self._cpu_limit(cpu, cores)
        for d in self._cgroups:
            cgroups.set_limit(fs, d, limit)
        for d in fs.node_dirs(self.net.run_id, self.name, limit):
            if d in self._cgroups:
                continue
            self.net.state_record("cgroup", path=d)
            cgroups.create(fs, d, limit)
            cgroups.join(d, cgroups.pids(self._cgroups[0]))
            self._cgroups.append(d)

    def _cpu_limit(self, cpu: float | None, cores: tuple[int, ...] | None) -> cgroups.CpuLimit:
        """The node's CPU limit; a real-time node with a share and no cores given runs
        on as few cores as hold its share (:func:`fidelnet.kernel.cgroups.realtime_cores`:
        real-time runtime is per CPU), the next ones for each real-time node."""
        rt = self.spec.sched == "rt"
        if rt and cpu is not None and cores is None:
            peers = [n for n in self.net.spec.nodes.values() if n.sched == "rt"]
            index = next((i for i, n in enumerate(peers) if n.name == self.name), 0)
            cores = cgroups.realtime_cores(cpu, self.net.cgroupfs.ncpus, index)
        return cgroups.CpuLimit(cpu, cores, realtime=rt)

    # -- processes ------------------------------------------------------------------

    def shell(self) -> Shell:
        """The node's persistent shell, started (and waited for) when needed."""
        if self._shell is not None and not self._shell.alive():
            self._shell.close()
            self._shell = None
        if self._shell is None:
            self._shell = self.start_shell(wait=True)
        elif not self._shell.ready:
            finish_starting([self._shell])
        return self._shell

    def start_shell(self, wait: bool) -> Shell:
        """Start a new shell in the node (recorded in the run state), and with
        ``wait`` wait for its prompt; without, :func:`~fidelnet.nodes.shell.finish_starting`
        finishes many at once (:meth:`fidelnet.network.Network.start_shells`)."""
        env = {k: v for k, v in os.environ.items() if k in _SHELL_ENV_KEEP}
        env.update(_node_env(self.net))
        env["PS1"] = "\x7f"
        argv, served = self.backend.shell_argv(self)
        server = getattr(self.net, "exec_server", None) if served else None
        sh = Shell(self.name, argv, env, wait=False, spawn=server().spawn if server else None)
        start = process_start_time(sh.pid)
        if start is not None:
            self.net.state_record("process", pid=sh.pid, start=start)
        if self.spec.sched == "rt":
            # Commands the shell runs inherit SCHED_RR; the cgroup's rt runtime caps them.
            try:
                os.sched_setscheduler(sh.pid, os.SCHED_RR, os.sched_param(RT_PRIORITY))
            except OSError as exc:
                sh.close()
                raise KernelError(f"{self.name}: cannot make its shell SCHED_RR: {exc}") from exc
        if wait:
            finish_starting([sh])
        log.debug("%s: shell started (pid %d)", self.name, sh.pid)
        return sh

    def has_shell(self) -> bool:
        """Whether the node has a live shell (started, or starting)."""
        return self._shell is not None and self._shell.alive()

    def shell_if_started(self) -> Shell:
        if self._shell is None:
            raise NodeError(f"{self.name}: has no shell")
        return self._shell

    def set_shell(self, sh: Shell) -> None:
        """Adopt a shell made by :meth:`start_shell` (replacing none)."""
        if self.has_shell():
            raise NodeError(f"{self.name}: already has a shell")
        if self._shell is not None:
            self._shell.close()
        self._shell = sh

    def cmd(self, command: str, *, verbose: bool = False) -> str:
        """Run a shell command in the node's persistent shell and return its output."""
        del verbose
        return self.shell().run(command)

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start ``argv`` (a list, never parsed by a shell) inside the node."""
        if isinstance(argv, str):
            raise ValidationError("argv", "must be a list of arguments, not a string", argv)
        full = self.backend.exec_argv(self, list(argv), kwargs.pop("cwd", None))
        kwargs.setdefault("close_fds", True)
        extra = _node_env(self.net)
        if extra:
            kwargs["env"] = {**os.environ, **extra, **(kwargs.get("env") or {})}
        try:
            proc: subprocess.Popen[Any] = subprocess.Popen(full, **kwargs)
        except OSError as exc:
            raise NodeError(f"{self.name}: cannot start {argv[0]!r}: {exc}") from exc
        # Kept to be ended at teardown; those already reaped are let go (their caller
        # owns their pipes), or a long run would keep every process it ever started.
        self._popens = [p for p in self._popens if p.returncode is None]
        self._popens.append(proc)
        return proc

    def pexec(self, argv: Sequence[str], timeout: float | None = None) -> tuple[str, str, int]:
        """Run ``argv`` in the node to completion; returns (stdout, stderr, exit code)."""
        p = self.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=timeout)
        return out, err, p.returncode

    def tool_popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        """Start one of fidelnet's instruments (pktgen, iperf3, ping, ip) where it sees
        the node's network as the node's programs do. That is :meth:`popen` for every
        node whose programs run on this machine's files; a container node's image need
        not have them, so its backend runs them in the node's network namespace and
        cgroups with this machine's files (``tool_argv``; the same kernel data path)."""
        tool_argv = getattr(self.backend, "tool_argv", None)
        if tool_argv is None:
            return self.popen(argv, **kwargs)
        if isinstance(argv, str):
            raise ValidationError("argv", "must be a list of arguments, not a string", argv)
        full = tool_argv(self, list(argv), kwargs.pop("cwd", None))
        kwargs.setdefault("close_fds", True)
        try:
            proc: subprocess.Popen[Any] = subprocess.Popen(full, **kwargs)
        except OSError as exc:
            raise NodeError(f"{self.name}: cannot start {argv[0]!r}: {exc}") from exc
        self._popens = [p for p in self._popens if p.returncode is None]
        self._popens.append(proc)
        return proc

    def tool_pexec(self, argv: Sequence[str], timeout: float | None = None) -> tuple[str, str, int]:
        """:meth:`tool_popen` to completion; returns (stdout, stderr, exit code)."""
        p = self.tool_popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=timeout)
        return out, err, p.returncode

    # -- interfaces ----------------------------------------------------------------

    def add_intf(self, intf: Interface) -> None:
        self.intfs[intf.port] = intf

    def intf_list(self) -> list[Interface]:
        return [self.intfs[p] for p in sorted(self.intfs)]

    def default_intf(self) -> Interface | None:
        lst = self.intf_list()
        return lst[0] if lst else None

    def intf(self, name: str | None = None) -> Interface | None:
        if name is None:
            return self.default_intf()
        for i in self.intfs.values():
            if i.name == name:
                return i
        raise ValidationError(
            f"{self.name}.intf", "no such interface", name, [i.name for i in self.intf_list()]
        )

    @property
    def ip(self) -> str | None:
        d = self.default_intf()
        if d is not None and d.ip is not None:
            return d.ip
        if self.spec.ip:
            return self.spec.ip.split("/")[0]
        return None

    @property
    def mac(self) -> str | None:
        d = self.default_intf()
        return d.mac if d is not None else None

    def set_ip(self, cidr: str, intf: Interface | None = None) -> None:
        target = intf or self.default_intf()
        if target is None:
            raise NodeError(f"{self.name}: has no interface to put {cidr} on")
        target.set_ip(cidr)

    def configure(self) -> None:
        """Per-kind configuration after the node's interfaces exist."""

    def port_changed(self, intf: Interface, up: bool) -> None:
        """``intf`` was taken down or brought up (a switch tells its datapath)."""
        del intf, up

    def port_removed(self, intf: Interface) -> None:
        """``intf`` is about to be deleted (a switch tells its datapath)."""
        del intf

    # -- teardown ------------------------------------------------------------------

    def close(self) -> None:
        """End the node's processes and release its handles (namespaces are the
        network's to remove)."""
        self.end_processes()
        self.backend.close(self)
        if self._nl is not None:
            self._nl.close()
            self._nl = None

    def kill_processes(self) -> None:
        """SIGKILL the node's shell and the processes started with :meth:`popen`,
        without waiting for them (:meth:`end_processes` reaps them)."""
        if self._shell is not None:
            self._shell.kill()
        for p in self._popens:
            if p.poll() is None:
                p.kill()

    def end_processes(self) -> None:
        """End the node's shell and the processes started with :meth:`popen`; its
        netlink handle stays open (a switch's is the fabric's, shared)."""
        if self._shell is not None:
            self._shell.close()
            self._shell = None
        for p in self._popens:
            if p.poll() is None:
                p.kill()
            p.wait()
            for stream in (p.stdin, p.stdout, p.stderr):
                if stream is not None:
                    stream.close()
        self._popens.clear()


class Host(Node):
    """An end host."""

    kind = "host"


class Router(Node):
    """A node that forwards IPv4 between its interfaces."""

    kind = "router"

    def configure(self) -> None:
        self.interior().write_sysctl("net.ipv4.ip_forward", "1")


class Switch(Node):
    """A switch in the run's fabric namespace, forwarded by its datapath: a Linux
    bridge of its own, or the run's BPF learning switch (:mod:`fidelnet.switches`)."""

    kind = "switch"

    def __init__(self, net: Network, spec: NodeSpec) -> None:
        super().__init__(net, spec)
        self.bridge_index = -1  # the bridge datapath's device
        self.forwarder: Datapath | None = None  # its datapath (Mininet's OVSSwitch has a .datapath)

    @property
    def ip(self) -> str | None:
        return None

    def forwards_by(self) -> Datapath:
        if self.forwarder is None:
            raise NodeError(f"{self.name}: the switch is not built")
        return self.forwarder

    def port_changed(self, intf: Interface, up: bool) -> None:
        if self.forwarder is not None:
            self.forwarder.set_port_up(self, intf, up)

    def port_removed(self, intf: Interface) -> None:
        if self.forwarder is not None:
            self.forwarder.remove_port(self, intf)

    def set_forwarding(self, up: bool) -> None:
        """Start or stop forwarding (Mininet's ``start``/``stop``); ports stay."""
        self.forwards_by().set_switch_up(self, up)
        log.debug("%s: forwarding %s", self.name, "on" if up else "off")

    def forwarding(self) -> bool:
        """Whether every port forwards (with STP: once the tree has settled; with a
        controller: once it is connected)."""
        return self.forwards_by().forwarding(self)

    def waits(self) -> bool:
        """Whether the network must wait for this switch to forward after building."""
        return self.forwards_by().waits(self)

    def datapath_stats(self) -> dict[str, Any]:
        return self.forwards_by().stats(self)


_NETNS = NetnsBackend()


def _backend_for(net: Any, spec: NodeSpec) -> NodeBackend:
    """The network's backend for the node's kind (``netns`` for a switch, and where
    the network has no choice to make: a stand-in network in a test)."""
    get = getattr(net, "node_backend", None)
    if get is None or spec.kind == "switch":
        return _NETNS
    backend: NodeBackend = get(spec.backend)
    return backend


def _node_env(net: Any) -> dict[str, str]:
    """The network's extra environment for node processes (none for a fake network)."""
    get = getattr(net, "node_env", None)
    return dict(get()) if get is not None else {}
