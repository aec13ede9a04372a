"""The fidelity package without a kernel: thresholds, verdicts, the judge's rules on
hand-made monitor records, profiles (foreign, corrupt, atomic), /proc parsers."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fidelnet.errors import ValidationError
from fidelnet.fidelity import profile as prof
from fidelnet.fidelity.engine_seen import lateness_delta
from fidelnet.fidelity.engine_seen import percentile as _percentile
from fidelnet.fidelity.judge import Observation, judge
from fidelnet.fidelity.record import (
    CoreSeries,
    CpuSeries,
    EngineDirection,
    InterfaceDrops,
    MonitorRecord,
    NodeThrottle,
    TimerProbe,
)
from fidelnet.fidelity.thresholds import DEFAULT, parse
from fidelnet.fidelity.verdict import Reason, Verdict, worst
from fidelnet.kernel import cgroups, procfs


def _core(cpu: int, n: int, busy: float, softirq: float = 0.0, steal: float = 0.0) -> CoreSeries:
    user = max(0.0, busy - softirq - steal)
    return CoreSeries(
        cpu=cpu,
        user=[user] * n,
        system=[0.0] * n,
        softirq=[softirq] * n,
        irq=[0.0] * n,
        steal=[steal] * n,
        iowait=[0.0] * n,
        idle=[100.0 - busy] * n,
    )


def _record(
    busy: tuple[float, float] = (50.0, 10.0),
    *,
    pressure: float = 1.0,
    steal: float = 0.0,
    n: int = 60,
    **kw: object,
) -> MonitorRecord:
    cpu = CpuSeries(
        interval_s=0.05,
        t_s=[round(0.05 * i, 3) for i in range(n)],
        cores=[_core(0, n, busy[0], steal=steal), _core(1, n, busy[1], steal=steal)],
        pressure_pct=[pressure] * n,
    )
    return MonitorRecord(duration_s=n * 0.05, window_s=(0.0, n * 0.05), cpu=cpu, **kw)  # type: ignore[arg-type]


UDP = Observation(kind="udp", packets=30_000, requested_pps=10_000, achieved_pps=10_000)


def test_worst_and_summary() -> None:
    assert worst([]) == "trusted"
    assert worst(["trusted", "untrusted", "degraded"]) == "untrusted"
    v = Verdict.of(
        [
            Reason(code="a", level="degraded", message="steal 7 %"),
            Reason(code="b", level="untrusted", message="receiver dropped 12 packets"),
            Reason(code="c", level="trusted", message="a note"),
        ],
        monitored=True,
    )
    assert v.level == "untrusted"
    assert [r.code for r in v.reasons] == ["b", "a", "c"]
    assert v.summary() == "untrusted: receiver dropped 12 packets; steal 7 %"
    assert len(v.problems()) == 2


def test_clean_record_is_trusted() -> None:
    v = judge(UDP, _record())
    assert v.level == "trusted", v.reasons
    assert v.monitored


def test_unmonitored_is_never_trusted() -> None:
    v = judge(UDP, None)
    assert v.level == "degraded"
    assert v.reasons[0].code == "monitor_absent"


def test_saturation_and_pressure_untrusted() -> None:
    v = judge(UDP, _record((100.0, 99.5), pressure=55.0))
    codes = {r.code: r for r in v.reasons}
    assert v.level == "untrusted"
    assert codes["cpu_saturated"].level == "untrusted"
    assert "3.0 s of 3.0 s" in codes["cpu_saturated"].message
    assert codes["cpu_pressure"].value == 55.0


def test_saturation_on_unshaped_path_is_at_most_degraded() -> None:
    obs = Observation(kind="tcp", packets=1000, capacity_limited=False)
    v = judge(obs, _record((100.0, 100.0)))
    assert {r.code: r.level for r in v.reasons}["cpu_saturated"] == "degraded"


def test_only_window_is_judged() -> None:
    rec = _record((100.0, 100.0), pressure=90.0)
    # Traffic in the last 0.5 s only: shift the window past the saturated samples.
    quiet = rec.model_copy(update={"window_s": (10.0, 11.0)})
    assert judge(UDP, quiet).level == "untrusted"  # empty window: whole record judged
    half = _record((100.0, 100.0), n=10).cpu.cores
    series = CpuSeries(
        interval_s=0.05,
        t_s=[0.05 * i for i in range(20)],
        cores=[
            c.model_copy(
                update={
                    k: [*getattr(c, k), *([0.0] * 10 if k != "idle" else [100.0] * 10)]
                    for k in ("user", "system", "softirq", "irq", "steal", "iowait", "idle")
                }
            )
            for c in half
        ],
    )
    rec2 = MonitorRecord(duration_s=1.0, window_s=(0.5, 1.0), cpu=series)
    assert judge(UDP, rec2).level == "trusted"


def test_steal() -> None:
    v = judge(UDP, _record(steal=8.0))
    r = next(r for r in v.reasons if r.code == "steal")
    assert r.level == "degraded" and "8.0 %" in r.message
    assert judge(UDP, _record(steal=25.0)).level == "untrusted"


def _engine(delay_s: float, p999_ns: int, **kw: int) -> EngineDirection:
    return EngineDirection(
        link="h1:h1-eth0",
        direction="ab",
        delay_s=delay_s,
        packets=kw.get("packets", 1000),
        lateness_p50_ns=20_000,
        lateness_p99_ns=p999_ns // 2,
        lateness_p999_ns=p999_ns,
        lateness_max_ns=p999_ns * 2,
        drops_queue=0,
        drops_loss=0,
        drops_down=0,
    )


@pytest.mark.parametrize(
    ("delay", "late", "level"),
    [
        (0.010, 200_000, "trusted"),  # 2 % of the delay
        (0.010, 1_200_000, "degraded"),  # 12 %
        (0.010, 4_900_000, "degraded"),  # 49 %
        (0.010, 5_000_000, "untrusted"),  # 50 %
        (0.0, 100_000, "trusted"),
        (0.0, 800_000, "degraded"),
        (0.0, 6_000_000, "untrusted"),
    ],
)
def test_engine_lateness_relative_to_delay(delay: float, late: int, level: str) -> None:
    v = judge(UDP, _record(engine=[_engine(delay, late)]))
    assert v.level == level, v.reasons
    if level != "trusted":
        assert "late" in v.reasons[0].message


def test_engine_message_reads_like_the_issue() -> None:
    v = judge(UDP, _record(engine=[_engine(0.010, 4_900_000)]))
    assert "9.8 ms late on a 10.0 ms link" in v.reasons[0].message
    assert "49 % of the delay" in v.reasons[0].message


def test_throttling() -> None:
    t = NodeThrottle(node="r1", limit="cpu=0.05", periods=30, throttled_periods=12, throttled_s=1.1)
    v = judge(UDP, _record(throttling=[t]))
    assert v.level == "untrusted"
    assert "r1 (cpu=0.05)" in v.reasons[0].message and "40 %" in v.reasons[0].message
    ok = t.model_copy(update={"throttled_periods": 0})
    assert judge(UDP, _record(throttling=[ok])).level == "trusted"


def test_kernel_drops() -> None:
    few = InterfaceDrops(node="r1", intf="r1-eth1", rx_dropped=3)
    assert judge(UDP, _record(interfaces=[few])).level == "degraded"
    many = InterfaceDrops(node="r1", intf="r1-eth1", rx_dropped=300)
    v = judge(UDP, _record(interfaces=[many]))
    assert v.level == "untrusted" and "300" in v.reasons[0].message


def test_engine_ingress_drops_are_kernel_drops() -> None:
    """An AF_XDP endpoint's full ring drops frames before linkd reads them: the
    engine did not keep up, which no interface counter shows."""
    eng = _engine(0.010, 10_000).model_copy(update={"drops_ingress": 500})
    v = judge(UDP, _record(engine=[eng]))
    assert v.level == "untrusted", v.reasons
    (r,) = [r for r in v.reasons if r.code == "kernel_drops"]
    assert "engine link" in r.message and "ingress 500" in r.message
    assert "endpoint 'tap'" in r.message  # what to do about it
    assert judge(UDP, _record(engine=[_engine(0.010, 10_000)])).level == "trusted"


def test_timer_probe_uses_profile() -> None:
    timer = TimerProbe(period_s=0.01, count=300, p50_ns=80_000, p99_ns=2_000_000, max_ns=4_000_000)
    assert judge(UDP, _record(timer=timer)).level == "degraded"
    p = _profile(timer_p99_ns=1_000_000)  # a noisy machine: 4 ms line
    assert judge(UDP, _record(timer=timer), p).level == "trusted"


def test_measurement_signals() -> None:
    obs = Observation(
        kind="udp",
        packets=30_000,
        requested_pps=10_000,
        achieved_pps=9_000,
        socket_drops=1204,
        flags=[("receiver_socket_drops", "x"), ("rate_not_reached", "y"), ("odd", "z")],
    )
    v = judge(obs, _record())
    codes = [r.code for r in v.reasons]
    assert "socket_drops" in codes and "generator_short" in codes
    assert "flag:receiver_socket_drops" not in codes  # said once
    assert "flag:odd" in codes
    assert "receiver dropped 1,204 packets in its socket" in v.summary(5)


def test_near_floor_is_a_note() -> None:
    obs = Observation(kind="udp", packets=10, latency_p999_ns=40_000, floor_p999_ns=30_000)
    v = judge(obs, _record())
    assert v.level == "trusted"
    assert v.reasons[0].code == "near_floor"


def test_thresholds_errors_name_the_field() -> None:
    with pytest.raises(ValidationError, match=r"thresholds\.pressure_untrusted_pct"):
        parse({"pressure_degraded_pct": 50, "pressure_untrusted_pct": 40})
    with pytest.raises(ValidationError, match=r"thresholds\.nope.*valid: all_cores_busy_pct"):
        parse({"nope": 1})
    with pytest.raises(ValidationError, match=r"percentage"):
        parse({"steal_degraded_pct": 5, "steal_untrusted_pct": 150})
    with pytest.raises(ValidationError, match=r"thresholds\.timer_degraded_ns"):
        parse({"timer_degraded_ns": "soon"})
    with pytest.raises(ValidationError, match="inconclusive, warn"):
        parse({"untrusted_check": "ignore"})
    assert parse(None) is DEFAULT
    assert parse({"steal_degraded_pct": 1}).steal_degraded_pct == 1


def _profile(**kw: object) -> prof.Profile:
    from fidelnet.fidelity.machine import machine

    timer_p99 = int(kw.pop("timer_p99_ns", 100_000))  # type: ignore[call-overload]
    return prof.Profile(
        key=str(kw.pop("key", prof.machine_key())),
        fidelnet=str(kw.pop("fidelnet", prof.__version__)),
        machine=machine(),
        measured_at="2026-11-24T00:00:00Z",
        seconds=100.0,
        command=["fidelnet", "calibrate"],
        steal_at_rest_pct=0.1,
        timer=[prof.TimerError(load="idle", count=10, p50_ns=1, p99_ns=timer_p99, max_ns=1)],
    )


def test_profile_round_trip_and_refusals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path))
    found, why = prof.load()
    assert found is None and "fidelnet calibrate" in why
    path = prof.save(_profile())
    assert path.parent == tmp_path / "profiles"
    assert not list(path.parent.glob(".*tmp"))
    found, why = prof.load()
    assert found is not None and why == ""
    prof.save(_profile(fidelnet="0.0.1"), path)
    found, why = prof.load()
    assert found is None and "0.0.1" in why
    prof.save(_profile(key="somewhere-else"), path)
    found, why = prof.load()
    assert found is None and "another machine" in why
    path.write_text("{not json")
    found, why = prof.load()
    assert found is None and "corrupt" in why


def test_lateness_delta_subtracts_histograms() -> None:
    from hdrh.histogram import HdrHistogram

    h = HdrHistogram(1, 60_000_000_000, 3)
    for v in (1000, 2000, 3000):
        h.record_value(v)
    before = h.encode().decode()
    for v in (2000, 5_000_000):
        h.record_value(v)
    after = h.encode().decode()
    pairs = lateness_delta(before, after)
    assert sum(n for _v, n in pairs) == 2
    assert _percentile(pairs, 50) == pytest.approx(2000, rel=0.01)
    assert _percentile(pairs, 100) == pytest.approx(5_000_000, rel=0.01)
    assert lateness_delta("", "") == []


def test_proc_parsers(tmp_path: Path) -> None:
    text = (
        "cpu  1 2 3 4 5 6 7 8 0 0\ncpu0 100 0 50 800 10 0 30 10 0 0\ncpu1 1 1 1 1 1 1 1 1\nintr 5\n"
    )
    times = procfs.cpu_times(text)
    assert sorted(times) == [0, 1]
    user, system, softirq, irq, steal, iowait, idle = times[0]
    tick = 1 / procfs._CLK_TCK
    assert (user, system, softirq, steal, idle) == pytest.approx(
        (100 * tick, 50 * tick, 30 * tick, 10 * tick, 800 * tick)
    )
    psi = tmp_path / "cpu"
    psi.write_text("some avg10=1.00 avg60=0.50 avg300=0.10 total=123456\nfull total=0\n")
    assert procfs.cpu_pressure_us(str(psi)) == 123456
    assert procfs.cpu_pressure_us(str(tmp_path / "none")) is None
    v1 = tmp_path / "v1"
    v1.mkdir()
    (v1 / "cpu.stat").write_text("nr_periods 40\nnr_throttled 10\nthrottled_time 2500000000\n")
    (v1 / "cpuacct.usage").write_text("1500000000\n")
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.stat").write_text("usage_usec 700000\nuser_usec 1\n")
    (v2 / "cpu.pressure").write_text("some avg10=0 avg60=0 avg300=0 total=4242\n")
    st = cgroups.cpu_stat([str(v2), str(v1)])
    assert (st.periods, st.throttled_periods, st.throttled_s) == (40, 10, 2.5)
    assert st.usage_s == 0.7 and st.pressure_us == 4242


def test_verdict_json_round_trip() -> None:
    v = judge(UDP, _record(engine=[_engine(0.01, 2_000_000)]))
    again = Verdict.model_validate_json(json.dumps(v.model_dump(mode="json")))
    assert again == v


def test_untrusted_check_is_inconclusive_in_junit(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from fidelnet.fidelity.thresholds import Thresholds
    from fidelnet.measure.results import LatencySummary, UdpResult
    from fidelnet.report.junit import CheckOutcome, SuiteOutcome, parse_junit, write_junit
    from fidelnet.scenario import model as m
    from fidelnet.scenario.checks import _with_verdict

    lat = LatencySummary(
        count=1, min_ns=1, mean_ns=1, p50_ns=1, p90_ns=1, p99_ns=1, p999_ns=1, p9999_ns=1, max_ns=1
    )
    verdict = judge(UDP, _record((100.0, 100.0), pressure=60.0))
    result = UdpResult(
        src="h1", dst="h2", size=64, pattern="cbr", requested_pps=1, achieved_pps=1,
        rate_reached=True, duration_s=1, sent=1, received=1, unique=1, lost=0, loss_ratio=0,
        duplicates=0, reordered=0, malformed=0, socket_drops=0, receive_pps=1, latency=lat,
        flows=[], intervals=[], interval_s=0.1, verdict=verdict,
    )  # fmt: skip
    passed = CheckOutcome(name="p999", status="passed", measured="p99.9 = 1 µs", expected="<= 1 ms")
    check = m.LatencyCheck(type="latency", traffic="load", percentile=99.9, max="1ms")
    out = _with_verdict(check, passed, result, DEFAULT)
    assert out.status == "error" and out.message.startswith("inconclusive")
    assert "passed against <= 1 ms" in out.message and out.verdict == "untrusted"
    warn = _with_verdict(check, passed, result, Thresholds(untrusted_check="warn"))
    assert warn.status == "passed" and warn.verdict == "untrusted"
    path = write_junit(tmp_path / "j.xml", [SuiteOutcome(name="s", checks=[out, warn])])
    err = ET.parse(path).getroot().find(".//error")
    assert err is not None and err.get("type") == "Inconclusive"
    back = parse_junit(path)[0].checks
    assert [c.verdict for c in back] == ["untrusted", "untrusted"]
    assert "waited for a CPU" in back[0].verdict_reasons


def _late_result(p50_ns: int, late_max_ns: int, extra: Reason | None = None) -> object:
    from fidelnet.measure.results import LatencySummary, UdpResult

    eng = EngineDirection(
        link="h1:h1-eth0", direction="ab", delay_s=0.002, packets=2000,
        lateness_p50_ns=50_000, lateness_p99_ns=late_max_ns // 2,
        lateness_p999_ns=late_max_ns, lateness_max_ns=late_max_ns,
        drops_queue=0, drops_loss=0, drops_down=0,
    )  # fmt: skip
    record = _record(engine=[eng])
    verdict = judge(UDP, record)
    if extra is not None:
        verdict = Verdict.of([*verdict.reasons, extra], monitored=True)
    assert verdict.level == "untrusted"
    lat = LatencySummary(
        count=2000, min_ns=p50_ns, mean_ns=p50_ns, p50_ns=p50_ns, p90_ns=p50_ns,
        p99_ns=p50_ns, p999_ns=p50_ns, p9999_ns=p50_ns, max_ns=p50_ns,
    )  # fmt: skip
    return UdpResult(
        src="h1", dst="h2", size=64, pattern="cbr", requested_pps=1, achieved_pps=1,
        rate_reached=True, duration_s=1, sent=2000, received=2000, unique=2000, lost=0,
        loss_ratio=0, duplicates=0, reordered=0, malformed=0, socket_drops=0,
        receive_pps=1, latency=lat, flows=[], intervals=[], interval_s=0.1,
        verdict=verdict, monitor=record,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("p50_ms", "late_ms", "limit_ms", "status"),
    [
        (2.1, 1.5, 10.0, "passed"),  # passed with late packets: the true p50 is lower
        (14.0, 1.5, 10.0, "error"),  # how much of the excess is the engine's: unknown
    ],
)
def test_engine_lateness_decides_a_passed_latency_check_not_a_failed_one(
    p50_ms: float, late_ms: float, limit_ms: float, status: str
) -> None:
    from fidelnet.report.junit import CheckOutcome
    from fidelnet.scenario import model as m
    from fidelnet.scenario.checks import _judge, _with_verdict

    check = m.LatencyCheck(type="latency", traffic="load", percentile=50, max=f"{limit_ms}ms")
    result = _late_result(int(p50_ms * 1e6), int(late_ms * 1e6))
    out = _with_verdict(check, _judge(check, result), result, DEFAULT)  # type: ignore[arg-type]
    assert isinstance(out, CheckOutcome)
    assert out.status == status and out.verdict == "untrusted", out
    if status == "error":
        assert out.message.startswith("inconclusive")
    else:
        assert "engine lateness only adds latency" in out.detail


def test_an_unbounded_reason_beside_lateness_keeps_the_check_inconclusive() -> None:
    from fidelnet.scenario import model as m
    from fidelnet.scenario.checks import _judge, _with_verdict

    hog = Reason(code="cpu_saturated", level="untrusted", message="every core busy")
    check = m.LatencyCheck(type="latency", traffic="load", percentile=50, max="10ms")
    result = _late_result(2_100_000, 1_500_000, hog)
    out = _with_verdict(check, _judge(check, result), result, DEFAULT)  # type: ignore[arg-type]
    assert out.status == "error" and out.message.startswith("inconclusive")


def test_sched_policy_of_this_process() -> None:
    got = procfs.sched_policy(os.getpid())
    assert got is not None and got[0] in ("SCHED_OTHER", "SCHED_BATCH", "SCHED_IDLE")
    assert procfs.sched_policy(2**22 + 12345) is None  # no such process


@pytest.mark.parametrize(("loss_max", "status"), [("25%", "passed"), ("1%", "failed")])
def test_engine_lateness_decides_a_loss_check_when_its_queues_dropped_nothing(
    loss_max: str, status: str
) -> None:
    from fidelnet.scenario import model as m
    from fidelnet.scenario.checks import _judge, _with_verdict

    check = m.LossCheck(type="loss", traffic="load", max=loss_max)
    result = _late_result(2_100_000, 1_500_000)
    result = result.model_copy(update={"lost": 400, "loss_ratio": 0.2})  # type: ignore[attr-defined]
    out = _with_verdict(check, _judge(check, result), result, DEFAULT)  # type: ignore[arg-type]
    assert out.status == status, out
    assert "the loss is the link model's" in out.detail


def test_engine_queue_drops_beside_lateness_leave_a_loss_check_inconclusive() -> None:
    from fidelnet.scenario import model as m
    from fidelnet.scenario.checks import _judge, _with_verdict

    check = m.LossCheck(type="loss", traffic="load", max="25%")
    result = _late_result(2_100_000, 1_500_000)
    rec = result.monitor  # type: ignore[attr-defined]
    eng = rec.engine[0].model_copy(update={"drops_queue": 3})
    result = result.model_copy(update={"monitor": rec.model_copy(update={"engine": [eng]})})  # type: ignore[attr-defined]
    out = _with_verdict(check, _judge(check, result), result, DEFAULT)  # type: ignore[arg-type]
    assert out.status == "error" and out.message.startswith("inconclusive")


def test_timer_p99_is_never_one_of_the_two_worst_wakeups() -> None:
    from fidelnet.fidelity.monitor import Monitor

    mon = Monitor(None)
    mon._t0 = 0.0
    mon._stopped_at = 2.0
    lates = [100_000] * 78 + [2_300_000, 2_400_000]  # one hiccup hit two wake-ups
    mon._late_ns = list(lates)
    mon._late_t = [0.025 * (i + 1) for i in range(len(lates))]
    probe = mon._timer_probe(0.0, 2.0)
    assert probe is not None
    assert probe.p99_ns == 100_000 and probe.max_ns == 2_400_000
    mon._late_ns = [100_000] * 70 + [2_000_000] * 10  # a trend, not a hiccup
    probe = mon._timer_probe(0.0, 2.0)
    assert probe is not None and probe.p99_ns == 2_000_000


class _RtEngine:
    """A link engine whose real-time guard demotes between two snapshots."""

    scheduling = "SCHED_FIFO 10"
    scheduling_reason = "default"
    release = "timer only"
    offloads = "off"

    def __init__(self) -> None:
        self.reports = [
            {"demotions": 2, "demoted_ns": 1_000_000_000},
            {"demotions": 5, "demoted_ns": 1_750_000_000},
        ]

    def stats(self) -> dict[str, object]:
        return {}

    def realtime(self) -> dict[str, object]:
        return self.reports.pop(0)


class _RtNet:
    links: list[object] = []

    def __init__(self) -> None:
        self.engine = _RtEngine()

    def __iter__(self) -> Iterator[object]:
        return iter([])


def test_engine_demotions_in_the_window_are_recorded() -> None:
    from fidelnet.fidelity.monitor import Monitor

    mon = Monitor(_RtNet())  # type: ignore[arg-type]
    mon._t0 = 0.0
    mon.begin()
    mon.end()
    rec = mon.record()
    assert rec.engine_demotions == 3
    assert rec.engine_demoted_s == 0.75
    assert any("left SCHED_FIFO 3 time(s)" in n and "0.750 s" in n for n in rec.notes)


def test_no_demotion_no_note() -> None:
    from fidelnet.fidelity.engine_seen import demotions as _demotions

    assert _demotions({}, {}) == (0, 0.0)
    same = {"demotions": 1, "demoted_ns": 5}
    assert _demotions(same, same) == (0, 0.0)


def test_backlog_drops_are_read_from_softnet_stat() -> None:
    from fidelnet.kernel import procfs

    text = (
        "00660f8a 00000000 00000016 00000000 00000000\n"
        "00c33ac7 0005a003 0000000d 00000000 00000000\n"
    )
    assert procfs.softnet_dropped(text) == 0x5A003
    assert procfs.softnet_dropped("") == 0


def _vm(name: str = "h1", accel: str = "tcg", clock: int | None = 100_000, busy: float = 20.0):  # type: ignore[no-untyped-def]
    from fidelnet.fidelity.record import VmSeen

    return VmSeen(name=name, accel=accel, clock_uncertainty_ns=clock, vcpu_busy_pct=busy)


def test_an_emulated_vm_on_the_path_degrades_and_says_so() -> None:
    v = judge(UDP, _record(vms=[_vm("r1"), _vm("r2", accel="kvm")]))
    assert v.level == "degraded"
    (r,) = v.problems()
    assert r.code == "vm_emulated" and "r1" in r.message and "r2" not in r.message
    assert "TCG" in r.message
    assert judge(UDP, _record(vms=[_vm("r2", accel="kvm")])).level == "trusted"


def test_a_saturated_vcpu_limits_the_figure() -> None:
    busy = _vm("r1", accel="kvm", busy=99.0)
    v = judge(UDP, _record(vms=[busy]))
    assert v.level == "untrusted" and v.reasons[0].code == "vm_cpu_saturated"
    assert "r1's vCPU was busy 99 %" in v.reasons[0].message
    unshaped = Observation(kind="udp", packets=1, capacity_limited=False)
    assert judge(unshaped, _record(vms=[busy])).level == "degraded"


@pytest.mark.parametrize(
    ("uncertainty_ns", "p50_ns", "level"),
    [
        (100_000, 10_000_000, "trusted"),  # 1 % of 10 ms
        (100_000, 1_000_000, "degraded"),  # 10 % of 1 ms
        (100_000, 150_000, "untrusted"),  # 67 % of 150 µs
        (None, 10_000_000, "untrusted"),  # never set
    ],
)
def test_one_way_latency_from_a_vm_is_judged_by_its_clock(
    uncertainty_ns: int | None, p50_ns: int, level: str
) -> None:
    vm = _vm("h1", accel="kvm", clock=uncertainty_ns)
    obs = Observation(kind="udp", packets=100, latency_p50_ns=p50_ns, src="h1", dst="h2")
    v = judge(obs, _record(vms=[vm]))
    assert v.level == level
    if level != "trusted":
        assert v.reasons[0].code == "vm_clock" and "h1" in v.reasons[0].message
    # A VM only forwarding between two namespace hosts: its clock plays no part.
    between = Observation(kind="udp", packets=100, latency_p50_ns=p50_ns, src="h0", dst="h2")
    assert judge(between, _record(vms=[vm])).level == "trusted"


def test_vm_clock_thresholds_are_checked_in_order() -> None:
    with pytest.raises(ValidationError, match="vm_clock_untrusted_pct_of_latency"):
        parse({"vm_clock_degraded_pct_of_latency": 60, "vm_clock_untrusted_pct_of_latency": 50})
    with pytest.raises(ValidationError, match="vm_vcpu_busy_pct"):
        parse({"vm_vcpu_busy_pct": 120})


class _VmBackend:
    kind = "qemu"

    def describe(self, node: object) -> dict[str, object]:
        import threading

        return {
            "backend": "qemu",
            "accel": "tcg",
            "qemu_pid": os.getpid(),
            "vcpu_tids": [threading.get_native_id()],
            "clock_uncertainty_ns": 90_000,
        }


class _VmNode:
    name = "h1"
    netns = None
    spec = None
    backend = _VmBackend()


class _VmNet:
    engine = None
    links: list[object] = []
    fastpath: dict[str, object] = {}

    def __iter__(self) -> Iterator[_VmNode]:
        return iter([_VmNode()])


def test_monitor_records_vm_nodes_and_their_busiest_vcpu() -> None:
    """The fake VM's one vCPU is this thread: busy between begin and end, it is seen so."""
    import time

    from fidelnet.fidelity.monitor import Monitor

    mon = Monitor(_VmNet(), nodes=["h1"])  # type: ignore[arg-type]
    mon._t0 = time.monotonic()
    mon.begin()
    t = time.thread_time()
    while time.thread_time() - t < 0.3:
        pass
    mon.end()
    (vm,) = mon.record().vms
    assert vm.name == "h1" and vm.accel == "tcg" and vm.clock_uncertainty_ns == 90_000
    assert vm.vcpu_busy_pct is not None and vm.vcpu_busy_pct > 50


