//! `post` (MATH.md stage 4): `x' = h_post f + h_res-mix(x)`, V4 applying `h_res` transposed.
//! Kernel: asm/ptx/sm90/post.ptx.

use super::kernels::PostArgs;
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::plan::Plan;
use super::stream::Stream;
use crate::config::Stage;
use crate::error::Result;

impl Plan {
    /// Enqueues `out = post(x, f, h_post, h_res)` on `stream`.
    ///
    /// Views: `x` and `out` are T rows of `n*C` (`[T, n, C]`, strided rows), `f` T rows of `C`,
    /// all in the plan's dtype; `h_post` `[T, n]` and `h_res` `[T, n, n]` dense f32. Row starts
    /// must be aligned to the kernel's vector width (16 bytes for n <= 8). Everything is checked
    /// before the launch; on error nothing is enqueued. T = 0 enqueues nothing.
    pub fn post(
        &self,
        stream: &Stream,
        x: &DeviceTensor<'_>,
        f: &DeviceTensor<'_>,
        h_post: &DeviceTensor<'_>,
        h_res: &DeviceTensor<'_>,
        out: &mut DeviceTensorMut<'_>,
    ) -> Result<()> {
        match self.post_prepared(x, f, h_post, h_res, out)? {
            Some(p) => self.launch(stream, p.bucket, p.grid, p.block, p.shared, &p.args),
            None => Ok(()),
        }
    }

    /// Every check of [`Plan::post`] and its launch, not enqueued (`None`: T = 0, nothing to do).
    pub(super) fn post_prepared(
        &self,
        x: &DeviceTensor<'_>,
        f: &DeviceTensor<'_>,
        h_post: &DeviceTensor<'_>,
        h_res: &DeviceTensor<'_>,
        out: &DeviceTensorMut<'_>,
    ) -> Result<Option<PreparedPost<'_>>> {
        let (n, c, dt) = (self.cfg.n, self.cfg.c, self.dtype);
        let t = x.layout.tokens;
        let b = self.bucket(Stage::Post, t)?;
        let align = (b.desc.v * dt.size()).min(16);
        x.check("x", dt, t, n * c, align)?;
        f.check("f", dt, t, c, align)?;
        out.check("out", dt, t, n * c, align)?;
        h_post.check_dense_f32("h_post", t, n)?;
        h_res.check_dense_f32("h_res", t, n * n)?;
        // 16-byte coefficient loads: the row base must be 16-byte aligned too.
        if h_post.ptr % 16 != 0 || h_res.ptr % 16 != 0 {
            return Err(crate::Error::Alignment { tensor: "h_post/h_res", required: 16 });
        }
        if t == 0 {
            return Ok(None);
        }
        let chunks = c / b.desc.v;
        // The tensor-core kernels (`tile_in_shared`) take one CTA per token: items = T.
        let mma = b.desc.tile_in_shared;
        let items = if mma {
            t
        } else {
            t.checked_mul(chunks)
                .filter(|&i| i.checked_mul(b.desc.item_threads as usize).is_some_and(|th| th <= u32::MAX as usize))
                .ok_or_else(|| crate::Error::shape("x", "T * C / V * (threads per item) < 2^32", t))?
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
        let block = b.desc.threads;
        let (grid, shared) = if mma {
            // The x tile: n rows of C elements, each followed by the row pad.
            let tile = n * (c * dt.size() + b.desc.tile_row_pad);
            if tile > b.desc.max_dynamic_shared as usize {
                return Err(self.shape_refused(
                    Stage::Post,
                    b.desc.entry,
                    format!("C = {c}: the x tile exceeds shared memory"),
                ));
            }
            (items as u32, tile as u32)
        } else {
            ((items as u32 * b.desc.item_threads).div_ceil(block), 0)
        };
        Ok(Some(PreparedPost { bucket: b, grid, block, shared, args }))
    }
}

/// A checked `post` launch ([`Plan::post_prepared`]).
pub(super) struct PreparedPost<'p> {
    pub bucket: &'p super::plan::Bucket,
    pub grid: u32,
    pub block: u32,
    /// Dynamic shared memory (bytes; the tensor-core kernels' x tile).
    pub shared: u32,
    pub args: PostArgs,
}
