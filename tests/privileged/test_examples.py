"""Mininet's own examples, run unchanged under `fidelnet mn`, each to completion.

Each runs from /usr/share/doc/mininet/examples with a timeout; examples that open
the CLI get their commands on standard input (end of input leaves the CLI, as in
Mininet). One example asks for link delay and loss, which need sch_netem: where
the kernel lacks it, its links run on the link engine, and the test checks the
build says so. After each run nothing of it may be left.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest
from _mnrun import assert_no_trace, run_to_end

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.slow,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

EXAMPLES = Path("/usr/share/doc/mininet/examples")
HAS_NETEM = os.path.exists("/sys/module/sch_netem")
HAS_RT = os.path.exists("/sys/fs/cgroup/cpu/cpu.rt_runtime_us")

# Runs `fidelnet mn ARGS` (exactly what `python -m fidelnet` runs) and reports the id of
# every network it opens, so the test can check that nothing of them is left.
DRIVER = """
import sys
import fidelnet.network as network
_open = network.Network.open
def _open_and_report(self):
    new = not self.is_open
    _open(self)
    if new:
        print("FIDELNET-RUN", self.run_id, file=sys.__stderr__, flush=True)
network.Network.open = _open_and_report
from fidelnet.cli.main import main
sys.argv = ["fidelnet", *sys.argv[1:]]
main()
"""


def run_example(
    name: str, stdin: str, timeout: float, args: tuple[str, ...] = ()
) -> tuple[int, str, list[str], float]:
    start = time.monotonic()
    argv = [sys.executable, "-c", DRIVER, "mn", str(EXAMPLES / name), *args]
    code, out = run_to_end(argv, stdin, timeout, name)
    runs = re.findall(r"^FIDELNET-RUN ([0-9a-f]{6})$", out, re.MULTILINE)
    return code, out, runs, time.monotonic() - start


def check_emptynet(code: int, out: str) -> None:
    assert code == 0
    assert "*** Starting CLI:" in out and "mininet> " in out
    assert "*** Results: 0% dropped (2/2 received)" in out


def check_multiping(code: int, out: str) -> None:
    assert code == 0
    assert re.search(r"h1: 10\.0\.0\.1 -> 10\.0\.0\.2 1 packets transmitted, 1 received", out)
    # 10.0.0.200 is nobody: those pings fail.
    assert re.search(r"-> 10\.0\.0\.200 1 packets transmitted, 0 received", out)


def check_popen(code: int, out: str) -> None:
    assert code == 0
    assert "<h1>: 64 bytes from 10.0.0.5" in out
    assert out.count("5 packets transmitted, 5 received") == 5


def check_popenpoll(code: int, out: str) -> None:
    assert code == 0
    assert "<h3>: 64 bytes from 10.0.0.1" in out
    assert out.count("packets transmitted") == 3  # SIGINT reached every ping


def check_limit(code: int, out: str) -> None:
    assert code == 0
    rates = [float(r) for r in re.findall(r"Results: \['([\d.]+) Mbits/sec'", out)]
    assert len(rates) == (2 if HAS_RT else 1)
    assert all(5.0 < r <= 10.5 for r in rates), rates  # bw=10 through HTB
    cpu = [re.findall(r"[\d.]+", m) for m in re.findall(r"Results: \[([\d., ]+)\]\n", out)]
    assert cpu and all(float(x) < 15 for xs in cpu for x in xs), cpu  # cpu=.1 holds
    assert "(cfs 20000/100000us)" in out or os.cpu_count() != 2


def check_linuxrouter(code: int, out: str) -> None:
    assert code == 0
    assert re.search(r"192\.168\.1\.0 .* r0-eth1", out)
    assert "*** Results: 0% dropped (12/12 received)" in out


def check_multilink(code: int, out: str) -> None:
    assert code == 0
    assert "h1 h1-eth0:s1-eth1 h1-eth1:s1-eth3" in out
    assert "*** Results: 0% dropped (2/2 received)" in out


def check_numberedports(code: int, out: str) -> None:
    assert code == 0
    assert out.count("Validated.") == 5
    assert "s1-eth9 :  9" in out
    assert "*** Results: 0% dropped (20/20 received)" in out


def check_treeping64(code: int, out: str) -> None:
    assert code == 0
    assert "reference user: 0% packet loss" in out
    assert "Open vSwitch kernel: 0% packet loss" in out


def check_simpleperf(code: int, out: str) -> None:
    # bw=10, delay='5ms' on every link ("testmode": loss=0, as Mininet's own test of
    # this example runs it), UDP iperf h1 -> h4. Without sch_netem the links run on the
    # link engine (the build says so); with it, on tc.
    assert code == 0, out
    if not HAS_NETEM:
        assert "4 link(s) on the engine backend" in out, out
    assert "Testing bandwidth between h1 and h4" in out
    m = re.search(r"\*\*\* Results: \['10M', '([\d.]+) Mbits/sec', '([\d.]+) Mbits/sec'\]", out)
    assert m, out
    # Mininet lists [offered, server (receiver), client]. 10 Mbit/s of UDP payload
    # offered into links that count whole frames at 10 Mbit/s: a little less arrives.
    assert 8.5 < float(m.group(1)) <= 10.0, out


# Extra arguments for an example's own command line.
ARGS: dict[str, tuple[str, ...]] = {"simpleperf.py": ("testmode",)}


CASES = {
    "emptynet.py": ("pingall\nexit\n", 60, check_emptynet),
    "multiping.py": ("", 90, check_multiping),
    "popen.py": ("", 60, check_popen),
    "popenpoll.py": ("", 60, check_popenpoll),
    "limit.py": ("", 120, check_limit),
    "linuxrouter.py": ("pingall\nexit\n", 60, check_linuxrouter),
    "multilink.py": ("net\npingall\n", 60, check_multilink),
    "numberedports.py": ("", 60, check_numberedports),
    "treeping64.py": ("", 180, check_treeping64),
    "simpleperf.py": ("", 90, check_simpleperf),
}


@pytest.mark.parametrize("name", list(CASES))
def test_example(name: str) -> None:
    if not (EXAMPLES / name).is_file():
        pytest.skip(f"{EXAMPLES / name} is not installed")
    stdin, timeout, check = CASES[name]
    code, out, runs, took = run_example(name, stdin, timeout, ARGS.get(name, ()))
    print(f"{name}: exit {code} in {took:.1f} s, runs {runs}")
    try:
        check(code, out)
    except AssertionError as exc:
        raise AssertionError(f"{name} (exit {code}):\n{out[-4000:]}") from exc
    assert runs, out  # it did open a network
    assert_no_trace(runs)
