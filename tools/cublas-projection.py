#!/usr/bin/env python3
"""What cuBLAS reaches on the wide-n projection, measured on the same GPU as `mhc bench`.

Dev-time measurement only (the library has no Python at build or run time). Runs on the GPU
machine, whose image has PyTorch: `python3 tools/cublas-projection.py > out.jsonl`.

The n = 32, C = 1280 projection of `pre` is [T x 40960] x [40960 x 1088] (K = n C, M = n^2 + 2n).
Three ways cuBLAS (torch.matmul) can do it: x @ phi^T in bf16 (one product: phi rounded to bf16,
outside the coefficient tolerance, docs/math.md), [x, x] @ [phi_hi; phi_lo]^T (K = 81920: the
work the GEMM kernel does with phi's bf16 hi / lo halves) and x @ phi^T in f32 with TF32. Each:
20 calls between CUDA events after 3 warm-up calls, median of 5; TFLOP/s count 2 T K M useful
FLOP (twice for hi / lo). A bf16 8192^3 product closes the run as the GPU's reference rate.
"""

import json

import torch

K, M = 40960, 1088


def bench(f, reps=20):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(reps):
            f()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000 / reps)
    return sorted(times)[2]


def main():
    torch.backends.cuda.matmul.allow_tf32 = True
    phi = torch.randn(M, K, device="cuda") * 0.01
    hi = phi.to(torch.bfloat16)
    lo = (phi - hi.float()).to(torch.bfloat16)
    hl = torch.cat([hi, lo], 1).t().contiguous().t()  # [M][2K] stored K-major, as the records ran
    for t in [512, 1024, 2048, 4096, 8192]:
        x = torch.randn(t, K, device="cuda").to(torch.bfloat16)
        xx, xf = torch.cat([x, x], 1), x.float()
        r = {"T": t, "bf16_us": bench(lambda: x @ hi.t()), "hilo_us": bench(lambda: xx @ hl.t()),
             "tf32_us": bench(lambda: xf @ phi.t())}
        flop = 2 * t * K * M
        r["bf16_tflops"] = flop / r["bf16_us"] / 1e6
        r["hilo_tflops"] = 2 * flop / r["hilo_us"] / 1e6
        r["tf32_tflops"] = flop / r["tf32_us"] / 1e6
        print(json.dumps(r), flush=True)
        del x, xx, xf
    a = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    us = bench(lambda: a @ b)
    print(json.dumps({"square8192_us": us, "tflops": 2 * 8192 ** 3 / us / 1e6}))


if __name__ == "__main__":
    main()
