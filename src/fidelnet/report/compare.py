"""Results drawn together.

A stack is a label's first word (``fidelnet-cbr-00050k`` → ``fidelnet``,
``mininet-zero-loss-cbr`` → ``mininet``), as ``fidelnet bench line`` names its
results. Results of different stacks with the same traffic — UDP runs with the
same pattern, burst, frame size and requested rate; zero-loss searches with the
same pattern, burst and frame size — are overlaid: one plot per rate (latency by
percentile, received rate) and one per traffic shape (the searches), a line per
stack, each stack in the same colour in every plot. UDP runs without such a
counterpart are drawn together per stack and pattern, one line per rate, as
before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fidelnet.measure.results import UdpResult, ZeroLossResult
from fidelnet.report import formatting as fmt
from fidelnet.report import plots
from fidelnet.report.markup import Item, Plots, e, slug

__all__ = ["STACK_COLORS", "comparison", "stack_of"]

STACK_COLORS = (
    "tab:blue",
    "tab:orange",
    "tab:green",
    "tab:red",
    "tab:purple",
    "tab:brown",
    "tab:pink",
    "tab:olive",
    "tab:cyan",
)

Shape = tuple[str, int | None, int]
"""What makes traffic comparable besides its rate: pattern, burst, frame size."""


def stack_of(label: str) -> str:
    """The stack a result belongs to: its label's first word."""
    return label.split("-", 1)[0]


def _shape_name(shape: Shape) -> str:
    pattern, burst, size = shape
    return f"{pattern}" + (f" (bursts of {burst})" if burst else "") + f", {size} B frames"


@dataclass
class _Run:
    label: str
    stack: str
    result: UdpResult


@dataclass
class _Search:
    label: str
    stack: str
    result: ZeroLossResult


@dataclass
class _Plan:
    """What is compared: per traffic shape, the searches by stack and the UDP runs
    by rate; and the UDP runs that are not compared with anything."""

    stacks: list[str]
    searches: dict[Shape, list[_Search]]
    rates: dict[Shape, dict[int, list[_Run]]]
    alone: list[_Run]


def _plan(items: Sequence[Item]) -> _Plan:
    stacks: list[str] = []
    runs: dict[Shape, dict[int, list[_Run]]] = {}
    searches: dict[Shape, list[_Search]] = {}
    for label, _s, rf in items:
        r = rf.result
        stack = stack_of(label)
        if isinstance(r, UdpResult):
            shape: Shape = (r.pattern, r.burst, r.size)
            rate = round(r.requested_pps)
            runs.setdefault(shape, {}).setdefault(rate, []).append(_Run(label, stack, r))
        elif isinstance(r, ZeroLossResult):
            searches.setdefault((r.pattern, r.burst, r.size), []).append(_Search(label, stack, r))
        else:
            continue
        if stack not in stacks:
            stacks.append(stack)
    compared: dict[Shape, dict[int, list[_Run]]] = {}
    alone: list[_Run] = []
    for shape, by_rate in runs.items():
        for rate, group in sorted(by_rate.items()):
            if len({x.stack for x in group}) > 1:
                compared.setdefault(shape, {})[rate] = group
            else:
                alone.extend(group)
    found = {shape: group for shape, group in searches.items() if len({x.stack for x in group}) > 1}
    return _Plan(stacks, found, compared, alone)


def _draw(
    draw: Callable[..., Path], lines: list[tuple[str, object]], path: Path, **kw: object
) -> Path:
    return draw(lines, path, **kw)


