//! Every bad input returns the right `Error` and writes nothing: outputs are filled with a
//! sentinel first and must still hold it after the failing call.

// Buffers are built as Vecs on purpose: the views take slices of any length.
#![allow(clippy::useless_vec)]

mod common;

use common::*;
use half::bf16;
use mhc::reference::{self, PreGrads, PreOutputs, PreParams, PreUpstream};
use mhc::runner::{Array, CpuRunner, Named, StageRunner};
use mhc::{Config, Dtype, Error, Formulation, HostData, HostDataMut, HostTensor, HostTensorMut, Layout, Stage};

const SENTINEL: f32 = 12345.0;

/// `pre`'s outputs in f32, filled with the sentinel.
struct Bufs {
    a: Vec<f32>,
    y: Vec<f32>,
    h_pre: Vec<f32>,
    h_post: Vec<f32>,
    h_res: Vec<f32>,
    inv_rms: Vec<f32>,
}

impl Bufs {
    fn new(t: usize, n: usize, c: usize) -> Self {
        Bufs {
            a: vec![SENTINEL; t * c],
            y: vec![SENTINEL; t * c],
            h_pre: vec![SENTINEL; t * n],
            h_post: vec![SENTINEL; t * n],
            h_res: vec![SENTINEL; t * n * n],
            inv_rms: vec![SENTINEL; t],
        }
    }
    fn views(&mut self, t: usize, n: usize, c: usize, y: bool) -> PreOutputs<'_> {
        PreOutputs {
            a: HostTensorMut::new(&mut self.a[..], Layout::dense(t, c)),
            y: y.then(|| HostTensorMut::new(&mut self.y[..], Layout::dense(t, c))),
            h_pre: HostTensorMut::new(&mut self.h_pre[..], Layout::dense(t, n)),
            h_post: HostTensorMut::new(&mut self.h_post[..], Layout::dense(t, n)),
            h_res: HostTensorMut::new(&mut self.h_res[..], Layout::dense(t, n * n)),
            inv_rms: HostTensorMut::new(&mut self.inv_rms[..], Layout::dense(t, 1)),
        }
    }
    fn untouched(&self) -> bool {
        [&self.a, &self.y, &self.h_pre, &self.h_post, &self.h_res, &self.inv_rms]
            .iter()
            .all(|v| v.iter().all(|&e| e == SENTINEL))
    }
}

/// f32 inputs of `pre` (n = 4, C = 8, T = 3), random.
struct Inputs {
    x: Vec<f32>,
    phi: Vec<f32>,
    scale: Vec<f32>,
    base: Vec<f32>,
    gamma: Vec<f32>,
}

const N: usize = 4;
const C: usize = 8;
const T: usize = 3;
const K: usize = N * C;
const M: usize = N * N + 2 * N;

fn inputs(test: &str) -> Inputs {
    let mut r = rng(test);
    let f = |v: Vec<f64>| v.iter().map(|&e| e as f32).collect::<Vec<f32>>();
    Inputs {
        x: f(r.normals(T * K, 1.0)),
        phi: f(r.normals(M * K, 0.02)),
        scale: f(r.uniforms(3, 0.01, 1.0)),
        base: f(r.normals(M, 0.1)),
        gamma: f(r.uniforms(K, 0.5, 1.5)),
    }
}

impl Inputs {
    fn params(&self) -> PreParams<'_> {
        PreParams {
            phi: HostData::F32(&self.phi),
            scale: HostData::F32(&self.scale),
            base: HostData::F32(&self.base),
            gamma_k: None,
            gamma_f: None,
        }
    }
    fn x(&self) -> HostTensor<'_> {
        HostTensor::new(&self.x[..], Layout::dense(T, K))
    }
}

fn expect_shape(r: mhc::Result<()>, what: &str) {
    match r {
        Err(Error::Shape { what: w, .. }) if w == what => {}
        other => panic!("expected a shape error on {what}, got {other:?}"),
    }
}

