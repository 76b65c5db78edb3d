//! Hazards the hardware does not interlock: the `s_waitcnt` counters and the gfx94x manually
//! inserted wait states.
//!
//! # Memory counters
//! A load marks the registers it writes as pending on its counter; reading or overwriting one
//! before an `s_waitcnt` covers the load is reported. `vmcnt` retires VMEM loads, stores,
//! atomics and cache operations in issue order. `lgkmcnt` counts LDS and SMEM operations
//! together: LDS ops complete in order, SMEM ops in any order, so `lgkmcnt(N)` with SMEM
//! outstanding only guarantees the LDS ops it would cover if every outstanding SMEM op were
//! among the N still in flight, and only `lgkmcnt(0)` covers an SMEM load.
//!
//! # Wait states
//! Counted along the executed path: every instruction issued is one wait state, `s_nop N` is
//! N + 1. The rules, with the count that passes (one fewer is reported) and their sources
//! (LLVM's `GCNHazardRecognizer` for gfx940, AMD's rocRoller wait-state observers for 94x):
//!
//! | first instruction | second instruction | wait states | source |
//! |---|---|---|---|
//! | VALU writes an SGPR / VCC / EXEC | VMEM reads it (saddr, srsrc, soffset) | 5 | LLVM `checkVMEMHazards`, rocRoller `VALUWriteSGPRVMEM` |
//! | VALU writes an SGPR / VCC / EXEC | VALU reads it as an operand: a constant, a lane mask (v_cndmask), a carry-in | 2 | LLVM `checkVALUHazards` (VDecCoExecHazard); rocRoller `VALUWriteSGPRVCC94x` |
//! | VALU writes an SGPR / VCC | v_readlane / v_writelane lane select | 4 | LLVM `checkRWLaneHazards`, rocRoller `VALUWriteSGPRVCC94x` |
//! | VALU writes VCC | v_div_fmas (implicit VCC) | 4 | LLVM `checkDivFMasHazards`, rocRoller `VALUWriteVCCVDIVFMAS` |
//! | VALU writes EXEC (v_cmpx) | v_readlane / v_readfirstlane / v_writelane | 4 | LLVM (VALUWriteEXECRWLane), rocRoller `VCMPXWrite94x` |
//! | VALU writes a VGPR | v_readlane / v_readfirstlane reads it | 1 | LLVM (VALUWriteVGPRReadlaneRead), rocRoller `VALUWriteReadlane94x` |
//! | transcendental writes a VGPR | non-transcendental VALU reads it | 1 | LLVM (TransDefWaitstates), rocRoller `VALUTransWrite94x` |
//! | SDWA with dst_sel other than DWORD, or VOP3 `op_sel[3]` | VALU reads the VGPR | 1 | LLVM (DstSelForwardingHazard), rocRoller `OPSEL94x` |
//! | VALU writes a VGPR | DPP reads it | 2 | LLVM `checkDPPHazards` |
//! | VALU writes EXEC | DPP instruction | 5 | LLVM `checkDPPHazards` |
//! | VMEM store with more than 64 bits of data (x3, x4, cmpswap_x2; MUBUF without an SGPR soffset) | VALU overwrites its data VGPRs | 2 | LLVM `checkVALUHazardsHelper` (12DWordStoreHazard, 2 on gfx940), rocRoller `BufferStoreDwordXXRead` |
//! | s_setreg | s_getreg / s_setreg of the same register | 2 | LLVM `checkGetRegHazards` / `checkSetRegHazards` |
//!
//! With XNACK replay on ([`crate::exec::Options::xnack`]), memory instructions issued back to
//! back form a soft clause that the hardware may replay after a page fault: a clause in which
//! one instruction writes a register another reads or writes, or a store following a load, is
//! reported (1 wait state — any other instruction — ends a clause; LLVM
//! `checkSoftClauseHazards`, VMEM and SMEM clauses alike). ROCm runs MI300X with XNACK off, so
//! this is off by default; LLVM emits the breaks for code compiled for `xnack any`.
//!
//! The carry-in rule is where the sources disagree: rocRoller's table says a VALU-written SGPR /
//! VCC read *as a carry-in* needs no wait states, LLVM counts every SGPR operand and implicit
//! VCC read of a VALU, carry-ins included, and inserts the `s_nop` (e.g. between
//! `v_add_co_u32` and `v_addc_co_u32`). The simulator takes the stricter reading (LLVM's): code
//! that passes it passes under either.
//!
//! Rules of one source that the other does not have, and are not checked:
//! - rocRoller's `BufferStoreDwordXXRead` also asks 1 wait state before a *non-VALU* write of a
//!   wide store's data VGPRs; LLVM has no such rule and emits none, and a load's result only
//!   lands after `s_waitcnt` anyway.
//! - rocRoller's `OPSEL94x` asks 1 wait state after any op_sel use, LLVM only after a
//!   destination select (the rule above); source selects only read.
//!
//! Wait states LLVM inserts that are not a hardware rule: `tests/cross.rs` removes each `s_nop`
//! wait state and each `s_waitcnt` LLVM emitted in the clang-compiled cross-check suite (308 of
//! them), one at a time, and every removal is reported by a rule above — every `s_waitcnt`
//! guards a register, an LDS store before a barrier, or a release / acquire. One kind holds only
//! under a condition: the `s_nop 0` LLVM puts between memory instructions of a soft clause
//! (compiling for `xnack any`) is a hardware rule only with XNACK replay on, so it is reported
//! with [`crate::exec::Options::xnack`] set (as that test runs) and not by default.

