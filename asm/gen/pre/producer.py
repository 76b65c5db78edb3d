"""post_pre's K loop and its batched producer (bf16 only, flag 64, n <= 4): for the K step of
this lane (stream %ii, channels %cc..+7) and all 4 row slots, all loads are issued first (f
chunk, the n x chunks), then x'[t][i][c] = h_post[t][i] f[t][c] + sum_j H_j x[t][j][c] in f32
(mul, then fma in j order: the same operations as post_chunk_*), rounded once to the storage
dtype, stored to x' and handed to the mma / ss as %xa (bf16) or %xr (f32). h_post / h_res come
from the tile's rows staged in smem_hp at the start of the post K loop (BATCHED_STAGING). One
memory round trip per step instead of one per slot: the .func producer's round trip per slot
makes post_pre 4x slower than pre (docs/kernels/pre.md)."""

from . import kloop


def pb(bf):
    esz = 2 if bf else 4
    assert bf, 'f32: the batched producer does not fit the register cap (measured with ptxas: spills); the .func producer stays'
    groups = [[0, 1, 2, 3]]
    L = []
    e = L.append
    e("    bra PROD_DONE;")
    e("PROD_PB:                                // batched producer (n <= 4): every load of a slot group first, then the FMAs")
    e(f"    mul.wide.u32 %pbco, %cc, {esz};          // this lane's channel offset (bytes)")
    e("    mul.lo.u32 %pbh0, %ii, %n;")
    e("    selp.u32 %pbh0, %pbh0, %ii, %p_paper;")
    e("    add.u32 %pbh0, %pbh0, %n;")
    e("    shl.b32 %pbh0, %pbh0, 2;                // h_res of (j = 0, i) in a staged row (bytes)")
    for grp in groups:
        for k, sl in enumerate(grp):
            e(f"    and.pred %pbq{k}, %pr{sl}, %p_k;")
            if sl >= 2:
                e(f"    and.pred %pbq{k}, %pbq{k}, %p_mt1;")
            e(f"""    add.u32 %r6, %g, {8*sl};
    add.u32 %r6, %r6, %t0;
    mul.lo.u32 %r2, %r6, %fs;
    mul.wide.u32 %rd1, %r2, {esz};
    add.u64 %rd1, %f_, %rd1;
    add.u64 %rd1, %rd1, %pbco;              // f[t][c..]""")
            nf = 4 if bf else 8
            fb = k * nf
            ty = "b32" if bf else "f32"
            e(f"    @%pbq{k} ld.global.nc.v4.{ty} {{%pbF{fb}, %pbF{fb+1}, %pbF{fb+2}, %pbF{fb+3}}}, [%rd1];")
            if not bf:
                e(f"    @%pbq{k} ld.global.nc.v4.f32 {{%pbF{fb+4}, %pbF{fb+5}, %pbF{fb+6}, %pbF{fb+7}}}, [%rd1+16];")
            e("    add.u64 %rd2, %xrow0, %pbco;" + "".join("\n    add.u64 %rd2, %rd2, %xstep;" for _ in range(sl)))
            e(f"    mul.wide.u32 %rd3, %C, {esz};")
            for j in range(4):
                e(f"    and.pred %pbj, %pbq{k}, %pnj{j};")
                xb = (k * 4 + j) * (4 if bf else 8)
                e(f"    @%pbj ld.global.nc.v4.{ty} {{%pbX{xb}, %pbX{xb+1}, %pbX{xb+2}, %pbX{xb+3}}}, [%rd2];")
                if not bf:
                    e(f"    @%pbj ld.global.nc.v4.f32 {{%pbX{xb+4}, %pbX{xb+5}, %pbX{xb+6}, %pbX{xb+7}}}, [%rd2+16];")
                if j < 3:
                    e("    add.u64 %rd2, %rd2, %rd3;")
        for k, sl in enumerate(grp):
            e(f"    @!%pbq{k} bra PB_SKIP{sl};")
            e(f"""    add.u32 %r6, %g, {8*sl};
    mul.lo.u32 %pbr, %r6, %pbE;
    shl.b32 %pbr, %pbr, 2;
    mov.u32 %r7, smem_hp;
    add.u32 %pbr, %pbr, %r7;                // staged row of this slot's token
    shl.b32 %r7, %ii, 2;
    add.u32 %r7, %r7, %pbr;
    ld.shared.f32 %f8, [%r7];               // h_post[t][i]""")
            nf = 4 if bf else 8
            fb = k * nf
            for c in range(8):
                if bf:
                    w = f"%pbF{fb + c // 2}"
                    e(f"    shl.b32 %r8, {w}, 16;" if c % 2 == 0 else f"    and.b32 %r8, {w}, 0xffff0000;")
                    e(f"    mul.f32 %pbV{c}, %f8, %r8;")
                else:
                    e(f"    mul.f32 %pbV{c}, %f8, %pbF{fb + c};")
            e("    add.u32 %r7, %pbr, %pbh0;")
            for j in range(4):
                e(f"    @!%pnj{j} bra PB_FMA{sl};")
                e("    ld.shared.f32 %f9, [%r7];                // h_res term of stream j")
                xb = (k * 4 + j) * (4 if bf else 8)
                for c in range(8):
                    if bf:
                        w = f"%pbX{xb + c // 2}"
                        e(f"    shl.b32 %r8, {w}, 16;" if c % 2 == 0 else f"    and.b32 %r8, {w}, 0xffff0000;")
                        e(f"    fma.rn.f32 %pbV{c}, %f9, %r8, %pbV{c};")
                    else:
                        e(f"    fma.rn.f32 %pbV{c}, %f9, %pbX{xb + c}, %pbV{c};")
                if j < 3:
                    e("    add.u32 %r7, %r7, %pbhs;")
            e(f"PB_FMA{sl}:")
            e(f"""    add.u32 %r6, %g, {8*sl};
    add.u32 %r6, %r6, %t0;
    mul.lo.u32 %r2, %r6, %xos;
    mul.wide.u32 %rd1, %r2, {esz};
    add.u64 %rd1, %xo, %rd1;
    add.u64 %rd1, %rd1, %koff;              // x'[t][i][c..]""")
            if bf:
                for w in range(4):
                    e(f"    cvt.rn.bf16x2.f32 %xa{4*sl+w}, %pbV{2*w+1}, %pbV{2*w};")
                e(f"    st.global.v4.b32 [%rd1], {{%xa{4*sl}, %xa{4*sl+1}, %xa{4*sl+2}, %xa{4*sl+3}}};")
            else:
                for c in range(8):
                    e(f"    mov.f32 %xr{8*sl+c}, %pbV{c};")
                e("    st.global.v4.f32 [%rd1], {%pbV0, %pbV1, %pbV2, %pbV3};")
                e("    st.global.v4.f32 [%rd1+16], {%pbV4, %pbV5, %pbV6, %pbV7};")
            e(f"PB_SKIP{sl}:")
    return "\n".join(L)


