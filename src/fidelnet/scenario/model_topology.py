"""The ``topology`` section of a scenario file: builder, nodes, links, link parameters.

:class:`Topology` is read by :func:`fidelnet.scenario.topology.build` into a
:class:`~fidelnet.topology.spec.TopologySpec`; what involves several keys is checked
there, with the whole topology (:func:`fidelnet.topology.validate.problems`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fidelnet.errors import ValidationError
from fidelnet.links.params import parse_params
from fidelnet.scenario.fields import (
    _PERCENT_SCHEMA,
    NodeName,
    _error,
    _fail,
    _JsonSchema,
    _Model,
    _text_schema,
)
from fidelnet.scenario.limits import MAX_LINKS, MAX_NODES
from fidelnet.scenario.model_hardware import Hardware
from fidelnet.scenario.model_routing import RandomArgs, Routing
from fidelnet.scenario.model_vt import TdfField
from fidelnet.topology import builders
from fidelnet.topology.spec import (
    NODE_BACKENDS,
    EngineEndpoint,
    FastPath,
    LinkParams,
    NodeBackendKind,
    TopologySpec,
)

__all__ = [
    "BUILDERS",
    "NODE_BACKENDS",
    "VM",
    "Builder",
    "Defaults",
    "Link",
    "LinkParamsModel",
    "LossModel",
    "Node",
    "Topology",
    "TreeArgs",
]

# --- link parameters ----------------------------------------------------------------------


class LossModel(_Model):
    """Loss as a model instead of a percentage: Gilbert-Elliott (two-state Markov,
    netem's ``gemodel``) or ``random`` with ``p`` percent."""

    model: Literal["gilbert_elliott", "random"] = "gilbert_elliott"
    """``gilbert_elliott`` (default) or ``random`` (loss ``p`` percent)."""
    p: str | float
    """Percent: chance per packet of going from the good state to the bad one."""
    r: str | float | None = None
    """Percent: chance of going back to the good state (mean burst ``100 / r`` packets)."""
    loss_good: str | float | None = None
    """Percent lost in the good state (default 0)."""
    loss_bad: str | float | None = None
    """Percent lost in the bad state (default 100)."""


_PERCENT_TEXT = Annotated[str | float, _PERCENT_SCHEMA]
_SIZE_TEXT = Annotated[
    str | int,
    _JsonSchema(
        {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0}], "examples": ["64KiB"]}
    ),
]


class LinkParamsModel(_Model):
    """Shaping and impairment of a link, in text units (see ``docs/links.md``).

    Each key is checked by :func:`fidelnet.links.params.parse_params`; ranges that
    involve several keys (jitter needs a delay, a trace replaces ``bw``) are checked
    with the whole topology.
    """

    bw: Annotated[str, _text_schema(["100Mbit", "1Gbit"])] | None = None
    """Rate: ``10Mbit``, ``2.5Gbit``, ``100Mbps``. A bare number is an error."""
    delay: Annotated[str, _text_schema(["1ms", "250us"])] | None = None
    """One-way delay: ``10ms``, ``250us``."""
    jitter: Annotated[str, _text_schema(["1ms"])] | None = None
    """Uniform: delay ± jitter; normal: its standard deviation. Needs a delay."""
    jitter_dist: Literal["uniform", "normal"] | None = None
    """``uniform`` (default) or ``normal``."""
    reorder: bool | None = None
    """Let jittered packets overtake each other (default: keep their order)."""
    loss: _PERCENT_TEXT | LossModel | None = None
    """Random loss in percent (``1%``), or a loss model mapping."""
    duplicate: _PERCENT_TEXT | None = None
    """Percent of packets duplicated."""
    corrupt: _PERCENT_TEXT | None = None
    """Percent of packets with one bit flipped."""
    max_queue_size: Annotated[int, Field(ge=1)] | None = None
    """Bottleneck queue limit in packets."""
    queue_bytes: _SIZE_TEXT | None = None
    """Bottleneck queue limit in bytes (``64KiB``; a bare number is bytes)."""
    queue: Literal["droptail", "hifi", "fq"] | None = None
    """``droptail`` (default, one FIFO), ``hifi`` (random drop, engine) or ``fq`` (a fair
    queue per flow, as a Linux host's own qdisc; tc, needs ``bw``)."""
    overhead: _SIZE_TEXT | None = None
    """Bytes added to each packet for rate accounting (24: preamble, FCS, gap)."""
    trace: str | None = None
    """A Mahimahi packet-delivery trace file (replaces ``bw``); relative to the scenario."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Seed of this link's random choices (default: from the scenario's ``seed``)."""

    @field_validator("*", mode="before")
    @classmethod
    def _parse(cls, value: Any, info: ValidationInfo) -> Any:
        if value is None or info.field_name is None:
            return value
        try:
            parse_params({info.field_name: value}, "params")
        except ValidationError as exc:
            parts = tuple(exc.field.split(".")[2:])
            if exc.problem == "unknown key":  # a loss model's: as every unknown key reads
                exc = ValidationError(exc.field, "unknown field", None, exc.choices)
            raise _error(exc, parts) from None
        return value

    def to_params(self) -> LinkParams:
        """The parameters in base units."""
        return parse_params(self.model_dump(exclude_none=True), "params")


