//! GPU tests of the CUDA forward stages this crate implements in hand-written sm_90a PTX
//! (post, head, static, expand) against the f64 reference, on fresh random inputs (seed
//! printed), outputs poisoned with NaN before every launch. Without a CUDA GPU the tests are
//! ignored with the reason (CI has none); tools/gpu-tests.sh runs the packed binary
//! (tools/gpu-pack.sh) on the GPU machine with nothing skipped.

mod common;
use mhc::device::cuda::runner::{download, nan_pattern, upload};
use mhc::device::cuda::{CudaDevice, CudaRunner, DeviceBuffer, Plan, Stream};
use mhc::reference::testing::Rng;
use mhc::runner::{signature, Array, Class, CpuRunner, Named, StageRunner};
use mhc::{Config, Dtype, Error, Formulation, Layout, Stage};

fn gpu() -> Option<CudaRunner> {
    match CudaRunner::new(0) {
        Ok(r) => Some(r),
        Err(e) => common::no_gpu(&e),
    }
}

fn seed() -> u64 {
    Rng::test_seed("gpu_forward")
}

/// Random inputs of `stage` as docs/math.md asks (x ~ N(0,1), phi ~ phi_std N(0,1), scale ~ U(0.01,
/// 1), base ~ 0.1 N(0,1); coefficients of post positive; static logits N(0,1), gamma ~ 1+0.1N).
fn inputs(stage: Stage, cfg: &Config, dtype: Dtype, t: usize, phi_std: f64, rng: &mut Rng) -> Named {
    let sig = signature(stage, cfg);
    let mut named = Named::new();
    for p in &sig.inputs {
        if p.optional {
            continue;
        }
        let shape = p.shape(t);
        let len: usize = shape.iter().product();
        let data: Vec<f64> = match p.name {
            "phi" => rng.normals(len, phi_std),
            "scale" => rng.uniforms(len, 0.01, 1.0),
            "base" => rng.normals(len, 0.1),
            "h_post" => rng.uniforms(len, 0.05, 2.0),
            "h_res" => rng.uniforms(len, 0.0, 2.0 / cfg.n as f64),
            "gamma" => rng.normals(len, 0.1).into_iter().map(|g| 1.0 + g).collect(),
            _ => rng.normals(len, 1.0),
        };
        let data = match p.class {
            Class::Activation => data.into_iter().map(|v| dtype.round(v)).collect(),
            Class::Parameter => data.into_iter().map(|v| v as f32 as f64).collect(),
        };
        named.insert(p.name.to_string(), Array::new(shape, data));
    }
    named
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (g, w) in got.iter().zip(want) {
        num += (g - w) * (g - w);
        den += w * w;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

fn tol(dtype: Dtype) -> f64 {
    match dtype {
        Dtype::F32 => 1e-5,
        _ => 1e-2,
    }
}

/// The inputs of `stage` among `ins` (a fused stage's inputs hold those of its halves).
fn inputs_of(stage: Stage, cfg: &Config, ins: &Named) -> Named {
    let sig = signature(stage, cfg);
    ins.iter()
        .filter(|(name, _)| sig.inputs.iter().any(|p| p.name == name.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The f64 reference of `stage` on `ins`. `post_pre`: docs/math.md has its pre half read x' as
/// stored (rounded to the storage type), so the reference is post for x', then pre of the x' the
/// GPU stored (`got`); pre of the f64 x' would charge the kernel for every rounding of x', each
/// moving a logit by phi * ulp(x').
fn reference(stage: Stage, cfg: &Config, ins: &Named, got: &Named) -> Named {
    if stage != Stage::PostPre {
        return CpuRunner.run(stage, cfg, Dtype::F64, ins).unwrap();
    }
    let x_out = &got["out"];
    if let Some(i) = x_out.data.iter().position(|v| !v.is_finite()) {
        panic!("post_pre out n={} C={}: element {i} not written (NaN)", cfg.n, cfg.c);
    }
    let mut want = CpuRunner.run(Stage::Post, cfg, Dtype::F64, &inputs_of(Stage::Post, cfg, ins)).unwrap();
    let mut pre_ins = inputs_of(Stage::Pre, cfg, ins);
    pre_ins.insert("x".to_string(), x_out.clone());
    want.extend(CpuRunner.run(Stage::Pre, cfg, Dtype::F64, &pre_ins).unwrap());
    want
}

/// Runs `stage` on the GPU and on the f64 reference and checks every output.
fn check_stage(gpu: &CudaRunner, stage: Stage, cfg: &Config, dtype: Dtype, t: usize, phi_std: f64, rng: &mut Rng) {
    let ins = inputs(stage, cfg, dtype, t, phi_std, rng);
    let got = gpu
        .run(stage, cfg, dtype, &ins)
        .unwrap_or_else(|e| panic!("{stage} n={} C={} T={t} {dtype} {}: {e}", cfg.n, cfg.c, cfg.formulation));
    let want = reference(stage, cfg, &ins, &got);
    for (name, w) in &want {
        let g = &got[name];
        assert_eq!(g.shape, w.shape, "{stage} {name} shape");
        if let Some(i) = g.data.iter().position(|v| !v.is_finite()) {
            panic!("{stage} {name} n={} C={} T={t} {dtype}: element {i} not written (NaN)", cfg.n, cfg.c);
        }
        let err = rel_l2(&g.data, &w.data);
        assert!(
            err <= tol(dtype),
            "{stage} {name} n={} C={} T={t} {dtype} {}: rel L2 error {err:.3e} > {:.0e}",
            cfg.n,
            cfg.c,
            cfg.formulation,
            tol(dtype)
        );
        // Activations (not the coefficients, whose bound is the absolute one above): every
        // element within a few storage rounding steps.
        if !matches!(name.as_str(), "h_pre" | "h_post" | "h_res" | "inv_rms") {
            let (ratio, i) = common::elementwise_ratio(&g.data, &w.data, dtype);
            assert!(
                ratio <= 1.0,
                "{stage} {name}[{i}] n={} C={} T={t} {dtype} {}: got {} want {} ({ratio:.2}x the element bound)",
                cfg.n,
                cfg.c,
                cfg.formulation,
                g.data[i],
                w.data[i]
            );
        }
    }
}

const NS: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// (T, n, C) cases: every n at small sizes, the deployed n = 4 at the docs/math.md sizes.
fn cases() -> Vec<(usize, usize, usize)> {
    let mut v = Vec::new();
    for n in NS {
        v.push((3, n, 64));
        v.push((17, n, 1280));
    }
    for (t, c) in [(1, 4096), (2, 7168), (64, 4096), (1000, 1280), (8192, 4096)] {
        v.push((t, 4, c));
    }
    v.push((64, 8, 7168));
    v.push((1, 32, 1280));
    // the lane-per-stream decode kernels (n = 16 / 32, T <= 16): partial CTAs, C = 64 / 1288;
    // and the V = 2 kernel past them
    v.push((16, 32, 1280));
    v.push((5, 16, 1288));
    v.push((9, 32, 64));
    v.push((300, 32, 64));
    small(v, |&(t, n, c)| t * n * c)
}

/// With `MHC_GPU_SMALL=1` (the compute-sanitizer runs) only cases of at most 2^20 elements.
fn small<T>(v: Vec<T>, size: impl Fn(&T) -> usize) -> Vec<T> {
    if std::env::var("MHC_GPU_SMALL").is_ok_and(|v| v == "1") {
        v.into_iter().filter(|c| size(c) <= 1 << 20).collect()
    } else {
        v
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_post_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    for form in [Formulation::DeepSeekV4, Formulation::Paper] {
        for dtype in [Dtype::Bf16, Dtype::F32] {
            for (t, n, c) in cases() {
                let cfg = Config::new(n, c).with_formulation(form);
                check_stage(&gpu, Stage::Post, &cfg, dtype, t, 0.02, &mut rng);
            }
        }
    }
}

/// Every forward stage with Sinkhorn iterations and epsilons away from their defaults: a kernel
/// that hard-coded 20 iterations or ignored an epsilon argument would pass the other tests.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_iterations_and_epsilons_are_honoured() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    for (iters, eps_hc, eps_norm, eps_f) in [(1, 1e-3, 1e-3, 1e-2), (7, 1e-4, 1e-5, 1e-3), (33, 1e-6, 1e-2, 1e-6)] {
        for form in [Formulation::DeepSeekV4, Formulation::Paper] {
            for (t, n, c) in [(3, 4, 1280), (100, 4, 4096), (16, 8, 1280), (600, 32, 1280)] {
                let mut cfg = Config::new(n, c).with_formulation(form);
                cfg.sinkhorn_iters = iters;
                cfg.eps_hc = eps_hc;
                cfg.eps_norm = eps_norm;
                cfg.eps_f = eps_f;
                for stage in [Stage::Pre, Stage::PostPre, Stage::Head, Stage::Static] {
                    for dtype in [Dtype::Bf16, Dtype::F32] {
                        check_stage(&gpu, stage, &cfg, dtype, t, 0.1, &mut rng);
                    }
                }
            }
        }
    }
}

/// The tensor-core post kernels (bf16, n = 32 from T = 65, n = 16 from T = 400; post.ptx `mhc_post_mma_*`): one
/// 8-channel tile (C = 8: only warp 0 works, its second tile clamped), an odd tile count
/// (C = 24), the docs/math.md C = 1280, and the largest C whose x tile fits (3512 at n = 32, 7032 at
/// n = 16), both formulations (V4 applies h_res transposed).
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_post_mma_shapes_match_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    let dev = gpu.device();
    for form in [Formulation::DeepSeekV4, Formulation::Paper] {
        let shapes = [(65, 32, 8), (80, 32, 24), (400, 16, 1280), (65, 32, 3512), (401, 16, 7032), (1024, 32, 1280)];
        for (t, n, c) in small(shapes.to_vec(), |&(t, n, c)| t * n * c) {
            let cfg = Config::new(n, c).with_formulation(form);
            let plan = Plan::new(dev, cfg, Dtype::Bf16, t).unwrap();
            let entry = plan.buckets(Stage::Post).unwrap().iter().find(|b| b.max_tokens >= t).unwrap().entry();
            assert!(entry.starts_with("mhc_post_mma_"), "n={n} C={c} T={t}: {entry}");
            check_stage(&gpu, Stage::Post, &cfg, Dtype::Bf16, t, 0.02, &mut rng);
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_head_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    for dtype in [Dtype::Bf16, Dtype::F32] {
        for (t, n, c) in cases() {
            let cfg = Config::new(n, c);
            check_stage(&gpu, Stage::Head, &cfg, dtype, t, 0.02, &mut rng);
        }
        // Large logits push the sigmoids towards saturation.
        check_stage(&gpu, Stage::Head, &Config::new(4, 1280), dtype, 17, 0.5, &mut rng);
    }
}

/// The head shapes the cluster kernel (n <= 8) and the decode sizes add: T = 1, 2, 16, 17
/// (partial tiles), C = 64 (one chunk per CTA), C = 7168 (the largest tile that fits for bf16,
/// the one-CTA kernel for f32), n = 8 with V1 = 4.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_head_cluster_shapes_match_reference() {
    let Some(gpu) = gpu() else { return };
    let shapes = [
        (1, 4, 64),
        (2, 4, 4096),
        (16, 4, 4096),
        (17, 4, 7168),
        (16, 8, 1280),
        (33, 8, 64),
        (16, 1, 4096),
        (9, 2, 1280),
    ];
    check_head_shapes(&gpu, &shapes, (5, 8, 1280));
}

/// The cluster head kernels at n = 16 / 32 (V1 = 2; 16-CTA clusters up to 16 tokens, 8-CTA
/// ones above): T = 1, partial tiles, the C = 1280 of docs/math.md, C = 64 (two chunks per CTA of a
/// 16-CTA cluster), T = 17 and 256 (the 8-CTA kernel).
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_head_cluster_wide_n_match_reference() {
    let Some(gpu) = gpu() else { return };
    let shapes = [
        (1, 32, 1280),
        (3, 32, 1280),
        (16, 32, 1280),
        (17, 32, 1280),
        (1, 16, 1280),
        (7, 16, 4096),
        (5, 32, 64),
        (256, 32, 1280),
    ];
    check_head_shapes(&gpu, &shapes, (9, 32, 1280));
}

/// The n = 32 cluster head kernels at small C (16- and 8-CTA clusters), for compute-sanitizer.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_head_wide_n_sanitizer_smoke() {
    let Some(gpu) = gpu() else { return };
    check_head_shapes(&gpu, &[(1, 32, 64), (17, 32, 64), (3, 16, 64)], (2, 32, 64));
}

/// head on each (T, n, C) of `shapes` (phi ~ 0.02) and on `large_logits` with phi ~ 0.5 (the
/// sigmoids near saturation), both dtypes, against the f64 reference.
fn check_head_shapes(gpu: &CudaRunner, shapes: &[(usize, usize, usize)], large_logits: (usize, usize, usize)) {
    let mut rng = Rng::new(seed());
    let shapes = small(shapes.to_vec(), |&(t, n, c)| t * n * c);
    let (lt, ln, lc) = large_logits;
    for dtype in [Dtype::Bf16, Dtype::F32] {
        for &(t, n, c) in &shapes {
            check_stage(gpu, Stage::Head, &Config::new(n, c), dtype, t, 0.02, &mut rng);
        }
        check_stage(gpu, Stage::Head, &Config::new(ln, lc), dtype, lt, 0.5, &mut rng);
    }
}

/// The head shapes of the persistent cluster kernels (n <= 4, T > 512; pc4 and pc8): tile
/// counts that do not divide among the clusters, partial last tiles, C with uneven chunk ranges
/// per CTA (1288), one chunk per CTA (C = 64), the largest C of each (bf16 n=4: 4096 / 8192,
/// n=2: 8192 / 16384, n=1: 16384 / 32768; f32 half) and f32 beyond them (the one-CTA kernel),
/// large logits.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_head_persistent_shapes_match_reference() {
    let Some(gpu) = gpu() else { return };
    let shapes = [
        (513, 4, 256),
        (520, 1, 64),
        (777, 2, 64),
        (1000, 4, 1288),
        (2049, 1, 8192),
        (600, 4, 8192),
        (701, 1, 32768),
        (900, 4, 4096),
        (650, 2, 16384),
    ];
    check_head_shapes(&gpu, &shapes, (1029, 4, 2048));
}

/// head on padded rows (x and out strided; the padding must stay poisoned) against the f64
/// reference on the dense copy, then a captured graph of 20 calls that must replay the bits of
/// the direct launch.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_head_strided_rows_and_graph_replay() {
    let Some(gpu) = gpu() else { return };
    let dev = gpu.device();
    let mut rng = Rng::new(seed());
    let s = Stream::new(dev).unwrap();
    for dtype in [Dtype::Bf16, Dtype::F32] {
        for (t, n, c) in [(5, 4, 1280), (19, 4, 4096), (3, 16, 256), (1500, 4, 1288)] {
            let (xs, os) = (n * c + 24, c + 40);
            let cfg = Config::new(n, c);
            let plan = Plan::new(dev, cfg, dtype, t).unwrap();
            let xv: Vec<f64> = rng.normals(t * xs, 1.0).into_iter().map(|v| dtype.round(v)).collect();
            let phi: Vec<f64> = rng.normals(n * n * c, 0.02).into_iter().map(|v| v as f32 as f64).collect();
            let scale = vec![rng.uniforms(1, 0.01, 1.0)[0] as f32 as f64];
            let base: Vec<f64> = rng.normals(n, 0.1).into_iter().map(|v| v as f32 as f64).collect();
            let bx = upload(dev, dtype, &xv).unwrap();
            let bphi = upload(dev, Dtype::F32, &phi).unwrap();
            let bsc = upload(dev, Dtype::F32, &scale).unwrap();
            let bbase = upload(dev, Dtype::F32, &base).unwrap();
            let mut bout = DeviceBuffer::alloc(dev, t * os * dtype.size()).unwrap();
            let call = |out: &mut DeviceBuffer, s: &Stream| {
                plan.head(
                    s,
                    &bx.view(dtype, Layout::streams(t, n, c).with_stride(xs)),
                    &bphi.view(Dtype::F32, Layout::dense(n, n * c)),
                    &bsc.view(Dtype::F32, Layout::dense(1, 1)),
                    &bbase.view(Dtype::F32, Layout::dense(1, n)),
                    &mut out.view_mut(dtype, Layout::dense(t, c).with_stride(os)),
                )
            };
            bout.fill_u32(&s, nan_pattern(dtype)).unwrap();
            call(&mut bout, &s).unwrap();
            s.synchronize().unwrap();
            let got = download(&bout, dtype, t * os).unwrap();
            let mut ins = Named::new();
            let dense: Vec<f64> = (0..t).flat_map(|ti| xv[ti * xs..ti * xs + n * c].to_vec()).collect();
            ins.insert("x".into(), Array::new(vec![t, n, c], dense));
            ins.insert("phi".into(), Array::new(vec![n, n * c], phi.clone()));
            ins.insert("scale".into(), Array::new(vec![1], scale.clone()));
            ins.insert("base".into(), Array::new(vec![n], base.clone()));
            let want = CpuRunner.run(Stage::Head, &cfg, Dtype::F64, &ins).unwrap();
            let want = &want.values().next().unwrap().data;
            let ctx = format!("{dtype} strided head T={t} n={n} C={c}");
            let g = rows_with_padding_untouched(&got, t, c, os, &ctx);
            let err = rel_l2(&g, want);
            assert!(err <= tol(dtype), "{ctx}: rel error {err:.3e}");
            // Graph capture: 20 calls recorded, replayed twice, bits equal to the direct launch.
            graph_replays_the_direct_bits(&s, &mut bout, dtype, 20, 2, call, &ctx);
        }
    }
}

/// The `t` rows of `row` elements of a strided output (`stride` apart), asserting that the
/// padding after each row is still the NaN poison and that every row element was written.
fn rows_with_padding_untouched(got: &[f64], t: usize, row: usize, stride: usize, ctx: &str) -> Vec<f64> {
    let mut g = Vec::with_capacity(t * row);
    for ti in 0..t {
        g.extend_from_slice(&got[ti * stride..ti * stride + row]);
        for pad in row..stride {
            assert!(got[ti * stride + pad].is_nan(), "{ctx}: padding {pad} of row {ti} written");
        }
    }
    assert!(g.iter().all(|v| v.is_finite()), "{ctx}: an element was not written");
    g
}

/// `calls` calls of `call` captured in one graph and replayed `replays` times into a poisoned
/// `out` leave exactly the bits the direct launch left there.
fn graph_replays_the_direct_bits(
    s: &Stream,
    out: &mut DeviceBuffer,
    dtype: Dtype,
    calls: usize,
    replays: usize,
    call: impl Fn(&mut DeviceBuffer, &Stream) -> mhc::Result<()>,
    ctx: &str,
) {
    let direct = bits(out);
    out.fill_u32(s, nan_pattern(dtype)).unwrap();
    s.synchronize().unwrap();
    s.begin_capture().unwrap();
    for _ in 0..calls {
        call(out, s).unwrap();
    }
    let graph = s.end_capture().unwrap();
    for _ in 0..replays {
        graph.launch(s).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(bits(out), direct, "{ctx}: graph replay differs from the direct launch");
}

/// static on padded rows (x and out strided; the padding must stay poisoned) against the f64
/// reference on the dense copy: the token-tile kernel (n <= 8), the token ring (n = 4, T = 1200),
/// the tensor-core kernel (bf16 n = 32) and the persistent one (f32 n = 32),
/// then a graph of 10 calls replaying the direct launch's bits.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_static_strided_rows_and_graph_replay() {
    let Some(gpu) = gpu() else { return };
    let dev = gpu.device();
    let mut rng = Rng::new(seed());
    let s = Stream::new(dev).unwrap();
    for dtype in [Dtype::Bf16, Dtype::F32] {
        for (t, n, c) in [(6, 4, 1280), (3, 8, 256), (300, 32, 64), (1200, 4, 1280)] {
            let (xs, os) = (n * c + 16, n * c + 40);
            let cfg = Config::new(n, c);
            let plan = Plan::new(dev, cfg, dtype, t).unwrap();
            let xv: Vec<f64> = rng.normals(t * xs, 1.0).into_iter().map(|v| dtype.round(v)).collect();
            let f32s = |v: Vec<f64>| -> Vec<f64> { v.into_iter().map(|x| x as f32 as f64).collect() };
            let hpl = f32s(rng.normals(n, 1.0));
            let hol = f32s(rng.normals(n, 1.0));
            let hrl = f32s(rng.normals(n * n, 1.0));
            let gamma = f32s(rng.normals(c, 0.1).into_iter().map(|g| 1.0 + g).collect());
            let bx = upload(dev, dtype, &xv).unwrap();
            let bufs: Vec<DeviceBuffer> =
                [&hpl, &hol, &hrl, &gamma].iter().map(|v| upload(dev, Dtype::F32, v).unwrap()).collect();
            let mut bout = DeviceBuffer::alloc(dev, t * os * dtype.size()).unwrap();
            let call = |out: &mut DeviceBuffer, s: &Stream| {
                plan.static_layer(
                    s,
                    &bx.view(dtype, Layout::streams(t, n, c).with_stride(xs)),
                    &bufs[0].view(Dtype::F32, Layout::dense(1, n)),
                    &bufs[1].view(Dtype::F32, Layout::dense(1, n)),
                    &bufs[2].view(Dtype::F32, Layout::dense(n, n)),
                    &bufs[3].view(Dtype::F32, Layout::dense(1, c)),
                    &mut out.view_mut(dtype, Layout::streams(t, n, c).with_stride(os)),
                )
            };
            bout.fill_u32(&s, nan_pattern(dtype)).unwrap();
            call(&mut bout, &s).unwrap();
            s.synchronize().unwrap();
            let got = download(&bout, dtype, t * os).unwrap();
            let mut ins = Named::new();
            let dense: Vec<f64> = (0..t).flat_map(|ti| xv[ti * xs..ti * xs + n * c].to_vec()).collect();
            ins.insert("x".into(), Array::new(vec![t, n, c], dense));
            ins.insert("h_pre_logits".into(), Array::new(vec![n], hpl.clone()));
            ins.insert("h_post_logits".into(), Array::new(vec![n], hol.clone()));
            ins.insert("h_res_logits".into(), Array::new(vec![n, n], hrl.clone()));
            ins.insert("gamma".into(), Array::new(vec![c], gamma.clone()));
            let want = CpuRunner.run(Stage::Static, &cfg, Dtype::F64, &ins).unwrap();
            let want = &want.values().next().unwrap().data;
            let ctx = format!("{dtype} strided static T={t} n={n} C={c}");
            let g = rows_with_padding_untouched(&got, t, n * c, os, &ctx);
            let err = rel_l2(&g, want);
            assert!(err <= tol(dtype), "{ctx}: rel error {err:.3e}");
            graph_replays_the_direct_bits(&s, &mut bout, dtype, 10, 1, call, &ctx);
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_static_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    // mHC.cu's published configs (tokens, C, n), then every n at a small size.
    let mut shapes = vec![
        (320, 1280, 4),
        (512, 1920, 4),
        (1280, 2560, 4),
        (2560, 1280, 4),
        (128, 1280, 8),
        (256, 1280, 8),
        (32, 1280, 32),
        (64, 1280, 32),
        (128, 1280, 32),
    ];
    for n in NS {
        shapes.push((3, 64, n));
    }
    // The one-CTA kernel (C beyond the shared tile or off the cluster's granule) and odd splits.
    shapes.extend([
        (1, 16384, 4),
        (5, 1288, 32),
        (7, 1296, 16),
        (9, 4104, 8),
        (2, 32, 32),
        (4, 16, 16),
        (2, 8192, 8),
        (3, 6000, 16),
    ]);
    // The tensor-core kernels (bf16, n = 16, 32; one CTA or a cluster of 2 / 4 per token): C at
    // the one-CTA limits (2832 / 5112) and one past (2840: the persistent kernel), one 8-channel
    // tile per CTA (C = 8; C = 32 on 4 CTAs), an odd tile count (the second tile of a warp's pair
    // predicated off), T at the cluster boundaries (24 / 25, 66 / 67).
    shapes.extend([
        (3, 2832, 32),
        (2, 2840, 32),
        (4, 5112, 16),
        (2, 8, 32),
        (3, 8, 16),
        (5, 1272, 32),
        (300, 136, 32),
        (24, 96, 32),
        (25, 96, 32),
        (66, 64, 16),
        (67, 64, 16),
    ]);
    // The persistent token ring (n <= 8, every T where its ring fits): token counts that do not
    // divide among the CTAs, fewer tokens than CTAs, C = 8 and 64 (one chunk per thread or
    // fewer), C at its limit (bf16 n=4: 5848) and beyond it (the one-CTA kernel).
    shapes.extend([
        (1024, 8, 1),
        (1025, 64, 2),
        (1024, 64, 4),
        (1040, 16, 8),
        (1500, 1288, 4),
        (1100, 256, 8),
        (1030, 5848, 4),
        (1031, 6000, 4),
        (7, 3200, 4),
        (130, 8, 1),
        (17, 5848, 4),
    ]);
    let shapes = small(shapes, |&(t, c, n)| t * n * c);
    for dtype in [Dtype::Bf16, Dtype::F32] {
        for &(t, c, n) in &shapes {
            let cfg = Config::new(n, c);
            check_stage(&gpu, Stage::Static, &cfg, dtype, t, 0.02, &mut rng);
        }
    }
}

/// bf16 static rounds once: the kernels compute in f32 (the tensor-core kernel with h_res split
/// into bf16 hi + lo), so nearly every stored element is the f64 reference rounded to bf16 (an
/// f32 error of ~1e-6 flips a rounding about once in a thousand). A kernel multiplying by h_res
/// in bf16 alone (no lo part) would flip about a third of them while staying inside the 1e-2
/// tolerance of `gpu_static_matches_reference`. Small shapes: also the compute-sanitizer smoke
/// test of the static kernels.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_static_bf16_rounds_once() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    for (t, c, n) in [
        (3, 1272, 32),
        (2, 136, 32),
        (3, 264, 16),
        (2, 8, 32),
        (2, 1280, 32),
        (40, 96, 32),
        (3, 1296, 16),
        (4, 520, 4),
        (3, 256, 8),
        (2, 64, 1),
    ] {
        let cfg = Config::new(n, c).with_formulation(Formulation::Paper);
        let ins = inputs(Stage::Static, &cfg, Dtype::Bf16, t, 0.0, &mut rng);
        let want = CpuRunner.run(Stage::Static, &cfg, Dtype::F64, &ins).unwrap();
        let got = gpu.run(Stage::Static, &cfg, Dtype::Bf16, &ins).unwrap();
        let (w, g) = (&want.values().next().unwrap().data, &got.values().next().unwrap().data);
        let flips = w.iter().zip(g).filter(|(w, g)| Dtype::Bf16.round(**w) != **g).count();
        assert!(
            flips * 100 <= w.len(),
            "static T={t} n={n} C={c}: {flips} of {} elements off the rounded reference",
            w.len()
        );
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_expand_matches_reference() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    for dtype in [Dtype::Bf16, Dtype::F32] {
        for (t, n, c) in cases() {
            check_stage(&gpu, Stage::Expand, &Config::new(n, c), dtype, t, 0.02, &mut rng);
        }
    }
}

/// Host bf16/f32 bits of a device buffer, for bit-exact comparisons.
fn bits(buf: &DeviceBuffer) -> Vec<u32> {
    buf.to_vec::<u32>().unwrap()
}

struct PostBufs {
    x: DeviceBuffer,
    f: DeviceBuffer,
    hp: DeviceBuffer,
    hr: DeviceBuffer,
    out: DeviceBuffer,
}

fn post_bufs(dev: &CudaDevice, dtype: Dtype, t: usize, n: usize, c: usize, xs: usize, rng: &mut Rng) -> PostBufs {
    PostBufs {
        x: upload(dev, dtype, &rng.normals(t * xs, 1.0)).unwrap(),
        f: upload(dev, dtype, &rng.normals(t * c, 1.0)).unwrap(),
        hp: upload(dev, Dtype::F32, &rng.uniforms(t * n, 0.05, 2.0)).unwrap(),
        hr: upload(dev, Dtype::F32, &rng.uniforms(t * n * n, 0.0, 0.5)).unwrap(),
        out: DeviceBuffer::alloc(dev, t * xs * dtype.size()).unwrap(),
    }
}

fn run_post(plan: &Plan, s: &Stream, b: &mut PostBufs, t: usize, xs: usize) -> mhc::Result<()> {
    let (n, c, dt) = (plan.config().n, plan.config().c, plan.dtype());
    plan.post(
        s,
        &b.x.view(dt, Layout::streams(t, n, c).with_stride(xs)),
        &b.f.view(dt, Layout::dense(t, c)),
        &b.hp.view(Dtype::F32, Layout::dense(t, n)),
        &b.hr.view(Dtype::F32, Layout::dense(t, n * n)),
        &mut b.out.view_mut(dt, Layout::streams(t, n, c).with_stride(xs)),
    )
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_strided_rows_and_padding_untouched() {
    let Some(gpu) = gpu() else { return };
    let dev = gpu.device();
    let mut rng = Rng::new(seed());
    let s = Stream::new(dev).unwrap();
    // n = 32 bf16 at T = 70: the tensor-core kernel (bulk row copies from padded rows).
    for (dtype, t, n, c) in [(Dtype::Bf16, 5, 4, 1280), (Dtype::F32, 5, 4, 1280), (Dtype::Bf16, 70, 32, 1280)] {
        let xs = n * c + 24; // padded rows (48 / 96 extra bytes: still 16-byte aligned)
        let cfg = Config::new(n, c);
        let plan = Plan::new(dev, cfg, dtype, t).unwrap();
        let mut b = post_bufs(dev, dtype, t, n, c, xs, &mut rng);
        b.out.fill_u32(&s, nan_pattern(dtype)).unwrap();
        run_post(&plan, &s, &mut b, t, xs).unwrap();
        s.synchronize().unwrap();
        let x = download(&b.x, dtype, t * xs).unwrap();
        let f = download(&b.f, dtype, t * c).unwrap();
        let hp = download(&b.hp, Dtype::F32, t * n).unwrap();
        let hr = download(&b.hr, Dtype::F32, t * n * n).unwrap();
        let out = download(&b.out, dtype, t * xs).unwrap();
        let mut err = (0.0, 0.0);
        for ti in 0..t {
            for k in 0..n {
                for ch in 0..c {
                    let mut want = hp[ti * n + k] * f[ti * c + ch];
                    for j in 0..n {
                        want += hr[ti * n * n + j * n + k] * x[ti * xs + j * c + ch];
                    }
                    let got = out[ti * xs + k * c + ch];
                    err.0 += (got - want) * (got - want);
                    err.1 += want * want;
                }
            }
            for pad in n * c..xs {
                assert!(out[ti * xs + pad].is_nan(), "{dtype}: padding element {pad} of row {ti} was written");
            }
        }
        let rel = (err.0 / err.1).sqrt();
        assert!(rel <= tol(dtype), "{dtype} strided post: rel error {rel:.3e}");
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_deterministic_bits() {
    let Some(gpu) = gpu() else { return };
    let mut rng = Rng::new(seed());
    for (stage, t, n, c) in [
        (Stage::Post, 64, 4, 4096),
        (Stage::Post, 70, 32, 1280),
        (Stage::Head, 64, 4, 4096),
        (Stage::Head, 3, 8, 1280),
        (Stage::Static, 320, 4, 1280),
        (Stage::Static, 64, 32, 1280),
    ] {
        for dtype in [Dtype::Bf16, Dtype::F32] {
            let cfg = Config::new(n, c);
            let ins = inputs(stage, &cfg, dtype, t, 0.02, &mut rng);
            let a = gpu.run(stage, &cfg, dtype, &ins).unwrap();
            let b = gpu.run(stage, &cfg, dtype, &ins).unwrap();
            for (name, va) in &a {
                let same = va.data.iter().zip(&b[name].data).all(|(p, q)| p.to_bits() == q.to_bits());
                assert!(same, "{stage} {dtype}: output {name} differs between two runs");
            }
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_graph_capture_replays_100_calls() {
    let Some(gpu) = gpu() else { return };
    let dev = gpu.device();
    let mut rng = Rng::new(seed());
    let (t, n, c, dtype) = (4, 4, 4096, Dtype::Bf16);
    let plan = Plan::new(dev, Config::new(n, c), dtype, t).unwrap();
    let s = Stream::new(dev).unwrap();
    let mut b = post_bufs(dev, dtype, t, n, c, n * c, &mut rng);
    run_post(&plan, &s, &mut b, t, n * c).unwrap();
    s.synchronize().unwrap();
    let direct = bits(&b.out);
    b.out.fill_u32(&s, nan_pattern(dtype)).unwrap();
    s.synchronize().unwrap();
    s.begin_capture().unwrap();
    for _ in 0..100 {
        run_post(&plan, &s, &mut b, t, n * c).unwrap();
    }
    let graph = s.end_capture().unwrap();
    // Capture records, it does not run: the output still holds the poison.
    s.synchronize().unwrap();
    assert!(download(&b.out, dtype, 16).unwrap().iter().all(|v| v.is_nan()), "capture executed the launches");
    for _ in 0..3 {
        graph.launch(&s).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(bits(&b.out), direct, "graph replay differs from the direct launch");
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_bad_views_are_rejected_before_launch() {
    let Some(gpu) = gpu() else { return };
    let dev = gpu.device();
    let mut rng = Rng::new(seed());
    let (t, n, c, dtype) = (3, 4, 64, Dtype::Bf16);
    let plan = Plan::new(dev, Config::new(n, c), dtype, 8).unwrap();
    let s = Stream::new(dev).unwrap();
    let b = post_bufs(dev, dtype, t, n, c, n * c, &mut rng);
    let mut out = DeviceBuffer::alloc(dev, t * n * c * 2).unwrap();
    out.fill_u32(&s, nan_pattern(dtype)).unwrap();
    let x = b.x.view(dtype, Layout::streams(t, n, c));
    let f = b.f.view(dtype, Layout::dense(t, c));
    let hp = b.hp.view(Dtype::F32, Layout::dense(t, n));
    let hr = b.hr.view(Dtype::F32, Layout::dense(t, n * n));
    let ol = Layout::streams(t, n, c);
    // Wrong dtype.
    let xf = b.x.view(Dtype::F32, Layout::streams(t, n, c));
    assert!(matches!(plan.post(&s, &xf, &f, &hp, &hr, &mut out.view_mut(dtype, ol)), Err(Error::Dtype { .. })));
    // Stride shorter than a row.
    let xs = b.x.view(dtype, Layout::streams(t, n, c).with_stride(n * c - 8));
    assert!(matches!(plan.post(&s, &xs, &f, &hp, &hr, &mut out.view_mut(dtype, ol)), Err(Error::Shape { .. })));
    // Stride that runs past the buffer.
    let xl = b.x.view(dtype, Layout::streams(t, n, c).with_stride(n * c + 8));
    assert!(matches!(plan.post(&s, &xl, &f, &hp, &hr, &mut out.view_mut(dtype, ol)), Err(Error::Shape { .. })));
    // Misaligned pointer (2 bytes in) and a row stride of an odd number of bf16 elements.
    // SAFETY: the view is only validated (and rejected) by the op, never dereferenced.
    let xm = unsafe {
        mhc::device::DeviceTensor::from_raw(b.x.device_ptr() + 2, t * n * c, dtype, Layout::streams(t, n, c))
    };
    assert!(matches!(plan.post(&s, &xm, &f, &hp, &hr, &mut out.view_mut(dtype, ol)), Err(Error::Alignment { .. })));
    let big = DeviceBuffer::alloc(dev, t * (n * c + 1) * 2).unwrap();
    let xa = big.view(dtype, Layout::streams(t, n, c).with_stride(n * c + 1));
    assert!(matches!(plan.post(&s, &xa, &f, &hp, &hr, &mut out.view_mut(dtype, ol)), Err(Error::Alignment { .. })));
    // Mismatched token counts, and more tokens than the plan was made for.
    let f2 = b.f.view(dtype, Layout::dense(t - 1, c));
    assert!(matches!(plan.post(&s, &x, &f2, &hp, &hr, &mut out.view_mut(dtype, ol)), Err(Error::Shape { .. })));
    let many = DeviceBuffer::alloc(dev, 9 * n * c * 2).unwrap();
    let x9 = many.view(dtype, Layout::streams(9, n, c));
    assert!(plan.post(&s, &x9, &f, &hp, &hr, &mut out.view_mut(dtype, ol)).is_err());
    // A null pointer.
    // SAFETY: as above, rejected before any use.
    let x0 = unsafe { mhc::device::DeviceTensor::from_raw(0, t * n * c, dtype, Layout::streams(t, n, c)) };
    assert!(plan.post(&s, &x0, &f, &hp, &hr, &mut out.view_mut(dtype, ol)).is_err());
    // Nothing was launched: the output still holds the poison everywhere.
    s.synchronize().unwrap();
    assert!(download(&out, dtype, t * n * c).unwrap().iter().all(|v| v.is_nan()));
    // static n = 32 (bf16: the tensor-core kernel copies x rows in 16-byte units): x 4 bytes in
    // (enough for 2 channels per thread) or a row stride 4 bytes past 16 is refused, out untouched.
    {
        let (t, n, c) = (2, 32, 64);
        let plan = Plan::new(dev, Config::new(n, c), dtype, t).unwrap();
        let xb = DeviceBuffer::alloc(dev, t * (n * c + 2) * 2 + 16).unwrap();
        let par: Vec<DeviceBuffer> =
            [n, n, n * n, c].iter().map(|&l| DeviceBuffer::alloc(dev, l * 4).unwrap()).collect();
        let mut sout = DeviceBuffer::alloc(dev, t * n * c * 2).unwrap();
        sout.fill_u32(&s, nan_pattern(dtype)).unwrap();
        let call = |x: &mhc::device::DeviceTensor<'_>, out: &mut DeviceBuffer| {
            plan.static_layer(
                &s,
                x,
                &par[0].view(Dtype::F32, Layout::dense(1, n)),
                &par[1].view(Dtype::F32, Layout::dense(1, n)),
                &par[2].view(Dtype::F32, Layout::dense(n, n)),
                &par[3].view(Dtype::F32, Layout::dense(1, c)),
                &mut out.view_mut(dtype, Layout::streams(t, n, c)),
            )
        };
        // SAFETY: the view is only validated (and rejected) by the op, never dereferenced.
        let x4 = unsafe {
            mhc::device::DeviceTensor::from_raw(xb.device_ptr() + 4, t * n * c, dtype, Layout::streams(t, n, c))
        };
        assert!(matches!(call(&x4, &mut sout), Err(Error::Alignment { required: 16, .. })));
        let xs = xb.view(dtype, Layout::streams(t, n, c).with_stride(n * c + 2));
        assert!(matches!(call(&xs, &mut sout), Err(Error::Alignment { required: 16, .. })));
        s.synchronize().unwrap();
        assert!(download(&sout, dtype, t * n * c).unwrap().iter().all(|v| v.is_nan()));
    }
    // C not a multiple of 8: every stage says NoVariant, with the reason.
    let odd = Plan::new(dev, Config::new(4, 100), dtype, 8).unwrap();
    for stage in [Stage::Post, Stage::Head, Stage::Static, Stage::Expand] {
        match odd.supports(stage) {
            Err(Error::NoVariant { rejected, .. }) => {
                assert!(rejected.iter().any(|r| r.contains("multiple of 8")), "{stage}: {rejected:?}")
            }
            other => panic!("{stage} at C=100: expected NoVariant, got {other:?}"),
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gpu_every_kernel_loads_with_matching_arguments_and_no_local_memory() {
    let Some(gpu) = gpu() else { return };
    let funcs = gpu.device().load_all().unwrap();
    assert!(funcs.len() >= 50, "only {} kernels loaded", funcs.len());
    for f in &funcs {
        let row = &mhc_loader::Registry::embedded().unwrap().variants()[f.slot].entry;
        assert_eq!(f.local_bytes, 0, "{} spills", row.entry);
        assert!(f.max_threads >= row.threads, "{}: max threads {}", row.entry, f.max_threads);
        eprintln!(
            "{:<28} regs {:>3} smem {:>5} max_threads {:>4}",
            row.entry, f.registers, f.static_shared_bytes, f.max_threads
        );
    }
}

/// On a machine without libcuda (CI) the device is an error, never a panic; with a GPU, an
/// ordinal past the last device is `NoDevice`.
#[test]
fn missing_driver_or_device_is_an_error() {
    match CudaDevice::new(0) {
        Ok(dev) => {
            eprintln!("found {dev:?}");
            assert!(matches!(CudaDevice::new(4096), Err(Error::NoDevice(_))));
        }
        Err(Error::LibraryMissing { .. } | Error::NoDevice(_) | Error::UnsupportedArch(_) | Error::Driver { .. }) => {}
        Err(other) => panic!("unexpected error kind: {other}"),
    }
}
