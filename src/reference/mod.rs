//! The float64 (and float32) reference of every stage of docs/math.md, forward and backward: the
//! oracle every kernel, the tuner and the simulator are checked against.
//!
//! Every function is generic over the arithmetic `R` ([`Real`]: `f64` for the oracle, `f32`)
//! and reads bf16/f32/f64 storage through [`HostTensor`](crate::HostTensor) (strided token rows)
//! and [`HostData`](crate::HostData) (dense parameters). Before writing anything, each one
//! validates the configuration ([`Config::validate`](crate::Config::validate)), every shape and
//! stride ([`Layout::check`](crate::Layout::check)), the storage types (see [`param_dtype`]) and
//! that parameters and coefficients are finite ([`Error::NonFinite`](crate::Error::NonFinite));
//! so a call that fails leaves its outputs untouched. Token reductions run in token order: the
//! same inputs give bit-identical outputs (`pre` and `pre_backward` use every core, in fixed
//! 16-token chunks, so this holds whatever the core count).
//!
//! ```
//! use mhc::reference::{self, PreOutputs, PreParams};
//! use mhc::{Config, HostData, HostTensor, HostTensorMut, Layout};
//!
//! let (t, n, c) = (2, 4, 8);
//! let cfg = Config::new(n, c); // DeepSeek-V4, 20 Sinkhorn iterations, eps 1e-6
//! let x: Vec<f32> = (0..t * n * c).map(|i| (i as f32 * 0.37).sin()).collect();
//! let phi = vec![0.01f32; cfg.m() * cfg.k()];
//! let (scale, base) = ([0.5f32, 0.5, 0.5], vec![0.0f32; cfg.m()]);
//! let params = PreParams {
//!     phi: HostData::F32(&phi),
//!     scale: HostData::F32(&scale),
//!     base: HostData::F32(&base),
//!     gamma_k: None,
//!     gamma_f: None,
//! };
//! let (mut a, mut h_pre, mut h_post) = (vec![0f32; t * c], vec![0f32; t * n], vec![0f32; t * n]);
//! let (mut h_res, mut inv_rms) = (vec![0f32; t * n * n], vec![0f32; t]);
//! let mut out = PreOutputs {
//!     a: HostTensorMut::new(&mut a[..], Layout::dense(t, c)),
//!     y: None,
//!     h_pre: HostTensorMut::new(&mut h_pre[..], Layout::dense(t, n)),
//!     h_post: HostTensorMut::new(&mut h_post[..], Layout::dense(t, n)),
//!     h_res: HostTensorMut::new(&mut h_res[..], Layout::dense(t, n * n)),
//!     inv_rms: HostTensorMut::new(&mut inv_rms[..], Layout::dense(t, 1)),
//! };
//! // f32 storage, f64 arithmetic.
//! reference::pre::<f64>(&cfg, &HostTensor::new(&x[..], Layout::streams(t, n, c)), &params, &mut out)?;
//! let col0: f32 = (0..n).map(|i| h_res[i * n]).sum();
//! assert!((col0 - 1.0).abs() < 1e-5); // V4 ends on a column normalization
//! # Ok::<(), mhc::Error>(())
//! ```

// The formulas index several arrays with the same subscripts, as docs/math.md writes them.
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
