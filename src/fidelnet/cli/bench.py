"""``fidelnet bench``: benchmarks against stock Mininet, measured in the same run."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from fidelnet.cli.bench_hvnet import hvnet
from fidelnet.cli.bench_vt import vt
from fidelnet.errors import ValidationError

__all__ = ["bench"]


def _rates(text: str) -> tuple[float, ...]:
    try:
        return tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError as exc:
        raise ValidationError("--rates", "must be comma-separated kpps numbers", text) from exc


@click.group()
def bench() -> None:
    """Benchmarks: `line` (the CIMininet 7-node line beside stock Mininet), `hifi`
    (the Mininet-HiFi validation suite), `hvnet` (HVNet's random topologies with
    per-flow routing beside stock Mininet), `vt` (VT-Mininet's experiments: fidelnet
    with virtual time, without, and stock Mininet)."""


bench.add_command(hvnet)
bench.add_command(vt)


@bench.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default fidelnet-results/hifi-TIME).",
)
@click.option(
    "--seconds",
    type=click.IntRange(3, 600),
    default=10,
    show_default=True,
    help="Seconds per test.",
)
@click.option(
    "--only",
    type=click.Choice(["tcp", "udp", "all"]),
    default="all",
    show_default=True,
    help="The TCP tests, the UDP dumbbell, or both.",
)
def hifi(out: Path | None, seconds: int, only: str) -> None:
    """The Mininet-HiFi validation suite: two-way, fork-out, single-switch and
    dumbbell TCP tests at 100 Mbit/s, and the UDP dumbbell with droptail and hifi
    queues; Jain's index per test with its spread, and a verdict on each.

    Exits 0 when it ran (whatever the verdicts), 2 on bad input."""
    from fidelnet.bench import hifi as suite
    from fidelnet.bench.hifi_page import summary_rows, write_page

    err = Console(stderr=True)

    def say(message: str) -> None:
        err.print(f"[dim]*** {message}")

    tests = []
    if only in ("tcp", "all"):
        for name in suite.TCP_TESTS:
            say(f"TCP {name}, {seconds} s")
            tests.append(suite.tcp_test(name, seconds))
    if only in ("udp", "all"):
        for queue in ("droptail", "hifi"):
            say(f"UDP dumbbell, queue {queue}, {seconds} s")
            tests.append(suite.udp_dumbbell(queue, seconds))
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    target = out or Path("fidelnet-results") / f"hifi-{stamp}"
    page = write_page(tests, target)
    table = Table(title="Mininet-HiFi validation (Table 1)")
    for col in ("test", "flows", "Mbit/s per flow", "fair share", "Jain", "per s min/p5/med",
                "verdict"):  # fmt: skip
        table.add_column(col)
    for row in summary_rows(tests):
        table.add_row(*row)
    Console(width=max(Console().width, 120)).print(table)
    for t in tests:
        if t.reasons:
            click.echo(f"verdict {t.name} ({t.queue}): {t.level}: {t.reasons}")
    click.echo(f"report: {page}")


@bench.command()
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Results directory (default fidelnet-results/line-TIME).",
)
@click.option("--routers", type=click.IntRange(2, 64), default=7, show_default=True)
@click.option(
    "--rates",
    default=None,
    help="Offered rates in kpackets/s [default: 50,100,200,300,500,700,900,1000; "
    "with --node vm 2,5,10,20,50,100,200,500,1000].",
)
@click.option(
    "--duration",
    type=click.FloatRange(0.5, 60),
    default=2.0,
    show_default=True,
    help="Seconds per rate.",
)
@click.option(
    "--trial",
    type=click.FloatRange(0.2, 60),
    default=1.0,
    show_default=True,
    help="Seconds per zero-loss trial.",
)
@click.option(
    "--burst",
    type=click.IntRange(1, 10000),
    default=100,
    show_default=True,
    help="Packets per burst for the bursty shape.",
)
@click.option(
    "--peer/--no-peer",
    default=True,
    show_default=True,
    help="Measure stock Mininet beside fidelnet.",
)
@click.option("--no-bursts", is_flag=True, help="CBR only.")
@click.option(
    "--mode",
    type=click.Choice(["udp", "gso", "packet"]),
    default="gso",
    show_default=True,
    help="pktgen's sender mode (gso: >= 1 Mpps on one core).",
)
@click.option(
    "--fastpath",
    type=click.Choice(["xdp"]),
    default=None,
    help="fidelnet's routers forward in XDP (docs/fastpath.md); Mininet's as always.",
)
@click.option(
    "--node",
    type=click.Choice(["netns", "vm"]),
    default="netns",
    show_default=True,
    help="vm: also a line whose routers are QEMU VMs (CIMininet's 'VM with veth'), "
    "beside the namespace line and Mininet.",
)
@click.option(
    "--vm-memory",
    type=click.IntRange(96, 65536),
    default=256,
    show_default=True,
    help="MiB per VM router (--node vm).",
)
def line(
    out: Path | None,
    routers: int,
    rates: str,
    duration: float,
    trial: float,
    burst: int,
    peer: bool,
    no_bursts: bool,
    mode: str,
    fastpath: str | None,
    node: str,
    vm_memory: int,
) -> None:
    """The CIMininet line: lg - h1..h7 - rx, 64-byte frames, fidelnet beside Mininet.

    Writes every result, the HDR logs, plots and report.html into the results
    directory, and prints the side-by-side tables."""
    from fidelnet.bench.line import RATES_KPPS, RATES_VM_KPPS, LineOptions, run
    from fidelnet.measure.selftest import load_floor, selftest

    console = Console(stderr=True)

    def say(message: str) -> None:
        console.print(f"[dim]*** {message}")

    target = out or Path("fidelnet-results") / (
        "line-" + _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    )
    opts = LineOptions(
        out=target,
        n=routers,
        rates_kpps=_rates(rates)
        if rates is not None
        else (RATES_VM_KPPS if node == "vm" else RATES_KPPS),
        duration=duration,
        trial_s=trial,
        burst=burst,
        peer=peer,
        shapes=("cbr",) if no_bursts else ("cbr", "burst"),
        mode=mode,  # type: ignore[arg-type]
        fastpath=fastpath,
        node=node,
        vm_memory_mb=vm_memory,
    )
    opts.check()
    floor = load_floor()
    if floor is None:
        say("measuring the generator's floor first (fidelnet measure selftest)")
        floor = selftest(duration=2.0, search=False).floor
    summary = run(opts, floor=floor, say=say)
    tables = [(t["title"], t["header"], t["rows"]) for t in summary["tables"]]
    for title, header, rows in tables:
        table = Table(title=title)
        for h in header:
            table.add_column(h, justify="right")
        for r in rows:
            table.add_row(*r)
        Console(width=max(Console().width, 160)).print(table)
    try:
        from fidelnet.report import render_dir
    except ImportError:  # pragma: no cover - the report package ships with fidelnet
        click.echo(f"results: {target}")
        return
    page = render_dir(target, tables=tables)
    click.echo(f"results: {target}\nreport: {page}")
