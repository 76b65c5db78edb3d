# pre_gen: writes asm/ptx/sm90/pre.ptx (run: python3 asm/ptx/sm90/pre_gen/gen.py asm/ptx/sm90/pre.ptx).
# The kernel is written by hand here as PTX text; Python only expands the regular unrolled
# blocks (mma grids over m-tiles x n-tiles, register lists, the 16-register Sinkhorn) that PTX,
# having no macros, would otherwise spell out line by line. Modules: kloop (pipelined K loop),
# red (split-sum of the decode partials), small (n <= 4 coefficients), mix (pre-mix), tail
# (everything after the projection), funcs.ptx.in (shared memory and .func helpers).
import os
from . import kloop, mix, small, tail
from . import post as producer
HERE = os.path.dirname(os.path.abspath(__file__))

HEADER = open(os.path.join(HERE, 'header.txt')).read()

def regs(prefix, n):
    return [f"%{prefix}{i}" for i in range(n)]

ACC = regs('acc', 32)
SS = regs('ss', 4)
TREE = ACC + SS

def params():
    u64 = ['x','f','hpost_in','hres_in','xo','phi','scale','base','gk','gf','a','y','hpre','hpost','hres','inv','wsp','wss','wspart','wscnt']
    u32 = ['T','n','C','K','M','ldp','xs','fs','xos','as','ys','kslice','splits','iters','flags']
    f32 = ['eps_norm','eps_hc','eps_f']
    return u64, u32, f32

