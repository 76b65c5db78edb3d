//! The CUDA kernels this build embeds: one table row per kernel (its image, entry symbol,
//! specialisation and tile), and the `#[repr(C)]` argument struct of each family, whose size the
//! device checks against the kernel's parameter bytes when it loads the kernel.
//!
//! A row's index is its cache slot in the device (O(1), no string work after the plan is
//! built). The sources are `asm/ptx/sm90/*.ptx` (written by `asm/ptx/sm90/gen_forward.py`),
//! assembled by `mhc asm` into `asm/bin/sm90/*.cubin`.

use super::device::CudaArch;
use crate::config::{Dtype, Formulation, Stage};
use std::sync::OnceLock;

/// An embedded code object.
pub struct Image {
    /// Path relative to the repository root.
    pub name: &'static str,
    pub bytes: &'static [u8],
}

pub const IMG_POST: usize = 0;
pub const IMG_HEAD: usize = 1;
pub const IMG_STATIC: usize = 2;
pub const IMG_EXPAND: usize = 3;
pub const IMG_PRE: usize = 4;
pub const IMG_COEFFS: usize = 5;
pub const IMG_PRE_DECODE: usize = 6;
pub const IMG_PRE_PC: usize = 7;
pub const IMG_PRE_GEMM: usize = 8;

pub static IMAGES: [Image; 9] = [
    Image { name: "asm/bin/sm90/post.cubin", bytes: include_bytes!("../../../asm/bin/sm90/post.cubin") },
    Image { name: "asm/bin/sm90/head.cubin", bytes: include_bytes!("../../../asm/bin/sm90/head.cubin") },
    Image { name: "asm/bin/sm90/static.cubin", bytes: include_bytes!("../../../asm/bin/sm90/static.cubin") },
    Image { name: "asm/bin/sm90/expand.cubin", bytes: include_bytes!("../../../asm/bin/sm90/expand.cubin") },
    Image { name: "asm/bin/sm90/pre.cubin", bytes: include_bytes!("../../../asm/bin/sm90/pre.cubin") },
    Image { name: "asm/bin/sm90/coeffs.cubin", bytes: include_bytes!("../../../asm/bin/sm90/coeffs.cubin") },
    Image { name: "asm/bin/sm90/pre_decode.cubin", bytes: include_bytes!("../../../asm/bin/sm90/pre_decode.cubin") },
    Image { name: "asm/bin/sm90/pre_pc.cubin", bytes: include_bytes!("../../../asm/bin/sm90/pre_pc.cubin") },
    Image { name: "asm/bin/sm90/pre_gemm.cubin", bytes: include_bytes!("../../../asm/bin/sm90/pre_gemm.cubin") },
];

/// One kernel of the table.
#[derive(Debug, Clone)]
pub struct KernelDesc {
    pub arch: CudaArch,
    pub stage: Stage,
    pub dtype: Dtype,
    /// `None`: the kernel computes the same thing for both formulations.
    pub formulation: Option<Formulation>,
    /// Streams the kernel is specialised for; 0 = any n (a run-time argument).
    pub n: usize,
    pub entry: &'static str,
    pub image: usize,
    pub param_bytes: usize,
    /// Channels per thread of the per-channel loops (the C granule is 8 for every kernel).
    pub v: usize,
    /// Tokens per CTA (head).
    pub tokens_per_cta: usize,
    /// Threads per work item (post: an item is a token x a chunk of `v` channels; the `_lk`
    /// kernels put n threads on it, one per output stream).
    pub item_threads: u32,
    /// Threads per CTA the kernel is launched with.
    pub threads: u32,
    /// Dynamic shared memory the kernel may ask for (bytes; 0 = none).
    pub max_dynamic_shared: u32,
    /// Largest token count this variant is selected for (`usize::MAX`: all). A plan keeps one
    /// bucket per distinct value, smallest first, so a decode variant precedes the general one.
    pub max_tokens: usize,
    /// Smallest token count this variant is selected for (1: all). Among buckets with the same
    /// `max_tokens`, the one with the larger `min_tokens` is tried first (`pre_pc` before the
    /// general `pre`, which then serves only the counts below it).
    pub min_tokens: usize,
    /// CTAs per thread-block cluster (the kernel's `.reqnctapercluster`; 1 = no cluster). The
    /// grid is a multiple of it.
    pub cluster: u32,
    /// Cluster head only: the CTA also copies its slice of phi to shared memory (decode variant).
    pub phi_in_shared: bool,
    /// The CTA copies its token tile to dynamic shared memory once (cluster head, `static_cl`,
    /// `static_mma`).
    pub tile_in_shared: bool,
    /// Bytes left after each stream row of that tile (`static_mma`: [`STATIC_MMA_ROW_PAD`]).
    pub tile_row_pad: usize,
    /// The CTA also copies gamma (C f32) beside that tile (`static_mma`).
    pub gamma_in_shared: bool,
    /// Launched cooperatively (`cuLaunchCooperativeKernel`): the kernel has a grid-wide
    /// arrival, so every CTA must be resident at once. The driver then starts the grid only
    /// when all of it fits (two such grids on two streams cannot each hold half the SMs and
    /// wait for the other half), or refuses it with an error.
    pub cooperative: bool,
    /// Persistent clusters: the grid is as many clusters as the device holds at once (asked
    /// when the plan is built), and each walks the token tiles `cluster_id + j * clusters`.
    pub persistent: bool,
    /// The kernel executes `griddepcontrol.wait` before its first global memory access (every
    /// sm_90a stage kernel; checked against the PTX source by a unit test), so the plan may
    /// launch it as a programmatic dependent launch ([`super::plan::Overlap`]).
    pub grid_dependency: bool,
    /// Persistent CTAs that stream their tokens through a ring of [`STATIC_PR_STAGES`]
    /// shared-memory stages (`static_pr`); the grid is as many CTAs as the SMs hold.
    pub token_ring: bool,
    /// Which `pre` kernel family a row is: its launch and its constraints differ (pre.rs picks
    /// the launch from it, so the launch path compares no strings). `General` for every row of
    /// the other stages.
    pub pre_family: PreFamily,
}

