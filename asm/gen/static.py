"""The static mHC layer (docs/math.md "The static layer", the mHC.cu parity layer), sm_90a:
asm/ptx/sm90/static.ptx. Persistent CTAs (mhc_static_*), one token per CTA with x in shared
memory (mhc_static_cl_*), a token ring (mhc_static_pr_*) and tensor cores (mhc_static_mma_*)."""

from .abi import STATIC
from . import catalogue, resmix, sinkhorn
from .blocks import k_mbarrier_wait, k_sigmoid, k_warp_sum
from .ptx import Kernel, entry, prologue
from .rows import ld_shared_row, load_f32_run, load_row, st_shared_f32, store_row
from .shapes import DTYPES, ESIZE, NS, TMAX, vchan

ST_THREADS = 128  # static (n <= 8): 4 data warps, so that more CTAs (and tokens) are resident per SM
ST_MAX_C = 32768  # static (persistent): a[C] f32 in dynamic shared memory


def st_threads(n):
    """static: (data threads, CTA threads). The data warps take the channel chunks; one more warp
    (the coefficient warp) computes h_post and the Sinkhorn while they load the first token."""
    dt = ST_THREADS if n <= 8 else 256
    return dt, dt + 32


STATIC_ARGS = "\n".join([
    f"// struct StaticArgs ({STATIC.size} bytes):",
    "//   " + STATIC.header_line(["x", "h_pre_logits", "h_post_logits", "h_res_logits", "gamma", "out", "   (u64)"]),
    "//   " + STATIC.header_line(["x_stride", "out_stride", " " * 50 + "(u64 bytes)"]),
    "//   " + STATIC.header_line(["tokens", "cbytes", "cchunks", "iters", " " * 28 + "(u32)"]),
    "//   " + STATIC.header_line(["eps_hc", "eps_f", "inv_c", "pad", " " * 33 + "(f32)"]),
    "// dynamic shared memory: C * 4 bytes (a[c] of the current token)"])


def static_coeffs(k, n, lane, phol, phrl, iters, eps_hc, sS, sH, it, pr, done="COEF_WAIT"):
    """The coefficient warp of the static kernels: h_post = 2 sigma(H_post) into ss_h[32..32+n) and
    h_res = Sinkhorn(H_res) (Paper start and order) into ss_res (row-major); ends by branching to
    COEF_WAIT. n <= 4: lane 0 alone, S in n*n registers. n >= 8: the scaling-vector form
    S = diag(r) K diag(c), K = exp(Z - colmax): lane j holds column j and row j of K and r_j,
    c_j; a column step updates c_j from K[:, j] . r, a row step r_i from
    K[i, :] . c, each preceded by publishing the vector it reads in ss_h (r at floats 0..n-1, c
    at 64..) and read back by broadcast loads. The same divisions as the Paper's, rearranged (f32
    rounding only)."""
    f = lambda s: k.reg("f32", s)
    u = lambda s: k.reg("b32", s)
    p = lambda s: k.reg("b64", s)
    if n <= 4:
        k.comment("n <= 4: lane 0 alone, S in n*n registers (Paper start and order)")
        k.ins(f"setp.ne.u32 {pr}, {lane}, 0;")
        k.ins(f"@{pr} bra {done};")
        zl = load_f32_run(k, "zl", phol, n)
        for i in range(n):
            hq = f(f"hpost_c{i}")
            k_sigmoid(k, hq, zl[i], f"s2_{i}", fast=True)
            k.ins(f"add.f32 {hq}, {hq}, {hq};")
            k.ins(f"st.shared.f32 [{sH}+{128 + 4 * i}], {hq};")
        Z = load_f32_run(k, "z", phrl, n * n)
        S = [[Z[i * n + j] for j in range(n)] for i in range(n)]
        sinkhorn.lane0(k, n, S, eps_hc, it, pr)
        for i in range(n):
            for j in range(n):
                k.ins(f"st.shared.f32 [{sS}+{4 * (i * n + j)}], {S[i][j]};")
        k.ins(f"bra {done};")
        return
    k.comment(f"n = {n}: every lane runs (full-mask shuffles); lane l works on index j = min(l, n-1)")
    j_, la = u("cj"), p("cla")
    k.ins(f"min.u32 {j_}, {lane}, {n - 1};")
    k.ins(f"mul.wide.u32 {la}, {j_}, 4;")
    zl, hpost, a = f("zl"), f("hpost_c"), p("lga")
    k.ins(f"add.u64 {a}, {phol}, {la};")
    k.ins(f"ld.global.nc.f32 {zl}, [{a}];")
    k_sigmoid(k, hpost, zl, "s2", fast=True)
    k.ins(f"add.f32 {hpost}, {hpost}, {hpost};")
    sa = p("sha")
    k.ins(f"add.u64 {sa}, {sH}, {la};")
    k.ins(f"st.shared.f32 [{sa}+128], {hpost};")
    k.comment("column j of Z (stride n) and its max; row j of Z (contiguous)")
    kc = [f(f"kc{i}") for i in range(n)]
    k.ins(f"add.u64 {a}, {phrl}, {la};")
    for i in range(n):
        k.ins(f"ld.global.nc.f32 {kc[i]}, [{a}+{4 * i * n}];")
    ra = p("rowa")
    k.ins(f"mul.wide.u32 {ra}, {j_}, {4 * n};")
    k.ins(f"add.u64 {ra}, {ra}, {phrl};")
    kr = load_f32_run(k, "kr", ra, n)
    oc, orow = sinkhorn.scaling_vectors(k, n, kc, kr, lane, sH, la, eps_hc, it, pr)
    k.comment("lane j < n writes column j: S[i][j] = r_i K[i][j] c_j (r_i fetched from lane i)")
    ca = p("ca")
    k.ins(f"add.u64 {ca}, {sS}, {la};")
    sv = f("sv")
    k.ins(f"setp.lt.u32 {pr}, {lane}, {n};")
    for i in range(n):
        k.ins(f"shfl.sync.idx.b32 {sv}, {orow}, {i}, 0x1f, 0xffffffff;")
        k.ins(f"mul.f32 {sv}, {sv}, {kc[i]};")
        k.ins(f"mul.f32 {sv}, {sv}, {oc};")
        k.ins(f"@{pr} st.shared.f32 [{ca}+{4 * i * n}], {sv};")
    k.ins(f"bra {done};")


def static_premix(k, n, V, hp, xs, ss):
    """Phase A of both static kernels: a[v] = sum_j h_pre[j] x[j][v] and ss += a[v]^2."""
    av = [k.reg("f32", f"a{v}") for v in range(V)]
    for v in range(V):
        k.ins(f"mul.f32 {av[v]}, {hp[0]}, {xs[0][v]};")
    for j in range(1, n):
        for v in range(V):
            k.ins(f"fma.rn.f32 {av[v]}, {hp[j]}, {xs[j][v]}, {av[v]};")
    for v in range(V):
        k.ins(f"fma.rn.f32 {ss}, {av[v]}, {av[v]}, {ss};")
    return av


