"""Rates over time and searches: received rate, zero-loss trials, TCP goodput."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fidelnet.measure.results import (
    TcpFlowResult,
    TcpInterval,
    TcpResult,
    Trial,
    UdpResult,
    ZeroLossResult,
)
from fidelnet.report import formatting as fmt
from fidelnet.report.plots.base import SERIES, color_of, figure, legend, no_data, save, text

__all__ = [
    "PARTIAL_MIN",
    "rate_over_time",
    "rate_over_time_figure",
    "rate_points",
    "receiver_span_s",
    "tcp_goodput",
    "tcp_goodput_figure",
    "tcp_points",
    "zero_loss_trials",
    "zero_loss_trials_figure",
]


# --- 2. received rate over time -----------------------------------------------------


PARTIAL_MIN = 0.5
"""A last interval shorter than this share of ``interval_s`` is left out of a rate
series; a longer one is scaled to its length."""


def receiver_span_s(r: UdpResult) -> float:
    """The time from the first to the last packet the receiver got:
    ``(received - 1) / receive_pps`` (the rate is measured over that span), or the
    run's duration when it cannot be told."""
    if r.receive_pps > 0 and r.received > 1:
        return (r.received - 1) / r.receive_pps
    return r.duration_s


def rate_points(r: UdpResult) -> list[tuple[float, float, float]]:
    """``(t_s, pps, bit/s)`` per interval of ``r``, with the last one corrected.

    The receiver's series starts at its first packet and ends with the interval
    that holds its last packet, so that interval is usually partial: its packets
    over a whole ``interval_s`` would draw a drop that did not happen. Its length is
    what the receiver's span leaves of it (:func:`receiver_span_s`): from
    :data:`PARTIAL_MIN` of an interval on, its rate is scaled to that length;
    shorter, it is left out."""
    pts = [(i.t_s, i.rate_pps, i.rate_bps) for i in r.intervals]
    if not pts or r.interval_s <= 0:
        return pts
    t, pps, bps = pts[-1]
    covered = receiver_span_s(r) - t
    if covered < r.interval_s * 0.999:
        if covered >= r.interval_s * PARTIAL_MIN:
            scale = r.interval_s / covered
            pts[-1] = (t, pps * scale, bps * scale)
        else:
            pts.pop()
    return pts


def tcp_points(r: TcpResult, f: TcpFlowResult) -> list[TcpInterval]:
    """The intervals of flow ``f`` without a last one shorter than
    :data:`PARTIAL_MIN` of ``r.interval_s`` (iperf3's last report covers what is
    left of the test: its rate over a few milliseconds is noise, or zero). Its
    length is ``end_s - t_s``, or what the run's duration leaves of it."""
    ivs = list(f.intervals)
    if ivs and r.interval_s > 0:
        last = ivs[-1]
        end = last.end_s if last.end_s is not None else min(last.t_s + r.interval_s, r.duration_s)
        if end - last.t_s < r.interval_s * PARTIAL_MIN:
            ivs.pop()
    return ivs


def rate_over_time_figure(
    results: Sequence[tuple[str, UdpResult]],
    *,
    bits: bool = False,
    title: str | None = None,
    colors: Sequence[str | None] | None = None,
    small: bool = False,
) -> Figure:
    """Received rate per interval (kpps; with ``bits`` a second panel in Mbit/s), the
    last, partial interval corrected (:func:`rate_points`)."""
    fig, axes = figure(2 if bits else 1, small=small)
    ax = axes[0]
    for n, (label, r) in enumerate(results):
        pts = rate_points(r)
        if not pts:
            continue
        t = [p[0] for p in pts]
        line = ax.plot(
            t,
            [p[1] / 1e3 for p in pts],
            label=text(label),
            gid=SERIES,
            color=color_of(colors, n),
            marker=".",
            markersize=3,
            linewidth=1.2,
        )[0]
        if bits:
            axes[1].plot(
                t,
                [p[2] / 1e6 for p in pts],
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
    legend(ax, small=small)
    return fig


def rate_over_time(
    results: Sequence[tuple[str, UdpResult]],
    out: str | os.PathLike[str],
    *,
    bits: bool = False,
    title: str | None = None,
    colors: Sequence[str | None] | None = None,
    small: bool = False,
    svg: bool = False,
) -> Path:
    """Save :func:`rate_over_time_figure` to ``out``."""
    fig = rate_over_time_figure(results, bits=bits, title=title, colors=colors, small=small)
    return save(fig, out, svg=svg)


# --- 4. zero-loss search ------------------------------------------------------------


def _loss_class(trial: Trial, pdr_loss: float) -> int:
    """0: no loss, 1: loss within the PDR threshold, 2: more."""
    if trial.loss_ratio == 0:
        return 0
    return 1 if trial.loss_ratio <= pdr_loss else 2


def zero_loss_trials_figure(
    results: Sequence[tuple[str, ZeroLossResult]],
    *,
    title: str | None = None,
    colors: Sequence[str | None] | None = None,
    small: bool = False,
) -> Figure:
    """Offered rate per trial, each trial marked by its loss; NDR and PDR as lines."""
    fig, (ax,) = figure(small=small)
    categories = [
        ("no loss", "o", "tab:green"),
        ("loss ≤ PDR threshold", "^", "tab:orange"),
        ("loss > PDR threshold", "X", "tab:red"),
    ]
    seen: set[str] = set()
    many = len(results) > 1
    for j, (label, r) in enumerate(results):
        if not r.trials:
            continue
        n = list(range(1, len(r.trials) + 1))
        line = ax.plot(
            n,
            [t.rate_pps / 1e3 for t in r.trials],
            label=text(label),
            gid=SERIES,
            color=color_of(colors, j),
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
    legend(ax, small=small)
    return fig


def zero_loss_trials(
    results: Sequence[tuple[str, ZeroLossResult]],
    out: str | os.PathLike[str],
    *,
    title: str | None = None,
    colors: Sequence[str | None] | None = None,
    small: bool = False,
    svg: bool = False,
) -> Path:
    """Save :func:`zero_loss_trials_figure` to ``out``."""
    fig = zero_loss_trials_figure(results, title=title, colors=colors, small=small)
    return save(fig, out, svg=svg)


# --- 5. TCP goodput -----------------------------------------------------------------


def tcp_goodput_figure(
    results: Sequence[tuple[str, TcpResult]], *, title: str | None = None
) -> Figure:
    """Receiver goodput per flow and interval (without a last, partial one:
    :func:`tcp_points`); warm-up shaded; bottleneck as a line."""
    fig, (ax,) = figure()
    peak = max(
        [iv.goodput_bps for _, r in results for f in r.flows for iv in tcp_points(r, f)]
        + [r.bottleneck_bps or 0.0 for _, r in results]
        + [1.0]
    )
    unit, div = fmt.unit_for_bps(peak)
    many = len(results) > 1
    for label, r in results:
        for f in r.flows:
            ivs = tcp_points(r, f)
            if not ivs:
                continue
            name = f"{f.src}→{f.dst}:{f.port}"
            ax.plot(
                [iv.t_s for iv in ivs],
                [iv.goodput_bps / div for iv in ivs],
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