/// The `pre` kernel families (src/device/cuda/pre.rs, pre_decode.rs, pre_pc.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PreFamily {
    /// pre.ptx: split-K decode shape and prefill tiles, every configuration.
    General,
    /// pre_decode.ptx `mhc_pre_decode_*`: T <= 16, one grid arrival.
    Decode,
    /// pre_decode.ptx `mhc_pre_mid_*`: T = 17..=64, two grid arrivals.
    Mid,
    /// pre_pc.ptx: persistent 16-CTA clusters.
    Cluster,
    /// pre_gemm.ptx: n = 8 / 16 / 32 as a tiled GEMM, the last CTA of a token tile finishes it.
    Gemm,
}

pub const NS: [usize; 6] = [1, 2, 4, 8, 16, 32];

/// Channels per thread of post/static/expand and of head's phase 2 (`n*V <= 64` registers).
pub const fn vchan(n: usize) -> usize {
    let v = 64 / n;
    if v > 8 {
        8
    } else {
        v
    }
}

/// The table, built once.
pub fn kernels() -> &'static [KernelDesc] {
    static TABLE: OnceLock<Vec<KernelDesc>> = OnceLock::new();
    TABLE.get_or_init(build)
}

/// Shorthand used by the device: the table as a slice.
pub struct Kernels;
pub static KERNELS: Kernels = Kernels;
impl std::ops::Deref for Kernels {
    type Target = [KernelDesc];
    fn deref(&self) -> &[KernelDesc] {
        kernels()
    }
}

fn name(prefix: &str, rest: String) -> &'static str {
    Box::leak(format!("{prefix}{rest}").into_boxed_str())
}

/// A table row with the defaults most kernels share (sm_90a, both formulations, one token per
/// CTA, no dynamic shared memory, every token count, no cluster, a plain launch); the rows
/// below override what differs.
#[allow(clippy::too_many_arguments)]
fn row(
    stage: Stage,
    dtype: Dtype,
    n: usize,
    entry: &'static str,
    image: usize,
    param_bytes: usize,
    v: usize,
    threads: u32,
) -> KernelDesc {
    KernelDesc {
        arch: CudaArch::Sm90a,
        stage,
        dtype,
        formulation: None,
        n,
        entry,
        image,
        param_bytes,
        v,
        tokens_per_cta: 1,
        item_threads: 1,
        threads,
        max_dynamic_shared: 0,
        max_tokens: usize::MAX,
        min_tokens: 1,
        cluster: 1,
        phi_in_shared: false,
        tile_in_shared: false,
        tile_row_pad: 0,
        gamma_in_shared: false,
        cooperative: false,
        persistent: false,
        grid_dependency: true,
        token_ring: false,
        pre_family: PreFamily::General,
    }
}

