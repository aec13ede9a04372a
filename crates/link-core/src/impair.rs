//! Duplication and corruption.
//!
//! Both act on a packet that survived the loss model, before it is queued.
//! A duplicate is an exact copy that enters the queue right behind the
//! original (so it can be dropped by a full queue like any arrival).
//! Corruption flips one bit chosen uniformly among the packet's bits; it is
//! decided independently for the original and for its copy. Each draws from
//! its own random stream (nothing is drawn while a probability is 0), so
//! enabling or changing one never shifts another mechanism's choices.

use crate::rng::Rng;

/// Duplication decisions.
#[derive(Debug, Clone)]
pub(crate) struct Duplicate {
    rng: Rng,
}

impl Duplicate {
    /// Decisions drawn from `rng`.
    pub fn new(rng: Rng) -> Self {
        Self { rng }
    }

    /// Whether to duplicate the next packet, with `probability`.
    pub fn decide(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.rng.bernoulli(probability)
    }
}

/// Corruption decisions and bit positions.
#[derive(Debug, Clone)]
pub(crate) struct Corrupt {
    rng: Rng,
}

impl Corrupt {
    /// Decisions drawn from `rng`.
    pub fn new(rng: Rng) -> Self {
        Self { rng }
    }

    /// With `probability`, flip one uniformly chosen bit of `data`. Returns
    /// whether a bit was flipped (never for an empty packet).
    pub fn apply(&mut self, probability: f64, data: &mut [u8]) -> bool {
        if probability <= 0.0 || !self.rng.bernoulli(probability) || data.is_empty() {
            return false;
        }
        let bit = self.rng.below(data.len() as u64 * 8);
        data[(bit / 8) as usize] ^= 1 << (bit % 8);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicate_rate() {
        let mut d = Duplicate::new(Rng::from_seed(1));
        let n = 100_000;
        let dups = (0..n).filter(|_| d.decide(0.05)).count() as f64;
        // 99% binomial interval around 5000.
        assert!((dups - 5000.0).abs() < 2.576 * (n as f64 * 0.05 * 0.95).sqrt());
        assert!(!(0..1000).any(|_| d.decide(0.0)));
        assert!((0..1000).all(|_| d.decide(1.0)));
    }

    #[test]
    fn corrupt_flips_exactly_one_bit_uniformly() {
        let mut c = Corrupt::new(Rng::from_seed(2));
        let mut hits = [0u32; 32];
        for _ in 0..32_000 {
            let mut data = vec![0u8; 4];
            assert!(c.apply(1.0, &mut data));
            let word = u32::from_le_bytes(data.try_into().unwrap());
            assert_eq!(word.count_ones(), 1);
            hits[word.trailing_zeros() as usize] += 1;
        }
        for h in hits {
            assert!((800..1200).contains(&h), "{hits:?}");
        }
    }

    #[test]
    fn corrupt_edges() {
        let mut c = Corrupt::new(Rng::from_seed(3));
        let mut empty: Vec<u8> = Vec::new();
        assert!(!c.apply(1.0, &mut empty));
        let mut data = vec![0xAAu8; 100];
        assert!(!c.apply(0.0, &mut data));
        assert!(data.iter().all(|&b| b == 0xAA));
    }
}
