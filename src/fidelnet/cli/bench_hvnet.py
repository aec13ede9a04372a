"""``fidelnet bench hvnet``: HVNet's random topologies with per-flow routing, fidelnet
beside stock Mininet (:mod:`fidelnet.bench.hvnet`)."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from fidelnet.errors import ValidationError

__all__ = ["hvnet"]


def _pair_of(option: str, text: str, kind: type[float] | type[int]) -> tuple[float, float]:
    try:
        lo, hi = (kind(x) for x in text.split(","))
    except ValueError as exc:
        raise ValidationError(option, "must be LOW,HIGH", text) from exc
    return lo, hi


def _pairs(text: str | None) -> list[tuple[str, str]]:
    if not text:
        return []
    out = []
    for item in text.split(","):
        a, sep, b = item.partition(":")
        if not sep or not a or not b:
            raise ValidationError("--pairs", "must be IF1:IF2[,IF3:IF4...]", text)
        out.append((a, b))
    return out


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default fidelnet-results/hvnet-TIME).",
)
@click.option("--topologies", type=click.IntRange(1, 100), default=3, show_default=True)
@click.option(
    "--nodes",
    type=click.IntRange(3, 64),
    default=8,
    show_default=True,
    help="Routers per topology.",
)
@click.option(
    "--degree",
    type=click.FloatRange(1, 16),
    default=2.5,
    show_default=True,
    help="Mean links per router.",
)
@click.option(
    "--flows", type=click.IntRange(1, 256), default=8, show_default=True, help="Flows per topology."
)
@click.option("--hops", default="2,5", show_default=True, help="Range of hops per flow.")
@click.option(
    "--rate-mbps",
    default="0.1,2.94",
    show_default=True,
    help="Range of per-flow rates, Mbit/s (HVNet: 1,294 on hardware).",
)
@click.option(
    "--size",
    type=click.IntRange(28, 1500),
    default=363,
    show_default=True,
    help="Bytes per packet (IP).",
)
@click.option(
    "--duration",
    type=click.FloatRange(0.5, 600),
    default=5.0,
    show_default=True,
    help="Seconds of traffic per topology and stack.",
)
@click.option("--seed", type=int, default=1, show_default=True)
@click.option(
    "--link",
    type=click.Choice(["veth", "engine", "hw"]),
    default="veth",
    show_default=True,
    help="fidelnet's link kind (Mininet's are veth).",
)
@click.option(
    "--pairs",
    default=None,
    envvar="FIDELNET_HW_PAIRS",
    help="With --link hw: IF1:IF2,IF3:IF4,... (one per link; default "
    "$FIDELNET_HW_PAIRS, as `fidelnet hw sriov` sets it).",
)
@click.option(
    "--peer/--no-peer",
    default=True,
    show_default=True,
    help="Measure stock Mininet beside fidelnet.",
)
@click.option(
    "--worst",
    type=click.IntRange(0, 100000),
    default=5000,
    show_default=True,
    help="Worst latency events kept per flow (the over-time figure).",
)
def hvnet(
    out: Path | None, topologies: int, nodes: int, degree: float, flows: int, hops: str,
    rate_mbps: str, size: int, duration: float, seed: int, link: str, pairs: str | None,
    peer: bool, worst: int,
) -> None:  # fmt: skip
    """HVNet: random topologies, per-flow routed UDP flows, fidelnet beside Mininet.

    Writes every flow's result, Table I, the figures and report.html into the
    results directory, and prints Table I."""
    from fidelnet.bench.hvnet import HvnetOptions, run
    from fidelnet.measure.selftest import load_floor

    console = Console(stderr=True)

    def say(message: str) -> None:
        console.print(f"[dim]*** {message}")

    h_lo, h_hi = _pair_of("--hops", hops, int)
    target = out or Path("fidelnet-results") / (
        "hvnet-" + _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    opts = HvnetOptions(
        out=target, topologies=topologies, nodes=nodes, degree=degree, flows=flows,
        hops=(int(h_lo), int(h_hi)), rate_mbps=_pair_of("--rate-mbps", rate_mbps, float),
        size=size, duration=duration, seed=seed, link=link, hardware_pairs=_pairs(pairs),
        peer=peer, worst=worst,
    )  # fmt: skip
    opts.check()
    summary = run(opts, floor=load_floor(), say=say)
    tables = [(t["title"], t["header"], t["rows"]) for t in summary["tables"]]
    for title, header, rows in tables[:1]:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="right")
        for r in rows:
            table.add_row(*r)
        Console(width=max(Console().width, 160)).print(table)
    from fidelnet.report import render_dir

    figures = [(title, Path(path)) for title, path in summary["figures"]]
    page = render_dir(target, tables=tables, figures=figures)
    click.echo(f"results: {target}\nreport: {page}")
