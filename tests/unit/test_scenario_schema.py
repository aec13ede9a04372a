"""The JSON Schema of scenario files: the committed copy is the generated one, it is
well formed, good scenarios pass it and it refuses what it can describe; and every
good scenario dumps to YAML and reads back equal."""

from __future__ import annotations

import json
import operator
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from fidelnet.scenario import (
    default_scenario,
    dumps,
    fields,
    load,
    loads,
    model_checks,
    model_events,
    model_hardware,
    model_routing,
    model_steps,
    model_topology,
    model_vt,
)
from fidelnet.scenario import model as m
from fidelnet.scenario.schema import REGENERATE, scenario_schema, schema_text

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "schemas" / "scenario.schema.json"
GOOD = Path(__file__).parent / "data" / "scenarios" / "good"
DEFAULT = ROOT / "src" / "fidelnet" / "scenario" / "default.yaml"
EXAMPLES = [*sorted(GOOD.glob("*.yaml")), DEFAULT]


def test_committed_schema_is_the_generated_one() -> None:
    assert COMMITTED.read_text(encoding="utf-8") == schema_text(), (
        f"schemas/scenario.schema.json is out of date; regenerate it: {REGENERATE}"
    )


def test_schema_is_deterministic() -> None:
    assert scenario_schema() == scenario_schema()
    assert json.loads(schema_text()) == m.Scenario.model_json_schema() | {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": scenario_schema()["$id"],
    }


MODEL_MODULES = (
    fields,
    model_topology,
    model_hardware,
    model_routing,
    model_vt,
    model_events,
    model_steps,
    model_checks,
    m,
)
"""Every module that defines scenario models (``model`` re-exports the others')."""


def _models() -> set[str]:
    found = set()
    for module in MODEL_MODULES:
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.__module__ == module.__name__
                and not value.__name__.startswith("_")
                and value is not m.Scenario
            ):
                found.add(value.__name__)
    return found


def test_model_reexports_every_model() -> None:
    assert _models() <= set(m.__all__)
    for name in m.__all__:
        assert hasattr(m, name), name


def test_schema_defines_every_model() -> None:
    schema = scenario_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "Scenario" and schema["required"] == ["name", "topology"]
    assert set(schema["$defs"]) == _models()
    for name, definition in schema["$defs"].items():
        assert definition["type"] == "object", name
        assert definition["additionalProperties"] is False, name
        assert definition.get("description"), name


# --- a small validator for the keywords the schema uses ---------------------------------------

_KNOWN = {
    "$schema", "$id", "$defs", "$ref", "title", "description", "default", "examples",
    "discriminator", "type", "enum", "const", "anyOf", "oneOf", "properties", "required",
    "additionalProperties", "patternProperties", "items", "minItems", "maxItems", "minimum",
    "maximum", "exclusiveMinimum", "exclusiveMaximum", "pattern", "minProperties",
    "maxProperties",
}  # fmt: skip
_TYPES: dict[str, Any] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def _errors(value: Any, schema: Any, root: dict[str, Any], where: str = "") -> list[str]:
    if schema is True:
        return []
    if schema is False:
        return [f"{where}: not allowed"]
    unknown = set(schema) - _KNOWN
    assert not unknown, f"the test validator does not know {unknown}"
    if "$ref" in schema:
        name = schema["$ref"].removeprefix("#/$defs/")
        return _errors(value, root["$defs"][name], root, where)
    for key in ("anyOf", "oneOf"):
        if key not in schema:
            continue
        options = [_errors(value, s, root, where) for s in schema[key]]
        matches = sum(not o for o in options)
        if matches == 1 or (matches and key == "anyOf"):
            return []
        closest = min(options, key=len) if not matches else []
        return [f"{where}: {matches} {key} alternatives match", *closest]
    found: list[str] = []
    if "type" in schema and not _TYPES[schema["type"]](value):
        return [f"{where}: not {schema['type']}"]
    if "enum" in schema and value not in schema["enum"]:
        found.append(f"{where}: not in {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        found.append(f"{where}: not {schema['const']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        found.append(f"{where}: does not match {schema['pattern']}")
    if _TYPES["number"](value):
        for key, ok in (
            ("minimum", operator.ge),
            ("maximum", operator.le),
            ("exclusiveMinimum", operator.gt),
            ("exclusiveMaximum", operator.lt),
        ):
            if key in schema and not ok(value, schema[key]):
                found.append(f"{where}: breaks {key} {schema[key]}")
    if isinstance(value, list):
        if not schema.get("minItems", 0) <= len(value) <= schema.get("maxItems", len(value)):
            found.append(f"{where}: wrong number of items")
        for i, item in enumerate(value):
            found += _errors(item, schema.get("items", True), root, f"{where}[{i}]")
    if isinstance(value, dict):
        if (
            not schema.get("minProperties", 0)
            <= len(value)
            <= schema.get("maxProperties", len(value))
        ):
            found.append(f"{where}: wrong number of keys")
        found += [f"{where}.{k}: missing" for k in schema.get("required", ()) if k not in value]
        for key, item in value.items():
            if key in schema.get("properties", {}):
                sub = schema["properties"][key]
            else:
                patterns = schema.get("patternProperties", {})
                sub = next(
                    (s for p, s in patterns.items() if re.search(p, key)),
                    schema.get("additionalProperties", True),
                )
            found += _errors(item, sub, root, f"{where}.{key}")
    return found


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_schema_accepts_good_files(path: Path) -> None:
    schema = scenario_schema()
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert _errors(data, schema, schema) == []


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: d.update(toplogy={}), ".toplogy: not allowed"),
        (lambda d: d.pop("name"), ".name: missing"),
        (lambda d: d["topology"].update(link_backend="tcc"), "not in"),
        (lambda d: d["topology"]["nodes"].update({"1bad": {}}), ".1bad: not allowed"),
        (lambda d: d["traffic"][1].update(rate="10 kbit"), ".rate: does not match"),
        (lambda d: d["traffic"][1].update(rate="-1kpps"), ".rate: does not match"),
        (lambda d: d["traffic"][1].update(rte="1kpps"), ".rte: not allowed"),
        (lambda d: d["checks"][2].update(percentile=101), ".percentile: breaks maximum 100"),
        (lambda d: d.update(repeat=0), "breaks minimum 1"),
        (
            lambda d: d["topology"].update(builder={"line": 7, "single": 2}),
            ".builder: wrong number of keys",
        ),
    ],
)
def test_schema_refuses(change: Any, error: str) -> None:
    schema = scenario_schema()
    data = yaml.safe_load(DEFAULT.read_text(encoding="utf-8"))
    assert _errors(data, schema, schema) == []
    change(data)
    found = _errors(data, schema, schema)
    assert any(error in e for e in found), found


# --- round trip ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_dump_and_reload_is_equal(path: Path) -> None:
    scenario = load(path)
    text = dumps(scenario)
    again = loads(text, "dumped.yaml", base_dir=path.parent)
    assert again == scenario
    assert dumps(again) == text
    schema = scenario_schema()
    assert _errors(yaml.safe_load(text), schema, schema) == []


def test_default_scenario_round_trips() -> None:
    scenario = default_scenario()
    assert loads(dumps(scenario), "<default scenario>") == scenario
