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
//! * [`token_bucket`]: a token-bucket shaper (rate in bit/s, burst in bytes).

#![forbid(unsafe_code)]

pub mod token_bucket;

pub use token_bucket::{TokenBucket, TokenBucketError};
