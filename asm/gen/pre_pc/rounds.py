"""The math warps: phi's fragments, the tile loop's projection, warp sums, exchange, mix and refill."""

from ..blocks import MMA_BF16, mma, split_bf16_via
from ..pre_decode import sigmoid
from .constants import (
    ARG, BAR2, BAR2_ID, BJOBS, CL, HW0, HXB, HXG, HX_SLOTS, LG_ROW, NCW, NW, OJOBS, OWN_SLOT, RMAX,
    SLOTS, SS_SLOT, STAGES, TBLK, TT)
from .prologue import PHI_BAR, TMA_XW, XADJ, XW
from .sums import arm_gather, ordered_sum, wait_gather
from .stamps import exit_stamps
from .post import coef_post_prologue, coef_post_share
from .fills import issue, mapping, prologue_fill
from .mix import mix_code
from .coef import PAIR_EPOCH, sk_clear


EARLY_WAIT = """
    @%p_early griddepcontrol.wait;
    @%p_early griddepcontrol.launch_dependents;"""


def lane_floats(f0, tma):
    """A lane's 8 floats of a run from %rd1 into %f{f0}..: TMA entries, the channel pairs 2q + 8m
    (m < 4: ldmatrix's k order, %rd1 at 2q); the others, 8 consecutive channels (%rd1 at 8q)."""
    if tma:
        return "\n".join(f"    ld.global.nc.v2.f32 {{%f{f0 + 2 * m}, %f{f0 + 2 * m + 1}}}, [%rd1+{32 * m}];"
                          for m in range(4))
    return f"""    ld.global.nc.v4.f32 {{%f{f0}, %f{f0 + 1}, %f{f0 + 2}, %f{f0 + 3}}}, [%rd1];
    ld.global.nc.v4.f32 {{%f{f0 + 4}, %f{f0 + 5}, %f{f0 + 6}, %f{f0 + 7}}}, [%rd1+16];"""


