"""Checks of container nodes (``backend: container``, :mod:`fidelnet.nodes.container`):
what can be known before anything is made. Whether the image exists and can be read
is known only when it is resolved, at the start of the node's build."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

from fidelnet.errors import ValidationError
from fidelnet.topology.spec import ContainerSpec, NodeSpec, TopologySpec

__all__ = ["CAPABILITIES", "check_containers"]

CAPABILITIES: tuple[str, ...] = (
    "AUDIT_CONTROL", "AUDIT_READ", "AUDIT_WRITE", "BLOCK_SUSPEND", "BPF", "CHECKPOINT_RESTORE",
    "CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "IPC_LOCK", "IPC_OWNER",
    "KILL", "LEASE", "LINUX_IMMUTABLE", "MAC_ADMIN", "MAC_OVERRIDE", "MKNOD", "NET_ADMIN",
    "NET_BIND_SERVICE", "NET_BROADCAST", "NET_RAW", "PERFMON", "SETFCAP", "SETGID", "SETPCAP",
    "SETUID", "SYSLOG", "SYS_ADMIN", "SYS_BOOT", "SYS_CHROOT", "SYS_MODULE", "SYS_NICE",
    "SYS_PACCT", "SYS_PTRACE", "SYS_RAWIO", "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG",
    "WAKE_ALARM",
)  # fmt: skip
"""Linux capabilities by name, without ``CAP_`` (capabilities(7))."""

_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_USER = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?$")
_PATH_REFS = ("oci-archive:", "docker-archive:", "oci:")


def check_containers(spec: TopologySpec) -> Iterator[ValidationError]:
    for name, node in spec.nodes.items():
        if node.container is not None and node.backend != "container":
            yield ValidationError(
                f"nodes.{name}.image",
                "an image is only for backend container",
                node.container.image,
                ["backend: container"],
            )
        elif node.backend == "container":
            yield from _check(name, node)
    if spec.tdf is not None or spec.tdf_auto is not None:
        for name, node in spec.nodes.items():
            if node.backend == "container":
                yield ValidationError(
                    f"nodes.{name}.backend",
                    "virtual time does not reach into containers yet (the time shim is "
                    "the host's, not the image's): use netns or qemu nodes with tdf",
                    node.backend,
                    ["netns", "qemu"],
                )


def _check(name: str, node: NodeSpec) -> Iterator[ValidationError]:
    where = f"nodes.{name}"
    c = node.container
    if c is None or not isinstance(c.image, str) or not c.image.strip():
        yield ValidationError(
            f"{where}.image",
            "a container node needs an image (oci-archive:PATH, docker-archive:PATH, "
            "oci:DIR, a path, or the name of an imported image)",
            None if c is None else c.image,
        )
        return
    yield from _check_image_path(where, c)
    for field in ("command", "entrypoint"):
        argv = getattr(c, field)
        if argv is not None and (
            not isinstance(argv, tuple)
            or not all(isinstance(a, str) and "\0" not in a for a in argv)
        ):
            yield ValidationError(f"{where}.{field}", "must be a list of strings", argv)
    if c.entrypoint is not None and not c.entrypoint and not c.command:
        yield ValidationError(
            f"{where}.entrypoint", "empty, and no command: the container would run nothing", []
        )
    for key, value in c.env:
        if not isinstance(key, str) or not _ENV_KEY.match(key):
            yield ValidationError(f"{where}.env", "a variable name is letters, digits and '_'", key)
        elif not isinstance(value, str) or "\0" in value:
            yield ValidationError(f"{where}.env.{key}", "must be a string", value)
    for i, vol in enumerate(c.volumes):
        yield from _check_volume(f"{where}.volumes[{i}]", vol)
    if c.workdir is not None and (not isinstance(c.workdir, str) or not c.workdir.startswith("/")):
        yield ValidationError(f"{where}.workdir", "an absolute path in the container", c.workdir)
    if c.user is not None and (not isinstance(c.user, str) or not _USER.match(c.user)):
        yield ValidationError(
            f"{where}.user", "a user name or uid, optionally ':' and a group name or gid", c.user
        )
    for cap in c.cap_add:
        bare = cap.upper().removeprefix("CAP_") if isinstance(cap, str) else cap
        if bare not in CAPABILITIES:
            yield ValidationError(f"{where}.cap_add", "unknown capability", cap, list(CAPABILITIES))


def _check_image_path(where: str, c: ContainerSpec) -> Iterator[ValidationError]:
    """A reference that names a file or directory: it must exist now."""
    ref = c.image
    for prefix in _PATH_REFS:
        if ref.startswith(prefix):
            path = ref[len(prefix) :]
            if prefix == "oci:" and not os.path.isdir(path) and ":" in path:
                path = path.rsplit(":", 1)[0]  # oci:DIR:TAG
            if prefix == "oci-archive:" and not os.path.exists(path) and ":" in path:
                path = path.rsplit(":", 1)[0]
            if not os.path.exists(path):
                yield ValidationError(f"{where}.image", "no such file or directory", path)
            return
    if ref.startswith(("/", "./", "../")) and not os.path.exists(ref):
        yield ValidationError(f"{where}.image", "no such file or directory", ref)


def _check_volume(where: str, vol: object) -> Iterator[ValidationError]:
    if not isinstance(vol, str):
        yield ValidationError(where, "HOST:CONTAINER or HOST:CONTAINER:ro", vol)
        return
    parts = vol.split(":")
    if len(parts) not in (2, 3) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
        yield ValidationError(where, "HOST:CONTAINER or HOST:CONTAINER:ro", vol, ["ro", "rw"])
        return
    host, inside = parts[0], parts[1]
    if not os.path.isabs(host) or not os.path.isabs(inside):
        yield ValidationError(where, "both paths must be absolute", vol)
    elif not os.path.exists(host):
        yield ValidationError(where, "the host path does not exist", host)
    elif inside == "/" or ".." in inside.split("/"):
        yield ValidationError(where, "cannot mount over the container's / or outside it", inside)
