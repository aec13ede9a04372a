"""Read scenario files: YAML to :class:`~fidelnet.scenario.model.Scenario`, with every
problem placed at its file, line and column.

The YAML is read with PyYAML's safe loader in two steps. First the node tree is
walked to record where every mapping key and sequence item starts (by its path of
keys and indexes, ``("topology", "links", 2, "params", "delay")``) and to refuse a
key given twice in one mapping (YAML's last-wins would hide the first); then the
tree becomes plain Python data and is validated by the models. Each problem pydantic
or the cross-checks report is placed at its path's position, or its nearest
ancestor's when the key itself is missing.

Public: :func:`load`, :func:`loads`, :func:`dumps`, :func:`default_scenario`,
:func:`parse_yaml`.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Iterable, Mapping
from importlib import resources
from pathlib import Path as FsPath
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pydantic
import yaml
from pydantic import BaseModel, Tag

from fidelnet.scenario.errors import NO_VALUE, Path, Problem, ScenarioError
from fidelnet.scenario.limits import (
    MAX_CHECKS,
    MAX_DEPTH,
    MAX_EVENTS,
    MAX_FILE_BYTES,
    MAX_SETUP,
    MAX_TRAFFIC,
    MAX_YAML_VALUES,
)
from fidelnet.scenario.model import Scenario

__all__ = ["Positions", "default_scenario", "dumps", "load", "loads", "parse_yaml"]

Positions = dict[Path, tuple[int, int]]
"""Where each key and sequence item starts: path -> (line, column), 1-based."""

_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader; positions and duplicates are read from its node tree."""


class _TooBigError(Exception):
    """The walk stopped at a limit; the problem is the walk's last."""


def _mark(node: yaml.Node) -> tuple[int, int]:
    return node.start_mark.line + 1, node.start_mark.column + 1


