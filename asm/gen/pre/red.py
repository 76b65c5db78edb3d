"""Last CTA of a decode tile: sum the splits' partial blocks. For ldp = 32 (n <= 4): 16-byte
quads, 4 split groups (warps 0-1, 2-3, 4-5, 6-7 -> group = tx / 64) each summing splits g = p,
p+4, ... in order with 8 loads in flight, group sums combined in group order through shared
memory: deterministic, ~ splits/32 L2 round trips instead of splits/8."""

# The 8 quads of f32 registers the reductions load into (free after the K loop).
V4_TEMPS = [["%f50", "%f51", "%f52", "%f53"], ["%f54", "%f55", "%f56", "%f57"], ["%f58", "%f59", "%f60", "%f61"],
            ["%f62", "%f63", "%f15", "%f16"], ["%f17", "%f18", "%f19", "%f20"], ["%f21", "%f22", "%f23", "%f24"],
            ["%f25", "%f26", "%f27", "%f28"], ["%f29", "%f30", "%f31", "%f32"]]


# One split's quad at [%rd14] added into %f3..%f6; %rd14 steps to the next split (%rd11 apart).
ADD_ONE_QUAD = """    ld.global.cg.v4.f32 {%f50, %f51, %f52, %f53}, [%rd14];
    add.f32 %f3, %f3, %f50;
    add.f32 %f4, %f4, %f51;
    add.f32 %f5, %f5, %f52;
    add.f32 %f6, %f6, %f53;
    add.u64 %rd14, %rd14, %rd11;"""


