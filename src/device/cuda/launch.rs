//! How a selected variant becomes a launch: the launcher families the catalogue's `launch`
//! field names, the token buckets of a plan (a catalogue row with its loaded function), and a
//! launch as plain data (function, grid, block, shared memory, argument bytes) that one driver
//! call enqueues. The families build `Launch`es without touching a stream, so their arithmetic
//! is testable without a GPU; only `Launch::enqueue` reaches the driver.

use super::abi::{
    CoeffsArgs, ExpandArgs, HeadArgs, PostArgs, PostPrePcArgs, PreArgs, PreDecodeArgs, PreGemmArgs, PreTmaArgs,
    StaticArgs,
};
use super::device::{Function, MAX_PARAMS};
use super::ffi;
use super::stream::Stream;
use crate::config::{Config, Dtype, Stage};
use crate::error::{Error, Result};
use mhc_loader::{Trait, Variant};
use std::ffi::c_void;
use std::mem::size_of;

/// The sm_90a launchers, one per argument block and grid rule. A catalogue row names its
/// launcher (`launch = "..."`); a name this runtime does not know is a build inconsistency that
/// a test reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LaunchKind {
    /// post.ptx: token x channel-chunk items (`threads_per_item` lanes each), or one CTA per
    /// token with its x tile in shared memory (`tile_in_shared`: the tensor-core kernels).
    Post,
    /// head.ptx: token tiles per CTA, per cluster (`cluster` > 1), or persistent clusters.
    Head,
    /// static.ptx: persistent CTAs, one token per CTA (or cluster), or a token ring.
    Static,
    /// expand.ptx: token x 8-channel items.
    Expand,
    /// coeffs*.ptx: the coefficient stage from projected logits.
    Coeffs,
    /// pre.ptx `mhc_pre_sm90_*`: the general kernel (split-K decode shape, prefill tiles).
    Pre,
    /// pre_decode.ptx `mhc_pre_decode_*`: one grid arrival, T <= 16.
    PreDecode,
    /// pre_decode.ptx `mhc_pre_mid*`: CTA s finishes token s, T <= 64.
    PreMid,
    /// pre_lc.ptx: 16-CTA clusters that split the logits of groups of tokens, T <= 16.
    PreLogitClusters,
    /// pre_pc.ptx, the cp.async ring entry: persistent 16-CTA clusters.
    PreCluster,
    /// pre_pc.ptx, the TMA ring entry (its argument bank carries x's tensor map).
    PreClusterTma,
    /// pre_pc.ptx, the pair entry: the TMA entry on two clusters per tile, each on a part of C
    /// (an even cluster count; the workspace's exchange rows).
    PreClusterPair,
    /// pre_gemm.ptx: n = 8 / 16 / 32 as a tiled GEMM.
    PreGemm,
    /// pre.ptx `mhc_post_pre_sm90_*`: the general kernel's fused post producer (on request).
    PostPre,
    /// pre_pc.ptx, the fused post_pre entries: x' computed in the ring, never read back.
    PostPreCluster,
    /// pre_decode.ptx `mhc_post_pre_mid*`: the mid kernel with layer l's post folded into its
    /// load phase, T <= 64.
    PostPreMid,
    /// pre_pc_pair.ptx, the fused post_pre entry on two clusters per tile, each on a part of C
    /// (the workspace's exchange rows, as [`LaunchKind::PreClusterPair`]).
    PostPreClusterPair,
    /// pre_lc.ptx `mhc_post_pre_lc*`: the logit-cluster kernel with layer l's post folded in
    /// after its loads, T <= 16.
    PostPreLogitClusters,
}

