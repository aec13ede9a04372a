"""Verdicts on the page: the banner for the whole report, a cell per result in the
headline table, and each result's verdict with all its reasons.

A result's level is its verdict's (``trusted``, ``degraded``, ``untrusted``) or
``not-judged`` when the file carries none (written before verdicts existed): grey,
never shown as trusted. The report's level is the worst, where "not judged" ranks
between trusted and degraded: one unjudged result keeps the banner from turning
green, a known problem outranks it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from fidelnet.fidelity.verdict import Reason
from fidelnet.report import formatting as fmt
from fidelnet.report.markup import Item, Result, e

__all__ = [
    "LEVELS",
    "NOT_JUDGED",
    "banner",
    "block",
    "cell",
    "first_reason",
    "level_of",
    "quantity",
    "worst",
]

NOT_JUDGED = "not-judged"

LEVELS = ("trusted", NOT_JUDGED, "degraded", "untrusted")
"""The page's levels, best to worst."""

NAMES = {
    "trusted": "trusted",
    NOT_JUDGED: "not judged",
    "degraded": "degraded",
    "untrusted": "untrusted",
}

MEANING = {
    "trusted": "nothing the run watched says the number is off",
    "degraded": "the number may be off: check the reasons before using it",
    "untrusted": "the number is known to be wrong: do not use it",
    NOT_JUDGED: (
        "no verdict in the result file (written before verdicts existed, or measured "
        "outside a network): nothing says whether to trust the number"
    ),
}

_MAX_BANNER_REASONS = 4


def level_of(r: Result) -> str:
    return r.verdict.level if r.verdict is not None else NOT_JUDGED


def worst(levels: Iterable[str]) -> str:
    """The worst of ``levels`` on the page's scale (``not-judged`` when none)."""
    return max(levels, key=LEVELS.index, default=NOT_JUDGED)


def _problems(r: Result) -> list[Reason]:
    return r.verdict.problems() if r.verdict is not None else []


def first_reason(r: Result) -> str:
    """The first reason that lowered the level, as text ("" when there is none)."""
    bad = _problems(r)
    return bad[0].message if bad else ""


def quantity(value: float | None, unit: str | None) -> str:
    """A reason's measured value or threshold with its unit: ``1,204 packets``,
    ``12.5 %``, ``80.2 µs`` (unit ``ns``), ``0.5 %`` (unit ``ratio``)."""
    if value is None:
        return "—"
    if unit == "ns":
        return fmt.ns(value)
    if unit == "ratio":
        return fmt.ratio(value)
    num = f"{int(value):,}" if float(value).is_integer() else f"{value:.3g}"
    return f"{num} {unit}" if unit else num


def _pill(level: str, text: str | None = None) -> str:
    shown = NAMES.get(level, level) if text is None else text
    return f'<span class="pill verdict-{e(level)}">{e(shown)}</span>'


def cell(r: Result) -> str:
    """The headline table's verdict cell: the level, coloured."""
    level = level_of(r)
    return f'<td class="verdict-{e(level)}" data-level="{e(level)}">{e(NAMES[level])}</td>'


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _link(label: str, s: str) -> str:
    return f'<a href="#r-{e(s)}">{e(label)}</a>'


