"""post (docs/math.md "post", the residual merge), sm_90a: asm/ptx/sm90/post.ptx.

Each kernel is specialised on n (1, 2, 4, 8, 16, 32), the storage dtype and the formulation, so
that every per-stream value lives in a named register and every loop over streams is unrolled."""

from .abi import POST, RUST_MIRROR
from . import catalogue, resmix
from .blocks import k_mbarrier_wait
from .ptx import Kernel, entry, plain_entry, prologue
from .rows import load_f32_run, load_row, store_row
from .shapes import DTYPES, ESIZE, NS, TMAX, vchan


POST_ARGS = "\n".join([
    f"// struct PostArgs ({POST.size} bytes, {RUST_MIRROR}):",
    "//   " + POST.header_line(["x", "f", "h_post", "h_res", "out", "          (u64 device addresses)"]),
    "//   " + POST.header_line(["x_stride", "f_stride", "out_stride", "          (u64, bytes between token rows)"]),
    "//   " + POST.header_line(["items", "chunks", "cbytes", "pad", "   (u32)"])])


def post_params(k):
    """The PostArgs loads (post.ptx header) and the grid dependency: px, pf, php, phr, po, sx, sf,
    so (u64), items, chunks, cbytes (u32)."""
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    regs = {"x": p("px"), "f": p("pf"), "h_post": p("php"), "h_res": p("phr"), "out": p("po"), "x_stride": p("sx"),
            "f_stride": p("sf"), "out_stride": p("so"), "items": u("items"), "chunks": u("chunks"),
            "cbytes": u("cbytes")}
    POST.ld_params(regs, emit=k.ins)
    k.grid_dependency()
    return list(regs.values())


def post_rows(k, t64, cb, x, f, o, xname, oname):
    """Addresses of token t64's chunk (byte offset cb) in the x, f and out rows; x, f, o are
    (base, row stride) register pairs."""
    regs = (k.reg("b64", xname), k.reg("b64", "af"), k.reg("b64", oname))
    for reg, (base, stride) in zip(regs, (x, f, o)):
        k.ins(f"mad.lo.u64 {reg}, {t64}, {stride}, {base};")
        k.ins(f"add.u64 {reg}, {reg}, {cb};")
    return regs


def post_thread_id(k, tid, ctaid, ntid, gid):
    """gid = the thread's index in the grid."""
    k.ins(f"mov.u32 {tid}, %tid.x;")
    k.ins(f"mov.u32 {ctaid}, %ctaid.x;")
    k.ins(f"mov.u32 {ntid}, %ntid.x;")
    k.ins(f"mad.lo.u32 {gid}, {ctaid}, {ntid}, {tid};")


def post_token_chunk(k, item, chunks, t, ch, tmp, chunk_bytes, cbytes):
    """Item -> token t and chunk ch (item = t chunks + ch); returns t64, the chunk's byte offset
    cb and cbytes as u64."""
    p = lambda s: k.reg("b64", s)
    k.ins(f"div.u32 {t}, {item}, {chunks};")
    k.ins(f"mul.lo.u32 {tmp}, {t}, {chunks};")
    k.ins(f"sub.u32 {ch}, {item}, {tmp};")
    t64, cb, cb64 = p("t64"), p("cb"), p("cb64")
    k.ins(f"cvt.u64.u32 {t64}, {t};")
    k.ins(f"mul.wide.u32 {cb}, {ch}, {chunk_bytes};")
    k.ins(f"cvt.u64.u32 {cb64}, {cbytes};")
    return t64, cb, cb64


# Largest n whose bf16 entries issue every load of a chunk, all n^2 coefficients of h_res
# included, before the first FMA: `.minnctapersm 1`, as the decode kernels (left to fit full
# occupancy, ptxas sank V4's load of row j of h_res to stream j, a wait in the middle of the
# math), and Paper's n outputs formed before the first store (a row stored first held the next
# rows' loads behind it). The same bits; on an H200 (2026-11-29, docs/kernels/post.md) V4
# 0.3-6.6% and Paper 2.5-10.4% faster at T = 128..8192. Above n = 4 Paper's n*V accumulators
# would not fit beside the n^2 coefficients; f32 entries (twice the bytes in flight) were 5%
# slower with it.
LOADS_FIRST_MAX_N = 4


