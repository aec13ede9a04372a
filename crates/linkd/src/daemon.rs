//! The event loop: one thread, one epoll set, one timer.
//!
//! The epoll set (level-triggered) holds the control listener, every control
//! connection, every endpoint's descriptor, a signalfd and one timerfd. Each
//! turn of the loop
//!
//! 1. waits: on epoll alone if no packet is pending, otherwise with the
//!    timerfd armed (`TFD_TIMER_ABSTIME`) at the earliest
//!    [`Direction::next_deadline`] over all directions, or, when that
//!    deadline is within `--spin-us`, without blocking at all (busy-wait);
//! 2. handles what became ready: reads up to `--batch` frames from each
//!    readable endpoint and pushes each into the direction it enters,
//!    serves control requests, notes signals;
//! 3. hands every departure that is due to its egress endpoint, recording
//!    how late it was (see [`Daemon::poll_departures`]).

use std::collections::{BTreeMap, HashMap};
use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use link_core::{Direction, DirectionParams};
use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signalfd::SignalFd;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};
use serde_json::{json, Map, Value};

use crate::endpoint::{Endpoint, Opener};
use crate::log;
use crate::protocol::{self, AddLink, Request, SetLink};

/// Size of the reusable receive buffer: 64 KiB plus room for an Ethernet
/// header, so that even a frame of the largest MTU (65535) fits.
pub const RECV_BUF: usize = 65_536 + 64;

/// Longest request line accepted; a longer one closes the connection.
pub const MAX_LINE: usize = 16 << 20;

/// Unsent replies a connection may accumulate before it is dropped (a
/// client that never reads).
const MAX_OUTBUF: usize = 64 << 20;

/// Bytes read from one control connection per wakeup, for fairness.
const CONN_READ_BUDGET: usize = 1 << 20;

/// Names of the directions, indexed like [`Link::dirs`].
const DIR_NAMES: [&str; 2] = ["ab", "ba"];
/// Names of the endpoints, indexed like [`Link::ends`].
const SIDE_NAMES: [&str; 2] = ["a", "b"];

// Epoll tokens: the low two bits say what the descriptor is, the rest is an
// identifier. Link and connection identifiers are never reused, so a stale
// event for something closed earlier in the same wakeup finds nothing.
const KIND_FIXED: u64 = 0;
const KIND_CONN: u64 = 1;
const KIND_TAP_A: u64 = 2;
const TOKEN_LISTENER: u64 = KIND_FIXED;
const TOKEN_TIMER: u64 = (1 << 2) | KIND_FIXED;
const TOKEN_SIGNAL: u64 = (2 << 2) | KIND_FIXED;

fn conn_token(id: u64) -> u64 {
    (id << 2) | KIND_CONN
}

fn tap_token(link: u64, side: usize) -> u64 {
    (link << 2) | (KIND_TAP_A + side as u64)
}

/// Current `CLOCK_MONOTONIC` time in nanoseconds.
pub fn now_ns() -> u64 {
    let ts = nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .expect("CLOCK_MONOTONIC is always readable");
    // Monotonic time is never negative.
    ts.tv_sec() as u64 * 1_000_000_000 + ts.tv_nsec() as u64
}

/// Tunables from the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// Frames read from one endpoint per wakeup.
    pub batch: usize,
    /// Busy-wait when the next deadline is at most this far away.
    pub spin_ns: u64,
    /// Queue limit (packets) for directions that set no queue limit;
    /// `None` leaves such queues unlimited.
    pub default_queue_packets: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            batch: 64,
            spin_ns: 0,
            default_queue_packets: Some(1000),
        }
    }
}

/// One direction of a link with the daemon's own counters.
struct DirState {
    dir: Direction,
    /// Departures the egress endpoint refused (EIO while it is down,
    /// ENOBUFS, EAGAIN, ...). The frame is lost.
    write_errors: u64,
    /// Failed reads from the ingress endpoint.
    read_errors: u64,
}

/// An engine link: two endpoints and the two directions between them.
/// Direction `ab` (index 0) reads from `a` and writes to `b`; `ba` the
/// reverse, so direction `i` enters at `ends[i]` and leaves at
/// `ends[1 - i]`.
struct Link<E> {
    name: String,
    ends: [E; 2],
    dirs: [DirState; 2],
    /// An endpoint whose read failed for good (e.g. its device was
    /// destroyed under it) is taken out of the epoll set.
    gone: [bool; 2],
}

