//! Shared helpers of the reference tests: random cases (docs/math.md's test distributions) and
//! thin wrappers that run a stage on dense f64 storage and return its outputs.
#![allow(dead_code, clippy::needless_range_loop)]

use mhc::reference::{self, testing::Rng, HeadParams, PostInputs, PreOutputs, PreParams, StaticParams};
use mhc::{Config, HostData, HostTensor, HostTensorMut, Layout};

/// The random source of `test`, its seed printed so a failure can be replayed.
pub fn rng(test: &str) -> Rng {
    Rng::new(Rng::test_seed(test))
}

/// What a GPU test does without a usable GPU: under the GPU machine's test command
/// (`MHC_REQUIRE_GPU=1`, tools/gpu-tests.sh) that is a failure; elsewhere (the GPU tests are
/// ignored by default, so a plain `cargo test` reports them as ignored) the test returns after
/// saying why.
pub fn no_gpu<T>(why: &dyn std::fmt::Display) -> Option<T> {
    assert!(std::env::var_os("MHC_REQUIRE_GPU").is_none(), "MHC_REQUIRE_GPU is set but there is no usable GPU: {why}");
    eprintln!("skipping: no usable CUDA GPU ({why})");
    None
}

/// Poison for outputs: any element a stage forgets to write fails the comparisons.
pub const POISON: f64 = f64::NAN;

/// `max` that NaN cannot defeat: a NaN on either side gives infinity (`f64::max` returns the
/// other operand, so an unwritten, NaN-poisoned element would pass).
pub fn nan_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::INFINITY
    } else {
        a.max(b)
    }
}

/// The largest |x|; infinite if any element is NaN (`f64::max` would skip it, and a NaN-poisoned
/// element a kernel never wrote must fail every comparison).
pub fn max_abs(v: &[f64]) -> f64 {
    v.iter().fold(0.0f64, |m, x| if x.is_nan() { f64::INFINITY } else { m.max(x.abs()) })
}

/// Element-wise bound of an activation output in storage `dtype`: every element within a few
/// storage rounding steps of `|ref| + rms(ref)` (bf16: 4 steps of 2^-8; f32: 1e-4, ten times
/// docs/math.md's relative L2 tolerance, since single elements of f32 sums of 16k terms reach a
/// few 1e-6). Returns the worst element's ratio to its bound (<= 1 passes) and its index; a
/// non-finite element gives infinity. A relative L2 norm alone lets thousands of elements of a
/// large tensor be completely wrong; this does not.
pub fn elementwise_ratio(got: &[f64], want: &[f64], dtype: mhc::Dtype) -> (f64, usize) {
    assert_eq!(got.len(), want.len());
    let unit = if dtype == mhc::Dtype::Bf16 { 4.0 * 2f64.powi(-8) } else { 1e-4 };
    let rms = (want.iter().map(|w| w * w).sum::<f64>() / want.len().max(1) as f64).sqrt();
    let mut worst = (0.0f64, 0usize);
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let r =
            if g.is_finite() { (g - w).abs() / (unit * (w.abs() + rms)).max(f64::MIN_POSITIVE) } else { f64::INFINITY };
        if r > worst.0 {
            worst = (r, i);
        }
    }
    worst
}

/// `max |a - b| / max |b|`.
pub fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let d =
        a.iter().zip(b).fold(0.0f64, |m, (x, y)| if (x - y).is_nan() { f64::INFINITY } else { m.max((x - y).abs()) });
    d / max_abs(b).max(f64::MIN_POSITIVE)
}

/// The inputs of `pre` (or of `post_pre`'s pre half), dense f64.
#[derive(Debug, Clone)]
pub struct PreCase {
    pub cfg: Config,
    pub t: usize,
    pub x: Vec<f64>,
    pub phi: Vec<f64>,
    pub scale: Vec<f64>,
    pub base: Vec<f64>,
    pub gamma_k: Option<Vec<f64>>,
    pub gamma_f: Option<Vec<f64>>,
}

