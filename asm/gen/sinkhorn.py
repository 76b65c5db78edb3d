"""Every Sinkhorn form the kernels use (docs/math.md stage 2): the start matrix and the alternating
line normalisations S /= (line sum + eps_hc), in both formulations' orders:

  V4:    S = softmax_row(Z) + eps, then a column step, then (iters - 1) x (row step, column step)
  Paper: S = exp(Z - colmax(Z)), then iters x (column step, row step)

(equivalently for the Paper: a column step, (iters - 1) x (row, column), a last row step). The
forms differ in where the matrix lives and who sums a line:

  per_thread        one thread, the n x n matrix in registers, formulation at run time
                    (coeffs_thread.ptx)
  PerWarp           one warp, register r of lane l holds element l + 32 r; line sums by
                    shuffles (coeffs_shfl.ptx; pre.ptx's n >= 8 coefficients)
  per_thread_padded one thread, a 4 x 4 matrix padded with zeros for n < 4 (pre.ptx, n <= 4)
  unrolled          one thread, one unrolled body per n, the exponent shifted so that denormal
                    results survive ex2.ftz (pre_decode.ptx; pre_pc.ptx's h_res batch, a token
                    per lane)
  lanes             the unrolled form over a warp, lane j (mod n) keeping column j and row j,
                    the other copy scaled by the lanes' factors (through shared memory): its
                    bits (pre_decode.ptx, n = 8)
  lane0             lane 0 of a warp, Paper only (static.ptx, n <= 4)
  scaling_vectors   S = diag(r) K diag(c), lane j keeping column and row j of K (static.ptx,
                    n >= 8)
  lane_column_row   lane j of an n-lane segment keeps column j and row j of its token's S (pre_gemm.ptx)

alternate, v4_iterations and paper_iterations emit the shared iteration loops (V4 / Paper
order) around a form's column and row steps.

Every line sum is a pairwise tree (blocks.pairwise) or a fixed butterfly: the same bits in every
run. Reciprocals are rcp.approx (every divisor is >= eps_hc or a softmax sum >= 1), with a
Newton step where a form needs f32 accuracy.
"""

from .blocks import LOG2E, NEG_INF, ZERO, exp_shift, k_rcp_newton, k_tree_sum, line_max, loop_head, loop_tail, pairwise
from .rows import load_f32_run


def per_thread(n, s, w, labels):
    """One thread's n x n matrix s(i, j) (registers), the formulation by %paper at run time;
    ends at {labels}STORE with S final. Temporaries %mx, %sum, %rcp, %t<n - 1>, %k, %q; eps in
    %eps, the iteration count in %iters."""
    w(f"    @%paper bra {labels}START_PAPER;")
    w("    // V4 start: softmax of each row, plus eps")
    for i in range(n):
        w(f"    mov.f32 %mx, {NEG_INF};")
        for j in range(n):
            w(f"    max.f32 %mx, %mx, {s(i, j)};")
        w(f"    mov.f32 %sum, {ZERO};")
        for j in range(n):
            w(f"    sub.f32 {s(i, j)}, {s(i, j)}, %mx;")
            w(f"    mul.f32 {s(i, j)}, {s(i, j)}, {LOG2E};")
            w(f"    ex2.approx.f32 {s(i, j)}, {s(i, j)};")
            w(f"    add.f32 %sum, %sum, {s(i, j)};")
        w("    rcp.approx.ftz.f32 %rcp, %sum;")
        for j in range(n):
            w(f"    fma.rn.f32 {s(i, j)}, {s(i, j)}, %rcp, %eps;")
    w(f"    bra {labels}START_DONE;")
    w(f"{labels}START_PAPER:")
    w("    // Paper start: exp(Z - max of each column)")
    for j in range(n):
        w(f"    mov.f32 %mx, {NEG_INF};")
        for i in range(n):
            w(f"    max.f32 %mx, %mx, {s(i, j)};")
        for i in range(n):
            w(f"    sub.f32 {s(i, j)}, {s(i, j)}, %mx;")
            w(f"    mul.f32 {s(i, j)}, {s(i, j)}, {LOG2E};")
            w(f"    ex2.approx.f32 {s(i, j)}, {s(i, j)};")
    w(f"{labels}START_DONE:")

    def normalize(cells):
        # pairwise: a dependency chain of log2(n) adds instead of n
        w(pairwise(cells, lambda d, i, seq: f"%t{seq}", dst="%sum", plus="%eps")[0])
        w("    rcp.approx.ftz.f32 %rcp, %sum;")
        for c in cells:
            w(f"    mul.f32 {c}, {c}, %rcp;")

    def cols():
        for j in range(n):
            normalize([s(i, j) for i in range(n)])

    def rows():
        for i in range(n):
            normalize([s(i, j) for j in range(n)])

    alternate(w, labels, cols, rows, "%k", "%q")


