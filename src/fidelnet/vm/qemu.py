"""QEMU for VM nodes: the command line of one guest, and the choice of accelerator.

One ``qemu-system-x86_64`` per VM node, started inside the node's network namespace
(so the TAP devices it makes for its NICs are there, beside the ends of the node's
links). The guest boots the kernel directly (:mod:`fidelnet.vm.image`), sees the
host's root file system read-only over 9p (``mount_tag=hostroot``), and talks to the
host over one virtio-serial port (``fidelnet.agent``) whose host side is a Unix
socket in the VM's run directory; QMP and the serial console are there too.

KVM is used when a guest actually runs with it. ``/dev/kvm`` can exist and still be
unable to run an ordinary guest (this project's CI machine offers KVM only through
PVM), so ``auto`` boots the image once with KVM and looks for the probe's word on the
console; the answer is cached per kernel image and QEMU version. Otherwise TCG, with
a warning: every guest instruction is emulated.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fidelnet.errors import UnsupportedError
from fidelnet.vm.image import CACHE, PORT, PROBE_WORD

__all__ = [
    "HOTPLUG_SLOTS",
    "QEMU",
    "Boot",
    "Guest",
    "argv",
    "choose_accel",
    "disk_format",
    "find_qemu",
    "hotplug_nic",
    "kvm_known",
    "qmp",
    "vcpu_threads",
]

log = logging.getLogger("fidelnet")

HOTPLUG_SLOTS = 4
"""NICs a VM can get after it booted (links added at runtime): q35 hot-plugs a PCIe
device only into an empty root port made at start."""

QEMU = "qemu-system-x86_64"
_PROBE_TIMEOUT_S = 20.0
_TOLD_TCG = False


@dataclass(frozen=True)
class Boot:
    """What to boot: a kernel and an initramfs, and a name for them in provenance."""

    kernel: str
    initrd: str
    digest: str
    modules: str | None = None  # the kernel's modules directory, shared into the guest


@dataclass(frozen=True)
class Guest:
    """One VM's machine and its files (all in ``dir``, the VM's run directory)."""

    name: str
    dir: str
    cpus: int
    memory_mb: int
    accel: str  # "kvm" or "tcg"
    boot: Boot
    cmdline: str
    agent_path: str  # fidelnet-vm as the guest sees it (the host's root, shared)
    nics: tuple[tuple[str, str], ...]  # (TAP name in the node's namespace, MAC)
    disk: str | None = None  # a disk image whose root the guest runs on (never written)

    @property
    def agent_sock(self) -> str:
        return os.path.join(self.dir, "agent.sock")

    @property
    def mux_sock(self) -> str:
        return os.path.join(self.dir, "mux.sock")

    @property
    def qmp_sock(self) -> str:
        return os.path.join(self.dir, "qmp.sock")

    @property
    def console(self) -> str:
        return os.path.join(self.dir, "console.log")


def find_qemu() -> str:
    path = shutil.which(QEMU)
    if path is None:
        raise UnsupportedError(
            QEMU, "VM nodes (backend qemu)", "`make install` installs qemu-system-x86"
        )
    return path


def argv(g: Guest) -> list[str]:
    """The QEMU command line of guest ``g`` (no shell ever parses it)."""
    append = f"console=ttyS0 quiet panic=-1 fidelnet.agent={g.agent_path}"
    if g.disk:
        append += " fidelnet.disk"
    if g.cmdline:
        append += " " + g.cmdline
    out = [
        find_qemu(),
        # Named threads ("CPU 0/TCG"): what top and ps show, and what pinning acts on.
        "-name", f"guest=fidelnet-{g.name},debug-threads=on",
        "-machine", f"q35,accel={g.accel}",
        "-cpu", "host" if g.accel == "kvm" else "max",
        "-smp", str(g.cpus),
        "-m", str(g.memory_mb),
        "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
        "-chardev", f"file,id=console,path={g.console}",
        "-serial", "chardev:console",
        "-kernel", g.boot.kernel,
        "-initrd", g.boot.initrd,
        "-append", append,
        "-fsdev", "local,id=hostroot,path=/,security_model=none,readonly=on,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=hostroot,mount_tag=hostroot",
        "-fsdev", "local,id=hosttmp,path=/tmp,security_model=none,multidevs=remap",
        "-device", "virtio-9p-pci,fsdev=hosttmp,mount_tag=hosttmp",
        *(
            [
                "-fsdev", f"local,id=modules,path={g.boot.modules},security_model=none,readonly=on",
                "-device", "virtio-9p-pci,fsdev=modules,mount_tag=modules",
            ]
            if g.boot.modules
            else []
        ),
        "-device", "virtio-serial-pci,id=vser",
        "-chardev", f"socket,id=agent,path={g.agent_sock},server=on,wait=off",
        "-device", f"virtserialport,bus=vser.0,chardev=agent,name={PORT}",
        "-qmp", f"unix:{g.qmp_sock},server=on,wait=off",
    ]  # fmt: skip
    if g.disk:
        # snapshot=on: the guest's writes go to a temporary layer (in TMPDIR, the VM's
        # run directory), never to the image. Commas in a QEMU option value are doubled.
        path = g.disk.replace(",", ",,")
        out += [
            "-drive", f"file={path},if=none,id=disk0,format={disk_format(g.disk)},snapshot=on",
            "-device", "virtio-blk-pci,drive=disk0",
        ]  # fmt: skip
    for i in range(HOTPLUG_SLOTS):  # empty PCIe ports for NICs added after boot
        out += ["-device", f"pcie-root-port,id=hp{i},chassis={i + 1}"]
    for i, (tap, mac) in enumerate(g.nics):
        out += [
            "-netdev", f"tap,id=n{i},ifname={tap},script=no,downscript=no",
            # No checksum offload either way: every frame leaves the guest complete,
            # as the engine's endpoints (AF_XDP, TAP) need.
            "-device", f"virtio-net-pci,netdev=n{i},mac={mac},csum=off,guest_csum=off",
        ]  # fmt: skip
    return out


def disk_format(path: str) -> str:
    """``qcow2`` when the file starts with qcow2's magic, else ``raw``."""
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError:
        return "raw"
    return "qcow2" if magic == b"QFI\xfb" else "raw"


