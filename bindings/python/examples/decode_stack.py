#!/usr/bin/env python3
"""A stack of DeepSeek-V4-shaped mHC layers (n = 4 streams, C = 4096 and 7168) whose attention and
FFN are stand-ins (one bf16 matmul each), with the mHC pieces from `mhc`: `pre` before the first
sublayer, `post_pre` at every sublayer boundary, `post` after the last one and `head` at the end.
The same stack in plain PyTorch (the mHC math written with torch ops, as
tools/pytorch-baseline.py does) and the stack with the matmuls alone (no mHC) run on the same GPU
in the same process; each step is captured in one CUDA graph and replayed.

Reports, per C and T (decode T = 1, 16, 64; prefill T = 8192): the step time of each stack, and
the time per layer boundary: (stack - matmuls alone) / boundaries, for mhc and for PyTorch. Checks
that the two stacks agree (relative L2 of the head output).

    python3 decode_stack.py [--layers 4] [--hidden 4096 7168] [--tokens 1 16 64 8192] [--json out.json]
"""

import argparse
import json
import statistics

import torch

import mhc  # noqa: F401  (registers torch.ops.mhc)
from mhc import ops

EPS = 1e-6
ITERS = 20


# The mHC math in plain PyTorch (DeepSeek-V4 formulation, bf16 storage, f32 math).
def t_coefficients(g, scale, base, n):
    t = g.shape[0]
    h_pre = torch.sigmoid(g[:, :n] * scale[0] + base[:n]) + EPS
    h_post = 2 * torch.sigmoid(g[:, n:2 * n] * scale[1] + base[n:2 * n])
    z = g[:, 2 * n:].reshape(t, n, n) * scale[2] + base[2 * n:].reshape(n, n)
    s = torch.softmax(z, dim=-1) + EPS
    s = s / (s.sum(dim=-2, keepdim=True) + EPS)
    for _ in range(ITERS - 1):
        s = s / (s.sum(dim=-1, keepdim=True) + EPS)
        s = s / (s.sum(dim=-2, keepdim=True) + EPS)
    return h_pre, h_post, s


def t_pre(x, phi, scale, base):
    t, n, c = x.shape
    v = x.reshape(t, n * c).float()
    inv_rms = torch.rsqrt((v * v).sum(-1) / (n * c) + EPS)
    h_pre, h_post, h_res = t_coefficients((v @ phi.t()) * inv_rms[:, None], scale, base, n)
    return (h_pre[:, :, None] * x.float()).sum(1).to(x.dtype), h_post, h_res


def t_post(f, x, h_post, h_res):
    return (h_post[:, :, None] * f.float()[:, None, :] + torch.einsum("tjk,tjc->tkc", h_res, x.float())).to(x.dtype)


def t_head(x, phi, scale, base):
    t, n, c = x.shape
    v = x.reshape(t, n * c).float()
    inv_rms = torch.rsqrt((v * v).sum(-1) / (n * c) + EPS)
    h = torch.sigmoid((v @ phi.t()) * inv_rms[:, None] * scale + base) + EPS
    return (h[:, :, None] * x.float()).sum(1).to(x.dtype)


