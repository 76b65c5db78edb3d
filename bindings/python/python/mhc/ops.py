"""mHC ops on `torch.Tensor`s, registered with `torch.library` as `torch.ops.mhc.*`.

CUDA tensors run the hand-written kernels on `torch.cuda.current_stream()` in PyTorch's own
(primary) context; CPU tensors run the float64 reference (the same code the kernels are tested
against). Outputs come from PyTorch's allocator. Each op has a fake (meta) implementation, so
`torch.compile(fullgraph=True)` traces it, and launches nothing but its kernels (no host sync, no
allocation of ours), so it can be captured in a `torch.cuda.CUDAGraph`.

Plans (kernels selected and loaded for a configuration) are cached per (device, configuration,
dtype, max tokens) and workspaces per (plan, stream). A plan is made on the first call with a new
configuration; making one during a graph capture is refused: call the op once before capturing, or
`prepare(...)`. A workspace for a new stream is made on first use (also inside a capture: its memory
is allocated outside the graph, as PyTorch's allocator does).

Conventions (DeepSeek-V4): residual `[..., n, C]` with `n = hc_mult` (rows of a token contiguous:
strides `[..., C, 1]`; the token stride is free), `hc_fn [n*n + 2n, n*C]`, `hc_scale [3]`,
`hc_base [n*n + 2n]` (float32, contiguous), activations bfloat16 or float32 on CUDA (also float64
on the CPU).
"""

import os

import torch

from . import _native
from ._config import (
    check_config,
    check_post_inputs,
    check_pre_params,
    expect_shape,
    formulation_code,
    formulation_name,
    residual_dims,
)
from ._errors import DeviceError, DtypeError, ShapeError
from .reference import Pre, PostPre

__all__ = [
    "pre",
    "post",
    "post_pre",
    "head",
    "expand",
    "static_layer",
    "hc_pre",
    "hc_post",
    "hc_head",
    "prepare",
    "set_default_max_tokens",
    "set_overlap",
    "set_tuning",
    "clear_caches",
]

_DTYPE_CODE = {torch.float32: 0, torch.bfloat16: 1, torch.float64: 2}
_BACKEND_CPU, _BACKEND_CUDA, _BACKEND_HIP = 0, 1, 2
_DEFAULT_MAX_TOKENS = 8192
_OVERLAP_CODE = {"off": 0, "launch": 1, "weights": 2}
_overlap = "launch"
_tuning = None

_plans = {}
_workspaces = {}


def set_default_max_tokens(max_tokens):
    """The smallest `max_tokens` a new plan is made for (8192 unless changed); a call with more
    tokens makes a plan for the next power of two."""
    global _DEFAULT_MAX_TOKENS
    if int(max_tokens) < 1:
        raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
    _DEFAULT_MAX_TOKENS = int(max_tokens)


def set_overlap(mode):
    """How the CUDA kernels of plans made from now on overlap the kernel before them on the stream:
    "launch" (the default: programmatic dependent launch, the results of plain stream order), "off"
    (plain launches), or "weights": "launch", and your promise that no kernel still running when an
    op starts writes the layer's weights (`hc_fn`, `hc_scale`, `hc_base`, `gamma`), as in inference.
    The persistent-cluster `pre` / `post_pre` kernels then load `hc_fn` before the previous kernel
    has finished (0.5-2 us less per call from a few dozen tokens up); broken, the promise gives
    results from stale weights. Plans are cached per mode: call `prepare(...)` again after changing
    it, before any graph capture."""
    global _overlap
    if mode not in _OVERLAP_CODE:
        raise ValueError(f"overlap must be one of {sorted(_OVERLAP_CODE)}, got {mode!r}")
    _overlap = mode


def set_tuning(path):
    """The tuned table CUDA plans made from now on select their kernels with: the path of a table
    `mhc tune` wrote for this GPU (asm/tuning/README.md), or None for the tables compiled into the
    library (the default). CPU and HIP plans ignore it. A file that cannot be read is a
    ConfigError when the next CUDA plan is made; entries that do not apply to the GPU, or whose
    kernels have changed since they were measured, are skipped (`prepare(...).tuning_warnings()`
    lists them with why). Plans are cached per table: call `prepare(...)` again after changing it,
    before any graph capture."""
    global _tuning
    if path is not None and not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"set_tuning takes a path or None, got {type(path).__name__}")
    _tuning = None if path is None else os.fspath(path)


