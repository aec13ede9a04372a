"""Hardware links (backend ``hw``, CIMininet's ``HwPair``) on this machine, where two
veth pairs stand in for two cabled NIC pairs: the code path after the pair exists is
the same. ``Mininet(topo, link=HwPair)`` on h1 - s1 - h2 pings; each interface moved
into its node under the link end's name; afterwards all four are back in the
namespace they came from with their name, MTU, MAC and state, and without the
qdiscs the run put on them. The same after ``kill -9`` and ``fidelnet clean``.

Each case runs in a network namespace of its own (``unshare --net``): nothing is
taken from the machine's own interfaces.
"""

from __future__ import annotations

import os
import sys

import pytest
from _mnrun import run_to_end

pytestmark = [
    pytest.mark.privileged,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root: creates network namespaces"),
]

PAIRS = [("fnp0a", "fnp0b"), ("fnp1a", "fnp1b")]

DRIVER = r"""
import json, os, signal, subprocess, sys, time
PAIRS = [("fnp0a", "fnp0b"), ("fnp1a", "fnp1b")]
def sh(*argv):
    subprocess.run(list(argv), check=True)
def show():
    out = {}
    for pair in PAIRS:
        for name in pair:
            link = json.loads(subprocess.run(["ip", "-j", "link", "show", name],
                              capture_output=True, text=True).stdout or "[{}]")[0]
            qd = subprocess.run(["tc", "qdisc", "show", "dev", name], capture_output=True,
                                text=True).stdout
            out[name] = {"mtu": link.get("mtu"), "mac": link.get("address"),
                         "up": "UP" in link.get("flags", []), "htb": "htb" in qd,
                         "alias": link.get("ifalias")}
    return out
sh("ip", "link", "set", "lo", "up")
for i, (a, b) in enumerate(PAIRS):
    sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
    sh("ip", "link", "set", a, "mtu", str(1400 + i), "address", f"02:aa:00:00:0{i}:0a")
print("BEFORE", json.dumps(show()), flush=True)
SCRIPT = '''
import sys
from mininet.link import HwPair, TCIntf
from mininet.net import Mininet
from mininet.node import LinuxBridge
from mininet.topo import Topo
class T(Topo):
    def build(self):
        s1 = self.addSwitch("s1")
        self.addLink(self.addHost("h1"), s1)
        self.addLink(self.addHost("h2"), s1, intf=TCIntf, bw=50)
HwPair.available_pairs = [("fnp0a", "fnp0b"), ("fnp1a", "fnp1b")]
net = Mininet(topo=T(), link=HwPair, switch=LinuxBridge, controller=None)
net.start()
h1 = net["h1"]
print("H1LINKS", " | ".join(h1.cmd("ip -o link show").splitlines()), flush=True)
print("H2QDISC", " | ".join(net["h2"].cmd("tc qdisc show dev h2-eth0").splitlines()), flush=True)
print("LOSS", net.pingAll(), flush=True)
if sys.argv[1] == "kill":
    print("READY", flush=True)
    import time
    time.sleep(600)
net.stop()
'''
script = [sys.executable, "-c", SCRIPT, sys.argv[1]]
env = dict(os.environ)
env["PYTHONPATH"] = os.pathsep.join([sys.argv[2], env.get("PYTHONPATH", "")])
if sys.argv[1] == "stop":
    p = subprocess.run(script, capture_output=True, text=True, env=env)
    print(p.stdout + p.stderr, flush=True)
    print("EXIT", p.returncode, flush=True)
else:
    p = subprocess.Popen(script, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, env=env)
    for line in p.stdout:
        print(line, end="", flush=True)
        if line.startswith("READY"):
            break
    p.kill()
    p.wait()
    print("KILLED; fnp0a here:", subprocess.run(["ip", "link", "show", "fnp0a"],
          capture_output=True).returncode == 0, flush=True)
    c = subprocess.run([sys.executable, "-m", "fidelnet", "clean"], capture_output=True,
                       text=True)
    print("CLEAN", c.returncode, c.stdout + c.stderr, flush=True)
print("AFTER", json.dumps(show()), flush=True)
"""


def _compat_path() -> str:
    from fidelnet.compat import shim_path

    return shim_path()


def _run(mode: str) -> str:
    argv = ["unshare", "--net", "--", sys.executable, "-c", DRIVER, mode, _compat_path()]
    code, out = run_to_end(argv, "", 240, f"HwPair ({mode})")
    assert code == 0, out
    return out


