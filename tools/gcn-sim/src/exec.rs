//! Executes wave64 workgroups of a decoded kernel against a simulated device memory.
//!
//! Model (chosen so that every legal gfx942 schedule gives the same answer, and illegal ones
//! are reported instead of silently working):
//! - Memory operations take effect at issue, in program order per wave. The registers a load
//!   writes are marked *pending* until an `s_waitcnt` covers the load; reading or overwriting a
//!   pending register is a hazard. VMEM loads/stores retire in order on `vmcnt`; LDS ops retire in
//!   order on `lgkmcnt`; SMEM loads may return out of order, so only `lgkmcnt(0)` covers them.
//! - Waves of a workgroup run one after another until each reaches `s_barrier` or `s_endpgm`;
//!   a barrier releases when every live wave has arrived. Waves exchange data only through LDS
//!   and global memory, so this interleaving is one the hardware may choose; a barrier reached
//!   with LDS stores not yet waited for (`lgkmcnt`) is a hazard, because on hardware the other
//!   waves could read LDS before those stores land. Two waves touching the same LDS dword
//!   between two barrier releases, one of them writing, is reported as an LDS race (the order
//!   of waves between barriers is not defined on hardware).
//! - An atomic issued while earlier global accesses of the wave are outstanding is reported:
//!   the kernels publish partial results with a counter, which needs the release.
//! - Workgroups run sequentially in dispatch order (x fastest).
//! - Transcendentals return correctly rounded results (computed in f64, rounded once to f32):
//!   the ISA documents `v_exp_f32`/`v_log_f32`/`v_rcp_f32`/`v_rsq_f32`/`v_sqrt_f32` as accurate to
//!   about 1 ULP, so a kernel that passes here with a tolerance well above 1 ULP per operation
//!   also passes on hardware. Denormals are kept (the kernels set f32 denorm mode 3).

use crate::decode::{full_mnemonic, Enc, Inst, Op};
use crate::elf::Kernel;
use crate::SimError;

const VCC: usize = 106;
const M0: usize = 124;
const EXEC: usize = 126;

/// Simulated global memory: named byte buffers, each at its own 4 GiB-aligned base address so
/// that any address maps to at most one buffer and anything else is an out-of-bounds access.
#[derive(Debug, Default, Clone)]
pub struct Memory {
    bufs: Vec<(String, Vec<u8>)>,
}

impl Memory {
    pub fn new() -> Self {
        Self::default()
    }
    /// Adds a buffer and returns its device address.
    pub fn alloc(&mut self, name: &str, bytes: Vec<u8>) -> u64 {
        self.bufs.push((name.to_string(), bytes));
        (self.bufs.len() as u64) << 32
    }
    /// Bytes of the buffer at `addr` (its base address).
    pub fn bytes(&self, addr: u64) -> &[u8] {
        &self.bufs[(addr >> 32) as usize - 1].1
    }
    pub fn bytes_mut(&mut self, addr: u64) -> &mut [u8] {
        &mut self.bufs[(addr >> 32) as usize - 1].1
    }
    fn slice(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let idx = (addr >> 32) as usize;
        let off = (addr & 0xffff_ffff) as usize;
        let buf = &mut self.bufs.get_mut(idx.checked_sub(1)?)?.1;
        buf.get_mut(off..off.checked_add(len)?)
    }
    fn describe(&self, addr: u64) -> String {
        let idx = (addr >> 32) as usize;
        match idx.checked_sub(1).and_then(|i| self.bufs.get(i)) {
            Some((name, b)) => format!("offset {} of buffer `{name}` ({} bytes)", addr & 0xffff_ffff, b.len()),
            None => format!("address 0x{addr:x}, in no buffer"),
        }
    }
}

/// What one launch executed (wave-level instruction counts and bytes moved).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub waves: u64,
    pub salu: u64,
    pub valu: u64,
    pub smem: u64,
    pub vmem_load: u64,
    pub vmem_store: u64,
    pub lds: u64,
    pub branch: u64,
    /// Global bytes loaded / stored by active lanes.
    pub global_bytes_read: u64,
    pub global_bytes_written: u64,
}

impl Stats {
    pub fn instructions(&self) -> u64 {
        self.salu + self.valu + self.smem + self.vmem_load + self.vmem_store + self.lds + self.branch
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Counter {
    Vm,
    Lds,
    Smem,
}

/// Marks a register as written by an outstanding memory op: (counter, issue sequence).
#[derive(Clone, Copy)]
struct Pending {
    counter: Counter,
    seq: u64,
    offset: u32,
}

struct Wave {
    s: [u32; 128],
    scc: bool,
    v: Vec<[u32; 64]>,
    pc: usize,
    done: bool,
    at_barrier: bool,
    spend: Vec<Option<Pending>>,
    vpend: Vec<Option<Pending>>,
    npending: usize,
    issued: [u64; 3],
    retired: [u64; 3],
    lds_stores_unwaited: u64,
    /// Wait-state clock: +1 per instruction issued, +N for `s_nop N`'s extra states.
    clock: u64,
    /// Clock (+1; 0 = never) at which a VALU last wrote each SGPR code / VGPR, and whether the
    /// VGPR writer was a transcendental: the inputs of the gfx94x manual wait-state rules.
    sgpr_valu_write: [u64; 128],
    vgpr_valu_write: Vec<(u64, bool)>,
}

fn cidx(c: Counter) -> usize {
    match c {
        Counter::Vm => 0,
        Counter::Lds => 1,
        Counter::Smem => 2,
    }
}

/// A launch geometry.
#[derive(Debug, Clone, Copy)]
pub struct Launch {
    /// Workgroups in x, y, z.
    pub grid: [u32; 3],
    /// Work-items per workgroup in x, y, z.
    pub block: [u32; 3],
}

/// Race bookkeeping of one LDS dword within the current barrier epoch.
#[derive(Clone, Copy, Default)]
struct LdsWord {
    writer: u8,
    write_epoch: u32,
    readers: u16,
    read_epoch: u32,
}

struct Ctx<'a> {
    k: &'a Kernel,
    mem: &'a mut Memory,
    lds: Vec<u8>,
    /// Per LDS dword: who last wrote it and who read it, per barrier epoch (race detection).
    lds_meta: Vec<LdsWord>,
    /// Barrier generation of the workgroup: waves only synchronise at barrier releases.
    epoch: u32,
    stats: Stats,
    wg: [u32; 3],
    wave_id: usize,
}

impl Ctx<'_> {
    fn err(&self, inst: &Inst, what: impl Into<String>) -> SimError {
        SimError::Hazard {
            kernel: self.k.name.clone(),
            workgroup: self.wg,
            wave: self.wave_id,
            offset: inst.offset,
            inst: full_mnemonic(inst),
            what: what.into(),
        }
    }
}

