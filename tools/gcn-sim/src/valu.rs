//! Vector ALU semantics: VOP1 / VOP2 / VOPC / VOP3 / VOP3P with their source modifiers, DPP
//! lane routing and SDWA selects, per lane under EXEC. Operands are fetched by type from the
//! op's signature ([`crate::decode::Sig`]): inline constants become the type's value (integer
//! constants sign-extend; float constants are f32, f64 or f16 patterns), `|x|` / `-x` apply to
//! float operands only, and input / output denormals are flushed as the MODE register says.

use crate::decode::{flag, Dpp, Enc, Ext, Inst, Op, Sdwa, Ty};
use crate::exec::{Ctx, Wave, EXEC, VCC};
use crate::fpmath::{self as fp, Denorm};
use crate::SimError;

#[inline]
fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

#[inline]
fn d(x: u64) -> f64 {
    f64::from_bits(x)
}

/// The float constant of an inline-constant code as f32 bits.
fn fconst32(code: u16) -> Option<u32> {
    Some(match code {
        240 => 0.5f32.to_bits(),
        241 => (-0.5f32).to_bits(),
        242 => 1.0f32.to_bits(),
        243 => (-1.0f32).to_bits(),
        244 => 2.0f32.to_bits(),
        245 => (-2.0f32).to_bits(),
        246 => 4.0f32.to_bits(),
        247 => (-4.0f32).to_bits(),
        248 => 0x3e22_f983, // 1 / (2 pi)
        _ => return None,
    })
}

fn fconst64(code: u16) -> Option<u64> {
    Some(match code {
        240 => 0.5f64.to_bits(),
        241 => (-0.5f64).to_bits(),
        242 => 1.0f64.to_bits(),
        243 => (-1.0f64).to_bits(),
        244 => 2.0f64.to_bits(),
        245 => (-2.0f64).to_bits(),
        246 => 4.0f64.to_bits(),
        247 => (-4.0f64).to_bits(),
        248 => 0x3fc4_5f30_6dc9_c882, // 1 / (2 pi)
        _ => return None,
    })
}

fn fconst16(code: u16) -> Option<u32> {
    Some(match code {
        240 => 0x3800,
        241 => 0xb800,
        242 => 0x3c00,
        243 => 0xbc00,
        244 => 0x4000,
        245 => 0xc000,
        246 => 0x4400,
        247 => 0xc400,
        248 => 0x3118,
        _ => return None,
    })
}

/// A scalar-side operand (SGPR, constant, literal) as 32 bits.
pub(crate) fn scalar32(w: &Wave, inst: &Inst, code: u16) -> u32 {
    match code {
        0..=127 => w.s[code as usize],
        128..=192 => (code - 128) as u32,
        193..=208 => (-((code - 192) as i32)) as u32,
        240..=248 => fconst32(code).unwrap_or(0),
        251 => (w.s[VCC] | w.s[VCC + 1] == 0) as u32,
        252 => (w.s[EXEC] | w.s[EXEC + 1] == 0) as u32,
        253 => w.scc as u32,
        255 => inst.literal,
        _ => 0,
    }
}

/// A scalar-side operand as 64 bits for an operand of type `ty` (SGPR pairs; inline integer
/// constants sign-extend; float constants per type; a literal is zero-extended, or the high
/// half of an f64).
pub(crate) fn scalar64(w: &Wave, inst: &Inst, code: u16, ty: Ty) -> u64 {
    match code {
        0..=126 => w.s[code as usize] as u64 | (w.s[code as usize + 1] as u64) << 32,
        127 => w.s[127] as u64,
        193..=208 => (-((code - 192) as i64)) as u64,
        240..=248 if ty == Ty::F64 => fconst64(code).unwrap_or(0),
        255 if ty == Ty::F64 => (inst.literal as u64) << 32,
        _ => scalar32(w, inst, code) as u64,
    }
}

/// Raw source `i` of lane `lane` (no modifiers), by type.
fn raw(w: &Wave, inst: &Inst, i: usize, lane: usize, ty: Ty) -> u64 {
    let code = inst.src[i];
    let wide = ty.regs() == 2;
    if code >= 256 {
        let r = code as usize - 256;
        let lo = w.v[r][lane] as u64;
        if wide {
            lo | (w.v.get(r + 1).map_or(0, |v| v[lane]) as u64) << 32
        } else {
            lo
        }
    } else if wide {
        scalar64(w, inst, code, ty)
    } else if ty == Ty::F16 || ty == Ty::I16 && (240..=248).contains(&code) {
        fconst16(code).map(|c| c as u64).unwrap_or_else(|| scalar32(w, inst, code) as u64)
    } else {
        scalar32(w, inst, code) as u64
    }
}

/// SDWA source select: the byte / word of `x` as a zero- or sign-extended 32-bit value.
fn sdwa_sel(x: u32, sel: u8, sext: bool) -> u32 {
    let (shift, bits) = match sel {
        0..=3 => (8 * sel as u32, 8),
        4 | 5 => (16 * (sel as u32 - 4), 16),
        _ => return x,
    };
    let v = (x >> shift) & ((1u32 << bits) - 1);
    if sext {
        ((v << (32 - bits)) as i32 >> (32 - bits)) as u32
    } else {
        v
    }
}

/// SDWA destination: field `sel` of `r` written into `old` as dst_unused says.
fn sdwa_dst(r: u32, old: u32, s: &Sdwa) -> u32 {
    let (shift, bits) = match s.dst_sel {
        0..=3 => (8 * s.dst_sel as u32, 8),
        4 | 5 => (16 * (s.dst_sel as u32 - 4), 16),
        _ => return r,
    };
    let mask = ((1u64 << bits) - 1) as u32;
    let field = (r & mask) << shift;
    let fmask = mask << shift;
    match s.dst_unused {
        2 => (old & !fmask) | field,
        1 => {
            // Sign-extend the field into the bits above it; the bits below are zero.
            let top = shift + bits;
            let neg = (r >> (bits - 1)) & 1 != 0;
            if neg && top < 32 {
                field | (u32::MAX << top)
            } else {
                field
            }
        }
        _ => field,
    }
}

