"""The tables and figures of ``fidelnet bench vt`` (VT-Mininet's Figures 2/8, 3/9 and
5/10, side by side) from the measured points; see :mod:`fidelnet.bench.vt`."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fidelnet.measure.fairness import jain

if TYPE_CHECKING:
    from fidelnet.bench.vt import Point, VtOptions

__all__ = ["figures", "summarize"]

COLORS = {"fidelnet-vt": "#2ca02c", "fidelnet": "#1f77b4", "mininet": "#d62728"}
_SWITCHES = {"ovs": "Open vSwitch (userspace datapath)", "bridge": "Linux bridges"}
WIRE = 1448 / 1514
"""TCP goodput per byte on the wire (1500-byte MTU, timestamps): the most a flow's
goodput can be of the configured rate."""


def _label(stack: str, points: list[Point]) -> str:
    if stack != "fidelnet-vt":
        return "fidelnet, TDF 1" if stack == "fidelnet" else "Mininet 2.3.0"
    lo = min(p.tdf[0] for p in points)
    hi = max(p.tdf[1] for p in points)
    return f"fidelnet, TDF {hi:g}" if lo == hi else f"fidelnet, TDF {lo:g}-{hi:g} (auto)"


def _one(p: Point) -> float:
    return next(iter(p.goodput_bps.values()), 0.0)


def _by(points: list[Point], experiment: str) -> dict[str, list[Point]]:
    out: dict[str, list[Point]] = defaultdict(list)
    for p in points:
        if p.experiment == experiment:
            out[p.stack].append(p)
    return out


def _cell(p: Point | None, expected_bps: float | None = None) -> str:
    if p is None:
        return ""
    g = _one(p) / 1e9
    text = f"{g:.2f}"
    if expected_bps:
        text += f" ({100 * _one(p) / expected_bps:.0f} %)"
    if p.verdict != "trusted":
        text += f" {p.verdict}"  # the run monitor's verdict, when not trusted
    return text


def _wall(p: Point | None) -> str:
    return "" if p is None else f"{p.wall_s:.1f}"


def _tdf(p: Point | None) -> str:
    if p is None:
        return ""
    lo, hi = p.tdf
    return f"{hi:g}" if lo == hi else f"{lo:g}-{hi:g}"


def summarize(
    opts: VtOptions, points: list[Point], walls: dict[str, float], netem: bool
) -> dict[str, Any]:
    """Tables (title, header, rows) for the report, and the numbers behind them."""
    stacks = opts.stacks()
    tables: list[dict[str, Any]] = []
    for exp, title, xname, expected in (
        ("a", f"(a) one TCP flow through {opts.switches} switches, 10 µs links "
              "(VT-Mininet Fig. 2 vs 8)", "link rate (Gbit/s)", lambda x: x * 1e9),
        ("b", f"(b) one TCP flow at {opts.rate_b_gbps:g} Gbit/s, 50 µs links, by chain length "
              "(Fig. 3 vs 9)", "switches", lambda _x: opts.rate_b_gbps * 1e9),
    ):  # fmt: skip
        by = _by(points, exp)
        if not by:
            continue
        xs = sorted({p.x for ps in by.values() for p in ps})
        header = [xname] + [f"{_label(s, by[s])} Gbit/s" for s in stacks if s in by]
        header += ["TDF", *[f"wall {s} (s)" for s in stacks if s in by]]
        rows = []
        for x in xs:
            at = {s: next((p for p in by.get(s, []) if p.x == x), None) for s in stacks}
            row = [f"{x:g}"]
            row += [_cell(at[s], expected(x)) for s in stacks if s in by]
            row += [_tdf(at.get("fidelnet-vt"))]
            row += [_wall(at[s]) for s in stacks if s in by]
            rows.append(row)
        tables.append({"title": title, "header": header, "rows": rows})
    by = _by(points, "c")
    if by:
        header = ["flow"] + [f"{_label(s, by[s])} Gbit/s" for s in stacks if s in by]
        rows = []
        phase2 = {s: next((p for p in by[s] if p.x == 2), None) for s in by}
        phase1 = {s: next((p for p in by[s] if p.x == 1), None) for s in by}
        labels = sorted({f for p in phase2.values() if p for f in p.goodput_bps},
                        key=lambda f: int(f.split(">")[0][1:]))  # fmt: skip
        for f in labels:
            row = [f]
            for s in stacks:
                if s in by:
                    p = phase2.get(s)
                    row.append(f"{p.goodput_bps.get(f, 0) / 1e9:.3f}" if p else "")
            rows.append(row)
        jrow, one, tdf, wall = ["Jain (phase 2)"], ["phase 1, one flow"], ["TDF"], ["wall (s)"]
        verdict = ["verdict (phase 2)"]
        for s in stacks:
            if s not in by:
                continue
            p2, p1 = phase2.get(s), phase1.get(s)
            jrow.append(f"{jain(p2.goodput_bps.values()):.4f}" if p2 else "")
            one.append(_cell(p1))
            tdf.append(_tdf(p2) if s == "fidelnet-vt" else "1")
            wall.append(f"{(p1.wall_s if p1 else 0) + (p2.wall_s if p2 else 0):.1f}")
            verdict.append(p2.verdict if p2 else "")
        tables.append({
            "title": "(c) five concurrent 1 Gbit/s flows on 50 hosts, 100 µs links "
                     "(Fig. 5 vs 10)",
            "header": header, "rows": [*rows, jrow, verdict, one, tdf, wall],
        })  # fmt: skip
    notes = [
        f"switches: {_SWITCHES[opts.switch]} for fidelnet; Linux bridges for Mininet "
        "(its OVS needs the kernel module)",
        "a cell marked degraded or untrusted: the run monitor's verdict on that "
        "measurement (docs/fidelity.md)",
        "goodput: the receiver's (iperf3 server), after a warm-up of "
        f"{opts.warmup} s, over {opts.duration} s of the programs' time; at most "
        f"{100 * WIRE:.1f} % of the configured rate (headers)",
    ]
    if not netem:
        notes.append(
            "this kernel has no sch_netem: fidelnet's delayed links are link-engine links; "
            "stock Mininet's TCLinks carry the rate only (no delay)"
        )
    return {
        "tables": tables,
        "notes": notes,
        "wall_s": walls,
        "points": [
            {
                "experiment": p.experiment,
                "x": p.x,
                "stack": p.stack,
                "goodput_bps": p.goodput_bps,
                "series_bps": p.series,
                "wall_s": p.wall_s,
                "tdf": list(p.tdf),
            }
            for p in points
        ],  # fmt: skip
    }


def _same(x: float) -> float:
    return x


def figures(out: Path, points: list[Point]) -> list[tuple[str, Path]]:
    """The paper's figures as PNG files in ``out/plots``: (title, path)."""
    from fidelnet.report.plots.base import figure, legend, save

    plots = out / "plots"
    made: list[tuple[str, Path]] = []
    for exp, title, xlabel, ideal in (
        ("a", "(a) TCP goodput by link rate (VT-Mininet Fig. 2 vs 8)", "link rate (Gbit/s)",
         _same),
        ("b", "(b) TCP goodput by chain length (Fig. 3 vs 9)", "switches", None),
    ):  # fmt: skip
        by = _by(points, exp)
        if not by:
            continue
        fig, (ax,) = figure()
        xs = sorted({p.x for ps in by.values() for p in ps})
        width = 0.8 / max(1, len(by))
        for k, (stack, ps) in enumerate(sorted(by.items())):
            ax.bar(
                [i + k * width for i, x in enumerate(xs) for p in ps if p.x == x],
                [_one(p) / 1e9 for x in xs for p in ps if p.x == x],
                width, color=COLORS.get(stack), label=_label(stack, ps),
            )  # fmt: skip
        if ideal is not None:
            ax.plot([i + 0.4 - width / 2 for i in range(len(xs))], [ideal(x) for x in xs],
                    "k_", markersize=30, label="configured rate")  # fmt: skip
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(xs))], [f"{x:g}" for x in xs])
        ax.set_xlabel(xlabel)
        ax.set_ylabel("goodput (Gbit/s)")
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.4)
        legend(ax)
        made.append((title, save(fig, plots / f"vt-{exp}.png")))
    by = _by(points, "c")
    phase2 = [(s, p) for s, ps in sorted(by.items()) for p in ps if p.x == 2]
    if phase2:
        fig, axes = figure(rows=len(phase2))
        for ax, (stack, p) in zip(axes, phase2, strict=True):
            for f, series in sorted(p.series.items(), key=lambda kv: int(kv[0].split(">")[0][1:])):
                ax.plot(range(1, len(series) + 1), [v / 1e9 for v in series], marker=".",
                        label=f)  # fmt: skip
            ax.set_ylim(0, 1.2)
            ax.set_ylabel("Gbit/s")
            ax.set_title(f"{_label(stack, [p])}: Jain {jain(p.goodput_bps.values()):.3f}",
                         fontsize="small")  # fmt: skip
            ax.grid(True, alpha=0.4)
            legend(ax, small=True)
        axes[-1].set_xlabel("second of the programs' time")
        title = "(c) five concurrent flows over time (Fig. 5 vs 10)"
        made.append((title, save(fig, plots / "vt-c.png")))
    return made
