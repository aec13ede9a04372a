//! More than one engine loop (`--threads N`).
//!
//! With one thread (the default) the daemon is one loop that serves the
//! control socket and every link. With N > 1 the main thread becomes the
//! **control loop**: it keeps the control socket and the signals and carries
//! no link; N **engine loops**, each a [`Daemon`] of its own in its own
//! thread (own epoll set, timer, deadline heap, real-time guard, opener),
//! carry the links.
//!
//! - A new link goes to the loop with the fewest links; the link and both
//!   its directions stay there for their lifetime, so a link's packets are
//!   never reordered across threads.
//! - A request that names a link is forwarded to its loop as a [`Job`]
//!   through a channel; the loop is woken by an eventfd in its epoll set,
//!   runs the request between two turns exactly as a single loop would, and
//!   sends the reply back. The control loop waits for that reply: control
//!   requests are answered in order, and an engine loop is never blocked by
//!   the control loop.
//! - `stats` asks every loop and merges: the links side by side, `engine`
//!   summed or maximised field by field ([`merge_engine`]), and each loop's
//!   own report under `engine.loops`.
//! - Endpoints are opened by the loop that owns them, in its thread, and
//!   never cross threads.
//! - `shutdown` (request or signal) stops every engine loop, which closes
//!   its links, and joins it.

use std::collections::HashMap;
use std::io;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use nix::sys::eventfd::{EfdFlags, EventFd};
use serde_json::{Map, Value};

use crate::daemon::{errno_io, Config, Daemon};
use crate::endpoint::Opener;
use crate::log;
use crate::protocol::Request;
use crate::vclock::VClock;

/// A request's reply.
pub(crate) type Reply = Result<Map<String, Value>, String>;

/// One request for an engine loop, and where its reply goes.
pub(crate) struct Job {
    pub(crate) request: Request,
    pub(crate) reply: Sender<Reply>,
}

/// An engine loop's side of its channel: the jobs, and the eventfd (in its
/// epoll set) that says some are waiting.
pub(crate) struct Inbox {
    pub(crate) jobs: Receiver<Job>,
    pub(crate) wake: Arc<EventFd>,
}

/// The control loop's handle on one engine loop.
struct Worker {
    jobs: Sender<Job>,
    wake: Arc<EventFd>,
    thread: Option<JoinHandle<()>>,
    /// Links placed on this loop.
    links: usize,
}

/// The engine loops, as the control loop sees them.
pub(crate) struct Pool {
    workers: Vec<Worker>,
    /// Which loop carries each link.
    placed: HashMap<String, usize>,
}

