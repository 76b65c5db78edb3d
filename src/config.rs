//! What a layer computes: the formulation, the sizes, the iteration count and the epsilons.
//! Validation of the configuration lives here once and is reused by every device.

use crate::error::{Error, Result};
use std::fmt;

/// Which of the two published mHC formulations to compute (docs/math.md, stage 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Formulation {
    /// DeepSeek-V4 as shipped: `h_pre = sigma + eps`, softmax start, column-first Sinkhorn,
    /// `h_res` applied transposed in `post`.
    #[default]
    DeepSeekV4,
    /// The mHC paper: `h_pre = sigma`, `exp(Z - max_col)` start, column-then-row Sinkhorn.
    Paper,
}

impl fmt::Display for Formulation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Formulation::DeepSeekV4 => "v4",
            Formulation::Paper => "paper",
        })
    }
}

impl std::str::FromStr for Formulation {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "v4" | "deepseek-v4" | "DeepSeekV4" => Ok(Formulation::DeepSeekV4),
            "paper" | "Paper" => Ok(Formulation::Paper),
            _ => Err(Error::Config { what: "formulation", reason: format!("{s:?} is not v4 or paper") }),
        }
    }
}

/// Storage type of a tensor. Activations (`x`, `f`, `a`) are bf16 or f32 on the GPU; `F64`
/// exists for the reference. Parameters and coefficients are never stored as bf16 by kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    F32,
    Bf16,
    F64,
}

impl Dtype {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 => 2,
            Dtype::F64 => 8,
        }
    }
    /// Short lowercase name (`f32`, `bf16`, `f64`).
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "f32",
            Dtype::Bf16 => "bf16",
            Dtype::F64 => "f64",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Dtype {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "f32" => Ok(Dtype::F32),
            "bf16" => Ok(Dtype::Bf16),
            "f64" => Ok(Dtype::F64),
            _ => Err(Error::Config { what: "dtype", reason: format!("{s:?} is not f32, bf16 or f64") }),
        }
    }
}

/// The stages a device can run (docs/math.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    Pre,
    Post,
    PostPre,
    Head,
    Expand,
    Static,
    Sinkhorn,
    PreBackward,
    PostBackward,
    HeadBackward,
    StaticBackward,
}

impl Stage {
    /// All stages, in a fixed order.
    pub const ALL: [Stage; 11] = [
        Stage::Pre,
        Stage::Post,
        Stage::PostPre,
        Stage::Head,
        Stage::Expand,
        Stage::Static,
        Stage::Sinkhorn,
        Stage::PreBackward,
        Stage::PostBackward,
        Stage::HeadBackward,
        Stage::StaticBackward,
    ];
    /// The name used on the command line and in the variant catalogue.
    pub const fn name(self) -> &'static str {
        match self {
            Stage::Pre => "pre",
            Stage::Post => "post",
            Stage::PostPre => "post_pre",
            Stage::Head => "head",
            Stage::Expand => "expand",
            Stage::Static => "static",
            Stage::Sinkhorn => "sinkhorn",
            Stage::PreBackward => "pre-backward",
            Stage::PostBackward => "post-backward",
            Stage::HeadBackward => "head-backward",
            Stage::StaticBackward => "static-backward",
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Stage {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Stage::ALL
            .iter()
            .copied()
            .find(|st| st.name() == s || st.name().replace('-', "_") == s)
            .ok_or_else(|| Error::Config { what: "stage", reason: format!("{s:?} is not a stage") })
    }
}

/// Largest supported number of streams.
pub const MAX_N: usize = 32;

/// A layer's configuration. Build with [`Config::new`] and adjust the public fields; every
/// device calls [`Config::validate`] before planning.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Number of residual streams (expansion rate), 1..=32.
    pub n: usize,
    /// Hidden size C.
    pub c: usize,
    pub formulation: Formulation,
    /// Sinkhorn iterations (>= 1).
    pub sinkhorn_iters: u32,
    /// Epsilon inside the RMS of the mixing logits (docs/math.md stage 1; default 1e-6).
    pub eps_norm: f64,
    /// Epsilon of the coefficients and of every Sinkhorn denominator (default 1e-6).
    pub eps_hc: f64,
    /// Epsilon of the optional F-pre-norm (default 1e-6).
    pub eps_f: f64,
    /// `pre` multiplies `x` by a pre-norm weight `gamma_k[n*C]` before the projection.
    pub gamma_k: bool,
    /// `pre` also applies the RMSNorm that begins F with weight `gamma_f[C]`, writing `y`.
    pub gamma_f: bool,
}