def _wake_hdr(values: list[int], h: object | None = None) -> tuple[object, str]:
    from hdrh.histogram import HdrHistogram

    hist = h if h is not None else HdrHistogram(1, 10_000_000_000, 2)
    for v in values:
        hist.record_value(v)  # type: ignore[attr-defined]
    return hist, hist.encode().decode()  # type: ignore[attr-defined]


def test_engine_wake_ups_of_the_window_alone_over_every_loop() -> None:
    from fidelnet.fidelity.engine_seen import wake_ups

    h0, a0 = _wake_hdr([30_000] * 10 + [20_000_000])  # a 20 ms wake-up before the window
    _h0, b0 = _wake_hdr([40_000] * 5, h0)
    h1, a1 = _wake_hdr([30_000])
    _h1, b1 = _wake_hdr([6_000_000], h1)
    before = {"loops": [{"wake_late_hdr": a0}, {"wake_late_hdr": a1}]}
    after = {"loops": [{"wake_late_hdr": b0}, {"wake_late_hdr": b1}]}
    w = wake_ups(before, after)
    assert w is not None and w.count == 6
    assert w.max_ns == pytest.approx(6_000_000, rel=0.01)
    assert w.p50_ns == pytest.approx(40_000, rel=0.01)
    # One loop: the report itself; an engine that does not export them: None.
    one = wake_ups({"wake_late_hdr": a0}, {"wake_late_hdr": b0})
    assert one is not None and one.count == 5
    assert wake_ups({}, {"turns": 3}) is None


