"""Read-only facts from /proc and /sys: loaded modules, listening sockets, CPU time
per core, CPU pressure (PSI), a process's CPU time."""

from __future__ import annotations

import contextlib
import os

__all__ = [
    "cpu_pressure_us",
    "cpu_times",
    "loaded_modules",
    "mem_available_bytes",
    "module_loaded",
    "process_cpu_s",
    "steal_and_total_s",
    "tcp_listening",
    "thread_cpu_s",
]

_TCP_LISTEN = "0A"


def loaded_modules() -> str:
    """The text of ``/proc/modules`` (empty when unreadable)."""
    try:
        with open("/proc/modules", encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def module_loaded(name: str) -> bool:
    """Whether kernel module ``name`` is loaded (or built in with a sysfs entry)."""
    return os.path.isdir(os.path.join("/sys/module", name))


def tcp_listening(pid: int, port: int) -> bool:
    """Whether the network namespace of process ``pid`` has a TCP socket listening on
    ``port`` (IPv4 or IPv6)."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", encoding="ascii") as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if fields[3] == _TCP_LISTEN and local_port == port:
                        return True
        except (OSError, StopIteration, ValueError, IndexError):
            continue
    return False


_CLK_TCK = os.sysconf("SC_CLK_TCK")

# /proc/stat columns: user nice system idle iowait irq softirq steal guest guest_nice
CpuTimes = tuple[float, float, float, float, float, float, float]
"""Seconds per core: (user+nice, system, softirq, irq, steal, iowait, idle)."""


def cpu_times(text: str | None = None) -> dict[int, CpuTimes]:
    """Cumulative CPU time per core from ``/proc/stat`` (``text`` for tests)."""
    if text is None:
        with open("/proc/stat", encoding="ascii") as f:
            text = f.read()
    out: dict[int, CpuTimes] = {}
    for line in text.splitlines():
        if not line.startswith("cpu") or line.startswith("cpu "):
            continue
        parts = line.split()
        try:
            cpu = int(parts[0][3:])
            v = [int(x) / _CLK_TCK for x in parts[1:9]]
        except (ValueError, IndexError):
            continue
        v += [0.0] * (8 - len(v))
        user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
        out[cpu] = (user + nice, system, softirq, irq, steal, iowait, idle)
    return out


def busy_share(before: dict[int, CpuTimes], after: dict[int, CpuTimes]) -> dict[int, float]:
    """Per core, the share (0..1) of the time between two :func:`cpu_times` samples
    spent busy: user, system, interrupts, softirq and steal (not idle, not iowait)."""
    out: dict[int, float] = {}
    for cpu, b in before.items():
        a = after.get(cpu)
        if a is None:
            continue
        delta = [x - y for x, y in zip(a, b, strict=True)]
        total = sum(delta)
        out[cpu] = (total - delta[5] - delta[6]) / total if total > 0 else 0.0
    return out


def steal_and_total_s() -> tuple[float, float]:
    """Machine-wide (steal, all) CPU seconds so far."""
    times = cpu_times()
    return sum(t[4] for t in times.values()), sum(sum(t) for t in times.values())


def cpu_pressure_us(path: str = "/proc/pressure/cpu") -> int | None:
    """PSI ``some`` total (µs a runnable task waited for a CPU), or None without PSI
    (the kernel lacks it, or it was booted with it off)."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("some "):
                    for field in line.split()[1:]:
                        if field.startswith("total="):
                            return int(field[6:])
    except (OSError, ValueError):
        return None
    return None


def process_cpu_s(pid: int) -> float | None:
    """User plus system CPU seconds of process ``pid`` (None once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


def thread_cpu_s(pid: int, tid: int) -> float | None:
    """User plus system CPU seconds of thread ``tid`` of process ``pid``."""
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK
    except (OSError, ValueError, IndexError):
        return None


_POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE"}


def sched_policy(pid: int) -> tuple[str, int] | None:
    """The scheduling policy in force for process ``pid`` and its real-time priority
    (``("SCHED_FIFO", 10)``; priority 0 for the normal policies), from
    ``/proc/<pid>/stat`` fields 40 and 41; None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        rt_priority, policy = int(fields[37]), int(fields[38])
    except (OSError, ValueError, IndexError):
        return None
    return _POLICIES.get(policy, f"policy {policy}"), rt_priority


def mem_available_bytes(path: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` in bytes, or None when the kernel does not report it."""
    try:
        with open(path, encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def softnet_dropped(text: str | None = None) -> int:
    """Frames the kernel dropped because a CPU's input backlog was full (the second
    column of ``/proc/net/softnet_stat``, summed over CPUs): loss no interface counts.
    Veth pairs deliver through that backlog, so a burst of floods in a large broadcast
    domain can fill it."""
    if text is None:
        try:
            with open("/proc/net/softnet_stat", encoding="ascii") as f:
                text = f.read()
        except OSError:
            return 0
    total = 0
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 1:
            with contextlib.suppress(ValueError):
                total += int(fields[1], 16)
    return total


def netdev_max_backlog() -> int:
    """The size of each CPU's input backlog (``net.core.netdev_max_backlog``)."""
    try:
        with open("/proc/sys/net/core/netdev_max_backlog", encoding="ascii") as f:
            return max(1, int(f.read().strip()))
    except (OSError, ValueError):
        return 1000
