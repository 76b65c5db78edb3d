//! Device memory: owned buffers (alloc, upload, download, fill) and the tensor views ops take.
//!
//! A view is a device address, an element count, a storage dtype and a [`Layout`] (T rows of
//! `row_len` elements, `row_stride` apart): the device mirror of the host views in
//! `crate::tensor`. Views borrow their buffer, so a buffer cannot be freed while an op that
//! takes its view is being called; for external memory (an engine's own allocations) use the
//! `unsafe` raw constructors.

use super::device::{HipDevice, Inner};
use super::result::mem;
use super::stream::Stream;
use crate::config::Dtype;
use crate::error::{Error, Result};
use crate::tensor::Layout;
use std::sync::Arc;

/// An owned device allocation (hipMalloc, 256-byte aligned), freed on drop.
pub struct DeviceBuffer {
    dev: Arc<Inner>,
    ptr: u64,
    bytes: usize,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer({:#x}, {} bytes)", self.ptr, self.bytes)
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            let _ = mem::free(self.dev.hip, self.ptr);
        }
    }
}

impl DeviceBuffer {
    /// `bytes` uninitialised bytes.
    pub fn alloc(dev: &HipDevice, bytes: usize) -> Result<Self> {
        dev.inner.bind()?;
        let ptr = mem::alloc(dev.inner.hip, bytes)?;
        Ok(DeviceBuffer { dev: dev.inner.clone(), ptr, bytes })
    }

    /// `bytes` zero bytes.
    pub fn zeroed(dev: &HipDevice, bytes: usize) -> Result<Self> {
        let b = Self::alloc(dev, bytes)?;
        // SAFETY: the allocation holds `bytes` bytes.
        unsafe { mem::set_d8(b.dev.hip, b.ptr, 0, bytes) }?;
        settle_null_stream(b.dev.hip)?;
        Ok(b)
    }

    /// A new buffer holding a copy of `data`.
    pub fn from_slice<T: bytemuck::Pod>(dev: &HipDevice, data: &[T]) -> Result<Self> {
        let b = Self::alloc(dev, std::mem::size_of_val(data))?;
        b.upload(data)?;
        Ok(b)
    }

    /// The buffer's device address.
    pub fn device_ptr(&self) -> u64 {
        self.ptr
    }
    /// The device the buffer is on, as views record it (its ordinal + 1).
    pub(crate) fn device_id(&self) -> u32 {
        self.dev.ordinal as u32 + 1
    }
    /// Size of the buffer, bytes.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies `data` to the start of the buffer (synchronous; waits for the copy).
    pub fn upload<T: bytemuck::Pod>(&self, data: &[T]) -> Result<()> {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        if bytes.len() > self.bytes {
            return Err(Error::shape("upload", format!("<= {} bytes", self.bytes), format!("{} bytes", bytes.len())));
        }
        self.dev.bind()?;
        // SAFETY: the destination holds >= bytes.len() bytes (checked), the source is a slice.
        unsafe { mem::htod(self.dev.hip, self.ptr, bytes) }?;
        settle_null_stream(self.dev.hip)
    }

    /// Copies the start of the buffer into `out` (synchronous). Work on this crate's streams,
    /// which do not synchronize with the null stream, must have finished: synchronize the stream
    /// that wrote the buffer first.
    pub fn download<T: bytemuck::Pod>(&self, out: &mut [T]) -> Result<()> {
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        if bytes.len() > self.bytes {
            return Err(Error::shape("download", format!("<= {} bytes", self.bytes), format!("{} bytes", bytes.len())));
        }
        self.dev.bind()?;
        // SAFETY: the source holds >= bytes.len() bytes (checked), the destination is a slice.
        unsafe { mem::dtoh(self.dev.hip, bytes, self.ptr) }
    }

