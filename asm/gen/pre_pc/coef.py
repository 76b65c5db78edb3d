"""The coefficient warps: the own token's sums, the pair exchange, h_pre / inv_rms / h_post, and the
h_res Sinkhorn batch."""

from .. import sinkhorn
from ..pre_decode import inv_rms, sigmoid
from .constants import (
    ARG, BAR2, BAR2_ID, CL, HXB, HXG, HX_SLOTS, NW, OWN_SLOT, PAIR_HEAD, PAIR_POLL_SLEEP, PAIR_ROW,
    SKB, SK_A, SK_Z, SLOTS, SS_SLOT, TT)
from .sums import ordered_sum, wait_gather
from .post import post_warps


def coef_lanes():
    """Lanes 0..3 (lane i: row i): h_post of the CTA's own token and its z_res row into the h_res
    batch (sk_batch runs the Sinkhorn). The other lanes wait at PC_CB_DONE. Computing the rows on
    every lane instead (the warp never split) would take the fused entry past 168 registers."""
    n = 4
    L = []
    e = L.append

    e("""PC_CBL:
    // lane i < 4: S_j = the h_res logit (i, j) -> z
    shl.b32 %r16, %lane, 4;
    add.u32 %r17, %r16, %lgb;
    mov.u32 %r18, sm_base;
    add.u32 %r18, %r18, %r16;""")
    for j in range(n):
        e(f"""    ld.shared.f32 %g1, [%r17+{4 * (1 + 2 * n + j)}];
    ld.shared.f32 %g2, [%r18+{4 * (2 * n + j)}];
    mul.f32 %g1, %g1, %inv_t;
    fma.rn.f32 %S{j}, %g1, %sc2, %g2;""")
    e(f"""    // h_post[i] = 2 sigma(z_post i) (post_body's operations: the same bits)
    shl.b32 %r22, %lane, 2;
    add.u32 %r23, %r22, %lgb;
    ld.shared.f32 %tr6, [%r23+{4 * (1 + n)}];
    mov.u32 %r23, sm_base;
    add.u32 %r23, %r23, %r22;
    ld.shared.f32 %tr7, [%r23+{4 * n}];
    mul.f32 %tr6, %tr6, %inv_t;
    fma.rn.f32 %tr6, %tr6, %sc1, %tr7;
{sigmoid("%tr6", "%tr7")}
    add.f32 %tr7, %tr7, %tr7;
    cvt.u64.u32 %rd2, %r22;
    add.u64 %rd2, %hpo, %rd2;
    st.global.f32 [%rd2], %tr7;
    // z_res row i -> the batch's slot (kk / 2) % {SKB}; lane 0: the token's h_res address
    bfe.u32 %r18, %kk, 1, {SKB.bit_length() - 1};
    shl.b32 %r17, %r18, 6;
    add.u32 %r17, %r17, %lgb;
    add.u32 %r17, %r17, %r16;
    st.shared.v4.f32 [%r17+{SK_Z}], {{%S0, %S1, %S2, %S3}};
    setp.eq.u32 %p1, %lane, 0;
    shl.b32 %r17, %r18, 3;
    add.u32 %r17, %r17, %lgb;
    @%p1 st.shared.u64 [%r17+{SK_A}], %hro;""")
    return "\n".join(L)


def sk_clear():
    """Lanes 0..SKB-1: the batch's h_res addresses = 0 (every slot empty)."""
    return f"""    setp.lt.u32 %p1, %lane, {SKB};
    shl.b32 %r16, %lane, 3;
    add.u32 %r16, %r16, %lgb;
    mov.u64 %rd1, 0;
    @%p1 st.shared.u64 [%r16+{SK_A}], %rd1;"""


