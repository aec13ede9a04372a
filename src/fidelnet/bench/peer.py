"""Stock Mininet as the benchmark's peer: the routed line held open by
``mininet_line.py`` (or any routed topology by ``mininet_topology.py``) under the
Python that has Debian's ``mininet`` package, and its nodes as places to start
processes (through their network namespace)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fidelnet.errors import MeasurementError, NodeError
from fidelnet.kernel import launcher, nic

__all__ = ["ForeignNode", "MininetLine", "MininetTopology", "mininet_python"]

_SCRIPT = Path(__file__).with_name("mininet_line.py")
_TOPOLOGY_SCRIPT = Path(__file__).with_name("mininet_topology.py")


def mininet_python() -> str | None:
    """A Python that imports ``mininet`` ($FIDELNET_MININET_PYTHON or /usr/bin/python3)."""
    py = os.environ.get("FIDELNET_MININET_PYTHON") or "/usr/bin/python3"
    if not os.access(py, os.X_OK):
        return None
    rc = subprocess.run([py, "-c", "import mininet.net"], capture_output=True, check=False)
    return py if rc.returncode == 0 else None


class ForeignNode:
    """A namespace held by another program's process (a Mininet host): processes
    join its network namespace by ``/proc/PID/ns/net``."""

    def __init__(self, name: str, pid: int) -> None:
        self.name = name
        self.pid = pid

    def _netns(self) -> str:
        return f"/proc/{self.pid}/ns/net"

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        full = launcher.exec_argv(list(argv), netns=self._netns())
        kwargs.setdefault("close_fds", True)
        try:
            return subprocess.Popen(full, **kwargs)
        except OSError as exc:
            raise NodeError(f"{self.name}: cannot start {argv[0]!r}: {exc}") from exc

    def steer_rps(self, dev: str, cpu: int) -> None:
        """RPS for ``dev`` (a fresh sysfs in a private mount namespace shows this
        node's devices; Mininet hosts share the host's mounts)."""
        argv = launcher.exec_argv(
            nic.rps_argv(dev, cpu),
            netns=self._netns(),
            new_mount=True,
        )
        p = subprocess.run(argv, capture_output=True, text=True, timeout=10, check=False)
        if p.returncode != 0:
            raise MeasurementError(f"{self.name}: cannot set RPS on {dev}: {p.stderr.strip()}")


class MininetLine:
    """``with MininetLine(7) as peer:`` builds lg - h1..h7 - rx with Mininet and
    stops it on exit (also after an error)."""

    def __init__(self, n: int, python: str | None = None) -> None:
        self.n = n
        self.python = python or mininet_python()
        self.nodes: dict[str, ForeignNode] = {}
        self.version = "unknown"
        self._proc: subprocess.Popen[str] | None = None

    def _argv(self) -> list[str]:
        assert self.python is not None
        return [self.python, str(_SCRIPT), str(self.n)]

    def _first_input(self) -> str:
        return ""

    def __enter__(self) -> MininetLine:
        if self.python is None:
            raise MeasurementError(
                "the Mininet peer needs Debian's 'mininet' package (apt-get install mininet) "
                "or FIDELNET_MININET_PYTHON pointing at a Python that has it"
            )
        self._proc = subprocess.Popen(
            self._argv(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None and self._proc.stdin is not None
        first = self._first_input()
        if first:
            try:
                self._proc.stdin.write(first + "\n")
                self._proc.stdin.flush()
            except OSError:
                pass  # it died: its error is read below
        line = self._proc.stdout.readline()
        try:
            doc = json.loads(line)
            self.nodes = {k: ForeignNode(k, int(v)) for k, v in doc["nodes"].items()}
            self.version = str(doc.get("mininet", "unknown"))
        except (ValueError, KeyError, TypeError) as exc:
            err = self._finish()
            raise MeasurementError(f"the Mininet peer failed to start: {err[-800:]}") from exc
        return self

    def _finish(self) -> str:
        proc = self._proc
        if proc is None:
            return ""
        self._proc = None
        try:
            out, err = proc.communicate(input="", timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        return (err or "") + (out or "")

    def __exit__(self, *exc: object) -> None:
        self._finish()

    @staticmethod
    def available() -> bool:
        return mininet_python() is not None and shutil.which("ip") is not None


class MininetTopology(MininetLine):
    """``with MininetTopology(plan) as peer:`` builds the routed topology of ``plan``
    (see ``mininet_topology.py``) with Mininet and stops it on exit."""

    def __init__(self, plan: dict[str, Any], python: str | None = None) -> None:
        super().__init__(0, python)
        self.plan = plan

    def _argv(self) -> list[str]:
        assert self.python is not None
        return [self.python, str(_TOPOLOGY_SCRIPT)]

    def _first_input(self) -> str:
        return json.dumps(self.plan)
