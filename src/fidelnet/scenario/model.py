"""The scenario file format as pydantic models: topology, setup, traffic, checks.

A scenario declares a topology (a builder, nodes, links), setup steps run in nodes,
traffic (``pktgen``, ``iperf``, ``ping``, ``zero_loss``) and pass/fail checks on it.
The file format is documented in ``docs/scenarios.md``; this module is its single
source of truth, and ``schemas/scenario.schema.json`` is generated from it.

Every model forbids unknown keys and is strict about types (YAML ``"5"`` is not
the number 5). Quantities are kept as written (``"10kpps"``, ``"2s"``, ``"0.1%"``)
and checked when the model is built; typed properties give them in base units for
the runner: ``rate_pps``, ``duration_s``, ``max_ratio``, ``max_ns``, ``min_bps``...

Validating a :class:`Scenario` also checks what a single field cannot: names are
unique, every node, traffic and check a scenario refers to exists, a check fits its
traffic's type, and the topology (built with :mod:`fidelnet.topology`, no kernel)
passes :func:`fidelnet.topology.validate.problems`. Those problems are raised
together as one :class:`~fidelnet.scenario.errors.ScenarioError`. Read files with
:func:`fidelnet.scenario.load`, which adds line and column to every problem.
"""

from __future__ import annotations

import copy
import math
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path as FsPath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    GetJsonSchemaHandler,
    PrivateAttr,
    Tag,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from fidelnet.errors import UnitError, ValidationError
from fidelnet.links.params import parse_params
from fidelnet.measure import iperf3, pktgen
from fidelnet.measure.tcp import MIN_MEASURED_S, MIN_WARMUP_S
from fidelnet.scenario.errors import NO_VALUE, Path, Problem, ScenarioError
from fidelnet.topology import builders
from fidelnet.topology.spec import LinkParams, TopologySpec
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate, parse_size
from fidelnet.topology.validate import NAME_RULE

if TYPE_CHECKING:
    from fidelnet.scenario.topology import Built

__all__ = [
    "BUILDERS",
    "CHECK_TRAFFIC",
    "CHECK_TYPES",
    "NODE_BACKENDS",
    "PPS_UNITS",
    "TRAFFIC_TYPES",
    "Builder",
    "Check",
    "CommandCheck",
    "Defaults",
    "FileSpec",
    "FileStep",
    "GoodputCheck",
    "Iperf",
    "JainCheck",
    "LatencyCheck",
    "Link",
    "LinkParamsModel",
    "LossCheck",
    "LossModel",
    "Node",
    "Ping",
    "Pktgen",
    "ReachabilityCheck",
    "RunStep",
    "Scenario",
    "SetupStep",
    "Topology",
    "Traffic",
    "TreeArgs",
    "ZeroLoss",
    "ZeroLossRateCheck",
    "parse_pps",
]

# --- packet rates -------------------------------------------------------------------------

PPS_UNITS: dict[str, float] = {"pps": 1.0, "kpps": 1e3, "Mpps": 1e6}
"""Packet-rate units, spelled exactly so (``10kpps``, ``1.5Mpps``)."""

_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_PPS_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[A-Za-z]*)\s*$")


def parse_pps(field: str, text: str | float | int) -> float:
    """Parse a packet rate such as ``"10kpps"`` into packets per second.

    The unit is required and case-sensitive: ``pps``, ``kpps`` or ``Mpps``. Raises
    :class:`~fidelnet.errors.UnitError` naming ``field``.
    """
    units = list(PPS_UNITS)
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise UnitError(field, "expected a packet rate such as 10kpps", text, units)
    if not isinstance(text, str):
        raise UnitError(field, "a packet rate needs a unit", text, units)
    m = _PPS_RE.match(text)
    if not m:
        raise UnitError(field, "not a number followed by a unit", text, units)
    num, unit = float(m.group("num")), m.group("unit")
    if math.isnan(num) or math.isinf(num):
        raise UnitError(field, "must be a finite number", text)
    if num < 0:
        raise UnitError(field, "must not be negative", text)
    if not unit:
        raise UnitError(field, "a packet rate needs a unit", text, units)
    if unit not in PPS_UNITS:
        raise UnitError(field, f"unknown packet-rate unit {unit!r}", text, units)
    return num * PPS_UNITS[unit]


# --- quantities kept as text, checked when read ----------------------------------------------


def _error(exc: ValidationError, sub: Path = ()) -> PydanticCustomError:
    """A fidelnet error as a pydantic one; the loader reads ``choices`` and ``sub``."""
    ctx: dict[str, Any] = {"problem": exc.problem, "choices": exc.choices}
    if sub:
        ctx["sub"] = sub
        ctx["value"] = NO_VALUE if exc.value is None else exc.value
    return PydanticCustomError("fidelnet", "{problem}", ctx)


