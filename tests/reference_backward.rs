//! Every backward of the reference against central finite differences of its own f64 forward
//! (docs/math.md "Backward": 1e-6 relative), with random upstream gradients, loss = sum(dout * out),
//! for several n, both formulations, the optional pre-norms and a large eps_hc (which makes
//! every `+ eps` path visible to the comparison).
#![allow(clippy::needless_range_loop)]

mod common;

use common::*;
use mhc::reference::{self, sinkhorn, testing::Rng, HeadGrads, PostGrads, PreGrads, PreUpstream, StaticGrads};
use mhc::{Config, Formulation, HostDataMut, HostTensor, HostTensorMut, Layout};

const TOL: f64 = 1e-6;

struct PreUp {
    da: Vec<f64>,
    dy: Vec<f64>,
    dh_pre: Vec<f64>,
    dh_post: Vec<f64>,
    dh_res: Vec<f64>,
    dinv_rms: Vec<f64>,
}

fn pre_loss(case: &PreCase, up: &PreUp) -> f64 {
    let o = case.forward();
    let mut l = weighted(&up.da, &o.a)
        + weighted(&up.dh_pre, &o.h_pre)
        + weighted(&up.dh_post, &o.h_post)
        + weighted(&up.dh_res, &o.h_res)
        + weighted(&up.dinv_rms, &o.inv_rms);
    if case.cfg.gamma_f {
        l += weighted(&up.dy, &o.y);
    }
    l
}

fn pre_case(rng: &mut Rng, cfg: Config, t: usize, phi_std: f64) {
    let label = format!(
        "pre n={} C={} {:?} gamma_k={} gamma_f={} eps_hc={}",
        cfg.n, cfg.c, cfg.formulation, cfg.gamma_k, cfg.gamma_f, cfg.eps_hc
    );
    let (n, c, k, m) = (cfg.n, cfg.c, cfg.k(), cfg.m());
    let mut case = PreCase::random(rng, cfg, t, phi_std);
    let up = PreUp {
        da: rng.normals(t * c, 1.0),
        dy: rng.normals(t * c, 1.0),
        dh_pre: rng.normals(t * n, 1.0),
        dh_post: rng.normals(t * n, 1.0),
        dh_res: rng.normals(t * n * n, 1.0),
        dinv_rms: rng.normals(t, 1.0),
    };
    let mut dx = vec![POISON; t * k];
    let (mut dphi, mut dscale, mut dbase) = (vec![POISON; m * k], vec![POISON; 3], vec![POISON; m]);
    let mut dgk = vec![POISON; k];
    let mut dgf = vec![POISON; c];
    {
        let ups = PreUpstream {
            da: Some(HostTensor::new(&up.da[..], Layout::dense(t, c))),
            dy: cfg.gamma_f.then(|| HostTensor::new(&up.dy[..], Layout::dense(t, c))),
            dh_pre: Some(HostTensor::new(&up.dh_pre[..], Layout::dense(t, n))),
            dh_post: HostTensor::new(&up.dh_post[..], Layout::dense(t, n)),
            dh_res: HostTensor::new(&up.dh_res[..], Layout::dense(t, n * n)),
            dinv_rms: Some(HostTensor::new(&up.dinv_rms[..], Layout::dense(t, 1))),
        };
        let mut g = PreGrads {
            dx: HostTensorMut::new(&mut dx[..], Layout::dense(t, k)),
            dphi: HostDataMut::F64(&mut dphi),
            dscale: HostDataMut::F64(&mut dscale),
            dbase: HostDataMut::F64(&mut dbase),
            dgamma_k: cfg.gamma_k.then(|| HostDataMut::F64(&mut dgk[..])),
            dgamma_f: cfg.gamma_f.then(|| HostDataMut::F64(&mut dgf[..])),
        };
        reference::pre_backward::<f64>(&cfg, &case.x(), &case.params(), &ups, &mut g).unwrap();
    }
    let loss = |c: &PreCase| pre_loss(c, &up);
    let f = PreCase::field;
    check_fd(&label, &mut case, f, "x", &dx, &loss, TOL);
    check_fd(&label, &mut case, f, "phi", &dphi, &loss, TOL);
    check_fd(&label, &mut case, f, "scale", &dscale, &loss, TOL);
    check_fd(&label, &mut case, f, "base", &dbase, &loss, TOL);
    if cfg.gamma_k {
        check_fd(&label, &mut case, f, "gamma_k", &dgk, &loss, TOL);
    }
    if cfg.gamma_f {
        check_fd(&label, &mut case, f, "gamma_f", &dgf, &loss, TOL);
    }
}

