"""The descriptor path the torch ops use (mhc._native.Plan: pointer, rows, cols, row stride),
driven here with NumPy memory on the CPU backend: strided rows, and every check of the dispatch
layer (alignment, overlap, workspace ownership, token limit, optional weights, devices)."""

import mathref
import numpy as np
import pytest
from conftest import layer_params

import mhc
from mhc import _native

CPU, CUDA, F32 = 0, 1, 0


def plan(n, c, max_tokens=64, gamma_k=False, gamma_f=False, dtype=F32, backend=CPU, overlap=1, tuning=None):
    return _native.Plan(backend, 0, n, c, 0, 20, 1e-6, 1e-6, 1e-6, gamma_k, gamma_f, dtype, max_tokens, overlap,
                        tuning)


def d(a, rows=None, cols=None, stride=None):
    """A descriptor of a 2-D view of `a` (rows x cols, stride in elements)."""
    rows = a.shape[0] if rows is None else rows
    cols = int(np.prod(a.shape[1:])) if cols is None else cols
    stride = cols if stride is None else stride
    return (a.ctypes.data, rows, cols, stride)


def pre_call(p, ws, x, params, n, c, t, xdesc=None, **over):
    phi, scale, base = params
    outs = dict(a=np.zeros((t, c), np.float32), h_pre=np.zeros((t, n), np.float32),
                h_post=np.zeros((t, n), np.float32), h_res=np.zeros((t, n * n), np.float32),
                inv_rms=np.zeros((t, 1), np.float32))
    args = dict(ws=ws, stream=0, x=xdesc or d(x, t, n * c), phi=d(phi), scale=d(scale, 1, 3), base=d(base, 1, len(base)),
                gamma_k=None, gamma_f=None, a=d(outs["a"]), y=None, h_pre=d(outs["h_pre"]), h_post=d(outs["h_post"]),
                h_res=d(outs["h_res"]), inv_rms=d(outs["inv_rms"]))
    args.update(over)
    p.pre(**args)
    return outs


def test_strided_residual_rows(rng):
    n, c, t, stride = 4, 32, 3, 4 * 32 + 24
    buf = rng.standard_normal((t, stride)).astype(np.float32)
    x = buf[:, : n * c].reshape(t, n, c)
    params = layer_params(rng, n, c)
    p = plan(n, c)
    outs = pre_call(p, p.workspace(), buf, params, n, c, t, xdesc=(buf.ctypes.data, t, n * c, stride))
    a, h_post, h_res, _, _, _ = mathref.pre(x.astype(np.float64), *params)
    assert np.abs(outs["a"] - a).max() < 1e-5
    assert np.abs(outs["h_res"].reshape(t, n, n) - h_res).max() < 1e-5


def test_post_and_expand_descriptors(rng):
    n, c, t = 2, 16, 4
    x = rng.standard_normal((t, n * c)).astype(np.float32)
    f = rng.standard_normal((t, c)).astype(np.float32)
    hp = rng.uniform(0, 2, (t, n)).astype(np.float32)
    hr = rng.uniform(0.1, 1, (t, n * n)).astype(np.float32)
    out = np.zeros((t, n * c), np.float32)
    p = plan(n, c)
    p.post(0, d(x), d(f), d(hp), d(hr), d(out))
    want = mathref.post(x.reshape(t, n, c), f, hp, hr.reshape(t, n, n))
    assert np.abs(out.reshape(t, n, c) - want).max() < 1e-5
    e = np.zeros((t, n * c), np.float32)
    p.expand(0, d(f), d(e))
    assert np.array_equal(e.reshape(t, n, c)[:, 1], f)


