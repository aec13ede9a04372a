"""Latency plots: the HDR percentile plot and the worst case per interval."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, NullLocator

from fidelnet.errors import MeasurementError
from fidelnet.measure.latency import percentile_series
from fidelnet.measure.results import (
    FloorSummary,
    LatencySummary,
    Trial,
    UdpFlowResult,
    UdpResult,
)
from fidelnet.report import formatting as fmt
from fidelnet.report.plots.base import (
    SERIES,
    color_of,
    figure,
    legend,
    no_data,
    plain_numbers,
    save,
    text,
)

__all__ = [
    "LatencySource",
    "hdr_percentiles",
    "hdr_percentiles_figure",
    "nines_label",
    "worst_case_over_time",
    "worst_case_over_time_figure",
]

LatencySource = UdpResult | UdpFlowResult | Trial | LatencySummary
"""What the HDR plot takes a latency distribution from."""

_MAX_NINES = 6


# --- 1. HDR percentile plot ---------------------------------------------------------


def nines_label(nines: int) -> str:
    """The percentile at x = 10**nines: 0 -> ``0%``, 1 -> ``90%``, 3 -> ``99.9%``."""
    if nines == 0:
        return "0%"
    if nines == 1:
        return "90%"
    return "99" + ("." + "9" * (nines - 2) if nines > 2 else "") + "%"


def _summary_of(source: LatencySource) -> LatencySummary:
    return source if isinstance(source, LatencySummary) else source.latency


def _hdr_points(summary: LatencySummary) -> tuple[list[float], list[float], bool]:
    """x = 1/(1-p) and y in µs for one distribution; ``exact`` is False when only the
    summary's percentiles were available (no or unreadable histogram)."""
    if summary.count == 0:
        return [], [], True
    limit = 10.0**_MAX_NINES
    points: list[tuple[float, int]] | None = None
    if summary.hdr:
        try:
            points = percentile_series(summary.hdr, max_nines=_MAX_NINES)
        except MeasurementError:
            points = None
    exact = bool(points)
    if not points:
        points = [
            (0.0, summary.min_ns),
            (50.0, summary.p50_ns),
            (90.0, summary.p90_ns),
            (99.0, summary.p99_ns),
            (99.9, summary.p999_ns),
            (99.99, summary.p9999_ns),
        ]
        # A percentile beyond one sample in the tail says nothing more than the max.
        points = [(p, v) for p, v in points if 1.0 / (1.0 - p / 100.0) <= max(summary.count, 2)]
        points.append((100.0, summary.max_ns))
    xs: list[float] = []
    ys: list[float] = []
    for p, v in points:
        if p >= 100.0:
            # The maximum is the one-in-count event, drawn at the tail's end.
            x = max(xs[-1] if xs else 1.0, min(float(summary.count), limit))
        else:
            x = min(1.0 / (1.0 - p / 100.0), limit)
        xs.append(x)
        ys.append(max(v, 1) / 1e3)
    return xs, ys, exact


def hdr_percentiles_figure(
    results: Sequence[tuple[str, LatencySource]],
    *,
    title: str | None = None,
    colors: Sequence[str | None] | None = None,
    small: bool = False,
) -> Figure:
    """Latency by percentile, log-log, one line per result (``colors``: one per
    result, to keep a stack's colour across plots; ``small``: to be shown two
    abreast)."""
    fig, (ax,) = figure(small=small)
    xmax = 10.0**3
    for i, (label, source) in enumerate(results):
        xs, ys, exact = _hdr_points(_summary_of(source))
        if not xs:
            continue
        xmax = max(xmax, xs[-1])
        shown = text(label) if exact else text(label) + " (summary only)"
        ax.plot(
            xs,
            ys,
            label=shown,
            gid=SERIES,
            color=color_of(colors, i),
            linewidth=1.5,
            linestyle="-" if exact else "--",
            marker=None if exact else "o",
            markersize=3,
        )
    nines = max(3, min(_MAX_NINES, math.ceil(math.log10(xmax) - 1e-9)))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(1.0, 10.0**nines)
    ticks = [10.0**k for k in range(nines + 1)]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xticks(ticks, [nines_label(k) for k in range(nines + 1)])
    plain_numbers(ax)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (µs)")
    ax.grid(True, which="major", alpha=0.4)
    ax.set_title(text(title or "Latency by percentile"))
    if not ax.get_lines():
        no_data(ax, "latency samples")
    legend(ax, small=small)
    return fig


def hdr_percentiles(
    results: Sequence[tuple[str, LatencySource]],
    out: str | os.PathLike[str],
    *,
    title: str | None = None,
    colors: Sequence[str | None] | None = None,
    small: bool = False,
    svg: bool = False,
) -> Path:
    """Save :func:`hdr_percentiles_figure` to ``out``."""
    fig = hdr_percentiles_figure(results, title=title, colors=colors, small=small)
    return save(fig, out, svg=svg)


# --- 3. worst case over time --------------------------------------------------------


def worst_case_over_time_figure(
    results: Sequence[tuple[str, UdpResult]],
    *,
    floor: FloorSummary | None = None,
    title: str | None = None,
) -> Figure:
    """Each interval's maximum latency as a point, log y; the floor's p99.9 as a line."""
    fig, (ax,) = figure()
    for label, r in results:
        pts = [(i.t_s, i.latency_max_ns) for i in r.intervals if i.latency_max_ns is not None]
        if not pts:
            continue
        ax.plot(
            [t for t, _ in pts],
            [max(v, 1) / 1e3 for _, v in pts],
            label=text(label),
            gid=SERIES,
            linestyle="none",
            marker="o",
            markersize=3.5,
            alpha=0.8,
        )
    if floor is not None:
        ax.axhline(
            max(floor.latency_p999_ns, 1) / 1e3,
            color="black",
            linestyle="--",
            linewidth=1,
            gid="floor",
            label=f"floor p99.9 ({fmt.ns(floor.latency_p999_ns)})",
        )
    ax.set_yscale("log")
    plain_numbers(ax)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("maximum latency per interval (µs)")
    ax.grid(True, which="major", alpha=0.4)
    ax.set_title(text(title or "Worst-case latency over time"))
    if not any(line.get_gid() == SERIES for line in ax.get_lines()):
        no_data(ax, "per-interval latency")
    legend(ax)
    return fig


def worst_case_over_time(
    results: Sequence[tuple[str, UdpResult]],
    out: str | os.PathLike[str],
    *,
    floor: FloorSummary | None = None,
    title: str | None = None,
    svg: bool = False,
) -> Path:
    """Save :func:`worst_case_over_time_figure` to ``out``."""
    return save(worst_case_over_time_figure(results, floor=floor, title=title), out, svg=svg)
