//! `pre` (docs/math.md stages 1-3) and its backward: mixing logits with the RMS of the residual row,
//! the coefficients, Sinkhorn, the pre-apply `a = sum_i h_pre[i] x[i]` and the optional
//! F-pre-norm `y`. Also the per-token machinery `post_pre` and `head` reuse.

use super::check;
use super::par;
use super::real::{dot, sigmoid, Real};
use super::sinkhorn;
use crate::config::{Config, Dtype, Formulation};
use crate::error::{Error, Result};
use crate::tensor::{HostData, HostDataMut, HostTensor, HostTensorMut};

/// The parameters of `pre`: `phi[M, n*C]` row-major, `scale[3]`, `base[M]`, and the optional
/// pre-norm weights `gamma_k[n*C]` (present iff `cfg.gamma_k`) and `gamma_f[C]` (iff `cfg.gamma_f`).
#[derive(Debug, Clone, Copy)]
pub struct PreParams<'a> {
    pub phi: HostData<'a>,
    pub scale: HostData<'a>,
    pub base: HostData<'a>,
    pub gamma_k: Option<HostData<'a>>,
    pub gamma_f: Option<HostData<'a>>,
}

/// Where `pre` writes: `a`, and `y` (iff `cfg.gamma_f`): T rows of C, activation dtype;
/// `h_pre`, `h_post`: T rows of n; `h_res`: T rows of n*n; `inv_rms`: T rows of 1 (parameter dtype).
#[derive(Debug)]
pub struct PreOutputs<'a> {
    pub a: HostTensorMut<'a>,
    pub y: Option<HostTensorMut<'a>>,
    pub h_pre: HostTensorMut<'a>,
    pub h_post: HostTensorMut<'a>,
    pub h_res: HostTensorMut<'a>,
    pub inv_rms: HostTensorMut<'a>,
}

/// Upstream gradients of `pre-backward`. Without `gamma_f`, `da` is required and `dy` must be
/// absent; with `gamma_f`, `dy` is required and `da` (a gradient reaching `a` directly) is
/// optional. `dh_pre` and `dinv_rms` are optional (zero when absent).
#[derive(Debug, Clone, Copy)]
pub struct PreUpstream<'a> {
    pub da: Option<HostTensor<'a>>,
    pub dy: Option<HostTensor<'a>>,
    pub dh_pre: Option<HostTensor<'a>>,
    pub dh_post: HostTensor<'a>,
    pub dh_res: HostTensor<'a>,
    pub dinv_rms: Option<HostTensor<'a>>,
}

/// Where `pre-backward` writes: `dx` (T rows of n*C, activation dtype) and the parameter
/// gradients, summed over tokens in token order (`dgamma_k` iff `cfg.gamma_k`, `dgamma_f` iff
/// `cfg.gamma_f`).
#[derive(Debug)]
pub struct PreGrads<'a> {
    pub dx: HostTensorMut<'a>,
    pub dphi: HostDataMut<'a>,
    pub dscale: HostDataMut<'a>,
    pub dbase: HostDataMut<'a>,
    pub dgamma_k: Option<HostDataMut<'a>>,
    pub dgamma_f: Option<HostDataMut<'a>>,
}

/// Which of `scale[0..3]` multiplies logit `m`.
#[inline]
pub(crate) fn group(n: usize, m: usize) -> usize {
    if m < n {
        0
    } else if m < 2 * n {
        1
    } else {
        2
    }
}

/// `pre`'s parameters, validated and converted to `R`.
pub(crate) struct PreModel<R> {
    pub n: usize,
    pub c: usize,
    pub formulation: Formulation,
    pub iters: u32,
    pub eps_norm: R,
    pub eps_hc: R,
    pub eps_f: R,
    pub phi: Vec<R>,
    pub scale: Vec<R>,
    pub base: Vec<R>,
    pub gamma_k: Option<Vec<R>>,
    pub gamma_f: Option<Vec<R>>,
}

fn presence(name: &'static str, wanted: bool, present: bool, shape: &str) -> Result<()> {
    match (wanted, present) {
        (true, false) => Err(Error::shape(name, format!("{shape} (the configuration asks for {name})"), "absent")),
        (false, true) => Err(Error::shape(name, format!("absent (the configuration does not ask for {name})"), shape)),
        _ => Ok(()),
    }
}