def entry(dt, post):
    bf = dt == 'bf16'
    esz = 2 if bf else 4
    V = 8 if bf else 4          # elements per 16-byte chunk in the pre-mix
    L = []
    e = L.append
    u64, u32, f32 = params()
    POSTCMP = "eq" if post else "ne"
    name = f"mhc_post_pre_sm90_{dt}" if post else f"mhc_pre_sm90_{dt}"
    e(f".visible .entry {name}(")
    e("    .param .align 8 .b8 p_args[232]")
    e(")")
    e(".maxntid 256, 1, 1")
    e("{")
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
    e(tail.sk_regs())
    e("    .reg .b64 %koff, %kof4, %xrow0, %xstep, %frow0, %xorow0, %hprow0, %hrrow0, %prow0, %pstep, %cnt;")
    off = 0
    for p in u64:
        nm = '%f_' if p == 'f' else f'%{p}'
        e(f"    ld.param.u64 {nm}, [p_args+{off}];")
        off += 8
    for p in u32:
        e(f"    ld.param.u32 %{p}, [p_args+{off}];")
        off += 4
    for p in f32:
        e(f"    ld.param.f32 %{p}, [p_args+{off}];")
        off += 4
    assert off == 232
    # PDL (programmatic dependent launch): wait for the stream's previous kernel before the first
    # global access, then let the next kernel be scheduled (no-ops in a plain launch).
    e("    griddepcontrol.wait;")
    e("    griddepcontrol.launch_dependents;")
    e("""
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
    shr.u32 %gsn, %flags, 16;
    and.b32 %gsn, %gsn, 255;
    max.u32 %gsn, %gsn, 1;
    div.u32 %ksp, %gidx, %gsn;
    mul.lo.u32 %r1, %ksp, %gsn;
    sub.u32 %gsl, %gidx, %r1;
    div.u32 %nks, %splits, %gsn;
    shl.b32 %t0, %tile, 5;                  // first token of this CTA's 32-token tile
    sub.u32 %rows, %T, %t0;
    min.u32 %rows, %rows, 32;               // tokens in this tile
    setp.gt.u32 %p_mt1, %rows, 16;          // second 16-row mma tile in use
    setp.gt.u32 %p_split, %splits, 1;       // decode mode: the reduction is split across the grid
    and.b32 %r0, %flags, 1;
    setp.ne.u32 %p_paper, %r0, 0;
    and.b32 %r0, %flags, 2;
    setp.ne.u32 %p_gk, %r0, 0;
    and.b32 %r0, %flags, 4;
    setp.ne.u32 %p_gf, %r0, 0;
    setp.%POSTCMP%.u32 %p_post, 0, 0;            // the entry decides (pre: never; post_pre: always; flag 8 is informative)
    and.b32 %r0, %flags, 16;
    setp.ne.u32 %p_solo, %r0, 0;            // split prefill: the last CTA finishes its tile alone
    and.pred %p_claim, %p_split, !%p_solo;  // decode: CTAs claim tokens for the pre-mix
    and.b32 %r0, %flags, 64;
    setp.ne.u32 %p_pb, %r0, 0;
    setp.le.u32 %p0, %n, 4;
    and.pred %p_pb, %p_pb, %p0;             // post_pre, n <= 4: batched producer (flag 64)
    and.pred %p_pb, %p_pb, %p_post;%PBF32%
    and.b32 %r0, %flags, 128;
    setp.ne.u32 %p_pf, %r0, 0;              // flag 128: prefetch x (L2) and phi (L1) PF_STEPS ahead
    and.b32 %r0, %flags, 256;               // flag 256: the fast K loop, where its conditions hold
    setp.ne.u32 %p_fast, %r0, 0;
    and.pred %p_fast, %p_fast, !%p_gk;
    and.pred %p_fast, %p_fast, !%p_post;
    and.b32 %r0, %C, 31;
    setp.eq.u32 %p0, %r0, 0;
    and.pred %p_fast, %p_fast, %p0;%FASTF32%
    setp.eq.u32 %p0, %n, 4;
    and.pred %p_fast, %p_fast, %p0;%FASTF32%
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
    and.b32 %r0, %flags, 1024;              // attribution only (Plan::pre_attribution): no K loop
    setp.ne.u32 %p0, %r0, 0;
    @%p0 mov.u32 %jend, %jbeg;
    shr.u32 %ngr, %ldp, 5;                  // logit groups of 32 (4 mma n-tiles)
    add.u32 %r0, %ngr, %gsn;
    sub.u32 %r0, %r0, 1;
    div.u32 %r0, %r0, %gsn;                 // groups per slice (the host makes no slice empty)
    mul.lo.u32 %mg0, %gsl, %r0;
    add.u32 %mgend, %mg0, %r0;
    min.u32 %mgend, %mgend, %ngr;           // this CTA's logit groups [mg0, mgend)""")
    # row slots
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
    if post:
        e("""    // post_pre entry: the producer K loop (x' = post(x, f) per chunk)
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
        setp.lt.u32 %pnj3, 3, %n;
    PB_STAGED:
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
        mul.wide.u32 %koff, %kk, %ESZ%;
        mul.wide.u32 %kof4, %kk, 4;""".replace('%ESZ%', str(esz)))
        # ---- producer
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
            e(f"    add.u64 %rd2, %xrow0, %koff;" + "".join("\n    add.u64 %rd2, %rd2, %xstep;" for _ in range(s)))
            if bf:
                e(f"    @%p1 ld.global.nc.v4.b32 {{%xa{4*s}, %xa{4*s+1}, %xa{4*s+2}, %xa{4*s+3}}}, [%rd2];")
            else:
                e(f"    @%p1 ld.global.nc.v4.f32 {{%xr{8*s}, %xr{8*s+1}, %xr{8*s+2}, %xr{8*s+3}}}, [%rd2];")
                e(f"    @%p1 ld.global.nc.v4.f32 {{%xr{8*s+4}, %xr{8*s+5}, %xr{8*s+6}, %xr{8*s+7}}}, [%rd2+16];")
        e("    bra PROD_DONE;")
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
            e(f"    add.u64 %rd3, %xorow0, %koff;")
            e(f"    mov.u64 %rd9, %xrow0;" + "".join("\n    add.u64 %rd9, %rd9, %xstep;" for _ in range(s)))
            if bf:
                outs = ", ".join(f"%xa{4*s+j}" for j in range(4))
                e(f"    call ({outs}), post_chunk_bf16, (%rd9, %frow0, %hprow0, %hrrow0, %rd3, %n, %C, %ii, %cc, %r5);")
            else:
                outs = ", ".join(f"%xr{8*s+j}" for j in range(8))
                e(f"    call ({outs}), post_chunk_f32, (%rd9, %frow0, %hprow0, %hrrow0, %rd3, %n, %C, %ii, %cc, %r5);")
            e(f"PROD_SKIP{s}:")
        if bf:
            e(producer.pb(bf))
        e("PROD_DONE:")
        # ---- sum of squares (first logit group only)
        e("    @!%p_mg0 bra SS_DONE;")
        for s in range(4):
            if bf:
                for j in range(4):
                    e(f"    shl.b32 %r10, %xa{4*s+j}, 16;")
                    e(f"    and.b32 %r11, %xa{4*s+j}, 0xffff0000;")
                    e(f"    fma.rn.f32 %ss{s}, %r10, %r10, %ss{s};")
                    e(f"    fma.rn.f32 %ss{s}, %r11, %r11, %ss{s};")
            else:
                for j in range(8):
                    e(f"    fma.rn.f32 %ss{s}, %xr{8*s+j}, %xr{8*s+j}, %ss{s};")
        e("SS_DONE:")
        # ---- phi, gamma_k, split, mma
        if bf:
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
                e(f"    add.u64 %rd5, %prow0, %kof4;" + "".join("\n    add.u64 %rd5, %rd5, %pstep;" for _ in range(nt)))
                e("    @%p3 ld.global.nc.v4.f32 {%pf0, %pf1, %pf2, %pf3}, [%rd5];")
                e("    @%p3 ld.global.nc.v4.f32 {%pf4, %pf5, %pf6, %pf7}, [%rd5+16];")
                for j in range(8):
                    e(f"    mul.f32 %pf{j}, %pf{j}, %gkv{j};")
                for u in range(4):
                    b = 4*nt + u
                    e(f"    cvt.rn.bf16x2.f32 %bh{b}, %pf{2*u+1}, %pf{2*u};")
                    e(f"    shl.b32 %r12, %bh{b}, 16;")
                    e(f"    and.b32 %r13, %bh{b}, 0xffff0000;")
                    e(f"    sub.f32 %f0, %pf{2*u}, %r12;")
                    e(f"    sub.f32 %f1, %pf{2*u+1}, %r13;")
                    e(f"    cvt.rn.bf16x2.f32 %bl{b}, %f1, %f0;")
            for mt in range(2):
                if mt == 1:
                    e("    @!%p_mt1 bra MMA_DONE;")
                for nt in range(4):
                    a0 = 4*mt*4  # unused
                    c = [ACC[mt*16 + nt*4 + j] for j in range(4)]
                    cs = "{" + ", ".join(c) + "}"
                    s0, s1 = 2*mt, 2*mt+1
                    A1 = f"{{%xa{4*s0}, %xa{4*s1}, %xa{4*s0+1}, %xa{4*s1+1}}}"
                    A2 = f"{{%xa{4*s0+2}, %xa{4*s1+2}, %xa{4*s0+3}, %xa{4*s1+3}}}"
                    for A, pair in ((A1, (0, 1)), (A2, (2, 3))):
                        for B in ('bh', 'bl'):
                            Bs = f"{{%{B}{4*nt+pair[0]}, %{B}{4*nt+pair[1]}}}"
                            e(f"    mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {cs}, {A}, {Bs}, {cs};")
            e("MMA_DONE:")
        else:
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
                    e(f"    add.u64 %rd5, %prow0, %kof4;" + "".join("\n    add.u64 %rd5, %rd5, %pstep;" for _ in range(nt)))
                    e(f"    @%p3 ld.global.nc.v4.f32 {{%pf0, %pf1, %pf2, %pf3}}, [%rd5+{16*h}];")
                    for j in range(4):
                        e(f"    mul.f32 %pf{j}, %pf{j}, %gkv{j};")
                        e(f"    cvt.rna.tf32.f32 %ph{4*nt+j}, %pf{j};")
                        e(f"    sub.f32 %pl{4*nt+j}, %pf{j}, %ph{4*nt+j};")
                for line in kloop.tf32_mma(f"MMA_DONE{h}"):
                    e(line)
        e(kloop.flush('P'))
        e("""    add.u32 %jb, %jb, 256;
        bra K_LOOP;""")

    else:
        if bf:
            e("    @%p_fast bra KF_START;")
        e(kloop.pipelined(bf))
        if bf:
            # (f32: the fast loop spills at the register cap, ptxas 12.9: f32 keeps the general loop)
            e(kloop.fast(bf))
    e("K_DONE:")
    e(kloop.tot_finish())
    e("""
    // ---- sum of squares: reduce over the 4 lanes of a group (same token row), fixed butterfly""")
    for s in range(4):
        e(f"    shfl.sync.bfly.b32 %r10, %ss{s}, 1, 31, -1;")
        e(f"    add.f32 %ss{s}, %ss{s}, %r10;")
        e(f"    shfl.sync.bfly.b32 %r10, %ss{s}, 2, 31, -1;")
        e(f"    add.f32 %ss{s}, %ss{s}, %r10;")
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
        e(f"    mad.lo.u32 %r29, %r28, %ldp, %r27;")
        e(f"    mul.wide.u32 %rd8, %r29, 4;")
        e(f"    add.u64 %rd8, %rd6, %rd8;")
        for nt in range(4):
            c0 = ACC[mt*16 + nt*4 + 2*half]
            c1 = ACC[mt*16 + nt*4 + 2*half + 1]
            e(f"    @%pr{s} st.global.v2.f32 [%rd8+{nt*32}], {{{c0}, {c1}}};")
        e(f"    and.pred %p6, %pr{s}, %p_q0;")
        e(f"    and.pred %p6, %p6, %p_mg0;")
        e(f"    mul.wide.u32 %rd9, %r28, 4;")
        e(f"    add.u64 %rd9, %rd7, %rd9;")
        e(f"    @%p6 st.global.f32 [%rd9], %ss{s};")
    e("""WR_DONE:
    add.u32 %mg, %mg, 1;
    setp.lt.u32 %p4, %mg, %mgend;
    @%p4 bra MG_LOOP;
""")
    e(tail.tail(dt))
    e("}")
    pbf32 = "" if bf else "\n    setp.ne.u32 %p_pb, 0, 0;                // f32: no batched producer (register cap)"
    fastf32 = "" if bf else "\n    setp.ne.u32 %p_fast, 0, 0;              // f32: no fast K loop"
    return "\n".join(L).replace("%POSTCMP%", POSTCMP).replace("%PBF32%", pbf32).replace("%FASTF32%", fastf32)

def generate(experiments):
    """pre.ptx (no experiments)."""
    funcs = open(os.path.join(HERE, 'funcs.ptx.in')).read()
    out = HEADER + funcs + "\n" + "\n\n".join(entry(dt, post) for post in (False, True) for dt in ('bf16', 'f32')) + "\n"
    return {"asm/ptx/sm90/pre.ptx": out}
