"""Processes and files of the test control plane (:mod:`.controlplane`): loopback
ports, ending a process group by its leader's pid, private files."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess

__all__ = ["end_group", "free_ports", "read_text", "write_private"]


def free_ports(n: int) -> list[int]:
    """``n`` distinct loopback ports the kernel just handed out (all held at once,
    so none is given twice, then released for the components to bind)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def end_group(popen: subprocess.Popen[bytes], timeout: float) -> bool:
    """SIGTERM the process group ``popen`` leads, SIGKILL it after ``timeout``;
    whether the leader exited (and was reaped) within another ``timeout``."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if popen.poll() is not None:
            return True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(popen.pid, sig)
        try:
            popen.wait(timeout)
        except subprocess.TimeoutExpired:
            continue
        return True
    return False


def write_private(file: str, text: str) -> None:
    """A new file only its owner may read (tokens, keys), with ``text``."""
    fd = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def read_text(file: str) -> str:
    with open(file, encoding="utf-8") as f:
        return f.read()
