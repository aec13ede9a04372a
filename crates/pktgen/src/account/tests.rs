use super::*;

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000 * 1_000_000_000;

fn datagram(flow: u16, seq: u32, send_ns: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    Payload { flow, seq, send_ns }.write(&mut b);
    b
}

/// Feed `flow`'s sequence numbers, 1 ms apart from T0, latency 50 µs.
fn feed(a: &mut Accounting, flow: u16, seqs: &[u32]) {
    for (i, &seq) in seqs.iter().enumerate() {
        let rx = T0 + i as u64 * MS;
        let d = datagram(flow, seq, rx - 50_000, 18);
        a.packet(&d, d.len(), rx, 46, &mut ());
    }
}

#[test]
fn in_order_without_loss() {
    let mut a = Accounting::new(100 * MS, 0);
    feed(&mut a, 0, &(0..1000).collect::<Vec<_>>());
    a.finish(&mut ());
    let (id, f) = a.flows().next().unwrap();
    assert_eq!(id, 0);
    assert_eq!(
        (f.received, f.unique, f.duplicates, f.reordered),
        (1000, 1000, 0, 0)
    );
    assert_eq!((f.max_seq(), f.lost_by_seq()), (999, 0));
    assert_eq!(
        (a.received, a.unique, a.bytes, a.frame_bytes),
        (1000, 1000, 18_000, 64_000)
    );
    let l = hist::summary(&a.latency);
    assert_eq!(l.count, 1000);
    assert!(l.p50_ns.abs_diff(50_000) <= 50, "{l:?}");
    assert_eq!(a.intervals.len(), 10);
    assert!(a
        .intervals
        .iter()
        .all(|i| i.packets == 100 && i.frame_bytes == 6400));
    assert_eq!(
        (a.first_rx_ns, a.last_rx_ns),
        (Some(T0), Some(T0 + 999 * MS))
    );
}

#[test]
fn duplicates_reordering_and_loss() {
    let mut a = Accounting::new(100 * MS, 0);
    // 0..10 with 3 and 7 missing, 5 twice, 2 late (reordered), 4 three times.
    feed(&mut a, 1, &[0, 1, 4, 5, 5, 2, 6, 8, 9, 4, 4]);
    let f = a.flows().next().unwrap().1;
    assert_eq!(f.received, 11);
    assert_eq!(f.unique, 8);
    assert_eq!(f.duplicates, 3);
    assert_eq!(f.reordered, 1);
    assert_eq!(f.max_seq(), 9);
    assert_eq!(f.lost_by_seq(), 2);
    assert_eq!((a.unique, a.duplicates, a.reordered), (8, 3, 1));
    // The series counts them where they arrived.
    a.finish(&mut ());
    assert_eq!(a.intervals.len(), 1);
    assert_eq!((a.intervals[0].packets, a.intervals[0].duplicates), (11, 3));
}

#[test]
fn gaps_are_kept_with_their_send_times_and_filled_by_late_packets() {
    let mut a = Accounting::new(100 * MS, 0);
    // Flow 1: 0..3, then 3..=5 missing with 4 arriving late, then 6..8.
    // Flow 2 in order: no gap.
    feed(&mut a, 1, &[0, 1, 2, 6, 4, 7, 8]);
    feed(&mut a, 2, &[0, 1, 2]);
    assert_eq!(a.gaps.len(), 1);
    let g = a.gaps[0];
    assert_eq!((g.flow, g.after_seq, g.before_seq), (1, 2, 6));
    // feed() sends packet i at T0 + i ms - 50 us: 2 went third, 6 fourth.
    assert_eq!(g.after_send_ns, T0 + 2 * MS - 50_000);
    assert_eq!(g.before_send_ns, T0 + 3 * MS - 50_000);
    assert_eq!(g.before_rx_ns, T0 + 3 * MS);
    assert_eq!((g.filled, g.lost()), (1, 2));
    assert_eq!(a.gaps_dropped, 0);
}

