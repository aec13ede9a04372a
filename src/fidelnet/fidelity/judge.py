"""From what was seen to a verdict: the rules, one function each.

:func:`judge` takes an :class:`Observation` (the measurement's own signals, handed
over by :mod:`fidelnet.measure` as plain numbers), the :class:`MonitorRecord` of
the run, the machine :class:`Profile` (or None) and the :class:`Thresholds`, and
returns a :class:`Verdict`. Each rule looks at one thing and says, with its
numbers, why it lowers the level:

==================  =========================================================
code                what it means
==================  =========================================================
cpu_saturated       no core had idle time for a share of the traffic window
cpu_pressure        runnable tasks waited for a CPU (PSI) a share of the window
steal               the hypervisor took CPU time from this machine
engine_late         linkd released packets late, relative to the link's delay
engine_woken_late   (a note) the kernel ran linkd late after its timer: the machine's
                    delay accounts for the engine_late directions it names
engine_unexplained  linkd dropped packets its model did not ask for
clock_uncertain     a cut link's two machines' clocks are known too loosely for its delay
node_throttled      a CPU-limited node hit its limit in a share of its periods
kernel_drops        the kernel dropped packets on the path (backlog, qdisc)
timer_late          a sleeping thread woke up late (scheduling delay)
socket_drops        the receiver's socket overflowed: it lost packets itself
generator_short     the generator did not send the rate asked for
near_floor          (a note) the latency is within the measurement's floor
vm_emulated         a VM node on the path runs in software emulation (TCG)
vm_cpu_saturated    a VM node's vCPU was busy the whole traffic window
vm_clock            one-way latency from or to a VM whose clock is uncertain
monitor_absent      nothing was watched: the result cannot be vouched for
flag:<code>         a flag the measurement raised itself
==================  =========================================================
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from fidelnet.fidelity.judge_engine import cut_clock_reasons, engine_reasons
from fidelnet.fidelity.levels import fmt_ns as _fmt_ns
from fidelnet.fidelity.levels import level as _level
from fidelnet.fidelity.profile import Profile
from fidelnet.fidelity.record import MonitorRecord
from fidelnet.fidelity.thresholds import DEFAULT, Thresholds
from fidelnet.fidelity.verdict import Level, Reason, Verdict

__all__ = ["FLAG_LEVELS", "Observation", "judge"]

FLAG_LEVELS: dict[str, Level] = {
    "exceeds_bottleneck": "untrusted",
    "receiver_socket_drops": "untrusted",
    "malformed": "untrusted",
    "negative_latency": "untrusted",
    "send_errors": "untrusted",
    "rate_not_reached": "untrusted",
    "generator_limited": "degraded",
    "userspace_timestamps": "degraded",
    "floor_loss": "degraded",
    "loss_at_low_rate": "degraded",
    "sender_receiver_discrepancy": "trusted",
}
"""The level each measurement flag sets (an unknown flag: degraded)."""


@dataclass
class Observation:
    """What a measurement knows about itself, as plain numbers."""

    kind: str
    packets: int = 0
    requested_pps: float | None = None
    achieved_pps: float | None = None
    socket_drops: int = 0
    latency_p999_ns: int | None = None
    latency_p50_ns: int | None = None
    src: str | None = None
    dst: str | None = None
    floor_p999_ns: int | None = None
    flags: Sequence[tuple[str, str]] = field(default_factory=list)
    capacity_limited: bool = True
    """False when the path has no configured rate (unshaped): CPU saturation is then
    the machine's limit, which is the very figure measured."""


def _window(rec: MonitorRecord) -> list[int]:
    w0, w1 = rec.window_s
    idx = [i for i, t in enumerate(rec.cpu.t_s) if w0 <= t < w1]
    return idx or list(range(len(rec.cpu.t_s)))


