//! GPU tests of `pre` and `post_pre` (asm/ptx/sm90/pre.ptx, pre_decode.ptx) against the f64 reference: fresh
//! random inputs every run (seed printed, `MHC_TEST_SEED` replays), activations rounded to the
//! storage dtype before the reference sees them, every output poisoned with NaN before each
//! launch; both formulations, both dtypes, n in {1..32}, the decode (split) and prefill shapes,
//! strided rows, gamma_k / gamma_f, determinism, CUDA-graph capture of 100 calls, and inputs the
//! op must refuse before launching, and a residual of more than 2^31 elements. The GPU tests are
//! ignored without a GPU (the reason printed); tools/gpu-tests.sh runs them on one, skipping none.
//!
//! `bench_pre` (ignored by default; `--ignored`) times the general kernel at the shapes of
//! docs/kernels/pre.md; `bench_pre_decode` times the decode kernel (asm/ptx/sm90/pre_decode.ptx)
//! against it at T <= 16, with a Sinkhorn and CTA-count attribution.

mod common;

use common::{PostCase, PreCase, PreOut};
use half::bf16;
use mhc::device::cuda::runner::{download, nan_pattern, upload};
use mhc::device::cuda::{
    CudaDevice, DeviceBuffer, Event, Overlap, Plan, PostInViews, PreKernel, PreOutViews, PreParamViews, PreVariant,
    Stream, Workspace,
};
use mhc::reference::{self, PostInputs};
use mhc::{Config, Dtype, Error, Formulation, HostTensor, HostTensorMut, Layout, Tuning};

fn gpu() -> Option<CudaDevice> {
    match CudaDevice::new(0) {
        Ok(d) => Some(d),
        Err(e) => common::no_gpu(&e),
    }
}

fn f32s(v: &[f64]) -> Vec<f64> {
    v.iter().map(|&x| x as f32 as f64).collect()
}

/// The case with activations in `dtype` and parameters in f32, as the device stores them.
fn stored(mut case: PreCase, dtype: Dtype) -> PreCase {
    case.x = case.x.iter().map(|&v| dtype.round(v)).collect();
    case.phi = f32s(&case.phi);
    case.scale = f32s(&case.scale);
    case.base = f32s(&case.base);
    case.gamma_k = case.gamma_k.as_deref().map(f32s);
    case.gamma_f = case.gamma_f.as_deref().map(f32s);
    case
}

/// Device copies of a case's inputs; `x` rows `x_stride` elements apart (>= n*C).
struct DevIn {
    x: DeviceBuffer,
    x_layout: Layout,
    phi: DeviceBuffer,
    scale: DeviceBuffer,
    base: DeviceBuffer,
    gamma_k: Option<DeviceBuffer>,
    gamma_f: Option<DeviceBuffer>,
}

fn strided(data: &[f64], t: usize, row: usize, stride: usize, fill: f64) -> Vec<f64> {
    let mut v = vec![fill; if t == 0 { 0 } else { (t - 1) * stride + row }];
    for r in 0..t {
        v[r * stride..r * stride + row].copy_from_slice(&data[r * row..(r + 1) * row]);
    }
    v
}

fn dev_in(dev: &CudaDevice, case: &PreCase, dtype: Dtype, x_stride: usize) -> DevIn {
    let (t, k) = (case.t, case.cfg.k());
    // Padding between rows holds huge values: reading it would show in the results.
    let xs = strided(&case.x, t, k, x_stride, 1e30);
    DevIn {
        x: upload(dev, dtype, &xs).unwrap(),
        x_layout: Layout::dense(t, k).with_stride(x_stride),
        phi: upload(dev, Dtype::F32, &case.phi).unwrap(),
        scale: upload(dev, Dtype::F32, &case.scale).unwrap(),
        base: upload(dev, Dtype::F32, &case.base).unwrap(),
        gamma_k: case.gamma_k.as_ref().map(|g| upload(dev, Dtype::F32, g).unwrap()),
        gamma_f: case.gamma_f.as_ref().map(|g| upload(dev, Dtype::F32, g).unwrap()),
    }
}

impl DevIn {
    fn params(&self, cfg: &Config) -> PreParamViews<'_> {
        let (k, m, c) = (cfg.k(), cfg.m(), cfg.c);
        PreParamViews {
            phi: self.phi.view(Dtype::F32, Layout::dense(m, k)),
            scale: self.scale.view(Dtype::F32, Layout::dense(1, 3)),
            base: self.base.view(Dtype::F32, Layout::dense(1, m)),
            gamma_k: self.gamma_k.as_ref().map(|g| g.view(Dtype::F32, Layout::dense(1, k))),
            gamma_f: self.gamma_f.as_ref().map(|g| g.view(Dtype::F32, Layout::dense(1, c))),
        }
    }
}

/// Output buffers; `a`/`y` rows `a_stride` apart.
struct DevOut {
    a: DeviceBuffer,
    y: Option<DeviceBuffer>,
    h_pre: DeviceBuffer,
    h_post: DeviceBuffer,
    h_res: DeviceBuffer,
    inv: DeviceBuffer,
    a_stride: usize,
}

fn alloc_out(dev: &CudaDevice, cfg: &Config, dtype: Dtype, t: usize, a_stride: usize) -> DevOut {
    let (n, c) = (cfg.n, cfg.c);
    let rows = |len: usize| DeviceBuffer::alloc(dev, (len.max(1) * dtype.size()).div_ceil(4) * 4).unwrap();
    let f = |len: usize| DeviceBuffer::alloc(dev, len.max(1) * 4).unwrap();
    let alen = if t == 0 { 0 } else { (t - 1) * a_stride + c };
    DevOut {
        a: rows(alen),
        y: cfg.gamma_f.then(|| rows(alen)),
        h_pre: f(t * n),
        h_post: f(t * n),
        h_res: f(t * n * n),
        inv: f(t),
        a_stride,
    }
}

impl DevOut {
    fn poison(&self, s: &Stream, dtype: Dtype) {
        self.a.fill_u32(s, nan_pattern(dtype)).unwrap();
        if let Some(y) = &self.y {
            y.fill_u32(s, nan_pattern(dtype)).unwrap();
        }
        for b in [&self.h_pre, &self.h_post, &self.h_res, &self.inv] {
            b.fill_u32(s, nan_pattern(Dtype::F32)).unwrap();
        }
    }
    fn views(&mut self, cfg: &Config, dtype: Dtype, t: usize) -> PreOutViews<'_> {
        let (n, c) = (cfg.n, cfg.c);
        let al = Layout::dense(t, c).with_stride(self.a_stride);
        PreOutViews {
            a: self.a.view_mut(dtype, al),
            y: self.y.as_mut().map(|y| y.view_mut(dtype, al)),
            h_pre: self.h_pre.view_mut(Dtype::F32, Layout::dense(t, n)),
            h_post: self.h_post.view_mut(Dtype::F32, Layout::dense(t, n)),
            h_res: self.h_res.view_mut(Dtype::F32, Layout::dense(t, n * n)),
            inv_rms: self.inv.view_mut(Dtype::F32, Layout::dense(t, 1)),
        }
    }
    /// Outputs as dense f64 (a / y rows unstrided).
    fn read(&self, cfg: &Config, dtype: Dtype, t: usize) -> PreOut {
        let (n, c) = (cfg.n, cfg.c);
        let alen = if t == 0 { 0 } else { (t - 1) * self.a_stride + c };
        let unstride = |v: Vec<f64>| -> Vec<f64> {
            (0..t).flat_map(|r| v[r * self.a_stride..r * self.a_stride + c].to_vec()).collect()
        };
        PreOut {
            a: unstride(download(&self.a, dtype, alen).unwrap()),
            y: self.y.as_ref().map(|y| unstride(download(y, dtype, alen).unwrap())).unwrap_or_default(),
            h_pre: download(&self.h_pre, Dtype::F32, t * n).unwrap(),
            h_post: download(&self.h_post, Dtype::F32, t * n).unwrap(),
            h_res: download(&self.h_res, Dtype::F32, t * n * n).unwrap(),
            inv_rms: download(&self.inv, Dtype::F32, t).unwrap(),
        }
    }
    /// Raw bits of every output (determinism).
    fn bits(&self) -> Vec<Vec<u8>> {
        let mut v = vec![self.a.to_vec::<u8>().unwrap()];
        if let Some(y) = &self.y {
            v.push(y.to_vec::<u8>().unwrap());
        }
        for b in [&self.h_pre, &self.h_post, &self.h_res, &self.inv] {
            v.push(b.to_vec::<u8>().unwrap());
        }
        v
    }
}

fn rel_l2(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
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

fn max_abs_diff(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).fold(0.0f64, |m, (g, w)| if (g - w).is_nan() { f64::INFINITY } else { m.max((g - w).abs()) })
}

/// docs/math.md tolerances: activations rel L2, coefficients max abs. Every output is measured
/// before failing, and the failure shows all of them with the first values.
/// With `cond` (phi ~ 0.5 cases, see [`conditioning`]): the `h_res` rows of ill-conditioned
/// tokens are left out, and a coefficient output may be off by up to 3x what the f32
/// evaluation of the reference is off on the same tokens, where that exceeds the tolerance.
fn compare_skip(label: &str, dtype: Dtype, got: &PreOut, want: &PreOut, cond: Option<&Conditioning>) {
    let (act_tol, coef_tol): (f64, f64) = if dtype == Dtype::F32 { (1e-5, 1e-5) } else { (1e-2, 1e-3) };
    let skip: &[bool] = cond.map_or(&[], |c| &c.skip_hres);
    let keep = |v: &[f64]| -> Vec<f64> {
        if skip.iter().any(|&s| s) {
            let nn = v.len() / skip.len();
            v.chunks(nn).zip(skip).filter(|(_, &s)| !s).flat_map(|(c, _)| c.to_vec()).collect()
        } else {
            v.to_vec()
        }
    };
    let (got_hres, want_hres) = (keep(&got.h_res), keep(&want.h_res));
    let slack = |i: usize| cond.map_or(coef_tol, |c| coef_tol.max(3.0 * c.f32_err[i]));
    let a_tol = cond.map_or(act_tol, |c| act_tol.max(3.0 * c.f32_a_err));
    let outs = [
        ("a", &got.a, &want.a, a_tol, true),
        ("y", &got.y, &want.y, act_tol, true),
        ("h_pre", &got.h_pre, &want.h_pre, slack(0), false),
        ("h_post", &got.h_post, &want.h_post, slack(1), false),
        ("h_res", &got_hres, &want_hres, slack(2), false),
        ("inv_rms", &got.inv_rms, &want.inv_rms, slack(3), false),
    ];
    let mut bad = Vec::new();
    let mut report = String::new();
    for (name, g, w, tol, rel) in outs {
        let e = if let Some(i) = g.iter().position(|v| !v.is_finite()) {
            report += &format!("\n  {name}[{i}] not written (NaN)");
            f64::INFINITY
        } else if rel {
            // Activations: the relative L2 tolerance and every element within a few storage
            // rounding steps (tests/common `elementwise_ratio`).
            let (ratio, i) = common::elementwise_ratio(g, w, dtype);
            if ratio > 1.0 {
                report += &format!("\n  {name}[{i}]: got {} want {} ({ratio:.2}x the element bound)", g[i], w[i]);
                f64::INFINITY
            } else {
                rel_l2(g, w)
            }
        } else {
            max_abs_diff(g, w)
        };
        let head = |v: &[f64]| v.iter().take(4).map(|x| format!("{x:.6}")).collect::<Vec<_>>().join(", ");
        report += &format!("\n  {name}: err {e:.3e} (tol {tol:.1e}) got [{}] want [{}]", head(g), head(w));
        if e > tol {
            bad.push(name);
        }
    }
    if cond.is_some() || std::env::var_os("MHC_REPORT_ERRORS").is_some() {
        eprintln!("{label}: errors vs allowed:{report}");
    }
    assert!(bad.is_empty(), "{label}: {bad:?} out of tolerance{report}");
}

struct Shape {
    n: usize,
    c: usize,
    t: usize,
    form: Formulation,
    dtype: Dtype,
    phi_std: f64,
    gamma_k: bool,
    gamma_f: bool,
    x_pad: usize,
    split: Option<usize>,
    /// Force the decode kernel over about this many CTAs.
    ctas: Option<usize>,
    /// Split prefill tiles pre-mixed by all their CTAs (PreVariant::claim).
    claim: bool,
    /// The general K loop where the fast one would run (PreVariant::fast_k = false).
    general_k: bool,
    /// The GEMM kernel at any T (PreKernel::Gemm).
    gemm: bool,
    /// The persistent-cluster kernel on at most this many clusters (PreKernel::Clusters).
    clusters: Option<usize>,
}

impl Shape {
    fn new(n: usize, c: usize, t: usize, form: Formulation, dtype: Dtype) -> Self {
        Shape {
            n,
            c,
            t,
            form,
            dtype,
            phi_std: 0.02,
            gamma_k: false,
            gamma_f: false,
            x_pad: 0,
            split: None,
            ctas: None,
            claim: false,
            general_k: false,
            gemm: false,
            clusters: None,
        }
    }
    fn cfg(&self) -> Config {
        Config {
            gamma_k: self.gamma_k,
            gamma_f: self.gamma_f,
            ..Config::new(self.n, self.c).with_formulation(self.form)
        }
    }
    fn label(&self) -> String {
        format!(
            "n={} C={} T={} {} {} phi~{} gk={} gf={} pad={} split={:?} ctas={:?} claim={} general_k={} clusters={:?}",
            self.n,
            self.c,
            self.t,
            self.dtype,
            self.form,
            self.phi_std,
            self.gamma_k,
            self.gamma_f,
            self.x_pad,
            self.split,
            self.ctas,
            self.claim,
            self.general_k,
            self.clusters,
        )
    }
}

/// What f32 arithmetic can achieve on a phi ~ 0.5 case, from an f32 evaluation of the
/// reference (exact inputs, f32 arithmetic, sequential sums). With phi ~ 0.5 N(0,1) the logits
/// reach |z| ~ 100: (1) some tokens' Sinkhorn amplifies a 1e-7 relative change of a logit into
/// large changes of `h_res` (entries near eps_hc); no f32 kernel can match f64 there (measured:
/// one bf16 token of 1000 off by 0.86 while its logits matched to 1e-5): `skip_hres` marks the
/// tokens where 3x the f32 reference's `h_res` error exceeds the tolerance (a kernel sums in
/// another order than the sequential f32 reference; an H200 run had one token's `h_res` 1.02e-5
/// off where the f32 reference was within 1e-5), and the others may be off by 3x the worst error
/// the f32 reference has on a token within the tolerance; (2) f32 sums of K = 16384
/// terms of size ~0.5 alone put `h_pre` / `h_post` ~2e-5 off on some tokens (measured on the CPU
/// reference: 5-10 of 200 tokens over 1e-5 at n = 4, C = 4096; on an H100 run 125 of 1000):
/// `f32_err` is the f32 reference's worst error on `h_pre`, `h_post`, `h_res` (its tokens
/// within the tolerance) and `inv_rms`. The f32 reference runs twice, the second time with phi
/// moved by one f32 ulp: one draw of f32 rounding can miss a token's sensitivity (an H200 run had
/// a token's `h_res` 2.3e-5 off where that draw was 3.1e-6 off on every compared token). Checks
/// that at least a quarter of the tokens still have their `h_res` compared.
struct Conditioning {
    skip_hres: Vec<bool>,
    f32_err: [f64; 4],
    /// The f32 reference's relative L2 error in `a` (where every h_pre of a token sits in the
    /// sigmoid's exponential tail, as the Paper's can at phi ~ 0.5, `a`'s relative error is the
    /// logit's absolute one).
    f32_a_err: f64,
}

fn conditioning(case: &PreCase, want: &PreOut, dtype: Dtype, label: &str) -> Conditioning {
    let (cfg, t) = (case.cfg, case.t);
    let tol = if dtype == Dtype::F32 { 1e-5 } else { 1e-3 };
    // Two f32 evaluations: of the inputs, and of phi moved by one f32 ulp in a fixed +/- pattern
    // (another rounding of the same sums: a token's sensitivity is seen in either draw).
    let f32_eval = |phi: Option<Vec<f64>>| {
        let moved;
        let case = match phi {
            Some(phi) => {
                moved = PreCase { phi, ..case.clone() };
                &moved
            }
            None => case,
        };
        let mut f = PreOut::poisoned(&cfg, t);
        reference::pre::<f32>(&cfg, &case.x(), &case.params(), &mut f.views(&cfg, t)).unwrap();
        f
    };
    let ulp_moved: Vec<f64> = case
        .phi
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let b = (v as f32).to_bits();
            let up = (i.wrapping_mul(0x9e37_79b9) >> 7) & 1 == 1;
            f64::from(f32::from_bits(if v == 0.0 {
                b
            } else if up {
                b + 1
            } else {
                b - 1
            }))
        })
        .collect();
    let evals = [f32_eval(None), f32_eval(Some(ulp_moved))];
    let nn = cfg.n * cfg.n;
    let row_err = |r: usize| {
        evals
            .iter()
            .map(|f| max_abs_diff(&f.h_res[r * nn..(r + 1) * nn], &want.h_res[r * nn..(r + 1) * nn]))
            .fold(0.0, f64::max)
    };
    let skip_hres: Vec<bool> = (0..t).map(|r| 3.0 * row_err(r) > tol).collect();
    // The slack's scale: the worst f32 error on any token within the tolerance, compared or not.
    let hres_err = (0..t).map(row_err).filter(|&e| e <= tol).fold(0.0f64, common::nan_max);
    let worst =
        |out: fn(&PreOut) -> &Vec<f64>| evals.iter().map(|f| max_abs_diff(out(f), out(want))).fold(0.0, f64::max);
    // h_pre = sigma(z) (+ eps_hc) and h_post = 2 sigma(z') come from the same kind of sums (phi
    // rows 0..n and n..2n over the same x), so their f32 errors are one sample: pooled, h_post's
    // scaled by its factor 2 (one run's f32 reference erred 4.6e-6 on h_pre and 6.0e-5 on h_post).
    let sigmoid_err = worst(|o| &o.h_pre).max(worst(|o| &o.h_post) / 2.0);
    let f32_err = [sigmoid_err, 2.0 * sigmoid_err, hres_err, worst(|o| &o.inv_rms)];
    let f32_a_err = evals.iter().map(|f| rel_l2(&f.a, &want.a)).fold(0.0, f64::max);
    let bad = skip_hres.iter().filter(|&&m| m).count();
    let [e_pre, e_post, e_res, e_rms] = f32_err;
    eprintln!(
        "{label}: {bad} of {t} tokens ill-conditioned (h_res not compared); f32 reference errors h_pre {e_pre:.1e} \
         h_post {e_post:.1e} h_res {e_res:.1e} inv_rms {e_rms:.1e} a {f32_a_err:.1e} (relative)"
    );
    // At most three quarters of the tokens may be skipped; a single token may be (at n = 4 about
    // 1.3% of phi ~ 0.5 tokens are, measured over 20,000 on the H100: asserting on T = 1 made the
    // test flaky; n = 8 in the paper formulation skips about half, 5 of 9 in two of four runs).
    assert!(bad * 4 <= 3 * t.max(2), "{label}: {bad} of {t} tokens ill-conditioned: the case tests too little");
    Conditioning { skip_hres, f32_err, f32_a_err }
}

/// Runs `pre` for one shape on fresh inputs and checks it against the reference.
fn check_pre(dev: &CudaDevice, stream: &Stream, rng: &mut reference::testing::Rng, sh: &Shape) {
    check_pre_kernel(dev, stream, rng, sh, None)
}

