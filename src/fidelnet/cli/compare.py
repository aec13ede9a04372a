"""``fidelnet compare BASELINE RESULTS``: did anything get worse, knowing the noise.

Exit codes: 0 nothing regressed and everything decided (``same`` or ``improved``),
1 something regressed, 2 bad input, 3 nothing regressed but something was
``inconclusive`` (``--inconclusive-ok`` makes that 0).
"""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import click

from fidelnet.errors import FidelnetError, ValidationError

__all__ = ["compare"]

EXIT_REGRESSED = 1
EXIT_INCONCLUSIVE = 3


def _fmt(value: float, metric: str) -> str:
    if math.isnan(value):
        return "-"
    if math.isinf(value):
        return "unbounded"
    if metric == "loss":
        return f"{100 * value:.3f} %"
    if metric == "ndr":
        return f"{value / 1000:.1f} kpps"
    if metric == "goodput":
        return f"{value / 1e6:.2f} Mbit/s"
    return f"{value / 1e6:.3f} ms"


def _interval(iv: object, metric: str) -> str:
    from fidelnet.gate.stats import Interval

    if not isinstance(iv, Interval):
        return "-"
    return f"{_fmt(iv.value, metric)} [{_fmt(iv.lo, metric)}, {_fmt(iv.hi, metric)}]"


@click.command("compare")
@click.argument("baseline", type=click.Path(file_okay=False))
@click.argument("results", type=click.Path(file_okay=False))
@click.option(
    "--metric",
    "metrics",
    multiple=True,
    metavar="NAME[:TOL]",
    help="p50, p90, p99, p99.9, p99.99 (tolerance in %, default 10), loss (percentage "
    "points, default 0.5), ndr or goodput (%, default 5). Repeatable; default: each "
    "result's own (p50, p99 and loss for UDP; ndr; goodput).",
)
@click.option("--confidence", default=0.95, show_default=True, help="Of each interval.")
@click.option("--json", "as_json", is_flag=True, help="One JSON document on stdout.")
@click.option("--inconclusive-ok", is_flag=True, help="Exit 0, not 3, when nothing regressed.")
@click.option(
    "--junit",
    "junit_path",
    default=None,
    metavar="FILE",
    help="Also write JUnit XML: one testcase per result and metric; regressed a failure, "
    "inconclusive skipped with the reason.",
)
@click.option(
    "--report",
    "report_path",
    default=None,
    metavar="FILE",
    help="Also write an HTML page: the decisions, and each result's latency by percentile, "
    "baseline and now drawn over each other.",
)
def compare(
    baseline: str,
    results: str,
    metrics: tuple[str, ...],
    confidence: float,
    as_json: bool,
    inconclusive_ok: bool,
    junit_path: str | None,
    report_path: str | None,
) -> None:
    """Compare RESULTS (a results directory) with BASELINE (made by ``fidelnet test
    --save-baseline``): per result file and metric, same, improved, regressed or
    inconclusive, with both estimates' confidence intervals."""
    from fidelnet.gate import baseline as bl
    from fidelnet.gate.compare import DECISIONS, default_metrics, parse_metric
    from fidelnet.gate.compare import compare as compare_one

    try:
        chosen = [parse_metric(m) for m in metrics]
        if not 0.5 <= confidence < 1.0:
            raise ValidationError("--confidence", "must be in [0.5, 1) (e.g. 0.95)", confidence)
        pairing = bl.pair(baseline, results)
    except FidelnetError as exc:
        click.echo(f"fidelnet compare: {exc}", err=True)
        sys.exit(2)
    if not pairing.pairs:
        click.echo(
            f"fidelnet compare: no result file of {results} has a counterpart in {baseline} "
            f"(baseline: {', '.join(pairing.only_baseline) or 'none'})",
            err=True,
        )
        sys.exit(2)
    rows = []
    for rel, base, now in pairing.pairs:
        rows += compare_one(rel, base, now, chosen or default_metrics(base.result), confidence)
    worst = max((r.decision for r in rows), key=DECISIONS.index)
    joint = 2 * confidence - 1
    if junit_path:
        _junit(junit_path, rows, confidence, baseline)
    if report_path:
        from fidelnet.report.gate_page import write_page

        page = write_page(
            report_path, rows, pairing.pairs, baseline=baseline, results=results,
            confidence=confidence,
        )  # fmt: skip
        if not as_json:
            click.echo(f"report: {page}")
    if as_json:
        doc = {
            "decision": worst,
            "confidence_each": confidence,
            "confidence_change_at_least": round(joint, 6),
            "comparisons": [
                {
                    "result": r.name,
                    "metric": r.metric.name,
                    "tolerance": r.metric.tolerance,
                    "decision": r.decision,
                    "baseline": None if r.baseline is None else vars(r.baseline),
                    "now": None if r.current is None else vars(r.current),
                    "change": [r.change_lo, r.change_hi, r.change_unit],
                    "reasons": r.reasons,
                }
                for r in rows
            ],
            "only_baseline": pairing.only_baseline,
            "only_new": pairing.only_new,
        }
        click.echo(json.dumps(doc, indent=1, default=str))
    else:
        click.echo(f"{worst.upper()}: {len(rows)} comparison(s) of {len(pairing.pairs)} result(s)")
        for r in rows:
            click.echo(
                f"  {r.decision:<12} {r.name} {r.metric.describe()}: baseline "
                f"{_interval(r.baseline, r.metric.name)}, now "
                f"{_interval(r.current, r.metric.name)}, change {r.change_text()}"
            )
            for why in r.reasons:
                click.echo(f"               {why}")
        click.echo(
            f"each interval {confidence:.0%}, each change at least {joint:.0%} (both at once)"
        )
        for rel in pairing.only_baseline:
            click.echo(f"  missing now: {rel} (in the baseline only)")
        for rel in pairing.only_new:
            click.echo(f"  new: {rel} (no baseline to compare with)")
    if worst == "regressed":
        sys.exit(EXIT_REGRESSED)
    if worst == "inconclusive" and not inconclusive_ok:
        sys.exit(EXIT_INCONCLUSIVE)


def _junit(path: str, rows: list[Any], confidence: float, baseline: str) -> None:
    """One suite ``compare``, one testcase per comparison: ``regressed`` a failure,
    ``inconclusive`` skipped with its reasons (never a pass), ``same`` and
    ``improved`` passed; measured and expected are the two intervals."""
    from fidelnet.report.junit import CheckOutcome, SuiteOutcome, write_junit

    status = {"regressed": "failed", "inconclusive": "skipped"}
    checks = []
    for r in rows:
        now, base = _interval(r.current, r.metric.name), _interval(r.baseline, r.metric.name)
        why = "; ".join(r.reasons)
        message = f"{r.decision}: change {r.change_text()}" + (f" ({why})" if why else "")
        checks.append(
            CheckOutcome(
                name=f"{r.name} {r.metric.describe()}",
                status=status.get(r.decision, "passed"),  # type: ignore[arg-type]
                measured=now,
                expected=f"as the baseline {base}",
                message=message,
                classname="fidelnet.compare",
            )
        )
    suite = SuiteOutcome(
        "compare",
        checks,
        properties={"baseline": baseline, "confidence_each": f"{confidence:g}"},
    )
    write_junit(path, [suite])