/// `pre`'s outputs, dense f64.
#[derive(Debug, Clone, PartialEq)]
pub struct PreOut {
    pub a: Vec<f64>,
    pub y: Vec<f64>,
    pub h_pre: Vec<f64>,
    pub h_post: Vec<f64>,
    pub h_res: Vec<f64>,
    pub inv_rms: Vec<f64>,
}

impl PreOut {
    pub fn poisoned(cfg: &Config, t: usize) -> Self {
        let (n, c) = (cfg.n, cfg.c);
        PreOut {
            a: vec![POISON; t * c],
            y: vec![POISON; if cfg.gamma_f { t * c } else { 0 }],
            h_pre: vec![POISON; t * n],
            h_post: vec![POISON; t * n],
            h_res: vec![POISON; t * n * n],
            inv_rms: vec![POISON; t],
        }
    }
    pub fn views(&mut self, cfg: &Config, t: usize) -> PreOutputs<'_> {
        let (n, c) = (cfg.n, cfg.c);
        PreOutputs {
            a: HostTensorMut::new(&mut self.a[..], Layout::dense(t, c)),
            y: cfg.gamma_f.then(|| HostTensorMut::new(&mut self.y[..], Layout::dense(t, c))),
            h_pre: HostTensorMut::new(&mut self.h_pre[..], Layout::dense(t, n)),
            h_post: HostTensorMut::new(&mut self.h_post[..], Layout::dense(t, n)),
            h_res: HostTensorMut::new(&mut self.h_res[..], Layout::dense(t, n * n)),
            inv_rms: HostTensorMut::new(&mut self.inv_rms[..], Layout::dense(t, 1)),
        }
    }
}

impl PreCase {
    /// docs/math.md's distributions: x ~ N(0,1), phi ~ phi_std N(0,1), scale ~ U(0.01, 1),
    /// base ~ 0.1 N(0,1); gammas ~ 1 + 0.1 N(0,1).
    pub fn random(rng: &mut Rng, cfg: Config, t: usize, phi_std: f64) -> Self {
        let (n, c, k, m) = (cfg.n, cfg.c, cfg.k(), cfg.m());
        let _ = n;
        PreCase {
            cfg,
            t,
            x: rng.normals(t * k, 1.0),
            phi: rng.normals(m * k, phi_std),
            scale: rng.uniforms(3, 0.01, 1.0),
            base: rng.normals(m, 0.1),
            gamma_k: cfg.gamma_k.then(|| rng.normals(k, 0.1).iter().map(|g| 1.0 + g).collect()),
            gamma_f: cfg.gamma_f.then(|| rng.normals(c, 0.1).iter().map(|g| 1.0 + g).collect()),
        }
    }
    pub fn params(&self) -> PreParams<'_> {
        PreParams {
            phi: HostData::F64(&self.phi),
            scale: HostData::F64(&self.scale),
            base: HostData::F64(&self.base),
            gamma_k: self.gamma_k.as_deref().map(HostData::F64),
            gamma_f: self.gamma_f.as_deref().map(HostData::F64),
        }
    }
    pub fn x(&self) -> HostTensor<'_> {
        HostTensor::new(&self.x[..], Layout::dense(self.t, self.cfg.k()))
    }
    pub fn forward(&self) -> PreOut {
        let mut out = PreOut::poisoned(&self.cfg, self.t);
        reference::pre::<f64>(&self.cfg, &self.x(), &self.params(), &mut out.views(&self.cfg, self.t)).unwrap();
        out
    }
    pub fn field(&mut self, name: &str) -> &mut Vec<f64> {
        match name {
            "x" => &mut self.x,
            "phi" => &mut self.phi,
            "scale" => &mut self.scale,
            "base" => &mut self.base,
            "gamma_k" => self.gamma_k.as_mut().unwrap(),
            "gamma_f" => self.gamma_f.as_mut().unwrap(),
            _ => panic!("no field {name}"),
        }
    }
}

/// `post`'s inputs, dense f64; the coefficients come from a real `pre` so they are in range.
#[derive(Debug, Clone)]
pub struct PostCase {
    pub cfg: Config,
    pub t: usize,
    pub x: Vec<f64>,
    pub f: Vec<f64>,
    pub h_post: Vec<f64>,
    pub h_res: Vec<f64>,
}

