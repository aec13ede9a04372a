"""The HTML report: one page, inline CSS, no JavaScript, no external resources.

The page leads with the answer. From the top: the title; the verdict banner for
the whole report (``id="verdict"``, ``data-level`` its worst level); the callers'
extra tables (a scenario's checks, a benchmark's side-by-side summary); the
headline table (``id="headline"``: per result its headline number, its verdict and
first reason); the compared stacks overlaid, one plot per rate; one section per
result, each beginning with its verdict and all its reasons; the measurement
floor; skipped files; and, folded, the provenance (``<details id="provenance">``:
shared values once, differing ones once each with the results that carry them).

Plots are PNG files in ``<out_dir>/plots/`` referenced by a path relative to the
page (``plots/NAME.png`` when the page is ``<out_dir>/report.html``). Every plot's
``<img>`` carries ``alt`` text, ``data-plot`` (one of :data:`PLOT_KINDS`) and
``data-result`` (the result's label, or the comparison's name); every flag is an
element with ``class="flag"``. Every string from a result is escaped.

The sections are built in :mod:`fidelnet.report.verdicts` (banner, verdict cells
and blocks), :mod:`fidelnet.report.overview` (headline table, extra tables),
:mod:`fidelnet.report.compare` (results drawn together),
:mod:`fidelnet.report.sections` (one section per result) and
:mod:`fidelnet.report.appendix` (floor, provenance), from the pieces in
:mod:`fidelnet.report.markup`.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from pathlib import Path

from fidelnet._version import __version__
from fidelnet.log import logger
from fidelnet.measure.results import ResultFile
from fidelnet.report.appendix import floor_section, provenance
from fidelnet.report.compare import comparison
from fidelnet.report.load import ReportError, Skipped, load_dir, no_results_message
from fidelnet.report.markup import CSS, Plots, e, slug
from fidelnet.report.overview import Table, extra_figures, extra_tables, overview
from fidelnet.report.overview import skipped as skipped_files
from fidelnet.report.sections import section
from fidelnet.report.verdicts import banner

__all__ = ["PLOT_KINDS", "Table", "render", "render_dir"]

PLOT_KINDS = ("hdr", "rate", "worst-case", "zero-loss", "tcp-goodput", "cpu")
"""The values of the ``data-plot`` attribute."""


def render(
    results: Sequence[tuple[str, ResultFile]],
    out_dir: str | os.PathLike[str],
    tables: Sequence[Table] = (),
    *,
    output: str | os.PathLike[str] | None = None,
    svg: bool = False,
    skipped: Sequence[Skipped] = (),
    figures: Sequence[tuple[str, Path]] = (),
) -> Path:
    """Write the plots into ``out_dir/plots/`` and the page to ``output`` (default
    ``out_dir/report.html``); returns the page's path. ``results`` are ``(label,
    result file)`` in the order shown; ``tables`` are extra ``(title, header,
    rows)`` tables shown after the verdict banner, before the headline table (a
    column headed "verdict" is coloured by level); ``figures`` are ``(title, image
    file)`` a caller made itself, shown after its tables."""
    if not results and not tables:
        raise ReportError("no results to report")
    root = Path(out_dir)
    page = Path(output) if output is not None else root / "report.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    plot = Plots(root / "plots", page.parent.resolve(), svg)
    plot.dir.mkdir(parents=True, exist_ok=True)
    plot.dir = plot.dir.resolve()

    taken: set[str] = set()
    items = [(label, slug(label, taken), rf) for label, rf in results]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    n = len(items)
    body = [
        "<header><h1>fidelnet report</h1>",
        f'<p class="muted">{n} result{"s" if n != 1 else ""} · generated {e(now)}</p>',
        "</header>",
        banner(items),
        extra_tables(tables),
        extra_figures(figures, page.parent),
        overview(items),
        comparison(items, plot, taken),
        *(section(label, s, rf, plot) for label, s, rf in items),
        floor_section(items) if items else "",
        skipped_files(skipped),
        provenance(items),
        f"<footer>fidelnet {e(__version__)}</footer>",
    ]
    doc = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>fidelnet report: {e(', '.join(label for label, _s, _r in items[:4]))}"
        f"{'…' if n > 4 else ''}</title>"
        f"<style>{CSS}</style></head><body>" + "\n".join(b for b in body if b) + "</body></html>\n"
    )
    tmp = page.with_name(page.name + ".tmp")
    tmp.write_text(doc, encoding="utf-8")
    tmp.replace(page)
    return page


def render_dir(
    directory: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    tables: Sequence[Table] = (),
    *,
    svg: bool = False,
    figures: Sequence[tuple[str, Path]] = (),
) -> Path:
    """Render every result file in ``directory`` (see :func:`render`); JSON files that
    are not result files are skipped with a warning. Raises :class:`ReportError`
    when there is none."""
    results, skipped = load_dir(directory)
    for path, why in skipped:
        logger.warning("report: skipped %s: %s", path.name, why)
    if not results:
        raise ReportError(no_results_message(directory, skipped))
    return render(
        results, directory, tables, output=output, svg=svg, skipped=skipped, figures=figures
    )