#[test]
fn pre_rejects_bad_config_shapes_strides_and_writes_nothing() {
    let inp = inputs("pre_rejects_bad_config_shapes_strides_and_writes_nothing");
    let cfg = Config::new(N, C);
    let mut b = Bufs::new(T, N, C);
    // The good call works (so the failures below are caused by the one change each makes).
    let mut ok = Bufs::new(T, N, C);
    reference::pre::<f64>(&cfg, &inp.x(), &inp.params(), &mut ok.views(T, N, C, false)).unwrap();
    assert!(ok.a.iter().all(|&v| v != SENTINEL));

    for (bad, what) in [(Config { n: 0, ..cfg }, "n"), (Config { n: 33, ..cfg }, "n"), (Config { c: 0, ..cfg }, "C")] {
        match reference::pre::<f64>(&bad, &inp.x(), &inp.params(), &mut b.views(T, N, C, false)) {
            Err(Error::Config { what: w, .. }) => assert_eq!(w, what),
            other => panic!("{what}: {other:?}"),
        }
    }
    // x: wrong row length, stride shorter than a row, buffer too short.
    let r = reference::pre::<f64>(
        &cfg,
        &HostTensor::new(&inp.x[..], Layout::dense(T, K - 1)),
        &inp.params(),
        &mut b.views(T, N, C, false),
    );
    expect_shape(r, "x");
    let r = reference::pre::<f64>(
        &cfg,
        &HostTensor::new(&inp.x[..], Layout::dense(T, K).with_stride(K - 1)),
        &inp.params(),
        &mut b.views(T, N, C, false),
    );
    expect_shape(r, "x");
    let r = reference::pre::<f64>(
        &cfg,
        &HostTensor::new(&inp.x[..T * K - 1], Layout::dense(T, K)),
        &inp.params(),
        &mut b.views(T, N, C, false),
    );
    expect_shape(r, "x");
    // Parameters of the wrong length.
    let mut p = inp.params();
    p.phi = HostData::F32(&inp.phi[..M * K - 1]);
    expect_shape(reference::pre::<f64>(&cfg, &inp.x(), &p, &mut b.views(T, N, C, false)), "phi");
    let mut p = inp.params();
    p.scale = HostData::F32(&inp.scale[..2]);
    expect_shape(reference::pre::<f64>(&cfg, &inp.x(), &p, &mut b.views(T, N, C, false)), "scale");
    // Optional weights that disagree with the configuration.
    let mut p = inp.params();
    p.gamma_k = Some(HostData::F32(&inp.gamma));
    expect_shape(reference::pre::<f64>(&cfg, &inp.x(), &p, &mut b.views(T, N, C, false)), "gamma_k");
    let gf_cfg = Config { gamma_f: true, ..cfg };
    expect_shape(reference::pre::<f64>(&gf_cfg, &inp.x(), &inp.params(), &mut b.views(T, N, C, false)), "gamma_f");
    let mut p = inp.params();
    p.gamma_f = Some(HostData::F32(&inp.gamma[..C]));
    expect_shape(reference::pre::<f64>(&gf_cfg, &inp.x(), &p, &mut b.views(T, N, C, false)), "y");
    // Outputs: a stride shorter than a row; wrong token count; too short.
    {
        let mut v = b.views(T, N, C, false);
        v.a.layout = Layout::dense(T, C).with_stride(C - 1);
        expect_shape(reference::pre::<f64>(&cfg, &inp.x(), &inp.params(), &mut v), "a");
    }
    {
        let mut v = b.views(T, N, C, false);
        v.h_res.layout = Layout::dense(T - 1, N * N);
        expect_shape(reference::pre::<f64>(&cfg, &inp.x(), &inp.params(), &mut v), "h_res");
    }
    {
        let mut v = b.views(T, N, C, false);
        v.inv_rms.data = HostDataMut::F32(&mut []);
        expect_shape(reference::pre::<f64>(&cfg, &inp.x(), &inp.params(), &mut v), "inv_rms");
    }
    assert!(b.untouched(), "a failing call wrote an output");
}

