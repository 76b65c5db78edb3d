//! LDS (DS) instructions: loads and stores of every width, the two-address forms, atomics, and
//! the cross-lane ops that use the LDS crossbar without touching memory (ds_swizzle,
//! ds_permute, ds_bpermute). Accesses are checked against the declared LDS size and natural
//! alignment, and for races between the waves of a workgroup between two barrier releases
//! (byte granularity; atomics only race with plain accesses).

use crate::decode::{Inst, Op};
use crate::exec::{Counter, Ctx, LdsWord, Wave};
use crate::SimError;

/// Loads that write one half of their destination and keep the other.
pub(crate) fn is_d16(op: Op) -> bool {
    use Op::*;
    matches!(op, DsReadU8D16 | DsReadU8D16Hi | DsReadI8D16 | DsReadI8D16Hi | DsReadU16D16 | DsReadU16D16Hi)
}

/// (element bytes, elements, address stride multiplier of offset0 / offset1) of a DS memory op;
/// None for the cross-lane ops.
fn shape(op: Op) -> Option<(u32, u32, u32)> {
    use Op::*;
    Some(match op {
        DsWrite2B32 | DsRead2B32 => (4, 2, 4),
        DsWrite2st64B32 | DsRead2st64B32 => (4, 2, 256),
        DsWrite2B64 | DsRead2B64 => (8, 2, 8),
        DsWrite2st64B64 | DsRead2st64B64 => (8, 2, 512),
        DsWriteB8 | DsReadI8 | DsReadU8 | DsWriteB8D16Hi | DsReadU8D16 | DsReadU8D16Hi | DsReadI8D16
        | DsReadI8D16Hi => (1, 1, 0),
        DsWriteB16 | DsReadI16 | DsReadU16 | DsWriteB16D16Hi | DsReadU16D16 | DsReadU16D16Hi => (2, 1, 0),
        DsWriteB64 | DsReadB64 | DsAddU64 | DsMinU64 | DsMaxU64 | DsAddRtnU64 | DsCmpstRtnB64 => (8, 1, 0),
        DsWriteB96 | DsReadB96 => (12, 1, 0),
        DsWriteB128 | DsReadB128 => (16, 1, 0),
        DsSwizzleB32 | DsPermuteB32 | DsBpermuteB32 => return None,
        _ => (4, 1, 0),
    })
}

fn is_write(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        DsWriteB32
            | DsWrite2B32
            | DsWrite2st64B32
            | DsWriteB8
            | DsWriteB16
            | DsWriteB64
            | DsWrite2B64
            | DsWrite2st64B64
            | DsWriteB8D16Hi
            | DsWriteB16D16Hi
            | DsWriteB96
            | DsWriteB128
    )
}

fn is_read(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        DsReadB32
            | DsRead2B32
            | DsRead2st64B32
            | DsReadI8
            | DsReadU8
            | DsReadI16
            | DsReadU16
            | DsReadB64
            | DsRead2B64
            | DsRead2st64B64
            | DsReadU8D16
            | DsReadU8D16Hi
            | DsReadI8D16
            | DsReadI8D16Hi
            | DsReadU16D16
            | DsReadU16D16Hi
            | DsReadB96
            | DsReadB128
    )
}

fn rd32(lds: &[u8], a: u32) -> u32 {
    let p = a as usize;
    u32::from_le_bytes([lds[p], lds[p + 1], lds[p + 2], lds[p + 3]])
}

fn wr32(lds: &mut [u8], a: u32, v: u32) {
    lds[a as usize..a as usize + 4].copy_from_slice(&v.to_le_bytes());
}

fn rd64(lds: &[u8], a: u32) -> u64 {
    rd32(lds, a) as u64 | (rd32(lds, a + 4) as u64) << 32
}

fn wr64(lds: &mut [u8], a: u32, v: u64) {
    wr32(lds, a, v as u32);
    wr32(lds, a + 4, (v >> 32) as u32);
}

