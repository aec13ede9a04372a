"""Named network namespaces, created and entered without forking.

A namespace is a bind mount of ``/proc/thread-self/ns/net`` onto a file in
``/run/netns`` (the directory ``ip netns`` uses, so ``ip netns exec NAME …`` works
for debugging). Creating one costs a few hundred microseconds: the calling thread
unshares its network namespace, bind-mounts it, and returns to where it was.

:func:`entered` switches the calling thread into a namespace for the duration of a
``with`` block; netlink sockets opened inside stay bound to that namespace after
the block ends, which is how :mod:`fidelnet.kernel.netlink` talks to every node
from one process.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

from fidelnet.errors import KernelError
from fidelnet.kernel import _libc

__all__ = ["NETNS_DIR", "create", "delete", "entered", "exists", "own_path", "path_of"]

NETNS_DIR = "/run/netns"


def own_path() -> str:
    """The path of this process's own (host-side) network namespace."""
    return f"/proc/{os.getpid()}/ns/net"


def path_of(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def exists(name: str) -> bool:
    return os.path.exists(path_of(name))


def _ensure_dir() -> None:
    """Make /run/netns a shared mount point, as iproute2 does, so namespaces made here
    are visible from other mount namespaces and iproute2 keeps working."""
    os.makedirs(NETNS_DIR, mode=0o755, exist_ok=True)
    try:
        _libc.mount("none", NETNS_DIR, None, _libc.MS_SHARED | _libc.MS_REC)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise KernelError(f"{NETNS_DIR}: cannot make it a shared mount: {exc}") from exc
        _libc.mount(NETNS_DIR, NETNS_DIR, None, _libc.MS_BIND | _libc.MS_REC)
        _libc.mount("none", NETNS_DIR, None, _libc.MS_SHARED | _libc.MS_REC)


_dir_ready = False


def create(name: str) -> str:
    """Create the named namespace and return its path; fails if it exists."""
    global _dir_ready
    if not _dir_ready:
        _ensure_dir()
        _dir_ready = True
    path = path_of(name)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDONLY, 0o444)
    except FileExistsError as exc:
        raise KernelError(f"netns {name}: already exists") from exc
    os.close(fd)
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        _libc.unshare(_libc.CLONE_NEWNET)
        try:
            _libc.mount("/proc/thread-self/ns/net", path, None, _libc.MS_BIND)
        finally:
            _libc.setns(home, _libc.CLONE_NEWNET)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(path)
        raise KernelError(f"netns {name}: {exc}") from exc
    finally:
        os.close(home)
    return path


def delete(name: str) -> bool:
    """Remove the named namespace (the kernel frees it once no process holds it).

    Returns False when it did not exist."""
    path = path_of(name)
    if not os.path.exists(path):
        return False
    with contextlib.suppress(OSError):
        _libc.umount(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise KernelError(f"netns {name}: cannot remove: {exc}") from exc
    return True


@contextlib.contextmanager
def entered(path: str) -> Iterator[None]:
    """Run the block with the calling thread inside the namespace at ``path``."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(path, os.O_RDONLY)
    except OSError as exc:
        os.close(home)
        raise KernelError(f"netns {path}: {exc}") from exc
    try:
        try:
            _libc.setns(target, _libc.CLONE_NEWNET)
        except OSError as exc:
            raise KernelError(f"netns {path}: {exc}") from exc
        try:
            yield
        finally:
            _libc.setns(home, _libc.CLONE_NEWNET)
    finally:
        os.close(target)
        os.close(home)
