"""Waiting until the processes a teardown ended are gone: exited, and reaped.

A process sent SIGKILL is not gone at once. It first *exits*: the kernel closes its
files (TAP devices, sockets), drops its namespaces and leaves its cgroup; one that
closes devices under the RTNL lock can spend a second in that (state ``D``). It is
then a *zombie* until its parent reaps it, and its ``/proc`` entry stays. After a
crash of a run's owner the run's processes are orphans: their parent is PID 1 (or
the nearest child subreaper), which reaps on its own schedule; on the CI machine,
whose PID 1 looks for orphans periodically, 1.0 to 2.0 s after the exit (measured).

:class:`Ending` holds the processes a teardown ends, and :meth:`Ending.wait` returns
once every one is gone, or names those that are not when the bound has passed:

- each is held by a pidfd where the kernel has ``pidfd_open`` (Linux 5.3): signals
  reach exactly that process, the pidfd turns readable at its exit and, on recent
  kernels, reports ``POLLHUP`` when it is reaped, so the wait wakes at once;
- else by pid and start time (field 22 of ``/proc/PID/stat``), polled: a pid reused
  by a newer process is not taken for the one ended. With pidfds the start time is
  checked once, after the pidfd is open, which pins the identity for good.

A process is gone once no process has its pid (or a newer one does), or it is a
zombie whose reaping belongs to a parent listed in ``leave_to``: this process by
default, whose :class:`subprocess.Popen` objects reap their own children (reaping
them here would rob them of the exit status). A zombie this process adopted, as a
child subreaper during :meth:`Ending.adopting`, is reaped here. Every other zombie
is waited for: its ``/proc`` entry is still a process of the run.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from fidelnet.kernel import _libc

__all__ = [
    "EXIT_TIMEOUT",
    "Ending",
    "ProcStat",
    "Straggler",
    "Waited",
    "cgroup_path",
    "children",
    "read_stat",
]

PROC = "/proc"
EXIT_TIMEOUT = 10.0
"""How long a teardown waits for the processes it ended (s): several times the
longest wait measured (PID 1 reaping orphans 2.0 s after they died)."""
TICK = 0.02
"""Longest sleep between looks: what the wait costs where no pidfd wakes it."""

_STATES = {
    "R": "running",
    "S": "sleeping",
    "D": "disk sleep",
    "T": "stopped",
    "t": "tracing stop",
    "Z": "zombie",
    "X": "dead",
    "I": "idle",
}


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/PID/stat`` the wait looks at."""

    pid: int
    comm: str
    state: str
    ppid: int
    start: int
    """Start time in clock ticks since boot (field 22)."""

    @property
    def zombie(self) -> bool:
        return self.state in ("Z", "X")


def read_stat(pid: int, proc: str = PROC) -> ProcStat | None:
    """``/proc/PID/stat`` of ``pid``, or None when there is no such process."""
    try:
        with open(os.path.join(proc, str(pid), "stat"), "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    head, paren, tail = data.rpartition(b")")
    fields = tail.split()
    if not paren or len(fields) < 20:
        return None
    try:
        return ProcStat(
            pid,
            head.partition(b"(")[2].decode(errors="replace"),
            fields[0].decode(errors="replace"),
            int(fields[1]),
            int(fields[19]),
        )
    except ValueError:
        return None


def children(pid: int, proc: str = PROC) -> set[int]:
    """The pids whose parent is ``pid``: from its threads' ``children`` files, else
    (a kernel without ``CONFIG_PROC_CHILDREN``) from every process's parent."""
    out: set[int] = set()
    found = False
    try:
        tids = os.listdir(os.path.join(proc, str(pid), "task"))
    except OSError:
        tids = []
    for tid in tids:
        try:
            with open(os.path.join(proc, str(pid), "task", tid, "children"), "rb") as f:
                out.update(int(x) for x in f.read().split())
            found = True
        except (OSError, ValueError):
            continue
    if found:
        return out
    for entry in _pids(proc):
        st = read_stat(entry, proc)
        if st is not None and st.ppid == pid:
            out.add(entry)
    return out


