"""The guest image of VM nodes: a Debian kernel and a small initramfs, built from
Debian packages (``fidelnet vm image``, or on first use), cached under
``/var/lib/fidelnet/vm/<content hash>/``.

No disk image: the guest boots the kernel directly, its initramfs loads the virtio
modules it needs, mounts the host's root file system read-only over 9p with a
private writable layer on top (overlayfs on tmpfs), and switches to it, so the guest
has the same programs as the host (``iperf3``, ``ping``, ``fidelnet-pktgen``, the
user's own). The guest kernel's own modules are shared read-only at
``/lib/modules``, so ``modprobe`` works in the guest. PID 1 there is the agent
(``fidelnet-vm agent``, :mod:`fidelnet.vm.agent`) on the virtio-serial port
``fidelnet.agent``.

What is taken from Debian: ``linux-image-amd64``'s kernel package (the vmlinuz and the
modules the initramfs needs, with their dependencies from ``modules.dep``) and
``busybox-static`` (the initramfs's only program), fetched with ``apt-get download``
(a package registry, as the machine allows) and unpacked with ``dpkg-deb``. The
initramfs is a newc cpio archive written here, gzip-compressed. The content hash of
kernel and initramfs names the image and goes into each result's provenance.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from fidelnet.errors import UnsupportedError

__all__ = ["CACHE", "MODULES", "Image", "build", "cpio_newc", "find", "init_script", "load_order"]

CACHE = Path(os.environ.get("FIDELNET_VM_CACHE", "/var/lib/fidelnet/vm"))
"""Where images are kept (``FIDELNET_VM_CACHE`` overrides, for tests)."""

MODULES = (
    "virtio_pci", "virtio_net", "virtio_console", "9pnet_virtio", "9p", "overlay",
    "virtio_blk", "crc32c_generic", "ext4",
)  # fmt: skip
"""Kernel modules the initramfs loads (with what they depend on), unless built in:
virtio, 9p and overlayfs for the host's root; virtio-blk and ext4 for a disk image."""

FORMAT = 3
"""The layout of the initramfs (/init, its modules): an image cached with another
is built again. 2: disk images (``fidelnet.disk``); 3: with crc32c for ext4."""

PORT = "fidelnet.agent"
"""The name of the agent's virtio-serial port (``/dev/virtio-ports/<name>``)."""

PROBE_WORD = "fidelnet-probe-ok"
"""What /init prints on the console, then powers off, when booted with
``fidelnet.probe`` (the accelerator probe, :mod:`fidelnet.vm.qemu`)."""

_BUSYBOX_APPLETS = (
    "sh", "mount", "umount", "mkdir", "insmod", "switch_root", "cat", "echo", "sleep",
    "ls", "poweroff", "mknod", "ln",
)  # fmt: skip


@dataclass(frozen=True)
class Image:
    """A built image: its directory, kernel, initramfs and content hash."""

    dir: Path
    kernel: Path
    initrd: Path
    digest: str
    kernel_package: str

    @property
    def modules(self) -> Path:
        """The guest kernel's modules (``<version>/`` inside), shared as ``modules``."""
        return self.dir / "modules"

    def provenance(self) -> dict[str, str]:
        return {"image": self.digest, "kernel_package": self.kernel_package}


