"""The verdict on purpose: one run of every overload case must be flagged, and one
run of every clean case must not (bench/fidelity.py runs the full count and prints
the detection and false-alarm rates). Also: the monitor's own cost stays small."""

from __future__ import annotations

import pytest

from _precision import precise
from fidelnet.bench.overload import CASES, Case, run_case
from fidelnet.fidelity.verdict import Verdict

pytestmark = pytest.mark.privileged


@pytest.mark.parametrize("case", [c for c in CASES if c.overload], ids=lambda c: c.name)
def test_overload_is_flagged(case: Case) -> None:
    out = run_case(case, duration=1.5)
    assert out.level != "trusted", f"{case.name} ({case.what}) was judged trusted"
    assert out.summary.startswith(out.level)


MACHINE = {"steal", "timer_late"}
"""Reasons measured outside fidelnet's data path: the hypervisor's steal and the
monitor's own timer probe waking late."""


def _machine(v: Verdict) -> str | None:
    """What the run's own record says the machine did, when that accounts for every
    reason the verdict is not trusted: steal, the timer probe woken late, and engine
    lateness the engine's timer wake-ups account for (``engine_woken_late``, see
    fidelnet.fidelity.judge). None when any reason is left unexplained."""
    problems = v.problems()
    note = next((r for r in v.reasons if r.code == "engine_woken_late"), None)
    for r in problems:
        if r.code in MACHINE:
            continue
        if r.code == "engine_late" and note is not None and "after its timer" in r.message:
            continue
        return None
    seen = [r.message for r in problems if r.code in MACHINE]
    if note is not None:
        seen.insert(0, note.message)
    return "; ".join(seen) or None


@pytest.mark.parametrize("case", [c for c in CASES if not c.overload], ids=lambda c: c.name)
def test_clean_run_is_trusted(case: Case) -> None:
    # A clean run on a shared VM can meet a real stall (steal, a neighbour), which the
    # monitor rightly reports; the benchmark counts those as false alarms. The claim
    # is that a clean run on a machine that gives it its cores is trusted: measured up
    # to three times (tests/_precision.py). The 10 ms engine link is sensitive to a
    # single late timer interrupt, which the CI VMs deliver up to 12 ms late about
    # once a second: an attempt whose every reason is the machine's (steal, the timer
    # probe woken late, the engine woken as late as it released) is disturbed, not
    # counted for or against, and five attempts are allowed.
    precise(
        lambda: case.run(1.5),
        lambda v: None if v.level == "trusted" else f"{case.name}: {v.summary(3)}",
        attempts=5 if case.name == "clean-engine" else 3,
        disturbed=_machine,
    )


def test_monitor_overhead_is_measured_and_small() -> None:
    from fidelnet import Network
    from fidelnet.measure.packets import udp
    from fidelnet.topology import line

    with Network(line(2)) as net:
        r = udp(net, "h1", "h2", 2_000, duration=2.0)
    assert r.monitor is not None and r.verdict is not None
    assert 0 < r.monitor.overhead_pct_core < 5.0
    assert len(r.monitor.cpu.t_s) >= 30  # 50 ms samples over >= 2 s
    probe = r.monitor.timer
    assert probe is not None and probe.period_s == 0.025
    assert probe.count >= 2.0 / probe.period_s  # a wake-up every period for >= 2 s
