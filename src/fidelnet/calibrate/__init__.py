"""``fidelnet calibrate``: what this machine can carry faithfully.

Mininet-HiFi's micro-benchmarks, run on this machine in a few minutes and kept as
its profile (:mod:`fidelnet.fidelity.profile`), which the verdicts and the capacity
check read:

==================  ===================================================================
steal               steal time of the machine at rest
timer               how late 1 ms sleeps wake, idle and with a busy process per core (3.2)
cpu shares          N busy processes, each in a CPU-limited node: what each got per
                    second against its share (Table 2)
rtt                 round trips over a bare veth pair, idle and loaded (Fig. 5)
rate accuracy       the received rate in 10 ms windows through a shaped link, per
                    backend (tc, engine) at 10 Mbit/s, 100 Mbit/s, 1 Gbit/s (Fig. 2)
forwarding          the zero-loss rate of 64-byte frames through routed chains of 1, 3
                    and 6 links and through 2 parallel links sending at once, per
                    backend: the breaking point (Fig. 3/4)
engine release      the engine's lateness on a 10 ms link at 5 kpps, at real-time
                    priority 0 and 10, alternated: the profile keeps real-time on
                    only where it cut the median p99.9 by a fifth or more
floor               the packet generator's own latency and highest send rate
==================  ===================================================================

The profile is saved only when every step finished: an interrupted calibration
(Ctrl-C, SIGTERM) saves nothing, and every network it built is torn down as usual.

Not there yet: rate accuracy at 10 Gbit/s (the highest rate measured is 1 Gbit/s:
the engine does not carry more here, see issue 18, and tc's htb stops at 4.3
Gbit/s), and parallel layouts of more than two links (two cores).
"""

from __future__ import annotations

import datetime as _dt
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fidelnet._version import __version__
from fidelnet.calibrate import host, steps
from fidelnet.fidelity.machine import machine
from fidelnet.fidelity.profile import Forwarding, Profile, RateAccuracy, machine_key

__all__ = ["Calibration", "Plan", "calibrate"]


@dataclass(frozen=True)
class Plan:
    """What to measure; the defaults finish in under 5 minutes on 2 cores."""

    timer_samples: int = 1000
    share_processes: tuple[int, ...] = (2, 4, 8)
    share_seconds: int = 3
    rtt_count: int = 300
    rates_bps: tuple[float, ...] = (10e6, 100e6, 1e9)
    rate_backends: tuple[str, ...] = ("tc", "engine")
    rate_seconds: float = 2.0
    chain_links: tuple[int, ...] = (1, 3, 6)
    parallel_links: tuple[int, ...] = (2,)
    forward_backends: tuple[str, ...] = ("tc", "engine")
    trial_s: float = 0.5
    engine_runs: int = 3
    floor: bool = True

    @classmethod
    def quick(cls) -> Plan:
        """About a minute: fewer samples, one chain length, one rate."""
        return cls(
            timer_samples=300,
            share_processes=(2,),
            share_seconds=2,
            rtt_count=100,
            rates_bps=(100e6,),
            rate_seconds=1.0,
            chain_links=(1,),
            parallel_links=(),
            trial_s=0.3,
            engine_runs=1,
            floor=False,
        )


@dataclass
class Calibration:
    """A finished calibration: the profile and the raw samples its page plots."""

    profile: Profile
    timer: dict[str, list[int]] = field(default_factory=dict)
    shares: list[steps.ShareSamples] = field(default_factory=list)
    rtt: dict[str, list[int]] = field(default_factory=dict)
    rate_windows: dict[str, list[float]] = field(default_factory=dict)
    """``"engine 100 Mbit/s"`` -> received/configured per 10 ms window."""
    step_seconds: dict[str, float] = field(default_factory=dict)


def _rate_label(backend: str, bps: float) -> str:
    for scale, unit in ((1e9, "Gbit/s"), (1e6, "Mbit/s"), (1e3, "kbit/s")):
        if bps >= scale:
            return f"{backend} {bps / scale:g} {unit}"
    return f"{backend} {bps:g} bit/s"


