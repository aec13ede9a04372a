"""This machine's identity for provenance and profiles: kernel, CPUs, memory, and
whether it is a virtual machine."""

from __future__ import annotations

import os
import platform

from pydantic import BaseModel, ConfigDict

__all__ = ["Machine", "machine"]


class Machine(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    hostname: str
    kernel: str
    cpus: int
    cpu_model: str
    mem_total_kib: int | None = None
    virtualized: bool | None = None


def _first_line_matching(path: str, prefix: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith(prefix):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def machine() -> Machine:
    """This machine: kernel, CPUs, memory, and whether it is a VM (cpuinfo's
    ``hypervisor`` flag)."""
    flags = _first_line_matching("/proc/cpuinfo", "flags") or ""
    mem = _first_line_matching("/proc/meminfo", "MemTotal")
    return Machine(
        hostname=platform.node(),
        kernel=platform.release(),
        cpus=os.cpu_count() or 1,
        cpu_model=_first_line_matching("/proc/cpuinfo", "model name") or platform.machine(),
        mem_total_kib=int(mem.split()[0]) if mem else None,
        virtualized=("hypervisor" in flags.split()) if flags else None,
    )
