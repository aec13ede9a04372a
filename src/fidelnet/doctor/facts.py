"""What ``fidelnet doctor`` reads from the machine (:func:`gather`), as plain data.

:func:`gather` asks the probes fidelnet itself decides by (``kernel.ovs.datapath_type``,
``kernel.xsk.af_xdp_missing``, ``kernel.l2switch.missing``, ``kernel.cgroups.detect``,
``vm.qemu.kvm_known``, the binaries' own finders, ``fidelity.profile.load``) and
reads the kernel's configuration and module lists (:mod:`fidelnet.kernel.features`).
It creates no kernel object, loads no module and writes no file; the one socket it
opens (the AF_XDP check) is closed at once.
"""

from __future__ import annotations

import datetime as _dt
import os
import platform
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from fidelnet.kernel.features import Feature

__all__ = [
    "BINARIES",
    "FEATURES",
    "PROFILE_OLD_DAYS",
    "TOOLS",
    "Facts",
    "ProfileFacts",
    "Status",
    "gather",
]

Status = Literal["ok", "fallback", "missing", "unknown"]
"""``ok``: fidelnet uses the preferred way; ``fallback``: it uses a substitute (the
line says which and what it costs); ``missing``: what needs it is refused;
``unknown``: could not be read (usually: not root)."""

FEATURES: dict[str, tuple[str, str]] = {
    "netns": ("CONFIG_NET_NS", "netns"),
    "veth": ("CONFIG_VETH", "veth"),
    "bridge": ("CONFIG_BRIDGE", "bridge"),
    "tun": ("CONFIG_TUN", "tun"),
    "netem": ("CONFIG_NET_SCH_NETEM", "sch_netem"),
    "htb": ("CONFIG_NET_SCH_HTB", "sch_htb"),
    "cls_bpf": ("CONFIG_NET_CLS_BPF", "cls_bpf"),
    "bpf": ("CONFIG_BPF_SYSCALL", "bpf"),
    "8021q": ("CONFIG_VLAN_8021Q", "8021q"),
    "openvswitch": ("CONFIG_OPENVSWITCH", "openvswitch"),
    "rt_group": ("CONFIG_RT_GROUP_SCHED", "rt_group_sched"),
}
"""Subject -> (kernel configuration key, module name)."""

TOOLS = (
    "tc",
    "iperf3",
    "bpftool",
    "ovs-vswitchd",
    "qemu-system-x86_64",
    "crun",
    "chromium",
    "mn",
)
"""Programs looked up on PATH."""

BINARIES = ("fidelnet-exec", "fidelnet-linkd", "fidelnet-pktgen")
"""fidelnet's own native programs (``make install`` builds them)."""

PROFILE_OLD_DAYS = 90
"""A profile older than this is flagged: the machine's load and firmware drift."""


@dataclass(frozen=True)
class ProfileFacts:
    """The calibration profile of this machine and fidelnet version."""

    path: str
    found: bool
    measured_at: _dt.datetime | None = None
    problem: str = ""  # why it is not used (fidelity.profile.load's reason)


@dataclass(frozen=True)
class Facts:
    """Everything :func:`diagnose` needs, read from the machine by :func:`gather`."""

    root: bool
    release: str
    features: Mapping[str, Feature]
    binaries: Mapping[str, str | None]
    tools: Mapping[str, str | None]
    cgroup_v2: str | None  # the unified hierarchy's mount point
    cgroups: Mapping[str, str]  # controller -> "v1" | "v2"
    rt_runtime_us: int | None
    rt_period_us: int | None
    rt_group_file: bool  # the v1 cpu hierarchy has cpu.rt_runtime_us
    af_xdp_missing: str | None
    bpf_switch_missing: str | None
    xdp_object: str | None
    ovs_missing: str | None
    ovs_datapath: str  # "system" | "netdev", as kernel.ovs.datapath_type decides
    dev_kvm: bool
    kvm_probe: tuple[bool, str] | None  # the last guest boot with KVM, if any
    vm_image: str | None
    mininet_python: str | None
    profile: ProfileFacts
    now: _dt.datetime = field(default_factory=lambda: _dt.datetime.now(_dt.timezone.utc))


