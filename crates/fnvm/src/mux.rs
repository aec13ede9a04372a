//! The host-side multiplexer: one per VM. It holds the one connection QEMU's
//! chardev socket accepts (the guest agent's serial port) and serves any number
//! of clients on a Unix socket of its own, each on a channel of its own.
//!
//! A client that goes away has its program killed in the guest (Close). When the
//! guest's side ends (the VM stopped), every client is disconnected.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::io::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use crate::frame::{self, Decoder, Kind};
use crate::sys;

struct Client {
    sock: UnixStream,
    dec: Decoder,
    out: Vec<u8>, // frames not yet written to it
    pinged: bool, // waits for the agent's Hello
    gone: bool,   // read side ended: flush `out`, then drop
}

/// Connect to the agent's chardev socket at `agent` (retrying while QEMU starts,
/// up to `connect_timeout`), listen on `listen`, and serve until the guest's side
/// ends.
pub fn serve(agent: &Path, listen: &Path, connect_timeout: Duration) -> io::Result<()> {
    let start = Instant::now();
    let upstream = loop {
        match UnixStream::connect(agent) {
            Ok(s) => break s,
            Err(e) if start.elapsed() < connect_timeout => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{}: {e}", agent.display()),
                ))
            }
        }
    };
    let _ = std::fs::remove_file(listen);
    let listener = UnixListener::bind(listen)?;
    listener.set_nonblocking(true)?;
    let up = upstream.as_raw_fd();
    let mut up_out: Vec<u8> = Vec::new();
    sys::set_nonblocking(up, true)?;
    let mut up_dec = Decoder::default();
    let mut ready = false;
    let mut clients: BTreeMap<u32, Client> = BTreeMap::new();
    let mut next_ch: u32 = 1;
    let mut buf = vec![0u8; frame::CHUNK];
    loop {
        let mut fds = vec![
            sys::pfd(
                up,
                libc::POLLIN | if up_out.is_empty() { 0 } else { libc::POLLOUT },
            ),
            sys::pfd(listener.as_raw_fd(), libc::POLLIN),
        ];
        let order: Vec<u32> = clients.keys().copied().collect();
        for ch in &order {
            let c = &clients[ch];
            let mut ev = if c.gone { 0 } else { libc::POLLIN };
            if !c.out.is_empty() {
                ev |= libc::POLLOUT;
            }
            fds.push(sys::pfd(c.sock.as_raw_fd(), ev));
        }
        sys::poll(&mut fds, -1)?;
        if fds[0].revents & libc::POLLOUT != 0 {
            let n = sys::write_some(up, &up_out)?;
            up_out.drain(..n);
        }
        if fds[0].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            let n = sys::read(up, &mut buf)?;
            if n == 0 {
                return Ok(()); // the VM is gone: dropping the clients disconnects them
            }
            up_dec.feed(&buf[..n]);
            while let Some(f) = up_dec.next_frame()? {
                if f.kind == Kind::Hello {
                    ready = true;
                    for c in clients.values_mut().filter(|c| c.pinged) {
                        frame::encode(&mut c.out, 0, Kind::Hello, b"");
                        c.pinged = false;
                    }
                } else if let Some(c) = clients.get_mut(&f.ch) {
                    frame::encode(&mut c.out, 0, f.kind, &f.payload);
                }
            }
        }
        if fds[1].revents != 0 {
            while let Ok((sock, _)) = listener.accept() {
                sock.set_nonblocking(true)?;
                let ch = next_ch;
                next_ch = next_ch.wrapping_add(1).max(1);
                clients.insert(
                    ch,
                    Client {
                        sock,
                        dec: Decoder::default(),
                        out: Vec::new(),
                        pinged: false,
                        gone: false,
                    },
                );
            }
        }
        for (k, ch) in order.iter().enumerate() {
            let rev = fds[k + 2].revents;
            if rev == 0 {
                continue;
            }
            let Some(c) = clients.get_mut(ch) else {
                continue;
            };
            let fd = c.sock.as_raw_fd();
            if rev & libc::POLLOUT != 0 && !c.out.is_empty() {
                match sys::write_some(fd, &c.out) {
                    Ok(n) => {
                        c.out.drain(..n);
                    }
                    Err(_) => c.gone = true,
                }
            }
            if !c.gone && rev & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
                let n = sys::read(fd, &mut buf).unwrap_or(0);
                if n == 0 {
                    c.gone = true;
                } else {
                    c.dec.feed(&buf[..n]);
                    loop {
                        match c.dec.next_frame() {
                            Ok(Some(f)) if f.kind == Kind::Ping => {
                                if ready {
                                    frame::encode(&mut c.out, 0, Kind::Hello, b"");
                                } else {
                                    c.pinged = true;
                                }
                            }
                            Ok(Some(f)) => frame::encode(&mut up_out, *ch, f.kind, &f.payload),
                            Ok(None) => break,
                            Err(_) => {
                                c.gone = true;
                                break;
                            }
                        }
                    }
                }
            }
            if c.gone {
                // Whatever it started in the guest ends with it.
                frame::encode(&mut up_out, *ch, Kind::Close, b"");
                clients.remove(ch);
            }
        }
    }
}