# --- topology -----------------------------------------------------------------------------


class TreeArgs(_Model):
    """Arguments of the ``tree`` builder."""

    depth: Annotated[int, Field(ge=1)] = 1
    """Levels of switches below the root (default 1)."""
    fanout: Annotated[int, Field(ge=1)] = 2
    """Children per switch (default 2)."""


BUILDERS: tuple[str, ...] = ("linear", "line", "tree", "single", "dumbbell", "random")
"""The builders a scenario may name."""


class Builder(_Model):
    """Exactly one of the ready-made topologies of :mod:`fidelnet.topology.builders`."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1, "maxProperties": 1})

    linear: Annotated[int, Field(ge=1)] | None = None
    """``linear: K``: switches s1..sK in a chain, host h_i on s_i."""
    line: Annotated[int, Field(ge=2, le=256)] | None = None
    """``line: N``: routers h1..hN in a routed line, link i on 10.0.i.0/24, static routes."""
    tree: TreeArgs | None = None
    """``tree: {depth: D, fanout: F}``: Mininet's TreeTopo."""
    single: Annotated[int, Field(ge=1)] | None = None
    """``single: K``: switch s1 and hosts h1..hK."""
    dumbbell: Annotated[int, Field(ge=1)] | None = None
    """``dumbbell: N``: s1 -- s2 bottleneck, hosts h1..hN on s1 and hN+1..h2N on s2."""
    random: RandomArgs | None = None
    """``random: {nodes: N, seed: S, degree: D, flows: {count: C}}``: a seeded random
    topology of routers h1..hN joined directly, with random flows routed by path (HVNet)."""

    @model_validator(mode="after")
    def _exactly_one(self) -> Builder:
        given = [name for name in BUILDERS if getattr(self, name) is not None]
        if len(given) != 1:
            what = "none" if not given else ", ".join(given)
            raise _fail(f"give exactly one builder (given: {what})", BUILDERS, show=False)
        if self.node_count() > MAX_NODES:
            raise _fail(
                f"this {self.kind} has more than {MAX_NODES:,} nodes, the most a scenario "
                "may have (docs/scenarios.md#limits)",
                show=False,
            )
        return self

    def node_count(self) -> int:
        """How many nodes the builder would make (counting stops past :data:`MAX_NODES`)."""
        if self.linear is not None:
            return 2 * self.linear
        if self.line is not None:
            return self.line
        if self.single is not None:
            return self.single + 1
        if self.dumbbell is not None:
            return 2 * self.dumbbell + 2
        if self.random is not None:
            return self.random.nodes
        assert self.tree is not None
        total, level = 0, 1
        for _ in range(self.tree.depth + 1):  # switches at each depth, then the hosts
            total += level
            if total > MAX_NODES:
                break
            level *= self.tree.fanout
        return total

    @property
    def kind(self) -> str:
        """The builder's name: ``line``, ``tree``..."""
        return next(name for name in BUILDERS if getattr(self, name) is not None)

    def build(self) -> TopologySpec:
        """The builder's topology; raises :class:`~fidelnet.errors.ValidationError`."""
        if self.linear is not None:
            return builders.linear(self.linear)
        if self.line is not None:
            return builders.line(self.line)
        if self.tree is not None:
            return builders.tree(self.tree.depth, self.tree.fanout)
        if self.single is not None:
            return builders.single(self.single)
        if self.random is not None:
            return self.random.build()
        assert self.dumbbell is not None
        return builders.dumbbell(self.dumbbell)


_PLANNED_BACKENDS = ("cgroup",)


