"""Links follow virtual time (issue 11): in a network dilated by a TDF, engine links
run their rate and delay in the nodes' virtual time (linkd reads the run's clock
page), tc links are shaped at the rate divided by the TDF, and each node's TCP
minimum RTO is scaled. Programs in the nodes see the configured network: ping over
a 10 ms engine link prints a 20 ms RTT, iperf3 over a link configured at 10 Gbit/s
(2.5 Gbit/s of real time at TDF 4) reports about 10 Gbit/s."""

from __future__ import annotations

import json
import os
import re
import time

import pytest

from _precision import precise
from fidelnet import Network
from fidelnet.measure.iperf3 import listening
from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
from fidelnet.topology.spec import LinkParams

pytestmark = pytest.mark.privileged

_WIRE = 1448 / 1514  # TCP goodput per byte on the wire (1500-byte MTU, timestamps)


def _pair(backend: str, params: LinkParams) -> TopologySpec:
    t = TopologySpec()
    t.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    t.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    t.add_link(LinkSpec("h1", "h2", backend=backend, params=params))
    return t


def _rtt_ms(out: str) -> tuple[float, float]:
    m = re.search(r"= ([\d.]+)/([\d.]+)/", out)
    assert m, out
    return float(m.group(1)), float(m.group(2))


def test_ping_over_a_dilated_engine_link_prints_the_configured_rtt() -> None:
    with Network(_pair("engine", LinkParams(delay=0.010)), tdf=4.0) as net:
        h1 = net["h1"]
        h1.cmd("ping -c 1 -W 5 10.0.0.2")  # neighbour discovery
        began = time.monotonic()
        low, avg = _rtt_ms(h1.cmd("ping -c 3 -i 0.2 -W 5 10.0.0.2"))
        wall = time.monotonic() - began
        assert low >= 19.5 and avg <= 23, (low, avg)  # 2 x 10 virtual ms
        assert wall >= 0.95 * 4 * (2 * 0.2 + 0.02), wall  # 4x the virtual span
        net.set_tdf(2.0)  # in flight or not, the link's delay stays 10 virtual ms
        low, avg = _rtt_ms(h1.cmd("ping -c 3 -i 0.2 -W 5 10.0.0.2"))
        assert low >= 19.5 and avg <= 23, (low, avg)
        stats = net.links[0].stats()
        assert stats["ab"]["tx_packets"] >= 7


def _iperf(net: Network, seconds: int = 3) -> float:
    h1, h2 = net["h1"], net["h2"]
    server = h2.popen(["iperf3", "-s", "-1"])
    try:
        deadline = time.monotonic() + 30  # a bound on a busy machine, not a timing
        while not listening(server, 5201):
            assert server.poll() is None and time.monotonic() < deadline, "iperf3 -s"
            time.sleep(0.05)
        out = h1.cmd(f"iperf3 -c 10.0.0.2 -t {seconds} -O 1 -J")
    finally:
        server.wait(timeout=60)
    return float(json.loads(out)["end"]["sum_received"]["bits_per_second"])


def test_iperf3_over_a_10_gbit_engine_link_at_tdf_4_reports_10_gbit() -> None:
    rate = 10e9

    def measure() -> float:
        with Network(_pair("engine", LinkParams(bw=rate)), tdf=4.0) as net:
            got = _iperf(net)
        assert got <= rate, got / 1e9  # never above the link's rate, whatever the load
        return got

    # Within 5% of the configured rate on the wire (goodput excludes the headers).
    precise(measure, lambda got: None if got >= 0.95 * rate * _WIRE else f"{got / 1e9} Gbit/s")


def test_a_dilated_tc_link_is_shaped_at_the_real_rate_and_follows_set_tdf() -> None:
    rate = 400e6
    with Network(_pair("tc", LinkParams(bw=rate)), tdf=4.0) as net:
        h1 = net["h1"]
        assert "rate 100Mbit" in h1.cmd("tc class show dev h1-eth0")
        got = _iperf(net, 2)
        assert 0.95 * rate * _WIRE <= got <= rate * 1.02, got / 1e6
        assert h1.cmd("sysctl -n net.ipv4.tcp_rto_min_us").strip() == "800000"
        net.set_tdf(2.0)
        assert "rate 200Mbit" in h1.cmd("tc class show dev h1-eth0")
        assert net["h2"].cmd("sysctl -n net.ipv4.tcp_rto_min_us").strip() == "400000"


def test_the_adaptive_tdf_rises_under_load_and_falls_when_idle() -> None:
    from fidelnet.measure.provenance import collect
    from fidelnet.topology.spec import AutoTdf
    from fidelnet.vt.adapt import LADDER
    from fidelnet.vt.run import _adaptors

    auto = AutoTdf(low=1.0, high=8.0, period_s=0.25)
    with Network(_pair("engine", LinkParams(bw=10e9)), tdf=auto) as net:
        assert net.tdf_now() == 1.0
        # A load the adaptor cannot miss, whatever else the machine does: every core
        # busy in a node (iperf3 alone may leave a core under the 85 % threshold on a
        # machine whose engine is slowed by others, and then nothing need rise).
        burners = [
            net["h1"].popen(["sh", "-c", "while :; do :; done"]) for _ in range(os.cpu_count() or 2)
        ]
        try:
            deadline = time.monotonic() + 60
            while net.tdf_now() < 2.0 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            for burner in burners:
                burner.kill()
                burner.wait()
        # The flow starts at the factor the load chose; the adaptor keeps what the
        # flow needs (and raises further if the engine is late) while it runs.
        got = _iperf(net, 3)
        peak = max(e["tdf"] for e in collect(net).virtual_time["timeline"])
        # Idle now: the adaptor lowers once its memory of lost fidelity lets it (a
        # raise for lateness soon after a lowering doubles that hold, up to
        # max_backoff_s), then one step per calm_windows calm samples.
        adaptor = _adaptors[net]
        policy = adaptor.policy
        steps = sum(1 for x in LADDER if 1.0 < x <= net.tdf_now())
        held = max(adaptor.state.no_lower_until - time.monotonic(), policy.hold_s)
        deadline = time.monotonic() + held + steps * (policy.calm_windows + 2) * auto.period_s + 30
        while net.tdf_now() > 1.0 and time.monotonic() < deadline:
            time.sleep(0.5)
        timeline = collect(net).virtual_time["timeline"]
    reasons = [e["reason"] for e in timeline]
    assert reasons[0] == "start" and peak >= 2.0, timeline
    assert any(r.startswith("auto up: ") for r in reasons), reasons
    assert reasons[-1].startswith("auto down: "), reasons
    assert timeline[-1]["tdf"] == 1.0, timeline
    # At the factor it chose, the 10 Gbit/s link carried close to its rate.
    assert got >= 0.85 * 10e9 * _WIRE, got / 1e9


def test_a_tcp_measurement_waits_for_the_dilated_flow() -> None:
    """The default timeout is in real time: at TDF 8 a 2 s flow takes 16 s, more than
    the undilated default (2 s + 10 s) would wait."""
    from fidelnet.measure.tcp import tcp

    with Network(_pair("tc", LinkParams(bw=100e6)), tdf=8.0) as net:
        result = tcp(net, [("h1", "h2")], duration=2, interval=1.0, warmup=1)
    assert 0.9 * 100e6 * _WIRE <= result.flows[0].goodput_bps <= 100e6, result.flows[0]
