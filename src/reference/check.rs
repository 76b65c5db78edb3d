//! Validation shared by every reference stage. Everything here runs before the first output
//! element is written, so a failing call leaves its outputs untouched.
//!
//! Storage rules (docs/math.md, "Notation and layout"): activations (`x`, `f`, `e`, `a`, `y`, `out`
//! and their gradients) share one storage type per call (bf16, f32 or f64); parameters and
//! coefficients (and their gradients) are f32 next to bf16/f32 activations and f64 next to f64
//! activations. They are never bf16.

use super::real::Real;
use crate::config::Dtype;
use crate::error::{Error, Result};
use crate::tensor::{HostData, HostDataMut, HostTensor, HostTensorMut};

/// The storage type of parameters and coefficients next to activations stored as `act`.
pub const fn param_dtype(act: Dtype) -> Dtype {
    match act {
        Dtype::F64 => Dtype::F64,
        Dtype::F32 | Dtype::Bf16 => Dtype::F32,
    }
}

pub(crate) fn dtype(tensor: &'static str, expected: Dtype, got: Dtype) -> Result<()> {
    if expected == got {
        Ok(())
    } else {
        Err(Error::Dtype { tensor, expected, got })
    }
}

/// A parameter vector of exactly `len` elements (`shape` describes it for the error), finite,
/// stored as `pdt`; returned converted to `R`.
pub(crate) fn param<R: Real>(
    name: &'static str,
    data: &HostData<'_>,
    len: usize,
    shape: &str,
    pdt: Dtype,
) -> Result<Vec<R>> {
    check_param(name, data, len, shape, pdt)?;
    Ok((0..len).map(|i| R::from_f64(data.get(i))).collect())
}

pub(crate) fn check_param(name: &'static str, data: &HostData<'_>, len: usize, shape: &str, pdt: Dtype) -> Result<()> {
    dtype(name, pdt, data.dtype())?;
    if data.len() != len {
        return Err(Error::shape(name, format!("{shape} = {len} elements"), format!("{} elements", data.len())));
    }
    match data.first_non_finite() {
        Some(index) => Err(Error::NonFinite { tensor: name, index }),
        None => Ok(()),
    }
}

/// An input tensor of `tokens` rows of `row_len`, stored as `dt`.
pub(crate) fn input(name: &'static str, t: &HostTensor<'_>, tokens: usize, row_len: usize, dt: Dtype) -> Result<()> {
    dtype(name, dt, t.data.dtype())?;
    t.check(name, tokens, row_len)
}

/// A coefficient input (per-token, parameter class): as [`input`], plus every element of every
/// row must be finite (the gaps between strided rows are not read and not checked).
pub(crate) fn coef_input(
    name: &'static str,
    t: &HostTensor<'_>,
    tokens: usize,
    row_len: usize,
    dt: Dtype,
) -> Result<()> {
    input(name, t, tokens, row_len, dt)?;
    for ti in 0..tokens {
        for i in 0..row_len {
            let index = t.layout.index(ti, i);
            if !t.data.get(index).is_finite() {
                return Err(Error::NonFinite { tensor: name, index });
            }
        }
    }
    Ok(())
}

/// An output tensor of `tokens` rows of `row_len`, stored as `dt`.
pub(crate) fn output(
    name: &'static str,
    t: &HostTensorMut<'_>,
    tokens: usize,
    row_len: usize,
    dt: Dtype,
) -> Result<()> {
    dtype(name, dt, t.data.dtype())?;
    t.check(name, tokens, row_len)
}

/// A parameter-shaped output (a gradient) of exactly `len` elements stored as `dt`.
pub(crate) fn param_output(name: &'static str, d: &HostDataMut<'_>, len: usize, shape: &str, dt: Dtype) -> Result<()> {
    dtype(name, dt, d.dtype())?;
    if d.len() != len {
        return Err(Error::shape(name, format!("{shape} = {len} elements"), format!("{} elements", d.len())));
    }
    Ok(())
}

/// Reads row `ti` of `t` into `buf` (its length is the row length).
#[inline]
pub(crate) fn read_row<R: Real>(t: &HostTensor<'_>, ti: usize, buf: &mut [R]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = R::from_f64(t.at(ti, i));
    }
}

/// Writes `vals` as row `ti` of `t`, rounding once to its storage type.
#[inline]
pub(crate) fn write_row<R: Real>(t: &mut HostTensorMut<'_>, ti: usize, vals: &[R]) {
    for (i, v) in vals.iter().enumerate() {
        t.set(ti, i, v.to_f64());
    }
}

/// Writes `vals` to a parameter-shaped output.
pub(crate) fn write_all<R: Real>(d: &mut HostDataMut<'_>, vals: &[R]) {
    for (i, v) in vals.iter().enumerate() {
        d.set(i, v.to_f64());
    }
}
