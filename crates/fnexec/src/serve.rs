//! `fidelnet-exec --serve FD`: start many programs in nodes from one small
//! process, without a fork of the (large) caller and an exec of this binary
//! for each.
//!
//! A caller that starts hundreds of node shells pays, for each, a fork of
//! itself and two execs (this launcher, then the program). Served, each
//! start is a fork of this process (a few pages) and one exec: the child
//! runs the same setup as a plain `fidelnet-exec` (the same parser, the same
//! order) and execs the program.
//!
//! Protocol, on FD (a `SOCK_SEQPACKET` Unix socket, one message per request):
//! a request is `u32 nargs` (native endian) then `nargs` NUL-terminated
//! arguments, exactly what would follow `fidelnet-exec` on a command line
//! (options, `--`, program, its arguments), then NUL-terminated `KEY=VALUE`
//! environment entries up to the end of the message (the program gets only
//! those). At most one descriptor may come with it (`SCM_RIGHTS`): it becomes
//! the child's stdin, stdout and stderr (a pty slave, say). The reply is one
//! `i32`: the child's pid, or a negative errno when it could not be forked or
//! the request was malformed. A setup or exec failure in the child is the
//! child's: it writes the message to its stderr and exits 125/126/127, as a
//! plain `fidelnet-exec` would.
//!
//! The server reaps its children (their exit statuses are not reported; a
//! caller watches a child through a pidfd) and exits when the caller closes
//! its end.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;

/// Largest request: arguments and environment together.
const MAX_REQUEST: usize = 256 * 1024;

/// A decoded request.
#[derive(Debug, PartialEq, Eq)]
pub struct Request {
    /// The `fidelnet-exec` arguments.
    pub args: Vec<OsString>,
    /// `KEY=VALUE` entries.
    pub env: Vec<OsString>,
}

/// Decode one request's bytes.
pub fn decode(msg: &[u8]) -> Result<Request, &'static str> {
    if msg.len() < 4 {
        return Err("request shorter than its argument count");
    }
    let nargs = u32::from_ne_bytes([msg[0], msg[1], msg[2], msg[3]]) as usize;
    let body = &msg[4..];
    if matches!(body.last(), Some(b) if *b != 0) {
        return Err("request does not end with NUL");
    }
    let mut items: Vec<OsString> = if body.is_empty() {
        Vec::new()
    } else {
        body[..body.len() - 1]
            .split(|b| *b == 0)
            .map(|s| OsStr::from_bytes(s).to_os_string())
            .collect()
    };
    if nargs == 0 || items.len() < nargs {
        return Err("fewer arguments than announced");
    }
    let env = items.split_off(nargs);
    if env.iter().any(|e| !e.as_bytes().contains(&b'=')) {
        return Err("an environment entry without '='");
    }
    Ok(Request { args: items, env })
}

/// Receive one message and at most one descriptor; `Ok(None)` at EOF.
fn receive(sock: libc::c_int, buf: &mut [u8]) -> io::Result<Option<(usize, Option<libc::c_int>)>> {
    // Room for one SCM_RIGHTS descriptor (CMSG_SPACE(sizeof(int)) <= 32 here).
    let mut cmsg = [0u64; 4];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the fields set point at live buffers.
    let mut hdr: libc::msghdr = unsafe { std::mem::zeroed() };
    hdr.msg_iov = &mut iov;
    hdr.msg_iovlen = 1;
    hdr.msg_control = cmsg.as_mut_ptr().cast();
    hdr.msg_controllen = std::mem::size_of_val(&cmsg) as _;
    // SAFETY: `hdr` describes buffers that outlive the call.
    let n = unsafe { libc::recvmsg(sock, &mut hdr, libc::MSG_CMSG_CLOEXEC) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n == 0 {
        return Ok(None);
    }
    let mut fd = None;
    // SAFETY: CMSG_* walk the control buffer the kernel filled in `hdr`.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&hdr);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let got: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                if fd.is_some() {
                    libc::close(got); // one descriptor only: refuse the rest
                } else {
                    fd = Some(got);
                }
            }
            c = libc::CMSG_NXTHDR(&hdr, c);
        }
    }
    if hdr.msg_flags & libc::MSG_TRUNC != 0 {
        if let Some(f) = fd {
            // SAFETY: closing a descriptor this process received and owns.
            unsafe { libc::close(f) };
        }
        return Err(io::Error::from_raw_os_error(libc::EMSGSIZE));
    }
    Ok(Some((n as usize, fd)))
}

