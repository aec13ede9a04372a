"""The report's plots, drawn with matplotlib's object API (no pyplot, no global state).

Each plot has two functions: ``<name>_figure(results, ...)`` builds and returns the
:class:`~matplotlib.figure.Figure` (for tests and for callers that want to change
it), and ``<name>(results, out, ...)`` saves it as PNG (and SVG next to it with
``svg=True``) and returns the PNG's path. ``results`` is a list of ``(label,
result)``; each result gives one data line, and data lines carry ``gid="series"``
(reference lines: ``"floor"``, ``"ndr"``, ``"pdr"``, ``"bottleneck"``).

- :func:`hdr_percentiles`: HDR percentile plot as in CIMininet's Fig. 1 and 5:
  log-log, x is 1/(1-p) labelled 0%, 90%, 99%, 99.9%, ..., y latency in µs.
- :func:`rate_over_time`: received rate per interval (CIMininet Fig. 4).
- :func:`worst_case_over_time`: each interval's maximum latency as points on a log
  axis (HVNet Fig. 4), with the measurement floor's p99.9 as a line.
- :func:`zero_loss_trials`: a zero-loss search's trials, offered rate per trial,
  marked by loss, with the NDR and PDR found.
- :func:`tcp_goodput`: receiver goodput per flow and interval, warm-up shaded, the
  bottleneck's capacity as a line.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import (
    FixedLocator,
    FuncFormatter,
    LogFormatter,
    MaxNLocator,
    NullLocator,
)

from fidelnet.errors import MeasurementError
from fidelnet.measure.latency import percentile_series
from fidelnet.measure.results import (
    FloorSummary,
    LatencySummary,
    TcpResult,
    Trial,
    UdpFlowResult,
    UdpResult,
    ZeroLossResult,
)
from fidelnet.report import formatting as fmt

__all__ = [
    "LatencySource",
    "hdr_percentiles",
    "hdr_percentiles_figure",
    "nines_label",
    "rate_over_time",
    "rate_over_time_figure",
    "save",
    "series_lines",
    "tcp_goodput",
    "tcp_goodput_figure",
    "worst_case_over_time",
    "worst_case_over_time_figure",
    "zero_loss_trials",
    "zero_loss_trials_figure",
]

LatencySource = UdpResult | UdpFlowResult | Trial | LatencySummary
"""What the HDR plot takes a latency distribution from."""

_SIZE = (8.0, 4.5)
_DPI = 100
_MAX_NINES = 6
_SERIES = "series"


# --- shared -------------------------------------------------------------------------


def _figure(rows: int = 1) -> tuple[Figure, list[Axes]]:
    fig = Figure(figsize=(_SIZE[0], _SIZE[1] * (1 if rows == 1 else 0.75 * rows)), dpi=_DPI)
    FigureCanvasAgg(fig)
    fig.set_layout_engine("constrained")
    axes = [fig.add_subplot(rows, 1, i + 1) for i in range(rows)]
    return fig, axes


def _text(s: str) -> str:
    """``s`` as matplotlib shows it literally: ``$`` would start mathtext, a leading
    ``_`` would hide the label from the legend."""
    s = s.replace("$", r"\$")
    return " " + s if s.startswith("_") else s


def _no_data(ax: Axes, what: str) -> None:
    ax.text(0.5, 0.5, f"no {what}", ha="center", va="center", transform=ax.transAxes)


def _legend(ax: Axes) -> None:
    handles, _labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(fontsize="small", loc="best")


def _plain_numbers(ax: Axes) -> None:
    """Log y axis labelled ``10``, ``200``, ``5000`` rather than powers of ten."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2.0, 0.5)))


