"""The argument layout of every sm_90a kernel family, defined once.

Each kernel takes one parameter block (coeffs: the same fields as separate parameters). A
`Layout` lists its fields in order with their Rust types; offsets and size follow the C layout
rules (#[repr(C)]). From it come the kernels' `ld.param` offsets and header tables, the
catalogue rows' `params` strings, and asm/src/abi/sm90.rs (the #[repr(C)] structs the runtime
builds). The field and struct names are the runtime's.
"""

# The Rust mirror of every layout below (written by rust_abi.py)
RUST_MIRROR = "asm/src/abi/sm90.rs"

SIZES = {"u64": 8, "u32": 4, "f32": 4, "u8": 1}
PTX_TYPES = {"u64": "u64", "u32": "u32", "f32": "f32"}


class Field:
    """name: the Rust field; ty: "u64", "u32", "f32", a Layout (nested struct) or (elem, count)
    (an array); doc: its Rust doc comment; group: fields of one group print together in the
    one-line form (default: the type); note: the PTX header's remark on it; c_type: its type in
    the C-style header of the coeffs kernels."""

    def __init__(self, name, ty, doc=None, group=None, note=None, c_type=None):
        self.name, self.ty, self.doc, self.note, self.c_type = name, ty, doc, note, c_type
        self.group = group or (ty if isinstance(ty, str) else name)
        self.off = None

    @property
    def size(self):
        if isinstance(self.ty, Layout):
            return self.ty.size
        if isinstance(self.ty, tuple):
            return SIZES[self.ty[0]] * self.ty[1]
        return SIZES[self.ty]

    @property
    def align(self):
        if isinstance(self.ty, Layout):
            return self.ty.align
        if isinstance(self.ty, tuple):
            return SIZES[self.ty[0]]
        return SIZES[self.ty]

    @property
    def rust_type(self):
        if isinstance(self.ty, Layout):
            return self.ty.name
        if isinstance(self.ty, tuple):
            return f"[{self.ty[0]}; {self.ty[1]}]"
        return self.ty


def f64s(*names, **kw):
    return [Field(n, "u64", **kw) for n in names]


def f32s(*names, **kw):
    return [Field(n, "u32", **kw) for n in names]