#[test]
fn pre_backward_matches_finite_differences() {
    let mut rng = rng("pre_backward_matches_finite_differences");
    for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
        for (n, c, t, iters, phi_std) in
            [(1, 5, 2, 20, 0.5), (2, 3, 3, 20, 0.5), (4, 3, 2, 20, 0.5), (4, 2, 1, 3, 0.02), (8, 2, 1, 7, 0.5)]
        {
            let cfg = Config { sinkhorn_iters: iters, ..Config::new(n, c).with_formulation(formulation) };
            pre_case(&mut rng, cfg, t, phi_std);
        }
        // Large eps: every `+ eps` (h_pre, softmax start, each Sinkhorn denominator, the column
        // max of the paper start) carries weight.
        let cfg = Config {
            eps_hc: 0.05,
            eps_norm: 0.1,
            sinkhorn_iters: 5,
            ..Config::new(4, 3).with_formulation(formulation)
        };
        pre_case(&mut rng, cfg, 2, 0.5);
    }
}

#[test]
fn pre_backward_with_prenorms_matches_finite_differences() {
    let mut rng = rng("pre_backward_with_prenorms_matches_finite_differences");
    for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
        for (gamma_k, gamma_f) in [(true, false), (false, true), (true, true)] {
            let cfg = Config {
                gamma_k,
                gamma_f,
                eps_f: 1e-3,
                sinkhorn_iters: 6,
                ..Config::new(2, 4).with_formulation(formulation)
            };
            pre_case(&mut rng, cfg, 2, 0.5);
        }
    }
}

#[test]
fn sinkhorn_backward_matches_finite_differences() {
    let mut rng = rng("sinkhorn_backward_matches_finite_differences");
    for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
        for (n, iters, eps) in [
            (1, 4, 1e-6),
            (2, 20, 1e-6),
            (4, 20, 1e-6),
            (8, 20, 1e-6),
            (16, 20, 1e-6),
            (32, 6, 1e-6),
            (4, 1, 0.1),
            (3, 9, 0.1),
        ] {
            let label = format!("sinkhorn {formulation:?} n={n} iters={iters} eps={eps}");
            let mut z = rng.normals(n * n, 2.0);
            let dh = rng.normals(n * n, 1.0);
            let mut dz = vec![POISON; n * n];
            sinkhorn::backward(formulation, iters, eps, &z, n, &dh, &mut dz).unwrap();
            let loss = |z: &Vec<f64>| {
                let mut h = vec![0.0; n * n];
                sinkhorn::forward(formulation, iters, eps, z, n, &mut h).unwrap();
                weighted(&dh, &h)
            };
            if n == 1 {
                // A 1x1 matrix normalizes to 1/(1+eps)-ish constants: the gradient is zero.
                assert!(max_abs(&dz) < 1e-12, "{label}: {dz:?}");
                continue;
            }
            check_fd(&label, &mut z, |z, _| z, "z", &dz.clone(), &loss, TOL);
        }
    }
}

