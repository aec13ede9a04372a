"""``fidelnet measure``: measurements that need no topology of the user's."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

__all__ = ["measure"]


def _default_out(kind: str) -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("fidelnet-results") / f"{kind}-{stamp}"


@click.group()
def measure() -> None:
    """Measurements: `selftest` (the generator's own floor)."""


@measure.command()
@click.option(
    "--duration",
    type=click.FloatRange(0.5, 60),
    default=3.0,
    show_default=True,
    help="Seconds per latency run.",
)
@click.option(
    "--search/--no-search",
    default=True,
    show_default=True,
    help="Also search the highest zero-loss rate.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default fidelnet-results/selftest-TIME).",
)
def selftest(duration: float, search: bool, out: Path | None) -> None:
    """Measure pktgen's own floor over a bare veth pair: latency and highest rate.

    The floor is kept for this machine and carried by every later report."""
    from fidelnet.measure.provenance import collect
    from fidelnet.measure.results import save_result
    from fidelnet.measure.selftest import floor_path
    from fidelnet.measure.selftest import selftest as run_selftest

    console = Console(stderr=True)
    result = run_selftest(
        duration=duration, search=search, progress=lambda m: console.print(f"[dim]*** {m}")
    )
    target = out or _default_out("selftest")
    target.mkdir(parents=True, exist_ok=True)
    path = save_result(target, "selftest", result, collect(None), result.floor)
    table = Table(title="pktgen over a bare veth pair (64-byte frames)")
    cols = (
        "mode",
        "offered pps",
        "sent pps",
        "loss",
        "p50 µs",
        "p99.9 µs",
        "max µs",
        "socket drops",
    )
    for col in cols:
        table.add_column(col, justify="right")
    for r in result.runs:
        lat = r.latency
        table.add_row(
            r.mode,
            f"{r.requested_pps:,.0f}",
            f"{r.achieved_pps:,.0f}",
            f"{r.lost} ({100 * r.loss_ratio:.3f}%)",
            f"{lat.p50_ns / 1000:.1f}",
            f"{lat.p999_ns / 1000:.1f}",
            f"{lat.max_ns / 1000:.1f}",
            str(r.socket_drops),
        )
    Console(width=max(Console().width, 120)).print(table)
    f = result.floor
    click.echo(
        f"floor: latency p50 {f.latency_p50_ns / 1000:.1f} µs, "
        f"p99.9 {f.latency_p999_ns / 1000:.1f} µs; "
        f"highest send rate {f.max_send_pps:,.0f} pps"
        + (
            f"; highest zero-loss rate {f.max_zero_loss_pps:,.0f} pps"
            if f.max_zero_loss_pps
            else ""
        )
    )
    for flag in result.flags:
        click.echo(f"flag {flag.code}: {flag.message}")
    click.echo(f"result: {path}\nfloor kept in: {floor_path()}")