impl LaunchKind {
    /// Every launcher.
    pub const ALL: [LaunchKind; 18] = [
        LaunchKind::Post,
        LaunchKind::Head,
        LaunchKind::Static,
        LaunchKind::Expand,
        LaunchKind::Coeffs,
        LaunchKind::Pre,
        LaunchKind::PreDecode,
        LaunchKind::PreMid,
        LaunchKind::PreLogitClusters,
        LaunchKind::PreCluster,
        LaunchKind::PreClusterTma,
        LaunchKind::PreClusterPair,
        LaunchKind::PreGemm,
        LaunchKind::PostPre,
        LaunchKind::PostPreCluster,
        LaunchKind::PostPreClusterPair,
        LaunchKind::PostPreMid,
        LaunchKind::PostPreLogitClusters,
    ];

    /// The catalogue's name of the launcher.
    pub const fn name(self) -> &'static str {
        match self {
            LaunchKind::Post => "post",
            LaunchKind::Head => "head",
            LaunchKind::Static => "static",
            LaunchKind::Expand => "expand",
            LaunchKind::Coeffs => "coeffs",
            LaunchKind::Pre => "pre",
            LaunchKind::PreDecode => "pre_decode",
            LaunchKind::PreMid => "pre_mid",
            LaunchKind::PreLogitClusters => "pre_lc",
            LaunchKind::PreCluster => "pre_cluster",
            LaunchKind::PreClusterTma => "pre_cluster_tma",
            LaunchKind::PreClusterPair => "pre_cluster_pair",
            LaunchKind::PreGemm => "pre_gemm",
            LaunchKind::PostPre => "post_pre",
            LaunchKind::PostPreCluster => "post_pre_cluster",
            LaunchKind::PostPreClusterPair => "post_pre_cluster_pair",
            LaunchKind::PostPreMid => "post_pre_mid",
            LaunchKind::PostPreLogitClusters => "post_pre_lc",
        }
    }

    /// The launcher the catalogue names `name` ([`LaunchKind::name`]), if any.
    pub fn from_name(name: &str) -> Option<LaunchKind> {
        LaunchKind::ALL.into_iter().find(|k| k.name() == name)
    }

    /// Bytes of the argument block the launcher builds: the kernel's parameter bytes must equal
    /// it (checked when a plan loads the kernel).
    pub const fn arg_bytes(self) -> usize {
        match self {
            LaunchKind::Post => size_of::<PostArgs>(),
            LaunchKind::Head => size_of::<HeadArgs>(),
            LaunchKind::Static => size_of::<StaticArgs>(),
            LaunchKind::Expand => size_of::<ExpandArgs>(),
            LaunchKind::Coeffs => size_of::<CoeffsArgs>(),
            LaunchKind::Pre | LaunchKind::PostPre => size_of::<PreArgs>(),
            LaunchKind::PreDecode | LaunchKind::PreMid | LaunchKind::PreLogitClusters | LaunchKind::PreCluster => {
                size_of::<PreDecodeArgs>()
            }
            LaunchKind::PreClusterTma | LaunchKind::PreClusterPair => size_of::<PreTmaArgs>(),
            LaunchKind::PreGemm => size_of::<PreGemmArgs>(),
            LaunchKind::PostPreCluster
            | LaunchKind::PostPreClusterPair
            | LaunchKind::PostPreMid
            | LaunchKind::PostPreLogitClusters => size_of::<PostPrePcArgs>(),
        }
    }

    /// Whether this launcher's kernels can address `max_tokens` tokens of `cfg`: the per-token
    /// offsets they form in 32 bits (docs/kernels/address-arithmetic.md; every other offset is
    /// 64-bit, and the activation rows, whose strides only a call knows, are checked per call).
    /// The general pre kernel indexes its logit rows `ws_p[t * ldp]` and `h_res[t * n * n]` in
    /// u32 elements (ldp > n^2 bounds both); the GEMM kernel `h_res[t * n * n + j]`.
    pub fn offset_limit(self, cfg: &Config, max_tokens: usize) -> std::result::Result<(), String> {
        let n = cfg.n as u64;
        let t = max_tokens as u64;
        let (product, what) = match self {
            LaunchKind::Pre | LaunchKind::PostPre => {
                let ldp = (n * n + 2 * n).div_ceil(32) * 32;
                (t.saturating_sub(1).saturating_mul(ldp), "(T - 1) x ldp logit elements")
            }
            LaunchKind::PreGemm => (t.saturating_mul(n * n), "T x n^2 h_res elements"),
            _ => return Ok(()),
        };
        if product > u32::MAX as u64 {
            return Err(format!("its 32-bit offsets reach {what} = {product} at T = {max_tokens}, over 2^32 - 1"));
        }
        Ok(())
    }

    /// The few-token `pre` kernels (a grid-wide arrival; CTAs poll each other's rows).
    pub const fn is_few_token(self) -> bool {
        matches!(self, LaunchKind::PreDecode | LaunchKind::PreMid)
    }
}

