"""The general pre / post_pre kernel family (docs/math.md stages 1-3): asm/ptx/sm90/pre.ptx.

The kernel is written by hand as PTX text; Python expands the regular unrolled blocks (mma grids
over m-tiles x n-tiles, register lists, the coefficient bodies). Modules: kloop (the pre entry's
software-pipelined and fast K loops), producer (the post_pre entry's K loop, x' = post(x, f) per
chunk), red (the last decode CTA's split sums), coefs (the coefficients), mix (the pre-mix),
tail (everything after the projection); header.txt (the design notes) and funcs.ptx.in (shared
memory and the .func producers) are copied into the file verbatim.
"""

import os

from .. import catalogue, ptx
from ..abi import PRE, RUST_MIRROR
from ..shapes import TMAX
from ..blocks import butterfly
from . import coefs, kloop, mix, producer, tail
from .constants import (FLAG_DBG_NO_K, FLAG_FAST_K, FLAG_GAMMA_F, FLAG_GAMMA_K, FLAG_GROUPS_SHIFT,
                        FLAG_PAPER, FLAG_POST, FLAG_POST_BATCH, FLAG_PREFETCH, FLAG_SOLO, MAX_C, TILE_TOKENS)
from .kloop import ACC

HERE = os.path.dirname(os.path.abspath(__file__))

SS = [f"%ss{i}" for i in range(4)]
TREE = ACC + SS


# The PreArgs fields' registers in the templates
ARG_REGS = dict(zip(
    [f.name for f in PRE.fields],
    ['%x', '%f_', '%hpost_in', '%hres_in', '%xo', '%phi', '%scale', '%base', '%gk', '%gf', '%a', '%y', '%hpre',
     '%hpost', '%hres', '%inv', '%wsp', '%wss', '%wspart', '%wscnt',
     '%T', '%n', '%C', '%K', '%M', '%ldp', '%xs', '%fs', '%xos', '%as', '%ys', '%kslice', '%splits', '%iters', '%flags',
     '%eps_norm', '%eps_hc', '%eps_f']))


def declarations(bf):
    """The entry's register declarations (every name the templates use)."""
    L = []
    e = L.append
    e("    .reg .pred %p<40>;")
    e("    .reg .pred %pr<4>;")
    e("    .reg .pred %pmv<4>;")
    e("    .reg .pred %p_mt1, %p_split, %p_paper, %p_gk, %p_gf, %p_post, %p_k, %p_mg0, %p_q0, %p_solo, %p_claim;")
    e("    .reg .pred %p_pb, %pbq<4>, %pnj<4>, %pbj;")
    e("    .reg .b32 %pbE, %pbh0, %pbhs, %pbr;")
    e("    .reg .b64 %pbco;")
    e(f"    .reg .{'b32' if bf else 'f32'} %pbF<16>, %pbX<64>;")
    e("    .reg .f32 %pbV<8>;")
    e("    .reg .b32 %r<80>;")
    e("    .reg .b64 %rd<80>;")
    e("    .reg .f32 %f<64>;")
    e("    .reg .f32 %acc<32>;")
    e("    .reg .f32 %ss<4>;")
    e("    .reg .f32 %sk<16>;")
    e("    .reg .pred %pv<16>;")
    e("    .reg .pred %p_small;")
    if bf:
        e("    .reg .b32 %xa<16>;")
        e("    .reg .b32 %bh<16>;")
        e("    .reg .b32 %bl<16>;")
        e("    .reg .f32 %pf<8>;")
        e("    .reg .f32 %gkv<8>;")
    else:
        e("    .reg .f32 %xr<32>;")
        e("    .reg .b32 %xh<16>;")
        e("    .reg .b32 %xl<16>;")
        e("    .reg .b32 %ph<16>;")
        e("    .reg .b32 %pl<16>;")
        e("    .reg .f32 %pf<32>;")
        e("    .reg .f32 %gkv<8>;")
    e(kloop.regs(bf))
    e(kloop.fast_regs())
    e(mix.mix_regs(bf))
    e("    .reg .b64 %x, %f_, %hpost_in, %hres_in, %xo, %phi, %scale, %base, %gk, %gf, %a, %y, %hpre, %hpost, %hres, %inv, %wsp, %wss, %wspart, %wscnt;")
    e("    .reg .b32 %T, %n, %C, %K, %M, %ldp, %xs, %fs, %xos, %as, %ys, %kslice, %splits, %iters, %flags;")
    e("    .reg .f32 %eps_norm, %eps_hc, %eps_f, %sc0, %sc1, %sc2;")
    e("    .reg .b32 %tx, %warp, %lane, %g, %q, %q8, %tile, %gidx, %t0, %rows, %jlen, %jbeg, %jend, %jb, %mg, %ngr;")
    e("    .reg .b32 %blk, %cbk, %ii, %cc, %kk, %gsn, %ksp, %gsl, %nks, %mg0, %mgend;")
    e(coefs.sk_regs())
    e("    .reg .b64 %koff, %kof4, %xrow0, %xstep, %frow0, %xorow0, %hprow0, %hrrow0, %prow0, %pstep, %cnt;")
    return "\n".join(L)