def static_rms(k, ss, lane, warp, pw, sR, ndw, inv_c, eps_f, barrier_note=None, barrier="barrier.sync 0;",
               cluster=1, tid=None):
    """PA_END of both static kernels: the CTA's sum of squares in a fixed order (butterflies,
    then the ndw data warps through shared memory, barrier 0), returns r = 1/sqrt(mean + eps_f).
    cluster > 1 (static_mma_cl): the CTAs' sums are exchanged through distributed shared memory
    (ss_cl, cluster barrier) and added in rank order, the same bits in every CTA; the caller waits
    on the cluster barrier once more before exiting (the others read its ss_cl)."""
    k.label("PA_END")
    k_warp_sum(k, ss, "ssr")
    k.ins(f"setp.eq.u32 {pw}, {lane}, 0;")
    wa = k.reg("b64", "wa")
    k.ins(f"mul.wide.u32 {wa}, {warp}, 4;")
    k.ins(f"add.u64 {wa}, {wa}, {sR};")
    k.ins(f"@{pw} st.shared.f32 [{wa}], {ss};")
    if barrier_note:
        k.comment(barrier_note)
    k.ins(barrier)
    red = load_f32_run(k, "rw", sR, ndw, space="shared")
    tot, rr = k.reg("f32", "tot"), k.reg("f32", "rinv")
    k.ins(f"mov.f32 {tot}, {red[0]};")
    for w in range(1, ndw):
        k.ins(f"add.f32 {tot}, {tot}, {red[w]};")
    if cluster > 1:
        k.comment(f"the {cluster} CTAs of the token: thread 0 publishes this CTA's sum in ss_cl; after the cluster")
        k.comment("barrier (release / acquire) every thread adds the CTAs' sums in rank order")
        k.ins(f"setp.eq.u32 {pw}, {tid}, 0;")
        cl32, ra, rv = k.reg("b32", "cla32"), k.reg("b32", "clra"), k.reg("f32", "clv")
        k.ins(f"mov.u32 {cl32}, ss_cl;")
        k.ins(f"@{pw} st.shared.f32 [{cl32}], {tot};")
        k.ins("barrier.cluster.arrive.release;")
        k.ins("barrier.cluster.wait.acquire;")
        for r in range(cluster):
            k.ins(f"mapa.shared::cluster.u32 {ra}, {cl32}, {r};")
            k.ins(f"ld.shared::cluster.f32 {tot if r == 0 else rv}, [{ra}];")
            if r:
                k.ins(f"add.f32 {tot}, {tot}, {rv};")
        k.comment("done reading the other CTAs' ss_cl: arrive now, wait before exit")
        k.ins("barrier.cluster.arrive.release;")
    k.comment("r = 1 / sqrt(mean(a^2) + eps_f)")
    k.ins(f"fma.rn.f32 {rr}, {tot}, {inv_c}, {eps_f};")
    k.ins(f"sqrt.rn.f32 {rr}, {rr};")
    k.ins(f"rcp.rn.f32 {rr}, {rr};")
    return rr


def static_y(k, av, gv, rr):
    """Phase B of both static kernels: y = a gamma r for one chunk."""
    yv = [k.reg("f32", f"y{v}") for v in range(len(av))]
    for v in range(len(av)):
        k.ins(f"mul.f32 {yv[v]}, {av[v]}, {gv[v]};")
        k.ins(f"mul.f32 {yv[v]}, {yv[v]}, {rr};")
    return yv


def static_streams(k, dtype, n, V, ho, Rm, sS, xs, yv, oa, cb64):
    """Phase B of both static kernels: every stream out[i] = h_post[i] y + sum_j h_res[i][j] x[j]
    of one chunk, stored at oa[i] (a list of addresses) or at oa stepped by cb64 between
    streams (one register)."""
    for i in range(n):
        Ri = Rm[i] if n <= 2 else load_f32_run(k, f"Rr{i}_", sS, n, off=4 * i * n, space="shared")
        acc = [k.reg("f32", f"acc{v}") for v in range(V)]
        for v in range(V):
            k.ins(f"mul.f32 {acc[v]}, {ho[i]}, {yv[v]};")
        for j in range(n):
            for v in range(V):
                k.ins(f"fma.rn.f32 {acc[v]}, {Ri[j]}, {xs[j][v]}, {acc[v]};")
        store_row(k, dtype, acc, oa[i] if isinstance(oa, list) else oa, tag=f"so{i}")
        if not isinstance(oa, list) and i < n - 1:
            k.ins(f"add.u64 {oa}, {oa}, {cb64};")


def static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr, hpre_note,
                           warp_notes, hpre_first=True, coef_enter=(), coef_leave=()):
    """Every thread: h_pre[j] = sigma(H_pre[j]) in registers (returned); warp cw: h_post and h_res
    into shared memory (static_coeffs); all threads meet again at COEF_WAIT. hpre_first=False
    computes h_pre after COEF_WAIT, so its n registers are not live across the Sinkhorn.
    coef_enter / coef_leave: instructions the coefficient warp runs before / after its work."""

    def hpre():
        k.comment(hpre_note)
        hp = [k.reg("f32", f"hpre{j}") for j in range(n)]
        hl = load_f32_run(k, "hlg", phpl, n)
        for j in range(n):
            k_sigmoid(k, hp[j], hl[j], f"hs{j}", fast=True)
        return hp

    if hpre_first:
        hp = hpre()
    for note in warp_notes:
        k.comment(note)
    k.ins(f"setp.ne.u32 {pr}, {warp}, {cw};")
    k.ins(f"@{pr} bra COEF_WAIT;")
    for line in coef_enter:
        k.ins(line)
    static_coeffs(k, n, lane, phol, phrl, iters, eps_hc, sS, sH, it, pr, done="COEF_DONE" if coef_leave else "COEF_WAIT")
    if coef_leave:
        k.label("COEF_DONE")
        for line in coef_leave:
            k.ins(line)
    k.label("COEF_WAIT")
    return hp if hpre_first else hpre()


