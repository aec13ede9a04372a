"""A baseline: a plain directory of result files that users commit or keep as a CI
artefact, with a manifest saying what it is.

``save`` copies every result file of a results directory (``fidelnet test --out``:
``<scenario>/run-<k>/<traffic>.json``, or any tree of result files), with the HDR
logs beside them, keeping relative paths, and writes ``fidelnet-baseline.json``
(the fidelnet version, when, which files). ``pair`` matches a baseline's files with
a new results directory's by relative path, and says which are missing on either
side.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pydantic

from fidelnet._version import __version__
from fidelnet.errors import FidelnetError
from fidelnet.measure.results import SCHEMA, ResultFile, load_result

__all__ = ["MANIFEST", "BaselineError", "Pairing", "pair", "result_files", "save"]

MANIFEST = "fidelnet-baseline.json"
BASELINE_SCHEMA = "fidelnet.baseline/1"


class BaselineError(FidelnetError):
    """A baseline cannot be saved or read: the path and why."""


def _load(path: Path) -> ResultFile:
    try:
        return load_result(path)
    except (OSError, pydantic.ValidationError) as exc:
        raise BaselineError(f"{path}: not a readable result file: {exc}") from exc


def result_files(root: Path) -> dict[str, Path]:
    """Every result file under ``root`` by its path relative to ``root``."""
    if not root.is_dir():
        raise BaselineError(f"{root}: not a directory")
    out = {}
    for path in sorted(root.rglob("*.json")):
        if path.name == MANIFEST or not path.is_file():
            continue
        try:
            doc = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError):
            continue
        if isinstance(doc, dict) and doc.get("schema") == SCHEMA:
            out[path.relative_to(root).as_posix()] = path
    return out


def save(results: str | os.PathLike[str], dest: str | os.PathLike[str]) -> list[str]:
    """Copy ``results``' result files (and their ``.hlog`` files) into ``dest`` as a
    baseline; returns the relative paths saved. ``dest`` must be new, empty or an
    earlier baseline (whose result files are replaced)."""
    src, out = Path(results), Path(dest)
    files = result_files(src)
    if not files:
        raise BaselineError(f"{src}: no result files to keep as a baseline")
    if out.exists():
        if not out.is_dir():
            raise BaselineError(f"{out}: exists and is not a directory")
        if any(out.iterdir()) and not (out / MANIFEST).is_file():
            raise BaselineError(
                f"{out}: not empty and not a baseline (no {MANIFEST}): choose another directory"
            )
        for old in result_files(out).values():
            old.unlink()
            old.with_suffix(".hlog").unlink(missing_ok=True)
    for rel, path in files.items():
        _load(path)  # only valid result files go into a baseline
        target = out / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
        hlog = path.with_suffix(".hlog")
        if hlog.is_file():
            shutil.copyfile(hlog, target.with_suffix(".hlog"))
    manifest = {
        "schema": BASELINE_SCHEMA,
        "fidelnet": __version__,
        "created_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "source": str(src.resolve()),
        "files": sorted(files),
    }
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return sorted(files)


@dataclass(frozen=True)
class Pairing:
    """A baseline's result files matched with a new run's."""

    pairs: list[tuple[str, ResultFile, ResultFile]]
    only_baseline: list[str]
    only_new: list[str]


def pair(baseline: str | os.PathLike[str], results: str | os.PathLike[str]) -> Pairing:
    base_root, new_root = Path(baseline), Path(results)
    if not (base_root / MANIFEST).is_file():
        raise BaselineError(
            f"{base_root}: not a baseline (no {MANIFEST}); make one with "
            "`fidelnet test ... --save-baseline DIR`"
        )
    base = result_files(base_root)
    new = result_files(new_root)
    pairs = [(rel, _load(base[rel]), _load(new[rel])) for rel in base if rel in new]
    return Pairing(pairs, sorted(set(base) - set(new)), sorted(set(new) - set(base)))
