"""Could a known error have changed a check's answer?

An ``untrusted`` verdict says a number is off; it does not always say the check
built on it is undecided. Some errors have a known sign. The engine's lateness is
one: a packet the engine handles late (read from its TAP late, or released after its
scheduled departure) arrives later than the model says, never earlier. A latency
percentile measured through late links is therefore an upper bound on the true
one::

    true <= measured          (lateness only adds)

So a latency check ``p <= limit`` that passed still passes on the true value, and
is decided. One that failed is not: the engine measures its release lateness but not
how late it read a packet, so how much of the excess is its own is unknown, and the
check stays inconclusive.

Lateness does not lose packets either. The model runs in virtual time, so a late
release never causes a queue drop; a late *read* bunches arrivals, which can, but
only through the queue, and the engine counts those drops. So when the engine's
queues dropped nothing during the traffic, a loss check's answer (pass or fail) is
the model's own, lateness or not. Bursts of late packets that overflow a receiver's
socket are their own reason (``socket_drops``) and decide nothing.

Every other reason (a saturated core, a throttled node,
kernel or socket drops, a short generator) has no known sign: it can hide packets
that would have been slow, so it decides nothing, and a check on it stays
inconclusive.
"""

from __future__ import annotations

from typing import Literal

from fidelnet.fidelity.record import MonitorRecord
from fidelnet.fidelity.verdict import Verdict

__all__ = ["ONLY_ADDS_LATENCY", "latency_decided", "loss_decided"]

ONLY_ADDS_LATENCY = frozenset({"engine_late"})
"""Reason codes whose error can only make a measured latency larger."""


def _only_lateness(verdict: Verdict) -> bool:
    bad = [r for r in verdict.problems() if r.level == "untrusted"]
    return bool(bad) and all(r.code in ONLY_ADDS_LATENCY for r in bad)


def loss_decided(verdict: Verdict, record: MonitorRecord | None) -> bool:
    """True when the untrusted reasons are all engine lateness and the engine's
    queues dropped nothing in the window: the loss measured is the model's."""
    if record is None or not _only_lateness(verdict):
        return False
    return all(e.drops_queue == 0 for e in record.engine)


def latency_decided(
    verdict: Verdict, measured_ns: float, limit_ns: float
) -> Literal["passed"] | None:
    """``"passed"`` when ``latency <= limit`` holds on the true value despite the
    untrusted reasons (all of them only add latency, and the measured value passed),
    else None (undecided)."""
    if not _only_lateness(verdict):
        return None
    return "passed" if measured_ns <= limit_ns else None