def static_kernel(dtype, n):
    # Register caps so that many 128-thread CTAs stay resident (6+ per SM for n <= 4): the
    # per-token chain (load, reduce, barrier, store) is latency-bound, so resident CTAs matter.
    maxnreg = {1: ".maxnreg 64", 2: ".maxnreg 64", 4: ".maxnreg 80", 8: ".maxnreg 128"}.get(n)
    V = vchan(n)
    es = ESIZE[dtype]
    name = f"mhc_static_{dtype}_n{n}"
    k = Kernel()
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    f = lambda s: k.reg("f32", s)
    px, phpl, phol, phrl, pg, po, sx, so = (p(s) for s in ["px", "phpl", "phol", "phrl", "pg", "po", "sx", "so"])
    tokens, cbytes, cchunks, iters = u("tokens"), u("cbytes"), u("cchunks"), u("iters")
    eps_hc, eps_f, inv_c = f("eps_hc"), f("eps_f"), f("inv_c")
    STATIC.ld_params({"x": px, "h_pre_logits": phpl, "h_post_logits": phol, "h_res_logits": phrl, "gamma": pg,
                    "out": po, "x_stride": sx, "out_stride": so, "tokens": tokens, "cbytes": cbytes,
                    "cchunks": cchunks, "iters": iters, "eps_hc": eps_hc, "eps_f": eps_f, "inv_c": inv_c}, emit=k.ins)
    k.grid_dependency()
    tid, lane, warp, q, it, t = u("tid"), u("lane"), u("warp"), u("q"), u("it"), u("t")
    pr, pw = k.reg("pred", "p"), k.reg("pred", "pw")
    k.ins(f"mov.u32 {tid}, %tid.x;")
    k.ins(f"and.b32 {lane}, {tid}, 31;")
    k.ins(f"shr.u32 {warp}, {tid}, 5;")
    sS, sH, sR, sA = p("sS"), p("sH"), p("sR"), p("sA")
    k.ins(f"mov.u64 {sS}, ss_res;")
    k.ins(f"mov.u64 {sH}, ss_h;")
    k.ins(f"mov.u64 {sR}, ss_red;")
    k.ins(f"mov.u64 {sA}, ss_a;")
    DT, NT = st_threads(n)
    cw = DT // 32  # the coefficient warp
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers (phase A needs nothing else)",
                                [f"warps 0..{cw - 1} go to the token loop; warp {cw} computes h_post and h_res "
                                 "(shared by every",
                                 "token) while they load, and publishes them through the first token's phase-A "
                                 "barrier"])
    cb64 = p("cb64")
    k.ins(f"cvt.u64.u32 {cb64}, {cbytes};")
    q0 = u("q0")
    k.comment(f"the data warps take chunks tid, tid + {DT}, ... of every token; the coefficient warp none")
    k.ins(f"setp.lt.u32 {pr}, {tid}, {DT};")
    k.ins(f"selp.b32 {q0}, {tid}, {cchunks}, {pr};")
    k.ins(f"mov.u32 {t}, %ctaid.x;")
    k.label("TOK_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {t}, {tokens};")
    k.ins(f"@{pr} bra TOK_END;")
    t64, xrow, orow = p("t64"), p("xrow"), p("orow")
    k.ins(f"cvt.u64.u32 {t64}, {t};")
    k.ins(f"mad.lo.u64 {xrow}, {t64}, {sx}, {px};")
    k.ins(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    ss = f("ss")
    k.ins(f"mov.f32 {ss}, 0f00000000;")
    k.comment("phase A: a[c] = sum_j h_pre[j] x[j][c] into shared memory, ss = sum_c a^2")
    k.ins(f"mov.u32 {q}, {q0};")
    k.label("PA_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {q}, {cchunks};")
    k.ins(f"@{pr} bra PA_END;")
    co = p("co")
    k.ins(f"mul.wide.u32 {co}, {q}, {V * es};")
    xa = [p(f"xa{j}") for j in range(n)]
    k.ins(f"add.u64 {xa[0]}, {xrow}, {co};")
    for j in range(1, n):
        k.ins(f"add.u64 {xa[j]}, {xa[j - 1]}, {cb64};")
    xs = [load_row(k, dtype, f"x{j}", xa[j], V) for j in range(n)]
    av = static_premix(k, n, V, hp, xs, ss)
    aa = p("aa")
    k.ins(f"mul.wide.u32 {aa}, {q}, {V * 4};")
    k.ins(f"add.u64 {aa}, {aa}, {sA};")
    st_shared_f32(k, av, aa)
    k.ins(f"add.u32 {q}, {q}, {DT};")
    k.ins("bra.uni PA_LOOP;")
    rr = static_rms(k, ss, lane, warp, pw, sR, DT // 32, inv_c, eps_f)
    k.comment("past the barrier: the coefficient warp's h_post and h_res are visible (broadcast loads)")
    ho = load_f32_run(k, "hpost", sH, n, off=128, space="shared")
    if n <= 2:
        R = [load_f32_run(k, f"R{i}_", sS, n, off=4 * i * n, space="shared") for i in range(n)]
    k.comment("phase B: out[i][c] = sum_j h_res[i][j] x[j][c] + h_post[i] a[c] gamma[c] r; x re-read (L1/L2)")
    k.ins(f"mov.u32 {q}, {q0};")
    k.label("PB_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {q}, {cchunks};")
    k.ins(f"@{pr} bra PB_END;")
    k.ins(f"mul.wide.u32 {co}, {q}, {V * es};")
    k.ins(f"add.u64 {xa[0]}, {xrow}, {co};")
    for j in range(1, n):
        k.ins(f"add.u64 {xa[j]}, {xa[j - 1]}, {cb64};")
    xs = [load_row(k, dtype, f"x{j}", xa[j], V) for j in range(n)]
    k.ins(f"mul.wide.u32 {aa}, {q}, {V * 4};")
    ga = p("ga")
    k.ins(f"add.u64 {ga}, {aa}, {pg};")
    k.ins(f"add.u64 {aa}, {aa}, {sA};")
    av = load_f32_run(k, "a", aa, V, space="shared")
    gv = load_f32_run(k, "gm", ga, V)
    yv = static_y(k, av, gv, rr)
    oa = [p(f"oa{i}") for i in range(n)]
    k.ins(f"add.u64 {oa[0]}, {orow}, {co};")
    for i in range(1, n):
        k.ins(f"add.u64 {oa[i]}, {oa[i - 1]}, {cb64};")
    static_streams(k, dtype, n, V, ho, R if n <= 2 else None, sS, xs, yv, oa, cb64)
    k.ins(f"add.u32 {q}, {q}, {DT};")
    k.ins("bra.uni PB_LOOP;")
    k.label("PB_END")
    k.comment("a[] and the warp sums are rewritten by the next token: wait for every reader")
    k.ins("barrier.sync 0;")
    nct = u("nct")
    k.ins(f"mov.u32 {nct}, %nctaid.x;")
    k.ins(f"add.u32 {t}, {t}, {nct};")
    k.ins("bra.uni TOK_LOOP;")
    k.label("TOK_END")
    k.ins("ret;")
    return name, entry(name, k.body(), STATIC.size, [f".reqntid {NT}, 1, 1"] + ([maxnreg] if maxnreg else []),
                       [f".shared .align 16 .f32 ss_res[{n * n}];", ".shared .align 16 .f32 ss_h[96];",
                        f".shared .align 16 .f32 ss_red[{NT // 32}];"])


# static, one token per CTA (n <= 8): x copied to shared memory by cp.async once, the coefficient
# warp overlapping the copy. n = 16, 32 keep the persistent kernel: a channel-split cluster variant
# (R = 2, 4 CTAs per token) measures 2-4x slower there (docs/kernels/static.md).
ST_CL_NS = [1, 2, 4, 8]
ST_CL_SMEM = 100 * 1024


def static_cl_cmax(n, dtype):
    """Largest C whose a[] (f32) and x tile (n streams) fit ST_CL_SMEM."""
    cmax = ST_CL_SMEM // (n * ESIZE[dtype] + 4)
    return cmax - cmax % 8


def static_tile_args(k):
    """The StaticArgs loads of the tile kernels (static_cl, static_pr): pad (+92) = m, the chunks
    of V channels per token."""
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    f = lambda s: k.reg("f32", s)
    px, phpl, phol, phrl, pg, po, sx, so = (p(s) for s in ["px", "phpl", "phol", "phrl", "pg", "po", "sx", "so"])
    tokens, cbytes, cchunks, iters, m = u("tokens"), u("cbytes"), u("cchunks"), u("iters"), u("m")
    eps_hc, eps_f, inv_c = f("eps_hc"), f("eps_f"), f("inv_c")
    STATIC.ld_params({"x": px, "h_pre_logits": phpl, "h_post_logits": phol, "h_res_logits": phrl, "gamma": pg,
                    "out": po, "x_stride": sx, "out_stride": so, "tokens": tokens, "cbytes": cbytes,
                    "cchunks": cchunks, "iters": iters, "eps_hc": eps_hc, "eps_f": eps_f, "inv_c": inv_c, "pad": m}, emit=k.ins)
    k.grid_dependency()
    return px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f, inv_c


def static_tile_rows(k, dtype, n, V, q, base, seg, tag):
    """The n stream rows of chunk q of a token tile at base (streams seg bytes apart), as f32."""
    xa = k.reg("b32", f"{tag}xa")
    k.ins(f"mad.lo.u32 {xa}, {q}, {V * ESIZE[dtype]}, {base};")
    rows = []
    for j in range(n):
        if j:
            k.ins(f"add.u32 {xa}, {xa}, {seg};")
        rows.append(ld_shared_row(k, dtype, xa, V, f"{tag}w{j}_", f"{tag}x{j}_"))
    return rows


def static_phase_a(k, dtype, n, V, tid, q, m, DT, base, seg, hp, ss, sA, pr, what):
    """Phase A of the tile kernels, chunks q = tid, tid + DT, ... < m: a[c] = sum_j h_pre[j] x[j][c]
    from the token tile at base into a[] (sA), ss += a^2; jumps to PA_END when done. Returns the
    a[] address register."""
    k.comment(f"phase A: a[c] = sum_j h_pre[j] x[j][c] ({what}) into a[], ss = sum_c a^2")
    k.ins(f"mov.u32 {q}, {tid};")
    k.label("PA_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {q}, {m};")
    k.ins(f"@{pr} bra PA_END;")
    xs = static_tile_rows(k, dtype, n, V, q, base, seg, "A")
    av = static_premix(k, n, V, hp, xs, ss)
    aa = k.reg("b32", "aa")
    k.ins(f"mad.lo.u32 {aa}, {q}, {V * 4}, {sA};")
    st_shared_f32(k, av, aa)
    k.ins(f"add.u32 {q}, {q}, {DT};")
    k.ins("bra.uni PA_LOOP;")
    return aa


def static_phase_b(k, dtype, n, V, tid, it, q, items, DT, base, seg, aa, sA, pg, rr, ho, Rm, sS, orow, cb64, pr,
                   lo=None):
    """Phase B of the tile kernels, chunks tid, tid + DT, ... < items: out[i][c] = sum_j h_res[i][j]
    x[j][c] + h_post[i] a[c] gamma[c] r from the token tile at base and a[], to the row at orow;
    ends at PB_END. lo = (first chunk, scratch) offsets gamma by a first chunk."""
    k.ins(f"mov.u32 {it}, {tid};")
    k.label("PB_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {it}, {items};")
    k.ins(f"@{pr} bra PB_END;")
    k.ins(f"mov.u32 {q}, {it};")
    xs = static_tile_rows(k, dtype, n, V, q, base, seg, "B")
    k.ins(f"mad.lo.u32 {aa}, {q}, {V * 4}, {sA};")
    av = load_f32_run(k, "ab", aa, V, space="shared")
    ga = k.reg("b64", "ga")
    if lo is not None:
        k.ins(f"add.u32 {lo[1]}, {lo[0]}, {q};")
        k.ins(f"mul.wide.u32 {ga}, {lo[1]}, {V * 4};")
    else:
        k.ins(f"mul.wide.u32 {ga}, {q}, {V * 4};")
    k.ins(f"add.u64 {ga}, {ga}, {pg};")
    gv = load_f32_run(k, "gm", ga, V)
    yv = static_y(k, av, gv, rr)
    oa = k.reg("b64", "oa")
    k.ins(f"mad.wide.u32 {oa}, {q}, {V * ESIZE[dtype]}, {orow};")
    static_streams(k, dtype, n, V, ho, Rm, sS, xs, yv, oa, cb64)
    k.ins(f"add.u32 {it}, {it}, {DT};")
    k.ins("bra.uni PB_LOOP;")
    k.label("PB_END")


def static_copy_rows(k, n, DT, tid, q, units, src, dst, a64, ii, tmp, cb64, seg, pr, tag):
    """The data threads' cp.async of a token's n rows (global src, cb64 bytes apart) into a tile
    (shared dst, seg bytes apart) in 16-byte units q = tid, tid + DT, ... < units; ii counts the
    streams from its current value (0)."""
    k.label(f"{tag}_STREAM")
    k.ins(f"mov.u32 {q}, {tid};")
    k.label(f"{tag}_UNIT")
    k.ins(f"setp.ge.u32 {pr}, {q}, {units};")
    k.ins(f"@{pr} bra {tag}_NEXT;")
    k.ins(f"mul.wide.u32 {a64}, {q}, 16;")
    k.ins(f"add.u64 {a64}, {a64}, {src};")
    k.ins(f"mad.lo.u32 {tmp}, {q}, 16, {dst};")
    k.ins(f"cp.async.cg.shared.global [{tmp}], [{a64}], 16;")
    k.ins(f"add.u32 {q}, {q}, {DT};")
    k.ins(f"bra.uni {tag}_UNIT;")
    k.label(f"{tag}_NEXT")
    k.ins(f"add.u64 {src}, {src}, {cb64};")
    k.ins(f"add.u32 {dst}, {dst}, {seg};")
    k.ins(f"add.u32 {ii}, {ii}, 1;")
    k.ins(f"setp.lt.u32 {pr}, {ii}, {n};")
    k.ins(f"@{pr} bra {tag}_STREAM;")


def static_token_rows(k, tok, px, sx, po, so, cbytes):
    """The shared-memory pointers of the static tile kernels (ss_res, ss_h, ss_red) and token tok's
    x and out rows; returns sS, sH, sR, t64, xrow, orow, cb64 (cbytes as u64)."""
    p = lambda s: k.reg("b64", s)
    sS, sH, sR = p("sS"), p("sH"), p("sR")
    k.ins(f"mov.u64 {sS}, ss_res;")
    k.ins(f"mov.u64 {sH}, ss_h;")
    k.ins(f"mov.u64 {sR}, ss_red;")
    t64, xrow, orow, cb64 = p("t64"), p("xrow"), p("orow"), p("cb64")
    k.ins(f"cvt.u64.u32 {t64}, {tok};")
    k.ins(f"mad.lo.u64 {xrow}, {t64}, {sx}, {px};")
    k.ins(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    k.ins(f"cvt.u64.u32 {cb64}, {cbytes};")
    return sS, sH, sR, t64, xrow, orow, cb64


def static_cpbar_init(k, DT, tid, pr):
    """cpbar (the tile kernels' copy barrier) initialised by thread 0 for the DT data threads'
    arrivals, before barrier 0; returns its address register."""
    cpb = k.reg("b32", "cpbar")
    k.ins(f"mov.u32 {cpb}, cpbar;")
    k.comment(f"cpbar counts the {DT} data threads' copies (cp.async.mbarrier.arrive.noinc): initialised by")
    k.comment("thread 0 before anyone arrives (barrier 0)")
    k.ins(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.ins(f"@{pr} bra INIT_END;")
    k.ins(f"mbarrier.init.shared::cta.b64 [{cpb}], {DT};")
    k.label("INIT_END")
    k.ins("barrier.sync 0;")
    return cpb


def static_cp_wait(k, cpb):
    """Spins until cpbar's phase 0 completes: every data thread's copies have landed."""
    k_mbarrier_wait(k, k.reg("pred", "cpok"), cpb, 0, "CP_WAIT")


def static_cl_kernel(dtype, n):
    V = vchan(n)
    es = ESIZE[dtype]
    R = 1  # CTAs per token (kept in the comments and address arithmetic below)
    DT, NT = st_threads(n)
    cw = DT // 32
    name = f"mhc_static_cl_{dtype}_n{n}"
    k = Kernel()
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    f = lambda s: k.reg("f32", s)
    (px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f,
     inv_c) = static_tile_args(k)
    tid, lane, warp, q, it, tok, rank, lo, tmp = (u(x) for x in ["tid", "lane", "warp", "q", "it", "tok", "rank",
                                                                "lo", "tmp"])
    pr, pw = k.reg("pred", "p"), k.reg("pred", "pw")
    k.ins(f"mov.u32 {tid}, %tid.x;")
    k.ins(f"and.b32 {lane}, {tid}, 31;")
    k.ins(f"shr.u32 {warp}, {tid}, 5;")
    k.ins(f"mov.u32 {rank}, 0;")
    k.ins(f"mov.u32 {tok}, %ctaid.x;")
    k.comment(f"this CTA: token tok, chunks [lo, lo + m) of V={V} channels (m = C/V/{R})")
    k.ins(f"mul.lo.u32 {lo}, {rank}, {m};")
    sS, sH, sR, t64, xrow, orow, cb64 = static_token_rows(k, tok, px, sx, po, so, cbytes)
    k.ins(f"mad.wide.u32 {xrow}, {lo}, {V * es}, {xrow};")
    k.ins(f"mad.wide.u32 {orow}, {lo}, {V * es}, {orow};")
    sA, sX, seg, units = u("sA"), u("sX"), u("seg"), u("units")
    k.comment("dynamic shared memory: a[m V] (f32), then the x tile [n][m V] (storage dtype)")
    k.ins(f"mov.u32 {sA}, st_dyn;")
    k.ins(f"mul.lo.u32 {seg}, {m}, {V * 4};")
    k.ins(f"add.u32 {sX}, {sA}, {seg};")
    k.ins(f"mul.lo.u32 {seg}, {m}, {V * es};")
    k.ins(f"shr.u32 {units}, {seg}, 4;")
    cpb = static_cpbar_init(k, DT, tid, pr)
    k.comment(f"data threads (tid < {DT}): every stream's segment to the tile in 16-byte cp.async units")
    k.ins(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.ins(f"@{pr} bra CP_END;")
    ii, src, dst, a64 = u("ii"), p("src"), u("dst"), p("a64")
    k.ins(f"mov.u32 {ii}, 0;")
    k.ins(f"mov.u64 {src}, {xrow};")
    k.ins(f"mov.u32 {dst}, {sX};")
    static_copy_rows(k, n, DT, tid, q, units, src, dst, a64, ii, tmp, cb64, seg, pr, "CP")
    k.comment("this thread's arrival on cpbar fires when all its copies have landed")
    k.ins(f"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{cpb}];")
    k.label("CP_END")
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers",
                                [f"warp {cw}: h_post and h_res while the copies fly; it joins at the reduction barrier"])
    ss = f("ss")
    k.ins(f"mov.f32 {ss}, 0f00000000;")
    k.ins(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.ins(f"@{pr} bra PA_END;")
    k.comment("data threads: cpbar's phase 0 completes when every data thread's copies have landed: the")
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
    k.ins(f"setp.ge.u32 {pr}, {tid}, {DT};")
    k.ins(f"@{pr} bra PB_END;")
    itemsb = u("itemsb")
    k.ins(f"mov.u32 {itemsb}, {m};")
    static_phase_b(k, dtype, n, V, tid, it, q, itemsb, DT, sX, seg, aa, sA, pg, rr, ho, Rm if n <= 2 else None, sS,
                   orow, cb64, pr, lo=(lo, tmp))
    k.ins("ret;")
    return name, entry(name, k.body(), STATIC.size, [f".reqntid {NT}, 1, 1"] + ([".maxnreg 64"] if n <= 2 else []),
                       [f".shared .align 16 .f32 ss_res[{n * n}];", ".shared .align 16 .f32 ss_h[96];",
                        f".shared .align 16 .f32 ss_red[{NT // 32}];", ".shared .align 8 .b64 cpbar;"])


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
    k = Kernel()
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    f = lambda s: k.reg("f32", s)
    (px, phpl, phol, phrl, pg, po, sx, so, tokens, cbytes, cchunks, iters, m, eps_hc, eps_f,
     inv_c) = static_tile_args(k)
    tid, lane, warp, q, it, tok, tmp, nct = (u(x) for x in ["tid", "lane", "warp", "q", "it", "tok", "tmp", "nct"])
    pr, pw = k.reg("pred", "p"), k.reg("pred", "pw")
    k.ins(f"mov.u32 {tid}, %tid.x;")
    k.ins(f"and.b32 {lane}, {tid}, 31;")
    k.ins(f"shr.u32 {warp}, {tid}, 5;")
    k.ins(f"mov.u32 {nct}, %nctaid.x;")
    sS, sH, sR = p("sS"), p("sH"), p("sR")
    k.ins(f"mov.u64 {sS}, ss_res;")
    k.ins(f"mov.u64 {sH}, ss_h;")
    k.ins(f"mov.u64 {sR}, ss_red;")
    cb64 = p("cb64")
    k.ins(f"cvt.u64.u32 {cb64}, {cbytes};")
    sA, sX, seg, units, tb, mb, cfb = u("sA"), u("sX"), u("seg"), u("units"), u("tbytes"), u("mbar"), u("cfbar")
    k.comment(f"dynamic shared memory: a[m V] (f32), then {S} stages of the token tile [n][m V] (storage dtype)")
    k.ins(f"mov.u32 {sA}, st_dyn;")
    k.ins(f"mul.lo.u32 {seg}, {m}, {V * 4};")
    k.ins(f"add.u32 {sX}, {sA}, {seg};")
    k.ins(f"mul.lo.u32 {seg}, {m}, {V * es};")
    k.ins(f"shr.u32 {units}, {seg}, 4;")
    k.ins(f"mul.lo.u32 {tb}, {seg}, {n};")
    k.ins(f"mov.u32 {mb}, st_mbar;")
    k.ins(f"mov.u32 {cfb}, st_cfbar;")
    k.comment(f"mbarriers: stage j (the {DT} data threads' copies, cp.async.mbarrier.arrive.noinc) and the")
    k.comment("coefficients (the 32 lanes of the coefficient warp); initialised before barrier 0")
    k.ins(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.ins(f"@{pr} bra INIT_END;")
    for j in range(S):
        k.ins(f"mbarrier.init.shared::cta.b64 [{mb}+{8 * j}], {DT};")
    k.ins(f"mbarrier.init.shared::cta.b64 [{cfb}], 32;")
    k.label("INIT_END")
    k.ins("barrier.sync 0;")
    hp = static_hpre_and_coeffs(k, n, warp, cw, lane, phpl, phol, phrl, iters, eps_hc, sS, sH, it, pr,
                                "every thread: h_pre[j] = sigma(H_pre[j]) in registers",
                                [f"warp {cw}: h_post and h_res once, published through st_cfbar; then it leaves"])
    k.ins(f"setp.ne.u32 {pr}, {warp}, {cw};")
    k.ins(f"@{pr} bra DATA;")
    cst = p("cfst")
    k.ins(f"mbarrier.arrive.shared::cta.b64 {cst}, [{cfb}];")
    k.ins("ret;")
    k.label("DATA")

    def issue(t_r, stage_r, tag):
        """The data threads' cp.async of token t_r's rows into stage stage_r, then their arrival on
        the stage's mbarrier (also past the last token: the phase completes, nobody waits)."""
        k.ins(f"setp.ge.u32 {pr}, {t_r}, {tokens};")
        k.ins(f"@{pr} bra {tag}_ARRIVE;")
        t64, src, ds, a64, ii = p("ct64"), p("csrc"), u("cdst"), p("ca64"), u("cii")
        k.ins(f"cvt.u64.u32 {t64}, {t_r};")
        k.ins(f"mad.lo.u64 {src}, {t64}, {sx}, {px};")
        k.ins(f"mad.lo.u32 {ds}, {stage_r}, {tb}, {sX};")
        k.ins(f"mov.u32 {ii}, 0;")
        static_copy_rows(k, n, DT, tid, q, units, src, ds, a64, ii, tmp, cb64, seg, pr, tag)
        k.label(f"{tag}_ARRIVE")
        k.ins(f"mad.lo.u32 {tmp}, {stage_r}, 8, {mb};")
        k.ins(f"cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{tmp}];")

    stage, kk, nt = u("stage"), u("kk"), u("ntok")
    k.comment(f"prologue: tokens ctaid + j nctaid into stages j < {S}")
    k.ins(f"mov.u32 {tok}, %ctaid.x;")
    for j in range(S):
        k.ins(f"mad.lo.u32 {nt}, {nct}, {j}, {tok};")
        k.ins(f"mov.u32 {stage}, {j};")
        issue(nt, stage, f"PRO{j}")
    k.ins(f"mov.u32 {stage}, 0;")
    k.ins(f"mov.u32 {kk}, 0;")
    k.label("TOK_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {tok}, {tokens};")
    k.ins(f"@{pr} bra TOK_END;")
    ok, par, sb = k.reg("pred", "wok"), u("par"), u("sbase")
    k.comment(f"this token's stage is complete: phase (token index / {S}) mod 2 of its mbarrier")
    k.ins(f"div.u32 {par}, {kk}, {S};")
    k.ins(f"and.b32 {par}, {par}, 1;")
    k.ins(f"mad.lo.u32 {tmp}, {stage}, 8, {mb};")
    k_mbarrier_wait(k, ok, tmp, par, "ST_WAIT")
    k.ins(f"mad.lo.u32 {sb}, {stage}, {tb}, {sX};")
    ss = f("ss")
    k.ins(f"mov.f32 {ss}, 0f00000000;")
    aa = static_phase_a(k, dtype, n, V, tid, q, m, DT, sb, seg, hp, ss, sA, pr, "stage")
    rr = static_rms(k, ss, lane, warp, pw, sR, DT // 32, inv_c, eps_f,
                    f"barrier 1 (the {DT} data threads): the warp sums and a[]", barrier=f"barrier.sync 1, {DT};")
    k.comment("h_post and h_res: the coefficient warp's mbarrier (phase 0; complete after the first token)")
    k_mbarrier_wait(k, ok, cfb, 0, "CF_WAIT")
    ho = load_f32_run(k, "hpost", sH, n, off=128, space="shared")
    if n <= 2:
        Rm = [load_f32_run(k, f"R{i}_", sS, n, off=4 * i * n, space="shared") for i in range(n)]
    k.comment("phase B: out[i][c] = sum_j h_res[i][j] x[j][c] + h_post[i] a[c] gamma[c] r (stage, a[])")
    t64, orow = p("t64"), p("orow")
    k.ins(f"cvt.u64.u32 {t64}, {tok};")
    k.ins(f"mad.lo.u64 {orow}, {t64}, {so}, {po};")
    static_phase_b(k, dtype, n, V, tid, it, q, m, DT, sb, seg, aa, sA, pg, rr, ho, Rm if n <= 2 else None, sS,
                   orow, cb64, pr)
    k.comment("the stage, a[] and the warp sums are free once every data thread is here: refill the stage")
    k.ins(f"barrier.sync 1, {DT};")
    k.ins(f"mad.lo.u32 {nt}, {nct}, {S}, {tok};")
    issue(nt, stage, "REFILL")
    k.ins(f"add.u32 {tok}, {tok}, {nct};")
    k.ins(f"add.u32 {kk}, {kk}, 1;")
    k.ins(f"add.u32 {stage}, {stage}, 1;")
    k.ins(f"setp.eq.u32 {pr}, {stage}, {S};")
    k.ins(f"selp.u32 {stage}, 0, {stage}, {pr};")
    k.ins("bra.uni TOK_LOOP;")
    k.label("TOK_END")
    k.ins("ret;")
    return name, entry(name, k.body(), STATIC.size, [f".reqntid {NT}, 1, 1"],
                       [f".shared .align 16 .f32 ss_res[{n * n}];", ".shared .align 16 .f32 ss_h[96];",
                        f".shared .align 16 .f32 ss_red[{NT // 32}];", f".shared .align 8 .b64 st_mbar[{S}];",
                        ".shared .align 8 .b64 st_cfbar;"])



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


class StaticMmaKernel:
    """mhc_static_mma[_cl{R}]_bf16_n{n}: static_cl's shape on tensor cores (header of static.ptx):
    one token per CTA, or per cluster of R CTAs (CTA r owns C/R channels). The token's rows and
    gamma land by bulk copies while the coefficient warp runs; phase A as static_cl; phase B
    out = H x + h_post y with H x on mma.sync (h_res split hi + lo)."""

    def __init__(self, n, R):
        self.n, self.R = n, R
        self.dtype, self.V = "bf16", vchan(n)
        self.DT, self.NT = st_threads(n)
        self.NW = self.DT // 32
        self.MT = n // 16  # 16-row m-tiles of the output streams = 16-deep k-steps of the input streams
        self.k = k = Kernel()
        (self.px, self.phpl, self.phol, self.phrl, self.pg, self.po, self.sx, self.so, self.tokens, self.cbytes,
         self.cchunks, self.iters, self.m, self.eps_hc, self.eps_f, self.inv_c) = static_tile_args(k)
        self.tid, self.lane, self.warp, self.q, self.it, self.tok, self.tmp = (
            self.u(x) for x in ["tid", "lane", "warp", "q", "it", "tok", "tmp"])
        self.pr, self.pw, self.p1 = k.reg("pred", "p"), k.reg("pred", "pw"), k.reg("pred", "p1")

    def u(self, s):
        return self.k.reg("b32", s)

    def p(self, s):
        return self.k.reg("b64", s)

    def f(self, s):
        return self.k.reg("f32", s)

    def token_slice(self):
        """The token (cluster) and this CTA's channel slice: sb bytes of each row from rank sb."""
        k, R, tmp = self.k, self.R, self.tmp
        k.ins(f"mov.u32 {self.tid}, %tid.x;")
        k.ins(f"and.b32 {self.lane}, {self.tid}, 31;")
        k.ins(f"shr.u32 {self.warp}, {self.tid}, 5;")
        self.sb = sb = self.u("sb")
        if R == 1:
            k.ins(f"mov.u32 {self.tok}, %ctaid.x;")
            k.ins(f"mov.u32 {sb}, {self.cbytes};")
        else:
            rank = self.u("rank")
            k.comment(f"a cluster of {R} CTAs per token: CTA r owns channels [r C/{R}, (r + 1) C/{R}) (sb bytes of each row)")
            k.ins(f"mov.u32 {self.tok}, %clusterid.x;")
            k.ins(f"mov.u32 {rank}, %cluster_ctarank;")
            k.ins(f"shr.u32 {sb}, {self.cbytes}, {R.bit_length() - 1};")
        (self.sS, self.sH, self.sR, t64, self.xrow, self.orow,
         self.cb64) = static_token_rows(k, self.tok, self.px, self.sx, self.po, self.so, self.cbytes)
        if R > 1:
            k.ins(f"mul.lo.u32 {tmp}, {rank}, {sb};")
            k.ins(f"cvt.u64.u32 {t64}, {tmp};")
            k.ins(f"add.u64 {self.xrow}, {self.xrow}, {t64};")
            k.ins(f"add.u64 {self.orow}, {self.orow}, {t64};")
            k.ins(f"add.u64 {t64}, {t64}, {t64};")
            k.ins(f"add.u64 {self.pg}, {self.pg}, {t64};")

    def shared_layout(self):
        k, u, sb = self.k, self.u, self.sb
        self.sA, self.sG, self.sX, self.pitch = sA, sG, sX, pitch = u("sA"), u("sG"), u("sX"), u("pitch")
        k.comment("dynamic shared memory: a[C] (f32), gamma[C] (f32), then the x tile: n rows of C bf16, each")
        k.comment(f"followed by {ST_MMA_PAD} bytes")
        k.ins(f"mov.u32 {sA}, st_dyn;")
        k.ins(f"mad.lo.u32 {sG}, {self.m}, {self.V * 4}, {sA};")
        k.ins(f"mad.lo.u32 {sX}, {sb}, 2, {sG};")
        k.ins(f"add.u32 {pitch}, {sb}, {ST_MMA_PAD};")
        self.cpb = cpb = u("cpbar")
        k.ins(f"mov.u32 {cpb}, cpbar;")
        resmix.bulk_barrier_init(k, cpb, self.tid, self.pr)

    def copy_tile(self):
        """Bulk copies of the slice's n rows (lane 0 of each data warp) and of gamma (warp 0)."""
        k, u, p, pr, n, NW, sb, cpb = self.k, self.u, self.p, self.pr, self.n, self.NW, self.sb, self.cpb
        k.comment("bulk copies (cp.async.bulk, complete_tx on cpbar): lane 0 of data warp w copies stream rows")
        k.comment(f"w, w + {NW}, ... (sb bytes each) and warp 0 also gamma (2 sb bytes). A 16-byte cp.async")
        k.comment("loop over the rows issues one copy per row every ~190 ns per thread (globaltimer stamps,")
        k.comment("T = 1, 4-CTA clusters: 6.4 us to send 20 KB)")
        resmix.bulk_expect(k, cpb, self.tid, u("tbytes"), sb, n + 2, pr)
        k.ins(f"setp.ge.u32 {pr}, {self.tid}, {self.DT};")
        k.ins(f"@{pr} bra CP_END;")
        k.ins(f"setp.ne.u32 {pr}, {self.lane}, 0;")
        k.ins(f"@{pr} bra CP_END;")
        k.ins(f"setp.ne.u32 {pr}, {self.warp}, 0;")
        k.ins(f"@{pr} bra CPG_END;")
        gb = u("gbytes")
        k.ins(f"add.u32 {gb}, {sb}, {sb};")
        k.ins(f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{self.sG}], [{self.pg}], {gb}, [{cpb}];")
        k.label("CPG_END")
        ii, src, dst = u("ii"), p("src"), u("dst")
        regs = ii, src, dst, p("cbw"), u("pitchw")
        resmix.bulk_rows(k, n, NW, self.warp, self.xrow, self.cbytes, self.pitch, self.sX, sb, cpb, pr, regs)

    def coefficients_and_phase_a(self):
        """The coefficient warp's h_post / h_res; the data threads' phase A and rms; barrier 0."""
        k, n, R, DT, pr, tid = self.k, self.n, self.R, self.DT, self.pr, self.tid
        hp = static_hpre_and_coeffs(k, n, self.warp, self.NW, self.lane, self.phpl, self.phol, self.phrl, self.iters,
                                    self.eps_hc, self.sS, self.sH, self.it, pr,
                                    "every thread: h_pre[j] = sigma(H_pre[j]) in registers",
                                    [f"warp {self.NW}: h_post and h_res while the copies fly; it joins at the "
                                     "reduction barrier"],
                                    hpre_first=False,
                                    coef_leave=["barrier.cluster.arrive.release;      // phase 1: the ss exchange",
                                                "barrier.cluster.wait.acquire;",
                                                "barrier.cluster.arrive.release;      // phase 2: exit guard"]
                                    if R > 1 else ())
        ss = self.f("ss")
        k.ins(f"mov.f32 {ss}, 0f00000000;")
        k.ins(f"setp.ge.u32 {pr}, {tid}, {DT};")
        k.ins(f"@{pr} bra COEF_BAR;")
        k.comment("data threads: cpbar's phase 0 completes when thread 0 has arrived and every byte has landed")
        static_cp_wait(k, self.cpb)
        static_phase_a(k, self.dtype, n, self.V, tid, self.q, self.m, DT, self.sX, self.pitch, hp, ss, self.sA, pr,
                       "tile")
        self.rr = static_rms(k, ss, self.lane, self.warp, self.pw, self.sR, self.NW, self.inv_c, self.eps_f,
                             f"barrier 1 (the {DT} data threads): the warp sums; the sum of squares does not wait "
                             "for the Sinkhorn (waiting costs 1.6 us of the T = 1 chain)",
                             barrier=f"barrier.sync 1, {DT};", cluster=R, tid=tid)
        k.label("COEF_BAR")
        k.comment("barrier 0 (all threads): a[], and the coefficient warp's h_post and h_res")
        k.ins("barrier.sync 0;")

    def fragments(self):
        """A = h_res (hi, lo) fragments, h_post of the lane's rows, its tile and output addresses."""
        k, n, MT, u, p, f, tmp, pr = self.k, self.n, self.MT, self.u, self.p, self.f, self.tmp, self.pr
        k.ins(f"setp.ge.u32 {pr}, {self.tid}, {self.DT};")
        k.ins(f"@{pr} bra PB_END;")
        self.g, self.t2 = g, t2 = u("g"), u("t2")
        resmix.lane_group(k, self.lane, g, t2)
        k.comment(f"A = h_res as m16n8k16 fragments, {MT} x {MT} tiles: lane (g, t) holds rows g, g + 8 and columns")
        k.comment("2t, 2t + 1, 2t + 8, 2t + 9 of each; hi = bf16(h), lo = bf16(h - hi) (|h - hi - lo| <= 2^-16 |h|)")
        ra, e0, e1, h0, h1 = p("ra"), f("ae0"), f("ae1"), f("ah0"), f("ah1")
        k.ins(f"mad.lo.u32 {tmp}, {g}, {n}, {t2};")
        k.ins(f"mul.wide.u32 {ra}, {tmp}, 4;")
        k.ins(f"add.u64 {ra}, {ra}, {self.sS};")
        self.Ahi, self.Alo = resmix.hres_fragments(k, n, MT, ra, e0, e1, h0, h1)
        k.comment("h_post of this lane's output rows g + 8 h + 16 mt")
        rh = p("rh")
        k.ins(f"mul.wide.u32 {rh}, {g}, 4;")
        k.ins(f"add.u64 {rh}, {rh}, {self.sH};")
        self.hq = [[f(f"hq{mt}_{h}") for h in range(2)] for mt in range(MT)]
        for mt in range(MT):
            for h in range(2):
                k.ins(f"ld.shared.f32 {self.hq[mt][h]}, [{rh}+{128 + 4 * (16 * mt + 8 * h)}];")
        self.xl, self.ntiles, lr, self.nt1 = u("xl"), u("ntiles"), u("lr"), u("nt1")
        resmix.ldmatrix_rows(k, n, self.lane, self.pitch, self.sX, self.xl, lr)
        k.ins(f"shr.u32 {self.ntiles}, {self.sb}, 4;")
        self.og, self.cb8, self.zero = resmix.out_rows(k, g, self.orow, self.cbytes, "stream-major out")

    def tile_loop(self):
        """Phase B: two 8-channel tiles per warp and step, out = H x + h_post y."""
        k, MT, NW, u, p, f, it = self.k, self.MT, self.NW, self.u, self.p, self.f, self.it
        k.comment(f"phase B: warp w takes the 8-channel tiles w + {2 * NW} j and w + {NW} + {2 * NW} j (the second")
        k.comment("predicated off past the last tile; its reads clamped to the first's)")
        k.ins(f"mov.u32 {it}, {self.warp};")
        k.label("PB_LOOP")
        nts = resmix.tile_pair(k, it, self.nt1, self.p1, NW, self.ntiles, "PB_END", self.pr)
        B = [[u(f"b{x}_{r}") for r in range(2 * MT)] for x in range(2)]
        xa = u("xa")
        for x in range(2):
            k.ins(f"mad.lo.u32 {xa}, {nts[x]}, 16, {self.xl};")
            resmix.ldmatrix_tile(k, MT, B[x], xa)
        k.comment("one accumulator chain per (tile, m-tile): hi then lo of each k-step (a fixed order)")
        acc = resmix.mma_chains(k, MT, B, self.Ahi, self.Alo, self.zero)
        ch, aa, ga, oa, w = u("ch"), u("aa"), u("ga"), p("oa"), u("w")
        av, gv = [f(f"ya{i}") for i in range(2)], [f(f"yg{i}") for i in range(2)]
        yv, vv = [f(f"y{i}") for i in range(2)], [f(f"v{i}") for i in range(2)]
        for x in range(2):
            if x:
                k.ins(f"@!{self.p1} bra PB_NEXT;")
            k.comment(f"tile {x}: channels 8 nt + 2t, + 1; y = a gamma r; out = H x (hi + lo) + h_post y")
            k.ins(f"mad.lo.u32 {ch}, {nts[x]}, 8, {self.t2};")
            k.ins(f"mad.lo.u32 {aa}, {ch}, 4, {self.sA};")
            k.ins(f"ld.shared.v2.f32 {{{av[0]}, {av[1]}}}, [{aa}];")
            k.ins(f"mad.lo.u32 {ga}, {ch}, 4, {self.sG};")
            k.ins(f"ld.shared.v2.f32 {{{gv[0]}, {gv[1]}}}, [{ga}];")
            for i in range(2):
                k.ins(f"mul.f32 {yv[i]}, {av[i]}, {gv[i]};")
                k.ins(f"mul.f32 {yv[i]}, {yv[i]}, {self.rr};")
            k.ins(f"mad.wide.u32 {oa}, {ch}, 2, {self.og};")
            resmix.store_out(k, MT, self.hq, yv, [acc[x, mt] for mt in range(MT)], oa, self.cb8, vv, w)
        k.label("PB_NEXT")
        k.ins(f"add.u32 {it}, {it}, {2 * NW};")
        k.ins("bra.uni PB_LOOP;")
        k.label("PB_END")

    def build(self):
        k, n, R = self.k, self.n, self.R
        self.token_slice()
        self.shared_layout()
        self.copy_tile()
        self.coefficients_and_phase_a()
        self.fragments()
        self.tile_loop()
        if R > 1:
            k.ins("barrier.cluster.wait.acquire;")
        k.ins("ret;")
        name = f"mhc_static_mma_bf16_n{n}" if R == 1 else f"mhc_static_mma_cl{R}_bf16_n{n}"
        cluster = [f".reqnctapercluster {R}, 1, 1"] if R > 1 else []
        return name, entry(name, k.body(), STATIC.size,
                           [f".reqntid {self.NT}, 1, 1"] + cluster + [f".maxnreg {ST_MMA_MAXNREG}"],
                           [f".shared .align 16 .f32 ss_res[{n * n}];", ".shared .align 16 .f32 ss_h[96];",
                            f".shared .align 16 .f32 ss_red[{self.NT // 32}];", ".shared .align 8 .b64 cpbar;"]
                           + ([".shared .align 4 .f32 ss_cl;"] if R > 1 else []))


def static_mma_kernel(n, R=1):
    return StaticMmaKernel(n, R).build()


def ptx_text():
    out = [prologue("8.8"), """
// ==============================================================================================
// static layer (docs/math.md "The static layer", the mHC.cu parity layer), sm_90a. Written by python3 -m asm.gen (asm/gen/static.py).
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
//   The prologue runs in an extra coefficient warp (CTA = 4 data warps + 1; 8 + 1 for
//   n >= 16), so the data warps start on the first token at once and the phase-A barrier of the
//   first token publishes h_post and h_res. n <= 4: lane 0 alone, S in n*n registers; n >= 8: the
//   scaling-vector form S = diag(r) K diag(c), K = exp(Z - colmax) (the Paper's divisions
//   rearranged), lane j holding column j and row j of K, r_j and c_j; each half step publishes
//   the vector it reads in ss_h and every lane reads it back by broadcast 16-byte loads (n/4
//   loads per dot product; H100 n = 32: 20 iterations ~0.8 us, ~8 us with n shfl.idx per dot
//   product). Every reciprocal of the prologue is rcp.approx + one Newton step
//   (h_pre's sigmoids too).
// Register plan: x n*V, a/y/acc V each, h_pre and h_post n each; h_res in registers for n <= 2,
//   else read row by row from shared memory (broadcast 16-byte loads).
// Bytes: HBM floor = 2 T n C esize (x read once, out written once).
//
// mhc_static_cl_* (n <= 8, selected for every T where the tile fits 100 KiB): one CTA per token
//   (grid = T), 4 data warps + the coefficient warp. The data warps copy the token's n stream rows
//   to shared memory by cp.async.cg (16-byte units), so the whole row is in flight at once while
//   the coefficient warp runs; once the mbarrier cpbar has seen every data thread's copies land
//   (cp.async.mbarrier.arrive.noinc; a named barrier of the data warps instead leaves racecheck
//   reporting a RAW hazard on ss_red that the SASS does not show), phase A reads the tile into
//   a[] (shared) and the sum of squares, barrier 0 (all warps) also
//   publishes h_post and h_res, phase B reads x and a[] from shared memory: x is read from HBM
//   once. Dynamic shared memory: a[C] f32 then x[n][C]; StaticArgs.pad = C/V.
//   A channel-split cluster version for n = 16, 32 (R = 2, 4 CTAs per token, sum of squares over
//   DSMEM) on FMAs measured 2-4x slower than the persistent kernel (n^2 FMAs per channel, a
//   Sinkhorn per CTA); on tensor cores it is mhc_static_mma_cl* below.
//
// mhc_static_mma_* (bf16, n = 16, 32): static_cl's shape on tensor cores. One token per
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
//   warp taking two 8-channel tiles per step. The persistent kernel spends n^2 = 1024 FMAs per
//   channel (2048 FMAs and 256 shared loads per thread and 2 channels).
//   Registers: 96 (.maxnreg: two 9-warp CTAs per SM), no spills; h_pre is computed after the
//   coefficient warp's branch so its n registers are not live across the Sinkhorn.
// Measured (H100, bf16, C = 1280, copy 2970-2990 GB/s; us back-to-back / graph; the persistent
//   kernel in parentheses): n = 32 T = 1 8.7 / 8.4 (~20.5), T = 32 11.5 / 11.0 (20.3 / 19.9),
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
// Measured (H100, bf16, copy 2994 GB/s; us stream / back-to-back; static_cl -> static_pr):
//   (2560,1280,4) 25.7 -> 23.8 / 22.5 (73.6% of copy), (1280,2560,4) 27.0 -> 25.7 / 24.4
//   (68.1%). At these sizes each CTA sees ~3 tokens (6 CTAs per SM by shared memory): the
//   Sinkhorn once per CTA and fewer CTA launches are the gain; launch and ramp (~3 us) remain.
// Measured (H200, bf16, copy 4187 GB/s; us stream / back-to-back): (320,1280,4) 9.0 / 7.5;
//   (512,1920,4) 10.7 / 9.2; (1280,2560,4) 23.5 / 22.3; (2560,1280,4) 23.8 / 22.7 (static_cl);
//   (128,1280,8) 9.6 / 8.3; (256,1280,8) 10.3 / 8.9 (static_cl); (32,1280,32) 23.0 / 21.6;
//   (64,1280,32) 23.3 / 21.8; (128,1280,32) 23.8 / 22.3 (persistent). An empty launch: 4.3 us
//   back-to-back; these stay 1.8-3.5 us above 1.5x that at n <= 8, ~16 us at n = 32 (n^2 = 1024
//   FMAs per channel and the 32 x 32 Sinkhorn).
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


def generate(experiments):
    """static.ptx (no experiments)."""
    return {"asm/ptx/sm90/static.ptx": ptx_text()}


def catalogue_rows():
    out, entry = catalogue.sm90_rows()
    big, gd = catalogue.ANY_C, catalogue.GRID_DEPENDENCY

    G = catalogue.geometry
    static_p = STATIC.oneline()
    for dtype in DTYPES:
        for n in NS:
            entry(f"static_{dtype}_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_{dtype}_n{n}", [dtype], [n],
                  (1, TMAX), 1, st_threads(n)[1],
                  f"static layer for n={n}: persistent CTAs, coefficients from the logits once per CTA, a[C] in shared memory",
                  "static", G(channels_per_thread=vchan(n), dynamic_shared_max=4 * ST_MAX_C, traits=[gd]),
                  c=(8, 8, ST_MAX_C), params=static_p)
    for dtype in DTYPES:
        for n in ST_CL_NS:
            entry(f"static_pr_{dtype}_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_pr_{dtype}_n{n}",
                  [dtype], [n], (ST_PR_TMIN, TMAX), 1, st_threads(n)[1],
                  f"static layer for n={n}, many tokens: resident CTAs walk the tokens, x through a ring of "
                  f"{ST_PR_STAGES} shared-memory stages (cp.async, one mbarrier each), h_post and h_res once per CTA",
                  "static", G(channels_per_thread=vchan(n), dynamic_shared_max=ST_PR_SMEM,
                              traits=["token_ring", gd, "tile_in_shared"]),
                  c=(8, 8, static_pr_cmax(n, dtype)),
                  params=static_p + " (pad = C/V)", wave_us=0.05)
    for dtype in DTYPES:
        for n in ST_CL_NS:
            entry(f"static_cl_{dtype}_n{n}", "static", ["v4", "paper"], "static", f"mhc_static_cl_{dtype}_n{n}", [dtype],
                  [n], (1, TMAX), 1, st_threads(n)[1],
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
    return out