def _cpu(rec: MonitorRecord, obs: Observation, th: Thresholds) -> Iterator[Reason]:
    idx = _window(rec)
    if not idx or not rec.cpu.cores:
        return
    span = len(idx) * rec.cpu.interval_s
    saturated = 0
    for i in idx:
        if all(100 - c.idle[i] - c.iowait[i] >= th.all_cores_busy_pct for c in rec.cpu.cores):
            saturated += 1
    share = 100 * saturated / len(idx)
    level = _level(share, th.saturated_degraded_pct, th.saturated_untrusted_pct)
    if level != "trusted":
        if not obs.capacity_limited and level == "untrusted":
            level = "degraded"
        softirq = max((sum(c.softirq[i] for i in idx) / len(idx), c.cpu) for c in rec.cpu.cores)
        yield Reason(
            code="cpu_saturated",
            level=level,
            message=(
                f"every core busy for {saturated * rec.cpu.interval_s:.1f} s of {span:.1f} s "
                f"of traffic ({share:.0f} %; most softirq: core {softirq[1]} at "
                f"{softirq[0]:.0f} %)"
            ),
            value=round(share, 1),
            threshold=th.saturated_degraded_pct
            if level == "degraded"
            else th.saturated_untrusted_pct,
            unit="% of window",
            source="monitor.cpu",
        )
    steal = sum(c.steal[i] for c in rec.cpu.cores for i in idx) / (len(idx) * len(rec.cpu.cores))
    level = _level(steal, th.steal_degraded_pct, th.steal_untrusted_pct)
    if level != "trusted":
        yield Reason(
            code="steal",
            level=level,
            message=f"the hypervisor stole {steal:.1f} % of CPU time during the traffic",
            value=round(steal, 2),
            threshold=th.steal_degraded_pct if level == "degraded" else th.steal_untrusted_pct,
            unit="%",
            source="monitor.cpu",
        )
    pressure = rec.cpu.pressure_pct
    if pressure:
        vals = [pressure[i] for i in idx if i < len(pressure)]
        if vals:
            mean = sum(vals) / len(vals)
            level = _level(mean, th.pressure_degraded_pct, th.pressure_untrusted_pct)
            if level != "trusted":
                yield Reason(
                    code="cpu_pressure",
                    level=level,
                    message=(
                        f"runnable tasks waited for a CPU {mean:.0f} % of the traffic time "
                        f"(peak {max(vals):.0f} % in {rec.cpu.interval_s * 1000:.0f} ms)"
                    ),
                    value=round(mean, 1),
                    threshold=th.pressure_degraded_pct
                    if level == "degraded"
                    else th.pressure_untrusted_pct,
                    unit="%",
                    source="monitor.psi",
                )


def _throttle(rec: MonitorRecord, th: Thresholds) -> Iterator[Reason]:
    for t in rec.throttling:
        if t.periods <= 0:
            continue
        pct = 100 * t.throttled_periods / t.periods
        level = _level(pct, th.throttled_degraded_pct, th.throttled_untrusted_pct)
        if level != "trusted":
            yield Reason(
                code="node_throttled",
                level=level,
                message=(
                    f"{t.node} ({t.limit}) was held at its CPU limit in {pct:.0f} % of "
                    f"periods ({t.throttled_s:.2f} s throttled): its processes needed more "
                    "CPU than it has"
                ),
                value=round(pct, 1),
                threshold=th.throttled_degraded_pct
                if level == "degraded"
                else th.throttled_untrusted_pct,
                unit="% of periods",
                source="monitor.cgroup",
            )


