//! One direction of one link: the whole pipeline.
//!
//! ```text
//! push ─▶ down? ─▶ loss ─▶ duplicate ─▶ corrupt ─▶ queue ─▶ rate/trace ─▶ delay line ─▶ poll
//!          │        │                                │
//!          ▼        ▼                                ▼
//!        drop     drop                              drop
//!       (down)   (loss)                           (queue)
//! ```
//!
//! Each stage is its own module ([`loss`](crate::loss),
//! [`impair`](crate::impair), [`queue`](crate::queue), [`rate`](crate::rate),
//! [`trace`](crate::trace), [`delay`](crate::delay)); this one wires them
//! together and keeps the counters.
//!
//! # Virtual time
//!
//! The schedule is computed in *virtual* time: it depends only on the
//! packets and the instants passed in, never on when the caller gets round
//! to calling. Both [`Direction::push`] and [`Direction::poll`] first bring
//! the queue and serialiser up to their `now` (every transmission that
//! should have started by then has started, at the instant it should have),
//! so a late call yields exactly the same departures, with the same
//! `scheduled_ns`, as calls made on time, and never causes a spurious queue
//! drop. Events at the same instant are ordered: departures from the queue
//! first, then the arrival. Time is expected to be monotonic; a `now`
//! earlier than one already seen is treated as equal to it.
//!
//! # Parameter changes
//!
//! [`Direction::set_params`] first brings the state up to its `now` under
//! the old parameters, then switches. Packets keep what they have already
//! been given: a packet on the wire keeps its finish time, a packet in the
//! delay line its departure (its delay and jitter are fixed when its
//! transmission starts). Queued packets stay queued, even above a lowered
//! limit. Only the random streams are reset, and only if the seed changed.

use crate::delay::{DelayLine, DelaySpec};
use crate::impair::{Corrupt, Duplicate};
use crate::loss::Loss;
use crate::params::{DirectionParams, ParamsError};
use crate::queue::{Packet, Queue};
use crate::rate::RateLink;
use crate::rng::{Rng, Stream};
use crate::stats::{DirectionStats, Recorder};
use crate::trace::{TraceLink, OPPORTUNITY_BYTES};

/// A packet leaving a [`Direction`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Departure {
    /// The packet's bytes (possibly corrupted).
    pub data: Vec<u8>,
    /// The instant, ns, at which the model scheduled it to leave; at or
    /// before the `now` passed to [`Direction::poll`]. The I/O layer reports
    /// how much later it actually left through
    /// [`Direction::record_lateness`].
    pub scheduled_ns: u64,
}

/// The serialiser in use.
#[derive(Debug, Clone)]
enum Link {
    /// `rate_bps` (or unlimited).
    Rate(RateLink),
    /// `trace_ms`.
    Trace(TraceLink),
}

/// One direction of one link: packets and time in, packets and deadlines
/// out.
///
/// The caller pushes each arriving packet with the current time, and calls
/// [`poll`](Self::poll) until it returns `None` whenever
/// [`next_deadline`](Self::next_deadline) is reached (and after each push:
/// with no rate and no delay a packet is due at once).
///
/// ```
/// use link_core::{Direction, DirectionParams};
///
/// const MS: u64 = 1_000_000;
/// // 8 Mbit/s (1 byte/µs) and 10 ms of delay.
/// let mut d = Direction::new(DirectionParams {
///     rate_bps: Some(8_000_000),
///     delay_ns: 10 * MS,
///     ..Default::default()
/// })
/// .unwrap();
/// d.push(0, vec![0; 1000]); // on the wire for 1 ms
/// d.push(0, vec![0; 1000]); // waits 1 ms in the queue, then 1 ms on the wire
/// assert_eq!(d.next_deadline(), Some(MS)); // second transmission starts
/// assert!(d.poll(MS).is_none());
/// assert_eq!(d.next_deadline(), Some(11 * MS));
/// assert_eq!(d.poll(20 * MS).unwrap().scheduled_ns, 11 * MS);
/// assert_eq!(d.poll(20 * MS).unwrap().scheduled_ns, 12 * MS);
/// assert_eq!(d.next_deadline(), None);
/// assert_eq!(d.stats().tx_packets, 2);
/// ```
#[derive(Debug, Clone)]
pub struct Direction {
    params: DirectionParams,
    up: bool,
    /// Latest instant seen.
    now: u64,
    loss: Loss,
    duplicate: Duplicate,
    corrupt: Corrupt,
    queue: Queue,
    link: Link,
    line: DelayLine,
    stats: Recorder,
    /// Leading bytes of every packet that belong to the I/O layer.
    prefix: usize,
}