impl<R: Real> PreModel<R> {
    /// Validates the parameters (`cfg` must already be valid) for activations stored as `act`.
    pub fn new(cfg: &Config, p: &PreParams<'_>, act: Dtype) -> Result<Self> {
        let (n, c, k, m) = (cfg.n, cfg.c, cfg.k(), cfg.m());
        let pdt = check::param_dtype(act);
        let phi = check::param("phi", &p.phi, m * k, &format!("[M={m}, n*C={k}]"), pdt)?;
        let scale = check::param("scale", &p.scale, 3, "[3]", pdt)?;
        let base = check::param("base", &p.base, m, &format!("[M={m}]"), pdt)?;
        presence("gamma_k", cfg.gamma_k, p.gamma_k.is_some(), &format!("[n*C={k}]"))?;
        presence("gamma_f", cfg.gamma_f, p.gamma_f.is_some(), &format!("[C={c}]"))?;
        let gamma_k = p.gamma_k.map(|g| check::param("gamma_k", &g, k, &format!("[n*C={k}]"), pdt)).transpose()?;
        let gamma_f = p.gamma_f.map(|g| check::param("gamma_f", &g, c, &format!("[C={c}]"), pdt)).transpose()?;
        Ok(PreModel {
            n,
            c,
            formulation: cfg.formulation,
            iters: cfg.sinkhorn_iters,
            eps_norm: R::from_f64(cfg.eps_norm),
            eps_hc: R::from_f64(cfg.eps_hc),
            eps_f: R::from_f64(cfg.eps_f),
            phi,
            scale,
            base,
            gamma_k,
            gamma_f,
        })
    }

    fn mixing(&self) -> Mixing<'_, R> {
        Mixing { n: self.n, phi: &self.phi, scale: &self.scale, gamma_k: self.gamma_k.as_deref() }
    }

    fn k(&self) -> usize {
        self.n * self.c
    }
    fn m(&self) -> usize {
        self.n * self.n + 2 * self.n
    }

    /// Stages 1-3 for one token's row `v` (length n*C), keeping what the backward needs.
    pub fn forward(&self, v: &[R], st: &mut PreState<R>) {
        let (n, c, k) = (self.n, self.c, self.k());
        st.inv_rms = inv_rms(v, self.eps_norm);
        match &self.gamma_k {
            Some(g) => {
                for i in 0..k {
                    st.u[i] = v[i] * g[i];
                }
            }
            None => st.u.copy_from_slice(v),
        }
        self.mixing().forward(&st.u, st.inv_rms, &self.base, &mut st.g, &mut st.z);
        let pre_eps = match self.formulation {
            Formulation::DeepSeekV4 => self.eps_hc,
            Formulation::Paper => R::ZERO,
        };
        for i in 0..n {
            st.h_pre[i] = sigmoid(st.z[i]) + pre_eps;
            st.h_post[i] = R::from_f64(2.0) * sigmoid(st.z[n + i]);
        }
        sinkhorn::forward_unchecked(self.formulation, self.iters, self.eps_hc, &st.z[2 * n..], n, &mut st.h_res);
        for ch in 0..c {
            let mut acc = R::ZERO;
            for i in 0..n {
                acc += st.h_pre[i] * v[i * c + ch];
            }
            st.a[ch] = acc;
        }
        if let Some(gf) = &self.gamma_f {
            st.inv_rms_f = inv_rms(&st.a, self.eps_f);
            for ch in 0..c {
                st.y[ch] = st.a[ch] * gf[ch] * st.inv_rms_f;
            }
        }
    }

    /// The backward of [`Self::forward`] for one token, `st` holding its forward. Writes `dv`
    /// (length n*C) and adds the parameter gradients into `acc`.
    pub fn backward(&self, v: &[R], st: &PreState<R>, up: &PreTokenUpstream<R>, acc: &mut PreAcc<R>, dv: &mut [R]) {
        let (n, c, m_total) = (self.n, self.c, self.m());
        let mut da = up.da.clone();
        if let Some(gf) = &self.gamma_f {
            // y = a * gamma_f * rf, rf = (mean(a^2) + eps_f)^-1/2:
            // da = gamma_f dy rf - a rf^3 mean(gamma_f dy a); dgamma_f = dy a rf.
            let rf = st.inv_rms_f;
            let mut mean = R::ZERO;
            for ch in 0..c {
                mean += gf[ch] * up.dy[ch] * st.a[ch];
            }
            mean /= R::from_usize(c);
            for ch in 0..c {
                da[ch] += gf[ch] * up.dy[ch] * rf - st.a[ch] * rf * rf * rf * mean;
            }
            if let Some(dgf) = acc.dgamma_f.as_mut() {
                for ch in 0..c {
                    dgf[ch] += up.dy[ch] * st.a[ch] * rf;
                }
            }
        }
        let mut dz = vec![R::ZERO; m_total];
        for i in 0..n {
            let xi = &v[i * c..(i + 1) * c];
            let dh_pre = up.dh_pre[i] + dot(&da, xi);
            for ch in 0..c {
                dv[i * c + ch] = st.h_pre[i] * da[ch];
            }
            let s = sigmoid(st.z[i]);
            dz[i] = dh_pre * s * (R::ONE - s);
            let hp = st.h_post[i];
            dz[n + i] = up.dh_post[i] * hp * (R::ONE - hp / R::from_f64(2.0));
        }
        sinkhorn::backward_unchecked(
            self.formulation,
            self.iters,
            self.eps_hc,
            &st.z[2 * n..],
            n,
            &up.dh_res,
            &mut dz[2 * n..],
        );
        self.mixing().backward(v, &st.u, &st.g, st.inv_rms, up.dinv_rms, &dz, acc, dv);
    }
}

