//! Tensor layouts and host views. A residual state is `[T, n, C]` and a layer input `[T, C]`;
//! both are "T rows of `row_len` elements, `row_stride` elements apart" (the stride may exceed
//! the row, never be shorter). Shape and stride checks live here once: every device and the
//! reference call [`Layout::check`] before touching memory.

use crate::config::Dtype;
use crate::error::{Error, Result};
use half::bf16;

/// `v` rounded once to the nearest bfloat16, ties to even; NaN stays NaN. The one conversion from
/// f64 to bf16 in the library, its tests and tools.
///
/// `half::bf16::from_f64` is not this: it drops the low 32 bits of the f64 before rounding, so a
/// value just above a halfway point rounds as if it sat on it (to even, which may be down).
pub fn bf16_nearest(v: f64) -> bf16 {
    // Round to odd into f32, then to nearest even into bf16. f32 keeps 24 bits, more than bf16's
    // 8 plus the 2 that decide a rounding, so the two steps round as one would: an inexact value
    // keeps its sticky bit in the odd last bit and can never land on a bf16 halfway point.
    let f = v as f32;
    if !v.is_finite() || f as f64 == v {
        return bf16::from_f32(f);
    }
    let mut bits = f.to_bits();
    if (f as f64).abs() > v.abs() {
        bits -= 1; // one f32 step toward zero: the truncated magnitude
    }
    bf16::from_f32(f32::from_bits(bits | 1))
}

/// Largest row stride (and so row length) [`Layout::check`] accepts, in elements: a stride of
/// more bytes than `isize::MAX` in the widest dtype (8 bytes) fits no buffer, and below this
/// bound `row_stride * dtype size` cannot overflow.
pub const MAX_ROW_STRIDE: usize = isize::MAX as usize / 8;

/// T rows of `row_len` elements, `row_stride` elements apart (`row_stride >= row_len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// T, the number of token rows.
    pub tokens: usize,
    /// Elements per row (`n * C` for a residual state, `C` for a layer input).
    pub row_len: usize,
    /// Elements from the start of one row to the start of the next.
    pub row_stride: usize,
}

impl Layout {
    /// Dense rows: `row_stride == row_len`.
    pub const fn dense(tokens: usize, row_len: usize) -> Self {
        Layout { tokens, row_len, row_stride: row_len }
    }
    /// A residual state `[T, n, C]`, dense. An `n * C` that overflows saturates at
    /// `usize::MAX`, a row no buffer holds: [`Layout::check`] refuses it instead of passing a
    /// wrapped product.
    pub const fn streams(tokens: usize, n: usize, c: usize) -> Self {
        Layout::dense(tokens, n.saturating_mul(c))
    }
    /// Same layout with another row stride.
    pub const fn with_stride(self, row_stride: usize) -> Self {
        Layout { row_stride, ..self }
    }
    /// Elements a buffer must hold: `(T-1)*stride + row_len`, 0 when T = 0.
    pub fn required_len(&self) -> Option<usize> {
        if self.tokens == 0 {
            return Some(0);
        }
        (self.tokens - 1).checked_mul(self.row_stride)?.checked_add(self.row_len)
    }
    /// Index of element `i` of row `t`.
    #[inline]
    pub fn index(&self, t: usize, i: usize) -> usize {
        t * self.row_stride + i
    }
    /// Checks that this layout describes `tokens` rows of `row_len` elements and that a buffer
    /// of `len` elements holds them, with a row stride of at most [`MAX_ROW_STRIDE`] (so its
    /// byte size fits in memory whatever T). `what` names the tensor in the error.
    pub fn check(&self, what: &'static str, tokens: usize, row_len: usize, len: usize) -> Result<()> {
        if self.tokens != tokens || self.row_len != row_len {
            return Err(Error::shape(
                what,
                format!("{tokens} rows of {row_len}"),
                format!("{} rows of {}", self.tokens, self.row_len),
            ));
        }
        if self.row_stride < self.row_len {
            return Err(Error::shape(
                what,
                format!("row stride >= {}", self.row_len),
                format!("row stride {}", self.row_stride),
            ));
        }
        if self.row_stride > MAX_ROW_STRIDE {
            return Err(Error::shape(
                what,
                format!("row stride <= {MAX_ROW_STRIDE} (its bytes must fit in memory)"),
                format!("row stride {}", self.row_stride),
            ));
        }
        match self.required_len() {
            Some(need) if need <= len => Ok(()),
            Some(need) => Err(Error::shape(what, format!("buffer of >= {need} elements"), format!("{len} elements"))),
            None => Err(Error::shape(what, "a layout that fits in memory", "an overflowing stride")),
        }
    }
}

