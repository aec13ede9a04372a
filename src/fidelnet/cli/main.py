"""``fidelnet``: the command-line entry point.

Subcommands: ``mn`` (Mininet's ``mn``, options and scripts), ``clean`` (remove
what stale runs own), ``compat-path`` (the directory holding the ``mininet``
package shim), ``runs`` (list runs with state files), ``measure`` (the
generator's floor), ``calibrate`` (the machine's profile), ``bench`` (benchmarks
beside Mininet), ``cluster`` (one topology over several machines on Kubernetes),
``report`` (an HTML page from a results directory), ``validate``, ``run`` and
``test`` (scenario files), ``doctor`` (what this machine can do).

The subcommands defined in other modules are listed in ``COMMANDS`` and imported
only when used (``fidelnet.cli.lazy``): ``fidelnet --version`` imports click and
nothing heavy.
"""

from __future__ import annotations

import sys

import click

from fidelnet._version import __version__
from fidelnet.cli.lazy import LazyCommand, LazyGroup
from fidelnet.errors import FidelnetError
from fidelnet.log import LEVELS, set_log_level

__all__ = ["COMMANDS", "main"]

# name -> where the command lives and its one-line help (for `fidelnet --help`,
# which must not import the modules). A test checks these against the commands.
COMMANDS: dict[str, LazyCommand] = {
    "bench": LazyCommand(
        "fidelnet.cli.bench",
        "bench",
        "Benchmarks: `line` (the CIMininet 7-node line beside stock Mininet), `hifi` (the "
        "Mininet-HiFi validation suite), `hvnet` (HVNet's random topologies with per-flow "
        "routing beside stock Mininet), `vt` (VT-Mininet's experiments: fidelnet with "
        "virtual time, without, and stock Mininet).",
    ),
    "calibrate": LazyCommand(
        "fidelnet.cli.calibrate",
        "calibrate",
        "Run Mininet-HiFi's micro-benchmarks on this machine (under 5 minutes) and keep the "
        "result as its profile, which every later verdict and capacity check reads.",
    ),
    "capture": LazyCommand(
        "fidelnet.cli.capture",
        "capture",
        "Capture NODE:INTF of a running run as pcapng (a file, or stdout for "
        "`| wireshark -k -i -`), until the run ends.",
    ),
    "cluster": LazyCommand(
        "fidelnet.cli.cluster",
        "cluster",
        "One topology over several machines on Kubernetes: `apply`, `status`, `delete`, and "
        "the `controller` and `agent` processes.",
    ),
    "compare": LazyCommand(
        "fidelnet.cli.compare",
        "compare",
        "Compare RESULTS (a results directory) with BASELINE (made by ``fidelnet test "
        "--save-baseline``): per result file and metric, same, improved, regressed or "
        "inconclusive, with both estimates' confidence intervals.",
    ),
    "doctor": LazyCommand(
        "fidelnet.cli.doctor",
        "doctor",
        "What this machine can do and what fidelnet will use for it, with what to install "
        "or enable where something is missing.",
    ),
    "hw": LazyCommand(
        "fidelnet.cli.hw",
        "hw",
        "Hardware for hardware links: `sriov` (VF pairs on two cabled NICs).",
    ),
    "image": LazyCommand(
        "fidelnet.cli.image",
        "image",
        "OCI images for container nodes: import, ls, rm, prune.",
    ),
    "measure": LazyCommand(
        "fidelnet.cli.measure",
        "measure",
        "Measurements: `selftest` (the generator's own floor).",
    ),
    "show": LazyCommand(
        "fidelnet.cli.show",
        "show",
        "Draw a scenario's topology: nodes by kind and backend, links with their backend "
        "and parameters, as text, Graphviz dot or Mermaid.",
    ),
    "report": LazyCommand(
        "fidelnet.cli.report",
        "report",
        "Plot every result file (*.json) in DIR and write an HTML page showing them.",
    ),
    "run": LazyCommand(
        "fidelnet.cli.scenario",
        "run",
        "Run scenario FILES (default: the embedded 7-node line) and write their results, "
        "JUnit file and report.",
    ),
    "test": LazyCommand(
        "fidelnet.cli.scenario",
        "test",
        "Run scenario FILES as tests: exit 0 when every check passed, 1 otherwise.",
    ),
    "validate": LazyCommand(
        "fidelnet.cli.validate",
        "validate",
        "Check scenario files: syntax, keys, units, names and the topology.",
    ),
    "vm": LazyCommand("fidelnet.cli.vm", "vm", "VM nodes (backend qemu): their guest image."),
}


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"]},
)
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


def main() -> None:
    try:
        cli(standalone_mode=True)
    except FidelnetError as exc:
        click.echo(f"fidelnet: {exc}", err=True)
        sys.exit(2)
