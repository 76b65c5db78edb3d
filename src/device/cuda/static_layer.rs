//! `static` (MATH.md "Static layer", the mHC.cu parity layer): coefficients from per-layer
//! logits computed on the device (no host read), shared by all tokens; F is an RMSNorm.
//! Kernel: asm/ptx/sm90/static.ptx.

use super::kernels::StaticArgs;
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::stream::Stream;
use crate::config::Stage;
use crate::error::Result;

/// CTAs of the static kernel resident per SM, from its register count (256 threads each).
fn resident_ctas(registers: u32) -> u32 {
    let per_thread = registers.div_ceil(8).max(1) * 8;
    (65536 / (per_thread * 256)).clamp(1, 8)
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
        x.check("x", dt, t, n * c, align)?;
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
        let args = StaticArgs {
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
        let ctas = self.dev.sm_count() * resident_ctas(b.func.registers);
        let grid = (t as u32).min(ctas);
        self.launch(stream, b, grid, b.desc.threads, (c * 4) as u32, &args)
    }
}
