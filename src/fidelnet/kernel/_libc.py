"""Thin ctypes wrappers for the few syscalls Python 3.10/3.11 lacks: unshare, setns,
mount, and prctl's child-subreaper flag."""

from __future__ import annotations

import ctypes
import os

CLONE_NEWNET = 0x40000000
MS_BIND = 4096
MS_REC = 16384
MS_SHARED = 1 << 20
MNT_DETACH = 2
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37

# The process's own symbols include libc's; ctypes.util.find_library("c") would
# run ldconfig (a fork and exec) at every start of the `fidelnet` command.
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
_libc.setns.argtypes = [ctypes.c_int, ctypes.c_int]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), "unshare")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def mount(
    source: str, target: str, fstype: str | None, flags: int, data: str | None = None
) -> None:
    _check(
        _libc.mount(
            source.encode(),
            target.encode(),
            fstype.encode() if fstype else None,
            flags,
            data.encode() if data is not None else None,
        ),
        f"mount {target}",
    )


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(_libc.umount2(target.encode(), flags), f"umount {target}")


def child_subreaper() -> bool:
    """Whether this process adopts its descendants' orphans (``PR_GET_CHILD_SUBREAPER``)."""
    flag = ctypes.c_int(0)
    _check(
        _libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.addressof(flag), 0, 0, 0),
        "prctl(PR_GET_CHILD_SUBREAPER)",
    )
    return bool(flag.value)


def set_child_subreaper(on: bool) -> None:
    """Make this process adopt (or stop adopting) its descendants' orphans."""
    _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
