"""The ring's fills: cp.async copies by a fixed chunk mapping, or TMA tensor copies."""

from types import SimpleNamespace
from .constants import ARG, A_F, A_FS, A_HPI, A_HRI, TBLK, TBOX, TT


def copy_regs(v=None):
    """The registers of a copier thread's chunk mapping (issue, mapping): its own, or those of
    virtual copier v of a mixing thread (suffixed v)."""
    sfx = "" if v is None else f"v{v}"
    return SimpleNamespace(cso=f"%cso{sfx}", cgo=f"%cgo{sfx}", ctk=f"%ctk{sfx}", p_cp=f"%p_cp{sfx}",
                           cfs=f"%cfs{sfx}", tx="%tx" if v is None else f"%tvv{v}")


def issue(k, tile_reg, stage_reg, tag, v=None, fstage_reg=None):
    """Every math thread: its 16-byte cp.async copies of tile tile_reg into stage
        stage_reg (a fixed (stream, chunk) per thread, tokens %ctk + p %ctps), then
        cp.async.mbarrier.arrive.noinc on full[stage] (256 arrivals complete it); nothing past
        the last tile. (cp.async.bulk measures slower: one bulk copy per (token, stream)
        is issued from uniform registers, the lanes of a warp taking turns at ~50 cycles
        each: 0.25 us per tile on every warp.)
        Fused entry: a copier of stream s also copies the f chunk (same chunk of the slice, same
        token) on the passes p with p % 4 == s (every f chunk exactly once, spread over the
        streams), and threads < {TT} x 5 copy one 16-byte chunk of the tile's h_post / h_res.
        The fused pair entry (k.fring) puts the f chunks in stage fstage_reg of its f ring
        instead (rows of one slice), at the same chunk of the token's row."""
    R = copy_regs(v)
    e, fused = k.e, k.fused
    assert fstage_reg is not None or not k.fring, "the fused pair entry's fills name their f stage"
    def f_chunk(token, note=""):
        """%rd5 = &f[token][the chunk of this copier's f slice] (cgo less its stream's offset);
        %r18 = f_stride."""
        return f"""
    ld.param.u32 %r18, [p_args+{A_FS}];
    ld.param.u64 %rd5, [p_args+{A_F}];
    mul.wide.u32 %rd6, {token}, %r18;
    shl.b64 %rd6, %rd6, 1;
    add.u64 %rd5, %rd5, %rd6;
    mul.lo.u32 %r19, {R.cfs}, %C;
    shl.b32 %r19, %r19, 1;
    sub.u32 %r19, {R.cgo}, %r19;
    cvt.u64.u32 %rd6, %r19;
    add.u64 %rd5, %rd5, %rd6;{note}"""
    # where this copier's f chunks go: slice 4 of the token's row (%r19: its offset from the x
    # chunk at %r16), or the fused pair entry's f ring (%r10: the chunk of row 0 of f stage
    # fstage_reg, %r19 the pass's row, %r18 a step of tps rows)
    F_DST_SLICE = f"""
    mov.u32 %r19, 4;
    sub.u32 %r19, %r19, {R.cfs};
    mul.lo.u32 %r19, %r19, %SS;             // stage: f's slice is x slice 4 of the row"""
    F_COPY_SLICE = """
    add.u32 %r11, %r16, %r19;
    @%p_f cp.async.cg.shared.global [%r11], [%rd5], 16;"""
    F_DST_PASS_SLICE = f"""
    mov.u32 %r19, 4;
    sub.u32 %r19, %r19, {R.cfs};
    mad.lo.u32 %r19, %r19, %SS, %r16;"""
    F_DST_FAST = f"""
    mad.lo.u32 %r19, {R.ctk}, %SS, %r10;    // f ring: row of the first token
    mul.lo.u32 %r18, %ctps, %SS;            // a step of tps rows"""
    F_COPY_FAST = """
    @%p_f cp.async.cg.shared.global [%r19], [%rd5], 16;
    add.u32 %r19, %r19, %r18;"""
    F_DST_PASS = """
    mad.lo.u32 %r19, %r12, %SS, %r10;       // f ring: the pass's row"""
    F_RING = f"""
    // f ring: %r10 = f stage {fstage_reg} + this copier's chunk of a row (its x offset less the
    // token's row and the stream's slice; recomputed per fill: the math warps have no register
    // to spare beside phi)
    mul.lo.u32 %r10, {R.ctk}, %tstride;
    sub.u32 %r10, {R.cso}, %r10;
    mul.lo.u32 %r11, {R.cfs}, %SS;
    sub.u32 %r10, %r10, %r11;
    mad.lo.u32 %r11, %sstage, {k.stages}, %dsm;
    add.u32 %r10, %r10, %r11;               // the f ring, after the x stages
    mul.lo.u32 %r11, {fstage_reg}, %SS;
    shl.b32 %r11, %r11, {TT.bit_length() - 1};
    add.u32 %r10, %r10, %r11;               // + f stage x {TT} rows""" if k.fring else ""
    F_FAST_PRE = f"""    // f: the same chunk of f's slice (cgo less the stream's offset), rows step by f_stride{
        f_chunk("%r14", "               // &f[first token][r C/16 + 8 chunk]")}
    mul.wide.u32 %rd6, %ctps, %r18;
    shl.b64 %rd6, %rd6, 1;                  // f: a step of tps rows{F_DST_FAST if k.fring else F_DST_SLICE}
    mov.u32 %r13, 0;                        // pass
""" if fused else ""
    F_FAST = f"""
    and.b32 %r11, %r13, 3;
    setp.eq.u32 %p_f, %r11, {R.cfs};{F_COPY_FAST if k.fring else F_COPY_SLICE}
    add.u64 %rd5, %rd5, %rd6;
    add.u32 %r13, %r13, 1;""" if fused else ""
    F_PASS = f"""
    sub.u32 %r11, %r12, {R.ctk};
    div.u32 %r11, %r11, %ctps;              // pass (the last tile only)
    and.b32 %r11, %r11, 3;
    setp.eq.u32 %p_f, %r11, {R.cfs};
    @!%p_f bra {tag}_PF;{f_chunk("%r15")}{F_DST_PASS if k.fring else F_DST_PASS_SLICE}
    cp.async.cg.shared.global [%r19], [%rd5], 16;
{tag}_PF:""" if fused else ""
    F_HC = f"""
{tag}_HC:
    // h_post (chunk 0) / h_res rows (chunks 1..4) of token tx / 5 -> stage + {TT} rows + 80 tk + 16 c
    setp.ge.u32 %p3, {R.tx}, {TT * 5};
    @%p3 bra {tag}_ARRIVE;
    div.u32 %r12, {R.tx}, 5;
    mul.lo.u32 %r13, %r12, 5;
    sub.u32 %r13, {R.tx}, %r13;                // chunk c
    shl.b32 %r14, {tile_reg}, 4;
    add.u32 %r14, %r14, %r12;
    min.u32 %r14, %r14, %tlast;             // token (clamped)
    setp.eq.u32 %p3, %r13, 0;
    ld.param.u64 %rd2, [p_args+{A_HPI}];
    mul.wide.u32 %rd3, %r14, 16;
    @%p3 add.u64 %rd2, %rd2, %rd3;
    @!%p3 ld.param.u64 %rd2, [p_args+{A_HRI}];
    mul.wide.u32 %rd3, %r14, 64;
    @!%p3 add.u64 %rd2, %rd2, %rd3;
    sub.u32 %r15, %r13, 1;
    mul.wide.u32 %rd3, %r15, 16;
    @!%p3 add.u64 %rd2, %rd2, %rd3;
    mad.lo.u32 %r16, {stage_reg}, %sstage, %dsm;
    mad.lo.u32 %r16, %tstride, {TT}, %r16;
    mad.lo.u32 %r16, {R.tx}, 16, %r16;
    cp.async.cg.shared.global [%r16], [%rd2], 16;""" if fused else ""
    e(f"""    // ---- refill: tile {tile_reg} -> stage {stage_reg}
    setp.ge.u32 %p2, {tile_reg}, %ntiles;
    @%p2 bra {tag}_END;
    mad.lo.u32 %r16, {stage_reg}, %sstage, %dsm;
    add.u32 %r16, %r16, {R.cso};               // this thread's chunk of token {R.ctk} in the stage
    @!{R.p_cp} bra {tag}_{"HC" if fused else "ARRIVE"};{F_RING}
    shl.b32 %r14, {tile_reg}, 4;
    add.u32 %r14, %r14, {R.ctk};               // token of the first pass
    mov.u32 %r12, {R.ctk};
    ld.param.u32 %r17, [p_args+{ARG['x_stride']}];        // x row stride (elements; parameters are re-read
    ld.param.u64 %rd4, [p_args+{ARG['x']}];          // where used: fewer live registers beside phi)
    shl.b32 %r15, {tile_reg}, 4;
    add.u32 %r15, %r15, {TT - 1};
    setp.gt.u32 %p3, %r15, %tlast;
    @%p3 bra {tag}_PASS;                    // the last tile: rows clamped to T - 1
    // a whole tile: row pointers step by tps rows
    mul.wide.u32 %rd2, %r14, %r17;
    shl.b64 %rd2, %rd2, 1;
    add.u64 %rd2, %rd2, %rd4;
    cvt.u64.u32 %rd3, {R.cgo};
    add.u64 %rd2, %rd2, %rd3;
    mul.wide.u32 %rd3, %ctps, %r17;
    shl.b64 %rd3, %rd3, 1;
    mul.lo.u32 %r15, %ctps, %tstride;
{F_FAST_PRE if fused else ""}{tag}_FAST:
    cp.async.cg.shared.global [%r16], [%rd2], 16;{F_FAST if fused else ""}
    add.u64 %rd2, %rd2, %rd3;
    add.u32 %r16, %r16, %r15;
    add.u32 %r12, %r12, %ctps;
    setp.lt.u32 %p3, %r12, {TT};
    @%p3 bra {tag}_FAST;
    bra {tag}_{"HC" if fused else "ARRIVE"};
{tag}_PASS:
    min.u32 %r15, %r14, %tlast;
    mul.wide.u32 %rd2, %r15, %r17;
    shl.b64 %rd2, %rd2, 1;
    add.u64 %rd2, %rd2, %rd4;
    cvt.u64.u32 %rd3, {R.cgo};
    add.u64 %rd2, %rd2, %rd3;
    cp.async.cg.shared.global [%r16], [%rd2], 16;{F_PASS if fused else ""}
    add.u32 %r12, %r12, %ctps;
    add.u32 %r14, %r14, %ctps;
    mad.lo.u32 %r16, %ctps, %tstride, %r16;
    setp.lt.u32 %p3, %r12, {TT};
    @%p3 bra {tag}_PASS;{F_HC if fused else ""}
{tag}_ARRIVE:
    mov.u32 %r10, full;
    mad.lo.u32 %r10, {stage_reg}, 8, %r10;
    cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r10];
{tag}_END:""")


