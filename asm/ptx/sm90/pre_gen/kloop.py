# The software-pipelined K loop of the pre (non-post) path: the loads of step j+1 (x rows, phi
# rows, gamma_k) are issued into the other register set before the mma work of step j.
ACC = [f"%acc{i}" for i in range(32)]

def addr(esz, src="%jn"):
    # j-space position (src) -> %ii (stream), %cc (channel), %p_k, %koff (bytes, x), %kof4 (bytes, f32)
    return f"""    shr.u32 %blk, {src}, 5;
    div.u32 %cbk, %blk, %n;
    mul.lo.u32 %r1, %cbk, %n;
    sub.u32 %ii, %blk, %r1;
    shl.b32 %cc, %cbk, 5;
    add.u32 %cc, %cc, %q8;
    setp.lt.u32 %p_k, %cc, %C;
    mad.lo.u32 %kk, %ii, %C, %cc;
    mul.wide.u32 %koff, %kk, {esz};
    mul.wide.u32 %kof4, %kk, 4;"""

def load_set(bf, S):
    # gamma_k of one step into register set S (bf16; one step ahead; only with the gamma_k
    # flag: the sets hold 1.0 otherwise and the multiply is skipped). x and phi go through the
    # cp.async ring (ring_issue).
    L = []
    e = L.append
    for j in range(8):
        e(f"    mov.f32 %gk{S}{j}, 0f3F800000;")
    e("    and.pred %p2, %p_gk, %p_k;")
    e("    add.u64 %rd4, %gk, %kof4;")
    e(f"    @%p2 ld.global.nc.v4.f32 {{%gk{S}0, %gk{S}1, %gk{S}2, %gk{S}3}}, [%rd4];")
    e(f"    @%p2 ld.global.nc.v4.f32 {{%gk{S}4, %gk{S}5, %gk{S}6, %gk{S}7}}, [%rd4+16];")
    return "\n".join(L)

# The K loop's ring (cp.async, dynamic shared memory smem_big): RING_D stages per warp; a stage
# holds one K step of the warp's x (4 row slots x 16 B bf16 / 32 B f32 per lane) and phi (4
# n-tiles x 32 B per lane), unit u at byte u*512 + lane*16, so the ld.shared.v4 of a unit by
# the 32 lanes is one conflict-free 512-byte row. Each lane reads back only what it copied
# itself (no barrier; cp.async.wait_group). The region is reused after the K loop (tree,
# Sinkhorn matrices) once every warp has waited for its copies and the CTA has synchronised.
RING_D = {True: 4, False: 3}
XUNITS = {True: 4, False: 8}     # x: 4 row slots x 16 B (bf16) / 32 B (f32) per lane
UNITS = {True: 12, False: 16}    # + phi: 4 n-tiles x 32 B per lane (units XU + 2 nt + h)

def stage_bytes(bf):
    return UNITS[bf] * 512

def ring_bytes(bf):
    # the ring of the CTA (8 warps)
    return 8 * RING_D[bf] * stage_bytes(bf)

def tot_off(bf):
    # byte offset in smem_big of the running sums kept in shared memory (8 warps x 4 KB): the
    # post_pre K loop's (both dtypes), and the f32 pre loop's (its registers are at the cap)
    return 0 if bf else ring_bytes(bf)

def dyn_bytes(bf):
    # dynamic shared memory of a launch
    return max(ring_bytes(bf), tot_off(bf) + 8 * 4096, 33792)

