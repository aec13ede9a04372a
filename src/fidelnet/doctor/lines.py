"""``fidelnet doctor``'s lines: one per subject, from :class:`Facts`, with no I/O."""

from __future__ import annotations

import os
from dataclasses import dataclass

from fidelnet.doctor.facts import FEATURES, PROFILE_OLD_DAYS, Facts, Status
from fidelnet.kernel.features import Feature

__all__ = ["Line", "as_dict", "diagnose", "exit_code"]


@dataclass(frozen=True)
class Line:
    """One subject: its status, what fidelnet will use, what was found, the fix."""

    subject: str
    status: Status
    uses: str
    found: str
    fix: str = ""
    essential: bool = False  # without it fidelnet cannot build a network here


def _feature(f: Facts, key: str) -> Feature:
    return f.features.get(key, Feature("unknown", "not probed"))


def _kernel_fix(f: Facts, key: str) -> str:
    config, module = FEATURES[key]
    feat = _feature(f, key)
    if feat.presence == "module":
        return f"modprobe {module}"
    return f"a kernel built with {config} (or the package holding {module}.ko)"


def _base(f: Facts) -> list[Line]:
    lines = [
        Line(
            "privileges",
            "ok" if f.root else "missing",
            "root (namespaces, interfaces, qdiscs, cgroups)",
            "uid 0" if f.root else f"uid {os.getuid()}",
            "" if f.root else "run fidelnet with sudo (doctor itself needs no root)",
            essential=True,
        )
    ]
    for key, uses in (
        ("netns", "a namespace per node, one per run for its switches"),
        ("veth", "a veth pair per link"),
    ):
        feat = _feature(f, key)
        lines.append(
            Line(
                key,
                "missing" if feat.usable is False else "ok" if feat.usable else "unknown",
                uses,
                feat.source,
                _kernel_fix(f, key) if feat.usable is False else "",
                essential=True,
            )
        )
    exe = f.binaries.get("fidelnet-exec")
    lines.append(
        Line(
            "fidelnet-exec",
            "ok" if exe else "missing",
            "the launcher of every node process",
            exe or "not found",
            "" if exe else "make install (or FIDELNET_EXEC=<cargo build --release -p fnexec>)",
            essential=True,
        )
    )
    ctl = "; ".join(
        f"{v}: " + " ".join(sorted(c for c, w in f.cgroups.items() if w == v))
        for v in ("v2", "v1")
        if v in f.cgroups.values()
    )
    lines.append(
        Line(
            "cgroups",
            "ok" if f.cgroup_v2 else "missing",
            "v2 to track and end each node's processes",
            f"v2 at {f.cgroup_v2}; controllers {ctl or 'none'}"
            if f.cgroup_v2
            else f"no cgroup v2 mount; controllers {ctl or 'none'}",
            "" if f.cgroup_v2 else "mount cgroup2 (mount -t cgroup2 none /sys/fs/cgroup/unified)",
            essential=True,
        )
    )
    return lines


def _cpu(f: Facts) -> list[Line]:
    cpu, cpuset = f.cgroups.get("cpu"), f.cgroups.get("cpuset")
    if cpu and cpuset:
        status: Status = "ok"
        fix = ""
    else:
        status = "missing"
        absent = " and ".join(c for c, v in (("cpu", cpu), ("cpuset", cpuset)) if not v)
        fix = f"enable the {absent} controller (v2: cgroup.subtree_control; or mount it in v1)"
    lines = [
        Line(
            "cpu limits",
            status,
            f"cpu= in {cpu or 'nothing'} cpu, cores= in {cpuset or 'nothing'} cpuset",
            f"cpu {cpu or 'absent'}, cpuset {cpuset or 'absent'}",
            fix,
        )
    ]
    budget = (
        "unlimited"
        if f.rt_runtime_us == -1
        else f"{f.rt_runtime_us / f.rt_period_us:.0%} of each period"
        if f.rt_runtime_us is not None and f.rt_period_us
        else "unreadable"
    )
    found = f"RT budget {budget}; " + (
        "v1 cpu.rt_runtime_us" if f.rt_group_file else "no v1 cpu.rt_runtime_us"
    )
    rt_feat = _feature(f, "rt_group")
    if f.rt_group_file:
        lines.append(Line("real-time", "ok", "sched='rt' nodes, an RT budget each", found))
    else:
        lines.append(
            Line(
                "real-time",
                "missing",
                "sched='rt' nodes refused (sched='cfs' works)",
                f"{found}; {rt_feat.source}",
                "a kernel with CONFIG_RT_GROUP_SCHED and the cpu controller mounted in v1",
            )
        )
    return lines


