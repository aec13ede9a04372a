//! The bottleneck queue: drop-tail or HiFi.
//!
//! Packets wait here for the serialiser (rate or trace). The queue holds
//! only *waiting* packets: a packet leaves it when its transmission starts
//! (or at its trace delivery opportunity), so a limit of `n` packets means
//! `n` waiting plus the one on the wire, as with a Linux qdisc in front of a
//! NIC. Limits are in packets and/or bytes (packet lengths, without the
//! rate overhead); an arrival fits if both limits still hold with it added.
//!
//! # Drop-tail
//!
//! An arrival that does not fit is dropped.
//!
//! # HiFi
//!
//! With drop-tail, which packet gets a freed slot depends only on who
//! arrives first after it frees, so periodic senders phase-lock: with four
//! constant-rate senders at twice the link rate, two of them take every
//! slot and the other two get nothing, for as long as the run lasts
//! (Floyd and Jacobson, "On Traffic Phase Effects in Packet-Switched
//! Gateways", 1991). The `hifi` queue exists so that UDP experiments share
//! a bottleneck the way a real, noisy network would make them share it.
//!
//! The name is Mininet-HiFi's, to which this module used to credit the
//! first rule below. Mininet-HiFi itself (merged into Mininet 2.0) shapes
//! links with Linux qdiscs, htb, hfsc or tbf in front of a netem FIFO with a
//! packet limit, optionally RED, and has no such rule; both rules here are
//! ours.
//!
//! ## The first rule, and why it was not enough
//!
//! The first version kept an *overflow buffer*: an arrival that did not fit
//! waited there, and when a packet left, the freed slot went to one packet
//! drawn uniformly (by reservoir sampling) from those that had overflowed
//! since the previous departure; the rest were dropped. That choice is fair
//! *per departure*, not *per packet*: an overflowed packet won with
//! probability `1/k`, `k` being the number of packets that overflowed in the
//! same inter-departure interval. Periodic senders keep their phase
//! relative to the departures (a sender with twice the transmission time as
//! its period lands in every other interval, always the same ones), so
//! which senders share an interval never changes: with four equal senders
//! at twice the link rate, a sender alone in its intervals won every time
//! and the three sharing the other ones a third of the time each (Jain's
//! index 0.75, in 16 of 20 random phase arrangements of the netsim test;
//! the real dumbbell of `bench/links.py`, whose iperf3 senders are only
//! roughly periodic, measured 0.949 to 0.999 per run). Any rule that draws
//! among the packets of one interval only has this flaw: the odds are a
//! function of the interval's crowd, and the phases fix the crowd. Floyd
//! and Jacobson's other remedy, a random component in the service time,
//! would break the phases, but also the exact serialiser.
//!
//! ## The rule
//!
//! An arrival that does not fit takes part in a draw: a victim is chosen
//! uniformly among the waiting packets *and the arrival*. If the victim is
//! the arrival, it is dropped; otherwise the victim is removed from
//! wherever it waits and the arrival joins the tail (Floyd and Jacobson's
//! Random Drop). If removing the victim would still not make room for the
//! arrival (byte limits with a larger arrival, or a limit lowered below the
//! occupancy), the victim stays and the arrival is dropped. Each overflow
//! drops exactly one packet, at once, so the drop counter is always exact.
//!
//! Every packet, whatever its phase, faces the same odds at each draw,
//! `1/(n + 1)` for `n` waiting packets, and sees one draw per overflow
//! during its whole stay in the queue: that is a sum over many
//! inter-departure intervals (some 70 for a full 100-packet queue at twice
//! the link rate), in which the crowd of any single interval hardly counts.
//! A packet's survival therefore depends neither on its sender nor on
//! where it falls between departures: shares follow offered loads, equal
//! senders get equal shares, and the netsim test's phase-locked
//! arrangements all reach Jain's index 0.999.
//!
//! The survivors keep their arrival order (nothing is ever inserted ahead
//! of a waiting packet), so a flow is never reordered, and the serialiser
//! is untouched: only *which* packets are dropped changes.
//!
//! ## Cost
//!
//! A removed victim leaves a tombstone in place (removing from the middle
//! of a ring buffer would move up to `n` packets). Tombstones at the head
//! are discarded as the head leaves, and the buffer is compacted once
//! tombstones outnumber live packets. The victim is drawn over the buffer's
//! slots and drawn again if it hits a tombstone, which, with at most as
//! many tombstones as live packets, takes fewer than two draws on average.
//! Each operation is therefore O(1) amortised, and all draws come from the
//! queue's own seeded stream, so a run is reproducible from its seed.

