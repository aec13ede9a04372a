"""The page's reference sections, after the results: the measurement floor they can
be held against, and where they came from (provenance, folded)."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence
from typing import Any

from fidelnet.measure.provenance import Provenance
from fidelnet.measure.results import FloorSummary, SelftestResult
from fidelnet.report import formatting as fmt
from fidelnet.report.compare import stack_of
from fidelnet.report.markup import Item, e, kv, table

__all__ = ["floor_section", "floors", "provenance", "who"]


def _machine(p: Provenance) -> str:
    m = p.machine
    parts = [f"{m.hostname}: {m.cpus} CPUs ({m.cpu_model})", f"kernel {m.kernel}"]
    if m.mem_total_kib:
        parts.append(f"{m.mem_total_kib / 2**20:.1f} GiB")
    if m.virtualized is not None:
        parts.append("virtual machine" if m.virtualized else "not virtualized")
    return ", ".join(parts)


def _virtual_time(vt: dict[str, Any]) -> str:
    """A dilated run's TDF timeline and the programs it could not dilate, in a line."""
    if not vt:
        return "—"
    steps = [f"TDF {s['tdf']:g} ({s['reason']})" for s in vt.get("timeline", [])]
    text = " → ".join(steps) or f"TDF {vt.get('tdf', 1):g}"
    missed = [u["path"] for u in vt.get("unreached", [])]
    if missed:
        text += "; ran undilated: " + ", ".join(missed)
    return text


_PROVENANCE: list[tuple[str, Callable[[Provenance], str], bool]] = [
    ("command", lambda p: shlex.join(p.command), True),
    ("time (UTC)", lambda p: p.time_utc, False),
    ("fidelnet", lambda p: p.fidelnet, False),
    ("python", lambda p: p.python, False),
    ("tools", lambda p: "; ".join(f"{k} {v}" for k, v in sorted(p.tools.items())) or "—", False),
    ("machine", _machine, False),
    ("backends", lambda p: ", ".join(f"{k}: {v}" for k, v in p.backends.items()) or "—", False),
    ("topology hash", lambda p: p.topology_hash or "—", True),
    ("run id", lambda p: p.run_id or "—", True),
    ("seed", lambda p: "—" if p.seed is None else str(p.seed), False),
    ("virtual time", lambda p: _virtual_time(p.virtual_time), False),
]


def who(labels: Sequence[str], everyone: Sequence[str]) -> str:
    """``labels`` in few words: ``all 36 results``, or per stack ``fidelnet-… (18
    results)`` for a stack whose results are all there, the labels otherwise."""
    if len(everyone) > 1 and set(labels) >= set(everyone):
        return f"all {len(everyone)} results"
    stacks: dict[str, list[str]] = {}
    for label in everyone:
        stacks.setdefault(stack_of(label), []).append(label)
    out: list[str] = []
    for stack, members in stacks.items():
        mine = [x for x in members if x in labels]
        if len(members) > 1 and len(mine) == len(members) and len(stacks) > 1:
            out.append(f"{stack}-… ({len(members)} results)")
        else:
            out.extend(mine)
    return ", ".join(out)


def _show(value: str, code: bool) -> str:
    return f"<code>{e(value)}</code>" if code and value != "—" else e(value)


def provenance(items: Sequence[Item]) -> str:
    """Where the results came from, folded (``<details id="provenance">``): the
    values every result shares once, then each value that differs once with the
    results that carry it."""
    if not items:
        return ""
    shared: list[tuple[str, str]] = []
    differ: list[tuple[str, list[tuple[str, list[str]]], bool]] = []
    for name, get, code in _PROVENANCE:
        by_value: dict[str, list[str]] = {}
        for label, _slug, rf in items:
            by_value.setdefault(get(rf.provenance), []).append(label)
        if len(by_value) == 1:
            shared.append((name, _show(next(iter(by_value)), code)))
        else:
            differ.append((name, list(by_value.items()), code))
    n = len(items)
    everyone = [label for label, _s, _r in items]
    names = [name for name, _v, _c in differ]
    if not names:
        what = "the same for every result"
    elif len(names) == 1:
        what = f"{names[0]} differs between results"
    else:
        what = ", ".join(names[:-1]) + f" and {names[-1]} differ between results"
    parts = [
        '<details id="provenance"><summary><h2>Provenance</h2> '
        f'<span class="muted">{e(what)}<span class="fold-hint"> (click to show)</span>'
        "</span></summary>",
    ]
    if shared:
        title = "Shared by all results" if n > 1 else "The result"
        parts.append(f"<h3>{e(title)}</h3>" + kv(shared))
    if differ:
        rows = []
        for name, values, code in differ:
            for k, (value, labels) in enumerate(values):
                head = f'<th rowspan="{len(values)}">{e(name)}</th>' if k == 0 else ""
                whose = e(who(labels, everyone))
                rows.append(f"<tr>{head}<td>{_show(value, code)}</td><td>{whose}</td></tr>")
        parts.append(
            "<h3>Different between results</h3>"
            '<table class="kv provenance-differs"><thead><tr><th>field</th><th>value</th>'
            f"<th>results</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        )
    parts.append("</details>")
    return "".join(parts)


def floors(items: Sequence[Item]) -> list[tuple[FloorSummary, list[str]]]:
    """Each distinct floor and the results that carry it."""
    out: list[tuple[FloorSummary, list[str]]] = []
    for label, _, rf in items:
        found = [rf.floor] if rf.floor is not None else []
        if isinstance(rf.result, SelftestResult):
            found.append(rf.result.floor)
        for floor in found:
            for known, users in out:
                if known == floor:
                    if label not in users:
                        users.append(label)
                    break
            else:
                out.append((floor, [label]))
    return out


def floor_section(items: Sequence[Item]) -> str:
    found = floors(items)
    parts = ['<section id="floor"><h2>Measurement floor</h2>']
    if not found:
        parts.append(
            '<p class="warning floor-missing">Floor not measured — run '
            "<code>fidelnet measure selftest</code> and measure again, so that every "
            "number can be compared with the smallest latency and the highest rate the "
            "measurement itself can see.</p>"
        )
    else:
        parts.append(
            "<p>The smallest latency and the highest rate the measurement itself can "
            "see (a bare veth pair); a number near the floor says more about the "
            "measurement than about the network.</p>"
        )
        rows = [
            [
                fmt.ns(f.latency_p50_ns),
                fmt.ns(f.latency_p999_ns),
                fmt.ns(f.latency_max_ns),
                fmt.pps(f.max_send_pps),
                fmt.pps(f.max_zero_loss_pps),
                f.measured_at,
                f.source,
                who(users, [label for label, _s, _r in items]),
            ]
            for f, users in found
        ]
        parts.append(
            table(
                [
                    "latency p50",
                    "latency p99.9",
                    "latency max",
                    "max send rate",
                    "max zero-loss rate",
                    "measured at",
                    "source",
                    "results",
                ],
                rows,
            )
        )
        missing = [
            label
            for label, _s, rf in items
            if rf.floor is None and not isinstance(rf.result, SelftestResult)
        ]
        if missing:
            parts.append(
                '<p class="warning floor-missing">No floor recorded with: '
                + e(", ".join(missing))
                + " (run <code>fidelnet measure selftest</code> first).</p>"
            )
    parts.append("</section>")
    return "".join(parts)