def ring_issue(bf, stage):
    # cp.async of this lane's x chunks of the step at %koff / %p_k (from addr) into `stage`
    # (a register or a constant); rows out of range are zero-filled (src-size 0, no read).
    SB = stage_bytes(bf)
    L = []
    e = L.append
    if stage.startswith('%'):
        e(f"    mad.lo.u32 %ra, {stage}, {SB}, %rbase;")
    else:
        e(f"    add.u32 %ra, %rbase, {int(stage) * SB};")
    for s in range(4):
        e(f"    and.pred %p1, %pr{s}, %p_k;")
        if s >= 2:
            e("    and.pred %p1, %p1, %p_mt1;")
        e(f"    add.u64 %rd2, %xrow0, %koff;" + "".join("\n    add.u64 %rd2, %rd2, %xstep;" for _ in range(s)))
        e("    selp.b64 %rd2, %rd2, %x, %p1;")
        e("    selp.u32 %csz, 16, 0, %p1;")
        if bf:
            e(f"    cp.async.cg.shared.global [%ra+{s*512}], [%rd2], 16, %csz;")
        else:
            e(f"    cp.async.cg.shared.global [%ra+{(2*s)*512}], [%rd2], 16, %csz;")
            e(f"    cp.async.cg.shared.global [%ra+{(2*s+1)*512}], [%rd2+16], 16, %csz;")
    XU = XUNITS[bf]
    for nt in range(4):
        G = "@%p_nt3 " if nt == 3 else ""
        e(f"    and.pred %p3, %pmv{nt}, %p_k;")
        e(f"    add.u64 %rd5, %prow0, %kof4;" + "".join("\n    add.u64 %rd5, %rd5, %pstep;" for _ in range(nt)))
        e("    selp.b64 %rd5, %rd5, %phi, %p3;")
        e("    selp.u32 %csz, 16, 0, %p3;")
        e(f"    {G}cp.async.cg.shared.global [%ra+{(XU + 2*nt)*512}], [%rd5], 16, %csz;")
        e(f"    {G}cp.async.cg.shared.global [%ra+{(XU + 2*nt + 1)*512}], [%rd5+16], 16, %csz;")
    return "\n".join(L)

def ring_read(bf):
    # bf16: this lane's x of the current step (stage %rslot) -> %xv, phi -> %pq; f32: only
    # %ra (compute_set reads x and phi per half, to stay under the register cap)
    SB = stage_bytes(bf)
    ty = "b32" if bf else "f32"
    L = [f"    mad.lo.u32 %ra, %rslot, {SB}, %rbase;"]
    if bf:
        for u in range(XUNITS[bf]):
            b = 4*u
            L.append(f"    ld.shared.v4.{ty} {{%xv{b}, %xv{b+1}, %xv{b+2}, %xv{b+3}}}, [%ra+{u*512}];")
        for nt in range(4):
            G = "@%p_nt3 " if nt == 3 else ""
            for h in range(2):
                b = 8*nt + 4*h
                L.append(f"    {G}ld.shared.v4.f32 {{%pq{b}, %pq{b+1}, %pq{b+2}, %pq{b+3}}}, [%ra+{(4 + 2*nt + h)*512}];")
    return "\n".join(L)

