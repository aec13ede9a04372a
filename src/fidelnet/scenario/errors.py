"""Problems found in a scenario file, and the one exception that carries them.

A :class:`Problem` is one thing wrong with a file: where (file, line, column, and
the path of keys and list indexes to the value), what (a message), and the value
and the valid choices when they help. :class:`ScenarioError` carries every problem
found, not just the first, and reads as one problem per line::

    ping.yaml:12:7: traffic[1].src: unknown node, did you mean 'h1'? (got 'h01'; valid: h1, h2)

Lines and columns are 1-based. A problem without a position (a scenario built in
Python, not read from a file) omits them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from fidelnet.errors import ValidationError

__all__ = ["NO_VALUE", "Path", "Problem", "ScenarioError", "dotted", "show_value"]

Path = tuple[str | int, ...]
"""Keys and list indexes from the top of the file to a value: ``("traffic", 1, "src")``."""


class _NoValue:
    """Marks a problem that has no value to show (a missing key)."""

    def __repr__(self) -> str:
        return "NO_VALUE"


NO_VALUE: object = _NoValue()
_MAX_SHOWN = 60


def dotted(path: Path) -> str:
    """``("topology", "links", 2, "params", "delay")`` as ``topology.links[2].params.delay``."""
    text = ""
    for part in path:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def show_value(value: object) -> str:
    """A value as a scenario file would spell it, shortened when long."""
    if value is None:
        text = "null"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str | int | float):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, default=str, ensure_ascii=False)
        except ValueError:  # a structure that refers to itself
            text = repr(value)
    if len(text) > _MAX_SHOWN:
        text = text[: _MAX_SHOWN - 3] + "..."
    return text


@dataclass(frozen=True)
class Problem:
    """One problem in a scenario: where it is, what is wrong, the value and the choices.

    ``line`` and ``col`` are 1-based, or None when unknown. ``path`` is empty for a
    problem with the file as a whole (a YAML syntax error, an empty file). ``value``
    is :data:`NO_VALUE` when there is nothing to show.
    """

    message: str
    path: Path = ()
    file: str = "<string>"
    line: int | None = None
    col: int | None = None
    value: object = NO_VALUE
    choices: tuple[str, ...] = field(default=())

    @property
    def field(self) -> str:
        """The dotted path (``traffic[1].src``), empty for the whole file."""
        return dotted(self.path)

    @classmethod
    def from_error(cls, exc: ValidationError, path: Path, prefix: str = "") -> Problem:
        """A fidelnet :class:`~fidelnet.errors.ValidationError` placed at ``path``."""
        value = NO_VALUE if exc.value is None else exc.value
        return cls(prefix + exc.problem, path, value=value, choices=exc.choices)

    def at(self, file: str, line: int | None, col: int | None) -> Problem:
        """This problem placed in ``file`` at ``line``:``col``."""
        return replace(self, file=file, line=line, col=col)

    def format(self) -> str:
        """``FILE:LINE:COL: path.to.field: message (got VALUE; valid: A, B)``."""
        where = self.file
        if self.line is not None:
            where += f":{self.line}:{self.col if self.col is not None else 1}"
        text = f"{where}: {self.field}: {self.message}" if self.path else f"{where}: {self.message}"
        details = []
        if self.value is not NO_VALUE:
            details.append(f"got {show_value(self.value)}")
        if self.choices:
            details.append("valid: " + ", ".join(self.choices))
        if details:
            text += " (" + "; ".join(details) + ")"
        return text

    def __str__(self) -> str:
        return self.format()


class ScenarioError(ValidationError):
    """A scenario that cannot be used; ``problems`` lists every problem found.

    ``field``, ``problem``, ``value`` and ``choices`` (as on every
    :class:`~fidelnet.errors.ValidationError`) describe the first problem; the
    message lists them all, one per line.
    """

    def __init__(self, problems: Sequence[Problem]) -> None:
        if not problems:
            raise ValueError("a ScenarioError needs at least one problem")
        self.problems: list[Problem] = list(problems)
        first = self.problems[0]
        value = None if first.value is NO_VALUE else first.value
        super().__init__(first.field or first.file, first.message, value, first.choices)
        self.args = ("\n".join(p.format() for p in self.problems),)

    def __str__(self) -> str:
        return str(self.args[0])
