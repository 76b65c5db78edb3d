//! Device tensor views, shared by every vendor: a device address, the number of elements the
//! storage holds from it, the storage dtype and the strided-row [`Layout`]. `B` is the vendor's
//! buffer type; it only ties the view's lifetime to the buffer it borrows (each vendor module
//! names its views `DeviceTensor<'a>` / `DeviceTensorMut<'a>` through a type alias).
//! `check_view` is what every op checks on a tensor argument, in O(1), before a launch, and
//! `check_disjoint` that no output overlaps another argument of the call.

use crate::config::Dtype;
use crate::error::{Error, Result};
use crate::tensor::Layout;
use std::marker::PhantomData;

/// Read-only device tensor view: pointer + dtype + strided-row layout.
#[derive(Debug)]
pub struct DeviceTensor<'a, B> {
    pub(crate) ptr: u64,
    /// Elements the underlying storage holds from `ptr` on.
    pub(crate) len: usize,
    pub(crate) dtype: Dtype,
    pub(crate) layout: Layout,
    /// The device the storage is on: its ordinal + 1; 0 for memory this crate did not allocate
    /// ([`DeviceTensor::from_raw`], whose caller vouches for it).
    pub(crate) device: u32,
    _buf: PhantomData<&'a B>,
}

// Manual impls: a view is copyable whatever `B` is (derive would demand `B: Clone`).
impl<B> Clone for DeviceTensor<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for DeviceTensor<'_, B> {}

/// Writable device tensor view.
#[derive(Debug)]
pub struct DeviceTensorMut<'a, B> {
    pub(crate) ptr: u64,
    pub(crate) len: usize,
    pub(crate) dtype: Dtype,
    pub(crate) layout: Layout,
    /// As [`DeviceTensor`]'s.
    pub(crate) device: u32,
    _buf: PhantomData<&'a mut B>,
}

impl<B> DeviceTensor<'_, B> {
    /// A view of `len` elements at `ptr`, made by a vendor buffer that owns the memory.
    pub(crate) fn of_buffer(ptr: u64, len: usize, dtype: Dtype, layout: Layout, device: u32) -> Self {
        DeviceTensor { ptr, len, dtype, layout, device, _buf: PhantomData }
    }
    /// A view of memory this crate did not allocate.
    ///
    /// # Safety
    /// `ptr` must be a device address of this device's context, valid for reads of `len`
    /// elements of `dtype` for as long as any launch that uses the view may run.
    pub unsafe fn from_raw(ptr: u64, len: usize, dtype: Dtype, layout: Layout) -> Self {
        DeviceTensor { ptr, len, dtype, layout, device: 0, _buf: PhantomData }
    }
    /// The device address of the first element.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// The storage type of the elements.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// The token rows: count, length and stride, in elements.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// Same storage with another layout (e.g. a sub-range of tokens is a new view on the same
    /// pointer with fewer rows).
    pub fn with_layout(self, layout: Layout) -> Self {
        DeviceTensor { layout, ..self }
    }
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check(
        &self,
        device: u32,
        what: &'static str,
        dtype: Dtype,
        tokens: usize,
        row_len: usize,
        align: usize,
    ) -> Result<()> {
        check_device(what, self.device, device)?;
        check_view(what, self.ptr, self.len, self.dtype, &self.layout, dtype, tokens, row_len, align)
    }
    /// Checks a dense parameter/coefficient tensor of exactly `rows x row_len` f32 elements.
    #[inline]
    pub(crate) fn check_dense_f32(&self, device: u32, what: &'static str, rows: usize, row_len: usize) -> Result<()> {
        self.check(device, what, Dtype::F32, rows, row_len, 4)?;
        check_dense(what, &self.layout, rows, row_len)
    }
    /// The bytes this view's rows span, named `what` ([`check_disjoint`]).
    pub(crate) fn span(&self, what: &'static str) -> Span {
        Span::of(what, self.ptr, self.dtype, &self.layout)
    }
}

