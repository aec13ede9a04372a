"""The zero-loss search (RFC 2544 bisection with NDR/PDR) against model networks."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from fidelnet.errors import ValidationError
from fidelnet.measure.latency import empty_summary
from fidelnet.measure.packets import finish, search
from fidelnet.measure.pktgen import TrafficSpec
from fidelnet.measure.results import UdpResult


def _result(
    rate: float, lost: int, sent: int = 10_000, reached: bool = True, achieved: float = 0.0
) -> UdpResult:
    return UdpResult(
        src="a", dst="b", size=64, pattern="cbr", requested_pps=rate,
        achieved_pps=rate if reached else achieved, rate_reached=reached, duration_s=1.0,
        sent=sent, received=sent - lost, unique=sent - lost, lost=lost, loss_ratio=lost / sent,
        duplicates=0, reordered=0, malformed=0, socket_drops=0, receive_pps=rate,
        latency=empty_summary(), flows=[], intervals=[], interval_s=0.1,
    )  # fmt: skip


def _capacity(cap: float, gen_max: float = 1e9) -> Callable[[float], UdpResult]:
    def trial(rate: float) -> UdpResult:
        if rate > gen_max:
            return _result(rate, 0, reached=False, achieved=gen_max)
        over = max(rate - cap, 0.0) / rate
        return _result(rate, round(10_000 * over))

    return trial


def test_ndr_converges_to_capacity_within_resolution() -> None:
    trial = _capacity(123_456)
    ndr, pdr, trials = search(
        trial, low_pps=1000, high_pps=1e6, resolution_pps=1000, pdr_loss=0.005, max_trials=40
    )  # type: ignore[arg-type]
    assert 123_456 - 1000 <= ndr <= 123_456
    # PDR allows 0.5 % loss: the capacity / (1 - 0.005) is the true PDR.
    assert ndr <= pdr <= 123_456 / 0.995 + 1
    assert pdr - 123_456 / 0.995 > -1000
    assert [t.rate_pps for t in trials][:2] == [1_000_000.0, 1000.0]
    assert len({t.rate_pps for t in trials}) == len(trials)  # no rate measured twice


def test_every_trial_passes_at_high_returns_high() -> None:
    ndr, pdr, trials = search(
        _capacity(2e6), low_pps=1000, high_pps=1e6, resolution_pps=1000, pdr_loss=0.0,
        max_trials=10,
    )  # type: ignore[arg-type]  # fmt: skip
    assert (ndr, pdr, len(trials)) == (1e6, 1e6, 1)


def test_loss_at_low_rate_gives_zero_and_a_flag() -> None:
    ndr, pdr, trials = search(
        _capacity(10), low_pps=1000, high_pps=1e6, resolution_pps=1000, pdr_loss=0.005,
        max_trials=10,
    )  # type: ignore[arg-type]  # fmt: skip
    assert ndr == 0.0 and pdr == 0.0
    result = finish("a", "b", 64, "cbr", 100, 1.0, 1000, 1000, 1e6, 0.005, ndr, pdr, trials)
    assert "loss_at_low_rate" in [f.code for f in result.flags]


def test_generator_limited_trials_fail_and_are_flagged() -> None:
    # The network would carry 800 kpps but the generator stops at 300 kpps.
    ndr, pdr, trials = search(
        _capacity(800_000, gen_max=300_000), low_pps=1000, high_pps=1e6, resolution_pps=5000,
        pdr_loss=0.005, max_trials=40,
    )  # type: ignore[arg-type]  # fmt: skip
    assert 295_000 <= ndr <= 300_000
    result = finish("a", "b", 64, "cbr", 100, 1.0, 5000, 1000, 1e6, 0.005, ndr, pdr, trials)
    codes = [f.code for f in result.flags]
    assert "generator_limited" in codes
    assert result.generator_max_pps == 300_000


def test_trial_budget_keeps_best_passing_rate() -> None:
    ndr, _pdr, trials = search(
        _capacity(123_456), low_pps=1000, high_pps=1e6, resolution_pps=1, pdr_loss=0.0,
        max_trials=6,
    )  # type: ignore[arg-type]  # fmt: skip
    assert len(trials) == 6
    passing = [t.rate_pps for t in trials if t.loss_ratio == 0]
    assert ndr == max(passing) and ndr <= 123_456


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"rate_pps": 0}, "rate_pps"),
        ({"rate_pps": -5}, "rate_pps"),
        ({"rate_pps": float("nan")}, "rate_pps"),
        ({"duration": 0}, "duration"),
        ({"duration": -1.0}, "duration"),
        ({"size": 63}, "size"),
        ({"size": 9000}, "size"),
        ({"pattern": "sine"}, "pattern"),
        ({"burst": 0}, "burst"),
        ({"flows": 0}, "flows"),
        ({"batch": 0}, "batch"),
    ],
)
def test_traffic_spec_names_the_bad_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {"rate_pps": 1000.0}
    args.update(kwargs)
    with pytest.raises(ValidationError) as exc:
        TrafficSpec(**args).check()  # type: ignore[arg-type]
    assert exc.value.field == field


def test_a_trial_just_short_of_its_rate_is_run_again_and_one_far_short_is_not() -> None:
    """A busy moment (99.9 % of the rate) is repeated and then counts; a generator at
    its capacity (30 % of the rate) is not: the search bisects below it."""
    busy_once: set[float] = set()

    def trial(rate: float) -> UdpResult:
        if rate > 300_000:
            return _result(rate, 0, reached=False, achieved=300_000)
        if rate not in busy_once:
            busy_once.add(rate)
            return _result(rate, 0, reached=False, achieved=0.999 * rate)
        return _result(rate, 0)

    ndr, _, trials = search(
        trial, low_pps=1000, high_pps=1e6, resolution_pps=5000, pdr_loss=0.0, max_trials=40
    )  # type: ignore[arg-type]
    assert 295_000 <= ndr <= 300_000
    by_rate: dict[float, list[bool]] = {}
    for t in trials:
        by_rate.setdefault(t.rate_pps, []).append(t.generator_limited)
    assert by_rate[1e6] == [True]  # far short: once
    assert all(v == [True, False] for r, v in by_rate.items() if r <= 300_000), by_rate