def compute_set(bf, S, lbl):
    L = []
    e = L.append
    if bf:
        e(f"    @!%p_mg0 bra SSX_{lbl};")
        for s in range(4):
            for j in range(4):
                e(f"    shl.b32 %r10, %xv{4*s+j}, 16;")
                e(f"    and.b32 %r11, %xv{4*s+j}, 0xffff0000;")
                e(f"    fma.rn.f32 %ss{s}, %r10, %r10, %ss{s};")
                e(f"    fma.rn.f32 %ss{s}, %r11, %r11, %ss{s};")
        e(f"SSX_{lbl}:")
    if bf:
        for nt in range(4):
            G = "@%p_nt3 " if nt == 3 else ""
            for j in range(8):
                e(f"    @%p_gk mul.f32 %pq{8*nt+j}, %pq{8*nt+j}, %gk{S}{j};")
            G = "@%p_nt3 " if nt == 3 else ""
            for u in range(4):
                b = 4*nt + u
                e(f"    {G}cvt.rn.bf16x2.f32 %bh{b}, %pq{8*nt+2*u+1}, %pq{8*nt+2*u};")
                e(f"    {G}shl.b32 %r12, %bh{b}, 16;")
                e(f"    {G}and.b32 %r13, %bh{b}, 0xffff0000;")
                e(f"    {G}sub.f32 %f0, %pq{8*nt+2*u}, %r12;")
                e(f"    {G}sub.f32 %f1, %pq{8*nt+2*u+1}, %r13;")
                e(f"    {G}cvt.rn.bf16x2.f32 %bl{b}, %f1, %f0;")
        for mt in range(2):
            if mt == 1:
                e(f"    @!%p_mt1 bra MMX_{lbl};")
            for nt in range(4):
                c = [ACC[mt*16 + nt*4 + j] for j in range(4)]
                cs = "{" + ", ".join(c) + "}"
                s0, s1 = 2*mt, 2*mt+1
                A1 = f"{{%xv{4*s0}, %xv{4*s1}, %xv{4*s0+1}, %xv{4*s1+1}}}"
                A2 = f"{{%xv{4*s0+2}, %xv{4*s1+2}, %xv{4*s0+3}, %xv{4*s1+3}}}"
                for A, pair in ((A1, (0, 1)), (A2, (2, 3))):
                    for B in ('bh', 'bl'):
                        Bs = f"{{%{B}{4*nt+pair[0]}, %{B}{4*nt+pair[1]}}}"
                        G = "@%p_nt3 " if nt == 3 else ""
                        e(f"    {G}mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {cs}, {A}, {Bs}, {cs};")
        e(f"MMX_{lbl}:")
    else:
        # gamma_k of the step; phi per half (16 registers live, not 32: the f32 path is at the
        # 255-register cap). Addresses recomputed from %jb (the next step's loads are already
        # issued), which frees the registers that would carry them.
        e(f"    @!%p_gk bra GKA_{lbl};")
        e(addr(4, "%jb"))
        e(f"GKA_{lbl}:")
        e(f"    and.pred %p2, %p_gk, %p_k;")
        e(f"    add.u64 %rd4, %gk, %kof4;")
        for h in range(2):
            # x half h (elements 4h..4h+3 of each row slot) from the ring; ss in the same
            # per-slot order as before (elements 0..7)
            for s in range(4):
                e(f"    ld.shared.v4.f32 {{%xv{4*s}, %xv{4*s+1}, %xv{4*s+2}, %xv{4*s+3}}}, [%ra+{(2*s + h)*512}];")
            for s in range(4):
                for j in range(4):
                    e(f"    @%p_mg0 fma.rn.f32 %ss{s}, %xv{4*s+j}, %xv{4*s+j}, %ss{s};")
            for s in range(4):
                for j in range(4):
                    e(f"    cvt.rna.tf32.f32 %xh{4*s+j}, %xv{4*s+j};")
                    e(f"    sub.f32 %xl{4*s+j}, %xv{4*s+j}, %xh{4*s+j};")
            for j in range(4):
                e(f"    mov.f32 %gkv{j}, 0f3F800000;")
            e(f"    @%p2 ld.global.nc.v4.f32 {{%gkv0, %gkv1, %gkv2, %gkv3}}, [%rd4+{16*h}];")
            # phi (this half) from the ring, two n-tiles at a time (8 + 16 registers live), each
            # pair's mma right after its split (the order per accumulator is unchanged)
            for pair in range(2):
                for nt in (2*pair, 2*pair+1):
                    b = 4*(nt - 2*pair)
                    G = "@%p_nt3 " if nt == 3 else ""
                    e(f"    {G}ld.shared.v4.f32 {{%pf{b}, %pf{b+1}, %pf{b+2}, %pf{b+3}}}, [%ra+{(8 + 2*nt + h)*512}];")
                for nt in (2*pair, 2*pair+1):
                    b = 4*(nt - 2*pair)
                    G = "@%p_nt3 " if nt == 3 else ""
                    for j in range(4):
                        e(f"    {G}mul.f32 %f0, %pf{b+j}, %gkv{j};")
                        e(f"    {G}cvt.rna.tf32.f32 %ph{4*nt+j}, %f0;")
                        e(f"    {G}sub.f32 %pl{4*nt+j}, %f0, %ph{4*nt+j};")
                for mt in range(2):
                    if mt == 1:
                        e(f"    @!%p_mt1 bra MMX_{lbl}_{h}_{pair};")
                    for nt in (2*pair, 2*pair+1):
                        c = [ACC[mt*16 + nt*4 + j] for j in range(4)]
                        cs = "{" + ", ".join(c) + "}"
                        s0, s1 = 2*mt, 2*mt+1
                        for u in range(2):
                            Ah = f"{{%xh{4*s0+2*u}, %xh{4*s1+2*u}, %xh{4*s0+2*u+1}, %xh{4*s1+2*u+1}}}"
                            Al = f"{{%xl{4*s0+2*u}, %xl{4*s1+2*u}, %xl{4*s0+2*u+1}, %xl{4*s1+2*u+1}}}"
                            Bh = f"{{%ph{4*nt+2*u}, %ph{4*nt+2*u+1}}}"
                            Bl = f"{{%pl{4*nt+2*u}, %pl{4*nt+2*u+1}}}"
                            for A, B in ((Ah, Bh), (Ah, Bl), (Al, Bh)):
                                G = "@%p_nt3 " if nt == 3 else ""
                                e(f"    {G}mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {cs}, {A}, {B}, {cs};")
                e(f"MMX_{lbl}_{h}_{pair}:")
    return "\n".join(L)

