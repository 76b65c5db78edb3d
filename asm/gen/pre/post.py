# post_pre's batched producer (bf16 only, flag 64, n <= 4): for the K step of this lane (stream
# %ii, channels %cc..+7) and all 4 row slots, all loads are issued first (f chunk, the n x chunks), then
# x'[t][i][c] = h_post[t][i] f[t][c] + sum_j H_j x[t][j][c] in f32 (mul, then fma in j order:
# the same operations as post_chunk_*), rounded once to the storage dtype, stored to x' and
# handed to the mma / ss as %xa (bf16) or %xr (f32). h_post / h_res come from the tile's rows
# staged in smem_hp at the start of the post K loop (gen.py, PB_ST). One memory round trip per
# step instead of one per slot (the .func producer), which is what made post_pre 4x slower
# than pre (notes/cuda-pre.md).
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