def load_params():
    """The PreArgs loads (header.txt, PARAMS)."""
    return "\n".join("    " + line for line in PRE.ld_params(ARG_REGS, base="p_args"))


def setup(bf, post):
    """Thread mapping, tile and split of this CTA, the flags, the j-space slice and the logit
    groups. The entry fixes post (pre: never, post_pre: always); f32 has no batched producer and
    no fast K loop (both exceed the register cap)."""
    postcmp = "eq" if post else "ne"
    pbf32 = "" if bf else "\n    setp.ne.u32 %p_pb, 0, 0;                // f32: no batched producer (register cap)"
    fastf32 = "" if bf else "\n    setp.ne.u32 %p_fast, 0, 0;              // f32: no fast K loop"
    return f"""
    // ---- thread mapping: 8 warps; lane = 4*g + q (g: mma group = token row / logit column, q: thread in group)
    mov.u32 %tx, %tid.x;
    shr.u32 %warp, %tx, 5;
    and.b32 %lane, %tx, 31;
    shr.u32 %g, %lane, 2;
    and.b32 %q, %lane, 3;
    shl.b32 %q8, %q, 3;
    setp.eq.u32 %p_q0, %q, 0;
    mov.u32 %r0, %ctaid.x;                 // 1-D grid: block = tile * splits + split
    div.u32 %tile, %r0, %splits;
    mul.lo.u32 %r1, %tile, %splits;
    sub.u32 %gidx, %r0, %r1;
    // logit-group slices (flags bits 16..23; n >= 8 decode): the tile's CTA gidx = K split ksp
    // x group slice gsl; nks K splits, each with its own partial block
    shr.u32 %gsn, %flags, {FLAG_GROUPS_SHIFT};
    and.b32 %gsn, %gsn, 255;
    max.u32 %gsn, %gsn, 1;
    div.u32 %ksp, %gidx, %gsn;
    mul.lo.u32 %r1, %ksp, %gsn;
    sub.u32 %gsl, %gidx, %r1;
    div.u32 %nks, %splits, %gsn;
    shl.b32 %t0, %tile, {TILE_TOKENS.bit_length() - 1};                  // first token of this CTA's 32-token tile
    sub.u32 %rows, %T, %t0;
    min.u32 %rows, %rows, 32;               // tokens in this tile
    setp.gt.u32 %p_mt1, %rows, 16;          // second 16-row mma tile in use
    setp.gt.u32 %p_split, %splits, 1;       // decode mode: the reduction is split across the grid
    and.b32 %r0, %flags, {FLAG_PAPER};
    setp.ne.u32 %p_paper, %r0, 0;
    and.b32 %r0, %flags, {FLAG_GAMMA_K};
    setp.ne.u32 %p_gk, %r0, 0;
    and.b32 %r0, %flags, {FLAG_GAMMA_F};
    setp.ne.u32 %p_gf, %r0, 0;
    setp.{postcmp}.u32 %p_post, 0, 0;            // the entry decides (pre: never; post_pre: always; flag 8 is informative)
    and.b32 %r0, %flags, {FLAG_SOLO};
    setp.ne.u32 %p_solo, %r0, 0;            // split prefill: the last CTA finishes its tile alone
    and.pred %p_claim, %p_split, !%p_solo;  // decode: CTAs claim tokens for the pre-mix
    and.b32 %r0, %flags, {FLAG_POST_BATCH};
    setp.ne.u32 %p_pb, %r0, 0;
    setp.le.u32 %p0, %n, 4;
    and.pred %p_pb, %p_pb, %p0;             // post_pre, n <= 4: batched producer (flag 64)
    and.pred %p_pb, %p_pb, %p_post;{pbf32}
    and.b32 %r0, %flags, {FLAG_PREFETCH};
    setp.ne.u32 %p_pf, %r0, 0;              // flag 128: prefetch x (L2) and phi (L1) PF_STEPS ahead
    and.b32 %r0, %flags, {FLAG_FAST_K};               // flag 256: the fast K loop, where its conditions hold
    setp.ne.u32 %p_fast, %r0, 0;
    and.pred %p_fast, %p_fast, !%p_gk;
    and.pred %p_fast, %p_fast, !%p_post;
    and.b32 %r0, %C, 31;
    setp.eq.u32 %p0, %r0, 0;
    and.pred %p_fast, %p_fast, %p0;{fastf32}
    setp.eq.u32 %p0, %n, 4;
    and.pred %p_fast, %p_fast, %p0;{fastf32}
    ld.global.nc.f32 %sc0, [%scale];
    ld.global.nc.f32 %sc1, [%scale+4];
    ld.global.nc.f32 %sc2, [%scale+8];
    mul.wide.u32 %rd0, %tile, 16;
    add.u64 %cnt, %wscnt, %rd0;             // this tile's counters: arrive, claim, exit, ready
    // ---- j-space: blocks of 32 channels of one stream, ordered (channel block, stream); this CTA's slice
    add.u32 %r0, %C, 31;
    and.b32 %r0, %r0, -32;
    mul.lo.u32 %jlen, %n, %r0;
    mul.lo.u32 %jbeg, %ksp, %kslice;
    add.u32 %jend, %jbeg, %kslice;
    min.u32 %jend, %jend, %jlen;
    and.b32 %r0, %flags, {FLAG_DBG_NO_K};              // attribution only (Plan::pre_attribution): no K loop
    setp.ne.u32 %p0, %r0, 0;
    @%p0 mov.u32 %jend, %jbeg;
    shr.u32 %ngr, %ldp, 5;                  // logit groups of 32 (4 mma n-tiles)
    add.u32 %r0, %ngr, %gsn;
    sub.u32 %r0, %r0, 1;
    div.u32 %r0, %r0, %gsn;                 // groups per slice (the host makes no slice empty)
    mul.lo.u32 %mg0, %gsl, %r0;
    add.u32 %mgend, %mg0, %r0;
    min.u32 %mgend, %mgend, %ngr;           // this CTA's logit groups [mg0, mgend)"""


