//! `head` (MATH.md "Head"): sigmoid-weighted collapse of the n streams into one row.
//! Kernel: asm/ptx/sm90/head.ptx.

use super::kernels::{head_v1, HeadArgs, KernelDesc, HEAD_PC_SLOTS, HEAD_PC_STAGES};
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::stream::Stream;
use crate::config::{Config, Dtype, Stage};
use crate::error::Result;

impl Plan {
    /// Enqueues `out = head(x; phi, scale, base)` on `stream`.
    ///
    /// Views: `x` T rows of `n*C`, `out` T rows of `C` (plan dtype, strided rows); `phi`
    /// `[n, n*C]`, `scale` `[1]`, `base` `[n]` dense f32 (`phi` 16-byte aligned). Uses
    /// `cfg.eps_norm` and `cfg.eps_hc`. T = 0 enqueues nothing.
    pub fn head(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        phi: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let (n, c, dt) = (self.cfg.n, self.cfg.c, self.dtype);
        let k = n * c;
        let t = x.layout.tokens;
        let b = self.bucket(Stage::Head, t)?;
        let v1 = head_v1(n);
        let align = (b.desc.v.max(v1) * dt.size()).min(16);
        x.check("x", dt, t, k, align)?;
        out.check("out", dt, t, c, (b.desc.v * dt.size()).min(16))?;
        phi.check_dense_f32("phi", n, k)?;
        scale.check_dense_f32("scale", 1, 1)?;
        base.check_dense_f32("base", 1, n)?;
        if phi.ptr % 16 != 0 {
            return Err(crate::Error::Alignment { tensor: "phi", required: 16 });
        }
        if t == 0 {
            return Ok(());
        }
        let tt = b.desc.tokens_per_cta;
        if b.desc.cluster > 1 {
            return self.head_cluster(stream, b, x, phi, scale, base, out);
        }
        let args = self.head_args(x, phi, scale, base, out, k / v1, c / b.desc.v);
        let grid = t.div_ceil(tt) as u32;
        self.launch(stream, b, grid, b.desc.threads, 0, &args)
    }

    /// The cluster kernels (head.ptx): CTA r of a cluster of R owns chunks `[r cc / R,
    /// (r+1) cc / R)` of the `cc = C / V` chunks of every stream.
    /// - One cluster per tile of `tokens_per_cta` tokens (`mhc_head_cl_*`, `mhc_head_cld_*`):
    ///   the CTA's x tile (tokens x n x its chunks; the decode variant adds phi's n x n x its
    ///   chunks in f32) lives in dynamic shared memory.
    /// - Persistent (`mhc_head_pc4_*`, `mhc_head_pc8_*`): `resident_ctas` CTAs (whole clusters) walk the
    ///   tiles; each CTA holds its phi in registers (at most `HEAD_PC_SLOTS` chunks per thread)
    ///   and streams its x slice through a ring of shared-memory stages.
    ///
    /// Views were validated by [`Plan::head`].
    #[allow(clippy::too_many_arguments)]
    fn head_cluster(
        &self,
        stream: &Stream,
        b: &super::plan::Bucket,
        x: &DeviceTensor<'_>,
        phi: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        let (n, c, dt) = (self.cfg.n, self.cfg.c, self.dtype);
        let t = x.layout.tokens;
        let (v, tt, r) = (b.desc.v, b.desc.tokens_per_cta, b.desc.cluster as usize);
        let cc = c / v;
        let per_cta = cc.div_ceil(r);
        let (smem, grid, most_chunks) = if b.desc.persistent {
            let smem = persistent_shared_bytes(b.desc, &self.cfg, dt) as usize;
            (smem, b.resident_ctas, HEAD_PC_SLOTS * b.desc.threads as usize / n)
        } else {
            let phi_tile = if b.desc.phi_in_shared { n * n * per_cta * v * 4 } else { 0 };
            (tt * n * per_cta * v * dt.size() + phi_tile, (t.div_ceil(tt) * r) as u32, usize::MAX)
        };
        if cc < r || per_cta > most_chunks || smem > b.desc.max_dynamic_shared as usize {
            let why = format!(
                "C = {c} gives each of the {r} CTAs {per_cta} chunks of {v} channels per stream (1 to \
                 {most_chunks} fit) and {smem} bytes of shared memory"
            );
            return Err(self.shape_refused(Stage::Head, b.desc.entry, why));
        }
        let args = self.head_args(x, phi, scale, base, out, per_cta, cc);
        self.launch(stream, b, grid, b.desc.threads, smem as u32, &args)
    }