FLUSH_EVERY = 4   # steps between flushes of the mma accumulators (a power of 2)

def flush(lbl, smem=False):
    # Tensor-core f32 accumulation truncates; a long chain of mma into one accumulator drifts
    # (measured: 1.6e-5 on h_post at K = 16384, f32, one CTA per tile). Every FLUSH_EVERY steps
    # the 32 accumulators are added (IEEE fadd) into running sums and restarted from 0. The pre
    # K loop keeps the sums in registers %tot (its ring fills smem_big); the post_pre K loop
    # (smem=True), which has no ring and more live registers, in smem_big[warp][reg][lane].
    L = [f"""    add.u32 %nstep, %nstep, 1;
    and.b32 %r14, %nstep, {FLUSH_EVERY - 1};
    setp.ne.u32 %p25, %r14, 0;
    @%p25 bra FL_SKIP_{lbl};"""]
    for r in range(32):
        if smem:
            L.append(f"    ld.shared.f32 %f2, [%totp+{r*128}];")
            L.append(f"    add.f32 %f2, %f2, %acc{r};")
            L.append(f"    st.shared.f32 [%totp+{r*128}], %f2;")
        else:
            L.append(f"    add.f32 %tot{r}, %tot{r}, %acc{r};")
        L.append(f"    mov.f32 %acc{r}, 0f00000000;")
    L.append(f"FL_SKIP_{lbl}:")
    return "\n".join(L)

def tot_init_smem(bf):
    L = [f"""    mov.u32 %nstep, 0;
    mov.u32 %totp, smem_big;
    add.u32 %totp, %totp, {tot_off(bf)};
    shl.b32 %r14, %warp, 10;
    add.u32 %r14, %r14, %lane;
    shl.b32 %r14, %r14, 2;
    add.u32 %totp, %totp, %r14;              // running sums [warp][reg][lane] (4096 B per warp)"""]
    for r in range(32):
        L.append(f"    st.shared.f32 [%totp+{r*128}], 0f00000000;")
    return "\n".join(L)

def tot_init_post(bf):
    return tot_init_smem(bf)

def tot_init_pre(bf):
    if not bf:
        return tot_init_smem(bf)
    L = ["    mov.u32 %nstep, 0;"]
    for r in range(32):
        L.append(f"    mov.f32 %tot{r}, 0f00000000;")
    return "\n".join(L)

def tot_finish_smem():
    L = []
    for r in range(32):
        L.append(f"    ld.shared.f32 %f2, [%totp+{r*128}];")
        L.append(f"    add.f32 %acc{r}, %f2, %acc{r};")
    return "\n".join(L)

def tot_finish_post(bf):
    return tot_finish_smem()