/// A plan with the catalogue's own choices (the cost model, no tuned table): these tests exercise
/// each kernel family where the catalogue selects it; the embedded tuned table's overrides are
/// checked by the plan's unit tests and by `planned_kernels_match_the_plan`. `MHC_TEST_OVERLAP`
/// = `weights` or `off` gives the plan that launch overlap (the default `Launch` otherwise), so
/// the shape and sanitizer tests can run the weights-early path too.
fn catalogue_plan(dev: &CudaDevice, cfg: Config, dtype: Dtype, max_tokens: usize) -> mhc::Result<Plan> {
    let plan = Plan::with_tuning(dev, cfg, dtype, max_tokens, &Tuning::CostModel)?;
    Ok(match std::env::var("MHC_TEST_OVERLAP").as_deref() {
        Ok("weights") => plan.with_overlap(Overlap::Weights),
        Ok("off") => plan.with_overlap(Overlap::Off),
        _ => plan,
    })
}

/// [`check_pre`], also asserting which kernel `pre` selected (`Some(true)`: a few-token kernel:
/// the decode, mid or logit-cluster kernel).
fn check_pre_kernel(
    dev: &CudaDevice,
    stream: &Stream,
    rng: &mut reference::testing::Rng,
    sh: &Shape,
    decode: Option<bool>,
) {
    let cfg = sh.cfg();
    let t = sh.t;
    let case = stored(PreCase::random(rng, cfg, t, sh.phi_std), sh.dtype);
    let want = case.forward();
    let plan = catalogue_plan(dev, cfg, sh.dtype, t.max(1)).unwrap();
    if let Some(want) = decode {
        let few = plan.pre_uses_decode_kernel(t) || plan.pre_uses_mid_kernel(t) || plan.pre_uses_logit_clusters(t);
        assert_eq!(few, want, "{}: a few-token kernel selected?", sh.label());
    }
    let ws = plan.new_workspace().unwrap();
    let din = dev_in(dev, &case, sh.dtype, cfg.k() + sh.x_pad);
    let mut out = alloc_out(dev, &cfg, sh.dtype, t, cfg.c + sh.x_pad);
    out.poison(stream, sh.dtype);
    let x = din.x.view(sh.dtype, din.x_layout);
    let params = din.params(&cfg);
    {
        let mut views = out.views(&cfg, sh.dtype, t);
        let tuning = PreVariant { claim: sh.claim, prefetch: true, fast_k: !sh.general_k, ..Default::default() };
        let kernel = if let Some(clusters) = sh.clusters {
            PreKernel::Clusters { clusters }
        } else {
            match (sh.split, sh.ctas, sh.claim || sh.general_k) {
                _ if sh.gemm => PreKernel::Gemm { splits: None },
                (split, _, true) => PreKernel::General { split, tuning: Some(tuning) },
                (Some(s), _, false) => PreKernel::General { split: Some(s), tuning: None },
                (None, Some(ctas), false) => PreKernel::Decode { ctas },
                (None, None, false) => PreKernel::Auto,
            }
        };
        plan.pre_with(stream, &ws, &x, &params, &mut views, kernel).unwrap_or_else(|e| panic!("{}: {e}", sh.label()));
    }
    stream.synchronize().unwrap_or_else(|e| panic!("{}: {e}", sh.label()));
    let got = out.read(&cfg, sh.dtype, t);
    let cond = (sh.phi_std >= 0.5).then(|| conditioning(&case, &want, sh.dtype, &sh.label()));
    compare_skip(&sh.label(), sh.dtype, &got, &want, cond.as_ref());
    eprintln!("ok  pre {}", sh.label());
}

const NS: [usize; 6] = [1, 2, 4, 8, 16, 32];
const FORMS: [Formulation; 2] = [Formulation::DeepSeekV4, Formulation::Paper];
const DTYPES: [Dtype; 2] = [Dtype::Bf16, Dtype::F32];

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_every_n_both_formulations_both_dtypes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_every_n");
    for dtype in DTYPES {
        for form in FORMS {
            for n in NS {
                for (t, c) in [(1, 64), (3, 64), (17, 1280), (64, 64), (1000, 64)] {
                    check_pre(&dev, &stream, &mut rng, &Shape::new(n, c, t, form, dtype));
                }
            }
        }
    }
}

/// n >= 8 on the general kernel's wide launch shapes (logit groups sliced over the CTAs of a
/// K split, decode and few-tile prefill) and the register Sinkhorn: docs/math.md's C = 1280 sizes,
/// both formulations, gamma_k, strided rows, a forced K split (one group slice) beside them.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_wide_n_launch_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_wide_n");
    for dtype in DTYPES {
        for form in FORMS {
            for (n, t) in [(8, 1), (8, 16), (8, 64), (8, 300), (16, 5), (32, 1), (32, 16), (32, 40)] {
                check_pre(&dev, &stream, &mut rng, &Shape::new(n, 1280, t, form, dtype));
            }
            let opts = Shape { gamma_k: true, x_pad: 8, ..Shape::new(8, 1280, 7, form, dtype) };
            check_pre(&dev, &stream, &mut rng, &opts);
            check_pre(&dev, &stream, &mut rng, &Shape { phi_std: 0.5, ..Shape::new(8, 1280, 31, form, dtype) });
            check_pre(&dev, &stream, &mut rng, &Shape { split: Some(5), ..Shape::new(32, 1280, 3, form, dtype) });
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_n4_math_sizes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_n4_math_sizes");
    for dtype in DTYPES {
        for form in FORMS {
            for t in [1, 2, 3, 17, 64, 1000] {
                for c in [1280, 4096, 7168] {
                    check_pre(&dev, &stream, &mut rng, &Shape::new(4, c, t, form, dtype));
                }
            }
            check_pre(&dev, &stream, &mut rng, &Shape { phi_std: 0.5, ..Shape::new(4, 4096, 17, form, dtype) });
            check_pre(&dev, &stream, &mut rng, &Shape { phi_std: 0.5, ..Shape::new(4, 4096, 1000, form, dtype) });
            check_pre(&dev, &stream, &mut rng, &Shape { phi_std: 0.5, ..Shape::new(8, 1280, 64, form, dtype) });
        }
        check_pre(&dev, &stream, &mut rng, &Shape::new(4, 4096, 8192, Formulation::DeepSeekV4, dtype));
    }
}

/// The decode-sized shapes (asm/ptx/sm90/pre_decode.ptx): T in {1, 2, 3, 5, 9, 16} (every token
/// class of phase 2), n in {1, 2, 3, 4}, C in {64, 72, 1280, 1288, 4096, 7168}, both
/// formulations and dtypes, phi ~ 0.02 and ~ 0.5, strided x and a, gamma_k. A few-token kernel
/// runs each: the logit clusters at n = 4 up to 16 tokens where C is a multiple of 128, the mid
/// entry elsewhere where C >= 512, the decode entry at C < 512 and with forced CTA counts (64,
/// 100, 132 at C = 4096; 20 at C = 1280); n = 8 above 32 tokens and gamma_f keep the general
/// kernel.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_decode_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_decode");
    for dtype in DTYPES {
        for form in FORMS {
            for (n, c, t) in [
                (4, 4096, 1),
                (4, 4096, 2),
                (4, 4096, 3),
                (4, 4096, 5),
                (4, 4096, 9),
                (4, 4096, 16),
                (4, 7168, 1),
                (4, 7168, 16),
                (4, 1280, 4),
                (4, 64, 16),
                (4, 72, 3),
                (4, 1288, 7),
                (1, 64, 1),
                (1, 4096, 16),
                (2, 1280, 2),
                (2, 7168, 13),
                (3, 1280, 6),
            ] {
                check_pre_kernel(&dev, &stream, &mut rng, &Shape::new(n, c, t, form, dtype), Some(true));
            }
            for (n, c, t) in [(4, 4096, 1), (4, 7168, 16), (2, 1280, 3)] {
                let sh = Shape { phi_std: 0.5, ..Shape::new(n, c, t, form, dtype) };
                check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(true));
            }
            for (n, c, t) in [(4, 1288, 5), (4, 4096, 16), (1, 72, 2)] {
                let sh = Shape { x_pad: 24, ..Shape::new(n, c, t, form, dtype) };
                check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(true));
            }
            for (n, c, t) in [(4, 4096, 3), (2, 1288, 16)] {
                let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(n, c, t, form, dtype) };
                check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(true));
            }
            for ctas in [64, 100, 132] {
                let sh = Shape { ctas: Some(ctas), ..Shape::new(4, 4096, 16, form, dtype) };
                check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(true));
            }
            let sh = Shape { ctas: Some(20), ..Shape::new(4, 1280, 1, form, dtype) };
            check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(true));
            // The general kernel keeps what the few-token kernels do not cover (n = 8: past 32
            // tokens).
            check_pre_kernel(&dev, &stream, &mut rng, &Shape::new(8, 1280, 33, form, dtype), Some(false));
            let sh = Shape { gamma_f: true, ..Shape::new(4, 4096, 2, form, dtype) };
            check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(false));
        }
    }
    // Too few CTAs for C (more than 64 channels each): refused before the launch.
    assert_ctas_refused(&dev, &stream, &mut rng, 4096, 2, 8);
}

/// Whether bf16 `pre` at n = 4, C = `c`, `t` tokens runs the logit clusters' wide entry: C a
/// multiple of 128 in 512..=8192, from 17 tokens up to C = 5120 (where `post_pre` runs its fold
/// from 17 too), from 33 above, to 64.
fn runs_wide(c: usize, t: usize) -> bool {
    c % 128 == 0 && (512..=8192).contains(&c) && t <= 64 && (t > 32 || (t > 16 && c <= 5120))
}

/// Whether bf16 `post_pre` at n = 4, C = `c`, `t` tokens runs the wide entry's fold (one launch):
/// where `pre` runs the wide entry, to 48 tokens and C = 7168.
fn folds_wide(c: usize, t: usize) -> bool {
    runs_wide(c, t) && t <= 48 && c <= 7168
}

/// A `pre` call at C = `c`, `t` tokens, forced onto about `ctas` CTAs that cannot serve it:
/// `Err(Shape "ctas")`, and nothing was written (outputs still poisoned).
fn assert_ctas_refused(
    dev: &CudaDevice,
    stream: &Stream,
    rng: &mut reference::testing::Rng,
    c: usize,
    t: usize,
    ctas: usize,
) {
    let cfg = Config::new(4, c);
    let mut r = ready(dev, rng, cfg, Dtype::Bf16, t, 1);
    r.out.poison(stream, Dtype::Bf16);
    let e = r.launch_mode(stream, 0, Mode::Decode(ctas));
    assert!(matches!(e, Err(Error::Shape { what: "ctas", .. })), "T={t} ctas={ctas}: {e:?}");
    stream.synchronize().unwrap();
    assert!(r.out.read(&cfg, Dtype::Bf16, t).h_pre.iter().all(|v| v.is_nan()), "T={t}: refused call wrote");
}

/// The mid kernel (asm/ptx/sm90/pre_decode.ptx, `mhc_pre_mid_*`) at the shapes it is selected
/// for: T in 1..=64 (token classes, both 32-token FMA passes, partial passes; at n = 4 and C a
/// multiple of 128 below 17 tokens the logit clusters run, and bf16 runs their wide entry from 17
/// to 64 tokens (from 33 above C = 5120), so those bf16 cases take the C next to it), n in
/// {1, 2, 3, 4}, C in {512, 520, 1280, 1288, 4096, 4104, 7168}, both formulations and dtypes,
/// phi ~ 0.5, strided x and a, gamma_k, forced CTA counts; and that C < 512, n = 8, gamma_f and
/// T = 65 keep the other kernels, and that fewer CTAs than tokens are refused before the launch.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_mid_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_mid");
    for dtype in DTYPES {
        for form in FORMS {
            let mut shapes = Vec::new();
            for (n, c, t) in [
                (4, 4096, 17),
                (4, 4096, 32),
                (4, 4096, 33),
                (4, 4096, 64),
                (4, 7168, 24),
                (4, 7168, 64),
                (4, 512, 64),
                (4, 1280, 40),
                (4, 1288, 57),
                (1, 4096, 64),
                (2, 1280, 20),
                (3, 7168, 48),
                (4, 4104, 1),
                (4, 7168, 17),
                (4, 520, 8),
                (2, 1280, 3),
            ] {
                shapes.push(Shape::new(n, c, t, form, dtype));
            }
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 4096, 64, form, dtype) });
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 7168, 33, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 1288, 50, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 4096, 40, form, dtype) });
            shapes.push(Shape { ctas: Some(64), ..Shape::new(4, 4096, 64, form, dtype) });
            shapes.push(Shape { ctas: Some(120), ..Shape::new(4, 7168, 30, form, dtype) });
            // bf16 n = 4 at C a multiple of 128 from 17 tokens (33 above C = 7168): the logit
            // clusters' wide entry (pre_lc_kernel_shapes); the mid kernel at the C next to it
            // (below it where a forced CTA count needs C / CTAs <= 64).
            for sh in shapes.iter_mut() {
                if dtype == Dtype::Bf16 && sh.n == 4 && runs_wide(sh.c, sh.t) {
                    sh.c = if sh.c > 512 { sh.c - 8 } else { sh.c + 8 };
                }
            }
            shapes.push(Shape { ctas: Some(70), ..Shape::new(3, 4096, 64, form, dtype) });
            let others = [
                Shape::new(4, 256, 40, form, dtype),
                Shape::new(8, 1280, 40, form, dtype),
                Shape { gamma_f: true, ..Shape::new(4, 4096, 40, form, dtype) },
                Shape::new(4, 4096, 65, form, dtype),
            ];
            check_where_selected(&dev, &stream, &mut rng, "mhc_pre_mid", &shapes, &others);
        }
    }
    // Fewer CTAs than tokens (CTA s finishes token s): refused before the launch (C = 4104,
    // T = 32: the mid kernel's range in either dtype).
    assert_ctas_refused(&dev, &stream, &mut rng, 4104, 32, 16);
}

/// The mid_n8 entries (pre_decode.ptx `mhc_pre_mid_n8_sm90_*`: the mid16 kernel for n = 8; and
/// `mhc_pre_mid32_n8_sm90_*`, the same in 32 token rows) where the catalogue selects them (n = 8,
/// no gamma_f, C = 512 ..= 32 x SMs, T = 1..16 and 17..32): within the reference's tolerances at
/// T = 1, odd T, 16, 17 and 32, C not a power of two and not a multiple of the CTAs' channels,
/// phi ~ 0.5, gamma_k, strided rows, forced CTA counts, both formulations and dtypes; and that
/// T = 33, C < 512, C past 32 channels a CTA and gamma_f keep the general kernel.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_mid_n8_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_mid_n8");
    let most = 32 * dev.sm_count() as usize;
    for dtype in DTYPES {
        for form in FORMS {
            // Per family: its entry, plain (C, T), then T of: C = 32 x SMs, phi ~ 0.5 (many n = 8
            // tokens are ill-conditioned there: h_res not compared), gamma_k with strided rows at
            // C = 1288, 40 forced CTAs at C = 1280; and the (C, T) it must not serve (gamma_f at
            // C = 1280 too). The mid32_n8 entries: 32 token rows, C over at least 32 CTAs.
            let families = [
                (
                    "mhc_pre_mid_n8_sm90_",
                    vec![(1280, 1), (1280, 16), (1288, 5), (4096, 1), (4096, 16), (512, 16), (2056, 7)],
                    [9, 12, 12, 16],
                    vec![(1280, 17), (504, 4), (most + 8, 1)],
                    4,
                ),
                (
                    "mhc_pre_mid32_n8_sm90_",
                    vec![(1280, 17), (1280, 32), (1288, 25), (4096, 32), (512, 32), (2056, 19)],
                    [23, 24, 28, 32],
                    vec![(1280, 33), (1280, 16), (504, 20)],
                    20,
                ),
            ];
            for (entry, plain, [t_most, t_phi, t_gk, t_ctas], not_served, t_gf) in families {
                let mut shapes: Vec<Shape> = plain.into_iter().map(|(c, t)| Shape::new(8, c, t, form, dtype)).collect();
                shapes.push(Shape::new(8, most, t_most, form, dtype));
                shapes.push(Shape { phi_std: 0.5, ..Shape::new(8, 1280, t_phi, form, dtype) });
                shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(8, 1288, t_gk, form, dtype) });
                shapes.push(Shape { ctas: Some(40), ..Shape::new(8, 1280, t_ctas, form, dtype) });
                let mut others: Vec<Shape> =
                    not_served.into_iter().map(|(c, t)| Shape::new(8, c, t, form, dtype)).collect();
                others.push(Shape { gamma_f: true, ..Shape::new(8, 1280, t_gf, form, dtype) });
                check_where_selected(&dev, &stream, &mut rng, entry, &shapes, &others);
            }
        }
    }
}

/// The logit-cluster entries (asm/ptx/sm90/pre_lc.ptx, `mhc_pre_lc*`) where the catalogue selects
/// them (n = 4, no gamma_f, C a multiple of 128 in 512..=8192, T = 1..16; bf16 the wide entries
/// to 64, from 33 above C = 5120): within the reference's tolerances at every token count of a
/// group and across groups (1..5, 8, 9, 12, 13, 16: the h_res clusters take 4 tokens, the h_pre
/// clusters 8 above 12; then groups of 16 and 32), C of 512, 1152 (72 channels a CTA), 1280,
/// 4096, 7168 and 8192, phi ~ 0.5, gamma_k, strided rows, both formulations and dtypes; and that
/// T = 65, T = 17 / 32 above C = 5120, n = 3, gamma_f, C = 1288 (not a multiple of 128) and
/// C = 8320 keep the other kernels. The same shapes through the fused `post_pre` entries (the wide
/// one to 48 tokens and C = 7168, elsewhere `post` then `pre`): bit for bit `post` then `pre`, and
/// within tolerance. f32 runs to 12 tokens (its rows' range: its shapes above 12 tokens are
/// checked to keep the mid kernel).
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_lc_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_lc");
    for dtype in DTYPES {
        for form in FORMS {
            let mut shapes = Vec::new();
            for (c, t) in [
                (4096, 1),
                (4096, 2),
                (4096, 3),
                (4096, 4),
                (4096, 5),
                (4096, 8),
                (4096, 12),
                (4096, 13),
                (4096, 16),
                (7168, 1),
                (7168, 7),
                (7168, 12),
                (7168, 16),
                (512, 1),
                (512, 16),
                (1152, 3),
                (1280, 9),
                (8192, 4),
                // The wide entries (bf16, 17..64 tokens, from 33 above C = 5120): odd counts, a
                // partial last group, 16 and 32 tokens an h_pre cluster, every C bucket's edge.
                (4096, 17),
                (4096, 32),
                (1152, 23),
                (5120, 20),
                (4096, 33),
                (4096, 48),
                (4096, 49),
                (4096, 64),
                (7168, 47),
                (7168, 64),
                (8192, 33),
                (8192, 64),
                // The long wide entry (bf16, 65..128 tokens, C up to 6144): 32 tokens an h_res
                // cluster (two Sinkhorns a CTA), 48 an h_pre cluster, partial last groups of
                // either role, the largest C.
                (4096, 65),
                (4096, 96),
                (4096, 97),
                (4096, 128),
                (1152, 77),
                (512, 100),
                (5120, 113),
                (6144, 128),
            ] {
                shapes.push(Shape::new(4, c, t, form, dtype));
            }
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 4096, 1, form, dtype) });
            // phi ~ 0.5 at C = 4096: at 7168 most tokens' h_res is ill-conditioned in f32 (the
            // Paper: 5 of 6 in one run), and the case would compare too little.
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 4096, 6, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 4096, 3, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 1152, 10, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 8192, 15, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 4096, 2, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 7168, 9, form, dtype) });
            // The wide entries with phi ~ 0.5, gamma_k and strided rows.
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 4096, 20, form, dtype) });
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 4096, 40, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 512, 64, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 1152, 39, form, dtype) });
            shapes.push(Shape { gamma_k: true, ..Shape::new(4, 7168, 57, form, dtype) });
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 4096, 100, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 1152, 81, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 6144, 70, form, dtype) });
            let mut others = vec![
                Shape::new(4, 8192, 17, form, dtype),
                Shape::new(4, 7168, 32, form, dtype),
                Shape::new(4, 4096, 129, form, dtype),
                Shape::new(4, 6272, 65, form, dtype),
                Shape::new(4, 7168, 65, form, dtype),
                Shape::new(3, 4096, 1, form, dtype),
                Shape { gamma_f: true, ..Shape::new(4, 4096, 2, form, dtype) },
                Shape::new(4, 1288, 2, form, dtype),
                Shape::new(4, 8320, 1, form, dtype),
            ];
            // f32: the rows end at 12 tokens; the longer shapes keep the mid kernel.
            let top = if dtype == Dtype::Bf16 { 128 } else { 12 };
            let (shapes, beyond): (Vec<Shape>, Vec<Shape>) = shapes.into_iter().partition(|sh| sh.t <= top);
            others.extend(beyond);
            check_where_selected(&dev, &stream, &mut rng, "mhc_pre_lc", &shapes, &others);
            // post_pre: the fused entries give post then pre's outputs bit for bit, within the
            // reference's tolerances (the wide one where `folds_wide`; elsewhere post, then pre).
            for sh in &shapes {
                let plan = catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap();
                let lc = plan.post_pre_launcher(sh.t) == Some(mhc::device::cuda::LaunchKind::PostPreLogitClusters);
                let fused = sh.t <= 16 || folds_wide(sh.c, sh.t);
                assert_eq!(lc, fused, "{}: post_pre logit clusters selected", sh.label());
                if fused {
                    fused_post_pre_matches_pair(&dev, &stream, &mut rng, sh, true);
                    check_post_pre(&dev, &stream, &mut rng, sh);
                }
            }
        }
    }
}

