"""A measurement's scratch directory: recorded in its run before it exists, named for
the run, removed after the measurement; teardown removes only a run's own."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest

from fidelnet.errors import StateError
from fidelnet.kernel import teardown
from fidelnet.measure.workdir import work_dir


class FakeNet:
    run_id = "a1b2c3"
    is_open = True

    def __init__(self) -> None:
        self.said: list[tuple[str, str, dict[str, Any]]] = []

    def state_record(self, kind: str, **fields: Any) -> None:
        assert not Path(fields["path"]).exists()  # written down before it exists
        self.said.append(("record", kind, fields))

    def state_gone(self, kind: str, **fields: Any) -> None:
        self.said.append(("gone", kind, fields))


class FakeNode:
    def __init__(self, net: object) -> None:
        self.net = net


@pytest.fixture(autouse=True)
def _tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))


def test_a_runs_scratch_directory_is_recorded_first_and_removed_after(tmp_path: Path) -> None:
    net = FakeNet()
    with work_dir(FakeNode(net), "pktgen") as d:
        assert d.parent == tmp_path and d.name.startswith("fidelnet-a1b2c3-pktgen-")
        (d / "ready").write_text("1")
        assert d.is_dir()
    assert not d.exists()
    where = {"path": str(d)}
    assert net.said == [("record", "tmpdir", where), ("gone", "tmpdir", where)]


def test_without_a_run_it_is_an_ordinary_temporary_directory(tmp_path: Path) -> None:
    closed = FakeNet()
    closed.is_open = False
    for node in (object(), FakeNode(closed)):
        with work_dir(node, "flows") as d:
            assert d.name.startswith("fidelnet-flows-") and d.is_dir()
        assert not d.exists()
    assert closed.said == []


def test_teardown_removes_only_the_runs_own_scratch_directory(tmp_path: Path) -> None:
    mine = tmp_path / "fidelnet-a1b2c3-pktgen-0001"
    (mine / "sub").mkdir(parents=True)
    teardown._tmpdir({"kind": "tmpdir", "path": str(mine)}, "a1b2c3")
    assert not mine.exists()
    other = tmp_path / "fidelnet-ffffff-pktgen-0001"
    other.mkdir()
    with pytest.raises(StateError, match="not a scratch directory of run a1b2c3"):
        teardown._tmpdir({"kind": "tmpdir", "path": str(other)}, "a1b2c3")
    assert other.is_dir()
    link = tmp_path / "fidelnet-a1b2c3-link"
    link.symlink_to(other)
    with pytest.raises(StateError):
        teardown._tmpdir({"kind": "tmpdir", "path": str(link)}, "a1b2c3")
    assert other.is_dir()