def post_kernel(form, dtype, n, V=None):
    name = f"mhc_post_{form}_{dtype}_n{n}" + (f"_v{V}" if V else "")
    V = V or vchan(n)
    es = ESIZE[dtype]
    k = Kernel()
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    px, pf, php, phr, po, sx, sf, so, items, chunks, cbytes = post_params(k)
    gid, tid, ctaid, ntid, t, ch, tmp = u("gid"), u("tid"), u("ctaid"), u("ntid"), u("t"), u("ch"), u("tmp")
    pr = k.reg("pred", "p")
    k.comment("one thread = one token t and one chunk of V channels, all n streams")
    post_thread_id(k, tid, ctaid, ntid, gid)
    k.ins(f"setp.ge.u32 {pr}, {gid}, {items};")
    k.ins(f"@{pr} bra DONE;")
    t64, cb, cb64 = post_token_chunk(k, gid, chunks, t, ch, tmp, V * es, cbytes)
    ax, af, ao = post_rows(k, t64, cb, (px, sx), (pf, sf), (po, so), "ax0", "ao0")
    ahp, ahr = p("ahp"), p("ahr")
    k.ins(f"mad.lo.u64 {ahp}, {t64}, {n * 4}, {php};")
    k.ins(f"mad.lo.u64 {ahr}, {t64}, {n * n * 4}, {phr};")
    k.comment(f"issue every load of the chunk first: n={n} x vectors + f ({(n + 1) * V * es} bytes in flight)")
    axs = [ax]
    for j in range(1, n):
        a = p(f"ax{j}")
        k.ins(f"add.u64 {a}, {axs[-1]}, {cb64};")
        axs.append(a)
    xs = [load_row(k, dtype, f"x{j}", axs[j], V) for j in range(n)]
    fv = load_row(k, dtype, "f", af, V)
    hp = load_f32_run(k, "hp", ahp, n)
    aos = [ao]
    for j in range(1, n):
        a = p(f"ao{j}")
        k.ins(f"add.u64 {a}, {aos[-1]}, {cb64};")
        aos.append(a)
    loads_first = dtype == "bf16" and n <= LOADS_FIRST_MAX_N
    def walk_streams(coeffs_of_stream):
        """n*V accumulators from h_post f, then x[j] for j = 0..n-1 into every output with the
        coefficients coeffs_of_stream(j)[k], then the n stores."""
        acc = [[k.reg("f32", f"acc{kk}_{v}") for v in range(V)] for kk in range(n)]
        for kk in range(n):
            for v in range(V):
                k.ins(f"mul.f32 {acc[kk][v]}, {hp[kk]}, {fv[v]};")
        for j in range(n):
            cj = coeffs_of_stream(j)
            for kk in range(n):
                for v in range(V):
                    k.ins(f"fma.rn.f32 {acc[kk][v]}, {cj[kk]}, {xs[j][v]}, {acc[kk][v]};")
        for kk in range(n):
            store_row(k, dtype, acc[kk], aos[kk], tag=f"o{kk}")

    if form == "v4":
        k.comment("V4: out[k] = h_post[k] f + sum_j h_res[j][k] x[j]; row j of h_res is contiguous,")
        k.comment("so accumulate all n outputs while walking j (n*V accumulators)")
        walk_streams(lambda j: load_f32_run(k, f"r{j}_", ahr, n, off=4 * j * n))
    else:
        k.comment("Paper: out[i] = h_post[i] f + sum_j h_res[i][j] x[j]; row i of h_res is contiguous")
        if loads_first:
            # every row first, then walk x[j] as V4 does (each output's operations still in the
            # order j = 0..n-1), the stores last: no row's store holds the next rows' loads
            rows = [load_f32_run(k, f"r{i}_", ahr, n, off=4 * i * n) for i in range(n)]
            walk_streams(lambda j: [rows[i][j] for i in range(n)])
        else:
            for i in range(n):
                rr = load_f32_run(k, f"r{i}_", ahr, n, off=4 * i * n)
                acc = [k.reg("f32", f"acc{i}_{v}") for v in range(V)]
                for v in range(V):
                    k.ins(f"mul.f32 {acc[v]}, {hp[i]}, {fv[v]};")
                for j in range(n):
                    for v in range(V):
                        k.ins(f"fma.rn.f32 {acc[v]}, {rr[j]}, {xs[j][v]}, {acc[v]};")
                store_row(k, dtype, acc, aos[i], tag=f"o{i}")
    # the decode variants (T <= 16, `_v2`) are latency-bound: one wave, every load up front;
    # the bf16 n <= 4 entries likewise (LOADS_FIRST_MAX_N)
    return plain_entry(name, k, POST.size, latency_bound=name.endswith("_v2") or loads_first)