def sk_batch():
    """The h_res of the batch's tokens (every lane): lane b takes slot b's z_res matrix, the
    one-thread Sinkhorn (sinkhorn.unrolled, V4 in row-column pairs) runs on all SKB slots at
    once, the lanes of slots with an address store their matrices, and the slots are cleared.
    Empty slots compute on stale words and store nothing."""
    L = []
    e = L.append
    e(f"""PC_SK_BATCH:
    bar.warp.sync -1;
    shl.b32 %r16, %lane, 6;
    add.u32 %r16, %r16, %lgb;""")
    for i in range(4):
        e(f"    ld.shared.v4.f32 {{%S{4 * i}, %S{4 * i + 1}, %S{4 * i + 2}, %S{4 * i + 3}}}, [%r16+{SK_Z + 16 * i}];")
    e(f"""    shl.b32 %r17, %lane, 3;
    add.u32 %r17, %r17, %lgb;
    ld.shared.u64 %hro, [%r17+{SK_A}];
    setp.ne.u64 %p1, %hro, 0;
    vote.sync.any.pred %p1, %p1, 0xffffffff;
    @!%p1 bra PC_SK_DONE;                   // every slot empty (the pair's other half, past T)""")
    sinkhorn.unrolled(4, lambda i, j: f"%S{4 * i + j}", e, "PC_SKB_", pair=True)
    e("""    setp.eq.u64 %p1, %hro, 0;
    @%p1 bra PC_SK_STORED;                  // an empty slot""")
    for q in range(16):
        e(f"    st.global.f32 [%hro+{4 * q}], %S{q};")
    e("""PC_SK_STORED:
    bar.warp.sync -1;                       // every lane read its slot's address""")
    e(sk_clear())
    e("PC_SK_DONE:")
    return "\n".join(L)


def hx_broadcast(k):
    """TMA entry, coefficient warp: h_pre of the own token to every CTA's hin (HX in the header);
    lane 0 stores it and inv_rms."""
    HXS = "".join(f"""
    ld.shared.f32 %f4, [%lgb+{4 * (1 + i)}];
    ld.shared.f32 %f6, [sm_base+{4 * i}];
    mul.f32 %f5, %f4, %f2;
    fma.rn.f32 %f5, %f5, %sc0, %f6;
{sigmoid("%f5", f"%w{i}")}
    @!%p_paper add.f32 %w{i}, %w{i}, %eps_hc;""" for i in range(4))
    HX_BCAST = f"""
    // h_pre of the own token (lanes 0..15 alike) -> hin[(kk-1) % {HXB}][rank] of CTA lane (every
    // CTA's mix waits for all {CL}, past T too); lane 0 stores it and inv_rms (tokens < T)
    setp.ge.u32 %p1, %lane, {CL};
    @%p1 bra HX_BC_END;
    ld.shared.f32 %f1, [%lgb];
{inv_rms("%f1", "%f2")}{HXS}
    sub.u32 %r13, %kk, 1;
    and.b32 %r13, %r13, {HXB - 1};
    mov.u32 %r14, hin;
    mad.lo.u32 %r14, %r13, {TT * 16}, %r14;
    mad.lo.u32 %r14, %rank, 16, %r14;
    mov.u32 %r15, hbar;
    mad.lo.u32 %r15, %r13, 8, %r15;
    mapa.shared::cluster.u32 %r14, %r14, %lane;
    mapa.shared::cluster.u32 %r15, %r15, %lane;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r14], {{%w0, %w1, %w2, %w3}}, [%r15];
    setp.ne.u32 %p1, %lane, 0;
    setp.ge.or.u32 %p1, %r12, %T, %p1;{PAIR_HALF0 if k.pair else ""}
    @%p1 bra HX_BC_END;
    mul.wide.u32 %rd1, %r12, 4;
    ld.param.u64 %rd2, [p_args+{ARG['inv_rms']}];
    add.u64 %rd2, %rd2, %rd1;
    st.global.f32 [%rd2], %f2;
    mul.wide.u32 %rd1, %r12, 16;
    ld.param.u64 %rd2, [p_args+{ARG['h_pre']}];
    add.u64 %rd2, %rd2, %rd1;
    st.global.v4.f32 [%rd2], {{%w0, %w1, %w2, %w3}};
HX_BC_END:"""
    return HX_BCAST


PAIR_HALF0 = """
    or.pred %p1, %p1, %p_ns;                // pair entry: the other half stores this round's coefficients"""


