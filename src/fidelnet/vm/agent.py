"""The host side of ``fidelnet-vm`` (``crates/fnvm``): how fidelnet reaches into a VM.

Each VM has one virtio-serial port to an agent in the guest (``fidelnet-vm agent``).
On the host, QEMU exposes that port as a Unix socket that accepts one connection;
``fidelnet-vm mux`` holds it and serves any number of clients on a socket of its own.
A client (``fidelnet-vm run SOCK -- argv``) is a local process that stands for one
program in the guest: its stdin, stdout, stderr, exit status and signals are the
program's, so a node's shell (``--pty``), ``popen`` and ``pexec`` work on a VM node as
on a namespace node, with the same :class:`~fidelnet.nodes.shell.Shell` and
:class:`subprocess.Popen`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fidelnet.errors import NodeError

__all__ = ["ClockSync", "find_tool", "mux_argv", "run_argv", "sync_clock", "wait_ready"]

_cached: str | None = None


def find_tool() -> str:
    """Locate ``fidelnet-vm``: $FIDELNET_VM, next to the Python executable, the
    source tree's cargo builds, or PATH."""
    global _cached
    if _cached:
        return _cached
    root = Path(__file__).resolve().parents[3]
    candidates = [
        os.environ.get("FIDELNET_VM", ""),
        str(Path(sys.executable).parent / "fidelnet-vm"),
        str(root / "target" / "release" / "fidelnet-vm"),
        str(root / "target" / "debug" / "fidelnet-vm"),
        shutil.which("fidelnet-vm") or "",
    ]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            _cached = c
            return c
    raise NodeError(
        "fidelnet-vm: not found (run `make install`, or set FIDELNET_VM to the binary "
        "built by `cargo build --release -p fnvm`)"
    )


def mux_argv(agent_sock: str, listen_sock: str, connect_timeout_ms: int = 30_000) -> list[str]:
    """The multiplexer for one VM: QEMU's chardev socket, and the socket it serves."""
    return [find_tool(), "mux", agent_sock, listen_sock, str(connect_timeout_ms)]


def run_argv(
    sock: str, argv: Sequence[str], *, pty: bool = False, cwd: str | None = None
) -> list[str]:
    """The local argv that runs ``argv`` in the guest behind ``sock``."""
    if not argv:
        raise NodeError("empty command: nothing to run")
    out = [find_tool(), "run", sock]
    if pty:
        out.append("--pty")
    if cwd:
        out += ["--cwd", cwd]
    return [*out, "--", *(str(a) for a in argv)]


@dataclass(frozen=True)
class ClockSync:
    """How the guest's CLOCK_REALTIME was set to the host's: the offset found (ns,
    guest minus host), the round trip of the exchange it came from (the offset is
    known to within half of it), and the offset measured after the step."""

    offset_ns: int
    rtt_ns: int
    residual_ns: int

    @property
    def uncertainty_ns(self) -> int:
        return max(self.rtt_ns // 2, abs(self.residual_ns))


def sync_clock(sock: str, rounds: int = 16) -> ClockSync:
    """Step the guest's CLOCK_REALTIME to the host's (pktgen stamps packets with it,
    so latency between a VM and any other node needs the two clocks to agree)."""
    p = subprocess.run(
        [find_tool(), "sync", sock, str(rounds)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if p.returncode != 0:
        raise NodeError(f"setting the guest's clock: {p.stderr.strip()}")
    d = json.loads(p.stdout)
    return ClockSync(int(d["offset_ns"]), int(d["rtt_ns"]), int(d["residual_ns"]))


def wait_ready(sock: str, timeout: float) -> bool:
    """Whether the guest agent behind ``sock`` answered within ``timeout`` seconds."""
    p = subprocess.run(
        [find_tool(), "wait", sock, str(max(1, int(timeout * 1000)))],
        capture_output=True,
        check=False,
        timeout=timeout + 10,
    )
    return p.returncode == 0
