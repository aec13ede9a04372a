"""Jain's fairness index of a set of rates.

``J(x) = (sum x)^2 / (n * sum x^2)`` (R. Jain, D. Chiu, W. Hawe, "A Quantitative
Measure of Fairness and Discrimination for Resource Allocation in Shared Computer
Systems", DEC-TR-301, 1984). It lies between ``1/n`` (one flow has everything) and
1 (all equal), does not depend on the unit, and is continuous in the rates.

Edge cases, decided here:

- no values: ``ValueError`` (fairness among nobody is undefined);
- a negative, infinite or NaN value: ``ValueError`` (rates are finite and >= 0);
- one value: 1.0;
- all values zero: 1.0. Every flow got the same (nothing), and 1.0 is the limit of
  ``J`` along any equal allocation that shrinks to zero; a caller that cares whether
  anything moved at all looks at the rates, not at their fairness.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

__all__ = ["jain"]


def jain(values: Iterable[float]) -> float:
    """Jain's fairness index of ``values`` (see the module for the edge cases)."""
    xs = [float(v) for v in values]
    if not xs:
        raise ValueError("jain: needs at least one value")
    for x in xs:
        if not math.isfinite(x) or x < 0:
            raise ValueError(f"jain: values must be finite and not negative (got {x!r})")
    top = max(xs)
    if top == 0.0:
        return 1.0
    scaled = [x / top for x in xs]  # J does not depend on the unit; this avoids underflow
    total = math.fsum(scaled)
    return min(1.0, total * total / (len(scaled) * math.fsum(x * x for x in scaled)))
