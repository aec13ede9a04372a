"""Numbers as people read them: rates, latencies, ratios (for tables and plot labels).

Each function returns plain text; the HTML writer escapes it.
"""

from __future__ import annotations

__all__ = ["bps", "count", "ns", "pps", "ratio", "unit_for_bps"]


def pps(value: float | None) -> str:
    """``123 kpps``, ``1.5 Mpps``, ``800 pps``; ``—`` for None."""
    if value is None:
        return "—"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.4g} Mpps"
    if abs(value) >= 1e3:
        return f"{value / 1e3:.4g} kpps"
    return f"{value:.4g} pps"


def unit_for_bps(value: float) -> tuple[str, float]:
    """The unit to show ``value`` bit/s in, and its divisor."""
    for name, div in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if abs(value) >= div:
            return name, div
    return "bit/s", 1.0


def bps(value: float | None) -> str:
    """``94.3 Mbit/s``; ``—`` for None."""
    if value is None:
        return "—"
    unit, div = unit_for_bps(value)
    return f"{value / div:.4g} {unit}"


def ns(value: float | None) -> str:
    """A duration in nanoseconds as ``68.1 µs``, ``80.2 ms``, ``4.1 s``."""
    if value is None:
        return "—"
    if abs(value) >= 1e9:
        return f"{value / 1e9:.4g} s"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.4g} ms"
    return f"{value / 1e3:.4g} µs"


def ratio(value: float | None) -> str:
    """A loss ratio as a percentage: ``0``, ``0.0123 %``, ``20 %``."""
    if value is None:
        return "—"
    if value == 0:
        return "0"
    return f"{value * 100:.3g} %"


def count(value: int | None) -> str:
    """An integer with thousands separators."""
    if value is None:
        return "—"
    return f"{value:,}"
