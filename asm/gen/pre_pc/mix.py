"""The pre-mix a = sum_i h_pre[i] x[i] of a tile from its stage (math warps or mix warps)."""

from .constants import ARG, A_XO, A_XOS, HXB, STAGES, TBLK, TT
from .fills import fill


def mix_fmas(xs, w, acc, tmp):
    """acc[0..7] += w * the 8 bf16 channels in registers xs[0..3] (one stream of a 16-byte chunk;
    tmp: a scratch register): the mix's per-stream step, in the same order wherever it is used."""
    return "\n".join(f"""    shl.b32 {tmp}, {x}, 16;
    mov.b32 %f0, {tmp};
    and.b32 {tmp}, {x}, -65536;
    mov.b32 %f1, {tmp};
    fma.rn.f32 {acc}{2 * u}, {w}, %f0, {acc}{2 * u};
    fma.rn.f32 {acc}{2 * u + 1}, {w}, %f1, {acc}{2 * u + 1};""" for u, x in enumerate(xs))


def mix_code(k, mw):
    """The pre-mix of tile %ptile from stage %pstage: math warps (iteration kk >= 1, shs) or,
        mw, the mix warps (shs[%r19], any round); its labels MIX_*."""
    NOMIX, fused, tma, SREG, HX = k.NOMIX, k.fused, k.tma, k.SREG, k.HX
    if mw and not fused:
        return mix_items(k)
    PAIR_A = """
    add.u32 %r10, %r10, %C0;                // pair entry: this half's channels"""
    if not tma:  # the fused pair entry's math warps: C0 from shared memory (no register beside phi)
        PAIR_A = f"""
    ld.shared.u32 %r16, [sm_base+{4 * 24}];
    add.u32 %r10, %r10, %r16;               // pair entry: this half's channels (C0)"""
    M = []
    em = M.append
    # stage address of the item's 16 bytes of stream 0 (%r5) and the step to the next stream
    if tma:  # block mch / 8, row (stream, token it), chunk (mch % 8) xor (it % 8)
        MIX_BASE = f"""
    shr.u32 %r16, %mch, 3;
    mad.lo.u32 %r7, %r16, {TBLK}, %r7;      // the chunk's 64-channel block
    and.b32 %r16, %mch, 7;                  // its chunk of a 128-byte row"""
        MIX_ITEM = """
    and.b32 %r17, %it, 7;
    xor.b32 %r17, %r17, %r16;
    shl.b32 %r17, %r17, 4;
    mad.lo.u32 %r5, %it, 128, %r7;
    add.u32 %r5, %r5, %r17;                 // &x[it][stream 0][8 ch] (swizzled)"""
        MIX_NEXT = ""
        XS = TT * 128
    else:
        MIX_BASE = """
    mad.lo.u32 %r7, %mtk, %tstride, %r7;
    mad.lo.u32 %r7, %mch, 16, %r7;          // &x[tk][stream 0][8 ch]"""
        MIX_ITEM = """
    mov.u32 %r5, %r7;"""
        MIX_NEXT = """
    mad.lo.u32 %r7, %mtp, %tstride, %r7;"""
        XS = SREG
    SKIP0 = "" if mw else """
    setp.eq.u32 %p1, %kk, 0;
    @%p1 bra MIX_END;"""
    if HX and not mw:  # the fused pair entry's math warps: h_pre of tile kk-LAG from the token's CTA
        SKIP0 = f"""
    setp.lt.u32 %p1, %kk, {k.LAG};
    @%p1 bra MIX_END;
    sub.u32 %r17, %kk, {k.LAG};
    and.b32 %r19, %r17, {HXB - 1};             // hin / hbar buffer of tile kk-{k.LAG}
    shr.u32 %r17, %r17, {HXB.bit_length() - 1};
    and.b32 %r17, %r17, 1;
    mov.u32 %r18, hbar;
    mad.lo.u32 %r18, %r19, 8, %r18;
MIX_HWAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r18], %r17;
    @!%p1 bra MIX_HWAIT;"""
    SHSP = f"""
    mad.lo.u32 %r8, %r19, {TT * 16}, %r8;   // {("hin[kk % HXB]" if mw else f"hin[(kk-{k.LAG}) % HXB]") if HX else "shs[p]"}""" if mw or HX else ""
    em(f"""    // ---- mix tile ptile (stage pstage): thread t < mtp cpt (cpt = C/128 chunks per token and
    // slice, mtp = threads / cpt tokens per pass) takes chunk %mch of tokens %mtk + p mtp{SKIP0}
    @!%p_mx bra MIX_END;
    shl.b32 %r3, %ptile, 4;                 // t0
    mad.lo.u32 %r7, %pstage, %sstage, %dsm;{MIX_BASE}
    mov.u32 %r8, {"hin" if HX else "shs"};{SHSP}
    mad.lo.u32 %r8, %mtk, 16, %r8;          // &h_pre[tk]
    add.u32 %r6, %r3, %mtk;                 // token
    ld.param.u32 %r9, [p_args+{ARG['a_stride']}];
    mul.wide.u32 %rd1, %r6, %r9;
    shl.b64 %rd1, %rd1, 1;
    ld.param.u64 %rd2, [p_args+{ARG['a']}];
    add.u64 %rd1, %rd1, %rd2;
    shl.b32 %r10, %mch, 3;
    mad.lo.u32 %r10, %rank, %C16, %r10;{PAIR_A if k.pair else ""}
    mul.wide.u32 %rd2, %r10, 2;
    add.u64 %rd1, %rd1, %rd2;               // &a[token][r C/16 + 8 ch]
    mul.wide.u32 %rd3, %mtp, %r9;
    shl.b64 %rd3, %rd3, 1;                  // a step of mtp rows
    mov.u32 %it, %mtk;
MIX_LOOP:{NOMIX}
    setp.ge.u32 %p1, %it, {TT};
    @%p1 bra MIX_END;
    setp.ge.u32 %p1, %r6, %T;
    @%p1 bra MIX_END;
{MIX_ITEM.lstrip(chr(10))}
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%r8];""")
    if fused and "noxo" not in k.exp:
        em(f"""    // fused entry: x' of this chunk to x_out too (16-byte stores, consecutive lanes adjacent);
    // the row pointer is rebuilt per item from the parameters, not carried: in the pc16 entry
    // the math warps mix, and they sit at 163 of the 168 registers 12 warps allow
    ld.param.u32 %r14, [p_args+{A_XOS}];
    ld.param.u64 %rd4, [p_args+{A_XO}];
    mul.wide.u32 %rd5, %r6, %r14;
    shl.b64 %rd5, %rd5, 1;
    add.u64 %rd4, %rd4, %rd5;
    add.u64 %rd4, %rd4, %rd2;               // &x_out[token][stream 0][r C/16 + 8 ch]
    mul.wide.u32 %rd5, %C, 2;""")
    for j in range(8):
        em(f"    mov.f32 %mo{j}, 0f00000000;")
    for i in range(4):
        if i:
            em(f"    add.u32 %r5, %r5, {XS};")
        em("    ld.shared.v4.b32 {%xa0, %xa1, %xa2, %xa3}, [%r5];")
        if fused and "noxo" not in k.exp:
            if i:
                em("    add.u64 %rd4, %rd4, %rd5;")
            em("    st.global.v4.b32 [%rd4], {%xa0, %xa1, %xa2, %xa3};")
        em(mix_fmas([f"%xa{u}" for u in range(4)], f"%w{i}", "%mo", "%r9"))
    for j in range(4):
        em(f"    cvt.rn.bf16x2.f32 %r{10 + j}, %mo{2 * j + 1}, %mo{2 * j};")
    em(f"""    st.global.v4.b32 [%rd1], {{%r10, %r11, %r12, %r13}};
    add.u64 %rd1, %rd1, %rd3;{MIX_NEXT}
    mad.lo.u32 %r8, %mtp, 16, %r8;
    add.u32 %r6, %r6, %mtp;
    add.u32 %it, %it, %mtp;
    bra MIX_LOOP;""")
    em("MIX_END:")
    return "\n".join(M)