    /// The whole buffer as a vector of `T` (`bytes / size_of::<T>()` elements).
    pub fn to_vec<T: bytemuck::Pod>(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.bytes / std::mem::size_of::<T>().max(1)];
        self.download(&mut v)?;
        Ok(v)
    }

    /// Fills the buffer with a repeated 32-bit pattern, stream-ordered (e.g. NaN to poison
    /// outputs before a test launch). The byte count must be a multiple of 4.
    pub fn fill_u32(&self, stream: &Stream, word: u32) -> Result<()> {
        if self.bytes % 4 != 0 {
            return Err(Error::Alignment { tensor: "fill_u32 buffer length", required: 4 });
        }
        self.dev.bind()?;
        // SAFETY: the allocation holds `bytes` bytes, 256-byte aligned.
        unsafe { mem::set_d32_async(self.dev.hip, self.ptr, word, self.bytes / 4, stream.raw()) }
    }

    /// Stream-ordered copy of the first `bytes` bytes of `src` into this buffer.
    pub fn copy_from(&self, stream: &Stream, src: &DeviceBuffer, bytes: usize) -> Result<()> {
        if bytes > self.bytes || bytes > src.bytes {
            return Err(Error::shape("copy", format!("<= {} bytes", self.bytes.min(src.bytes)), bytes));
        }
        self.dev.bind()?;
        // SAFETY: both allocations hold >= `bytes` bytes (checked) and live until the caller
        // synchronizes (they are borrowed here; dropping a buffer frees after pending work in
        // hipFree, which waits for the device to finish using the allocation).
        unsafe { mem::dtod_async(self.dev.hip, self.ptr, src.ptr, bytes, stream.raw()) }
    }

    /// Stream-ordered copy of the first `bytes` bytes of `src` into this buffer at byte `offset`.
    pub fn copy_from_at(&self, stream: &Stream, offset: usize, src: &DeviceBuffer, bytes: usize) -> Result<()> {
        if offset.checked_add(bytes).is_none_or(|end| end > self.bytes) || bytes > src.bytes {
            return Err(Error::shape("copy", format!("a range inside {} bytes", self.bytes), offset + bytes));
        }
        self.dev.bind()?;
        // SAFETY: [offset, offset + bytes) lies inside this allocation and [0, bytes) inside
        // `src` (checked); both outlive the copy as for `copy_from`.
        unsafe { mem::dtod_async(self.dev.hip, self.ptr + offset as u64, src.ptr, bytes, stream.raw()) }
    }

    /// A read-only view of the buffer as `dtype` elements with `layout`.
    pub fn view(&self, dtype: Dtype, layout: Layout) -> DeviceTensor<'_> {
        DeviceTensor::of_buffer(self.ptr, self.bytes / dtype.size(), dtype, layout, self.device_id())
    }

    /// A writable view of the buffer as `dtype` elements with `layout`.
    pub fn view_mut(&mut self, dtype: Dtype, layout: Layout) -> DeviceTensorMut<'_> {
        DeviceTensorMut::of_buffer(self.ptr, self.bytes / dtype.size(), dtype, layout, self.device_id())
    }

    /// A dense read-only view of `len` elements as one row (parameters, coefficients).
    pub fn flat(&self, dtype: Dtype) -> DeviceTensor<'_> {
        let len = self.bytes / dtype.size();
        self.view(dtype, Layout::dense(1, len))
    }
}

/// Read-only view of device memory (see [`crate::device::view`]).
pub type DeviceTensor<'a> = crate::device::view::DeviceTensor<'a, DeviceBuffer>;
/// Writable view of device memory (see [`crate::device::view`]).
pub type DeviceTensorMut<'a> = crate::device::view::DeviceTensorMut<'a, DeviceBuffer>;

impl DeviceBuffer {
    /// Whether the buffer was allocated on `dev`.
    pub(crate) fn same_device(&self, dev: &HipDevice) -> bool {
        Arc::ptr_eq(&self.dev, &dev.inner)
    }
}

/// Waits for the null stream: `hipMemsetD8` and `hipMemcpyHtoD` from pageable memory may return
/// before the device memory is written, on the null stream, which the crate's non-blocking streams
/// do not wait for (a kernel launched right after `zeroed` or `upload` could read the old bytes).
fn settle_null_stream(hip: &'static super::sys::Hip) -> Result<()> {
    super::result::stream::synchronize(hip, std::ptr::null_mut())
}