/// Read-only host storage of one of the supported dtypes.
#[derive(Debug, Clone, Copy)]
pub enum HostData<'a> {
    /// f32 storage.
    F32(&'a [f32]),
    /// bf16 storage.
    Bf16(&'a [bf16]),
    /// f64 storage.
    F64(&'a [f64]),
}

impl<'a> HostData<'a> {
    /// The storage type.
    pub fn dtype(&self) -> Dtype {
        match self {
            HostData::F32(_) => Dtype::F32,
            HostData::Bf16(_) => Dtype::Bf16,
            HostData::F64(_) => Dtype::F64,
        }
    }
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(s) => s.len(),
            HostData::Bf16(s) => s.len(),
            HostData::F64(s) => s.len(),
        }
    }
    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Element `i`, widened exactly to f64.
    #[inline]
    pub fn get(&self, i: usize) -> f64 {
        match self {
            HostData::F32(s) => s[i] as f64,
            HostData::Bf16(s) => s[i].to_f64(),
            HostData::F64(s) => s[i],
        }
    }
    /// Index of the first NaN or infinity, if any.
    pub fn first_non_finite(&self) -> Option<usize> {
        (0..self.len()).find(|&i| !self.get(i).is_finite())
    }
}

impl<'a> From<&'a [f32]> for HostData<'a> {
    fn from(s: &'a [f32]) -> Self {
        HostData::F32(s)
    }
}
impl<'a> From<&'a [f64]> for HostData<'a> {
    fn from(s: &'a [f64]) -> Self {
        HostData::F64(s)
    }
}
impl<'a> From<&'a [bf16]> for HostData<'a> {
    fn from(s: &'a [bf16]) -> Self {
        HostData::Bf16(s)
    }
}

/// Writable host storage; [`HostDataMut::set`] rounds once, to nearest even.
#[derive(Debug)]
pub enum HostDataMut<'a> {
    /// f32 storage.
    F32(&'a mut [f32]),
    /// bf16 storage.
    Bf16(&'a mut [bf16]),
    /// f64 storage.
    F64(&'a mut [f64]),
}

impl<'a> HostDataMut<'a> {
    /// The storage type.
    pub fn dtype(&self) -> Dtype {
        match self {
            HostDataMut::F32(_) => Dtype::F32,
            HostDataMut::Bf16(_) => Dtype::Bf16,
            HostDataMut::F64(_) => Dtype::F64,
        }
    }
    /// Elements held.
    pub fn len(&self) -> usize {
        match self {
            HostDataMut::F32(s) => s.len(),
            HostDataMut::Bf16(s) => s.len(),
            HostDataMut::F64(s) => s.len(),
        }
    }
    /// Whether it holds no element.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Stores `v` rounded once to the storage type.
    #[inline]
    pub fn set(&mut self, i: usize, v: f64) {
        match self {
            HostDataMut::F32(s) => s[i] = v as f32,
            HostDataMut::Bf16(s) => s[i] = bf16_nearest(v),
            HostDataMut::F64(s) => s[i] = v,
        }
    }
    /// A read-only view of the same storage.
    pub fn as_data(&self) -> HostData<'_> {
        match self {
            HostDataMut::F32(s) => HostData::F32(s),
            HostDataMut::Bf16(s) => HostData::Bf16(s),
            HostDataMut::F64(s) => HostData::F64(s),
        }
    }
}

impl<'a> From<&'a mut [f32]> for HostDataMut<'a> {
    fn from(s: &'a mut [f32]) -> Self {
        HostDataMut::F32(s)
    }
}
impl<'a> From<&'a mut [f64]> for HostDataMut<'a> {
    fn from(s: &'a mut [f64]) -> Self {
        HostDataMut::F64(s)
    }
}
impl<'a> From<&'a mut [bf16]> for HostDataMut<'a> {
    fn from(s: &'a mut [bf16]) -> Self {
        HostDataMut::Bf16(s)
    }
}

