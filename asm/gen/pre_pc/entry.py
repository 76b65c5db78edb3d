"""One entry assembled from its parts (Entry), and the two files' texts."""

from ..abi import PRE_DECODE
from ..pre.constants import FLAG_EARLY_PARAMS
from ..pre_decode import NARROW, GRID_DEPENDENCY, coef_regs, load_args
from .constants import (
    A_TMAP, CL, ENTRY_POST_PRE, ENTRY_POST_PRE_M, ENTRY_POST_PRE_PAIR, ENTRY_PRE, ENTRY_PRE_PAIR,
    ENTRY_PRE_TMA, FUSED_ARG_BYTES, HC_TILE, HW0, HXB, HXG, HX_SLOTS, LG_ROW, NCW, NMW, NPW, NW,
    PAD, PAIR_F_STAGES, PAIR_FUSED_STAGES, PAIR_STAGES, PAIR_STAGES_MAX, RMAX, SLOTS, STAGES, THREADS_F, THREADS_P, TMA_ARG_BYTES, TT)
from .header import HEADER, PAIR_HEADER
from .prologue import (
    FUSED_REGS, f_row, F_STAGE, PAIR_HALF, PAIR_PHI_TO_L2, PAIR_REGS, PAIR_SETUP, PAIR_WALK,
    PHI_BAR, PHI_TO_L2, ROW, TMAP_PREFETCH, TMA_DSM, TMA_ROW)
from .stamps import PAIR_STAMP_LOAD, STAMP_LOAD, STAMP_REGS, STAMP_ROUNDS, exit_stamps
from .post import post_lane_consts, xprime
from .fills import fill, mapping
from .mix import mix_rounds
from .coef import PAIR_COUNT, coef_warp
from .rounds import exchange, phi_fragments, round_end, tile_loop, warp_sums_hx


