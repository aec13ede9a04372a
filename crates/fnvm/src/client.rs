//! The host-side client: runs one program in the guest through the multiplexer,
//! as if it ran here. Its stdin goes to the program; the program's stdout and
//! stderr come out of this process's; its exit status is this process's (128 +
//! the signal when a signal ended it, as a shell reports it). SIGINT, SIGTERM,
//! SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are passed on to the program; if this
//! process is killed, the multiplexer kills the program.
//!
//! With a pty (a node's shell), a terminal on stdin is put in raw mode, so that
//! every byte, ^C included, reaches the guest's pty, whose line discipline is the
//! one that applies.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

use crate::frame::{self, Decoder, Kind, Spec};
use crate::sys;

/// Exit status when the program could not be started in the guest.
pub const EXIT_NOT_STARTED: i32 = 127;
/// Exit status when the VM or its multiplexer went away.
pub const EXIT_LOST: i32 = 255;

static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; a full pipe only loses a signal.
        unsafe {
            libc::write(fd, (&b as *const u8).cast(), 1);
        }
    }
}

/// Wait until the agent behind `sock` answers (the socket may not exist yet).
pub fn wait_ready(sock: &Path, timeout: Duration) -> io::Result<()> {
    let start = Instant::now();
    let left = |start: Instant| timeout.saturating_sub(start.elapsed());
    let stream = loop {
        match UnixStream::connect(sock) {
            Ok(s) => break s,
            Err(_) if !left(start).is_zero() => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e),
        }
    };
    let mut wire = Vec::new();
    frame::encode(&mut wire, 0, Kind::Ping, b"");
    sys::write_all(stream.as_raw_fd(), &wire)?;
    let mut dec = Decoder::default();
    let mut buf = [0u8; 256];
    loop {
        let ms = left(start).as_millis().min(i32::MAX as u128) as i32;
        if ms == 0 {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the guest agent did not answer",
            ));
        }
        let mut p = [sys::pfd(stream.as_raw_fd(), libc::POLLIN)];
        sys::poll(&mut p, ms)?;
        if p[0].revents == 0 {
            continue;
        }
        let n = sys::read(stream.as_raw_fd(), &mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the multiplexer went away",
            ));
        }
        dec.feed(&buf[..n]);
        if let Some(f) = dec.next_frame()? {
            if f.kind == Kind::Hello {
                return Ok(());
            }
        }
    }
}

/// Run `argv` in the guest; returns the exit status to exit with.
pub fn run(sock: &Path, pty: bool, cwd: &[u8], argv: Vec<Vec<u8>>) -> i32 {
    match run_inner(sock, pty, cwd, argv) {
        Ok(code) => code,
        Err(e) => {
            let _ = sys::write_all(2, format!("fidelnet-vm: {e}\n").as_bytes());
            EXIT_LOST
        }
    }
}