fn build() -> Vec<KernelDesc> {
    use std::mem::size_of;
    let mut t = Vec::new();
    let dtypes = [Dtype::Bf16, Dtype::F32];
    let forms = [(Formulation::DeepSeekV4, "v4"), (Formulation::Paper, "paper")];
    let post = |dtype: Dtype, n, entry, v| row(Stage::Post, dtype, n, entry, IMG_POST, size_of::<PostArgs>(), v, 128);
    for (form, fname) in forms {
        for dtype in dtypes {
            for n in NS {
                let entry = name("mhc_post_", format!("{fname}_{}_n{n}", dtype.name()));
                t.push(KernelDesc { formulation: Some(form), ..post(dtype, n, entry, vchan(n)) });
            }
        }
    }
    // Decode variants of post (V = 2: 4x the threads for a few tokens, every load first), n <= 8,
    // T <= 64 (the catalogue's range).
    for (form, fname) in forms {
        for dtype in dtypes {
            for n in [1, 2, 4, 8] {
                let entry = name("mhc_post_", format!("{fname}_{}_n{n}_v2", dtype.name()));
                t.push(KernelDesc { formulation: Some(form), max_tokens: 64, ..post(dtype, n, entry, 2) });
            }
        }
    }
    // post decode for n = 16 / 32 (T <= 16, measured): n threads per item, lane k writes output
    // stream k (post.ptx `_lk`).
    for (form, fname) in forms {
        for dtype in dtypes {
            for n in [16, 32] {
                let entry = name("mhc_post_", format!("{fname}_{}_n{n}_lk", dtype.name()));
                let v = 8 / dtype.size();
                let lk = KernelDesc {
                    formulation: Some(form),
                    item_threads: n as u32,
                    max_tokens: 16,
                    ..post(dtype, n, entry, v)
                };
                t.push(lk);
            }
        }
    }
    // post on tensor cores (bf16, n = 16 / 32; the catalogue gives it T >= 65 at n = 32, T >= 400
    // at n = 16, and the C its x tile fits): one CTA per token, the token's x in shared memory,
    // h_res x by mma.sync (post.ptx `mhc_post_mma_*`).
    for (form, fname) in forms {
        for n in [16, 32] {
            let entry = name("mhc_post_mma_", format!("{fname}_bf16_n{n}"));
            t.push(KernelDesc {
                formulation: Some(form),
                max_dynamic_shared: POST_MMA_SMEM,
                tile_in_shared: true,
                tile_row_pad: POST_MMA_ROW_PAD,
                ..row(Stage::Post, Dtype::Bf16, n, entry, IMG_POST, size_of::<PostArgs>(), 8, 256)
            });
        }
    }
    let head = |dtype: Dtype, n, prefix, v, threads| {
        let entry = name(prefix, format!("{}_n{n}", dtype.name()));
        row(Stage::Head, dtype, n, entry, IMG_HEAD, size_of::<HeadArgs>(), v, threads)
    };
    for dtype in dtypes {
        for n in NS {
            t.push(KernelDesc { tokens_per_cta: (64 / n).min(8), ..head(dtype, n, "mhc_head_", vchan(n), 256) });
        }
    }
    // head on a cluster of CTAs per token tile (head.ptx, head.rs); the decode variant (`cld`)
    // stages phi's slice in shared memory too. n = 16 / 32 have no `cld` (its phi slice outgrows
    // shared memory) but `cl16`, the same kernel as `cl` on 16-CTA clusters, for decode sizes.
    let cl_ns: [&[usize]; 3] = [&[1, 2, 4, 8, 16, 32], &[1, 2, 4, 8], &[16, 32]];
    for ((prefix, phi_in_shared, smem, cluster), ns) in [
        ("mhc_head_cl_", false, HEAD_CL_SMEM, HEAD_CLUSTER),
        ("mhc_head_cld_", true, HEAD_CLD_SMEM, HEAD_CLUSTER),
        ("mhc_head_cl16_", false, HEAD_CL_SMEM, 16),
    ]
    .into_iter()
    .zip(cl_ns)
    {
        for dtype in dtypes {
            for &n in ns {
                t.push(KernelDesc {
                    tokens_per_cta: (64 / n).min(8),
                    max_dynamic_shared: smem,
                    cluster,
                    phi_in_shared,
                    tile_in_shared: true,
                    ..head(dtype, n, prefix, head_cl_v1(n), 128)
                });
            }
        }
    }
    // head for many tokens: persistent clusters walking the token tiles, phi in registers, x
    // through a ring of shared-memory stages (n <= 4; head.ptx, head.rs). pc4 (4-CTA clusters,
    // 4-token tiles) where its items fit, pc8 (8-CTA clusters, 4-token tiles) up to twice the C.
    for (prefix, (cluster, tokens)) in [("mhc_head_pc4_", HEAD_PC4), ("mhc_head_pc8_", HEAD_PC8)] {
        for dtype in dtypes {
            for n in [1, 2, 4] {
                t.push(KernelDesc {
                    tokens_per_cta: tokens,
                    max_dynamic_shared: HEAD_PC_SMEM,
                    cluster,
                    tile_in_shared: true,
                    persistent: true,
                    ..head(dtype, n, prefix, 16 / dtype.size(), 256)
                });
            }
        }
    }
    let static_row = |dtype: Dtype, n, prefix| {
        let entry = name(prefix, format!("{}_n{n}", dtype.name()));
        row(Stage::Static, dtype, n, entry, IMG_STATIC, size_of::<StaticArgs>(), vchan(n), static_threads(n))
    };
    for dtype in dtypes {
        for n in NS {
            t.push(KernelDesc { max_dynamic_shared: (STATIC_MAX_C * 4) as u32, ..static_row(dtype, n, "mhc_static_") });
        }
    }
    // static, one token per CTA (`static_cl`, n <= 8): the token's x in shared memory; and the
    // persistent version for many tokens (`static_pr`): a ring of token tiles.
    for (prefix, token_ring, smem) in
        [("mhc_static_cl_", false, STATIC_CL_SMEM), ("mhc_static_pr_", true, STATIC_PR_SMEM)]
    {
        for dtype in dtypes {
            for n in [1, 2, 4, 8] {
                t.push(KernelDesc {
                    max_dynamic_shared: smem,
                    tile_in_shared: true,
                    token_ring,
                    ..static_row(dtype, n, prefix)
                });
            }
        }
    }
    // static on tensor cores (bf16, n = 16, 32): a token per CTA (or per cluster of 2 / 4 CTAs,
    // each with C / cluster channels) as static_cl, H X by mma.sync.
    for (prefix, cluster) in [("mhc_static_mma_", 1), ("mhc_static_mma_cl2_", 2), ("mhc_static_mma_cl4_", 4)] {
        for n in [16, 32] {
            t.push(KernelDesc {
                max_dynamic_shared: STATIC_MMA_SMEM,
                cluster,
                tile_in_shared: true,
                tile_row_pad: STATIC_MMA_ROW_PAD,
                gamma_in_shared: true,
                ..static_row(Dtype::Bf16, n, prefix)
            });
        }
    }
    for dtype in dtypes {
        let entry = name("mhc_expand_", dtype.name().to_string());
        t.push(row(Stage::Expand, dtype, 0, entry, IMG_EXPAND, size_of::<ExpandArgs>(), 8, 256));
    }
    // The few-token pre kernels (asm/ptx/sm90/pre_decode.ptx, n <= 4, no gamma_f): launched
    // cooperatively (CTAs poll each other's tagged rows), one row per dtype; `tokens` is the
    // token-row capacity, `max` the largest T the plan gives them.
    use super::pre_decode as pd;
    let few_token = |t: &mut Vec<KernelDesc>, kinds: [(Dtype, &'static str); 2], family, tokens, max, shared| {
        for (dtype, entry) in kinds {
            t.push(KernelDesc {
                tokens_per_cta: tokens,
                max_tokens: max,
                max_dynamic_shared: shared,
                cooperative: true,
                pre_family: family,
                ..row(Stage::Pre, dtype, 0, entry, IMG_PRE_DECODE, size_of::<pd::PreDecodeArgs>(), 8, 256)
            });
        }
    };
    // mid16, T <= 8 where C >= 512: the mid kernel in 16 static token rows.
    few_token(&mut t, pd::MID16_DTYPES, PreFamily::Mid, pd::DECODE_KERNEL_MAX_TOKENS, pd::MID16_MAX_TOKENS, 0);
    // decode, T <= 16: where the mid kernel cannot run (C < 512) and for forced CTA counts
    // (`PreKernel::Decode`); pre_decode.rs `decode_unsupported`, checked by `reject`. Where the
    // mid kernel runs, the plan puts this bucket behind it (plan.rs `decode_behind_mid`).
    let decode_max = pd::DECODE_KERNEL_MAX_TOKENS;
    few_token(&mut t, pd::DECODE_DTYPES, PreFamily::Decode, decode_max, decode_max, 0);
    // mid, T = 1..=64 where C >= 512 (`mid_unsupported`): CTA s finishes token s and publishes
    // its h_pre; ahead of the decode kernel, pre_pc and the general kernel wherever it runs.
    let mid_max = pd::MID_MAX_TOKENS;
    few_token(&mut t, pd::MID_DTYPES, PreFamily::Mid, mid_max, mid_max, pd::MID_SMEM);
    use super::pre_pc as pc;
    // A persistent-cluster row of pre_pc.ptx: `stage`, `entry`, T range, ring, argument bytes,
    // threads.
    let cluster_row = |stage, entry, min_tokens, max_tokens, shared, args, threads| KernelDesc {
        tokens_per_cta: pc::PC_TILE_TOKENS,
        min_tokens,
        max_tokens,
        max_dynamic_shared: shared,
        cluster: pc::PC_CLUSTER,
        tile_in_shared: true,
        persistent: true,
        pre_family: PreFamily::Cluster,
        ..row(stage, Dtype::Bf16, 4, entry, IMG_PRE_PC, args, 8, threads)
    };
    let (pre_args, tma_args) = (size_of::<super::pre_decode::PreDecodeArgs>(), size_of::<pc::PreTmaArgs>());
    // pre for many tokens (bf16, n = 4, C % 128 == 0, C <= 4096, no gamma_f): persistent
    // clusters of 16 CTAs, phi in registers, x read once (pre_pc.rs); selected before the
    // general kernel where it applies (`pre_pc_unsupported`, checked by `reject`). First its TMA
    // entry (C % 1024 == 0, `pre_pc_tma_unsupported`: the ring filled by tensor copies), then the
    // cp.async one for the other C.
    for (entry, shared, args) in
        [(pc::PC_TMA_ENTRY, pc::PC_TMA_MAX_SHARED, tma_args), (pc::PC_ENTRY, pc::PC_MAX_SHARED, pre_args)]
    {
        t.push(cluster_row(Stage::Pre, entry, pc::PC_MIN_TOKENS, usize::MAX, shared, args, pc::PC_THREADS));
    }
    // post_pre for many tokens, the same shapes: the fused entry of pre_pc.ptx (x' computed in
    // the ring, never read back); ahead of the general post_pre kernel from 65 tokens. Up to
    // POST_PRE_PCM_MAX_TOKENS its `m` entry (the post warps also mix and fill the ring).
    for (entry, max_tokens) in
        [(pc::POST_PRE_PCM_ENTRY, pc::POST_PRE_PCM_MAX_TOKENS), (pc::POST_PRE_PC_ENTRY, usize::MAX)]
    {
        let (shared, args) = (pc::PC_FUSED_MAX_SHARED, size_of::<pc::PostPrePcArgs>());
        t.push(cluster_row(
            Stage::PostPre,
            entry,
            pc::POST_PRE_PC_MIN_TOKENS,
            max_tokens,
            shared,
            args,
            pc::PC_FUSED_THREADS,
        ));
    }
    // pre for n = 8 / 16 / 32 (bf16, no gamma_k / gamma_f): 128-token x 128-logit GEMM tiles
    // through a shared-memory ring, K split while SMs would idle (pre_gemm.rs); selected before
    // the general kernel where it applies (`pre_gemm_unsupported`, checked by `reject`).
    for (n, entry) in super::pre_gemm::GEMM_NS.into_iter().zip(super::pre_gemm::GEMM_ENTRIES) {
        t.push(KernelDesc {
            tokens_per_cta: super::pre_gemm::GEMM_TILE_TOKENS,
            min_tokens: super::pre_gemm::gemm_min_tokens(n),
            max_dynamic_shared: super::pre_gemm::GEMM_SHARED,
            tile_in_shared: true,
            pre_family: PreFamily::Gemm,
            ..row(
                Stage::Pre,
                Dtype::Bf16,
                n,
                entry,
                IMG_PRE_GEMM,
                size_of::<super::pre_gemm::PreGemmArgs>(),
                8,
                super::pre_gemm::GEMM_THREADS,
            )
        });
    }
    // pre and post_pre: one kernel family, any n, both formulations (run-time flags); pre.rs.
    for stage in [Stage::Pre, Stage::PostPre] {
        let entries = if stage == Stage::PostPre { super::pre::POST_DTYPES } else { super::pre::DTYPES };
        for (dtype, entry) in entries {
            t.push(KernelDesc {
                tokens_per_cta: super::pre::TILE_TOKENS,
                ..row(stage, dtype, 0, entry, IMG_PRE, size_of::<super::pre::PreArgs>(), 8, 256)
            });
        }
    }
    // The coefficient stage alone (asm/ptx/sm90/coeffs.ptx, the loader issue's kernel), hosted as
    // the `sinkhorn` stage: any dtype (it reads f32 logits only), any formulation (a flag).
    for dtype in dtypes {
        t.push(KernelDesc {
            tokens_per_cta: 4,
            grid_dependency: false, // coeffs.ptx has no griddepcontrol.wait: always stream-ordered
            ..row(Stage::Sinkhorn, dtype, 0, "mhc_coeffs", IMG_COEFFS, size_of::<CoeffsArgs>(), 8, 128)
        });
    }
    t
}

/// `coeffs` arguments (asm/ptx/sm90/coeffs.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CoeffsArgs {
    pub p: u64,
    pub inv_rms: u64,
    pub scale: u64,
    pub base: u64,
    pub h_pre: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub tokens: u32,
    pub streams: u32,
    pub iters: u32,
    pub eps_hc: f32,
    pub flags: u32,
    pub p_stride: u32,
}
const _: () = assert!(std::mem::size_of::<CoeffsArgs>() == 80);