def test_late_releases_the_machine_caused_are_told_from_the_engines_own() -> None:
    from fidelnet.fidelity.record import EngineWake

    late = _engine(0.010, 9_400_000)  # p99.9 9.4 ms on a 10 ms link
    woken = EngineWake(count=1500, p50_ns=40_000, p99_ns=90_000, max_ns=10_600_000)
    v = judge(UDP, _record(engine=[late], engine_wake=woken))
    # The level stands: the numbers are wrong whoever delayed them.
    assert v.level == "untrusted"
    first = v.reasons[0]
    assert first.code == "engine_late"
    assert "the kernel ran the engine up to 10.6 ms after its timer" in first.message
    note = next(r for r in v.reasons if r.code == "engine_woken_late")
    assert note.level == "trusted" and "h1:h1-eth0 ab" in note.message
    assert note.value == 10_600_000
    # Wake-ups on time: the lateness is the engine's own, and nothing excuses it.
    prompt = EngineWake(count=1500, p50_ns=40_000, p99_ns=90_000, max_ns=300_000)
    v = judge(UDP, _record(engine=[late], engine_wake=prompt))
    assert v.level == "untrusted"
    assert "after its timer" not in v.reasons[0].message
    assert not any(r.code == "engine_woken_late" for r in v.reasons)
    # A trusted direction needs no note.
    v = judge(UDP, _record(engine=[_engine(0.010, 200_000)], engine_wake=woken))
    assert v.level == "trusted" and not v.reasons


