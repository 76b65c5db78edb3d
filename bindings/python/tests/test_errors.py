"""Every bad input of the NumPy reference is a clear exception: an mhc error of the right kind,
which is also the built-in class a caller would catch, naming the argument."""

import numpy as np
import pytest
from conftest import layer_params

import mhc
from mhc import reference as R


@pytest.fixture
def layer(rng):
    n, c, t = 4, 16, 2
    x = rng.standard_normal((t, n, c)).astype(np.float32)
    return (x,) + layer_params(rng, n, c)


def raises(exc, match, fn, *args, **kw):
    with pytest.raises(exc, match=match) as info:
        fn(*args, **kw)
    assert isinstance(info.value, mhc.MhcError)
    return info.value


def test_exception_classes_are_builtin_kinds_too():
    assert issubclass(mhc.ShapeError, ValueError) and issubclass(mhc.DtypeError, TypeError)
    assert issubclass(mhc.DeviceError, RuntimeError) and issubclass(mhc.UnsupportedError, NotImplementedError)
    assert issubclass(mhc.ConfigError, ValueError) and issubclass(mhc.NonFiniteError, ValueError)
    e = mhc._errors._make("MHC_ERROR_DRIVER", "cuLaunchKernel failed")
    assert isinstance(e, mhc.DeviceError) and e.status == "MHC_ERROR_DRIVER"


def test_shapes(layer):
    x, phi, scale, base = layer
    raises(mhc.ShapeError, "residual: expected a residual stream", R.pre, x[0, 0], phi, scale, base)
    raises(mhc.ShapeError, r"hc_fn: expected shape \(24, 64\)", R.pre, x, phi[:, :32], scale, base)
    raises(mhc.ShapeError, r"hc_scale: expected shape \(3,\)", R.pre, x, phi, scale[:2], base)
    raises(mhc.ShapeError, r"hc_base: expected shape \(24,\)", R.pre, x, phi, scale, base[:-1])
    raises(mhc.ShapeError, "gamma_k", R.pre, x, phi, scale, base, gamma_k=np.ones(3, np.float32))
    raises(mhc.ShapeError, "gamma_f", R.pre, x, phi, scale, base, gamma_f=np.ones(3, np.float32))
    f = np.zeros((2, 16), np.float32)
    post, comb = np.ones((2, 4), np.float32), np.ones((2, 4, 4), np.float32)
    raises(mhc.ShapeError, "x: expected shape", R.post, f[:, :8], x, post, comb)
    raises(mhc.ShapeError, "post: expected shape", R.post, f, x, post[:, :3], comb)
    raises(mhc.ShapeError, "comb: expected shape", R.post, f, x, post, comb[:1])
    raises(mhc.ShapeError, "hc_fn", R.head, x, phi, scale[:1], base[:4])
    raises(mhc.ShapeError, "logits", R.sinkhorn, np.zeros((2, 3, 4)))
    raises(mhc.ShapeError, "h_res_logits", R.static_layer, x, np.zeros(4), np.zeros(4), np.zeros((4, 3)), np.ones(16))


def test_dtypes(layer):
    x, phi, scale, base = layer
    raises(mhc.DtypeError, "float32 or float64", R.pre, x.astype(np.float16), phi, scale, base)
    raises(mhc.DtypeError, "dtype must be one of", R.pre, x, phi, scale, base, dtype="f16")
    raises(mhc.DtypeError, "real-valued", R.pre, x.astype(np.complex64), phi, scale, base)


def test_configuration(layer):
    x, phi, scale, base = layer
    raises(mhc.ConfigError, "sinkhorn_iters", R.pre, x, phi, scale, base, sinkhorn_iters=0)
    raises(mhc.ConfigError, "eps_hc", R.pre, x, phi, scale, base, eps_hc=-1.0)
    raises(mhc.ConfigError, "eps_norm must be > 0", R.pre, x, phi, scale, base, eps_norm=0.0)
    raises(mhc.ConfigError, "formulation", R.pre, x, phi, scale, base, formulation="v3")
    raises(mhc.ConfigError, "hc_mult", R.pre, np.zeros((1, 33, 8), np.float32), phi, scale, base)
    raises(mhc.ShapeError, "hidden size", R.pre, np.zeros((1, 4, 0), np.float32), phi, scale, base)


def test_non_finite_parameters(layer):
    x, phi, scale, base = layer
    bad = phi.copy()
    bad[3, 5] = np.nan
    e = raises(mhc.NonFiniteError, "phi holds a non-finite value", R.pre, x, bad, scale, base)
    assert e.status == "MHC_ERROR_NON_FINITE"
    raises(mhc.NonFiniteError, "scale", R.pre, x, phi, np.array([1.0, np.inf, 1.0], np.float32), base)


def test_run_names_and_shapes(layer):
    x, phi, scale, base = layer
    raises(mhc.ShapeError, "an input named", R.run, "pre", {"x": x, "phi": phi, "scale": scale, "base": base,
                                                              "bogus": base}, n=4, c=16)
    raises(mhc.ShapeError, "phi", R.run, "pre", {"x": x, "scale": scale, "base": base}, n=4, c=16)
    raises(mhc.ConfigError, "not a stage", R.run, "prepost", {"x": x}, n=4, c=16)
