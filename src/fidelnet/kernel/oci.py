"""The OCI runtime that container nodes run under (crun), and the overlay their root is.

Why crun, and how it is driven (docs/containers.md has the measurements):

- **Daemonless.** Each call is one short process: ``crun run --detach`` starts a
  container and returns; ``crun exec`` runs a program in it as a child of the caller;
  ``crun delete --force`` ends it. Nothing else runs, nothing listens on a socket.
  podman adds an image store and a conmon per container (0.3-0.5 s a start here);
  crun starts one in about 20 ms.
- **Its own state directory per run** (``--root``): ``crun list`` of the user's own
  containers (``/run/crun``) never shows ours, and ours are deleted by that root and
  id, never by name.
- **No cgroup manager** (``--cgroup-manager=disabled``): the container's processes
  stay in the cgroups of the process that runs crun, which ``fidelnet-exec`` puts in
  the node's own cgroups first; CPU limits, accounting and the monitor work as for a
  namespace node.
- **A hybrid cgroup tree.** crun 1.8 refuses to start at all where cgroup v1
  controllers are mounted beside a v2 tree that holds a controller (this machine:
  ``hugetlb`` on ``/sys/fs/cgroup/unified``). With no cgroup manager it has no use
  for that tree, so ``fidelnet-exec --unmount`` detaches it in a mount namespace of
  crun's own (:func:`hidden_mounts`); the host keeps it.

The root file system is an overlay: the image's unpacked root (:mod:`fidelnet.image`,
read-only, shared by every node of that image) below, the node's own writable layer
above, both in the run's state directory.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from typing import Any

from fidelnet.errors import KernelError, UnsupportedError
from fidelnet.kernel import _libc, launcher

__all__ = [
    "adopting",
    "delete",
    "find_runtime",
    "hidden_mounts",
    "mount_overlay",
    "runtime_argv",
    "runtime_version",
    "state",
    "umount",
]

RUNTIME = "crun"
INSTALL_HINT = "install crun (Debian and Ubuntu: apt-get install crun)"
UNIFIED = "/sys/fs/cgroup/unified"

_version: str | None = None


def find_runtime() -> str:
    """The path of crun, or an error that says what to install."""
    path = shutil.which(RUNTIME)
    if path is None:
        raise UnsupportedError("container nodes", "this machine", f"no {RUNTIME}: {INSTALL_HINT}")
    return path


def runtime_version() -> str:
    """crun's version line ("crun version 1.8.1"), for provenance."""
    global _version
    if _version is None:
        out = subprocess.run(
            [find_runtime(), "--version"], capture_output=True, text=True, check=False
        ).stdout
        _version = out.splitlines()[0].strip() if out else RUNTIME
    return _version


def hidden_mounts() -> list[str]:
    """Mounts crun must not see: the v2 part of a hybrid cgroup tree that holds a
    controller (crun refuses such a tree even with no cgroup manager)."""
    try:
        with open(os.path.join(UNIFIED, "cgroup.controllers"), encoding="ascii") as f:
            held = f.read().split()
    except OSError:
        return []
    hybrid = os.path.isdir("/sys/fs/cgroup/cpu") or os.path.isdir("/sys/fs/cgroup/cpuacct")
    return [UNIFIED] if held and hybrid else []


def runtime_argv(
    root: str, args: Sequence[str], *, cgroups: Sequence[str] = (), session: bool = False
) -> list[str]:
    """The argv of one crun call with the run's state directory ``root``, started by
    ``fidelnet-exec`` in ``cgroups`` (the node's: what crun starts stays there)."""
    crun = [find_runtime(), "--cgroup-manager=disabled", "--root", root, *args]
    return launcher.exec_argv(
        crun, cgroups=cgroups, unmounts=hidden_mounts(), session=session, ctty=session
    )


def _call(
    root: str, args: Sequence[str], timeout: float = 30.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        runtime_argv(root, args),
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


@contextlib.contextmanager
def adopting() -> Iterator[None]:
    """Within the block this process is a child subreaper: the container's first
    process, crun's child, orphaned when ``crun run --detach`` returns, becomes this
    process's child instead of PID 1's, so a teardown reaps it as soon as it dies
    (:mod:`fidelnet.kernel.procwait`) instead of waiting for PID 1's next look for
    orphans (1 to 2 s on the CI machine)."""
    try:
        was = _libc.child_subreaper()
        if not was:
            _libc.set_child_subreaper(True)
    except OSError:
        was = True  # not allowed here: the block runs without
    try:
        yield
    finally:
        if not was:
            with contextlib.suppress(OSError):
                _libc.set_child_subreaper(False)


def state(root: str, cid: str) -> dict[str, Any] | None:
    """crun's state of container ``cid`` (``status``, ``pid``...), None when it has none."""
    if not os.path.isdir(os.path.join(root, cid)):
        return None
    res = _call(root, ["state", cid])
    if res.returncode != 0:
        return None
    try:
        out: dict[str, Any] = json.loads(res.stdout)
    except ValueError:
        return None
    return out


def delete(root: str, cid: str) -> None:
    """End container ``cid`` of the state directory ``root`` (its processes killed),
    and forget it; nothing when crun has no such container. The state directory is
    removed when it holds no other."""
    if os.path.isdir(os.path.join(root, cid)) and shutil.which(RUNTIME) is not None:
        res = _call(root, ["delete", "--force", cid])
        if res.returncode != 0 and os.path.isdir(os.path.join(root, cid)):
            raise KernelError(f"crun delete {cid}: {res.stderr.strip() or res.returncode}")
    with contextlib.suppress(OSError):
        os.rmdir(root)


def mount_overlay(lower: str, upper: str, work: str, target: str) -> None:
    """Mount the overlay: ``lower`` read-only below, ``upper`` (with ``work``, on the
    same file system) taking the writes, on ``target``."""
    for path in (lower, upper, work, target):
        if any(c in path for c in ",:\\") or not os.path.isabs(path):
            raise KernelError(f"overlay: a path with ',', ':' or '\\\\' cannot be mounted: {path}")
    data = f"lowerdir={lower},upperdir={upper},workdir={work}"
    try:
        _libc.mount("overlay", target, "overlay", 0, data)
    except OSError as exc:
        raise KernelError(f"overlay on {target}: {exc.strerror or exc}") from exc


def umount(target: str) -> None:
    """Detach the mount on ``target`` if there is one."""
    if os.path.ismount(target):
        _libc.umount(target)
