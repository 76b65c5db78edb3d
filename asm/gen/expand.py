"""expand (docs/math.md "expand", the first layer), sm_90a: asm/ptx/sm90/expand.ptx."""

from .abi import EXPAND
from . import catalogue
from .ptx import Kernel, plain_entry, prologue
from .shapes import DTYPES, ESIZE, TMAX


EXPAND_ARGS = "\n".join([
    f"// struct ExpandArgs ({EXPAND.size} bytes):",
    "//   " + EXPAND.header_line(["e", "out", " (u64)", "e_stride", "out_stride", " (u64 bytes)"]),
    "//   " + EXPAND.header_line(["items", "chunks", "cbytes", "n", "   (u32)"])])


def expand_kernel(dtype):
    es = ESIZE[dtype]
    name = f"mhc_expand_{dtype}"
    k = Kernel()
    p = lambda s: k.reg("b64", s)
    u = lambda s: k.reg("b32", s)
    pe, po, se, so = p("pe"), p("po"), p("se"), p("so")
    items, chunks, cbytes, n = u("items"), u("chunks"), u("cbytes"), u("n")
    EXPAND.ld_params({"e": pe, "out": po, "e_stride": se, "out_stride": so, "items": items, "chunks": chunks,
                      "cbytes": cbytes, "n": n}, emit=k.ins)
    k.grid_dependency()
    gid, tid, ctaid, ntid, t, ch, tmp, j = (u(s) for s in ["gid", "tid", "ctaid", "ntid", "t", "ch", "tmp", "j"])
    pr = k.reg("pred", "p")
    k.ins(f"mov.u32 {tid}, %tid.x;")
    k.ins(f"mov.u32 {ctaid}, %ctaid.x;")
    k.ins(f"mov.u32 {ntid}, %ntid.x;")
    k.ins(f"mad.lo.u32 {gid}, {ctaid}, {ntid}, {tid};")
    k.ins(f"setp.ge.u32 {pr}, {gid}, {items};")
    k.ins(f"@{pr} bra DONE;")
    k.ins(f"div.u32 {t}, {gid}, {chunks};")
    k.ins(f"mul.lo.u32 {tmp}, {t}, {chunks};")
    k.ins(f"sub.u32 {ch}, {gid}, {tmp};")
    t64, cb, ae, ao, cb64 = p("t64"), p("cb"), p("ae"), p("ao"), p("cb64")
    k.ins(f"cvt.u64.u32 {t64}, {t};")
    k.ins(f"mul.wide.u32 {cb}, {ch}, {8 * es};")
    k.ins(f"mad.lo.u64 {ae}, {t64}, {se}, {pe};")
    k.ins(f"add.u64 {ae}, {ae}, {cb};")
    k.ins(f"mad.lo.u64 {ao}, {t64}, {so}, {po};")
    k.ins(f"add.u64 {ao}, {ao}, {cb};")
    k.ins(f"cvt.u64.u32 {cb64}, {cbytes};")
    words = [k.reg("b32", f"w{i}") for i in range(2 * es)]
    k.comment("8 channels = 16 (bf16) or 32 (f32) bytes, copied bit-exactly to each stream")
    for i in range(0, len(words), 4):
        k.ins(f"ld.global.nc.v4.b32 {{{', '.join(words[i:i + 4])}}}, [{ae}+{4 * i}];")
    k.ins(f"mov.u32 {j}, 0;")
    k.label("LOOP")
    for i in range(0, len(words), 4):
        k.ins(f"st.global.v4.b32 [{ao}+{4 * i}], {{{', '.join(words[i:i + 4])}}};")
    k.ins(f"add.u64 {ao}, {ao}, {cb64};")
    k.ins(f"add.u32 {j}, {j}, 1;")
    k.ins(f"setp.lt.u32 {pr}, {j}, {n};")
    k.ins(f"@{pr} bra LOOP;")
    return plain_entry(name, k, EXPAND.size)


def ptx_text():
    out = [prologue("8.8"), """
// ==============================================================================================
// expand (docs/math.md "expand", first layer): x[t][i][c] = e[t][c] for every stream i. sm_90a.
// Tile: one thread = one token x 8 channels; it loads 16/32 bytes once and stores them n times
//   (n is a run-time argument: a store loop, nothing to specialise). Grid = ceil(T C/8 / 256).
// Register plan: 4 (bf16) or 8 (f32) data words, addresses. Bytes: T C esize (1 + n).
// Measured (H200): T=8192 n=4 C=4096 bf16 87 us = 91% of copy; T=1 3.0 us back-to-back,
//   1.2 us in a graph.
""" + EXPAND_ARGS + "\n"]
    for dtype in DTYPES:
        out.append(expand_kernel(dtype)[1])
    return "\n".join(out)


def generate(experiments):
    """expand.ptx (no experiments)."""
    return {"asm/ptx/sm90/expand.ptx": ptx_text()}


def catalogue_rows():
    out, entry = catalogue.sm90_rows()
    big, gd = catalogue.ANY_C, catalogue.GRID_DEPENDENCY

    G = catalogue.geometry
    for dtype in DTYPES:
        entry(f"expand_{dtype}", "expand", ["v4", "paper"], "expand", f"mhc_expand_{dtype}", [dtype],
              list(range(1, 33)), (1, TMAX), 1, 256,
              "expand: 8 channels per thread loaded once, stored n times", "expand",
              G(channels_per_thread=8, traits=[gd]), xp=0,
              params=EXPAND.oneline())
    return out
