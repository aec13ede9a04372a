"""A flow around its events: received rate and latency per interval, each event a
vertical line, each outage told from the packets a shaded span (docs/events.md)."""

from __future__ import annotations

import os
from pathlib import Path

from matplotlib.figure import Figure

from fidelnet.measure.results import UdpResult
from fidelnet.report.plots.base import SERIES, figure, legend, no_data, save, text
from fidelnet.report.plots.rates import rate_points

__all__ = ["around_events", "around_events_figure"]


def around_events_figure(label: str, r: UdpResult) -> Figure:
    """Top: received rate per interval (kpps); bottom: p99 and maximum latency per
    interval (ms, log). Times are seconds from the first packet (the receiver's
    intervals start at the first one received, a one-way latency later)."""
    fig, (rate_ax, lat_ax) = figure(2)
    pts = rate_points(r)
    if pts:
        rate_ax.plot(
            [p[0] for p in pts], [p[1] / 1e3 for p in pts], gid=SERIES, marker=".",
            markersize=3, linewidth=1.2, label=text("received"),
        )  # fmt: skip
    else:
        no_data(rate_ax, "intervals")
    t = [i.t_s for i in r.intervals if i.latency_max_ns]
    p99 = [(i.latency_p99_ns or 0) / 1e6 for i in r.intervals if i.latency_max_ns]
    worst = [(i.latency_max_ns or 0) / 1e6 for i in r.intervals if i.latency_max_ns]
    if t:
        lat_ax.plot(t, p99, gid=SERIES, linewidth=1.2, label=text("p99"))
        lat_ax.plot(t, worst, gid=SERIES, linewidth=0.8, linestyle="--", label=text("max"))
        lat_ax.set_yscale("log")
    first = r.first_send_ns or 0
    for o in r.outages:
        for ax in (rate_ax, lat_ax):
            ax.axvspan(
                (o.start_ns - first) / 1e9, (o.end_ns - first) / 1e9, color="tab:red", alpha=0.15
            )
    for ev in r.events:
        for ax in (rate_ax, lat_ax):
            ax.axvline(ev.effective_s or ev.at_s, color="tab:gray", linewidth=0.8, linestyle=":")
        rate_ax.annotate(
            text(ev.name), (ev.effective_s or ev.at_s, 1.0), xycoords=("data", "axes fraction"),
            rotation=90, fontsize=7, va="top", ha="right",
        )  # fmt: skip
    rate_ax.set_ylabel("received (kpps)")
    rate_ax.set_ylim(bottom=0)
    rate_ax.grid(True, alpha=0.4)
    rate_ax.set_title(text(f"{label}: around its events (outages shaded)"))
    lat_ax.set_ylabel("latency (ms)")
    lat_ax.grid(True, alpha=0.4)
    lat_ax.sharex(rate_ax)
    lat_ax.set_xlabel("time from the first packet (s)")
    legend(lat_ax)
    return fig


def around_events(
    label: str, r: UdpResult, out: str | os.PathLike[str], *, svg: bool = False
) -> Path:
    """Save :func:`around_events_figure` to ``out``."""
    return save(around_events_figure(label, r), out, svg=svg)
