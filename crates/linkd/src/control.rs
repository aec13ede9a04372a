//! Control connections: accepting clients, reading request lines, writing
//! replies. Each connection's requests are answered in order; the loop never
//! blocks on a client (replies wait in the connection's buffer).

use std::io::{self, Read, Write};
use std::os::fd::AsFd;

use nix::sys::epoll::{EpollEvent, EpollFlags};

use crate::daemon::{conn_token, Conn, Daemon, CONN_READ_BUDGET, MAX_LINE, MAX_OUTBUF};
use crate::endpoint::Opener;
use crate::log;
use crate::protocol;
use crate::state::{MAX_CONNS, MAX_REQUESTS_PER_TURN};

impl<O: Opener> Daemon<O> {
    pub(crate) fn accept(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        loop {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    if self.conns.len() >= MAX_CONNS {
                        // Told why, then closed (a blocking write of one short
                        // line to a fresh socket's empty buffer cannot block).
                        let _ = stream.write_all(&protocol::reply(
                            None,
                            Err(format!(
                                "control: {MAX_CONNS} connections are open, the most linkd \
                                 serves; closing this one"
                            )),
                        ));
                        if self.refused.is_power_of_two() {
                            log!("control: refused a connection: {MAX_CONNS} are open");
                        }
                        self.refused += 1;
                        continue;
                    }
                    if let Err(e) = stream.set_nonblocking(true) {
                        log!("control: cannot make a connection non-blocking: {e}");
                        continue;
                    }
                    let id = self.next_conn;
                    self.next_conn += 1;
                    let interest = EpollFlags::EPOLLIN;
                    if let Err(e) = self
                        .epoll
                        .add(&stream, EpollEvent::new(interest, conn_token(id)))
                    {
                        log!("control: cannot watch a connection: {e}");
                        continue;
                    }
                    self.conns.insert(
                        id,
                        Conn {
                            stream,
                            inbuf: Vec::new(),
                            outbuf: Vec::new(),
                            eof: false,
                            interest,
                            pending: false,
                        },
                    );
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // EMFILE and the like: leave the rest in the backlog.
                    log!("control: accept failed: {e}");
                    break;
                }
            }
        }
    }

    pub(crate) fn conn_event(&mut self, id: u64, flags: EpollFlags) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let readable = EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR;
        if flags.intersects(readable) && !conn.eof && !conn.pending {
            let mut budget = CONN_READ_BUDGET;
            while budget > 0 {
                match conn.stream.read(&mut self.buf) {
                    Ok(0) => {
                        conn.eof = true;
                        break;
                    }
                    Ok(n) => {
                        conn.inbuf.extend_from_slice(&self.buf[..n]);
                        budget = budget.saturating_sub(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        log!("control: connection read failed: {e}");
                        self.close_conn(id);
                        return;
                    }
                }
            }
            self.serve_lines(id);
        }
        self.flush_conn(id);
    }

    /// Answer the requests that waited for their turn, one share
    /// ([`MAX_REQUESTS_PER_TURN`]) per connection.
    pub(crate) fn serve_pending(&mut self) {
        let ids: Vec<u64> = self
            .conns
            .iter()
            .filter(|(_, c)| c.pending)
            .map(|(&id, _)| id)
            .collect();
        for id in ids {
            self.serve_lines(id);
            self.flush_conn(id);
        }
    }

    /// Whether a connection has requests waiting for the next turn.
    pub(crate) fn any_pending(&self) -> bool {
        self.conns.values().any(|c| c.pending)
    }

    /// Answer up to [`MAX_REQUESTS_PER_TURN`] complete lines of connection
    /// `id`'s input; more wait for the next turn (`pending`).
    fn serve_lines(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let inbuf = std::mem::take(&mut conn.inbuf);
        let eof = conn.eof;
        let mut out = Vec::new();
        let mut start = 0;
        let mut served = 0;
        let mut pending = false;
        while self.shutdown.is_none() {
            let Some(len) = inbuf[start..].iter().position(|&b| b == b'\n') else {
                break;
            };
            if served == MAX_REQUESTS_PER_TURN {
                pending = true;
                break;
            }
            out.extend(self.serve_line(&inbuf[start..start + len]));
            served += 1;
            start += len + 1;
        }
        let mut rest = inbuf[start..].to_vec();
        let mut eof_now = eof;
        if self.shutdown.is_none() && !pending {
            if eof && !rest.is_empty() {
                // A last request without its newline.
                out.extend(self.serve_line(&rest));
                rest.clear();
            } else if rest.len() > MAX_LINE {
                out.extend(protocol::reply(
                    None,
                    Err(format!(
                        "request line longer than {MAX_LINE} bytes; closing the connection"
                    )),
                ));
                rest.clear();
                eof_now = true;
            }
        }
        if let Some(conn) = self.conns.get_mut(&id) {
            conn.inbuf = rest;
            conn.outbuf.extend(out);
            conn.eof = eof_now;
            conn.pending = pending;
        }
    }

    /// Answer one request line; blank lines get no reply.
    fn serve_line(&mut self, line: &[u8]) -> Vec<u8> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        self.handle_line(line)
    }

    /// Parse and execute one request line; return the reply line.
    pub fn handle_line(&mut self, line: &[u8]) -> Vec<u8> {
        let parsed = protocol::parse(line);
        let result = parsed.request.and_then(|r| self.dispatch(r));
        protocol::reply(parsed.id, result)
    }

    /// Send what connection `id` has pending, then watch it for what it
    /// needs next (more input, room to write) or close it.
    fn flush_conn(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let mut sent = 0;
        while sent < conn.outbuf.len() {
            match conn.stream.write(&conn.outbuf[sent..]) {
                Ok(n) => sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // The client went away (EPIPE, ECONNRESET).
                    self.close_conn(id);
                    return;
                }
            }
        }
        conn.outbuf.drain(..sent);
        if conn.outbuf.len() > MAX_OUTBUF {
            log!("control: a client is not reading its replies; closing its connection");
            self.close_conn(id);
            return;
        }
        if conn.eof && conn.outbuf.is_empty() && !conn.pending {
            self.close_conn(id);
            return;
        }
        let mut interest = EpollFlags::empty();
        if !conn.eof && !conn.pending {
            interest |= EpollFlags::EPOLLIN;
        }
        if !conn.outbuf.is_empty() {
            interest |= EpollFlags::EPOLLOUT;
        }
        if interest != conn.interest {
            let mut ev = EpollEvent::new(interest, conn_token(id));
            if self.epoll.modify(&conn.stream, &mut ev).is_ok() {
                conn.interest = interest;
            }
        }
    }

    fn close_conn(&mut self, id: u64) {
        if let Some(conn) = self.conns.remove(&id) {
            let _ = self.epoll.delete(&conn.stream);
        }
    }

    /// Close every connection (after a last attempt to send their replies)
    /// and every link (destroying the endpoints).
    pub(crate) fn close_all(&mut self) {
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for id in ids {
            self.flush_conn(id);
            self.close_conn(id);
        }
        let n = self.links.len();
        for (_, link) in self.links.drain() {
            for (side, end) in link.ends.iter().enumerate() {
                if !link.gone[side] {
                    let _ = self.epoll.delete(end.as_fd());
                }
            }
        }
        self.names.clear();
        if n > 0 {
            log!("closed {n} link(s)");
        }
        if let Some(mut pool) = self.pool.take() {
            pool.stop();
        }
    }
}
