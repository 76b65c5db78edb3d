"""Argument conventions shared by the NumPy reference and the torch ops: the layer configuration
as keyword arguments (DeepSeek-V4 defaults) and the shape checks, with messages that name the
argument and what it should be."""

from ._errors import ConfigError, ShapeError

FORMULATIONS = {"v4": 0, "deepseek-v4": 0, "deepseekv4": 0, "paper": 1}


def formulation_code(formulation):
    try:
        return FORMULATIONS[str(formulation).lower()]
    except KeyError:
        raise ConfigError(f"formulation must be 'v4' (DeepSeek-V4) or 'paper', got {formulation!r}") from None


def formulation_name(formulation):
    return "v4" if formulation_code(formulation) == 0 else "paper"


def check_config(sinkhorn_iters, eps_norm, eps_hc, eps_f):
    if not isinstance(sinkhorn_iters, int) or isinstance(sinkhorn_iters, bool) or not 1 <= sinkhorn_iters <= 10000:
        raise ConfigError(f"sinkhorn_iters must be an int in 1..=10000, got {sinkhorn_iters!r}")
    for name, v in (("eps_norm", eps_norm), ("eps_hc", eps_hc), ("eps_f", eps_f)):
        if not isinstance(v, (int, float)) or not (v >= 0.0) or v == float("inf"):
            raise ConfigError(f"{name} must be a finite float >= 0, got {v!r}")
    if eps_norm == 0:
        raise ConfigError("eps_norm must be > 0 (an all-zero row would divide by zero)")


def residual_dims(name, shape):
    """`(T, n, C, lead)` of a residual stream `[..., n, C]` (lead: the leading dims)."""
    if len(shape) < 2:
        raise ShapeError(f"{name}: expected a residual stream [T, n, C] (or [..., n, C]), got shape {tuple(shape)}")
    n, c = int(shape[-2]), int(shape[-1])
    lead = tuple(int(d) for d in shape[:-2])
    t = 1
    for d in lead:
        t *= d
    if not 1 <= n <= 32:
        raise ConfigError(f"{name}: hc_mult (the stream axis, dim -2) must be in 1..=32, got {n}")
    if c < 1:
        raise ShapeError(f"{name}: the hidden size (dim -1) must be positive, got {c}")
    return t, n, c, lead


def expect_shape(name, shape, want, what=""):
    if tuple(int(d) for d in shape) != tuple(want):
        extra = f" ({what})" if what else ""
        raise ShapeError(f"{name}: expected shape {tuple(want)}{extra}, got {tuple(int(d) for d in shape)}")


def mix_count(n):
    """M = n*n + 2n: the mixing logits of a layer (hc_fn's rows, hc_base's length)."""
    return n * n + 2 * n


def check_pre_params(n, c, hc_fn, hc_scale, hc_base, gamma_k, gamma_f):
    m, k = mix_count(n), n * c
    expect_shape("hc_fn", hc_fn.shape, (m, k), f"[n*n + 2n, n*C] for n = {n}, C = {c}")
    expect_shape("hc_scale", hc_scale.shape, (3,), "[pre, post, comb] scales")
    expect_shape("hc_base", hc_base.shape, (m,), f"[n*n + 2n] for n = {n}")
    if gamma_k is not None:
        expect_shape("gamma_k", gamma_k.shape, (k,), "[n*C]")
    if gamma_f is not None:
        expect_shape("gamma_f", gamma_f.shape, (c,), "[C]")


def check_post_inputs(t_lead, n, c, x, post, comb, x_name="x"):
    expect_shape(x_name, x.shape, t_lead + (c,), "the sublayer output [..., C]")
    expect_shape("post", post.shape, t_lead + (n,), "[..., n], as pre returned it")
    expect_shape("comb", comb.shape, t_lead + (n, n), "[..., n, n], as pre returned it")
