//! Executes wave64 workgroups of a decoded kernel against a simulated device memory.
//!
//! Model (chosen so that every legal gfx942 schedule gives the same answer, and illegal ones
//! are reported instead of silently working):
//! - Memory operations take effect at issue, in program order per wave. The registers a load
//!   writes are marked *pending* until an `s_waitcnt` covers the load; reading or overwriting a
//!   pending register is a hazard. VMEM loads, stores and cache operations retire in order on
//!   `vmcnt`; LDS ops retire in order on `lgkmcnt`; SMEM loads may return out of order, so only
//!   `lgkmcnt(0)` covers them, and while one is outstanding an `lgkmcnt(N)` only guarantees
//!   the LDS ops it would cover with every SMEM op counted first (see [`crate::hazard`]).
//! - Waves of a workgroup run one after another until each reaches `s_barrier` or `s_endpgm`;
//!   a barrier releases when every live wave has arrived. Waves exchange data only through LDS
//!   and global memory, so this interleaving is one the hardware may choose; a barrier reached
//!   with LDS stores not yet waited for (`lgkmcnt`) is a hazard, because on hardware the other
//!   waves could read LDS before those stores land. Two waves touching the same LDS dword
//!   between two barrier releases, one of them writing, is reported as an LDS race (the order
//!   of waves between barriers is not defined on hardware).
//! - Workgroups run one at a time, in an order given by [`Options::order`]: by default a
//!   seeded shuffle of the grid (so a kernel whose "last workgroup" logic depends on dispatch
//!   order fails), or every order of a small grid when a test asks for it.
//! - Global memory is coherent in the simulator, but MI300 is not: each XCD has its own L2.
//!   The cache-scope operations are checked as a real MI300 needs them across its dies
//!   ([`crate::vmem`]): a workgroup reading data another workgroup wrote must see that write
//!   released (`buffer_wbl2 sc1`, completed, before the writer's next atomic or `sc1` store)
//!   and must itself have invalidated (`buffer_inv sc1`) after an acquiring atomic or load.
//! - Transcendentals are exact or within 1 ULP as [`Options::trans`] says ([`crate::fpmath`]);
//!   denormals are flushed as the MODE register says, which starts from the descriptor's
//!   FLOAT_DENORM_MODE fields and changes with `s_setreg`.
//! - The gfx94x manually inserted wait states (`s_nop`) are checked ([`crate::hazard`]).

use crate::decode::{flag, full_mnemonic, Enc, Inst, Op, Ty};
use crate::elf::Kernel;
use crate::fpmath::Trans;
use crate::SimError;
use std::cell::RefCell;

pub(crate) const VCC: usize = 106;
pub(crate) const M0: usize = 124;
pub(crate) const EXEC: usize = 126;

