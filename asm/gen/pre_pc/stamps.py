"""The pre_pc.stamps timing experiment: phase stamps per round and at the launch's edges."""

from ..abi import PRE_DECODE
from .constants import CL, NCW, NW, PAIR_HEAD, PAIR_ROW, TT


STAMP_REGS = """
    .reg .b64 %stb, %sgt, %sck, %sad;
    .reg .b32 %srr;
    .reg .pred %pst;"""
STAMP_LOAD = f"""
    ld.param.u64 %stb, [p_args+{PRE_DECODE.offset('ws_part')}];         // pre_pc.stamps: the debug buffer"""
# the pair entry's stamps lie past its exchange rows for this call's T (its ws_part is the region)
PAIR_STAMP_LOAD = STAMP_LOAD + f"""
    add.u32 %srr, %T, {TT - 1};
    shr.u32 %srr, %srr, {TT.bit_length() - 1};                  // tiles
    mul.wide.u32 %sad, %srr, {2 * CL * PAIR_ROW};
    add.u64 %stb, %stb, %sad;
    add.u64 %stb, %stb, {PAIR_HEAD};        // past the head and the rows [tiles][2][16]"""
STAMP_ROUNDS = 96  # pre_pc.stamps: rounds recorded per CTA (T = 8192: 73 per cluster)


def exit_stamps(at, tag="", at_slot=None):
    """pre_pc.stamps: (%globaltimer, %clock64) of the fill and drain in the last two stamp rows
    (beyond the rounds profiled; row 95 = STAMP_ROUNDS - 1, row 94 = STAMP_ROUNDS - 2):
    row 95: "prewait" slot 13 (thread 0 before the grid dependency; it first copies the previous
    launch's slot 12 to slot 14), "entry" slot 15 (thread 0 after it), "warp" slot w (lane 0 of
    warp w reaching the end), "cluster" slot 12 (thread 0 past the closing cluster barrier);
    row 94: "init" slot 12 (thread 0 before the opening cluster barrier), "clustered" slot 13
    (after it), "ready" slot w (lane 0 of warp w: a math warp's phi fragments loaded, a mix
    warp's first fills issued); row 93: "phi" slot at_slot (thread 0: 8 before the fragments,
    2j where run j's split begins, 2j + 1 where it ends), "mix" slot at_slot (the first mix
    thread: 9 at its start, 10 before the first fills). tests/gpu_pre.rs profile_pc_phases
    prints them."""
    tid0 = "setp.ne.u32 %pst, %tx, 0;"
    lane0 = "setp.ne.u32 %pst, %lane, 0;"
    cond, row, slot = {"prewait": ("mov.u32 %srr, %tid.x;\n    setp.ne.u32 %pst, %srr, 0;", 1, "13"),
                       "entry": (tid0, 1, "15"), "warp": (lane0, 1, "%warp"),
                       "cluster": (tid0, 1, "12"), "init": (tid0, 2, "12"),
                       "clustered": (tid0, 2, "13"), "ready": (lane0, 2, "%warp"),
                       "phi": (tid0, 3, at_slot),
                       "mix": (f"setp.ne.u32 %pst, %tx, {32 * (NW + NCW)};", 3, at_slot)}[at]
    copy_prev = """
    ld.global.v2.u64 {%sgt, %sck}, [%sad+-16];   // the previous launch's slot 12 (its exit)
    st.global.v2.u64 [%sad+16], {%sgt, %sck};""" if at == "prewait" else ""
    return f"""
    // ---- EXP stamp: {at}
    {cond}
    @%pst bra PSX_{at}{tag};
    mov.u32 %srr, %ctaid.x;
    mad.lo.u32 %srr, %srr, {STAMP_ROUNDS}, {STAMP_ROUNDS - row};
    mad.lo.u32 %srr, %srr, 16, {slot};
    mul.wide.u32 %sad, %srr, 16;
    add.u64 %sad, %stb, %sad;{copy_prev}
    mov.u64 %sgt, %globaltimer;
    mov.u64 %sck, %clock64;
    st.global.v2.u64 [%sad], {{%sgt, %sck}};
PSX_{at}{tag}:"""
