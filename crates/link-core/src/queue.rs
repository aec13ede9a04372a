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
//! arrives first after it frees, so periodic senders can phase-lock: one
//! always arrives just after a departure and takes every slot, another
//! always finds the queue full. Mininet-HiFi's fix: an arrival that does
//! not fit goes to an *overflow buffer*; whenever a packet leaves the
//! queue, the freed slot goes to one packet chosen uniformly at random from
//! the overflow buffer, and the rest of the buffer is dropped.
//!
//! The buffer is kept as a single-slot reservoir sample: the `k`-th packet
//! to overflow since the last departure replaces the candidate with
//! probability `1/k`, and whichever of the two loses is dropped at once.
//! The candidate is then uniform over all overflowed packets, exactly as if
//! they had all been kept and one drawn at the departure, but memory stays
//! O(1) however long the link is stalled, and the drop counter is up to
//! date at every moment. A chosen packet that does not fit the byte limit
//! (it may be larger than the packet that left) is dropped too.

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
}

impl Packet {
    /// Length in bytes.
    pub fn len(&self) -> u64 {
        self.data.len() as u64
    }
}

/// The bottleneck queue.
#[derive(Debug, Clone)]
pub(crate) struct Queue {
    packets: VecDeque<Packet>,
    bytes: u64,
    limit_packets: Option<u32>,
    limit_bytes: Option<u64>,
    kind: QueueKind,
    /// HiFi: the overflow buffer's current candidate.
    candidate: Option<Packet>,
    /// HiFi: packets overflowed since the last departure.
    overflowed: u64,
    rng: Rng,
}

impl Queue {
    /// An empty queue; `rng` draws the HiFi choices.
    pub fn new(
        limit_packets: Option<u32>,
        limit_bytes: Option<u64>,
        kind: QueueKind,
        rng: Rng,
    ) -> Self {
        Self {
            packets: VecDeque::new(),
            bytes: 0,
            limit_packets,
            limit_bytes,
            kind,
            candidate: None,
            overflowed: 0,
            rng,
        }
    }

    /// Change limits and kind, keeping the queued packets (even above a
    /// lowered limit: they drain normally, and arrivals are refused until
    /// they fit). Leaving HiFi drops its overflow candidate. Returns the
    /// number of packets dropped.
    pub fn configure(
        &mut self,
        limit_packets: Option<u32>,
        limit_bytes: Option<u64>,
        kind: QueueKind,
    ) -> u64 {
        self.limit_packets = limit_packets;
        self.limit_bytes = limit_bytes;
        self.kind = kind;
        if kind == QueueKind::DropTail {
            self.overflowed = 0;
            return u64::from(self.candidate.take().is_some());
        }
        0
    }

    /// Replace the random stream (the seed changed).
    pub fn set_rng(&mut self, rng: Rng) {
        self.rng = rng;
    }

    /// Packets waiting.
    pub fn len(&self) -> u64 {
        self.packets.len() as u64
    }

    /// Bytes waiting.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The packet at the head.
    pub fn front(&self) -> Option<&Packet> {
        self.packets.front()
    }

    /// Whether `len` more bytes in one more packet respect both limits.
    fn fits(&self, len: u64) -> bool {
        let packets_ok = self
            .limit_packets
            .is_none_or(|l| self.packets.len() < l as usize);
        let bytes_ok = self
            .limit_bytes
            .is_none_or(|l| self.bytes.saturating_add(len) <= l);
        packets_ok && bytes_ok
    }

    fn enqueue(&mut self, p: Packet) {
        self.bytes += p.len();
        self.packets.push_back(p);
    }

    /// An arrival. Returns the number of packets dropped (0 or 1).
    pub fn push(&mut self, p: Packet) -> u64 {
        if self.fits(p.len()) {
            self.enqueue(p);
            return 0;
        }
        match self.kind {
            QueueKind::DropTail => 1,
            QueueKind::Hifi => {
                self.overflowed += 1;
                if self.candidate.is_none() {
                    self.candidate = Some(p);
                    0
                } else {
                    // Reservoir sampling: the newcomer wins with 1/k.
                    if self.rng.below(self.overflowed) == 0 {
                        self.candidate = Some(p);
                    }
                    1
                }
            }
        }
    }

    /// Take the head packet (its transmission starts). With HiFi, the freed
    /// slot then goes to the overflow candidate. Returns the packet and the
    /// number of packets dropped.
    pub fn pop(&mut self) -> Option<(Packet, u64)> {
        let p = self.packets.pop_front()?;
        self.bytes -= p.len();
        let mut dropped = 0;
        self.overflowed = 0;
        if let Some(c) = self.candidate.take() {
            if self.fits(c.len()) {
                self.enqueue(c);
            } else {
                dropped = 1;
            }
        }
        Some((p, dropped))
    }

