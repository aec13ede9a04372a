//! Parameters of one direction of a link, and their validation.
//!
//! [`DirectionParams`] is the whole configuration of a
//! [`Direction`](crate::Direction): rate or trace, queue, delay and jitter,
//! loss, duplication, corruption and the seed. It is plain data with serde
//! support, so the daemon can take it straight from JSON; every field has a
//! default (everything off), unknown fields are rejected, and enums are
//! spelled in `snake_case`:
//!
//! ```
//! use link_core::{DirectionParams, LossModel, QueueKind};
//!
//! let p: DirectionParams = serde_json::from_str(r#"{
//!     "rate_bps": 10000000, "delay_ns": 20000000, "queue_packets": 100,
//!     "queue": "hifi", "loss": {"model": "random", "probability": 0.01}
//! }"#).unwrap();
//! assert_eq!(p.loss, LossModel::Random { probability: 0.01 });
//! assert_eq!(p.queue, QueueKind::Hifi);
//! p.validate().unwrap();
//! ```
//!
//! Deserialising checks only the *shape*; [`DirectionParams::validate`]
//! checks the values and names the offending field, spelled as in the serde
//! form (`loss.p`, `trace_ms[3]`), so that an error can be shown to the user
//! against the file they wrote.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Nanoseconds per millisecond, the unit of trace entries.
pub(crate) const NS_PER_MS: u64 = 1_000_000;

/// Configuration of one direction of one link.
///
/// The [`Default`] is a perfect link: unlimited rate, no delay, no loss,
/// unlimited queue, seed 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DirectionParams {
    /// Bottleneck rate in bit/s. `None`: unlimited, i.e. no serialisation
    /// delay and therefore no queue build-up.
    pub rate_bps: Option<u64>,
    /// Bytes added to each packet's length for rate and trace accounting,
    /// e.g. 24 for Ethernet preamble, FCS and inter-frame gap. Queue byte
    /// limits count the packet's own length only.
    pub overhead_bytes: u32,
    /// Constant propagation delay in nanoseconds.
    pub delay_ns: u64,
    /// Jitter in nanoseconds: the half-width of the interval for
    /// [`JitterDist::Uniform`], the standard deviation for
    /// [`JitterDist::Normal`]. Jitter without delay is allowed: samples
    /// below zero are clipped to zero.
    pub jitter_ns: u64,
    /// Distribution of the jitter.
    pub jitter_dist: JitterDist,
    /// Whether jitter may reorder packets. When `false` (the default), a
    /// packet never departs before the one ahead of it.
    pub reorder: bool,
    /// Loss model, applied to each arriving packet.
    pub loss: LossModel,
    /// Probability that a packet is duplicated, in `0..=1`.
    pub duplicate: f64,
    /// Probability that a packet has one random bit flipped, in `0..=1`.
    pub corrupt: f64,
    /// Bottleneck queue limit in packets. With `queue_bytes` also `None`
    /// the queue is unlimited; the daemon applies its own default.
    pub queue_packets: Option<u32>,
    /// Bottleneck queue limit in bytes (packet lengths, without overhead).
    pub queue_bytes: Option<u64>,
    /// What the queue does with an arrival that does not fit.
    pub queue: QueueKind,
    /// Mahimahi trace: delivery opportunities of 1500 bytes each, in
    /// milliseconds, non-decreasing, last entry > 0 (the period). Replaces
    /// `rate_bps`, which must then be `None`.
    pub trace_ms: Option<Vec<u64>>,
    /// Seed of every random choice made for this direction.
    pub seed: u64,
}

impl Default for DirectionParams {
    fn default() -> Self {
        Self {
            rate_bps: None,
            overhead_bytes: 0,
            delay_ns: 0,
            jitter_ns: 0,
            jitter_dist: JitterDist::Uniform,
            reorder: false,
            loss: LossModel::None,
            duplicate: 0.0,
            corrupt: 0.0,
            queue_packets: None,
            queue_bytes: None,
            queue: QueueKind::DropTail,
            trace_ms: None,
            seed: 0,
        }
    }
}

/// Distribution of the jitter added to the delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JitterDist {
    /// Uniform integer in `[-jitter_ns, +jitter_ns]`.
    #[default]
    Uniform,
    /// Normal with standard deviation `jitter_ns`, rounded to the nanosecond.
    Normal,
}