def _state(out: str, tag: str) -> dict[str, dict[str, object]]:
    import json

    line = next(x for x in out.splitlines() if x.startswith(tag + " "))
    return dict(json.loads(line.split(" ", 1)[1]))


def _check_given_back(out: str) -> None:
    before, after = _state(out, "BEFORE"), _state(out, "AFTER")
    assert set(after) == {n for p in PAIRS for n in p}
    for name, was in before.items():
        now = after[name]
        assert now["mtu"] == was["mtu"] and now["mac"] == was["mac"], (name, was, now)
        assert now["up"] == was["up"] and not now["htb"], (name, was, now)
        assert now["alias"] == was["alias"], (name, was, now)  # no run's mark left


def test_hwpair_line_pings_and_gives_every_interface_back() -> None:
    out = _run("stop")
    assert "EXIT 0" in out, out
    assert "LOSS 0.0" in out, out
    links = next(x for x in out.splitlines() if x.startswith("H1LINKS"))
    assert "h1-eth0" in links and "fnp0a" not in links, links
    assert "htb" in next(x for x in out.splitlines() if x.startswith("H2QDISC")), out
    _check_given_back(out)


def test_clean_gives_every_pair_back_after_kill_9() -> None:
    out = _run("kill")
    assert "LOSS 0.0" in out, out
    assert "KILLED; fnp0a here: False" in out, out
    assert "CLEAN 0" in out, out
    _check_given_back(out)


EXTERNAL = r"""
import json, subprocess, sys
def sh(*argv):
    subprocess.run(list(argv), check=True)
sh("ip", "link", "set", "lo", "up")
# fnx0 stands in for a NIC whose cable leads to an outside load generator (fnx1, here)
sh("ip", "link", "add", "fnx0", "type", "veth", "peer", "name", "fnx1")
sh("ip", "link", "add", "fny0", "type", "veth", "peer", "name", "fny1")
for dev in ("fnx0", "fnx1", "fny0", "fny1"):
    sh("ip", "link", "set", dev, "up")
sh("ip", "addr", "add", "192.168.77.1/24", "dev", "fnx1")
sh("ip", "addr", "add", "192.168.78.1/24", "dev", "fny1")
from fidelnet import Network
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import ExternalSpec
t = TopologySpec()
t.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
t.add_link(LinkSpec("h1", "h2"))
t.external = [ExternalSpec("h1", "fnx0", ip="192.168.77.2/24"),
              ExternalSpec("h2", "fny0", "lend", name="h2-out", ip="192.168.78.2/24")]
with Network(t) as net:
    h1, h2 = net["h1"], net["h2"]
    print("H1", h1.cmd("ip -d -o link show h1-ext0").strip(), flush=True)
    print("PING1", h1.cmd("ping -c 2 -W 2 192.168.77.1").count(" 0% packet loss"), flush=True)
    print("PING2", h2.cmd("ping -c 2 -W 2 192.168.78.1").count(" 0% packet loss"), flush=True)
    print("DEFAULT", h1.default_intf().name, flush=True)
    print("HOSTKEEPS", subprocess.run(["ip", "link", "show", "fnx0"]).returncode, flush=True)
    print("LENT", subprocess.run(["ip", "link", "show", "fny0"],
                                 capture_output=True).returncode, flush=True)
print("AFTER", subprocess.run(["ip", "-o", "link", "show", "fny0"], capture_output=True,
                              text=True).stdout.strip(), flush=True)
"""


def test_external_interfaces_macvlan_and_lent_reach_the_outside() -> None:
    argv = ["unshare", "--net", "--", sys.executable, "-c", EXTERNAL]
    code, out = run_to_end(argv, "", 180, "external interfaces")
    assert code == 0, out
    assert "h1-ext0@" in out and "macvlan mode bridge" in out, out
    assert "PING1 1" in out and "PING2 1" in out, out
    assert "DEFAULT h1-eth0" in out, out  # the link stays the node's first interface
    assert "HOSTKEEPS 0" in out and "LENT 1" in out, out
    after = next(x for x in out.splitlines() if x.startswith("AFTER"))
    assert "fny0@" in after and "UP" in after, out  # given back, up as it was
    assert "fidelnet:" not in after, out  # without the run's mark
