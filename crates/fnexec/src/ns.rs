//! Thin, safe wrappers over the process-context system calls used by
//! `fidelnet-exec`. Each returns `io::Result` carrying the raw `errno`.

use std::ffi::{CStr, OsStr};
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::{AsRawFd, RawFd};

/// Map a C-style `-1 on error` return value to `io::Result`.
fn check(ret: libc::c_int) -> io::Result<()> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `setsid()`: become the leader of a new session and process group.
pub fn setsid() -> io::Result<()> {
    // SAFETY: setsid takes no arguments and only affects this process.
    if unsafe { libc::setsid() } == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `ioctl(fd, TIOCSCTTY, 0)`: make the terminal on `fd` our controlling
/// terminal (we must be a session leader without one).
pub fn set_controlling_tty(fd: RawFd) -> io::Result<()> {
    // SAFETY: TIOCSCTTY takes an integer argument, not a pointer.
    check(unsafe { libc::ioctl(fd, libc::TIOCSCTTY, 0 as libc::c_int) })
}

/// `setns(fd, nstype)`: move this (single-threaded) process into the
/// namespace referred to by `ns`.
pub fn setns(ns: &File, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: plain integer arguments; `ns` keeps the descriptor open.
    check(unsafe { libc::setns(ns.as_raw_fd(), nstype) })
}

/// `unshare(flags)`: detach from the given namespaces of the parent.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: plain integer argument.
    check(unsafe { libc::unshare(flags) })
}

/// `mount(source, target, fstype, flags, NULL)`; `None` passes `NULL`.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
) -> io::Result<()> {
    let ptr = |s: Option<&CStr>| s.map_or(std::ptr::null(), CStr::as_ptr);
    // SAFETY: every pointer is either NULL or a NUL-terminated string that
    // outlives the call; no mount data is passed.
    check(unsafe {
        libc::mount(
            ptr(source),
            target.as_ptr(),
            ptr(fstype),
            flags,
            std::ptr::null(),
        )
    })
}

/// `umount2(target, MNT_DETACH)`: detach the mount at `target` (in this
/// process's mount namespace only, when it is a private one).
pub fn umount_detach(target: &CStr) -> io::Result<()> {
    // SAFETY: `target` is a NUL-terminated string that outlives the call.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) })
}

/// `sethostname(name)` in the current UTS namespace.
pub fn sethostname(name: &OsStr) -> io::Result<()> {
    let bytes = name.as_bytes();
    // SAFETY: the pointer/length pair describes `bytes`, which the kernel
    // only reads; no NUL terminator is needed.
    check(unsafe { libc::sethostname(bytes.as_ptr().cast(), bytes.len()) })
}
