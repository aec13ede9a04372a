"""Mininet's ``mininet.clean``: :func:`cleanup`, :class:`Cleanup`,
:func:`addCleanupCallback`, :func:`sh` and :func:`killprocs`.

Unlike Mininet's ``mn -c``, which kills processes and deletes interfaces by name
pattern, this removes only what stale fidelnet runs own: runs whose owning
process is gone, read from their state files in ``/run/fidelnet``. Live runs,
other programs' namespaces and interfaces, and a real Mininet's leftovers are
left alone. :func:`killprocs` likewise kills only processes fidelnet runs own
(their pid and start time are in the run's state) whose command line matches,
where Mininet's ``pkill -9 -f PATTERN`` hits every process on the machine.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess

from fidelnet.cleanup import clean_runs
from fidelnet.compat.log import error, info
from fidelnet.compat.util import decode
from fidelnet.kernel.state import list_runs, live_objects, process_running

__all__ = ["Cleanup", "addCleanupCallback", "cleanup", "killprocs", "sh"]


def sh(cmd: str) -> str:
    """Print a command and run it with ``/bin/sh -c`` (the caller's own text, as in
    Mininet); returns its output."""
    info(cmd + "\n")
    out = subprocess.run(["/bin/sh", "-c", cmd], stdout=subprocess.PIPE, check=False).stdout
    return decode(out)


def _owned_processes() -> list[int]:
    """Pids of live processes that fidelnet runs recorded (pid and start time)."""
    pids = []
    for run in list_runs():
        for rec in live_objects(run.path):
            if rec.get("kind") != "process":
                continue
            pid, start = rec.get("pid"), rec.get("start")
            if isinstance(pid, int) and isinstance(start, int) and process_running(pid, start):
                pids.append(pid)
    return pids


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def killprocs(pattern: str) -> list[int]:
    """Kill (SIGKILL) the processes fidelnet runs own whose command line matches the
    regular expression ``pattern`` (``pgrep -f``'s rule); returns their pids. Nothing
    fidelnet did not start is touched."""
    rx = re.compile(pattern)
    hits = [pid for pid in _owned_processes() if pid != os.getpid() and rx.search(_cmdline(pid))]
    for pid in hits:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
    return hits


class Cleanup:
    """Mininet's cleanup entry point, on fidelnet's ownership records."""

    callbacks: list[object] = []

    @classmethod
    def cleanup(cls) -> None:
        """Remove the namespaces, interfaces, cgroups and processes of stale fidelnet
        runs (and only those)."""
        info("*** Removing what stale fidelnet runs own\n")
        report = clean_runs()
        for line in report.lines:
            info(line + "\n")
        for problem in report.problems:
            error(f"*** {problem}\n")
        for callback in cls.callbacks:
            if callable(callback):
                callback()
        info("*** Cleanup complete.\n")

    @classmethod
    def addCleanupCallback(cls, callback: object) -> None:
        if callback not in cls.callbacks:
            cls.callbacks.append(callback)


cleanup = Cleanup.cleanup


addCleanupCallback = Cleanup.addCleanupCallback  # noqa: N816 - Mininet's name
