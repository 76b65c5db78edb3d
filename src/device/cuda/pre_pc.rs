//! `pre` for many tokens on persistent clusters (asm/ptx/sm90/pre_pc.ptx, entry
//! `mhc_pre_pc16_bf16_n4`): bf16 storage, n = 4, C a multiple of 128 up to [`PC_MAX_C`], no
//! gamma_f, T >= [`PC_MIN_TOKENS`]. Clusters of [`PC_CLUSTER`] CTAs stay resident (as many as
//! the device holds, found when the plan is built) and walk [`PC_TILE_TOKENS`]-token tiles; CTA
//! r owns channels `[r C/16, (r+1) C/16)` of every stream, keeps its slice of phi in registers
//! (bf16 hi + lo mma fragments) and its slice of x in a ring of shared-memory stages until it
//! has written its channels of `a`: x is read from memory once and phi once per kernel. The
//! partial logits meet through distributed shared memory. The plan selects it where
//! [`pre_pc_unsupported`] is `None`; the general kernel (pre.rs) serves the rest.

use super::memory::DeviceTensor;
use super::plan::{Bucket, Plan};
use super::pre::{Checked, PreOutViews, PreParamViews};
use super::stream::Stream;
use crate::config::Config;
use crate::error::Result;

/// The kernel's entry (asm/ptx/sm90/gen_pre_pc.py).
pub(crate) const PC_ENTRY: &str = "mhc_pre_pc16_bf16_n4";
/// CTAs per cluster (a non-portable size: the device allows it on the function when it loads it).
pub const PC_CLUSTER: u32 = 16;
/// Tokens per tile (= the cluster size: CTA r finishes token r of every tile).
pub const PC_TILE_TOKENS: usize = 16;
/// Threads per CTA: 8 math warps and 2 coefficient warps (alternate tiles).
pub const PC_THREADS: u32 = 320;
/// Stages of the x ring and the bytes after each token row of a stage (gen_pre_pc.py).
pub const PC_STAGES: usize = 4;
pub const PC_ROW_PAD: usize = 64;
/// Largest C: each math warp holds 4 runs of 32 elements of phi's slice in registers (gen_pre_pc.py
/// `RMAX`; 10 warps per CTA, 3 on one SM sub-partition, cap a thread at 168 registers).
pub const PC_MAX_C: usize = 4096;
/// The ring's size at [`PC_MAX_C`], the dynamic shared memory the kernel may ask for.
pub const PC_MAX_SHARED: u32 = ring_bytes(PC_MAX_C) as u32;
/// Below this many tokens the decode kernel serves (T <= 16).
pub const PC_MIN_TOKENS: usize = super::pre_decode::DECODE_KERNEL_MAX_TOKENS + 1;

/// Dynamic shared memory of the kernel at C: [`PC_STAGES`] stages of [`PC_TILE_TOKENS`] token
/// rows, each the CTA's 4 stream slices (C/16 channels, bf16) and a pad.
pub const fn ring_bytes(c: usize) -> usize {
    PC_STAGES * PC_TILE_TOKENS * (c / 2 + PC_ROW_PAD)
}

/// Why the persistent-cluster kernel cannot run `cfg` (`None`: it can; the dtype and n are the
/// kernel table's to match).
pub(crate) fn pre_pc_unsupported(cfg: &Config) -> Option<String> {
    if cfg.gamma_f {
        return Some("gamma_f (F-pre-norm needs a cluster-wide reduction of a): general kernel".into());
    }
    if cfg.c % 128 != 0 || cfg.c > PC_MAX_C {
        return Some(format!("C = {} is not a multiple of 128 up to {PC_MAX_C}", cfg.c));
    }
    None
}

impl Plan {
    /// The persistent-cluster kernel's launch (bucket `b` is its row, with its resident CTA
    /// count) on views [`Plan::pre_checked`] accepted (`chk`, T > 0).
    pub(super) fn pre_pc_launch(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        b: &Bucket,
        chk: &Checked,
    ) -> Result<()> {
        // The plan selected this kernel only where `pre_pc_unsupported` is None (plan.rs
        // `reject`), and a plan's configuration never changes: nothing to re-check here.
        let args = self.pre_decode_args(x, params, out, chk);
        self.launch(stream, b, b.resident_ctas, b.desc.threads, ring_bytes(self.cfg.c) as u32, &args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_fits_and_the_limits_are_the_generators() {
        assert_eq!(PC_MAX_SHARED, 4 * 16 * (2048 + 64));
        assert!(PC_MAX_SHARED as usize + 35_840 <= 227 * 1024, "ring + static shared memory fit one SM");
        assert!(pre_pc_unsupported(&Config::new(4, 4096)).is_none());
        assert!(pre_pc_unsupported(&Config::new(4, 128)).is_none());
        assert!(pre_pc_unsupported(&Config::new(4, 1280)).is_none());
        assert!(pre_pc_unsupported(&Config::new(4, 1288)).is_some());
        assert!(pre_pc_unsupported(&Config::new(4, 4224)).is_some());
        assert!(pre_pc_unsupported(&Config { gamma_f: true, ..Config::new(4, 4096) }).is_some());
    }

    /// The manifest's C range is exactly what the plan accepts for this kernel.
    #[test]
    fn c_range_is_what_the_plan_accepts() {
        use crate::device::cuda::kernels::assert_c_range_is_what_fits;
        let fits = |_: &crate::device::cuda::kernels::KernelDesc, c: usize| {
            pre_pc_unsupported(&Config::new(4, c)).is_none() && ring_bytes(c) <= PC_MAX_SHARED as usize
        };
        use crate::device::cuda::kernels::PreFamily;
        assert_eq!(assert_c_range_is_what_fits(|d| d.pre_family == PreFamily::Cluster, fits), 1);
    }
}
