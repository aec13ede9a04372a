"""What this machine lets one run hold: memory, file descriptors, tasks, namespaces.

:func:`machine` reads the numbers (no side effects); :func:`raise_nofile` lifts this
process's soft limit on open files towards its hard limit, which an unprivileged
process may do too. The arithmetic of what a topology needs lives in
:mod:`fidelnet.topology.footprint`.
"""

from __future__ import annotations

import contextlib
import os
import resource
from dataclasses import dataclass

__all__ = ["Machine", "machine", "raise_nofile"]


@dataclass(frozen=True)
class Machine:
    mem_available: int | None
    """Bytes (``MemAvailable``)."""
    nofile_soft: int
    nofile_hard: int
    """This process's limit on open file descriptors (``RLIMIT_NOFILE``);
    ``resource.RLIM_INFINITY`` is -1."""
    open_fds: int
    """File descriptors this process holds now."""
    pid_max: int | None
    """``kernel.pid_max``: tasks (processes and threads) on the machine at once."""
    tasks: int | None
    """Tasks that exist now (``/proc/loadavg``)."""
    max_net_namespaces: int | None
    """``user.max_net_namespaces`` of this user namespace."""


def _read_int(path: str, index: int = 0, sep: str | None = None) -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split(sep)[index])
    except (OSError, ValueError, IndexError):
        return None


def _mem_available(path: str = "/proc/meminfo") -> int | None:
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _tasks(path: str = "/proc/loadavg") -> int | None:
    """The total in ``running/total`` (the 4th field)."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().split()[3].split("/")[1])
    except (OSError, ValueError, IndexError):
        return None


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


def machine() -> Machine:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return Machine(
        mem_available=_mem_available(),
        nofile_soft=soft,
        nofile_hard=hard,
        open_fds=_open_fds(),
        pid_max=_read_int("/proc/sys/kernel/pid_max"),
        tasks=_tasks(),
        max_net_namespaces=_read_int("/proc/sys/user/max_net_namespaces"),
    )


def raise_nofile(wanted: int) -> int:
    """Raise the soft ``RLIMIT_NOFILE`` to at least ``wanted`` if the hard limit
    allows it (never lowers it); returns the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= wanted:
        return soft
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]