class _Walk:
    """Records positions and finds duplicate keys in a composed YAML node tree."""

    def __init__(self, loader: _Loader, file: str) -> None:
        self.loader = loader
        self.file = file
        self.positions: Positions = {}
        self.problems: list[Problem] = []
        self._open: set[int] = set()
        self._values = 0

    def problem(self, node: yaml.Node, path: Path, message: str, value: object = NO_VALUE) -> None:
        line, col = _mark(node)
        self.problems.append(Problem(message, path, self.file, line, col, value))

    def node(self, node: yaml.Node, path: Path, merged: bool = False) -> None:
        if id(node) in self._open:
            self.problem(node, path, "an alias refers to a node that contains it")
            return
        self._values += 1
        if self._values > MAX_YAML_VALUES:
            self.problem(
                node, path, f"the document holds more than {MAX_YAML_VALUES:,} values once its "
                "aliases are expanded, the most a scenario may (docs/scenarios.md#limits)",
            )  # fmt: skip
            raise _TooBigError
        if len(path) > MAX_DEPTH:
            self.problem(
                node, path, f"nested more than {MAX_DEPTH} levels deep, the most a scenario "
                "may (docs/scenarios.md#limits)",
            )  # fmt: skip
            raise _TooBigError
        self._open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                self.mapping(node, path, merged)
            elif isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    self.positions.setdefault((*path, i), _mark(item))
                    self.node(item, (*path, i))
        finally:
            self._open.discard(id(node))

    def mapping(self, node: yaml.MappingNode, path: Path, merged: bool) -> None:
        seen: dict[object, tuple[int, int]] = {}
        merges: list[yaml.Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merges.append(value_node)
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.problem(key_node, path, "a key must be a plain value, not a list or mapping")
                continue
            key = self.loader.construct_object(key_node)
            if not isinstance(key, str | int | float | bool) and key is not None:
                key = key_node.value
            sub = (*path, key)
            if key in seen:
                line, col = seen[key]
                self.problem(
                    key_node, sub, f"duplicate key: {key!r} is already given at {line}:{col}"
                )
                continue
            seen[key] = _mark(key_node)
            if merged:
                self.positions.setdefault(sub, _mark(key_node))
            else:
                self.positions[sub] = _mark(key_node)
            self.node(value_node, sub)
        for value_node in merges:  # `<<: *base`: keys given here win over merged ones
            targets = (
                value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            )
            for target in targets:
                self.node(target, path, merged=True)


def parse_yaml(text: str, file: str = "<string>") -> tuple[Any, Positions]:
    """The YAML document in ``text`` as Python data, and where each key and item starts.

    Raises :class:`ScenarioError` for a syntax error (with the parser's line and
    column), an empty document, and keys given twice in one mapping.
    """
    try:
        loader = _Loader(text)  # refuses control characters at once
    except yaml.reader.ReaderError as exc:
        line, col = _line_col(text, exc.position)
        raise ScenarioError(
            [Problem(f"character U+{exc.character:04X} is not allowed in YAML", (), file,
                     line, col)]
        ) from None  # fmt: skip
    try:
        root = loader.get_single_node()
        if root is None:
            raise ScenarioError(
                [
                    Problem(
                        "the file is empty; a scenario needs at least name and topology",
                        (),
                        file,
                        1,
                        1,
                    )
                ]
            )
        walk = _Walk(loader, file)
        walk.positions[()] = _mark(root)
        try:
            walk.node(root, ())
        except _TooBigError:
            raise ScenarioError(walk.problems[-1:]) from None
        if walk.problems:
            raise ScenarioError(walk.problems)
        return loader.construct_document(root), walk.positions
    except RecursionError:
        raise ScenarioError(
            [Problem(f"nested too deeply to read (more than {MAX_DEPTH} levels may not be)",
                     (), file, 1, 1)]
        ) from None  # fmt: skip
    except yaml.MarkedYAMLError as exc:
        raise ScenarioError([_yaml_problem(exc, file)]) from None
    except yaml.YAMLError as exc:
        raise ScenarioError([Problem(f"YAML: {exc}", (), file, 1, 1)]) from None
    finally:
        loader.dispose()


def _line_col(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of character ``position`` of ``text``."""
    before = text[:position]
    return before.count("\n") + 1, position - (before.rfind("\n") + 1) + 1


def _yaml_problem(exc: yaml.MarkedYAMLError, file: str) -> Problem:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or "cannot be read"
    message = f"YAML syntax: {problem}"
    if exc.context and problem.startswith("but "):  # "expected a single document ..., but"
        message = f"YAML syntax: {exc.context}, {problem}"
    elif exc.context:
        message += f" ({exc.context}"
        if exc.context_mark is not None and exc.context_mark is not mark:
            message += f" at {exc.context_mark.line + 1}:{exc.context_mark.column + 1}"
        message += ")"
    if mark is None:
        return Problem(message, (), file)
    return Problem(message, (), file, mark.line + 1, mark.column + 1)


# --- loading ------------------------------------------------------------------------------------


def _too_long(size: int, file: str) -> Problem:
    return Problem(
        f"the file is {size:,} bytes, more than the {MAX_FILE_BYTES:,} a scenario may be "
        "(docs/scenarios.md#limits)",
        (),
        file,
    )


def load(path: str | FsPath) -> Scenario:
    """Read and validate the scenario file at ``path``.

    Raises :class:`ScenarioError` with every problem found (positions included), and
    :class:`OSError` when the file cannot be read. Relative trace files are read from
    the file's directory.
    """
    path = FsPath(path)
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ScenarioError([_too_long(size, str(path))])
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            [Problem(f"not UTF-8 text (byte {exc.start} cannot be decoded)", (), str(path))]
        ) from None
    return loads(text, str(path), base_dir=path.parent)


def loads(text: str, name: str = "<string>", *, base_dir: str | FsPath | None = None) -> Scenario:
    """Validate the scenario in ``text``; ``name`` is the file name shown in problems.

    Relative trace files are read from ``base_dir`` (default: the working directory).
    """
    if len(text) > MAX_FILE_BYTES:
        raise ScenarioError([_too_long(len(text), name)])
    data, positions = parse_yaml(text, name)
    if not isinstance(data, dict):
        raise ScenarioError(
            [
                Problem(
                    f"a scenario is a mapping (name: ..., topology: ...), not {_kind(data)}",
                    (),
                    name,
                    *positions[()],
                    value=data,
                )
            ]
        )
    counted = list(_too_many_items(data))
    if counted:
        raise ScenarioError(place(counted, positions, name))
    context = {"base_dir": FsPath(base_dir) if base_dir is not None else None}
    try:
        return Scenario.model_validate(data, context=context)
    except pydantic.ValidationError as exc:
        found = problems_from_pydantic(exc)
    except ScenarioError as exc:
        found = exc.problems
    raise ScenarioError(place(found, positions, name))


_LIST_LIMITS = {"setup": MAX_SETUP, "traffic": MAX_TRAFFIC, "checks": MAX_CHECKS}


def _too_many_items(data: Mapping[str, Any]) -> Iterable[Problem]:
    """Lists past their limits, counted before any item is validated: validating ten
    thousand checks only to refuse the file is the work the limit exists to bound."""

    def over(path: Path, items: object, limit: int) -> Iterable[Problem]:
        if isinstance(items, list) and len(items) > limit:
            yield Problem(f"must have at most {limit} item(s), not {len(items):,}", path)

    for key, limit in _LIST_LIMITS.items():
        yield from over((key,), data.get(key), limit)
    traffic = data.get("traffic")
    if isinstance(traffic, list) and len(traffic) <= MAX_TRAFFIC:
        for i, item in enumerate(traffic):
            if isinstance(item, dict):
                yield from over(("traffic", i, "events"), item.get("events"), MAX_EVENTS)


def place(problems: Iterable[Problem], positions: Positions, file: str) -> list[Problem]:
    """``problems`` with file, line and column from ``positions`` (a problem's own path,
    else its nearest ancestor's), ordered by position."""
    placed = []
    for problem in problems:
        line, col = _position(problem.path, positions)
        placed.append(problem.at(file, line, col))
    return sorted(placed, key=lambda p: (p.line or 0, p.col or 0))


def _position(path: Path, positions: Positions) -> tuple[int, int]:
    for end in range(len(path), -1, -1):
        found = positions.get(path[:end])
        if found is not None:
            return found
    return 1, 1


def dumps(scenario: Scenario) -> str:
    """The scenario as YAML; :func:`loads` reads it back equal (defaults left out)."""
    data = scenario.model_dump(mode="json", exclude_defaults=True)
    data = {"name": scenario.name, **data}  # first, for the reader
    text: str = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return text


def default_scenario() -> Scenario:
    """The embedded default scenario: the 7-router line with a load generator and a
    receiver (``lg - h1 - ... - h7 - rx``), a ping and 10 kpps of pktgen traffic, and
    checks on reachability, loss and latency."""
    text = resources.files("fidelnet.scenario").joinpath("default.yaml").read_text("utf-8")
    return loads(text, "<default scenario>")


# --- pydantic's errors as problems ------------------------------------------------------------

_TYPE_WORDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "none_required": "null",
}
_BOUNDS = {
    "greater_than": "must be greater than {gt}",
    "greater_than_equal": "must be at least {ge}",
    "less_than": "must be less than {lt}",
    "less_than_equal": "must be at most {le}",
    "too_short": "must have at least {min_length} item(s)",
    "too_long": "must have at most {max_length} item(s)",
}


_PAIRS = ("pairs", "between")


def _number(value: object) -> object:
    """``1.0`` as ``1``, other values unchanged."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _strip(tp: Any) -> Any:
    """``tp`` without Annotated metadata and without ``| None``."""
    while True:
        if get_origin(tp) is Annotated:
            tp = get_args(tp)[0]
            continue
        if _is_union(tp):
            members = [a for a in get_args(tp) if a is not type(None)]
            if len(members) == 1:
                tp = members[0]
                continue
        return tp


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def _is_model(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, BaseModel)


def _member(members: tuple[Any, ...], label: object) -> Any:
    """The union member pydantic's loc ``label`` names (a tag, or a type's name)."""
    for member in members:
        tags = [m.tag for m in getattr(member, "__metadata__", ()) if isinstance(m, Tag)]
        inner = _strip(member)
        if label in tags:
            return inner
        if _is_model(inner):
            type_field = inner.model_fields.get("type")
            literal = get_args(type_field.annotation) if type_field is not None else ()
            if label in literal or label == inner.__name__:
                return inner
    return None


def _resolve(loc: tuple[int | str, ...]) -> tuple[Path, Any, Any, bool]:
    """pydantic's ``loc`` as the file's path (union labels dropped), the type expected
    there, the type of its parent, and whether the error came through a plain union."""
    tp: Any = Scenario
    parent: Any = None
    path: list[str | int] = []
    through_union = False
    for elem in loc:
        if elem == "[key]":
            continue
        tp = _strip(tp)
        if _is_union(tp):
            members = tuple(a for a in get_args(tp) if a is not type(None))
            found = _member(members, elem)
            if found is None:
                through_union = True
            tp = found
            continue
        parent = tp
        path.append(elem)
        if _is_model(tp):
            info = tp.model_fields.get(elem) if isinstance(elem, str) else None
            tp = info.annotation if info is not None else None
        elif get_origin(tp) is list:
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            tp = None
    return tuple(path), tp, parent, through_union


def _literal_choices(tp: Any) -> tuple[str, ...]:
    tp = _strip(tp)
    if get_origin(tp) is Literal:
        return tuple(str(a) for a in get_args(tp))
    if _is_union(tp):
        return tuple(c for a in get_args(tp) for c in _literal_choices(a))
    return ()


def _did_you_mean(given: object, choices: Iterable[str]) -> str:
    if not isinstance(given, str):
        return ""
    close = difflib.get_close_matches(given, list(choices), n=1, cutoff=0.7)
    return f", did you mean {close[0]!r}?" if close else ""


def _from_error(error: Mapping[str, Any]) -> tuple[Problem, bool]:
    loc = tuple(error["loc"])
    kind: str = error["type"]
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    given = error.get("input")
    path, tp, parent, through_union = _resolve(loc)
    if kind == "fidelnet":
        sub = tuple(ctx.get("sub", ()))
        value = ctx.get("value", given)
        return Problem(
            ctx["problem"], path + sub, value=value, choices=tuple(ctx["choices"])
        ), False
    if kind == "extra_forbidden":
        valid = tuple(parent.model_fields) if _is_model(parent) else ()
        message = "unknown field" + _did_you_mean(path[-1] if path else None, valid)
        return Problem(message, path, choices=valid), False
    if kind == "missing":
        return Problem("required field missing", path), False
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        return _tag_problem(kind, path, tp, given), False
    if kind == "setup_kind":
        both = isinstance(given, dict) and "run" in given and "file" in given
        message = (
            "give either run or file in one step, not both"
            if both
            else "a setup step needs run (an argv list) or file"
        )
        return Problem(message, path, value=NO_VALUE if both else given), False
    if kind == "literal_error":
        choices = _literal_choices(tp)
        message = "unknown value" + _did_you_mean(given, choices)
        return Problem(message, path, value=given, choices=choices), False
    if kind in _TYPE_WORDS:
        message = f"must be {_TYPE_WORDS[kind]}"
        if _kind(given) not in ("a number", _TYPE_WORDS[kind]):
            message += f", not {_kind(given)}"
        return Problem(message, path, value=given), through_union
    if kind in ("too_short", "too_long") and len(path) >= 2 and path[-2] in _PAIRS:
        return Problem("must be a [src, dst] pair", path, value=given), False
    if kind in _BOUNDS:
        bounds = {k: _number(v) for k, v in ctx.items()}
        return Problem(_BOUNDS[kind].format(**bounds), path, value=given), False
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return Problem(message, path, value=given), False


def _tag_problem(kind: str, path: Path, tp: Any, given: object) -> Problem:
    what = "setup step" if path[:1] == ("setup",) else str(path[0]).rstrip("s") if path else ""
    members = get_args(_strip(tp)) if tp is not None else ()
    choices = tuple(
        str(c)
        for m in members
        if _is_model(_strip(m))
        for c in _literal_choices(_strip(m).model_fields["type"].annotation)
    )
    if kind == "union_tag_not_found" or not isinstance(given, dict) or "type" not in given:
        if not isinstance(given, dict):
            return Problem(f"must be a mapping, not {_kind(given)}", path, value=given)
        return Problem(f"every {what} needs a type", (*path, "type"), choices=choices)
    tag = given["type"]
    message = f"unknown {what} type" + _did_you_mean(tag, choices)
    return Problem(message, (*path, "type"), value=tag, choices=choices)


def problems_from_pydantic(exc: pydantic.ValidationError) -> list[Problem]:
    """pydantic's errors as problems (without positions); errors about one value from
    the members of a union become one problem."""
    problems: list[Problem] = []
    unions: dict[Path, list[Problem]] = {}
    for error in exc.errors():
        problem, through_union = _from_error(typing.cast(Mapping[str, Any], error))
        if through_union:
            unions.setdefault(problem.path, []).append(problem)
        elif problem not in problems:
            problems.append(problem)
    for path, group in unions.items():
        words = [p.message.removeprefix("must be ").split(", not ")[0] for p in group]
        message = "must be " + " or ".join(dict.fromkeys(words))
        problems.append(Problem(message, path, value=group[0].value))
    return problems
