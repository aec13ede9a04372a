"""Mahimahi packet-delivery traces: one delivery opportunity per line.

Each line of a Mahimahi trace is a time in milliseconds (a non-negative integer,
non-decreasing) at which the link can deliver one packet of up to 1500 bytes; a
time repeated N times is N opportunities in that millisecond. The trace loops,
its period being the last time (which must therefore be positive). Empty lines
and lines starting with ``#`` are skipped. Errors name ``file:line``.

Limits, checked before the work they bound: the file must be a regular file (a FIFO
or a device would block or never end) of at most :data:`MAX_TRACE_FILE_BYTES`, with
at most :data:`MAX_TRACE_ENTRIES` opportunities (both directions of a link must fit
in one control message to the engine), each at most :data:`MAX_TRACE_MS`.
"""

from __future__ import annotations

import os
import stat

from fidelnet.errors import ValidationError

__all__ = [
    "MAX_TRACE_ENTRIES",
    "MAX_TRACE_FILE_BYTES",
    "MAX_TRACE_MS",
    "TRACE_PACKET_BYTES",
    "read_trace",
]

TRACE_PACKET_BYTES = 1500
MAX_TRACE_FILE_BYTES = 32 << 20
MAX_TRACE_ENTRIES = 500_000
MAX_TRACE_MS = 2**32 - 1  # 49.7 days


def read_trace(field: str, path: str) -> list[int]:
    """The opportunities of the trace at ``path``, in milliseconds."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ValidationError(field, "a trace must be a regular file", path)
        if st.st_size > MAX_TRACE_FILE_BYTES:
            raise ValidationError(
                field,
                f"trace file of {st.st_size} bytes; the limit is {MAX_TRACE_FILE_BYTES} bytes",
                path,
            )
        with open(path, encoding="ascii", errors="strict") as f:
            text = f.read(MAX_TRACE_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ValidationError(field, "trace file not found", path) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValidationError(field, f"cannot read trace file: {exc}", path) from None
    if len(text) > MAX_TRACE_FILE_BYTES:  # it grew after the check
        raise ValidationError(
            field, f"trace file over the limit of {MAX_TRACE_FILE_BYTES} bytes", path
        )
    times: list[int] = []
    last = 0
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        where = f"{path}:{lineno}"
        if not line.isdigit():
            raise ValidationError(field, f"{where}: expected a whole number of milliseconds", raw)
        if len(line) > 10 or (t := int(line)) > MAX_TRACE_MS:
            raise ValidationError(field, f"{where}: more than {MAX_TRACE_MS} ms", raw)
        if t < last:
            raise ValidationError(
                field, f"{where}: times must not decrease (previous line had {last})", raw
            )
        last = t
        times.append(t)
        if len(times) > MAX_TRACE_ENTRIES:
            raise ValidationError(
                field, f"{where}: more than {MAX_TRACE_ENTRIES} delivery opportunities", path
            )
    if not times:
        raise ValidationError(field, f"{path}: the trace has no delivery opportunities", path)
    if times[-1] == 0:
        raise ValidationError(
            field, f"{path}: the last time must be positive (it is the trace's period)", path
        )
    return times
