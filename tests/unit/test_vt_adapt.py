"""The adaptive TDF's decisions (:func:`fidelnet.vt.adapt.decide`) and how a factor is
asked for (``tdf_arg``, scenario files): quick up, slow down, bounded, each change
with its reason."""

from __future__ import annotations

import pytest

from fidelnet.errors import ValidationError
from fidelnet.scenario import loads
from fidelnet.scenario.topology import build
from fidelnet.topology.spec import AutoTdf, TopologySpec
from fidelnet.vt.adapt import Policy, Signals, State, decide
from fidelnet.vt.run import tdf_arg

AUTO = AutoTdf(low=1.0, high=16.0)


def _calm(busy: float = 0.1) -> Signals:
    return Signals(busy=busy, lateness_p99_ns=0, drops=0, core=0)


def test_a_hot_core_raises_the_factor_to_reach_the_target_at_once() -> None:
    st = State(1.0)
    new, why = decide(st, Signals(0.98, 0, 0, core=1), 10.0, AUTO) or (0, "")
    assert new == 1.5 and why == "auto up: core 1 busy 98 %"  # 0.98 / 0.7 = 1.4 -> 1.5
    assert st.tdf == 1.5
    # Lateness or drops at least double it, and say so.
    new, why = decide(st, Signals(0.5, 400_000, 3), 11.0, AUTO) or (0, "")
    assert new == 3.0
    assert why == "auto up: engine lateness p99 400 us, 3 packets dropped by overload"


def test_the_factor_stays_within_its_bounds() -> None:
    st = State(16.0)
    assert decide(st, Signals(1.0, 10**6, 100), 0.0, AUTO) is None
    st = State(1.0)
    for t in range(100):
        assert decide(st, _calm(0.0), 100.0 + t, AUTO) is None


def test_lowering_waits_for_calm_windows_and_the_hold_and_at_most_halves() -> None:
    policy = Policy(calm_windows=3, hold_s=5.0)
    st = State(8.0, last_raise=100.0)
    # Calm, but within the hold after the last raise.
    for t in (101.0, 102.0, 103.0, 104.0):
        assert decide(st, _calm(0.05), t, AUTO, policy) is None
    new, why = decide(st, _calm(0.05), 105.5, AUTO, policy) or (0, "")
    assert new == 4.0 and why.startswith("auto down: busiest core 5 %")
    # A busy window in between starts the count again.
    assert decide(st, _calm(0.05), 106.0, AUTO, policy) is None
    assert decide(st, _calm(0.6), 107.0, AUTO, policy) is None
    assert decide(st, _calm(0.05), 108.0, AUTO, policy) is None
    assert decide(st, _calm(0.05), 109.0, AUTO, policy) is None
    new, _ = decide(st, _calm(0.3), 110.0, AUTO, policy) or (0, "")
    assert new == 2.0  # 4 * 0.3 / 0.7 = 1.7, but one step at most halves it


def test_a_middling_load_changes_nothing() -> None:
    st = State(4.0)
    for t in range(50):
        assert decide(st, _calm(0.6), float(t), AUTO) is None
    assert st.tdf == 4.0


def test_the_factor_is_asked_for_as_a_number_auto_or_bounds() -> None:
    spec = TopologySpec()
    tdf_arg(spec, 4)
    assert (spec.tdf, spec.tdf_auto) == (4.0, None)
    tdf_arg(spec, "auto")
    assert spec.tdf == 1.0 and spec.tdf_auto == AutoTdf()
    tdf_arg(spec, AutoTdf(low=2, high=8, start=4))
    assert spec.tdf == 4.0
    for bad, field in (
        ("fast", "tdf"),
        (0, "tdf"),
        (AutoTdf(low=2, high=8, start=1), "tdf.start"),
        (AutoTdf(high=0), "tdf.high"),
        (AutoTdf(period_s=0), "tdf.period_s"),
    ):
        with pytest.raises(ValidationError) as e:
            tdf_arg(spec, bad)
        assert e.value.field == field, (bad, e.value)


