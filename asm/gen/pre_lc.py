"""`pre` for few tokens on two clusters that split the logits, sm_90a: asm/ptx/sm90/pre_lc.ptx
(bf16 and f32 storage, n = 4; the wide entry, bf16, to 64 tokens on the tensor cores).

The kernel is written by hand here as PTX text; Python only unrolls what PTX cannot loop over
without register indexing (the logit rows, the four tokens of a group, the reduction levels). The
header below is the design document; docs/kernels/pre.md has the measurements.
"""

from . import catalogue, sinkhorn
from .blocks import store8
from . import pre_decode_post as fold
from .abi import POST_PRE_PC, PRE_DECODE, RUST_MIRROR
from .pre_decode import GRID_DEPENDENCY, inv_rms, load_args, sigmoid

# Timing builds (asm/gen/cli.py lists them): pre_lc.stamps makes thread 0 of every CTA write
# %globaltimer at its phase boundaries (STAMP_NAMES; the last three in the res role's tail only) to
# the workspace, STAMP_STRIDE bytes a CTA (tests/gpu_pre.rs `profile_lc_phases`).
EXPERIMENTS = set()

N = 4                       # streams (the entries are specialised for n = 4: M = 24 logits)
M = N * N + 2 * N
CLUSTER = 16                # CTAs per cluster (a non-portable size)
THREADS = 256
MAX_CPC = 512               # channels per CTA (C / 16): C <= 8192
C_MULTIPLE = 128            # C / 16 a multiple of 8: every bulk copy 16-byte aligned and sized
WARPS = THREADS // 32
ROW = 20                    # words of a pushed row: ss, up to 16 logits, zeros

# The two roles. A res cluster owns the h_res logits (rows 2n .. M of phi) of `group` tokens and
# runs their Sinkhorns (CTA t token t's); a pre cluster the h_pre and h_post logits (rows 0 .. 2n)
# of `group` tokens and their mix. A pre token costs half the rows of a res token, so a pre
# cluster serves twice the tokens with the same 64 accumulators a thread.
ROLES = {
    "res": {"first": 2 * N, "rows": N * N, "words": ROW, "group": 4},
    "pre": {"first": 0, "rows": 2 * N, "words": 12, "group": 8},
}
RES_GROUP = ROLES["res"]["group"]
PRE_GROUP = ROLES["pre"]["group"]
GROUP = max(RES_GROUP, PRE_GROUP)   # the most tokens a cluster serves (the shared arrays' rows)
# Up to NARROW_MAX_TOKENS the pre clusters take RES_GROUP tokens too (three of each role fit the
# six resident clusters, and a pre cluster's path is shorter with fewer tokens); beyond, PRE_GROUP.
# The kernel applies the rule at its start (declarations); src/device/cuda/pre/lc.rs `pre_group`
# mirrors it for the grid.
NARROW_MAX_TOKENS = 12
FMA_MAX_TOKENS = 16         # up to here the FMA bodies: 4 res clusters and 2 pre clusters, six
                            # 16-CTA clusters resident at once on 132-SM parts
# Above FMA_MAX_TOKENS (bf16 pre entries): both roles take WIDE_GROUP tokens a cluster and project
# on the tensor cores (mma.sync m16n8k16: a group is one m16 tile of tokens), up to MAX_TOKENS:
# 4 + 4 clusters, 128 CTAs, resident at once on 132-SM parts.
WIDE_GROUP = 16
MAX_TOKENS = 64
# Above WIDE_PRE_ABOVE tokens a pre cluster takes WIDE_PRE_GROUP tokens (two m16 tiles): T = 64
# is then 4 + 2 clusters. At most 7 clusters of 16 CTAs are resident at once on the 132-SM parts
# (one CTA an SM, a cluster within a GPC), so pre clusters of 16 tokens at T = 64 (eight clusters)
# leave one cluster waiting for a free GPC (H200, C = 4096, T = 64, mhc tune: 11.27 us with 16
# tokens a pre cluster against 8.68 with 32; docs/kernels/pre.md).
WIDE_PRE_ABOVE = 48
WIDE_PRE_GROUP = 32
# Where the wide entries run. `post_pre` must give `post` then `pre`'s bits, so wherever it folds
# post into a kernel, `pre` runs that kernel too (the mid kernel's fold with the mid kernel, this
# entry's fold with this entry). Measured on an H200 in a graph (docs/kernels/post_pre.md), the
# fold of post into the wide entry costs a pass over the group's x slices a CTA before the
# projection (cnt cpc / 8 items of 160 FMA on 256 threads):
# - up to C = WIDE_FOLD_MAX_C both wide entries take T = WIDE_MIN_TOKENS.. (post_pre at C = 4096,
#   T = 17 / 32: 6.61 / 6.89 us against the mid kernel's fold 6.93 / 7.84; at 5120 7.55-7.56 /
#   7.82-7.83 against 7.65-7.66 / 8.83-8.90);
# - above it, the mid kernel and its fold keep T <= 32 (C = 6144, T = 17: the mid fold 7.73-7.77,
#   the wide fold 8.20-8.21 us, though 0.4-0.5 us ahead at T = 24 / 32; C = 7168, T = 17: 8.03
#   against 9.06: the items a CTA grow with C), and the wide entries start at LARGE_C_MIN_TOKENS
#   (post_pre at T = 40 / 48: 9.48 / 9.92 against post, then this pre 9.96 / 10.21);
# - post_pre folds to WIDE_POST_MAX_TOKENS: above it the h_pre clusters of 32 tokens double their
#   items and post, then this pre is faster (T = 64: 8.39 against 9.20 us at C = 4096, 11.27
#   against 13.17 at 7168), and to C = WIDE_POST_MAX_C, past which f's slices do not fit.
WIDE_MIN_TOKENS = FMA_MAX_TOKENS + 1
LARGE_C_MIN_TOKENS = 33
WIDE_FOLD_MAX_C = 5120
# The wide layout pads a token's x slice by 16 bytes and a phi row slice by 32, so the rows that
# one ldmatrix phase (8 token rows) and one phi fragment load (8 logit rows) touch fall in
# different banks (unpadded, C / 16 = 256 channels put every row at a multiple of 128 bytes).
WIDE_X_PAD = 16
WIDE_PHI_PAD = 32
# The post_pre wide entry's largest C: f's slices of a cluster's tokens beside the wide layout and
# the entry's static arrays fit a CTA's 227 KB up to C = 7168 (the h_res role: 212,384 bytes), not
# at 8192 (240,032); and its largest T (h_pre clusters of WIDE_GROUP tokens).
WIDE_POST_MAX_C = 7168
WIDE_POST_MAX_TOKENS = WIDE_PRE_ABOVE
PRE_WORDS = ROLES["pre"]["words"]
# Above MAX_TOKENS the long wide entry (`pre` only) takes LONG_RES_GROUP tokens an h_res cluster
# (two m16 tiles; CTA r runs the Sinkhorns of tokens r and r + 16) and LONG_PRE_GROUP an h_pre
# cluster (three tiles), to LONG_MAX_TOKENS: T = 128 is 4 + 3 clusters, the seven a 132-SM part
# holds at once (the persistent clusters pay about 4.8 us before their first tile and 4 us of
# drain there: docs/kernels/pre.md). Both layouts need 528 bytes a channel of C / 16 and the static
# arrays 27,008 bytes, which fit a CTA's 227 KB to C = LONG_MAX_C.
LONG_RES_GROUP = 32
LONG_PRE_GROUP = 48
LONG_MAX_TOKENS = 128
LONG_MAX_C = 6144


class Wide:
    """The token groups of a wide entry: h_res clusters of `res` tokens, h_pre clusters of `pre`
    tokens, or `pre_above` above `above` tokens; CTA r of a cluster owns the tokens r + 16 j (the
    h_res role runs their Sinkhorns, the h_pre role adds their rows, stores their coefficients and
    sends their h_pre to every CTA). Its rows take T = tokens[0]..tokens[1]; `suffix` names its
    entries (mhc_pre_lc<suffix>_sm90_bf16)."""

    def __init__(self, suffix, res, pre, above, pre_above, tokens):
        self.suffix, self.res, self.pre, self.above, self.pre_above = suffix, res, pre, above, pre_above
        self.tokens = tokens
        self.pre_groups = (pre,) if pre_above == pre else (pre, pre_above)
        self.res_slots = res // CLUSTER
        self.pre_slots = max(self.pre_groups) // CLUSTER
        self.top = max(res, *self.pre_groups)
        self.layouts = (("res", res),) + tuple(("pre", g) for g in self.pre_groups)


WIDE = Wide("w", WIDE_GROUP, WIDE_GROUP, WIDE_PRE_ABOVE, WIDE_PRE_GROUP, (WIDE_MIN_TOKENS, MAX_TOKENS))
LONG = Wide("w128", LONG_RES_GROUP, LONG_PRE_GROUP, LONG_MAX_TOKENS, LONG_PRE_GROUP, (MAX_TOKENS + 1, LONG_MAX_TOKENS))


def role_select(reg, key):
    """reg = the role's ROLES[..][key] (res where %p_res, else pre)."""
    return f"selp.u32 {reg}, {ROLES['res'][key]}, {ROLES['pre'][key]}, %p_res;"


def lc_shared(esz, cpc, post=False):
    """Dynamic shared memory at cpc channels a CTA, the larger role's: x slices of the role's
    tokens, gamma_k's slice, its phi row slices; post_pre: then f's slices of its tokens."""
    def role(r):
        g = ROLES[r]["group"]
        return g * N * esz + 4 * N + 4 * N * ROLES[r]["rows"] + (g * esz if post else 0)
    return max(role("res"), role("pre")) * cpc


def wide_role_shared(role, group, cpc, post=False):
    """Dynamic shared memory of a wide role's CTA (bf16) at cpc channels: group padded x slices,
    gamma_k's slice and the role's padded phi row slices (gk_s takes a phi row's padded size);
    post_pre: then f's slices of the group's tokens."""
    return (group * (N * 2 * cpc + WIDE_X_PAD) + (1 + ROLES[role]["rows"]) * (4 * N * cpc + WIDE_PHI_PAD)
            + (group * 2 * cpc if post else 0))


WIDE_LAYOUTS = WIDE.layouts


def wide_shared(cpc, post=False, wide=WIDE):
    """The most dynamic shared memory a launch of a wide entry at cpc channels needs (its roles'
    larger)."""
    return max(wide_role_shared(r, g, cpc, post) for r, g in wide.layouts)


