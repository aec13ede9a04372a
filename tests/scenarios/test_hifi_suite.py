"""`fidelnet bench hifi`, short: every HiFi test runs, the page leads with the
verdict and Table 1, the hifi queue is fair to four periodic UDP senders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.privileged


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (creates network namespaces)")


def test_short_hifi_suite(tmp_path: Path) -> None:
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "bench", "hifi", "--seconds", "3",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "hifi.json").read_text())
    tests = {(t["test"], t["queue"]): t for t in doc}
    assert set(tests) == {
        ("two-way", "fq"), ("fork-out", "fq"), ("single-switch", "fq"),
        ("dumbbell", "fq"), ("udp-dumbbell", "droptail"), ("udp-dumbbell", "hifi"),
    }  # fmt: skip
    for t in doc:
        assert t["verdicts"], t["test"]  # every test was monitored and judged
        assert all(f["per_second_bps"] for f in t["flows"]), t["test"]
    # No TCP flow starves (how evenly they share is the figure the page reports).
    for t in doc:
        if t["queue"] == "fq":
            for f in t["flows"]:
                mean = sum(f["per_second_bps"]) / len(f["per_second_bps"])
                assert max(f["per_second_bps"]) < 101e6, (t["test"], f)  # whole seconds
                assert mean > 10e6, (t["test"], f)
    assert tests[("udp-dumbbell", "hifi")]["jain"] >= 0.99, tests[("udp-dumbbell", "hifi")]
    page = (tmp_path / "hifi.html").read_text()
    assert page.index('id="verdict"') < page.index("id='table1'") < page.index("id='jain'")
    for t in doc:
        assert (tmp_path / f"flows-{t['test']}-{t['queue']}.png").is_file()
    assert "Mininet-HiFi validation (Table 1)" in p.stdout