def _fail(
    problem: str, choices: tuple[str, ...] = (), *, value: object = None, show: bool = True
) -> PydanticCustomError:
    """An error about the value being validated (``show=False``: do not repeat the value)."""
    ctx: dict[str, Any] = {"problem": problem, "choices": choices}
    if not show:
        ctx["value"] = NO_VALUE
    elif value is not None:
        ctx["value"] = value
    return PydanticCustomError("fidelnet", "{problem}", ctx)


def _fail_at(sub: Path, problem: str, value: object) -> PydanticCustomError:
    """An error about the key ``sub`` of the model being validated."""
    ctx = {"problem": problem, "choices": (), "sub": sub, "value": value}
    return PydanticCustomError("fidelnet", "{problem}", ctx)


_Parser = Callable[[str, Any], float]


def _quantity(parse: _Parser, example: str, *, positive: bool = False) -> Callable[..., Any]:
    """A before-validator: the value must parse with ``parse`` (and be > 0 if ``positive``)."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _fail(f"expected a quantity with a unit, such as {example}")
        try:
            parsed = parse(info.field_name or "value", value)
        except ValidationError as exc:
            raise _error(exc) from None
        if positive and parsed <= 0:
            raise _fail("must be greater than zero")
        return float(value) if isinstance(value, int) else value

    return check


def _duration(field: str, value: Any) -> float:
    return parse_duration(field, value)


def _rate(field: str, value: Any) -> float:
    return parse_rate(field, value)


def _percent(field: str, value: Any) -> float:
    return parse_percent(field, value)


def _size(field: str, value: Any) -> float:
    return float(parse_size(field, value))


_NUMBER = r"^\s*\+?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
"""A non-negative number at the start of a quantity, for the schema's patterns."""


class _JsonSchema:
    """The JSON Schema of a type, given as a dict; a fresh copy for every use (pydantic
    fills in a field's default and description in the dict it gets)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def __get_pydantic_json_schema__(
        self, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return copy.deepcopy(self.schema)


def _text_schema(examples: list[Any]) -> _JsonSchema:
    return _JsonSchema(
        {"type": "string", "pattern": _NUMBER + r"\s*[A-Za-zµ/]+\s*$", "examples": examples}
    )


_PERCENT_SCHEMA = _JsonSchema(
    {
        "anyOf": [
            {"type": "string", "pattern": _NUMBER + r"\s*%?\s*$"},
            {"type": "number", "minimum": 0, "maximum": 100},
        ],
        "examples": ["0%", "0.1%", 5],
    }
)

Duration = Annotated[
    str,
    BeforeValidator(_quantity(_duration, "2s")),
    _text_schema(["2s", "500ms", "100us"]),
]
"""A duration with its unit: ``s``, ``ms``, ``us``, ``ns``, ``min``."""
PositiveDuration = Annotated[
    str,
    BeforeValidator(_quantity(_duration, "2s", positive=True)),
    _text_schema(["2s", "500ms"]),
]
"""A duration greater than zero."""
Rate = Annotated[
    str,
    BeforeValidator(_quantity(_rate, "10Mbit")),
    _text_schema(["10Mbit", "1Gbit", "9.5Mbps"]),
]
"""A bit rate with its unit: ``bit``, ``kbit``, ``Mbit``, ``Gbit``, ``Mbps``, ``MBps``..."""
PacketRate = Annotated[
    str,
    BeforeValidator(_quantity(parse_pps, "10kpps", positive=True)),
    _JsonSchema(
        {
            "type": "string",
            "pattern": _NUMBER + r"\s*(pps|kpps|Mpps)\s*$",
            "examples": ["10kpps", "1.5Mpps", "500pps"],
        }
    ),
]
"""A packet rate greater than zero: ``pps``, ``kpps``, ``Mpps``."""
Percent = Annotated[str | float, BeforeValidator(_quantity(_percent, "0.1%")), _PERCENT_SCHEMA]
"""A percentage, 0..100: ``"0.1%"`` or a bare number meaning percent."""

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_NODE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise _fail("names contain only letters, digits, '_', '.' and '-'")
    return value


def _node_name(value: str) -> str:
    if not _NODE_RE.fullmatch(value) or len(value) > 64:
        raise _fail(NAME_RULE)
    return value


Name = Annotated[
    str, AfterValidator(_name), _JsonSchema({"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"})
]
"""A scenario, traffic or check name: letters, digits, ``_``, ``.`` and ``-``."""
NodeName = Annotated[
    str,
    AfterValidator(_node_name),
    _JsonSchema({"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9_]{0,63}$"}),
]
"""A node name: a letter, then letters, digits and ``_``; at most 64 characters."""


def _argv(value: Any) -> Any:
    """Argument lists only; numbers become text (``[ping, -c, 3]``)."""
    if isinstance(value, str):
        try:
            suggestion = "[" + ", ".join(shlex.split(value)) + "]"
        except ValueError:
            suggestion = "[program, arg, ...]"
        raise _fail(
            "must be a list of arguments (argv), not a shell string; "
            f"write it as a list: {suggestion}"
        )
    if isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, bool) or v is None:
                what = "null" if v is None else f"the boolean {str(v).lower()}"
                raise _fail_at((i,), f"YAML reads this as {what}, not as text: quote it", v)
        return [str(v) if isinstance(v, int | float) else v for v in value]
    return value


Argv = Annotated[
    list[str],
    BeforeValidator(_argv),
    Field(min_length=1),
]
"""A program and its arguments as a list: ``[ip, route, show]``. Never a shell line."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, use_attribute_docstrings=True, validate_default=False
    )


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
    queue: Literal["droptail", "hifi"] | None = None
    """``droptail`` (default) or ``hifi``."""
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


