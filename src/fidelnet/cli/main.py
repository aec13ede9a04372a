"""``fidelnet``: the command-line entry point.

Subcommands: ``mn`` (Mininet's ``mn``, options and scripts), ``clean`` (remove
what stale runs own), ``compat-path`` (the directory holding the ``mininet``
package shim), ``runs`` (list runs with state files), ``measure`` (the
generator's floor), ``calibrate`` (the machine's profile), ``bench`` (benchmarks
beside Mininet), ``report`` (an HTML page from a results directory), ``validate``,
``run`` and ``test`` (scenario files).
"""

from __future__ import annotations

import sys

import click

from fidelnet._version import __version__
from fidelnet.errors import FidelnetError
from fidelnet.log import LEVELS, set_log_level

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="fidelnet")
@click.option(
    "-v",
    "--verbosity",
    type=click.Choice(list(LEVELS)),
    default="output",
    show_default=True,
    help="Log level, as Mininet's.",
)
def cli(verbosity: str) -> None:
    """fidelnet: a network emulator for CI and for measurements you can trust.

    Runs Mininet scripts unchanged (`fidelnet mn script.py`), builds topologies in
    network namespaces, and removes exactly what it created.
    """
    set_log_level(verbosity)


@cli.command()
@click.option(
    "--run",
    "run_ids",
    multiple=True,
    metavar="ID",
    help="Also remove this run even if its owner is alive.",
)
@click.option("--dry-run", is_flag=True, help="Print what would be removed.")
def clean(run_ids: tuple[str, ...], dry_run: bool) -> None:
    """Remove what stale runs own (runs whose owning process is gone), nothing else."""
    from fidelnet.cleanup import clean_runs

    report = clean_runs(set(run_ids), dry_run=dry_run)
    for line in report.lines:
        click.echo(line)
    if report.problems:
        for p in report.problems:
            click.echo(f"fidelnet clean: {p}", err=True)
        sys.exit(1)


@cli.command()
def runs() -> None:
    """List runs that have a state file, with their owner and whether it is alive."""
    from fidelnet.kernel.state import list_runs, live_objects, notes

    for r in list_runs():
        status = "alive" if r.alive else "stale"
        objs = live_objects(r.path)
        click.echo(f"{r.run_id}  {status:5}  pid {r.owner_pid}  {len(objs)} objects  {r.command}")
        for rec in notes(r.path):  # VM nodes: what each costs now
            if "vm_pid" in rec:
                rss = _rss_mib(int(rec["vm_pid"]))
                click.echo(
                    f"  vm {rec.get('node')}: {rec.get('vm_accel')}, "
                    f"{rec.get('vm_memory_mb')} MiB guest, "
                    + (f"{rss:.0f} MiB resident" if rss is not None else "not running")
                )


def _rss_mib(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


@cli.command("compat-path")
def compat_path() -> None:
    """Print the directory holding the `mininet` package shim.

    PYTHONPATH=$(fidelnet compat-path) python3 script.py runs a Mininet script on
    fidelnet. Nothing is installed over a real Mininet.
    """
    from fidelnet.compat import shim_path

    click.echo(shim_path())


@cli.command(
    context_settings={
        "ignore_unknown_options": True,
        "allow_extra_args": True,
        "help_option_names": [],
    }
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def mn(args: tuple[str, ...]) -> None:
    """Mininet's `mn`: the same options (see `fidelnet mn --help`), or a script to run."""
    from fidelnet.cli.mn import run_mn

    sys.exit(run_mn(list(args)))


def _register() -> None:
    from fidelnet.cli.bench import bench
    from fidelnet.cli.calibrate import calibrate
    from fidelnet.cli.hw import hw
    from fidelnet.cli.measure import measure
    from fidelnet.cli.report import report
    from fidelnet.cli.scenario import run, test
    from fidelnet.cli.validate import validate
    from fidelnet.cli.vm import vm

    for command in (measure, bench, calibrate, report, validate, run, test, vm, hw):
        cli.add_command(command)


_register()


def main() -> None:
    try:
        cli(standalone_mode=True)
    except FidelnetError as exc:
        click.echo(f"fidelnet: {exc}", err=True)
        sys.exit(2)