/// The projection shared by `pre` (M = n^2 + 2n logits, 3 scales) and `head` (M = n, 1 scale).
pub(crate) struct Mixing<'a, R> {
    pub n: usize,
    /// `[M, K]` row-major.
    pub phi: &'a [R],
    /// One scale per logit group (3 for `pre`, 1 for `head`).
    pub scale: &'a [R],
    pub gamma_k: Option<&'a [R]>,
}

/// `1 / sqrt(sum(v^2) / len + eps)`.
pub(crate) fn inv_rms<R: Real>(v: &[R], eps: R) -> R {
    let mut ss = R::ZERO;
    for &e in v {
        ss += e * e;
    }
    R::ONE / (ss / R::from_usize(v.len()) + eps).sqrt()
}

impl<R: Real> Mixing<'_, R> {
    /// `g = (u . phi^T) * inv_rms` ("divide after the matmul") and `z = g * scale + base`.
    pub fn forward(&self, u: &[R], inv_rms: R, base: &[R], g: &mut [R], z: &mut [R]) {
        let k = u.len();
        let groups = self.scale.len();
        for m in 0..g.len() {
            g[m] = dot(u, &self.phi[m * k..(m + 1) * k]) * inv_rms;
            let grp = if groups == 1 { 0 } else { group(self.n, m) };
            z[m] = g[m] * self.scale[grp] + base[m];
        }
    }

    /// From `dz` (gradient of the pre-activation logits `z = g * scale + base`) to the
    /// gradients of `phi`, `scale`, `base`, `gamma_k` (added into `acc`) and of the row `v`
    /// (added into `dv`). `u = v * gamma_k` (or `v`), `g = (u . phi) * inv_rms`.
    #[allow(clippy::too_many_arguments)]
    pub fn backward(
        &self,
        v: &[R],
        u: &[R],
        g: &[R],
        inv_rms: R,
        dinv_rms: R,
        dz: &[R],
        acc: &mut PreAcc<R>,
        dv: &mut [R],
    ) {
        let k = v.len();
        let scale = self.scale;
        let groups = scale.len();
        let mut du = vec![R::ZERO; k];
        // d(inv_rms): through g = P * inv_rms (sum dg g / inv_rms) plus the upstream dinv_rms.
        let mut dr_times_r = dinv_rms * inv_rms;
        for (m, &dzm) in dz.iter().enumerate() {
            let grp = if groups == 1 { 0 } else { group(self.n, m) };
            let dg = dzm * scale[grp];
            acc.dscale[grp] += dzm * g[m];
            acc.dbase[m] += dzm;
            dr_times_r += dg * g[m];
            let dp = dg * inv_rms;
            let phi_m = &self.phi[m * k..(m + 1) * k];
            let dphi_m = &mut acc.dphi[m * k..(m + 1) * k];
            for i in 0..k {
                dphi_m[i] += dp * u[i];
                du[i] += dp * phi_m[i];
            }
        }
        if let (Some(gk), Some(dgk)) = (self.gamma_k, acc.dgamma_k.as_mut()) {
            for i in 0..k {
                dgk[i] += du[i] * v[i];
                du[i] *= gk[i];
            }
        }
        // inv_rms = (ss/K + eps)^-1/2: d inv_rms / d v_i = -inv_rms^3 v_i / K.
        let coef = -dr_times_r * inv_rms * inv_rms / R::from_usize(k);
        for i in 0..k {
            dv[i] += du[i] + coef * v[i];
        }
    }
}