# post_pre entry: the batched producer's staging of h_post / h_res rows (once per tile)
BATCHED_STAGING = """    // post_pre entry: the producer K loop (x' = post(x, f) per chunk)
        // ---- batched post producer: stage the tile's h_post / h_res rows in smem_hp (free until
        //      the pre-mix): row r = [h_post[t0+r][0..n), h_res[t0+r][0..n*n)], E = n + n*n floats
        @!%p_pb bra PB_STAGED;
        mul.lo.u32 %r2, %n, %n;
        add.u32 %pbE, %r2, %n;
        mul.lo.u32 %r4, %pbE, 32;
        mov.u32 %r5, %tx;
    PB_ST:
        setp.ge.u32 %p4, %r5, %r4;
        @%p4 bra PB_ST_DONE;
        div.u32 %r6, %r5, %pbE;                 // tile row
        mul.lo.u32 %r7, %r6, %pbE;
        sub.u32 %r7, %r5, %r7;                  // element of the row
        add.u32 %r8, %r6, %t0;                  // token
        setp.lt.u32 %p5, %r8, %T;
        setp.lt.u32 %p6, %r7, %n;
        mad.lo.u32 %r9, %r8, %n, %r7;
        mad.lo.u32 %r10, %r8, %r2, %r7;
        sub.u32 %r10, %r10, %n;
        mul.wide.u32 %rd1, %r9, 4;
        add.u64 %rd1, %hpost_in, %rd1;
        mul.wide.u32 %rd2, %r10, 4;
        add.u64 %rd2, %hres_in, %rd2;
        selp.b64 %rd1, %rd1, %rd2, %p6;
        mov.f32 %f2, 0f00000000;
        @%p5 ld.global.nc.f32 %f2, [%rd1];
        shl.b32 %r11, %r5, 2;
        mov.u32 %r12, smem_hp;
        add.u32 %r11, %r11, %r12;
        st.shared.f32 [%r11], %f2;
        add.u32 %r5, %r5, 256;
        bra PB_ST;
    PB_ST_DONE:
        bar.sync 0;
        // h_res walk of output stream i: V4 h_res[j][i] (start n + i, step n), Paper h_res[i][j] (n + i*n, 1)
        mov.u32 %pbhs, %n;
        @%p_paper mov.u32 %pbhs, 1;
        shl.b32 %pbhs, %pbhs, 2;
        setp.lt.u32 %pnj0, 0, %n;
        setp.lt.u32 %pnj1, 1, %n;
        setp.lt.u32 %pnj2, 2, %n;
        setp.lt.u32 %pnj3, 3, %n;"""