/// Small launches of the logit-cluster entries (gamma_k, strided rows, both dtypes and
/// formulations; one cluster per role, then (bf16) four h_res and two h_pre clusters, whose
/// pushes, mix and post items take two passes of the CTA's threads at 4352 channels; f32 to its
/// 12 tokens; bf16 the wide entries at 20 tokens and C = 3968, 39 and 4352), for compute-sanitizer;
/// also checked
/// against the reference, `post_pre` bit for bit against `post` then `pre`.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn lc_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("lc_sanitizer_smoke");
    for dtype in DTYPES {
        for (c, t, form) in
            [(512, 1, Formulation::DeepSeekV4), (1152, 14, Formulation::Paper), (4352, 16, Formulation::DeepSeekV4)]
        {
            // f32: its rows' range ends at 12 tokens
            let t = if dtype == Dtype::F32 { t.min(12) } else { t };
            let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, c, t, form, dtype) };
            check_pre(&dev, &stream, &mut rng, &sh);
            fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, true);
        }
    }
    // The wide entries (bf16): partial last groups of each role, two mix passes, post items in
    // several passes; the long wide entry (no fold) with two Sinkhorns a CTA.
    for (c, t, form) in [
        (4352, 39, Formulation::Paper),
        (3968, 20, Formulation::DeepSeekV4),
        (4352, 100, Formulation::Paper),
        (3968, 71, Formulation::DeepSeekV4),
    ] {
        let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, c, t, form, Dtype::Bf16) };
        check_pre(&dev, &stream, &mut rng, &sh);
        if folds_wide(c, t) {
            fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, true);
        }
    }
}

/// Every shape of `selected` runs a `pre` entry whose name starts with `entry` (the catalogue's
/// plan for its T) and matches the reference ([`check_pre`]); no shape of `others` runs one.
fn check_where_selected(
    dev: &CudaDevice,
    stream: &Stream,
    rng: &mut reference::testing::Rng,
    entry: &str,
    selected: &[Shape],
    others: &[Shape],
) {
    let runs = |sh: &Shape| {
        let plan = catalogue_plan(dev, sh.cfg(), sh.dtype, sh.t).unwrap();
        plan.kernel_for(mhc::Stage::Pre, sh.t).is_ok_and(|b| b.entry().starts_with(entry))
    };
    for sh in selected {
        assert!(runs(sh), "{}: {entry}* selected", sh.label());
        check_pre(dev, stream, rng, sh);
    }
    for sh in others {
        assert!(!runs(sh), "{}: {entry}* not selected", sh.label());
    }
}

/// Small launches of the mid kernels (n = 8 too) and the post_pre entries (gamma_k, strided rows, both
/// dtypes), for compute-sanitizer; also checked against the reference and post then pre.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn mid_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("mid_sanitizer_smoke");
    for dtype in DTYPES {
        for (n, c, t) in [(4, 512, 64), (2, 1288, 33), (4, 1280, 17), (8, 1288, 9), (8, 1288, 21)] {
            let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(n, c, t, Formulation::DeepSeekV4, dtype) };
            check_pre(&dev, &stream, &mut rng, &sh);
        }
        for (n, c, t, form) in [
            (4, 1288, 5, Formulation::Paper),
            (2, 520, 29, Formulation::DeepSeekV4),
            (8, 1288, 9, Formulation::Paper),
            (8, 1288, 21, Formulation::DeepSeekV4),
        ] {
            let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(n, c, t, form, dtype) };
            fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, true);
            check_post_pre(&dev, &stream, &mut rng, &sh);
        }
    }
}

/// The mid kernel's post_pre entries (pre_decode.ptx `mhc_post_pre_mid*`: the mid / mid16 kernel
/// with layer l's post folded into its load phase) where the catalogue selects them (n = 1, 2, 4,
/// no gamma_f, C >= 512, T = 1..32 where the logit clusters do not run (n = 4 and C a multiple of
/// 128: to 16 tokens, bf16 from 17 up to C = 5120); n = 8 the mid_n8 and mid32_n8 kernels',
/// T = 1..32): the same bits as `post` then `pre` and within the reference's tolerances, at T on
/// both sides of the mid16 / mid and
/// mid_n8 / mid32_n8 bounds, n = 1, 2, 4 and 8, C not a power of two and not a multiple of the
/// CTAs' channels, phi ~ 0.5, gamma_k, strided rows, both formulations and dtypes; and that
/// gamma_f, C < 512, n = 3 (no post kernel) and T = 33 .. 64 keep the others.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn post_pre_mid_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("post_pre_mid");
    let uses = |sh: &Shape| {
        let plan = catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap();
        plan.post_pre_launcher(sh.t) == Some(mhc::device::cuda::LaunchKind::PostPreMid)
    };
    // bf16 n = 4 where the wide logit clusters fold post in (pre_lc_kernel_shapes): those cases
    // take the C next to it.
    let moved = |mut sh: Shape| {
        if sh.dtype == Dtype::Bf16 && sh.n == 4 && folds_wide(sh.c, sh.t) {
            sh.c = if sh.c > 512 { sh.c - 8 } else { sh.c + 8 };
        }
        sh
    };
    for dtype in DTYPES {
        for form in FORMS {
            let mut shapes = Vec::new();
            for (n, c, t) in [
                (4, 4104, 1),
                (4, 4104, 4),
                (4, 4104, 8),
                (4, 4104, 9),
                (4, 4096, 17),
                (4, 4096, 32),
                (4, 7176, 1),
                (4, 7168, 20),
                (4, 7168, 31),
                (4, 512, 32),
                (4, 1288, 27),
                (1, 4096, 3),
                (2, 1280, 20),
                (2, 7168, 25),
                (1, 520, 1),
                (8, 1280, 1),
                (8, 1280, 4),
                (8, 1280, 16),
                (8, 4096, 8),
                (8, 1304, 11),
                (8, 512, 16),
                (8, 1280, 17),
                (8, 1288, 25),
                (8, 4096, 32),
                (8, 512, 32),
            ] {
                shapes.push(Shape::new(n, c, t, form, dtype));
            }
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(8, 1280, 12, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(8, 2056, 5, form, dtype) });
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(8, 1280, 29, form, dtype) });
            shapes.push(Shape { phi_std: 0.5, ..Shape::new(4, 7168, 17, form, dtype) });
            shapes.push(Shape { x_pad: 24, ..Shape::new(4, 1288, 30, form, dtype) });
            shapes.push(Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 4104, 7, form, dtype) });
            for sh in shapes.into_iter().map(moved) {
                assert!(uses(&sh), "{}: post_pre mid kernel selected", sh.label());
                fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, true);
                check_post_pre(&dev, &stream, &mut rng, &sh);
            }
            for sh in [
                Shape::new(4, 256, 8, form, dtype),
                Shape::new(8, 1280, 33, form, dtype),
                Shape::new(8, 256, 4, form, dtype),
                Shape { gamma_f: true, ..Shape::new(8, 1280, 4, form, dtype) },
                Shape::new(3, 4096, 8, form, dtype),
                Shape { gamma_f: true, ..Shape::new(4, 4096, 8, form, dtype) },
                Shape::new(4, 4096, 33, form, dtype),
                Shape::new(4, 7168, 64, form, dtype),
                Shape::new(4, 4096, if dtype == Dtype::Bf16 { 17 } else { 33 }, form, dtype),
            ] {
                assert!(!uses(&sh), "{}: post_pre mid kernel not selected", sh.label());
            }
        }
    }
}

/// Small shapes of the general kernel's wide launch shapes (n >= 8: logit-group slices, decode
/// and few-tile prefill with K splits; the register Sinkhorn) and of the split prefill at few
/// tiles (n = 4, f32: up to sms / tiles CTAs per tile), for compute-sanitizer.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn wide_n_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("wide_n_sanitizer_smoke");
    for dtype in DTYPES {
        for (n, c, t) in [(8, 256, 3), (8, 256, 100), (32, 64, 1), (16, 64, 70)] {
            check_pre(
                &dev,
                &stream,
                &mut rng,
                &Shape { x_pad: 8, ..Shape::new(n, c, t, Formulation::DeepSeekV4, dtype) },
            );
        }
    }
    check_pre(&dev, &stream, &mut rng, &Shape::new(4, 1280, 100, Formulation::Paper, Dtype::F32));
}

/// The persistent-cluster kernel (asm/ptx/sm90/pre_pc.ptx) at the shapes it is selected for
/// (bf16, n = 4, C % 128 == 0 up to 4096, T >= 129, and T = 17..128 where C < 512): partial last
/// tiles, every run count per warp (C = 128 .. 4096), phi ~ 0.5, gamma_k, strided x and a; and
/// that f32, gamma_f, C = 4224, T <= 16 and T = 17..128 at C >= 512 keep the other kernels.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_cluster_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_cluster");
    let uses = |sh: &Shape| catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap().pre_uses_cluster_kernel(sh.t);
    let plan = catalogue_plan(&dev, Config::new(4, 4096), Dtype::Bf16, 8192).unwrap();
    for b in plan.buckets(mhc::Stage::Pre).unwrap() {
        eprintln!("pre bucket ..={}: {} ({} resident CTAs)", b.max_tokens, b.entry(), b.resident_ctas);
    }
    // C a multiple of 1024: the entry whose ring TMA fills; other C: the cp.async entry.
    for (c, entry) in [(4096, "mhc_pre_pc16t_bf16_n4"), (1024, "mhc_pre_pc16t_bf16_n4"), (1280, "mhc_pre_pc16_bf16_n4")]
    {
        let plan = catalogue_plan(&dev, Config::new(4, c), Dtype::Bf16, 1000).unwrap();
        let b = plan.buckets(mhc::Stage::Pre).unwrap();
        let b = b.iter().find(|b| b.min_tokens <= 1000 && 1000 <= b.max_tokens).unwrap();
        assert_eq!(b.entry(), entry, "C = {c}");
    }
    for form in FORMS {
        let bf = |n, c, t| Shape::new(n, c, t, form, Dtype::Bf16);
        let mut shapes = Vec::new();
        for (c, t) in [
            (4096, 131),
            (4096, 1000),
            (4096, 4099),
            (128, 33),
            (384, 100),
            (1280, 257),
            (2048, 180),
            (3968, 197),
            (1024, 300),
            (3072, 150),
        ] {
            shapes.push(bf(4, c, t));
        }
        shapes.push(Shape { phi_std: 0.5, ..bf(4, 4096, 1000) });
        shapes.push(Shape { gamma_k: true, ..bf(4, 4096, 200) });
        shapes.push(Shape { gamma_k: true, x_pad: 24, ..bf(4, 1280, 172) });
        shapes.push(Shape { x_pad: 8, ..bf(4, 4096, 129) });
        for sh in shapes {
            assert!(uses(&sh), "{}: cluster kernel selected", sh.label());
            check_pre(&dev, &stream, &mut rng, &sh);
        }
        for sh in [
            Shape::new(4, 4096, 1000, form, Dtype::F32),
            Shape { gamma_f: true, ..bf(4, 4096, 1000) },
            bf(4, 4224, 1000),
            bf(4, 9216, 1000),
            bf(4, 4096, 16),
            bf(4, 4096, 64),
            bf(4, 4096, 128),
            bf(8, 1280, 1000),
        ] {
            assert!(!uses(&sh), "{}: cluster kernel not selected", sh.label());
        }
    }
}

/// The pair entry of the persistent-cluster kernel (pre_pc_pair.ptx `mhc_pre_pc16p_bf16_n4`: two
/// clusters per tile, each on a part of C, their sums added through the workspace) where the
/// catalogue selects it (bf16, n = 4, C = 5120..8192 a multiple of 1024, T >= 65; T >= 129 up to
/// C = 6144): every split
/// of C (2+3, 3+3, 3+4, 4+4 blocks), partial last tiles, phi ~ 0.5, gamma_k, strided x and a.
/// Then one plan and workspace for a sequence of calls of different T on fresh inputs, each
/// against the reference (every call tags its exchange words with the pair's call count: no
/// earlier call's words may match), and a repeat of the first input giving the same bits.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_cluster_pair_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_cluster_pair");
    let plan = catalogue_plan(&dev, Config::new(4, 7168), Dtype::Bf16, 8192).unwrap();
    for b in plan.buckets(mhc::Stage::Pre).unwrap() {
        eprintln!("pre bucket ..={}: {} ({} resident CTAs)", b.max_tokens, b.entry(), b.resident_ctas);
    }
    for c in [5120, 6144, 7168, 8192] {
        let plan = catalogue_plan(&dev, Config::new(4, c), Dtype::Bf16, 1000).unwrap();
        let b = plan.buckets(mhc::Stage::Pre).unwrap();
        let b = b.iter().find(|b| b.min_tokens <= 1000 && 1000 <= b.max_tokens).unwrap();
        assert_eq!(b.entry(), "mhc_pre_pc16p_bf16_n4", "C = {c}");
        assert!(b.resident_ctas >= 32 && b.resident_ctas % 16 == 0, "C = {c}: {} CTAs", b.resident_ctas);
    }
    // Every split of the clusters into the two parts' sets: 2 (one each) up to all but one.
    let pro = catalogue_plan(&dev, Config::new(4, 7168), Dtype::Bf16, 1000).unwrap();
    let resident = pro
        .buckets(mhc::Stage::Pre)
        .unwrap()
        .iter()
        .find(|b| b.entry() == "mhc_pre_pc16p_bf16_n4")
        .unwrap()
        .resident_ctas as usize
        / 16;
    for q in 2..resident {
        for (c, t) in [(7168, 1000), (5120, 300), (8192, 65)] {
            let sh = Shape { clusters: Some(q), ..Shape::new(4, c, t, Formulation::DeepSeekV4, Dtype::Bf16) };
            check_pre(&dev, &stream, &mut rng, &sh);
        }
    }
    for form in FORMS {
        let bf = |c, t| Shape::new(4, c, t, form, Dtype::Bf16);
        let mut shapes: Vec<Shape> = [(7168, 65), (7168, 1000), (7168, 4099), (5120, 197), (6144, 300), (8192, 129)]
            .map(|(c, t)| bf(c, t))
            .into();
        shapes.push(Shape { phi_std: 0.5, ..bf(7168, 1000) });
        shapes.push(Shape { gamma_k: true, ..bf(7168, 200) });
        shapes.push(Shape { x_pad: 8, gamma_k: true, ..bf(7168, 129) });
        for sh in shapes {
            let uses = catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap().pre_uses_cluster_kernel(sh.t);
            assert!(uses, "{}: cluster kernel selected", sh.label());
            check_pre(&dev, &stream, &mut rng, &sh);
        }
    }
    // One workspace, calls of different T: no call may take an earlier call's exchange words.
    let cfg = Config::new(4, 7168);
    let plan = catalogue_plan(&dev, cfg, Dtype::Bf16, 4099).unwrap();
    let ws = plan.new_workspace().unwrap();
    let mut first = None;
    for (i, t) in [1000, 65, 4099, 17, 1000].into_iter().enumerate() {
        let case = if i == 4 {
            first.as_ref().map(|(c, _): &(PreCase, _)| c.clone()).unwrap()
        } else {
            stored(PreCase::random(&mut rng, cfg, t, 0.02), Dtype::Bf16)
        };
        let want = case.forward();
        let din = dev_in(&dev, &case, Dtype::Bf16, cfg.k());
        let mut out = alloc_out(&dev, &cfg, Dtype::Bf16, t, cfg.c);
        out.poison(&stream, Dtype::Bf16);
        let x = din.x.view(Dtype::Bf16, din.x_layout);
        plan.pre(&stream, &ws, &x, &din.params(&cfg), &mut out.views(&cfg, Dtype::Bf16, t)).unwrap();
        stream.synchronize().unwrap();
        let label = format!("call {i} on one workspace: C=7168 T={t}");
        compare_skip(&label, Dtype::Bf16, &out.read(&cfg, Dtype::Bf16, t), &want, None);
        if i == 0 {
            first = Some((case, out.bits()));
        } else if i == 4 {
            assert!(out.bits() == first.as_ref().unwrap().1, "{label}: the repeated input gave other bits");
        }
        eprintln!("ok  {label}");
    }
}

