"""The run monitor: what the machine did while a measurement ran.

A :class:`Monitor` wraps one measurement::

    with Monitor(net, nodes=["h1", "r1", "h2"]) as mon:
        mon.begin()            # the measured traffic starts
        ...                    # traffic
        mon.end()              # and ends
    record = mon.record()      # a MonitorRecord, saved with the result

One thread runs while it is open (its own CPU time is measured and kept in the
record as ``overhead_pct_core``, about 1 % of one core) and does two things:

- a **timer probe**: it sleeps ``timer_period`` (25 ms) again and again and records
  how late it woke: the scheduling delay any process here would have seen;
- a **sampler**: every ``interval`` (50 ms by default, rounded to whole timer
  periods; ``/proc/stat`` counts in 10 ms ticks, so finer samples would be noise):
  per-core user, system, softirq, irq, steal, iowait and idle, and the kernel's CPU
  pressure (PSI ``some``: the share of time at least one runnable task waited for a
  CPU).

Counters that only make sense as a difference are read once at :meth:`begin` and
once at :meth:`end`: CFS throttling and pressure of every CPU-limited node's
cgroup; the link engine's per-direction counters and lateness histograms (linkd's
``stats``); and the kernel's drop counters of the watched nodes' interfaces and
root qdiscs. The judge (:mod:`fidelnet.fidelity.judge`) reads the record.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fidelnet.fidelity import engine_seen
from fidelnet.fidelity.engine_seen import lateness_delta
from fidelnet.fidelity.record import (
    CoreSeries,
    CpuSeries,
    EngineDirection,
    InterfaceDrops,
    MonitorRecord,
    NodeThrottle,
    TimerProbe,
    VmSeen,
)
from fidelnet.kernel import cgroups, neigh, procfs

if TYPE_CHECKING:
    from fidelnet.network import Network

__all__ = ["BACKLOG", "NEIGH_FULL", "Monitor", "lateness_delta", "watching"]

BACKLOG = ("machine", "cpu input backlog")
"""Where the monitor files the kernel's backlog drops (``/proc/net/softnet_stat``)."""
NEIGH_FULL = ("machine", "neighbour table full")
"""Where it files packets dropped for a full neighbour table (:mod:`fidelnet.kernel.neigh`)."""

_SHAPING_QDISCS = frozenset({"htb", "tbf", "netem", "hfsc", "cake", "fq_codel", "fq"})
_MAX_TIMER_SAMPLES = 200_000


@contextlib.contextmanager
def watching(net: Network | None) -> Iterator[Monitor]:
    """A started monitor over every node of ``net`` (only the machine when None, as
    for a peer emulator's network); stopped on exit."""
    mon = Monitor(net, nodes=list(net.spec.nodes) if net is not None else None)
    mon.start()
    try:
        yield mon
    finally:
        mon.stop()


@dataclass
class _Snapshot:
    t: float
    engine: dict[str, Any] = field(default_factory=dict)
    realtime: dict[str, Any] = field(default_factory=dict)
    loops: dict[str, Any] = field(default_factory=dict)  # linkd's "engine" report
    cgroups: dict[str, cgroups.CpuStat] = field(default_factory=dict)
    drops: dict[tuple[str, str], tuple[int, int, int]] = field(default_factory=dict)
    vcpus: dict[tuple[str, int], float] = field(default_factory=dict)  # (node, tid) -> s


