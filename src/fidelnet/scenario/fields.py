"""The building blocks of the scenario models: quantities, names, argument lists.

Quantities are kept as written (``"10kpps"``, ``"2s"``, ``"0.1%"``) and checked when a
model is built: :data:`Duration`, :data:`PositiveDuration`, :data:`Rate`,
:data:`PacketRate`, :data:`Percent`, each with its JSON Schema. :data:`Name`,
:data:`NodeName` and :data:`Argv` check names and argument lists. ``_error``,
``_fail`` and ``_fail_at`` turn a problem into the pydantic error the loader reads
(``choices``, ``sub``, ``value``); :class:`_Model` is the base of every model:
unknown keys forbidden, strict types, attribute docstrings as descriptions.

The models themselves are in :mod:`fidelnet.scenario.model_topology`,
:mod:`fidelnet.scenario.model_steps`, :mod:`fidelnet.scenario.model_checks` and
:mod:`fidelnet.scenario.model`, which imports from all of them (never the reverse).
"""

from __future__ import annotations

import copy
import math
import re
import shlex
from collections.abc import Callable
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    ValidationInfo,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError

from fidelnet.errors import UnitError, ValidationError
from fidelnet.scenario.errors import NO_VALUE, Path
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate, parse_size
from fidelnet.topology.validate import NAME_RULE

__all__ = [
    "PPS_UNITS",
    "Argv",
    "Duration",
    "Name",
    "NodeName",
    "PacketRate",
    "Percent",
    "PositiveDuration",
    "Rate",
    "parse_pps",
]

# --- packet rates -------------------------------------------------------------------------

PPS_UNITS: dict[str, float] = {"pps": 1.0, "kpps": 1e3, "Mpps": 1e6}
"""Packet-rate units, spelled exactly so (``10kpps``, ``1.5Mpps``)."""

_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_PPS_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[A-Za-z]*)\s*$")


def parse_pps(field: str, text: str | float | int) -> float:
    """Parse a packet rate such as ``"10kpps"`` into packets per second.

    The unit is required and case-sensitive: ``pps``, ``kpps`` or ``Mpps``. Raises
    :class:`~fidelnet.errors.UnitError` naming ``field``.
    """
    units = list(PPS_UNITS)
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise UnitError(field, "expected a packet rate such as 10kpps", text, units)
    if not isinstance(text, str):
        raise UnitError(field, "a packet rate needs a unit", text, units)
    m = _PPS_RE.match(text)
    if not m:
        raise UnitError(field, "not a number followed by a unit", text, units)
    num, unit = float(m.group("num")), m.group("unit")
    if math.isnan(num) or math.isinf(num):
        raise UnitError(field, "must be a finite number", text)
    if num < 0:
        raise UnitError(field, "must not be negative", text)
    if not unit:
        raise UnitError(field, "a packet rate needs a unit", text, units)
    if unit not in PPS_UNITS:
        raise UnitError(field, f"unknown packet-rate unit {unit!r}", text, units)
    return num * PPS_UNITS[unit]


# --- quantities kept as text, checked when read ----------------------------------------------


def _error(exc: ValidationError, sub: Path = ()) -> PydanticCustomError:
    """A fidelnet error as a pydantic one; the loader reads ``choices`` and ``sub``."""
    ctx: dict[str, Any] = {"problem": exc.problem, "choices": exc.choices}
    if sub:
        ctx["sub"] = sub
        ctx["value"] = NO_VALUE if exc.value is None else exc.value
    return PydanticCustomError("fidelnet", "{problem}", ctx)


def _fail(
    problem: str, choices: tuple[str, ...] = (), *, value: object = None, show: bool = True
) -> PydanticCustomError:
    """An error about the value being validated (``show=False``: do not repeat the value)."""
    ctx: dict[str, Any] = {"problem": problem, "choices": choices}
    if not show:
        ctx["value"] = NO_VALUE
    elif value is not None:
        ctx["value"] = value
    return PydanticCustomError("fidelnet", "{problem}", ctx)


def _fail_at(sub: Path, problem: str, value: object) -> PydanticCustomError:
    """An error about the key ``sub`` of the model being validated."""
    ctx = {"problem": problem, "choices": (), "sub": sub, "value": value}
    return PydanticCustomError("fidelnet", "{problem}", ctx)


_Parser = Callable[[str, Any], float]


def _quantity(parse: _Parser, example: str, *, positive: bool = False) -> Callable[..., Any]:
    """A before-validator: the value must parse with ``parse`` (and be > 0 if ``positive``)."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise _fail(f"expected a quantity with a unit, such as {example}")
        try:
            parsed = parse(info.field_name or "value", value)
        except ValidationError as exc:
            raise _error(exc) from None
        if positive and parsed <= 0:
            raise _fail("must be greater than zero")
        return float(value) if isinstance(value, int) else value

    return check


def _duration(field: str, value: Any) -> float:
    return parse_duration(field, value)


def _rate(field: str, value: Any) -> float:
    return parse_rate(field, value)


def _percent(field: str, value: Any) -> float:
    return parse_percent(field, value)


def _size(field: str, value: Any) -> float:
    return float(parse_size(field, value))


_NUMBER = r"^\s*\+?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?"
"""A non-negative number at the start of a quantity, for the schema's patterns."""


