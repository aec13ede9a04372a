"""What the run monitor saw while a measurement ran: typed, saved in the result.

Times ``t_s`` count from the monitor's start; ``window_s`` is the span of the
measured traffic within it (the verdict judges that span, the rest is context).
CPU shares are percentages of one core per sample interval, from ``/proc/stat``;
pressure is the kernel's PSI ``some`` share (the time at least one runnable task
waited for a CPU), machine-wide and per node cgroup.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "CPU_FIELDS",
    "CoreSeries",
    "CpuSeries",
    "EngineDirection",
    "EngineWake",
    "InterfaceDrops",
    "MonitorRecord",
    "NodeThrottle",
    "TimerProbe",
    "VmSeen",
]

CPU_FIELDS = ("user", "system", "softirq", "irq", "steal", "iowait", "idle")
"""The per-core shares kept, in ``/proc/stat`` terms (nice counts as user)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CoreSeries(_Model):
    """One core's shares per sample, in percent (each sample adds up to about 100)."""

    cpu: int
    user: list[float]
    system: list[float]
    softirq: list[float]
    irq: list[float]
    steal: list[float]
    iowait: list[float]
    idle: list[float]


class CpuSeries(_Model):
    interval_s: float
    t_s: list[float]
    cores: list[CoreSeries]
    pressure_pct: list[float] | None = None


class NodeThrottle(_Model):
    """A CPU-limited node's cgroup over the window: CFS periods and how many of them
    hit the quota, and the time its tasks were held back."""

    node: str
    limit: str
    periods: int
    throttled_periods: int
    throttled_s: float
    usage_s: float | None = None
    pressure_pct: float | None = None


class EngineDirection(_Model):
    """One direction of one engine link over the window (deltas of linkd's counters;
    lateness from the difference of its histograms)."""

    link: str
    direction: str
    delay_s: float
    packets: int
    lateness_p50_ns: int
    lateness_p99_ns: int
    lateness_p999_ns: int
    lateness_max_ns: int
    drops_queue: int
    drops_loss: int
    drops_down: int
    queue_limit: int | None = None
    # Frames the kernel dropped before linkd read them (an AF_XDP endpoint's full
    # ring): the engine did not keep up.
    drops_ingress: int = 0
    # A cut link's incoming direction (its half's ``ba``): how long the network
    # between the machines took for the frames of the window (p99.9 and max, ns).
    wire_p999_ns: int | None = None
    wire_max_ns: int | None = None
    # And how well the two machines' clocks are known (the last comparison's
    # uncertainty, ns): every delay the half holds is off by up to that.
    clock_uncertainty_ns: int | None = None


class EngineWake(_Model):
    """The link engine's timer wake-ups in the window: how long after the instant its
    timer was armed for the loop ran again (the machine's delay, not the engine's:
    interrupt delivery, the scheduler, on a VM the hypervisor)."""

    count: int
    p50_ns: int
    p99_ns: int
    max_ns: int


class InterfaceDrops(_Model):
    """Kernel drop counters of one interface over the window (only non-zero ones are
    kept): ``rx_dropped``/``tx_dropped`` of the device, ``qdisc`` of its root qdisc
    when fidelnet did not put a shaping qdisc there (a shaping qdisc's drops are the
    link model's, not an error)."""

    node: str
    intf: str
    rx_dropped: int = 0
    tx_dropped: int = 0
    qdisc_dropped: int = 0


class TimerProbe(_Model):
    """A thread that sleeps ``period_s`` again and again and records how late it
    woke: the scheduling delay any process on this machine saw, sampled."""

    period_s: float
    count: int
    p50_ns: int
    p99_ns: int
    max_ns: int
    late_max_ns: list[int] = Field(default_factory=list)


class VmSeen(_Model):
    """A VM node the measured packets crossed (or started or ended at)."""

    name: str
    accel: str
    """``kvm`` or ``tcg`` (emulated in software)."""
    clock_uncertainty_ns: int | None = None
    """How well the guest clock was set to the host's (None: never set)."""
    vcpu_busy_pct: float | None = None
    """Its busiest vCPU thread's CPU time over the traffic window, in % (None when
    the threads could not be read)."""


class MonitorRecord(_Model):
    """Everything the monitor sampled, and what the monitoring itself cost."""

    duration_s: float
    window_s: tuple[float, float]
    cpu: CpuSeries
    throttling: list[NodeThrottle] = Field(default_factory=list)
    engine: list[EngineDirection] = Field(default_factory=list)
    engine_wake: EngineWake | None = None
    interfaces: list[InterfaceDrops] = Field(default_factory=list)
    timer: TimerProbe | None = None
    vms: list[VmSeen] = Field(default_factory=list)
    engine_demotions: int = 0
    """Times the link engine left SCHED_FIFO during the window because it was busy
    over half of a 10 ms window (its guard against starving what shares its core)."""
    engine_demoted_s: float = 0.0
    """Seconds of the window the engine ran demoted, at normal priority."""
    overhead_cpu_s: float = 0.0
    overhead_pct_core: float = 0.0
    notes: list[str] = Field(default_factory=list)
