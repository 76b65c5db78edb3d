//! The float64 (and float32) reference of every stage of MATH.md, forward and backward: the
//! oracle every kernel, the tuner and the simulator are checked against.
//!
//! Every function is generic over the arithmetic `R` ([`Real`]: `f64` for the oracle, `f32`)
//! and reads bf16/f32/f64 storage through [`HostTensor`](crate::HostTensor) (strided token rows)
//! and [`HostData`](crate::HostData) (dense parameters). Before writing anything, each one
//! validates the configuration ([`Config::validate`](crate::Config::validate)), every shape and
//! stride ([`Layout::check`](crate::Layout::check)), the storage types (see [`param_dtype`]) and
//! that parameters and coefficients are finite ([`Error::NonFinite`](crate::Error::NonFinite));
//! so a call that fails leaves its outputs untouched. Token reductions run in token order: the
//! same inputs give bit-identical outputs.

// The formulas index several arrays with the same subscripts, as MATH.md writes them.
#![allow(clippy::needless_range_loop)]

mod check;
pub mod expand;
pub mod head;
mod par;
pub mod post;
pub mod pre;
pub mod real;
pub mod sinkhorn;
pub mod static_layer;
pub mod testing;

pub use check::param_dtype;
pub use expand::expand;
pub use head::{head, head_backward, HeadGrads, HeadParams};
pub use post::{post, post_backward, post_pre, PostGrads, PostInputs};
pub use pre::{pre, pre_backward, PreGrads, PreOutputs, PreParams, PreUpstream};
pub use real::{sigmoid, Real};
pub use sinkhorn::sinkhorn;
pub use static_layer::{static_backward, static_layer, StaticGrads, StaticParams};