    /// Drop everything (link down). Returns the number of packets dropped.
    pub fn clear(&mut self) -> u64 {
        let n = self.len() + u64::from(self.candidate.is_some());
        self.packets.clear();
        self.bytes = 0;
        self.candidate = None;
        self.overflowed = 0;
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkt(len: usize, arrival_ns: u64) -> Packet {
        Packet {
            data: vec![0; len],
            arrival_ns,
        }
    }

    #[test]
    fn droptail_drops_exactly_the_overflow() {
        let mut q = Queue::new(Some(3), None, QueueKind::DropTail, Rng::from_seed(1));
        let drops: u64 = (0..10).map(|i| q.push(pkt(100, i))).sum();
        assert_eq!((drops, q.len(), q.bytes()), (7, 3, 300));
        // The survivors are the first three, in order.
        let order: Vec<u64> = std::iter::from_fn(|| q.pop().map(|(p, _)| p.arrival_ns)).collect();
        assert_eq!(order, [0, 1, 2]);
    }

    #[test]
    fn byte_limit() {
        let mut q = Queue::new(None, Some(1000), QueueKind::DropTail, Rng::from_seed(1));
        assert_eq!(q.push(pkt(600, 0)), 0);
        assert_eq!(q.push(pkt(500, 1)), 1);
        assert_eq!(q.push(pkt(400, 2)), 0);
        assert_eq!(q.push(pkt(1, 3)), 1);
        assert_eq!((q.len(), q.bytes()), (2, 1000));
        // Larger than the limit: never fits, even empty.
        let mut q = Queue::new(None, Some(1000), QueueKind::DropTail, Rng::from_seed(1));
        assert_eq!(q.push(pkt(1001, 0)), 1);
        // Both limits at once.
        let mut q = Queue::new(Some(2), Some(1000), QueueKind::DropTail, Rng::from_seed(1));
        assert_eq!(
            q.push(pkt(10, 0)) + q.push(pkt(10, 1)) + q.push(pkt(10, 2)),
            1
        );
    }

    #[test]
    fn unlimited_queue() {
        let mut q = Queue::new(None, None, QueueKind::DropTail, Rng::from_seed(1));
        let drops: u64 = (0..10_000).map(|i| q.push(pkt(1500, i))).sum();
        assert_eq!((drops, q.len()), (0, 10_000));
    }

    #[test]
    fn hifi_refills_from_overflow_and_drops_the_rest() {
        let mut q = Queue::new(Some(2), None, QueueKind::Hifi, Rng::from_seed(1));
        let mut drops: u64 = (0..6).map(|i| q.push(pkt(100, i))).sum();
        // Two queued, four overflowed: one candidate kept, three dropped.
        assert_eq!((q.len(), drops), (2, 3));
        let (p, d) = q.pop().unwrap();
        drops += d;
        assert_eq!((p.arrival_ns, d, q.len()), (0, 0, 2));
        // The refill is one of the overflowed packets 2..=5.
        let (_, _) = q.pop().unwrap();
        let (refill, _) = q.pop().unwrap();
        assert!((2..=5).contains(&refill.arrival_ns));
        assert!(q.pop().is_none());
        assert_eq!(drops, 3);
    }

    #[test]
    fn hifi_choice_is_uniform() {
        let mut counts = [0u32; 5];
        let mut q = Queue::new(Some(1), None, QueueKind::Hifi, Rng::from_seed(9));
        for _ in 0..50_000 {
            assert_eq!(q.push(pkt(1, 99)), 0);
            for i in 0..5 {
                q.push(pkt(1, i));
            }
            q.pop().unwrap();
            let (chosen, _) = q.pop().unwrap();
            counts[chosen.arrival_ns as usize] += 1;
        }
        for c in counts {
            assert!((9_500..10_500).contains(&c), "{counts:?}");
        }
    }

    #[test]
    fn hifi_candidate_that_does_not_fit_is_dropped() {
        let mut q = Queue::new(None, Some(1000), QueueKind::Hifi, Rng::from_seed(1));
        assert_eq!(q.push(pkt(600, 0)), 0);
        assert_eq!(q.push(pkt(300, 1)), 0);
        assert_eq!(q.push(pkt(900, 2)), 0); // candidate
        let (_, d) = q.pop().unwrap(); // 300 + 900 > 1000
        assert_eq!((d, q.len()), (1, 1));
    }

    #[test]
    fn reconfigure_keeps_packets_and_clear_counts() {
        let mut q = Queue::new(Some(5), None, QueueKind::Hifi, Rng::from_seed(1));
        for i in 0..7 {
            q.push(pkt(10, i));
        }
        // Lowering the limit keeps the 5; leaving HiFi drops the candidate.
        assert_eq!(q.configure(Some(2), None, QueueKind::DropTail), 1);
        assert_eq!(q.len(), 5);
        assert_eq!(q.push(pkt(10, 8)), 1);
        for _ in 0..3 {
            q.pop();
        }
        assert_eq!(q.push(pkt(10, 9)), 1); // 2 queued: still full
        q.pop();
        assert_eq!(q.push(pkt(10, 10)), 0);
        assert_eq!(q.clear(), 2);
        assert_eq!((q.len(), q.bytes()), (0, 0));
    }
}