def _kernel_drops(rec: MonitorRecord, obs: Observation, th: Thresholds) -> Iterator[Reason]:
    places = [
        (f"{d.node}:{d.intf}", d.rx_dropped + d.tx_dropped + d.qdisc_dropped)
        for d in rec.interfaces
    ] + [
        (f"engine link {e.link} {e.direction} ingress", e.drops_ingress)
        for e in rec.engine
        if e.drops_ingress > 0
    ]
    total = sum(n for _, n in places)
    if total <= 0:
        return
    ratio = total / obs.packets if obs.packets else 1.0
    level: Level = "untrusted" if ratio >= th.kernel_drops_untrusted_ratio else "degraded"
    where = ", ".join(f"{w} {n}" for w, n in places[:4])
    hint = ""
    if any(d.node == "machine" and d.intf == "cpu input backlog" for d in rec.interfaces):
        hint = (
            "; a CPU's input backlog ran full (net.core.netdev_max_backlog): bursts of "
            "frames, such as floods in a large broadcast domain, arrived faster than "
            "the kernel delivered them"
        )
    if any(d.node == "machine" and d.intf == "neighbour table full" for d in rec.interfaces):
        hint = (
            "; the machine's neighbour table (ARP/ND, shared by every namespace) was "
            "full: raise net.ipv4.neigh.default.gc_thresh3, or run fewer hosts at once"
        )
    if any(e.drops_ingress > 0 for e in rec.engine):
        hint = (
            "; an engine link's AF_XDP ring ran full because linkd could not keep up "
            "with one frame at a time: endpoint 'tap' carries TCP in super-frames"
        )
    yield Reason(
        code="kernel_drops",
        level=level,
        message=f"the kernel dropped {total:,} packets on the path ({where}){hint}",
        value=float(total),
        threshold=0.0,
        unit="packets",
        source="monitor.interfaces",
    )


def _timer(rec: MonitorRecord, profile: Profile | None, th: Thresholds) -> Iterator[Reason]:
    if rec.timer is None:
        return
    base = profile.timer_p99_ns("idle") if profile is not None else None
    degraded = max(th.timer_degraded_ns, int(th.timer_profile_factor * (base or 0)))
    untrusted = max(th.timer_untrusted_ns, degraded)
    level = _level(rec.timer.p99_ns, degraded, untrusted)
    if level != "trusted":
        basis = f", {th.timer_profile_factor:g}x this machine's idle p99" if base else ""
        yield Reason(
            code="timer_late",
            level=level,
            message=(
                f"a sleeping thread woke up {_fmt_ns(rec.timer.p99_ns)} late at p99 "
                f"(max {_fmt_ns(rec.timer.max_ns)}; line {_fmt_ns(degraded)}{basis})"
            ),
            value=float(rec.timer.p99_ns),
            threshold=float(degraded if level == "degraded" else untrusted),
            unit="ns",
            source="monitor.timer",
        )


def _vms(rec: MonitorRecord, obs: Observation, th: Thresholds) -> Iterator[Reason]:
    emulated = [vm.name for vm in rec.vms if vm.accel == "tcg"]
    if emulated:
        yield Reason(
            code="vm_emulated",
            level="degraded",
            message=(
                f"VM node(s) {', '.join(emulated)} run emulated in software (TCG, no KVM "
                "here): they compute and forward many times slower than real hardware, "
                "so the figure is this emulation's"
            ),
            source="monitor.vm",
        )
    for vm in rec.vms:
        if vm.vcpu_busy_pct is not None and vm.vcpu_busy_pct >= th.vm_vcpu_busy_pct:
            yield Reason(
                code="vm_cpu_saturated",
                level="untrusted" if obs.capacity_limited else "degraded",
                message=(
                    f"{vm.name}'s vCPU was busy {vm.vcpu_busy_pct:.0f} % of the traffic "
                    "window: the VM's CPU, not the network, set this figure"
                ),
                value=vm.vcpu_busy_pct,
                threshold=th.vm_vcpu_busy_pct,
                unit="%",
                source="monitor.vm",
            )
    if obs.latency_p50_ns is None or obs.kind != "udp":
        return
    for vm in rec.vms:
        if vm.name not in (obs.src, obs.dst):
            continue
        if vm.clock_uncertainty_ns is None:
            yield Reason(
                code="vm_clock",
                level="untrusted",
                message=(
                    f"one-way latency from or to {vm.name}, whose clock was never set to the host's"
                ),
                source="monitor.vm",
            )
            continue
        pct = 100 * vm.clock_uncertainty_ns / max(obs.latency_p50_ns, 1)
        level = _level(
            pct, th.vm_clock_degraded_pct_of_latency, th.vm_clock_untrusted_pct_of_latency
        )
        if level != "trusted":
            yield Reason(
                code="vm_clock",
                level=level,
                message=(
                    f"{vm.name}'s clock is known to within {_fmt_ns(vm.clock_uncertainty_ns)}"
                    f", {pct:.0f} % of the median one-way latency "
                    f"{_fmt_ns(obs.latency_p50_ns)}"
                ),
                value=round(pct, 1),
                threshold=th.vm_clock_degraded_pct_of_latency
                if level == "degraded"
                else th.vm_clock_untrusted_pct_of_latency,
                unit="% of latency",
                source="monitor.vm",
            )