#[test]
fn gaps_beyond_the_cap_are_counted_not_kept() {
    let mut a = Accounting::new(100 * MS, 0);
    let seqs: Vec<u32> = (0..(MAX_GAPS as u32 + 6)).map(|i| 2 * i).collect();
    feed(&mut a, 0, &seqs);
    assert_eq!(a.gaps.len(), MAX_GAPS);
    assert_eq!(a.gaps_dropped, 5);
}

#[test]
fn duplicate_window_slides() {
    let mut a = Accounting::new(100 * MS, 0);
    // A jump of exactly the window forgets everything before it.
    feed(&mut a, 0, &[0, 1, 65_537, 1, 2, 65_537]);
    let f = a.flows().next().unwrap().1;
    // 1 is 65 536 behind: beyond the window, not called a duplicate;
    // 2 is just inside and new.
    assert_eq!((f.unique, f.duplicates, f.beyond_window), (5, 1, 1));
    assert_eq!(f.reordered, 2);
    // A slot taken over by a newer number no longer means the old one.
    let mut b = Accounting::new(100 * MS, 0);
    feed(&mut b, 0, &[5, 65_540, 65_541, 65_540, 6]);
    let f = b.flows().next().unwrap().1;
    assert_eq!((f.unique, f.duplicates, f.reordered), (4, 1, 1));
    assert_eq!(f.lost_by_seq(), 65_542 - 4);
}

#[test]
fn flows_are_separate() {
    let mut a = Accounting::new(100 * MS, 0);
    feed(&mut a, 3, &[0, 1, 2]);
    feed(&mut a, 0, &[0, 2]);
    let flows: Vec<_> = a
        .flows()
        .map(|(id, f)| (id, f.unique, f.lost_by_seq()))
        .collect();
    assert_eq!(flows, vec![(0, 2, 1), (3, 3, 0)]);
    assert_eq!(a.received, 5);
}

#[test]
fn malformed_are_counted_and_ignored() {
    let mut a = Accounting::new(100 * MS, 0);
    let good = datagram(0, 0, T0, 18);
    let mut corrupt = good.clone();
    corrupt[9] ^= 4;
    for d in [&good[..5], &[0u8; 40][..], &corrupt[..], &good[..], &[][..]] {
        a.packet(d, d.len(), T0 + 1000, 46, &mut ());
    }
    assert_eq!(
        a.malformed,
        MalformedCounts {
            too_short: 2,
            bad_magic: 1,
            bad_check: 1
        }
    );
    assert_eq!(a.malformed.total(), 4);
    assert_eq!((a.received, a.bytes), (1, 18));
}

#[test]
fn negative_latency_is_not_recorded() {
    let mut a = Accounting::new(100 * MS, 0);
    let d = datagram(0, 0, T0 + 5, 18);
    a.packet(&d, 18, T0, 46, &mut ());
    assert_eq!((a.received, a.negative_latency, a.latency.len()), (1, 1, 0));
    a.finish(&mut ());
    assert_eq!(a.intervals[0].packets, 1);
    assert_eq!(a.intervals[0].latency_count, 0);
}

#[derive(Default)]
struct Log(Vec<(u64, u64, u64)>);

impl IntervalSink for Log {
    fn interval(&mut self, start: u64, width: u64, h: &Histogram<u64>) {
        self.0.push((start, width, h.len()));
    }
}

