"""docs/math.md written independently in NumPy (float64), to check the library's reference and ops
against: stages 1-4, head, expand, the static layer."""

import numpy as np


def sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def sinkhorn(z, formulation, iters, eps):
    """z [T, n, n] logits -> h_res [T, n, n]."""
    if formulation == "v4":
        s = np.exp(z - z.max(-1, keepdims=True))
        s = s / s.sum(-1, keepdims=True) + eps
        s = s / (s.sum(-2, keepdims=True) + eps)
        for _ in range(iters - 1):
            s = s / (s.sum(-1, keepdims=True) + eps)
            s = s / (s.sum(-2, keepdims=True) + eps)
        return s
    s = np.exp(z - z.max(-2, keepdims=True))
    for _ in range(iters):
        s = s / (s.sum(-2, keepdims=True) + eps)
        s = s / (s.sum(-1, keepdims=True) + eps)
    return s


def pre(x, phi, scale, base, gamma_k=None, gamma_f=None, formulation="v4", iters=20, eps_norm=1e-6, eps_hc=1e-6,
        eps_f=1e-6):
    t, n, c = x.shape
    v = x.reshape(t, n * c).astype(np.float64)
    inv_rms = 1.0 / np.sqrt((v * v).sum(-1) / (n * c) + eps_norm)
    vk = v * gamma_k if gamma_k is not None else v
    g = (vk @ phi.astype(np.float64).T) * inv_rms[:, None]
    z_pre = g[:, :n] * scale[0] + base[:n]
    z_post = g[:, n:2 * n] * scale[1] + base[n:2 * n]
    z_res = g[:, 2 * n:].reshape(t, n, n) * scale[2] + base[2 * n:].reshape(n, n)
    h_pre = sigmoid(z_pre) + (eps_hc if formulation == "v4" else 0.0)
    h_post = 2.0 * sigmoid(z_post)
    h_res = sinkhorn(z_res, formulation, iters, eps_hc)
    a = (h_pre[:, :, None] * x.astype(np.float64)).sum(1)
    y = None
    if gamma_f is not None:
        y = a * gamma_f / np.sqrt((a * a).mean(-1, keepdims=True) + eps_f)
    return a, h_post, h_res, h_pre, inv_rms, y


def post(x, f, h_post, h_res, formulation="v4"):
    x = x.astype(np.float64)
    mix = np.einsum("tjk,tjc->tkc", h_res, x) if formulation == "v4" else np.einsum("tij,tjc->tic", h_res, x)
    return h_post[:, :, None] * f[:, None, :].astype(np.float64) + mix


def head(x, phi, scale, base, eps_norm=1e-6, eps_hc=1e-6):
    t, n, c = x.shape
    v = x.reshape(t, n * c).astype(np.float64)
    inv_rms = 1.0 / np.sqrt((v * v).sum(-1) / (n * c) + eps_norm)
    g = (v @ phi.astype(np.float64).T) * inv_rms[:, None]
    h = sigmoid(g * scale[0] + base) + eps_hc
    return (h[:, :, None] * x).sum(1)


def static_layer(x, hp, hpo, hr, gamma, iters=20, eps_hc=1e-6, eps_f=1e-6):
    h_pre, h_post = sigmoid(hp), 2.0 * sigmoid(hpo)
    h_res = sinkhorn(hr[None], "paper", iters, eps_hc)[0]
    x = x.astype(np.float64)
    a = np.einsum("i,tic->tc", h_pre, x)
    y = a * gamma / np.sqrt((a * a).mean(-1, keepdims=True) + eps_f)
    return np.einsum("ij,tjc->tic", h_res, x) + h_post[None, :, None] * y[:, None, :]


def bf16_round(a):
    """Round float32 values to the nearest bfloat16 (ties to even), returned as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)
