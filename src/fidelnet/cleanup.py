"""``fidelnet clean``: remove what stale runs own, and nothing else.

A run is stale when the process that owns it (pid and start time in its state
file's header) is gone. Its objects are removed through the same teardown code a
normal stop uses, from its own records: no name patterns, no ``pkill``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fidelnet.kernel.state import RunState, list_runs, live_objects
from fidelnet.kernel.teardown import remove_all

__all__ = ["CleanReport", "clean_runs"]


@dataclass
class CleanReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def clean_runs(force: set[str] | None = None, dry_run: bool = False) -> CleanReport:
    """Remove the objects of every stale run, plus the runs named in ``force``."""
    force = force or set()
    report = CleanReport()
    for info in list_runs():
        if info.alive and info.run_id not in force:
            continue
        objs = live_objects(info.path)
        what = ", ".join(
            f"{o['kind']} {o.get('name') or o.get('ifname') or o.get('path') or o.get('pid')}"
            for o in objs[:6]
        )
        more = f" and {len(objs) - 6} more" if len(objs) > 6 else ""
        report.lines.append(
            f"run {info.run_id} (pid {info.owner_pid}): {len(objs)} objects"
            f"{': ' + what + more if objs else ''}"
        )
        if dry_run:
            continue
        state = RunState.open_existing(info.path)
        problems = remove_all(state, objs)
        report.problems += [f"run {info.run_id}: {p}" for p in problems]
        state.close(remove=not problems)
    if not report.lines:
        report.lines.append("nothing to clean")
    return report