/// Source lane of DPP control `c` for `lane`, or None when it is out of range.
pub(crate) fn dpp_source(c: u16, lane: usize) -> Option<usize> {
    let row = lane & !15;
    let l = lane & 15;
    let r = match c {
        0x000..=0x0ff => (lane & !3) | ((c >> (2 * (lane & 3))) & 3) as usize,
        0x101..=0x10f => {
            let s = l + (c & 0xf) as usize;
            if s > 15 {
                return None;
            }
            row | s
        }
        0x111..=0x11f => row | l.checked_sub((c & 0xf) as usize)?,
        0x121..=0x12f => row | ((l + 16 - (c & 0xf) as usize) & 15),
        0x130 => {
            if lane == 63 {
                return None;
            }
            lane + 1
        }
        0x134 => (lane + 1) & 63,
        0x138 => lane.checked_sub(1)?,
        0x13c => (lane + 63) & 63,
        0x140 => row | (15 - l),
        0x141 => row | (l & 8) | (7 - (l & 7)),
        0x142 => {
            if row == 0 {
                return None;
            }
            row - 1
        }
        0x143 => {
            if lane < 32 {
                return None;
            }
            31
        }
        _ => return None,
    };
    Some(r)
}

fn denorm32(w: &Wave) -> Denorm {
    Denorm((w.mode >> 4) & 3)
}

fn denorm64(w: &Wave) -> Denorm {
    Denorm((w.mode >> 6) & 3)
}

/// Where a source operand comes from: a VGPR (pair), or one value for every lane.
#[derive(Clone, Copy)]
enum Plan {
    V(usize, bool),
    C(u64),
}

/// Runs `f` over the active lanes with 32-bit sources from `plan` (a tight loop per op).
#[inline(always)]
fn lanes32(w: &mut Wave, plan: &[Plan; 3], exec: u64, vd: usize, f: impl Fn(u32, u32, u32) -> u32) {
    let src = |p: Plan, w: &Wave| -> Result<[u32; 64], u32> {
        match p {
            Plan::V(r, _) => Ok(w.v[r]),
            Plan::C(c) => Err(c as u32),
        }
    };
    let (a, b, c) = (src(plan[0], w), src(plan[1], w), src(plan[2], w));
    let get = |x: &Result<[u32; 64], u32>, lane: usize| match x {
        Ok(v) => v[lane],
        Err(c) => *c,
    };
    for (lane, d) in w.v[vd].iter_mut().enumerate() {
        if exec >> lane & 1 != 0 {
            *d = f(get(&a, lane), get(&b, lane), get(&c, lane));
        }
    }
}

/// The common plain VOP1 / VOP2 / VOP3 ops (no DPP / SDWA / modifiers / clamp / omod, 32-bit
/// operands, no denormal flushing in effect) as tight loops; returns false for anything else.
fn fast_path(w: &mut Wave, inst: &Inst, plan: &[Plan; 3], exec: u64, dn32: Denorm) -> bool {
    use Op::*;
    if inst.ext != Ext::None
        || inst.abs | inst.neg != 0
        || inst.clamp
        || inst.omod != 0
        || inst.enc == Enc::Vopc
        || inst.dst < 256
        || dn32.0 != 3
    {
        return false;
    }
    let s = inst.sig();
    if s.has(flag::CO) || s.has(flag::CI) || s.dst.regs() != 1 || (0..s.nsrc).any(|i| s.src[i].regs() != 1) {
        return false;
    }
    let vd = inst.dst as usize - 256;
    let fl = |x: u32| f32::from_bits(x);
    match inst.op {
        VMovB32 => lanes32(w, plan, exec, vd, |a, _, _| a),
        VAddU32 => lanes32(w, plan, exec, vd, |a, b, _| a.wrapping_add(b)),
        VSubU32 => lanes32(w, plan, exec, vd, |a, b, _| a.wrapping_sub(b)),
        VSubrevU32 => lanes32(w, plan, exec, vd, |a, b, _| b.wrapping_sub(a)),
        VMulLoU32 => lanes32(w, plan, exec, vd, |a, b, _| a.wrapping_mul(b)),
        VMulHiU32 => lanes32(w, plan, exec, vd, |a, b, _| ((a as u64 * b as u64) >> 32) as u32),
        VMulU32U24 => lanes32(w, plan, exec, vd, |a, b, _| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff)),
        VAndB32 => lanes32(w, plan, exec, vd, |a, b, _| a & b),
        VOrB32 => lanes32(w, plan, exec, vd, |a, b, _| a | b),
        VXorB32 => lanes32(w, plan, exec, vd, |a, b, _| a ^ b),
        VLshlrevB32 => lanes32(w, plan, exec, vd, |a, b, _| b << (a & 31)),
        VLshrrevB32 => lanes32(w, plan, exec, vd, |a, b, _| b >> (a & 31)),
        VAshrrevI32 => lanes32(w, plan, exec, vd, |a, b, _| ((b as i32) >> (a & 31)) as u32),
        VMinU32 => lanes32(w, plan, exec, vd, |a, b, _| a.min(b)),
        VMaxU32 => lanes32(w, plan, exec, vd, |a, b, _| a.max(b)),
        VAdd3U32 => lanes32(w, plan, exec, vd, |a, b, c| a.wrapping_add(b).wrapping_add(c)),
        VLshlAddU32 => lanes32(w, plan, exec, vd, |a, b, c| (a << (b & 31)).wrapping_add(c)),
        VAddLshlU32 => lanes32(w, plan, exec, vd, |a, b, c| a.wrapping_add(b) << (c & 31)),
        VLshlOrB32 => lanes32(w, plan, exec, vd, |a, b, c| (a << (b & 31)) | c),
        VAndOrB32 => lanes32(w, plan, exec, vd, |a, b, c| (a & b) | c),
        VOr3B32 => lanes32(w, plan, exec, vd, |a, b, c| a | b | c),
        VMadU32U24 => lanes32(w, plan, exec, vd, |a, b, c| (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c)),
        VBfeU32 => lanes32(w, plan, exec, vd, |a, b, c| {
            let (off, width) = (b & 31, c & 31);
            if width == 0 {
                0
            } else {
                (a >> off) & ((1u64 << width) - 1) as u32
            }
        }),
        VAddF32 => lanes32(w, plan, exec, vd, |a, b, _| (fl(a) + fl(b)).to_bits()),
        VSubF32 => lanes32(w, plan, exec, vd, |a, b, _| (fl(a) - fl(b)).to_bits()),
        VSubrevF32 => lanes32(w, plan, exec, vd, |a, b, _| (fl(b) - fl(a)).to_bits()),
        VMulF32 => lanes32(w, plan, exec, vd, |a, b, _| (fl(a) * fl(b)).to_bits()),
        VFmacF32 | VFmaF32 | VFmamkF32 | VFmaakF32 => {
            lanes32(w, plan, exec, vd, |a, b, c| fl(a).mul_add(fl(b), fl(c)).to_bits())
        }
        VMaxF32 => lanes32(w, plan, exec, vd, |a, b, _| fp::max32(fl(a), fl(b)).to_bits()),
        VMinF32 => lanes32(w, plan, exec, vd, |a, b, _| fp::min32(fl(a), fl(b)).to_bits()),
        _ => return false,
    }
    true
}

