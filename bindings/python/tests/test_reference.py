"""mhc.reference (the library's float64 reference on NumPy arrays) against docs/math.md written
independently in NumPy (mathref.py), on fresh random inputs."""

import mathref
import numpy as np
import pytest
from conftest import layer_params

import mhc
from mhc import reference as R


def close(got, want, tol):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    err = np.abs(got - want).max() if got.size else 0.0
    assert err <= tol, f"max |error| {err} > {tol}"


def test_version():
    assert mhc.__version__ == mhc.version()
    assert mhc.abi_version() == 1
    assert mhc.cuda_device_count() >= 0


@pytest.mark.parametrize("formulation", ["v4", "paper"])
@pytest.mark.parametrize("n,c,t", [(1, 8, 3), (2, 16, 1), (4, 64, 5), (8, 24, 2)])
def test_pre_matches_the_math(rng, formulation, n, c, t):
    x = rng.standard_normal((t, n, c))
    phi, scale, base = layer_params(rng, n, c, dtype=np.float64)
    got = R.pre(x, phi, scale, base, formulation=formulation)
    a, h_post, h_res, h_pre, inv_rms, y = mathref.pre(x, phi, scale, base, formulation=formulation)
    assert got.y is None and got.layer_input.dtype == np.float64
    close(got.layer_input, a, 1e-12)
    close(got.post, h_post, 1e-12)
    close(got.comb, h_res, 1e-12)
    close(got.pre, h_pre, 1e-12)
    close(got.inv_rms, inv_rms, 1e-12)


def test_pre_with_both_weights_and_leading_dims(rng):
    n, c = 4, 32
    x = rng.standard_normal((2, 3, n, c)).astype(np.float32)
    phi, scale, base = layer_params(rng, n, c)
    gk = (1 + 0.1 * rng.standard_normal(n * c)).astype(np.float32)
    gf = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
    got = R.pre(x, phi, scale, base, gamma_k=gk, gamma_f=gf, sinkhorn_iters=7, eps_norm=1e-5, eps_hc=1e-4, eps_f=1e-3)
    want = mathref.pre(x.reshape(6, n, c), phi, scale, base, gk, gf, "v4", 7, 1e-5, 1e-4, 1e-3)
    assert got.layer_input.shape == (2, 3, c) and got.comb.shape == (2, 3, n, n) and got.inv_rms.shape == (2, 3)
    assert got.layer_input.dtype == np.float32
    for g, w in zip(got, want):
        close(g.reshape(w.shape), w, 2e-5 * max(1.0, np.abs(w).max()))


def test_bf16_storage_rounds_activations_once(rng):
    n, c, t = 4, 64, 3
    x = rng.standard_normal((t, n, c)).astype(np.float32)
    phi, scale, base = layer_params(rng, n, c)
    got = R.pre(x, phi, scale, base, dtype="bf16")
    a, h_post, h_res, _, _, _ = mathref.pre(mathref.bf16_round(x), phi, scale, base)
    assert np.array_equal(got.layer_input, mathref.bf16_round(got.layer_input)), "a is stored as bf16"
    close(got.layer_input, a, 1e-2 * np.abs(a).max())
    close(got.post, h_post, 1e-5)
    close(got.comb, h_res, 1e-5)


@pytest.mark.parametrize("formulation", ["v4", "paper"])
def test_post_and_post_pre(rng, formulation):
    n, c, t = 4, 40, 6
    x = rng.standard_normal((t, n, c))
    f = rng.standard_normal((t, c))
    phi, scale, base = layer_params(rng, n, c, dtype=np.float64)
    first = R.pre(x, phi, scale, base, formulation=formulation)
    out = R.post(f, x, first.post, first.comb, formulation=formulation)
    close(out, mathref.post(x, f, first.post, first.comb, formulation), 1e-12)
    phi2, scale2, base2 = layer_params(rng, n, c, dtype=np.float64)
    both = R.post_pre(f, x, first.post, first.comb, phi2, scale2, base2, formulation=formulation)
    close(both.residual, out, 0.0)
    second = R.pre(out, phi2, scale2, base2, formulation=formulation)
    for name in ("layer_input", "post", "comb", "pre", "inv_rms"):
        close(getattr(both, name), getattr(second, name), 0.0)


def test_head_expand_static_sinkhorn(rng):
    n, c, t = 4, 48, 5
    x = rng.standard_normal((t, n, c))
    phi = 0.02 * rng.standard_normal((n, n * c))
    scale, base = rng.uniform(0.01, 1, 1), 0.1 * rng.standard_normal(n)
    close(R.head(x, phi, scale, base), mathref.head(x, phi, scale, base), 1e-12)
    close(R.hc_head(x, phi, scale, base), mathref.head(x, phi, scale, base), 1e-12)
    e = rng.standard_normal((2, 3, c)).astype(np.float32)
    ex = R.expand(e, n)
    assert ex.shape == (2, 3, n, c) and all(np.array_equal(ex[:, :, i], e) for i in range(n))
    hp, hpo, hr = 0.5 * rng.standard_normal(n), 0.5 * rng.standard_normal(n), 0.5 * rng.standard_normal((n, n))
    gamma = 1 + 0.1 * rng.standard_normal(c)
    close(R.static_layer(x, hp, hpo, hr, gamma), mathref.static_layer(x, hp, hpo, hr, gamma), 1e-12)
    logits = 0.5 * rng.standard_normal((3, n, n))
    h = R.sinkhorn(logits)
    close(h, mathref.sinkhorn(logits, "v4", 20, 1e-6), 1e-12)
    close(h.sum(-2), np.ones((3, n)), 1e-5)


def test_hc_pre_is_deepseek_v4s_triple(rng):
    n, c = 4, 16
    x = rng.standard_normal((2, n, c)).astype(np.float32)
    phi, scale, base = layer_params(rng, n, c)
    y, post, comb = R.hc_pre(x, phi, scale, base)
    r = R.pre(x, phi, scale, base)
    assert np.array_equal(y, r.layer_input) and np.array_equal(post, r.post) and np.array_equal(comb, r.comb)


def test_backward_stages_through_run(rng):
    n, c, t = 2, 8, 3
    x = rng.standard_normal((t, n, c))
    f = rng.standard_normal((t, c))
    h_post = 2 / (1 + np.exp(-rng.standard_normal((t, n))))
    h_res = rng.uniform(0.1, 1, (t, n, n))
    dout = rng.standard_normal((t, n, c))
    g = R.run("post-backward", {"x": x, "f": f, "h_post": h_post, "h_res": h_res, "dout": dout}, n=n, c=c, dtype="f64")
    close(g["df"], np.einsum("tk,tkc->tc", h_post, dout), 1e-12)
    close(g["dh_post"], np.einsum("tkc,tc->tk", dout, f), 1e-12)