HEADER = f"""\
// GENERATED by python3 -m asm.gen (asm/gen/pre_lc.py) -- edit the generator, not this file.
// =============================================================================================
// pre_lc.ptx -- mHC `pre` (docs/math.md stages 1-3) for few tokens on sm_90a, n = 4 streams
// (M = 24 logits), C a multiple of {C_MULTIPLE} up to {CLUSTER * MAX_CPC}, no gamma_f; entries
// mhc_pre_lc_sm90_bf16 / _f32 (storage dtype of x and a), and mhc_post_pre_lc_sm90_bf16 / _f32:
// `post_pre` (layer l's post, then this pre) in one launch (POST_PRE below); the wide entries
// mhc_pre_lcw_sm90_bf16 and mhc_post_pre_lcw_sm90_bf16 take T = {WIDE_MIN_TOKENS}..{MAX_TOKENS} on the tensor
// cores (WIDE below), mhc_pre_lcw128_sm90_bf16 T = {LONG.tokens[0]}..{LONG.tokens[1]} (LONG below).
//
// WHY     The few-token kernel of pre_decode.ptx spreads C over ~128 CTAs; their partial sums
//         meet through global memory (tagged words polled by the token's CTA, then h_pre
//         published again for every CTA's mix): about 2.4 us of a 4.9 us call at T = 1 (H100
//         phase stamps, docs/kernels/pre.md). Here the partial sums meet on chip: a cluster of
//         {CLUSTER} CTAs splits the K = nC reduction, its CTAs push their partial rows to each other
//         through distributed shared memory, and no CTA waits for another cluster. The Sinkhorn
//         needs every h_res logit and the mix needs h_pre, so the logits are split between two
//         clusters that never talk: one computes the 16 h_res logits (and runs the Sinkhorn),
//         the other the 8 h_pre / h_post logits (and mixes). Each CTA then loads 16 (8) rows of
//         phi for its C/16 channels: 64 (32) KB at C = 4096 instead of 12 KB, which is the
//         price of the design.
// GRID    Clusters of {CLUSTER} CTAs ({THREADS} threads): R = ceil(T / {RES_GROUP}) of role res, cluster g < R
//         serving tokens [{RES_GROUP}g, {RES_GROUP}g + {RES_GROUP}), then ceil(T / G) of role pre, cluster R + g serving
//         tokens [G g, G g + G), G = {RES_GROUP} up to T = {NARROW_MAX_TOKENS} and {PRE_GROUP} above. A token's h_pre / h_post
//         logits are half its h_res logits, so a pre cluster can take twice the tokens with the
//         same 64 accumulators a thread: T = 16 is 4 + 2 clusters, resident at once on 132-SM
//         parts. Up to T = {NARROW_MAX_TOKENS} three of each role fit as well, and a pre cluster of {RES_GROUP} tokens ends
//         sooner (H200: C = 7168, T = 8, post_pre in a graph 6.42 against 6.59 us with {PRE_GROUP}). A
//         cluster's group: its tokens (cnt). CTA rank r owns channels [r cpc, (r+1) cpc) of every
//         stream, cpc = C / 16.
// LOADS   Before the grid dependency every CTA prefetches its phi runs (and gamma_k's) to L2
//         (cp.async.bulk.prefetch: weights only; nothing enters the CTA); where flags carry
//         FLAG_EARLY_PARAMS (the caller's promise that no running kernel writes the weights) it
//         skips the first wait, copies its phi rows, and waits after them. After it, bulk copies
//         (cp.async.bulk) bring the role's phi rows (a run of cpc floats per row and stream), the
//         group's x rows (a run per token and stream) and gamma_k's slice (or 1.0 where gamma_k
//         is absent) into dynamic shared memory, all completing on one mbarrier. A warp's lanes
//         issue bulk copies one after another, so lane l of warp w takes copy w + 8 (l / 4) of
//         stream l % 4 (at most 12 a warp instead of 68 on one warp: T = 1, C = 4096 in a graph
//         5.77 -> 4.42 us, H200). One mbarrier a stream, the projection waiting per quad, was
//         slower in graph replays wherever C / 16 is not 256 (C = 3072, T = 4: 8.21 against
//         4.43 us; C = 7168: 9.78 against 5.87). Layout: x_s[group][4 cpc] (storage dtype; zeros
//         past the group's tokens), gk_s[4 cpc] f32, phi_s[rows][4 cpc] f32.
// PROJECT Thread j owns the slice's element quads q = j, j + {THREADS}, ...: per quad, the group's
//         tokens' x (widened, times gamma_k) and the role's rows of phi (16-byte loads: a warp
//         reads 512 consecutive bytes) into acc[t][row] (FMA over the quad's 4 elements, in
//         order) and ss[t] (raw x); one body per token count (1, 2, 3-4, 5-8).
//         The warp's 32 partials of each value are added by recursive halving: at the level of
//         offset o, lanes with bit o send one half of their values and keep the other
//         (shfl.bfly; keep + received), so lane l ends with values (l V / 32) .. summed over
//         the warp (64 values: 62 shuffles instead of 5 a value); a butterfly finishes where
//         fewer than 32 values remain. red[w][v] then gets added in warp order: the CTA's
//         partial row of each token (ss, the role's logits).
// PUSH    After the cluster barrier that the opening mbarrier init announced (arrive at the
//         start, wait here), each row goes out by st.async (complete_tx on the receiver's
//         mbarrier): role res sends token t's row ({ROW} words) to CTA t only (rows of absent
//         tokens are zeros, so CTAs 0..{RES_GROUP - 1} expect a fixed byte count), role pre every token's
//         row (12 words) to every CTA (each expects cnt rows a rank; 16 cnt 3 float4 items, the
//         CTA's threads taking every {THREADS}th). No receiver exits before its bytes arrived.
// RES     CTA t < the group's tokens adds its token's 16 rows in rank order (17 threads, one a
//         word), then thread 0: inv_rms, Z = logit inv_rms scale[2] + base, the Sinkhorn
//         (pre_decode.ptx's one-thread body, sinkhorn.unrolled), h_res stored.
// PRE     Every CTA adds every token's rows in rank order (a thread per token and word), then a
//         thread per token and logit: h_pre = sigma(z) (+ eps_hc for V4), h_post = 2 sigma(z);
//         CTA t stores token t's h_pre, h_post and inv_rms. Then the mix of the CTA's channels:
//         a[t][c] = sum_i h_pre[t][i] x_s[t][i][c] (f32, streams in order, one rounding),
//         an item of 8 channels of a token at a time, thread j taking items j, j + {THREADS}, ...
// POST_PRE The post_pre entries take PostPrePcArgs (this kernel's arguments, then layer l's f,
//         h_post, h_res, x_out and their strides). With the loads, bulk copies also bring f's
//         slice of the group's tokens (f_s[group][cpc] after phi_s) and threads load the tokens'
//         h_post / h_res words (sm_uc[t][20]). After the loads, item s < cnt cpc / 8 (thread j
//         takes items j and j + {THREADS} in straight-line code: a loop over the items took 5.87
//         against 5.23 us at C = 4096, T = 16 in a graph, H200) is token s / (cpc / 8) and 8
//         channels: x'[i] = h_post[i] f, then + w[i][j] x[j] for j = 0..3 (w[i][j] = h_res[j][i] for
//         V4, h_res[i][j] for the Paper): post.ptx's f32 operations in its order, every output
//         stream from one read of f and the 4 streams;
//         rounded to the storage type, stored to x_out by the pre role, and written back over
//         the item's own x_s words (no other item reads them). The projection, sums of squares
//         and mix then read x', so the outputs are post then pre's, bit for bit.
// WIDE    mhc_pre_lcw_sm90_bf16 and mhc_post_pre_lcw_sm90_bf16 (T > {FMA_MAX_TOKENS}; their rows: from
//         T = {WIDE_MIN_TOKENS} up to C = {WIDE_FOLD_MAX_C}, from {LARGE_C_MIN_TOKENS} above it; post_pre to T = {WIDE_POST_MAX_TOKENS} and C = {WIDE_POST_MAX_C},
//         the reasons beside WIDE_MIN_TOKENS in asm/gen/pre_lc.py): res clusters of {WIDE_GROUP}
//         tokens, pre clusters of {WIDE_GROUP} ({WIDE_PRE_GROUP} above T = {WIDE_PRE_ABOVE}: 4 + 2 clusters at T = 64, resident
//         at once; with pre clusters of {WIDE_GROUP}, eight clusters, one would wait for a free GPC). x
//         slices padded by {WIDE_X_PAD} bytes and phi row slices by {WIDE_PHI_PAD} (conflict-free ldmatrix and
//         fragment loads). The projection is mma.sync m16n8k16 (projection_mma): A = 16 tokens' x
//         by ldmatrix.x4, B = phi times gamma_k split into bf16 hi (upper half, prmt) + lo (the
//         rest, rounded), ss the Gram diagonal; k-steps dealt to the warps, two a trip in four
//         accumulator sets. The pre role gathers each token's row at its owner CTA t % 16
//         (st.async), which computes and stores its coefficients and st.async's h_pre to every
//         CTA's sm_hp (the h_pre mbarrier sm_hbar, 16 cnt bytes); every CTA then mixes. The
//         post_pre wide entry folds post in as POST_PRE says, its item passes sized for {WIDE_GROUP} tokens.
//         Each entry declares its own static arrays, sized for its groups.
// LONG    mhc_pre_lcw128_sm90_bf16 (T = {LONG.tokens[0]}..{LONG.tokens[1]}, C up to {LONG_MAX_C}; no post_pre twin: post_pre runs
//         post, then it): the wide entry with res clusters of {LONG.res} tokens and pre clusters of {LONG.pre}
//         (T = 128: 4 + 3 clusters, resident at once). CTA r owns tokens r + 16 j of either role:
//         res token t's row goes to CTA t % 16 (gat[t / 16][rank][{ROW}]), where warp j adds the rows
//         of token r + 16 j and runs its Sinkhorn on lane 0, two side by side; pre CTA r owns {LONG.pre_slots}
//         tokens. Both roles need 528 bytes a channel of C / 16: with the static arrays they fit a
//         CTA's 227 KB to C = {LONG_MAX_C}.
// ORDER   Every sum has a fixed order (the quads per thread, the halving levels, warps, ranks):
//         identical inputs give identical bits.
"""

EXIT = """EXIT:
    ret;
}
"""

STAMP_NAMES = ("start", "dependency", "loaded", "projected", "rows", "cluster", "gathered", "done",
               "summed", "z", "iterated")  # then %clock64 at "z" and "iterated" (slots 11, 12)
STAMP_STRIDE = 128          # bytes of stamps a CTA (16 slots; src/device/cuda/pre/lc.rs reads them)


def stamp(k, clock=None):
    """pre_lc.stamps: thread 0 writes %globaltimer to stamp k of this CTA (ws_part + STAMP_STRIDE
    ctaid), and with clock %clock64 to slot clock."""
    if "stamps" not in EXPERIMENTS:
        return ""
    cycles = f"""
    mov.u64 %stmp, %clock64;
    @%pst st.global.u64 [%sadr+{8 * clock}], %stmp;""" if clock is not None else ""
    return f"""
    mov.u64 %stmp, %globaltimer;
    @%pst st.global.u64 [%sadr+{8 * k}], %stmp;""" + cycles


def group_rule(wide):
    """The cluster's role, first token and group (%p_res, %tok0, %grp; %r0 = res clusters): the
    narrow rule (res RES_GROUP, pre RES_GROUP or PRE_GROUP tokens above NARROW_MAX_TOKENS) or a
    wide entry's groups (Wide)."""
    res, (pre, pre_above, above) = ((wide.res, (wide.pre, wide.pre_above, wide.above)) if wide
                                    else (RES_GROUP, (RES_GROUP, PRE_GROUP, NARROW_MAX_TOKENS)))
    return f"""    add.u32 %r0, %T, {res - 1};
    shr.u32 %r0, %r0, {res.bit_length() - 1};                   // res clusters: ceil(T / {res})
    setp.lt.u32 %p_res, %clu, %r0;          // res first (h_res logits), then pre (h_pre / h_post, mix)
    setp.gt.u32 %p1, %T, {above};
    selp.u32 %r3, {pre_above}, {pre}, %p1;          // a pre cluster's group
    shl.b32 %r1, %clu, {res.bit_length() - 1};
    mov.u32 %r4, {res};"""


def static_arrays(top, wide, post):
    """The entry's own static shared arrays, sized for its groups (top: its largest): the narrow
    entries' stay as small as their 8 tokens need, the wide entries' hold their groups."""
    if wide:
        red = max(wide.res * (ROLES["res"]["rows"] + 1), max(wide.pre_groups) * (ROLES["pre"]["rows"] + 1))
        gat = CLUSTER * max(wide.res_slots * ROW, wide.pre_slots * PRE_WORDS)
        res_gat = f"[{wide.res_slots}][16 ranks][{ROW}]" if wide.res_slots > 1 else f"[16 ranks][{ROW}]"
        gat_what = f"res: {res_gat}; pre: [16 ranks][{wide.pre_slots}][{PRE_WORDS}] (the owned tokens)"
    else:
        red = max(r["group"] * (r["rows"] + 1) for r in ROLES.values())
        gat = max(CLUSTER * ROW, GROUP * CLUSTER * PRE_WORDS)
        gat_what = f"res: [16 ranks][{ROW}]; pre: [{GROUP}][16 ranks][{PRE_WORDS}]"
    uc = f"""
    .shared .align 16 .b8 sm_uc[{4 * top * 20}];          // layer l's h_post [4] and h_res [4][4] per token""" if post else ""
    return f"""    .shared .align 8 .b64 sm_lbar;             // the copies' mbarrier
    .shared .align 8 .b64 sm_gbar;             // the gather's mbarrier (st.async from the peers)""" + ("""
    .shared .align 8 .b64 sm_hbar;             // the h_pre mbarrier (st.async from the owners)""" if wide else "") + f"""
    .shared .align 16 .b8 sm_red[{4 * WARPS * red}];       // warp sums red[8][V + tg] (V = tg rows)
    .shared .align 16 .b8 sm_row[{4 * top * ROW}];         // the CTA's rows [{top}][{ROW}]
    .shared .align 16 .b8 sm_gat[{4 * gat}];        // {gat_what}
    .shared .align 16 .b8 sm_sum[{4 * top * 12}];          // the rows added over the ranks
    .shared .align 16 .b8 sm_hp[{4 * top * N}];            // h_pre [{top}][4]{uc}"""


