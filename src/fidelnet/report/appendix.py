"""The page's reference sections: where the results came from (provenance) and the
measurement floor they can be held against."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Sequence

from fidelnet.measure.provenance import Provenance
from fidelnet.measure.results import FloorSummary, SelftestResult
from fidelnet.report import formatting as fmt
from fidelnet.report.markup import Item, e, kv, table

__all__ = ["floor_section", "floors", "provenance"]


def _machine(p: Provenance) -> str:
    m = p.machine
    parts = [f"{m.hostname}: {m.cpus} CPUs ({m.cpu_model})", f"kernel {m.kernel}"]
    if m.mem_total_kib:
        parts.append(f"{m.mem_total_kib / 2**20:.1f} GiB")
    if m.virtualized is not None:
        parts.append("virtual machine" if m.virtualized else "not virtualized")
    return ", ".join(parts)


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
]


def provenance(items: Sequence[Item]) -> str:
    rows = []
    for name, get, code in _PROVENANCE:
        values = [(label, get(rf.provenance)) for label, _slug, rf in items]

        def show(v: str, code: bool = code) -> str:
            return f"<code>{e(v)}</code>" if code and v != "—" else e(v)

        if len({v for _, v in values}) == 1:
            cell = show(values[0][1])
        else:
            cell = (
                '<ul class="plain">'
                + "".join(f"<li>{e(label)}: {show(v)}</li>" for label, v in values)
                + "</ul>"
            )
        rows.append((name, cell))
    return '<section id="provenance"><h2>Provenance</h2>' + kv(rows) + "</section>"


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
                ", ".join(users),
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
