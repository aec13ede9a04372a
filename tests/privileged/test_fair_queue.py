"""The tc backend's fair queue (``queue: fq``): flow classes under the rate, a flow
classifier on the root, and what it is for: a flow that starts while another from the
same host fills the link still gets its share."""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest

from fidelnet import Network
from fidelnet.kernel.tc import FQ_CLASSES
from fidelnet.topology import LinkParams, single

pytestmark = pytest.mark.privileged


def fork_out(queue: str | None) -> Network:
    spec = single(3)
    for link in spec.links:
        link.params = LinkParams(bw=100e6)
        link.params_ab = LinkParams(queue=queue)  # h -> s1: what the host sends
    return Network(spec)


def goodput(proc: subprocess.Popen[str]) -> list[float]:
    out, _ = proc.communicate(timeout=30)
    return [i["sum"]["bits_per_second"] / 1e6 for i in json.loads(out)["intervals"]]


def test_fq_builds_its_flow_classes_and_a_rate_change_rebuilds_them() -> None:
    with fork_out("fq") as net:
        h1 = net["h1"]
        classes = h1.cmd("tc class show dev h1-eth0")
        assert len(re.findall(r"class htb 1:1[0-3][0-9a-f] parent 1:1 ", classes)) == FQ_CLASSES
        assert "fidelnet_fq" in h1.cmd("tc filter show dev h1-eth0")
        assert "default 0x100" in h1.cmd("tc qdisc show dev h1-eth0")
        link = next(lk for lk in net.links if "h1" in (lk.spec.a, lk.spec.b))
        link.set(bw="50Mbit", direction="ab")
        classes = h1.cmd("tc class show dev h1-eth0")
        assert re.search(r"class htb 1:1 root rate 50Mbit ceil 50Mbit", classes), classes
        assert len(re.findall(r"parent 1:1 ", classes)) == FQ_CLASSES
        assert "fidelnet_fq" in h1.cmd("tc filter show dev h1-eth0")
        assert "0% packet loss" in h1.cmd(f"ping -c 2 -i 0.2 {net['h2'].ip}")


def _late_flow() -> tuple[list[float], list[float], int]:
    """The first and the late flow's per-second goodput, and how many flow classes
    carried them (1: their hashes fell in one class)."""
    with fork_out("fq") as net:
        h1, h2, h3 = net["h1"], net["h2"], net["h3"]
        servers = [h.popen(["iperf3", "-s", "-1", "-p", "5201"]) for h in (h2, h3)]
        try:
            time.sleep(0.5)
            first = h1.popen(
                ["iperf3", "-c", h2.ip, "-p", "5201", "-t", "6", "-J"],
                stdout=subprocess.PIPE,
                text=True,
            )
            time.sleep(1.0)
            late = h1.popen(
                ["iperf3", "-c", h3.ip, "-p", "5201", "-t", "5", "-J"],
                stdout=subprocess.PIPE,
                text=True,
            )
            a, b = goodput(first), goodput(late)
            stats = h1.cmd("tc -s class show dev h1-eth0")
        finally:
            for s in servers:
                s.kill()
                s.wait()
    sent = re.findall(r"class htb 1:1[0-3][0-9a-f] .*?\n Sent (\d+) bytes", stats)
    return a, b, sum(int(x) > 1_000_000 for x in sent)


def test_a_late_flow_gets_its_share_of_the_hosts_link() -> None:
    # Without fq (one FIFO at h1), the flow started a second late stays at 4-6 Mbit/s
    # for seconds on this kernel (TCP Small Queues); with fq both converge within 1 s.
    # Two flows hash into one class with probability 1/64 (fq's documented limit, as
    # fq_codel's): such an attempt says nothing of the classes' fairness and is made
    # again; every attempt whose flows had classes of their own is judged.
    shared = 0
    for _attempt in range(3):
        a, b, classes = _late_flow()
        if classes < 2:
            shared += 1
            continue
        # The late flow's last 3 s, and the first flow's same seconds: each near 50.
        assert min(b[2:5]) > 35, (a, b)
        assert min(a[3:6]) > 35, (a, b)
        return
    pytest.skip(f"in all {shared} attempts the two flows hashed into one class")
