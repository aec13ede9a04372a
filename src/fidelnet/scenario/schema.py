"""The JSON Schema of scenario files, generated from :mod:`fidelnet.scenario.model`.

The committed copy is ``schemas/scenario.schema.json``; regenerate it after changing
a model with::

    .venv/bin/python -m fidelnet.scenario.schema > schemas/scenario.schema.json

Editors use it to complete and check scenario files (for YAML with
``# yaml-language-server: $schema=...``). It describes the shape of a file; what
depends on several keys (names that must exist, units that must parse) is checked
by :func:`fidelnet.scenario.load`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from fidelnet.scenario.model import Scenario

__all__ = ["SCHEMA_ID", "main", "scenario_schema", "schema_text"]

SCHEMA_ID = "https://fidelnet.invalid/schemas/scenario.schema.json"
"""The schema's ``$id`` (a name, not a place to download it from)."""
REGENERATE = ".venv/bin/python -m fidelnet.scenario.schema > schemas/scenario.schema.json"
"""The command that rewrites the committed schema."""


def scenario_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a scenario file."""
    schema = Scenario.model_json_schema(mode="validation")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        **schema,
    }


def schema_text() -> str:
    """The schema as the committed file holds it: indented JSON, one final newline."""
    return json.dumps(scenario_schema(), indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    """Print the schema (``python -m fidelnet.scenario.schema``)."""
    sys.stdout.write(schema_text())


if __name__ == "__main__":
    main()