/// Which packets are lost before they reach the queue.
///
/// Serialised with an internal `"model"` tag:
/// `{"model": "none"}`, `{"model": "random", "probability": 0.01}`,
/// `{"model": "gilbert_elliott", "p": 0.01, "r": 0.3, "loss_good": 0.0,
/// "loss_bad": 1.0}`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case", deny_unknown_fields)]
pub enum LossModel {
    /// No loss.
    #[default]
    None,
    /// Independent (Bernoulli) loss.
    Random {
        /// Probability that a packet is lost, in `0..=1`.
        probability: f64,
    },
    /// Gilbert-Elliott two-state Markov chain, stepped once per packet
    /// (netem's `gemodel p r 1-h 1-k`, with `loss_good = 1-k` and
    /// `loss_bad = 1-h`).
    GilbertElliott {
        /// Probability of moving from the good to the bad state.
        p: f64,
        /// Probability of moving from the bad to the good state; the mean
        /// stay in the bad state is `1/r` packets.
        r: f64,
        /// Loss probability in the good state.
        loss_good: f64,
        /// Loss probability in the bad state.
        loss_bad: f64,
    },
}

/// Behaviour of the bottleneck queue when an arrival does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueKind {
    /// The arrival is dropped.
    #[default]
    #[serde(rename = "droptail")]
    DropTail,
    /// The fix for drop-tail unfairness (named after Mininet-HiFi): an
    /// arrival that does not fit drops a packet chosen uniformly among the
    /// waiting ones and itself; if a waiting one is chosen, the arrival
    /// joins the tail in its place. Order is kept; see the `queue` module.
    Hifi,
}

/// A [`DirectionParams`] value that cannot be used. Each variant carries the
/// offending field as spelled in the serde form; see [`ParamsError::field`].
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum ParamsError {
    /// A probability is NaN.
    #[error("{field}: NaN is not a probability")]
    NotANumber {
        /// The field, e.g. `loss.p`.
        field: String,
    },
    /// A probability is outside `0..=1`.
    #[error("{field}: {value} is outside 0..=1")]
    ProbabilityOutOfRange {
        /// The field, e.g. `duplicate`.
        field: String,
        /// The value given.
        value: f64,
    },
    /// `rate_bps` is zero, which would never release a packet.
    #[error("{field}: rate must be at least 1 bit/s (omit it for an unlimited rate)")]
    ZeroRate {
        /// Always `rate_bps`.
        field: String,
    },
    /// Both `rate_bps` and `trace_ms` are set.
    #[error("{field}: a trace replaces rate_bps; set only one of them")]
    RateAndTrace {
        /// Always `trace_ms`.
        field: String,
    },
    /// `trace_ms` is an empty list.
    #[error("{field}: a trace needs at least one delivery opportunity")]
    EmptyTrace {
        /// Always `trace_ms`.
        field: String,
    },
    /// A trace entry is smaller than the one before it.
    #[error("{field}: {value} ms is before the previous entry, {previous} ms")]
    DecreasingTrace {
        /// The entry, e.g. `trace_ms[3]`.
        field: String,
        /// Its value in milliseconds.
        value: u64,
        /// The previous entry's value in milliseconds.
        previous: u64,
    },
    /// The last trace entry (the period) is zero.
    #[error("{field}: the last entry is the trace's period and must be > 0 ms")]
    ZeroTracePeriod {
        /// The last entry, e.g. `trace_ms[9]`.
        field: String,
    },
    /// A trace entry does not fit in a `u64` count of nanoseconds.
    #[error("{field}: {value} ms is too large (at most {max} ms)")]
    TraceEntryTooLarge {
        /// The entry, e.g. `trace_ms[3]`.
        field: String,
        /// Its value in milliseconds.
        value: u64,
        /// The largest accepted value in milliseconds.
        max: u64,
    },
    /// A queue limit is zero, which would drop every packet.
    #[error("{field}: a queue limit must be at least 1 (omit it for no limit)")]
    ZeroQueueLimit {
        /// `queue_packets` or `queue_bytes`.
        field: String,
    },
}