def prev_tile(reg):
    """%reg = tile kk-1, the tile this cluster finishes in round kk (it walks cid, cid + ncl, ...)."""
    return f"""
    sub.u32 {reg}, %kk, 1;
    mad.lo.u32 {reg}, {reg}, %ncl, %cid;      // tile kk-1"""


def pair_row(half, what):
    """Pair entry, lanes 0..6 of the coefficient warp of round kk: %rd1 = the lane's 4 words (32
    bytes at 32 lane) in the exchange row of tile kk-1's own token of half `half` (`what`): row
    ((tile 2 + half) 16 + rank) after the PAIR_HEAD bytes of the workspace region (one row per
    tile, token and half: no row is written twice in a call); %r16 = the call's tag."""
    return f"""
    // pair entry: the {what} half's exchange row of the token (tile kk-1) and the call's tag
    ld.param.u64 %xch, [p_args+{ARG['ws_part']}];{prev_tile("%r13")}
    mov.u32 %r16, %ptag;
    shl.b32 %r13, %r13, 1;
    add.u32 %r14, %r13, {half};
    mad.lo.u32 %r14, %r14, {CL}, %rank;
    mul.wide.u32 %rd1, %r14, {PAIR_ROW};
    add.u64 %rd1, %xch, %rd1;
    mul.wide.u32 %rd3, %lane, 32;
    add.u64 %rd1, %rd1, %rd3;
    add.u64 %rd1, %rd1, {PAIR_HEAD};               // the lane's 4 words, past the region's head"""


def pair_write():
    """Pair entry, lanes 0..6 of the coefficient warp: %v0..3 (this half's sums of the own token)
    to its exchange row, each as a tagged 8-byte word (the value's bits, then the tag), stored
    relaxed: a word carries its own proof of arrival, so no fence orders them."""
    return pair_row("%half", "own") + "".join(f"""
    mov.b32 %r17, %v{c};
    mov.b64 %pw{c}, {{%r17, %r16}};""" for c in range(4)) + """
    st.relaxed.gpu.global.v2.b64 [%rd1], {%pw0, %pw1};
    st.relaxed.gpu.global.v2.b64 [%rd1+16], {%pw2, %pw3};"""


def pair_add(k):
    """Pair entry, after barrier 2: lanes 0..6 poll the other half's 4 words of the own token until
    each carries the round's tag (relaxed loads: each word is checked by itself), and add the
    values to sm_lg's row. Both halves add the same two values (f32 addition commutes): the same
    bits in both. Stamp 6 (lane 0): the words are in."""
    exp = k.exp
    CHECK = "".join(f"""
    mov.b64 {{%r17, %r18}}, %pw{c};
    mov.b32 %u{c}, %r17;
    setp.ne.or.u32 %p3, %r18, %r16, %p3;""" for c in range(4))
    return pair_row("%r15", "other").replace("    add.u32 %r14, %r13, %r15;", """    xor.b32 %r15, %half, 1;
    add.u32 %r14, %r13, %r15;""").replace("    ld.param.u64 %xch", """    setp.ge.u32 %p1, %lane, 7;
    @%p1 bra PX_END;""" + (pair_write() if "xlate" in exp else "") + """
    ld.param.u64 %xch""") + """
PX_PEER:
    ld.relaxed.gpu.global.v2.b64 {%pw0, %pw1}, [%rd1];
    ld.relaxed.gpu.global.v2.b64 {%pw2, %pw3}, [%rd1+16];
    setp.ne.u32 %p3, 0, 0;""" + CHECK + (f"""
    @!%p3 bra PX_GOT;
    nanosleep.u32 {PAIR_POLL_SLEEP};
    bra PX_PEER;
PX_GOT:""" if "nowait" not in exp else "") + k.st(6, "coef") + """
    setp.eq.u32 %p2, %lane, 6;
    @%p2 ld.shared.f32 %f1, [%lgb];
    @%p2 add.f32 %f1, %f1, %u0;
    @%p2 st.shared.f32 [%lgb], %f1;         // ss
    @%p2 bra PX_END;
    mad.lo.u32 %r11, %lane, 16, %lgb;""" + "".join(f"""
    ld.shared.f32 %f1, [%r11+{4 + 4 * c}];
    add.f32 %f1, %f1, %u{c};
    st.shared.f32 [%r11+{4 + 4 * c}], %f1;""" for c in range(4)) + """
PX_END:
    bar.warp.sync -1;
    // tile kk-1's coefficients (h_pre, inv_rms stores; h_post and the h_res batch): half (tile / 8) % 2 (the
    // halves walk the tiles with different strides: the choice is the tile's, and bit 3 mixes
    // the two coefficient warps' rounds for strides 3 and 4)""" + prev_tile("%r13") + """
    bfe.u32 %r13, %r13, 3, 1;
    setp.ne.u32 %p_ns, %r13, %half;"""