/// A strided host tensor: storage plus layout.
#[derive(Debug, Clone, Copy)]
pub struct HostTensor<'a> {
    /// The storage, from the first row's first element on.
    pub data: HostData<'a>,
    /// Where the rows lie in it.
    pub layout: Layout,
}

impl<'a> HostTensor<'a> {
    /// The tensor of `layout` over `data` (a slice of f32, bf16 or f64); checked by
    /// [`HostTensor::check`], not here.
    pub fn new(data: impl Into<HostData<'a>>, layout: Layout) -> Self {
        HostTensor { data: data.into(), layout }
    }
    /// Checks rows, row length and buffer length (see [`Layout::check`]).
    pub fn check(&self, what: &'static str, tokens: usize, row_len: usize) -> Result<()> {
        self.layout.check(what, tokens, row_len, self.data.len())
    }
    /// Element `i` of row `t`, as f64.
    #[inline]
    pub fn at(&self, t: usize, i: usize) -> f64 {
        self.data.get(self.layout.index(t, i))
    }
}

/// A strided writable host tensor.
#[derive(Debug)]
pub struct HostTensorMut<'a> {
    /// The storage, from the first row's first element on.
    pub data: HostDataMut<'a>,
    /// Where the rows lie in it.
    pub layout: Layout,
}

