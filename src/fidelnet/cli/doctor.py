"""``fidelnet doctor``: the machine's capabilities as a table, or ``--json``."""

from __future__ import annotations

import json
import sys

import click

__all__ = ["doctor"]

_STYLE = {"ok": "green", "fallback": "yellow", "missing": "red", "unknown": "magenta"}


@click.command()
@click.option("--json", "as_json", is_flag=True, help="One JSON document instead of the table.")
def doctor(as_json: bool) -> None:
    """What this machine can do and what fidelnet will use for it, with what to install
    or enable where something is missing.

    Reads /proc, /sys, the kernel's configuration and fidelnet's own files; creates
    nothing. Exit status: 0 when fidelnet can build networks here, 1 when something
    essential is missing (the lines marked *), 2 on a usage error. See docs/doctor.md.
    """
    from fidelnet import doctor as doc

    lines = doc.diagnose(doc.gather())
    code = doc.exit_code(lines)
    if as_json:
        click.echo(json.dumps(doc.as_dict(lines, code), indent=2))
        sys.exit(code)

    from rich import box
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(box=box.SIMPLE_HEAD, title="fidelnet doctor", title_justify="left")
    table.add_column("subject", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("fidelnet will use", ratio=3)
    table.add_column("found", ratio=2, overflow="fold")
    for ln in lines:
        uses = escape(ln.uses) + (f"\n[bold]to fix:[/] {escape(ln.fix)}" if ln.fix else "")
        table.add_row(
            ln.subject + (" *" if ln.essential else ""),
            f"[{_STYLE[ln.status]}]{ln.status}[/]",
            uses,
            escape(ln.found),
        )
    console = Console()
    console.print(table)
    verdict = (
        "fidelnet can build networks here"
        if code == 0
        else "fidelnet cannot build networks here: fix the lines marked * first"
    )
    console.print(f"* essential. {verdict}.")
    sys.exit(code)