use std::collections::VecDeque;

use crate::params::QueueKind;
use crate::rng::Rng;

/// A packet inside the link.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Packet {
    /// The bytes.
    pub data: Vec<u8>,
    /// When it arrived at the direction, ns.
    pub arrival_ns: u64,
    /// Wire packets it stands for: 1, or more for a chunk of a
    /// segmentation-offload super-frame (see [`crate::Direction::push_chunk`]).
    pub packets: u32,
    /// Their bytes on the wire, without the I/O layer's prefix.
    pub bytes: u64,
}

impl Packet {
    /// One wire packet: `data`, of which the first `prefix` bytes belong to
    /// the I/O layer (see [`crate::Direction::with_prefix`]).
    pub fn single(data: Vec<u8>, arrival_ns: u64, prefix: usize) -> Self {
        let bytes = data.len().saturating_sub(prefix) as u64;
        Self {
            data,
            arrival_ns,
            packets: 1,
            bytes,
        }
    }

    /// Bytes on the wire, without the I/O layer's prefix.
    pub fn len(&self) -> u64 {
        self.bytes
    }
}

/// The bottleneck queue.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    /// Waiting packets in arrival order; `None` is a HiFi victim's
    /// tombstone. The head, if any, is never a tombstone.
    slots: VecDeque<Option<Packet>>,
    /// Entries waiting (slots that are not tombstones).
    live: usize,
    /// The wire packets they stand for.
    held: u64,
    /// Their bytes.
    bytes: u64,
    limit_packets: Option<u32>,
    limit_bytes: Option<u64>,
    kind: QueueKind,
    rng: Rng,
}

impl Queue {
    /// An empty queue; `rng` draws the HiFi victims.
    pub fn new(
        limit_packets: Option<u32>,
        limit_bytes: Option<u64>,
        kind: QueueKind,
        rng: Rng,
    ) -> Self {
        Self {
            slots: VecDeque::new(),
            live: 0,
            held: 0,
            bytes: 0,
            limit_packets,
            limit_bytes,
            kind,
            rng,
        }
    }

    /// Change limits and kind, keeping the queued packets (even above a
    /// lowered limit: they drain normally, and arrivals are refused until
    /// they fit). Nothing is dropped.
    pub fn configure(
        &mut self,
        limit_packets: Option<u32>,
        limit_bytes: Option<u64>,
        kind: QueueKind,
    ) {
        self.limit_packets = limit_packets;
        self.limit_bytes = limit_bytes;
        self.kind = kind;
    }

    /// Replace the random stream (the seed changed).
    pub fn set_rng(&mut self, rng: Rng) {
        self.rng = rng;
    }

    /// Wire packets waiting.
    pub fn len(&self) -> u64 {
        self.held
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The packet at the head.
    pub fn front(&self) -> Option<&Packet> {
        self.slots
            .front()
            .map(|s| s.as_ref().expect("the head is live"))
    }

    /// Whether `p` respects both limits once `freed` (wire packets and
    /// bytes of a victim) has left, counting `extra` (wire packets and bytes
    /// that wait outside the queue: the unstarted rest of a chunk on the
    /// wire) as waiting.
    fn fits_after(&self, p: &Packet, freed: (u64, u64), extra: (u64, u64)) -> bool {
        let held = self.held - freed.0 + extra.0;
        let bytes = self.bytes - freed.1 + extra.1;
        let packets_ok = self
            .limit_packets
            .is_none_or(|l| held + u64::from(p.packets) <= u64::from(l));
        let bytes_ok = self
            .limit_bytes
            .is_none_or(|l| bytes.saturating_add(p.len()) <= l);
        packets_ok && bytes_ok
    }

    /// How many more wire packets, and bytes, fit with `extra` waiting
    /// outside the queue (`u64::MAX` where there is no limit).
    pub fn room(&self, extra: (u64, u64)) -> (u64, u64) {
        let packets = self.limit_packets.map_or(u64::MAX, |l| {
            u64::from(l).saturating_sub(self.held + extra.0)
        });
        let bytes = self
            .limit_bytes
            .map_or(u64::MAX, |l| l.saturating_sub(self.bytes + extra.1));
        (packets, bytes)
    }

    fn enqueue(&mut self, p: Packet) {
        self.bytes += p.len();
        self.held += u64::from(p.packets);
        self.live += 1;
        self.slots.push_back(Some(p));
    }

    /// Discard tombstones at the head.
    fn trim_front(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
        }
    }

