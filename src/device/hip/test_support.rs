//! What the HIP device's two test suites share: input draws, the seed, the tolerance check.

use crate::config::{Config, Dtype, Stage};
use crate::reference::testing::Rng;
use crate::runner::{signature, Array, Named};

/// The seed of a test: `MHC_SEED` when set (to replay a failure), else a fresh one.
pub(super) fn seed() -> u64 {
    match std::env::var("MHC_SEED") {
        Ok(s) => s.parse().unwrap_or_else(|_| Rng::fresh_seed()),
        Err(_) => Rng::fresh_seed(),
    }
}

/// Random inputs of `stage` for T tokens (MATH.md's distributions; `phi_std` for phi).
pub(super) fn inputs(stage: Stage, cfg: &Config, t: usize, phi_std: f64, rng: &mut Rng) -> Named {
    let sig = signature(stage, cfg);
    let mut out = Named::new();
    for p in sig
        .inputs
        .iter()
        .filter(|p| !p.optional || (p.name == "gamma_k" && cfg.gamma_k) || (p.name == "gamma_f" && cfg.gamma_f))
    {
        let shape = p.shape(t);
        let len: usize = shape.iter().product();
        let data = match p.name {
            "phi" => rng.normals(len, phi_std),
            "scale" => rng.uniforms(len, 0.01, 1.0),
            "base" => rng.normals(len, 0.1),
            "h_pre" | "h_post" => rng.uniforms(len, 0.0, 2.0),
            "h_res" => rng.uniforms(len, 0.0, 1.0),
            "gamma" | "gamma_k" | "gamma_f" => rng.uniforms(len, 0.5, 1.5),
            _ => rng.normals(len, 1.0),
        };
        out.insert(p.name.to_string(), Array::new(shape, data));
    }
    out
}

/// Asserts `got` matches `want` within MATH.md's tolerances for `dtype` (coefficients max abs,
/// activations relative L2); a non-finite value means an unwritten output.
pub(super) fn compare(ctx: &str, dtype: Dtype, got: &Named, want: &Named) {
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "{ctx}: output names");
    let (act_tol, coef_tol) = if dtype == Dtype::Bf16 { (1e-2, 1e-3) } else { (1e-5, 1e-5) };
    for (name, w) in want {
        let g = &got[name];
        assert_eq!(g.shape, w.shape, "{ctx} {name} shape");
        if let Some(i) = g.data.iter().position(|v| !v.is_finite()) {
            panic!("{ctx} {name}: element {i} is {} (unwritten?)", g.data[i]);
        }
        if matches!(name.as_str(), "h_pre" | "h_post" | "h_res" | "inv_rms") {
            let err = g.data.iter().zip(&w.data).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(err <= coef_tol, "{ctx} {name}: max abs error {err:e} > {coef_tol:e}");
        } else {
            let num: f64 = g.data.iter().zip(&w.data).map(|(a, b)| (a - b) * (a - b)).sum();
            let den: f64 = w.data.iter().map(|b| b * b).sum();
            let rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
            assert!(rel <= act_tol, "{ctx} {name}: relative error {rel:e} > {act_tol:e}");
        }
    }
}