BUILDERS: tuple[str, ...] = ("linear", "line", "tree", "single", "dumbbell")
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

    @model_validator(mode="after")
    def _exactly_one(self) -> Builder:
        given = [name for name in BUILDERS if getattr(self, name) is not None]
        if len(given) != 1:
            what = "none" if not given else ", ".join(given)
            raise _fail(f"give exactly one builder (given: {what})", BUILDERS, show=False)
        return self

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
        assert self.dumbbell is not None
        return builders.dumbbell(self.dumbbell)


NODE_BACKENDS: tuple[str, ...] = ("netns",)
"""Node backends implemented today."""
_PLANNED_BACKENDS = ("cgroup", "qemu")


def _node_backend(value: Any) -> Any:
    if value in _PLANNED_BACKENDS:
        raise _fail(f"node backend {value!r} is not yet supported", NODE_BACKENDS)
    return value


class Node(_Model):
    """A node the scenario adds to the builder's (if any). ``lg: {}`` or ``lg:`` (empty)
    is a host with every default."""

    kind: Literal["host", "switch", "router"] = "host"
    """``host`` (default), ``switch`` (a bridge) or ``router`` (a host that forwards)."""
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
    """Spanning tree (switches only)."""
    backend: Annotated[Literal["netns"], BeforeValidator(_node_backend)] = "netns"
    """How the node is made: ``netns`` (a network namespace); ``cgroup``, ``qemu`` planned."""


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
    backend: Literal["auto", "tc", "engine"] | None = None
    """``auto``, ``tc`` or ``engine`` (default: ``topology.link_backend``)."""


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
    link_backend: Literal["auto", "tc", "engine"] = "auto"
    """Default link backend: ``auto`` (tc where it can, the engine otherwise), ``tc``,
    ``engine``."""
    ip_base: str = "10.0.0.0/8"
    """Network that hosts without an address get theirs from."""
    auto_routes: bool | None = None
    """Static shortest-path routes between routed nodes (default: the builder's choice,
    on for ``line``; otherwise off)."""
    auto_static_arp: bool = False
    """Fill every host's ARP table before traffic starts."""
    defaults: Defaults = Field(default_factory=Defaults)
    """Defaults for every link."""
    nodes: Annotated[dict[NodeName, Node], BeforeValidator(_nodes)] = Field(
        default_factory=dict, json_schema_extra=_nullable_values
    )
    """Nodes by name, in addition to the builder's (a builder's node cannot be redefined)."""
    links: list[Link] = Field(default_factory=list)
    """Links, after the builder's."""


# --- setup ----------------------------------------------------------------------------------

_MODE_RE = re.compile(r"0?[0-7]{3}|[0-7]{4}")


def _file_mode(value: Any) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        raise _fail(
            f'write the mode as a quoted string such as "0644" (YAML reads an unquoted '
            f"0644 as the number {0o644})"
        )
    if isinstance(value, str) and not _MODE_RE.fullmatch(value):
        raise _fail('must be an octal file mode such as "0644"')
    return value


def _absolute(value: str) -> str:
    if not value.startswith("/"):
        raise _fail("must be an absolute path")
    return value


class FileSpec(_Model):
    """A file the setup writes."""

    path: Annotated[str, AfterValidator(_absolute)]
    """Absolute path of the file."""
    content: str
    """Its whole content (text)."""
    mode: Annotated[str, BeforeValidator(_file_mode)] = "0644"
    """Permissions, an octal string: ``"0644"`` (quote it)."""

    @property
    def mode_bits(self) -> int:
        """``mode`` as a number (``0o644``)."""
        return int(self.mode, 8)


class RunStep(_Model):
    """Run a program in a node; the scenario fails if it exits otherwise than expected."""

    node: str
    """Where to run it."""
    run: Argv
    """The program and its arguments as a list (never a shell string)."""
    expect_exit: Annotated[int, Field(ge=0, le=255)] = 0
    """The exit code that counts as success (default 0)."""
    timeout: PositiveDuration = "10s"
    """How long it may run (default 10s)."""

    @property
    def timeout_s(self) -> float:
        return parse_duration("timeout", self.timeout)