/// Operands of one lane, modifiers applied.
struct Lane {
    a: [u64; 3],
}

/// Applies abs / neg to a float operand of type `ty`.
fn modify(x: u64, ty: Ty, abs: bool, neg: bool) -> u64 {
    let sign = match ty {
        Ty::F32 => 1u64 << 31,
        Ty::F64 => 1u64 << 63,
        Ty::F16 => 1u64 << 15,
        _ => return x,
    };
    let mut x = x;
    if abs {
        x &= !sign;
    }
    if neg {
        x ^= sign;
    }
    x
}

fn is_int_clamp_op(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        VAddU32
            | VSubU32
            | VSubrevU32
            | VAddCoU32
            | VSubCoU32
            | VSubrevCoU32
            | VAddcCoU32
            | VSubbCoU32
            | VSubbrevCoU32
            | VAddU16
            | VSubU16
            | VSubrevU16
            | VAddI32
            | VSubI32
    )
}

/// Executes one VALU instruction (VOP1 / VOP2 / VOPC / VOP3 / VOP3P, DPP, SDWA).
pub(crate) fn exec_valu(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    let s = inst.sig();
    let exec = w.exec();
    if inst.omod != 0 && !s.dst.is_float() {
        return Err(ctx.err(inst, "output modifier on an integer op"));
    }
    if inst.clamp && !s.dst.is_float() && !is_int_clamp_op(inst.op) && inst.enc != Enc::Vopc {
        return Err(ctx.err(inst, "clamp on this integer op is not modelled"));
    }
    let float_srcs = (0..s.nsrc).any(|i| s.src[i].is_float());
    if (inst.abs != 0 || inst.neg != 0) && !float_srcs && inst.enc != Enc::Vop3p {
        return Err(ctx.err(inst, "neg/abs modifiers on an integer op"));
    }
    if inst.op_sel != 0 && inst.enc != Enc::Vop3p {
        return Err(ctx.err(inst, "VOP3 op_sel is not modelled"));
    }
    if inst.enc == Enc::Vop3p {
        return exec_vop3p(ctx, w, inst);
    }
    match inst.op {
        VNop => return Ok(()),
        VReadfirstlaneB32 => {
            let lane = if exec == 0 { 0 } else { exec.trailing_zeros() as usize };
            let v = raw(w, inst, 0, lane, Ty::I32) as u32;
            return ctx.swrite(w, inst, inst.dst, v);
        }
        VReadlaneB32 => {
            let lane = (scalar32(w, inst, inst.src[1]) & 63) as usize;
            let v = raw(w, inst, 0, lane, Ty::I32) as u32;
            return ctx.swrite(w, inst, inst.dst, v);
        }
        VWritelaneB32 => {
            let lane = (scalar32(w, inst, inst.src[1]) & 63) as usize;
            let v = scalar32(w, inst, inst.src[0]);
            w.v[inst.dst as usize - 256][lane] = v;
            return Ok(());
        }
        _ => {}
    }
    let dn32 = denorm32(w);
    let dn64 = denorm64(w);
    // Moves and selects pass bits through; v_div_fmas does not flush its inputs (ISA).
    let flush_in = !s.has(flag::CLS) && !matches!(inst.op, VDivFmasF32 | VDivFmasF64 | VCndmaskB32);
    // The lane-mask source (carry in, v_cndmask select, v_div_fmas VCC).
    let mask_in = if s.has(flag::CI) {
        scalar64(w, inst, inst.src[2], Ty::M)
    } else if s.has(flag::VCCIN) {
        w.s[VCC] as u64 | (w.s[VCC + 1] as u64) << 32
    } else {
        0
    };
    let (dpp, sdwa) = match inst.ext {
        Ext::Dpp(x) => (Some(x), None),
        Ext::Sdwa(x) => (None, Some(x)),
        Ext::None => (None, None),
    };
    let nsrc = if s.has(flag::CI) { 2 } else { s.nsrc };
    // Per source: where it comes from (a VGPR, or one value for every lane), and what applies.
    let plan: [Plan; 3] = std::array::from_fn(|i| {
        let code = inst.src[i];
        if i >= nsrc {
            Plan::C(0)
        } else if code >= 256 {
            Plan::V(code as usize - 256, s.src[i].regs() == 2)
        } else {
            Plan::C(raw(w, inst, i, 0, s.src[i]))
        }
    });
    if fast_path(w, inst, &plan, exec, dn32) {
        return Ok(());
    }
    let mods: [bool; 3] = std::array::from_fn(|i| (inst.abs | inst.neg) >> i & 1 != 0);
    let flush: [bool; 3] = std::array::from_fn(|i| flush_in && matches!(s.src[i], Ty::F32 | Ty::F64));
    let mut mask_out = 0u64;
    let mut results = [0u64; 64];
    let mut written = 0u64;
    for (lane, result) in results.iter_mut().enumerate() {
        if exec >> lane & 1 == 0 {
            continue;
        }
        // DPP: source 0 comes from another lane; a disabled row / bank or an invalid source
        // without bound_ctrl leaves the destination lane unwritten.
        let mut src0_lane = lane;
        let mut zero0 = false;
        if let Some(Dpp { ctrl, row_mask, bank_mask, bound_ctrl }) = dpp {
            if row_mask >> (lane / 16) & 1 == 0 || bank_mask >> ((lane & 15) / 4) & 1 == 0 {
                continue;
            }
            match dpp_source(ctrl, lane) {
                Some(sl) if exec >> sl & 1 != 0 => src0_lane = sl,
                _ if bound_ctrl => zero0 = true,
                _ => continue,
            }
        }
        let mut l = Lane { a: [0; 3] };
        for i in 0..nsrc {
            let ty = s.src[i];
            let mut x = match plan[i] {
                Plan::V(r, wide) => {
                    let sl = if i == 0 { src0_lane } else { lane };
                    let lo = w.v[r][sl] as u64;
                    if wide {
                        lo | (w.v[r + 1][sl] as u64) << 32
                    } else {
                        lo
                    }
                }
                Plan::C(c) => c,
            };
            if i == 0 && zero0 {
                x = 0;
            }
            if let Some(sd) = sdwa {
                if i < 2 {
                    x = sdwa_sel(x as u32, sd.sel[i], sd.sext[i]) as u64;
                }
            }
            if mods[i] {
                x = modify(x, ty, inst.abs >> i & 1 != 0, inst.neg >> i & 1 != 0);
            }
            if flush[i] {
                x = match ty {
                    Ty::F32 => dn32.in32(f(x as u32)).to_bits() as u64,
                    _ => dn64.in64(d(x)).to_bits(),
                };
            }
            l.a[i] = x;
        }
        let m = mask_in >> lane & 1 != 0;
        let (r, c) = alu(ctx, inst, &l, lane, m)?;
        if inst.enc == Enc::Vopc || s.has(flag::CO) {
            mask_out |= (c as u64) << lane;
        }
        *result = r;
        written |= 1 << lane;
    }
    // Write back (after every lane read its sources: DPP reads other lanes' registers).
    if inst.enc == Enc::Vopc {
        ctx.swrite64(w, inst, inst.sdst, mask_out)?;
        if s.has(flag::CMPX) {
            w.set_exec(mask_out);
        }
        return Ok(());
    }
    if s.has(flag::CO) {
        ctx.swrite64(w, inst, inst.sdst, mask_out)?;
    }
    let vd = inst.dst as usize - 256;
    for lane in (0..64).filter(|l| written >> l & 1 != 0) {
        let r = results[lane];
        match s.dst {
            Ty::F32 => {
                let mut x = f(r as u32);
                x = apply_omod32(x, inst.omod);
                if inst.clamp {
                    x = clamp32(x, w.mode);
                }
                x = dn32.out32(x);
                let bits = x.to_bits();
                w.v[vd][lane] = match sdwa {
                    Some(sd) => sdwa_dst(bits, w.v[vd][lane], &sd),
                    None => bits,
                };
            }
            Ty::F64 | Ty::I64 => {
                let mut r = r;
                if s.dst == Ty::F64 {
                    let mut x = d(r);
                    if inst.omod != 0 {
                        x *= [1.0, 2.0, 4.0, 0.5][inst.omod as usize];
                    }
                    if inst.clamp {
                        x = if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) };
                    }
                    r = dn64.out64(x).to_bits();
                }
                w.v[vd][lane] = r as u32;
                w.v[vd + 1][lane] = (r >> 32) as u32;
            }
            Ty::I16 | Ty::F16 => {
                let v = (r & 0xffff) as u32;
                w.v[vd][lane] = match sdwa {
                    Some(sd) => sdwa_dst(v, w.v[vd][lane], &sd),
                    None => v,
                };
            }
            _ => {
                let v = r as u32;
                w.v[vd][lane] = match sdwa {
                    Some(sd) => sdwa_dst(v, w.v[vd][lane], &sd),
                    None => v,
                };
            }
        }
    }
    Ok(())
}

