"""The torch ops on CPU tensors (the float64 reference through the same descriptors as CUDA):
registration, results, error paths, the fake implementations, torch.library.opcheck and
torch.compile(fullgraph=True). Skipped where torch is not importable."""

import mathref
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mhc  # noqa: E402
from mhc import ops  # noqa: E402


def params(gen, n, c, dtype=torch.float32):
    m = n * n + 2 * n
    return (0.02 * torch.randn(m, n * c, generator=gen, dtype=dtype), torch.rand(3, generator=gen, dtype=dtype) * 0.99 + 0.01,
            0.1 * torch.randn(m, generator=gen, dtype=dtype))


@pytest.fixture
def gen():
    g = torch.Generator()
    g.manual_seed(int.from_bytes(np.random.bytes(4), "little"))
    return g


def test_registered_when_torch_imports():
    assert mhc.ops is ops
    for name in ("pre", "post", "post_pre", "head", "expand", "static_layer"):
        assert hasattr(torch.ops.mhc, name)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_ops_match_the_reference(gen, dtype):
    n, c, t = 4, 32, 3
    x = torch.randn(t, n, c, generator=gen).to(dtype)
    pdt = torch.float64 if dtype == torch.float64 else torch.float32
    phi, scale, base = params(gen, n, c, pdt)
    r = ops.pre(x, phi, scale, base)
    ref = mhc.reference.pre(x.float().numpy() if dtype != torch.float64 else x.numpy(), phi.numpy(), scale.numpy(),
                            base.numpy(), dtype={torch.float32: "f32", torch.bfloat16: "bf16", torch.float64: "f64"}[dtype])
    assert r.layer_input.dtype == dtype and r.post.dtype == pdt and r.y is None
    for got, want in zip(r[:5], ref[:5]):
        assert torch.equal(got.double(), torch.from_numpy(np.array(want, np.float64)).reshape(got.shape))
    f = torch.randn(t, c, generator=gen).to(dtype)
    out = ops.post(f, x, r.post, r.comb)
    want = mathref.post(x.double().numpy(), f.double().numpy(), r.post.double().numpy(), r.comb.double().numpy())
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    assert np.abs(out.double().numpy() - want).max() <= tol * max(1.0, np.abs(want).max())
    both = ops.post_pre(f, x, r.post, r.comb, phi, scale, base)
    assert torch.equal(both.residual, out)
    again = ops.pre(out, phi, scale, base)
    for name in ("layer_input", "post", "comb", "pre", "inv_rms"):
        assert torch.equal(getattr(both, name), getattr(again, name))


def test_head_expand_static_and_leading_dims(gen):
    n, c = 4, 16
    x = torch.randn(2, 3, n, c, generator=gen)
    phi, scale, base = 0.02 * torch.randn(n, n * c, generator=gen), torch.rand(1, generator=gen), torch.randn(n, generator=gen)
    h = ops.head(x, phi, scale, base)
    assert h.shape == (2, 3, c)
    want = mathref.head(x.reshape(6, n, c).double().numpy(), phi.double().numpy(), scale.double().numpy(), base.double().numpy())
    assert np.abs(h.reshape(6, c).double().numpy() - want).max() < 1e-5
    e = torch.randn(5, c, generator=gen)
    assert torch.equal(ops.expand(e, n)[:, 2], e)
    s = ops.static_layer(x, torch.randn(n), torch.randn(n), torch.randn(n, n), torch.ones(c))
    assert s.shape == x.shape and torch.isfinite(s).all()
    y, post, comb = ops.hc_pre(x, *params(gen, n, c))
    assert y.shape == (2, 3, c) and post.shape == (2, 3, n) and comb.shape == (2, 3, n, n)


