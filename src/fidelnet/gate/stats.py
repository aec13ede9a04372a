"""Confidence intervals a regression decision can rest on, from what a run keeps.

- **A latency percentile** from the run's whole HDR histogram, distribution-free:
  the number of samples at or below the true p-quantile is Binomial(n, p), so two
  order statistics bracket the quantile with a known confidence whatever the
  latency's distribution (the textbook order-statistic interval). No resampling,
  exact in n, and honest about the tail: with 2,000 packets there is no upper bound
  for p99.99 at all, which the comparison reports as too few samples.
- **A loss ratio** by Wilson's score interval, and a difference of two by Newcombe's
  method (packets lost independently; bursts make it optimistic, said in the docs).
- **A mean over a series** (goodput) by batch means: the post-warm-up intervals cut
  into ``BATCHES`` batches whose means are close to independent, then Student's t.
- **The zero-loss rate** by the search's own resolution: the true NDR lies between
  the highest rate that lost nothing and one step above it.

Values from an HDR histogram carry its 3 significant digits (0.1 %), far below any
tolerance a comparison uses.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from fidelnet.errors import ValidationError

__all__ = [
    "BATCHES",
    "Interval",
    "batch_mean_interval",
    "binom_quantile",
    "difference_interval",
    "quantile_interval",
    "quantile_ranks",
    "wilson_interval",
]

BATCHES = 5


@dataclass(frozen=True)
class Interval:
    """An estimate and its interval; ``hi`` is ``math.inf`` when the data cannot bound
    it from above (too few samples for the percentile)."""

    value: float
    lo: float
    hi: float
    n: int

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.lo) and math.isfinite(self.hi)


def _check_confidence(confidence: float) -> None:
    if not isinstance(confidence, float | int) or not 0.5 <= confidence < 1.0:
        raise ValidationError("confidence", "must be in [0.5, 1) (e.g. 0.95)", confidence)


def _z(confidence: float) -> float:
    """The standard normal quantile for a two-sided ``confidence``."""
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2.0)


def binom_quantile(q: float, n: int, p: float) -> int:
    """The smallest k with P(B <= k) >= q for B ~ Binomial(n, p)."""
    if n <= 0 or p <= 0.0:
        return 0
    if p >= 1.0:
        return n
    mean = n * p
    sd = math.sqrt(n * p * (1.0 - p))
    start = max(0, math.floor(mean - 40.0 * sd - 10.0))  # below it: no mass worth a sum
    log_p, log_q = math.log(p), math.log1p(-p)
    lg_n = math.lgamma(n + 1)
    total = 0.0
    for k in range(start, n + 1):
        total += math.exp(
            lg_n - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * log_p + (n - k) * log_q
        )
        if total >= q:
            return k
    return n


def quantile_ranks(n: int, p: float, confidence: float) -> tuple[int, int]:
    """1-based ranks (l, u) such that the l-th and u-th smallest of n samples bracket
    the p-quantile with at least ``confidence``: l = 0 means no lower order statistic
    is needed (the bound is the smallest possible value), u = n + 1 that none bounds
    it from above."""
    _check_confidence(confidence)
    alpha = 1.0 - confidence
    low = binom_quantile(alpha / 2.0, n, p)
    high = binom_quantile(1.0 - alpha / 2.0, n, p) + 1
    return low, min(high, n + 1)


def quantile_interval(hdr: str, percentile: float, confidence: float = 0.95) -> Interval:
    """The ``percentile`` (0..100) of an encoded HDR histogram and its
    order-statistic interval."""
    from fidelnet.measure.latency import decode

    if not 0.0 < percentile < 100.0:
        raise ValidationError("percentile", "must be between 0 and 100 (exclusive)", percentile)
    hist = decode(hdr)
    n = int(hist.get_total_count())
    if n == 0:
        return Interval(math.nan, math.nan, math.inf, 0)
    value = float(hist.get_value_at_percentile(percentile))
    low, high = quantile_ranks(n, percentile / 100.0, confidence)

    def at_rank(rank: int) -> float:
        return float(hist.get_value_at_percentile(100.0 * rank / n))

    lo = 0.0 if low < 1 else at_rank(low)
    hi = math.inf if high > n else at_rank(high)
    return Interval(value, min(lo, value), max(hi, value), n)


def wilson_interval(k: int, n: int, confidence: float = 0.95) -> Interval:
    """A proportion k/n and Wilson's score interval."""
    _check_confidence(confidence)
    if n <= 0:
        return Interval(math.nan, 0.0, 1.0, 0)
    z = _z(confidence)
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), n)


def difference_interval(base: Interval, now: Interval) -> tuple[float, float]:
    """Newcombe's interval for ``now - base`` from two Wilson intervals."""
    d = now.value - base.value
    lo = d - math.sqrt((now.value - now.lo) ** 2 + (base.hi - base.value) ** 2)
    hi = d + math.sqrt((now.hi - now.value) ** 2 + (base.value - base.lo) ** 2)
    return lo, hi


# Student's t, two-sided 95 % and 99 %, for 1..10 degrees of freedom (the batches).
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)
_T99 = (63.657, 9.925, 5.841, 4.604, 4.032, 3.707, 3.499, 3.355, 3.250, 3.169)


def _t(confidence: float, df: int) -> float:
    if df > len(_T95):
        return _z(confidence)
    if abs(confidence - 0.99) < 1e-9:
        return _T99[df - 1]
    if abs(confidence - 0.95) < 1e-9:
        return _T95[df - 1]
    # Other confidences: the normal quantile widened as t widens at 95 %.
    return _z(confidence) * _T95[df - 1] / 1.959964


def batch_mean_interval(
    series: Sequence[float], confidence: float = 0.95, batches: int = BATCHES
) -> Interval:
    """The mean of ``series`` and a batch-means interval (``batches`` equal batches,
    the remainder dropped from the front); unbounded with fewer than 2 per batch."""
    _check_confidence(confidence)
    n = len(series)
    if n == 0:
        return Interval(math.nan, -math.inf, math.inf, 0)
    mean = sum(series) / n
    size = n // batches
    if size < 2:
        return Interval(mean, -math.inf, math.inf, n)
    used = list(series)[n - size * batches :]
    means = [sum(used[i * size : (i + 1) * size]) / size for i in range(batches)]
    grand = sum(means) / batches
    var = sum((m - grand) ** 2 for m in means) / (batches - 1)
    half = _t(confidence, batches - 1) * math.sqrt(var / batches)
    return Interval(mean, grand - half, grand + half, n)