/// One token's forward values (and the intermediates the backward reuses).
pub(crate) struct PreState<R> {
    pub u: Vec<R>,
    pub g: Vec<R>,
    pub z: Vec<R>,
    pub inv_rms: R,
    pub h_pre: Vec<R>,
    pub h_post: Vec<R>,
    pub h_res: Vec<R>,
    pub a: Vec<R>,
    pub inv_rms_f: R,
    pub y: Vec<R>,
}

impl<R: Real> PreState<R> {
    pub fn new(n: usize, c: usize) -> Self {
        PreState {
            u: vec![R::ZERO; n * c],
            g: vec![R::ZERO; n * n + 2 * n],
            z: vec![R::ZERO; n * n + 2 * n],
            inv_rms: R::ZERO,
            h_pre: vec![R::ZERO; n],
            h_post: vec![R::ZERO; n],
            h_res: vec![R::ZERO; n * n],
            a: vec![R::ZERO; c],
            inv_rms_f: R::ZERO,
            y: vec![R::ZERO; c],
        }
    }
}

/// One token's upstream gradients (zeros where absent).
pub(crate) struct PreTokenUpstream<R> {
    pub da: Vec<R>,
    pub dy: Vec<R>,
    pub dh_pre: Vec<R>,
    pub dh_post: Vec<R>,
    pub dh_res: Vec<R>,
    pub dinv_rms: R,
}

/// Parameter gradients summed over tokens.
pub(crate) struct PreAcc<R> {
    pub dphi: Vec<R>,
    pub dscale: Vec<R>,
    pub dbase: Vec<R>,
    pub dgamma_k: Option<Vec<R>>,
    pub dgamma_f: Option<Vec<R>>,
}

impl<R: Real> PreAcc<R> {
    pub fn zero(&mut self) {
        for v in [
            Some(&mut self.dphi),
            Some(&mut self.dscale),
            Some(&mut self.dbase),
            self.dgamma_k.as_mut(),
            self.dgamma_f.as_mut(),
        ]
        .into_iter()
        .flatten()
        {
            v.iter_mut().for_each(|e| *e = R::ZERO);
        }
    }
    /// `self += other`, element by element.
    pub fn add(&mut self, other: &PreAcc<R>) {
        let pairs = [
            (Some(&mut self.dphi), Some(&other.dphi)),
            (Some(&mut self.dscale), Some(&other.dscale)),
            (Some(&mut self.dbase), Some(&other.dbase)),
            (self.dgamma_k.as_mut(), other.dgamma_k.as_ref()),
            (self.dgamma_f.as_mut(), other.dgamma_f.as_ref()),
        ];
        for (a, b) in pairs {
            if let (Some(a), Some(b)) = (a, b) {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += *y;
                }
            }
        }
    }
}

/// Checks `pre`'s outputs for `t` tokens; `act` is the activation dtype.
pub(crate) fn check_outputs(cfg: &Config, out: &PreOutputs<'_>, t: usize, act: Dtype) -> Result<()> {
    let (n, c) = (cfg.n, cfg.c);
    let pdt = check::param_dtype(act);
    check::output("a", &out.a, t, c, act)?;
    match (&out.y, cfg.gamma_f) {
        (Some(y), true) => check::output("y", y, t, c, act)?,
        (None, false) => {}
        (None, true) => return Err(Error::shape("y", format!("{t} rows of {c} (gamma_f is set)"), "absent")),
        (Some(_), false) => return Err(Error::shape("y", "absent (gamma_f is not set)", "a tensor")),
    }
    check::output("h_pre", &out.h_pre, t, n, pdt)?;
    check::output("h_post", &out.h_post, t, n, pdt)?;
    check::output("h_res", &out.h_res, t, n * n, pdt)?;
    check::output("inv_rms", &out.inv_rms, t, 1, pdt)
}