    /// The argument block of every head kernel; `kchunks` / `cchunks` are per kernel (the
    /// one-CTA kernel: phase-1 chunks of the whole row and phase-2 chunks of C; the cluster
    /// kernels: chunks per CTA and chunks of C, chunks of V1 elements (cl) or 16 bytes (pc)).
    #[allow(clippy::too_many_arguments)]
    fn head_args(
        &self,
        x: &DeviceTensor<'_>,
        phi: &DeviceTensor<'_>,
        scale: &DeviceTensor<'_>,
        base: &DeviceTensor<'_>,
        out: &DeviceTensorMut<'_>,
        kchunks: usize,
        cchunks: usize,
    ) -> HeadArgs {
        let (c, es) = (self.cfg.c, self.dtype.size());
        HeadArgs {
            x: x.ptr,
            phi: phi.ptr,
            scale: scale.ptr,
            base: base.ptr,
            out: out.ptr,
            x_stride: (x.layout.row_stride * es) as u64,
            out_stride: (out.layout.row_stride * es) as u64,
            tokens: x.layout.tokens as u32,
            cbytes: (c * es) as u32,
            kchunks: kchunks as u32,
            cchunks: cchunks as u32,
            eps_norm: self.cfg.eps_norm as f32,
            eps_hc: self.cfg.eps_hc as f32,
            inv_k: (1.0 / (self.cfg.n * c) as f64) as f32,
            pad: 0,
        }
    }
}

/// Dynamic shared memory of the persistent head kernel for `cfg`: its ring of
/// [`HEAD_PC_STAGES`] stages, each the CTA's slice of a token tile: per token, n x chunks per
/// CTA chunks of 16 bytes and a 16-byte pad.
pub(super) fn persistent_shared_bytes(desc: &KernelDesc, cfg: &Config, dtype: Dtype) -> u32 {
    let per_cta = (cfg.c / (16 / dtype.size())).div_ceil(desc.cluster as usize);
    (HEAD_PC_STAGES * desc.tokens_per_cta * (cfg.n * per_cta + 1) * 16) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::cuda::kernels::assert_c_range_is_what_fits;

    /// The catalogue's C range of every persistent head kernel is exactly what the launcher
    /// accepts: at `c.max` the items per CTA and the ring fit, 8 channels more and one of them
    /// does not (so the selector never picks a kernel the launch would refuse, and the range is
    /// not smaller than the kernel allows).
    #[test]
    fn persistent_head_c_range_is_what_the_launch_accepts() {
        let fits = |desc: &KernelDesc, c: usize| {
            let cfg = Config::new(desc.n, c);
            let cc = c / desc.v;
            let per_cta = cc.div_ceil(desc.cluster as usize);
            desc.n * per_cta <= HEAD_PC_SLOTS * desc.threads as usize
                && persistent_shared_bytes(desc, &cfg, desc.dtype) <= desc.max_dynamic_shared
                && cc >= desc.cluster as usize
        };
        let seen = assert_c_range_is_what_fits(|d| d.persistent && d.stage == crate::config::Stage::Head, fits);
        assert_eq!(seen, 12, "pc4 and pc8, bf16 and f32, n = 1, 2, 4");
    }
}