def _node_backend(value: Any) -> Any:
    if value in _PLANNED_BACKENDS:
        raise _fail(f"node backend {value!r} is not yet supported", NODE_BACKENDS)
    return value


OpenFlowVersion = Literal[
    "OpenFlow10", "OpenFlow11", "OpenFlow12", "OpenFlow13", "OpenFlow14", "OpenFlow15"
]


class OpenFlow(_Model):
    """OpenFlow options of an OVS switch."""

    protocols: Annotated[list[OpenFlowVersion], Field(min_length=1)] | None = None
    """OpenFlow versions it speaks: ``[OpenFlow13]`` (default: Open vSwitch's)."""
    fail_mode: Literal["secure", "standalone"] | None = None
    """``secure``: no forwarding without a controller; ``standalone``: a learning
    switch while none is connected. Default: secure with controllers, else standalone."""
    dpid: Annotated[str, Field(pattern=r"^[0-9A-Fa-f:]{1,23}$")] | None = None
    """Datapath id, up to 16 hex digits (default: Open vSwitch's)."""
    controllers: list[NodeName] | None = None
    """Names of ``topology.controllers`` it connects to (default: all; ``[]``: none)."""
    in_band: bool = False
    """Reach controllers through the switch's own ports (default: on the run's
    loopback, as Mininet does)."""
    reconnect_ms: Annotated[int, Field(ge=1000, le=3_600_000)] | None = None
    """Longest back-off between attempts to reach a controller, ms (Open vSwitch's
    ``max_backoff``; default 8000)."""
    datapath_type: Literal["kernel", "user"] | None = None
    """``user``: Open vSwitch's userspace datapath; ``kernel``: the kernel's where its
    module is loaded (else the userspace one). Default: the run's choice."""


class VM(_Model):
    """The machine of a node with ``backend: qemu``."""

    cpus: Annotated[int, Field(ge=1, le=64)] = 1
    """Virtual CPUs."""
    memory: Annotated[int, Field(ge=96, le=1 << 20)] = 256
    """Memory in MiB (96 is the least that boots)."""
    cpupin: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] | None = None
    """Host cores for the vCPU threads, one per vCPU: ``[2, 3]``."""
    kernel: str | None = None
    """A kernel of your own (default: fidelnet's image from Debian's packages)."""
    initrd: str | None = None
    """Its initramfs; it must start ``fidelnet-vm agent`` on the port ``fidelnet.agent``."""
    image: str | None = None
    """A disk image (raw or qcow2, ext4 root) to run on instead of the host's file
    system; never written. It needs bash, sh and ip."""
    cmdline: str = ""
    """Words added to the kernel command line."""
    accel: Literal["auto", "kvm", "tcg"] = "auto"
    """``kvm``, ``tcg`` (emulated, much slower) or ``auto`` (KVM when it works here)."""
    boot_timeout: Annotated[float, Field(gt=0, le=3600)] = 180.0
    """Seconds the guest may take to answer after it starts."""


class Container(_Model):
    """How a container node (``image:``) runs its image, beyond the image's own config."""

    command: list[str] | None = None
    """Replaces the image's ``Cmd``: ``["bird", "-f"]``."""
    entrypoint: list[str] | None = None
    """Replaces the image's ``Entrypoint`` (and its ``Cmd``, unless ``command`` is given)."""
    env: dict[str, str] = {}
    """Added to the image's environment."""
    volumes: list[str] = []
    """Bind mounts: ``/host/dir:/in/container`` or ``/host/file:/in/container:ro``
    (relative host paths are from the scenario file's directory)."""
    workdir: str | None = None
    """Replaces the image's working directory."""
    user: str | None = None
    """Replaces the image's user: a name or uid, optionally ``:group``."""
    privileged: bool = False
    """Every capability, nothing masked (default: Docker's set and NET_ADMIN)."""
    cap_add: list[str] = []
    """Capabilities beyond the default set: ``[SYS_ADMIN]``."""


