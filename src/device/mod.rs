//! GPU devices. Each vendor module opens its driver at run time (nothing vendor-specific is
//! needed to build), loads the embedded code objects once, and exposes plans whose ops launch
//! one hand-written kernel each.

pub mod cuda;
pub mod hip;
pub mod view;

#[cfg(test)]
pub(crate) mod hostile;

pub use cuda::{CudaDevice, DeviceBuffer, DeviceTensor, DeviceTensorMut, Event, Graph, Plan, Stream, Workspace};
