//! The initial placement of the evaluation (seed 003 §V-A2): each block lands on the
//! `i`-th most popular disk (`i = 1..N`) with probability proportional to `1 / i^alpha`,
//! `0 <= alpha <= 1`. `alpha = 0` spreads blocks evenly; `alpha = 1` is a true Zipf
//! distribution skewed towards disk 0, the most popular.
//!
//! Each block's draw is a hash of the block number and a seed (SplitMix64), so a block's
//! disk does not depend on which other blocks exist or in what order they are placed:
//! the training and testing parts of a trace see one placement.

/// A Zipf-like placement of blocks over `disks` disks.
#[derive(Clone, Debug, PartialEq)]
pub struct ZipfPlacement {
    /// Cumulative probabilities, last one 1.
    cdf: Vec<f64>,
    seed: u64,
}

/// SplitMix64: a well-mixed 64-bit hash of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl ZipfPlacement {
    /// `disks >= 1`, `alpha` finite and non-negative (the seed uses 0..=1).
    pub fn new(disks: usize, alpha: f64, seed: u64) -> Result<ZipfPlacement, String> {
        if disks == 0 {
            return Err("a placement needs at least one disk".into());
        }
        if !(alpha.is_finite() && alpha >= 0.0) {
            return Err(format!("zipf alpha {alpha} is not a non-negative number"));
        }
        let weights: Vec<f64> = (1..=disks).map(|i| (i as f64).powf(-alpha)).collect();
        let total: f64 = weights.iter().sum();
        let mut acc = 0.0;
        let mut cdf: Vec<f64> = weights
            .iter()
            .map(|w| {
                acc += w / total;
                acc
            })
            .collect();
        *cdf.last_mut().expect("disks >= 1") = 1.0;
        Ok(ZipfPlacement { cdf, seed })
    }

    /// Probability of disk `d` (0 = most popular).
    pub fn probability(&self, d: usize) -> f64 {
        self.cdf[d] - if d == 0 { 0.0 } else { self.cdf[d - 1] }
    }

    pub fn disks(&self) -> usize {
        self.cdf.len()
    }

    /// The disk of `block`.
    pub fn disk(&self, block: u64) -> usize {
        let h = splitmix64(block ^ splitmix64(self.seed));
        // 53 random bits as a uniform number in [0, 1).
        let u = (h >> 11) as f64 / (1u64 << 53) as f64;
        self.cdf
            .partition_point(|&c| c <= u)
            .min(self.cdf.len() - 1)
    }
}