/// Race check and bookkeeping of one tracked unit (a dword, or a byte of a dword that had a
/// sub-dword access) for an access by wave `me`: returns who it races with.
fn touch(m: &mut LdsWord, me: u8, epoch: u32, write: bool, atomic: bool) -> Option<String> {
    let other_write = m.write_epoch == epoch && m.writer != me;
    let other_read = m.read_epoch == epoch && m.readers & !(1u16 << me) != 0;
    if other_write && !(atomic && m.atomic) {
        return Some(format!("wave {} wrote it", m.writer));
    }
    if (write || atomic) && other_read {
        return Some(format!("wave(s) {:#06b} read it", m.readers & !(1u16 << me)));
    }
    if write || atomic {
        if m.write_epoch != epoch {
            m.atomic = atomic;
        } else {
            m.atomic &= atomic;
        }
        m.writer = me;
        m.write_epoch = epoch;
    } else {
        if m.read_epoch != epoch {
            m.readers = 0;
            m.read_epoch = epoch;
        }
        m.readers |= 1 << me;
    }
    None
}

/// Race bookkeeping for the bytes [addr, addr + len) accessed by the current wave: per dword,
/// and per byte for the dwords that ever had a sub-dword access (so that waves writing
/// different bytes of one dword do not race).
fn track(
    ctx: &mut Ctx,
    inst: &Inst,
    lane: usize,
    addr: u32,
    len: u32,
    write: bool,
    atomic: bool,
) -> Result<(), SimError> {
    let (me, epoch) = (ctx.wave_id as u8, ctx.epoch);
    let whole = addr % 4 == 0 && len % 4 == 0;
    for dw in addr / 4..(addr + len).div_ceil(4) {
        let (lo, hi) = ((addr.max(4 * dw)) % 4, (addr + len).min(4 * dw + 4) - 4 * dw);
        let raced = if whole && !ctx.lds_meta[dw as usize].split {
            touch(&mut ctx.lds_meta[dw as usize], me, epoch, write, atomic)
        } else {
            let base = ctx.lds_meta[dw as usize];
            ctx.lds_meta[dw as usize].split = true;
            let bytes = ctx.lds_bytes.entry(dw).or_insert([base; 4]);
            (lo..hi).find_map(|b| touch(&mut bytes[b as usize], me, epoch, write, atomic))
        };
        if let Some(other) = raced {
            return Err(ctx.err(
                inst,
                format!("LDS race at dword {dw} (byte {}, lane {lane}): {other} since the last s_barrier", 4 * dw + lo),
            ));
        }
    }
    Ok(())
}

/// The 32-bit atomic of `op` on `old` with data `d0` (and `d1` for compare-store).
fn atomic32(op: Op, old: u32, d0: u32, d1: u32) -> u32 {
    use Op::*;
    match op {
        DsAddU32 | DsAddRtnU32 => old.wrapping_add(d0),
        DsSubU32 | DsSubRtnU32 => old.wrapping_sub(d0),
        DsRsubU32 | DsRsubRtnU32 => d0.wrapping_sub(old),
        DsIncU32 | DsIncRtnU32 => {
            if old >= d0 {
                0
            } else {
                old + 1
            }
        }
        DsDecU32 | DsDecRtnU32 => {
            if old == 0 || old > d0 {
                d0
            } else {
                old - 1
            }
        }
        DsMinI32 | DsMinRtnI32 => (old as i32).min(d0 as i32) as u32,
        DsMaxI32 | DsMaxRtnI32 => (old as i32).max(d0 as i32) as u32,
        DsMinU32 | DsMinRtnU32 => old.min(d0),
        DsMaxU32 | DsMaxRtnU32 => old.max(d0),
        DsAndB32 | DsAndRtnB32 => old & d0,
        DsOrB32 | DsOrRtnB32 => old | d0,
        DsXorB32 | DsXorRtnB32 => old ^ d0,
        DsWrxchgRtnB32 => d0,
        // Compare-store: DATA0 is the compare value, DATA1 the new value (the reverse of the
        // VMEM cmpswap).
        DsCmpstB32 | DsCmpstRtnB32 => {
            if old == d0 {
                d1
            } else {
                old
            }
        }
        DsAddF32 | DsAddRtnF32 => (f32::from_bits(old) + f32::from_bits(d0)).to_bits(),
        _ => old,
    }
}

