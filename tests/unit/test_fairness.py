"""Jain's fairness index: values, bounds and the edge cases the module decides."""

from __future__ import annotations

import math

import pytest

from fidelnet.measure.fairness import jain


def test_equal_shares_are_perfectly_fair() -> None:
    assert jain([5e6, 5e6, 5e6, 5e6]) == pytest.approx(1.0)


def test_one_flow_taking_everything_gives_one_over_n() -> None:
    assert jain([9.5e6, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_known_value() -> None:
    # (1 + 2 + 3)^2 / (3 * (1 + 4 + 9)) = 36 / 42
    assert jain([1, 2, 3]) == pytest.approx(36 / 42)


def test_unit_does_not_matter() -> None:
    assert jain([4.0e6, 5.5e6]) == pytest.approx(jain([4.0, 5.5]))


def test_accepts_any_iterable() -> None:
    assert jain(x for x in (4.0, 5.5)) == pytest.approx(jain([4.0, 5.5]))


def test_single_value_is_one() -> None:
    assert jain([3.2e6]) == 1.0


def test_all_zero_is_one() -> None:
    assert jain([0.0, 0.0, 0.0]) == 1.0


def test_tiny_values_do_not_underflow() -> None:
    assert jain([1e-200, 1e-200]) == pytest.approx(1.0)
    assert jain([1e-200, 0.0]) == pytest.approx(0.5)


def test_empty_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        jain([])


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf])
def test_negative_or_non_finite_is_an_error(bad: float) -> None:
    with pytest.raises(ValueError, match="finite and not negative"):
        jain([1.0, bad])
