"""The tables and figures of ``fidelnet bench hvnet`` (HVNet's Table I and Figures
4/6, 5 and 8) from the measured flows; see :mod:`fidelnet.bench.hvnet`."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fidelnet.measure import latency
from fidelnet.measure.results import LatencySummary, UdpResult
from fidelnet.topology.spec import TopologySpec

if TYPE_CHECKING:
    from fidelnet.bench.hvnet import HvnetOptions

__all__ = ["Measured", "figures", "summarize", "table_one"]

STACK_COLORS = {"fidelnet": "#1f77b4", "mininet": "#d62728"}


@dataclass
class Measured:
    """One stack's flows of one topology."""

    topology: int
    stack: str
    spec: TopologySpec
    results: dict[str, UdpResult]

    def by_hops(self) -> dict[int, list[tuple[str, UdpResult]]]:
        out: dict[int, list[tuple[str, UdpResult]]] = defaultdict(list)
        for f in self.spec.flows:
            out[f.hops].append((f.name, self.results[f.name]))
        return out


def _us(ns: float | None) -> str:
    return "" if ns is None else f"{ns / 1000:.1f}"


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else ""


def _jitter(r: UdpResult) -> LatencySummary | None:
    return r.flows[0].jitter if r.flows and r.flows[0].jitter else r.jitter


def _merged(summaries: list[LatencySummary | None]) -> LatencySummary | None:
    hdrs = [s.hdr for s in summaries if s is not None and s.hdr and s.count]
    if not hdrs:
        return None
    return latency.summary_from_histogram(latency.merge(hdrs))


def table_one(measured: list[Measured]) -> tuple[str, list[str], list[list[str]]]:
    """Per hop count: flows, worst-case and p99.9 delay and jitter per stack, and the
    ratios fidelnet/Mininet (HVNet's Table I, every topology together)."""
    stacks = sorted({m.stack for m in measured}, key=["fidelnet", "mininet"].index)
    delay: dict[tuple[int, str], list[LatencySummary | None]] = defaultdict(list)
    jitter: dict[tuple[int, str], list[LatencySummary | None]] = defaultdict(list)
    counts: dict[int, int] = defaultdict(int)
    for m in measured:
        for hops, flows in m.by_hops().items():
            for _name, r in flows:
                delay[hops, m.stack].append(r.latency)
                jitter[hops, m.stack].append(_jitter(r))
                if m.stack == stacks[0]:
                    counts[hops] += 1
    header = ["hops", "flows"]
    for what in ("delay max µs", "delay p99.9 µs", "jitter max µs", "jitter p99.9 µs"):
        header += [f"{s} {what}" for s in stacks]
        if len(stacks) == 2:
            header.append(f"ratio {stacks[0]}/{stacks[1]}")
    rows = []
    for hops in sorted(counts):
        row = [str(hops), str(counts[hops])]
        for source in (delay, jitter):
            merged = {s: _merged(source[hops, s]) for s in stacks}
            worst = {
                s: max(
                    (x.max_ns for x in source[hops, s] if x is not None and x.count), default=None
                )
                for s in stacks
            }
            p999: dict[str, int | None] = {}
            for s in stacks:
                m_s = merged[s]
                p999[s] = m_s.p999_ns if m_s is not None else None
            for values in (worst, p999):
                row += [_us(values[s]) for s in stacks]
                if len(stacks) == 2:
                    row.append(_ratio(values[stacks[0]], values[stacks[1]]))
        rows.append(row)
    return ("Table I: worst-case delay and jitter per hop count (all topologies)", header, rows)


