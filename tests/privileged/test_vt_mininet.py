"""VT-Mininet's script names on fidelnet (issue 11): ``custom(CPULimitedHost, ...,
tdf=4)`` dilates the run, ``host.tdf`` and ``net.cpu_usage`` read as VT-Mininet's
scripts use them, ``Mininet(..., tdf=)`` does the same, and two different factors in
one run are refused naming the host's field before its namespace exists."""

from __future__ import annotations

import itertools
import time
from functools import partial

import pytest

from fidelnet.compat.link import TCLink
from fidelnet.compat.net import Mininet
from fidelnet.compat.node import CPULimitedHost, Host, LinuxBridge
from fidelnet.compat.topo import Topo
from fidelnet.compat.util import custom, irange
from fidelnet.errors import ValidationError

pytestmark = pytest.mark.privileged


class StringTopo(Topo):
    """h1 - s1 - ... - sN - h2, as VT-Mininet's experiments build it."""

    def build(self, n: int = 3) -> None:  # type: ignore[override]
        h1, h2 = self.addHost("h1"), self.addHost("h2")
        switches = [self.addSwitch(f"s{i}") for i in irange(1, n)]
        self.addLink(h1, switches[0])
        for a, b in itertools.pairwise(switches):
            self.addLink(a, b)
        self.addLink(switches[-1], h2)


def test_a_vt_mininet_script_runs_dilated(caplog: pytest.LogCaptureFixture) -> None:
    host = custom(CPULimitedHost, sched="cfs", period_us=100000, cpu=0.5, tdf=4)
    link = partial(TCLink, bw=200)  # (with delay, links here move to the engine: no netem)
    net = Mininet(topo=StringTopo(3), host=host, switch=LinuxBridge, link=link)
    try:
        net.start()
        src, dst = net.hosts
        assert (src.tdf, dst.tdf) == (4.0, 4.0)
        assert net.ping([src, dst]) == 0.0
        began = time.monotonic()
        src.cmd("sleep 0.25")
        assert 0.95 <= time.monotonic() - began <= 1.6
        # 200 Mbit/s configured: 50 Mbit/s of real time in the HTB class.
        assert "rate 50Mbit" in src.cmd(f"tc class show dev {src.defaultIntf()}")
        assert 0.0 <= net.cpu_usage <= 100.0
    finally:
        net.stop()
    assert not [r.getMessage() for r in caplog.records if "period_us" in r.getMessage()]


def test_mininet_takes_a_tdf_and_one_run_has_one_factor() -> None:
    net = Mininet(switch=LinuxBridge, tdf=2)
    try:
        h1 = net.addHost("h1")
        assert h1.tdf == 2.0
        with pytest.raises(ValidationError) as e:
            net.addHost("h2", cls=Host, tdf=3)
        assert e.value.field == "h2.tdf" and "one time dilation factor" in str(e.value)
        assert "h2" not in net.fn_net.spec.nodes
        net.addHost("h3", tdf=2)  # the same factor is fine
    finally:
        net.stop()
