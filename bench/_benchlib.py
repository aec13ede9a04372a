"""Helpers shared by the benchmark side scripts; standard library only.

Both sides import this module: ``fidelnet_side.py`` under the project's
virtualenv and ``peer_mininet.py`` under Debian's ``/usr/bin/python3`` (where the
``mininet`` package lives), so it must not import fidelnet or anything outside the
standard library.

What it measures:

- :func:`mem_available_kib`: ``MemAvailable`` from ``/proc/meminfo``.
- :func:`snapshot_pids` and :func:`started_processes`: the processes that appeared
  since a snapshot and that belong to this run (descendants of this process, and
  orphans reparented to init that a side-specific test claims), with their resident
  and proportional set sizes (:func:`process_summary`).
- :func:`root_links` and :func:`named_netns`: interface names in the host network
  namespace and names in ``ip netns list``, to see what a run added and whether it
  left anything behind.
- :func:`idle_settle`: wait, then sample ``MemAvailable`` a few times and keep the
  median and the spread, since single readings jitter by a few hundred kB.
- :func:`memory_fields`: the before/idle pair as MiB per node, with its noise.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import statistics
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

PAGE_KIB = resource.getpagesize() // 1024
PF_KTHREAD = 0x00200000


def mem_available_kib() -> int:
    """``MemAvailable`` in KiB."""
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/meminfo: no MemAvailable line")


def mem_total_kib() -> int:
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    raise RuntimeError("/proc/meminfo: no MemTotal line")


def idle_settle(seconds: float, samples: int = 5, interval: float = 0.1) -> tuple[int, int]:
    """Sleep ``seconds``, then read MemAvailable ``samples`` times ``interval`` apart;
    return the median and the spread (max - min) of the readings, in KiB. Single
    readings jitter by hundreds of kB, more when other jobs run on the machine: the
    spread is reported as the noise of the memory figure."""
    time.sleep(seconds)
    readings = []
    for i in range(samples):
        if i:
            time.sleep(interval)
        readings.append(mem_available_kib())
    return int(statistics.median(readings)), max(readings) - min(readings)


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    comm: str
    rss_kib: int
    kthread: bool


def _read_proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            stat = f.read()
        with open(f"/proc/{pid}/statm", encoding="ascii") as f:
            statm = f.read().split()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # comm is in parentheses and may itself hold spaces or parentheses.
    lpar, rpar = stat.index("("), stat.rindex(")")
    comm = stat[lpar + 1 : rpar]
    rest = stat[rpar + 2 :].split()
    ppid = int(rest[1])
    flags = int(rest[6])
    return Proc(pid, ppid, comm, int(statm[1]) * PAGE_KIB, bool(flags & PF_KTHREAD))


def snapshot_pids() -> dict[int, Proc]:
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            p = _read_proc(int(entry))
            if p is not None:
                procs[p.pid] = p
    return procs


def started_processes(
    before: dict[int, Proc], adopt: Callable[[Proc], bool] | None = None
) -> list[Proc]:
    """User-space processes alive now that were not in ``before`` and that this run
    started: descendants of this process, and orphans (whose parent chain reaches
    init without passing through a process that existed before, as daemonised
    children do) for which ``adopt`` says yes. Without ``adopt`` orphans are not
    counted: on a shared machine other people's jobs look just like them."""
    me = os.getpid()
    now = snapshot_pids()
    ours = []
    for p in now.values():
        if p.pid in before or p.pid == me or p.kthread:
            continue
        q: Proc | None = p
        for _ in range(64):  # bounded walk up the parent chain
            assert q is not None
            if q.ppid == me:
                ours.append(p)
                break
            if q.ppid in (0, 1):
                if adopt is not None and adopt(p):
                    ours.append(p)
                break
            if q.ppid in before:  # started by something that was already running
                break
            q = now.get(q.ppid)
            if q is None:
                break
    return sorted(ours, key=lambda p: p.pid)


def cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return []


