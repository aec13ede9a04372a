"""``fidelnet compare ... --report FILE``: the comparison as a page, baseline beside now.

The first screen gives the answer: the worst decision, then one row per result and
metric (decision, both intervals, the change, the reasons). Below, for each result
with latency histograms on both sides, the two drawn over each other (latency by
percentile, log-log: the baseline grey, now coloured by the decision), so a reader
sees where in the distribution a change is, not only the metrics that were tested.
The plots are PNG files beside the page (``FILE``'s stem + ``-plots/``).
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fidelnet.measure.results import ResultFile, UdpResult
from fidelnet.report.markup import CSS

__all__ = ["write_page"]

DECISION_COLORS = {
    "same": "tab:blue",
    "improved": "tab:green",
    "regressed": "tab:red",
    "inconclusive": "tab:orange",
}


def _e(text: object) -> str:
    return html.escape(str(text))


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


def _interval(iv: Any, metric: str) -> str:
    if iv is None or not hasattr(iv, "lo"):
        return "-"
    return f"{_fmt(iv.value, metric)} [{_fmt(iv.lo, metric)}, {_fmt(iv.hi, metric)}]"


def _overlay(name: str, base: ResultFile, now: ResultFile, decision: str, out: Path) -> Path | None:
    from fidelnet.report.plots.latency import hdr_percentiles

    if not isinstance(base.result, UdpResult) or not isinstance(now.result, UdpResult):
        return None
    return hdr_percentiles(
        [("baseline", base.result), ("now", now.result)],
        out,
        title=f"{name}: {decision}",
        colors=["tab:gray", DECISION_COLORS.get(decision, "tab:blue")],
    )


def write_page(
    path: str | Path,
    rows: Sequence[Any],
    pairs: Sequence[tuple[str, ResultFile, ResultFile]],
    *,
    baseline: str,
    results: str,
    confidence: float,
) -> Path:
    """Write the page to ``path`` (its plots beside it); returns its path."""
    from fidelnet.gate.compare import DECISIONS

    page = Path(path)
    plots_dir = page.with_name(page.stem + "-plots")
    worst = max((r.decision for r in rows), key=DECISIONS.index) if rows else "same"
    by_result: dict[str, str] = {}
    for r in rows:
        prev = by_result.get(r.name, "same")
        by_result[r.name] = max(prev, r.decision, key=DECISIONS.index)
    body = [
        f"<h1>Comparison: {_e(worst.upper())}</h1>",
        f"<p>{_e(results)} against the baseline {_e(baseline)}; each interval "
        f"{confidence:.0%}, each change at least {2 * confidence - 1:.0%}.</p>",
        "<table><tr><th>decision</th><th>result</th><th>metric</th><th>baseline</th>"
        "<th>now</th><th>change</th><th>why</th></tr>",
    ]
    for r in rows:
        cls = ' class="bad"' if r.decision in ("regressed", "inconclusive") else ""
        body.append(
            f"<tr><td{cls}>{_e(r.decision)}</td><td>{_e(r.name)}</td>"
            f"<td>{_e(r.metric.describe())}</td>"
            f"<td>{_e(_interval(r.baseline, r.metric.name))}</td>"
            f"<td>{_e(_interval(r.current, r.metric.name))}</td>"
            f"<td>{_e(r.change_text())}</td>"
            f"<td>{'<br>'.join(_e(x) for x in r.reasons)}</td></tr>"
        )
    body.append("</table>")
    figures = []
    for rel, base, now in pairs:
        decision = by_result.get(rel, "same")
        name = rel.replace("/", "_").removesuffix(".json")
        png = _overlay(rel, base, now, decision, plots_dir / f"{name}.png")
        if png is not None:
            src = f"{plots_dir.name}/{png.name}"
            figures.append(
                f'<figure><img src="{_e(src)}" alt="latency of {_e(rel)}, baseline and now">'
                f"<figcaption>{_e(rel)}: latency by percentile, the baseline (grey) and now "
                f"({_e(decision)})</figcaption></figure>"
            )
    if figures:
        body.append("<h2>Latency, baseline and now</h2>")
        body += figures
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>fidelnet compare: "
        f"{_e(worst)}</title><style>{CSS}</style></head><body>"
        + "\n".join(body)
        + "</body></html>\n",
        encoding="utf-8",
    )
    return page
