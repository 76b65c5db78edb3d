//! Shared helpers of the kernel tests: seeded random inputs per stage signature and the
//! comparison against the CPU f64 reference (docs/math.md tolerances).
#![allow(dead_code)]

use gcn_sim::runner::GcnSimRunner;
use mhc::config::{Config, Dtype, Stage};
use mhc::reference::testing::Rng;
use mhc::runner::{random_inputs, CpuRunner, StageRunner};

/// Is this output a coefficient (compared by max abs) rather than an activation (relative norm)?
fn is_coefficient(name: &str) -> bool {
    matches!(name, "h_pre" | "h_post" | "h_res" | "inv_rms")
}

/// Runs `stage` on the simulator and on the CPU reference (same storage dtype, f64 arithmetic)
/// and checks every output against docs/math.md's tolerances. Returns the simulator's runner for
/// its statistics.
pub fn check(stage: Stage, cfg: &Config, dtype: Dtype, t: usize, seed: u64, phi_std: f64) -> GcnSimRunner {
    check_on(GcnSimRunner::new(), stage, cfg, dtype, t, seed, phi_std)
}

/// [`check`] on a given simulator runner (e.g. with forced `pre` splits). The launches run in a
/// shuffled workgroup order with 1-ULP transcendentals, both drawn from the seed.
pub fn check_on(
    sim: GcnSimRunner,
    stage: Stage,
    cfg: &Config,
    dtype: Dtype,
    t: usize,
    seed: u64,
    phi_std: f64,
) -> GcnSimRunner {
    check_with(sim, stage, cfg, dtype, t, seed, phi_std, sim_options(seed))
}

/// [`check_on`] with the given simulator options (the stage runner calls gcn_sim::launch,
/// which reads them from the thread).
#[allow(clippy::too_many_arguments)]
pub fn check_with(
    sim: GcnSimRunner,
    stage: Stage,
    cfg: &Config,
    dtype: Dtype,
    t: usize,
    seed: u64,
    phi_std: f64,
    opts: gcn_sim::Options,
) -> GcnSimRunner {
    println!("{stage} T={t} n={} C={} {dtype} {:?}: seed {seed}, {opts:?}", cfg.n, cfg.c, cfg.formulation);
    gcn_sim::exec::set_thread_options(Some(opts));
    let mut rng = Rng::new(seed);
    let ins = random_inputs(stage, cfg, t, phi_std, &mut rng);
    let got = sim
        .run(stage, cfg, dtype, &ins)
        .unwrap_or_else(|e| panic!("{stage} T={t} n={} C={} {dtype} {:?}: {e}", cfg.n, cfg.c, cfg.formulation));
    let want = CpuRunner.run(stage, cfg, dtype, &ins).expect("reference");
    assert_eq!(got.keys().collect::<Vec<_>>(), want.keys().collect::<Vec<_>>(), "output names");
    let (act_tol, coef_tol) = match dtype {
        Dtype::Bf16 => (1e-2, 1e-3),
        _ => (1e-5, 1e-5),
    };
    for (name, w) in &want {
        let g = &got[name];
        assert_eq!(g.shape, w.shape, "{name} shape");
        let ctx = format!("{stage} {name} T={t} n={} C={} {dtype} {:?} seed={seed}", cfg.n, cfg.c, cfg.formulation);
        if let Some(i) = g.data.iter().position(|v| !v.is_finite()) {
            panic!("{ctx}: element {i} is {} (unwritten?)", g.data[i]);
        }
        if let Some(i) = w.data.iter().position(|v| !v.is_finite()) {
            panic!("{ctx}: reference element {i} is {}", w.data[i]);
        }
        // Both sides are finite, so no comparison below can be passed by a NaN.
        if is_coefficient(name) {
            let err = g.data.iter().zip(&w.data).map(|(a, b)| (a - b).abs()).fold(0.0, f64::max);
            assert!(err.is_finite() && err <= coef_tol, "{ctx}: max abs error {err:e} > {coef_tol:e}");
        } else {
            let num: f64 = g.data.iter().zip(&w.data).map(|(a, b)| (a - b) * (a - b)).sum();
            let den: f64 = w.data.iter().map(|b| b * b).sum();
            let rel = (num / den.max(f64::MIN_POSITIVE)).sqrt();
            assert!(rel.is_finite() && rel <= act_tol, "{ctx}: relative error {rel:e} > {act_tol:e}");
        }
    }
    sim
}

/// The simulator options of a seeded test: workgroups in a shuffled order, 1-ULP
/// transcendentals.
pub fn sim_options(seed: u64) -> gcn_sim::Options {
    gcn_sim::Options {
        order: gcn_sim::Order::Seeded(seed),
        trans: gcn_sim::Trans::Ulp(seed ^ 0x0075_6c70),
        xnack: false,
    }
}

/// Every permutation of 0..n (dispatch orders of a small grid).
pub fn permutations(n: u32) -> Vec<Vec<u32>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for i in 0..=p.len() {
            let mut q = p.clone();
            q.insert(i, n - 1);
            out.push(q);
        }
    }
    out
}

/// A seed printed on failure ([`Rng::test_seed`]).
pub fn seed() -> u64 {
    Rng::test_seed("gcn-sim")
}