    /// An arrival, with `extra` wire packets and bytes waiting outside the
    /// queue (see [`fits_after`](Self::fits_after)). Returns the number of
    /// wire packets dropped.
    pub fn push(&mut self, p: Packet, extra: (u64, u64)) -> u64 {
        if self.fits_after(&p, (0, 0), extra) {
            self.enqueue(p);
            return 0;
        }
        let lost = u64::from(p.packets);
        if self.kind == QueueKind::DropTail {
            return lost;
        }
        // HiFi: the victim is uniform over the live slots and the arrival
        // (index `n`); a tombstone is drawn again.
        let n = self.slots.len() as u64;
        let victim = loop {
            let i = self.rng.below(n + 1);
            if i == n || self.slots[i as usize].is_some() {
                break i as usize;
            }
        };
        let freed = match self.slots.get(victim) {
            Some(Some(v)) => (u64::from(v.packets), v.len()),
            _ => return lost, // the arrival itself
        };
        if !self.fits_after(&p, freed, extra) {
            return lost;
        }
        self.slots[victim] = None;
        self.live -= 1;
        self.held -= freed.0;
        self.bytes -= freed.1;
        self.enqueue(p);
        self.trim_front();
        if self.slots.len() - self.live > self.live {
            self.slots.retain(Option::is_some);
        }
        freed.0
    }

    /// Take the head packet (its transmission starts).
    pub fn pop(&mut self) -> Option<Packet> {
        let p = self.slots.pop_front()?.expect("the head is live");
        self.live -= 1;
        self.held -= u64::from(p.packets);
        self.bytes -= p.len();
        self.trim_front();
        Some(p)
    }

