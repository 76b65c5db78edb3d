#!/usr/bin/env python3
"""The GPU checks of the `mhc` Python package, on a CUDA machine with PyTorch (one command:
`python3 gpu_check.py [--json out.json]`; bindings/gpu/run-checks.sh runs it from the pack).

1. every forward op through Python against the float64 reference (mhc.reference, on the CPU) at
   docs/math.md's tolerances (f32: outputs 1e-5 relative L2, coefficients 1e-5 max abs; bf16: 1e-2
   and 1e-3), fresh random inputs every run;
2. 100 ops captured in one torch.cuda.CUDAGraph replay to the eager results (bit for bit), also
   after the inputs change in place;
3. a torch.compile(fullgraph=True) function calling the ops runs and matches eager (inductor, and
   mode="reduce-overhead");
4. the ops interleave with PyTorch ops on non-default streams (producer and consumer on the same
   side stream, two streams at once, each with its own workspace);
5. host overhead per eager Python call (torch.ops.mhc.post and the mhc.ops wrapper, T = 1);
6. `ops.set_overlap`: plain launches, dependent launches and the weights read early give the same
   bits, eager and from a CUDA graph;
7. `ops.set_tuning`: a table of no entries against the compiled-in tables, within tolerance; a
   table that cannot be read is a ConfigError.

Exits 1 when any check fails; prints one line per check.
"""

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

import mhc
from mhc import ops
from mhc import reference as R

FAILS = []
RESULTS = {}


def report(name, ok, detail=""):
    print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILS.append(name)


