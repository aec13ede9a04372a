"""tests/_precision.py, the rule for precision claims on a busy machine: met once is
enough; missed every time fails, unless every attempt ran under heavy steal, which
is a skip that says so (never a pass)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import _precision


def _ticks(steal_pcts: list[float]) -> Iterator[tuple[int, int]]:
    """(steal, total) readings: each attempt reads twice, 1000 ticks apart."""
    steal = 0
    total = 0
    for pct in steal_pcts:
        yield steal, total
        steal += int(pct * 10)
        total += 1000
        yield steal, total


def _with_steal(monkeypatch: pytest.MonkeyPatch, pcts: list[float], settled: bool = True) -> None:
    it = _ticks(pcts)
    monkeypatch.setattr(_precision, "_cpu_ticks", lambda: next(it))
    monkeypatch.setattr(_precision, "settle", lambda: settled)


def test_met_on_a_later_attempt_returns_that_result(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_steal(monkeypatch, [0.0, 0.0, 0.0])
    got = iter([1, 2, 3])
    assert _precision.precise(lambda: next(got), lambda x: None if x == 2 else "low") == 2


def test_missed_every_time_on_a_quiet_machine_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_steal(monkeypatch, [30.0, 0.5, 30.0])
    with pytest.raises(AssertionError, match=r"missed every time:\nattempt 1 \(steal 30.0 %\)"):
        _precision.precise(lambda: 1, lambda x: "low")


def test_missed_every_time_under_steal_is_a_skip(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_steal(monkeypatch, [30.0, 5.0, 12.0])
    with pytest.raises(pytest.skip.Exception, match="could not be checked"):
        _precision.precise(lambda: 1, lambda x: "low")


def test_a_firm_property_is_never_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    _with_steal(monkeypatch, [0.0, 0.0, 0.0])
    calls = []

    def measure() -> int:
        calls.append(1)
        raise AssertionError("lost a packet")

    with pytest.raises(AssertionError, match="lost a packet"):
        _precision.precise(measure, lambda x: None)
    assert len(calls) == 1


def test_a_machine_that_never_settled_counts_as_disturbed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _with_steal(monkeypatch, [0.0, 0.0, 0.0], settled=False)
    with pytest.raises(pytest.skip.Exception, match="never settled"):
        _precision.precise(lambda: 1, lambda x: "low")


def test_settle_returns_once_the_cpus_are_idle(monkeypatch: pytest.MonkeyPatch) -> None:
    idle = iter([(0, 0), (95, 100), (95, 100), (100, 200)])
    monkeypatch.setattr(_precision, "_idle_ticks", lambda: next(idle))
    monkeypatch.setattr(_precision.time, "sleep", lambda _s: None)
    assert _precision.settle(limit_s=0.0) is True
    busy = iter([(0, 0), (10, 100)])
    monkeypatch.setattr(_precision, "_idle_ticks", lambda: next(busy))
    assert _precision.settle(limit_s=0.0) is False


def test_a_disturbance_the_measurement_recorded_is_not_an_undisturbed_miss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No steal at all, but every attempt's own record names the machine's delay.
    _with_steal(monkeypatch, [0.0, 0.0, 0.0])
    with pytest.raises(pytest.skip.Exception, match="disturbed: woken 11 ms late"):
        _precision.precise(lambda: 1, lambda x: "late", disturbed=lambda x: "woken 11 ms late")
    # One attempt the record does not excuse: the miss is the code's, and fails.
    _with_steal(monkeypatch, [0.0, 0.0, 0.0])
    said = iter(["woken 11 ms late", None, "woken 9 ms late"])
    with pytest.raises(AssertionError, match="missed every time"):
        _precision.precise(lambda: 1, lambda x: "late", disturbed=lambda x: next(said))