/// The fused `post_pre` kernel the plan selects for one shape against `post`, then `pre`: a second
/// call on the same inputs gives the same bits. The persistent-cluster entries (pre_pc.ptx
/// `mhc_post_pre_pc16_bf16_n4`, at C = 5120..8192 pre_pc_pair.ptx `mhc_post_pre_pc16p_bf16_n4`;
/// `exact` false): `x'` within one bf16 rounding step (x' on the tensor cores there, f32 FMAs in
/// post.ptx), at most 1% of it apart, pads between its rows untouched; where x' is the same, the
/// same output bits. The mid entries (pre_decode.ptx `mhc_post_pre_mid*`; `exact`): the same
/// bits as `post` then `pre`, x' (pads included) and every output. `x`, `f` and `x_out` rows
/// strided. The caller checks the reference separately.
fn fused_post_pre_matches_pair(
    dev: &CudaDevice,
    stream: &Stream,
    rng: &mut reference::testing::Rng,
    sh: &Shape,
    exact: bool,
) {
    let cfg = sh.cfg();
    let (t, n, c, k) = (sh.t, cfg.n, cfg.c, cfg.k());
    let dtype = sh.dtype;
    let post = PostCase::random(rng, cfg, t);
    let pre = stored(PreCase::random(rng, cfg, t, sh.phi_std), dtype);
    let x: Vec<f64> = post.x.iter().map(|&v| dtype.round(v)).collect();
    let din = dev_in(dev, &PreCase { x, ..pre.clone() }, dtype, k + sh.x_pad);
    let (f_stride, xo_stride) = (c + 24, k + 16);
    let f = upload(dev, dtype, &strided(&post.f, t, c, f_stride, 1e30)).unwrap();
    let hp = upload(dev, Dtype::F32, &post.h_post).unwrap();
    let hr = upload(dev, Dtype::F32, &post.h_res).unwrap();
    let plan = catalogue_plan(dev, cfg, dtype, t).unwrap();
    assert!(plan.post_pre_is_fused(t), "{}: fused kernel selected", sh.label());
    let ws = plan.new_workspace().unwrap();
    let x = din.x.view(dtype, din.x_layout);
    let params = din.params(&cfg);
    let fv = f.view(dtype, Layout::dense(t, c).with_stride(f_stride));
    let hpv = hp.view(Dtype::F32, Layout::dense(t, n));
    let hrv = hr.view(Dtype::F32, Layout::dense(t, n * n));
    let xo_bytes = ((t - 1) * xo_stride + k) * dtype.size();
    let run = |fused: bool| {
        let mut xo = DeviceBuffer::alloc(dev, xo_bytes).unwrap();
        xo.fill_u32(stream, nan_pattern(dtype)).unwrap();
        let mut out = alloc_out(dev, &cfg, dtype, t, c + sh.x_pad);
        out.poison(stream, dtype);
        {
            let xl = Layout::dense(t, k).with_stride(xo_stride);
            let mut views = out.views(&cfg, dtype, t);
            if fused {
                let pin = PostInViews { f: fv, h_post: hpv, h_res: hrv };
                plan.post_pre(stream, &ws, &x, &pin, &mut xo.view_mut(dtype, xl), &params, &mut views)
            } else {
                plan.post(stream, &x, &fv, &hpv, &hrv, &mut xo.view_mut(dtype, xl))
                    .and_then(|_| plan.pre(stream, &ws, &xo.view(dtype, xl), &params, &mut views))
            }
            .unwrap_or_else(|e| panic!("post_pre {} (fused {fused}): {e}", sh.label()));
        }
        stream.synchronize().unwrap();
        (xo.to_vec::<u8>().unwrap(), out.bits())
    };
    let (xo_fused, out_fused) = run(true);
    let (xo_pair, out_pair) = run(false);
    // the same inputs again: the same bits (every sum in a fixed order, whatever the timing)
    let (xo_again, out_again) = run(true);
    assert!(xo_again == xo_fused && out_again == out_fused, "post_pre {}: a second call gave other bits", sh.label());
    if exact {
        assert!(xo_fused == xo_pair, "post_pre {}: fused x' differs from post's (bits)", sh.label());
        assert!(out_fused == out_pair, "post_pre {}: fused outputs differ from post then pre (bits)", sh.label());
        eprintln!("ok  post_pre fused = post, pre (bits) {}", sh.label());
        return;
    }
    // The fused entry computes x' on the tensor cores (h_res and h_post split into bf16 hi + lo,
    // f32 accumulation), post.ptx with f32 FMAs: the f32 sums agree to ~2^-17, so a stored bf16
    // x' may sit one rounding step apart; pads (outside each row's nC values) stay untouched.
    assert_eq!(dtype, Dtype::Bf16, "the fused cluster kernel is bf16 only");
    let word = |b: &[u8], i: usize| u16::from_le_bytes([b[2 * i], b[2 * i + 1]]);
    let mut differ = 0usize;
    for i in 0..xo_fused.len() / 2 {
        let (a, b) = (word(&xo_fused, i), word(&xo_pair, i));
        if a == b {
            continue;
        }
        assert!(i % xo_stride < k, "post_pre {}: fused x' wrote pad element {i}", sh.label());
        let (fa, fb) = (f32::from_bits((a as u32) << 16), f32::from_bits((b as u32) << 16));
        assert!(
            (fa - fb).abs() <= fa.abs().max(fb.abs()) / 128.0 + 1.0 / 4096.0,
            "post_pre {}: fused x'[{i}] = {fa} against post's {fb} (more than one bf16 step)",
            sh.label()
        );
        differ += 1;
    }
    let total = t * k;
    assert!(differ * 100 <= total, "post_pre {}: {differ} of {total} x' values one bf16 step apart", sh.label());
    if differ == 0 {
        assert!(out_fused == out_pair, "post_pre {}: same x', yet the outputs differ (bits)", sh.label());
    }
    eprintln!("ok  post_pre cluster ~ post, pre: {differ} of {total} x' values one bf16 step apart {}", sh.label());
}

/// The fused persistent-cluster `post_pre`: against the reference (`check_post_pre`) and against
/// `post` then `pre` at C = 128 .. 4096, partial tiles, strided rows, gamma_k,
/// phi ~ 0.5, both formulations; then the configurations that keep the pair.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn post_pre_cluster_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("post_pre_cluster");
    let uses = |sh: &Shape| {
        let plan = catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap();
        use mhc::device::cuda::LaunchKind::{PostPreCluster, PostPreClusterPair};
        matches!(plan.post_pre_launcher(sh.t), Some(PostPreCluster | PostPreClusterPair))
    };
    for form in FORMS {
        let bf = |c, t| Shape::new(4, c, t, form, Dtype::Bf16);
        let mut shapes = Vec::new();
        for (c, t) in [(4096, 129), (4096, 1000), (4096, 1111), (128, 150), (1280, 257), (3968, 197)] {
            shapes.push(bf(c, t));
        }
        shapes.push(Shape { phi_std: 0.5, ..bf(4096, 300) });
        shapes.push(Shape { gamma_k: true, x_pad: 24, ..bf(1280, 200) });
        shapes.push(Shape { x_pad: 8, ..bf(4096, 130) });
        for sh in shapes {
            assert!(uses(&sh), "{}: fused cluster kernel selected", sh.label());
            fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, false);
            check_post_pre(&dev, &stream, &mut rng, &sh);
        }
        for sh in [
            Shape::new(4, 4096, 1000, form, Dtype::F32),
            Shape { gamma_f: true, ..bf(4096, 1000) },
            bf(4224, 1000),
            bf(7296, 1000),
            bf(4096, 64),
            bf(7168, 64),
            // pre runs the logit clusters' long wide entry there, so post, then pre
            bf(4096, 65),
            bf(3968, 128),
            Shape::new(8, 1280, 1000, form, Dtype::Bf16),
        ] {
            assert!(!uses(&sh), "{}: fused cluster kernel not selected", sh.label());
        }
    }
}

/// The fused `post_pre` on two clusters per tile (pre_pc_pair.ptx `mhc_post_pre_pc16p_bf16_n4`)
/// where the catalogue selects it (bf16, n = 4, C = 5120..8192 a multiple of 1024, T >= 256):
/// every split of C (2+3, 3+3, 3+4, 4+4 blocks), partial last tiles, tiles past several rounds
/// of both sets of clusters, phi ~ 0.5, gamma_k, strided rows, both formulations; against the
/// reference and against `post`, then the pair `pre` entry.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn post_pre_cluster_pair_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("post_pre_cluster_pair");
    for form in FORMS {
        let bf = |c, t| Shape::new(4, c, t, form, Dtype::Bf16);
        let mut shapes =
            vec![bf(5120, 384), bf(6144, 500), bf(7168, 1000), bf(7168, 4099), bf(8192, 401), bf(7168, 257)];
        shapes.push(Shape { phi_std: 0.5, ..bf(7168, 700) });
        shapes.push(Shape { gamma_k: true, x_pad: 24, ..bf(7168, 450) });
        shapes.push(Shape { x_pad: 8, ..bf(5120, 449) });
        for sh in shapes {
            let plan = catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap();
            assert!(plan.post_pre_is_fused(sh.t), "{}: fused pair kernel selected", sh.label());
            fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, false);
            check_post_pre(&dev, &stream, &mut rng, &sh);
        }
    }
}

/// Small launches of the fused persistent-cluster `post_pre` (a partial tile, gamma_k, strided
/// rows), for compute-sanitizer; also checked against post then pre and the reference.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn post_pre_cluster_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("post_pre_cluster_sanitizer_smoke");
    for form in FORMS {
        // T = 140: the `m` entry (post warps mix; below 129 tokens pre runs the logit clusters'
        // long wide entry, and post_pre post, then it); T = 500: the entry whose math warps mix
        for t in [140, 500] {
            let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 256, t, form, Dtype::Bf16) };
            fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, false);
            check_post_pre(&dev, &stream, &mut rng, &sh);
        }
        // the pair entry (C = 5120: parts of 2048 and 3072 channels; a partial last tile)
        let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, 5120, 389, form, Dtype::Bf16) };
        fused_post_pre_matches_pair(&dev, &stream, &mut rng, &sh, false);
        check_post_pre(&dev, &stream, &mut rng, &sh);
    }
}

/// Small launches of the persistent-cluster kernel (a partial tile, gamma_k, strided rows), for
/// compute-sanitizer; also checked against the reference.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn cluster_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("cluster_sanitizer_smoke");
    // the cp.async entry (C = 256, 128) and the TMA entry (C = 1024: a partial last tile)
    for (c, t) in [(256, 40), (128, 17), (1024, 37)] {
        let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(4, c, t, Formulation::DeepSeekV4, Dtype::Bf16) };
        check_pre(&dev, &stream, &mut rng, &sh);
    }
}

/// Small launches of the pair entry (two clusters per tile, C split in two parts): the fewest
/// clusters and a partial last tile, gamma_k and strided rows, for compute-sanitizer; also
/// checked against the reference.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn cluster_pair_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("cluster_pair_sanitizer_smoke");
    // (C = 5120 from 129 tokens: below, the logit clusters' long wide entry)
    for (c, t, clusters) in [(5120, 129, Some(2)), (7168, 37 + 16 * 7, None)] {
        let sh =
            Shape { gamma_k: true, x_pad: 8, clusters, ..Shape::new(4, c, t, Formulation::DeepSeekV4, Dtype::Bf16) };
        let plan = catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap();
        assert_eq!(plan.pre_launcher(t), Some(mhc::device::cuda::LaunchKind::PreClusterPair), "{}", sh.label());
        check_pre(&dev, &stream, &mut rng, &sh);
    }
}

/// The GEMM kernel (asm/ptx/sm90/pre_gemm.ptx: bf16, n = 8 / 16 / 32, no gamma_k / gamma_f), forced
/// at every T: one partial token tile and several (T = 1 .. 1000), K split 1 .. 16 ways (the
/// host's choice by T), C = 64 / 72 / 1280 (K a multiple of the 64-element stage, not of 128),
/// logits past M in the last logit tile, strided x and a, phi ~ 0.5, both formulations; then
/// where the plan selects it, and the configurations it must leave to the general kernel.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_gemm_kernel_shapes() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_gemm");
    let uses = |sh: &Shape| catalogue_plan(&dev, sh.cfg(), sh.dtype, sh.t).unwrap().pre_uses_gemm_kernel(sh.t);
    for form in FORMS {
        let bf = |n, c, t| Shape { gemm: true, ..Shape::new(n, c, t, form, Dtype::Bf16) };
        let mut shapes = Vec::new();
        for n in [8, 16, 32] {
            for (c, t) in [(1280, 1), (64, 3), (72, 17), (1280, 129), (64, 130), (72, 1000)] {
                shapes.push(bf(n, c, t));
            }
            shapes.push(Shape { phi_std: 0.5, ..bf(n, 1280, 40) });
            shapes.push(Shape { x_pad: 8, ..bf(n, 72, 200) });
            shapes.push(Shape { phi_std: 0.5, ..bf(n, 64, 1000) });
        }
        shapes.push(bf(32, 1280, 300));
        for sh in shapes {
            check_pre(&dev, &stream, &mut rng, &sh);
        }
        // The plan's choice: from gemm_min_tokens(n) on (33 / 256 / 256 tokens at n = 32 / 16 / 8).
        let auto = |n, c, t| Shape::new(n, c, t, form, Dtype::Bf16);
        for sh in [auto(32, 64, 33), auto(32, 64, 3000), auto(16, 64, 256), auto(8, 64, 256)] {
            assert!(uses(&sh), "{}: GEMM kernel selected", sh.label());
        }
        check_pre(&dev, &stream, &mut rng, &auto(32, 72, 600));
        for sh in [
            auto(32, 64, 32),
            auto(16, 64, 255),
            auto(8, 64, 255),
            auto(4, 64, 8192),
            Shape::new(32, 64, 2000, form, Dtype::F32),
            Shape { gamma_k: true, ..auto(32, 64, 2000) },
            Shape { gamma_f: true, ..auto(32, 64, 2000) },
        ] {
            assert!(!uses(&sh), "{}: GEMM kernel not selected", sh.label());
        }
    }
}

/// Small launches of the GEMM kernel (K split, two token tiles, strided rows) for
/// compute-sanitizer; also checked against the reference.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn gemm_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("gemm_sanitizer_smoke");
    for (n, c, t, form) in
        [(32, 64, 130, Formulation::Paper), (16, 72, 3, Formulation::DeepSeekV4), (8, 72, 300, Formulation::DeepSeekV4)]
    {
        let sh = Shape { x_pad: 8, gemm: true, ..Shape::new(n, c, t, form, Dtype::Bf16) };
        check_pre(&dev, &stream, &mut rng, &sh);
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_options_strides_and_forced_splits() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_options");
    for dtype in DTYPES {
        for form in FORMS {
            for (gk, gf) in [(true, false), (false, true), (true, true)] {
                for (n, c, t) in [(4, 4096, 3), (4, 1280, 200), (8, 1280, 17), (2, 72, 33)] {
                    let sh = Shape { gamma_k: gk, gamma_f: gf, ..Shape::new(n, c, t, form, dtype) };
                    check_pre(&dev, &stream, &mut rng, &sh);
                }
            }
            // Strided rows (x and a), C not a multiple of 32, odd token counts.
            for (n, c, t) in [(4, 72, 5), (4, 1288, 40), (16, 136, 65)] {
                check_pre(&dev, &stream, &mut rng, &Shape { x_pad: 24, ..Shape::new(n, c, t, form, dtype) });
            }
            // The general K loop on shapes the fast one takes by default (n = 4, C % 32 == 0).
            for (c, t) in [(4096, 200), (1280, 1000), (64, 3), (4096, 16)] {
                check_pre(&dev, &stream, &mut rng, &Shape { general_k: true, ..Shape::new(4, c, t, form, dtype) });
            }
            // Split prefill tiles pre-mixed by all their CTAs (claim) and by the last alone (solo).
            for (n, c, t) in [(4, 4096, 200), (4, 1280, 1000), (2, 1280, 100)] {
                for claim in [false, true] {
                    check_pre(&dev, &stream, &mut rng, &Shape { claim, ..Shape::new(n, c, t, form, dtype) });
                }
            }
            // The split machinery at every split count class, and the prefill shape at decode T.
            for split in [1, 2, 3, 7, 32, 128] {
                check_pre(
                    &dev,
                    &stream,
                    &mut rng,
                    &Shape { split: Some(split), ..Shape::new(4, 4096, 16, form, dtype) },
                );
                check_pre(
                    &dev,
                    &stream,
                    &mut rng,
                    &Shape { split: Some(split), ..Shape::new(4, 7168, 64, form, dtype) },
                );
            }
        }
    }
}

/// `post_pre` for one shape against `reference::post_pre` with `x'` stored in `dtype` (the
/// reference then runs `pre` on the stored `x'`, as the kernel does).
fn check_post_pre(dev: &CudaDevice, stream: &Stream, rng: &mut reference::testing::Rng, sh: &Shape) {
    let cfg = sh.cfg();
    let (t, n, c, k) = (sh.t, cfg.n, cfg.c, cfg.k());
    let dtype = sh.dtype;
    let mut post = PostCase::random(rng, cfg, t);
    post.x = post.x.iter().map(|&v| dtype.round(v)).collect();
    post.f = post.f.iter().map(|&v| dtype.round(v)).collect();
    post.h_post = f32s(&post.h_post);
    post.h_res = f32s(&post.h_res);
    let pre = stored(PreCase::random(rng, cfg, t, sh.phi_std), dtype);
    // Reference: post in f64, x' rounded to the storage dtype (what the kernel stores and
    // feeds to its pre half), then pre on it.
    let mut want_xo = vec![f64::NAN; t * k];
    {
        let inputs = PostInputs {
            x: HostTensor::new(&post.x[..], Layout::dense(t, k)),
            f: HostTensor::new(&post.f[..], Layout::dense(t, c)),
            h_post: HostTensor::new(&post.h_post[..], Layout::dense(t, n)),
            h_res: HostTensor::new(&post.h_res[..], Layout::dense(t, n * n)),
        };
        let mut xo = HostTensorMut::new(&mut want_xo[..], Layout::dense(t, k));
        reference::post::<f64>(&cfg, &inputs, &mut xo).unwrap();
    }
    let want_xo: Vec<f64> = want_xo.iter().map(|&v| dtype.round(v)).collect();
    let plan = catalogue_plan(dev, cfg, dtype, t.max(1)).unwrap();
    let ws = plan.new_workspace().unwrap();
    let din = dev_in(dev, &PreCase { x: post.x.clone(), ..pre.clone() }, dtype, k + sh.x_pad);
    let f = upload(dev, dtype, &post.f).unwrap();
    let hp = upload(dev, Dtype::F32, &post.h_post).unwrap();
    let hr = upload(dev, Dtype::F32, &post.h_res).unwrap();
    // Plan::post_pre (post then pre: two launches) and the fused kernel, both against the
    // reference; a forced split exists for the fused kernel only.
    for fused in [sh.split.is_some(), true] {
        let mut xo = DeviceBuffer::alloc(dev, (t * k).max(1) * dtype.size() + 16).unwrap();
        xo.fill_u32(stream, nan_pattern(dtype)).unwrap();
        let mut out = alloc_out(dev, &cfg, dtype, t, c + sh.x_pad);
        out.poison(stream, dtype);
        let x = din.x.view(dtype, din.x_layout);
        let params = din.params(&cfg);
        let pin = PostInViews {
            f: f.view(dtype, Layout::dense(t, c)),
            h_post: hp.view(Dtype::F32, Layout::dense(t, n)),
            h_res: hr.view(Dtype::F32, Layout::dense(t, n * n)),
        };
        {
            let mut xov = xo.view_mut(dtype, Layout::dense(t, k));
            let mut views = out.views(&cfg, dtype, t);
            if fused {
                plan.post_pre_fused(stream, &ws, &x, &pin, &mut xov, &params, &mut views, sh.split, true)
            } else {
                plan.post_pre(stream, &ws, &x, &pin, &mut xov, &params, &mut views)
            }
            .unwrap_or_else(|e| panic!("post_pre {}: {e}", sh.label()));
        }
        stream.synchronize().unwrap();
        let got_xo = download(&xo, dtype, t * k).unwrap();
        if let Some(i) = got_xo.iter().position(|v| !v.is_finite()) {
            panic!("post_pre {}: x'[{i}] not written", sh.label());
        }
        let e = rel_l2(&got_xo, &want_xo);
        let tol = if dtype == Dtype::F32 { 1e-5 } else { 1e-2 };
        assert!(e <= tol, "post_pre {}: x' rel L2 {e:.3e}", sh.label());
        // The pre half must be pre of the x' the kernel stored (it never re-reads it for the
        // logits): the reference runs pre on exactly those values. (Comparing with pre of the f64
        // x' would charge the kernel for bf16 ties rounded the other way, each moving a logit by
        // phi * ulp(x').)
        let pre_case = PreCase { x: got_xo.clone(), ..pre.clone() };
        let want = pre_case.forward();
        let label = format!("post_pre {} {}", if fused { "fused" } else { "post then pre" }, sh.label());
        let cond = (sh.phi_std >= 0.5).then(|| conditioning(&pre_case, &want, dtype, &label));
        compare_skip(&label, dtype, &out.read(&cfg, dtype, t), &want, cond.as_ref());
        // bf16, n <= 4 runs the batched producer; the per-slot producer does the same operations in
        // the same order: both must give identical bits (x' and every output).
        if fused && dtype == Dtype::Bf16 && n <= 4 && sh.split.is_none() {
            let mut xo2 = DeviceBuffer::alloc(dev, (t * k).max(1) * dtype.size() + 16).unwrap();
            xo2.fill_u32(stream, nan_pattern(dtype)).unwrap();
            let mut out2 = alloc_out(dev, &cfg, dtype, t, c + sh.x_pad);
            out2.poison(stream, dtype);
            {
                let mut xov = xo2.view_mut(dtype, Layout::dense(t, k));
                let mut views = out2.views(&cfg, dtype, t);
                plan.post_pre_fused(stream, &ws, &x, &pin, &mut xov, &params, &mut views, None, false)
                    .unwrap_or_else(|e| panic!("post_pre (per-slot producer) {}: {e}", sh.label()));
            }
            stream.synchronize().unwrap();
            let b1: Vec<u32> = got_xo.iter().map(|&v| (v as f32).to_bits()).collect();
            let b2: Vec<u32> = download(&xo2, dtype, t * k).unwrap().iter().map(|&v| (v as f32).to_bits()).collect();
            assert!(b1 == b2, "post_pre {}: the batched and per-slot producers differ in x'", sh.label());
            assert!(out.bits() == out2.bits(), "post_pre {}: the batched and per-slot producers differ", sh.label());
        }
    }
    eprintln!("ok  post_pre {}", sh.label());
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn post_pre_matches_reference() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("post_pre");
    for dtype in DTYPES {
        for form in FORMS {
            for n in NS {
                for (t, c) in [(1, 64), (17, 1280), (64, 64), (100, 64)] {
                    check_post_pre(&dev, &stream, &mut rng, &Shape::new(n, c, t, form, dtype));
                }
            }
            for t in [1, 3, 16, 64, 1000] {
                check_post_pre(&dev, &stream, &mut rng, &Shape::new(4, 4096, t, form, dtype));
            }
            check_post_pre(&dev, &stream, &mut rng, &Shape { phi_std: 0.5, ..Shape::new(4, 7168, 17, form, dtype) });
            let opts = Shape { gamma_k: true, gamma_f: true, x_pad: 8, ..Shape::new(4, 1280, 40, form, dtype) };
            check_post_pre(&dev, &stream, &mut rng, &opts);
            check_post_pre(&dev, &stream, &mut rng, &Shape { split: Some(5), ..Shape::new(4, 4096, 33, form, dtype) });
        }
        check_post_pre(&dev, &stream, &mut rng, &Shape::new(4, 4096, 8192, Formulation::DeepSeekV4, dtype));
    }
}

