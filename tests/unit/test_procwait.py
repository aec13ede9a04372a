"""Waiting until ended processes are gone (fidelnet.kernel.procwait): on a fake
/proc driven by a fake clock, and on real processes this test starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fidelnet.kernel import procwait, state, teardown
from fidelnet.kernel.procwait import Ending, read_stat


def _stat(pid: int, comm: str, st: str, ppid: int, start: int) -> str:
    # 52 fields as the kernel writes them; field 22 (index 19 after the comm) is start.
    rest = [st, str(ppid)] + ["0"] * 17 + [str(start)] + ["0"] * 30
    return f"{pid} ({comm}) " + " ".join(rest) + "\n"


class FakeProc:
    """A /proc with scripted processes, and a clock that moves only when the wait
    sleeps; ``events`` change the processes at given times."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.now = 0.0
        self.events: list[tuple[float, int, str | None]] = []  # (at, pid, state or None: gone)
        self.sleeps: list[float] = []

    def add(self, pid: int, comm: str, st: str, ppid: int, start: int, cgroup: str = "/") -> None:
        d = self.root / str(pid)
        d.mkdir(exist_ok=True)
        (d / "stat").write_text(_stat(pid, comm, st, ppid, start))
        (d / "cgroup").write_text(f"1:cpu:/\n0::{cgroup}\n")

    def set_state(self, pid: int, st: str) -> None:
        path = self.root / str(pid) / "stat"
        text = path.read_text()
        head, _, tail = text.rpartition(")")
        fields = tail.split()
        fields[0] = st
        path.write_text(head + ") " + " ".join(fields) + "\n")

    def remove(self, pid: int) -> None:
        d = self.root / str(pid)
        for f in d.iterdir():
            f.unlink()
        d.rmdir()

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        for at, pid, st in list(self.events):
            if at <= self.now:
                self.events.remove((at, pid, st))
                if st is None:
                    self.remove(pid)
                else:
                    self.set_state(pid, st)

    def ending(self, **kwargs: object) -> Ending:
        return Ending(proc=str(self.root), clock=self.clock, sleep=self.sleep, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def fake(tmp_path: Path) -> FakeProc:
    return FakeProc(tmp_path)


def test_stat_fields_survive_a_command_name_with_spaces_and_parentheses(fake: FakeProc) -> None:
    fake.add(4242, "a b) (c", "D", 1, 987654)
    st = read_stat(4242, str(fake.root))
    assert st is not None
    assert (st.comm, st.state, st.ppid, st.start) == ("a b) (c", "D", 1, 987654)
    assert read_stat(4243, str(fake.root)) is None
    (fake.root / "4244").mkdir()
    (fake.root / "4244" / "stat").write_text("4244 (cut")  # no closing parenthesis
    assert read_stat(4244, str(fake.root)) is None


def test_waits_through_exit_and_reaping_by_another_parent(fake: FakeProc) -> None:
    fake.add(100, "iperf3", "D", 1, 500)
    fake.events = [(0.3, 100, "Z"), (1.5, 100, None)]  # exits at 0.3 s, PID 1 reaps at 1.5
    ending = fake.ending()
    assert ending.track(100, 500)
    waited = ending.wait(10.0)
    assert waited.stragglers == () and waited.processes == 1
    assert 1.5 <= waited.seconds < 1.5 + 2 * procwait.TICK
    assert max(fake.sleeps) <= procwait.TICK


def test_a_pid_taken_by_a_newer_process_is_gone(fake: FakeProc) -> None:
    fake.add(100, "linkd", "S", 1, 500)
    ending = fake.ending()
    assert not ending.track(100, 499)  # recorded at 499: that process is gone
    assert ending.track(100, 500)
    fake.remove(100)
    fake.add(100, "bash", "S", 1, 900)  # the pid reused by a process started later
    waited = ending.wait(5.0)
    assert waited.stragglers == () and fake.sleeps == []


def test_a_process_that_will_not_go_is_named_in_one_line(fake: FakeProc) -> None:
    fake.add(100, "fidelnet-linkd", "D", 1, 500)
    fake.add(101, "iperf3", "Z", 1, 501)
    fake.add(102, "sleep", "S", 1, 502)
    fake.events = [(0.5, 102, None)]
    ending = fake.ending()
    for pid, start in ((100, 500), (101, 501), (102, 502)):
        assert ending.track(pid, start)
    waited = ending.wait(2.0)
    assert waited.seconds == pytest.approx(2.0)
    lines = [s.line() for s in waited.stragglers]
    assert lines == [
        "process 100 (fidelnet-linkd) still exists 2.0 s after it was ended: state D (disk sleep)",
        "process 101 (iperf3) still exists 2.0 s after it was ended: "
        "state Z (zombie, not reaped by its parent 1)",
    ]
    assert all("\n" not in line for line in lines)


def test_a_zombie_of_a_parent_left_to_reap_it_counts_as_gone(fake: FakeProc) -> None:
    fake.add(100, "bash", "Z", 777, 500)
    ending = fake.ending(leave_to=[777])
    assert ending.track(100, 500)
    waited = ending.wait(5.0)
    assert waited.stragglers == () and fake.sleeps == []
    other = fake.ending()
    assert other.track(100, 500)
    assert [s.pid for s in other.wait(0.1).stragglers] == [100]


def test_cgroup_members_are_found_zombies_and_deleted_cgroups_included(fake: FakeProc) -> None:
    fake.add(100, "iperf3", "Z", 1, 500, cgroup="/fidelnet-ab12cd/h1 (deleted)")
    fake.add(101, "sleep", "S", 1, 501, cgroup="/fidelnet-ab12cd/h2")
    fake.add(102, "bash", "S", 1, 502, cgroup="/fidelnet-ab12cdef/h1")  # another run
    fake.add(103, "sshd", "S", 1, 503, cgroup="/")
    ending = fake.ending()
    assert ending.track_cgroup_members({"/fidelnet-ab12cd/h1", "/fidelnet-ab12cd/h2"}) == 2
    assert ending.track_cgroup_members(set()) == 0
    assert len(ending) == 2
    fake.events = [(0.2, 100, None), (0.4, 101, None)]
    assert ending.wait(5.0).stragglers == ()


# -- real processes -------------------------------------------------------------------

NON_REAPING_PARENT = textwrap.dedent("""
    import os, time
    pid = os.fork()
    if pid == 0:
        time.sleep(300)
        os._exit(0)
    print(pid, flush=True)
    time.sleep(300)  # never reaps: the child stays a zombie once killed
""")


def _start(pid: int) -> int:
    start = state.process_start_time(pid)
    assert start is not None
    return start


@pytest.fixture
def orphan() -> Iterator[int]:
    """A ``sleep`` whose parent (a shell) has exited: an orphan of this process's
    while it is a subreaper, of PID 1 (or the nearest subreaper) otherwise."""
    sh = subprocess.Popen(["sh", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True)
    assert sh.stdout is not None
    pid = int(sh.stdout.readline())
    sh.stdout.close()
    sh.wait()
    yield pid
    st = read_stat(pid)
    if st is not None and not st.zombie:
        os.kill(pid, signal.SIGKILL)


def test_own_child_is_left_to_its_popen_with_its_exit_status() -> None:
    child = subprocess.Popen(["sleep", "300"])
    ending = Ending()
    assert ending.kill(child.pid, _start(child.pid))
    waited = ending.wait(10.0)
    assert waited.stragglers == () and waited.reaped_here == 0
    assert child.wait(timeout=5) == -signal.SIGKILL  # not reaped behind Popen's back


def test_an_orphan_adopted_during_the_wait_is_reaped_here() -> None:
    ending = Ending()
    with ending.adopting():
        sh = subprocess.Popen(
            ["sh", "-c", "sleep 300 & echo $!"], stdout=subprocess.PIPE, text=True
        )
        assert sh.stdout is not None
        pid = int(sh.stdout.readline())
        sh.stdout.close()
        sh.wait()
        deadline = time.monotonic() + 5
        while (st := read_stat(pid)) is not None and st.ppid != os.getpid():
            assert time.monotonic() < deadline, st
            time.sleep(0.005)
        assert ending.kill(pid, _start(pid))
        waited = ending.wait(10.0)
    assert waited.stragglers == () and waited.reaped_here == 1
    assert read_stat(pid) is None  # reaped: no /proc entry at all


def test_kill_spares_a_pid_whose_start_time_is_not_the_recorded_one(orphan: int) -> None:
    ending = Ending()
    assert not ending.kill(orphan, _start(orphan) + 1)
    assert len(ending) == 0
    st = read_stat(orphan)
    assert st is not None and st.state in "RS"


def test_a_zombie_nobody_reaps_is_a_straggler() -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", NON_REAPING_PARENT], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        pid = int(parent.stdout.readline())
        ending = Ending()
        assert ending.kill(pid, _start(pid))
        waited = ending.wait(0.3)
        assert [s.pid for s in waited.stragglers] == [pid]
        line = waited.stragglers[0].line()
        assert f"process {pid} (python" in line and "state Z (zombie" in line, line
        assert f"its parent {parent.pid}" in line
        assert len(ending) == 0  # let go: pidfds closed
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_kill_ends_the_group_a_recorded_leader_leads() -> None:
    leader = subprocess.Popen(
        ["sh", "-c", "sleep 300 & echo $!; wait"],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert leader.stdout is not None
    member = int(leader.stdout.readline())
    leader.stdout.close()
    ending = Ending()
    with ending.adopting():  # the member's parent dies with it: reaped here, not by PID 1
        assert ending.kill(leader.pid, _start(leader.pid), group=True)
        assert ending.track(member)
        waited = ending.wait(10.0)
    assert waited.stragglers == () and waited.processes == 2
    assert leader.wait(timeout=5) == -signal.SIGKILL
    assert read_stat(member) is None


def test_children_lists_this_process_s_children() -> None:
    child = subprocess.Popen(["sleep", "300"])
    try:
        assert child.pid in procwait.children(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert child.pid not in procwait.children(os.getpid())


def test_teardown_waits_for_recorded_processes_and_keeps_a_straggler_s_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state, "STATE_DIR", str(tmp_path))
    parent = subprocess.Popen(
        [sys.executable, "-c", NON_REAPING_PARENT], stdout=subprocess.PIPE, text=True
    )
    child = subprocess.Popen(["sleep", "300"])
    try:
        assert parent.stdout is not None
        stuck = int(parent.stdout.readline())
        run = state.RunState.create(command="test")
        log = tmp_path / f"{run.run_id}.linkd.log"
        log.write_text("x")
        run.record("file", path=str(log))
        run.record("process", pid=child.pid, start=_start(child.pid))
        run.record("process", pid=stuck, start=_start(stuck))
        problems = teardown.remove_all(run, exit_timeout=0.3)
        assert len(problems) == 1 and problems[0].startswith(f"process {stuck} ("), problems
        assert "state Z" in problems[0]
        assert not log.exists()
        assert child.wait(timeout=5) == -signal.SIGKILL
        # The straggler stays recorded, for a later `fidelnet clean` to retry.
        assert [(r["kind"], r["pid"]) for r in run.live_objects()] == [("process", stuck)]
        run.close(remove=True)
    finally:
        for p in (parent, child):
            p.kill()
            p.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_clean_names_a_process_that_will_not_go_and_exits_non_zero(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from click.testing import CliRunner

    from fidelnet.cli.main import cli

    monkeypatch.setattr(state, "STATE_DIR", str(tmp_path))
    monkeypatch.setattr(procwait, "EXIT_TIMEOUT", 0.3)
    parent = subprocess.Popen(
        [sys.executable, "-c", NON_REAPING_PARENT], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        stuck = int(parent.stdout.readline())
        # A crashed run: its owner (here a pid with another start time) is gone.
        header = {"kind": "run", "run_id": "c0ffee", "pid": os.getpid(), "start": 1}
        rec = {"kind": "process", "pid": stuck, "start": _start(stuck)}
        path = tmp_path / "c0ffee.jsonl"
        path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
        res = CliRunner().invoke(cli, ["clean"])
        assert res.exit_code == 1, res.output
        lines = [ln for ln in res.output.splitlines() if ln.startswith("fidelnet clean:")]
        assert len(lines) == 1, res.output
        assert lines[0].startswith(f"fidelnet clean: run c0ffee: process {stuck} (python"), lines
        assert "state Z (zombie, not reaped by its parent" in lines[0]
        assert path.exists()  # kept: a later clean retries it
    finally:
        parent.kill()
        parent.wait()
        if parent.stdout is not None:
            parent.stdout.close()


def test_a_whole_run_s_cgroup_tree_is_waited_for_a_node_s_only_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from fidelnet.kernel import cgroups

    fs = cgroups.CgroupFS("/sys/fs/cgroup/unified", "/sys/fs/cgroup/cpu", None, 2)
    monkeypatch.setattr(cgroups, "detect", lambda: fs)
    removed = [
        {"kind": "cgroup", "path": "/sys/fs/cgroup/unified/fidelnet-ab12cd/h1"},
        {"kind": "cgroup", "path": "/sys/fs/cgroup/cpu/fidelnet-ab12cd/h1"},  # v1: no zombies
        {"kind": "netns", "name": "fnab12cd-h1"},
    ]
    assert teardown._v2_paths(removed, "ab12cd", whole_run=False) == {"/fidelnet-ab12cd/h1"}
    # A teardown killed after it removed the cgroups left no record of them.
    assert teardown._v2_paths([], "ab12cd", whole_run=True) == {"/fidelnet-ab12cd"}
    assert teardown._v2_paths([], "ab12cd", whole_run=False) == set()