class FileStep(_Model):
    """Write a file before the traffic starts."""

    node: str
    """The node whose view of the file system the file is written in."""
    file: FileSpec
    """Path, content and mode."""


def _setup_kind(value: Any) -> str | None:
    if isinstance(value, dict):
        if "run" in value and "file" not in value:
            return "run"
        if "file" in value and "run" not in value:
            return "file"
        return None
    if isinstance(value, RunStep):
        return "run"
    if isinstance(value, FileStep):
        return "file"
    return None


SetupStep = Annotated[
    Annotated[RunStep, Tag("run")] | Annotated[FileStep, Tag("file")],
    Discriminator(
        _setup_kind,
        custom_error_type="setup_kind",
        custom_error_message="a setup step has exactly one of run or file",
    ),
]
"""A :class:`RunStep` (has ``run``) or a :class:`FileStep` (has ``file``)."""


# --- traffic --------------------------------------------------------------------------------

_Pair = Annotated[list[str], Field(min_length=2, max_length=2)]


class Pktgen(_Model):
    """UDP packets from ``fidelnet-pktgen``: loss, one-way latency, received rate."""

    name: Name
    """Unique among the traffic; checks refer to it."""
    type: Literal["pktgen"]
    src: str
    """Sending node."""
    dst: str
    """Receiving node."""
    rate: PacketRate
    """Offered rate over all flows: ``10kpps``, ``1Mpps``."""
    size: Annotated[int, Field(ge=pktgen.MIN_SIZE, le=pktgen.MAX_SIZE)] = 64
    """Ethernet frame size with FCS in bytes, 64..1518 (64 = 84 B on the wire)."""
    duration: PositiveDuration = "2s"
    """How long to send (default 2s)."""
    pattern: Literal["cbr", "burst", "poisson"] = "cbr"
    """``cbr`` (default), ``burst`` (bursts of ``burst`` packets) or ``poisson``."""
    burst: Annotated[int, Field(ge=1)] = 100
    """Packets per burst for the ``burst`` pattern."""
    flows: Annotated[int, Field(ge=1, le=1024)] = 1
    """Flows (destination ports), 1..1024."""
    mode: Literal["udp", "gso", "packet"] = "udp"
    """Sender mode: ``udp`` (default), ``gso`` or ``packet``."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Seed of the ``poisson`` pattern."""

    @property
    def rate_pps(self) -> float:
        return parse_pps("rate", self.rate)

    @property
    def duration_s(self) -> float:
        return parse_duration("duration", self.duration)

    def traffic_spec(self) -> pktgen.TrafficSpec:
        """What :func:`fidelnet.measure.udp` sends."""
        return pktgen.TrafficSpec(
            self.rate_pps,
            self.size,
            self.duration_s,
            self.pattern,
            self.burst,
            self.flows,
            self.seed,
            mode=self.mode,
        )

    @model_validator(mode="after")
    def _check(self) -> Pktgen:
        if self.rate_pps > pktgen.MAX_RATE:
            raise _fail_at(("rate",), f"at most {pktgen.MAX_RATE / 1e6:g}Mpps", self.rate)
        if self.duration_s > 3600:
            raise _fail_at(("duration",), "at most 3600s", self.duration)
        return self

    def nodes(self) -> Iterator[tuple[Path, str]]:
        yield ("src",), self.src
        yield ("dst",), self.dst


def _window(value: Any) -> Any:
    if value in ("auto", "none"):
        return value
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _fail(
            "must be auto, none or a size such as 256KiB", ("auto", "none", "SIZE")
        ) from None
    try:
        size = parse_size("window", value)
    except ValidationError:
        raise _fail(
            "must be auto, none or a size such as 256KiB", ("auto", "none", "SIZE")
        ) from None
    if size < 1:
        raise _fail("must be a positive size")
    return value