LK_NS = [16, 32]  # post "lk" variants: lane = output stream
LK_GROUP = 8  # streams whose x chunk and coefficient loads are written together (ptxas hoists them all)
# Largest T of the _lk variants (H100, bf16, n = 32, C = 1280, us back-to-back). Against the V = 2
# kernel: T = 1 / 4 / 16 3.2 / 5.2 / 8.6 vs 6.7 / 11.2 / 12.1, but T = 64 / 8192 19.3 / 1888 vs
# 13.6 / 1222: every lane unpacks the same x words, so with every SM busy it is issue-bound.
LK_TMAX = 16
# Bytes of x per thread and stream. At 32 registers (ptxas's full-occupancy fit) 8 bytes kept a
# group's 8 x loads in flight, 16 issued them as the FMAs consumed them (T = 1 / 4 / 16 4.8 / 8.3
# / 9.4 us). With `.minnctapersm 1` (latency_bound: 113 registers, every load of all n streams
# before the first FMA) 8 bytes stays faster than 16 (H100 n = 32 in a graph: T = 1 / 4 1.57 /
# 2.96 vs 1.91 / 3.61 us; 2.68 / 4.74 at 32 registers).
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
    k = Kernel()
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    px, pf, php, phr, po, sx, sf, so, items, chunks, cbytes = post_params(k)
    gid, tid, ctaid, ntid, item, kk, t, ch, tmp = (u(x) for x in ["gid", "tid", "ctaid", "ntid", "item", "kk", "t",
                                                                   "ch", "tmp"])
    pr = k.reg("pred", "p")
    k.comment(f"thread = (item = token x chunk of {V} channels, output stream k = gid % {n})")
    post_thread_id(k, tid, ctaid, ntid, gid)
    k.ins(f"shr.u32 {item}, {gid}, {lg};")
    k.ins(f"and.b32 {kk}, {gid}, {n - 1};")
    k.ins(f"setp.ge.u32 {pr}, {item}, {items};")
    k.ins(f"@{pr} bra DONE;")
    t64, cb, cb64 = post_token_chunk(k, item, chunks, t, ch, tmp, LK_BYTES, cbytes)
    k64 = p("k64")
    k.ins(f"cvt.u64.u32 {k64}, {kk};")
    ax, af, ao = post_rows(k, t64, cb, (px, sx), (pf, sf), (po, so), "ax", "ao")
    ahp, ahr = p("ahp"), p("ahr")
    k.ins(f"mad.lo.u64 {ao}, {k64}, {cb64}, {ao};          // out[t][k][chunk]")
    k.ins(f"mad.lo.u64 {ahp}, {t64}, {n * 4}, {php};")
    k.ins(f"mad.lo.u64 {ahp}, {k64}, 4, {ahp};")
    k.ins(f"mad.lo.u64 {ahr}, {t64}, {n * n * 4}, {phr};")
    if form == "v4":
        k.ins(f"mad.lo.u64 {ahr}, {k64}, 4, {ahr};             // h_res[t][j][k]: + 4 n j")
        hstep = 4 * n
    else:
        k.ins(f"mad.lo.u64 {ahr}, {k64}, {4 * n}, {ahr};       // h_res[t][k][j]: + 4 j")
        hstep = 4
    fv = load_row(k, dtype, "f", af, V)
    hp = k.reg("f32", "hp")
    k.ins(f"ld.global.nc.f32 {hp}, [{ahp}];")
    acc = [k.reg("f32", f"acc{v}") for v in range(V)]
    for v in range(V):
        k.ins(f"mul.f32 {acc[v]}, {hp}, {fv[v]};")
    for g in range(0, n, LK_GROUP):
        k.comment(f"streams {g}..{g + LK_GROUP - 1}: every load first, then the FMAs in stream order")
        xs, hs = [], []
        for j in range(g, g + LK_GROUP):
            xs.append(load_row(k, dtype, f"x{j - g}", ax, V, off=0))
            h = k.reg("f32", f"h{j - g}")
            k.ins(f"ld.global.nc.f32 {h}, [{ahr}+{hstep * j}];")
            hs.append(h)
            k.ins(f"add.u64 {ax}, {ax}, {cb64};")
        for i in range(LK_GROUP):
            for v in range(V):
                k.ins(f"fma.rn.f32 {acc[v]}, {hs[i]}, {xs[i][v]}, {acc[v]};")
    store_row(k, dtype, acc, ao, tag="o")
    return plain_entry(name, k, POST.size, latency_bound=True)


