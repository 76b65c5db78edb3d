"""The float64 reference of every mHC stage on NumPy arrays (docs/math.md), computed by the same
Rust code that every kernel is tested against. Works without torch and without a GPU.

Shapes follow DeepSeek-V4: the residual stream is `[..., n, C]` (`n = hc_mult`), the mixing
parameters `hc_fn [n*n + 2n, n*C]`, `hc_scale [3]`, `hc_base [n*n + 2n]`. `dtype` is the storage the
reference emulates: `"f32"` (default for float32 input), `"f64"` (float64 input) or `"bf16"`
(activations rounded to bfloat16 once, as a bf16 kernel stores them). Outputs are float64 arrays
for `"f64"`, float32 otherwise (bf16 values are exact in float32).
"""

from collections import namedtuple

import numpy as np

from . import _native
from ._config import (
    check_config,
    check_post_inputs,
    check_pre_params,
    expect_shape,
    formulation_name,
    residual_dims,
)
from ._errors import DtypeError, ShapeError

Pre = namedtuple("Pre", ["layer_input", "post", "comb", "pre", "inv_rms", "y"])
Pre.__doc__ = """What `pre` returns: `layer_input [..., C]` (the sublayer's input), `post [..., n]` and
`comb [..., n, n]` (the coefficients `post` takes), `pre [..., n]`, `inv_rms [...]`, and `y [..., C]`
(the RMSNorm of the layer input with `gamma_f`; None without)."""
PostPre = namedtuple("PostPre", ["residual", "layer_input", "post", "comb", "pre", "inv_rms", "y"])
PostPre.__doc__ = """What `post_pre` returns: the new `residual [..., n, C]` of the boundary and the
next layer's `pre` outputs (as `Pre`)."""

_DTYPES = {"f32", "bf16", "f64"}


def _dtype(arr, dtype):
    if dtype is None:
        if arr.dtype == np.float64:
            return "f64"
        if arr.dtype == np.float32:
            return "f32"
        raise DtypeError(f"residual: float32 or float64 arrays (or dtype='bf16' to emulate bf16 storage), got {arr.dtype}")
    if dtype not in _DTYPES:
        raise DtypeError(f"dtype must be one of 'f32', 'bf16', 'f64', got {dtype!r}")
    return dtype


def _array(name, a):
    if a is None:
        return None
    arr = np.asarray(a)
    if arr.dtype.kind not in "fiu":
        raise DtypeError(f"{name}: expected a real-valued array, got dtype {arr.dtype}")
    return arr


def _pack(name, a):
    a = np.ascontiguousarray(a, dtype=np.float64)
    return (list(a.shape), a.tobytes())


def run(stage, inputs, *, n, c, dtype="f32", formulation="v4", sinkhorn_iters=20, eps_norm=1e-6, eps_hc=1e-6, eps_f=1e-6):
    """Any stage of the reference (`pre`, `post`, `post_pre`, `head`, `expand`, `static`,
    `sinkhorn` and the backward stages `pre-backward`, `post-backward`, `head-backward`,
    `static-backward`) on inputs named as `mhc run` names them (`x`, `phi`, `scale`, `base`,
    `gamma_k`, `gamma_f`, `f`, `h_post`, `h_res`, `e`, `logits`, ..., each with its exact shape);
    returns the outputs by name as float64 arrays."""
    check_config(sinkhorn_iters, eps_norm, eps_hc, eps_f)
    if dtype not in _DTYPES:
        raise DtypeError(f"dtype must be one of 'f32', 'bf16', 'f64', got {dtype!r}")
    packed = {k: _pack(k, _array(k, v)) for k, v in inputs.items() if v is not None}
    out = _native.reference(
        str(stage), packed, int(n), int(c), dtype, formulation_name(formulation), int(sinkhorn_iters),
        float(eps_norm), float(eps_hc), float(eps_f),
    )
    return {k: np.frombuffer(data, dtype=np.float64).reshape(shape) for k, (shape, data) in out.items()}


def _out(a, dtype, shape):
    a = a.reshape(shape)
    return a if dtype == "f64" else a.astype(np.float32)


def _opts(formulation, sinkhorn_iters, eps_norm, eps_hc, eps_f):
    return dict(formulation=formulation, sinkhorn_iters=sinkhorn_iters, eps_norm=eps_norm, eps_hc=eps_hc, eps_f=eps_f)


