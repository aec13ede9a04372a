//! The guest agent: reads start requests from the host over one byte stream (a
//! virtio-serial port), runs each program on pipes or on a new pty, and sends its
//! output and exit status back as frames on the same stream.
//!
//! Each program is the leader of a session of its own, so a signal or a kill
//! from the host reaches everything it started. Its exit is reported only once
//! its output has been read to the end, so the host sees all of it first.
//!
//! In a guest the agent is PID 1: it reaps every child (`waitpid(-1)`), orphans
//! included, and keeps the statuses of the programs it started.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};

use crate::frame::{self, Decoder, Frame, Kind, Spec};
use crate::sys;

/// One program the host started.
struct Proc {
    child: Child,
    stdin: Option<RawFd>, // pipe or pty master (not owned when it is `out`)
    pending: Vec<u8>,     // stdin bytes not yet written
    eof_asked: bool,      // the host closed stdin
    out: Option<RawFd>,   // stdout pipe, or the pty master
    err: Option<RawFd>,   // stderr pipe
    pty: bool,
    status: Option<i32>, // wait status, once it ended
}

impl Proc {
    fn outputs_done(&self) -> bool {
        self.out.is_none() && self.err.is_none()
    }
}

/// Serve the host on `port` (already open for reading and writing) until it
/// closes.
pub fn serve(port: File) -> io::Result<()> {
    let fd = port.as_raw_fd();
    let mut wire = Vec::new();
    frame::encode(&mut wire, 0, Kind::Hello, b"");
    sys::write_all(fd, &wire)?;
    let mut procs: BTreeMap<u32, Proc> = BTreeMap::new();
    let mut dec = Decoder::default();
    let mut buf = vec![0u8; frame::CHUNK];
    loop {
        // What to wait for: the port, every open output, every stdin with bytes pending.
        let mut fds = vec![sys::pfd(fd, libc::POLLIN)];
        let mut who: Vec<(u32, u8)> = Vec::new(); // (channel, 0 out / 1 err / 2 stdin)
        for (&ch, p) in &procs {
            if let Some(o) = p.out {
                fds.push(sys::pfd(o, libc::POLLIN));
                who.push((ch, 0));
            }
            if let Some(e) = p.err {
                fds.push(sys::pfd(e, libc::POLLIN));
                who.push((ch, 1));
            }
            if let (Some(i), false) = (p.stdin, p.pending.is_empty()) {
                fds.push(sys::pfd(i, libc::POLLOUT));
                who.push((ch, 2));
            }
        }
        let waiting = procs
            .values()
            .any(|p| p.outputs_done() && p.status.is_none());
        sys::poll(&mut fds, if waiting { 20 } else { 1000 })?;
        let mut out = Vec::new();
        if fds[0].revents != 0 {
            let n = sys::read(fd, &mut buf)?;
            if n == 0 {
                return Ok(()); // the host went away
            }
            dec.feed(&buf[..n]);
            while let Some(f) = dec.next_frame()? {
                handle(f, &mut procs, &mut out);
            }
        }
        for (k, &(ch, what)) in who.iter().enumerate() {
            if fds[k + 1].revents == 0 {
                continue;
            }
            let Some(p) = procs.get_mut(&ch) else {
                continue;
            };
            match what {
                0 | 1 => {
                    let src = if what == 0 { p.out } else { p.err };
                    let Some(src) = src else { continue };
                    let n = sys::read(src, &mut buf).unwrap_or(0);
                    if n == 0 {
                        close_output(p, what == 0);
                    } else {
                        let kind = if what == 0 { Kind::Out } else { Kind::Err };
                        frame::encode(&mut out, ch, kind, &buf[..n]);
                    }
                }
                _ => flush_stdin(p),
            }
        }
        reap(&mut procs, &mut out);
        if !out.is_empty() {
            sys::write_all(fd, &out)?;
        }
    }
}

