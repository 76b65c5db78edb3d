//! `expand` (docs/math.md, "expand"): every stream of the first layer's residual is the
//! embedding. Kernel: asm/ptx/sm90/expand.ptx, token x 8-channel items.

use super::abi::ExpandArgs;
use super::launch::{Bucket, Ctx, Launch, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use crate::error::{Error, Result};

/// `out[t][i][:] = e[t][:]` for every stream i: `e` T rows of C, `out` T rows of `n*C`, plan
/// dtype, rows 16-byte aligned (`None`: T = 0).
pub(crate) fn launch(ctx: &Ctx, b: &Bucket, e: &DeviceTensor<'_>, out: &DeviceTensorMut<'_>) -> Result<Option<Launch>> {
    let (n, c, dt) = (ctx.cfg.n, ctx.cfg.c, ctx.dtype);
    let t = e.layout.tokens;
    e.check(ctx.device, "e", dt, t, c, 16)?;
    out.check(ctx.device, "out", dt, t, n * c, 16)?;
    if t == 0 {
        return Ok(None);
    }
    let chunks = c / 8;
    let items = t
        .checked_mul(chunks)
        .filter(|&i| i <= u32::MAX as usize)
        .ok_or_else(|| Error::shape("e", "T * C / 8 < 2^32", t))?;
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
    let grid = (items as u32).div_ceil(b.threads());
    Ok(Some(Launch::new(b, grid, b.threads(), 0, &args)))
}
