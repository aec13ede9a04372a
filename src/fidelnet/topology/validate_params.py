"""Validation of link parameters (part of :mod:`fidelnet.topology.validate`, which
checks every link's parameters with the rest; :func:`param_problems` checks one set
on its own, as ``link.set()`` does)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import TypeGuard

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import JITTER_DISTS, QUEUE_KINDS, GilbertElliott, LinkParams

__all__ = ["MIN_BW", "check_params", "param_problems"]

Problems = Iterator[ValidationError]
MIN_BW = 1000.0  # bit/s: below it a frame takes more than 12 s, and tc's burst overflows
_UNITS = {
    "bw": "bit/s",
    "delay": "seconds",
    "jitter": "seconds",
    "loss": "percent",
    "duplicate": "percent",
    "corrupt": "percent",
}


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def param_problems(params: LinkParams, where: str = "params") -> list[ValidationError]:
    """Every problem in one direction's complete parameters (a runtime change)."""
    return list(check_params(where, params, LinkParams(), "params"))


def check_params(where: str, params: object, base: LinkParams, attr: str) -> Problems:
    if not isinstance(params, LinkParams):
        yield ValidationError(where, "must be a LinkParams", params)
        return
    for name in ("bw", "delay", "jitter", "loss", "duplicate", "corrupt"):
        yield from _check_quantity(f"{where}.{name}", getattr(params, name))
    for name, low, unit in (
        ("max_queue_size", 1, "packets"),
        ("queue_bytes", 1, "bytes"),
        ("overhead", 0, "bytes"),
        ("seed", 0, ""),
    ):
        value = getattr(params, name)
        if value is not None and not (_is_int(value) and value >= low):
            yield ValidationError(f"{where}.{name}", f"must be an integer >= {low} {unit}", value)
    for name, choices in (("jitter_dist", JITTER_DISTS), ("queue", QUEUE_KINDS)):
        value = getattr(params, name)
        if value is not None and value not in choices:
            yield ValidationError(f"{where}.{name}", "unknown value", value, list(choices))
    if params.reorder is not None and not isinstance(params.reorder, bool):
        yield ValidationError(f"{where}.reorder", "must be true or false", params.reorder)
    yield from _check_loss_model(f"{where}.loss", params)
    if params.trace is not None:
        yield from _check_trace(f"{where}.trace", params)
    delay = params.delay
    if delay is None and attr != "params" and isinstance(base, LinkParams):
        delay = base.delay
    if params.jitter is not None and delay is None:
        yield ValidationError(
            f"{where}.jitter", "jitter needs a delay on the same link", params.jitter
        )


def _check_loss_model(field: str, params: LinkParams) -> Problems:
    model = params.loss_model
    if model is None:
        return
    if not isinstance(model, GilbertElliott):
        yield ValidationError(field, "must be a percentage or a GilbertElliott model", model)
        return
    if params.loss is not None:
        yield ValidationError(
            field, "give either a loss percentage or a Gilbert-Elliott model, not both", model
        )
    for key in ("p", "r", "loss_good", "loss_bad"):
        yield from _check_quantity(f"{field}.{key}", getattr(model, key), "percent")
    if _is_number(model.r) and model.r == 0:
        yield ValidationError(f"{field}.r", "must be positive (the bad state would never end)", 0)


def _check_trace(field: str, params: LinkParams) -> Problems:
    if params.bw is not None:
        yield ValidationError(field, "a trace sets the rate: give either bw or trace", params.trace)
    from fidelnet.links.trace import read_trace  # links imports this module

    try:
        read_trace(field, str(params.trace))
    except ValidationError as exc:
        yield exc


def _check_quantity(field: str, value: object, unit: str | None = None) -> Problems:
    if value is None:
        return
    name = field.rsplit(".", 1)[1]
    unit = unit or _UNITS[name]
    if not _is_number(value):
        yield ValidationError(
            field,
            f"must be a number in {unit} (parse text with fidelnet.topology.units)",
            value,
        )
    elif math.isnan(value) or math.isinf(value):
        yield ValidationError(field, "must be a finite number", value)
    elif value < 0:
        yield ValidationError(field, "must not be negative", value)
    elif name == "bw" and value == 0:
        yield ValidationError(field, "must be positive (a rate of 0 would carry nothing)", value)
    elif name == "bw" and value < MIN_BW:
        yield ValidationError(
            field,
            f"must be at least {MIN_BW:g} bit/s (1 kbit/s; one full frame would take "
            f"{1514 * 8 / value:.0f} s); bw is in bit/s in the Python API",
            value,
        )
    elif unit == "percent" and value > 100:
        yield ValidationError(field, "must be at most 100 (percent)", value)


# --- ports and interface names -------------------------------------------------------