impl<B> DeviceTensorMut<'_, B> {
    /// A writable view of `len` elements at `ptr`, made by a vendor buffer that owns the memory.
    pub(crate) fn of_buffer(ptr: u64, len: usize, dtype: Dtype, layout: Layout, device: u32) -> Self {
        DeviceTensorMut { ptr, len, dtype, layout, device, _buf: PhantomData }
    }
    /// A writable view of memory this crate did not allocate.
    ///
    /// # Safety
    /// As [`DeviceTensor::from_raw`], and valid for writes; nothing else may access the range
    /// while a launch that writes it may run.
    pub unsafe fn from_raw(ptr: u64, len: usize, dtype: Dtype, layout: Layout) -> Self {
        DeviceTensorMut { ptr, len, dtype, layout, device: 0, _buf: PhantomData }
    }
    /// The device address of the first element.
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    /// The storage type of the elements.
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    /// The token rows: count, length and stride, in elements.
    pub fn layout(&self) -> Layout {
        self.layout
    }
    /// Same storage with another layout (as [`DeviceTensor::with_layout`]).
    pub fn with_layout(self, layout: Layout) -> Self {
        DeviceTensorMut { layout, ..self }
    }
    /// A read-only view of the same storage, for as long as this view is borrowed (an op that
    /// writes a tensor and then reads it back, e.g. `post_pre` as post then pre).
    pub fn as_view(&self) -> DeviceTensor<'_, B> {
        DeviceTensor {
            ptr: self.ptr,
            len: self.len,
            dtype: self.dtype,
            layout: self.layout,
            device: self.device,
            _buf: PhantomData,
        }
    }
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn check(
        &self,
        device: u32,
        what: &'static str,
        dtype: Dtype,
        tokens: usize,
        row_len: usize,
        align: usize,
    ) -> Result<()> {
        check_device(what, self.device, device)?;
        check_view(what, self.ptr, self.len, self.dtype, &self.layout, dtype, tokens, row_len, align)
    }
    /// As [`DeviceTensor::check_dense_f32`] (coefficient outputs of `pre`).
    #[allow(dead_code)]
    #[inline]
    pub(crate) fn check_dense_f32(&self, device: u32, what: &'static str, rows: usize, row_len: usize) -> Result<()> {
        self.check(device, what, Dtype::F32, rows, row_len, 4)?;
        check_dense(what, &self.layout, rows, row_len)
    }
    /// The bytes this view's rows span, named `what` ([`check_disjoint`]).
    pub(crate) fn span(&self, what: &'static str) -> Span {
        Span::of(what, self.ptr, self.dtype, &self.layout)
    }
}

/// The device bytes one argument of a call touches, `[lo, hi)`: from its first element to the
/// end of its last row (empty without rows).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Span {
    what: &'static str,
    lo: u64,
    hi: u64,
}

impl Span {
    /// An absent optional argument: overlaps nothing.
    pub(crate) const NONE: Span = Span { what: "", lo: 0, hi: 0 };

    /// Saturating: an argument whose rows would pass the end of the address space is refused by
    /// the layout checks, and here it simply reaches the end.
    fn of(what: &'static str, ptr: u64, dtype: Dtype, layout: &Layout) -> Span {
        let elems = layout.required_len().unwrap_or(usize::MAX) as u64;
        Span { what, lo: ptr, hi: ptr.saturating_add(elems.saturating_mul(dtype.size() as u64)) }
    }

    fn overlaps(&self, other: &Span) -> bool {
        self.lo < self.hi && other.lo < other.hi && self.lo < other.hi && other.lo < self.hi
    }
}

/// Outputs overlap neither an input nor each other: a kernel's stores would otherwise change
/// what its other threads still read, or race one another, and the results would depend on
/// timing. O(outputs x arguments) comparisons, no allocation; the error names both arguments.
pub(crate) fn check_disjoint(outputs: &[Span], inputs: &[Span]) -> Result<()> {
    for (i, o) in outputs.iter().enumerate() {
        if let Some(other) = inputs.iter().chain(&outputs[i + 1..]).find(|other| o.overlaps(other)) {
            return Err(Error::Overlap { tensor: o.what, other: other.what });
        }
    }
    Ok(())
}

/// A view on one device given to a plan on another (0 on either side: unknown, not checked).
pub(crate) fn check_device(what: &'static str, view: u32, plan: u32) -> Result<()> {
    if view != 0 && plan != 0 && view != plan {
        return Err(Error::Device { tensor: what, tensor_device: view - 1, plan_device: plan - 1 });
    }
    Ok(())
}

fn check_dense(what: &'static str, layout: &Layout, rows: usize, row_len: usize) -> Result<()> {
    if rows > 1 && layout.row_stride != row_len {
        return Err(Error::shape(what, format!("dense rows (stride {row_len})"), layout.row_stride));
    }
    Ok(())
}

