//! # link-core: the sans-I/O link engine of fidelnet
//!
//! A link emulator is two things tangled together: a *model* of what a link
//! does to packets (rate, queueing, delay, jitter, loss, reordering) and the
//! *plumbing* that moves bytes between sockets at the right moments. Tangled,
//! neither can be trusted: the model cannot be tested without real time
//! passing, and the plumbing's scheduling noise leaks into the model's
//! results. This crate holds only the model.
//!
//! Every mechanism here follows the same contract:
//!
//! * **Packets and `now` in, packets and the next deadline out.** The caller
//!   hands a mechanism a packet (or just its length) together with the
//!   current time, and asks what happens next: when the packet may leave, or
//!   when the mechanism next needs attention. Nothing here sleeps, spawns,
//!   reads a socket or blocks.
//! * **The clock is injected.** Time is a plain `u64` count of nanoseconds
//!   supplied by the caller, so nothing reads a clock internally. The daemon
//!   passes a monotonic clock; a test passes whatever instants it likes and
//!   can cover an hour of link time in microseconds.
//! * **Deterministic under a seed.** Given the same inputs (and, for
//!   randomised mechanisms, the same seed) the outputs are bit-for-bit
//!   identical, on every machine. Arithmetic is integer; fractions of a
//!   token or a nanosecond are carried exactly, never rounded away, so long
//!   runs do not drift.
//!
//! Keeping the engine free of I/O is what lets fidelnet make claims about
//! accuracy: each mechanism is checked against its specification in plain
//! unit tests, and what remains for the I/O layer is to honour the deadlines
//! it is given.
//!
//! ## Mechanisms
//!
//! [`Direction`] is one direction of one link, the whole pipeline; the
//! daemon holds two per link. Configured by [`DirectionParams`] (plain data,
//! serde, checked by [`DirectionParams::validate`]), it runs each packet
//! through these stages, one module each:
//!
//! * [`loss`]: independent or Gilbert-Elliott loss (netem's `gemodel`).
//! * [`impair`]: duplication and single-bit corruption.
//! * [`queue`]: the bottleneck queue, limited in packets and/or bytes,
//!   drop-tail or HiFi (a random victim among the waiting packets and the
//!   arrival, against drop-tail lock-out of periodic flows).
//! * [`rate`]: the serialiser of an exact fixed-rate link, with the
//!   fractional nanosecond carried so long runs do not drift.
//! * [`trace`]: the alternative serialiser, Mahimahi delivery opportunities
//!   from a looping trace.
//! * [`delay`]: the delay line, constant delay plus uniform or normal
//!   jitter, order-preserving or reordering.
//!
//! Around them:
//!
//! * [`direction`]: the pipeline, in virtual time (late calls yield the
//!   exact schedule), with link up/down and live parameter changes.
//! * [`stats`]: counters, queue occupancy, and HdrHistograms of departure
//!   lateness (exported in the standard compressed format) and queue
//!   sojourn.
//! * [`rng`]: the seeded xoshiro256++ generator, written out so that a seed
//!   gives the same run on every machine and after every upgrade; each
//!   mechanism draws from its own stream.
//! * [`params`]: the parameters and their validation errors, each naming
//!   the offending field.
//! * [`token_bucket`]: a token-bucket shaper (rate in bit/s, burst in bytes).

#![forbid(unsafe_code)]

pub mod delay;
pub mod direction;
pub mod impair;
pub mod loss;
pub mod params;
pub mod queue;
pub mod rate;
pub mod rng;
pub mod stats;
pub mod token_bucket;
pub mod trace;

pub use direction::{Departure, Direction};
pub use params::{DirectionParams, JitterDist, LossModel, ParamsError, QueueKind};
pub use stats::{DirectionStats, DropStats, LatenessStats, QueueStats, SojournStats};
pub use token_bucket::{TokenBucket, TokenBucketError};
