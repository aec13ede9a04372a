"""The OCI runtime configuration (``config.json``) of a container node.

What the node runs is the image's (entrypoint, cmd, environment, working directory,
user), with the node's overrides (:class:`~fidelnet.topology.spec.ContainerSpec`).
Its namespaces are new (mount, PID, IPC, UTS with the node's name as hostname) but
one: the network namespace is the node's own, so its links, shaping and engine
endpoints are those of any node. Capabilities are Docker's default set plus
``NET_ADMIN`` and ``NET_RAW`` (a network emulator's nodes configure their own
addresses and routes, and routing daemons need both), unless ``privileged``.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fidelnet.errors import NodeError
from fidelnet.topology.spec import ContainerSpec
from fidelnet.topology.validate_containers import CAPABILITIES

if TYPE_CHECKING:
    from fidelnet.image import Image

__all__ = [
    "HELPER_DIR",
    "build_config",
    "find_static_shell",
    "image_shell",
    "inside",
    "process_args",
]

DEFAULT_CAPS = (
    "CHOWN", "DAC_OVERRIDE", "FSETID", "FOWNER", "MKNOD", "NET_RAW", "SETGID", "SETUID",
    "SETFCAP", "SETPCAP", "NET_BIND_SERVICE", "SYS_CHROOT", "KILL", "AUDIT_WRITE",
    "NET_ADMIN",
)  # fmt: skip
"""Docker's default capabilities, and NET_ADMIN."""

MASKED = (
    "/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list",
    "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware",
)  # fmt: skip
READONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sysrq-trigger")

DEFAULT_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
HELPER_DIR = "/.fidelnet"
"""Where fidelnet's static shell is bound in an image that has none."""

SHELLS = ("/bin/sh", "/usr/bin/sh", "/bin/bash", "/bin/ash")


def process_args(spec: ContainerSpec, image: Image, node: str) -> list[str]:
    """What the container runs as its first process: Docker's rules (an entrypoint
    given replaces the image's and its cmd; a command replaces the cmd)."""
    cfg = image.config
    if spec.entrypoint is not None:
        args = [*spec.entrypoint, *(spec.command or ())]
    else:
        cmd = spec.command if spec.command is not None else cfg.cmd
        args = [*cfg.entrypoint, *cmd]
    if not args:
        raise NodeError(
            f"{node}: image {spec.image!r} has neither an entrypoint nor a command: "
            "give the node a command"
        )
    return args


def _lookup(rootfs: Path, table: str, key: str, node: str, what: str) -> int:
    """A name's id in the image's /etc/passwd or /etc/group (a number as it is)."""
    if key.isdigit():
        return int(key)
    path = rootfs / "etc" / table
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    for line in lines:
        fields = line.split(":")
        if len(fields) > 2 and fields[0] == key and fields[2].isdigit():
            return int(fields[2])
    raise NodeError(f"{node}: {what} {key!r} is not in the image's /etc/{table}")


def _user(spec: ContainerSpec, image: Image, node: str) -> dict[str, Any]:
    who = spec.user if spec.user is not None else image.config.user
    if not who:
        return {"uid": 0, "gid": 0}
    name, _, group = who.partition(":")
    uid = _lookup(image.rootfs, "passwd", name, node, "user")
    if group:
        gid = _lookup(image.rootfs, "group", group, node, "group")
    elif name.isdigit():
        gid = uid
    else:
        gid = _primary_gid(image.rootfs, name, uid)
    return {"uid": uid, "gid": gid}


def _primary_gid(rootfs: Path, name: str, uid: int) -> int:
    try:
        for line in (rootfs / "etc" / "passwd").read_text(errors="replace").splitlines():
            f = line.split(":")
            if len(f) > 3 and f[0] == name and f[3].isdigit():
                return int(f[3])
    except OSError:
        pass
    return uid


def _env(spec: ContainerSpec, image: Image, node: str) -> list[str]:
    env: dict[str, str] = {}
    for item in image.config.env:
        key, _, value = item.partition("=")
        env[key] = value
    env.setdefault("PATH", DEFAULT_PATH.split("=", 1)[1])
    env["HOSTNAME"] = node
    for key, value in spec.env:
        env[key] = value
    return [f"{k}={v}" for k, v in env.items()]


def _caps(spec: ContainerSpec) -> list[str]:
    names = CAPABILITIES if spec.privileged else (*DEFAULT_CAPS, *spec.cap_add)
    seen = dict.fromkeys("CAP_" + n.upper().removeprefix("CAP_") for n in names)
    return list(seen)