class Iperf(_Model):
    """TCP flows with iperf3, measured at the receivers (:func:`fidelnet.measure.tcp`)."""

    name: Name
    """Unique among the traffic; checks refer to it."""
    type: Literal["iperf"]
    pairs: Annotated[list[_Pair], Field(min_length=1)]
    """One flow per ``[src, dst]`` pair, all at once."""
    duration: PositiveDuration = "10s"
    """Whole seconds each client sends, at least the warm-up plus 1 s (default 10s)."""
    warmup: Duration | None = None
    """Seconds dropped at the start (default max(1s, 4 RTT))."""
    interval: PositiveDuration = "100ms"
    """Report interval, 100ms..60s."""
    window: Annotated[
        str | int,
        BeforeValidator(_window),
        _JsonSchema(
            {
                "anyOf": [
                    {"enum": ["auto", "none"]},
                    {"type": "string"},
                    {"type": "integer", "minimum": 1},
                ],
                "examples": ["auto", "none", "4MiB"],
            }
        ),
    ] = "none"
    """``none`` (iperf3's default), ``auto`` (each flow's share of the bottleneck's
    bandwidth-delay product) or a size (``256KiB``) for every flow."""
    bidirectional: bool = False
    """Also a flow ``dst -> src`` for every pair (independent sessions)."""

    @property
    def duration_s(self) -> float:
        return parse_duration("duration", self.duration)

    @property
    def warmup_s(self) -> float | None:
        return None if self.warmup is None else parse_duration("warmup", self.warmup)

    @property
    def interval_s(self) -> float:
        return parse_duration("interval", self.interval)

    @property
    def window_bytes(self) -> int | None:
        """The ``-w`` size for every flow, or None (``auto`` and ``none``)."""
        if self.window in ("auto", "none"):
            return None
        return parse_size("window", self.window)

    @property
    def apply_window(self) -> bool:
        """True for ``window: auto``."""
        return self.window == "auto"

    @property
    def flow_pairs(self) -> list[tuple[str, str]]:
        """``pairs`` as tuples, without the reverse flows of ``bidirectional``."""
        return [(p[0], p[1]) for p in self.pairs]

    @property
    def flow_count(self) -> int:
        """Flows measured (twice the pairs when bidirectional)."""
        return len(self.pairs) * (2 if self.bidirectional else 1)

    @model_validator(mode="after")
    def _check(self) -> Iperf:
        seconds = self.duration_s
        if seconds != int(seconds):
            raise _fail_at(("duration",), "must be whole seconds (iperf3's -t)", self.duration)
        warm = MIN_WARMUP_S if self.warmup_s is None else self.warmup_s
        if seconds - warm < MIN_MEASURED_S:
            raise _fail_at(
                ("duration",),
                f"must exceed the warm-up ({warm:g}s) by at least {MIN_MEASURED_S:g}s",
                self.duration,
            )
        if not iperf3.MIN_INTERVAL_S <= self.interval_s <= iperf3.MAX_INTERVAL_S:
            raise _fail_at(
                ("interval",),
                f"iperf3 reports every {iperf3.MIN_INTERVAL_S:g}s to {iperf3.MAX_INTERVAL_S:g}s",
                self.interval,
            )
        return self

    def nodes(self) -> Iterator[tuple[Path, str]]:
        for i, pair in enumerate(self.pairs):
            for j, node in enumerate(pair):
                yield ("pairs", i, j), node


def _between(value: Any) -> Any:
    if isinstance(value, str) and value != "all":
        raise _fail("must be all or a list of [src, dst] pairs", ("all", "[[src, dst], ...]"))
    return value


class Ping(_Model):
    """ICMP echo between nodes: which pairs reach each other."""

    name: Name
    """Unique among the traffic; checks refer to it."""
    type: Literal["ping"]
    between: Annotated[Literal["all"] | list[_Pair], BeforeValidator(_between)] = "all"
    """``all`` (every ordered pair of hosts and routers) or ``[[src, dst], ...]``."""
    count: Annotated[int, Field(ge=1)] = 3
    """Echo requests per pair."""
    interval: PositiveDuration = "200ms"
    """Time between requests."""
    timeout: PositiveDuration = "1s"
    """How long to wait for each reply."""

    @property
    def interval_s(self) -> float:
        return parse_duration("interval", self.interval)

    @property
    def timeout_s(self) -> float:
        return parse_duration("timeout", self.timeout)

    def pairs_in(self, spec: TopologySpec) -> list[tuple[str, str]]:
        """The (src, dst) pairs to ping in ``spec``: ``all`` is every ordered pair of
        hosts and routers."""
        if self.between == "all":
            ends = [n.name for n in spec.nodes.values() if n.kind in ("host", "router")]
            return [(a, b) for a in ends for b in ends if a != b]
        return [(p[0], p[1]) for p in self.between]

    def nodes(self) -> Iterator[tuple[Path, str]]:
        if self.between != "all":
            for i, pair in enumerate(self.between):
                for j, node in enumerate(pair):
                    yield ("between", i, j), node


