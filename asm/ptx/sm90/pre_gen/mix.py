# Pre-mix a_t = sum_i h_pre[t,i] x_t[i] over a token range [r0, r1) of the tile: (token, chunk)
# items spread over the CTA, two items per thread per pass, the n stream loads of both items
# issued before their FMAs (groups of 4 streams), so 8 16-byte loads are in flight per thread.
def mix(bf, esz):
    V = 8 if bf else 4
    L = []
    e = L.append
    e(f"""MIX:
    mov.u32 %r58, 0;
    mul.wide.u32 %rd36, %C, {esz};          // bytes between streams
    shr.u32 %r66, %C, {3 if bf else 2};                 // 16-byte chunks per row of C
    mov.u64 %rd33, %x;
    mov.u32 %r64, %xs;
    @%p_post mov.u64 %rd33, %xo;            // post_pre mixes x'
    @%p_post mov.u32 %r64, %xos;
MIX_LOOP:
    @!%p_claim bra MIX_TILE_TOK;
    setp.ne.u32 %p16, %tx, 0;
    add.u64 %rd31, %cnt, 4;
    @!%p16 atom.relaxed.gpu.global.add.u32 %r59, [%rd31], 1;
    @!%p16 st.shared.u32 [smem_flag+4], %r59;
    bar.sync 0;
    ld.shared.u32 %r59, [smem_flag+4];
    add.u32 %r57, %r59, 1;                  // claimed token range [r59, r57)
    bra MIX_HAVE_TOK;
MIX_TILE_TOK:
    // prefill: all tokens at once, or one at a time with the F-pre-norm (per-token sums)
    mov.u32 %r59, %r58;
    add.u32 %r57, %r58, 1;
    @!%p_gf mov.u32 %r57, %rows;
    mov.u32 %r58, %r57;                     // without gf the next pass starts at rows: done
MIX_HAVE_TOK:
    setp.ge.u32 %p19, %r59, %rows;
    @%p19 bra EXIT;
    // h_pre of rows [r59, r57) -> smem_hp[r*32 + i]
    sub.u32 %r56, %r57, %r59;
    shl.b32 %r55, %r56, 5;
    mov.u32 %r61, %tx;
HP_LOOP:
    setp.ge.u32 %p20, %r61, %r55;
    @%p20 bra HP_DONE;
    shr.u32 %r62, %r61, 5;
    add.u32 %r62, %r62, %r59;               // tile row
    and.b32 %r63, %r61, 31;                 // stream
    setp.lt.u32 %p21, %r63, %n;
    add.u32 %r65, %t0, %r62;
    mad.lo.u32 %r65, %r65, %n, %r63;
    mul.wide.u32 %rd32, %r65, 4;
    add.u64 %rd32, %hpre, %rd32;
    @%p21 ld.global.cg.f32 %f13, [%rd32];
    mad.lo.u32 %r65, %r62, 32, %r63;
    shl.b32 %r65, %r65, 2;
    mov.u32 %r60, smem_hp;
    add.u32 %r65, %r65, %r60;
    @%p21 st.shared.f32 [%r65], %f13;
    add.u32 %r61, %r61, 256;
    bra HP_LOOP;
HP_DONE:
    bar.sync 0;
    mul.lo.u32 %r54, %r56, %r66;            // items = rows in range x chunks
    mov.f32 %f14, 0f00000000;               // sum of a^2 (F-pre-norm: one token in range)
    mov.u32 %r67, %tx;
IT_LOOP:
    setp.ge.u32 %p21, %r67, %r54;
    @%p21 bra CH_DONE;
    add.u32 %r68, %r67, 256;
    setp.lt.u32 %p22, %r68, %r54;           // second item valid
    selp.u32 %r68, %r68, %r67, %p22;        // else alias the first: every address stays in range""")
    # per item: row, chunk, src pointer, a pointer, hp shared address
    for X, itr, rsrc, ra, rhp in (("A", "%r67", "%rd45", "%rd46", "%r70"), ("B", "%r68", "%rd47", "%rd48", "%r71")):
        e(f"""    div.u32 %r72, {itr}, %r66;
    mul.lo.u32 %r73, %r72, %r66;
    sub.u32 %r73, {itr}, %r73;              // chunk
    add.u32 %r72, %r72, %r59;               // tile row
    mad.lo.u32 {rhp}, %r72, 32, 0;
    shl.b32 {rhp}, {rhp}, 2;
    mov.u32 %r74, smem_hp;
    add.u32 {rhp}, {rhp}, %r74;
    add.u32 %r72, %r72, %t0;                // token
    mul.lo.u32 %r74, %r72, %r64;
    mul.wide.u32 {rsrc}, %r74, {esz};
    add.u64 {rsrc}, {rsrc}, %rd33;
    mul.wide.u32 %rd49, %r73, 16;
    add.u64 {rsrc}, {rsrc}, %rd49;
    mul.lo.u32 %r74, %r72, %as;
    mul.wide.u32 {ra}, %r74, {esz};
    add.u64 {ra}, {ra}, %a;
    add.u64 {ra}, {ra}, %rd49;""")
    for X in "AB":
        for j in range(V):
            e(f"    mov.f32 %ma{X}{j}, 0f00000000;")
    e("""    mov.u32 %r75, 0;                        // first stream of the group
MIX_G:""")
    for u in range(4):
        e(f"    add.u32 %r76, %r75, {u};")
        e(f"    setp.lt.u32 %pg{u}, %r76, %n;")
        e(f"    mul.wide.u32 %rd50, %r76, %C;")
        e(f"    shl.b64 %rd50, %rd50, {1 if bf else 2};")
        e(f"    add.u64 %rd51, %rd45, %rd50;")
        e(f"    add.u64 %rd52, %rd47, %rd50;")
        e(f"    and.pred %p23, %pg{u}, %p22;")
        ty = "b32" if bf else "f32"
        e(f"    @%pg{u} ld.global.cg.v4.{ty} {{%mxA{4*u}, %mxA{4*u+1}, %mxA{4*u+2}, %mxA{4*u+3}}}, [%rd51];")
        e(f"    @%p23 ld.global.cg.v4.{ty} {{%mxB{4*u}, %mxB{4*u+1}, %mxB{4*u+2}, %mxB{4*u+3}}}, [%rd52];")
    for u in range(4):
        e(f"    @!%pg{u} bra MIX_G_END;")
        for X, rhp in (("A", "%r70"), ("B", "%r71")):
            e(f"    add.u32 %r77, %r75, {u};")
            e(f"    shl.b32 %r77, %r77, 2;")
            e(f"    add.u32 %r77, %r77, {rhp};")
            e(f"    ld.shared.f32 %f48, [%r77];")
            for w in range(4):
                src = f"%mx{X}{4*u+w}"
                if bf:
                    e(f"    shl.b32 %r78, {src}, 16;")
                    e(f"    fma.rn.f32 %ma{X}{2*w}, %f48, %r78, %ma{X}{2*w};")
                    e(f"    and.b32 %r78, {src}, 0xffff0000;")
                    e(f"    fma.rn.f32 %ma{X}{2*w+1}, %f48, %r78, %ma{X}{2*w+1};")
                else:
                    e(f"    fma.rn.f32 %ma{X}{w}, %f48, {src}, %ma{X}{w};")
    e("""    add.u32 %r75, %r75, 4;
    setp.lt.u32 %p24, %r75, %n;
    @%p24 bra MIX_G;
MIX_G_END:""")
    for X, ra, pv in (("A", "%rd46", None), ("B", "%rd48", "%p22")):
        pred = "" if X == "A" else "@%p22 "
        if bf:
            for w in range(4):
                e(f"    cvt.rn.bf16x2.f32 %r{79-w}, %ma{X}{2*w+1}, %ma{X}{2*w};")
            e(f"    {pred}st.global.v4.b32 [{ra}], {{%r79, %r78, %r77, %r76}};")
        else:
            e(f"    {pred}st.global.v4.f32 [{ra}], {{%ma{X}0, %ma{X}1, %ma{X}2, %ma{X}3}};")
    e("    @!%p_gf bra MIX_SQ_DONE;")
    for X in "AB":
        for j in range(V):
            pred = "" if X == "A" else "@%p22 "
            e(f"    {pred}fma.rn.f32 %f14, %ma{X}{j}, %ma{X}{j}, %f14;")
    e("""MIX_SQ_DONE:
    add.u32 %r67, %r67, 512;
    bra IT_LOOP;
CH_DONE:""")
    out = "\n".join(L)
    out = out.replace("    add.u64 %rd51, %rd51, 1*0;\n", "").replace("    add.u64 %rd51, %rd51, 2*0;\n", "").replace("    add.u64 %rd51, %rd51, 3*0;\n", "")
    return out

def mix_regs(bf):
    V = 8 if bf else 4
    t = ".b32" if bf else ".f32"
    return f"""    .reg .f32 %maA<{V}>, %maB<{V}>;
    .reg {t} %mxA<16>, %mxB<16>;
    .reg .pred %pg<4>;"""