pub(crate) fn exec_ds(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    ctx.stats.lds += 1;
    if inst.gds {
        return Err(ctx.err(inst, "GDS is not simulated"));
    }
    let s = inst.sig();
    let exec = w.exec();
    let (a, d0, d1, dst) =
        (inst.src[0] as usize - 256, inst.src[1] as usize - 256, inst.src[2] as usize - 256, inst.dst as usize - 256);
    let lds_len = ctx.lds.len() as u32;
    match inst.op {
        DsSwizzleB32 | DsPermuteB32 | DsBpermuteB32 => {
            // Cross-lane through the LDS crossbar: inactive source lanes give 0.
            let mut out = [0u32; 64];
            let mut written = [false; 64];
            let off = inst.imm as u32;
            if inst.op == DsPermuteB32 {
                // Forward: lane i sends its data to lane addr[i] / 4; the highest lane wins.
                for lane in 0..64 {
                    if exec >> lane & 1 != 0 {
                        let to = ((w.v[a][lane].wrapping_add(off) >> 2) & 63) as usize;
                        out[to] = w.v[d0][lane];
                        written[to] = true;
                    }
                }
            }
            for (lane, slot) in out.iter_mut().enumerate() {
                if exec >> lane & 1 == 0 {
                    continue;
                }
                let from = match inst.op {
                    DsBpermuteB32 => Some(((w.v[a][lane].wrapping_add(off) >> 2) & 63) as usize),
                    DsSwizzleB32 => {
                        let o = off as usize;
                        if o & 0x8000 != 0 {
                            Some((lane & !3) | ((o >> (2 * (lane & 3))) & 3))
                        } else {
                            let (and, or, xor) = (o & 0x1f, (o >> 5) & 0x1f, (o >> 10) & 0x1f);
                            Some((lane & !31) | ((((lane & 31) & and) | or) ^ xor))
                        }
                    }
                    _ => None,
                };
                // ds_swizzle's source is its ADDR operand; the permutes send DATA0.
                let src = if inst.op == DsSwizzleB32 { a } else { d0 };
                let v = match from {
                    Some(f) if exec >> f & 1 != 0 => w.v[src][f],
                    Some(_) => 0,
                    None => {
                        if written[lane] {
                            *slot
                        } else {
                            0
                        }
                    }
                };
                *slot = v;
            }
            for (lane, (d, o)) in w.v[dst].iter_mut().zip(out).enumerate() {
                if exec >> lane & 1 != 0 {
                    *d = o;
                }
            }
            w.issued[1] += 1;
            crate::hazard::mark_pending(w, true, dst, 1, Counter::Lds, inst.offset);
            return Ok(());
        }
        _ => {}
    }
    let Some((elem, count, stride)) = shape(inst.op) else {
        return Err(ctx.err(inst, "not a DS memory op"));
    };
    let write = is_write(inst.op);
    let read = is_read(inst.op);
    let atomic = !write && !read;
    for lane in 0..64 {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let base = w.v[a][lane];
        let addrs: [u32; 2] = if count == 2 {
            [
                base.wrapping_add((inst.imm as u32 & 0xff) * stride),
                base.wrapping_add(((inst.imm as u32 >> 8) & 0xff) * stride),
            ]
        } else {
            [base.wrapping_add(inst.imm as u32 & 0xffff), 0]
        };
        for &ad in &addrs[..count as usize] {
            let align = if elem == 12 { 16 } else { elem };
            if ad as u64 + elem as u64 > lds_len as u64 || ad & (align - 1) != 0 {
                return Err(ctx.err(
                    inst,
                    format!(
                        "LDS access of {elem} bytes at {ad} (lane {lane}) outside the declared {lds_len} bytes or misaligned"
                    ),
                ));
            }
            track(ctx, inst, lane, ad, elem, write, atomic)?;
        }
        let lds = &mut ctx.lds;
        match inst.op {
            DsWriteB32 => wr32(lds, addrs[0], w.v[d0][lane]),
            DsWriteB8 => lds[addrs[0] as usize] = w.v[d0][lane] as u8,
            DsWriteB8D16Hi => lds[addrs[0] as usize] = (w.v[d0][lane] >> 16) as u8,
            DsWriteB16 => {
                lds[addrs[0] as usize..addrs[0] as usize + 2].copy_from_slice(&(w.v[d0][lane] as u16).to_le_bytes())
            }
            DsWriteB16D16Hi => lds[addrs[0] as usize..addrs[0] as usize + 2]
                .copy_from_slice(&((w.v[d0][lane] >> 16) as u16).to_le_bytes()),
            DsWriteB64 | DsWriteB96 | DsWriteB128 => {
                for q in 0..elem / 4 {
                    wr32(lds, addrs[0] + 4 * q, w.v[d0 + q as usize][lane]);
                }
            }
            DsWrite2B32 | DsWrite2st64B32 => {
                wr32(lds, addrs[0], w.v[d0][lane]);
                wr32(lds, addrs[1], w.v[d1][lane]);
            }
            DsWrite2B64 | DsWrite2st64B64 => {
                for q in 0..2 {
                    wr32(lds, addrs[0] + 4 * q, w.v[d0 + q as usize][lane]);
                    wr32(lds, addrs[1] + 4 * q, w.v[d1 + q as usize][lane]);
                }
            }
            DsReadB32 => w.v[dst][lane] = rd32(lds, addrs[0]),
            DsReadU8 => w.v[dst][lane] = lds[addrs[0] as usize] as u32,
            DsReadI8 => w.v[dst][lane] = lds[addrs[0] as usize] as i8 as i32 as u32,
            DsReadU16 => {
                w.v[dst][lane] = u16::from_le_bytes([lds[addrs[0] as usize], lds[addrs[0] as usize + 1]]) as u32
            }
            DsReadI16 => {
                w.v[dst][lane] = i16::from_le_bytes([lds[addrs[0] as usize], lds[addrs[0] as usize + 1]]) as i32 as u32
            }
            DsReadU8D16 | DsReadU8D16Hi | DsReadI8D16 | DsReadI8D16Hi | DsReadU16D16 | DsReadU16D16Hi => {
                let p = addrs[0] as usize;
                let v: u16 = match inst.op {
                    DsReadU8D16 | DsReadU8D16Hi => lds[p] as u16,
                    DsReadI8D16 | DsReadI8D16Hi => lds[p] as i8 as i16 as u16,
                    _ => u16::from_le_bytes([lds[p], lds[p + 1]]),
                };
                let old = w.v[dst][lane];
                w.v[dst][lane] = if matches!(inst.op, DsReadU8D16Hi | DsReadI8D16Hi | DsReadU16D16Hi) {
                    (old & 0xffff) | (v as u32) << 16
                } else {
                    (old & 0xffff_0000) | v as u32
                };
            }
            DsReadB64 | DsReadB96 | DsReadB128 => {
                for q in 0..elem / 4 {
                    w.v[dst + q as usize][lane] = rd32(lds, addrs[0] + 4 * q);
                }
            }
            DsRead2B32 | DsRead2st64B32 => {
                w.v[dst][lane] = rd32(lds, addrs[0]);
                w.v[dst + 1][lane] = rd32(lds, addrs[1]);
            }
            DsRead2B64 | DsRead2st64B64 => {
                for q in 0..2 {
                    w.v[dst + q][lane] = rd32(lds, addrs[0] + 4 * q as u32);
                    w.v[dst + 2 + q][lane] = rd32(lds, addrs[1] + 4 * q as u32);
                }
            }
            DsAddU64 | DsMinU64 | DsMaxU64 | DsAddRtnU64 | DsCmpstRtnB64 => {
                let old = rd64(lds, addrs[0]);
                let x = w.v[d0][lane] as u64 | (w.v[d0 + 1][lane] as u64) << 32;
                let new = match inst.op {
                    DsAddU64 | DsAddRtnU64 => old.wrapping_add(x),
                    DsMinU64 => old.min(x),
                    DsMaxU64 => old.max(x),
                    _ => {
                        let y = w.v[d1][lane] as u64 | (w.v[d1 + 1][lane] as u64) << 32;
                        if old == x {
                            y
                        } else {
                            old
                        }
                    }
                };
                wr64(lds, addrs[0], new);
                if s.ret > 0 {
                    w.v[dst][lane] = old as u32;
                    w.v[dst + 1][lane] = (old >> 32) as u32;
                }
            }
            _ => {
                // 32-bit atomics.
                let old = rd32(lds, addrs[0]);
                let dv1 = if s.data1 > 0 { w.v[d1][lane] } else { 0 };
                wr32(lds, addrs[0], atomic32(inst.op, old, w.v[d0][lane], dv1));
                if s.ret > 0 {
                    w.v[dst][lane] = old;
                }
            }
        }
    }
    w.issued[1] += 1;
    if s.ret > 0 {
        crate::hazard::mark_pending(w, true, dst, s.ret as usize, Counter::Lds, inst.offset);
    }
    if write || atomic {
        w.lds_stores_unwaited = w.issued[1];
    }
    Ok(())
}