def test_checks_of_the_dispatch_layer(rng):
    n, c, t = 4, 16, 2
    x = rng.standard_normal((t, n * c)).astype(np.float32)
    params = layer_params(rng, n, c)
    p = plan(n, c, max_tokens=2)
    ws = p.workspace()
    # A misaligned pointer (host f32 data must be 4-byte aligned).
    raw = np.zeros(t * n * c * 4 + 2, np.uint8)
    with pytest.raises(mhc.AlignmentError, match="x"):
        pre_call(p, ws, x, params, n, c, t, xdesc=(raw.ctypes.data + 2, t, n * c, n * c))
    # An output overlapping an input.
    with pytest.raises(mhc.InvalidArgumentError, match="a overlaps"):
        pre_call(p, ws, x, params, n, c, t, a=d(x, t, c))
    # Another plan's workspace.
    with pytest.raises(mhc.WorkspaceError, match="another plan"):
        pre_call(p, plan(n, c).workspace(), x, params, n, c, t)
    with pytest.raises(mhc.InvalidArgumentError, match="workspace: NULL"):
        pre_call(p, None, x, params, n, c, t)
    # More tokens than the plan was made for.
    big = np.zeros((3, n * c), np.float32)
    with pytest.raises(mhc.ShapeError, match="max_tokens"):
        pre_call(p, ws, big, params, n, c, 3)
    # gamma_f given to a plan without it; a plan with it and no gamma_f.
    gf = np.ones(c, np.float32)
    with pytest.raises(mhc.ShapeError, match="gamma_f"):
        pre_call(p, ws, x, params, n, c, t, gamma_f=d(gf, 1, c))
    pg = plan(n, c, gamma_f=True)
    with pytest.raises(mhc.ShapeError, match="gamma_f"):
        pre_call(pg, pg.workspace(), x, params, n, c, t)
    # A row stride shorter than the row.
    with pytest.raises(mhc.ShapeError, match="row stride"):
        pre_call(p, ws, x, params, n, c, t, xdesc=(x.ctypes.data, t, n * c, n * c - 1))
    # Dtype codes: a bf16 plan takes bf16 activations (the descriptors carry the plan's dtype), a
    # bad dtype code is refused when the plan is made.
    with pytest.raises(mhc.InvalidArgumentError, match="dtype 9"):
        plan(n, c, dtype=9)
    with pytest.raises(mhc.ConfigError, match="max_tokens"):
        plan(n, c, max_tokens=0)
    with pytest.raises(mhc.ConfigError, match="n must be in"):
        plan(0, c)


def test_the_plan_reports_what_it_serves():
    p = plan(4, 64)
    assert p.supports(0) is None and p.workspace_bytes() == 0 and p.max_tokens() == 64
    assert "n=4" in repr(p)
    with pytest.raises(mhc.InvalidArgumentError, match="stage 9"):
        p.supports(9)


def test_cuda_without_a_gpu_is_a_device_error():
    if _native.device_count(CUDA) > 0:
        pytest.skip("a CUDA device is present")
    with pytest.raises(mhc.DeviceError) as info:
        plan(4, 64, backend=CUDA)
    assert info.value.status in ("MHC_ERROR_LIBRARY_MISSING", "MHC_ERROR_NO_DEVICE")
    with pytest.raises(mhc.InvalidArgumentError, match="backend 7"):
        plan(4, 64, backend=7)


def test_overlap_values():
    """The three overlap modes make plans (the CPU backend has no dependent launch, so its results
    do not change); any other value is refused with the values it may take."""
    n, c, t = 4, 8, 3
    rng = np.random.default_rng(7)
    x = rng.standard_normal((t, n * c)).astype(np.float32)
    params = layer_params(rng, n, c)
    got = []
    for o in (0, 1, 2):
        p = plan(n, c, overlap=o)
        got.append(pre_call(p, p.workspace(), x, params, n, c, t)["a"])
    assert all(np.array_equal(got[0], g) for g in got[1:])
    for bad in (-1, 3):
        with pytest.raises(mhc.InvalidArgumentError, match="MHC_OVERLAP_OFF"):
            plan(n, c, overlap=bad)


def test_a_tuned_table_is_refused_where_no_table_steers_the_kernels():
    """A tuned table steers the kernel choice of CUDA plans only: the CPU backend refuses one
    (UnsupportedError, naming why) and takes None."""
    assert plan(4, 8, tuning=None).tuning_warnings() == []
    with pytest.raises(mhc.UnsupportedError, match="CUDA plans"):
        plan(4, 8, tuning="/nonexistent/sm_90a.toml")

