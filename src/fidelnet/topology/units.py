"""Strict parsing of rates, durations, sizes and percentages.

Every quantity fidelnet accepts as text carries its unit: ``"10Mbit"``,
``"1Gbps"``, ``"2ms"``, ``"500us"``, ``"1500B"``, ``"1%"``. A bare number is an
error for rates and durations in the native API and in scenario files; only the
Mininet compatibility layer reads Mininet's bare ``bw=10`` as Mbit/s, through
:func:`parse_rate` with ``bare_unit``. A bare size is bytes.

``Mbps`` means megabits per second, as iperf and most people write it; beware that
``tc`` itself reads ``mbps`` as megabytes. Bytes per second are spelled with a capital
``B``: ``MBps``.

Values come back in base units: bit/s, seconds, bytes, percent (0..100).
"""

from __future__ import annotations

import math
import re

from fidelnet.errors import UnitError

__all__ = ["parse_duration", "parse_percent", "parse_rate", "parse_size"]

_NUM = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_RE = re.compile(rf"^\s*{_NUM}\s*(?P<unit>[A-Za-z%/]*)\s*$")

# Rates: bit/s. "bps" and "bit" mean bits (iperf's reading, not tc's); "Bps" means bytes.
_RATE_UNITS: dict[str, float] = {
    "bit": 1.0,
    "bps": 1.0,
    "bit/s": 1.0,
    "b/s": 1.0,
    "kbit": 1e3,
    "kbps": 1e3,
    "kbit/s": 1e3,
    "kb/s": 1e3,
    "mbit": 1e6,
    "mbps": 1e6,
    "mbit/s": 1e6,
    "mb/s": 1e6,
    "gbit": 1e9,
    "gbps": 1e9,
    "gbit/s": 1e9,
    "gb/s": 1e9,
    "tbit": 1e12,
    "tbps": 1e12,
    "tbit/s": 1e12,
}
_BYTE_RATE_UNITS: dict[str, float] = {
    "Bps": 8.0,
    "KBps": 8e3,
    "MBps": 8e6,
    "GBps": 8e9,
    "TBps": 8e12,
}
_TIME_UNITS: dict[str, float] = {
    "s": 1.0,
    "sec": 1.0,
    "ms": 1e-3,
    "msec": 1e-3,
    "us": 1e-6,
    "usec": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
    "nsec": 1e-9,
    "min": 60.0,
}
_SIZE_UNITS: dict[str, float] = {
    "b": 1.0,
    "byte": 1.0,
    "bytes": 1.0,
    "k": 1e3,
    "kb": 1e3,
    "kib": 1024.0,
    "m": 1e6,
    "mb": 1e6,
    "mib": 1024.0**2,
    "g": 1e9,
    "gb": 1e9,
    "gib": 1024.0**3,
}


def _split(field: str, text: str | float | int) -> tuple[float, str]:
    if isinstance(text, bool):
        raise UnitError(field, "expected a quantity with a unit", text)
    if isinstance(text, (int, float)):
        try:
            num, unit = float(text), ""
        except OverflowError:
            raise UnitError(field, "must be a finite number", text) from None
    elif not isinstance(text, str):
        raise UnitError(field, "expected a quantity with a unit (text or a number)", text)
    else:
        m = _RE.match(text.replace("µs", "us"))
        if not m:
            raise UnitError(field, "not a number followed by a unit", text)
        num, unit = float(m.group("num")), m.group("unit")
    if math.isnan(num) or math.isinf(num):
        raise UnitError(field, "must be a finite number", text)
    if num < 0:
        raise UnitError(field, "must not be negative", text)
    return num, unit


def parse_rate(field: str, text: str | float | int, bare_unit: float | None = None) -> float:
    """Parse a rate such as ``"10Mbit"`` into bit/s.

    ``bare_unit`` is the multiplier for a number without unit (the Mininet layer
    passes 1e6, so ``bw=10`` is 10 Mbit/s); without it a bare number is an error.
    """
    num, unit = _split(field, text)
    if not unit:
        if bare_unit is None:
            raise UnitError(
                field, "a rate needs a unit", text, choices=["bit", "kbit", "Mbit", "Gbit", "Mbps"]
            )
        return _finite(field, num * bare_unit, text)
    # The capital B alone marks bytes; the prefix may be either case ("kBps" = "KBps").
    byte_unit = unit[:-3].upper() + "Bps" if unit.endswith("Bps") else unit
    if byte_unit in _BYTE_RATE_UNITS:
        return num * _BYTE_RATE_UNITS[byte_unit]
    mult = _RATE_UNITS.get(unit.lower())
    if mult is None:
        raise UnitError(
            field,
            f"unknown rate unit {unit!r}",
            text,
            choices=["bit", "kbit", "Mbit", "Gbit", "Tbit", "bps", "Mbps", "Gbps", "MBps"],
        )
    return _finite(field, num * mult, text)


def _finite(field: str, value: float, text: object) -> float:
    """``value``, refused when the unit's factor took it past the largest float
    (``"20E304K"`` is a finite number of kilo-somethings but no finite quantity)."""
    if not math.isfinite(value):
        raise UnitError(field, "too large", text)
    return value


def parse_duration(field: str, text: str | float | int, bare_unit: float | None = None) -> float:
    """Parse a duration such as ``"2ms"`` or ``"500us"`` into seconds."""
    num, unit = _split(field, text)
    if not unit:
        if bare_unit is None:
            raise UnitError(field, "a duration needs a unit", text, choices=["s", "ms", "us", "ns"])
        return _finite(field, num * bare_unit, text)
    mult = _TIME_UNITS.get(unit.lower()) if unit != "µs" else 1e-6
    if mult is None:
        raise UnitError(field, f"unknown time unit {unit!r}", text, choices=["s", "ms", "us", "ns"])
    return _finite(field, num * mult, text)


def parse_size(field: str, text: str | float | int, bare_unit: float | None = 1.0) -> int:
    """Parse a size such as ``"1500B"`` or ``"64KiB"`` into bytes (a bare number is bytes)."""
    num, unit = _split(field, text)
    if not unit:
        if bare_unit is None:
            raise UnitError(
                field, "a size needs a unit", text, choices=["B", "KB", "KiB", "MB", "MiB"]
            )
        return round(_finite(field, num * bare_unit, text))
    mult = _SIZE_UNITS.get(unit.lower())
    if mult is None:
        raise UnitError(
            field,
            f"unknown size unit {unit!r}",
            text,
            choices=["B", "KB", "KiB", "MB", "MiB", "GB", "GiB"],
        )
    return round(_finite(field, num * mult, text))


def parse_percent(field: str, text: str | float | int) -> float:
    """Parse a percentage (``"1%"``, ``"0.5%"`` or a bare number meaning percent), 0..100."""
    num, unit = _split(field, text)
    if unit not in ("", "%"):
        raise UnitError(field, f"unknown unit {unit!r} for a percentage", text, choices=["%"])
    if num > 100:
        raise UnitError(field, "must be at most 100%", text)
    return num