def red_quads():
    return """    setp.ne.u32 %p9, %ldp, 32;
    @%p9 bra RED_SCALAR;
    shl.b32 %r34, %rows, 3;                 // P quads (8 per row)
    add.u32 %r35, %rows, 3;
    shr.u32 %r35, %r35, 2;
    add.u32 %r35, %r35, %r34;               // + ss quads
    shr.u32 %r36, %tx, 6;                   // split group p
    and.b32 %r37, %tx, 63;
    shl.b64 %rd11, %rd11, 2;                // 4 splits apart
RQ_LOOP:
    setp.ge.u32 %p9, %r37, %r35;
    @%p9 bra RQ_DONE;
    setp.lt.u32 %p10, %r37, %r34;
    shl.b32 %r38, %r37, 2;                  // float offset: P quads, then ss at 1024
    sub.u32 %r39, %r37, %r34;
    shl.b32 %r39, %r39, 2;
    add.u32 %r39, %r39, 1024;
    selp.u32 %r38, %r38, %r39, %p10;
    mul.wide.u32 %rd13, %r38, 4;
    add.u64 %rd14, %rd10, %rd13;
    mul.wide.u32 %rd15, %r36, %r24;
    shl.b64 %rd15, %rd15, 2;
    add.u64 %rd14, %rd14, %rd15;            // split p
    mov.f32 %f3, 0f00000000;
    mov.f32 %f4, 0f00000000;
    mov.f32 %f5, 0f00000000;
    mov.f32 %f6, 0f00000000;
    mov.u32 %r40, %r36;
RQ_8:
    add.u32 %r41, %r40, 28;
    setp.ge.u32 %p10, %r41, %nks;
    @%p10 bra RQ_1;
    ld.global.cg.v4.f32 {%f50, %f51, %f52, %f53}, [%rd14];
    add.u64 %rd16, %rd14, %rd11;
    ld.global.cg.v4.f32 {%f54, %f55, %f56, %f57}, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.v4.f32 {%f58, %f59, %f60, %f61}, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.v4.f32 {%f62, %f63, %f15, %f16}, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.v4.f32 {%f17, %f18, %f19, %f20}, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.v4.f32 {%f21, %f22, %f23, %f24}, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.v4.f32 {%f25, %f26, %f27, %f28}, [%rd16];
    add.u64 %rd16, %rd16, %rd11;
    ld.global.cg.v4.f32 {%f29, %f30, %f31, %f32}, [%rd16];
    add.u64 %rd14, %rd16, %rd11;
""" + "\n".join(f"    add.f32 %f{3+c}, %f{3+c}, {r};" for quad in V4_TEMPS for c, r in enumerate(quad)) + """
    add.u32 %r40, %r40, 32;
    bra RQ_8;
RQ_1:
    setp.ge.u32 %p10, %r40, %nks;
    @%p10 bra RQ_ST;
""" + ADD_ONE_QUAD + """
    add.u32 %r40, %r40, 4;
    bra RQ_1;
RQ_ST:
    mov.u32 %r41, smem_big;
    mad.lo.u32 %r42, %r36, 264, %r37;       // [group][quad], 264 quads max
    shl.b32 %r42, %r42, 4;
    add.u32 %r42, %r42, %r41;
    st.shared.v4.f32 [%r42], {%f3, %f4, %f5, %f6};
    add.u32 %r37, %r37, 64;
    bra RQ_LOOP;
RQ_DONE:
    bar.sync 0;
    mov.u32 %r37, %tx;
RQ_SUM:
    setp.ge.u32 %p9, %r37, %r35;
    @%p9 bra RQ_SUM_DONE;
    mov.u32 %r41, smem_big;
    shl.b32 %r42, %r37, 4;
    add.u32 %r42, %r42, %r41;
    ld.shared.v4.f32 {%f3, %f4, %f5, %f6}, [%r42];
    ld.shared.v4.f32 {%f50, %f51, %f52, %f53}, [%r42+4224];
    ld.shared.v4.f32 {%f54, %f55, %f56, %f57}, [%r42+8448];
    ld.shared.v4.f32 {%f58, %f59, %f60, %f61}, [%r42+12672];
    add.f32 %f3, %f3, %f50;
    add.f32 %f4, %f4, %f51;
    add.f32 %f5, %f5, %f52;
    add.f32 %f6, %f6, %f53;
    add.f32 %f3, %f3, %f54;
    add.f32 %f4, %f4, %f55;
    add.f32 %f5, %f5, %f56;
    add.f32 %f6, %f6, %f57;
    add.f32 %f3, %f3, %f58;
    add.f32 %f4, %f4, %f59;
    add.f32 %f5, %f5, %f60;
    add.f32 %f6, %f6, %f61;
    setp.lt.u32 %p10, %r37, %r34;
    @!%p10 bra RQ_SS;
    mul.wide.u32 %rd13, %r37, 16;
    add.u64 %rd15, %rd12, %rd13;
    st.global.v4.f32 [%rd15], {%f3, %f4, %f5, %f6};
    bra RQ_NEXT;
RQ_SS:
    sub.u32 %r38, %r37, %r34;
    shl.b32 %r38, %r38, 2;                  // first row of this ss quad
    add.u32 %r39, %t0, %r38;
    mul.wide.u32 %rd13, %r39, 4;
    add.u64 %rd15, %wss, %rd13;
    setp.lt.u32 %p10, %r38, %rows;
    @%p10 st.global.f32 [%rd15], %f3;
    add.u32 %r38, %r38, 1;
    setp.lt.u32 %p10, %r38, %rows;
    @%p10 st.global.f32 [%rd15+4], %f4;
    add.u32 %r38, %r38, 1;
    setp.lt.u32 %p10, %r38, %rows;
    @%p10 st.global.f32 [%rd15+8], %f5;
    add.u32 %r38, %r38, 1;
    setp.lt.u32 %p10, %r38, %rows;
    @%p10 st.global.f32 [%rd15+12], %f6;
RQ_NEXT:
    add.u32 %r37, %r37, 256;
    bra RQ_SUM;
RQ_SUM_DONE:
    bar.sync 0;
    bra COEF;
RED_SCALAR:"""
