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


def fields(ty, *items, **kw):
    """Fields of type ty, each given as (name, doc)."""
    return [Field(name, ty, doc=doc, **kw) for name, doc in items]


def f64s(*items, **kw):
    return fields("u64", *items, **kw)


def f32s(*items, **kw):
    return fields("u32", *items, **kw)


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
            assert f.doc, f"{self.name}.{f.name}: every field of a Rust struct has a doc"
            out += [f"    /// {line}" for line in f.doc.split("\n")]
            out.append(f"    pub {f.name}: {f.rust_type},")
        out.append("}")
        out.append(f"const _: () = assert!(std::mem::size_of::<{self.name}>() == {self.size});")
        for field, off in self.extra_asserts:
            out.append(f"const _: () = assert!(std::mem::offset_of!({self.name}, {field}) == {off});")
        return "\n".join(out)


# Field docs: pointers are device addresses of the tensors named (storage dtype: bf16 or f32 as the
# entry's name says; coefficients, parameters and workspaces f32); 0 where the kernel neither reads
# nor writes them.

POST = Layout("PostArgs", "`post` arguments (asm/ptx/sm90/post.ptx header).", [
    *f64s(("x", "The residual `x[T][n][C]` (storage dtype)."),
          ("f", "The sublayer output `f[T][C]` (storage dtype)."),
          ("h_post", "The post coefficients `h_post[T][n]` (f32)."),
          ("h_res", "The residual mixing matrices `h_res[T][n][n]` (f32)."),
          ("out", "The output `x'[T][n][C]` (storage dtype)."),),
    *f64s(("x_stride", "Bytes between token rows of `x`."),
          ("f_stride", "Bytes between token rows of `f`."),
          ("out_stride", "Bytes between token rows of `out`."), group="stride"),
    Field("items", "u32", note="T * chunks",
          doc="Work items: T * `chunks` (the tensor-core kernels: T, one CTA per token)."),
    Field("chunks", "u32", note="C / V",
          doc="Channel chunks of a token: C / V, V channels per thread (the tensor-core kernels: C / 8)."),
    Field("cbytes", "u32", note="C * esize", doc="Bytes of one stream row: C * element size."),
    Field("pad", "u32", doc="Unused; 0."),
])

HEAD = Layout("HeadArgs", "`head` arguments (asm/ptx/sm90/head.ptx header).", [
    *f64s(("x", "The residual `x[T][n][C]` (storage dtype)."),
          ("phi", "The projection `phi[n][n*C]` (f32)."),
          ("scale", "The logit scale `scale[1]` (f32)."),
          ("base", "The logit bias `base[n]` (f32)."),
          ("out", "The output `out[T][C]` (storage dtype)."),),
    *f64s(("x_stride", "Bytes between token rows of `x`."),
          ("out_stride", "Bytes between token rows of `out`."), group="stride"),
    Field("tokens", "u32", doc="T, the token count."),
    Field("cbytes", "u32", doc="Bytes of one stream row: C * element size."),
    Field("kchunks", "u32", note="nC/V1",
          doc="Phase-1 chunks of the flattened row (n*C / V1); the cluster kernels: chunks per CTA."),
    Field("cchunks", "u32", note="C/V2",
          doc="Phase-2 chunks of C (C / V2); the cluster kernels: chunks of C (V1 elements, or 16 bytes\n"
              "for the persistent kernels)."),
    Field("eps_norm", "f32", doc="Added to the mean square of the row under the reciprocal square root (`inv_rms`)."),
    Field("eps_hc", "f32", doc="Added to every weight `h_i = sigma(g_i scale + base_i) + eps_hc`."),
    Field("inv_k", "f32", note="1/(nC)", doc="1 / (n * C), the mean square's factor."),
    Field("pad", "u32", doc="Unused; 0."),
])