def alternate(w, labels, cols, rows, counter, pred, paper="%paper"):
    """The run-time-formulation schedule: C, (iters - 1) x (R, C), then R for the Paper (paper:
    the predicate); ends at {labels}STORE."""
    w("    // Sinkhorn: C, (iters - 1) x (R, C), then R for Paper")
    cols()
    w(loop_head(counter, 1, "%iters", pred, f"{labels}ITER", f"{labels}ITER_DONE"))
    rows()
    cols()
    w(loop_tail(counter, f"{labels}ITER"))
    w(f"{labels}ITER_DONE:")
    w(f"    @!{paper} bra {labels}STORE;")
    rows()
    w(f"{labels}STORE:")


class PerWarp:
    """One warp's n x n matrix (n = 8, 16, 32) in R = n*n/32 registers %S<R> per lane: register r
    of lane l holds element l + 32 r of the row-major matrix (column l & (n-1), row
    (l >> log2 n) + (32/n) r). Column sums: the lane's R registers (pairwise), then an xor
    all-reduce over lane bits log2 n .. 4. Row sums: a reduce-scatter butterfly over lane bits
    0 .. log2 n - 1 (each lane keeps half of its partial sums and receives the partner's copy of
    that half), after which every lane holds the sum of one row; register r then fetches its
    row's value from the lane holding it (shfl.idx). o maps the caller's registers (eps, paper,
    bit<k> lane-bit predicates) to their names; temporaries %T, %u, %rv, %send, %keep, %src,
    %x, %y, %m, %k, %q, %hibase."""

    def __init__(self, n, w, o, labels):
        self.n, self.w, self.o, self.labels = n, w, o, labels
        self.R = n * n // 32
        ln, lr = n.bit_length() - 1, self.R.bit_length() - 1
        self.shift = ln - lr  # lane holding row i of register r: (l & hi) | (r << shift)
        self.S = [f"%S{r}" for r in range(self.R)]

    def tree(self, regs, op, dst):
        """dst = op over regs, pairwise (%u temporaries)."""
        self.w(pairwise(regs, lambda d, i, seq: f"%u{seq}", op=op, dst=dst)[0])

    def col_reduce(self, op, dst):
        """dst = op over this lane's column (all lanes of the same column agree)."""
        w = self.w
        self.tree(self.S, op, dst)
        k = self.n
        while k < 32:
            w(f"    shfl.sync.bfly.b32 %rv, {dst}, {k}, 0x1f, 0xffffffff;")
            w(f"    {op}.f32 {dst}, {dst}, %rv;")
            k *= 2

    def row_reduce(self, op):
        """%T0 = op over the row this lane ends up holding."""
        w, o = self.w, self.o
        c = self.R
        vals = self.S
        k = self.n // 2
        first = True
        while k >= 1:
            if c > 1:
                half = c // 2
                for r in range(half):
                    lo, up = vals[r], vals[r + half]
                    # Lanes with bit k set keep the upper half and send the lower one.
                    w(f"    selp.f32 %send, {lo}, {up}, {o[f'bit{k}']};")
                    w(f"    selp.f32 %keep, {up}, {lo}, {o[f'bit{k}']};")
                    w(f"    shfl.sync.bfly.b32 %rv, %send, {k}, 0x1f, 0xffffffff;")
                    w(f"    {op}.f32 %T{r}, %keep, %rv;")
                vals = [f"%T{r}" for r in range(half)]
                c = half
            else:
                if first:
                    w(f"    mov.f32 %T0, {vals[0]};")
                    vals = ["%T0"]
                w(f"    shfl.sync.bfly.b32 %rv, %T0, {k}, 0x1f, 0xffffffff;")
                w(f"    {op}.f32 %T0, %T0, %rv;")
            first = False
            k //= 2

    def from_row_holder(self, value, r, dst):
        """dst = `value` of the lane holding the row of register r."""
        self.w(f"    add.u32 %src, %hibase, {r << self.shift};")
        self.w(f"    shfl.sync.idx.b32 {dst}, {value}, %src, 0x1f, 0xffffffff;")

    def rows(self):
        w = self.w
        self.row_reduce("add")
        w(f"    add.f32 %T0, %T0, {self.o['eps']};")
        w("    rcp.approx.ftz.f32 %T0, %T0;")
        for r in range(self.R):
            self.from_row_holder("%T0", r, "%y")
            w(f"    mul.f32 {self.S[r]}, {self.S[r]}, %y;")

    def cols(self):
        w = self.w
        self.col_reduce("add", "%x")
        w(f"    add.f32 %x, %x, {self.o['eps']};")
        w("    rcp.approx.ftz.f32 %x, %x;")
        for r in range(self.R):
            w(f"    mul.f32 {self.S[r]}, {self.S[r]}, %x;")

    def sinkhorn(self):
        """Start (V4 or Paper, by the caller's paper predicate) and iterations; ends at
        {labels}STORE with S final."""
        w, o, S, L = self.w, self.o, self.S, self.labels
        w(f"    @{o['paper']} bra {L}START_PAPER;")
        w("    // V4 start: softmax of each row, plus eps")
        self.row_reduce("max")
        for r in range(self.R):
            self.from_row_holder("%T0", r, "%m")
            w(f"    sub.f32 {S[r]}, {S[r]}, %m;")
            w(f"    mul.f32 {S[r]}, {S[r]}, {LOG2E};")
            w(f"    ex2.approx.f32 {S[r]}, {S[r]};")
        self.row_reduce("add")
        w("    rcp.approx.ftz.f32 %T0, %T0;")
        for r in range(self.R):
            self.from_row_holder("%T0", r, "%y")
            w(f"    fma.rn.f32 {S[r]}, {S[r]}, %y, {o['eps']};")
        w(f"    bra {L}START_DONE;")
        w(f"{L}START_PAPER:")
        w("    // Paper start: exp(Z - max of each column)")
        self.col_reduce("max", "%x")
        for r in range(self.R):
            w(f"    sub.f32 {S[r]}, {S[r]}, %x;")
            w(f"    mul.f32 {S[r]}, {S[r]}, {LOG2E};")
            w(f"    ex2.approx.f32 {S[r]}, {S[r]};")
        w(f"{L}START_DONE:")
        alternate(w, L, self.cols, self.rows, "%k", "%q", o["paper"])


