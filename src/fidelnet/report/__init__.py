"""Reports: plots of measurement results and one HTML page that shows them.

``fidelnet report DIR`` (or :func:`render_dir`) reads every result file in a
directory and writes ``DIR/report.html`` with its plots in ``DIR/plots/``;
:func:`render` does the same for results already in memory. The plots themselves
are in :mod:`fidelnet.report.plots`. See docs/reports.md.
"""

from __future__ import annotations

from fidelnet.report.html import PLOT_KINDS, Table, render, render_dir
from fidelnet.report.load import ReportError, load_dir

__all__ = ["PLOT_KINDS", "ReportError", "Table", "load_dir", "render", "render_dir"]
