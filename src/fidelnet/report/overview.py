"""The page's summary sections: the headline table (one line per result with its
verdict), the callers' extra tables and figures, and the files that were skipped."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from pathlib import Path

from fidelnet.report.load import Skipped
from fidelnet.report.markup import KIND_NAMES, Item, all_flags, e
from fidelnet.report.sections import headline
from fidelnet.report.verdicts import cell, first_reason

__all__ = ["Table", "extra_figures", "extra_tables", "overview", "skipped"]

Table = tuple[str, Sequence[str], Sequence[Sequence[object]]]
"""An extra table for the page: ``(title, header, rows)``; cells are shown with
``str()`` (None as a dash)."""


def overview(items: Sequence[Item]) -> str:
    """The headline table (``id="headline"``): per result its headline number, its
    verdict (a cell of class ``verdict-<level>``), the first reason and its flags."""
    if not items:
        return ""
    rows = []
    for label, slug, rf in items:
        r = rf.result
        n = len(all_flags(r))
        flags = f'<span class="flag-count">{n} flag{"s" if n != 1 else ""}</span>' if n else "none"
        reason = first_reason(r)
        rows.append(
            f'<tr><td><a href="#r-{e(slug)}">{e(label)}</a></td>'
            f"<td>{e(KIND_NAMES.get(r.kind, r.kind))}</td>"
            f"<td>{e(headline(r))}</td>{cell(r)}"
            f"<td>{e(reason) if reason else '—'}</td><td>{flags}</td></tr>"
        )
    head = "".join(
        f"<th>{h}</th>" for h in ("result", "kind", "in short", "verdict", "first reason", "flags")
    )
    return (
        '<section id="overview"><h2>Results</h2><table id="headline"><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _verdict_column(header: Sequence[str]) -> int | None:
    return next((i for i, h in enumerate(header) if str(h).strip().lower() == "verdict"), None)


def _extra_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A caller's table; a column headed "verdict" is coloured by the level its cells
    start with."""
    col = _verdict_column(header)
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            word = re.split(r"[\s:;,]", str(c).strip(), maxsplit=1)[0].lower() if c else ""
            if i == col and word in ("trusted", "degraded", "untrusted"):
                cells.append(f'<td class="verdict-{word}">{e(c)}</td>')
            else:
                cells.append(f"<td>{e(c)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def extra_tables(tables: Sequence[Table]) -> str:
    parts = []
    for title, header, rows in tables:
        parts.append(f'<section class="extra-table"><h2>{e(title)}</h2>')
        parts.append(_extra_table(header, rows))
        parts.append("</section>")
    return "".join(parts)


def extra_figures(figures: Sequence[tuple[str, Path]], page_dir: Path) -> str:
    """Figures a benchmark made itself (title, image file), after its tables."""
    if not figures:
        return ""
    parts = ['<section class="extra-figures">']
    for title, path in figures:
        try:
            src = os.path.relpath(Path(path).resolve(), page_dir.resolve())
        except ValueError:
            src = str(path)
        parts.append(
            f'<figure><img src="{e(src)}" alt="{e(title)}" loading="lazy">'
            f"<figcaption>{e(title)}</figcaption></figure>"
        )
    parts.append("</section>")
    return "".join(parts)


def skipped(files: Sequence[Skipped]) -> str:
    if not files:
        return ""
    items = "".join(f"<li><code>{e(p.name)}</code>: {e(why)}</li>" for p, why in files)
    return (
        '<section id="skipped"><h2>Skipped files</h2>'
        f'<p class="muted">JSON files that are not fidelnet result files:</p><ul>{items}</ul>'
        "</section>"
    )
