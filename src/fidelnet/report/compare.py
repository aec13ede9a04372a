"""Results drawn together: UDP runs in one plot per stack and traffic pattern."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path

from fidelnet.measure.results import UdpResult
from fidelnet.report import formatting as fmt
from fidelnet.report import plots
from fidelnet.report.markup import Item, Plots, slug

__all__ = ["comparison"]


def _groups(
    items: Sequence[Item],
) -> list[tuple[str, list[tuple[str, UdpResult]]]]:
    """UDP runs grouped by the label's first word (``fidelnet-cbr-00050k`` →
    ``fidelnet``) and the traffic pattern, each group ordered by requested rate:
    one line per rate, as the papers draw them."""
    groups: dict[tuple[str, str], list[tuple[str, UdpResult]]] = {}
    for label, _s, rf in items:
        if isinstance(rf.result, UdpResult):
            stack = label.split("-", 1)[0] if "-" in label else ""
            groups.setdefault((stack, rf.result.pattern), []).append((label, rf.result))
    out = []
    for (stack, pattern), runs in groups.items():
        runs.sort(key=lambda x: x[1].requested_pps)
        lines = [(fmt.pps(r.requested_pps), r) for _label, r in runs]
        if len({name for name, _r in lines}) < len(lines):
            lines = [(f"{label} ({fmt.pps(r.requested_pps)})", r) for label, r in runs]
        out.append((" ".join(x for x in (stack, pattern) if x), lines))
    return out


def _draw_lines(
    draw: Callable[..., Path],
    lines: list[tuple[str, UdpResult]],
    title: str,
    svg: bool,
    path: Path,
) -> Path:
    return draw(lines, path, title=title, svg=svg)


def comparison(items: Sequence[Item], plot: Plots, taken: set[str]) -> str:
    groups = _groups(items)
    if sum(len(lines) for _n, lines in groups) < 2:
        return ""
    parts = ['<section id="all-udp"><h2>UDP runs together</h2>']
    for name, lines in groups:
        name_slug = slug(f"all-udp-{name}" if name else "all-udp", taken)
        what = f" ({name})" if name else ""
        if any(r.latency.count for _l, r in lines):
            parts.append(
                plot.figure(
                    "hdr",
                    name_slug,
                    f"Latency by percentile{what}, one line per rate",
                    f"Latency by percentile{what}, one line per requested rate.",
                    functools.partial(
                        _draw_lines,
                        plots.hdr_percentiles,
                        lines,
                        f"Latency by percentile{what}",
                        plot.svg,
                    ),
                )
            )
        if any(r.intervals for _l, r in lines):
            parts.append(
                plot.figure(
                    "rate",
                    name_slug,
                    f"Received rate over time{what}, one line per rate",
                    f"Received rate per interval{what}, one line per requested rate.",
                    functools.partial(
                        _draw_lines, plots.rate_over_time, lines, f"Received rate{what}", plot.svg
                    ),
                )
            )
    parts.append("</section>")
    return "".join(parts)