fn apply_omod32(x: f32, omod: u8) -> f32 {
    match omod {
        1 => x * 2.0,
        2 => x * 4.0,
        3 => x * 0.5,
        _ => x,
    }
}

fn clamp32(x: f32, mode: u32) -> f32 {
    if x.is_nan() {
        // DX10_CLAMP (MODE bit 8): NaN clamps to 0.
        return if mode & (1 << 8) != 0 { 0.0 } else { x };
    }
    x.clamp(0.0, 1.0)
}

fn sat_u32(x: i64) -> u32 {
    x.clamp(0, u32::MAX as i64) as u32
}

fn cmp_f(pred: &str, a: f64, b: f64) -> bool {
    use std::cmp::Ordering::{Equal, Greater, Less};
    let o = a.partial_cmp(&b); // None: unordered (a NaN)
    match pred {
        "f" => false,
        "lt" => o == Some(Less),
        "eq" => o == Some(Equal),
        "le" => matches!(o, Some(Less | Equal)),
        "gt" => o == Some(Greater),
        "lg" => matches!(o, Some(Less | Greater)),
        "ge" => matches!(o, Some(Greater | Equal)),
        "o" => o.is_some(),
        "u" => o.is_none(),
        "nge" => !matches!(o, Some(Greater | Equal)),
        "nlg" => !matches!(o, Some(Less | Greater)),
        "ngt" => o != Some(Greater),
        "nle" => !matches!(o, Some(Less | Equal)),
        "neq" => o != Some(Equal),
        "nlt" => o != Some(Less),
        _ => true, // tru
    }
}

fn cmp_i<T: PartialOrd>(pred: &str, a: T, b: T) -> bool {
    match pred {
        "f" => false,
        "lt" => a < b,
        "eq" => a == b,
        "le" => a <= b,
        "gt" => a > b,
        "ne" => a != b,
        "ge" => a >= b,
        _ => true, // t
    }
}

/// The compare predicate and type of a VOPC mnemonic (`v_cmp[x]_<pred>_<type>`), parsed once.
fn cmp_parts(op: Op) -> (&'static str, &'static str) {
    static PARTS: std::sync::OnceLock<Vec<(&'static str, &'static str)>> = std::sync::OnceLock::new();
    PARTS.get_or_init(|| {
        crate::decode::OPS
            .iter()
            .map(|(_, _, _, m, _)| {
                let rest = m.strip_prefix("v_cmpx_").or_else(|| m.strip_prefix("v_cmp_")).unwrap_or(m);
                rest.rsplit_once('_').unwrap_or((rest, ""))
            })
            .collect()
    })[op as usize]
}

