"""Calibration steps that need no network: steal at rest, timer wake-up error, and
the busy processes other steps use as foreground load.

Busy processes are started here and ended here, by the PID this module got from
``Popen``, never by name.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from fidelnet.fidelity.profile import TimerError
from fidelnet.kernel import procfs

__all__ = ["BUSY", "busy", "percentile", "steal_at_rest", "timer_error"]

BUSY = ["sh", "-c", "while :; do :; done"]
"""One process that keeps one core busy (a shell builtin loop: no children)."""


def percentile(values: list[int], pct: float) -> int:
    """The ``pct`` percentile of ``values`` (nearest rank; 0 for none)."""
    if not values:
        return 0
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, math.ceil(pct / 100 * len(ordered)) - 1))
    return ordered[rank]


@contextmanager
def busy(count: int) -> Iterator[list[int]]:
    """``count`` busy processes on the host for the duration of the block; yields
    their PIDs."""
    procs = [
        subprocess.Popen(BUSY, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]
    try:
        yield [p.pid for p in procs]
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def steal_at_rest(seconds: float = 2.0) -> float:
    """Steal time of the whole machine over ``seconds`` of rest, % of its CPU time."""
    s0, t0 = procfs.steal_and_total_s()
    time.sleep(seconds)
    s1, t1 = procfs.steal_and_total_s()
    return 100 * (s1 - s0) / (t1 - t0) if t1 > t0 else 0.0


def timer_error(
    load: str, count: int = 1000, period_s: float = 0.001
) -> tuple[TimerError, list[int]]:
    """How late ``count`` sleeps of ``period_s`` wake up, ns (Mininet-HiFi 3.2), with
    ``load`` (``idle`` or ``busy``: one busy process per core beside it). Measured
    from Python, like fidelnet's own timers; returns the summary and every sample."""
    if load not in ("idle", "busy"):
        raise ValueError(f"load: must be idle or busy (got {load!r})")
    late: list[int] = []
    with busy((os.cpu_count() or 1) if load == "busy" else 0):
        if load == "busy":
            time.sleep(0.2)  # let the busy processes take their cores
        for _ in range(count):
            t0 = time.monotonic_ns()
            time.sleep(period_s)
            late.append(max(0, time.monotonic_ns() - t0 - int(period_s * 1e9)))
    summary = TimerError(
        load=load,
        count=len(late),
        p50_ns=percentile(late, 50),
        p99_ns=percentile(late, 99),
        max_ns=max(late, default=0),
    )
    return summary, late
