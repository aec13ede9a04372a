"""Wait for the kernel to finish freeing network namespaces.

Deleting a namespace returns at once: the kernel frees it later, in the ``cleanup_net``
work of its ordered ``netns`` workqueue, which holds the RTNL lock for long stretches.
Until that work is done, creating a namespace or a device waits for it. A run that
made hundreds of switches leaves seconds of it behind (each Linux bridge costs the
kernel an RCU barrier, about 16 ms here, in ``br_multicast_dev_del``), and the next
run pays for it: the time belongs to the run that made the objects.

The work is visible from user space: while a kernel worker runs an item of a
workqueue, its ``comm`` reads ``kworker/<id>+<workqueue>`` ("+": executing;
"-": idle, last ran that queue). So the cleanup is running exactly while some
``kworker/...+netns`` exists. :func:`wait_idle` polls for that and returns once it
has been absent for a settle time.

The settle time covers the two cases a single look cannot tell apart: the work has
not been picked up yet, and the work is already done. fidelnet ends every process
and closes every socket it had in a namespace before deleting it, so the kernel
queues the cleanup at the deletion itself and a worker picks it up within
microseconds; measured after ``stop()`` of ``linear,150`` and ``linear,300``, the
worker was already running at the first look. Namespaces other programs are freeing
at the same time are waited for too: they hold the same lock.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Cleanup", "busy", "wait_idle"]

PROC = "/proc"
MARK = "+netns"


def _candidates(proc: str) -> list[str]:
    """The PIDs to look at: kthreadd's children (every kernel worker is one), read
    from one file where the kernel lists them, else every process."""
    try:
        with open(os.path.join(proc, "2", "task", "2", "children"), encoding="ascii") as f:
            listed = f.read().split()
        if listed:
            return listed
    except OSError:
        pass
    try:
        return os.listdir(proc)
    except OSError:
        return []


def busy(proc: str = PROC) -> bool:
    """Is a kernel worker running the namespace cleanup now?"""
    for entry in _candidates(proc):
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "comm"), encoding="utf-8") as f:
                comm = f.read()
        except OSError:  # the task ended meanwhile
            continue
        if comm.startswith("kworker/") and MARK in comm:
            return True
    return False


@dataclass(frozen=True)
class Cleanup:
    """How a wait for the kernel's namespace cleanup ended."""

    seconds: float
    """From the start of the wait until the cleanup was last seen running (0 when it
    was never seen: it had finished, or had nothing to do)."""
    seen: bool
    """The cleanup was seen running at least once."""
    finished: bool
    """False: ``timeout`` passed with the cleanup still running."""


def wait_idle(
    timeout: float = 300.0,
    settle: float = 0.06,
    poll: float = 0.02,
    *,
    is_busy: Callable[[], bool] = busy,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> Cleanup:
    """Wait until the kernel's namespace cleanup has been idle for ``settle`` seconds,
    or ``timeout`` has passed; say how long it ran."""
    start = clock()
    last_busy: float | None = None
    quiet_since = start
    while True:
        now = clock()
        if is_busy():
            last_busy = now
            quiet_since = now
        elif now - quiet_since >= settle:
            return Cleanup(_since(start, last_busy), last_busy is not None, True)
        if now - start >= timeout:
            return Cleanup(now - start, last_busy is not None, False)
        sleep(poll)


def _since(start: float, last: float | None) -> float:
    return 0.0 if last is None else last - start
