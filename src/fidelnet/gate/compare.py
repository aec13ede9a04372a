"""Did it get worse? A baseline result and a new one, compared knowing the noise.

Each metric is estimated with an interval from what both runs kept
(:mod:`fidelnet.gate.stats`); the two intervals give an interval for the change
(a ratio for percentiles, rates and goodput; a difference in percentage points for
loss), and the decision reads that interval against the tolerance:

=============  ==============================================================
``regressed``  the whole change interval is worse than the tolerance allows
``improved``   the whole interval is better by more than the tolerance
``same``       the whole interval lies within the tolerance
``inconclusive`` the interval straddles a tolerance bound (more samples would
               decide), or either run was untrusted, or the machines differ, or
               the data cannot bound the metric (p99.99 of 2,000 packets)
=============  ==============================================================

Each interval has the confidence asked for; the change interval joins two of them,
so its confidence is at least ``2 * confidence - 1`` (Bonferroni), said in the
output. Never a bare pass: ``same`` means the data rule out a change beyond the
tolerance.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Literal

from fidelnet.errors import ValidationError
from fidelnet.gate import stats
from fidelnet.measure.results import ResultFile, TcpResult, UdpResult, ZeroLossResult

__all__ = [
    "DECISIONS",
    "METRICS",
    "Comparison",
    "Decision",
    "Metric",
    "compare",
    "default_metrics",
    "parse_metric",
]

Decision = Literal["same", "regressed", "improved", "inconclusive"]
DECISIONS: tuple[Decision, ...] = ("same", "improved", "inconclusive", "regressed")
"""From best to worst, for a summary's worst decision."""

METRICS = ("p50", "p90", "p99", "p99.9", "p99.99", "loss", "ndr", "goodput")
DEFAULT_TOLERANCE = {"loss": 0.5, "ndr": 5.0, "goodput": 5.0}
"""Tolerances when none is given: percent for ratios, percentage points for loss;
latency percentiles 10 %."""


@dataclass(frozen=True)
class Metric:
    """What to compare and how much change is tolerated: ``tolerance`` in percent of
    the baseline (percentiles, ``ndr``, ``goodput``) or percentage points (``loss``)."""

    name: str
    tolerance: float

    @property
    def worse_when_higher(self) -> bool:
        return self.name not in ("ndr", "goodput")

    @property
    def percentile(self) -> float | None:
        return float(self.name[1:]) if self.name.startswith("p") else None

    def describe(self) -> str:
        unit = " points" if self.name == "loss" else " %"
        return f"{self.name} ±{self.tolerance:g}{unit}"


_METRIC = re.compile(r"^(?P<name>[a-z0-9.]+)(?::(?P<tol>[0-9.]+)%?)?$")


def parse_metric(text: str) -> Metric:
    """``p99``, ``p99:5%``, ``loss:0.2``, ``ndr:3%``: a metric and its tolerance."""
    m = _METRIC.match(text.strip().lower())
    if m is None or m.group("name") not in METRICS:
        raise ValidationError(
            "metric", f"must be one of {', '.join(METRICS)}, optionally :TOLERANCE", text
        )
    name = m.group("name")
    tol = m.group("tol")
    value = float(tol) if tol is not None else DEFAULT_TOLERANCE.get(name, 10.0)
    if not 0.0 <= value < 100.0:
        raise ValidationError("metric", "its tolerance must be 0..100", text)
    return Metric(name, value)


@dataclass(frozen=True)
class Comparison:
    """One metric of one result: both estimates with their intervals, the change's
    interval and the decision, with why when it is inconclusive."""

    name: str
    metric: Metric
    decision: Decision
    baseline: stats.Interval | None
    current: stats.Interval | None
    change_lo: float = math.nan
    change_hi: float = math.nan
    change_unit: str = "ratio"
    reasons: list[str] = field(default_factory=list)

    def change_text(self) -> str:
        if math.isnan(self.change_lo):
            return "-"
        if self.change_unit == "points":
            return f"{100 * self.change_lo:+.2f} .. {100 * self.change_hi:+.2f} points"
        hi = "+inf" if math.isinf(self.change_hi) else f"{100 * (self.change_hi - 1):+.1f} %"
        return f"{100 * (self.change_lo - 1):+.1f} % .. {hi}"


def default_metrics(result: object) -> list[Metric]:
    """What to compare when nothing is asked: a result's own figures."""
    if isinstance(result, UdpResult):
        names = ["p50", "p99", "loss"]
    elif isinstance(result, ZeroLossResult):
        names = ["ndr"]
    elif isinstance(result, TcpResult):
        names = ["goodput"]
    else:
        names = []
    return [parse_metric(n) for n in names]