/// Runs `kernel` over the whole grid. `kernarg` is the address of the kernarg buffer in `mem`.
pub fn launch(kernel: &Kernel, launch: Launch, kernarg: u64, mem: &mut Memory) -> Result<Stats, SimError> {
    let threads = launch.block.iter().map(|&b| b as u64).product::<u64>();
    if threads == 0 || threads > 1024 || launch.grid.contains(&0) {
        return Err(SimError::Launch(format!("{}: bad launch {:?}", kernel.name, launch)));
    }
    if let Some(max) = kernel.max_flat_workgroup_size {
        if threads > max {
            return Err(SimError::Launch(format!(
                "{}: {threads} threads > max_flat_workgroup_size {max}",
                kernel.name
            )));
        }
    }
    if kernel.private_bytes != 0 {
        return Err(SimError::Launch(format!("{}: scratch is not simulated", kernel.name)));
    }
    // Dispatch packet (hsa_kernel_dispatch_packet_t) for kernels that ask for the dispatch ptr.
    let mut packet = vec![0u8; 64];
    for d in 0..3 {
        packet[4 + 2 * d..6 + 2 * d].copy_from_slice(&(launch.block[d] as u16).to_le_bytes());
        packet[12 + 4 * d..16 + 4 * d].copy_from_slice(&(launch.block[d] * launch.grid[d]).to_le_bytes());
    }
    packet[28..32].copy_from_slice(&kernel.lds_bytes.to_le_bytes());
    packet[40..48].copy_from_slice(&kernarg.to_le_bytes());
    let packet_addr = mem.alloc("dispatch_packet", packet);

    let mut stats = Stats::default();
    for z in 0..launch.grid[2] {
        for y in 0..launch.grid[1] {
            for x in 0..launch.grid[0] {
                let mut ctx = Ctx {
                    k: kernel,
                    mem,
                    lds: vec![0; kernel.lds_bytes as usize],
                    lds_meta: vec![LdsWord::default(); kernel.lds_bytes.div_ceil(4) as usize],
                    epoch: 1,
                    stats: Stats::default(),
                    wg: [x, y, z],
                    wave_id: 0,
                };
                run_workgroup(&mut ctx, launch, kernarg, packet_addr)?;
                let s = ctx.stats;
                stats.waves += s.waves;
                stats.salu += s.salu;
                stats.valu += s.valu;
                stats.smem += s.smem;
                stats.vmem_load += s.vmem_load;
                stats.vmem_store += s.vmem_store;
                stats.lds += s.lds;
                stats.branch += s.branch;
                stats.global_bytes_read += s.global_bytes_read;
                stats.global_bytes_written += s.global_bytes_written;
            }
        }
    }
    Ok(stats)
}

fn run_workgroup(ctx: &mut Ctx, l: Launch, kernarg: u64, packet: u64) -> Result<(), SimError> {
    let k = ctx.k;
    let threads = (l.block[0] * l.block[1] * l.block[2]) as usize;
    let nwaves = threads.div_ceil(64);
    let mut waves = Vec::with_capacity(nwaves);
    for w in 0..nwaves {
        let mut wave = Wave {
            s: [0; 128],
            scc: false,
            v: vec![[0u32; 64]; k.arch_vgprs as usize],
            pc: 0,
            done: false,
            at_barrier: false,
            spend: vec![None; 128],
            vpend: vec![None; k.arch_vgprs as usize],
            npending: 0,
            issued: [0; 3],
            retired: [0; 3],
            lds_stores_unwaited: 0,
            clock: 0,
            sgpr_valu_write: [0; 128],
            vgpr_valu_write: vec![(0, false); k.arch_vgprs as usize],
        };
        // User SGPRs in the order the code-properties bits enable them (AMDGPUUsage).
        let mut sp = 0usize;
        let props = k.code_props;
        let mut put64 = |w: &mut Wave, v: u64| {
            w.s[sp] = v as u32;
            w.s[sp + 1] = (v >> 32) as u32;
            sp += 2;
        };
        if props & 1 != 0 {
            return Err(SimError::Launch(format!("{}: private segment buffer is not simulated", k.name)));
        }
        if props & 2 != 0 {
            put64(&mut wave, packet);
        }
        if props & 4 != 0 {
            return Err(SimError::Launch(format!("{}: queue ptr is not simulated", k.name)));
        }
        if props & 8 != 0 {
            put64(&mut wave, kernarg);
        }
        if props & 0x70 != 0 {
            return Err(SimError::Launch(format!("{}: dispatch id / flat scratch init are not simulated", k.name)));
        }
        let user = ((k.rsrc2 >> 1) & 0x1f) as usize;
        if user != sp {
            return Err(SimError::Launch(format!("{}: USER_SGPR_COUNT {user} but {sp} user SGPRs enabled", k.name)));
        }
        for d in 0..3 {
            if k.rsrc2 & (1 << (7 + d)) != 0 {
                wave.s[sp] = ctx.wg[d];
                sp += 1;
            }
        }
        if k.rsrc2 & (1 << 10) != 0 {
            return Err(SimError::Launch(format!("{}: workgroup info SGPR is not simulated", k.name)));
        }
        // v0 = packed work-item ids (x | y << 10 | z << 20); EXEC = the lanes that exist.
        let mut exec = 0u64;
        for lane in 0..64 {
            let t = w * 64 + lane;
            if t < threads {
                exec |= 1 << lane;
                let x = t as u32 % l.block[0];
                let y = (t as u32 / l.block[0]) % l.block[1];
                let z = t as u32 / (l.block[0] * l.block[1]);
                wave.v[0][lane] = x | (y << 10) | (z << 20);
            }
        }
        wave.s[EXEC] = exec as u32;
        wave.s[EXEC + 1] = (exec >> 32) as u32;
        waves.push(wave);
    }
    ctx.stats.waves += nwaves as u64;
    let mut budget: u64 = 2_000_000_000;
    loop {
        let mut progressed = false;
        for (wi, wave) in waves.iter_mut().enumerate() {
            if wave.done || wave.at_barrier {
                continue;
            }
            ctx.wave_id = wi;
            run_wave(ctx, wave, &mut budget)?;
            progressed = true;
        }
        if waves.iter().all(|w| w.done) {
            return Ok(());
        }
        if waves.iter().all(|w| w.done || w.at_barrier) {
            for w in waves.iter_mut() {
                w.at_barrier = false;
            }
            ctx.epoch += 1;
        } else if !progressed {
            return Err(SimError::Launch(format!("{}: workgroup deadlocked", k.name)));
        }
    }
}

#[inline]
fn f(x: u32) -> f32 {
    f32::from_bits(x)
}

