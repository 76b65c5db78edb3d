"""The coefficients of a finished tile (after the projection and, for decode, the split sums):
inv_rms, h_pre, h_post and the Sinkhorn h_res of every token, one warp per token for n >= 8
(the coeffs_shfl body) and one thread per token for n <= 4."""

from .. import coeffs, sinkhorn
from ..blocks import rcp_newton, sigmoid

SK_NS = (8, 16, 32)
# The coefficient body's outer registers are named sk_* here, so they do not meet the kernel's
# own (%hpre / %hpost are the kernel's base pointers; the body's are the token's rows).
SK = "sk_"

def sk_regs():
    return """    .reg .pred %sk_active, %sk_head, %sk_paper, %sk_bit1, %sk_bit2, %sk_bit4, %sk_bit8, %sk_bit16;
    .reg .f32 %sk_eps, %sk_pre_eps, %sk_s0, %sk_s1, %sk_s2, %sk_inv_rms;
    .reg .b64 %sk_BASE, %sk_basel, %sk_prow, %sk_prowl, %sk_hpre, %sk_hpost, %sk_hresl, %sk_off, %sk_a64;"""

def sk_bits():
    L = []
    for b in (1, 2, 4, 8, 16):
        L.append(f"    and.b32 %r45, %lane, {b};")
        L.append(f"    setp.ne.u32 %sk_bit{b}, %r45, 0;")
    return "\n".join(L)

def sk_dispatch():
    L = []
    for n in SK_NS:
        L.append(f"    setp.eq.u32 %p14, %n, {n};")
        L.append(f"    @%p14 bra SK_BODY_{n};")
    L.append("    bra COEF_NEXT;                          // (n > 4 is always 8, 16 or 32)")
    for n in SK_NS:
        L.append(coeffs.warp_body(n, done="COEF_NEXT", labels="SK_", outer=SK, pload="ld.global.cg.f32"))
    return "\n".join(L)



def wide():
    """n in {8, 16, 32}: warp w handles the tile's tokens w, w + 8, ..., the n x n matrix in the
    warp's registers (coeffs.warp_body, its outer registers named sk_*)."""
    return f"""COEF:
    bar.sync 0;                             // P / ss rows written by warp 0 (or the reduction)
    setp.le.u32 %p_small, %n, 4;
    @%p_small bra COEF_SMALL;
    // ---- coefficients, n in {{8, 16, 32}}: warp w handles the tile's tokens w, w+8, w+16, w+24,
    //      the n x n matrix in the warp's registers (the coeffs_shfl warp body: row / column sums
    //      by shuffles, one rcp.approx per line; a shared-memory walk with div.rn per element
    //      takes ~1.1 us per Sinkhorn iteration at n = 8, H100)
    cvt.rn.f32.u32 %f8, %K;
    setp.eq.u32 %p13, %lane, 0;
    setp.lt.u32 %sk_active, %lane, %n;
    setp.ne.u32 %sk_head, 0, 0;
    mov.pred %sk_paper, %p_paper;
    mov.f32 %sk_eps, %eps_hc;
    selp.f32 %sk_pre_eps, 0f00000000, %eps_hc, %p_paper;
    mov.f32 %sk_s0, %sc0;
    mov.f32 %sk_s1, %sc1;
    mov.f32 %sk_s2, %sc2;
    mov.u64 %sk_BASE, %base;
    mul.wide.u32 %sk_off, %lane, 4;
    add.u64 %sk_basel, %base, %sk_off;
{sk_bits()}
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
    rcp.rn.f32 %sk_inv_rms, %f9;            // inv_rms = 1 / sqrt(ss / K + eps_norm)
    add.u64 %rd19, %inv, %rd17;
    @%p13 st.global.f32 [%rd19], %sk_inv_rms;
    mul.lo.u32 %r48, %r47, %ldp;
    mul.wide.u32 %rd20, %r48, 4;
    add.u64 %sk_prow, %wsp, %rd20;          // P row of the token
    add.u64 %sk_prowl, %sk_prow, %sk_off;
    mul.lo.u32 %r49, %r47, %n;
    mul.wide.u32 %rd24, %r49, 4;
    add.u64 %sk_hpre, %hpre, %rd24;
    add.u64 %sk_hpost, %hpost, %rd24;
    mul.lo.u32 %r49, %r49, %n;
    mul.wide.u32 %rd24, %r49, 4;
    add.u64 %sk_hresl, %hres, %rd24;
    add.u64 %sk_hresl, %sk_hresl, %sk_off;
{sk_dispatch()}
COEF_NEXT:
    add.u32 %r46, %r46, 8;
    bra COEF_LOOP;"""


