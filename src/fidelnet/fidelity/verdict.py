"""A verdict on a number: may it be trusted, and if not, why.

Every measurement fidelnet makes is judged after it ran, from what the run itself
observed (:mod:`fidelnet.fidelity.monitor`), the result's own signals (receiver
socket drops, a generator that fell short, goodput above the bottleneck) and the
machine's profile (:mod:`fidelnet.fidelity.profile`). The answer is one of three
levels, worst first::

    untrusted   the number is known to be wrong: do not use it
    degraded    the number may be off: check the reasons before using it
    trusted     nothing the run watched says it is off

A verdict is never "trusted" by default: a result judged without a monitor says so
in its reasons (``monitor_absent``, degraded), because nothing was watched. Each
:class:`Reason` carries a stable ``code`` for scripts, its own level, a sentence
with the numbers for people, and the measured value beside the threshold it
crossed, so a reader can see how far over the line it was.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LEVELS", "Level", "Reason", "Verdict", "worst"]

Level = Literal["trusted", "degraded", "untrusted"]

LEVELS: tuple[Level, ...] = ("trusted", "degraded", "untrusted")
"""The levels from best to worst."""


def worst(levels: Iterable[Level]) -> Level:
    """The worst of ``levels`` (``trusted`` when there are none)."""
    return max(levels, key=LEVELS.index, default="trusted")


class Reason(BaseModel):
    """Why a verdict is not ``trusted`` (or, at ``trusted``, a note worth keeping)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    level: Level
    message: str
    value: float | None = None
    threshold: float | None = None
    unit: str | None = None
    source: str = ""


class Verdict(BaseModel):
    """The level of a result and the reasons for it, worst first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    level: Level
    reasons: list[Reason] = Field(default_factory=list)
    monitored: bool = False
    profile: str | None = None

    @classmethod
    def of(
        cls, reasons: Iterable[Reason], *, monitored: bool, profile: str | None = None
    ) -> Verdict:
        """The verdict that ``reasons`` add up to: the worst of their levels."""
        ordered = sorted(reasons, key=lambda r: -LEVELS.index(r.level))
        return cls(
            level=worst(r.level for r in ordered),
            reasons=ordered,
            monitored=monitored,
            profile=profile,
        )

    @property
    def trusted(self) -> bool:
        return self.level == "trusted"

    def problems(self) -> list[Reason]:
        """The reasons that lowered the level (not the notes kept at ``trusted``)."""
        return [r for r in self.reasons if r.level != "trusted"]

    def summary(self, limit: int = 3) -> str:
        """One line: ``untrusted: receiver dropped 1,204 packets ...; steal 12 %``."""
        bad = self.problems()
        if not bad:
            return self.level
        text = "; ".join(r.message for r in bad[:limit])
        more = f" (+{len(bad) - limit} more)" if len(bad) > limit else ""
        return f"{self.level}: {text}{more}"