def test_strided_residual_and_gamma_weights(gen):
    n, c, t = 4, 16, 3
    big = torch.randn(t, n * c + 8, generator=gen)
    x = big[:, : n * c].view(t, n, c)
    assert not x.is_contiguous()
    phi, scale, base = params(gen, n, c)
    gk, gf = 1 + 0.1 * torch.randn(n * c, generator=gen), 1 + 0.1 * torch.randn(c, generator=gen)
    r = ops.pre(x, phi, scale, base, gamma_k=gk, gamma_f=gf)
    want = mathref.pre(x.double().numpy(), phi.double().numpy(), scale.double().numpy(), base.double().numpy(),
                       gk.double().numpy(), gf.double().numpy())
    assert r.y is not None
    assert np.abs(r.y.double().numpy() - want[5]).max() < 1e-4 * max(1.0, np.abs(want[5]).max())
    assert np.abs(r.layer_input.double().numpy() - want[0]).max() < 1e-5 * max(1.0, np.abs(want[0]).max())


def test_empty_token_axis():
    n, c = 4, 8
    r = ops.pre(torch.empty(0, n, c), *params(torch.Generator(), n, c))
    assert r.layer_input.shape == (0, c) and r.comb.shape == (0, n, n)


def test_overlap_modes(gen):
    """set_overlap takes "off", "launch" and "weights" (plans are cached per mode; the CPU backend
    has no dependent launch, so every mode gives the same results) and refuses anything else."""
    n, c, t = 4, 8, 3
    x = torch.randn(t, n, c, generator=gen)
    p = params(gen, n, c)
    try:
        got = []
        for mode in ("off", "launch", "weights"):
            ops.set_overlap(mode)
            got.append(ops.pre(x, *p).layer_input)
        assert all(torch.equal(got[0], g) for g in got[1:])
        with pytest.raises(ValueError, match="overlap must be one of"):
            ops.set_overlap("early")
    finally:
        ops.set_overlap("launch")


def test_set_tuning(gen, tmp_path):
    """set_tuning takes a path or None; CPU plans ignore it (the ops still run and give the same
    results), and anything but a path or None is refused."""
    n, c, t = 4, 8, 3
    x = torch.randn(t, n, c, generator=gen)
    p = params(gen, n, c)
    want = ops.pre(x, *p).layer_input
    try:
        ops.set_tuning(tmp_path / "sm_90a.toml")
        assert torch.equal(ops.pre(x, *p).layer_input, want)
        with pytest.raises(TypeError, match="path or None"):
            ops.set_tuning(3)
    finally:
        ops.set_tuning(None)


def test_error_paths(gen):
    n, c, t = 4, 16, 2
    x = torch.randn(t, n, c, generator=gen)
    phi, scale, base = params(gen, n, c)
    with pytest.raises(mhc.DtypeError, match="residual: activations must be"):
        ops.pre(x.half(), phi, scale, base)
    with pytest.raises(mhc.DtypeError, match="hc_fn: expected torch.float32"):
        ops.pre(x, phi.bfloat16(), scale, base)
    with pytest.raises(mhc.ShapeError, match="n streams of a token must be contiguous"):
        ops.pre(x.transpose(1, 2).contiguous().transpose(1, 2), phi, scale, base)
    with pytest.raises(mhc.ShapeError, match="hc_fn: must be contiguous"):
        ops.pre(x, phi.t().contiguous().t(), scale, base)
    with pytest.raises(mhc.ShapeError, match="hc_fn: expected shape"):
        ops.pre(x, phi[:, :8], scale, base)
    with pytest.raises(mhc.ShapeError, match="cannot be flattened"):
        ops.pre(torch.randn(3, 2, n, c, generator=gen).transpose(0, 1), phi, scale, base)
    with pytest.raises(mhc.ShapeError, match="x: expected shape"):
        ops.post(torch.randn(t, c + 1), x, torch.ones(t, n), torch.ones(t, n, n))
    with pytest.raises(mhc.DtypeError, match="x: expected torch.float32 like the residual"):
        ops.post(torch.randn(t, c).double(), x, torch.ones(t, n), torch.ones(t, n, n))
    with pytest.raises(mhc.ShapeError, match="comb: must be contiguous"):
        ops.post(torch.randn(t, c), x, torch.ones(t, n), torch.ones(t, n, n).transpose(1, 2))
    with pytest.raises(mhc.ConfigError, match="sinkhorn_iters"):
        ops.pre(x, phi, scale, base, sinkhorn_iters=0)
    with pytest.raises(mhc.ConfigError, match="formulation"):
        ops.pre(x, phi, scale, base, formulation="v5")
    with pytest.raises(mhc.NonFiniteError, match="phi"):
        bad = phi.clone()
        bad[0, 0] = float("nan")
        ops.pre(x, bad, scale, base)
    with pytest.raises(mhc.DeviceError, match="CPU or CUDA"):
        ops._backend(torch.device("meta"))


