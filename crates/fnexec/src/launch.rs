//! The setup sequence (steps a–f of the usage text) and the final exec.

use std::ffi::{CStr, CString, OsStr, OsString};
use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;

use crate::args::{Join, Options};
use crate::ns;

/// Exit status for any setup (or usage) failure.
pub const EXIT_SETUP: i32 = 125;
/// Exit status when PROGRAM exists but could not be executed.
pub const EXIT_CANNOT_EXEC: i32 = 126;
/// Exit status when PROGRAM was not found.
pub const EXIT_NOT_FOUND: i32 = 127;

/// A failed step, rendered as `<step>: <strerror> (<detail>)`.
#[derive(Debug)]
pub struct Failure {
    /// Short name of the failing step.
    pub step: &'static str,
    /// The underlying error.
    pub error: io::Error,
    /// What the step was applied to (path, pid, program...).
    pub detail: String,
    /// Process exit status to use.
    pub exit_code: i32,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            self.step,
            describe(&self.error),
            self.detail
        )
    }
}

/// `strerror` text without std's ` (os error N)` suffix.
fn describe(error: &io::Error) -> String {
    let errno = match error.raw_os_error() {
        Some(errno) => errno,
        None => return error.to_string(),
    };
    let mut buf = [0 as libc::c_char; 128];
    // SAFETY: the buffer is valid for `buf.len()` bytes; the XSI variant
    // (which libc binds on Linux) NUL-terminates on success.
    let ret = unsafe { libc::strerror_r(errno, buf.as_mut_ptr(), buf.len()) };
    if ret != 0 {
        return format!("Unknown error {errno}");
    }
    // SAFETY: strerror_r succeeded, so `buf` holds a NUL-terminated string.
    unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

fn setup_failure(step: &'static str, error: io::Error, detail: &OsStr) -> Failure {
    Failure {
        step,
        error,
        detail: detail.to_string_lossy().into_owned(),
        exit_code: EXIT_SETUP,
    }
}

fn open_ns(path: &OsStr) -> Result<File, Failure> {
    File::open(path).map_err(|e| setup_failure("open namespace", e, path))
}

fn cstring(bytes: &[u8]) -> io::Result<CString> {
    CString::new(bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))
}

/// Steps a–f, in the documented order, whatever the argv order was.
pub fn setup(opts: &Options) -> Result<(), Failure> {
    // a. Session and controlling terminal.
    if opts.setsid {
        ns::setsid().map_err(|e| setup_failure("setsid", e, OsStr::new("new session")))?;
    }
    if opts.ctty {
        ns::set_controlling_tty(0)
            .map_err(|e| setup_failure("ctty", e, OsStr::new("TIOCSCTTY on fd 0")))?;
    }

    // b. Cgroups: one write of "<pid>\n" per file; never create the file.
    let line = format!("{}\n", std::process::id());
    for path in &opts.cgroups {
        OpenOptions::new()
            .write(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()))
            .map_err(|e| setup_failure("cgroup", e, path))?;
    }

    // c./d. Namespaces to join.
    match &opts.join {
        Join::Pid(pid) => {
            // Open all three first so a vanished pid changes nothing.
            let dir = format!("/proc/{pid}/ns/");
            let mut files = Vec::with_capacity(3);
            for (name, nstype) in [
                ("net", libc::CLONE_NEWNET),
                ("uts", libc::CLONE_NEWUTS),
                ("mnt", libc::CLONE_NEWNS),
            ] {
                let path = OsString::from(format!("{dir}{name}"));
                files.push((open_ns(&path)?, nstype, path));
            }
            // net, uts, then mnt last (it also resets root and cwd).
            for (file, nstype, path) in &files {
                ns::setns(file, *nstype).map_err(|e| setup_failure("setns", e, path))?;
            }
        }
        Join::Net(path) => {
            let file = open_ns(path)?;
            ns::setns(&file, libc::CLONE_NEWNET)
                .map_err(|e| setup_failure("setns net", e, path))?;
        }
        Join::None => {}
    }

    // e. Private mount + UTS namespaces, fresh sysfs, hostname.
    if opts.new_mount {
        if let Some(base) = &opts.mount_base {
            // Entering a mount namespace resets root and cwd to its root.
            let cwd = std::env::current_dir().ok();
            let file = open_ns(base)?;
            ns::setns(&file, libc::CLONE_NEWNS).map_err(|e| setup_failure("setns mnt", e, base))?;
            if let Some(dir) = cwd {
                let _ = std::env::set_current_dir(dir);
            }
        }
        ns::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWUTS)
            .map_err(|e| setup_failure("unshare", e, OsStr::new("CLONE_NEWNS|CLONE_NEWUTS")))?;
        let root = cstring(b"/").expect("no NUL in literal");
        ns::mount(None, &root, None, libc::MS_REC | libc::MS_PRIVATE)
            .map_err(|e| setup_failure("mount", e, OsStr::new("make / rprivate")))?;
        // Best effort: a sysfs showing this netns's interfaces on /sys.
        let sysfs = cstring(b"sysfs").expect("no NUL in literal");
        let sys = cstring(b"/sys").expect("no NUL in literal");
        let _ = ns::mount(Some(&sysfs), &sys, Some(&sysfs), 0);
    }
    if let Some(name) = &opts.hostname {
        ns::sethostname(name).map_err(|e| setup_failure("sethostname", e, name))?;
    }
    if !opts.unmounts.is_empty() {
        if !opts.new_mount {
            ns::unshare(libc::CLONE_NEWNS)
                .map_err(|e| setup_failure("unshare", e, OsStr::new("CLONE_NEWNS")))?;
            let root = cstring(b"/").expect("no NUL in literal");
            ns::mount(None, &root, None, libc::MS_REC | libc::MS_PRIVATE)
                .map_err(|e| setup_failure("mount", e, OsStr::new("make / rprivate")))?;
        }
        for path in &opts.unmounts {
            let target = cstring(path.as_bytes()).map_err(|e| setup_failure("umount", e, path))?;
            ns::umount_detach(&target).map_err(|e| setup_failure("umount", e, path))?;
        }
    }

    // f. Working directory.
    if let Some(dir) = &opts.cwd {
        std::env::set_current_dir(dir).map_err(|e| setup_failure("chdir", e, dir))?;
    }
    Ok(())
}

/// g. `execvp(argv[0], argv)`. Only returns on failure.
pub fn exec(argv: &[OsString]) -> Failure {
    let program = argv[0].as_os_str();
    let failure = |error: io::Error| {
        let exit_code = if error.raw_os_error() == Some(libc::ENOENT) {
            EXIT_NOT_FOUND
        } else {
            EXIT_CANNOT_EXEC
        };
        Failure {
            step: "exec",
            error,
            detail: program.to_string_lossy().into_owned(),
            exit_code,
        }
    };
    let c_args: Vec<CString> = match argv.iter().map(|a| cstring(a.as_bytes())).collect() {
        Ok(v) => v,
        Err(e) => return failure(e),
    };
    let mut ptrs: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    ptrs.push(std::ptr::null());
    // SAFETY: `ptrs` is a NULL-terminated array of pointers to NUL-terminated
    // strings owned by `c_args`, both alive across the call.
    unsafe { libc::execvp(ptrs[0], ptrs.as_ptr()) };
    failure(io::Error::last_os_error())
}
