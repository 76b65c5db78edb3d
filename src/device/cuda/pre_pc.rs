//! `pre` for many tokens on persistent clusters (asm/ptx/sm90/pre_pc.ptx, entry
//! `mhc_pre_pc16_bf16_n4`): bf16 storage, n = 4, C a multiple of 128 up to [`PC_MAX_C`], no
//! gamma_f, T >= [`PC_MIN_TOKENS`]. Clusters of [`PC_CLUSTER`] CTAs stay resident (as many as
//! the device holds, found when the plan is built) and walk [`PC_TILE_TOKENS`]-token tiles; CTA
//! r owns channels `[r C/16, (r+1) C/16)` of every stream, keeps its slice of phi in registers
//! (bf16 hi + lo mma fragments) and its slice of x in a ring of shared-memory stages until it
//! has written its channels of `a`: x is read from memory once and phi once per kernel. The
//! partial logits meet through distributed shared memory. The plan selects it where
//! [`pre_pc_unsupported`] is `None`; the general kernel (pre.rs) serves the rest. Where C is a
//! multiple of [`PC_TMA_C_MULTIPLE`] it runs the entry [`PC_TMA_ENTRY`] instead: its ring is
//! filled by tensor copies (the tensor map of x, encoded per launch on the host, travels in
//! [`PreTmaArgs`]) and each token's CTA computes its h_pre and sends it to the others.
//!
//! The same file's second entry, `mhc_post_pre_pc16_bf16_n4`, is `post_pre` in one pass: its ring
//! also brings layer l's `f` slice and `h_post` / `h_res` rows, two post warps compute
//! `x' = post(x)` in the stage on the tensor cores (h_res / h_post in bf16 hi + lo, f32
//! accumulation: the stored bf16 x' matches the post kernel's f32 FMAs except ~0.1% of values one
//! rounding step apart), the projection runs on it and the mix stores it to `x_out`: `x'` is never
//! read back ([`Plan::post_pre`] runs it from [`POST_PRE_PC_MIN_TOKENS`] tokens where this kernel
//! serves `pre`). Its stage rows pad each stream slice ([`fused_row_bytes`]).

use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::{Bucket, Plan, Workspace};
use super::post_pre::PostInViews;
use super::pre::{Checked, PreOutViews, PreParamViews};
use super::pre_decode::PreDecodeArgs;
use super::stream::Stream;
use crate::config::Config;
use crate::error::{Error, Result};

/// The kernel's entry (asm/ptx/sm90/gen_pre_pc.py).
pub(crate) const PC_ENTRY: &str = "mhc_pre_pc16_bf16_n4";
/// The entry whose ring is filled by TMA (the tensor map of x in its arguments), for C a multiple
/// of [`PC_TMA_C_MULTIPLE`]: lane 0 of each mix warp issues half of a stage's copies, so the mix
/// warps only mix.
pub(crate) const PC_TMA_ENTRY: &str = "mhc_pre_pc16t_bf16_n4";
/// The TMA entry's C granularity: its boxes are 64 channels of each CTA's C/16.
pub const PC_TMA_C_MULTIPLE: usize = 1024;
/// The fused `post_pre` entry of the same file.
pub(crate) const POST_PRE_PC_ENTRY: &str = "mhc_post_pre_pc16_bf16_n4";
/// The fused entry for fewer tokens: its post warps also mix each tile and fill the ring (the math
/// warps only project and exchange), which wins while a cluster walks few tiles (H100, C = 4096,
/// T = 65 / 128 / 384 / 512: 16.8 / 20.1 / 30.9 / 36.3 us against 18.4 / 22.7 / 31.5-32.9 /
/// 36.1-36.4) and loses beyond (T = 768 / 1024 / 8192: 48 / 64 / 407 against 44 / 52 / 277: the
/// two post warps then carry x', the mix and the fills of every tile).
pub(crate) const POST_PRE_PCM_ENTRY: &str = "mhc_post_pre_pc16m_bf16_n4";
/// Largest T of [`POST_PRE_PCM_ENTRY`].
pub const POST_PRE_PCM_MAX_TOKENS: usize = 448;
/// Rounds per CTA a timing build records (gen_pre_pc.py `STAMP_ROUNDS`).
pub const PC_STAMP_ROUNDS: usize = 96;
/// CTAs per cluster (a non-portable size: the device allows it on the function when it loads it).
pub const PC_CLUSTER: u32 = 16;
/// Tokens per tile (= the cluster size: CTA r finishes token r of every tile).
pub const PC_TILE_TOKENS: usize = 16;
/// Threads per CTA: 8 math warps, 2 coefficient warps (alternate tiles) and 2 mix warps (the
/// ring's fills and the pre-mix of each tile, beside the math warps' next tiles).
pub const PC_THREADS: u32 = 384;
/// Threads of the fused `post_pre` entries: 8 math warps, 2 coefficient warps and 2 post warps,
/// which compute x' in each stage as it lands, ahead of the math warps. The math warps mix (and
/// refill) in [`POST_PRE_PC_ENTRY`], the post warps in [`POST_PRE_PCM_ENTRY`].
pub const PC_FUSED_THREADS: u32 = 384;
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
/// The fused `post_pre` entry serves from here; below, `post` then the mid kernel (which serves
/// `pre` up to [`super::pre_decode::MID_MAX_TOKENS`] tokens wherever C >= 512).
pub const POST_PRE_PC_MIN_TOKENS: usize = super::pre_decode::MID_MAX_TOKENS + 1;
/// Fused entry: bytes of one token's layer-l coefficients in a stage (h_post[4], h_res[4][4], f32).
pub const PC_POST_COEF_BYTES: usize = 80;
/// The fused entry's ring at [`PC_MAX_C`].
pub const PC_FUSED_MAX_SHARED: u32 = fused_ring_bytes(PC_MAX_C) as u32;