def step_head(esz):
    """K_LOOP's head: the step's 8-channel block of stream i, k = i C + c, its byte offsets."""
    return f"""    PB_STAGED:
        shl.b32 %r1, %warp, 5;
        add.u32 %jb, %jbeg, %r1;
    K_LOOP:
        setp.ge.u32 %p0, %jb, %jend;
        @%p0 bra K_DONE;
        shr.u32 %blk, %jb, 5;
        div.u32 %cbk, %blk, %n;
        mul.lo.u32 %r1, %cbk, %n;
        sub.u32 %ii, %blk, %r1;                 // stream i of this block
        shl.b32 %cc, %cbk, 5;
        add.u32 %cc, %cc, %q8;                  // this lane's 8 channels c .. c+7
        setp.lt.u32 %p_k, %cc, %C;
        mad.lo.u32 %kk, %ii, %C, %cc;           // k = i*C + c
        mul.wide.u32 %koff, %kk, {esz};
        mul.wide.u32 %kof4, %kk, 4;"""


def load_slots(bf):
    """Without post (p_post clear): the x chunk of each of the 4 row slots as stored (zero past
    the rows / K)."""
    L = []
    e = L.append
    if bf:
        for s in range(4):
            for j in range(4):
                e(f"    mov.b32 %xa{4*s+j}, 0;")
    else:
        for i in range(32):
            e(f"    mov.f32 %xr{i}, 0f00000000;")
    e("    @%p_post bra PROD_POST;")
    for s in range(4):
        if s == 2:
            e("    @!%p_mt1 bra PROD_DONE;")
        e(f"    and.pred %p1, %pr{s}, %p_k;")
        e("    add.u64 %rd2, %xrow0, %koff;" + "".join("\n    add.u64 %rd2, %rd2, %xstep;" for _ in range(s)))
        if bf:
            e(f"    @%p1 ld.global.nc.v4.b32 {{%xa{4*s}, %xa{4*s+1}, %xa{4*s+2}, %xa{4*s+3}}}, [%rd2];")
        else:
            e(f"    @%p1 ld.global.nc.v4.f32 {{%xr{8*s}, %xr{8*s+1}, %xr{8*s+2}, %xr{8*s+3}}}, [%rd2];")
            e(f"    @%p1 ld.global.nc.v4.f32 {{%xr{8*s+4}, %xr{8*s+5}, %xr{8*s+6}, %xr{8*s+7}}}, [%rd2+16];")
    e("    bra PROD_DONE;")
    return L


