"""Outages told from the packets of a pktgen flow: when the loss began, how long it
lasted, how many packets it took, and whether the flow came back.

The receiver keeps every jump in a flow's sequence numbers with the send
timestamps of the packets on both sides of it (:class:`~fidelnet.measure.results.Gap`).
The first lost packet was sent one packet interval after the last one received
before the jump (exactly, for a constant rate); the outage ends when the first
packet received after it was sent. So an outage is known to within one packet
interval, whatever the path's delay: both ends are send times, taken by the same
clock. A flow whose last packets never arrived ends in an outage that did not
recover.

:func:`outages` lists them; :func:`around` sums up those that follow an event
(a link taken down at a known time), which is what a scenario's ``outage`` check
judges (:mod:`fidelnet.scenario.checks`).
"""

from __future__ import annotations

from dataclasses import dataclass

from fidelnet.measure.results import Outage, UdpResult

__all__ = ["EventOutage", "LatencyAround", "around", "interval_ns", "latency_around", "outages"]


def interval_ns(result: UdpResult) -> float:
    """The time between two packets of one flow (the sender goes round-robin over
    the flows at the requested rate)."""
    flows = max(1, len(result.flows))
    return flows * 1e9 / result.requested_pps if result.requested_pps > 0 else 0.0


def outages(result: UdpResult, min_lost: int = 1) -> list[Outage]:
    """Every run of at least ``min_lost`` packets lost in a row, in order of time."""
    iv = round(interval_ns(result))
    first = result.first_send_ns or 0
    end = (result.last_send_ns or 0) + iv  # when the packet after the last would go
    out: list[Outage] = []

    def add(flow: int, start: int, stop: int, lost: int, late: int, recovered: bool) -> None:
        stop = max(start, stop)
        out.append(
            Outage(
                flow=flow,
                start_ns=start,
                end_ns=stop,
                start_s=(start - first) / 1e9,
                duration_s=(stop - start) / 1e9,
                lost=lost,
                late=late,
                recovered=recovered,
            )
        )

    for g in result.gaps:
        if g.lost >= min_lost:
            add(g.flow, g.after_send_ns + iv, g.before_send_ns, g.lost, g.filled, True)
    for f in result.flows:
        if f.sent == 0:
            continue
        if f.max_seq is None or f.max_seq_send_ns is None:
            if f.sent >= min_lost:  # nothing of this flow arrived
                add(f.id, first, end, f.sent, 0, False)
            continue
        if f.first_seq and f.first_send_ns is not None and f.first_seq >= min_lost:
            start = f.first_send_ns - f.first_seq * iv
            add(f.id, start, f.first_send_ns, f.first_seq, 0, True)
        trailing = f.sent - 1 - f.max_seq
        if trailing >= min_lost:
            add(f.id, f.max_seq_send_ns + iv, max(end, f.max_seq_send_ns + iv), trailing, 0, False)
    out.sort(key=lambda o: (o.start_ns, o.flow))
    return out


@dataclass(frozen=True)
class EventOutage:
    """What the flow went through after one event: ``outage_s`` from the first lost
    packet's send time to the send time of the first packet received after the last
    outage of the window (the whole disruption, several outages while a protocol
    reconverges included); ``lost`` in all; ``recovered`` False when the flow never
    came back in the window."""

    at_ns: int
    outages: tuple[Outage, ...]

    @property
    def outage_s(self) -> float:
        if not self.outages:
            return 0.0
        start = min(o.start_ns for o in self.outages)
        stop = max(o.end_ns for o in self.outages)
        return (stop - start) / 1e9

    @property
    def lost(self) -> int:
        return sum(o.lost for o in self.outages)

    @property
    def late(self) -> int:
        return sum(o.late for o in self.outages)

    @property
    def recovered(self) -> bool:
        return all(o.recovered for o in self.outages)

    @property
    def delay_s(self) -> float | None:
        """From the event to the first lost packet's send time (negative when packets
        already in flight towards the failure were lost); None without an outage."""
        if not self.outages:
            return None
        return (min(o.start_ns for o in self.outages) - self.at_ns) / 1e9


def around(result: UdpResult, at_ns: int, until_ns: int | None = None) -> EventOutage:
    """The outages of ``result`` that an event at ``at_ns`` (CLOCK_REALTIME) may have
    caused: those still going on at the event or starting after it, up to
    ``until_ns`` (the next event; default: the end of the traffic). An outage may
    start a little before the event: the packets already on their way to a link that
    fails are lost with it, those still in a receiving interface's input backlog
    included (1.8 ms of them on a busy 2-vCPU VM, measured)."""
    found = tuple(
        o
        for o in outages(result)
        if o.end_ns >= at_ns and (until_ns is None or o.start_ns < until_ns)
    )
    return EventOutage(at_ns, found)


@dataclass(frozen=True)
class LatencyAround:
    """The worst per-interval p99 latency in the second before an event, the worst
    latency of the intervals from the event to one interval after its outage ended,
    and the worst p99 in the second after that (ns; None without packets there)."""

    before_p99_ns: int | None
    during_max_ns: int | None
    after_p99_ns: int | None
    duplicates_during: int = 0
    """Duplicates received from the event to one interval after its outage."""


def latency_around(result: UdpResult, at_s: float, outage_end_s: float | None) -> LatencyAround:
    """:class:`LatencyAround` an event ``at_s`` seconds after the first packet; the
    disruption lasts until ``outage_end_s`` (None: no outage). The receiver's
    intervals start at its first packet, one one-way latency after the first send:
    negligible at this scale."""
    step = result.interval_s
    end = max(at_s, outage_end_s or at_s) + step

    def worst(values: list[int | None]) -> int | None:
        got = [v for v in values if v]
        return max(got) if got else None

    ivs = result.intervals
    before = [i.latency_p99_ns for i in ivs if at_s - 1.0 <= i.t_s and i.t_s + step <= at_s]
    window = [i for i in ivs if at_s - step < i.t_s < end]
    during = [i.latency_max_ns for i in window]
    after = [i.latency_p99_ns for i in ivs if end <= i.t_s < end + 1.0]
    dups = sum(i.duplicates for i in window)
    return LatencyAround(worst(before), worst(during), worst(after), dups)