class Node(_Model):
    """A node the scenario adds to the builder's (if any). ``lg: {}`` or ``lg:`` (empty)
    is a host with every default."""

    kind: Literal["host", "switch", "router"] = "host"
    """``host`` (default), ``switch`` (a learning switch) or ``router`` (a host that forwards)."""
    ip: str | None = None
    """Address of its first interface, CIDR: ``10.0.0.1/24`` (default: from ``ip_base``)."""
    mac: str | None = None
    """MAC of its first interface (default: the kernel's, or from the address)."""
    default_route: str | None = None
    """A next-hop address or an interface name."""
    cpu: Annotated[float, Field(gt=0, le=1)] | None = None
    """CPU limit as a fraction of all cores, in (0, 1] (hosts and routers)."""
    cores: Annotated[list[Annotated[int, Field(ge=0)]], Field(min_length=1)] | None = None
    """Pin to these CPU cores: ``[0, 1]``."""
    sched: Literal["cfs", "rt"] | None = None
    """CPU scheduler for ``cpu``: ``cfs`` or ``rt``."""
    stp: bool = False
    """Spanning tree (switches only; on the Linux bridge datapath)."""
    datapath: Literal["auto", "bridge", "bpf", "ovs"] | None = None
    """What forwards between a switch's ports: ``bridge`` (a Linux bridge), ``bpf`` (the
    run's BPF learning switch, no device per switch), ``auto`` (bpf unless STP is on).
    Default: ``topology.datapath`` (switches only)."""
    mld_snooping: bool = True
    """MLD snooping (switches on the ``bpf`` datapath): IPv6 multicast other than to
    ff02::1 reaches a node only when it reported listening to the group, or is a
    multicast router; ``false`` floods it to every port (docs/switches.md)."""
    fastpath: FastPath | None = None
    """``xdp``: forward in an XDP program ahead of the IP stack (routers only; default:
    ``topology.fastpath``)."""
    openflow: OpenFlow | None = None
    """OpenFlow options (switches on the ``ovs`` datapath)."""
    backend: Annotated[NodeBackendKind, BeforeValidator(_node_backend)] = "netns"
    """How the node is made: ``netns`` (a network namespace), ``qemu`` (a virtual
    machine: its own kernel) or ``container`` (an OCI image, ``image:``); hosts and
    routers; ``cgroup`` planned."""
    vm: VM | None = None
    """The machine, with ``backend: qemu`` (default: 1 vCPU, 256 MiB, fidelnet's image)."""
    image: str | None = None
    """An OCI image to run the node from (``backend: container``, the default when an
    image is given): ``oci-archive:PATH``, ``docker-archive:PATH`` (``docker save``),
    ``oci:DIR``, a path, or the name or digest of an image imported with ``fidelnet
    image import``. Pinned by digest in the results."""
    container: Container | None = None
    """How the image runs: command, entrypoint, env, volumes, workdir, user, privileged."""


class Link(_Model):
    """A link between nodes ``a`` and ``b`` (the scenario's own or the builder's)."""

    a: str
    """One end: a node name."""
    b: str
    """The other end."""
    params: LinkParamsModel | None = None
    """Both directions (merged over ``topology.defaults.link``)."""
    params_ab: LinkParamsModel | None = None
    """Traffic leaving ``a``: overrides ``params`` key by key."""
    params_ba: LinkParamsModel | None = None
    """Traffic leaving ``b``: overrides ``params`` key by key."""
    a_ip: str | None = None
    """Address of ``a``'s interface, CIDR."""
    b_ip: str | None = None
    """Address of ``b``'s interface, CIDR."""
    a_intf: str | None = None
    """Interface name on ``a`` (default ``<a>-eth<port>``)."""
    b_intf: str | None = None
    """Interface name on ``b``."""
    a_mac: str | None = None
    """MAC of ``a``'s interface."""
    b_mac: str | None = None
    """MAC of ``b``'s interface."""
    backend: Literal["auto", "tc", "engine", "hw"] | None = None
    """``auto``, ``tc``, ``engine`` or ``hw`` (a pair from ``topology.hardware.pairs``;
    default: ``topology.link_backend``)."""
    endpoint: EngineEndpoint | None = None
    """How the engine reads and writes this link's frames: ``auto``, ``tap`` or ``af_xdp``
    (default: ``topology.engine_endpoint``); only ``auto`` on a ``tc`` link."""


class Controller(_Model):
    """An OpenFlow controller of the run's OVS switches (docs/switches.md)."""

    name: NodeName
    """Its name, unique among the controllers."""
    kind: Literal["ref", "remote"] = "ref"
    """``ref``: Open vSwitch's test controller (Mininet's ``Controller``), a learning
    switch the run starts inside its fabric namespace. ``remote``: a controller the run
    does not start (yours: os-ken, ONOS...), listening on ``ip:port`` on this machine or
    inside ``node``; the switches reach it through a relay."""
    port: int = Field(6653, ge=1, le=65535)
    """TCP port it listens on."""
    ip: str | None = None
    """``remote``: its address (default ``127.0.0.1``: this machine's loopback)."""
    node: NodeName | None = None
    """``remote``: the node it runs in (it listens in that node's namespace)."""