/// A ready-to-launch `pre` for timing, determinism and graph tests.
struct Ready {
    cfg: Config,
    dtype: Dtype,
    t: usize,
    plan: Plan,
    ws: Workspace,
    ins: Vec<DevIn>,
    out: DevOut,
}

fn ready(
    dev: &CudaDevice,
    rng: &mut reference::testing::Rng,
    cfg: Config,
    dtype: Dtype,
    t: usize,
    sets: usize,
) -> Ready {
    let plan = catalogue_plan(dev, cfg, dtype, t).unwrap();
    let ws = plan.new_workspace().unwrap();
    let ins =
        (0..sets).map(|_| dev_in(dev, &stored(PreCase::random(rng, cfg, t, 0.02), dtype), dtype, cfg.k())).collect();
    let out = alloc_out(dev, &cfg, dtype, t, cfg.c);
    Ready { cfg, dtype, t, plan, ws, ins, out }
}

/// Which kernel a [`Ready`] call runs.
#[derive(Debug, Clone, Copy)]
enum Mode {
    /// `Plan::pre` (the plan's choice).
    Auto,
    /// The general kernel, automatic launch shape.
    General,
    /// The general kernel with its split forced.
    Split(usize),
    /// The decode kernel over about this many CTAs.
    Decode(usize),
    /// The GEMM kernel at any T.
    Gemm,
    /// The GEMM kernel at any T, its K split this many ways.
    GemmSplits(usize),
}

impl Ready {
    fn launch(&mut self, s: &Stream, set: usize, split: Option<usize>) -> mhc::Result<()> {
        self.launch_mode(s, set, split.map_or(Mode::Auto, Mode::Split))
    }
    fn launch_mode(&mut self, s: &Stream, set: usize, mode: Mode) -> mhc::Result<()> {
        let din = &self.ins[set % self.ins.len()];
        let x = din.x.view(self.dtype, din.x_layout);
        let params = din.params(&self.cfg);
        let mut views = self.out.views(&self.cfg, self.dtype, self.t);
        let kernel = match mode {
            Mode::Auto => PreKernel::Auto,
            Mode::General => PreKernel::General { split: None, tuning: None },
            Mode::Split(sp) => PreKernel::General { split: Some(sp), tuning: None },
            Mode::Decode(ctas) => PreKernel::Decode { ctas },
            Mode::Gemm => PreKernel::Gemm { splits: None },
            Mode::GemmSplits(s) => PreKernel::Gemm { splits: Some(s) },
        };
        self.plan.pre_with(s, &self.ws, &x, &params, &mut views, kernel)
    }

    /// `pre` with its tuning chosen (prefetch on / off; the K loop and / or the pre-mix switched
    /// off for time attribution only).
    fn launch_variant(&mut self, s: &Stream, set: usize, v: PreVariant) -> mhc::Result<()> {
        let din = &self.ins[set % self.ins.len()];
        let x = din.x.view(self.dtype, din.x_layout);
        let params = din.params(&self.cfg);
        let mut views = self.out.views(&self.cfg, self.dtype, self.t);
        self.plan.pre_with(s, &self.ws, &x, &params, &mut views, PreKernel::General { split: None, tuning: Some(v) })
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
/// The mid kernel (which serves these shapes) waits for other CTAs' tagged rows; it is launched
/// cooperatively, so two of its grids
/// on two streams never each hold part of the SMs while waiting for the rest (a plain launch
/// could, and would trap after its 2 s bound). 40 calls on each of two streams, interleaved
/// without synchronisation: every call's output bits equal the single-stream result.
fn decode_on_two_streams_at_once() {
    let Some(dev) = gpu() else { return };
    let mut rng = common::rng("decode_two_streams");
    let (s0, s1) = (Stream::new(&dev).unwrap(), Stream::new(&dev).unwrap());
    // C = 4104 (not a multiple of 128): the mid kernel, not the logit clusters, at T = 1; above
    // C = 4096 it serves T = 17..32.
    for (c, t) in [(4104, 1), (8192, 17)] {
        let cfg = Config::new(4, c);
        let mut a = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, 1);
        let mut b = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, 1);
        assert!(a.plan.pre_uses_mid_kernel(t), "C={c} T={t}: the mid kernel is not selected");
        a.launch(&s0, 0, None).unwrap();
        b.launch(&s1, 0, None).unwrap();
        s0.synchronize().unwrap();
        s1.synchronize().unwrap();
        let (first_a, first_b) = (a.out.bits(), b.out.bits());
        a.out.poison(&s0, Dtype::Bf16);
        b.out.poison(&s1, Dtype::Bf16);
        s0.synchronize().unwrap();
        s1.synchronize().unwrap();
        for _ in 0..40 {
            a.launch(&s0, 0, None).unwrap();
            b.launch(&s1, 0, None).unwrap();
        }
        s0.synchronize().unwrap();
        s1.synchronize().unwrap();
        assert!(a.out.bits() == first_a && b.out.bits() == first_b, "C={c} T={t}: concurrent calls changed the bits");
        eprintln!("ok  decode on two streams C={c} T={t}");
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_is_deterministic_and_graph_capturable() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_determinism");
    for dtype in DTYPES {
        for (n, c, t) in [
            (4, 4096, 16),
            (4, 7168, 3),
            (4, 7168, 40),
            (4, 4096, 1),
            (2, 1288, 9),
            (4, 4096, 1000),
            (8, 1280, 64),
            (8, 1280, 5),
            (8, 1280, 29),
            (32, 64, 600),
            (8, 72, 2100),
        ] {
            let cfg = Config::new(n, c);
            let mut r = ready(&dev, &mut rng, cfg, dtype, t, 1);
            r.out.poison(&s, dtype);
            r.launch(&s, 0, None).unwrap();
            s.synchronize().unwrap();
            let first = r.out.bits();
            for rep in 0..5 {
                r.out.poison(&s, dtype);
                r.launch(&s, 0, None).unwrap();
                s.synchronize().unwrap();
                assert!(r.out.bits() == first, "n={n} C={c} T={t} {dtype}: run {rep} differs in bits");
            }
            // 100 calls captured in one graph, replayed twice: same bits as the direct call
            // (the split counters are reset by each call, or the next would go wrong).
            r.out.poison(&s, dtype);
            s.begin_capture().unwrap();
            for _ in 0..100 {
                r.launch(&s, 0, None).unwrap();
            }
            let g = s.end_capture().unwrap();
            g.launch(&s).unwrap();
            g.launch(&s).unwrap();
            s.synchronize().unwrap();
            assert!(r.out.bits() == first, "n={n} C={c} T={t} {dtype}: graph replay differs in bits");
            eprintln!("ok  determinism + graph n={n} C={c} T={t} {dtype}");
        }
    }
}

/// One round of a dependent chain on `s`, with no host sync inside: x' and x'' poisoned
/// (memset), post (x, f -> x'), pre (x' -> a, h_*), post (x', f, pre's h_post / h_res -> x'').
/// Each kernel reads what the launch right before it wrote.
#[allow(clippy::too_many_arguments)]
fn dependent_chain(
    plan: &Plan,
    ws: &Workspace,
    s: &Stream,
    din: &DevIn,
    f: &DeviceBuffer,
    hp: &DeviceBuffer,
    hr: &DeviceBuffer,
    xo: &mut DeviceBuffer,
    xo2: &mut DeviceBuffer,
    out: &mut DevOut,
    t: usize,
) {
    let (cfg, dtype) = (*plan.config(), plan.dtype());
    let (n, c, k) = (cfg.n, cfg.c, cfg.k());
    xo.fill_u32(s, nan_pattern(dtype)).unwrap();
    xo2.fill_u32(s, nan_pattern(dtype)).unwrap();
    out.poison(s, dtype);
    let fv = f.view(dtype, Layout::dense(t, c));
    plan.post(
        s,
        &din.x.view(dtype, din.x_layout),
        &fv,
        &hp.view(Dtype::F32, Layout::dense(t, n)),
        &hr.view(Dtype::F32, Layout::dense(t, n * n)),
        &mut xo.view_mut(dtype, Layout::dense(t, k)),
    )
    .unwrap();
    plan.pre(s, ws, &xo.view(dtype, Layout::dense(t, k)), &din.params(&cfg), &mut out.views(&cfg, dtype, t)).unwrap();
    plan.post(
        s,
        &xo.view(dtype, Layout::dense(t, k)),
        &fv,
        &out.h_post.view(Dtype::F32, Layout::dense(t, n)),
        &out.h_res.view(Dtype::F32, Layout::dense(t, n * n)),
        &mut xo2.view_mut(dtype, Layout::dense(t, k)),
    )
    .unwrap();
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
/// Programmatic dependent launch ([`Overlap`]): every stage kernel waits for the previous
/// kernel before its first global access, so chains of dependent launches give exactly the bits
/// of plain launches, round after round and replayed from a CUDA graph. A kernel that read
/// before its wait would see the NaN poison.
fn overlapped_launches_keep_stream_order() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pdl_chain");
    let dtype = Dtype::Bf16;
    for (c, t) in [(4096, 1), (4096, 16), (7168, 4), (4096, 1000), (7168, 1000), (1280, 64)] {
        let cfg = Config::new(4, c);
        let post = PostCase::random(&mut rng, cfg, t);
        let pre = stored(PreCase { x: post.x.clone(), ..PreCase::random(&mut rng, cfg, t, 0.02) }, dtype);
        let din = dev_in(&dev, &pre, dtype, cfg.k());
        let f = upload(&dev, dtype, &post.f).unwrap();
        let hp = upload(&dev, Dtype::F32, &f32s(&post.h_post)).unwrap();
        let hr = upload(&dev, Dtype::F32, &f32s(&post.h_res)).unwrap();
        let bytes = t * cfg.k() * dtype.size();
        let mut want: Option<Vec<Vec<u8>>> = None;
        for overlap in [Overlap::Off, Overlap::Launch, Overlap::Weights] {
            let plan = catalogue_plan(&dev, cfg, dtype, t).unwrap().with_overlap(overlap);
            let ws = plan.new_workspace().unwrap();
            let mut xo = DeviceBuffer::alloc(&dev, bytes).unwrap();
            let mut xo2 = DeviceBuffer::alloc(&dev, bytes).unwrap();
            let mut out = alloc_out(&dev, &cfg, dtype, t, c);
            let label = format!("C={c} T={t} {overlap:?}");
            let bits = |xo2: &DeviceBuffer, out: &DevOut| {
                let mut v = out.bits();
                v.push(xo2.to_vec::<u8>().unwrap());
                v
            };
            for round in 0..8 {
                dependent_chain(&plan, &ws, &s, &din, &f, &hp, &hr, &mut xo, &mut xo2, &mut out, t);
                s.synchronize().unwrap();
                let got = bits(&xo2, &out);
                match &want {
                    None => {
                        let read = out.read(&cfg, dtype, t);
                        assert!(read.a.iter().chain(&read.h_res).all(|v| v.is_finite()), "{label}: NaN left");
                        want = Some(got);
                    }
                    Some(w) => assert!(&got == w, "{label}: round {round} differs from plain launches"),
                }
            }
            s.begin_capture().unwrap();
            for _ in 0..10 {
                dependent_chain(&plan, &ws, &s, &din, &f, &hp, &hr, &mut xo, &mut xo2, &mut out, t);
            }
            let g = s.end_capture().unwrap();
            g.launch(&s).unwrap();
            g.launch(&s).unwrap();
            s.synchronize().unwrap();
            assert!(Some(bits(&xo2, &out)) == want, "{label}: graph replay differs from plain launches");
            eprintln!("ok  dependent chain {label}");
        }
    }
}

#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_refuses_bad_inputs_before_launch() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_refuses");
    let cfg = Config::new(4, 1280);
    let dtype = Dtype::Bf16;
    let mut r = ready(&dev, &mut rng, cfg, dtype, 8, 1);
    let din = &r.ins[0];
    let params = din.params(&cfg);
    let k = cfg.k();
    // x row stride not 16-byte aligned
    let bad_x = din.x.view(dtype, Layout::dense(7, k).with_stride(k + 1));
    let mut out7 = alloc_out(&dev, &cfg, dtype, 7, cfg.c);
    let e = r.plan.pre(&s, &r.ws, &bad_x, &params, &mut out7.views(&cfg, dtype, 7));
    assert!(matches!(e, Err(Error::Alignment { .. })), "{e:?}");
    // wrong dtype of x
    let f32x = din.x.view(Dtype::F32, Layout::dense(2, k));
    let mut out2 = alloc_out(&dev, &cfg, dtype, 2, cfg.c);
    let e = r.plan.pre(&s, &r.ws, &f32x, &params, &mut out2.views(&cfg, dtype, 2));
    assert!(matches!(e, Err(Error::Dtype { .. })), "{e:?}");
    // gamma_k given but not configured
    let g = upload(&dev, Dtype::F32, &vec![1.0; k]).unwrap();
    let p2 = PreParamViews { gamma_k: Some(g.view(Dtype::F32, Layout::dense(1, k))), ..params };
    let x = din.x.view(dtype, din.x_layout);
    let e = r.plan.pre(&s, &r.ws, &x, &p2, &mut r.out.views(&cfg, dtype, 8));
    assert!(matches!(e, Err(Error::Shape { what: "gamma_k", .. })), "{e:?}");
    // phi of the wrong shape
    let p3 = PreParamViews { phi: din.phi.view(Dtype::F32, Layout::dense(cfg.m() - 1, k)), ..params };
    let e = r.plan.pre(&s, &r.ws, &x, &p3, &mut r.out.views(&cfg, dtype, 8));
    assert!(matches!(e, Err(Error::Shape { what: "phi", .. })), "{e:?}");
    // a workspace of another (smaller) plan: refused by its owner, before its size is looked at
    let small = catalogue_plan(&dev, Config::new(1, 64), dtype, 1).unwrap();
    let ws_small = small.new_workspace().unwrap();
    let e = r.plan.pre(&s, &ws_small, &x, &params, &mut r.out.views(&cfg, dtype, 8));
    assert!(matches!(e, Err(Error::Workspace(_))), "{e:?}");
    // more tokens than the plan
    let mut out9 = alloc_out(&dev, &cfg, dtype, 9, cfg.c);
    let x9 = DeviceBuffer::alloc(&dev, 9 * k * 2).unwrap();
    let e = r.plan.pre(&s, &r.ws, &x9.view(dtype, Layout::dense(9, k)), &params, &mut out9.views(&cfg, dtype, 9));
    assert!(matches!(e, Err(Error::Shape { what: "tokens", .. })), "{e:?}");
    // outputs untouched by the refused calls: the poisoned buffer still reads NaN
    r.out.poison(&s, dtype);
    s.synchronize().unwrap();
    let _ = r.plan.pre(&s, &r.ws, &x, &p3, &mut r.out.views(&cfg, dtype, 8));
    s.synchronize().unwrap();
    assert!(r.out.read(&cfg, dtype, 8).h_pre.iter().all(|v| v.is_nan()));
    // and a good call still works after the refusals
    r.launch(&s, 0, None).unwrap();
    s.synchronize().unwrap();
    assert!(r.out.read(&cfg, dtype, 8).h_pre.iter().all(|v| v.is_finite()));
}

