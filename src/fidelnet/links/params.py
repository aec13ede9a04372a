"""Link parameters from text: one parser for the Python API, Mininet's ``TCIntf``
and scenario files.

:func:`parse_params` takes a mapping such as ``{"bw": "100Mbit", "delay": "10ms",
"loss": "1%"}`` and returns a :class:`~fidelnet.topology.spec.LinkParams` in base
units. Every error is a :class:`~fidelnet.errors.ValidationError` naming the field
(``where.delay``) and, for names and choices, the valid ones. Range checks that
do not depend on the text (loss at most 100, a trace file that parses) live in
:mod:`fidelnet.topology.validate`, so a ``LinkParams`` built directly in Python
gets them too.

``mininet_units=True`` reads a bare ``bw`` as Mbit/s and treats zero delay,
jitter or loss as "not set", as Mininet's ``TCIntf`` does.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import (
    JITTER_DISTS,
    QUEUE_KINDS,
    GilbertElliott,
    LinkParams,
)
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate, parse_size

__all__ = ["PARAM_NAMES", "format_params", "parse_params"]

_GE_KEYS = ("model", "p", "r", "loss_good", "loss_bad")
_LOSS_MODELS = ("random", "gilbert_elliott")


def _rate(field: str, v: Any, mn: bool) -> float:
    return parse_rate(field, v, bare_unit=1e6 if mn else None)


def _duration(field: str, v: Any, _mn: bool) -> float:
    return parse_duration(field, v)


def _percent(field: str, v: Any, _mn: bool) -> float:
    return parse_percent(field, v)


def _count(field: str, v: Any, _mn: bool) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValidationError(field, "must be a whole number", v)
    return int(v)


def _size(field: str, v: Any, _mn: bool) -> int:
    return parse_size(field, v)


def _choice(choices: tuple[str, ...]) -> Callable[[str, Any, bool], str]:
    def parse(field: str, v: Any, _mn: bool) -> str:
        if v not in choices:
            raise ValidationError(field, "unknown value", v, choices=list(choices))
        return str(v)

    return parse


def _flag(field: str, v: Any, _mn: bool) -> bool:
    if not isinstance(v, bool):
        raise ValidationError(field, "must be true or false", v)
    return v


def _path(field: str, v: Any, _mn: bool) -> str:
    if not isinstance(v, str) or not v:
        raise ValidationError(field, "must be the path of a Mahimahi trace file", v)
    return v


def _loss(field: str, v: Any, _mn: bool) -> float | GilbertElliott:
    if not isinstance(v, Mapping):
        return parse_percent(field, v)
    unknown = sorted(set(v) - set(_GE_KEYS))
    if unknown:
        raise ValidationError(f"{field}.{unknown[0]}", "unknown key", unknown[0], list(_GE_KEYS))
    model = v.get("model", "gilbert_elliott")
    if model == "random":
        if "p" not in v:
            raise ValidationError(f"{field}.p", "random loss needs p (percent)", None)
        return parse_percent(f"{field}.p", v["p"])
    if model != "gilbert_elliott":
        raise ValidationError(f"{field}.model", "unknown loss model", model, list(_LOSS_MODELS))
    for key in ("p", "r"):
        if key not in v:
            raise ValidationError(
                f"{field}.{key}", "a Gilbert-Elliott model needs p and r (percent)", None
            )
    return GilbertElliott(
        p=parse_percent(f"{field}.p", v["p"]),
        r=parse_percent(f"{field}.r", v["r"]),
        loss_good=parse_percent(f"{field}.loss_good", v.get("loss_good", 0)),
        loss_bad=parse_percent(f"{field}.loss_bad", v.get("loss_bad", 100)),
    )


_PARSERS: dict[str, Callable[[str, Any, bool], Any]] = {
    "bw": _rate,
    "delay": _duration,
    "jitter": _duration,
    "jitter_dist": _choice(JITTER_DISTS),
    "reorder": _flag,
    "loss": _loss,
    "duplicate": _percent,
    "corrupt": _percent,
    "max_queue_size": _count,
    "queue_bytes": _size,
    "queue": _choice(QUEUE_KINDS),
    "overhead": _size,
    "trace": _path,
    "seed": _count,
}

PARAM_NAMES: tuple[str, ...] = tuple(_PARSERS)
"""Every link parameter a mapping may hold."""

_ZERO_IS_UNSET = ("delay", "jitter", "loss")


def parse_params(
    values: Mapping[str, Any], where: str = "params", *, mininet_units: bool = False
) -> LinkParams:
    """Parse ``values`` (text with units, or numbers in base units where a unit is
    not needed) into :class:`LinkParams`; ``None`` values are skipped."""
    fields: dict[str, Any] = {}
    for name, value in values.items():
        parser = _PARSERS.get(name)
        if parser is None:
            raise ValidationError(
                f"{where}.{name}", "unknown link parameter", name, list(PARAM_NAMES)
            )
        if value is None or (mininet_units and name in _ZERO_IS_UNSET and value in (0, "")):
            continue
        parsed = parser(f"{where}.{name}", value, mininet_units)
        if name == "loss" and isinstance(parsed, GilbertElliott):
            fields["loss_model"] = parsed
        else:
            fields[name] = parsed
    return LinkParams(**fields)


def format_params(params: LinkParams) -> str:
    """A short human description (``bw=10Mbit delay=5ms loss=1%``)."""
    parts: list[str] = []
    for name, value in params.set_fields().items():
        if name == "bw" and isinstance(value, float):
            parts.append(f"bw={_si(value)}bit")
        elif name in ("delay", "jitter") and isinstance(value, float):
            parts.append(f"{name}={value * 1e3:g}ms")
        elif name in ("loss", "duplicate", "corrupt"):
            parts.append(f"{name}={value}%")
        elif isinstance(value, GilbertElliott):
            parts.append(f"loss=gilbert_elliott(p={value.p}%,r={value.r}%)")
        else:
            parts.append(f"{name}={value}")
    return " ".join(parts)


def _si(value: float) -> str:
    for div, prefix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if value >= div:
            return f"{value / div:g}{prefix}"
    return f"{value:g}"