def small():
    """n <= 4: thread r of warp 0 computes token r's coefficients in registers: inv_rms (IEEE),
    h_pre / h_post (exact rcp), the Sinkhorn (sinkhorn.per_thread_padded, reciprocals
    rcp.approx with one Newton step: the IEEE rcp.rn / div.rn sequences cost ~7.5 us per 20
    iterations on one thread, docs/kernels/pre.md)."""
    L = []
    e = L.append
    e("""COEF_SMALL:
    // ---- n <= 4: thread r of warp 0 computes token r's coefficients entirely in registers
    setp.ge.u32 %p12, %tx, %rows;
    @%p12 bra COEF_DONE;
    add.u32 %r47, %t0, %tx;
    mul.wide.u32 %rd17, %r47, 4;
    add.u64 %rd18, %wss, %rd17;
    ld.global.cg.f32 %f9, [%rd18];
    cvt.rn.f32.u32 %f8, %K;
    div.rn.f32 %f9, %f9, %f8;
    add.f32 %f9, %f9, %eps_norm;
    sqrt.rn.f32 %f9, %f9;
    rcp.rn.f32 %f9, %f9;
    add.u64 %rd19, %inv, %rd17;
    st.global.f32 [%rd19], %f9;
    mul.lo.u32 %r48, %r47, %ldp;
    mul.wide.u32 %rd20, %r48, 4;
    add.u64 %rd20, %wsp, %rd20;             // P row of t
    mul.lo.u32 %r49, %r47, %n;
    mul.wide.u32 %rd24, %r49, 4;            // h_pre / h_post row offset
    mul.wide.u32 %rd26, %n, 4;""")
    for j in range(4):
        e(f"""    setp.lt.u32 %p14, {j}, %n;
    @!%p14 bra CS_HP{j};
    ld.global.cg.f32 %f10, [%rd20+{4*j}];
    ld.global.nc.f32 %f11, [%base+{4*j}];
    mul.f32 %f10, %f10, %f9;
    fma.rn.f32 %f10, %f10, %sc0, %f11;
{sigmoid("%f12", "%f10", ex2="ex2.approx.f32", rcp="rcp.rn.f32")}
    @!%p_paper add.f32 %f12, %f12, %eps_hc;
    add.u64 %rd25, %hpre, %rd24;
    st.global.f32 [%rd25+{4*j}], %f12;
    add.u64 %rd22, %rd20, %rd26;
    ld.global.cg.f32 %f10, [%rd22+{4*j}];
    add.u64 %rd23, %base, %rd26;
    ld.global.nc.f32 %f11, [%rd23+{4*j}];
    mul.f32 %f10, %f10, %f9;
    fma.rn.f32 %f10, %f10, %sc1, %f11;
{sigmoid("%f12", "%f10", ex2="ex2.approx.f32", rcp="rcp.rn.f32")}
    add.f32 %f12, %f12, %f12;
    add.u64 %rd25, %hpost, %rd24;
    st.global.f32 [%rd25+{4*j}], %f12;
CS_HP{j}:""")
    # Z
    e("""    shl.b64 %rd21, %rd26, 1;                 // 2n floats
    add.u64 %rd22, %rd20, %rd21;            // &P[2n]
    add.u64 %rd23, %base, %rd21;            // &base[2n]""")
    for i in range(4):
        for j in range(4):
            k = 4*i + j
            e(f"""    setp.lt.u32 %p14, {i}, %n;
    setp.lt.u32 %p15, {j}, %n;
    and.pred %pv{k}, %p14, %p15;
    mov.f32 %sk{k}, 0fFF800000;
    mad.lo.u32 %r50, %n, {i}, {j};
    mul.wide.u32 %rd27, %r50, 4;
    add.u64 %rd28, %rd22, %rd27;
    add.u64 %rd29, %rd23, %rd27;
    @%pv{k} ld.global.cg.f32 %f10, [%rd28];
    @%pv{k} ld.global.nc.f32 %f11, [%rd29];
    @%pv{k} mul.f32 %f10, %f10, %f9;
    @%pv{k} fma.rn.f32 %sk{k}, %f10, %sc2, %f11;""")
    e("    @%p_paper bra CS_PAPER;")
    sinkhorn.per_thread_padded(e, lambda dst, src: rcp_newton(dst, src, "%f31", approx="rcp.approx.f32", form="fma"))
    e("""CS_OUT:
    mul.lo.u32 %r54, %r47, %n;
    mul.lo.u32 %r54, %r54, %n;
    mul.wide.u32 %rd27, %r54, 4;
    add.u64 %rd27, %hres, %rd27;            // h_res row of t""")
    for i in range(4):
        for j in range(4):
            k = 4*i + j
            e(f"""    mad.lo.u32 %r50, %n, {i}, {j};
    mul.wide.u32 %rd28, %r50, 4;
    add.u64 %rd28, %rd27, %rd28;
    @%pv{k} st.global.f32 [%rd28], %sk{k};""")
    e("    bra COEF_DONE;")
    return "\n".join(L)