/// Median of `reps` timings (microseconds per call) of `calls` back-to-back launches.
fn time_calls(
    dev: &CudaDevice,
    s: &Stream,
    reps: usize,
    calls: usize,
    mut f: impl FnMut(usize) -> mhc::Result<()>,
) -> f64 {
    let (e0, e1) = (Event::new(dev).unwrap(), Event::new(dev).unwrap());
    let mut v = Vec::new();
    let mut i = 0;
    for _ in 0..reps {
        e0.record(s).unwrap();
        for _ in 0..calls {
            f(i).unwrap();
            i += 1;
        }
        e1.record(s).unwrap();
        e1.synchronize().unwrap();
        v.push(e1.elapsed_ms_since(&e0).unwrap() as f64 * 1000.0 / calls as f64);
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre");
    // Copy bandwidth, measured here: 2 x 512 MiB device-to-device.
    let bytes = 512 << 20;
    let (src, dst) = (DeviceBuffer::alloc(&dev, bytes).unwrap(), DeviceBuffer::alloc(&dev, bytes).unwrap());
    let copy_us = time_calls(&dev, &s, 11, 5, |_| dst.copy_from(&s, &src, bytes));
    let copy_bw = 2.0 * bytes as f64 / (copy_us * 1e-6);
    println!("device {} | D2D copy {:.0} GB/s", dev.name(), copy_bw / 1e9);
    // The general kernel at every shape (bench_pre_decode times the decode kernel against it).
    let gmode = |split: Option<usize>| split.map_or(Mode::General, Mode::Split);
    println!("| stage | dtype | T | n | C | split | us (stream) | us (graph) | GB/s | % copy | floor us |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    // Attribution of the decode time: the tile shape (one CTA) at T = 1, and Sinkhorn with 1
    // iteration instead of 20.
    for (c, split, iters) in [(64, None, 20), (4096, Some(1), 20), (4096, None, 1), (4096, None, 20)] {
        let cfg = Config { sinkhorn_iters: iters, ..Config::new(4, c) };
        let mut r = ready(&dev, &mut rng, cfg, Dtype::Bf16, 1, 16);
        for i in 0..3 {
            r.launch_mode(&s, i, gmode(split)).unwrap();
        }
        let us = time_calls(&dev, &s, 21, 50, |i| r.launch_mode(&s, i, gmode(split)));
        s.begin_capture().unwrap();
        for i in 0..16 {
            r.launch_mode(&s, i, gmode(split)).unwrap();
        }
        let g = s.end_capture().unwrap();
        let gus = time_calls(&dev, &s, 21, 1, |_| g.launch(&s)) / 16.0;
        println!("| pre (attribution: iters {iters}) | bf16 | 1 | 4 | {c} | {split:?} | {us:.2} | {gus:.2} | | | |");
    }
    for (dtype, n, c, t, split) in [
        (Dtype::Bf16, 4, 4096, 1, None),
        (Dtype::Bf16, 4, 4096, 4, None),
        (Dtype::Bf16, 4, 4096, 16, None),
        (Dtype::Bf16, 4, 7168, 1, None),
        (Dtype::Bf16, 4, 7168, 16, None),
        (Dtype::Bf16, 4, 4096, 16, Some(8)),
        (Dtype::Bf16, 4, 4096, 16, Some(16)),
        (Dtype::Bf16, 4, 4096, 16, Some(64)),
        (Dtype::Bf16, 4, 7168, 16, Some(16)),
        (Dtype::Bf16, 4, 7168, 16, Some(112)),
        (Dtype::Bf16, 4, 4096, 64, None),
        (Dtype::Bf16, 4, 4096, 256, None),
        (Dtype::Bf16, 4, 4096, 1024, None),
        (Dtype::Bf16, 4, 4096, 4096, None),
        (Dtype::Bf16, 4, 4096, 8192, None),
        (Dtype::Bf16, 4, 4096, 8192, Some(1)),
        (Dtype::Bf16, 4, 4096, 8192, Some(2)),
        (Dtype::Bf16, 4, 7168, 256, None),
        (Dtype::Bf16, 4, 7168, 1024, None),
        (Dtype::Bf16, 4, 7168, 4096, None),
        (Dtype::Bf16, 4, 7168, 8192, None),
        (Dtype::F32, 4, 4096, 16, None),
        (Dtype::F32, 4, 4096, 8192, None),
        (Dtype::Bf16, 8, 1280, 8192, None),
        (Dtype::Bf16, 32, 1280, 1024, None),
    ] {
        let cfg = Config::new(n, c);
        let k = cfg.k();
        // Rotate input sets so x (and phi) exceed the 50 MB L2 between reuses.
        let per_set = t * k * dtype.size() + cfg.m() * k * 4;
        let sets = (120_000_000 / per_set).clamp(1, 16);
        let mut r = ready(&dev, &mut rng, cfg, dtype, t, sets);
        // Median of 101 timed runs (one call each from T = 1024 on, else 20 calls per run).
        let reps = 101;
        let calls = if t >= 1024 { 1 } else { 20 };
        for i in 0..3 {
            r.launch_mode(&s, i, gmode(split)).unwrap();
        }
        let us = time_calls(&dev, &s, reps, calls, |i| r.launch_mode(&s, i, gmode(split)));
        // Graph of `sets` calls (each its own inputs), replayed.
        s.begin_capture().unwrap();
        for i in 0..sets.max(10) {
            r.launch_mode(&s, i, gmode(split)).unwrap();
        }
        let g = s.end_capture().unwrap();
        let ncalls = sets.max(10);
        let gus = time_calls(&dev, &s, 21, 1, |_| g.launch(&s)) / ncalls as f64;
        let moved = (t * k + t * c) * dtype.size() + cfg.m() * k * 4;
        let floor = moved as f64 / copy_bw * 1e6;
        let gbs = moved as f64 / (us * 1e-6) / 1e9;
        println!(
            "| pre | {dtype} | {t} | {n} | {c} | {} | {us:.2} | {gus:.2} | {gbs:.0} | {:.0}% | {floor:.2} |",
            split.map(|v| v.to_string()).unwrap_or("auto".into()),
            100.0 * gbs * 1e9 / copy_bw
        );
        // Prefetch on / off, and (T = 8192) attribution of the time (outputs are not pre's):
        // no pre-mix, no K loop, neither.
        if t >= 256 && split.is_none() {
            let mut vs = vec![
                ("fast K, prefetch", PreVariant { prefetch: true, fast_k: true, ..Default::default() }),
                ("fast K, no prefetch", PreVariant { prefetch: false, fast_k: true, ..Default::default() }),
                ("general K, prefetch", PreVariant { prefetch: true, fast_k: false, ..Default::default() }),
                ("general K, no prefetch", PreVariant { prefetch: false, fast_k: false, ..Default::default() }),
            ];
            if t <= 2048 {
                vs.push((
                    "claim, fast K, prefetch",
                    PreVariant { prefetch: true, fast_k: true, claim: true, ..Default::default() },
                ));
            }
            if t == 8192 && n == 4 {
                for (skip_k, skip_mix, what) in
                    [(false, true, "skip mix"), (true, false, "skip K loop"), (true, true, "skip both")]
                {
                    vs.push((
                        what,
                        PreVariant { skip_k, skip_mix, prefetch: true, fast_k: true, ..Default::default() },
                    ));
                }
            }
            for (what, v) in vs {
                for i in 0..3 {
                    r.launch_variant(&s, i, v).unwrap();
                }
                let us = time_calls(&dev, &s, 101, 1, |i| r.launch_variant(&s, i, v));
                let gbs = moved as f64 / (us * 1e-6) / 1e9;
                println!(
                    "| pre ({what}) | {dtype} | {t} | {n} | {c} | auto | {us:.2} | | {gbs:.0} | {:.0}% | |",
                    100.0 * gbs * 1e9 / copy_bw
                );
            }
        }
    }
}

/// Where the general kernel's time goes at n = 8 / 32 (C = 1280): Sinkhorn 20 vs 1 iterations,
/// the K loop or the pre-mix left out, forced splits; median us back-to-back.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre_wide() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre_wide");
    println!("| n | T | what | us |");
    println!("|---|---|---|---|");
    for (n, t) in [(8, 1), (8, 16), (8, 64), (8, 1024), (32, 1), (32, 16), (32, 64)] {
        for iters in [20, 1] {
            let cfg = Config { sinkhorn_iters: iters, ..Config::new(n, 1280) };
            let per_set = t * cfg.k() * 2 + cfg.m() * cfg.k() * 4;
            let sets = (120_000_000 / per_set).clamp(1, 16);
            let mut r = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, sets);
            let mut cases: Vec<(String, Option<PreVariant>, Option<usize>)> =
                vec![(format!("iters {iters}"), None, None)];
            if iters == 20 {
                for (skip_k, skip_mix, what) in
                    [(false, true, "skip mix"), (true, false, "skip K"), (true, true, "skip both")]
                {
                    cases.push((what.into(), Some(PreVariant { skip_k, skip_mix, ..Default::default() }), None));
                }
                for sp in [4, 16, 64, 128] {
                    cases.push((format!("split {sp}"), None, Some(sp)));
                }
            }
            for (what, v, sp) in cases {
                let mut f = |i: usize| match v {
                    Some(v) => r.launch_variant(&s, i, v),
                    None => r.launch_mode(&s, i, sp.map_or(Mode::General, Mode::Split)),
                };
                for i in 0..3 {
                    f(i).unwrap();
                }
                let us = time_calls(&dev, &s, 21, 5, &mut f);
                println!("| {n} | {t} | {what} | {us:.2} |");
            }
        }
    }
}

/// The GEMM kernel (forced) against the general kernel at n = 8 / 16 / 32, C = 1280,
/// bf16: median us per call back-to-back, inputs rotated past L2 where they fit.
/// `MHC_GEMM_TOKENS=1,64` limits the token counts, `MHC_GEMM_NS=8` the n.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre_gemm() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre_gemm");
    let tokens: Vec<usize> = std::env::var("MHC_GEMM_TOKENS")
        .map(|v| v.split(',').filter_map(|t| t.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![1, 16, 64, 256, 1024, 4096, 8192]);
    let ns: Vec<usize> = std::env::var("MHC_GEMM_NS")
        .map(|v| v.split(',').filter_map(|n| n.trim().parse().ok()).collect())
        .unwrap_or_else(|_| vec![8, 16, 32]);
    println!("| n | T | GEMM kernel us | general kernel us | speed-up |");
    println!("|---|---|---|---|---|");
    for n in ns {
        for &t in &tokens {
            let cfg = Config::new(n, 1280);
            let per_set = t * cfg.k() * 2 + cfg.m() * cfg.k() * 4;
            let sets = (120_000_000 / per_set).clamp(1, 8);
            let mut r = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, sets);
            let calls = if n * t >= 32 * 1024 { 2 } else { 5 };
            let mut us = [0.0; 2];
            for (slot, mode) in [(0, Mode::Gemm), (1, Mode::General)] {
                let mut f = |i: usize| r.launch_mode(&s, i, mode);
                for i in 0..2 {
                    f(i).unwrap();
                }
                us[slot] = time_calls(&dev, &s, 11, calls, &mut f);
            }
            println!("| {n} | {t} | {:.2} | {:.2} | {:.2}x |", us[0], us[1], us[1] / us[0]);
        }
    }
}

/// The GEMM kernel's K splits (C = 1280, bf16): the cost model's choice and every split count
/// 1..=16 the workspace holds slabs for, median us per call back-to-back. Each is timed in
/// `MHC_GEMM_ROUNDS` rounds (default 3), every round timing all of them in a rotated order, and
/// the table gives the median of its rounds: a launch's time drifts with the GPU's clocks over a
/// sweep, and rounds spread that drift over every split count instead of charging it to the ones
/// timed last. `MHC_GEMM_NS` / `MHC_GEMM_TOKENS` limit the n (default 8, 16, 32) and token counts.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre_gemm_splits() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre_gemm_splits");
    let list = |var: &str, default: &[usize]| -> Vec<usize> {
        std::env::var(var)
            .map(|v| v.split(',').filter_map(|t| t.trim().parse().ok()).collect())
            .unwrap_or_else(|_| default.to_vec())
    };
    let rounds = std::env::var("MHC_GEMM_ROUNDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3usize).max(1);
    println!("| n | T | model us | us by K splits (median of {rounds} rounds) |");
    println!("|---|---|---|---|");
    for n in list("MHC_GEMM_NS", &[8, 16, 32]) {
        for t in list("MHC_GEMM_TOKENS", &[128, 256, 512, 1024, 2048, 4096, 8192]) {
            let cfg = Config::new(n, 1280);
            let per_set = t * cfg.k() * 2 + cfg.m() * cfg.k() * 4;
            let sets = (120_000_000 / per_set).clamp(1, 8);
            let mut r = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, sets);
            let calls = if n * t >= 32 * 1024 { 2 } else { 5 };
            // The model's choice, then the split counts the workspace holds (a count it does not
            // hold is refused before launch).
            let counts: Vec<usize> = (1..=16).filter(|&k| r.launch_mode(&s, 0, Mode::GemmSplits(k)).is_ok()).collect();
            let modes: Vec<Mode> =
                std::iter::once(Mode::Gemm).chain(counts.iter().map(|&k| Mode::GemmSplits(k))).collect();
            s.synchronize().unwrap();
            let mut times = vec![Vec::new(); modes.len()];
            for round in 0..rounds {
                let first = round * modes.len() / rounds;
                for j in (0..modes.len()).map(|j| (j + first) % modes.len()) {
                    let mode = modes[j];
                    for i in 0..2 {
                        r.launch_mode(&s, i, mode).unwrap();
                    }
                    times[j].push(time_calls(&dev, &s, 5, calls, |i| r.launch_mode(&s, i, mode)));
                }
            }
            let median = |v: &mut Vec<f64>| {
                v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                v[v.len() / 2]
            };
            let us: Vec<f64> = times.iter_mut().map(median).collect();
            let cells: Vec<String> = counts.iter().zip(&us[1..]).map(|(k, us)| format!("{k}: {us:.1}")).collect();
            println!("| {n} | {t} | {:.2} | {} |", us[0], cells.join(", "));
        }
    }
}

/// The general kernel's tuning flags at n = 8 / 32 (C = 1280): prefetch on / off, and (split
/// prefill) all CTAs of a tile pre-mixing (claim) or the last one alone; median us back-to-back.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre_wide_tuning() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre_wide_tuning");
    println!("| n | T | auto | prefetch, claim | prefetch | no prefetch, claim | no prefetch |");
    println!("|---|---|---|---|---|---|---|");
    for (n, t) in [(8, 1), (8, 16), (8, 64), (8, 256), (8, 1024), (32, 1), (32, 16), (32, 64), (32, 256), (32, 1024)] {
        let cfg = Config::new(n, 1280);
        let per_set = t * cfg.k() * 2 + cfg.m() * cfg.k() * 4;
        let sets = (120_000_000 / per_set).clamp(1, 16);
        let mut r = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, sets);
        let mut row = Vec::new();
        for i in 0..3 {
            r.launch_mode(&s, i, Mode::Auto).unwrap();
        }
        row.push(time_calls(&dev, &s, 21, 3, |i| r.launch_mode(&s, i, Mode::Auto)));
        for (prefetch, claim) in [(true, true), (true, false), (false, true), (false, false)] {
            let v = PreVariant { prefetch, claim, ..Default::default() };
            for i in 0..3 {
                r.launch_variant(&s, i, v).unwrap();
            }
            row.push(time_calls(&dev, &s, 21, 3, |i| r.launch_variant(&s, i, v)));
        }
        let cells: Vec<String> = row.iter().map(|us| format!("{us:.1}")).collect();
        println!("| {n} | {t} | {} |", cells.join(" | "));
    }
}

/// The plan's choice against the general kernel's split prefill shape (up to `sms / tiles` CTAs
/// per tile) at few tiles: median us back-to-back, input sets rotated past L2.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre_split_prefill() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre_split_prefill");
    println!("| C | T | auto us | general us |");
    println!("|---|---|---|---|");
    for c in [4096, 7168] {
        for t in [65, 128, 256, 512, 1024] {
            let cfg = Config::new(4, c);
            let per_set = t * cfg.k() * 2 + cfg.m() * cfg.k() * 4;
            let sets = (120_000_000 / per_set).clamp(2, 16);
            let mut r = ready(&dev, &mut rng, cfg, Dtype::Bf16, t, sets);
            let mut us = [0.0; 2];
            for (i, mode) in [Mode::Auto, Mode::General].into_iter().enumerate() {
                for j in 0..3 {
                    r.launch_mode(&s, j, mode).unwrap();
                }
                us[i] = time_calls(&dev, &s, 51, 5, |j| r.launch_mode(&s, j, mode));
            }
            println!("| {c} | {t} | {:.2} | {:.2} |", us[0], us[1]);
        }
    }
}

/// The plan's choice at decode shapes (the logit clusters or the mid / mid16 entries where C >=
/// 512, the decode entry below) against the general kernel: median us per call back-to-back on a
/// stream and inside a CUDA graph (replays of one call per input set; input sets rotated so phi + x
/// exceed the L2 between reuses), plus a CTA-count sweep of the decode entry.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_pre_decode() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_pre_decode");
    let bytes = 512 << 20;
    let (src, dst) = (DeviceBuffer::alloc(&dev, bytes).unwrap(), DeviceBuffer::alloc(&dev, bytes).unwrap());
    let copy_us = time_calls(&dev, &s, 11, 5, |_| dst.copy_from(&s, &src, bytes));
    let copy_bw = 2.0 * bytes as f64 / (copy_us * 1e-6);
    println!("device {} ({} SMs) | D2D copy {:.0} GB/s", dev.name(), dev.sm_count(), copy_bw / 1e9);
    println!("| kernel | dtype | T | n | C | us (stream) | us (graph) | GB/s (graph) | % copy | floor us |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let shapes = [
        (Dtype::Bf16, 1, 4096),
        (Dtype::Bf16, 4, 4096),
        (Dtype::Bf16, 16, 4096),
        (Dtype::Bf16, 1, 7168),
        (Dtype::Bf16, 4, 7168),
        (Dtype::Bf16, 16, 7168),
        (Dtype::F32, 1, 4096),
        (Dtype::F32, 16, 4096),
        (Dtype::F32, 1, 7168),
        // C < 512: the decode entry's own niche (the mid kernel needs >= 64 CTAs)
        (Dtype::Bf16, 1, 256),
        (Dtype::Bf16, 16, 256),
        (Dtype::Bf16, 4, 504),
    ];
    // (label, mode, dtype, T, n, C, Sinkhorn iterations)
    let mut modes: Vec<(String, Mode, Dtype, usize, usize, usize, u32)> = Vec::new();
    for (dtype, t, c) in shapes {
        modes.push(("auto".into(), Mode::Auto, dtype, t, 4, c, 20));
        modes.push(("general".into(), Mode::General, dtype, t, 4, c, 20));
    }
    // Attribution: the Sinkhorn's share (1 iteration instead of 20), and the CTA count (the
    // kernel takes 64 channels per CTA at most: at least 64 CTAs at C = 4096, 112 at 7168; n =
    // 8 at most 32: C = 1280 on 80, 54 or 40 CTAs of 16, 24 or 32 channels).
    for t in [1, 16] {
        modes.push(("auto iters=1".into(), Mode::Auto, Dtype::Bf16, t, 4, 4096, 1));
        for ctas in [64, 96] {
            modes.push((format!("decode ctas~{ctas}"), Mode::Decode(ctas), Dtype::Bf16, t, 4, 4096, 20));
        }
        modes.push(("decode ctas~112".into(), Mode::Decode(112), Dtype::Bf16, t, 4, 7168, 20));
        modes.push(("auto".into(), Mode::Auto, Dtype::Bf16, t, 8, 1280, 20));
        modes.push(("auto iters=1".into(), Mode::Auto, Dtype::Bf16, t, 8, 1280, 1));
        for ctas in [40, 54] {
            modes.push((format!("decode ctas~{ctas}"), Mode::Decode(ctas), Dtype::Bf16, t, 8, 1280, 20));
        }
    }
    // Each row with plain launches, programmatic dependent launches (the default) and those with
    // the weights loaded before the dependency.
    let overlaps = [Overlap::Off, Overlap::Launch, Overlap::Weights];
    let modes: Vec<_> = modes
        .into_iter()
        .flat_map(|(l, m, d, t, n, c, i)| overlaps.map(|o| (format!("{l} {o:?}"), m, d, t, n, c, i, o)))
        .collect();
    for (label, mode, dtype, t, n, c, iters, overlap) in modes {
        let cfg = Config { sinkhorn_iters: iters, ..Config::new(n, c) };
        let k = cfg.k();
        let per_set = t * k * dtype.size() + cfg.m() * k * 4;
        let sets = (150_000_000 / per_set).clamp(20, 128);
        let mut r = ready(&dev, &mut rng, cfg, dtype, t, sets);
        r.plan.set_overlap(overlap);
        let label = match mode {
            Mode::Auto if r.plan.pre_uses_logit_clusters(t) => format!("{label} (logit clusters)"),
            Mode::Auto if r.plan.pre_uses_mid_kernel(t) => format!("{label} (mid)"),
            Mode::Auto if r.plan.pre_uses_decode_kernel(t) => format!("{label} (decode)"),
            Mode::Auto => panic!("T={t} C={c}: no few-token kernel selected"),
            _ => label,
        };
        for i in 0..3 {
            r.launch_mode(&s, i, mode).unwrap();
        }
        let us = time_calls(&dev, &s, 101, 20, |i| r.launch_mode(&s, i, mode));
        s.begin_capture().unwrap();
        for i in 0..sets {
            r.launch_mode(&s, i, mode).unwrap();
        }
        let g = s.end_capture().unwrap();
        g.launch(&s).unwrap();
        let gus = time_calls(&dev, &s, 101, 1, |_| g.launch(&s)) / sets as f64;
        let moved = (t * k + t * c) * dtype.size() + cfg.m() * k * 4;
        let floor = moved as f64 / copy_bw * 1e6;
        let gbs = moved as f64 / (gus * 1e-6) / 1e9;
        println!(
            "| {label} | {dtype} | {t} | {n} | {c} | {us:.2} | {gus:.2} | {gbs:.0} | {:.1}% | {floor:.2} |",
            100.0 * gbs * 1e9 / copy_bw
        );
    }
}

