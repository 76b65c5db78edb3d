"""Instruction sequences several kernels write: sigmoid, reciprocals, pairwise (tree) reductions,
warp butterflies, the bf16 hi + lo split of mma operands, mma / ldmatrix lines, counted loops
and timing stamps.

Each returns PTX text (instruction lines indented as in a kernel body, joined by newlines), so a
generator can put it in a template or hand it to Kernel.raw. The register names are the
caller's: these functions allocate nothing.
"""

from .ptx import lines

LOG2E = "0f3FB8AA3B"
NEG_LOG2E = "0fBFB8AA3B"
ONE = "0f3F800000"
ZERO = "0f00000000"
NEG_INF = "0fFF800000"

MMA_BF16 = "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"
MMA_BF16_K8 = "mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32"
MMA_TF32 = "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"


def vec(regs):
    """A PTX vector operand: {a, b, ...} (a string passes through)."""
    return regs if isinstance(regs, str) else "{" + ", ".join(regs) + "}"


def mma(shape, d, a, b, c):
    """One mma.sync line: shape is MMA_BF16, MMA_BF16_K8 or MMA_TF32."""
    return f"{shape} {vec(d)}, {vec(a)}, {vec(b)}, {vec(c)};"


def rcp_newton(dst, src, tmp, approx="rcp.approx.ftz.f32", form="neg"):
    """dst = 1/src: the MUFU approximation (<= 1 ulp) and one Newton step, f32-accurate for
    normal src without the IEEE rcp.rn subroutine. tmp holds the residual 1 - src dst, formed as
    -src then fma (form "neg") or fma(src, dst, -1) then negated (form "fma")."""
    if form == "neg":
        return lines(f"{approx} {dst}, {src};",
                     f"neg.f32 {tmp}, {src};",
                     f"fma.rn.f32 {tmp}, {tmp}, {dst}, {ONE};",
                     f"fma.rn.f32 {dst}, {dst}, {tmp}, {dst};")
    return lines(f"{approx} {dst}, {src};",
                 f"fma.rn.f32 {tmp}, {src}, {dst}, 0fBF800000;",
                 f"neg.f32 {tmp}, {tmp};",
                 f"fma.rn.f32 {dst}, {dst}, {tmp}, {dst};")


def sigmoid(dst, z, tmp=None, ex2="ex2.approx.ftz.f32", rcp="rcp.rn.f32"):
    """dst = 1 / (1 + 2^(-z log2 e)), the denominator formed in tmp (default dst). ex2.approx has
    ~2 ulp relative error; rcp is the reciprocal instruction (rcp.rn exact, rcp.approx within 1
    ulp: the denominator is >= 1) or a function (dst, src) -> text (e.g. a Newton step)."""
    t = tmp or dst
    head = lines(f"mul.f32 {t}, {z}, {NEG_LOG2E};",
                 f"{ex2} {t}, {t};",
                 f"add.f32 {t}, {t}, {ONE};")
    tail = rcp(dst, t) if callable(rcp) else lines(f"{rcp} {dst}, {t};")
    return head + "\n" + tail