def _found(finder: Callable[[], str]) -> str | None:
    try:
        return finder()
    except Exception:  # each finder raises its own error naming what is missing
        return None


def _profile_facts() -> ProfileFacts:
    from fidelnet.fidelity import profile as prof

    path = prof.profile_path()
    try:
        loaded, why = prof.load()
        if loaded is None:
            return ProfileFacts(str(path), path.exists(), problem=why)
        try:
            at = _dt.datetime.fromisoformat(loaded.measured_at)
        except ValueError:
            at = _dt.datetime.fromtimestamp(path.stat().st_mtime, _dt.timezone.utc)
    except OSError as exc:  # a directory this user may not read
        return ProfileFacts(str(path), False, problem=f"{path}: unreadable ({exc.strerror})")
    if at.tzinfo is None:
        at = at.replace(tzinfo=_dt.timezone.utc)
    return ProfileFacts(str(path), True, at)


def _which(tool: str) -> str | None:
    found = shutil.which(tool)
    if found is None and tool == "chromium":  # some distributions' name
        found = shutil.which("chromium-browser")
    return found


def _kvm() -> tuple[tuple[bool, str] | None, str | None]:
    from fidelnet.vm import image, qemu

    img = image.find()
    if img is None:
        return None, None
    try:
        boot = qemu.Boot(str(img.kernel), str(img.initrd), img.digest)
        return qemu.kvm_known(boot, qemu.find_qemu(), image.CACHE), str(img.dir)
    except Exception:  # no QEMU: the VM line says so
        return None, str(img.dir)


def gather() -> Facts:
    """Read this machine (read-only; see the module doc)."""
    from fidelnet.bench.peer import mininet_python
    from fidelnet.kernel import cgroups, features, l2switch, ovs, xdp, xsk
    from fidelnet.kernel.launcher import find_exec
    from fidelnet.links.engine import find_linkd
    from fidelnet.measure.pktgen import find_pktgen

    release = platform.release()
    feats = {k: features.feature(cfg, mod, release=release) for k, (cfg, mod) in FEATURES.items()}
    if os.path.exists("/proc/self/ns/net"):  # the kernel says so itself
        feats["netns"] = Feature("builtin", "/proc/self/ns/net exists")
    fs = cgroups.detect()
    kvm_probe, vm_image = _kvm()
    rt_file = fs.v1_cpu is not None and os.path.exists(os.path.join(fs.v1_cpu, "cpu.rt_runtime_us"))
    return Facts(
        root=os.geteuid() == 0,
        release=release,
        features=feats,
        binaries={
            "fidelnet-exec": _found(find_exec),
            "fidelnet-linkd": _found(find_linkd),
            "fidelnet-pktgen": _found(find_pktgen),
        },
        tools={t: _which(t) for t in TOOLS},
        cgroup_v2=fs.unified,
        cgroups=features.cgroup_controllers(),
        rt_runtime_us=features.read_int("/proc/sys/kernel/sched_rt_runtime_us"),
        rt_period_us=features.read_int("/proc/sys/kernel/sched_rt_period_us"),
        rt_group_file=rt_file,
        af_xdp_missing=xsk.af_xdp_missing(),
        bpf_switch_missing=l2switch.missing(),
        xdp_object=_found(xdp.find_object),
        ovs_missing=ovs.missing(),
        ovs_datapath=ovs.datapath_type(),
        dev_kvm=os.access("/dev/kvm", os.R_OK | os.W_OK),
        kvm_probe=kvm_probe,
        vm_image=vm_image,
        mininet_python=mininet_python() if shutil.which("mn") else None,
        profile=_profile_facts(),
    )