/// Prints the projection the kernel left in the workspace next to the f64 one (P = x . phi^T,
/// ss = |x|^2) for small shapes, tile and split. Diagnostic: fails only on a gross mismatch.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_logits_match_the_projection() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("pre_logits");
    for dtype in DTYPES {
        for (n, c, t, split) in [(1, 64, 1, None), (4, 64, 3, None), (4, 1280, 2, None), (4, 1280, 2, Some(1))] {
            let cfg = Config::new(n, c);
            let (k, m) = (cfg.k(), cfg.m());
            let mut r = ready(&dev, &mut rng, cfg, dtype, t, 1);
            // The general kernel's logit buffers (the decode kernel keeps only partial rows).
            r.launch_mode(&s, 0, split.map_or(Mode::General, Mode::Split)).unwrap();
            s.synchronize().unwrap();
            let (p, ss) = r.plan.debug_logits(&r.ws, t).unwrap();
            let x = download(&r.ins[0].x, dtype, t * k).unwrap();
            let phi = download(&r.ins[0].phi, Dtype::F32, m * k).unwrap();
            let ldp = p.len() / t;
            let mut worst = 0.0f64;
            for tt in 0..t {
                let want_ss: f64 = x[tt * k..(tt + 1) * k].iter().map(|v| v * v).sum();
                let mut line =
                    format!("n={n} C={c} T={t} {dtype} split={split:?} t={tt}: ss {} vs {want_ss:.4}", ss[tt]);
                for mm in 0..m {
                    let want: f64 = (0..k).map(|kk| x[tt * k + kk] * phi[mm * k + kk]).sum();
                    let got = p[tt * ldp + mm] as f64;
                    worst = common::nan_max(worst, (got - want).abs());
                    if mm < 6 {
                        line += &format!(" | P{mm} {got:.5} vs {want:.5}");
                    }
                }
                eprintln!("{line}");
            }
            assert!(worst < 1e-2, "P differs by {worst}");
        }
    }
}

/// Small launches of every path (tile, split, post_pre, options), for compute-sanitizer.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("sanitizer_smoke");
    for dtype in DTYPES {
        for (n, c, t) in [(4, 1280, 5), (4, 1280, 40), (8, 136, 20)] {
            let sh =
                Shape { gamma_k: true, gamma_f: true, x_pad: 8, ..Shape::new(n, c, t, Formulation::DeepSeekV4, dtype) };
            let cfg = sh.cfg();
            let case = stored(PreCase::random(&mut rng, cfg, t, 0.02), dtype);
            let plan = catalogue_plan(&dev, cfg, dtype, t).unwrap();
            let ws = plan.new_workspace().unwrap();
            let din = dev_in(&dev, &case, dtype, cfg.k() + 8);
            let mut out = alloc_out(&dev, &cfg, dtype, t, c + 8);
            let x = din.x.view(dtype, din.x_layout);
            plan.pre(&stream, &ws, &x, &din.params(&cfg), &mut out.views(&cfg, dtype, t)).unwrap();
            stream.synchronize().unwrap();
        }
        for t in [5, 40] {
            check_post_pre(&dev, &stream, &mut rng, &Shape::new(4, 1280, t, Formulation::Paper, dtype));
        }
    }
}

/// Small launches of the decode kernel (every token class, gamma_k, strided rows), for
/// compute-sanitizer; also checked against the reference.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn decode_sanitizer_smoke() {
    let Some(dev) = gpu() else { return };
    let stream = Stream::new(&dev).unwrap();
    let mut rng = common::rng("decode_sanitizer_smoke");
    for dtype in DTYPES {
        for (n, c, t) in [(4, 1280, 1), (4, 1288, 3), (2, 72, 6), (4, 256, 11), (1, 64, 16)] {
            let sh = Shape { gamma_k: true, x_pad: 8, ..Shape::new(n, c, t, Formulation::DeepSeekV4, dtype) };
            check_pre_kernel(&dev, &stream, &mut rng, &sh, Some(true));
        }
    }
}

#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn bench_post_pre() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("bench_post_pre");
    let bytes = 512 << 20;
    let (src, dst) = (DeviceBuffer::alloc(&dev, bytes).unwrap(), DeviceBuffer::alloc(&dev, bytes).unwrap());
    let copy_us = time_calls(&dev, &s, 11, 5, |_| dst.copy_from(&s, &src, bytes));
    let copy_bw = 2.0 * bytes as f64 / (copy_us * 1e-6);
    println!("device {} | D2D copy {:.0} GB/s", dev.name(), copy_bw / 1e9);
    println!("| stage | dtype | T | n | C | us (stream) | us (graph) | GB/s | % copy | floor us |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (dtype, n, c, t) in [
        (Dtype::Bf16, 4, 4096, 1),
        (Dtype::Bf16, 4, 4096, 16),
        (Dtype::Bf16, 4, 7168, 16),
        (Dtype::Bf16, 4, 4096, 1024),
        (Dtype::Bf16, 4, 4096, 8192),
        (Dtype::F32, 4, 4096, 8192),
    ] {
        let cfg = Config::new(n, c);
        let k = cfg.k();
        let per_set = (2 * t * k + t * c) * dtype.size() + cfg.m() * k * 4;
        let sets = (120_000_000 / per_set).clamp(1, 8);
        let plan = catalogue_plan(&dev, cfg, dtype, t).unwrap();
        let ws = plan.new_workspace().unwrap();
        let mut bufs = Vec::new();
        for _ in 0..sets {
            let post = PostCase::random(&mut rng, cfg, t);
            let pre = stored(PreCase::random(&mut rng, cfg, t, 0.02), dtype);
            let din = dev_in(&dev, &PreCase { x: post.x.iter().map(|&v| dtype.round(v)).collect(), ..pre }, dtype, k);
            let f = upload(&dev, dtype, &post.f).unwrap();
            let hp = upload(&dev, Dtype::F32, &post.h_post).unwrap();
            let hr = upload(&dev, Dtype::F32, &post.h_res).unwrap();
            let xo = DeviceBuffer::alloc(&dev, t * k * dtype.size()).unwrap();
            bufs.push((din, f, hp, hr, xo));
        }
        let mut out = alloc_out(&dev, &cfg, dtype, t, c);
        for batched in [true, false] {
            if !batched && (dtype != Dtype::Bf16 || t < 1024) {
                continue;
            }
            let mut call = |i: usize| -> mhc::Result<()> {
                let (din, f, hp, hr, xo) = &mut bufs[i % sets];
                let pin = PostInViews {
                    f: f.view(dtype, Layout::dense(t, c)),
                    h_post: hp.view(Dtype::F32, Layout::dense(t, n)),
                    h_res: hr.view(Dtype::F32, Layout::dense(t, n * n)),
                };
                let x = din.x.view(dtype, din.x_layout);
                let params = din.params(&cfg);
                let mut xov = xo.view_mut(dtype, Layout::dense(t, k));
                let mut views = out.views(&cfg, dtype, t);
                plan.post_pre_fused(&s, &ws, &x, &pin, &mut xov, &params, &mut views, None, batched)
            };
            for i in 0..3 {
                call(i).unwrap();
            }
            let reps = 101;
            let calls = if t >= 1024 { 1 } else { 20 };
            let us = time_calls(&dev, &s, reps, calls, &mut call);
            s.begin_capture().unwrap();
            let ncalls = sets.max(10);
            for i in 0..ncalls {
                call(i).unwrap();
            }
            let g = s.end_capture().unwrap();
            let gus = time_calls(&dev, &s, 21, 1, |_| g.launch(&s)) / ncalls as f64;
            let moved = (2 * t * k + 2 * t * c) * dtype.size() + cfg.m() * k * 4;
            let floor = moved as f64 / copy_bw * 1e6;
            let gbs = moved as f64 / (us * 1e-6) / 1e9;
            let prod = if batched { "" } else { " (per-slot producer)" };
            println!(
                "| post_pre{prod} | {dtype} | {t} | {n} | {c} | {us:.2} | {gus:.2} | {gbs:.0} | {:.0}% | {floor:.2} |",
                100.0 * gbs * 1e9 / copy_bw
            );
        }
    }
}

/// Three `pre` calls at T = MHC_PROFILE_T (default 8192), n = 4, C = 4096, bf16 (the plan's
/// kernel): a fixed workload to attach a profiler to (`ncu --launch-skip 2 --launch-count 1`).
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn profile_pre() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("profile_pre");
    let t = std::env::var("MHC_PROFILE_T").ok().and_then(|v| v.parse().ok()).unwrap_or(8192);
    let mut r = ready(&dev, &mut rng, Config::new(4, 4096), Dtype::Bf16, t, 1);
    for _ in 0..3 {
        r.launch_mode(&s, 0, Mode::Auto).unwrap();
    }
    s.synchronize().unwrap();
}

/// Where a round of the persistent-cluster kernel goes, phase by phase, at T = `MHC_PROFILE_T`
/// (default 8192) and C = `MHC_PROFILE_C` (default 4096; 5120..8192 run the pair entry), bf16.
/// Needs a timing build: `python3 -m asm.gen --experiment pre_pc.stamps`, the two files it writes
/// to asm/gen/out/ptx/sm90 copied over asm/ptx/sm90 in a scratch checkout, `mhc asm`, then this
/// test (`--ignored profile_pc_phases`); a normal build prints meaningless numbers. Per phase: the
/// median and 10th / 90th percentiles over CTAs and steady rounds (4 .. rounds - 3) of the cycles
/// (%clock64, one SM's clock) from the phase's start to its end. The pair entry's figures are per
/// set of clusters (one set per part of C), and then the exchange between the two parts of each
/// token: when the other part's sums were stored, against this part's barrier 2 and the moment
/// its poll saw them (%globaltimer, ns).
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn profile_pc_phases() {
    use mhc::device::cuda::{LaunchKind, PC_STAMP_ROUNDS};
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("profile_pc_phases");
    let env = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (t, c) = (env("MHC_PROFILE_T", 8192), env("MHC_PROFILE_C", 4096));
    let mut r = ready(&dev, &mut rng, Config::new(4, c), Dtype::Bf16, t, 4);
    // MHC_PROFILE_OVERLAP=weights (or off): the plan's launch overlap, Launch unless set
    match std::env::var("MHC_PROFILE_OVERLAP").as_deref() {
        Ok("weights") => r.plan.set_overlap(Overlap::Weights),
        Ok("off") => r.plan.set_overlap(Overlap::Off),
        _ => {}
    }
    assert!(r.plan.pre_uses_cluster_kernel(t), "T = {t}, C = {c} does not run pre_pc");
    let pair = r.plan.pre_launcher(t) == Some(LaunchKind::PreClusterPair);
    let buckets = r.plan.buckets(mhc::Stage::Pre).unwrap();
    let ctas = buckets.iter().find(|b| b.min_tokens <= t && t <= b.max_tokens).unwrap().resident_ctas as usize;
    // the stamps follow the plan's regions (the pair entry's: its exchange rows for t tokens)
    let need = r.plan.workspace_bytes() + ctas * PC_STAMP_ROUNDS * 256;
    r.ws = Workspace::from_buffer(&r.plan, DeviceBuffer::zeroed(&dev, need).unwrap()).unwrap();
    let tiles = t.div_ceil(16);
    let ncl = ctas / 16;
    // the sets of clusters, (first cluster, clusters, channels): the whole C, or the pair entry's
    // two parts, each set walking the tiles with its own stride
    let sets: Vec<(usize, usize, usize)> = if pair {
        let (q0, q1) = r.plan.pair_split(ncl);
        let c0 = c / 2048 * 1024;
        vec![(0, q0, c0), (q0, q1, c - c0)]
    } else {
        vec![(0, ncl, c)]
    };
    let set_of = |cta: usize| sets.iter().position(|&(f, n, _)| (f..f + n).contains(&(cta / 16))).unwrap();
    let rounds_of = |cta: usize| {
        let (f, n, _) = sets[set_of(cta)];
        let cid = cta / 16 - f;
        if tiles > cid {
            (tiles - cid - 1) / n + 1
        } else {
            0
        }
    };
    // rows 0 .. ROUND_ROWS hold rounds; the last three the fill and drain (asm/gen/pre_pc/stamps.py exit_stamps)
    const ROUND_ROWS: usize = PC_STAMP_ROUNDS - 3;
    // (name, from stamp, to stamp, round offset of `to`): stamps of asm/gen/pre_pc/ (math thread
    // 0: 0 loop top, 1 stage landed, 2 mma stored, 3 barrier 1, 4 warp sums, 7 barrier 2, 8
    // pushed; coefficient lane 0: 9 gather landed, 10 row summed, 11 barrier 2, 12 h_post and the
    // token's z_res rows stored (every 8th round of the warp, the h_res batch runs after 12);
    // mix thread 0: 13 h_pre ready, 14 mixed, 15 refilled). The cp.async entry's first h_pre
    // thread (warp HW0, lane 0): 5 gather landed, 6 h_pre written. The pair entry's coefficient
    // lane 0: 5 own sums stored to the exchange, 6 the other part's sums in.
    let mut phases: Vec<(&str, usize, usize, usize)> = vec![
        ("round (loop top to loop top)", 0, 0, 1),
        ("math: wait stage", 0, 1, 0),
        ("math: mma + partial stores", 1, 2, 0),
        ("math: barrier 1", 2, 3, 0),
        ("math: warp sums", 3, 4, 0),
        ("math: warp sums -> barrier 2 exit", 4, 7, 0),
        ("math: pushes", 7, 8, 0),
        ("math: pushed -> next loop top", 8, 0, 1),
        ("coef: loop top -> gather landed", 0, 9, 0),
        ("coef: own row sums", 9, 10, 0),
        ("coef: barrier 2", 10, 11, 0),
        ("coef: barrier 2 exit -> h_post + z_res rows stored", 11, 12, 0),
        ("mix: mix", 13, 14, 0),
        ("mix: refill", 14, 15, 0),
    ];
    if pair {
        phases.extend([
            ("coef: gather landed -> own sums stored", 9, 5, 0),
            ("coef: barrier 2 exit -> other part's sums in", 11, 6, 0),
            ("coef: other part's sums in -> h_post + rows stored", 6, 12, 0),
        ]);
    } else {
        phases.extend([
            ("h_pre warps: barrier 1 -> gather landed", 3, 5, 0),
            ("h_pre warps: h_pre", 5, 6, 0),
            ("mix: h_pre written (round k+1) -> seen", 6, 13, 0),
        ]);
    }
    let pct = |v: &mut Vec<i64>| {
        v.sort();
        (v[v.len() / 10], v[v.len() / 2], v[v.len() * 9 / 10])
    };
    for batch in 0..3 {
        for i in 0..8 {
            r.launch_mode(&s, i, Mode::Auto).unwrap();
        }
        s.synchronize().unwrap();
        let st = r.plan.debug_pc_stamps(&r.ws, ctas, t).unwrap();
        let at = |cta: usize, round: usize, slot: usize| st[cta * PC_STAMP_ROUNDS + round][slot];
        println!(
            "T={t} C={c} bf16 {:?} launch batch {batch}: {ctas} CTAs, {ncl} clusters, {tiles} tiles",
            r.plan.overlap()
        );
        for (si, &(first, count, channels)) in sets.iter().enumerate() {
            let members: Vec<usize> = (16 * first..16 * (first + count)).collect();
            println!("  clusters {first}..{}: {channels} channels, {} rounds", first + count, rounds_of(16 * first));
            for &(name, a, b, off) in &phases {
                let mut cyc = Vec::new();
                for &cta in &members {
                    let nr = rounds_of(cta).min(ROUND_ROWS);
                    for k in 4..nr.saturating_sub(3) {
                        // mix stamps of round k follow the math warps' h_pre of round k + 1
                        let (ka, kb) = if a == 6 && b == 13 { (k + 1, k) } else { (k, k + off) };
                        let (sa, sb) = (at(cta, ka, a).1, at(cta, kb, b).1);
                        // A stamp this entry does not write holds zeros: skip the pair.
                        let d = sb.wrapping_sub(sa) as i64;
                        if sa != 0 && sb != 0 && (-100_000_000..100_000_000).contains(&d) {
                            cyc.push(d);
                        }
                    }
                }
                if cyc.is_empty() {
                    println!("  {name:>48}: not recorded by this entry");
                    continue;
                }
                let (p10, p50, p90) = pct(&mut cyc);
                println!("  {name:>48}: median {p50:6} p10 {p10:6} p90 {p90:6} cycles ({} samples)", cyc.len());
            }
            // the lockstep: per cluster and round, the spread of barrier 2's exit over its CTAs (ns)
            let mut spread = Vec::new();
            for cl in first..first + count {
                let nr = rounds_of(16 * cl).min(ROUND_ROWS);
                for k in 4..nr.saturating_sub(3) {
                    let ts: Vec<u64> = (0..16).map(|j| at(16 * cl + j, k, 7).0).collect();
                    spread.push((ts.iter().max().unwrap() - ts.iter().min().unwrap()) as i64);
                }
            }
            if !spread.is_empty() {
                let (_, p50, p90) = pct(&mut spread);
                println!("  barrier 2 exit spread over a cluster's CTAs: median {p50} ns, p90 {p90} ns");
            }
            // wall time of a round from %globaltimer (ns), for the cycles-to-time conversion
            let mut per = Vec::new();
            for &cta in &members {
                let nr = rounds_of(cta).min(ROUND_ROWS);
                if nr > 10 {
                    let (a, b) = (at(cta, 4, 0), at(cta, nr - 4, 0));
                    per.push(((b.0 - a.0) as f64 / (nr - 8) as f64, (b.1 - a.1) as f64 / (nr - 8) as f64));
                }
            }
            per.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap());
            if !per.is_empty() {
                let m = per[per.len() / 2];
                println!("  round: {:.0} ns = {:.0} cycles ({:.2} GHz)", m.0, m.1, m.1 / m.0);
            }
            if !pair {
                continue;
            }
            // the exchange of each token of the tiles both parts recorded: tile m is finished by
            // cluster first + m % count in its round m / count + 1
            let other = sets[1 - si];
            let place = |(f, n, _): (usize, usize, usize), m: usize, j: usize| (16 * (f + m % n) + j, m / n + 1);
            let (mut late, mut seen, mut waited) = (Vec::new(), Vec::new(), 0usize);
            for m in 4..tiles {
                for j in 0..16 {
                    let ((ca, ka), (cb, kb)) = (place(sets[si], m, j), place(other, m, j));
                    if ka + 3 >= ROUND_ROWS.min(rounds_of(ca)) || kb + 3 >= ROUND_ROWS.min(rounds_of(cb)) {
                        continue;
                    }
                    let (bar2, got, stored) = (at(ca, ka, 11).0, at(ca, ka, 6).0, at(cb, kb, 5).0);
                    if bar2 == 0 || got == 0 || stored == 0 {
                        continue;
                    }
                    let l = stored as i64 - bar2 as i64;
                    waited += (l > 0) as usize;
                    late.push(l);
                    seen.push(got as i64 - stored.max(bar2) as i64);
                }
            }
            if !late.is_empty() {
                let n = late.len();
                let (p10, p50, p90) = pct(&mut late);
                println!(
                    "  the other part's sums stored after this part's barrier 2: {waited} of {n} tokens; \
                     stored - barrier 2: median {p50} p10 {p10} p90 {p90} ns"
                );
                let (p10, p50, p90) = pct(&mut seen);
                println!("  sums in after max(stored, barrier 2): median {p50} p10 {p10} p90 {p90} ns");
            }
        }
        // fill and drain of the last launch (asm/gen/pre_pc/stamps.py exit_stamps): row 95 holds each CTA's
        // arrival before the grid dependency (slot 13), the previous launch's exit (slot 14),
        // the entry after the dependency (slot 15), each warp's arrival at the end (slot w) and
        // the exit past the closing cluster barrier (slot 12); row 94 the opening cluster
        // barrier (slots 12, 13) and each warp's prologue end (slot w: a math warp's phi
        // fragments, a mix warp's first fills); row 93 thread 0's phi runs; us after the
        // earliest arrival
        let row = |cta: usize, r: usize, slot: usize| st[cta * PC_STAMP_ROUNDS + PC_STAMP_ROUNDS - r][slot].0;
        let last = |cta: usize, slot: usize| row(cta, 1, slot);
        let t0 = (0..ctas).map(|c| last(c, 13)).min().unwrap();
        let us = |v: u64| v.wrapping_sub(t0) as i64 as f64 / 1000.0;
        let show = |name: &str, v: Vec<u64>| {
            let mut v: Vec<f64> = v.into_iter().map(us).collect();
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            println!("  {name:>40}: min {:8.2} median {:8.2} max {:8.2} us", v[0], v[v.len() / 2], v[v.len() - 1]);
        };
        show("previous launch's exit", (0..ctas).map(|c| last(c, 14)).collect());
        show("arrival (before the grid dependency)", (0..ctas).map(|c| last(c, 13)).collect());
        show("entry (after the grid dependency)", (0..ctas).map(|c| last(c, 15)).collect());
        show("opening cluster barrier: arrive", (0..ctas).map(|c| row(c, 2, 12)).collect());
        show("opening cluster barrier: passed", (0..ctas).map(|c| row(c, 2, 13)).collect());
        show(
            "phi fragments loaded (latest math warp)",
            (0..ctas).map(|c| (0..8).map(|w| row(c, 2, w)).max().unwrap()).collect(),
        );
        show("first fills issued (mix warps)", (0..ctas).map(|c| row(c, 2, 10).max(row(c, 2, 11))).collect());
        // row 93: thread 0's phi fragments, run by run (8: start; 2j: its split begins; 2j + 1: split done),
        // the first mix thread (9: start; 10: first fills)
        show("mix: start (first mix thread)", (0..ctas).map(|c| row(c, 3, 9)).collect());
        show("mix: first fills start", (0..ctas).map(|c| row(c, 3, 10)).collect());
        show("phi: start (thread 0)", (0..ctas).map(|c| row(c, 3, 8)).collect());
        for j in 0..4 {
            show(&format!("phi run {j}: split begins"), (0..ctas).map(|c| row(c, 3, 2 * j)).collect());
            show(&format!("phi run {j}: split"), (0..ctas).map(|c| row(c, 3, 2 * j + 1)).collect());
        }
        show("first tile: loop top (math)", (0..ctas).map(|c| st[c * PC_STAMP_ROUNDS][0].0).collect());
        show("first tile: stage landed (math)", (0..ctas).map(|c| st[c * PC_STAMP_ROUNDS][1].0).collect());
        let last_round = |c: usize| rounds_of(c).clamp(1, ROUND_ROWS) - 1;
        show("last tile: loop top (math)", (0..ctas).map(|c| st[c * PC_STAMP_ROUNDS + last_round(c)][0].0).collect());
        show(
            "math warps at the end (latest warp)",
            (0..ctas).map(|c| (0..8).map(|w| last(c, w)).max().unwrap()).collect(),
        );
        show("coefficient warps at the end", (0..ctas).map(|c| last(c, 8).max(last(c, 9))).collect());
        show("mix warps at the end", (0..ctas).map(|c| last(c, 10).max(last(c, 11))).collect());
        show("past the closing cluster barrier", (0..ctas).map(|c| last(c, 12)).collect());
    }
}

