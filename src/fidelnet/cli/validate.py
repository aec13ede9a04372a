"""``fidelnet validate FILE...``: check scenario files without running anything.

Prints ``FILE: ok (N nodes, M links, T traffic, C checks)`` for a good file and
every problem of a bad one as ``FILE:LINE:COL: path.to.field: message (got VALUE;
valid: A, B)``. Exit status: 0 when every file is valid, 1 when one is not, 2 for a
usage error (no file given, a file that does not exist). ``--schema`` prints the
JSON Schema of scenario files. Nothing touches the kernel.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

__all__ = ["validate"]


def _check(path: Path) -> bool:
    from fidelnet.scenario import ScenarioError, load

    try:
        scenario = load(path)
    except ScenarioError as exc:
        for problem in exc.problems:
            click.echo(problem.format())
        return False
    except OSError as exc:
        click.echo(f"{path}: cannot read: {exc.strerror or exc}")
        return False
    spec = scenario.topology_spec()
    click.echo(
        f"{path}: ok ({len(spec.nodes)} nodes, {len(spec.links)} links, "
        f"{len(scenario.traffic)} traffic, {len(scenario.checks)} checks)"
    )
    return True


@click.command()
@click.argument(
    "files",
    nargs=-1,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option("--schema", is_flag=True, help="Print the JSON Schema of scenario files.")
def validate(files: tuple[Path, ...], schema: bool) -> None:
    """Check scenario files: syntax, keys, units, names and the topology.

    Prints `FILE: ok (...)` or each problem as `FILE:LINE:COL: field: message`.
    Exits 0 when all files are valid, 1 otherwise.
    """
    if schema:
        from fidelnet.scenario.schema import schema_text

        click.echo(schema_text(), nl=False)
        if not files:
            return
    if not files:
        raise click.UsageError("give at least one scenario file (or --schema)")
    results = [_check(path) for path in files]
    sys.exit(0 if all(results) else 1)
