"""Virtual time in a scenario file (``topology.tdf``, docs/virtual-time.md): a fixed
time dilation factor, ``auto``, or the adaptive factor's bounds."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Discriminator, Field, Tag, model_validator

from fidelnet.scenario.fields import _Model
from fidelnet.topology.spec import AutoTdf

__all__ = ["AdaptiveTdf", "TdfAuto", "TdfField", "to_spec"]

_Factor = Annotated[float, Field(gt=0, le=1000)]


class AdaptiveTdf(_Model):
    """``tdf: {auto: {low: 1, high: 16}}``: the factor follows the machine's load
    (fidelnet.vt.adapt), within ``low`` and ``high``, from ``start``."""

    low: _Factor = 1.0
    """The smallest factor it may choose."""
    high: _Factor = 32.0
    """The largest factor it may choose."""
    start: _Factor | None = None
    """The factor the run starts at (default: ``low``)."""
    target_busy: Annotated[float, Field(ge=0.1, le=0.95)] = 0.7
    """The busy share of the busiest core it steers to."""

    @model_validator(mode="after")
    def _ordered(self) -> AdaptiveTdf:
        start = self.low if self.start is None else self.start
        if not self.low <= start <= self.high:
            raise ValueError(f"start ({start:g}) must be within low and high")
        if self.low > self.high:
            raise ValueError(f"low ({self.low:g}) is above high ({self.high:g})")
        return self


class TdfAuto(_Model):
    """``tdf: {auto: {...}}``: the adaptive factor with its bounds."""

    auto: AdaptiveTdf
    """Bounds, start and target of the adaptive factor."""


def _which(value: object) -> str:
    if isinstance(value, dict | TdfAuto):
        return "adaptive"
    return "auto" if isinstance(value, str) and value == "auto" else "factor"


TdfField = Annotated[
    Annotated[_Factor, Tag("factor")]
    | Annotated[Literal["auto"], Tag("auto")]
    | Annotated[TdfAuto, Tag("adaptive")],
    Discriminator(_which),
]
"""One problem for a bad value, from the form it was written in."""


def to_spec(value: TdfField | None) -> tuple[float | None, AutoTdf | None]:
    """``(tdf, tdf_auto)`` for the topology spec."""
    if value is None:
        return None, None
    if value == "auto":
        auto = AutoTdf()
        return auto.start, auto
    if isinstance(value, TdfAuto):
        a = value.auto
        start = a.low if a.start is None else a.start
        return start, AutoTdf(low=a.low, high=a.high, start=start, target_busy=a.target_busy)
    return float(value), None