def netns_inode(pid: int) -> int | None:
    """Inode of the network namespace ``pid`` lives in."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None


def named_netns_inodes(prefix: str) -> set[int]:
    """Inodes of the namespaces ``ip netns`` lists under names starting with
    ``prefix``."""
    inodes = set()
    for name in named_netns():
        if name.startswith(prefix):
            with contextlib.suppress(FileNotFoundError):
                inodes.add(os.stat(f"/run/netns/{name}").st_ino)
    return inodes


def pss_kib(pid: int) -> int:
    """Proportional set size (shared pages divided among their users); 0 if gone."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", encoding="ascii") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def process_summary(procs: list[Proc]) -> dict[str, object]:
    """Count, RSS sum, PSS sum (RSS counts shared libraries once per process, PSS
    splits them) and a count per command name."""
    by_comm: dict[str, int] = {}
    for p in procs:
        by_comm[p.comm] = by_comm.get(p.comm, 0) + 1
    return {
        "count": len(procs),
        "rss_sum_kib": sum(p.rss_kib for p in procs),
        "pss_sum_kib": sum(pss_kib(p.pid) for p in procs),
        "by_comm": dict(sorted(by_comm.items())),
    }


def root_links_with_alias() -> dict[str, str]:
    """Interface name to alias ("" if none) in this process's network namespace
    (the host's)."""
    out = subprocess.run(
        ["ip", "-j", "link", "show"], check=True, capture_output=True, text=True
    ).stdout
    return {link["ifname"]: link.get("ifalias", "") for link in json.loads(out or "[]")}


def root_links() -> set[str]:
    """Interface names in this process's network namespace (the host's)."""
    return set(root_links_with_alias())


def named_netns() -> set[str]:
    """Names listed by ``ip netns list``."""
    out = subprocess.run(
        ["ip", "-j", "netns", "list"], check=True, capture_output=True, text=True
    ).stdout
    return {ns["name"] for ns in json.loads(out or "[]")}


def sampling(settle: float) -> dict[str, Any]:
    """Sampling for a given settle time: quick runs take fewer, closer readings."""
    if settle < 1.0:
        return {"samples": 3, "interval": 0.05}
    return {"samples": 5, "interval": 0.1}


def memory_fields(
    before: tuple[int, int], idle: tuple[int, int], nodes: int
) -> dict[str, float | int]:
    """Result fields for the memory of an idle network of ``nodes`` nodes."""
    noise = max(before[1], idle[1])
    return {
        "mem_available_before_kib": before[0],
        "mem_available_idle_kib": idle[0],
        "mem_noise_kib": noise,
        "mem_per_node_mib": (before[0] - idle[0]) / 1024 / nodes,
        "mem_noise_per_node_mib": noise / 1024 / nodes,
    }


def kernel_release() -> str:
    return os.uname().release


def emit(result: dict[str, object], as_json: bool) -> None:
    """Print the result: one JSON line (last line of stdout) or a short text form."""
    if as_json:
        print(json.dumps(result, sort_keys=True), flush=True)
        return
    for key in (
        "side",
        "topo",
        "nodes",
        "build_s",
        "teardown_s",
        "mem_per_node_mib",
        "root_links_added",
        "leaks",
        "check_loss_pct",
        "error",
    ):
        if key in result:
            print(f"{key:>18}: {result[key]}")
    procs = result.get("processes")
    if isinstance(procs, dict):
        print(
            f"{'processes':>18}: {procs['count']}, "
            f"RSS sum {procs['rss_sum_kib'] / 1024:.1f} MiB, "
            f"PSS sum {procs['pss_sum_kib'] / 1024:.1f} MiB"
        )


def kernel_cleanup_busy(proc: str = "/proc") -> bool:
    """A kernel worker is running namespace cleanup now (its comm reads
    ``kworker/...+netns``); the same test as ``fidelnet.kernel.nscleanup.busy``,
    repeated here because the peer side cannot import fidelnet."""
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        try:
            with open(f"{proc}/{entry}/comm", encoding="utf-8") as f:
                comm = f.read()
        except OSError:
            continue
        if comm.startswith("kworker/") and "+netns" in comm:
            return True
    return False


def wait_kernel_cleanup(timeout: float = 900.0, settle: float = 0.06) -> float | None:
    """Seconds until the kernel's namespace cleanup was last seen running, once it has
    been idle for ``settle``; None if it still ran after ``timeout``."""
    start = time.monotonic()
    last = start
    seen = False
    while True:
        now = time.monotonic()
        if kernel_cleanup_busy():
            last, seen = now, True
        elif now - last >= settle:
            return (last - start) if seen else 0.0
        if now - start > timeout:
            return None
        time.sleep(0.02)
