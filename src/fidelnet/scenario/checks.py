"""Judge a scenario's checks against what its traffic measured.

Each check becomes a :class:`~fidelnet.report.junit.CheckOutcome` whose
``measured`` and ``expected`` are written for people (``"1.84 ms"`` beside
``"<= 1.00 ms"``). A check whose traffic failed to run is an ``error``, never a
pass or a silent failure; the result's flags travel in ``detail``.

Every check on a timed measurement (pktgen, iperf, zero_loss) carries the
measurement's fidelity verdict. A check whose measurement is ``untrusted`` does not
pass or fail on a number known to be wrong: it becomes an ``error`` whose message
starts with ``inconclusive`` (JUnit ``type="Inconclusive"``), unless the thresholds
say ``untrusted_check: warn``, which keeps its status and adds the verdict. One
exception is sound and kept: a latency check whose only untrusted reason is engine
lateness and that passed is decided (lateness only adds latency, so the true value
passes too), and so is a loss check whose only untrusted reason is engine lateness
while the engine's queues dropped nothing (:mod:`fidelnet.fidelity.bounds`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fidelnet.fidelity.bounds import latency_decided, loss_decided
from fidelnet.fidelity.thresholds import DEFAULT, Thresholds
from fidelnet.measure import latency as lat
from fidelnet.measure.results import Flag, TcpResult, UdpResult, ZeroLossResult
from fidelnet.report.junit import CheckOutcome
from fidelnet.retry import try_until
from fidelnet.scenario import model as m

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["Gate", "PingResult", "TrafficFailure", "evaluate"]


@dataclass
class PingResult:
    """Reachability between node pairs: (sent, received) per (src, dst)."""

    pairs: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)

    @property
    def sent(self) -> int:
        return sum(s for s, _r in self.pairs.values())

    @property
    def received(self) -> int:
        return sum(r for _s, r in self.pairs.values())

    def unreachable(self) -> list[str]:
        return [f"{a}->{b}" for (a, b), (_s, r) in self.pairs.items() if r == 0]


@dataclass(frozen=True)
class TrafficFailure:
    """A traffic item that could not be measured, and why."""

    message: str


Measured = UdpResult | TcpResult | ZeroLossResult | PingResult | TrafficFailure


def _flags(flags: list[Flag]) -> str:
    return "flags: " + (", ".join(f"{f.code} ({f.message})" for f in flags) if flags else "none")


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.3f} ms" if ns >= 1e5 else f"{ns / 1e3:.1f} µs"


def _pct(ratio: float) -> str:
    return f"{100 * ratio:.4g} %"


def _rate(bps: float) -> str:
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= scale:
            return f"{bps / scale:.3f} {unit}"
    return f"{bps:.0f} bit/s"


def _outcome(
    check: m.Check, ok: bool, measured: str, expected: str, detail: str = "", t0: float = 0.0
) -> CheckOutcome:
    return CheckOutcome(
        name=check.key,
        status="passed" if ok else "failed",
        measured=measured,
        expected=expected,
        detail=detail,
        seconds=time.monotonic() - t0 if t0 else 0.0,
        classname=check.type,
    )


def _percentile_ns(result: UdpResult, percentile: float) -> int:
    summary = result.latency
    fixed = {50.0: summary.p50_ns, 90.0: summary.p90_ns, 99.0: summary.p99_ns}
    fixed.update({99.9: summary.p999_ns, 99.99: summary.p9999_ns, 100.0: summary.max_ns})
    if percentile in fixed:
        return int(fixed[percentile])
    if summary.hdr is None:
        raise ValueError("no latency histogram to read this percentile from")
    return int(lat.decode(summary.hdr).get_value_at_percentile(percentile))


def _judge(check: m.Check, got: Measured) -> CheckOutcome:
    if isinstance(check, m.ReachabilityCheck) and isinstance(got, PingResult):
        lost = 1 - got.received / got.sent if got.sent else 1.0
        bad = got.unreachable()
        detail = ("unreachable: " + ", ".join(bad[:20])) if bad else ""
        return _outcome(
            check,
            lost <= check.max_loss_ratio and got.sent > 0,
            f"{_pct(lost)} lost ({got.received}/{got.sent} received)",
            f"<= {_pct(check.max_loss_ratio)} lost",
            detail,
        )
    if isinstance(check, m.LossCheck) and isinstance(got, UdpResult):
        return _outcome(
            check,
            got.loss_ratio <= check.max_ratio and got.sent > 0,
            f"{_pct(got.loss_ratio)} ({got.lost} of {got.sent})",
            f"<= {_pct(check.max_ratio)}",
            _flags(got.flags),
        )
    if isinstance(check, m.LatencyCheck) and isinstance(got, UdpResult):
        if got.latency.count == 0:
            return _outcome(check, False, "no packets received", f"<= {_ms(check.max_ns)}")
        value_ns = _percentile_ns(got, check.percentile)
        return _outcome(
            check,
            value_ns <= check.max_ns,
            f"p{check.percentile:g} = {_ms(value_ns)}",
            f"p{check.percentile:g} <= {_ms(check.max_ns)}",
            _flags(got.flags),
        )
    if isinstance(check, m.GoodputCheck) and isinstance(got, TcpResult):
        if check.flow is not None:
            if check.flow >= len(got.flows):
                return _outcome(check, False, f"{len(got.flows)} flows", f"flow {check.flow}")
            bps = got.flows[check.flow].goodput_bps
            what = f"flow {check.flow} goodput"
        else:
            bps, what = got.total_goodput_bps, "goodput"
        return _outcome(
            check,
            bps >= check.min_bps,
            f"{what} {_rate(bps)}",
            f">= {_rate(check.min_bps)}",
            _flags(got.flags),
        )
    if isinstance(check, m.JainCheck) and isinstance(got, TcpResult):
        if got.jain is None:
            return _outcome(check, False, "one flow: no fairness index", f">= {check.min}")
        return _outcome(check, got.jain >= check.min, f"Jain {got.jain:.4f}", f">= {check.min:g}")
    if isinstance(check, m.OutageCheck) and isinstance(got, UdpResult):
        return _outage(check, got)
    if isinstance(check, m.ZeroLossRateCheck) and isinstance(got, ZeroLossResult):
        pps = got.ndr_pps if check.which == "ndr" else got.pdr_pps
        return _outcome(
            check,
            pps >= check.min_pps,
            f"{check.which.upper()} {pps / 1000:.1f} kpps",
            f">= {check.min_pps / 1000:.1f} kpps",
            _flags(got.flags),
        )
    return CheckOutcome(
        name=check.key,
        status="error",
        message=f"check {check.type} cannot judge a {type(got).__name__}",
        classname=check.type,
    )


def _ms_or(ns: int | None) -> str:
    return "-" if ns is None else _ms(ns)


def _outage(check: m.OutageCheck, got: UdpResult) -> CheckOutcome:
    """The worst outage among the events judged (one, or every breaking one)."""
    wanted = check.event
    events = [
        e
        for e in got.events
        if e.outage_s is not None and (wanted is None or e.name in (wanted, f"{wanted}:down"))
    ]
    expected = []
    if check.max_s is not None:
        expected.append(f"outage <= {check.max_s:g} s")
    if check.lost is not None:
        expected.append(f"<= {check.lost} lost")
    if check.recovered:
        expected.append("recovered")
    if not events:
        return _outcome(check, False, "no event that takes something down ran", ", ".join(expected))
    failed = [f"{e.name}: {e.error}" for e in got.events if e.error]
    worst = max(events, key=lambda e: (e.outage_s or 0.0, e.lost or 0))
    outage_s, lost = worst.outage_s or 0.0, worst.lost or 0
    ok = not failed
    if check.max_s is not None and any((e.outage_s or 0.0) > check.max_s for e in events):
        ok = False
    if check.lost is not None and any((e.lost or 0) > check.lost for e in events):
        ok = False
    if check.recovered and not all(e.recovered for e in events):
        ok = False
    measured = (
        f"outage {outage_s:.4f} s, {lost} lost, "
        + ("recovered" if worst.recovered else "not recovered")
        + f" (after {worst.name} at {worst.at_s:g} s)"
    )
    lines = [
        f"{e.name} at {e.at_s:g} s ("
        + (
            "cut by the engine at that instant"
            if e.exact
            else f"started {1e6 * e.late_s:.0f} us late"
        )
        + f"): outage {e.outage_s or 0.0:.4f} s, {e.lost} lost, {e.late_packets} late, "
        f"{e.duplicates or 0} duplicates, "
        + ("recovered" if e.recovered else "not recovered")
        + f"; latency p99 before {_ms_or(e.latency_p99_before_ns)}, max during "
        f"{_ms_or(e.latency_max_during_ns)}, p99 after {_ms_or(e.latency_p99_after_ns)}"
        for e in events
    ]
    lines += [f"event failed: {f}" for f in failed]
    return _outcome(check, ok, measured, ", ".join(expected) or "events ran", "\n".join(lines))


def _decided(check: m.Check, got: Measured) -> str:
    """Why the untrusted verdict's error cannot have changed this check's answer
    (:mod:`fidelnet.fidelity.bounds`), or "" when it could have."""
    if not isinstance(got, UdpResult) or got.verdict is None:
        return ""
    if isinstance(check, m.LatencyCheck) and got.latency.count > 0:
        value = _percentile_ns(got, check.percentile)
        if latency_decided(got.verdict, value, check.max_ns) is not None:
            return "engine lateness only adds latency, so the true value passes too"
    if isinstance(check, m.LossCheck) and loss_decided(got.verdict, got.monitor):
        return (
            "engine lateness loses no packets and the engine's queues dropped none: "
            "the loss is the link model's"
        )
    return ""


def _with_verdict(
    check: m.Check, outcome: CheckOutcome, got: Measured, th: Thresholds
) -> CheckOutcome:
    verdict = getattr(got, "verdict", None)
    if verdict is None or outcome.status not in ("passed", "failed"):
        return outcome
    reasons = "; ".join(r.message for r in verdict.problems()[:3])
    out = replace(outcome, verdict=verdict.level, verdict_reasons=reasons)
    why = _decided(check, got) if verdict.level == "untrusted" else ""
    if why:
        note = f"decided despite the untrusted measurement: {why}"
        return replace(out, detail="\n".join(x for x in (out.detail, note) if x))
    if verdict.level == "untrusted" and th.untrusted_check == "inconclusive":
        would = "passed" if outcome.status == "passed" else "failed"
        return replace(
            out,
            status="error",
            message=(
                f"inconclusive: measured {outcome.measured} ({would} against "
                f"{outcome.expected}), but the measurement is untrusted: {reasons}"
            ),
        )
    return out


def _command(net: Network, check: m.CommandCheck) -> CheckOutcome:
    t0 = time.monotonic()
    expected = []
    if check.exit_code is not None:
        expected.append(f"exit {check.exit_code}")
    pattern = check.output_re
    if pattern is not None:
        expected.append(f"output matching /{pattern.pattern}/")
    if check.wait_s is not None:
        expected.append(f"within {check.wait_s:g} s")
    got = try_until(
        net,
        check.node,
        check.run,
        expect_exit=check.exit_code,
        output=pattern,
        timeout_s=check.timeout_s,
        wait_s=check.wait_s,
        interval_s=check.interval_s,
    )
    measured = f"no exit within {check.timeout_s:g} s" if got.rc is None else f"exit {got.rc}"
    if got.summary():
        measured += f", {'passed' if got.ok else 'still failing'} {got.summary()}"
    tail = (
        got.out.strip()[-400:] + ("\nstderr: " + got.err.strip()[-400:] if got.err.strip() else "")
    ).strip()
    return _outcome(check, got.ok, measured, ", ".join(expected) or "runs", tail, t0)


def _regression(check: m.RegressionCheck, where: Gate | None) -> CheckOutcome:
    """The traffic's saved result against the baseline's (fidelnet.gate): same or
    improved passes, regressed fails, inconclusive is skipped with why."""
    from fidelnet.gate.compare import compare, parse_metric
    from fidelnet.measure.results import load_result

    t0 = time.monotonic()
    if where is None or where.baseline is None:
        return CheckOutcome(
            name=check.key, status="error", classname=check.type,
            message="a regression check needs a baseline: fidelnet test --baseline DIR",
        )  # fmt: skip
    rel = f"{where.run_rel}/{check.traffic}.json"
    base_file, now_file = where.baseline / rel, where.out / f"{check.traffic}.json"
    if not base_file.is_file():
        return CheckOutcome(
            name=check.key, status="error", classname=check.type,
            message=f"the baseline {where.baseline} has no {rel}: make it from this scenario "
            "(fidelnet test ... --save-baseline DIR)",
        )  # fmt: skip
    tol = check.tolerance_value
    metric = parse_metric(check.metric if tol is None else f"{check.metric}:{tol}")
    (c,) = compare(rel, load_result(base_file), load_result(now_file), [metric])
    expected = f"within {metric.describe()} of the baseline"

    def value(iv: object) -> str:
        v = getattr(iv, "value", None)
        if v is None:
            return "-"
        if metric.name == "loss":
            return _pct(v)
        if metric.name == "ndr":
            return f"{v / 1000:.1f} kpps"
        if metric.name == "goodput":
            return _rate(v)
        return _ms(v)

    measured = (
        f"{metric.name} {value(c.current)} (baseline {value(c.baseline)}), "
        f"change {c.change_text()}: {c.decision}"
    )
    status: Literal["passed", "failed", "skipped"] = "skipped"
    if c.decision in ("same", "improved"):
        status = "passed"
    elif c.decision == "regressed":
        status = "failed"
    message = "inconclusive: " + "; ".join(c.reasons) if status == "skipped" else ""
    return CheckOutcome(
        name=check.key, status=status, measured=measured, expected=expected,
        message=message, classname=check.type, seconds=time.monotonic() - t0,
    )  # fmt: skip


@dataclass(frozen=True)
class Gate:
    """Where a run's regression checks find their files: the baseline directory, this
    run's results directory, and its path relative to the suite (``scenario/run-1``)."""

    baseline: Path | None
    out: Path
    run_rel: str


