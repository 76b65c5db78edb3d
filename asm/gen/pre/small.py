# Coefficients for n <= 4: one thread per token, the n x n Sinkhorn matrix in 16 registers
# (row-major sk[4*i + j], padded entries held at 0). Reciprocals on the Sinkhorn's critical path
# are rcp.approx refined by one Newton step (about 1 ulp), not the IEEE rcp.rn / div.rn
# sequences: those cost ~7.5 us per 20 iterations on one thread (measured, notes/cuda-pre.md).

def rcp_nr(dst, src):
    # dst = 1/src (dst != src): MUFU approximation, then r + r*(1 - src*r)
    return f"""    rcp.approx.f32 {dst}, {src};
    fma.rn.f32 %f31, {src}, {dst}, 0fBF800000;
    neg.f32 %f31, %f31;
    fma.rn.f32 {dst}, {dst}, %f31, {dst};"""
def coef_small(sigmoid):
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
{sigmoid('%f10', '%f12')}
    @!%p_paper add.f32 %f12, %f12, %eps_hc;
    add.u64 %rd25, %hpre, %rd24;
    st.global.f32 [%rd25+{4*j}], %f12;
    add.u64 %rd22, %rd20, %rd26;
    ld.global.cg.f32 %f10, [%rd22+{4*j}];
    add.u64 %rd23, %base, %rd26;
    ld.global.nc.f32 %f11, [%rd23+{4*j}];
    mul.f32 %f10, %f10, %f9;
    fma.rn.f32 %f10, %f10, %sc1, %f11;
{sigmoid('%f10', '%f12')}
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
    # V4 start: row softmax + eps
    for i in range(4):
        r = [f"%sk{4*i+j}" for j in range(4)]
        e(f"    max.f32 %f25, {r[0]}, {r[1]};")
        e(f"    max.f32 %f26, {r[2]}, {r[3]};")
        e(f"    max.f32 %f25, %f25, %f26;")
        for j in range(4):
            e(f"    sub.f32 %f10, {r[j]}, %f25;")
            e(f"    mul.f32 %f10, %f10, 0f3FB8AA3B;")
            e(f"    ex2.approx.f32 %f10, %f10;")
            e(f"    selp.f32 {r[j]}, %f10, 0f00000000, %pv{4*i+j};")
        e(f"    add.f32 %f26, {r[0]}, {r[1]};")
        e(f"    add.f32 %f26, %f26, {r[2]};")
        e(f"    add.f32 %f26, %f26, {r[3]};")
        e(rcp_nr("%f30", "%f26"))
        for j in range(4):
            e(f"    mul.f32 %f10, {r[j]}, %f30;")
            e(f"    add.f32 %f10, %f10, %eps_hc;")
            e(f"    selp.f32 {r[j]}, %f10, 0f00000000, %pv{4*i+j};")
    e(col_step())
    e("""    mov.u32 %r53, 1;
CS_V4_LOOP:
    setp.ge.u32 %p15, %r53, %iters;
    @%p15 bra CS_OUT;""")
    e(row_step())
    e(col_step())
    e("""    add.u32 %r53, %r53, 1;
    bra CS_V4_LOOP;
CS_PAPER:""")
    for j in range(4):
        c = [f"%sk{4*i+j}" for i in range(4)]
        e(f"    max.f32 %f25, {c[0]}, {c[1]};")
        e(f"    max.f32 %f26, {c[2]}, {c[3]};")
        e(f"    max.f32 %f25, %f25, %f26;")
        for i in range(4):
            e(f"    sub.f32 %f10, {c[i]}, %f25;")
            e(f"    mul.f32 %f10, %f10, 0f3FB8AA3B;")
            e(f"    ex2.approx.f32 %f10, %f10;")
            e(f"    selp.f32 {c[i]}, %f10, 0f00000000, %pv{4*i+j};")
    e("""    mov.u32 %r53, 0;
CS_P_LOOP:
    setp.ge.u32 %p15, %r53, %iters;
    @%p15 bra CS_OUT;""")
    e(col_step())
    e(row_step())
    e("""    add.u32 %r53, %r53, 1;
    bra CS_P_LOOP;
CS_OUT:
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

def col_step():
    # S[:, j] /= (sum_i S[i][j] + eps), sums in i order; padded entries are 0 and stay 0.
    L = []
    for j in range(4):
        c = [f"%sk{4*i+j}" for i in range(4)]
        L.append(f"    add.f32 %f10, {c[0]}, {c[1]};")
        L.append(f"    add.f32 %f10, %f10, {c[2]};")
        L.append(f"    add.f32 %f10, %f10, {c[3]};")
        L.append(f"    add.f32 %f10, %f10, %eps_hc;")
        L.append(rcp_nr(f"%f{27+j}", "%f10"))
    for j in range(4):
        for i in range(4):
            L.append(f"    mul.f32 %sk{4*i+j}, %sk{4*i+j}, %f{27+j};")
    return "\n".join(L)

def row_step():
    L = []
    for i in range(4):
        r = [f"%sk{4*i+j}" for j in range(4)]
        L.append(f"    add.f32 %f10, {r[0]}, {r[1]};")
        L.append(f"    add.f32 %f10, %f10, {r[2]};")
        L.append(f"    add.f32 %f10, %f10, {r[3]};")
        L.append(f"    add.f32 %f10, %f10, %eps_hc;")
        L.append(rcp_nr(f"%f{27+i}", "%f10"))
    for i in range(4):
        for j in range(4):
            L.append(f"    mul.f32 %sk{4*i+j}, %sk{4*i+j}, %f{27+i};")
    return "\n".join(L)
