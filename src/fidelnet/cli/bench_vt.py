"""``fidelnet bench vt``: VT-Mininet's three experiments, fidelnet with virtual time
beside fidelnet without it and stock Mininet (:mod:`fidelnet.bench.vt`)."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from fidelnet.errors import ValidationError

__all__ = ["vt"]


def _numbers(option: str, text: str, kind: type[float] | type[int]) -> tuple[float, ...]:
    try:
        values = tuple(kind(x) for x in text.split(","))
    except ValueError as exc:
        raise ValidationError(option, "must be numbers separated by commas", text) from exc
    if not values:
        raise ValidationError(option, "give at least one", text)
    return values


@click.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default fidelnet-results/vt-TIME).",
)
@click.option(
    "--experiments",
    default="a,b,c",
    show_default=True,
    help="a: chain by link rate; b: chain by length; c: five concurrent flows.",
)
@click.option(
    "--switches",
    type=click.IntRange(1, 200),
    default=40,
    show_default=True,
    help="(a)'s chain length.",
)
@click.option("--rates", default="1,2,4,8,10", show_default=True, help="(a)'s link rates, Gbit/s.")
@click.option("--sizes", default="10,20,40,60,80", show_default=True, help="(b)'s chain lengths.")
@click.option(
    "--rate-b",
    type=click.FloatRange(0.001, 100),
    default=4.0,
    show_default=True,
    help="(b)'s link rate, Gbit/s.",
)
@click.option(
    "--duration",
    type=click.IntRange(1, 600),
    default=5,
    show_default=True,
    help="Seconds of each flow measured (programs' time), after --warmup.",
)
@click.option("--warmup", type=click.IntRange(0, 60), default=1, show_default=True)
@click.option(
    "--switch",
    type=click.Choice(["bridge", "ovs"]),
    default="bridge",
    show_default=True,
    help="fidelnet's switches (Mininet's are Linux bridges).",
)
@click.option(
    "--tdf",
    default="auto",
    show_default=True,
    help="The dilated stack's factor: auto (fidelnet chooses) or a number.",
)
@click.option(
    "--tdf-high",
    type=click.FloatRange(1, 1000),
    default=256.0,
    show_default=True,
    help="The highest factor auto may choose.",
)
@click.option(
    "--undilated/--no-undilated",
    default=True,
    show_default=True,
    help="Also measure fidelnet at TDF 1.",
)
@click.option(
    "--peer/--no-peer", default=True, show_default=True, help="Also measure stock Mininet."
)
@click.option(
    "--quick",
    is_flag=True,
    help="A short run: 10 switches, rates 1,4,10, sizes 10,20, 3 s per flow.",
)
def vt(
    out: Path | None, experiments: str, switches: int, rates: str, sizes: str, rate_b: float,
    duration: int, warmup: int, switch: str, tdf: str, tdf_high: float, undilated: bool,
    peer: bool, quick: bool,
) -> None:  # fmt: skip
    """VT-Mininet's experiments: fidelnet dilated, undilated, and stock Mininet.

    Writes the summary, the figures and report.html into the results directory and
    prints the tables."""
    from fidelnet.bench.vt import VtOptions, run

    console = Console(stderr=True)

    def say(message: str) -> None:
        console.print(f"[dim]*** {message}")

    target = out or Path("fidelnet-results") / (
        "vt-" + _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    factor: float | str = tdf
    if tdf != "auto":
        factor = _numbers("--tdf", tdf, float)[0]
    opts = VtOptions(
        out=target,
        experiments=tuple(x.strip() for x in experiments.split(",") if x.strip()),
        switches=switches,
        rates_gbps=_numbers("--rates", rates, float),
        sizes=tuple(int(x) for x in _numbers("--sizes", sizes, int)),
        rate_b_gbps=rate_b,
        duration=duration,
        warmup=warmup,
        switch=switch,
        tdf=factor,
        tdf_high=tdf_high,
        undilated=undilated,
        peer=peer,
    )
    if quick:
        opts.switches, opts.rates_gbps, opts.sizes, opts.duration = (
            10,
            (1.0, 4.0, 10.0),
            (10, 20),
            3,
        )
    opts.check()
    summary = run(opts, say=say)
    tables = [(t["title"], t["header"], t["rows"]) for t in summary["tables"]]
    wide = Console(width=max(Console().width, 160))
    for title, header, rows in tables:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="right")
        for r in rows:
            table.add_row(*r)
        wide.print(table)
    for note in summary["notes"]:
        click.echo(f"note: {note}")
    from fidelnet.report import render_dir

    figures = [(title, Path(path)) for title, path in summary["figures"]]
    page = render_dir(target, tables=tables, figures=figures)
    click.echo(f"results: {target}\nreport: {page}")