/// One lane of one op: returns (result bits, carry / compare bit).
fn alu(ctx: &Ctx, inst: &Inst, l: &Lane, lane: usize, m: bool) -> Result<(u64, bool), SimError> {
    use Op::*;
    let [a, b, c] = l.a;
    let (a32, b32, c32) = (a as u32, b as u32, c as u32);
    let (fa, fb, fc) = (f(a32), f(b32), f(c32));
    let (da, db, dc) = (d(a), d(b), d(c));
    let trans = ctx.opts.trans;
    let clamp = inst.clamp;
    let r32 = |x: u32| Ok((x as u64, false));
    let rf = |x: f32| Ok((x.to_bits() as u64, false));
    let rd = |x: f64| Ok((x.to_bits(), false));
    if inst.enc == Enc::Vopc {
        let (pred, ty) = cmp_parts(inst.op);
        let r = match ty {
            "f32" if inst.sig().has(flag::CLS) => b32 >> fp::class_f32(fa) & 1 != 0,
            "f64" if inst.sig().has(flag::CLS) => b32 >> fp::class_of_f64(da) & 1 != 0,
            "f32" => cmp_f(pred, fa as f64, fb as f64),
            "f64" => cmp_f(pred, da, db),
            "i32" => cmp_i(pred, a32 as i32, b32 as i32),
            "u32" => cmp_i(pred, a32, b32),
            "i64" => cmp_i(pred, a as i64, b as i64),
            "u64" => cmp_i(pred, a, b),
            "i16" => cmp_i(pred, a32 as i16, b32 as i16),
            "u16" => cmp_i(pred, a32 as u16, b32 as u16),
            _ => return Err(ctx.err(inst, "unknown compare")),
        };
        return Ok((0, r));
    }
    match inst.op {
        VMovB32 => r32(a32),
        VMovB64 => Ok((a, false)),
        VCndmaskB32 => r32(if m { b32 } else { a32 }),
        VAddF32 => rf(fa + fb),
        VSubF32 => rf(fa - fb),
        VSubrevF32 => rf(fb - fa),
        VMulF32 => rf(fa * fb),
        VMulLegacyF32 => rf(if fa == 0.0 || fb == 0.0 { 0.0 } else { fa * fb }),
        VMulI32I24 => r32(((a32 << 8) as i32 >> 8).wrapping_mul((b32 << 8) as i32 >> 8) as u32),
        VMulHiI32I24 => r32(((((a32 << 8) as i32 >> 8) as i64 * ((b32 << 8) as i32 >> 8) as i64) >> 32) as u32),
        VMulU32U24 => r32((a32 & 0xff_ffff).wrapping_mul(b32 & 0xff_ffff)),
        VMulHiU32U24 => r32((((a32 & 0xff_ffff) as u64 * (b32 & 0xff_ffff) as u64) >> 32) as u32),
        VMinF32 => rf(fp::min32(fa, fb)),
        VMaxF32 => rf(fp::max32(fa, fb)),
        VMinI32 => r32((a32 as i32).min(b32 as i32) as u32),
        VMaxI32 => r32((a32 as i32).max(b32 as i32) as u32),
        VMinU32 => r32(a32.min(b32)),
        VMaxU32 => r32(a32.max(b32)),
        VLshrrevB32 => r32(b32 >> (a32 & 31)),
        VAshrrevI32 => r32(((b32 as i32) >> (a32 & 31)) as u32),
        VLshlrevB32 => r32(b32 << (a32 & 31)),
        VAndB32 => r32(a32 & b32),
        VOrB32 => r32(a32 | b32),
        VXorB32 => r32(a32 ^ b32),
        VXnorB32 => r32(!(a32 ^ b32)),
        VAddCoU32 => {
            let r = a32 as u64 + b32 as u64;
            Ok((if clamp { r.min(u32::MAX as u64) } else { r & 0xffff_ffff }, r >> 32 != 0))
        }
        VSubCoU32 => {
            Ok((if clamp { sat_u32(a32 as i64 - b32 as i64) } else { a32.wrapping_sub(b32) } as u64, b32 > a32))
        }
        VSubrevCoU32 => {
            Ok((if clamp { sat_u32(b32 as i64 - a32 as i64) } else { b32.wrapping_sub(a32) } as u64, a32 > b32))
        }
        VAddcCoU32 => {
            let r = a32 as u64 + b32 as u64 + m as u64;
            Ok((if clamp { r.min(u32::MAX as u64) } else { r & 0xffff_ffff }, r >> 32 != 0))
        }
        VSubbCoU32 => {
            let r = a32 as i64 - b32 as i64 - m as i64;
            Ok((if clamp { sat_u32(r) } else { r as u32 } as u64, r < 0))
        }
        VSubbrevCoU32 => {
            let r = b32 as i64 - a32 as i64 - m as i64;
            Ok((if clamp { sat_u32(r) } else { r as u32 } as u64, r < 0))
        }
        VAddU16 => {
            r32(if clamp { (a32 as u16).saturating_add(b32 as u16) } else { (a32 as u16).wrapping_add(b32 as u16) }
                as u32)
        }
        VSubU16 => {
            r32(if clamp { (a32 as u16).saturating_sub(b32 as u16) } else { (a32 as u16).wrapping_sub(b32 as u16) }
                as u32)
        }
        VSubrevU16 => {
            r32(if clamp { (b32 as u16).saturating_sub(a32 as u16) } else { (b32 as u16).wrapping_sub(a32 as u16) }
                as u32)
        }
        VMulLoU16 => r32((a32 as u16).wrapping_mul(b32 as u16) as u32),
        VLshlrevB16 => r32(((b32 as u16) << (a32 & 15)) as u32),
        VLshrrevB16 => r32(((b32 as u16) >> (a32 & 15)) as u32),
        VAshrrevI16 => r32((((b32 as i16) >> (a32 & 15)) as u16) as u32),
        VMaxU16 => r32((a32 as u16).max(b32 as u16) as u32),
        VMaxI16 => r32((a32 as i16).max(b32 as i16) as u16 as u32),
        VMinU16 => r32((a32 as u16).min(b32 as u16) as u32),
        VMinI16 => r32((a32 as i16).min(b32 as i16) as u16 as u32),
        VAddU32 => r32(if clamp { a32.saturating_add(b32) } else { a32.wrapping_add(b32) }),
        VSubU32 => r32(if clamp { a32.saturating_sub(b32) } else { a32.wrapping_sub(b32) }),
        VSubrevU32 => r32(if clamp { b32.saturating_sub(a32) } else { b32.wrapping_sub(a32) }),
        VAddI32 => {
            r32(if clamp { (a32 as i32).saturating_add(b32 as i32) } else { (a32 as i32).wrapping_add(b32 as i32) }
                as u32)
        }
        VSubI32 => {
            r32(if clamp { (a32 as i32).saturating_sub(b32 as i32) } else { (a32 as i32).wrapping_sub(b32 as i32) }
                as u32)
        }
        VFmacF32 | VFmaF32 | VFmamkF32 | VFmaakF32 => rf(fa.mul_add(fb, fc)),
        VFmacF64 | VFmaF64 => rd(da.mul_add(db, dc)),
        VCvtI32F64 => r32(fp::f64_to_i32(da) as u32),
        VCvtF64I32 => rd(a32 as i32 as f64),
        VCvtF32I32 => rf(a32 as i32 as f32),
        VCvtF32U32 => rf(a32 as f32),
        VCvtU32F32 => r32(fp::f32_to_u32(fa)),
        VCvtI32F32 => r32(fp::f32_to_i32(fa) as u32),
        VCvtF16F32 => r32(half::f16::from_f32(fa).to_bits() as u32),
        VCvtF32F16 => rf(half::f16::from_bits(a32 as u16).to_f32()),
        VCvtRpiI32F32 => r32(fp::f32_to_i32((fa + 0.5).floor()) as u32),
        VCvtFlrI32F32 => r32(fp::f32_to_i32(fa.floor()) as u32),
        VCvtF32F64 => rf(da as f32),
        VCvtF64F32 => rd(fa as f64),
        VCvtF32Ubyte0 => rf((a32 & 0xff) as f32),
        VCvtF32Ubyte1 => rf(((a32 >> 8) & 0xff) as f32),
        VCvtF32Ubyte2 => rf(((a32 >> 16) & 0xff) as f32),
        VCvtF32Ubyte3 => rf((a32 >> 24) as f32),
        VCvtU32F64 => r32(fp::f64_to_u32(da)),
        VCvtF64U32 => rd(a32 as f64),
        VTruncF64 => rd(da.trunc()),
        VCeilF64 => rd(da.ceil()),
        VRndneF64 => rd(da.round_ties_even()),
        VFloorF64 => rd(da.floor()),
        VFractF32 => rf(if fa.is_infinite() { f32::NAN } else { (fa - fa.floor()).min(f32::from_bits(0x3f7f_ffff)) }),
        VFractF64 => {
            rd(if da.is_infinite() { f64::NAN } else { (da - da.floor()).min(f64::from_bits(0x3fef_ffff_ffff_ffff)) })
        }
        VTruncF32 => rf(fa.trunc()),
        VCeilF32 => rf(fa.ceil()),
        VRndneF32 => rf(fa.round_ties_even()),
        VFloorF32 => rf(fa.floor()),
        VExpF32 | VLogF32 | VRcpF32 | VRcpIflagF32 | VRsqF32 | VSqrtF32 | VSinF32 | VCosF32 => {
            rf(fp::trans_f32(inst.op, fa, trans))
        }
        VRcpF64 | VRsqF64 | VSqrtF64 => rd(fp::trans_f64(inst.op, da, trans)),
        VNotB32 => r32(!a32),
        VBfrevB32 => r32(a32.reverse_bits()),
        VFfbhU32 => r32(if a32 == 0 { u32::MAX } else { a32.leading_zeros() }),
        VFfblB32 => r32(if a32 == 0 { u32::MAX } else { a32.trailing_zeros() }),
        VFfbhI32 => {
            let x = a32 as i32;
            r32(if x == 0 || x == -1 {
                u32::MAX
            } else if x < 0 {
                (!a32).leading_zeros()
            } else {
                a32.leading_zeros()
            })
        }
        VFrexpExpI32F64 => r32(fp::frexp_f64(da).1 as u32),
        VFrexpMantF64 => rd(fp::frexp_f64(da).0),
        VFrexpExpI32F32 => r32(fp::frexp_f32(fa).1 as u32),
        VFrexpMantF32 => rf(fp::frexp_f32(fa).0),
        VMadI32I24 => {
            r32(((a32 << 8) as i32 >> 8).wrapping_mul((b32 << 8) as i32 >> 8).wrapping_add(c32 as i32) as u32)
        }
        VMadU32U24 => r32((a32 & 0xff_ffff).wrapping_mul(b32 & 0xff_ffff).wrapping_add(c32)),
        VBfeU32 => {
            let (off, width) = (b32 & 31, c32 & 31);
            r32(if width == 0 { 0 } else { (a32 >> off) & ((1u64 << width) - 1) as u32 })
        }
        VBfeI32 => {
            let (off, width) = (b32 & 31, c32 & 31);
            r32(if width == 0 {
                0
            } else if off + width < 32 {
                (((a32 << (32 - off - width)) as i32) >> (32 - width)) as u32
            } else {
                ((a32 as i32) >> off) as u32
            })
        }
        VBfiB32 => r32((a32 & b32) | (!a32 & c32)),
        VAlignbitB32 => r32((((a32 as u64) << 32 | b32 as u64) >> (c32 & 31)) as u32),
        VAlignbyteB32 => r32((((a32 as u64) << 32 | b32 as u64) >> (8 * (c32 & 3))) as u32),
        VMin3F32 => rf(fp::min32(fp::min32(fa, fb), fc)),
        VMin3I32 => r32((a32 as i32).min(b32 as i32).min(c32 as i32) as u32),
        VMin3U32 => r32(a32.min(b32).min(c32)),
        VMax3F32 => rf(fp::max32(fp::max32(fa, fb), fc)),
        VMax3I32 => r32((a32 as i32).max(b32 as i32).max(c32 as i32) as u32),
        VMax3U32 => r32(a32.max(b32).max(c32)),
        VMed3F32 => rf(fp::med3_32(fa, fb, fc)),
        VMed3I32 => {
            let (x, y, z) = (a32 as i32, b32 as i32, c32 as i32);
            r32(x.max(y).min(x.min(y).max(z)) as u32)
        }
        VMed3U32 => r32(a32.max(b32).min(a32.min(b32).max(c32))),
        VDivFixupF32 => {
            let q = fp::div_fixup64(
                fa as f64,
                fb as f64,
                fc as f64,
                (fb.is_sign_negative(), fc.is_sign_negative()),
                -150,
                128,
            );
            let mut q = q as f32;
            if fc.is_nan() {
                q = fp::quiet32(fc);
            } else if fb.is_nan() {
                q = fp::quiet32(fb);
            }
            rf(q)
        }
        VDivFixupF64 => {
            let mut q = fp::div_fixup64(da, db, dc, (db.is_sign_negative(), dc.is_sign_negative()), -1075, 1024);
            if dc.is_nan() {
                q = fp::quiet64(dc);
            } else if db.is_nan() {
                q = fp::quiet64(db);
            }
            rd(q)
        }
        VDivScaleF32 => {
            let (r, vcc) = div_scale32(fa, fb, fc);
            Ok((r.to_bits() as u64, vcc))
        }
        VDivScaleF64 => {
            let (r, vcc) = div_scale64(da, db, dc);
            Ok((r.to_bits(), vcc))
        }
        VDivFmasF32 => rf(if m { div_fmas_scaled32(fa, fb, fc) } else { fa.mul_add(fb, fc) }),
        VDivFmasF64 => {
            let x = da.mul_add(db, dc);
            rd(if m { div_fmas_scale64(x, dc) } else { x })
        }
        VMadU64U32 => {
            let r = a32 as u128 * b32 as u128 + c as u128;
            Ok((r as u64, r >> 64 != 0))
        }
        VMadI64I32 => {
            let r = a32 as i32 as i128 * b32 as i32 as i128 + c as i64 as i128;
            Ok((r as u64, r != (r as i64) as i128))
        }
        VPermB32 => {
            let bytes = ((a32 as u64) << 32) | b32 as u64;
            let mut out = 0u32;
            for k in 0..4 {
                let sel = (c32 >> (8 * k)) & 0xff;
                let byte = match sel {
                    0..=7 => (bytes >> (8 * sel)) & 0xff,
                    8..=11 => {
                        // Sign of byte 2 * (sel - 8) + 1 replicated.
                        let src = (bytes >> (8 * (2 * (sel - 8) + 1) + 7)) & 1;
                        if src != 0 {
                            0xff
                        } else {
                            0
                        }
                    }
                    12 => 0,
                    _ => 0xff,
                } as u32;
                out |= byte << (8 * k);
            }
            r32(out)
        }
        VXadU32 => r32((a32 ^ b32).wrapping_add(c32)),
        VLshlAddU32 => r32((a32 << (b32 & 31)).wrapping_add(c32)),
        VAddLshlU32 => r32(a32.wrapping_add(b32) << (c32 & 31)),
        VAdd3U32 => r32(a32.wrapping_add(b32).wrapping_add(c32)),
        VLshlOrB32 => r32((a32 << (b32 & 31)) | c32),
        VAndOrB32 => r32((a32 & b32) | c32),
        VOr3B32 => r32(a32 | b32 | c32),
        VAddF64 => rd(da + db),
        VMulF64 => rd(da * db),
        VMinF64 => rd(fp::min64(da, db)),
        VMaxF64 => rd(fp::max64(da, db)),
        VLdexpF64 => rd(fp::ldexp64(da, b32 as i32)),
        VMulLoU32 => r32(a32.wrapping_mul(b32)),
        VMulHiU32 => r32(((a32 as u64 * b32 as u64) >> 32) as u32),
        VMulHiI32 => r32(((a32 as i32 as i64 * b32 as i32 as i64) >> 32) as u32),
        VLdexpF32 => rf(fp::ldexp32(fa, b32 as i32)),
        VBcntU32B32 => r32(a32.count_ones().wrapping_add(b32)),
        VMbcntLoU32B32 => r32((a32 & ((1u64 << lane.min(32)) - 1) as u32).count_ones().wrapping_add(b32)),
        VMbcntHiU32B32 => {
            let m = if lane > 32 { ((1u64 << (lane - 32)) - 1) as u32 } else { 0 };
            r32((a32 & m).count_ones().wrapping_add(b32))
        }
        VLshlrevB64 => Ok((b << (a32 & 63), false)),
        VLshrrevB64 => Ok((b >> (a32 & 63), false)),
        VAshrrevI64 => Ok((((b as i64) >> (a32 & 63)) as u64, false)),
        VBfmB32 => r32((((1u64 << (a32 & 31)) - 1) as u32) << (b32 & 31)),
        VCvtPkrtzF16F32 => {
            let rtz = |x: f32| {
                let h = half::f16::from_f32(x);
                // Round toward zero: step back when rounding to nearest went away from zero.
                if h.to_f32().abs() > x.abs() && x.is_finite() {
                    half::f16::from_bits(h.to_bits() - 1)
                } else {
                    h
                }
            };
            r32(rtz(fa).to_bits() as u32 | (rtz(fb).to_bits() as u32) << 16)
        }
        VCvtPkU16U32 => r32(a32.min(0xffff) | b32.min(0xffff) << 16),
        VCvtPkI16I32 => {
            let c = |x: u32| (x as i32).clamp(-32768, 32767) as u16 as u32;
            r32(c(a32) | c(b32) << 16)
        }
        VLshlAddU64 => Ok(((a << (b32 & 7)).wrapping_add(c), false)),
        VPackB32F16 => r32((a32 & 0xffff) | (b32 & 0xffff) << 16),
        _ => Err(ctx.err(inst, "op not implemented in the VALU")),
    }
}

