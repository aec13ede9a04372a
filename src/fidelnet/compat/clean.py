"""Mininet's ``mininet.clean``: :func:`cleanup` and :class:`Cleanup`.

Unlike Mininet's ``mn -c``, which kills processes and deletes interfaces by name
pattern, this removes only what stale fidelnet runs own: runs whose owning
process is gone, read from their state files in ``/run/fidelnet``. Live runs,
other programs' namespaces and interfaces, and a real Mininet's leftovers are
left alone.
"""

from __future__ import annotations

from fidelnet.cleanup import clean_runs
from fidelnet.compat.log import error, info

__all__ = ["Cleanup", "cleanup"]


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
