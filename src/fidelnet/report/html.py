"""The HTML report: one page, inline CSS, no JavaScript, no external resources.

Plots are PNG files in ``<out_dir>/plots/`` referenced by a path relative to the
page (``plots/NAME.png`` when the page is ``<out_dir>/report.html``). Every plot's
``<img>`` carries ``alt`` text, ``data-plot`` (``hdr``, ``rate``, ``worst-case``,
``zero-loss``, ``tcp-goodput``) and ``data-result`` (the result's label); every flag
is an element with ``class="flag"``. Every string from a result is escaped.
"""

from __future__ import annotations

import datetime as _dt
import functools
import html
import os
import re
import shlex
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from fidelnet._version import __version__
from fidelnet.log import logger
from fidelnet.measure.provenance import Provenance
from fidelnet.measure.results import (
    Flag,
    FloorSummary,
    LatencySummary,
    ResultFile,
    SelftestResult,
    TcpResult,
    UdpResult,
    ZeroLossResult,
)
from fidelnet.report import formatting as fmt
from fidelnet.report import plots
from fidelnet.report.load import ReportError, Skipped, load_dir, no_results_message

__all__ = ["PLOT_KINDS", "Table", "render", "render_dir"]

Table = tuple[str, Sequence[str], Sequence[Sequence[object]]]
"""An extra table for the page: ``(title, header, rows)``; cells are shown with
``str()`` (None as a dash)."""

PLOT_KINDS = ("hdr", "rate", "worst-case", "zero-loss", "tcp-goodput")
"""The values of the ``data-plot`` attribute."""

_CSS = """
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
"""

_Result = UdpResult | ZeroLossResult | SelftestResult | TcpResult


def _e(value: object) -> str:
    return html.escape("—" if value is None else str(value), quote=True)


