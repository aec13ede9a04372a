"""``fidelnet clean``: remove what stale runs own, and nothing else.

A run is stale when the process that owns it (pid and start time in its state
file's header) is gone. Its objects are removed through the same teardown code a
normal stop uses, from its own records: no name patterns, no ``pkill``.

It is finished when it returns: every process it ended has exited and been reaped
(a crashed run's processes are orphans, which PID 1 reaps on its own schedule:
``clean`` waits for that, at most ``exit_timeout`` seconds, and says how long it
waited), nothing it removed is visible any more, and the kernel has freed the
namespaces it deleted (:mod:`fidelnet.kernel.nscleanup`). A process still there at
the bound is a problem, named in one line (pid, command, state).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fidelnet.kernel import nscleanup, procwait
from fidelnet.kernel.state import RunState, list_runs, live_objects
from fidelnet.kernel.teardown import remove_all

__all__ = ["CleanReport", "clean_runs"]


@dataclass
class CleanReport:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def clean_runs(
    force: set[str] | None = None,
    dry_run: bool = False,
    exit_timeout: float | None = None,
    kernel_timeout: float = 60.0,
) -> CleanReport:
    """Remove the objects of every stale run, plus the runs named in ``force``, and
    wait until they are gone (processes at most ``exit_timeout`` seconds, by default
    :data:`~fidelnet.kernel.procwait.EXIT_TIMEOUT`; the kernel's freeing of
    namespaces at most ``kernel_timeout``)."""
    force = force or set()
    if exit_timeout is None:
        exit_timeout = procwait.EXIT_TIMEOUT
    report = CleanReport()
    freed_netns = False
    for info in list_runs():
        alive = info.alive
        if alive and info.run_id not in force:
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
        # A live owner (``--run``) reaps its own children: those count as gone.
        ending = procwait.Ending(leave_to=[info.owner_pid] if alive else [])
        problems = remove_all(state, objs, ending=ending, exit_timeout=exit_timeout, whole_run=True)
        report.problems += [f"run {info.run_id}: {p}" for p in problems]
        state.close(remove=not problems)
        freed_netns = freed_netns or any(o["kind"] == "netns" for o in objs)
        waited = ending.waited
        if waited is not None and waited.processes:
            report.lines.append(
                f"run {info.run_id}: {waited.processes} processes ended, gone after "
                f"{waited.seconds:.2f} s"
            )
    if freed_netns:
        done = nscleanup.wait_idle(timeout=kernel_timeout)
        if not done.finished:
            report.problems.append(
                f"the kernel was still freeing network namespaces after {kernel_timeout:.0f} s"
            )
        elif done.seen:
            report.lines.append(f"the kernel freed the namespaces in {done.seconds:.2f} s")
    if not report.lines:
        report.lines.append("nothing to clean")
    return report
