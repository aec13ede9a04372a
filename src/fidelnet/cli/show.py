"""``fidelnet show FILE``: a scenario's topology as text, Graphviz dot or Mermaid.

    fidelnet show examples/routing.yaml                   # a list of nodes and links
    fidelnet show examples/routing.yaml --format dot | dot -Tsvg > routing.svg
    fidelnet show examples/routing.yaml --format mermaid  # for a Markdown page

No root, builds nothing (:mod:`fidelnet.topology.view`).
"""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["show"]


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "dot", "mermaid"]),
    default="text",
    show_default=True,
    help="dot: Graphviz (| dot -Tsvg); mermaid: for Markdown pages.",
)
def show(file: Path, fmt: str) -> None:
    """Draw a scenario's topology: nodes by kind and backend, links with their backend
    and parameters, as text, Graphviz dot or Mermaid."""
    from fidelnet.scenario import load
    from fidelnet.topology.view import render

    click.echo(render(load(file).topology_spec(), fmt), nl=False)
