//! Streams, events and CUDA graphs (stream capture). Ops enqueue on a [`Stream`] and return
//! at once; [`Stream::synchronize`] waits. Everything an op does between its checks and its
//! one `cuLaunchKernel` is capturable: a captured [`Graph`] replays the same launches.

use super::device::{CudaDevice, Inner};
use super::ffi;
use crate::error::Result;
use std::sync::Arc;

/// A non-blocking CUDA stream of one device: one this crate created (destroyed on drop), or a
/// caller's stream borrowed by [`Stream::from_raw`] (an engine's current stream; never destroyed
/// here).
pub struct Stream {
    dev: Arc<Inner>,
    raw: ffi::CUstream,
    owned: bool,
}

// SAFETY: a CUstream may be used from any thread of the process (the driver serialises);
// every entry point binds the device context first.
unsafe impl Send for Stream {}
// SAFETY: as above; the handle itself is never mutated.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned && self.dev.bind().is_ok() {
            let _ = ffi::stream_destroy(self.raw);
        }
    }
}

impl Stream {
    pub fn new(dev: &CudaDevice) -> Result<Self> {
        dev.inner.bind()?;
        Ok(Stream { dev: dev.inner.clone(), raw: ffi::stream_create()?, owned: true })
    }

    /// Borrows a stream this crate did not create (a `CUstream` / `cudaStream_t`, e.g. PyTorch's
    /// `torch.cuda.current_stream().cuda_stream`; null is the legacy default stream). Ops enqueue
    /// on it; dropping the `Stream` leaves it alone.
    ///
    /// # Safety
    /// `raw` must be a stream of `dev`'s primary context (the one every framework on the device
    /// shares) that stays valid while any op enqueued through this `Stream` may run.
    pub unsafe fn from_raw(dev: &CudaDevice, raw: *mut std::ffi::c_void) -> Self {
        Stream { dev: dev.inner.clone(), raw: raw as ffi::CUstream, owned: false }
    }

    /// The driver handle (for interop: recording the caller's events, capturing graphs).
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.raw as *mut std::ffi::c_void
    }

    #[inline]
    pub(crate) fn raw(&self) -> ffi::CUstream {
        self.raw
    }

    /// Binds the stream's context to the calling thread (launch path: one thread-local read).
    #[inline]
    pub(crate) fn bind(&self) -> Result<()> {
        self.dev.bind()
    }

    pub(crate) fn same_device(&self, dev: &CudaDevice) -> bool {
        Arc::ptr_eq(&self.dev, &dev.inner)
    }

    /// Waits until all work enqueued on this stream finished; reports a kernel fault here.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        ffi::stream_synchronize(self.raw)
    }

    /// Starts capturing this stream's work into a graph (thread-local capture mode).
    pub fn begin_capture(&self) -> Result<()> {
        self.bind()?;
        ffi::stream_begin_capture(self.raw)
    }

    /// Ends the capture and instantiates the captured work as a replayable graph.
    pub fn end_capture(&self) -> Result<Graph> {
        self.bind()?;
        let graph = ffi::stream_end_capture(self.raw)?;
        let exec = match ffi::graph_instantiate(graph) {
            Ok(e) => e,
            Err(e) => {
                let _ = ffi::graph_destroy(graph);
                return Err(e);
            }
        };
        Ok(Graph { dev: self.dev.clone(), graph, exec })
    }
}

/// A captured, instantiated CUDA graph.
pub struct Graph {
    dev: Arc<Inner>,
    graph: ffi::CUgraph,
    exec: ffi::CUgraphExec,
}

// SAFETY: graph handles are usable from any thread once the context is bound.
unsafe impl Send for Graph {}

impl Graph {
    /// Replays the graph on `stream`.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        stream.bind()?;
        ffi::graph_launch(self.exec, stream.raw())
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            let _ = ffi::graph_exec_destroy(self.exec);
            let _ = ffi::graph_destroy(self.graph);
        }
    }
}

/// A timing event.
pub struct Event {
    dev: Arc<Inner>,
    raw: ffi::CUevent,
}

// SAFETY: event handles are usable from any thread once the context is bound.
unsafe impl Send for Event {}

impl Event {
    pub fn new(dev: &CudaDevice) -> Result<Self> {
        dev.inner.bind()?;
        Ok(Event { dev: dev.inner.clone(), raw: ffi::event_create()? })
    }
    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        stream.bind()?;
        ffi::event_record(self.raw, stream.raw())
    }
    pub fn synchronize(&self) -> Result<()> {
        self.dev.bind()?;
        ffi::event_synchronize(self.raw)
    }
    /// Milliseconds from `start` to this event (both recorded, this one completed).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        self.dev.bind()?;
        ffi::event_elapsed_ms(start.raw, self.raw)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.dev.bind().is_ok() {
            let _ = ffi::event_destroy(self.raw);
        }
    }
}