STATIC = Layout("StaticArgs", "`static` arguments (asm/ptx/sm90/static.ptx header).", [
    *f64s(("x", "The residual `x[T][n][C]` (storage dtype)."),
          ("h_pre_logits", "The pre logits `H_pre[n]` (f32), shared by all tokens."),
          ("h_post_logits", "The post logits `H_post[n]` (f32), shared by all tokens."),
          ("h_res_logits", "The residual logits `H_res[n][n]` (f32), shared by all tokens."),
          ("gamma", "The F-pre-norm weights `gamma[C]` (f32, 16-byte aligned)."),
          ("out", "The output `x'[T][n][C]` (storage dtype)."),),
    *f64s(("x_stride", "Bytes between token rows of `x`."),
          ("out_stride", "Bytes between token rows of `out`."), group="stride"),
    Field("tokens", "u32", doc="T, the token count."),
    Field("cbytes", "u32", doc="Bytes of one stream row: C * element size."),
    Field("cchunks", "u32", note="C/V", doc="Channel chunks of a token: C / V, V channels per thread."),
    Field("iters", "u32", doc="Sinkhorn iterations."),
    Field("eps_hc", "f32", doc="The Sinkhorn epsilon, added to every row and column sum."),
    Field("eps_f", "f32", doc="Added to `mean(a^2)` under the F-pre-norm's square root."),
    Field("inv_c", "f32", note="1/C", doc="1 / C, the mean's factor."),
    Field("pad", "u32", doc="The token-tile kernels (`static_cl`, `static_pr`, `static_mma`): channel chunks per CTA\n"
                            "(C / V, divided by the cluster size for the cluster kernels); otherwise 0."),
])

EXPAND = Layout("ExpandArgs", "`expand` arguments (asm/ptx/sm90/expand.ptx header).", [
    *f64s(("e", "The input rows `e[T][C]` (storage dtype), copied into every stream."),
          ("out", "The output `x[T][n][C]` (storage dtype)."),),
    *f64s(("e_stride", "Bytes between token rows of `e`."),
          ("out_stride", "Bytes between token rows of `out`."), group="stride"),
    Field("items", "u32", note="T * C/8", doc="Work items: T * `chunks`."),
    Field("chunks", "u32", note="C/8", doc="Chunks of 8 channels per token: C / 8."),
    Field("cbytes", "u32", doc="Bytes of one stream row: C * element size."),
    Field("n", "u32", doc="Streams: the copies of each row written."),
])

COEFFS = Layout("CoeffsArgs", "`coeffs` arguments (asm/ptx/sm90/coeffs.ptx header).", [
    Field("p", "u64", c_type="*const f32", note="[T, p_stride] raw projections",
          doc="The raw projections `P[T][p_stride]` (f32): `P_t = v_t . phi^T`, before the RMS scaling."),
    Field("inv_rms", "u64", c_type="*const f32", note="[T]", doc="The reciprocal RMS of each token's row, `[T]` (f32)."),
    Field("scale", "u64", c_type="*const f32", note="[3] ([1] in head mode)",
          doc="The scales of the pre, post and residual logits, `[3]` (f32; `[1]` in head mode)."),
    Field("base", "u64", c_type="*const f32", note="[M]", doc="The logit biases `base[M]` (f32)."),
    Field("h_pre", "u64", c_type="*mut f32", note="[T, n]",
          doc="Output `h_pre[T][n]` (f32); in head mode the head weights `h`."),
    Field("h_post", "u64", c_type="*mut f32", note="[T, n]",
          doc="Output `h_post[T][n]` (f32); not written in head mode."),
    Field("h_res", "u64", c_type="*mut f32", note="[T, n, n]",
          doc="Output `h_res[T][n][n]` (f32); not written in head mode."),
    Field("tokens", "u32", doc="T, the token count."),
    Field("streams", "u32", note="n", doc="n, the stream count (1, 2, 4, 8, 16 or 32)."),
    Field("iters", "u32", doc="Sinkhorn iterations (at least 1)."),
    Field("eps_hc", "f32", doc="The coefficient epsilon: added to every Sinkhorn line sum, to `h_pre` in the\n"
                               "DeepSeek-V4 formulation and to `h` in head mode."),
    Field("flags", "u32", note="bit 0 Paper, bit 1 head mode",
          doc="Bit 0: the Paper formulation (else DeepSeek-V4); bit 1: head mode (M = n, `h_pre` only)."),
    Field("p_stride", "u32", note="elements between rows of P", doc="Elements between rows of `p` (at least M)."),
])