/// CTAs per cluster of the cluster head kernels (`mhc_head_cl_*`).
pub const HEAD_CLUSTER: u32 = 8;
/// Largest x tile (dynamic shared memory) of a cluster head CTA: two CTAs per SM still fit
/// (gen_forward.py `CL_SMEM`; the catalogue's C range of those variants keeps below it).
pub const HEAD_CL_SMEM: u32 = 112 * 1024;
/// The same for the decode variant (x tile and phi slice; gen_forward.py `CLD_SMEM`).
pub const HEAD_CLD_SMEM: u32 = 200 * 1024;
/// (CTAs per cluster, tokens per tile) of the persistent head kernels `mhc_head_pc4_*` and
/// `mhc_head_pc8_*` (gen_forward.py `PC_SHAPES`).
pub const HEAD_PC4: (u32, usize) = (4, 4);
pub const HEAD_PC8: (u32, usize) = (8, 4);
/// Stages of the persistent head kernel's x ring (gen_forward.py `PC_STAGES`).
pub const HEAD_PC_STAGES: usize = 3;
/// Its phase-1 items (stream, 16-byte chunk) per thread (gen_forward.py `PC_SLOTS`).
pub const HEAD_PC_SLOTS: usize = 2;
/// The ring's largest size, the dynamic shared memory it may ask for (gen_forward.py `PC_SMEM`).
pub const HEAD_PC_SMEM: u32 = 200 * 1024;

