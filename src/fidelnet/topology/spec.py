"""Topology specifications: pure data, no I/O.

A :class:`TopologySpec` is what every front door (the Python API, a Mininet
``Topo``, a scenario file) produces, and what :mod:`fidelnet.topology.validate`
checks before anything touches the kernel. Quantities are held in base units
(bit/s, seconds, bytes, percent), already parsed from text by
:mod:`fidelnet.topology.units`.

Classes:

- :class:`LinkParams`: shaping and impairment of one link direction.
- :class:`NodeSpec`: a host, switch or router, with its addressing and CPU limits.
- :class:`LinkSpec`: a link between two nodes, with optional interface names,
  ports, addresses and parameters.
- :class:`TopologySpec`: nodes in insertion order, links, and network-wide options.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Literal

__all__ = [
    "CONTROLLER_KINDS",
    "ENGINE_ENDPOINTS",
    "EXTERNAL_MODES",
    "FAIL_MODES",
    "JITTER_DISTS",
    "LINK_BACKENDS",
    "NODE_BACKENDS",
    "NODE_KINDS",
    "OPENFLOW_VERSIONS",
    "QUEUE_KINDS",
    "VM_ACCELS",
    "VM_MIN_MEMORY_MB",
    "AutoTdf",
    "ContainerSpec",
    "ControllerKind",
    "ControllerSpec",
    "EngineEndpoint",
    "ExternalMode",
    "ExternalSpec",
    "FailMode",
    "FlowProtocol",
    "FlowSpec",
    "GilbertElliott",
    "JitterDist",
    "LinkBackend",
    "LinkParams",
    "LinkSpec",
    "NodeBackendKind",
    "NodeKind",
    "NodeSpec",
    "OpenFlowSpec",
    "QueueKind",
    "SriovSpec",
    "TopologySpec",
    "VMSpec",
    "VmAccel",
]

NodeKind = Literal["host", "switch", "router"]
NODE_KINDS: tuple[str, ...] = ("host", "switch", "router")
FastPath = Literal["xdp"]
FASTPATHS: tuple[str, ...] = ("xdp",)
Datapath = Literal["auto", "bridge", "bpf", "ovs"]
DATAPATHS: tuple[str, ...] = ("auto", "bridge", "bpf", "ovs")

NodeBackendKind = Literal["netns", "qemu", "container"]
NODE_BACKENDS: tuple[str, ...] = ("netns", "qemu", "container")
"""How a node is made (:mod:`fidelnet.nodes._base`): ``netns`` (a network namespace),
``qemu`` (a virtual machine, :mod:`fidelnet.nodes.qemu`) or ``container`` (an OCI
image run by crun in the node's namespace, :mod:`fidelnet.nodes.container`)."""
VmAccel = Literal["auto", "kvm", "tcg"]
VM_ACCELS: tuple[str, ...] = ("auto", "kvm", "tcg")


JitterDist = Literal["uniform", "normal"]
JITTER_DISTS: tuple[str, ...] = ("uniform", "normal")
# droptail: one FIFO; hifi: random drop (engine); fq: a fair queue per flow (tc)
QueueKind = Literal["droptail", "hifi", "fq"]
QUEUE_KINDS: tuple[str, ...] = ("droptail", "hifi", "fq")
# hw: a pair of real interfaces from TopologySpec.hardware_pairs (docs/hwlinks.md)
LinkBackend = Literal["auto", "tc", "engine", "hw"]
LINK_BACKENDS: tuple[str, ...] = ("auto", "tc", "engine", "hw")
EngineEndpoint = Literal["auto", "tap", "af_xdp"]
ENGINE_ENDPOINTS: tuple[str, ...] = ("auto", "tap", "af_xdp")


@dataclass(frozen=True)
class AutoTdf:
    """The adaptive time dilation factor's bounds and pace (``tdf="auto"``,
    :mod:`fidelnet.vt.adapt`): it starts at ``start`` and stays within ``low`` and
    ``high``; it samples every ``period_s`` and steers the busiest core to
    ``target_busy`` of its time."""

    low: float = 1.0
    high: float = 32.0
    start: float = 1.0
    period_s: float = 0.5
    target_busy: float = 0.7


@dataclass(frozen=True)
class GilbertElliott:
    """Two-state Markov loss (netem's ``gemodel``), all values in percent.

    ``p``: chance per packet of going from the good state to the bad one; ``r``: of
    going back (mean burst length ``100 / r`` packets); ``loss_good`` and
    ``loss_bad``: loss in each state (netem's ``1-k`` and ``1-h``).
    """

    p: float
    r: float
    loss_good: float = 0.0
    loss_bad: float = 100.0


@dataclass(frozen=True)
class LinkParams:
    """Shaping and impairment of one link direction (``None`` means not set).

    Base units: ``bw`` bit/s, ``delay``/``jitter`` seconds, ``loss``/``duplicate``/
    ``corrupt`` percent, ``max_queue_size`` packets, ``queue_bytes`` and
    ``overhead`` bytes. ``trace`` is a Mahimahi packet-delivery trace file (it
    replaces ``bw``). ``reorder`` lets jittered packets overtake each other (the
    default keeps their order). ``seed`` makes every random choice reproducible.
    """

    bw: float | None = None
    delay: float | None = None
    jitter: float | None = None
    jitter_dist: JitterDist | None = None
    reorder: bool | None = None
    loss: float | None = None
    loss_model: GilbertElliott | None = None
    duplicate: float | None = None
    corrupt: float | None = None
    max_queue_size: int | None = None
    queue_bytes: int | None = None
    queue: QueueKind | None = None
    overhead: int | None = None
    trace: str | None = None
    seed: int | None = None

    def is_empty(self) -> bool:
        return all(v is None for v in self.__dict__.values())

    def set_fields(self) -> dict[str, Any]:
        """The fields that are set, by name."""
        return {k: v for k, v in self.__dict__.items() if v is not None}

    def merged(self, other: LinkParams) -> LinkParams:
        """These values, overridden by every value ``other`` sets."""
        return replace(self, **other.set_fields())


@dataclass
class NodeSpec:
    """One node. ``ip`` is CIDR (``"10.0.0.1/8"``); ``cpu`` a fraction of all cores."""

    name: str
    kind: NodeKind = "host"
    ip: str | None = None
    mac: str | None = None
    default_route: str | None = None  # a next-hop address or an interface name
    cpu: float | None = None
    cores: tuple[int, ...] | None = None
    sched: Literal["cfs", "rt"] | None = None
    stp: bool = False  # switches only
    # switches only: what forwards between its ports (docs/switches.md); None: the topology's
    datapath: Datapath | None = None
    # switches only, on the bpf datapath: IPv6 multicast only where it was asked for
    mld_snooping: bool = True
    fastpath: FastPath | None = None  # routers only: forward in XDP (docs/fastpath.md)
    openflow: OpenFlowSpec | None = None  # switches on the ovs datapath only
    in_namespace: bool = True
    backend: NodeBackendKind = "netns"  # hosts and routers: how the node is made
    vm: VMSpec | None = None  # backend qemu: the machine (None: VMSpec's defaults)
    container: ContainerSpec | None = None  # backend container: its image and options
    opts: dict[str, object] = field(default_factory=dict)  # front-door extras, kept for them


@dataclass
class LinkSpec:
    """A link between ``a`` and ``b``; ``params`` applies to both directions unless
    ``params_ab`` (a to b) or ``params_ba`` (b to a) override it."""

    a: str
    b: str
    a_intf: str | None = None
    b_intf: str | None = None
    a_port: int | None = None
    b_port: int | None = None
    a_ip: str | None = None  # CIDR
    b_ip: str | None = None
    a_mac: str | None = None
    b_mac: str | None = None
    params: LinkParams = field(default_factory=LinkParams)
    params_ab: LinkParams | None = None
    params_ba: LinkParams | None = None
    key: str | None = None  # distinguishes parallel links between the same pair
    backend: LinkBackend | None = None  # None: the topology's link_backend
    # How an engine link's frames reach linkd; None: the topology's engine_endpoint
    endpoint: EngineEndpoint | None = None

    def direction(self, src: str) -> LinkParams:
        """Parameters for traffic leaving ``src`` (``a`` or ``b``) onto this link."""
        if src == self.a:
            return self.params.merged(self.params_ab) if self.params_ab else self.params
        return self.params.merged(self.params_ba) if self.params_ba else self.params


ControllerKind = Literal["ref", "remote"]
CONTROLLER_KINDS: tuple[str, ...] = ("ref", "remote")
OPENFLOW_VERSIONS: tuple[str, ...] = tuple(f"OpenFlow1{i}" for i in range(6))
FailMode = Literal["secure", "standalone"]
FAIL_MODES: tuple[str, ...] = ("secure", "standalone")


@dataclass
class ControllerSpec:
    """An OpenFlow controller of the run's OVS switches (docs/switches.md).

    - ``ref``: Open vSwitch's test controller (Mininet's ``Controller``), a learning
      switch the run starts, listening on ``port`` of the fabric namespace's loopback,
      where every OVS switch runs.
    - ``remote``: a controller the run does not start, listening on ``ip:port``
      (default ``127.0.0.1``) in the host's namespace, or in node ``node``'s (or, from
      Python only, in the namespace at path ``netns``). The run relays its switches'
      connections there (:mod:`fidelnet.kernel.relay`). A remote controller on the
      loopback at the port of one of the run's own ``ref`` controllers is that
      controller, as on Mininet's single host namespace.
    """

    name: str
    kind: ControllerKind = "ref"
    port: int = 6653
    ip: str | None = None
    node: str | None = None
    netns: str | None = None

    @property
    def address(self) -> str:
        """Where it listens, as a user would name it."""
        where = f" in {self.node}" if self.node else ""
        return f"{self.ip or '127.0.0.1'}:{self.port}{where}"


OvsDatapathType = Literal["kernel", "user"]
OVS_DATAPATH_TYPES: tuple[str, ...] = ("kernel", "user")


@dataclass(frozen=True)
class VMSpec:
    """A VM node's machine (``NodeSpec(..., backend="qemu", vm=VMSpec(...))``).

    ``cpus``: virtual CPUs; ``memory_mb``: its RAM (128 boots fidelnet's image;
    below :data:`VM_MIN_MEMORY_MB` nothing does); ``cpupin``: host cores its vCPU
    threads are pinned to, one per vCPU in order; ``kernel``/``initrd``: a kernel and
    initramfs of your own (default: fidelnet's image, :mod:`fidelnet.vm.image`; your
    initramfs must start ``fidelnet-vm agent`` on the port ``fidelnet.agent``);
    ``image``: a disk image (raw or qcow2) whose root file system the guest runs on
    instead of the host's (its first partition, or the whole disk; ext2/3/4; never
    written: the guest's writes go to a layer of its own; it needs ``bash``, ``sh``
    and iproute2's ``ip``; the agent comes from the host);
    ``cmdline``: words added to the kernel command line (e.g. CIMininet's latency
    options); ``accel``: ``kvm``, ``tcg`` (emulation, many times slower) or ``auto``
    (KVM when a guest actually starts with it, else TCG with a warning);
    ``boot_timeout_s``: how long the guest may take to answer."""

    cpus: int = 1
    memory_mb: int = 256
    cpupin: tuple[int, ...] | None = None
    kernel: str | None = None
    initrd: str | None = None
    image: str | None = None
    cmdline: str = ""
    accel: VmAccel = "auto"
    boot_timeout_s: float = 180.0


@dataclass(frozen=True)
class ContainerSpec:
    """A container node's image and how it runs
    (``NodeSpec(..., backend="container", container=ContainerSpec(image=...))``).

    ``image``: an image reference (:func:`fidelnet.image.resolve`: ``oci-archive:PATH``,
    ``docker-archive:PATH``, ``oci:DIR``, a path, or the name or digest of an image
    imported before); ``command``: replaces the image's ``Cmd``; ``entrypoint``:
    replaces its ``Entrypoint`` (and then its ``Cmd`` unless ``command`` is given);
    ``env``: added to the image's environment; ``volumes``: bind mounts,
    ``"HOST:CONTAINER"`` or ``"HOST:CONTAINER:ro"``; ``workdir``/``user``: replace
    the image's; ``privileged``: every capability and no masked paths;
    ``cap_add``: capabilities beyond the default set (``NET_ADMIN``, ``SYS_ADMIN``...).
    """

    image: str
    command: tuple[str, ...] | None = None
    entrypoint: tuple[str, ...] | None = None
    env: tuple[tuple[str, str], ...] = ()
    volumes: tuple[str, ...] = ()
    workdir: str | None = None
    user: str | None = None
    privileged: bool = False
    cap_add: tuple[str, ...] = ()


VM_MIN_MEMORY_MB = 96
"""The least memory a guest was seen to boot with on this kind of machine."""


@dataclass(frozen=True)
class OpenFlowSpec:
    """OpenFlow options of one OVS switch.

    ``protocols``: the OpenFlow versions it speaks (OVS's default when None);
    ``fail_mode``: ``secure`` (no forwarding without a controller) or ``standalone``
    (a learning switch while no controller is connected); None: ``secure`` when it
    has controllers, ``standalone`` when not. ``dpid``: its datapath id (up to 16 hex
    digits). ``controllers``: names of the topology's controllers it connects to
    (None: all of them; empty: none). ``in_band``: OVS may reach its controllers
    through the switch's own ports (Mininet's ``inband=True``; default off: they are
    reached on the fabric's loopback). ``reconnect_ms``: the longest back-off between
    attempts to reach a controller (OVS's ``max_backoff``; Mininet's ``reconnectms``;
    None: OVS's 8 s). ``datapath_type``: ``user`` (OVS's userspace datapath) or
    ``kernel`` (the kernel's, where the ``openvswitch`` module is loaded; else the
    userspace one, as the run records); None: the run's choice."""

    protocols: tuple[str, ...] | None = None
    fail_mode: FailMode | None = None
    dpid: str | None = None
    controllers: tuple[str, ...] | None = None
    in_band: bool = False
    reconnect_ms: int | None = None
    datapath_type: OvsDatapathType | None = None


@dataclass(frozen=True)
class SriovSpec:
    """Two cabled physical functions ``pfs``; ``vfs`` VFs on each, VF i of both on
    VLAN ``vlan_base + i`` (docs/hwlinks.md)."""

    pfs: tuple[str, str]
    vfs: int
    vlan_base: int = 100


ExternalMode = Literal["macvlan", "lend"]
EXTERNAL_MODES: tuple[str, ...] = ("macvlan", "lend")


@dataclass(frozen=True)
class ExternalSpec:
    """A real interface of this machine as one of ``node``'s interfaces, for traffic
    that enters and leaves the emulation (an external load generator). ``mode``:
    ``macvlan`` (default) gives the node a macvlan on ``interface`` (the host keeps
    the interface), ``lend`` moves the interface itself into the node and gives it
    back at the end. ``name``: its name in the node (default ``<node>-ext<i>``);
    ``ip``: its address (CIDR)."""

    node: str
    interface: str
    mode: ExternalMode = "macvlan"
    name: str | None = None
    ip: str | None = None


FlowProtocol = Literal["udp", "tcp"]


@dataclass(frozen=True)
class FlowSpec:
    """One flow: its ``path`` (node names, source first), the destination ``port``
    and ``protocol`` that mark its packets, and, for traffic generators, a ``rate_bps``
    and packet ``size`` (bytes of the IP packet)."""

    name: str
    path: tuple[str, ...]
    port: int
    protocol: FlowProtocol = "udp"
    rate_bps: float | None = None
    size: int | None = None

    @property
    def src(self) -> str:
        return self.path[0]

    @property
    def dst(self) -> str:
        return self.path[-1]

    @property
    def hops(self) -> int:
        return len(self.path) - 1


@dataclass
class TopologySpec:
    """A whole topology: nodes in insertion order, links, network-wide options."""

    nodes: dict[str, NodeSpec] = field(default_factory=dict)
    links: list[LinkSpec] = field(default_factory=list)
    ip_base: str = "10.0.0.0/8"
    auto_set_macs: bool = False
    auto_static_arp: bool = False
    auto_routes: bool = False  # install shortest-path static routes between routed nodes
    link_backend: LinkBackend = "auto"  # default for links that do not choose
    engine_endpoint: EngineEndpoint = "auto"  # default for engine links that do not choose
    seed: int | None = None  # seeds every link without its own; None: random, recorded
    fastpath: FastPath | None = None  # every router's fast path, unless it sets its own
    engine_threads: int = 1  # link-engine loops (linkd --threads); links spread over them
    ipv6: bool = True  # False: IPv6 off in every node's namespace (see docs/scale.md)
    datapath: Datapath = "auto"  # switches' datapath unless they choose (docs/switches.md)
    # OpenFlow controllers every OVS switch connects to (none: OVS switches learn alone)
    controllers: list[ControllerSpec] = field(default_factory=list)
    # The pool of interface pairs that links with backend "hw" take, in order: each
    # pair is two interfaces of this machine joined by a cable (or SR-IOV VFs on one
    # VLAN); docs/hwlinks.md.
    hardware_pairs: list[tuple[str, str]] = field(default_factory=list)
    # SR-IOV VFs the run makes, their pairs added to the pool (fidelnet.kernel.sriov)
    sriov: list[SriovSpec] = field(default_factory=list)
    # Real interfaces given to nodes (fidelnet.hwlinks.attach_external)
    external: list[ExternalSpec] = field(default_factory=list)
    # Time dilation factor of every node (fidelnet.vt); None: real time. With
    # tdf_auto, the factor now, which the run's adaptor changes (fidelnet.vt.adapt).
    tdf: float | None = None
    tdf_auto: AutoTdf | None = None
    # Flows routed by their own path, not by destination (fidelnet.topology.flows)
    flows: list[FlowSpec] = field(default_factory=list)

    def add_node(self, node: NodeSpec) -> NodeSpec:
        self.nodes[node.name] = node
        return node

    def add_link(self, link: LinkSpec) -> LinkSpec:
        self.links.append(link)
        return link

    def hosts(self) -> list[NodeSpec]:
        return [n for n in self.nodes.values() if n.kind == "host"]

    def switches(self) -> list[NodeSpec]:
        return [n for n in self.nodes.values() if n.kind == "switch"]

    def routers(self) -> list[NodeSpec]:
        return [n for n in self.nodes.values() if n.kind == "router"]