def pre(residual, hc_fn, hc_scale, hc_base, *, gamma_k=None, gamma_f=None, dtype=None, formulation="v4",
        sinkhorn_iters=20, eps_norm=1e-6, eps_hc=1e-6, eps_f=1e-6):
    """`pre` (docs/math.md stages 1-3; DeepSeek-V4 `hc_pre`): the layer input and coefficients of
    `residual [..., n, C]` with `hc_fn [n*n+2n, n*C]`, `hc_scale [3]`, `hc_base [n*n+2n]`, the
    optional pre-norm weights `gamma_k [n*C]` and `gamma_f [C]`. Returns `Pre`."""
    residual = _array("residual", residual)
    t, n, c, lead = residual_dims("residual", residual.shape)
    dt = _dtype(residual, dtype)
    hc_fn, hc_scale, hc_base = _array("hc_fn", hc_fn), _array("hc_scale", hc_scale), _array("hc_base", hc_base)
    gamma_k, gamma_f = _array("gamma_k", gamma_k), _array("gamma_f", gamma_f)
    check_pre_params(n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f)
    out = run("pre", {"x": residual.reshape(t, n, c), "phi": hc_fn, "scale": hc_scale, "base": hc_base,
                      "gamma_k": gamma_k, "gamma_f": gamma_f},
              n=n, c=c, dtype=dt, **_opts(formulation, sinkhorn_iters, eps_norm, eps_hc, eps_f))
    return _pre_result(out, dt, lead, n, c)


def _pre_result(out, dt, lead, n, c):
    y = _out(out["y"], dt, lead + (c,)) if "y" in out else None
    return Pre(_out(out["a"], dt, lead + (c,)), _out(out["h_post"], dt, lead + (n,)),
               _out(out["h_res"], dt, lead + (n, n)), _out(out["h_pre"], dt, lead + (n,)),
               _out(out["inv_rms"], dt, lead), y)


def post(x, residual, post, comb, *, dtype=None, formulation="v4"):
    """`post` (docs/math.md stage 4; DeepSeek-V4 `hc_post`, FlashInfer `mhc_post`): the new residual
    `[..., n, C]` from the sublayer output `x [..., C]`, the old `residual [..., n, C]` and the
    coefficients `post [..., n]`, `comb [..., n, n]` of its `pre` (V4: `out[k] = post[k] x +
    sum_j comb[j][k] residual[j]`)."""
    residual, x = _array("residual", residual), _array("x", x)
    post_, comb = _array("post", post), _array("comb", comb)
    t, n, c, lead = residual_dims("residual", residual.shape)
    check_post_inputs(lead, n, c, x, post_, comb)
    dt = _dtype(residual, dtype)
    out = run("post", {"x": residual.reshape(t, n, c), "f": x.reshape(t, c), "h_post": post_.reshape(t, n),
                       "h_res": comb.reshape(t, n, n)}, n=n, c=c, dtype=dt, formulation=formulation)
    return _out(out["out"], dt, lead + (n, c))


def post_pre(x, residual, post, comb, hc_fn, hc_scale, hc_base, *, gamma_k=None, gamma_f=None, dtype=None,
             formulation="v4", sinkhorn_iters=20, eps_norm=1e-6, eps_hc=1e-6, eps_f=1e-6):
    """The layer boundary: `post` of layer l (`x`, `residual`, `post`, `comb`), then `pre` of layer
    l+1 (`hc_fn`, `hc_scale`, `hc_base`, ...) on the new residual. Returns `PostPre`."""
    residual, x = _array("residual", residual), _array("x", x)
    post_, comb = _array("post", post), _array("comb", comb)
    t, n, c, lead = residual_dims("residual", residual.shape)
    check_post_inputs(lead, n, c, x, post_, comb)
    dt = _dtype(residual, dtype)
    hc_fn, hc_scale, hc_base = _array("hc_fn", hc_fn), _array("hc_scale", hc_scale), _array("hc_base", hc_base)
    gamma_k, gamma_f = _array("gamma_k", gamma_k), _array("gamma_f", gamma_f)
    check_pre_params(n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f)
    out = run("post_pre", {"x": residual.reshape(t, n, c), "f": x.reshape(t, c), "h_post": post_.reshape(t, n),
                           "h_res": comb.reshape(t, n, n), "phi": hc_fn, "scale": hc_scale, "base": hc_base,
                           "gamma_k": gamma_k, "gamma_f": gamma_f},
              n=n, c=c, dtype=dt, **_opts(formulation, sinkhorn_iters, eps_norm, eps_hc, eps_f))
    return PostPre(_out(out["out"], dt, lead + (n, c)), *_pre_result(out, dt, lead, n, c))