class Entry:
    """One entry of pre_pc.ptx under construction: its kind (fused post_pre or pre; mix warps;
    TMA-filled ring with the h_pre exchange), the experiments it is built with, and its text."""

    def __init__(self, fused, mixw, tma, exp, cwt, stamp_ids, pair=False):
        self.fused, self.mixw, self.tma, self.exp, self.cwt, self.pair = fused, mixw, tma, exp, cwt, pair
        # the fused pair entry: f in a ring of its own (PAIR_F_STAGES), x rows of 4 slices
        self.fring = pair and fused
        # the ring's most stages (mbarriers), its depth (the pair pre entry's is the half's), and the
        # tiles the prologue fills (each round then refills the ring's oldest free stage)
        self.stages = PAIR_STAGES_MAX if pair and tma else (PAIR_FUSED_STAGES if self.fring else STAGES)
        self.nst = "%nst" if pair and tma else str(self.stages)
        self.ahead = PAIR_F_STAGES if self.fring else STAGES
        self.stamp_ids = stamp_ids  # PST label numbers: unique over the file
        self.L = []
        self.e = self.L.append
        self.NOSINK = "\n    mov.u32 %iters, 0;" if "nosink" in exp else ""
        self.NOMIX = "\n    bra MIX_END;" if "nomix" in exp else ""
        name = (ENTRY_POST_PRE_M if mixw else ENTRY_POST_PRE) if fused else ENTRY_PRE
        if tma:
            assert mixw and not fused
            name = ENTRY_PRE_PAIR if pair else ENTRY_PRE_TMA
        elif pair:  # the fused entry on two clusters per tile (its math warps mix)
            assert fused and not mixw
            name = ENTRY_POST_PRE_PAIR
        self.name = name
        self.SREG = "%SS" if fused else "%C8"  # stream slice stride in a stage row
        # the mix and the ring's fills run beside the math warps (pre: mix warps; fused: the post warps)
        self.MIXW = mixw
        self.MIXERS = 32 * (NPW if fused else NMW)  # with MIXW: the threads that mix (and fill the ring)
        self.STAMPS = "stamps" in exp and not fused
        self.HX = tma or pair  # h_pre exchanged (the TMA and pair entries; see HX_SLOTS)
        # OPENING: a CTA barrier on the mbarriers' init, then phi split before the opening
        # cluster barrier's wait; LOCALFILL: with it, the side warps fill stage 0 before that
        # wait too. Kept where they measured faster (docs/kernels/post_pre.md): both in the
        # fused entry whose post warps fill the ring, the opening in the fused pair entry. The
        # pre entries measured slower with either up to T = 512 and no faster above (pre.md),
        # the fused C <= 4096 entry for many tokens no faster; the opening and localfill
        # experiments give them to every entry
        self.LOCALFILL = (fused and mixw) or "localfill" in exp
        self.OPENING = self.LOCALFILL or (fused and pair) or "opening" in exp
        # rounds between a tile's projection and its mix by the math warps: the fused pair entry's
        # h_pre comes after the other part's sums, so its math warps mix tile kk-2 in round kk
        self.LAG = 2 if pair and not tma else 1
        self.arg_bytes = FUSED_ARG_BYTES if fused else (TMA_ARG_BYTES if tma else PRE_DECODE.size)
        # PHI_BAR (pre entries): the mix warps fill stage 0, then wait for phi before stages 1..
        self.phi_bar = mixw and not fused and "nophibar" not in exp
        self.phi_bar_threads = NW * 32 + self.MIXERS
        # the mixers' copies: each mixing thread stands for NW * 32 // MIXERS of the math warps'
        # copier threads (virtual thread tm + MIXERS v: the same chunk mapping and fill count as
        # the fused entry's), its registers suffixed v
        self.VT = NW * 32 // self.MIXERS

    def st(self, idx, who):
        """A round stamp of the stamps experiment (pre entries only), else nothing."""
        return self.stamp(idx, who) if self.STAMPS else ""

    def stamp(self, idx, who):
        """pre_pc.stamps (pre entries only; timing builds): one thread writes (%globaltimer, %clock64) of
    round %kk at stamp k to the debug buffer at PreDecodeArgs + 80 (the workspace; the pair
    entry's past its exchange rows, PAIR_STAMP_LOAD): u64 pairs [ctaid][STAMP_ROUNDS][16].
    `who`: "math" (thread 0), "coef" (lane 0 of the round's
    coefficient warp), "mix" (the first mix thread). Empty in normal builds; read by
    tests/gpu_pre.rs profile_pc_phases."""
        if "stamps" not in self.exp:
            return ""
        self.stamp_ids[0] += 1
        lab = f"PST{self.stamp_ids[0]}"
        cond = {"math": "setp.ne.u32 %pst, %tx, 0;",
                "hpre": f"setp.ne.u32 %pst, %tx, {32 * HW0};",
                "coef": "setp.ne.u32 %pst, %lane, 0;",
                "mix": f"setp.ne.u32 %pst, %tx, {32 * (NW + NCW)};"}[who]
        return f"""
    // ---- EXP stamp {idx} ({who})
    {cond}
    setp.ge.or.u32 %pst, %kk, {STAMP_ROUNDS - 3}, %pst;  // rows 93..95: fill and drain
    @%pst bra {lab};
    mov.u64 %sgt, %globaltimer;
    mov.u64 %sck, %clock64;
    mov.u32 %srr, %ctaid.x;
    mad.lo.u32 %srr, %srr, {STAMP_ROUNDS}, %kk;
    mad.lo.u32 %srr, %srr, 16, {idx};
    mul.wide.u32 %sad, %srr, 16;
    add.u64 %sad, %stb, %sad;
    st.global.v2.u64 [%sad], {{%sgt, %sck}};
{lab}:"""

    def text(self):
        return "\n".join(self.L)


# timing build pre_pc.early: the weights before the grid dependency whatever flags say
EARLY_FORCED = """
    setp.eq.u32 %p_early, %r2, %r2;           // timing build: the weights before the wait"""