def mapping(k, tid, nthr, v=None):
    """The copy (issue) and mix item mappings of `nthr` threads, `tid` this one's index."""
    R = copy_regs(v)
    fused, SREG = k.fused, k.SREG
    CW = "%CH" if k.pair else "%C"  # the mix items: this cluster's channels
    # the copies: the fused pair entry's of its part of C (the TMA entries' copy registers are unused)
    CC = "%CH" if k.pair and not k.tma else "%C"
    C0 = f"""
    add.u32 {R.cgo}, {R.cgo}, %C0;                 // pair entry: this half's first channel""" if k.pair and not k.tma else ""
    return f"""    // ---- copy mapping: ipt = C/32 16-byte chunks per token row (4 streams x C/128); thread t
    // < tps ipt (tps = 256 / ipt tokens per pass) copies chunk t % ipt of tokens t / ipt + p tps
    shr.u32 %r1, {CC}, 5;                     // ipt
    mov.u32 %ctps, {nthr};
    div.u32 %ctps, %ctps, %r1;
    mul.lo.u32 %r2, %ctps, %r1;
    setp.lt.u32 {R.p_cp}, {tid}, %r2;
    div.u32 {R.ctk}, {tid}, %r1;
    setp.lt.and.u32 {R.p_cp}, {R.ctk}, {TT}, {R.p_cp}; // C < 512: a pass holds more than the tile
    mul.lo.u32 %r2, {R.ctk}, %r1;
    sub.u32 %r2, {tid}, %r2;                  // chunk of the row
    shr.u32 %r3, {CC}, 7;                     // chunks per stream slice
    div.u32 %r4, %r2, %r3;                  // stream
{"    mov.u32 " + R.cfs + ", %r4;" + chr(10) if fused else ""}    mul.lo.u32 %r5, %r4, %r3;
    sub.u32 %r5, %r2, %r5;                  // chunk of the slice
    mul.lo.u32 {R.cgo}, %r4, %C;
    mad.lo.u32 {R.cgo}, %rank, %C16, {R.cgo};{C0}
    shl.b32 %r6, %r5, 3;
    add.u32 {R.cgo}, {R.cgo}, %r6;
    shl.b32 {R.cgo}, {R.cgo}, 1;                  // byte offset in an x row
    mul.lo.u32 {R.cso}, {R.ctk}, %tstride;
    mad.lo.u32 {R.cso}, %r4, {SREG}, {R.cso};
    mad.lo.u32 {R.cso}, %r5, 16, {R.cso};         // byte offset in a stage
    shr.u32 %r1, {CW}, 7;                     // cpt
    mov.u32 %mtp, {nthr};
    div.u32 %mtp, %mtp, %r1;
    mul.lo.u32 %r2, %mtp, %r1;
    setp.lt.u32 %p_mx, {tid}, %r2;
    div.u32 %mtk, {tid}, %r1;
    mul.lo.u32 %r2, %mtk, %r1;
    sub.u32 %mch, {tid}, %r2;
    // ---- prologue: tiles cid + j ncl into stages j < {k.ahead}"""