def save(fig: Figure, out: str | os.PathLike[str], *, svg: bool = False) -> Path:
    """Write ``fig`` to ``out`` as PNG (and SVG beside it); returns ``out``."""
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # A label in a script the bundled font lacks is drawn as boxes, not an error.
        warnings.filterwarnings("ignore", message=r"Glyph .* missing", category=UserWarning)
        fig.savefig(path, format="png", dpi=_DPI)
        if svg:
            fig.savefig(path.with_suffix(".svg"), format="svg")
    return path


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
    results: Sequence[tuple[str, LatencySource]], *, title: str | None = None
) -> Figure:
    """Latency by percentile, log-log, one line per result."""
    fig, (ax,) = _figure()
    xmax = 10.0**3
    for label, source in results:
        xs, ys, exact = _hdr_points(_summary_of(source))
        if not xs:
            continue
        xmax = max(xmax, xs[-1])
        text = _text(label) if exact else _text(label) + " (summary only)"
        ax.plot(
            xs,
            ys,
            label=text,
            gid=_SERIES,
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
    _plain_numbers(ax)
    ax.set_xlabel("percentile")
    ax.set_ylabel("latency (µs)")
    ax.grid(True, which="major", alpha=0.4)
    ax.set_title(_text(title or "Latency by percentile"))
    if not ax.get_lines():
        _no_data(ax, "latency samples")
    _legend(ax)
    return fig


def hdr_percentiles(
    results: Sequence[tuple[str, LatencySource]],
    out: str | os.PathLike[str],
    *,
    title: str | None = None,
    svg: bool = False,
) -> Path:
    """Save :func:`hdr_percentiles_figure` to ``out``."""
    return save(hdr_percentiles_figure(results, title=title), out, svg=svg)


# --- 2. received rate over time -----------------------------------------------------


def rate_over_time_figure(
    results: Sequence[tuple[str, UdpResult]], *, bits: bool = False, title: str | None = None
) -> Figure:
    """Received rate per interval (kpps; with ``bits`` a second panel in Mbit/s)."""
    fig, axes = _figure(2 if bits else 1)
    ax = axes[0]
    for label, r in results:
        if not r.intervals:
            continue
        t = [i.t_s for i in r.intervals]
        line = ax.plot(
            t,
            [i.rate_pps / 1e3 for i in r.intervals],
            label=_text(label),
            gid=_SERIES,
            marker=".",
            markersize=3,
            linewidth=1.2,
        )[0]
        if bits:
            axes[1].plot(
                t,
                [i.rate_bps / 1e6 for i in r.intervals],
                label=_text(label),
                gid=_SERIES,
                color=line.get_color(),
                marker=".",
                markersize=3,
                linewidth=1.2,
            )
    ax.set_ylabel("received (kpps)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.4)
    ax.set_title(_text(title or "Received rate over time"))
    if bits:
        axes[1].set_ylabel("received (Mbit/s)")
        axes[1].set_ylim(bottom=0)
        axes[1].grid(True, alpha=0.4)
        axes[1].sharex(ax)
    axes[-1].set_xlabel("time (s)")
    if not ax.get_lines():
        _no_data(ax, "intervals")
    _legend(ax)
    return fig


def rate_over_time(
    results: Sequence[tuple[str, UdpResult]],
    out: str | os.PathLike[str],
    *,
    bits: bool = False,
    title: str | None = None,
    svg: bool = False,
) -> Path:
    """Save :func:`rate_over_time_figure` to ``out``."""
    return save(rate_over_time_figure(results, bits=bits, title=title), out, svg=svg)


# --- 3. worst case over time --------------------------------------------------------


def worst_case_over_time_figure(
    results: Sequence[tuple[str, UdpResult]],
    *,
    floor: FloorSummary | None = None,
    title: str | None = None,
) -> Figure:
    """Each interval's maximum latency as a point, log y; the floor's p99.9 as a line."""
    fig, (ax,) = _figure()
    for label, r in results:
        pts = [(i.t_s, i.latency_max_ns) for i in r.intervals if i.latency_max_ns is not None]
        if not pts:
            continue
        ax.plot(
            [t for t, _ in pts],
            [max(v, 1) / 1e3 for _, v in pts],
            label=_text(label),
            gid=_SERIES,
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
    _plain_numbers(ax)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("maximum latency per interval (µs)")
    ax.grid(True, which="major", alpha=0.4)
    ax.set_title(_text(title or "Worst-case latency over time"))
    if not any(line.get_gid() == _SERIES for line in ax.get_lines()):
        _no_data(ax, "per-interval latency")
    _legend(ax)
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


# --- 4. zero-loss search ------------------------------------------------------------


def _loss_class(trial: Trial, pdr_loss: float) -> int:
    """0: no loss, 1: loss within the PDR threshold, 2: more."""
    if trial.loss_ratio == 0:
        return 0
    return 1 if trial.loss_ratio <= pdr_loss else 2


def zero_loss_trials_figure(
    results: Sequence[tuple[str, ZeroLossResult]], *, title: str | None = None
) -> Figure:
    """Offered rate per trial, each trial marked by its loss; NDR and PDR as lines."""
    fig, (ax,) = _figure()
    categories = [
        ("no loss", "o", "tab:green"),
        ("loss ≤ PDR threshold", "^", "tab:orange"),
        ("loss > PDR threshold", "X", "tab:red"),
    ]
    seen: set[str] = set()
    many = len(results) > 1
    for label, r in results:
        if not r.trials:
            continue
        n = list(range(1, len(r.trials) + 1))
        line = ax.plot(
            n,
            [t.rate_pps / 1e3 for t in r.trials],
            label=_text(label),
            gid=_SERIES,
            linewidth=1,
            alpha=0.6,
        )[0]
        color = line.get_color()
        for k, (name, marker, mcolor) in enumerate(categories):
            picked = [
                (i, t) for i, t in zip(n, r.trials, strict=True) if _loss_class(t, r.pdr_loss) == k
            ]
            if picked:
                ax.scatter(
                    [i for i, _ in picked],
                    [t.rate_pps / 1e3 for _, t in picked],
                    marker=marker,
                    color=mcolor,
                    s=36,
                    zorder=3,
                    label=name if name not in seen else None,
                )
                seen.add(name)
        limited = [(i, t) for i, t in zip(n, r.trials, strict=True) if t.generator_limited]
        if limited:
            ax.scatter(
                [i for i, _ in limited],
                [t.rate_pps / 1e3 for _, t in limited],
                marker="s",
                facecolors="none",
                edgecolors="black",
                s=110,
                zorder=4,
                label="generator-limited" if "limited" not in seen else None,
            )
            seen.add("limited")
        for i, t in zip(n, r.trials, strict=True):
            if t.loss_ratio > 0:
                ax.annotate(
                    fmt.ratio(t.loss_ratio),
                    (i, t.rate_pps / 1e3),
                    textcoords="offset points",
                    xytext=(5, 5),
                    fontsize="x-small",
                )
        prefix = f"{_text(label)} " if many else ""
        ax.axhline(
            r.ndr_pps / 1e3,
            color=color if many else "tab:green",
            linestyle="--",
            linewidth=1,
            gid="ndr",
            label=f"{prefix}NDR {fmt.pps(r.ndr_pps)}",
        )
        ax.axhline(
            r.pdr_pps / 1e3,
            color=color if many else "tab:orange",
            linestyle=":",
            linewidth=1.2,
            gid="pdr",
            label=f"{prefix}PDR {fmt.pps(r.pdr_pps)} (loss ≤ {fmt.ratio(r.pdr_loss)})",
        )
    ax.set_xlabel("trial")
    ax.set_ylabel("offered rate (kpps)")
    top = max([t.rate_pps for _, r in results for t in r.trials] + [0.0]) / 1e3
    ax.set_ylim(0, top * 1.12 if top > 0 else None)  # room for the loss labels
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(True, alpha=0.4)
    ax.set_title(_text(title or "Zero-loss search: trials"))
    if not ax.get_lines():
        _no_data(ax, "trials")
    _legend(ax)
    return fig


def zero_loss_trials(
    results: Sequence[tuple[str, ZeroLossResult]],
    out: str | os.PathLike[str],
    *,
    title: str | None = None,
    svg: bool = False,
) -> Path:
    """Save :func:`zero_loss_trials_figure` to ``out``."""
    return save(zero_loss_trials_figure(results, title=title), out, svg=svg)


# --- 5. TCP goodput -----------------------------------------------------------------


def tcp_goodput_figure(
    results: Sequence[tuple[str, TcpResult]], *, title: str | None = None
) -> Figure:
    """Receiver goodput per flow and interval; warm-up shaded; bottleneck as a line."""
    fig, (ax,) = _figure()
    peak = max(
        [iv.goodput_bps for _, r in results for f in r.flows for iv in f.intervals]
        + [r.bottleneck_bps or 0.0 for _, r in results]
        + [1.0]
    )
    unit, div = fmt.unit_for_bps(peak)
    many = len(results) > 1
    for label, r in results:
        for f in r.flows:
            if not f.intervals:
                continue
            name = f"{f.src}→{f.dst}:{f.port}"
            ax.plot(
                [iv.t_s for iv in f.intervals],
                [iv.goodput_bps / div for iv in f.intervals],
                label=_text(f"{label} {name}" if many else name),
                gid=_SERIES,
                marker=".",
                markersize=3,
                linewidth=1.2,
            )
    warmup = max([r.warmup_s for _, r in results] + [0.0])
    if warmup > 0:
        ax.axvspan(0.0, warmup, color="grey", alpha=0.2, label=f"warm-up ({warmup:g} s, excluded)")
    for bottleneck in sorted({r.bottleneck_bps for _, r in results if r.bottleneck_bps}):
        ax.axhline(
            bottleneck / div,
            color="black",
            linestyle="--",
            linewidth=1,
            gid="bottleneck",
            label=f"bottleneck {fmt.bps(bottleneck)}",
        )
    ax.set_xlabel("time (s)")
    ax.set_ylabel(f"receiver goodput ({unit})")
    ax.set_ylim(0, peak / div * 1.1)
    ax.set_xlim(left=0)
    ax.grid(True, alpha=0.4)
    ax.set_title(_text(title or "TCP goodput per flow"))
    if not any(line.get_gid() == _SERIES for line in ax.get_lines()):
        _no_data(ax, "intervals")
    _legend(ax)
    return fig


def tcp_goodput(
    results: Sequence[tuple[str, TcpResult]],
    out: str | os.PathLike[str],
    *,
    title: str | None = None,
    svg: bool = False,
) -> Path:
    """Save :func:`tcp_goodput_figure` to ``out``."""
    return save(tcp_goodput_figure(results, title=title), out, svg=svg)


def series_lines(fig: Figure) -> list[Line2D]:
    """The data lines of ``fig``'s first axes (``gid="series"``)."""
    return [line for line in fig.axes[0].get_lines() if line.get_gid() == _SERIES]