impl Pool {
    /// Start `n` engine loops. `make` builds each loop's opener, in the
    /// loop's own thread; every loop runs its links on `clock`.
    pub(crate) fn start<O, F>(n: usize, config: Config, clock: &VClock, make: F) -> io::Result<Self>
    where
        O: Opener,
        F: Fn() -> Result<O, String> + Send + Clone + 'static,
    {
        let mut pool = Self {
            workers: Vec::new(),
            placed: HashMap::new(),
        };
        for i in 0..n {
            let (tx, rx) = mpsc::channel();
            let wake = Arc::new(
                EventFd::from_flags(EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
                    .map_err(errno_io)?,
            );
            let inbox = Inbox {
                jobs: rx,
                wake: wake.clone(),
            };
            let make = make.clone();
            let clock = clock.clone();
            // Reports whether the loop could be set up.
            let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
            let thread = std::thread::Builder::new()
                .name(format!("linkd-loop{i}"))
                .spawn(move || {
                    let daemon = make().and_then(|opener| {
                        Daemon::new_worker(opener, config, inbox)
                            .map(|d| d.with_clock(clock))
                            .map_err(|e| format!("cannot set up the event loop: {e}"))
                    });
                    let mut daemon = match daemon {
                        Ok(d) => {
                            let _ = ready_tx.send(Ok(()));
                            d
                        }
                        Err(e) => {
                            let _ = ready_tx.send(Err(e));
                            return;
                        }
                    };
                    if let Err(e) = daemon.run() {
                        log!("engine loop {i} failed: {e}");
                    }
                })?;
            let ready = ready_rx
                .recv()
                .unwrap_or_else(|_| Err("the thread ended before it was ready".to_owned()));
            pool.workers.push(Worker {
                jobs: tx,
                wake,
                thread: Some(thread),
                links: 0,
            });
            if let Err(e) = ready {
                pool.stop();
                return Err(io::Error::other(format!("engine loop {i}: {e}")));
            }
        }
        Ok(pool)
    }

    /// Number of engine loops.
    pub(crate) fn len(&self) -> usize {
        self.workers.len()
    }

    /// Run `request` on loop `i` and wait for its reply.
    fn ask(&self, i: usize, request: Request) -> Reply {
        let w = &self.workers[i];
        let (tx, rx) = mpsc::channel();
        let gone = || format!("engine loop {i} is gone (see the daemon's log)");
        w.jobs
            .send(Job { request, reply: tx })
            .map_err(|_| gone())?;
        w.wake
            .write(1)
            .map_err(|e| format!("cannot wake engine loop {i}: {e}"))?;
        rx.recv().map_err(|_| gone())?
    }

    fn owner(&self, name: &str) -> Result<usize, String> {
        self.placed
            .get(name)
            .copied()
            .ok_or_else(|| format!("link: no link named {name:?}"))
    }

    /// Route one request: to the loop that carries its link, to the loop
    /// with the fewest links for a new one, to every loop for `stats` of
    /// all links. `hello` and `shutdown` are the control loop's own.
    pub(crate) fn route(&mut self, request: Request) -> Reply {
        match request {
            Request::AddLink(req) => {
                if self.placed.contains_key(&req.link) {
                    return Err(format!("link: a link named {:?} already exists", req.link));
                }
                let i = (0..self.workers.len())
                    .min_by_key(|&i| (self.workers[i].links, i))
                    .expect("at least one engine loop");
                let name = req.link.clone();
                let reply = self.ask(i, Request::AddLink(req))?;
                self.placed.insert(name, i);
                self.workers[i].links += 1;
                Ok(reply)
            }
            Request::RemoveLink { link } => {
                let i = self.owner(&link)?;
                let reply = self.ask(i, Request::RemoveLink { link: link.clone() })?;
                self.placed.remove(&link);
                self.workers[i].links -= 1;
                Ok(reply)
            }
            Request::SetLink(ref req) => {
                let i = self.owner(&req.link)?;
                self.ask(i, request)
            }
            Request::SetState { ref link, .. } | Request::SetClock { ref link, .. } => {
                let i = self.owner(link)?;
                self.ask(i, request)
            }
            Request::Divert(ref req) => {
                let i = self.owner(&req.link)?;
                self.ask(i, request)
            }
            Request::Stats { link: Some(name) } => {
                let i = self.owner(&name)?;
                let reply = self.ask(i, Request::Stats { link: Some(name) })?;
                Ok(merge_stats(vec![reply]))
            }
            Request::Stats { link: None } => {
                let mut replies = Vec::new();
                for i in 0..self.workers.len() {
                    replies.push(self.ask(i, Request::Stats { link: None })?);
                }
                Ok(merge_stats(replies))
            }
            Request::Pulse => {
                let mut dirs = Vec::new();
                let mut spin = 0u64;
                for i in 0..self.workers.len() {
                    let mut r = self.ask(i, Request::Pulse)?;
                    spin += r.get("spin_ns").and_then(Value::as_u64).unwrap_or(0);
                    if let Some(Value::Array(d)) = r.remove("directions") {
                        dirs.extend(d);
                    }
                }
                let mut out = Map::new();
                out.insert("directions".to_owned(), Value::Array(dirs));
                out.insert("spin_ns".to_owned(), spin.into());
                Ok(out)
            }
            Request::Clock => {
                // Every loop re-reads the page and re-arms its timer.
                let mut last = Map::new();
                for i in 0..self.workers.len() {
                    last = self.ask(i, Request::Clock)?;
                }
                Ok(last)
            }
            Request::Hello | Request::Shutdown => {
                Err("internal: hello and shutdown are the control loop's own".to_owned())
            }
        }
    }

    /// Stop every engine loop (each closes its links) and wait for it.
    pub(crate) fn stop(&mut self) {
        for (i, w) in self.workers.iter().enumerate() {
            let (tx, _rx) = mpsc::channel();
            let sent = w.jobs.send(Job {
                request: Request::Shutdown,
                reply: tx,
            });
            if sent.is_ok() {
                if let Err(e) = w.wake.write(1) {
                    log!("cannot wake engine loop {i} to stop it: {e}");
                }
            }
        }
        for (i, w) in self.workers.iter_mut().enumerate() {
            if let Some(t) = w.thread.take() {
                if t.join().is_err() {
                    log!("engine loop {i} panicked");
                }
            }
        }
        self.placed.clear();
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.stop();
    }
}

/// One `stats` reply from the replies of several loops: the links side by
/// side, `now_ns` the latest, `engine` merged by [`merge_engine`].
fn merge_stats(replies: Vec<Map<String, Value>>) -> Map<String, Value> {
    let mut links = Map::new();
    let mut now = 0u64;
    let mut engines = Vec::new();
    let mut clock = None;
    for mut r in replies {
        clock = r.remove("clock").or(clock);
        let mut carried = 0;
        if let Some(Value::Object(l)) = r.remove("links") {
            carried = l.len();
            links.extend(l);
        }
        now = now.max(r.get("now_ns").and_then(Value::as_u64).unwrap_or(0));
        let mut engine = r.remove("engine").unwrap_or(Value::Null);
        if let Value::Object(m) = &mut engine {
            // Links this loop reported (all it carries, for stats of all).
            m.insert("links".to_owned(), carried.into());
        }
        engines.push(engine);
    }
    let mut out = Map::new();
    out.insert("now_ns".to_owned(), now.into());
    if let Some(c) = clock {
        out.insert("clock".to_owned(), c);
    }
    out.insert("engine".to_owned(), merge_engine(engines));
    out.insert("links".to_owned(), Value::Object(links));
    out
}

/// Fields of the loops' `engine` reports that are counts or durations: the
/// merged report has their sum (`demoted_ns` is then loop-time demoted).
/// Every other number (percentiles, shares of a core, leads, settings) is
/// the largest over the loops, so the merged report shows the worst loop;
/// anything else is the first loop's, except a `policy` that differs
/// between loops, which reads `"mixed"`.
const SUMMED: [&str; 9] = [
    "turns",
    "busy_ns",
    "spin_ns",
    "spin_over_budget",
    "timer_wakeups",
    "count",
    "demotions",
    "promotions",
    "demoted_ns",
];

/// The merged `engine` report of several loops, with each loop's own under
/// `loops` and their number under `threads`. `errors` and `links` are
/// summed as well.
pub(crate) fn merge_engine(engines: Vec<Value>) -> Value {
    let mut merged = engines.first().cloned().unwrap_or(Value::Null);
    for e in engines.iter().skip(1) {
        merge_into(&mut merged, e);
    }
    if let Value::Object(m) = &mut merged {
        m.insert("threads".to_owned(), engines.len().into());
        m.insert("loops".to_owned(), Value::Array(engines));
    }
    merged
}

fn merge_into(into: &mut Value, from: &Value) {
    let (Value::Object(a), Value::Object(b)) = (into, from) else {
        return;
    };
    for (k, v) in b {
        let Some(slot) = a.get_mut(k) else {
            a.insert(k.clone(), v.clone());
            continue;
        };
        match (slot.clone(), v) {
            (Value::Object(_), Value::Object(_)) => merge_into(slot, v),
            (Value::Number(x), Value::Number(y)) => {
                let sum = SUMMED.contains(&k.as_str()) || k == "errors" || k == "links";
                *slot = match (x.as_u64(), y.as_u64()) {
                    (Some(x), Some(y)) if sum => (x + y).into(),
                    (Some(x), Some(y)) => x.max(y).into(),
                    _ => {
                        let (x, y) = (x.as_f64().unwrap_or(0.0), y.as_f64().unwrap_or(0.0));
                        if sum {
                            (x + y).into()
                        } else {
                            x.max(y).into()
                        }
                    }
                };
            }
            (Value::Bool(x), Value::Bool(y)) if k == "demoted" => *slot = (x || *y).into(),
            (Value::String(x), Value::String(y)) if k == "policy" && x != *y => {
                *slot = Value::String("mixed".to_owned());
            }
            _ => {}
        }
    }
}
