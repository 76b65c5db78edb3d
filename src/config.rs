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
    /// IEEE binary32, 4 bytes.
    F32,
    /// bfloat16 (8 exponent bits, 7 mantissa bits), 2 bytes: activations only.
    Bf16,
    /// IEEE binary64, 8 bytes: host tensors of the reference only.
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
    /// `v` as this storage holds it, widened back to f64 exactly: f32 and bf16 round once, to
    /// nearest even ([`crate::bf16_nearest`]). What a test gives the reference so that it sees the
    /// inputs a device sees.
    pub fn round(self, v: f64) -> f64 {
        match self {
            Dtype::F32 => v as f32 as f64,
            Dtype::Bf16 => crate::bf16_nearest(v).to_f64(),
            Dtype::F64 => v,
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
    /// Stages 1-3: the mixing logits, the coefficients and the pre-mix `a` (or `y`) from `x`.
    Pre,
    /// The residual merge `x' = h_post f + h_res x`.
    Post,
    /// One layer's `post` fused with the next layer's `pre`.
    PostPre,
    /// The final stream collapse (DeepSeek-V4 `hc_head`): sigmoid weights, no Sinkhorn.
    Head,
    /// The first layer: the embedding copied into every stream.
    Expand,
    /// The static layer (mHC.cu parity): coefficients from per-layer logits shared by every token.
    Static,
    /// Stage 2's Sinkhorn normalization alone, `logits[T][n][n]` to `h_res` (the reference
    /// only: no kernel computes it).
    Sinkhorn,
    /// The gradients of `pre` (the reference only).
    PreBackward,
    /// The gradients of `post` (the reference only).
    PostBackward,
    /// The gradients of `head` (the reference only).
    HeadBackward,
    /// The gradients of the static layer (the reference only).
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

/// Most Sinkhorn iterations a configuration (and [`crate::reference::sinkhorn()`]) accepts: far
/// beyond the default 20, and small enough that the reference's backward, which keeps every
/// iterate, stays bounded (2 x 10,000 matrices of n x n).
pub const MAX_SINKHORN_ITERS: u32 = 10_000;

/// Smallest accepted epsilon (`eps_norm`, `eps_hc`, `eps_f`). Each epsilon is added to a sum
/// that can be exactly 0 for finite inputs: the mean square of an all-zero row (`eps_norm`,
/// `eps_f`: `1 / sqrt(0 + eps)`) and a Sinkhorn row or column whose entries all underflow, e.g.
/// a row of logits ~1e300 below the others (`eps_hc`: `0 / (0 + eps)`). So every epsilon must
/// be > 0 (0 gives `0 / 0` = NaN), a normal f32 (the kernels compute in f32 and flush
/// subnormals to zero: 1.2e-38 at least), and large enough that the RMS backward at an
/// all-zero row, which scales by `eps^(-3/2)`, stays finite in f32 (3.4e38) with room for the
/// upstream gradient: 1e-20 gives at most 1e30.
pub const EPS_MIN: f64 = 1e-20;

/// Largest accepted epsilon. `eps_hc` is added to the coefficients `h_pre = sigma + eps_hc`
/// (DeepSeek-V4) and head's `sigma + eps_hc`, which weight the streams: at most 1 keeps them
/// <= 2 like `h_post`, so finite activations give finite outputs (1e308 overflowed to
/// infinity). `eps_norm` and `eps_f` get the same bound: an epsilon above the activations'
/// mean square would replace the normalization it regularizes.
pub const EPS_MAX: f64 = 1.0;

/// A layer's configuration. Build with [`Config::new`] and adjust the public fields; every
/// device calls [`Config::validate`] before planning.
///
/// Bounds (checked by [`Config::validate`], see [`MAX_N`], [`MAX_SINKHORN_ITERS`],
/// [`EPS_MIN`], [`EPS_MAX`]): `n` in 1..=32, `C` >= 1 with `n * C` < 2^31, `sinkhorn_iters` in
/// 1..=10000, each epsilon in [1e-20, 1]. Within them, finite inputs give finite outputs.
///
/// Non-finite values: parameters (`phi`, `scale`, `base`, `gamma_k`, `gamma_f`, the static
/// layer's logits and `gamma`) and the coefficients a stage reads (`h_post`, `h_res`, the
/// Sinkhorn stage's `logits`) are checked on the host paths (the reference and every
/// [`crate::runner::StageRunner`]) and refused with [`crate::Error::NonFinite`]. Activations
/// (`x`, `f`, `e`) and every gradient are never scanned, by any device or the reference: a NaN
/// or infinity there propagates to the outputs it reaches (NaN in, NaN out), as it must on the
/// GPU, where a scan would cost a pass over the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Number of residual streams (expansion rate), 1..=32.
    pub n: usize,
    /// Hidden size C.
    pub c: usize,
    /// Which published formulation the coefficients and `post` follow (the static layer and
    /// `head` ignore it).
    pub formulation: Formulation,
    /// Sinkhorn iterations, 1..=[`MAX_SINKHORN_ITERS`].
    pub sinkhorn_iters: u32,
    /// Epsilon inside the RMS of the mixing logits (docs/math.md stage 1; default 1e-6), in
    /// [[`EPS_MIN`], [`EPS_MAX`]].
    pub eps_norm: f64,
    /// Epsilon of the coefficients and of every Sinkhorn denominator (default 1e-6), in
    /// [[`EPS_MIN`], [`EPS_MAX`]].
    pub eps_hc: f64,
    /// Epsilon of the optional F-pre-norm and of the static layer's RMSNorm (default 1e-6), in
    /// [[`EPS_MIN`], [`EPS_MAX`]].
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

    /// K = n * C, the length of a token's flattened residual row. On a configuration that
    /// [`Config::validate`] refuses it saturates at `usize::MAX`, a length no buffer holds, so
    /// a check against it fails instead of passing on a wrapped product.
    pub const fn k(&self) -> usize {
        self.n.saturating_mul(self.c)
    }

    /// M = n^2 + 2n, the number of mixing logits (saturating like [`Config::k`]).
    pub const fn m(&self) -> usize {
        self.n.saturating_mul(self.n).saturating_add(self.n.saturating_mul(2))
    }

    /// Checks one epsilon against [[`EPS_MIN`], [`EPS_MAX`]]; the error names it and the range.
    pub fn check_eps(what: &'static str, v: f64) -> Result<()> {
        if (EPS_MIN..=EPS_MAX).contains(&v) {
            return Ok(());
        }
        Err(Error::Config {
            what,
            reason: format!(
                "must be in [{EPS_MIN:e}, {EPS_MAX}] (> 0 and a normal f32, so that an all-zero row or \
                 Sinkhorn line is not 0/0; at most 1, so that the coefficients stay finite), got {v:?}"
            ),
        })
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
        check_iters(self.sinkhorn_iters)?;
        for (what, v) in [("eps_norm", self.eps_norm), ("eps_hc", self.eps_hc), ("eps_f", self.eps_f)] {
            Config::check_eps(what, v)?;
        }
        Ok(())
    }
}

/// Checks a Sinkhorn iteration count against 1..=[`MAX_SINKHORN_ITERS`].
pub(crate) fn check_iters(iters: u32) -> Result<()> {
    if (1..=MAX_SINKHORN_ITERS).contains(&iters) {
        return Ok(());
    }
    Err(Error::Config { what: "sinkhorn_iters", reason: format!("must be in 1..={MAX_SINKHORN_ITERS}, got {iters}") })
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
            (Config { eps_f: 0.0, ..Config::new(4, 64) }, "eps_f"),
            (Config { eps_hc: 0.0, ..Config::new(4, 64) }, "eps_hc"),
            (Config { eps_hc: 1e308, ..Config::new(4, 64) }, "eps_hc"),
            (Config { eps_norm: 1e-30, ..Config::new(4, 64) }, "eps_norm"),
            (Config { sinkhorn_iters: u32::MAX, ..Config::new(4, 64) }, "sinkhorn_iters"),
        ] {
            match cfg.validate() {
                Err(Error::Config { what: w, .. }) => assert_eq!(w, what),
                other => panic!("{cfg:?}: expected Config error on {what}, got {other:?}"),
            }
        }
    }

    #[test]
    fn sizes_of_unvalidated_configurations_saturate() {
        let huge = Config::new(usize::MAX, usize::MAX);
        assert_eq!((huge.k(), huge.m()), (usize::MAX, usize::MAX));
        assert_eq!(Config::new(1 << 33, 1 << 33).k(), usize::MAX);
        assert!(huge.validate().is_err());
        for eps in [EPS_MIN, 1e-6, EPS_MAX] {
            Config::check_eps("eps_hc", eps).unwrap();
        }
    }

    #[test]
    fn names_round_trip() {
        for s in Stage::ALL {
            assert_eq!(s.name().parse::<Stage>().unwrap(), s);
        }
        assert_eq!("paper".parse::<Formulation>().unwrap(), Formulation::Paper);
        assert_eq!("bf16".parse::<Dtype>().unwrap(), Dtype::Bf16);
        // what each storage keeps of a value just above bf16's halfway point past 1
        let v = 1.0 + (-8f64).exp2() + (-40f64).exp2();
        assert_eq!(Dtype::Bf16.round(v), 1.0 + (-7f64).exp2());
        assert_eq!(Dtype::F32.round(v), 1.0 + (-8f64).exp2());
        assert_eq!(Dtype::F64.round(v), v);
    }
}
