"""head (docs/math.md "head", DeepSeek-V4 hc_head), sm_90a: asm/ptx/sm90/head.ptx.

One CTA per token tile (mhc_head_*), a cluster per tile (mhc_head_cl*), and persistent clusters
walking the tiles (mhc_head_pc*), each specialised on n and the storage dtype."""

from .abi import HEAD
from . import catalogue
from .blocks import k_mbarrier_wait, k_sigmoid, k_warp_sum
from .ptx import Kernel, entry, prologue
from .rows import ld_shared_row, load_f32_run, load_row, store_row
from .shapes import DTYPES, ESIZE, NS, TMAX, vchan

THREADS = 256  # mhc_head_*: one CTA of 8 warps (reqntid)


HEAD_ARGS = "\n".join([
    f"// struct HeadArgs ({HEAD.size} bytes):",
    "//   " + HEAD.header_line(["x", "phi", "scale", "base", "out", "       (u64)"]),
    "//   " + HEAD.header_line(["x_stride", "out_stride", "                      (u64 bytes)"]),
    "//   " + HEAD.header_line(["tokens", "cbytes", "kchunks", "cchunks", "   (u32)"]),
    "//   " + HEAD.header_line(["eps_norm", "eps_hc", "inv_k", "pad", "             (f32)"])])