fn run_inner(sock: &Path, pty: bool, cwd: &[u8], argv: Vec<Vec<u8>>) -> io::Result<i32> {
    let stream = UnixStream::connect(sock)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", sock.display())))?;
    let s = stream.as_raw_fd();
    let env = std::env::vars_os()
        .map(|(k, v)| {
            let mut e = k.as_bytes().to_vec();
            e.push(b'=');
            e.extend_from_slice(v.as_bytes());
            e
        })
        .collect();
    let spec = Spec {
        pty,
        cwd: cwd.to_vec(),
        env,
        argv,
    };
    let mut wire = Vec::new();
    frame::encode(&mut wire, 0, Kind::Open, &spec.encode());
    sys::write_all(s, &wire)?;

    let (sig_r, sig_w) = pipe()?;
    SIGNAL_PIPE.store(sig_w, Ordering::Relaxed);
    for sig in FORWARDED {
        // SAFETY: installing a handler that only writes to a pipe.
        unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    let _raw = if pty { RawMode::enter(0) } else { None };
    let mut stdin_open = true;
    let mut dec = Decoder::default();
    let mut buf = vec![0u8; frame::CHUNK];
    loop {
        let mut fds = vec![sys::pfd(s, libc::POLLIN), sys::pfd(sig_r, libc::POLLIN)];
        if stdin_open {
            fds.push(sys::pfd(0, libc::POLLIN));
        }
        sys::poll(&mut fds, -1)?;
        let mut out = Vec::new();
        if fds[1].revents != 0 {
            let mut sigs = [0u8; 16];
            let n = sys::read(sig_r, &mut sigs)?;
            for &sig in &sigs[..n] {
                frame::encode(&mut out, 0, Kind::Signal, &i32::from(sig).to_le_bytes());
            }
        }
        if stdin_open && fds[2].revents != 0 {
            let n = sys::read(0, &mut buf).unwrap_or(0);
            if n == 0 {
                stdin_open = false;
                frame::encode(&mut out, 0, Kind::Eof, b"");
            } else {
                frame::encode(&mut out, 0, Kind::Data, &buf[..n]);
            }
        }
        if !out.is_empty() {
            sys::write_all(s, &out)?;
        }
        if fds[0].revents != 0 {
            let n = sys::read(s, &mut buf)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the VM went away",
                ));
            }
            dec.feed(&buf[..n]);
            while let Some(f) = dec.next_frame()? {
                match f.kind {
                    Kind::Out => sys::write_all(1, &f.payload)?,
                    Kind::Err => sys::write_all(2, &f.payload)?,
                    Kind::Failed => {
                        let mut msg = b"fidelnet-vm: cannot start in the guest: ".to_vec();
                        msg.extend_from_slice(&f.payload);
                        msg.push(b'\n');
                        sys::write_all(2, &msg)?;
                        return Ok(EXIT_NOT_STARTED);
                    }
                    Kind::Exit => {
                        let b: [u8; 4] = f.payload[..].try_into().unwrap_or([0xff; 4]);
                        return Ok(status_code(i32::from_le_bytes(b)));
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A wait status as a shell's `$?`.
pub fn status_code(st: i32) -> i32 {
    if libc::WIFEXITED(st) {
        libc::WEXITSTATUS(st)
    } else if libc::WIFSIGNALED(st) {
        128 + libc::WTERMSIG(st)
    } else {
        EXIT_LOST
    }
}

fn pipe() -> io::Result<(i32, i32)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// A terminal in raw mode until dropped.
struct RawMode {
    fd: i32,
    saved: libc::termios,
}

impl RawMode {
    fn enter(fd: i32) -> Option<RawMode> {
        // SAFETY: termios is plain data; isatty/tcgetattr/tcsetattr on `fd`.
        unsafe {
            if libc::isatty(fd) != 1 {
                return None;
            }
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(fd, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            libc::cfmakeraw(&mut raw);
            libc::tcsetattr(fd, libc::TCSANOW, &raw);
            Some(RawMode { fd, saved })
        }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        // SAFETY: restoring what `enter` read.
        unsafe {
            libc::tcsetattr(self.fd, libc::TCSANOW, &self.saved);
        }
    }
}

/// One exchange: (host time sent, guest time, host time received), ns.
fn time_round(
    fd: i32,
    dec: &mut Decoder,
    kind: Kind,
    payload: &[u8],
) -> io::Result<(i64, i64, i64)> {
    let mut wire = Vec::new();
    frame::encode(&mut wire, 0, kind, payload);
    let t1 = crate::agent::realtime_ns();
    sys::write_all(fd, &wire)?;
    let mut buf = [0u8; 256];
    loop {
        if let Some(f) = dec.next_frame()? {
            let t3 = crate::agent::realtime_ns();
            if f.kind == Kind::TimeIs {
                let b: [u8; 8] = f.payload[..]
                    .try_into()
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad time"))?;
                return Ok((t1, i64::from_le_bytes(b), t3));
            }
            continue;
        }
        let n = sys::read(fd, &mut buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the VM went away",
            ));
        }
        dec.feed(&buf[..n]);
    }
}

/// Set the guest's CLOCK_REALTIME to the host's: the offset from the exchange of
/// `rounds` with the shortest round trip (NTP's rule), one step, then a check.
/// Returns (offset found ns, its round trip ns, offset left after the step ns).
pub fn sync_clock(sock: &Path, rounds: u32) -> io::Result<(i64, i64, i64)> {
    let stream = UnixStream::connect(sock)?;
    let fd = stream.as_raw_fd();
    let mut dec = Decoder::default();
    let best = |dec: &mut Decoder| -> io::Result<(i64, i64)> {
        let mut best: Option<(i64, i64)> = None;
        for _ in 0..rounds.max(1) {
            let (t1, t2, t3) = time_round(fd, dec, Kind::TimeQuery, b"")?;
            let rtt = t3 - t1;
            let offset = t2 - (t1 + t3) / 2;
            if best.map_or(true, |(_, r)| rtt < r) {
                best = Some((offset, rtt));
            }
        }
        Ok(best.unwrap_or((0, 0)))
    };
    let (offset, rtt) = best(&mut dec)?;
    let mut step = offset;
    let mut left = 0;
    // A first large step was seen to land a few hundred microseconds off; step again
    // (at most twice more) while what is left exceeds what the round trip can tell.
    for _ in 0..3 {
        time_round(fd, &mut dec, Kind::TimeStep, &(-step).to_le_bytes())?;
        left = best(&mut dec)?.0;
        if left.abs() <= rtt / 2 {
            break;
        }
        step = left;
    }
    Ok((offset, rtt, left))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_statuses_read_as_a_shell_reads_them() {
        assert_eq!(status_code(0), 0);
        assert_eq!(status_code(3 << 8), 3);
        assert_eq!(status_code(libc::SIGKILL), 128 + 9);
    }
}