impl ParamsError {
    /// The offending field as spelled in the serde form: `rate_bps`,
    /// `loss.p`, `trace_ms[3]`, ...
    pub fn field(&self) -> &str {
        match self {
            Self::NotANumber { field }
            | Self::ProbabilityOutOfRange { field, .. }
            | Self::ZeroRate { field }
            | Self::RateAndTrace { field }
            | Self::EmptyTrace { field }
            | Self::DecreasingTrace { field, .. }
            | Self::ZeroTracePeriod { field }
            | Self::TraceEntryTooLarge { field, .. }
            | Self::ZeroQueueLimit { field } => field,
        }
    }
}

/// Check that `value` is a probability.
fn probability(field: &str, value: f64) -> Result<(), ParamsError> {
    if value.is_nan() {
        return Err(ParamsError::NotANumber {
            field: field.to_owned(),
        });
    }
    if !(0.0..=1.0).contains(&value) {
        return Err(ParamsError::ProbabilityOutOfRange {
            field: field.to_owned(),
            value,
        });
    }
    Ok(())
}

/// Check a Mahimahi trace: non-empty, non-decreasing, period > 0, and every
/// entry representable in nanoseconds.
fn trace(entries: &[u64]) -> Result<(), ParamsError> {
    let Some(&last) = entries.last() else {
        return Err(ParamsError::EmptyTrace {
            field: "trace_ms".to_owned(),
        });
    };
    let max = u64::MAX / NS_PER_MS;
    let mut previous = 0;
    for (i, &value) in entries.iter().enumerate() {
        if value < previous {
            return Err(ParamsError::DecreasingTrace {
                field: format!("trace_ms[{i}]"),
                value,
                previous,
            });
        }
        if value > max {
            return Err(ParamsError::TraceEntryTooLarge {
                field: format!("trace_ms[{i}]"),
                value,
                max,
            });
        }
        previous = value;
    }
    if last == 0 {
        return Err(ParamsError::ZeroTracePeriod {
            field: format!("trace_ms[{}]", entries.len() - 1),
        });
    }
    Ok(())
}

impl DirectionParams {
    /// Whether the model must see every packet as it would be on the wire:
    /// a rate or trace (each packet is serialised and queued on its own),
    /// jitter, loss, duplication or corruption (each drawn per packet). A
    /// direction with none of these (a perfect or delay-only link) treats a
    /// segmentation-offload super-frame exactly as the packets it stands for,
    /// so the I/O layer may pass it whole.
    ///
    /// ```
    /// use link_core::DirectionParams;
    /// let delay_only = DirectionParams { delay_ns: 5_000_000, ..Default::default() };
    /// assert!(!delay_only.needs_wire_packets());
    /// let shaped = DirectionParams { rate_bps: Some(1_000_000), ..delay_only };
    /// assert!(shaped.needs_wire_packets());
    /// ```
    pub fn needs_wire_packets(&self) -> bool {
        self.rate_bps.is_some()
            || self.trace_ms.is_some()
            || self.jitter_ns > 0
            || !matches!(self.loss, LossModel::None)
            || self.duplicate > 0.0
            || self.corrupt > 0.0
    }

    /// Whether the I/O layer may push several wire packets as one chunk
    /// ([`crate::Direction::push_chunk`]): a rate and nothing drawn per
    /// packet (no trace, jitter, loss, duplication or corruption) and a
    /// drop-tail queue, so every packet of a chunk would be serialised
    /// back to back and treated alike.
    ///
    /// ```
    /// use link_core::DirectionParams;
    /// let shaped = DirectionParams { rate_bps: Some(1_000_000_000), ..Default::default() };
    /// assert!(shaped.allows_chunks());
    /// let lossy = DirectionParams { corrupt: 0.01, ..shaped.clone() };
    /// assert!(!lossy.allows_chunks());
    /// ```
    pub fn allows_chunks(&self) -> bool {
        self.rate_bps.is_some()
            && self.trace_ms.is_none()
            && self.jitter_ns == 0
            && matches!(self.loss, LossModel::None)
            && self.duplicate == 0.0
            && self.corrupt == 0.0
            && self.queue == QueueKind::DropTail
    }