def _measurement(obs: Observation, th: Thresholds) -> Iterator[Reason]:
    if obs.socket_drops > 0:
        yield Reason(
            code="socket_drops",
            level="untrusted",
            message=f"receiver dropped {obs.socket_drops:,} packets in its socket",
            value=float(obs.socket_drops),
            threshold=0.0,
            unit="packets",
            source="receiver",
        )
    if obs.requested_pps and obs.achieved_pps is not None:
        ratio = obs.achieved_pps / obs.requested_pps
        level: Level = "trusted"
        if ratio < th.generator_untrusted_ratio:
            level = "untrusted"
        elif ratio < th.generator_degraded_ratio:
            level = "degraded"
        if level != "trusted":
            yield Reason(
                code="generator_short",
                level=level,
                message=(
                    f"the generator sent {obs.achieved_pps:,.0f} of {obs.requested_pps:,.0f} "
                    f"pps asked ({100 * ratio:.1f} %)"
                ),
                value=round(ratio, 4),
                threshold=th.generator_degraded_ratio
                if level == "degraded"
                else th.generator_untrusted_ratio,
                unit="ratio",
                source="generator",
            )
    if (
        obs.latency_p999_ns
        and obs.floor_p999_ns
        and obs.latency_p999_ns <= th.floor_factor * obs.floor_p999_ns
    ):
        yield Reason(
            code="near_floor",
            level="trusted",
            message=(
                f"latency p99.9 {_fmt_ns(obs.latency_p999_ns)} is within "
                f"{th.floor_factor:g}x the measurement floor's "
                f"{_fmt_ns(obs.floor_p999_ns)}: the tail is mostly the measurement's own"
            ),
            value=float(obs.latency_p999_ns),
            threshold=float(th.floor_factor * obs.floor_p999_ns),
            unit="ns",
            source="floor",
        )
    seen = {"receiver_socket_drops"} if obs.socket_drops else set()
    if obs.requested_pps and obs.achieved_pps is not None:
        seen.add("rate_not_reached")
    for code, message in obs.flags:
        if code in seen:
            continue
        seen.add(code)
        yield Reason(
            code=f"flag:{code}",
            level=FLAG_LEVELS.get(code, "degraded"),
            message=message,
            source="measurement",
        )


def judge(
    obs: Observation,
    record: MonitorRecord | None,
    profile: Profile | None = None,
    thresholds: Thresholds = DEFAULT,
) -> Verdict:
    """The verdict on one measurement (see the module doc for the rules)."""
    reasons: list[Reason] = list(_measurement(obs, thresholds))
    if record is None:
        reasons.append(
            Reason(
                code="monitor_absent",
                level="degraded",
                message="the run was not monitored: nothing vouches for this number",
                source="monitor",
            )
        )
    else:
        reasons += _cpu(record, obs, thresholds)
        reasons += engine_reasons(record, thresholds)
        reasons += cut_clock_reasons(record, thresholds)
        reasons += _throttle(record, thresholds)
        reasons += _kernel_drops(record, obs, thresholds)
        reasons += _timer(record, profile, thresholds)
        reasons += _vms(record, obs, thresholds)
        for note in record.notes:
            reasons.append(Reason(code="monitor_note", level="trusted", message=note))
    return Verdict.of(
        reasons, monitored=record is not None, profile=profile.key if profile else None
    )