    /// Drop everything (link down). Returns the number of wire packets
    /// dropped.
    pub fn clear(&mut self) -> u64 {
        let n = self.len();
        self.slots.clear();
        self.live = 0;
        self.held = 0;
        self.bytes = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NONE: (u64, u64) = (0, 0);

    fn pkt(len: usize, arrival_ns: u64) -> Packet {
        Packet::single(vec![0; len], arrival_ns, 0)
    }

    fn drain(q: &mut Queue) -> Vec<u64> {
        std::iter::from_fn(|| q.pop().map(|p| p.arrival_ns)).collect()
    }

    #[test]
    fn droptail_drops_exactly_the_overflow() {
        let mut q = Queue::new(Some(3), None, QueueKind::DropTail, Rng::from_seed(1));
        let drops: u64 = (0..10).map(|i| q.push(pkt(100, i), NONE)).sum();
        assert_eq!((drops, q.len(), q.bytes()), (7, 3, 300));
        // The survivors are the first three, in order.
        assert_eq!(drain(&mut q), [0, 1, 2]);
    }

    #[test]
    fn byte_limit() {
        let mut q = Queue::new(None, Some(1000), QueueKind::DropTail, Rng::from_seed(1));
        assert_eq!(q.push(pkt(600, 0), NONE), 0);
        assert_eq!(q.push(pkt(500, 1), NONE), 1);
        assert_eq!(q.push(pkt(400, 2), NONE), 0);
        assert_eq!(q.push(pkt(1, 3), NONE), 1);
        assert_eq!((q.len(), q.bytes()), (2, 1000));
        // Larger than the limit: never fits, even empty.
        let mut q = Queue::new(None, Some(1000), QueueKind::DropTail, Rng::from_seed(1));
        assert_eq!(q.push(pkt(1001, 0), NONE), 1);
        // Both limits at once.
        let mut q = Queue::new(Some(2), Some(1000), QueueKind::DropTail, Rng::from_seed(1));
        assert_eq!(
            q.push(pkt(10, 0), NONE) + q.push(pkt(10, 1), NONE) + q.push(pkt(10, 2), NONE),
            1
        );
    }

    #[test]
    fn unlimited_queue() {
        let mut q = Queue::new(None, None, QueueKind::DropTail, Rng::from_seed(1));
        let drops: u64 = (0..10_000).map(|i| q.push(pkt(1500, i), NONE)).sum();
        assert_eq!((drops, q.len()), (0, 10_000));
    }

    #[test]
    fn hifi_drops_one_per_overflow_and_keeps_order() {
        let mut q = Queue::new(Some(3), None, QueueKind::Hifi, Rng::from_seed(1));
        let drops: u64 = (0..10).map(|i| q.push(pkt(100, i), NONE)).sum();
        assert_eq!((drops, q.len(), q.bytes()), (7, 3, 300));
        let order = drain(&mut q);
        assert_eq!(order.len(), 3);
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
        // Random drop, not drop-tail: some later arrival survived.
        assert_ne!(order, [0, 1, 2]);
        assert_eq!((q.len(), q.bytes(), q.front()), (0, 0, None));
    }

    #[test]
    fn hifi_victim_is_uniform_over_the_queue_and_the_arrival() {
        let mut q = Queue::new(Some(4), None, QueueKind::Hifi, Rng::from_seed(9));
        let mut dropped = [0u32; 5];
        for _ in 0..50_000 {
            for i in 0..5 {
                q.push(pkt(1, i), NONE);
            }
            let kept = drain(&mut q);
            let victim = (0..5).find(|i| !kept.contains(i)).unwrap();
            dropped[victim as usize] += 1;
        }
        for c in dropped {
            assert!((9_500..10_500).contains(&c), "{dropped:?}");
        }
    }

    #[test]
    fn hifi_long_run_keeps_order_counts_and_bounded_tombstones() {
        let mut q = Queue::new(Some(100), None, QueueKind::Hifi, Rng::from_seed(3));
        let (mut pushed, mut drops, mut popped) = (0u64, 0, Vec::new());
        for _ in 0..20_000 {
            // Three arrivals per departure: two of them overflow.
            for _ in 0..3 {
                drops += q.push(pkt(100 + (pushed % 7) as usize, pushed), NONE);
                pushed += 1;
            }
            popped.push(q.pop().unwrap().arrival_ns);
            assert!(q.slots.len() <= 2 * q.live + 1);
            let live: Vec<&Packet> = q.slots.iter().flatten().collect();
            assert_eq!(live.len() as u64, q.len());
            assert_eq!(live.iter().map(|p| p.len()).sum::<u64>(), q.bytes());
        }
        assert_eq!(q.len(), 99); // full, less the one just taken
        assert_eq!(pushed, drops + popped.len() as u64 + q.len());
        popped.extend(drain(&mut q));
        assert!(popped.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn hifi_arrival_that_would_not_fit_is_the_one_dropped() {
        let mut q = Queue::new(None, Some(1000), QueueKind::Hifi, Rng::from_seed(1));
        assert_eq!(q.push(pkt(100, 0), NONE), 0);
        assert_eq!(q.push(pkt(800, 1), NONE), 0);
        // An 850-byte arrival fits only in place of the big packet: a draw
        // that picks the 100-byte one drops the arrival instead.
        let mut replaced = 0;
        for i in 2..200 {
            assert_eq!(q.push(pkt(850, i), NONE), 1);
            let sizes: Vec<u64> = q.slots.iter().flatten().map(Packet::len).collect();
            assert!(sizes == [100, 800] || sizes == [100, 850], "{sizes:?}");
            assert_eq!(q.bytes(), sizes.iter().sum::<u64>());
            assert_eq!(q.front().unwrap().arrival_ns, 0);
            replaced += u64::from(q.slots.back().unwrap().as_ref().unwrap().arrival_ns == i);
        }
        // Victim uniform over three: the big packet about a third of the time.
        assert!((45..90).contains(&replaced), "{replaced}");
    }

    #[test]
    fn reconfigure_keeps_packets_and_clear_counts() {
        let mut q = Queue::new(Some(5), None, QueueKind::Hifi, Rng::from_seed(1));
        for i in 0..7 {
            q.push(pkt(10, i), NONE);
        }
        // Lowering the limit keeps the 5, with HiFi as with drop-tail.
        q.configure(Some(2), None, QueueKind::Hifi);
        assert_eq!(q.len(), 5);
        assert_eq!(q.push(pkt(10, 8), NONE), 1);
        assert_eq!(q.len(), 5);
        q.configure(Some(2), None, QueueKind::DropTail);
        assert_eq!(q.push(pkt(10, 8), NONE), 1);
        for _ in 0..3 {
            q.pop();
        }
        assert_eq!(q.push(pkt(10, 9), NONE), 1); // 2 queued: still full
        q.pop();
        assert_eq!(q.push(pkt(10, 10), NONE), 0);
        assert_eq!(q.clear(), 2);
        assert_eq!((q.len(), q.bytes(), q.front()), (0, 0, None));
    }
}