def entry_start(k):
    """The entry line, the registers, the parameters, the prologue's prefetches and the mbarriers."""
    NOSINK, e, name, fused, tma, MIXW, MIXERS, STAMPS, HX = k.NOSINK, k.e, k.name, k.fused, k.tma, k.MIXW, k.MIXERS, k.STAMPS, k.HX
    arg_bytes = k.arg_bytes
    CW = "%CH" if k.pair else "%C"  # this cluster's channels of a stream
    e(f""".visible .entry {name}(
    .param .align {64 if tma else 8} .b8 p_args[{arg_bytes}]
)
.reqntid {THREADS_F if fused else THREADS_P}, 1, 1
.reqnctapercluster {CL}, 1, 1
{{
    .reg .pred %p<8>;
    .reg .pred %p_paper, %p_gk, %p_early, %p_math, %p_cur, %p_push;
    .reg .pred %pj<{RMAX}>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<{32 * RMAX}>, %fs<2>;
    .reg .b64 %x, %phi, %scale, %base, %gk, %a, %hpre, %hpost, %hres, %inv, %xsb, %asb;
    .reg .b32 %T, %n, %C, %M, %xs, %as, %iters, %flags, %K, %C16, %C8, %NR, %tstride, %sstage;
    .reg .f32 %eps_norm, %eps_hc, %sc0, %sc1, %sc2;
    .reg .b32 %tx, %warp, %lane, %gq, %q, %rank, %cid, %ncl, %ntiles, %tlast;
    .reg .b32 %ptile, %pstage, %tile, %stage, %kk, %phb, %dsm, %st0, %xw, %gbb, %gab;
    .reg .b32 %ph<{24 * RMAX}>;
    .reg .b32 %xa<4>;
    .reg .b32 %xb<4>;
    .reg .f32 %pv<4>;
    .reg .f32 %acc<24>;
    .reg .f32 %gr<8>;
    .reg .f32 %ss0, %ss1;
    .reg .f32 %v<4>;
    .reg .f32 %w<4>;
    .reg .f32 %u<4>;
    .reg .f32 %y<4>;
    .reg .f32 %z<4>;
    .reg .b32 %sa, %sn;
    .reg .pred %ps;
{coef_regs(NARROW)}
    .reg .f32 %inv_t;
    .reg .f32 %mo<8>;
    .reg .b32 %it, %lgb, %nr, %wsr, %wsx;
    .reg .f32 %hss, %invk;
    .reg .b32 %ctps, %ctk, %cgo, %cso;
    .reg .pred %p_cp, %p_mx;
    .reg .b32 %mtp, %mtk, %mch, %tm;
    .reg .b32 %mcp, %mdr, %mcc, %mib, %mcb, %mx<16>, %my<16>;
    .reg .f32 %mq<8>, %mg<4>;
    .reg .pred %p_mb;
    .reg .b32 %csov<4>, %cgov<4>, %ctkv<4>, %cfsv<4>, %tvv<4>;
    .reg .pred %p_cpv<4>;
    .reg .b64 %hpo, %hro, %mbs;{FUSED_REGS if fused else ""}{PAIR_REGS if k.pair else ""}{STAMP_REGS if STAMPS else ""}
{load_args(skip=("%part", "%sync", "%cpc"))}{NOSINK}
{(PAIR_STAMP_LOAD if k.pair else STAMP_LOAD) + exit_stamps("prewait") if STAMPS else ""}{PAIR_HALF + PAIR_SETUP + PAIR_PHI_TO_L2 if k.pair else PHI_TO_L2}{TMAP_PREFETCH if tma else ""}
    // FLAG_EARLY_PARAMS (no running kernel writes the weights): the math warps load phi's
    // fragments first and wait for the grid dependency after them, the other warps where they
    // reach the opening cluster barrier; else every thread waits here
    and.b32 %r2, %flags, {FLAG_EARLY_PARAMS};
    setp.ne.u32 %p_early, %r2, 0;{EARLY_FORCED if "early" in k.exp else ""}
    @%p_early bra.uni EARLY_PARAMS;
{GRID_DEPENDENCY}
EARLY_PARAMS:
    mov.u32 %tx, %tid.x;
    shr.u32 %warp, %tx, 5;
    and.b32 %lane, %tx, 31;{exit_stamps("entry") if STAMPS else ""}
    shr.u32 %gq, %lane, 2;
    and.b32 %q, %lane, 3;
    setp.lt.u32 %p_math, %warp, {NW};
    mov.u32 %rank, %cluster_ctarank;
    mov.u32 %cid, %clusterid.x;
    mov.u32 %ncl, %nclusterid.x;{PAIR_WALK if k.pair else ""}
    and.b32 %r1, %flags, 1;
    setp.ne.u32 %p_paper, %r1, 0;
    and.b32 %r1, %flags, 2;
    setp.ne.u32 %p_gk, %r1, 0;
    ld.global.nc.f32 %sc0, [%scale];
    ld.global.nc.f32 %sc1, [%scale+4];
    ld.global.nc.f32 %sc2, [%scale+8];
    shl.b32 %K, %C, 2;                      // n C (n = 4)
    cvt.rn.f32.u32 %invk, %K;
    rcp.rn.f32 %invk, %invk;                // 1/K (ss/K as ss * (1/K): within 1 ulp)
    shr.u32 %C16, {CW}, 4;                    // channels per CTA and stream
    shr.u32 %C8, {CW}, 3;                     // bytes of one stream slice
    shr.u32 %NR, {CW}, 7;                     // 32-element runs per CTA (C/4 / 32)
{(f_row(4 if k.fring else 5).replace("%C,", CW + ",") if fused else (TMA_ROW.replace("%C,", CW + ",") if tma else ROW)).lstrip(chr(10))}
    shl.b32 %sstage, %tstride, 4;           // stage bytes ({TT} rows){F_STAGE if fused else ""}
    add.u32 %ntiles, %T, {TT - 1};
    shr.u32 %ntiles, %ntiles, 4;
    sub.u32 %tlast, %T, 1;
    mov.u32 %dsm, dsm;{TMA_DSM if tma else ""}
    // mbarriers: full[s] (TMA: two arrivals, the mix warps' armings; else the math threads'
    // noinc cp.async arrivals), gbar[b] (one arrival: thread 0's arming each round; TMA: armed
    // here, then by the coefficient warp that waited the phase); initialised and fenced before
    // any CTA of the cluster may signal them
    setp.ne.u32 %p1, %tx, 0;
    @%p1 bra INIT_END;""")
    for s in range(k.stages):
        e(f"    mbarrier.init.shared::cta.b64 [full+{8 * s}], {2 if tma else NW * 32};")
    if MIXW:
        for b_ in range(2):
            e(f"""    mbarrier.init.shared::cta.b64 [hready+{8 * b_}], {TT};
    mbarrier.init.shared::cta.b64 [mixed+{8 * b_}], {MIXERS};""")
    if HX:
        # hbar[b]: one arrival (the mix warps' arming, here for tiles 0..HXB-1, then after each mix)
        for b_ in range(HXB):
            e(f"""    mbarrier.init.shared::cta.b64 [hbar+{8 * b_}], 1;
    mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [hbar+{8 * b_}], {TT * 16};""")
    if fused:
        for s_ in range(k.stages):
            e(f"    mbarrier.init.shared::cta.b64 [xready+{8 * s_}], {NPW * 32 + (32 if k.cwt else 0)};")
    for b_ in range(HXG if HX else 2):
        e(f"    mbarrier.init.shared::cta.b64 [gbar+{8 * b_}], 1;")
        if HX:  # armed here for tiles 0..HXG-1, then by the coefficient warp that waited the phase
            e(f"    mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [gbar+{8 * b_}], {CL * HX_SLOTS * 16};")
    e("""    fence.mbarrier_init.release.cluster;
INIT_END:""" + ("""
    barrier.sync 0;                         // the mbarriers are initialised (this CTA's own fills)""" if k.OPENING else "") + """
    // base[24] -> shared (warp NW's coefficient bodies read sm_base)
    setp.ge.u32 %p1, %tx, 24;
    @%p1 bra BASE_END;
    mul.wide.u32 %rd1, %tx, 4;
    add.u64 %rd1, %base, %rd1;
    ld.global.nc.f32 %f1, [%rd1];
    shl.b32 %r1, %tx, 2;
    mov.u32 %r2, sm_base;
    add.u32 %r2, %r2, %r1;
    st.shared.f32 [%r2], %f1;
BASE_END:""" + (f"""
    setp.eq.u32 %p1, %tx, 0;
    @%p1 st.shared.u32 [sm_base+{4 * 24}], %C0;     // fused pair entry: C0 for the math warps' mix""" if k.pair and not tma else "") + (exit_stamps("init") if STAMPS else "") + """
    barrier.cluster.arrive.release;         // the math warps wait after phi's loads are issued""")