/// Dynamic shared memory of the kernel at C: [`PC_STAGES`] stages of [`PC_TILE_TOKENS`] token
/// rows, each the CTA's 4 stream slices (C/16 channels, bf16) and a pad.
pub const fn ring_bytes(c: usize) -> usize {
    PC_STAGES * PC_TILE_TOKENS * (c / 2 + PC_ROW_PAD)
}

/// The TMA entry's ring: stages of [`PC_TILE_TOKENS`] tokens x C/2 bytes (no pad: the 128-byte
/// swizzle spreads the banks), and 1 KB to align the ring to the swizzle's 1024-byte period.
pub const fn tma_ring_bytes(c: usize) -> usize {
    PC_STAGES * PC_TILE_TOKENS * (c / 2) + 1024
}
/// The TMA entry's ring at [`PC_MAX_C`].
pub const PC_TMA_MAX_SHARED: u32 = tma_ring_bytes(PC_MAX_C) as u32;

/// The fused entry's token row (gen_pre_pc.py `F_ROW`): the 4 x slices and the f slice, each C/16
/// channels (bf16) and 16 bytes (so x' reads the 4 streams of a token from different banks), then
/// a pad that makes the row 4 mod 8 in 16-byte units (tokens g and g + 1 of the math warps'
/// fragment loads on different bank halves). C is a multiple of 128.
pub const fn fused_row_bytes(c: usize) -> usize {
    let units = 5 * (c / 128 + 1);
    16 * (units + (4 + 8 - units % 8) % 8)
}

/// The fused entry's ring: token rows of [`fused_row_bytes`], and each stage ends with the tile's
/// h_post / h_res rows.
pub const fn fused_ring_bytes(c: usize) -> usize {
    PC_STAGES * PC_TILE_TOKENS * (fused_row_bytes(c) + PC_POST_COEF_BYTES)
}

/// The ring of the cluster row with entry `entry` (`pre`: [`ring_bytes`], its TMA entry:
/// [`tma_ring_bytes`], `post_pre`: [`fused_ring_bytes`]).
pub fn entry_ring_bytes(entry: &str, c: usize) -> usize {
    match entry {
        PC_TMA_ENTRY => tma_ring_bytes(c),
        POST_PRE_PC_ENTRY | POST_PRE_PCM_ENTRY => fused_ring_bytes(c),
        _ => ring_bytes(c),
    }
}