fn write_token<R: Real>(out: &mut PreOutputs<'_>, ti: usize, st: &PreState<R>) {
    check::write_row(&mut out.a, ti, &st.a);
    if let Some(y) = out.y.as_mut() {
        check::write_row(y, ti, &st.y);
    }
    check::write_row(&mut out.h_pre, ti, &st.h_pre);
    check::write_row(&mut out.h_post, ti, &st.h_post);
    check::write_row(&mut out.h_res, ti, &st.h_res);
    check::write_row(&mut out.inv_rms, ti, &[st.inv_rms]);
}

/// Validates everything `pre` reads and writes for `x` (T rows of n*C); returns the model.
pub(crate) fn prepare<R: Real>(
    cfg: &Config,
    x: &HostTensor<'_>,
    p: &PreParams<'_>,
    out: &PreOutputs<'_>,
) -> Result<PreModel<R>> {
    cfg.validate()?;
    let t = x.layout.tokens;
    let act = x.data.dtype();
    check::input("x", x, t, cfg.k(), act)?;
    let model = PreModel::new(cfg, p, act)?;
    check_outputs(cfg, out, t, act)?;
    Ok(model)
}

/// Runs a validated `pre` over every token (chunks of tokens on all cores; outputs written in
/// token order on the calling thread).
pub(crate) fn run<R: Real>(model: &PreModel<R>, x: &HostTensor<'_>, out: &mut PreOutputs<'_>) {
    let (n, c) = (model.n, model.c);
    par::for_chunks(
        x.layout.tokens,
        || (vec![R::ZERO; n * c], (0..par::CHUNK).map(|_| PreState::new(n, c)).collect::<Vec<_>>()),
        |start, end, (v, states)| {
            for (ti, st) in (start..end).zip(states.iter_mut()) {
                check::read_row(x, ti, v);
                model.forward(v, st);
            }
        },
        |start, end, (_, states)| {
            for (ti, st) in (start..end).zip(states) {
                write_token(out, ti, st);
            }
        },
    );
}

/// `pre` (docs/math.md stages 1-3) for every token of `x` (T rows of n*C, possibly strided).
/// Validates the configuration, every shape, stride and dtype, and that the parameters are
/// finite, before writing anything.
pub fn pre<R: Real>(cfg: &Config, x: &HostTensor<'_>, p: &PreParams<'_>, out: &mut PreOutputs<'_>) -> Result<()> {
    let model = prepare::<R>(cfg, x, p, out)?;
    run(&model, x, out);
    Ok(())
}