def post_slots(bf, esz):
    """post_pre: x' = post(x, f) of this chunk for each row slot (a .func call per slot, or the
    batched producer for bf16), stored to x' and kept for the mma."""
    L = []
    e = L.append
    e("PROD_POST:                              // post_pre: x' = post(x, f) for this chunk, stored, and fed to the mma")
    if bf:
        e("    @%p_pb bra PROD_PB;")
    e("    selp.u32 %r5, 1, 0, %p_paper;")
    for s in range(4):
        if s == 2:
            e("    @!%p_mt1 bra PROD_DONE;")
        e(f"    and.pred %p1, %pr{s}, %p_k;")
        e(f"    @!%p1 bra PROD_SKIP{s};")
        # post-side row pointers of this slot, formed here so they hold no registers elsewhere
        e(f"""    add.u32 %r6, %g, {8*s};
        add.u32 %r6, %r6, %t0;
        mul.lo.u32 %r2, %r6, %fs;
        mul.wide.u32 %rd1, %r2, {esz};
        add.u64 %frow0, %f_, %rd1;
        mul.lo.u32 %r2, %r6, %xos;
        mul.wide.u32 %rd1, %r2, {esz};
        add.u64 %xorow0, %xo, %rd1;
        mul.lo.u32 %r2, %r6, %n;
        mul.wide.u32 %rd1, %r2, 4;
        add.u64 %hprow0, %hpost_in, %rd1;
        mul.lo.u32 %r2, %r2, %n;
        mul.wide.u32 %rd1, %r2, 4;
        add.u64 %hrrow0, %hres_in, %rd1;""")
        e("    add.u64 %rd3, %xorow0, %koff;")
        e("    mov.u64 %rd9, %xrow0;" + "".join("\n    add.u64 %rd9, %rd9, %xstep;" for _ in range(s)))
        if bf:
            outs = ", ".join(f"%xa{4*s+j}" for j in range(4))
            e(f"    call ({outs}), post_chunk_bf16, (%rd9, %frow0, %hprow0, %hrrow0, %rd3, %n, %C, %ii, %cc, %r5);")
        else:
            outs = ", ".join(f"%xr{8*s+j}" for j in range(8))
            e(f"    call ({outs}), post_chunk_f32, (%rd9, %frow0, %hprow0, %hrrow0, %rd3, %n, %C, %ii, %cc, %r5);")
        e(f"PROD_SKIP{s}:")
    if bf:
        e(pb(bf))
    return L