PRE = Layout("PreArgs", "Arguments of `mhc_pre_sm90_*` (one `.param .align 8 .b8 p_args[232]`; offsets in the header\n"
             "of asm/ptx/sm90/pre.ptx). Unused pointers are 0 and never dereferenced.", [
    *f64s(("x", "The residual `x[T][n*C]` (storage dtype); for `post_pre`, layer l's residual (post's input)."),
          ("f", "`post_pre`: layer l's sublayer output `f[T][C]` (storage dtype)."),
          ("h_post_in", "`post_pre`: layer l's post coefficients `h_post[T][n]` (f32)."),
          ("h_res_in", "`post_pre`: layer l's residual mixing matrices `h_res[T][n][n]` (f32)."),
          ("x_out", "`post_pre`: output `x'[T][n*C]` (storage dtype), the residual the `pre` side reduces."),
          ("phi", "The projection `phi[M][n*C]` (f32)."),
          ("scale", "The logit scales `scale[3]` (f32)."),
          ("base", "The logit biases `base[M]` (f32)."),
          ("gamma_k", "The pre-norm weights `gamma_k[n*C]` (f32) where flags has [`FLAG_GAMMA_K`]."),
          ("gamma_f", "The F-pre-norm weights `gamma_f[C]` (f32) where flags has [`FLAG_GAMMA_F`]."),
          ("a", "Output `a[T][C]` (storage dtype): the pre-mix `sum_i h_pre[i] x[i]`."),
          ("y", "Output `y[T][C]` (storage dtype): the F-pre-norm of `a`, where flags has [`FLAG_GAMMA_F`]."),
          ("h_pre", "Output `h_pre[T][n]` (f32)."),
          ("h_post", "Output `h_post[T][n]` (f32)."),
          ("h_res", "Output `h_res[T][n][n]` (f32)."),
          ("inv_rms", "Output: the reciprocal RMS of each token's row, `[T]` (f32)."),
          ("ws_p", "Workspace: the logit rows `[T][ldp]` (f32)."),
          ("ws_ss", "Workspace: the sums of squares `[T]` (f32)."),
          ("ws_part", "Workspace: the split-K partial blocks, `32 * ldp + 32` f32 each (one tile's logits and\n"
                      "sums of squares from one K split)."),
          ("ws_cnt", "Workspace: the split-K counters, 16 bytes per tile (zero between calls)."),),
    *f32s(("tokens", "T, the token count."),
          ("n", "n, the stream count."),
          ("c", "C, the channels per stream."),
          ("k", "K = n * C, the length of the flattened row."),
          ("m", "M = n^2 + 2n, the logits per token."),),
    Field("ldp", "u32", doc="Row stride of the logit buffers: M rounded up to 32 (one logit group = 4 mma n-tiles)."),
    *f32s(("x_stride", "Row stride of `x` in elements."),
          ("f_stride", "Row stride of `f` in elements."),
          ("xo_stride", "Row stride of `x_out` in elements."),
          ("a_stride", "Row stride of `a` in elements."),
          ("y_stride", "Row stride of `y` in elements."),),
    Field("kslice", "u32", doc="Length of one CTA's slice of the reduction (j-space elements, a multiple of 256)."),
    Field("splits", "u32", doc="CTAs per 32-token tile (1 = prefill shape)."),
    Field("iters", "u32", doc="Sinkhorn iterations."),
    Field("flags", "u32", doc="1 = Paper formulation, 2 = gamma_k, 4 = gamma_f, 8 = post (post_pre), 16 = split\n"
                              "prefill (the last CTA of a tile finishes it alone; the others leave)."),
    Field("eps_norm", "f32", doc="Added to the mean square of the row under the reciprocal square root (`inv_rms`)."),
    Field("eps_hc", "f32", doc="The coefficient epsilon (Sinkhorn line sums; `h_pre` in the DeepSeek-V4 formulation)."),
    Field("eps_f", "f32", doc="Added to `mean(a^2)` under the F-pre-norm's square root."),
])