def _mounts(spec: ContainerSpec, bundle: Path, helper: str | None) -> list[dict[str, Any]]:
    ro_sys = [] if spec.privileged else ["ro"]
    mounts: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        },
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue"},
        {
            "destination": "/sys",
            "type": "sysfs",
            "source": "sysfs",
            "options": ["nosuid", "noexec", "nodev", *ro_sys],
        },
    ]
    for name in ("hostname", "hosts"):
        mounts.append(
            {
                "destination": f"/etc/{name}",
                "type": "bind",
                "source": str(bundle / name),
                "options": ["rbind", "rprivate"],
            }
        )
    for vol in spec.volumes:
        host, inside, *mode = vol.split(":")
        opts = ["rbind", "rprivate"] + (["ro"] if mode == ["ro"] else [])
        mounts.append({"destination": inside, "type": "bind", "source": host, "options": opts})
    if helper is not None:
        mounts.append(
            {
                "destination": f"{HELPER_DIR}/busybox",
                "type": "bind",
                "source": helper,
                "options": ["bind", "ro"],
            }
        )
    return mounts


def build_config(
    spec: ContainerSpec,
    image: Image,
    *,
    node: str,
    netns: str,
    bundle: Path,
    rootfs: Path,
    helper: str | None,
) -> dict[str, Any]:
    """The ``config.json`` of the node's container (runtime spec 1.0)."""
    caps = _caps(spec)
    linux: dict[str, Any] = {
        "namespaces": [
            {"type": "pid"},
            {"type": "ipc"},
            {"type": "uts"},
            {"type": "mount"},
            {"type": "network", "path": netns},
        ],
    }
    if not spec.privileged:
        linux["maskedPaths"] = list(MASKED)
        linux["readonlyPaths"] = list(READONLY)
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": _user(spec, image, node),
            "args": process_args(spec, image, node),
            "env": _env(spec, image, node),
            "cwd": spec.workdir or image.config.workdir or "/",
            "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
            "noNewPrivileges": False,
        },
        "root": {"path": str(rootfs), "readonly": False},
        "hostname": node,
        "mounts": _mounts(spec, bundle, helper),
        "linux": linux,
    }


def inside(rootfs: Path, path: str, depth: int = 0) -> Path | None:
    """``path`` resolved in the root file system ``rootfs`` as the container would
    (absolute symlinks are the image's, ``..`` stops at its root), or None when it
    does not exist there."""
    cur = rootfs
    parts = [p for p in path.split("/") if p and p != "."]
    for i, part in enumerate(parts):
        if part == "..":  # never above the image's root, as in the container
            cur = cur.parent if cur != rootfs else rootfs
            continue
        nxt = cur / part
        if nxt.is_symlink():
            if depth > 16:
                return None
            target = os.readlink(nxt)
            rest = "/".join(parts[i + 1 :])
            base = target if target.startswith("/") else str(cur.relative_to(rootfs) / target)
            return inside(rootfs, f"{base}/{rest}" if rest else base, depth + 1)
        if not nxt.exists() and not nxt.is_symlink():
            return None
        cur = nxt
    return cur


def image_shell(image: Image) -> str | None:
    """The image's own shell, if it has one."""
    for sh in SHELLS:
        found = inside(image.rootfs, sh)
        if found is not None and found.is_file() and os.access(found, os.X_OK):
            return sh
    return None


def find_static_shell(candidates: Sequence[str] = ("/bin/busybox", "/usr/bin/busybox")) -> str:
    """A statically linked busybox on the host, bound into images without a shell."""
    for path in candidates:
        if os.path.isfile(path) and _is_static(path):
            return path
    raise NodeError(
        "the image has no shell (/bin/sh) and this machine has no static busybox to lend "
        "it: install busybox-static (apt-get install busybox-static)"
    )


def _is_static(path: str) -> bool:
    """An ELF executable with no program interpreter (no dynamic loader)."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:  # ELF64 only
                return False
            phoff, phentsize, phnum = (
                struct.unpack_from("<Q", head, 32)[0],
                *struct.unpack_from("<HH", head, 54),
            )
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except OSError:
        return False
    PT_INTERP = 3
    return all(struct.unpack_from("<I", table, i * phentsize)[0] != PT_INTERP for i in range(phnum))
