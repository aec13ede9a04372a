"""Run ownership state: what a run created, written down before it is created.

Each run has an id (six hex digits) and a state file ``/run/fidelnet/<id>.jsonl``:
a header line naming the owning process (pid and kernel start time, so a reused
pid is not mistaken for the owner), then one JSON line per object, appended
*before* the object is made, and one ``gone`` line after an object is removed.
Teardown, rollback after a failed setup, and ``fidelnet clean`` for a crashed run
all read the same file and remove exactly what it lists, newest first.

Record kinds and their keys:

- ``netns``   ``name``                      a named network namespace
- ``link``    ``ifname``                    an interface in the host namespace,
                                            also marked with alias ``fidelnet:<id>``
- ``cgroup``  ``path``                      a cgroup directory (v1 or v2)
- ``process`` ``pid``, ``start``            a process leader (its group is ended too)
- ``sysctl``  ``path``, ``old``             a host sysctl changed; restored on teardown
- ``file``    ``path``                      a file the run made (linkd's socket and log)
- ``tree``    ``path``                      a directory under the state directory (OVS, a VM)
- ``tmpdir``  ``path``                      a measurement's scratch directory in the
                                            temporary directory, ``fidelnet-<id>-...``
- ``info``    any                           a note, nothing to remove (a link's backend)
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from fidelnet.errors import StateError

__all__ = [
    "STATE_DIR",
    "RunInfo",
    "RunState",
    "list_runs",
    "live_objects",
    "mark_for",
    "notes",
    "process_matches",
    "process_start_time",
]

STATE_DIR = "/run/fidelnet"
_SUFFIX = ".jsonl"


def mark_for(run_id: str) -> str:
    """The interface alias that marks an interface as owned by ``run_id``."""
    return f"fidelnet:{run_id}"


def process_start_time(pid: int) -> int | None:
    """The process's start time in clock ticks since boot, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[19])


def process_matches(pid: int, start: int) -> bool:
    """True when ``pid`` is still the same process that was recorded (not a reuse)."""
    return process_start_time(pid) == start


def process_running(pid: int, start: int) -> bool:
    """:func:`process_matches`, and not a zombie: a killed owner that its parent has
    not reaped yet owns nothing any more."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return False
    fields = data[data.rindex(b")") + 2 :].split()
    return int(fields[19]) == start and fields[0] not in (b"Z", b"X")


@dataclass(frozen=True)
class RunInfo:
    """A run found in the state directory."""

    run_id: str
    path: str
    owner_pid: int
    owner_start: int
    command: str
    created: float

    @property
    def alive(self) -> bool:
        return process_running(self.owner_pid, self.owner_start)


class RunState:
    """The append-only ownership record of one run."""

    def __init__(self, run_id: str, path: str, fd: int) -> None:
        self.run_id = run_id
        self.path = path
        self._fd = fd

    @classmethod
    def create(cls, run_id: str | None = None, command: str = "") -> RunState:
        os.makedirs(STATE_DIR, mode=0o755, exist_ok=True)
        for _ in range(100):
            rid = run_id or secrets.token_hex(3)
            path = os.path.join(STATE_DIR, rid + _SUFFIX)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileExistsError:
                if run_id is not None:
                    raise StateError(
                        f"run {run_id}: a state file already exists at {path}"
                    ) from None
                continue
            pid = os.getpid()
            state = cls(rid, path, fd)
            state._append(
                {
                    "kind": "run",
                    "run_id": rid,
                    "pid": pid,
                    "start": process_start_time(pid),
                    "command": command,
                    "created": time.time(),
                }
            )
            return state
        raise StateError("could not find a free run id")

    @classmethod
    def open_existing(cls, path: str) -> RunState:
        info = read_header(path)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        return cls(info.run_id, path, fd)

    def _append(self, record: dict[str, Any]) -> None:
        os.write(self._fd, (json.dumps(record, separators=(",", ":")) + "\n").encode())

    def record(self, kind: str, **fields: Any) -> None:
        """Write down an object before it is created."""
        self._append({"kind": kind, **fields})

    def gone(self, kind: str, **fields: Any) -> None:
        """Write down that an object no longer exists."""
        self._append({"kind": kind, "gone": True, **fields})

    def live_objects(self) -> list[dict[str, Any]]:
        return live_objects(self.path)

    def close(self, remove: bool) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if remove:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)


def _records(path: str) -> Iterator[dict[str, Any]]:
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except json.JSONDecodeError:
                    # A line cut short by a crash mid-write: everything before it stands.
                    if lineno == 1:
                        raise StateError(f"{path}:1: not a fidelnet state file") from None
                    return
    except FileNotFoundError as exc:
        raise StateError(f"{path}: no such state file") from exc


def _identity(rec: dict[str, Any]) -> tuple[Any, ...]:
    kind = rec["kind"]
    keys = {
        "netns": ("name",),
        "link": ("ifname",),
        "cgroup": ("path",),
        "file": ("path",),
        "tree": ("path",),
        "tmpdir": ("path",),
        "process": ("pid", "start"),
        "sysctl": ("path",),
        "sysctl_add": ("path",),
        "mount": ("path",),
        "overlay": ("path",),
        "container": ("root", "id"),
        "hostintf": ("ifname", "index"),
        "iptables": ("id",),
        "sriov": ("pf", "root"),
    }.get(kind, ())
    return (kind, *(rec.get(k) for k in keys))


def notes(path: str) -> list[dict[str, Any]]:
    """Every ``info`` record of the run in ``path`` (notes, not objects: each is kept,
    where :func:`live_objects` keeps one per identity)."""
    return [r for r in _records(path) if r.get("kind") == "info"]


def live_objects(path: str) -> list[dict[str, Any]]:
    """Objects recorded in ``path`` and not marked gone, in creation order."""
    live: dict[tuple[Any, ...], dict[str, Any]] = {}
    for rec in _records(path):
        if rec.get("kind") == "run":
            continue
        ident = _identity(rec)
        if rec.get("gone"):
            live.pop(ident, None)
        else:
            live.setdefault(ident, rec)
    return list(live.values())


def read_header(path: str) -> RunInfo:
    for rec in _records(path):
        if rec.get("kind") != "run":
            break
        return RunInfo(
            run_id=str(rec["run_id"]),
            path=path,
            owner_pid=int(rec["pid"]),
            owner_start=int(rec.get("start") or -1),
            command=str(rec.get("command", "")),
            created=float(rec.get("created", 0.0)),
        )
    raise StateError(f"{path}:1: not a fidelnet state file (no run header)")


def list_runs() -> list[RunInfo]:
    """Every run with a state file, alive or stale."""
    try:
        names = sorted(os.listdir(STATE_DIR))
    except FileNotFoundError:
        return []
    runs = []
    for name in names:
        if name.endswith(_SUFFIX):
            try:
                runs.append(read_header(os.path.join(STATE_DIR, name)))
            except StateError:
                continue
    return runs