def v4_iterations(w, cols, rows, counter, pred, top, out, zero_check=None):
    """V4 after its start: a column step, then (iters - 1) x (row step, column step); leaves to
    out. zero_check: a predicate register to skip everything when iters = 0."""
    if zero_check:
        w(f"    setp.eq.u32 {zero_check}, %iters, 0;\n    @{zero_check} bra {out};")
    cols()
    w(loop_head(counter, 1, "%iters", pred, top, out))
    rows()
    cols()
    w(loop_tail(counter, top))


def paper_iterations(w, cols, rows, counter, pred, top, out):
    """The Paper after its start: iters x (column step, row step); leaves to out."""
    w(loop_head(counter, 0, "%iters", pred, top, out))
    cols()
    rows()
    w(loop_tail(counter, top))


def per_thread_padded(w, rcp):
    """One thread's matrix in 16 registers %sk<16> (row-major 4 x 4; the entries outside n x n
    held at 0: %pv<k> is false there), the formulation by %p_paper; every line sum in index
    order, then + eps_hc, rcp(dst, src) (a Newton-refined reciprocal), a multiply. Ends at CS_OUT
    with S final. Temporaries %f10, %f25..%f30, %r53, %p15."""
    for i in range(4):
        r = [f"%sk{4*i+j}" for j in range(4)]
        w(f"    max.f32 %f25, {r[0]}, {r[1]};")
        w(f"    max.f32 %f26, {r[2]}, {r[3]};")
        w("    max.f32 %f25, %f25, %f26;")
        for j in range(4):
            w(f"    sub.f32 %f10, {r[j]}, %f25;")
            w(f"    mul.f32 %f10, %f10, {LOG2E};")
            w("    ex2.approx.f32 %f10, %f10;")
            w(f"    selp.f32 {r[j]}, %f10, 0f00000000, %pv{4*i+j};")
        w(f"    add.f32 %f26, {r[0]}, {r[1]};")
        w(f"    add.f32 %f26, %f26, {r[2]};")
        w(f"    add.f32 %f26, %f26, {r[3]};")
        w(rcp("%f30", "%f26"))
        for j in range(4):
            w(f"    mul.f32 %f10, {r[j]}, %f30;")
            w("    add.f32 %f10, %f10, %eps_hc;")
            w(f"    selp.f32 {r[j]}, %f10, 0f00000000, %pv{4*i+j};")

    def line_step(cells_of, scale_of):
        # S[line] /= (sum in index order + eps); padded entries are 0 and stay 0
        for a in range(4):
            c = cells_of(a)
            w(f"    add.f32 %f10, {c[0]}, {c[1]};")
            w(f"    add.f32 %f10, %f10, {c[2]};")
            w(f"    add.f32 %f10, %f10, {c[3]};")
            w("    add.f32 %f10, %f10, %eps_hc;")
            w(rcp(f"%f{27+a}", "%f10"))
        for a in range(4):
            for b in range(4):
                w(f"    mul.f32 {scale_of(a, b)}, {scale_of(a, b)}, %f{27+a};")

    cols = lambda: line_step(lambda j: [f"%sk{4*i+j}" for i in range(4)], lambda j, i: f"%sk{4*i+j}")
    rows = lambda: line_step(lambda i: [f"%sk{4*i+j}" for j in range(4)], lambda i, j: f"%sk{4*i+j}")
    v4_iterations(w, cols, rows, "%r53", "%p15", "CS_V4_LOOP", "CS_OUT")
    w("CS_PAPER:")
    for j in range(4):
        c = [f"%sk{4*i+j}" for i in range(4)]
        w(f"    max.f32 %f25, {c[0]}, {c[1]};")
        w(f"    max.f32 %f26, {c[2]}, {c[3]};")
        w("    max.f32 %f25, %f25, %f26;")
        for i in range(4):
            w(f"    sub.f32 %f10, {c[i]}, %f25;")
            w(f"    mul.f32 %f10, %f10, {LOG2E};")
            w("    ex2.approx.f32 %f10, %f10;")
            w(f"    selp.f32 {c[i]}, %f10, 0f00000000, %pv{4*i+j};")
    paper_iterations(w, cols, rows, "%r53", "%p15", "CS_P_LOOP", "CS_OUT")


