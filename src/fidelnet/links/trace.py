"""Mahimahi packet-delivery traces: one delivery opportunity per line.

Each line of a Mahimahi trace is a time in milliseconds (a non-negative integer,
non-decreasing) at which the link can deliver one packet of up to 1500 bytes; a
time repeated N times is N opportunities in that millisecond. The trace loops,
its period being the last time (which must therefore be positive). Empty lines
and lines starting with ``#`` are skipped. Errors name ``file:line``.
"""

from __future__ import annotations

from fidelnet.errors import ValidationError

__all__ = ["TRACE_PACKET_BYTES", "read_trace"]

TRACE_PACKET_BYTES = 1500
_MAX_LINES = 10_000_000


def read_trace(field: str, path: str) -> list[int]:
    """The opportunities of the trace at ``path``, in milliseconds."""
    try:
        with open(path, encoding="ascii", errors="strict") as f:
            text = f.read()
    except FileNotFoundError:
        raise ValidationError(field, "trace file not found", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(field, f"cannot read trace file: {exc}", path) from None
    times: list[int] = []
    last = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if not line.isdigit():
            raise ValidationError(field, f"{where}: expected a whole number of milliseconds", raw)
        t = int(line)
        if t < last:
            raise ValidationError(
                field, f"{where}: times must not decrease (previous line had {last})", raw
            )
        last = t
        times.append(t)
        if len(times) > _MAX_LINES:
            raise ValidationError(field, f"{where}: more than {_MAX_LINES} lines", path)
    if not times:
        raise ValidationError(field, f"{path}: the trace has no delivery opportunities", path)
    if times[-1] == 0:
        raise ValidationError(
            field, f"{path}: the last time must be positive (it is the trace's period)", path
        )
    return times