def row_slots(esz):
    """The tile's 4 row slots (token t0 + g + 8 s), x row pointers, the sums of squares."""
    L = []
    e = L.append
    for s in range(4):
        e(f"""    // row slot {s}: token t0 + g + {8*s}
    add.u32 %r1, %g, {8*s};
    add.u32 %r1, %r1, %t0;
    setp.lt.u32 %pr{s}, %r1, %T;""")
    e(f"""    add.u32 %r1, %g, %t0;
    mul.lo.u32 %r2, %r1, %xs;
    mul.wide.u32 %rd1, %r2, {esz};
    add.u64 %xrow0, %x, %rd1;               // x row of slot 0 (token t0 + g); slot s adds s * xstep
    mul.wide.u32 %xstep, %xs, {8*esz};
    mul.wide.u32 %pstep, %K, 32;            // phi: 8 logit rows per n-tile""")
    for i in range(4):
        e(f"    mov.f32 %ss{i}, 0f00000000;")
    return "\n".join(L)


def group_head():
    """Top of the loop over this CTA's logit groups (32 logits, 4 n-tiles): accumulators, the
    running sums, the n-tiles' phi rows."""
    L = []
    e = L.append
    e("    mov.u32 %mg, %mg0;")
    e("MG_LOOP:")
    e("    setp.eq.u32 %p_mg0, %mg, 0;")
    e("""    shl.b32 %r1, %mg, 5;
    add.u32 %r1, %r1, 24;
    setp.lt.u32 %p_nt3, %r1, %M;            // n-tile 3 of this group holds a logit (else its mma are skipped)""")
    for a in ACC:
        e(f"    mov.f32 {a}, 0f00000000;")
    e(kloop.tot_init())
    for nt in range(4):
        e(f"""    shl.b32 %r1, %mg, 5;
    add.u32 %r1, %r1, {nt*8};
    add.u32 %r1, %r1, %g;                   // logit row of phi for n-tile {nt}
    setp.lt.u32 %pmv{nt}, %r1, %M;""")
        if nt == 0:
            e("""    mul.wide.u32 %rd1, %r1, %K;
    shl.b64 %rd1, %rd1, 2;
    add.u64 %prow0, %phi, %rd1;             // phi row of n-tile 0; n-tile nt adds nt * pstep""")
    return "\n".join(L)


def pre_k_loop(bf):
    """The pre entry's K loop: the fast loop where flag 256 and its conditions hold (bf16), else
    the general software-pipelined loop."""
    L = []
    if bf:
        L.append("    @%p_fast bra KF_START;")
    L.append(kloop.pipelined(bf))
    if bf:
        # (f32: the fast loop spills at the register cap, ptxas 12.9: f32 keeps the general loop)
        L.append(kloop.fast(bf))
    return "\n".join(L)