def calibrate(
    plan: Plan | None = None, progress: Callable[[str], None] | None = None
) -> Calibration:
    """Run every step of ``plan`` and return the calibration (not yet saved)."""
    from fidelnet.measure.verdicts import assume_no_profile

    plan = plan or Plan()
    say = progress or (lambda _m: None)
    assume_no_profile()  # this is what makes one
    t_start = time.monotonic()
    spent: dict[str, float] = {}
    timer_raw: dict[str, list[int]] = {}

    def step(name: str) -> Callable[[], None]:
        t0 = time.monotonic()
        say(name)
        return lambda: spent.__setitem__(name, round(time.monotonic() - t0, 1))

    done = step("steal at rest, 2 s")
    steal = host.steal_at_rest(2.0)
    done()

    done = step(f"timer wake-up error, {plan.timer_samples} sleeps of 1 ms, idle and busy")
    timers = []
    for load in ("idle", "busy"):
        summary, raw = host.timer_error(load, plan.timer_samples)
        timers.append(summary)
        timer_raw[load] = raw
    done()

    done = step(f"CPU shares: {', '.join(map(str, plan.share_processes))} busy processes")
    shares, share_raw = [], []
    for n in plan.share_processes:
        s, raw_s = steps.cpu_shares(n, seconds=plan.share_seconds)
        shares.append(s)
        share_raw.append(raw_s)
    done()

    done = step(f"RTT over a veth pair, {plan.rtt_count} pings, idle and busy")
    rtts, rtt_raw = steps.rtt_under_load(plan.rtt_count)
    done()

    done = step("rate accuracy in 10 ms windows")
    rates: list[RateAccuracy] = []
    windows: dict[str, list[float]] = {}
    for backend in plan.rate_backends:
        for bps in plan.rates_bps:
            say(f"  {_rate_label(backend, bps)}")
            r, ratios = steps.rate_accuracy(backend, bps, plan.rate_seconds)
            rates.append(r)
            windows[_rate_label(backend, bps)] = ratios
    done()

    done = step("forwarding capacity of routed chains (zero-loss search)")
    fwd: list[Forwarding] = []
    for backend in plan.forward_backends:
        for links in plan.chain_links:
            say(f"  {backend}, {links} link{'s' if links > 1 else ''}")
            fwd.append(steps.forwarding(backend, links, plan.trial_s))
        for links in plan.parallel_links:
            say(f"  {backend}, {links} parallel links")
            fwd.append(steps.parallel_forwarding(backend, links, plan.trial_s))
    done()

    from fidelnet.links.engine import REALTIME_PRIORITY, SPIN_US

    done = step(
        f"engine release at real-time priority 0 and {REALTIME_PRIORITY}, and with a "
        f"{SPIN_US} µs spin, {plan.engine_runs} run(s) each"
    )
    release = []
    settings = ((0, 0), (REALTIME_PRIORITY, 0), (REALTIME_PRIORITY, SPIN_US))
    for _ in range(plan.engine_runs):
        for prio, spin in settings:  # alternated, so drift hits every setting alike
            release.append(steps.engine_release(prio, spin))
    chosen = steps.choose_realtime(release, REALTIME_PRIORITY)
    chosen_spin = steps.choose_spin(release, chosen, SPIN_US)
    done()

    floor_p50 = floor_p999 = None
    floor_send = None
    if plan.floor:
        done = step("generator floor over a bare veth pair")
        from fidelnet.measure.selftest import selftest

        st = selftest(duration=2.0, search=False, save=True)
        floor_p50, floor_p999 = st.floor.latency_p50_ns, st.floor.latency_p999_ns
        floor_send = st.floor.max_send_pps
        done()

    m = machine()
    profile = Profile(
        key=machine_key(m),
        fidelnet=__version__,
        machine=m,
        measured_at=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        seconds=round(time.monotonic() - t_start, 1),
        command=["fidelnet", "calibrate", *sys.argv[2:]] if sys.argv else ["fidelnet"],
        steal_at_rest_pct=round(steal, 3),
        cpu_shares=shares,
        timer=timers,
        rate_accuracy=rates,
        forwarding=fwd,
        rtt=rtts,
        floor_p50_ns=floor_p50,
        floor_p999_ns=floor_p999,
        floor_max_send_pps=floor_send,
        engine_release=release,
        engine_realtime_priority=chosen,
        engine_spin_us=chosen_spin,
        notes=[
            f"{os.cpu_count()} cores; steps: " + ", ".join(f"{k} {v} s" for k, v in spent.items())
        ],
    )
    return Calibration(
        profile=profile,
        timer=timer_raw,
        shares=share_raw,
        rtt=rtt_raw,
        rate_windows=windows,
        step_seconds=spent,
    )
