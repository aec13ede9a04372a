"""Programs virtual time cannot reach, found as they start (issue 11).

A preload dilates only what calls libc's time functions. Static binaries (no
dynamic loader) and Go programs (their runtime reads the vDSO and makes its own
syscalls) run undilated. The clock shim checks every program a dilated process
starts (``shim/vt_exec.c``: execve, execvp, posix_spawn...) and appends
``unreached <pid> <static|go> <path>`` to the run's log (``FIDELNET_VT_LOG``). This
module reads it: each program once, as a warning naming it, and in every result's
provenance (:func:`fidelnet.measure.provenance.collect`). fidelnet's own launchers
(``fidelnet-exec``, ``fidelnet-vm``) are static on purpose and only start other
programs; they are not reported.
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass

__all__ = ["LAUNCHERS", "Unreached", "Watch", "parse"]

log = logging.getLogger("fidelnet")

LAUNCHERS = frozenset({"fidelnet-exec", "fidelnet-vm"})
"""fidelnet's own static programs that exec the real ones."""

_POLL_S = 0.5


@dataclass(frozen=True)
class Unreached:
    """A program a dilated node started that ran in real time."""

    path: str
    why: str  # "static" or "go"
    pid: int

    def describe(self) -> str:
        what = "a static binary" if self.why == "static" else "a Go program"
        return f"{self.path} ({what}: the clock shim cannot reach it, it ran undilated)"


def parse(text: str) -> list[Unreached]:
    """The log's entries, each program once (its first start), launchers left out."""
    out: dict[tuple[str, str], Unreached] = {}
    for line in text.splitlines():
        parts = line.split(" ", 3)
        if len(parts) != 4 or parts[0] != "unreached" or not parts[1].isdigit():
            continue
        _, pid, why, path = parts
        if os.path.basename(path) in LAUNCHERS:
            continue
        out.setdefault((path, why), Unreached(path, why, int(pid)))
    return list(out.values())


class Watch:
    """The run's log: made empty at ``path`` (the caller records it first), read
    every half second on a daemon thread while the file exists, each new program
    warned about once."""

    def __init__(self, path: str) -> None:
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666)
        os.fchmod(fd, 0o666)  # node processes may run as other users
        os.close(fd)
        self._seen: list[Unreached] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._run, name="vt-reach", daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(_POLL_S):
            if not os.path.exists(self.path):
                return
            self.poll()

    def poll(self) -> list[Unreached]:
        """Read the log now; every program found so far."""
        try:
            with open(self.path, encoding="utf-8", errors="replace") as f:
                found = parse(f.read())
        except OSError:
            found = []
        with self._lock:
            for u in found:
                if u not in self._seen and all(s.path != u.path for s in self._seen):
                    self._seen.append(u)
                    log.warning("virtual time: %s", u.describe())
            return list(self._seen)

    def stop(self) -> None:
        self._stop.set()