def _links(f: Facts) -> list[Line]:
    linkd = f.binaries.get("fidelnet-linkd")
    tun = _feature(f, "tun")
    engine_ok = bool(linkd) and tun.usable is not False
    lines = [
        Line(
            "link engine",
            "ok" if engine_ok else "missing",
            "fidelnet-linkd where tc cannot shape, backend: engine",
            f"{linkd or 'fidelnet-linkd not found'}; {tun.source}",
            ""
            if engine_ok
            else "make install (or FIDELNET_LINKD=<cargo build --release -p linkd>)"
            if not linkd
            else _kernel_fix(f, "tun"),
        )
    ]
    for key, what, qdisc in (
        ("netem", "delay, jitter, loss", "netem"),
        ("htb", "rate limits (bw)", "htb"),
    ):
        feat = _feature(f, key)
        if feat.usable:
            lines.append(Line(key, "ok", f"{what}: tc {qdisc} on the veth", feat.source))
        elif engine_ok:
            lines.append(
                Line(
                    key,
                    "fallback" if feat.usable is False else "unknown",
                    f"{what}: the link engine",
                    feat.source,
                    _kernel_fix(f, key) if feat.usable is False else "",
                )
            )
        else:
            lines.append(
                Line(
                    key,
                    "missing" if feat.usable is False else "unknown",
                    f"{what}: refused (neither tc {qdisc} nor the link engine)",
                    feat.source,
                    _kernel_fix(f, key) + "; or make install for the link engine",
                )
            )
    lines.append(
        Line(
            "AF_XDP",
            "ok" if f.af_xdp_missing is None else "fallback",
            "AF_XDP endpoints for shaped engine links"
            if f.af_xdp_missing is None
            else "TAP endpoints only for engine links",
            "an AF_XDP socket opened" if f.af_xdp_missing is None else f.af_xdp_missing,
            "" if f.af_xdp_missing is None else "a kernel with CONFIG_XDP_SOCKETS; run as root",
        )
    )
    return lines


def _switching(f: Facts) -> list[Line]:
    lines: list[Line] = []
    bridge = _feature(f, "bridge")
    if f.bpf_switch_missing is None:
        lines.append(Line("switches", "ok", "the BPF learning switch", "bpftool and its program"))
    else:
        lines.append(
            Line(
                "switches",
                "fallback" if bridge.usable is not False else "missing",
                "Linux bridges" if bridge.usable is not False else "none: switches refused",
                f"BPF switch: {f.bpf_switch_missing}; bridge: {bridge.source}",
                "make install (bpftool, clang for the BPF objects)",
            )
        )
    bpftool = f.tools.get("bpftool")
    bpf = _feature(f, "bpf")
    if f.xdp_object and bpftool and bpf.usable is not False:
        lines.append(
            Line(
                "XDP",
                "ok",
                "native XDP (driver mode) on routers' veths for fastpath='xdp'; never generic",
                f"{f.xdp_object}; {bpf.source}",
            )
        )
    else:
        why = [
            w
            for w, bad in (
                ("no fastpath.bpf.o", not f.xdp_object),
                ("no bpftool", not bpftool),
                (bpf.source, bpf.usable is False),
            )
            if bad
        ]
        lines.append(
            Line(
                "XDP",
                "missing",
                "fastpath='xdp' refused (routers use the kernel's stack)",
                "; ".join(why),
                "make install (builds fastpath.bpf.o with clang, installs bpftool)",
            )
        )
    vlan = _feature(f, "8021q")
    lines.append(
        Line(
            "8021q",
            "ok" if vlan.usable else "missing" if vlan.usable is False else "unknown",
            "VLAN interfaces in nodes (Mininet's VLANHost)",
            vlan.source,
            _kernel_fix(f, "8021q") if vlan.usable is False or vlan.presence == "module" else "",
        )
    )
    ovs_mod = _feature(f, "openvswitch")
    if f.ovs_missing is not None:
        lines.append(
            Line(
                "Open vSwitch",
                "missing",
                "datapath ovs refused (bpf and bridge work)",
                f.ovs_missing,
                "apt-get install openvswitch-switch openvswitch-testcontroller",
            )
        )
    elif f.ovs_datapath == "system":
        lines.append(Line("Open vSwitch", "ok", "the kernel's datapath (system)", ovs_mod.source))
    else:
        lines.append(
            Line(
                "Open vSwitch",
                "fallback",
                "the userspace datapath (netdev): slower, more CPU",
                f"openvswitch not loaded: {ovs_mod.source}",
                _kernel_fix(f, "openvswitch"),
            )
        )
    return lines


