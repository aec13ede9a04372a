"""Precision claims on a busy machine.

A precision claim (the median departure within 10 µs of its deadline, a ping within
2 ms of the configured delay) holds when the run has its cores. On the shared 2-core
machines CI runs on, the hypervisor can take a core for tens of milliseconds at a
time (steal time, other tenants' bursts), and nothing a run does changes that. A test
of such a claim measures again, at most ``attempts`` times, and

- passes as soon as an attempt met the claim;
- fails when none did, and at least one of those ran on an undisturbed machine;
- is skipped, saying so, when none did and every attempt ran while the hypervisor
  stole at least ``STEAL_PCT`` of the CPU time (the monitor's own threshold for a
  degraded run), or on a machine that never settled: the claim could not be checked
  there, and is not counted as passed.

Before each attempt it waits (at most ``SETTLE_S``) for the CPUs to be ``QUIET_IDLE``
idle: the kernel may still be tearing down an earlier test's namespaces, and a
precision claim is about a run that has the machine.

Steal is counted by the kernel (``/proc/stat``), outside anything fidelnet measures,
so a regression of fidelnet's own (a late engine) never turns into a skip. Every
attempt's figures and steal are printed, and given in the failure message.

Steal is counted in 10 ms ticks and averaged over the attempt, so it misses the
disturbance a millisecond claim is most sensitive to: one late wake-up. On the VMs
CI runs on, a thread whose timer expires is run up to 10-20 ms late about once a
second per core (a timer probe at SCHED_FIFO on an idle machine), while the
average steal stays under 1 %. A test whose measurement records that disturbance
itself, measured against the instant the timer was armed for (the link engine's
``engine_woken_late``), passes ``disturbed``: an attempt it names is not counted as
undisturbed. A defect of the engine's own (a late release the machine did not
cause) is never named there, so it still fails.

Properties no load may break (nothing earlier than the model, nothing lost, nothing
left behind) are asserted inside ``measure`` on every attempt: they are never retried.

The same rule holds for every test as a whole (tests/conftest.py): a test that failed
while the hypervisor stole ``STEAL_PCT`` or more of the CPU time is run again, at
most ``STEAL_RERUNS`` times, from its fixtures up. A failure on an undisturbed
machine is final at once; when every attempt failed under steal, the test is
skipped with each attempt's steal and failure. A deterministic failure therefore
still fails wherever the machine is quiet for one attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from fidelnet.fidelity.thresholds import Thresholds

T = TypeVar("T")

ATTEMPTS = 3

STEAL_PCT = Thresholds().steal_degraded_pct
"""Steal during an attempt from which it counts as disturbed (5 %)."""


STEAL_RERUNS = 2
"""A test that failed while the hypervisor stole ``STEAL_PCT`` or more is run again
this many times (tests/conftest.py); see :func:`steal_since`."""


def steal_since(start: tuple[int, int]) -> float:
    """Percent of the CPU time the hypervisor stole since ``start`` (``_cpu_ticks()``)."""
    s1, t1 = _cpu_ticks()
    return 100.0 * (s1 - start[0]) / max(1, t1 - start[1])


def _cpu_ticks() -> tuple[int, int]:
    """(steal, total) jiffies of every CPU since boot, from /proc/stat."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    steal = fields[7] if len(fields) > 7 else 0
    return steal, sum(fields[:8])


QUIET_IDLE = 0.9
"""Idle share of the CPUs over half a second at which the machine has settled."""
SETTLE_S = 20.0


def _idle_ticks() -> tuple[int, int]:
    """(idle + iowait, total) jiffies of every CPU since boot."""
    with open("/proc/stat", encoding="ascii") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    return fields[3] + fields[4], sum(fields[:8])


def settle(limit_s: float = SETTLE_S) -> bool:
    """Wait until the CPUs are at least ``QUIET_IDLE`` idle over half a second (the
    kernel still tearing down an earlier test's namespaces, a daemon exiting), at most
    ``limit_s``; whether they got there."""
    deadline = time.monotonic() + limit_s
    while True:
        i0, t0 = _idle_ticks()
        time.sleep(0.5)
        i1, t1 = _idle_ticks()
        if (i1 - i0) / max(1, t1 - t0) >= QUIET_IDLE:
            return True
        if time.monotonic() >= deadline:
            return False


def precise(
    measure: Callable[[], T],
    miss: Callable[[T], str | None],
    attempts: int = ATTEMPTS,
    disturbed: Callable[[T], str | None] | None = None,
) -> T:
    """Run ``measure`` until ``miss`` (None when the claim holds, else what missed)
    passes, at most ``attempts`` times; the result that met the claim.
    ``disturbed`` (None, or what disturbed the attempt) names a disturbance the
    measurement itself recorded, beside steal."""
    missed: list[str] = []
    quiet = 0
    for i in range(1, attempts + 1):
        settled = settle()
        s0, t0 = _cpu_ticks()
        got = measure()
        s1, t1 = _cpu_ticks()
        steal = 100.0 * (s1 - s0) / max(1, t1 - t0)
        why = miss(got)
        busy = "" if settled else f", the CPUs not {QUIET_IDLE:.0%} idle within {SETTLE_S:g} s"
        seen = disturbed(got) if disturbed is not None and why is not None else None
        busy += f", disturbed: {seen}" if seen else ""
        print(f"attempt {i}: {'met' if why is None else why} (steal {steal:.1f} %{busy})")
        if why is None:
            return got
        quiet += steal < STEAL_PCT and settled and not seen
        missed.append(f"attempt {i} (steal {steal:.1f} %{busy}): {why}")
    if not quiet:
        pytest.skip(
            f"the claim could not be checked: in every attempt the hypervisor stole "
            f"{STEAL_PCT:g} % of the CPU time or more, the machine never settled "
            "before it, or the measurement recorded a disturbance of the machine's:\n"
            + "\n".join(missed)
        )
    raise AssertionError("the claim was missed every time:\n" + "\n".join(missed))
