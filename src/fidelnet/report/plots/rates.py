"""Rates over time and searches: received rate, zero-loss trials, TCP goodput."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fidelnet.measure.results import TcpResult, Trial, UdpResult, ZeroLossResult
from fidelnet.report import formatting as fmt
from fidelnet.report.plots.base import SERIES, figure, legend, no_data, save, text

__all__ = [
    "rate_over_time",
    "rate_over_time_figure",
    "tcp_goodput",
    "tcp_goodput_figure",
    "zero_loss_trials",
    "zero_loss_trials_figure",
]


# --- 2. received rate over time -----------------------------------------------------


def rate_over_time_figure(
    results: Sequence[tuple[str, UdpResult]], *, bits: bool = False, title: str | None = None
) -> Figure:
    """Received rate per interval (kpps; with ``bits`` a second panel in Mbit/s)."""
    fig, axes = figure(2 if bits else 1)
    ax = axes[0]
    for label, r in results:
        if not r.intervals:
            continue
        t = [i.t_s for i in r.intervals]
        line = ax.plot(
            t,
            [i.rate_pps / 1e3 for i in r.intervals],
            label=text(label),
            gid=SERIES,
            marker=".",
            markersize=3,
            linewidth=1.2,
        )[0]
        if bits:
            axes[1].plot(
                t,
                [i.rate_bps / 1e6 for i in r.intervals],
                label=text(label),
                gid=SERIES,
                color=line.get_color(),
                marker=".",
                markersize=3,
                linewidth=1.2,
            )
    ax.set_ylabel("received (kpps)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.4)
    ax.set_title(text(title or "Received rate over time"))
    if bits:
        axes[1].set_ylabel("received (Mbit/s)")
        axes[1].set_ylim(bottom=0)
        axes[1].grid(True, alpha=0.4)
        axes[1].sharex(ax)
    axes[-1].set_xlabel("time (s)")
    if not ax.get_lines():
        no_data(ax, "intervals")
    legend(ax)
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
    fig, (ax,) = figure()
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
            label=text(label),
            gid=SERIES,
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
        prefix = f"{text(label)} " if many else ""
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
    ax.set_title(text(title or "Zero-loss search: trials"))
    if not ax.get_lines():
        no_data(ax, "trials")
    legend(ax)
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
    fig, (ax,) = figure()
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
                label=text(f"{label} {name}" if many else name),
                gid=SERIES,
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
    ax.set_title(text(title or "TCP goodput per flow"))
    if not any(line.get_gid() == SERIES for line in ax.get_lines()):
        no_data(ax, "intervals")
    legend(ax)
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
