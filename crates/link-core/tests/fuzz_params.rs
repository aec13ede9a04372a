//! Fuzzing of link-core's parameter handling (issue 14): random JSON where
//! `DirectionParams` are expected, then, for what is accepted, a random run of
//! arrivals, polls, parameter changes and link state changes.
//!
//! The invariant: a refusal is a `serde` error or a `ParamsError` naming a
//! field; an accepted direction never panics, never departs a packet before
//! its time or before it arrived, and never sends more packets than arrived
//! (duplicates aside). `PROPTEST_CASES` sets the budget (`make fuzz`).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use link_core::{Direction, DirectionParams};
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};
use serde_json::{json, Map, Value};

/// Numbers where the parameters' edges are: zero, one, huge, negative,
/// fractional, just past the valid ranges.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(json!(0)),
        Just(json!(1)),
        Just(json!(-1)),
        Just(json!(u64::MAX)),
        Just(json!(i64::MIN)),
        Just(json!(u32::MAX)),
        Just(json!(0.5)),
        Just(json!(1.0000001)),
        Just(json!(1e300)),
        Just(json!(-0.0)),
        (0u64..2_000_000_000).prop_map(|n| json!(n)),
        (0.0f64..=1.0).prop_map(|f| json!(f)),
    ]
}

fn scalar() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => number(),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => "[a-z_]{0,12}".prop_map(Value::String),
        1 => prop::collection::vec(number(), 0..6).prop_map(Value::Array),
    ]
}

fn loss() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => Just(json!({"model": "none"})),
        8 => number().prop_map(|p| json!({"model": "random", "probability": p})),
        8 => (number(), number(), number(), number()).prop_map(|(p, r, g, b)| {
            json!({"model": "gilbert_elliott", "p": p, "r": r, "loss_good": g, "loss_bad": b})
        }),
        1 => scalar(),
        1 => Just(json!({"model": "random"})),
        1 => Just(json!({"model": "sometimes", "probability": 0.5})),
    ]
}

fn trace() -> impl Strategy<Value = Value> {
    prop_oneof![
        8 => prop::collection::vec(0u64..50, 0..40).prop_map(|mut v| {
            v.sort_unstable();
            json!(v)
        }),
        1 => prop::collection::vec(number(), 0..8).prop_map(Value::Array),
        1 => Just(json!([u64::MAX / 1_000_000 + 1])),
        1 => scalar(),
    ]
}

const FIELDS: &[&str] = &[
    "rate_bps",
    "overhead_bytes",
    "delay_ns",
    "jitter_ns",
    "jitter_dist",
    "reorder",
    "loss",
    "duplicate",
    "corrupt",
    "queue_packets",
    "queue_bytes",
    "queue",
    "trace_ms",
    "seed",
];

/// Mostly a value of the field's own type (so that most documents reach the
/// model), sometimes anything.
fn field_value(name: &'static str) -> BoxedStrategy<Value> {
    let typed: BoxedStrategy<Value> = match name {
        "loss" => loss().boxed(),
        "trace_ms" => trace().boxed(),
        "jitter_dist" => prop_oneof![Just(json!("uniform")), Just(json!("normal"))].boxed(),
        "queue" => prop_oneof![Just(json!("droptail")), Just(json!("hifi"))].boxed(),
        "reorder" => any::<bool>().prop_map(Value::Bool).boxed(),
        "rate_bps" => prop_oneof![
            (1_000u64..10_000_000_000).prop_map(|n| json!(n)),
            Just(json!(0)),
            Just(json!(u64::MAX)),
        ]
        .boxed(),
        "delay_ns" | "jitter_ns" => prop_oneof![
            (0u64..50_000_000).prop_map(|n| json!(n)),
            Just(json!(u64::MAX)),
        ]
        .boxed(),
        "queue_packets" => {
            prop_oneof![(0u32..5_000).prop_map(|n| json!(n)), Just(json!(u32::MAX))].boxed()
        }
        "queue_bytes" => prop_oneof![
            (0u64..5_000_000).prop_map(|n| json!(n)),
            Just(json!(u64::MAX))
        ]
        .boxed(),
        "duplicate" | "corrupt" => prop_oneof![
            (0.0f64..=1.0).prop_map(|f| json!(f)),
            Just(json!(1.5)),
            Just(json!(-0.1)),
        ]
        .boxed(),
        "overhead_bytes" => {
            prop_oneof![(0u32..100).prop_map(|n| json!(n)), Just(json!(u32::MAX))].boxed()
        }
        "seed" => any::<u64>().prop_map(|n| json!(n)).boxed(),
        _ => scalar().boxed(),
    };
    prop_oneof![30 => typed, 1 => scalar()].boxed()
}