def rel_l2(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    d = np.linalg.norm(want)
    if not np.all(np.isfinite(got)):
        return math.inf
    return float(np.linalg.norm(got - want) / d) if d > 0 else float(np.linalg.norm(got))


def max_abs(got, want):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if not np.all(np.isfinite(got)):
        return math.inf
    return float(np.abs(got - want).max()) if got.size else 0.0


TOL = {torch.float32: (1e-5, 1e-5, "f32"), torch.bfloat16: (1e-2, 1e-3, "bf16")}


def np_of(t):
    return t.detach().float().cpu().numpy() if t.dtype == torch.bfloat16 else t.detach().cpu().numpy()


def params(gen, n, c, phi_std=0.02):
    m = n * n + 2 * n
    dev = "cuda"
    return (phi_std * torch.randn(m, n * c, device=dev, generator=gen),
            torch.rand(3, device=dev, generator=gen) * 0.99 + 0.01,
            0.1 * torch.randn(m, device=dev, generator=gen))


def coeffs(gen, t, n):
    h_post = 2 * torch.sigmoid(torch.randn(t, n, device="cuda", generator=gen))
    h_res = torch.rand(t, n, n, device="cuda", generator=gen) * 0.95 + 0.05
    return h_post, h_res / h_res.sum(-1, keepdim=True)


def check_forward(gen):
    cases = [(1, 4, 4096), (3, 4, 4096), (17, 4, 7168), (64, 4, 4096), (1000, 4, 4096), (8192, 4, 4096),
             (5, 1, 1280), (9, 2, 1280), (33, 8, 1280), (16, 16, 1280), (7, 32, 1280), (2, 4, 64)]
    for dtype in (torch.float32, torch.bfloat16):
        out_tol, coef_tol, dname = TOL[dtype]
        for t, n, c in cases:
            if t > 1000 and dtype != torch.float32:
                continue  # the largest T once, in f32: its float64 reference takes minutes per dtype
            name = f"forward {dname} T={t} n={n} C={c}"
            try:
                x = torch.randn(t, n, c, device="cuda", generator=gen).to(dtype)
                f = torch.randn(t, c, device="cuda", generator=gen).to(dtype)
                p1, p2 = params(gen, n, c), params(gen, n, c)
                hp, hr = coeffs(gen, t, n)
                xn, fn = np_of(x), np_of(f)
                p1n, p2n = [np_of(p) for p in p1], [np_of(p) for p in p2]
                errs = {}
                r = ops.pre(x, *p1)
                ref = R.pre(xn, *p1n, dtype=dname)
                errs["pre.a"] = (rel_l2(np_of(r.layer_input), ref.layer_input), out_tol)
                for k in ("post", "comb", "pre", "inv_rms"):
                    errs[f"pre.{k}"] = (max_abs(np_of(getattr(r, k)), getattr(ref, k)), coef_tol)
                o = ops.post(f, x, hp, hr)
                errs["post"] = (rel_l2(np_of(o), R.post(fn, xn, np_of(hp), np_of(hr), dtype=dname)), out_tol)
                b = ops.post_pre(f, x, hp, hr, *p2)
                rb = R.post_pre(fn, xn, np_of(hp), np_of(hr), *p2n, dtype=dname)
                errs["post_pre.x"] = (rel_l2(np_of(b.residual), rb.residual), out_tol)
                errs["post_pre.a"] = (rel_l2(np_of(b.layer_input), rb.layer_input), out_tol)
                for k in ("post", "comb"):
                    errs[f"post_pre.{k}"] = (max_abs(np_of(getattr(b, k)), getattr(rb, k)), coef_tol)
                hphi = 0.02 * torch.randn(n, n * c, device="cuda", generator=gen)
                hs, hb = torch.rand(1, device="cuda", generator=gen), 0.1 * torch.randn(n, device="cuda", generator=gen)
                errs["head"] = (rel_l2(np_of(ops.head(x, hphi, hs, hb)), R.head(xn, np_of(hphi), np_of(hs), np_of(hb),
                                                                                   dtype=dname)), out_tol)
                errs["expand"] = (rel_l2(np_of(ops.expand(f, n)), R.expand(fn, n, dtype=dname)), 0.0)
                lg = [0.5 * torch.randn(*s, device="cuda", generator=gen) for s in ((n,), (n,), (n, n))]
                gamma = 1 + 0.1 * torch.randn(c, device="cuda", generator=gen)
                errs["static"] = (rel_l2(np_of(ops.static_layer(x, *lg, gamma)),
                                         R.static_layer(xn, *[np_of(v) for v in lg], np_of(gamma), dtype=dname)), out_tol)
                torch.cuda.synchronize()
                bad = {k: v for k, (v, tol) in errs.items() if not v <= tol}
                worst = max(errs, key=lambda k: errs[k][0] / max(errs[k][1], 1e-30))
                report(name, not bad, f"worst {worst} {errs[worst][0]:.2e}" + (f"; over tolerance: {bad}" if bad else ""))
            except mhc.UnsupportedError as e:
                report(name, True, f"no kernel for this shape: {str(e)[:120]}")
            except Exception as e:  # noqa: BLE001 (every failure is reported, the run goes on)
                report(name, False, f"{type(e).__name__}: {e}")


def check_graph(gen):
    n, c, t, steps = 4, 4096, 16, 100
    dtype = torch.bfloat16
    x0 = torch.randn(t, n, c, device="cuda", generator=gen).to(dtype)
    f = torch.randn(t, c, device="cuda", generator=gen).to(dtype)
    layers = [params(gen, n, c) for _ in range(4)]

    def chain(x):
        r = ops.pre(x, *layers[0])
        for i in range(steps - 1):
            b = ops.post_pre(f, x, r.post, r.comb, *layers[(i + 1) % 4])
            x, r = b.residual, b
        return x, r.layer_input

    eager = chain(x0)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        chain(x0)  # warm-up on the side stream (plans exist already; the capture stream gets its workspace)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        graphed = chain(x0)
    g.replay()
    torch.cuda.synchronize()
    same = all(torch.equal(a, b) for a, b in zip(eager, graphed))
    report(f"CUDA graph: {steps} ops captured, replay equals eager", same)
    x0.copy_(torch.randn(t, n, c, device="cuda", generator=gen).to(dtype))
    g.replay()
    eager2 = chain(x0)
    torch.cuda.synchronize()
    report("CUDA graph: replay after the inputs changed equals eager", all(torch.equal(a, b) for a, b in zip(eager2, graphed)))
    for _ in range(10):
        g.replay()
    torch.cuda.synchronize()
    report("CUDA graph: 10 more replays equal eager", all(torch.equal(a, b) for a, b in zip(eager2, graphed)))


def check_overlap(gen):
    """ops.set_overlap: "off", "launch" and "weights" give the same bits, eager and replayed from a
    CUDA graph (a chain post_pre -> post_pre -> pre per layer, so each kernel reads what the one
    before it wrote), at sizes where the persistent-cluster kernels load the weights early."""
    for t, c in ((256, 4096), (1000, 4096), (256, 7168), (2048, 7168), (16, 4096)):
        name = f"overlap modes bf16 T={t} C={c}"
        try:
            n = 4
            x = torch.randn(t, n, c, device="cuda", generator=gen).to(torch.bfloat16)
            f = torch.randn(t, c, device="cuda", generator=gen).to(torch.bfloat16)
            hp, hr = coeffs(gen, t, n)
            layers = [params(gen, n, c) for _ in range(3)]

            def chain():
                r = ops.post_pre(f, x, hp, hr, *layers[0])
                r = ops.post_pre(f, r.residual, r.post, r.comb, *layers[1])
                return ops.pre(r.residual, *layers[2]).layer_input

            got = {}
            for mode in ("off", "launch", "weights"):
                ops.set_overlap(mode)
                ops.prepare(n, c, torch.bfloat16, max_tokens=t)
                eager = chain()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    out = chain()
                g.replay()
                torch.cuda.synchronize()
                got[mode] = (eager.clone(), out.clone())
            ref = got["off"][0]
            same = all(torch.equal(ref, e) and torch.equal(ref, o) for e, o in got.values())
            report(name, same, "bits equal across modes, eager and graph" if same else "bits differ")
        except Exception as e:  # noqa: BLE001
            report(name, False, f"{type(e).__name__}: {e}")
        finally:
            ops.set_overlap("launch")


def with_tuning(name, table, body):
    """Reports `body()`'s (ok, detail) run with `ops.set_tuning(table)`; an exception fails it.
    The compiled-in tables are restored after."""
    try:
        ops.set_tuning(table)
        ok, detail = body()
        report(name, ok, detail)
    except Exception as e:  # noqa: BLE001
        report(name, False, f"{type(e).__name__}: {e}")
    finally:
        ops.set_tuning(None)


def check_tuning(gen):
    """ops.set_tuning: plans made with a table of no entries (the cost model alone) and with the
    compiled-in tables (None) give results within tolerance of each other at sizes where the
    compiled-in table of some GPUs runs post_pre as two launches; a stale entry is named in the
    plan's tuning_warnings(); a table that cannot be read is a ConfigError when the plan is made."""
    import tempfile

    n, c = 4, 4096
    with tempfile.TemporaryDirectory() as d:
        empty, stale, missing = (os.path.join(d, f) for f in ("empty.toml", "stale.toml", "missing.toml"))
        with open(empty, "w") as fh:
            fh.write("# a tuned table without entries: the cost model decides every key\n")
        with open(stale, "w") as fh:
            fh.write('[[entry]]\narch = "sm_90a"\nunits = %d\nstage = "pre"\ndtype = "bf16"\ntokens = 64\n'
                     'n = 4\nc = 4096\nvariant = "pre_pc16t_sm90_bf16_n4"\nimage_sha256 = "%s"\nus = 1.0\n'
                     'gbps = 1.0\nerror = 0.0\nsamples = 1\ndate = "2026-11-29"\n'
                     % (torch.cuda.get_device_properties(0).multi_processor_count, "0" * 64))

        def empty_against_compiled_in(t):
            x = torch.randn(t, n, c, device="cuda", generator=gen).to(torch.bfloat16)
            f = torch.randn(t, c, device="cuda", generator=gen).to(torch.bfloat16)
            hp, hr = coeffs(gen, t, n)
            p = params(gen, n, c)
            got = {}
            for table in (empty, None):
                ops.set_tuning(table)
                r = ops.post_pre(f, x, hp, hr, *p)
                got[table] = (np_of(r.layer_input), np_of(r.residual), np_of(r.comb))
            (a0, x0, h0), (a1, x1, h1) = got[empty], got[None]
            worst, h = max(rel_l2(a0, a1), rel_l2(x0, x1)), max_abs(h0, h1)
            return worst <= 1e-2 and h <= 1e-3, f"rel L2 {worst:.2e}, h_res max abs {h:.2e}"

        def stale_named():
            said = ops.prepare(n, c, torch.bfloat16).tuning_warnings()
            return any("changed since it was measured" in w for w in said), "; ".join(said)

        def unreadable():
            try:
                ops.pre(torch.randn(3, n, c, device="cuda", generator=gen).to(torch.bfloat16), *params(gen, n, c))
            except mhc.ConfigError as e:
                return "missing.toml" in str(e), f"ConfigError: {e}"
            return False, "no error"

        for t in (200, 700):
            with_tuning(f"set_tuning: an empty table against the compiled-in ones, post_pre bf16 T={t} C={c}",
                        empty, lambda t=t: empty_against_compiled_in(t))
        with_tuning("set_tuning: a table with a stale entry names it in the plan's tuning_warnings()", stale,
                    stale_named)
        with_tuning("set_tuning: a table that cannot be read", missing, unreadable)


def check_compile(gen):
    n, c, t = 4, 4096, 8
    dtype = torch.bfloat16
    x = torch.randn(t, n, c, device="cuda", generator=gen).to(dtype)
    p1, p2 = params(gen, n, c), params(gen, n, c)
    w = (torch.randn(c, c, device="cuda", generator=gen) / c**0.5).to(dtype)
    hphi = 0.02 * torch.randn(n, n * c, device="cuda", generator=gen)
    hs, hb = torch.rand(1, device="cuda", generator=gen), torch.randn(n, device="cuda", generator=gen)

    def step(x):
        r = ops.pre(x, *p1)
        b = ops.post_pre(r.layer_input @ w, x, r.post, r.comb, *p2)
        x2 = ops.post(b.layer_input @ w, b.residual, b.post, b.comb)
        return ops.head(x2, hphi, hs, hb)

    eager = step(x)
    for mode in (None, "reduce-overhead"):
        torch._dynamo.reset()
        try:
            fn = torch.compile(step, fullgraph=True, mode=mode)
            outs = []
            for _ in range(3):
                # reduce-overhead replays a CUDA graph whose outputs the next replay overwrites:
                # each step is marked and its output cloned, as PyTorch asks of its callers.
                torch.compiler.cudagraph_mark_step_begin()
                outs.append(fn(x).clone())
            torch.cuda.synchronize()
            err = max(rel_l2(np_of(o), np_of(eager)) for o in outs)
            report(f"torch.compile(fullgraph=True, mode={mode}) matches eager", err <= 1e-2, f"rel L2 {err:.2e}")
        except Exception as e:  # noqa: BLE001
            report(f"torch.compile(fullgraph=True, mode={mode})", False, f"{type(e).__name__}: {e}")


def check_streams(gen):
    n, c, t = 4, 4096, 64
    dtype = torch.bfloat16
    x = torch.randn(t, n, c, device="cuda", generator=gen).to(dtype)
    p = params(gen, n, c)
    want = ops.pre(x * 2, *p)
    torch.cuda.synchronize()
    ok = True
    for _ in range(5):
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)  # the side stream is busy: a launch on another stream would race
            x2 = x * 2
            r = ops.pre(x2, *p)
            consumer = r.layer_input.float().sum()
        torch.cuda.current_stream().wait_stream(s)
        ok &= torch.equal(r.layer_input, want.layer_input) and torch.equal(r.comb, want.comb)
        ok &= bool(torch.isclose(consumer, want.layer_input.float().sum()))
    report("side stream: producer, op and consumer in stream order", ok)
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for s in (s1, s2):
        s.wait_stream(torch.cuda.current_stream())
    outs = {}
    for s in (s1, s2):
        with torch.cuda.stream(s):
            outs[s] = [ops.pre(x * 2, *p) for _ in range(10)]
    torch.cuda.synchronize()
    ok = all(torch.equal(r.layer_input, want.layer_input) for rs in outs.values() for r in rs)
    report("two streams at once, one workspace each", ok)


