//! What the HIP device's two test suites share: the seed and the tolerance check (inputs come
//! from `runner::random_inputs`).

use crate::config::Dtype;
use crate::reference::testing::Rng;
use crate::runner::Named;

/// The seed of a test, printed ([`Rng::test_seed`]).
pub(super) fn seed() -> u64 {
    Rng::test_seed("hip")
}

/// Asserts `got` matches `want` within docs/math.md's tolerances for `dtype` (coefficients max abs,
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
            let err = g.data.iter().zip(&w.data).map(|(a, b)| (a - b).abs()).fold(0.0, |m: f64, e: f64| {
                if e.is_nan() {
                    f64::INFINITY
                } else {
                    m.max(e)
                }
            });
            assert!(err <= coef_tol, "{ctx} {name}: max abs error {err:e} > {coef_tol:e}");
        } else {
            let num: f64 = g.data.iter().zip(&w.data).map(|(a, b)| (a - b) * (a - b)).sum();
            let den: f64 = w.data.iter().map(|b| b * b).sum();
            let rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
            assert!(rel <= act_tol, "{ctx} {name}: relative error {rel:e} > {act_tol:e}");
        }
    }
}
