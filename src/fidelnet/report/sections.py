"""One section per result: its verdict and reasons, its flags, its key numbers, its
plots."""

from __future__ import annotations

from fidelnet.measure.results import (
    ResultFile,
    SelftestResult,
    TcpResult,
    UdpResult,
    ZeroLossResult,
)
from fidelnet.report import formatting as fmt
from fidelnet.report import plots, verdicts
from fidelnet.report.markup import (
    KIND_NAMES,
    Plots,
    Result,
    all_flags,
    e,
    flags,
    kv,
    latency_cells,
    table,
)

__all__ = ["headline", "section"]


def headline(r: Result) -> str:
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
    return e(f"{src} → {dst}, {size} B frames, {pattern}{b}")


def _udp(label: str, slug: str, rf: ResultFile, r: UdpResult, plot: Plots) -> list[str]:
    lat = r.latency
    out = [
        kv(
            [
                ("path", _path(r.src, r.dst, r.size, r.pattern, r.burst)),
                ("requested", e(fmt.pps(r.requested_pps))),
                (
                    "achieved (sender)",
                    e(fmt.pps(r.achieved_pps))
                    + ("" if r.rate_reached else ' <strong class="bad">not reached</strong>'),
                ),
                ("received", e(fmt.pps(r.receive_pps))),
                (
                    "sent / received / lost",
                    e(f"{fmt.count(r.sent)} / {fmt.count(r.received)} / {fmt.count(r.lost)}"),
                ),
                ("loss", e(fmt.ratio(r.loss_ratio))),
                (
                    "duplicates / reordered / malformed",
                    e(
                        f"{fmt.count(r.duplicates)} / {fmt.count(r.reordered)} / "
                        f"{fmt.count(r.malformed)}"
                    ),
                ),
                ("socket drops", e(fmt.count(r.socket_drops))),
                (
                    "latency p50 / p99 / p99.9 / max",
                    e(" / ".join(latency_cells(lat))),
                ),
                ("latency samples", e(fmt.count(lat.count))),
                ("duration", e(f"{r.duration_s:g} s, intervals of {r.interval_s:g} s")),
                ("CPUs (sender, receiver)", e(f"{r.sender_cpu}, {r.receiver_cpu}")),
            ]
        )
    ]
    if len(r.flows) > 1:
        out.append("<h3>Flows</h3>")
        out.append(
            table(
                ["id", "src → dst", "sent", "received", "loss", "p50", "p99", "p99.9", "max"],
                [
                    [
                        f.id,
                        f"{f.src} → {f.dst} ({f.dst_addr})",
                        fmt.count(f.sent),
                        fmt.count(f.received),
                        fmt.ratio(f.loss_ratio),
                        *latency_cells(f.latency),
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
                f"{fmt.pps(r.requested_pps)} requested. The last interval, cut short by "
                "the end of the traffic, is scaled to its length or left out.",
                lambda p: plots.rate_over_time(
                    [(label, r)], p, bits=True, title=f"{label}: received rate", svg=plot.svg
                ),
            )
        )
    if r.events:
        out.append("<h3>Events</h3>")
        out.append(
            table(
                [
                    "event",
                    "action",
                    "target",
                    "at",
                    "late",
                    "outage",
                    "lost",
                    "late pkts",
                    "dups",
                    "back",
                    "p99 before",
                    "max during",
                    "p99 after",
                ],  # fmt: skip
                [
                    [
                        ev.name,
                        ev.action,
                        ev.target,
                        f"{ev.at_s:g} s",
                        "0 (engine)" if ev.exact else fmt.ns(ev.late_s * 1e9),
                        "" if ev.outage_s is None else f"{ev.outage_s:.4f} s",
                        "" if ev.lost is None else fmt.count(ev.lost),
                        "" if ev.late_packets is None else fmt.count(ev.late_packets),
                        "" if ev.duplicates is None else fmt.count(ev.duplicates),
                        "" if ev.recovered is None else ("yes" if ev.recovered else "no"),
                        fmt.ns(ev.latency_p99_before_ns),
                        fmt.ns(ev.latency_max_during_ns),
                        fmt.ns(ev.latency_p99_after_ns),
                    ]
                    + ([f"error: {ev.error}"] if ev.error else [])
                    for ev in r.events
                ],
            )
        )
        figs.append(
            plot.figure(
                "events",
                slug,
                f"Received rate and latency around the events of {label}",
                "Received rate and latency per interval; events as dotted lines, outages "
                "told from the packets shaded.",
                lambda p: plots.around_events(label, r, p, svg=plot.svg),
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


def _zero_loss(label: str, slug: str, r: ZeroLossResult, plot: Plots) -> list[str]:
    out = [
        kv(
            [
                ("path", _path(r.src, r.dst, r.size, r.pattern, r.burst)),
                ("NDR (no loss)", f"<strong>{e(fmt.pps(r.ndr_pps))}</strong>"),
                (
                    "PDR (loss ≤ " + fmt.ratio(r.pdr_loss) + ")",
                    f"<strong>{e(fmt.pps(r.pdr_pps))}</strong>",
                ),
                ("search range", e(f"{fmt.pps(r.low_pps)} to {fmt.pps(r.high_pps)}")),
                ("resolution", e(fmt.pps(r.resolution_pps))),
                ("trial duration", e(f"{r.trial_s:g} s")),
                ("generator maximum", e(fmt.pps(r.generator_max_pps))),
            ]
        ),
        "<h3>Trials</h3>",
        table(
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
                    *latency_cells(t.latency),
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


def _selftest(label: str, slug: str, r: SelftestResult, plot: Plots) -> list[str]:
    out = [
        kv(
            [
                ("frame size", e(f"{r.size} B")),
                ("max send rate", e(fmt.pps(r.max_send_pps))),
                ("max zero-loss rate", e(fmt.pps(r.max_zero_loss_pps))),
                (
                    "floor latency p50 / p99.9",
                    e(f"{fmt.ns(r.floor.latency_p50_ns)} / {fmt.ns(r.floor.latency_p999_ns)}"),
                ),
            ]
        ),
        "<h3>Runs</h3>",
        table(
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
                    *latency_cells(u.latency),
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


def _tcp(label: str, slug: str, r: TcpResult, plot: Plots) -> list[str]:
    out = [
        kv(
            [
                ("total goodput", f"<strong>{e(fmt.bps(r.total_goodput_bps))}</strong>"),
                ("Jain's fairness", e("—" if r.jain is None else f"{r.jain:.4f}")),
                ("bottleneck", e(fmt.bps(r.bottleneck_bps))),
                (
                    "duration",
                    e(
                        f"{r.duration_s:g} s, intervals of {r.interval_s:g} s, "
                        f"first {r.warmup_s:g} s excluded"
                    ),
                ),
                (
                    "window",
                    e(
                        "—"
                        if r.suggested_window_bytes is None
                        else f"{fmt.count(r.suggested_window_bytes)} B suggested, "
                        + ("applied" if r.window_applied else "not applied")
                    ),
                ),
                ("note", e(r.note)),
            ]
        ),
        "<h3>Flows</h3>",
        table(
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


def _cpu(label: str, slug: str, r: Result, plot: Plots) -> list[str]:
    rec = r.monitor
    if rec is None or not rec.cpu.cores:
        return []
    start, end = rec.window_s
    cost = (
        f" Monitoring cost {rec.overhead_pct_core:.1f} % of one core." if rec.overhead_cpu_s else ""
    )
    return [
        "<h3>CPU while it ran</h3>",
        plot.figure(
            "cpu",
            slug,
            f"CPU use per core over time while {label} ran, traffic window shaded",
            "Per core, in percent of the core every "
            f"{rec.cpu.interval_s * 1000:g} ms: user, system, softirq, irq and steal "
            f"stacked (white above: idle); shaded, the measured traffic ({start:g} s to "
            f"{end:g} s); line, the machine's CPU pressure (time a runnable task waited)." + cost,
            lambda p: plots.cpu_per_core(rec, p, title=f"{label}: CPU per core", svg=plot.svg),
        ),
    ]


def section(label: str, slug: str, rf: ResultFile, plot: Plots) -> str:
    """A result's section: its verdict and reasons first, then its flags, its key
    numbers, its plots, and what the CPUs did while it ran (with a monitor record)."""
    r = rf.result
    title = label if rf.name == label else f"{label} ({rf.name})"
    head = [
        f'<section class="result kind-{e(r.kind)}" id="r-{e(slug)}">',
        f'<h2>{e(title)} <small class="muted">{e(KIND_NAMES.get(r.kind, r.kind))}</small></h2>',
        verdicts.block(r),
        flags(all_flags(r)),
    ]
    if isinstance(r, UdpResult):
        body = _udp(label, slug, rf, r, plot)
    elif isinstance(r, ZeroLossResult):
        body = _zero_loss(label, slug, r, plot)
    elif isinstance(r, SelftestResult):
        body = _selftest(label, slug, r, plot)
    else:
        body = _tcp(label, slug, r, plot)
    return "".join([*head, *body, *_cpu(label, slug, r, plot), "</section>"])
