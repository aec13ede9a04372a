"""Fuzzing every parser that takes text from users (issue 14): whatever comes in,
the answer is a value or a FidelnetError naming the field, never another exception
or a hang. A short budget runs in `make test`; `make fuzz` runs a long one
(FIDELNET_FUZZ_EXAMPLES)."""

from __future__ import annotations

import os
import random
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fidelnet.errors import FidelnetError
from fidelnet.links.params import parse_params
from fidelnet.scenario import ScenarioError, loads
from fidelnet.topology.builders import from_mn_spec
from fidelnet.topology.units import parse_duration, parse_percent, parse_rate, parse_size

EXAMPLES = int(os.environ.get("FIDELNET_FUZZ_EXAMPLES", "300"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=2000,  # ms: a hang or a blow-up shows as a failure, not a stuck suite
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("FIDELNET_FUZZ_RANDOM") is None,
)
ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted(
    [*(ROOT / "tests/unit/data/scenarios/good").glob("*.yaml"), *(ROOT / "examples").glob("*.yaml")]
)
UNITS = ["", "s", "ms", "us", "ns", "min", "bit", "kbit", "Mbit", "Gbit", "B", "KiB", "MB",
         "%", "pps", "kpps", "x", "e", "-", ".", "inf", "nan"]  # fmt: skip
quantity = st.one_of(
    st.text(max_size=30),
    st.builds(lambda n, u: f"{n}{u}", st.floats(allow_nan=True, allow_infinity=True),
              st.sampled_from(UNITS)),
    st.builds(lambda n, u: f"{n}{u}", st.integers(-(10**30), 10**30), st.sampled_from(UNITS)),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(10**30), 10**30),
    st.integers(),  # beyond any float too
)  # fmt: skip


def _fails_well(fn: object, *args: object) -> None:
    try:
        fn(*args)  # type: ignore[operator]
    except FidelnetError as exc:
        assert str(exc), "an error with no message"


@FUZZ
@given(quantity)
def test_unit_parsers(value: str | float | int) -> None:
    for fn in (parse_duration, parse_rate, parse_size, parse_percent):
        _fails_well(fn, "f", value)


LINK_KEYS = ["bw", "delay", "jitter", "loss", "max_queue_size", "queue", "corrupt", "duplicate",
             "reorder", "rate", "trace", "loss_model", "burst", "x"]  # fmt: skip


@FUZZ
@given(st.dictionaries(st.sampled_from(LINK_KEYS) | st.text(max_size=8), quantity, max_size=6))
def test_link_parameters(values: dict[str, object]) -> None:
    _fails_well(parse_params, values, "link")


@FUZZ
@given(st.one_of(
    st.text(max_size=40),
    st.builds(lambda n, a: f"{n},{a}", st.sampled_from(["linear", "tree", "single", "reversed",
              "torus", "minimal", "line", "fattree", "x"]),
              st.text(alphabet="0123456789,-=. x", max_size=20)),
))  # fmt: skip
def test_mininet_topo_option(text: str) -> None:
    _fails_well(from_mn_spec, text)


OPTIONS = ["--topo", "--link", "--host", "--switch", "--controller", "--test", "--mac", "--arp"]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(OPTIONS), st.text(max_size=30)), max_size=4))
def test_mn_command_line(options: list[tuple[str, str]]) -> None:
    from fidelnet.cli.mn import parse

    argv = [x for pair in options for x in pair]
    _fails_well(parse, argv)


@FUZZ
@given(st.text(max_size=400))
def test_scenario_loader_random_text(text: str) -> None:
    with pytest.raises(ScenarioError):
        loads(text, "fuzz.yaml")


@FUZZ
@given(st.binary(max_size=400))
def test_scenario_loader_random_bytes(data: bytes) -> None:
    text = data.decode("utf-8", "replace")
    with pytest.raises(ScenarioError):
        loads(text, "fuzz.yaml")


_TOKEN = re.compile(r"[A-Za-z0-9_.%-]+")
_REPLACEMENTS = ["", "0", "-1", "1e309", "nan", "[]", "{}", "null", "true", "'x'", "*a",
                 "&a x", "99999999999999999999", "h9", "1ms", "0s", "10000000kpps", ":", "- ",
                 "\t", "'", '"', "[", "{"]  # fmt: skip


@FUZZ
@given(st.sampled_from(SCENARIOS), st.randoms(use_true_random=False), st.integers(1, 4))
def test_scenario_loader_mutated_examples(path: Path, rnd: random.Random, edits: int) -> None:
    """Valid-looking files: an example with a few tokens, lines or characters changed;
    either it is still valid or every problem is a ScenarioError."""
    lines = path.read_text().splitlines()
    for _ in range(edits):
        i = rnd.randrange(len(lines))
        kind = rnd.randrange(4)
        if kind == 0:  # replace one token
            tokens = list(_TOKEN.finditer(lines[i]))
            if tokens:
                m = rnd.choice(tokens)
                lines[i] = lines[i][: m.start()] + rnd.choice(_REPLACEMENTS) + lines[i][m.end() :]
        elif kind == 1:  # drop a line
            del lines[i]
        elif kind == 2:  # repeat a line
            lines.insert(i, lines[i])
        else:  # shift its indentation
            lines[i] = (" " * rnd.randrange(0, 6)) + lines[i].lstrip()
        if not lines:
            lines = [""]
    try:
        loads("\n".join(lines) + "\n", str(path))
    except ScenarioError as exc:
        assert all(p.message for p in exc.problems)