fn run_wave(ctx: &mut Ctx, w: &mut Wave, budget: &mut u64) -> Result<(), SimError> {
    let k = ctx.k;
    loop {
        if *budget == 0 {
            let inst = &k.insts[w.pc.min(k.insts.len() - 1)];
            return Err(ctx.err(inst, "instruction budget exhausted (infinite loop?)"));
        }
        *budget -= 1;
        let Some(inst) = k.insts.get(w.pc) else {
            return Err(SimError::Launch(format!("{}: ran off the end of the code", k.name)));
        };
        let inst = *inst;
        w.pc += 1;
        if w.npending > 0 {
            check_pending(ctx, w, &inst, &k.uses[w.pc - 1])?;
        }
        check_wait_states(ctx, w, &inst)?;
        w.clock += 1;
        if inst.op == Op::SNop {
            w.clock += (inst.imm as u64) & 0xf;
        }
        match inst.enc {
            Enc::Sopp => {
                if exec_sopp(ctx, w, &inst)? {
                    return Ok(());
                }
            }
            Enc::Sop1 | Enc::Sop2 | Enc::Sopk | Enc::Sopc => {
                ctx.stats.salu += 1;
                exec_salu(ctx, w, &inst)?;
            }
            Enc::Smem => exec_smem(ctx, w, &inst)?,
            Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => {
                ctx.stats.valu += 1;
                exec_valu(ctx, w, &inst)?;
                note_valu_writes(w, &inst);
            }
            Enc::Ds => exec_ds(ctx, w, &inst)?,
            Enc::Global => exec_global(ctx, w, &inst)?,
            // Cache write-back / invalidate: memory here is coherent, so these only order.
            Enc::Mubuf => {}
        }
    }
}

fn is_trans(op: Op) -> bool {
    matches!(op, Op::VExpF32 | Op::VLogF32 | Op::VRcpF32 | Op::VRsqF32 | Op::VSqrtF32)
}

