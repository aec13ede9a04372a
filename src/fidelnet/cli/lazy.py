"""A click group whose subcommands are imported only when they are used.

``fidelnet --version`` and ``fidelnet runs`` should not pay for pydantic, rich,
matplotlib or the kernel layer that ``bench`` or ``run`` need. ``LazyGroup``
holds a table ``name -> LazyCommand(module, attribute, short_help)``: a command's
module is imported when that command is invoked or its own help is shown; the
group's ``--help`` lists every command from the table's short help, importing
nothing. ``tests/unit/test_cli_startup.py`` checks the table against the
commands themselves.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import click
from click.utils import make_default_short_help

__all__ = ["LazyCommand", "LazyGroup"]


@dataclass(frozen=True)
class LazyCommand:
    """Where a subcommand lives, and its one-line help for the group's listing."""

    module: str
    attribute: str
    short_help: str

    def load(self) -> click.Command:
        obj = getattr(importlib.import_module(self.module), self.attribute)
        if not isinstance(obj, click.Command):
            raise TypeError(f"{self.module}.{self.attribute}: not a click command")
        return obj


class LazyGroup(click.Group):
    """A ``click.Group`` that also serves commands from a table of ``LazyCommand``."""

    def __init__(
        self,
        name: str | None = None,
        *,
        lazy: dict[str, LazyCommand] | None = None,
        **attrs: Any,
    ) -> None:
        super().__init__(name, **attrs)
        self.lazy: dict[str, LazyCommand] = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in self.lazy:
            self.add_command(self.lazy[cmd_name].load(), cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List every command as click does, taking a lazy one's help from the table."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows: list[tuple[str, str]] = []
        for name in names:
            loaded = self.commands.get(name)
            if loaded is not None:
                if loaded.hidden:
                    continue
                rows.append((name, loaded.get_short_help_str(limit)))
            else:
                rows.append((name, make_default_short_help(self.lazy[name].short_help, limit)))
        with formatter.section("Commands"):
            formatter.write_dl(rows)