/// The kernel a plan runs for a range of token counts: a catalogue row, its launcher and its
/// loaded function.
#[derive(Debug, Clone)]
pub struct Bucket {
    /// Smallest token count this bucket serves.
    pub min_tokens: usize,
    /// Largest token count this bucket serves (`usize::MAX` for the last).
    pub max_tokens: usize,
    /// The catalogue row chosen for these token counts.
    pub variant: &'static Variant,
    /// The launcher that builds its argument block and grid.
    pub kind: LaunchKind,
    /// The loaded kernel.
    pub func: Function,
    /// Persistent kernels (`persistent`, `token_ring`): the CTAs the device holds at once with
    /// this plan's shared memory (whole clusters), the most a grid launches; found when the plan
    /// is built, so the launch path does no occupancy work. 0 for the others.
    pub resident_ctas: u32,
}

/// What a launcher reads from a catalogue row (its tile, block and geometry), for buckets and
/// for the device-free checks of the launch limits.
pub trait Row {
    /// The catalogue row.
    fn variant(&self) -> &Variant;
    /// The kernel's entry symbol.
    fn entry(&self) -> &str {
        &self.variant().entry.entry
    }
    /// Threads per CTA.
    fn threads(&self) -> u32 {
        self.variant().entry.threads
    }
    /// Tokens per CTA (or per cluster, or per ring stage).
    fn tokens_per_cta(&self) -> usize {
        self.variant().entry.tile.tokens as usize
    }
    /// Channels per thread of the per-channel loops.
    fn v(&self) -> usize {
        self.variant().entry.geometry.channels_per_thread as usize
    }
    /// Threads that share one work item (a token x a chunk of channels).
    fn threads_per_item(&self) -> u32 {
        self.variant().entry.geometry.threads_per_item
    }
    /// CTAs per thread-block cluster (1: no cluster); the grid is a multiple.
    fn cluster(&self) -> u32 {
        self.variant().entry.geometry.cluster
    }
    /// Most dynamic shared memory the kernel may ask for, bytes.
    fn dynamic_shared_max(&self) -> u32 {
        self.variant().entry.geometry.dynamic_shared_max
    }
    /// Bytes after each stream row of a tile staged in shared memory.
    fn row_pad(&self) -> usize {
        self.variant().entry.geometry.row_pad as usize
    }
    /// Whether the row has trait `t` (cooperative, persistent, token ring, ...).
    fn has(&self, t: Trait) -> bool {
        self.variant().entry.geometry.has(t)
    }
}

impl Row for Variant {
    fn variant(&self) -> &Variant {
        self
    }
}

impl Bucket {
    /// The kernel's entry symbol.
    pub fn entry(&self) -> &'static str {
        &self.variant.entry.entry
    }
}

impl Row for Bucket {
    fn variant(&self) -> &Variant {
        self.variant
    }
}

/// What a plan's launchers read besides the bucket: the configuration, the storage dtype and the
/// device's SM count.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ctx {
    pub cfg: Config,
    pub dtype: Dtype,
    pub sm_count: u32,
    pub max_tokens: usize,
    pub arch: &'static str,
    /// The plan's device (ordinal + 1), which every view must be on.
    pub device: u32,
}

