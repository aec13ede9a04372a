"""What the CPUs did while a measurement ran: per core, stacked, from the run monitor."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fidelnet.fidelity.record import CoreSeries, MonitorRecord
from fidelnet.report.plots.base import DPI, SIZE, no_data, save, text

__all__ = ["CPU_SHARES", "MAX_CORES", "cpu_per_core", "cpu_per_core_figure"]

CPU_SHARES: tuple[tuple[str, str], ...] = (
    ("user", "#4c72b0"),
    ("system", "#dd8452"),
    ("softirq", "#c44e52"),
    ("irq", "#8172b3"),
    ("steal", "#333333"),
)
"""The shares stacked, bottom up, and their colours (iowait and idle are not drawn:
the white above the stack is the core's idle time)."""

MAX_CORES = 8
"""At most this many panels: on a bigger machine, the busiest cores in the window."""


def _busy(core: CoreSeries, t: Sequence[float], window: tuple[float, float]) -> float:
    """The core's mean busy share (everything stacked) within the window."""
    start, end = window
    total, n = 0.0, 0
    for k, tk in enumerate(t):
        if start <= tk <= end:
            total += sum(getattr(core, name)[k] for name, _c in CPU_SHARES)
            n += 1
    return total / n if n else 0.0


def _cores(rec: MonitorRecord) -> tuple[list[CoreSeries], int]:
    cores = list(rec.cpu.cores)
    if len(cores) <= MAX_CORES:
        return cores, len(cores)
    t = rec.cpu.t_s
    busiest = sorted(cores, key=lambda c: -_busy(c, t, rec.window_s))[:MAX_CORES]
    return sorted(busiest, key=lambda c: c.cpu), len(cores)


def _panel(ax: Axes, core: CoreSeries, rec: MonitorRecord, first: bool) -> None:
    t = rec.cpu.t_s
    series = [getattr(core, name) for name, _c in CPU_SHARES]
    n = min([len(t), *(len(s) for s in series)])
    start, end = rec.window_s
    ax.axvspan(
        start,
        end,
        color="#ffe082",
        alpha=0.35,
        zorder=0,
        gid="window",
        label="measured traffic" if first else None,
    )
    for x in (start, end):
        ax.axvline(x, color="#8d6e00", linestyle="--", linewidth=0.9, zorder=3)
    if n:
        ax.stackplot(
            t[:n],
            *[s[:n] for s in series],
            labels=[name if first else "_" + name for name, _c in CPU_SHARES],
            colors=[c for _n, c in CPU_SHARES],
            alpha=0.9,
            zorder=2,
        )
    else:
        no_data(ax, "CPU samples")
    pressure = rec.cpu.pressure_pct
    if pressure:
        m = min(len(t), len(pressure))
        ax.plot(
            t[:m],
            pressure[:m],
            color="#1b5e20",
            linewidth=1.3,
            zorder=4,
            gid="pressure",
            label="CPU pressure (PSI some)" if first else None,
        )
    ax.set_ylim(0, 100)
    ax.set_xlim(0, max(rec.duration_s, t[-1] if t else 0.0, end))
    ax.set_ylabel(f"cpu{core.cpu} (%)")
    ax.grid(True, alpha=0.35)


def cpu_per_core_figure(rec: MonitorRecord, *, title: str | None = None) -> Figure:
    """One panel per core (at most :data:`MAX_CORES`): user, system, softirq, irq and
    steal stacked in percent of the core over time, the measured traffic's window
    shaded (``gid="window"``) between dashed lines, the machine's CPU pressure as a
    line (``gid="pressure"``) when it was read."""
    cores, total = _cores(rec)
    rows = max(len(cores), 1)
    fig = Figure(figsize=(SIZE[0], 1.2 + 1.55 * rows), dpi=DPI)
    FigureCanvasAgg(fig)
    fig.set_layout_engine("constrained")
    axes = [fig.add_subplot(rows, 1, i + 1) for i in range(rows)]
    for i, (ax, core) in enumerate(zip(axes, cores, strict=False)):
        _panel(ax, core, rec, i == 0)
        if i:
            ax.sharex(axes[0])
        if i < rows - 1:
            ax.tick_params(labelbottom=False)
    if not cores:
        no_data(axes[0], "CPU samples")
    axes[-1].set_xlabel("time (s, from the monitor's start)")
    shown = f" (busiest {len(cores)} of {total})" if total > len(cores) else ""
    axes[0].set_title(text(title or "CPU per core") + shown)
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=7, fontsize="small")
    return fig


def cpu_per_core(
    rec: MonitorRecord,
    out: str | os.PathLike[str],
    *,
    title: str | None = None,
    svg: bool = False,
) -> Path:
    """Save :func:`cpu_per_core_figure` to ``out``."""
    return save(cpu_per_core_figure(rec, title=title), out, svg=svg)