class Stack:
    """`layers` layers of two sublayers each: weights, mHC parameters and the three steps."""

    def __init__(self, layers, n, c, gen):
        dev, m = "cuda", n * n + 2 * n
        self.n, self.c, self.subs = n, c, 2 * layers
        self.w = [(torch.randn(c, c, device=dev, generator=gen) / c**0.5).to(torch.bfloat16) for _ in range(self.subs)]
        self.p = [(0.02 * torch.randn(m, n * c, device=dev, generator=gen), torch.rand(3, device=dev, generator=gen) * 0.99 + 0.01,
                   0.1 * torch.randn(m, device=dev, generator=gen)) for _ in range(self.subs)]
        self.head = (0.02 * torch.randn(n, n * c, device=dev, generator=gen), torch.rand(1, device=dev, generator=gen),
                     0.1 * torch.randn(n, device=dev, generator=gen))

    def mhc_step(self, x):
        r = ops.pre(x, *self.p[0])
        for i in range(self.subs):
            f = r.layer_input @ self.w[i]
            if i + 1 < self.subs:
                r = ops.post_pre(f, x, r.post, r.comb, *self.p[i + 1])
                x = r.residual
            else:
                x = ops.post(f, x, r.post, r.comb)
        return ops.head(x, *self.head)

    def torch_step(self, x):
        a, h_post, h_res = t_pre(x, *self.p[0])
        for i in range(self.subs):
            x = t_post(a @ self.w[i], x, h_post, h_res)
            if i + 1 < self.subs:
                a, h_post, h_res = t_pre(x, *self.p[i + 1])
        return t_head(x, *self.head)

    def matmul_step(self, x):
        a = x[:, 0]
        for i in range(self.subs):
            a = a @ self.w[i]
        return a


def graph_time_ms(fn, x, reps, repeats=5):
    """Median over `repeats` of the mean time of `reps` replays of `fn(x)` captured in one graph."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn(x)
    for _ in range(3):
        g.replay()
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(reps):
            g.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times), out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, nargs="+", default=[4096, 7168])
    ap.add_argument("--tokens", type=int, nargs="+", default=[1, 16, 64, 8192])
    ap.add_argument("--json", help="write the table here")
    args = ap.parse_args()
    n = 4
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    rows = []
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, mhc {mhc.__version__}; {args.layers} layers "
          f"= {2 * args.layers} sublayers, {2 * args.layers - 1} post_pre boundaries + pre + post + head")
    hdr = f"{'C':>5} {'T':>5} | {'mhc ms':>8} {'torch ms':>9} {'matmul ms':>9} | {'mhc us/bnd':>10} {'torch us/bnd':>12} {'speed-up':>8} | {'rel L2':>8}"
    print(hdr)
    print("-" * len(hdr))
    for c in args.hidden:
        stack = Stack(args.layers, n, c, gen)
        for t in args.tokens:
            x = torch.randn(t, n, c, device="cuda", generator=gen).to(torch.bfloat16)
            reps = 20 if t >= 4096 else 200
            ops.prepare(n, c, torch.bfloat16, "cuda", max_tokens=t)
            t_mhc, out_mhc = graph_time_ms(stack.mhc_step, x, reps)
            t_torch, out_torch = graph_time_ms(stack.torch_step, x, reps)
            t_mm, _ = graph_time_ms(stack.matmul_step, x, reps)
            torch.cuda.synchronize()
            err = (torch.linalg.vector_norm((out_mhc.float() - out_torch.float()))
                   / torch.linalg.vector_norm(out_torch.float())).item()
            # The mHC work of a step: pre + (subs - 1) post_pre + post + head, counted as subs + 1
            # boundaries (each post_pre is one boundary; pre and post+head make one more).
            bnd = stack.subs + 1
            per_mhc, per_torch = (t_mhc - t_mm) / bnd * 1e3, (t_torch - t_mm) / bnd * 1e3
            rows.append(dict(C=c, T=t, mhc_ms=t_mhc, torch_ms=t_torch, matmul_ms=t_mm, mhc_us_per_boundary=per_mhc,
                             torch_us_per_boundary=per_torch, rel_l2=err, layers=args.layers))
            print(f"{c:>5} {t:>5} | {t_mhc:8.3f} {t_torch:9.3f} {t_mm:9.3f} | {per_mhc:10.1f} {per_torch:12.1f} "
                  f"{per_torch / per_mhc if per_mhc > 0 else float('nan'):8.2f} | {err:8.1e}", flush=True)
        del stack
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(device=torch.cuda.get_device_name(), torch=torch.__version__, rows=rows), fh, indent=2)


if __name__ == "__main__":
    main()
