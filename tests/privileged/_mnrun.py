"""Running `fidelnet mn` in a subprocess for tests, and checking a run left nothing."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run_to_end(
    argv: Sequence[str],
    stdin: str,
    timeout: float,
    what: str,
    env: Mapping[str, str] | None = None,
    cwd: str | Path = ROOT,
) -> tuple[int, str]:
    """Run ``argv`` (from the repository root, with ``src`` importable, unless ``env``
    and ``cwd`` say otherwise); (exit status, stdout+stderr). Past ``timeout`` it is
    sent SIGTERM (fidelnet tears its networks down on it), then killed, and the test
    fails."""
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=dict(env) if env is not None else dict(os.environ, PYTHONPATH=str(ROOT / "src")),
        cwd=cwd,
    )
    try:
        out, _ = proc.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"{what}: did not finish within {timeout} s\n{out[-3000:]}")
    return proc.returncode, out


def assert_no_trace(run_ids: list[str]) -> None:
    """Nothing of these runs is left: namespaces, state files, cgroups."""
    netns = os.listdir("/run/netns") if os.path.isdir("/run/netns") else []
    for rid in run_ids:
        assert not [n for n in netns if n.startswith(f"fn{rid}")], f"run {rid}: netns left"
        assert not os.path.exists(f"/run/fidelnet/{rid}.jsonl"), f"run {rid}: state file left"
        assert not glob.glob(f"/sys/fs/cgroup/*/fidelnet-{rid}"), f"run {rid}: cgroup left"