def evaluate(
    net: Network,
    checks: list[m.Check],
    measured: Mapping[str, Measured],
    thresholds: Thresholds = DEFAULT,
    gate: Gate | None = None,
) -> list[CheckOutcome]:
    """One outcome per check, in file order, with its measurement's verdict."""
    out = []
    for check in checks:
        if isinstance(check, m.CommandCheck):
            out.append(_command(net, check))
            continue
        if isinstance(check, m.RegressionCheck):
            ran = measured.get(check.traffic)
            if isinstance(ran, TrafficFailure) or ran is None:
                why = ran.message if isinstance(ran, TrafficFailure) else "it was not run"
                out.append(
                    CheckOutcome(
                        name=check.key,
                        status="error",
                        classname=check.type,
                        message=f"traffic {check.traffic!r} failed: {why}",
                    )  # fmt: skip
                )
            else:
                out.append(_regression(check, gate))
            continue
        got: Any = measured.get(check.traffic)
        if got is None:
            out.append(
                CheckOutcome(
                    name=check.key,
                    status="error",
                    message=f"traffic {check.traffic!r} was not run",
                    classname=check.type,
                )
            )
        elif isinstance(got, TrafficFailure):
            out.append(
                CheckOutcome(
                    name=check.key,
                    status="error",
                    message=f"traffic {check.traffic!r} failed: {got.message}",
                    classname=check.type,
                )
            )
        else:
            try:
                out.append(_with_verdict(check, _judge(check, got), got, thresholds))
            except (ValueError, KeyError) as exc:
                out.append(
                    CheckOutcome(
                        name=check.key, status="error", message=str(exc), classname=check.type
                    )
                )
    return out
