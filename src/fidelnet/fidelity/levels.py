"""What every rule of the judge shares: a level from a value and its two bounds, and
durations written for people."""

from __future__ import annotations

from fidelnet.fidelity.verdict import Level

__all__ = ["fmt_ns", "level"]


def fmt_ns(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} µs"


def level(value: float, degraded: float, untrusted: float) -> Level:
    if value >= untrusted:
        return "untrusted"
    if value >= degraded:
        return "degraded"
    return "trusted"