POST_MMA_NS = [16, 32]
POST_MMA_THREADS = 256
POST_MMA_SMEM = 220 * 1024  # the x tile's bytes at most (dynamic shared memory)
POST_MMA_PAD = 16  # bytes after each x row (conflict-free ldmatrix, as static_mma)
POST_MMA_MAXNREG = 96  # 2 CTAs of 8 warps per SM
# Smallest T the plan gives the tensor-core post: one CTA per token leaves SMs idle below ~2 waves'
# worth (H100 bf16 n = 32 C = 1280, us per call, V = 2 kernel / this one: T = 48 16.5 / 19.9, 64
# 17.0 / 20.5, 80 23.6 / 21.2, 128 28.1 / 23.3, 256 49.3 / 29.9). n = 16 (C = 1280, V4; the V = 4
# kernel moves 2x the channels per thread there): T = 256 20.7 / 21.6, 384 23.5 / 24.8, 448
# 29.5 / 26.4, 512 31.2 / 28.2, 1024 52.0 / 49.3, 8192 370.9 / 294.3.
POST_MMA_TMIN = {16: 400, 32: 65}


def post_mma_cmax(n):
    """Largest C whose padded x tile (n rows of 2 C + POST_MMA_PAD bytes) fits POST_MMA_SMEM."""
    cmax = (POST_MMA_SMEM - n * POST_MMA_PAD) // (2 * n)
    return cmax - cmax % 8


