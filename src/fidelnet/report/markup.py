"""The page's building blocks: CSS, escaping, tables, flags, and the plot figures."""

from __future__ import annotations

import html
import os
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from fidelnet.measure.results import (
    Flag,
    LatencySummary,
    ResultFile,
    SelftestResult,
    TcpResult,
    UdpResult,
    ZeroLossResult,
)
from fidelnet.report import formatting as fmt

__all__ = [
    "CSS",
    "KIND_NAMES",
    "Item",
    "Plots",
    "Result",
    "all_flags",
    "e",
    "flags",
    "kv",
    "latency_cells",
    "slug",
    "table",
]

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1100px;
  padding: 0 1.2em 3em; color: #1b1b1b; background: #fff; }
h1 { margin: 0.8em 0 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ccc; }
h3 { margin-top: 1.3em; }
table { border-collapse: collapse; margin: 0.6em 0; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid #d4d4d4; padding: 0.2em 0.6em; text-align: left;
  vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; }
table.kv th { width: 13em; }
code { font-size: 0.92em; background: #f4f4f4; padding: 0 0.2em; word-break: break-all; }
ul.flags { list-style: none; padding: 0; }
.flag { background: #fff1e0; border-left: 5px solid #e07000; padding: 0.4em 0.7em;
  margin: 0.35em 0; font-weight: 600; }
.flag code { background: transparent; font-weight: 700; margin-right: 0.5em; }
.flag-count, .bad { color: #b03000; font-weight: 700; }
.warning { background: #fde8e8; border-left: 5px solid #c62828; padding: 0.6em 0.8em;
  font-weight: 600; }
.no-flags, .muted { color: #666; }
figure { margin: 1em 0; } figure img { max-width: 100%; height: auto;
  border: 1px solid #e2e2e2; }
figcaption { color: #555; font-size: 0.9em; }
ul.plain { margin: 0; padding-left: 1.1em; }
footer { margin-top: 3em; color: #777; font-size: 0.85em; }
.verdict-trusted { --c: #2e7d32; --bg: #e8f5e9; --fg: #fff; --text: #1b5e20; }
.verdict-degraded { --c: #f9a825; --bg: #fff6d8; --fg: #2b1d00; --text: #8a5300; }
.verdict-untrusted { --c: #c62828; --bg: #fdecea; --fg: #fff; --text: #b71c1c; }
.verdict-not-judged { --c: #757575; --bg: #f0f0f0; --fg: #fff; --text: #555; }
#verdict, .verdict-box { background: var(--bg); border-left: 10px solid var(--c);
  padding: 0.6em 1em; margin: 0.8em 0; border-radius: 3px; }
#verdict p { margin: 0.2em 0; }
.verdict-head { font-size: 1.15em; font-weight: 600; }
.verdict-word { color: var(--text); font-weight: 800; letter-spacing: 0.03em; }
ul.verdict-reasons { margin: 0.4em 0 0.1em; padding-left: 0; list-style: none; }
ul.verdict-reasons li { margin: 0.2em 0; }
.pill { display: inline-block; background: var(--c); color: var(--fg); font-weight: 700;
  font-size: 0.8em; padding: 0 0.55em; border-radius: 0.8em; line-height: 1.5; }
td.verdict-trusted, td.verdict-degraded, td.verdict-untrusted, td.verdict-not-judged {
  background: var(--bg); color: var(--text); font-weight: 700; white-space: nowrap; }
table.reasons td.num, table.reasons code { white-space: nowrap; word-break: normal; }
.pairs { display: grid; grid-template-columns: repeat(auto-fill, minmax(440px, 1fr));
  gap: 0 1em; }
.pairs figure { margin: 0.5em 0; }
details#provenance { margin-top: 2em; border-top: 1px solid #ccc; padding-top: 0.3em; }
details#provenance summary { cursor: pointer; }
details#provenance summary h2 { display: inline; border: 0; font-size: 1.3em; }
details[open] .fold-hint { display: none; }
section.extra-table h2, #overview h2 { margin-top: 1.2em; font-size: 1.3em; }
section.extra-figures figure { display: inline-block; margin: 0.5em 1em 0.5em 0; max-width: 48%; }
section.extra-figures img { max-width: 100%; }
section.extra-figures figcaption { font-size: 0.9em; color: #555; }
table#headline td:first-child, table#headline td:nth-child(2),
  table#headline td:last-child { white-space: nowrap; }
"""

Result = UdpResult | ZeroLossResult | SelftestResult | TcpResult

Item = tuple[str, str, ResultFile]
"""A result on the page: its label, its slug (unique, for ids and file names), its file."""

KIND_NAMES = {
    "udp": "UDP packet run",
    "zero_loss": "zero-loss search",
    "selftest": "measurement self-test",
    "tcp": "TCP goodput",
}


def e(value: object) -> str:
    """``value`` as escaped HTML text (None as a dash)."""
    return html.escape("—" if value is None else str(value), quote=True)


def slug(label: str, taken: set[str]) -> str:
    """A file-name and id-safe form of ``label`` not in ``taken`` (and added to it)."""
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "result"
    out, n = base, 2
    while out in taken:
        out, n = f"{base}-{n}", n + 1
    taken.add(out)
    return out


def kv(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table of already-escaped values."""
    body = "".join(f"<tr><th>{e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


def table(header: Sequence[str], rows: Iterable[Sequence[object]], cls: str = "") -> str:
    head = "".join(f"<th>{e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' class="{e(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def flags(found: Sequence[tuple[str, Flag]]) -> str:
    if not found:
        return '<p class="no-flags">No flags.</p>'
    items = "".join(
        f'<li class="flag" data-flag="{e(f.code)}"><code>{e(f.code)}</code> '
        f"{e(where + ': ') if where else ''}{e(f.message)}</li>"
        for where, f in found
    )
    return f'<ul class="flags">{items}</ul>'


def all_flags(r: Result) -> list[tuple[str, Flag]]:
    out = [("", f) for f in r.flags]
    if isinstance(r, SelftestResult):
        for run in r.runs:
            out.extend((f"run at {fmt.pps(run.requested_pps)}", f) for f in run.flags)
    return out


def latency_cells(lat: LatencySummary) -> list[str]:
    """p50, p99, p99.9, max."""
    return [fmt.ns(lat.p50_ns), fmt.ns(lat.p99_ns), fmt.ns(lat.p999_ns), fmt.ns(lat.max_ns)]


class Plots:
    """Makes plots into ``plot_dir`` and returns their ``<figure>`` elements."""

    def __init__(self, plot_dir: Path, page_dir: Path, svg: bool) -> None:
        self.dir = plot_dir
        self.page_dir = page_dir
        self.svg = svg

    def figure(
        self, kind: str, slug: str, alt: str, caption: str, draw: Callable[[Path], Path]
    ) -> str:
        path = draw(self.dir / f"{slug}-{kind}.png")
        src = Path(os.path.relpath(path, self.page_dir)).as_posix()
        return (
            f'<figure><img src="{e(src)}" alt="{e(alt)}" data-plot="{e(kind)}" '
            f'data-result="{e(slug)}"><figcaption>{e(caption)}</figcaption></figure>'
        )
