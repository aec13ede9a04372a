"""Start processes inside nodes through ``fidelnet-exec`` (argv lists only).

``fidelnet-exec`` is the project's small Rust launcher (``crates/fnexec``): it joins
a node's cgroups and namespaces and then execs the given argv. This module only
finds it and assembles its argument list; no string is ever handed to a shell.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from fidelnet.errors import NodeError

__all__ = ["ExecServer", "MountTemplate", "ServedProcess", "exec_argv", "find_exec"]

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
    unmounts: Sequence[str] = (),
) -> list[str]:
    """The full argv that runs ``argv`` inside a node; ``unmounts``: mounts the
    program must not see (detached in a mount namespace of its own)."""
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
    for path in unmounts:
        out += ["--unmount", path]
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


class ServedProcess:
    """A process an :class:`ExecServer` started, watched through a pidfd: the parts of
    :class:`subprocess.Popen` a node's shell uses. It is the server's child, not
    this process's, so its exit status is not known: :attr:`returncode` is -1 once
    it has exited."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None
        try:
            self._pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # already gone (and reaped)
            self._pidfd = -1
            self.returncode = -1

    def _readable(self, timeout: float | None) -> bool:
        # poll(2), not select(2): a run holds thousands of descriptors.
        p = select.poll()
        p.register(self._pidfd, select.POLLIN)
        return bool(p.poll(None if timeout is None else int(timeout * 1000)))

    def poll(self) -> int | None:
        if self.returncode is None and self._readable(0):
            self._exited()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._readable(timeout):
                raise subprocess.TimeoutExpired(str(self.pid), timeout or 0.0)
            self._exited()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, sig)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def _exited(self) -> None:
        self.returncode = -1
        os.close(self._pidfd)
        self._pidfd = -1

    def __del__(self) -> None:
        if getattr(self, "_pidfd", -1) >= 0:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)


class ExecServer:
    """``fidelnet-exec --serve``: one small process that forks and sets up every
    shell of a run (crates/fnexec/src/serve.rs). Starting a shell from this
    (large) Python process costs a fork of it and an exec of ``fidelnet-exec``
    before the exec of bash; served, it is a fork of the server and one exec
    (docs/scale.md). ``record`` gets the server's pid once it runs."""

    def __init__(self, record: Callable[[int], None]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [find_exec(), "--serve", str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                close_fds=True,
            )
        except OSError as exc:
            ours.close()
            raise NodeError(f"fidelnet-exec --serve: cannot start: {exc}") from exc
        finally:
            theirs.close()
        self.sock = ours
        self._lock = threading.Lock()
        record(self.proc.pid)

    def spawn(self, argv: Sequence[str], env: Mapping[str, str], fd: int | None) -> ServedProcess:
        """Start ``argv`` (a full :func:`exec_argv` list) with exactly ``env``, and
        ``fd`` (if any) as its stdin, stdout and stderr."""
        args = list(argv[1:])  # the launcher itself is the server
        payload = struct.pack("=I", len(args)) + b"".join(
            [a.encode() + b"\0" for a in args]
            + [f"{k}={v}".encode() + b"\0" for k, v in env.items()]
        )
        rights = (
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, struct.pack("i", fd))] if fd is not None else []
        )
        with self._lock:
            try:
                self.sock.sendmsg([payload], rights)
                reply = self.sock.recv(4)
            except OSError as exc:
                raise NodeError(f"fidelnet-exec --serve: {exc}") from exc
        if len(reply) != 4:
            raise NodeError(f"fidelnet-exec --serve exited (status {self.proc.poll()})")
        (pid,) = struct.unpack("=i", reply)
        if pid < 0:
            raise NodeError(
                f"fidelnet-exec --serve: cannot start {argv[-1]!r}: {os.strerror(-pid)}"
            )
        return ServedProcess(pid)

    def close(self) -> None:
        """End the server (the processes it started live on: their owners end them)."""
        self.sock.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
