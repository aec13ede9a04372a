"""What the link engine reported over a measurement window.

The run monitor (:mod:`fidelnet.fidelity.monitor`) reads linkd's ``stats`` once
when the measured traffic starts and once when it ends. Everything here turns two
such readings into the window's figures:

- per link and direction, the packets released and how late (the difference of two
  snapshots of the cumulative lateness histogram, ``lateness_hdr``), and the drops
  by cause (:func:`directions`);
- the loop's timer wake-ups in the window: how long after the instant its timer was
  armed for the kernel let the loop run again (``wake_late_hdr`` of each loop,
  :func:`wake_ups`). That delay is the machine's (interrupt delivery, the scheduler,
  on a virtual machine the hypervisor), not the engine's: it is what tells a late
  release the engine caused from one the machine imposed on it;
- the loop's departures from SCHED_FIFO (:func:`demotions`);
- for the incoming direction of a cut link's half (:mod:`fidelnet.links.cut`), how
  long the network between the machines took (the ``udp`` end's
  ``wire_delay_hdr``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from fidelnet.fidelity.record import EngineDirection, EngineWake

__all__ = ["demotions", "directions", "lateness_delta", "percentile", "wake_ups"]

# (delay ab, delay ba, queue limit ab, queue limit ba) of a link, by engine link name.
LinkInfo = tuple[float, float, int | None, int | None]


def _decode_counts(b64: str) -> dict[int, int]:
    """Value -> count of an HdrHistogram V2 (deflate, base64), as linkd exports it."""
    if not b64:
        return {}
    from hdrh.histogram import HdrHistogram

    try:
        h = HdrHistogram.decode(b64)
    except Exception:
        return {}
    out: dict[int, int] = {}
    for item in h.get_recorded_iterator():
        out[int(item.value_iterated_to)] = int(item.count_at_value_iterated_to)
    return out


def lateness_delta(before: str, after: str) -> list[tuple[int, int]]:
    """(value_ns, count) pairs recorded between two snapshots of the same cumulative
    histogram, sorted by value."""
    a = _decode_counts(before)
    b = _decode_counts(after)
    out = []
    for v, n in b.items():
        d = n - a.get(v, 0)
        if d > 0:
            out.append((v, d))
    return sorted(out)


def percentile(pairs: Sequence[tuple[int, int]], q: float) -> int:
    """The ``q``-th percentile (nearest rank) of sorted (value, count) pairs; 0 if empty."""
    total = sum(n for _v, n in pairs)
    if total == 0:
        return 0
    rank = max(1, math.ceil(total * q / 100))
    seen = 0
    for v, n in pairs:
        seen += n
        if seen >= rank:
            return v
    return pairs[-1][0]


def demotions(a: Mapping[str, Any], b: Mapping[str, Any]) -> tuple[int, float]:
    """The engine's departures from SCHED_FIFO between two ``realtime`` reports, and
    the seconds spent demoted."""
    if not b:
        return 0, 0.0
    n = int(b.get("demotions", 0)) - int(a.get("demotions", 0))
    ns = int(b.get("demoted_ns", 0)) - int(a.get("demoted_ns", 0))
    return max(0, n), round(max(0, ns) / 1e9, 4)


def directions(
    a: Mapping[str, Any], b: Mapping[str, Any], info: Mapping[str, LinkInfo]
) -> list[EngineDirection]:
    """Every link direction that carried or lost packets between the ``stats`` links
    ``a`` and ``b``; ``info`` gives each link's configured delays and queue limits."""
    out = []
    for name, after in sorted(b.items()):
        before = a.get(name, {})
        for d in ("ab", "ba"):
            sa, sb = before.get(d, {}), after.get(d, {})
            if not sb:
                continue
            pairs = lateness_delta(sa.get("lateness_hdr", ""), sb.get("lateness_hdr", ""))
            packets = int(sb.get("tx_packets", 0)) - int(sa.get("tx_packets", 0))
            if packets <= 0 and not pairs:
                continue
            da, db = sa.get("drops", {}), sb.get("drops", {})
            wire: list[tuple[int, int]] = []
            uncertainty: int | None = None
            if d == "ba":  # frames a cut link's udp end (b) received, the network's delay
                wa = before.get("endpoints", {}).get("b", {})
                wb = after.get("endpoints", {}).get("b", {})
                if wb.get("kind") == "udp":
                    wire = lateness_delta(
                        wa.get("wire_delay_hdr", ""), wb.get("wire_delay_hdr", "")
                    )
                    got = wb.get("clock_uncertainty_ns")
                    uncertainty = int(got) if isinstance(got, int) else None
            delay_ab, delay_ba, q_ab, q_ba = info.get(name, (0.0, 0.0, None, None))
            out.append(
                EngineDirection(
                    link=name,
                    direction=d,
                    delay_s=float(delay_ab if d == "ab" else delay_ba),
                    packets=packets,
                    lateness_p50_ns=percentile(pairs, 50),
                    lateness_p99_ns=percentile(pairs, 99),
                    lateness_p999_ns=percentile(pairs, 99.9),
                    lateness_max_ns=pairs[-1][0] if pairs else 0,
                    drops_queue=int(db.get("queue", 0)) - int(da.get("queue", 0)),
                    drops_loss=int(db.get("loss", 0)) - int(da.get("loss", 0)),
                    drops_down=int(db.get("down", 0)) - int(da.get("down", 0)),
                    queue_limit=q_ab if d == "ab" else q_ba,
                    drops_ingress=int(sb.get("ingress_drops", 0)) - int(sa.get("ingress_drops", 0)),
                    wire_p999_ns=percentile(wire, 99.9) if wire else None,
                    wire_max_ns=wire[-1][0] if wire else None,
                    clock_uncertainty_ns=uncertainty,
                )
            )
    return out


def _loops(report: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The per-loop reports of an ``engine`` report: its ``loops`` when the daemon
    runs several, else the report itself."""
    loops = report.get("loops")
    if isinstance(loops, list) and loops:
        return [x for x in loops if isinstance(x, Mapping)]
    return [report] if report else []


def wake_ups(a: Mapping[str, Any], b: Mapping[str, Any]) -> EngineWake | None:
    """The loops' timer wake-ups between the ``engine`` reports ``a`` and ``b``
    (None when the daemon does not export them, or none happened)."""
    before, after = _loops(a), _loops(b)
    counts: dict[int, int] = {}
    for i, loop in enumerate(after):
        old = before[i].get("wake_late_hdr", "") if i < len(before) else ""
        new = loop.get("wake_late_hdr", "")
        if not new:
            continue
        for v, n in lateness_delta(str(old), str(new)):
            counts[v] = counts.get(v, 0) + n
    if not counts:
        return None
    pairs = sorted(counts.items())
    return EngineWake(
        count=sum(counts.values()),
        p50_ns=percentile(pairs, 50),
        p99_ns=percentile(pairs, 99),
        max_ns=pairs[-1][0],
    )
