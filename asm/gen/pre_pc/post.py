"""The fused entries' post math: x' = post(x) of a landed stage on the tensor cores."""

from ..blocks import MMA_BF16, MMA_BF16_K8, mma, split_bf16_via
from .constants import HC, NCW, NPW, NW, PAIR_F_STAGES, STAGES, TT


# lane l's f row (token l % 4) of a group: slice 4 of the token's row, or (the fused pair entry) a
# row of the f ring, one f slice per token
F_ROW_SLICE = """    shl.b32 %r4, %SS, 2;
    mad.lo.u32 %xlf, %r3, %tstride, %r4;    // f row (token l % 4)"""
F_ROW_RING = """    mul.lo.u32 %xlf, %r3, %SS;              // f row (token l % 4) of the f ring"""


def post_lane_consts(pw, nw, fring=False):
    """Fused entry, a warp that computes x' (`pw`: its index among the warps sharing the n-tiles):
    the lane constants of post_mma (row offsets of its ldmatrix / stmatrix lane, its h_res /
    h_post words, its n-tile range)."""
    return f"""
    // x' lane constants: lane l gives row (token l/4 % 4, stream l % 4) to ldmatrix / stmatrix
    // and f row (token l % 4); fragment lane (g, q) reads R words (token g/4, k = g % 4, j = 2(q%2) +
    // 0/1) and h_post[token g/4][k]
    mul.lo.u32 %xn0, {pw}, %NT;
    add.u32 %xn1, %xn0, %NT;
    div.u32 %xn0, %xn0, {nw};               // this warp's n-tiles: [pw NT / nw, (pw + 1) NT / nw)
    div.u32 %xn1, %xn1, {nw};
    mov.b32 %zr, 0;
    mov.f32 %fz, 0f00000000;
    shr.u32 %r2, %lane, 2;
    and.b32 %r2, %r2, 3;
    and.b32 %r3, %lane, 3;
    mul.lo.u32 %xlr, %r2, %tstride;
    mad.lo.u32 %xlr, %r3, %SS, %xlr;        // x row (token l/4 % 4, stream l % 4)
    shr.u32 %r4, %lane, 4;
    mad.lo.u32 %xlr, %r4, 16, %xlr;         // lanes 16..31: the next n-tile (ldmatrix / stmatrix .x4)
{F_ROW_RING if fring else F_ROW_SLICE}
    shr.u32 %r4, %lane, 3;
    and.b32 %r4, %r4, 1;
    mad.lo.u32 %xlf, %r4, 16, %xlf;         // lanes 8..15: the next n-tile (f's ldmatrix .x2)
    shr.u32 %r2, %gq, 2;                    // g / 4: token of row g (0, 1)
    and.b32 %r3, %gq, 3;                    // k
    mul.lo.u32 %hta, %r2, {HC};
    shl.b32 %hpk, %r3, 2;                   // h_post[k]
    and.b32 %r4, %q, 1;
    shl.b32 %r4, %r4, 1;                    // j0 = 2 (q % 2)
    shl.b32 %r5, %r4, 4;
    add.u32 %r5, %r5, %hpk;                 // V4: R[j0][k] at 16 j0 + 4 k (column k)
    shl.b32 %r6, %r3, 4;
    shl.b32 %r7, %r4, 2;
    add.u32 %r6, %r6, %r7;                  // Paper: R[k][j0] at 16 k + 4 j0 (row k)
    selp.u32 %hro0, %r6, %r5, %p_paper;
    add.u32 %hro0, %hro0, 16;               // h_res after h_post[4]
    selp.u32 %hrs, 4, 16, %p_paper;         // to j0 + 1
    shr.u32 %r4, %q, 1;
    setp.eq.u32 %p_nz, %r2, %r4;            // the block-diagonal: row token = column token
    and.b32 %r4, %q, 1;
    setp.eq.u32 %p_qe, %r4, 0;
    setp.lt.u32 %p_qlo, %q, 2;              // k8 columns 0..3: hi parts, 4..7: lo parts
    setp.ne.u32 %p_hi16, %r2, 0;"""