def clear_caches():
    """Drops every cached plan and workspace (synchronize first if ops may still run)."""
    _plans.clear()
    _workspaces.clear()


def _backend(device):
    if device.type == "cpu":
        return _BACKEND_CPU, 0
    if device.type == "cuda":
        index = device.index if device.index is not None else torch.cuda.current_device()
        return (_BACKEND_HIP if torch.version.hip else _BACKEND_CUDA), index
    raise DeviceError(f"mhc ops take CPU or CUDA tensors, got a tensor on {device}")


def _capturing(device):
    return device.type == "cuda" and torch.cuda.is_current_stream_capturing()


def _plan(device, n, c, formulation, iters, eps_norm, eps_hc, eps_f, gamma_k, gamma_f, dtype, tokens):
    max_tokens = _DEFAULT_MAX_TOKENS
    while max_tokens < tokens:
        max_tokens *= 2
    backend, index = _backend(device)
    key = (backend, index, n, c, formulation, iters, eps_norm, eps_hc, eps_f, gamma_k, gamma_f, dtype, max_tokens,
           _overlap, _tuning if backend == _BACKEND_CUDA else None)
    plan = _plans.get(key)
    if plan is None:
        if _capturing(device):
            raise RuntimeError(
                f"mhc: no plan for n={n}, C={c}, dtype={dtype}, max_tokens={max_tokens} on {device} yet, and the "
                "current stream is being captured: call the op once before capturing (or mhc.ops.prepare(...))"
            )
        check_config(iters, eps_norm, eps_hc, eps_f)
        plan = _native.Plan(backend, index, n, c, formulation, iters, eps_norm, eps_hc, eps_f, gamma_k, gamma_f,
                            _DTYPE_CODE[dtype], max_tokens, _OVERLAP_CODE[_overlap], key[-1])
        _plans[key] = plan
    return plan, backend


def _stream_and_workspace(plan, device):
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    key = (id(plan), stream)
    ws = _workspaces.get(key)
    if ws is None:
        ws = plan.workspace()
        _workspaces[key] = ws
    return stream, ws


def prepare(hc_mult, hidden_size, dtype=torch.bfloat16, device="cuda", *, max_tokens=None, gamma_k=False,
            gamma_f=False, formulation="v4", sinkhorn_iters=20, eps_norm=1e-6, eps_hc=1e-6, eps_f=1e-6):
    """Makes (and caches) the plan for this configuration and a workspace for the current stream,
    before any graph capture. Returns the plan."""
    device = torch.device(device)
    if dtype not in _DTYPE_CODE:
        raise DtypeError(f"dtype must be torch.bfloat16, torch.float32 (or torch.float64 on the CPU), got {dtype}")
    tokens = max_tokens if max_tokens is not None else 1
    plan, _ = _plan(device, int(hc_mult), int(hidden_size), formulation_code(formulation), int(sinkhorn_iters),
                    float(eps_norm), float(eps_hc), float(eps_f), bool(gamma_k), bool(gamma_f), dtype, tokens)
    _stream_and_workspace(plan, device)
    return plan


# ---------------------------------------------------------------------------------------------
# Tensors to descriptors: (data_ptr, rows, cols, row_stride).


def _act_dtype(name, t):
    if t.dtype not in _DTYPE_CODE or (t.dtype == torch.float64 and t.device.type != "cpu"):
        allowed = "bfloat16 or float32" + (" (or float64)" if t.device.type == "cpu" else "")
        raise DtypeError(f"{name}: activations must be {allowed}, got {t.dtype}")
    return t.dtype


def _param_dtype(act):
    return torch.float64 if act == torch.float64 else torch.float32


def _same_device(name, t, device):
    if t.device != device:
        raise DeviceError(f"{name} is on {t.device}, the residual on {device}: every tensor of an op on one device")


def _streams(name, t, tokens, n, c):
    """A residual `[..., n, C]` as `tokens` rows of `n*C` with its token stride."""
    try:
        r = t.view(tokens, n, c)
    except RuntimeError:
        raise ShapeError(f"{name}: its leading dims cannot be flattened to one token axis without a copy "
                         f"(shape {tuple(t.shape)}, strides {t.stride()}); pass .contiguous()") from None
    s0, s1, s2 = r.stride()
    if (c > 1 and s2 != 1) or (n > 1 and s1 != c):
        raise ShapeError(f"{name}: the n streams of a token must be contiguous rows (strides [*, {c}, 1]), got "
                         f"strides {t.stride()} for shape {tuple(t.shape)}; pass .contiguous()")
    return (t.data_ptr(), tokens, n * c, s0 if tokens > 1 else n * c)