/// The fused entry's arguments: the `pre` side as the other entry's, then layer l's post inputs
/// and `x'` (asm/ptx/sm90/gen_pre_pc.py `A_F` ..).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct PostPrePcArgs {
    /// `x` here is layer l's residual (post's input), `x_stride` its row stride.
    pub pre: PreDecodeArgs,
    pub f: u64,
    pub h_post_in: u64,
    pub h_res_in: u64,
    pub x_out: u64,
    /// Row strides in elements.
    pub f_stride: u32,
    pub x_out_stride: u32,
}
const _: () = assert!(std::mem::size_of::<PostPrePcArgs>() == 184);

/// The TMA entry's parameter bank: its one parameter (`p_args`: the other pre entry's arguments,
/// then at 192 the tensor map of x, gen_pre_pc.py `A_TMAP`) is 64-byte aligned, as a tensor map
/// must be, and sm_90's parameters start 16 bytes past a 64-byte boundary, so ptxas puts it 48
/// bytes in. The launcher points the driver at each parameter's offset in this struct (the loader
/// reads the offsets and the bank size, 368, from the cubin and checks them at load).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct PreTmaArgs {
    pub lead: [u8; 48],
    pub pre: PreDecodeArgs,
    pub pad: [u8; 48],
    pub tmap: [u64; 16],
}
const _: () = assert!(std::mem::size_of::<PreTmaArgs>() == 368);
const _: () = assert!(std::mem::offset_of!(PreTmaArgs, tmap) == 48 + 192);

/// Why the TMA entry cannot run `cfg` (beyond [`pre_pc_unsupported`]).
pub(crate) fn pre_pc_tma_unsupported(cfg: &Config) -> Option<String> {
    if cfg.c % PC_TMA_C_MULTIPLE != 0 {
        return Some(format!("C = {} is not a multiple of {PC_TMA_C_MULTIPLE} (64-channel TMA boxes)", cfg.c));
    }
    None
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
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pre_pc_launch(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        b: &Bucket,
        chk: &Checked,
    ) -> Result<()> {
        // The plan selected this kernel only where `pre_pc_unsupported` is None (plan.rs
        // `reject`), and a plan's configuration never changes: nothing to re-check here.
        let mut args = self.pre_decode_args(x, params, out, chk);
        // Only timing builds (PC_EXP=stamps) write here: the phase stamps of
        // `debug_pc_stamps`. The kernel uses no workspace.
        args.ws_part = ws.device_ptr();
        if b.desc.entry == PC_TMA_ENTRY {
            let args = PreTmaArgs { lead: [0; 48], pre: args, pad: [0; 48], tmap: x_tensor_map(x, self.cfg.c, chk.t)? };
            return self.launch(stream, b, b.resident_ctas, b.desc.threads, tma_ring_bytes(self.cfg.c) as u32, &args);
        }
        self.launch(stream, b, b.resident_ctas, b.desc.threads, ring_bytes(self.cfg.c) as u32, &args)
    }

    /// The phase stamps a timing build of the pre entry (`PC_EXP=stamps python3
    /// asm/ptx/sm90/gen_pre_pc.py`, then `mhc asm`) left in `ws`: per CTA (`ctas` of them) and
    /// round (< [`PC_STAMP_ROUNDS`]), 16 (%globaltimer, %clock64) pairs (gen_pre_pc.py `stamp`).
    /// A normal build writes none: the words are whatever the workspace held.
    #[doc(hidden)]
    pub fn debug_pc_stamps(&self, ws: &Workspace, ctas: usize) -> Result<Vec<[(u64, u64); 16]>> {
        let need = ctas * PC_STAMP_ROUNDS * 16 * 16;
        if ws.bytes() < need {
            return Err(Error::shape("workspace", format!(">= {need} bytes for the stamps"), ws.bytes()));
        }
        let all: Vec<u64> = ws.buf.to_vec()?;
        Ok((0..ctas * PC_STAMP_ROUNDS)
            .map(|r| std::array::from_fn(|k| (all[(16 * r + k) * 2], all[(16 * r + k) * 2 + 1])))
            .collect())
    }

    /// The fused `post_pre` entry's launch (bucket `b`, `Stage::PostPre`) on views
    /// [`Plan::post_pre`] checked for both sides (`chk` from the `pre` side on `x`, T > 0).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn post_pre_pc_launch(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        b: &Bucket,
        chk: &Checked,
    ) -> Result<()> {
        let args = PostPrePcArgs {
            pre: self.pre_decode_args(x, params, out, chk),
            f: post.f.ptr,
            h_post_in: post.h_post.ptr,
            h_res_in: post.h_res.ptr,
            x_out: x_out.ptr,
            f_stride: post.f.layout.row_stride as u32,
            x_out_stride: x_out.layout.row_stride as u32,
        };
        self.launch(stream, b, b.resident_ctas, b.desc.threads, fused_ring_bytes(self.cfg.c) as u32, &args)
    }
}