def check_overhead(gen):
    n, c, t = 4, 64, 1
    x = torch.randn(t, n, c, device="cuda", generator=gen)
    f = torch.randn(t, c, device="cuda", generator=gen)
    hp, hr = coeffs(gen, t, n)
    op = torch.ops.mhc.post.default
    res = {}
    for name, call in (("torch.ops.mhc.post", lambda: op(f, x, hp, hr, "v4")), ("mhc.ops.post", lambda: ops.post(f, x, hp, hr)),
                       ("torch.add (for scale)", lambda: torch.add(f, f))):
        for _ in range(200):
            call()
        torch.cuda.synchronize()
        best = math.inf
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(2000):
                call()
            best = min(best, (time.perf_counter() - t0) / 2000)
            torch.cuda.synchronize()
        res[name] = best * 1e6
    RESULTS["host_overhead_us"] = res
    report("host overhead per eager call", True, ", ".join(f"{k} {v:.1f} us" for k, v in res.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("FAIL no CUDA device visible to PyTorch")
        return 1
    fixed = os.environ.get("MHC_TEST_SEED")
    seed = int(fixed) if fixed else int.from_bytes(os.urandom(4), "little")
    print(f"mhc {mhc.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}, seed {seed}", flush=True)
    gen = torch.Generator(device="cuda")
    gen.manual_seed(seed)
    check_forward(gen)
    check_graph(gen)
    check_overlap(gen)
    check_tuning(gen)
    check_compile(gen)
    check_streams(gen)
    check_overhead(gen)
    RESULTS.update(failures=FAILS, seed=seed, device=torch.cuda.get_device_name())
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(RESULTS, fh, indent=2)
    print(f"gpu_check: {len(FAILS)} failed" + (f": {FAILS}" if FAILS else ""))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