def qmp(
    sock: str, command: str, arguments: dict[str, Any] | None = None, timeout: float = 10.0
) -> Any:
    """One QMP command on the VM's monitor socket (capabilities negotiated first);
    returns its ``return`` value."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(sock)
        f = s.makefile("rwb")
        json.loads(f.readline())  # the greeting
        for cmd, args in (("qmp_capabilities", None), (command, arguments)):
            msg: dict[str, Any] = {"execute": cmd}
            if args:
                msg["arguments"] = args
            f.write(json.dumps(msg).encode() + b"\n")
            f.flush()
            while True:
                reply = json.loads(f.readline())
                if "event" in reply:
                    continue
                if "error" in reply:
                    raise OSError(f"QMP {cmd}: {reply['error'].get('desc', reply['error'])}")
                break
        return reply["return"]


def hotplug_nic(qmp_sock: str, slot: int, tap: str, mac: str) -> None:
    """A new NIC in root port ``slot``: a TAP ``tap`` (QEMU makes it, in its own
    namespace) and a virtio-net device with ``mac``, offloads off as at boot."""
    nid = f"hpn{slot}"
    qmp(qmp_sock, "netdev_add",
        {"type": "tap", "id": nid, "ifname": tap, "script": "no", "downscript": "no"})  # fmt: skip
    qmp(qmp_sock, "device_add", {
        "driver": "virtio-net-pci", "id": f"hpd{slot}", "netdev": nid, "mac": mac,
        "bus": f"hp{slot}", "csum": False, "guest_csum": False,
    })  # fmt: skip


def vcpu_threads(qmp_sock: str) -> list[int]:
    """The host thread of each vCPU, in vCPU order."""
    cpus = qmp(qmp_sock, "query-cpus-fast")
    return [int(c["thread-id"]) for c in sorted(cpus, key=lambda c: c["cpu-index"])]


def choose_accel(wanted: str, boot: Boot, cache: Path = CACHE) -> str:
    """``kvm`` or ``tcg`` for ``wanted`` (``auto``, ``kvm``, ``tcg``): ``kvm`` only
    when a guest boots with it here (probed once per image and QEMU)."""
    global _TOLD_TCG
    if wanted == "tcg":
        return "tcg"
    works, why = _kvm_works(boot, cache)
    if works:
        return "kvm"
    if wanted == "kvm":
        raise UnsupportedError(
            f"KVM ({why})", "accel kvm", "use accel: auto or tcg (emulated, much slower)"
        )
    if not _TOLD_TCG:
        _TOLD_TCG = True
        log.warning(
            "VM nodes run emulated (TCG): %s; guests run many times slower than with KVM "
            "(boot about 5 s here instead of 1 s), and their timing says little about a "
            "real machine's",
            why,
        )
    return "tcg"


def kvm_known(boot: Boot, qemu: str, cache: Path = CACHE) -> tuple[bool, str] | None:
    """What the last KVM probe found for ``boot`` with this ``qemu`` binary (whether a
    guest booted, and why), or None when it never ran for them. Reads a file only."""
    key = f"{boot.digest}:{os.stat(qemu).st_mtime_ns}"
    try:
        known = json.loads((cache / "accel.json").read_text())
        if known.get("key") == key:
            return bool(known["kvm"]), str(known["why"])
    except (OSError, ValueError, KeyError, AttributeError):
        pass
    return None


def _kvm_works(boot: Boot, cache: Path) -> tuple[bool, str]:
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is missing or not usable"
    qemu = find_qemu()
    known = kvm_known(boot, qemu, cache)
    if known is not None:
        return known
    key = f"{boot.digest}:{os.stat(qemu).st_mtime_ns}"
    memo = cache / "accel.json"
    works, why = _probe_kvm(qemu, boot)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        memo.write_text(json.dumps({"key": key, "kvm": works, "why": why}))
    except OSError:
        pass
    return works, why


def _probe_kvm(qemu: str, boot: Boot) -> tuple[bool, str]:
    """Boot the image with KVM until its /init prints the probe word (then it powers
    off) or the time is up."""
    with tempfile.TemporaryDirectory(prefix="fidelnet-kvm-probe-") as tmp:
        console = os.path.join(tmp, "console.log")
        cmd = [
            qemu, "-machine", "q35,accel=kvm", "-cpu", "host", "-m", "128",
            "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
            "-chardev", f"file,id=console,path={console}", "-serial", "chardev:console",
            "-kernel", boot.kernel, "-initrd", boot.initrd,
            "-append", "console=ttyS0 panic=-1 fidelnet.probe",
        ]  # fmt: skip
        p = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + _PROBE_TIMEOUT_S
        try:
            while time.monotonic() < deadline:
                if _has_word(console):
                    return True, "a guest booted with KVM"
                if p.poll() is not None:
                    err = (p.stderr.read() if p.stderr else b"").decode(errors="replace")
                    first = err.strip().splitlines()[0][:200] if err.strip() else "no message"
                    return False, f"QEMU with KVM stopped: {first}"
                time.sleep(0.1)
            return False, f"a guest with KVM did not boot within {_PROBE_TIMEOUT_S:.0f} s"
        finally:
            if p.poll() is None:
                p.kill()
            p.wait()
            if p.stderr:
                p.stderr.close()


def _has_word(console: str) -> bool:
    try:
        with open(console, "rb") as f:
            return PROBE_WORD.encode() in f.read()
    except OSError:
        return False
