"""The ``checks`` of a scenario file: pass/fail verdicts on traffic and on commands.

Which traffic each check fits (:data:`CHECK_TRAFFIC`) is checked by
:class:`~fidelnet.scenario.model.Scenario`, which sees the traffic too.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from fidelnet.scenario.fields import (
    Argv,
    Name,
    PacketRate,
    Percent,
    PositiveDuration,
    Rate,
    Regex,
    _Model,
    parse_pps,
)
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate

__all__ = [
    "CHECK_TRAFFIC",
    "CHECK_TYPES",
    "REGRESSION_TRAFFIC",
    "Check",
    "CommandCheck",
    "GoodputCheck",
    "JainCheck",
    "LatencyCheck",
    "LossCheck",
    "OutageCheck",
    "ReachabilityCheck",
    "RegressionCheck",
    "ZeroLossRateCheck",
]

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


class OutageCheck(_CheckBase):
    """The outage a ``pktgen`` traffic's events caused, told from its packets: from
    the first packet lost after an event to the first received after it (several
    outages while a protocol reconverges count as one disruption)."""

    type: Literal["outage"]
    traffic: str
    """A ``pktgen`` traffic with ``events``."""
    event: str | None = None
    """One event, by name; default: every event that takes something down (the
    worst one is judged)."""
    max: PositiveDuration | None = None
    """Longest outage allowed: ``3s``."""
    lost: Annotated[int, Field(ge=0)] | None = None
    """Most packets that may be lost."""
    recovered: bool = True
    """The flow must come back (default); false accepts a flow that never does."""

    def default_name(self) -> str:
        return f"outage-{self.traffic}" + (f"-{self.event}" if self.event else "")

    @property
    def max_s(self) -> float | None:
        return None if self.max is None else parse_duration("max", self.max)


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


class CommandCheck(_CheckBase):
    """A command run in a node after the traffic: its exit code and output."""

    type: Literal["command"]
    node: str
    """Where to run it."""
    run: Argv
    """The program and its arguments as a list."""
    exit_code: Annotated[int, Field(ge=0, le=255)] | None = 0
    """Required exit code (default 0); null accepts any."""
    output: Regex | None = None
    """A regular expression (Python syntax) its standard output must contain."""
    timeout: PositiveDuration = "10s"
    """How long it may run."""
    wait: PositiveDuration | None = None
    """Retry it until it passes or this long has passed (``30s``): how long it took
    is reported ("passed after 4.2 s"). Default: one try."""
    interval: PositiveDuration = "500ms"
    """Time between tries when it waits."""

    @property
    def output_re(self) -> re.Pattern[str] | None:
        return None if self.output is None else re.compile(self.output)

    @property
    def timeout_s(self) -> float:
        return parse_duration("timeout", self.timeout)

    @property
    def wait_s(self) -> float | None:
        return None if self.wait is None else parse_duration("wait", self.wait)

    @property
    def interval_s(self) -> float:
        return parse_duration("interval", self.interval)


REGRESSION_TRAFFIC: dict[str, str] = {
    "p50": "pktgen",
    "p90": "pktgen",
    "p99": "pktgen",
    "p99.9": "pktgen",
    "p99.99": "pktgen",
    "loss": "pktgen",
    "ndr": "zero_loss",
    "goodput": "iperf",
}
"""The traffic type each metric of a ``regression`` check needs."""


class RegressionCheck(_CheckBase):
    """A figure of a traffic compared with the same traffic of a baseline (``fidelnet
    test --baseline DIR``; docs/regression.md): passes when the data show it the same
    or better within the tolerance, fails when it regressed, and is skipped with the
    reason when they cannot decide (an untrusted run, too few samples, an interval
    across the tolerance)."""

    type: Literal["regression"]
    traffic: str
    """A ``pktgen`` traffic (latency percentiles, loss), ``zero_loss`` (ndr) or
    ``iperf`` (goodput)."""
    metric: Literal["p50", "p90", "p99", "p99.9", "p99.99", "loss", "ndr", "goodput"]
    tolerance: Percent | None = None
    """The change allowed: a percentage of the baseline's value for percentiles, ndr
    and goodput (default 10 %, 5 %, 5 %), percentage points for loss (default 0.5)."""

    def default_name(self) -> str:
        return f"regression-{self.metric}-{self.traffic}"

    @property
    def tolerance_value(self) -> float | None:
        return None if self.tolerance is None else parse_percent("tolerance", self.tolerance)


Check = Annotated[
    ReachabilityCheck
    | LossCheck
    | LatencyCheck
    | GoodputCheck
    | JainCheck
    | ZeroLossRateCheck
    | OutageCheck
    | CommandCheck
    | RegressionCheck,
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
    "outage",
    "command",
    "regression",
)
CHECK_TRAFFIC: dict[str, str] = {
    "reachability": "ping",
    "loss": "pktgen",
    "latency": "pktgen",
    "goodput": "iperf",
    "jain": "iperf",
    "zero_loss_rate": "zero_loss",
    "outage": "pktgen",
    "regression": "pktgen",  # by its metric: REGRESSION_TRAFFIC
}
"""The traffic type each traffic check needs."""