#[test]
fn pre_rejects_non_finite_parameters_and_mismatched_dtypes() {
    let inp = inputs("pre_rejects_non_finite_parameters_and_mismatched_dtypes");
    let cfg = Config::new(N, C);
    let mut b = Bufs::new(T, N, C);
    for (name, idx, val) in [("phi", 77, f32::NAN), ("scale", 2, f32::INFINITY), ("base", 5, f32::NEG_INFINITY)] {
        let (mut phi, mut scale, mut base) = (inp.phi.clone(), inp.scale.clone(), inp.base.clone());
        match name {
            "phi" => phi[idx] = val,
            "scale" => scale[idx] = val,
            _ => base[idx] = val,
        }
        let p = PreParams {
            phi: HostData::F32(&phi),
            scale: HostData::F32(&scale),
            base: HostData::F32(&base),
            gamma_k: None,
            gamma_f: None,
        };
        match reference::pre::<f64>(&cfg, &inp.x(), &p, &mut b.views(T, N, C, false)) {
            Err(Error::NonFinite { tensor, index }) => assert_eq!((tensor, index), (name, idx)),
            other => panic!("{name}: {other:?}"),
        }
    }
    let mut g = inp.gamma.clone();
    g[3] = f32::NAN;
    let mut p = inp.params();
    p.gamma_k = Some(HostData::F32(&g));
    match reference::pre::<f64>(&Config { gamma_k: true, ..cfg }, &inp.x(), &p, &mut b.views(T, N, C, false)) {
        Err(Error::NonFinite { tensor: "gamma_k", index: 3 }) => {}
        other => panic!("gamma_k: {other:?}"),
    }
    // Dtypes: parameters must be f32 next to f32/bf16 activations, never bf16; outputs follow.
    let phi64: Vec<f64> = inp.phi.iter().map(|&v| v as f64).collect();
    let phib: Vec<bf16> = inp.phi.iter().map(|&v| bf16::from_f32(v)).collect();
    let xb: Vec<bf16> = inp.x.iter().map(|&v| bf16::from_f32(v)).collect();
    let check = |r: mhc::Result<()>, tensor: &str, expected: Dtype, got: Dtype| match r {
        Err(Error::Dtype { tensor: t, expected: e, got: g }) => assert_eq!((t, e, g), (tensor, expected, got)),
        other => panic!("{tensor}: {other:?}"),
    };
    let mut p = inp.params();
    p.phi = HostData::F64(&phi64);
    check(reference::pre::<f64>(&cfg, &inp.x(), &p, &mut b.views(T, N, C, false)), "phi", Dtype::F32, Dtype::F64);
    let mut p = inp.params();
    p.phi = HostData::Bf16(&phib);
    check(
        reference::pre::<f64>(&cfg, &HostTensor::new(&xb[..], Layout::dense(T, K)), &p, &mut b.views(T, N, C, false)),
        "phi",
        Dtype::F32,
        Dtype::Bf16,
    );
    // bf16 x with an f32 `a`: the activation output must be bf16 too.
    check(
        reference::pre::<f64>(
            &cfg,
            &HostTensor::new(&xb[..], Layout::dense(T, K)),
            &inp.params(),
            &mut b.views(T, N, C, false),
        ),
        "a",
        Dtype::Bf16,
        Dtype::F32,
    );
    // An f64 coefficient output next to f32 activations.
    let mut hp64 = vec![SENTINEL as f64; T * N];
    {
        let mut v = b.views(T, N, C, false);
        v.h_pre = HostTensorMut::new(&mut hp64[..], Layout::dense(T, N));
        check(reference::pre::<f64>(&cfg, &inp.x(), &inp.params(), &mut v), "h_pre", Dtype::F32, Dtype::F64);
    }
    assert!(hp64.iter().all(|&v| v == SENTINEL as f64));
    assert!(b.untouched(), "a failing call wrote an output");
}

