//! The static layer of the mHC.cu parity benchmark (docs/math.md "Static layer") and its backward.
//! Coefficients come from per-layer logits shared by every token: `h_pre = sigma(H_pre)` (no
//! eps), `h_post = 2 sigma(H_post)`, `h_res = Sinkhorn(H_res)` with the paper's start and order
//! whatever `cfg.formulation` says (that is what mHC.cu computes); F is an RMSNorm with weight
//! `gamma[C]` and `cfg.eps_f`; `h_res` is applied untransposed.

use super::check;
use super::pre::inv_rms;
use super::real::{dot, sigmoid, Real};
use super::sinkhorn;
use crate::config::{Config, Dtype, Formulation};
use crate::error::Result;
use crate::tensor::{HostData, HostDataMut, HostTensor, HostTensorMut};

/// The parameters of the static layer: `h_pre_logits[n]`, `h_post_logits[n]`,
/// `h_res_logits[n, n]` row-major, `gamma[C]`.
#[derive(Debug, Clone, Copy)]
pub struct StaticParams<'a> {
    pub h_pre_logits: HostData<'a>,
    pub h_post_logits: HostData<'a>,
    pub h_res_logits: HostData<'a>,
    pub gamma: HostData<'a>,
}

/// Where `static-backward` writes: `dx` (T rows of n*C) and the gradients of the four
/// parameters, summed over tokens in token order.
#[derive(Debug)]
pub struct StaticGrads<'a> {
    pub dx: HostTensorMut<'a>,
    pub dh_pre_logits: HostDataMut<'a>,
    pub dh_post_logits: HostDataMut<'a>,
    pub dh_res_logits: HostDataMut<'a>,
    pub dgamma: HostDataMut<'a>,
}

struct StaticModel<R> {
    n: usize,
    c: usize,
    iters: u32,
    eps_hc: R,
    eps_f: R,
    hp_logits: Vec<R>,
    hpo_logits: Vec<R>,
    hr_logits: Vec<R>,
    gamma: Vec<R>,
    h_pre: Vec<R>,
    h_post: Vec<R>,
    h_res: Vec<R>,
}

/// One token's forward.
struct StaticState<R> {
    a: Vec<R>,
    r: R,
    y: Vec<R>,
    out: Vec<R>,
}

impl<R: Real> StaticModel<R> {
    fn new(cfg: &Config, x: &HostTensor<'_>, p: &StaticParams<'_>) -> Result<(Self, usize, Dtype)> {
        cfg.validate()?;
        let (n, c) = (cfg.n, cfg.c);
        let t = x.layout.tokens;
        let act = x.data.dtype();
        let pdt = check::param_dtype(act);
        check::input("x", x, t, cfg.k(), act)?;
        let hp_logits = check::param("h_pre_logits", &p.h_pre_logits, n, &format!("[n={n}]"), pdt)?;
        let hpo_logits = check::param("h_post_logits", &p.h_post_logits, n, &format!("[n={n}]"), pdt)?;
        let hr_logits = check::param("h_res_logits", &p.h_res_logits, n * n, &format!("[n={n}, n={n}]"), pdt)?;
        let gamma = check::param("gamma", &p.gamma, c, &format!("[C={c}]"), pdt)?;
        let eps_hc = R::from_f64(cfg.eps_hc);
        let h_pre = hp_logits.iter().map(|&z| sigmoid(z)).collect();
        let h_post = hpo_logits.iter().map(|&z| R::from_f64(2.0) * sigmoid(z)).collect();
        let mut h_res = vec![R::ZERO; n * n];
        sinkhorn::forward_unchecked(Formulation::Paper, cfg.sinkhorn_iters, eps_hc, &hr_logits, n, &mut h_res);
        let model = StaticModel {
            n,
            c,
            iters: cfg.sinkhorn_iters,
            eps_hc,
            eps_f: R::from_f64(cfg.eps_f),
            hp_logits,
            hpo_logits,
            hr_logits,
            gamma,
            h_pre,
            h_post,
            h_res,
        };
        Ok((model, t, act))
    }

    fn state(&self) -> StaticState<R> {
        let (n, c) = (self.n, self.c);
        StaticState { a: vec![R::ZERO; c], r: R::ZERO, y: vec![R::ZERO; c], out: vec![R::ZERO; n * c] }
    }

    fn forward(&self, v: &[R], st: &mut StaticState<R>) {
        let (n, c) = (self.n, self.c);
        for ch in 0..c {
            let mut acc = R::ZERO;
            for i in 0..n {
                acc += self.h_pre[i] * v[i * c + ch];
            }
            st.a[ch] = acc;
        }
        st.r = inv_rms(&st.a, self.eps_f);
        for ch in 0..c {
            st.y[ch] = st.a[ch] * self.gamma[ch] * st.r;
        }
        for i in 0..n {
            for ch in 0..c {
                let mut acc = R::ZERO;
                for j in 0..n {
                    acc += self.h_res[i * n + j] * v[j * c + ch];
                }
                st.out[i * c + ch] = acc + self.h_post[i] * st.y[ch];
            }
        }
    }
}

