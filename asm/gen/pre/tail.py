"""pre.ptx after the projection: the decode split reduction (the last CTA sums the splits'
partials), the coefficients, the release / wait of the other CTAs, the pre-mix and F-pre-norm."""

from ..blocks import butterfly
from . import coefs, mix, red


def sum_splits(lbl):
    # %f3 = sum over the K splits s = 0..nks-1 of [%rd14 + s*%rd11], in s order, 8 loads in flight.
    return f"""    mov.f32 %f3, 0f00000000;
    mov.u32 %r39, 0;
{lbl}_8:
    add.u32 %r41, %r39, 8;
    setp.gt.u32 %p10, %r41, %nks;
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
    setp.ge.u32 %p10, %r39, %nks;
    @%p10 bra {lbl}_D;
    ld.global.cg.f32 %f4, [%rd14];
    add.f32 %f3, %f3, %f4;
    add.u64 %rd14, %rd14, %rd11;
    add.u32 %r39, %r39, 1;
    bra {lbl}_1;
{lbl}_D:"""

V4_TEMPS = red.V4_TEMPS

def sum_splits_v4(lbl):
    # %f3..%f6 = sum over the K splits s = 0..nks-1 of the quad at [%rd14 + s*%rd11], each lane
    # of the quad in s order (the bits of sum_splits), 8 quads in flight: one L2 round trip per element and
    # split batch would be ~950 per thread (n = 32, T = 64).
    L = [f"""    mov.f32 %f3, 0f00000000;
    mov.f32 %f4, 0f00000000;
    mov.f32 %f5, 0f00000000;
    mov.f32 %f6, 0f00000000;
    mov.u32 %r39, 0;
{lbl}_8:
    add.u32 %r41, %r39, 8;
    setp.gt.u32 %p10, %r41, %nks;
    @%p10 bra {lbl}_1;
    mov.u64 %rd16, %rd14;"""]
    for i, q in enumerate(V4_TEMPS):
        if i:
            L.append("    add.u64 %rd16, %rd16, %rd11;")
        L.append(f"    ld.global.cg.v4.f32 {{{', '.join(q)}}}, [%rd16];")
    L.append("    add.u64 %rd14, %rd16, %rd11;")
    for q in V4_TEMPS:
        for c in range(4):
            L.append(f"    add.f32 %f{3 + c}, %f{3 + c}, {q[c]};")
    L.append(f"""    mov.u32 %r39, %r41;
    bra {lbl}_8;
{lbl}_1:
    setp.ge.u32 %p10, %r39, %nks;
    @%p10 bra {lbl}_D;
{red.ADD_ONE_QUAD}
    add.u32 %r39, %r39, 1;
    bra {lbl}_1;
{lbl}_D:""")
    return "\n".join(L)

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

def arrival():
    """Decode: publish this CTA's partials and count the arrivals; all but the last CTA go to WAIT."""
    return """    // =========================== after the projection ===========================
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
    fence.acq_rel.gpu;"""


def split_sums():
    """The last CTA: every element of P and ss summed over the K splits in split order."""
    return f"""    // ---- last CTA: each element of P and ss summed over the splits in split order (deterministic)
    shl.b32 %r24, %ldp, 5;
    add.u32 %r24, %r24, 32;
    mul.lo.u32 %r33, %tile, %nks;
    mul.wide.u32 %rd10, %r33, %r24;
    shl.b64 %rd10, %rd10, 2;
    add.u64 %rd10, %wspart, %rd10;
    mul.wide.u32 %rd11, %r24, 4;
    mul.lo.u32 %r34, %rows, %ldp;
    mul.lo.u32 %r35, %t0, %ldp;
    mul.wide.u32 %rd12, %r35, 4;
    add.u64 %rd12, %wsp, %rd12;
{red.red_quads()}
    shl.b32 %r36, %tx, 2;                   // quads of P (rows x ldp, ldp % 32 == 0)
RED_P:
    setp.ge.u32 %p9, %r36, %r34;
    @%p9 bra RED_P_DONE;
    mul.wide.u32 %rd13, %r36, 4;
    add.u64 %rd14, %rd10, %rd13;
{sum_splits_v4('SUMP')}
    add.u64 %rd15, %rd12, %rd13;
    st.global.v4.f32 [%rd15], {{%f3, %f4, %f5, %f6}};
    add.u32 %r36, %r36, 1024;
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
    bar.sync 0;"""


def release():
    """Decode: the coefficients are out, released to the waiting CTAs (ready flag at cnt + 12)."""
    return """COEF_DONE:
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
    bra MIX;"""


def wait_for_coefficients():
    """Decode, not last: a bounded wait for the ready flag, then the pre-mix (or leave on timeout)."""
    return """WAIT:
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
    fence.acq_rel.gpu;"""


def f_pre_norm(bf, esz):
    """y = a gamma_f / sqrt(mean(a^2) + eps_f) of the pass's token (flag gamma_f)."""
    return f"""    @!%p_gf bra MIX_NEXT;
    add.u32 %r60, %t0, %r59;                // the one token of this pass
    mul.lo.u32 %r65, %r60, %as;
    mul.wide.u32 %rd34, %r65, {esz};
    add.u64 %rd35, %a, %rd34;               // its a row
    // ---- F-pre-norm: CTA sum of a^2 (warp butterfly, then warps in order)
{butterfly("%f14", "%r68", clamp="31", mask="-1")}
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
    bra MIX_LOOP;"""


def exit_reset():
    """Decode: the last CTA to leave resets the tile's counters for the next launch."""
    return """EXIT:
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
    st.global.cg.v4.u32 [%cnt], {%r72, %r72, %r72, %r72};
RET:
    ret;"""


def tail(dt):
    """Everything after the projection: the split reduction, coefficients, pre-mix, F-pre-norm."""
    bf = dt == 'bf16'
    esz = 2 if bf else 4
    return "\n".join([arrival(), split_sums(), coefs.wide(), coefs.small(), release(), wait_for_coefficients(),
                      mix.mix(bf, esz), f_pre_norm(bf, esz), exit_reset()])
