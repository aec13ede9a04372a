"""Scenario files past their limits are refused with a problem naming the limit and
the place, fast, before anything is built (docs/scenarios.md#limits)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fidelnet.scenario import ScenarioError, load, loads
from fidelnet.scenario.limits import MAX_DEPTH, MAX_EVENTS, MAX_FILE_BYTES, MAX_NODES
from fidelnet.scenario.model import Scenario
from fidelnet.topology import builders

OK = "name: x\ntopology: {nodes: {h1: {}, h2: {}}, links: [{a: h1, b: h2}]}\n"


def _problems(text: str, *, validated: bool = False) -> list[str]:
    """The problems of ``text``; unless ``validated``, refused before the scenario's
    model validates anything (the work a limit bounds), whatever the machine's speed."""
    patch = pytest.MonkeyPatch()
    if not validated:

        def no_validation(*args: object, **kwargs: object) -> None:
            raise AssertionError("validated before the limit refused the file")

        patch.setattr(Scenario, "model_validate", no_validation)
    try:
        with pytest.raises(ScenarioError) as info:
            loads(text, "x.yaml")
    finally:
        patch.undo()
    return [p.format() for p in info.value.problems]


def test_alias_bomb_is_refused_quickly() -> None:
    bomb = "name: x\na: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):  # 10^9 values once expanded
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    found = _problems(bomb + OK.replace("name: x\n", ""))
    assert len(found) == 1 and "more than 200,000 values once its aliases" in found[0]


def test_deep_nesting_is_refused() -> None:
    deep = "name: x\ntopology: " + "[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5) + "\n"
    found = _problems(deep)
    assert len(found) == 1 and f"nested more than {MAX_DEPTH} levels" in found[0]
    very = "name: x\ntopology: " + "[" * 50_000 + "]" * 50_000 + "\n"
    found = _problems(very)
    assert len(found) == 1 and "nested" in found[0]


@pytest.mark.parametrize(
    ("builder", "what"),
    [
        ("{linear: 100000000}", "linear"),
        ("{tree: {depth: 30, fanout: 10}}", "tree"),
        ("{single: 200000}", "single"),
        ("{dumbbell: 60000}", "dumbbell"),
    ],
)
def test_a_builder_past_the_node_limit_is_refused_before_it_builds(
    builder: str, what: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_build(*args: object, **kwargs: object) -> None:
        raise AssertionError("built before the limit refused it")

    for name in ("linear", "tree", "single", "dumbbell", "line"):
        monkeypatch.setattr(builders, name, no_build)
    found = _problems(f"name: x\ntopology: {{builder: {builder}}}\n", validated=True)
    assert len(found) == 1, found
    assert f"this {what} has more than {MAX_NODES:,} nodes" in found[0]
    assert found[0].startswith("x.yaml:2:")


def test_too_many_items_name_the_field() -> None:
    checks = "".join("  - {type: command, node: h1, run: [true]}\n" for _ in range(10_001))
    found = _problems(OK + "checks:\n" + checks.replace("[true]", "['true']"))
    assert len(found) == 1 and found[0].startswith("x.yaml:3:1: checks: must have at most")
    assert "10000" in found[0]


def test_too_many_events_name_the_traffic_item() -> None:
    event = "    - {{at: {}, link: [h1, h2], down: true}}\n"
    events = "".join(event.format(i) for i in range(MAX_EVENTS + 1))
    text = OK + "traffic:\n  - type: ping\n    name: p\n    src: h1\n    dst: h2\n    events:\n"
    found = _problems(text + events)
    assert len(found) == 1 and "traffic[0].events: must have at most" in found[0], found


def test_a_file_too_large_or_not_utf8(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text(OK + "#" * MAX_FILE_BYTES)
    with pytest.raises(ScenarioError, match="more than the 4,194,304 a scenario may be"):
        load(big)
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(OK.encode() + b"# \xff\xfe\n")
    with pytest.raises(ScenarioError, match="not UTF-8 text"):
        load(bad)