class Monitor:
    """Watches the machine while a measurement runs (see the module doc)."""

    def __init__(
        self,
        net: Network | None,
        *,
        nodes: Iterable[str] | None = None,
        interval: float = 0.05,
        timer_period: float = 0.025,
    ) -> None:
        self.net = net
        self.nodes = list(nodes) if nodes is not None else None
        # One thread does both: it sleeps one timer period at a time (the probe) and
        # samples every ``every``-th wake-up, so the sampling interval is a whole
        # number of periods. Each wake-up costs the machine about 100 µs of CPU here;
        # one thread instead of two saved 40 % of the monitor's cost.
        self.every = max(1, round(interval / timer_period))
        self.interval = self.every * timer_period
        self.timer_period = timer_period
        self._stop = threading.Event()
        self._samples: list[tuple[float, dict[int, procfs.CpuTimes], int | None]] = []
        self._late_ns: list[int] = []
        self._late_t: list[float] = []
        self._thread_cpu = [0.0, 0.0]
        self._snap_cpu = 0.0
        self._threads: list[threading.Thread] = []
        self._t0 = 0.0
        self._begin: _Snapshot | None = None
        self._end: _Snapshot | None = None
        self._stopped_at: float | None = None
        self.notes: list[str] = []

    # -- life cycle ---------------------------------------------------------------

    def __enter__(self) -> Monitor:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._sample()
        self._threads = [
            threading.Thread(target=self._run, name="fidelnet-monitor", daemon=True),
        ]
        for t in self._threads:
            t.start()

    def stop(self) -> None:
        if self._stopped_at is not None:
            return
        self._stop.set()
        for t in self._threads:
            t.join(timeout=5)
        self._sample()
        self._stopped_at = time.monotonic()
        if self._begin is not None and self._end is None:
            self.end()

    def begin(self) -> None:
        """The measured traffic starts now."""
        self._begin = self._snapshot()

    def end(self) -> None:
        """The measured traffic ended now."""
        self._end = self._snapshot()

    # -- threads ------------------------------------------------------------------

    def _sample(self) -> None:
        self._samples.append((time.monotonic(), procfs.cpu_times(), procfs.cpu_pressure_us()))

    def _run(self) -> None:
        c0 = time.thread_time()
        period = self.timer_period
        n = 0
        while not self._stop.is_set():
            t = time.monotonic()
            time.sleep(period)
            late = time.monotonic() - t - period
            if len(self._late_ns) < _MAX_TIMER_SAMPLES:
                self._late_ns.append(max(0, int(late * 1e9)))
                self._late_t.append(t + period)
            n += 1
            if n % self.every == 0:
                self._sample()
        self._thread_cpu[0] = time.thread_time() - c0

    # -- snapshots ----------------------------------------------------------------

    def _watched(self) -> list[Any]:
        if self.net is None:
            return []
        nodes = list(self.net)
        if self.nodes is not None:
            names = set(self.nodes)
            nodes = [n for n in nodes if n.name in names]
        return nodes

    def _snapshot(self) -> _Snapshot:
        c0 = time.thread_time()
        snap = _Snapshot(time.monotonic())
        net = self.net
        if net is not None:
            engine = getattr(net, "engine", None)
            if engine is not None:
                sched = (
                    f"engine scheduling: {getattr(engine, 'scheduling', '') or 'unknown'}"
                    f" ({getattr(engine, 'scheduling_reason', '') or 'unknown'})"
                )
                if sched not in self.notes:
                    self.notes.append(sched)
                release = (
                    f"engine release: {getattr(engine, 'release', '') or 'unknown'}; "
                    f"offloads: {getattr(engine, 'offloads', '') or 'unknown'}"
                )
                if release not in self.notes:
                    self.notes.append(release)
                try:
                    snap.engine = engine.stats()
                    loop_stats = getattr(engine, "loop_stats", None)
                    if loop_stats is not None:
                        snap.loops = loop_stats()
                        snap.realtime = snap.loops.get("realtime", {})
                    elif (realtime := getattr(engine, "realtime", None)) is not None:
                        snap.realtime = realtime()
                except Exception as exc:
                    self.notes.append(f"engine stats unavailable: {exc}")
            fast = getattr(net, "fastpath", {})
            if fast:
                note = "XDP fast path on " + ", ".join(
                    f"{name} (ports {', '.join(fp.ports) or 'none'})" for name, fp in fast.items()
                )
                if note not in self.notes:
                    self.notes.append(note)
            for node in list(net):
                spec = node.spec
                if getattr(spec, "cpu", None) is None and getattr(spec, "cores", None) is None:
                    continue
                with contextlib.suppress(Exception):
                    snap.cgroups[node.name] = cgroups.cpu_stat(node.cgroup_dirs())
            from fidelnet.kernel import tc  # pyroute2: only where a net is watched

            for node in self._watched():
                self._vcpu_times(node, snap)
                if node.netns is None:
                    continue
                try:
                    nl = node.netlink()
                    links = nl.link_drops()
                    qdiscs = tc.root_qdisc_drops(nl)
                except Exception as exc:
                    self.notes.append(f"{node.name}: drop counters unavailable: {exc}")
                    continue
                for name, (index, rx, tx) in links.items():
                    kind, qdrops = qdiscs.get(index, ("", 0))
                    if kind in _SHAPING_QDISCS:
                        qdrops = 0
                    snap.drops[(node.name, name)] = (rx, tx, qdrops)
            # Frames dropped because a CPU's input backlog was full: veth pairs deliver
            # through it, and no interface counts them (machine-wide).
            snap.drops[BACKLOG] = (procfs.softnet_dropped(), 0, 0)
            # Packets dropped because the machine-wide neighbour table was full.
            snap.drops[NEIGH_FULL] = (neigh.table_fulls(), 0, 0)
        self._snap_cpu += time.thread_time() - c0
        return snap

    def _vm(self, node: Any) -> dict[str, Any] | None:
        """What the node's backend tells of its VM (None: not a VM node)."""
        backend = getattr(node, "backend", None)
        if backend is None or getattr(backend, "kind", "") != "qemu":
            return None
        try:
            info: dict[str, Any] = backend.describe(node)
        except Exception as exc:
            self.notes.append(f"{node.name}: VM state unavailable: {exc}")
            return None
        return info

    def _vcpu_times(self, node: Any, snap: _Snapshot) -> None:
        info = self._vm(node)
        if info is None or "qemu_pid" not in info:
            return
        for tid in info.get("vcpu_tids", []):
            t = procfs.thread_cpu_s(info["qemu_pid"], tid)
            if t is not None:
                snap.vcpus[(node.name, tid)] = t

    def _vms(self, a: _Snapshot, b: _Snapshot) -> list[VmSeen]:
        out = []
        span = b.t - a.t
        for node in self._watched():
            info = self._vm(node)
            if info is None or "accel" not in info:
                continue
            busy = [
                100 * (b.vcpus[key] - a.vcpus[key]) / span
                for key in b.vcpus
                if key[0] == node.name and key in a.vcpus and span > 0
            ]
            out.append(
                VmSeen(
                    name=node.name,
                    accel=str(info["accel"]),
                    clock_uncertainty_ns=info.get("clock_uncertainty_ns"),
                    vcpu_busy_pct=round(min(100.0, max(busy)), 1) if busy else None,
                )
            )
        return out

    # -- the record ---------------------------------------------------------------

    def _cpu(self) -> CpuSeries:
        samples = self._samples
        cores: dict[int, dict[str, list[float]]] = {}
        t_s: list[float] = []
        pressure: list[float] = []
        have_psi = all(p is not None for _t, _c, p in samples)
        for (ta, ca, pa), (tb, cb, pb) in itertools.pairwise(samples):
            dt = tb - ta
            if dt <= 0:
                continue
            t_s.append(round(ta - self._t0, 4))
            for cpu, b in cb.items():
                a = ca.get(cpu)
                if a is None:
                    continue
                d = [max(0.0, y - x) for x, y in zip(a, b, strict=True)]
                total = sum(d) or 1e-9
                series = cores.setdefault(
                    cpu, {k: [] for k in ("u", "s", "si", "i", "st", "io", "id")}
                )
                for key, value in zip(("u", "s", "si", "i", "st", "io", "id"), d, strict=True):
                    series[key].append(round(100 * value / total, 2))
            if have_psi and pa is not None and pb is not None:
                pressure.append(round(min(100.0, (pb - pa) / 1e6 / dt * 100), 2))
        return CpuSeries(
            interval_s=self.interval,
            t_s=t_s,
            cores=[
                CoreSeries(
                    cpu=cpu,
                    user=s["u"],
                    system=s["s"],
                    softirq=s["si"],
                    irq=s["i"],
                    steal=s["st"],
                    iowait=s["io"],
                    idle=s["id"],
                )
                for cpu, s in sorted(cores.items())
            ],
            pressure_pct=pressure if have_psi else None,
        )

    def _throttling(self, a: _Snapshot, b: _Snapshot) -> list[NodeThrottle]:
        out = []
        span = max(1e-9, b.t - a.t)
        for name, after in b.cgroups.items():
            before = a.cgroups.get(name)
            if before is None or self.net is None:
                continue
            spec = self.net[name].spec
            limit = []
            if spec.cpu is not None:
                limit.append(f"cpu={spec.cpu:g}")
            if spec.cores is not None:
                limit.append("cores=" + ",".join(map(str, spec.cores)))
            pressure = None
            if after.pressure_us is not None and before.pressure_us is not None:
                pressure = round(100 * (after.pressure_us - before.pressure_us) / 1e6 / span, 2)
            usage = None
            if after.usage_s is not None and before.usage_s is not None:
                usage = round(after.usage_s - before.usage_s, 4)
            out.append(
                NodeThrottle(
                    node=name,
                    limit=" ".join(limit),
                    periods=after.periods - before.periods,
                    throttled_periods=after.throttled_periods - before.throttled_periods,
                    throttled_s=round(after.throttled_s - before.throttled_s, 4),
                    usage_s=usage,
                    pressure_pct=pressure,
                )
            )
        return out

    def _engine(self, a: _Snapshot, b: _Snapshot) -> list[EngineDirection]:
        info: dict[str, engine_seen.LinkInfo] = {}
        if self.net is not None:
            for link in self.net.links:
                name = getattr(link.driver, "name", None)
                if name is None:
                    continue
                ab, ba = link.params("ab"), link.params("ba")
                info[name] = (
                    ab.delay or 0.0,
                    ba.delay or 0.0,
                    ab.max_queue_size,
                    ba.max_queue_size,
                )
            for cut in getattr(self.net, "cut_ends", ()):
                # Out: shaped here without delay; back: the delay held here.
                info[cut.name] = (0.0, cut.delay_back, cut.queue_out, None)
        return engine_seen.directions(a.engine, b.engine, info)

    def _interfaces(self, a: _Snapshot, b: _Snapshot) -> list[InterfaceDrops]:
        out = []
        for key, (rx, tx, q) in sorted(b.drops.items()):
            rx0, tx0, q0 = a.drops.get(key, (rx, tx, q))
            d = (rx - rx0, tx - tx0, q - q0)
            if any(x > 0 for x in d):
                out.append(
                    InterfaceDrops(
                        node=key[0],
                        intf=key[1],
                        rx_dropped=max(0, d[0]),
                        tx_dropped=max(0, d[1]),
                        qdisc_dropped=max(0, d[2]),
                    )
                )
        return out

    def _timer_probe(self, start: float, end: float) -> TimerProbe | None:
        lates = [n for n, t in zip(self._late_ns, self._late_t, strict=True) if start <= t <= end]
        if not lates:
            return None
        s = sorted(lates)
        # The worst wake-up per sampler interval, for the time series.
        per: dict[int, int] = {}
        for n, t in zip(self._late_ns, self._late_t, strict=True):
            k = int((t - self._t0) / self.interval)
            per[k] = max(per.get(k, 0), n)
        n_int = int(((self._stopped_at or time.monotonic()) - self._t0) / self.interval) + 1
        return TimerProbe(
            period_s=self.timer_period,
            count=len(s),
            p50_ns=s[len(s) // 2],
            # Nearest rank, but never one of the two worst wake-ups: with 25 ms
            # periods a 2 s window has about 80, and its p99 would otherwise be its
            # maximum, one hiccup. The maximum is kept beside it.
            p99_ns=s[max(0, min(math.ceil(len(s) * 0.99) - 1, len(s) - 3))],
            max_ns=s[-1],
            late_max_ns=[per.get(k, 0) for k in range(n_int)],
        )

    def record(self) -> MonitorRecord:
        """What was seen; call after the monitor stopped."""
        self.stop()
        stopped = self._stopped_at or time.monotonic()
        begin = self._begin or _Snapshot(self._t0)
        end = self._end or _Snapshot(stopped)
        duration = stopped - self._t0
        overhead = sum(self._thread_cpu) + self._snap_cpu
        demotions, demoted_s = engine_seen.demotions(begin.realtime, end.realtime)
        notes = list(self.notes)
        if demotions or demoted_s:
            notes.append(
                f"engine left SCHED_FIFO {demotions} time(s) in the window and ran "
                f"{demoted_s:.3f} s of it at normal priority: it took a large share of "
                "a core other tasks were waiting for, and stays real-time only while it "
                "leaves the receivers and softirqs on its core their share"
            )
        return MonitorRecord(
            duration_s=round(duration, 4),
            window_s=(round(begin.t - self._t0, 4), round(end.t - self._t0, 4)),
            cpu=self._cpu(),
            throttling=self._throttling(begin, end),
            engine=self._engine(begin, end),
            engine_wake=engine_seen.wake_ups(begin.loops, end.loops),
            interfaces=self._interfaces(begin, end),
            timer=self._timer_probe(begin.t, end.t),
            vms=self._vms(begin, end),
            engine_demotions=demotions,
            engine_demoted_s=demoted_s,
            overhead_cpu_s=round(overhead, 5),
            overhead_pct_core=round(100 * overhead / max(duration, 1e-9), 3),
            notes=notes,
        )
