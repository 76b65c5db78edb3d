"""PTX blocks of the entries' prologue: register declarations, stage row layouts, the pair entry's
split of C and walk, and the prefetches before the grid dependency."""

from .constants import A_TMAP, HC, HC_TILE, NW, PAD, PAIR_STAGES, PAIR_STAGES_MAX, RMAX, TT


# fused entry: registers, the f slice appended to each token row, the coefficients after the rows
FUSED_REGS = """
    .reg .b32 %cfs;                         // this copier's stream (f chunks: passes p with p % 4 == it)
    .reg .pred %p_f;
    .reg .b32 %SS, %NT, %xadj;              // stream slice stride, n-tiles per slice, math lanes' run shifts
    .reg .b32 %xg, %xnt, %xn0, %xn1, %pxa, %pfa, %xlr, %xlf, %hta, %hro0, %hrs, %hpk, %zr;
    .reg .b32 %ah0, %ah1, %al0, %al1, %a20, %a21, %xm<12>, %xv<8>;
    .reg .f32 %xd<16>, %xr<4>, %xh<2>, %fz;
    .reg .pred %p_nz, %p_qe, %p_qlo, %p_hi16;"""
# fused rows: the 4 x slices and the f slice, each C/16 channels + 16 bytes (so the 4 streams of a
# token fall on different banks for the x' ldmatrix / stmatrix), then a pad that makes the row
# stride 4 mod 8 in 16-byte units (the math warps' fragment loads: tokens g and g + 1 on
# different bank halves). The fused pair entry's x rows hold the 4 x slices only (its f rows, one
# slice each, are a ring of their own: PAIR_F_STAGES).
def f_row(slices):
    return """
    shr.u32 %SS, %C, 3;
    add.u32 %SS, %SS, 16;                   // stream slice stride: C/16 channels + 16 bytes
    shr.u32 %NT, %C, 7;                     // 8-channel n-tiles per slice
    mul.lo.u32 %tstride, %SS, {slices};            // {what}
    add.u32 %r1, %NT, 1;
    mul.lo.u32 %r1, %r1, {slices};
    mov.u32 %r2, 4;
    sub.u32 %r2, %r2, %r1;
    and.b32 %r2, %r2, 7;
    mad.lo.u32 %tstride, %r2, 16, %tstride; // row / 16 bytes = 4 mod 8""".format(slices=slices, what="4 x slices, the f slice" if slices == 5 else "4 x slices (f: a ring of its own)")


XADJ = """
    // fused rows: stream slice s starts 16 s bytes later; lane q's chunk of run w + 8j is chunk
    // 4 (w + 8j) + q of the K slice, in stream (4 (w + 8j) + q) / (C / 128): byte j of %xadj
    mov.u32 %xadj, 0;""" + "".join(f"""
    add.u32 %r1, %warp, {NW * j};
    shl.b32 %r1, %r1, 2;
    add.u32 %r1, %r1, %q;
    div.u32 %r1, %r1, %NT;
    min.u32 %r1, %r1, 3;                    // (runs past the slice load nothing)
    shl.b32 %r1, %r1, {4 + 8 * j};
    or.b32 %xadj, %xadj, %r1;""" for j in range(RMAX))
ROW = f"""
    shr.u32 %tstride, %C, 1;
    add.u32 %tstride, %tstride, {PAD};      // token row of a stage (bytes)"""
XW = """
    shl.b32 %r1, %q, 4;
    mad.lo.u32 %xw, %gq, %tstride, %r1;
    shl.b32 %r1, %warp, 6;
    add.u32 %xw, %xw, %r1;                  // token g's row + lane q's 16 bytes + this warp's first run"""
# TMA entry: run w + 8j = 64-channel block j, stream w / 2, channels 32 (w % 2) .. + 31 of it,
# read by ldmatrix.x4 (k-step 0: the run's 16-byte chunks 0, 1; k-step 1: 2, 3). Lane l gives row
# l % 8 of matrix mi = l / 8: token l % 8 + 8 (mi % 2), chunk 4 (w % 2) + mi / 2 of the 128-byte
# row (stream, token), stored at that chunk xor (token % 8) = l % 8 (the 128-byte swizzle), so the
# 8 rows of a matrix fall on 8 bank groups; k-step 1's chunks are 2 further, the address xor 32.
TMA_XW = """
    shr.u32 %r1, %lane, 3;                  // mi
    and.b32 %r2, %lane, 7;                  // its row r
    and.b32 %r3, %r1, 1;
    mad.lo.u32 %r3, %r3, 8, %r2;            // token r + 8 (mi % 2)
    shr.u32 %r4, %warp, 1;
    mad.lo.u32 %r3, %r4, 16, %r3;
    shl.b32 %xw, %r3, 7;                    // row (stream w / 2, token), 128 bytes
    and.b32 %r4, %warp, 1;
    shl.b32 %r4, %r4, 2;
    shr.u32 %r5, %r1, 1;
    add.u32 %r4, %r4, %r5;                  // chunk 4 (w % 2) + mi / 2
    xor.b32 %r4, %r4, %r2;
    shl.b32 %r4, %r4, 4;
    add.u32 %xw, %xw, %r4;                  // + the swizzled chunk"""
TMA_ROW = """
    shr.u32 %tstride, %C, 1;                // TMA entry: C/2 bytes per token (no pad: the swizzle)"""
TMA_DSM = """
    add.u32 %dsm, %dsm, 1023;
    and.b32 %dsm, %dsm, -1024;              // the 128-byte swizzle repeats every 1024 bytes"""
