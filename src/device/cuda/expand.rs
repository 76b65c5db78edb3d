//! `expand` (MATH.md "Expand"): every stream of the first layer's residual is the embedding.
//! Kernel: asm/ptx/sm90/expand.ptx.

use super::kernels::ExpandArgs;
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::stream::Stream;
use crate::config::Stage;
use crate::error::Result;

impl Plan {
    /// Enqueues `out[t][i][:] = e[t][:]` for every stream i. `e` T rows of C, `out` T rows of
    /// `n*C`, plan dtype, rows 16-byte aligned.
    pub fn expand(&self, stream: &Stream, e: &DeviceTensor<'_>, out: &mut DeviceTensorMut<'_>) -> Result<()> {
        let (n, c, dt) = (self.cfg.n, self.cfg.c, self.dtype);
        let t = e.layout.tokens;
        let b = self.bucket(Stage::Expand, t)?;
        e.check("e", dt, t, c, 16)?;
        out.check("out", dt, t, n * c, 16)?;
        if t == 0 {
            return Ok(());
        }
        let chunks = c / 8;
        let items = t
            .checked_mul(chunks)
            .filter(|&i| i <= u32::MAX as usize)
            .ok_or_else(|| crate::Error::shape("e", "T * C / 8 < 2^32", t))?;
        let args = ExpandArgs {
            e: e.ptr,
            out: out.ptr,
            e_stride: (e.layout.row_stride * dt.size()) as u64,
            out_stride: (out.layout.row_stride * dt.size()) as u64,
            items: items as u32,
            chunks: chunks as u32,
            cbytes: (c * dt.size()) as u32,
            n: n as u32,
        };
        let grid = (items as u32).div_ceil(b.desc.threads);
        self.launch(stream, b, grid, b.desc.threads, 0, &args)
    }
}