def summarize(opts: HvnetOptions, measured: list[Measured]) -> dict[str, Any]:
    title, header, rows = table_one(measured)
    per_topology = []
    for m in measured:
        lost = sum(r.lost for r in m.results.values())
        sent = sum(r.sent for r in m.results.values())
        levels = sorted({r.verdict.level for r in m.results.values() if r.verdict})
        loss = f"{100 * lost / max(sent, 1):.3f}"
        per_topology.append(
            [str(m.topology), m.stack, str(len(m.results)), str(sent), loss, ", ".join(levels)]
        )
    return {
        "tables": [
            {"title": title, "header": header, "rows": rows},
            {
                "title": "Flows per topology and stack",
                "header": ["topology", "stack", "flows", "packets sent", "loss %", "verdicts"],
                "rows": per_topology,
            },
        ],
        "options": {
            "topologies": opts.topologies,
            "nodes": opts.nodes,
            "flows": opts.flows,
            "hops": list(opts.hops),
            "rate_mbps": list(opts.rate_mbps),
            "size": opts.size,
            "duration_s": opts.duration,
            "link": opts.link,
            "seed": opts.seed,
        },
    }


def figures(out: Path, measured: list[Measured], worst: int) -> list[tuple[str, Path]]:
    """HVNet's figures as PNG files in ``out/plots``: (title, path)."""
    from fidelnet.report.plots.base import figure, legend, save
    from fidelnet.report.plots.latency import hdr_percentiles_figure

    plots = out / "plots"
    plots.mkdir(parents=True, exist_ok=True)
    made: list[tuple[str, Path]] = []
    first = [m for m in measured if m.topology == 1]
    if first and worst:
        fig, (ax,) = figure()
        for m in first:
            events = sorted((e for r in m.results.values() for e in r.worst), key=lambda e: -e[1])[
                :worst
            ]
            if not events:
                continue
            t0 = min(r.first_send_ns or e[0] for r in m.results.values() for e in r.worst[:1])
            ax.plot(
                [(t - t0) / 1e9 for t, _l, _f in events],
                [max(lat, 1) / 1e3 for _t, lat, _f in events],
                linestyle="none", marker=".", markersize=2, alpha=0.7,
                color=STACK_COLORS.get(m.stack), label=f"{m.stack} ({len(events)} worst)",
            )  # fmt: skip
        ax.set_yscale("log")
        ax.set_xlabel("time (s)")
        ax.set_ylabel("latency (µs)")
        ax.set_title(f"The {worst} worst latency events over time, topology 1")
        ax.grid(True, alpha=0.4)
        legend(ax)
        made.append(("Worst-case latency events over time (HVNet Fig. 4/6)",
                     save(fig, plots / "hvnet-worst-events.png")))  # fmt: skip
    if first:
        hops = sorted({h for m in first for h in m.by_hops()})
        for h in hops:
            series: list[tuple[str, LatencySummary]] = []
            colors: list[str | None] = []
            for m in first:
                for name, r in m.by_hops().get(h, []):
                    series.append(
                        (f"{name} {m.stack}", r.flows[0].latency if r.flows else r.latency)
                    )
                    colors.append(STACK_COLORS.get(m.stack))
            fig = hdr_percentiles_figure(
                series, title=f"{h}-hop flows, topology 1", colors=colors, small=True
            )
            made.append((f"{h}-hop flows by percentile (HVNet Fig. 5)",
                         save(fig, plots / f"hvnet-hops-{h}.png")))  # fmt: skip
    stacks = sorted({m.stack for m in measured}, key=["fidelnet", "mininet"].index)
    merged: list[tuple[str, LatencySummary]] = []
    for s in stacks:
        j = _merged([_jitter(r) for m in measured if m.stack == s for r in m.results.values()])
        if j is not None:
            merged.append((f"{s} jitter", j))
    if merged:
        fig = hdr_percentiles_figure(
            merged,
            title="Jitter of every packet, all topologies",
            colors=[STACK_COLORS.get(s.split()[0]) for s, _ in merged],
        )
        made.append(("Jitter by percentile, all topologies (HVNet Fig. 8)",
                     save(fig, plots / "hvnet-jitter.png")))  # fmt: skip
    return made
