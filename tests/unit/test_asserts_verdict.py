"""The pytest helpers and fidelity verdicts: messages carry the verdict, an
assertion on an untrusted measurement is inconclusive unless the error cannot have
changed its answer, `set_untrusted("warn")` judges the number and warns."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fidelnet.fidelity.judge import Observation, judge
from fidelnet.fidelity.record import CoreSeries, CpuSeries, EngineDirection, MonitorRecord
from fidelnet.fidelity.verdict import Reason, Verdict
from fidelnet.measure.results import LatencySummary, UdpResult
from fidelnet.testing import (
    InconclusiveError,
    UntrustedMeasurementWarning,
    assert_latency_at_most,
    assert_loss_at_most,
    assert_trusted,
    set_untrusted,
)


@pytest.fixture(autouse=True)
def _default_mode() -> Iterator[None]:
    yield
    set_untrusted("inconclusive")


def _record(late_ns: int = 0, queue_drops: int = 0) -> MonitorRecord:
    n = 40
    core = CoreSeries(
        cpu=0, user=[20.0] * n, system=[0.0] * n, softirq=[0.0] * n, irq=[0.0] * n,
        steal=[0.0] * n, iowait=[0.0] * n, idle=[80.0] * n,
    )  # fmt: skip
    cpu = CpuSeries(interval_s=0.05, t_s=[0.05 * i for i in range(n)], cores=[core],
                    pressure_pct=[0.0] * n)  # fmt: skip
    eng = EngineDirection(
        link="h1:h1-eth0", direction="ab", delay_s=0.002, packets=2000,
        lateness_p50_ns=30_000, lateness_p99_ns=late_ns // 2, lateness_p999_ns=late_ns,
        lateness_max_ns=late_ns, drops_queue=queue_drops, drops_loss=0, drops_down=0,
    )  # fmt: skip
    return MonitorRecord(duration_s=2.0, window_s=(0.0, 2.0), cpu=cpu, engine=[eng])


def _result(
    p50_ns: int, loss: float, record: MonitorRecord, extra: Reason | None = None
) -> UdpResult:
    obs = Observation(kind="udp", packets=2000, requested_pps=2000, achieved_pps=2000)
    verdict = judge(obs, record)
    if extra is not None:
        verdict = Verdict.of([*verdict.reasons, extra], monitored=True)
    lat = LatencySummary(
        count=2000, min_ns=p50_ns, mean_ns=p50_ns, p50_ns=p50_ns, p90_ns=p50_ns,
        p99_ns=p50_ns, p999_ns=p50_ns, p9999_ns=p50_ns, max_ns=p50_ns,
    )  # fmt: skip
    lost = int(2000 * loss)
    return UdpResult(
        src="h1", dst="h2", size=64, pattern="cbr", requested_pps=2000, achieved_pps=2000,
        rate_reached=True, duration_s=1, sent=2000, received=2000 - lost, unique=2000 - lost,
        lost=lost, loss_ratio=loss, duplicates=0, reordered=0, malformed=0, socket_drops=0,
        receive_pps=2000, latency=lat, flows=[], intervals=[], interval_s=0.1,
        verdict=verdict, monitor=record,
    )  # fmt: skip


SAYS = (
    r"^inconclusive: latency p50 = 2.00 ms \(passes\), but the measurement is "
    r"untrusted: every core busy 1.9 of 2 s \(h1->h2"
)
HOG = Reason(code="cpu_saturated", level="untrusted", message="every core busy 1.9 of 2 s")


def test_failure_messages_carry_the_verdict() -> None:
    r = _result(5_000_000, 0.0, _record())
    with pytest.raises(
        AssertionError, match=r"latency p50 = 5.00 ms > 1.00 ms allowed .*verdict: trusted"
    ):
        assert_latency_at_most(r, 50, "1ms")


def test_untrusted_measurement_is_inconclusive_pass_or_fail() -> None:
    r = _result(2_000_000, 0.0, _record(), HOG)
    with pytest.raises(
        InconclusiveError,
        match=SAYS,
    ):
        assert_latency_at_most(r, 50, "10ms")
    with pytest.raises(InconclusiveError, match="every core busy"):
        assert_loss_at_most(r, "1%")


def test_lateness_alone_decides_a_passed_latency_bound_and_a_loss_bound() -> None:
    r = _result(2_100_000, 0.2, _record(late_ns=1_500_000))
    assert r.verdict is not None and r.verdict.level == "untrusted"
    assert_latency_at_most(r, 50, "10ms")  # passes: lateness only adds latency
    with pytest.raises(InconclusiveError):
        assert_latency_at_most(r, 50, "1ms")  # the excess may be the engine's
    assert_loss_at_most(r, "25%")  # the engine's queues dropped nothing
    with pytest.raises(AssertionError) as exc:
        assert_loss_at_most(r, "1%")
    assert not isinstance(exc.value, InconclusiveError)
    queued = _result(2_100_000, 0.2, _record(late_ns=1_500_000, queue_drops=5))
    with pytest.raises(InconclusiveError):
        assert_loss_at_most(queued, "25%")


def test_warn_mode_judges_the_number_and_warns() -> None:
    set_untrusted("warn")
    r = _result(2_000_000, 0.0, _record(), HOG)
    with pytest.warns(UntrustedMeasurementWarning, match="untrusted"):
        assert_latency_at_most(r, 50, "10ms")
    with pytest.warns(UntrustedMeasurementWarning), pytest.raises(AssertionError):
        assert_latency_at_most(r, 50, "1ms")
    with pytest.raises(ValueError, match="inconclusive or warn"):
        set_untrusted("ignore")  # type: ignore[arg-type]


def test_assert_trusted() -> None:
    assert_trusted(_result(2_000_000, 0.0, _record()))
    with pytest.raises(AssertionError, match="verdict untrusted: every core busy"):
        assert_trusted(_result(2_000_000, 0.0, _record(), HOG))
    bare = _result(2_000_000, 0.0, _record()).model_copy(update={"verdict": None})
    with pytest.raises(AssertionError, match="no verdict"):
        assert_trusted(bare)
