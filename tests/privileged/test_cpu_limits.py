"""CPU limits are real: a busy loop in a node capped at 20% of one core uses about that."""

from __future__ import annotations

import os
import time

import pytest

from fidelnet import Network, Node
from fidelnet.kernel import cgroups
from fidelnet.topology import NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _busy_loop_share(node: Node, seconds: float) -> float:
    """Run a busy loop in ``node`` and return the share of one core it got."""
    proc = node.popen(["sh", "-c", "while :; do :; done"])
    try:
        time.sleep(0.3)
        c0, t0 = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        return (_cpu_seconds(proc.pid) - c0) / (time.monotonic() - t0)
    finally:
        proc.kill()
        proc.wait()


def test_cpu_fraction_caps_a_busy_loop() -> None:
    fs = cgroups.detect()
    if fs.v1_cpu is None and "cpu" not in fs.v2_controllers():
        pytest.skip("no cpu cgroup controller on this machine (v1 cpu or v2 cpu.max)")
    spec = TopologySpec()
    ncpu = os.cpu_count() or 1
    # cpu= is a fraction of the whole machine (Mininet): 0.1 of 2 cores = 20% of one core.
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/8", cpu=0.2 / ncpu))
    with Network(spec) as net:
        share = _busy_loop_share(net["h1"], 2.0)
    # Loose bounds: tests check the mechanism; exact figures belong to bench/.
    assert 0.10 < share < 0.30, f"busy loop got {share:.0%} of a core, configured 20%"


def test_unlimited_node_is_not_capped() -> None:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/8"))
    with Network(spec) as net:
        share = _busy_loop_share(net["h1"], 1.0)
    assert share > 0.5, f"an unlimited busy loop got only {share:.0%} of a core"