def head(residual, hc_fn, hc_scale, hc_base, *, dtype=None, eps_norm=1e-6, eps_hc=1e-6):
    """`head` (DeepSeek-V4 `hc_head`): the final collapse of `residual [..., n, C]` to `[..., C]`
    with `hc_fn [n, n*C]`, `hc_scale [1]`, `hc_base [n]`."""
    residual = _array("residual", residual)
    t, n, c, lead = residual_dims("residual", residual.shape)
    dt = _dtype(residual, dtype)
    hc_fn, hc_scale, hc_base = _array("hc_fn", hc_fn), _array("hc_scale", hc_scale), _array("hc_base", hc_base)
    expect_shape("hc_fn", hc_fn.shape, (n, n * c), "[n, n*C]")
    expect_shape("hc_scale", np.shape(hc_scale) if np.ndim(hc_scale) else (1,), (1,), "[1]")
    expect_shape("hc_base", hc_base.shape, (n,), "[n]")
    out = run("head", {"x": residual.reshape(t, n, c), "phi": hc_fn, "scale": np.reshape(hc_scale, (1,)),
                       "base": hc_base}, n=n, c=c, dtype=dt, eps_norm=eps_norm, eps_hc=eps_hc)
    return _out(out["out"], dt, lead + (c,))


def expand(x, hc_mult, *, dtype=None):
    """`expand`: the first residual `[..., n, C]` from the embedding `x [..., C]` (every stream a
    copy)."""
    x = _array("x", x)
    if x.ndim < 1:
        raise ShapeError(f"x: expected [..., C], got shape {x.shape}")
    n, c, lead = int(hc_mult), int(x.shape[-1]), tuple(x.shape[:-1])
    t = int(np.prod(lead)) if lead else 1
    dt = _dtype(x, dtype)
    out = run("expand", {"e": x.reshape(t, c)}, n=n, c=c, dtype=dt)
    return _out(out["x"], dt, lead + (n, c))


def static_layer(residual, h_pre_logits, h_post_logits, h_res_logits, gamma, *, dtype=None, sinkhorn_iters=20,
                 eps_hc=1e-6, eps_f=1e-6):
    """The static layer (mHC.cu parity: coefficients from per-layer logits `h_pre_logits [n]`,
    `h_post_logits [n]`, `h_res_logits [n, n]`; RMSNorm with `gamma [C]` as the sublayer)."""
    residual = _array("residual", residual)
    t, n, c, lead = residual_dims("residual", residual.shape)
    dt = _dtype(residual, dtype)
    p = {k: _array(k, v) for k, v in (("h_pre_logits", h_pre_logits), ("h_post_logits", h_post_logits),
                                      ("h_res_logits", h_res_logits), ("gamma", gamma))}
    expect_shape("h_pre_logits", p["h_pre_logits"].shape, (n,))
    expect_shape("h_post_logits", p["h_post_logits"].shape, (n,))
    expect_shape("h_res_logits", p["h_res_logits"].shape, (n, n))
    expect_shape("gamma", p["gamma"].shape, (c,))
    out = run("static", dict(x=residual.reshape(t, n, c), **p), n=n, c=c, dtype=dt, sinkhorn_iters=sinkhorn_iters,
              eps_hc=eps_hc, eps_f=eps_f)
    return _out(out["out"], dt, lead + (n, c))


def sinkhorn(logits, *, formulation="v4", sinkhorn_iters=20, eps_hc=1e-6):
    """The Sinkhorn projection of `logits [..., n, n]` (the formulation's start and order)."""
    logits = _array("logits", logits)
    if logits.ndim < 2 or logits.shape[-1] != logits.shape[-2]:
        raise ShapeError(f"logits: expected [..., n, n], got shape {logits.shape}")
    n, lead = int(logits.shape[-1]), tuple(logits.shape[:-2])
    t = int(np.prod(lead)) if lead else 1
    out = run("sinkhorn", {"logits": logits.reshape(t, n, n)}, n=n, c=1, dtype="f64", formulation=formulation,
              sinkhorn_iters=sinkhorn_iters, eps_hc=eps_hc)
    return out["h_res"].reshape(lead + (n, n))


def hc_pre(x, hc_fn, hc_scale, hc_base, **kw):
    """DeepSeek-V4's `hc_pre(x, hc_fn, hc_scale, hc_base) -> (y, post, comb)`."""
    r = pre(x, hc_fn, hc_scale, hc_base, **kw)
    return r.layer_input, r.post, r.comb


hc_post = post
hc_head = head