def banner(items: Sequence[Item]) -> str:
    """The report's verdict (``id="verdict"``, ``data-level``): its worst level and
    the first reason for it, how many results are at each level, then the top
    reasons grouped by code, each with the first result it was seen in (a link) and
    how many others share it."""
    if not items:
        return ""
    levels = [(label, s, rf.result, level_of(rf.result)) for label, s, rf in items]
    top = worst(level for *_x, level in levels)
    n = len(levels)
    at_top = [x for x in levels if x[3] == top]
    lead_from = next((x for x in at_top if first_reason(x[2])), None)
    first = first_reason(lead_from[2]) if lead_from else ""
    name = NAMES[top]
    if n == 1:
        lead = f"{_link(at_top[0][0], at_top[0][1])}: {e(first or MEANING[top])}"
    elif top == "trusted":
        lead = e(f"all {n} results trusted: {MEANING['trusted']}")
    elif top == NOT_JUDGED and len(at_top) == n:
        lead = e(f"none of the {n} results carries a verdict")
    else:
        lead = e(f"{len(at_top)} of {n} results {name}")
        if lead_from is not None:
            lead += f": {e(first)} ({_link(lead_from[0], lead_from[1])})"
    counts = [
        _pill(level, f"{sum(1 for x in levels if x[3] == level)} {NAMES[level]}")
        for level in reversed(LEVELS)
        if any(x[3] == level for x in levels)
    ]
    groups: dict[tuple[str, str], list[tuple[str, str, Reason]]] = {}
    for label, s, r, _level in sorted(levels, key=lambda x: -LEVELS.index(x[3])):
        for reason in _problems(r):
            groups.setdefault((reason.level, reason.code), []).append((label, s, reason))
    ordered = sorted(groups.values(), key=lambda g: (-LEVELS.index(g[0][2].level), -len(g)))
    if ordered and len(ordered[0]) == 1 and ordered[0][0][2].message == first and n > 1:
        ordered = ordered[1:]  # the head says it already, with its link
    lines = []
    for group in ordered[:_MAX_BANNER_REASONS]:
        label, s, reason = group[0]
        others = len({x[0] for x in group}) - 1
        more = f' <span class="muted">(and {_plural(others, "other result")})</span>'
        lines.append(
            f"<li>{_pill(reason.level)} {_link(label, s)}: "
            f"{e(reason.message)}{more if others else ''}</li>"
        )
    if len(ordered) > _MAX_BANNER_REASONS:
        rest = len(ordered) - _MAX_BANNER_REASONS
        lines.append(
            f'<li class="muted">{_plural(rest, "more kind")} of reason: see each result below</li>'
        )
    unjudged = [label for label, _s, _r, level in levels if level == NOT_JUDGED]
    if unjudged and top != NOT_JUDGED:
        shown = ", ".join(unjudged[:6]) + (", …" if len(unjudged) > 6 else "")
        lines.append(f"<li>{_pill(NOT_JUDGED)} no verdict in the file: {e(shown)}</li>")
    reasons = f'<ul class="verdict-reasons">{"".join(lines)}</ul>' if lines else ""
    return (
        f'<section id="verdict" class="verdict verdict-{e(top)}" data-level="{e(top)}">'
        f'<p class="verdict-head"><span class="verdict-word">{e(name.upper())}</span> — '
        f"{lead}</p>"
        f'<p class="verdict-counts">{" ".join(counts)} <span class="muted">'
        f"{e(name.capitalize())}: {e(MEANING[top])}.</span></p>"
        f"{reasons}</section>"
    )


def block(r: Result) -> str:
    """A result's verdict: its level and what it means, then every reason as a table
    (code, level, message, measured value, threshold, source)."""
    level = level_of(r)
    v = r.verdict
    notes = []
    if v is not None:
        notes.append("monitored" if v.monitored else "not monitored")
        if v.profile:
            notes.append(f"machine profile {v.profile}")
    extra = f' <span class="muted">({e(", ".join(notes))})</span>' if notes else ""
    out = [
        f'<div class="verdict-box verdict-{e(level)}" data-level="{e(level)}">'
        f"{_pill(level, NAMES[level].upper())} {e(MEANING[level])}.{extra}</div>"
    ]
    if v is not None and v.reasons:
        rows = "".join(
            f"<tr><td><code>{e(x.code)}</code></td>"
            f'<td class="verdict-{e(x.level)}">{e(NAMES.get(x.level, x.level))}</td>'
            f"<td>{e(x.message)}</td>"
            f'<td class="num">{e(quantity(x.value, x.unit))}</td>'
            f'<td class="num">{e(quantity(x.threshold, x.unit))}</td>'
            f"<td>{e(x.source or '—')}</td></tr>"
            for x in v.reasons
        )
        head = "".join(
            f"<th>{h}</th>" for h in ("code", "level", "reason", "measured", "threshold", "source")
        )
        out.append(
            f'<table class="reasons"><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>'
        )
    return "".join(out)