/// The backward of [`pre`]: recomputes the forward per token, then reverses it exactly (docs/math.md
/// "Backward"). Parameter gradients are summed over tokens in token order.
pub fn pre_backward<R: Real>(
    cfg: &Config,
    x: &HostTensor<'_>,
    p: &PreParams<'_>,
    up: &PreUpstream<'_>,
    grads: &mut PreGrads<'_>,
) -> Result<()> {
    cfg.validate()?;
    let (n, c, k, m) = (cfg.n, cfg.c, cfg.k(), cfg.m());
    let t = x.layout.tokens;
    let act = x.data.dtype();
    let pdt = check::param_dtype(act);
    check::input("x", x, t, k, act)?;
    let model = PreModel::<R>::new(cfg, p, act)?;
    // Upstream gradients.
    match (cfg.gamma_f, &up.da, &up.dy) {
        (false, None, _) => return Err(Error::shape("da", format!("{t} rows of {c}"), "absent")),
        (false, _, Some(_)) => return Err(Error::shape("dy", "absent (gamma_f is not set)", "a tensor")),
        (true, _, None) => return Err(Error::shape("dy", format!("{t} rows of {c} (gamma_f is set)"), "absent")),
        _ => {}
    }
    if let Some(da) = &up.da {
        check::input("da", da, t, c, act)?;
    }
    if let Some(dy) = &up.dy {
        check::input("dy", dy, t, c, act)?;
    }
    if let Some(d) = &up.dh_pre {
        check::input("dh_pre", d, t, n, pdt)?;
    }
    check::input("dh_post", &up.dh_post, t, n, pdt)?;
    check::input("dh_res", &up.dh_res, t, n * n, pdt)?;
    if let Some(d) = &up.dinv_rms {
        check::input("dinv_rms", d, t, 1, pdt)?;
    }
    // Outputs.
    check::output("dx", &grads.dx, t, k, act)?;
    check::param_output("dphi", &grads.dphi, m * k, &format!("[M={m}, n*C={k}]"), pdt)?;
    check::param_output("dscale", &grads.dscale, 3, "[3]", pdt)?;
    check::param_output("dbase", &grads.dbase, m, &format!("[M={m}]"), pdt)?;
    presence("dgamma_k", cfg.gamma_k, grads.dgamma_k.is_some(), &format!("[n*C={k}]"))?;
    presence("dgamma_f", cfg.gamma_f, grads.dgamma_f.is_some(), &format!("[C={c}]"))?;
    if let Some(d) = &grads.dgamma_k {
        check::param_output("dgamma_k", d, k, &format!("[n*C={k}]"), pdt)?;
    }
    if let Some(d) = &grads.dgamma_f {
        check::param_output("dgamma_f", d, c, &format!("[C={c}]"), pdt)?;
    }

    // Per chunk of tokens (on all cores): the forward again, the backward, dx rows and the
    // chunk's parameter-gradient sums; then, in chunk order, dx is written and the chunk sums
    // are added to the totals. The reduction order is fixed by the chunk size alone.
    let new_acc = || PreAcc {
        dphi: vec![R::ZERO; m * k],
        dscale: vec![R::ZERO; 3],
        dbase: vec![R::ZERO; m],
        dgamma_k: cfg.gamma_k.then(|| vec![R::ZERO; k]),
        dgamma_f: cfg.gamma_f.then(|| vec![R::ZERO; c]),
    };
    struct Chunk<R> {
        v: Vec<R>,
        st: PreState<R>,
        tu: PreTokenUpstream<R>,
        acc: PreAcc<R>,
        dv: Vec<Vec<R>>,
    }
    let mut total = new_acc();
    par::for_chunks(
        t,
        || Chunk {
            v: vec![R::ZERO; k],
            st: PreState::new(n, c),
            tu: PreTokenUpstream {
                da: vec![R::ZERO; c],
                dy: vec![R::ZERO; c],
                dh_pre: vec![R::ZERO; n],
                dh_post: vec![R::ZERO; n],
                dh_res: vec![R::ZERO; n * n],
                dinv_rms: R::ZERO,
            },
            acc: new_acc(),
            dv: (0..par::CHUNK).map(|_| vec![R::ZERO; k]).collect(),
        },
        |start, end, ch| {
            ch.acc.zero();
            for (ti, dv) in (start..end).zip(ch.dv.iter_mut()) {
                let tu = &mut ch.tu;
                check::read_row(x, ti, &mut ch.v);
                if let Some(d) = &up.da {
                    check::read_row(d, ti, &mut tu.da);
                }
                if let Some(d) = &up.dy {
                    check::read_row(d, ti, &mut tu.dy);
                }
                if let Some(d) = &up.dh_pre {
                    check::read_row(d, ti, &mut tu.dh_pre);
                }
                check::read_row(&up.dh_post, ti, &mut tu.dh_post);
                check::read_row(&up.dh_res, ti, &mut tu.dh_res);
                if let Some(d) = &up.dinv_rms {
                    tu.dinv_rms = R::from_f64(d.at(ti, 0));
                }
                model.forward(&ch.v, &mut ch.st);
                model.backward(&ch.v, &ch.st, tu, &mut ch.acc, dv);
            }
        },
        |start, end, ch| {
            for (ti, dv) in (start..end).zip(&ch.dv) {
                check::write_row(&mut grads.dx, ti, dv);
            }
            total.add(&ch.acc);
        },
    );
    let acc = total;
    check::write_all(&mut grads.dphi, &acc.dphi);
    check::write_all(&mut grads.dscale, &acc.dscale);
    check::write_all(&mut grads.dbase, &acc.dbase);
    if let (Some(d), Some(a)) = (grads.dgamma_k.as_mut(), &acc.dgamma_k) {
        check::write_all(d, a);
    }
    if let (Some(d), Some(a)) = (grads.dgamma_f.as_mut(), &acc.dgamma_f) {
        check::write_all(d, a);
    }
    Ok(())
}
