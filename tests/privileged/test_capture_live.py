"""``fidelnet capture`` on a running run (issue 38): a veth end, a switch port in the
fabric and an engine link's TAP, each a pcapng stream that tcpdump reads back, each
ended by itself when the run ends."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fidelnet import Network
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

SRC = str(Path(__file__).resolve().parents[2] / "src")
ENV = {**os.environ, "PYTHONPATH": SRC}


def _capture(run: str, where: str, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "fidelnet", "capture", run, where, "-w", str(out), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
    )  # fmt: skip


def _read(path: Path) -> list[str]:
    return subprocess.run(
        ["tcpdump", "-nn", "-r", str(path)], capture_output=True, text=True, check=True
    ).stdout.splitlines()


def test_captures_follow_a_running_run_and_end_with_it(tmp_path: Path) -> None:
    spec = TopologySpec()
    for i in (1, 2, 3):
        spec.add_node(NodeSpec(f"h{i}", ip=f"10.0.0.{i}/24"))
    spec.add_node(NodeSpec("s1", kind="switch"))
    spec.add_link(LinkSpec("h1", "s1"))
    spec.add_link(LinkSpec("h2", "s1"))
    spec.add_link(LinkSpec("h3", "s1", params=LinkParams(delay=0.001), backend="engine"))
    files = {w: tmp_path / f"{w.replace(':', '_')}.pcapng" for w in
             ("h2:h2-eth0", "s1:s1-eth1", "h3:h3-eth0")}  # fmt: skip
    with Network(spec) as net:
        caps = {w: _capture(net.run_id[:4], w, f) for w, f in files.items()}
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not all(
            f.exists() and f.stat().st_size > 0 for f in files.values()
        ):
            time.sleep(0.1)
        assert all(f.stat().st_size > 0 for f in files.values()), {
            w: c.poll() for w, c in caps.items()
        }
        for dst in ("10.0.0.2", "10.0.0.3"):
            out, _, rc = net["h1"].pexec(["ping", "-c3", "-i0.2", "-W2", dst], timeout=20)
            assert rc == 0, out
        time.sleep(0.3)
        assert all(c.poll() is None for c in caps.values())  # still capturing
    for where, cap in caps.items():
        _, err = cap.communicate(timeout=10)  # ends by itself with the run
        assert cap.returncode == 0, (where, err)
        assert "frames from" in err, err
    h2 = _read(files["h2:h2-eth0"])
    assert sum("10.0.0.1 > 10.0.0.2: ICMP echo request" in ln for ln in h2) == 3, h2
    assert sum("10.0.0.2 > 10.0.0.1: ICMP echo reply" in ln for ln in h2) == 3, h2
    s1 = _read(files["s1:s1-eth1"])  # the switch's port toward h1: both flows pass it
    assert sum("ICMP echo request" in ln for ln in s1) == 6, s1
    h3 = _read(files["h3:h3-eth0"])  # the engine link's end in h3
    assert sum("10.0.0.1 > 10.0.0.3: ICMP echo request" in ln for ln in h3) == 3, h3


def test_count_stops_it_and_a_wrong_run_or_node_is_named(tmp_path: Path) -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    spec.add_link(LinkSpec("h1", "h2"))
    with Network(spec) as net:
        out = tmp_path / "c.pcapng"
        cap = _capture("latest", "h1:h1-eth0", out, "--count", "2")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not (out.exists() and out.stat().st_size > 0):
            time.sleep(0.1)
        net["h1"].pexec(["ping", "-c3", "-i0.2", "10.0.0.2"], timeout=20)
        _, err = cap.communicate(timeout=20)
        assert cap.returncode == 0 and "2 frames from h1-eth0" in err, err
        assert len(_read(out)) == 2
        bad = subprocess.run(
            [sys.executable, "-m", "fidelnet", "capture", net.run_id, "h9:h9-eth0", "-w",
             str(tmp_path / "x.pcapng")],
            capture_output=True, text=True, env=ENV, timeout=30,
        )  # fmt: skip
        assert bad.returncode == 2 and "h9" in bad.stderr, bad.stderr
    gone = subprocess.run(
        [sys.executable, "-m", "fidelnet", "capture", "ffffff", "h1:h1-eth0", "-w",
         str(tmp_path / "y.pcapng")],
        capture_output=True, text=True, env=ENV, timeout=30,
    )  # fmt: skip
    assert gone.returncode == 2 and "RUN" in gone.stderr, gone.stderr
