#!/usr/bin/env python3
"""The obvious alternative, measured on the same GPU: mHC stages written in plain PyTorch.

Dev-time measurement only (the library has no Python at build or run time). Runs on the GPU
machine, whose image has PyTorch: `python3 tools/pytorch-baseline.py [--json out.json]`.

Each stage follows docs/math.md (DeepSeek-V4 formulation, bf16 storage, f32 math, 20 Sinkhorn
iterations) the way a PyTorch user would write it: eager, and `torch.compile` where it works.
Timing as in `mhc bench`: device events, median of many single calls with inputs rotated so the
working set exceeds L2 (large T), and CUDA-graph replays for decode sizes (T <= 64). The copy
bandwidth is measured in the same run (bytes read + written), so % of copy compares with
`mhc bench` numbers from the same machine.
"""

import argparse
import json
import statistics

import torch

EPS_NORM = 1e-6
EPS_HC = 1e-6
ITERS = 20


def coefficients(g, scale, base, n):
    """docs/math.md, Stage 2 (V4): g [T, M] -> h_pre [T, n], h_post [T, n], h_res [T, n, n]."""
    t = g.shape[0]
    z_pre = g[:, :n] * scale[0] + base[:n]
    z_post = g[:, n : 2 * n] * scale[1] + base[n : 2 * n]
    z_res = g[:, 2 * n :].reshape(t, n, n) * scale[2] + base[2 * n :].reshape(n, n)
    h_pre = torch.sigmoid(z_pre) + EPS_HC
    h_post = 2 * torch.sigmoid(z_post)
    s = torch.softmax(z_res, dim=-1) + EPS_HC
    s = s / (s.sum(dim=-2, keepdim=True) + EPS_HC)
    for _ in range(ITERS - 1):
        s = s / (s.sum(dim=-1, keepdim=True) + EPS_HC)
        s = s / (s.sum(dim=-2, keepdim=True) + EPS_HC)
    return h_pre, h_post, s


def pre(x, phi, scale, base):
    """Stages 1-3: x [T, n, C] bf16 -> a [T, C] bf16 and the coefficients."""
    t, n, c = x.shape
    v = x.reshape(t, n * c).float()
    ss = (v * v).sum(dim=-1)
    inv_rms = torch.rsqrt(ss / (n * c) + EPS_NORM)
    g = (v @ phi.t()) * inv_rms[:, None]
    h_pre, h_post, h_res = coefficients(g, scale, base, n)
    a = (h_pre[:, :, None] * x.float()).sum(dim=1).to(x.dtype)
    return a, h_post, h_res, inv_rms


def post(x, f, h_post, h_res):
    """Stage 4 (V4: h_res applied transposed): x' [T, n, C]."""
    mix = torch.einsum("tjk,tjc->tkc", h_res, x.float())
    return (h_post[:, :, None] * f.float()[:, None, :] + mix).to(x.dtype)


def post_pre(x, f, h_post, h_res, phi, scale, base):
    xo = post(x, f, h_post, h_res)
    return (xo,) + pre(xo, phi, scale, base)


def head(x, phi_head, scale_head, base_head):
    t, n, c = x.shape
    v = x.reshape(t, n * c).float()
    inv_rms = torch.rsqrt((v * v).sum(dim=-1) / (n * c) + EPS_NORM)
    g = (v @ phi_head.t()) * inv_rms[:, None]
    h = torch.sigmoid(g * scale_head + base_head) + EPS_HC
    return (h[:, :, None] * x.float()).sum(dim=1).to(x.dtype)


def make_inputs(stage, t, n, c, gen):
    dev = "cuda"
    m = n * n + 2 * n
    x = torch.randn(t, n, c, device=dev, generator=gen).to(torch.bfloat16)
    f = torch.randn(t, c, device=dev, generator=gen).to(torch.bfloat16)
    phi = 0.02 * torch.randn(m, n * c, device=dev, generator=gen)
    scale = torch.rand(3, device=dev, generator=gen) * 0.99 + 0.01
    base = 0.1 * torch.randn(m, device=dev, generator=gen)
    h_post = 2 * torch.rand(t, n, device=dev, generator=gen)
    h_res = torch.softmax(torch.randn(t, n, n, device=dev, generator=gen), dim=-1)
    if stage == "pre":
        return (x, phi, scale, base)
    if stage == "post":
        return (x, f, h_post, h_res)
    if stage == "post_pre":
        return (x, f, h_post, h_res, phi, scale, base)
    if stage == "head":
        phi_h = 0.02 * torch.randn(n, n * c, device=dev, generator=gen)
        return (x, phi_h, scale[0], base[:n])
    raise ValueError(stage)


def floor_bytes(stage, t, n, c):
    """Bytes that must move (bf16 activations), as `mhc bench` counts them."""
    e = 2
    m = n * n + 2 * n
    if stage == "pre":
        return t * (n * c + c) * e + m * n * c * 4
    if stage == "post":
        return t * (2 * n * c + c) * e + t * 4 * (n + n * n)
    if stage == "post_pre":
        return t * (2 * n * c + 2 * c) * e + t * 4 * (n + n * n) + m * n * c * 4
    if stage == "head":
        return t * (n * c + c) * e
    raise ValueError(stage)


