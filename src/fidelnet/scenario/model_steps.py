"""What a scenario runs: ``setup`` steps and ``traffic`` (pktgen, iperf, ping, zero_loss).

Each traffic model gives its quantities in base units for the runner (``rate_pps``,
``duration_s``...) and, with ``nodes()``, the nodes it names, which
:class:`~fidelnet.scenario.model.Scenario` checks exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    model_validator,
)

from fidelnet.errors import ValidationError
from fidelnet.measure import iperf3, pktgen
from fidelnet.measure.iperf3 import MIN_MEASURED_S, MIN_WARMUP_S
from fidelnet.scenario.errors import Path
from fidelnet.scenario.fields import (
    Argv,
    Duration,
    Name,
    PacketRate,
    Percent,
    PositiveDuration,
    Regex,
    _fail,
    _fail_at,
    _JsonSchema,
    _Model,
    parse_pps,
)
from fidelnet.scenario.limits import MAX_EVENTS
from fidelnet.scenario.model_events import EventModel
from fidelnet.topology.spec import TopologySpec
from fidelnet.topology.units import parse_duration, parse_percent, parse_size

__all__ = [
    "TRAFFIC_TYPES",
    "FileSpec",
    "FileStep",
    "Iperf",
    "Ping",
    "Pktgen",
    "RunStep",
    "SetupStep",
    "Traffic",
    "ZeroLoss",
]

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
    output: Regex | None = None
    """A regular expression its standard output must contain (a route present, a
    session established)."""
    wait: PositiveDuration | None = None
    """Retry it until it succeeds or this long has passed (``30s``): a condition to
    wait for before the traffic (a port listening, a route present); how long it
    took is recorded. Default: one try."""
    interval: PositiveDuration = "500ms"
    """Time between tries when it waits."""

    @property
    def timeout_s(self) -> float:
        return parse_duration("timeout", self.timeout)

    @property
    def wait_s(self) -> float | None:
        return None if self.wait is None else parse_duration("wait", self.wait)

    @property
    def interval_s(self) -> float:
        return parse_duration("interval", self.interval)


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
    events: list[EventModel] = Field(default_factory=list, max_length=MAX_EVENTS)
    """Failures on purpose while it runs: links down, up, flapped or changed, nodes
    down or up, commands (docs/events.md); ``outage`` checks judge what each did."""

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
        for i, ev in enumerate(self.events):
            if ev.node is not None:
                yield ("events", i, "node"), ev.node
            if ev.after is not None and ev.after.node is not None:
                yield ("events", i, "after", "node"), ev.after.node

    def links(self) -> Iterator[tuple[Path, tuple[str, str]]]:
        """The links its events name."""
        for i, ev in enumerate(self.events):
            if ev.link is not None:
                yield ("events", i, "link"), (ev.link[0], ev.link[1])


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
