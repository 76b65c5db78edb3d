//! `post` (gfx942 `mhc_post`) on the simulator against the f64 reference.

mod common;
use mhc::config::{Config, Dtype, Formulation, Stage};

#[test]
fn post_matches_reference_all_n_both_formulations_both_dtypes() {
    let seed = common::seed();
    for (n, c, t) in [(1, 64, 3), (2, 200, 2), (4, 1280, 3), (8, 72, 2), (16, 264, 2), (32, 64, 2), (4, 7, 17)] {
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                let cfg = Config::new(n, c).with_formulation(f);
                common::check(Stage::Post, &cfg, dtype, t, seed, 0.02);
            }
        }
    }
}

#[test]
fn static_layer_matches_reference() {
    let seed = common::seed();
    for (n, c, t) in [(1, 64, 2), (2, 72, 3), (4, 1280, 2), (4, 300, 5), (8, 64, 2), (16, 40, 1), (32, 64, 2)] {
        for dtype in [Dtype::F32, Dtype::Bf16] {
            common::check(Stage::Static, &Config::new(n, c), dtype, t, seed, 0.02);
        }
    }
}
