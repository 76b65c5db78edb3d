//! Vector memory: GLOBAL and MUBUF (buffer) loads, stores and atomics, the cache operations
//! (`buffer_wbl2`, `buffer_inv`), and the cross-workgroup visibility rules of MI300.
//!
//! # Cache scopes
//! The simulator's memory is one coherent array, but an MI300 is not: every XCD has its own L2,
//! written back and invalidated only by the cache operations, and the simulator cannot know
//! which XCD a workgroup lands on, so it assumes every pair of workgroups is on different
//! dies. [`Coherence`] records, per dword written during a launch, which workgroup and wave
//! wrote it and how (plain store; `sc1` store or atomic, visible at once: read-modify-write
//! atomics are performed at device scope, `sc1` on an atomic means system scope), and reports,
//! as a hazard:
//! - a load of a dword another workgroup wrote with a plain store, unless a `buffer_wbl2 sc1`
//!   of the writer covered the store (issued after it by the same wave, or after the storing
//!   wave's `s_waitcnt` retired it), completed (`s_waitcnt vmcnt`) before the writer's last
//!   atomic or `sc1` store (the flag a reader acquires);
//! - such a load by a workgroup that has not executed `buffer_inv sc1` after an acquiring
//!   operation (an atomic returning its value, or an `sc1` load) — unless the load itself is
//!   `sc1` (device scope, misses the non-coherent caches);
//! - a `buffer_inv` issued while the wave's acquiring operation is still outstanding;
//! - a scalar load of memory written during the launch (the scalar cache does not see vector
//!   stores).
//!
//! Buffer resources are read as GFX9 defines them (base 47:0, stride 61:48, num_records in the
//! third dword); raw buffers (stride 0) are range-checked on the VGPR offset plus the
//! instruction offset (soffset excluded): out-of-range loads return 0 and stores are dropped.

use crate::decode::{flag, Enc, Inst, Op};
use crate::exec::{Counter, Ctx, Memory, Wave};
use crate::SimError;

/// GLOBAL loads that write one half of the destination and keep the other.
pub(crate) fn is_d16(op: Op) -> bool {
    use Op::*;
    matches!(
        op,
        GlobalLoadUbyteD16
            | GlobalLoadUbyteD16Hi
            | GlobalLoadSbyteD16
            | GlobalLoadSbyteD16Hi
            | GlobalLoadShortD16
            | GlobalLoadShortD16Hi
    )
}

#[derive(Clone, Copy, Default)]
struct Meta {
    /// Workgroup + 1 (0: not written in this launch).
    writer: u32,
    wave: u8,
    /// The store was device-visible when written (sc1 store, device-scope atomic).
    visible: bool,
    /// Vector-memory issue sequence of the store in its wave.
    seq: u64,
    time: u64,
}

/// A `buffer_wbl2 sc1`: the stores it covers (per wave of its workgroup, the vm sequence up to
/// which that wave's stores were written back) and the time it completed.
struct Release {
    covered: [u64; 16],
    done: u64,
}

#[derive(Default)]
struct Group {
    releases: Vec<Release>,
    /// Time of the workgroup's last atomic or sc1 store (the flag readers acquire).
    last_sync: u64,
    /// Time of its last acquiring operation and of a buffer_inv sc1 after one.
    acquire: u64,
    inv: u64,
    /// Per wave: vm sequence retired by its last s_waitcnt.
    retired: [u64; 16],
}

/// Launch-wide visibility bookkeeping.
pub struct Coherence {
    time: u64,
    meta: Vec<Vec<Meta>>,
    groups: Vec<Group>,
}

impl Coherence {
    pub(crate) fn new(mem: &Memory, groups: u32) -> Self {
        Coherence {
            time: 1,
            meta: mem.bufs.iter().map(|_| Vec::new()).collect(),
            groups: (0..groups).map(|_| Group::default()).collect(),
        }
    }

    pub(crate) fn begin_workgroup(&mut self, _wg: u32) {
        self.time += 1;
    }

    fn tick(&mut self) -> u64 {
        self.time += 1;
        self.time
    }

    fn meta_mut(&mut self, mem: &Memory, addr: u64) -> Option<&mut Meta> {
        let idx = ((addr >> 32) as usize).checked_sub(1)?;
        let len = mem.bufs.get(idx)?.1.len();
        if self.meta.len() <= idx {
            self.meta.resize_with(idx + 1, Vec::new);
        }
        let m = &mut self.meta[idx];
        if m.is_empty() {
            m.resize(len.div_ceil(4), Meta::default());
        }
        m.get_mut(((addr & 0xffff_ffff) / 4) as usize)
    }