/// Threads of a static CTA: the data warps (4, or 8 for n >= 16) and the coefficient warp.
pub const fn static_threads(n: usize) -> u32 {
    if n <= 8 {
        128 + 32
    } else {
        256 + 32
    }
}

/// Largest token tile (a[] and x, dynamic shared memory) of a `static_cl` CTA (gen_forward.py
/// `ST_CL_SMEM`; the catalogue's C range keeps below it).
pub const STATIC_CL_SMEM: u32 = 100 * 1024;
/// Largest token tile (a[], gamma and the padded x rows) of a `static_mma` CTA, and the bytes after
/// each x row (gen_forward.py `ST_MMA_SMEM`, `ST_MMA_PAD`: rows 16 bytes apart modulo 128, so the
/// eight rows of an ldmatrix hit eight bank groups).
pub const STATIC_MMA_SMEM: u32 = 200 * 1024;
/// Dynamic shared memory the tensor-core post kernels may ask for (gen_forward.py POST_MMA_SMEM):
/// the token's x tile, n rows of C bf16 each followed by [`POST_MMA_ROW_PAD`] bytes.
pub const POST_MMA_SMEM: u32 = 220 * 1024;
/// Bytes after each x row of that tile (gen_forward.py POST_MMA_PAD).
pub const POST_MMA_ROW_PAD: usize = 16;
pub const STATIC_MMA_ROW_PAD: usize = 16;
/// Stages of the `static_pr` token ring and the most dynamic shared memory it may ask for (a[]
/// and the stages; gen_forward.py `ST_PR_STAGES`, `ST_PR_SMEM`).
pub const STATIC_PR_STAGES: usize = 3;
pub const STATIC_PR_SMEM: u32 = 160 * 1024;