def side_warps(k):
    """The warps beside the math and coefficient warps: the pre entry's mix warps or the fused
    entry's post warps (the ring's fills, x', the pre-mix)."""
    e, fused, tma, MIXW, MIXERS, STAMPS, phi_bar, phi_bar_threads, VT = k.e, k.fused, k.tma, k.MIXW, k.MIXERS, k.STAMPS, k.phi_bar, k.phi_bar_threads, k.VT
    if MIXW and fused:
        e(f"""
    // ================= post warps: the ring's fills, x' of each landed stage, the pre-mix =======
    // Step j: x' of round j (wait full[j % {STAGES}], arrive on xready), then round j - 3: wait
    // hready[(j-3) & 1], mix it (and store x' to x_out), arrive on mixed, refill its stage with
    // round j + 1. x' runs up to 3 rounds ahead of the math warps, the mix behind them.
POST_WARP:
    sub.u32 %r1, %warp, {NW + NCW};{post_lane_consts("%r1", NPW)}
    sub.u32 %tm, %tx, {32 * (NW + NCW)};""")
    elif MIXW:
        e(f"""
    // ================= mix warps: the ring's fills and the pre-mix of every tile ================
    // Round j (tile cid + j ncl, stage j % {STAGES}): wait hready[j & 1] (the math warps wrote its
    // h_pre to shs[j & 1]), mix it, arrive on mixed[j & 1] (shs[j & 1] may be rewritten), refill
    // the stage with round j + {STAGES}. Off the math warps, the mix overlaps their next rounds.
MIX_WARP:
    sub.u32 %tm, %tx, {32 * (NW + NCW)};""")
        if STAMPS:
            e(exit_stamps("mix", "_start", 9))
    if MIXW:
        if not tma:
            for v in range(VT):
                e(f"    add.u32 %tvv{v}, %tm, {MIXERS * v};")
                e(mapping(k, f"%tvv{v}", NW * 32, v))
        e(mapping(k, "%tm", MIXERS))           # the mix items (its copy registers unused)
        if tma:
            e(f"""    mov.u64 %rd7, p_args;
    cvta.param.u64 %rd7, %rd7;
    add.u64 %rd7, %rd7, {A_TMAP};              // the tensor map of x (generic address of the parameter)""")
        else:
            e(f"""    shr.u32 %r1, %C, 5;
    mov.u32 %ctps, {NW * 32};
    div.u32 %ctps, %ctps, %r1;              // the fills' tokens per pass (virtual threads)""")


        if STAMPS:
            e(exit_stamps("mix", "_pro", 10))
        for j in range(k.stages):
            e(f"""    mad.lo.u32 %r20, %ncl, {j}, %cid;
    mov.u32 %r21, {j};""")
            if k.pair and j >= PAIR_STAGES:  # stages past this half's depth: no fill
                e(f"""    setp.ge.u32 %p1, %r21, %nst;
    @%p1 mov.u32 %r20, %ntiles;""")
            fill(k, "%r20", "%r21", f"PRO{j}")
            if j == 0 and k.LOCALFILL:  # stage 0 is this CTA's own: the peers are needed only now
                e("    barrier.cluster.wait.acquire;")
            if j == 0 and phi_bar:  # the first tile iteration needs stage 0 and phi: stages 1.. wait for phi
                e(f"""    barrier.sync {PHI_BAR}, {phi_bar_threads};         // the math warps' phi fragments are in""")
        if STAMPS:
            e(exit_stamps("ready", "_fill"))
        e("""    mov.u32 %nr, 0;
    setp.le.u32 %p1, %ntiles, %cid;
    @%p1 bra TILE_END;
    sub.u32 %nr, %ntiles, %cid;
    sub.u32 %nr, %nr, 1;
    div.u32 %nr, %nr, %ncl;
    add.u32 %nr, %nr, 1;                    // this cluster's rounds""")
        if fused:
            e(f"""    // x' of rounds 0, 1, 2 (their stages come from the first fills)
    mov.u32 %r23, 0;
PW_PRO:
{xprime(k, "XP", "%r23")}
    add.u32 %r23, %r23, 1;
    setp.lt.u32 %p1, %r23, 3;
    @%p1 bra.uni PW_PRO;
    // round m: the mix (round m's h_pre comes at the end of the math warps' round m + 1), the
    // refill with round m + {STAGES}, then x' of round m + 3 (refilled one step ago)""")
            mix_rounds(k, "PW", f"""    add.u32 %r23, %kk, 3;
{xprime(k, "XF", "%r23")}""")
        else:
            mix_rounds(k, "MW", "")