    fn meta(&self, addr: u64) -> Option<Meta> {
        let idx = ((addr >> 32) as usize).checked_sub(1)?;
        self.meta.get(idx)?.get(((addr & 0xffff_ffff) / 4) as usize).copied()
    }

    /// Called when vmcnt covers release `idx` of workgroup `wg`.
    pub(crate) fn release_done(&mut self, wg: u32, idx: usize) {
        let t = self.tick();
        if let Some(r) = self.groups[wg as usize].releases.get_mut(idx) {
            if r.done == 0 {
                r.done = t;
            }
        }
    }

    pub(crate) fn note_retired(&mut self, wg: u32, wave: usize, seq: u64) {
        self.groups[wg as usize].retired[wave] = seq;
    }

    /// When workgroup `w`'s write `m` became visible at device scope, if it did.
    fn visible_at(&self, m: &Meta) -> Option<u64> {
        if m.visible {
            return Some(m.time);
        }
        let g = &self.groups[m.writer as usize - 1];
        g.releases.iter().find(|r| r.covered[m.wave as usize] >= m.seq && r.done != 0).map(|r| r.done)
    }

    /// Checks a read of dword `addr` by workgroup `wg` (`device`: an sc1 load).
    fn check_read(&self, wg: u32, addr: u64, device: bool, mem: &Memory) -> Result<(), String> {
        let Some(m) = self.meta(addr) else { return Ok(()) };
        if m.writer == 0 || m.writer == wg + 1 {
            return Ok(());
        }
        let w = m.writer - 1;
        let what = mem.describe(addr);
        let Some(t) = self.visible_at(&m) else {
            return Err(format!(
                "reads {what}, which workgroup {w} stored without releasing it (buffer_wbl2 sc1 after the store, \
                 completed by s_waitcnt vmcnt before its atomic): the data may still sit in another die's L2"
            ));
        };
        if self.groups[w as usize].last_sync < t {
            return Err(format!(
                "reads {what}: workgroup {w}'s release of it completed after its last atomic / sc1 store, so a reader \
                 can see the flag before the data"
            ));
        }
        if !device && self.groups[wg as usize].inv == 0 {
            return Err(format!(
                "reads {what}, which workgroup {w} released, without a buffer_inv sc1 after an acquire: this die's \
                 caches may hold a stale copy"
            ));
        }
        Ok(())
    }
}

