"""Servers for privileged tests: starting one in a node and waiting until it listens
(a client started after a fixed sleep races the server on a loaded 2-core machine:
the CI failure of stop 20, where `iperf3 -s -1` then waited forever), and a TCP
transfer whose SHA-256 the receiver reports (data integrity across a link)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
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


# A receiver that prints the SHA-256 and length of everything one client sends.
_RECEIVER = """
import hashlib, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1])))
s.listen(1)
print("ready", flush=True)
c, _ = s.accept()
h, n = hashlib.sha256(), 0
while True:
    b = c.recv(1 << 20)
    if not b:
        break
    h.update(b)
    n += len(b)
print(h.hexdigest(), n, flush=True)
"""

# A sender of a file's bytes.
_SENDER = """
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=60)
with open(sys.argv[3], "rb") as f:
    c.sendall(f.read())
c.shutdown(socket.SHUT_WR)
c.recv(1)
c.close()
"""


def transfer(src: Any, dst: Any, dst_ip: str, path: str, port: int = 5601) -> tuple[str, int]:
    """Send the file at ``path`` from node ``src`` to node ``dst`` (at ``dst_ip``) over
    TCP; (sha256, bytes) as the receiver counted them."""
    server = dst.popen(
        [sys.executable, "-c", _RECEIVER, str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        assert server.stdout.readline().strip() == "ready"
        out, err, code = src.pexec(
            [sys.executable, "-c", _SENDER, dst_ip, str(port), path], timeout=120
        )
        assert code == 0, out + err
        line, _ = server.communicate(timeout=60)
        digest, n = line.split()
        return digest, int(n)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


def payload_file(directory: Path, size: int) -> tuple[str, tuple[str, int]]:
    """Write ``size`` random bytes to a file in ``directory``: (its path, the
    (sha256, length) that :func:`transfer` must report for it)."""
    data = os.urandom(size)
    path = directory / "payload.bin"
    path.write_bytes(data)
    return str(path), (hashlib.sha256(data).hexdigest(), size)