impl Direction {
    /// A direction with `params`: up, empty, its random streams seeded from
    /// `params.seed`.
    pub fn new(params: DirectionParams) -> Result<Direction, ParamsError> {
        params.validate()?;
        let seed = params.seed;
        let link = match &params.trace_ms {
            Some(trace) => Link::Trace(TraceLink::new(trace, None)),
            None => Link::Rate(RateLink::new()),
        };
        Ok(Self {
            up: true,
            now: 0,
            loss: Loss::new(params.loss, Rng::stream(seed, Stream::Loss)),
            duplicate: Duplicate::new(Rng::stream(seed, Stream::Duplicate)),
            corrupt: Corrupt::new(Rng::stream(seed, Stream::Corrupt)),
            queue: Queue::new(
                params.queue_packets,
                params.queue_bytes,
                params.queue,
                Rng::stream(seed, Stream::Queue),
            ),
            link,
            line: DelayLine::new(Rng::stream(seed, Stream::Jitter)),
            stats: Recorder::default(),
            prefix: 0,
            params,
        })
    }

    /// Replace parameters at `now`. Validates first; on error nothing
    /// changes.
    ///
    /// Queued and in-flight packets are kept (a packet already being
    /// transmitted keeps its finish time; packets already in the delay line
    /// keep their departure). The random streams are re-seeded only if the
    /// seed changed. A new or different trace starts its clock at
    /// `now` if packets are waiting, else at the next arrival; the same
    /// trace keeps its clock. Leaving a trace for a rate leaves the link
    /// idle at `now`.
    pub fn set_params(&mut self, now: u64, params: DirectionParams) -> Result<(), ParamsError> {
        params.validate()?;
        let now = self.clock(now);
        self.advance(now);
        if params.seed != self.params.seed {
            let seed = params.seed;
            self.loss.set_rng(Rng::stream(seed, Stream::Loss));
            self.duplicate = Duplicate::new(Rng::stream(seed, Stream::Duplicate));
            self.corrupt = Corrupt::new(Rng::stream(seed, Stream::Corrupt));
            self.queue.set_rng(Rng::stream(seed, Stream::Queue));
            self.line.set_rng(Rng::stream(seed, Stream::Jitter));
        }
        self.loss.set_model(params.loss);
        self.queue
            .configure(params.queue_packets, params.queue_bytes, params.queue);
        match (&self.params.trace_ms, &params.trace_ms) {
            (_, None) => {
                if let Link::Trace(_) = self.link {
                    self.link = Link::Rate(RateLink::idle_at(now));
                }
            }
            (old, Some(new)) => {
                if old.as_ref() != Some(new) {
                    let epoch = (self.queue.len() > 0).then_some(now);
                    self.link = Link::Trace(TraceLink::new(new, epoch));
                }
            }
        }
        self.params = params;
        self.advance(now);
        Ok(())
    }

    /// The current parameters.
    pub fn params(&self) -> &DirectionParams {
        &self.params
    }

    /// Bring the link down or up at `now`.
    ///
    /// Down: arrivals are dropped (cause down), and everything queued or in
    /// flight (on the wire or in the delay line) is dropped (cause down).
    /// Packets scheduled to depart at or before `now` had already left and
    /// are still returned by [`poll`](Self::poll). Up again: normal
    /// operation, with an idle link; a trace keeps its clock.
    pub fn set_up(&mut self, now: u64, up: bool) {
        let now = self.clock(now);
        self.advance(now);
        if self.up && !up {
            self.stats.drops.down += self.queue.clear() + self.line.drop_after(now);
            if let Link::Rate(r) = &mut self.link {
                r.abort(now);
            }
        }
        self.up = up;
    }

    /// Whether the link is up.
    pub fn is_up(&self) -> bool {
        self.up
    }

    /// Every packet pushed from now on starts with `prefix` bytes that belong
    /// to the I/O layer (e.g. a virtio-net header): they are carried through
    /// unchanged but neither counted (rate, queue bytes, statistics) nor
    /// corrupted.
    ///
    /// ```
    /// use link_core::{Direction, DirectionParams};
    /// let mut d = Direction::new(DirectionParams::default()).unwrap().with_prefix(10);
    /// d.push(0, vec![0; 110]);
    /// assert_eq!(d.poll(0).unwrap().data.len(), 110);
    /// assert_eq!((d.stats().rx_bytes, d.stats().tx_bytes), (100, 100));
    /// ```
    #[must_use]
    pub fn with_prefix(mut self, prefix: usize) -> Self {
        self.prefix = prefix;
        self
    }

