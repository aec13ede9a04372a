"""Mahimahi trace files: parsed, and refused with file:line."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fidelnet.errors import ValidationError
from fidelnet.links import trace
from fidelnet.links.trace import read_trace
from fidelnet.topology.spec import LinkParams
from fidelnet.topology.validate import param_problems


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "link.trace"
    path.write_text(text)
    return str(path)


def test_reads_opportunities_with_repeats_and_comments(tmp_path: Path) -> None:
    path = _write(tmp_path, "# cellular\n0\n0\n5\n\n12\n")
    assert read_trace("t", path) == [0, 0, 5, 12]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("1\n2\nabc\n", ":3: expected a whole number"),
        ("1\n-2\n", ":2: expected a whole number"),
        ("5\n3\n", ":2: times must not decrease"),
        ("0\n0\n", "the last time must be positive"),
        ("# nothing\n", "no delivery opportunities"),
        ("1.5\n", ":1: expected a whole number"),
        ("1\n4294967296\n", ":2: more than 4294967295 ms"),
        ("1\n" + "9" * 5000 + "\n", ":2: more than 4294967295 ms"),
    ],
)
def test_malformed_traces_name_file_and_line(tmp_path: Path, text: str, needle: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ValidationError) as info:
        read_trace("links[0].params.trace", path)
    assert info.value.field == "links[0].params.trace"
    assert needle in str(info.value)
    assert path in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(ValidationError, match="not found"):
        read_trace("t", "/nonexistent/trace")


def test_validation_reads_the_trace_and_refuses_bw_with_it(tmp_path: Path) -> None:
    bad = _write(tmp_path, "3\nx\n")
    problems = param_problems(LinkParams(trace=bad), "p")
    assert [p.field for p in problems] == ["p.trace"]
    assert ":2:" in str(problems[0])
    good = _write(tmp_path, "1\n2\n")
    problems = param_problems(LinkParams(trace=good, bw=1e6), "p")
    assert "either bw or trace" in str(problems[0])


def test_limits_are_checked_before_the_file_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # reading it would block for ever
    with pytest.raises(ValidationError, match="regular file"):
        read_trace("t", str(fifo))
    big = tmp_path / "big.trace"
    with big.open("wb") as f:
        f.truncate(trace.MAX_TRACE_FILE_BYTES + 1)  # sparse: no memory, no disk
    with pytest.raises(ValidationError, match="the limit is 33554432 bytes"):
        read_trace("t", str(big))
    monkeypatch.setattr(trace, "MAX_TRACE_ENTRIES", 3)
    with pytest.raises(ValidationError, match=":4: more than 3 delivery opportunities"):
        read_trace("t", _write(tmp_path, "1\n2\n3\n4\n"))