#[test]
fn interval_series_has_empty_intervals() {
    let mut a = Accounting::new(10 * MS, 0);
    let mut log = Log::default();
    // Two packets at 0 and 3 ms, silence, one at 45 ms, one at 61 ms.
    for (t, lat, len) in [
        (0, 10_000, 18),
        (3 * MS, 30_000, 100),
        (45 * MS, 20_000, 18),
        (61 * MS, 40_000, 18),
    ] {
        let d = datagram(0, (t / MS) as u32, T0 + t - lat, len);
        a.packet(&d, len, T0 + t, 46, &mut log);
    }
    a.finish(&mut log);
    let series: Vec<_> = a
        .intervals
        .iter()
        .map(|i| (i.t_ns / MS, i.packets, i.frame_bytes))
        .collect();
    assert_eq!(
        series,
        vec![
            (0, 2, 64 + 146),
            (10, 0, 0),
            (20, 0, 0),
            (30, 0, 0),
            (40, 1, 64),
            (50, 0, 0),
            (60, 1, 64)
        ]
    );
    let first = a.intervals[0];
    assert!(first.latency_max_ns.abs_diff(30_000) <= 30, "{first:?}");
    assert!(first.latency_p50_ns.abs_diff(10_000) <= 10, "{first:?}");
    assert_eq!(a.intervals[1].latency_max_ns, 0);
    assert_eq!(first.bytes, 118);
    // The sink saw the same intervals, with absolute start times.
    let want: Vec<_> = a
        .intervals
        .iter()
        .map(|i| (T0 + i.t_ns, 10 * MS, i.latency_count))
        .collect();
    assert_eq!(log.0, want);
}

#[test]
fn out_of_order_timestamps_within_the_grace() {
    let mut a = Accounting::new(10 * MS, 5 * MS);
    let feed_at = |a: &mut Accounting, t: u64| {
        let d = datagram(0, 0, T0, 18);
        a.packet(&d, 18, T0 + t, 46, &mut ());
    };
    feed_at(&mut a, 0);
    feed_at(&mut a, 13 * MS);
    feed_at(&mut a, 9 * MS); // still open: 13 < 10 + 5
    feed_at(&mut a, 16 * MS);
    feed_at(&mut a, 8 * MS); // closed at 15 ms: late
    feed_at(&mut a, 2 * MS); // before... still closed: late
    a.finish(&mut ());
    let series: Vec<_> = a.intervals.iter().map(|i| i.packets).collect();
    assert_eq!(series, vec![2, 2]);
    assert_eq!(a.interval_late, 2);
    assert_eq!(a.received, 6);
    assert_eq!(a.first_rx_ns, Some(T0));
}

#[test]
fn jitter_is_the_latency_change_between_a_flows_consecutive_packets() {
    let mut a = Accounting::new(100 * MS, 0);
    // Flow 0: latencies 10, 14, 11 us; flow 1: 50 us once (no jitter yet).
    let packets = [
        (0u16, 0u32, 10_000u64),
        (1, 0, 50_000),
        (0, 1, 14_000),
        (0, 2, 11_000),
    ];
    for (i, (flow, seq, lat)) in packets.into_iter().enumerate() {
        let send = T0 + i as u64 * MS;
        let d = datagram(flow, seq, send, 18);
        a.packet(&d, d.len(), send + lat, 46, &mut ());
    }
    let f0 = a.flows().find(|(id, _)| *id == 0).unwrap().1;
    let j = hist::summary(&f0.jitter);
    assert_eq!(j.count, 2);
    assert!(
        j.max_ns.abs_diff(4_000) <= 4 && j.min_ns.abs_diff(3_000) <= 3,
        "{j:?}"
    );
    let f1 = a.flows().find(|(id, _)| *id == 1).unwrap().1;
    assert_eq!(f1.jitter.len(), 0);
    assert_eq!(a.jitter.len(), 2);
}

#[test]
fn the_worst_latencies_are_kept_with_their_time_and_flow() {
    let mut a = Accounting::new(100 * MS, 0);
    a.keep_worst(2);
    for (seq, lat) in [
        (0u32, 5_000u64),
        (1, 90_000),
        (2, 7_000),
        (3, 60_000),
        (4, 1_000),
    ] {
        let send = T0 + u64::from(seq) * MS;
        let d = datagram(3, seq, send, 18);
        a.packet(&d, d.len(), send + lat, 46, &mut ());
    }
    assert_eq!(
        a.worst(),
        vec![
            (T0 + MS + 90_000, 90_000, 3),
            (T0 + 3 * MS + 60_000, 60_000, 3)
        ]
    );
}
