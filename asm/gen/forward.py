#!/usr/bin/env python3
"""Writes post.ptx, head.ptx, static.ptx and expand.ptx (sm_90a) next to this file.

Why a writer: each kernel is specialised on n (1, 2, 4, 8, 16, 32), the storage dtype and, for
post, the formulation, so that every per-stream value lives in a named register and every loop
over streams is unrolled (PTX has no compile-time loops, and a register array indexed at run time
would go to local memory). The instruction sequence of each kernel is the one written out below,
block by block; this script only repeats it for the 60 specialisations. The .ptx files are the
sources `mhc asm` assembles; re-run `python3 asm/ptx/sm90/gen_forward.py` after editing this file.
"""

from . import catalogue

NS = [1, 2, 4, 8, 16, 32]
DTYPES = ["bf16", "f32"]
ESIZE = {"bf16": 2, "f32": 4}
THREADS = 256  # head: one CTA of 8 warps (reqntid)
ST_THREADS = 128  # static (n <= 8): 4 data warps, so that more CTAs (and tokens) are resident per SM


def st_threads(n):
    """static: (data threads, CTA threads). The data warps take the channel chunks; one more warp
    (the coefficient warp) computes h_post and the Sinkhorn while they load the first token."""
    dt = ST_THREADS if n <= 8 else 256
    return dt, dt + 32

PROLOGUE = """.version 8.8
.target sm_90a
.address_size 64
"""


def vchan(n):
    """Channels per thread for per-channel work over all n streams: n*V <= 64 values held."""
    return min(8, 64 // n)


class K:
    """A kernel body under construction: register declarations are collected as names are used."""

    def __init__(self):
        self.regs = {}  # name -> type
        self.lines = []

    def r(self, ty, name):
        if name in ("tid", "ctaid", "ntid", "nctaid", "laneid", "warpid", "clock", "smid"):
            name += "_r"  # never shadow a PTX special register
        self.regs[name] = ty
        return "%" + name

    def e(self, s):
        self.lines.append("    " + s)

    def label(self, s):
        self.lines.append(s + ":")

    def comment(self, s):
        self.lines.append("    // " + s)

    def grid_dependency(self):
        """Programmatic dependent launch: wait until the stream's previous kernel has finished and
        its writes are visible (a no-op unless the runtime launched this kernel with programmatic
        stream serialization), then let the next kernel's CTAs be scheduled. Emitted after the
        parameter loads and before the first global memory access of every kernel, so a
        PDL launch is exactly stream-ordered; the launch after it can only overlap this
        kernel, never an earlier one (src/device/cuda/plan.rs, `Overlap`; notes/cuda-pdl.md)."""
        self.e("griddepcontrol.wait;                    // PDL: previous kernel complete")
        self.e("griddepcontrol.launch_dependents;       // PDL: the next kernel may be scheduled")

    def body(self):
        decl = []
        by_ty = {}
        for name, ty in self.regs.items():
            by_ty.setdefault(ty, []).append(name)
        for ty, names in by_ty.items():
            for i in range(0, len(names), 8):
                decl.append("    .reg ." + ty + " " + ", ".join("%" + x for x in names[i : i + 8]) + ";")
        return "\n".join(decl + self.lines)


def load_row(k, dtype, dst_prefix, addr, nvals, off=0, cache="nc"):
    """Loads nvals consecutive elements at [addr+off] as f32 registers dst_prefix_0..nvals-1.
    bf16 is loaded packed and widened exactly (bf16 -> f32 is a 16-bit shift)."""
    ld = "ld.global.nc" if cache == "nc" else "ld.global"
    vals = [k.r("f32", f"{dst_prefix}_{v}") for v in range(nvals)]
    if dtype == "f32":
        i = 0
        while i < nvals:
            w = min(4, nvals - i)
            regs = vals[i : i + w]
            if w == 1:
                k.e(f"{ld}.f32 {regs[0]}, [{addr}+{off + 4 * i}];")
            else:
                k.e(f"{ld}.v{w}.f32 {{{', '.join(regs)}}}, [{addr}+{off + 4 * i}];")
            i += w
    else:
        if nvals == 1:
            w = k.r("b32", f"{dst_prefix}_w0")
            k.e(f"{ld}.u16 {w}, [{addr}+{off}];")
            k.e(f"shl.b32 {vals[0]}, {w}, 16;")
            return vals
        nw = nvals // 2
        words = [k.r("b32", f"{dst_prefix}_w{i}") for i in range(nw)]
        if nw == 1:
            k.e(f"{ld}.b32 {words[0]}, [{addr}+{off}];")
        else:
            k.e(f"{ld}.v{nw}.b32 {{{', '.join(words)}}}, [{addr}+{off}];")
        for i, w in enumerate(words):
            k.e(f"shl.b32 {vals[2 * i]}, {w}, 16;")
            k.e(f"and.b32 {vals[2 * i + 1]}, {w}, 0xffff0000;")
    return vals


def ld_shared_row(k, dtype, addr, count, wprefix, xprefix):
    """count activations at shared [addr] as f32 registers xprefix0.. (bf16: 32-bit words
    wprefix0.. unpacked by shift / mask)."""
    if dtype == "f32":
        return load_f32_run(k, xprefix, addr, count, space="shared")
    nw = count // 2
    ws = [k.r("b32", f"{wprefix}{w}") for w in range(nw)]
    if nw == 1:
        k.e(f"ld.shared.b32 {ws[0]}, [{addr}];")
    else:
        k.e(f"ld.shared.v{nw}.b32 {{{', '.join(ws)}}}, [{addr}];")
    xv = [k.r("f32", f"{xprefix}{v}") for v in range(count)]
    for w in range(nw):
        k.e(f"shl.b32 {xv[2 * w]}, {ws[w]}, 16;")
        k.e(f"and.b32 {xv[2 * w + 1]}, {ws[w]}, 0xffff0000;")
    return xv


def store_row(k, dtype, vals, addr, off=0, tag="s"):
    """Stores f32 registers vals at [addr+off], rounding once to nearest-even for bf16."""
    if dtype == "f32":
        i = 0
        while i < len(vals):
            w = min(4, len(vals) - i)
            if w == 1:
                k.e(f"st.global.f32 [{addr}+{off + 4 * i}], {vals[i]};")
            else:
                k.e(f"st.global.v{w}.f32 [{addr}+{off + 4 * i}], {{{', '.join(vals[i:i + w])}}};")
            i += w
    else:
        if len(vals) == 1:
            h = k.r("b16", f"{tag}_h")
            k.e(f"cvt.rn.bf16.f32 {h}, {vals[0]};")
            k.e(f"st.global.b16 [{addr}+{off}], {h};")
            return
        words = []
        for i in range(len(vals) // 2):
            w = k.r("b32", f"{tag}_p{i}")
            # cvt.rn.bf16x2.f32 d, a, b puts a in the high half, b in the low half.
            k.e(f"cvt.rn.bf16x2.f32 {w}, {vals[2 * i + 1]}, {vals[2 * i]};")
            words.append(w)
        if len(words) == 1:
            k.e(f"st.global.b32 [{addr}+{off}], {words[0]};")
        else:
            k.e(f"st.global.v{len(words)}.b32 [{addr}+{off}], {{{', '.join(words)}}};")


def load_f32_run(k, prefix, addr, count, off=0, space="global.nc"):
    """count consecutive f32 at [addr+off] (16-byte vectors where the run allows)."""
    vals = [k.r("f32", f"{prefix}{i}") for i in range(count)]
    i = 0
    while i < count:
        w = 4 if count - i >= 4 else (2 if count - i >= 2 else 1)
        regs = vals[i : i + w]
        if w == 1:
            k.e(f"ld.{space}.f32 {regs[0]}, [{addr}+{off + 4 * i}];")
        else:
            k.e(f"ld.{space}.v{w}.f32 {{{', '.join(regs)}}}, [{addr}+{off + 4 * i}];")
        i += w
    return vals


def tree_sum(k, dst, vals, tag):
    """dst = sum of vals by pairwise levels (log2 depth; a fixed order, so deterministic)."""
    level = list(vals)
    depth = 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            r = k.r("f32", f"{tag}{depth}_{i // 2}")
            k.e(f"add.f32 {r}, {level[i]}, {level[i + 1]};")
            nxt.append(r)
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
        depth += 1
    k.e(f"mov.f32 {dst}, {level[0]};")


def rcp_fast(k, dst, s, tag):
    """dst = 1/s: MUFU rcp.approx (<= 1 ulp) and one Newton step (as pre.ptx): f32-accurate for
    normal s without the IEEE rcp.rn subroutine."""
    e = k.r("f32", f"{tag}_e")
    k.e(f"rcp.approx.ftz.f32 {dst}, {s};")
    k.e(f"neg.f32 {e}, {s};")
    k.e(f"fma.rn.f32 {e}, {e}, {dst}, 0f3F800000;")
    k.e(f"fma.rn.f32 {dst}, {dst}, {e}, {dst};")


def sigmoid(k, dst, z, tag, fast=False):
    """dst = 1 / (1 + 2^(-z * log2 e)); ex2.approx has ~2 ulp relative error, rcp.rn is exact
    (fast: rcp.approx + one Newton step)."""
    a = k.r("f32", f"{tag}_a")
    k.e(f"mul.f32 {a}, {z}, 0fBFB8AA3B;")  # -log2(e)
    k.e(f"ex2.approx.ftz.f32 {a}, {a};")
    k.e(f"add.f32 {a}, {a}, 0f3F800000;")
    if fast:
        rcp_fast(k, dst, a, f"{tag}_r")
    else:
        k.e(f"rcp.rn.f32 {dst}, {a};")


# ----------------------------------------------------------------------------------------------
# post

POST_ARGS = """// struct PostArgs (80 bytes, src/device/cuda/kernels.rs):
//   +0 x  +8 f  +16 h_post  +24 h_res  +32 out          (u64 device addresses)
//   +40 x_stride  +48 f_stride  +56 out_stride          (u64, bytes between token rows)
//   +64 items (T * chunks)  +68 chunks (C / V)  +72 cbytes (C * esize)  +76 pad   (u32)"""


def post_params(k):
    """The PostArgs loads (post.ptx header) and the grid dependency: px, pf, php, phr, po, sx, sf,
    so (u64), items, chunks, cbytes (u32)."""
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    regs = [(p(nm), off, "u64") for nm, off in [("px", 0), ("pf", 8), ("php", 16), ("phr", 24), ("po", 32),
                                                 ("sx", 40), ("sf", 48), ("so", 56)]]
    regs += [(u(nm), off, "u32") for nm, off in [("items", 64), ("chunks", 68), ("cbytes", 72)]]
    for reg, off, ty in regs:
        k.e(f"ld.param.{ty} {reg}, [args+{off}];")
    k.grid_dependency()
    return [r for r, _, _ in regs]


def post_rows(k, t64, cb, x, f, o, xname, oname):
    """Addresses of token t64's chunk (byte offset cb) in the x, f and out rows; x, f, o are
    (base, row stride) register pairs."""
    regs = (k.r("b64", xname), k.r("b64", "af"), k.r("b64", oname))
    for reg, (base, stride) in zip(regs, (x, f, o)):
        k.e(f"mad.lo.u64 {reg}, {t64}, {stride}, {base};")
        k.e(f"add.u64 {reg}, {reg}, {cb};")
    return regs


def plain_entry(name, k, arg_bytes, latency_bound=False):
    """Closes a kernel body (DONE: ret) and wraps it in an entry of one `arg_bytes` parameter
    block and at most 256 threads (post: PostArgs, 80 bytes; expand: ExpandArgs, 48).
    latency_bound: `.minnctapersm 1`, so ptxas stops fitting the kernel to 32 registers (full
    occupancy) and issues every load before the math: the V4 post decode kernel had sunk two of
    its x loads behind the first FMAs, three HBM round trips in a row (H100 T = 16 in a graph
    2.11 us, Paper 1.74)."""
    k.label("DONE")
    k.e("ret;")
    occupancy = "\n.minnctapersm 1" if latency_bound else ""
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[{arg_bytes}]
)
.maxntid 256, 1, 1{occupancy}
{{
{k.body()}
}}
"""


def post_thread_id(k, tid, ctaid, ntid, gid):
    """gid = the thread's index in the grid."""
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"mov.u32 {ctaid}, %ctaid.x;")
    k.e(f"mov.u32 {ntid}, %ntid.x;")
    k.e(f"mad.lo.u32 {gid}, {ctaid}, {ntid}, {tid};")


def post_token_chunk(k, item, chunks, t, ch, tmp, chunk_bytes, cbytes):
    """Item -> token t and chunk ch (item = t chunks + ch); returns t64, the chunk's byte offset
    cb and cbytes as u64."""
    p = lambda s: k.r("b64", s)
    k.e(f"div.u32 {t}, {item}, {chunks};")
    k.e(f"mul.lo.u32 {tmp}, {t}, {chunks};")
    k.e(f"sub.u32 {ch}, {item}, {tmp};")
    t64, cb, cb64 = p("t64"), p("cb"), p("cb64")
    k.e(f"cvt.u64.u32 {t64}, {t};")
    k.e(f"mul.wide.u32 {cb}, {ch}, {chunk_bytes};")
    k.e(f"cvt.u64.u32 {cb64}, {cbytes};")
    return t64, cb, cb64


def post_kernel(form, dtype, n, V=None):
    name = f"mhc_post_{form}_{dtype}_n{n}" + (f"_v{V}" if V else "")
    V = V or vchan(n)
    es = ESIZE[dtype]
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    px, pf, php, phr, po, sx, sf, so, items, chunks, cbytes = post_params(k)
    gid, tid, ctaid, ntid, t, ch, tmp = u("gid"), u("tid"), u("ctaid"), u("ntid"), u("t"), u("ch"), u("tmp")
    pr = k.r("pred", "p")
    k.comment("one thread = one token t and one chunk of V channels, all n streams")
    post_thread_id(k, tid, ctaid, ntid, gid)
    k.e(f"setp.ge.u32 {pr}, {gid}, {items};")
    k.e(f"@{pr} bra DONE;")
    t64, cb, cb64 = post_token_chunk(k, gid, chunks, t, ch, tmp, V * es, cbytes)
    ax, af, ao = post_rows(k, t64, cb, (px, sx), (pf, sf), (po, so), "ax0", "ao0")
    ahp, ahr = p("ahp"), p("ahr")
    k.e(f"mad.lo.u64 {ahp}, {t64}, {n * 4}, {php};")
    k.e(f"mad.lo.u64 {ahr}, {t64}, {n * n * 4}, {phr};")
    k.comment(f"issue every load of the chunk first: n={n} x vectors + f ({(n + 1) * V * es} bytes in flight)")
    axs = [ax]
    for j in range(1, n):
        a = p(f"ax{j}")
        k.e(f"add.u64 {a}, {axs[-1]}, {cb64};")
        axs.append(a)
    xs = [load_row(k, dtype, f"x{j}", axs[j], V) for j in range(n)]
    fv = load_row(k, dtype, "f", af, V)
    hp = load_f32_run(k, "hp", ahp, n)
    aos = [ao]
    for j in range(1, n):
        a = p(f"ao{j}")
        k.e(f"add.u64 {a}, {aos[-1]}, {cb64};")
        aos.append(a)
    if form == "v4":
        k.comment("V4: out[k] = h_post[k] f + sum_j h_res[j][k] x[j]; row j of h_res is contiguous,")
        k.comment("so accumulate all n outputs while walking j (n*V accumulators)")
        acc = [[k.r("f32", f"acc{kk}_{v}") for v in range(V)] for kk in range(n)]
        for kk in range(n):
            for v in range(V):
                k.e(f"mul.f32 {acc[kk][v]}, {hp[kk]}, {fv[v]};")
        for j in range(n):
            rr = load_f32_run(k, f"r{j}_", ahr, n, off=4 * j * n)
            for kk in range(n):
                for v in range(V):
                    k.e(f"fma.rn.f32 {acc[kk][v]}, {rr[kk]}, {xs[j][v]}, {acc[kk][v]};")
        for kk in range(n):
            store_row(k, dtype, acc[kk], aos[kk], tag=f"o{kk}")
    else:
        k.comment("Paper: out[i] = h_post[i] f + sum_j h_res[i][j] x[j]; row i of h_res is contiguous")
        for i in range(n):
            rr = load_f32_run(k, f"r{i}_", ahr, n, off=4 * i * n)
            acc = [k.r("f32", f"acc{i}_{v}") for v in range(V)]
            for v in range(V):
                k.e(f"mul.f32 {acc[v]}, {hp[i]}, {fv[v]};")
            for j in range(n):
                for v in range(V):
                    k.e(f"fma.rn.f32 {acc[v]}, {rr[j]}, {xs[j][v]}, {acc[v]};")
            store_row(k, dtype, acc, aos[i], tag=f"o{i}")
    # the decode variants (T <= 16, `_v2`) are latency-bound: one wave, every load up front
    return plain_entry(name, k, 80, latency_bound=name.endswith("_v2"))


LK_NS = [16, 32]  # post "lk" variants: lane = output stream
LK_GROUP = 8  # streams whose x chunk and coefficient loads are written together (ptxas hoists them all)
# Largest T of the _lk variants (H100, bf16, n = 32, C = 1280, us back-to-back). Against the V = 2
# kernel: T = 1 / 4 / 16 3.2 / 5.2 / 8.6 vs 6.7 / 11.2 / 12.1, but T = 64 / 8192 19.3 / 1888 vs
# 13.6 / 1222: every lane unpacks the same x words, so with every SM busy it is issue-bound.
LK_TMAX = 16
# Bytes of x per thread and stream. At 32 registers (ptxas's full-occupancy fit) 8 bytes kept a
# group's 8 x loads in flight, 16 issued them as the FMAs consumed them (T = 1 / 4 / 16 4.8 / 8.3
# / 9.4 us). With `.minnctapersm 1` (latency_bound: 113 registers, every load of all n streams
# before the first FMA; runtime round 12) 8 bytes stays faster than 16 (H100 n = 32 in a graph:
# T = 1 / 4 1.57 / 2.96 vs 1.91 / 3.61 us; was 2.68 / 4.74 at 32 registers).
LK_BYTES = 8


def post_lane_kernel(form, dtype, n):
    """post for n >= 16: n threads per (token, LK_BYTES chunk), thread k computes output stream k
    over all n input streams. The x chunk of stream j is one load that the n lanes of a chunk
    share (one request per warp), the coefficient h_res[j][k] (V4) / h_res[k][j] (Paper) a
    4-byte load per lane; 32 registers instead of the V = 2 kernel's 130 (n*V accumulators and
    x values), so a few tokens spread over many more warps. Same FMA order as post_kernel (h_post
    f first, then j = 0..n-1): the same bits."""
    name = f"mhc_post_{form}_{dtype}_n{n}_lk"
    es = ESIZE[dtype]
    V = LK_BYTES // es
    lg = n.bit_length() - 1
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    px, pf, php, phr, po, sx, sf, so, items, chunks, cbytes = post_params(k)
    gid, tid, ctaid, ntid, item, kk, t, ch, tmp = (u(x) for x in ["gid", "tid", "ctaid", "ntid", "item", "kk", "t",
                                                                   "ch", "tmp"])
    pr = k.r("pred", "p")
    k.comment(f"thread = (item = token x chunk of {V} channels, output stream k = gid % {n})")
    post_thread_id(k, tid, ctaid, ntid, gid)
    k.e(f"shr.u32 {item}, {gid}, {lg};")
    k.e(f"and.b32 {kk}, {gid}, {n - 1};")
    k.e(f"setp.ge.u32 {pr}, {item}, {items};")
    k.e(f"@{pr} bra DONE;")
    t64, cb, cb64 = post_token_chunk(k, item, chunks, t, ch, tmp, LK_BYTES, cbytes)
    k64 = p("k64")
    k.e(f"cvt.u64.u32 {k64}, {kk};")
    ax, af, ao = post_rows(k, t64, cb, (px, sx), (pf, sf), (po, so), "ax", "ao")
    ahp, ahr = p("ahp"), p("ahr")
    k.e(f"mad.lo.u64 {ao}, {k64}, {cb64}, {ao};          // out[t][k][chunk]")
    k.e(f"mad.lo.u64 {ahp}, {t64}, {n * 4}, {php};")
    k.e(f"mad.lo.u64 {ahp}, {k64}, 4, {ahp};")
    k.e(f"mad.lo.u64 {ahr}, {t64}, {n * n * 4}, {phr};")
    if form == "v4":
        k.e(f"mad.lo.u64 {ahr}, {k64}, 4, {ahr};             // h_res[t][j][k]: + 4 n j")
        hstep = 4 * n
    else:
        k.e(f"mad.lo.u64 {ahr}, {k64}, {4 * n}, {ahr};       // h_res[t][k][j]: + 4 j")
        hstep = 4
    fv = load_row(k, dtype, "f", af, V)
    hp = k.r("f32", "hp")
    k.e(f"ld.global.nc.f32 {hp}, [{ahp}];")
    acc = [k.r("f32", f"acc{v}") for v in range(V)]
    for v in range(V):
        k.e(f"mul.f32 {acc[v]}, {hp}, {fv[v]};")
    for g in range(0, n, LK_GROUP):
        k.comment(f"streams {g}..{g + LK_GROUP - 1}: every load first, then the FMAs in stream order")
        xs, hs = [], []
        for j in range(g, g + LK_GROUP):
            xs.append(load_row(k, dtype, f"x{j - g}", ax, V, off=0))
            h = k.r("f32", f"h{j - g}")
            k.e(f"ld.global.nc.f32 {h}, [{ahr}+{hstep * j}];")
            hs.append(h)
            k.e(f"add.u64 {ax}, {ax}, {cb64};")
        for i in range(LK_GROUP):
            for v in range(V):
                k.e(f"fma.rn.f32 {acc[v]}, {hs[i]}, {xs[i][v]}, {acc[v]};")
    store_row(k, dtype, acc, ao, tag="o")
    return plain_entry(name, k, 80, latency_bound=True)


POST_MMA_NS = [16, 32]
POST_MMA_THREADS = 256
POST_MMA_SMEM = 220 * 1024  # the x tile's bytes at most (dynamic shared memory)
POST_MMA_PAD = 16  # bytes after each x row (conflict-free ldmatrix, as static_mma)
POST_MMA_MAXNREG = 96  # 2 CTAs of 8 warps per SM
# Smallest T the plan gives the tensor-core post: one CTA per token leaves SMs idle below ~2 waves'
# worth (H100 bf16 n = 32 C = 1280, us per call, V = 2 kernel / this one: T = 48 16.5 / 19.9, 64
# 17.0 / 20.5, 80 23.6 / 21.2, 128 28.1 / 23.3, 256 49.3 / 29.9). n = 16 (C = 1280, V4; the V = 4
# kernel moves 2x the channels per thread there): T = 256 20.7 / 21.6, 384 23.5 / 24.8, 448
# 29.5 / 26.4, 512 31.2 / 28.2, 1024 52.0 / 49.3, 8192 370.9 / 294.3 (thirteenth session).
POST_MMA_TMIN = {16: 400, 32: 65}


def post_mma_cmax(n):
    """Largest C whose padded x tile (n rows of 2 C + POST_MMA_PAD bytes) fits POST_MMA_SMEM."""
    cmax = (POST_MMA_SMEM - n * POST_MMA_PAD) // (2 * n)
    return cmax - cmax % 8