class PostMmaKernel:
    """post for bf16, n = 16 / 32 on tensor cores: one CTA per token; the token's x (n rows of C
    bf16) lands in shared memory by bulk copies (rows padded by POST_MMA_PAD bytes), h_res and
    h_post through shared memory; out = A x + h_post f with A = h_res (Paper) or h_res^T (V4) as
    m16n8k16 fragments split into bf16 hi + lo (|h - hi - lo| <= 2^-16 |h|; x is exact in bf16),
    f32 accumulation in a fixed order (hi then lo per k-step), B = 8-channel tiles of x by
    ldmatrix.trans. (An FMA form costs n^2 FMAs per channel, h_res re-read by every thread.)
    PostArgs as the other post kernels, with items = T (one CTA per token) and chunks = C / 8 (the
    8-channel tiles)."""

    def __init__(self, form, n):
        self.form, self.n = form, n
        self.MT = n // 16
        self.NW = POST_MMA_THREADS // 32
        self.k = k = Kernel()
        (self.px, self.pf, self.php, self.phr, self.po, self.sx, self.sf, self.so, self.items, self.chunks,
         self.cbytes) = post_params(k)
        self.tid, self.lane, self.warp, self.tok, self.tmp, self.it = (
            self.u(x) for x in ["tid", "lane", "warp", "tok", "tmp", "it"])
        self.pr, self.p1 = k.reg("pred", "p"), k.reg("pred", "p1")

    def u(self, s):
        return self.k.reg("b32", s)

    def p(self, s):
        return self.k.reg("b64", s)

    def f(self, s):
        return self.k.reg("f32", s)

    def token_rows(self):
        k, p = self.k, self.p
        k.ins(f"mov.u32 {self.tid}, %tid.x;")
        k.ins(f"and.b32 {self.lane}, {self.tid}, 31;")
        k.ins(f"shr.u32 {self.warp}, {self.tid}, 5;")
        k.ins(f"mov.u32 {self.tok}, %ctaid.x;")
        self.t64, self.xrow, self.frow, self.orow = t64, xrow, frow, orow = p("t64"), p("xrow"), p("frow"), p("orow")
        k.ins(f"cvt.u64.u32 {t64}, {self.tok};")
        k.ins(f"mad.lo.u64 {xrow}, {t64}, {self.sx}, {self.px};")
        k.ins(f"mad.lo.u64 {frow}, {t64}, {self.sf}, {self.pf};")
        k.ins(f"mad.lo.u64 {orow}, {t64}, {self.so}, {self.po};")

    def copy_tile(self):
        """The bulk copies of the token's n rows into the tile (complete_tx on cpbar)."""
        k, u, p, pr, n, cbytes = self.k, self.u, self.p, self.pr, self.n, self.cbytes
        self.sX, self.pitch, self.cpb = sX, pitch, cpb = u("sX"), u("pitch"), u("cpbar")
        k.comment(f"dynamic shared memory: the x tile, n rows of C bf16 each followed by {POST_MMA_PAD} bytes")
        k.ins(f"mov.u32 {sX}, pm_dyn;")
        k.ins(f"add.u32 {pitch}, {cbytes}, {POST_MMA_PAD};")
        k.ins(f"mov.u32 {cpb}, pm_cpbar;")
        resmix.bulk_barrier_init(k, cpb, self.tid, pr)
        resmix.bulk_expect(k, cpb, self.tid, u("tbytes"), cbytes, n, pr)
        k.comment(f"lane 0 of warp w bulk-copies stream rows w, w + {self.NW}, ... (cbytes each)")
        k.ins(f"setp.ne.u32 {pr}, {self.lane}, 0;")
        k.ins(f"@{pr} bra CP_END;")
        regs = u("ii"), p("src"), u("dst"), p("cbw"), u("pitchw")
        resmix.bulk_rows(k, n, self.NW, self.warp, self.xrow, cbytes, pitch, sX, cbytes, cpb, pr, regs)

    def coefficients_to_shared(self):
        """h_res and h_post of the token into shared memory, one float4 per thread."""
        k, n, pr, tid = self.k, self.n, self.pr, self.tid
        k.comment(f"h_res ({n * n} f32) and h_post ({n}) -> shared memory, one float4 per thread, while the rows fly")
        ga, sa = self.p("ga"), self.u("sa")
        v4 = [self.f(f"hv{i}") for i in range(4)]
        for count, src, dst, label in ((n * n, self.phr, "pm_hres", "HR_END"), (n, self.php, "pm_hpost", "HP_END")):
            k.ins(f"setp.ge.u32 {pr}, {tid}, {count // 4};")
            k.ins(f"@{pr} bra {label};")
            k.ins(f"mad.lo.u64 {ga}, {self.t64}, {count * 4}, {src};")
            k.ins(f"mad.wide.u32 {ga}, {tid}, 16, {ga};")
            k.ins(f"ld.global.nc.v4.f32 {{{', '.join(v4)}}}, [{ga}];")
            k.ins(f"mov.u32 {sa}, {dst};")
            k.ins(f"mad.lo.u32 {sa}, {tid}, 16, {sa};")
            k.ins(f"st.shared.v4.f32 [{sa}], {{{', '.join(v4)}}};")
            k.label(label)
        k.ins("barrier.sync 0;")

    def fragments(self):
        """A (hi, lo) fragments, the lane's h_post values and its tile / output addresses."""
        k, n, MT, u, f, tmp = self.k, self.n, self.MT, self.u, self.f, self.tmp
        self.g, self.t2 = g, t2 = u("g"), u("t2")
        resmix.lane_group(k, self.lane, g, t2)
        what = "h_res" if self.form == "paper" else "h_res^T (V4: out[k] = sum_j h_res[j][k] x[j])"
        k.comment(f"A = {what} as m16n8k16 fragments, {MT} x {MT} tiles: lane (g, t) holds rows g, g + 8 and")
        k.comment("columns 2t, 2t + 1, 2t + 8, 2t + 9 of each; hi = bf16(a), lo = bf16(a - hi)")
        e0, e1, h0, h1, ra = f("ae0"), f("ae1"), f("ah0"), f("ah1"), u("ra")
        k.ins(f"mov.u32 {ra}, pm_hres;")
        if self.form == "paper":
            k.ins(f"mad.lo.u32 {tmp}, {g}, {n}, {t2};")      # element (row g, column 2t)
        else:
            k.ins(f"mad.lo.u32 {tmp}, {t2}, {n}, {g};")      # A[g][2t] = h_res[2t][g]
        k.ins(f"mad.lo.u32 {ra}, {tmp}, 4, {ra};")
        self.Ahi, self.Alo = resmix.hres_fragments(k, n, MT, ra, e0, e1, h0, h1, transposed=self.form != "paper")
        k.comment("h_post of this lane's output rows g + 8 h + 16 mt")
        rh = u("rh")
        k.ins(f"mov.u32 {rh}, pm_hpost;")
        k.ins(f"mad.lo.u32 {rh}, {g}, 4, {rh};")
        self.hq = [[f(f"hq{mt}_{h}") for h in range(2)] for mt in range(MT)]
        for mt in range(MT):
            for h in range(2):
                k.ins(f"ld.shared.f32 {self.hq[mt][h]}, [{rh}+{4 * (16 * mt + 8 * h)}];")
        self.xl, lr, self.nt1 = u("xl"), u("lr"), u("nt1")
        resmix.ldmatrix_rows(k, n, self.lane, self.pitch, self.sX, self.xl, lr)
        self.og, self.cb8, self.zero = resmix.out_rows(k, g, self.orow, self.cbytes, "the stream-major out row")

    def tile_loop(self):
        """Phase B: two 8-channel tiles per warp and step, out = A x + h_post f."""
        k, MT, NW, u, p, f, tmp, it = self.k, self.MT, self.NW, self.u, self.p, self.f, self.tmp, self.it
        cpok = k.reg("pred", "cpok")
        k.comment("cpbar's phase 0 completes when thread 0 has arrived and every row has landed")
        k_mbarrier_wait(k, cpok, self.cpb, 0, "CP_WAIT")
        k.comment(f"warp w takes the 8-channel tiles w + {2 * NW} j and w + {NW} + {2 * NW} j (the second")
        k.comment("predicated off past the last tile; its reads clamped to the first's)")
        k.ins(f"mov.u32 {it}, {self.warp};")
        k.label("PB_LOOP")
        nts = resmix.tile_pair(k, it, self.nt1, self.p1, NW, self.chunks, "DONE", self.pr)
        B = [[u(f"b{x}_{r}") for r in range(2 * MT)] for x in range(2)]
        xa = u("xa")
        fw = [u(f"fw{x}") for x in range(2)]
        ch = [u(f"ch{x}") for x in range(2)]
        fa = p("fa")
        for x in range(2):
            k.ins(f"mad.lo.u32 {ch[x]}, {nts[x]}, 8, {self.t2};")
            k.ins(f"mad.wide.u32 {fa}, {ch[x]}, 2, {self.frow};")
            k.ins(f"ld.global.nc.b32 {fw[x]}, [{fa}];            // f[ch], f[ch + 1]")
            k.ins(f"mad.lo.u32 {xa}, {nts[x]}, 16, {self.xl};")
            resmix.ldmatrix_tile(k, MT, B[x], xa)
        k.comment("one accumulator chain per (tile, m-tile): hi then lo of each k-step (a fixed order)")
        acc = resmix.mma_chains(k, MT, B, self.Ahi, self.Alo, self.zero)
        oa, w = p("oa"), u("w")
        fv, vv = [f(f"fv{i}") for i in range(2)], [f(f"v{i}") for i in range(2)]
        for x in range(2):
            if x:
                k.ins(f"@!{self.p1} bra PB_NEXT;")
            k.comment(f"tile {x}: channels ch, ch + 1; out = A x (hi + lo) + h_post f")
            k.ins(f"shl.b32 {tmp}, {fw[x]}, 16;")
            k.ins(f"mov.b32 {fv[0]}, {tmp};")
            k.ins(f"and.b32 {tmp}, {fw[x]}, 0xffff0000;")
            k.ins(f"mov.b32 {fv[1]}, {tmp};")
            k.ins(f"mad.wide.u32 {oa}, {ch[x]}, 2, {self.og};")
            resmix.store_out(k, MT, self.hq, fv, [acc[x, mt] for mt in range(MT)], oa, self.cb8, vv, w)
        k.label("PB_NEXT")
        k.ins(f"add.u32 {it}, {it}, {2 * NW};")
        k.ins("bra.uni PB_LOOP;")
        k.label("DONE")

    def build(self):
        self.token_rows()
        self.copy_tile()
        self.coefficients_to_shared()
        self.fragments()
        self.tile_loop()
        self.k.ins("ret;")
        n = self.n
        name = f"mhc_post_mma_{self.form}_bf16_n{n}"
        return name, entry(name, self.k.body(), POST.size,
                           [f".reqntid {POST_MMA_THREADS}, 1, 1", f".maxnreg {POST_MMA_MAXNREG}"],
                           [f".shared .align 16 .b8 pm_hres[{n * n * 4}];", f".shared .align 16 .b8 pm_hpost[{n * 4}];",
                            ".shared .align 8 .b64 pm_cpbar;"])