#[test]
fn post_backward_matches_finite_differences() {
    let mut rng = rng("post_backward_matches_finite_differences");
    for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
        for (n, c, t) in [(1, 4, 2), (2, 3, 3), (4, 5, 2), (8, 2, 1)] {
            let cfg = Config::new(n, c).with_formulation(formulation);
            let label = format!("post {formulation:?} n={n} C={c}");
            let k = cfg.k();
            let mut case = PostCase::random(&mut rng, cfg, t);
            let dout = rng.normals(t * k, 1.0);
            let (mut dx, mut df, mut dhp, mut dhr) =
                (vec![POISON; t * k], vec![POISON; t * c], vec![POISON; t * n], vec![POISON; t * n * n]);
            let mut g = PostGrads {
                dx: HostTensorMut::new(&mut dx[..], Layout::dense(t, k)),
                df: HostTensorMut::new(&mut df[..], Layout::dense(t, c)),
                dh_post: HostTensorMut::new(&mut dhp[..], Layout::dense(t, n)),
                dh_res: HostTensorMut::new(&mut dhr[..], Layout::dense(t, n * n)),
            };
            reference::post_backward::<f64>(
                &cfg,
                &case.inputs(),
                &HostTensor::new(&dout[..], Layout::dense(t, k)),
                &mut g,
            )
            .unwrap();
            let loss = |c: &PostCase| weighted(&dout, &c.forward());
            check_fd(&label, &mut case, PostCase::field, "x", &dx, &loss, TOL);
            check_fd(&label, &mut case, PostCase::field, "f", &df, &loss, TOL);
            check_fd(&label, &mut case, PostCase::field, "h_post", &dhp, &loss, TOL);
            check_fd(&label, &mut case, PostCase::field, "h_res", &dhr, &loss, TOL);
        }
    }
}

#[test]
fn head_backward_matches_finite_differences() {
    let mut rng = rng("head_backward_matches_finite_differences");
    for (n, c, t, phi_std, eps_norm) in
        [(1, 4, 2, 0.5, 1e-6), (2, 3, 3, 0.5, 1e-6), (4, 3, 2, 0.02, 1e-6), (8, 2, 2, 0.5, 0.1)]
    {
        let cfg = Config { eps_norm, ..Config::new(n, c) };
        let label = format!("head n={n} C={c}");
        let k = cfg.k();
        let mut case = HeadCase::random(&mut rng, cfg, t, phi_std);
        let dout = rng.normals(t * c, 1.0);
        let (mut dx, mut dphi, mut dscale, mut dbase) =
            (vec![POISON; t * k], vec![POISON; n * k], vec![POISON; 1], vec![POISON; n]);
        let mut g = HeadGrads {
            dx: HostTensorMut::new(&mut dx[..], Layout::dense(t, k)),
            dphi: HostDataMut::F64(&mut dphi),
            dscale: HostDataMut::F64(&mut dscale),
            dbase: HostDataMut::F64(&mut dbase),
        };
        reference::head_backward::<f64>(
            &cfg,
            &case.x(),
            &case.params(),
            &HostTensor::new(&dout[..], Layout::dense(t, c)),
            &mut g,
        )
        .unwrap();
        let loss = |c: &HeadCase| weighted(&dout, &c.forward());
        check_fd(&label, &mut case, HeadCase::field, "x", &dx, &loss, TOL);
        check_fd(&label, &mut case, HeadCase::field, "phi", &dphi, &loss, TOL);
        check_fd(&label, &mut case, HeadCase::field, "scale", &dscale, &loss, TOL);
        check_fd(&label, &mut case, HeadCase::field, "base", &dbase, &loss, TOL);
    }
}