/// The gfx94x (CDNA3) wait states software must insert (`s_nop`), from the ISA's table of
/// manually inserted wait states (cross-checked against AMD's rocRoller scheduler rules):
/// - a VALU write of an SGPR (incl. VCC) read by a VMEM instruction: 5;
/// - v_readfirstlane / v_cmp / v_add_co (VALU SGPR writers) followed by a VALU reading that SGPR
///   as an operand (a carry-in is exempt): 2;
/// - a VALU write of a VGPR read by v_readfirstlane: 1;
/// - a transcendental (v_exp/log/rcp/rsq/sqrt) result read by a non-transcendental VALU: 1.
///
/// Wait states are counted along the executed path (instructions issued in between, `s_nop N`
/// counting N + 1), so branches are handled exactly.
fn check_wait_states(ctx: &Ctx, w: &Wave, inst: &Inst) -> Result<(), SimError> {
    let now = w.clock + 1;
    let gap = |written: u64| if written == 0 { u64::MAX } else { now - written - 1 };
    let sgprs_of = |code: u16, n: u16| (code..code + n).filter(|&c| c < 128);
    let fail = |what: String| Err(ctx.err(inst, what));
    match inst.enc {
        Enc::Global => {
            let saddr = inst.src[2];
            if saddr != 0x7f {
                for r in sgprs_of(saddr, 2) {
                    let g = gap(w.sgpr_valu_write[r as usize]);
                    if g < 5 {
                        return fail(format!("VMEM reads s{r} {g} wait states after a VALU wrote it (gfx94x needs 5)"));
                    }
                }
            }
        }
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => {
            let nsrc = match inst.op {
                Op::VFmaF32
                | Op::VMadU32U24
                | Op::VBfeU32
                | Op::VMax3F32
                | Op::VLshlAddU32
                | Op::VAddLshlU32
                | Op::VAdd3U32
                | Op::VFmacF32
                | Op::VCndmaskB32 => 3,
                Op::VAddcCoU32 => 2, // src2 is a carry-in: exempt
                Op::VMovB32
                | Op::VReadfirstlaneB32
                | Op::VCvtF32I32
                | Op::VCvtF32U32
                | Op::VCvtU32F32
                | Op::VExpF32
                | Op::VLogF32
                | Op::VRcpF32
                | Op::VRsqF32
                | Op::VSqrtF32 => 1,
                _ => 2,
            };
            for i in 0..nsrc {
                let code = inst.src[i];
                if code >= 256 {
                    let (written, trans) = w.vgpr_valu_write.get(code as usize - 256).copied().unwrap_or((0, false));
                    let g = gap(written);
                    if inst.op == Op::VReadfirstlaneB32 && g < 1 {
                        return fail(format!(
                            "v_readfirstlane reads v{} right after a VALU wrote it (gfx94x needs 1)",
                            code - 256
                        ));
                    }
                    if trans && !is_trans(inst.op) && g < 1 {
                        return fail(format!(
                            "reads v{} right after a transcendental wrote it (gfx94x needs 1 wait state)",
                            code - 256
                        ));
                    }
                } else {
                    let n = if i == 2 && inst.op == Op::VCndmaskB32 { 2 } else { 1 };
                    for r in sgprs_of(code, n) {
                        let g = gap(w.sgpr_valu_write[r as usize]);
                        if g < 2 {
                            return fail(format!("reads s{r} {g} wait states after a VALU wrote it (gfx94x needs 2)"));
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// Records what a VALU instruction wrote, for [`check_wait_states`].
fn note_valu_writes(w: &mut Wave, inst: &Inst) {
    let now = w.clock; // already advanced past this instruction
    let sgpr = |code: u16, n: u16, w: &mut Wave| {
        for r in code..(code + n).min(128) {
            w.sgpr_valu_write[r as usize] = now;
        }
    };
    match inst.op {
        Op::VReadfirstlaneB32 => sgpr(inst.dst, 1, w),
        _ if inst.enc == Enc::Vopc => sgpr(inst.sdst, 2, w),
        _ => {
            if matches!(inst.op, Op::VAddCoU32 | Op::VAddcCoU32) {
                sgpr(inst.sdst, 2, w);
            }
            if inst.dst >= 256 {
                let n = if inst.op == Op::VLshlrevB64 { 2 } else { 1 };
                for v in inst.dst - 256..inst.dst - 256 + n {
                    if let Some(slot) = w.vgpr_valu_write.get_mut(v as usize) {
                        *slot = (now, is_trans(inst.op));
                    }
                }
            }
        }
    }
}

/// Registers an instruction reads and writes (as (is_vgpr, first, count)), for the hazard and
/// register-limit checks.
pub(crate) fn operands(inst: &Inst) -> RegUse {
    let mut rd = Vec::with_capacity(4);
    let mut wr = Vec::with_capacity(2);
    let reg = |code: u16, n: u16| -> Option<(bool, u16, u16)> {
        if code >= 256 {
            Some((true, code - 256, n))
        } else if code <= 101 || code == VCC as u16 || code == M0 as u16 || code == EXEC as u16 {
            Some((false, code, n))
        } else {
            None
        }
    };
    use Op::*;
    let wide_s = |op: Op| {
        matches!(op, SMovB64 | SAndB64 | SOrB64 | SXorB64 | SAndn2B64 | SCselectB64 | SAndSaveexecB64 | SBcnt1I32B64)
    };
    match inst.enc {
        Enc::Sop1 | Enc::Sop2 | Enc::Sopc => {
            let n = if wide_s(inst.op) || matches!(inst.op, SLshlB64 | SLshrB64) { 2 } else { 1 };
            rd.extend(reg(inst.src[0], n));
            if inst.enc != Enc::Sop1 {
                let n1 = if matches!(inst.op, SLshlB64 | SLshrB64) { 1 } else { n };
                rd.extend(reg(inst.src[1], n1));
            }
            if inst.enc != Enc::Sopc {
                let nd = if inst.op == SBcnt1I32B64 { 1 } else { n };
                wr.extend(reg(inst.dst, nd));
            }
            if inst.op == SAndSaveexecB64 {
                rd.push((false, EXEC as u16, 2));
                wr.push((false, EXEC as u16, 2));
            }
        }
        Enc::Sopk => {
            if inst.op != SMovkI32 {
                rd.extend(reg(inst.dst, 1));
            }
            wr.extend(reg(inst.dst, 1));
        }
        Enc::Sopp => {}
        Enc::Smem => {
            rd.extend(reg(inst.src[0], 2));
            if inst.soffset_reg {
                rd.extend(reg(inst.imm as u16, 1));
            }
            let n = match inst.op {
                SLoadDword => 1,
                SLoadDwordx2 => 2,
                SLoadDwordx4 => 4,
                SLoadDwordx8 => 8,
                _ => 16,
            };
            wr.extend(reg(inst.dst, n));
        }
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => {
            let nsrc = match inst.op {
                VMovB32 | VReadfirstlaneB32 | VCvtF32I32 | VCvtF32U32 | VCvtU32F32 | VExpF32 | VLogF32 | VRcpF32
                | VRsqF32 | VSqrtF32 => 1,
                VFmaF32 | VMadU32U24 | VBfeU32 | VMax3F32 | VLshlAddU32 | VAddLshlU32 | VAdd3U32 | VFmacF32 => 3,
                VAddcCoU32 | VCndmaskB32 => 3,
                _ => 2,
            };
            for i in 0..nsrc {
                let wide =
                    (i == 2 && matches!(inst.op, VAddcCoU32 | VCndmaskB32)) || (i == 1 && inst.op == VLshlrevB64);
                let n = if wide { 2 } else { 1 };
                rd.extend(reg(inst.src[i], n));
            }
            if inst.enc == Enc::Vopc {
                wr.extend(reg(inst.sdst, 2));
                if matches!(inst.op, VCmpxLtU32 | VCmpxGtU32) {
                    wr.push((false, EXEC as u16, 2));
                }
            } else {
                wr.extend(reg(inst.dst, if inst.op == VLshlrevB64 { 2 } else { 1 }));
                if matches!(inst.op, VAddCoU32 | VAddcCoU32) {
                    wr.extend(reg(inst.sdst, 2));
                }
            }
            if inst.op != VReadfirstlaneB32 {
                rd.push((false, EXEC as u16, 2));
            }
        }
        Enc::Ds => {
            let (addr, d0, d1, dst) = (inst.src[0], inst.src[1], inst.src[2], inst.dst);
            rd.extend(reg(addr, 1));
            match inst.op {
                DsWriteB32 | DsAddU32 => rd.extend(reg(d0, 1)),
                DsWriteB64 => rd.extend(reg(d0, 2)),
                DsWriteB128 => rd.extend(reg(d0, 4)),
                DsWrite2B32 => {
                    rd.extend(reg(d0, 1));
                    rd.extend(reg(d1, 1));
                }
                DsReadB32 => wr.extend(reg(dst, 1)),
                DsReadB64 | DsRead2B32 => wr.extend(reg(dst, 2)),
                DsReadB128 => wr.extend(reg(dst, 4)),
                _ => {}
            }
            rd.push((false, EXEC as u16, 2));
        }
        Enc::Global => {
            let saddr = inst.src[2];
            rd.extend(reg(inst.src[0], if saddr == 0x7f { 2 } else { 1 }));
            if saddr != 0x7f {
                rd.extend(reg(saddr, 2));
            }
            let n = match inst.op {
                GLoadDwordx2 | GStoreDwordx2 => 2,
                GLoadDwordx4 | GStoreDwordx4 => 4,
                _ => 1,
            };
            match inst.op {
                GStoreShort | GStoreDword | GStoreDwordx2 | GStoreDwordx4 => rd.extend(reg(inst.src[1], n)),
                GAtomicAdd => {
                    rd.extend(reg(inst.src[1], 1));
                    if inst.glc {
                        wr.extend(reg(inst.dst, 1));
                    }
                }
                _ => wr.extend(reg(inst.dst, n)),
            }
            rd.push((false, EXEC as u16, 2));
        }
        Enc::Mubuf => {}
    }
    (rd, wr)
}

/// Checks every instruction's registers against the descriptor's allocation (a static
/// property, so it is checked once at load time for all code, reachable or not).
pub(crate) fn check_limits(k: &Kernel) -> Result<(), SimError> {
    for (inst, (rd, wr)) in k.insts.iter().zip(&k.uses) {
        for (is_v, first, n) in rd.iter().chain(wr.iter()) {
            let what = if *is_v {
                if (first + n) as u32 <= k.arch_vgprs {
                    continue;
                }
                format!(
                    "uses v{} but the descriptor declares {} arch VGPRs (accum_offset)",
                    first + n - 1,
                    k.arch_vgprs
                )
            } else {
                if *first > 101 || (first + n) as u32 <= k.sgprs {
                    continue;
                }
                format!("uses s{} but the descriptor allocates {} SGPRs", first + n - 1, k.sgprs)
            };
            return Err(SimError::Hazard {
                kernel: k.name.clone(),
                workgroup: [0; 3],
                wave: 0,
                offset: inst.offset,
                inst: full_mnemonic(inst),
                what,
            });
        }
    }
    Ok(())
}

/// Registers one instruction reads and writes: (is_vgpr, first register, count).
pub type RegUse = (Vec<(bool, u16, u16)>, Vec<(bool, u16, u16)>);

fn check_pending(ctx: &Ctx, w: &mut Wave, inst: &Inst, uses: &RegUse) -> Result<(), SimError> {
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

fn mark_pending(w: &mut Wave, is_v: bool, first: usize, n: usize, counter: Counter, offset: u32) {
    let seq = w.issued[cidx(counter)];
    for r in first..first + n {
        let slot = if is_v { &mut w.vpend[r] } else { &mut w.spend[r] };
        if slot.is_none() {
            w.npending += 1;
        }
        *slot = Some(Pending { counter, seq, offset });
    }
}

fn exec_sopp(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<bool, SimError> {
    let target = |inst: &Inst| -> Result<usize, SimError> {
        let byte = inst.offset as i64 + 4 + inst.imm as i64 * 4;
        ctx.k
            .index_of
            .get(byte as usize)
            .copied()
            .filter(|&i| byte >= 0 && i != u32::MAX)
            .map(|i| i as usize)
            .ok_or_else(|| ctx.err(inst, format!("branch to +0x{byte:x}, which is not an instruction")))
    };
    let exec = w.s[EXEC] as u64 | (w.s[EXEC + 1] as u64) << 32;
    let vcc = w.s[VCC] as u64 | (w.s[VCC + 1] as u64) << 32;
    let take = match inst.op {
        Op::SEndpgm => {
            ctx.stats.branch += 1;
            if w.vpend.iter().any(|p| p.is_some_and(|p| p.counter == Counter::Vm && p.seq > w.retired[0])) {
                // Loads still in flight at exit are harmless on hardware but always a bug here.
                return Err(ctx.err(inst, "s_endpgm with loads never waited for"));
            }
            w.done = true;
            return Ok(true);
        }
        Op::SBarrier => {
            ctx.stats.branch += 1;
            if w.lds_stores_unwaited > w.retired[1] {
                return Err(ctx.err(inst, "s_barrier with LDS stores not covered by s_waitcnt lgkmcnt(0)"));
            }
            w.at_barrier = true;
            return Ok(true);
        }
        Op::SWaitcnt => {
            let imm = inst.imm as u32 & 0xffff;
            let vm = (imm & 0xf) | ((imm >> 14) & 3) << 4;
            let lgkm = (imm >> 8) & 0xf;
            w.retired[0] = w.retired[0].max(w.issued[0].saturating_sub(vm as u64));
            w.retired[1] = w.retired[1].max(w.issued[1].saturating_sub(lgkm as u64));
            if lgkm == 0 {
                w.retired[2] = w.issued[2];
            }
            return Ok(false);
        }
        Op::SNop | Op::SSleep | Op::SSetprio => return Ok(false),
        Op::SBranch => true,
        Op::SCbranchScc0 => !w.scc,
        Op::SCbranchScc1 => w.scc,
        Op::SCbranchVccz => vcc == 0,
        Op::SCbranchVccnz => vcc != 0,
        Op::SCbranchExecz => exec == 0,
        Op::SCbranchExecnz => exec != 0,
        _ => return Err(ctx.err(inst, "not a SOPP op")),
    };
    if take {
        w.pc = target(inst)?;
    }
    ctx.stats.branch += 1;
    Ok(false)
}

fn sread(w: &Wave, inst: &Inst, code: u16) -> u32 {
    match code {
        0..=127 => w.s[code as usize],
        128 => 0,
        129..=192 => (code - 128) as u32,
        193..=208 => (-((code - 192) as i32)) as u32,
        240 => 0.5f32.to_bits(),
        241 => (-0.5f32).to_bits(),
        242 => 1.0f32.to_bits(),
        243 => (-1.0f32).to_bits(),
        244 => 2.0f32.to_bits(),
        245 => (-2.0f32).to_bits(),
        246 => 4.0f32.to_bits(),
        247 => (-4.0f32).to_bits(),
        248 => 0x3e22_f983, // 1/(2*pi)
        251 => (w.s[VCC] | w.s[VCC + 1] == 0) as u32,
        252 => (w.s[EXEC] | w.s[EXEC + 1] == 0) as u32,
        253 => w.scc as u32,
        255 => inst.literal,
        _ => 0,
    }
}

fn sread64(w: &Wave, inst: &Inst, code: u16) -> u64 {
    if code <= 127 {
        w.s[code as usize] as u64 | (w.s[code as usize + 1] as u64) << 32
    } else {
        // Inline constants sign-extend to 64 bits; a literal zero-extends.
        let v = sread(w, inst, code);
        if (193..=208).contains(&code) {
            v as i32 as i64 as u64
        } else {
            v as u64
        }
    }
}

fn swrite(ctx: &Ctx, w: &mut Wave, inst: &Inst, code: u16, v: u32) -> Result<(), SimError> {
    if code > 127 || (102..=105).contains(&code) || (108..=123).contains(&code) {
        return Err(ctx.err(inst, format!("write to unsupported scalar destination {code}")));
    }
    w.s[code as usize] = v;
    Ok(())
}

fn swrite64(ctx: &Ctx, w: &mut Wave, inst: &Inst, code: u16, v: u64) -> Result<(), SimError> {
    swrite(ctx, w, inst, code, v as u32)?;
    swrite(ctx, w, inst, code + 1, (v >> 32) as u32)
}

fn exec_salu(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    let a = sread(w, inst, inst.src[0]);
    let b = sread(w, inst, inst.src[1]);
    let d = inst.dst;
    match inst.op {
        SAddU32 => {
            let (r, c) = a.overflowing_add(b);
            w.scc = c;
            swrite(ctx, w, inst, d, r)?;
        }
        SAddcU32 => {
            let r = a as u64 + b as u64 + w.scc as u64;
            w.scc = r >> 32 != 0;
            swrite(ctx, w, inst, d, r as u32)?;
        }
        SSubU32 => {
            w.scc = b > a;
            swrite(ctx, w, inst, d, a.wrapping_sub(b))?;
        }
        SAddI32 => {
            let (r, o) = (a as i32).overflowing_add(b as i32);
            w.scc = o;
            swrite(ctx, w, inst, d, r as u32)?;
        }
        SSubI32 => {
            let (r, o) = (a as i32).overflowing_sub(b as i32);
            w.scc = o;
            swrite(ctx, w, inst, d, r as u32)?;
        }
        SMinU32 => {
            w.scc = a < b;
            swrite(ctx, w, inst, d, a.min(b))?;
        }
        SMaxU32 => {
            w.scc = a > b;
            swrite(ctx, w, inst, d, a.max(b))?;
        }
        SCselectB32 => swrite(ctx, w, inst, d, if w.scc { a } else { b })?,
        SCselectB64 => {
            let (a, b) = (sread64(w, inst, inst.src[0]), sread64(w, inst, inst.src[1]));
            swrite64(ctx, w, inst, d, if w.scc { a } else { b })?;
        }
        SAndB32 | SOrB32 | SLshlB32 | SLshrB32 | SBfeU32 => {
            let r = match inst.op {
                SAndB32 => a & b,
                SOrB32 => a | b,
                SLshlB32 => a << (b & 31),
                SLshrB32 => a >> (b & 31),
                _ => {
                    let (off, width) = (b & 31, (b >> 16) & 0x7f);
                    if width == 0 {
                        0
                    } else if width >= 32 {
                        a >> off
                    } else {
                        (a >> off) & ((1u32 << width) - 1)
                    }
                }
            };
            w.scc = r != 0;
            swrite(ctx, w, inst, d, r)?;
        }
        SAndB64 | SOrB64 | SXorB64 | SAndn2B64 => {
            let (a, b) = (sread64(w, inst, inst.src[0]), sread64(w, inst, inst.src[1]));
            let r = match inst.op {
                SAndB64 => a & b,
                SOrB64 => a | b,
                SXorB64 => a ^ b,
                _ => a & !b,
            };
            w.scc = r != 0;
            swrite64(ctx, w, inst, d, r)?;
        }
        SLshlB64 | SLshrB64 => {
            let a = sread64(w, inst, inst.src[0]);
            let r = if inst.op == SLshlB64 { a << (b & 63) } else { a >> (b & 63) };
            w.scc = r != 0;
            swrite64(ctx, w, inst, d, r)?;
        }
        SMulI32 => swrite(ctx, w, inst, d, (a as i32).wrapping_mul(b as i32) as u32)?,
        SMulHiU32 => swrite(ctx, w, inst, d, ((a as u64 * b as u64) >> 32) as u32)?,
        SMovkI32 => swrite(ctx, w, inst, d, inst.imm as u32)?,
        SAddkI32 => {
            let (r, o) = (w.s[d as usize] as i32).overflowing_add(inst.imm);
            w.scc = o;
            swrite(ctx, w, inst, d, r as u32)?;
        }
        SMulkI32 => swrite(ctx, w, inst, d, (w.s[d as usize] as i32).wrapping_mul(inst.imm) as u32)?,
        SMovB32 => swrite(ctx, w, inst, d, a)?,
        SMovB64 => {
            let v = sread64(w, inst, inst.src[0]);
            swrite64(ctx, w, inst, d, v)?;
        }
        SNotB32 => {
            w.scc = !a != 0;
            swrite(ctx, w, inst, d, !a)?;
        }
        SBcnt1I32B64 => {
            let r = sread64(w, inst, inst.src[0]).count_ones();
            w.scc = r != 0;
            swrite(ctx, w, inst, d, r)?;
        }
        SFf1I32B32 => swrite(ctx, w, inst, d, if a == 0 { u32::MAX } else { a.trailing_zeros() })?,
        SAndSaveexecB64 => {
            let exec = w.s[EXEC] as u64 | (w.s[EXEC + 1] as u64) << 32;
            let s = sread64(w, inst, inst.src[0]);
            swrite64(ctx, w, inst, d, exec)?;
            let r = s & exec;
            w.s[EXEC] = r as u32;
            w.s[EXEC + 1] = (r >> 32) as u32;
            w.scc = r != 0;
        }
        SCmpEqU32 => w.scc = a == b,
        SCmpLgU32 => w.scc = a != b,
        SCmpGtU32 => w.scc = a > b,
        SCmpGeU32 => w.scc = a >= b,
        SCmpLtU32 => w.scc = a < b,
        SCmpLeU32 => w.scc = a <= b,
        SCmpLtI32 => w.scc = (a as i32) < (b as i32),
        _ => return Err(ctx.err(inst, "not a scalar ALU op")),
    }
    Ok(())
}

fn exec_smem(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    ctx.stats.smem += 1;
    let base = sread64(w, inst, inst.src[0]) & 0xffff_ffff_ffff;
    let off = if inst.soffset_reg { w.s[inst.imm as usize] as u64 } else { inst.imm as i64 as u64 };
    let n = match inst.op {
        Op::SLoadDword => 1,
        Op::SLoadDwordx2 => 2,
        Op::SLoadDwordx4 => 4,
        Op::SLoadDwordx8 => 8,
        _ => 16,
    };
    if inst.dst as usize + n > 102 || inst.dst as usize % n.min(4) != 0 {
        return Err(ctx.err(inst, "misaligned or out-of-range SMEM destination"));
    }
    let addr = base.wrapping_add(off);
    let Some(bytes) = ctx.mem.slice(addr, 4 * n) else {
        let d = ctx.mem.describe(addr);
        return Err(ctx.err(inst, format!("scalar load of {} bytes at {d} is out of bounds", 4 * n)));
    };
    let vals: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    w.s[inst.dst as usize..inst.dst as usize + n].copy_from_slice(&vals);
    w.issued[2] += 1;
    mark_pending(w, false, inst.dst as usize, n, Counter::Smem, inst.offset);
    Ok(())
}

#[inline]
fn vsrc(w: &Wave, inst: &Inst, i: usize, lane: usize) -> u32 {
    let code = inst.src[i];
    if code >= 256 {
        w.v[code as usize - 256][lane]
    } else {
        sread(w, inst, code)
    }
}

#[inline]
fn fsrc(w: &Wave, inst: &Inst, i: usize, lane: usize) -> f32 {
    let mut x = f(vsrc(w, inst, i, lane));
    if inst.abs >> i & 1 != 0 {
        x = x.abs();
    }
    if inst.neg >> i & 1 != 0 {
        x = -x;
    }
    x
}

/// Correctly rounded (up to f64 -> f32 double rounding, which changes no result by more than
/// 1 ULP) transcendental results. See the module doc for why.
fn transcendental(op: Op, x: f32) -> f32 {
    let x = x as f64;
    (match op {
        Op::VExpF32 => x.exp2(),
        Op::VLogF32 => x.log2(),
        Op::VRcpF32 => 1.0 / x,
        Op::VRsqF32 => 1.0 / x.sqrt(),
        _ => x.sqrt(),
    }) as f32
}

fn exec_valu(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    if inst.omod != 0 || inst.clamp {
        return Err(ctx.err(inst, "output modifiers (omod/clamp) are not supported"));
    }
    let int_op = !matches!(
        inst.op,
        VAddF32
            | VSubF32
            | VSubrevF32
            | VMulF32
            | VFmacF32
            | VMaxF32
            | VMinF32
            | VFmaF32
            | VMax3F32
            | VCmpLtF32
            | VCmpGtF32
            | VExpF32
            | VLogF32
            | VRcpF32
            | VRsqF32
            | VSqrtF32
            | VCvtU32F32
    );
    if int_op && (inst.neg != 0 || inst.abs != 0) {
        return Err(ctx.err(inst, "neg/abs modifiers on an integer op"));
    }
    let exec = w.s[EXEC] as u64 | (w.s[EXEC + 1] as u64) << 32;
    let dst = inst.dst as usize;
    if inst.op == VReadfirstlaneB32 {
        let lane = if exec == 0 { 0 } else { exec.trailing_zeros() as usize };
        let v = vsrc(w, inst, 0, lane);
        return swrite(ctx, w, inst, inst.dst, v);
    }
    if inst.enc == Enc::Vopc {
        let mut mask = 0u64;
        for lane in 0..64 {
            if exec >> lane & 1 == 0 {
                continue;
            }
            let r = match inst.op {
                VCmpLtF32 => fsrc(w, inst, 0, lane) < fsrc(w, inst, 1, lane),
                VCmpGtF32 => fsrc(w, inst, 0, lane) > fsrc(w, inst, 1, lane),
                _ => {
                    let (a, b) = (vsrc(w, inst, 0, lane), vsrc(w, inst, 1, lane));
                    match inst.op {
                        VCmpLtU32 | VCmpxLtU32 => a < b,
                        VCmpEqU32 => a == b,
                        VCmpLeU32 => a <= b,
                        VCmpGtU32 | VCmpxGtU32 => a > b,
                        VCmpNeU32 => a != b,
                        _ => a >= b,
                    }
                }
            };
            mask |= (r as u64) << lane;
        }
        swrite64(ctx, w, inst, inst.sdst, mask)?;
        if matches!(inst.op, VCmpxLtU32 | VCmpxGtU32) {
            w.s[EXEC] = mask as u32;
            w.s[EXEC + 1] = (mask >> 32) as u32;
        }
        return Ok(());
    }
    if dst < 256 {
        return Err(ctx.err(inst, "VALU destination is not a VGPR"));
    }
    let vd = dst - 256;
    let carry_in = if matches!(inst.op, VAddcCoU32 | VCndmaskB32) { sread64(w, inst, inst.src[2]) } else { 0 };
    let mut carry_out = 0u64;
    if inst.op == VLshlrevB64 {
        for lane in 0..64 {
            if exec >> lane & 1 != 0 {
                let sh = vsrc(w, inst, 0, lane) & 63;
                let code = inst.src[1];
                let lo = vsrc(w, inst, 1, lane) as u64;
                let hi = if code >= 256 { w.v[code as usize - 255][lane] as u64 } else { 0 };
                let r = (lo | hi << 32) << sh;
                w.v[vd][lane] = r as u32;
                w.v[vd + 1][lane] = (r >> 32) as u32;
            }
        }
        return Ok(());
    }
    for lane in 0..64 {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let r: u32 = match inst.op {
            VMovB32 => vsrc(w, inst, 0, lane),
            VCvtF32I32 => (vsrc(w, inst, 0, lane) as i32 as f32).to_bits(),
            VCvtF32U32 => (vsrc(w, inst, 0, lane) as f32).to_bits(),
            VCvtU32F32 => fsrc(w, inst, 0, lane) as u32,
            VExpF32 | VLogF32 | VRcpF32 | VRsqF32 | VSqrtF32 => {
                transcendental(inst.op, fsrc(w, inst, 0, lane)).to_bits()
            }
            VAddF32 => (fsrc(w, inst, 0, lane) + fsrc(w, inst, 1, lane)).to_bits(),
            VSubF32 => (fsrc(w, inst, 0, lane) - fsrc(w, inst, 1, lane)).to_bits(),
            VSubrevF32 => (fsrc(w, inst, 1, lane) - fsrc(w, inst, 0, lane)).to_bits(),
            VMulF32 => (fsrc(w, inst, 0, lane) * fsrc(w, inst, 1, lane)).to_bits(),
            VMaxF32 => fsrc(w, inst, 0, lane).max(fsrc(w, inst, 1, lane)).to_bits(),
            VMinF32 => fsrc(w, inst, 0, lane).min(fsrc(w, inst, 1, lane)).to_bits(),
            VFmacF32 | VFmaF32 => {
                fsrc(w, inst, 0, lane).mul_add(fsrc(w, inst, 1, lane), fsrc(w, inst, 2, lane)).to_bits()
            }
            VMax3F32 => fsrc(w, inst, 0, lane).max(fsrc(w, inst, 1, lane)).max(fsrc(w, inst, 2, lane)).to_bits(),
            _ => {
                let a = vsrc(w, inst, 0, lane);
                let b = vsrc(w, inst, 1, lane);
                match inst.op {
                    VCndmaskB32 => {
                        if carry_in >> lane & 1 != 0 {
                            b
                        } else {
                            a
                        }
                    }
                    VMulU32U24 => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff),
                    VMinU32 => a.min(b),
                    VMaxU32 => a.max(b),
                    VLshrrevB32 => b >> (a & 31),
                    VLshlrevB32 => b << (a & 31),
                    VAndB32 => a & b,
                    VOrB32 => a | b,
                    VXorB32 => a ^ b,
                    VAddU32 => a.wrapping_add(b),
                    VSubU32 => a.wrapping_sub(b),
                    VSubrevU32 => b.wrapping_sub(a),
                    VAddCoU32 => {
                        let (r, c) = a.overflowing_add(b);
                        carry_out |= (c as u64) << lane;
                        r
                    }
                    VAddcCoU32 => {
                        let r = a as u64 + b as u64 + (carry_in >> lane & 1);
                        carry_out |= (r >> 32) << lane;
                        r as u32
                    }
                    VMulLoU32 => a.wrapping_mul(b),
                    VMulHiU32 => ((a as u64 * b as u64) >> 32) as u32,
                    _ => {
                        let c = vsrc(w, inst, 2, lane);
                        match inst.op {
                            VMadU32U24 => (a & 0xff_ffff).wrapping_mul(b & 0xff_ffff).wrapping_add(c),
                            VBfeU32 => {
                                let (off, width) = (b & 31, c & 31);
                                if width == 0 {
                                    0
                                } else {
                                    (a >> off) & ((1u64 << width) - 1) as u32
                                }
                            }
                            VLshlAddU32 => (a << (b & 31)).wrapping_add(c),
                            VAddLshlU32 => a.wrapping_add(b) << (c & 31),
                            VAdd3U32 => a.wrapping_add(b).wrapping_add(c),
                            _ => return Err(ctx.err(inst, "op not implemented in the VALU")),
                        }
                    }
                }
            }
        };
        w.v[vd][lane] = r;
    }
    if matches!(inst.op, VAddCoU32 | VAddcCoU32) {
        swrite64(ctx, w, inst, inst.sdst, carry_out)?;
    }
    Ok(())
}

fn exec_ds(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    ctx.stats.lds += 1;
    let exec = w.s[EXEC] as u64 | (w.s[EXEC + 1] as u64) << 32;
    let (a, d0, d1, dst) =
        (inst.src[0] as usize - 256, inst.src[1] as usize - 256, inst.src[2] as usize - 256, inst.dst as usize - 256);
    let (o0, o1) = ((inst.imm & 0xff) as u32, ((inst.imm >> 8) & 0xff) as u32);
    let lds_len = ctx.lds.len();
    for lane in 0..64 {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let base = w.v[a][lane];
        let accesses: &[(u32, u32)] = match inst.op {
            DsWrite2B32 | DsRead2B32 => &[(base.wrapping_add(o0 * 4), 4), (base.wrapping_add(o1 * 4), 4)],
            DsWriteB64 | DsReadB64 => &[(base.wrapping_add(inst.imm as u32), 8)],
            DsWriteB128 | DsReadB128 => &[(base.wrapping_add(inst.imm as u32), 16)],
            _ => &[(base.wrapping_add(inst.imm as u32), 4)],
        };
        let is_write = matches!(inst.op, DsWriteB32 | DsWrite2B32 | DsWriteB64 | DsWriteB128);
        for &(addr, len) in accesses {
            // ds_read/write_b64/b128 need their natural alignment (8 / 16 bytes) as well.
            if addr as usize + len as usize > lds_len || addr % len.min(16) != 0 {
                return Err(ctx.err(
                    inst,
                    format!("LDS access of {len} bytes at {addr} (lane {lane}) outside the declared {lds_len} bytes"),
                ));
            }
            // Waves of a workgroup run in no fixed order between barriers: another wave's
            // access to the same dword in the same epoch is a race (ds_add is atomic: exempt).
            if inst.op != DsAddU32 {
                let (me, epoch) = (ctx.wave_id as u8, ctx.epoch);
                for word in addr / 4..(addr + len) / 4 {
                    let m = &mut ctx.lds_meta[word as usize];
                    let raced = if m.write_epoch == epoch && m.writer != me {
                        Some(format!("wave {} wrote it", m.writer))
                    } else if is_write && m.read_epoch == epoch && m.readers & !(1u16 << me) != 0 {
                        Some(format!("wave(s) {:#06b} read it", m.readers & !(1u16 << me)))
                    } else {
                        None
                    };
                    if let Some(other) = raced {
                        return Err(ctx.err(
                            inst,
                            format!("LDS race at byte {} (lane {lane}): {other} since the last s_barrier", word * 4),
                        ));
                    }
                    if is_write {
                        m.writer = me;
                        m.write_epoch = epoch;
                    } else {
                        if m.read_epoch != epoch {
                            m.readers = 0;
                            m.read_epoch = epoch;
                        }
                        m.readers |= 1 << me;
                    }
                }
            }
        }
        let rd = |lds: &[u8], addr: u32| {
            let p = addr as usize;
            u32::from_le_bytes([lds[p], lds[p + 1], lds[p + 2], lds[p + 3]])
        };
        let wr =
            |lds: &mut [u8], addr: u32, v: u32| lds[addr as usize..addr as usize + 4].copy_from_slice(&v.to_le_bytes());
        match inst.op {
            DsWriteB32 => wr(&mut ctx.lds, accesses[0].0, w.v[d0][lane]),
            DsWriteB64 | DsWriteB128 => {
                for q in 0..accesses[0].1 / 4 {
                    wr(&mut ctx.lds, accesses[0].0 + 4 * q, w.v[d0 + q as usize][lane]);
                }
            }
            DsWrite2B32 => {
                wr(&mut ctx.lds, accesses[0].0, w.v[d0][lane]);
                wr(&mut ctx.lds, accesses[1].0, w.v[d1][lane]);
            }
            DsAddU32 => {
                let v = rd(&ctx.lds, accesses[0].0).wrapping_add(w.v[d0][lane]);
                wr(&mut ctx.lds, accesses[0].0, v);
            }
            DsReadB32 => w.v[dst][lane] = rd(&ctx.lds, accesses[0].0),
            DsReadB64 | DsReadB128 => {
                for q in 0..accesses[0].1 / 4 {
                    w.v[dst + q as usize][lane] = rd(&ctx.lds, accesses[0].0 + 4 * q);
                }
            }
            DsRead2B32 => {
                w.v[dst][lane] = rd(&ctx.lds, accesses[0].0);
                w.v[dst + 1][lane] = rd(&ctx.lds, accesses[1].0);
            }
            _ => return Err(ctx.err(inst, "not a DS op")),
        }
    }
    w.issued[1] += 1;
    match inst.op {
        DsReadB32 => mark_pending(w, true, dst, 1, Counter::Lds, inst.offset),
        DsReadB64 | DsRead2B32 => mark_pending(w, true, dst, 2, Counter::Lds, inst.offset),
        DsReadB128 => mark_pending(w, true, dst, 4, Counter::Lds, inst.offset),
        _ => w.lds_stores_unwaited = w.issued[1],
    }
    Ok(())
}

fn exec_global(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    let exec = w.s[EXEC] as u64 | (w.s[EXEC + 1] as u64) << 32;
    let (va, vdata, vdst) = (inst.src[0] as usize - 256, inst.src[1] as usize - 256, inst.dst as usize - 256);
    let saddr = inst.src[2];
    let base = if saddr == 0x7f { 0 } else { sread64(w, inst, saddr) };
    let (n, is_store) = match inst.op {
        GLoadUshort => (0, false),
        GLoadDword => (1, false),
        GLoadDwordx2 => (2, false),
        GLoadDwordx4 => (4, false),
        GStoreShort => (0, true),
        GStoreDword => (1, true),
        GStoreDwordx2 => (2, true),
        GStoreDwordx4 => (4, true),
        _ => (1, true),
    };
    let bytes = if n == 0 { 2 } else { 4 * n };
    if inst.op == GAtomicAdd && w.issued[0] > w.retired[0] {
        // The kernels use atomics to publish results (a counter after partial sums): every
        // earlier access must have completed (s_waitcnt vmcnt(0)) or the release is broken.
        return Err(ctx.err(inst, "atomic issued before earlier global accesses were waited for (no release)"));
    }
    if is_store {
        ctx.stats.vmem_store += 1;
    } else {
        ctx.stats.vmem_load += 1;
    }
    for lane in 0..64 {
        if exec >> lane & 1 == 0 {
            continue;
        }
        let addr = if saddr == 0x7f {
            (w.v[va][lane] as u64 | (w.v[va + 1][lane] as u64) << 32).wrapping_add(inst.imm as i64 as u64)
        } else {
            base.wrapping_add(w.v[va][lane] as u64).wrapping_add(inst.imm as i64 as u64)
        };
        if addr % (bytes.min(4) as u64) != 0 {
            return Err(ctx.err(inst, format!("misaligned global access at 0x{addr:x} (lane {lane})")));
        }
        let Some(mem) = ctx.mem.slice(addr, bytes) else {
            let d = ctx.mem.describe(addr);
            return Err(ctx.err(inst, format!("global access of {bytes} bytes at {d} (lane {lane}) is out of bounds")));
        };
        match inst.op {
            GLoadUshort => w.v[vdst][lane] = u16::from_le_bytes([mem[0], mem[1]]) as u32,
            GLoadDword | GLoadDwordx2 | GLoadDwordx4 => {
                for i in 0..n {
                    let c = &mem[4 * i..4 * i + 4];
                    w.v[vdst + i][lane] = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                }
            }
            GStoreShort => mem.copy_from_slice(&(w.v[vdata][lane] as u16).to_le_bytes()),
            GStoreDword | GStoreDwordx2 | GStoreDwordx4 => {
                for i in 0..n {
                    mem[4 * i..4 * i + 4].copy_from_slice(&w.v[vdata + i][lane].to_le_bytes());
                }
            }
            GAtomicAdd => {
                let old = u32::from_le_bytes([mem[0], mem[1], mem[2], mem[3]]);
                mem.copy_from_slice(&old.wrapping_add(w.v[vdata][lane]).to_le_bytes());
                if inst.glc {
                    w.v[vdst][lane] = old;
                }
            }
            _ => return Err(ctx.err(inst, "not a GLOBAL op")),
        }
        if is_store {
            ctx.stats.global_bytes_written += bytes as u64;
        } else {
            ctx.stats.global_bytes_read += bytes as u64;
        }
    }
    w.issued[0] += 1;
    if !is_store {
        mark_pending(w, true, vdst, n.max(1), Counter::Vm, inst.offset);
    } else if inst.op == GAtomicAdd && inst.glc {
        mark_pending(w, true, vdst, 1, Counter::Vm, inst.offset);
    }
    Ok(())
}