def cgroup_path(pid: int, proc: str = PROC) -> str | None:
    """The unified-hierarchy (v2) cgroup of ``pid`` relative to its mount, as
    ``/proc/PID/cgroup`` shows it (``/fidelnet-ab12cd/h1``), zombies included; a
    removed cgroup's path loses its `` (deleted)`` mark. None without one."""
    try:
        with open(os.path.join(proc, str(pid), "cgroup"), encoding="utf-8") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].rstrip("\n").removesuffix(" (deleted)")
    except OSError:
        return None
    return None


def _pids(proc: str) -> list[int]:
    try:
        return [int(e) for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []


@dataclass(frozen=True)
class Straggler:
    """A process still there when the wait gave up."""

    pid: int
    comm: str
    state: str
    ppid: int
    after: float
    """Seconds waited."""

    def line(self) -> str:
        """One line: pid, command, state (and, for a zombie, who has not reaped it)."""
        name = _STATES.get(self.state, "unknown")
        zombie = self.state in ("Z", "X")
        what = f"{name}, not reaped by its parent {self.ppid}" if zombie else name
        return (
            f"process {self.pid} ({self.comm}) still exists {self.after:.1f} s after it "
            f"was ended: state {self.state} ({what})"
        )


@dataclass(frozen=True)
class Waited:
    """How a wait ended."""

    processes: int
    """Processes waited for."""
    seconds: float
    """From the start of the wait until the last was gone (or the bound passed)."""
    reaped_here: int
    """Adopted zombies this process reaped itself."""
    stragglers: tuple[Straggler, ...]
    """Those still there at the bound (empty: every one is gone)."""


@dataclass
class _Held:
    pid: int
    start: int
    fd: int  # its pidfd, -1 without


class Ending:
    """The processes a teardown ends, held until they are gone.

    ``leave_to``: parents (besides this process) whose zombie children count as
    gone, their reaping being the parent's (a live run's owner that `fidelnet clean
    --run` ends processes of). ``proc``, ``clock`` and ``sleep`` are for tests (a
    fake ``/proc`` turns pidfds off: they name real processes)."""

    def __init__(
        self,
        *,
        leave_to: Iterable[int] = (),
        proc: str = PROC,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._me = os.getpid()
        self._leave_to = {self._me, *leave_to}
        self._proc = proc
        self._pidfds = proc == PROC and hasattr(os, "pidfd_open")
        self._clock = clock
        self._sleep = sleep
        # Children that exist now are Popen's to reap; later ones may be adopted.
        self._own = children(self._me, proc)
        self._held: dict[tuple[int, int], _Held] = {}
        self._by_pid: dict[int, _Held] = {}
        self._reaped = 0
        self.waited: Waited | None = None
        """The result of the last :meth:`wait`."""

    def __len__(self) -> int:
        return len(self._held)

    # -- holding -----------------------------------------------------------------

    def track(
        self, pid: int, start: int | None = None, *, check: Callable[[int], bool] | None = None
    ) -> bool:
        """Hold process ``pid`` to wait for: the one that started at ``start`` (clock
        ticks after boot) when given, and only if ``check(pid)`` holds (checked after
        the pidfd is open, so the pidfd is that process). False when there is no
        such process."""
        known = self._by_pid.get(pid)
        # Not reaped yet: the pid is still that process's.
        if known and check is None and start in (None, known.start) and self._attached(known):
            return True
        fd = self._open(pid)
        if fd is None:
            return False
        st = read_stat(pid, self._proc)
        ok = (
            st is not None
            and (start is None or st.start == start)
            and (check is None or check(pid))
        )
        if st is None or not ok or (pid, st.start) in self._held:
            if fd >= 0:
                os.close(fd)
            return ok
        self._held[(pid, st.start)] = self._by_pid[pid] = _Held(pid, st.start, fd)
        return True

    @staticmethod
    def _attached(held: _Held) -> bool:
        """The held process is not reaped yet (known only through its pidfd)."""
        if held.fd < 0:
            return False
        try:
            signal.pidfd_send_signal(held.fd, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def _open(self, pid: int) -> int | None:
        """A pidfd for ``pid`` (-1 without pidfds), None when there is no such process."""
        if not self._pidfds:
            return -1
        try:
            return os.pidfd_open(pid)
        except ProcessLookupError:
            return None
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM):  # an old kernel, a seccomp filter
                self._pidfds = False
            return -1  # EINVAL (not a thread group leader): by /proc

    def kill(self, pid: int, start: int, *, group: bool = False) -> bool:
        """SIGKILL process ``pid`` if it is still the one that started at ``start``
        (with ``group``, its process group too when it leads one), and hold it.
        False when it was gone already (or the pid is another process's now)."""
        if not self.track(pid, start):
            return False
        if group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if os.getpgid(pid) == pid:
                    os.killpg(pid, signal.SIGKILL)
        self._signal(self._held[(pid, start)], signal.SIGKILL)
        return True

    def _signal(self, held: _Held, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if held.fd >= 0:
                signal.pidfd_send_signal(held.fd, sig)
                return
            st = read_stat(held.pid, self._proc)
            if st is not None and st.start == held.start:
                os.kill(held.pid, sig)

    def track_cgroup_members(self, paths: Iterable[str]) -> int:
        """Hold every process whose v2 cgroup (relative to the mount, as
        :func:`cgroup_path` gives it) is one of ``paths`` or below: zombies too,
        which ``cgroup.procs`` no longer lists. Returns how many were found."""
        wanted = tuple({p.rstrip("/") for p in paths if p.strip("/")})
        if not wanted:
            return 0

        def member(pid: int) -> bool:
            cg = cgroup_path(pid, self._proc)
            return cg is not None and any(cg == w or cg.startswith(w + "/") for w in wanted)

        found = 0
        for pid in _pids(self._proc):
            if pid != self._me and member(pid) and self.track(pid, check=member):
                found += 1
        return found

    # -- waiting -----------------------------------------------------------------

    @contextlib.contextmanager
    def adopting(self) -> Iterator[None]:
        """Within the block this process adopts the orphans of its descendants (it is
        a child subreaper): a run's process whose parent dies in the teardown (a
        node shell's background job) becomes this process's child, and :meth:`wait`
        reaps it at once instead of waiting for PID 1. An unrelated orphan adopted
        in the block stays this process's child; keep the block short."""
        try:
            was = _libc.child_subreaper()
            if not was:
                _libc.set_child_subreaper(True)
        except OSError:
            was = True  # not allowed here: the block runs without
        try:
            yield
        finally:
            if not was:
                with contextlib.suppress(OSError):
                    _libc.set_child_subreaper(False)

    def _gone(self, held: _Held) -> bool:
        if held.fd >= 0 and not self._attached(held):
            return True  # reaped
        st = read_stat(held.pid, self._proc)
        if st is None or st.start != held.start:
            return True
        if not st.zombie:
            return False
        if st.ppid == self._me and held.pid not in self._own:
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(held.pid, os.WNOHANG)[0] == held.pid:
                    self._reaped += 1
            return True
        return st.ppid in self._leave_to

    def wait(self, timeout: float = EXIT_TIMEOUT) -> Waited:
        """Wait until every process held is gone, at most ``timeout`` seconds; the
        processes are let go either way (pidfds closed)."""
        began = self._clock()
        pending = list(self._held.values())
        total = len(pending)
        self._reaped = 0
        try:
            while True:
                pending = [h for h in pending if not self._gone(h)]
                elapsed = self._clock() - began
                if not pending or elapsed >= timeout:
                    break
                self._pause(pending, min(TICK, timeout - elapsed))
            elapsed = self._clock() - began
            stragglers = []
            for h in pending:
                st = read_stat(h.pid, self._proc)
                if st is not None and st.start == h.start:
                    stragglers.append(Straggler(h.pid, st.comm, st.state, st.ppid, elapsed))
        finally:
            self.close()
        self.waited = Waited(total, elapsed, self._reaped, tuple(stragglers))
        return self.waited

    def _pause(self, pending: list[_Held], seconds: float) -> None:
        """Sleep up to ``seconds``; with pidfds, wake at an exit or a reaping."""
        fds = [h for h in pending if h.fd >= 0]
        if not fds:
            self._sleep(seconds)
            return
        poller = select.poll()  # not select(2): a run holds thousands of descriptors
        for h in fds:
            st = read_stat(h.pid, self._proc)
            # An exited one stays readable: wait for its POLLHUP (reaped) instead.
            poller.register(h.fd, 0 if st is not None and st.zombie else select.POLLIN)
        poller.poll(max(1, int(seconds * 1000)))

    def close(self) -> None:
        """Let every process go (close the pidfds)."""
        for h in self._held.values():
            if h.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(h.fd)
        self._held.clear()
        self._by_pid.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()
