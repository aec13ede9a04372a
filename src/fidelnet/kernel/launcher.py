"""Start processes inside nodes through ``fidelnet-exec`` (argv lists only).

``fidelnet-exec`` is the project's small Rust launcher (``crates/fnexec``): it joins
a node's cgroups and namespaces and then execs the given argv. This module only
finds it and assembles its argument list; no string is ever handed to a shell.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from fidelnet.errors import NodeError

__all__ = ["exec_argv", "find_exec"]

_cached: str | None = None


def find_exec() -> str:
    """Locate ``fidelnet-exec``: $FIDELNET_EXEC, next to the Python executable, the
    source tree's cargo build, or PATH."""
    global _cached
    if _cached:
        return _cached
    candidates = [os.environ.get("FIDELNET_EXEC", "")]
    candidates.append(str(Path(sys.executable).parent / "fidelnet-exec"))
    root = Path(__file__).resolve().parents[3]
    candidates += [
        str(root / "target" / "release" / "fidelnet-exec"),
        str(root / "target" / "debug" / "fidelnet-exec"),
    ]
    candidates.append(shutil.which("fidelnet-exec") or "")
    for c in candidates:
        if c and os.access(c, os.X_OK):
            _cached = c
            return c
    raise NodeError(
        "fidelnet-exec: launcher not found (run `make install`, or set FIDELNET_EXEC to "
        "the binary built by `cargo build --release -p fnexec`)"
    )


def exec_argv(
    argv: Sequence[str],
    *,
    netns: str | None = None,
    join_pid: int | None = None,
    new_mount: bool = False,
    hostname: str | None = None,
    cgroups: Sequence[str] = (),
    session: bool = False,
    ctty: bool = False,
    cwd: str | None = None,
) -> list[str]:
    """The full argv that runs ``argv`` inside a node."""
    if not argv:
        raise NodeError("empty command: nothing to run")
    out = [find_exec()]
    if session:
        out.append("--setsid")
    if ctty:
        out.append("--ctty")
    for cg in cgroups:
        out += ["--cgroup", os.path.join(cg, "cgroup.procs")]
    if join_pid is not None:
        out += ["--join-pid", str(join_pid)]
    elif netns is not None:
        out += ["--net", netns]
    if new_mount:
        out.append("--new-mount")
    if hostname:
        out += ["--hostname", hostname]
    if cwd:
        out += ["--cwd", cwd]
    out.append("--")
    out += [str(a) for a in argv]
    return out
