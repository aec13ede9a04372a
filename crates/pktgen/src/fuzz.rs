//! Fuzzing of the receiver's parsing and accounting (issue 14): random
//! datagrams (random bytes, our header with random fields, corrupted copies)
//! at random receive times, fed to [`Accounting`].
//!
//! The invariant: no panic, every datagram counted once (received or
//! malformed), unique + duplicates = received, and memory bounded by the
//! intervals the receive times span, never by the values inside a forged
//! header. `PROPTEST_CASES` sets the budget (`make fuzz`).

use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;

use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestRunner};

use crate::account::Accounting;
use crate::payload::{stamp, write_fixed, LEN};

#[derive(Debug, Clone)]
enum Datagram {
    Bytes(Vec<u8>),
    Ours {
        flow: u16,
        seq: u32,
        send_ns: u64,
        extra: usize,
    },
    Flipped {
        flow: u16,
        seq: u32,
        bit: usize,
    },
}

fn datagram() -> impl Strategy<Value = Datagram> {
    prop_oneof![
        2 => prop::collection::vec(any::<u8>(), 0..64).prop_map(Datagram::Bytes),
        6 => (prop_oneof![Just(0u16), Just(1), Just(u16::MAX), any::<u16>()],
              prop_oneof![0u32..50, Just(u32::MAX), Just(u32::MAX - 1), any::<u32>()],
              prop_oneof![Just(0u64), Just(u64::MAX), 1_000_000_000u64..1_000_000_100_000],
              0usize..1500)
            .prop_map(|(flow, seq, send_ns, extra)| Datagram::Ours { flow, seq, send_ns, extra }),
        1 => (any::<u16>(), any::<u32>(), 0usize..(LEN * 8))
            .prop_map(|(flow, seq, bit)| Datagram::Flipped { flow, seq, bit }),
    ]
}

fn bytes(d: &Datagram) -> Vec<u8> {
    match *d {
        Datagram::Bytes(ref b) => b.clone(),
        Datagram::Ours {
            flow,
            seq,
            send_ns,
            extra,
        } => {
            let mut b = vec![0u8; LEN + extra];
            write_fixed(&mut b, flow);
            stamp(&mut b, seq, send_ns);
            b
        }
        Datagram::Flipped { flow, seq, bit } => {
            let mut b = vec![0u8; LEN];
            write_fixed(&mut b, flow);
            stamp(&mut b, seq, 1_000_000_000);
            b[bit / 8] ^= 1 << (bit % 8);
            b
        }
    }
}

static DATAGRAMS: AtomicU64 = AtomicU64::new(0);
static RECEIVED: AtomicU64 = AtomicU64::new(0);
static MALFORMED: AtomicU64 = AtomicU64::new(0);

#[test]
fn fuzz_any_datagram_is_counted_once_and_nothing_panics() {
    let mut runner = TestRunner::new(ProptestConfig::default()); // PROPTEST_CASES
    let strategy = (
        prop::collection::vec((datagram(), 0u64..5_000_000), 0..200),
        1u64..100,
    );
    if let Err(e) = runner.run(&strategy, |(items, width_ms)| one_run(&items, width_ms)) {
        panic!("{e}");
    }
    eprintln!(
        "fuzz pktgen receiver: {} datagrams: {} accounted as ours, {} as malformed",
        DATAGRAMS.load(Relaxed),
        RECEIVED.load(Relaxed),
        MALFORMED.load(Relaxed),
    );
}

fn one_run(items: &[(Datagram, u64)], width_ms: u64) -> Result<(), TestCaseError> {
    let width = width_ms * 1_000_000;
    let mut acc = Accounting::new(width, 2 * width);
    let mut rx = 1_000_000_000u64;
    for (d, gap) in items {
        rx += gap;
        let b = bytes(d);
        acc.packet(&b, b.len(), rx, 46, &mut ());
    }
    acc.finish(&mut ());
    let m = &acc.malformed;
    let bad = m.too_short + m.bad_magic + m.bad_check;
    DATAGRAMS.fetch_add(items.len() as u64, Relaxed);
    RECEIVED.fetch_add(acc.received, Relaxed);
    MALFORMED.fetch_add(bad, Relaxed);
    prop_assert_eq!(acc.received + bad, items.len() as u64);
    prop_assert_eq!(acc.unique + acc.duplicates, acc.received);
    let flows: u64 = acc.flows().map(|(_, f)| f.received).sum();
    prop_assert_eq!(flows, acc.received);
    // Intervals come from the receive times only: the span over the width.
    let span = rx - 1_000_000_000;
    prop_assert!(acc.intervals.len() as u64 <= span / width + 2);
    Ok(())
}
