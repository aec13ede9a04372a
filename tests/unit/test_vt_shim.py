"""The virtual-time clock shim (``shim/vt.c``, preloaded) and its shared page, on real
processes without root: at TDF 4 a program's sleeps, waits and clock reads all see
time pass four times slower, each clock keeps its own epoch, and changing the TDF
while a program runs never makes its clocks step back. ``make install`` builds the
shim; these tests fail, not skip, without it."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from fidelnet.errors import ValidationError
from fidelnet.vt import TimePage, preload_env, shim_path

# Virtual time is measured against the real clock: these run alone (make test).
pytestmark = pytest.mark.timing

TDF = 4.0


@pytest.fixture
def page(tmp_path: Path) -> TimePage:
    shim_path()  # a clear failure when the shim was not built
    return TimePage(tmp_path / "vt-page", TDF)


def _run(page: TimePage, argv: list[str]) -> tuple[float, str]:
    """(wall seconds, stdout) of ``argv`` run dilated."""
    began = time.monotonic()
    p = subprocess.run(argv, env=preload_env(page), capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return time.monotonic() - began, p.stdout.strip()


def _py(page: TimePage, code: str) -> tuple[float, str]:
    return _run(page, [sys.executable, "-c", code])


def test_a_sleep_binary_takes_tdf_times_as_long(page: TimePage) -> None:
    wall, _ = _run(page, ["sleep", "0.25"])
    assert 0.95 <= wall <= 1.6, wall


@pytest.mark.parametrize(
    "wait",
    [
        "time.sleep(0.2)",  # clock_nanosleep, absolute monotonic
        "threading.Event().wait(0.2)",  # sem_clockwait
        "select.select([], [], [], 0.2)",
        "select.poll().poll(200)",
        "select.epoll().poll(0.2)",
        "l = threading.Lock(); l.acquire(); l.acquire(timeout=0.2)",
    ],
)
def test_waits_last_their_virtual_time_and_tdf_times_as_long_in_real_time(
    page: TimePage, wait: str
) -> None:
    code = (
        "import select, threading, time\n"
        "t = time.monotonic()\n"
        f"{wait}\n"
        "print(time.monotonic() - t)\n"
    )
    wall, out = _py(page, code)
    assert 0.19 <= float(out) <= 0.3, (wait, out)
    assert 0.75 <= wall <= 1.4, (wait, wall)


def test_each_clock_keeps_its_epoch_and_cpu_time_runs_faster(page: TimePage) -> None:
    code = (
        "import time\n"
        "print(time.time(), time.monotonic(), time.clock_gettime(time.CLOCK_BOOTTIME))\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 0.05: pass\n"
        "print(time.process_time() - t)\n"
    )
    before = (time.time(), time.monotonic(), time.clock_gettime(time.CLOCK_BOOTTIME))
    wall, out = _py(page, code)
    first, second = out.splitlines()
    seen = [float(x) for x in first.split()]
    for virtual, real in zip(seen, before, strict=True):
        # Virtual time started at the real time when the page was made, slower since.
        assert real - 5 <= virtual <= real + wall, (virtual, real)
    assert float(second) >= 0.05


def test_a_tdf_change_while_a_program_runs_never_steps_a_clock_back(page: TimePage) -> None:
    code = (
        "import time\n"
        "last = time.monotonic_ns(); back = 0; t0 = last\n"
        "for _ in range(200):\n"
        "    time.sleep(0.005)\n"
        "    now = time.monotonic_ns()\n"
        "    back += now < last\n"
        "    last = now\n"
        "print(back, (last - t0) / 1e9)\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code], env=preload_env(page), stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.6)
    page.set_tdf(1.0)  # slower to faster
    time.sleep(0.4)
    page.set_tdf(8.0)  # and back
    out, _ = p.communicate(timeout=60)
    back, span = out.split()
    assert back == "0", out
    assert 1.0 <= float(span) <= 1.3, out  # 200 sleeps of 5 virtual ms


def test_without_a_page_nothing_changes(tmp_path: Path) -> None:
    env = {**preload_env(TimePage(tmp_path / "p", 2.0)), "FIDELNET_VT_PAGE": ""}
    began = time.monotonic()
    subprocess.run(["sleep", "0.2"], env=env, check=True, timeout=30)
    assert time.monotonic() - began < 0.35


def test_the_page_refuses_a_bad_tdf(tmp_path: Path) -> None:
    for bad in (0, -1, float("nan"), float("inf"), 10_000, True, "4"):
        with pytest.raises(ValidationError, match="tdf"):
            TimePage(tmp_path / "p", bad)  # type: ignore[arg-type]
    page = TimePage(tmp_path / "p", 2.0)
    with pytest.raises(ValidationError, match="tdf"):
        page.set_tdf(0)
    before = page.virtual_ns()
    page.set_tdf(3.0)
    assert page.virtual_ns() >= before


def test_a_dilated_topology_refuses_what_virtual_time_does_not_reach_yet() -> None:
    from fidelnet.topology import LinkSpec, NodeSpec, TopologySpec
    from fidelnet.topology.spec import LinkParams
    from fidelnet.topology.validate import problems

    t = TopologySpec(tdf=4.0)
    t.add_node(NodeSpec("h1"))
    t.add_node(NodeSpec("h2", backend="qemu"))
    t.add_link(LinkSpec("h1", "h2", params=LinkParams(bw=10e6, delay=0.01)))
    got = [str(p) for p in problems(t)]
    assert [g for g in got if g.startswith("links[")] == []  # shaped links follow the TDF
    assert any(g.startswith("nodes.h2.backend: virtual time reaches namespace nodes") for g in got)
    t.tdf = 0.0
    assert [p.field for p in problems(t)][:1] == ["tdf"]


def test_tc_links_are_shaped_in_real_time_for_the_tdf() -> None:
    from fidelnet.links.tcshape import dilated
    from fidelnet.topology.spec import LinkParams

    p = LinkParams(bw=10e9, delay=0.01, jitter=0.001, loss=1.0, max_queue_size=100)
    real = dilated(p, 4.0)
    assert (real.bw, real.delay, real.jitter) == (2.5e9, 0.04, 0.004)
    assert (real.loss, real.max_queue_size) == (1.0, 100)
    assert dilated(p, 1.0) is p
    assert dilated(LinkParams(), 4.0).is_empty()


@pytest.mark.parametrize(
    "wait",
    [
        "threading.Event().wait(1.0)",  # sem_clockwait: an absolute deadline
        "time.sleep(1.0)",  # clock_nanosleep
        "select.select([], [], [], 1.0)",
    ],
)
def test_a_long_wait_follows_a_tdf_change(tmp_path: Path, wait: str) -> None:
    page = TimePage(tmp_path / "p", 8.0)
    code = (
        "import select, threading, time\nt = time.monotonic()\n"
        f"{wait}\nprint(time.monotonic() - t)\n"
    )
    began = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-c", code], env=preload_env(page), stdout=subprocess.PIPE, text=True
    )
    time.sleep(0.4)  # 0.05 virtual seconds at TDF 8
    page.set_tdf(1.0)  # the rest, 0.95 s, in real time
    out, _ = p.communicate(timeout=30)
    wall = time.monotonic() - began
    assert 0.99 <= float(out) <= 1.15, (wait, out)
    assert 1.2 <= wall <= 2.0, (wait, wall)  # not the 8 s the wait began with
