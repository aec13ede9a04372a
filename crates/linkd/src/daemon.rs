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

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap};
use std::io;
use std::os::unix::net::UnixListener;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags, EpollTimeout};
use nix::sys::signalfd::SignalFd;
use nix::sys::time::TimeSpec;
use nix::sys::timerfd::{ClockId, Expiration, TimerFd, TimerFlags, TimerSetTimeFlags};

use crate::endpoint::Opener;
use crate::log;
use crate::packets::schedule;
use crate::pool::{Inbox, Pool};
use crate::rtguard::{self, Pressure, RtGuard, Switch};
use crate::timing::{Plan, Timing};
use crate::vclock::VClock;

pub(crate) use crate::state::{
    conn_token, tap_token, Conn, DirState, Link, CONN_READ_BUDGET, DIR_NAMES, KIND_CONN,
    KIND_FIXED, KIND_TAP_A, MAX_OUTBUF, SIDE_NAMES, TOKEN_INBOX, TOKEN_LISTENER, TOKEN_SIGNAL,
    TOKEN_TIMER,
};
pub use crate::state::{now_ns, Config, MAX_LINE, RECV_BUF};

/// The daemon: every link, every control connection and the event loop.
pub struct Daemon<O: Opener> {
    pub(crate) opener: O,
    pub(crate) config: Config,
    pub(crate) epoll: Epoll,
    pub(crate) timer: TimerFd,
    /// Absolute expiry the timer is armed at, if armed.
    pub(crate) timer_armed: Option<u64>,
    pub(crate) listener: Option<UnixListener>,
    pub(crate) signals: Option<SignalFd>,
    pub(crate) conns: HashMap<u64, Conn>,
    pub(crate) next_conn: u64,
    /// Connections refused because [`crate::state::MAX_CONNS`] were open.
    pub(crate) refused: u64,
    pub(crate) links: HashMap<u64, Link<O::Endpoint>>,
    pub(crate) names: BTreeMap<String, u64>,
    pub(crate) next_link: u64,
    pub(crate) buf: Box<[u8]>,
    pub(crate) events: Vec<EpollEvent>,
    /// Why the daemon is stopping, once it is.
    pub(crate) shutdown: Option<String>,
    /// Every direction's next deadline (with stale entries, skipped when
    /// they surface): `(deadline, link, direction)`.
    pub(crate) deadlines: BinaryHeap<Reverse<(u64, u64, usize)>>,
    /// The release policy and the loop's measurements.
    pub(crate) timing: Timing,
    /// Leaves SCHED_FIFO while the loop is saturated (see [`crate::rtguard`]).
    pub(crate) rt: RtGuard,
    /// The CPU pressure the guard reads once per window.
    pub(crate) pressure: Pressure,
    /// The timer fired during the current turn's wait.
    pub(crate) timer_woke: bool,
    /// Reused buffer of wire packets cut from a super-frame.
    pub(crate) segments: Vec<Vec<u8>>,
    /// The engine loops carrying the links, when this is the control loop
    /// of a daemon with `--threads` > 1 (see [`crate::pool`]).
    pub(crate) pool: Option<Pool>,
    /// Requests from the control loop, when this is one of its engine loops.
    pub(crate) inbox: Option<Inbox>,
    /// The links' model clock: real, or a dilated run's virtual time.
    pub(crate) clock: VClock,
}

/// The longest a dilated loop sleeps on its timer before it reads the clock
/// page again (a TDF change is normally announced by a `clock` request).
const MAX_DILATED_SLEEP_NS: u64 = 20_000_000;

/// Stale heap entries tolerated beyond two per direction before a rebuild.
const HEAP_SLACK: usize = 4096;

