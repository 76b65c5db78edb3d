//! A tiny deterministic random source for tests, benches and tools (splitmix64 + Box-Muller):
//! fresh, seeded inputs without a dependency. Not for anything but test data.

/// The environment variable that fixes the seed of every randomized test (Rust and Python).
pub const SEED_VAR: &str = "MHC_TEST_SEED";

/// splitmix64 stream with Gaussian and uniform draws.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
    spare: Option<f64>,
}

impl Rng {
    /// The stream of `seed`: the same seed gives the same draws.
    pub fn new(seed: u64) -> Self {
        Rng { state: seed, spare: None }
    }

    /// A seed that differs from run to run (time and process id), printed by callers so a
    /// failure can be replayed with [`Rng::new`].
    pub fn fresh_seed() -> u64 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let mut r = Rng::new(nanos ^ ((std::process::id() as u64) << 32));
        r.next_u64()
    }

    /// The seed of a test named `what`: `MHC_TEST_SEED` when set (to replay a failure), else
    /// [`Rng::fresh_seed`]; printed either way with the line that replays it. A value that is not
    /// an integer is reported and replaced by a fresh seed, never silently.
    pub fn test_seed(what: &str) -> u64 {
        let seed = match std::env::var(SEED_VAR) {
            Ok(s) => s.trim().parse().unwrap_or_else(|_| {
                eprintln!("{what}: {SEED_VAR}={s:?} is not an integer; using a fresh seed");
                Rng::fresh_seed()
            }),
            Err(_) => Rng::fresh_seed(),
        };
        eprintln!("{what}: seed {seed} (replay with {SEED_VAR}={seed})");
        seed
    }

    /// The next 64 raw bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1) with 53 random bits.
    pub fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in [lo, hi).
    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Standard normal (Box-Muller; the second value of each pair is kept for the next call).
    pub fn normal(&mut self) -> f64 {
        if let Some(v) = self.spare.take() {
            return v;
        }
        // 1 - uniform() is in (0, 1], so the log is finite.
        let r = (-2.0 * (1.0 - self.uniform()).ln()).sqrt();
        let th = 2.0 * std::f64::consts::PI * self.uniform();
        self.spare = Some(r * th.sin());
        r * th.cos()
    }

    /// `len` draws of `std * N(0, 1)`.
    pub fn normals(&mut self, len: usize, std: f64) -> Vec<f64> {
        (0..len).map(|_| std * self.normal()).collect()
    }

    /// `len` draws of `U(lo, hi)`.
    pub fn uniforms(&mut self, len: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..len).map(|_| self.range(lo, hi)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_moments_are_plausible() {
        let mut r = Rng::new(7);
        let v = r.normals(20_000, 1.0);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        assert!(mean.abs() < 0.03, "mean {mean}");
        assert!((var - 1.0).abs() < 0.05, "var {var}");
        let u = r.uniforms(10_000, 0.01, 1.0);
        assert!(u.iter().all(|&x| (0.01..1.0).contains(&x)));
        assert_ne!(Rng::new(1).next_u64(), Rng::new(2).next_u64());
    }
}
