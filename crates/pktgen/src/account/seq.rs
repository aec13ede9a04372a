//! Per-flow sequence numbers: ahead, reordered, duplicate, or beyond the
//! window (see the parent module).

use super::DUP_WINDOW;

/// How a sequence number relates to the ones before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum SeqClass {
    /// Above every earlier one.
    Ahead,
    /// Below the highest, first time seen.
    Reordered,
    /// Seen before.
    Duplicate,
    /// Below the window: cannot tell.
    BeyondWindow,
}

/// The highest sequence number and which of the [`DUP_WINDOW`] below it
/// (itself included) arrived, as a ring of bits indexed by `seq % window`.
#[derive(Debug, Clone)]
pub(super) struct SeqWindow {
    bits: Box<[u64]>,
    pub(super) highest: Option<u64>,
}

impl SeqWindow {
    pub(super) fn new() -> SeqWindow {
        SeqWindow {
            bits: vec![0; (DUP_WINDOW / 64) as usize].into_boxed_slice(),
            highest: None,
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let i = seq % DUP_WINDOW;
        ((i / 64) as usize, 1 << (i % 64))
    }

    fn test_and_set(&mut self, seq: u64) -> bool {
        let (w, m) = Self::slot(seq);
        let was = self.bits[w] & m != 0;
        self.bits[w] |= m;
        was
    }

    pub(super) fn observe(&mut self, seq: u64) -> SeqClass {
        match self.highest {
            Some(h) if seq <= h => {
                if h - seq >= DUP_WINDOW {
                    SeqClass::BeyondWindow
                } else if self.test_and_set(seq) {
                    SeqClass::Duplicate
                } else {
                    SeqClass::Reordered
                }
            }
            _ => {
                // Forget the slots the window slides over (the new
                // number's own slot held the one leaving the window).
                match self.highest {
                    Some(h) if seq - h < DUP_WINDOW => {
                        for s in h + 1..=seq {
                            let (w, m) = Self::slot(s);
                            self.bits[w] &= !m;
                        }
                    }
                    _ => self.bits.fill(0),
                }
                self.test_and_set(seq);
                self.highest = Some(seq);
                SeqClass::Ahead
            }
        }
    }
}
