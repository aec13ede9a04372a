"""What this kernel has, read from files only: its build configuration and its modules.

Nothing here creates a kernel object or loads a module. A feature is

- ``builtin``: compiled in (``CONFIG_X=y`` or listed in ``modules.builtin``);
- ``loaded``: a module that is loaded now (``/sys/module/<name>``, ``/proc/modules``);
- ``module``: a module that is built and installed, not loaded: the kernel loads it
  on first use (a ``netem`` qdisc loads ``sch_netem``), or ``modprobe`` does;
- ``missing``: not built (``# CONFIG_X is not set``), or built as a module that is
  not installed under ``/lib/modules/<release>``;
- ``unknown``: neither the configuration (``/proc/config.gz``,
  ``/boot/config-<release>``) nor the module lists could be read.

Used by ``fidelnet doctor`` (:mod:`fidelnet.doctor`). Where fidelnet needs the
actual answer at build time it still asks the kernel (``tc.kernel_qdiscs`` tries
each qdisc in a scratch namespace).
"""

from __future__ import annotations

import functools
import gzip
import os
import platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from fidelnet.kernel import procfs

__all__ = [
    "Feature",
    "Presence",
    "cgroup_controllers",
    "feature",
    "kernel_config",
    "read_int",
]

Presence = Literal["builtin", "loaded", "module", "missing", "unknown"]


@dataclass(frozen=True)
class Feature:
    """One kernel feature's presence and where that was read."""

    presence: Presence
    source: str

    @property
    def usable(self) -> bool | None:
        """True when fidelnet can use it now or the kernel loads it on first use,
        False when it cannot be had without another kernel, None when unknown."""
        if self.presence == "unknown":
            return None
        return self.presence != "missing"


@functools.cache
def kernel_config(release: str | None = None) -> Mapping[str, str] | None:
    """The running kernel's build configuration (``CONFIG_X`` -> ``y``/``m``/value,
    ``n`` for ``# CONFIG_X is not set``), or None when the kernel does not publish it."""
    rel = release or platform.release()
    for path, opener in (
        ("/proc/config.gz", gzip.open),
        (f"/boot/config-{rel}", open),
    ):
        try:
            with opener(path, "rt", encoding="utf-8", errors="replace") as f:
                return _parse_config(f.read())
        except OSError:
            continue
    return None


def _parse_config(text: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("CONFIG_") and "=" in line:
            key, _, value = line.partition("=")
            config[key] = value.strip().strip('"')
        elif line.startswith("# CONFIG_") and line.endswith(" is not set"):
            config[line[2:].split()[0]] = "n"
    return config


def _module_lists(base: str) -> tuple[str | None, str | None]:
    texts: list[str | None] = []
    for name in ("modules.builtin", "modules.dep"):
        try:
            with open(os.path.join(base, name), encoding="utf-8") as f:
                texts.append(f.read())
        except OSError:
            texts.append(None)
    return texts[0], texts[1]


def _listed(text: str, module: str) -> bool:
    """Whether a ``modules.builtin``/``modules.dep`` text lists ``module`` (its file
    ``.../<module>.ko`` with any compression suffix; ``-`` and ``_`` are the same)."""
    want = module.replace("-", "_")
    for line in text.splitlines():
        path = line.split(":", 1)[0]
        stem = os.path.basename(path).split(".ko", 1)[0]
        if stem.replace("-", "_") == want:
            return True
    return False


def feature(
    config_key: str,
    module: str,
    *,
    config: Callable[[str], Mapping[str, str] | None] | None = None,
    release: str | None = None,
    sys_module: str = "/sys/module",
    proc_modules: str | None = None,
    lib_modules: str = "/lib/modules",
) -> Feature:
    """The presence of the feature built by ``config_key`` as module ``module``.

    ``config`` (a release -> its configuration, or None) defaults to
    :func:`kernel_config` and ``proc_modules`` (the text of ``/proc/modules``) to this
    machine's; the keywords let tests use fake ones."""
    rel = release or platform.release()
    cfg = (config or kernel_config)(rel)
    mod = module.replace("-", "_")
    loaded = procfs.loaded_modules() if proc_modules is None else proc_modules
    if os.path.isdir(os.path.join(sys_module, mod)) or f"\n{mod} " in "\n" + loaded:
        if cfg is not None and cfg.get(config_key) == "y":
            return Feature("builtin", f"{config_key}=y")
        return Feature("loaded", f"module {mod} loaded")
    value = cfg.get(config_key) if cfg is not None else None
    if value == "y":
        return Feature("builtin", f"{config_key}=y")
    where = os.path.join(lib_modules, rel)
    builtin, dep = _module_lists(where)
    if builtin is not None and _listed(builtin, mod):
        return Feature("builtin", f"{mod} in modules.builtin")
    if dep is not None and _listed(dep, mod):
        return Feature("module", f"{mod}.ko installed, not loaded")
    if value == "n":
        return Feature("missing", f"{config_key} is not set")
    if value == "m":
        return Feature("missing", f"{config_key}=m but {mod}.ko is not in {where}")
    if cfg is not None and dep is not None:
        return Feature("missing", f"no {config_key} and no {mod}.ko")
    if cfg is not None:
        return Feature("missing", f"{config_key} is not in the kernel configuration")
    return Feature("unknown", "no kernel configuration and no module lists to read")


def read_int(path: str) -> int | None:
    """An integer file (a sysctl under /proc/sys), or None when unreadable."""
    try:
        with open(path, encoding="ascii") as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def cgroup_controllers(mountinfo: str = "/proc/self/mountinfo") -> dict[str, str]:
    """Every cgroup controller this process can use and where: ``v2`` (enabled at the
    unified root) or ``v1`` (a v1 hierarchy of its own), v2 preferred."""
    found: dict[str, str] = {}
    unified: str | None = None
    try:
        with open(mountinfo, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = right.split()
        if len(fields) < 3:
            continue
        fstype, opts = fields[0], fields[2]
        if fstype == "cgroup2" and unified is None:
            unified = left.split()[4]
        elif fstype == "cgroup":
            for opt in opts.split(","):
                if opt in _V1_CONTROLLERS:
                    found.setdefault(opt, "v1")
    if unified is not None:
        try:
            with open(os.path.join(unified, "cgroup.controllers"), encoding="ascii") as f:
                for ctl in f.read().split():
                    found[ctl] = "v2"
        except OSError:
            pass
    return found


_V1_CONTROLLERS = frozenset(
    {
        "blkio",
        "cpu",
        "cpuacct",
        "cpuset",
        "devices",
        "freezer",
        "hugetlb",
        "memory",
        "net_cls",
        "net_prio",
        "perf_event",
        "pids",
        "rdma",
        "misc",
    }
)
