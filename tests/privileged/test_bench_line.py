"""`fidelnet measure selftest` and a short `fidelnet bench line` end to end: result
files, plots, the report with its side-by-side table. The full benchmark (every
rate, both shapes) is `make bench-line`; this checks that it works, not its figures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fidelnet.bench.peer import mininet_python
from fidelnet.measure.results import load_result

pytestmark = pytest.mark.privileged

FIDELNET = [sys.executable, "-m", "fidelnet"]


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*FIDELNET, *args], capture_output=True, text=True, timeout=600, env=env, check=False
    )


def test_selftest_keeps_a_floor(tmp_path: Path) -> None:
    env = {**os.environ, "FIDELNET_FLOOR": str(tmp_path / "floor.json")}
    p = _run(
        ["measure", "selftest", "--duration", "0.5", "--no-search", "--out", str(tmp_path / "st")],
        env,
    )
    assert p.returncode == 0, p.stderr
    floor = json.loads((tmp_path / "floor.json").read_text())
    assert floor["max_send_pps"] > 10_000
    assert 0 < floor["latency_p50_ns"] <= floor["latency_p999_ns"]
    result = load_result(tmp_path / "st" / "selftest.json")
    assert result.kind == "selftest" and result.floor is not None
    assert "highest send rate" in p.stdout


@pytest.mark.skipif(mininet_python() is None, reason="Debian's mininet package is not installed")
def test_short_bench_line_writes_report_and_side_by_side_table(tmp_path: Path) -> None:
    env = {**os.environ, "FIDELNET_FLOOR": str(tmp_path / "floor.json")}
    out = tmp_path / "line"
    p = _run(
        ["bench", "line", "--rates", "20", "--duration", "0.5", "--trial", "0.3",
         "--no-bursts", "--out", str(out)],
        env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    names = {f.stem for f in out.glob("*.json")}
    assert {"fidelnet-cbr-00020k", "mininet-cbr-00020k"} <= names
    assert {"fidelnet-zero-loss-cbr", "mininet-zero-loss-cbr"} <= names
    for stack in ("fidelnet", "mininet"):
        r = load_result(out / f"{stack}-cbr-00020k.json")
        assert r.floor is not None
        assert r.result.kind == "udp" and r.result.sent > 0
        assert r.result.loss_ratio == 0.0, r.result
    summary = json.loads((out / "summary" / "line.json").read_text())
    titles = [t["title"] for t in summary["tables"]]
    assert "Summary" in titles
    page = (out / "report.html").read_text()
    assert "ratio fidelnet/mininet" in page
    assert 'data-plot="hdr"' in page and 'data-plot="zero-loss"' in page
    assert any((out / "plots").glob("*.png"))