def mix_items(k):
    """The pre entries' mix warps: the pre-mix of tile %ptile from stage %pstage (h_pre in
    hin[%r19] / shs[%r19]). The tile's TT x cpt items (token, 8-channel chunk; cpt = C/128 per
    slice) are dealt to the mixers in order, item i to thread i % MIXERS (every thread busy: one
    token's chunks need not fill whole passes), two items per step with all their shared loads
    issued before the first FMA: one item at a time leaves each step waiting on its loads (2 mix
    warps: the loop's latency, not its issue, sets the mix's time). The sums are the fused
    entries' one-item form's: a = sum over the streams in order of h_pre[i] x[i], rounded once
    to bf16."""
    NOMIX, tma, SREG, HX, MIXERS = k.NOMIX, k.tma, k.SREG, k.HX, k.MIXERS
    CW = "%CH" if k.pair else "%C"
    XS = TT * 128 if tma else SREG
    M = []
    em = M.append

    def x_addr(it, mc, dst):
        """dst = &x[token it][stream 0][chunk mc] in the stage at %r7."""
        if tma:  # block mc / 8, row it, chunk (mc % 8) xor (it % 8) of the 128-byte swizzle
            return f"""
    shr.u32 %r16, {mc}, 3;
    mad.lo.u32 {dst}, %r16, {TBLK}, %r7;
    mad.lo.u32 {dst}, {it}, 128, {dst};
    xor.b32 %r16, {it}, {mc};
    and.b32 %r16, %r16, 7;
    shl.b32 %r16, %r16, 4;
    add.u32 {dst}, {dst}, %r16;"""
        return f"""
    mad.lo.u32 {dst}, {it}, %tstride, %r7;
    mad.lo.u32 {dst}, {mc}, 16, {dst};"""

    def a_addr(it, mc, dst):
        """dst = &a[t0 + it][this CTA's channels + 8 mc]."""
        return f"""
    add.u32 %r17, %r3, {it};
    mul.wide.u32 {dst}, %r17, %r9;
    mad.lo.u32 %r17, {mc}, 8, %r10;
    cvt.u64.u32 %rd6, %r17;
    add.u64 {dst}, {dst}, %rd6;
    shl.b64 {dst}, {dst}, 1;
    add.u64 {dst}, {dst}, %rd2;"""

    def step(it, mc, dit, dmc):
        """(dit, dmc) = the item MIXERS after (it, mc)."""
        return f"""
    add.u32 {dit}, {it}, %mtp;
    add.u32 {dmc}, {mc}, %mdr;
    setp.ge.u32 %p2, {dmc}, %mcp;
    @%p2 sub.u32 {dmc}, {dmc}, %mcp;
    @%p2 add.u32 {dit}, {dit}, 1;"""

    def sums(xr, w, acc):
        out = [f"    mov.f32 {acc}{j}, 0f00000000;" for j in range(8)]
        out += [mix_fmas([f"{xr}{4 * i + u}" for u in range(4)], f"{w}{i}", acc, "%r16") for i in range(4)]
        return "\n".join(out)

    PAIR_A = """
    add.u32 %r10, %r10, %C0;                // pair entry: this half's channels""" if k.pair else ""
    em(f"""    // ---- mix tile ptile (stage pstage): items (token, chunk) dealt in order, two per step
    shl.b32 %r3, %ptile, 4;                 // t0
    mad.lo.u32 %r7, %pstage, %sstage, %dsm;
    mov.u32 %r8, {"hin" if HX else "shs"};
    mad.lo.u32 %r8, %r19, {TT * 16}, %r8;   // {"hin[kk % HXB]" if HX else "shs[p]"}
    ld.param.u32 %r9, [p_args+{ARG['a_stride']}];
    ld.param.u64 %rd2, [p_args+{ARG['a']}];
    mul.lo.u32 %r10, %rank, %C16;{PAIR_A}
    shr.u32 %mcp, {CW}, 7;                  // cpt
    mul.lo.u32 %mdr, %mtp, %mcp;
    sub.u32 %mdr, {MIXERS}, %mdr;           // MIXERS = mtp cpt + mdr
    mov.u32 %it, %mtk;
    mov.u32 %mcc, %mch;
MIX_LOOP:{NOMIX}
    setp.ge.u32 %p1, %it, {TT};
    @%p1 bra MIX_END;
    add.u32 %r6, %r3, %it;
    setp.ge.u32 %p1, %r6, %T;
    @%p1 bra MIX_END;
    // item b = the next one of this thread; past the tile or T it re-reads item a, not stored{step("%it", "%mcc", "%mib", "%mcb")}
    add.u32 %r6, %r3, %mib;
    setp.lt.u32 %p_mb, %mib, {TT};
    setp.lt.and.u32 %p_mb, %r6, %T, %p_mb;
    selp.u32 %r11, %mib, %it, %p_mb;
    selp.u32 %r12, %mcb, %mcc, %p_mb;{x_addr("%it", "%mcc", "%r5")}{x_addr("%r11", "%r12", "%r14")}
    mad.lo.u32 %r13, %it, 16, %r8;          // &h_pre[token a]
    mad.lo.u32 %r15, %r11, 16, %r8;         // &h_pre[token b]
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%r13];
    ld.shared.v4.f32 {{%mg0, %mg1, %mg2, %mg3}}, [%r15];""")
    for i in range(4):
        off = "" if i == 0 else (f"+{i * XS}" if tma else "")
        if not tma and i:
            em(f"""    add.u32 %r5, %r5, {XS};
    add.u32 %r14, %r14, {XS};""")
        em(f"""    ld.shared.v4.b32 {{%mx{4 * i}, %mx{4 * i + 1}, %mx{4 * i + 2}, %mx{4 * i + 3}}}, [%r5{off}];
    ld.shared.v4.b32 {{%my{4 * i}, %my{4 * i + 1}, %my{4 * i + 2}, %my{4 * i + 3}}}, [%r14{off}];""")
    em(sums("%mx", "%w", "%mo"))
    em(sums("%my", "%mg", "%mq"))
    for j in range(4):
        em(f"    cvt.rn.bf16x2.f32 %xa{j}, %mo{2 * j + 1}, %mo{2 * j};")
    for j in range(4):
        em(f"    cvt.rn.bf16x2.f32 %xb{j}, %mq{2 * j + 1}, %mq{2 * j};")
    em(a_addr("%it", "%mcc", "%rd1").lstrip("\n"))
    em("    st.global.v4.b32 [%rd1], {%xa0, %xa1, %xa2, %xa3};")
    em(a_addr("%mib", "%mcb", "%rd3").lstrip("\n"))
    em(f"""    @%p_mb st.global.v4.b32 [%rd3], {{%xb0, %xb1, %xb2, %xb3}};
    // the next step's item a: the one after item b{step("%mib", "%mcb", "%it", "%mcc")}
    bra MIX_LOOP;
MIX_END:""")
    return "\n".join(M)


