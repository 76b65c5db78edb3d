import red
import mix
import small
def sigmoid(src, dst):
    # sigma(z) = 1 / (1 + 2^(-z log2 e)); ex2.approx has ~2 ulp relative error, the reciprocal is IEEE.
    return f"""    mul.f32 {dst}, {src}, 0fBFB8AA3B;
    ex2.approx.f32 {dst}, {dst};
    add.f32 {dst}, {dst}, 0f3F800000;
    rcp.rn.f32 {dst}, {dst};"""

def sum_splits(lbl):
    # %f3 = sum over s = 0..splits-1 of [%rd14 + s*%rd11], in s order, 8 loads in flight.
    return f"""    mov.f32 %f3, 0f00000000;
    mov.u32 %r39, 0;
{lbl}_8:
    add.u32 %r41, %r39, 8;
    setp.gt.u32 %p10, %r41, %splits;
    @%p10 bra {lbl}_1;
    ld.global.cg.f32 %f4, [%rd14];
    add.u64 %rd16, %rd14, %rd11;
    ld.global.cg.f32 %f5, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.f32 %f6, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.f32 %f7, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.f32 %f50, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.f32 %f51, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.f32 %f52, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.f32 %f53, [%rd16];
    add.u64 %rd14, %rd16, %rd11;
    add.f32 %f3, %f3, %f4;
    add.f32 %f3, %f3, %f5;
    add.f32 %f3, %f3, %f6;
    add.f32 %f3, %f3, %f7;
    add.f32 %f3, %f3, %f50;
    add.f32 %f3, %f3, %f51;
    add.f32 %f3, %f3, %f52;
    add.f32 %f3, %f3, %f53;
    mov.u32 %r39, %r41;
    bra {lbl}_8;
{lbl}_1:
    setp.ge.u32 %p10, %r39, %splits;
    @%p10 bra {lbl}_D;
    ld.global.cg.f32 %f4, [%rd14];
    add.f32 %f3, %f3, %f4;
    add.u64 %rd14, %rd14, %rd11;
    add.u32 %r39, %r39, 1;
    bra {lbl}_1;
{lbl}_D:"""

def mix_chunk(bf):
    L = []
    e = L.append
    nv = 8 if bf else 4
    for j in range(nv):
        e(f"    mov.f32 %f{40+j}, 0f00000000;")
    e("""    mov.u32 %r73, 0;
    mov.u32 %r74, smem_hp;
    mov.u64 %rd41, %rd38;
MIXI:
    ld.shared.f32 %f48, [%r74];""")
    if bf:
        e("    @%p_post ld.global.cg.v4.b32 {%r75, %r76, %r77, %r78}, [%rd41];")
        e("    @!%p_post ld.global.nc.v4.b32 {%r75, %r76, %r77, %r78}, [%rd41];")
        for j in range(4):
            e(f"    shl.b32 %r79, %r{75+j}, 16;")
            e(f"    fma.rn.f32 %f{40+2*j}, %f48, %r79, %f{40+2*j};")
            e(f"    and.b32 %r79, %r{75+j}, 0xffff0000;")
            e(f"    fma.rn.f32 %f{41+2*j}, %f48, %r79, %f{41+2*j};")
    else:
        e("    @%p_post ld.global.cg.v4.f32 {%f49, %f50, %f51, %f52}, [%rd41];")
        e("    @!%p_post ld.global.nc.v4.f32 {%f49, %f50, %f51, %f52}, [%rd41];")
        for j in range(4):
            e(f"    fma.rn.f32 %f{40+j}, %f48, %f{49+j}, %f{40+j};")
    e("""    add.u64 %rd41, %rd41, %rd36;
    add.u32 %r74, %r74, 4;
    add.u32 %r73, %r73, 1;
    setp.lt.u32 %p24, %r73, %n;
    @%p24 bra MIXI;
    add.u64 %rd42, %rd35, %rd37;""")
    if bf:
        for j in range(4):
            e(f"    cvt.rn.bf16x2.f32 %r{75+j}, %f{41+2*j}, %f{40+2*j};")
        e("    st.global.v4.b32 [%rd42], {%r75, %r76, %r77, %r78};")
    else:
        e("    st.global.v4.f32 [%rd42], {%f40, %f41, %f42, %f43};")
    for j in range(nv):
        e(f"    fma.rn.f32 %f14, %f{40+j}, %f{40+j}, %f14;")
    return "\n".join(L)