def unrolled(n, s, w, labels, pair=True):
    """One thread's n x n matrix s(i, j) (registers), one unrolled body per n, the formulation
    by %p_paper; exp with its denormals kept (blocks.exp_shift); every line summed pairwise
    (%tr temporaries) into %ls<j> (+ eps_hc), then rcp.approx.ftz into %lr<j> (1 ulp; every
    divisor is >= eps_hc or a softmax sum >= 1: no Newton step on this critical path), then the
    multiplies. With pair (every kernel's form), V4's iterations (n >= 2) run as
    paired_iterations: one set of reciprocals an iteration instead of two (docs/kernels/pre.md,
    "The Sinkhorn's iterations"); without, the direct steps (the pre_lc.direct timing build
    that measures the pairs' gain).
    Leaves to {labels}OUT with S final. Temporaries %mx, %sum, %rc, %ls<n>, %lr<n>, %tr<4>,
    %it, %p1."""
    def exp_minus_max(cells):
        # the start matrix's shift: a row for V4, a column for the Paper
        w(line_max("%mx", cells))
        for c in cells:
            w(exp_shift(c, c, "%mx", keep_denormals=True))

    def tree(cells, dst, eps):
        w(pairwise(cells, lambda d, i, seq: f"%tr{seq}", dst=dst, plus="%eps_hc" if eps else None)[0])

    w(f"    @%p_paper bra {labels}PAPER;")
    for i in range(n):
        exp_minus_max([s(i, j) for j in range(n)])
        tree([s(i, j) for j in range(n)], "%sum", eps=False)
        w("    rcp.approx.ftz.f32 %rc, %sum;")
        for j in range(n):
            w(f"    fma.rn.f32 {s(i, j)}, {s(i, j)}, %rc, %eps_hc;")
    w(f"    bra {labels}START;")
    w(f"{labels}PAPER:")
    for j in range(n):
        exp_minus_max([s(i, j) for i in range(n)])
    w(f"{labels}START:")

    col = lambda j: [s(i, j) for i in range(n)]
    row = lambda i: [s(i, j) for j in range(n)]

    def line_steps(cells_of):
        for a in range(n):
            tree(cells_of(a), f"%ls{a}", eps=True)
        for a in range(n):
            w(f"    rcp.approx.ftz.f32 %lr{a}, %ls{a};")
        for a in range(n):
            for c in cells_of(a):
                w(f"    mul.f32 {c}, {c}, %lr{a};")

    def fma_sum(pairs, plus, dst):
        """dst = the sum of cell * factor over pairs, + plus: two FMA chains (the first half's
        from a multiply, the second half's from plus), then one add."""
        h = (len(pairs) + 1) // 2
        (c, f), rest = pairs[0], pairs[1:h]
        w(f"    mul.f32 %tr2, {c}, {f};")
        for c, f in rest:
            w(f"    fma.rn.f32 %tr2, {c}, {f}, %tr2;")
        acc = plus
        for c, f in reversed(pairs[h:]):
            w(f"    fma.rn.f32 %tr3, {c}, {f}, {acc};")
            acc = "%tr3"
        w(f"    add.f32 {dst}, %tr2, {acc};")

    def paired_iterations():
        """V4 after its start: the first column step, then (iters - 1) x (row step, column step),
        each iteration with one set of reciprocals. A row step and the column step after it
        divide S by R_a C_b, R_a the row sums (+ eps_hc), C_b the column sums after the row
        step (+ eps_hc); with P = prod R and Q_a = P / R_a (the other rows' R multiplied:
        line_products), R_a C_b = D_b / Q_a where D_b = sum_a S_ab Q_a + eps_hc P, so the pair
        is S Q_a / D_b and the row step's reciprocals and multiplies leave the chain. The
        column factors r_b = 1 / D_b stay pending in %lr<b> (S = T r_b, the cells holding T):
        the next row sums take them in FMA chains while S is formed beside them."""
        w(f"""    setp.eq.u32 %p1, %iters, 0;
    @%p1 bra {labels}OUT;""")
        for b in range(n):
            tree(col(b), f"%ls{b}", eps=True)
        for b in range(n):
            w(f"    rcp.approx.ftz.f32 %lr{b}, %ls{b};")
        w(loop_head("%it", 1, "%iters", "%p1", f"{labels}V4L", f"{labels}V4F"))
        for a in range(n):
            fma_sum([(s(a, b), f"%lr{b}") for b in range(n)], "%eps_hc", f"%ls{a}")
        for a in range(n):
            for b in range(n):
                w(f"    mul.f32 {s(a, b)}, {s(a, b)}, %lr{b};")
        w(line_products(n))
        w("    mul.f32 %mx, %eps_hc, %sum;")
        for b in range(n):
            fma_sum([(s(a, b), f"%lr{a}") for a in range(n)], "%mx", f"%ls{b}")
        for a in range(n):
            for b in range(n):
                w(f"    mul.f32 {s(a, b)}, {s(a, b)}, %lr{a};")
        for b in range(n):
            w(f"    rcp.approx.ftz.f32 %lr{b}, %ls{b};")
        w(loop_tail("%it", f"{labels}V4L"))
        w(f"{labels}V4F:")
        for a in range(n):
            for b in range(n):
                w(f"    mul.f32 {s(a, b)}, {s(a, b)}, %lr{b};")
        w(f"    bra {labels}OUT;")

    cols = lambda: line_steps(col)
    rows = lambda: line_steps(row)
    w(f"    @%p_paper bra {labels}P;")
    if pair and n > 1:
        paired_iterations()
    else:
        v4_iterations(w, cols, rows, "%it", "%p1", f"{labels}V4L", f"{labels}OUT", zero_check="%p1")
    w(f"{labels}P:")
    paper_iterations(w, cols, rows, "%it", "%p1", f"{labels}PL", f"{labels}OUT")
    w(f"{labels}OUT:")