def reduce_partials():
    """After the K loop: the running sums folded in, ss over the 4 lanes of a group, the CTA's
    8 warps summed by a fixed tree in shared memory."""
    L = []
    e = L.append
    e("K_DONE:")
    e(kloop.tot_finish())
    e("""
    // ---- sum of squares: reduce over the 4 lanes of a group (same token row), fixed butterfly""")
    for s in range(4):
        e(butterfly(f"%ss{s}", "%r10", (1, 2), clamp="31", mask="-1"))
    e("""    // ---- CTA reduction of the 8 warps' partial sums, fixed tree (4+4, 2+2, 1+1): deterministic
    mov.u32 %r20, smem_big;
    mov.u32 %r21, 4;
TREE:
    setp.ge.u32 %p4, %warp, %r21;
    shl.b32 %r22, %r21, 1;
    setp.lt.u32 %p5, %warp, %r22;
    and.pred %p4, %p4, %p5;
    @!%p4 bra TREE_ADD;
    sub.u32 %r23, %warp, %r21;
    mul.lo.u32 %r23, %r23, 1152;            // 36 registers x 32 lanes
    add.u32 %r23, %r23, %lane;
    shl.b32 %r23, %r23, 2;
    add.u32 %r23, %r23, %r20;""")
    for r, R in enumerate(TREE):
        e(f"    st.shared.f32 [%r23+{r*128}], {R};")
    e("""TREE_ADD:
    bar.sync 0;
    setp.lt.u32 %p4, %warp, %r21;
    @!%p4 bra TREE_NEXT;
    mul.lo.u32 %r23, %warp, 1152;
    add.u32 %r23, %r23, %lane;
    shl.b32 %r23, %r23, 2;
    add.u32 %r23, %r23, %r20;""")
    for r, R in enumerate(TREE):
        e(f"    ld.shared.f32 %f2, [%r23+{r*128}];")
        e(f"    add.f32 {R}, {R}, %f2;")
    return "\n".join(L)


def write_partials():
    """Warp 0 writes the CTA's sums: decode to its partial block, prefill to the tile's rows of
    P and ss; then the next logit group."""
    L = []
    e = L.append
    e("""TREE_NEXT:
    bar.sync 0;
    shr.u32 %r21, %r21, 1;
    setp.ne.u32 %p4, %r21, 0;
    @%p4 bra TREE;
    // ---- warp 0 writes this CTA's sums: decode -> its partial block; prefill -> the tile's rows of P
    setp.ne.u32 %p4, %warp, 0;
    @%p4 bra WR_DONE;
    shl.b32 %r24, %ldp, 5;
    add.u32 %r24, %r24, 32;                 // PS: floats per partial block (32 rows of ldp, then 32 ss)
    @!%p_split bra WR_TILE;
    mad.lo.u32 %r25, %tile, %nks, %ksp;     // partial block of K split ksp
    mul.wide.u32 %rd6, %r25, %r24;
    shl.b64 %rd6, %rd6, 2;
    add.u64 %rd6, %wspart, %rd6;            // P rows
    shl.b32 %r26, %ldp, 7;
    cvt.u64.u32 %rd7, %r26;
    add.u64 %rd7, %rd6, %rd7;               // ss rows
    bra WR_GO;
WR_TILE:
    mul.lo.u32 %r25, %t0, %ldp;
    mul.wide.u32 %rd6, %r25, 4;
    add.u64 %rd6, %wsp, %rd6;
    mul.wide.u32 %rd7, %t0, 4;
    add.u64 %rd7, %wss, %rd7;
WR_GO:
    shl.b32 %r27, %mg, 5;
    add.u32 %r27, %r27, %q;
    add.u32 %r27, %r27, %q;                 // column mg*32 + 2q""")
    for s in range(4):
        mt, half = s >> 1, s & 1
        e(f"    add.u32 %r28, %g, {8*s};")
        e("    mad.lo.u32 %r29, %r28, %ldp, %r27;")
        e("    mul.wide.u32 %rd8, %r29, 4;")
        e("    add.u64 %rd8, %rd6, %rd8;")
        for nt in range(4):
            c0 = ACC[mt*16 + nt*4 + 2*half]
            c1 = ACC[mt*16 + nt*4 + 2*half + 1]
            e(f"    @%pr{s} st.global.v2.f32 [%rd8+{nt*32}], {{{c0}, {c1}}};")
        e(f"    and.pred %p6, %pr{s}, %p_q0;")
        e("    and.pred %p6, %p6, %p_mg0;")
        e("    mul.wide.u32 %rd9, %r28, 4;")
        e("    add.u64 %rd9, %rd7, %rd9;")
        e(f"    @%p6 st.global.f32 [%rd9], %ss{s};")
    e("""WR_DONE:
    add.u32 %mg, %mg, 1;
    setp.lt.u32 %p4, %mg, %mgend;
    @%p4 bra MG_LOOP;
""")
    return "\n".join(L)