def _vm(f: Facts) -> Line:
    qemu = f.tools.get("qemu-system-x86_64")
    if not qemu:
        return Line(
            "VM nodes",
            "missing",
            "backend qemu refused",
            "qemu-system-x86_64 not found",
            "apt-get install qemu-system-x86 (make install)",
        )
    if not f.dev_kvm:
        return Line(
            "VM nodes",
            "fallback",
            "TCG (emulated, many times slower)",
            "/dev/kvm missing or not usable",
            "enable virtualisation (VT-x/AMD-V, nested in a VM) and load kvm_intel/kvm_amd",
        )
    if f.kvm_probe is None:
        image = f.vm_image or "no guest image yet (fidelnet vm image)"
        return Line(
            "VM nodes",
            "unknown",
            "KVM if a guest boots with it (tried at the first VM node), else TCG",
            f"/dev/kvm usable; {image}",
        )
    works, why = f.kvm_probe
    return Line(
        "VM nodes",
        "ok" if works else "fallback",
        "KVM" if works else "TCG (emulated, many times slower)",
        f"last probe: {why}",
        "" if works else "check /dev/kvm permissions and nested virtualisation",
    )


def _containers(f: Facts) -> Line:
    crun = f.tools.get("crun")
    if not crun:
        return Line(
            "container nodes",
            "missing",
            "backend container refused",
            "crun not found",
            "apt-get install crun (make install)",
        )
    return Line(
        "container nodes",
        "ok",
        "crun with an OCI bundle in each node's namespace, no daemon (docs/containers.md)",
        crun,
    )


def _profile(f: Facts) -> Line:
    p = f.profile
    if not p.found or p.problem:
        return Line(
            "calibration",
            "fallback",
            "built-in bounds only, no machine profile",
            p.problem or f"{p.path}: none",
            "fidelnet calibrate (a few minutes, as root)",
        )
    if p.measured_at is None:
        return Line("calibration", "ok", "this machine's profile", p.path)
    days = (f.now - p.measured_at).total_seconds() / 86400
    old = days > PROFILE_OLD_DAYS
    return Line(
        "calibration",
        "fallback" if old else "ok",
        "this machine's profile (capacity checks, verdicts)",
        f"{p.path}, measured {days:.0f} days ago ({p.measured_at:%Y-%m-%d})",
        f"fidelnet calibrate (older than {PROFILE_OLD_DAYS} days)" if old else "",
    )


_TOOL_USE = {
    "tc": ("scripts' own tc commands (fidelnet uses netlink)", "iproute2"),
    "iperf3": ("TCP measurements, mn --test iperf", "iperf3"),
    "fidelnet-pktgen": ("UDP measurements, calibration", "make install"),
    "chromium": ("report pages checked headless (tests)", "chromium"),
}


def _tools(f: Facts) -> list[Line]:
    lines = []
    for name, (uses, package) in _TOOL_USE.items():
        path = f.binaries.get(name) if name.startswith("fidelnet-") else f.tools.get(name)
        fix = package if package.startswith("make") else f"apt-get install {package}"
        lines.append(
            Line(name, "ok" if path else "missing", uses, path or "not found", "" if path else fix)
        )
    mn = f.tools.get("mn")
    ok = bool(mn and f.mininet_python)
    lines.append(
        Line(
            "mininet",
            "ok" if ok else "missing",
            "stock Mininet, the benchmarks' peer",
            f"{mn or 'mn not found'}; {f.mininet_python or 'no mininet module'}",
            "" if ok else "apt-get install mininet bridge-utils",
        )
    )
    return lines


def diagnose(f: Facts) -> list[Line]:
    """One line per subject, essentials first."""
    return [
        *_base(f),
        *_cpu(f),
        *_links(f),
        *_switching(f),
        _vm(f),
        _containers(f),
        _profile(f),
        *_tools(f),
    ]


def exit_code(lines: list[Line]) -> int:
    """0 when fidelnet can build networks here, 1 when an essential line is missing."""
    return 1 if any(line.essential and line.status == "missing" for line in lines) else 0


def as_dict(lines: list[Line], code: int) -> dict[str, object]:
    """The ``--json`` document."""
    return {
        "exit_code": code,
        "can_run": code == 0,
        "lines": [
            {
                "subject": ln.subject,
                "status": ln.status,
                "uses": ln.uses,
                "found": ln.found,
                "fix": ln.fix,
                "essential": ln.essential,
            }
            for ln in lines
        ],
    }
