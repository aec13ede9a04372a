"""The clocks of the machines a shard's cut links reach, compared again and again.

A cut link's receiving half counts each frame's delay from the sender's stamp, on
the sender's clock, moved onto this machine's by the clocks' offset
(:mod:`fidelnet.cluster.clock`). Clocks drift apart (tens of microseconds a minute
between two NTP-disciplined machines, far more without NTP), so an offset measured
once at the start is wrong by the end of a long run, and every delay with it.

:class:`ClockKeeper` measures each peer machine's offset again every ``every``
seconds while cut links to it are carried, and gives each new sample to the caller,
which tells linkd (``set_clock``: the udp half uses it from its next frame) and the
Shard's status (each cut link's ``clock``: the offset now, its uncertainty, how many
times it was measured and how far it moved since the first). A probe that fails
keeps the last sample, and says so in the log; the link's verdict reads the
uncertainty linkd was last given.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fidelnet.cluster.clock import ClockSample
from fidelnet.errors import FidelnetError

__all__ = ["EVERY_S", "ClockKeeper", "Kept"]

log = logging.getLogger("fidelnet")

EVERY_S = 5.0
"""Seconds between two comparisons of the same pair of clocks."""


@dataclass
class Kept:
    """What is known of one peer machine's clock."""

    first: ClockSample
    last: ClockSample
    at: float  # when ``last`` was measured (this process's monotonic clock)
    updates: int = 0  # comparisons after the first
    failures: int = 0
    history: list[tuple[float, int, int]] = field(default_factory=list)

    def as_status(self) -> dict[str, int]:
        """The cut link's ``clock`` in the Shard's status."""
        return {
            **self.last.as_status(),
            "updates": self.updates,
            "driftNs": self.last.offset_ns - self.first.offset_ns,
        }


class ClockKeeper:
    """Each peer machine's clock, measured with ``probe(address, port)`` and again
    every ``every`` seconds."""

    def __init__(
        self,
        probe: Callable[[str, int], ClockSample],
        every: float = EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.probe = probe
        self.every = every
        self.clock = clock
        self.kept: dict[str, Kept] = {}

    def first(self, machine: str, address: str, port: int) -> ClockSample:
        """The first comparison with ``machine`` (or the one kept); raises when it
        does not answer."""
        if machine in self.kept:
            return self.kept[machine].last
        got = self.probe(address, port)
        now = self.clock()
        self.kept[machine] = Kept(got, got, now, history=[(now, got.offset_ns, got.uncertainty_ns)])
        return got

    def due(self, machine: str) -> bool:
        kept = self.kept.get(machine)
        return kept is not None and self.clock() - kept.at >= self.every

    def refresh(
        self, machine: str, address: str, port: int, apply: Callable[[ClockSample], None]
    ) -> ClockSample | None:
        """Compare again when due; give a new sample to ``apply``. Returns it, or None
        (not due, or no answer: the last sample stands)."""
        if not self.due(machine):
            return None
        kept = self.kept[machine]
        try:
            got = self.probe(address, port)
        except FidelnetError as exc:
            kept.failures += 1
            kept.at = self.clock()  # try again after another period, not at once
            log.warning("clock of %s not measured again (the last stands): %s", machine, exc)
            return None
        kept.last, kept.at = got, self.clock()
        kept.updates += 1
        kept.history.append((kept.at, got.offset_ns, got.uncertainty_ns))
        del kept.history[:-100]
        apply(got)
        return got