/// `v_div_scale_f32` (ISA pseudo-code; exponent() is the unbiased exponent; see below for the
/// one branch read differently).
fn div_scale32(s0: f32, s1: f32, s2: f32) -> (f32, bool) {
    let den = |x: f64| x != 0.0 && x.abs() < f32::MIN_POSITIVE as f64;
    if s2 == 0.0 || s1 == 0.0 {
        return (f32::NAN, false);
    }
    let (e1, e2) = (fp::exp_f32(s1), fp::exp_f32(s2));
    if e2 - e1 >= 96 {
        return (if s0 == s1 { fp::ldexp32(s0, 64) } else { s0 }, true);
    }
    if s1.is_subnormal() {
        return (fp::ldexp32(s0, 64), false);
    }
    // "DENORM" is the f32 denormal range: a reciprocal or quotient below 2^-126.
    let inv = 1.0 / s1 as f64;
    let q = s2 as f64 / s1 as f64;
    let inv_den = den(inv);
    let q_den = den(q);
    if inv_den && q_den {
        // The ISA text scales the denominator by 2^64 here, which overflows it; scaling it
        // down (as in the reciprocal-only case) and post-scaling the quotient down in
        // v_div_fmas is what makes LLVM's division sequence correctly rounded.
        return (if s0 == s1 { fp::ldexp32(s0, -64) } else { s0 }, true);
    }
    if inv_den {
        return (fp::ldexp32(s0, -64), false);
    }
    if q_den {
        return (if s0 == s2 { fp::ldexp32(s0, 64) } else { s0 }, true);
    }
    if e2 <= -127 + 23 {
        return (fp::ldexp32(s0, 64), false);
    }
    (s0, false)
}