# pair entry, the coefficient warps before their first round: the call count E (the region's first
# word; the previous call wrote it, and griddepcontrol.wait made it visible): this call's tag is
# 2 E + 1 (never 0, the fresh workspace's words)
PAIR_EPOCH = f"""
    ld.param.u64 %xch, [p_args+{ARG['ws_part']}];
    ld.relaxed.gpu.global.u32 %ptag, [%xch];
    shl.b32 %ptag, %ptag, 1;
    or.b32 %ptag, %ptag, 1;"""
# pair entry, after the closing cluster barrier: lane 0 of coefficient warp 0 in CTA 0 of every
# cluster counts its cluster finished (atom.inc wraps at Q - 1: the count is 0 again after each
# call); the last one, which sees Q - 1, counts the call (E + 1). Every read of E in the call came
# before: each cluster's before its closing barrier, ordered by the acq_rel count.
PAIR_COUNT = f"""
    setp.ne.u32 %p1, %tx, {32 * NW};
    setp.ne.or.u32 %p1, %rank, 0, %p1;
    @%p1 bra PAIR_COUNTED;
    ld.param.u64 %xch, [p_args+{ARG['ws_part']}];
    mov.u32 %r2, %nclusterid.x;
    sub.u32 %r2, %r2, 1;
    atom.acq_rel.gpu.global.inc.u32 %r1, [%xch+4], %r2;
    setp.ne.u32 %p1, %r1, %r2;
    @%p1 bra PAIR_COUNTED;
    shr.u32 %r1, %ptag, 1;
    add.u32 %r1, %r1, 1;
    st.relaxed.gpu.global.u32 [%xch], %r1;
PAIR_COUNTED:"""