def _slug(label: str, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-.") or "result"
    slug, n = base, 2
    while slug in taken:
        slug, n = f"{base}-{n}", n + 1
    taken.add(slug)
    return slug


def _kv(rows: Iterable[tuple[str, str]]) -> str:
    """A two-column table of already-escaped values."""
    body = "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="kv"><tbody>{body}</tbody></table>'


def _table(header: Sequence[str], rows: Iterable[Sequence[object]], cls: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    attr = f' class="{_e(cls)}"' if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _flags(flags: Sequence[tuple[str, Flag]]) -> str:
    if not flags:
        return '<p class="no-flags">No flags.</p>'
    items = "".join(
        f'<li class="flag" data-flag="{_e(f.code)}"><code>{_e(f.code)}</code> '
        f"{_e(where + ': ') if where else ''}{_e(f.message)}</li>"
        for where, f in flags
    )
    return f'<ul class="flags">{items}</ul>'


def _all_flags(r: _Result) -> list[tuple[str, Flag]]:
    out = [("", f) for f in r.flags]
    if isinstance(r, SelftestResult):
        for run in r.runs:
            out.extend((f"run at {fmt.pps(run.requested_pps)}", f) for f in run.flags)
    return out


def _latency_cells(lat: LatencySummary) -> list[str]:
    """p50, p99, p99.9, max."""
    return [fmt.ns(lat.p50_ns), fmt.ns(lat.p99_ns), fmt.ns(lat.p999_ns), fmt.ns(lat.max_ns)]


class _Plots:
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
            f'<figure><img src="{_e(src)}" alt="{_e(alt)}" data-plot="{_e(kind)}" '
            f'data-result="{_e(slug)}"><figcaption>{_e(caption)}</figcaption></figure>'
        )


# --- header: provenance and floor ---------------------------------------------------


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


def _provenance(items: Sequence[tuple[str, str, ResultFile]]) -> str:
    rows = []
    for name, get, code in _PROVENANCE:
        values = [(label, get(rf.provenance)) for label, _slug_, rf in items]

        def show(v: str, code: bool = code) -> str:
            return f"<code>{_e(v)}</code>" if code and v != "—" else _e(v)

        if len({v for _, v in values}) == 1:
            cell = show(values[0][1])
        else:
            cell = (
                '<ul class="plain">'
                + "".join(f"<li>{_e(label)}: {show(v)}</li>" for label, v in values)
                + "</ul>"
            )
        rows.append((name, cell))
    return '<section id="provenance"><h2>Provenance</h2>' + _kv(rows) + "</section>"


def _floors(items: Sequence[tuple[str, str, ResultFile]]) -> list[tuple[FloorSummary, list[str]]]:
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


def _floor_section(items: Sequence[tuple[str, str, ResultFile]]) -> str:
    floors = _floors(items)
    parts = ['<section id="floor"><h2>Measurement floor</h2>']
    if not floors:
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
            for f, users in floors
        ]
        parts.append(
            _table(
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
                + _e(", ".join(missing))
                + " (run <code>fidelnet measure selftest</code> first).</p>"
            )
    parts.append("</section>")
    return "".join(parts)


# --- per result ---------------------------------------------------------------------


def _headline(r: _Result) -> str:
    if isinstance(r, UdpResult):
        return (
            f"{fmt.pps(r.receive_pps)} received of {fmt.pps(r.requested_pps)} requested, "
            f"loss {fmt.ratio(r.loss_ratio)}, p99.9 {fmt.ns(r.latency.p999_ns)}"
        )
    if isinstance(r, ZeroLossResult):
        return f"NDR {fmt.pps(r.ndr_pps)}, PDR {fmt.pps(r.pdr_pps)}, {len(r.trials)} trials"
    if isinstance(r, SelftestResult):
        return f"max send {fmt.pps(r.max_send_pps)}, floor p99.9 {fmt.ns(r.floor.latency_p999_ns)}"
    jain = "" if r.jain is None else f", Jain {r.jain:.4f}"
    return f"total goodput {fmt.bps(r.total_goodput_bps)} over {len(r.flows)} flows{jain}"


def _path(src: str, dst: str, size: int, pattern: str, burst: int | None) -> str:
    b = f", bursts of {burst}" if burst else ""
    return _e(f"{src} → {dst}, {size} B frames, {pattern}{b}")


def _udp(label: str, slug: str, rf: ResultFile, r: UdpResult, plot: _Plots) -> list[str]:
    lat = r.latency
    out = [
        _kv(
            [
                ("path", _path(r.src, r.dst, r.size, r.pattern, r.burst)),
                ("requested", _e(fmt.pps(r.requested_pps))),
                (
                    "achieved (sender)",
                    _e(fmt.pps(r.achieved_pps))
                    + ("" if r.rate_reached else ' <strong class="bad">not reached</strong>'),
                ),
                ("received", _e(fmt.pps(r.receive_pps))),
                (
                    "sent / received / lost",
                    _e(f"{fmt.count(r.sent)} / {fmt.count(r.received)} / {fmt.count(r.lost)}"),
                ),
                ("loss", _e(fmt.ratio(r.loss_ratio))),
                (
                    "duplicates / reordered / malformed",
                    _e(
                        f"{fmt.count(r.duplicates)} / {fmt.count(r.reordered)} / "
                        f"{fmt.count(r.malformed)}"
                    ),
                ),
                ("socket drops", _e(fmt.count(r.socket_drops))),
                (
                    "latency p50 / p99 / p99.9 / max",
                    _e(" / ".join(_latency_cells(lat))),
                ),
                ("latency samples", _e(fmt.count(lat.count))),
                ("duration", _e(f"{r.duration_s:g} s, intervals of {r.interval_s:g} s")),
                ("CPUs (sender, receiver)", _e(f"{r.sender_cpu}, {r.receiver_cpu}")),
            ]
        )
    ]
    if len(r.flows) > 1:
        out.append("<h3>Flows</h3>")
        out.append(
            _table(
                ["id", "src → dst", "sent", "received", "loss", "p50", "p99", "p99.9", "max"],
                [
                    [
                        f.id,
                        f"{f.src} → {f.dst} ({f.dst_addr})",
                        fmt.count(f.sent),
                        fmt.count(f.received),
                        fmt.ratio(f.loss_ratio),
                        *_latency_cells(f.latency),
                    ]
                    for f in r.flows
                ],
            )
        )
    figs = []
    lines: list[tuple[str, plots.LatencySource]] = [(label, r)]
    if len(r.flows) > 1:
        lines += [(f"flow {f.id} {f.src}→{f.dst}", f) for f in r.flows if f.latency.count]
    if lat.count:
        figs.append(
            plot.figure(
                "hdr",
                slug,
                f"Latency by percentile for {label}, log-log",
                "Latency by percentile (x: 1/(1-p), so each step to the right is one more nine).",
                lambda p: plots.hdr_percentiles(
                    lines, p, title=f"{label}: latency by percentile", svg=plot.svg
                ),
            )
        )
    if r.intervals:
        figs.append(
            plot.figure(
                "rate",
                slug,
                f"Received rate over time for {label}",
                f"Received rate per {r.interval_s:g} s interval; "
                f"{fmt.pps(r.requested_pps)} requested.",
                lambda p: plots.rate_over_time(
                    [(label, r)], p, bits=True, title=f"{label}: received rate", svg=plot.svg
                ),
            )
        )
    if any(i.latency_max_ns is not None for i in r.intervals):
        figs.append(
            plot.figure(
                "worst-case",
                slug,
                f"Maximum latency per interval over time for {label}",
                "Worst-case latency per interval"
                + (
                    ", with the floor's p99.9." if rf.floor is not None else " (no floor recorded)."
                ),
                lambda p: plots.worst_case_over_time(
                    [(label, r)],
                    p,
                    floor=rf.floor,
                    title=f"{label}: worst case per interval",
                    svg=plot.svg,
                ),
            )
        )
    return out + figs


def _zero_loss(label: str, slug: str, r: ZeroLossResult, plot: _Plots) -> list[str]:
    out = [
        _kv(
            [
                ("path", _path(r.src, r.dst, r.size, r.pattern, r.burst)),
                ("NDR (no loss)", f"<strong>{_e(fmt.pps(r.ndr_pps))}</strong>"),
                (
                    "PDR (loss ≤ " + fmt.ratio(r.pdr_loss) + ")",
                    f"<strong>{_e(fmt.pps(r.pdr_pps))}</strong>",
                ),
                ("search range", _e(f"{fmt.pps(r.low_pps)} to {fmt.pps(r.high_pps)}")),
                ("resolution", _e(fmt.pps(r.resolution_pps))),
                ("trial duration", _e(f"{r.trial_s:g} s")),
                ("generator maximum", _e(fmt.pps(r.generator_max_pps))),
            ]
        ),
        "<h3>Trials</h3>",
        _table(
            [
                "#",
                "offered",
                "achieved",
                "sent",
                "received",
                "loss",
                "generator-limited",
                "socket drops",
                "p50",
                "p99",
                "p99.9",
                "max",
            ],
            [
                [
                    i,
                    fmt.pps(t.rate_pps),
                    fmt.pps(t.achieved_pps),
                    fmt.count(t.sent),
                    fmt.count(t.received),
                    fmt.ratio(t.loss_ratio),
                    "yes" if t.generator_limited else "no",
                    fmt.count(t.socket_drops),
                    *_latency_cells(t.latency),
                ]
                for i, t in enumerate(r.trials, 1)
            ],
        ),
    ]
    if r.trials:
        out.append(
            plot.figure(
                "zero-loss",
                slug,
                f"Zero-loss search trials for {label}: offered rate per trial, NDR and PDR",
                "Offered rate per trial, marked by loss; dashed: NDR, dotted: PDR.",
                lambda p: plots.zero_loss_trials(
                    [(label, r)], p, title=f"{label}: zero-loss search", svg=plot.svg
                ),
            )
        )
    lines = [
        (f"#{i} {fmt.pps(t.rate_pps)}", t) for i, t in enumerate(r.trials, 1) if t.latency.count
    ]
    if lines:
        out.append(
            plot.figure(
                "hdr",
                slug,
                f"Latency by percentile per trial for {label}",
                "Latency by percentile, one line per trial (offered rate).",
                lambda p: plots.hdr_percentiles(
                    lines, p, title=f"{label}: latency by percentile per trial", svg=plot.svg
                ),
            )
        )
    return out


def _selftest(label: str, slug: str, r: SelftestResult, plot: _Plots) -> list[str]:
    out = [
        _kv(
            [
                ("frame size", _e(f"{r.size} B")),
                ("max send rate", _e(fmt.pps(r.max_send_pps))),
                ("max zero-loss rate", _e(fmt.pps(r.max_zero_loss_pps))),
                (
                    "floor latency p50 / p99.9",
                    _e(f"{fmt.ns(r.floor.latency_p50_ns)} / {fmt.ns(r.floor.latency_p999_ns)}"),
                ),
            ]
        ),
        "<h3>Runs</h3>",
        _table(
            [
                "requested",
                "achieved",
                "received",
                "loss",
                "socket drops",
                "p50",
                "p99",
                "p99.9",
                "max",
            ],
            [
                [
                    fmt.pps(u.requested_pps),
                    fmt.pps(u.achieved_pps),
                    fmt.pps(u.receive_pps),
                    fmt.ratio(u.loss_ratio),
                    fmt.count(u.socket_drops),
                    *_latency_cells(u.latency),
                ]
                for u in r.runs
            ],
        ),
    ]
    runs = [(fmt.pps(u.requested_pps), u) for u in r.runs]
    if any(u.latency.count for u in r.runs):
        out.append(
            plot.figure(
                "hdr",
                slug,
                f"Latency by percentile per rate for {label}",
                "Latency by percentile over a bare veth pair, one line per rate.",
                lambda p: plots.hdr_percentiles(
                    runs, p, title=f"{label}: latency by percentile", svg=plot.svg
                ),
            )
        )
    if any(u.intervals for u in r.runs):
        out.append(
            plot.figure(
                "rate",
                slug,
                f"Received rate over time per rate for {label}",
                "Received rate per interval, one line per requested rate.",
                lambda p: plots.rate_over_time(
                    runs, p, title=f"{label}: received rate", svg=plot.svg
                ),
            )
        )
    if any(i.latency_max_ns is not None for u in r.runs for i in u.intervals):
        out.append(
            plot.figure(
                "worst-case",
                slug,
                f"Maximum latency per interval for {label}",
                "Worst-case latency per interval, with the floor's p99.9.",
                lambda p: plots.worst_case_over_time(
                    runs, p, floor=r.floor, title=f"{label}: worst case", svg=plot.svg
                ),
            )
        )
    return out


def _tcp(label: str, slug: str, r: TcpResult, plot: _Plots) -> list[str]:
    out = [
        _kv(
            [
                ("total goodput", f"<strong>{_e(fmt.bps(r.total_goodput_bps))}</strong>"),
                ("Jain's fairness", _e("—" if r.jain is None else f"{r.jain:.4f}")),
                ("bottleneck", _e(fmt.bps(r.bottleneck_bps))),
                (
                    "duration",
                    _e(
                        f"{r.duration_s:g} s, intervals of {r.interval_s:g} s, "
                        f"first {r.warmup_s:g} s excluded"
                    ),
                ),
                (
                    "window",
                    _e(
                        "—"
                        if r.suggested_window_bytes is None
                        else f"{fmt.count(r.suggested_window_bytes)} B suggested, "
                        + ("applied" if r.window_applied else "not applied")
                    ),
                ),
                ("note", _e(r.note)),
            ]
        ),
        "<h3>Flows</h3>",
        _table(
            ["src → dst", "port", "goodput", "receiver", "sender", "retransmits", "window"],
            [
                [
                    f"{f.src} → {f.dst}",
                    f.port,
                    fmt.bps(f.goodput_bps),
                    fmt.bps(f.receiver_bps),
                    fmt.bps(f.sender_bps),
                    fmt.count(f.retransmits),
                    "—" if f.window_bytes is None else f"{fmt.count(f.window_bytes)} B",
                ]
                for f in r.flows
            ],
        ),
    ]
    if any(f.intervals for f in r.flows):
        out.append(
            plot.figure(
                "tcp-goodput",
                slug,
                f"Receiver goodput per flow over time for {label}",
                "Receiver goodput per flow and interval; the shaded warm-up is excluded "
                "from the figures above.",
                lambda p: plots.tcp_goodput(
                    [(label, r)], p, title=f"{label}: goodput per flow", svg=plot.svg
                ),
            )
        )
    return out


_KIND_NAMES = {
    "udp": "UDP packet run",
    "zero_loss": "zero-loss search",
    "selftest": "measurement self-test",
    "tcp": "TCP goodput",
}


def _section(label: str, slug: str, rf: ResultFile, plot: _Plots) -> str:
    r = rf.result
    title = label if rf.name == label else f"{label} ({rf.name})"
    head = [
        f'<section class="result kind-{_e(r.kind)}" id="r-{_e(slug)}">',
        f'<h2>{_e(title)} <small class="muted">{_e(_KIND_NAMES.get(r.kind, r.kind))}</small></h2>',
        f'<p class="muted">{_e(rf.provenance.time_utc)} · '
        f"<code>{_e(shlex.join(rf.provenance.command))}</code></p>",
        _flags(_all_flags(r)),
    ]
    if isinstance(r, UdpResult):
        body = _udp(label, slug, rf, r, plot)
    elif isinstance(r, ZeroLossResult):
        body = _zero_loss(label, slug, r, plot)
    elif isinstance(r, SelftestResult):
        body = _selftest(label, slug, r, plot)
    else:
        body = _tcp(label, slug, r, plot)
    return "".join([*head, *body, "</section>"])


def _groups(
    items: Sequence[tuple[str, str, ResultFile]],
) -> list[tuple[str, list[tuple[str, UdpResult]]]]:
    """UDP runs grouped by the label's first word (``fidelnet-cbr-00050k`` →
    ``fidelnet``) and the traffic pattern, each group ordered by requested rate:
    one line per rate, as the papers draw them."""
    groups: dict[tuple[str, str], list[tuple[str, UdpResult]]] = {}
    for label, _s, rf in items:
        if isinstance(rf.result, UdpResult):
            stack = label.split("-", 1)[0] if "-" in label else ""
            groups.setdefault((stack, rf.result.pattern), []).append((label, rf.result))
    out = []
    for (stack, pattern), runs in groups.items():
        runs.sort(key=lambda x: x[1].requested_pps)
        lines = [(fmt.pps(r.requested_pps), r) for _label, r in runs]
        if len({name for name, _r in lines}) < len(lines):
            lines = [(f"{label} ({fmt.pps(r.requested_pps)})", r) for label, r in runs]
        out.append((" ".join(x for x in (stack, pattern) if x), lines))
    return out


def _draw_lines(
    draw: Callable[..., Path],
    lines: list[tuple[str, UdpResult]],
    title: str,
    svg: bool,
    path: Path,
) -> Path:
    return draw(lines, path, title=title, svg=svg)


def _comparison(items: Sequence[tuple[str, str, ResultFile]], plot: _Plots, taken: set[str]) -> str:
    groups = _groups(items)
    if sum(len(lines) for _n, lines in groups) < 2:
        return ""
    parts = ['<section id="all-udp"><h2>UDP runs together</h2>']
    for name, lines in groups:
        slug = _slug(f"all-udp-{name}" if name else "all-udp", taken)
        what = f" ({name})" if name else ""
        if any(r.latency.count for _l, r in lines):
            parts.append(
                plot.figure(
                    "hdr",
                    slug,
                    f"Latency by percentile{what}, one line per rate",
                    f"Latency by percentile{what}, one line per requested rate.",
                    functools.partial(
                        _draw_lines,
                        plots.hdr_percentiles,
                        lines,
                        f"Latency by percentile{what}",
                        plot.svg,
                    ),
                )
            )
        if any(r.intervals for _l, r in lines):
            parts.append(
                plot.figure(
                    "rate",
                    slug,
                    f"Received rate over time{what}, one line per rate",
                    f"Received rate per interval{what}, one line per requested rate.",
                    functools.partial(
                        _draw_lines, plots.rate_over_time, lines, f"Received rate{what}", plot.svg
                    ),
                )
            )
    parts.append("</section>")
    return "".join(parts)


def _overview(items: Sequence[tuple[str, str, ResultFile]]) -> str:
    rows = []
    for label, slug, rf in items:
        n = len(_all_flags(rf.result))
        flags = f'<span class="flag-count">{n} flag{"s" if n != 1 else ""}</span>' if n else "none"
        rows.append(
            f'<tr><td><a href="#r-{_e(slug)}">{_e(label)}</a></td>'
            f"<td>{_e(_KIND_NAMES.get(rf.result.kind, rf.result.kind))}</td>"
            f"<td>{_e(_headline(rf.result))}</td><td>{flags}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("result", "kind", "in short", "flags"))
    return (
        '<section id="overview"><h2>Results</h2><table><thead><tr>'
        + head
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _extra_tables(tables: Sequence[Table]) -> str:
    parts = []
    for title, header, rows in tables:
        parts.append(f'<section class="extra-table"><h2>{_e(title)}</h2>')
        parts.append(_table(header, rows))
        parts.append("</section>")
    return "".join(parts)


def _skipped(skipped: Sequence[Skipped]) -> str:
    if not skipped:
        return ""
    items = "".join(f"<li><code>{_e(p.name)}</code>: {_e(why)}</li>" for p, why in skipped)
    return (
        '<section id="skipped"><h2>Skipped files</h2>'
        f'<p class="muted">JSON files that are not fidelnet result files:</p><ul>{items}</ul>'
        "</section>"
    )


def render(
    results: Sequence[tuple[str, ResultFile]],
    out_dir: str | os.PathLike[str],
    tables: Sequence[Table] = (),
    *,
    output: str | os.PathLike[str] | None = None,
    svg: bool = False,
    skipped: Sequence[Skipped] = (),
) -> Path:
    """Write the plots into ``out_dir/plots/`` and the page to ``output`` (default
    ``out_dir/report.html``); returns the page's path. ``results`` are ``(label,
    result file)`` in the order shown; ``tables`` are extra ``(title, header,
    rows)`` tables shown after the overview."""
    if not results and not tables:
        raise ReportError("no results to report")
    root = Path(out_dir)
    page = Path(output) if output is not None else root / "report.html"
    page.parent.mkdir(parents=True, exist_ok=True)
    plot = _Plots(root / "plots", page.parent.resolve(), svg)
    plot.dir.mkdir(parents=True, exist_ok=True)
    plot.dir = plot.dir.resolve()

    taken: set[str] = set()
    items = [(label, _slug(label, taken), rf) for label, rf in results]
    now = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")
    n = len(items)
    body = [
        "<header><h1>fidelnet report</h1>",
        f'<p class="muted">{n} result{"s" if n != 1 else ""} · generated {_e(now)}</p>',
        "</header>",
        _provenance(items),
        _floor_section(items),
        _overview(items),
        _extra_tables(tables),
        _comparison(items, plot, taken),
        *(_section(label, slug, rf, plot) for label, slug, rf in items),
        _skipped(skipped),
        f"<footer>fidelnet {_e(__version__)}</footer>",
    ]
    doc = (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>fidelnet report: {_e(', '.join(label for label, _s, _r in items[:4]))}"
        f"{'…' if n > 4 else ''}</title>"
        f"<style>{_CSS}</style></head><body>" + "\n".join(b for b in body if b) + "</body></html>\n"
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
) -> Path:
    """Render every result file in ``directory`` (see :func:`render`); JSON files that
    are not result files are skipped with a warning. Raises :class:`ReportError`
    when there is none."""
    results, skipped = load_dir(directory)
    for path, why in skipped:
        logger.warning("report: skipped %s: %s", path.name, why)
    if not results:
        raise ReportError(no_results_message(directory, skipped))
    return render(results, directory, tables, output=output, svg=svg, skipped=skipped)