def _rows(name, t, tokens, cols):
    """`[..., cols]` as `tokens` rows with their stride."""
    try:
        r = t.view(tokens, cols)
    except RuntimeError:
        raise ShapeError(f"{name}: its leading dims cannot be flattened to one token axis without a copy "
                         f"(shape {tuple(t.shape)}, strides {t.stride()}); pass .contiguous()") from None
    if cols > 1 and r.stride(1) != 1:
        raise ShapeError(f"{name}: rows must be contiguous (last stride 1), got strides {t.stride()}")
    return (t.data_ptr(), tokens, cols, r.stride(0) if tokens > 1 else cols)


def _dense(name, t, device, dtype, rows, cols):
    _same_device(name, t, device)
    if t.dtype != dtype:
        raise DtypeError(f"{name}: expected {dtype} (parameters and coefficients are never bf16), got {t.dtype}")
    if not t.is_contiguous():
        raise ShapeError(f"{name}: must be contiguous, got strides {t.stride()} for shape {tuple(t.shape)}")
    return (t.data_ptr(), rows, cols, cols)


def _activation(name, t, device, dtype):
    _same_device(name, t, device)
    if t.dtype != dtype:
        raise DtypeError(f"{name}: expected {dtype} like the residual, got {t.dtype}")


def _empty(device, shape, dtype):
    return torch.empty(shape, device=device, dtype=dtype)


def _pre_params(device, pdt, n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f):
    check_pre_params(n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f)
    m, k = n * n + 2 * n, n * c
    return (
        _dense("hc_fn", hc_fn, device, pdt, m, k),
        _dense("hc_scale", hc_scale, device, pdt, 1, 3),
        _dense("hc_base", hc_base, device, pdt, 1, m),
        None if gamma_k is None else _dense("gamma_k", gamma_k, device, pdt, 1, k),
        None if gamma_f is None else _dense("gamma_f", gamma_f, device, pdt, 1, c),
    )


def _pre_outputs(device, lead, n, c, act, pdt, with_y):
    return (
        _empty(device, lead + (c,), act),
        _empty(device, lead + (n,), pdt),
        _empty(device, lead + (n, n), pdt),
        _empty(device, lead + (n,), pdt),
        _empty(device, lead, pdt),
        _empty(device, lead + (c,), act) if with_y else _empty(device, (0,), act),
    )


def _pre_out_descs(outs, t, n, c, with_y):
    a, h_post, h_res, h_pre, inv_rms, y = outs
    return (
        (a.data_ptr(), t, c, c),
        (y.data_ptr(), t, c, c) if with_y else None,
        (h_pre.data_ptr(), t, n, n),
        (h_post.data_ptr(), t, n, n),
        (h_res.data_ptr(), t, n * n, n * n),
        (inv_rms.data_ptr(), t, 1, 1),
    )


# ---------------------------------------------------------------------------------------------
# The registered ops.