def tot_finish_pre(bf):
    if not bf:
        return tot_finish_smem()
    L = []
    for r in range(32):
        L.append(f"    add.f32 %acc{r}, %tot{r}, %acc{r};")
    return "\n".join(L)

def pipelined(bf):
    # pre: x and phi come through the per-warp cp.async ring, RING_D - 1 steps ahead (one step
    # ahead was latency-bound on phi's L2 round trip: ~1.2 us per step, notes round 8);
    # gamma_k one step ahead in the register sets A / B.
    esz = 2 if bf else 4
    D = RING_D[bf]
    L = []
    e = L.append
    e("KA_START:                               // pre: software-pipelined K loop")
    e(tot_init_pre(bf))
    e(f"""    shl.b32 %r1, %warp, 5;
    add.u32 %jb, %jbeg, %r1;
    setp.ge.u32 %p0, %jb, %jend;
    @%p0 bra K_DONE;
    mov.u32 %rbase, smem_big;
    mul.lo.u32 %r1, %warp, {D * stage_bytes(bf)};
    add.u32 %rbase, %rbase, %r1;
    shl.b32 %r1, %lane, 4;
    add.u32 %rbase, %rbase, %r1;             // this lane's 16-byte column of the warp's ring
    mov.u32 %rslot, 0;""")
    for st in range(D - 1):
        e(f"""    add.u32 %jn, %jb, {256 * st};
    setp.lt.u32 %p_nx, %jn, %jend;
    @!%p_nx bra RP_{st};""")
        e(addr(esz))
        e(ring_issue(bf, str(st)))
        e(f"RP_{st}:")
        e("    cp.async.commit_group;")
    if bf:
        for S in "AB":
            for j in range(8):
                e(f"    mov.f32 %gk{S}{j}, 0f3F800000;")
        e("    @!%p_gk bra KA_GK0;")
        e("    mov.u32 %jn, %jb;")
        e(addr(esz))
        e(load_set(bf, 'A'))
        e("KA_GK0:")
    e("KA_LOOP:")
    for cur, nxt in (('A', 'B'), ('B', 'A')):
        e(f"""    add.u32 %jn, %jb, {256 * (D - 1)};
    setp.lt.u32 %p_nx, %jn, %jend;
    @!%p_nx bra RF_{cur};
    add.u32 %rwst, %rslot, {D - 1};
    setp.ge.u32 %p1, %rwst, {D};
    @%p1 sub.u32 %rwst, %rwst, {D};""")
        e(addr(esz))
        e(ring_issue(bf, '%rwst'))
        e(f"""RF_{cur}:
    cp.async.commit_group;
    add.u32 %jn, %jb, 256;
    setp.lt.u32 %p_nx, %jn, %jend;""")
        if bf:
            e(f"    @!%p_nx bra KN_{cur};")
            e(f"    @!%p_gk bra KN_{cur};")
            e(addr(esz))
            e(load_set(bf, nxt))
            e(f"KN_{cur}:")
        e(f"    cp.async.wait_group {D - 1};")
        e(ring_read(bf))
        e(compute_set(bf, cur, cur))
        e(flush(cur, smem=not bf))
        e(f"""    add.u32 %rslot, %rslot, 1;
    setp.ge.u32 %p1, %rslot, {D};
    @%p1 mov.u32 %rslot, 0;
    @!%p_nx bra K_DONE;
    mov.u32 %jb, %jn;""")
    e("    bra KA_LOOP;")
    return "\n".join(L)

def regs(bf):
    if bf:
        return """    .reg .b32 %xv<16>;
    .reg .f32 %pq<32>, %gkA<8>, %gkB<8>, %tot<32>;
    .reg .pred %p_nx, %p_nt3;
    .reg .b32 %jn, %nstep, %totp, %rbase, %rslot, %rwst, %ra, %csz;"""
    return """    .reg .f32 %xv<16>;
    .reg .pred %p_nx, %p_nt3;
    .reg .b32 %jn, %nstep, %totp, %rbase, %rslot, %rwst, %ra, %csz;"""