def post_mma_kernel(form, n):
    return PostMmaKernel(form, n).build()


def ptx_text():
    out = [prologue("8.8"), """
// ==============================================================================================
// post (docs/math.md "post", the residual merge), sm_90a. Written by python3 -m asm.gen (asm/gen/post.py).
//   V4:    x'[t][k][c] = h_post[t,k] f[t][c] + sum_j h_res[t][j][k] x[t][j][c]
//   Paper: x'[t][i][c] = h_post[t,i] f[t][c] + sum_j h_res[t][i][j] x[t][j][c]
// Tile: one thread = one token x one chunk of V channels (V = min(8, 64/n): 8 for n <= 8, 4 at
//   n = 16, 2 at n = 32) over all n streams; grid = ceil(T * C/V / 128) CTAs of 128 threads.
//   Consecutive threads take consecutive chunks of one token, so each warp's loads and stores
//   of a stream row are contiguous (16-byte vectors for bf16 V = 8 and f32 V = 4/8).
// Register plan: x[j][v] (n*V f32, bf16 widened by a shift), f[v], h_post[n]; V4 keeps n*V
//   accumulators (h_res row j is contiguous in memory: 16-byte coefficient loads), Paper keeps V
//   (row i contiguous), or n*V with its stores last where every load comes first (bf16 n <= 4,
//   .minnctapersm 1). Coefficients are warp-uniform loads (L1 broadcast).
// Bytes: per token (n+1) C esize read + n C esize written + 4(n + n^2) coefficients; the floor
//   is that over the measured copy bandwidth. All loads of a chunk are issued before the first
//   FMA: (n+1) x 16 bytes in flight per thread.
// Measured (H200, copy 4228 GB/s, bf16, docs/kernels/post.md): T=8192 n=4 C=4096 V4
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
// its floor). Measured (H100, copy 2978 GB/s, n = 32, C = 1280, V4, us per call, the V = 2 kernel
// -> this one): T = 256 49.6 -> 29.8, 1024 159.6 -> 93.3, 4096 616.9 -> 333.1, 8192 1226.3 -> 641.5
// (73.2% of copy, 1.36x the floor against 2.62x). 74 registers, no local memory.
.extern .shared .align 128 .b8 pm_dyn[];
""")
    for form in ["v4", "paper"]:
        for n in POST_MMA_NS:
            nm, txt = post_mma_kernel(form, n)
            names.append(nm)
            out.append(txt)
    return "\n".join(out)


