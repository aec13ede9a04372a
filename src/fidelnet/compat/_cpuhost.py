"""Mininet's ``CPULimitedHost`` on fidelnet's nodes: a host with a CPU share and
pinned cores, held by cgroups."""

from __future__ import annotations

import os
from typing import Any

from fidelnet.compat import _context
from fidelnet.compat._node import Host
from fidelnet.compat.log import info
from fidelnet.errors import ValidationError
from fidelnet.kernel import cgroups
from fidelnet.nodes import node as _core
from fidelnet.topology.spec import NodeSpec

__all__ = ["CPULimitedHost"]


class CPULimitedHost(Host):
    """A host with a CPU share (``cpu=``, a fraction of all cores) and/or pinned cores
    (``cores=``), held by cgroups. ``sched='rt'`` runs the node's shell (and so its
    commands) SCHED_RR with a real-time runtime share, where the kernel offers
    real-time group scheduling (cgroup v1); elsewhere it is a clear error."""

    inited = True
    fn_cpu_limited = True
    fn_extra_params = ("period_us",)  # read by __init__ from its keywords
    rtprio = _core.RT_PRIORITY

    def __init__(self, name: str, sched: str = "cfs", **kwargs: Any) -> None:
        if sched not in ("cfs", "rt"):
            raise ValidationError(f"{name}.sched", "unknown scheduler", sched, ["cfs", "rt"])
        self.sched = sched
        self.period_us = int(kwargs.get("period_us", 100_000))
        if sched == "rt":  # refuse before anything is made where the kernel cannot
            net = _context.current_network()
            net.cgroupfs.node_dirs(net.run_id, name, cgroups.CpuLimit(realtime=True))
        super().__init__(name, **kwargs)

    def fn_spec(self, name: str, params: dict[str, Any]) -> NodeSpec:
        spec = super().fn_spec(name, params)
        spec.cpu, spec.cores = _cpu_frac(params.get("cpu")), _cores(params.get("cores"))
        spec.sched = "rt" if self.sched == "rt" else "cfs"
        return spec

    def setCPUFrac(self, f: float, sched: str | None = None) -> None:
        """Limit the node to ``f`` of all cores (-1 or None: no limit; ``rt`` needs f > 0)."""
        sched = sched or self.sched
        frac = _cpu_frac(f)
        if sched == "rt":
            if frac is None or frac <= 0:
                raise ValidationError(
                    f"{self.name}.cpu", "sched='rt' needs a positive CPU fraction", f
                )
            self.spec.sched = "rt"
            self.set_cpu_limit(frac, self.spec.cores)
            # Made now, as Mininet does in config: a share the kernel cannot admit is
            # refused here (cpu.py catches it around Mininet()), not at a first command.
            self.cgroup_dirs()
            if self._shell is not None:
                os.sched_setscheduler(self._shell.pid, os.SCHED_RR, os.sched_param(self.rtprio))
            # Real-time runtime is per CPU: on as few cores as hold the share.
            limit = self._cpu_limit(frac, self.spec.cores)
            runtime = cgroups.rt_runtime_us(limit, self.net.cgroupfs.ncpus)
            on = ",".join(str(c) for c in limit.cores or ())
            info(f"(rt {runtime}/{limit.period_us}us on cores {on}) ")
            return
        self.set_cpu_limit(frac, self.spec.cores)
        ncpu = os.cpu_count() or 1
        quota = -1 if frac is None else max(1000, int(self.period_us * frac * ncpu))
        info(f"(cfs {quota}/{self.period_us}us) ")

    def setCPUs(self, cores: Any, mems: int = 0) -> None:
        """Pin the node to ``cores`` (a list, a number, or ``'0,1'``)."""
        del mems
        self.set_cpu_limit(self.spec.cpu, _cores(cores))

    def config(  # type: ignore[override]
        self,
        cpu: float = -1,
        cores: Any = None,
        **params: Any,
    ) -> dict[str, Any]:
        r = super().config(**params)
        self.setParam(r, "setCPUFrac", cpu=cpu)
        self.setParam(r, "setCPUs", cores=cores)
        return r

    @classmethod
    def init(cls) -> None:
        """Nothing to mount: fidelnet uses the system's cgroups."""


def _cpu_frac(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError("cpu", "must be a fraction of all cores in (0, 1], or -1", value)
    return None if value < 0 else float(value)


def _cores(value: Any) -> tuple[int, ...] | None:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        try:
            return tuple(int(c) for c in value.split(","))
        except ValueError as exc:
            raise ValidationError("cores", "must be core numbers like '0,1'", value) from exc
    if isinstance(value, int):
        return (value,)
    return tuple(value)
