"""The machines a topology is spread over, and the measured delays between them.

:class:`MachineSpec` is one machine: a name, a capacity (a relative weight, given
as a number or taken from the machine's calibration profile) and an optional hard
``max_weight``. :data:`Delays` is what the agents measured: the one-way delay from
each machine to each other one, in seconds. :func:`check_machines`,
:func:`delay_table` and :func:`check_spec` check them (and the topology's link
ends) and raise :class:`~fidelnet.errors.ValidationError` naming the field and the
valid choices, before any partitioning.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from fidelnet.errors import ValidationError
from fidelnet.fidelity.profile import Profile
from fidelnet.topology.spec import TopologySpec

__all__ = [
    "DelayTable",
    "Delays",
    "MachineSpec",
    "check_machines",
    "check_spec",
    "delay_table",
]

Delays: TypeAlias = (
    Mapping[tuple[str, str], float] | Mapping[str, Mapping[str, float]] | Sequence[Sequence[float]]
)
"""Measured one-way delays between machines, in seconds: ``{("m1", "m2"): 4e-4}``,
``{"m1": {"m2": 4e-4}}``, or a square matrix in the machines' order. A pair given in
one direction only counts for both; the diagonal is ignored."""

DelayTable: TypeAlias = dict[tuple[str, str], float]
"""The one-way delay from the first machine to the second, for every ordered pair of
different machines."""


@dataclass(frozen=True)
class MachineSpec:
    """One machine a topology may be spread over: its ``name`` (the Kubernetes Node's),
    its ``capacity`` (a relative weight: parts are sized in proportion to it) and an
    optional hard ``max_weight`` (the most node weight it may be given)."""

    name: str
    capacity: float
    max_weight: float | None = None

    @classmethod
    def from_profile(
        cls,
        name: str,
        profile: Profile,
        *,
        backend: str = "tc",
        max_weight: float | None = None,
    ) -> MachineSpec:
        """A machine whose capacity is its profile's calibrated forwarding capacity
        over chains of ``backend`` links (packet-hops per second,
        :meth:`Profile.capacity_pps`). Give every machine's capacity the same way, so
        that the weights compare."""
        found = profile.capacity_pps(backend, "chain")
        if found is None or found[0] <= 0:
            measured = sorted({f.backend for f in profile.forwarding if f.layout == "chain"})
            raise ValidationError(
                f"machines[{name}].profile",
                f"no forwarding capacity calibrated for backend {backend!r}; run fidelnet "
                "calibrate on that machine or give its capacity as a number",
                backend,
                measured,
            )
        return cls(name, found[0], max_weight)


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    v = float(value)
    return v if math.isfinite(v) else None


def check_machines(machines: Sequence[MachineSpec]) -> list[MachineSpec]:
    """The machines, checked: at least one, unique non-empty names, a positive
    capacity and a positive ``max_weight`` where one is given."""
    machines = list(machines)
    if not machines:
        raise ValidationError("machines", "give at least one machine")
    seen: set[str] = set()
    for i, m in enumerate(machines):
        if not isinstance(m, MachineSpec):
            raise ValidationError(f"machines[{i}]", "must be a MachineSpec", m)
        if not isinstance(m.name, str) or not m.name:
            raise ValidationError(f"machines[{i}].name", "must be a non-empty name", m.name)
        if m.name in seen:
            raise ValidationError(f"machines[{i}].name", "names a machine twice", m.name)
        seen.add(m.name)
        cap = _number(m.capacity)
        if cap is None or cap <= 0:
            raise ValidationError(
                f"machines[{m.name}].capacity", "must be a positive relative weight", m.capacity
            )
        if m.max_weight is not None:
            top = _number(m.max_weight)
            if top is None or top <= 0:
                raise ValidationError(
                    f"machines[{m.name}].max_weight", "must be positive or None", m.max_weight
                )
    return machines


def _entries(delays: Delays, names: Sequence[str]) -> list[tuple[str, str, str, object]]:
    """(field, from, to, value) for every entry given, names checked."""
    out: list[tuple[str, str, str, object]] = []
    known = set(names)

    def machine(field: str, name: object) -> str:
        if not isinstance(name, str) or name not in known:
            raise ValidationError(field, "not one of the machines", name, names)
        return name

    if isinstance(delays, Mapping):
        for key, value in delays.items():
            if isinstance(value, Mapping):
                a = machine(f"delays[{key!r}]", key)
                for to, v in value.items():
                    out.append((f"delays[{a!r}][{to!r}]", a, machine(f"delays[{a!r}]", to), v))
            elif isinstance(key, tuple) and len(key) == 2:
                field = f"delays[{key[0]!r}, {key[1]!r}]"
                out.append((field, machine(field, key[0]), machine(field, key[1]), value))
            else:
                raise ValidationError(
                    "delays",
                    "keys must be (from, to) pairs of machines or machine names with a "
                    "mapping each",
                    key,
                    names,
                )
        return out
    if isinstance(delays, str | bytes) or not isinstance(delays, Sequence):
        raise ValidationError("delays", "must be a mapping or a square matrix", delays)
    n = len(names)
    if len(delays) != n or any(
        isinstance(row, str | bytes) or not isinstance(row, Sequence) or len(row) != n
        for row in delays
    ):
        raise ValidationError(
            "delays", f"a matrix must be {n}x{n}, rows and columns in the machines' order", None
        )
    for i, row in enumerate(delays):
        for j, v in enumerate(row):
            out.append((f"delays[{i}][{j}]", names[i], names[j], v))
    return out


def delay_table(delays: Delays | None, names: Sequence[str]) -> DelayTable:
    """The one-way delay of every ordered pair of different machines, checked: known
    machine names, finite delays of 0 s or more, none missing."""
    if delays is None:
        if len(names) > 1:
            raise ValidationError(
                "delays", "give the measured one-way delays between the machines", None, names
            )
        return {}
    given: DelayTable = {}
    for field, a, b, value in _entries(delays, names):
        v = _number(value)
        if v is None or v < 0:
            raise ValidationError(field, "must be a one-way delay in seconds, 0 or more", value)
        if a != b:
            given[a, b] = v
    table: DelayTable = {}
    for a in names:
        for b in names:
            if a == b:
                continue
            v_opt = given.get((a, b), given.get((b, a)))
            if v_opt is None:
                raise ValidationError(
                    "delays", f"no measured delay between {a} and {b}", None, names
                )
            table[a, b] = v_opt
    return table


def check_spec(spec: TopologySpec) -> None:
    """Every link's ends are nodes of the topology."""
    nodes = list(spec.nodes)
    shown = nodes if len(nodes) <= 20 else None
    for i, link in enumerate(spec.links):
        for end, name in (("a", link.a), ("b", link.b)):
            if name not in spec.nodes:
                raise ValidationError(
                    f"links[{i}].{end}", "not a node of the topology", name, shown
                )
