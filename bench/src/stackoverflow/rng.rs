//! The generator's pseudo-random numbers.
//!
//! Hand-written SplitMix64 (Steele, Lea & Flood 2014), used counter-style: every row of every
//! table gets its own stream, seeded from `(seed, stream tag, row id)`. A row therefore depends
//! on nothing but those three numbers, which is what makes the data reproducible whatever order
//! or thread the rows are generated in, and what lets a row refer to another row (a vote to a
//! post, an answer to its question) by recomputing the few facts it needs about it.

/// Independent streams; changing a tag changes the data, so the values are fixed forever.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Stream {
    Users = 1,
    Posts = 2,
    PostKind = 3,
    Comments = 4,
    Badges = 5,
    PostLinks = 6,
    Votes = 7,
}

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// The stream for one row: a function of the seed, the stream and the row id only.
    pub fn for_row(seed: u64, stream: Stream, id: u64) -> Self {
        let state = mix(mix(seed ^ (stream as u64).wrapping_mul(GOLDEN)) ^ id.wrapping_mul(GOLDEN));
        Self { state }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// Uniform in `0..n` (n > 0) by multiply-shift; the bias (< n / 2^64) is irrelevant here.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range_i64(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    /// Uniform in `lo..=hi` for the small ranges the generator uses.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below((hi - lo + 1) as u64) as usize
    }

    /// True with probability `per_mille / 1000`.
    pub fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }

    /// Uniform in `[0, 1)` with 53 bits.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Heavy-tailed counts (scores, reputations, view counts): a Pareto-like draw
    /// `scale * (u^(-1/alpha) - 1)`, capped so it fits an int column comfortably.
    pub fn heavy_tail(&mut self, scale: f64, alpha: f64, cap: i32) -> i32 {
        let u = 1.0 - self.unit(); // (0, 1]
        let v = scale * (u.powf(-1.0 / alpha) - 1.0);
        if v >= f64::from(cap) { cap } else { v as i32 }
    }

    /// An id in `1..=n` skewed towards small ids (old users and old posts get more activity):
    /// `n * u^power`, power > 1.
    pub fn skewed_id(&mut self, n: u64, power: f64) -> u64 {
        let v = (self.unit().powf(power) * n as f64) as u64 + 1;
        v.min(n)
    }

    pub fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len() as u64) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = {
            let mut r = Rng::for_row(1, Stream::Posts, 7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::for_row(1, Stream::Posts, 7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::for_row(1, Stream::Votes, 7);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = Rng::for_row(9, Stream::Users, 1);
        for n in [1u64, 2, 3, 10, 1000] {
            for _ in 0..1000 {
                assert!(r.below(n) < n);
            }
        }
        for _ in 0..1000 {
            let id = r.skewed_id(5, 2.0);
            assert!((1..=5).contains(&id));
        }
    }
}