impl Config {
    /// The DeepSeek-V4 defaults for `n` streams of width `c`.
    pub fn new(n: usize, c: usize) -> Self {
        Config {
            n,
            c,
            formulation: Formulation::DeepSeekV4,
            sinkhorn_iters: 20,
            eps_norm: 1e-6,
            eps_hc: 1e-6,
            eps_f: 1e-6,
            gamma_k: false,
            gamma_f: false,
        }
    }

    /// Same configuration with another formulation.
    pub fn with_formulation(mut self, formulation: Formulation) -> Self {
        self.formulation = formulation;
        self
    }

    /// K = n * C, the length of a token's flattened residual row.
    pub const fn k(&self) -> usize {
        self.n * self.c
    }

    /// M = n^2 + 2n, the number of mixing logits.
    pub const fn m(&self) -> usize {
        self.n * self.n + 2 * self.n
    }

    /// Checks every field; the error names the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.n == 0 || self.n > MAX_N {
            return Err(Error::Config { what: "n", reason: format!("must be in 1..=32, got {}", self.n) });
        }
        if self.c == 0 {
            return Err(Error::Config { what: "C", reason: "must be positive, got 0".into() });
        }
        if self.n.checked_mul(self.c).is_none_or(|k| k > i32::MAX as usize) {
            return Err(Error::Config { what: "n*C", reason: "does not fit in 31 bits".into() });
        }
        if self.sinkhorn_iters == 0 || self.sinkhorn_iters > 10_000 {
            return Err(Error::Config {
                what: "sinkhorn_iters",
                reason: format!("must be in 1..=10000, got {}", self.sinkhorn_iters),
            });
        }
        for (what, v) in [("eps_norm", self.eps_norm), ("eps_hc", self.eps_hc), ("eps_f", self.eps_f)] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(Error::Config { what, reason: format!("must be finite and >= 0, got {v}") });
            }
        }
        if self.eps_norm == 0.0 {
            return Err(Error::Config {
                what: "eps_norm",
                reason: "must be > 0 (an all-zero row would divide by zero)".into(),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_sizes_follow() {
        let c = Config::new(4, 4096);
        c.validate().unwrap();
        assert_eq!(c.k(), 16384);
        assert_eq!(c.m(), 24);
    }

    #[test]
    fn bad_fields_are_named() {
        for (cfg, what) in [
            (Config { n: 0, ..Config::new(4, 64) }, "n"),
            (Config { n: 33, ..Config::new(4, 64) }, "n"),
            (Config::new(4, 0), "C"),
            (Config { sinkhorn_iters: 0, ..Config::new(4, 64) }, "sinkhorn_iters"),
            (Config { eps_hc: f64::NAN, ..Config::new(4, 64) }, "eps_hc"),
            (Config { eps_norm: -1.0, ..Config::new(4, 64) }, "eps_norm"),
        ] {
            match cfg.validate() {
                Err(Error::Config { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{cfg:?}: expected Config error on {what}, got {other:?}"),
            }
        }
    }

    #[test]
    fn names_round_trip() {
        for s in Stage::ALL {
            assert_eq!(s.name().parse::<Stage>().unwrap(), s);
        }
        assert_eq!("paper".parse::<Formulation>().unwrap(), Formulation::Paper);
        assert_eq!("bf16".parse::<Dtype>().unwrap(), Dtype::Bf16);
    }
}
