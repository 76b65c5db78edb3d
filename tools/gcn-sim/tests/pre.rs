//! `pre` and `post_pre` (gfx942 `mhc_pre`, with `mhc_rmsnorm` for `gamma_f`) on the simulator
//! against the f64 reference.

mod common;
use gcn_sim::runner::GcnSimRunner;
use mhc::config::{Config, Dtype, Formulation, Stage};
use mhc::reference::testing::Rng;
use mhc::runner::{random_inputs, CpuRunner, StageRunner};

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
        common::check(Stage::PostPre, &cfg, dtype, 5, seed, 0.02);
        // Split slices that start and end inside streams.
        common::check_on(GcnSimRunner::with_splits(3), Stage::Pre, &cfg, dtype, 2, seed, 0.02);
        common::check_on(GcnSimRunner::with_splits(5), Stage::PostPre, &cfg, dtype, 2, seed, 0.02);
        cfg.gamma_f = true;
        common::check(Stage::Pre, &cfg, dtype, 3, seed, 0.02);
        common::check(Stage::PostPre, &cfg, dtype, 2, seed, 0.02);
        cfg.gamma_k = false;
        common::check(Stage::PostPre, &cfg, dtype, 2, seed, 0.02);
    }
    let mut cfg = Config::new(8, 136);
    cfg.gamma_k = true;
    common::check(Stage::Pre, &cfg, Dtype::Bf16, 6, seed, 0.02);
}

/// `mhc_pre` reads gamma_k itself (flags bit 4): with weights spread over [0.25, 1.75] its
/// coefficients match the reference to f32 accuracy, and differ from the unweighted run's by
/// far more than that, while `inv_rms` (the unweighted sum of squares) does not change.
#[test]
fn pre_reads_its_prenorm_weights() {
    let seed = common::seed();
    let mut cfg = Config::new(4, 264);
    cfg.gamma_k = true;
    let t = 3;
    let mut rng = Rng::new(seed);
    let mut ins = random_inputs(Stage::Pre, &cfg, t, 0.05, &mut rng);
    let k = cfg.k();
    ins.get_mut("gamma_k").unwrap().data = (0..k).map(|i| 0.25 + 1.5 * ((i * 37 % k) as f64 / k as f64)).collect();
    let mut ones = ins.clone();
    ones.get_mut("gamma_k").unwrap().data = vec![1.0; k];
    gcn_sim::exec::set_thread_options(Some(common::sim_options(seed)));
    let sim = GcnSimRunner::new();
    let got = sim.run(Stage::Pre, &cfg, Dtype::F32, &ins).unwrap();
    let unweighted = sim.run(Stage::Pre, &cfg, Dtype::F32, &ones).unwrap();
    let want = CpuRunner.run(Stage::Pre, &cfg, Dtype::F32, &ins).unwrap();
    let max_diff = |a: &[f64], b: &[f64]| a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f64::max);
    for name in ["h_pre", "h_post", "h_res"] {
        let err = max_diff(&got[name].data, &want[name].data);
        assert!(err <= 1e-5, "{name}: {err:e} from the reference (seed {seed})");
        let moved = max_diff(&got[name].data, &unweighted[name].data);
        assert!(moved > 1e-3, "{name}: the weights moved it by only {moved:e} (seed {seed})");
    }
    assert_eq!(got["inv_rms"].data, unweighted["inv_rms"].data, "inv_rms is of the unweighted row");
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
