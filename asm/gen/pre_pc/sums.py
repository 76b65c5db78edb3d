"""Fixed-order sums of gathered float4s and the gather buffers' mbarrier waits."""

from .constants import CL, SLOTS


def ordered_sum(e, addr, stride, count, tag):
    """%v0..3 = the float4s at addr + i stride, i < count, added in i order (bits fixed); the
    loads are issued 4 at a time inside a loop (an unrolled body let ptxas hoist every load
    beside phi's registers, and spill)."""
    assert count % 4 == 0
    e(f"""    mov.f32 %v0, 0f80000000;
    mov.f32 %v1, 0f80000000;
    mov.f32 %v2, 0f80000000;
    mov.f32 %v3, 0f80000000;
    mov.u32 %sa, {addr};
    mov.u32 %sn, {count // 4};
{tag}:
    ld.shared.v4.f32 {{%u0, %u1, %u2, %u3}}, [%sa];
    ld.shared.v4.f32 {{%w0, %w1, %w2, %w3}}, [%sa+{stride}];
    ld.shared.v4.f32 {{%y0, %y1, %y2, %y3}}, [%sa+{2 * stride}];
    ld.shared.v4.f32 {{%z0, %z1, %z2, %z3}}, [%sa+{3 * stride}];""")
    for src in ("%u", "%w", "%y", "%z"):
        for c in range(4):
            e(f"    add.f32 %v{c}, %v{c}, {src}{c};")
    e(f"""    add.u32 %sa, %sa, {4 * stride};
    sub.u32 %sn, %sn, 1;
    setp.ne.u32 %ps, %sn, 0;
    @%ps bra.uni {tag};""")


def arm_gather(slots):
    """%gab / %gbb = gat / gbar of tile kk (buffer kk & 1); thread 0 arms gbar for the CL x slots
    float4s every CTA sends here (tile kk exists: %p_cur; the cp.async entries)."""
    return f"""    and.b32 %r8, %kk, 1;
    mov.u32 %gab, gat;
    mad.lo.u32 %gab, %r8, {CL * slots * 16}, %gab;
    mov.u32 %gbb, gbar;
    mad.lo.u32 %gbb, %r8, 8, %gbb;
    setp.eq.u32 %p1, %tx, 0;
    and.pred %p1, %p1, %p_cur;
    @%p1 mbarrier.arrive.expect_tx.shared::cta.b64 %mbs, [%gbb], {CL * slots * 16};"""


def wait_gather(e, tag, slots=SLOTS, nbuf=2):
    """%gab / %gbb = gat / gbar of tile kk-1 (buffer (kk-1) % nbuf), then wait for its phase
    ((kk-1) / nbuf parity): every CTA's partials of that tile have landed."""
    e(f"""    sub.u32 %r8, %kk, 1;
    and.b32 %r9, %r8, {nbuf - 1};
    mov.u32 %gab, gat;
    mad.lo.u32 %gab, %r9, {CL * slots * 16}, %gab;
    mov.u32 %gbb, gbar;
    mad.lo.u32 %gbb, %r9, 8, %gbb;
    bfe.u32 %r8, %r8, {nbuf.bit_length() - 1}, 1;
{tag}:
    mbarrier.try_wait.parity.shared::cta.b64 %p1, [%gbb], %r8;
    @!%p1 bra {tag};""")
