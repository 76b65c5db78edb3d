"""The PTX emitter every generator writes with.

PTX has no macros, no compile-time loops and no register indexing, so every kernel here is
specialised (n, dtype, formulation, tile) and its loops over streams or tiles are unrolled by
Python. A `Kernel` collects one entry's body: instruction lines, labels, comments, verbatim
blocks of hand-written PTX (`raw`), and the registers named on the fly by `reg` (declared at the
top of the body, grouped by type). Generators that name their registers by hand (`.reg` lines
in their templates) use the same object through `raw` and `text`.
"""

SPECIAL_REGISTERS = ("tid", "ctaid", "ntid", "nctaid", "laneid", "warpid", "clock", "smid")

# The two comments of the dependent-launch preamble (Kernel.grid_dependency).
PDL_NOTES = ("PDL: previous kernel complete", "PDL: the next kernel may be scheduled")
PDL_NOTES_STREAM = ("PDL: the stream's previous kernel is complete", "PDL: the next kernel may be scheduled")


def prologue(version, target="sm_90a"):
    """The module directives of a .ptx file."""
    return f""".version {version}
.target {target}
.address_size 64
"""


def grid_dependency(notes=PDL_NOTES):
    """Programmatic dependent launch: wait until the stream's previous kernel has finished and its
    writes are visible (a no-op unless the runtime launched this kernel with programmatic stream
    serialization), then let the next kernel's CTAs be scheduled. Emitted after the parameter
    loads and before the first global memory access of every kernel, so a PDL launch is exactly
    stream-ordered; the launch after it can only overlap this kernel, never an earlier one
    (src/device/cuda/launch.rs, `Overlap`; docs/decisions/0004-programmatic-dependent-launch-by-default.md). notes: the two line comments, or
    None for none."""
    if notes is None:
        return "    griddepcontrol.wait;\n    griddepcontrol.launch_dependents;"
    return (f"    griddepcontrol.wait;                    // {notes[0]}\n"
            f"    griddepcontrol.launch_dependents;       // {notes[1]}")


def lines(*instructions):
    """Instruction lines, indented as in a kernel body, one string."""
    return "\n".join("    " + i for i in instructions)


class Kernel:
    """A kernel body under construction: register declarations are collected as names are used."""

    def __init__(self):
        self.regs = {}  # name -> type
        self.lines = []

    def reg(self, ty, name):
        """%name, declared with type ty (a name clashing with a special register gets `_r`)."""
        if name in SPECIAL_REGISTERS:
            name += "_r"  # never shadow a PTX special register
        self.regs[name] = ty
        return "%" + name

    def ins(self, s):
        """One instruction line."""
        self.lines.append("    " + s)

    def label(self, s):
        self.lines.append(s + ":")

    def comment(self, s):
        self.lines.append("    // " + s)

    def raw(self, text):
        """Verbatim PTX text (one or more lines, already indented)."""
        self.lines.append(text)

    def grid_dependency(self, notes=PDL_NOTES):
        self.lines.append(grid_dependency(notes))

    def declarations(self):
        decl = []
        by_ty = {}
        for name, ty in self.regs.items():
            by_ty.setdefault(ty, []).append(name)
        for ty, names in by_ty.items():
            for i in range(0, len(names), 8):
                decl.append("    .reg ." + ty + " " + ", ".join("%" + x for x in names[i: i + 8]) + ";")
        return decl

    def body(self):
        """The declarations, then the lines."""
        return "\n".join(self.declarations() + self.lines)

    def text(self):
        """The lines alone (a generator that declares its registers in its own templates)."""
        return "\n".join(self.lines)


def entry(name, body, param_bytes, directives, shared=(), param_align=8, param_name="args"):
    """A `.visible .entry` of one parameter block: directives (".reqntid 256, 1, 1", ...) one a
    line, then the body with its shared declarations first."""
    decls = "".join(f"    {s}\n" for s in shared)
    dirs = "".join(d + "\n" for d in directives)
    return f""".visible .entry {name}(
    .param .align {param_align} .b8 {param_name}[{param_bytes}]
)
{dirs}{{
{decls}{body}
}}
"""


def plain_entry(name, k, arg_bytes, latency_bound=False):
    """Closes a kernel body (DONE: ret) and wraps it in an entry of one `arg_bytes` parameter
    block and at most 256 threads (post: PostArgs, 80 bytes; expand: ExpandArgs, 48).
    latency_bound: `.minnctapersm 1`, so ptxas stops fitting the kernel to 32 registers (full
    occupancy) and issues every load before the math: fitted to 32 registers, the V4 post decode
    kernel sinks two of its x loads behind the first FMAs, three HBM round trips in a row (H100
    T = 16 in a graph 2.11 us, Paper 1.74)."""
    k.label("DONE")
    k.ins("ret;")
    occupancy = [".minnctapersm 1"] if latency_bound else []
    return name, entry(name, k.body(), arg_bytes, [".maxntid 256, 1, 1"] + occupancy)
