"""Starting a server in a node and waiting until it listens: a client started after a
fixed sleep races the server on a loaded 2-core machine (the CI failure of stop 20:
the client found no listener, and `iperf3 -s -1` then waited forever)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Sequence
from typing import Any

from fidelnet.kernel import procfs


def start_listening(
    node: Any, argv: Sequence[str], port: int, timeout: float = 15.0, **popen: Any
) -> subprocess.Popen[Any]:
    """``node.popen(argv)``, returned once its namespace listens on TCP ``port``; killed
    and a failure raised if it exits or does not listen within ``timeout`` seconds."""
    proc: subprocess.Popen[Any] = node.popen(list(argv), **popen)
    deadline = time.monotonic() + timeout
    while not procfs.tcp_listening(proc.pid, port):
        if proc.poll() is not None:
            raise AssertionError(f"{argv[0]} in {node.name} exited with {proc.returncode}")
        if time.monotonic() > deadline:
            proc.kill()
            proc.wait(5)
            raise AssertionError(f"{argv[0]} in {node.name}: not listening on {port}")
        time.sleep(0.02)
    return proc