def _decide(metric: Metric, lo: float, hi: float, unit: str) -> Decision:
    """Read a change interval against the tolerance; ``lo``/``hi`` are ratios
    (``unit`` "ratio") or differences of proportions ("points")."""
    if unit == "ratio":
        up, down = 1.0 + metric.tolerance / 100.0, 1.0 - metric.tolerance / 100.0
    else:
        up, down = metric.tolerance / 100.0, -metric.tolerance / 100.0
    if lo >= down and hi <= up:
        return "same"
    worse_lo, worse_hi = (lo, hi) if metric.worse_when_higher else (-hi, -lo)
    worse_up = up if metric.worse_when_higher else -down
    better_down = down if metric.worse_when_higher else -up
    if worse_lo > worse_up:
        return "regressed"
    if worse_hi < better_down:
        return "improved"
    return "inconclusive"


def _ratio(base: stats.Interval, now: stats.Interval) -> tuple[float, float]:
    lo = now.lo / base.hi if base.hi > 0 and math.isfinite(base.hi) else 0.0
    hi = now.hi / base.lo if base.lo > 0 else math.inf
    return lo, hi


def _estimate(result: object, metric: Metric, confidence: float) -> stats.Interval | str:
    """The metric's interval in ``result``, or why there is none."""
    pct = metric.percentile
    if pct is not None:
        if not isinstance(result, UdpResult):
            return f"{metric.name} needs a UDP (pktgen) result"
        if not result.latency.hdr or result.latency.count == 0:
            return "no latency histogram in the result"
        return stats.quantile_interval(result.latency.hdr, pct, confidence)
    if metric.name == "loss":
        if not isinstance(result, UdpResult):
            return "loss needs a UDP (pktgen) result"
        return stats.wilson_interval(result.lost, result.sent, confidence)
    if metric.name == "ndr":
        if not isinstance(result, ZeroLossResult):
            return "ndr needs a zero-loss search result"
        return stats.Interval(
            result.ndr_pps, result.ndr_pps, result.ndr_pps + result.resolution_pps, 1
        )
    if not isinstance(result, TcpResult):
        return "goodput needs a TCP result"
    series = [
        sum(f.intervals[i].goodput_bps for f in result.flows)
        for i in range(min(len(f.intervals) for f in result.flows))
        if not any(f.intervals[i].warmup for f in result.flows)
    ]
    return stats.batch_mean_interval(series, confidence)


def _machine_differs(base: ResultFile, now: ResultFile) -> list[str]:
    a, b = base.provenance.machine, now.provenance.machine
    out = []
    if (a.cpu_model, a.cpus) != (b.cpu_model, b.cpus):
        out.append(
            f"different machines: {a.cpus} x {a.cpu_model} (baseline) and "
            f"{b.cpus} x {b.cpu_model} (now)"
        )
    return out


def _untrusted(which: str, rf: ResultFile) -> list[str]:
    verdict = getattr(rf.result, "verdict", None)
    if verdict is None or verdict.level != "untrusted":
        return []
    why = "; ".join(r.message for r in verdict.problems()[:2])
    return [f"the {which} run is untrusted: {why}"]


def compare(
    name: str,
    base: ResultFile,
    now: ResultFile,
    metrics: list[Metric],
    confidence: float = 0.95,
) -> list[Comparison]:
    """One :class:`Comparison` per metric of one result file."""
    gate = _machine_differs(base, now) + _untrusted("baseline", base) + _untrusted("new", now)
    out = []
    for metric in metrics:
        b = _estimate(base.result, metric, confidence)
        c = _estimate(now.result, metric, confidence)
        if isinstance(b, str) or isinstance(c, str):
            why = b if isinstance(b, str) else str(c)
            out.append(Comparison(name, metric, "inconclusive", None, None, reasons=[why]))
            continue
        reasons = list(gate)
        if metric.name == "loss":
            lo, hi = stats.difference_interval(b, c)
            unit = "points"
        else:
            lo, hi = _ratio(b, c)
            unit = "ratio"
        if not (b.bounded and c.bounded):
            reasons.append(
                f"too few samples to bound {metric.name} ({b.n} and {c.n}): "
                "run longer or at a higher rate"
            )
        decision = _decide(metric, lo, hi, unit)
        if decision == "inconclusive" and not reasons:
            reasons.append(
                "the change's interval straddles the tolerance: more samples (a longer "
                "run, or repeat:) would decide"
            )
        if reasons:
            decision = "inconclusive"
        out.append(Comparison(name, metric, decision, b, c, lo, hi, unit, reasons))
    return out