def line_products(n):
    """From the line sums %ls0 .. %ls{n-1} (R): %lr<a> = Q_a, the product of the other lines'
    sums, and %sum = P, the product of all (%tr0, %tr1 temporaries): 7 multiplies two deep for
    n = 4. V4 only: its softmax start gives every row a sum of 1 and the column steps divide an
    entry by at most n + eps_hc, so no row sum nears zero (at least 0.11 for n <= 4 over logits
    1e4 apart, eps_hc 1e-20 .. 1 and 2,000 iterations, emulated in f32) and P and Q stay normal
    floats. The Paper's rows can be exactly 0 (R = eps_hc, whose fourth power underflows), so it
    keeps the direct steps."""
    if n == 2:
        return """    mov.f32 %lr0, %ls1;
    mov.f32 %lr1, %ls0;
    mul.f32 %sum, %ls0, %ls1;"""
    if n == 3:
        return """    mul.f32 %lr0, %ls1, %ls2;
    mul.f32 %lr1, %ls0, %ls2;
    mul.f32 %lr2, %ls0, %ls1;
    mul.f32 %sum, %lr2, %ls2;"""
    assert n == 4, n
    return """    mul.f32 %tr0, %ls0, %ls1;
    mul.f32 %tr1, %ls2, %ls3;
    mul.f32 %lr0, %ls1, %tr1;
    mul.f32 %lr1, %ls0, %tr1;
    mul.f32 %lr2, %ls3, %tr0;
    mul.f32 %lr3, %ls2, %tr0;
    mul.f32 %sum, %tr0, %tr1;"""


