"""The report's plots, drawn with matplotlib's object API (no pyplot, no global state).

Each plot has two functions: ``<name>_figure(results, ...)`` builds and returns the
:class:`~matplotlib.figure.Figure` (for tests and for callers that want to change
it), and ``<name>(results, out, ...)`` saves it as PNG (and SVG next to it with
``svg=True``) and returns the PNG's path. ``results`` is a list of ``(label,
result)``; each result gives one data line, and data lines carry ``gid="series"``
(reference lines: ``"floor"``, ``"ndr"``, ``"pdr"``, ``"bottleneck"``).

- :func:`hdr_percentiles`: HDR percentile plot as in CIMininet's Fig. 1 and 5:
  log-log, x is 1/(1-p) labelled 0%, 90%, 99%, 99.9%, ..., y latency in µs.
- :func:`rate_over_time`: received rate per interval (CIMininet Fig. 4); the
  receiver's last, partial interval is scaled to its length or left out
  (:func:`rate_points`), never drawn as a drop.
- :func:`worst_case_over_time`: each interval's maximum latency as points on a log
  axis (HVNet Fig. 4), with the measurement floor's p99.9 as a line.
- :func:`zero_loss_trials`: a zero-loss search's trials, offered rate per trial,
  marked by loss, with the NDR and PDR found.
- :func:`tcp_goodput`: receiver goodput per flow and interval, warm-up shaded, the
  bottleneck's capacity as a line (a last interval shorter than half a step left
  out: :func:`tcp_points`).
- :func:`around_events`: a flow with events: received rate and p99/max latency per
  interval, each event a vertical line, each outage (from the packets) shaded.
- :func:`cpu_per_core`: what each core did while the measurement ran (the run
  monitor's record): user, system, softirq, irq, steal stacked, the measured
  traffic's window shaded, the CPU pressure as a line.

``hdr_percentiles``, ``rate_over_time`` and ``zero_loss_trials`` take ``colors``
(one per result: a stack keeps its colour across comparison plots) and ``small``
(a figure to be shown two abreast).
"""

from __future__ import annotations

from fidelnet.report.plots.base import save, series_lines
from fidelnet.report.plots.cpu import cpu_per_core, cpu_per_core_figure
from fidelnet.report.plots.events import around_events, around_events_figure
from fidelnet.report.plots.latency import (
    LatencySource,
    hdr_percentiles,
    hdr_percentiles_figure,
    nines_label,
    worst_case_over_time,
    worst_case_over_time_figure,
)
from fidelnet.report.plots.rates import (
    rate_over_time,
    rate_over_time_figure,
    rate_points,
    tcp_goodput,
    tcp_goodput_figure,
    tcp_points,
    zero_loss_trials,
    zero_loss_trials_figure,
)

__all__ = [
    "LatencySource",
    "around_events",
    "around_events_figure",
    "cpu_per_core",
    "cpu_per_core_figure",
    "hdr_percentiles",
    "hdr_percentiles_figure",
    "nines_label",
    "rate_over_time",
    "rate_over_time_figure",
    "rate_points",
    "save",
    "series_lines",
    "tcp_goodput",
    "tcp_goodput_figure",
    "tcp_points",
    "worst_case_over_time",
    "worst_case_over_time_figure",
    "zero_loss_trials",
    "zero_loss_trials_figure",
]
