"""Exceptions raised by fidelnet.

Every error fidelnet raises derives from :class:`FidelnetError`, so a caller can
catch one class. The hierarchy::

    FidelnetError
    ├── ValidationError        bad input, raised before any kernel object exists
    │   └── UnitError          a value with a malformed or missing unit
    ├── KernelError            the kernel refused an operation (netlink, mount, cgroup)
    │   └── UnsupportedError   the kernel or machine lacks a feature that was asked for
    ├── NodeError              a process in a node failed or a node is not usable
    ├── MeasurementError       a measurement could not be made or its tool failed
    └── StateError             a run's ownership state is missing, corrupt or foreign

Context travels as attributes (``field``, ``value``, ``choices``), and causes are
chained with ``raise ... from``.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "FidelnetError",
    "KernelError",
    "MeasurementError",
    "NodeError",
    "StateError",
    "UnitError",
    "UnsupportedError",
    "ValidationError",
]


class FidelnetError(Exception):
    """Base class of every error fidelnet raises."""


class ValidationError(FidelnetError):
    """Input that cannot be used, found before any kernel object was created.

    The message reads ``field: problem (got VALUE; valid: A, B, C)``.
    """

    def __init__(
        self,
        field: str,
        problem: str,
        value: object = None,
        choices: Iterable[str] | None = None,
    ) -> None:
        self.field = field
        self.problem = problem
        self.value = value
        self.choices = tuple(choices) if choices is not None else ()
        msg = f"{field}: {problem}"
        details = []
        if value is not None:
            details.append(f"got {value!r}")
        if self.choices:
            details.append("valid: " + ", ".join(self.choices))
        if details:
            msg += " (" + "; ".join(details) + ")"
        super().__init__(msg)


class UnitError(ValidationError):
    """A quantity whose number or unit cannot be parsed."""


class KernelError(FidelnetError):
    """The kernel refused an operation fidelnet asked for."""


class UnsupportedError(KernelError):
    """The machine lacks a feature the topology needs (a qdisc, a cgroup controller)."""

    def __init__(self, feature: str, needed_for: str, alternative: str | None = None) -> None:
        self.feature = feature
        self.needed_for = needed_for
        self.alternative = alternative
        msg = f"{needed_for}: this machine lacks {feature}"
        if alternative:
            msg += f"; {alternative}"
        super().__init__(msg)


class NodeError(FidelnetError):
    """A node cannot run what was asked (its shell died, a command failed to start)."""


class StateError(FidelnetError):
    """A run's ownership state file is missing, unreadable or not ours."""


class MeasurementError(FidelnetError):
    """A measurement could not be made: its tool failed, timed out or produced output
    that cannot be read. Results the run knows to be distorted are not errors: they
    carry flags instead."""


class CapacityError(FidelnetError):
    """An experiment asks more than the machine carries faithfully, and the caller
    asked for that to be an error (``--strict``)."""


class UnknownNodeError(KeyError, FidelnetError):
    """A node name the network does not have (the Mininet layer's ``net[name]``,
    ``get``, ``addLink``...). A KeyError, as Mininet raises, so scripts that catch one
    still do, with a message that names the node and the ones there are."""

    def __init__(self, name: object, known: list[str]) -> None:
        shown = ", ".join(known[:20]) + (", ..." if len(known) > 20 else "")
        self.name = name
        self.message = f"no node {name!r} in the network (nodes: {shown or 'none'})"
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message
