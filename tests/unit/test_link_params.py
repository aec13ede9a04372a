"""Link parameters from text: names, units, choices, Mininet's units."""

from __future__ import annotations

import math

import pytest

from fidelnet.errors import ValidationError
from fidelnet.links.params import PARAM_NAMES, format_params, parse_params
from fidelnet.topology.spec import GilbertElliott, LinkParams
from fidelnet.topology.validate import param_problems


def test_every_field_parses_to_base_units() -> None:
    p = parse_params(
        {
            "bw": "1.5Gbit",
            "delay": "10ms",
            "jitter": "500us",
            "jitter_dist": "normal",
            "reorder": True,
            "loss": "1%",
            "duplicate": 0.5,
            "corrupt": "0.1%",
            "max_queue_size": 200,
            "queue_bytes": "64KiB",
            "queue": "hifi",
            "overhead": 24,
            "seed": 7,
        }
    )
    assert p.bw == 1.5e9
    assert p.delay is not None and math.isclose(p.delay, 0.01)
    assert p.jitter is not None and math.isclose(p.jitter, 0.0005)
    assert (p.jitter_dist, p.reorder, p.loss, p.duplicate, p.corrupt) == (
        "normal",
        True,
        1.0,
        0.5,
        0.1,
    )
    assert (p.max_queue_size, p.queue_bytes, p.queue, p.overhead, p.seed) == (
        200,
        65536,
        "hifi",
        24,
        7,
    )
    assert param_problems(p) == []


def test_rates_above_one_gigabit_are_accepted() -> None:
    assert parse_params({"bw": "40Gbit"}).bw == 40e9


def test_gilbert_elliott_mapping() -> None:
    p = parse_params({"loss": {"model": "gilbert_elliott", "p": "1%", "r": 25}})
    assert p.loss is None
    assert p.loss_model == GilbertElliott(p=1.0, r=25.0, loss_good=0.0, loss_bad=100.0)


@pytest.mark.parametrize(
    ("values", "field", "needle"),
    [
        ({"bandwidth": "1Mbit"}, "params.bandwidth", "unknown link parameter"),
        ({"bw": 10}, "params.bw", "a rate needs a unit"),
        ({"delay": "10"}, "params.delay", "a duration needs a unit"),
        ({"delay": "-1ms"}, "params.delay", "must not be negative"),
        ({"delay": "nanms"}, "params.delay", "not a number"),
        ({"loss": "101%"}, "params.loss", "at most 100"),
        ({"jitter_dist": "pareto"}, "params.jitter_dist", "unknown value"),
        ({"queue": "red"}, "params.queue", "unknown value"),
        ({"reorder": "yes"}, "params.reorder", "true or false"),
        ({"max_queue_size": 1.5}, "params.max_queue_size", "whole number"),
        ({"loss": {"model": "bursty", "p": 1}}, "params.loss.model", "unknown loss model"),
        ({"loss": {"model": "gilbert_elliott", "p": 1}}, "params.loss.r", "needs p and r"),
        ({"loss": {"p": 1, "r": 2, "h": 3}}, "params.loss.h", "unknown key"),
    ],
)
def test_bad_values_name_the_field(values: dict[str, object], field: str, needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        parse_params(values)
    assert info.value.field == field
    assert needle in str(info.value)


def test_unknown_name_lists_the_valid_ones() -> None:
    with pytest.raises(ValidationError) as info:
        parse_params({"latency": "1ms"})
    assert set(info.value.choices or []) == set(PARAM_NAMES)


def test_mininet_units() -> None:
    p = parse_params({"bw": 10, "delay": 0, "loss": 0}, mininet_units=True)
    assert p == LinkParams(bw=10e6)


@pytest.mark.parametrize(
    ("params", "field", "needle"),
    [
        (LinkParams(loss=float("nan")), "p.loss", "finite"),
        (LinkParams(bw=0.0), "p.bw", "positive"),
        (LinkParams(duplicate=150.0), "p.duplicate", "at most 100"),
        (LinkParams(jitter=0.001), "p.jitter", "needs a delay"),
        (LinkParams(max_queue_size=0), "p.max_queue_size", ">= 1"),
        (LinkParams(seed=-1), "p.seed", ">= 0"),
        (LinkParams(queue="red"), "p.queue", "unknown value"),  # type: ignore[arg-type]
        (LinkParams(loss=1.0, loss_model=GilbertElliott(1, 10)), "p.loss", "not both"),
        (LinkParams(loss_model=GilbertElliott(1, 0)), "p.loss.r", "positive"),
        (LinkParams(loss_model=GilbertElliott(1, 200)), "p.loss.r", "at most 100"),
    ],
)
def test_direct_params_are_range_checked(params: LinkParams, field: str, needle: str) -> None:
    problems = param_problems(params, "p")
    assert problems, params
    assert problems[0].field == field
    assert needle in str(problems[0])


def test_format_params() -> None:
    text = format_params(parse_params({"bw": "10Mbit", "delay": "5ms", "loss": "1%"}))
    assert text == "bw=10Mbit delay=5ms loss=1.0%"


def test_merge_overrides_only_what_is_set() -> None:
    base = LinkParams(bw=1e6, delay=0.01)
    assert base.merged(LinkParams(delay=0.02)) == LinkParams(bw=1e6, delay=0.02)