def phi_fragments(k):
    """Math warps: phi's slice (times gamma_k) as bf16 hi / lo mma fragments in registers; the
    other warps wait for the opening cluster barrier and go to their own loops."""
    e, fused, tma, MIXW, STAMPS, phi_bar, phi_bar_threads = k.e, k.fused, k.tma, k.MIXW, k.STAMPS, k.phi_bar, k.phi_bar_threads
    e("""    @!%p_math bra CLUSTER_WAIT;
    // ================= math warps: phi fragments of runs w + 8j into registers ==============""")
    if STAMPS:
        e(exit_stamps("phi", "_s", 8))
    # pass 1: every run's loads (phi: rows g, g+8, 16+g x 8 floats; gamma_k: 8 floats) issued
    # before any is used. The fragments are the prologue's critical path: loaded run by run
    # (one trip each) they take 6 us, the later runs queued behind the first fills' traffic
    # (phase stamps); issued at once they land before it.
    for j in range(RMAX):
        e(f"""    // run j = {j}: rho = w + {NW * j}
    add.u32 %r1, %warp, {NW * j};
    setp.lt.u32 %pj{j}, %r1, %NR;
    @!%pj{j} bra PHL{j}_END;""")
        if tma:
            e("""    bfe.u32 %r3, %r1, 1, 2;                 // TMA entry: stream i = (rho / 2) % 4
    shr.u32 %r4, %r1, 3;
    shl.b32 %r4, %r4, 6;                    // block rho / 8: channels 64 (rho / 8) ..
    and.b32 %r2, %r1, 1;
    mad.lo.u32 %r4, %r2, 32, %r4;           // + 32 (rho % 2)
    mad.lo.u32 %r4, %q, 2, %r4;             // + 2q: lane q's first channel pair
    mad.lo.u32 %r5, %rank, %C16, %r4;""" + ("""
    add.u32 %r5, %r5, %C0;                  // pair entry: this half's first channel""" if k.pair else "") + """
    mad.lo.u32 %r5, %r3, %C, %r5;           // k = i C + r C/16 + cl""")
        else:
            e("""    shl.b32 %r2, %r1, 5;
    mad.lo.u32 %r2, %q, 8, %r2;             // slice element e = 32 rho + 8q
    div.u32 %r3, %r2, %C16;                 // stream i
    mul.lo.u32 %r4, %r3, %C16;
    sub.u32 %r4, %r2, %r4;                  // local channel
    mad.lo.u32 %r5, %rank, %C16, %r4;""" + ("""
    add.u32 %r5, %r5, %C0;                  // pair entry: this half's first channel""" if k.pair else "") + """
    mad.lo.u32 %r5, %r3, %C, %r5;           // k = i C + r C/16 + cl""")
        for ri, roff in enumerate((0, 8, 16)):
            f0 = 24 * j + 8 * ri
            e(f"""    add.u32 %r6, %gq, {roff};
    mad.lo.u32 %r6, %r6, %K, %r5;""")
            if "nophi" in k.exp:  # timing experiment: the fragments from a register, not memory
                e("\n".join(f"    mov.b32 %f{f0 + m}, %r6;" for m in range(8)))
            else:
                e(f"""    mul.wide.u32 %rd1, %r6, 4;
    add.u64 %rd1, %phi, %rd1;
{lane_floats(f0, tma)}""")
        g0 = 24 * RMAX + 8 * j
        e(f"""    @!%p_gk bra PHL{j}_END;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %gk, %rd1;
{lane_floats(g0, tma)}
PHL{j}_END:""")
    # the opening cluster barrier's wait, with phi's loads in flight (they need no peer); with
    # FLAG_EARLY_PARAMS the grid dependency's wait (entry_start) comes here, after them
    if k.OPENING:  # the split first: it needs neither peers nor activations
        e("""    bra.uni PHI_SPLIT;
CLUSTER_WAIT:""" + EARLY_WAIT)
        if k.LOCALFILL and MIXW:  # the side warps fill stage 0 before they wait for the cluster
            e(f"""    setp.ge.u32 %p1, %warp, {NW + NCW};
    @%p1 bra {"POST_WARP" if fused else "MIX_WARP"};""")
        e("""    barrier.cluster.wait.acquire;""")
    else:
        e(EARLY_WAIT + """
    barrier.cluster.wait.acquire;""" + (exit_stamps("clustered") if STAMPS else "") + """
    bra.uni PHI_SPLIT;
CLUSTER_WAIT:""" + EARLY_WAIT + """
    barrier.cluster.wait.acquire;""")
    side_left = k.LOCALFILL and MIXW  # the side warps branched off before the wait
    if fused and not side_left:
        e(f"""    setp.ge.u32 %p1, %warp, {NW + NCW};
    @%p1 bra POST_WARP;""")
    if MIXW and not fused and not side_left:
        e(f"""    setp.ge.u32 %p1, %warp, {NW + NCW};
    @%p1 bra MIX_WARP;""")
    e("""    bra.uni COEF_WARP;
PHI_SPLIT:""")
    # pass 2: times gamma_k, then the split into hi and lo bf16 words
    for j in range(RMAX):
        base = 24 * j
        g0 = 24 * RMAX + 8 * j
        e(f"""    @!%pj{j} bra PHI{j}_ZERO;
    @!%p_gk bra GK{j};""")
        for m in range(24):
            e(f"    mul.f32 %f{base + m}, %f{base + m}, %f{g0 + m % 8};")
        e(f"GK{j}:")
        if STAMPS:
            e(exit_stamps("phi", f"_i{j}", 2 * j))
        for ri in range(3):
            for m in range(4):
                hi = base + ri * 4 + m          # hi words: 0..11 of the run
                lo = base + 12 + ri * 4 + m     # lo words: 12..23
                x0, x1 = base + 8 * ri + 2 * m, base + 8 * ri + 2 * m + 1
                e(split_bf16_via(f"%ph{hi}", f"%ph{lo}", f"%f{x0}", f"%f{x1}", "%r7", "%fs0", "%fs1", "%fs0", "%fs1"))
        e(f"    bra PHI{j}_END;")
        e(f"PHI{j}_ZERO:")
        for r_ in range(base, base + 24):
            e(f"    mov.b32 %ph{r_}, 0;")
        e(f"PHI{j}_END:")
        if STAMPS:
            e(exit_stamps("phi", f"_e{j}", 2 * j + 1))
    if phi_bar:
        e(f"""    barrier.arrive {PHI_BAR}, {phi_bar_threads};      // phi is in: the mix warps fill stages 1..""")
    if k.OPENING:
        e(EARLY_WAIT + """
    barrier.cluster.wait.acquire;""" + (exit_stamps("clustered") if STAMPS else ""))
    if STAMPS:
        e(exit_stamps("ready", "_phi"))