fn params() -> impl Strategy<Value = Value> {
    prop::sample::subsequence(FIELDS, 0..=FIELDS.len())
        .prop_flat_map(|names| {
            names
                .into_iter()
                .map(|n| field_value(n).prop_map(move |v| (n, v)))
                .collect::<Vec<_>>()
        })
        .prop_flat_map(|pairs| (Just(pairs), prop::bool::weighted(0.03)))
        .prop_map(|(pairs, bogus)| {
            let mut m = Map::new();
            for (k, v) in pairs {
                m.insert(k.to_owned(), v);
            }
            if bogus {
                m.insert("bogus".to_owned(), json!(1)); // an unknown field
            }
            Value::Object(m)
        })
}

#[derive(Debug, Clone)]
enum Step {
    Push { gap_ns: u64, len: usize },
    Chunk { gap_ns: u64, packets: u32 },
    Poll { gap_ns: u64 },
    Up(bool),
    Set(Value),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => (0u64..2_000_000, 0usize..3_000).prop_map(|(gap_ns, len)| Step::Push { gap_ns, len }),
        1 => (0u64..2_000_000, 1u32..50).prop_map(|(gap_ns, packets)| Step::Chunk { gap_ns, packets }),
        6 => (0u64..20_000_000).prop_map(|gap_ns| Step::Poll { gap_ns }),
        1 => any::<bool>().prop_map(Step::Up),
        1 => params().prop_map(Step::Set),
    ]
}

/// Every refusal names a field, or is serde's own message.
fn check_refusal(e: &link_core::ParamsError) {
    assert!(!e.field().is_empty(), "{e}");
    assert!(e.to_string().starts_with(e.field()), "{e}");
}

static DOCS: AtomicU64 = AtomicU64::new(0);
static SERDE_REFUSED: AtomicU64 = AtomicU64::new(0);
static PARAMS_REFUSED: AtomicU64 = AtomicU64::new(0);
static RAN: AtomicU64 = AtomicU64::new(0);
static STEPS: AtomicU64 = AtomicU64::new(0);

#[test]
fn fuzz_params_are_refused_by_name_or_run_without_panic() {
    let mut runner = TestRunner::new(ProptestConfig::default()); // PROPTEST_CASES
    let strategy = (params(), prop::collection::vec(step(), 0..120));
    if let Err(e) = runner.run(&strategy, |(doc, steps)| one_case(doc, steps)) {
        panic!("{e}");
    }
    eprintln!(
        "fuzz link-core: {} parameter documents: {} refused by serde, {} by validation \
         (each naming its field), {} ran {} steps without a fault",
        DOCS.load(Relaxed),
        SERDE_REFUSED.load(Relaxed),
        PARAMS_REFUSED.load(Relaxed),
        RAN.load(Relaxed),
        STEPS.load(Relaxed),
    );
}

fn one_case(doc: Value, steps: Vec<Step>) -> Result<(), TestCaseError> {
    DOCS.fetch_add(1, Relaxed);
    let Ok(p) = serde_json::from_value::<DirectionParams>(doc) else {
        SERDE_REFUSED.fetch_add(1, Relaxed);
        return Ok(()); // serde's error: a type or an unknown field, named by serde
    };
    let mut d = match Direction::new(p) {
        Ok(d) => d,
        Err(e) => {
            PARAMS_REFUSED.fetch_add(1, Relaxed);
            check_refusal(&e);
            return Ok(());
        }
    };
    RAN.fetch_add(1, Relaxed);
    STEPS.fetch_add(steps.len() as u64, Relaxed);
    {
        let mut now = 0u64;
        let mut pushed = 0u64;
        let mut left = 0u64;
        for s in steps {
            match s {
                Step::Push { gap_ns, len } => {
                    now += gap_ns;
                    d.push(now, vec![0x5a; len]);
                    pushed += 1;
                }
                Step::Chunk { gap_ns, packets } => {
                    now += gap_ns;
                    let n = d.chunk_packets(now, 1448, 50_000).min(packets);
                    prop_assert!(n >= 1);
                    d.push_chunk(now, vec![0; 1448 * n as usize], n, 1448 * u64::from(n));
                    pushed += u64::from(n);
                }
                Step::Poll { gap_ns } => {
                    now += gap_ns;
                    let mut polls = 0;
                    while let Some(dep) = d.poll(now) {
                        prop_assert!(dep.scheduled_ns <= now);
                        left += u64::from(dep.packets);
                        polls += 1;
                        prop_assert!(polls < 100_000, "poll does not end");
                    }
                    // What is left is due later, or waits for nothing (down).
                    if let Some(t) = d.next_deadline() {
                        prop_assert!(t > now || d.poll(now).is_none(), "due at {t}, now {now}");
                    }
                }
                Step::Up(up) => d.set_up(now, up),
                Step::Set(doc) => {
                    if let Ok(p) = serde_json::from_value::<DirectionParams>(doc) {
                        if let Err(e) = d.set_params(now, p) {
                            check_refusal(&e);
                        }
                    }
                }
            }
        }
        let stats = d.stats();
        // Nothing leaves that did not arrive, apart from the duplicates made.
        prop_assert!(
            left <= pushed + stats.duplicated,
            "{left} left of {pushed} pushed: {stats:?}"
        );
    }
    Ok(())
}
