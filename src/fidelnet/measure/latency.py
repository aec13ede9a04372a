"""Latency histograms: decode, summarise, and the HDR percentile series for plots.

Histograms are HdrHistogram V2 compressed encodings in base64 (what pktgen and
linkd export), values in nanoseconds.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from hdrh.histogram import HdrHistogram

from fidelnet.errors import MeasurementError
from fidelnet.measure.results import LatencySummary

__all__ = [
    "decode",
    "empty_summary",
    "encode",
    "merge",
    "percentile_series",
    "summary_from_histogram",
    "summary_from_json",
]

_LOWEST_NS = 1
_HIGHEST_NS = 60 * 10**9
_DIGITS = 3


def decode(hdr: str) -> HdrHistogram:
    """The histogram a base64 V2 compressed string holds."""
    try:
        base64.b64decode(hdr, validate=True)
        hist = HdrHistogram.decode(hdr)
    except Exception as exc:
        raise MeasurementError(f"latency histogram cannot be decoded: {exc}") from exc
    if hist is None:
        raise MeasurementError("latency histogram cannot be decoded: empty")
    return hist


def merge(hdrs: list[str]) -> HdrHistogram:
    """One histogram holding every sample of ``hdrs``."""
    total = HdrHistogram(_LOWEST_NS, _HIGHEST_NS, _DIGITS)
    for h in hdrs:
        total.add(decode(h))
    return total


def encode(hist: HdrHistogram) -> str:
    out = hist.encode()
    return out.decode() if isinstance(out, bytes) else str(out)


def percentile_series(hdr: str, *, max_nines: int = 6) -> list[tuple[float, int]]:
    """(percentile, value_ns) points for an HDR percentile plot, whose x axis is
    1/(1 - p): dense near the tail, up to ``max_nines`` nines or the last sample."""
    hist = decode(hdr)
    count = hist.get_total_count()
    if count == 0:
        return []
    points: list[tuple[float, int]] = []
    # Steps that halve the remaining distance to 100%, 5 per halving (as HdrHistogram's
    # percentile iterator does), stopping where the tail holds fewer than one sample.
    p = 0.0
    limit = 100.0 * (1.0 - 10.0 ** (-max_nines))
    while True:
        points.append((p, int(hist.get_value_at_percentile(p))))
        if p >= limit or (100.0 - p) / 100.0 * count < 1.0:
            break
        remaining = 100.0 - p
        p = 100.0 - remaining / (2 ** (1 / 5))
    points.append((100.0, int(hist.get_max_value())))
    return points


def empty_summary() -> LatencySummary:
    return LatencySummary(
        count=0,
        min_ns=0,
        mean_ns=0.0,
        p50_ns=0,
        p90_ns=0,
        p99_ns=0,
        p999_ns=0,
        p9999_ns=0,
        max_ns=0,
        hdr=None,
    )


def summary_from_json(doc: Mapping[str, Any] | None, hdr: str | None = None) -> LatencySummary:
    """A :class:`LatencySummary` from pktgen's ``latency`` object (keys ``count``,
    ``min_ns``, ... ``max_ns``)."""
    if not doc or not doc.get("count"):
        return empty_summary()
    try:
        return LatencySummary(
            count=int(doc["count"]),
            min_ns=int(doc["min_ns"]),
            mean_ns=float(doc["mean_ns"]),
            p50_ns=int(doc["p50_ns"]),
            p90_ns=int(doc["p90_ns"]),
            p99_ns=int(doc["p99_ns"]),
            p999_ns=int(doc["p999_ns"]),
            p9999_ns=int(doc["p9999_ns"]),
            max_ns=int(doc["max_ns"]),
            hdr=hdr,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MeasurementError(f"pktgen latency summary unreadable: {exc!r}") from exc


def summary_from_histogram(hist: HdrHistogram) -> LatencySummary:
    if hist.get_total_count() == 0:
        return empty_summary()
    return LatencySummary(
        count=int(hist.get_total_count()),
        min_ns=int(hist.get_min_value()),
        mean_ns=float(hist.get_mean_value()),
        p50_ns=int(hist.get_value_at_percentile(50)),
        p90_ns=int(hist.get_value_at_percentile(90)),
        p99_ns=int(hist.get_value_at_percentile(99)),
        p999_ns=int(hist.get_value_at_percentile(99.9)),
        p9999_ns=int(hist.get_value_at_percentile(99.99)),
        max_ns=int(hist.get_max_value()),
        hdr=encode(hist),
    )
