//! Streams, events and HIP graphs (stream capture). Ops enqueue on a [`Stream`] and return at
//! once; [`Stream::synchronize`] waits. Everything an op does between its checks and its
//! launches is capturable: a captured [`Graph`] replays the same launches.

use super::device::{HipDevice, Inner};
use super::result::{event, graph, stream};
use super::sys;
use crate::error::Result;
use std::sync::Arc;

/// A HIP stream of one device: a non-blocking one this library made ([`Stream::new`]), or a
/// caller's `hipStream_t` borrowed for its ops ([`Stream::from_raw`]).
pub struct Stream {
    dev: Arc<Inner>,
    raw: sys::HipStream,
    /// Made here, so destroyed here; a borrowed stream stays the caller's.
    owned: bool,
}

// SAFETY: a hipStream_t may be used from any host thread (the runtime serialises); the device
// is made current before each call that needs it.
unsafe impl Send for Stream {}
// SAFETY: as above; the handle itself is never mutated.
unsafe impl Sync for Stream {}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned && self.dev.bind().is_ok() {
            let _ = stream::destroy(self.dev.hip, self.raw);
        }
    }
}

impl Stream {
    /// A new non-blocking stream on `dev`, destroyed with the returned value.
    pub fn new(dev: &HipDevice) -> Result<Self> {
        dev.inner.bind()?;
        Ok(Stream { dev: dev.inner.clone(), raw: stream::create(dev.inner.hip)?, owned: true })
    }

    /// Borrows a caller's `hipStream_t` (an engine's stream, PyTorch's current stream) so that
    /// ops enqueue on it; dropping the returned value leaves the stream alone. A null handle is
    /// the device's default (null) stream.
    ///
    /// # Safety
    /// `raw` must be a stream of `dev` (or null) that stays valid while any op enqueued through
    /// this `Stream` may run.
    pub unsafe fn from_raw(dev: &HipDevice, raw: *mut std::ffi::c_void) -> Self {
        Stream { dev: dev.inner.clone(), raw, owned: false }
    }

    /// The runtime handle (for interop: recording the caller's events, capturing graphs).
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.raw
    }

    #[inline]
    pub(crate) fn raw(&self) -> sys::HipStream {
        self.raw
    }

    #[inline]
    pub(crate) fn hip(&self) -> &'static sys::Hip {
        self.dev.hip
    }

    pub(crate) fn same_device(&self, dev: &HipDevice) -> bool {
        Arc::ptr_eq(&self.dev, &dev.inner)
    }

    /// Waits until all work enqueued on this stream finished; reports a kernel fault here.
    pub fn synchronize(&self) -> Result<()> {
        stream::synchronize(self.dev.hip, self.raw)
    }

    /// Starts capturing this stream's work into a graph (thread-local capture mode).
    pub fn begin_capture(&self) -> Result<()> {
        graph::begin_capture(self.dev.hip, self.raw)
    }

    /// Ends the capture and instantiates the captured work as a replayable graph.
    pub fn end_capture(&self) -> Result<Graph> {
        let hip = self.dev.hip;
        let g = graph::end_capture(hip, self.raw)?;
        let exec = match graph::instantiate(hip, g) {
            Ok(e) => e,
            Err(e) => {
                let _ = graph::destroy(hip, g);
                return Err(e);
            }
        };
        Ok(Graph { dev: self.dev.clone(), graph: g, exec })
    }
}

/// A captured, instantiated HIP graph.
pub struct Graph {
    dev: Arc<Inner>,
    graph: sys::HipGraph,
    exec: sys::HipGraphExec,
}

// SAFETY: graph handles are usable from any host thread.
unsafe impl Send for Graph {}

impl Graph {
    /// Replays the graph on `stream`.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        graph::launch(self.dev.hip, self.exec, stream.raw())
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        let _ = graph::exec_destroy(self.dev.hip, self.exec);
        let _ = graph::destroy(self.dev.hip, self.graph);
    }
}

/// A timing event.
pub struct Event {
    dev: Arc<Inner>,
    raw: sys::HipEvent,
}

// SAFETY: event handles are usable from any host thread.
unsafe impl Send for Event {}

impl Event {
    pub fn new(dev: &HipDevice) -> Result<Self> {
        dev.inner.bind()?;
        Ok(Event { dev: dev.inner.clone(), raw: event::create(dev.inner.hip)? })
    }
    /// Records the event at the current end of `stream`.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        event::record(self.dev.hip, self.raw, stream.raw())
    }
    pub fn synchronize(&self) -> Result<()> {
        event::synchronize(self.dev.hip, self.raw)
    }
    /// Milliseconds from `start` to this event (both recorded, this one completed).
    pub fn elapsed_ms_since(&self, start: &Event) -> Result<f32> {
        event::elapsed_ms(self.dev.hip, start.raw, self.raw)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        let _ = event::destroy(self.dev.hip, self.raw);
    }
}