    /// Check every value, reporting the first problem found (in field
    /// order). Jitter without delay is accepted: the delay is then clipped
    /// at zero.
    pub fn validate(&self) -> Result<(), ParamsError> {
        if self.rate_bps == Some(0) {
            return Err(ParamsError::ZeroRate {
                field: "rate_bps".to_owned(),
            });
        }
        match self.loss {
            LossModel::None => {}
            LossModel::Random { probability: prob } => probability("loss.probability", prob)?,
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                probability("loss.p", p)?;
                probability("loss.r", r)?;
                probability("loss.loss_good", loss_good)?;
                probability("loss.loss_bad", loss_bad)?;
            }
        }
        probability("duplicate", self.duplicate)?;
        probability("corrupt", self.corrupt)?;
        if self.queue_packets == Some(0) {
            return Err(ParamsError::ZeroQueueLimit {
                field: "queue_packets".to_owned(),
            });
        }
        if self.queue_bytes == Some(0) {
            return Err(ParamsError::ZeroQueueLimit {
                field: "queue_bytes".to_owned(),
            });
        }
        if let Some(entries) = &self.trace_ms {
            if self.rate_bps.is_some() {
                return Err(ParamsError::RateAndTrace {
                    field: "trace_ms".to_owned(),
                });
            }
            trace(entries)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(p: DirectionParams) -> ParamsError {
        p.validate().unwrap_err()
    }

    #[test]
    fn default_is_valid_and_off() {
        let p = DirectionParams::default();
        p.validate().unwrap();
        assert_eq!(p.rate_bps, None);
        assert_eq!(p.loss, LossModel::None);
        assert_eq!(p.queue, QueueKind::DropTail);
        assert_eq!(p.jitter_dist, JitterDist::Uniform);
        assert_eq!(p.seed, 0);
    }

    #[test]
    fn jitter_without_delay_is_allowed() {
        let p = DirectionParams {
            jitter_ns: 1_000,
            ..Default::default()
        };
        p.validate().unwrap();
    }

    #[test]
    fn each_error_names_its_field() {
        let d = DirectionParams::default;
        let ge = |p, r, loss_good, loss_bad| DirectionParams {
            loss: LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            },
            ..d()
        };
        let cases: Vec<(DirectionParams, &str, &str)> = vec![
            (
                DirectionParams {
                    rate_bps: Some(0),
                    ..d()
                },
                "rate_bps",
                "rate_bps: rate must be at least 1 bit/s (omit it for an unlimited rate)",
            ),
            (
                DirectionParams {
                    loss: LossModel::Random {
                        probability: f64::NAN,
                    },
                    ..d()
                },
                "loss.probability",
                "loss.probability: NaN is not a probability",
            ),
            (
                DirectionParams {
                    loss: LossModel::Random { probability: -0.1 },
                    ..d()
                },
                "loss.probability",
                "loss.probability: -0.1 is outside 0..=1",
            ),
            (
                ge(1.5, 0.5, 0.0, 1.0),
                "loss.p",
                "loss.p: 1.5 is outside 0..=1",
            ),
            (
                ge(0.1, f64::NAN, 0.0, 1.0),
                "loss.r",
                "loss.r: NaN is not a probability",
            ),
            (
                ge(0.1, 0.5, 2.0, 1.0),
                "loss.loss_good",
                "loss.loss_good: 2 is outside 0..=1",
            ),
            (
                ge(0.1, 0.5, 0.0, f64::INFINITY),
                "loss.loss_bad",
                "loss.loss_bad: inf is outside 0..=1",
            ),
            (
                DirectionParams {
                    duplicate: 1.01,
                    ..d()
                },
                "duplicate",
                "duplicate: 1.01 is outside 0..=1",
            ),
            (
                DirectionParams {
                    corrupt: f64::NAN,
                    ..d()
                },
                "corrupt",
                "corrupt: NaN is not a probability",
            ),
            (
                DirectionParams {
                    queue_packets: Some(0),
                    ..d()
                },
                "queue_packets",
                "queue_packets: a queue limit must be at least 1 (omit it for no limit)",
            ),
            (
                DirectionParams {
                    queue_bytes: Some(0),
                    ..d()
                },
                "queue_bytes",
                "queue_bytes: a queue limit must be at least 1 (omit it for no limit)",
            ),
            (
                DirectionParams {
                    rate_bps: Some(1_000),
                    trace_ms: Some(vec![1]),
                    ..d()
                },
                "trace_ms",
                "trace_ms: a trace replaces rate_bps; set only one of them",
            ),
            (
                DirectionParams {
                    trace_ms: Some(vec![]),
                    ..d()
                },
                "trace_ms",
                "trace_ms: a trace needs at least one delivery opportunity",
            ),
            (
                DirectionParams {
                    trace_ms: Some(vec![0, 1, 5, 3, 7]),
                    ..d()
                },
                "trace_ms[3]",
                "trace_ms[3]: 3 ms is before the previous entry, 5 ms",
            ),
            (
                DirectionParams {
                    trace_ms: Some(vec![0, 0, 0]),
                    ..d()
                },
                "trace_ms[2]",
                "trace_ms[2]: the last entry is the trace's period and must be > 0 ms",
            ),
            (
                DirectionParams {
                    trace_ms: Some(vec![1, u64::MAX]),
                    ..d()
                },
                "trace_ms[1]",
                "trace_ms[1]: 18446744073709551615 ms is too large (at most 18446744073709 ms)",
            ),
        ];
        for (params, field, message) in cases {
            let e = err(params);
            assert_eq!(e.field(), field, "{e}");
            assert_eq!(e.to_string(), message);
        }
    }