/// The static layer forward for every token of `x` (T rows of n*C); `out` is T rows of n*C.
pub fn static_layer<R: Real>(
    cfg: &Config,
    x: &HostTensor<'_>,
    p: &StaticParams<'_>,
    out: &mut HostTensorMut<'_>,
) -> Result<()> {
    let (model, t, act) = StaticModel::<R>::new(cfg, x, p)?;
    check::output("out", out, t, cfg.k(), act)?;
    let mut v = vec![R::ZERO; cfg.k()];
    let mut st = model.state();
    for ti in 0..t {
        check::read_row(x, ti, &mut v);
        model.forward(&v, &mut st);
        check::write_row(out, ti, &st.out);
    }
    Ok(())
}

/// The backward of [`static_layer`] for upstream `dout` (T rows of n*C). The coefficient
/// gradients are summed over tokens, then taken through the sigmoids and the exact Sinkhorn
/// reverse (paper start and order).
pub fn static_backward<R: Real>(
    cfg: &Config,
    x: &HostTensor<'_>,
    p: &StaticParams<'_>,
    dout: &HostTensor<'_>,
    grads: &mut StaticGrads<'_>,
) -> Result<()> {
    let (model, t, act) = StaticModel::<R>::new(cfg, x, p)?;
    let (n, c, k) = (cfg.n, cfg.c, cfg.k());
    let pdt = check::param_dtype(act);
    check::input("dout", dout, t, k, act)?;
    check::output("dx", &grads.dx, t, k, act)?;
    check::param_output("dh_pre_logits", &grads.dh_pre_logits, n, &format!("[n={n}]"), pdt)?;
    check::param_output("dh_post_logits", &grads.dh_post_logits, n, &format!("[n={n}]"), pdt)?;
    check::param_output("dh_res_logits", &grads.dh_res_logits, n * n, &format!("[n={n}, n={n}]"), pdt)?;
    check::param_output("dgamma", &grads.dgamma, c, &format!("[C={c}]"), pdt)?;
    let (mut dh_pre, mut dh_post, mut dh_res) = (vec![R::ZERO; n], vec![R::ZERO; n], vec![R::ZERO; n * n]);
    let mut dgamma = vec![R::ZERO; c];
    let mut v = vec![R::ZERO; k];
    let mut d = vec![R::ZERO; k];
    let mut dv = vec![R::ZERO; k];
    let (mut dy, mut da) = (vec![R::ZERO; c], vec![R::ZERO; c]);
    let mut st = model.state();
    for ti in 0..t {
        check::read_row(x, ti, &mut v);
        check::read_row(dout, ti, &mut d);
        model.forward(&v, &mut st);
        // out[i] = sum_j h_res[i][j] x[j] + h_post[i] y.
        for ch in 0..c {
            let mut acc = R::ZERO;
            for i in 0..n {
                acc += model.h_post[i] * d[i * c + ch];
            }
            dy[ch] = acc;
        }
        for i in 0..n {
            let di = &d[i * c..(i + 1) * c];
            dh_post[i] += dot(di, &st.y);
            for j in 0..n {
                dh_res[i * n + j] += dot(di, &v[j * c..(j + 1) * c]);
            }
        }
        for j in 0..n {
            for ch in 0..c {
                let mut acc = R::ZERO;
                for i in 0..n {
                    acc += model.h_res[i * n + j] * d[i * c + ch];
                }
                dv[j * c + ch] = acc;
            }
        }
        // y = a gamma r: da = gamma dy r - a r^3 mean(gamma dy a); dgamma = dy a r.
        let r = st.r;
        let mut mean = R::ZERO;
        for ch in 0..c {
            mean += model.gamma[ch] * dy[ch] * st.a[ch];
            dgamma[ch] += dy[ch] * st.a[ch] * r;
        }
        mean /= R::from_usize(c);
        for ch in 0..c {
            da[ch] = model.gamma[ch] * dy[ch] * r - st.a[ch] * r * r * r * mean;
        }
        // a = sum_i h_pre[i] x[i].
        for i in 0..n {
            dh_pre[i] += dot(&da, &v[i * c..(i + 1) * c]);
            for ch in 0..c {
                dv[i * c + ch] += model.h_pre[i] * da[ch];
            }
        }
        check::write_row(&mut grads.dx, ti, &dv);
    }
    let mut d_hp = vec![R::ZERO; n];
    let mut d_hpo = vec![R::ZERO; n];
    for i in 0..n {
        let s = sigmoid(model.hp_logits[i]);
        d_hp[i] = dh_pre[i] * s * (R::ONE - s);
        let s = sigmoid(model.hpo_logits[i]);
        d_hpo[i] = dh_post[i] * R::from_f64(2.0) * s * (R::ONE - s);
    }
    let mut d_hr = vec![R::ZERO; n * n];
    sinkhorn::backward_unchecked(
        Formulation::Paper,
        model.iters,
        model.eps_hc,
        &model.hr_logits,
        n,
        &dh_res,
        &mut d_hr,
    );
    check::write_all(&mut grads.dh_pre_logits, &d_hp);
    check::write_all(&mut grads.dh_post_logits, &d_hpo);
    check::write_all(&mut grads.dh_res_logits, &d_hr);
    check::write_all(&mut grads.dgamma, &dgamma);
    Ok(())
}
