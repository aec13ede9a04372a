"""``fidelnet report DIR``: plots and an HTML page for a directory of results."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["report"]


@click.command("report")
@click.argument(
    "directory",
    metavar="DIR",
    type=click.Path(exists=True, file_okay=False, dir_okay=True, path_type=Path),
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Where to write the page.  [default: DIR/report.html]",
)
@click.option("--svg", is_flag=True, help="Also write each plot as SVG.")
def report(directory: Path, output: Path | None, svg: bool) -> None:
    """Plot every result file (*.json) in DIR and write an HTML page showing them.

    Plots go to DIR/plots/; JSON files that are not result files are skipped with
    a warning.
    """
    from fidelnet.errors import FidelnetError
    from fidelnet.report import load_dir, render
    from fidelnet.report.load import no_results_message

    try:
        results, skipped = load_dir(directory)
    except FidelnetError as exc:
        raise click.ClickException(str(exc)) from exc
    for path, why in skipped:
        click.echo(f"fidelnet report: warning: skipped {path}: {why}", err=True)
    if not results:
        raise click.ClickException(no_results_message(directory, skipped))
    try:
        page = render(results, directory, output=output, svg=svg, skipped=skipped)
    except (FidelnetError, OSError) as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"{page} ({len(results)} result{'s' if len(results) != 1 else ''})")
