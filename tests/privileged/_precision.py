"""Precision claims on a busy machine.

A precision claim (the median departure within 10 µs of its deadline, a ping within
2 ms of the configured delay) holds when the run has its cores. On the shared 2-core
machines CI runs on, a neighbour can take a core for tens of milliseconds at a time
(the hypervisor's steal time, another tenant's burst), and nothing a run does changes
that. A test of such a claim measures again, at most ``attempts`` times, and fails
only when no attempt met it; every attempt's figures, and the steal time the kernel
counted during it, are printed, and given in the failure message.

Properties no load may break (nothing earlier than the model, nothing lost, nothing
left behind) are asserted inside ``measure`` on every attempt: they are never retried.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

ATTEMPTS = 3


def _cpu_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of every CPU since boot, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])


def precise(
    measure: Callable[[], T], miss: Callable[[T], str | None], attempts: int = ATTEMPTS
) -> T:
    """Run ``measure`` until ``miss`` (None when the claim holds, else what missed)
    passes, at most ``attempts`` times; the result that met the claim."""
    missed: list[str] = []
    for i in range(1, attempts + 1):
        s0, t0 = _cpu_ticks()
        got = measure()
        s1, t1 = _cpu_ticks()
        steal = 100.0 * (s1 - s0) / max(1, t1 - t0)
        why = miss(got)
        print(f"attempt {i}: {'met' if why is None else why} (steal {steal:.1f} %)")
        if why is None:
            return got
        missed.append(f"attempt {i} (steal {steal:.1f} %): {why}")
    raise AssertionError("the claim was missed every time:\n" + "\n".join(missed))
