"""`fidelnet calibrate --quick` on the real machine: a profile this machine loads
back, a page that leads with the answer, and a capacity check that reads it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.privileged


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (creates network namespaces and cgroups)")


def test_quick_calibration_saves_a_profile_this_machine_loads(tmp_path: Path) -> None:
    env = dict(os.environ, FIDELNET_STATE_DIR=str(tmp_path / "state"))
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "calibrate", "--quick", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    assert "forwarding tc     1 chain    link(s)" in p.stdout and "profile: " in p.stdout
    code = (
        "from fidelnet.fidelity import profile as p; got, why = p.load(); "
        "assert got is not None, why; "
        "print(got.capacity_pps('tc')[0], got.capacity_pps('engine')[0], got.timer_p99_ns())"
    )
    check = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False
    )
    assert check.returncode == 0, check.stderr
    tc_hops, engine_hops, timer_p99 = (float(x) for x in check.stdout.split())
    assert tc_hops > 10_000 and engine_hops > 10_000 and timer_p99 > 0
    page = (tmp_path / "out" / "calibration.html").read_text()
    assert page.index('id="answer"') < page.index("id='forwarding'")
    # The profile now drives the capacity check: a chain far over it is refused.
    scenario = tmp_path / "over.yaml"
    scenario.write_text(
        "name: over\ntopology:\n  builder: {line: 6}\ntraffic:\n"
        "  - {name: flood, type: pktgen, src: h1, dst: h6, rate: 1Mpps, duration: 1s}\n"
    )
    refused = subprocess.run(
        [sys.executable, "-m", "fidelnet", "test", str(scenario), "--strict",
         "--out", str(tmp_path / "run")],
        capture_output=True, text=True, timeout=120, check=False, env=env,
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "traffic flood" in refused.stderr and "nothing was built" in refused.stderr
    assert not (tmp_path / "run").exists()
    # And a script's udp() is checked before it sends.
    code = (
        "from fidelnet import Network; from fidelnet.measure import udp; "
        "from fidelnet.topology import line\n"
        "with Network(line(4)) as net:\n"
        "    udp(net, 'h1', 'h4', 900_000, duration=0.3)\n"
    )
    script = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env,
        check=False,
    )  # fmt: skip
    assert script.returncode == 0, script.stderr
    assert "traffic h1->h4 (udp 900,000 pps of 64 B) crosses 3 bare veth or tc links" in (
        script.stderr
    )
