"""A node's persistent shell, with Mininet's ``cmd`` semantics.

Mininet runs one interactive ``bash`` per node on a pseudo-terminal, so ``cd``,
variables and background jobs persist from one ``cmd`` to the next, and ``^C``
interrupts the foreground job. The prompt is the single byte 0x7f: seeing it means
the last command finished. A background command (``… &``) is followed by a
``printf`` of ``\\001<pid>\\n`` so its pid can be picked out of the output.

This class does the same, but the shell is started lazily (a node that never runs
a command never pays for a shell) and it is started through ``fidelnet-exec``, so
it enters the node's namespaces and cgroups before ``bash`` runs.
"""

from __future__ import annotations

import contextlib
import os
import pty
import re
import select
import subprocess
import termios
import time
from collections.abc import Callable, Mapping, Sequence

from fidelnet.errors import NodeError
from fidelnet.kernel.launcher import ServedProcess

__all__ = ["Shell", "Spawn", "finish_starting"]

Spawn = Callable[[Sequence[str], Mapping[str, str], int], ServedProcess]
"""Starts a full ``fidelnet-exec`` argv with an environment and a descriptor for its
stdio: :meth:`fidelnet.kernel.launcher.ExecServer.spawn`."""

PROMPT = "\x7f"
_PID_MARK = re.compile(r"\x01(\d+)\r?\n")
_JOB_LINE = re.compile(r"\[\d+\] \d+\r?\n")


class Shell:
    """One interactive bash on a pty, running inside a node."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str],
        *,
        wait: bool = True,
        spawn: Spawn | None = None,
    ) -> None:
        """Start ``argv`` (a full ``fidelnet-exec`` argv) on a new pty, with ``spawn``
        (an :class:`~fidelnet.kernel.launcher.ExecServer`'s) when given, else from
        this process."""
        self.name = name
        master, slave = pty.openpty()
        self.slave_name = os.ttyname(slave)  # the pty's terminal, /dev/pts/N
        attrs = termios.tcgetattr(slave)
        attrs[3] &= ~termios.ECHO  # lflag: no echo from the start
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        self.proc: subprocess.Popen[bytes] | ServedProcess
        try:
            if spawn is not None:
                self.proc = spawn(argv, env, slave)
            else:
                self.proc = subprocess.Popen(
                    list(argv),
                    stdin=slave,
                    stdout=slave,
                    stderr=slave,
                    close_fds=True,
                    env=env,
                )
        except (OSError, NodeError) as exc:
            os.close(master)
            raise NodeError(f"{name}: cannot start its shell: {exc}") from exc
        finally:
            os.close(slave)
        self.fd = master
        self.waiting = False
        self.last_pid: int | None = None
        self.last_cmd: str | None = None
        self._poller = select.poll()
        self._poller.register(self.fd, select.POLLIN)
        # Wait for the first prompt, then quiet the shell down as Mininet does
        # (with ``wait=False``, :func:`finish_starting` does it for many at once).
        self.waiting = True
        self.ready = False
        if wait:
            finish_starting([self])

    def _quiet(self) -> None:
        self.send("unset HISTFILE; set +m")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    # -- raw I/O --------------------------------------------------------------

    def readable(self, timeout_ms: int | None = None) -> bool:
        return bool(self._poller.poll(timeout_ms))

    def read(self, size: int = 4096) -> str:
        try:
            data = os.read(self.fd, size)
        except OSError:
            data = b""
        if not data and not self.alive():
            self.waiting = False
            code = self.proc.returncode
            known = f" with code {code}" if code is not None and code >= 0 else ""
            raise NodeError(f"{self.name}: shell exited{known}")
        return data.decode("utf-8", "replace")

    def write(self, text: str) -> None:
        os.write(self.fd, text.encode())

    # -- Mininet protocol -------------------------------------------------------

    def send(self, command: str) -> None:
        """Send a command without waiting for it (Mininet's ``sendCmd``)."""
        if self.waiting:
            raise NodeError(f"{self.name}: still waiting for output of {self.last_cmd!r}")
        if not re.search(r"\w", command):
            command = "echo -n"  # an empty line would not produce a prompt change
        self.last_cmd = command
        if command.rstrip().endswith("&"):
            command += ' printf "\\001%d\\012" $! '
        self.last_pid = None
        self.waiting = True
        self.write(command + "\n")

    def monitor(self, timeout_ms: int | None = None, find_pid: bool = True) -> str:
        """Return whatever output is ready (Mininet's ``monitor``)."""
        if not self.readable(timeout_ms):
            return ""
        data = self.read()
        if find_pid and "\x01" in data:
            data = _JOB_LINE.sub("", data)
            while not _PID_MARK.search(data):
                data += self.read()
            m = _PID_MARK.search(data)
            if m:
                self.last_pid = int(m.group(1))
            data = _PID_MARK.sub("", data)
        if PROMPT in data:
            self.waiting = False
            data = data.replace(PROMPT, "")
        return data

    def wait_output(self, find_pid: bool = True) -> str:
        out = []
        while self.waiting:
            out.append(self.monitor(find_pid=find_pid))
        return "".join(out)

    def run(self, command: str) -> str:
        self.send(command)
        return self.wait_output()

    def interrupt(self) -> None:
        """Send ^C to the foreground job (Mininet's ``sendInt``)."""
        self.write("\x03")

    def kill(self) -> None:
        """Send the shell's process group SIGKILL without waiting (:meth:`close`
        reaps it): ending many shells, kill them all first, then close each."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, 9)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)
        self.fd = -1
        self.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def finish_starting(shells: Sequence[Shell], timeout: float = 60.0) -> None:
    """Finish starting shells made with ``wait=False``: wait for each one's first
    prompt, quiet it down, wait for its next prompt; all at once, so one shell's
    start-up (``fidelnet-exec`` entering the namespaces, then ``bash``) overlaps
    the others'."""
    by_fd = {sh.fd: sh for sh in shells if not sh.ready}
    poller = select.poll()
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    quieted: set[int] = set()
    deadline = time.monotonic() + timeout
    while by_fd:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            names = ", ".join(sorted(sh.name for sh in by_fd.values()))
            raise NodeError(f"shells did not start within {timeout:.0f} s: {names}")
        for fd, _event in poller.poll(left_ms):
            sh = by_fd[fd]
            sh.monitor(timeout_ms=0, find_pid=False)
            if sh.waiting:
                continue
            if fd not in quieted:
                quieted.add(fd)
                sh._quiet()
                continue
            sh.ready = True
            poller.unregister(fd)
            del by_fd[fd]