def coef_warp(k):
    """The round's coefficient warp: the own token's row, barrier 2, inv_rms, h_post and the
    token's z_res rows (4 lanes), and every SKB rounds the h_res batch (all lanes)."""
    e, fused, MIXW, STAMPS, HX, st = k.e, k.fused, k.MIXW, k.STAMPS, k.HX, k.st
    wait_gather(e, "GAT_WAIT1", HX_SLOTS if HX else SLOTS, HXG if HX else 2)
    if HX:
        e(f"""    // gbar[(kk-1) % {HXG}]'s phase for tile kk-1 is complete: arm it for tile kk-1+{HXG} (the pushes
    // of that tile may land before: the phase cannot complete before this arrival)
    setp.eq.u32 %p1, %lane, 0;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%gbb], {CL * HX_SLOTS * 16};""")
    if STAMPS:
        e(k.stamp(9, "coef"))
    def row_store(off):
        """%v0..3 of this lane -> sm_lg[c] at byte off + 16 lane; the ss lane (%p2): %v0 -> [0]."""
        return f"""
    mov.u32 %r11, %lgb;
    @%p2 st.shared.f32 [%r11], %v0;
    @%p2 bra ROW_END;
    mad.lo.u32 %r11, %lane, 16, %r11;
    st.shared.f32 [%r11+{off}], %v0;
    st.shared.f32 [%r11+{off + 4}], %v1;
    st.shared.f32 [%r11+{off + 8}], %v2;
    st.shared.f32 [%r11+{off + 12}], %v3;"""

    if HX:
        e(f"""    // lanes 0..5: float4 lane of the own token (logits 4 lane ..), lane 6: ss, summed over the
    // sources in rank order -> sm_lg[c]: [0] ss, [1 + m] logit m
    setp.ge.u32 %p1, %lane, {HX_SLOTS};
    @%p1 bra ROW_END;
    mad.lo.u32 %r9, %lane, 16, %gab;""")
        ordered_sum(e, "%r9", HX_SLOTS * 16, CL, "GSUM1")
        if k.pair and "xlate" not in k.exp:
            e(pair_write() + k.st(5, "coef"))
        e("    setp.eq.u32 %p2, %lane, 6;" + row_store(4))
    else:
        e(f"""    // lanes 0..4: float4 1 + lane of the own token (logits 4 + 4 lane ..); lane 5: ss (component
    // rank % 4 of slot {SS_SLOT} + rank / 4)
    setp.ge.u32 %p1, %lane, 6;
    @%p1 bra ROW_END;
    add.u32 %r9, %lane, {OWN_SLOT};
    setp.eq.u32 %p2, %lane, 5;
    shr.u32 %r10, %rank, 2;
    add.u32 %r10, %r10, {SS_SLOT};
    @%p2 mov.u32 %r9, %r10;
    mad.lo.u32 %r9, %r9, 16, %gab;""")
        ordered_sum(e, "%r9", SLOTS * 16, CL, "GSUM1")
        e("""    // sm_lg[c]: [0] ss, [1 + m] logit m
    and.b32 %r11, %rank, 3;
    setp.eq.and.u32 %p1, %r11, 1, %p2;
    @%p1 mov.f32 %v0, %v1;
    setp.eq.and.u32 %p1, %r11, 2, %p2;
    @%p1 mov.f32 %v0, %v2;
    setp.eq.and.u32 %p1, %r11, 3, %p2;
    @%p1 mov.f32 %v0, %v3;""" + row_store(20))
    TOKEN = prev_tile("%r12") + """
    shl.b32 %r12, %r12, 4;
    add.u32 %r12, %r12, %rank;              // token of tile kk-1"""
    # the pair entry adds the other half's sums after barrier 2: before it, the exchange's latency
    # held the math warps at the barrier (H100, C = 7168, T = 8192: 480.8 against 446.2 us)
    e(f"""ROW_END:{st(10, "coef")}
    bar.warp.sync -1;{BAR2_ID}
    barrier.sync %r9, {BAR2};{st(11, "coef")}
    setp.eq.u32 %p1, %kk, 0;
    @%p1 bra PC_CB_DONE;{pair_add(k) if k.pair else ""}{TOKEN}{hx_broadcast(k) if HX else ""}
    setp.ge.u32 %p1, %r12, %T;{PAIR_HALF0 if k.pair else ""}""")
    e(f"""    setp.ge.or.u32 %p1, %lane, 4, %p1;      // lanes 0..3: h_post and the token's z_res row
    @%p1 bra PC_CB_DONE;
    ld.shared.f32 %f1, [%lgb];
{inv_rms("%f1", "%inv_t")}
    mul.wide.u32 %rd1, %r12, 16;
    add.u64 %hpo, %hpost, %rd1;
    mul.wide.u32 %rd1, %r12, 64;
    add.u64 %hro, %hres, %rd1;
""")
    e(coef_lanes())
    # one loop with one entry: a second way into the batch (a flush after the loop) would make the
    # control flow irreducible; ptxas then loses the warp's reconvergence, and lanes reach
    # barrier 2 a round early and hang the cluster
    e(f"""PC_CB_DONE:{st(12, "coef")}
    bar.warp.sync -1;                       // lanes 0..3 back (the next barrier 2 and the batch need the whole warp)
    bfe.u32 %r16, %kk, 1, {SKB.bit_length() - 1};
    setp.ne.u32 %p1, %r16, {SKB - 1};
    add.u32 %r17, %kk, 2;
    setp.le.and.u32 %p1, %r17, %nr, %p1;
    @%p1 bra PC_CB_NEXT;                    // the batch's last slot, or this warp's last round: run it""")
    e(sk_batch())
    e(f"""PC_CB_NEXT:
    add.u32 %kk, %kk, 2;
    setp.le.u32 %p1, %kk, %nr;
    @%p1 bra COEF_LOOP;
    bra TILE_END;{post_warps(k) if fused and not MIXW else ""}""")