def post_mma(k, tag, nw, g_lo, g_hi):
    """Fused entry, after the stage of tile %tile landed (%st0): x' = post(x, f, h_post, h_res)
    (docs/math.md "post") of the 4-token groups g_lo .. g_hi - 1 of the tile, on the tensor cores,
    in place in the stage (the mix stores it to x_out); then an arrival on xready[%stage].
    Per group and 8-channel n-tile nt (this warp takes [pw NT / nw, (pw + 1) NT / nw), four at
    a time while it can):
      D[16 x 8] = A2 . B2 (m16n8k8) + A_lo . B + A_hi . B (m16n8k16), rows (token tl, stream k),
    B = x rows (tl, j) (ldmatrix.trans; K order 4 tl + j), A = the block-diagonal of the 4
    tokens' R (V4: R[j][k], Paper: R[k][j]) split into bf16 hi + lo (R to 2^-17: x is exact in
    bf16, the products exact, f32 accumulation), B2 = f of the 4 tokens twice, A2 = their h_post
    hi (columns 0..3) and lo (4..7). D -> bf16 -> stmatrix over the x rows it was read from."""
    L = []
    e = L.append
    if g_lo >= g_hi:
        return """    mov.u32 %r1, xready;
    mad.lo.u32 %r1, %stage, 8, %r1;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r1];   // no x' share"""
    skip = "\n    bra XM_END;" if "noxf" in k.exp else ""
    e(f"""    // ---- post: x' of 4-token groups {g_lo} .. {g_hi - 1} of tile %tile (in place){skip}
    mov.u32 %xg, {g_lo};
XM_G:
    shl.b32 %r2, %xg, 2;                    // tb: the group's first token in the tile
    mad.lo.u32 %r3, %tstride, {TT}, %st0;
    mad.lo.u32 %r3, %r2, {HC}, %r3;
    add.u32 %r4, %r3, %hta;                 // (h_post, h_res) of token tb + g/4
    add.u32 %r5, %r4, %hro0;
    ld.shared.f32 %xr0, [%r5];
    ld.shared.f32 %xr2, [%r5+{2 * HC}];
    add.u32 %r5, %r5, %hrs;
    ld.shared.f32 %xr1, [%r5];
    ld.shared.f32 %xr3, [%r5+{2 * HC}];
    add.u32 %r5, %r4, %hpk;
    ld.shared.f32 %xh0, [%r5];
    ld.shared.f32 %xh1, [%r5+{2 * HC}];""")
    for d, a, b in (("0", "%xr0", "%xr1"), ("1", "%xr2", "%xr3")):
        e(f"""{split_bf16_via(f"%ah{d}", f"%al{d}", a, b, "%r6", "%f0", "%f1", "%f0", "%f1", interleaved=True)}
    selp.b32 %ah{d}, %ah{d}, 0, %p_nz;
    selp.b32 %al{d}, %al{d}, 0, %p_nz;""")
    for d, h in (("0", "%xh0"), ("1", "%xh1")):
        keep = "%r6, 0" if d == "0" else "0, %r6"
        e(f"""    cvt.rn.bf16x2.f32 %r6, %fz, {h};        // bf16(h_post) in the low half
    shl.b32 %r7, %r6, 16;
    mov.b32 %f0, %r7;
    sub.f32 %f0, {h}, %f0;
    cvt.rn.bf16x2.f32 %r7, %fz, %f0;        // its lo part
    selp.b32 %r6, %r6, %r7, %p_qlo;
    @%p_hi16 shl.b32 %r6, %r6, 16;          // column of token g/4 (odd: the high half)
    selp.b32 %a2{d}, {keep}, %p_qe;          // row g: q even; row g + 8: q odd""")
    def tiles(n):
        """x' of n (1 or 4) consecutive n-tiles from %pxa / %pfa: loads, then the n mma chains
        interleaved, then the stores (x4 / x2 loads cover two n-tiles: lanes 16.. / 8.. add 16)."""
        T_ = []
        if n == 1:
            T_.append("    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%xm0, %xm1}, [%pxa];")
            T_.append("    ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%xm2}, [%pfa];")
            B = [("%xm0", "%xm1", "%xm2")]
        else:
            for h in range(n // 2):
                m = 6 * h
                T_.append(f"    ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%xm{m}, %xm{m + 1}, %xm{m + 2}, %xm{m + 3}}}, [%pxa+{32 * h}];")
                T_.append(f"    ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {{%xm{m + 4}, %xm{m + 5}}}, [%pfa+{32 * h}];")
            B = []
            for h in range(n // 2):
                m = 6 * h
                B += [(f"%xm{m}", f"%xm{m + 1}", f"%xm{m + 4}"), (f"%xm{m + 2}", f"%xm{m + 3}", f"%xm{m + 5}")]
        D = [[f"%xd{4 * i + c}" for c in range(4)] for i in range(n)]
        for i in range(n):
            T_.append(f"    {mma(MMA_BF16_K8, D[i], ['%a20', '%a21'], [B[i][2]], ['%fz'] * 4)}")
        for part in ("al", "ah"):
            for i in range(n):
                T_.append(f"    {mma(MMA_BF16, D[i], [f'%{part}0', '%zr', '%zr', f'%{part}1'], B[i][:2], D[i])}")
        for i in range(n):
            T_.append(f"    cvt.rn.bf16x2.f32 %xv{2 * i}, %xd{4 * i + 1}, %xd{4 * i};")
            T_.append(f"    cvt.rn.bf16x2.f32 %xv{2 * i + 1}, %xd{4 * i + 3}, %xd{4 * i + 2};")
        if n == 1:
            T_.append("    stmatrix.sync.aligned.m8n8.x2.shared.b16 [%pxa], {%xv0, %xv1};")
        else:
            for h in range(n // 2):
                v = 4 * h
                T_.append(f"    stmatrix.sync.aligned.m8n8.x4.shared.b16 [%pxa+{32 * h}], {{%xv{v}, %xv{v + 1}, %xv{v + 2}, %xv{v + 3}}};")
        return "\n".join(T_)

    F_GROUP = """
    mad.lo.u32 %r8, %r2, %SS, %fst0;
    mad.lo.u32 %r8, %xn0, 16, %r8;
    add.u32 %pfa, %r8, %xlf;                // f ring: the group's f rows (stage %fst0)""" if k.fring else """
    add.u32 %pfa, %r9, %xlf;"""
    e(f"""    mad.lo.u32 %r8, %r2, %tstride, %st0;
    mad.lo.u32 %r9, %xn0, 16, %r8;
    add.u32 %pxa, %r9, %xlr;{F_GROUP}
    mov.u32 %xnt, %xn0;
XM_Q:
    // four n-tiles at once (independent mma chains: one tile's chain alone is latency-bound)
    add.u32 %r12, %xnt, 4;
    setp.gt.u32 %p1, %r12, %xn1;
    @%p1 bra XM_N;
{tiles(4)}
    add.u32 %pxa, %pxa, 64;
    add.u32 %pfa, %pfa, 64;
    mov.u32 %xnt, %r12;
    bra XM_Q;
XM_N:
    setp.ge.u32 %p1, %xnt, %xn1;
    @%p1 bra XM_GN;
{tiles(1)}
    add.u32 %pxa, %pxa, 16;
    add.u32 %pfa, %pfa, 16;
    add.u32 %xnt, %xnt, 1;
    bra XM_N;
XM_GN:
    add.u32 %xg, %xg, 1;
    setp.lt.u32 %p1, %xg, {g_hi};
    @%p1 bra XM_G;
XM_END:
    mov.u32 %r1, xready;
    mad.lo.u32 %r1, %stage, 8, %r1;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r1];   // x' of this warp's n-tiles is in the stage
""")
    return "\n".join(L).replace("XM_", f"{tag}_")


def coef_post_prologue(k):
    """Fused entry, coefficient warp: the lane constants of its x' share (the last CWT / 4
    4-token groups of each tile of its parity, every n-tile)."""
    assert k.cwt % 4 == 0 and k.cwt <= TT
    return f"""
    // x' share: tokens {TT - k.cwt} .. {TT - 1} of the tiles of this warp's rounds{post_lane_consts(0, 1)}"""


def coef_post_share(k):
    """Fused entry, coefficient warp, top of round kk: its share of x' of tile kk (if the cluster
    has one), before barrier 2 of round kk: the math warps wait for it (xready) before the mma
    of tile kk, and it starts right after the round kk - 2 coefficients."""
    assert STAGES == 4
    return f"""
    setp.ge.u32 %p1, %kk, %nr;              // round nr only finishes tile nr - 1
    @%p1 bra CX_SKIP;
    and.b32 %stage, %kk, {STAGES - 1};
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mad.lo.u32 %tile, %kk, %ncl, %cid;
    mov.u32 %r1, full;
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, %kk, 2;
    and.b32 %r2, %r2, 1;                    // fill kk / {STAGES} of the stage: that phase's parity
CX_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra CX_WAIT;
{post_mma(k, "CX", 1, (TT - k.cwt) // 4, TT // 4)}
CX_SKIP:"""


def post_warps(k):
    """Fused entry, warps NW + NCW ..: for every tile of the cluster in order, wait for its stage
    (full[s]), compute x' of its first (TT - CWT) / 4 4-token groups (the n-tiles alternate
    between the warps) and arrive on xready[s], which the math warps wait for instead of
    full[s]. They run up to the ring's depth ahead of the math warps, so the post math overlaps
    the mma, exchange and mix of earlier tiles."""
    F_START = f"""
    mov.u32 %fstg, 0;                       // f ring: stage of the tile (tile round % {PAIR_F_STAGES})""" if k.fring else ""
    F_STAGE = f"""
    mad.lo.u32 %fst0, %sstage, {k.stages}, %dsm;         // the f ring, after the x stages
    mul.lo.u32 %r2, %fstg, %SS;
    mad.lo.u32 %fst0, %r2, {TT}, %fst0;""" if k.fring else ""
    F_NEXT = f"""
    add.u32 %fstg, %fstg, 1;
    setp.eq.u32 %p1, %fstg, {PAIR_F_STAGES};
    selp.u32 %fstg, 0, %fstg, %p1;""" if k.fring else ""
    return f"""
    // ================= post warps: x' of each landed stage ======================================
POST_WARP:
    sub.u32 %r1, %warp, {NW + NCW};{post_lane_consts("%r1", NPW, k.fring)}
    mov.u32 %tile, %cid;
    mov.u32 %stage, 0;
    mov.u32 %phb, 0;{F_START}
POST_LOOP:
    setp.ge.u32 %p1, %tile, %ntiles;
    @%p1 bra TILE_END;
    mad.lo.u32 %st0, %stage, %sstage, %dsm;{F_STAGE}
    mov.u32 %r1, full;
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, %phb, %stage;
    and.b32 %r2, %r2, 1;
POST_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra POST_WAIT;
    mov.u32 %r2, 1;
    shl.b32 %r2, %r2, %stage;
    xor.b32 %phb, %phb, %r2;
{post_mma(k, "XF", NPW, 0, (TT - k.cwt) // 4)}
    add.u32 %tile, %tile, %ncl;
    add.u32 %stage, %stage, 1;
    setp.eq.u32 %p1, %stage, {k.stages};
    selp.u32 %stage, 0, %stage, %p1;{F_NEXT}
    bra.uni POST_LOOP;"""


def xprime(k, tag, round_reg):
    """x' of round `round_reg` (if < nr): wait for its stage, post_mma, xready."""
    return f"""    setp.ge.u32 %p1, {round_reg}, %nr;
    @%p1 bra {tag}_SKIP;
    and.b32 %stage, {round_reg}, {STAGES - 1};
    mad.lo.u32 %tile, {round_reg}, %ncl, %cid;
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mov.u32 %r1, full;
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, {round_reg}, 2;
    and.b32 %r2, %r2, 1;                    // fill round / {STAGES} of the stage
{tag}_FULL:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra {tag}_FULL;
{post_mma(k, tag, NPW, 0, (TT - k.cwt) // 4)}
{tag}_SKIP:"""