def tile_loop(k):
    """The prologue fills (math warps fill the ring themselves), then the round loop: wait for the
    stage, the projection's mma of the tile and the warp partials."""
    e, fused, tma, MIXW, st = k.e, k.fused, k.tma, k.MIXW, k.st
    if not MIXW:
        e(mapping(k, "%tx", NW * 32))
        prologue_fill(k, "PRO")
    e(f"""    mov.u32 %tile, %cid;
    mov.u32 %stage, 0;
    mov.u32 %kk, 0;
    mov.u32 %phb, 0;                        // parity bits of full[s]
{TMA_XW if tma else XW}{XADJ if fused else ""}{(WSUM_SETUP_PACKED if k.pair and not tma else WSUM_SETUP) if k.HX else ""}
    // ================= the tile loop: iteration kk computes tile kk's partials and pushes
    // them, then finishes tile kk-1 (its pushes had a whole mma phase to arrive) =============
TILE_LOOP:{st(0, "math")}
    setp.lt.u32 %p_cur, %tile, %ntiles;
    @!%p_cur bra MMA_END;
    mad.lo.u32 %st0, %stage, %sstage, %dsm;
    mov.u32 %r1, {"xready" if fused else "full"};{"                  // x' in the stage (the post warps)" if fused else ""}
    mad.lo.u32 %r1, %stage, 8, %r1;
    shr.u32 %r2, %phb, %stage;
    and.b32 %r2, %r2, 1;
FULL_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra FULL_WAIT;{st(1, "math")}
    mov.u32 %r2, 1;
    shl.b32 %r2, %r2, %stage;
    xor.b32 %phb, %phb, %r2;
    // mma: A = x (rows = tokens g, g+8), B = phi (columns = logits 8nb + g), D = acc[nb]""")
    for i in range(24):
        e(f"    mov.f32 %acc{i}, 0f00000000;")
    for i in range(8):
        e(f"    mov.f32 %gr{i}, 0f00000000;")
    if tma:
        e("""    add.u32 %r3, %st0, %xw;                 // this lane's ldmatrix row of run w""")
    else:
        e("""    add.u32 %r3, %st0, %xw;                 // token g
    mad.lo.u32 %r4, %tstride, 8, %r3;       // token g + 8""")
    XSTEP = TBLK if tma else 64 * NW  # bytes from run w + 8j to run w + 8(j + 1)
    for j in range(RMAX):
        base = 24 * j
        if fused:  # the run's stream shift (fused rows: 16 bytes after each stream slice)
            e(f"""    @!%pj{j} bra MMA_{j}_END;
    bfe.u32 %r5, %xadj, {8 * j}, 8;
    add.u32 %r6, %r3, %r5;
    add.u32 %r7, %r4, %r5;
    ld.shared.v4.b32 {{%xa0, %xa1, %xa2, %xa3}}, [%r6+{64 * NW * j}];
    ld.shared.v4.b32 {{%xb0, %xb1, %xb2, %xb3}}, [%r7+{64 * NW * j}];""")
        elif tma:  # k-step kb reads chunks 2 kb, 2 kb + 1 of the run: kb = 1 at the address xor 32
            e(f"""    @!%pj{j} bra MMA_{j}_END;
    add.u32 %r6, %r3, {XSTEP * j};
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%xa0, %xb0, %xa1, %xb1}}, [%r6];
    xor.b32 %r6, %r6, 32;
    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%xa2, %xb2, %xa3, %xb3}}, [%r6];""")
        else:
            e(f"""    @!%pj{j} bra MMA_{j}_END;
    ld.shared.v4.b32 {{%xa0, %xa1, %xa2, %xa3}}, [%r3+{XSTEP * j}];
    ld.shared.v4.b32 {{%xb0, %xb1, %xb2, %xb3}}, [%r4+{XSTEP * j}];""")
        # ss on the tensor cores: the Gram matrix x x^T of the tile (B = the same x fragments,
        # n-tile 0 = tokens 0..7, 1 = tokens 8..15); its diagonal is ss (bf16 products are exact,
        # f32 accumulation). 32 unpack + FMA instructions per run instead would bind the mma
        # phase by instruction issue, not by the tensor pipe.
        for kb in range(2):
            A = f"{{%xa{2 * kb}, %xb{2 * kb}, %xa{2 * kb + 1}, %xb{2 * kb + 1}}}"
            for nt, src in ((0, "%xa"), (1, "%xb")):
                acc = [f"%gr{4 * nt + i}" for i in range(4)]
                e(f"    {mma(MMA_BF16, acc, A, [f'{src}{2 * kb}', f'{src}{2 * kb + 1}'], acc)}")
        if "nomma" in k.exp:
            e(f"MMA_{j}_END:")
            continue
        for kb in range(2):
            A = f"{{%xa{2 * kb}, %xb{2 * kb}, %xa{2 * kb + 1}, %xb{2 * kb + 1}}}"
            for part in range(2):
                for nb in range(3):
                    w0 = base + 12 * part + 4 * nb + 2 * kb
                    acc = [f"%acc{12 * (j % 2) + 4 * nb + i}" for i in range(4)]
                    e(f"    {mma(MMA_BF16, acc, A, [f'%ph{w0}', f'%ph{w0 + 1}'], acc)}")
        e(f"MMA_{j}_END:")
    e("    // odd runs accumulated apart (two chains per logit tile in flight); joined in fixed order")
    for i in range(12):
        e(f"    add.f32 %acc{i}, %acc{i}, %acc{12 + i};")
    e("""    // the Gram diagonal: lane (g, q = g / 2) holds ss of token g (c0 / c1 of n-tile 0 for g
    // even / odd) and of token g + 8 (c2 / c3 of n-tile 1)
    and.b32 %r5, %gq, 1;
    setp.ne.u32 %p1, %r5, 0;
    selp.f32 %ss0, %gr1, %gr0, %p1;
    selp.f32 %ss1, %gr7, %gr6, %p1;""")
    e(f"""    // warp partials -> red[w][token][28] (logits 0..23, ss at 24): lane (g, q) holds tokens
    // g, g + 8 x logits 8nb + 2q, +1
    mov.u32 %r5, red;
    mad.lo.u32 %r5, %warp, {TT * 112}, %r5;
    mad.lo.u32 %r6, %gq, 112, %r5;          // &red[w][g][0]
    shl.b32 %r7, %q, 3;
    add.u32 %r7, %r6, %r7;                  // + logit 2q""")
    for nb in range(3):
        e(f"""    st.shared.v2.f32 [%r7+{32 * nb}], {{%acc{4 * nb}, %acc{4 * nb + 1}}};
    st.shared.v2.f32 [%r7+{32 * nb + 8 * 112}], {{%acc{4 * nb + 2}, %acc{4 * nb + 3}}};""")
    bar1 = "" if k.HX and "nowsum" in k.exp else f"\n    barrier.sync 1, {NW * 32};"
    e(f"""    shr.u32 %r5, %gq, 1;
    setp.eq.u32 %p1, %q, %r5;
    @%p1 st.shared.f32 [%r6+96], %ss0;
    @%p1 st.shared.f32 [%r6+{8 * 112 + 96}], %ss1;{st(2, "math")}
MMA_END:{bar1}{st(3, "math")}""")


