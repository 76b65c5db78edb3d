//! `post` (docs/math.md, "post"): `x' = h_post f + h_res-mix(x)`, V4 applying `h_res` transposed.
//! Kernels: asm/ptx/sm90/post.ptx (token x channel-chunk items, `threads_per_item` lanes each;
//! or one CTA per token with its x tile in shared memory for the tensor-core entries).

use super::abi::PostArgs;
use super::launch::{Bucket, Ctx, Launch, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use crate::config::Stage;
use crate::error::{Error, Result};
use mhc_loader::Trait;

/// Every check of `post` on these views and its launch on bucket `b` (`None`: T = 0).
///
/// Views: `x` and `out` are T rows of `n*C` (`[T, n, C]`, strided rows), `f` T rows of `C`, all
/// in the plan's dtype; `h_post` `[T, n]` and `h_res` `[T, n, n]` dense f32. Row starts must be
/// aligned to the kernel's vector width (16 bytes for n <= 8).
pub(crate) fn launch(
    ctx: &Ctx,
    b: &Bucket,
    x: &DeviceTensor<'_>,
    f: &DeviceTensor<'_>,
    h_post: &DeviceTensor<'_>,
    h_res: &DeviceTensor<'_>,
    out: &DeviceTensorMut<'_>,
) -> Result<Option<Launch>> {
    let (n, c, dt) = (ctx.cfg.n, ctx.cfg.c, ctx.dtype);
    let t = x.layout.tokens;
    let align = (b.v() * dt.size()).min(16);
    x.check(ctx.device, "x", dt, t, n * c, align)?;
    f.check(ctx.device, "f", dt, t, c, align)?;
    out.check(ctx.device, "out", dt, t, n * c, align)?;
    h_post.check_dense_f32(ctx.device, "h_post", t, n)?;
    h_res.check_dense_f32(ctx.device, "h_res", t, n * n)?;
    // 16-byte coefficient loads: the row base must be 16-byte aligned too.
    if h_post.ptr % 16 != 0 || h_res.ptr % 16 != 0 {
        return Err(Error::Alignment { tensor: "h_post/h_res", required: 16 });
    }
    if t == 0 {
        return Ok(None);
    }
    let chunks = c / b.v();
    // The tensor-core kernels (`tile_in_shared`) take one CTA per token: items = T.
    let mma = b.has(Trait::TileInShared);
    let items = if mma {
        t
    } else {
        t.checked_mul(chunks)
            .filter(|&i| i.checked_mul(b.threads_per_item() as usize).is_some_and(|th| th <= u32::MAX as usize))
            .ok_or_else(|| Error::shape("x", "T * C / V * (threads per item) < 2^32", t))?
    };
    let args = PostArgs {
        x: x.ptr,
        f: f.ptr,
        h_post: h_post.ptr,
        h_res: h_res.ptr,
        out: out.ptr,
        x_stride: (x.layout.row_stride * dt.size()) as u64,
        f_stride: (f.layout.row_stride * dt.size()) as u64,
        out_stride: (out.layout.row_stride * dt.size()) as u64,
        items: items as u32,
        chunks: chunks as u32,
        cbytes: (c * dt.size()) as u32,
        pad: 0,
    };
    let block = b.threads();
    let (grid, shared) = if mma {
        // The x tile: n rows of C elements, each followed by the row pad.
        let tile = n * (c * dt.size() + b.row_pad());
        if tile > b.dynamic_shared_max() as usize {
            return Err(ctx.refused(Stage::Post, b.entry(), format!("C = {c}: the x tile exceeds shared memory")));
        }
        (items as u32, tile as u32)
    } else {
        ((items as u32 * b.threads_per_item()).div_ceil(block), 0)
    };
    Ok(Some(Launch::new(b, grid, block, shared, &args)))
}
