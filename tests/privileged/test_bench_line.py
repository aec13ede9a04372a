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


def test_short_bench_line_with_vm_routers_judges_them_emulated(tmp_path: Path) -> None:
    """`--node vm`: the line with VM routers beside the namespace line; its results
    carry their verdict, which says the VMs are emulated where they are (TCG here)."""
    env = {**os.environ, "FIDELNET_FLOOR": str(tmp_path / "floor.json")}
    out = tmp_path / "line"
    p = _run(
        ["bench", "line", "--node", "vm", "--routers", "2", "--rates", "1", "--duration", "0.5",
         "--trial", "0.3", "--no-bursts", "--no-peer", "--out", str(out)],
        env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    r = load_result(out / "fidelnet-vm-cbr-00001k.json")
    assert r.result.kind == "udp" and r.result.sent > 0
    assert r.result.loss_ratio == 0.0, r.result
    assert r.result.verdict is not None and r.result.monitor is not None
    assert [v.name for v in r.result.monitor.vms] == ["h1", "h2"]
    summary = json.loads((out / "summary" / "line.json").read_text())
    assert summary["node"] == "vm" and set(summary["vms"]) == {"h1", "h2"}
    accel = summary["vms"]["h1"]["accel"]
    codes = [reason.code for reason in r.result.verdict.reasons]
    assert ("vm_emulated" in codes) == (accel == "tcg")
    search = load_result(out / "fidelnet-vm-zero-loss-cbr.json")
    assert search.result.kind == "zero_loss" and search.result.ndr_pps > 0
    assert "fidelnet-vm" in (out / "report.html").read_text()


@pytest.mark.skipif(mininet_python() is None, reason="Debian's mininet package is not installed")
def test_short_bench_hvnet_writes_table_one_figures_and_every_flow(tmp_path: Path) -> None:
    """One small random topology with three routed flows, fidelnet beside Mininet."""
    env = {**os.environ, "FIDELNET_FLOOR": str(tmp_path / "floor.json")}
    out = tmp_path / "hv"
    p = _run(
        ["bench", "hvnet", "--topologies", "1", "--nodes", "5", "--flows", "3",
         "--hops", "2,3", "--duration", "1", "--rate-mbps", "1,3", "--out", str(out)],
        env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((out / "summary" / "hvnet.json").read_text())
    title, header, rows = (summary["tables"][0][k] for k in ("title", "header", "rows"))
    assert title.startswith("Table I") and "ratio fidelnet/mininet" in header
    assert rows and sum(int(r[1]) for r in rows) == 3
    for stack in ("fidelnet", "mininet"):
        for flow in ("f1", "f2", "f3"):
            r = load_result(out / f"t1-{flow}-{stack}.json").result
            assert r.kind == "udp" and r.sent > 0 and r.loss_ratio == 0.0, (stack, flow, r)
            assert r.worst and r.flows[0].jitter is not None
    shown = [Path(path).name for _title, path in summary["figures"]]
    assert "hvnet-worst-events.png" in shown and "hvnet-jitter.png" in shown
    page = (out / "report.html").read_text()
    assert "Table I" in page and "hvnet-jitter.png" in page
