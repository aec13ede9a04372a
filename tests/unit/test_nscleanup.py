"""Waiting for the kernel's namespace cleanup: seen through kworker names."""

from __future__ import annotations

from pathlib import Path

from fidelnet.kernel import nscleanup


def _task(proc: Path, pid: int, comm: str) -> None:
    (proc / str(pid)).mkdir()
    (proc / str(pid) / "comm").write_text(comm + "\n")


def test_busy_only_while_a_worker_executes_netns_work(tmp_path: Path) -> None:
    _task(tmp_path, 1, "systemd")
    _task(tmp_path, 7, "kworker/R-netns")  # the rescuer: idle
    _task(tmp_path, 9, "kworker/u8:1-netns")  # idle, last ran netns work
    (tmp_path / "self").mkdir()
    assert not nscleanup.busy(str(tmp_path))
    _task(tmp_path, 12, "kworker/u8:2+netns")
    assert nscleanup.busy(str(tmp_path))
    assert not nscleanup.busy(str(tmp_path / "missing"))


def test_kthreadds_children_are_read_from_one_file_where_listed(tmp_path: Path) -> None:
    _task(tmp_path, 2, "kthreadd")
    (tmp_path / "2" / "task" / "2").mkdir(parents=True)
    (tmp_path / "2" / "task" / "2" / "children").write_text("7 9 ")
    _task(tmp_path, 7, "kworker/R-netns")
    _task(tmp_path, 9, "kworker/u8:1-netns")
    _task(tmp_path, 40, "kworker/u8:2+netns")  # not listed: not looked at
    assert not nscleanup.busy(str(tmp_path))
    (tmp_path / "2" / "task" / "2" / "children").write_text("7 9 40 ")
    assert nscleanup.busy(str(tmp_path))


class FakeKernel:
    """A cleanup running for ``runs`` seconds from ``starts`` on a fake clock."""

    def __init__(self, starts: float, runs: float) -> None:
        self.now = 0.0
        self.starts, self.runs = starts, runs

    def clock(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s

    def busy(self) -> bool:
        return self.starts <= self.now < self.starts + self.runs


def _wait(k: FakeKernel, timeout: float = 60.0) -> nscleanup.Cleanup:
    return nscleanup.wait_idle(
        timeout, settle=0.06, poll=0.02, is_busy=k.busy, clock=k.clock, sleep=k.sleep
    )


def test_waits_for_the_cleanup_and_says_how_long() -> None:
    k = FakeKernel(starts=0.0, runs=5.0)
    done = _wait(k)
    assert done.finished and done.seen
    assert 4.9 <= done.seconds <= 5.0
    assert k.now < 5.2  # returned one settle time after it ended


def test_a_short_pause_between_batches_is_not_the_end() -> None:
    k = FakeKernel(starts=0.0, runs=1.0)
    real = k.busy
    k.busy = lambda: real() or 1.03 <= k.now < 3.0  # type: ignore[method-assign]
    assert _wait(k).seconds >= 2.9


def test_nothing_to_wait_for_returns_after_the_settle_time() -> None:
    k = FakeKernel(starts=100.0, runs=1.0)
    done = _wait(k)
    assert done.finished and not done.seen and done.seconds == 0.0
    assert k.now <= 0.1


def test_gives_up_at_the_timeout() -> None:
    k = FakeKernel(starts=0.0, runs=1e9)
    done = _wait(k, timeout=2.0)
    assert not done.finished and done.seen and 2.0 <= done.seconds < 2.1