use crate::decode::{flag, Enc, Ext, Inst, Op, Ty};
use crate::exec::{cidx, Counter, Ctx, Pending, RegUse, Wave, EXEC, VCC};
use crate::SimError;

/// How an SGPR code prints in a hazard message.
fn sname(r: u16) -> String {
    match r {
        106 => "vcc_lo".into(),
        107 => "vcc_hi".into(),
        126 => "exec_lo".into(),
        127 => "exec_hi".into(),
        124 => "m0".into(),
        _ => format!("s{r}"),
    }
}

fn gap(w: &Wave, t: u64) -> u64 {
    if t == 0 {
        u64::MAX
    } else {
        w.clock - t
    }
}

/// SGPR codes an operand of type `ty` spans (VGPRs and constants: none).
fn sgprs(code: u16, ty: Ty) -> impl Iterator<Item = u16> {
    let n = ty.regs().max(1);
    (code..code + n).filter(move |&c| c < 128 && code < 128)
}

/// VGPRs an operand spans.
fn vgprs(code: u16, ty: Ty) -> impl Iterator<Item = usize> {
    let n = ty.regs().max(1) as usize;
    let first = code as usize;
    (0..n).filter(move |_| first >= 256).map(move |i| first - 256 + i)
}

/// Checks the gfx94x manually inserted wait states before `inst` issues.
pub(crate) fn check_wait_states(ctx: &Ctx, w: &Wave, inst: &Inst) -> Result<(), SimError> {
    let fail = |what: String| Err(ctx.err(inst, what));
    let s = inst.sig();
    match inst.enc {
        Enc::Global | Enc::Mubuf => {
            let mut regs: Vec<u16> = Vec::new();
            if inst.enc == Enc::Global {
                if inst.src[2] != 0x7f {
                    regs.extend(inst.src[2]..inst.src[2] + 2);
                }
            } else if s.ret > 0 || s.data > 0 {
                regs.extend(inst.src[2]..inst.src[2] + 4);
                if inst.soffset < 128 {
                    regs.push(inst.soffset);
                }
            }
            for r in regs {
                let g = gap(w, w.sgpr_valu[r as usize]);
                if g < 5 {
                    return fail(format!(
                        "VMEM reads {} {g} wait states after a VALU wrote it (gfx94x needs 5)",
                        sname(r)
                    ));
                }
            }
        }
        Enc::Sopk if matches!(inst.op, Op::SGetregB32 | Op::SSetregB32 | Op::SSetregImm32B32) => {
            let id = (inst.imm as u32 & 0x3f) as usize;
            let g = gap(w, w.setreg[id]);
            if g < 2 {
                return fail(format!(
                    "hardware register {id} accessed {g} wait states after s_setreg wrote it (needs 2)"
                ));
            }
        }
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => {
            let lane_op = matches!(inst.op, Op::VReadlaneB32 | Op::VWritelaneB32);
            let rdlane = matches!(inst.op, Op::VReadlaneB32 | Op::VReadfirstlaneB32);
            // SGPR operands (constants, lane masks, carry-ins; the lane select of readlane /
            // writelane needs 4).
            for i in 0..s.nsrc {
                let need = if lane_op && i == 1 { 4 } else { 2 };
                for r in sgprs(inst.src[i], s.src[i]) {
                    let g = gap(w, w.sgpr_valu[r as usize]);
                    if g < need {
                        let what = if need == 4 { " as a lane select" } else { "" };
                        return fail(format!(
                            "reads {}{what} {g} wait states after a VALU wrote it (gfx94x needs {need})",
                            sname(r)
                        ));
                    }
                }
            }
            if s.has(flag::VCCIN) {
                for r in [VCC as u16, VCC as u16 + 1] {
                    let g = gap(w, w.sgpr_valu[r as usize]);
                    if g < 4 {
                        return fail(format!("v_div_fmas reads VCC {g} wait states after a VALU wrote it (needs 4)"));
                    }
                }
            }
            if lane_op || inst.op == Op::VReadfirstlaneB32 {
                for r in [EXEC as u16, EXEC as u16 + 1] {
                    let g = gap(w, w.sgpr_valu[r as usize]);
                    if g < 4 {
                        return fail(format!(
                            "{} {g} wait states after a VALU (v_cmpx) wrote EXEC (gfx94x needs 4)",
                            crate::decode::mnemonic(inst.op)
                        ));
                    }
                }
            }
            let dpp = matches!(inst.ext, Ext::Dpp(_));
            if dpp {
                for r in [EXEC as u16, EXEC as u16 + 1] {
                    let g = gap(w, w.sgpr_valu[r as usize]);
                    if g < 5 {
                        return fail(format!("DPP {g} wait states after a VALU wrote EXEC (needs 5)"));
                    }
                }
            }
            let trans = s.has(flag::TRANS);
            for i in 0..s.nsrc {
                for v in vgprs(inst.src[i], s.src[i]) {
                    let Some(&t) = w.vgpr_valu.get(v) else { continue };
                    let g = gap(w, t);
                    if rdlane && i == 0 && g < 1 {
                        return fail(format!(
                            "{} reads v{v} right after a VALU wrote it (gfx94x needs 1)",
                            crate::decode::mnemonic(inst.op)
                        ));
                    }
                    if dpp && g < 2 {
                        return fail(format!("DPP reads v{v} {g} wait states after a VALU wrote it (needs 2)"));
                    }
                    if !trans && gap(w, w.vgpr_trans[v]) < 1 {
                        return fail(format!(
                            "reads v{v} right after a transcendental wrote it (gfx94x needs 1 wait state)"
                        ));
                    }
                    if gap(w, w.vgpr_partial[v]) < 1 {
                        return fail(format!(
                            "reads v{v} right after an SDWA / op_sel partial write of it (gfx94x needs 1)"
                        ));
                    }
                }
            }
            // A wide store's data VGPRs must not be overwritten for 2 wait states.
            if inst.enc != Enc::Vopc && inst.dst >= 256 {
                let n = s.dst.regs().max(1);
                for &(t, first, cnt) in &w.wide_stores {
                    let g = gap(w, t);
                    if g >= 2 {
                        continue;
                    }
                    let d0 = inst.dst - 256;
                    if d0 < first + cnt && first < d0 + n {
                        return fail(format!(
                            "overwrites v{} {g} wait states after a store of more than 64 bits read it (gfx94x needs 2)",
                            d0.max(first)
                        ));
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Records what a VALU instruction wrote, for [`check_wait_states`].
pub(crate) fn note_valu_writes(w: &mut Wave, inst: &Inst) {
    let now = w.clock; // already advanced past this instruction
    let s = inst.sig();
    let sg = |w: &mut Wave, code: u16, n: u16| {
        for r in code..(code + n).min(128) {
            w.sgpr_valu[r as usize] = now;
        }
    };
    if inst.enc == Enc::Vopc {
        sg(w, inst.sdst, 2);
        if s.has(flag::CMPX) {
            sg(w, EXEC as u16, 2);
        }
        return;
    }
    if s.has(flag::CO) {
        sg(w, inst.sdst, 2);
    }
    if s.dst == Ty::S {
        sg(w, inst.dst, 1);
        return;
    }
    if inst.dst >= 256 && s.dst != Ty::N {
        let partial = match inst.ext {
            Ext::Sdwa(x) => x.dst_sel != 6,
            _ => inst.enc != Enc::Vop3p && inst.op_sel & 8 != 0,
        };
        let trans = s.has(flag::TRANS);
        for v in inst.dst - 256..inst.dst - 256 + s.dst.regs() {
            let v = v as usize;
            if v < w.vgpr_valu.len() {
                w.vgpr_valu[v] = now;
                if trans {
                    w.vgpr_trans[v] = now;
                }
                if partial {
                    w.vgpr_partial[v] = now;
                }
            }
        }
    }
}

/// Records a VMEM store with more than 64 bits of data (its data VGPRs must not be
/// overwritten by a VALU for 2 wait states).
pub(crate) fn note_wide_store(w: &mut Wave, first: u16, n: u16) {
    let now = w.clock;
    w.wide_stores.retain(|&(t, _, _)| now - t < 2);
    w.wide_stores.push((now, first, n));
}

/// The XNACK soft-clause rule (see the module documentation).
pub(crate) fn check_clause(ctx: &Ctx, w: &mut Wave, inst: &Inst, uses: &RegUse) -> Result<(), SimError> {
    let kind = match inst.enc {
        Enc::Global | Enc::Mubuf if !matches!(inst.op, Op::BufferWbl2 | Op::BufferInv) => Some(true),
        Enc::Smem => Some(false),
        _ => None,
    };
    let Some(vmem) = kind else {
        w.clause = None;
        return Ok(());
    };
    if !ctx.opts.xnack {
        return Ok(());
    }
    let store = inst.enc != Enc::Smem && {
        let s = inst.sig();
        s.data > 0
    };
    match &mut w.clause {
        Some((k, (wr, rd))) if *k == vmem && !wr.is_empty() => {
            let overlap = |a: &[(bool, u16, u16)], b: &[(bool, u16, u16)]| {
                a.iter().any(|&(av, af, an)| b.iter().any(|&(bv, bf, bn)| av == bv && af < bf + bn && bf < af + an))
            };
            let (new_rd, new_wr) = uses;
            let mut defs = wr.clone();
            defs.extend(new_wr.iter().copied());
            let mut all_uses = rd.clone();
            all_uses.extend(new_rd.iter().filter(|u| u.0 || u.1 != EXEC as u16).copied());
            if store || overlap(&defs, &all_uses) {
                let why = if store { "a store follows a load" } else { "one writes a register another uses" };
                return Err(ctx.err(
                    inst,
                    format!("memory clause with {why}: XNACK replay can re-execute it (needs 1 wait state between)"),
                ));
            }
            wr.extend(new_wr.iter().copied());
            rd.extend(new_rd.iter().copied());
        }
        Some((k, (wr, rd))) if *k == vmem => {
            wr.extend(uses.1.iter().copied());
            rd.extend(uses.0.iter().copied());
        }
        _ => w.clause = Some((vmem, (uses.1.clone(), uses.0.clone()))),
    }
    Ok(())
}

pub(crate) fn check_pending(ctx: &Ctx, w: &mut Wave, inst: &Inst, uses: &RegUse) -> Result<(), SimError> {
    let (rd, wr) = uses;
    for (kind, list) in [("read", &rd), ("overwritten", &wr)] {
        for &(is_v, first, n) in list.iter() {
            for r in first..first + n {
                let slot = if is_v { w.vpend.get(r as usize).copied().flatten() } else { w.spend[r as usize] };
                if let Some(p) = slot {
                    let c = cidx(p.counter);
                    let covered = p.seq <= w.retired[c];
                    if covered {
                        if is_v {
                            w.vpend[r as usize] = None;
                        } else {
                            w.spend[r as usize] = None;
                        }
                        w.npending -= 1;
                    } else {
                        return Err(ctx.err(
                            inst,
                            format!(
                                "{}{r} {kind} before the s_waitcnt covering the {:?} load at +0x{:x} that writes it",
                                if is_v { "v" } else { "s" },
                                p.counter,
                                p.offset
                            ),
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

pub(crate) fn mark_pending(w: &mut Wave, is_v: bool, first: usize, n: usize, counter: Counter, offset: u32) {
    let seq = w.issued[cidx(counter)];
    for r in first..first + n {
        let slot = if is_v { &mut w.vpend[r] } else { &mut w.spend[r] };
        if slot.is_none() {
            w.npending += 1;
        }
        *slot = Some(Pending { counter, seq, offset });
    }
}

/// `s_waitcnt`: retires what the counters guarantee (see the module documentation).
pub(crate) fn waitcnt(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) {
    let imm = inst.imm as u32 & 0xffff;
    let vm = ((imm & 0xf) | ((imm >> 14) & 3) << 4) as u64;
    let lgkm = ((imm >> 8) & 0xf) as u64;
    w.retired[0] = w.retired[0].max(w.issued[0].saturating_sub(vm));
    let lds_out = w.issued[1] - w.retired[1];
    let smem_out = w.issued[2] - w.retired[2];
    if lgkm == 0 {
        w.retired[1] = w.issued[1];
        w.retired[2] = w.issued[2];
    } else {
        let done = (lds_out + smem_out).saturating_sub(lgkm);
        w.retired[1] += done.saturating_sub(smem_out).min(lds_out);
    }
    // Releases (buffer_wbl2) complete when vmcnt covers them.
    let retired = w.retired[0];
    ctx.coherence.note_retired(ctx.wg_linear, w.id, retired);
    let mut i = 0;
    while i < w.wbl2_pending.len() {
        let (seq, idx) = w.wbl2_pending[i];
        if seq <= retired {
            ctx.coherence.release_done(ctx.wg_linear, idx);
            w.wbl2_pending.swap_remove(i);
        } else {
            i += 1;
        }
    }
}