# TMA entry, the math warps before their first round: what the warp sums of every round need of
# this lane (threads t < 224), computed once: %wsr = red[4h][tk][f] and %wsx = tk << 16 | the
# offset of [rank][f] in a gather buffer. Out of the round, the division by 7 and its address
# arithmetic gained at most 1% (H100, C = 7168, T = 8192: 258.9-259.0 us against 259.9-263.5 in
# one call): the warp sums' ~700 cycles a round are their shared loads and shuffles.
WSUM_SETUP = f"""
    shr.u32 %r12, %lane, 4;                 // h
    and.b32 %r13, %lane, 15;
    mad.lo.u32 %r13, %warp, 16, %r13;       // j
    div.u32 %r9, %r13, 7;                   // tk
    mul.lo.u32 %r10, %r9, 7;
    sub.u32 %r10, %r13, %r10;               // f
    mov.u32 %wsr, red;
    mad.lo.u32 %wsr, %r9, 112, %wsr;
    mad.lo.u32 %wsr, %r10, 16, %wsr;
    mad.lo.u32 %wsr, %r12, {4 * TT * 112}, %wsr;   // warp 4h
    mul.lo.u32 %wsx, %rank, {HX_SLOTS * 16};
    mad.lo.u32 %wsx, %r10, 16, %wsx;
    shl.b32 %r9, %r9, 16;
    or.b32 %wsx, %wsx, %r9;"""


# The fused pair entry's math warps sit at the 168 registers 12 warps allow: there the two words
# are one, %wsx = red offset (14 bits) | gather offset << 14 (11 bits) | tk << 25, unpacked each
# round (3 instructions).
WSUM_SETUP_PACKED = (WSUM_SETUP.replace("    mov.u32 %wsr, red;\n    mad.lo.u32 %wsr, %r9, 112, %wsr;",
                                        "    mul.lo.u32 %wsr, %r9, 112;")
                     .replace("    shl.b32 %r9, %r9, 16;\n    or.b32 %wsx, %wsx, %r9;", """    shl.b32 %wsx, %wsx, 14;
    or.b32 %wsx, %wsx, %wsr;
    shl.b32 %r9, %r9, 25;
    or.b32 %wsx, %wsx, %r9;"""))
assert "red" not in WSUM_SETUP_PACKED and "shl.b32 %r9, %r9, 25;" in WSUM_SETUP_PACKED