impl Ctx {
    /// The error of a launch whose kernel cannot take this shape (a limit the catalogue's ranges
    /// should already exclude; reported before anything is launched).
    pub fn refused(&self, stage: Stage, entry: &str, why: String) -> Error {
        Error::NoVariant {
            stage: stage.name().into(),
            arch: self.arch.into(),
            shape: format!("n={} C={} {}", self.cfg.n, self.cfg.c, self.dtype),
            rejected: vec![format!("{entry}: {why}")],
        }
    }
}

/// Whether a plan's launches may overlap the kernel before them on the stream (programmatic
/// dependent launch, sm_90+). Every stage kernel begins with `griddepcontrol.wait`, which holds
/// it until the previous kernel has finished and its writes are visible, and only then lets the
/// next kernel be scheduled (`griddepcontrol.launch_dependents`); so with [`Overlap::Launch`]
/// the results are exactly those of plain stream-ordered launches, and what overlaps is the
/// launch itself: the grid is scheduled and its CTAs start while the previous kernel drains.
/// Measured on an H100 in a CUDA graph: 0.1-1.7 us less per call at decode sizes (post T = 16
/// 2.74 -> 2.11 us, pre T = 1 7.37 -> 6.42 us); nothing measurable at large T
/// (docs/decisions/0004-programmatic-dependent-launch-by-default.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Overlap {
    /// Plain launches: the kernel starts when the previous one has completed.
    Off,
    /// Programmatic dependent launch (the default).
    #[default]
    Launch,
    /// As [`Overlap::Launch`], and the caller promises that no kernel which may still be running
    /// when a call is launched writes the layer's weights (`phi`, `gamma_k`, `scale`, `base`):
    /// weights loaded once, as in inference. The persistent-cluster `pre` and `post_pre` kernels
    /// (n = 4, bf16, a few dozen tokens and more) and the logit-cluster ones (n = 4, T <= 16) then
    /// load phi before the grid dependency, while the previous kernel drains; activations and the
    /// workspace are still touched only after it.
    /// Measured on an H200 (bf16, T = 256 .. 2048, C = 4096 and 7168): 0.5-2.1 us less per
    /// call, up to 8% at T = 256 (docs/decisions/0004-programmatic-dependent-launch-by-default.md).
    /// Broken, the promise gives results computed from stale weights, never a fault.
    Weights,
}

/// The largest argument block of any launcher, in 8-byte words ([`PreTmaArgs`]: 368 bytes).
const ARG_WORDS: usize = 48;
const _: () = {
    let mut i = 0;
    while i < LaunchKind::ALL.len() {
        assert!(LaunchKind::ALL[i].arg_bytes() <= ARG_WORDS * 8);
        i += 1;
    }
};

/// One kernel launch as data.
#[derive(Clone, Copy)]
pub(crate) struct Launch {
    func: Function,
    grid: u32,
    block: u32,
    shared: u32,
    cooperative: bool,
    /// The kernel waits for the previous one before touching global memory (may overlap it).
    grid_dependency: bool,
    /// The argument block, 8-byte aligned (the kernels' `.param .align 8`).
    args: [u64; ARG_WORDS],
}

impl std::fmt::Debug for Launch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Launch")
            .field("grid", &self.grid)
            .field("block", &self.block)
            .field("shared", &self.shared)
            .field("cooperative", &self.cooperative)
            .finish()
    }
}

impl Launch {
    /// Bucket `b`'s kernel on `grid` CTAs of `block` threads with `shared` bytes of dynamic
    /// shared memory and the argument block `args` (whose size the plan checked against the
    /// kernel's parameter bytes when it loaded it).
    pub fn new<A: bytemuck::Pod>(b: &Bucket, grid: u32, block: u32, shared: u32, args: &A) -> Launch {
        let mut words = [0u64; ARG_WORDS];
        let bytes = bytemuck::bytes_of(args);
        bytemuck::cast_slice_mut::<u64, u8>(&mut words)[..bytes.len()].copy_from_slice(bytes);
        Launch {
            func: b.func,
            grid,
            block,
            shared,
            cooperative: b.has(Trait::Cooperative),
            grid_dependency: b.has(Trait::GridDependency),
            args: words,
        }
    }