def generate(experiments):
    """post.ptx (no experiments)."""
    return {"asm/ptx/sm90/post.ptx": ptx_text()}


def catalogue_rows():
    out, entry = catalogue.sm90_rows()
    big, gd = catalogue.ANY_C, catalogue.GRID_DEPENDENCY

    G = catalogue.geometry
    post_p = POST.oneline()
    for form in ["v4", "paper"]:
        for dtype in DTYPES:
            for n in NS:
                entry(f"post_{form}_{dtype}_n{n}", "post", [form], "post", f"mhc_post_{form}_{dtype}_n{n}", [dtype], [n],
                      (1, TMAX), 1, 128,
                      f"post for n={n}: one thread per token x {vchan(n)} channels over all n streams, all loads first",
                      "post", G(channels_per_thread=vchan(n), traits=[gd]),
                      prefer=(65, TMAX) if n <= 8 else (1, POST_MMA_TMIN[n] - 1) if n in POST_MMA_NS and dtype == "bf16"
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
                  (POST_MMA_TMIN[n], TMAX), 1, POST_MMA_THREADS,
                  f"post for n={n} on tensor cores: one CTA per token, x rows in shared memory by bulk copies, "
                  f"out = h_res x (mma.sync bf16, h_res split hi + lo, f32 accumulation) + h_post f", "post",
                  G(channels_per_thread=8, dynamic_shared_max=POST_MMA_SMEM, row_pad=POST_MMA_PAD,
                    traits=[gd, "tile_in_shared"]),
                  c=(8, 8, post_mma_cmax(n)),
                  params=post_p + " (items = T: one CTA per token; chunks = C / 8)")
    return out