def find(cache: Path = CACHE) -> Image | None:
    """The image last built in ``cache``, or None."""
    current = cache / "current.json"
    try:
        meta = json.loads(current.read_text())
        if meta.get("format") != FORMAT:
            return None
        d = cache / meta["digest"]
        img = Image(d, d / "vmlinuz", d / "initrd.img", meta["digest"], meta["kernel_package"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return img if img.kernel.is_file() and img.initrd.is_file() else None


def build(cache: Path = CACHE) -> Image:
    """Fetch the packages, build the initramfs, store both under their hash."""
    for tool in ("apt-get", "apt-cache", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise UnsupportedError(tool, "building the VM guest image", "run on Debian or Ubuntu")
    cache.mkdir(parents=True, exist_ok=True)
    kpkg = _kernel_package()
    with tempfile.TemporaryDirectory(dir=cache, prefix="build-") as tmp:
        work = Path(tmp)
        debs = _download(work, [kpkg, "busybox-static"])
        kdir, bdir = work / "kernel", work / "busybox"
        _unpack(debs[kpkg], kdir)
        _unpack(debs["busybox-static"], bdir)
        vmlinuz = next(iter(sorted((kdir / "boot").glob("vmlinuz-*"))), None)
        mods = next(iter(sorted((kdir / "lib" / "modules").iterdir())), None)
        if vmlinuz is None or mods is None:
            raise UnsupportedError(f"a kernel in {kpkg}", "the VM guest image", "check apt")
        # The package leaves modules.dep to its postinst: make it here, for this tree.
        dep = subprocess.run(
            [_depmod(), "-b", str(kdir), mods.name], capture_output=True, text=True, check=False
        )
        if dep.returncode != 0:
            raise UnsupportedError(
                f"depmod ({dep.stderr.strip()[-200:]})", "the VM guest image", "install kmod"
            )
        initrd = initramfs(bdir / "bin" / "busybox", mods)
        kernel = vmlinuz.read_bytes()
        digest = hashlib.sha256(kernel + initrd).hexdigest()[:16]
        dest = cache / digest
        dest.mkdir(exist_ok=True)
        (dest / "vmlinuz").write_bytes(kernel)
        (dest / "initrd.img").write_bytes(initrd)
        # Every module of the guest's kernel, shared read-only into the guest at
        # /lib/modules (the host's root has only the host kernel's).
        if not (dest / "modules" / mods.name).is_dir():
            shutil.copytree(mods, dest / "modules" / mods.name, symlinks=True)
        meta = {
            "digest": digest,
            "kernel_package": kpkg,
            "format": FORMAT,
            "modules": load_order(mods, MODULES),
        }
        (dest / "manifest.json").write_text(json.dumps(meta, indent=1))
        tmp_current = cache / "current.json.new"
        tmp_current.write_text(json.dumps(meta))
        os.replace(tmp_current, cache / "current.json")
    img = find(cache)
    assert img is not None
    return img


def _depmod() -> str:
    for c in (shutil.which("depmod"), "/usr/sbin/depmod", "/sbin/depmod"):
        if c and os.access(c, os.X_OK):
            return c
    raise UnsupportedError("depmod", "building the VM guest image", "apt-get install kmod")


def _kernel_package() -> str:
    p = subprocess.run(
        ["apt-cache", "depends", "linux-image-amd64"],
        capture_output=True,
        text=True,
        check=False,
    )
    m = re.search(r"Depends:\s*(linux-image-\S+)", p.stdout)
    if p.returncode != 0 or m is None:
        raise UnsupportedError(
            "the package linux-image-amd64 in apt's lists",
            "building the VM guest image",
            "run apt-get update, or give a kernel and initrd of your own",
        )
    return m.group(1)


def _download(work: Path, packages: list[str]) -> dict[str, Path]:
    p = subprocess.run(
        ["apt-get", "download", "-q", "-o", "APT::Sandbox::User=root", *packages],
        cwd=work,
        capture_output=True,
        text=True,
        check=False,
    )
    if p.returncode != 0:
        raise UnsupportedError(
            f"the packages {', '.join(packages)} ({(p.stderr or p.stdout).strip()[-300:]})",
            "building the VM guest image",
            "check that apt can reach its registry",
        )
    found: dict[str, Path] = {}
    for pkg in packages:
        debs = sorted(work.glob(f"{pkg}_*.deb"))
        if not debs:
            raise UnsupportedError(f"{pkg}'s .deb", "building the VM guest image", "check apt")
        found[pkg] = debs[-1]
    return found


def _unpack(deb: Path, into: Path) -> None:
    into.mkdir()
    subprocess.run(["dpkg-deb", "-x", str(deb), str(into)], check=True, capture_output=True)


def load_order(moddir: Path, wanted: tuple[str, ...]) -> list[str]:
    """The modules (paths relative to ``moddir``) to load for ``wanted``, each after
    what it depends on (``modules.dep``); built-in ones are skipped."""
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in (moddir / "modules.dep").read_text().splitlines():
        if ":" not in line:
            continue
        mod, rest = line.split(":", 1)
        deps[mod] = rest.split()
        by_name[_mod_name(mod)] = mod
    builtin = set()
    with_builtin = moddir / "modules.builtin"
    if with_builtin.is_file():
        builtin = {_mod_name(m) for m in with_builtin.read_text().split()}
    order: list[str] = []
    seen: set[str] = set()

    def visit(mod: str) -> None:
        if mod in seen:
            return
        seen.add(mod)
        for d in deps.get(mod, []):
            visit(d)
        order.append(mod)

    for name in wanted:
        key = name.replace("-", "_")
        if key in by_name:
            visit(by_name[key])
        elif key not in builtin:
            raise UnsupportedError(
                f"the kernel module {name}", "the VM guest image", "use a kernel that has it"
            )
    return order


def _mod_name(path: str) -> str:
    base = os.path.basename(path)
    return base.split(".ko")[0].replace("-", "_")


def init_script(modules: list[str]) -> str:
    """The initramfs's /init (busybox sh): modules, the host's root over 9p with a
    writable layer, then the agent as PID 1 of the new root."""
    loads = "\n".join(f"insmod /lib/modules/{os.path.basename(_plain(m))}" for m in modules)
    return f"""#!/bin/sh
# fidelnet VM node: generated by fidelnet.vm.image
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
agent=
disk=
root=
for word in $(cat /proc/cmdline); do
  case "$word" in
    fidelnet.agent=*) agent="${{word#fidelnet.agent=}}";;
    fidelnet.disk) disk=1;;
    fidelnet.root=*) root="${{word#fidelnet.root=}}";;
    fidelnet.probe) echo "{PROBE_WORD}" > /dev/console; poweroff -f;;
  esac
done
{loads}
# The agent's port by its name (no udev here to make /dev/virtio-ports/{PORT}),
# while /sys is still here.
port=
i=0
while [ -z "$port" ] && [ $i -lt 200 ]; do
  for p in /sys/class/virtio-ports/*; do
    [ "$(cat "$p/name" 2>/dev/null)" = "{PORT}" ] && port="/dev/${{p##*/}}"
  done
  [ -z "$port" ] && sleep 0.05
  i=$((i + 1))
done
mkdir -p /lower /upper /newroot
if [ -n "$disk" ]; then
  # A disk image (virtio-blk, its writes kept by QEMU): its first partition, or the
  # whole disk when it has none, unless fidelnet.root= names the device.
  i=0
  while [ ! -e /dev/vda ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
  if [ -z "$root" ]; then
    root=/dev/vda
    [ -e /dev/vda1 ] && root=/dev/vda1
  fi
  if ! mount -o ro "$root" /lower; then
    echo "fidelnet: cannot mount the disk image's root $root" > /dev/console
    poweroff -f
  fi
else
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro hostroot /lower || exec sh
fi
mount -t tmpfs -o mode=0755 tmpfs /upper
mkdir -p /upper/data /upper/work
layers=lowerdir=/lower,upperdir=/upper/data,workdir=/upper/work
mount -t overlay -o "$layers" overlay /newroot || exec sh
for d in proc sys dev; do mount --move /$d /newroot/$d; done
mkdir -p /newroot/dev/pts
mount -t devpts -o newinstance,ptmxmode=0666 devpts /newroot/dev/pts
ln -sf pts/ptmx /newroot/dev/ptmx 2>/dev/null
# /tmp is the host's, read-write, as a namespace node's is: programs that hand
# files to fidelnet (pktgen's results) write them where the host reads them.
# Anonymous temporary files (mkstemp, then unlink) do not survive 9p, so programs
# get TMPDIR on the guest's own tmpfs (the agent adds it where not set).
mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,cache=mmap hosttmp /newroot/tmp ||
  mount -t tmpfs -o mode=1777 tmpfs /newroot/tmp
mount -t tmpfs -o mode=0755 tmpfs /newroot/run
mkdir -p /newroot/run/tmp
chmod 1777 /newroot/run/tmp
export FIDELNET_GUEST_TMPDIR=/run/tmp
if [ -n "$disk" ]; then
  # The agent (and fidelnet's tools) are the host's: its root, read-only, beside.
  mkdir -p /newroot/run/fidelnet/host
  mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144,ro hostroot /newroot/run/fidelnet/host
  agent="/run/fidelnet/host$agent"
fi
mkdir -p /newroot/lib/modules
mount -t 9p -o trans=virtio,version=9p2000.L,ro modules /newroot/lib/modules 2>/dev/null
exec switch_root /newroot "$agent" agent "$port"
"""


def _plain(mod: str) -> str:
    """A module's name once decompressed into the initramfs."""
    for ext in (".xz", ".zst", ".gz"):
        if mod.endswith(ext):
            return mod[: -len(ext)]
    return mod


def _module_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        return lzma.decompress(data)
    if path.name.endswith(".gz"):
        return gzip.decompress(data)
    if path.name.endswith(".zst"):
        raise UnsupportedError(
            f"zstd-compressed modules ({path.name})", "the VM guest image", "use a kernel with xz"
        )
    return data


def initramfs(busybox: Path, moddir: Path) -> bytes:
    """The gzip-compressed cpio archive: busybox and its applets, the modules, /init."""
    modules = load_order(moddir, MODULES)
    entries: list[tuple[str, int, bytes]] = []  # (path, mode, data or link target)
    for d in ("bin", "dev", "proc", "sys", "lib", "lib/modules", "lower", "upper", "newroot"):
        entries.append((d, stat.S_IFDIR | 0o755, b""))
    entries.append(("bin/busybox", stat.S_IFREG | 0o755, busybox.read_bytes()))
    for applet in _BUSYBOX_APPLETS:
        entries.append((f"bin/{applet}", stat.S_IFLNK | 0o777, b"busybox"))
    for m in modules:
        name = os.path.basename(_plain(m))
        entries.append((f"lib/modules/{name}", stat.S_IFREG | 0o644, _module_bytes(moddir / m)))
    entries.append(("init", stat.S_IFREG | 0o755, init_script(modules).encode()))
    return gzip.compress(cpio_newc(entries), compresslevel=6, mtime=0)


def cpio_newc(entries: list[tuple[str, int, bytes]]) -> bytes:
    """A cpio archive in the "newc" format the kernel unpacks (``TRAILER!!!`` last);
    the same entries give the same bytes (no times, owners root)."""
    out = io.BytesIO()
    ino = 1
    for name, mode, data in [*entries, ("TRAILER!!!", 0, b"")]:
        raw = name.encode() + b"\0"
        fields = [ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(raw), 0]
        out.write(b"070701" + b"".join(f"{v:08x}".encode() for v in fields))
        out.write(raw)
        out.write(b"\0" * (-(110 + len(raw)) % 4))
        out.write(data)
        out.write(b"\0" * (-len(data) % 4))
        ino += 1
    out.write(b"\0" * (-out.tell() % 512))
    return out.getvalue()
