"""Layer l's `post` folded into the few-token `pre` (the post_pre entries of
asm/ptx/sm90/pre_decode.ptx): the blocks the mid / mid16 text gains when it is `post_pre`.

CTA s already loads its channel slice of every stream of every token into shared memory, which
is exactly what `post` needs for those channels: `x'[i][c] = h_post[i] f[c] + sum_j w[i][j]
x[j][c]`. So the load phase also brings f's slice and the tokens' coefficients into shared
memory. After the slices land, x' is computed with post.ptx's f32 operations in post.ptx's order
(mid16 and mid_n8: a warp per token, a lane per output stream and 8-channel chunk; mid: a
thread per (token, 4-channel quad) item, every output stream of it from its own shared-memory
loads),
stored to `x_out` rounded to the storage type and written back, rounded, over the x slice. The
projection, the sums of squares and the mix then read x' from there: x' is stored once and never
read back, and the outputs are those of `post` followed by `pre`, bit for bit.

`w` is the entry's Streams (pre_decode.py): its hp streams per token (4: n = 1, 2, 4 chosen at
run time; 8: the mid_n8 entries, n fixed) size the coefficients and the lanes of a stream.
"""

from .abi import POST_PRE_PC

ROW = 1040        # bytes per shared token row of the x slice (pre_decode.ROW)
F_ROW = 256       # bytes per token of the f slice in shared memory: 64 channels (MAX_CPC) as f32
LOAD_TOKENS = 32  # tokens per round of the f loads: 256 threads / 8 chunks

# PostPrePcArgs's fields past the pre side, and their registers.
ARG_REGS = {"f": "%uF", "h_post_in": "%uHP", "h_res_in": "%uHR", "x_out": "%uXO", "f_stride": "%uFS",
            "x_out_stride": "%uXS"}