    /// Enqueues the launch on `stream`: one `cuLaunchKernel` (or its cooperative / dependent
    /// form), no allocation.
    #[inline]
    pub fn enqueue(&self, stream: &Stream, overlap: Overlap) -> Result<()> {
        stream.bind()?;
        let mut args = self.args;
        // One pointer per kernel parameter, into the argument block at that parameter's offset
        // (a fixed array: no allocation on the launch path).
        let base = args.as_mut_ptr() as *mut u8;
        let mut params = [std::ptr::null_mut::<c_void>(); MAX_PARAMS];
        for (p, &off) in params.iter_mut().zip(&self.func.param_offsets[..self.func.param_count as usize]) {
            *p = base.wrapping_add(off as usize) as *mut c_void;
        }
        // SAFETY: the kernel's parameters tile its parameter bytes at these offsets (checked at
        // load against the code object and the driver), and the launcher's argument block has
        // exactly that size (checked at load too), so each pointer covers its parameter inside
        // `args`, which outlives the call; the op validated every device range in the block
        // (dtype, rows, stride, length, alignment) against what this grid reads and writes.
        unsafe {
            ffi::launch(
                self.func.raw,
                (self.grid, 1, 1),
                (self.block, 1, 1),
                self.shared,
                stream.raw(),
                params.as_mut_ptr(),
                ffi::LaunchMode {
                    cooperative: self.cooperative,
                    programmatic: self.grid_dependency && overlap != Overlap::Off,
                },
            )
        }
    }
}

