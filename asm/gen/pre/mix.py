"""Pre-mix a_t = sum_i h_pre[t,i] x_t[i] over a token range [r0, r1) of the tile: (token, chunk)
items spread over the CTA, NI items per thread per pass, the n stream loads of all items issued
before their FMAs (groups of 4 streams), so 4*NI 16-byte loads are in flight per thread (NI = 4:
64 KB per CTA; 2 items, 32 KB, are latency-bound: docs/kernels/pre.md)."""

from .constants import FLAG_DBG_NO_MIX

NI = 4
IT = "ABCD"


def claim_rows(bf, esz):
    """The token range of this pass (claimed one at a time in decode, the whole tile or one token
    with the F-pre-norm in prefill), its h_pre rows staged in smem_hp; IT_LOOP's head."""
    return f"""MIX:
    and.b32 %r58, %flags, {FLAG_DBG_NO_MIX};              // attribution only (Plan::pre_attribution): no pre-mix
    setp.ne.u32 %p19, %r58, 0;
    @%p19 bra EXIT;
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
    @%p21 bra CH_DONE;"""


def item_addresses(esz):
    """Item k = r67 + 256 k (an invalid item aliases the first: every address stays in range): its
    h_pre row in smem_hp, its x source and its a destination."""
    L = []
    e = L.append
    for k in range(1, NI):
        e(f"""    add.u32 %r68, %r67, {256 * k};
    setp.lt.u32 %piv{k}, %r68, %r54;
    selp.u32 %mit{k}, %r68, %r67, %piv{k};""")
    e("    mov.u32 %mit0, %r67;")
    for k in range(NI):
        e(f"""    div.u32 %r72, %mit{k}, %r66;
    mul.lo.u32 %r73, %r72, %r66;
    sub.u32 %r73, %mit{k}, %r73;              // chunk
    add.u32 %r72, %r72, %r59;               // tile row
    shl.b32 %mhp{k}, %r72, 7;
    mov.u32 %r74, smem_hp;
    add.u32 %mhp{k}, %mhp{k}, %r74;
    add.u32 %r72, %r72, %t0;                // token
    mul.lo.u32 %r74, %r72, %r64;
    mul.wide.u32 %msrc{k}, %r74, {esz};
    add.u64 %msrc{k}, %msrc{k}, %rd33;
    mul.wide.u32 %rd49, %r73, 16;
    add.u64 %msrc{k}, %msrc{k}, %rd49;
    mul.lo.u32 %r74, %r72, %as;
    mul.wide.u32 %mdst{k}, %r74, {esz};
    add.u64 %mdst{k}, %mdst{k}, %a;
    add.u64 %mdst{k}, %mdst{k}, %rd49;""")
    return L


def stream_groups(bf):
    """a of every item over the streams, 4 at a time: the 4 x NI loads first, then the FMAs."""
    V = 8 if bf else 4
    L = []
    e = L.append
    for X in IT[:NI]:
        for j in range(V):
            e(f"    mov.f32 %ma{X}{j}, 0f00000000;")
    e("""    mov.u32 %r75, 0;                        // first stream of the group
MIX_G:""")
    ty = "b32" if bf else "f32"
    for u in range(4):
        e(f"    add.u32 %r76, %r75, {u};")
        e(f"    setp.lt.u32 %pg{u}, %r76, %n;")
        e("    mul.wide.u32 %rd50, %r76, %C;")
        e(f"    shl.b64 %rd50, %rd50, {1 if bf else 2};")
        for k in range(NI):
            X = IT[k]
            e(f"    add.u64 %rd51, %msrc{k}, %rd50;")
            if k == 0:
                e(f"    @%pg{u} ld.global.cg.v4.{ty} {{%mx{X}{4*u}, %mx{X}{4*u+1}, %mx{X}{4*u+2}, %mx{X}{4*u+3}}}, [%rd51];")
            else:
                e(f"    and.pred %p23, %pg{u}, %piv{k};")
                e(f"    @%p23 ld.global.cg.v4.{ty} {{%mx{X}{4*u}, %mx{X}{4*u+1}, %mx{X}{4*u+2}, %mx{X}{4*u+3}}}, [%rd51];")
    for u in range(4):
        e(f"    @!%pg{u} bra MIX_G_END;")
        for k in range(NI):
            X = IT[k]
            e(f"    add.u32 %r77, %r75, {u};")
            e("    shl.b32 %r77, %r77, 2;")
            e(f"    add.u32 %r77, %r77, %mhp{k};")
            e("    ld.shared.f32 %f48, [%r77];")
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
    return L


def store_items(bf):
    """The items' a chunks stored, and their squares summed for the F-pre-norm."""
    V = 8 if bf else 4
    L = []
    e = L.append
    for k in range(NI):
        X = IT[k]
        pred = "" if k == 0 else f"@%piv{k} "
        if bf:
            for w in range(4):
                e(f"    cvt.rn.bf16x2.f32 %r{79-w}, %ma{X}{2*w+1}, %ma{X}{2*w};")
            e(f"    {pred}st.global.v4.b32 [%mdst{k}], {{%r79, %r78, %r77, %r76}};")
        else:
            e(f"    {pred}st.global.v4.f32 [%mdst{k}], {{%ma{X}0, %ma{X}1, %ma{X}2, %ma{X}3}};")
    e("    @!%p_gf bra MIX_SQ_DONE;")
    for k in range(NI):
        X = IT[k]
        for j in range(V):
            pred = "" if k == 0 else f"@%piv{k} "
            e(f"    {pred}fma.rn.f32 %f14, %ma{X}{j}, %ma{X}{j}, %f14;")
    e(f"""MIX_SQ_DONE:
    add.u32 %r67, %r67, {256 * NI};
    bra IT_LOOP;
CH_DONE:""")
    return L


def mix(bf, esz):
    return "\n".join([claim_rows(bf, esz)] + item_addresses(esz) + stream_groups(bf) + store_items(bf))


def mix_regs(bf):
    V = 8 if bf else 4
    t = ".b32" if bf else ".f32"
    L = []
    for X in IT[:NI]:
        L.append(f"    .reg .f32 %ma{X}<{V}>;")
        L.append(f"    .reg {t} %mx{X}<16>;")
    L.append(f"    .reg .pred %pg<4>, %piv<{NI}>;")
    L.append(f"    .reg .b32 %mit<{NI}>, %mhp<{NI}>;")
    L.append(f"    .reg .b64 %msrc<{NI}>, %mdst<{NI}>;")
    return "\n".join(L)