def warp_sums_hx(k):
    """TMA entry: the warp partials summed and pushed to the token's CTA (HX in the header)."""
    e, HX, st = k.e, k.HX, k.st
    packed = k.pair and not k.tma
    if HX:
        e(f"""    // ---- threads t < 224 (warps 0..6): lane l sums half h = l / 16 of the warps (4h .. 4h + 3)
    // for j = 16 w + l % 16 = (token tk = j / 7, float4 f = j % 7) in order; lane l + 16 hands its
    // half to lane l, which adds the two (h 0 + h 1: a fixed order) and st.async's the float4 to
    // CTA tk (the pushes after barrier 2, as 16 bulk copies from a staging buffer, cost the
    // math warps ~460-580 cycles a round: fence, barrier, serial issue). Addresses: WSUM_SETUP.
    setp.lt.u32 %p_push, %tx, {2 * TT * 7};
    and.pred %p_push, %p_push, %p_cur;
    @!%p_push bra WSUM_END;""")
        if "nowsum" in k.exp:
            e("\n".join(f"    mov.f32 %v{c}, 0f00000000;" for c in range(4)))
        elif packed:
            e("""    and.b32 %r11, %wsx, 0x3fff;
    mov.u32 %r10, red;
    add.u32 %r11, %r11, %r10;               // red[4h][tk][f]""")
            ordered_sum(e, "%r11", TT * 112, NW // 2, "WSUM")
        else:
            ordered_sum(e, "%wsr", TT * 112, NW // 2, "WSUM")
        e(f"""    shfl.sync.down.b32 %u0, %v0, 16, 31, -1;
    shfl.sync.down.b32 %u1, %v1, 16, 31, -1;
    shfl.sync.down.b32 %u2, %v2, 16, 31, -1;
    shfl.sync.down.b32 %u3, %v3, 16, 31, -1;
    setp.ge.u32 %p1, %lane, 16;
    @%p1 bra WSUM_END;
    add.f32 %v0, %v0, %u0;
    add.f32 %v1, %v1, %u1;
    add.f32 %v2, %v2, %u2;
    add.f32 %v3, %v3, %u3;
    and.b32 %r12, %kk, {HXG - 1};
    mov.u32 %r14, gat;
    mad.lo.u32 %r14, %r12, {CL * HX_SLOTS * 16}, %r14;
    {"bfe.u32 %r13, %wsx, 14, 11" if packed else "and.b32 %r13, %wsx, 0xffff"};
    add.u32 %r14, %r14, %r13;               // gat[kk % {HXG}][rank][f] ...
    mov.u32 %r15, gbar;
    mad.lo.u32 %r15, %r12, 8, %r15;
    shr.u32 %r9, %wsx, {25 if packed else 16};                  // tk
    mapa.shared::cluster.u32 %r14, %r14, %r9;   // ... of CTA tk
    mapa.shared::cluster.u32 %r15, %r15, %r9;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r14], {{%v0, %v1, %v2, %v3}}, [%r15];
WSUM_END:{st(4, "math")}""")


def sums_and_h_pre(k):
    """The cp.async entries: threads < 112 sum the 8 warps' partials of tile kk, warps HW0..
        compute h_pre of tile kk-1 from the gathered logits (HX: the token's CTA does, see HX)."""
    e, MIXW, STAMPS, st = k.e, k.MIXW, k.STAMPS, k.st
    e(f"""    // ---- threads < 112: (token tk = t / 7, float4 f = t % 7) summed over the 8 warps in order
    // (pushed after barrier 2)
    setp.lt.u32 %p_push, %tx, {TT * 7};
    and.pred %p_push, %p_push, %p_cur;
    @!%p_push bra WSUM_END;
    div.u32 %r9, %tx, 7;                    // tk
    mul.lo.u32 %r10, %r9, 7;
    sub.u32 %r10, %tx, %r10;                // f
    mov.u32 %r11, red;
    mad.lo.u32 %r11, %r9, 112, %r11;
    mad.lo.u32 %r11, %r10, 16, %r11;""")
    ordered_sum(e, "%r11", TT * 112, NW, "WSUM")
    e(f"""    mov.u32 %r12, psum;
    mad.lo.u32 %r12, %tx, 16, %r12;
    setp.eq.u32 %p1, %r10, 6;
    @!%p1 st.shared.v4.f32 [%r12], {{%v0, %v1, %v2, %v3}};   // psum[tk][f]
    mov.u32 %r12, pss;
    mad.lo.u32 %r12, %r9, 4, %r12;
    @%p1 st.shared.f32 [%r12], %v0;         // f = 6: ss -> pss[tk] (pushed 4 tokens per float4)
WSUM_END:{st(4, "math")}
    // ---- math warps w >= HW0 (while warps < HW0 sum the partials above): tile kk-1's tokens
    // 4 (w - HW0) + t (b' = (kk-1) & 1). Lane = 8 t + g: the h_pre logits (slot tk) and the ss
    // (slot SS_SLOT + w - HW0, component t) of sources 2g and 2g + 1 added, then a butterfly over
    // the 8 lanes g (a fixed tree of commutative adds: the same bits in every lane and every CTA)
    setp.eq.u32 %p1, %kk, 0;
    setp.lt.or.u32 %p1, %warp, {HW0}, %p1;
    @%p1 bra HPRE_END;""")
    wait_gather(e, "GAT_WAIT0")
    if STAMPS:
        e(k.stamp(5, "hpre"))
    e(f"""    and.b32 %r10, %lane, 7;                 // g
    shr.u32 %r11, %lane, 3;                 // t
    sub.u32 %r13, %warp, {HW0};
    shl.b32 %r12, %r13, 2;
    add.u32 %r12, %r12, %r11;               // tk
    mul.lo.u32 %r10, %r10, {2 * SLOTS * 16};
    add.u32 %r10, %r10, %gab;               // source 2g
    mad.lo.u32 %r9, %r12, 16, %r10;
    ld.shared.v4.f32 {{%v0, %v1, %v2, %v3}}, [%r9];
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%r9+{SLOTS * 16}];
    mad.lo.u32 %r9, %r13, 16, %r10;
    ld.shared.v4.f32 {{%u0, %u1, %u2, %u3}}, [%r9+{SS_SLOT * 16}];
    ld.shared.v4.f32 {{%y0, %y1, %y2, %y3}}, [%r9+{(SS_SLOT + SLOTS) * 16}];
    setp.eq.u32 %p1, %r11, 1;
    @%p1 mov.f32 %u0, %u1;
    @%p1 mov.f32 %y0, %y1;
    setp.eq.u32 %p1, %r11, 2;
    @%p1 mov.f32 %u0, %u2;
    @%p1 mov.f32 %y0, %y2;
    setp.eq.u32 %p1, %r11, 3;
    @%p1 mov.f32 %u0, %u3;
    @%p1 mov.f32 %y0, %y3;
    add.f32 %hss, %u0, %y0;""")
    for c in range(4):
        e(f"    add.f32 %v{c}, %v{c}, %w{c};")
    for off in (1, 2, 4):
        for v in ("%v0", "%v1", "%v2", "%v3", "%hss"):
            e(f"    shfl.sync.bfly.b32 %r11, {v}, {off}, 31, -1;")
            e("    mov.b32 %f0, %r11;")
            e(f"    add.f32 {v}, {v}, %f0;")
    e(f"""    and.b32 %r11, %lane, 7;
    setp.ne.u32 %p1, %r11, 0;
    @%p1 bra HPRE_END;
    // lanes 8 t: inv_rms and h_pre of token tk (-> shs; CTA tk stores token tk's)
    mul.f32 %f3, %hss, %invk;
    add.f32 %f3, %f3, %eps_norm;
    rsqrt.approx.f32 %f3, %f3;              // inv_rms (2 ulp: the bf16 kernel's tolerance is 1e-3)
    shl.b32 %r13, %ptile, 4;
    add.u32 %r13, %r13, %r12;               // token
    setp.lt.u32 %p2, %r13, %T;
    setp.eq.u32 %p3, %r12, %rank;
    and.pred %p2, %p2, %p3;                 // CTA tk stores token tk's h_pre and inv_rms
    mul.wide.u32 %rd1, %r13, 4;
    ld.param.u64 %rd2, [p_args+{ARG['inv_rms']}];
    add.u64 %rd2, %rd2, %rd1;
    @%p2 st.global.f32 [%rd2], %f3;
    mul.wide.u32 %rd1, %r13, 16;
    ld.param.u64 %rd2, [p_args+{ARG['h_pre']}];
    add.u64 %rd2, %rd2, %rd1;""")
    for i in range(4):
        e(f"""    ld.shared.f32 %f4, [sm_base+{4 * i}];
    mul.f32 %f5, %v{i}, %f3;
    fma.rn.f32 %f5, %f5, %sc0, %f4;
{sigmoid("%f5", f"%w{i}")}
    @!%p_paper add.f32 %w{i}, %w{i}, %eps_hc;
    @%p2 st.global.f32 [%rd2+{4 * i}], %w{i};""")
    if MIXW:
        e(f"""    // shs[p] (p = round kk-1's parity) is free once the mix warps mixed round kk-3
    sub.u32 %r15, %kk, 1;
    and.b32 %r16, %r15, 1;                  // p
    shr.u32 %r17, %r15, 1;                  // this is use u of shs[p]
    setp.eq.u32 %p3, %r17, 0;
    @%p3 bra SHS_FREE;
    sub.u32 %r17, %r17, 1;
    and.b32 %r17, %r17, 1;                  // parity of mixed[p]'s phase u - 1
    mov.u32 %r18, mixed;
    mad.lo.u32 %r18, %r16, 8, %r18;
SHS_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p3, [%r18], %r17;
    @!%p3 bra SHS_WAIT;
SHS_FREE:
    mov.u32 %r14, shs;
    mad.lo.u32 %r14, %r16, {TT * 16}, %r14;""")
    else:
        e("    mov.u32 %r14, shs;")
    e("""    mad.lo.u32 %r14, %r12, 16, %r14;
    st.shared.v4.f32 [%r14], {%w0, %w1, %w2, %w3};""")
    if MIXW:
        e("""    // h_pre of this token of round kk-1 is in shs[p]: one of hready[p]'s 16 arrivals
    mov.u32 %r18, hready;
    mad.lo.u32 %r18, %r16, 8, %r18;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r18];""")


def exchange(k):
    """h_pre of the previous tile done, barrier 2, and (cp.async entries) the pushes of this tile's
    partials."""
    e, HX, st = k.e, k.HX, k.st
    if not HX:
        sums_and_h_pre(k)
    LAST = """
    // the round past this cluster's last (LAG 2: only the last tile's mix) has no coefficient warp
    sub.u32 %r1, %tile, %ncl;
    setp.lt.u32 %p1, %r1, %ntiles;
    setp.eq.or.u32 %p1, %kk, 0, %p1;
    @!%p1 bra BAR2_END;""" if k.LAG == 2 else ""
    e(f"""HPRE_END:{"" if k.pair else st(6, "hpre")}{LAST}
    // gat of tile kk-1 is read (math warps and the round's coefficient warp), psum and shs written
{BAR2_ID}
    barrier.sync %r9, {BAR2};{st(7, "math")}{chr(10) + "BAR2_END:" if k.LAG == 2 else ""}""")
    if not HX:  # (HX pushes from the warp sums; its gbar is armed by the coefficient warp)
        e(f"""    // ---- push tile kk's partials: slots s < {OWN_SLOT} (each token's h_pre logits, then the ss of 4
    // tokens per float4) to every CTA, float4s 1..5 of token tk to CTA tk; thread 0 arms
    // gbar[kk & 1] for the {CL * SLOTS * 16} bytes every CTA sends here
{arm_gather(SLOTS)}
    // jobs j = tid + 256 i < {BJOBS + OJOBS}: j < {BJOBS}: slot s = j / {CL} to CTA j % {CL}; else
    // jj = j - {BJOBS}: token jj / 5, float4 1 + jj % 5 to CTA jj / 5 (slot {OWN_SLOT} + jj % 5)
    @!%p_cur bra PUSH_END;""")
        for i in range((BJOBS + OJOBS + NW * 32 - 1) // (NW * 32)):
            e(f"""    add.u32 %r9, %tx, {i * NW * 32};
    setp.ge.u32 %p2, %r9, {BJOBS + OJOBS};
    @%p2 bra PUSH_END;
    setp.lt.u32 %p3, %r9, {BJOBS};
    @!%p3 bra PJ{i}_OWN;
    shr.u32 %r10, %r9, 4;                   // s
    and.b32 %r16, %r9, {CL - 1};            // destination
    mov.u32 %r14, psum;
    mul.lo.u32 %r13, %r10, {7 * 16};
    add.u32 %r14, %r14, %r13;               // s < {SS_SLOT}: psum[s][0]
    setp.ge.u32 %p3, %r10, {SS_SLOT};
    mov.u32 %r13, pss;
    mad.lo.u32 %r13, %r10, 16, %r13;
    @%p3 sub.u32 %r14, %r13, {SS_SLOT * 16}; // else pss[4 (s - {SS_SLOT})..]
    bra PJ{i}_GO;
    PJ{i}_OWN:
    sub.u32 %r9, %r9, {BJOBS};
    div.u32 %r11, %r9, 5;                   // token
    mul.lo.u32 %r12, %r11, 5;
    sub.u32 %r12, %r9, %r12;                // f - 1
    add.u32 %r10, %r12, {OWN_SLOT};           // slot
    mov.u32 %r16, %r11;
    mad.lo.u32 %r13, %r11, 7, %r12;
    mov.u32 %r14, psum;
    mad.lo.u32 %r14, %r13, 16, %r14;
    add.u32 %r14, %r14, 16;                 // psum[token][f]
    PJ{i}_GO:
    ld.shared.v4.f32 {{%pv0, %pv1, %pv2, %pv3}}, [%r14];
    mad.lo.u32 %r13, %rank, {SLOTS}, %r10;
    mad.lo.u32 %r13, %r13, 16, %gab;
    mapa.shared::cluster.u32 %r14, %r13, %r16;
    mapa.shared::cluster.u32 %r15, %gbb, %r16;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r14], {{%pv0, %pv1, %pv2, %pv3}}, [%r15];""")


def round_end(k):
    """The math warps' mix and refill (pre entries without mix warps), the next round; then the
    coefficient warp's loop head."""
    e, fused, MIXW, st = k.e, k.fused, k.MIXW, k.st
    e("PUSH_END:" + st(8, "math"))
    if not MIXW:
        e(mix_code(k, False))
        if k.fring:
            e(f"""    // stage pstage (tile kk-{k.LAG}) is free once every math warp mixed it here, and f stage
    // kk % {k.ahead} (tile kk's f) since every math thread waited for tile kk's x' this round:
    // both take tile kk+{k.ahead}
    barrier.sync 1, {NW * 32};
    setp.lt.u32 %p1, %kk, {k.LAG};
    @%p1 bra HBAR_END;""")
        else:
            e(f"""    // stage pstage is free once every math warp is here: refill it with tile kk-{k.LAG}+{STAGES}
    barrier.sync 1, {NW * 32};
    {"setp.eq.u32 %p1, %kk, 0" if k.LAG == 1 else f"setp.lt.u32 %p1, %kk, {k.LAG}"};
    @%p1 bra REFILL_END;""")
        if k.HX:
            e(f"""    // and hin[(kk-{k.LAG}) % {HXB}] is read: thread 0 re-arms hbar for tile kk-{k.LAG}+{HXB}
    sub.u32 %r19, %kk, {k.LAG};
    and.b32 %r19, %r19, {HXB - 1};
    mov.u32 %r18, hbar;
    mad.lo.u32 %r18, %r19, 8, %r18;
    setp.eq.u32 %p1, %tx, 0;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%r18], {TT * 16};""")
        if k.fring:
            # x stage (stage + ahead) % stages: the one mixed this round (kk >= LAG) or, in the
            # first LAG rounds, one the prologue left empty
            e(f"""HBAR_END:
    mad.lo.u32 %r20, %ncl, {k.ahead}, %tile;
    add.u32 %r21, %stage, {k.ahead};
    setp.ge.u32 %p1, %r21, {k.stages};
    @%p1 sub.u32 %r21, %r21, {k.stages};
    rem.u32 %r22, %kk, {k.ahead};""")
            issue(k, "%r20", "%r21", "REFILL", fstage_reg="%r22")
        else:
            e(f"""    mad.lo.u32 %r20, %ncl, {STAGES}, %ptile;""")
            issue(k, "%r20", "%pstage", "REFILL")
    if k.LAG == 2:
        PREV_STAGE = f"""
    and.b32 %pstage, %r2, {k.stages - 1};""" if k.stages & (k.stages - 1) == 0 else f"""
    setp.ge.u32 %p1, %r2, {k.stages};
    @%p1 sub.u32 %r2, %r2, {k.stages};
    mov.u32 %pstage, %r2;                   // (stage - 1) mod {k.stages}"""
        e(f"""    // the next round mixes tile kk-1 (stage - 1): go on while this tile or that one exists
    sub.u32 %r1, %tile, %ncl;
    setp.lt.u32 %p1, %r1, %ntiles;
    or.pred %p1, %p1, %p_cur;
    @!%p1 bra TILE_END;
    mov.u32 %ptile, %r1;
    add.u32 %r2, %stage, {k.stages - 1};{PREV_STAGE}""")
    else:
        e("""    @!%p_cur bra TILE_END;
    mov.u32 %ptile, %tile;
    mov.u32 %pstage, %stage;""")
    e(f"""    add.u32 %tile, %tile, %ncl;
    add.u32 %stage, %stage, 1;
    setp.eq.u32 %p1, %stage, {k.nst};
    selp.u32 %stage, 0, %stage, %p1;
    add.u32 %kk, %kk, 1;
    bra.uni TILE_LOOP;

    // ================= warp {NW}: the CTA's own token (tile token = rank) of tile kk-1 ============
COEF_WARP:
    // warp NW + c takes the rounds kk = c, c + 2, ... <= nr (nr = this cluster's tile count:
    // round nr only finishes tile nr - 1); its own row copy sm_lg[c]
    sub.u32 %r1, %warp, {NW};
    mov.u32 %kk, %r1;
    mov.u32 %lgb, sm_lg;
    mad.lo.u32 %lgb, %r1, {LG_ROW}, %lgb;{PAIR_EPOCH if k.pair else ""}
{sk_clear()}
    mov.u32 %nr, 0;
    setp.le.u32 %p1, %ntiles, %cid;
    @%p1 bra COEF_CHECK;
    sub.u32 %nr, %ntiles, %cid;
    sub.u32 %nr, %nr, 1;
    div.u32 %nr, %nr, %ncl;
    add.u32 %nr, %nr, 1;
COEF_CHECK:{coef_post_prologue(k) if fused and k.cwt else ""}
    setp.gt.u32 %p1, %kk, %nr;
    @%p1 bra TILE_END;
COEF_LOOP:{coef_post_share(k) if fused and k.cwt else ""}
    bar.warp.sync -1;
    setp.eq.u32 %p1, %kk, 0;
    @%p1 bra ROW_END;""")
