//! docs/math.md's hidden sizes (C = 4096, 7168) and token counts (T = 1, 17, 64) on every stage,
//! kept to a few seconds of simulation in all.

mod common;
use mhc::config::{Config, Dtype, Formulation, Stage};

#[test]
fn large_hidden_sizes() {
    let seed = common::seed();
    for c in [4096, 7168] {
        let v4 = Config::new(4, c);
        let paper = v4.with_formulation(Formulation::Paper);
        common::check(Stage::Pre, &v4, Dtype::Bf16, 1, seed, 0.02);
        common::check(Stage::Pre, &paper, Dtype::F32, 2, seed, 0.02);
        common::check(Stage::Post, &v4, Dtype::Bf16, 2, seed, 0.02);
        common::check(Stage::PostPre, &paper, Dtype::F32, 1, seed, 0.02);
        common::check(Stage::Head, &v4, Dtype::F32, 1, seed, 0.02);
        common::check(Stage::Static, &v4, Dtype::F32, 1, seed, 0.02);
    }
}

#[test]
fn token_counts_of_math_md() {
    let seed = common::seed();
    for t in [1, 17, 64] {
        let cfg = Config::new(4, 64);
        common::check(Stage::Pre, &cfg, Dtype::F32, t, seed, 0.02);
        common::check(Stage::Post, &cfg.with_formulation(Formulation::Paper), Dtype::F32, t, seed, 0.02);
    }
    // The mHC.cu static configuration with the most streams, at a reduced token count.
    common::check(Stage::Static, &Config::new(32, 1280), Dtype::Bf16, 2, seed, 0.02);
}
