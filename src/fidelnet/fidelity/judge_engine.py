"""The judge's rules about the link engine (:mod:`fidelnet.fidelity.judge`): packets
released late against each link's delay, whose delay that was (the engine's, or the
machine's that woke it late), and a cut link's half: the network between the
machines slower than the link, or the two machines' clocks known too loosely for
the delay it holds."""

from __future__ import annotations

from collections.abc import Iterator

from fidelnet.fidelity.levels import fmt_ns as _fmt_ns
from fidelnet.fidelity.levels import level as _level
from fidelnet.fidelity.record import MonitorRecord
from fidelnet.fidelity.thresholds import Thresholds
from fidelnet.fidelity.verdict import Reason

__all__ = ["WOKEN_SLACK_NS", "cut_clock_reasons", "engine_reasons"]


WOKEN_SLACK_NS = 200_000
"""A timer wake-up ``W`` late accounts for a departure released up to ``W`` plus this
late: the spin lead is tens of µs, the work done ahead of a departure in the same
turn well under this."""


def engine_reasons(rec: MonitorRecord, th: Thresholds) -> Iterator[Reason]:
    wake = rec.engine_wake
    woken: list[str] = []
    for e in rec.engine:
        if e.packets <= 0:
            continue
        late = e.lateness_p999_ns
        where = f"{e.link} {e.direction}"
        # Whose delay it was: a departure cannot leave before the loop runs, and a
        # loop woken W after its timer released its due departures about W late.
        by_machine = wake is not None and wake.max_ns + WOKEN_SLACK_NS >= late
        cause = (
            f"; the kernel ran the engine up to {_fmt_ns(wake.max_ns)} after its timer "
            "(the machine's delay, not the engine's)"
            if by_machine and wake is not None
            else ""
        )
        # A cut link's incoming half: frames the network between the machines took
        # longer for than the link's delay arrived after their release time.
        if e.wire_p999_ns is not None and e.wire_p999_ns + WOKEN_SLACK_NS >= e.delay_s * 1e9:
            cause += (
                f"; frames were read up to {_fmt_ns(e.wire_max_ns or e.wire_p999_ns)} "
                f"(p99.9 {_fmt_ns(e.wire_p999_ns)}) after they left the other half, the "
                f"link's delay is {_fmt_ns(e.delay_s * 1e9)}: the network between the "
                "machines (or this machine, reading them late) was slower than the link"
            )
        if e.delay_s > 0:
            pct = 100 * late / (e.delay_s * 1e9)
            level = _level(
                pct, th.lateness_degraded_pct_of_delay, th.lateness_untrusted_pct_of_delay
            )
            if level != "trusted":
                woken += [where] if by_machine else []
                yield Reason(
                    code="engine_late",
                    level=level,
                    message=(
                        f"engine released packets up to {_fmt_ns(e.lateness_max_ns)} late on "
                        f"a {_fmt_ns(e.delay_s * 1e9)} link ({where}; p99.9 "
                        f"{_fmt_ns(late)}: {pct:.0f} % of the delay){cause}"
                    ),
                    value=round(pct, 1),
                    threshold=th.lateness_degraded_pct_of_delay
                    if level == "degraded"
                    else th.lateness_untrusted_pct_of_delay,
                    unit="% of delay",
                    source="engine",
                )
        else:
            level = _level(late, th.lateness_degraded_ns, th.lateness_untrusted_ns)
            if level != "trusted":
                woken += [where] if by_machine else []
                yield Reason(
                    code="engine_late",
                    level=level,
                    message=(
                        f"engine released packets up to {_fmt_ns(e.lateness_max_ns)} late "
                        f"({where}, p99.9 {_fmt_ns(late)}, no delay configured){cause}"
                    ),
                    value=float(late),
                    threshold=float(
                        th.lateness_degraded_ns if level == "degraded" else th.lateness_untrusted_ns
                    ),
                    unit="ns",
                    source="engine",
                )
    if woken and wake is not None:
        # A note for scripts: every late direction named here is accounted for by
        # the machine's wake-up delay (the levels above stand: the numbers are off).
        yield Reason(
            code="engine_woken_late",
            level="trusted",
            message=(
                f"the kernel ran the link engine up to {_fmt_ns(wake.max_ns)} after its "
                f"timer ({wake.count} wake-ups, p99 {_fmt_ns(wake.p99_ns)}): enough to "
                f"explain the late releases on {', '.join(woken)}"
            ),
            value=float(wake.max_ns),
            unit="ns",
            source="engine",
        )


def cut_clock_reasons(rec: MonitorRecord, th: Thresholds) -> Iterator[Reason]:
    """A cut link's incoming half holds each frame's delay from the other machine's
    stamp moved onto this clock: the offset's uncertainty is an error of every delay
    it holds, judged against the link's delay as the engine's lateness is."""
    for e in rec.engine:
        unc = e.clock_uncertainty_ns
        if unc is None or e.packets <= 0 or e.delay_s <= 0:
            continue
        pct = 100 * unc / (e.delay_s * 1e9)
        level = _level(pct, th.lateness_degraded_pct_of_delay, th.lateness_untrusted_pct_of_delay)
        if level == "trusted":
            continue
        yield Reason(
            code="clock_uncertain",
            level=level,
            message=(
                f"the two machines' clocks are known to within {_fmt_ns(unc)} "
                f"({e.link} {e.direction}, a cut link): {pct:.0f} % of its "
                f"{_fmt_ns(e.delay_s * 1e9)} delay, which every frame it holds may be off by"
            ),
            value=round(pct, 1),
            threshold=th.lateness_degraded_pct_of_delay
            if level == "degraded"
            else th.lateness_untrusted_pct_of_delay,
            unit="% of delay",
            source="engine",
        )
