//! Bad input to the gcn-sim runner gets a clear error before anything runs.

use gcn_sim::runner::GcnSimRunner;
use mhc::config::{Config, Dtype, Stage};
use mhc::error::Error;
use mhc::reference::testing::Rng;
use mhc::runner::{random_inputs, Array, StageRunner};

#[test]
fn unsupported_n_dtype_and_stage_are_no_variant() {
    let mut rng = Rng::new(3);
    let cfg = Config::new(3, 64);
    let ins = random_inputs(Stage::Post, &cfg, 2, 0.02, &mut rng);
    let e = GcnSimRunner::new().run(Stage::Post, &cfg, Dtype::F32, &ins).unwrap_err();
    // The catalogue's n list rejects it (and only gfx942 variants are listed).
    assert!(
        matches!(&e, Error::NoVariant { rejected, .. } if rejected.len() == 1 && rejected[0].contains("n=3")),
        "{e}"
    );

    let cfg = Config::new(4, 64);
    let ins = random_inputs(Stage::Post, &cfg, 2, 0.02, &mut rng);
    let e = GcnSimRunner::new().run(Stage::Post, &cfg, Dtype::F64, &ins).unwrap_err();
    assert!(matches!(e, Error::NoVariant { .. }), "{e}");

    let ins = random_inputs(Stage::PostBackward, &cfg, 2, 0.02, &mut rng);
    let e = GcnSimRunner::new().run(Stage::PostBackward, &cfg, Dtype::F32, &ins).unwrap_err();
    assert!(matches!(e, Error::NoVariant { .. }), "{e}");
}

#[test]
fn shapes_and_values_are_checked_before_running() {
    let mut rng = Rng::new(4);
    let cfg = Config::new(4, 64);
    let mut ins = random_inputs(Stage::Pre, &cfg, 2, 0.02, &mut rng);
    let sim = GcnSimRunner::new();

    let mut missing = ins.clone();
    missing.remove("phi");
    let e = sim.run(Stage::Pre, &cfg, Dtype::F32, &missing).unwrap_err();
    assert!(matches!(e, Error::Shape { what: "phi", .. }), "{e}");

    let mut wrong = ins.clone();
    wrong.insert("base".into(), Array::new(vec![23], vec![0.0; 23]));
    let e = sim.run(Stage::Pre, &cfg, Dtype::F32, &wrong).unwrap_err();
    assert!(matches!(e, Error::Shape { what: "base", .. }), "{e}");

    ins.get_mut("scale").unwrap().data[1] = f64::NAN;
    let e = sim.run(Stage::Pre, &cfg, Dtype::F32, &ins).unwrap_err();
    assert!(matches!(e, Error::NonFinite { tensor: "scale", index: 1 }), "{e}");
    assert!(sim.last_stats.borrow().is_empty(), "nothing was launched");
}

#[test]
fn zero_tokens_give_empty_outputs_without_a_launch() {
    let mut rng = Rng::new(5);
    let cfg = Config::new(2, 64);
    for stage in [Stage::Pre, Stage::Post, Stage::PostPre, Stage::Head, Stage::Static] {
        let ins = random_inputs(stage, &cfg, 0, 0.02, &mut rng);
        let sim = GcnSimRunner::new();
        let out = sim.run(stage, &cfg, Dtype::Bf16, &ins).unwrap();
        assert!(out.values().all(|a| a.data.is_empty() && a.shape[0] == 0), "{stage}");
        assert!(sim.last_stats.borrow().is_empty());
    }
}
