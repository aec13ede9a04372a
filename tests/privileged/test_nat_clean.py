"""Mininet's NAT in the host's namespace (nat.py) changes the machine's firewall and
forwarding: after the run is killed with SIGKILL, `fidelnet clean` deletes exactly its
rules and restores ip_forward."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from _mnrun import ROOT

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

EXAMPLE = Path("/usr/share/doc/mininet/examples/nat.py")


def _firewall() -> str:
    rules = "".join(
        subprocess.run(["iptables", "-w", "-t", t, "-S"], capture_output=True, text=True).stdout
        for t in ("filter", "nat")
    )
    return rules + Path("/proc/sys/net/ipv4/ip_forward").read_text()


def test_clean_removes_the_nat_rules_of_a_killed_run() -> None:
    before = _firewall()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "fidelnet", "mn", str(EXAMPLE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        start_new_session=True,
    )
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if "Starting CLI" in line:
            break
    during = _firewall()
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    assert proc.stdin is not None
    proc.stdin.close()
    assert "MASQUERADE" in during and during != before, "".join(seen)
    clean = subprocess.run(
        [sys.executable, "-m", "fidelnet", "clean"], capture_output=True, text=True, env=env
    )
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert _firewall() == before
