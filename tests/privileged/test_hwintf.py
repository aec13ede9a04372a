"""Mininet's hwintf.py: a host interface lent to a switch (Intf('IF', node=s1)), traffic
through it, and the interface given back with its name, MTU, state and addresses:
after a normal stop, and by `fidelnet clean` after the run was killed with SIGKILL.

Each case runs in a network namespace of its own (`unshare --net`), where a veth pair
stands in for a NIC and its cable: nothing is lent from the machine's own interfaces.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from _mnrun import run_to_end

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

EXAMPLE = Path("/usr/share/doc/mininet/examples/hwintf.py")

# Runs inside `unshare --net`: fnhw0 is lent, fnhw1 (its cable's far end) stays here
# with 10.0.0.100, reachable from the emulated hosts only through fnhw0.
DRIVER = r"""
import os, signal, subprocess, sys, time
def sh(*argv):
    subprocess.run(list(argv), check=True)
def show():
    return subprocess.run(["ip", "-o", "link", "show", "fnhw0"], capture_output=True,
                          text=True).stdout + subprocess.run(
        ["ip", "-o", "addr", "show", "fnhw0"], capture_output=True, text=True).stdout
sh("ip", "link", "set", "lo", "up")
sh("ip", "link", "add", "fnhw0", "type", "veth", "peer", "name", "fnhw1")
sh("ip", "link", "set", "fnhw0", "mtu", "1400", "up")
sh("ip", "addr", "add", "10.0.0.100/8", "dev", "fnhw1")
sh("ip", "link", "set", "fnhw1", "up")
print("BEFORE", show(), flush=True)
mn = [sys.executable, "-m", "fidelnet", "mn", sys.argv[2], "fnhw0"]
if sys.argv[1] == "stop":
    p = subprocess.run(mn, input="h1 ping -c 2 -W 2 10.0.0.100\nexit\n", text=True,
                       capture_output=True)
    print(p.stdout + p.stderr, flush=True)
else:
    p = subprocess.Popen(mn, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        if "Starting CLI" in line:
            break
    p.kill()
    p.wait()
    print("KILLED; fnhw0 here:", bool(subprocess.run(["ip", "link", "show", "fnhw0"],
          capture_output=True).returncode == 0), flush=True)
    c = subprocess.run([sys.executable, "-m", "fidelnet", "clean"], capture_output=True,
                       text=True)
    print("CLEAN", c.returncode, c.stdout + c.stderr, flush=True)
print("AFTER", show(), flush=True)
"""


def _run(mode: str) -> str:
    if not EXAMPLE.is_file():
        pytest.fail(f"{EXAMPLE} missing: make test installs Debian's mininet")
    argv = ["unshare", "--net", "--", sys.executable, "-c", DRIVER, mode, str(EXAMPLE)]
    code, out = run_to_end(argv, "", 180, f"hwintf ({mode})")
    assert code == 0, out
    return out


def _after(out: str) -> str:
    return out.split("AFTER", 1)[1]


def test_hwintf_lends_an_interface_and_gets_it_back() -> None:
    out = _run("stop")
    assert "*** Adding hardware interface fnhw0 to switch s1" in out, out
    # h1 reaches the far end of the lent interface's cable through s1 and fnhw0.
    assert "2 packets transmitted, 2 received" in out, out
    after = _after(out)
    assert "fnhw0@" in after and "mtu 1400" in after and ",UP," in after, out


def test_clean_gives_the_interface_back_after_kill_9() -> None:
    out = _run("kill")
    assert "KILLED; fnhw0 here: False" in out, out  # it was in the run's fabric
    assert "CLEAN 0" in out, out
    after = _after(out)
    assert "fnhw0@" in after and "mtu 1400" in after and ",UP," in after, out
