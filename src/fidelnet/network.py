"""The running network: build a validated topology in the kernel, run it, tear it down.

:class:`Network` takes a :class:`~fidelnet.topology.spec.TopologySpec`, validates
it (nothing touches the kernel before the whole spec is valid), and on
:meth:`Network.start` creates, in order: a run id and its state file; a named
network namespace per host and router; one "fabric" namespace holding every
switch's bridge; a veth pair per link with addresses, MACs and shaping; routes and
static ARP entries. Every object is written to the state file before it is made,
so :meth:`Network.stop`, the rollback of a failed start, and ``fidelnet clean``
after a crash remove exactly what this run made and nothing else.

Nodes and links can also be added one at a time (``add_host``, ``add_link``…);
once the network is open they are created immediately, which is what the Mininet
compatibility layer relies on.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from typing import Any

from fidelnet import dismantle, fastpath, hwlinks, l3, realize, runsignals, switches
from fidelnet.errors import NodeError, StateError, ValidationError
from fidelnet.kernel import cgroups, launcher, limits, tc
from fidelnet.kernel.netlink import Netlink
from fidelnet.kernel.state import RunState, process_start_time
from fidelnet.links import Link
from fidelnet.links.choice import NEEDS_QDISCS, Choice
from fidelnet.links.cut import CutEnd
from fidelnet.links.divert import divert_or_refuse
from fidelnet.links.drivers import LinkDriver
from fidelnet.links.engine import LinkEngine, engine_args_from_env
from fidelnet.links.engine_link import XskBudget, start_engine
from fidelnet.nodes._base import NodeBackend
from fidelnet.nodes.backends import make_backend
from fidelnet.nodes.intf import Interface
from fidelnet.nodes.node import Host, Node, Router, Switch
from fidelnet.nodes.shell import finish_starting
from fidelnet.switches import Datapath
from fidelnet.topology import addressing, footprint
from fidelnet.topology.spec import AutoTdf, LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.validate import validate
from fidelnet.vt import run as vt_run
from fidelnet.vt.page import TimePage
from fidelnet.vt.reach import Watch

__all__ = ["Network"]

log = logging.getLogger("fidelnet")

_KIND_CLASSES: dict[str, type[Node]] = {"host": Host, "router": Router, "switch": Switch}
_STP_TIMEOUT = 45.0


class Network:
    """A topology brought to life in network namespaces."""

    def __init__(
        self,
        spec: TopologySpec | None = None,
        *,
        run_id: str | None = None,
        command: str = "",
        node_classes: dict[str, type[Node]] | None = None,
        engine_args: list[str] | None = None,
        node_backends: dict[str, NodeBackend] | None = None,
        tdf: float | str | AutoTdf | None = None,
    ) -> None:
        self.spec = spec if spec is not None else TopologySpec()
        if tdf is not None:  # a number, "auto" or AutoTdf (fidelnet.vt.run.tdf_arg)
            vt_run.tdf_arg(self.spec, tdf)
        if spec is not None or tdf is not None:
            addressing.assign_ports(self.spec)
            addressing.assign_ips(self.spec)
            validate(self.spec)
        self._want_run_id = run_id
        self._command = command
        self._classes = dict(_KIND_CLASSES)
        if node_classes:
            self._classes.update(node_classes)
        self.nodes: dict[str, Node] = {}
        self.links: list[Link] = []
        self._realized: set[int] = set()  # ids of LinkSpecs already built
        self.hw_pairs: dict[int, tuple[str, str]] = {}  # hw link's LinkSpec id -> its pair
        self.sriov_pairs: list[tuple[str, str]] | None = None  # the VFs this run made
        self.external_done: set[int] = set()  # spec.external entries attached
        self.vt_page: TimePage | None = None  # the clock page of a dilated run (fidelnet.vt)
        self.vt_watch: Watch | None = None  # programs it could not dilate (fidelnet.vt.reach)
        self._state: RunState | None = None
        self.cgroupfs: cgroups.CgroupFS = cgroups.CgroupFS(None, None, None, os.cpu_count() or 1)
        self._fabric: str | None = None
        self._fabric_nl: Netlink | None = None
        self.neigh_reserved = 0  # neighbour entries this run added to the machine's limits
        self.datapaths: dict[str, Datapath] = {}
        """The switch datapaths in use, by kind (:mod:`fidelnet.switches`)."""
        self.mount_template: launcher.MountTemplate | None = None
        self._exec_server: launcher.ExecServer | None = None
        self._caps: frozenset[str] | None = None
        self.xsk_budget = XskBudget()  # memory the run's AF_XDP links pin
        self._drivers: dict[int, LinkDriver] = {}
        self.engine: LinkEngine | None = None
        self.engine_args = engine_args if engine_args is not None else engine_args_from_env()
        self.engine_failure: str | None = None
        self.fastpath: dict[str, fastpath.RouterFastPath] = {}
        # This run's halves of links cut between machines (fidelnet.links.cut).
        self.cut_ends: list[CutEnd] = []
        self._node_backends: dict[str, NodeBackend] = dict(node_backends or {})
        """The XDP fast path of each router that has one (docs/fastpath.md)."""
        self.seed = self.spec.seed if self.spec.seed is not None else secrets.randbits(63)
        self._started = False
        self._old_handlers: dict[int, Any] = {}
        self.timings: dict[str, float | None] = {}
        """Seconds: ``build`` (nodes, links, configuration and STP), ``teardown``
        (:meth:`stop` until every object is removed) and ``kernel_cleanup`` (then
        until the kernel had freed the namespaces; None when :meth:`stop` did not
        wait, or gave up after its timeout). Kept after :meth:`stop`."""

    # -- identity and ownership --------------------------------------------------

    @property
    def run_id(self) -> str:
        if self._state is None:
            raise StateError("the network is not open: it has no run id yet")
        return self._state.run_id

    @property
    def is_open(self) -> bool:
        return self._state is not None

    def node_env(self) -> dict[str, str]:
        """Environment every process started in a node gets on top of its own: with
        OVS switches, the variables that point the OVS tools at this run's daemons
        (``ovs-vsctl`` typed in a node's shell reaches them, never the machine's);
        with virtual time, the clock shim (:mod:`fidelnet.vt.run`)."""
        return {**switches.ovs_env(self), **vt_run.env(self)}

    def set_tdf(self, tdf: float, reason: str = "set_tdf") -> None:
        """Change the time dilation factor of every node and link now (:mod:`fidelnet.vt`)."""
        vt_run.set_tdf(self, tdf, reason)

    def tdf_now(self) -> float:
        """The run's time dilation factor now (1.0 when it is not dilated)."""
        return self.spec.tdf if self.spec.tdf is not None else 1.0

    def state_record(self, kind: str, **fields: Any) -> None:
        if self._state is None:
            raise StateError("the network is not open")
        self._state.record(kind, **fields)
        if log.isEnabledFor(logging.DEBUG):  # what the run makes, one line each (-v debug)
            what = " ".join(f"{k}={v}" for k, v in fields.items())
            log.debug("run %s: %s %s", self._state.run_id, kind, what)

    def state_gone(self, kind: str, **fields: Any) -> None:
        """Say an object recorded with :meth:`state_record` was removed."""
        if self._state is not None:
            self._state.gone(kind, **fields)

    @contextlib.contextmanager
    def _owning(self, kind: str, **fields: Any) -> Iterator[None]:
        """Record an object before the block creates it; if creation fails, record it
        gone at once, so rollback never removes a same-named object we did not make."""
        self.state_record(kind, **fields)
        try:
            yield
        except BaseException:
            assert self._state is not None
            self._state.gone(kind, **fields)
            raise

    def ns_name(self, node: str) -> str:
        return f"fn{self.run_id}-{node}"

    def open(self) -> None:
        """Start the run: a run id, its state file, signal handlers. Idempotent."""
        if self._state is not None:
            return
        self._state = RunState.create(self._want_run_id, self._command)
        self.cgroupfs = cgroups.detect()
        vt_run.open_page(self)
        # Before the run's first namespace exists: nodes' shells copy it.
        with contextlib.suppress(NodeError):  # no launcher: shells will say so
            self.mount_template = launcher.MountTemplate.create(self._record_process)
        runsignals.install(self._old_handlers)
        atexit.register(self._atexit)
        log.debug("run %s: state in %s", self._state.run_id, self._state.path)

    def exec_server(self) -> launcher.ExecServer:
        """The run's ``fidelnet-exec --serve``, which starts the nodes' shells
        (started on first use, recorded; ended at teardown after the shells)."""
        if self._exec_server is None:
            self._exec_server = launcher.ExecServer(self._record_process)
        return self._exec_server

    def _record_process(self, pid: int) -> None:
        start = process_start_time(pid)
        if start is not None:
            self.state_record("process", pid=pid, start=start)

    def _atexit(self) -> None:
        if self._state is not None:
            self.stop()

    # -- lookup -----------------------------------------------------------------

    def __getitem__(self, name: str) -> Node:
        try:
            return self.nodes[name]
        except KeyError:
            raise ValidationError("node", "no such node", name, list(self.nodes)[:20]) from None

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    @property
    def hosts(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind in ("host", "router")]

    @property
    def switches(self) -> list[Node]:
        return [n for n in self.nodes.values() if n.kind == "switch"]

    # -- adding -------------------------------------------------------------------

    def add_node(self, spec: NodeSpec) -> Node | None:
        """Add a node to the topology; created at once when the network is open."""
        if spec.name in self.spec.nodes:
            raise ValidationError(f"nodes.{spec.name}", "a node with this name exists", spec.name)
        self.spec.add_node(spec)
        try:
            validate(self.spec)
        except ValidationError:
            del self.spec.nodes[spec.name]
            raise
        if self._state is not None:
            return self._create_node(spec)
        return None

    def add_link(self, link: LinkSpec) -> Link | None:
        """Add a link (ports, names and addresses filled in); created at once when open."""
        for end in (link.a, link.b):
            if end not in self.spec.nodes:
                raise ValidationError("link", "unknown node", end, list(self.spec.nodes)[:20])
        self.spec.add_link(link)
        try:
            addressing.assign_ports(self.spec)
            validate(self.spec)
            if self._state is not None:
                self.check_link_params([link])
                hwlinks.preflight(self.spec, len(self.hw_pairs), self.sriov_pairs is not None)
        except ValidationError:
            self.spec.links.pop()
            raise
        if self._state is not None:
            return self._create_link(link)
        return None

    # -- building -----------------------------------------------------------------

    def build(self, shells: bool = False) -> None:
        """Create every node and link of the spec not yet created, and configure them;
        with ``shells``, start every node's shell as soon as the node exists, as
        Mininet does, so the shells start while the links are made."""
        realize.preflight(self, shells)
        self.open()
        try:
            hwlinks.provision(self)
            realize.fit_tables(self)
            starting: list[Node] = []
            for spec in list(self.spec.nodes.values()):
                if spec.name not in self.nodes:
                    node = self._create_node(spec)
                    if shells and not node.has_shell():
                        node.set_shell(node.start_shell(wait=False))
                        starting.append(node)
            for link in list(self.spec.links):
                if id(link) not in self._realized:
                    self._create_link(link)
            hwlinks.attach_external(self)
            self.start_nodes()
            self.configure()
            finish_starting([n.shell_if_started() for n in starting])
        except BaseException:
            log.error("run %s: setup failed, rolling back what it made", self.run_id)
            self.stop()
            raise

    def start(self, shells: bool = False) -> Network:
        """Build (if needed) and wait until the network forwards (STP converged); with
        ``shells``, every node's shell is started during the build (see :meth:`build`;
        otherwise a node's shell starts on first use, or all at once with
        :meth:`start_shells`)."""
        if not self._started:
            began = time.perf_counter()
            self.build(shells)
            try:
                self.wait_stp()
            except BaseException:
                self.stop()
                raise
            self._started = True
            self.timings["build"] = time.perf_counter() - began
            vt_run.started(self)  # the adaptive TDF, when asked
        return self

    def __enter__(self) -> Network:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def check_link_params(self, links: list[LinkSpec]) -> list[Choice]:
        """Choose each link's backend (see :mod:`fidelnet.links.choice`) before any
        kernel object exists; raise when the chosen backend cannot do what is asked
        (``tc`` without ``sch_netem``) or the engine is needed but not installed."""
        return [
            realize.choose_link(self, link, f"link {link.a}-{link.b} (links[{i}])")
            for i, link in enumerate(links)
        ]

    def check_capacity(self, spec: TopologySpec | None = None, shells: bool = False) -> None:
        """Refuse a topology the machine cannot hold (memory, open files, tasks,
        namespaces) before anything is built, naming the limit; raise this process's
        soft limit on open files when the topology needs more and the hard limit
        allows it (:mod:`fidelnet.topology.footprint`)."""
        here = limits.machine()
        need = footprint.check(spec or self.spec, here, shells)
        limits.raise_nofile(need.fds + here.open_fds)

    def kernel_caps(self) -> frozenset[str]:
        """The qdiscs the tc backend may use that this kernel has (probed once)."""
        if self._caps is None:
            self._caps = tc.kernel_qdiscs(NEEDS_QDISCS)
        return self._caps

    def link_driver(self, link: LinkSpec) -> LinkDriver:
        return self._drivers[id(link)]

    def link_engine(self) -> LinkEngine:
        """The run's link engine daemon, started on first use in the fabric namespace
        (:func:`fidelnet.links.engine_link.start_engine`)."""
        if self.engine is None:
            self._fabric_netlink()
            self.engine = start_engine(self, self._fabric)
        return self.engine

    def _fabric_netlink(self) -> Netlink:
        if self._fabric_nl is None:
            self._fabric, self._fabric_nl = realize.make_fabric(self)
        return self._fabric_nl

    def datapath(self, kind: str) -> Datapath:
        """The run's switch datapath of ``kind`` (``bridge`` or ``bpf``), made on first use."""
        if kind not in self.datapaths:
            self.datapaths[kind] = switches.make(kind, self.run_id, self._owning_calls())
        return self.datapaths[kind]

    def node_backend(self, kind: str) -> NodeBackend:
        """The run's node backend of ``kind`` (:mod:`fidelnet.nodes._base`), made on
        first use."""
        if kind not in self._node_backends:
            self._node_backends[kind] = make_backend(kind)
        return self._node_backends[kind]

    def start_nodes(self) -> None:
        """Start what runs the nodes built since the last call (VMs boot here, all
        together, once their links exist), backend by backend."""
        todo: dict[str, list[Node]] = {}
        for node in self.nodes.values():
            if not node.backend_started and node.netns is not None and node.kind != "switch":
                todo.setdefault(node.backend.kind, []).append(node)
        for group in todo.values():
            group[0].backend.start(group)
            for node in group:
                node.backend_started = True

    def _owning_calls(self) -> tuple[Callable[..., None], Callable[..., None]]:
        assert self._state is not None
        return self.state_record, self._state.gone

    def _create_node(self, spec: NodeSpec) -> Node:
        node = self._classes.get(spec.kind, Host)(self, spec)
        self.realize_node(node)
        return node

    def realize_node(self, node: Node) -> None:
        """Create the kernel side of a node object (its namespace, or its bridge in the
        fabric) and register it. Front doors that construct node objects themselves
        (the Mininet layer) call this; its spec must already be in ``self.spec``."""
        self.open()
        if node.spec.name in self.nodes:
            raise ValidationError(
                f"nodes.{node.spec.name}", "a node with this name exists", node.spec.name
            )
        realize.realize_node(self, node)
        self.nodes[node.spec.name] = node
        vt_run.node_added(self, node)

    def _create_link(self, link: LinkSpec) -> Link:
        intf_a, intf_b = self.realize_link(link)
        rt = Link(link, intf_a, intf_b, self._drivers[id(link)])
        self.links.append(rt)
        return rt

    def realize_link(
        self,
        link: LinkSpec,
        intf_classes: tuple[type[Interface], type[Interface]] = (Interface, Interface),
    ) -> tuple[Interface, Interface]:
        """Create ``link`` (ports and names assigned) on its backend and attach both
        ends to their nodes (:func:`fidelnet.realize.realize_link`)."""
        choice = realize.choose_link(self, link, f"link {link.a}-{link.b}")
        ends = realize.realize_link(self, link, choice, intf_classes)
        self._realized.add(id(link))
        return ends

    def forget_link(self, link: Link) -> None:
        """A running link was deleted (its interfaces are gone): drop it from the
        network's links and spec and release its driver, so its ports and names may be
        used again. Nothing is asked of the kernel."""
        self.links[:] = [lk for lk in self.links if lk is not link]
        self.spec.links[:] = [ls for ls in self.spec.links if ls is not link.spec]
        self._realized.discard(id(link.spec))
        driver = self._drivers.pop(id(link.spec), None)
        if driver is not None:
            driver.close()

    def remove_node(self, node: Node) -> None:
        """Remove one node from the running network with its links, and free its name
        (Mininet's ``delNode``; a standalone Mininet node stopped): see
        :func:`fidelnet.dismantle.remove_node`."""
        dismantle.remove_node(self, node)

    def configure(self) -> None:
        """Forwarding, routes, static ARP and the routers' fast path, once nodes and
        links exist (:mod:`fidelnet.l3`)."""
        l3.configure(self)

    def divert_link(self, link: Link, why: str) -> LinkDriver:
        """The driver for ``link`` once a runtime change needs what its kernel backend
        cannot do (``why``): see :func:`fidelnet.links.divert.divert_or_refuse`."""
        old = self._drivers[id(link.spec)]
        self._drivers[id(link.spec)] = driver = divert_or_refuse(self, link, why)
        old.close()
        return driver

    def on_link_change(self, link: Link) -> None:
        """A link got new parameters at runtime (called by :meth:`Link.configure`)."""
        if self.fastpath:
            fastpath.link_changed(self, link)

    def static_arp(self) -> None:
        """Fill every host's ARP table with every other host's address (Mininet's
        ``autoStaticArp``)."""
        l3.static_arp(self)

    def wait_stp(self, timeout: float = _STP_TIMEOUT) -> None:
        """Wait until every switch forwards: STP bridges out of the listening and
        learning states, OVS switches connected to their controllers."""
        waiting = [s for s in self.switches if isinstance(s, Switch) and s.waits()]
        if waiting:
            realize.wait_stp(waiting, timeout)

    # -- teardown -----------------------------------------------------------------

    def stop(self, wait_kernel: bool = True, kernel_timeout: float = 300.0) -> None:
        """End every process, remove every object this run made. Idempotent.

        With ``wait_kernel`` (the default) it then waits until the kernel has freed
        the namespaces (at most ``kernel_timeout`` seconds): the kernel does that
        after deletion returns, and until it is done, the next run's namespaces and
        devices wait for it. ``timings`` says how long each part took
        (:mod:`fidelnet.dismantle`)."""
        if self._state is None:
            return
        dismantle.stop(self, wait_kernel, kernel_timeout)

    def forget(self) -> None:
        """After teardown: no state, no node, link or driver left (called by
        :func:`fidelnet.dismantle.remove_all`)."""
        self._state = None
        self.neigh_reserved = 0
        self._started = False
        self.nodes.clear()
        self.links.clear()
        self._realized.clear()
        for driver in self._drivers.values():
            driver.close()
        self._drivers.clear()
        runsignals.restore(self._old_handlers)
        with contextlib.suppress(Exception):
            atexit.unregister(self._atexit)

    def start_shells(self, nodes: list[Node] | None = None, timeout: float = 60.0) -> None:
        """Start the persistent shell of every node (or of ``nodes``) that has none,
        all at once: each shell's start-up (entering the node's namespaces, then
        bash) overlaps the others', where :meth:`Node.shell` starts one on first use."""
        todo = [n for n in (self.nodes.values() if nodes is None else nodes) if not n.has_shell()]
        for node in todo:
            node.set_shell(node.start_shell(wait=False))
        finish_starting([n.shell_if_started() for n in todo], timeout)

    # -- tests ----------------------------------------------------------------------

    def ping_all(self, timeout: float = 1.0) -> float:
        """Ping between every ordered pair of hosts; returns the percent dropped."""
        return l3.ping_all(self.hosts, timeout)

    def ping_pairs(self, hosts: list[Node], timeout: float = 1.0) -> dict[tuple[str, str], bool]:
        return l3.ping_pairs(hosts, timeout)