/// Largest C of the static kernel: its `a[C]` row lives in shared memory (64 KiB at 16384).
pub const STATIC_MAX_C: usize = 32768;

/// `post` arguments (asm/ptx/sm90/post.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PostArgs {
    pub x: u64,
    pub f: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub out: u64,
    pub x_stride: u64,
    pub f_stride: u64,
    pub out_stride: u64,
    pub items: u32,
    pub chunks: u32,
    pub cbytes: u32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<PostArgs>() == 80);

/// `head` arguments (asm/ptx/sm90/head.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct HeadArgs {
    pub x: u64,
    pub phi: u64,
    pub scale: u64,
    pub base: u64,
    pub out: u64,
    pub x_stride: u64,
    pub out_stride: u64,
    pub tokens: u32,
    pub cbytes: u32,
    pub kchunks: u32,
    pub cchunks: u32,
    pub eps_norm: f32,
    pub eps_hc: f32,
    pub inv_k: f32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<HeadArgs>() == 88);

/// `static` arguments (asm/ptx/sm90/static.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct StaticArgs {
    pub x: u64,
    pub h_pre_logits: u64,
    pub h_post_logits: u64,
    pub h_res_logits: u64,
    pub gamma: u64,
    pub out: u64,
    pub x_stride: u64,
    pub out_stride: u64,
    pub tokens: u32,
    pub cbytes: u32,
    pub cchunks: u32,
    pub iters: u32,
    pub eps_hc: f32,
    pub eps_f: f32,
    pub inv_c: f32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<StaticArgs>() == 96);

