"""Cgroups for nodes: process tracking and CPU limits, on cgroup v1 and v2.

Every node gets a cgroup in the unified (v2) hierarchy, used to track and end all
of its processes at teardown (``cgroup.kill``), daemons included. A CPU-limited
node also gets CPU limits: ``cpu.max``/``cpuset.cpus`` where the v2 tree has those
controllers, else ``cpu.cfs_quota_us``/``cpuset.cpus`` in v1 hierarchies. A
real-time node (Mininet's ``sched='rt'``) also gets ``cpu.rt_runtime_us`` in the v1
cpu hierarchy (the only place the kernel offers real-time group scheduling).

Real-time bandwidth is per CPU: a group with runtime R per period P may run R/P of
*each* CPU it is on, and (the kernel's ``RT_RUNTIME_SHARE`` being off by default
since Linux 5.17) a CPU does not borrow another's runtime. Giving a node R/P =
``fraction`` on every core (Mininet's rule) gives it the share asked only when it
keeps every core busy: one busy process gets ``fraction / ncpus`` of the machine (on
two cores, a 10% limit gave 5%). So a real-time node runs on as few cores as hold its
share (:func:`realtime_cores`, unless ``cores`` are given) with ``fraction * ncpus /
len(cores)`` of each (:func:`rt_runtime_us`): its share of the machine is then
``fraction`` whatever number of processes it runs.

:class:`CgroupFS` holds the mount points, so tests can point it at a fake tree.
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from fidelnet.errors import KernelError, UnsupportedError, ValidationError

__all__ = [
    "CgroupFS",
    "CpuLimit",
    "CpuStat",
    "cpu_stat",
    "detect",
    "join",
    "kill_and_remove",
    "realtime_cores",
    "rt_runtime_us",
    "set_limit",
    "set_rt_runtime",
]


@dataclass(frozen=True)
class CpuLimit:
    """A CPU share (fraction of all cores, Mininet's ``cpu=``) and/or pinned cores."""

    fraction: float | None = None
    cores: tuple[int, ...] | None = None
    period_us: int = 100_000
    # Real-time (SCHED_RR) share: ``fraction`` of each period as RT runtime (cgroup v1).
    realtime: bool = False


@dataclass(frozen=True)
class CgroupFS:
    """Where the hierarchies are mounted (None when absent)."""

    unified: str | None  # the v2 mount point
    v1_cpu: str | None
    v1_cpuset: str | None
    ncpus: int

    def v2_controllers(self) -> set[str]:
        if self.unified is None:
            return set()
        try:
            with open(os.path.join(self.unified, "cgroup.controllers"), encoding="ascii") as f:
                return set(f.read().split())
        except OSError:
            return set()

    def node_dirs(self, run_id: str, node: str, limit: CpuLimit | None) -> list[str]:
        """The cgroup directories a node's processes join, tracking one first."""
        dirs = []
        if self.unified is not None:
            dirs.append(os.path.join(self.unified, f"fidelnet-{run_id}", node))
        if limit is not None:
            ctrls = self.v2_controllers()
            if limit.fraction is not None and "cpu" not in ctrls:
                if self.v1_cpu is None:
                    raise UnsupportedError(
                        "a cpu cgroup controller (v2 cpu.max or v1 cpu)",
                        f"{node}: cpu={limit.fraction}",
                    )
                dirs.append(os.path.join(self.v1_cpu, f"fidelnet-{run_id}", node))
            rt_file = os.path.join(self.v1_cpu or "", "cpu.rt_runtime_us")
            if limit.realtime and (self.v1_cpu is None or not os.path.exists(rt_file)):
                raise UnsupportedError(
                    "real-time group scheduling (cgroup v1 cpu.rt_runtime_us, "
                    "CONFIG_RT_GROUP_SCHED)",
                    f"{node}: sched='rt'",
                    "use sched='cfs'",
                )
            v1_dir = os.path.join(self.v1_cpu or "", f"fidelnet-{run_id}", node)
            if limit.realtime and v1_dir not in dirs:
                dirs.append(v1_dir)
            if limit.cores is not None and "cpuset" not in ctrls:
                if self.v1_cpuset is None:
                    raise UnsupportedError(
                        "a cpuset cgroup controller", f"{node}: cores={list(limit.cores)}"
                    )
                dirs.append(os.path.join(self.v1_cpuset, f"fidelnet-{run_id}", node))
        if not dirs:
            raise UnsupportedError("a cgroup hierarchy", f"{node}: process tracking")
        return dirs


def detect() -> CgroupFS:
    unified = None
    v1_cpu = None
    v1_cpuset = None
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            mnt = left.split()[4]
            fstype, _, opts = right.split()[:3]
            if fstype == "cgroup2" and unified is None:
                unified = mnt
            elif fstype == "cgroup":
                optset = set(opts.split(","))
                if "cpu" in optset and v1_cpu is None:
                    v1_cpu = mnt
                if "cpuset" in optset and v1_cpuset is None:
                    v1_cpuset = mnt
    return CgroupFS(unified, v1_cpu, v1_cpuset, os.cpu_count() or 1)


def _write(path: str, value: str) -> None:
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(value)
    except OSError as exc:
        raise KernelError(f"{path}: cannot write {value!r}: {exc}") from exc


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _is_v2(fs: CgroupFS, path: str) -> bool:
    return fs.unified is not None and path.startswith(fs.unified.rstrip("/") + "/")


def create(fs: CgroupFS, path: str, limit: CpuLimit | None) -> None:
    """Create ``path`` (and its run-level parent) and apply the limits it is for."""
    parent = os.path.dirname(path)
    v2 = _is_v2(fs, path)
    if not os.path.isdir(parent):
        os.makedirs(parent, exist_ok=True)
        if v2 and limit is not None:
            wanted = {"cpu", "cpuset"} & fs.v2_controllers()
            if wanted:
                ctl = " ".join("+" + c for c in sorted(wanted))
                _write(os.path.join(fs.unified or "", "cgroup.subtree_control"), ctl)
                _write(os.path.join(parent, "cgroup.subtree_control"), ctl)
    os.makedirs(path, exist_ok=True)
    if limit is None:
        return
    if limit.fraction is not None:
        quota = max(1000, round(limit.fraction * fs.ncpus * limit.period_us))
        if v2 and os.path.exists(os.path.join(path, "cpu.max")):
            _write(os.path.join(path, "cpu.max"), f"{quota} {limit.period_us}")
        elif os.path.exists(os.path.join(path, "cpu.cfs_quota_us")):
            _write(os.path.join(path, "cpu.cfs_period_us"), str(limit.period_us))
            _write(os.path.join(path, "cpu.cfs_quota_us"), str(quota))
    if limit.realtime and not v2:
        set_rt_runtime(path, limit, fs.ncpus)
    if limit.cores is not None:
        cpus = ",".join(str(c) for c in limit.cores)
        if os.path.exists(os.path.join(path, "cpuset.cpus")):
            if not v2:
                # v1 cpuset groups start empty: fill the run-level group from its parent,
                # and give the node group the same memory nodes.
                for key in ("cpuset.cpus", "cpuset.mems"):
                    if not _read(os.path.join(parent, key)):
                        _write(
                            os.path.join(parent, key),
                            _read(os.path.join(os.path.dirname(parent), key)),
                        )
                _write(
                    os.path.join(path, "cpuset.mems"), _read(os.path.join(parent, "cpuset.mems"))
                )
            _write(os.path.join(path, "cpuset.cpus"), cpus)


def realtime_cores(fraction: float, ncpus: int, index: int) -> tuple[int, ...]:
    """The cores a real-time node with ``fraction`` of the machine runs on when none
    are given: as few as hold the share, ``ceil(fraction * ncpus)``, consecutive from
    a start that moves on with each real-time node of the run (``index``), so their
    runtime is spread over the machine."""
    count = min(ncpus, max(1, math.ceil(fraction * ncpus - 1e-9)))
    start = (index * count) % ncpus
    return tuple(sorted((start + i) % ncpus for i in range(count)))


def rt_runtime_us(limit: CpuLimit, ncpus: int) -> int:
    """The real-time runtime per period, on each of its CPUs, of a group that may use
    ``fraction`` of all ``ncpus`` cores: ``fraction * ncpus / len(cores)`` of the
    period (``cores`` None: every core, ``fraction`` of each). More than a whole
    period per CPU cannot be given: the cores are too few for the share."""
    fraction = limit.fraction or 0.0
    on = len(limit.cores) if limit.cores else ncpus
    runtime = round(fraction * ncpus / on * limit.period_us)
    if runtime > limit.period_us:
        raise ValidationError(
            "cores",
            f"a real-time share of {fraction:g} of {ncpus} cores needs at least "
            f"{math.ceil(fraction * ncpus - 1e-9)} of them",
            list(limit.cores or ()),
        )
    return runtime


def set_rt_runtime(path: str, limit: CpuLimit, ncpus: int) -> None:
    """Give a v1 cpu group its real-time runtime (Mininet's ``sched='rt'``;
    :func:`rt_runtime_us`), raising its run-level parent's runtime first by the
    difference: the kernel refuses children that together get more than their
    parent."""
    runtime_file = os.path.join(path, "cpu.rt_runtime_us")
    if not os.path.exists(runtime_file):
        return
    parent = os.path.dirname(path)
    new = rt_runtime_us(limit, ncpus)
    old_ratio = int(_read(runtime_file)) / int(_read(os.path.join(path, "cpu.rt_period_us")))
    new_ratio = new / limit.period_us
    p_period = int(_read(os.path.join(parent, "cpu.rt_period_us")))
    p_runtime = int(_read(os.path.join(parent, "cpu.rt_runtime_us")))
    wanted = p_runtime + math.ceil((new_ratio - old_ratio) * p_period)
    if new_ratio > old_ratio:
        try:
            _write(os.path.join(parent, "cpu.rt_runtime_us"), str(wanted))
        except KernelError as exc:
            # The kernel admits real-time groups whose shares of a CPU add up to at
            # most kernel.sched_rt_runtime_us / sched_rt_period_us, whatever CPUs each
            # runs on.
            on = len(limit.cores) if limit.cores else ncpus
            raise KernelError(
                f"{os.path.basename(path)}: a real-time share of {limit.fraction or 0:g} of "
                f"{ncpus} cores is {new_ratio:.0%} of each of {on} core(s) (real-time "
                f"runtime is per CPU), and with it this run's real-time nodes would need "
                f"{wanted / p_period:.0%} of a CPU's real-time budget, more than the kernel "
                "admits (kernel.sched_rt_runtime_us, less what other groups hold): ask "
                "for less, or use sched='cfs'"
            ) from exc
    _write(runtime_file, "0")
    _write(os.path.join(path, "cpu.rt_period_us"), str(limit.period_us))
    _write(runtime_file, str(new))
    if new_ratio < old_ratio:
        _write(os.path.join(parent, "cpu.rt_runtime_us"), str(max(0, wanted)))


def set_limit(fs: CgroupFS, path: str, limit: CpuLimit) -> None:
    """Rewrite the CPU limits of an existing cgroup; a part that is None is lifted."""
    v2 = _is_v2(fs, path)
    if v2 and os.path.exists(os.path.join(path, "cpu.max")):
        quota = "max"
        if limit.fraction is not None:
            quota = str(max(1000, round(limit.fraction * fs.ncpus * limit.period_us)))
        _write(os.path.join(path, "cpu.max"), f"{quota} {limit.period_us}")
    elif not v2 and os.path.exists(os.path.join(path, "cpu.cfs_quota_us")):
        quota = "-1"
        if limit.fraction is not None:
            quota = str(max(1000, round(limit.fraction * fs.ncpus * limit.period_us)))
        _write(os.path.join(path, "cpu.cfs_period_us"), str(limit.period_us))
        _write(os.path.join(path, "cpu.cfs_quota_us"), quota)
    if limit.realtime and not v2:
        set_rt_runtime(path, limit, fs.ncpus)
    cpus_file = os.path.join(path, "cpuset.cpus")
    if os.path.exists(cpus_file):
        if limit.cores is not None:
            cpus = ",".join(str(c) for c in limit.cores)
        else:  # all the parent allows
            parent = os.path.join(os.path.dirname(path), "cpuset.cpus")
            cpus = _read(parent) if not v2 else ""
        _write(cpus_file, cpus)


def join(path: str, pids_: list[int]) -> None:
    """Move processes into the cgroup at ``path`` (ones that are gone are skipped)."""
    for pid in pids_:
        try:
            with open(os.path.join(path, "cgroup.procs"), "w", encoding="ascii") as f:
                f.write(str(pid))
        except ProcessLookupError:
            continue
        except OSError as exc:
            raise KernelError(f"{path}: cannot move process {pid} in: {exc}") from exc


def pids(path: str) -> list[int]:
    try:
        return [int(x) for x in _read(os.path.join(path, "cgroup.procs")).split()]
    except OSError:
        return []


def kill_and_remove(
    path: str, timeout: float = 5.0, seen: Callable[[int], object] | None = None
) -> None:
    """End every process in the cgroup, then remove it (and its run-level parent if
    empty). ``seen`` is called with each pid found in it before it is killed (a
    :class:`~fidelnet.kernel.procwait.Ending` holds them to wait until they are gone:
    a process leaves ``cgroup.procs`` when it exits, before it is reaped)."""
    if not os.path.isdir(path):
        return
    kill_file = os.path.join(path, "cgroup.kill")
    deadline = time.monotonic() + timeout
    while True:
        procs = pids(path)
        if not procs:
            break
        if seen is not None:
            for pid in procs:
                seen(pid)
        if os.path.exists(kill_file):
            with contextlib.suppress(OSError):
                _write(kill_file, "1")
        else:
            for pid in procs:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        if time.monotonic() > deadline:
            raise KernelError(f"{path}: processes {procs} survive SIGKILL")
        time.sleep(0.002)
    while True:
        try:
            os.rmdir(path)
            break
        except FileNotFoundError:
            break
        except OSError as exc:
            if time.monotonic() > deadline:
                raise KernelError(f"{path}: cannot remove: {exc}") from exc
            time.sleep(0.002)
    with contextlib.suppress(OSError):
        os.rmdir(os.path.dirname(path))


@dataclass(frozen=True)
class CpuStat:
    """CFS bandwidth counters of one cgroup (v1 ``cpu.stat`` or v2 ``cpu.stat``), and
    its PSI ``some`` total where the v2 tree has ``cpu.pressure``."""

    periods: int = 0
    throttled_periods: int = 0
    throttled_s: float = 0.0
    usage_s: float | None = None
    pressure_us: int | None = None


def cpu_stat(paths: list[str]) -> CpuStat:
    """The CPU counters of a node from its cgroup directories (the v1 cpu one has the
    CFS counters when limits live in v1; the v2 one has usage and pressure)."""
    periods = throttled = 0
    throttled_s = 0.0
    usage: float | None = None
    pressure: int | None = None
    for path in paths:
        try:
            text = _read(os.path.join(path, "cpu.stat"))
        except OSError:
            text = ""
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            try:
                n = int(value)
            except ValueError:
                continue
            if key == "nr_periods":
                periods = max(periods, n)
            elif key == "nr_throttled":
                throttled = max(throttled, n)
            elif key == "throttled_time":  # v1, ns
                throttled_s = max(throttled_s, n / 1e9)
            elif key == "throttled_usec":  # v2
                throttled_s = max(throttled_s, n / 1e6)
            elif key == "usage_usec":
                usage = n / 1e6
        with contextlib.suppress(OSError, ValueError):
            for line in _read(os.path.join(path, "cpu.pressure")).splitlines():
                if line.startswith("some "):
                    for field in line.split()[1:]:
                        if field.startswith("total="):
                            pressure = int(field[6:])
        if usage is None:
            with contextlib.suppress(OSError, ValueError):
                usage = int(_read(os.path.join(path, "cpuacct.usage"))) / 1e9
    return CpuStat(periods, throttled, throttled_s, usage, pressure)