def declarations(name, esz, post, wide, top):
    tiles = max(2, top // 16)               # the most m16 tiles of tokens a projection_mma body holds
    return f""".visible .entry {name}(
    .param .align 8 .b8 p_args[{(POST_PRE_PC if post else PRE_DECODE).size}]
)
.reqntid {THREADS}, 1, 1
.reqnctapercluster {CLUSTER}, 1, 1
.minnctapersm 1
{{
{static_arrays(top, wide, post)}
    .reg .pred %p<8>;
    .reg .pred %p_paper, %p_gk, %p_res, %p_early, %pb;
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    .reg .f32 %f<16>;
    .reg .b64 %x, %phi, %scale, %base, %gk, %a, %hpre, %hpost, %hres, %inv, %part, %sync, %st;
    .reg .b32 %T, %n, %C, %M, %xs, %as, %cpc, %iters, %flags;
    .reg .f32 %eps_norm, %eps_hc, %invk, %inv_t, %sc, %bz<16>;
    .reg .b32 %tx, %warp, %lane, %rank, %clu, %tok0, %cnt, %grp, %K, %c0, %q, %s;
    .reg .b32 %xsm, %gksm, %phsm, %rowb, %xrow, %lbar, %gbar, %hbar;
    .reg .f32 %acc<64>, %ss<8>, %xq<32>, %gq<4>, %ph<4>, %hs, %hk, %hr;
    .reg .b32 %xw<8>, %bh<2>, %bl<2>, %bu<4>;
    .reg .f32 %bf<4>, %sg<{16 * tiles}>, %pa<16>, %ga<8>;
    .reg .b32 %xa<{8 * tiles}>;
    .reg .f32 %mo<8>, %mb<8>, %gv<8>;
    .reg .b32 %mx<32>;
    .reg .f32 %S<16>;
    .reg .f32 %mx, %sum, %rc;
    .reg .f32 %ls<4>, %lr<4>, %tr<8>;
    .reg .b32 %it;
    .reg .b64 %stmp, %sadr;
    .reg .pred %pst;{POST_REGS if post else ""}
{load_args()}{chr(10) + fold.load_args() if post else ""}
    mov.u32 %tx, %tid.x;
    shr.u32 %warp, %tx, 5;
    and.b32 %lane, %tx, 31;
    mov.u32 %rank, %cluster_ctarank;
    mov.u32 %clu, %clusterid.x;
{group_rule(wide)}
    sub.u32 %r2, %clu, %r0;
    mul.lo.u32 %r2, %r2, %r3;
    selp.u32 %tok0, %r1, %r2, %p_res;       // the cluster's first token
    selp.u32 %grp, %r4, %r3, %p_res;        // its group's size
    sub.u32 %cnt, %T, %tok0;
    min.u32 %cnt, %cnt, %grp;               // its tokens
    mul.lo.u32 %c0, %rank, %cpc;            // first channel of this CTA
    shl.b32 %K, %C, 2;                      // K = 4 C
    cvt.rn.f32.u32 %invk, %K;
    rcp.rn.f32 %invk, %invk;                // 1/K (inv_rms: ss * (1/K), within 1 ulp of ss / K)
    and.b32 %r1, %flags, 1;
    setp.ne.u32 %p_paper, %r1, 0;
    and.b32 %r1, %flags, 2;
    setp.ne.u32 %p_gk, %r1, 0;
    and.b32 %r1, %flags, 32;
    setp.ne.u32 %p_early, %r1, 0;           // FLAG_EARLY_PARAMS: phi before the grid dependency
    mov.u32 %xsm, dsm;                      // x_s[grp][4 cpc]
    shl.b32 %xrow, %cpc, {(4 * esz).bit_length() - 1};                 // bytes of a token's x slice (4 cpc elements)
{f"    add.u32 %xrow, %xrow, {WIDE_X_PAD};" + chr(10) if wide else ""}    mul.lo.u32 %r1, %xrow, %grp;
    add.u32 %gksm, %xsm, %r1;               // gk_s[4 cpc] f32
    shl.b32 %rowb, %cpc, 4;                 // bytes of a phi row slice (4 cpc floats)
{f"    add.u32 %rowb, %rowb, {WIDE_PHI_PAD};" + chr(10) if wide else ""}    add.u32 %phsm, %gksm, %rowb;            // phi_s[rows][4 cpc] f32""" + f"""
    {role_select('%r1', 'rows')}
    mul.lo.u32 %r1, %r1, %rowb;
    add.u32 %fsm, %phsm, %r1;               // post_pre: f_s[grp][cpc] (storage dtype)""" * post + f"""
    mov.u32 %lbar, sm_lbar;
    mov.u32 %gbar, sm_gbar;""" + ("""
    mov.u32 %hbar, sm_hbar;""" if wide else "") + (f"""
    setp.eq.u32 %pst, %tx, 0;
    mov.u32 %r1, %ctaid.x;
    mul.wide.u32 %sadr, %r1, {STAMP_STRIDE};
    add.u64 %sadr, %sadr, %part;""" if "stamps" in EXPERIMENTS else "") + stamp(0)


# post_pre: the f rows of the group's tokens, cpc elements each, arrive on the same mbarrier:
# copy m = rows + grp + 1 + k of "stream" i is token 4 k + i's f row (cpc elements from channel c0)
F_COPY = """
    bra FILLS;
COPY_F:
    sub.u32 %r5, %r3, %grp;
    sub.u32 %r5, %r5, 1;                    // k (wraps below the f copies)
    setp.gt.u32 %p1, %r5, {k_max};
    @%p1 bra FILLS;
    mad.lo.u32 %r4, %r5, 4, %r4;            // token t = 4 k + i
    setp.ge.u32 %p1, %r4, %cnt;
    @%p1 bra FILLS;
    add.u32 %r5, %tok0, %r4;
    mul.wide.u32 %rd1, %r5, %uFS;
    cvt.u64.u32 %rd2, %c0;
    add.u64 %rd1, %rd1, %rd2;
    mul.lo.u64 %rd1, %rd1, {esz};
    add.u64 %rd1, %uF, %rd1;
    mul.lo.u32 %r8, %cpc, {esz};
    mad.lo.u32 %r6, %r4, %r8, %fsm;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd1], %r8, [%lbar];"""

F_BYTES = """
    mul.lo.u32 %r5, %cnt, %cpc;
    mad.lo.u32 %r1, %r5, {esz}, %r1;        // post_pre: the f rows"""

POST_REGS = """
    .reg .b64 %uF, %uHP, %uHR, %uXO, %ua;
    .reg .b32 %uFS, %uXS, %fsm, %us0, %ut<4>, %upk<16>;
    .reg .f32 %uh<4>, %ur<16>, %uwt<16>, %ufv<8>, %uxv<32>, %uov<32>;
    .reg .pred %uq0;"""


def coef_loads(top):
    """post_pre: layer l's coefficients of the group's tokens to sm_uc[t][20] (h_post[4],
    h_res[4][4]): word s < top 20 by thread s % THREADS, a pass per THREADS words (a word past
    the group's tokens ends the thread's passes: the later ones are further past)."""
    L = []
    for k in range(-(-top * 20 // THREADS)):
        s = "%tx" if k == 0 else "%s"
        L.append((f"""
    add.u32 %s, %tx, {k * THREADS};""" if k else "") + f"""
    setp.ge.u32 %p1, {s}, {top * 20};
    @%p1 bra UC_DONE;
    div.u32 %r1, {s}, 20;{" " * (22 - len(s))}// token t
    mul.lo.u32 %r2, %r1, 20;
    sub.u32 %r2, {s}, %r2;{" " * (21 - len(s))}// word k: h_post[k] (k < 4), h_res[k - 4]
    setp.ge.u32 %p1, %r1, %cnt;
    @%p1 bra UC_DONE;
    add.u32 %r3, %tok0, %r1;
    setp.lt.u32 %p2, %r2, 4;
    mad.lo.u32 %r4, %r3, 4, %r2;
    mul.wide.u32 %rd1, %r4, 4;
    add.u64 %rd1, %uHP, %rd1;
    mad.lo.u32 %r4, %r3, 16, %r2;
    sub.u32 %r4, %r4, 4;
    mul.wide.u32 %rd2, %r4, 4;
    add.u64 %rd2, %uHR, %rd2;
    selp.b64 %rd1, %rd1, %rd2, %p2;
    ld.global.nc.f32 %f1, [%rd1];
    mov.u32 %r5, sm_uc;
    mad.lo.u32 %r5, {s}, 4, %r5;
    st.shared.f32 [%r5], %f1;""")
    return "".join(L) + """
UC_DONE:"""


def post_step(esz, most, max_cpc):
    """post_pre, after the loads: x' = post(x) over the CTA's slice of the group's tokens, with
    post.ptx's f32 operations in its order (h_post[i] f, then + w[i][j] x[j] for j = 0..3, where
    w[i][j] = h_res[j][i] for DeepSeek-V4 and h_res[i][j] for the Paper), rounded to the storage
    type, stored to x_out by the pre role and written back over x_s in place: an item (a token,
    8 channels of its 4 streams) is read and rewritten by one thread, so no other thread's item
    overlaps it. The projection and the mix then read x', and the outputs are post then pre's, bit
    for bit. Item s < cnt cpc / 8 is token s / (cpc / 8) and 8 channels of it, every output stream
    from one read of f and the 4 input streams; thread j takes items j and j + THREADS (the
    later ones only where the group's items outnumber the threads), in straight-line code."""
    passes = -(-most * max_cpc // 8 // THREADS)
    L = [f"""    // ---- post_pre: x' = post(x); item s -> token s / (cpc / 8), channels 8 (s % (cpc / 8)), 4 output streams
    shr.u32 %r10, %cpc, 3;                  // octets a stream
    mul.lo.u32 %r11, %cnt, %r10;            // items"""]
    for k in range(passes):
        L.append(post_item(esz, k))
    L.append("""UX_DONE:
    barrier.sync 0;                         // x' in x_s""")
    return "\n".join(L)


def post_item(esz, k):
    """post_step's item s = %tx + k THREADS of this thread, if any (none: on to UX_DONE)."""
    L = []
    e = L.append
    e(f"""    add.u32 %s, %tx, {k * THREADS};
    setp.lt.u32 %uq0, %s, %r11;
    @!%uq0 bra UX_DONE;
    div.u32 %r2, %s, %r10;                  // t
    mul.lo.u32 %r3, %r2, %r10;
    sub.u32 %r5, %s, %r3;
    shl.b32 %r5, %r5, 3;                    // first channel of the item in the slice
    mov.u32 %r6, sm_uc;
    mad.lo.u32 %r6, %r2, 80, %r6;           // the token's h_post[4], h_res[4][4]
    ld.shared.v4.f32 {{%uh0, %uh1, %uh2, %uh3}}, [%r6];""")
    for q in range(4):
        e(f"    ld.shared.v4.f32 {{%ur{4 * q}, %ur{4 * q + 1}, %ur{4 * q + 2}, %ur{4 * q + 3}}}, [%r6+{16 + 16 * q}];")
    e("    // w[i][j]: h_res[j][i] (DeepSeek-V4) or h_res[i][j] (Paper)")
    for i in range(N):
        for j in range(N):
            e(f"    selp.f32 %uwt{4 * i + j}, %ur{4 * i + j}, %ur{4 * j + i}, %p_paper;")
    e(f"""    mul.lo.u32 %r7, %r2, %cpc;
    add.u32 %r7, %r7, %r5;
    mad.lo.u32 %r7, %r7, {esz}, %fsm;""")
    e(load8("%r7", [f"%ufv{v}" for v in range(8)], esz))
    e(f"""    mad.lo.u32 %us0, %r2, %xrow, %xsm;
    mad.lo.u32 %us0, %r5, {esz}, %us0;      // &x_s[t][stream 0][channel]
    mul.lo.u32 %r8, %cpc, {esz};            // stream step""")
    for j in range(N):
        e(f"    mad.lo.u32 %r7, %r8, {j}, %us0;" if j else "    mov.u32 %r7, %us0;")
        e(load8("%r7", [f"%uxv{8 * j + v}" for v in range(8)], esz))
    for i in range(N):
        for v in range(8):
            e(f"    mul.rn.f32 %uov{8 * i + v}, %uh{i}, %ufv{v};")
        for j in range(N):
            for v in range(8):
                e(f"    fma.rn.f32 %uov{8 * i + v}, %uwt{4 * i + j}, %uxv{8 * j + v}, %uov{8 * i + v};")
    if esz == 2:
        for i in range(N):
            for q in range(4):
                e(f"    cvt.rn.bf16x2.f32 %upk{4 * i + q}, %uov{8 * i + 2 * q + 1}, %uov{8 * i + 2 * q};")
    e(f"""    @%p_res bra UX{k}_WRITE;
    add.u32 %r3, %tok0, %r2;
    mul.wide.u32 %ua, %r3, %uXS;
    add.u32 %r3, %c0, %r5;
    cvt.u64.u32 %rd2, %r3;
    add.u64 %ua, %ua, %rd2;
    mul.lo.u64 %ua, %ua, {esz};
    add.u64 %ua, %uXO, %ua;                 // x_out[tok][stream 0][c0 + channel]
    mul.wide.u32 %rd3, %C, {esz};           // stream step""")
    for i in range(N):
        if i:
            e("    add.u64 %ua, %ua, %rd3;")
        e(store_item(i, "st.global", "%ua", esz))
    e(f"""UX{k}_WRITE:
    mov.u32 %r7, %us0;""")
    for i in range(N):
        if i:
            e("    add.u32 %r7, %r7, %r8;")
        e(store_item(i, "st.shared", "%r7", esz))
    return "\n".join(L)


def store_item(i, op, addr, esz):
    """Output stream i's 8 values of the item (packed bf16 words or f32) stored by op at addr."""
    if esz == 2:
        return f"    {op}.v4.b32 [{addr}], {{{', '.join(f'%upk{4 * i + q}' for q in range(4))}}};"
    vals = [f"%uov{8 * i + v}" for v in range(8)]
    return (f"    {op}.v4.f32 [{addr}], {{{', '.join(vals[:4])}}};\n"
            f"    {op}.v4.f32 [{addr}+16], {{{', '.join(vals[4:])}}};")


def load8(addr, regs, esz):
    """8 consecutive values at [addr] (storage dtype) into the f32 registers regs."""
    if esz == 4:
        return (f"    ld.shared.v4.f32 {{{', '.join(regs[:4])}}}, [{addr}];\n"
                f"    ld.shared.v4.f32 {{{', '.join(regs[4:])}}}, [{addr}+16];")
    L = [f"    ld.shared.v4.b32 {{%ut0, %ut1, %ut2, %ut3}}, [{addr}];"]
    for q in range(4):
        L.append(f"    shl.b32 %r3, %ut{q}, 16;\n    mov.b32 {regs[2 * q]}, %r3;")
        L.append(f"    and.b32 %r3, %ut{q}, 0xffff0000;\n    mov.b32 {regs[2 * q + 1]}, %r3;")
    return "\n".join(L)


# The thread's bulk-copy slot: %r4 = stream i = lane % 4, %r3 = copy m = warp + 8 (lane / 4) of
# the stream, %r11 = bytes of a phi / gamma_k run, %r2 = the role's phi rows.
COPY_SLOT = f"""    and.b32 %r4, %lane, 3;                  // stream i
    shr.u32 %r3, %lane, 2;
    shl.b32 %r3, %r3, 3;
    add.u32 %r3, %r3, %warp;                // copy m of the stream
    shl.b32 %r11, %cpc, 2;                  // bytes of a phi / gamma_k run
    {role_select('%r2', 'rows')}"""

# Copy m < rows of the slot: phi row m of the role, stream i (a run of cpc floats).
PHI_COPY = f"""    {role_select('%r10', 'first')}      // first logit row
    add.u32 %r5, %r3, %r10;
    mad.lo.u32 %r5, %r5, %K, %c0;
    mad.lo.u32 %r5, %r4, %C, %r5;           // element of phi (M K < 2^32)
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %phi, %rd1;
    mad.lo.u32 %r6, %r3, %rowb, %phsm;
    mad.lo.u32 %r6, %r4, %r11, %r6;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd1], %r11, [%lbar];"""



def phi_async(label):
    """pre_lc.ldgsts: the role's phi rows by 16-byte cp.async from every thread instead of bulk
    copies: thread j copies chunk u = j, j + THREADS, ... (stream u / (cpc / 4)) of every row
    slice, then arrives on the load mbarrier when they have landed (noinc: the mbarrier counts
    1 + THREADS arrivals)."""
    return f"""    {role_select('%r2', 'rows')}
    {role_select('%r10', 'first')}
    shr.u32 %r9, %cpc, 2;                   // chunks a stream
    mov.u32 %s, %tx;
{label}_U:
    setp.ge.u32 %p1, %s, %cpc;              // chunks a row slice: 4 streams x cpc / 4
    @%p1 bra {label}_DONE;
    div.u32 %r4, %s, %r9;                   // stream i
    mul.lo.u32 %r5, %r4, %r9;
    sub.u32 %r5, %s, %r5;
    mad.lo.u32 %r6, %r4, %C, %c0;
    mad.lo.u32 %r6, %r5, 4, %r6;            // element of the row: i C + c0 + 4 c4
    mad.lo.u32 %r7, %r10, %K, %r6;
    mul.wide.u32 %rd1, %r7, 4;
    add.u64 %rd1, %phi, %rd1;
    mul.wide.u32 %rd2, %K, 4;               // a phi row (bytes)
    mad.lo.u32 %r8, %s, 16, %phsm;
    mov.u32 %r3, 0;
{label}_ROW:
    cp.async.cg.shared.global [%r8], [%rd1], 16;
    add.u64 %rd1, %rd1, %rd2;
    add.u32 %r8, %r8, %rowb;
    add.u32 %r3, %r3, 1;
    setp.lt.u32 %p1, %r3, %r2;
    @%p1 bra {label}_ROW;
    add.u32 %s, %s, {THREADS};
    bra {label}_U;
{label}_DONE:
    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [sm_lbar];"""


def early_phi():
    """Where the caller promised that no kernel still running writes the weights
    (FLAG_EARLY_PARAMS, Overlap::Weights): phi's rows are copied before the grid dependency, while
    the previous kernel drains; activations and layer l's inputs still wait for it."""
    if "ldgsts" in EXPERIMENTS:
        copies = phi_async("EARLY_PHI")
    else:
        copies = f"""{COPY_SLOT}
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra EARLY_COPIED;
{PHI_COPY}
EARLY_COPIED:"""
    return f"""    @%p_early bra.uni EARLY_PARAMS;
{GRID_DEPENDENCY}
    bra.uni DEPENDENCY_DONE;
EARLY_PARAMS:
{copies}
    @%p_early griddepcontrol.wait;
    @%p_early griddepcontrol.launch_dependents;
DEPENDENCY_DONE:"""


def prefetch():
    """Before the grid dependency: the CTA's phi runs (and gamma_k's) prefetched to L2
    (cp.async.bulk.prefetch: no data comes into the CTA, so it may run while the previous kernel
    drains; weights only, activations wait for the dependency). Lane l of warp w takes run m =
    w + 8 (l / 4) of stream l % 4, as the copies do. An SM keeps only so many bytes of its own
    loads in flight (the copies alone took ~2 us for 64 KB from HBM, H200 phase stamps), while
    prefetches by every CTA fill L2 at the memory's rate."""
    return f"""    and.b32 %r4, %lane, 3;                  // stream i
    shr.u32 %r3, %lane, 2;
    shl.b32 %r3, %r3, 3;
    add.u32 %r3, %r3, %warp;                // run m of the stream
    shl.b32 %r11, %cpc, 2;                  // bytes of a run
    {role_select('%r2', 'rows')}
    setp.gt.u32 %p1, %r3, %r2;
    @%p1 bra PREFETCHED;
    setp.lt.u32 %p2, %r3, %r2;
    @%p2 bra PREFETCH_PHI;
    @!%p_gk bra PREFETCHED;
    mad.lo.u32 %r5, %r4, %C, %c0;           // m = rows: gamma_k's run
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %gk, %rd1;
    bra PREFETCH_ISSUE;
PREFETCH_PHI:
    {role_select('%r10', 'first')}
    add.u32 %r5, %r3, %r10;
    mad.lo.u32 %r5, %r5, %K, %c0;
    mad.lo.u32 %r5, %r4, %C, %r5;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %phi, %rd1;
PREFETCH_ISSUE:
    cp.async.bulk.prefetch.L2.global [%rd1], %r11;
PREFETCHED:"""


def opening(esz, post, wide=False):
    """Thread 0 initialises the load mbarrier and the gather mbarrier (and in the wide entry the
    h_pre mbarrier) and arms them (the gather one where this CTA receives rows: the wide pre role
    its owned tokens' rows, the h_pre one every token's h_pre); a CTA barrier, so no copy completes
    on an unarmed barrier; everyone arrives on the cluster barrier that tells the peers the
    mbarriers exist; then the grid dependency."""
    return f"""{prefetch()}
    setp.ne.u32 %p1, %tx, 0;
    @%p1 bra INIT_DONE;
    mbarrier.init.shared::cta.b64 [sm_lbar], {1 + THREADS if "ldgsts" in EXPERIMENTS else 1};
    mbarrier.init.shared::cta.b64 [sm_gbar], 1;""" + ("""
    mbarrier.init.shared::cta.b64 [sm_hbar], 1;""" if wide else "") + f"""
    fence.mbarrier_init.release.cluster;
    // the copies' bytes: the role's phi rows and the group's x rows of 4 streams x cpc channels (+ gamma_k's)
    {role_select('%r2', 'rows')}
    mul.lo.u32 %r1, %cnt, %cpc;
    mul.lo.u32 %r1, %r1, {esz};
    shl.b32 %r3, %cpc, 2;{"" if "ldgsts" in EXPERIMENTS else chr(10) + "    mad.lo.u32 %r1, %r2, %r3, %r1;"}
    @%p_gk add.u32 %r1, %r1, %r3;
    shl.b32 %r1, %r1, 2;{F_BYTES.format(esz=esz) if post else ""}
    mbarrier.arrive.expect_tx.shared::cta.b64 %st, [sm_lbar], %r1;
    // the gather: role pre 16 ranks x the group's tokens x 48 bytes; role res CTA t < its group 16 x {4 * ROW}
    @!%p_res bra ARM_PRE;""" + (f"""
    // every CTA owns {wide.res_slots} tokens of the group (rows of tokens past T arrive as zeros)""" if wide and wide.res_slots > 1 else """
    setp.ge.u32 %p2, %rank, %grp;
    @%p2 bra INIT_DONE;""") + f"""
    mbarrier.arrive.expect_tx.shared::cta.b64 %st, [sm_gbar], {(wide.res_slots if wide else 1) * CLUSTER * 4 * ROLES['res']['words']};
    bra INIT_DONE;
ARM_PRE:""" + (f"""
    // the rows of the tokens this CTA owns (rank + 16 j < cnt), h_pre of every token
    shl.b32 %r2, %cnt, 4;
    mbarrier.arrive.expect_tx.shared::cta.b64 %st, [sm_hbar], %r2;
{owned_tokens("%r1", "%r3", "%p2", wide.pre_slots if wide else 0)}
    mul.lo.u32 %r1, %r1, {CLUSTER * 4 * PRE_WORDS};""" if wide else f"""
    mul.lo.u32 %r1, %cnt, {CLUSTER * 4 * PRE_WORDS};""") + f"""
    mbarrier.arrive.expect_tx.shared::cta.b64 %st, [sm_gbar], %r1;
INIT_DONE:
    barrier.sync 0;                         // the load mbarrier is armed
    barrier.cluster.arrive.release;         // waited for before the first push
{early_phi()}{stamp(1)}"""


def shared_fill(label, base):
    """%r4 stored to [base + %r1 .. base + %r3) in 16-byte words, the CTA's threads taking every
    {16 * THREADS}th byte from their own %r1 on; leaves at {label}_DONE."""
    return f"""{label}:
    setp.ge.u32 %p1, %r1, %r3;
    @%p1 bra {label}_DONE;
    add.u32 %r2, {base}, %r1;
    st.shared.v4.b32 [%r2], {{%r4, %r4, %r4, %r4}};
    add.u32 %r1, %r1, {16 * THREADS};
    bra {label};
{label}_DONE:"""


def x_probe(esz):
    """pre_lc.xprobe (with stamps): thread 255 (no copy slot) times one plain load of the CTA's
    first x word after the grid dependency: slot 14 when issued, 13 when it has arrived (the
    branch on the loaded word keeps the timer read after the load), 15 the word."""
    return f"""    setp.ne.u32 %p7, %tx, {THREADS - 1};
    @%p7 bra XPROBE_DONE;
    mul.wide.u32 %rd1, %tok0, %xs;
    cvt.u64.u32 %rd2, %c0;
    add.u64 %rd1, %rd1, %rd2;
    mul.lo.u64 %rd1, %rd1, {esz};
    add.u64 %rd1, %x, %rd1;
    mov.u64 %stmp, %globaltimer;
    st.global.u64 [%sadr+{8 * 14}], %stmp;
    ld.global.cg.u32 %r1, [%rd1];
    setp.eq.u32 %p7, %r1, 0x7fc00001;
    @%p7 bra XPROBE_SKIP;
    mov.u64 %stmp, %globaltimer;
    st.global.u64 [%sadr+{8 * 13}], %stmp;
XPROBE_SKIP:
    st.global.u32 [%sadr+{8 * 15}], %r1;
XPROBE_DONE:"""


def loads(esz, post, top, wide=None):
    """The bulk copies, spread over the warps (a warp's lanes issue theirs one after another), all
    completing on the one load mbarrier: lane l of warp w issues copy m = w + 8 (l / 4) of stream
    i = l % 4: m < rows a phi row, then the group's x rows, then gamma_k's run (and for post_pre
    the f row of token i). The warps fill gk_s with 1.0 where gamma_k is absent and zero x_s past
    the group's tokens. Then the coefficient threads' base / scale registers (post_pre: layer l's
    coefficients too), and the wait for the copies."""
    L = []
    e = L.append
    phi = "    bra FILLS;" if "ldgsts" in EXPERIMENTS else f"""    @%p_early bra FILLS;
{PHI_COPY}
    bra FILLS;"""
    if "xprobe" in EXPERIMENTS:
        e(x_probe(esz))
    e((f"""    @%p_early bra PHI_ISSUED;
{phi_async("PHI")}
PHI_ISSUED:
""" if "ldgsts" in EXPERIMENTS else "") + f"""    // ---- loads (phi's rows already issued where flags say the weights may load early)
{COPY_SLOT}
    setp.ge.u32 %p1, %r3, %r2;
    @%p1 bra COPY_X;
{phi}
COPY_X:
    sub.u32 %r3, %r3, %r2;                  // token t of the group
    setp.ge.u32 %p1, %r3, %cnt;
    @%p1 bra COPY_GK;
    add.u32 %r5, %tok0, %r3;
    mul.wide.u32 %rd1, %r5, %xs;            // token row (64-bit: T x stride may pass 2^32)
    mad.lo.u32 %r5, %r4, %C, %c0;
    cvt.u64.u32 %rd2, %r5;
    add.u64 %rd1, %rd1, %rd2;
    mul.lo.u64 %rd1, %rd1, {esz};
    add.u64 %rd1, %x, %rd1;
    mul.lo.u32 %r6, %r3, %xrow;
    mul.lo.u32 %r7, %r4, %cpc;
    mad.lo.u32 %r6, %r7, {esz}, %r6;
    add.u32 %r6, %r6, %xsm;
    mul.lo.u32 %r8, %cpc, {esz};
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd1], %r8, [%lbar];
    bra FILLS;
COPY_GK:
    setp.ne.u32 %p1, %r3, %grp;
    @%p1 bra {"COPY_F" if post else "FILLS"};
    @!%p_gk bra FILLS;
    mad.lo.u32 %r5, %r4, %C, %c0;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %gk, %rd1;
    mad.lo.u32 %r6, %r4, %r11, %gksm;
    cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r6], [%rd1], %r11, [%lbar];{F_COPY.format(esz=esz, k_max=top // N - 1) if post else ""}
FILLS:
    // gk_s = 1.0 without gamma_k (x times 1.0 is exact); x_s zeros past the group's tokens
    @%p_gk bra GK_DONE;
    mov.b32 %r4, 0x3F800000;                // 1.0f
    shl.b32 %r1, %tx, 4;
    mov.u32 %r3, %rowb;
{shared_fill("GK_FILL", "%gksm")}
GK_DONE:
    mul.lo.u32 %r1, %cnt, %xrow;
    mul.lo.u32 %r3, %xrow, %grp;
    shl.b32 %r2, %tx, 4;
    add.u32 %r1, %r1, %r2;
    mov.b32 %r4, 0;
{shared_fill("X_ZERO", "%xsm")}""")
    slots = wide.res_slots if wide else 1
    e(f"""    // the coefficient threads' parameters, in flight during the projection: role res thread 0
    // {"(lane 0 of warps 0.." + str(slots - 1) + ": a Sinkhorn each) " if slots > 1 else ""}base[8..24) and scale[2]; role pre thread s < 32 (token s / 8, logit s % 8) base[s % 8] and
    // scale[0] (h_pre) / scale[1] (h_post)
    @!%p_res bra PARAMS_PRE;""" + (f"""
    setp.ne.u32 %p1, %lane, 0;
    setp.ge.or.u32 %p1, %tx, {32 * slots}, %p1;""" if slots > 1 else """
    setp.ne.u32 %p1, %tx, 0;""") + """
    @%p1 bra PARAMS_DONE;
    ld.global.nc.f32 %sc, [%scale+8];""")
    for q in range(0, N * N, 4):
        e(f"    ld.global.nc.v4.f32 {{%bz{q}, %bz{q + 1}, %bz{q + 2}, %bz{q + 3}}}, [%base+{4 * (2 * N + q)}];")
    e(f"""    bra PARAMS_DONE;
PARAMS_PRE:
    setp.ge.u32 %p1, %tx, {top * 2 * N};
    @%p1 bra PARAMS_DONE;
    and.b32 %r1, %tx, {2 * N - 1};
    mul.wide.u32 %rd1, %r1, 4;
    add.u64 %rd1, %base, %rd1;
    ld.global.nc.f32 %bz0, [%rd1];
    shr.u32 %r1, %r1, {N.bit_length() - 1};                    // 0: h_pre, 1: h_post
    mul.wide.u32 %rd1, %r1, 4;
    add.u64 %rd1, %scale, %rd1;
    ld.global.nc.f32 %sc, [%rd1];
PARAMS_DONE:{coef_loads(top) if post else ""}
    barrier.sync 0;                         // gk_s and x_s's zeros written
LOAD_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [sm_lbar], 0;
    @!%p1 bra LOAD_WAIT;""" + stamp(2))
    return "\n".join(L)


def projection(role, esz, tg):
    """acc[t][r] (t < tg, r < rows) and ss[t] over this thread's quads (tg: the group's token
    count rounded up to 1, 2 or 4; the x rows past cnt are zeros)."""
    rows = ROLES[role]["rows"]
    R = f"{role.upper()}{tg}"
    L = []
    e = L.append
    for v in range(tg * rows):
        e(f"    mov.f32 %acc{v}, 0f00000000;")
    for t in range(tg):
        e(f"    mov.f32 %ss{t}, 0f00000000;")
    e(f"""    mov.u32 %q, %tx;
PJ_{R}:
    setp.ge.u32 %p1, %q, %cpc;
    @%p1 bra PJ_{R}_DONE;

    mad.lo.u32 %r1, %q, {4 * esz}, %xsm;            // &x_s[0][4 q]""")
    for t in range(tg):
        xq = [f"%xq{4 * t + u}" for u in range(4)]
        e(f"    mad.lo.u32 %r2, %xrow, {t}, %r1;" if t else "    mov.u32 %r2, %r1;")
        if esz == 2:
            e(f"""    ld.shared.v2.b32 {{%xw0, %xw1}}, [%r2];
    shl.b32 %r3, %xw0, 16;
    mov.b32 {xq[0]}, %r3;
    and.b32 %r3, %xw0, 0xffff0000;
    mov.b32 {xq[1]}, %r3;
    shl.b32 %r3, %xw1, 16;
    mov.b32 {xq[2]}, %r3;
    and.b32 %r3, %xw1, 0xffff0000;
    mov.b32 {xq[3]}, %r3;""")
        else:
            e(f"    ld.shared.v4.f32 {{{', '.join(xq)}}}, [%r2];")
        for u in range(4):
            e(f"    fma.rn.f32 %ss{t}, {xq[u]}, {xq[u]}, %ss{t};")
    e(f"""    shl.b32 %r4, %q, 4;
    add.u32 %r5, %gksm, %r4;
    ld.shared.v4.f32 {{%gq0, %gq1, %gq2, %gq3}}, [%r5];""")
    for t in range(tg):
        for u in range(4):
            e(f"    mul.f32 %xq{4 * t + u}, %xq{4 * t + u}, %gq{u};")
    e("    add.u32 %r5, %phsm, %r4;                // &phi_s[0][4 q]")
    for r in range(rows):
        e(f"    ld.shared.v4.f32 {{%ph0, %ph1, %ph2, %ph3}}, [%r5];")
        if r + 1 < rows:
            e("    add.u32 %r5, %r5, %rowb;")
        for t in range(tg):
            for u in range(4):
                e(f"    fma.rn.f32 %acc{t * rows + r}, %xq{4 * t + u}, %ph{u}, %acc{t * rows + r};")
    e(f"""    add.u32 %q, %q, {THREADS};
    bra PJ_{R};
PJ_{R}_DONE:""")
    return "\n".join(L)


def halve(vals, offsets):
    """Recursive halving of vals over the lanes of offsets: returns (text, the kept registers)."""
    L = []
    e = L.append
    for o in offsets:
        half = len(vals) // 2
        e(f"""    and.b32 %r1, %lane, {o};
    setp.ne.u32 %pb, %r1, 0;""")
        for i in range(half):
            e(f"""    selp.f32 %hs, {vals[i]}, {vals[i + half]}, %pb;
    selp.f32 %hk, {vals[i + half]}, {vals[i]}, %pb;
    shfl.sync.bfly.b32 %hr, %hs, {o}, 0x1f, 0xffffffff;
    add.f32 {vals[i]}, %hk, %hr;""")
        vals = vals[:half]
    return "\n".join(L), vals


def warp_reduce(vals, red_off):
    """The warp's sums of vals (a power of two of them) into red_off bytes past %r2 (this warp's
    red row): halving while there are two values a lane and offsets left, then a butterfly over
    the remaining offsets; lane l keeps values ((l & halving offsets) V / 32) .., and the lanes
    whose butterfly bits are zero store them."""
    V = len(vals)
    levels = min(5, V.bit_length() - 1)
    hs, bs = (16, 8, 4, 2, 1)[:levels], (16, 8, 4, 2, 1)[levels:]
    text, kept = halve(vals, hs)
    L = [text]
    for o in bs:
        L.append(f"""    shfl.sync.bfly.b32 %hr, {kept[0]}, {o}, 0x1f, 0xffffffff;
    add.f32 {kept[0]}, {kept[0]}, %hr;""")
    hmask, bmask = sum(hs), sum(bs)
    shift = 5 - (V.bit_length() - 1)  # idx = (lane & hmask) V / 32
    idx = (f"shl.b32 %r1, %r1, {-shift};" if shift < 0 else f"shr.u32 %r1, %r1, {shift};" if shift else "")
    L.append(f"""    and.b32 %r1, %lane, {hmask};
    {idx}
    mad.lo.u32 %r3, %r1, 4, %r2;""")
    pred = ""
    if bmask:
        L.append(f"""    and.b32 %r1, %lane, {bmask};
    setp.eq.u32 %p1, %r1, 0;""")
        pred = "@%p1 "
    if len(kept) == 2:
        L.append(f"    {pred}st.shared.v2.f32 [%r3+{red_off}], {{{kept[0]}, {kept[1]}}};")
    else:
        L.append(f"    {pred}st.shared.f32 [%r3+{red_off}], {kept[0]};")
    return "\n".join(L)


def cta_row_word(item, rw, rows, V, stride, store, tg=None):
    """Word item (a register) of the CTA's rows, sm_row[t = item / rw][k = item % rw]: ss of t
    (k = 0), logit k - 1 of t (k <= rows), else zero (and zero for t >= tg where given), the 8
    warps' red values added in warp order (a warp's block: stride words, logit partials at
    t rows + r, ss at V + t)."""
    L = [f"""    mov.f32 %f1, 0f00000000;
    div.u32 %r1, {item}, {rw};                 // t
    mul.lo.u32 %r3, %r1, {rw};
    sub.u32 %r3, {item}, %r3;                  // k
    setp.gt.u32 %p2, %r3, {rows};""" + (f"""
    setp.ge.or.u32 %p2, %r1, {tg}, %p2;""" if tg is not None else "") + f"""
    @%p2 bra {store};
    add.u32 %r4, %r1, {V};                  // k = 0: ss of t
    setp.eq.u32 %p3, %r3, 0;
    mad.lo.u32 %r5, %r1, {rows}, %r3;
    sub.u32 %r5, %r5, 1;                    // k >= 1: logit k - 1 of t
    selp.u32 %r4, %r4, %r5, %p3;
    mov.u32 %r2, sm_red;
    mad.lo.u32 %r2, %r4, 4, %r2;"""]
    L += [f"    ld.shared.f32 %f{2 + w}, [%r2+{4 * stride * w}];" for w in range(WARPS)]
    L.append("    mov.f32 %f1, %f2;")
    L += [f"    add.f32 %f1, %f1, %f{2 + w};" for w in range(1, WARPS)]
    L.append(f"""{store}:
    mov.u32 %r2, sm_row;
    mad.lo.u32 %r2, {item}, 4, %r2;
    st.shared.f32 [%r2], %f1;""")
    return "\n".join(L)


def warp_sums(role, tg):
    """The warp's sums to red[warp][v] (v < V: acc[t][r] at t rows + r; V + t: ss[t]), then the
    CTA's rows (ss, logits, zeros; zeros for t >= tg) in sm_row[t][words] (the role's pushed
    row: ROW words for res, PRE_WORDS for pre) added in warp order."""
    rows = ROLES[role]["rows"]
    V = tg * rows
    stride = V + tg
    R = f"{role.upper()}{tg}"
    L = []
    e = L.append
    e(stamp(3))
    e(f"""    // warp sums: {V} logit partials and {tg} sums of squares
    mov.u32 %r2, sm_red;
    mad.lo.u32 %r2, %warp, {4 * stride}, %r2;""")
    e(warp_reduce([f"%acc{v}" for v in range(V)], 0))
    e(warp_reduce([f"%ss{t}" for t in range(tg)], 4 * V))
    rw = ROLES[role]["words"]
    e(f"""    barrier.sync 0;
    // the CTA's rows: thread s < {ROLES[role]['group'] * rw} -> sm_row[t = s / {rw}][k = s % {rw}]
    setp.ge.u32 %p1, %tx, {ROLES[role]['group'] * rw};
    @%p1 bra ROWS_{R}_DONE;
{cta_row_word("%tx", rw, rows, V, stride, f"ROWS_{R}_STORE", tg)}
ROWS_{R}_DONE:
    barrier.sync 0;""")
    return "\n".join(L)


MMA = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"


def trips(e, R, mt, nt, S, gk):
    """projection_mma's K loop: two k-steps a trip, with (gk) or without gamma_k's multiplies."""
    top = f"MM_{R}_{'GK' if gk else 'PLAIN'}_TRIP"
    e(f"""{"" if gk else f"MM_{R}_PLAIN:" + chr(10)}    mov.u32 %q, %warp;
{top}:
    setp.ge.u32 %p1, %q, %r9;
    @%p1 bra MM_{R}_DONE;
    add.u32 %r12, %q, {WARPS};
    setp.lt.u32 %p4, %r12, %r9;             // step B within the slice
    selp.u32 %r12, %r12, %q, %p4;           // else B reads A's elements (its x zeroed)""")
    for step, qreg in (("A", "%q"), ("B", "%r12")):
        base = 0 if step == "A" else 4 * mt
        e(f"""    shl.b32 %r1, {qreg}, 5;                     // 16 elements of x: 32 bytes a step
    add.u32 %r1, %r6, %r1;""")
        for m in range(mt):
            xw = ", ".join(f"%xa{base + 4 * m + u}" for u in range(4))
            e(f"    ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{{xw}}}, [%r1];")
            if m + 1 < mt:
                e("    add.u32 %r1, %r1, %r11;")
        g = 0 if step == "A" else 4
        e(f"    shl.b32 %r1, {qreg}, 6;                     // 16 floats: 64 bytes a step")
        if gk:
            e(f"""    add.u32 %r4, %r8, %r1;
    ld.shared.v2.f32 {{%ga{g}, %ga{g + 1}}}, [%r4];
    ld.shared.v2.f32 {{%ga{g + 2}, %ga{g + 3}}}, [%r4+32];""")
        e("    add.u32 %r5, %r7, %r1;")
        for j in range(nt):
            pa = (0 if step == "A" else 4 * nt) + 4 * j
            e(f"""    ld.shared.v2.f32 {{%pa{pa}, %pa{pa + 1}}}, [%r5];
    ld.shared.v2.f32 {{%pa{pa + 2}, %pa{pa + 3}}}, [%r5+32];""")
            if j + 1 < nt:
                e("    add.u32 %r5, %r5, %r10;")
    for v in range(4 * mt):
        e(f"    @!%p4 mov.b32 %xa{4 * mt + v}, 0;")
    for si, step in enumerate("AB"):
        xbase, gbase = 4 * mt * si, 4 * si
        for j in range(nt):
            pa = 4 * nt * si + 4 * j
            for u in range(4 if gk else 0):
                e(f"    mul.f32 %pa{pa + u}, %pa{pa + u}, %ga{gbase + u};")
            for u in range(4):
                e(f"    mov.b32 %bu{u}, %pa{pa + u};")
            e("""    prmt.b32 %bh0, %bu0, %bu1, 0x7632;     // hi: the upper halves (the lower k in the lower half)
    prmt.b32 %bh1, %bu2, %bu3, 0x7632;""")
            for u in range(4):
                e(f"    and.b32 %bu{u}, %bu{u}, 0xffff0000;")
            for u in range(4):
                e(f"""    mov.b32 %bf{u}, %bu{u};
    sub.f32 %pa{pa + u}, %pa{pa + u}, %bf{u};""")
            e(f"""    cvt.rn.bf16x2.f32 %bl0, %pa{pa + 1}, %pa{pa};    // lo: what hi leaves
    cvt.rn.bf16x2.f32 %bl1, %pa{pa + 3}, %pa{pa + 2};""")
            for m in range(mt):
                xw = ", ".join(f"%xa{xbase + 4 * m + u}" for u in range(4))
                for h, b in (("h", "%bh0, %bh1"), ("l", "%bl0, %bl1")):
                    k = 2 * si + (h == "l")
                    acc = ", ".join(f"%acc{k * S + 4 * (m * nt + j) + c}" for c in range(4))
                    e(f"    {MMA} {{{acc}}}, {{{xw}}}, {{{b}}}, {{{acc}}};")
        e(f"    // ss of step {step}: the Gram matrix's diagonal (a tile's tokens 0..7 against its rows 0..7, 8..15 against 8..15)")
        for m in range(mt):
            xw = ", ".join(f"%xa{xbase + 4 * m + u}" for u in range(4))
            for h in range(2):
                sg = ", ".join(f"%sg{8 * mt * si + 8 * m + 4 * h + c}" for c in range(4))
                e(f"    {MMA} {{{sg}}}, {{{xw}}}, {{%xa{xbase + 4 * m + h}, %xa{xbase + 4 * m + h + 2}}}, {{{sg}}};")
    e(f"""    add.u32 %q, %q, {2 * WARPS};
    bra {top};""")


def projection_mma(role, group):
    """The wide groups' projection (bf16, group = 16 mt tokens, x rows past cnt zeros) on the
    tensor cores, then the CTA's rows in sm_row[t][words] as warp_sums leaves them. The slice's
    K = 4 cpc elements go in k-steps of 16, warp w taking steps w, w + 8, ...: A = 16 tokens' x
    per m16 tile (ldmatrix.x4 from x_s: lane l addresses token row 16 m + l % 16 at k + 8 (l / 16)),
    B = the role's phi rows times gamma_k (f32 from phi_s / gk_s, thread (g = lane / 4,
    q = lane % 4) holding rows 8 j + g at k + 2q, 2q + 1, 2q + 8, 2q + 9), each value split once
    into bf16 hi + lo (x is exact in bf16) for every tile of tokens: hi = the value's upper 16 bits (prmt: the conversion unit, a quarter of
    the FMA rate, then splits only lo), lo = the rest rounded to bf16, so phi is kept to 2^-16. A
    trip takes two steps with all their loads issued first, and the hi and lo products of each
    step accumulate in their own f32 sets, added in a fixed order at the end. The loop is bound by
    its instruction count (Nsight Compute: the warps issuing or waiting on fixed-latency results;
    one chain or four, one step a trip or two, the stamps read the same, but the bench ran `pre`
    0.05-0.12 us faster with two steps in four sets: docs/kernels/pre.md), most of it the split.
    ss is the diagonal of the Gram matrix x x^T: two more mma a step and tile whose B is A's own
    registers (tokens 0..7 of the tile: A's first and third, 8..15: its second and fourth). Each
    warp stores its partials to red[w][t rows + r] (ss at V + t), then the CTA's threads add the
    8 warps' values in warp order (items s, s + THREADS, ...: the rows outnumber the threads)."""
    rows = ROLES[role]["rows"]
    rw = ROLES[role]["words"]
    nt, mt = rows // 8, group // 16
    V = group * rows
    stride = V + group
    R = f"{role.upper()}W{group}"
    L = []
    e = L.append
    S = 4 * nt * mt                         # accumulators of one set: (tile, 8 logits) x 4
    for v in range(4 * S):                  # four sets: step A hi, A lo, step B hi, B lo
        e(f"    mov.f32 %acc{v}, 0f00000000;")
    for v in range(16 * mt):                # Gram sets: step A, step B
        e(f"    mov.f32 %sg{v}, 0f00000000;")
    e(f"""    // ---- projection on the tensor cores: k-steps of 16, warp w taking steps w, w + {WARPS}, ...,
    // two a trip (A = q, B = q + {WARPS}; B's x zeroed where it is past the slice), every load of
    // both issued before the first multiply, each product in its own accumulator set
    and.b32 %r1, %lane, 15;
    mad.lo.u32 %r6, %r1, %xrow, %xsm;
    shr.u32 %r1, %lane, 4;
    mad.lo.u32 %r6, %r1, 16, %r6;           // ldmatrix row: &x_s[l % 16][8 (l / 16)]
    shl.b32 %r11, %xrow, 4;                 // 16 token rows
    shr.u32 %r2, %lane, 2;                  // g
    and.b32 %r3, %lane, 3;                  // q
    mad.lo.u32 %r7, %r2, %rowb, %phsm;
    mad.lo.u32 %r7, %r3, 8, %r7;            // &phi_s[g][2q]
    shl.b32 %r8, %r3, 3;
    add.u32 %r8, %r8, %gksm;                // &gk_s[2q]
    shl.b32 %r10, %rowb, 3;                 // 8 phi rows
    shr.u32 %r9, %cpc, 2;                   // k-steps: 4 cpc / 16
    @!%p_gk bra MM_{R}_PLAIN;               // no gamma_k: phi as it is (times 1.0: the same bits)""")
    for gk in (True, False):
        trips(e, R, mt, nt, S, gk)
    e(f"MM_{R}_DONE:{stamp(3)}")
    e("    // the four sets added in a fixed order: (A hi + A lo) + (B hi + B lo); ss A + B")
    for v in range(S):
        e(f"""    add.f32 %acc{v}, %acc{v}, %acc{S + v};
    add.f32 %f1, %acc{2 * S + v}, %acc{3 * S + v};
    add.f32 %acc{v}, %acc{v}, %f1;""")
    for v in range(8 * mt):
        e(f"    add.f32 %sg{v}, %sg{v}, %sg{8 * mt + v};")
    e(f"""
    // the warp's partials: c0, c1 token 16 m + g, logits 8 j + 2q, + 1; c2, c3 token 16 m + g + 8
    mov.u32 %r4, sm_red;
    mad.lo.u32 %r4, %warp, {4 * stride}, %r4;
    shr.u32 %r2, %lane, 2;                  // g
    and.b32 %r3, %lane, 3;                  // q
    mul.lo.u32 %r1, %r2, {rows};
    shl.b32 %r5, %r3, 1;
    add.u32 %r1, %r1, %r5;                  // g rows + 2q
    mad.lo.u32 %r1, %r1, 4, %r4;""")
    for m in range(mt):
        for j in range(nt):
            a = 4 * (m * nt + j)
            off = 4 * (16 * m * rows + 8 * j)
            e(f"""    st.shared.v2.f32 [%r1+{off}], {{%acc{a}, %acc{a + 1}}};
    st.shared.v2.f32 [%r1+{off + 32 * rows}], {{%acc{a + 2}, %acc{a + 3}}};""")
    e(f"""    shr.u32 %r5, %r2, 1;
    setp.ne.u32 %p1, %r3, %r5;              // the diagonal: q = g / 2
    @%p1 bra MM_{R}_SS;
    and.b32 %r5, %r2, 1;
    setp.ne.u32 %p2, %r5, 0;
    mad.lo.u32 %r1, %r2, 4, %r4;""")
    for m in range(mt):
        e(f"""    selp.f32 %f1, %sg{8 * m + 1}, %sg{8 * m}, %p2;          // token 16 m + g: column 2q (+ 1)
    selp.f32 %f2, %sg{8 * m + 7}, %sg{8 * m + 6}, %p2;          // token 16 m + g + 8
    st.shared.f32 [%r1+{4 * (V + 16 * m)}], %f1;
    st.shared.f32 [%r1+{4 * (V + 16 * m + 8)}], %f2;""")
    e(f"""MM_{R}_SS:
    barrier.sync 0;
    // the CTA's rows: items s < {group * rw} (thread s, s + {THREADS}, ...) -> sm_row[t = s / {rw}][k = s % {rw}]""")
    for p in range(-(-group * rw // THREADS)):
        e(f"""    add.u32 %s, %tx, {p * THREADS};
    setp.ge.u32 %p1, %s, {group * rw};
    @%p1 bra MM_{R}_ROWS{p};
{cta_row_word("%s", rw, rows, V, stride, f"MM_{R}_STORE{p}")}
MM_{R}_ROWS{p}:""")
    e(f"""    barrier.sync 0;
    bra {role.upper()}_ROWS;""")
    return "\n".join(L)


def role_rows(role, esz, most, wide=None):
    """The projection and the CTA's rows, then the cluster barrier's wait (every CTA's gather
    mbarrier is armed): one FMA body per token count (1, 2, up to 4, up to 8; the role's group and
    `most`, the entry's largest group, bound it), or in a wide entry the tensor-core bodies of its
    groups (Wide)."""
    R = role.upper()
    L = []
    if wide:
        groups = (wide.res,) if role == "res" else wide.pre_groups
        for g in groups[1:]:
            L.append(f"""    setp.eq.u32 %p1, %grp, {g};
    @%p1 bra {R}_MMA{g};""")
        for i, g in enumerate(groups):
            if i:
                L.append(f"{R}_MMA{g}:")
            L.append(projection_mma(role, g))
    else:
        counts = [tg for tg in (1, 2, 4, 8) if tg <= min(ROLES[role]["group"], most)]
        for tg in counts[:-1]:
            L.append(f"""    setp.le.u32 %p1, %cnt, {tg};
    @%p1 bra {R}_TG{tg};""")
        for tg in counts[::-1]:
            if tg != counts[-1]:
                L.append(f"{R}_TG{tg}:")
            L.append(projection(role, esz, tg))
            L.append(warp_sums(role, tg))
            L.append(f"    bra {R}_ROWS;")
    L.append(f"""{R}_ROWS:{stamp(4)}
    barrier.cluster.wait.acquire;           // every CTA's gather mbarrier is armed{stamp(5)}""")
    return "\n".join(L)


def push_float4(token, slot, words, between=""):
    """Thread's float4 %r2 of token's row (sm_row, rows of `words` words) st.async'd to CTA %r1's
    gat at row slot (rows of `words` words), completing bytes on that CTA's gather mbarrier;
    between: lines after the row's load."""
    return f"""    mov.u32 %r3, sm_row;
    mad.lo.u32 %r4, {token}, {4 * words}, %r3;
    mad.lo.u32 %r4, %r2, 16, %r4;
    ld.shared.v4.f32 {{%f1, %f2, %f3, %f4}}, [%r4];{between}
    mov.u32 %r5, sm_gat;
    mad.lo.u32 %r5, {slot}, {4 * words}, %r5;
    mad.lo.u32 %r5, %r2, 16, %r5;
    mapa.shared::cluster.u32 %r5, %r5, %r1;
    mapa.shared::cluster.u32 %r6, %gbar, %r1;
    st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%r5], {{%f1, %f2, %f3, %f4}}, [%r6];"""


def push_to_owner(R, tokens, words, layout, slot):
    """Thread s < `tokens` (a register's name without %) x words / 4: token t = s / (words / 4),
    float4 k of its row -> its owner, CTA t % 16, at the gat row that `slot` (a PTX line) computes
    into %r8 from %r8 = t / 16 and %rank; `layout` names gat's shape in the comment."""
    k4 = words // 4
    return f"""    // thread s < {tokens} {k4}: token t = s / {k4}, float4 k -> CTA t % {CLUSTER}, gat{layout}
    mul.lo.u32 %r9, %{tokens}, {k4};
    setp.ge.u32 %p1, %tx, %r9;
    @%p1 bra PUSH_{R}_DONE;
    div.u32 %r7, %tx, {k4};                 // t
    mul.lo.u32 %r2, %r7, {k4};
    sub.u32 %r2, %tx, %r2;                  // k
    and.b32 %r1, %r7, {CLUSTER - 1};        // its owner
{push_float4("%r7", "%r8", words, chr(10) + f"    shr.u32 %r8, %r7, {CLUSTER.bit_length() - 1};" + chr(10) + "    " + slot)}
PUSH_{R}_DONE:"""


def push(role, wide=None):
    """st.async of the rows: res token t's 5 float4 to CTA t (with two or more tokens a CTA, to
    CTA t % 16, gat[t / 16][rank][ROW] there); pre every token's 3 float4 to every CTA
    (gat[t][rank][12]), item s = (CTA d, token t, float4 k) of 16 cnt 3 taken by thread
    s % THREADS; with the wide groups pre token t's 3 float4 to its owner, CTA t % 16 only
    (gat[rank][t / 16][12] there), which computes its h_pre and sends it to every CTA (pre_tail):
    the all-gather of 32 tokens' rows (16 x 32 x 3 stores a CTA) took ~2 us."""
    words = ROLES[role]["words"]
    k4 = words // 4
    R = role.upper()
    if role == "res" and wide and wide.res_slots > 1:
        # every token of the group, its zeros past T too: each CTA expects a fixed byte count
        return push_to_owner(R, "grp", words, f"[t / {CLUSTER}][rank][{words}]", f"mad.lo.u32 %r8, %r8, {CLUSTER}, %rank;")
    if role == "res":
        return f"""    // push: thread s < {k4} grp: token t = s / {k4}, float4 k = s % {k4} -> CTA t, gat[rank][{ROW}]
    mul.lo.u32 %r1, %grp, {k4};
    setp.ge.u32 %p1, %tx, %r1;
    @%p1 bra PUSH_{R}_DONE;
    div.u32 %r1, %tx, {k4};                 // t (the receiving rank)
    mul.lo.u32 %r2, %r1, {k4};
    sub.u32 %r2, %tx, %r2;                  // k
{push_float4("%r1", "%rank", ROW)}
PUSH_{R}_DONE:"""
    if wide:
        return push_to_owner(R, "cnt", words, f"[rank][t / {CLUSTER}][{words}]", f"mad.lo.u32 %r8, %rank, {wide.pre_slots}, %r8;")
    return f"""    // push: item s < {CLUSTER} cnt {k4}: CTA d = s / (cnt {k4}), token t, float4 k -> CTA d, gat[t][rank][{words}]
    mul.lo.u32 %r9, %cnt, {k4};             // items a CTA receives
    mul.lo.u32 %r10, %r9, {CLUSTER};
    mov.u32 %s, %tx;
PUSH_{R}_ITEM:
    setp.ge.u32 %p1, %s, %r10;
    @%p1 bra PUSH_{R}_DONE;
    div.u32 %r1, %s, %r9;                   // d
    mul.lo.u32 %r2, %r1, %r9;
    sub.u32 %r2, %s, %r2;
    div.u32 %r7, %r2, {k4};                 // t
    mul.lo.u32 %r8, %r7, {k4};
    sub.u32 %r2, %r2, %r8;                  // k
{push_float4("%r7", "%r8", words, chr(10) + f"    mad.lo.u32 %r8, %r7, {CLUSTER}, %rank;")}
    add.u32 %s, %s, {THREADS};
    bra PUSH_{R}_ITEM;
PUSH_{R}_DONE:"""


def rank_sum(addr, step):
    """%f1 = the word at [addr + step r] added over the ranks r = 0..15 in order (loads in two
    batches of 8)."""
    L = []
    for half in (0, 8):
        L += [f"    ld.shared.f32 %gv{r}, [{addr}+{step * (half + r)}];" for r in range(8)]
        L += (["    mov.f32 %f1, %gv0;"] if half == 0 else ["    add.f32 %f1, %f1, %gv0;"])
        L += [f"    add.f32 %f1, %f1, %gv{r};" for r in range(1, 8)]
    return "\n".join(L)


GATHER_WAIT = """GW_{R}:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [sm_gbar], 0;
    @!%p1 bra GW_{R};{S}"""


def res_tail(slots=1):
    """CTA t < the group's size waits for its 16 rows; t < cnt adds them and runs the Sinkhorn.
    With two or more slots (tokens a CTA: r + 16 j) warp j takes token r + 16 j's rows
    (gat[j][rank][ROW]) and runs its Sinkhorn on its lane 0."""
    L = []
    e = L.append

    def mark(k, clock):
        text = stamp(k, clock)
        if text:  # timing builds only
            e(text.lstrip("\n"))
    if slots > 1:
        e(f"""    setp.ge.u32 %p1, %tx, {32 * slots};
    @%p1 bra EXIT;                          // warp j < {slots}: token rank + 16 j
{GATHER_WAIT.format(R="RES", S=stamp(6))}
    mad.lo.u32 %r9, %warp, {CLUSTER}, %rank;            // the token in the group
    setp.ge.u32 %p1, %r9, %cnt;
    @%p1 bra EXIT;                          // a token past T (its zeros have arrived)
    // lane v <= 16 adds word v of the 16 ranks' rows in rank order
    mov.u32 %r10, sm_sum;
    mad.lo.u32 %r10, %warp, {4 * ROW}, %r10;         // the token's sums
    setp.gt.u32 %p2, %lane, {N * N};
    @%p2 bra RES_SUMMED;
    mov.u32 %r1, sm_gat;
    mad.lo.u32 %r1, %warp, {4 * ROW * CLUSTER}, %r1;
    mad.lo.u32 %r1, %lane, 4, %r1;""")
    else:
        e(f"""    setp.ge.u32 %p1, %rank, %grp;
    @%p1 bra EXIT;                          // receives nothing
{GATHER_WAIT.format(R="RES", S=stamp(6))}
    setp.ge.u32 %p1, %rank, %cnt;
    @%p1 bra EXIT;                          // a token past T (its zeros have arrived)
    setp.ge.u32 %p1, %tx, 32;
    @%p1 bra EXIT;
    // lane v <= 16 adds word v of the 16 ranks' rows in rank order
    setp.gt.u32 %p2, %lane, {N * N};
    @%p2 bra RES_SUMMED;
    mov.u32 %r1, sm_gat;
    mad.lo.u32 %r1, %lane, 4, %r1;""")
    e(rank_sum("%r1", 4 * ROW))
    base = "%r10" if slots > 1 else "sm_sum"
    e(f"""    mov.u32 %r2, {base};
    mad.lo.u32 %r2, %lane, 4, %r2;
    st.shared.f32 [%r2], %f1;
RES_SUMMED:
    bar.warp.sync 0xffffffff;
    setp.ne.u32 %p1, {"%lane" if slots > 1 else "%tx"}, 0;
    @%p1 bra EXIT;{stamp(8)}
    ld.shared.f32 %f1, [{base}];
{inv_rms("%f1", "%inv_t")}""")
    for q in range(N * N):
        e(f"""    ld.shared.f32 %f2, [{base}+{4 * (1 + q)}];
    mul.f32 %f2, %f2, %inv_t;
    fma.rn.f32 %S{q}, %f2, %sc, %bz{q};""")
    mark(9, 11)
    sinkhorn.unrolled(N, lambda i, j: f"%S{i * N + j}", e, "SK_", pair="direct" not in EXPERIMENTS)
    mark(10, 12)
    e(f"""    add.u32 %r1, %tok0, {"%r9" if slots > 1 else "%rank"};
    mul.wide.u32 %rd1, %r1, {4 * N * N};
    add.u64 %rd1, %hres, %rd1;""")
    for q in range(0, N * N, 4):
        e(f"    st.global.v4.f32 [%rd1+{4 * q}], {{%S{q}, %S{q + 1}, %S{q + 2}, %S{q + 3}}};")
    e(stamp(7))
    e("    bra EXIT;")
    return "\n".join(L)


def row_word(rows, skip):
    """Thread s < rows 9 takes word %r2 = s % 9 (ss, 8 logits) of the h_pre row %r1 = s / 9; the
    others go to skip."""
    return f"""    mul.lo.u32 %r1, {rows}, 9;
    setp.ge.u32 %p1, %tx, %r1;
    @%p1 bra {skip};
    div.u32 %r1, %tx, 9;
    mul.lo.u32 %r2, %r1, 9;
    sub.u32 %r2, %tx, %r2;"""


def gather_sum(row_words, rank_step):
    """Word %r2 of gathered row %r1 (at sm_gat + 4 (%r1 row_words + %r2), the ranks rank_step
    bytes apart) added over the 16 ranks in order, into sm_sum[%r1][%r2]."""
    return f"""    mad.lo.u32 %r3, %r1, {row_words}, %r2;
    mov.u32 %r4, sm_gat;
    mad.lo.u32 %r4, %r3, 4, %r4;
{rank_sum("%r4", rank_step)}
    mov.u32 %r6, sm_sum;
    mul.lo.u32 %r7, %r1, 12;
    add.u32 %r7, %r7, %r2;
    mad.lo.u32 %r6, %r7, 4, %r6;
    st.shared.f32 [%r6], %f1;"""


def pre_tail(esz, wide=False):
    """Every CTA adds every token's rows, computes h_pre (and CTA t stores token t's h_pre,
    h_post, inv_rms), then mixes its channels. With the wide groups (pre_wide_coefficients) the
    owner of each token does, and sends h_pre to every CTA."""
    words = ROLES["pre"]["words"]
    L = []
    e = L.append
    if wide:
        e(pre_wide_coefficients(esz, wide.pre_slots))
        e(mix_tail(esz))
        return "\n".join(L)
    e(f"""{GATHER_WAIT.format(R="PRE", S=stamp(6))}
    // thread s < cnt 9: token t = s / 9, word v = s % 9 (ss, 8 logits), ranks in order
{row_word("%cnt", "PRE_SUMMED")}
{gather_sum(CLUSTER * words, 4 * words)}
PRE_SUMMED:
    barrier.sync 0;
    // thread s < {GROUP * 2 * N}: token t = s / 8, logit i = s % 8: h_pre (i < 4) or h_post
    setp.ge.u32 %p1, %tx, {GROUP * 2 * N};
    @%p1 bra COEF_DONE;
    shr.u32 %r1, %tx, 3;                    // t
    and.b32 %r2, %tx, 7;                    // i
    setp.ge.u32 %p1, %r1, %cnt;
    @%p1 bra COEF_DONE;
    setp.eq.u32 %p2, %r1, %rank;            // CTA t stores token t's coefficients
{coefficient("%r1", "%r1", "N")}
    @%p3 bra COEF_DONE;
    mov.u32 %r6, sm_hp;
    mad.lo.u32 %r6, %r1, {4 * N}, %r6;
    mad.lo.u32 %r6, %r2, 4, %r6;
    st.shared.f32 [%r6], %f3;
    bra COEF_DONE;""")
    e(mix_tail(esz))
    return "\n".join(L)


def coefficient(t, slot, tag):
    """Thread (token t, logit %r2 = i) of sm_sum's row slot: inv_rms, z, then h_pre (i < 4, into
    %f3; %p3 false) or h_post (%p3 true); where %p2, stored to global (h_pre, h_post, and
    inv_rms by i = 0)."""
    return f"""    mov.u32 %r3, sm_sum;
    mad.lo.u32 %r3, {slot}, 48, %r3;
    ld.shared.f32 %f1, [%r3];
{inv_rms("%f1", "%inv_t")}
    mad.lo.u32 %r4, %r2, 4, %r3;
    ld.shared.f32 %f2, [%r4+4];
    mul.f32 %f2, %f2, %inv_t;
    fma.rn.f32 %f2, %f2, %sc, %bz0;
{sigmoid("%f2", "%f3")}
    add.u32 %r5, %tok0, {t};
    setp.ge.u32 %p3, %r2, {N};
    @%p3 bra COEF_POST{tag};
    @!%p_paper add.f32 %f3, %f3, %eps_hc;
    @!%p2 bra COEF_STORED{tag};
    mad.lo.u32 %r6, %r5, {N}, %r2;
    mul.wide.u32 %rd1, %r6, 4;
    add.u64 %rd1, %hpre, %rd1;
    st.global.f32 [%rd1], %f3;
    setp.ne.u32 %p4, %r2, 0;
    @%p4 bra COEF_STORED{tag};
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %inv, %rd1;
    st.global.f32 [%rd1], %inv_t;
    bra COEF_STORED{tag};
COEF_POST{tag}:
    @!%p2 bra COEF_STORED{tag};
    add.f32 %f4, %f3, %f3;
    mad.lo.u32 %r6, %r5, {N}, %r2;
    sub.u32 %r6, %r6, {N};
    mul.wide.u32 %rd1, %r6, 4;
    add.u64 %rd1, %hpost, %rd1;
    st.global.f32 [%rd1], %f4;
COEF_STORED{tag}:"""


def owned_tokens(dst, tmp, pred, slots):
    """dst = the tokens a wide h_pre CTA owns: rank + 16 j < cnt for j < slots."""
    L = [f"""    // owned tokens: rank + {CLUSTER} j < cnt, j < {slots}
    mov.u32 {dst}, 0;"""]
    for j in range(slots):
        L.append(f"""    add.u32 {tmp}, %rank, {CLUSTER * j};
    setp.lt.u32 {pred}, {tmp}, %cnt;
    selp.u32 {tmp}, 1, 0, {pred};
    add.u32 {dst}, {dst}, {tmp};""")
    return "\n".join(L)


def pre_wide_coefficients(esz, slots):
    """The wide groups' h_pre clusters: CTA r owns tokens t = r + 16 j < cnt (j < slots). It
    adds their rows (gat[rank][j][12], ranks in order), computes and stores their h_pre, h_post
    and inv_rms, and sends each h_pre value to every CTA's sm_hp[t] (st.async, completing bytes
    on that CTA's h_pre mbarrier, armed for cnt x 16 bytes); every CTA then waits for all of
    them."""
    words = ROLES["pre"]["words"]
    return f"""{owned_tokens("%r12", "%r1", "%p1", slots)}
    setp.eq.u32 %p1, %r12, 0;
    @%p1 bra WIDE_SUMMED;
{GATHER_WAIT.format(R="PREW", S=stamp(6))}
    // thread s < n 9: slot j = s / 9, word v = s % 9, ranks in order
{row_word("%r12", "WIDE_SUMMED")}
{gather_sum(words, 4 * words * slots)}
WIDE_SUMMED:
    barrier.sync 0;
    // thread s < n 8: slot j = s / 8, logit i = s % 8 of token rank + 16 j
    shl.b32 %r1, %r12, 3;
    setp.ge.u32 %p1, %tx, %r1;
    @%p1 bra WIDE_SENT;
    shr.u32 %r10, %tx, 3;                   // j
    and.b32 %r2, %tx, 7;                    // i
    mad.lo.u32 %r11, %r10, {CLUSTER}, %rank;            // t
    setp.eq.u32 %p2, %r2, %r2;              // the owner stores
{coefficient("%r11", "%r10", "W")}
    @%p3 bra WIDE_SENT;
    // h_pre[t][i] to every CTA's sm_hp
    mov.u32 %r6, sm_hp;
    mad.lo.u32 %r6, %r11, {4 * N}, %r6;
    mad.lo.u32 %r6, %r2, 4, %r6;""" + "".join(f"""
    mapa.shared::cluster.u32 %r7, %r6, {d};
    mapa.shared::cluster.u32 %r8, %hbar, {d};
    st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [%r7], %f3, [%r8];""" for d in range(CLUSTER)) + f"""
WIDE_SENT:
HW_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [sm_hbar], 0;
    @!%p1 bra HW_WAIT;
"""


def mix_tail(esz):
    """After the coefficients (COEF_DONE): the mix of the CTA's channels of every token, item s ->
    token t = s / (cpc / 8), channels 8 (s % (cpc / 8)) of the slice, thread j taking items j,
    j + THREADS, ...: a[t][c] = sum_i h_pre[t][i] x_s[t][i][c] (f32, streams in order, one
    rounding). bf16 takes two items a trip (j and j + THREADS: every load of both issued before
    the first FMA; a group of 32 tokens has 4 items a thread at C = 4096)."""
    L = []
    e = L.append
    e(f"""COEF_DONE:
    barrier.sync 0;
    // mix
    shr.u32 %r1, %cpc, 3;                   // items a token
    mov.u32 %s, %tx;
MIX:
    div.u32 %r2, %s, %r1;                   // t
    setp.ge.u32 %p1, %r2, %cnt;
    @%p1 bra MIXED;
    mul.lo.u32 %r5, %cpc, {esz};            // stream step""")
    items = [("%s", "%r2", "%r3", "%r4", "%f", 1, "%mo", "%rd1", 0)]
    if esz == 2:
        e(f"""    add.u32 %r9, %s, {THREADS};
    div.u32 %r10, %r9, %r1;
    setp.lt.u32 %p5, %r10, %cnt;            // the second item exists
    @!%p5 mov.u32 %r9, %s;                  // else it repeats the first (not stored)
    @!%p5 mov.u32 %r10, %r2;""")
        items.append(("%r9", "%r10", "%r11", "%r12", "%f", 5, "%mb", "%rd3", 4))
    for it, (si, t, ch, xa, _, h, _, _, _) in enumerate(items):
        e(f"""    mul.lo.u32 {ch}, {t}, %r1;
    sub.u32 {ch}, {si}, {ch};
    shl.b32 {ch}, {ch}, 3;                    // first channel of the item in the slice
    mad.lo.u32 {xa}, {t}, %xrow, %xsm;
    mad.lo.u32 {xa}, {ch}, {esz}, {xa};        // &x_s[t][stream 0][channel]
    mov.u32 %r6, sm_hp;
    mad.lo.u32 %r6, {t}, {4 * N}, %r6;
    ld.shared.v4.f32 {{%f{h}, %f{h + 1}, %f{h + 2}, %f{h + 3}}}, [%r6];""")
        if esz == 2:
            for i in range(N):
                w = [f"%mx{16 * it + 4 * i + q}" for q in range(4)]
                e(f"    ld.shared.v4.b32 {{{', '.join(w)}}}, [{xa}];")
                if i + 1 < N:
                    e(f"    add.u32 {xa}, {xa}, %r5;")
    for it, (si, t, ch, xa, _, h, mo, rd, pk) in enumerate(items):
        for j in range(8):
            e(f"    mov.f32 {mo}{j}, 0f00000000;")
        for i in range(N):
            if esz == 2:
                for q in range(4):
                    e(f"""    shl.b32 %r7, %mx{16 * it + 4 * i + q}, 16;
    mov.b32 %gv{2 * q}, %r7;
    and.b32 %r7, %mx{16 * it + 4 * i + q}, 0xffff0000;
    mov.b32 %gv{2 * q + 1}, %r7;""")
            else:
                e(f"""    ld.shared.v4.f32 {{%gv0, %gv1, %gv2, %gv3}}, [{xa}];
    ld.shared.v4.f32 {{%gv4, %gv5, %gv6, %gv7}}, [{xa}+16];""")
                if i + 1 < N:
                    e(f"    add.u32 {xa}, {xa}, %r5;")
            for j in range(8):
                e(f"    fma.rn.f32 {mo}{j}, %f{h + i}, %gv{j}, {mo}{j};")
        e(f"""    add.u32 %r7, %tok0, {t};
    mul.wide.u32 {rd}, %r7, %as;
    add.u32 %r8, %c0, {ch};
    cvt.u64.u32 %rd2, %r8;
    add.u64 {rd}, {rd}, %rd2;
    mul.lo.u64 {rd}, {rd}, {esz};
    add.u64 {rd}, %a, {rd};""")
        store = store8(rd, [f"{mo}{j}" for j in range(8)], esz == 2, [f"%xw{pk + j}" for j in range(4)])
        if it:
            store = "\n".join(f"    @%p5 {x.strip()}" if x.strip().startswith("st.") else x for x in store.split("\n"))
        e(store)
    e(f"""    add.u32 %s, %s, {THREADS * len(items)};
    bra MIX;
MIXED:""" + stamp(7))
    return "\n".join(L)


def entry(dt, post=False, wide=None):
    """One entry: `pre` (mhc_pre_lc_sm90_*), `post_pre` (mhc_post_pre_lc_sm90_*: layer l's post
    folded in after the loads, post_step) or with a Wide the wide groups' (WIDE:
    mhc_pre_lcw_sm90_bf16, mhc_post_pre_lcw_sm90_bf16, T above FMA_MAX_TOKENS; LONG:
    mhc_pre_lcw128_sm90_bf16, T above MAX_TOKENS)."""
    esz = 2 if dt == "bf16" else 4
    most = largest_group(dt)
    top = wide.top if wide else GROUP       # the static arrays' rows, the coefficient threads
    # post_pre's x' passes: the wide fold's rows end at WIDE_POST_MAX_TOKENS, where its h_pre
    # clusters hold WIDE_GROUP tokens (lc.rs `args` refuses a T outside the row), up to
    # WIDE_POST_MAX_C.
    max_cpc = WIDE_POST_MAX_C // CLUSTER if wide else MAX_CPC
    name = f"mhc_{'post_pre' if post else 'pre'}_lc{wide.suffix if wide else ''}_sm90_{dt}"
    L = [declarations(name, esz, post, wide, top), opening(esz, post, wide), loads(esz, post, top, wide),
         post_step(esz, WIDE_GROUP if wide else most, max_cpc) if post else "",
         "    @!%p_res bra ROLE_PRE;",
         role_rows("res", esz, most, wide), push("res", wide), res_tail(wide.res_slots if wide else 1),
         "ROLE_PRE:",
         role_rows("pre", esz, most, wide), push("pre", wide), pre_tail(esz, wide),
         EXIT]
    return "\n".join(L)


def main():
    text = HEADER + f"""
.version 8.8
.target sm_90a
.address_size 64

.extern .shared .align 128 .b8 dsm[];      // x_s, gk_s, phi_s (header, LOADS)
"""
    return text + "\n".join([entry(dt, post) for post in (False, True) for dt in ("bf16", "f32")]
                            + [entry("bf16", post, wide=WIDE) for post in (False, True)]
                            + [entry("bf16", wide=LONG)])


def generate(experiments):
    """pre_lc.ptx; experiments: the timing builds named in asm/gen/cli.py."""
    if "xprobe" in experiments and "stamps" not in experiments:
        # the probe writes through the stamps' per-CTA address, which only stamps builds set
        raise SystemExit("pre_lc.xprobe needs pre_lc.stamps in the same build")
    EXPERIMENTS.clear()
    EXPERIMENTS.update(experiments)
    try:
        return {"asm/ptx/sm90/pre_lc.ptx": main()}
    finally:
        EXPERIMENTS.clear()


MIN_C = 512  # cpc >= 32: below it the few-token kernel's 64 CTAs already cover C


def largest_group(dt):
    """The most tokens a cluster of the dt entries serves: the h_pre clusters' PRE_GROUP only
    where the entries go past NARROW_MAX_TOKENS (the f32 ones do not, and carry no body for it)."""
    return GROUP if row_max_tokens(dt) > NARROW_MAX_TOKENS else RES_GROUP


def pre_groups(dt):
    """The h_pre clusters' token counts of the dt entries, in words for the catalogue."""
    if largest_group(dt) > RES_GROUP:
        return f"{RES_GROUP} ({PRE_GROUP} above {NARROW_MAX_TOKENS} tokens)"
    return f"{RES_GROUP}"


def row_max_tokens(dt):
    """The entries' largest T. f32 keeps NARROW_MAX_TOKENS: in its post_pre entry the h_pre
    clusters' slices of 8 f32 tokens (x, f and phi: 128 KB a CTA at C = 7168) make them the longer
    path, and the mid kernel was faster at T = 16 (H200, in a graph: 6.69 / 7.98 us against 6.93 /
    9.27 at C = 4096 / 7168); f32 pre, 5.48 against 5.81 us at C = 4096 and level at 7168, stops
    there too, so that post_pre stays post then pre's bits (the same pre kernel on both paths)."""
    return NARROW_MAX_TOKENS if dt == "f32" else FMA_MAX_TOKENS


def catalogue_rows():
    """The catalogue rows of the seven entries (the first two wide entries in two rows each: their C
    ranges). A row's tile is an h_res cluster's tokens split over its CTAs, as the persistent
    clusters' rows give theirs: the selector's cost model counts tiles x split CTAs in flight."""
    G = catalogue.geometry
    rows = []
    for post in (False, True):
        for dt in ("bf16", "f32"):
            esz = 2 if dt == "bf16" else 4
            top = row_max_tokens(dt)
            stage, kind = ("post_pre", "post_pre_lc") if post else ("pre", "pre_lc")
            comment = [
                "pre for few tokens on two clusters that split the logits (sm_90a): asm/ptx/sm90/pre_lc.ptx",
                f"(generated by python3 -m asm.gen). n = 4, T <= {FMA_MAX_TOKENS}, C a multiple of {C_MULTIPLE}, no gamma_f:",
                "the partial sums meet through distributed shared memory, no global exchange; the post_pre",
                "entries fold layer l's post in after the loads (post then pre's outputs, bit for bit).",
            ] if (post, dt) == (False, "bf16") else ()
            what = (f"post_pre for 1..{top} tokens in one launch: the logit-cluster pre kernel with layer l's post "
                    "computed from the slices it loads (f's slice and the coefficients arrive with x's; x' with post's "
                    "f32 operations in its order, stored by the h_pre clusters and written back over the x slice)"
                    if post else
                    f"pre for 1..{top} tokens: per {RES_GROUP} tokens a {CLUSTER}-CTA cluster for the h_res logits "
                    f"(and the Sinkhorns), per {pre_groups(dt)} one for the h_pre / h_post logits (and the mix), each "
                    "splitting K over its "
                    "CTAs and adding their partial rows through distributed shared memory: no grid-wide exchange")
            args = POST_PRE_PC if post else PRE_DECODE
            rows.append(catalogue.row(
                f"{stage}_lc_sm90_{dt}", stage, ["v4", "paper"], "sm_90a", "asm/bin/sm90/pre_lc.cubin",
                f"mhc_{stage}_lc_sm90_{dt}", [dt], [N], (C_MULTIPLE, MIN_C, CLUSTER * MAX_CPC), (1, top),
                (RES_GROUP, CLUSTER), THREADS, what, kind, x_passes=1, params=f"{args.name} ({args.size} B, {RUST_MIRROR})",
                rank=70, options=["gamma_k"],
                geometry=G(channels_per_thread=8, cluster=CLUSTER, dynamic_shared_max=lc_shared(esz, MAX_CPC, post),
                           traits=["grid_dependency"]),
                comment=comment))
    wide = (f"the logit clusters with {WIDE_GROUP} tokens a cluster of either role ({WIDE_PRE_GROUP} an h_pre "
            f"cluster above {WIDE_PRE_ABOVE}), projected on the tensor cores (mma.sync, phi split into bf16 hi + "
            "lo); each h_pre cluster gathers a token's rows at one CTA, which sends its h_pre to every CTA")
    top_c = CLUSTER * MAX_CPC
    for rid, c_range, low in (("pre_lcw_sm90_bf16", (C_MULTIPLE, MIN_C, WIDE_FOLD_MAX_C), WIDE_MIN_TOKENS),
                              ("pre_lcw_large_c_sm90_bf16", (C_MULTIPLE, WIDE_FOLD_MAX_C + C_MULTIPLE, top_c),
                               LARGE_C_MIN_TOKENS)):
        rows.append(catalogue.row(
            rid, "pre", ["v4", "paper"], "sm_90a", "asm/bin/sm90/pre_lc.cubin", "mhc_pre_lcw_sm90_bf16",
            ["bf16"], [N], c_range, (low, MAX_TOKENS), (WIDE_GROUP, CLUSTER), THREADS,
            f"pre for {low}..{MAX_TOKENS} tokens at C = {c_range[1]}..{c_range[2]}: {wide}" + (
                f" (up to {low - 1} tokens the mid kernel, whose fold post_pre runs there)"
                if low > WIDE_MIN_TOKENS else ""),
            "pre_lc", x_passes=1, params=f"{PRE_DECODE.name} ({PRE_DECODE.size} B, {RUST_MIRROR})",
            rank=70, options=["gamma_k"],
            geometry=G(channels_per_thread=8, cluster=CLUSTER, dynamic_shared_max=wide_shared(c_range[2] // CLUSTER),
                       traits=["grid_dependency"])))
    rows.append(catalogue.row(
        "pre_lcw128_sm90_bf16", "pre", ["v4", "paper"], "sm_90a", "asm/bin/sm90/pre_lc.cubin",
        f"mhc_pre_lc{LONG.suffix}_sm90_bf16", ["bf16"], [N], (C_MULTIPLE, MIN_C, LONG_MAX_C), LONG.tokens,
        (LONG.res, CLUSTER), THREADS,
        f"pre for {LONG.tokens[0]}..{LONG.tokens[1]} tokens at C = {MIN_C}..{LONG_MAX_C}: the wide entry's design with "
        f"{LONG.res} tokens an h_res cluster (CTA r runs the Sinkhorns of tokens r and r + 16) and {LONG.pre} an h_pre "
        f"cluster (T = {LONG.tokens[1]}: 4 + 3 clusters, resident at once): no persistent clusters' opening barrier, "
        "first fill or drain", "pre_lc", x_passes=1, params=f"{PRE_DECODE.name} ({PRE_DECODE.size} B, {RUST_MIRROR})",
        rank=70, options=["gamma_k"],
        geometry=G(channels_per_thread=8, cluster=CLUSTER, dynamic_shared_max=wide_shared(LONG_MAX_C // CLUSTER, wide=LONG),
                   traits=["grid_dependency"])))
    for rid, c_range, low in (("post_pre_lcw_sm90_bf16", (C_MULTIPLE, MIN_C, WIDE_FOLD_MAX_C), WIDE_MIN_TOKENS),
                              ("post_pre_lcw_large_c_sm90_bf16",
                               (C_MULTIPLE, WIDE_FOLD_MAX_C + C_MULTIPLE, WIDE_POST_MAX_C), LARGE_C_MIN_TOKENS)):
        rows.append(catalogue.row(
            rid, "post_pre", ["v4", "paper"], "sm_90a", "asm/bin/sm90/pre_lc.cubin", "mhc_post_pre_lcw_sm90_bf16",
            ["bf16"], [N], c_range, (low, WIDE_POST_MAX_TOKENS), (WIDE_GROUP, CLUSTER), THREADS,
            f"post_pre for {low}..{WIDE_POST_MAX_TOKENS} tokens at C = {c_range[1]}..{c_range[2]} in one launch: "
            f"{wide}; layer l's post computed from the slices it loads (x' with post's f32 operations in its order, "
            "stored by the h_pre clusters and written back over the x slice)", "post_pre_lc", x_passes=1,
            params=f"{POST_PRE_PC.name} ({POST_PRE_PC.size} B, {RUST_MIRROR})", rank=70, options=["gamma_k"],
            geometry=G(channels_per_thread=8, cluster=CLUSTER,
                       dynamic_shared_max=max(wide_role_shared(r, WIDE_GROUP, c_range[2] // CLUSTER, post=True)
                                              for r in ("res", "pre")),
                       traits=["grid_dependency"])))
    return rows
