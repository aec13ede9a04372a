"""`fidelnet mn --topo … --test pingall` end to end: Mininet's output, exit status, no trace."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from _mnrun import assert_no_trace, run_to_end

from _precision import precise

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

RUN_RE = re.compile(r"run ([0-9a-f]{6}): state in ")


def run_mn(
    args: list[str], timeout: float = 120, stdin: str | None = None
) -> tuple[int, str, list[str]]:
    """Run `python -m fidelnet mn -v debug ARGS`; (exit status, output, run ids seen)."""
    argv = [sys.executable, "-m", "fidelnet", "mn", "-v", "debug", *args]
    code, out = run_to_end(argv, stdin or "", timeout, f"fidelnet mn {' '.join(args)}")
    return code, out, RUN_RE.findall(out)


@pytest.mark.parametrize(
    ("topo", "received"),
    [
        ("linear,3", "6/6"),
        ("tree,2,2", "12/12"),
        ("torus,3,3", "72/72"),
        ("random,6,seed=3", "30/30"),  # routers joined directly, static routes
    ],
)
def test_topo_pingall(topo: str, received: str) -> None:
    code, out, runs = run_mn(["--topo", topo, "--test", "pingall"])
    assert code == 0, out
    assert "*** Creating network" in out
    assert "*** Ping: testing ping reachability" in out
    assert f"*** Results: 0% dropped ({received} received)" in out
    assert "*** Done" in out
    assert len(runs) == 1, out
    assert_no_trace(runs)


def test_iperf_over_a_shaped_link() -> None:
    code, out, runs = run_mn(
        ["--topo", "single,2", "--link", "tc,bw=5", "--test", "iperf,seconds=2"]
    )
    assert code == 0, out
    m = re.search(r"\*\*\* Results: \['([\d.]+) Mbits/sec', '([\d.]+) Mbits/sec'\]", out)
    assert m, out
    assert 2.5 < float(m.group(1)) <= 5.2, out  # the receiver's goodput, capped by HTB
    assert_no_trace(runs)


def test_iperf_over_an_engine_link() -> None:
    code, out, runs = run_mn(
        ["--topo", "single,2", "--link", "engine,bw=5", "--test", "iperf,seconds=2"]
    )
    assert code == 0, out
    assert "2 link(s) on the engine backend: asked for" in out
    m = re.search(r"\*\*\* Results: \['([\d.]+) Mbits/sec', '([\d.]+) Mbits/sec'\]", out)
    assert m, out
    assert 2.5 < float(m.group(1)) <= 5.0, out  # whole frames count: goodput is below 5
    assert_no_trace(runs)


def test_invalid_topology_exits_2_before_anything_exists() -> None:
    code, out, runs = run_mn(["--topo", "ring,3", "--test", "pingall"])
    assert code == 2
    assert "unknown topology 'ring'" in out and "linear,K[,N]" in out
    assert runs == []


def test_delay_on_a_kernel_without_netem_runs_on_the_engine() -> None:
    # The acceptance command, verbatim.
    code, out, runs = run_mn(["--topo", "linear,2", "--link", "tc,delay=10ms", "--test", "pingall"])
    assert code == 0, out
    assert "*** Results: 0% dropped (2/2 received)" in out
    if not os.path.exists("/sys/module/sch_netem"):
        assert "3 link(s) on the engine backend: tc cannot: delay need sch_netem" in out
    assert_no_trace(runs)


def test_linear2_with_10ms_links_has_a_60ms_rtt() -> None:
    # Three links (h1-s1, s1-s2, s2-h2); TCLink delays each direction of each by 10 ms.
    def measure() -> tuple[str, float, float, list[float]]:
        code, out, runs = run_mn(
            ["--topo", "linear,2", "--link", "tc,delay=10ms"],
            stdin="h1 ping -c 6 -i 0.2 h2\n",
        )
        assert code == 0, out
        m = re.search(r"rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)", out)
        assert m, out
        times = [float(t) for t in re.findall(r"time=([\d.]+) ms", out)][1:]
        # Never below the configured 60 ms, whatever the load: the engine never
        # releases a packet before its time.
        assert len(times) == 5 and min(times) >= 60.0 and float(m.group(1)) >= 60.0, out
        assert_no_trace(runs)
        return out, float(m.group(1)), float(m.group(2)), times

    def miss(got: tuple[str, float, float, list[float]]) -> str | None:
        _, rtt_min, rtt_avg, times = got
        # The first ping also waits for ARP across the delayed links: judge min and
        # the average with it loosely, the benchmark measures the error precisely.
        # The median close to 60 ms; single pings may run late when a neighbour takes
        # the core (bench/links.py: p99.9 lateness of a few ms on a shared VM).
        if rtt_min < 61.5 and rtt_avg < 90.0 and sorted(times)[2] < 62.0 and max(times) < 80.0:
            return None
        return f"rtt min {rtt_min}, avg {rtt_avg}, pings after the first {times}"

    precise(measure, miss)


def test_cli_reads_commands_until_eof() -> None:
    code, out, runs = run_mn(
        ["--topo", "single,2"], stdin="nodes\nh1 ping -c1 h2\npy h2.IP()\nnet\n"
    )
    assert code == 0, out
    assert "*** Starting CLI:" in out
    assert "available nodes are: \nc0 h1 h2 s1" in out
    assert "1 packets transmitted, 1 received" in out  # h2 became its address
    assert "10.0.0.2" in out
    assert "h1 h1-eth0:s1-eth1" in out
    assert_no_trace(runs)


def test_failed_test_exits_1(tmp_path: Path) -> None:
    script = tmp_path / "down.cli"
    script.write_text("link s1 h2 down\n")
    code, out, runs = run_mn(
        [
            "--topo",
            "single,3",
            "--pre",
            str(script),
            "--test",
            "pingall",
            "--test",
            "pingall,timeout=1",
        ]
    )
    assert code == 1, out
    assert "h1 -> X h3" in out
    assert "*** Results: 66% dropped (2/6 received)" in out
    assert_no_trace(runs)
