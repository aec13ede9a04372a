"""The HiFi validation page: the verdict and a table like the paper's Table 1 first,
then, per test, the rate of every flow over time and its CDF, and Jain's index per
second for all tests in one CDF."""

from __future__ import annotations

import html
import json
import statistics
from pathlib import Path

from fidelnet.bench.hifi import HifiOutcome
from fidelnet.fidelity.verdict import worst
from fidelnet.report.markup import CSS
from fidelnet.report.plots.base import figure, legend, save

__all__ = ["summary_rows", "write_page"]

_COLOURS = {"trusted": "#1a7f37", "degraded": "#9a6700", "untrusted": "#cf222e"}


def _e(v: object) -> str:
    return html.escape(str(v))


def _label(t: HifiOutcome) -> str:
    return f"{t.name} ({t.transport}, {t.queue})"


def _slug(t: HifiOutcome) -> str:
    return f"{t.name}-{t.queue}"


def _spread(xs: list[float]) -> str:
    if not xs:
        return "—"
    ordered = sorted(xs)
    lo = ordered[max(0, int(0.05 * len(ordered)))]
    return f"{min(ordered):.3f} / {lo:.3f} / {statistics.median(ordered):.3f}"


def summary_rows(tests: list[HifiOutcome]) -> list[list[str]]:
    """Table 1: test, flows, goodput per flow, share asked, Jain (overall and per
    second: min / p5 / median), verdict."""
    rows = []
    for t in tests:
        rows.append(
            [
                _label(t),
                str(len(t.flows)),
                " ".join(f"{f.mean_bps / 1e6:.2f}" for f in t.flows),
                f"{t.fair_share_bps / 1e6:g}",
                f"{t.jain_overall:.4f}",
                _spread(t.jain_per_second),
                t.level,
            ]
        )
    return rows


def _flows_plot(out: Path, t: HifiOutcome) -> str:
    fig, (ax_t, ax_c) = figure(2)
    for f in t.flows:
        xs = list(range(1, len(f.per_second_bps) + 1))
        ax_t.plot(xs, [v / 1e6 for v in f.per_second_bps], marker=".", label=f.label, gid="series")
        values = sorted(v / 1e6 for v in f.per_second_bps)
        ax_c.plot(values, [(i + 1) / len(values) for i in range(len(values))], label=f.label)
    ax_t.axhline(t.fair_share_bps / 1e6, color="grey", linestyle="--", linewidth=0.8)
    ax_t.set_xlabel("second")
    ax_t.set_ylabel("Mbit/s (dashed: fair share)")
    ax_c.set_xlabel("Mbit/s per second")
    ax_c.set_ylabel("fraction of seconds")
    for ax in (ax_t, ax_c):
        ax.grid(True, alpha=0.3)
    legend(ax_t, small=True)
    name = f"flows-{_slug(t)}.png"
    save(fig, out / name)
    return f'<img src="{_e(name)}" alt="{_e(_label(t))}" data-plot="flows-{_e(_slug(t))}">'


def _jain_plot(out: Path, tests: list[HifiOutcome]) -> str:
    fig, (ax,) = figure()
    for t in tests:
        js = sorted(t.jain_per_second)
        if js:
            ax.plot(js, [(i + 1) / len(js) for i in range(len(js))], label=_label(t), gid="series")
    ax.axvline(0.99, color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("Jain's index per second (dashed: 0.99)")
    ax.set_ylabel("fraction of seconds")
    ax.grid(True, alpha=0.3)
    legend(ax, small=True)
    save(fig, out / "jain.png")
    return '<img src="jain.png" alt="Jain CDF" data-plot="jain">'


def write_page(tests: list[HifiOutcome], out: Path) -> Path:
    """Write ``hifi.html``, its plots and ``hifi.json`` into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    level = worst(t.level for t in tests)
    counts = {lv: sum(1 for t in tests if t.level == lv) for lv in _COLOURS}
    problems = [f"{_label(t)}: {t.reasons}" for t in tests if t.reasons]
    header = [
        "test", "flows", "goodput per flow, Mbit/s", "fair share, Mbit/s", "Jain",
        "Jain per second (min / p5 / median)", "verdict",
    ]  # fmt: skip
    rows = summary_rows(tests)
    body = "".join(
        "<tr>"
        + "".join(f"<td>{_e(c)}</td>" for c in r[:-1])
        + f'<td style="color:{_COLOURS.get(r[-1], "black")}">{_e(r[-1])}</td></tr>'
        for r in rows
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        "<title>fidelnet: Mininet-HiFi validation</title>",
        f"<style>{CSS}</style></head><body>",
        f'<section id="verdict" data-level="{_e(level)}" '
        f'style="border-left:6px solid {_COLOURS[level]};padding-left:1em">',
        f"<h1>Mininet-HiFi validation: {_e(level)}</h1>",
        "<p>" + ", ".join(f"{n} {lv}" for lv, n in counts.items() if n) + "</p>",
        "<ul>" + "".join(f"<li>{_e(p)}</li>" for p in problems[:5]) + "</ul></section>",
        "<section id='table1'><h2>Results (Mininet-HiFi Table 1)</h2><table><thead><tr>",
        "".join(f"<th>{_e(h)}</th>" for h in header),
        f"</tr></thead><tbody>{body}</tbody></table>",
        "<p>TCP tests: every link 100 Mbit/s (tc htb), iperf3, one flow per pair, "
        "goodput per second after the warm-up. UDP dumbbell: four 5 Mbit/s constant-rate "
        "senders (1500-byte frames) through a 10 Mbit/s engine bottleneck with a "
        "100-packet queue; the received rate per second of each flow.</p></section>",
        "<section id='jain'><h2>Jain's index per second, every test</h2>",
        _jain_plot(out, tests),
        "</section>",
    ]
    for t in tests:
        parts += [
            f"<section id='test-{_e(_slug(t))}'><h2>{_e(_label(t))}: {_e(t.level)}</h2>",
            f"<p>{_e(t.reasons) or 'nothing the run watched says it is off'}</p>",
            _flows_plot(out, t),
            "</section>",
        ]
    parts.append("</body></html>")
    page = out / "hifi.html"
    page.write_text("".join(parts))
    doc = [
        {
            "test": t.name,
            "transport": t.transport,
            "queue": t.queue,
            "fair_share_bps": t.fair_share_bps,
            "jain": t.jain_overall,
            "jain_per_second": t.jain_per_second,
            "flows": [{"flow": f.label, "per_second_bps": f.per_second_bps} for f in t.flows],
            "verdicts": [v.model_dump(mode="json") for v in t.verdicts],
        }
        for t in tests
    ]
    (out / "hifi.json").write_text(json.dumps(doc, indent=1) + "\n")
    return page
