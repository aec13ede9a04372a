"""Run state files: records, gone lines, crash-truncated lines, stale detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fidelnet.errors import StateError
from fidelnet.kernel import state


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(state, "STATE_DIR", str(tmp_path))
    return tmp_path


def test_records_and_gone_give_live_objects_in_order() -> None:
    st = state.RunState.create(command="test")
    st.record("netns", name="fnX-h1")
    st.record("netns", name="fnX-h2")
    st.record("process", pid=10, start=5)
    st.gone("netns", name="fnX-h1")
    live = st.live_objects()
    assert [(o["kind"], o.get("name", o.get("pid"))) for o in live] == [
        ("netns", "fnX-h2"),
        ("process", 10),
    ]
    st.close(remove=True)
    assert not os.path.exists(st.path)


def test_header_names_the_owner_and_it_is_alive() -> None:
    st = state.RunState.create()
    [info] = state.list_runs()
    assert info.run_id == st.run_id
    assert info.owner_pid == os.getpid()
    assert info.alive
    st.close(remove=True)


def test_dead_owner_makes_a_stale_run(state_dir: Path) -> None:
    path = state_dir / "abc123.jsonl"
    # pid 1's real start time is not 999999999: the recorded owner no longer exists.
    path.write_text('{"kind":"run","run_id":"abc123","pid":1,"start":999999999}\n')
    [info] = state.list_runs()
    assert not info.alive


def test_line_cut_short_by_a_crash_keeps_earlier_records(state_dir: Path) -> None:
    path = state_dir / "abc123.jsonl"
    path.write_text(
        '{"kind":"run","run_id":"abc123","pid":1,"start":1}\n'
        '{"kind":"netns","name":"fnabc123-h1"}\n'
        '{"kind":"netns","na'
    )
    assert state.live_objects(str(path)) == [{"kind": "netns", "name": "fnabc123-h1"}]


def test_foreign_file_is_refused(state_dir: Path) -> None:
    path = state_dir / "zzz.jsonl"
    path.write_text("hello\n")
    with pytest.raises(StateError, match="not a fidelnet state file"):
        state.read_header(str(path))
    assert state.list_runs() == []


def test_explicit_run_id_clash_is_an_error() -> None:
    st = state.RunState.create("feed01")
    with pytest.raises(StateError, match="already exists"):
        state.RunState.create("feed01")
    st.close(remove=True)


def test_process_identity_uses_start_time() -> None:
    start = state.process_start_time(os.getpid())
    assert start is not None
    assert state.process_matches(os.getpid(), start)
    assert not state.process_matches(os.getpid(), start + 1)
    assert state.process_start_time(2**22 + 12345) is None


def test_every_file_a_run_records_is_its_own_object() -> None:
    # Found by the soak benchmark: every "file" record had the same identity, so only
    # the first (linkd's socket) was removed by `fidelnet clean`, never its log.
    st = state.RunState.create(command="test")
    st.record("file", path="/run/fidelnet/x.linkd.sock")
    st.record("file", path="/run/fidelnet/x.linkd.log")
    st.gone("file", path="/run/fidelnet/x.linkd.sock")
    assert st.live_objects() == [{"kind": "file", "path": "/run/fidelnet/x.linkd.log"}]
    st.close(remove=True)


def test_a_zombie_owner_owns_nothing() -> None:
    import subprocess
    import time

    child = subprocess.Popen(["sleep", "0"])
    start = state.process_start_time(child.pid)
    assert start is not None
    deadline = time.monotonic() + 5
    while state.process_running(child.pid, start):  # exits, not reaped: a zombie
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert state.process_matches(child.pid, start)  # the pid is still that process
    child.wait()
    assert not state.process_matches(child.pid, start)


def test_a_tree_record_removes_only_a_directory_of_the_state_dir(
    state_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    from fidelnet.kernel import teardown

    monkey_dir = state_dir / "abc123.ovs"
    (monkey_dir / "sub").mkdir(parents=True)
    (monkey_dir / "sub" / "conf.db").write_text("x")
    outside = tmp_path_factory.mktemp("elsewhere")
    for bad in (str(outside), str(state_dir / ".." / outside.name), "/"):
        with pytest.raises(StateError, match="not a run directory"):
            teardown._tree({"kind": "tree", "path": bad}, "abc123")
    assert outside.exists()
    teardown._tree({"kind": "tree", "path": str(monkey_dir)}, "abc123")
    assert not monkey_dir.exists()


def test_runs_lists_each_vm_node_with_its_resident_memory() -> None:
    from click.testing import CliRunner

    from fidelnet.cli.main import cli

    st = state.RunState.create(command="vm test")
    st.record("info", node="h1", vm_accel="tcg", vm_memory_mb=256, vm_pid=os.getpid())
    st.record("info", node="h2", vm_accel="kvm", vm_memory_mb=512, vm_pid=2**22 + 7)
    out = CliRunner().invoke(cli, ["runs"]).output
    assert st.run_id in out
    assert "vm h1: tcg, 256 MiB guest, " in out and "MiB resident" in out
    assert "vm h2: kvm, 512 MiB guest, not running" in out
    st.close(remove=True)