def _overlays(plan: _Plan, plot: Plots, taken: set[str]) -> str:
    colors = {s: STACK_COLORS[i % len(STACK_COLORS)] for i, s in enumerate(plan.stacks)}
    shapes = list(dict.fromkeys([*plan.searches, *plan.rates]))
    if not shapes:
        return ""
    seen = {x.stack for by_rate in plan.rates.values() for g in by_rate.values() for x in g}
    seen |= {x.stack for g in plan.searches.values() for x in g}
    names = [s for s in plan.stacks if s in seen]
    legend = ", ".join(f"{s} {colors[s].removeprefix('tab:')}" for s in names)
    title = " and ".join(names) if len(names) <= 3 else f"{len(names)} stacks"
    parts = [
        f'<section id="compare"><h2>{e(title)} compared</h2>',
        f'<p class="muted">The same traffic at the same offered rate, one line per stack '
        f"({e(legend)}).</p>",
    ]
    for shape in shapes:
        what = _shape_name(shape)
        parts.append(f"<h3>{e(what)}</h3>")
        search = plan.searches.get(shape)
        if search:
            lines = _named([(x.stack, x.result) for x in search], [x.label for x in search])
            found = "; ".join(
                f"{n}: NDR {fmt.pps(x.result.ndr_pps)}, PDR {fmt.pps(x.result.pdr_pps)}"
                for (n, _r), x in zip(lines, search, strict=True)
            )
            fig = plot.figure(
                "zero-loss",
                slug(f"compare-{shape[0]}-{shape[2]}B-search", taken),
                f"Zero-loss searches ({what}) overlaid: {', '.join(n for n, _r in lines)}",
                f"Offered rate per trial, one line per stack; dashed: NDR, dotted: PDR ({found}).",
                functools.partial(
                    _draw,
                    plots.zero_loss_trials,
                    lines,
                    title=f"{what}: zero-loss search",
                    colors=[colors[x.stack] for x in search],
                    small=True,
                    svg=plot.svg,
                ),
            )
            parts.append(f'<div class="pairs">{fig}</div>')
        for rate, group in plan.rates.get(shape, {}).items():
            figs = []
            lines = _named([(x.stack, x.result) for x in group], [x.label for x in group])
            cols = [colors[x.stack] for x in group]
            at = f"{shape[0]} at {fmt.pps(rate)}"
            name = slug(f"compare-{shape[0]}-{shape[2]}B-{fmt.pps(rate)}", taken)
            stacks = ", ".join(dict.fromkeys(x.stack for x in group))
            if any(x.result.latency.count for x in group):
                figs.append(
                    plot.figure(
                        "hdr",
                        name,
                        f"Latency by percentile, {at} offered ({what}), {stacks} overlaid",
                        f"{at}: latency by percentile, one line per stack.",
                        functools.partial(
                            _draw,
                            plots.hdr_percentiles,
                            lines,
                            title=f"{at}: latency by percentile",
                            colors=cols,
                            small=True,
                            svg=plot.svg,
                        ),
                    )
                )
            if any(x.result.intervals for x in group):
                figs.append(
                    plot.figure(
                        "rate",
                        name,
                        f"Received rate over time, {at} offered ({what}), {stacks} overlaid",
                        f"{at}: received rate per interval, one line per stack.",
                        functools.partial(
                            _draw,
                            plots.rate_over_time,
                            lines,
                            title=f"{at}: received rate",
                            colors=cols,
                            small=True,
                            svg=plot.svg,
                        ),
                    )
                )
            parts.append(f'<div class="pairs">{"".join(figs)}</div>')
    parts.append("</section>")
    return "".join(parts)


def _named(lines: list[tuple[str, object]], labels: list[str]) -> list[tuple[str, object]]:
    """Lines named by their stack; by stack and label when a stack has several."""
    stacks = [s for s, _r in lines]
    if len(set(stacks)) == len(stacks):
        return lines
    return [(f"{s} ({label})", r) for (s, r), label in zip(lines, labels, strict=True)]


def _together(alone: list[_Run], plot: Plots, taken: set[str]) -> str:
    groups: dict[tuple[str, str], list[_Run]] = {}
    for x in alone:
        groups.setdefault((x.stack, x.result.pattern), []).append(x)
    named = []
    for (stack, pattern), runs in groups.items():
        runs.sort(key=lambda x: x.result.requested_pps)
        lines = [(fmt.pps(x.result.requested_pps), x.result) for x in runs]
        if len({n for n, _r in lines}) < len(lines):
            lines = [(f"{x.label} ({fmt.pps(x.result.requested_pps)})", x.result) for x in runs]
        named.append((" ".join(x for x in (stack, pattern) if x), lines))
    if sum(len(lines) for _n, lines in named) < 2:
        return ""
    parts = ['<section id="all-udp"><h2>UDP runs together</h2>']
    for name, lines in named:
        name_slug = slug(f"all-udp-{name}" if name else "all-udp", taken)
        what = f" ({name})" if name else ""
        if any(r.latency.count for _l, r in lines):
            parts.append(
                plot.figure(
                    "hdr",
                    name_slug,
                    f"Latency by percentile{what}, one line per rate",
                    f"Latency by percentile{what}, one line per requested rate.",
                    functools.partial(
                        _draw,
                        plots.hdr_percentiles,
                        list(lines),
                        title=f"Latency by percentile{what}",
                        svg=plot.svg,
                    ),
                )
            )
        if any(r.intervals for _l, r in lines):
            parts.append(
                plot.figure(
                    "rate",
                    name_slug,
                    f"Received rate over time{what}, one line per rate",
                    f"Received rate per interval{what}, one line per requested rate.",
                    functools.partial(
                        _draw,
                        plots.rate_over_time,
                        list(lines),
                        title=f"Received rate{what}",
                        svg=plot.svg,
                    ),
                )
            )
    parts.append("</section>")
    return "".join(parts)


def comparison(items: Sequence[Item], plot: Plots, taken: set[str]) -> str:
    """The overlays of compared stacks, then the UDP runs that have no counterpart
    drawn together per stack and pattern."""
    plan = _plan(items)
    return _overlays(plan, plot, taken) + _together(plan.alone, plot, taken)