impl PostCase {
    pub fn random(rng: &mut Rng, cfg: Config, t: usize) -> Self {
        let pre = PreCase::random(rng, Config { gamma_k: false, gamma_f: false, ..cfg }, t, 0.5).forward();
        PostCase {
            cfg,
            t,
            x: rng.normals(t * cfg.k(), 1.0),
            f: rng.normals(t * cfg.c, 1.0),
            h_post: pre.h_post,
            h_res: pre.h_res,
        }
    }
    pub fn inputs(&self) -> PostInputs<'_> {
        let (n, c, t) = (self.cfg.n, self.cfg.c, self.t);
        PostInputs {
            x: HostTensor::new(&self.x[..], Layout::dense(t, n * c)),
            f: HostTensor::new(&self.f[..], Layout::dense(t, c)),
            h_post: HostTensor::new(&self.h_post[..], Layout::dense(t, n)),
            h_res: HostTensor::new(&self.h_res[..], Layout::dense(t, n * n)),
        }
    }
    pub fn forward(&self) -> Vec<f64> {
        let mut out = vec![POISON; self.t * self.cfg.k()];
        let mut o = HostTensorMut::new(&mut out[..], Layout::dense(self.t, self.cfg.k()));
        reference::post::<f64>(&self.cfg, &self.inputs(), &mut o).unwrap();
        out
    }
    pub fn field(&mut self, name: &str) -> &mut Vec<f64> {
        match name {
            "x" => &mut self.x,
            "f" => &mut self.f,
            "h_post" => &mut self.h_post,
            "h_res" => &mut self.h_res,
            _ => panic!("no field {name}"),
        }
    }
}

/// `head`'s inputs, dense f64.
#[derive(Debug, Clone)]
pub struct HeadCase {
    pub cfg: Config,
    pub t: usize,
    pub x: Vec<f64>,
    pub phi: Vec<f64>,
    pub scale: Vec<f64>,
    pub base: Vec<f64>,
}

impl HeadCase {
    pub fn random(rng: &mut Rng, cfg: Config, t: usize, phi_std: f64) -> Self {
        let (n, k) = (cfg.n, cfg.k());
        HeadCase {
            cfg,
            t,
            x: rng.normals(t * k, 1.0),
            phi: rng.normals(n * k, phi_std),
            scale: rng.uniforms(1, 0.01, 1.0),
            base: rng.normals(n, 0.1),
        }
    }
    pub fn params(&self) -> HeadParams<'_> {
        HeadParams { phi: HostData::F64(&self.phi), scale: HostData::F64(&self.scale), base: HostData::F64(&self.base) }
    }
    pub fn x(&self) -> HostTensor<'_> {
        HostTensor::new(&self.x[..], Layout::dense(self.t, self.cfg.k()))
    }
    pub fn forward(&self) -> Vec<f64> {
        let mut out = vec![POISON; self.t * self.cfg.c];
        let mut o = HostTensorMut::new(&mut out[..], Layout::dense(self.t, self.cfg.c));
        reference::head::<f64>(&self.cfg, &self.x(), &self.params(), &mut o).unwrap();
        out
    }
    pub fn field(&mut self, name: &str) -> &mut Vec<f64> {
        match name {
            "x" => &mut self.x,
            "phi" => &mut self.phi,
            "scale" => &mut self.scale,
            "base" => &mut self.base,
            _ => panic!("no field {name}"),
        }
    }
}

/// The static layer's inputs, dense f64.
#[derive(Debug, Clone)]
pub struct StaticCase {
    pub cfg: Config,
    pub t: usize,
    pub x: Vec<f64>,
    pub h_pre_logits: Vec<f64>,
    pub h_post_logits: Vec<f64>,
    pub h_res_logits: Vec<f64>,
    pub gamma: Vec<f64>,
}