#[test]
fn post_and_post_pre_reject_bad_inputs_before_writing() {
    let mut rng = rng("post_and_post_pre_reject_bad_inputs_before_writing");
    let cfg = Config::new(N, C).with_formulation(Formulation::Paper);
    let case = PostCase::random(&mut rng, cfg, T);
    let mut out = vec![SENTINEL as f64; T * K];
    let f_short = &case.f[..(T - 1) * C];
    let mut bad = case.inputs();
    bad.f = HostTensor::new(f_short, Layout::dense(T - 1, C));
    expect_shape(reference::post::<f64>(&cfg, &bad, &mut HostTensorMut::new(&mut out[..], Layout::dense(T, K))), "f");
    let mut h_res = case.h_res.clone();
    h_res[N * N + 1] = f64::NAN;
    let mut bad = case.inputs();
    bad.h_res = HostTensor::new(&h_res[..], Layout::dense(T, N * N));
    match reference::post::<f64>(&cfg, &bad, &mut HostTensorMut::new(&mut out[..], Layout::dense(T, K))) {
        Err(Error::NonFinite { tensor: "h_res", index }) => assert_eq!(index, N * N + 1),
        other => panic!("{other:?}"),
    }
    let f32s: Vec<f32> = case.f.iter().map(|&v| v as f32).collect();
    let mut bad = case.inputs();
    bad.f = HostTensor::new(&f32s[..], Layout::dense(T, C));
    match reference::post::<f64>(&cfg, &bad, &mut HostTensorMut::new(&mut out[..], Layout::dense(T, K))) {
        Err(Error::Dtype { tensor: "f", expected: Dtype::F64, got: Dtype::F32 }) => {}
        other => panic!("{other:?}"),
    }
    // post_pre with a bad pre parameter must not write post's output either.
    let pre = PreCase::random(&mut rng, cfg, T, 0.02);
    let mut scale = pre.scale.clone();
    scale[0] = f64::NAN;
    let mut params = pre.params();
    params.scale = HostData::F64(&scale);
    let mut po = PreOut::poisoned(&cfg, T);
    for v in [&mut po.a, &mut po.h_pre, &mut po.h_post, &mut po.h_res, &mut po.inv_rms] {
        v.iter_mut().for_each(|e| *e = SENTINEL as f64);
    }
    let r = reference::post_pre::<f64>(
        &cfg,
        &case.inputs(),
        &params,
        &mut HostTensorMut::new(&mut out[..], Layout::dense(T, K)),
        &mut po.views(&cfg, T),
    );
    assert!(matches!(r, Err(Error::NonFinite { tensor: "scale", index: 0 })), "{r:?}");
    assert!(out.iter().all(|&v| v == SENTINEL as f64), "post_pre wrote out before failing");
    assert!([&po.a, &po.h_pre, &po.h_post, &po.h_res, &po.inv_rms]
        .iter()
        .all(|v| v.iter().all(|&e| e == SENTINEL as f64)));
}

#[test]
fn backward_head_static_sinkhorn_expand_reject_bad_inputs_before_writing() {
    let mut rng = rng("backward_head_static_sinkhorn_expand_reject_bad_inputs_before_writing");
    let cfg = Config::new(N, C);
    let case = PreCase::random(&mut rng, cfg, T, 0.02);
    let (da, dhp, dhr) = (rng.normals(T * C, 1.0), rng.normals(T * N, 1.0), rng.normals(T * N * N, 1.0));
    let s = SENTINEL as f64;
    let (mut dx, mut dphi, mut dscale, mut dbase) = (vec![s; T * K], vec![s; M * K], vec![s; 3], vec![s; M]);
    let up = |with_da: bool| PreUpstream {
        da: with_da.then(|| HostTensor::new(&da[..], Layout::dense(T, C))),
        dy: None,
        dh_pre: None,
        dh_post: HostTensor::new(&dhp[..], Layout::dense(T, N)),
        dh_res: HostTensor::new(&dhr[..], Layout::dense(T, N * N)),
        dinv_rms: None,
    };
    {
        let mut g = PreGrads {
            dx: HostTensorMut::new(&mut dx[..], Layout::dense(T, K)),
            dphi: HostDataMut::F64(&mut dphi),
            dscale: HostDataMut::F64(&mut dscale),
            dbase: HostDataMut::F64(&mut dbase),
            dgamma_k: None,
            dgamma_f: None,
        };
        expect_shape(reference::pre_backward::<f64>(&cfg, &case.x(), &case.params(), &up(false), &mut g), "da");
        let mut u = up(true);
        let dy = vec![1.0; T * C];
        u.dy = Some(HostTensor::new(&dy[..], Layout::dense(T, C)));
        expect_shape(reference::pre_backward::<f64>(&cfg, &case.x(), &case.params(), &u, &mut g), "dy");
        let mut short = vec![s; M * K - 1];
        g.dphi = HostDataMut::F64(&mut short);
        expect_shape(reference::pre_backward::<f64>(&cfg, &case.x(), &case.params(), &up(true), &mut g), "dphi");
    }
    assert!([&dx, &dphi, &dscale, &dbase].iter().all(|v| v.iter().all(|&e| e == s)));

    // head: scale must have one element.
    let head = HeadCase::random(&mut rng, cfg, T, 0.5);
    let three = [0.5; 3];
    let mut p = head.params();
    p.scale = HostData::F64(&three);
    let mut out = vec![s; T * C];
    expect_shape(
        reference::head::<f64>(&cfg, &head.x(), &p, &mut HostTensorMut::new(&mut out[..], Layout::dense(T, C))),
        "scale",
    );
    // static: NaN in the residual logits.
    let st = StaticCase::random(&mut rng, cfg, T);
    let mut hr = st.h_res_logits.clone();
    hr[6] = f64::NAN;
    let mut p = st.params();
    p.h_res_logits = HostData::F64(&hr);
    let mut sout = vec![s; T * K];
    let r =
        reference::static_layer::<f64>(&cfg, &st.x(), &p, &mut HostTensorMut::new(&mut sout[..], Layout::dense(T, K)));
    assert!(matches!(r, Err(Error::NonFinite { tensor: "h_res_logits", index: 6 })), "{r:?}");
    // sinkhorn: bf16 logits are refused (coefficients are never bf16); NaN is refused.
    let lb = vec![bf16::ONE; T * N * N];
    let mut h = vec![SENTINEL; T * N * N];
    let r = reference::sinkhorn::<f64>(
        &cfg,
        &HostTensor::new(&lb[..], Layout::dense(T, N * N)),
        &mut HostTensorMut::new(&mut h[..], Layout::dense(T, N * N)),
    );
    assert!(matches!(r, Err(Error::Dtype { tensor: "logits", .. })), "{r:?}");
    let mut l = vec![0.5f32; T * N * N];
    l[T * N * N - 1] = f32::NAN;
    let r = reference::sinkhorn::<f64>(
        &cfg,
        &HostTensor::new(&l[..], Layout::dense(T, N * N)),
        &mut HostTensorMut::new(&mut h[..], Layout::dense(T, N * N)),
    );
    assert!(matches!(r, Err(Error::NonFinite { tensor: "logits", .. })), "{r:?}");
    // expand: x must have e's dtype.
    let e = vec![1.0f32; T * C];
    let r = reference::expand(
        &cfg,
        &HostTensor::new(&e[..], Layout::dense(T, C)),
        &mut HostTensorMut::new(&mut out[..T * C], Layout::dense(T, C)),
    );
    assert!(r.is_err());
    let mut xo = vec![SENTINEL as f64; T * K];
    let r = reference::expand(
        &cfg,
        &HostTensor::new(&e[..], Layout::dense(T, C)),
        &mut HostTensorMut::new(&mut xo[..], Layout::dense(T, K)),
    );
    assert!(matches!(r, Err(Error::Dtype { tensor: "x", expected: Dtype::F32, got: Dtype::F64 })), "{r:?}");
    assert!(out.iter().chain(&sout).chain(&xo).all(|&v| v == s));
    assert!(h.iter().all(|&v| v == SENTINEL));
}

