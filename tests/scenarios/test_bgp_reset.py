"""The BGP example end to end: eBGP (BIRD 2) between two routers, the session reset
by a `run` event under a pktgen flow; the outage (routes withdrawn, then learnt
again) measured from the packets and judged, the session established again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from fidelnet.report.junit import parse_junit

pytestmark = pytest.mark.privileged

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bgp-reset.yaml"


@pytest.fixture(autouse=True)
def _needs() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (creates network namespaces)")
    if shutil.which("bird") is None:
        pytest.fail("BIRD 2 is missing: `make test` installs it (apt-get install bird2)")


def test_bgp_session_reset_outage_is_measured_and_recovers(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "test", str(EXAMPLE), "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    (suite,) = parse_junit(tmp_path / "out" / "junit.xml")
    checks = {c.name: c for c in suite.checks}
    outage = checks["outage-load-reset"]
    # The reset withdraws the routes: packets are lost until the session is back.
    seconds, lost = float(outage.measured.split()[1]), int(outage.measured.split()[3])
    assert 0 < seconds <= 5.0 and lost > 0, outage.measured
    assert checks["command-r1"].status == "passed"
    assert not Path("/tmp/fidelnet-bgp-reset").exists()
