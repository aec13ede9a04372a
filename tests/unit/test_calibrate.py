"""Calibration without a kernel: the page from synthetic samples, the timer step
(it needs no root), the CLI saving nothing when interrupted."""

from __future__ import annotations

import datetime as _dt
from pathlib import Path

import pytest
from click.testing import CliRunner

from fidelnet._version import __version__
from fidelnet.calibrate import Calibration, Plan, host, steps
from fidelnet.calibrate.page import write_page
from fidelnet.fidelity import profile as prof
from fidelnet.fidelity.machine import machine
from fidelnet.fidelity.profile import (
    CpuShare,
    Forwarding,
    Profile,
    RateAccuracy,
    RttUnderLoad,
    TimerError,
)


def _profile() -> Profile:
    m = machine()
    return Profile(
        key=prof.machine_key(m),
        fidelnet=__version__,
        machine=m,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        seconds=150.0,
        command=["fidelnet", "calibrate"],
        steal_at_rest_pct=0.01,
        cpu_shares=[CpuShare(processes=2, share_pct=50.0, mean_pct=49.8, max_error_pct=1.2)],
        timer=[
            TimerError(load="idle", count=3, p50_ns=60_000, p99_ns=90_000, max_ns=95_000),
            TimerError(load="busy", count=3, p50_ns=70_000, p99_ns=4_000_000, max_ns=4_100_000),
        ],
        rate_accuracy=[
            RateAccuracy(
                backend="engine",
                rate_bps=1e8,
                windows=3,
                mean_ratio=1.0,
                p1_ratio=0.97,
                p99_ratio=1.02,
            )
        ],  # fmt: skip
        forwarding=[
            Forwarding(
                backend="tc",
                layout="chain",
                links=1,
                frame_bytes=64,
                offered_pps=[100_000, 200_000],
                delivered_pps=[100_000, 150_000],
                breaking_pps=140_000,
            ),
            Forwarding(
                backend="tc",
                layout="chain",
                links=3,
                frame_bytes=64,
                offered_pps=[50_000, 100_000],
                delivered_pps=[50_000, 60_000],
                breaking_pps=55_000,
            ),
        ],  # fmt: skip
        rtt=[RttUnderLoad(load="idle", count=3, p50_ns=30_000, p99_ns=60_000, max_ns=70_000)],
        floor_p50_ns=20_000,
        floor_p999_ns=80_000,
        floor_max_send_pps=400_000.0,
    )


def test_page_leads_with_the_answer_and_plots_every_step(tmp_path: Path) -> None:
    cal = Calibration(
        profile=_profile(),
        timer={"idle": [60_000, 70_000, 90_000], "busy": [70_000, 80_000, 4_000_000]},
        shares=[steps.ShareSamples(50.0, [[49.0, 51.2], [50.1, 49.9]])],
        rtt={"idle": [30_000, 40_000, 60_000]},
        rate_windows={"engine 100 Mbit/s": [0.97, 1.0, 1.02]},
        step_seconds={"timer": 2.1},
    )
    page = write_page(cal, tmp_path).read_text()
    assert page.index('id="answer"') < page.index("id='forwarding'")
    # 3 links x 55 kpps beat 1 link x 140 kpps: the capacity is in packet-hops.
    assert "forward up to 165 k packet-hops/s" in page
    assert "timers wake 90.0 µs late at p99 idle, 4000.0 µs with every core busy" in page
    for name in ("forwarding", "rates", "shares", "timer", "rtt"):
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
        assert f'data-plot="{name}"' in page
    assert (tmp_path / "calibration.json").is_file()


def test_timer_step_measures_sleeps() -> None:
    summary, raw = host.timer_error("idle", count=50)
    assert summary.count == len(raw) == 50
    assert 0 <= summary.p50_ns <= summary.p99_ns <= summary.max_ns
    with pytest.raises(ValueError, match="idle or busy"):
        host.timer_error("heavy", count=1)


def test_percentile_nearest_rank() -> None:
    assert host.percentile([], 50) == 0
    assert host.percentile([5, 1, 3], 50) == 3
    assert host.percentile(list(range(1, 101)), 99) == 99
    assert host.percentile(list(range(1, 101)), 100) == 100


def test_quick_plan_is_smaller_than_the_default() -> None:
    q, d = Plan.quick(), Plan()
    assert q.timer_samples < d.timer_samples and len(q.chain_links) < len(d.chain_links)


def test_interrupted_calibration_saves_no_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fidelnet.calibrate as cal_mod
    from fidelnet.cli.main import cli

    monkeypatch.setenv("FIDELNET_STATE_DIR", str(tmp_path / "state"))

    def interrupted(*_a: object, **_k: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cal_mod.steps, "cpu_shares", interrupted)
    monkeypatch.setattr(cal_mod.host, "steal_at_rest", lambda _s=2.0: 0.0)
    res = CliRunner().invoke(cli, ["calibrate", "--quick", "--out", str(tmp_path / "out")])
    assert res.exit_code == 130, res.output
    assert "interrupted; no profile saved" in res.output
    assert not (tmp_path / "state" / "profiles").exists()
    assert not (tmp_path / "out").exists()


def test_real_time_is_chosen_only_where_it_helps() -> None:
    from fidelnet.fidelity.profile import EngineRelease

    def run(prio: int, p999_us: int) -> EngineRelease:
        return EngineRelease(
            realtime_priority=prio, packets=7500, p50_ns=30_000, p999_ns=p999_us * 1000,
            max_ns=p999_us * 2000,
        )  # fmt: skip

    helps = [run(0, 900), run(10, 200), run(0, 1100), run(10, 300), run(0, 600), run(10, 250)]
    assert steps.choose_realtime(helps, 10) == 10
    same = [run(0, 300), run(10, 280), run(0, 320), run(10, 290), run(0, 310), run(10, 300)]
    assert steps.choose_realtime(same, 10) == 0
    assert steps.choose_realtime([run(10, 300)], 10) == 10  # nothing to compare


def test_spin_is_chosen_only_where_it_helps() -> None:
    from fidelnet.fidelity.profile import EngineRelease

    def run(spin: int, p50_us: int, p999_us: int, prio: int = 10) -> EngineRelease:
        return EngineRelease(
            realtime_priority=prio, spin_us=spin, packets=7500, p50_ns=p50_us * 1000,
            p999_ns=p999_us * 1000, max_ns=p999_us * 2000,
        )  # fmt: skip

    # Spinning cut p50 from ~20 µs to ~0 and the tail is no worse: chosen.
    helps = [run(0, 20, 250), run(80, 0, 150), run(0, 22, 300), run(80, 1, 200)]
    assert steps.choose_spin(helps, 10, 80) == 80
    # p50 barely moved: not worth a core's share.
    small = [run(0, 20, 250), run(80, 15, 240), run(0, 21, 260), run(80, 14, 250)]
    assert steps.choose_spin(small, 10, 80) == 0
    # p50 fell but the tail grew by more than a quarter: not chosen.
    tail = [run(0, 20, 200), run(80, 0, 400), run(0, 20, 220), run(80, 1, 380)]
    assert steps.choose_spin(tail, 10, 80) == 0
    # Runs at another priority do not count; nothing to compare keeps the spin.
    assert steps.choose_spin([run(0, 20, 250, prio=0), run(80, 0, 150)], 10, 80) == 80
    # Real-time is judged on the runs without spin only.
    mixed = [run(0, 30, 900, prio=0), run(0, 30, 200), run(80, 0, 100, prio=0)]
    assert steps.choose_realtime(mixed, 10) == 10
