"""Rows of activations and coefficients as f32 registers: global / shared loads and stores,
bf16 widened exactly (a 16-bit shift) and rounded once to nearest-even on the way out."""


def load_row(k, dtype, dst_prefix, addr, nvals, off=0, cache="nc"):
    """Loads nvals consecutive elements at [addr+off] as f32 registers dst_prefix_0..nvals-1.
    bf16 is loaded packed and widened exactly (bf16 -> f32 is a 16-bit shift)."""
    ld = "ld.global.nc" if cache == "nc" else "ld.global"
    vals = [k.reg("f32", f"{dst_prefix}_{v}") for v in range(nvals)]
    if dtype == "f32":
        i = 0
        while i < nvals:
            w = min(4, nvals - i)
            regs = vals[i : i + w]
            if w == 1:
                k.ins(f"{ld}.f32 {regs[0]}, [{addr}+{off + 4 * i}];")
            else:
                k.ins(f"{ld}.v{w}.f32 {{{', '.join(regs)}}}, [{addr}+{off + 4 * i}];")
            i += w
    else:
        if nvals == 1:
            w = k.reg("b32", f"{dst_prefix}_w0")
            k.ins(f"{ld}.u16 {w}, [{addr}+{off}];")
            k.ins(f"shl.b32 {vals[0]}, {w}, 16;")
            return vals
        nw = nvals // 2
        words = [k.reg("b32", f"{dst_prefix}_w{i}") for i in range(nw)]
        if nw == 1:
            k.ins(f"{ld}.b32 {words[0]}, [{addr}+{off}];")
        else:
            k.ins(f"{ld}.v{nw}.b32 {{{', '.join(words)}}}, [{addr}+{off}];")
        for i, w in enumerate(words):
            k.ins(f"shl.b32 {vals[2 * i]}, {w}, 16;")
            k.ins(f"and.b32 {vals[2 * i + 1]}, {w}, 0xffff0000;")
    return vals


def ld_shared_row(k, dtype, addr, count, wprefix, xprefix):
    """count activations at shared [addr] as f32 registers xprefix0.. (bf16: 32-bit words
    wprefix0.. unpacked by shift / mask)."""
    if dtype == "f32":
        return load_f32_run(k, xprefix, addr, count, space="shared")
    nw = count // 2
    ws = [k.reg("b32", f"{wprefix}{w}") for w in range(nw)]
    if nw == 1:
        k.ins(f"ld.shared.b32 {ws[0]}, [{addr}];")
    else:
        k.ins(f"ld.shared.v{nw}.b32 {{{', '.join(ws)}}}, [{addr}];")
    xv = [k.reg("f32", f"{xprefix}{v}") for v in range(count)]
    for w in range(nw):
        k.ins(f"shl.b32 {xv[2 * w]}, {ws[w]}, 16;")
        k.ins(f"and.b32 {xv[2 * w + 1]}, {ws[w]}, 0xffff0000;")
    return xv


def store_row(k, dtype, vals, addr, off=0, tag="s"):
    """Stores f32 registers vals at [addr+off], rounding once to nearest-even for bf16."""
    if dtype == "f32":
        i = 0
        while i < len(vals):
            w = min(4, len(vals) - i)
            if w == 1:
                k.ins(f"st.global.f32 [{addr}+{off + 4 * i}], {vals[i]};")
            else:
                k.ins(f"st.global.v{w}.f32 [{addr}+{off + 4 * i}], {{{', '.join(vals[i:i + w])}}};")
            i += w
    else:
        if len(vals) == 1:
            h = k.reg("b16", f"{tag}_h")
            k.ins(f"cvt.rn.bf16.f32 {h}, {vals[0]};")
            k.ins(f"st.global.b16 [{addr}+{off}], {h};")
            return
        words = []
        for i in range(len(vals) // 2):
            w = k.reg("b32", f"{tag}_p{i}")
            # cvt.rn.bf16x2.f32 d, a, b puts a in the high half, b in the low half.
            k.ins(f"cvt.rn.bf16x2.f32 {w}, {vals[2 * i + 1]}, {vals[2 * i]};")
            words.append(w)
        if len(words) == 1:
            k.ins(f"st.global.b32 [{addr}+{off}], {words[0]};")
        else:
            k.ins(f"st.global.v{len(words)}.b32 [{addr}+{off}], {{{', '.join(words)}}};")


def load_f32_run(k, prefix, addr, count, off=0, space="global.nc"):
    """count consecutive f32 at [addr+off] (16-byte vectors where the run allows)."""
    vals = [k.reg("f32", f"{prefix}{i}") for i in range(count)]
    i = 0
    while i < count:
        w = 4 if count - i >= 4 else (2 if count - i >= 2 else 1)
        regs = vals[i : i + w]
        if w == 1:
            k.ins(f"ld.{space}.f32 {regs[0]}, [{addr}+{off + 4 * i}];")
        else:
            k.ins(f"ld.{space}.v{w}.f32 {{{', '.join(regs)}}}, [{addr}+{off + 4 * i}];")
        i += w
    return vals



def st_shared_f32(k, vals, addr):
    """f32 registers to shared memory at addr, in 16-byte stores where four fit."""
    i = 0
    while i < len(vals):
        w = min(4, len(vals) - i)
        if w == 1:
            k.ins(f"st.shared.f32 [{addr}+{4 * i}], {vals[i]};")
        else:
            k.ins(f"st.shared.v{w}.f32 [{addr}+{4 * i}], {{{', '.join(vals[i:i + w])}}};")
        i += w