impl StaticCase {
    pub fn random(rng: &mut Rng, cfg: Config, t: usize) -> Self {
        let (n, c) = (cfg.n, cfg.c);
        StaticCase {
            cfg,
            t,
            x: rng.normals(t * n * c, 1.0),
            h_pre_logits: rng.normals(n, 1.0),
            h_post_logits: rng.normals(n, 1.0),
            h_res_logits: rng.normals(n * n, 1.0),
            gamma: rng.normals(c, 0.1).iter().map(|g| 1.0 + g).collect(),
        }
    }
    pub fn params(&self) -> StaticParams<'_> {
        StaticParams {
            h_pre_logits: HostData::F64(&self.h_pre_logits),
            h_post_logits: HostData::F64(&self.h_post_logits),
            h_res_logits: HostData::F64(&self.h_res_logits),
            gamma: HostData::F64(&self.gamma),
        }
    }
    pub fn x(&self) -> HostTensor<'_> {
        HostTensor::new(&self.x[..], Layout::dense(self.t, self.cfg.k()))
    }
    pub fn forward(&self) -> Vec<f64> {
        let mut out = vec![POISON; self.t * self.cfg.k()];
        let mut o = HostTensorMut::new(&mut out[..], Layout::dense(self.t, self.cfg.k()));
        reference::static_layer::<f64>(&self.cfg, &self.x(), &self.params(), &mut o).unwrap();
        out
    }
    pub fn field(&mut self, name: &str) -> &mut Vec<f64> {
        match name {
            "x" => &mut self.x,
            "h_pre_logits" => &mut self.h_pre_logits,
            "h_post_logits" => &mut self.h_post_logits,
            "h_res_logits" => &mut self.h_res_logits,
            "gamma" => &mut self.gamma,
            _ => panic!("no field {name}"),
        }
    }
}

/// `sum(w * v)`.
pub fn weighted(w: &[f64], v: &[f64]) -> f64 {
    assert_eq!(w.len(), v.len());
    w.iter().zip(v).map(|(a, b)| a * b).sum()
}

/// Central finite differences of `loss` with respect to every element of the field `name` of
/// `case`, compared with `analytic` to `tol` relative to the largest analytic element.
pub fn check_fd<C>(
    label: &str,
    case: &mut C,
    field: for<'a> fn(&'a mut C, &str) -> &'a mut Vec<f64>,
    name: &str,
    analytic: &[f64],
    loss: &dyn Fn(&C) -> f64,
    tol: f64,
) {
    let len = field(case, name).len();
    assert_eq!(len, analytic.len(), "{label}: d{name} length");
    let mut fd = vec![0.0; len];
    // Rounding noise of a central difference: ulps of the loss over the step. It only matters
    // where a gradient is genuinely ~0 (e.g. through a scale-invariant RMSNorm: static n = 1's
    // h_pre logits, ~1e-6). The loss is a weighted sum of many signed outputs, so its rounding
    // error scales with their magnitudes, not with the (often cancelled) sum: 16 ulps of the sum
    // failed 5 seeds in 300 there (|diff| up to 1.8e-10 at a 2.5e-6 gradient); 256 ulps (still
    // ~5e-9 absolute at a unit loss, far below what a wrong formula gives) fail none in 2000.
    let mut noise = 0.0f64;
    for i in 0..len {
        let orig = field(case, name)[i];
        // A step relative to the element: truncation ~h^2, rounding ~1e-16/h, both far below 1e-6.
        let h = 1e-5 * orig.abs().max(1.0);
        field(case, name)[i] = orig + h;
        let lp = loss(case);
        field(case, name)[i] = orig - h;
        let lm = loss(case);
        field(case, name)[i] = orig;
        fd[i] = (lp - lm) / (2.0 * h);
        noise = noise.max(256.0 * f64::EPSILON * lp.abs().max(lm.abs()) / h);
    }
    let scale = max_abs(&fd).max(max_abs(analytic));
    assert!(scale > 0.0, "{label}: d{name} is identically zero: the test would prove nothing");
    for i in 0..len {
        let err = (fd[i] - analytic[i]).abs();
        assert!(
            err <= tol * scale + noise,
            "{label}: d{name}[{i}]: analytic {} vs finite difference {} (|diff| {err:.3e}, scale {scale:.3e})",
            analytic[i],
            fd[i]
        );
    }
}
