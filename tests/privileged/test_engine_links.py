"""Engine links on real namespaces: delay, loss, rate, runtime changes, flaps, a
crash of linkd. Tolerances here are loose; bench/links.py measures precisely."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from typing import Any

import pytest
from _servers import start_listening

from _precision import precise
from fidelnet import Network
from fidelnet.errors import ValidationError
from fidelnet.links.engine import LinkEngineError
from fidelnet.topology import LinkParams, LinkSpec, NodeSpec, TopologySpec

pytestmark = pytest.mark.privileged

H2 = "10.0.0.2"


def pair(ab: LinkParams, ba: LinkParams | None = None, backend: str = "engine") -> Network:
    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    link = LinkSpec("h1", "h2", params_ab=ab, params_ba=ba or LinkParams())
    link.backend = backend  # type: ignore[assignment]
    spec.add_link(link)
    return Network(spec)


def ping(
    net: Network, count: int, interval: float = 0.05, wait: int = 1
) -> tuple[float, list[float]]:
    """(percent lost, RTTs in ms) of pings h1 -> h2."""
    out, err, _ = net["h1"].pexec(
        ["ping", "-n", "-c", str(count), "-i", str(interval), "-W", str(wait), H2]
    )
    m = re.search(r"([\d.]+)% packet loss", out)
    if m is None and "unreachable" in out + err:
        return 100.0, []  # the interface is down: nothing was sent
    assert m, out + err
    return float(m.group(1)), [float(t) for t in re.findall(r"time=([\d.]+) ms", out)]


def test_delay_each_direction() -> None:
    with pair(LinkParams(delay=0.010), LinkParams(delay=0.005)) as net:
        link = net.links[0]
        assert link.backend == "engine"
        ping(net, 1)  # ARP
        lost, rtts = ping(net, 20)
        assert lost == 0.0
        assert min(rtts) >= 15.0, rtts
        assert sorted(rtts)[len(rtts) // 2] < 16.0, rtts
        # Every frame that entered left; one the kernel sent on its own (IPv6
        # neighbour discovery) may still be inside the 10 ms delay: let it land.
        deadline = time.monotonic() + 1.0
        stats = link.stats()
        while stats["ab"]["tx_packets"] != stats["ab"]["rx_packets"]:
            assert time.monotonic() < deadline, stats["ab"]
            time.sleep(0.02)
            stats = link.stats()
        assert stats["ab"]["tx_packets"] >= 21
        assert stats["ab"]["lateness"]["count"] == stats["ab"]["tx_packets"]


def test_random_loss_is_seeded_and_counted() -> None:
    with pair(LinkParams(loss=10.0, seed=11)) as net:
        net["h1"].pexec(["ping", "-c", "3", "-i", "0.01", "-W", "1", H2])  # ARP
        before = net.links[0].stats()["ab"]
        lost, _ = ping(net, 600, interval=0.002)
        # 99% binomial interval for 600 trials at p=0.1: about 6.8 %..13.2 %.
        assert 6.0 <= lost <= 14.0, lost
        ab = net.links[0].stats()["ab"]
        arrived = ab["rx_packets"] - before["rx_packets"]
        dropped = ab["drops"]["loss"] - before["drops"]["loss"]
        extra = arrived - 600  # ARP and IPv6 neighbour discovery share the link
        assert 0 <= extra <= 10, arrived
        assert ab["tx_packets"] - before["tx_packets"] == arrived - dropped
        lost_pings = round(lost * 6)
        assert lost_pings <= dropped <= lost_pings + extra  # the model lost every one


def _iperf(net: Network, args: list[str]) -> dict[str, Any]:
    server = start_listening(net["h2"], ["iperf3", "-s", "-1"], 5201)
    try:
        out, err, code = net["h1"].pexec(["iperf3", "-c", H2, "-J", *args])
        assert code == 0, out + err
        result: dict[str, Any] = json.loads(out)
        return result
    finally:
        server.wait(10)


def test_rate_tcp_goodput() -> None:
    with pair(LinkParams(bw=10e6)) as net:
        result = _iperf(net, ["-t", "3"])
        goodput = result["end"]["sum_received"]["bits_per_second"]
        # TCP payload is 1448 of 1514 bytes per frame: at most 9.57 Mbit/s of goodput.
        assert 8.5e6 < goodput < 9.6e6, goodput
        ab = net.links[0].stats()["ab"]
        assert ab["queue"]["max_packets"] > 0


def test_runtime_change_keeps_old_params_on_bad_value() -> None:
    with pair(LinkParams(delay=0.005), LinkParams(delay=0.005)) as net:
        link = net.links[0]
        ping(net, 1)
        link.set(delay="20ms", direction="h1")
        _, rtts = ping(net, 5)
        assert min(rtts) >= 25.0 and sorted(rtts)[2] < 27.0, rtts
        with pytest.raises(ValidationError, match="at most 100"):
            link.set(loss="150%")
        with pytest.raises(ValidationError, match="unknown link parameter"):
            link.set(latency="1ms")
        assert link.params("ab") == LinkParams(delay=0.020)
        _, rtts = ping(net, 5)
        assert min(rtts) >= 25.0 and sorted(rtts)[2] < 27.0, rtts


def test_schedule_and_flap() -> None:
    with pair(LinkParams(delay=0.002)) as net:
        link = net.links[0]
        ping(net, 1)
        sched = link.schedule([(0.0, {"delay": "30ms"}), (0.2, {"delay": "1ms"})])
        assert sched.wait(5)
        assert sched.errors == [] and len(sched.applied) == 2
        assert link.params("ab").delay == pytest.approx(0.001)
        assert link.params("ba").delay == pytest.approx(0.001)
        link.down()
        lost, _ = ping(net, 3)
        assert lost == 100.0
        link.up()
        time.sleep(0.2)
        lost, _ = ping(net, 3)
        assert lost == 0.0
        with pytest.raises(ValidationError, match="not decreasing"):
            link.schedule([(1.0, "down"), (0.5, "up")])


def test_linkd_crash_is_detected_reported_and_cleaned_up() -> None:
    net = pair(LinkParams(delay=0.001)).start()
    try:
        engine = net.engine
        assert engine is not None and engine.pid is not None
        os.kill(engine.pid, signal.SIGKILL)  # the daemon we started, by its pid
        deadline = time.monotonic() + 5
        while engine.failure is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.failure is not None
        assert "killed by signal 9" in engine.failure
        with pytest.raises(LinkEngineError, match="died unexpectedly"):
            net.links[0].stats()
    finally:
        net.stop()
    assert net.engine_failure is not None


def test_tc_backend_asked_by_name_refuses_a_runtime_change_it_cannot_do() -> None:
    # Asked for by name, tc stays tc: the change is refused and the link unchanged.
    # (Left to 'auto', the link moves onto the engine: test_link_divert.py.)
    with pair(LinkParams(bw=20e6), backend="tc") as net:
        link = net.links[0]
        assert link.backend == "tc"
        if "netem" in net.kernel_caps():
            pytest.skip("this kernel has sch_netem")
        with pytest.raises(Exception, match="sch_netem.*engine"):
            link.set(delay="5ms")
        assert link.backend == "tc" and link.params("ab").delay is None
        link.set(bw="5Mbit")  # HTB changes in place
        out, _, _ = net["h1"].pexec(["tc", "class", "show", "dev", "h1-eth0"])
        assert "rate 5Mbit" in out


def test_trace_sets_the_rate(tmp_path: Any) -> None:
    # One delivery opportunity per millisecond: at most one full frame per ms, i.e.
    # 1514 * 8 bit/ms = 12.1 Mbit/s of frames, 11.6 Mbit/s of TCP payload.
    trace = tmp_path / "flat.trace"
    trace.write_text("".join(f"{t}\n" for t in range(1, 101)))
    with pair(LinkParams(trace=str(trace))) as net:
        result = _iperf(net, ["-t", "3"])
        goodput = result["end"]["sum_received"]["bits_per_second"]
        assert 9.0e6 < goodput < 11.7e6, goodput


def test_an_unshaped_link_can_be_shaped_at_runtime() -> None:
    with pair(LinkParams(), backend="auto") as net:
        link = net.links[0]
        assert link.backend == "veth"
        link.set(bw="5Mbit")  # the kernel's qdiscs are probed only now
        assert link.backend == "tc"
        out, _, _ = net["h1"].pexec(["tc", "class", "show", "dev", "h1-eth0"])
        assert "rate 5Mbit" in out


def test_linkd_runs_real_time_by_default_and_says_so(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fidelnet.kernel import procfs
    from fidelnet.links.engine import REALTIME_PRIORITY, SPIN_BUDGET_PCT, SPIN_US

    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path))  # no profile
    with pair(LinkParams(delay=0.001)) as net:
        engine = net.engine
        assert engine is not None and engine.pid is not None
        assert procfs.sched_policy(engine.pid) == ("SCHED_FIFO", REALTIME_PRIORITY)
        assert engine.scheduling == f"SCHED_FIFO {REALTIME_PRIORITY}"
        assert engine.scheduling_reason == "default"
        loop = engine.loop_stats()
        assert loop["max_lead_ns"] == SPIN_US * 1000
        assert loop["spin_budget_pct"] == SPIN_BUDGET_PCT
        assert (
            engine.release.startswith(f"spin up to {SPIN_US} µs") and "(default)" in engine.release
        )


def test_linkd_follows_the_profiles_choice(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import datetime as _dt

    from fidelnet._version import __version__
    from fidelnet.fidelity import profile as prof
    from fidelnet.fidelity.machine import machine
    from fidelnet.kernel import procfs

    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path))
    m = machine()
    prof.save(
        prof.Profile(
            key=prof.machine_key(m), fidelnet=__version__, machine=m,
            measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(), seconds=1.0,
            command=["fidelnet", "calibrate"], steal_at_rest_pct=0.0,
            engine_realtime_priority=0, engine_spin_us=0,
        )
    )  # fmt: skip
    with pair(LinkParams(delay=0.001)) as net:
        engine = net.engine
        assert engine is not None and engine.pid is not None
        assert procfs.sched_policy(engine.pid) == ("SCHED_OTHER", 0)
        assert engine.scheduling_reason.startswith("calibrated, profile ")
        assert engine.loop_stats()["max_lead_ns"] == 0
        assert engine.release.startswith("timer only, no spin (calibrated, profile ")


def test_departures_leave_on_time_with_the_spin(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The release path: a 10 ms link at 2 kpps. Without a spin every departure is a
    timer wake-up late (about 20-40 µs on a virtual machine); with it the median
    departure leaves within a few µs of its deadline, and the loop says how much it
    spun and how late its timer woke."""
    from fidelnet.measure import udp

    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path))  # no profile: the defaults

    def measure() -> tuple[Any, dict[str, Any], dict[str, Any]]:
        with pair(LinkParams(delay=0.010)) as net:
            r = udp(net, "h1", "h2", rate_pps=2000, duration=2.0, monitor=False)
            late = net.links[0].stats()["ab"]["lateness"]
            loop = net.engine.loop_stats() if net.engine is not None else {}
        # What no load may change: nothing lost, nothing early, the loop's accounts.
        assert r.lost == 0
        assert late["count"] >= 4000
        assert loop["spin_ns"] > 0 and 0 < loop["lead_ns"] <= loop["max_lead_ns"], loop
        assert loop["timer_wakeups"] > 0 and loop["wake_late"]["count"] == loop["timer_wakeups"]
        return r, late, loop

    def miss(got: tuple[Any, dict[str, Any], dict[str, Any]]) -> str | None:
        r, late, _ = got
        # The precision: the median departure on time, and the one-way delay the
        # receiver saw the link's 10 ms and little more.
        if late["p50_ns"] > 10_000 or r.latency.p50_ns > 10_000_000 + 200_000:
            return f"departure lateness {late}, one-way latency {r.latency}"
        return None

    precise(measure, miss)


def test_linkd_real_time_off_when_asked() -> None:
    from fidelnet.kernel import procfs

    spec = TopologySpec()
    spec.add_node(NodeSpec("h1", ip="10.0.0.1/24"))
    spec.add_node(NodeSpec("h2", ip="10.0.0.2/24"))
    link = LinkSpec("h1", "h2", params_ab=LinkParams(delay=0.001), params_ba=LinkParams())
    link.backend = "engine"
    spec.add_link(link)
    with Network(spec, engine_args=["--realtime-priority", "0"]) as net:
        engine = net.engine
        assert engine is not None and engine.pid is not None
        assert procfs.sched_policy(engine.pid) == ("SCHED_OTHER", 0)
        assert engine.scheduling == "SCHED_OTHER"
        lost, _ = ping(net, 3)
        assert lost == 0.0