def entry(dt, post):
    """mhc_pre_sm90_<dt> (the pre K loop) or mhc_post_pre_sm90_<dt> (the producer K loop)."""
    bf = dt == 'bf16'
    esz = 2 if bf else 4
    name = f"mhc_post_pre_sm90_{dt}" if post else f"mhc_pre_sm90_{dt}"
    parts = [f".visible .entry {name}(", f"    .param .align 8 .b8 p_args[{PRE.size}]", ")", ".maxntid 256, 1, 1", "{",
             declarations(bf), load_params(), ptx.grid_dependency(None), setup(bf, post), row_slots(esz), group_head(),
             producer.k_loop(bf, esz) if post else pre_k_loop(bf),
             reduce_partials(), write_partials(), tail.tail(dt), "}"]
    return "\n".join(parts)


def generate(experiments):
    """pre.ptx (no experiments)."""
    header = open(os.path.join(HERE, 'header.txt')).read()
    funcs = open(os.path.join(HERE, 'funcs.ptx.in')).read()
    out = header + funcs + "\n" + "\n\n".join(entry(dt, post) for post in (False, True) for dt in ('bf16', 'f32')) + "\n"
    return {"asm/ptx/sm90/pre.ptx": out}


def catalogue_rows():
    """The catalogue rows of the four entries (pre / post_pre x bf16 / f32)."""
    ns = list(range(1, 33))
    common = dict(formulations=["v4", "paper"], arch="sm_90a", file="asm/bin/sm90/pre.cubin", n=ns,
                  c=(8, 8, MAX_C), tokens=(1, TMAX), tile=(TILE_TOKENS, 1), threads=256, x_passes=2,
                  options=["gamma_k", "gamma_f"])
    pre_params = f"{PRE.name} ({PRE.size} B, {RUST_MIRROR})"
    post_params = f"{PRE.name} ({PRE.size} B, flags {FLAG_POST} = post, {FLAG_POST_BATCH} = batched producer)"
    gd = catalogue.GRID_DEPENDENCY
    G = catalogue.geometry
    return [
        catalogue.row("pre_sm90_bf16", "pre", entry="mhc_pre_sm90_bf16", dtypes=["bf16"], launch="pre",
                      params=pre_params, geometry=G(channels_per_thread=8, traits=[gd]),
                      why="pre in one launch: mma.sync bf16 with phi split hi+lo, split-K decode with last-CTA finish, "
                          "32-token prefill tiles",
                      comment=["pre / post_pre (sm_90a): one kernel family per dtype, asm/ptx/sm90/pre.ptx (generated by",
                               "python3 -m asm.gen, asm/gen/pre/); the op picks the launch shape per call",
                               "(src/device/cuda/pre/general.rs): decode (T <= 64) splits the reduction over up to 128 CTAs per",
                               "32-token tile, the last CTA finishes; prefill runs one CTA per tile (4 while SMs would idle)."],
                      **common),
        catalogue.row("pre_sm90_f32", "pre", entry="mhc_pre_sm90_f32", dtypes=["f32"], launch="pre",
                      params=pre_params, geometry=G(channels_per_thread=8, traits=[gd]),
                      why="pre in one launch, f32 storage: 3xTF32 mma (f32-accurate logits), same shapes as pre_sm90_bf16",
                      **common),
        catalogue.row("post_pre_sm90_bf16", "post_pre", entry="mhc_post_pre_sm90_bf16", dtypes=["bf16"],
                      launch="post_pre", params=post_params,
                      geometry=G(channels_per_thread=8, traits=["on_request", gd]),
                      why="post of layer l computed per 8-channel chunk (bf16 n <= 4: all loads of a step's 4 row slots "
                          "before the FMAs, h_post/h_res staged in shared memory), stored and fed to layer l+1's "
                          "projection in the same pass; own entry (the pre K loop is not in it)", **common),
        catalogue.row("post_pre_sm90_f32", "post_pre", entry="mhc_post_pre_sm90_f32", dtypes=["f32"],
                      launch="post_pre", params=post_params,
                      geometry=G(channels_per_thread=8, traits=["on_request", gd]),
                      why="post_pre with f32 storage (3xTF32 projection)", **common),
    ]