/// A scalar load must not read memory written during the launch (the scalar cache is not
/// coherent with vector stores).
pub(crate) fn check_scalar_read(ctx: &Ctx, inst: &Inst, addr: u64, len: usize) -> Result<(), SimError> {
    for a in (addr..addr + len as u64).step_by(4) {
        if let Some(m) = ctx.coherence.meta(a) {
            if m.writer != 0 {
                return Err(ctx.err(
                    inst,
                    format!(
                        "scalar load of {}, which workgroup {} wrote during this launch (the scalar cache does not see \
                         vector stores)",
                        ctx.mem.describe(a),
                        m.writer - 1
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// (bytes per lane, data dwords, sign-extend, d16 half: 0 none, 1 low, 2 high) of a load /
/// store; atomics: (4 or 8, dwords, ..).
fn width(op: Op) -> (usize, bool, u8) {
    use Op::*;
    match op {
        GlobalLoadUbyte | BufferLoadUbyte | GlobalStoreByte | BufferStoreByte => (1, false, 0),
        GlobalLoadSbyte | BufferLoadSbyte => (1, true, 0),
        GlobalLoadUshort | BufferLoadUshort | GlobalStoreShort | BufferStoreShort => (2, false, 0),
        GlobalLoadSshort | BufferLoadSshort => (2, true, 0),
        GlobalLoadUbyteD16 => (1, false, 1),
        GlobalLoadUbyteD16Hi => (1, false, 2),
        GlobalLoadSbyteD16 => (1, true, 1),
        GlobalLoadSbyteD16Hi => (1, true, 2),
        GlobalLoadShortD16 => (2, false, 1),
        GlobalLoadShortD16Hi => (2, false, 2),
        GlobalStoreByteD16Hi => (1, false, 2),
        GlobalStoreShortD16Hi => (2, false, 2),
        GlobalLoadDwordx2 | BufferLoadDwordx2 | GlobalStoreDwordx2 | BufferStoreDwordx2 => (8, false, 0),
        GlobalLoadDwordx3 | BufferLoadDwordx3 | GlobalStoreDwordx3 | BufferStoreDwordx3 => (12, false, 0),
        GlobalLoadDwordx4 | BufferLoadDwordx4 | GlobalStoreDwordx4 | BufferStoreDwordx4 => (16, false, 0),
        _ => (4, false, 0),
    }
}

/// The atomic's (new value, 64-bit) for old value `old` and data `d` (`d` = [src, cmp] for
/// cmpswap).
fn atomic_op(op: Op, old: u64, d: [u64; 2]) -> Option<u64> {
    let name = crate::decode::mnemonic(op);
    let kind = name.strip_prefix("global_atomic_").or_else(|| name.strip_prefix("buffer_atomic_"))?;
    let wide = kind.ends_with("_x2") || kind.ends_with("_f64");
    let kind = kind.trim_end_matches("_x2");
    let x = d[0];
    let (o32, x32) = (old as u32, x as u32);
    let r = match (kind, wide) {
        ("swap", _) => x,
        ("cmpswap", _) => {
            if old == d[1] {
                x
            } else {
                old
            }
        }
        ("add", false) => o32.wrapping_add(x32) as u64,
        ("add", true) => old.wrapping_add(x),
        ("sub", false) => o32.wrapping_sub(x32) as u64,
        ("sub", true) => old.wrapping_sub(x),
        ("smin", false) => (o32 as i32).min(x32 as i32) as u32 as u64,
        ("smin", true) => (old as i64).min(x as i64) as u64,
        ("umin", false) => o32.min(x32) as u64,
        ("umin", true) => old.min(x),
        ("smax", false) => (o32 as i32).max(x32 as i32) as u32 as u64,
        ("smax", true) => (old as i64).max(x as i64) as u64,
        ("umax", false) => o32.max(x32) as u64,
        ("umax", true) => old.max(x),
        ("and", _) => old & x,
        ("or", _) => old | x,
        ("xor", _) => old ^ x,
        ("inc", false) => {
            if o32 >= x32 {
                0
            } else {
                o32 as u64 + 1
            }
        }
        ("inc", true) => {
            if old >= x {
                0
            } else {
                old + 1
            }
        }
        ("dec", false) => {
            if o32 == 0 || o32 > x32 {
                x32 as u64
            } else {
                o32 as u64 - 1
            }
        }
        ("dec", true) => {
            if old == 0 || old > x {
                x
            } else {
                old - 1
            }
        }
        ("add_f32", _) => (f32::from_bits(o32) + f32::from_bits(x32)).to_bits() as u64,
        ("add_f64", _) => (f64::from_bits(old) + f64::from_bits(x)).to_bits(),
        ("min_f64", _) => crate::fpmath::min64(f64::from_bits(old), f64::from_bits(x)).to_bits(),
        ("max_f64", _) => crate::fpmath::max64(f64::from_bits(old), f64::from_bits(x)).to_bits(),
        _ => return None,
    };
    Some(r)
}

fn is_atomic_wide(op: Op) -> bool {
    let n = crate::decode::mnemonic(op);
    n.ends_with("_x2") || n.ends_with("_f64")
}

pub(crate) fn exec_vmem(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    let s = inst.sig();
    let me = ctx.wg_linear;
    // Cache operations: counted on vmcnt, no lanes.
    if matches!(inst.op, BufferWbl2 | BufferInv) {
        w.issued[0] += 1;
        let seq = w.issued[0];
        let agent = inst.cpol & 2 != 0;
        if inst.op == BufferWbl2 {
            if agent {
                let g = &mut ctx.coherence.groups[me as usize];
                let mut covered = g.retired;
                covered[w.id] = seq - 1;
                g.releases.push(Release { covered, done: 0 });
                let idx = g.releases.len() - 1;
                w.wbl2_pending.push((seq, idx));
            }
        } else if agent {
            if w.acquire_seq > w.retired[0] {
                return Err(ctx.err(inst, "buffer_inv before the acquiring atomic / load completed (s_waitcnt vmcnt)"));
            }
            let t = ctx.coherence.tick();
            let g = &mut ctx.coherence.groups[me as usize];
            if g.acquire != 0 {
                g.inv = t;
            }
        }
        return Ok(());
    }
    let exec = w.exec();
    let atomic = s.has(flag::ATOMIC);
    let store = s.ret == 0 && s.data > 0;
    let returns = s.ret > 0 && (!atomic || inst.glc);
    let device = inst.cpol & 2 != 0; // sc1: device (or system) scope
    let (bytes, sext, d16) = width(inst.op);
    let ebytes = if atomic {
        if is_atomic_wide(inst.op) {
            8
        } else {
            4
        }
    } else {
        bytes
    };
    // Atomics count as stores (what they leave in memory).
    if store || atomic {
        ctx.stats.vmem_store += 1;
    } else {
        ctx.stats.vmem_load += 1;
    }
    let (vaddr, vdata, vdst) = (inst.src[0] as usize - 256, inst.src[1] as usize - 256, inst.dst as usize - 256);
    // Address computation.
    let global_base = if inst.enc == Enc::Global && inst.src[2] != 0x7f {
        crate::valu::scalar64(w, inst, inst.src[2], crate::decode::Ty::S2)
    } else {
        0
    };
    let rsrc = if inst.enc == Enc::Mubuf {
        let r = inst.src[2] as usize;
        Some([w.s[r], w.s[r + 1], w.s[r + 2], w.s[r + 3]])
    } else {
        None
    };
    let soff = if inst.enc == Enc::Mubuf { crate::valu::scalar32(w, inst, inst.soffset) as u64 } else { 0 };
    if let Some(r) = rsrc {
        if r[3] & (1 << 23) != 0 || r[1] & (1 << 30) != 0 {
            return Err(ctx.err(inst, "swizzled / add_tid buffer resources are not simulated"));
        }
    }
    w.issued[0] += 1;
    let seq = w.issued[0];
    let now = ctx.coherence.tick();
    for lane in 0..64 {
        if exec >> lane & 1 == 0 {
            continue;
        }
        // Address, and for buffers whether the access is in range.
        let (addr, in_range) = match rsrc {
            None => {
                let a = if inst.src[2] == 0x7f {
                    (w.v[vaddr][lane] as u64 | (w.v[vaddr + 1][lane] as u64) << 32).wrapping_add(inst.imm as i64 as u64)
                } else {
                    global_base.wrapping_add(w.v[vaddr][lane] as u64).wrapping_add(inst.imm as i64 as u64)
                };
                (a, true)
            }
            Some(r) => {
                let base = r[0] as u64 | ((r[1] & 0xffff) as u64) << 32;
                let stride = ((r[1] >> 16) & 0x3fff) as u64;
                let num = r[2] as u64;
                let (idx, voff) = match (inst.idxen, inst.offen) {
                    (true, true) => (w.v[vaddr][lane] as u64, w.v[vaddr + 1][lane] as u64),
                    (true, false) => (w.v[vaddr][lane] as u64, 0),
                    (false, true) => (0, w.v[vaddr][lane] as u64),
                    (false, false) => (0, 0),
                };
                let off = voff + inst.imm as u64;
                let in_range = if stride == 0 { off + ebytes as u64 <= num } else { idx < num };
                (base + idx * stride + off + soff, in_range)
            }
        };
        if !in_range {
            if returns {
                for i in 0..s.ret as usize {
                    w.v[vdst + i][lane] = 0;
                }
            }
            continue;
        }
        let access = if atomic { ebytes } else { bytes };
        if addr % (access.min(4) as u64) != 0 {
            return Err(ctx.err(inst, format!("misaligned vector memory access at 0x{addr:x} (lane {lane})")));
        }
        if ctx.mem.slice(addr, access).is_none() {
            let d = ctx.mem.describe(addr);
            return Err(ctx.err(inst, format!("global access of {access} bytes at {d} (lane {lane}) is out of bounds")));
        }
        // Cross-workgroup visibility.
        if !store {
            for a in (addr & !3..addr + access as u64).step_by(4) {
                if atomic {
                    // Read-modify-write atomics are performed at device scope whatever their
                    // cache bits (LLVM's gfx940 memory model sets sc1 only for system scope):
                    // only a plain store they read over must have been released.
                    if let Some(m) = ctx.coherence.meta(a) {
                        if m.writer != 0 && m.writer != me + 1 && !m.visible {
                            ctx.coherence.check_read(me, a, true, ctx.mem).map_err(|e| ctx.err(inst, e))?;
                        }
                    }
                } else {
                    ctx.coherence.check_read(me, a, device, ctx.mem).map_err(|e| ctx.err(inst, e))?;
                }
            }
        }
        let mem = ctx.mem.slice(addr, access).expect("checked");
        if store {
            let v = w.v[vdata][lane];
            match (bytes, d16) {
                (1, 2) => mem[0] = (v >> 16) as u8,
                (2, 2) => mem.copy_from_slice(&((v >> 16) as u16).to_le_bytes()),
                (1, _) => mem[0] = v as u8,
                (2, _) => mem.copy_from_slice(&(v as u16).to_le_bytes()),
                _ => {
                    for i in 0..bytes / 4 {
                        mem[4 * i..4 * i + 4].copy_from_slice(&w.v[vdata + i][lane].to_le_bytes());
                    }
                }
            }
            ctx.stats.global_bytes_written += bytes as u64;
        } else if atomic {
            let rd = |m: &[u8], i: usize| u32::from_le_bytes([m[4 * i], m[4 * i + 1], m[4 * i + 2], m[4 * i + 3]]);
            let old = if ebytes == 8 { rd(mem, 0) as u64 | (rd(mem, 1) as u64) << 32 } else { rd(mem, 0) as u64 };
            let dw = |i: usize| w.v[vdata + i][lane] as u64;
            let data = if ebytes == 8 {
                [dw(0) | dw(1) << 32, if s.data == 4 { dw(2) | dw(3) << 32 } else { 0 }]
            } else {
                [dw(0), if s.data == 2 { dw(1) } else { 0 }]
            };
            let Some(new) = atomic_op(inst.op, old, data) else {
                return Err(ctx.err(inst, "atomic not implemented"));
            };
            mem[..4].copy_from_slice(&(new as u32).to_le_bytes());
            if ebytes == 8 {
                mem[4..8].copy_from_slice(&((new >> 32) as u32).to_le_bytes());
            }
            if returns {
                w.v[vdst][lane] = old as u32;
                if ebytes == 8 {
                    w.v[vdst + 1][lane] = (old >> 32) as u32;
                }
            }
            ctx.stats.global_bytes_written += ebytes as u64;
        } else {
            let b = |i: usize| mem[i];
            match (bytes, d16) {
                (1, 0) => w.v[vdst][lane] = if sext { b(0) as i8 as i32 as u32 } else { b(0) as u32 },
                (2, 0) => {
                    let h = u16::from_le_bytes([b(0), b(1)]);
                    w.v[vdst][lane] = if sext { h as i16 as i32 as u32 } else { h as u32 };
                }
                (_, 1) | (_, 2) => {
                    let h: u16 = if bytes == 1 {
                        if sext {
                            b(0) as i8 as i16 as u16
                        } else {
                            b(0) as u16
                        }
                    } else {
                        u16::from_le_bytes([b(0), b(1)])
                    };
                    let old = w.v[vdst][lane];
                    w.v[vdst][lane] =
                        if d16 == 2 { (old & 0xffff) | (h as u32) << 16 } else { (old & 0xffff_0000) | h as u32 };
                }
                _ => {
                    for i in 0..bytes / 4 {
                        w.v[vdst + i][lane] = u32::from_le_bytes([b(4 * i), b(4 * i + 1), b(4 * i + 2), b(4 * i + 3)]);
                    }
                }
            }
            ctx.stats.global_bytes_read += bytes as u64;
        }
        // Record the write.
        if store || atomic {
            for a in (addr & !3..addr + access as u64).step_by(4) {
                let wave = w.id as u8;
                if let Some(m) = ctx.coherence.meta_mut(ctx.mem, a) {
                    *m = Meta { writer: me + 1, wave, visible: atomic || (device && store), seq, time: now };
                }
            }
        }
    }
    let g = &mut ctx.coherence.groups[me as usize];
    if atomic || (store && device) {
        g.last_sync = now;
    }
    if (atomic && returns) || (!store && !atomic && device) {
        g.acquire = now;
        w.acquire_seq = seq;
    }
    if returns {
        crate::hazard::mark_pending(w, true, vdst, s.ret as usize, Counter::Vm, inst.offset);
    }
    // Stores with more than 64 bits of data (MUBUF only without an SGPR soffset).
    if (store || atomic) && s.data > 2 && (inst.enc == Enc::Global || inst.soffset >= 128) {
        crate::hazard::note_wide_store(w, vdata as u16, s.data as u16);
    }
    Ok(())
}
