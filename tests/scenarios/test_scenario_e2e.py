"""`fidelnet test` end to end as root: a scenario whose checks pass, one whose checks
fail on purpose; the exit code, the JUnit file read back, the report."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from fidelnet.report.junit import parse_junit

pytestmark = pytest.mark.privileged

DATA = Path(__file__).parent / "data"


@pytest.fixture(autouse=True)
def _root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root (creates network namespaces)")


def _test(
    tmp_path: Path, *files: str, extra: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fidelnet", "test", *(str(DATA / f) for f in files),
         "--out", str(tmp_path / "out"), *extra],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def test_passing_and_failing_scenarios(tmp_path: Path) -> None:
    p = _test(tmp_path, "pass.yaml", "fail.yaml")
    assert p.returncode == 1, p.stdout + p.stderr
    suites = {s.name: s for s in parse_junit(tmp_path / "out" / "junit.xml")}
    assert set(suites) == {"two-hosts-pass", "two-hosts-fail"}
    good = {c.name: c for c in suites["two-hosts-pass"].checks}
    assert {c.status for c in good.values()} == {"passed"}, good
    assert set(good) == {"reachability-reach", "loss-load", "latency-load", "route-present"}
    bad = {c.name: c for c in suites["two-hosts-fail"].checks}
    assert set(bad) == {"too-strict-latency", "no-loss", "wrong-exit"}
    # Every check fails. On a busy machine the run may know a latency or loss figure
    # to be off (an untrusted verdict) in a way that could change the answer: that
    # check is then inconclusive, an error that says it would have failed and why it
    # cannot be judged. Never passed; the command check has no verdict to hide behind.
    for c in bad.values():
        if c.status == "error" and c.classname != "command":
            assert c.message.startswith(f"inconclusive: measured {c.measured} (failed "), c
            assert c.verdict == "untrusted" and c.verdict_reasons, c
        else:
            assert c.status == "failed", c
    # Measured beside expected, in the JUnit file and on the console.
    lat = bad["too-strict-latency"]
    assert lat.expected == "p50 <= 1.000 ms" and lat.measured.startswith("p50 = ")
    assert float(lat.measured.split()[2]) >= 10.0  # one-way delay is 10 ms at least
    assert bad["no-loss"].expected == "<= 1 %"
    assert bad["wrong-exit"].measured == "exit 1"
    said = "FAILED" if lat.status == "failed" else "ERROR"
    assert f"{said} two-hosts-fail: too-strict-latency: " in p.stdout
    assert f"measured {lat.measured}" in p.stdout
    report = (tmp_path / "out" / "report.html").read_text()
    assert "Checks: two-hosts-fail" in report and 'data-plot="hdr"' in report
    assert (tmp_path / "out" / "two-hosts-pass" / "run-1" / "load.json").is_file()


def test_only_passing_scenario_exits_zero_and_captures_when_asked(tmp_path: Path) -> None:
    p = _test(tmp_path, "pass.yaml", extra=("--pcap",))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "4/4 checks passed" in p.stdout
    pcap = tmp_path / "out" / "two-hosts-pass" / "run-1" / "pcap" / "load-h1-h1-eth0.pcap"
    data = pcap.read_bytes()
    # pcap header (24 bytes), then records of 16-byte header + up to 96 captured bytes:
    # 2000 pktgen packets must be there.
    assert data[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4"), data[:4]
    assert len(data) > 24 + 2000 * (16 + 60), len(data)


def test_invalid_file_builds_nothing_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((DATA / "pass.yaml").read_text().replace("dst: h2", "dst: h9"))
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "test", str(DATA / "pass.yaml"), str(bad)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert p.returncode == 2, p.stdout + p.stderr
    assert f"{bad}:" in p.stderr and "h9" in p.stderr
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert after == before


def test_endpoint_and_fastpath_keys_reach_the_kernel(tmp_path: Path) -> None:
    """``endpoint: af_xdp`` and ``fastpath: xdp`` in YAML: the XDP programs are where
    they belong (the checks look), and a routed path through both carries traffic
    with the configured delay."""
    p = _test(tmp_path, "routed-xdp.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    (suite,) = parse_junit(tmp_path / "out" / "junit.xml")
    checks = {c.name: c for c in suite.checks}
    assert {c.status for c in checks.values()} == {"passed"}, checks
    assert set(checks) >= {"af-xdp-endpoint", "fast-path-port", "latency-load"}
    # One-way 1 ms on the engine link: the median is at least that.
    assert float(checks["latency-load"].measured.split()[2]) >= 1.0


def test_two_vm_hosts_around_a_namespace_router(tmp_path: Path) -> None:
    """Issue 12: VM hosts (QEMU, their own kernel) and a namespace router in one
    scenario; reachability, pktgen loss and latency (the guests' clocks are set to
    the host's at boot, so one-way latency between VMs means something)."""
    p = _test(tmp_path, "vm-routed.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    suite = parse_junit(tmp_path / "out" / "junit.xml")[0]
    checks = {c.name: c for c in suite.checks}
    assert {c.status for c in checks.values()} == {"passed"}, checks
    p50 = float(checks["latency-load"].measured.split()[2])
    assert 5.0 <= p50 < 30.0  # 5 ms configured on h1-r1, plus the guests' own time


def test_a_dilated_scenario_measures_the_configured_network(tmp_path: Path) -> None:
    """``tdf: 4``: pktgen's latency over a 2 ms engine link is 2 ms of virtual time
    (its send stamps and the kernel's receive stamps are both virtual), and the
    result's provenance and report carry the TDF."""
    import json

    p = _test(tmp_path, "dilated.yaml")
    assert p.returncode == 0, p.stdout + p.stderr
    load = json.loads((tmp_path / "out" / "dilated" / "run-1" / "load.json").read_text())
    vt = load["provenance"]["virtual_time"]
    assert vt["tdf"] == 4.0 and vt["unreached"] == []
    checks = {c.name: c for s in parse_junit(tmp_path / "out" / "junit.xml") for c in s.checks}
    p50 = float(checks["latency-load"].measured.split()[2])
    assert 2.0 <= p50 <= 2.5, p50
    assert "TDF 4 (start)" in (tmp_path / "out" / "report.html").read_text()


def test_container_nodes_beside_a_namespace_router(tmp_path: Path) -> None:
    """Issue 37: two container nodes (BIRD from an image, an image's HTTP server) and
    a namespace router running this machine's BIRD; OSPF converges, every pair pings,
    h1 fetches the image's page, a pktgen flow to the container loses nothing; the
    result's provenance pins each image by digest."""
    import json
    import shutil

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _images import build

    bird, httpd = build("bird"), build("busybox-httpd")
    text = (DATA / "containers.yaml").read_text()
    text = text.replace("@BIRD@", str(bird["docker-archive"]))
    text = text.replace("@HTTPD@", str(httpd["oci-archive"]))
    (tmp_path / "containers.yaml").write_text(text)
    shutil.copy(DATA / "containers-bird.conf", tmp_path / "containers-bird.conf")
    env = {**os.environ, "FIDELNET_IMAGE_STORE": str(tmp_path / "store")}
    p = subprocess.run(
        [sys.executable, "-m", "fidelnet", "test", str(tmp_path / "containers.yaml"),
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=300, check=False, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout + p.stderr
    (suite,) = parse_junit(tmp_path / "out" / "junit.xml")
    checks = {c.name: c for c in suite.checks}
    assert {c.status for c in checks.values()} == {"passed"}, checks
    load = json.loads((tmp_path / "out" / "containers" / "run-1" / "load.json").read_text())
    containers = load["provenance"]["containers"]
    assert set(containers) == {"rb", "web"}, containers
    for c in containers.values():
        assert c["digest"].startswith("sha256:") and c["runtime"].startswith("crun"), c