fn handle(f: Frame, procs: &mut BTreeMap<u32, Proc>, out: &mut Vec<u8>) {
    match f.kind {
        Kind::Open => match Spec::decode(&f.payload).and_then(|s| start(&s)) {
            Ok(p) => {
                frame::encode(out, f.ch, Kind::Started, &p.child.id().to_le_bytes());
                procs.insert(f.ch, p);
            }
            Err(e) => frame::encode(out, f.ch, Kind::Failed, e.to_string().as_bytes()),
        },
        Kind::Data => {
            if let Some(p) = procs.get_mut(&f.ch) {
                p.pending.extend_from_slice(&f.payload);
                flush_stdin(p);
            }
        }
        Kind::Eof => {
            if let Some(p) = procs.get_mut(&f.ch) {
                p.eof_asked = true;
                flush_stdin(p);
            }
        }
        Kind::Signal => {
            if let (Some(p), Ok(b)) = (procs.get(&f.ch), <[u8; 4]>::try_from(&f.payload[..])) {
                signal_group(p, i32::from_le_bytes(b));
            }
        }
        Kind::Close => {
            if let Some(mut p) = procs.remove(&f.ch) {
                signal_group(&p, libc::SIGKILL); // reaped by `reap` like any orphan
                drop_fds(&mut p);
            }
        }
        Kind::Ping => frame::encode(out, 0, Kind::Hello, b""),
        Kind::TimeQuery => frame::encode(out, f.ch, Kind::TimeIs, &realtime_ns().to_le_bytes()),
        Kind::TimeStep => {
            if let Ok(b) = <[u8; 8]>::try_from(&f.payload[..]) {
                step_clock(i64::from_le_bytes(b));
            }
            frame::encode(out, f.ch, Kind::TimeIs, &realtime_ns().to_le_bytes());
        }
        _ => {} // guest-to-host kinds: not for us
    }
}

fn signal_group(p: &Proc, sig: i32) {
    if p.status.is_none() {
        // SAFETY: kill(2) on the process group the child leads.
        unsafe {
            libc::kill(-(p.child.id() as libc::pid_t), sig);
        }
    }
}

/// Write what is pending to the program's stdin; close it once the host asked
/// and nothing is left (a pty gets ^D instead: its master is also the output).
fn flush_stdin(p: &mut Proc) {
    let Some(i) = p.stdin else {
        p.pending.clear();
        return;
    };
    while !p.pending.is_empty() {
        match sys::write_some(i, &p.pending) {
            Ok(0) => return,
            Ok(n) => {
                p.pending.drain(..n);
            }
            Err(_) => {
                p.pending.clear(); // the program closed its stdin
                break;
            }
        }
    }
    if p.eof_asked {
        if p.pty {
            let _ = sys::write_some(i, &[4]);
        } else {
            sys::close(i);
        }
        p.stdin = None;
    }
}

fn close_output(p: &mut Proc, stdout: bool) {
    let fd = if stdout { p.out.take() } else { p.err.take() };
    if let Some(fd) = fd {
        if p.pty && p.stdin == Some(fd) {
            p.stdin = None;
        }
        sys::close(fd);
    }
}

fn drop_fds(p: &mut Proc) {
    let pty_master = if p.pty { p.out } else { None };
    for fd in [p.out.take(), p.err.take()].into_iter().flatten() {
        sys::close(fd);
    }
    if let Some(i) = p.stdin.take() {
        if Some(i) != pty_master {
            sys::close(i);
        }
    }
}

/// Report every program that ended and whose output is complete.
fn reap(procs: &mut BTreeMap<u32, Proc>, out: &mut Vec<u8>) {
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid(2) with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG) };
        if pid <= 0 {
            break;
        }
        if let Some(p) = procs
            .values_mut()
            .find(|p| p.child.id() as libc::pid_t == pid)
        {
            p.status = Some(st);
        }
    }
    let mut done = Vec::new();
    for (&ch, p) in procs.iter_mut() {
        if let (Some(st), true) = (p.status, p.outputs_done()) {
            frame::encode(out, ch, Kind::Exit, &st.to_le_bytes());
            done.push(ch);
        }
    }
    for ch in done {
        if let Some(mut p) = procs.remove(&ch) {
            drop_fds(&mut p);
        }
    }
}

fn os(b: &[u8]) -> &std::ffi::OsStr {
    std::ffi::OsStr::from_bytes(b)
}