def head_tiles(n):
    v1 = min(8, 32 // n)  # phase 1: phi[i][k..k+V1] for all i held in n*V1 <= 32 registers
    tt = min(8, 64 // n)  # tokens per CTA: TT*n projection accumulators <= 64 registers
    return v1, tt, vchan(n)


def head_params(k, kname, cname):
    """The HeadArgs loads (header above); the two chunk counts (+64, +68) are named per kernel."""
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    f = lambda s: k.reg("f32", s)
    regs = {"x": p("px"), "phi": p("pphi"), "scale": p("psc"), "base": p("pbase"), "out": p("po"),
            "x_stride": p("sx"), "out_stride": p("so"), "tokens": u("tokens"), "cbytes": u("cbytes"),
            "kchunks": u(kname), "cchunks": u(cname), "eps_norm": f("eps_n"), "eps_hc": f("eps_hc"),
            "inv_k": f("inv_k")}
    HEAD.ld_params(regs, emit=k.ins)
    k.grid_dependency()
    return list(regs.values())


def token_rows(k, TT, t0, last, sx, px):
    """The x row addresses of the tile's TT tokens; rows past T clamped to T-1."""
    k.comment("token rows of the tile; rows past T are clamped to T-1 (computed, never stored)")
    rows = []
    for tt in range(TT):
        tk, t64, a = k.reg("b32", f"tk{tt}"), k.reg("b64", f"tk64_{tt}"), k.reg("b64", f"row{tt}")
        k.ins(f"add.u32 {tk}, {t0}, {tt};")
        k.ins(f"min.u32 {tk}, {tk}, {last};")
        k.ins(f"cvt.u64.u32 {t64}, {tk};")
        k.ins(f"mad.lo.u64 {a}, {t64}, {sx}, {px};")
        rows.append(a)
    return rows


def tile_sums(k, TT, n):
    """The tile's projection and square-sum accumulators P[tt][i], SS[tt] (declared, not zeroed)."""
    P = [[k.reg("f32", f"P{tt}_{i}") for i in range(n)] for tt in range(TT)]
    SS = [k.reg("f32", f"ss{tt}") for tt in range(TT)]
    return P, SS


def zero_tile_sums(k, P, SS):
    for tt in range(len(SS)):
        k.ins(f"mov.f32 {SS[tt]}, 0f00000000;")
        for i in range(len(P[tt])):
            k.ins(f"mov.f32 {P[tt][i]}, 0f00000000;")


def cta_chunk_range(k, rank, cch, cl, lo, hi, m, tmp):
    """[lo, hi) = the chunks of cluster rank `rank` of cl (m = hi - lo)."""
    k.ins(f"mul.lo.u32 {lo}, {rank}, {cch};")
    k.ins(f"div.u32 {lo}, {lo}, {cl};")
    k.ins(f"add.u32 {tmp}, {rank}, 1;")
    k.ins(f"mul.lo.u32 {hi}, {tmp}, {cch};")
    k.ins(f"div.u32 {hi}, {hi}, {cl};")
    k.ins(f"sub.u32 {m}, {hi}, {lo};")


def phi_rows(k, n, pa, kb, V, tag):
    """phi[o][chunk] of the n outputs (V f32 each) from pa, rows kb bytes apart, into registers."""
    aphi = [k.reg("b64", f"aphi{i}") for i in range(n)]
    k.ins(f"mov.u64 {aphi[0]}, {pa};")
    for o in range(1, n):
        k.ins(f"add.u64 {aphi[o]}, {aphi[o - 1]}, {kb};")
    return [load_f32_run(k, f"{tag}{o}_", aphi[o], V) for o in range(n)]


class HeadKernel:
    """mhc_head_{dtype}_n{n}: one CTA of THREADS per token tile of TT tokens. Phase 1 walks K in
    chunks of V1 (projections and squares of the TT tokens), a CTA reduction, the coefficients,
    phase 2 mixes the tile (items of V2 channels, U per thread)."""

    def __init__(self, dtype, n):
        self.dtype, self.n = dtype, n
        self.V1, self.TT, self.V2 = head_tiles(n)
        self.es = ESIZE[dtype]
        self.RED = self.TT * (n + 1)
        self.k = k = Kernel()
        (self.px, self.pphi, self.psc, self.pbase, self.po, self.sx, self.so, self.tokens, self.cbytes,
         self.kchunks, self.cchunks, self.eps_n, self.eps_hc, self.inv_k) = head_params(k, "kchunks", "cchunks")
        u = self.u
        self.tid, self.ctaid, self.t0, self.lane, self.warp, self.q, self.tmp = (
            u("tid"), u("ctaid"), u("t0"), u("lane"), u("warp"), u("q"), u("tmp"))
        self.pr = k.reg("pred", "p")

    def u(self, s):
        return self.k.reg("b32", s)

    def p(self, s):
        return self.k.reg("b64", s)

    def setup(self):
        k = self.k
        k.ins(f"mov.u32 {self.tid}, %tid.x;")
        k.ins(f"mov.u32 {self.ctaid}, %ctaid.x;")
        k.ins(f"and.b32 {self.lane}, {self.tid}, 31;")
        k.ins(f"shr.u32 {self.warp}, {self.tid}, 5;")
        k.ins(f"mul.lo.u32 {self.t0}, {self.ctaid}, {self.TT};")
        self.last = self.u("tlast")
        k.ins(f"sub.u32 {self.last}, {self.tokens}, 1;")
        self.rows = token_rows(k, self.TT, self.t0, self.last, self.sx, self.px)
        self.phis = self.p("phistride")
        k.ins(f"mul.wide.u32 {self.phis}, {self.kchunks}, {self.V1 * 4};")
        self.P, self.SS = tile_sums(k, self.TT, self.n)
        zero_tile_sums(k, self.P, self.SS)

    def phase1(self):
        k, n, V1, TT, q, pr, p = self.k, self.n, self.V1, self.TT, self.q, self.pr, self.p
        k.comment("phase 1: P[t][i] = sum_k x[t][k] phi[i][k], ss[t] = sum_k x^2; thread walks k in chunks")
        k.comment(f"of V1={V1}; phi[i][chunk] for all i stays in registers and serves all {TT} tokens")
        k.ins(f"mov.u32 {q}, {self.tid};")
        k.label("P1_LOOP")
        k.ins(f"setp.ge.u32 {pr}, {q}, {self.kchunks};")
        k.ins(f"@{pr} bra P1_END;")
        qo, qx = p("qo"), p("qx")
        k.ins(f"mul.wide.u32 {qo}, {q}, {V1 * 4};")
        k.ins(f"mul.wide.u32 {qx}, {q}, {V1 * self.es};")
        aphi = [p(f"aphi{i}") for i in range(n)]
        k.ins(f"add.u64 {aphi[0]}, {self.pphi}, {qo};")
        for i in range(1, n):
            k.ins(f"add.u64 {aphi[i]}, {aphi[i - 1]}, {self.phis};")
        xvs = []
        for tt in range(TT):
            a = p(f"xa{tt}")
            k.ins(f"add.u64 {a}, {self.rows[tt]}, {qx};")
            xvs.append(load_row(k, self.dtype, f"xv{tt}", a, V1))
        ph = [load_f32_run(k, f"ph{i}_", aphi[i], V1) for i in range(n)]
        for tt in range(TT):
            xv = xvs[tt]
            for v in range(V1):
                k.ins(f"fma.rn.f32 {self.SS[tt]}, {xv[v]}, {xv[v]}, {self.SS[tt]};")
            for i in range(n):
                for v in range(V1):
                    k.ins(f"fma.rn.f32 {self.P[tt][i]}, {ph[i][v]}, {xv[v]}, {self.P[tt][i]};")
        k.ins(f"add.u32 {q}, {q}, {THREADS};")
        k.ins("bra.uni P1_LOOP;")
        k.label("P1_END")

    def cta_reduce(self):
        """Butterfly in each warp, lane 0 stores the warp's sums to sred[warp]."""
        k, p, RED = self.k, self.p, self.RED
        k.comment("deterministic CTA reduction: butterfly in each warp, then warps summed in order 0..7")
        vals = []
        for tt in range(self.TT):
            vals += self.P[tt] + [self.SS[tt]]
        for idx, v in enumerate(vals):
            k_warp_sum(k, v, f"rd{idx}")
        pl = k.reg("pred", "lane0")
        k.ins(f"setp.eq.u32 {pl}, {self.lane}, 0;")
        sbase = p("sbase")
        k.ins(f"mul.wide.u32 {sbase}, {self.warp}, {RED * 4};")
        self.red = red = p("red")
        k.ins(f"mov.u64 {red}, sred;")
        k.ins(f"add.u64 {sbase}, {sbase}, {red};")
        for idx, v in enumerate(vals):
            k.ins(f"@{pl} st.shared.f32 [{sbase}+{idx * 4}], {v};")
        k.ins("bar.sync 0;")

    def coefficients(self):
        """Threads tt n + i < TT n: the 8 warps' sums in order, then h[tt][i] into shs[]."""
        k, n, p, tid, pr, RED = self.k, self.n, self.p, self.tid, self.pr, self.RED
        k.comment("threads tt*n+i < TT*n: coefficient h[tt][i] = sigma((P * inv_rms) * scale + base[i]) + eps_hc")
        k.ins(f"setp.ge.u32 {pr}, {tid}, {self.TT * n};")
        k.ins(f"@{pr} bra COEF_END;")
        ttr, ir = self.u("ctt"), self.u("ci")
        lg = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4, 32: 5}[n]
        k.ins(f"shr.u32 {ttr}, {tid}, {lg};")
        k.ins(f"and.b32 {ir}, {tid}, {n - 1};")
        ip, iss = self.u("ip"), self.u("iss")
        k.ins(f"mad.lo.u32 {ip}, {ttr}, {n + 1}, {ir};")
        k.ins(f"mad.lo.u32 {iss}, {ttr}, {n + 1}, {n};")
        sp, sss, pw = k.reg("f32", "sump"), k.reg("f32", "sums"), k.reg("f32", "pw")
        k.ins(f"mov.f32 {sp}, 0f00000000;")
        k.ins(f"mov.f32 {sss}, 0f00000000;")
        a1, a2 = p("ra1"), p("ra2")
        k.ins(f"mul.wide.u32 {a1}, {ip}, 4;")
        k.ins(f"add.u64 {a1}, {a1}, {self.red};")
        k.ins(f"mul.wide.u32 {a2}, {iss}, 4;")
        k.ins(f"add.u64 {a2}, {a2}, {self.red};")
        for w in range(THREADS // 32):
            k.ins(f"ld.shared.f32 {pw}, [{a1}+{w * RED * 4}];")
            k.ins(f"add.f32 {sp}, {sp}, {pw};")
            k.ins(f"ld.shared.f32 {pw}, [{a2}+{w * RED * 4}];")
            k.ins(f"add.f32 {sss}, {sss}, {pw};")

        def store_h(h):
            hsa, ha = p("hsa"), p("ha")
            k.ins(f"mov.u64 {hsa}, shs;")
            k.ins(f"mul.wide.u32 {ha}, {tid}, 4;")
            k.ins(f"add.u64 {ha}, {ha}, {hsa};")
            k.ins(f"st.shared.f32 [{ha}], {h};")

        head_coeff(k, tid, self.tmp, ir, sp, sss, self.psc, self.pbase, self.inv_k, self.eps_n, self.eps_hc,
                   store=store_h)

    def phase2(self):
        k, n, V2, TT, q, pr, p, u = self.k, self.n, self.V2, self.TT, self.q, self.pr, self.p, self.u
        hsa = p("hsa")
        U = max(1, min(4, 64 // (n * V2)))
        k.comment(f"phase 2: out[t][c] = sum_i h[t][i] x[t][i][c]. Items (tt, chunk of V2={V2} channels) of the")
        k.comment(f"whole tile are flattened and taken {U} at a time per thread, all loads of the {U} items issued")
        k.comment("before any FMA: the x rows were read in phase 1 moments ago, so these are L2/L1 hits whose")
        k.comment("latency the unrolling hides. Item tokens past T are clamped for the loads and not stored.")
        k.ins(f"mov.u64 {hsa}, shs;")
        cb64 = p("cb64")
        k.ins(f"cvt.u64.u32 {cb64}, {self.cbytes};")
        items2 = u("items2")
        k.ins(f"mul.lo.u32 {items2}, {self.cchunks}, {TT};")
        k.ins(f"mov.u32 {q}, {self.tid};")
        k.label("P2_LOOP")
        k.ins(f"setp.ge.u32 {pr}, {q}, {items2};")
        k.ins(f"@{pr} bra P2_END;")
        loads = [self.phase2_item(uu, items2, hsa, cb64) for uu in range(U)]
        for uu, (valid, hv, xs, orow) in enumerate(loads):
            acc = [k.reg("f32", f"oacc{uu}_{v}") for v in range(V2)]
            for v in range(V2):
                k.ins(f"mul.f32 {acc[v]}, {hv[0]}, {xs[0][v]};")
            for i in range(1, n):
                for v in range(V2):
                    k.ins(f"fma.rn.f32 {acc[v]}, {hv[i]}, {xs[i][v]}, {acc[v]};")
            k.ins(f"@!{valid} bra P2_SKIP{uu};")
            store_row(k, self.dtype, acc, orow, tag=f"ho{uu}")
            k.label(f"P2_SKIP{uu}")
        k.ins(f"add.u32 {q}, {q}, {U * THREADS};")
        k.ins("bra.uni P2_LOOP;")
        k.label("P2_END")

    def phase2_item(self, uu, items2, hsa, cb64):
        """Item q + uu THREADS: its validity, h of its token, its n x rows and its output row."""
        k, n, V2, p, u, tmp = self.k, self.n, self.V2, self.p, self.u, self.tmp
        it, ttu, chu, tok = u(f"it{uu}"), u(f"ttu{uu}"), u(f"chu{uu}"), u(f"tok{uu}")
        pv = k.reg("pred", f"pv{uu}")
        k.ins(f"add.u32 {it}, {self.q}, {uu * THREADS};")
        k.ins(f"setp.lt.u32 {pv}, {it}, {items2};")
        k.ins(f"div.u32 {ttu}, {it}, {self.cchunks};")
        k.ins(f"mul.lo.u32 {tmp}, {ttu}, {self.cchunks};")
        k.ins(f"sub.u32 {chu}, {it}, {tmp};")
        k.ins(f"min.u32 {ttu}, {ttu}, {self.TT - 1};")
        k.ins(f"add.u32 {tok}, {self.t0}, {ttu};")
        pt = k.reg("pred", f"pt{uu}")
        k.ins(f"setp.lt.u32 {pt}, {tok}, {self.tokens};")
        k.ins(f"and.pred {pv}, {pv}, {pt};")
        k.ins(f"min.u32 {tok}, {tok}, {self.last};")
        t64, xr, orr, co = p(f"t64_{uu}"), p(f"xr{uu}"), p(f"or{uu}"), p(f"co{uu}")
        k.ins(f"cvt.u64.u32 {t64}, {tok};")
        k.ins(f"mul.wide.u32 {co}, {chu}, {V2 * self.es};")
        k.ins(f"mad.lo.u64 {xr}, {t64}, {self.sx}, {self.px};")
        k.ins(f"add.u64 {xr}, {xr}, {co};")
        k.ins(f"mad.lo.u64 {orr}, {t64}, {self.so}, {self.po};")
        k.ins(f"add.u64 {orr}, {orr}, {co};")
        ha = p(f"hta{uu}")
        k.ins(f"mul.wide.u32 {ha}, {ttu}, {4 * n};")
        k.ins(f"add.u64 {ha}, {ha}, {hsa};")
        hv = load_f32_run(k, f"hv{uu}_", ha, n, space="shared")
        xa = [p(f"x2a{uu}_{i}") for i in range(n)]
        k.ins(f"mov.u64 {xa[0]}, {xr};")
        for i in range(1, n):
            k.ins(f"add.u64 {xa[i]}, {xa[i - 1]}, {cb64};")
        xs = [load_row(k, self.dtype, f"y{uu}_{i}", xa[i], V2) for i in range(n)]
        return pv, hv, xs, orr

    def build(self):
        self.setup()
        self.phase1()
        self.cta_reduce()
        self.coefficients()
        self.phase2()
        self.k.ins("ret;")
        name = f"mhc_head_{self.dtype}_n{self.n}"
        return name, entry(name, self.k.body(), HEAD.size, [f".reqntid {THREADS}, 1, 1", ".maxnreg 128"],
                           [f".shared .align 16 .f32 sred[{(THREADS // 32) * self.RED}];",
                            f".shared .align 16 .f32 shs[{self.TT * self.n}];"])


def head_kernel(dtype, n):
    return HeadKernel(dtype, n).build()


# head, cluster variant (n <= 8): a cluster of CL CTAs per token tile, CTA r owning chunk range r
CL = 8  # CTAs per cluster (the portable maximum)


CL16_NS = [16, 32]  # mhc_head_cl16_*: 16-CTA clusters (non-portable) for T <= CLD_TMAX
# (n >= 16: phi, n x nC f32, is what a decode cluster pulls; H100 n = 32, 16- against 8-CTA
# clusters: T = 1 13.7 against 20.4 us, but T = 64 27.3 against 24.7 and T = 256 92.0 against
# 70.9 us: fewer clusters are resident)
CL_THREADS = 128
CL_NS = [1, 2, 4, 8, 16, 32]
CLD_NS = [1, 2, 4, 8]  # the decode variant's phi slice (n x n x chunks) outgrows shared memory above
CL_SMEM = 112 * 1024  # largest x tile (dynamic shared memory): two CTAs per SM still fit


CLD_SMEM = 200 * 1024  # decode variant: x tile and phi slice (few CTAs: one per SM is fine)
CLD_TMAX = 16  # decode variant up to this many tokens
# Largest T of the cluster variant per n (H200: the one-CTA-per-tile kernel is as fast or faster
# above; n = 8 loses from T = 1024 on).
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
    f = lambda s: k.reg("f32", s)
    u = lambda s: k.reg("b32", s)
    RED = TT * (n + 1)
    NPAD = max(32, 1 << (RED - 1).bit_length())
    W = NPAD // 32
    k.comment(f"warp reduce-scatter of the {RED} partials (padded to {NPAD}): at offset o the lane keeps the")
    k.comment(f"half selected by lane bit o and adds its partner's copy; lane l ends with {W} sums, indices")
    k.comment(f"{W}l..{W}l+{W - 1} (fixed order: deterministic)")
    zero = f("zero")
    k.ins(f"mov.f32 {zero}, 0f00000000;")
    L = []
    for tt in range(TT):
        L += P[tt] + [SS[tt]]
    L += [zero] * (NPAD - RED)
    pb = k.reg("pred", "pb")
    snd, kp, rcv = f("snd"), f("kp"), f("rcv")
    step = 0
    for off in [16, 8, 4, 2, 1]:
        half = len(L) // 2
        A, B = L[:half], L[half:]
        k.ins(f"and.b32 {tmp}, {lane}, {off};")
        k.ins(f"setp.ne.u32 {pb}, {tmp}, 0;")
        nl = []
        for j in range(half):
            d = f(f"rs{step}_{j}")
            k.ins(f"selp.f32 {snd}, {A[j]}, {B[j]}, {pb};")
            k.ins(f"selp.f32 {kp}, {B[j]}, {A[j]}, {pb};")
            k.ins(f"shfl.sync.bfly.b32 {rcv}, {snd}, {off}, 0x1f, 0xffffffff;")
            k.ins(f"add.f32 {d}, {kp}, {rcv};")
            nl.append(d)
        L = nl
        step += 1
    sra = u("sra")
    k.ins(f"mov.u32 {sra}, sred;")
    k.ins(f"mad.lo.u32 {tmp}, {warp}, {NPAD * 4}, {sra};")
    k.ins(f"mad.lo.u32 {tmp}, {lane}, {W * 4}, {tmp};")
    if W == 1:
        k.ins(f"st.shared.f32 [{tmp}], {L[0]};")
    else:
        k.ins(f"st.shared.v{W}.f32 [{tmp}], {{{', '.join(L)}}};")
    k.ins("bar.sync 0;")
    k.comment(f"threads j < {RED}: the CTA's partial j = sum of the {NW} warps in order, into part[j]")
    pa32 = u("parta")
    if sink is None:
        k.ins(f"mov.u32 {pa32}, part;")
    if part_off is not None:
        k.ins(f"add.u32 {pa32}, {pa32}, {part_off};")
    k.ins(f"setp.ge.u32 {pr}, {tid}, {RED};")
    k.ins(f"@{pr} bra PART_END;")
    acc, w_ = f("pacc"), f("pw")
    k.ins(f"mad.lo.u32 {tmp}, {tid}, 4, {sra};")
    k.ins(f"ld.shared.f32 {acc}, [{tmp}];")
    for wi in range(1, NW):
        k.ins(f"ld.shared.f32 {w_}, [{tmp}+{wi * NPAD * 4}];")
        k.ins(f"add.f32 {acc}, {acc}, {w_};")
    if sink is None:
        k.ins(f"mad.lo.u32 {tmp}, {tid}, 4, {pa32};")
        k.ins(f"st.shared.f32 [{tmp}], {acc};")
    else:
        sink(acc)
    k.label("PART_END")
    return pa32


def cluster_coeffs(k, TT, n, tid, tmp, pr, pa32, psc, pbase, inv_k, eps_n, eps_hc, gather=None, cl=CL):
    """After the cluster barrier: threads tt n + i < TT n sum the CL CTAs' part[] (at pa32 in
    every CTA) in rank order through distributed shared memory and write h[tt][i] to shs[]; the
    same bits in every CTA. Ends with bar.sync. gather(ttr, ir, sp, sss): emits the sums sp, sss
    of token ttr's projection ir and squares instead (no cluster barrier, no part[])."""
    f = lambda s: k.reg("f32", s)
    u = lambda s: k.reg("b32", s)
    if gather is None:
        k.comment("cluster barrier: every CTA's part[] is visible to the cluster (release / acquire)")
        k.ins("barrier.cluster.arrive.release;")
        k.ins("barrier.cluster.wait.acquire;")
    k.comment(f"threads j = tt n + i < {TT * n}: sum the {cl} CTAs' partials in rank order (distributed shared")
    k.comment("memory), then h = sigma((P inv_rms) scale + base[i]) + eps_hc: the same bits in every CTA")
    k.ins(f"setp.ge.u32 {pr}, {tid}, {TT * n};")
    k.ins(f"@{pr} bra COEF_END;")
    ttr, ir = u("ctt"), u("ci")
    lg = n.bit_length() - 1
    k.ins(f"shr.u32 {ttr}, {tid}, {lg};")
    k.ins(f"and.b32 {ir}, {tid}, {n - 1};")
    sp, sss = f("sump"), f("sums")
    if gather is not None:
        gather(ttr, ir, sp, sss)
    else:
        cluster_sum_dsmem(k, TT, n, ttr, ir, sp, sss, pa32, cl)
    head_coeff(k, tid, tmp, ir, sp, sss, psc, pbase, inv_k, eps_n, eps_hc)


def cluster_sum_dsmem(k, TT, n, ttr, ir, sp, sss, pa32, cl=CL):
    """sp, sss = the CL CTAs' part[] entries of (token ttr, projection ir) and (ttr, squares), read
    through distributed shared memory and summed in rank order."""
    f = lambda s: k.reg("f32", s)
    u = lambda s: k.reg("b32", s)
    ip, iss = u("ip"), u("iss")
    k.ins(f"mad.lo.u32 {ip}, {ttr}, {n + 1}, {ir};")
    k.ins(f"mad.lo.u32 {ip}, {ip}, 4, {pa32};")
    k.ins(f"mad.lo.u32 {iss}, {ttr}, {n + 1}, {n};")
    k.ins(f"mad.lo.u32 {iss}, {iss}, 4, {pa32};")
    pw, ra = f("rpv"), u("ra")
    for r in range(cl):
        k.ins(f"mapa.shared::cluster.u32 {ra}, {ip}, {r};")
        if r == 0:
            k.ins(f"ld.shared::cluster.f32 {sp}, [{ra}];")
        else:
            k.ins(f"ld.shared::cluster.f32 {pw}, [{ra}];")
            k.ins(f"add.f32 {sp}, {sp}, {pw};")
        k.ins(f"mapa.shared::cluster.u32 {ra}, {iss}, {r};")
        if r == 0:
            k.ins(f"ld.shared::cluster.f32 {sss}, [{ra}];")
        else:
            k.ins(f"ld.shared::cluster.f32 {pw}, [{ra}];")
            k.ins(f"add.f32 {sss}, {sss}, {pw};")


def head_coeff(k, tid, tmp, ir, sp, sss, psc, pbase, inv_k, eps_n, eps_hc, store=None):
    """h = sigma((sp inv_rms) scale + base[ir]) + eps_hc into shs[tid] (or as store(h) emits);
    ends the coefficient threads' branch (COEF_END) with bar.sync."""
    f = lambda s: k.reg("f32", s)
    u = lambda s: k.reg("b32", s)
    p = lambda s: k.reg("b64", s)
    inv, g, z, sc, bs, h = (f(s) for s in ["inv", "g", "z", "sc", "bs", "h"])
    k.comment("inv_rms = 1 / sqrt(ss / K + eps_norm), correctly rounded sqrt and reciprocal")
    k.ins(f"fma.rn.f32 {inv}, {sss}, {inv_k}, {eps_n};")
    k.ins(f"sqrt.rn.f32 {inv}, {inv};")
    k.ins(f"rcp.rn.f32 {inv}, {inv};")
    k.ins(f"mul.f32 {g}, {sp}, {inv};")
    k.ins(f"ld.global.nc.f32 {sc}, [{psc}];")
    ab = p("ab")
    k.ins(f"mul.wide.u32 {ab}, {ir}, 4;")
    k.ins(f"add.u64 {ab}, {ab}, {pbase};")
    k.ins(f"ld.global.nc.f32 {bs}, [{ab}];")
    k.ins(f"fma.rn.f32 {z}, {g}, {sc}, {bs};")
    k_sigmoid(k, h, z, "sg")
    k.ins(f"add.f32 {h}, {h}, {eps_hc};")
    if store is not None:
        store(h)
    else:
        hsa = u("hsa")
        k.ins(f"mov.u32 {hsa}, shs;")
        k.ins(f"mad.lo.u32 {tmp}, {tid}, 4, {hsa};")
        k.ins(f"st.shared.f32 [{tmp}], {h};")
    k.label("COEF_END")
    k.ins("bar.sync 0;")


def head_mix(k, dtype, n, V, TT, threads, tid, it, q, m, t0, tokens, tmp, lo, so, po, pr, tile_row, where):
    """Phase 2 of the cluster head kernels: items (tt, chunk lo+q) of the TT x m tile, out[t][c] =
    sum_i h[t][i] x[t][i][c] with h from shs[] and x from shared memory (tile_row(ttu, q) emits
    the address of stream 0's chunk and returns it with the stream step); tokens past T are
    computed, not stored. Ends at P2_END."""
    u = lambda s: k.reg("b32", s)
    f = lambda s: k.reg("f32", s)
    p = lambda s: k.reg("b64", s)
    k.comment(f"phase 2: items (tt, chunk lo+q) from the {where}: out[t][c] = sum_i h[t][i] x[t][i][c]")
    hsa = u("hsa")
    k.ins(f"mov.u32 {hsa}, shs;")
    items2 = u("items2")
    k.ins(f"mul.lo.u32 {items2}, {m}, {TT};")
    k.ins(f"mov.u32 {it}, {tid};")
    k.label("P2_LOOP")
    k.ins(f"setp.ge.u32 {pr}, {it}, {items2};")
    k.ins(f"@{pr} bra P2_END;")
    ttu, tok = u("ttu"), u("tok")
    k.ins(f"div.u32 {ttu}, {it}, {m};")
    k.ins(f"mul.lo.u32 {tmp}, {ttu}, {m};")
    k.ins(f"sub.u32 {q}, {it}, {tmp};")
    k.ins(f"add.u32 {tok}, {t0}, {ttu};")
    pv = k.reg("pred", "pv")
    k.ins(f"setp.ge.u32 {pv}, {tok}, {tokens};")
    hv = [f(f"hv{i}") for i in range(n)]
    ha = u("ha")
    k.ins(f"mad.lo.u32 {ha}, {ttu}, {4 * n}, {hsa};")
    for i0 in range(0, n, 4):
        w = min(4, n - i0)
        if w == 1:
            k.ins(f"ld.shared.f32 {hv[i0]}, [{ha}+{4 * i0}];")
        else:
            k.ins(f"ld.shared.v{w}.f32 {{{', '.join(hv[i0:i0 + w])}}}, [{ha}+{4 * i0}];")
    ta, sstep = tile_row(ttu, q)
    accs = [f(f"oacc{v}") for v in range(V)]
    for i in range(n):
        if i:
            k.ins(f"add.u32 {ta}, {ta}, {sstep};")
        xv = ld_shared_row(k, dtype, ta, V, "yw", "y")
        for v in range(V):
            if i == 0:
                k.ins(f"mul.f32 {accs[v]}, {hv[0]}, {xv[v]};")
            else:
                k.ins(f"fma.rn.f32 {accs[v]}, {hv[i]}, {xv[v]}, {accs[v]};")
    k.ins(f"@{pv} bra P2_SKIP;")
    t64, orr = p("t64"), p("orow")
    k.ins(f"cvt.u64.u32 {t64}, {tok};")
    k.ins(f"mad.lo.u64 {orr}, {t64}, {so}, {po};")
    k.ins(f"add.u32 {tmp}, {lo}, {q};")
    k.ins(f"mad.wide.u32 {orr}, {tmp}, {V * ESIZE[dtype]}, {orr};")
    store_row(k, dtype, accs, orr, tag="ho")
    k.label("P2_SKIP")
    k.ins(f"add.u32 {it}, {it}, {threads};")
    k.ins("bra.uni P2_LOOP;")
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
            k.ins(f"add.u32 {addr}, {addr}, {tstep};")
        xv = ld_shared_row(k, dtype, addr, V, f"xw{tt}_", f"xv{tt}_")
        for v in range(V):
            k.ins(f"fma.rn.f32 {SS[tt]}, {xv[v]}, {xv[v]}, {SS[tt]};")
        for o in range(len(ph)):
            for v in range(V):
                k.ins(f"fma.rn.f32 {P[tt][o]}, {ph[o][v]}, {xv[v]}, {P[tt][o]};")


class HeadClKernel:
    """mhc_head_cl*_{dtype}_n{n}: a cluster of cl CTAs per token tile, CTA r owning chunk range r
    of every stream. Phase 1 parks the x tile in shared memory (registers, or cp.async with the
    phi slice too in the decode variant), the cluster sums the CTAs' partials in rank order, and
    phase 2 mixes the tile from shared memory."""

    def __init__(self, dtype, n, dec, cl):
        self.dtype, self.n, self.dec, self.cl = dtype, n, dec, cl
        self.V1, self.TT = cl_v1(n), head_tiles(n)[1]
        self.es = ESIZE[dtype]
        self.RED = self.TT * (n + 1)
        self.NPAD = max(32, 1 << (self.RED - 1).bit_length())
        self.NW = CL_THREADS // 32
        self.k = k = Kernel()
        (self.px, self.pphi, self.psc, self.pbase, self.po, self.sx, self.so, self.tokens, self.cbytes,
         self.mmax, self.cch, self.eps_n, self.eps_hc, self.inv_k) = head_params(k, "mmax", "cch")
        u = self.u
        self.tid, self.lane, self.warp, self.rank, self.tile, self.t0, self.tmp = (
            u("tid"), u("lane"), u("warp"), u("rank"), u("tile"), u("t0"), u("tmp"))
        self.lo, self.hi, self.m, self.it, self.ii, self.q = u("lo"), u("hi"), u("m"), u("it"), u("ii"), u("q")
        self.pr = k.reg("pred", "p")

    def u(self, s):
        return self.k.reg("b32", s)

    def p(self, s):
        return self.k.reg("b64", s)

    def setup(self):
        k, n, V1, TT, tid, tmp = self.k, self.n, self.V1, self.TT, self.tid, self.tmp
        k.ins(f"mov.u32 {tid}, %tid.x;")
        k.ins(f"and.b32 {self.lane}, {tid}, 31;")
        k.ins(f"shr.u32 {self.warp}, {tid}, 5;")
        k.ins(f"mov.u32 {self.rank}, %cluster_ctarank;")
        k.ins(f"mov.u32 {self.tile}, %clusterid.x;")
        k.ins(f"mul.lo.u32 {self.t0}, {self.tile}, {TT};")
        k.comment(f"chunks (of V1={V1} channels) [lo, hi) of this CTA: lo = rank * cch / {self.cl}")
        cta_chunk_range(k, self.rank, self.cch, self.cl, self.lo, self.hi, self.m, tmp)
        last = self.u("tlast")
        k.ins(f"sub.u32 {last}, {self.tokens}, 1;")
        self.rows = token_rows(k, TT, self.t0, last, self.sx, self.px)
        self.kb = self.p("kbytes")
        k.ins(f"mul.wide.u32 {self.kb}, {self.cch}, {n * V1 * 4};")
        self.xt = self.u("xt")
        k.ins(f"mov.u32 {self.xt}, hcl_x;")
        self.P, self.SS = tile_sums(k, TT, n)
        zero_tile_sums(k, self.P, self.SS)

    def item_chunk(self):
        """(i, q) of item `it` (stream i = it / m, chunk lo + q), the global offset of its x chunk
        and the address of phi[0][i C + chunk]."""
        k, m, ii, q, tmp, V1 = self.k, self.m, self.ii, self.q, self.tmp, self.V1
        k.ins(f"div.u32 {ii}, {self.it}, {m};")
        k.ins(f"mul.lo.u32 {tmp}, {ii}, {m};")
        k.ins(f"sub.u32 {q}, {self.it}, {tmp};")
        c = self.u("cg")
        k.ins(f"add.u32 {c}, {self.lo}, {q};")
        xo, pa = self.p("xo"), self.p("pa")
        k.ins(f"mul.wide.u32 {xo}, {ii}, {self.cbytes};")
        k.ins(f"mad.wide.u32 {xo}, {c}, {V1 * self.es}, {xo};")
        k.ins(f"mad.lo.u32 {tmp}, {ii}, {self.cch}, {c};")
        k.ins(f"mul.wide.u32 {pa}, {tmp}, {V1 * 4};")
        k.ins(f"add.u64 {pa}, {pa}, {self.pphi};")
        return xo, pa

    def tile_offset(self):
        """The item's offset in the x tile (token 0): ((i mmax + q) V1 esize) + the tile base."""
        k, V1 = self.k, self.V1
        so_ = self.u("tso")
        k.ins(f"mad.lo.u32 {so_}, {self.ii}, {self.mmax}, {self.q};")
        k.ins(f"mul.lo.u32 {so_}, {so_}, {V1 * self.es};")
        k.ins(f"add.u32 {so_}, {so_}, {self.xt};")
        return so_

    def phase1_registers(self):
        """Phase 1 with the x chunks loaded into registers, used, and parked in the tile."""
        k, n, V1, TT, it, pr, p = self.k, self.n, self.V1, self.TT, self.it, self.pr, self.p
        k.comment("(the x tile is loaded into registers and stored to shared memory: measured faster than")
        k.comment("cp.async for this variant, H200)")
        items = self.u("items")
        k.ins(f"mul.lo.u32 {items}, {self.m}, {n};")
        k.comment("phase 1: items (stream i, chunk lo+q), i = item / m. Each loads phi[o][i C + chunk] for the")
        k.comment(f"n outputs o once (n*V1 registers) for the {TT} tokens, accumulates the partial projections and")
        k.comment("sums of squares, and parks the raw x chunk of every token in the tile (shared memory)")
        k.ins(f"mov.u32 {it}, {self.tid};")
        k.label("P1_LOOP")
        k.ins(f"setp.ge.u32 {pr}, {it}, {items};")
        k.ins(f"@{pr} bra P1_END;")
        xo, pa = self.item_chunk()
        xvs = []
        for tt in range(TT):
            a = p(f"xa{tt}")
            k.ins(f"add.u64 {a}, {self.rows[tt]}, {xo};")
            xvs.append(load_row(k, self.dtype, f"xv{tt}", a, V1))
        if n <= 8:
            ph = phi_rows(k, n, pa, self.kb, V1, "ph")
        else:
            # one running address (n 64-bit addresses would cost 2n registers)
            ph = []
            for o in range(n):
                if o:
                    k.ins(f"add.u64 {pa}, {pa}, {self.kb};")
                ph.append(load_f32_run(k, f"ph{o}_", pa, V1))
        k.comment("tile offset of (tt, i, q): ((tt n + i) mmax + q) V1 esize")
        so_ = self.tile_offset()
        tstep = self.u("tstep")
        k.ins(f"mul.lo.u32 {tstep}, {self.mmax}, {n * V1 * self.es};")
        for tt in range(TT):
            self.park_and_dot(tt, xvs[tt], ph, so_, tstep)
        k.ins(f"add.u32 {it}, {it}, {CL_THREADS};")
        k.ins("bra.uni P1_LOOP;")

    def park_and_dot(self, tt, xv, ph, so_, tstep):
        """Token tt's chunk (registers xv) into the tile at so_ (advanced by tstep), then into its
        sum of squares and projections."""
        k, n, V1, SS, P = self.k, self.n, self.V1, self.SS, self.P
        words = [f"%xv{tt}_w{w}" for w in range(V1 // 2)] if self.dtype == "bf16" else xv
        if tt:
            k.ins(f"add.u32 {so_}, {so_}, {tstep};")
        for w0 in range(0, len(words), 4):
            grp = words[w0:w0 + 4]
            ty = "b32" if self.dtype == "bf16" else "f32"
            if len(grp) == 1:
                k.ins(f"st.shared.{ty} [{so_}+{4 * w0}], {grp[0]};")
            else:
                k.ins(f"st.shared.v{len(grp)}.{ty} [{so_}+{4 * w0}], {{{', '.join(grp)}}};")
        for v in range(V1):
            k.ins(f"fma.rn.f32 {SS[tt]}, {xv[v]}, {xv[v]}, {SS[tt]};")
        for o in range(n):
            for v in range(V1):
                k.ins(f"fma.rn.f32 {P[tt][o]}, {ph[o][v]}, {xv[v]}, {P[tt][o]};")

    def cp_async(self, dst, src, nbytes):
        off = 0
        while off < nbytes:
            w = min(16, nbytes - off)
            mode = "cg" if w == 16 else "ca"
            self.k.ins(f"cp.async.{mode}.shared.global [{dst}+{off}], [{src}+{off}], {w};")
            off += w

    def phase1_copies(self):
        """Decode variant: every item's x chunks and phi slice copied into shared memory by
        cp.async first, then phase 1 from shared memory."""
        k, n, V1, TT, it, pr, u = self.k, self.n, self.V1, self.TT, self.it, self.pr, self.u
        items = u("items")
        k.ins(f"mul.lo.u32 {items}, {self.m}, {n};")
        tstep, pt, pstep = u("tstep"), u("pt"), u("pstep")
        k.ins(f"mul.lo.u32 {tstep}, {self.mmax}, {n * V1 * self.es};")
        k.ins(f"mul.lo.u32 {pt}, {tstep}, {TT};")
        k.ins(f"add.u32 {pt}, {pt}, {self.xt};")
        k.ins(f"mul.lo.u32 {pstep}, {self.mmax}, {n * V1 * 4};")
        k.comment(f"issue: every item's x chunk of the {TT} tokens goes to the tile by cp.async (no registers, the")
        k.comment("whole tile in flight at once); the phi chunks of its n outputs too (decode: one round trip)")
        k.comment("tile offset of (tt, i, q): ((tt n + i) mmax + q) V1 esize; phi tile after it: ((o n + i) mmax + q) V1 4")
        k.ins(f"mov.u32 {it}, {self.tid};")
        k.label("CP_LOOP")
        k.ins(f"setp.ge.u32 {pr}, {it}, {items};")
        k.ins(f"@{pr} bra CP_END;")
        xo, pa = self.item_chunk()
        so_ = self.tile_offset()
        ds, sa = u("cpd"), self.p("cps")
        for tt in range(TT):
            k.ins(f"add.u64 {sa}, {self.rows[tt]}, {xo};")
            if tt == 0:
                k.ins(f"mov.u32 {ds}, {so_};")
            else:
                k.ins(f"add.u32 {ds}, {ds}, {tstep};")
            self.cp_async(ds, sa, V1 * self.es)
        self.phi_slice_offset(ds, pt)
        k.ins(f"mov.u64 {sa}, {pa};")
        for o in range(n):
            if o:
                k.ins(f"add.u32 {ds}, {ds}, {pstep};")
                k.ins(f"add.u64 {sa}, {sa}, {self.kb};")
            self.cp_async(ds, sa, V1 * 4)
        k.ins(f"add.u32 {it}, {it}, {CL_THREADS};")
        k.ins("bra.uni CP_LOOP;")
        k.label("CP_END")
        k.ins("cp.async.commit_group;")
        k.comment("phase 1: items (stream i, chunk lo+q), i = item / m, the same items as issued (so each thread")
        k.comment("waits only for its own copies). phi[o][i C + chunk] of the n outputs (n*V1 registers) serves")
        k.comment(f"the {TT} tokens: partial projections and sums of squares")
        k.ins(f"mov.u32 {it}, {self.tid};")
        k.label("P1_LOOP")
        k.ins(f"setp.ge.u32 {pr}, {it}, {items};")
        k.ins(f"@{pr} bra P1_END;")
        self.item_chunk()
        so_ = self.tile_offset()
        k.ins("cp.async.wait_group 0;")
        self.phi_slice_offset(ds, pt)
        ph = []
        for o in range(n):
            if o:
                k.ins(f"add.u32 {ds}, {ds}, {pstep};")
            ph.append(load_f32_run(k, f"ph{o}_", ds, V1, space="shared"))
        head_tile_dots(k, self.dtype, so_, tstep, V1, ph, self.SS, self.P)
        k.ins(f"add.u32 {it}, {it}, {CL_THREADS};")
        k.ins("bra.uni P1_LOOP;")

    def phi_slice_offset(self, ds, pt):
        """ds = the item's phi slot for output 0 in the phi tile at pt: ((i mmax + q) V1 4)."""
        k = self.k
        k.ins(f"mad.lo.u32 {ds}, {self.ii}, {self.mmax}, {self.q};")
        k.ins(f"mul.lo.u32 {ds}, {ds}, {self.V1 * 4};")
        k.ins(f"add.u32 {ds}, {ds}, {pt};")

    def tile_row(self, ttu, q_):
        """Phase 2's address of (token ttu, stream 0, chunk q_) in the tile, and the stream step."""
        k, u = self.k, self.u
        ta = u("ta")
        k.ins(f"mul.lo.u32 {ta}, {ttu}, {self.n};")
        k.ins(f"mad.lo.u32 {ta}, {ta}, {self.mmax}, {q_};")
        k.ins(f"mul.lo.u32 {ta}, {ta}, {self.V1 * self.es};")
        k.ins(f"add.u32 {ta}, {ta}, {self.xt};")
        sstep = u("sstep")
        k.ins(f"mul.lo.u32 {sstep}, {self.mmax}, {self.V1 * self.es};")
        return ta, sstep

    def build(self):
        k, n, TT, tid, tmp, pr = self.k, self.n, self.TT, self.tid, self.tmp, self.pr
        self.setup()
        if self.dec:
            self.phase1_copies()
        else:
            self.phase1_registers()
        k.label("P1_END")
        pa32 = cluster_reduce(k, self.P, self.SS, TT, n, self.NW, tid, self.lane, self.warp, tmp, pr)
        cluster_coeffs(k, TT, n, tid, tmp, pr, pa32, self.psc, self.pbase, self.inv_k, self.eps_n, self.eps_hc,
                       cl=self.cl)
        k.comment("done with the other CTAs' part[]: arrive now, wait before exit (they must not vanish early)")
        k.ins("barrier.cluster.arrive.release;")
        head_mix(k, self.dtype, n, self.V1, TT, CL_THREADS, tid, self.it, self.q, self.m, self.t0, self.tokens,
                 tmp, self.lo, self.so, self.po, pr, self.tile_row, "tile")
        k.ins("barrier.cluster.wait.acquire;")
        k.ins("ret;")
        name = f"mhc_head_cl{'d' if self.dec else '' if self.cl == CL else self.cl}_{self.dtype}_n{n}"
        return name, entry(name, k.body(), HEAD.size,
                           [f".reqntid {CL_THREADS}, 1, 1", f".maxnreg {128 if n <= 4 else 168}",
                            f".reqnctapercluster {self.cl}, 1, 1"],
                           [f".shared .align 16 .f32 sred[{self.NW * self.NPAD}];",
                            f".shared .align 16 .f32 part[{self.RED}];",
                            f".shared .align 16 .f32 shs[{TT * n}];"])


def head_cl_kernel(dtype, n, dec=False, CLn=CL):
    return HeadClKernel(dtype, n, dec, CLn).build()


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


class HeadPcKernel:
    """mhc_head_pc{cl}_{dtype}_n{n}: persistent clusters walking the token tiles. Each thread keeps
    the phi chunks of its PC_SLOTS items in registers; the tiles' x slices stream through a ring of
    PC_STAGES stages; the CTAs' partials travel by st.async into every CTA's gat[] buffers."""

    def __init__(self, dtype, n, cl, TT):
        self.dtype, self.n, self.cl, self.TT = dtype, n, cl, TT
        self.es = ESIZE[dtype]
        self.V = 16 // self.es  # elements of a 16-byte chunk
        self.NW = PC_THREADS // 32
        self.RED = TT * (n + 1)
        self.k = k = Kernel()
        (self.px, self.pphi, self.psc, self.pbase, self.po, self.sx, self.so, self.tokens, self.cbytes,
         self.mmax, self.cch, self.eps_n, self.eps_hc, self.inv_k) = head_params(k, "mmax", "cch")
        u = self.u
        self.tid, self.lane, self.warp, self.rank, self.cid, self.ncl = (
            u("tid"), u("lane"), u("warp"), u("rank"), u("cid"), u("ncl"))
        self.lo, self.hi, self.m, self.tmp, self.it, self.q, self.ii = (
            u("lo"), u("hi"), u("m"), u("tmp"), u("it"), u("q"), u("ii"))
        self.pr = k.reg("pred", "p")

    def u(self, s):
        return self.k.reg("b32", s)

    def p(self, s):
        return self.k.reg("b64", s)

    def f(self, s):
        return self.k.reg("f32", s)

    def setup(self):
        k, tid, pr = self.k, self.tid, self.pr
        k.ins(f"mov.u32 {tid}, %tid.x;")
        k.ins(f"and.b32 {self.lane}, {tid}, 31;")
        k.ins(f"shr.u32 {self.warp}, {tid}, 5;")
        k.ins(f"mov.u32 {self.rank}, %cluster_ctarank;")
        k.ins(f"mov.u32 {self.cid}, %clusterid.x;")
        k.ins(f"mov.u32 {self.ncl}, %nclusterid.x;")
        self.gb, self.ga = gb, ga = self.u("gbar"), self.u("gat")
        k.ins(f"mov.u32 {gb}, gbar;")
        k.ins(f"mov.u32 {ga}, gat;")
        k.comment("the two gather mbarriers (one arrival per phase: this CTA's arming), initialised before any")
        k.comment("CTA of the cluster may signal them")
        k.ins(f"setp.ne.u32 {pr}, {tid}, 0;")
        k.ins(f"@{pr} bra INIT_END;")
        k.ins(f"mbarrier.init.shared::cta.b64 [{gb}], 1;")
        k.ins(f"mbarrier.init.shared::cta.b64 [{gb}+8], 1;")
        k.ins("fence.mbarrier_init.release.cluster;")
        k.label("INIT_END")
        k.ins("barrier.cluster.arrive.release;")
        k.ins("barrier.cluster.wait.acquire;")
        k.comment(f"16-byte chunks [lo, hi) of every stream belong to this CTA: lo = rank * cch / {self.cl}")
        cta_chunk_range(k, self.rank, self.cch, self.cl, self.lo, self.hi, self.m, self.tmp)
        self.ring_geometry()

    def ring_geometry(self):
        k, n, TT = self.k, self.n, self.TT
        self.ntiles, self.last = ntiles, last = self.u("ntiles"), self.u("tlast")
        k.ins(f"add.u32 {ntiles}, {self.tokens}, {TT - 1};")
        k.ins(f"div.u32 {ntiles}, {ntiles}, {TT};")
        k.ins(f"sub.u32 {last}, {self.tokens}, 1;")
        self.xt, self.sb, self.tstep = xt, sb, tstep = self.u("xt"), self.u("sbytes"), self.u("tstep")
        k.ins(f"mov.u32 {xt}, hpc_x;")
        k.comment("a stage holds the tile's slice: offset tt tstep + (i mmax + q) 16 with tstep = (n mmax + 1) 16:")
        k.comment(f"a 16-byte pad per token row (135.4 us, 140.3 unpadded, at T=8192 C=4096); {PC_STAGES} stages")
        k.ins(f"mad.lo.u32 {tstep}, {self.mmax}, {n}, 1;")
        k.ins(f"shl.b32 {tstep}, {tstep}, 4;")
        k.ins(f"mul.lo.u32 {sb}, {tstep}, {TT};")
        self.kb = self.p("kbytes")
        k.ins(f"mul.wide.u32 {self.kb}, {self.cch}, {n * self.V * 4};")

    def slots(self):
        """The thread's PC_SLOTS items: validity, global and stage offsets, phi in registers."""
        k, n, V, tmp, it, ii, q = self.k, self.n, self.V, self.tmp, self.it, self.ii, self.q
        k.comment(f"phase-1 items of this thread: item = tid + {PC_THREADS} s (s < {PC_SLOTS}) is (stream i, chunk lo+q),")
        k.comment("i = item / m; its global offset in a row, its offset in a stage, and phi[o][i C + chunk] of the")
        k.comment(f"n outputs, loaded once into registers for the whole kernel ({PC_SLOTS} x n x {V})")
        items = self.u("items")
        k.ins(f"mul.lo.u32 {items}, {self.m}, {n};")
        self.vs, self.goff, self.soff, self.ph = [], [], [], []
        for s_ in range(PC_SLOTS):
            pv = k.reg("pred", f"vs{s_}")
            k.ins(f"add.u32 {it}, {self.tid}, {s_ * PC_THREADS};")
            k.ins(f"setp.lt.u32 {pv}, {it}, {items};")
            k.ins(f"selp.u32 {it}, {it}, 0, {pv};")
            k.ins(f"div.u32 {ii}, {it}, {self.m};")
            k.ins(f"mul.lo.u32 {tmp}, {ii}, {self.m};")
            k.ins(f"sub.u32 {q}, {it}, {tmp};")
            c = self.u("cg")
            k.ins(f"add.u32 {c}, {self.lo}, {q};")
            go, sof, pa = self.p(f"goff{s_}"), self.u(f"soff{s_}"), self.p("pa")
            k.ins(f"mul.wide.u32 {go}, {ii}, {self.cbytes};")
            k.ins(f"mad.wide.u32 {go}, {c}, 16, {go};")
            k.ins(f"mad.lo.u32 {sof}, {ii}, {self.mmax}, {q};")
            k.ins(f"shl.b32 {sof}, {sof}, 4;")
            k.ins(f"mad.lo.u32 {tmp}, {ii}, {self.cch}, {c};")
            k.ins(f"mul.wide.u32 {pa}, {tmp}, {V * 4};")
            k.ins(f"add.u64 {pa}, {pa}, {self.pphi};")
            regs = []
            for o in range(n):
                if o:
                    k.ins(f"add.u64 {pa}, {pa}, {self.kb};")
                regs.append(load_f32_run(k, f"ph{s_}_{o}_", pa, V))
            self.vs.append(pv)
            self.goff.append(go)
            self.soff.append(sof)
            self.ph.append(regs)

    def issue(self, tile_r, stage_r, tag):
        """cp.async of tile tile_r's slice (this thread's items, TT rows) into stage stage_r, then
        commit (an empty group past the last tile keeps the group count uniform)."""
        k, pr, u, p = self.k, self.pr, self.u, self.p
        k.ins(f"setp.ge.u32 {pr}, {tile_r}, {self.ntiles};")
        k.ins(f"@{pr} bra {tag}_COMMIT;")
        dst, t0, row = u("cpd"), u("ct0"), p("crow")
        k.ins(f"mad.lo.u32 {dst}, {stage_r}, {self.sb}, {self.xt};")
        k.ins(f"mul.lo.u32 {t0}, {tile_r}, {self.TT};")
        tk, t64, src = u("ctk"), p("ctk64"), p("csrc")
        for tt in range(self.TT):
            k.ins(f"add.u32 {tk}, {t0}, {tt};")
            k.ins(f"min.u32 {tk}, {tk}, {self.last};")
            k.ins(f"cvt.u64.u32 {t64}, {tk};")
            k.ins(f"mad.lo.u64 {row}, {t64}, {self.sx}, {self.px};")
            for s_ in range(PC_SLOTS):
                d = u("cpdd")
                k.ins(f"add.u64 {src}, {row}, {self.goff[s_]};")
                k.ins(f"add.u32 {d}, {dst}, {self.soff[s_]};")
                k.ins(f"@{self.vs[s_]} cp.async.cg.shared.global [{d}], [{src}], 16;")
            if tt + 1 < self.TT:
                k.ins(f"add.u32 {dst}, {dst}, {self.tstep};")
        k.label(f"{tag}_COMMIT")
        k.ins("cp.async.commit_group;")

    def ring_prologue(self):
        k = self.k
        self.tile, self.stage, self.nxt = tile, stage, nxt = self.u("tile"), self.u("stage"), self.u("ntile")
        k.comment(f"prologue: tiles cid + j ncl into stages j < {PC_STAGES}")
        k.ins(f"mov.u32 {tile}, {self.cid};")
        for j in range(PC_STAGES):
            k.ins(f"mad.lo.u32 {nxt}, {self.ncl}, {j}, {self.cid};")
            k.ins(f"mov.u32 {stage}, {j};")
            self.issue(nxt, stage, f"PRO{j}")
        k.ins(f"mov.u32 {stage}, 0;")
        self.kk = self.u("kk")
        k.ins(f"mov.u32 {self.kk}, 0;")

    def push(self, acc):
        """Thread j's partial to gat[b][rank][j] of every CTA of the cluster (st.async)."""
        k, u = self.k, self.u
        la, ra, rb = u("pla"), u("pra"), u("prb")
        k.ins(f"mad.lo.u32 {la}, {self.rank}, {self.RED}, {self.tid};")
        k.ins(f"mad.lo.u32 {la}, {la}, 4, {self.gab};")
        for r in range(self.cl):
            k.ins(f"mapa.shared::cluster.u32 {ra}, {la}, {r};")
            k.ins(f"mapa.shared::cluster.u32 {rb}, {self.gbb}, {r};")
            k.ins(f"st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [{ra}], {acc}, [{rb}];")

    def gather(self, ttr, ir, sp, sss):
        """Wait for gbar[b], then sp, sss = the cl CTAs' partials in gat[b] summed in rank order."""
        k, u, n, CL_, RED, gab = self.k, self.u, self.n, self.cl, self.RED, self.gab
        st64, par, ok = self.p("mbst"), u("par"), k.reg("pred", "wok")
        k.comment(f"thread 0 arms gbar[b] for the {CL_ * RED * 4} bytes of this tile (bytes that came early count)")
        k.ins(f"setp.ne.u32 {ok}, {self.tid}, 0;")
        k.ins(f"@{ok} bra ARM_END;")
        k.ins(f"mbarrier.arrive.expect_tx.shared::cta.b64 {st64}, [{self.gbb}], {CL_ * RED * 4};")
        k.label("ARM_END")
        k.ins(f"bfe.u32 {par}, {self.kk}, 1, 1;")
        k_mbarrier_wait(k, ok, self.gbb, par, "GATHER_WAIT")
        ip, iss, pw = u("ip"), u("iss"), self.f("rpv")
        k.ins(f"mad.lo.u32 {ip}, {ttr}, {n + 1}, {ir};")
        k.ins(f"mad.lo.u32 {ip}, {ip}, 4, {gab};")
        k.ins(f"mad.lo.u32 {iss}, {ttr}, {n + 1}, {n};")
        k.ins(f"mad.lo.u32 {iss}, {iss}, 4, {gab};")
        for r in range(CL_):
            dst = sp if r == 0 else pw
            k.ins(f"ld.shared.f32 {dst}, [{ip}+{r * RED * 4}];")
            if r:
                k.ins(f"add.f32 {sp}, {sp}, {pw};")
            dst = sss if r == 0 else pw
            k.ins(f"ld.shared.f32 {dst}, [{iss}+{r * RED * 4}];")
            if r:
                k.ins(f"add.f32 {sss}, {sss}, {pw};")

    def stage_row(self, ttu, q_):
        """Phase 2's address of (token ttu, stream 0, chunk q_) in the stage, and the stream step."""
        k = self.k
        ta, sstep = self.u("ta"), self.u("sstep")
        k.ins(f"mad.lo.u32 {ta}, {ttu}, {self.tstep}, {self.st0};")
        k.ins(f"mad.lo.u32 {ta}, {q_}, 16, {ta};")
        k.ins(f"shl.b32 {sstep}, {self.mmax}, 4;")
        return ta, sstep

    def tile_loop(self):
        k, n, TT, pr = self.k, self.n, self.TT, self.pr
        P, SS = tile_sums(k, TT, n)
        k.label("TILE_LOOP")
        k.ins(f"setp.ge.u32 {pr}, {self.tile}, {self.ntiles};")
        k.ins(f"@{pr} bra TILE_END;")
        k.comment(f"this tile's copies (the oldest of {PC_STAGES} groups) have landed for this thread's own items")
        k.ins(f"cp.async.wait_group {PC_STAGES - 1};")
        zero_tile_sums(k, P, SS)
        self.st0 = st0 = self.u("st0")
        k.ins(f"mad.lo.u32 {st0}, {self.stage}, {self.sb}, {self.xt};")
        k.comment("phase 1: partial projections and sums of squares of the tile's tokens over this thread's items")
        for s_ in range(PC_SLOTS):
            k.ins(f"@!{self.vs[s_]} bra P1_S{s_}_END;")
            a = self.u("xa")
            k.ins(f"add.u32 {a}, {st0}, {self.soff[s_]};")
            head_tile_dots(k, self.dtype, a, self.tstep, self.V, self.ph[s_], SS, P)
            k.label(f"P1_S{s_}_END")
        k.comment("the CTA's partials go to every CTA of the cluster: st.async into gat[b][rank][j] of CTA r,")
        k.comment("completing bytes on its mbarrier gbar[b] (b = local tile index mod 2). No cluster barrier: a")
        k.comment("CTA fills gat[b] for tile k only after it received every CTA's partials of tile k-1, which")
        k.comment("each CTA sends after it has read its gat[b] of tile k-2")
        b_, self.gab, self.gbb = self.u("gb_b"), self.u("gat_b"), self.u("gbar_b")
        k.ins(f"and.b32 {b_}, {self.kk}, 1;")
        k.ins(f"mad.lo.u32 {self.gab}, {b_}, {self.cl * self.RED * 4}, {self.ga};")
        k.ins(f"mad.lo.u32 {self.gbb}, {b_}, 8, {self.gb};")
        cluster_reduce(k, P, SS, TT, n, self.NW, self.tid, self.lane, self.warp, self.tmp, pr, sink=self.push)
        cluster_coeffs(k, TT, n, self.tid, self.tmp, pr, None, self.psc, self.pbase, self.inv_k, self.eps_n,
                       self.eps_hc, gather=self.gather)
        t0 = self.u("t0")
        k.ins(f"mul.lo.u32 {t0}, {self.tile}, {TT};")
        head_mix(k, self.dtype, n, self.V, TT, PC_THREADS, self.tid, self.it, self.q, self.m, t0, self.tokens,
                 self.tmp, self.lo, self.so, self.po, pr, self.stage_row, "stage")
        self.next_tile()

    def next_tile(self):
        k, pr, stage = self.k, self.pr, self.stage
        k.comment("the stage and shs[] are free once every thread is here: refill the stage with the tile")
        k.comment(f"{PC_STAGES} steps ahead")
        k.ins("bar.sync 0;")
        k.ins(f"mad.lo.u32 {self.nxt}, {self.ncl}, {PC_STAGES}, {self.tile};")
        self.issue(self.nxt, stage, "REFILL")
        k.ins(f"add.u32 {self.tile}, {self.tile}, {self.ncl};")
        k.ins(f"add.u32 {stage}, {stage}, 1;")
        k.ins(f"setp.eq.u32 {pr}, {stage}, {PC_STAGES};")
        k.ins(f"selp.u32 {stage}, 0, {stage}, {pr};")
        k.ins(f"add.u32 {self.kk}, {self.kk}, 1;")
        k.ins("bra.uni TILE_LOOP;")
        k.label("TILE_END")

    def build(self):
        k, n, TT, RED = self.k, self.n, self.TT, self.RED
        self.setup()
        self.slots()
        self.ring_prologue()
        self.tile_loop()
        k.comment("leave together (no CTA's shared memory may vanish while the cluster still runs)")
        k.ins("barrier.cluster.arrive.release;")
        k.ins("barrier.cluster.wait.acquire;")
        k.ins("ret;")
        name = f"mhc_head_pc{self.cl}_{self.dtype}_n{n}"
        return name, entry(name, k.body(), HEAD.size, [f".reqntid {PC_THREADS}, 1, 1", ".maxnreg 128",
                                                f".reqnctapercluster {self.cl}, 1, 1"],
                           [f".shared .align 16 .f32 sred[{self.NW * max(32, 1 << (RED - 1).bit_length())}];",
                            ".shared .align 8 .b64 gbar[2];", f".shared .align 16 .f32 gat[{2 * self.cl * RED}];",
                            f".shared .align 16 .f32 shs[{TT * n}];"])


def head_pc_kernel(dtype, n, CL, TT):
    return HeadPcKernel(dtype, n, CL, TT).build()


def ptx_text():
    out = [prologue("8.8"), """
// ==============================================================================================
// head (docs/math.md "head", DeepSeek-V4 hc_head), sm_90a. Written by python3 -m asm.gen (asm/gen/head.py).
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
// Measured (H200): T=8192 n=4 C=4096 142 us = 56% of copy (1.79x floor): each CTA alternates a
//   DRAM phase and an L2 phase, so DRAM idles part of the time (`.maxnreg 128` for 2 CTAs/SM:
//   56% against 53%); n=32: 12x floor (phi, 5 MB, re-read per 2-token CTA). The kernel for
//   T > 512 (n <= 4), T > 256 (n = 8) and every T at n >= 16.
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
// Measured (H200, bf16, copy 4187 GB/s; us stream / back-to-back / graph; mhc_head_* -> cluster):
//   n=4 C=4096: T=1 15.4 -> 7.9 / 5.7 / 4.8 (cld), T=16 18.1 -> 8.2 / 6.4 / 5.3, T=64 18.2 ->
//   8.9, T=256 18.9 -> 10.9 (cl); C=7168: T=1 22.9 -> 9.6 / 7.8 / 6.9, T=256 29.0 -> 14.8;
//   n=8 C=1280: T=1 17.3 -> 8.0 / 6.0 / 5.2, T=256 19.2 -> 11.3. At T >= 1024 the cluster kernel
//   is no faster (T=8192 C=4096: 140.6 us with register loads, 149.3 with cp.async, vs 142.2):
//   keeping x on chip does not lift the 56% ceiling (docs/kernels/head.md).
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
//   waits for the in-flight ring copies: 153.8 us with it). Reuse of gat[b] is safe by
//   causality: a CTA sends tile k's partials only after receiving every CTA's tile k-1, which
//   each sends after reading its gat[b] of tile k-2. Registers: phi 2 x n x V, P TT (n+1);
//   .maxnreg 128 (n = 4 uses 128: 2 CTAs per SM at C = 4096).
// Measured (H100, bf16, copy 2979 GB/s): T=8192 C=4096 pc4 130.3 us = 86.4% of copy
//   (8-CTA clusters with 8-token tiles: 135.4 us = 82.7%; mhc_head_bf16_n4: 195.6 us, 57%),
//   T=4096 71.5 us (79%); C=7168 T=8192 pc8 232.3 us = 84.8% (with 8-token tiles 243-248 us: a
//   168 KB ring, one CTA per SM). ncu (8-CTA clusters, T=1024): 30 clusters resident (240 CTAs,
//   2 per SM: 12 SMs idle), which the 4-CTA clusters avoid. Alternatives measured slower: phase 1
//   of tile k+1 during tile k's cluster barrier (158 us, and racecheck hazards), 4 stages (1 CTA per SM at C=4096: 230 us), phase 1 on tensor cores (bf16 mma
//   m16n8k16, phi hi + lo, the squares from x times x; lane-per-item copies in 32-byte pieces:
//   154 us, docs/kernels/head.md; the kernel is not instruction-bound),
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


def generate(experiments):
    """head.ptx (no experiments)."""
    return {"asm/ptx/sm90/head.ptx": ptx_text()}


def catalogue_rows():
    out, entry = catalogue.sm90_rows()
    big, gd = catalogue.ANY_C, catalogue.GRID_DEPENDENCY

    G = catalogue.geometry
    head_p = HEAD.oneline()
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
                      [dtype], [n], (PC_TMIN, TMAX), tt, PC_THREADS,
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
                  (1, TMAX), tt, THREADS,
                  f"head for n={n}: {tt} tokens per CTA share each phi chunk (registers), deterministic CTA reduction",
                  "head", G(channels_per_thread=vchan(n), traits=[gd]), cap=128, params=head_p)
    return out