PRE_DECODE = Layout("PreDecodeArgs", "Arguments of `mhc_pre_decode_sm90_*` (one `.param .align 8 .b8 p_args[144]`; offsets in the\n"
                    "header of asm/ptx/sm90/pre_decode.ptx). `gamma_k` is 0 unless flags bit 1.", [
    *f64s(("x", "The residual `x[T][n*C]` (storage dtype)."),
          ("phi", "The projection `phi[M][n*C]` (f32)."),
          ("scale", "The logit scales `scale[3]` (f32)."),
          ("base", "The logit biases `base[M]` (f32)."),
          ("gamma_k", "The pre-norm weights `gamma_k[n*C]` (f32) where flags bit 1 is set."),
          ("a", "Output `a[T][C]` (storage dtype): the pre-mix `sum_i h_pre[i] x[i]`."),
          ("h_pre", "Output `h_pre[T][n]` (f32)."),
          ("h_post", "Output `h_post[T][n]` (f32)."),
          ("h_res", "Output `h_res[T][n][n]` (f32)."),
          ("inv_rms", "Output: the reciprocal RMS of each token's row, `[T]` (f32)."),),
    Field("ws_part", "u64", doc="Partial rows `[S][T][32]` of tagged words (ss, then the M logits; each word = f32 bits,\n"
                                "then the call's tag: see the PTX header, TAGS)."),
    Field("ws_sync", "u64", doc="The epoch word (u32: the previous call's tag; zero in a fresh workspace), then at +256\n"
                                "the mid kernel's tagged h_pre `[MID_HPRE_COPIES][64][4]`."),
    *f32s(("tokens", "T, the token count."),
          ("n", "n, the stream count."),
          ("c", "C, the channels per stream."),
          ("m", "M = n^2 + 2n, the logits per token."),),
    Field("x_stride", "u32", doc="Row stride of `x` in elements."),
    Field("a_stride", "u32", doc="Row stride of `a` in elements."),
    Field("cpc", "u32", doc="Channels per CTA (a multiple of 8, at most [`DECODE_MAX_CPC`]); the persistent-cluster\n"
                            "entries ignore it (0)."),
    Field("iters", "u32", doc="Sinkhorn iterations."),
    Field("flags", "u32", doc="1 = Paper formulation, 2 = gamma_k, 32 = the weights loaded before the grid dependency\n"
                              "([`FLAG_EARLY_PARAMS`]; the persistent-cluster and logit-cluster entries)."),
    Field("eps_norm", "f32", doc="Added to the mean square of the row under the reciprocal square root (`inv_rms`)."),
    Field("eps_hc", "f32", doc="The coefficient epsilon (Sinkhorn line sums; `h_pre` in the DeepSeek-V4 formulation)."),
    Field("pad", "u32", doc="Unused; 0."),
])

