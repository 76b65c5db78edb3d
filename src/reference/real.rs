//! The arithmetic the reference is generic over: `f64` (the oracle) and `f32` (to see what single
//! precision alone costs, independent of any kernel). Storage types are a separate matter
//! (`HostData`); values are widened exactly to f64 when read and converted to `R` once.

use std::fmt::Debug;
use std::ops::{Add, AddAssign, Div, DivAssign, Mul, MulAssign, Neg, Sub, SubAssign};

/// A floating-point arithmetic type: `f32` or `f64`.
pub trait Real:
    Copy
    + Debug
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
    + Neg<Output = Self>
    + AddAssign
    + SubAssign
    + MulAssign
    + DivAssign
    + Send
    + Sync
    + 'static
{
    /// 0.
    const ZERO: Self;
    /// 1.
    const ONE: Self;
    /// Rounds `v` to this type (exact for f64).
    fn from_f64(v: f64) -> Self;
    /// Widens exactly to f64.
    fn to_f64(self) -> f64;
    /// `e^self`, as the type's `exp`.
    fn exp(self) -> Self;
    /// The square root, as the type's `sqrt` (correctly rounded).
    fn sqrt(self) -> Self;
    /// The larger of `self` and `other`, as the type's `max` (a NaN operand gives the other).
    fn max(self, other: Self) -> Self;
    /// `v` as this type (exact for the sizes used here).
    #[inline]
    fn from_usize(v: usize) -> Self {
        Self::from_f64(v as f64)
    }
}

macro_rules! impl_real {
    ($t:ty) => {
        impl Real for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline]
            fn max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
        }
    };
}
impl_real!(f32);
impl_real!(f64);

/// The logistic sigmoid `1 / (1 + e^-z)`; saturates to 0 or 1 without producing NaN.
#[inline]
pub fn sigmoid<R: Real>(z: R) -> R {
    R::ONE / (R::ONE + (-z).exp())
}

/// `sum_i a[i] * b[i]` in a fixed order: four interleaved partial sums (element `i` goes to
/// sum `i % 4`), combined as `(s0 + s1) + (s2 + s3)`, then the tail in order. Independent
/// partial sums let the CPU overlap the additions (about 3x faster than one chain); the order
/// never depends on the machine, so results are reproducible bit for bit.
#[inline]
pub(crate) fn dot<R: Real>(a: &[R], b: &[R]) -> R {
    let len = a.len().min(b.len());
    let (a, b) = (&a[..len], &b[..len]);
    let mut s = [R::ZERO; 4];
    let mut ca = a.chunks_exact(4);
    let mut cb = b.chunks_exact(4);
    for (x, y) in (&mut ca).zip(&mut cb) {
        s[0] += x[0] * y[0];
        s[1] += x[1] * y[1];
        s[2] += x[2] * y[2];
        s[3] += x[3] * y[3];
    }
    let mut total = (s[0] + s[1]) + (s[2] + s[3]);
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        total += *x * *y;
    }
    total
}