@pytest.mark.parametrize(
    ("text", "tdf", "auto"),
    [
        ("tdf: 4", 4.0, None),
        ("tdf: auto", 1.0, AutoTdf()),
        ("tdf: {auto: {low: 2, high: 8}}", 2.0, AutoTdf(low=2.0, high=8.0, start=2.0)),
    ],
)
def test_a_scenario_asks_for_a_fixed_or_adaptive_factor(
    text: str, tdf: float, auto: AutoTdf | None
) -> None:
    built = build(loads(f"name: x\ntopology:\n  builder: {{single: 2}}\n  {text}\n"))
    assert (built.spec.tdf, built.spec.tdf_auto) == (tdf, auto)


def test_a_bad_adaptive_factor_is_one_problem_named_by_its_field() -> None:
    from fidelnet.scenario import ScenarioError

    with pytest.raises(ScenarioError) as e:
        loads("name: x\ntopology:\n  builder: {single: 2}\n  tdf: {auto: {low: 4, high: 2}}\n")
    assert len(e.value.problems) == 1
    assert "topology.tdf.auto" in e.value.problems[0].format()


def test_after_lost_fidelity_no_lowering_and_oscillation_doubles_the_wait() -> None:
    policy = Policy(calm_windows=1, hold_s=2.0)
    st = State(2.0)
    late = Signals(0.5, 500_000, 0)
    decide(st, late, 0.0, AUTO, policy)  # 2 -> 4; no lowering for 2 s
    assert (st.tdf, st.backoff_s) == (4.0, 2.0)
    assert decide(st, _calm(0.05), 1.9, AUTO, policy) is None
    decide(st, _calm(0.05), 10.0, AUTO, policy)  # calm, the wait is over: 4 -> 2
    assert st.tdf == 2.0
    decide(st, late, 11.0, AUTO, policy)  # late again right after: 2 -> 4, wait 4 s
    assert (st.tdf, st.backoff_s) == (4.0, 4.0)
    assert decide(st, _calm(0.05), 14.0, AUTO, policy) is None  # still waiting
    assert decide(st, _calm(0.05), 15.5, AUTO, policy) is not None  # 4 s later: down
    # A raise long after the last lowering starts the wait from hold_s again.
    decide(st, late, 100.0, AUTO, policy)
    assert st.backoff_s == 2.0


def test_lateness_counts_against_the_link_s_own_delay() -> None:
    st = State(4.0)
    # 65 µs is little on its own, but 65 % of a 100 µs link's delay: the judge would
    # call the numbers untrusted, so the factor rises.
    s = Signals(0.5, 65_536, 0, lateness_share=0.65)
    new, why = decide(st, s, 0.0, AUTO) or (0, "")
    assert new == 8.0 and why == "auto up: engine lateness p99 66 us (65 % of its link's delay)"


def test_at_the_bound_lateness_still_holds_the_factor() -> None:
    policy = Policy(calm_windows=1, hold_s=2.0)
    st = State(16.0)
    assert decide(st, Signals(0.1, 500_000, 0), 0.0, AUTO, policy) is None  # at 16
    assert decide(st, _calm(0.05), 1.0, AUTO, policy) is None  # held, not lowered
    assert decide(st, _calm(0.05), 2.5, AUTO, policy) is not None


def test_a_factor_only_just_punctual_is_not_calm() -> None:
    # Measured: on 10 µs links the engine was punctual enough at TDF 128 but not at
    # 64, with every core idle; lowering on CPU alone went 128 -> 64 -> 128 ...
    policy = Policy(calm_windows=2, hold_s=0.0)
    st = State(128.0)
    edge = Signals(0.02, 3_000, 0, lateness_share=0.3)  # under 35 %, over half of it
    for t in range(10):
        assert decide(st, edge, float(t), AutoTdf(high=128.0), policy) is None
    assert decide(st, _calm(0.02), 20.0, AutoTdf(high=128.0), policy) is None
    assert decide(st, _calm(0.02), 21.0, AutoTdf(high=128.0), policy) is not None