def lanes(n, w, labels, factors):
    """The unrolled form spread over the lanes of a warp: lane j (and j + n k: the whole warp
    runs it, so every shuffle has the full mask) keeps column j of S in %S0 .. %S{n-1} (S[i][j])
    and row j in %S{n} .. %S{2n-1} (S[j][i]), the caller having loaded both copies of Z (every
    lane's copies from the same values with the same operations). Each line step is the
    unrolled form's for the lane's own line (pairwise sum + eps_hc, rcp.approx.ftz, the
    multiplies); the other copy takes the factors of lanes 0 .. n-1 through shared memory:
    factors = (base, slot, pred): base the address of two buffers of n floats (a register or a
    symbol), slot the address of the lane's float in the first (base + 4 j), pred true on
    lanes 0 .. n-1, which store their factor; then bar.warp.sync (which orders the warp's
    shared-memory accesses) and n / 4 16-byte loads of all n. The steps alternate the
    buffers, so a store never meets the previous step's loads.
    Both copies of S[i][j] take the same operations, so every bit is the unrolled form's, and a
    line step costs one exchange instead of n lines' instructions in one thread (n = 8: 274
    instructions per iteration there). The start's shifts and reciprocals reach the other copy
    by shfl.idx. Leaves to {labels}OUT; temporaries %mx, %sum, %rc, %ls0, %lr0, %g1, %g2, %tr,
    %it, %p1."""
    col = [f"%S{i}" for i in range(n)]
    row = [f"%S{n + i}" for i in range(n)]
    mask = "0xffffffff"
    base, slot, pred = factors
    assert n % 4 == 0 and n <= 8, "the factors are loaded 4 at a time into %tr<8>"

    def tree(cells, dst, eps):
        w(pairwise(cells, lambda d, i, seq: f"%tr{seq}", dst=dst, plus="%eps_hc" if eps else None)[0])

    def from_lane(val, i, dst):
        w(f"    shfl.sync.idx.b32 {dst}, {val}, {i}, 0x1f, {mask};")

    def other_start(cells, with_rcp):
        """cells[i] shifted (and scaled) by lane i's line max (and 1 / sum)."""
        for i in range(n):
            from_lane("%mx", i, "%g1")
            if with_rcp:
                from_lane("%rc", i, "%g2")
            w(exp_shift(cells[i], cells[i], "%g1", keep_denormals=True))
            if with_rcp:
                w(f"    fma.rn.f32 {cells[i]}, {cells[i]}, %g2, %eps_hc;")

    def own_start(cells):
        """The lane's own line shifted by its max (%mx)."""
        w(line_max("%mx", cells))
        for c in cells:
            w(exp_shift(c, c, "%mx", keep_denormals=True))

    w(f"    @%p_paper bra {labels}PAPER;")
    w("    // V4 start: softmax of row j + eps; column j's entries with row i's shift and 1 / sum")
    own_start(row)
    tree(row, "%sum", eps=False)
    w("    rcp.approx.ftz.f32 %rc, %sum;")
    for c in row:
        w(f"    fma.rn.f32 {c}, {c}, %rc, %eps_hc;")
    other_start(col, with_rcp=True)
    w(f"    bra {labels}START;")
    w(f"{labels}PAPER:")
    w("    // Paper start: exp(Z - max of column j); row j's entries with column i's shift")
    own_start(col)
    other_start(row, with_rcp=False)
    w(f"{labels}START:")

    steps = [0]  # line steps emitted: consecutive steps run in emission order, so the parity
                 # of this count alternates the buffers at run time too (V4 and Paper)

    def step(own, other):
        tree(own, "%ls0", eps=True)
        w("    rcp.approx.ftz.f32 %lr0, %ls0;")
        off = 4 * n * (steps[0] % 2)
        steps[0] += 1
        w(f"""    @{pred} st.shared.f32 [{slot}+{off}], %lr0;
    bar.warp.sync -1;""")
        for q in range(0, n, 4):
            w(f"    ld.shared.v4.f32 {{%tr{q}, %tr{q + 1}, %tr{q + 2}, %tr{q + 3}}}, [{base}+{off + 4 * q}];")
        for i in range(n):
            w(f"    mul.f32 {other[i]}, {other[i]}, %tr{i};")
        for c in own:
            w(f"    mul.f32 {c}, {c}, %lr0;")

    cols = lambda: step(col, row)
    rows = lambda: step(row, col)
    w(f"    @%p_paper bra {labels}P;")
    v4_iterations(w, cols, rows, "%it", "%p1", f"{labels}V4L", f"{labels}OUT", zero_check="%p1")
    w(f"{labels}P:")
    paper_iterations(w, cols, rows, "%it", "%p1", f"{labels}PL", f"{labels}OUT")
    w(f"{labels}OUT:")


def lane0(k, n, S, eps_hc, it, pr):
    """One lane's n x n matrix S[i][j] (registers of Kernel k; n <= 4), the Paper only: S =
    exp(Z - colmax), then iters x (column step, row step), each line summed pairwise, + eps_hc,
    a Newton-refined reciprocal, the multiplies. Ends at SK_END."""
    m = k.reg("f32", "zmax")
    for j in range(n):
        k.raw(line_max(m, [S[i][j] for i in range(n)]))
        for i in range(n):
            k.raw(exp_shift(S[i][j], S[i][j], m, ex2="ex2.approx.ftz.f32"))
    k.comment("iters x (column step, row step): S /= (sum + eps_hc), reciprocal then multiply")
    sums, rcps = [k.reg("f32", f"sks{j}") for j in range(n)], [k.reg("f32", f"skr{j}") for j in range(n)]

    def cols():
        for j in range(n):
            k_tree_sum(k, sums[j], [S[i][j] for i in range(n)], f"ct{j}_")
            k.ins(f"add.f32 {sums[j]}, {sums[j]}, {eps_hc};")
            k_rcp_newton(k, rcps[j], sums[j], f"cr{j}")
        for j in range(n):
            for i in range(n):
                k.ins(f"mul.f32 {S[i][j]}, {S[i][j]}, {rcps[j]};")

    def rows():
        for i in range(n):
            k_tree_sum(k, sums[i], S[i], f"rt{i}_")
            k.ins(f"add.f32 {sums[i]}, {sums[i]}, {eps_hc};")
            k_rcp_newton(k, rcps[i], sums[i], f"rr{i}")
        for i in range(n):
            for j in range(n):
                k.ins(f"mul.f32 {S[i][j]}, {S[i][j]}, {rcps[i]};")

    paper_iterations(k.raw, cols, rows, it, pr, "SK_LOOP", "SK_END")
    k.label("SK_END")