def exit_cluster(k):
    """TILE_END: every warp leaves together with the cluster."""
    e, STAMPS = k.e, k.STAMPS
    e(f"""TILE_END:{exit_stamps("warp") if STAMPS else ""}
    // leave together (no CTA's shared memory may vanish while the cluster still runs)
    barrier.cluster.arrive.release;
    barrier.cluster.wait.acquire;{exit_stamps("cluster") if STAMPS else ""}{PAIR_COUNT if k.pair else ""}
    ret;
}}
""")


def kernel(fused, mixw, tma=False, exp=frozenset(), cwt=0, stamp_ids=None, pair=False):
    """One entry: pre (mix warps; tma: the ring filled by TMA, h_pre exchanged; pair: two
    clusters per tile) or the fused post_pre (mixw: its post warps also mix and fill the ring)."""
    k = Entry(fused, mixw, tma, exp, cwt, stamp_ids if stamp_ids is not None else [0], pair)
    for part_ in (entry_start, phi_fragments, tile_loop, warp_sums_hx, exchange, round_end, coef_warp,
                  side_warps, exit_cluster):
        part_(k)
    return k.text()


# the file's shared memory (every entry of a file uses these names; {stages}: the ring's depth)
SHARED = f"""
.shared .align 16 .b8 red[{NW * TT * 28 * 4}];        // warp partials [{NW}][{TT}][28]
.shared .align 16 .b8 gat[{{gat}}];       // gathered partials {{gat_dims}} float4
.shared .align 16 .b8 shs[{2 * TT * 16}];          // h_pre [2][{TT}][4] (the pre entry's mix warps: by round parity)
.shared .align 16 .b8 pss[{TT * 4}];            // this CTA's ss of the tile's tokens
.shared .align 16 .b8 psum[{TT * 7 * 16}];       // the cp.async entries: this CTA's partials of the tile [{TT}][7] float4
.shared .align 16 .b8 sm_lg[{NCW * LG_ROW}];        // per coefficient warp: the own token's row (ss, logits), the h_res batch
.shared .align 16 .b8 sm_base[128];       // base[24]
.shared .align 8 .b64 full[{{stages}}];
.shared .align 8 .b64 gbar[{HXG}];            // gat[b] complete (TMA entry: {HXG} buffers, else 2)
.shared .align 8 .b64 xready[{{stages}}];      // fused entry: x' of stage s computed (the post warps)
.shared .align 8 .b64 hready[2];             // pre entry: h_pre of the round of this parity in shs
.shared .align 8 .b64 mixed[2];              // pre entry: the mix warps are done with shs[parity]
.shared .align 16 .b8 hin[{HXB * TT * 16}];         // TMA entry: h_pre [tile % {HXB}][token] (CTA j sends token j's)
.shared .align 8 .b64 hbar[{HXB}];           // TMA entry: hin[b] complete ({TT} x 16 bytes)
.extern .shared .align 1024 .b8 dsm[];     // the ring: {{stages}} stages of {TT} x (C/2 + {PAD}) bytes (fused: rows of 5 (C/8 + 16) bytes and a pad, + {HC_TILE}{{ring_note}})

"""