def phi_bf16():
    """phi[m][k..k+7] of the 4 n-tiles times gamma_k, split into bf16 hi + lo, and the mma grid."""
    L = []
    e = L.append
    e("    mov.f32 %gkv0, 0f3F800000;")
    for j in range(1, 8):
        e(f"    mov.f32 %gkv{j}, 0f3F800000;")
    e("    and.pred %p2, %p_gk, %p_k;")
    e("    add.u64 %rd4, %gk, %kof4;")
    e("    @%p2 ld.global.nc.v4.f32 {%gkv0, %gkv1, %gkv2, %gkv3}, [%rd4];")
    e("    @%p2 ld.global.nc.v4.f32 {%gkv4, %gkv5, %gkv6, %gkv7}, [%rd4+16];")
    for nt in range(4):
        e(f"    // n-tile {nt}: phi[m][k..k+7] (times gamma_k) split into bf16 hi + lo")
        for j in range(8):
            e(f"    mov.f32 %pf{j}, 0f00000000;")
        e(f"    and.pred %p3, %pmv{nt}, %p_k;")
        e("    add.u64 %rd5, %prow0, %kof4;" + "".join("\n    add.u64 %rd5, %rd5, %pstep;" for _ in range(nt)))
        e("    @%p3 ld.global.nc.v4.f32 {%pf0, %pf1, %pf2, %pf3}, [%rd5];")
        e("    @%p3 ld.global.nc.v4.f32 {%pf4, %pf5, %pf6, %pf7}, [%rd5+16];")
        for j in range(8):
            e(f"    mul.f32 %pf{j}, %pf{j}, %gkv{j};")
        for u in range(4):
            e(kloop.split_phi(4*nt + u, f"%pf{2*u}", f"%pf{2*u+1}"))
    L += kloop.mma_grid("%xa", "MMA_DONE", skip_nt3=False)
    return L


def phi_tf32():
    """f32 storage: per half of the lane's 8 elements, x and phi (times gamma_k) split for 3xTF32
    (hi*hi + hi*lo + lo*hi) and the mma."""
    L = []
    e = L.append
    for h in range(2):
        e(f"    // ---- half {h}: lane elements {4*h}..{4*h+3}; 3xTF32 (hi*hi + hi*lo + lo*hi)")
        for s in range(4):
            for j in range(4):
                e(f"    cvt.rna.tf32.f32 %xh{4*s+j}, %xr{8*s+4*h+j};")
                e(f"    sub.f32 %xl{4*s+j}, %xr{8*s+4*h+j}, %xh{4*s+j};")
        e("    mov.f32 %gkv0, 0f3F800000;")
        for j in range(1, 4):
            e(f"    mov.f32 %gkv{j}, 0f3F800000;")
        e("    and.pred %p2, %p_gk, %p_k;")
        e("    add.u64 %rd4, %gk, %kof4;")
        e(f"    @%p2 ld.global.nc.v4.f32 {{%gkv0, %gkv1, %gkv2, %gkv3}}, [%rd4+{16*h}];")
        for nt in range(4):
            for j in range(4):
                e(f"    mov.f32 %pf{j}, 0f00000000;")
            e(f"    and.pred %p3, %pmv{nt}, %p_k;")
            e("    add.u64 %rd5, %prow0, %kof4;" + "".join("\n    add.u64 %rd5, %rd5, %pstep;" for _ in range(nt)))
            e(f"    @%p3 ld.global.nc.v4.f32 {{%pf0, %pf1, %pf2, %pf3}}, [%rd5+{16*h}];")
            for j in range(4):
                e(f"    mul.f32 %pf{j}, %pf{j}, %gkv{j};")
                e(f"    cvt.rna.tf32.f32 %ph{4*nt+j}, %pf{j};")
                e(f"    sub.f32 %pl{4*nt+j}, %pf{j}, %ph{4*nt+j};")
        for line in kloop.tf32_mma(f"MMA_DONE{h}"):
            e(line)
    return L


def k_loop(bf, esz):
    """The post_pre entry's K loop: per K step, x' = post(x, f) of this lane's chunk in each of
    the 4 row slots (the batched producer for bf16 n <= 4 under flag 64, else a .func call per
    slot), stored to x' and fed to the sum of squares and the mma with phi (gamma_k folded in)."""
    L = [BATCHED_STAGING, step_head(esz)]
    e = L.append
    L += load_slots(bf)
    L += post_slots(bf, esz)
    e("PROD_DONE:")
    # ---- sum of squares (first logit group only)
    L += kloop.sum_squares(bf, "", "SS_DONE")
    L += phi_bf16() if bf else phi_tf32()
    e(kloop.flush('P'))
    e("""    add.u32 %jb, %jb, 256;
        bra K_LOOP;""")
    return "\n".join(L)
