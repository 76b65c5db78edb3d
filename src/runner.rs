//! The host-array seam between the `mhc` command (and tests) and every device: a stage takes
//! named dense arrays and returns named dense arrays. The CPU reference, the CUDA device, the
//! HIP device and the GCN simulator each implement [`StageRunner`]; `mhc run` only talks to
//! this trait. Names and shapes are the ones of `mhc run --help` (issue 2), listed once in
//! [`signature`].

use crate::config::{Config, Dtype, Stage};
use crate::error::Result;
use std::collections::BTreeMap;

/// A dense row-major host array. Values are carried as f64; a device stores them in the
/// requested dtype (rounding activations once) before computing.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    pub shape: Vec<usize>,
    pub data: Vec<f64>,
}

impl Array {
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Self {
        debug_assert_eq!(shape.iter().product::<usize>(), data.len());
        Array { shape, data }
    }
}

/// Arrays by name (`x`, `phi`, `h_post`, ...).
pub type Named = BTreeMap<String, Array>;

/// Something that runs a stage on host arrays.
pub trait StageRunner {
    /// A short name for messages (`cpu`, `cuda:0 (sm_90a)`, ...).
    fn name(&self) -> String;
    /// Runs `stage` with `cfg`, storing activations as `dtype`. Validates every input before
    /// computing; returns every output of the stage.
    fn run(&self, stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<Named>;
}
