//! Device tensor views, shared by every vendor: a device address, the number of elements the
//! storage holds from it, the storage dtype and the strided-row [`Layout`]. `B` is the vendor's
//! buffer type; it only ties the view's lifetime to the buffer it borrows (each vendor module
//! names its views `DeviceTensor<'a>` / `DeviceTensorMut<'a>` through a type alias).
//! `check_view` is what every op checks on a tensor argument, in O(1), before a launch.

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
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
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
    pub fn ptr(&self) -> u64 {
        self.ptr
    }
    pub fn dtype(&self) -> Dtype {
        self.dtype
    }
    pub fn layout(&self) -> Layout {
        self.layout
    }
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

/// The parameters of `pre` (and of the pre half of `post_pre`) on the device: `phi [M, n*C]`,
/// `scale [3]`, `base [M]`, and `gamma_k [n*C]` / `gamma_f [C]` exactly when the configuration
/// asks for them; all dense f32. Every device reads them the same way; a device whose kernels
/// lack an optional input has no variant for a configuration that asks for it (`NoVariant`).
#[derive(Debug)]
pub struct PreParamViews<'a, B> {
    pub phi: DeviceTensor<'a, B>,
    pub scale: DeviceTensor<'a, B>,
    pub base: DeviceTensor<'a, B>,
    pub gamma_k: Option<DeviceTensor<'a, B>>,
    pub gamma_f: Option<DeviceTensor<'a, B>>,
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
    pub a: DeviceTensorMut<'a, B>,
    pub y: Option<DeviceTensorMut<'a, B>>,
    pub h_pre: DeviceTensorMut<'a, B>,
    pub h_post: DeviceTensorMut<'a, B>,
    pub h_res: DeviceTensorMut<'a, B>,
    pub inv_rms: DeviceTensorMut<'a, B>,
}

/// Layer l's side of `post_pre`: `f` T rows of C (plan dtype), `h_post` `[T, n]` and `h_res`
/// `[T, n, n]` dense f32.
#[derive(Debug)]
pub struct PostInViews<'a, B> {
    pub f: DeviceTensor<'a, B>,
    pub h_post: DeviceTensor<'a, B>,
    pub h_res: DeviceTensor<'a, B>,
}

impl<B> Clone for PostInViews<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<B> Copy for PostInViews<'_, B> {}