#[test]
fn the_cpu_runner_names_the_input_and_its_expected_shape() {
    let mut rng = rng("the_cpu_runner_names_the_input_and_its_expected_shape");
    let cfg = Config::new(N, C);
    let mut ins = Named::new();
    ins.insert("x".into(), Array::new(vec![T, N, C], rng.normals(T * K, 1.0)));
    ins.insert("f".into(), Array::new(vec![T, C], rng.normals(T * C, 1.0)));
    ins.insert("h_post".into(), Array::new(vec![T, N], rng.uniforms(T * N, 0.0, 2.0)));
    ins.insert("h_res".into(), Array::new(vec![T, N, N], rng.uniforms(T * N * N, 0.0, 1.0)));
    CpuRunner.run(Stage::Post, &cfg, Dtype::F32, &ins).unwrap();
    let mut missing = ins.clone();
    missing.remove("h_res");
    match CpuRunner.run(Stage::Post, &cfg, Dtype::F32, &missing) {
        Err(Error::Shape { what: "h_res", expected, got }) => {
            assert!(expected.contains("[T, n=4, n=4]") && got == "missing", "{expected} {got}")
        }
        other => panic!("{other:?}"),
    }
    let mut wrong = ins.clone();
    wrong.insert("f".into(), Array::new(vec![T, C + 1], vec![0.0; T * (C + 1)]));
    match CpuRunner.run(Stage::Post, &cfg, Dtype::F32, &wrong) {
        Err(Error::Shape { what: "f", expected, got }) => {
            assert!(expected.contains("[3, 8]") && got == "[3, 9]", "{expected} {got}")
        }
        other => panic!("{other:?}"),
    }
    let mut extra = ins.clone();
    extra.insert("phi".into(), Array::new(vec![1], vec![0.0]));
    assert!(matches!(CpuRunner.run(Stage::Post, &cfg, Dtype::F32, &extra), Err(Error::Shape { what: "inputs", .. })));
    let mut lying = ins.clone();
    lying.get_mut("x").unwrap().data.pop();
    assert!(matches!(CpuRunner.run(Stage::Post, &cfg, Dtype::F32, &lying), Err(Error::Shape { what: "x", .. })));
    let mut nan = ins.clone();
    nan.get_mut("h_post").unwrap().data[2] = f64::NAN;
    assert!(matches!(
        CpuRunner.run(Stage::Post, &cfg, Dtype::Bf16, &nan),
        Err(Error::NonFinite { tensor: "h_post", index: 2 })
    ));
    assert!(matches!(
        CpuRunner.run(Stage::Post, &Config { n: 0, ..cfg }, Dtype::F32, &ins),
        Err(Error::Config { what: "n", .. })
    ));
}