pub(crate) fn errno_io(e: Errno) -> io::Error {
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
            .add(
                &timer,
                EpollEvent::new(EpollFlags::EPOLLIN | EpollFlags::EPOLLET, TOKEN_TIMER),
            )
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
            refused: 0,
            links: HashMap::new(),
            names: BTreeMap::new(),
            next_link: 1,
            buf: vec![0; RECV_BUF].into_boxed_slice(),
            events: vec![EpollEvent::empty(); 256],
            shutdown: None,
            deadlines: BinaryHeap::new(),
            timing: Timing::new(now_ns(), config.spin_ns, config.spin_budget_pct),
            rt: RtGuard::new(now_ns(), config.realtime.0, config.realtime.1),
            pressure: Pressure::open(),
            timer_woke: false,
            segments: Vec::new(),
            pool: None,
            inbox: None,
            clock: VClock::real(),
        })
    }

    /// An engine loop of a daemon with several ([`crate::pool`]): no control
    /// socket, no signals; it serves the requests that arrive in `inbox`.
    pub(crate) fn new_worker(opener: O, config: Config, inbox: Inbox) -> io::Result<Self> {
        let mut d = Self::new(opener, config, None, None)?;
        d.epoll
            .add(
                inbox.wake.as_ref(),
                EpollEvent::new(EpollFlags::EPOLLIN, TOKEN_INBOX),
            )
            .map_err(errno_io)?;
        d.inbox = Some(inbox);
        Ok(d)
    }

    /// Run every link's model on `clock` (virtual time: `crate::vclock`).
    pub fn with_clock(mut self, clock: VClock) -> Self {
        self.clock = clock;
        self
    }

    /// Make this daemon the control loop of `pool`, which carries every link
    /// from now on.
    pub fn with_pool(mut self, pool: Pool) -> Self {
        self.pool = Some(pool);
        self
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
        // Requests left from the last turn first (a share of each client's).
        self.serve_pending();
        let start = now_ns();
        // Deadlines are model time; the timer and the spin lead are real.
        let next = self.next_deadline().map(|d| {
            let real = self.clock.real_at(d);
            if self.clock.dilated() {
                // A TDF change moves every deadline: look again soon.
                real.min(start + MAX_DILATED_SLEEP_NS)
            } else {
                real
            }
        });
        let plan = self.timing.plan(start, next);
        let timeout = match plan {
            _ if self.any_pending() => EpollTimeout::ZERO,
            Plan::Due | Plan::Spin => EpollTimeout::ZERO,
            Plan::Sleep(at) => {
                self.set_timer(Some(at))?;
                idle_timeout(max_wait)
            }
            Plan::Idle => {
                self.set_timer(None)?;
                idle_timeout(max_wait)
            }
        };
        self.timer_woke = false;
        let n = match self.epoll.wait(&mut self.events, timeout) {
            Ok(n) => n,
            Err(Errno::EINTR) => 0,
            Err(e) => return Err(errno_io(e)),
        };
        let woke = now_ns();
        for i in 0..n {
            let ev = self.events[i];
            self.handle_event(ev.data(), ev.events());
        }
        if let (true, Plan::Sleep(at)) = (self.timer_woke, plan) {
            self.timing.timer_woke(at, woke);
        }
        self.poll_departures();
        let end = now_ns();
        let spun = plan == Plan::Spin;
        let waited = if spun { 0 } else { woke - start };
        self.timing.turn(start, end, spun, waited);
        let pressure = &mut self.pressure;
        if let Some(switch) = self
            .rt
            .account(end, end - start - waited, || pressure.some_total_us())
        {
            let priority = match switch {
                Switch::Demote => 0,
                Switch::Promote => self.rt.priority(),
            };
            let result = rtguard::set_policy(priority);
            match &result {
                Ok(()) => log!(
                    "{}",
                    match switch {
                        Switch::Demote => "left SCHED_FIFO: the loop took a large share of a core others waited for",
                        Switch::Promote => "back to SCHED_FIFO: calm",
                    }
                ),
                Err(e) => log!("cannot change the scheduling policy ({switch:?}): {e}"),
            }
            self.rt.switched(now_ns(), switch, result);
        }
        Ok(())
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

    /// Earliest pending deadline over every direction of every link: the
    /// top of the deadline heap once stale entries are dropped.
    fn next_deadline(&mut self) -> Option<u64> {
        while let Some(&Reverse((d, id, i))) = self.deadlines.peek() {
            match self.links.get(&id) {
                Some(link) if link.dirs[i].scheduled == Some(d) => return Some(d),
                _ => {
                    self.deadlines.pop();
                }
            }
        }
        None
    }

    /// Note direction `i` of link `id`'s next deadline in the heap, if it
    /// changed.
    pub(crate) fn schedule(&mut self, id: u64, i: usize) {
        let Some(link) = self.links.get_mut(&id) else {
            return;
        };
        schedule(&mut self.deadlines, id, i, &mut link.dirs[i]);
        let live = 2 * self.links.len() + HEAP_SLACK;
        if self.deadlines.len() > live {
            // Mostly stale entries: rebuild from the directions themselves.
            self.deadlines = self
                .links
                .iter()
                .flat_map(|(&id, l)| {
                    l.dirs
                        .iter()
                        .enumerate()
                        .filter_map(move |(i, st)| st.scheduled.map(|d| Reverse((d, id, i))))
                })
                .collect();
        }
    }

    fn handle_event(&mut self, token: u64, flags: EpollFlags) {
        let id = token >> 2;
        match token & 3 {
            KIND_FIXED => match token {
                TOKEN_LISTENER => self.accept(),
                TOKEN_TIMER => self.timer_fired(),
                TOKEN_SIGNAL => self.read_signals(),
                TOKEN_INBOX => self.serve_inbox(),
                _ => {}
            },
            KIND_CONN => self.conn_event(id, flags),
            kind => self.read_endpoint(id, (kind - KIND_TAP_A) as usize),
        }
    }

    fn timer_fired(&mut self) {
        // Edge-triggered: one event per expiry, and arming the timer again
        // resets its count, so there is nothing to read.
        self.timer_armed = None;
        self.timer_woke = true;
    }

    /// Run the requests the control loop sent (an engine loop of several),
    /// in order, and send each reply back.
    fn serve_inbox(&mut self) {
        let Some(inbox) = &self.inbox else { return };
        // Non-blocking: a wake-up for jobs already served reads EAGAIN.
        let _ = inbox.wake.read();
        loop {
            let Some(inbox) = &self.inbox else { return };
            let job = match inbox.jobs.try_recv() {
                Ok(job) => job,
                Err(std::sync::mpsc::TryRecvError::Empty) => return,
                Err(std::sync::mpsc::TryRecvError::Disconnected) => {
                    // The control loop is gone: nothing can reach this loop.
                    self.shutdown = Some("control loop gone".to_owned());
                    return;
                }
            };
            let reply = self.dispatch(job.request);
            let _ = job.reply.send(reply);
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
}

/// The epoll timeout when nothing is due: `max_wait`, or for ever.
fn idle_timeout(max_wait: Option<Duration>) -> EpollTimeout {
    match max_wait {
        None => EpollTimeout::NONE,
        Some(d) => EpollTimeout::try_from(d).unwrap_or(EpollTimeout::MAX),
    }
}