impl<'a> HostTensorMut<'a> {
    /// The tensor of `layout` over `data` (a slice of f32, bf16 or f64); checked by
    /// [`HostTensorMut::check`], not here.
    pub fn new(data: impl Into<HostDataMut<'a>>, layout: Layout) -> Self {
        HostTensorMut { data: data.into(), layout }
    }
    /// Checks rows, row length and buffer length (see [`Layout::check`]).
    pub fn check(&self, what: &'static str, tokens: usize, row_len: usize) -> Result<()> {
        self.layout.check(what, tokens, row_len, self.data.len())
    }
    /// Stores `v` as element `i` of row `t`, rounded once to the storage type.
    #[inline]
    pub fn set(&mut self, t: usize, i: usize, v: f64) {
        let idx = self.layout.index(t, i);
        self.data.set(idx, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The nearest bf16 by definition: the two neighbours around `v`, and `v` against their
    /// midpoint, which f64 holds exactly.
    fn nearest_by_midpoint(v: f64) -> bf16 {
        let guess = bf16::from_f32(v as f32).to_bits();
        let step = |b: u16, up: bool| -> u16 {
            // one bf16 step along the real line from bits `b` (sign-magnitude)
            let neg = b & 0x8000 != 0;
            match (neg, up, b & 0x7fff) {
                (_, _, 0) if up => 0x0001,
                (_, _, 0) => 0x8001,
                (false, true, _) | (true, false, _) => b + 1,
                _ => b - 1,
            }
        };
        let val = |b: u16| bf16::from_bits(b).to_f64();
        let (mut lo, mut hi) = (guess, guess);
        while val(lo) > v {
            lo = step(lo, false);
        }
        while val(hi) < v {
            hi = step(hi, true);
        }
        if lo == hi {
            return bf16::from_bits(lo);
        }
        let mid = (val(lo) + val(hi)) / 2.0;
        let pick = if v < mid {
            lo
        } else if v > mid {
            hi
        } else if lo & 1 == 0 {
            lo
        } else {
            hi
        };
        bf16::from_bits(pick)
    }

    #[test]
    fn bf16_nearest_rounds_once() {
        let one_up = 1.0 + (-7f64).exp2();
        // just above a halfway point: up (half's from_f64 gives 1.0 here)
        assert_eq!(bf16_nearest(1.0 + (-8f64).exp2() + (-40f64).exp2()).to_f64(), one_up);
        // on a halfway point: to even
        assert_eq!(bf16_nearest(1.0 + (-8f64).exp2()).to_f64(), 1.0);
        assert_eq!(bf16_nearest(1.0 + 3.0 * (-8f64).exp2()).to_f64(), 1.0 + 2.0 * (-7f64).exp2());
        assert_eq!(bf16_nearest(-1.0 - (-8f64).exp2() - (-40f64).exp2()).to_f64(), -one_up);
        // beyond the range: infinity; below the smallest subnormal's half: zero of the same sign
        assert_eq!(bf16_nearest(f64::MAX), bf16::INFINITY);
        assert_eq!(bf16_nearest(-1e39), bf16::NEG_INFINITY);
        assert_eq!(bf16_nearest(1e-50).to_bits(), 0x0000);
        assert_eq!(bf16_nearest(-1e-50).to_bits(), 0x8000);
        assert!(bf16_nearest(f64::NAN).is_nan());
        // random values over the whole range, many of them a few f64 ulps off a halfway point
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for i in 0..200_000 {
            let r = next();
            let exp = (r % 260) as i32 - 135; // bf16 subnormals up to the largest finite binade
            let v = if i % 2 == 0 {
                // a bf16 halfway point, nudged by a few f64 ulps
                let b = bf16::from_bits((r >> 16) as u16 & 0x7f7f).to_f64();
                let half_ulp = if b == 0.0 { (-134f64).exp2() } else { b.abs() * (-8f64).exp2() };
                let m = b + half_ulp;
                f64::from_bits(m.to_bits().wrapping_add((r >> 40) % 5).wrapping_sub(2))
            } else {
                let mant = 1.0 + (r >> 12) as f64 / (1u64 << 52) as f64;
                mant * (exp as f64).exp2()
            };
            let v = if r & 1 == 1 { -v } else { v };
            if !v.is_finite() || v.abs() >= bf16::MAX.to_f64() {
                continue;
            }
            assert_eq!(bf16_nearest(v).to_bits(), nearest_by_midpoint(v).to_bits(), "v = {v:e}");
        }
    }

    #[test]
    fn strided_layout_lengths() {
        let l = Layout::streams(3, 4, 8).with_stride(40);
        assert_eq!(l.required_len(), Some(2 * 40 + 32));
        l.check("x", 3, 32, 112).unwrap();
        assert!(matches!(l.check("x", 3, 32, 111), Err(Error::Shape { what: "x", .. })));
        assert!(matches!(l.check("x", 4, 32, 1000), Err(Error::Shape { .. })));
        let short = Layout::dense(2, 32).with_stride(31);
        assert!(matches!(short.check("x", 2, 32, 1000), Err(Error::Shape { .. })));
        assert_eq!(Layout::dense(0, 32).required_len(), Some(0));
        let huge = Layout::dense(usize::MAX / 2, 8).with_stride(usize::MAX / 4);
        assert!(huge.check("x", usize::MAX / 2, 8, 10).is_err());
    }

    #[test]
    fn overflowing_sizes_never_pass_a_check() {
        // n * C overflows: the row saturates and no buffer satisfies it.
        let l = Layout::streams(1, usize::MAX / 2, 4);
        assert_eq!(l.row_len, usize::MAX);
        assert!(l.check("x", 1, usize::MAX, usize::MAX - 1).is_err());
        // A single row with a stride whose byte size overflows: refused even though the stride
        // is never used to reach a second row (check_view multiplies it by the dtype size).
        let one = Layout::dense(1, 8).with_stride(usize::MAX / 4);
        assert!(matches!(one.check("x", 1, 8, 8), Err(Error::Shape { .. })));
        Layout::dense(1, 8).with_stride(MAX_ROW_STRIDE).check("x", 1, 8, 8).unwrap();
        assert!(MAX_ROW_STRIDE.checked_mul(Dtype::F64.size()).is_some());
    }

    #[test]
    fn bf16_store_rounds_once_to_nearest_even() {
        let mut buf = [bf16::ZERO; 2];
        let mut d = HostDataMut::from(&mut buf[..]);
        d.set(0, 1.0 + 1.0 / 256.0); // halfway between 1 and 1+2^-7: ties to even (1.0)
        d.set(1, 1.0 + 3.0 / 256.0); // halfway between 1+2^-7 and 1+2^-6: ties to 1+2^-6
        assert_eq!(buf[0].to_f64(), 1.0);
        assert_eq!(buf[1].to_f64(), 1.0 + 1.0 / 64.0);
    }
}