_LIB = torch.library.Library("mhc", "DEF")
_LIB.define(
    "pre(Tensor residual, Tensor hc_fn, Tensor hc_scale, Tensor hc_base, Tensor? gamma_k, Tensor? gamma_f, "
    "str formulation, int sinkhorn_iters, float eps_norm, float eps_hc, float eps_f) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)
_LIB.define("post(Tensor x, Tensor residual, Tensor post, Tensor comb, str formulation) -> Tensor")
_LIB.define(
    "post_pre(Tensor x, Tensor residual, Tensor post, Tensor comb, Tensor hc_fn, Tensor hc_scale, Tensor hc_base, "
    "Tensor? gamma_k, Tensor? gamma_f, str formulation, int sinkhorn_iters, float eps_norm, float eps_hc, "
    "float eps_f) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)"
)
_LIB.define("head(Tensor residual, Tensor hc_fn, Tensor hc_scale, Tensor hc_base, float eps_norm, float eps_hc) -> Tensor")
_LIB.define("expand(Tensor x, int hc_mult) -> Tensor")
_LIB.define(
    "static_layer(Tensor residual, Tensor h_pre_logits, Tensor h_post_logits, Tensor h_res_logits, Tensor gamma, "
    "int sinkhorn_iters, float eps_hc, float eps_f) -> Tensor"
)


def _pre_impl(residual, hc_fn, hc_scale, hc_base, gamma_k, gamma_f, formulation, sinkhorn_iters, eps_norm, eps_hc,
              eps_f):
    t, n, c, lead = residual_dims("residual", residual.shape)
    device, act = residual.device, _act_dtype("residual", residual)
    pdt = _param_dtype(act)
    params = _pre_params(device, pdt, n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f)
    with_y = gamma_f is not None
    outs = _pre_outputs(device, lead, n, c, act, pdt, with_y)
    if t == 0:
        return outs
    x = _streams("residual", residual, t, n, c)
    plan, _ = _plan(device, n, c, formulation_code(formulation), sinkhorn_iters, eps_norm, eps_hc, eps_f,
                    gamma_k is not None, with_y, act, t)
    stream, ws = _stream_and_workspace(plan, device)
    plan.pre(ws, stream, x, *params, *_pre_out_descs(outs, t, n, c, with_y))
    return outs


def _post_impl(x, residual, post, comb, formulation):
    t, n, c, lead = residual_dims("residual", residual.shape)
    device, act = residual.device, _act_dtype("residual", residual)
    pdt = _param_dtype(act)
    check_post_inputs(lead, n, c, x, post, comb)
    _activation("x", x, device, act)
    out = _empty(device, lead + (n, c), act)
    if t == 0:
        return out
    hp = _dense("post", post, device, pdt, t, n)
    hr = _dense("comb", comb, device, pdt, t, n * n)
    plan, _ = _plan(device, n, c, formulation_code(formulation), 20, 1e-6, 1e-6, 1e-6, False, False, act, t)
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    plan.post(stream, _streams("residual", residual, t, n, c), _rows("x", x, t, c), hp, hr, (out.data_ptr(), t, n * c, n * c))
    return out


def _post_pre_impl(x, residual, post, comb, hc_fn, hc_scale, hc_base, gamma_k, gamma_f, formulation, sinkhorn_iters,
                   eps_norm, eps_hc, eps_f):
    t, n, c, lead = residual_dims("residual", residual.shape)
    device, act = residual.device, _act_dtype("residual", residual)
    pdt = _param_dtype(act)
    check_post_inputs(lead, n, c, x, post, comb)
    _activation("x", x, device, act)
    params = _pre_params(device, pdt, n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f)
    with_y = gamma_f is not None
    x_out = _empty(device, lead + (n, c), act)
    outs = _pre_outputs(device, lead, n, c, act, pdt, with_y)
    if t == 0:
        return (x_out,) + outs
    hp = _dense("post", post, device, pdt, t, n)
    hr = _dense("comb", comb, device, pdt, t, n * n)
    plan, _ = _plan(device, n, c, formulation_code(formulation), sinkhorn_iters, eps_norm, eps_hc, eps_f,
                    gamma_k is not None, with_y, act, t)
    stream, ws = _stream_and_workspace(plan, device)
    a, y, h_pre, h_post, h_res, inv_rms = _pre_out_descs(outs, t, n, c, with_y)
    plan.post_pre(ws, stream, _streams("residual", residual, t, n, c), _rows("x", x, t, c), hp, hr,
                  (x_out.data_ptr(), t, n * c, n * c), *params, a, y, h_pre, h_post, h_res, inv_rms)
    return (x_out,) + outs


def _head_impl(residual, hc_fn, hc_scale, hc_base, eps_norm, eps_hc):
    t, n, c, lead = residual_dims("residual", residual.shape)
    device, act = residual.device, _act_dtype("residual", residual)
    pdt = _param_dtype(act)
    expect_shape("hc_fn", hc_fn.shape, (n, n * c), "[n, n*C]")
    if hc_scale.numel() != 1:
        raise ShapeError(f"hc_scale: expected one element ([1]), got shape {tuple(hc_scale.shape)}")
    expect_shape("hc_base", hc_base.shape, (n,), "[n]")
    out = _empty(device, lead + (c,), act)
    if t == 0:
        return out
    phi = _dense("hc_fn", hc_fn, device, pdt, n, n * c)
    scale = _dense("hc_scale", hc_scale, device, pdt, 1, 1)
    base = _dense("hc_base", hc_base, device, pdt, 1, n)
    plan, backend = _plan(device, n, c, 0, 20, eps_norm, eps_hc, 1e-6, False, False, act, t)
    if backend == _BACKEND_HIP:
        stream, ws = _stream_and_workspace(plan, device)
    else:
        stream, ws = (torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0), None
    plan.head(ws, stream, _streams("residual", residual, t, n, c), phi, scale, base, (out.data_ptr(), t, c, c))
    return out


def _expand_impl(x, hc_mult):
    if x.dim() < 1:
        raise ShapeError(f"x: expected [..., C], got shape {tuple(x.shape)}")
    n, c, lead = int(hc_mult), int(x.shape[-1]), tuple(x.shape[:-1])
    t = 1
    for d in lead:
        t *= d
    device, act = x.device, _act_dtype("x", x)
    out = _empty(device, lead + (n, c), act)
    if t == 0:
        return out
    plan, _ = _plan(device, n, c, 0, 20, 1e-6, 1e-6, 1e-6, False, False, act, t)
    stream = torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0
    plan.expand(stream, _rows("x", x, t, c), (out.data_ptr(), t, n * c, n * c))
    return out


def _static_impl(residual, h_pre_logits, h_post_logits, h_res_logits, gamma, sinkhorn_iters, eps_hc, eps_f):
    t, n, c, lead = residual_dims("residual", residual.shape)
    device, act = residual.device, _act_dtype("residual", residual)
    pdt = _param_dtype(act)
    expect_shape("h_pre_logits", h_pre_logits.shape, (n,))
    expect_shape("h_post_logits", h_post_logits.shape, (n,))
    expect_shape("h_res_logits", h_res_logits.shape, (n, n))
    expect_shape("gamma", gamma.shape, (c,))
    out = _empty(device, lead + (n, c), act)
    if t == 0:
        return out
    p = (_dense("h_pre_logits", h_pre_logits, device, pdt, 1, n), _dense("h_post_logits", h_post_logits, device, pdt, 1, n),
         _dense("h_res_logits", h_res_logits, device, pdt, n, n), _dense("gamma", gamma, device, pdt, 1, c))
    plan, backend = _plan(device, n, c, 1, sinkhorn_iters, 1e-6, eps_hc, eps_f, False, False, act, t)
    if backend == _BACKEND_HIP:
        stream, ws = _stream_and_workspace(plan, device)
    else:
        stream, ws = (torch.cuda.current_stream(device).cuda_stream if device.type == "cuda" else 0), None
    plan.static_layer(ws, stream, _streams("residual", residual, t, n, c), *p, (out.data_ptr(), t, n * c, n * c))
    return out


for _name, _impl in (("pre", _pre_impl), ("post", _post_impl), ("post_pre", _post_pre_impl), ("head", _head_impl),
                     ("expand", _expand_impl), ("static_layer", _static_impl)):
    _LIB.impl(_name, _impl, "CPU")
    _LIB.impl(_name, _impl, "CUDA")


# Fake (meta) implementations: shapes and dtypes only, for torch.compile and FakeTensor tracing.


@torch.library.register_fake("mhc::pre")
def _pre_fake(residual, hc_fn, hc_scale, hc_base, gamma_k, gamma_f, formulation, sinkhorn_iters, eps_norm, eps_hc,
              eps_f):
    _, n, c, lead = residual_dims("residual", residual.shape)
    act = _act_dtype("residual", residual)
    return _pre_outputs(residual.device, lead, n, c, act, _param_dtype(act), gamma_f is not None)


@torch.library.register_fake("mhc::post")
def _post_fake(x, residual, post, comb, formulation):
    _, n, c, lead = residual_dims("residual", residual.shape)
    return residual.new_empty(lead + (n, c))


@torch.library.register_fake("mhc::post_pre")
def _post_pre_fake(x, residual, post, comb, hc_fn, hc_scale, hc_base, gamma_k, gamma_f, formulation, sinkhorn_iters,
                   eps_norm, eps_hc, eps_f):
    _, n, c, lead = residual_dims("residual", residual.shape)
    act = _act_dtype("residual", residual)
    outs = _pre_outputs(residual.device, lead, n, c, act, _param_dtype(act), gamma_f is not None)
    return (residual.new_empty(lead + (n, c)),) + outs


@torch.library.register_fake("mhc::head")
def _head_fake(residual, hc_fn, hc_scale, hc_base, eps_norm, eps_hc):
    _, n, c, lead = residual_dims("residual", residual.shape)
    return residual.new_empty(lead + (c,))


@torch.library.register_fake("mhc::expand")
def _expand_fake(x, hc_mult):
    return x.new_empty(tuple(x.shape[:-1]) + (int(hc_mult), int(x.shape[-1])))


@torch.library.register_fake("mhc::static_layer")
def _static_fake(residual, h_pre_logits, h_post_logits, h_res_logits, gamma, sinkhorn_iters, eps_hc, eps_f):
    return residual.new_empty(residual.shape)


# ---------------------------------------------------------------------------------------------
# The Python API (the same signatures as mhc.reference).


def pre(residual, hc_fn, hc_scale, hc_base, *, gamma_k=None, gamma_f=None, formulation="v4", sinkhorn_iters=20,
        eps_norm=1e-6, eps_hc=1e-6, eps_f=1e-6):
    """`pre` (docs/math.md stages 1-3; DeepSeek-V4 `hc_pre`) of `residual [..., n, C]`. Returns
    `Pre(layer_input, post, comb, pre, inv_rms, y)` (`y` None without `gamma_f`)."""
    r = torch.ops.mhc.pre.default(residual, hc_fn, hc_scale, hc_base, gamma_k, gamma_f, formulation_name(formulation),
                                  int(sinkhorn_iters), float(eps_norm), float(eps_hc), float(eps_f))
    return Pre(r[0], r[1], r[2], r[3], r[4], r[5] if gamma_f is not None else None)


def post(x, residual, post, comb, *, formulation="v4"):
    """`post` (DeepSeek-V4 `hc_post`, FlashInfer `mhc_post`): the new residual `[..., n, C]` from
    the sublayer output `x [..., C]`, `residual [..., n, C]` and `post [..., n]`, `comb [..., n, n]`."""
    return torch.ops.mhc.post.default(x, residual, post, comb, formulation_name(formulation))


def post_pre(x, residual, post, comb, hc_fn, hc_scale, hc_base, *, gamma_k=None, gamma_f=None, formulation="v4",
             sinkhorn_iters=20, eps_norm=1e-6, eps_hc=1e-6, eps_f=1e-6):
    """The layer boundary: layer l's `post`, then layer l+1's `pre`. Returns
    `PostPre(residual, layer_input, post, comb, pre, inv_rms, y)`."""
    r = torch.ops.mhc.post_pre.default(x, residual, post, comb, hc_fn, hc_scale, hc_base, gamma_k, gamma_f,
                                       formulation_name(formulation), int(sinkhorn_iters), float(eps_norm),
                                       float(eps_hc), float(eps_f))
    return PostPre(r[0], r[1], r[2], r[3], r[4], r[5], r[6] if gamma_f is not None else None)


def head(residual, hc_fn, hc_scale, hc_base, *, eps_norm=1e-6, eps_hc=1e-6):
    """`head` (DeepSeek-V4 `hc_head`): `[..., n, C]` to `[..., C]` with `hc_fn [n, n*C]`,
    `hc_scale [1]`, `hc_base [n]`."""
    return torch.ops.mhc.head.default(residual, hc_fn, hc_scale, hc_base, float(eps_norm), float(eps_hc))


def expand(x, hc_mult):
    """`expand`: the first residual `[..., n, C]` from the embedding `x [..., C]`."""
    return torch.ops.mhc.expand.default(x, int(hc_mult))


def static_layer(residual, h_pre_logits, h_post_logits, h_res_logits, gamma, *, sinkhorn_iters=20, eps_hc=1e-6,
                 eps_f=1e-6):
    """The static layer (mHC.cu parity; paper formulation)."""
    return torch.ops.mhc.static_layer.default(residual, h_pre_logits, h_post_logits, h_res_logits, gamma,
                                              int(sinkhorn_iters), float(eps_hc), float(eps_f))


def hc_pre(x, hc_fn, hc_scale, hc_base, **kw):
    """DeepSeek-V4's `hc_pre(x, hc_fn, hc_scale, hc_base) -> (y, post, comb)`."""
    r = pre(x, hc_fn, hc_scale, hc_base, **kw)
    return r.layer_input, r.post, r.comb


hc_post = post
hc_head = head