fn reply(sock: libc::c_int, value: i32) {
    let bytes = value.to_ne_bytes();
    // SAFETY: sending 4 bytes from a live array. A caller gone is seen at the next receive.
    unsafe { libc::send(sock, bytes.as_ptr().cast(), bytes.len(), libc::MSG_NOSIGNAL) };
}

fn reap() {
    // SAFETY: waitpid on any child, without blocking.
    while unsafe { libc::waitpid(-1, std::ptr::null_mut(), libc::WNOHANG) } > 0 {}
}

/// In the child: stdio from `fd`, the request's environment, then the same
/// setup and exec as a plain `fidelnet-exec`. Never returns.
fn child(
    sock: libc::c_int,
    fd: Option<libc::c_int>,
    req: Request,
    run: fn(&[OsString]) -> i32,
) -> ! {
    // SAFETY: single-threaded child after fork: plain libc calls on its own
    // descriptors and environment.
    unsafe {
        libc::close(sock);
        if let Some(f) = fd {
            for target in 0..3 {
                if libc::dup2(f, target) < 0 {
                    libc::_exit(crate::launch::EXIT_SETUP);
                }
            }
            if f > 2 {
                libc::close(f);
            }
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::clearenv();
    }
    for entry in &req.env {
        let bytes = entry.as_bytes();
        let eq = bytes.iter().position(|b| *b == b'=').unwrap_or(0);
        std::env::set_var(
            OsStr::from_bytes(&bytes[..eq]),
            OsStr::from_bytes(&bytes[eq + 1..]),
        );
    }
    let code = run(&req.args);
    // SAFETY: leave without running the parent's atexit handlers or flushing its buffers.
    unsafe { libc::_exit(code) }
}

/// Serve requests on `sock` until the caller closes it; returns the exit status.
pub fn serve(sock: libc::c_int, run: fn(&[OsString]) -> i32) -> i32 {
    let mut buf = vec![0u8; MAX_REQUEST];
    loop {
        let mut pfd = libc::pollfd {
            fd: sock,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd. Wake at least every 200 ms to reap children.
        let ready = unsafe { libc::poll(&mut pfd, 1, 200) };
        reap();
        if ready <= 0 {
            continue;
        }
        let (n, fd) = match receive(sock, &mut buf) {
            Ok(Some(got)) => got,
            Ok(None) => return 0,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => continue,
            Err(e) if e.raw_os_error() == Some(libc::EMSGSIZE) => {
                reply(sock, -libc::EMSGSIZE);
                continue;
            }
            Err(_) => return 1,
        };
        let req = match decode(&buf[..n]) {
            Ok(r) => r,
            Err(_) => {
                if let Some(f) = fd {
                    // SAFETY: a descriptor this process received and owns.
                    unsafe { libc::close(f) };
                }
                reply(sock, -libc::EINVAL);
                continue;
            }
        };
        // SAFETY: this process is single-threaded; the child only runs
        // async-signal-safe libc calls before it execs (setup is the same code
        // a plain fidelnet-exec runs after its own start).
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            child(sock, fd, req, run);
        }
        if let Some(f) = fd {
            // SAFETY: the child has its copy; this one is ours to close.
            unsafe { libc::close(f) };
        }
        reply(
            sock,
            if pid > 0 {
                pid
            } else {
                -io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EAGAIN)
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(args: &[&str], env: &[&str]) -> Vec<u8> {
        let mut m = (args.len() as u32).to_ne_bytes().to_vec();
        for s in args.iter().chain(env) {
            m.extend_from_slice(s.as_bytes());
            m.push(0);
        }
        m
    }

    #[test]
    fn decodes_arguments_and_environment() {
        let r = decode(&msg(
            &["--net", "/run/netns/h1", "--", "bash"],
            &["PS1=x", "A=b=c"],
        ))
        .unwrap();
        assert_eq!(
            r.args,
            ["--net", "/run/netns/h1", "--", "bash"].map(OsString::from)
        );
        assert_eq!(r.env, ["PS1=x", "A=b=c"].map(OsString::from));
        let r = decode(&msg(&["--", "true"], &[])).unwrap();
        assert!(r.env.is_empty());
    }

    #[test]
    fn refuses_malformed_requests() {
        assert!(decode(b"\x01").is_err());
        assert!(decode(&msg(&[], &["A=b"])).is_err()); // no argument at all
        let mut m = msg(&["--", "true"], &[]);
        m[0] = 5; // more arguments announced than sent
        assert!(decode(&m).is_err());
        let mut m = msg(&["--", "true"], &[]);
        m.pop(); // not NUL-terminated
        assert!(decode(&m).is_err());
        assert!(decode(&msg(&["--", "true"], &["NOEQUALS"])).is_err());
    }
}