/// Simulated global memory: named byte buffers, each at its own 4 GiB-aligned base address so
/// that any address maps to at most one buffer and anything else is an out-of-bounds access.
#[derive(Debug, Default, Clone)]
pub struct Memory {
    pub(crate) bufs: Vec<(String, Vec<u8>)>,
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
    pub(crate) fn slice(&mut self, addr: u64, len: usize) -> Option<&mut [u8]> {
        let idx = (addr >> 32) as usize;
        let off = (addr & 0xffff_ffff) as usize;
        let buf = &mut self.bufs.get_mut(idx.checked_sub(1)?)?.1;
        buf.get_mut(off..off.checked_add(len)?)
    }
    pub(crate) fn describe(&self, addr: u64) -> String {
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
    /// Vector memory instructions (global and buffer): loads, and stores including every
    /// atomic (returning or not), each counted once per wave.
    pub vmem_load: u64,
    pub vmem_store: u64,
    pub lds: u64,
    pub branch: u64,
    /// Global bytes loaded / stored by active lanes. An atomic counts its operand width
    /// (4 or 8 bytes a lane) as written only, also when it returns the old value.
    pub global_bytes_read: u64,
    pub global_bytes_written: u64,
}

impl Stats {
    pub fn instructions(&self) -> u64 {
        self.salu + self.valu + self.smem + self.vmem_load + self.vmem_store + self.lds + self.branch
    }
    fn add(&mut self, s: &Stats) {
        self.waves += s.waves;
        self.salu += s.salu;
        self.valu += s.valu;
        self.smem += s.smem;
        self.vmem_load += s.vmem_load;
        self.vmem_store += s.vmem_store;
        self.lds += s.lds;
        self.branch += s.branch;
        self.global_bytes_read += s.global_bytes_read;
        self.global_bytes_written += s.global_bytes_written;
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

/// The order workgroups are dispatched in (each runs to completion before the next starts).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Order {
    /// Linear order, x fastest.
    InOrder,
    /// A shuffle of the grid drawn from this seed.
    Seeded(u64),
    /// This permutation of the linear workgroup ids (x fastest).
    Given(Vec<u32>),
}

/// How a launch is simulated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    pub order: Order,
    pub trans: Trans,
    /// XNACK replay enabled (page faults retried by replaying memory clauses): checks the
    /// soft-clause rule ([`crate::hazard`]). ROCm runs MI300X with XNACK off by default.
    pub xnack: bool,
}

/// The seed of the default dispatch order: `GCN_SIM_SEED` when set, else a fixed value.
pub fn env_seed() -> u64 {
    std::env::var("GCN_SIM_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x6763_6e73_696d)
}

impl Default for Options {
    /// Shuffled dispatch (seed from [`env_seed`]), exact transcendentals.
    fn default() -> Self {
        Options { order: Order::Seeded(env_seed()), trans: Trans::Exact, xnack: false }
    }
}

thread_local! {
    static THREAD_OPTIONS: RefCell<Option<Options>> = const { RefCell::new(None) };
}

/// Sets the options [`launch`] uses on this thread (tests set a seed per test this way, since
/// the stage runner calls [`launch`]); `None` restores [`Options::default`].
pub fn set_thread_options(opts: Option<Options>) {
    THREAD_OPTIONS.with(|o| *o.borrow_mut() = opts);
}

/// The options [`launch`] uses on this thread.
pub fn thread_options() -> Options {
    THREAD_OPTIONS.with(|o| o.borrow().clone()).unwrap_or_default()
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Counter {
    Vm,
    Lds,
    Smem,
}

/// Marks a register as written by an outstanding memory op: (counter, issue sequence).
#[derive(Clone, Copy)]
pub(crate) struct Pending {
    pub counter: Counter,
    pub seq: u64,
    pub offset: u32,
}

pub(crate) fn cidx(c: Counter) -> usize {
    match c {
        Counter::Vm => 0,
        Counter::Lds => 1,
        Counter::Smem => 2,
    }
}

/// One wave's architectural state and its hazard bookkeeping.
pub(crate) struct Wave {
    pub id: usize,
    pub s: [u32; 128],
    pub scc: bool,
    pub v: Vec<[u32; 64]>,
    pub pc: usize,
    pub done: bool,
    pub at_barrier: bool,
    /// The MODE hardware register (FP_ROUND 3:0, FP_DENORM 7:4, DX10_CLAMP 8, IEEE 9).
    pub mode: u32,
    pub spend: Vec<Option<Pending>>,
    pub vpend: Vec<Option<Pending>>,
    pub npending: usize,
    /// Issued / retired memory ops per counter (vm, lds, smem).
    pub issued: [u64; 3],
    pub retired: [u64; 3],
    pub lds_stores_unwaited: u64,
    /// Wait-state clock: + the wait states of every instruction issued (1, `s_nop N`: N + 1).
    pub clock: u64,
    /// Clock after the last VALU write of each SGPR code (0 = never), and of each VGPR, of a
    /// transcendental write, of a partial (SDWA dst_sel / op_sel) write.
    pub sgpr_valu: [u64; 128],
    pub vgpr_valu: Vec<u64>,
    pub vgpr_trans: Vec<u64>,
    pub vgpr_partial: Vec<u64>,
    /// Recent VMEM stores with more than 64 bits of data: (clock after, first VGPR, count).
    pub wide_stores: Vec<(u64, u16, u16)>,
    /// Clock after the last `s_setreg` of each hardware register id.
    pub setreg: [u64; 64],
    /// `buffer_wbl2` issued and not yet covered by vmcnt: (vm sequence, release index).
    pub wbl2_pending: Vec<(u64, usize)>,
    /// vm sequence of the wave's last acquiring operation (device-scope atomic with return or
    /// sc1 load; 0 = none).
    pub acquire_seq: u64,
    /// The open memory clause (consecutive VMEM or SMEM instructions): its kind and the
    /// registers its instructions write and read.
    pub clause: Option<(bool, RegUse)>,
}

impl Wave {
    pub fn exec(&self) -> u64 {
        self.s[EXEC] as u64 | (self.s[EXEC + 1] as u64) << 32
    }
    pub fn set_exec(&mut self, m: u64) {
        self.s[EXEC] = m as u32;
        self.s[EXEC + 1] = (m >> 32) as u32;
    }
    pub fn vcc(&self) -> u64 {
        self.s[VCC] as u64 | (self.s[VCC + 1] as u64) << 32
    }
}

/// Race bookkeeping of one LDS dword within the current barrier epoch.
#[derive(Clone, Copy, Default)]
pub(crate) struct LdsWord {
    pub writer: u8,
    /// Every write in the epoch so far was an atomic (atomics do not race with each other).
    pub atomic: bool,
    /// The dword is tracked per byte (`Ctx::lds_bytes`).
    pub split: bool,
    pub write_epoch: u32,
    pub readers: u16,
    pub read_epoch: u32,
}

/// Launch-wide state and the current workgroup.
pub(crate) struct Ctx<'a> {
    pub k: &'a Kernel,
    pub mem: &'a mut Memory,
    pub opts: &'a Options,
    pub lds: Vec<u8>,
    /// Per LDS dword: who last wrote it and who read it, per barrier epoch (race detection);
    /// per byte for the dwords that had a sub-dword access.
    pub lds_meta: Vec<LdsWord>,
    pub lds_bytes: std::collections::HashMap<u32, [LdsWord; 4]>,
    /// Barrier generation of the workgroup: waves only synchronise at barrier releases.
    pub epoch: u32,
    pub stats: Stats,
    pub wg: [u32; 3],
    /// Linear id of the workgroup and its position in the dispatch order.
    pub wg_linear: u32,
    pub wave_id: usize,
    pub coherence: &'a mut crate::vmem::Coherence,
}

impl Ctx<'_> {
    pub fn err(&self, inst: &Inst, what: impl Into<String>) -> SimError {
        SimError::Hazard {
            kernel: self.k.name.clone(),
            workgroup: self.wg,
            wave: self.wave_id,
            offset: inst.offset,
            inst: full_mnemonic(inst),
            what: what.into(),
        }
    }

    pub fn swrite(&self, w: &mut Wave, inst: &Inst, code: u16, v: u32) -> Result<(), SimError> {
        if code > 127 || (102..=105).contains(&code) || (108..=123).contains(&code) || code == 125 {
            return Err(self.err(inst, format!("write to unsupported scalar destination {code}")));
        }
        w.s[code as usize] = v;
        Ok(())
    }

    pub fn swrite64(&self, w: &mut Wave, inst: &Inst, code: u16, v: u64) -> Result<(), SimError> {
        self.swrite(w, inst, code, v as u32)?;
        self.swrite(w, inst, code + 1, (v >> 32) as u32)
    }
}

/// The workgroup order of a launch.
fn dispatch_order(order: &Order, n: u32) -> Result<Vec<u32>, String> {
    match order {
        Order::InOrder => Ok((0..n).collect()),
        Order::Seeded(seed) => {
            let mut v: Vec<u32> = (0..n).collect();
            let mut state = *seed;
            for i in (1..v.len()).rev() {
                state = crate::fpmath::mix(state);
                let j = (state % (i as u64 + 1)) as usize;
                v.swap(i, j);
            }
            Ok(v)
        }
        Order::Given(p) => {
            let mut seen = vec![false; n as usize];
            if p.len() != n as usize || p.iter().any(|&x| x >= n || std::mem::replace(&mut seen[x as usize], true)) {
                return Err(format!("dispatch order {p:?} is not a permutation of the {n} workgroups"));
            }
            Ok(p.clone())
        }
    }
}

/// Runs `kernel` over the whole grid with this thread's [`Options`] ([`thread_options`]).
/// `kernarg` is the address of the kernarg buffer in `mem`.
pub fn launch(kernel: &Kernel, launch: Launch, kernarg: u64, mem: &mut Memory) -> Result<Stats, SimError> {
    launch_with(kernel, launch, kernarg, mem, &thread_options())
}

/// Runs `kernel` over the whole grid with the given options.
pub fn launch_with(
    kernel: &Kernel,
    launch: Launch,
    kernarg: u64,
    mem: &mut Memory,
    opts: &Options,
) -> Result<Stats, SimError> {
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

    let n = launch.grid[0] as u64 * launch.grid[1] as u64 * launch.grid[2] as u64;
    if n > u32::MAX as u64 {
        return Err(SimError::Launch(format!("{}: grid too large", kernel.name)));
    }
    let order = dispatch_order(&opts.order, n as u32).map_err(SimError::Launch)?;
    let mut coherence = crate::vmem::Coherence::new(mem, n as u32);
    let mut stats = Stats::default();
    for (pos, &linear) in order.iter().enumerate() {
        let x = linear % launch.grid[0];
        let y = (linear / launch.grid[0]) % launch.grid[1];
        let z = linear / (launch.grid[0] * launch.grid[1]);
        coherence.begin_workgroup(linear);
        let mut ctx = Ctx {
            k: kernel,
            mem,
            opts,
            lds: vec![0; kernel.lds_bytes as usize],
            lds_meta: vec![LdsWord::default(); kernel.lds_bytes.div_ceil(4) as usize],
            lds_bytes: std::collections::HashMap::new(),
            epoch: 1,
            stats: Stats::default(),
            wg: [x, y, z],
            wg_linear: linear,
            wave_id: 0,
            coherence: &mut coherence,
        };
        if let Err(e) = run_workgroup(&mut ctx, launch, kernarg, packet_addr) {
            return Err(annotate(e, &opts.order, pos, order.len()));
        }
        stats.add(&ctx.stats);
    }
    Ok(stats)
}

/// Adds the dispatch order to an error, so a failure can be replayed.
fn annotate(e: SimError, order: &Order, pos: usize, n: usize) -> SimError {
    let how = match order {
        Order::InOrder => return e,
        Order::Seeded(seed) => format!("dispatch order seed {seed}"),
        Order::Given(p) if p.len() <= 16 => format!("dispatch order {p:?}"),
        Order::Given(_) => "a given dispatch order".into(),
    };
    let note = format!(" [{how}: workgroup {} of {n} to run]", pos + 1);
    match e {
        SimError::Hazard { kernel, workgroup, wave, offset, inst, what } => {
            SimError::Hazard { kernel, workgroup, wave, offset, inst, what: format!("{what}{note}") }
        }
        SimError::Launch(s) => SimError::Launch(format!("{s}{note}")),
        other => other,
    }
}

/// The MODE register a wave starts with, from the descriptor's RSRC1.
pub(crate) fn initial_mode(rsrc1: u32) -> u32 {
    let round32 = (rsrc1 >> 12) & 3;
    let round64 = (rsrc1 >> 14) & 3;
    let den32 = (rsrc1 >> 16) & 3;
    let den64 = (rsrc1 >> 18) & 3;
    let dx10 = (rsrc1 >> 21) & 1;
    let ieee = (rsrc1 >> 23) & 1;
    round32 | round64 << 2 | den32 << 4 | den64 << 6 | dx10 << 8 | ieee << 9
}

fn run_workgroup(ctx: &mut Ctx, l: Launch, kernarg: u64, packet: u64) -> Result<(), SimError> {
    let k = ctx.k;
    let threads = (l.block[0] * l.block[1] * l.block[2]) as usize;
    let nwaves = threads.div_ceil(64);
    if nwaves > 16 {
        return Err(SimError::Launch(format!("{}: more than 16 waves per workgroup", k.name)));
    }
    let mode = initial_mode(k.rsrc1);
    if mode & 0xf != 0 {
        return Err(SimError::Launch(format!("{}: only round-to-nearest-even is simulated", k.name)));
    }
    let nv = k.arch_vgprs as usize;
    let mut waves = Vec::with_capacity(nwaves);
    for w in 0..nwaves {
        let mut wave = Wave {
            id: w,
            s: [0; 128],
            scc: false,
            v: vec![[0u32; 64]; nv],
            pc: 0,
            done: false,
            at_barrier: false,
            mode,
            spend: vec![None; 128],
            vpend: vec![None; nv],
            npending: 0,
            issued: [0; 3],
            retired: [0; 3],
            lds_stores_unwaited: 0,
            clock: 100,
            sgpr_valu: [0; 128],
            vgpr_valu: vec![0; nv],
            vgpr_trans: vec![0; nv],
            vgpr_partial: vec![0; nv],
            wide_stores: Vec::new(),
            setreg: [0; 64],
            wbl2_pending: Vec::new(),
            acquire_seq: 0,
            clause: None,
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
        if k.rsrc2 & 1 != 0 {
            return Err(SimError::Launch(format!("{}: scratch (private segment) is not simulated", k.name)));
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
                if let Some(v0) = wave.v.get_mut(0) {
                    v0[lane] = x | (y << 10) | (z << 20);
                }
            }
        }
        wave.set_exec(exec);
        waves.push(wave);
    }
    ctx.stats.waves += nwaves as u64;
    let mut budget: u64 = 2_000_000_000;
    loop {
        let mut progressed = false;
        for wave in waves.iter_mut() {
            if wave.done || wave.at_barrier {
                continue;
            }
            ctx.wave_id = wave.id;
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
            crate::hazard::check_pending(ctx, w, &inst, &k.uses[w.pc - 1])?;
        }
        crate::hazard::check_wait_states(ctx, w, &inst)?;
        crate::hazard::check_clause(ctx, w, &inst, &k.uses[w.pc - 1])?;
        w.clock += 1;
        if inst.op == Op::SNop {
            w.clock += (inst.imm as u64) & 0xf;
        }
        let trace = trace_lane(k);
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
                crate::valu::exec_valu(ctx, w, &inst)?;
                crate::hazard::note_valu_writes(w, &inst);
            }
            Enc::Ds => crate::lds::exec_ds(ctx, w, &inst)?,
            Enc::Global | Enc::Mubuf => crate::vmem::exec_vmem(ctx, w, &inst)?,
        }
        if let Some(lane) = trace {
            if ctx.wg_linear == 0 && w.id == lane / 64 {
                let l = lane % 64;
                let d = inst.dst as usize;
                let val = if d >= 256 && d - 256 < w.v.len() {
                    format!("v{}[{l}] = 0x{:08x}", d - 256, w.v[d - 256][l])
                } else if d < 128 {
                    format!("s{d} = 0x{:08x}", w.s[d])
                } else {
                    String::new()
                };
                eprintln!("{:>5x}: {:<60} {val}", inst.offset, crate::decode::disassemble(&inst));
            }
        }
    }
}