/// What every op checks on a tensor argument, in O(1): dtype, rows and row length (through
/// [`Layout::check`] against the storage length), pointer and row-stride alignment.
#[inline]
#[allow(clippy::too_many_arguments)]
pub(crate) fn check_view(
    what: &'static str,
    ptr: u64,
    len: usize,
    dtype: Dtype,
    layout: &Layout,
    want_dtype: Dtype,
    tokens: usize,
    row_len: usize,
    align: usize,
) -> Result<()> {
    if dtype != want_dtype {
        return Err(Error::Dtype { tensor: what, expected: want_dtype, got: dtype });
    }
    layout.check(what, tokens, row_len, len)?;
    let align = align.max(1);
    if ptr == 0 {
        return Err(Error::Alignment { tensor: what, required: align });
    }
    // `Layout::check` bounds the stride already; the product is checked here too so that this
    // function is safe on its own.
    let stride_bytes = layout.row_stride.checked_mul(dtype.size()).ok_or_else(|| {
        Error::shape(what, "a row stride whose bytes fit in memory", format!("row stride {}", layout.row_stride))
    })?;
    if ptr % align as u64 != 0 || stride_bytes % align != 0 {
        return Err(Error::Alignment { tensor: what, required: align });
    }
    Ok(())
}

/// `pre`'s outputs overlap neither each other nor its input and parameters.
pub(crate) fn pre_disjoint<B>(
    x: &DeviceTensor<'_, B>,
    params: &PreParamViews<'_, B>,
    out: &PreOutViews<'_, B>,
) -> Result<()> {
    let [phi, scale, base, gamma_k, gamma_f] = params.spans();
    check_disjoint(&out.spans(), &[x.span("x"), phi, scale, base, gamma_k, gamma_f])
}

/// `post_pre`'s outputs (`x_out` and the pre outputs) overlap neither each other nor an input
/// (`x`, layer l's side, layer l+1's parameters): `x_out` is written while other threads still
/// read `x`, and the pre outputs while `x_out` is read.
pub(crate) fn post_pre_disjoint<B>(
    x: &DeviceTensor<'_, B>,
    post: &PostInViews<'_, B>,
    x_out: &DeviceTensorMut<'_, B>,
    params: &PreParamViews<'_, B>,
    out: &PreOutViews<'_, B>,
) -> Result<()> {
    let [a, y, h_pre, h_post, h_res, inv_rms] = out.spans();
    let [f, post_h_post, post_h_res] = post.spans();
    let [phi, scale, base, gamma_k, gamma_f] = params.spans();
    check_disjoint(
        &[x_out.span("x_out"), a, y, h_pre, h_post, h_res, inv_rms],
        &[x.span("x"), f, post_h_post, post_h_res, phi, scale, base, gamma_k, gamma_f],
    )
}

/// The parameters of `pre` (and of the pre half of `post_pre`) on the device: `phi [M, n*C]`,
/// `scale [3]`, `base [M]`, and `gamma_k [n*C]` / `gamma_f [C]` exactly when the configuration
/// asks for them; all dense f32. Every device reads them the same way; a device whose kernels
/// lack an optional input has no variant for a configuration that asks for it (`NoVariant`).
#[derive(Debug)]
pub struct PreParamViews<'a, B> {
    /// The projection `phi[M, n*C]`, row-major.
    pub phi: DeviceTensor<'a, B>,
    /// The scales of the pre, post and residual logits, `scale[3]`.
    pub scale: DeviceTensor<'a, B>,
    /// The logit biases `base[M]`.
    pub base: DeviceTensor<'a, B>,
    /// The pre-norm weights `gamma_k[n*C]` (present iff `cfg.gamma_k`).
    pub gamma_k: Option<DeviceTensor<'a, B>>,
    /// The F-pre-norm weights `gamma_f[C]` (present iff `cfg.gamma_f`).
    pub gamma_f: Option<DeviceTensor<'a, B>>,
}

impl<B> PreParamViews<'_, B> {
    /// The parameters' byte spans ([`check_disjoint`]).
    pub(crate) fn spans(&self) -> [Span; 5] {
        let opt = |v: &Option<DeviceTensor<'_, B>>, what| v.as_ref().map_or(Span::NONE, |v| v.span(what));
        [
            self.phi.span("phi"),
            self.scale.span("scale"),
            self.base.span("base"),
            opt(&self.gamma_k, "gamma_k"),
            opt(&self.gamma_f, "gamma_f"),
        ]
    }
}

impl<B> Clone for PreParamViews<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for PreParamViews<'_, B> {}