def test_fake_implementations_trace_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    n, c = 4, 64
    with FakeTensorMode():
        x = torch.empty(5, n, c, dtype=torch.bfloat16)
        phi, scale, base = torch.empty(24, n * c), torch.empty(3), torch.empty(24)
        r = torch.ops.mhc.pre(x, phi, scale, base, None, torch.empty(c), "v4", 20, 1e-6, 1e-6, 1e-6)
        assert [tuple(o.shape) for o in r] == [(5, c), (5, n), (5, n, n), (5, n), (5,), (5, c)]
        assert r[0].dtype == torch.bfloat16 and r[1].dtype == torch.float32
        out = torch.ops.mhc.post_pre(torch.empty(5, c, dtype=torch.bfloat16), x, r[1], r[2], phi, scale, base, None,
                                     None, "v4", 20, 1e-6, 1e-6, 1e-6)
        assert out[0].shape == x.shape and out[6].shape == (0,)
        assert torch.ops.mhc.head(x, torch.empty(n, n * c), torch.empty(1), torch.empty(n), 1e-6, 1e-6).shape == (5, c)
        assert torch.ops.mhc.expand(torch.empty(5, c), n).shape == (5, n, c)


def test_opcheck(gen):
    n, c, t = 4, 16, 3
    x = torch.randn(t, n, c, generator=gen)
    phi, scale, base = params(gen, n, c)
    r = ops.pre(x, phi, scale, base)
    f = torch.randn(t, c, generator=gen)
    tests = ("test_schema", "test_faketensor", "test_aot_dispatch_static")
    torch.library.opcheck(torch.ops.mhc.pre.default, (x, phi, scale, base, None, None, "v4", 20, 1e-6, 1e-6, 1e-6),
                          test_utils=tests)
    torch.library.opcheck(torch.ops.mhc.post.default, (f, x, r.post, r.comb, "v4"), test_utils=tests)
    torch.library.opcheck(torch.ops.mhc.post_pre.default,
                          (f, x, r.post, r.comb, phi, scale, base, None, None, "v4", 20, 1e-6, 1e-6, 1e-6), test_utils=tests)
    torch.library.opcheck(torch.ops.mhc.head.default, (x, phi[:n], scale[:1], base[:n], 1e-6, 1e-6), test_utils=tests)
    torch.library.opcheck(torch.ops.mhc.expand.default, (f, n), test_utils=tests)


def test_torch_compile_fullgraph_matches_eager(gen):
    n, c, t = 4, 32, 4
    x = torch.randn(t, n, c, generator=gen)
    p1, p2 = params(gen, n, c), params(gen, n, c)
    hphi, hscale, hbase = 0.02 * torch.randn(n, n * c, generator=gen), torch.rand(1, generator=gen), torch.randn(n, generator=gen)
    w = torch.randn(c, c, generator=gen) / c**0.5

    def step(x):
        r = ops.pre(x, *p1)
        f = r.layer_input @ w
        b = ops.post_pre(f, x, r.post, r.comb, *p2)
        f2 = b.layer_input @ w
        x2 = ops.post(f2, b.residual, b.post, b.comb)
        return ops.head(x2, hphi, hscale, hbase)

    eager = step(x)
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        compiled = torch.compile(step, fullgraph=True, backend=backend)
        got = compiled(x)
        assert torch.allclose(got, eager, rtol=1e-5, atol=1e-5), backend
