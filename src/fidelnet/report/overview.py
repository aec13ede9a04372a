"""The page's summary sections: one line per result, the callers' extra tables, and
the files that were skipped."""

from __future__ import annotations

from collections.abc import Sequence

from fidelnet.report.load import Skipped
from fidelnet.report.markup import KIND_NAMES, Item, all_flags, e, table
from fidelnet.report.sections import headline

__all__ = ["Table", "extra_tables", "overview", "skipped"]

Table = tuple[str, Sequence[str], Sequence[Sequence[object]]]
"""An extra table for the page: ``(title, header, rows)``; cells are shown with
``str()`` (None as a dash)."""


def overview(items: Sequence[Item]) -> str:
    rows = []
    for label, slug, rf in items:
        n = len(all_flags(rf.result))
        flags = f'<span class="flag-count">{n} flag{"s" if n != 1 else ""}</span>' if n else "none"
        rows.append(
            f'<tr><td><a href="#r-{e(slug)}">{e(label)}</a></td>'
            f"<td>{e(KIND_NAMES.get(rf.result.kind, rf.result.kind))}</td>"
            f"<td>{e(headline(rf.result))}</td><td>{flags}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("result", "kind", "in short", "flags"))
    return (
        '<section id="overview"><h2>Results</h2><table><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def extra_tables(tables: Sequence[Table]) -> str:
    parts = []
    for title, header, rows in tables:
        parts.append(f'<section class="extra-table"><h2>{e(title)}</h2>')
        parts.append(table(header, rows))
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
