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


def bulk_barrier_init(k, cpb, tid, pr):
    """The bulk-copy mbarrier cpb (one arrival: thread 0 with the byte count, then the copies'
    complete_tx), initialised by thread 0 before barrier 0."""
    k.comment("cpbar: one arrival (thread 0, with the tile's byte count) and the bulk copies' complete_tx;")
    k.comment("initialised by thread 0 before barrier 0")
    k.ins(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.ins(f"@{pr} bra INIT_END;")
    k.ins(f"mbarrier.init.shared::cta.b64 [{cpb}], 1;")
    k.ins("fence.mbarrier_init.release.cluster;")
    k.label("INIT_END")
    k.ins("barrier.sync 0;")


def bulk_expect(k, cpb, tid, tb, nbytes_from, rows, pr):
    """Thread 0 arrives on cpb expecting rows x nbytes_from bytes (tb = the count)."""
    st64 = k.reg("b64", "cpst")
    k.ins(f"setp.ne.u32 {pr}, {tid}, 0;")
    k.ins(f"@{pr} bra CP_EXPECT_END;")
    k.ins(f"mul.lo.u32 {tb}, {nbytes_from}, {rows};")
    k.ins(f"mbarrier.arrive.expect_tx.shared::cta.b64 {st64}, [{cpb}], {tb};")
    k.label("CP_EXPECT_END")


def bulk_rows(k, n, NW, warp, xrow, cbytes, pitch, sX, row_bytes, cpb, pr, regs):
    """Lane 0 of warp w bulk-copies stream rows w, w + NW, ... < n (row_bytes each, cbytes apart
    in global memory) to the tile at sX (pitch bytes apart); regs = (ii, src, dst, cbw, pitchw)."""
    ii, src, dst, cbw, pw8 = regs
    k.ins(f"mov.u32 {ii}, {warp};")
    k.ins(f"mul.wide.u32 {src}, {warp}, {cbytes};")
    k.ins(f"add.u64 {src}, {src}, {xrow};")
    k.ins(f"mad.lo.u32 {dst}, {warp}, {pitch}, {sX};")
    k.ins(f"mul.wide.u32 {cbw}, {cbytes}, {NW};")
    k.ins(f"mul.lo.u32 {pw8}, {pitch}, {NW};")
    k.label("CP_ROW")
    k.ins(f"cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{dst}], [{src}], {row_bytes}, [{cpb}];")
    k.ins(f"add.u64 {src}, {src}, {cbw};")
    k.ins(f"add.u32 {dst}, {dst}, {pw8};")
    k.ins(f"add.u32 {ii}, {ii}, {NW};")
    k.ins(f"setp.lt.u32 {pr}, {ii}, {n};")
    k.ins(f"@{pr} bra CP_ROW;")
    k.label("CP_END")


def lane_group(k, lane, g, t2):
    """g = lane / 4 (the fragment's row), t2 = 2 (lane % 4) (its first column)."""
    k.ins(f"shr.u32 {g}, {lane}, 2;")
    k.ins(f"and.b32 {t2}, {lane}, 3;")
    k.ins(f"shl.b32 {t2}, {t2}, 1;")


def ldmatrix_rows(k, n, lane, pitch, sX, xl, lr):
    """xl = the lane's ldmatrix row in the x tile at sX: stream lane mod n (rows pitch bytes apart)."""
    k.comment(f"ldmatrix row addresses: lane l gives x row (stream) l mod {n} of the 8-channel tile")
    k.ins(f"and.b32 {lr}, {lane}, {n - 1};")
    k.ins(f"mad.lo.u32 {xl}, {lr}, {pitch}, {sX};")


def out_rows(k, g, orow, cbytes, out_note):
    """og = the lane's output row g of the token's stream-major out, cb8 = 8 rows; zero = 0.0."""
    og, cb8 = k.reg("b64", "og"), k.reg("b64", "cb8")
    k.comment(f"this lane's output: row g of {out_note} (row i + 8 is 8 C bf16 further)")
    k.ins(f"mul.wide.u32 {og}, {g}, {cbytes};")
    k.ins(f"add.u64 {og}, {og}, {orow};")
    k.ins(f"mul.wide.u32 {cb8}, {cbytes}, 8;")
    zero = k.reg("f32", "zero")
    k.ins(f"mov.f32 {zero}, 0f00000000;")
    return og, cb8, zero


def tile_pair(k, it, nt1, p1, NW, bound, exit_label, pr):
    """Loop head of phase B: warp w takes the 8-channel tiles it and nt1 = it + NW (p1: nt1 < bound;
    else clamped to it, its results not stored)."""
    k.ins(f"setp.ge.u32 {pr}, {it}, {bound};")
    k.ins(f"@{pr} bra {exit_label};")
    k.ins(f"add.u32 {nt1}, {it}, {NW};")
    k.ins(f"setp.lt.u32 {p1}, {nt1}, {bound};")
    k.ins(f"selp.b32 {nt1}, {nt1}, {it}, {p1};")
    return [it, nt1]


def store_out(k, MT, hq, yv, acc_x, oa, cb8, vv, w):
    """out rows g + 8 h + 16 mt of two channels: h_post[row] y + (A x)[row], to bf16 pairs."""
    for mt in range(MT):
        for h in range(2):
            for i in range(2):
                k.ins(f"fma.rn.f32 {vv[i]}, {hq[mt][h]}, {yv[i]}, {acc_x[mt][2 * h + i]};")
            k.ins(f"cvt.rn.bf16x2.f32 {w}, {vv[1]}, {vv[0]};")
            k.ins(f"st.global.b32 [{oa}], {w};")
            if (mt, h) != (MT - 1, 1):
                k.ins(f"add.u64 {oa}, {oa}, {cb8};")
