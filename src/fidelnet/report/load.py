"""Reading a results directory: every ``*.json`` that is a result file, and why the
others were skipped."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pydantic

from fidelnet.errors import FidelnetError
from fidelnet.measure.results import SCHEMA, ResultFile, load_result

__all__ = ["ReportError", "Skipped", "load_dir", "no_results_message"]

Skipped = tuple[Path, str]
"""A JSON file that is not a result file, and the reason."""


class ReportError(FidelnetError):
    """A report cannot be made: no results, or a directory that cannot be read."""


def _reason(exc: pydantic.ValidationError) -> str:
    errors = exc.errors()
    parts = []
    for e in errors[:3]:
        loc = ".".join(str(x) for x in e["loc"])
        parts.append(f"{loc}: {e['msg']}" if loc else str(e["msg"]))
    more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
    return "; ".join(parts) + more


def _not_ours(path: Path) -> str:
    """A prefix when the file does not even claim to be a result file."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
        return ""
    return f'not a fidelnet result file (no "schema": "{SCHEMA}"): '


def load_dir(
    directory: str | os.PathLike[str],
) -> tuple[list[tuple[str, ResultFile]], list[Skipped]]:
    """The result files in ``directory`` (``*.json``, by file name) labelled by their
    file's stem, and the JSON files that are not result files with the reason."""
    root = Path(directory)
    if not root.is_dir():
        raise ReportError(f"{root}: not a directory")
    results: list[tuple[str, ResultFile]] = []
    skipped: list[Skipped] = []
    for path in sorted(root.glob("*.json")):
        if not path.is_file():
            continue
        try:
            results.append((path.stem, load_result(path)))
        except pydantic.ValidationError as exc:
            skipped.append((path, _not_ours(path) + _reason(exc)))
        except (OSError, UnicodeDecodeError) as exc:
            skipped.append((path, f"cannot be read: {exc}"))
    return results, skipped


def no_results_message(
    directory: str | os.PathLike[str], skipped: list[Skipped] | None = None
) -> str:
    """What to say when ``directory`` holds no result file."""
    n = len(skipped or [])
    extra = f" ({n} other JSON file{'s' if n != 1 else ''} skipped)" if n else ""
    return (
        f"{directory}: no fidelnet result files (*.json){extra}; "
        "save measurements there first (`fidelnet measure ...`)"
    )
