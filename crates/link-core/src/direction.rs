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

mod state;

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
    /// Wire packets it stands for (1 unless it entered through
    /// [`Direction::push_chunk`]).
    pub packets: u32,
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
    line: DelayLine<Packet>,
    stats: Recorder,
    /// Leading bytes of every packet that belong to the I/O layer.
    prefix: usize,
    /// The last chunk of several wire packets to start transmission: start,
    /// finish, packets, bytes. Those of its packets that would not yet
    /// have started on a real wire still count as waiting in the queue.
    chunk_on_wire: Option<(u64, u64, u32, u64)>,
    /// State changes planned for set instants, earliest first
    /// ([`set_up_at`](Self::set_up_at)).
    pending_state: Vec<(u64, bool)>,
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
            chunk_on_wire: None,
            pending_state: Vec::new(),
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
        let prefix = self.prefix.min(data.len());
        self.enter(now, Packet::single(data, now, prefix), None);
    }

    /// A packet that left the other half of a cut link at `origin` (on this
    /// direction's clock) arrives at `now`: it meets the direction's state,
    /// loss and queue at `now` like any packet, but its time in the model
    /// counts from `origin` (never later than `now`), so its delay runs from
    /// when it left, whatever the network between the halves took. One whose
    /// delay has run out by `now` is due at once, and late.
    ///
    /// ```
    /// use link_core::{Direction, DirectionParams};
    /// let p = DirectionParams { delay_ns: 5_000_000, ..Default::default() };
    /// let mut d = Direction::new(p).unwrap();
    /// // Left the other machine at 0, here 1 ms later: due at 5 ms, not 6.
    /// d.push_from(1_000_000, 0, vec![0; 64]);
    /// assert_eq!(d.next_deadline(), Some(5_000_000));
    /// assert_eq!(d.poll(5_000_000).unwrap().scheduled_ns, 5_000_000);
    /// // One that took 7 ms is due at once, 2 ms late.
    /// d.push_from(17_000_000, 10_000_000, vec![0; 64]);
    /// assert_eq!(d.poll(17_000_000).unwrap().scheduled_ns, 15_000_000);
    /// ```
    pub fn push_from(&mut self, now: u64, origin: u64, data: Vec<u8>) {
        let prefix = self.prefix.min(data.len());
        self.enter(now, Packet::single(data, now, prefix), Some(origin));
    }

    /// A *chunk* arrives at `now`: one buffer standing for `packets` wire
    /// packets of `wire_bytes` in all (without the prefix), such as a piece
    /// of a segmentation-offload super-frame that the I/O layer will hand
    /// on whole. It is counted, queued and serialised as those wire packets
    /// (the rate charges `wire_bytes` plus the per-packet overhead
    /// `packets` times), and leaves as one [`Departure`] when the last of
    /// them would have finished transmission, plus the delay.
    ///
    /// The I/O layer sizes chunks with [`chunk_packets`](Self::chunk_packets),
    /// which allows more than one packet only where every packet of a chunk
    /// would be treated alike ([`DirectionParams::allows_chunks`]) and the
    /// queue has room for all of them.
    ///
    /// ```
    /// use link_core::{Direction, DirectionParams};
    /// // 12 Mbit/s: a 1500-byte packet takes 1 ms.
    /// let p = DirectionParams { rate_bps: Some(12_000_000), ..Default::default() };
    /// let mut d = Direction::new(p).unwrap();
    /// d.push_chunk(0, vec![0; 4000], 3, 4500);
    /// assert_eq!(d.next_deadline(), Some(3_000_000));
    /// let dep = d.poll(3_000_000).unwrap();
    /// assert_eq!((dep.scheduled_ns, dep.packets), (3_000_000, 3));
    /// assert_eq!((d.stats().tx_packets, d.stats().tx_bytes), (3, 4500));
    /// ```
    pub fn push_chunk(&mut self, now: u64, data: Vec<u8>, packets: u32, wire_bytes: u64) {
        let packet = Packet {
            data,
            arrival_ns: now,
            packets: packets.max(1),
            bytes: wire_bytes,
        };
        self.enter(now, packet, None);
    }

    /// How many wire packets of `segment_bytes` each the next chunk pushed
    /// at `now` may hold: 1 unless the parameters allow chunks
    /// ([`DirectionParams::allows_chunks`]); otherwise as many as the rate
    /// serialises in `max_ns` (so a chunk delays its first packet by at
    /// most that), and no more than the queue has room for, counting the
    /// packets of a chunk on the wire that would not have started yet. So
    /// the queue admits and drops exactly the packets it would admit and
    /// drop one by one. Never 0.
    pub fn chunk_packets(&mut self, now: u64, segment_bytes: u64, max_ns: u64) -> u32 {
        let now = self.clock(now);
        self.advance(now);
        let Some(rate) = self
            .params
            .rate_bps
            .filter(|_| self.up && self.params.allows_chunks())
        else {
            return 1;
        };
        let wire = u128::from(segment_bytes + u64::from(self.params.overhead_bytes)).max(1);
        let by_time = u128::from(max_ns) * u128::from(rate) / 8 / 1_000_000_000 / wire;
        let (packets, bytes) = self.queue.room(self.chunk_pending(now));
        let by_bytes = bytes / segment_bytes.max(1);
        let n = by_time.min(u128::from(packets.min(by_bytes)));
        u32::try_from(n).unwrap_or(u32::MAX).max(1)
    }

    /// Wire packets and bytes of the chunk on the wire that would not have
    /// started transmission by `now` had they been sent one by one.
    fn chunk_pending(&self, now: u64) -> (u64, u64) {
        match self.chunk_on_wire {
            Some((start, finish, n, bytes)) if now < finish && start < finish && n > 1 => {
                let n = u64::from(n);
                let span = u128::from(finish - start);
                let done = u128::from(now.saturating_sub(start)) * u128::from(n) / span;
                let started = (done as u64 + 1).min(n);
                let pending = n - started;
                (pending, bytes * pending / n)
            }
            _ => (0, 0),
        }
    }

    /// An entry (one packet or a chunk) arrives at `now`.
    fn enter(&mut self, now: u64, packet: Packet, origin: Option<u64>) {
        let now = self.clock(now);
        self.advance(now);
        let count = u64::from(packet.packets);
        self.stats.rx_packets += count;
        self.stats.rx_bytes += packet.len();
        self.stats
            .sample_queue(self.queue.len(), self.queue.bytes());
        if !self.up {
            self.stats.drops.down += count;
            return;
        }
        if self.loss.lose() {
            self.stats.drops.loss += count;
            return;
        }
        let copy = if self.duplicate.decide(self.params.duplicate) {
            self.stats.duplicated += count;
            Some(packet.clone())
        } else {
            None
        };
        let prefix = self.prefix.min(packet.data.len());
        for mut p in std::iter::once(packet).chain(copy) {
            p.arrival_ns = origin.map_or(now, |o| o.min(now));
            if self
                .corrupt
                .apply(self.params.corrupt, &mut p.data[prefix..])
            {
                self.stats.corrupted += 1;
            }
            let pending = self.chunk_pending(now);
            self.stats.drops.queue += self.queue.push(p, pending);
        }
        self.advance(now);
    }

    /// The next packet due at or before `now`, in departure order (ties in
    /// the order packets entered the delay line), with the instant it was
    /// scheduled to leave.
    pub fn poll(&mut self, now: u64) -> Option<Departure> {
        let now = self.clock(now);
        self.advance(now);
        let (scheduled_ns, p) = self.line.pop_due(now)?;
        self.stats.tx_packets += u64::from(p.packets);
        self.stats.tx_bytes += p.len();
        Some(Departure {
            data: p.data,
            scheduled_ns,
            packets: p.packets,
        })
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
        [
            departure,
            start,
            self.pending_state.first().map(|&(at, _)| at),
        ]
        .into_iter()
        .flatten()
        .min()
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

    /// `now`, made monotonic; the planned state changes that `now` reaches are
    /// applied first, each at its own instant.
    fn clock(&mut self, now: u64) -> u64 {
        self.now = self.now.max(now);
        while let Some(&(at, up)) = self.pending_state.first() {
            if at > self.now {
                break;
            }
            self.pending_state.remove(0);
            self.apply_state(at, up);
        }
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
            chunk_on_wire,
            ..
        } = self;
        // A packet left the queue and starts transmission at `start`, ending
        // at `finish`.
        let mut depart = |p: Packet, start: u64, finish: u64| {
            stats.record_sojourn(start.saturating_sub(p.arrival_ns));
            *chunk_on_wire = (p.packets > 1).then_some((start, finish, p.packets, p.len()));
            line.insert(finish, p, &spec);
        };
        while let Some(head) = queue.front() {
            let arrival = head.arrival_ns;
            match link {
                Link::Rate(r) => {
                    if r.start_ns(arrival) > now {
                        break;
                    }
                    let p = queue.pop().expect("the queue has a head");
                    let size = p.len() + overhead * u64::from(p.packets);
                    let (start, finish) = r.transmit(arrival, size, rate);
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
                        let size = head.len() + overhead * u64::from(head.packets);
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
