"""Start processes inside nodes through ``fidelnet-exec`` (argv lists only).

``fidelnet-exec`` is the project's small Rust launcher (``crates/fnexec``): it joins
a node's cgroups and namespaces and then execs the given argv. This module only
finds it and assembles its argument list; no string is ever handed to a shell.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from fidelnet.errors import NodeError

__all__ = ["MountTemplate", "exec_argv", "find_exec"]

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
    mount_base: str | None = None,
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
        if mount_base:
            out += ["--mount-base", mount_base]
    if hostname:
        out += ["--hostname", hostname]
    if cwd:
        out += ["--cwd", cwd]
    out.append("--")
    out += [str(a) for a in argv]
    return out


class MountTemplate:
    """A mount namespace to copy node mount namespaces from, held by a descriptor.

    Each node's shell gets mount and UTS namespaces of its own (``--new-mount``), and
    the kernel copies every mount of the namespace it starts from: in the caller's,
    that includes the bind mount of every node's network namespace file, so a shell
    cost time in proportion to the nodes (measured: 0.3 ms to make the namespace with
    73 mounts, 4.6 ms with 1,023; docs/scale.md). The template is a copy of the
    caller's mounts made before the run's namespaces exist, made private so that
    nothing mounted later propagates into it; shells copy it instead
    (``--mount-base``). Nodes therefore do not see mounts made after it: the run's
    own namespace files, and anything the user mounts on the host later.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.path = f"/proc/{os.getpid()}/fd/{fd}"

    @classmethod
    def create(cls, record: Callable[[int], None]) -> MountTemplate:
        """Make the template: a short-lived ``fidelnet-exec --new-mount`` process
        whose mount namespace this process keeps open. ``record`` is called with the
        process's pid as soon as it exists."""
        cat = shutil.which("cat") or "/bin/cat"
        proc = subprocess.Popen(
            [find_exec(), "--new-mount", "--", cat],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            close_fds=True,
        )
        try:
            record(proc.pid)
            fd = _wait_for_setup(proc, os.path.realpath(cat))
        finally:
            assert proc.stdin is not None
            proc.stdin.close()
            proc.wait()
        return cls(fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def _wait_for_setup(proc: subprocess.Popen[bytes], program: str, timeout: float = 10.0) -> int:
    """Once ``fidelnet-exec`` has exec'd ``program`` (so its namespaces are set up,
    the private remount included), open the process's mount namespace and return
    the descriptor."""
    deadline = time.monotonic() + timeout
    while proc.poll() is None:
        with contextlib.suppress(OSError):
            if os.readlink(f"/proc/{proc.pid}/exe") == program:
                return os.open(f"/proc/{proc.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        if time.monotonic() > deadline:
            break
        time.sleep(0.001)
    raise NodeError(
        f"fidelnet-exec: could not make the mount namespace template (exit code {proc.poll()})"
    )