#[test]
fn static_backward_matches_finite_differences() {
    let mut rng = rng("static_backward_matches_finite_differences");
    for (n, c, t, iters, eps_f) in [(1, 4, 2, 20, 1e-6), (2, 3, 3, 20, 1e-6), (4, 5, 2, 20, 1e-3), (8, 2, 2, 5, 1e-6)] {
        let cfg = Config { sinkhorn_iters: iters, eps_f, ..Config::new(n, c) };
        let label = format!("static n={n} C={c}");
        let k = cfg.k();
        let mut case = StaticCase::random(&mut rng, cfg, t);
        let dout = rng.normals(t * k, 1.0);
        let mut dx = vec![POISON; t * k];
        let (mut dhp, mut dhpo, mut dhr, mut dg) =
            (vec![POISON; n], vec![POISON; n], vec![POISON; n * n], vec![POISON; c]);
        let mut g = StaticGrads {
            dx: HostTensorMut::new(&mut dx[..], Layout::dense(t, k)),
            dh_pre_logits: HostDataMut::F64(&mut dhp),
            dh_post_logits: HostDataMut::F64(&mut dhpo),
            dh_res_logits: HostDataMut::F64(&mut dhr),
            dgamma: HostDataMut::F64(&mut dg),
        };
        reference::static_backward::<f64>(
            &cfg,
            &case.x(),
            &case.params(),
            &HostTensor::new(&dout[..], Layout::dense(t, k)),
            &mut g,
        )
        .unwrap();
        let loss = |c: &StaticCase| weighted(&dout, &c.forward());
        check_fd(&label, &mut case, StaticCase::field, "x", &dx, &loss, TOL);
        check_fd(&label, &mut case, StaticCase::field, "h_pre_logits", &dhp, &loss, TOL);
        check_fd(&label, &mut case, StaticCase::field, "h_post_logits", &dhpo, &loss, TOL);
        if n > 1 {
            check_fd(&label, &mut case, StaticCase::field, "h_res_logits", &dhr, &loss, TOL);
        }
        check_fd(&label, &mut case, StaticCase::field, "gamma", &dg, &loss, TOL);
    }
}

#[test]
fn f32_arithmetic_backward_stays_close_to_f64() {
    let mut rng = rng("f32_arithmetic_backward_stays_close_to_f64");
    for formulation in [Formulation::DeepSeekV4, Formulation::Paper] {
        let cfg = Config::new(4, 64).with_formulation(formulation);
        let (t, n, c, k, m) = (3, 4, 64, cfg.k(), cfg.m());
        let case = PreCase::random(&mut rng, cfg, t, 0.02);
        let (da, dhp, dhr) = (rng.normals(t * c, 1.0), rng.normals(t * n, 1.0), rng.normals(t * n * n, 1.0));
        let run = |f64_math: bool| {
            let mut dx = vec![POISON; t * k];
            let (mut dphi, mut dscale, mut dbase) = (vec![POISON; m * k], vec![POISON; 3], vec![POISON; m]);
            let up = PreUpstream {
                da: Some(HostTensor::new(&da[..], Layout::dense(t, c))),
                dy: None,
                dh_pre: None,
                dh_post: HostTensor::new(&dhp[..], Layout::dense(t, n)),
                dh_res: HostTensor::new(&dhr[..], Layout::dense(t, n * n)),
                dinv_rms: None,
            };
            let mut g = PreGrads {
                dx: HostTensorMut::new(&mut dx[..], Layout::dense(t, k)),
                dphi: HostDataMut::F64(&mut dphi),
                dscale: HostDataMut::F64(&mut dscale),
                dbase: HostDataMut::F64(&mut dbase),
                dgamma_k: None,
                dgamma_f: None,
            };
            if f64_math {
                reference::pre_backward::<f64>(&cfg, &case.x(), &case.params(), &up, &mut g).unwrap();
            } else {
                reference::pre_backward::<f32>(&cfg, &case.x(), &case.params(), &up, &mut g).unwrap();
            }
            [dx, dphi, dscale, dbase]
        };
        let (a, b) = (run(true), run(false));
        for (name, x, y) in
            [("dx", &a[0], &b[0]), ("dphi", &a[1], &b[1]), ("dscale", &a[2], &b[2]), ("dbase", &a[3], &b[3])]
        {
            let e = rel_err(y, x);
            assert!(e < 1e-4 && e > 0.0, "{formulation:?} {name}: f32 vs f64 {e:e}");
        }
    }
}
