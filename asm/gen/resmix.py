"""h_res times the x rows of a token on the tensor cores (post_mma, static_mma): the A operand
(h_res or its transpose) as m16n8k16 fragments split into bf16 hi + lo, the B operand (8-channel
tiles of the x rows in shared memory) by ldmatrix.trans, and one f32 accumulator chain per
(tile, m-tile), hi then lo of each k-step: a fixed order, so the same bits every run."""

from .blocks import MMA_BF16, mma, split_bf16


def hres_fragments(k, n, MT, ra, e0, e1, h0, h1, transposed=False):
    """Ahi, Alo[mt][ks][r]: lane (g, t) holds rows g, g + 8 and columns 2t, 2t + 1, 2t + 8, 2t + 9
    of each of the MT x MT 16 x 16 tiles of A (f32 in shared memory at ra, row-major, lane's
    (g, 2t) element first); transposed: A = h_res^T (V4: out[k] = sum_j h_res[j][k] x[j])."""
    u = lambda s: k.reg("b32", s)
    Ahi = [[[u(f"ah{mt}_{ks}_{r}") for r in range(4)] for ks in range(MT)] for mt in range(MT)]
    Alo = [[[u(f"al{mt}_{ks}_{r}") for r in range(4)] for ks in range(MT)] for mt in range(MT)]
    for mt in range(MT):
        for ks in range(MT):
            for r in range(4):
                row, col = 16 * mt + 8 * (r & 1), 16 * ks + 8 * (r >> 1)
                if not transposed:
                    k.ins(f"ld.shared.v2.f32 {{{e0}, {e1}}}, [{ra}+{4 * (row * n + col)}];")
                else:
                    k.ins(f"ld.shared.f32 {e0}, [{ra}+{4 * (col * n + row)}];")
                    k.ins(f"ld.shared.f32 {e1}, [{ra}+{4 * ((col + 1) * n + row)}];")
                k.raw(split_bf16(Ahi[mt][ks][r], Alo[mt][ks][r], e0, e1, h0, h1))
    return Ahi, Alo


def ldmatrix_tile(k, MT, regs, addr):
    """The B fragments of one 8-channel tile (n = 16 MT stream rows) by ldmatrix.trans."""
    shape = "x4" if MT == 2 else "x2"
    k.ins(f"ldmatrix.sync.aligned.m8n8.{shape}.trans.shared.b16 {{{', '.join(regs)}}}, [{addr}];")


def mma_chains(k, MT, B, Ahi, Alo, zero):
    """acc[x, mt] = A x tile x: for the two tiles x of B and the m-tiles mt, one f32 chain (first
    input zero) over the k-steps, hi then lo of each."""
    acc = {}
    for x in range(2):
        for mt in range(MT):
            d = [k.reg("f32", f"c{x}{mt}_{r}") for r in range(4)]
            acc[x, mt] = d
            first = True
            for ks in range(MT):
                for A in (Ahi, Alo):
                    cin = [zero] * 4 if first else d
                    first = False
                    k.ins(mma(MMA_BF16, d, A[mt][ks], [B[x][2 * ks], B[x][2 * ks + 1]], cin))
    return acc