    /// A packet arrives at `now`.
    pub fn push(&mut self, now: u64, data: Vec<u8>) {
        let now = self.clock(now);
        self.advance(now);
        self.stats.rx_packets += 1;
        let prefix = self.prefix.min(data.len());
        self.stats.rx_bytes += (data.len() - prefix) as u64;
        self.stats
            .sample_queue(self.queue.len(), self.queue.bytes());
        if !self.up {
            self.stats.drops.down += 1;
            return;
        }
        if self.loss.lose() {
            self.stats.drops.loss += 1;
            return;
        }
        let copy = if self.duplicate.decide(self.params.duplicate) {
            self.stats.duplicated += 1;
            Some(data.clone())
        } else {
            None
        };
        for mut data in std::iter::once(data).chain(copy) {
            if self.corrupt.apply(self.params.corrupt, &mut data[prefix..]) {
                self.stats.corrupted += 1;
            }
            let packet = Packet {
                data,
                arrival_ns: now,
                prefix,
            };
            self.stats.drops.queue += self.queue.push(packet);
        }
        self.advance(now);
    }

    /// The next packet due at or before `now`, in departure order (ties in
    /// the order packets entered the delay line), with the instant it was
    /// scheduled to leave.
    pub fn poll(&mut self, now: u64) -> Option<Departure> {
        let now = self.clock(now);
        self.advance(now);
        let (scheduled_ns, data) = self.line.pop_due(now)?;
        self.stats.tx_packets += 1;
        self.stats.tx_bytes += data.len().saturating_sub(self.prefix) as u64;
        Some(Departure { data, scheduled_ns })
    }

    /// Earliest instant at which [`poll`](Self::poll) may return a packet or
    /// internal state must advance (a queued packet starts transmission);
    /// `None` when idle. It may lie in the past: poll at once.
    pub fn next_deadline(&self) -> Option<u64> {
        let departure = self.line.next_departure();
        let start = self.queue.front().map(|head| match &self.link {
            Link::Rate(r) => r.start_ns(head.arrival_ns),
            Link::Trace(t) => t.next_opportunity(head.arrival_ns),
        });
        match (departure, start) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The I/O layer reports how late a departure actually left (actual -
    /// scheduled, ns).
    pub fn record_lateness(&mut self, late_ns: u64) {
        self.stats.record_lateness(late_ns);
    }

    /// A serialisable snapshot of the counters.
    pub fn stats(&self) -> DirectionStats {
        self.stats.snapshot(self.queue.len(), self.queue.bytes())
    }

    /// `now`, made monotonic.
    fn clock(&mut self, now: u64) -> u64 {
        self.now = self.now.max(now);
        self.now
    }

    /// Start every transmission (or trace delivery) due at or before `now`,
    /// in order, moving the packets into the delay line.
    fn advance(&mut self, now: u64) {
        let spec = DelaySpec {
            delay_ns: self.params.delay_ns,
            jitter_ns: self.params.jitter_ns,
            dist: self.params.jitter_dist,
            reorder: self.params.reorder,
        };
        let overhead = u64::from(self.params.overhead_bytes);
        let rate = self.params.rate_bps;
        let Self {
            queue,
            link,
            line,
            stats,
            ..
        } = self;
        // A packet left the queue and starts transmission at `start`, ending
        // at `finish`.
        let mut depart = |p: Packet, start: u64, finish: u64| {
            stats.record_sojourn(start.saturating_sub(p.arrival_ns));
            line.insert(finish, p.data, &spec);
        };
        while let Some(head) = queue.front() {
            let arrival = head.arrival_ns;
            match link {
                Link::Rate(r) => {
                    if r.start_ns(arrival) > now {
                        break;
                    }
                    let p = queue.pop().expect("the queue has a head");
                    let (start, finish) = r.transmit(arrival, p.len() + overhead, rate);
                    depart(p, start, finish);
                }
                Link::Trace(t) => {
                    if t.next_opportunity(arrival) > now {
                        break;
                    }
                    let at = t.consume(arrival);
                    let mut budget = OPPORTUNITY_BYTES;
                    let mut first = true;
                    while let Some(head) = queue.front() {
                        let size = head.len() + overhead;
                        if head.arrival_ns > at || (!first && size > budget) {
                            break;
                        }
                        let p = queue.pop().expect("the queue has a head");
                        budget = budget.saturating_sub(size);
                        first = false;
                        depart(p, at, at);
                    }
                }
            }
        }
    }
}