def y_chunk(bf):
    L = []
    e = L.append
    e("""    add.u64 %rd42, %rd35, %rd37;
    add.u64 %rd43, %rd39, %rd37;""")
    if bf:
        e("""    shl.b32 %r75, %r67, 5;
    cvt.u64.u32 %rd44, %r75;
    add.u64 %rd44, %gf, %rd44;
    ld.global.v4.b32 {%r75, %r76, %r77, %r78}, [%rd42];
    ld.global.nc.v4.f32 {%f49, %f50, %f51, %f52}, [%rd44];
    ld.global.nc.v4.f32 {%f53, %f54, %f55, %f56}, [%rd44+16];""")
        for j in range(4):
            e(f"    shl.b32 %r79, %r{75+j}, 16;")
            e(f"    mul.f32 %f{40+2*j}, %r79, %f{49+2*j};")
            e(f"    mul.f32 %f{40+2*j}, %f{40+2*j}, %f23;")
            e(f"    and.b32 %r79, %r{75+j}, 0xffff0000;")
            e(f"    mul.f32 %f{41+2*j}, %r79, %f{50+2*j};")
            e(f"    mul.f32 %f{41+2*j}, %f{41+2*j}, %f23;")
        for j in range(4):
            e(f"    cvt.rn.bf16x2.f32 %r{75+j}, %f{41+2*j}, %f{40+2*j};")
        e("    st.global.v4.b32 [%rd43], {%r75, %r76, %r77, %r78};")
    else:
        e("""    shl.b32 %r75, %r67, 4;
    cvt.u64.u32 %rd44, %r75;
    add.u64 %rd44, %gf, %rd44;
    ld.global.v4.f32 {%f40, %f41, %f42, %f43}, [%rd42];
    ld.global.nc.v4.f32 {%f49, %f50, %f51, %f52}, [%rd44];""")
        for j in range(4):
            e(f"    mul.f32 %f{40+j}, %f{40+j}, %f{49+j};")
            e(f"    mul.f32 %f{40+j}, %f{40+j}, %f23;")
        e("    st.global.v4.f32 [%rd43], {%f40, %f41, %f42, %f43};")
    return "\n".join(L)