def pairwise(cells, temp, op="add", dst=None, plus=None):
    """The reduction op of cells by pairwise levels (log2 depth, a fixed order: deterministic);
    an odd cell is carried to the next level. temp(depth, index, seq) names the register of
    the index-th result of a level (seq counts all results). The result goes to dst by
    `add dst, result, plus` when plus is given, else by mov (when dst is given). Returns
    (text, the last level's register)."""
    out = []
    level = list(cells)
    depth = seq = 0
    while len(level) > 1:
        nxt = []
        for i in range(0, len(level) - 1, 2):
            r = temp(depth, i // 2, seq)
            seq += 1
            out.append(f"{op}.f32 {r}, {level[i]}, {level[i + 1]};")
            nxt.append(r)
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
        depth += 1
    if plus is not None:
        out.append(f"add.f32 {dst}, {level[0]}, {plus};")
    elif dst is not None:
        out.append(f"mov.f32 {dst}, {level[0]};")
    return lines(*out), level[0]


def butterfly(v, tmp, offsets=(16, 8, 4, 2, 1), op="add", clamp="0x1f", mask="0xffffffff"):
    """v = op over the lanes that differ in the bits of offsets (shfl.sync.bfly, then op, per
    offset: every lane ends with the same bits)."""
    out = []
    for off in offsets:
        out.append(f"shfl.sync.bfly.b32 {tmp}, {v}, {off}, {clamp}, {mask};")
        out.append(f"{op}.f32 {v}, {v}, {tmp};")
    return lines(*out)


def split_bf16(hi, lo, x0, x1, h0, h1, d0=None, d1=None, guard=""):
    """hi = bf16x2(x1, x0) rounded to nearest, lo = bf16x2 of the remainders x - hi
    (|x - hi - lo| <= 2^-16 |x|): the two halves of an mma operand split into bf16 hi + lo.
    h0, h1 receive hi's halves as f32 (shift / mask), d0, d1 (default x0, x1) the remainders;
    guard prefixes every line (a predicate)."""
    d0, d1 = d0 or x0, d1 or x1
    g = guard
    return lines(f"{g}cvt.rn.bf16x2.f32 {hi}, {x1}, {x0};",
                 f"{g}shl.b32 {h0}, {hi}, 16;",
                 f"{g}and.b32 {h1}, {hi}, 0xffff0000;",
                 f"{g}sub.f32 {d0}, {x0}, {h0};",
                 f"{g}sub.f32 {d1}, {x1}, {h1};",
                 f"{g}cvt.rn.bf16x2.f32 {lo}, {d1}, {d0};")


def split_bf16_via(hi, lo, x0, x1, r, m0, m1, d0=None, d1=None, interleaved=False):
    """split_bf16 with hi's halves moved through the b32 register r into f32 registers m0, m1
    (and.b32 with -65536); interleaved: each remainder right after its half."""
    d0, d1 = d0 or x0, d1 or x1
    if interleaved:
        return lines(f"cvt.rn.bf16x2.f32 {hi}, {x1}, {x0};",
                     f"shl.b32 {r}, {hi}, 16;",
                     f"mov.b32 {m0}, {r};",
                     f"sub.f32 {d0}, {x0}, {m0};",
                     f"and.b32 {r}, {hi}, -65536;",
                     f"mov.b32 {m1}, {r};",
                     f"sub.f32 {d1}, {x1}, {m1};",
                     f"cvt.rn.bf16x2.f32 {lo}, {d1}, {d0};")
    return lines(f"cvt.rn.bf16x2.f32 {hi}, {x1}, {x0};",
                 f"shl.b32 {r}, {hi}, 16;",
                 f"mov.b32 {m0}, {r};",
                 f"and.b32 {r}, {hi}, -65536;",
                 f"mov.b32 {m1}, {r};",
                 f"sub.f32 {d0}, {x0}, {m0};",
                 f"sub.f32 {d1}, {x1}, {m1};",
                 f"cvt.rn.bf16x2.f32 {lo}, {d1}, {d0};")


def loop_head(counter, start, bound, pred, top, exit):
    """The head of a counted loop: counter = start; top: leave to exit once counter >= bound."""
    return f"""    mov.u32 {counter}, {start};
{top}:
    setp.ge.u32 {pred}, {counter}, {bound};
    @{pred} bra {exit};"""


def loop_tail(counter, top):
    """The tail of a counted loop: counter += 1, back to top."""
    return lines(f"add.u32 {counter}, {counter}, 1;", f"bra {top};")


def read_clocks(timer, clock):
    """timer = %globaltimer (ns), clock = %clock64: one timing stamp's pair."""
    return lines(f"mov.u64 {timer}, %globaltimer;", f"mov.u64 {clock}, %clock64;")


# ---- the same sequences with their temporaries named in a Kernel (declared as used)

def k_rcp_newton(k, dst, s, tag):
    """dst = 1/s by rcp_newton, the residual in %{tag}_e."""
    k.raw(rcp_newton(dst, s, k.reg("f32", f"{tag}_e")))


def k_sigmoid(k, dst, z, tag, fast=False):
    """dst = sigmoid(z) with the denominator in %{tag}_a; rcp.rn (exact), or fast: rcp.approx and
    one Newton step (residual %{tag}_r_e)."""
    a = k.reg("f32", f"{tag}_a")
    rcp = (lambda d, s: rcp_newton(d, s, k.reg("f32", f"{tag}_r_e"))) if fast else "rcp.rn.f32"
    k.raw(sigmoid(dst, z, tmp=a, rcp=rcp))


def k_tree_sum(k, dst, vals, tag):
    """dst = sum of vals by pairwise levels, level d's results in %{tag}{d}_{i}."""
    k.raw(pairwise(vals, lambda d, i, s: k.reg("f32", f"{tag}{d}_{i}"), dst=dst)[0])


def k_warp_sum(k, v, tag):
    """v = the sum over the warp's 32 lanes (butterfly; the partner's value in %{tag}_sh)."""
    k.raw(butterfly(v, k.reg("f32", f"{tag}_sh")))


def k_mbarrier_wait(k, ok, bar, parity, label):
    """Spin at `label` until the phase of parity `parity` of the mbarrier at [bar] completes."""
    k.label(label)
    k.ins(f"mbarrier.try_wait.parity.shared::cta.b64 {ok}, [{bar}], {parity};")
    k.ins(f"@!{ok} bra {label};")


def line_max(m, cells):
    """m = the largest of cells (a fixed order)."""
    return lines(f"mov.f32 {m}, {cells[0]};", *(f"max.f32 {m}, {m}, {c};" for c in cells[1:]))


def exp_shift(dst, x, shift, ex2="ex2.approx.f32", keep_denormals=False):
    """dst = exp(x - shift) = 2^((x - shift) log2 e). keep_denormals: ex2.approx.ftz of the
    exponent + 64, then times 2^-64: the non-ftz value down to the denormals (a Paper column of
    exp(-100)s must stay nonzero: the row steps divide by rowsum + eps and grow it back),
    without the denormal fix-up sequence ptxas wraps around a non-ftz MUFU.EX2 (~500 cycles of
    a coefficient thread's chain, H100)."""
    if keep_denormals:
        return lines(f"sub.f32 {dst}, {x}, {shift};",
                     f"fma.rn.f32 {dst}, {dst}, {LOG2E}, 0f42800000;",
                     f"ex2.approx.ftz.f32 {dst}, {dst};",
                     f"mul.f32 {dst}, {dst}, 0f1F800000;")
    return lines(f"sub.f32 {dst}, {x}, {shift};", f"mul.f32 {dst}, {dst}, {LOG2E};", f"{ex2} {dst}, {dst};")


def store8(addr, vals, bf16, packed):
    """The 8 f32 values vals (consecutive channels) stored at [addr]: bf16 rounded to nearest
    and packed pairwise into the 4 registers packed (one 16-byte store), or as two 16-byte f32
    stores."""
    if bf16:
        cvts = [f"cvt.rn.bf16x2.f32 {packed[j]}, {vals[2 * j + 1]}, {vals[2 * j]};" for j in range(4)]
        return lines(*cvts, f"st.global.v4.b32 [{addr}], {vec(packed)};")
    return lines(f"st.global.v4.f32 [{addr}], {vec(vals[:4])};", f"st.global.v4.f32 [{addr}+16], {vec(vals[4:])};")