fn div_scale64(s0: f64, s1: f64, s2: f64) -> (f64, bool) {
    if s2 == 0.0 || s1 == 0.0 {
        return (f64::NAN, false);
    }
    let (e1, e2) = (fp::exp_f64(s1), fp::exp_f64(s2));
    if e2 - e1 >= 768 {
        return (if s0 == s1 { fp::ldexp64(s0, 128) } else { s0 }, true);
    }
    if s1.is_subnormal() {
        return (fp::ldexp64(s0, 128), false);
    }
    let inv = 1.0 / s1;
    let q = s2 / s1;
    let inv_den = inv.is_subnormal();
    let q_den = q.is_subnormal();
    if inv_den && q_den {
        return (if s0 == s1 { fp::ldexp64(s0, -128) } else { s0 }, true);
    }
    if inv_den {
        return (fp::ldexp64(s0, -128), false);
    }
    if q_den {
        return (if s0 == s2 { fp::ldexp64(s0, 128) } else { s0 }, true);
    }
    if e2 <= -1023 + 53 {
        return (fp::ldexp64(s0, 128), false);
    }
    (s0, false)
}

/// `v_div_fmas_f32`'s post-scale when VCC is set: it undoes v_div_scale's one-sided scaling —
/// 2^64 applied to the denominator of a quotient near the top of the range (scale the result
/// up) or to the numerator of a denormal quotient (scale it down) — and tells the two apart by
/// the magnitude of the scaled quotient in source 2 (|S2| >= 2: up). The ISA text's fixed
/// "2^32" cannot undo either; this reading makes LLVM's division sequence correctly rounded
/// (checked by the cross-check suite's division cases).
fn div_fmas_scaled32(a: f32, b: f32, c: f32) -> f32 {
    let k = if c.abs() >= 2.0 { 64 } else { -64 };
    // a * b is exact in f64; the sum with c is s + e exactly (TwoSum); scaling by 2^k is
    // exact; then one rounding to f32, with e breaking a tie s leaves.
    let p = a as f64 * b as f64;
    let s = p + c as f64;
    let bb = s - p;
    let e = (p - (s - bb)) + (c as f64 - bb);
    let (s, e) = (s * 2f64.powi(k), e * 2f64.powi(k));
    let r = s as f32;
    if e == 0.0 || !r.is_finite() || r as f64 == s {
        return r;
    }
    // s lies strictly between r and its neighbour n on the far side; a tie is at their mean.
    let up = s > r as f64;
    let n = if (r > 0.0) == up || r == 0.0 {
        f32::from_bits(if r == 0.0 {
            if up {
                1
            } else {
                0x8000_0001
            }
        } else {
            r.to_bits() + 1
        })
    } else {
        f32::from_bits(r.to_bits() - 1)
    };
    if (r as f64 + n as f64) / 2.0 == s && (e > 0.0) == up {
        n
    } else {
        r
    }
}