#[test]
fn the_public_sinkhorn_helpers_return_errors_instead_of_panicking() {
    use mhc::reference::sinkhorn;
    let n = 4;
    let z: Vec<f64> = (0..n * n).map(|i| (i as f64 * 0.7).sin()).collect();
    let (dh, eps) = (vec![1.0; n * n], 1e-6);
    let mut h = vec![SENTINEL as f64; n * n];
    // Short and long slices, n out of range: an Err naming what is wrong, nothing written.
    for (zl, hl) in [(n * n - 1, n * n), (n * n, n * n - 1), (n * n, n * n + 1)] {
        let r = sinkhorn::forward(Formulation::Paper, 20, eps, &z[..zl], n, &mut vec![0.0; hl]);
        assert!(matches!(r, Err(Error::Shape { .. })), "{zl} {hl}: {r:?}");
    }
    let r = sinkhorn::forward(Formulation::DeepSeekV4, 20, eps, &z, 0, &mut h);
    assert!(matches!(r, Err(Error::Config { what: "n", .. })), "{r:?}");
    let r = sinkhorn::backward(Formulation::DeepSeekV4, 20, eps, &z, n, &dh[..3], &mut h);
    assert!(matches!(r, Err(Error::Shape { what: "dh", .. })), "{r:?}");
    let r = sinkhorn::backward(Formulation::Paper, 20, eps, &z, n, &dh, &mut h[..n]);
    assert!(matches!(r, Err(Error::Shape { what: "dz", .. })), "{r:?}");
    // iters and eps are bounded as in Config::validate, checked before any work: an unbounded
    // iteration count would allocate and run 2 x 4e9 steps.
    for iters in [0, mhc::config::MAX_SINKHORN_ITERS + 1, u32::MAX] {
        let r = sinkhorn::backward(Formulation::Paper, iters, eps, &z, n, &dh, &mut h);
        assert!(matches!(r, Err(Error::Config { what: "sinkhorn_iters", .. })), "{iters}: {r:?}");
    }
    for bad_eps in [0.0, -1.0, f64::NAN, 1e308] {
        let r = sinkhorn::forward(Formulation::Paper, 20, bad_eps, &z, n, &mut h);
        assert!(matches!(r, Err(Error::Config { what: "eps_hc", .. })), "{bad_eps}: {r:?}");
    }
    assert!(h.iter().all(|&v| v == SENTINEL as f64), "nothing written on an error");
    // The default configuration works, and so does the largest iteration count.
    sinkhorn::forward(Formulation::DeepSeekV4, Config::new(n, 8).sinkhorn_iters, eps, &z, n, &mut h).unwrap();
    sinkhorn::forward(Formulation::Paper, mhc::config::MAX_SINKHORN_ITERS, eps, &z, n, &mut h).unwrap();
    assert!(h.iter().all(|v| v.is_finite()));
}