def tail(dt):
    bf = dt == 'bf16'
    esz = 2 if bf else 4
    V = 8 if bf else 4
    lv = 3 if bf else 2
    return f"""    // =========================== after the projection ===========================
    @!%p_split bra COEF;
    // ---- decode: publish this CTA's partials (release), count arrivals; the last CTA finishes
    fence.acq_rel.gpu;
    bar.sync 0;
    setp.ne.u32 %p7, %tx, 0;
    @%p7 bra ARRIVED;
    atom.acq_rel.gpu.global.add.u32 %r30, [%cnt], 1;
    sub.u32 %r31, %splits, 1;
    setp.eq.u32 %p8, %r30, %r31;
    selp.u32 %r32, 1, 0, %p8;
    st.shared.u32 [smem_flag], %r32;
ARRIVED:
    bar.sync 0;
    ld.shared.u32 %r32, [smem_flag];
    setp.eq.u32 %p8, %r32, 0;
    @%p8 bra WAIT;                          // (split prefill: WAIT sends non-last CTAs out)
    fence.acq_rel.gpu;
    // ---- last CTA: each element of P and ss summed over the splits in split order (deterministic)
    shl.b32 %r24, %ldp, 5;
    add.u32 %r24, %r24, 32;
    mul.lo.u32 %r33, %tile, %splits;
    mul.wide.u32 %rd10, %r33, %r24;
    shl.b64 %rd10, %rd10, 2;
    add.u64 %rd10, %wspart, %rd10;
    mul.wide.u32 %rd11, %r24, 4;
    mul.lo.u32 %r34, %rows, %ldp;
    mul.lo.u32 %r35, %t0, %ldp;
    mul.wide.u32 %rd12, %r35, 4;
    add.u64 %rd12, %wsp, %rd12;
{red.red_quads()}
    mov.u32 %r36, %tx;
RED_P:
    setp.ge.u32 %p9, %r36, %r34;
    @%p9 bra RED_P_DONE;
    mul.wide.u32 %rd13, %r36, 4;
    add.u64 %rd14, %rd10, %rd13;
{sum_splits('SUMP')}
    add.u64 %rd15, %rd12, %rd13;
    st.global.f32 [%rd15], %f3;
    add.u32 %r36, %r36, 256;
    bra RED_P;
RED_P_DONE:
    setp.ge.u32 %p9, %tx, %rows;
    @%p9 bra RED_S_DONE;
    shl.b32 %r37, %ldp, 5;
    add.u32 %r37, %r37, %tx;
    mul.wide.u32 %rd13, %r37, 4;
    add.u64 %rd14, %rd10, %rd13;
{sum_splits('SUMS')}
    add.u32 %r38, %t0, %tx;
    mul.wide.u32 %rd15, %r38, 4;
    add.u64 %rd15, %wss, %rd15;
    st.global.f32 [%rd15], %f3;
RED_S_DONE:
    bar.sync 0;
COEF:
    bar.sync 0;                             // P / ss rows written by warp 0 (or the reduction)
    setp.le.u32 %p_small, %n, 4;
    @%p_small bra COEF_SMALL;
    // ---- coefficients: warp w handles the tile's tokens w, w+8, w+16, w+24 (lane j < n owns
    //      column / row j of the warp's Sinkhorn matrix in shared memory)
    mov.u32 %r42, smem_big;
    mul.lo.u32 %r43, %warp, 4224;
    add.u32 %r42, %r42, %r43;
    cvt.rn.f32.u32 %f8, %K;
    mul.lo.u32 %r45, %n, %n;
    mul.wide.u32 %rd26, %n, 4;
    setp.lt.u32 %p11, %lane, %n;
    setp.eq.u32 %p13, %lane, 0;
    mov.u32 %r46, %warp;
COEF_LOOP:
    setp.ge.u32 %p12, %r46, %rows;
    @%p12 bra COEF_DONE;
    add.u32 %r47, %t0, %r46;
    mul.wide.u32 %rd17, %r47, 4;
    add.u64 %rd18, %wss, %rd17;
    ld.global.cg.f32 %f9, [%rd18];
    div.rn.f32 %f9, %f9, %f8;
    add.f32 %f9, %f9, %eps_norm;
    sqrt.rn.f32 %f9, %f9;
    rcp.rn.f32 %f9, %f9;                    // inv_rms = 1 / sqrt(ss / K + eps_norm)
    add.u64 %rd19, %inv, %rd17;
    @%p13 st.global.f32 [%rd19], %f9;
    mul.lo.u32 %r48, %r47, %ldp;
    mul.wide.u32 %rd20, %r48, 4;
    add.u64 %rd20, %wsp, %rd20;
    @!%p11 bra SK_LOAD_DONE;
    mul.wide.u32 %rd21, %lane, 4;
    add.u64 %rd22, %rd20, %rd21;
    ld.global.cg.f32 %f10, [%rd22];
    add.u64 %rd23, %base, %rd21;
    ld.global.nc.f32 %f11, [%rd23];
    mul.f32 %f10, %f10, %f9;
    fma.rn.f32 %f10, %f10, %sc0, %f11;      // z_pre = g * scale[0] + base
{sigmoid('%f10', '%f12')}
    @!%p_paper add.f32 %f12, %f12, %eps_hc;
    mad.lo.u32 %r49, %r47, %n, %lane;
    mul.wide.u32 %rd24, %r49, 4;
    add.u64 %rd25, %hpre, %rd24;
    st.global.f32 [%rd25], %f12;
    add.u64 %rd22, %rd22, %rd26;
    ld.global.cg.f32 %f10, [%rd22];
    add.u64 %rd23, %rd23, %rd26;
    ld.global.nc.f32 %f11, [%rd23];
    mul.f32 %f10, %f10, %f9;
    fma.rn.f32 %f10, %f10, %sc1, %f11;      // z_post
{sigmoid('%f10', '%f12')}
    add.f32 %f12, %f12, %f12;
    add.u64 %rd25, %hpost, %rd24;
    st.global.f32 [%rd25], %f12;
    add.u64 %rd22, %rd22, %rd26;            // &P[2n + j]
    add.u64 %rd23, %rd23, %rd26;            // &base[2n + j]
    shl.b32 %r50, %lane, 2;
    add.u32 %r50, %r50, %r42;
    mov.u32 %r51, 0;
ZL:
    ld.global.cg.f32 %f10, [%rd22];
    ld.global.nc.f32 %f11, [%rd23];
    mul.f32 %f10, %f10, %f9;
    fma.rn.f32 %f10, %f10, %sc2, %f11;      // Z[i][j]
    st.shared.f32 [%r50], %f10;
    add.u64 %rd22, %rd22, %rd26;
    add.u64 %rd23, %rd23, %rd26;
    add.u32 %r50, %r50, 132;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra ZL;
SK_LOAD_DONE:
    bar.warp.sync -1;
    @%p_paper bra SK_PAPER;
    // V4 start: S = softmax_row(Z) + eps (lane i owns row i)
    @!%p11 bra SK_V4_START_DONE;
    mad.lo.u32 %r52, %lane, 132, %r42;
    mov.f32 %f25, 0fFF800000;
    mov.u32 %r50, %r52;
    mov.u32 %r51, 0;
SV1:
    ld.shared.f32 %f10, [%r50];
    max.f32 %f25, %f25, %f10;
    add.u32 %r50, %r50, 4;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra SV1;
    mov.f32 %f26, 0f00000000;
    mov.u32 %r50, %r52;
    mov.u32 %r51, 0;
SV2:
    ld.shared.f32 %f10, [%r50];
    sub.f32 %f10, %f10, %f25;
    mul.f32 %f10, %f10, 0f3FB8AA3B;
    ex2.approx.f32 %f10, %f10;
    st.shared.f32 [%r50], %f10;
    add.f32 %f26, %f26, %f10;
    add.u32 %r50, %r50, 4;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra SV2;
    mov.u32 %r50, %r52;
    mov.u32 %r51, 0;
SV3:
    ld.shared.f32 %f10, [%r50];
    div.rn.f32 %f10, %f10, %f26;
    add.f32 %f10, %f10, %eps_hc;
    st.shared.f32 [%r50], %f10;
    add.u32 %r50, %r50, 4;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra SV3;
SK_V4_START_DONE:
    bar.warp.sync -1;
    call sk_col, (%r42, %n, %eps_hc);
    mov.u32 %r53, 1;
SK_V4_LOOP:
    setp.ge.u32 %p15, %r53, %iters;
    @%p15 bra SK_DONE;
    call sk_row, (%r42, %n, %eps_hc);
    call sk_col, (%r42, %n, %eps_hc);
    add.u32 %r53, %r53, 1;
    bra SK_V4_LOOP;
SK_PAPER:
    // Paper start: S = exp(Z - max_col(Z)) (lane j owns column j)
    @!%p11 bra SK_P_START_DONE;
    shl.b32 %r52, %lane, 2;
    add.u32 %r52, %r52, %r42;
    mov.f32 %f25, 0fFF800000;
    mov.u32 %r50, %r52;
    mov.u32 %r51, 0;
SP1:
    ld.shared.f32 %f10, [%r50];
    max.f32 %f25, %f25, %f10;
    add.u32 %r50, %r50, 132;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra SP1;
    mov.u32 %r50, %r52;
    mov.u32 %r51, 0;
SP2:
    ld.shared.f32 %f10, [%r50];
    sub.f32 %f10, %f10, %f25;
    mul.f32 %f10, %f10, 0f3FB8AA3B;
    ex2.approx.f32 %f10, %f10;
    st.shared.f32 [%r50], %f10;
    add.u32 %r50, %r50, 132;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra SP2;
SK_P_START_DONE:
    bar.warp.sync -1;
    mov.u32 %r53, 0;
SK_P_LOOP:
    setp.ge.u32 %p15, %r53, %iters;
    @%p15 bra SK_DONE;
    call sk_col, (%r42, %n, %eps_hc);
    call sk_row, (%r42, %n, %eps_hc);
    add.u32 %r53, %r53, 1;
    bra SK_P_LOOP;
SK_DONE:
    @!%p11 bra SK_OUT_DONE;
    mul.lo.u32 %r54, %r47, %r45;
    add.u32 %r54, %r54, %lane;
    mul.wide.u32 %rd27, %r54, 4;
    add.u64 %rd27, %hres, %rd27;
    shl.b32 %r50, %lane, 2;
    add.u32 %r50, %r50, %r42;
    mov.u32 %r51, 0;
HL:
    ld.shared.f32 %f10, [%r50];
    st.global.f32 [%rd27], %f10;            // h_res[t][i][j]
    add.u64 %rd27, %rd27, %rd26;
    add.u32 %r50, %r50, 132;
    add.u32 %r51, %r51, 1;
    setp.lt.u32 %p14, %r51, %n;
    @%p14 bra HL;
SK_OUT_DONE:
    bar.warp.sync -1;
    add.u32 %r46, %r46, 8;
    bra COEF_LOOP;
{small.coef_small(sigmoid)}
COEF_DONE:
    @!%p_split bra COEF_SYNC_TILE;
    // ---- decode: coefficients are out; release them to the waiting CTAs
    fence.acq_rel.gpu;
    bar.sync 0;
    setp.ne.u32 %p16, %tx, 0;
    mov.u32 %r55, 1;
    add.u64 %rd28, %cnt, 12;
    @!%p16 st.release.gpu.global.u32 [%rd28], %r55;
    bra MIX;
COEF_SYNC_TILE:
    bar.sync 0;
    bra MIX;
WAIT:
    // ---- decode, not last: wait (bounded) for the coefficients, then help with the pre-mix.
    //      A CTA that times out just leaves: the last CTA claims whatever is left, so no
    //      schedule can deadlock. Split prefill (solo): leave at once.
    @%p_solo bra EXIT;
    setp.ge.u32 %p17, %gidx, %rows;
    @%p17 bra EXIT;
    setp.ne.u32 %p16, %tx, 0;
    @%p16 bra WAIT_SYNC;
    add.u64 %rd28, %cnt, 12;
    mov.u64 %rd29, %globaltimer;
SPIN:
    ld.acquire.gpu.global.u32 %r56, [%rd28];
    setp.ne.u32 %p18, %r56, 0;
    @%p18 bra SPIN_OK;
    mov.u64 %rd30, %globaltimer;
    sub.u64 %rd30, %rd30, %rd29;
    setp.gt.u64 %p18, %rd30, 200000;
    @%p18 bra SPIN_FAIL;
    nanosleep.u32 32;
    bra SPIN;
SPIN_OK:
    mov.u32 %r57, 1;
    st.shared.u32 [smem_flag+8], %r57;
    bra WAIT_SYNC;
SPIN_FAIL:
    mov.u32 %r57, 0;
    st.shared.u32 [smem_flag+8], %r57;
WAIT_SYNC:
    bar.sync 0;
    ld.shared.u32 %r57, [smem_flag+8];
    setp.eq.u32 %p18, %r57, 0;
    @%p18 bra EXIT;
    fence.acq_rel.gpu;
{mix.mix(bf, esz)}
    @!%p_gf bra MIX_NEXT;
    add.u32 %r60, %t0, %r59;                // the one token of this pass
    mul.lo.u32 %r65, %r60, %as;
    mul.wide.u32 %rd34, %r65, {esz};
    add.u64 %rd35, %a, %rd34;               // its a row
    // ---- F-pre-norm: CTA sum of a^2 (warp butterfly, then warps in order)
    shfl.sync.bfly.b32 %r68, %f14, 16, 31, -1;
    add.f32 %f14, %f14, %r68;
    shfl.sync.bfly.b32 %r68, %f14, 8, 31, -1;
    add.f32 %f14, %f14, %r68;
    shfl.sync.bfly.b32 %r68, %f14, 4, 31, -1;
    add.f32 %f14, %f14, %r68;
    shfl.sync.bfly.b32 %r68, %f14, 2, 31, -1;
    add.f32 %f14, %f14, %r68;
    shfl.sync.bfly.b32 %r68, %f14, 1, 31, -1;
    add.f32 %f14, %f14, %r68;
    setp.eq.u32 %p22, %lane, 0;
    mov.u32 %r68, smem_red;
    shl.b32 %r69, %warp, 2;
    add.u32 %r69, %r68, %r69;
    @%p22 st.shared.f32 [%r69], %f14;
    bar.sync 0;
    ld.shared.v4.f32 {{%f15, %f16, %f17, %f18}}, [%r68];
    ld.shared.v4.f32 {{%f19, %f20, %f21, %f22}}, [%r68+16];
    add.f32 %f23, %f15, %f16;
    add.f32 %f23, %f23, %f17;
    add.f32 %f23, %f23, %f18;
    add.f32 %f23, %f23, %f19;
    add.f32 %f23, %f23, %f20;
    add.f32 %f23, %f23, %f21;
    add.f32 %f23, %f23, %f22;
    cvt.rn.f32.u32 %f24, %C;
    div.rn.f32 %f23, %f23, %f24;
    add.f32 %f23, %f23, %eps_f;
    sqrt.rn.f32 %f23, %f23;
    rcp.rn.f32 %f23, %f23;                  // 1 / sqrt(mean(a^2) + eps_f)
    mul.lo.u32 %r65, %r60, %ys;
    mul.wide.u32 %rd34, %r65, {esz};
    add.u64 %rd39, %y, %rd34;
    mov.u32 %r67, %tx;
Y_LOOP:
    setp.ge.u32 %p21, %r67, %r66;
    @%p21 bra MIX_NEXT;
    mul.wide.u32 %rd37, %r67, 16;
{y_chunk(bf)}
    add.u32 %r67, %r67, 256;
    bra Y_LOOP;
MIX_NEXT:
    bar.sync 0;
    bra MIX_LOOP;
EXIT:
    @!%p_split bra RET;
    // ---- decode: the last CTA to leave resets the tile's counters for the next launch
    bar.sync 0;
    setp.ne.u32 %p16, %tx, 0;
    @%p16 bra RET;
    add.u64 %rd40, %cnt, 8;
    atom.acq_rel.gpu.global.add.u32 %r70, [%rd40], 1;
    sub.u32 %r71, %splits, 1;
    setp.ne.u32 %p23, %r70, %r71;
    @%p23 bra RET;
    mov.u32 %r72, 0;
    st.global.cg.v4.u32 [%cnt], {{%r72, %r72, %r72, %r72}};
RET:
    ret;"""