def f_loads(tm):
    """f chunks a thread loads: 8 chunks of each of tm token rows over 256 threads."""
    return -(-tm // LOAD_TOKENS)


def res_slots(tm, hp):
    """h_res words a thread copies: tm tokens of up to hp x hp over 256 threads."""
    return -(-tm * hp * hp // 256)


def dense(tm, w):
    """The mid16 entries (tm = 16 token rows) and the mid_n8 / mid32_n8 entries keep the
    coefficients as dense as in global memory (h_post[tm][n], h_res[tm][n][n]), read by a warp per
    token; the mid entries pad them to n = 4 (h_post[tm][4], W[tm][4][4] with W[t][i][j] the
    weight of x[j] in output stream i), so that a token's coefficients are five 16-byte loads for
    the 4-channel items (docs/kernels/post_pre.md has the measurements behind the two forms)."""
    return tm <= 16 or w.hp == 8


def hpost_bytes(tm, w):
    """Bytes of the coefficients' h_post part: h_post[tm][hp] (the padded W follows it too)."""
    return tm * 4 * w.hp


def symbols(tm, w):
    """(f rows, coefficients) of an entry with tm token rows: f_s[tm][64] f32; the coefficients
    (dense() says which layout), h_post first and, hpost_bytes in, h_res / W. The f rows are
    one layout for every Streams; the coefficients are sized by w.hp (the suffix of its symbols)."""
    return f"sm_uf{tm}", w.sym(f"sm_uc{tm}")


def shared_declarations(tm, w, f_rows=True):
    """The entries' shared arrays; f_rows=False: only the coefficients (f's rows are declared)."""
    f, c = symbols(tm, w)
    hp, size = hpost_bytes(tm, w), tm * 4 * (w.hp + w.hp * w.hp)
    rows = (f".shared .align 16 .b8 {f}[{tm * F_ROW}];{' ' * (9 - len(str(tm * F_ROW)))}"
            f"// post_pre: f slice [{tm}][64] f32 (bf16 widened)\n") if f_rows else ""
    return (rows + f".shared .align 16 .b8 {c}[{size}];{' ' * (9 - len(str(size)))}"
            f"// post_pre: h_post [{tm}][{'n' if dense(tm, w) else 4}], then at {hp} "
            f"{'h_res [' + str(tm) + '][n][n]' if dense(tm, w) else 'W [' + str(tm) + '][4][4]'}")


def declarations(tm, w):
    return f"""    .reg .b64 %uF, %uHP, %uHR, %uXO, %ua<4>;
    .reg .b32 %uFS, %uXS, %ub<16>;
    .reg .b32 %uf<{8 * f_loads(tm)}>;
    .reg .f32 %ucw<{1 + res_slots(tm, w.hp)}>;
    {step_regs_dense(w) if dense(tm, w) else STEP_REGS_ITEMS}
    .reg .pred %up<4>, {"%uw<4>, " if dense(tm, w) else ""}%uq<{f_loads(tm)}>{", %uok" if dense(tm, w) else ""};"""


# the x' step's registers: a warp per token (dense: a lane's 8 channels of each of hp streams,
# its output, the weights and h_post, f), 4-channel items (padded; %ud: layout indices)
def step_regs_dense(w):
    return f".reg .f32 %ux<{8 * w.hp}>, %uo<8>, %uc<{w.hp + 1}>, %uv<8>;"

STEP_REGS_ITEMS = """.reg .b32 %ud<10>;
    .reg .f32 %ux<16>, %uo<16>, %uv<4>, %uh<4>, %ur<16>;"""


def load_args():
    return "\n".join("    " + line for line in POST_PRE_PC.ld_params(ARG_REGS, base="p_args"))


def loads(bf, tm, w, exp=frozenset()):
    """Issued with the slices' loads: f's chunks (thread tid: token tid / 8 + 32 k, chunk q = tid %
    8, channels c0 + 8q .. +7; %uq<k>: the chunk is real) and the thread's words of h_post (tid <
    T n) and h_res (tid + 256 k < T n n). Experiment nopload: none of these loads (timing only)."""
    esz = 2 if bf else 4
    skip = "// " if "nopload" in exp else ""
    L = []
    e = L.append
    e(f"""    // ---- post_pre: layer l's f chunks and coefficients, loaded with the slices
    and.b32 %ub0, %tx, 7;                   // chunk q
    shl.b32 %ub1, %ub0, 3;
    add.u32 %ub1, %ub1, %c0;                // its first channel
    setp.lt.u32 %up0, %ub0, %nch;
    setp.lt.u32 %up1, %ub1, %C;
    and.pred %up0, %up0, %up1;              // the chunk is this CTA's and inside C
    shr.u32 %ub2, %tx, 3;                   // token of the first chunk""")
    for k in range(f_loads(tm)):
        regs = [f"%uf{8 * k + r}" for r in range(8 if not bf else 4)]
        e(f"""    add.u32 %ub3, %ub2, {LOAD_TOKENS * k};
    setp.lt.u32 %uq{k}, %ub3, %T;
    and.pred %uq{k}, %uq{k}, %up0;
    mad.lo.u32 %ub4, %ub3, %uFS, %ub1;      // f element t f_stride + channel
    mul.wide.u32 %ua0, %ub4, {esz};
    add.u64 %ua0, %uF, %ua0;
    {skip}@%uq{k} ld.global.nc.v4.b32 {{{', '.join(regs[:4])}}}, [%ua0];""")
        if not bf:
            e(f"    {skip}@%uq{k} ld.global.nc.v4.b32 {{{', '.join(regs[4:])}}}, [%ua0+16];")
    e(f"""    mul.lo.u32 %ub5, %T, %n;                // T n h_post words
    mul.lo.u32 %ub6, %ub5, %n;              // T n n h_res words
    mul.wide.u32 %ua1, %tx, 4;
    setp.lt.u32 %p1, %tx, %ub5;
    add.u64 %ua2, %uHP, %ua1;
    {skip}@%p1 ld.global.nc.f32 %ucw0, [%ua2];
    add.u64 %ua2, %uHR, %ua1;""")
    for k in range(res_slots(tm, w.hp)):
        e(f"""    add.u32 %ub7, %tx, {256 * k};
    setp.lt.u32 %p1, %ub7, %ub6;
    {skip}@%p1 ld.global.nc.f32 %ucw{1 + k}, [%ua2+{1024 * k}];""")
    return "\n".join(L)


def stores(bf, tm, w):
    """Before the load phase's barrier: the f chunks (as f32) to f_s[t][8q ..], the coefficient
    words to the same places in their shared arrays."""
    fs, co = symbols(tm, w)
    L = []
    e = L.append
    e(f"""    // ---- post_pre: f chunks -> {fs}[t][8q ..], coefficients -> {co}
    mov.u32 %ub8, {fs};
    mad.lo.u32 %ub8, %ub2, {F_ROW}, %ub8;
    shl.b32 %ub9, %ub0, 5;
    add.u32 %ub8, %ub8, %ub9;               // &f_s[t][8q]""")
    for k in range(f_loads(tm)):
        if bf:
            for r in range(4):
                e(f"""    shl.b32 %r{2*r+1}, %uf{8*k+r}, 16;
    and.b32 %r{2*r+2}, %uf{8*k+r}, 0xffff0000;""")
            vals = [f"%r{r}" for r in range(1, 9)]
        else:
            vals = [f"%uf{8*k+r}" for r in range(8)]
        e(f"""    @%uq{k} st.shared.v4.b32 [%ub8+{LOAD_TOKENS * F_ROW * k}], {{{', '.join(vals[:4])}}};
    @%uq{k} st.shared.v4.b32 [%ub8+{LOAD_TOKENS * F_ROW * k + 16}], {{{', '.join(vals[4:])}}};""")
    if dense(tm, w):  # mid16, mid_n8: the words as dense as in global memory
        e(f"""    mov.u32 %ub8, {co};
    shl.b32 %ub9, %tx, 2;
    add.u32 %ub8, %ub8, %ub9;
    setp.lt.u32 %p1, %tx, %ub5;
    @%p1 st.shared.f32 [%ub8], %ucw0;""")
        for k in range(res_slots(tm, w.hp)):
            e(f"""    add.u32 %ub7, %tx, {256 * k};
    setp.lt.u32 %p1, %ub7, %ub6;
    @%p1 st.shared.f32 [%ub8+{hpost_bytes(tm, w) + 1024 * k}], %ucw{1 + k};""")
        return "\n".join(L)
    e(f"""    // h_post word tid (token t = tid >> log2 n, stream i) -> {co}[t][i]; h_res word tid + 256 k
    // (token t, row r, column c) -> W[t][c][r] (DeepSeek-V4: w[i][j] = h_res[j][i]) or W[t][r][c]
    // (Paper: w[i][j] = h_res[i][j]); n = 1, 2, 4
    shr.u32 %ud0, %n, 1;                    // log2 n
    sub.u32 %ud1, %n, 1;
    mov.u32 %ub8, {co};
    shr.u32 %ud2, %tx, %ud0;
    and.b32 %ud3, %tx, %ud1;
    shl.b32 %ud2, %ud2, 4;
    shl.b32 %ud3, %ud3, 2;
    add.u32 %ud2, %ud2, %ud3;
    add.u32 %ud2, %ud2, %ub8;
    setp.lt.u32 %p1, %tx, %ub5;
    @%p1 st.shared.f32 [%ud2], %ucw0;
    shl.b32 %ud4, %ud0, 1;                  // log2(n n)
    mul.lo.u32 %ud5, %n, %n;
    sub.u32 %ud5, %ud5, 1;""")
    for k in range(res_slots(tm, w.hp)):
        e(f"""    add.u32 %ub7, %tx, {256 * k};
    shr.u32 %ud2, %ub7, %ud4;               // t
    and.b32 %ud3, %ub7, %ud5;
    shr.u32 %ud6, %ud3, %ud0;               // r
    and.b32 %ud3, %ud3, %ud1;               // c
    selp.u32 %ud7, %ud6, %ud3, %p_paper;    // W's row
    selp.u32 %ud8, %ud3, %ud6, %p_paper;    // W's column
    shl.b32 %ud2, %ud2, 6;
    shl.b32 %ud7, %ud7, 4;
    shl.b32 %ud8, %ud8, 2;
    add.u32 %ud2, %ud2, %ud7;
    add.u32 %ud2, %ud2, %ud8;
    add.u32 %ud2, %ud2, %ub8;
    setp.lt.u32 %p1, %ub7, %ub6;
    @%p1 st.shared.f32 [%ud2+{tm * 16}], %ucw{1 + k};""")
    return "\n".join(L)


def step(b, bf, tm):
    """After the load phase's barrier: x' = post(x) over the CTA's slice, written back over x_s,
    then a barrier, so the projection reads x'. mid16 and the n = 8 entries: a warp per token;
    mid: 4-channel items over every thread (measured in docs/kernels/post_pre.md). Experiments
    (timing only): nopost, no x' computed (the barrier stays); noxo, x' not stored to x_out."""
    if "nopost" in b.exp:
        return "    barrier.sync 0;                         // EXP nopost: no x'"
    xo = "// " if "noxo" in b.exp else ""  # the x_out stores, commented out in noxo
    return (step_token_warps if dense(tm, b.w) else step_items)(b, bf, tm, xo)


# Predicates of streams 0..3 (%up<j>: j < n), prefixed to the work of stream j.
STREAM_PRED = ["", "@%up1 ", "@%up2 ", "@%up3 "]


def step_token_warps(b, bf, tm, xo):
    """mid16 / mid_n8: warp w computes x' of tokens w, w + 8, ... < T, lane (i = lane / Q,
    q = lane % Q; Q = 32 / hp chunks, as many as a CTA's channels hold: 64 / hp <= 8 x Q) output
    stream i of chunk q (coefficients in the dense layout), and writes it back over x_s once
    every lane of the warp has read the token's x. hp = 4 serves n = 1, 2, 4 (streams past n
    predicated off); the mid_n8 entries' n is 8."""
    esz = 2 if bf else 4
    w = b.w
    hp = w.hp
    fixed = len(w.ns) == 1  # one n: every stream real, no per-stream predicates
    lanes_q = 32 // hp
    fs, co = symbols(tm, w)
    pj = [""] * hp if fixed else STREAM_PRED
    reads = ["@%uok "] * hp if fixed else [f"@%uw{j} " for j in range(hp)]
    L = []
    e = L.append
    e(f"""    // ---- post_pre: x' = post(x). Warp w: tokens t = w, w + 8, ... < T; lane: output stream
    // i = lane / {lanes_q} of chunk q = lane % {lanes_q} (%uok: {"" if fixed else "i < n, "}the chunk real). post.ptx's f32 operations
    // in its order: h_post[i] f, then + w[i][j] x[j] for j = 0 .. n-1, where w[i][j] = h_res[j][i]
    // (DeepSeek-V4) or h_res[i][j] (Paper); stored to x_out rounded to the storage type and
    // written back over x_s[t][i][8q ..] once every lane of the warp has read the token's x""")
    if not fixed:
        e("""    setp.lt.u32 %up1, 1, %n;
    setp.lt.u32 %up2, 2, %n;
    setp.lt.u32 %up3, 3, %n;""")
    e(f"""    and.b32 %ub0, %lane, {lanes_q - 1};                 // q
    shr.u32 %ub1, %lane, {lanes_q.bit_length() - 1};                 // i
    shl.b32 %ub2, %ub0, 3;
    add.u32 %ub2, %ub2, %c0;                // first channel
    setp.lt.u32 %uok, %ub0, %nch;
    setp.lt.u32 %p1, %ub2, %C;
    and.pred %uok, %uok, %p1;""")
    if not fixed:
        e("""    setp.lt.u32 %p1, %ub1, %n;
    and.pred %uok, %uok, %p1;
    mov.pred %uw0, %uok;                    // %uw<j>: this lane reads stream j
    and.pred %uw1, %up1, %uok;
    and.pred %uw2, %up2, %uok;
    and.pred %uw3, %up3, %uok;""")
    e(f"""    {b.smem("%ub3", "x")}
    shl.b32 %ub4, %ub0, 5;
    add.u32 %ub3, %ub3, %ub4;               // &x_s[0][0 cpc + 8q]
    shl.b32 %ub5, %cpc, 2;                  // stream step (bytes)
    mad.lo.u32 %ub6, %ub1, %ub5, %ub3;      // &x_s[0][i cpc + 8q]
    mov.u32 %ub7, {fs};
    add.u32 %ub7, %ub7, %ub4;               // &f_s[0][8q]
    // the weights' offsets in a token's h_res (words): w[i][j] at j n + i (V4) or i n + j (Paper)
    mul.lo.u32 %ub8, %ub1, %n;              // i n
    selp.u32 %ub9, 1, %n, %p_paper;         // step over j
    selp.u32 %ub10, %ub8, %ub1, %p_paper;   // j = 0
    shl.b32 %ub9, %ub9, 2;
    shl.b32 %ub10, %ub10, 2;
    mul.lo.u32 %ub11, %n, %n;
    shl.b32 %ub11, %ub11, 2;                // bytes of a token's h_res
    mov.u32 %ub12, {co};
    mad.lo.u32 %ub12, %warp, %ub11, %ub12;
    add.u32 %ub12, %ub12, {hpost_bytes(tm, w)};
    add.u32 %ub12, %ub12, %ub10;            // &h_res[t = w] + w[i][0]
    shl.b32 %ub13, %n, 2;
    mov.u32 %ub10, {co};
    mad.lo.u32 %ub10, %warp, %ub13, %ub10;
    shl.b32 %ub14, %ub1, 2;
    add.u32 %ub10, %ub10, %ub14;            // &h_post[t = w][i]
    mad.lo.u32 %ub14, %ub1, %C, %ub2;       // x_out element of (t = 0, i, channel)
    mov.u32 %ub15, %warp;                   // t
UPOST_LOOP:
    setp.ge.u32 %p1, %ub15, %T;
    @%p1 bra UPOST_END;
    mad.lo.u32 %ub4, %ub15, {ROW}, %ub3;    // &x_s[t][8q]""")
    for j in range(hp):
        e(f"""    {reads[j]}ld.shared.v4.f32 {{%ux{8*j}, %ux{8*j+1}, %ux{8*j+2}, %ux{8*j+3}}}, [%ub4];
    {reads[j]}ld.shared.v4.f32 {{%ux{8*j+4}, %ux{8*j+5}, %ux{8*j+6}, %ux{8*j+7}}}, [%ub4+16];""")
        if j < hp - 1:
            e("    add.u32 %ub4, %ub4, %ub5;")
    e(f"""    mad.lo.u32 %ub4, %ub15, {F_ROW}, %ub7;
    @%uok ld.shared.v4.f32 {{%uv0, %uv1, %uv2, %uv3}}, [%ub4];
    @%uok ld.shared.v4.f32 {{%uv4, %uv5, %uv6, %uv7}}, [%ub4+16];
    @%uok ld.shared.f32 %uc{hp}, [%ub10];
    mov.u32 %ub4, %ub12;""")
    for j in range(hp):
        e(f"    {reads[j]}ld.shared.f32 %uc{j}, [%ub4];")
        if j < hp - 1:
            e("    add.u32 %ub4, %ub4, %ub9;")
    for v in range(8):
        e(f"    mul.rn.f32 %uo{v}, %uc{hp}, %uv{v};")
    for j in range(hp):
        for v in range(8):
            e(f"    {pj[j]}fma.rn.f32 %uo{v}, %uc{j}, %ux{8*j+v}, %uo{v};")
    e(f"""    bar.warp.sync -1;                       // every lane has read the token's x
    mad.lo.u32 %ub4, %ub15, %uXS, %ub14;
    mul.wide.u32 %ua3, %ub4, {esz};
    add.u64 %ua3, %uXO, %ua3;
    mad.lo.u32 %ub4, %ub15, {ROW}, %ub6;    // &x_s[t][i cpc + 8q]""")
    if bf:
        for r in range(4):
            e(f"    cvt.rn.bf16x2.f32 %r{9 + r}, %uo{2*r+1}, %uo{2*r};")
        e(f"    {xo}@%uok st.global.v4.b32 [%ua3], {{%r9, %r10, %r11, %r12}};")
        for r in range(4):  # the stored values back, widened
            e(f"""    shl.b32 %r{2*r+1}, %r{9 + r}, 16;
    and.b32 %r{2*r+2}, %r{9 + r}, 0xffff0000;""")
        e("""    @%uok st.shared.v4.b32 [%ub4], {%r1, %r2, %r3, %r4};
    @%uok st.shared.v4.b32 [%ub4+16], {%r5, %r6, %r7, %r8};""")
    else:
        e(f"""    {xo}@%uok st.global.v4.f32 [%ua3], {{%uo0, %uo1, %uo2, %uo3}};
    {xo}@%uok st.global.v4.f32 [%ua3+16], {{%uo4, %uo5, %uo6, %uo7}};
    @%uok st.shared.v4.f32 [%ub4], {{%uo0, %uo1, %uo2, %uo3}};
    @%uok st.shared.v4.f32 [%ub4+16], {{%uo4, %uo5, %uo6, %uo7}};""")
    e("""    shl.b32 %ub4, %ub11, 3;
    add.u32 %ub12, %ub12, %ub4;             // 8 tokens on
    shl.b32 %ub4, %ub13, 3;
    add.u32 %ub10, %ub10, %ub4;
    add.u32 %ub15, %ub15, 8;
    bra UPOST_LOOP;
UPOST_END:
    barrier.sync 0;                         // x' in x_s""")
    return "\n".join(L)


def step_items(b, bf, tm, xo):
    """mid: x' of the CTA's slice as (token t, quad g) items of 4 channels, NG = cpc / 4 quads per
    token: thread tid < K NG (K = 256 / NG, rounded down) takes quad g = tid % NG of tokens
    tid / NG, + K, + 2K, ... A thread computes its items' n output streams from its own loads and
    writes them back over x_s, words no other thread touches."""
    esz = 2 if bf else 4
    fs, co = symbols(tm, b.w)
    pj = STREAM_PRED
    L = []
    e = L.append
    e(f"""    // ---- post_pre: x' = post(x). Items (t, g): channels c0 + 4g .. +3 of every stream of token t.
    // post.ptx's f32 operations in its order: h_post[i] f, then + w[i][j] x[j] for
    // j = 0 .. n-1 (W[t][i][j] in shared memory); stored to x_out rounded to the storage type and
    // written back over x_s[t][i][4g ..]
    setp.lt.u32 %up1, 1, %n;
    setp.lt.u32 %up2, 2, %n;
    setp.lt.u32 %up3, 3, %n;
    shl.b32 %ud0, %nch, 1;                  // NG = 8 nch / 4
    div.u32 %ud1, 256, %ud0;                // K
    div.u32 %ub15, %tx, %ud0;               // t
    mul.lo.u32 %ub0, %ub15, %ud0;
    sub.u32 %ub0, %tx, %ub0;                // g
    setp.ge.u32 %p1, %ub15, %ud1;           // a thread past K NG has no item
    @%p1 bra UPOST_END;
    shl.b32 %ub2, %ub0, 2;
    add.u32 %ub2, %ub2, %c0;                // first channel
    setp.ge.u32 %p1, %ub2, %C;
    @%p1 bra UPOST_END;
    shl.b32 %ub5, %cpc, 2;                  // stream step in x_s (bytes)
    mul.wide.u32 %ua1, %C, {esz};           // stream step in x_out (bytes)
    shl.b32 %ub1, %ub0, 4;
    {b.smem("%ub3", "x")}
    add.u32 %ub3, %ub3, %ub1;               // &x_s[0][0 cpc + 4g]
    mov.u32 %ub7, {fs};
    add.u32 %ub7, %ub7, %ub1;               // &f_s[0][4g]
    mov.u32 %ub8, {co};
UPOST_LOOP:
    setp.ge.u32 %p1, %ub15, %T;
    @%p1 bra UPOST_END;
    mad.lo.u32 %ub4, %ub15, {ROW}, %ub3;    // &x_s[t][4g]
    mov.u32 %ub6, %ub4;""")
    def regs(base, k):
        return ", ".join(f"%{base}{k + v}" for v in range(4))
    for j in range(4):
        e(f"    {pj[j]}ld.shared.v4.f32 {{{regs('ux', 4 * j)}}}, [%ub6];")
        if j < 3:
            e("    add.u32 %ub6, %ub6, %ub5;")
    e(f"""    mad.lo.u32 %ub9, %ub15, {F_ROW}, %ub7;
    ld.shared.v4.f32 {{{regs('uv', 0)}}}, [%ub9];
    shl.b32 %ub9, %ub15, 4;
    add.u32 %ub9, %ub9, %ub8;
    ld.shared.v4.f32 {{%uh0, %uh1, %uh2, %uh3}}, [%ub9];
    shl.b32 %ub9, %ub15, 6;
    add.u32 %ub9, %ub9, %ub8;               // W[t] - {tm * 16}""")
    for i in range(4):
        e(f"    {pj[i]}ld.shared.v4.f32 {{%ur{4*i}, %ur{4*i+1}, %ur{4*i+2}, %ur{4*i+3}}}, [%ub9+{tm * 16 + 16 * i}];")
    for i in range(4):
        for v in range(4):
            e(f"    {pj[i]}mul.rn.f32 %uo{4*i+v}, %uh{i}, %uv{v};")
        for j in range(4):
            for v in range(4):
                e(f"    {pj[max(i, j)]}fma.rn.f32 %uo{4*i+v}, %ur{4*i+j}, %ux{4*j+v}, %uo{4*i+v};")
    e(f"""    mad.lo.u32 %ub6, %ub15, %uXS, %ub2;     // x_out element of (t, stream 0, channel)
    mul.wide.u32 %ua3, %ub6, {esz};
    add.u64 %ua3, %uXO, %ua3;""")
    for i in range(4):
        o = regs("uo", 4 * i)
        if bf:
            e(f"""    {pj[i]}cvt.rn.bf16x2.f32 %r9, %uo{4*i+1}, %uo{4*i};
    {pj[i]}cvt.rn.bf16x2.f32 %r10, %uo{4*i+3}, %uo{4*i+2};
    {xo}{pj[i]}st.global.v2.b32 [%ua3], {{%r9, %r10}};
    {pj[i]}shl.b32 %r1, %r9, 16;
    {pj[i]}and.b32 %r2, %r9, 0xffff0000;
    {pj[i]}shl.b32 %r3, %r10, 16;
    {pj[i]}and.b32 %r4, %r10, 0xffff0000;
    {pj[i]}st.shared.v4.b32 [%ub4], {{%r1, %r2, %r3, %r4}};""")
        else:
            e(f"""    {xo}{pj[i]}st.global.v4.f32 [%ua3], {{{o}}};
    {pj[i]}st.shared.v4.f32 [%ub4], {{{o}}};""")
        if i < 3:
            e("""    add.u64 %ua3, %ua3, %ua1;
    add.u32 %ub4, %ub4, %ub5;""")
    e("""    add.u32 %ub15, %ub15, %ud1;
    bra UPOST_LOOP;
UPOST_END:
    barrier.sync 0;                         // x' in x_s""")
    return "\n".join(L)