/// `GCN_SIM_TRACE=<kernel>:<work-item>`: prints every instruction workgroup 0 executes for that
/// kernel, with the work-item's destination value (a debugging aid).
fn trace_lane(k: &Kernel) -> Option<usize> {
    static TRACE: std::sync::OnceLock<Option<(String, usize)>> = std::sync::OnceLock::new();
    let t = TRACE.get_or_init(|| {
        let v = std::env::var("GCN_SIM_TRACE").ok()?;
        let (name, lane) = v.split_once(':')?;
        Some((name.to_string(), lane.parse().ok()?))
    });
    t.as_ref().filter(|(n, _)| *n == k.name).map(|(_, l)| *l)
}

/// Registers one instruction reads and writes: (is_vgpr, first register, count).
pub type RegUse = (Vec<(bool, u16, u16)>, Vec<(bool, u16, u16)>);

/// Registers an instruction reads and writes, for the hazard and register-limit checks.
pub(crate) fn operands(inst: &Inst) -> RegUse {
    let mut rd = Vec::with_capacity(4);
    let mut wr = Vec::with_capacity(2);
    let reg = |code: u16, n: u16| -> Option<(bool, u16, u16)> {
        if n == 0 {
            None
        } else if code >= 256 {
            Some((true, code - 256, n))
        } else if code <= 101 || code == VCC as u16 || code == M0 as u16 || code == EXEC as u16 {
            Some((false, code, n))
        } else {
            None
        }
    };
    let s = inst.sig();
    match inst.enc {
        Enc::Sop1 | Enc::Sop2 | Enc::Sopc | Enc::Sopk => {
            for i in 0..s.nsrc {
                if s.src[i] != Ty::K {
                    rd.extend(reg(inst.src[i], s.src[i].regs()));
                }
            }
            if inst.enc == Enc::Sopk && matches!(inst.op, Op::SSetregB32) {
                rd.extend(reg(inst.dst, 1));
            }
            if s.dst != Ty::N {
                wr.extend(reg(inst.dst, s.dst.regs()));
            }
            if s.has(flag::EXEC) {
                rd.push((false, EXEC as u16, 2));
                wr.push((false, EXEC as u16, 2));
            }
        }
        Enc::Sopp => {}
        Enc::Smem => {
            rd.extend(reg(inst.src[0], 2));
            if inst.soffset_reg {
                rd.extend(reg(inst.soffset, 1));
            }
            wr.extend(reg(inst.dst, s.dst.regs()));
        }
        Enc::Vop1 | Enc::Vop2 | Enc::Vopc | Enc::Vop3 | Enc::Vop3p => {
            for i in 0..s.nsrc {
                rd.extend(reg(inst.src[i], s.src[i].regs()));
            }
            if s.has(flag::VCCIN) {
                rd.push((false, VCC as u16, 2));
            }
            if inst.enc == Enc::Vopc {
                wr.extend(reg(inst.sdst, 2));
                if s.has(flag::CMPX) {
                    wr.push((false, EXEC as u16, 2));
                }
            } else {
                wr.extend(reg(inst.dst, s.dst.regs()));
                if s.has(flag::CO) {
                    wr.extend(reg(inst.sdst, 2));
                }
                if s.has(flag::WL) || matches!(inst.ext, crate::decode::Ext::Sdwa(_)) {
                    rd.extend(reg(inst.dst, s.dst.regs()));
                }
            }
            rd.push((false, EXEC as u16, 2));
        }
        Enc::Ds => {
            let (addr, d0, d1, dst) = (inst.src[0], inst.src[1], inst.src[2], inst.dst);
            if s.addr {
                rd.extend(reg(addr, 1));
            }
            rd.extend(reg(d0, s.data as u16));
            rd.extend(reg(d1, s.data1 as u16));
            wr.extend(reg(dst, s.ret as u16));
            if crate::lds::is_d16(inst.op) && s.ret > 0 {
                rd.extend(reg(dst, 1));
            }
            rd.push((false, EXEC as u16, 2));
        }
        Enc::Global => {
            let saddr = inst.src[2];
            rd.extend(reg(inst.src[0], if saddr == 0x7f { 2 } else { 1 }));
            if saddr != 0x7f {
                rd.extend(reg(saddr, 2));
            }
            rd.extend(reg(inst.src[1], s.data as u16));
            if s.ret > 0 && (!s.has(flag::ATOMIC) || inst.glc) {
                wr.extend(reg(inst.dst, s.ret as u16));
                if crate::vmem::is_d16(inst.op) {
                    rd.extend(reg(inst.dst, 1));
                }
            }
            rd.push((false, EXEC as u16, 2));
        }
        Enc::Mubuf => {
            if s.ret > 0 || s.data > 0 {
                let nv = match (inst.idxen, inst.offen) {
                    (true, true) => 2,
                    (false, false) => 0,
                    _ => 1,
                };
                rd.extend(reg(inst.src[0], nv));
                rd.extend(reg(inst.src[2], 4));
                rd.extend(reg(inst.soffset, 1));
                rd.extend(reg(inst.src[1], s.data as u16));
                if s.ret > 0 && (!s.has(flag::ATOMIC) || inst.glc) {
                    wr.extend(reg(inst.src[1], s.ret as u16));
                }
                rd.push((false, EXEC as u16, 2));
            }
        }
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
    let exec = w.exec();
    let vcc = w.vcc();
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
            crate::hazard::waitcnt(ctx, w, inst);
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
    crate::valu::scalar32(w, inst, code)
}

fn sread64(w: &Wave, inst: &Inst, code: u16) -> u64 {
    crate::valu::scalar64(w, inst, code, Ty::S2)
}

fn exec_salu(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    use Op::*;
    let s = inst.sig();
    let wide = s.src[0].regs() == 2 && s.src[0] != Ty::K;
    let a = sread(w, inst, inst.src[0]);
    let b = sread(w, inst, inst.src[1]);
    let (a64, b64) = (
        if wide { sread64(w, inst, inst.src[0]) } else { a as u64 },
        if s.src[1].regs() == 2 { sread64(w, inst, inst.src[1]) } else { b as u64 },
    );
    let d = inst.dst;
    let k = inst.imm;
    let kv = (k as u16) as u32;
    let dval = w.s[(d as usize).min(127)];
    let mut scc = w.scc;
    // Result: 32 or 64 bits to dst (None: no register write).
    let r: Option<u64> = match inst.op {
        SAddU32 => {
            let (r, c) = a.overflowing_add(b);
            scc = c;
            Some(r as u64)
        }
        SSubU32 => {
            scc = b > a;
            Some(a.wrapping_sub(b) as u64)
        }
        SAddI32 => {
            let (r, o) = (a as i32).overflowing_add(b as i32);
            scc = o;
            Some(r as u32 as u64)
        }
        SSubI32 => {
            let (r, o) = (a as i32).overflowing_sub(b as i32);
            scc = o;
            Some(r as u32 as u64)
        }
        SAddcU32 => {
            let r = a as u64 + b as u64 + w.scc as u64;
            scc = r >> 32 != 0;
            Some(r & 0xffff_ffff)
        }
        SSubbU32 => {
            let r = a as i64 - b as i64 - w.scc as i64;
            scc = r < 0;
            Some(r as u32 as u64)
        }
        SMinI32 => {
            scc = (a as i32) < (b as i32);
            Some((a as i32).min(b as i32) as u32 as u64)
        }
        SMinU32 => {
            scc = a < b;
            Some(a.min(b) as u64)
        }
        SMaxI32 => {
            scc = (a as i32) > (b as i32);
            Some((a as i32).max(b as i32) as u32 as u64)
        }
        SMaxU32 => {
            scc = a > b;
            Some(a.max(b) as u64)
        }
        SCselectB32 => Some(if w.scc { a } else { b } as u64),
        SCselectB64 => Some(if w.scc { a64 } else { b64 }),
        SAndB32 | SOrB32 | SXorB32 | SAndn2B32 | SOrn2B32 | SNandB32 | SNorB32 | SXnorB32 | SAndB64 | SOrB64
        | SXorB64 | SAndn2B64 | SOrn2B64 | SNandB64 | SNorB64 | SXnorB64 => {
            let r = match inst.op {
                SAndB32 | SAndB64 => a64 & b64,
                SOrB32 | SOrB64 => a64 | b64,
                SXorB32 | SXorB64 => a64 ^ b64,
                SAndn2B32 | SAndn2B64 => a64 & !b64,
                SOrn2B32 | SOrn2B64 => a64 | !b64,
                SNandB32 | SNandB64 => !(a64 & b64),
                SNorB32 | SNorB64 => !(a64 | b64),
                _ => !(a64 ^ b64),
            };
            let r = if wide { r } else { r & 0xffff_ffff };
            scc = r != 0;
            Some(r)
        }
        SLshlB32 => {
            let r = a << (b & 31);
            scc = r != 0;
            Some(r as u64)
        }
        SLshrB32 => {
            let r = a >> (b & 31);
            scc = r != 0;
            Some(r as u64)
        }
        SAshrI32 => {
            let r = ((a as i32) >> (b & 31)) as u32;
            scc = r != 0;
            Some(r as u64)
        }
        SLshlB64 => {
            let r = a64 << (b & 63);
            scc = r != 0;
            Some(r)
        }
        SLshrB64 => {
            let r = a64 >> (b & 63);
            scc = r != 0;
            Some(r)
        }
        SAshrI64 => {
            let r = ((a64 as i64) >> (b & 63)) as u64;
            scc = r != 0;
            Some(r)
        }
        SBfmB32 => Some(((((1u64 << (a & 31)) - 1) as u32) << (b & 31)) as u64),
        SBfmB64 => Some((((1u128 << (a & 63)) - 1) as u64).wrapping_shl(b & 63)),
        SMulI32 => Some((a as i32).wrapping_mul(b as i32) as u32 as u64),
        SMulHiU32 => Some((a as u64 * b as u64) >> 32),
        SMulHiI32 => Some((((a as i32 as i64) * (b as i32 as i64)) >> 32) as u32 as u64),
        SBfeU32 | SBfeI32 => {
            let (off, width) = (b & 31, (b >> 16) & 0x7f);
            let r = if width == 0 {
                0
            } else if inst.op == SBfeU32 {
                if width >= 32 {
                    a >> off
                } else {
                    (a >> off) & ((1u32 << width) - 1)
                }
            } else {
                let w2 = width.min(32 - off);
                (((a >> off) << (32 - w2)) as i32 >> (32 - w2)) as u32
            };
            scc = r != 0;
            Some(r as u64)
        }
        SBfeU64 | SBfeI64 => {
            let (off, width) = (b & 63, (b >> 16) & 0x7f);
            let r = if width == 0 {
                0
            } else if inst.op == SBfeU64 {
                if width >= 64 {
                    a64 >> off
                } else {
                    (a64 >> off) & ((1u64 << width) - 1)
                }
            } else {
                let w2 = width.min(64 - off);
                (((a64 >> off) << (64 - w2)) as i64 >> (64 - w2)) as u64
            };
            scc = r != 0;
            Some(r)
        }
        SAbsdiffI32 => {
            let r = (a as i32 as i64 - b as i32 as i64).unsigned_abs() as u32;
            scc = r != 0;
            Some(r as u64)
        }
        SLshl1AddU32 | SLshl2AddU32 | SLshl3AddU32 | SLshl4AddU32 => {
            let sh = match inst.op {
                SLshl1AddU32 => 1,
                SLshl2AddU32 => 2,
                SLshl3AddU32 => 3,
                _ => 4,
            };
            let r = ((a as u64) << sh) + b as u64;
            scc = r >> 32 != 0;
            Some(r & 0xffff_ffff)
        }
        SPackLlB32B16 => Some(((a & 0xffff) | (b << 16)) as u64),
        SPackLhB32B16 => Some(((a & 0xffff) | (b & 0xffff_0000)) as u64),
        SPackHhB32B16 => Some(((a >> 16) | (b & 0xffff_0000)) as u64),
        SMovkI32 => Some(k as u32 as u64),
        SCmovkI32 => {
            if w.scc {
                Some(k as u32 as u64)
            } else {
                None
            }
        }
        SCmpkEqI32 | SCmpkLgI32 | SCmpkGtI32 | SCmpkGeI32 | SCmpkLtI32 | SCmpkLeI32 => {
            let (x, y) = (dval as i32, k);
            scc = match inst.op {
                SCmpkEqI32 => x == y,
                SCmpkLgI32 => x != y,
                SCmpkGtI32 => x > y,
                SCmpkGeI32 => x >= y,
                SCmpkLtI32 => x < y,
                _ => x <= y,
            };
            None
        }
        SCmpkEqU32 | SCmpkLgU32 | SCmpkGtU32 | SCmpkGeU32 | SCmpkLtU32 | SCmpkLeU32 => {
            let (x, y) = (dval, kv);
            scc = match inst.op {
                SCmpkEqU32 => x == y,
                SCmpkLgU32 => x != y,
                SCmpkGtU32 => x > y,
                SCmpkGeU32 => x >= y,
                SCmpkLtU32 => x < y,
                _ => x <= y,
            };
            None
        }
        SAddkI32 => {
            let (r, o) = (dval as i32).overflowing_add(k);
            scc = o;
            Some(r as u32 as u64)
        }
        SMulkI32 => Some((dval as i32).wrapping_mul(k) as u32 as u64),
        SGetregB32 | SSetregB32 | SSetregImm32B32 => {
            let (id, off, size) = ((kv & 0x3f) as usize, (kv >> 6) & 0x1f, ((kv >> 11) & 0x1f) + 1);
            if id != 1 {
                return Err(ctx.err(inst, format!("hardware register {id} is not simulated (only MODE)")));
            }
            let mask = (((1u64 << size) - 1) << off) as u32;
            if inst.op == SGetregB32 {
                Some(((w.mode & mask) >> off) as u64)
            } else {
                let v = if inst.op == SSetregB32 { dval } else { inst.literal };
                w.mode = (w.mode & !mask) | ((v << off) & mask);
                w.setreg[id] = w.clock;
                if w.mode & 0xf != 0 {
                    return Err(ctx.err(inst, "only round-to-nearest-even is simulated"));
                }
                None
            }
        }
        SMovB32 => Some(a as u64),
        SMovB64 => Some(a64),
        SCmovB32 => w.scc.then_some(a as u64),
        SCmovB64 => w.scc.then_some(a64),
        SNotB32 => {
            scc = !a != 0;
            Some(!a as u64)
        }
        SNotB64 => {
            scc = !a64 != 0;
            Some(!a64)
        }
        SBrevB32 => Some(a.reverse_bits() as u64),
        SBrevB64 => Some(a64.reverse_bits()),
        SBcnt0I32B32 | SBcnt1I32B32 | SBcnt0I32B64 | SBcnt1I32B64 => {
            let r = match inst.op {
                SBcnt0I32B32 => a.count_zeros(),
                SBcnt1I32B32 => a.count_ones(),
                SBcnt0I32B64 => a64.count_zeros(),
                _ => a64.count_ones(),
            };
            scc = r != 0;
            Some(r as u64)
        }
        SFf0I32B32 => Some(if a == u32::MAX { u32::MAX } else { (!a).trailing_zeros() } as u64),
        SFf1I32B32 => Some(if a == 0 { u32::MAX } else { a.trailing_zeros() } as u64),
        SFf0I32B64 => Some(if a64 == u64::MAX { u32::MAX } else { (!a64).trailing_zeros() } as u64),
        SFf1I32B64 => Some(if a64 == 0 { u32::MAX } else { a64.trailing_zeros() } as u64),
        SFlbitI32B32 => Some(if a == 0 { u32::MAX } else { a.leading_zeros() } as u64),
        SFlbitI32B64 => Some(if a64 == 0 { u32::MAX } else { a64.leading_zeros() } as u64),
        SFlbitI32 => {
            let x = a as i32;
            Some(if x == 0 || x == -1 {
                u32::MAX
            } else if x < 0 {
                (!a).leading_zeros()
            } else {
                a.leading_zeros()
            } as u64)
        }
        SFlbitI32I64 => {
            let x = a64 as i64;
            Some(if x == 0 || x == -1 {
                u32::MAX
            } else if x < 0 {
                (!a64).leading_zeros()
            } else {
                a64.leading_zeros()
            } as u64)
        }
        SSextI32I8 => Some(a as i8 as i32 as u32 as u64),
        SSextI32I16 => Some(a as i16 as i32 as u32 as u64),
        SBitset0B32 => Some((dval & !(1u32 << (a & 31))) as u64),
        SBitset1B32 => Some((dval | (1u32 << (a & 31))) as u64),
        SAbsI32 => {
            let r = (a as i32).unsigned_abs();
            scc = r != 0;
            Some(r as u64)
        }
        SAndSaveexecB64 | SOrSaveexecB64 | SXorSaveexecB64 | SAndn2SaveexecB64 | SOrn2SaveexecB64
        | SNandSaveexecB64 | SNorSaveexecB64 | SXnorSaveexecB64 | SAndn1SaveexecB64 | SOrn1SaveexecB64
        | SAndn1WrexecB64 | SAndn2WrexecB64 => {
            let exec = w.exec();
            let r = match inst.op {
                SAndSaveexecB64 => a64 & exec,
                SOrSaveexecB64 => a64 | exec,
                SXorSaveexecB64 => a64 ^ exec,
                SAndn2SaveexecB64 => a64 & !exec,
                SOrn2SaveexecB64 => a64 | !exec,
                SNandSaveexecB64 => !(a64 & exec),
                SNorSaveexecB64 => !(a64 | exec),
                SXnorSaveexecB64 => !(a64 ^ exec),
                SAndn1SaveexecB64 => !a64 & exec,
                SOrn1SaveexecB64 => !a64 | exec,
                SAndn1WrexecB64 => !a64 & exec,
                _ => a64 & !exec,
            };
            scc = r != 0;
            w.set_exec(r);
            if matches!(inst.op, SAndn1WrexecB64 | SAndn2WrexecB64) {
                Some(r)
            } else {
                Some(exec)
            }
        }
        SCmpEqI32 | SCmpEqU32 => {
            scc = a == b;
            None
        }
        SCmpLgI32 | SCmpLgU32 => {
            scc = a != b;
            None
        }
        SCmpGtI32 => {
            scc = (a as i32) > (b as i32);
            None
        }
        SCmpGeI32 => {
            scc = (a as i32) >= (b as i32);
            None
        }
        SCmpLtI32 => {
            scc = (a as i32) < (b as i32);
            None
        }
        SCmpLeI32 => {
            scc = (a as i32) <= (b as i32);
            None
        }
        SCmpGtU32 => {
            scc = a > b;
            None
        }
        SCmpGeU32 => {
            scc = a >= b;
            None
        }
        SCmpLtU32 => {
            scc = a < b;
            None
        }
        SCmpLeU32 => {
            scc = a <= b;
            None
        }
        SBitcmp0B32 => {
            scc = a >> (b & 31) & 1 == 0;
            None
        }
        SBitcmp1B32 => {
            scc = a >> (b & 31) & 1 != 0;
            None
        }
        SBitcmp0B64 => {
            scc = a64 >> (b & 63) & 1 == 0;
            None
        }
        SBitcmp1B64 => {
            scc = a64 >> (b & 63) & 1 != 0;
            None
        }
        SCmpEqU64 => {
            scc = a64 == b64;
            None
        }
        SCmpLgU64 => {
            scc = a64 != b64;
            None
        }
        _ => return Err(ctx.err(inst, "not a scalar ALU op")),
    };
    w.scc = scc;
    if let Some(r) = r {
        if s.dst.regs() == 2 {
            ctx.swrite64(w, inst, d, r)?;
        } else {
            ctx.swrite(w, inst, d, r as u32)?;
        }
    }
    Ok(())
}

fn exec_smem(ctx: &mut Ctx, w: &mut Wave, inst: &Inst) -> Result<(), SimError> {
    ctx.stats.smem += 1;
    let base = sread64(w, inst, inst.src[0]) & 0xffff_ffff_ffff;
    let mut off = inst.imm as i64 as u64;
    if inst.soffset_reg {
        off = off.wrapping_add(crate::valu::scalar32(w, inst, inst.soffset) as u64);
    }
    let n = inst.sig().dst.regs() as usize;
    if inst.dst as usize + n > 102 || inst.dst as usize % n.min(4) != 0 {
        return Err(ctx.err(inst, "misaligned or out-of-range SMEM destination"));
    }
    // The scalar unit ignores the low two address bits.
    let addr = base.wrapping_add(off) & !3;
    let Some(bytes) = ctx.mem.slice(addr, 4 * n) else {
        let d = ctx.mem.describe(addr);
        return Err(ctx.err(inst, format!("scalar load of {} bytes at {d} is out of bounds", 4 * n)));
    };
    let vals: Vec<u32> = bytes.chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    crate::vmem::check_scalar_read(ctx, inst, addr, 4 * n)?;
    w.s[inst.dst as usize..inst.dst as usize + n].copy_from_slice(&vals);
    w.issued[2] += 1;
    crate::hazard::mark_pending(w, false, inst.dst as usize, n, Counter::Smem, inst.offset);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_dispatch_orders_are_reproducible_permutations() {
        for n in [1u32, 2, 7, 64, 1000] {
            let a = dispatch_order(&Order::Seeded(42), n).unwrap();
            assert_eq!(a, dispatch_order(&Order::Seeded(42), n).unwrap());
            let mut sorted = a.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>());
        }
        // Different seeds give different orders of a grid of any size.
        assert_ne!(dispatch_order(&Order::Seeded(1), 64).unwrap(), dispatch_order(&Order::Seeded(2), 64).unwrap());
        assert_eq!(dispatch_order(&Order::InOrder, 3).unwrap(), vec![0, 1, 2]);
        assert!(dispatch_order(&Order::Given(vec![0, 0, 1]), 3).is_err());
        assert!(dispatch_order(&Order::Given(vec![2, 0]), 3).is_err());
        assert_eq!(dispatch_order(&Order::Given(vec![2, 0, 1]), 3).unwrap(), vec![2, 0, 1]);
    }

    #[test]
    fn the_initial_mode_comes_from_rsrc1() {
        // FLOAT_DENORM_MODE_32 = 3, _16_64 = 3, DX10_CLAMP, IEEE.
        let rsrc1 = 3 << 16 | 3 << 18 | 1 << 21 | 1 << 23;
        assert_eq!(initial_mode(rsrc1), 0x30 | 0xc0 | 0x100 | 0x200);
        assert_eq!(initial_mode(0) & 0xf0, 0);
    }
}
