//! `static` (MATH.md "Static layer", the mHC.cu parity layer): coefficients from per-layer
//! logits computed on the device (no host read), shared by all tokens; F is an RMSNorm.
//! Kernel: asm/ptx/sm90/static.ptx.

use super::kernels::{StaticArgs, STATIC_PR_STAGES};
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::stream::Stream;
use crate::config::Stage;
use crate::error::Result;

/// CTAs of `threads` threads resident per SM, from the register count (register file 64K,
/// allocated per warp in units of 256 registers) and the 32-CTA / 2048-thread limits; the shared
/// memory of a[C] (c * 4 bytes per CTA) of 228 KiB.
pub(super) fn resident_ctas(registers: u32, threads: u32, smem: u32) -> u32 {
    let per_warp = (registers.max(1) * 32).div_ceil(256) * 256;
    let by_regs = 65536 / (per_warp * threads.div_ceil(32));
    let by_smem = (228 * 1024) / (smem + 1024).max(1);
    by_regs.min(2048 / threads).min(by_smem).clamp(1, 32)
}

impl Plan {
    /// Enqueues `out = static_layer(x; h_pre_logits, h_post_logits, h_res_logits, gamma)`.
    ///
    /// Views: `x`, `out` T rows of `n*C` (plan dtype, strided rows); `h_pre_logits` `[n]`,
    /// `h_post_logits` `[n]`, `h_res_logits` `[n, n]`, `gamma` `[C]` dense f32. Uses
    /// `cfg.sinkhorn_iters`, `cfg.eps_hc` and `cfg.eps_f` (the RMSNorm epsilon).
    #[allow(clippy::too_many_arguments)]
    pub fn static_layer(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        h_pre_logits: &DeviceTensor<'_>,
        h_post_logits: &DeviceTensor<'_>,
        h_res_logits: &DeviceTensor<'_>,
        gamma: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let (n, c, dt) = (self.cfg.n, self.cfg.c, self.dtype);
        let t = x.layout.tokens;
        let b = self.bucket(Stage::Static, t)?;
        let align = (b.desc.v * dt.size()).min(16);
        // The token-tile kernels copy x rows to shared memory in 16-byte units (static_cl,
        // static_pr: cp.async; static_mma: cp.async.bulk).
        let x_align = if b.desc.tile_in_shared { 16 } else { align };
        x.check("x", dt, t, n * c, x_align)?;
        out.check("out", dt, t, n * c, align)?;
        h_pre_logits.check_dense_f32("h_pre_logits", 1, n)?;
        h_post_logits.check_dense_f32("h_post_logits", 1, n)?;
        h_res_logits.check_dense_f32("h_res_logits", n, n)?;
        gamma.check_dense_f32("gamma", 1, c)?;
        if gamma.ptr % 16 != 0 {
            return Err(crate::Error::Alignment { tensor: "gamma", required: 16 });
        }
        if t == 0 {
            return Ok(());
        }
        let mut args = StaticArgs {
            x: x.ptr,
            h_pre_logits: h_pre_logits.ptr,
            h_post_logits: h_post_logits.ptr,
            h_res_logits: h_res_logits.ptr,
            gamma: gamma.ptr,
            out: out.ptr,
            x_stride: (x.layout.row_stride * dt.size()) as u64,
            out_stride: (out.layout.row_stride * dt.size()) as u64,
            tokens: t as u32,
            cbytes: (c * dt.size()) as u32,
            cchunks: (c / b.desc.v) as u32,
            iters: self.cfg.sinkhorn_iters,
            eps_hc: self.cfg.eps_hc as f32,
            eps_f: self.cfg.eps_f as f32,
            inv_c: (1.0 / c as f64) as f32,
            pad: 0,
        };
        if b.desc.token_ring {
            // static_pr: the resident CTAs (counted when the plan was built) walk the tokens; a[]
            // (f32) and STATIC_PR_STAGES token tiles (n streams, storage dtype) in shared memory,
            // copied in 16-byte units.
            let m = c / b.desc.v;
            let smem = token_ring_bytes(b.desc, c, n, dt);
            if (c * dt.size()) % 16 != 0 || smem > b.desc.max_dynamic_shared as usize {
                let why = format!("a token ring of {smem} bytes");
                return Err(self.shape_refused(Stage::Static, b.desc.entry, why));
            }
            args.pad = m as u32;
            let grid = (t as u32).min(b.resident_ctas);
            return self.launch(stream, b, grid, b.desc.threads, smem as u32, &args);
        }
        if b.desc.tile_in_shared {
            // static_cl, static_mma: one token per CTA; a[] (f32), gamma (static_mma) and the
            // token's x (n streams, storage dtype, tile_row_pad bytes after each) in shared
            // memory, copied in 16-byte units (C * esize is a multiple of 16).
            // static_mma_cl*: a cluster of CTAs per token, each with C / cluster channels.
            let cluster = b.desc.cluster as usize;
            let slice = c / cluster;
            let smem = tile_bytes(b.desc, slice, n, dt);
            if slice * cluster != c || (slice * dt.size()) % 16 != 0 || smem > b.desc.max_dynamic_shared as usize {
                let why = format!("{cluster} token tiles of {slice} channels, {smem} bytes each");
                return Err(self.shape_refused(Stage::Static, b.desc.entry, why));
            }
            args.pad = (slice / b.desc.v) as u32;
            let grid = (t * cluster) as u32;
            return self.launch(stream, b, grid, b.desc.threads, smem as u32, &args);
        }
        let smem = (c * 4) as u32 + b.func.static_shared_bytes;
        let ctas = self.dev.sm_count() * resident_ctas(b.func.registers, b.desc.threads, smem);
        let grid = (t as u32).min(ctas);
        self.launch(stream, b, grid, b.desc.threads, (c * 4) as u32, &args)
    }
}