/// The TMA entry's tensor map of x (bf16): dimension 0 the 4C elements of a token row, dimension 1
/// the T tokens (row stride from the view); boxes of 64 elements x 16 tokens with the 128-byte
/// swizzle (gen_pre_pc.py `TMA_XW`), tokens past T read as zeros. The views were checked (rows
/// 16-byte aligned, fewer than 2^32 elements), which is what the encoding requires.
fn x_tensor_map(x: &DeviceTensor<'_>, c: usize, t: usize) -> Result<[u64; 16]> {
    use cudarc::driver::sys;
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let dims: [u64; 2] = [4 * c as u64, t as u64];
    let strides: [u64; 1] = [x.layout.row_stride as u64 * 2];
    let boxes: [u32; 2] = [64, PC_TILE_TOKENS as u32];
    let steps: [u32; 2] = [1, 1];
    // SAFETY: every pointer covers the rank (2) it is read for; the map is written into `map`.
    let status = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            2,
            x.ptr as *mut std::ffi::c_void,
            dims.as_ptr(),
            strides.as_ptr(),
            boxes.as_ptr(),
            steps.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    super::ffi::check("cuTensorMapEncodeTiled", status)?;
    Ok(map.opaque)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ring_fits_and_the_limits_are_the_generators() {
        assert_eq!(PC_MAX_SHARED, 4 * 16 * (2048 + 64));
        assert!(PC_MAX_SHARED as usize + 36_096 <= 227 * 1024, "ring + static shared memory fit one SM");
        assert!(pre_pc_unsupported(&Config::new(4, 4096)).is_none());
        assert!(pre_pc_unsupported(&Config::new(4, 128)).is_none());
        assert!(pre_pc_unsupported(&Config::new(4, 1280)).is_none());
        assert!(pre_pc_unsupported(&Config::new(4, 1288)).is_some());
        assert!(pre_pc_unsupported(&Config::new(4, 4224)).is_some());
        assert!(pre_pc_unsupported(&Config { gamma_f: true, ..Config::new(4, 4096) }).is_some());
        // gen_pre_pc.py: stage = 16 rows of 5 (C/8 + 16) bytes + pad (row / 16 = 4 mod 8), then
        // 16 x 80 bytes
        assert_eq!(fused_row_bytes(4096), 5 * 528 + 112);
        assert_eq!(fused_row_bytes(128), 5 * 32 + 16 * 2);
        for c in (128..=4096).step_by(128) {
            let row = fused_row_bytes(c);
            assert!(row >= 5 * (c / 8 + 16) && row < 5 * (c / 8 + 16) + 128 && (row / 16) % 8 == 4, "C = {c}");
        }
        assert_eq!(PC_FUSED_MAX_SHARED, 4 * (16 * 2752 + 16 * 80));
        assert!(PC_FUSED_MAX_SHARED as usize + 36_096 <= 227 * 1024, "fused ring + static shared memory fit");
    }

    /// The catalogue's C range is exactly what the plan accepts for this kernel.
    #[test]
    fn c_range_is_what_the_plan_accepts() {
        use crate::device::cuda::kernels::assert_c_range_is_what_fits;
        let fits = |d: &crate::device::cuda::kernels::KernelDesc, c: usize| {
            let cfg = Config::new(4, c);
            let tma_ok = d.entry != PC_TMA_ENTRY || pre_pc_tma_unsupported(&cfg).is_none();
            pre_pc_unsupported(&cfg).is_none()
                && tma_ok
                && entry_ring_bytes(d.entry, c) <= d.max_dynamic_shared as usize
        };
        use crate::device::cuda::kernels::PreFamily;
        assert_eq!(assert_c_range_is_what_fits(|d| d.pre_family == PreFamily::Cluster, fits), 4);
    }
}