PAIR_WALK = """
    mul.lo.u32 %r1, %half, %pq0;            // pair entry: the clusters of a half walk the tiles
    sub.u32 %cid, %cid, %r1;                // (cid: index within the half, ncl: the half's clusters)
    sub.u32 %r1, %ncl, %pq0;
    setp.ne.u32 %p1, %half, 0;
    selp.u32 %ncl, %r1, %pq0, %p1;"""
F_STAGE = f"""
    add.u32 %sstage, %sstage, {HC_TILE};           // + h_post / h_res of the {TT} tokens ({HC} bytes each)"""
PHI_BAR = 4  # named barrier: the math warps' phi fragments are in (the mix warps fill stages 1..)


PHI_TO_L2 = """
    // phi's slice of this CTA (rows 0..23 x streams 0..3, C/16 floats each at i C + r C/16)
    // and gamma_k's (4 streams) -> L2, before the grid dependency: a prefetch moves no data
    // into the CTA, so it may run ahead of the previous kernel's writes (L2 is where those
    // writes land); the fragment loads after the wait then hit L2. Without it they wait on
    // HBM in the prologue (phase stamps). C % 128 == 0: 16-byte aligned, C/4 bytes.
    mov.u32 %r1, %tid.x;
    setp.ge.u32 %p1, %r1, 100;
    @%p1 bra PHI_L2_END;
    shr.u32 %r2, %r1, 2;                    // row (24, 25: gamma_k)
    and.b32 %r3, %r1, 3;                    // stream
    mov.u32 %r6, %cluster_ctarank;
    shr.u32 %r7, %C, 4;
    mul.lo.u32 %r5, %r3, %C;
    mad.lo.u32 %r5, %r6, %r7, %r5;          // i C + r C/16
    shr.u32 %r8, %C, 2;                     // bytes
    setp.ge.u32 %p1, %r2, 24;
    @%p1 bra PHI_L2_GK;
    shl.b32 %r4, %C, 2;
    mad.lo.u32 %r5, %r2, %r4, %r5;          // + row K
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %phi, %rd1;
    cp.async.bulk.prefetch.L2.global [%rd1], %r8;
    bra.uni PHI_L2_END;
PHI_L2_GK:
    and.b32 %r4, %flags, 2;
    setp.eq.u32 %p1, %r4, 0;
    @%p1 bra PHI_L2_END;
    mul.wide.u32 %rd1, %r5, 4;
    add.u64 %rd1, %gk, %rd1;
    cp.async.bulk.prefetch.L2.global [%rd1], %r8;
PHI_L2_END:"""
# PAIR entry: clusters [0, Q0) run half 0 and [Q0, Q) half 1, Q0 = Q B0 / B rounded into [1, Q - 1]
# (B = C / 1024 blocks, half 0 the first B0 = floor(C / 2048), half 1 the rest): both sets then
# move their parts of the tiles at about the same rate (7168 on 7 clusters: 3 x 3072, 4 x 4096)
PAIR_REGS = """
    .reg .b32 %CH, %C0, %half, %pq0, %nst, %fstg, %fst0;
    .reg .pred %p_ns;
    .reg .b64 %xch, %pw<4>;
    .reg .b32 %ptag;"""
PAIR_HALF = """
    mov.u32 %r4, %nclusterid.x;
    shr.u32 %r2, %C, 11;                    // B0
    shr.u32 %r3, %C, 10;                    // B
    mul.lo.u32 %r1, %r4, %r2;
    shl.b32 %r1, %r1, 1;
    add.u32 %r1, %r1, %r3;
    shl.b32 %r3, %r3, 1;
    div.u32 %pq0, %r1, %r3;                 // Q0 = (2 Q B0 + B) / 2B
    max.u32 %pq0, %pq0, 1;
    sub.u32 %r3, %r4, 1;
    min.u32 %pq0, %pq0, %r3;
    mov.u32 %r1, %clusterid.x;
    setp.ge.u32 %p1, %r1, %pq0;
    selp.u32 %half, 1, 0, %p1;"""
PAIR_SETUP = f"""
    setp.ne.u32 %p1, %half, 0;
    shr.u32 %r2, %C, 11;
    shl.b32 %r2, %r2, 10;                   // half 0's channels
    sub.u32 %r3, %C, %r2;
    selp.u32 %CH, %r3, %r2, %p1;
    selp.u32 %C0, %r2, 0, %p1;
    mul.lo.u32 %r3, %r3, {PAIR_STAGES};
    div.u32 %nst, %r3, %CH;
    min.u32 %nst, %nst, {PAIR_STAGES_MAX};          // the ring's depth: {PAIR_STAGES} stages of the larger part's rows"""
PAIR_PHI_TO_L2 = (PHI_TO_L2.replace("(rows 0..23 x streams 0..3, C/16 floats each at i C + r C/16)",
                                    "(rows 0..23 x streams 0..3, CH/16 floats each at i C + C0 + r CH/16)")
                  .replace("shr.u32 %r7, %C, 4;", "shr.u32 %r7, %CH, 4;")
                  .replace("mad.lo.u32 %r5, %r6, %r7, %r5;          // i C + r C/16",
                           "add.u32 %r5, %r5, %C0;\n    mad.lo.u32 %r5, %r6, %r7, %r5;          // i C + C0 + r CH/16")
                  .replace("shr.u32 %r8, %C, 2;                     // bytes", "shr.u32 %r8, %CH, 2;                    // bytes")
                  .replace("PHI_L2", "PHI_L2P"))
assert PAIR_PHI_TO_L2.count("%CH") == 2 and "%C0" in PAIR_PHI_TO_L2
TMAP_PREFETCH = f"""
    setp.eq.u32 %p1, %r1, 100;              // x's tensor map -> the descriptor cache
    @%p1 prefetch.param.tensormap [p_args+{A_TMAP}];"""