/// A control connection.
struct Conn {
    stream: UnixStream,
    inbuf: Vec<u8>,
    outbuf: Vec<u8>,
    /// The client will send nothing more; close once `outbuf` is sent.
    eof: bool,
    interest: EpollFlags,
}

/// The daemon: every link, every control connection and the event loop.
pub struct Daemon<O: Opener> {
    opener: O,
    config: Config,
    epoll: Epoll,
    timer: TimerFd,
    /// Absolute expiry the timer is armed at, if armed.
    timer_armed: Option<u64>,
    listener: Option<UnixListener>,
    signals: Option<SignalFd>,
    conns: HashMap<u64, Conn>,
    next_conn: u64,
    links: HashMap<u64, Link<O::Endpoint>>,
    names: BTreeMap<String, u64>,
    next_link: u64,
    buf: Box<[u8]>,
    events: Vec<EpollEvent>,
    /// Why the daemon is stopping, once it is.
    shutdown: Option<String>,
}

fn errno_io(e: Errno) -> io::Error {
    io::Error::from_raw_os_error(e as i32)
}

impl<O: Opener> Daemon<O> {
    /// A daemon with no links, serving `listener` (if any) and stopping on
    /// any signal read from `signals` (if any).
    pub fn new(
        opener: O,
        config: Config,
        listener: Option<UnixListener>,
        signals: Option<SignalFd>,
    ) -> io::Result<Self> {
        let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC).map_err(errno_io)?;
        let timer = TimerFd::new(
            ClockId::CLOCK_MONOTONIC,
            TimerFlags::TFD_NONBLOCK | TimerFlags::TFD_CLOEXEC,
        )
        .map_err(errno_io)?;
        epoll
            .add(&timer, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_TIMER))
            .map_err(errno_io)?;
        if let Some(l) = &listener {
            l.set_nonblocking(true)?;
            epoll
                .add(l, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_LISTENER))
                .map_err(errno_io)?;
        }
        if let Some(s) = &signals {
            epoll
                .add(s, EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_SIGNAL))
                .map_err(errno_io)?;
        }
        Ok(Self {
            opener,
            config: Config {
                batch: config.batch.max(1),
                ..config
            },
            epoll,
            timer,
            timer_armed: None,
            listener,
            signals,
            conns: HashMap::new(),
            next_conn: 1,
            links: HashMap::new(),
            names: BTreeMap::new(),
            next_link: 1,
            buf: vec![0; RECV_BUF].into_boxed_slice(),
            events: vec![EpollEvent::empty(); 256],
            shutdown: None,
        })
    }

    /// Why the daemon is stopping, if it is.
    pub fn shutdown_reason(&self) -> Option<&str> {
        self.shutdown.as_deref()
    }

    /// Serve until a `shutdown` request or a signal, then close every link
    /// and connection.
    pub fn run(&mut self) -> io::Result<()> {
        while self.shutdown.is_none() {
            self.turn(None)?;
        }
        self.close_all();
        Ok(())
    }

    /// One turn of the loop: wait (at most `max_wait`, if given, when no
    /// deadline is nearer), handle what is ready, send what is due.
    pub fn turn(&mut self, max_wait: Option<Duration>) -> io::Result<()> {
        let timeout = self.plan_wait(max_wait)?;
        let n = match self.epoll.wait(&mut self.events, timeout) {
            Ok(n) => n,
            Err(Errno::EINTR) => 0,
            Err(e) => return Err(errno_io(e)),
        };
        for i in 0..n {
            let ev = self.events[i];
            self.handle_event(ev.data(), ev.events());
        }
        self.poll_departures();
        Ok(())
    }

    /// Arm (or disarm) the timer for the next deadline and choose the epoll
    /// timeout: zero when a deadline is due or within the spin window,
    /// otherwise `max_wait` (infinite if `None`).
    fn plan_wait(&mut self, max_wait: Option<Duration>) -> io::Result<EpollTimeout> {
        let idle = match max_wait {
            None => EpollTimeout::NONE,
            Some(d) => EpollTimeout::try_from(d).unwrap_or(EpollTimeout::MAX),
        };
        let Some(deadline) = self.next_deadline() else {
            self.set_timer(None)?;
            return Ok(idle);
        };
        if deadline <= now_ns().saturating_add(self.config.spin_ns) {
            return Ok(EpollTimeout::ZERO);
        }
        self.set_timer(Some(deadline - self.config.spin_ns))?;
        Ok(idle)
    }

    fn set_timer(&mut self, at: Option<u64>) -> io::Result<()> {
        if self.timer_armed == at {
            return Ok(());
        }
        match at {
            // An all-zero expiry would disarm the timer: never ask for 0.
            Some(t) => self.timer.set(
                Expiration::OneShot(TimeSpec::from(Duration::from_nanos(t.max(1)))),
                TimerSetTimeFlags::TFD_TIMER_ABSTIME,
            ),
            None => self.timer.unset(),
        }
        .map_err(errno_io)?;
        self.timer_armed = at;
        Ok(())
    }

    /// Earliest deadline over every direction of every link.
    fn next_deadline(&self) -> Option<u64> {
        self.links
            .values()
            .flat_map(|l| l.dirs.iter().filter_map(|d| d.dir.next_deadline()))
            .min()
    }

    fn handle_event(&mut self, token: u64, flags: EpollFlags) {
        let id = token >> 2;
        match token & 3 {
            KIND_FIXED => match token {
                TOKEN_LISTENER => self.accept(),
                TOKEN_TIMER => self.timer_fired(),
                TOKEN_SIGNAL => self.read_signals(),
                _ => {}
            },
            KIND_CONN => self.conn_event(id, flags),
            kind => self.read_endpoint(id, (kind - KIND_TAP_A) as usize),
        }
    }

    fn timer_fired(&mut self) {
        // Reading clears the expiry count, so the level-triggered set stops
        // reporting it.
        if nix::unistd::read(&self.timer, &mut [0u8; 8]).is_ok() {
            self.timer_armed = None;
        }
    }

    fn read_signals(&mut self) {
        let Some(sfd) = &self.signals else { return };
        while let Ok(Some(info)) = sfd.read_signal() {
            let name = nix::sys::signal::Signal::try_from(info.ssi_signo as i32)
                .map(|s| s.as_str())
                .unwrap_or("signal");
            log!("received {name}: shutting down");
            self.shutdown = Some(name.to_owned());
        }
    }

    /// Read up to `batch` frames from endpoint `side` of link `id` and push
    /// each, timestamped as it is read, into the direction it enters.
    fn read_endpoint(&mut self, id: u64, side: usize) {
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        if link.gone[side] {
            return;
        }
        for _ in 0..self.config.batch {
            match link.ends[side].recv(&mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    let now = now_ns();
                    link.dirs[side].dir.push(now, self.buf[..n].to_vec());
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // Not transient (for a TAP device: EBADFD once the
                    // device is gone). A level-triggered error would wake
                    // the loop forever: stop watching this endpoint.
                    link.dirs[side].read_errors += 1;
                    link.gone[side] = true;
                    let _ = self.epoll.delete(link.ends[side].as_fd());
                    log!(
                        "link {:?}: read from endpoint {} failed ({e}); no longer reading it",
                        link.name,
                        SIDE_NAMES[side]
                    );
                    break;
                }
            }
        }
    }

    /// Hand every due departure to its egress endpoint.
    ///
    /// The clock is read before each `poll`; that reading, minus the
    /// departure's scheduled time, is passed to `record_lateness`. Lateness
    /// is therefore the *scheduling error* of the daemon (how long after its
    /// deadline the frame was taken out of the model), measured just before
    /// the write; the write's own cost is the same for every frame and shows
    /// in throughput, not here.
    pub fn poll_departures(&mut self) {
        for link in self.links.values_mut() {
            for (i, st) in link.dirs.iter_mut().enumerate() {
                loop {
                    let now = now_ns();
                    match st.dir.next_deadline() {
                        Some(d) if d <= now => {}
                        _ => break,
                    }
                    let Some(dep) = st.dir.poll(now) else { break };
                    st.dir.record_lateness(now.saturating_sub(dep.scheduled_ns));
                    if let Err(e) = link.ends[1 - i].send(&dep.data) {
                        st.write_errors += 1;
                        // One line per power of two: visible, never a flood.
                        if st.write_errors.is_power_of_two() {
                            log!(
                                "link {:?} {}: write to endpoint {} failed: {e} ({} write errors so far)",
                                link.name,
                                DIR_NAMES[i],
                                SIDE_NAMES[1 - i],
                                st.write_errors
                            );
                        }
                    }
                }
            }
        }
    }

    // ---- control connections -------------------------------------------

    fn accept(&mut self) {
        let Some(listener) = &self.listener else {
            return;
        };
        loop {
            match listener.accept() {
                Ok((stream, _)) => {
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

    fn conn_event(&mut self, id: u64, flags: EpollFlags) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let readable = EpollFlags::EPOLLIN | EpollFlags::EPOLLHUP | EpollFlags::EPOLLERR;
        if flags.intersects(readable) && !conn.eof {
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

    /// Answer every complete line in connection `id`'s input.
    fn serve_lines(&mut self, id: u64) {
        let Some(conn) = self.conns.get_mut(&id) else {
            return;
        };
        let inbuf = std::mem::take(&mut conn.inbuf);
        let eof = conn.eof;
        let mut out = Vec::new();
        let mut start = 0;
        while self.shutdown.is_none() {
            let Some(len) = inbuf[start..].iter().position(|&b| b == b'\n') else {
                break;
            };
            out.extend(self.serve_line(&inbuf[start..start + len]));
            start += len + 1;
        }
        let mut rest = inbuf[start..].to_vec();
        let mut eof_now = eof;
        if self.shutdown.is_none() {
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
        if conn.eof && conn.outbuf.is_empty() {
            self.close_conn(id);
            return;
        }
        let mut interest = EpollFlags::empty();
        if !conn.eof {
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
    fn close_all(&mut self) {
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
    }

    // ---- operations -------------------------------------------------------

    fn dispatch(&mut self, request: Request) -> Result<Map<String, Value>, String> {
        match request {
            Request::Hello => Ok(fields(json!({
                "version": env!("CARGO_PKG_VERSION"),
                "pid": std::process::id(),
                "endpoint": self.opener.kind(),
            }))),
            Request::AddLink(req) => self.add_link(req),
            Request::SetLink(req) => self.set_link(req),
            Request::SetState { link, up } => self.set_state(&link, up),
            Request::RemoveLink { link } => self.remove_link(&link),
            Request::Stats { link } => self.stats(link.as_deref()),
            Request::Shutdown => {
                log!("shutdown requested");
                self.shutdown = Some("shutdown request".to_owned());
                Ok(Map::new())
            }
        }
    }

    fn lookup(&self, name: &str) -> Result<u64, String> {
        self.names
            .get(name)
            .copied()
            .ok_or_else(|| format!("link: no link named {name:?}"))
    }

    /// Apply the daemon's defaults to `params` and check them; `dir`
    /// (`"ab"` or `"ba"`) prefixes the message.
    pub(crate) fn prepare(
        &self,
        mut params: DirectionParams,
        dir: &str,
    ) -> Result<DirectionParams, String> {
        if params.queue_packets.is_none() && params.queue_bytes.is_none() {
            params.queue_packets = self.config.default_queue_packets;
        }
        params.validate().map_err(|e| format!("{dir}.{e}"))?;
        Ok(params)
    }

    fn add_link(&mut self, req: AddLink) -> Result<Map<String, Value>, String> {
        if req.link.is_empty() {
            return Err("link: the name must not be empty".to_owned());
        }
        if self.names.contains_key(&req.link) {
            return Err(format!("link: a link named {:?} already exists", req.link));
        }
        req.a.validate("a")?;
        req.b.validate("b")?;
        if req.a == req.b {
            return Err("b: the same endpoint as a".to_owned());
        }
        // Everything that can be checked is checked before anything is
        // created.
        let ab = self.prepare(req.ab, "ab")?;
        let ba = self.prepare(req.ba, "ba")?;
        let ab = Direction::new(ab).map_err(|e| format!("ab.{e}"))?;
        let ba = Direction::new(ba).map_err(|e| format!("ba.{e}"))?;
        let a = self.opener.open(&req.a, "a")?;
        // On failure `a` is dropped here, which destroys it.
        let b = self.opener.open(&req.b, "b")?;
        let id = self.next_link;
        self.next_link += 1;
        for (side, end) in [&a, &b].into_iter().enumerate() {
            let ev = EpollEvent::new(EpollFlags::EPOLLIN, tap_token(id, side));
            if let Err(e) = self.epoll.add(end.as_fd(), ev) {
                if side == 1 {
                    let _ = self.epoll.delete(a.as_fd());
                }
                return Err(format!("cannot watch endpoint {}: {e}", SIDE_NAMES[side]));
            }
        }
        log!(
            "link {:?} added: a={} b={}",
            req.link,
            req.a.describe(),
            req.b.describe()
        );
        let dir = |dir| DirState {
            dir,
            write_errors: 0,
            read_errors: 0,
        };
        self.links.insert(
            id,
            Link {
                name: req.link.clone(),
                ends: [a, b],
                dirs: [dir(ab), dir(ba)],
                gone: [false; 2],
            },
        );
        self.names.insert(req.link, id);
        Ok(Map::new())
    }

    fn set_link(&mut self, req: SetLink) -> Result<Map<String, Value>, String> {
        let id = self.lookup(&req.link)?;
        if req.ab.is_none() && req.ba.is_none() {
            return Err("set_link: give ab, ba or both".to_owned());
        }
        let new = [
            req.ab.map(|p| self.prepare(p, "ab")).transpose()?,
            req.ba.map(|p| self.prepare(p, "ba")).transpose()?,
        ];
        let link = self.links.get_mut(&id).expect("names and links agree");
        let now = now_ns();
        let mut applied: Vec<(usize, DirectionParams)> = Vec::new();
        for (i, params) in new.into_iter().enumerate() {
            let Some(params) = params else { continue };
            let old = link.dirs[i].dir.params().clone();
            if let Err(e) = link.dirs[i].dir.set_params(now, params) {
                // Validated above, so not expected; undo what was applied.
                for (j, old) in applied {
                    let _ = link.dirs[j].dir.set_params(now, old);
                }
                return Err(format!("{}.{e}", DIR_NAMES[i]));
            }
            applied.push((i, old));
        }
        let which: Vec<&str> = applied.iter().map(|(i, _)| DIR_NAMES[*i]).collect();
        log!(
            "link {:?}: new parameters for {}",
            req.link,
            which.join(" and ")
        );
        Ok(Map::new())
    }

    fn set_state(&mut self, name: &str, up: bool) -> Result<Map<String, Value>, String> {
        let id = self.lookup(name)?;
        let link = self.links.get_mut(&id).expect("names and links agree");
        let now = now_ns();
        for st in &mut link.dirs {
            st.dir.set_up(now, up);
        }
        log!("link {name:?} {}", if up { "up" } else { "down" });
        Ok(Map::new())
    }

    fn remove_link(&mut self, name: &str) -> Result<Map<String, Value>, String> {
        let id = self.lookup(name)?;
        self.names.remove(name);
        let link = self.links.remove(&id).expect("names and links agree");
        for (side, end) in link.ends.iter().enumerate() {
            if !link.gone[side] {
                let _ = self.epoll.delete(end.as_fd());
            }
        }
        drop(link);
        log!("link {name:?} removed");
        Ok(Map::new())
    }

    fn stats(&self, name: Option<&str>) -> Result<Map<String, Value>, String> {
        let ids: Vec<u64> = match name {
            Some(name) => vec![self.lookup(name)?],
            None => self.names.values().copied().collect(),
        };
        let mut links = Map::new();
        for id in ids {
            let link = &self.links[&id];
            let mut entry = Map::new();
            entry.insert(
                "up".to_owned(),
                Value::Bool(link.dirs.iter().all(|d| d.dir.is_up())),
            );
            for (i, st) in link.dirs.iter().enumerate() {
                let mut s = match serde_json::to_value(st.dir.stats()) {
                    Ok(Value::Object(m)) => m,
                    Ok(other) => fields(json!({ "model": other })),
                    Err(e) => fields(json!({ "model_error": e.to_string() })),
                };
                s.insert("write_errors".to_owned(), st.write_errors.into());
                s.insert("read_errors".to_owned(), st.read_errors.into());
                entry.insert(DIR_NAMES[i].to_owned(), Value::Object(s));
            }
            links.insert(link.name.clone(), Value::Object(entry));
        }
        let mut out = Map::new();
        out.insert("now_ns".to_owned(), now_ns().into());
        out.insert("links".to_owned(), Value::Object(links));
        Ok(out)
    }
}

/// The map inside a `json!({...})` object.
fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}
