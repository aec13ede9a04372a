"""Unit parsing: rates, durations, sizes, percentages (fidelnet.topology.units)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from fidelnet.errors import UnitError, ValidationError
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate, parse_size


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("10Mbit", 10e6),
        ("1Gbps", 1e9),
        ("100kbit", 100e3),
        ("5 Mbit/s", 5e6),
        ("1.5Gbit", 1.5e9),
        ("2Tbit", 2e12),
        ("300bit", 300.0),
        ("10mbit", 10e6),
        ("1MBps", 8e6),
        ("1kBps", 8e3),
        ("1Bps", 8.0),
        (0.5e6, None),
    ],
)
def test_parse_rate_units(text: str | float, expected: float | None) -> None:
    if expected is None:
        with pytest.raises(UnitError, match="a rate needs a unit"):
            parse_rate("bw", text)
    else:
        assert parse_rate("bw", text) == pytest.approx(expected)


def test_rate_bare_number_needs_bare_unit() -> None:
    with pytest.raises(UnitError) as info:
        parse_rate("links[0].params.bw", "10")
    assert info.value.field == "links[0].params.bw"
    assert "needs a unit" in str(info.value)
    assert parse_rate("bw", "10", bare_unit=1e6) == 10e6
    assert parse_rate("bw", 10, bare_unit=1e6) == 10e6


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2ms", 0.002),
        ("500us", 500e-6),
        ("500µs", 500e-6),
        ("1s", 1.0),
        ("1.5sec", 1.5),
        ("10ns", 10e-9),
        ("2min", 120.0),
        ("3msec", 0.003),
    ],
)
def test_parse_duration_units(text: str, expected: float) -> None:
    assert parse_duration("delay", text) == pytest.approx(expected)


def test_duration_bare_number_rejected_without_bare_unit() -> None:
    with pytest.raises(UnitError, match="a duration needs a unit"):
        parse_duration("delay", "5")
    assert parse_duration("delay", "5", bare_unit=1e-3) == pytest.approx(0.005)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1500B", 1500),
        ("64KiB", 65536),
        ("64KB", 64000),
        ("1MiB", 1048576),
        ("2MB", 2_000_000),
        ("1GiB", 1024**3),
        ("3bytes", 3),
        ("1500", 1500),
    ],
)
def test_parse_size_units(text: str, expected: int) -> None:
    value = parse_size("limit", text)
    assert value == expected
    assert isinstance(value, int)


def test_size_bare_number_rejected_when_bare_unit_is_none() -> None:
    with pytest.raises(UnitError, match="a size needs a unit"):
        parse_size("limit", "1500", bare_unit=None)


@pytest.mark.parametrize(
    ("text", "expected"), [("1%", 1.0), ("0.5%", 0.5), ("0", 0.0), ("100%", 100.0), (25, 25.0)]
)
def test_parse_percent_in_bounds(text: str | int, expected: float) -> None:
    assert parse_percent("loss", text) == expected


@pytest.mark.parametrize("text", ["100.1%", "101", "-1%", "5ms"])
def test_parse_percent_out_of_bounds_or_wrong_unit(text: str) -> None:
    with pytest.raises(UnitError) as info:
        parse_percent("loss", text)
    assert info.value.field == "loss"


@pytest.mark.parametrize(
    "parse", [parse_rate, parse_duration, parse_size, parse_percent], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, "1e999Mbit", "1e999ms"])
def test_non_finite_rejected(parse: Callable[..., object], bad: object) -> None:
    with pytest.raises(UnitError):
        parse("q", bad)


@pytest.mark.parametrize(
    ("parse", "text"),
    [
        (parse_rate, "-5Mbit"),
        (parse_duration, "-1ms"),
        (parse_size, "-1500B"),
        (parse_percent, "-0.5%"),
    ],
)
def test_negative_rejected(parse: Callable[..., object], text: str) -> None:
    with pytest.raises(UnitError, match="must not be negative"):
        parse("q", text)


@pytest.mark.parametrize(
    ("parse", "text", "fragment"),
    [
        (parse_rate, "10Mfoo", "unknown rate unit"),
        (parse_duration, "10hours", "unknown time unit"),
        (parse_size, "10parsecs", "unknown size unit"),
        (parse_rate, "fast", "not a number"),
        (parse_rate, "nan", "not a number"),
        (parse_duration, "", "not a number"),
        (parse_rate, True, "expected a quantity"),
    ],
)
def test_malformed_quantities(parse: Callable[..., object], text: object, fragment: str) -> None:
    with pytest.raises(UnitError, match=fragment):
        parse("q", text)


def test_unit_error_is_a_validation_error_with_choices() -> None:
    with pytest.raises(ValidationError) as info:
        parse_rate("bw", "10Mfoo")
    assert "Mbit" in info.value.choices
    assert info.value.value == "10Mfoo"


def test_quantities_past_the_largest_float_are_named_errors() -> None:
    # Found by `make fuzz`: "20E304K" is 2e305 kilo-units, infinite once multiplied;
    # a size became an OverflowError from round().
    for parse, text in ((parse_size, "20E304K"), (parse_rate, "9e307Gbit")):
        with pytest.raises(UnitError, match="too large"):
            parse("f", text)