def test_a_cut_link_slower_than_its_network_says_so() -> None:
    back = _engine(0.005, 1_200_000).model_copy(
        update={"direction": "ba", "wire_p999_ns": 6_100_000, "wire_max_ns": 6_400_000}
    )
    v = judge(UDP, _record(engine=[back]))
    (r,) = [x for x in v.reasons if x.code == "engine_late"]
    assert "frames were read up to 6.4 ms (p99.9 6.1 ms) after they left" in r.message
    assert "the link's delay is 5.0 ms: the network between the machines" in r.message
    # A network well inside the delay is not blamed.
    fast = back.model_copy(update={"wire_p999_ns": 1_100_000, "wire_max_ns": 1_300_000})
    (r,) = [x for x in judge(UDP, _record(engine=[fast])).reasons if x.code == "engine_late"]
    assert "after they left" not in r.message


@pytest.mark.parametrize(
    ("uncertainty_ns", "level"),
    [(100_000, "trusted"), (800_000, "degraded"), (3_000_000, "untrusted")],
)
def test_a_cut_links_clocks_known_too_loosely_for_its_delay(
    uncertainty_ns: int, level: str
) -> None:
    """Issue 36: the receiving half holds the delay from the other machine's stamp, so
    the clocks' uncertainty is an error of every delay it holds: judged against the
    link's delay (5 ms here) as the engine's own lateness is."""
    back = _engine(0.005, 50_000).model_copy(
        update={"direction": "ba", "clock_uncertainty_ns": uncertainty_ns}
    )
    v = judge(UDP, _record(engine=[back]))
    found = [r for r in v.reasons if r.code == "clock_uncertain"]
    if level == "trusted":
        assert not found and v.level == "trusted", v.reasons
        return
    (r,) = found
    assert r.level == level and v.level == level
    assert "clocks are known to within" in r.message and "of its 5.0 ms delay" in r.message