class ZeroLoss(_Model):
    """RFC 2544 throughput by binary search: NDR (no loss) and PDR (loss ≤ ``pdr_loss``)."""

    name: Name
    """Unique among the traffic; checks refer to it."""
    type: Literal["zero_loss"]
    src: str
    """Sending node."""
    dst: str
    """Receiving node."""
    low: PacketRate = "1kpps"
    """Lowest rate tried (default 1kpps)."""
    high: PacketRate = "1Mpps"
    """Highest rate tried, and the first trial (default 1Mpps)."""
    trial: PositiveDuration = "1s"
    """Length of each trial (default 1s)."""
    resolution: PacketRate | None = None
    """Stop when the bracket is this narrow (default 1% of ``high``)."""
    pdr_loss: Percent = "0.5%"
    """Loss allowed for the PDR (default 0.5%)."""
    size: Annotated[int, Field(ge=pktgen.MIN_SIZE, le=pktgen.MAX_SIZE)] = 64
    """Frame size with FCS, 64..1518."""
    pattern: Literal["cbr", "burst", "poisson"] = "cbr"
    """Traffic pattern of each trial."""
    burst: Annotated[int, Field(ge=1)] = 100
    """Packets per burst for the ``burst`` pattern."""
    mode: Literal["udp", "gso", "packet"] = "udp"
    """Sender mode."""
    max_trials: Annotated[int, Field(ge=2)] = 40
    """Most trials the search may run."""

    @property
    def low_pps(self) -> float:
        return parse_pps("low", self.low)

    @property
    def high_pps(self) -> float:
        return parse_pps("high", self.high)

    @property
    def trial_s(self) -> float:
        return parse_duration("trial", self.trial)

    @property
    def resolution_pps(self) -> float:
        """The resolution, ``high / 100`` when not given."""
        if self.resolution is None:
            return self.high_pps / 100
        return parse_pps("resolution", self.resolution)

    @property
    def pdr_loss_ratio(self) -> float:
        """``pdr_loss`` as a ratio (0.005 for 0.5%)."""
        return parse_percent("pdr_loss", self.pdr_loss) / 100

    @model_validator(mode="after")
    def _check(self) -> ZeroLoss:
        if not self.low_pps < self.high_pps:
            raise _fail_at(("low",), f"must be below high ({self.high})", self.low)
        if self.high_pps > pktgen.MAX_RATE:
            raise _fail_at(("high",), f"at most {pktgen.MAX_RATE / 1e6:g}Mpps", self.high)
        if not self.resolution_pps < self.high_pps - self.low_pps:
            raise _fail_at(("resolution",), "must be smaller than high - low", self.resolution)
        if self.pdr_loss_ratio >= 1:
            raise _fail_at(("pdr_loss",), "must be below 100%", self.pdr_loss)
        return self

    def nodes(self) -> Iterator[tuple[Path, str]]:
        yield ("src",), self.src
        yield ("dst",), self.dst


Traffic = Annotated[Pktgen | Iperf | Ping | ZeroLoss, Field(discriminator="type")]
"""One traffic item; ``type`` says which."""
TRAFFIC_TYPES: tuple[str, ...] = ("pktgen", "iperf", "ping", "zero_loss")


# --- checks ---------------------------------------------------------------------------------


class _CheckBase(_Model):
    name: Name | None = None
    """Unique among the checks (default: the type and what it checks, ``loss-load``)."""

    def default_name(self) -> str:
        target = getattr(self, "traffic", None) or getattr(self, "node", "")
        return f"{getattr(self, 'type', 'check')}-{target}"

    @property
    def key(self) -> str:
        """The name, given or generated (a validated :class:`Scenario` sets every name)."""
        return self.name if self.name is not None else self.default_name()


class ReachabilityCheck(_CheckBase):
    """Pings of a ``ping`` traffic arrived."""

    type: Literal["reachability"]
    traffic: str
    """A ``ping`` traffic."""
    max_loss: Percent = "0%"
    """Largest share of echo requests that may go unanswered (default 0%)."""

    @property
    def max_loss_ratio(self) -> float:
        return parse_percent("max_loss", self.max_loss) / 100


class LossCheck(_CheckBase):
    """Packet loss of a ``pktgen`` traffic."""

    type: Literal["loss"]
    traffic: str
    """A ``pktgen`` traffic."""
    max: Percent
    """Largest loss allowed: ``0%``, ``0.1%``."""

    @property
    def max_ratio(self) -> float:
        return parse_percent("max", self.max) / 100


class LatencyCheck(_CheckBase):
    """A one-way latency percentile of a ``pktgen`` traffic."""

    type: Literal["latency"]
    traffic: str
    """A ``pktgen`` traffic."""
    percentile: Annotated[float, Field(gt=0, le=100)]
    """Which percentile, in (0, 100]: 50, 99, 99.9, 100 (the maximum)."""
    max: PositiveDuration
    """Largest latency allowed at that percentile: ``1ms``."""

    @property
    def max_s(self) -> float:
        return parse_duration("max", self.max)

    @property
    def max_ns(self) -> int:
        return round(self.max_s * 1e9)


class GoodputCheck(_CheckBase):
    """TCP goodput of an ``iperf`` traffic, measured at the receivers."""

    type: Literal["goodput"]
    traffic: str
    """An ``iperf`` traffic."""
    min: Rate
    """Least goodput: ``9Mbit``."""
    flow: Annotated[int, Field(ge=0)] | None = None
    """Only this flow (0-based, in ``pairs`` order, reverse flows after); default: every
    flow must reach ``min``."""

    @property
    def min_bps(self) -> float:
        return parse_rate("min", self.min)