def prologue_fill(k, tag):
    """The math warps' first fills: tiles cid + j ncl into stages j < k.ahead (f stages j too)."""
    e = k.e
    for j in range(k.ahead):
        e(f"""    mad.lo.u32 %r20, %ncl, {j}, %cid;
    mov.u32 %r21, {j};""")
        issue(k, "%r20", "%r21", f"{tag}{j}", fstage_reg="%r21" if k.fring else None)


def fill(k, tile_reg, stage_reg, tag):
    tma, VT = k.tma, k.VT
    if tma:
        tma_fill(k, tile_reg, stage_reg, tag)
        return
    for v in range(VT):
        issue(k, tile_reg, stage_reg, f"{tag}V{v}", v)


def tma_fill(k, tile_reg, stage_reg, tag):
    """TMA entry: lane 0 of each mix warp arms full[stage] (two arrivals) for its half of the
            stage, 4C bytes, and copies it: streams 2 w .. 2 w + 1 of tile tile_reg, C/1024 blocks
            of 64 channels x 16 tokens each (tokens past T read as zeros; nothing is stored for
            them); nothing past the last tile. One thread issuing all 16 copies of a stage
            (C = 4096) spends ~1200 cycles a round on them and barrier 3 behind it (phase
            stamps, docs/kernels/pre.md); split, each warp's lane 0 issues 8."""
    e = k.e
    CW = "%CH" if k.pair else "%C"
    C0 = """
    add.u32 %r14, %r14, %C0;                // pair entry: this half's channels""" if k.pair else ""
    e(f"""    // ---- fill: tile {tile_reg} -> stage {stage_reg} (TMA)
    and.b32 %r16, %tm, 31;
    setp.ne.u32 %p2, %r16, 0;
    setp.ge.or.u32 %p2, {tile_reg}, %ntiles, %p2;
    @%p2 bra {tag}_END;
    mov.u32 %r10, full;
    mad.lo.u32 %r10, {stage_reg}, 8, %r10;
    shl.b32 %r11, {CW}, 2;
    mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%r10], %r11;
    shr.u32 %r17, %tm, 4;                   // first stream: 2 w
    mad.lo.u32 %r12, {stage_reg}, %sstage, %dsm;
    mad.lo.u32 %r12, %r17, {TT * 128}, %r12;
    shl.b32 %r13, {tile_reg}, 4;            // token coordinate
    mul.lo.u32 %r14, %rank, %C16;           // element of the token row: stream 2 w, block 0{C0}
    mad.lo.u32 %r14, %r17, %C, %r14;
    shr.u32 %r15, {CW}, 10;                   // blocks
{tag}_BLK:
    add.u32 %r16, %r14, %C;
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r12], [%rd7, {{%r14, %r13}}], [%r10];
    cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r12+{TT * 128}], [%rd7, {{%r16, %r13}}], [%r10];
    add.u32 %r12, %r12, {TBLK};
    add.u32 %r14, %r14, {TBOX};
    sub.u32 %r15, %r15, 1;
    setp.ne.u32 %p2, %r15, 0;
    @%p2 bra {tag}_BLK;
{tag}_END:""")