/// Phase stamps of the logit-cluster kernel: needs the `pre_lc.stamps` timing build
/// (`tools/timing-pack.sh pre_lc.stamps`, then `--ignored profile_lc_phases`); a normal build
/// prints meaningless numbers. Per role (res: the h_res clusters' token CTAs, which run the
/// Sinkhorn; pre: every CTA of the h_pre / h_post clusters) and phase boundary: microseconds
/// after the earliest CTA started (%globaltimer), min / median / max over the CTAs.
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn profile_lc_phases() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("profile_lc_phases");
    // The last three only in the res role's tail (the token's rows summed, Z formed, the Sinkhorn
    // iterated); "done" follows the h_res store there.
    let names = [
        "start",
        "dependency",
        "loaded",
        "projected",
        "rows",
        "cluster",
        "gathered",
        "done",
        "summed",
        "z",
        "iterated",
    ];
    for (t, c, dtype) in [
        (1, 4096, Dtype::Bf16),
        (4, 4096, Dtype::Bf16),
        (16, 4096, Dtype::Bf16),
        (1, 7168, Dtype::Bf16),
        (16, 7168, Dtype::Bf16),
        (48, 4096, Dtype::Bf16),
        (64, 4096, Dtype::Bf16),
        (64, 7168, Dtype::Bf16),
        (65, 4096, Dtype::Bf16),
        (128, 4096, Dtype::Bf16),
        (128, 6144, Dtype::Bf16),
    ] {
        let mut cfg = Config::new(4, c);
        // MHC_PROFILE_ITERS=1 against the default 20 isolates the Sinkhorn loop's share.
        if let Some(it) = std::env::var("MHC_PROFILE_ITERS").ok().and_then(|v| v.parse().ok()) {
            cfg.sinkhorn_iters = it;
        }
        let mut r = ready(&dev, &mut rng, cfg, dtype, t, 64);
        // Room for the stamps at the few-token kernels' partial rows (a plan for 128 tokens).
        r.plan = catalogue_plan(&dev, cfg, dtype, 128).unwrap();
        r.ws = r.plan.new_workspace().unwrap();
        for repeat in 0..3 {
            for i in 0..64 {
                r.launch_mode(&s, i, Mode::Auto).unwrap();
            }
            s.synchronize().unwrap();
            let st = r.plan.debug_lc_stamps(&r.ws, t).unwrap();
            let t0 = st.iter().map(|c| c[0]).min().unwrap();
            println!("T={t} C={c} {dtype} repeat {repeat}: {} CTAs", st.len());
            for role in ["res", "pre"] {
                let ctas: Vec<&[u64; 16]> = st
                    .iter()
                    .enumerate()
                    .filter(|(i, _)| {
                        // the h_res clusters first (4 tokens each, 16 above 16 tokens, 32 above
                        // 64: thread 0 stamps the Sinkhorn of token rank), then the h_pre clusters
                        let (cluster, rank) = (i / 16, i % 16);
                        let group = if t > 64 {
                            32
                        } else if t > 16 {
                            16
                        } else {
                            4
                        };
                        let res_clusters = t.div_ceil(group);
                        if role == "res" {
                            cluster < res_clusters && rank < t.saturating_sub(group * cluster).min(group)
                        } else {
                            cluster >= res_clusters
                        }
                    })
                    .map(|(_, c)| c)
                    .collect();
                println!("  {role}: {} CTAs", ctas.len());
                if role == "res" {
                    // slots 11 / 12: %clock64 at "z" and "iterated": the Sinkhorn in SM cycles
                    let mut cycles: Vec<u64> = ctas.iter().map(|c| c[12].wrapping_sub(c[11])).collect();
                    cycles.sort_unstable();
                    println!("    Sinkhorn: {} cycles (median over the CTAs)", cycles[cycles.len() / 2]);
                }
                let stamped = if role == "res" { names.len() } else { 8 };
                let mut slots: Vec<(usize, &str)> = names.iter().copied().enumerate().take(stamped).collect();
                // pre_lc.xprobe builds: thread 255's plain load of the CTA's first x word, issued
                // (slot 14) and arrived (slot 13); other builds leave those slots unwritten
                let probed = |k: usize| ctas.iter().all(|c| c[k] >= t0 && c[k] - t0 < 1_000_000_000);
                if probed(13) && probed(14) {
                    slots.extend([(14, "x issued"), (13, "x arrived")]);
                }
                for (k, name) in slots {
                    let mut us: Vec<f64> = ctas.iter().map(|c| c[k].wrapping_sub(t0) as f64 / 1e3).collect();
                    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
                    println!("    {name:>10}: {:6.2} {:6.2} {:6.2} us", us[0], us[us.len() / 2], us[us.len() - 1]);
                }
            }
        }
    }
}

/// Where the few-token kernels' time goes, phase by phase (n = 4 and the mid_n8 entries). Needs a
/// timing build: `python3 -m asm.gen --experiment pre_decode.stamps`, the file it writes to
/// asm/gen/out/ptx/sm90 copied over asm/ptx/sm90 in a scratch checkout, `mhc asm`, then this test
/// (`--ignored profile_decode_phases`); a normal build prints meaningless numbers. For each
/// phase boundary: microseconds after the earliest CTA started (%globaltimer), min / median /
/// max over the CTAs, and the median per-CTA cycles since the previous boundary (%clock64).
#[test]
#[ignore = "benchmark: run with --ignored on a GPU machine"]
fn profile_decode_phases() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("profile_decode_phases");
    let decode = ["start", "loaded", "projected", "stored", "arrived", "reduced", "sinkhorn", "mixed"];
    // "arrived": thread 0's own poll of its token's rows done; "h_pre seen": every token's
    // tagged h_pre polled (mid).
    let mid = ["start", "loaded", "projected", "stored", "arrived", "reduced", "h_pre seen", "mixed"];
    for (n, t, c, dtype) in [
        (4, 1, 4104, Dtype::Bf16),
        (4, 17, 4096, Dtype::Bf16),
        (4, 1, 7176, Dtype::Bf16),
        (4, 17, 7168, Dtype::Bf16),
        (4, 64, 7176, Dtype::Bf16),
        (4, 64, 4096, Dtype::F32),
        (8, 1, 1280, Dtype::Bf16),
        (8, 16, 1280, Dtype::Bf16),
    ] {
        let mut cfg = Config::new(n, c);
        // MHC_PROFILE_ITERS=1 against the default 20 isolates the Sinkhorn loop's share.
        if let Some(it) = std::env::var("MHC_PROFILE_ITERS").ok().and_then(|v| v.parse().ok()) {
            cfg.sinkhorn_iters = it;
        }
        let mut r = ready(&dev, &mut rng, cfg, dtype, t, 64);
        // Room for the stamps after the partial rows (a plan for 64 tokens).
        r.plan = catalogue_plan(&dev, cfg, dtype, 64).unwrap();
        let is_mid = r.plan.pre_uses_mid_kernel(t);
        let names = if is_mid { mid } else { decode };
        r.ws = r.plan.new_workspace().unwrap();
        for round in 0..3 {
            for i in 0..64 {
                r.launch_mode(&s, i, Mode::Auto).unwrap();
            }
            s.synchronize().unwrap();
            let st = r.plan.debug_decode_stamps(&r.ws, t).unwrap();
            let t0 = st.iter().map(|c| c[0].0).min().unwrap();
            println!(
                "n={n} T={t} C={c} {dtype} round {round}: {} CTAs ({})",
                st.len(),
                if is_mid { "mid" } else { "decode" }
            );
            for (k, name) in names.iter().enumerate() {
                // Only the CTAs that pass this point write it (the reduce / Sinkhorn: CTAs < T).
                let ctas: Vec<&[(u64, u64); 8]> =
                    st.iter().filter(|c| k < 5 || c[k].0 >= t0 && c[k].0 < t0 + 1_000_000).collect();
                let mut us: Vec<f64> = ctas.iter().map(|c| (c[k].0 - t0) as f64 / 1e3).collect();
                us.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let mut cyc: Vec<u64> = if k == 0 {
                    vec![0]
                } else {
                    // Previous boundary of the same threads' path (decode: mix after arrival;
                    // mid: the second arrival after the first, every CTA passing both).
                    let prev = match (is_mid, k) {
                        (false, 7) | (true, 6) => 4,
                        _ => k - 1,
                    };
                    ctas.iter().map(|c| c[k].1.wrapping_sub(c[prev].1)).collect()
                };
                cyc.sort();
                if us.is_empty() {
                    continue;
                }
                println!(
                    "  {name:>9}: {:6.2} {:6.2} {:6.2} us   ({} CTAs, median {} cycles since the previous)",
                    us[0],
                    us[us.len() / 2],
                    us[us.len() - 1],
                    us.len(),
                    cyc[cyc.len() / 2]
                );
            }
        }
    }
}

/// `mhc inspect --explain` reports `planned_kernels` (the plan's selection without a device):
/// it must name exactly the kernels a plan on this GPU launches (the inspector once named the
/// GEMM kernel for n = 32 below 512 tokens, where the plan ran the general one).
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn planned_kernels_match_the_plan() {
    use mhc::device::cuda::planned_kernels;
    use mhc::Stage;
    let Some(dev) = gpu() else { return };
    let first = |plan: &Plan, stage: Stage, t: usize| -> Option<String> {
        plan.kernel_for(stage, t).ok().map(|b| b.entry().to_string())
    };
    let mut checked = 0;
    for n in [1, 4, 8, 16, 32] {
        for c in [256, 1280, 4096, 7168] {
            for dtype in [Dtype::Bf16, Dtype::F32] {
                for (gamma_k, gamma_f) in [(false, false), (true, false), (false, true)] {
                    let mut cfg = Config::new(n, c);
                    cfg.gamma_k = gamma_k;
                    cfg.gamma_f = gamma_f;
                    let plan = Plan::new(&dev, cfg, dtype, 8192).unwrap();
                    for stage in [Stage::Pre, Stage::Post, Stage::PostPre, Stage::Head, Stage::Static, Stage::Expand] {
                        for t in [1, 8, 9, 16, 17, 64, 65, 256, 511, 512, 2047, 2048, 8192] {
                            let want: Option<Vec<String>> = if stage == Stage::PostPre {
                                if plan.post_pre_is_fused(t) {
                                    first(&plan, stage, t).map(|e| vec![e])
                                } else {
                                    first(&plan, Stage::Post, t)
                                        .zip(first(&plan, Stage::Pre, t))
                                        .map(|(a, b)| vec![a, b])
                                }
                            } else {
                                first(&plan, stage, t).map(|e| vec![e])
                            };
                            let got = planned_kernels(
                                &dev.limits(),
                                Some(dev.name()),
                                &cfg,
                                dtype,
                                stage.name(),
                                t,
                                &mhc::Tuning::Embedded,
                            )
                            .ok()
                            .map(|k| k.into_iter().map(|k| k.entry).collect::<Vec<_>>());
                            assert_eq!(
                                got, want,
                                "{stage} T={t} n={n} C={c} {dtype} gamma_k={gamma_k} gamma_f={gamma_f}"
                            );
                            checked += 1;
                        }
                    }
                }
            }
        }
    }
    println!("{checked} (stage, shape) pairs: the inspector names the plan's kernels");
}

/// `pre` and then `post` on a residual of more than 2^31 elements (n = 4, C = 4096, bf16:
/// T = 2^17 + 3 tokens, 4.3 GB): the rows past element 2^31 must be addressed as correctly as the
/// first (docs/kernels/address-arithmetic.md). The residual is a cheap hash pattern (drawing 2^31
/// normals would take longer than the kernels); the float64 reference runs on the first tokens,
/// the tokens around element 2^31 and the last token, each output poisoned before its launch.
#[test]
#[ignore = "needs a GPU: tools/gpu-tests.sh runs it there, with no skipping"]
fn pre_and_post_past_2_31_elements() {
    let Some(dev) = gpu() else { return };
    let s = Stream::new(&dev).unwrap();
    let mut rng = common::rng("past_2_31");
    let cfg = Config::new(4, 4096);
    let (n, c, k) = (cfg.n, cfg.c, cfg.k());
    let dtype = Dtype::Bf16;
    let boundary = (1usize << 31) / k; // the first token whose row starts at element 2^31
    let t = boundary + 3;
    assert!(t * k > 1 << 31);
    let picked = [0, 1, boundary - 2, boundary - 1, boundary, boundary + 1, t - 1];

    // The residual: bf16 values in [-2, 2) from a multiplicative hash of the element index.
    let value = |i: usize| -> bf16 {
        let h = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        mhc::bf16_nearest((h as f64 / (1u64 << 24) as f64) * 4.0 - 2.0)
    };
    let x_host: Vec<bf16> = (0..t * k).map(value).collect();
    let x_dev = DeviceBuffer::from_slice(&dev, &x_host).unwrap();
    let row = |tok: usize| -> Vec<f64> { x_host[tok * k..(tok + 1) * k].iter().map(|v| v.to_f64()).collect() };

    // pre: parameters at docs/math.md's test distribution; the reference on the picked tokens.
    let mut case = stored(PreCase::random(&mut rng, cfg, picked.len(), 0.02), dtype);
    case.x = picked.iter().flat_map(|&tok| row(tok)).collect();
    let want = case.forward();
    let plan = catalogue_plan(&dev, cfg, dtype, t).unwrap();
    let ws = plan.new_workspace().unwrap();
    let din = dev_in(&dev, &case, dtype, k); // its small x is unused: the parameters
    let mut out = alloc_out(&dev, &cfg, dtype, t, c);
    out.poison(&s, dtype);
    let x = x_dev.view(dtype, Layout::dense(t, k));
    plan.pre(&s, &ws, &x, &din.params(&cfg), &mut out.views(&cfg, dtype, t)).unwrap();
    s.synchronize().unwrap();
    let a_bits: Vec<u16> = out.a.to_vec().unwrap();
    let (h_pre, h_post, h_res, inv) = (
        out.h_pre.to_vec::<f32>().unwrap(),
        out.h_post.to_vec::<f32>().unwrap(),
        out.h_res.to_vec::<f32>().unwrap(),
        out.inv.to_vec::<f32>().unwrap(),
    );
    let pick = |v: &[f32], width: usize| -> Vec<f64> {
        picked.iter().flat_map(|&tok| v[tok * width..(tok + 1) * width].iter().map(|&e| e as f64)).collect()
    };
    let got = PreOut {
        a: picked
            .iter()
            .flat_map(|&tok| a_bits[tok * c..(tok + 1) * c].iter().map(|&b| bf16::from_bits(b).to_f64()))
            .collect(),
        y: Vec::new(),
        h_pre: pick(&h_pre, n),
        h_post: pick(&h_post, n),
        h_res: pick(&h_res, n * n),
        inv_rms: pick(&inv, 1),
    };
    compare_skip(&format!("pre T = {t} (x past 2^31 elements) at tokens {picked:?}"), dtype, &got, &want, None);
    let (ratio, at) = common::elementwise_ratio(&got.a, &want.a, dtype);
    assert!(ratio <= 1.0, "pre a: element {at} of the picked tokens is {ratio:.2} times its bound");

    // post on the same residual, with pre's a as the sublayer output and its coefficients.
    let mut res = DeviceBuffer::alloc(&dev, t * k * dtype.size()).unwrap();
    res.fill_u32(&s, nan_pattern(dtype)).unwrap();
    plan.post(
        &s,
        &x_dev.view(dtype, Layout::streams(t, n, c)),
        &out.a.view(dtype, Layout::dense(t, c)),
        &out.h_post.view(Dtype::F32, Layout::dense(t, n)),
        &out.h_res.view(Dtype::F32, Layout::dense(t, n * n)),
        &mut res.view_mut(dtype, Layout::streams(t, n, c)),
    )
    .unwrap();
    s.synchronize().unwrap();
    let res_bits: Vec<u16> = res.to_vec().unwrap();
    let post_case = PostCase {
        cfg,
        t: picked.len(),
        x: case.x.clone(),
        f: got.a.clone(),
        h_post: got.h_post.clone(),
        h_res: got.h_res.clone(),
    };
    let want_post = post_case.forward();
    let got_post: Vec<f64> = picked
        .iter()
        .flat_map(|&tok| res_bits[tok * k..(tok + 1) * k].iter().map(|&b| bf16::from_bits(b).to_f64()))
        .collect();
    let (ratio, at) = common::elementwise_ratio(&got_post, &want_post, dtype);
    assert!(ratio <= 1.0, "post: element {at} of the picked tokens is {ratio:.2} times its bound");
    eprintln!("ok  pre and post at T = {t}, n = 4, C = 4096 ({} elements per residual)", t * k);
}