class JainCheck(_CheckBase):
    """Jain's fairness index over the flows of an ``iperf`` traffic."""

    type: Literal["jain"]
    traffic: str
    """An ``iperf`` traffic with at least two flows."""
    min: Annotated[float, Field(ge=0, le=1)]
    """Least index, 0..1 (1: perfectly fair)."""


class ZeroLossRateCheck(_CheckBase):
    """The rate a ``zero_loss`` search found."""

    type: Literal["zero_loss_rate"]
    traffic: str
    """A ``zero_loss`` traffic."""
    min: PacketRate
    """Least rate: ``100kpps``."""
    which: Literal["ndr", "pdr"] = "ndr"
    """``ndr`` (no loss, default) or ``pdr`` (loss ≤ the traffic's ``pdr_loss``)."""

    @property
    def min_pps(self) -> float:
        return parse_pps("min", self.min)


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise _fail(f"not a valid regular expression: {exc}") from None
    return value


class CommandCheck(_CheckBase):
    """A command run in a node after the traffic: its exit code and output."""

    type: Literal["command"]
    node: str
    """Where to run it."""
    run: Argv
    """The program and its arguments as a list."""
    exit_code: Annotated[int, Field(ge=0, le=255)] | None = 0
    """Required exit code (default 0); null accepts any."""
    output: Annotated[str, AfterValidator(_regex)] | None = None
    """A regular expression (Python syntax) its standard output must contain."""
    timeout: PositiveDuration = "10s"
    """How long it may run."""

    @property
    def output_re(self) -> re.Pattern[str] | None:
        return None if self.output is None else re.compile(self.output)

    @property
    def timeout_s(self) -> float:
        return parse_duration("timeout", self.timeout)


Check = Annotated[
    ReachabilityCheck
    | LossCheck
    | LatencyCheck
    | GoodputCheck
    | JainCheck
    | ZeroLossRateCheck
    | CommandCheck,
    Field(discriminator="type"),
]
"""One check; ``type`` says which."""
CHECK_TYPES: tuple[str, ...] = (
    "reachability",
    "loss",
    "latency",
    "goodput",
    "jain",
    "zero_loss_rate",
    "command",
)
CHECK_TRAFFIC: dict[str, str] = {
    "reachability": "ping",
    "loss": "pktgen",
    "latency": "pktgen",
    "goodput": "iperf",
    "jain": "iperf",
    "zero_loss_rate": "zero_loss",
}
"""The traffic type each traffic check needs."""


# --- the scenario ---------------------------------------------------------------------------


class Scenario(_Model):
    """A whole scenario file. Build it with :func:`fidelnet.scenario.load` (positions in
    errors) or ``Scenario.model_validate(mapping)``; either raises
    :class:`~fidelnet.scenario.errors.ScenarioError` for problems across fields."""

    name: Name
    """What the scenario is called: letters, digits, ``_``, ``.``, ``-``."""
    description: str | None = None
    """Free text."""
    seed: Annotated[int, Field(ge=0)] | None = None
    """Seed of every link's random choices (loss, jitter); default: random, recorded."""
    repeat: Annotated[int, Field(ge=1)] = 1
    """Run the traffic and the checks this many times (default 1)."""
    topology: Topology
    """The network."""
    setup: list[SetupStep] = Field(default_factory=list)
    """Steps run in order after the network is up, before the traffic."""
    traffic: list[Traffic] = Field(default_factory=list)
    """Measurements, run in order."""
    checks: list[Check] = Field(default_factory=list)
    """Pass/fail checks on the traffic's results and on commands."""

    _base_dir: FsPath | None = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _cross_check(self, info: ValidationInfo) -> Scenario:
        context = info.context if isinstance(info.context, dict) else {}
        base = context.get("base_dir")
        self._base_dir = FsPath(base) if base is not None else None
        found = self.problems()
        if found:
            raise ScenarioError(found)
        return self

    # -- typed access ------------------------------------------------------------------------

    @property
    def base_dir(self) -> FsPath | None:
        """The directory relative trace files are read from (the scenario file's)."""
        return self._base_dir

    def traffic_named(self, name: str) -> Pktgen | Iperf | Ping | ZeroLoss:
        """The traffic called ``name``; KeyError if there is none."""
        for item in self.traffic:
            if item.name == name:
                return item
        raise KeyError(name)

    def topology_spec(self) -> TopologySpec:
        """The topology as a :class:`TopologySpec` (a new one each call; no I/O besides
        reading trace files). The scenario was validated, so this cannot fail."""
        from fidelnet.scenario.topology import build

        return build(self).spec

    # -- checks across fields ----------------------------------------------------------------

    def problems(self) -> list[Problem]:
        """Every problem across fields (no positions), names of checks filled in first."""
        from fidelnet.scenario.topology import build, spec_problems

        self._name_checks()
        built = build(self)
        found = list(built.problems)
        if not built.nodes and not built.problems:
            found.append(Problem("declares no nodes: give a builder or nodes", ("topology",)))
        found += _unique(self.traffic, "traffic")
        found += _unique(self.checks, "checks")
        if built.builder_ok:
            found += self._reference_problems(built)
        placed = {p.path for p in found}
        found += [p for p in spec_problems(self, built) if p.path not in placed]
        return found

    def _name_checks(self) -> None:
        taken = {c.name for c in self.checks if c.name is not None}
        for check in self.checks:
            if check.name is not None:
                continue
            base = check.default_name()
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base}-{n}"
            taken.add(name)
            check.name = name

    def _reference_problems(self, built: Built) -> list[Problem]:
        found: list[Problem] = []
        kinds = {name: node.kind for name, node in built.spec.nodes.items()}

        def node_ref(path: Path, name: str, runs: str | None = None) -> None:
            if name not in kinds:
                found.append(_unknown(path, name, list(kinds), "node"))
            elif runs is not None and kinds[name] == "switch":
                found.append(
                    Problem(
                        f"{name} is a switch; {runs} run in hosts and routers",
                        path,
                        value=name,
                    )
                )

        for i, link in enumerate(self.topology.links):
            for side in ("a", "b"):
                node_ref(("topology", "links", i, side), getattr(link, side))
        for i, step in enumerate(self.setup):
            node_ref(("setup", i, "node"), step.node, "setup steps")
        traffic_types: dict[str, str] = {}
        for i, item in enumerate(self.traffic):
            traffic_types.setdefault(item.name, item.type)
            for sub, name in item.nodes():
                node_ref(("traffic", i, *sub), name, "traffic sources and sinks")
            found += _pair_problems(("traffic", i), item)
        for i, check in enumerate(self.checks):
            if isinstance(check, CommandCheck):
                node_ref(("checks", i, "node"), check.node, "commands")
                continue
            found += _check_target(("checks", i), check, traffic_types, self)
        return found