/// Test support: for every sm_90a catalogue row `select` picks, its C range must be exactly what
/// `fits(row, n, dtype, C)` (the launcher's limits) accepts at its ends, for each n and dtype it
/// lists: `c.min` and `c.max` fit, and `c.max + 8` does not (the selector never picks a kernel
/// the launch would refuse, and the range is not smaller than the kernel allows). Returns how
/// many rows were checked.
#[cfg(test)]
pub(crate) fn assert_c_range_is_what_fits(
    select: impl Fn(&Variant) -> bool,
    fits: impl Fn(&Variant, usize, Dtype, usize) -> bool,
) -> usize {
    let registry = mhc_loader::Registry::embedded().unwrap();
    let mut seen = 0;
    for v in registry.variants().iter().filter(|v| v.arch == mhc_loader::Arch::Sm90a && select(v)) {
        let (lo, hi) = (v.entry.c.min as usize, v.entry.c.max as usize);
        for &n in &v.entry.n {
            for dtype in &v.entry.dtypes {
                let dtype: Dtype = dtype.parse().unwrap();
                let n = n as usize;
                assert!(fits(v, n, dtype, lo) && fits(v, n, dtype, hi), "{}: C {lo}..={hi} must launch", v.id());
                assert!(
                    !fits(v, n, dtype, hi + 8),
                    "{}: C = {} launches too, the catalogue range is short",
                    v.id(),
                    hi + 8
                );
            }
        }
        seen += 1;
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every sm_90a catalogue row names a launcher this runtime has, whose argument block is
    /// exactly the kernel's parameter bytes as the catalogue records them.
    #[test]
    fn every_row_has_a_launcher_of_its_parameter_size() {
        let reg = mhc_loader::Registry::embedded().unwrap();
        let mut seen = 0;
        for v in reg.variants().iter().filter(|v| v.arch == mhc_loader::Arch::Sm90a) {
            let kind = LaunchKind::from_name(&v.entry.launch)
                .unwrap_or_else(|| panic!("{}: no launcher {:?}", v.id(), v.entry.launch));
            assert_eq!(kind.arg_bytes(), v.resources.kernarg_bytes as usize, "{}", v.id());
            seen += 1;
        }
        assert!(seen > 100);
        for k in LaunchKind::ALL {
            assert_eq!(LaunchKind::from_name(k.name()), Some(k));
            assert!(reg.variants().iter().any(|v| v.entry.launch == k.name()), "no row uses {}", k.name());
        }
    }

    /// A row launched as a programmatic dependent launch (`grid_dependency`) must wait before it
    /// touches global memory, or it could read what the previous kernel has not written yet, or
    /// overwrite what it still reads. Checked on the PTX source of every such sm_90a entry: its
    /// first `griddepcontrol.wait` precedes its first global load, store, copy, atomic or
    /// reduction (an L2 prefetch may come first). The one window: an entry that reads the
    /// weights early ([`Overlap::Weights`]) branches past its first wait on that flag, and until
    /// its next wait (predicated on the flag) it may only read global memory: read-only loads
    /// (`ld.global.nc`) or bulk copies into its own shared memory (`cp.async.bulk.shared::cluster.global`).
    #[test]
    fn overlapped_kernels_wait_before_global_memory() {
        // The instruction (its predicate dropped) names global memory, or is an atomic,
        // reduction or ordered access outside shared memory; prefetches to L2 move nothing
        // into the kernel and may run ahead of the wait.
        let ordered = ["red.", "atom.", "ld.acquire", "ld.relaxed", "st.async", "st.relaxed", "st.release"];
        let is_global = |l: &&str| {
            let op = l.strip_prefix('@').map_or(*l, |p| p.split_once(' ').map_or("", |(_, rest)| rest.trim_start()));
            let op = op.split_whitespace().next().unwrap_or("");
            !op.contains("prefetch")
                && !op.starts_with("cp.async.mbarrier")
                && (op.contains(".global") || (ordered.iter().any(|g| op.starts_with(g)) && !op.contains(".shared")))
        };
        let reg = mhc_loader::Registry::embedded().unwrap();
        let (mut checked, mut early) = (0, 0);
        for v in reg.variants().iter().filter(|v| v.arch == mhc_loader::Arch::Sm90a && v.has(Trait::GridDependency)) {
            let path = v.entry.file.replace("asm/bin/", "asm/ptx/").replace(".cubin", ".ptx");
            let src = std::fs::read_to_string(format!("{}/{path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
            let body = src
                .split(".visible .entry ")
                .find(|b| b.starts_with(&format!("{}(", v.entry.entry)))
                .unwrap_or_else(|| panic!("{} not in {path}", v.entry.entry));
            let code: Vec<&str> = body.lines().map(|l| l.split("//").next().unwrap_or("").trim()).collect();
            let first_global = code.iter().position(is_global).unwrap_or(usize::MAX);
            let wait = code
                .iter()
                .position(|l| l.contains("griddepcontrol.wait"))
                .unwrap_or_else(|| panic!("{}: no griddepcontrol.wait", v.id()));
            assert!(!code[wait].starts_with('@'), "{}: the first wait is predicated", v.id());
            if let Some(skip) = code[..wait].iter().position(|l| l.starts_with("@%p_early bra")) {
                // the early-weights window: from the branch target to the flag's own wait
                let target = code[skip].rsplit(' ').next().unwrap().trim_end_matches(';');
                let start = code.iter().position(|l| *l == format!("{target}:")).unwrap();
                let end = start
                    + code[start..]
                        .iter()
                        .position(|l| l.starts_with("@%p_early griddepcontrol.wait"))
                        .unwrap_or_else(|| panic!("{}: no wait after the early weights", v.id()));
                assert!(
                    code[..skip].iter().all(|l| !is_global(l)),
                    "{}: global access before the flag's branch",
                    v.id()
                );
                let reads = |l: &&&str| {
                    l.starts_with("ld.global.nc.") || l.starts_with("cp.async.bulk.shared::cluster.global.")
                };
                assert!(
                    code[start..end].iter().filter(|l| is_global(l)).all(|l| reads(&l)),
                    "{}: only reads of global memory may precede the early-weights wait",
                    v.id()
                );
                early += 1;
            } else {
                assert!(wait < first_global, "{}: global access before griddepcontrol.wait", v.id());
            }
            checked += 1;
        }
        assert!(checked > 100, "only {checked} overlapped rows");
        assert!(early > 0, "no row reads the weights early");
    }
}
