//! `pre` (gfx942 `mhc_proj` + `mhc_coeffs` + `mhc_apply`) on the simulator against the f64
//! reference.

mod common;
use gcn_sim::runner::GcnSimRunner;
use mhc::config::{Config, Dtype, Formulation, Stage};

#[test]
fn pre_split_k_decode_path_and_single_path_agree_with_reference() {
    let seed = common::seed();
    // G = 1 (one workgroup per token), G = 3 (uneven slices), G = 7 with K = 512 (empty slices).
    // T = 3, 6, 9: partial last tiles of 4 tokens.
    for (n, c, t, g) in [(4, 1280, 3, 1), (4, 1280, 6, 3), (2, 256, 9, 7), (8, 64, 2, 2), (32, 16, 5, 2)] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                let cfg = Config::new(n, c).with_formulation(f);
                let sim = common::check_on(GcnSimRunner::with_splits(g), Stage::Pre, &cfg, dtype, t, seed, 0.02);
                let launches = sim.last_stats.borrow();
                assert_eq!(launches.len(), 1, "pre is one launch");
                assert_eq!(launches[0].1.waves, (4 * g * t.div_ceil(4)) as u64);
            }
        }
    }
}

/// The split-K reduction's "last workgroup finishes" logic in every dispatch order of small
/// grids: G = 3 workgroups on one tile (6 orders), G = 2 on two tiles (24 orders).
#[test]
fn pre_split_k_in_every_dispatch_order() {
    let seed = common::seed();
    for (n, c, t, g) in [(4, 256, 4usize, 3usize), (2, 128, 8, 2)] {
        let groups = (g * t.div_ceil(4)) as u32;
        for order in common::permutations(groups) {
            let opts = gcn_sim::Options {
                order: gcn_sim::Order::Given(order),
                trans: gcn_sim::Trans::Ulp(seed),
                xnack: false,
            };
            let cfg = Config::new(n, c);
            common::check_with(GcnSimRunner::with_splits(g), Stage::Pre, &cfg, Dtype::F32, t, seed, 0.02, opts);
        }
    }
}

#[test]
fn pre_matches_reference_all_n_both_formulations_both_dtypes() {
    let seed = common::seed();
    for (n, c, t) in [(1, 64, 3), (2, 72, 2), (4, 1280, 2), (4, 64, 17), (8, 64, 2), (16, 40, 1), (32, 16, 1)] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                let cfg = Config::new(n, c).with_formulation(f);
                common::check(Stage::Pre, &cfg, dtype, t, seed, 0.02);
            }
        }
    }
}

#[test]
fn pre_pushes_the_sinkhorn_with_large_phi() {
    let seed = common::seed();
    for f in [Formulation::DeepSeekV4, Formulation::Paper] {
        let cfg = Config::new(4, 256).with_formulation(f);
        common::check(Stage::Pre, &cfg, Dtype::F32, 3, seed, 0.5);
    }
}

#[test]
fn head_matches_reference() {
    let seed = common::seed();
    for (n, c, t) in [(1, 64, 2), (4, 264, 3), (8, 64, 2), (32, 16, 1)] {
        for dtype in [Dtype::F32, Dtype::Bf16] {
            common::check(Stage::Head, &Config::new(n, c), dtype, t, seed, 0.02);
            common::check_on(GcnSimRunner::with_splits(3), Stage::Head, &Config::new(n, c), dtype, t, seed, 0.02);
        }
    }
}

#[test]
fn post_pre_matches_reference() {
    let seed = common::seed();
    for (n, c, t) in [(1, 64, 2), (4, 1280, 2), (4, 72, 17), (8, 64, 2), (32, 16, 1), (2, 300, 5)] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                let cfg = Config::new(n, c).with_formulation(f);
                let sim = common::check(Stage::PostPre, &cfg, dtype, t, seed, 0.02);
                assert_eq!(sim.last_stats.borrow().len(), 1, "post_pre is one launch");
                // Split slices that start and end inside streams (K = n C is not a multiple of
                // the slice), and more slices than 256-wide pieces of K.
                for g in [3, 5] {
                    common::check_on(GcnSimRunner::with_splits(g), Stage::PostPre, &cfg, dtype, t, seed, 0.02);
                }
            }
        }
    }
}

#[test]
fn pre_with_prenorm_weights_matches_reference() {
    let seed = common::seed();
    for dtype in [Dtype::F32, Dtype::Bf16] {
        let mut cfg = Config::new(4, 264);
        cfg.gamma_k = true;
        common::check(Stage::Pre, &cfg, dtype, 3, seed, 0.02);
        cfg.gamma_f = true;
        common::check(Stage::Pre, &cfg, dtype, 3, seed, 0.02);
        cfg.gamma_k = false;
        common::check(Stage::PostPre, &cfg, dtype, 2, seed, 0.02);
    }
}

#[test]
fn iterations_and_epsilons_reach_the_kernels() {
    let seed = common::seed();
    for f in [Formulation::DeepSeekV4, Formulation::Paper] {
        for iters in [1, 3] {
            let mut cfg = Config::new(4, 96).with_formulation(f);
            cfg.sinkhorn_iters = iters;
            cfg.eps_hc = 1e-3;
            cfg.eps_norm = 1e-2;
            cfg.eps_f = 1e-2;
            common::check(Stage::Pre, &cfg, Dtype::F32, 5, seed, 0.5);
            common::check(Stage::Static, &cfg, Dtype::F32, 2, seed, 0.02);
            common::check(Stage::Head, &cfg, Dtype::F32, 2, seed, 0.02);
        }
    }
}
