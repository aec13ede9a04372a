//! Chunks ([`Direction::push_chunk`]) against the same wire packets pushed
//! one by one: the same packets are admitted and dropped, counted alike,
//! and each chunk leaves exactly when the last of its packets would have.

use std::collections::BTreeMap;

use link_core::{Direction, DirectionParams};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const SEG: usize = 1514;

/// Segment `id` (first 4 bytes, big-endian).
fn segment(id: u32) -> Vec<u8> {
    let mut v = vec![0u8; SEG];
    v[..4].copy_from_slice(&id.to_be_bytes());
    v
}

fn id(data: &[u8]) -> u32 {
    u32::from_be_bytes(data[..4].try_into().unwrap())
}

/// Bursts of `per` segments, the k-th at `starts[k]`.
fn bursts(starts: &[u64], per: u32) -> Vec<(u64, u32, u32)> {
    starts
        .iter()
        .enumerate()
        .map(|(k, &t)| (t, k as u32 * per, per))
        .collect()
}

/// Poll every departure due by `limit`, on time: (id of the entry's first
/// segment, packets, scheduled).
fn drain(d: &mut Direction, limit: u64, out: &mut Vec<(u32, u32, u64)>) {
    while let Some(t) = d.next_deadline().filter(|&t| t <= limit) {
        while let Some(dep) = d.poll(t) {
            out.push((id(&dep.data), dep.packets, dep.scheduled_ns));
        }
    }
}

/// Every segment one by one: id -> departure.
fn singly(p: &DirectionParams, bursts: &[(u64, u32, u32)]) -> (BTreeMap<u32, u64>, Direction) {
    let mut d = Direction::new(p.clone()).unwrap();
    let mut out = Vec::new();
    for &(t, first, n) in bursts {
        drain(&mut d, t, &mut out);
        for i in first..first + n {
            d.push(t, segment(i));
        }
    }
    drain(&mut d, u64::MAX, &mut out);
    assert!(out.iter().all(|&(_, n, _)| n == 1));
    (out.into_iter().map(|(i, _, t)| (i, t)).collect(), d)
}

/// The same segments in chunks sized by `chunk_packets(.., max_ns)`:
/// (first id, packets, departure) per chunk.
fn chunked(
    p: &DirectionParams,
    bursts: &[(u64, u32, u32)],
    max_ns: u64,
) -> (Vec<(u32, u32, u64)>, Direction) {
    let mut d = Direction::new(p.clone()).unwrap();
    let mut out = Vec::new();
    for &(t, first, n) in bursts {
        drain(&mut d, t, &mut out);
        let mut next = first;
        while next < first + n {
            let k = d.chunk_packets(t, SEG as u64, max_ns).min(first + n - next);
            d.push_chunk(t, segment(next), k, u64::from(k) * SEG as u64);
            next += k;
        }
    }
    drain(&mut d, u64::MAX, &mut out);
    (out, d)
}

fn check_same(p: &DirectionParams, bursts: &[(u64, u32, u32)], max_ns: u64) -> usize {
    let (single, a) = singly(p, bursts);
    let (chunks, b) = chunked(p, bursts, max_ns);
    let (sa, sb) = (a.stats(), b.stats());
    assert_eq!(
        (sa.rx_packets, sa.tx_packets, sa.rx_bytes, sa.tx_bytes),
        (sb.rx_packets, sb.tx_packets, sb.rx_bytes, sb.tx_bytes)
    );
    assert_eq!(sa.drops.queue, sb.drops.queue, "the same drops");
    let mut delivered = 0;
    for &(first, n, at) in &chunks {
        for i in first..first + n {
            let alone = single[&i];
            assert!(
                alone <= at && at - alone <= max_ns,
                "segment {i}: {alone} vs {at}"
            );
        }
        assert_eq!(single[&(first + n - 1)], at, "a chunk leaves with its last");
        delivered += n as usize;
    }
    assert_eq!(delivered, single.len(), "the same segments delivered");
    chunks.len()
}

#[test]
fn unlimited_queue_same_schedule_fewer_entries() {
    // 10 Gbit/s: a 1514-byte segment (+24 overhead) takes 1.23 us; 44 of
    // them are a 64 KiB super-frame.
    let p = DirectionParams {
        rate_bps: Some(10_000_000_000),
        delay_ns: MS,
        ..Default::default()
    };
    let starts: Vec<u64> = (0..200).map(|k| k * 40 * US).collect();
    let b = bursts(&starts, 44);
    let entries = check_same(&p, &b, 20 * US);
    // 16 segments per 20 us: 3 chunks per burst instead of 44 packets.
    assert_eq!(entries, 200 * 3);
}

#[test]
fn packet_limited_queue_drops_the_same_packets() {
    let p = DirectionParams {
        rate_bps: Some(5_000_000_000),
        queue_packets: Some(30),
        ..Default::default()
    };
    // Bursts faster than the rate, at irregular instants, so chunks arrive
    // while a chunk is half way through transmission.
    let mut t = 0;
    let starts: Vec<u64> = (0..300)
        .map(|k| {
            t += 37 * US + (k * 7919 % 53) * US;
            t
        })
        .collect();
    let b = bursts(&starts, 44);
    let (_, a) = singly(&p, &b);
    let s = a.stats();
    assert!(s.drops.queue > 1000, "the queue overflows");
    let entries = check_same(&p, &b, 50 * US);
    assert!(entries * 4 < s.tx_packets as usize, "{entries} entries");
}

#[test]
fn byte_limited_queue_drops_the_same_packets() {
    let p = DirectionParams {
        rate_bps: Some(2_000_000_000),
        queue_bytes: Some(40_000),
        ..Default::default()
    };
    let starts: Vec<u64> = (0..100).map(|k| k * 250 * US + (k % 7) * 11 * US).collect();
    let b = bursts(&starts, 44);
    let entries = check_same(&p, &b, 30 * US);
    assert!(entries < 100 * 44 / 4, "{entries} entries");
}

#[test]
fn no_chunks_where_packets_are_drawn_or_the_rate_is_low() {
    let mut d = Direction::new(DirectionParams {
        rate_bps: Some(1_000_000_000),
        corrupt: 0.001,
        ..Default::default()
    })
    .unwrap();
    assert_eq!(d.chunk_packets(0, SEG as u64, 100 * US), 1);
    let mut d = Direction::new(DirectionParams::default()).unwrap();
    assert_eq!(d.chunk_packets(0, SEG as u64, 100 * US), 1, "no rate");
    let mut d = Direction::new(DirectionParams {
        rate_bps: Some(100_000_000),
        ..Default::default()
    })
    .unwrap();
    // 123 us a segment at 100 Mbit/s: a 50 us chunk holds one.
    assert_eq!(d.chunk_packets(0, SEG as u64, 50 * US), 1);
    d.set_up(0, false);
    assert_eq!(d.chunk_packets(0, SEG as u64, 10 * MS), 1, "down");
}

#[test]
fn a_chunk_on_a_down_link_counts_all_its_packets() {
    let mut d = Direction::new(DirectionParams {
        rate_bps: Some(1_000_000_000),
        delay_ns: MS,
        ..Default::default()
    })
    .unwrap();
    d.push_chunk(0, segment(0), 8, 8 * SEG as u64);
    d.set_up(10 * US, false);
    d.push_chunk(20 * US, segment(8), 4, 4 * SEG as u64);
    let s = d.stats();
    assert_eq!((s.rx_packets, s.drops.down, s.tx_packets), (12, 12, 0));
}