    #[test]
    fn boundary_values_are_valid() {
        let p = DirectionParams {
            rate_bps: None,
            loss: LossModel::GilbertElliott {
                p: 0.0,
                r: 1.0,
                loss_good: 0.0,
                loss_bad: 1.0,
            },
            duplicate: 1.0,
            corrupt: 0.0,
            queue_packets: Some(1),
            queue_bytes: Some(1),
            trace_ms: Some(vec![0, 0, 1]),
            ..Default::default()
        };
        p.validate().unwrap();
    }

    #[test]
    fn serde_spelling() {
        let p: DirectionParams = serde_json::from_str(
            r#"{"rate_bps": 1000, "jitter_dist": "normal", "queue": "droptail",
                "loss": {"model": "gilbert_elliott", "p": 0.1, "r": 0.2,
                         "loss_good": 0.0, "loss_bad": 1.0},
                "trace_ms": null, "seed": 7}"#,
        )
        .unwrap();
        assert_eq!(p.rate_bps, Some(1000));
        assert_eq!(p.jitter_dist, JitterDist::Normal);
        assert_eq!(
            p.loss,
            LossModel::GilbertElliott {
                p: 0.1,
                r: 0.2,
                loss_good: 0.0,
                loss_bad: 1.0
            }
        );
        assert_eq!(p.seed, 7);
        let none: DirectionParams = serde_json::from_str(r#"{"loss": {"model": "none"}}"#).unwrap();
        assert_eq!(none, DirectionParams::default());
        let json = serde_json::to_value(DirectionParams {
            queue: QueueKind::Hifi,
            loss: LossModel::Random { probability: 0.5 },
            ..Default::default()
        })
        .unwrap();
        assert_eq!(json["queue"], "hifi");
        assert_eq!(json["jitter_dist"], "uniform");
        assert_eq!(json["loss"]["model"], "random");
        assert_eq!(json["loss"]["probability"], 0.5);
        assert_eq!(
            serde_json::to_value(DirectionParams::default()).unwrap()["queue"],
            "droptail"
        );
        // Round trip.
        let back: DirectionParams = serde_json::from_value(json).unwrap();
        assert_eq!(back.queue, QueueKind::Hifi);
    }

    #[test]
    fn serde_rejects_unknown_fields_and_values() {
        for bad in [
            r#"{"rate": 1000}"#,
            r#"{"queue": "red"}"#,
            r#"{"jitter_dist": "pareto"}"#,
            r#"{"loss": {"model": "random", "probability": 0.1, "x": 1}}"#,
            r#"{"loss": {"model": "bursty"}}"#,
            r#"{"loss": {"probability": 0.1}}"#,
            r#"{"rate_bps": -1}"#,
        ] {
            assert!(
                serde_json::from_str::<DirectionParams>(bad).is_err(),
                "{bad}"
            );
        }
    }
}