def copy_bandwidth():
    """Device-to-device copy of 1 GiB, bytes read + written, median of 10 (GB/s)."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    times = []
    for _ in range(12):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    ms = statistics.median(times[2:])
    return 2 * (1 << 30) / (ms * 1e-3) / 1e9


def time_stream(fn, input_sets, reps):
    """Median of single calls between events, rotating over the input sets (us)."""
    for i in range(3):
        fn(*input_sets[i % len(input_sets)])
    torch.cuda.synchronize()
    times = []
    for i in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        args = input_sets[i % len(input_sets)]
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    return statistics.median(times)


def time_graph(fn, args, calls=100, replays=5):
    """One CUDA graph of `calls` captured calls, replayed; time per call (us)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn(*args)
    graph.replay()
    torch.cuda.synchronize()
    per = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        per.append(a.elapsed_time(b) * 1e3 / calls)
    return statistics.median(per)


def check(e2e_dir, out_dir):
    """Runs the PyTorch stages on the e2e cases' inputs (tools/gpu-e2e-pack.sh writes them, with
    the f64 CPU reference's outputs) and saves the outputs as .npy under out_dir/<case>/, for
    `mhc compare`: the baseline must compute what the library computes."""
    import os

    import numpy as np

    def load(case, name):
        return torch.from_numpy(np.load(os.path.join(e2e_dir, case, "in", name + ".npy"))).cuda()

    def save(case, **outs):
        d = os.path.join(out_dir, case)
        os.makedirs(d, exist_ok=True)
        for k, v in outs.items():
            np.save(os.path.join(d, k + ".npy"), v.detach().double().cpu().numpy())

    case = "pre-17-4-1280"
    a, h_post, h_res, inv_rms = pre(load(case, "x"), load(case, "phi").float(), load(case, "scale"), load(case, "base"))
    n = 4
    x = load(case, "x")
    t, c = x.shape[0], x.shape[2]
    v = x.reshape(t, n * c).float()
    g = (v @ load(case, "phi").float().t()) * inv_rms[:, None]
    h_pre = torch.sigmoid(g[:, :n] * load(case, "scale")[0] + load(case, "base")[:n]) + EPS_HC
    save(case, a=a, h_pre=h_pre, h_post=h_post, h_res=h_res, inv_rms=inv_rms)
    case = "post-17-4-1280"
    save(case, out=post(load(case, "x"), load(case, "f"), load(case, "h_post").float(), load(case, "h_res").float()))
    case = "head-17-4-1280"
    save(case, out=head(load(case, "x"), load(case, "phi").float(), load(case, "scale")[0], load(case, "base")))


STAGES = {"pre": pre, "post": post, "post_pre": post_pre, "head": head}
TOKENS = (1, 16, 1024, 8192)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--stages", default="pre,post,post_pre,head")
    ap.add_argument("--tokens", default=",".join(map(str, TOKENS)), help="token counts (comma-separated); "
                    "CUDA-graph replays up to 64")
    ap.add_argument("--n", type=int, default=4, help="streams (default 4)")
    ap.add_argument("--c", default="4096,7168", help="hidden sizes (comma-separated; default 4096,7168)")
    ap.add_argument("--check", nargs=2, metavar=("E2E_DIR", "OUT_DIR"), help="write outputs for `mhc compare`, then exit")
    args = ap.parse_args()
    if args.check:
        check(*args.check)
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    copy = copy_bandwidth()
    print(f"device: {props.name}, {props.multi_processor_count} SMs; torch {torch.__version__}")
    print(f"copy bandwidth (1 GiB d2d, read+write, median of 10): {copy:.0f} GB/s")
    gen = torch.Generator(device="cuda")
    gen.manual_seed(7)
    rows = []
    modes = [("eager", None)]
    if not args.no_compile:
        modes.append(("compile", "default"))
    print(f"{'stage':9} {'mode':8} {'T':>5} {'n':>2} {'C':>5} {'us':>9} {'us_graph':>9} {'GB/s':>7} {'%copy':>6} {'floor_us':>8}")
    for stage in args.stages.split(","):
        for mode, how in modes:
            fn = STAGES[stage] if how is None else torch.compile(STAGES[stage], dynamic=False)
            cs = [int(c) for c in args.c.split(",")]
            for t, n, c in [(t, args.n, c) for c in cs for t in map(int, args.tokens.split(","))]:
                if mode == "compile" and not (c == 4096 and t in (1, 8192)):
                    continue  # each shape recompiles: compiled mode on the two headline shapes only
                nbytes = floor_bytes(stage, t, n, c)
                sets = max(1, min(8, (3 * 64 * 2**20) // max(1, nbytes) + 1))
                try:
                    input_sets = [make_inputs(stage, t, n, c, gen) for _ in range(sets)]
                    us = time_stream(fn, input_sets, 100 if t >= 1024 else 200)
                    us_graph = time_graph(fn, input_sets[0]) if t <= 64 else None
                except Exception as e:  # noqa: BLE001 - report and go on (e.g. compile unsupported)
                    print(f"{stage:9} {mode:8} {t:5} {n:2} {c:5} failed: {type(e).__name__}: {str(e)[:120]}")
                    continue
                gbs = nbytes / (us * 1e-6) / 1e9
                row = {
                    "stage": stage, "mode": mode, "tokens": t, "n": n, "c": c, "us": us, "us_graph": us_graph,
                    "gbs": gbs, "pct_copy": 100 * gbs / copy, "floor_us": nbytes / (copy * 1e9) * 1e6,
                }
                rows.append(row)
                g = f"{us_graph:9.2f}" if us_graph is not None else f"{'-':>9}"
                print(f"{stage:9} {mode:8} {t:5} {n:2} {c:5} {us:9.2f} {g} {gbs:7.0f} {row['pct_copy']:6.1f} {row['floor_us']:8.2f}")
                del input_sets
                torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"device": props.name, "copy_gbs": copy, "torch": torch.__version__, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