#[test]
fn every_epsilon_is_bounded_so_that_outputs_stay_finite() {
    use mhc::config::{EPS_MAX, EPS_MIN};
    let mut rng = rng("every_epsilon_is_bounded_so_that_outputs_stay_finite");
    // The inputs that made the unbounded epsilons give NaN / infinity: an all-zero x (RMS of
    // zero), a row of logits 1e300 below the others (a Sinkhorn line that underflows to 0).
    let mut zero = Named::new();
    zero.insert("x".into(), Array::new(vec![1, 1, C], vec![0.0; C]));
    zero.insert("h_pre_logits".into(), Array::new(vec![1], vec![0.0]));
    zero.insert("h_post_logits".into(), Array::new(vec![1], vec![0.0]));
    zero.insert("h_res_logits".into(), Array::new(vec![1, 1], vec![0.0]));
    zero.insert("gamma".into(), Array::new(vec![C], vec![1.0; C]));
    // V4's softmax start underflows in a column of such logits, the paper's exp start in a row
    // (-1e300 is not an f32: f32 storage gets -1e30, which underflows as well).
    let sink = |f: Formulation, dtype: Dtype, rng: &mut mhc::reference::testing::Rng| {
        let low = if dtype == Dtype::F64 { -1e300 } else { -1e30 };
        let mut logits = rng.normals(N * N, 1.0);
        for k in 0..N {
            logits[if f == Formulation::Paper { k } else { k * N }] = low;
        }
        let mut named = Named::new();
        named.insert("logits".into(), Array::new(vec![1, N, N], logits));
        named
    };
    for (field, bad) in [("eps_f", 0.0), ("eps_hc", 0.0), ("eps_hc", 1e308), ("eps_norm", 0.0), ("eps_f", 2.0)] {
        let mut cfg = Config::new(1, C);
        match field {
            "eps_f" => cfg.eps_f = bad,
            "eps_hc" => cfg.eps_hc = bad,
            _ => cfg.eps_norm = bad,
        }
        let r = CpuRunner.run(Stage::Static, &cfg, Dtype::F64, &zero);
        match r {
            Err(Error::Config { what, reason }) => {
                assert_eq!(what, field);
                assert!(reason.contains("[1e-20, 1]"), "{reason}");
            }
            other => panic!("{field} = {bad}: {other:?}"),
        }
    }
    // At both ends of the range every output is finite.
    for eps in [EPS_MIN, EPS_MAX] {
        let cfg = Config { eps_norm: eps, eps_hc: eps, eps_f: eps, ..Config::new(1, C) };
        let out = CpuRunner.run(Stage::Static, &cfg, Dtype::F64, &zero).unwrap();
        assert!(out["out"].data.iter().all(|v| v.is_finite()), "static, eps {eps}");
        for f in [Formulation::DeepSeekV4, Formulation::Paper] {
            let cfg = Config { eps_hc: eps, ..Config::new(N, 1) }.with_formulation(f);
            for dtype in [Dtype::F64, Dtype::F32] {
                let out = CpuRunner.run(Stage::Sinkhorn, &cfg, dtype, &sink(f, dtype, &mut rng)).unwrap();
                assert!(out["h_res"].data.iter().all(|v| v.is_finite()), "{f:?} {dtype} eps {eps}");
            }
        }
    }
}

#[test]
fn non_finite_activations_propagate_and_parameters_are_refused() {
    let mut rng = rng("non_finite_activations_propagate_and_parameters_are_refused");
    let cfg = Config::new(N, C);
    let sig = mhc::runner::signature(Stage::PostBackward, &cfg);
    let mut ins = mhc::runner::random_inputs(Stage::PostBackward, &cfg, T, 0.02, &mut rng);
    // NaN in an activation (x) and in a gradient (dout): no error, NaN where it reaches.
    ins.get_mut("x").unwrap().data[0] = f64::NAN;
    ins.get_mut("dout").unwrap().data[1] = f64::INFINITY;
    mhc::runner::check_finite(&sig, &ins).unwrap();
    let out = CpuRunner.run(Stage::PostBackward, &cfg, Dtype::F64, &ins).unwrap();
    assert!(out["dh_res"].data.iter().any(|v| v.is_nan()), "NaN in, NaN out");
    // In a coefficient: refused, naming it, by the policy and by the runner.
    ins.get_mut("h_res").unwrap().data[5] = f64::NAN;
    let want = |r: mhc::Result<()>| matches!(r, Err(Error::NonFinite { tensor: "h_res", index: 5 }));
    assert!(want(mhc::runner::check_finite(&sig, &ins)));
    assert!(want(CpuRunner.run(Stage::PostBackward, &cfg, Dtype::F64, &ins).map(drop)));
    // Which inputs the policy checks, stage by stage: parameters and coefficients only.
    for stage in Stage::ALL {
        let sig = mhc::runner::signature(stage, &Config { gamma_k: true, gamma_f: true, ..cfg });
        for p in &sig.inputs {
            let checked = ["phi", "scale", "base", "gamma_k", "gamma_f", "gamma", "h_post", "h_res", "logits"]
                .contains(&p.name)
                || p.name.ends_with("_logits");
            assert_eq!(p.must_be_finite(), checked, "{stage} {}", p.name);
        }
    }
}