class Defaults(_Model):
    """Values every link starts from."""

    link: LinkParamsModel | None = None
    """Parameters of every link, the builder's included; a link's ``params`` override them."""


def _nullable_values(schema: dict[str, Any]) -> None:
    """In the schema too, a node may be written with no value (``lg:``), and a name that
    breaks the rule is refused."""
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict):
        for pattern, node in patterns.items():
            patterns[pattern] = {"anyOf": [node, {"type": "null"}]}
        schema["additionalProperties"] = False


def _nodes(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: ({} if v is None else v) for k, v in value.items()}
    return value


class Topology(_Model):
    """The network: a builder's topology, plus nodes and links of the scenario's own."""

    builder: Builder | None = None
    """A ready-made topology; ``nodes`` and ``links`` add to it."""
    link_backend: Literal["auto", "tc", "engine", "hw"] = "auto"
    """Default link backend: ``auto`` (tc where it can, the engine otherwise), ``tc``,
    ``engine``, ``hw`` (pairs of real interfaces from ``hardware.pairs``)."""
    hardware: Hardware = Field(default_factory=Hardware)
    """This machine's interface pairs for links with backend ``hw``."""
    routing: Routing = Field(default_factory=Routing)
    """Flows routed by their own paths (``routing.flows``), after the builder's."""
    engine_endpoint: EngineEndpoint = "auto"
    """Default endpoint of engine links: ``auto`` (``af_xdp`` where it can for a link that
    delays or shapes, ``tap`` otherwise), ``tap`` or ``af_xdp``."""
    engine_threads: int = Field(1, ge=1, le=64)
    """Link-engine loops, one thread each (linkd ``--threads``): each engine link is
    carried by one of them (the one with the fewest links when it is made), so its
    packets are never reordered. More than one helps only where there are cores for
    them beside the traffic's own processes."""
    tdf: TdfField | None = None
    """Time dilation factor: every node's clocks and every link run this many times
    slower in real time, so the network looks this many times faster to the programs
    (docs/virtual-time.md). ``auto`` (or ``{auto: {low, high, start, target_busy}}``):
    the factor follows the machine's load. Nodes must be namespaces."""
    ipv6: bool = True
    """``false``: IPv6 off in every node (``disable_ipv6`` before its first interface
    exists), so hosts send no IPv6 at all. For big IPv4-only runs: with IPv6 on, every
    host's start-up multicast (DAD, router solicitations, MLD) floods its whole
    broadcast domain, work that grows with the square of the hosts. Switches never
    hold IPv6 of their own either way."""
    datapath: Literal["auto", "bridge", "bpf", "ovs"] = "auto"
    """Switches' datapath unless they choose: ``auto`` (default: the BPF learning switch
    for switches without STP where it is installed, a Linux bridge otherwise),
    ``bridge``, ``bpf`` or ``ovs`` (a bridge of the run's own Open vSwitch). A bridge per
    switch costs the kernel an RCU barrier when it is deleted (16-22 ms), which made
    teardown most of a big run (docs/switches.md)."""
    controllers: list[Controller] = Field(default_factory=list, max_length=64)
    """OpenFlow controllers every OVS switch connects to (``fail_mode`` secure; the run
    waits until all are connected). None: OVS switches learn on their own."""
    ip_base: str = "10.0.0.0/8"
    """Network that hosts without an address get theirs from."""
    auto_routes: bool | None = None
    """Static shortest-path routes between routed nodes (default: the builder's choice,
    on for ``line``; otherwise off)."""
    auto_static_arp: bool = False
    """Fill every host's ARP table before traffic starts."""
    fastpath: FastPath | None = None
    """``xdp``: every router forwards in XDP, the builder's included (default: none)."""
    defaults: Defaults = Field(default_factory=Defaults)
    """Defaults for every link."""
    nodes: Annotated[dict[NodeName, Node], BeforeValidator(_nodes)] = Field(
        default_factory=dict, json_schema_extra=_nullable_values, max_length=MAX_NODES
    )
    """Nodes by name, in addition to the builder's (a builder's node cannot be redefined)."""
    links: Annotated[list[Link], Field(max_length=MAX_LINKS)] = Field(default_factory=list)
    """Links, after the builder's."""