/// Start a program as `spec` says, in a session of its own.
fn start(spec: &Spec) -> io::Result<Proc> {
    let mut cmd = Command::new(os(&spec.argv[0]));
    cmd.args(spec.argv[1..].iter().map(|a| os(a)));
    cmd.env_clear();
    let mut has_tmpdir = false;
    for e in &spec.env {
        if let Some(eq) = e.iter().position(|&c| c == b'=') {
            has_tmpdir |= &e[..eq] == b"TMPDIR";
            cmd.env(os(&e[..eq]), os(&e[eq + 1..]));
        }
    }
    // In a guest, /tmp is the host's over 9p, where a file unlinked while open is
    // lost: the guest's /init names a tmpfs directory for anonymous temporary files.
    if let (false, Some(dir)) = (has_tmpdir, std::env::var_os("FIDELNET_GUEST_TMPDIR")) {
        cmd.env("TMPDIR", dir);
    }
    if !spec.cwd.is_empty() {
        cmd.current_dir(os(&spec.cwd));
    }
    let pty = spec.pty;
    let mut master: Option<RawFd> = None;
    if pty {
        let (m, s) = openpty()?;
        // SAFETY: `s` is a fresh descriptor this function owns; each File owns a dup.
        let slave = unsafe { File::from_raw_fd(s) };
        cmd.stdin(Stdio::from(slave.try_clone()?));
        cmd.stdout(Stdio::from(slave.try_clone()?));
        cmd.stderr(Stdio::from(slave));
        master = Some(m);
    } else {
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
    }
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if libc::setsid() < 0 {
                return Err(io::Error::last_os_error());
            }
            if pty && libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            if let Some(m) = master {
                sys::close(m);
            }
            return Err(io::Error::new(
                e.kind(),
                format!("{}: {e}", String::from_utf8_lossy(&spec.argv[0])),
            ));
        }
    };
    let (stdin, out, err) = match master {
        Some(m) => (Some(m), Some(m), None),
        None => (
            child.stdin.take().map(IntoRawFd::into_raw_fd),
            child.stdout.take().map(IntoRawFd::into_raw_fd),
            child.stderr.take().map(IntoRawFd::into_raw_fd),
        ),
    };
    for fd in [stdin, out, err].into_iter().flatten() {
        sys::set_nonblocking(fd, true)?;
    }
    Ok(Proc {
        child,
        stdin,
        pending: Vec::new(),
        eof_asked: false,
        out,
        err,
        pty,
        status: None,
    })
}

/// A new pty pair (master, slave), the slave with echo off as a node's shell
/// expects (the host's side sends the commands; it does not want them back).
fn openpty() -> io::Result<(RawFd, RawFd)> {
    let (mut m, mut s) = (-1, -1);
    // SAFETY: openpty writes two descriptors; the other pointers may be null.
    let rc = unsafe {
        libc::openpty(
            &mut m,
            &mut s,
            std::ptr::null_mut(),
            std::ptr::null(),
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: termios is plain data; tcgetattr fills it.
    let mut t: libc::termios = unsafe { std::mem::zeroed() };
    // SAFETY: `s` is the slave just opened.
    unsafe {
        if libc::tcgetattr(s, &mut t) == 0 {
            t.c_lflag &= !libc::ECHO;
            libc::tcsetattr(s, libc::TCSANOW, &t);
        }
        libc::fcntl(m, libc::F_SETFD, libc::FD_CLOEXEC);
    }
    Ok((m, s))
}

/// CLOCK_REALTIME in ns.
pub fn realtime_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime fills `ts`.
    unsafe {
        libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts);
    }
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Step CLOCK_REALTIME by `delta` ns (the host measured the offset).
fn step_clock(delta: i64) {
    let t = realtime_ns().saturating_add(delta);
    let ts = libc::timespec {
        tv_sec: t.div_euclid(1_000_000_000) as libc::time_t,
        tv_nsec: t.rem_euclid(1_000_000_000) as libc::c_long,
    };
    // SAFETY: clock_settime with a valid timespec; a failure leaves the clock as it was.
    unsafe {
        libc::clock_settime(libc::CLOCK_REALTIME, &ts);
    }
}