/// `expand` arguments (asm/ptx/sm90/expand.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ExpandArgs {
    pub e: u64,
    pub out: u64,
    pub e_stride: u64,
    pub out_stride: u64,
    pub items: u32,
    pub chunks: u32,
    pub cbytes: u32,
    pub n: u32,
}
const _: () = assert!(std::mem::size_of::<ExpandArgs>() == 48);

/// Phase-1 tile of head: elements of the flattened row per thread (`n * V1 <= 32` phi registers).
pub const fn head_v1(n: usize) -> usize {
    let v = 32 / n;
    if v > 8 {
        8
    } else {
        v
    }
}

/// Phase-1 chunk of the cluster head kernels: [`head_v1`], but at least one 32-bit word of bf16
/// (gen_forward.py `cl_v1`: n = 16 / 32 read 2 elements).
pub const fn head_cl_v1(n: usize) -> usize {
    let v = head_v1(n);
    if v < 2 {
        2
    } else {
        v
    }
}

/// Test support: for every kernel `select` picks, the catalogue's C range must be exactly what
/// `fits(desc, C)` (the launcher's limits) accepts at its ends: `c.min` and `c.max` fit, and
/// `c.max + 8` does not (the selector never picks a kernel the launch would refuse, and the
/// range is not smaller than the kernel allows). Returns how many kernels were checked.
#[cfg(test)]
pub(crate) fn assert_c_range_is_what_fits(
    select: impl Fn(&KernelDesc) -> bool,
    fits: impl Fn(&KernelDesc, usize) -> bool,
) -> usize {
    let registry = mhc_loader::Registry::embedded().unwrap();
    let mut seen = 0;
    for desc in KERNELS.iter().filter(|d| select(d)) {
        let v = registry.variants().iter().find(|v| v.entry.entry == desc.entry).unwrap();
        let (lo, hi) = (v.entry.c.min as usize, v.entry.c.max as usize);
        assert!(fits(desc, lo) && fits(desc, hi), "{}: C {lo}..={hi} must launch", desc.entry);
        assert!(!fits(desc, hi + 8), "{}: C = {} launches too, the catalogue range is short", desc.entry, hi + 8);
        seen += 1;
    }
    seen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the device checks when it loads a kernel, checked offline for every row: the entry is
    /// in its image, the kernel parameters tile the argument struct, no local memory (spills).
    #[test]
    fn every_row_matches_its_image() {
        for d in kernels() {
            let obj =
                mhc_loader::parse(IMAGES[d.image].bytes).unwrap_or_else(|e| panic!("{}: {e}", IMAGES[d.image].name));
            let k = obj.kernel(d.entry).unwrap_or_else(|| panic!("{} not in {}", d.entry, IMAGES[d.image].name));
            assert_eq!(k.kernarg_bytes as usize, d.param_bytes, "{}: parameter bytes", d.entry);
            let mut end = 0;
            for p in &k.params {
                assert!(p.offset as usize >= end, "{}: overlapping parameters", d.entry);
                end = (p.offset + p.size) as usize;
            }
            assert_eq!(end, d.param_bytes, "{}: parameters do not tile the argument struct", d.entry);
            assert_eq!(k.local_bytes, 0, "{}: local memory (spills)", d.entry);
            assert!(
                k.max_threads >= d.threads,
                "{}: launched with {} threads, allows {}",
                d.entry,
                d.threads,
                k.max_threads
            );
        }
    }

    /// The `pre` family of a row (which launch pre.rs gives it) agrees with its entry, and only
    /// `pre` rows have one other than `General`.
    #[test]
    fn pre_families_match_their_entries() {
        for d in kernels() {
            let want = match d.entry {
                e if e.starts_with("mhc_pre_decode_") => PreFamily::Decode,
                e if e.starts_with("mhc_pre_mid") => PreFamily::Mid,
                e if [
                    super::super::pre_pc::PC_ENTRY,
                    super::super::pre_pc::PC_TMA_ENTRY,
                    super::super::pre_pc::POST_PRE_PC_ENTRY,
                    super::super::pre_pc::POST_PRE_PCM_ENTRY,
                ]
                .contains(&e) =>
                {
                    PreFamily::Cluster
                }
                e if e.starts_with("mhc_pre_gemm_") => PreFamily::Gemm,
                _ => PreFamily::General,
            };
            assert_eq!(d.pre_family, want, "{}", d.entry);
            let fused_cluster = d.stage == Stage::PostPre && d.pre_family == PreFamily::Cluster;
            assert!(d.stage == Stage::Pre || fused_cluster || d.pre_family == PreFamily::General, "{}", d.entry);
        }
        for family in [PreFamily::Decode, PreFamily::Mid, PreFamily::Cluster, PreFamily::Gemm] {
            assert!(kernels().iter().any(|d| d.pre_family == family), "no {family:?} row");
        }
    }

    /// A row launched as a programmatic dependent launch (`grid_dependency`) must wait before it
    /// touches global memory, or it could read what the previous kernel has not written yet (or
    /// overwrite what it still reads). Checked on the PTX source of every such entry: an
    /// unpredicated `griddepcontrol.wait` precedes its first global load, store, copy, atomic
    /// or reduction, and `griddepcontrol.launch_dependents` comes after that wait (so the next
    /// kernel can only ever overlap this one, never an earlier one). An L2 prefetch
    /// (`cp.async.bulk.prefetch.L2`) may come first: it neither reads into the CTA nor writes.
    #[test]
    fn overlapped_kernels_wait_before_global_memory() {
        let global = ["ld.global", "st.global", "cp.async.", "cp.reduce", "red.", "atom.", "ld.acquire", "st.async"];
        let mut checked = 0;
        for d in kernels().iter().filter(|d| d.grid_dependency) {
            let src_path = IMAGES[d.image].name.replace("asm/bin/", "asm/ptx/").replace(".cubin", ".ptx");
            let src = std::fs::read_to_string(format!("{}/{src_path}", env!("CARGO_MANIFEST_DIR"))).unwrap();
            let body = src
                .split(".visible .entry ")
                .find(|b| b.starts_with(&format!("{}(", d.entry)))
                .unwrap_or_else(|| panic!("{} not in {src_path}", d.entry));
            let code: Vec<&str> = body.lines().map(|l| l.split("//").next().unwrap_or("").trim()).collect();
            let is_global = |l: &&str| {
                global.iter().any(|g| l.contains(g))
                    && !l.starts_with("cp.async.mbarrier")
                    && !l.starts_with("cp.async.bulk.prefetch.L2")
            };
            let first_global = code.iter().position(is_global).unwrap_or(usize::MAX);
            let wait = code.iter().position(|l| *l == "griddepcontrol.wait;");
            let wait = wait.unwrap_or_else(|| panic!("{}: no unpredicated griddepcontrol.wait", d.entry));
            assert!(wait < first_global, "{}: global access before griddepcontrol.wait", d.entry);
            let trigger = code.iter().position(|l| l.contains("griddepcontrol.launch_dependents"));
            assert!(trigger.is_some_and(|i| i > wait), "{}: launch_dependents missing or before the wait", d.entry);
            checked += 1;
        }
        assert!(checked > 100, "only {checked} overlapped rows");
    }

    /// The loader selects post/head/static/expand from asm/catalogue.toml by entry symbol: every
    /// sm_90a catalogue variant of those stages needs a launch row here, and every such row a
    /// catalogue variant (else the plan reports a build inconsistency at run time).
    #[test]
    fn manifest_and_table_agree() {
        let reg = mhc_loader::Registry::embedded().unwrap();
        let stages = [Stage::Post, Stage::Head, Stage::Static, Stage::Expand];
        for v in reg.variants().iter().filter(|v| v.arch == mhc_loader::Arch::Sm90a) {
            if let Some(&st) = stages.iter().find(|s| s.name() == v.entry.stage) {
                assert!(
                    kernels().iter().any(|d| d.stage == st && d.entry == v.entry.entry),
                    "catalogue variant {} ({}) has no launch row",
                    v.id(),
                    v.entry.entry
                );
            }
        }
        for d in kernels().iter().filter(|d| stages.contains(&d.stage)) {
            assert!(
                reg.variants().iter().any(|v| v.entry.entry == d.entry && v.entry.stage == d.stage.name()),
                "table row {} is not in asm/catalogue.toml",
                d.entry
            );
        }
    }
}