class Layout:
    """A #[repr(C)] parameter block."""

    def __init__(self, name, doc, fields, default=True, extra_asserts=()):
        self.name, self.doc, self.fields = name, doc, fields
        self.default = default  # derive Default (arrays longer than 32 cannot)
        self.extra_asserts = extra_asserts  # (field, offset) pairs asserted with offset_of!
        off = 0
        for f in fields:
            off = -(-off // f.align) * f.align
            f.off = off
            off += f.size
        self.align = max(f.align for f in fields)
        self.size = -(-off // self.align) * self.align

    def field(self, name):
        return next(f for f in self.fields if f.name == name)

    def offset(self, name):
        return self.field(name).off

    def ld_params(self, regs, base="args", emit=None):
        """ld.param of the fields named in regs (field -> register) in field order, at
        [base+offset]; emit(line) gets each instruction (indented), else they are returned."""
        out = [f"ld.param.{PTX_TYPES[f.ty]} {regs[f.name]}, [{base}+{f.off}];" for f in self.fields if f.name in regs]
        if emit is None:
            return out
        for line in out:
            emit(line)

    def param_list(self, prefix="p_"):
        """The fields as separate .param declarations (the coeffs kernels' parameters)."""
        return ",\n".join(f"    .param .{PTX_TYPES[f.ty]} {prefix}{f.name}" for f in self.fields)

    def oneline(self):
        """`Name { a, b: u64, c: u32, ... } (N B)`: the catalogue's params string."""
        groups = []
        for f in self.fields:
            if groups and groups[-1][0] == f.group:
                groups[-1][1].append(f)
            else:
                groups.append((f.group, [f]))
        body = ", ".join(", ".join(f.name for f in fs) + f": {fs[0].rust_type}" for _, fs in groups)
        return f"{self.name} {{ {body} }} ({self.size} B)"

    def header_line(self, items):
        """One line of a PTX header's offset table: field names print as `+offset name (note)`,
        other strings as they are (their own leading spaces); a field two spaces after what
        precedes it."""
        out = ""
        for it in items:
            if any(f.name == it for f in self.fields):
                f = self.field(it)
                out += ("  " if out else "") + f"+{f.off} {f.name}" + (f" ({f.note})" if f.note else "")
            else:
                out += it
        return out

    def c_struct(self, indent="//   "):
        """The coeffs headers' C-style listing: `name: type,  // offset  note`."""
        lines = [f"{indent}#[repr(C)] struct {self.name} {{"]
        for f in self.fields:
            decl = f"{f.name}: {f.c_type or f.rust_type},"
            line = f"{indent}    {decl:<22}// {f.off:2d}"
            lines.append(line + (f"  {f.note}" if f.note else ""))
        lines.append(f"{indent}}}")
        return "\n".join(lines)

    def rust(self):
        derive = "Debug, Clone, Copy, Default, Pod, Zeroable" if self.default else "Debug, Clone, Copy, Pod, Zeroable"
        out = [f"/// {line}" if line else "///" for line in self.doc.split("\n")]
        out += ["#[repr(C)]", f"#[derive({derive})]", f"pub struct {self.name} {{"]
        for f in self.fields:
            if f.doc:
                out += [f"    /// {line}" for line in f.doc.split("\n")]
            out.append(f"    pub {f.name}: {f.rust_type},")
        out.append("}")
        out.append(f"const _: () = assert!(std::mem::size_of::<{self.name}>() == {self.size});")
        for field, off in self.extra_asserts:
            out.append(f"const _: () = assert!(std::mem::offset_of!({self.name}, {field}) == {off});")
        return "\n".join(out)


POST = Layout("PostArgs", "`post` arguments (asm/ptx/sm90/post.ptx header).", [
    *f64s("x", "f", "h_post", "h_res", "out"),
    *f64s("x_stride", "f_stride", "out_stride", group="stride"),
    Field("items", "u32", note="T * chunks"), Field("chunks", "u32", note="C / V"),
    Field("cbytes", "u32", note="C * esize"), Field("pad", "u32"),
])

HEAD = Layout("HeadArgs", "`head` arguments (asm/ptx/sm90/head.ptx header).", [
    *f64s("x", "phi", "scale", "base", "out"),
    *f64s("x_stride", "out_stride", group="stride"),
    Field("tokens", "u32"), Field("cbytes", "u32"), Field("kchunks", "u32", note="nC/V1"),
    Field("cchunks", "u32", note="C/V2"),
    Field("eps_norm", "f32"), Field("eps_hc", "f32"), Field("inv_k", "f32", note="1/(nC)"),
    Field("pad", "u32"),
])

STATIC = Layout("StaticArgs", "`static` arguments (asm/ptx/sm90/static.ptx header).", [
    *f64s("x", "h_pre_logits", "h_post_logits", "h_res_logits", "gamma", "out"),
    *f64s("x_stride", "out_stride", group="stride"),
    Field("tokens", "u32"), Field("cbytes", "u32"), Field("cchunks", "u32", note="C/V"), Field("iters", "u32"),
    Field("eps_hc", "f32"), Field("eps_f", "f32"), Field("inv_c", "f32", note="1/C"),
    Field("pad", "u32"),
])

EXPAND = Layout("ExpandArgs", "`expand` arguments (asm/ptx/sm90/expand.ptx header).", [
    *f64s("e", "out"),
    *f64s("e_stride", "out_stride", group="stride"),
    Field("items", "u32", note="T * C/8"), Field("chunks", "u32", note="C/8"), Field("cbytes", "u32"),
    Field("n", "u32"),
])

COEFFS = Layout("CoeffsArgs", "`coeffs` arguments (asm/ptx/sm90/coeffs.ptx header).", [
    Field("p", "u64", c_type="*const f32", note="[T, p_stride] raw projections"),
    Field("inv_rms", "u64", c_type="*const f32", note="[T]"),
    Field("scale", "u64", c_type="*const f32", note="[3] ([1] in head mode)"),
    Field("base", "u64", c_type="*const f32", note="[M]"),
    Field("h_pre", "u64", c_type="*mut f32", note="[T, n]"),
    Field("h_post", "u64", c_type="*mut f32", note="[T, n]"),
    Field("h_res", "u64", c_type="*mut f32", note="[T, n, n]"),
    Field("tokens", "u32"), Field("streams", "u32", note="n"), Field("iters", "u32"), Field("eps_hc", "f32"),
    Field("flags", "u32", note="bit 0 Paper, bit 1 head mode"),
    Field("p_stride", "u32", note="elements between rows of P"),
])

PRE = Layout("PreArgs", "Arguments of `mhc_pre_sm90_*` (one `.param .align 8 .b8 p_args[232]`; offsets in the header\n"
             "of asm/ptx/sm90/pre.ptx). Unused pointers are 0 and never dereferenced.", [
    *f64s("x", "f", "h_post_in", "h_res_in", "x_out", "phi", "scale", "base", "gamma_k", "gamma_f", "a", "y",
          "h_pre", "h_post", "h_res", "inv_rms", "ws_p", "ws_ss", "ws_part", "ws_cnt"),
    *f32s("tokens", "n", "c", "k", "m"),
    Field("ldp", "u32", doc="Row stride of the logit buffers: M rounded up to 32 (one logit group = 4 mma n-tiles)."),
    Field("x_stride", "u32", doc="Row strides in elements."),
    *f32s("f_stride", "xo_stride", "a_stride", "y_stride"),
    Field("kslice", "u32", doc="Length of one CTA's slice of the reduction (j-space elements, a multiple of 256)."),
    Field("splits", "u32", doc="CTAs per 32-token tile (1 = prefill shape)."),
    Field("iters", "u32"),
    Field("flags", "u32", doc="1 = Paper formulation, 2 = gamma_k, 4 = gamma_f, 8 = post (post_pre), 16 = split\n"
                              "prefill (the last CTA of a tile finishes it alone; the others leave)."),
    Field("eps_norm", "f32"), Field("eps_hc", "f32"), Field("eps_f", "f32"),
])

PRE_DECODE = Layout("PreDecodeArgs", "Arguments of `mhc_pre_decode_sm90_*` (one `.param .align 8 .b8 p_args[144]`; offsets in the\n"
                    "header of asm/ptx/sm90/pre_decode.ptx). `gamma_k` is 0 unless flags bit 1.", [
    *f64s("x", "phi", "scale", "base", "gamma_k", "a", "h_pre", "h_post", "h_res", "inv_rms"),
    Field("ws_part", "u64", doc="Partial rows `[S][T][32]` of tagged words (ss, then the M logits; each word = f32 bits,\n"
                                "then the call's tag: see the PTX header, TAGS)."),
    Field("ws_sync", "u64", doc="The epoch word (u32: the previous call's tag; zero in a fresh workspace), then at +256\n"
                                "the mid kernel's tagged h_pre `[MID_HPRE_COPIES][64][4]`."),
    *f32s("tokens", "n", "c", "m"),
    Field("x_stride", "u32", doc="Row strides in elements."),
    Field("a_stride", "u32"),
    Field("cpc", "u32", doc="Channels per CTA (a multiple of 8, at most [`DECODE_MAX_CPC`])."),
    Field("iters", "u32"),
    Field("flags", "u32", doc="1 = Paper formulation, 2 = gamma_k."),
    Field("eps_norm", "f32"), Field("eps_hc", "f32"), Field("pad", "u32"),
])

PRE_GEMM = Layout("PreGemmArgs", "Arguments of `mhc_pre_gemm_bf16_n*` (one `.param .align 8 .b8 args[144]`; offsets in the\n"
                  "header of asm/ptx/sm90/pre_gemm.ptx).", [
    *f64s("x", "phi", "scale", "base", "a", "h_pre", "h_post", "h_res", "inv_rms"),
    Field("ws_cnt", "u64", doc="One u32 arrival counter per token tile (zero between calls)."),
    Field("ws_ss", "u64", doc="Partial sums of squares `[slab][256]` f32."),
    Field("ws_p", "u64", doc="Partial logits `[slab][256][NT * 128]` f32, slab = ks * tiles + tile."),
    Field("ws_sync", "u64", doc="The epoch word, the grid's arrival counter, then per token tile its ready word and\n"
                                "[`GEMM_MIX_PARTS`] claim words from byte 64 (tags: never reset; zero in a fresh workspace)."),
    *f32s("tokens", "c"),
    Field("x_stride", "u32", doc="Row strides in elements."),
    *f32s("a_stride", "ksplit"),
    Field("kstages", "u32", doc="Ring stages (64 K-elements each) per split."),
    Field("iters", "u32"),
    Field("flags", "u32", doc="1 = Paper formulation."),
    Field("eps_norm", "f32"), Field("eps_hc", "f32"),
])

POST_PRE_PC = Layout("PostPrePcArgs", "The fused entry's arguments: the `pre` side as the other entry's, then layer l's post inputs\n"
                     "and `x'` (the post_pre entries of asm/ptx/sm90/pre_pc.ptx).", [
    Field("pre", PRE_DECODE, doc="`x` here is layer l's residual (post's input), `x_stride` its row stride."),
    *f64s("f", "h_post_in", "h_res_in", "x_out"),
    Field("f_stride", "u32", doc="Row strides in elements."),
    Field("x_out_stride", "u32"),
])

PRE_TMA = Layout("PreTmaArgs", "The TMA entry's parameter bank: its one parameter (`p_args`: the other pre entry's arguments,\n"
                 "then at 192 the tensor map of x) is 64-byte aligned, as a tensor map must be, and sm_90's\n"
                 "parameters start 16 bytes past a 64-byte boundary, so ptxas puts it 48 bytes in. The launcher\n"
                 "points the driver at each parameter's offset in this struct (the loader reads the offsets and\n"
                 "the bank size, 368, from the cubin and checks them at load).", [
    Field("lead", ("u8", 48)), Field("pre", PRE_DECODE), Field("pad", ("u8", 48)), Field("tmap", ("u64", 16)),
], default=False, extra_asserts=(("tmap", "48 + 192"),))

LAYOUTS = [POST, HEAD, STATIC, EXPAND, COEFFS, PRE, PRE_DECODE, PRE_GEMM, POST_PRE_PC, PRE_TMA]

# The TMA entry's .param block starts at `pre` (48 bytes into the bank): the tensor map's offset
# in it, and its size.
TMA_TMAP = PRE_TMA.offset("tmap") - PRE_TMA.offset("pre")
TMA_PARAM_BYTES = PRE_TMA.size - PRE_TMA.offset("pre")
assert TMA_TMAP == 192 and PRE_TMA.offset("tmap") == 48 + 192 and PRE_TMA.size == 368