def scaling_vectors(k, n, kc, kr, lane, sH, la, eps_hc, it, pr):
    """The Paper's Sinkhorn of a warp (n >= 8) as S = diag(r) K diag(c), K = exp(Z - colmax):
    lane j holds column j (kc) and row j (kr) of Z, turned into K here, and r_j, c_j (returned:
    the registers own_c, own_r). A column step updates c_j from K[:, j] . r, a row step r_j from
    K[j, :] . c, each preceded by publishing the vector it reads in ss_h (sH; r at floats 0..n-1,
    c at 64..; la = 4 j) and read back by broadcast loads. The same divisions as the Paper's,
    rearranged (f32 rounding only). Ends at SK_END."""
    f = lambda s: k.reg("f32", s)
    p = lambda s: k.reg("b64", s)
    m = f("zmax")
    k.raw(line_max(m, kc))
    for i in range(n):
        k.raw(exp_shift(kc[i], kc[i], m, ex2="ex2.approx.ftz.f32"))
    k.comment("K[j][i'] = exp(Z[j][i'] - colmax[i']): the column maxima gathered from their lanes")
    mj = f("mj")
    for i in range(n):
        k.ins(f"shfl.sync.idx.b32 {mj}, {m}, {i}, 0x1f, 0xffffffff;")
        k.raw(exp_shift(kr[i], kr[i], mj, ex2="ex2.approx.ftz.f32"))
    oc, orow, dot, den, rc = f("own_c"), f("own_r"), f("dot"), f("den"), f("rcpv")
    k.comment("c and r start at 1; lane j keeps own_c = c_j and own_r = r_j. Each half step publishes")
    k.comment("the vector it reads in ss_h (r at floats 0..n-1, c at 64..64+n-1; h_post sits between) and")
    k.comment("every lane reads it back by broadcast 16-byte loads: n/4 loads per dot product where")
    k.comment("shfl.idx took n shuffles (H100, n = 32, 20 iterations: ~8 us -> ~0.8 us).")
    k.comment("Two buffers, so one bar.warp.sync per half step orders the writes before the reads and")
    k.comment("the reads of a buffer before its next write (a whole half step later).")
    k.ins(f"mov.f32 {oc}, 0f3F800000;")
    k.ins(f"mov.f32 {orow}, 0f3F800000;")
    pv = k.reg("pred", "pvec")
    k.ins(f"setp.lt.u32 {pv}, {lane}, {n};")
    va = p("veca")
    k.ins(f"add.u64 {va}, {sH}, {la};")
    nch = 8 if n >= 32 else 4

    def dot_shared(vec_a, off, tag):
        """dot = sum_i a_i v_i, v read from ss_h at byte offset off, in nch interleaved chains
        summed pairwise (a fixed order)."""
        ch = [f(f"{tag}{q}") for q in range(nch)]
        for h in range(0, n, 16):  # 16 values at a time: fewer live registers beside K's 2n
            v = load_f32_run(k, f"{tag}v", sH, min(16, n), off=off + 4 * h, space="shared")
            for i in range(h, min(n, h + 16)):
                if i < nch:
                    k.ins(f"mul.f32 {ch[i]}, {vec_a[i]}, {v[i - h]};")
                else:
                    k.ins(f"fma.rn.f32 {ch[i % nch]}, {vec_a[i]}, {v[i - h]}, {ch[i % nch]};")
        while len(ch) > 1:
            for q in range(len(ch) // 2):
                k.ins(f"add.f32 {ch[q]}, {ch[q]}, {ch[q + len(ch) // 2]};")
            ch = ch[: len(ch) // 2]
        k.ins(f"mov.f32 {dot}, {ch[0]};")

    def col_step():
        k.comment("column step: colsum_j = c_j (K[:, j] . r); c_j /= colsum_j + eps_hc")
        k.ins(f"@{pv} st.shared.f32 [{va}], {orow};")
        k.ins("bar.warp.sync 0xffffffff;")
        dot_shared(kc, 0, "dc")
        k.ins(f"mul.f32 {den}, {dot}, {oc};")
        k.ins(f"add.f32 {den}, {den}, {eps_hc};")
        k_rcp_newton(k, rc, den, "sc")
        k.ins(f"mul.f32 {oc}, {oc}, {rc};")

    def row_step():
        k.comment("row step: rowsum_j = r_j (K[j, :] . c); r_j /= rowsum_j + eps_hc")
        k.ins(f"@{pv} st.shared.f32 [{va}+256], {oc};")
        k.ins("bar.warp.sync 0xffffffff;")
        dot_shared(kr, 256, "dr")
        k.ins(f"mul.f32 {den}, {dot}, {orow};")
        k.ins(f"add.f32 {den}, {den}, {eps_hc};")
        k_rcp_newton(k, rc, den, "sr")
        k.ins(f"mul.f32 {orow}, {orow}, {rc};")

    paper_iterations(k.raw, col_step, row_step, it, pr, "SK_LOOP", "SK_END")
    k.label("SK_END")
    return oc, orow


def lane_column_row(k, n, col, row, paper, plive, la, wb, vec_off, eps_hc, iters, pr):
    """An n x n matrix per n-lane segment of a warp (32 / n tokens at once) in the direct form:
    lane j of the segment holds column j of S (col[i] = S[i][j]) and row j (row[i] = S[j][i]),
    so each S[i][j] lives in two lanes and both copies take the same operations (identical bits). Start: V4 S = softmax_row(Z) + eps, Paper S =
    exp(Z - colmax) (ex2.approx without ftz: tiny entries kept). Column step: lane j sums its
    column (fixed tree), f_j = 1 / (sum + eps) (Newton-refined) scales it and is published in the
    segment's vector buffer (wb + vec_off, wb the lane's token's buffer; la = 4 j; plive: the lanes
    that publish), every lane scales its row copy by f (16-byte broadcast loads); the row step likewise. Paper: iters x (column, row); V4:
    column, (iters - 1) x (row, column). (The scaling-vector form S = diag(r) K diag(c)
    overflowed r where a row of K held only denormal entries: NaN at phi ~ 0.5.) Ends at SK_END."""
    f = lambda s: k.reg("f32", s)
    u = lambda s: k.reg("b32", s)
    seg = f"{((32 - n) << 8) | 0x1f:#x}"  # shuffles within the lane's n-lane segment (its token's lines)
    m, mi, ri = f("zmax"), f("zmi"), f("rinv_i")
    k.ins(f"@!{paper} bra SK_V4START;")
    k.comment("Paper: S = exp(Z - colmax); column j's max here, row j's entries need column i's max")
    k.raw(line_max(m, col))
    for i in range(n):
        k.raw(exp_shift(col[i], col[i], m))
    for i in range(n):
        k.ins(f"shfl.sync.idx.b32 {mi}, {m}, {i}, {seg}, 0xffffffff;")
        k.raw(exp_shift(row[i], row[i], mi))
    k.ins("bra SK_STARTED;")
    k.label("SK_V4START")
    k.comment("V4: S = softmax_row(Z) + eps: row j's max and 1 / sum here, column j's entries need row i's")
    rs, rinv = f("rsum"), f("rinv")
    k.raw(line_max(m, row))
    for i in range(n):
        k.raw(exp_shift(row[i], row[i], m))
    k_tree_sum(k, rs, row, "rs")
    k.ins(f"rcp.rn.f32 {rinv}, {rs};")
    for i in range(n):
        k.ins(f"fma.rn.f32 {row[i]}, {row[i]}, {rinv}, {eps_hc};")
    for i in range(n):
        k.ins(f"shfl.sync.idx.b32 {mi}, {m}, {i}, {seg}, 0xffffffff;")
        k.ins(f"shfl.sync.idx.b32 {ri}, {rinv}, {i}, {seg}, 0xffffffff;")
        k.raw(exp_shift(col[i], col[i], mi))
        k.ins(f"fma.rn.f32 {col[i]}, {col[i]}, {ri}, {eps_hc};")
    k.label("SK_STARTED")

    sm_, fac = f("sk_sum"), f("sk_fac")
    va, vb = u("veca"), u("vecb")
    k.ins(f"add.u32 {vb}, {wb}, {vec_off};")
    k.ins(f"add.u32 {va}, {vb}, {la};")

    def step(own, other, off, tag):
        """own /= sum(own) + eps (this lane's line), other[i] /= the factor lane i published."""
        k_tree_sum(k, sm_, own, f"{tag}t")
        k.ins(f"add.f32 {sm_}, {sm_}, {eps_hc};")
        k_rcp_newton(k, fac, sm_, f"{tag}r")
        for i in range(n):
            k.ins(f"mul.f32 {own[i]}, {own[i]}, {fac};")
        k.ins(f"@{plive} st.shared.f32 [{va}+{off}], {fac};")
        k.ins("bar.warp.sync 0xffffffff;")
        fv = [f(f"{tag}f{i}") for i in range(min(n, 16))]
        for h in range(0, n, 16):
            for i in range(0, min(16, n), 4):
                k.ins(f"ld.shared.v4.f32 {{{', '.join(fv[i:i + 4])}}}, [{vb}+{off + 4 * (h + i)}];")
            for i in range(h, min(n, h + 16)):
                k.ins(f"mul.f32 {other[i]}, {other[i]}, {fv[i - h]};")

    def col_step():
        k.comment("column step: S[:, j] /= colsum_j + eps (lane j's column; the row copies by f_j)")
        step(col, row, 0, "cs")

    def row_step():
        k.comment("row step: S[j, :] /= rowsum_j + eps (lane j's row; the column copies by g_j)")
        step(row, col, 256, "rs")

    loops, it = u("sk_loops"), u("sk_it")
    k.comment("Paper: iters x (column, row); V4: max(iters - 1, 0) x (column, row) + a last column step")
    k.ins(f"mov.u32 {loops}, {iters};")
    k.ins(f"@!{paper} max.u32 {loops}, {loops}, 1;")
    k.ins(f"@!{paper} sub.u32 {loops}, {loops}, 1;")
    k.raw(loop_head(it, 0, loops, pr, "SK_LOOP", "SK_LAST"))
    col_step()
    row_step()
    k.raw(loop_tail(it, "SK_LOOP"))
    k.label("SK_LAST")
    k.ins(f"@{paper} bra SK_END;")
    col_step()
    k.label("SK_END")