fn div_fmas_scale64(x: f64, q: f64) -> f64 {
    if q.abs() >= 2.0 {
        fp::ldexp64(x, 128)
    } else {
        fp::ldexp64(x, -128)
    }
}

/// VOP3P: packed 16-bit integer ops and packed f32 ops on register pairs.
fn exec_vop3p(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    let s = inst.sig();
    let exec = w.exec();
    let vd = inst.dst as usize - 256;
    let dn = denorm32(w);
    for i in 0..s.nsrc {
        if inst.src[i] >= 128 && inst.src[i] < 256 {
            return Err(ctx.err(inst, "an inline constant in a packed op is not modelled"));
        }
    }
    for lane in 0..64 {
        if exec >> lane & 1 == 0 {
            continue;
        }
        if s.dst == Ty::PF {
            // Packed f32: source i of the low result is dword op_sel[i] of its pair, of the high
            // result dword op_sel_hi[i]; neg_lo / neg_hi negate per half.
            let mut lo = [0f32; 3];
            let mut hi = [0f32; 3];
            for i in 0..s.nsrc {
                let x = raw(w, inst, i, lane, Ty::PF);
                let half = |sel: u8| f((x >> (32 * (sel as u64 & 1))) as u32);
                lo[i] = dn.in32(half(inst.op_sel >> i));
                hi[i] = dn.in32(half(inst.op_sel_hi >> i));
                if inst.neg >> i & 1 != 0 {
                    lo[i] = -lo[i];
                }
                if inst.neg_hi >> i & 1 != 0 {
                    hi[i] = -hi[i];
                }
            }
            let (rl, rh) = match inst.op {
                VPkFmaF32 => (lo[0].mul_add(lo[1], lo[2]), hi[0].mul_add(hi[1], hi[2])),
                VPkMulF32 => (lo[0] * lo[1], hi[0] * hi[1]),
                VPkAddF32 => (lo[0] + lo[1], hi[0] + hi[1]),
                VPkMovB32 => {
                    // D.lo = S0[op_sel[0]], D.hi = S1[op_sel[1]] (moves: no modifiers, no flush).
                    let x0 = raw(w, inst, 0, lane, Ty::PF);
                    let x1 = raw(w, inst, 1, lane, Ty::PF);
                    let l = (x0 >> (32 * (inst.op_sel as u64 & 1))) as u32;
                    let h = (x1 >> (32 * ((inst.op_sel as u64 >> 1) & 1))) as u32;
                    (f(l), f(h))
                }
                _ => return Err(ctx.err(inst, "packed op not implemented")),
            };
            let (rl, rh) = if inst.op == VPkMovB32 { (rl, rh) } else { (dn.out32(rl), dn.out32(rh)) };
            w.v[vd][lane] = rl.to_bits();
            w.v[vd + 1][lane] = rh.to_bits();
        } else {
            let mut lo = [0u16; 3];
            let mut hi = [0u16; 3];
            for i in 0..s.nsrc {
                let x = raw(w, inst, i, lane, Ty::I32) as u32;
                let half = |sel: u8| (x >> (16 * (sel as u32 & 1))) as u16;
                lo[i] = half(inst.op_sel >> i);
                hi[i] = half(inst.op_sel_hi >> i);
            }
            let op = |x: u16, y: u16| -> u16 {
                match inst.op {
                    VPkMulLoU16 => x.wrapping_mul(y),
                    VPkAddI16 | VPkAddU16 => x.wrapping_add(y),
                    VPkSubI16 | VPkSubU16 => x.wrapping_sub(y),
                    VPkLshlrevB16 => y << (x & 15),
                    VPkLshrrevB16 => y >> (x & 15),
                    VPkAshrrevI16 => ((y as i16) >> (x & 15)) as u16,
                    VPkMaxI16 => (x as i16).max(y as i16) as u16,
                    VPkMinI16 => (x as i16).min(y as i16) as u16,
                    VPkMaxU16 => x.max(y),
                    VPkMinU16 => x.min(y),
                    _ => 0,
                }
            };
            if inst.clamp || inst.neg != 0 || inst.neg_hi != 0 {
                return Err(ctx.err(inst, "clamp / neg on a packed integer op is not modelled"));
            }
            w.v[vd][lane] = op(lo[0], lo[1]) as u32 | (op(hi[0], hi[1]) as u32) << 16;
        }
    }
    Ok(())
}