def mix_rounds(k, tag, after):
    """Rounds kk = 0 .. nr - 1: wait hready[kk & 1], mix the tile, free shs and the stage
            (mixed[kk & 1]), refill the stage with round kk + STAGES; then `after`."""
    e, MIXERS, STAMPS, HX, st = k.e, k.MIXERS, k.STAMPS, k.HX, k.st
    WAIT_ON = (f"""    and.b32 %r19, %kk, {HXB - 1};             // hin / hbar buffer
    shr.u32 %r2, %kk, {HXB.bit_length() - 1};
    and.b32 %r2, %r2, 1;
    mov.u32 %r1, hbar;
    mad.lo.u32 %r1, %r19, 8, %r1;""" if HX else """    and.b32 %r19, %kk, 1;                   // p
    shr.u32 %r2, %kk, 1;
    and.b32 %r2, %r2, 1;
    mov.u32 %r1, hready;
    mad.lo.u32 %r1, %r19, 8, %r1;""")
    e(f"""    mov.u32 %kk, 0;
{tag}_LOOP:
    setp.ge.u32 %p1, %kk, %nr;
    @%p1 bra TILE_END;
{WAIT_ON}
{tag}_WAIT:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;
    @!%p1 bra {tag}_WAIT;{st(13, "mix")}
    mad.lo.u32 %ptile, %kk, %ncl, %cid;
    {"rem.u32 %pstage, %kk, %nst" if k.pair else "and.b32 %pstage, %kk, " + str(STAGES - 1)};""")
    e(mix_code(k, True))
    if STAMPS:
        e(k.stamp(14, "mix"))
    if HX:
        e(f"""    // hin[kk % {HXB}] and the stage are read (every mixer): re-arm hbar for tile kk + {HXB}, refill
    barrier.sync 3, {MIXERS};
    setp.eq.u32 %p1, %tm, 0;
    and.b32 %r19, %kk, {HXB - 1};
    mov.u32 %r1, hbar;
    mad.lo.u32 %r1, %r19, 8, %r1;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%r1], {TT * 16};
    mad.lo.u32 %r20, %ncl, {k.nst}, %ptile;""")
    else:
        e(f"""    // the stage's chunks are refilled by other threads than the ones that mixed them
    barrier.sync 3, {MIXERS};
    mov.u32 %r1, mixed;
    and.b32 %r19, %kk, 1;
    mad.lo.u32 %r1, %r19, 8, %r1;
    mbarrier.arrive.shared::cta.b64 %mbs, [%r1];   // this thread's reads of shs[p] and the stage are done
    mad.lo.u32 %r20, %ncl, {STAGES}, %ptile;""")
    fill(k, "%r20", "%pstage", "REFILL")
    if STAMPS:
        e(k.stamp(15, "mix"))
    e(f"""{after}
    add.u32 %kk, %kk, 1;
    bra.uni {tag}_LOOP;""")