PRE_GEMM = Layout("PreGemmArgs", "Arguments of `mhc_pre_gemm_bf16_n*` (one `.param .align 8 .b8 args[144]`; offsets in the\n"
                  "header of asm/ptx/sm90/pre_gemm.ptx).", [
    *f64s(("x", "The residual `x[T][n*C]` (bf16)."),
          ("phi", "The projection `phi[M][n*C]` (f32)."),
          ("scale", "The logit scales `scale[3]` (f32)."),
          ("base", "The logit biases `base[M]` (f32)."),
          ("a", "Output `a[T][C]` (bf16): the pre-mix `sum_i h_pre[i] x[i]`."),
          ("h_pre", "Output `h_pre[T][n]` (f32)."),
          ("h_post", "Output `h_post[T][n]` (f32)."),
          ("h_res", "Output `h_res[T][n][n]` (f32)."),
          ("inv_rms", "Output: the reciprocal RMS of each token's row, `[T]` (f32)."),),
    Field("ws_cnt", "u64", doc="One u32 arrival counter per token tile (zero between calls)."),
    Field("ws_ss", "u64", doc="Partial sums of squares `[slab][256]` f32."),
    Field("ws_p", "u64", doc="Partial logits `[slab][256][NT * 128]` f32, slab = ks * tiles + tile."),
    Field("ws_sync", "u64", doc="The epoch word, the grid's arrival counter, then per token tile its ready word and\n"
                                "[`GEMM_MIX_PARTS`] claim words from byte 64 (tags: never reset; zero in a fresh workspace)."),
    *f32s(("tokens", "T, the token count."),
          ("c", "C, the channels per stream."),),
    Field("x_stride", "u32", doc="Row stride of `x` in elements."),
    *f32s(("a_stride", "Row stride of `a` in elements."),
          ("ksplit", "K splits: the CTAs that share one (token tile, logit tile), at most [`GEMM_MAX_SPLITS`]."),),
    Field("kstages", "u32", doc="Ring stages (64 K-elements each) per split."),
    Field("iters", "u32", doc="Sinkhorn iterations."),
    Field("flags", "u32", doc="1 = Paper formulation."),
    Field("eps_norm", "f32", doc="Added to the mean square of the row under the reciprocal square root (`inv_rms`)."),
    Field("eps_hc", "f32", doc="The coefficient epsilon (Sinkhorn line sums; `h_pre` in the DeepSeek-V4 formulation)."),
])

POST_PRE_PC = Layout("PostPrePcArgs", "The fused entry's arguments: the `pre` side as the other entry's, then layer l's post inputs\n"
                     "and `x'` (the post_pre entries of asm/ptx/sm90/pre_pc.ptx).", [
    Field("pre", PRE_DECODE, doc="`x` here is layer l's residual (post's input), `x_stride` its row stride."),
    *f64s(("f", "Layer l's sublayer output `f[T][C]` (bf16)."),
          ("h_post_in", "Layer l's post coefficients `h_post[T][n]` (f32)."),
          ("h_res_in", "Layer l's residual mixing matrices `h_res[T][n][n]` (f32)."),
          ("x_out", "Output `x'[T][n*C]` (bf16): post's result, the residual the `pre` side reduces."),),
    Field("f_stride", "u32", doc="Row stride of `f` in elements."),
    Field("x_out_stride", "u32", doc="Row stride of `x_out` in elements."),
])

PRE_TMA = Layout("PreTmaArgs", "The TMA entry's parameter bank: its one parameter (`p_args`: the other pre entry's arguments,\n"
                 "then at 192 the tensor map of x) is 64-byte aligned, as a tensor map must be, and sm_90's\n"
                 "parameters start 16 bytes past a 64-byte boundary, so ptxas puts it 48 bytes in. The launcher\n"
                 "points the driver at each parameter's offset in this struct (the loader reads the offsets and\n"
                 "the bank size, 368, from the cubin and checks them at load).", [
    Field("lead", ("u8", 48), doc="The bank's bytes before `p_args`: never passed to the kernel; zero."),
    Field("pre", PRE_DECODE, doc="`p_args` + 0: the arguments of the other pre entry."),
    Field("pad", ("u8", 48), doc="`p_args` + 144 up to the tensor map; zero."),
    Field("tmap", ("u64", 16), doc="`p_args` + 192: the `CUtensorMap` of x (128 bytes, built by the launcher)."),
], default=False, extra_asserts=(("tmap", "48 + 192"),))

LAYOUTS = [POST, HEAD, STATIC, EXPAND, COEFFS, PRE, PRE_DECODE, PRE_GEMM, POST_PRE_PC, PRE_TMA]

# The TMA entry's .param block starts at `pre` (48 bytes into the bank): the tensor map's offset
# in it, and its size.
TMA_TMAP = PRE_TMA.offset("tmap") - PRE_TMA.offset("pre")
TMA_PARAM_BYTES = PRE_TMA.size - PRE_TMA.offset("pre")
assert TMA_TMAP == 192 and PRE_TMA.offset("tmap") == 48 + 192 and PRE_TMA.size == 368