def post_mma_kernel(form, n):
    """post for bf16, n = 16 / 32 on tensor cores: one CTA per token; the token's x (n rows of C
    bf16) lands in shared memory by bulk copies (rows padded by POST_MMA_PAD bytes), h_res and
    h_post through shared memory; out = A x + h_post f with A = h_res (Paper) or h_res^T (V4) as
    m16n8k16 fragments split into bf16 hi + lo (|h - hi - lo| <= 2^-16 |h|; x is exact in bf16),
    f32 accumulation in a fixed order (hi then lo per k-step), B = 8-channel tiles of x by
    ldmatrix.trans. The V = 2 kernel spent n^2 FMAs per channel with h_res re-read by every
    thread. PostArgs as the other post kernels, with items = T (one CTA per token) and chunks =
    C / 8 (the 8-channel tiles)."""
    MT = n // 16
    NW = POST_MMA_THREADS // 32
    name = f"mhc_post_mma_{form}_bf16_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    px, pf, php, phr, po, sx, sf, so, items, chunks, cbytes = post_params(k)
    tid, lane, warp, tok, tmp, it = (u(x) for x in ["tid", "lane", "warp", "tok", "tmp", "it"])
    pr, p1 = k.r("pred", "p"), k.r("pred", "p1")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    k.e(f"mov.u32 {tok}, %ctaid.x;")
    t64, xrow, frow, orow = p("t64"), p("xrow"), p("frow"), p("orow")
    k.e(f"cvt.u64.u32 {t64}, {tok};")
    k.e(f"mad.lo.u64 {xrow}, {t64}, {sx}, {px};")
    k.e(f"mad.lo.u64 {frow}, {t64}, {sf}, {pf};")
    k.e(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    sX, pitch, cpb = u("sX"), u("pitch"), u("cpbar")
    k.comment(f"dynamic shared memory: the x tile, n rows of C bf16 each followed by {POST_MMA_PAD} bytes")
    k.e(f"mov.u32 {sX}, pm_dyn;")
    k.e(f"add.u32 {pitch}, {cbytes}, {POST_MMA_PAD};")
    k.e(f"mov.u32 {cpb}, pm_cpbar;")
    k.comment("cpbar: one arrival (thread 0, with the tile's byte count) and the bulk copies' complete_tx;")
    k.comment("initialised by thread 0 before barrier 0")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra INIT_END;")
    k.e(f"mbarrier.init.shared::cta.b64 [{cpb}], 1;")
    k.e("fence.mbarrier_init.release.cluster;")
    k.label("INIT_END")
    k.e("barrier.sync 0;")
    tb, st64 = u("tbytes"), p("cpst")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra CP_EXPECT_END;")
    k.e(f"mul.lo.u32 {tb}, {cbytes}, {n};")
    k.e(f"mbarrier.arrive.expect_tx.shared::cta.b64 {st64}, [{cpb}], {tb};")
    k.label("CP_EXPECT_END")
    k.comment(f"lane 0 of warp w bulk-copies stream rows w, w + {NW}, ... (cbytes each)")
    k.e(f"setp.ne.u32 {pr}, {lane}, 0;")
    k.e(f"@{pr} bra CP_END;")
    ii, src, dst, cbw, pw8 = u("ii"), p("src"), u("dst"), p("cbw"), u("pitchw")
    k.e(f"mov.u32 {ii}, {warp};")
    k.e(f"mul.wide.u32 {src}, {warp}, {cbytes};")
    k.e(f"add.u64 {src}, {src}, {xrow};")
    k.e(f"mad.lo.u32 {dst}, {warp}, {pitch}, {sX};")
    k.e(f"mul.wide.u32 {cbw}, {cbytes}, {NW};")
    k.e(f"mul.lo.u32 {pw8}, {pitch}, {NW};")
    k.label("CP_ROW")
    k.e(f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {cbytes}, [{cpb}];")
    k.e(f"add.u64 {src}, {src}, {cbw};")
    k.e(f"add.u32 {dst}, {dst}, {pw8};")
    k.e(f"add.u32 {ii}, {ii}, {NW};")
    k.e(f"setp.lt.u32 {pr}, {ii}, {n};")
    k.e(f"@{pr} bra CP_ROW;")
    k.label("CP_END")
    k.comment(f"h_res ({n * n} f32) and h_post ({n}) -> shared memory, one float4 per thread, while the rows fly")
    ga, sa = p("ga"), u("sa")
    v4 = [f(f"hv{i}") for i in range(4)]
    k.e(f"setp.ge.u32 {pr}, {tid}, {n * n // 4};")
    k.e(f"@{pr} bra HR_END;")
    k.e(f"mad.lo.u64 {ga}, {t64}, {n * n * 4}, {phr};")
    k.e(f"mad.wide.u32 {ga}, {tid}, 16, {ga};")
    k.e(f"ld.global.nc.v4.f32 {{{', '.join(v4)}}}, [{ga}];")
    k.e(f"mov.u32 {sa}, pm_hres;")
    k.e(f"mad.lo.u32 {sa}, {tid}, 16, {sa};")
    k.e(f"st.shared.v4.f32 [{sa}], {{{', '.join(v4)}}};")
    k.label("HR_END")
    k.e(f"setp.ge.u32 {pr}, {tid}, {n // 4};")
    k.e(f"@{pr} bra HP_END;")
    k.e(f"mad.lo.u64 {ga}, {t64}, {n * 4}, {php};")
    k.e(f"mad.wide.u32 {ga}, {tid}, 16, {ga};")
    k.e(f"ld.global.nc.v4.f32 {{{', '.join(v4)}}}, [{ga}];")
    k.e(f"mov.u32 {sa}, pm_hpost;")
    k.e(f"mad.lo.u32 {sa}, {tid}, 16, {sa};")
    k.e(f"st.shared.v4.f32 [{sa}], {{{', '.join(v4)}}};")
    k.label("HP_END")
    k.e("barrier.sync 0;")
    g, t2 = u("g"), u("t2")
    k.e(f"shr.u32 {g}, {lane}, 2;")
    k.e(f"and.b32 {t2}, {lane}, 3;")
    k.e(f"shl.b32 {t2}, {t2}, 1;")
    what = "h_res" if form == "paper" else "h_res^T (V4: out[k] = sum_j h_res[j][k] x[j])"
    k.comment(f"A = {what} as m16n8k16 fragments, {MT} x {MT} tiles: lane (g, t) holds rows g, g + 8 and")
    k.comment("columns 2t, 2t + 1, 2t + 8, 2t + 9 of each; hi = bf16(a), lo = bf16(a - hi)")
    e0, e1, h0, h1, ra = f("ae0"), f("ae1"), f("ah0"), f("ah1"), u("ra")
    k.e(f"mov.u32 {ra}, pm_hres;")
    if form == "paper":
        k.e(f"mad.lo.u32 {tmp}, {g}, {n}, {t2};")      # element (row g, column 2t)
    else:
        k.e(f"mad.lo.u32 {tmp}, {t2}, {n}, {g};")      # A[g][2t] = h_res[2t][g]
    k.e(f"mad.lo.u32 {ra}, {tmp}, 4, {ra};")
    Ahi = [[[u(f"ah{mt}_{ks}_{r}") for r in range(4)] for ks in range(MT)] for mt in range(MT)]
    Alo = [[[u(f"al{mt}_{ks}_{r}") for r in range(4)] for ks in range(MT)] for mt in range(MT)]
    for mt in range(MT):
        for ks in range(MT):
            for r in range(4):
                row, col = 16 * mt + 8 * (r & 1), 16 * ks + 8 * (r >> 1)
                if form == "paper":
                    k.e(f"ld.shared.v2.f32 {{{e0}, {e1}}}, [{ra}+{4 * (row * n + col)}];")
                else:
                    k.e(f"ld.shared.f32 {e0}, [{ra}+{4 * (col * n + row)}];")
                    k.e(f"ld.shared.f32 {e1}, [{ra}+{4 * ((col + 1) * n + row)}];")
                k.e(f"cvt.rn.bf16x2.f32 {Ahi[mt][ks][r]}, {e1}, {e0};")
                k.e(f"shl.b32 {h0}, {Ahi[mt][ks][r]}, 16;")
                k.e(f"and.b32 {h1}, {Ahi[mt][ks][r]}, 0xffff0000;")
                k.e(f"sub.f32 {e0}, {e0}, {h0};")
                k.e(f"sub.f32 {e1}, {e1}, {h1};")
                k.e(f"cvt.rn.bf16x2.f32 {Alo[mt][ks][r]}, {e1}, {e0};")
    k.comment("h_post of this lane's output rows g + 8 h + 16 mt")
    rh = u("rh")
    k.e(f"mov.u32 {rh}, pm_hpost;")
    k.e(f"mad.lo.u32 {rh}, {g}, 4, {rh};")
    hq = [[f(f"hq{mt}_{h}") for h in range(2)] for mt in range(MT)]
    for mt in range(MT):
        for h in range(2):
            k.e(f"ld.shared.f32 {hq[mt][h]}, [{rh}+{4 * (16 * mt + 8 * h)}];")
    xl, lr, nt1 = u("xl"), u("lr"), u("nt1")
    k.comment(f"ldmatrix row addresses: lane l gives x row (stream) l mod {n} of the 8-channel tile")
    k.e(f"and.b32 {lr}, {lane}, {n - 1};")
    k.e(f"mad.lo.u32 {xl}, {lr}, {pitch}, {sX};")
    og, cb8 = p("og"), p("cb8")
    k.comment("this lane's output: row g of the stream-major out row (row i + 8 is 8 C bf16 further)")
    k.e(f"mul.wide.u32 {og}, {g}, {cbytes};")
    k.e(f"add.u64 {og}, {og}, {orow};")
    k.e(f"mul.wide.u32 {cb8}, {cbytes}, 8;")
    zero = f("zero")
    k.e(f"mov.f32 {zero}, 0f00000000;")
    cpok = k.r("pred", "cpok")
    k.comment("cpbar's phase 0 completes when thread 0 has arrived and every row has landed")
    k.label("CP_WAIT")
    k.e(f"mbarrier.try_wait.parity.shared::cta.b64 {cpok}, [{cpb}], 0;")
    k.e(f"@!{cpok} bra CP_WAIT;")
    k.comment(f"warp w takes the 8-channel tiles w + {2 * NW} j and w + {NW} + {2 * NW} j (the second")
    k.comment("predicated off past the last tile; its reads clamped to the first's)")
    k.e(f"mov.u32 {it}, {warp};")
    k.label("PB_LOOP")
    k.e(f"setp.ge.u32 {pr}, {it}, {chunks};")
    k.e(f"@{pr} bra DONE;")
    k.e(f"add.u32 {nt1}, {it}, {NW};")
    k.e(f"setp.lt.u32 {p1}, {nt1}, {chunks};")
    k.e(f"selp.b32 {nt1}, {nt1}, {it}, {p1};")
    nts = [it, nt1]
    B = [[u(f"b{x}_{r}") for r in range(2 * MT)] for x in range(2)]
    xa = u("xa")
    fw = [u(f"fw{x}") for x in range(2)]
    ch = [u(f"ch{x}") for x in range(2)]
    fa = p("fa")
    for x in range(2):
        k.e(f"mad.lo.u32 {ch[x]}, {nts[x]}, 8, {t2};")
        k.e(f"mad.wide.u32 {fa}, {ch[x]}, 2, {frow};")
        k.e(f"ld.global.nc.b32 {fw[x]}, [{fa}];            // f[ch], f[ch + 1]")
        k.e(f"mad.lo.u32 {xa}, {nts[x]}, 16, {xl};")
        shape = "x4" if MT == 2 else "x2"
        k.e(f"ldmatrix.sync.aligned.m8n8.{shape}.trans.shared.b16 {{{', '.join(B[x])}}}, [{xa}];")
    k.comment("one accumulator chain per (tile, m-tile): hi then lo of each k-step (a fixed order)")
    acc = {}
    for x in range(2):
        for mt in range(MT):
            d = [f(f"c{x}{mt}_{r}") for r in range(4)]
            acc[x, mt] = d
            first = True
            for ks in range(MT):
                for A in (Ahi, Alo):
                    cin = ", ".join([zero] * 4) if first else ", ".join(d)
                    first = False
                    k.e(f"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{', '.join(d)}}}, "
                        f"{{{', '.join(A[mt][ks])}}}, {{{B[x][2 * ks]}, {B[x][2 * ks + 1]}}}, {{{cin}}};")
    oa, w = p("oa"), u("w")
    fv, vv = [f(f"fv{i}") for i in range(2)], [f(f"v{i}") for i in range(2)]
    for x in range(2):
        if x:
            k.e(f"@!{p1} bra PB_NEXT;")
        k.comment(f"tile {x}: channels ch, ch + 1; out = A x (hi + lo) + h_post f")
        k.e(f"shl.b32 {tmp}, {fw[x]}, 16;")
        k.e(f"mov.b32 {fv[0]}, {tmp};")
        k.e(f"and.b32 {tmp}, {fw[x]}, 0xffff0000;")
        k.e(f"mov.b32 {fv[1]}, {tmp};")
        k.e(f"mad.wide.u32 {oa}, {ch[x]}, 2, {og};")
        for mt in range(MT):
            for h in range(2):
                for i in range(2):
                    k.e(f"fma.rn.f32 {vv[i]}, {hq[mt][h]}, {fv[i]}, {acc[x, mt][2 * h + i]};")
                k.e(f"cvt.rn.bf16x2.f32 {w}, {vv[1]}, {vv[0]};")
                k.e(f"st.global.b32 [{oa}], {w};")
                if (mt, h) != (MT - 1, 1):
                    k.e(f"add.u64 {oa}, {oa}, {cb8};")
    k.label("PB_NEXT")
    k.e(f"add.u32 {it}, {it}, {2 * NW};")
    k.e("bra.uni PB_LOOP;")
    k.label("DONE")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[80]
)
.reqntid {POST_MMA_THREADS}, 1, 1
.maxnreg {POST_MMA_MAXNREG}
{{
    .shared .align 16 .b8 pm_hres[{n * n * 4}];
    .shared .align 16 .b8 pm_hpost[{n * 4}];
    .shared .align 8 .b64 pm_cpbar;
{k.body()}
}}
"""


def write_post():
    out = [PROLOGUE, """
// ==============================================================================================
// post (MATH.md stage 4, the residual merge), sm_90a. Written by gen_forward.py (see there why).
//   V4:    x'[t][k][c] = h_post[t,k] f[t][c] + sum_j h_res[t][j][k] x[t][j][c]
//   Paper: x'[t][i][c] = h_post[t,i] f[t][c] + sum_j h_res[t][i][j] x[t][j][c]
// Tile: one thread = one token x one chunk of V channels (V = min(8, 64/n): 8 for n <= 8, 4 at
//   n = 16, 2 at n = 32) over all n streams; grid = ceil(T * C/V / 128) CTAs of 128 threads.
//   Consecutive threads take consecutive chunks of one token, so each warp's loads and stores
//   of a stream row are contiguous (16-byte vectors for bf16 V = 8 and f32 V = 4/8).
// Register plan: x[j][v] (n*V f32, bf16 widened by a shift), f[v], h_post[n]; V4 keeps n*V
//   accumulators (h_res row j is contiguous in memory: 16-byte coefficient loads), Paper keeps V
//   (row i contiguous). Coefficients are warp-uniform loads (L1 broadcast).
// Bytes: per token (n+1) C esize read + n C esize written + 4(n + n^2) coefficients; the floor
//   is that over the measured copy bandwidth. All loads of a chunk are issued before the first
//   FMA: (n+1) x 16 bytes in flight per thread.
// Measured (H200, copy 4228 GB/s, bf16, notes/cuda-runtime.md round 5): T=8192 n=4 C=4096 V4
//   145.1 us = 98.5% of copy (1.01x floor), C=7168 99.9%; n=8 C=1280 89.7%; n=32 C=1280 29%
//   (3.45x floor: 130-150 registers). Decode (V=2 variants): T<=16 3.5-5.2 us back-to-back,
//   1.27-2.56 us per call in a CUDA graph (an empty kernel: 0.85-0.96 us).
// No local memory (checked at load by the runtime and by `mhc inspect`).
""" + POST_ARGS + "\n"]
    names = []
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in NS:
                nm, txt = post_kernel(form, dtype, n)
                names.append(nm)
                out.append(txt)
    out.append("""
// ----------------------------------------------------------------------------------------------
// Decode variants (T <= 16, n <= 4): the same code with V = 2 channels per thread, i.e. 4x the
// threads of the V = 8 kernels for bf16, so that a handful of tokens still spreads over every SM
// (T = 16, C = 4096: 256 CTAs instead of 64) and each SM has fewer bytes queued behind one DRAM
// round trip. Selected by the plan for T <= 16.
""")
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in [1, 2, 4, 8]:
                nm, txt = post_kernel(form, dtype, n, V=2)
                names.append(nm)
                out.append(txt)
    out.append("""
// ----------------------------------------------------------------------------------------------
// Lane-per-stream decode variants (n = 16 / 32, T <= 16, `_lk`): n threads per (token, 8-byte
// chunk), thread k writes output stream k. The n lanes of a chunk share each x load (one request
// per warp) and load their own coefficient; 32 registers against the V = 2 kernel's 130, so a
// few tokens spread over many more warps. Same FMA order as the kernels above: the same bits.
// H100 bf16 n = 32 C = 1280, us back-to-back: T = 1 / 4 / 16 3.2 / 5.2 / 8.6 (V = 2: 6.7 / 11.2 /
// 12.1); slower from T = 64 on (every lane unpacks the same x words).
""")
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in LK_NS:
                nm, txt = post_lane_kernel(form, dtype, n)
                names.append(nm)
                out.append(txt)
    out.append(f"""
// ----------------------------------------------------------------------------------------------
// Tensor-core variants (bf16, n = 16 / 32, `mhc_post_mma_*`, T >= {POST_MMA_TMIN[16]} / {POST_MMA_TMIN[32]}): one CTA of
// {POST_MMA_THREADS} threads per token; the token's x rows land in shared memory by cp.async.bulk (rows
// padded by {POST_MMA_PAD} bytes: conflict-free ldmatrix), h_res / h_post through shared memory;
// out = A x + h_post f on mma.sync m16n8k16 with A = h_res (Paper) or h_res^T (V4) split into
// bf16 hi + lo (x exact in bf16; |a - hi - lo| <= 2^-16 |a|), f32 accumulation in a fixed order.
// PostArgs with items = T, chunks = C / 8. C <= {post_mma_cmax(32)} at n = 32, {post_mma_cmax(16)} at n = 16 (the tile);
// rows, f and out 16-byte aligned. The V = 2 kernel above spends n^2 FMAs per channel and
// re-reads h_res (4 KB at n = 32) in every thread: H100 n = 32 C = 1280 T = 8192 1226 us (2.6x
// its floor). Measured (H100, copy 2978 GB/s, n = 32, C = 1280, V4, us per call, before -> after):
// T = 256 49.6 -> 29.8, 1024 159.6 -> 93.3, 4096 616.9 -> 333.1, 8192 1226.3 -> 641.5 (73.2% of
// copy, 1.36x the floor; was 2.62x). 74 registers, no local memory.
.extern .shared .align 128 .b8 pm_dyn[];
""")
    for form in ["v4", "paper"]:
        for n in POST_MMA_NS:
            nm, txt = post_mma_kernel(form, n)
            names.append(nm)
            out.append(txt)
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# head

HEAD_ARGS = """// struct HeadArgs (88 bytes):
//   +0 x  +8 phi  +16 scale  +24 base  +32 out       (u64)
//   +40 x_stride  +48 out_stride                      (u64 bytes)
//   +56 tokens  +60 cbytes  +64 kchunks (nC/V1)  +68 cchunks (C/V2)   (u32)
//   +72 eps_norm  +76 eps_hc  +80 inv_k (1/(nC))  +84 pad             (f32)"""


def head_tiles(n):
    v1 = min(8, 32 // n)  # phase 1: phi[i][k..k+V1] for all i held in n*V1 <= 32 registers
    tt = min(8, 64 // n)  # tokens per CTA: TT*n projection accumulators <= 64 registers
    return v1, tt, vchan(n)


def warp_allreduce(k, v, tag):
    tmp = k.r("f32", f"{tag}_sh")
    for off in [16, 8, 4, 2, 1]:
        k.e(f"shfl.sync.bfly.b32 {tmp}, {v}, {off}, 0x1f, 0xffffffff;")
        k.e(f"add.f32 {v}, {v}, {tmp};")


def head_params(k, kname, cname):
    """The HeadArgs loads (header above); the two chunk counts (+64, +68) are named per kernel."""
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    regs = [p(s) for s in ["px", "pphi", "psc", "pbase", "po", "sx", "so"]]
    regs += [u(s) for s in ["tokens", "cbytes", kname, cname]] + [f(s) for s in ["eps_n", "eps_hc", "inv_k"]]
    for i, reg in enumerate(regs):
        ty = "u64" if i < 7 else ("u32" if i < 11 else "f32")
        off = 8 * i if i < 7 else 56 + 4 * (i - 7)
        k.e(f"ld.param.{ty} {reg}, [args+{off}];")
    k.grid_dependency()
    return regs


def head_kernel(dtype, n):
    V1, TT, V2 = head_tiles(n)
    es = ESIZE[dtype]
    RED = TT * (n + 1)
    name = f"mhc_head_{dtype}_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    px, pphi, psc, pbase, po, sx, so, tokens, cbytes, kchunks, cchunks, eps_n, eps_hc, inv_k = head_params(
        k, "kchunks", "cchunks")
    tid, ctaid, t0, lane, warp, q, tmp = u("tid"), u("ctaid"), u("t0"), u("lane"), u("warp"), u("q"), u("tmp")
    pr = k.r("pred", "p")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"mov.u32 {ctaid}, %ctaid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    k.e(f"mul.lo.u32 {t0}, {ctaid}, {TT};")
    last = u("tlast")
    k.e(f"sub.u32 {last}, {tokens}, 1;")
    k.comment(f"token rows of the tile; rows past T are clamped to T-1 (computed, never stored)")
    rows = []
    for tt in range(TT):
        tk, t64, a = u(f"tk{tt}"), p(f"tk64_{tt}"), p(f"row{tt}")
        k.e(f"add.u32 {tk}, {t0}, {tt};")
        k.e(f"min.u32 {tk}, {tk}, {last};")
        k.e(f"cvt.u64.u32 {t64}, {tk};")
        k.e(f"mad.lo.u64 {a}, {t64}, {sx}, {px};")
        rows.append(a)
    phis = p("phistride")
    k.e(f"mul.wide.u32 {phis}, {kchunks}, {V1 * 4};")
    P = [[k.r("f32", f"P{tt}_{i}") for i in range(n)] for tt in range(TT)]
    SS = [k.r("f32", f"ss{tt}") for tt in range(TT)]
    for tt in range(TT):
        k.e(f"mov.f32 {SS[tt]}, 0f00000000;")
        for i in range(n):
            k.e(f"mov.f32 {P[tt][i]}, 0f00000000;")
    k.comment(f"phase 1: P[t][i] = sum_k x[t][k] phi[i][k], ss[t] = sum_k x^2; thread walks k in chunks")
    k.comment(f"of V1={V1}; phi[i][chunk] for all i stays in registers and serves all {TT} tokens")
    k.e(f"mov.u32 {q}, {tid};")
    k.label("P1_LOOP")
    k.e(f"setp.ge.u32 {pr}, {q}, {kchunks};")
    k.e(f"@{pr} bra P1_END;")
    qo, qx = p("qo"), p("qx")
    k.e(f"mul.wide.u32 {qo}, {q}, {V1 * 4};")
    k.e(f"mul.wide.u32 {qx}, {q}, {V1 * es};")
    aphi = [p(f"aphi{i}") for i in range(n)]
    k.e(f"add.u64 {aphi[0]}, {pphi}, {qo};")
    for i in range(1, n):
        k.e(f"add.u64 {aphi[i]}, {aphi[i - 1]}, {phis};")
    xvs = []
    for tt in range(TT):
        a = p(f"xa{tt}")
        k.e(f"add.u64 {a}, {rows[tt]}, {qx};")
        xvs.append(load_row(k, dtype, f"xv{tt}", a, V1))
    ph = [load_f32_run(k, f"ph{i}_", aphi[i], V1) for i in range(n)]
    for tt in range(TT):
        xv = xvs[tt]
        for v in range(V1):
            k.e(f"fma.rn.f32 {SS[tt]}, {xv[v]}, {xv[v]}, {SS[tt]};")
        for i in range(n):
            for v in range(V1):
                k.e(f"fma.rn.f32 {P[tt][i]}, {ph[i][v]}, {xv[v]}, {P[tt][i]};")
    k.e(f"add.u32 {q}, {q}, {THREADS};")
    k.e("bra.uni P1_LOOP;")
    k.label("P1_END")
    k.comment("deterministic CTA reduction: butterfly in each warp, then warps summed in order 0..7")
    vals = []
    for tt in range(TT):
        vals += P[tt] + [SS[tt]]
    for idx, v in enumerate(vals):
        warp_allreduce(k, v, f"rd{idx}")
    pl = k.r("pred", "lane0")
    k.e(f"setp.eq.u32 {pl}, {lane}, 0;")
    sbase = p("sbase")
    k.e(f"mul.wide.u32 {sbase}, {warp}, {RED * 4};")
    red = p("red")
    k.e(f"mov.u64 {red}, sred;")
    k.e(f"add.u64 {sbase}, {sbase}, {red};")
    for idx, v in enumerate(vals):
        k.e(f"@{pl} st.shared.f32 [{sbase}+{idx * 4}], {v};")
    k.e("bar.sync 0;")
    k.comment(f"threads tt*n+i < TT*n: coefficient h[tt][i] = sigma((P * inv_rms) * scale + base[i]) + eps_hc")
    k.e(f"setp.ge.u32 {pr}, {tid}, {TT * n};")
    k.e(f"@{pr} bra COEF_END;")
    ttr, ir = u("ctt"), u("ci")
    lg = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4, 32: 5}[n]
    k.e(f"shr.u32 {ttr}, {tid}, {lg};")
    k.e(f"and.b32 {ir}, {tid}, {n - 1};")
    ip, iss = u("ip"), u("iss")
    k.e(f"mad.lo.u32 {ip}, {ttr}, {n + 1}, {ir};")
    k.e(f"mad.lo.u32 {iss}, {ttr}, {n + 1}, {n};")
    sp, sss, pw = k.r("f32", "sump"), k.r("f32", "sums"), k.r("f32", "pw")
    k.e(f"mov.f32 {sp}, 0f00000000;")
    k.e(f"mov.f32 {sss}, 0f00000000;")
    a1, a2 = p("ra1"), p("ra2")
    k.e(f"mul.wide.u32 {a1}, {ip}, 4;")
    k.e(f"add.u64 {a1}, {a1}, {red};")
    k.e(f"mul.wide.u32 {a2}, {iss}, 4;")
    k.e(f"add.u64 {a2}, {a2}, {red};")
    for w in range(THREADS // 32):
        k.e(f"ld.shared.f32 {pw}, [{a1}+{w * RED * 4}];")
        k.e(f"add.f32 {sp}, {sp}, {pw};")
        k.e(f"ld.shared.f32 {pw}, [{a2}+{w * RED * 4}];")
        k.e(f"add.f32 {sss}, {sss}, {pw};")

    def store_h(h):
        hsa, ha = p("hsa"), p("ha")
        k.e(f"mov.u64 {hsa}, shs;")
        k.e(f"mul.wide.u32 {ha}, {tid}, 4;")
        k.e(f"add.u64 {ha}, {ha}, {hsa};")
        k.e(f"st.shared.f32 [{ha}], {h};")

    head_coeff(k, tid, tmp, ir, sp, sss, psc, pbase, inv_k, eps_n, eps_hc, store=store_h)
    hsa = p("hsa")
    U = max(1, min(4, 64 // (n * V2)))
    k.comment(f"phase 2: out[t][c] = sum_i h[t][i] x[t][i][c]. Items (tt, chunk of V2={V2} channels) of the")
    k.comment(f"whole tile are flattened and taken {U} at a time per thread, all loads of the {U} items issued")
    k.comment("before any FMA: the x rows were read in phase 1 moments ago, so these are L2/L1 hits whose")
    k.comment("latency the unrolling hides. Item tokens past T are clamped for the loads and not stored.")
    k.e(f"mov.u64 {hsa}, shs;")
    cb64 = p("cb64")
    k.e(f"cvt.u64.u32 {cb64}, {cbytes};")
    items2 = u("items2")
    k.e(f"mul.lo.u32 {items2}, {cchunks}, {TT};")
    k.e(f"mov.u32 {q}, {tid};")
    k.label("P2_LOOP")
    k.e(f"setp.ge.u32 {pr}, {q}, {items2};")
    k.e(f"@{pr} bra P2_END;")
    valid, xs_u, hv_u, orow_u = [], [], [], []
    for uu in range(U):
        it, ttu, chu, tok = u(f"it{uu}"), u(f"ttu{uu}"), u(f"chu{uu}"), u(f"tok{uu}")
        pv = k.r("pred", f"pv{uu}")
        k.e(f"add.u32 {it}, {q}, {uu * THREADS};")
        k.e(f"setp.lt.u32 {pv}, {it}, {items2};")
        k.e(f"div.u32 {ttu}, {it}, {cchunks};")
        k.e(f"mul.lo.u32 {tmp}, {ttu}, {cchunks};")
        k.e(f"sub.u32 {chu}, {it}, {tmp};")
        k.e(f"min.u32 {ttu}, {ttu}, {TT - 1};")
        k.e(f"add.u32 {tok}, {t0}, {ttu};")
        pt = k.r("pred", f"pt{uu}")
        k.e(f"setp.lt.u32 {pt}, {tok}, {tokens};")
        k.e(f"and.pred {pv}, {pv}, {pt};")
        k.e(f"min.u32 {tok}, {tok}, {last};")
        t64, xr, orr, co = p(f"t64_{uu}"), p(f"xr{uu}"), p(f"or{uu}"), p(f"co{uu}")
        k.e(f"cvt.u64.u32 {t64}, {tok};")
        k.e(f"mul.wide.u32 {co}, {chu}, {V2 * es};")
        k.e(f"mad.lo.u64 {xr}, {t64}, {sx}, {px};")
        k.e(f"add.u64 {xr}, {xr}, {co};")
        k.e(f"mad.lo.u64 {orr}, {t64}, {so}, {po};")
        k.e(f"add.u64 {orr}, {orr}, {co};")
        ha = p(f"hta{uu}")
        k.e(f"mul.wide.u32 {ha}, {ttu}, {4 * n};")
        k.e(f"add.u64 {ha}, {ha}, {hsa};")
        hv_u.append(load_f32_run(k, f"hv{uu}_", ha, n, space="shared"))
        xa = [p(f"x2a{uu}_{i}") for i in range(n)]
        k.e(f"mov.u64 {xa[0]}, {xr};")
        for i in range(1, n):
            k.e(f"add.u64 {xa[i]}, {xa[i - 1]}, {cb64};")
        xs_u.append([load_row(k, dtype, f"y{uu}_{i}", xa[i], V2) for i in range(n)])
        valid.append(pv)
        orow_u.append(orr)
    for uu in range(U):
        acc = [k.r("f32", f"oacc{uu}_{v}") for v in range(V2)]
        for v in range(V2):
            k.e(f"mul.f32 {acc[v]}, {hv_u[uu][0]}, {xs_u[uu][0][v]};")
        for i in range(1, n):
            for v in range(V2):
                k.e(f"fma.rn.f32 {acc[v]}, {hv_u[uu][i]}, {xs_u[uu][i][v]}, {acc[v]};")
        k.e(f"@!{valid[uu]} bra P2_SKIP{uu};")
        store_row(k, dtype, acc, orow_u[uu], tag=f"ho{uu}")
        k.label(f"P2_SKIP{uu}")
    k.e(f"add.u32 {q}, {q}, {U * THREADS};")
    k.e("bra.uni P2_LOOP;")
    k.label("P2_END")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[88]
)
.reqntid {THREADS}, 1, 1
.maxnreg 128
{{
    .shared .align 16 .f32 sred[{(THREADS // 32) * RED}];
    .shared .align 16 .f32 shs[{TT * n}];
{k.body()}
}}
"""


# head, cluster variant (n <= 8): a cluster of CL CTAs per token tile, CTA r owning chunk range r
CL = 8  # CTAs per cluster (the portable maximum)


CL16_NS = [16, 32]  # mhc_head_cl16_*: 16-CTA clusters (non-portable) for T <= CLD_TMAX
# (n >= 16: phi, n x nC f32, is what a decode cluster pulls; H100 n = 32 T = 1 20.4 -> 13.7 us,
# but T = 64 24.7 -> 27.3 and T = 256 70.9 -> 92.0 us: fewer clusters are resident)
CL_THREADS = 128
CL_NS = [1, 2, 4, 8, 16, 32]
CLD_NS = [1, 2, 4, 8]  # the decode variant's phi slice (n x n x chunks) outgrows shared memory above
CL_SMEM = 112 * 1024  # largest x tile (dynamic shared memory): two CTAs per SM still fit


CLD_SMEM = 200 * 1024  # decode variant: x tile and phi slice (few CTAs: one per SM is fine)
CLD_TMAX = 16  # decode variant up to this many tokens
# Largest T of the cluster variant per n (H200, rounds 6 and 8: the one-CTA-per-tile kernel is as
# fast or faster above; n = 8 loses from T = 1024 on).
CL_TMAX = {1: 512, 2: 512, 4: 512, 8: 256, 16: 256, 32: 256}


def cl_v1(n):
    """Phase-1 chunk of the cluster kernels: head_tiles' V1, but at least one 32-bit word of bf16
    (n = 16 / 32: 2 elements; the one-CTA kernel's n = 32 chunk is a single element)."""
    return max(head_tiles(n)[0], 2)


def cluster_reduce(k, P, SS, TT, n, NW, tid, lane, warp, tmp, pr, part_off=None, sink=None):
    """The CTA's TT (n+1) partial sums (P[tt][i], SS[tt] per thread) into shared part[] (at byte
    offset part_off, a register, when given): a reduce-scatter in each warp, then the NW warps
    in order. Fixed order, so deterministic. Returns the register holding part[]'s address.
    sink(acc): emits what thread j < TT (n+1) does with its partial instead (part[] unused)."""
    f = lambda s: k.r("f32", s)
    u = lambda s: k.r("b32", s)
    RED = TT * (n + 1)
    NPAD = max(32, 1 << (RED - 1).bit_length())
    W = NPAD // 32
    k.comment(f"warp reduce-scatter of the {RED} partials (padded to {NPAD}): at offset o the lane keeps the")
    k.comment(f"half selected by lane bit o and adds its partner's copy; lane l ends with {W} sums, indices")
    k.comment(f"{W}l..{W}l+{W - 1} (fixed order: deterministic)")
    zero = f("zero")
    k.e(f"mov.f32 {zero}, 0f00000000;")
    L = []
    for tt in range(TT):
        L += P[tt] + [SS[tt]]
    L += [zero] * (NPAD - RED)
    pb = k.r("pred", "pb")
    snd, kp, rcv = f("snd"), f("kp"), f("rcv")
    step = 0
    for off in [16, 8, 4, 2, 1]:
        half = len(L) // 2
        A, B = L[:half], L[half:]
        k.e(f"and.b32 {tmp}, {lane}, {off};")
        k.e(f"setp.ne.u32 {pb}, {tmp}, 0;")
        nl = []
        for j in range(half):
            d = f(f"rs{step}_{j}")
            k.e(f"selp.f32 {snd}, {A[j]}, {B[j]}, {pb};")
            k.e(f"selp.f32 {kp}, {B[j]}, {A[j]}, {pb};")
            k.e(f"shfl.sync.bfly.b32 {rcv}, {snd}, {off}, 0x1f, 0xffffffff;")
            k.e(f"add.f32 {d}, {kp}, {rcv};")
            nl.append(d)
        L = nl
        step += 1
    sra = u("sra")
    k.e(f"mov.u32 {sra}, sred;")
    k.e(f"mad.lo.u32 {tmp}, {warp}, {NPAD * 4}, {sra};")
    k.e(f"mad.lo.u32 {tmp}, {lane}, {W * 4}, {tmp};")
    if W == 1:
        k.e(f"st.shared.f32 [{tmp}], {L[0]};")
    else:
        k.e(f"st.shared.v{W}.f32 [{tmp}], {{{', '.join(L)}}};")
    k.e("bar.sync 0;")
    k.comment(f"threads j < {RED}: the CTA's partial j = sum of the {NW} warps in order, into part[j]")
    pa32 = u("parta")
    if sink is None:
        k.e(f"mov.u32 {pa32}, part;")
    if part_off is not None:
        k.e(f"add.u32 {pa32}, {pa32}, {part_off};")
    k.e(f"setp.ge.u32 {pr}, {tid}, {RED};")
    k.e(f"@{pr} bra PART_END;")
    acc, w_ = f("pacc"), f("pw")
    k.e(f"mad.lo.u32 {tmp}, {tid}, 4, {sra};")
    k.e(f"ld.shared.f32 {acc}, [{tmp}];")
    for wi in range(1, NW):
        k.e(f"ld.shared.f32 {w_}, [{tmp}+{wi * NPAD * 4}];")
        k.e(f"add.f32 {acc}, {acc}, {w_};")
    if sink is None:
        k.e(f"mad.lo.u32 {tmp}, {tid}, 4, {pa32};")
        k.e(f"st.shared.f32 [{tmp}], {acc};")
    else:
        sink(acc)
    k.label("PART_END")
    return pa32


def cluster_coeffs(k, TT, n, tid, tmp, pr, pa32, psc, pbase, inv_k, eps_n, eps_hc, gather=None, cl=CL):
    """After the cluster barrier: threads tt n + i < TT n sum the CL CTAs' part[] (at pa32 in
    every CTA) in rank order through distributed shared memory and write h[tt][i] to shs[]; the
    same bits in every CTA. Ends with bar.sync. gather(ttr, ir, sp, sss): emits the sums sp, sss
    of token ttr's projection ir and squares instead (no cluster barrier, no part[])."""
    f = lambda s: k.r("f32", s)
    u = lambda s: k.r("b32", s)
    p = lambda s: k.r("b64", s)
    if gather is None:
        k.comment("cluster barrier: every CTA's part[] is visible to the cluster (release / acquire)")
        k.e("barrier.cluster.arrive.release;")
        k.e("barrier.cluster.wait.acquire;")
    k.comment(f"threads j = tt n + i < {TT * n}: sum the {cl} CTAs' partials in rank order (distributed shared")
    k.comment("memory), then h = sigma((P inv_rms) scale + base[i]) + eps_hc: the same bits in every CTA")
    k.e(f"setp.ge.u32 {pr}, {tid}, {TT * n};")
    k.e(f"@{pr} bra COEF_END;")
    ttr, ir = u("ctt"), u("ci")
    lg = n.bit_length() - 1
    k.e(f"shr.u32 {ttr}, {tid}, {lg};")
    k.e(f"and.b32 {ir}, {tid}, {n - 1};")
    sp, sss = f("sump"), f("sums")
    if gather is not None:
        gather(ttr, ir, sp, sss)
    else:
        cluster_sum_dsmem(k, TT, n, ttr, ir, sp, sss, pa32, cl)
    head_coeff(k, tid, tmp, ir, sp, sss, psc, pbase, inv_k, eps_n, eps_hc)


def cluster_sum_dsmem(k, TT, n, ttr, ir, sp, sss, pa32, cl=CL):
    """sp, sss = the CL CTAs' part[] entries of (token ttr, projection ir) and (ttr, squares), read
    through distributed shared memory and summed in rank order."""
    f = lambda s: k.r("f32", s)
    u = lambda s: k.r("b32", s)
    ip, iss = u("ip"), u("iss")
    k.e(f"mad.lo.u32 {ip}, {ttr}, {n + 1}, {ir};")
    k.e(f"mad.lo.u32 {ip}, {ip}, 4, {pa32};")
    k.e(f"mad.lo.u32 {iss}, {ttr}, {n + 1}, {n};")
    k.e(f"mad.lo.u32 {iss}, {iss}, 4, {pa32};")
    pw, ra = f("rpv"), u("ra")
    for r in range(cl):
        k.e(f"mapa.shared::cluster.u32 {ra}, {ip}, {r};")
        if r == 0:
            k.e(f"ld.shared::cluster.f32 {sp}, [{ra}];")
        else:
            k.e(f"ld.shared::cluster.f32 {pw}, [{ra}];")
            k.e(f"add.f32 {sp}, {sp}, {pw};")
        k.e(f"mapa.shared::cluster.u32 {ra}, {iss}, {r};")
        if r == 0:
            k.e(f"ld.shared::cluster.f32 {sss}, [{ra}];")
        else:
            k.e(f"ld.shared::cluster.f32 {pw}, [{ra}];")
            k.e(f"add.f32 {sss}, {sss}, {pw};")


def head_coeff(k, tid, tmp, ir, sp, sss, psc, pbase, inv_k, eps_n, eps_hc, store=None):
    """h = sigma((sp inv_rms) scale + base[ir]) + eps_hc into shs[tid] (or as store(h) emits);
    ends the coefficient threads' branch (COEF_END) with bar.sync."""
    f = lambda s: k.r("f32", s)
    u = lambda s: k.r("b32", s)
    p = lambda s: k.r("b64", s)
    inv, g, z, sc, bs, h = (f(s) for s in ["inv", "g", "z", "sc", "bs", "h"])
    k.comment("inv_rms = 1 / sqrt(ss / K + eps_norm), correctly rounded sqrt and reciprocal")
    k.e(f"fma.rn.f32 {inv}, {sss}, {inv_k}, {eps_n};")
    k.e(f"sqrt.rn.f32 {inv}, {inv};")
    k.e(f"rcp.rn.f32 {inv}, {inv};")
    k.e(f"mul.f32 {g}, {sp}, {inv};")
    k.e(f"ld.global.nc.f32 {sc}, [{psc}];")
    ab = p("ab")
    k.e(f"mul.wide.u32 {ab}, {ir}, 4;")
    k.e(f"add.u64 {ab}, {ab}, {pbase};")
    k.e(f"ld.global.nc.f32 {bs}, [{ab}];")
    k.e(f"fma.rn.f32 {z}, {g}, {sc}, {bs};")
    sigmoid(k, h, z, "sg")
    k.e(f"add.f32 {h}, {h}, {eps_hc};")
    if store is not None:
        store(h)
    else:
        hsa = u("hsa")
        k.e(f"mov.u32 {hsa}, shs;")
        k.e(f"mad.lo.u32 {tmp}, {tid}, 4, {hsa};")
        k.e(f"st.shared.f32 [{tmp}], {h};")
    k.label("COEF_END")
    k.e("bar.sync 0;")


def head_mix(k, dtype, n, V, TT, threads, tid, it, q, m, t0, tokens, tmp, lo, so, po, pr, tile_row, where):
    """Phase 2 of the cluster head kernels: items (tt, chunk lo+q) of the TT x m tile, out[t][c] =
    sum_i h[t][i] x[t][i][c] with h from shs[] and x from shared memory (tile_row(ttu, q) emits
    the address of stream 0's chunk and returns it with the stream step); tokens past T are
    computed, not stored. Ends at P2_END."""
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    p = lambda s: k.r("b64", s)
    k.comment(f"phase 2: items (tt, chunk lo+q) from the {where}: out[t][c] = sum_i h[t][i] x[t][i][c]")
    hsa = u("hsa")
    k.e(f"mov.u32 {hsa}, shs;")
    items2 = u("items2")
    k.e(f"mul.lo.u32 {items2}, {m}, {TT};")
    k.e(f"mov.u32 {it}, {tid};")
    k.label("P2_LOOP")
    k.e(f"setp.ge.u32 {pr}, {it}, {items2};")
    k.e(f"@{pr} bra P2_END;")
    ttu, tok = u("ttu"), u("tok")
    k.e(f"div.u32 {ttu}, {it}, {m};")
    k.e(f"mul.lo.u32 {tmp}, {ttu}, {m};")
    k.e(f"sub.u32 {q}, {it}, {tmp};")
    k.e(f"add.u32 {tok}, {t0}, {ttu};")
    pv = k.r("pred", "pv")
    k.e(f"setp.ge.u32 {pv}, {tok}, {tokens};")
    hv = [f(f"hv{i}") for i in range(n)]
    ha = u("ha")
    k.e(f"mad.lo.u32 {ha}, {ttu}, {4 * n}, {hsa};")
    for i0 in range(0, n, 4):
        w = min(4, n - i0)
        if w == 1:
            k.e(f"ld.shared.f32 {hv[i0]}, [{ha}+{4 * i0}];")
        else:
            k.e(f"ld.shared.v{w}.f32 {{{', '.join(hv[i0:i0 + w])}}}, [{ha}+{4 * i0}];")
    ta, sstep = tile_row(ttu, q)
    accs = [f(f"oacc{v}") for v in range(V)]
    for i in range(n):
        if i:
            k.e(f"add.u32 {ta}, {ta}, {sstep};")
        xv = ld_shared_row(k, dtype, ta, V, "yw", "y")
        for v in range(V):
            if i == 0:
                k.e(f"mul.f32 {accs[v]}, {hv[0]}, {xv[v]};")
            else:
                k.e(f"fma.rn.f32 {accs[v]}, {hv[i]}, {xv[v]}, {accs[v]};")
    k.e(f"@{pv} bra P2_SKIP;")
    t64, orr = p("t64"), p("orow")
    k.e(f"cvt.u64.u32 {t64}, {tok};")
    k.e(f"mad.lo.u64 {orr}, {t64}, {so}, {po};")
    k.e(f"add.u32 {tmp}, {lo}, {q};")
    k.e(f"mad.wide.u32 {orr}, {tmp}, {V * ESIZE[dtype]}, {orr};")
    store_row(k, dtype, accs, orr, tag="ho")
    k.label("P2_SKIP")
    k.e(f"add.u32 {it}, {it}, {threads};")
    k.e("bra.uni P2_LOOP;")
    k.label("P2_END")


def head_cl_cmax(n, dtype, dec=False, cl=CL):
    """Largest C whose tile (x: TT * n * ceil(C/V1/CL) * V1 elements; decode: plus phi's n * n *
    ceil(C/V1/CL) * V1 f32) fits CL_SMEM (CLD_SMEM)."""
    v1, tt = cl_v1(n), head_tiles(n)[1]
    per = tt * n * ESIZE[dtype] + (n * n * 4 if dec else 0)
    cmax = cl * ((CLD_SMEM if dec else CL_SMEM) // per - v1)
    return cmax - cmax % 8


def head_tile_dots(k, dtype, addr, tstep, V, ph, SS, P):
    """Phase 1 of the cluster head kernels for one item: the chunk of V elements of each of the
    tile's tokens (shared memory at addr, tokens tstep bytes apart; addr is advanced) into the
    sums of squares SS[tt] and the projections P[tt][o] += phi[o] . x (phi in ph[o])."""
    for tt in range(len(SS)):
        if tt:
            k.e(f"add.u32 {addr}, {addr}, {tstep};")
        xv = ld_shared_row(k, dtype, addr, V, f"xw{tt}_", f"xv{tt}_")
        for v in range(V):
            k.e(f"fma.rn.f32 {SS[tt]}, {xv[v]}, {xv[v]}, {SS[tt]};")
        for o in range(len(ph)):
            for v in range(V):
                k.e(f"fma.rn.f32 {P[tt][o]}, {ph[o][v]}, {xv[v]}, {P[tt][o]};")


def head_cl_kernel(dtype, n, dec=False, CLn=CL):
    V1, TT = cl_v1(n), head_tiles(n)[1]
    es = ESIZE[dtype]
    RED = TT * (n + 1)
    NPAD = max(32, 1 << (RED - 1).bit_length())
    W = NPAD // 32  # partials per lane after the reduce-scatter
    NW = CL_THREADS // 32
    name = f"mhc_head_cl{'d' if dec else '' if CLn == CL else CLn}_{dtype}_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    px, pphi, psc, pbase, po, sx, so, tokens, cbytes, mmax, cch, eps_n, eps_hc, inv_k = head_params(k, "mmax", "cch")
    tid, lane, warp, rank, tile, t0, tmp = u("tid"), u("lane"), u("warp"), u("rank"), u("tile"), u("t0"), u("tmp")
    lo, hi, m, it, ii, q = u("lo"), u("hi"), u("m"), u("it"), u("ii"), u("q")
    pr = k.r("pred", "p")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    k.e(f"mov.u32 {rank}, %cluster_ctarank;")
    k.e(f"mov.u32 {tile}, %clusterid.x;")
    k.e(f"mul.lo.u32 {t0}, {tile}, {TT};")
    k.comment(f"chunks (of V1={V1} channels) [lo, hi) of this CTA: lo = rank * cch / {CLn}")
    k.e(f"mul.lo.u32 {lo}, {rank}, {cch};")
    k.e(f"div.u32 {lo}, {lo}, {CLn};")
    k.e(f"add.u32 {tmp}, {rank}, 1;")
    k.e(f"mul.lo.u32 {hi}, {tmp}, {cch};")
    k.e(f"div.u32 {hi}, {hi}, {CLn};")
    k.e(f"sub.u32 {m}, {hi}, {lo};")
    last = u("tlast")
    k.e(f"sub.u32 {last}, {tokens}, 1;")
    k.comment("token rows of the tile; rows past T are clamped to T-1 (computed, never stored)")
    rows = []
    for tt in range(TT):
        tk, t64, a = u(f"tk{tt}"), p(f"tk64_{tt}"), p(f"row{tt}")
        k.e(f"add.u32 {tk}, {t0}, {tt};")
        k.e(f"min.u32 {tk}, {tk}, {last};")
        k.e(f"cvt.u64.u32 {t64}, {tk};")
        k.e(f"mad.lo.u64 {a}, {t64}, {sx}, {px};")
        rows.append(a)
    kb = p("kbytes")
    k.e(f"mul.wide.u32 {kb}, {cch}, {n * V1 * 4};")
    xt = u("xt")
    k.e(f"mov.u32 {xt}, hcl_x;")
    P = [[f(f"P{tt}_{i}") for i in range(n)] for tt in range(TT)]
    SS = [f(f"ss{tt}") for tt in range(TT)]
    for tt in range(TT):
        k.e(f"mov.f32 {SS[tt]}, 0f00000000;")
        for i in range(n):
            k.e(f"mov.f32 {P[tt][i]}, 0f00000000;")
    if not dec:
        k.comment("(the x tile is loaded into registers and stored to shared memory: measured faster than")
        k.comment("cp.async for this variant, H200 rounds 6-7)")
        items = u("items")
        k.e(f"mul.lo.u32 {items}, {m}, {n};")
        k.comment(f"phase 1: items (stream i, chunk lo+q), i = item / m. Each loads phi[o][i C + chunk] for the")
        k.comment(f"n outputs o once (n*V1 registers) for the {TT} tokens, accumulates the partial projections and")
        k.comment("sums of squares, and parks the raw x chunk of every token in the tile (shared memory)")
        k.e(f"mov.u32 {it}, {tid};")
        k.label("P1_LOOP")
        k.e(f"setp.ge.u32 {pr}, {it}, {items};")
        k.e(f"@{pr} bra P1_END;")
        k.e(f"div.u32 {ii}, {it}, {m};")
        k.e(f"mul.lo.u32 {tmp}, {ii}, {m};")
        k.e(f"sub.u32 {q}, {it}, {tmp};")
        c = u("cg")
        k.e(f"add.u32 {c}, {lo}, {q};")
        xo, pa = p("xo"), p("pa")
        k.e(f"mul.wide.u32 {xo}, {ii}, {cbytes};")
        k.e(f"mad.wide.u32 {xo}, {c}, {V1 * es}, {xo};")
        k.e(f"mad.lo.u32 {tmp}, {ii}, {cch}, {c};")
        k.e(f"mul.wide.u32 {pa}, {tmp}, {V1 * 4};")
        k.e(f"add.u64 {pa}, {pa}, {pphi};")
        xvs = []
        for tt in range(TT):
            a = p(f"xa{tt}")
            k.e(f"add.u64 {a}, {rows[tt]}, {xo};")
            xvs.append(load_row(k, dtype, f"xv{tt}", a, V1))
        if n <= 8:
            aphi = [p(f"aphi{i}") for i in range(n)]
            k.e(f"mov.u64 {aphi[0]}, {pa};")
            for o in range(1, n):
                k.e(f"add.u64 {aphi[o]}, {aphi[o - 1]}, {kb};")
            ph = [load_f32_run(k, f"ph{o}_", aphi[o], V1) for o in range(n)]
        else:
            # one running address (n 64-bit addresses would cost 2n registers)
            ph = []
            for o in range(n):
                if o:
                    k.e(f"add.u64 {pa}, {pa}, {kb};")
                ph.append(load_f32_run(k, f"ph{o}_", pa, V1))
        k.comment(f"tile offset of (tt, i, q): ((tt n + i) mmax + q) V1 esize")
        so_ = u("tso")
        k.e(f"mad.lo.u32 {so_}, {ii}, {mmax}, {q};")
        k.e(f"mul.lo.u32 {so_}, {so_}, {V1 * es};")
        k.e(f"add.u32 {so_}, {so_}, {xt};")
        tstep = u("tstep")
        k.e(f"mul.lo.u32 {tstep}, {mmax}, {n * V1 * es};")
        for tt in range(TT):
            xv = xvs[tt]
            if dtype == "bf16":
                words = [f"%xv{tt}_w{w}" for w in range(V1 // 2)]
            else:
                words = xv
            if tt:
                k.e(f"add.u32 {so_}, {so_}, {tstep};")
            for w0 in range(0, len(words), 4):
                grp = words[w0:w0 + 4]
                ty = "b32" if dtype == "bf16" else "f32"
                if len(grp) == 1:
                    k.e(f"st.shared.{ty} [{so_}+{4 * w0}], {grp[0]};")
                else:
                    k.e(f"st.shared.v{len(grp)}.{ty} [{so_}+{4 * w0}], {{{', '.join(grp)}}};")
            for v in range(V1):
                k.e(f"fma.rn.f32 {SS[tt]}, {xv[v]}, {xv[v]}, {SS[tt]};")
            for o in range(n):
                for v in range(V1):
                    k.e(f"fma.rn.f32 {P[tt][o]}, {ph[o][v]}, {xv[v]}, {P[tt][o]};")
        k.e(f"add.u32 {it}, {it}, {CL_THREADS};")
        k.e("bra.uni P1_LOOP;")
    else:
        items = u("items")
        k.e(f"mul.lo.u32 {items}, {m}, {n};")
        tstep, pt, pstep = u("tstep"), u("pt"), u("pstep")
        k.e(f"mul.lo.u32 {tstep}, {mmax}, {n * V1 * es};")
        if dec:
            k.e(f"mul.lo.u32 {pt}, {tstep}, {TT};")
            k.e(f"add.u32 {pt}, {pt}, {xt};")
            k.e(f"mul.lo.u32 {pstep}, {mmax}, {n * V1 * 4};")

        def item_addrs():
            """(i, q) of item `it`, the global offsets of its x chunk and of phi[0][i C + chunk]."""
            k.e(f"div.u32 {ii}, {it}, {m};")
            k.e(f"mul.lo.u32 {tmp}, {ii}, {m};")
            k.e(f"sub.u32 {q}, {it}, {tmp};")
            c = u("cg")
            k.e(f"add.u32 {c}, {lo}, {q};")
            xo, pa = p("xo"), p("pa")
            k.e(f"mul.wide.u32 {xo}, {ii}, {cbytes};")
            k.e(f"mad.wide.u32 {xo}, {c}, {V1 * es}, {xo};")
            k.e(f"mad.lo.u32 {tmp}, {ii}, {cch}, {c};")
            k.e(f"mul.wide.u32 {pa}, {tmp}, {V1 * 4};")
            k.e(f"add.u64 {pa}, {pa}, {pphi};")
            so_ = u("tso")
            k.e(f"mad.lo.u32 {so_}, {ii}, {mmax}, {q};")
            k.e(f"mul.lo.u32 {so_}, {so_}, {V1 * es};")
            k.e(f"add.u32 {so_}, {so_}, {xt};")
            return xo, pa, so_

        def cp_async(dst, src, nbytes):
            off = 0
            while off < nbytes:
                w = min(16, nbytes - off)
                mode = "cg" if w == 16 else "ca"
                k.e(f"cp.async.{mode}.shared.global [{dst}+{off}], [{src}+{off}], {w};")
                off += w

        k.comment(f"issue: every item's x chunk of the {TT} tokens goes to the tile by cp.async (no registers, the")
        k.comment("whole tile in flight at once)" + ("; the phi chunks of its n outputs too (decode: one round trip)"
                                                     if dec else ""))
        k.comment(f"tile offset of (tt, i, q): ((tt n + i) mmax + q) V1 esize" +
                  ("; phi tile after it: ((o n + i) mmax + q) V1 4" if dec else ""))
        k.e(f"mov.u32 {it}, {tid};")
        k.label("CP_LOOP")
        k.e(f"setp.ge.u32 {pr}, {it}, {items};")
        k.e(f"@{pr} bra CP_END;")
        xo, pa, so_ = item_addrs()
        ds, sa = u("cpd"), p("cps")
        for tt in range(TT):
            k.e(f"add.u64 {sa}, {rows[tt]}, {xo};")
            if tt == 0:
                k.e(f"mov.u32 {ds}, {so_};")
            else:
                k.e(f"add.u32 {ds}, {ds}, {tstep};")
            cp_async(ds, sa, V1 * es)
        if dec:
            k.e(f"mad.lo.u32 {ds}, {ii}, {mmax}, {q};")
            k.e(f"mul.lo.u32 {ds}, {ds}, {V1 * 4};")
            k.e(f"add.u32 {ds}, {ds}, {pt};")
            k.e(f"mov.u64 {sa}, {pa};")
            for o in range(n):
                if o:
                    k.e(f"add.u32 {ds}, {ds}, {pstep};")
                    k.e(f"add.u64 {sa}, {sa}, {kb};")
                cp_async(ds, sa, V1 * 4)
        k.e(f"add.u32 {it}, {it}, {CL_THREADS};")
        k.e("bra.uni CP_LOOP;")
        k.label("CP_END")
        k.e("cp.async.commit_group;")
        k.comment(f"phase 1: items (stream i, chunk lo+q), i = item / m, the same items as issued (so each thread")
        k.comment(f"waits only for its own copies). phi[o][i C + chunk] of the n outputs (n*V1 registers) serves")
        k.comment(f"the {TT} tokens: partial projections and sums of squares")
        k.e(f"mov.u32 {it}, {tid};")
        k.label("P1_LOOP")
        k.e(f"setp.ge.u32 {pr}, {it}, {items};")
        k.e(f"@{pr} bra P1_END;")
        xo, pa, so_ = item_addrs()
        if dec:
            k.e("cp.async.wait_group 0;")
            k.e(f"mad.lo.u32 {ds}, {ii}, {mmax}, {q};")
            k.e(f"mul.lo.u32 {ds}, {ds}, {V1 * 4};")
            k.e(f"add.u32 {ds}, {ds}, {pt};")
            ph = []
            for o in range(n):
                if o:
                    k.e(f"add.u32 {ds}, {ds}, {pstep};")
                ph.append(load_f32_run(k, f"ph{o}_", ds, V1, space="shared"))
        else:
            aphi = [p(f"aphi{i}") for i in range(n)]
            k.e(f"mov.u64 {aphi[0]}, {pa};")
            for o in range(1, n):
                k.e(f"add.u64 {aphi[o]}, {aphi[o - 1]}, {kb};")
            ph = [load_f32_run(k, f"ph{o}_", aphi[o], V1) for o in range(n)]
            k.e("cp.async.wait_group 0;")
        head_tile_dots(k, dtype, so_, tstep, V1, ph, SS, P)
        k.e(f"add.u32 {it}, {it}, {CL_THREADS};")
        k.e("bra.uni P1_LOOP;")
    k.label("P1_END")
    pa32 = cluster_reduce(k, P, SS, TT, n, NW, tid, lane, warp, tmp, pr)
    cluster_coeffs(k, TT, n, tid, tmp, pr, pa32, psc, pbase, inv_k, eps_n, eps_hc, cl=CLn)
    k.comment("done with the other CTAs' part[]: arrive now, wait before exit (they must not vanish early)")
    k.e("barrier.cluster.arrive.release;")
    def cl_tile_row(ttu, q_):
        ta, sstep = u("ta"), None
        k.e(f"mul.lo.u32 {ta}, {ttu}, {n};")
        k.e(f"mad.lo.u32 {ta}, {ta}, {mmax}, {q_};")
        k.e(f"mul.lo.u32 {ta}, {ta}, {V1 * es};")
        k.e(f"add.u32 {ta}, {ta}, {xt};")
        sstep = u("sstep")
        k.e(f"mul.lo.u32 {sstep}, {mmax}, {V1 * es};")
        return ta, sstep

    head_mix(k, dtype, n, V1, TT, CL_THREADS, tid, it, q, m, t0, tokens, tmp, lo, so, po, pr, cl_tile_row, "tile")
    k.e("barrier.cluster.wait.acquire;")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[88]
)
.reqntid {CL_THREADS}, 1, 1
.maxnreg {128 if n <= 4 else 168}
.reqnctapercluster {CLn}, 1, 1
{{
    .shared .align 16 .f32 sred[{NW * NPAD}];
    .shared .align 16 .f32 part[{RED}];
    .shared .align 16 .f32 shs[{TT * n}];
{k.body()}
}}
"""


# head, persistent cluster variant (n <= 4, large T): PC clusters of CL CTAs stay resident and walk
# the token tiles; each thread keeps its phi chunks in registers for the whole kernel and the x tile
# slices stream through a ring of PC_STAGES shared-memory stages (cp.async), so DRAM never waits
# for a CTA to start, reduce or exit.
PC_THREADS = 256
PC_NS = [1, 2, 4]
PC_SLOTS = 2  # phase-1 items (stream, 16-byte chunk) per thread: n * chunks per CTA <= 512
PC_STAGES = 3
PC_SMEM = 200 * 1024  # the ring: PC_STAGES x TT x (n x chunks per CTA + 1) x 16 bytes
PC_TMIN = 513  # below, the cluster kernels (one cluster per tile) serve
# (CTAs per cluster, tokens per tile) of the two builds: pc4 where its items fit (measured faster:
# 4-CTA clusters pack onto more SMs), pc8 for C up to twice that (4-token tiles: its ring stays
# small enough for 2 CTAs per SM)
PC_SHAPES = [(4, 4), (8, 4)]


def head_pc_cmax(n, dtype, cl, tt):
    """Largest C: n * ceil(C / V / CL) <= PC_SLOTS * PC_THREADS items (V = 16 / esize) and the ring
    (token rows of n * chunks per CTA + 1 chunks) within PC_SMEM."""
    v = 16 // ESIZE[dtype]
    per_cta = min(PC_SLOTS * PC_THREADS // n, (PC_SMEM // (PC_STAGES * tt * 16) - 1) // n)
    return cl * per_cta * v


def head_pc_kernel(dtype, n, CL, TT):
    es = ESIZE[dtype]
    V = 16 // es  # elements of a 16-byte chunk
    NW = PC_THREADS // 32
    RED = TT * (n + 1)
    name = f"mhc_head_pc{CL}_{dtype}_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    px, pphi, psc, pbase, po, sx, so, tokens, cbytes, mmax, cch, eps_n, eps_hc, inv_k = head_params(k, "mmax", "cch")
    tid, lane, warp, rank, cid, ncl = u("tid"), u("lane"), u("warp"), u("rank"), u("cid"), u("ncl")
    lo, hi, m, tmp, it, q, ii = u("lo"), u("hi"), u("m"), u("tmp"), u("it"), u("q"), u("ii")
    pr = k.r("pred", "p")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    k.e(f"mov.u32 {rank}, %cluster_ctarank;")
    k.e(f"mov.u32 {cid}, %clusterid.x;")
    k.e(f"mov.u32 {ncl}, %nclusterid.x;")
    gb, ga = u("gbar"), u("gat")
    k.e(f"mov.u32 {gb}, gbar;")
    k.e(f"mov.u32 {ga}, gat;")
    k.comment("the two gather mbarriers (one arrival per phase: this CTA's arming), initialised before any")
    k.comment("CTA of the cluster may signal them")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra INIT_END;")
    k.e(f"mbarrier.init.shared::cta.b64 [{gb}], 1;")
    k.e(f"mbarrier.init.shared::cta.b64 [{gb}+8], 1;")
    k.e("fence.mbarrier_init.release.cluster;")
    k.label("INIT_END")
    k.e("barrier.cluster.arrive.release;")
    k.e("barrier.cluster.wait.acquire;")
    k.comment(f"16-byte chunks [lo, hi) of every stream belong to this CTA: lo = rank * cch / {CL}")
    k.e(f"mul.lo.u32 {lo}, {rank}, {cch};")
    k.e(f"div.u32 {lo}, {lo}, {CL};")
    k.e(f"add.u32 {tmp}, {rank}, 1;")
    k.e(f"mul.lo.u32 {hi}, {tmp}, {cch};")
    k.e(f"div.u32 {hi}, {hi}, {CL};")
    k.e(f"sub.u32 {m}, {hi}, {lo};")
    ntiles, last = u("ntiles"), u("tlast")
    k.e(f"add.u32 {ntiles}, {tokens}, {TT - 1};")
    k.e(f"div.u32 {ntiles}, {ntiles}, {TT};")
    k.e(f"sub.u32 {last}, {tokens}, 1;")
    xt, sb, tstep = u("xt"), u("sbytes"), u("tstep")
    k.e(f"mov.u32 {xt}, hpc_x;")
    k.comment(f"a stage holds the tile's slice: offset tt tstep + (i mmax + q) 16 with tstep = (n mmax + 1) 16:")
    k.comment(f"a 16-byte pad per token row (measured 140.3 -> 135.4 us at T=8192 C=4096); {PC_STAGES} stages")
    k.e(f"mad.lo.u32 {tstep}, {mmax}, {n}, 1;")
    k.e(f"shl.b32 {tstep}, {tstep}, 4;")
    k.e(f"mul.lo.u32 {sb}, {tstep}, {TT};")
    kb = p("kbytes")
    k.e(f"mul.wide.u32 {kb}, {cch}, {n * V * 4};")
    k.comment(f"phase-1 items of this thread: item = tid + {PC_THREADS} s (s < {PC_SLOTS}) is (stream i, chunk lo+q),")
    k.comment("i = item / m; its global offset in a row, its offset in a stage, and phi[o][i C + chunk] of the")
    k.comment(f"n outputs, loaded once into registers for the whole kernel ({PC_SLOTS} x n x {V})")
    items = u("items")
    k.e(f"mul.lo.u32 {items}, {m}, {n};")
    vs, goff, soff, ph = [], [], [], []
    for s_ in range(PC_SLOTS):
        pv = k.r("pred", f"vs{s_}")
        k.e(f"add.u32 {it}, {tid}, {s_ * PC_THREADS};")
        k.e(f"setp.lt.u32 {pv}, {it}, {items};")
        k.e(f"selp.u32 {it}, {it}, 0, {pv};")
        k.e(f"div.u32 {ii}, {it}, {m};")
        k.e(f"mul.lo.u32 {tmp}, {ii}, {m};")
        k.e(f"sub.u32 {q}, {it}, {tmp};")
        c = u("cg")
        k.e(f"add.u32 {c}, {lo}, {q};")
        go, sof, pa = p(f"goff{s_}"), u(f"soff{s_}"), p("pa")
        k.e(f"mul.wide.u32 {go}, {ii}, {cbytes};")
        k.e(f"mad.wide.u32 {go}, {c}, 16, {go};")
        k.e(f"mad.lo.u32 {sof}, {ii}, {mmax}, {q};")
        k.e(f"shl.b32 {sof}, {sof}, 4;")
        k.e(f"mad.lo.u32 {tmp}, {ii}, {cch}, {c};")
        k.e(f"mul.wide.u32 {pa}, {tmp}, {V * 4};")
        k.e(f"add.u64 {pa}, {pa}, {pphi};")
        regs = []
        for o in range(n):
            if o:
                k.e(f"add.u64 {pa}, {pa}, {kb};")
            regs.append(load_f32_run(k, f"ph{s_}_{o}_", pa, V))
        vs.append(pv); goff.append(go); soff.append(sof); ph.append(regs)

    def issue(tile_r, stage_r, tag):
        """cp.async of tile tile_r's slice (this thread's items, TT rows) into stage stage_r, then
        commit (an empty group past the last tile keeps the group count uniform)."""
        k.e(f"setp.ge.u32 {pr}, {tile_r}, {ntiles};")
        k.e(f"@{pr} bra {tag}_COMMIT;")
        dst, t0, row = u("cpd"), u("ct0"), p("crow")
        k.e(f"mad.lo.u32 {dst}, {stage_r}, {sb}, {xt};")
        k.e(f"mul.lo.u32 {t0}, {tile_r}, {TT};")
        tk, t64, src = u("ctk"), p("ctk64"), p("csrc")
        for tt in range(TT):
            k.e(f"add.u32 {tk}, {t0}, {tt};")
            k.e(f"min.u32 {tk}, {tk}, {last};")
            k.e(f"cvt.u64.u32 {t64}, {tk};")
            k.e(f"mad.lo.u64 {row}, {t64}, {sx}, {px};")
            for s_ in range(PC_SLOTS):
                d = u("cpdd")
                k.e(f"add.u64 {src}, {row}, {goff[s_]};")
                k.e(f"add.u32 {d}, {dst}, {soff[s_]};")
                k.e(f"@{vs[s_]} cp.async.cg.shared.global [{d}], [{src}], 16;")
            if tt + 1 < TT:
                k.e(f"add.u32 {dst}, {dst}, {tstep};")
        k.label(f"{tag}_COMMIT")
        k.e("cp.async.commit_group;")

    tile, stage, nxt = u("tile"), u("stage"), u("ntile")
    k.comment(f"prologue: tiles cid + j ncl into stages j < {PC_STAGES}")
    k.e(f"mov.u32 {tile}, {cid};")
    for j in range(PC_STAGES):
        k.e(f"mad.lo.u32 {nxt}, {ncl}, {j}, {cid};")
        k.e(f"mov.u32 {stage}, {j};")
        issue(nxt, stage, f"PRO{j}")
    k.e(f"mov.u32 {stage}, 0;")
    kk = u("kk")
    k.e(f"mov.u32 {kk}, 0;")
    P = [[f(f"P{tt}_{i}") for i in range(n)] for tt in range(TT)]
    SS = [f(f"ss{tt}") for tt in range(TT)]
    k.label("TILE_LOOP")
    k.e(f"setp.ge.u32 {pr}, {tile}, {ntiles};")
    k.e(f"@{pr} bra TILE_END;")
    k.comment(f"this tile's copies (the oldest of {PC_STAGES} groups) have landed for this thread's own items")
    k.e(f"cp.async.wait_group {PC_STAGES - 1};")
    for tt in range(TT):
        k.e(f"mov.f32 {SS[tt]}, 0f00000000;")
        for i in range(n):
            k.e(f"mov.f32 {P[tt][i]}, 0f00000000;")
    st0 = u("st0")
    k.e(f"mad.lo.u32 {st0}, {stage}, {sb}, {xt};")
    k.comment("phase 1: partial projections and sums of squares of the tile's tokens over this thread's items")
    for s_ in range(PC_SLOTS):
        k.e(f"@!{vs[s_]} bra P1_S{s_}_END;")
        a = u("xa")
        k.e(f"add.u32 {a}, {st0}, {soff[s_]};")
        head_tile_dots(k, dtype, a, tstep, V, ph[s_], SS, P)
        k.label(f"P1_S{s_}_END")
    k.comment("the CTA's partials go to every CTA of the cluster: st.async into gat[b][rank][j] of CTA r,")
    k.comment("completing bytes on its mbarrier gbar[b] (b = local tile index mod 2). No cluster barrier: a")
    k.comment("CTA fills gat[b] for tile k only after it received every CTA's partials of tile k-1, which")
    k.comment("each CTA sends after it has read its gat[b] of tile k-2")
    b_, gab, gbb = u("gb_b"), u("gat_b"), u("gbar_b")
    k.e(f"and.b32 {b_}, {kk}, 1;")
    k.e(f"mad.lo.u32 {gab}, {b_}, {CL * RED * 4}, {ga};")
    k.e(f"mad.lo.u32 {gbb}, {b_}, 8, {gb};")

    def push(acc):
        la, ra, rb = u("pla"), u("pra"), u("prb")
        k.e(f"mad.lo.u32 {la}, {rank}, {RED}, {tid};")
        k.e(f"mad.lo.u32 {la}, {la}, 4, {gab};")
        for r in range(CL):
            k.e(f"mapa.shared::cluster.u32 {ra}, {la}, {r};")
            k.e(f"mapa.shared::cluster.u32 {rb}, {gbb}, {r};")
            k.e(f"st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [{ra}], {acc}, [{rb}];")

    def gather(ttr, ir, sp, sss):
        st64, par, ok = p("mbst"), u("par"), k.r("pred", "wok")
        k.comment(f"thread 0 arms gbar[b] for the {CL * RED * 4} bytes of this tile (bytes that came early count)")
        k.e(f"setp.ne.u32 {ok}, {tid}, 0;")
        k.e(f"@{ok} bra ARM_END;")
        k.e(f"mbarrier.arrive.expect_tx.shared::cta.b64 {st64}, [{gbb}], {CL * RED * 4};")
        k.label("ARM_END")
        k.e(f"bfe.u32 {par}, {kk}, 1, 1;")
        k.label("GATHER_WAIT")
        k.e(f"mbarrier.try_wait.parity.shared::cta.b64 {ok}, [{gbb}], {par};")
        k.e(f"@!{ok} bra GATHER_WAIT;")
        ip, iss, pw = u("ip"), u("iss"), f("rpv")
        k.e(f"mad.lo.u32 {ip}, {ttr}, {n + 1}, {ir};")
        k.e(f"mad.lo.u32 {ip}, {ip}, 4, {gab};")
        k.e(f"mad.lo.u32 {iss}, {ttr}, {n + 1}, {n};")
        k.e(f"mad.lo.u32 {iss}, {iss}, 4, {gab};")
        for r in range(CL):
            dst = sp if r == 0 else pw
            k.e(f"ld.shared.f32 {dst}, [{ip}+{r * RED * 4}];")
            if r:
                k.e(f"add.f32 {sp}, {sp}, {pw};")
            dst = sss if r == 0 else pw
            k.e(f"ld.shared.f32 {dst}, [{iss}+{r * RED * 4}];")
            if r:
                k.e(f"add.f32 {sss}, {sss}, {pw};")

    cluster_reduce(k, P, SS, TT, n, NW, tid, lane, warp, tmp, pr, sink=push)
    cluster_coeffs(k, TT, n, tid, tmp, pr, None, psc, pbase, inv_k, eps_n, eps_hc, gather=gather)
    t0 = u("t0")
    k.e(f"mul.lo.u32 {t0}, {tile}, {TT};")

    def pc_tile_row(ttu, q_):
        ta, sstep = u("ta"), u("sstep")
        k.e(f"mad.lo.u32 {ta}, {ttu}, {tstep}, {st0};")
        k.e(f"mad.lo.u32 {ta}, {q_}, 16, {ta};")
        k.e(f"shl.b32 {sstep}, {mmax}, 4;")
        return ta, sstep

    head_mix(k, dtype, n, V, TT, PC_THREADS, tid, it, q, m, t0, tokens, tmp, lo, so, po, pr, pc_tile_row, "stage")
    k.comment(f"the stage and shs[] are free once every thread is here: refill the stage with the tile")
    k.comment(f"{PC_STAGES} steps ahead")
    k.e("bar.sync 0;")
    k.e(f"mad.lo.u32 {nxt}, {ncl}, {PC_STAGES}, {tile};")
    issue(nxt, stage, "REFILL")
    k.e(f"add.u32 {tile}, {tile}, {ncl};")
    k.e(f"add.u32 {stage}, {stage}, 1;")
    k.e(f"setp.eq.u32 {pr}, {stage}, {PC_STAGES};")
    k.e(f"selp.u32 {stage}, 0, {stage}, {pr};")
    k.e(f"add.u32 {kk}, {kk}, 1;")
    k.e("bra.uni TILE_LOOP;")
    k.label("TILE_END")
    k.comment("leave together (no CTA's shared memory may vanish while the cluster still runs)")
    k.e("barrier.cluster.arrive.release;")
    k.e("barrier.cluster.wait.acquire;")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[88]
)
.reqntid {PC_THREADS}, 1, 1
.maxnreg 128
.reqnctapercluster {CL}, 1, 1
{{
    .shared .align 16 .f32 sred[{NW * max(32, 1 << (RED - 1).bit_length())}];
    .shared .align 8 .b64 gbar[2];
    .shared .align 16 .f32 gat[{2 * CL * RED}];
    .shared .align 16 .f32 shs[{TT * n}];
{k.body()}
}}
"""


def write_head():
    out = [PROLOGUE, """
// ==============================================================================================
// head (MATH.md "Head", DeepSeek-V4 hc_head), sm_90a. Written by gen_forward.py.
//   inv_rms = 1/sqrt(sum_k v[k]^2 / K + eps_norm);  g_i = (v . phi_i) inv_rms
//   h_i = sigma(g_i scale + base_i) + eps_hc;       out[c] = sum_i h_i x[i][c]
// Tile: one CTA of 256 threads = TT tokens (TT = min(8, 64/n)). Phase 1 walks the flattened
//   row (K = nC) in chunks of V1 = min(8, 32/n) elements per thread: phi[i][chunk] for all n
//   outputs is loaded once (n*V1 <= 32 registers) and used for the TT tokens, so phi traffic
//   (L2-resident, n*K*4 bytes) is divided by TT. Partial projections and sums of squares
//   (TT*(n+1) values) are reduced deterministically: butterfly shuffles in each warp, then the 8
//   warps in order through shared memory. TT*n threads compute the coefficients (f32, exact
//   sqrt and reciprocal). Phase 2 re-reads the tile's x rows (L2 hits) in chunks of
//   V2 = min(8, 64/n) channels and writes out.
// Register plan: phi n*V1, P TT*n, ss TT, x V1 (phase 1); h n, x n*V2, acc V2 (phase 2).
// Bytes: HBM floor = T (nC + C) esize; phi and the re-read come from L2.
// Measured (H200, round 5): T=8192 n=4 C=4096 142 us = 56% of copy (1.79x floor): each CTA
//   alternates a DRAM phase and an L2 phase, so DRAM idles part of the time (`.maxnreg 128` for
//   2 CTAs/SM took it from 53% to 56%); n=32: 12x floor (phi, 5 MB, re-read per 2-token CTA).
//   Round 8: still the kernel for T > 512 (n <= 4), T > 256 (n = 8) and every T at n >= 16.
//
// mhc_head_cl_* (every n) / mhc_head_cld_* (n <= 8): a thread-block CLUSTER of 8 CTAs (.reqnctapercluster)
//   per TT-token tile; CTA r (%cluster_ctarank) owns chunks [r cc/8, (r+1) cc/8) of the cc = C/V1
//   chunks of every stream, 128 threads. Phase 1 items (stream i, chunk): phi[o][i C + chunk] for
//   the n outputs in registers serve the TT tokens; the tile's x (TT x n x its chunks) is parked in
//   dynamic shared memory (cl: loaded to registers and stored; cld: cp.async for x and phi's slice
//   too, one memory round trip). Partials (TT (n+1)) reduced per warp by a reduce-scatter (5
//   shuffle steps, lane l keeps sums l W..l W+W-1), warps summed in order into part[]; cluster
//   barrier (arrive.release / wait.acquire); threads tt n + i read the 8 CTAs' part[] through
//   distributed shared memory (mapa + ld.shared::cluster) in rank order, so every CTA derives
//   the same bits of h; phase 2 mixes the CTA's chunks from the tile; a second cluster barrier
//   (arrive after the remote reads, wait before exit) keeps part[] alive for the readers.
//   n = 16 / 32 (cl only): V1 = 2 (a bf16 word), one running phi address. H100, bf16, C = 1280,
//   n = 32, us back-to-back: T = 1 127 -> 20.4, T = 16 122 -> 20.0, T = 64 116 -> 24.7, T = 256
//   115 -> 70.9 (against the one-CTA-per-tile kernel, which pulls phi's 5.2 MB per 2 tokens).
//   Registers: 128 (n <= 4, 4 CTAs/SM), 168 (n >= 8). Shared: x tile <= 112 KiB (cl), x + phi
//   <= 200 KiB (cld); larger C falls back to mhc_head_*. Arguments: HeadArgs with kchunks =
//   chunks per CTA (ceil(cc / 8)) and cchunks = cc; grid = ceil(T / TT) * 8.
// Measured (H200, round 8, bf16, copy 4187 GB/s; us stream / back-to-back / graph):
//   n=4 C=4096: T=1 15.4 -> 7.9 / 5.7 / 4.8 (cld), T=16 18.1 -> 8.2 / 6.4 / 5.3, T=64 18.2 ->
//   8.9, T=256 18.9 -> 10.9 (cl); C=7168: T=1 22.9 -> 9.6 / 7.8 / 6.9, T=256 29.0 -> 14.8;
//   n=8 C=1280: T=1 17.3 -> 8.0 / 6.0 / 5.2, T=256 19.2 -> 11.3. At T >= 1024 the cluster kernel
//   is no faster (T=8192 C=4096: 140.6 us with register loads, 149.3 with cp.async, vs 142.2):
//   keeping x on chip did not lift the 56% ceiling (rounds 6-8, notes/cuda-runtime.md).
//
// mhc_head_pc4_* / mhc_head_pc8_* (n <= 4, T > 512): PERSISTENT clusters of R = 4 / 8 CTAs x
//   256 threads, as many as the device holds at once (cuOccupancyMaxActiveClusters; grid = that
//   x R); cluster c walks the 4-token tiles c, c + ncl, ... CTA r owns 16-byte chunks
//   [r cc/R, (r+1) cc/R) of every stream (cc = C / V, V = 16 / esize). pc4 serves where its
//   items fit (n C esize <= 32 KiB), pc8 up to twice that. Thread items (stream, chunk) = tid + 256 s, s < 2: their
//   phi (n outputs x V f32) is loaded ONCE into registers. x slices stream through a ring of 3
//   stages in dynamic shared memory ([tt][i][q] x 16 B); each thread cp.asyncs its own items, so
//   phase 1 needs only its own cp.async.wait_group 2; refill of a stage after phase 2 (bar.sync).
//   Partials (TT (n+1)) reduce-scatter per warp, warps in order; thread j then st.asyncs its
//   partial into gat[b][rank][j] of all 8 CTAs, completing bytes on their mbarrier gbar[b]
//   (b = tile index mod 2); threads tt n + i wait on their own gbar[b] (armed by thread 0 with
//   expect_tx) and sum the 8 ranks in order from local shared memory: deterministic, and no
//   cluster barrier in the loop (barrier.cluster.arrive.release is a MEMBAR.ALL.GPU, which
//   waited for the in-flight ring copies: 153.8 us with it). Reuse of gat[b] is safe by
//   causality: a CTA sends tile k's partials only after receiving every CTA's tile k-1, which
//   each sends after reading its gat[b] of tile k-2. Registers: phi 2 x n x V, P TT (n+1);
//   .maxnreg 128 (n = 4 uses 128: 2 CTAs per SM at C = 4096).
// Measured (H100, 2026-11-22, bf16, copy 2979 GB/s): T=8192 C=4096 pc4 130.3 us = 86.4% of copy
//   (8-CTA clusters with 8-token tiles: 135.4 us = 82.7%; mhc_head_bf16_n4: 195.6 us, 57%),
//   T=4096 71.5 us (79%); C=7168 T=8192 pc8 232.3 us = 84.8% (with 8-token tiles 243-248 us: a
//   168 KB ring, one CTA per SM). ncu (8-CTA clusters, T=1024): 30 clusters resident (240 CTAs,
//   2 per SM: 12 SMs idle), which the 4-CTA clusters avoid. Tried: phase 1 of tile k+1 during tile k's cluster barrier (158 us, and racecheck
//   hazards), 4 stages (1 CTA per SM at C=4096: 230 us), phase 1 on tensor cores (bf16 mma
//   m16n8k16, phi hi + lo, the squares from x times x; lane-per-item copies in 32-byte pieces:
//   154 us, notes/cuda-bench-h100-head-pcm-tried.txt; the kernel is not instruction-bound),
//   cp.async.cg.L2::256B (no change); pc4 below T = 513 (T=64 10.1 us, T=256 14.7 us: the
//   one-cluster-per-tile kernels stay faster there).
""" + HEAD_ARGS + "\n"]
    for dtype in DTYPES:
        for n in NS:
            nm, txt = head_kernel(dtype, n)
            out.append(txt)
    out.append(".extern .shared .align 16 .b8 hcl_x[];\n")
    for dec in [False, True]:
        for dtype in DTYPES:
            for n in (CLD_NS if dec else CL_NS):
                nm, txt = head_cl_kernel(dtype, n, dec)
                out.append(txt)
    for dtype in DTYPES:
        for n in CL16_NS:
            nm, txt = head_cl_kernel(dtype, n, CLn=16)
            out.append(txt)
    out.append(".extern .shared .align 16 .b8 hpc_x[];\n")
    for cl, tt in PC_SHAPES:
        for dtype in DTYPES:
            for n in PC_NS:
                nm, txt = head_pc_kernel(dtype, n, cl, tt)
                out.append(txt)
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# static

STATIC_ARGS = """// struct StaticArgs (96 bytes):
//   +0 x  +8 h_pre_logits  +16 h_post_logits  +24 h_res_logits  +32 gamma  +40 out   (u64)
//   +48 x_stride  +56 out_stride                                                  (u64 bytes)
//   +64 tokens  +68 cbytes  +72 cchunks (C/V)  +76 iters                            (u32)
//   +80 eps_hc  +84 eps_f  +88 inv_c (1/C)  +92 pad                                 (f32)
// dynamic shared memory: C * 4 bytes (a[c] of the current token)"""


def static_coeffs(k, n, lane, phol, phrl, iters, eps_hc, sS, sH, it, pr, done="COEF_WAIT"):
    """The coefficient warp of the static kernels: h_post = 2 sigma(H_post) into ss_h[32..32+n) and
    h_res = Sinkhorn(H_res) (Paper start and order) into ss_res (row-major); ends by branching to
    COEF_WAIT. n <= 4: lane 0 alone, S in n*n registers. n >= 8: the scaling-vector form
    S = diag(r) K diag(c), K = exp(Z - colmax): lane j holds column j and row j of K and r_j,
    c_j; a column step updates c_j from K[:, j] . r, a row step r_i from
    K[i, :] . c, each preceded by publishing the vector it reads in ss_h (r at floats 0..n-1, c
    at 64..) and read back by broadcast loads. The same divisions as the Paper's, rearranged (f32
    rounding only)."""
    f = lambda s: k.r("f32", s)
    u = lambda s: k.r("b32", s)
    p = lambda s: k.r("b64", s)
    if n <= 4:
        k.comment("n <= 4: lane 0 alone, S in n*n registers (Paper start and order)")
        k.e(f"setp.ne.u32 {pr}, {lane}, 0;")
        k.e(f"@{pr} bra {done};")
        zl = load_f32_run(k, "zl", phol, n)
        for i in range(n):
            hq = f(f"hpost_c{i}")
            sigmoid(k, hq, zl[i], f"s2_{i}", fast=True)
            k.e(f"add.f32 {hq}, {hq}, {hq};")
            k.e(f"st.shared.f32 [{sH}+{128 + 4 * i}], {hq};")
        Z = load_f32_run(k, "z", phrl, n * n)
        S = [[Z[i * n + j] for j in range(n)] for i in range(n)]
        m = f("zmax")
        for j in range(n):
            k.e(f"mov.f32 {m}, {S[0][j]};")
            for i in range(1, n):
                k.e(f"max.f32 {m}, {m}, {S[i][j]};")
            for i in range(n):
                k.e(f"sub.f32 {S[i][j]}, {S[i][j]}, {m};")
                k.e(f"mul.f32 {S[i][j]}, {S[i][j]}, 0f3FB8AA3B;")
                k.e(f"ex2.approx.ftz.f32 {S[i][j]}, {S[i][j]};")
        k.comment("iters x (column step, row step): S /= (sum + eps_hc), reciprocal then multiply")
        k.e(f"mov.u32 {it}, 0;")
        k.label("SK_LOOP")
        k.e(f"setp.ge.u32 {pr}, {it}, {iters};")
        k.e(f"@{pr} bra SK_END;")
        sums, rcps = [f(f"sks{j}") for j in range(n)], [f(f"skr{j}") for j in range(n)]
        for j in range(n):
            tree_sum(k, sums[j], [S[i][j] for i in range(n)], f"ct{j}_")
            k.e(f"add.f32 {sums[j]}, {sums[j]}, {eps_hc};")
            rcp_fast(k, rcps[j], sums[j], f"cr{j}")
        for j in range(n):
            for i in range(n):
                k.e(f"mul.f32 {S[i][j]}, {S[i][j]}, {rcps[j]};")
        for i in range(n):
            tree_sum(k, sums[i], S[i], f"rt{i}_")
            k.e(f"add.f32 {sums[i]}, {sums[i]}, {eps_hc};")
            rcp_fast(k, rcps[i], sums[i], f"rr{i}")
        for i in range(n):
            for j in range(n):
                k.e(f"mul.f32 {S[i][j]}, {S[i][j]}, {rcps[i]};")
        k.e(f"add.u32 {it}, {it}, 1;")
        k.e("bra SK_LOOP;")
        k.label("SK_END")
        for i in range(n):
            for j in range(n):
                k.e(f"st.shared.f32 [{sS}+{4 * (i * n + j)}], {S[i][j]};")
        k.e(f"bra {done};")
        return
    k.comment(f"n = {n}: every lane runs (full-mask shuffles); lane l works on index j = min(l, n-1)")
    j_, la = u("cj"), p("cla")
    k.e(f"min.u32 {j_}, {lane}, {n - 1};")
    k.e(f"mul.wide.u32 {la}, {j_}, 4;")
    zl, hpost, a = f("zl"), f("hpost_c"), p("lga")
    k.e(f"add.u64 {a}, {phol}, {la};")
    k.e(f"ld.global.nc.f32 {zl}, [{a}];")
    sigmoid(k, hpost, zl, "s2", fast=True)
    k.e(f"add.f32 {hpost}, {hpost}, {hpost};")
    sa = p("sha")
    k.e(f"add.u64 {sa}, {sH}, {la};")
    k.e(f"st.shared.f32 [{sa}+128], {hpost};")
    k.comment("column j of Z (stride n) and its max; row j of Z (contiguous)")
    kc = [f(f"kc{i}") for i in range(n)]
    k.e(f"add.u64 {a}, {phrl}, {la};")
    for i in range(n):
        k.e(f"ld.global.nc.f32 {kc[i]}, [{a}+{4 * i * n}];")
    ra = p("rowa")
    k.e(f"mul.wide.u32 {ra}, {j_}, {4 * n};")
    k.e(f"add.u64 {ra}, {ra}, {phrl};")
    kr = load_f32_run(k, "kr", ra, n)
    m = f("zmax")
    k.e(f"mov.f32 {m}, {kc[0]};")
    for i in range(1, n):
        k.e(f"max.f32 {m}, {m}, {kc[i]};")
    for i in range(n):
        k.e(f"sub.f32 {kc[i]}, {kc[i]}, {m};")
        k.e(f"mul.f32 {kc[i]}, {kc[i]}, 0f3FB8AA3B;")
        k.e(f"ex2.approx.ftz.f32 {kc[i]}, {kc[i]};")
    k.comment("K[j][i'] = exp(Z[j][i'] - colmax[i']): the column maxima gathered from their lanes")
    mj = f("mj")
    for i in range(n):
        k.e(f"shfl.sync.idx.b32 {mj}, {m}, {i}, 0x1f, 0xffffffff;")
        k.e(f"sub.f32 {kr[i]}, {kr[i]}, {mj};")
        k.e(f"mul.f32 {kr[i]}, {kr[i]}, 0f3FB8AA3B;")
        k.e(f"ex2.approx.ftz.f32 {kr[i]}, {kr[i]};")
    oc, orow, dot, den, rc = f("own_c"), f("own_r"), f("dot"), f("den"), f("rcpv")
    k.comment("c and r start at 1; lane j keeps own_c = c_j and own_r = r_j. Each half step publishes")
    k.comment("the vector it reads in ss_h (r at floats 0..n-1, c at 64..64+n-1; h_post sits between) and")
    k.comment("every lane reads it back by broadcast 16-byte loads: n/4 loads per dot product where")
    k.comment(f"shfl.idx took n shuffles (H100, n = 32, 20 iterations: ~8 us -> ~0.8 us).")
    k.comment("Two buffers, so one bar.warp.sync per half step orders the writes before the reads and")
    k.comment("the reads of a buffer before its next write (a whole half step later).")
    k.e(f"mov.f32 {oc}, 0f3F800000;")
    k.e(f"mov.f32 {orow}, 0f3F800000;")
    pv = k.r("pred", "pvec")
    k.e(f"setp.lt.u32 {pv}, {lane}, {n};")
    va = p("veca")
    k.e(f"add.u64 {va}, {sH}, {la};")
    nch = 8 if n >= 32 else 4

    def dot_shared(vec_a, off, tag):
        """dot = sum_i a_i v_i, v read from ss_h at byte offset off, in nch interleaved chains
        summed pairwise (a fixed order)."""
        ch = [f(f"{tag}{q}") for q in range(nch)]
        for h in range(0, n, 16):  # 16 values at a time: fewer live registers beside K's 2n
            v = load_f32_run(k, f"{tag}v", sH, min(16, n), off=off + 4 * h, space="shared")
            for i in range(h, min(n, h + 16)):
                if i < nch:
                    k.e(f"mul.f32 {ch[i]}, {vec_a[i]}, {v[i - h]};")
                else:
                    k.e(f"fma.rn.f32 {ch[i % nch]}, {vec_a[i]}, {v[i - h]}, {ch[i % nch]};")
        while len(ch) > 1:
            for q in range(len(ch) // 2):
                k.e(f"add.f32 {ch[q]}, {ch[q]}, {ch[q + len(ch) // 2]};")
            ch = ch[: len(ch) // 2]
        k.e(f"mov.f32 {dot}, {ch[0]};")

    k.e(f"mov.u32 {it}, 0;")
    k.label("SK_LOOP")
    k.e(f"setp.ge.u32 {pr}, {it}, {iters};")
    k.e(f"@{pr} bra SK_END;")
    k.comment("column step: colsum_j = c_j (K[:, j] . r); c_j /= colsum_j + eps_hc")
    k.e(f"@{pv} st.shared.f32 [{va}], {orow};")
    k.e("bar.warp.sync 0xffffffff;")
    dot_shared(kc, 0, "dc")
    k.e(f"mul.f32 {den}, {dot}, {oc};")
    k.e(f"add.f32 {den}, {den}, {eps_hc};")
    rcp_fast(k, rc, den, "sc")
    k.e(f"mul.f32 {oc}, {oc}, {rc};")
    k.comment("row step: rowsum_j = r_j (K[j, :] . c); r_j /= rowsum_j + eps_hc")
    k.e(f"@{pv} st.shared.f32 [{va}+256], {oc};")
    k.e("bar.warp.sync 0xffffffff;")
    dot_shared(kr, 256, "dr")
    k.e(f"mul.f32 {den}, {dot}, {orow};")
    k.e(f"add.f32 {den}, {den}, {eps_hc};")
    rcp_fast(k, rc, den, "sr")
    k.e(f"mul.f32 {orow}, {orow}, {rc};")
    k.e(f"add.u32 {it}, {it}, 1;")
    k.e("bra SK_LOOP;")
    k.label("SK_END")
    k.comment("lane j < n writes column j: S[i][j] = r_i K[i][j] c_j (r_i fetched from lane i)")
    ca = p("ca")
    k.e(f"add.u64 {ca}, {sS}, {la};")
    sv = f("sv")
    k.e(f"setp.lt.u32 {pr}, {lane}, {n};")
    for i in range(n):
        k.e(f"shfl.sync.idx.b32 {sv}, {orow}, {i}, 0x1f, 0xffffffff;")
        k.e(f"mul.f32 {sv}, {sv}, {kc[i]};")
        k.e(f"mul.f32 {sv}, {sv}, {oc};")
        k.e(f"@{pr} st.shared.f32 [{ca}+{4 * i * n}], {sv};")
    k.e(f"bra {done};")


def static_premix(k, n, V, hp, xs, ss):
    """Phase A of both static kernels: a[v] = sum_j h_pre[j] x[j][v] and ss += a[v]^2."""
    av = [k.r("f32", f"a{v}") for v in range(V)]
    for v in range(V):
        k.e(f"mul.f32 {av[v]}, {hp[0]}, {xs[0][v]};")
    for j in range(1, n):
        for v in range(V):
            k.e(f"fma.rn.f32 {av[v]}, {hp[j]}, {xs[j][v]}, {av[v]};")
    for v in range(V):
        k.e(f"fma.rn.f32 {ss}, {av[v]}, {av[v]}, {ss};")
    return av


def st_shared_f32(k, vals, addr):
    """f32 registers to shared memory at addr, in 16-byte stores where four fit."""
    i = 0
    while i < len(vals):
        w = min(4, len(vals) - i)
        if w == 1:
            k.e(f"st.shared.f32 [{addr}+{4 * i}], {vals[i]};")
        else:
            k.e(f"st.shared.v{w}.f32 [{addr}+{4 * i}], {{{', '.join(vals[i:i + w])}}};")
        i += w


def static_rms(k, ss, lane, warp, pw, sR, ndw, inv_c, eps_f, barrier_note=None, barrier="barrier.sync 0;",
               cluster=1, tid=None):
    """PA_END of both static kernels: the CTA's sum of squares in a fixed order (butterflies,
    then the ndw data warps through shared memory, barrier 0), returns r = 1/sqrt(mean + eps_f).
    cluster > 1 (static_mma_cl): the CTAs' sums are exchanged through distributed shared memory
    (ss_cl, cluster barrier) and added in rank order, the same bits in every CTA; the caller waits
    on the cluster barrier once more before exiting (the others read its ss_cl)."""
    k.label("PA_END")
    warp_allreduce(k, ss, "ssr")
    k.e(f"setp.eq.u32 {pw}, {lane}, 0;")
    wa = k.r("b64", "wa")
    k.e(f"mul.wide.u32 {wa}, {warp}, 4;")
    k.e(f"add.u64 {wa}, {wa}, {sR};")
    k.e(f"@{pw} st.shared.f32 [{wa}], {ss};")
    if barrier_note:
        k.comment(barrier_note)
    k.e(barrier)
    red = load_f32_run(k, "rw", sR, ndw, space="shared")
    tot, rr = k.r("f32", "tot"), k.r("f32", "rinv")
    k.e(f"mov.f32 {tot}, {red[0]};")
    for w in range(1, ndw):
        k.e(f"add.f32 {tot}, {tot}, {red[w]};")
    if cluster > 1:
        k.comment(f"the {cluster} CTAs of the token: thread 0 publishes this CTA's sum in ss_cl; after the cluster")
        k.comment("barrier (release / acquire) every thread adds the CTAs' sums in rank order")
        k.e(f"setp.eq.u32 {pw}, {tid}, 0;")
        cl32, ra, rv = k.r("b32", "cla32"), k.r("b32", "clra"), k.r("f32", "clv")
        k.e(f"mov.u32 {cl32}, ss_cl;")
        k.e(f"@{pw} st.shared.f32 [{cl32}], {tot};")
        k.e("barrier.cluster.arrive.release;")
        k.e("barrier.cluster.wait.acquire;")
        for r in range(cluster):
            k.e(f"mapa.shared::cluster.u32 {ra}, {cl32}, {r};")
            k.e(f"ld.shared::cluster.f32 {tot if r == 0 else rv}, [{ra}];")
            if r:
                k.e(f"add.f32 {tot}, {tot}, {rv};")
        k.comment("done reading the other CTAs' ss_cl: arrive now, wait before exit")
        k.e("barrier.cluster.arrive.release;")
    k.comment("r = 1 / sqrt(mean(a^2) + eps_f)")
    k.e(f"fma.rn.f32 {rr}, {tot}, {inv_c}, {eps_f};")
    k.e(f"sqrt.rn.f32 {rr}, {rr};")
    k.e(f"rcp.rn.f32 {rr}, {rr};")
    return rr


def static_y(k, av, gv, rr):
    """Phase B of both static kernels: y = a gamma r for one chunk."""
    yv = [k.r("f32", f"y{v}") for v in range(len(av))]
    for v in range(len(av)):
        k.e(f"mul.f32 {yv[v]}, {av[v]}, {gv[v]};")
        k.e(f"mul.f32 {yv[v]}, {yv[v]}, {rr};")
    return yv


def static_streams(k, dtype, n, V, ho, Rm, sS, xs, yv, oa, cb64):
    """Phase B of both static kernels: every stream out[i] = h_post[i] y + sum_j h_res[i][j] x[j]
    of one chunk, stored at oa[i] (a list of addresses) or at oa stepped by cb64 between
    streams (one register)."""
    for i in range(n):
        Ri = Rm[i] if n <= 2 else load_f32_run(k, f"Rr{i}_", sS, n, off=4 * i * n, space="shared")
        acc = [k.r("f32", f"acc{v}") for v in range(V)]
        for v in range(V):
            k.e(f"mul.f32 {acc[v]}, {ho[i]}, {yv[v]};")
        for j in range(n):
            for v in range(V):
                k.e(f"fma.rn.f32 {acc[v]}, {Ri[j]}, {xs[j][v]}, {acc[v]};")
        store_row(k, dtype, acc, oa[i] if isinstance(oa, list) else oa, tag=f"so{i}")
        if not isinstance(oa, list) and i < n - 1:
            k.e(f"add.u64 {oa}, {oa}, {cb64};")


def static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr, hpre_note,
                           warp_notes, hpre_first=True, coef_enter=(), coef_leave=()):
    """Every thread: h_pre[j] = sigma(H_pre[j]) in registers (returned); warp cw: h_post and h_res
    into shared memory (static_coeffs); all threads meet again at COEF_WAIT. hpre_first=False
    computes h_pre after COEF_WAIT, so its n registers are not live across the Sinkhorn.
    coef_enter / coef_leave: instructions the coefficient warp runs before / after its work."""

    def hpre():
        k.comment(hpre_note)
        hp = [k.r("f32", f"hpre{j}") for j in range(n)]
        hl = load_f32_run(k, "hlg", phpl, n)
        for j in range(n):
            sigmoid(k, hp[j], hl[j], f"hs{j}", fast=True)
        return hp

    if hpre_first:
        hp = hpre()
    for note in warp_notes:
        k.comment(note)
    k.e(f"setp.ne.u32 {pr}, {warp}, {cw};")
    k.e(f"@{pr} bra COEF_WAIT;")
    for line in coef_enter:
        k.e(line)
    static_coeffs(k, n, lane, phol, phrl, iters, eps_hc, sS, sH, it, pr, done="COEF_DONE" if coef_leave else "COEF_WAIT")
    if coef_leave:
        k.label("COEF_DONE")
        for line in coef_leave:
            k.e(line)
    k.label("COEF_WAIT")
    return hp if hpre_first else hpre()


def static_kernel(dtype, n):
    # Register caps so that many 128-thread CTAs stay resident (6+ per SM for n <= 4): the
    # per-token chain (load, reduce, barrier, store) is latency-bound, so resident CTAs matter.
    maxnreg = {1: ".maxnreg 64\n", 2: ".maxnreg 64\n", 4: ".maxnreg 80\n", 8: ".maxnreg 128\n"}.get(n, "")
    V = vchan(n)
    es = ESIZE[dtype]
    name = f"mhc_static_{dtype}_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    px, phpl, phol, phrl, pg, po, sx, so = (p(s) for s in ["px", "phpl", "phol", "phrl", "pg", "po", "sx", "so"])
    tokens, cbytes, cchunks, iters = u("tokens"), u("cbytes"), u("cchunks"), u("iters")
    eps_hc, eps_f, inv_c = f("eps_hc"), f("eps_f"), f("inv_c")
    for reg, off, ty in [(px, 0, "u64"), (phpl, 8, "u64"), (phol, 16, "u64"), (phrl, 24, "u64"), (pg, 32, "u64"),
                         (po, 40, "u64"), (sx, 48, "u64"), (so, 56, "u64"), (tokens, 64, "u32"), (cbytes, 68, "u32"),
                         (cchunks, 72, "u32"), (iters, 76, "u32"), (eps_hc, 80, "f32"), (eps_f, 84, "f32"),
                         (inv_c, 88, "f32")]:
        k.e(f"ld.param.{ty} {reg}, [args+{off}];")
    k.grid_dependency()
    tid, lane, warp, q, it, t = u("tid"), u("lane"), u("warp"), u("q"), u("it"), u("t")
    pr, pw = k.r("pred", "p"), k.r("pred", "pw")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    sS, sH, sR, sA = p("sS"), p("sH"), p("sR"), p("sA")
    k.e(f"mov.u64 {sS}, ss_res;")
    k.e(f"mov.u64 {sH}, ss_h;")
    k.e(f"mov.u64 {sR}, ss_red;")
    k.e(f"mov.u64 {sA}, ss_a;")
    DT, NT = st_threads(n)
    cw = DT // 32  # the coefficient warp
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers (phase A needs nothing else)",
                                [f"warps 0..{cw - 1} go to the token loop; warp {cw} computes h_post and h_res "
                                 "(shared by every",
                                 "token) while they load, and publishes them through the first token's phase-A "
                                 "barrier"])
    cb64 = p("cb64")
    k.e(f"cvt.u64.u32 {cb64}, {cbytes};")
    q0 = u("q0")
    k.comment(f"the data warps take chunks tid, tid + {DT}, ... of every token; the coefficient warp none")
    k.e(f"setp.lt.u32 {pr}, {tid}, {DT};")
    k.e(f"selp.b32 {q0}, {tid}, {cchunks}, {pr};")
    k.e(f"mov.u32 {t}, %ctaid.x;")
    k.label("TOK_LOOP")
    k.e(f"setp.ge.u32 {pr}, {t}, {tokens};")
    k.e(f"@{pr} bra TOK_END;")
    t64, xrow, orow = p("t64"), p("xrow"), p("orow")
    k.e(f"cvt.u64.u32 {t64}, {t};")
    k.e(f"mad.lo.u64 {xrow}, {t64}, {sx}, {px};")
    k.e(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    ss = f("ss")
    k.e(f"mov.f32 {ss}, 0f00000000;")
    k.comment(f"phase A: a[c] = sum_j h_pre[j] x[j][c] into shared memory, ss = sum_c a^2")
    k.e(f"mov.u32 {q}, {q0};")
    k.label("PA_LOOP")
    k.e(f"setp.ge.u32 {pr}, {q}, {cchunks};")
    k.e(f"@{pr} bra PA_END;")
    co = p("co")
    k.e(f"mul.wide.u32 {co}, {q}, {V * es};")
    xa = [p(f"xa{j}") for j in range(n)]
    k.e(f"add.u64 {xa[0]}, {xrow}, {co};")
    for j in range(1, n):
        k.e(f"add.u64 {xa[j]}, {xa[j - 1]}, {cb64};")
    xs = [load_row(k, dtype, f"x{j}", xa[j], V) for j in range(n)]
    av = static_premix(k, n, V, hp, xs, ss)
    aa = p("aa")
    k.e(f"mul.wide.u32 {aa}, {q}, {V * 4};")
    k.e(f"add.u64 {aa}, {aa}, {sA};")
    st_shared_f32(k, av, aa)
    k.e(f"add.u32 {q}, {q}, {DT};")
    k.e("bra.uni PA_LOOP;")
    rr = static_rms(k, ss, lane, warp, pw, sR, DT // 32, inv_c, eps_f)
    k.comment("past the barrier: the coefficient warp's h_post and h_res are visible (broadcast loads)")
    ho = load_f32_run(k, "hpost", sH, n, off=128, space="shared")
    if n <= 2:
        R = [load_f32_run(k, f"R{i}_", sS, n, off=4 * i * n, space="shared") for i in range(n)]
    k.comment("phase B: out[i][c] = sum_j h_res[i][j] x[j][c] + h_post[i] a[c] gamma[c] r; x re-read (L1/L2)")
    k.e(f"mov.u32 {q}, {q0};")
    k.label("PB_LOOP")
    k.e(f"setp.ge.u32 {pr}, {q}, {cchunks};")
    k.e(f"@{pr} bra PB_END;")
    k.e(f"mul.wide.u32 {co}, {q}, {V * es};")
    k.e(f"add.u64 {xa[0]}, {xrow}, {co};")
    for j in range(1, n):
        k.e(f"add.u64 {xa[j]}, {xa[j - 1]}, {cb64};")
    xs = [load_row(k, dtype, f"x{j}", xa[j], V) for j in range(n)]
    k.e(f"mul.wide.u32 {aa}, {q}, {V * 4};")
    ga = p("ga")
    k.e(f"add.u64 {ga}, {aa}, {pg};")
    k.e(f"add.u64 {aa}, {aa}, {sA};")
    av = load_f32_run(k, "a", aa, V, space="shared")
    gv = load_f32_run(k, "gm", ga, V)
    yv = static_y(k, av, gv, rr)
    oa = [p(f"oa{i}") for i in range(n)]
    k.e(f"add.u64 {oa[0]}, {orow}, {co};")
    for i in range(1, n):
        k.e(f"add.u64 {oa[i]}, {oa[i - 1]}, {cb64};")
    static_streams(k, dtype, n, V, ho, R if n <= 2 else None, sS, xs, yv, oa, cb64)
    k.e(f"add.u32 {q}, {q}, {DT};")
    k.e("bra.uni PB_LOOP;")
    k.label("PB_END")
    k.comment("a[] and the warp sums are rewritten by the next token: wait for every reader")
    k.e("barrier.sync 0;")
    nct = u("nct")
    k.e(f"mov.u32 {nct}, %nctaid.x;")
    k.e(f"add.u32 {t}, {t}, {nct};")
    k.e("bra.uni TOK_LOOP;")
    k.label("TOK_END")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[96]
)
.reqntid {NT}, 1, 1
{maxnreg}{{
    .shared .align 16 .f32 ss_res[{n * n}];
    .shared .align 16 .f32 ss_h[96];
    .shared .align 16 .f32 ss_red[{NT // 32}];
{k.body()}
}}
"""


# static, one token per CTA (n <= 8): x copied to shared memory by cp.async once, the coefficient
# warp overlapping the copy. n = 16, 32 keep the persistent kernel: a channel-split cluster variant
# (R = 2, 4 CTAs per token) was measured 2-4x slower there (rounds 7-8, notes/cuda-runtime.md).
ST_CL_NS = [1, 2, 4, 8]
ST_CL_SMEM = 100 * 1024


def static_cl_cmax(n, dtype):
    """Largest C whose a[] (f32) and x tile (n streams) fit ST_CL_SMEM."""
    cmax = ST_CL_SMEM // (n * ESIZE[dtype] + 4)
    return cmax - cmax % 8


def static_tile_args(k):
    """The StaticArgs loads of the tile kernels (static_cl, static_pr): pad (+92) = m, the chunks
    of V channels per token."""
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    px, phpl, phol, phrl, pg, po, sx, so = (p(s) for s in ["px", "phpl", "phol", "phrl", "pg", "po", "sx", "so"])
    tokens, cbytes, cchunks, iters, m = u("tokens"), u("cbytes"), u("cchunks"), u("iters"), u("m")
    eps_hc, eps_f, inv_c = f("eps_hc"), f("eps_f"), f("inv_c")
    for reg, off, ty in [(px, 0, "u64"), (phpl, 8, "u64"), (phol, 16, "u64"), (phrl, 24, "u64"), (pg, 32, "u64"),
                         (po, 40, "u64"), (sx, 48, "u64"), (so, 56, "u64"), (tokens, 64, "u32"), (cbytes, 68, "u32"),
                         (cchunks, 72, "u32"), (iters, 76, "u32"), (eps_hc, 80, "f32"), (eps_f, 84, "f32"),
                         (inv_c, 88, "f32"), (m, 92, "u32")]:
        k.e(f"ld.param.{ty} {reg}, [args+{off}];")
    k.grid_dependency()
    return px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f, inv_c


def static_tile_rows(k, dtype, n, V, q, base, seg, tag):
    """The n stream rows of chunk q of a token tile at base (streams seg bytes apart), as f32."""
    xa = k.r("b32", f"{tag}xa")
    k.e(f"mad.lo.u32 {xa}, {q}, {V * ESIZE[dtype]}, {base};")
    rows = []
    for j in range(n):
        if j:
            k.e(f"add.u32 {xa}, {xa}, {seg};")
        rows.append(ld_shared_row(k, dtype, xa, V, f"{tag}w{j}_", f"{tag}x{j}_"))
    return rows


def static_phase_a(k, dtype, n, V, tid, q, m, DT, base, seg, hp, ss, sA, pr, what):
    """Phase A of the tile kernels, chunks q = tid, tid + DT, ... < m: a[c] = sum_j h_pre[j] x[j][c]
    from the token tile at base into a[] (sA), ss += a^2; jumps to PA_END when done. Returns the
    a[] address register."""
    k.comment(f"phase A: a[c] = sum_j h_pre[j] x[j][c] ({what}) into a[], ss = sum_c a^2")
    k.e(f"mov.u32 {q}, {tid};")
    k.label("PA_LOOP")
    k.e(f"setp.ge.u32 {pr}, {q}, {m};")
    k.e(f"@{pr} bra PA_END;")
    xs = static_tile_rows(k, dtype, n, V, q, base, seg, "A")
    av = static_premix(k, n, V, hp, xs, ss)
    aa = k.r("b32", "aa")
    k.e(f"mad.lo.u32 {aa}, {q}, {V * 4}, {sA};")
    st_shared_f32(k, av, aa)
    k.e(f"add.u32 {q}, {q}, {DT};")
    k.e("bra.uni PA_LOOP;")
    return aa


def static_phase_b(k, dtype, n, V, tid, it, q, items, DT, base, seg, aa, sA, pg, rr, ho, Rm, sS, orow, cb64, pr,
                   lo=None):
    """Phase B of the tile kernels, chunks tid, tid + DT, ... < items: out[i][c] = sum_j h_res[i][j]
    x[j][c] + h_post[i] a[c] gamma[c] r from the token tile at base and a[], to the row at orow;
    ends at PB_END. lo = (first chunk, scratch) offsets gamma by a first chunk."""
    k.e(f"mov.u32 {it}, {tid};")
    k.label("PB_LOOP")
    k.e(f"setp.ge.u32 {pr}, {it}, {items};")
    k.e(f"@{pr} bra PB_END;")
    k.e(f"mov.u32 {q}, {it};")
    xs = static_tile_rows(k, dtype, n, V, q, base, seg, "B")
    k.e(f"mad.lo.u32 {aa}, {q}, {V * 4}, {sA};")
    av = load_f32_run(k, "ab", aa, V, space="shared")
    ga = k.r("b64", "ga")
    if lo is not None:
        k.e(f"add.u32 {lo[1]}, {lo[0]}, {q};")
        k.e(f"mul.wide.u32 {ga}, {lo[1]}, {V * 4};")
    else:
        k.e(f"mul.wide.u32 {ga}, {q}, {V * 4};")
    k.e(f"add.u64 {ga}, {ga}, {pg};")
    gv = load_f32_run(k, "gm", ga, V)
    yv = static_y(k, av, gv, rr)
    oa = k.r("b64", "oa")
    k.e(f"mad.wide.u32 {oa}, {q}, {V * ESIZE[dtype]}, {orow};")
    static_streams(k, dtype, n, V, ho, Rm, sS, xs, yv, oa, cb64)
    k.e(f"add.u32 {it}, {it}, {DT};")
    k.e("bra.uni PB_LOOP;")
    k.label("PB_END")


def static_copy_rows(k, n, DT, tid, q, units, src, dst, a64, ii, tmp, cb64, seg, pr, tag):
    """The data threads' cp.async of a token's n rows (global src, cb64 bytes apart) into a tile
    (shared dst, seg bytes apart) in 16-byte units q = tid, tid + DT, ... < units; ii counts the
    streams from its current value (0)."""
    k.label(f"{tag}_STREAM")
    k.e(f"mov.u32 {q}, {tid};")
    k.label(f"{tag}_UNIT")
    k.e(f"setp.ge.u32 {pr}, {q}, {units};")
    k.e(f"@{pr} bra {tag}_NEXT;")
    k.e(f"mul.wide.u32 {a64}, {q}, 16;")
    k.e(f"add.u64 {a64}, {a64}, {src};")
    k.e(f"mad.lo.u32 {tmp}, {q}, 16, {dst};")
    k.e(f"cp.async.cg.shared.global [{tmp}], [{a64}], 16;")
    k.e(f"add.u32 {q}, {q}, {DT};")
    k.e(f"bra.uni {tag}_UNIT;")
    k.label(f"{tag}_NEXT")
    k.e(f"add.u64 {src}, {src}, {cb64};")
    k.e(f"add.u32 {dst}, {dst}, {seg};")
    k.e(f"add.u32 {ii}, {ii}, 1;")
    k.e(f"setp.lt.u32 {pr}, {ii}, {n};")
    k.e(f"@{pr} bra {tag}_STREAM;")


def static_token_rows(k, tok, px, sx, po, so, cbytes):
    """The shared-memory pointers of the static tile kernels (ss_res, ss_h, ss_red) and token tok's
    x and out rows; returns sS, sH, sR, t64, xrow, orow, cb64 (cbytes as u64)."""
    p = lambda s: k.r("b64", s)
    sS, sH, sR = p("sS"), p("sH"), p("sR")
    k.e(f"mov.u64 {sS}, ss_res;")
    k.e(f"mov.u64 {sH}, ss_h;")
    k.e(f"mov.u64 {sR}, ss_red;")
    t64, xrow, orow, cb64 = p("t64"), p("xrow"), p("orow"), p("cb64")
    k.e(f"cvt.u64.u32 {t64}, {tok};")
    k.e(f"mad.lo.u64 {xrow}, {t64}, {sx}, {px};")
    k.e(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    k.e(f"cvt.u64.u32 {cb64}, {cbytes};")
    return sS, sH, sR, t64, xrow, orow, cb64


def static_cpbar_init(k, DT, tid, pr):
    """cpbar (the tile kernels' copy barrier) initialised by thread 0 for the DT data threads'
    arrivals, before barrier 0; returns its address register."""
    cpb = k.r("b32", "cpbar")
    k.e(f"mov.u32 {cpb}, cpbar;")
    k.comment(f"cpbar counts the {DT} data threads' copies (cp.async.mbarrier.arrive.noinc): initialised by")
    k.comment("thread 0 before anyone arrives (barrier 0)")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra INIT_END;")
    k.e(f"mbarrier.init.shared::cta.b64 [{cpb}], {DT};")
    k.label("INIT_END")
    k.e("barrier.sync 0;")
    return cpb


def static_cp_wait(k, cpb):
    """Spins until cpbar's phase 0 completes: every data thread's copies have landed."""
    ok = k.r("pred", "cpok")
    k.label("CP_WAIT")
    k.e(f"mbarrier.try_wait.parity.shared::cta.b64 {ok}, [{cpb}], 0;")
    k.e(f"@!{ok} bra CP_WAIT;")


def static_cl_kernel(dtype, n):
    V = vchan(n)
    es = ESIZE[dtype]
    R = 1  # CTAs per token (kept in the comments and address arithmetic below)
    DT, NT = st_threads(n)
    cw = DT // 32
    name = f"mhc_static_cl_{dtype}_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    (px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f,
     inv_c) = static_tile_args(k)
    tid, lane, warp, q, it, tok, rank, lo, tmp = (u(x) for x in ["tid", "lane", "warp", "q", "it", "tok", "rank",
                                                                "lo", "tmp"])
    pr, pw = k.r("pred", "p"), k.r("pred", "pw")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    k.e(f"mov.u32 {rank}, 0;")
    k.e(f"mov.u32 {tok}, %ctaid.x;")
    k.comment(f"this CTA: token tok, chunks [lo, lo + m) of V={V} channels (m = C/V/{R})")
    k.e(f"mul.lo.u32 {lo}, {rank}, {m};")
    sS, sH, sR, t64, xrow, orow, cb64 = static_token_rows(k, tok, px, sx, po, so, cbytes)
    k.e(f"mad.wide.u32 {xrow}, {lo}, {V * es}, {xrow};")
    k.e(f"mad.wide.u32 {orow}, {lo}, {V * es}, {orow};")
    sA, sX, seg, units = u("sA"), u("sX"), u("seg"), u("units")
    k.comment("dynamic shared memory: a[m V] (f32), then the x tile [n][m V] (storage dtype)")
    k.e(f"mov.u32 {sA}, st_dyn;")
    k.e(f"mul.lo.u32 {seg}, {m}, {V * 4};")
    k.e(f"add.u32 {sX}, {sA}, {seg};")
    k.e(f"mul.lo.u32 {seg}, {m}, {V * es};")
    k.e(f"shr.u32 {units}, {seg}, 4;")
    cpb = static_cpbar_init(k, DT, tid, pr)
    k.comment(f"data threads (tid < {DT}): every stream's segment to the tile in 16-byte cp.async units")
    k.e(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.e(f"@{pr} bra CP_END;")
    ii, src, dst, a64 = u("ii"), p("src"), u("dst"), p("a64")
    k.e(f"mov.u32 {ii}, 0;")
    k.e(f"mov.u64 {src}, {xrow};")
    k.e(f"mov.u32 {dst}, {sX};")
    static_copy_rows(k, n, DT, tid, q, units, src, dst, a64, ii, tmp, cb64, seg, pr, "CP")
    k.comment("this thread's arrival on cpbar fires when all its copies have landed")
    k.e(f"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{cpb}];")
    k.label("CP_END")
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers",
                                [f"warp {cw}: h_post and h_res while the copies fly; it joins at the reduction barrier"])
    ss = f("ss")
    k.e(f"mov.f32 {ss}, 0f00000000;")
    k.e(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.e(f"@{pr} bra PA_END;")
    k.comment(f"data threads: cpbar's phase 0 completes when every data thread's copies have landed: the")
    k.comment("tile is complete (an mbarrier, not a named barrier: the coefficient warp passes the same")
    k.comment("barriers as the data warps, which racecheck's barrier model needs)")
    static_cp_wait(k, cpb)
    aa = static_phase_a(k, dtype, n, V, tid, q, m, DT, sX, seg, hp, ss, sA, pr, "tile")
    rr = static_rms(k, ss, lane, warp, pw, sR, DT // 32, inv_c, eps_f,
                    "barrier 0 (all threads): the warp sums, a[], and the coefficient warp's h_post, h_res")
    ho = load_f32_run(k, "hpost", sH, n, off=128, space="shared")
    if n <= 2:
        Rm = [load_f32_run(k, f"R{i}_", sS, n, off=4 * i * n, space="shared") for i in range(n)]
    k.comment("phase B: out[i][c] = sum_j h_res[i][j] x[j][c] + h_post[i] a[c] gamma[c] r (tile, a[])")
    k.e(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.e(f"@{pr} bra PB_END;")
    itemsb = u("itemsb")
    k.e(f"mov.u32 {itemsb}, {m};")
    static_phase_b(k, dtype, n, V, tid, it, q, itemsb, DT, sX, seg, aa, sA, pg, rr, ho, Rm if n <= 2 else None, sS,
                   orow, cb64, pr, lo=(lo, tmp))
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[96]
)
.reqntid {NT}, 1, 1
{".maxnreg 64" + chr(10) if n <= 2 else ""}{{
    .shared .align 16 .f32 ss_res[{n * n}];
    .shared .align 16 .f32 ss_h[96];
    .shared .align 16 .f32 ss_red[{NT // 32}];
    .shared .align 8 .b64 cpbar;
{k.body()}
}}
"""


# static, persistent with a ring (n <= 8, many tokens): resident CTAs walk the tokens, each
# token's x rows stream into a ring of ST_PR_STAGES shared-memory stages by cp.async (one mbarrier
# per stage), the coefficient warp computes h_post and h_res once per CTA.
ST_PR_STAGES = 3
ST_PR_SMEM = 160 * 1024
ST_PR_TMIN = 1  # every T where its ring fits (measured faster than static_cl below 1024 tokens too)


def static_pr_cmax(n, dtype):
    """Largest C whose a[] (f32) and ST_PR_STAGES x tiles fit ST_PR_SMEM."""
    cmax = ST_PR_SMEM // (ST_PR_STAGES * n * ESIZE[dtype] + 4)
    return cmax - cmax % 8


def static_pr_kernel(dtype, n):
    V = vchan(n)
    es = ESIZE[dtype]
    S = ST_PR_STAGES
    DT, NT = st_threads(n)
    cw = DT // 32
    name = f"mhc_static_pr_{dtype}_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    (px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f,
     inv_c) = static_tile_args(k)
    tid, lane, warp, q, it, tok, tmp, nct = (u(x) for x in ["tid", "lane", "warp", "q", "it", "tok", "tmp", "nct"])
    pr, pw = k.r("pred", "p"), k.r("pred", "pw")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    k.e(f"mov.u32 {nct}, %nctaid.x;")
    sS, sH, sR = p("sS"), p("sH"), p("sR")
    k.e(f"mov.u64 {sS}, ss_res;")
    k.e(f"mov.u64 {sH}, ss_h;")
    k.e(f"mov.u64 {sR}, ss_red;")
    cb64 = p("cb64")
    k.e(f"cvt.u64.u32 {cb64}, {cbytes};")
    sA, sX, seg, units, tb, mb, cfb = u("sA"), u("sX"), u("seg"), u("units"), u("tbytes"), u("mbar"), u("cfbar")
    k.comment(f"dynamic shared memory: a[m V] (f32), then {S} stages of the token tile [n][m V] (storage dtype)")
    k.e(f"mov.u32 {sA}, st_dyn;")
    k.e(f"mul.lo.u32 {seg}, {m}, {V * 4};")
    k.e(f"add.u32 {sX}, {sA}, {seg};")
    k.e(f"mul.lo.u32 {seg}, {m}, {V * es};")
    k.e(f"shr.u32 {units}, {seg}, 4;")
    k.e(f"mul.lo.u32 {tb}, {seg}, {n};")
    k.e(f"mov.u32 {mb}, st_mbar;")
    k.e(f"mov.u32 {cfb}, st_cfbar;")
    k.comment(f"mbarriers: stage j (the {DT} data threads' copies, cp.async.mbarrier.arrive.noinc) and the")
    k.comment("coefficients (the 32 lanes of the coefficient warp); initialised before barrier 0")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra INIT_END;")
    for j in range(S):
        k.e(f"mbarrier.init.shared::cta.b64 [{mb}+{8 * j}], {DT};")
    k.e(f"mbarrier.init.shared::cta.b64 [{cfb}], 32;")
    k.label("INIT_END")
    k.e("barrier.sync 0;")
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers",
                                [f"warp {cw}: h_post and h_res once, published through st_cfbar; then it leaves"])
    k.e(f"setp.ne.u32 {pr}, {warp}, {cw};")
    k.e(f"@{pr} bra DATA;")
    cst = p("cfst")
    k.e(f"mbarrier.arrive.shared::cta.b64 {cst}, [{cfb}];")
    k.e("ret;")
    k.label("DATA")

    def issue(t_r, stage_r, tag):
        """The data threads' cp.async of token t_r's rows into stage stage_r, then their arrival on
        the stage's mbarrier (also past the last token: the phase completes, nobody waits)."""
        k.e(f"setp.ge.u32 {pr}, {t_r}, {tokens};")
        k.e(f"@{pr} bra {tag}_ARRIVE;")
        t64, src, ds, a64, ii = p("ct64"), p("csrc"), u("cdst"), p("ca64"), u("cii")
        k.e(f"cvt.u64.u32 {t64}, {t_r};")
        k.e(f"mad.lo.u64 {src}, {t64}, {sx}, {px};")
        k.e(f"mad.lo.u32 {ds}, {stage_r}, {tb}, {sX};")
        k.e(f"mov.u32 {ii}, 0;")
        static_copy_rows(k, n, DT, tid, q, units, src, ds, a64, ii, tmp, cb64, seg, pr, tag)
        k.label(f"{tag}_ARRIVE")
        k.e(f"mad.lo.u32 {tmp}, {stage_r}, 8, {mb};")
        k.e(f"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{tmp}];")

    stage, kk, nt = u("stage"), u("kk"), u("ntok")
    k.comment(f"prologue: tokens ctaid + j nctaid into stages j < {S}")
    k.e(f"mov.u32 {tok}, %ctaid.x;")
    for j in range(S):
        k.e(f"mad.lo.u32 {nt}, {nct}, {j}, {tok};")
        k.e(f"mov.u32 {stage}, {j};")
        issue(nt, stage, f"PRO{j}")
    k.e(f"mov.u32 {stage}, 0;")
    k.e(f"mov.u32 {kk}, 0;")
    k.label("TOK_LOOP")
    k.e(f"setp.ge.u32 {pr}, {tok}, {tokens};")
    k.e(f"@{pr} bra TOK_END;")
    ok, par, sb = k.r("pred", "wok"), u("par"), u("sbase")
    k.comment(f"this token's stage is complete: phase (token index / {S}) mod 2 of its mbarrier")
    k.e(f"div.u32 {par}, {kk}, {S};")
    k.e(f"and.b32 {par}, {par}, 1;")
    k.e(f"mad.lo.u32 {tmp}, {stage}, 8, {mb};")
    k.label("ST_WAIT")
    k.e(f"mbarrier.try_wait.parity.shared::cta.b64 {ok}, [{tmp}], {par};")
    k.e(f"@!{ok} bra ST_WAIT;")
    k.e(f"mad.lo.u32 {sb}, {stage}, {tb}, {sX};")
    ss = f("ss")
    k.e(f"mov.f32 {ss}, 0f00000000;")
    aa = static_phase_a(k, dtype, n, V, tid, q, m, DT, sb, seg, hp, ss, sA, pr, "stage")
    rr = static_rms(k, ss, lane, warp, pw, sR, DT // 32, inv_c, eps_f,
                    f"barrier 1 (the {DT} data threads): the warp sums and a[]", barrier=f"barrier.sync 1, {DT};")
    k.comment("h_post and h_res: the coefficient warp's mbarrier (phase 0; complete after the first token)")
    k.label("CF_WAIT")
    k.e(f"mbarrier.try_wait.parity.shared::cta.b64 {ok}, [{cfb}], 0;")
    k.e(f"@!{ok} bra CF_WAIT;")
    ho = load_f32_run(k, "hpost", sH, n, off=128, space="shared")
    if n <= 2:
        Rm = [load_f32_run(k, f"R{i}_", sS, n, off=4 * i * n, space="shared") for i in range(n)]
    k.comment("phase B: out[i][c] = sum_j h_res[i][j] x[j][c] + h_post[i] a[c] gamma[c] r (stage, a[])")
    t64, orow = p("t64"), p("orow")
    k.e(f"cvt.u64.u32 {t64}, {tok};")
    k.e(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    static_phase_b(k, dtype, n, V, tid, it, q, m, DT, sb, seg, aa, sA, pg, rr, ho, Rm if n <= 2 else None, sS,
                   orow, cb64, pr)
    k.comment(f"the stage, a[] and the warp sums are free once every data thread is here: refill the stage")
    k.e(f"barrier.sync 1, {DT};")
    k.e(f"mad.lo.u32 {nt}, {nct}, {S}, {tok};")
    issue(nt, stage, "REFILL")
    k.e(f"add.u32 {tok}, {tok}, {nct};")
    k.e(f"add.u32 {kk}, {kk}, 1;")
    k.e(f"add.u32 {stage}, {stage}, 1;")
    k.e(f"setp.eq.u32 {pr}, {stage}, {S};")
    k.e(f"selp.u32 {stage}, 0, {stage}, {pr};")
    k.e("bra.uni TOK_LOOP;")
    k.label("TOK_END")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[96]
)
.reqntid {NT}, 1, 1
{{
    .shared .align 16 .f32 ss_res[{n * n}];
    .shared .align 16 .f32 ss_h[96];
    .shared .align 16 .f32 ss_red[{NT // 32}];
    .shared .align 8 .b64 st_mbar[{S}];
    .shared .align 8 .b64 st_cfbar;
{k.body()}
}}
"""



# static on tensor cores (bf16, n = 16, 32): one token per CTA as static_cl (x tile in shared
# memory by cp.async, the coefficient warp beside the copies), phase B as out = H X + h_post y with
# H X on mma.sync m16n8k16 (A = h_res split into bf16 hi + lo, B = the x tile by ldmatrix.trans,
# f32 accumulation): n^2 = 1024 FMAs per channel at n = 32 were the persistent kernel's bound.
ST_MMA_NS = [16, 32]
# CTAs per token (thread-block cluster; the sum of squares over DSMEM) and the token counts each
# serves: few tokens spread over more SMs, so that each SM moves fewer bytes, at most one CTA per
# SM (H100, n = 32 C = 1280: T = 64 on 4-CTA clusters took 24.3 us against 14.8 on one CTA;
# back-to-back us for 4 / 2 / 1 CTAs per token: T = 16 9.6 / 11.0 / 12.1, T = 24 11.8 / 11.3 / 12.5
# (graph 10.0 / 10.9 / 12.1), T = 32 12.7 / 11.5 / 12.7, T = 64 - / 14.3 / 13.8, T = 96 - / 20.4 / 17.4).
# The selector takes the largest cluster whose range holds T and whose C granule (8 x cluster)
# divides C: the smaller wave_us of the larger cluster decides where ranges overlap.
ST_MMA_CLUSTERS = [1, 2, 4]
ST_MMA_TOKENS = {4: (1, 24), 2: (1, 66), 1: (1, 2147483647)}
ST_MMA_WAVE_US = {4: 0.2, 2: 0.25, 1: 0.3}
ST_MMA_SMEM = 200 * 1024
ST_MMA_MAXNREG = 96  # 2 CTAs of 9 warps per SM: 5 warps on one sub-partition x 32 x 96 <= 16384
ST_MMA_PAD = 16  # bytes after each x row: rows 16 bytes apart mod 128, so ldmatrix's 8 rows hit 8 bank groups


def static_mma_cmax(n):
    """Largest C whose a[] and gamma (f32) and padded x tile (n rows of 2 C + ST_MMA_PAD bytes) fit
    ST_MMA_SMEM."""
    cmax = (ST_MMA_SMEM - n * ST_MMA_PAD) // (2 * n + 8)
    return cmax - cmax % 8


def static_mma_kernel(n, R=1):
    dtype, es, V = "bf16", 2, vchan(n)
    DT, NT = st_threads(n)
    NW = DT // 32
    cw = NW
    MT = n // 16  # 16-row m-tiles of the output streams = 16-deep k-steps of the input streams
    name = f"mhc_static_mma_bf16_n{n}" if R == 1 else f"mhc_static_mma_cl{R}_bf16_n{n}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    f = lambda s: k.r("f32", s)
    (px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f,
     inv_c) = static_tile_args(k)
    tid, lane, warp, q, it, tok, tmp = (u(x) for x in ["tid", "lane", "warp", "q", "it", "tok", "tmp"])
    pr, pw, p1 = k.r("pred", "p"), k.r("pred", "pw"), k.r("pred", "p1")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"and.b32 {lane}, {tid}, 31;")
    k.e(f"shr.u32 {warp}, {tid}, 5;")
    sb = u("sb")
    if R == 1:
        k.e(f"mov.u32 {tok}, %ctaid.x;")
        k.e(f"mov.u32 {sb}, {cbytes};")
    else:
        rank = u("rank")
        k.comment(f"a cluster of {R} CTAs per token: CTA r owns channels [r C/{R}, (r + 1) C/{R}) (sb bytes of each row)")
        k.e(f"mov.u32 {tok}, %clusterid.x;")
        k.e(f"mov.u32 {rank}, %cluster_ctarank;")
        k.e(f"shr.u32 {sb}, {cbytes}, {R.bit_length() - 1};")
    sS, sH, sR, t64, xrow, orow, cb64 = static_token_rows(k, tok, px, sx, po, so, cbytes)
    if R > 1:
        k.e(f"mul.lo.u32 {tmp}, {rank}, {sb};")
        k.e(f"cvt.u64.u32 {t64}, {tmp};")
        k.e(f"add.u64 {xrow}, {xrow}, {t64};")
        k.e(f"add.u64 {orow}, {orow}, {t64};")
        k.e(f"add.u64 {t64}, {t64}, {t64};")
        k.e(f"add.u64 {pg}, {pg}, {t64};")
    sA, sG, sX, pitch = u("sA"), u("sG"), u("sX"), u("pitch")
    k.comment(f"dynamic shared memory: a[C] (f32), gamma[C] (f32), then the x tile: n rows of C bf16, each")
    k.comment(f"followed by {ST_MMA_PAD} bytes")
    k.e(f"mov.u32 {sA}, st_dyn;")
    k.e(f"mad.lo.u32 {sG}, {m}, {V * 4}, {sA};")
    k.e(f"mad.lo.u32 {sX}, {sb}, 2, {sG};")
    k.e(f"add.u32 {pitch}, {sb}, {ST_MMA_PAD};")
    cpb = u("cpbar")
    k.e(f"mov.u32 {cpb}, cpbar;")
    k.comment("cpbar: one arrival (thread 0, with the tile's byte count) and the bulk copies' complete_tx;")
    k.comment("initialised by thread 0 before barrier 0")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra INIT_END;")
    k.e(f"mbarrier.init.shared::cta.b64 [{cpb}], 1;")
    k.e("fence.mbarrier_init.release.cluster;")
    k.label("INIT_END")
    k.e("barrier.sync 0;")
    k.comment(f"bulk copies (cp.async.bulk, complete_tx on cpbar): lane 0 of data warp w copies stream rows")
    k.comment(f"w, w + {NW}, ... (sb bytes each) and warp 0 also gamma (2 sb bytes). Round 10: the 16-byte")
    k.comment("cp.async loop over the rows issued one copy per row every ~190 ns per thread (globaltimer stamps,")
    k.comment("T = 1, 4-CTA clusters: 6.4 us to issue 20 KB)")
    k.e(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.e(f"@{pr} bra CP_EXPECT_END;")
    tb, st64 = u("tbytes"), p("cpst")
    k.e(f"mul.lo.u32 {tb}, {sb}, {n + 2};")
    k.e(f"mbarrier.arrive.expect_tx.shared::cta.b64 {st64}, [{cpb}], {tb};")
    k.label("CP_EXPECT_END")
    k.e(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.e(f"@{pr} bra CP_END;")
    k.e(f"setp.ne.u32 {pr}, {lane}, 0;")
    k.e(f"@{pr} bra CP_END;")
    k.e(f"setp.ne.u32 {pr}, {warp}, 0;")
    k.e(f"@{pr} bra CPG_END;")
    gb = u("gbytes")
    k.e(f"add.u32 {gb}, {sb}, {sb};")
    k.e(f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{sG}], [{pg}], {gb}, [{cpb}];")
    k.label("CPG_END")
    ii, src, dst = u("ii"), p("src"), u("dst")
    k.e(f"mov.u32 {ii}, {warp};")
    k.e(f"mul.wide.u32 {src}, {warp}, {cbytes};")
    k.e(f"add.u64 {src}, {src}, {xrow};")
    k.e(f"mad.lo.u32 {dst}, {warp}, {pitch}, {sX};")
    cbw, pw8 = p("cbw"), u("pitchw")
    k.e(f"mul.wide.u32 {cbw}, {cbytes}, {NW};")
    k.e(f"mul.lo.u32 {pw8}, {pitch}, {NW};")
    k.label("CP_ROW")
    k.e(f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {sb}, [{cpb}];")
    k.e(f"add.u64 {src}, {src}, {cbw};")
    k.e(f"add.u32 {dst}, {dst}, {pw8};")
    k.e(f"add.u32 {ii}, {ii}, {NW};")
    k.e(f"setp.lt.u32 {pr}, {ii}, {n};")
    k.e(f"@{pr} bra CP_ROW;")
    k.label("CP_END")
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers",
                                [f"warp {cw}: h_post and h_res while the copies fly; it joins at the reduction barrier"],
                                hpre_first=False,
                                coef_leave=["barrier.cluster.arrive.release;      // phase 1: the ss exchange",
                                            "barrier.cluster.wait.acquire;",
                                            "barrier.cluster.arrive.release;      // phase 2: exit guard"]
                                if R > 1 else ())
    ss = f("ss")
    k.e(f"mov.f32 {ss}, 0f00000000;")
    k.e(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.e(f"@{pr} bra COEF_BAR;")
    k.comment("data threads: cpbar's phase 0 completes when thread 0 has arrived and every byte has landed")
    static_cp_wait(k, cpb)
    static_phase_a(k, dtype, n, V, tid, q, m, DT, sX, pitch, hp, ss, sA, pr, "tile")
    rr = static_rms(k, ss, lane, warp, pw, sR, NW, inv_c, eps_f,
                    f"barrier 1 (the {DT} data threads): the warp sums; the sum of squares does not wait for the "
                    "Sinkhorn (round 10: 1.6 us of the T = 1 chain when it did)",
                    barrier=f"barrier.sync 1, {DT};", cluster=R, tid=tid)
    k.label("COEF_BAR")
    k.comment("barrier 0 (all threads): a[], and the coefficient warp's h_post and h_res")
    k.e("barrier.sync 0;")
    k.e(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.e(f"@{pr} bra PB_END;")
    g, t2 = u("g"), u("t2")
    k.e(f"shr.u32 {g}, {lane}, 2;")
    k.e(f"and.b32 {t2}, {lane}, 3;")
    k.e(f"shl.b32 {t2}, {t2}, 1;")
    k.comment(f"A = h_res as m16n8k16 fragments, {MT} x {MT} tiles: lane (g, t) holds rows g, g + 8 and columns")
    k.comment("2t, 2t + 1, 2t + 8, 2t + 9 of each; hi = bf16(h), lo = bf16(h - hi) (|h - hi - lo| <= 2^-16 |h|)")
    ra, e0, e1, h0, h1 = p("ra"), f("ae0"), f("ae1"), f("ah0"), f("ah1")
    k.e(f"mad.lo.u32 {tmp}, {g}, {n}, {t2};")
    k.e(f"mul.wide.u32 {ra}, {tmp}, 4;")
    k.e(f"add.u64 {ra}, {ra}, {sS};")
    Ahi = [[[u(f"ah{mt}_{ks}_{r}") for r in range(4)] for ks in range(MT)] for mt in range(MT)]
    Alo = [[[u(f"al{mt}_{ks}_{r}") for r in range(4)] for ks in range(MT)] for mt in range(MT)]
    for mt in range(MT):
        for ks in range(MT):
            for r in range(4):
                off = 4 * ((16 * mt + 8 * (r & 1)) * n + 16 * ks + 8 * (r >> 1))
                k.e(f"ld.shared.v2.f32 {{{e0}, {e1}}}, [{ra}+{off}];")
                k.e(f"cvt.rn.bf16x2.f32 {Ahi[mt][ks][r]}, {e1}, {e0};")
                k.e(f"shl.b32 {h0}, {Ahi[mt][ks][r]}, 16;")
                k.e(f"and.b32 {h1}, {Ahi[mt][ks][r]}, 0xffff0000;")
                k.e(f"sub.f32 {e0}, {e0}, {h0};")
                k.e(f"sub.f32 {e1}, {e1}, {h1};")
                k.e(f"cvt.rn.bf16x2.f32 {Alo[mt][ks][r]}, {e1}, {e0};")
    k.comment("h_post of this lane's output rows g + 8 h + 16 mt")
    rh = p("rh")
    k.e(f"mul.wide.u32 {rh}, {g}, 4;")
    k.e(f"add.u64 {rh}, {rh}, {sH};")
    hq = [[f(f"hq{mt}_{h}") for h in range(2)] for mt in range(MT)]
    for mt in range(MT):
        for h in range(2):
            k.e(f"ld.shared.f32 {hq[mt][h]}, [{rh}+{128 + 4 * (16 * mt + 8 * h)}];")
    xl, ntiles, lr, nt1 = u("xl"), u("ntiles"), u("lr"), u("nt1")
    k.comment(f"ldmatrix row addresses: lane l gives x row (stream) l mod {n} of the 8-channel tile")
    k.e(f"and.b32 {lr}, {lane}, {n - 1};")
    k.e(f"mad.lo.u32 {xl}, {lr}, {pitch}, {sX};")
    k.e(f"shr.u32 {ntiles}, {sb}, 4;")
    og, cb8 = p("og"), p("cb8")
    k.comment("this lane's output: row g of stream-major out (row i + 8 is 8 C bf16 further)")
    k.e(f"mul.wide.u32 {og}, {g}, {cbytes};")
    k.e(f"add.u64 {og}, {og}, {orow};")
    k.e(f"mul.wide.u32 {cb8}, {cbytes}, 8;")
    zero = f("zero")
    k.e(f"mov.f32 {zero}, 0f00000000;")
    k.comment(f"phase B: warp w takes the 8-channel tiles w + {2 * NW} j and w + {NW} + {2 * NW} j (the second")
    k.comment("predicated off past the last tile; its reads clamped to the first's)")
    k.e(f"mov.u32 {it}, {warp};")
    k.label("PB_LOOP")
    k.e(f"setp.ge.u32 {pr}, {it}, {ntiles};")
    k.e(f"@{pr} bra PB_END;")
    k.e(f"add.u32 {nt1}, {it}, {NW};")
    k.e(f"setp.lt.u32 {p1}, {nt1}, {ntiles};")
    k.e(f"selp.b32 {nt1}, {nt1}, {it}, {p1};")
    nts = [it, nt1]
    B = [[u(f"b{x}_{r}") for r in range(2 * MT)] for x in range(2)]
    xa = u("xa")
    for x in range(2):
        k.e(f"mad.lo.u32 {xa}, {nts[x]}, 16, {xl};")
        shape = "x4" if MT == 2 else "x2"
        k.e(f"ldmatrix.sync.aligned.m8n8.{shape}.trans.shared.b16 {{{', '.join(B[x])}}}, [{xa}];")
    k.comment("one accumulator chain per (tile, m-tile): hi then lo of each k-step (a fixed order)")
    acc = {}
    for x in range(2):
        for mt in range(MT):
            d = [f(f"c{x}{mt}_{r}") for r in range(4)]
            acc[x, mt] = d
            first = True
            for ks in range(MT):
                for A in (Ahi, Alo):
                    cin = ", ".join([zero] * 4) if first else ", ".join(d)
                    first = False
                    k.e(f"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {{{', '.join(d)}}}, "
                        f"{{{', '.join(A[mt][ks])}}}, {{{B[x][2 * ks]}, {B[x][2 * ks + 1]}}}, {{{cin}}};")
    ch, aa, ga, oa, w = u("ch"), u("aa"), u("ga"), p("oa"), u("w")
    av, gv, yv, vv = [f(f"ya{i}") for i in range(2)], [f(f"yg{i}") for i in range(2)], [f(f"y{i}") for i in range(2)], \
        [f(f"v{i}") for i in range(2)]
    for x in range(2):
        if x:
            k.e(f"@!{p1} bra PB_NEXT;")
        k.comment(f"tile {x}: channels 8 nt + 2t, + 1; y = a gamma r; out = H x (hi + lo) + h_post y")
        k.e(f"mad.lo.u32 {ch}, {nts[x]}, 8, {t2};")
        k.e(f"mad.lo.u32 {aa}, {ch}, 4, {sA};")
        k.e(f"ld.shared.v2.f32 {{{av[0]}, {av[1]}}}, [{aa}];")
        k.e(f"mad.lo.u32 {ga}, {ch}, 4, {sG};")
        k.e(f"ld.shared.v2.f32 {{{gv[0]}, {gv[1]}}}, [{ga}];")
        for i in range(2):
            k.e(f"mul.f32 {yv[i]}, {av[i]}, {gv[i]};")
            k.e(f"mul.f32 {yv[i]}, {yv[i]}, {rr};")
        k.e(f"mad.wide.u32 {oa}, {ch}, 2, {og};")
        for mt in range(MT):
            for h in range(2):
                for i in range(2):
                    k.e(f"fma.rn.f32 {vv[i]}, {hq[mt][h]}, {yv[i]}, {acc[x, mt][2 * h + i]};")
                k.e(f"cvt.rn.bf16x2.f32 {w}, {vv[1]}, {vv[0]};")
                k.e(f"st.global.b32 [{oa}], {w};")
                if (mt, h) != (MT - 1, 1):
                    k.e(f"add.u64 {oa}, {oa}, {cb8};")
    k.label("PB_NEXT")
    k.e(f"add.u32 {it}, {it}, {2 * NW};")
    k.e("bra.uni PB_LOOP;")
    k.label("PB_END")
    if R > 1:
        k.e("barrier.cluster.wait.acquire;")
    k.e("ret;")
    return name, f""".visible .entry {name}(
    .param .align 8 .b8 args[96]
)
.reqntid {NT}, 1, 1
{f".reqnctapercluster {R}, 1, 1{chr(10)}" if R > 1 else ""}.maxnreg {ST_MMA_MAXNREG}
{{
    .shared .align 16 .f32 ss_res[{n * n}];
    .shared .align 16 .f32 ss_h[96];
    .shared .align 16 .f32 ss_red[{NT // 32}];
    .shared .align 8 .b64 cpbar;
{"    .shared .align 4 .f32 ss_cl;" + chr(10) if R > 1 else ""}{k.body()}
}}
"""


def write_static():
    out = [PROLOGUE, """
// ==============================================================================================
// static layer (MATH.md "Static layer", the mHC.cu parity layer), sm_90a. Written by gen_forward.py.
//   h_pre = sigma(H_pre), h_post = 2 sigma(H_post), h_res = Sinkhorn_paper(H_res), shared by all
//   tokens and computed on the device from the logits (no host read):
//   a = sum_i h_pre[i] x[i];  y = a gamma / sqrt(mean(a^2) + eps_f);
//   out[i] = sum_j h_res[i][j] x[j] + h_post[i] y
// mhc_static_* (every n; the kernel for n >= 16 and for C beyond static_cl's tile): persistent
//   CTAs (grid = min(T, resident CTAs)) taking tokens t = ctaid, ctaid + nctaid, ... Per token:
//   phase A computes a[c] for chunks of V = min(8, 64/n) channels into shared memory (C floats,
//   dynamic) and the sum of squares, reduced deterministically (butterflies, then the data warps
//   in order); phase B re-reads x (L1/L2) and writes every stream. h_pre is computed by every
//   thread (registers).
//   Rounds 6-8: the prologue runs in an extra coefficient warp (CTA = 4 data warps + 1; 8 + 1 for
//   n >= 16), so the data warps start on the first token at once and the phase-A barrier of the
//   first token publishes h_post and h_res. n <= 4: lane 0 alone, S in n*n registers; n >= 8: the
//   scaling-vector form S = diag(r) K diag(c), K = exp(Z - colmax) (the Paper's divisions
//   rearranged), lane j holding column j and row j of K, r_j and c_j; each half step publishes
//   the vector it reads in ss_h and every lane reads it back by broadcast 16-byte loads (n/4
//   loads per dot product; round 10, H100 n = 32: 20 iterations ~8 us with n shfl.idx per dot
//   product, ~0.8 us now). Every reciprocal of the prologue is rcp.approx + one Newton step
//   (h_pre's sigmoids too).
// Register plan: x n*V, a/y/acc V each, h_pre and h_post n each; h_res in registers for n <= 2,
//   else read row by row from shared memory (broadcast 16-byte loads).
// Bytes: HBM floor = 2 T n C esize (x read once, out written once).
//
// mhc_static_cl_* (n <= 8, selected for every T where the tile fits 100 KiB): one CTA per token
//   (grid = T), 4 data warps + the coefficient warp. The data warps copy the token's n stream rows
//   to shared memory by cp.async.cg (16-byte units), so the whole row is in flight at once while
//   the coefficient warp runs; once the mbarrier cpbar has seen every data thread's copies land
//   (cp.async.mbarrier.arrive.noinc; it replaced a named barrier of the data warps, which left
//   racecheck reporting a RAW hazard on ss_red that the SASS did not show), phase A reads the tile into a[] (shared) and the sum of squares, barrier 0 (all warps) also
//   publishes h_post and h_res, phase B reads x and a[] from shared memory: x is read from HBM
//   once. Dynamic shared memory: a[C] f32 then x[n][C]; StaticArgs.pad = C/V.
//   A channel-split cluster version for n = 16, 32 (R = 2, 4 CTAs per token, sum of squares over
//   DSMEM) on FMAs measured 2-4x slower than the persistent kernel (n^2 FMAs per channel, a
//   Sinkhorn per CTA); on tensor cores it is mhc_static_mma_cl* below.
//
// mhc_static_mma_* (bf16, n = 16, 32; round 10): static_cl's shape on tensor cores. One token per
//   CTA (mhc_static_mma_*) or per cluster of 2 / 4 CTAs (_cl2_, _cl4_: CTA r owns C/R channels;
//   the sum of squares goes through DSMEM, ss_cl, added in rank order) so that few tokens still
//   spread over the SMs (T <= 24: 4 CTAs per token, <= 66: 2, then 1: measured per T, see
//   ST_MMA_TOKENS). 8 data warps + the coefficient warp. Lane 0 of each data warp copies stream
//   rows (and warp 0 gamma) to shared memory by cp.async.bulk, complete_tx on one mbarrier (16
//   bytes of padding after each row, so the 8 rows of an ldmatrix hit 8 bank groups); phase A as
//   static_cl; the sum of squares is reduced by the data warps alone (barrier 1) and, for
//   clusters, exchanged while the coefficient warp still runs the Sinkhorn; barrier 0 then
//   publishes h_res and h_post; phase B: out = H X + h_post y with H X on mma.sync m16n8k16
//   (A = h_res as bf16 hi + lo fragments, |h - hi - lo| <= 2^-16 |h|; B = the x tile by
//   ldmatrix.trans; one f32 accumulator chain per tile and m-tile, hi then lo of each k-step), a
//   warp taking two 8-channel tiles per step. The persistent kernel spent n^2 = 1024 FMAs per
//   channel (2048 FMAs and 256 shared loads per thread and 2 channels).
//   Registers: 96 (.maxnreg: two 9-warp CTAs per SM), no spills; h_pre is computed after the
//   coefficient warp's branch so its n registers are not live across the Sinkhorn.
// Measured (H100, round 10, bf16, C = 1280, copy 2970-2990 GB/s; us back-to-back / graph;
//   persistent kernel before): n = 32 T = 1 8.7 / 8.4 (~20.5), T = 32 11.5 / 11.0 (20.3 / 19.9),
//   T = 64 14.2 / 12.8 (20.9 / 20.7), T = 128 19.4 (21.0), T = 1024 114 (48% of copy), T = 8192
//   809 (55%). globaltimer stamps of one CTA at T = 1 (4-CTA clusters; a timing build of the same
//   phases): copies issued 0.6 us,
//   landed 0.9, phase A done 2.0, the coefficient warp's K built 1.1 and Sinkhorn done 5.2 (20
//   iterations, ~0.2 us each: the chain that bounds T <= 64), mma phase 6.0 -> 7.3.
//
// mhc_static_pr_* (n <= 8, T >= 1024, C up to what a[] and 3 tiles fit in 160 KiB): PERSISTENT
//   CTAs (as many as the SMs hold) walk the tokens ctaid, ctaid + nctaid, ...; each token's n
//   rows stream into a ring of 3 stages by cp.async, one mbarrier per stage fed by
//   cp.async.mbarrier.arrive.noinc (the data threads' 128 arrivals complete a phase; token k
//   waits for phase k / 3 mod 2 of stage k mod 3). The coefficient warp computes h_post and
//   h_res once per CTA, arrives on st_cfbar and leaves; the data warps wait on it before their
//   first phase B. Per token: phase A (a[] and the warp sums), barrier 1 (128 data threads), rms,
//   phase B from the stage and a[], barrier 1, refill of the stage with the token 3 ahead.
// Measured (H100, 2026-11-22, bf16, copy 2994 GB/s; us stream / back-to-back): (2560,1280,4)
//   25.7 -> 23.8 / 22.5 (73.6% of copy; static_cl before), (1280,2560,4) 27.0 -> 25.7 / 24.4
//   (68.1%). At these sizes each CTA sees ~3 tokens (6 CTAs per SM by shared memory): the
//   Sinkhorn once per CTA and fewer CTA launches are the gain; launch and ramp (~3 us) remain.
// Measured (H200, round 8, bf16, copy 4187 GB/s; us stream / back-to-back; round 5 before):
//   (320,1280,4) 12.3 -> 9.0 / 7.5; (512,1920,4) 13.7 -> 10.7 / 9.2; (1280,2560,4) 23.9 -> 23.5 /
//   22.3; (2560,1280,4) 26.0 -> 23.8 / 22.7 (static_cl); (128,1280,8) 13.6 -> 9.6 / 8.3;
//   (256,1280,8) 14.8 -> 10.3 / 8.9 (static_cl); (32,1280,32) 38.4 -> 23.0 / 21.6; (64,1280,32)
//   38.7 -> 23.3 / 21.8; (128,1280,32) 39.3 -> 23.8 / 22.3 (persistent). Launch yardstick of the
//   run: 4.3 us back-to-back, so the 1.5x-launch goal (~5.7 us) is still missed (by 1.8-3.5 us at
//   n <= 8, ~16 us at n = 32, where n^2 = 1024 FMAs per channel and the 32 x 32 Sinkhorn remain).
""" + STATIC_ARGS + "\n", ".extern .shared .align 16 .f32 ss_a[];\n"]
    for dtype in DTYPES:
        for n in NS:
            nm, txt = static_kernel(dtype, n)
            out.append(txt)
    out.append(".extern .shared .align 16 .b8 st_dyn[];\n")
    for dtype in DTYPES:
        for n in ST_CL_NS:
            nm, txt = static_cl_kernel(dtype, n)
            out.append(txt)
    for dtype in DTYPES:
        for n in ST_CL_NS:
            nm, txt = static_pr_kernel(dtype, n)
            out.append(txt)
    for R in ST_MMA_CLUSTERS:
        for n in ST_MMA_NS:
            nm, txt = static_mma_kernel(n, R)
            out.append(txt)
    return "\n".join(out)


# ----------------------------------------------------------------------------------------------
# expand

EXPAND_ARGS = """// struct ExpandArgs (48 bytes):
//   +0 e  +8 out (u64)  +16 e_stride  +24 out_stride (u64 bytes)
//   +32 items (T * C/8)  +36 chunks (C/8)  +40 cbytes  +44 n   (u32)"""


def expand_kernel(dtype):
    es = ESIZE[dtype]
    name = f"mhc_expand_{dtype}"
    k = K()
    p = lambda s: k.r("b64", s)
    u = lambda s: k.r("b32", s)
    pe, po, se, so = p("pe"), p("po"), p("se"), p("so")
    items, chunks, cbytes, n = u("items"), u("chunks"), u("cbytes"), u("n")
    for reg, off, ty in [(pe, 0, "u64"), (po, 8, "u64"), (se, 16, "u64"), (so, 24, "u64"), (items, 32, "u32"),
                         (chunks, 36, "u32"), (cbytes, 40, "u32"), (n, 44, "u32")]:
        k.e(f"ld.param.{ty} {reg}, [args+{off}];")
    k.grid_dependency()
    gid, tid, ctaid, ntid, t, ch, tmp, j = (u(s) for s in ["gid", "tid", "ctaid", "ntid", "t", "ch", "tmp", "j"])
    pr = k.r("pred", "p")
    k.e(f"mov.u32 {tid}, %tid.x;")
    k.e(f"mov.u32 {ctaid}, %ctaid.x;")
    k.e(f"mov.u32 {ntid}, %ntid.x;")
    k.e(f"mad.lo.u32 {gid}, {ctaid}, {ntid}, {tid};")
    k.e(f"setp.ge.u32 {pr}, {gid}, {items};")
    k.e(f"@{pr} bra DONE;")
    k.e(f"div.u32 {t}, {gid}, {chunks};")
    k.e(f"mul.lo.u32 {tmp}, {t}, {chunks};")
    k.e(f"sub.u32 {ch}, {gid}, {tmp};")
    t64, cb, ae, ao, cb64 = p("t64"), p("cb"), p("ae"), p("ao"), p("cb64")
    k.e(f"cvt.u64.u32 {t64}, {t};")
    k.e(f"mul.wide.u32 {cb}, {ch}, {8 * es};")
    k.e(f"mad.lo.u64 {ae}, {t64}, {se}, {pe};")
    k.e(f"add.u64 {ae}, {ae}, {cb};")
    k.e(f"mad.lo.u64 {ao}, {t64}, {so}, {po};")
    k.e(f"add.u64 {ao}, {ao}, {cb};")
    k.e(f"cvt.u64.u32 {cb64}, {cbytes};")
    words = [k.r("b32", f"w{i}") for i in range(2 * es)]
    k.comment("8 channels = 16 (bf16) or 32 (f32) bytes, copied bit-exactly to each stream")
    for i in range(0, len(words), 4):
        k.e(f"ld.global.nc.v4.b32 {{{', '.join(words[i:i + 4])}}}, [{ae}+{4 * i}];")
    k.e(f"mov.u32 {j}, 0;")
    k.label("LOOP")
    for i in range(0, len(words), 4):
        k.e(f"st.global.v4.b32 [{ao}+{4 * i}], {{{', '.join(words[i:i + 4])}}};")
    k.e(f"add.u64 {ao}, {ao}, {cb64};")
    k.e(f"add.u32 {j}, {j}, 1;")
    k.e(f"setp.lt.u32 {pr}, {j}, {n};")
    k.e(f"@{pr} bra LOOP;")
    return plain_entry(name, k, 48)


def write_expand():
    out = [PROLOGUE, """
// ==============================================================================================
// expand (MATH.md "Expand", first layer): x[t][i][c] = e[t][c] for every stream i. sm_90a.
// Tile: one thread = one token x 8 channels; it loads 16/32 bytes once and stores them n times
//   (n is a run-time argument: a store loop, nothing to specialise). Grid = ceil(T C/8 / 256).
// Register plan: 4 (bf16) or 8 (f32) data words, addresses. Bytes: T C esize (1 + n).
// Measured (H200, round 2): T=8192 n=4 C=4096 bf16 87 us = 91% of copy; T=1 3.0 us back-to-back,
//   1.2 us in a graph.
""" + EXPAND_ARGS + "\n"]
    for dtype in DTYPES:
        out.append(expand_kernel(dtype)[1])
    return "\n".join(out)


def generate(experiments):
    """post.ptx, head.ptx, static.ptx and expand.ptx (no experiments)."""
    return {"asm/ptx/sm90/post.ptx": write_post(), "asm/ptx/sm90/head.ptx": write_head(),
            "asm/ptx/sm90/static.ptx": write_static(), "asm/ptx/sm90/expand.ptx": write_expand()}


# ----------------------------------------------------------------------------------------------
# the catalogue rows of these kernels (asm/catalogue.toml, section "forward")

ST_MAX_C = 32768  # static (persistent): a[C] f32 in dynamic shared memory


def catalogue_rows():
    out = []
    big = (8, 8, 1048576)
    gd = "grid_dependency"

    def entry(id_, stage, forms, file, entry_, dtypes, ns, tokens, tile, threads, why, launch, geom, c=big,
              prefer=None, cap=None, params=None, xp=1, wave_us=None):
        out.append(catalogue.row(id_, stage, forms, "sm_90a", f"asm/bin/sm90/{file}.cubin", entry_, dtypes, ns, c,
                                 tokens, tile, threads, why, launch, prefer_tokens=prefer, register_cap=cap,
                                 x_passes=xp if xp != 1 else None, wave_us=wave_us, params=params,
                                 geometry=geom))

    G = catalogue.geometry
    tmax = 2147483647
    post_p = "PostArgs { x, f, h_post, h_res, out: u64, x_stride, f_stride, out_stride: u64, items, chunks, cbytes, pad: u32 } (80 B)"
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in NS:
                entry(f"post_{form}_{dtype}_n{n}", "post", [form], "post", f"mhc_post_{form}_{dtype}_n{n}", [dtype], [n],
                      (1, tmax), 1, 128,
                      f"post for n={n}: one thread per token x {vchan(n)} channels over all n streams, all loads first",
                      "post", G(channels_per_thread=vchan(n), traits=[gd]),
                      prefer=(65, tmax) if n <= 8 else (1, POST_MMA_TMIN[n] - 1) if n in POST_MMA_NS and dtype == "bf16"
                      else None, params=post_p)
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in [1, 2, 4, 8]:
                entry(f"post_{form}_{dtype}_n{n}_decode", "post", [form], "post", f"mhc_post_{form}_{dtype}_n{n}_v2",
                      [dtype], [n], (1, 64), 1, 128,
                      "post for T <= 64: 2 channels per thread, 4x the CTAs of the general kernel, every load first "
                      "(H100 bf16 n = 4 in a graph, vs the general kernel: T = 17 1.72 / 2.15 us, 32 2.08 / 2.43, "
                      "64 2.91 / 3.10 at C = 4096)", "post", G(channels_per_thread=2, traits=[gd]), params=post_p)
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in LK_NS:
                entry(f"post_{form}_{dtype}_n{n}_lk", "post", [form], "post", f"mhc_post_{form}_{dtype}_n{n}_lk",
                      [dtype], [n], (1, LK_TMAX), 1, 128,
                      f"post decode for n={n}: n threads per (token, 8-byte chunk), lane k writes output stream "
                      f"k, the lanes share each x load (H100 n=32 T=1 / 16: 3.2 / 8.6 us vs 6.7 / 12.1)", "post",
                      G(channels_per_thread=LK_BYTES // ESIZE[dtype], threads_per_item=n, traits=[gd]),
                      params=post_p + " (items = T * C / V, V = 16 / esize; n threads per item)", wave_us=0.05)
    for form in ["v4", "paper"]:
        for n in POST_MMA_NS:
            entry(f"post_mma_{form}_bf16_n{n}", "post", [form], "post", f"mhc_post_mma_{form}_bf16_n{n}", ["bf16"], [n],
                  (POST_MMA_TMIN[n], tmax), 1, POST_MMA_THREADS,
                  f"post for n={n} on tensor cores: one CTA per token, x rows in shared memory by bulk copies, "
                  f"out = h_res x (mma.sync bf16, h_res split hi + lo, f32 accumulation) + h_post f", "post",
                  G(channels_per_thread=8, dynamic_shared_max=POST_MMA_SMEM, row_pad=POST_MMA_PAD,
                    traits=[gd, "tile_in_shared"]),
                  c=(8, 8, post_mma_cmax(n)),
                  params=post_p + " (items = T: one CTA per token; chunks = C / 8)")
    head_p = "HeadArgs { x, phi, scale, base, out: u64, x_stride, out_stride: u64, tokens, cbytes, kchunks, cchunks: u32, eps_norm, eps_hc, inv_k: f32, pad: u32 } (88 B)"
    for dtype in DTYPES:
        for n in CL_NS:
            v1, tt, v2 = head_tiles(n)
            if n in CLD_NS:
                entry(f"head_cld_{dtype}_n{n}", "head", ["v4", "paper"], "head", f"mhc_head_cld_{dtype}_n{n}", [dtype],
                      [n], (1, CLD_TMAX), tt, CL_THREADS,
                      f"head decode for n={n}: the cluster kernel with phi's slice also copied to shared memory up "
                      f"front (one memory round trip per CTA)", "head",
                      G(channels_per_thread=cl_v1(n), cluster=CL, dynamic_shared_max=CLD_SMEM,
                        traits=[gd, "tile_in_shared", "phi_in_shared"]),
                      c=(8, 64, head_cl_cmax(n, dtype, True)),
                      cap=128 if n <= 4 else 168, params=head_p + " (kchunks = chunks per CTA, cchunks = C/V1)",
                      wave_us=0.4)
            entry(f"head_cl_{dtype}_n{n}", "head", ["v4", "paper"], "head", f"mhc_head_cl_{dtype}_n{n}", [dtype], [n],
                  (1, CL_TMAX[n]), tt, CL_THREADS,
                  f"head for n={n}: a cluster of {CL} CTAs per {tt}-token tile, CTA r owns channel range r (its x "
                  f"copied to shared memory by cp.async, read once), partials combined in rank order through "
                  f"distributed shared memory", "head",
                  G(channels_per_thread=cl_v1(n), cluster=CL, dynamic_shared_max=CL_SMEM, traits=[gd, "tile_in_shared"]),
                  c=(8, 64, head_cl_cmax(n, dtype)),
                  cap=128 if n <= 4 else 168, params=head_p + " (kchunks = chunks per CTA, cchunks = C/V1)",
                  wave_us=0.5)
            if n in CL16_NS:
                entry(f"head_cl16_{dtype}_n{n}", "head", ["v4", "paper"], "head", f"mhc_head_cl16_{dtype}_n{n}",
                      [dtype], [n], (1, CLD_TMAX), tt, CL_THREADS,
                      f"head decode for n={n}: the cluster kernel on 16 CTAs (non-portable cluster): phi's "
                      f"{n * n * 4} bytes per channel is what the cluster pulls", "head",
                      G(channels_per_thread=cl_v1(n), cluster=16, dynamic_shared_max=CL_SMEM,
                        traits=[gd, "tile_in_shared"]),
                      c=(8, 64, head_cl_cmax(n, dtype, cl=16)),
                      cap=168, params=head_p + " (kchunks = chunks per CTA, cchunks = C/V1)", wave_us=0.4)
    for cl, tt in PC_SHAPES:
        for dtype in DTYPES:
            for n in PC_NS:
                entry(f"head_pc{cl}_{dtype}_n{n}", "head", ["v4", "paper"], "head", f"mhc_head_pc{cl}_{dtype}_n{n}",
                      [dtype], [n], (PC_TMIN, tmax), tt, PC_THREADS,
                      f"head for n={n}, many tokens: persistent clusters of {cl} CTAs walk the {tt}-token tiles, "
                      f"phi in registers for the whole kernel, x through a ring of {PC_STAGES} shared-memory stages "
                      f"(cp.async), partials pushed to every CTA (st.async + mbarrier)", "head",
                      G(channels_per_thread=16 // ESIZE[dtype], cluster=cl, dynamic_shared_max=PC_SMEM,
                        traits=["persistent", gd, "tile_in_shared"]),
                      c=(8, 64, head_pc_cmax(n, dtype, cl, tt)),
                      params=head_p + " (kchunks = 16-byte chunks per CTA, cchunks = C/V, V = 16 / esize)",
                      wave_us=0.05 if cl == 4 else 0.1)
    for dtype in DTYPES:
        for n in NS:
            v1, tt, v2 = head_tiles(n)
            entry(f"head_{dtype}_n{n}", "head", ["v4", "paper"], "head", f"mhc_head_{dtype}_n{n}", [dtype], [n],
                  (1, tmax), tt, THREADS,
                  f"head for n={n}: {tt} tokens per CTA share each phi chunk (registers), deterministic CTA reduction",
                  "head", G(channels_per_thread=vchan(n), traits=[gd]), cap=128, params=head_p)
    static_p = "StaticArgs { x, h_pre_logits, h_post_logits, h_res_logits, gamma, out: u64, x_stride, out_stride: u64, tokens, cbytes, cchunks, iters: u32, eps_hc, eps_f, inv_c: f32, pad: u32 } (96 B)"
    for dtype in DTYPES:
        for n in NS:
            entry(f"static_{dtype}_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_{dtype}_n{n}", [dtype], [n],
                  (1, tmax), 1, st_threads(n)[1],
                  f"static layer for n={n}: persistent CTAs, coefficients from the logits once per CTA, a[C] in shared memory",
                  "static", G(channels_per_thread=vchan(n), dynamic_shared_max=4 * ST_MAX_C, traits=[gd]),
                  c=(8, 8, ST_MAX_C), params=static_p)
    for dtype in DTYPES:
        for n in ST_CL_NS:
            entry(f"static_pr_{dtype}_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_pr_{dtype}_n{n}",
                  [dtype], [n], (ST_PR_TMIN, tmax), 1, st_threads(n)[1],
                  f"static layer for n={n}, many tokens: resident CTAs walk the tokens, x through a ring of "
                  f"{ST_PR_STAGES} shared-memory stages (cp.async, one mbarrier each), h_post and h_res once per CTA",
                  "static", G(channels_per_thread=vchan(n), dynamic_shared_max=ST_PR_SMEM,
                              traits=["token_ring", gd, "tile_in_shared"]),
                  c=(8, 8, static_pr_cmax(n, dtype)),
                  params=static_p + " (pad = C/V)", wave_us=0.05)
    for dtype in DTYPES:
        for n in ST_CL_NS:
            entry(f"static_cl_{dtype}_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_cl_{dtype}_n{n}", [dtype],
                  [n], (1, tmax), 1, st_threads(n)[1],
                  f"static layer for n={n}: one token per CTA, x copied to shared memory by cp.async once, a "
                  "coefficient warp computes h_post and h_res during the copy", "static",
                  G(channels_per_thread=vchan(n), dynamic_shared_max=ST_CL_SMEM, traits=[gd, "tile_in_shared"]),
                  c=(8, 8, static_cl_cmax(n, dtype)),
                  params=static_p + " (pad = chunks per CTA)", wave_us=0.5)
    for R in ST_MMA_CLUSTERS:
        for n in ST_MMA_NS:
            cl = "" if R == 1 else f"cl{R}_"
            per = "one token per CTA" if R == 1 else f"a cluster of {R} CTAs per token (C/{R} channels each)"
            entry(f"static_mma_{cl}bf16_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_mma_{cl}bf16_n{n}",
                  ["bf16"], [n], ST_MMA_TOKENS[R], 1, st_threads(n)[1],
                  f"static layer for n={n}: {per}, x copied to shared memory by cp.async once, h_res x on tensor "
                  "cores (mma.sync bf16, h_res split hi + lo, f32 accumulation)", "static",
                  G(channels_per_thread=vchan(n), cluster=R if R > 1 else None, dynamic_shared_max=ST_MMA_SMEM,
                    row_pad=ST_MMA_PAD, traits=[gd, "tile_in_shared", "gamma_in_shared"]),
                  c=(8 * R, 8 * R, static_mma_cmax(n) * R // (8 * R) * (8 * R)),
                  params=static_p + " (pad = C/V/cluster)", wave_us=ST_MMA_WAVE_US[R])
    for dtype in DTYPES:
        entry(f"expand_{dtype}", "expand", ["v4", "paper"], "expand", f"mhc_expand_{dtype}", [dtype],
              list(range(1, 33)), (1, tmax), 1, 256,
              "expand: 8 channels per thread loaded once, stored n times", "expand",
              G(channels_per_thread=8, traits=[gd]), xp=0,
              params="ExpandArgs { e, out: u64, e_stride, out_stride: u64, items, chunks, cbytes, n: u32 } (48 B)")
    return out