/// Dynamic shared memory of the one-token kernels (`static_cl`, `static_mma`): a[C] (f32), gamma
/// (C f32) where the kernel stages it, and the token's n rows of C (storage dtype), each followed
/// by `tile_row_pad` bytes.
pub(super) fn tile_bytes(desc: &super::kernels::KernelDesc, c: usize, n: usize, dt: crate::config::Dtype) -> usize {
    let m = c / desc.v;
    let gamma = if desc.gamma_in_shared { c * 4 } else { 0 };
    m * desc.v * 4 + gamma + n * (m * desc.v * dt.size() + desc.tile_row_pad)
}

/// Dynamic shared memory of the `static_pr` token ring: a[C] (f32) and [`STATIC_PR_STAGES`]
/// token tiles of n rows of C (storage dtype).
pub(super) fn token_ring_bytes(
    desc: &super::kernels::KernelDesc,
    c: usize,
    n: usize,
    dt: crate::config::Dtype,
) -> usize {
    (c / desc.v) * desc.v * (4 + STATIC_PR_STAGES * n * dt.size())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::kernels::{assert_c_range_is_what_fits, KernelDesc};

    /// The catalogue's C range of every `static_pr` kernel is exactly what its ring allows: at
    /// `c.max` the ring fits, 8 channels more it does not.
    #[test]
    fn token_ring_c_range_is_what_the_launch_accepts() {
        let fits = |desc: &KernelDesc, c: usize| {
            token_ring_bytes(desc, c, desc.n, desc.dtype) <= desc.max_dynamic_shared as usize
        };
        let seen = assert_c_range_is_what_fits(|d| d.token_ring, fits);
        assert_eq!(seen, 8, "bf16 and f32, n = 1, 2, 4, 8");
    }

    /// The same for the one-token kernels (`static_cl`, `static_mma`) and their tile.
    #[test]
    fn token_tile_c_range_is_what_the_launch_accepts() {
        // As the launch: C splits into `cluster` slices of whole 8-channel tiles, and the tile fits.
        let fits = |desc: &KernelDesc, c: usize| {
            let cluster = desc.cluster as usize;
            c % (8 * cluster) == 0
                && tile_bytes(desc, c / cluster, desc.n, desc.dtype) <= desc.max_dynamic_shared as usize
        };
        let one_token = |d: &KernelDesc| d.stage == crate::config::Stage::Static && d.tile_in_shared && !d.token_ring;
        let seen = assert_c_range_is_what_fits(one_token, fits);
        assert_eq!(seen, 14, "static_cl: bf16 and f32, n = 1, 2, 4, 8; static_mma(_cl2, _cl4): bf16, n = 16, 32");
    }
}