def _unknown(path: Path, name: str, known: list[str], what: str) -> Problem:
    import difflib

    close = difflib.get_close_matches(name, known, n=1, cutoff=0.7)
    message = f"unknown {what}"
    if close:
        message += f", did you mean {close[0]!r}?"
    shown = tuple(known[:12]) + (("...",) if len(known) > 12 else ())
    return Problem(message, path, value=name, choices=shown)


def _unique(items: list[Any], where: str) -> list[Problem]:
    found: list[Problem] = []
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        name = item.name
        if name in first:
            found.append(
                Problem(
                    f"duplicate name: {where}[{first[name]}] is already called {name!r}",
                    (where, i, "name"),
                    value=name,
                )
            )
        else:
            first[name] = i
    return found


def _pair_problems(path: Path, item: Pktgen | Iperf | Ping | ZeroLoss) -> list[Problem]:
    found: list[Problem] = []
    if isinstance(item, Pktgen | ZeroLoss) and item.src == item.dst:
        found.append(Problem("src and dst must be different nodes", (*path, "dst"), value=item.dst))
    pairs: list[list[str]] = []
    key = ""
    if isinstance(item, Iperf):
        pairs, key = item.pairs, "pairs"
    elif isinstance(item, Ping) and item.between != "all":
        pairs, key = item.between, "between"
    for j, pair in enumerate(pairs):
        if pair[0] == pair[1]:
            found.append(Problem("a pair needs two different nodes", (*path, key, j), value=pair))
    return found


def _check_target(
    path: Path, check: Any, traffic_types: dict[str, str], scenario: Scenario
) -> list[Problem]:
    name: str = check.traffic
    if name not in traffic_types:
        return [_unknown((*path, "traffic"), name, list(traffic_types), "traffic")]
    needed = CHECK_TRAFFIC[check.type]
    if traffic_types[name] != needed:
        fitting = tuple(n for n, t in traffic_types.items() if t == needed)
        return [
            Problem(
                f"a {check.type} check needs {needed} traffic; {name!r} is "
                f"{traffic_types[name]} traffic",
                (*path, "traffic"),
                value=name,
                choices=fitting,
            )
        ]
    if isinstance(check, GoodputCheck | JainCheck):
        target = scenario.traffic_named(name)
        assert isinstance(target, Iperf)
        if (
            isinstance(check, GoodputCheck)
            and check.flow is not None
            and check.flow >= target.flow_count
        ):
            return [
                Problem(
                    f"{name!r} has {target.flow_count} flow(s), numbered from 0",
                    (*path, "flow"),
                    value=check.flow,
                )
            ]
        if isinstance(check, JainCheck) and target.flow_count < 2:
            return [
                Problem(
                    f"a Jain index needs at least two flows; {name!r} has one",
                    (*path, "traffic"),
                    value=name,
                )
            ]
    return []