class _JsonSchema:
    """The JSON Schema of a type, given as a dict; a fresh copy for every use (pydantic
    fills in a field's default and description in the dict it gets)."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self.schema = schema

    def __get_pydantic_json_schema__(
        self, core: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return copy.deepcopy(self.schema)


def _text_schema(examples: list[Any]) -> _JsonSchema:
    return _JsonSchema(
        {"type": "string", "pattern": _NUMBER + r"\s*[A-Za-zµ/]+\s*$", "examples": examples}
    )


_PERCENT_SCHEMA = _JsonSchema(
    {
        "anyOf": [
            {"type": "string", "pattern": _NUMBER + r"\s*%?\s*$"},
            {"type": "number", "minimum": 0, "maximum": 100},
        ],
        "examples": ["0%", "0.1%", 5],
    }
)

Duration = Annotated[
    str,
    BeforeValidator(_quantity(_duration, "2s")),
    _text_schema(["2s", "500ms", "100us"]),
]
"""A duration with its unit: ``s``, ``ms``, ``us``, ``ns``, ``min``."""
PositiveDuration = Annotated[
    str,
    BeforeValidator(_quantity(_duration, "2s", positive=True)),
    _text_schema(["2s", "500ms"]),
]
"""A duration greater than zero."""
Rate = Annotated[
    str,
    BeforeValidator(_quantity(_rate, "10Mbit")),
    _text_schema(["10Mbit", "1Gbit", "9.5Mbps"]),
]
"""A bit rate with its unit: ``bit``, ``kbit``, ``Mbit``, ``Gbit``, ``Mbps``, ``MBps``..."""
PacketRate = Annotated[
    str,
    BeforeValidator(_quantity(parse_pps, "10kpps", positive=True)),
    _JsonSchema(
        {
            "type": "string",
            "pattern": _NUMBER + r"\s*(pps|kpps|Mpps)\s*$",
            "examples": ["10kpps", "1.5Mpps", "500pps"],
        }
    ),
]
"""A packet rate greater than zero: ``pps``, ``kpps``, ``Mpps``."""
Percent = Annotated[str | float, BeforeValidator(_quantity(_percent, "0.1%")), _PERCENT_SCHEMA]
"""A percentage, 0..100: ``"0.1%"`` or a bare number meaning percent."""

_NAME_RE = re.compile(r"[A-Za-z0-9_.-]+")
_NODE_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def _name(value: str) -> str:
    if not _NAME_RE.fullmatch(value):
        raise _fail("names contain only letters, digits, '_', '.' and '-'")
    return value


def _node_name(value: str) -> str:
    if not _NODE_RE.fullmatch(value) or len(value) > 64:
        raise _fail(NAME_RULE)
    return value


Name = Annotated[
    str, AfterValidator(_name), _JsonSchema({"type": "string", "pattern": r"^[A-Za-z0-9_.-]+$"})
]
"""A scenario, traffic or check name: letters, digits, ``_``, ``.`` and ``-``."""
NodeName = Annotated[
    str,
    AfterValidator(_node_name),
    _JsonSchema({"type": "string", "pattern": r"^[A-Za-z][A-Za-z0-9_]{0,63}$"}),
]
"""A node name: a letter, then letters, digits and ``_``; at most 64 characters."""


def _argv(value: Any) -> Any:
    """Argument lists only; numbers become text (``[ping, -c, 3]``)."""
    if isinstance(value, str):
        try:
            suggestion = "[" + ", ".join(shlex.split(value)) + "]"
        except ValueError:
            suggestion = "[program, arg, ...]"
        raise _fail(
            "must be a list of arguments (argv), not a shell string; "
            f"write it as a list: {suggestion}"
        )
    if isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, bool) or v is None:
                what = "null" if v is None else f"the boolean {str(v).lower()}"
                raise _fail_at((i,), f"YAML reads this as {what}, not as text: quote it", v)
        return [str(v) if isinstance(v, int | float) else v for v in value]
    return value


def _regex(value: str) -> str:
    try:
        re.compile(value)
    except re.error as exc:
        raise _fail(f"not a valid regular expression: {exc}") from None
    return value


Regex = Annotated[str, AfterValidator(_regex)]
"""A regular expression (Python syntax)."""

Argv = Annotated[
    list[str],
    BeforeValidator(_argv),
    Field(min_length=1),
]
"""A program and its arguments as a list: ``[ip, route, show]``. Never a shell line."""


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, use_attribute_docstrings=True, validate_default=False
    )