/// Where `pre` (and the pre half of `post_pre`) writes: `a` (and `y` iff `cfg.gamma_f`) T rows
/// of C in the plan's dtype (strided rows); `h_pre`, `h_post` `[T, n]`, `h_res` `[T, n, n]` and
/// `inv_rms` `[T, 1]`, dense f32.
#[derive(Debug)]
pub struct PreOutViews<'a, B> {
    /// The pre-mix `a[T, C]`.
    pub a: DeviceTensorMut<'a, B>,
    /// The F-pre-norm `y[T, C]` (present iff `cfg.gamma_f`).
    pub y: Option<DeviceTensorMut<'a, B>>,
    /// The pre coefficients `h_pre[T, n]`.
    pub h_pre: DeviceTensorMut<'a, B>,
    /// The post coefficients `h_post[T, n]`.
    pub h_post: DeviceTensorMut<'a, B>,
    /// The residual mixing matrices `h_res[T, n, n]`, row-major.
    pub h_res: DeviceTensorMut<'a, B>,
    /// The reciprocal RMS of each token's residual row, `inv_rms[T, 1]`.
    pub inv_rms: DeviceTensorMut<'a, B>,
}

impl<B> PreOutViews<'_, B> {
    /// The outputs' byte spans ([`check_disjoint`]).
    pub(crate) fn spans(&self) -> [Span; 6] {
        [
            self.a.span("a"),
            self.y.as_ref().map_or(Span::NONE, |y| y.span("y")),
            self.h_pre.span("h_pre"),
            self.h_post.span("h_post"),
            self.h_res.span("h_res"),
            self.inv_rms.span("inv_rms"),
        ]
    }
}

/// Layer l's side of `post_pre`: `f` T rows of C (plan dtype), `h_post` `[T, n]` and `h_res`
/// `[T, n, n]` dense f32.
#[derive(Debug)]
pub struct PostInViews<'a, B> {
    /// Layer l's sublayer output `f[T, C]`.
    pub f: DeviceTensor<'a, B>,
    /// Layer l's post coefficients `h_post[T, n]`.
    pub h_post: DeviceTensor<'a, B>,
    /// Layer l's residual mixing matrices `h_res[T, n, n]`, row-major.
    pub h_res: DeviceTensor<'a, B>,
}

impl<B> PostInViews<'_, B> {
    /// The inputs' byte spans ([`check_disjoint`]), named as layer l's.
    pub(crate) fn spans(&self) -> [Span; 3] {
        [self.f.span("f"), self.h_post.span("post h_post"), self.h_res.span("post h_res")]
    }
}

impl<B> Clone for PostInViews<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for PostInViews<'_, B> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn span(what: &'static str, ptr: u64, rows: usize, row_len: usize, stride: usize) -> Span {
        Span::of(what, ptr, Dtype::F32, &Layout { tokens: rows, row_len, row_stride: stride })
    }

    #[test]
    fn outputs_must_not_overlap_inputs_or_each_other() {
        let x = span("x", 0x1000, 3, 8, 8); // [0x1000, 0x1060)
        let touching = span("out", 0x1060, 3, 8, 8);
        let inside_padding = span("f", 0x2000, 2, 4, 8); // [0x2000, 0x2030)
        assert!(check_disjoint(&[touching], &[x]).is_ok(), "adjacent ranges do not overlap");
        let last_byte = span("out", 0x105c, 1, 1, 1);
        let err = check_disjoint(&[last_byte], &[x]).unwrap_err().to_string();
        assert_eq!(err, "out overlaps x: an output must use memory no other argument of the call uses");
        // Outputs against each other, and the second output named with the first.
        let a = span("a", 0x3000, 2, 4, 4);
        let h = span("h_pre", 0x3010, 1, 1, 1);
        let err = check_disjoint(&[a, h], &[x, inside_padding]).unwrap_err().to_string();
        assert!(err.starts_with("a overlaps h_pre"), "{err}");
        // Absent optional arguments and empty views overlap nothing.
        let empty = span("y", 0x1000, 0, 8, 8);
        assert!(check_disjoint(&[empty, Span::NONE], &[x, Span::NONE]).is_ok());
        // A span past the end of the address space saturates instead of wrapping.
        let huge = span("out", u64::MAX - 8, 4, 8, 8);
        assert!(check_disjoint(&[huge], &[span("x", u64::MAX - 1, 1, 1, 1)]).is_err());
        assert!(check_disjoint(&[huge], &[x]).is_ok());
    }
}
