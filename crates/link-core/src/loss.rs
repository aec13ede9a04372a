//! Loss models: independent (Bernoulli) and Gilbert-Elliott.
//!
//! Applied to each arriving packet before it is duplicated or queued.
//!
//! # Gilbert-Elliott
//!
//! A two-state Markov chain stepped once per packet. In the *good* state a
//! packet is lost with probability `loss_good`, in the *bad* state with
//! probability `loss_bad`; after the decision, the chain moves good → bad
//! with probability `p` and bad → good with probability `r`. This is
//! netem's `gemodel p r 1-h 1-k` exactly (netem also decides the loss from
//! the state the packet found, and moves the chain for every packet): a stay
//! in the bad state lasts a geometric number of packets with mean `1/r`,
//! the chain spends a fraction `p / (p + r)` of packets in the bad state, and
//! the mean loss rate is `(r * loss_good + p * loss_bad) / (p + r)`. With
//! `loss_good = 0` and `loss_bad = 1` it is the simple Gilbert model and the
//! mean loss burst is `1/r` packets.
//!
//! The chain starts in the good state, and stays where it is when the
//! parameters are changed from one Gilbert-Elliott setting to another.

use crate::params::LossModel;
use crate::rng::Rng;

/// A loss model with its state and its random stream.
#[derive(Debug, Clone)]
pub(crate) struct Loss {
    model: LossModel,
    /// Gilbert-Elliott: in the bad state.
    bad: bool,
    rng: Rng,
}

impl Loss {
    /// `model` in its initial (good) state, drawing from `rng`.
    pub fn new(model: LossModel, rng: Rng) -> Self {
        Self {
            model,
            bad: false,
            rng,
        }
    }

    /// Switch to `model`. A Gilbert-Elliott chain keeps its state if the new
    /// model is also Gilbert-Elliott; otherwise it restarts in the good state.
    pub fn set_model(&mut self, model: LossModel) {
        if !matches!(model, LossModel::GilbertElliott { .. }) {
            self.bad = false;
        }
        self.model = model;
    }

    /// Replace the random stream (the seed changed).
    pub fn set_rng(&mut self, rng: Rng) {
        self.rng = rng;
    }

    /// Whether the next packet is lost.
    pub fn lose(&mut self) -> bool {
        match self.model {
            LossModel::None => false,
            LossModel::Random { probability } => self.rng.bernoulli(probability),
            LossModel::GilbertElliott {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                let lost = self
                    .rng
                    .bernoulli(if self.bad { loss_bad } else { loss_good });
                let leave = self.rng.bernoulli(if self.bad { r } else { p });
                self.bad ^= leave;
                lost
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Stream;

    fn run(model: LossModel, n: usize, seed: u64) -> Vec<bool> {
        let mut loss = Loss::new(model, Rng::stream(seed, Stream::Loss));
        (0..n).map(|_| loss.lose()).collect()
    }

    /// 99% interval of a binomial(n, p) count, normal approximation.
    fn binomial_99(n: usize, p: f64) -> (f64, f64) {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        (mean - 2.576 * sd, mean + 2.576 * sd)
    }

    #[test]
    fn none_never_loses() {
        assert!(run(LossModel::None, 10_000, 1).iter().all(|&l| !l));
    }

    #[test]
    fn random_loss_within_the_binomial_interval() {
        let n = 100_000;
        for (p, seed) in [(0.01, 11), (0.10, 12)] {
            let lost = run(LossModel::Random { probability: p }, n, seed)
                .iter()
                .filter(|&&l| l)
                .count() as f64;
            let (lo, hi) = binomial_99(n, p);
            assert!((lo..=hi).contains(&lost), "p={p}: {lost} not in {lo}..{hi}");
        }
    }

    #[test]
    fn random_edges() {
        assert!(run(LossModel::Random { probability: 1.0 }, 1000, 1)
            .iter()
            .all(|&l| l));
        assert!(run(LossModel::Random { probability: 0.0 }, 1000, 1)
            .iter()
            .all(|&l| !l));
    }

    /// Lengths of the runs of consecutive losses.
    fn bursts(v: &[bool]) -> Vec<usize> {
        let mut out = Vec::new();
        let mut run = 0;
        for &l in v {
            if l {
                run += 1;
            } else if run > 0 {
                out.push(run);
                run = 0;
            }
        }
        out
    }

    #[test]
    fn gilbert_elliott_burst_length_and_rate() {
        let (p, r) = (0.01, 0.25);
        let model = LossModel::GilbertElliott {
            p,
            r,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let v = run(model, 1_000_000, 21);
        let b = bursts(&v);
        let mean_burst = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!(
            (mean_burst - 1.0 / r).abs() < 0.1,
            "mean burst {mean_burst}, expected {}",
            1.0 / r
        );
        let rate = v.iter().filter(|&&l| l).count() as f64 / v.len() as f64;
        let expected = p / (p + r);
        assert!(
            (rate - expected).abs() < 0.1 * expected,
            "rate {rate}, expected {expected}"
        );
    }

    #[test]
    fn gilbert_elliott_partial_losses() {
        // Mean loss (r*lg + p*lb)/(p+r) = (0.5*0.01 + 0.1*0.5)/0.6.
        let model = LossModel::GilbertElliott {
            p: 0.1,
            r: 0.5,
            loss_good: 0.01,
            loss_bad: 0.5,
        };
        let v = run(model, 1_000_000, 22);
        let rate = v.iter().filter(|&&l| l).count() as f64 / v.len() as f64;
        let expected = (0.5 * 0.01 + 0.1 * 0.5) / 0.6;
        assert!(
            (rate - expected).abs() < 0.03 * expected,
            "{rate} vs {expected}"
        );
    }

    #[test]
    fn state_kept_across_ge_changes_and_reset_otherwise() {
        let ge = |p| LossModel::GilbertElliott {
            p,
            r: 0.0,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let mut loss = Loss::new(ge(1.0), Rng::from_seed(1));
        assert!(!loss.lose()); // good, then moves to bad for sure
        loss.set_model(ge(0.5));
        assert!(loss.lose()); // still bad, and r = 0 keeps it there
        loss.set_model(LossModel::None);
        loss.set_model(ge(0.0));
        assert!(!loss.lose()); // restarted good
    }

    #[test]
    fn deterministic() {
        let m = LossModel::Random { probability: 0.3 };
        assert_eq!(run(m, 1000, 5), run(m, 1000, 5));
        assert_ne!(run(m, 1000, 5), run(m, 1000, 6));
    }
}
