"""The calibration's HTML page: the answer first (what this machine carries
faithfully), then one section per micro-benchmark with its plot and table."""

from __future__ import annotations

import html
import json
from pathlib import Path

from fidelnet.calibrate import Calibration
from fidelnet.report.markup import CSS
from fidelnet.report.plots.base import figure, legend, save

__all__ = ["write_page"]


def _e(v: object) -> str:
    return html.escape(str(v))


def _table(header: list[str], rows: list[list[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _us(ns: float | None) -> str:
    return "—" if ns is None else f"{ns / 1000:.1f}"


def _cdf_plot(out: Path, name: str, series: dict[str, list[int]], xlabel: str) -> str:
    fig, (ax,) = figure()
    for label, values in series.items():
        if not values:
            continue
        xs = sorted(v / 1000 for v in values)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.plot(xs, ys, label=label, gid="series")
    ax.set_xscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("fraction of samples")
    ax.grid(True, alpha=0.3)
    legend(ax)
    save(fig, out / name)
    return f'<img src="{_e(name)}" alt="{_e(xlabel)}" data-plot="{_e(name[:-4])}">'


def _shares_plot(out: Path, cal: Calibration) -> str:
    fig, (ax,) = figure()
    for s in cal.shares:
        flat = [v for proc in s.per_second_pct for v in proc]
        n = len(s.per_second_pct)
        ax.scatter([n] * len(flat), flat, s=12, alpha=0.6, gid="series")
        ax.hlines(s.share_pct, n - 0.4, n + 0.4, colors="black")
    ax.set_xlabel("busy processes (each in its own CPU-limited node)")
    ax.set_ylabel("CPU per second, % of one core (line: share asked)")
    ax.grid(True, alpha=0.3)
    save(fig, out / "shares.png")
    return '<img src="shares.png" alt="CPU shares" data-plot="shares">'


def _rates_plot(out: Path, cal: Calibration) -> str:
    fig, (ax,) = figure()
    labels = [k for k, v in cal.rate_windows.items() if v]
    if labels:
        ax.boxplot(
            [[100 * r for r in cal.rate_windows[k]] for k in labels],
            whis=(1, 99),
            showfliers=True,
        )
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=20, fontsize="small")
    ax.axhline(100, color="black", linewidth=0.8)
    ax.set_ylabel("received / configured rate per 10 ms window, %")
    ax.grid(True, alpha=0.3)
    save(fig, out / "rates.png")
    return '<img src="rates.png" alt="rate accuracy" data-plot="rates">'


def _forwarding_plot(out: Path, cal: Calibration) -> str:
    fig, (ax,) = figure()
    for f in cal.profile.forwarding:
        ax.plot(
            [o / 1000 for o in f.offered_pps],
            [d / 1000 for d in f.delivered_pps],
            marker="o",
            label=f"{f.backend}, {f.links} {f.layout} link{'s' if f.links > 1 else ''}",
            gid="series",
        )
    top = max((max(f.offered_pps, default=0) for f in cal.profile.forwarding), default=0) / 1000
    ax.plot(
        [0, top], [0, top], color="grey", linewidth=0.8, linestyle="--", label="delivered = offered"
    )
    ax.set_xlabel("offered, kpps (64-byte frames)")
    ax.set_ylabel("delivered, kpps")
    ax.grid(True, alpha=0.3)
    legend(ax)
    save(fig, out / "forwarding.png")
    return '<img src="forwarding.png" alt="forwarding" data-plot="forwarding">'


def _answer(cal: Calibration) -> str:
    p = cal.profile
    lines = []
    for backend in sorted({f.backend for f in p.forwarding}):
        cap = p.capacity_pps(backend)
        if cap is not None:
            lines.append(
                f"{'bare veth' if backend == 'tc' else backend} links forward up to "
                f"{cap[0] / 1000:,.0f} k packet-hops/s without loss "
                f"(best over chains of up to {max(f.links for f in p.forwarding)} links)"
            )
    idle = p.timer_p99_ns("idle")
    busy = p.timer_p99_ns("busy")
    if idle is not None:
        lines.append(
            f"timers wake {_us(idle)} µs late at p99 idle"
            + (f", {_us(busy)} µs with every core busy" if busy is not None else "")
        )
    worst_share = max((s.max_error_pct for s in p.cpu_shares), default=None)
    if worst_share is not None:
        lines.append(f"CPU limits hold within {worst_share:.1f} points of one core per second")
    lines.append(f"steal at rest {p.steal_at_rest_pct:.2f} %")
    items = "".join(f"<li>{_e(x)}</li>" for x in lines)
    return (
        f'<section id="answer"><h2>What this machine carries faithfully</h2><ul>{items}</ul>'
        f"<p>Profile {_e(p.key)} for fidelnet {_e(p.fidelnet)}, measured {_e(p.measured_at)} "
        f"in {p.seconds:.0f} s.</p></section>"
    )


def write_page(cal: Calibration, out: Path) -> Path:
    """Write ``calibration.html``, its plots and ``calibration.json`` (the profile and
    the raw samples) into ``out``; returns the page's path."""
    out.mkdir(parents=True, exist_ok=True)
    p = cal.profile
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>fidelnet calibration: {_e(p.machine.hostname)}</title>",
        f"<style>{CSS}</style></head><body>",
        f"<h1>Calibration of {_e(p.machine.hostname)}</h1>",
        _answer(cal),
        "<section id='forwarding'><h2>Forwarding capacity (HiFi Fig. 3/4)</h2>",
        "<p>Routed chains, and separate pairs sending at once (parallel), offered "
        "64-byte frames; the breaking point is the highest offered rate (in all) "
        "delivered without loss.</p>",
        _forwarding_plot(out, cal),
        _table(
            [
                "backend",
                "layout",
                "links",
                "breaking point, kpps",
                "packet-hops/s",
                "Mbit/s (64 B)",
            ],
            [
                [
                    f.backend,
                    f.layout,
                    f.links,
                    f"{f.breaking_pps / 1000:.1f}",
                    f"{f.breaking_pps * (f.links if f.layout == 'chain' else 1):,.0f}",
                    f"{f.breaking_bps / 1e6:.1f}",
                ]
                for f in p.forwarding
            ],
        ),
        "</section><section id='rates'><h2>Rate accuracy in 10 ms windows (HiFi Fig. 2)</h2>",
        "<p>Each link is offered 110 % of its rate in full-size frames. A window holds "
        "whole frames (about 8.2 at 10 Mbit/s, 82 at 100 Mbit/s), so one frame more or "
        "less moves it by 12 % or 1.2 %: that spread is the measurement's grain. A mean "
        "far below 100 % means the backend could not carry the rate at all.</p>",
        _rates_plot(out, cal),
        _table(
            ["backend", "rate", "windows", "mean", "p1", "p99"],
            [
                [
                    r.backend,
                    f"{r.rate_bps / 1e6:g} Mbit/s",
                    r.windows,
                    f"{100 * r.mean_ratio:.2f} %",
                    f"{100 * r.p1_ratio:.2f} %",
                    f"{100 * r.p99_ratio:.2f} %",
                ]
                for r in p.rate_accuracy
            ],
        ),
        "</section><section id='shares'><h2>CPU shares (HiFi Table 2)</h2>",
        _shares_plot(out, cal),
        _table(
            ["processes", "share, % of a core", "mean got", "largest error per second"],
            [
                [s.processes, f"{s.share_pct:.1f}", f"{s.mean_pct:.1f}", f"{s.max_error_pct:.1f}"]
                for s in p.cpu_shares
            ],
        ),
        "</section><section id='timer'><h2>Timer wake-up error (HiFi 3.2)</h2>",
        _cdf_plot(out, "timer.png", cal.timer, "lateness of a 1 ms sleep, µs"),
        _table(
            ["load", "samples", "p50 µs", "p99 µs", "max µs"],
            [[t.load, t.count, _us(t.p50_ns), _us(t.p99_ns), _us(t.max_ns)] for t in p.timer],
        ),
        "</section><section id='rtt'><h2>Round trip over a veth pair (HiFi Fig. 5)</h2>",
        _cdf_plot(out, "rtt.png", cal.rtt, "RTT, µs"),
        _table(
            ["load", "samples", "p50 µs", "p99 µs", "max µs"],
            [[t.load, t.count, _us(t.p50_ns), _us(t.p99_ns), _us(t.max_ns)] for t in p.rtt],
        ),
        "</section><section id='engine'><h2>Engine release: real-time, spin</h2>",
        f"<p>Chosen for this machine: real-time priority {p.engine_realtime_priority} "
        f"(0: the normal policy), spin {p.engine_spin_us} µs before each departure "
        "(0: none). Real-time is kept only where it cut the median p99.9 lateness by a "
        "fifth or more; the spin only where it halved the median p50 without raising "
        "the p99.9 by more than a quarter.</p>",
        _table(
            ["real-time priority", "spin µs", "packets", "p50 µs", "p99.9 µs", "max µs"],
            [
                [
                    r.realtime_priority,
                    r.spin_us,
                    r.packets,
                    _us(r.p50_ns),
                    _us(r.p999_ns),
                    _us(r.max_ns),
                ]
                for r in p.engine_release
            ],
        ),
        "</section><section id='floor'><h2>Generator floor</h2>",
        _table(
            ["latency p50 µs", "latency p99.9 µs", "highest send rate, pps"],
            [
                [
                    _us(p.floor_p50_ns),
                    _us(p.floor_p999_ns),
                    "—" if p.floor_max_send_pps is None else f"{p.floor_max_send_pps:,.0f}",
                ]
            ],
        ),
        "</section><details><summary>Machine and steps</summary>",
        _table(
            ["field", "value"],
            [[k, v] for k, v in p.machine.model_dump().items()]
            + [[f"step: {k}", f"{v} s"] for k, v in cal.step_seconds.items()],
        ),
        "</details></body></html>",
    ]
    page = out / "calibration.html"
    page.write_text("".join(parts))
    raw = {
        "profile": p.model_dump(mode="json", by_alias=True),
        "timer_ns": cal.timer,
        "rtt_ns": cal.rtt,
        "rate_windows": cal.rate_windows,
        "shares_pct": [
            {"share_pct": s.share_pct, "per_second_pct": s.per_second_pct} for s in cal.shares
        ],
    }
    (out / "calibration.json").write_text(json.dumps(raw) + "\n")
    return page