def main(exp=frozenset(), cwt=0):
    ids = [0]  # PST label numbers of the stamps experiment, unique over the file
    text = HEADER + SHARED.format(stages=STAGES, gat=2 * CL * SLOTS * 16, gat_dims=f"[2][{CL}][{SLOTS}]", ring_note="")
    text += kernel(False, True, exp=exp, cwt=cwt, stamp_ids=ids)
    text += "\n" + kernel(False, True, tma=True, exp=exp, cwt=cwt, stamp_ids=ids)
    text += "\n" + kernel(True, False, exp=exp, cwt=cwt, stamp_ids=ids)
    text += "\n" + kernel(True, True, exp=exp, cwt=cwt, stamp_ids=ids)
    return text


def main_pair(exp=frozenset()):
    """pre_pc_pair.ptx: the pair entries (pre; the fused post_pre)."""
    ids = [0]
    # both entries exchange h_pre (HX): their gather buffers are HXG of CL x HX_SLOTS float4s
    return (PAIR_HEADER + SHARED.format(stages=PAIR_STAGES_MAX, gat=HXG * CL * HX_SLOTS * 16,
                                         gat_dims=f"[{HXG}][{CL}][{HX_SLOTS}]",
                                         ring_note=f"; the fused pair entry: {PAIR_FUSED_STAGES} stages of rows of the 4 x slices + {HC_TILE}, "
                                                   f"then {PAIR_F_STAGES} of f rows (C/8 + 16 bytes)")
            + kernel(False, True, tma=True, exp=exp, stamp_ids=ids, pair=True)
            + "\n" + kernel(True, False, exp=exp, stamp_ids=ids, pair=True))


def generate(experiments):
    """pre_pc.ptx and pre_pc_pair.ptx; experiments: nosink, nomma, nomix, stamps, nophi, nophibar,
    noxf, noxo, cwt=N (timing builds)."""
    exp = frozenset(k for k in experiments if k != "cwt")
    return {"asm/ptx/sm90/pre_pc.ptx": main(exp, int(experiments.get("cwt") or 0)),
            "asm/ptx/sm90/pre_pc_pair.ptx": main_pair(exp)}
