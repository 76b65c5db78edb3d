//! Tests on a real AMD GPU: every forward stage of the HIP device against the CPU f64
//! reference (docs/math.md tolerances), with seeded random inputs and outputs poisoned before each
//! launch; strided views; graph capture. Without libamdhip64 or a gfx942 GPU every test prints
//! why and returns (CI and the build machines have none).

use super::test_support::{compare, seed};
use super::{DeviceBuffer, HipDevice, HipRunner, Plan, Stream};
use crate::config::{Config, Dtype, Formulation, Stage};
use crate::reference::testing::Rng;
use crate::runner::random_inputs as inputs;
use crate::runner::{Array, CpuRunner, Named, StageRunner};
use crate::tensor::Layout;

/// The device, or `None` after printing why the test is skipped.
fn device(test: &str) -> Option<HipDevice> {
    match HipDevice::first() {
        Ok(d) => Some(d),
        Err(e) => {
            let why = HipRunner::explain(&e);
            // The GPU machine's test command sets this: there, a missing device is a failure.
            assert!(std::env::var_os("MHC_REQUIRE_GPU").is_none(), "{test}: MHC_REQUIRE_GPU is set but {why}");
            eprintln!("{test}: skipped, no HIP device: {why}");
            None
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn every_forward_stage_matches_the_reference() {
    if device("every_forward_stage_matches_the_reference").is_none() {
        return;
    }
    let runner = HipRunner::new(0).expect("runner");
    let seed = seed();
    let mut rng = Rng::new(seed);
    for (n, c) in [(4, 4096), (1, 72), (8, 1032), (32, 1280)] {
        for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
            for dtype in [Dtype::F32, Dtype::Bf16] {
                for t in [1, 17, 65] {
                    for (stage, gk, gf) in [
                        (Stage::Post, false, false),
                        (Stage::Pre, false, false),
                        (Stage::Pre, true, true),
                        (Stage::PostPre, false, true),
                        (Stage::Head, false, false),
                        (Stage::Static, false, false),
                    ] {
                        let cfg =
                            Config { gamma_k: gk, gamma_f: gf, ..Config::new(n, c).with_formulation(formulation) };
                        let ins = inputs(stage, &cfg, t, 0.02, &mut rng);
                        let ctx =
                            format!("{stage} T={t} n={n} C={c} {dtype} {formulation} gk={gk} gf={gf} seed={seed}");
                        let got = runner.run(stage, &cfg, dtype, &ins).unwrap_or_else(|e| panic!("{ctx}: {e}"));
                        let want = CpuRunner.run(stage, &cfg, dtype, &ins).expect("reference");
                        compare(&ctx, dtype, &got, &want);
                    }
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn strided_views_and_graph_replays_give_the_dense_result() {
    let Some(dev) = device("strided_views_and_graph_replays_give_the_dense_result") else { return };
    let seed = seed();
    let mut rng = Rng::new(seed);
    let (n, c, t) = (4, 520, 9);
    let cfg = Config::new(n, c);
    let ins = inputs(Stage::Post, &cfg, t, 0.02, &mut rng);
    let want = CpuRunner.run(Stage::Post, &cfg, Dtype::F32, &ins).expect("reference");
    let plan = Plan::new(&dev, cfg, Dtype::F32, 64).expect("plan");
    let stream = Stream::new(&dev).expect("stream");
    // x and out with a padded row (stride n C + 24), f with stride C + 8.
    let (xs, fs) = (n * c + 24, c + 8);
    let mut xh = vec![f32::NAN; t * xs];
    let mut fh = vec![f32::NAN; t * fs];
    for r in 0..t {
        for i in 0..n * c {
            xh[r * xs + i] = ins["x"].data[r * n * c + i] as f32;
        }
        for i in 0..c {
            fh[r * fs + i] = ins["f"].data[r * c + i] as f32;
        }
    }
    let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<_>>();
    let x = DeviceBuffer::from_slice(&dev, &xh).unwrap();
    let f = DeviceBuffer::from_slice(&dev, &fh).unwrap();
    let hp = DeviceBuffer::from_slice(&dev, &f32s(&ins["h_post"].data)).unwrap();
    let hr = DeviceBuffer::from_slice(&dev, &f32s(&ins["h_res"].data)).unwrap();
    let mut out = DeviceBuffer::alloc(&dev, t * xs * 4).unwrap();
    let xl = Layout::dense(t, n * c).with_stride(xs);
    stream.begin_capture().expect("capture");
    let captured = {
        let mut o = out.view_mut(Dtype::F32, xl);
        plan.post(
            &stream,
            &x.view(Dtype::F32, xl),
            &f.view(Dtype::F32, Layout::dense(t, c).with_stride(fs)),
            &hp.view(Dtype::F32, Layout::dense(t, n)),
            &hr.view(Dtype::F32, Layout::dense(t, n * n)),
            &mut o,
        )
    };
    let graph = stream.end_capture();
    captured.expect("post");
    let graph = graph.expect("graph");
    for _ in 0..2 {
        out.fill_u32(&stream, 0x7fc0_0000).unwrap();
        graph.launch(&stream).unwrap();
        stream.synchronize().unwrap();
        let got: Vec<f32> = out.to_vec().unwrap();
        let dense: Vec<f64> = (0..t).flat_map(|r| got[r * xs..r * xs + n * c].iter().map(|&v| v as f64)).collect();
        let mut g = Named::new();
        g.insert("out".into(), Array::new(vec![t, n, c], dense));
        compare(&format!("strided post seed={seed}"), Dtype::F32, &g, &want);
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn runtime_figures_of_every_kernel_are_recorded() {
    let Some(dev) = device("runtime_figures_of_every_kernel_are_recorded") else { return };
    for f in dev.load_all().expect("load") {
        let (_, info) = f.kernel.info().unwrap();
        eprintln!(
            "{}: runtime regs {} shared {} local {} max_threads {} | code object vgpr {} lds {} kernarg {}",
            f.kernel.entry(),
            f.registers,
            f.shared_bytes,
            f.local_bytes,
            f.max_threads,
            info.registers,
            info.shared_bytes,
            info.kernarg_bytes
        );
        assert_eq!(f.layout.kernarg_bytes, info.kernarg_bytes);
    }
}
