//! Floating-point details of the VALU: denormal handling from the MODE register (set from the
//! kernel descriptor's FLOAT_DENORM_MODE fields, changed by `s_setreg`), the transcendental
//! unit's accuracy (exact, or perturbed within the ISA's bound), and the division helpers.
//!
//! Transcendentals. The ISA documents `v_exp_f32`, `v_log_f32`, `v_rcp_f32`, `v_rsq_f32` and
//! `v_sqrt_f32` as accurate to about 1 ULP (and the f64 `v_rcp` / `v_rsq` / `v_sqrt` as
//! approximations refined in software). [`Trans::Exact`] returns the correctly rounded result
//! (computed in f64, rounded once); [`Trans::Ulp`] returns either of the two floats that
//! bracket the true value (so within 1 ULP of it), chosen by a hash of the seed, the operation
//! and the input bits: a run is reproducible from its seed while a kernel that relies on
//! correctly rounded transcendentals fails. `v_sin_f32` / `v_cos_f32` (input in
//! revolutions) are treated the same way; their hardware error is not documented.

use crate::decode::Op;

/// How the transcendental unit rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Trans {
    /// Correctly rounded results.
    #[default]
    Exact,
    /// Results moved by up to 1 ULP, deterministically per seed and input.
    Ulp(u64),
}

/// SplitMix64 finaliser: the mixing function of the seeded choices.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Moves a finite, non-zero f32 by `d` ULPs (never across zero or into infinity / NaN).
pub fn step_f32(x: f32, d: i64) -> f32 {
    if !x.is_finite() || x == 0.0 || d == 0 {
        return x;
    }
    let b = x.to_bits() as i64 + d; // magnitude grows with the bit pattern for both signs
    let y = f32::from_bits(b as u32);
    if y.is_finite() && y != 0.0 && y.is_sign_negative() == x.is_sign_negative() {
        y
    } else {
        x
    }
}

/// [`step_f32`] for f64.
pub fn step_f64(x: f64, d: i64) -> f64 {
    if !x.is_finite() || x == 0.0 || d == 0 {
        return x;
    }
    let y = f64::from_bits((x.to_bits() as i64 + d) as u64);
    if y.is_finite() && y != 0.0 && y.is_sign_negative() == x.is_sign_negative() {
        y
    } else {
        x
    }
}

/// Whether to return the other neighbour of the true value, keyed by (seed, op, input).
fn flip(seed: u64, op: Op, input: u64) -> bool {
    mix(seed ^ mix(input ^ ((op as u64) << 48))) & 1 != 0
}

/// The f32 on the other side of `t` from `r` (the two floats bracketing the true value `t`).
fn other_f32(r: f32, t: f64) -> f32 {
    if !r.is_finite() || !t.is_finite() || r as f64 == t {
        return r;
    }
    let up = t > r as f64;
    let b = r.to_bits();
    let n = if r == 0.0 {
        if up {
            1
        } else {
            0x8000_0001
        }
    } else if (r > 0.0) == up {
        b + 1
    } else {
        b - 1
    };
    let x = f32::from_bits(n);
    if x.is_finite() {
        x
    } else {
        r
    }
}

/// An f32 transcendental: the correctly rounded result, or in [`Trans::Ulp`] mode either of
/// the two floats bracketing the true value (a faithful rounding: within 1 ULP of it).
pub fn trans_f32(op: Op, x: f32, mode: Trans) -> f32 {
    let xd = x as f64;
    let t = match op {
        Op::VExpF32 => xd.exp2(),
        Op::VLogF32 => xd.log2(),
        Op::VRcpF32 | Op::VRcpIflagF32 => 1.0 / xd,
        Op::VRsqF32 => 1.0 / xd.sqrt(),
        Op::VSqrtF32 => xd.sqrt(),
        Op::VSinF32 => (xd * std::f64::consts::TAU).sin(),
        Op::VCosF32 => (xd * std::f64::consts::TAU).cos(),
        _ => f64::NAN,
    };
    // sqrt(-0) = -0, rcp(-0) = -inf, log(0) = -inf: the f64 computation already gives these.
    let r = t as f32;
    match mode {
        Trans::Exact => r,
        Trans::Ulp(seed) if flip(seed, op, x.to_bits() as u64) => other_f32(r, t),
        Trans::Ulp(_) => r,
    }
}

/// An f64 transcendental: the f64 result, or in [`Trans::Ulp`] mode its neighbour on the side
/// of the true value (the residual's sign says which).
pub fn trans_f64(op: Op, x: f64, mode: Trans) -> f64 {
    let r = match op {
        Op::VRcpF64 => 1.0 / x,
        Op::VRsqF64 => 1.0 / x.sqrt(),
        Op::VSqrtF64 => x.sqrt(),
        _ => f64::NAN,
    };
    let Trans::Ulp(seed) = mode else { return r };
    if !r.is_finite() || r == 0.0 || !flip(seed, op, x.to_bits()) {
        return r;
    }
    // Sign of (true - r) times sign(r): rcp: 1 - r x; sqrt: x - r^2; rsq: 1 - r^2 x (r > 0).
    let e = match op {
        Op::VRcpF64 => (-r).mul_add(x, 1.0),
        Op::VSqrtF64 => (-r).mul_add(r, x),
        _ => (-(r * r)).mul_add(x, 1.0),
    };
    if e == 0.0 {
        return r;
    }
    // The magnitude should grow when the residual is positive.
    step_f64(r, if e > 0.0 { 1 } else { -1 })
}

/// Denormal handling of one precision (a 2-bit FP_DENORM field of MODE): bit 0 keeps input
/// denormals, bit 1 keeps output denormals; a flushed denormal becomes a zero of its sign.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denorm(pub u32);

impl Denorm {
    pub fn keep_in(self) -> bool {
        self.0 & 1 != 0
    }
    pub fn keep_out(self) -> bool {
        self.0 & 2 != 0
    }
    pub fn in32(self, x: f32) -> f32 {
        if !self.keep_in() && x.is_subnormal() {
            0.0f32.copysign(x)
        } else {
            x
        }
    }
    pub fn out32(self, x: f32) -> f32 {
        if !self.keep_out() && x.is_subnormal() {
            0.0f32.copysign(x)
        } else {
            x
        }
    }
    pub fn in64(self, x: f64) -> f64 {
        if !self.keep_in() && x.is_subnormal() {
            0.0f64.copysign(x)
        } else {
            x
        }
    }
    pub fn out64(self, x: f64) -> f64 {
        if !self.keep_out() && x.is_subnormal() {
            0.0f64.copysign(x)
        } else {
            x
        }
    }
}

/// ldexp with correct rounding of a denormal result (one rounding, as the hardware).
pub fn ldexp32(x: f32, e: i32) -> f32 {
    let e = e.clamp(-400, 400);
    // Two steps keep the f64 intermediate exact; the final conversion rounds once.
    ((x as f64) * 2f64.powi(e)) as f32
}

/// ldexp for f64 (exact scaling by powers of two in steps; the last step rounds once).
pub fn ldexp64(x: f64, e: i32) -> f64 {
    let mut e = e.clamp(-2200, 2200);
    let mut x = x;
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        // Scaling down in steps could round twice; keep every step but the last exact.
        if e >= -1074 - 1000 {
            break;
        }
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    if e < -1000 {
        let half = e / 2;
        // x * 2^half is exact (stays normal for the values reaching here), then one rounding.
        return x * 2f64.powi(half) * 2f64.powi(e - half);
    }
    x * 2f64.powi(e)
}

/// The unbiased exponent of a normal f32 (frexp convention minus one), or of a denormal.
pub fn exp_f32(x: f32) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    (x.abs() as f64).log2().floor() as i32
}

/// The unbiased exponent of an f64.
pub fn exp_f64(x: f64) -> i32 {
    if x == 0.0 || !x.is_finite() {
        return 0;
    }
    let b = (x.to_bits() >> 52) & 0x7ff;
    if b == 0 {
        -1023 - (x.to_bits() & ((1 << 52) - 1)).leading_zeros() as i32 + 12
    } else {
        b as i32 - 1023
    }
}

/// frexp mantissa / exponent (the VALU convention: mantissa in [0.5, 1), inf / NaN give the
/// input and 0).
pub fn frexp_f32(x: f32) -> (f32, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let e = exp_f32(x) + 1;
    (ldexp32(x, -e), e)
}

pub fn frexp_f64(x: f64) -> (f64, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let e = exp_f64(x) + 1;
    (ldexp64(x, -e), e)
}

/// The IEEE classes of `v_cmp_class` (bit i of the mask): 0 signalling NaN, 1 quiet NaN,
/// 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf.
pub fn class_f64(x: f64, signalling: bool) -> u32 {
    let neg = x.is_sign_negative();
    if x.is_nan() {
        return if signalling { 0 } else { 1 };
    }
    if x.is_infinite() {
        return if neg { 2 } else { 9 };
    }
    if x == 0.0 {
        return if neg { 5 } else { 6 };
    }
    match (x.is_subnormal(), neg) {
        (true, true) => 4,
        (true, false) => 7,
        (false, true) => 3,
        (false, false) => 8,
    }
}

pub fn class_f32(x: f32) -> u32 {
    let signalling = x.is_nan() && x.to_bits() & 0x0040_0000 == 0;
    if x.is_subnormal() {
        return if x.is_sign_negative() { 4 } else { 7 };
    }
    class_f64(x as f64, signalling)
}

pub fn class_of_f64(x: f64) -> u32 {
    let signalling = x.is_nan() && x.to_bits() & 0x0008_0000_0000_0000 == 0;
    class_f64(x, signalling)
}

/// f32 -> integer conversions of the VALU: round toward zero, NaN -> 0, saturating.
pub fn f32_to_i32(x: f32) -> i32 {
    if x.is_nan() {
        0
    } else {
        x as i32
    }
}

pub fn f32_to_u32(x: f32) -> u32 {
    if x.is_nan() {
        0
    } else {
        x as u32
    }
}

pub fn f64_to_i32(x: f64) -> i32 {
    if x.is_nan() {
        0
    } else {
        x as i32
    }
}

pub fn f64_to_u32(x: f64) -> u32 {
    if x.is_nan() {
        0
    } else {
        x as u32
    }
}

/// IEEE minNum / maxNum as the VALU computes them in IEEE mode: a quiet NaN operand is ignored;
/// -0 < +0. One definition for both widths.
macro_rules! ieee_min_max {
    ($min:ident, $max:ident, $t:ty) => {
        #[doc = concat!("IEEE minNum of two `", stringify!($t), "` (see the macro's documentation).")]
        pub fn $min(a: $t, b: $t) -> $t {
            match (a.is_nan(), b.is_nan()) {
                (true, true) => <$t>::NAN,
                (true, false) => b,
                (false, true) => a,
                _ if a == b => {
                    if a.is_sign_negative() {
                        a
                    } else {
                        b
                    }
                }
                _ => {
                    if a < b {
                        a
                    } else {
                        b
                    }
                }
            }
        }

        #[doc = concat!("IEEE maxNum of two `", stringify!($t), "` (see the macro's documentation).")]
        pub fn $max(a: $t, b: $t) -> $t {
            match (a.is_nan(), b.is_nan()) {
                (true, true) => <$t>::NAN,
                (true, false) => b,
                (false, true) => a,
                _ if a == b => {
                    if a.is_sign_negative() {
                        b
                    } else {
                        a
                    }
                }
                _ => {
                    if a > b {
                        a
                    } else {
                        b
                    }
                }
            }
        }
    };
}

ieee_min_max!(min32, max32, f32);
ieee_min_max!(min64, max64, f64);

/// Quiets a NaN (the VALU returns quiet NaNs).
pub fn quiet32(x: f32) -> f32 {
    if x.is_nan() {
        f32::from_bits(x.to_bits() | 0x0040_0000)
    } else {
        x
    }
}

pub fn quiet64(x: f64) -> f64 {
    if x.is_nan() {
        f64::from_bits(x.to_bits() | 0x0008_0000_0000_0000)
    } else {
        x
    }
}

/// v_med3_f32: the median of three (NaN handling as the ISA: with a NaN, the min of the others).
pub fn med3_32(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return min32(min32(a, b), c);
    }
    // Ordered with -0 < +0, as the VALU's min / max: the median of the three.
    let hi = max32(max32(a, b), c);
    if hi.to_bits() == a.to_bits() {
        max32(b, c)
    } else if hi.to_bits() == b.to_bits() {
        max32(a, c)
    } else {
        max32(a, b)
    }
}

/// The result of `v_div_fixup`: the special cases of the division `n / d` around the quotient
/// estimate `q` (`S0 = q, S1 = d, S2 = n`).
pub fn div_fixup64(q: f64, d: f64, n: f64, sign_bits: (bool, bool), min_exp: i32, max_exp: i32) -> f64 {
    let sign_out = sign_bits.0 ^ sign_bits.1;
    let sgn = |x: f64| if sign_out { -x } else { x };
    if n.is_nan() {
        n
    } else if d.is_nan() {
        d
    } else if (d == 0.0 && n == 0.0) || (d.is_infinite() && n.is_infinite()) {
        f64::NAN
    } else if d == 0.0 || n.is_infinite() {
        sgn(f64::INFINITY)
    } else if d.is_infinite() || n == 0.0 || exp_f64(n) - exp_f64(d) < min_exp || exp_f64(d) >= max_exp {
        sgn(0.0)
    } else if q.is_nan() {
        // A NaN estimate from valid operands is an overflow of the scaled iteration.
        sgn(f64::INFINITY)
    } else {
        sgn(q.abs())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// minNum / maxNum: a NaN operand is ignored, two NaNs give NaN, -0 orders below +0, in both
    /// widths and both argument orders.
    #[test]
    fn min_max_ignore_nan_and_order_signed_zeros() {
        for (a, b) in [(0.0f32, -0.0f32), (-0.0, 0.0)] {
            assert!(min32(a, b).is_sign_negative() && !max32(a, b).is_sign_negative());
            assert!(min64(a.into(), b.into()).is_sign_negative() && !max64(a.into(), b.into()).is_sign_negative());
        }
        assert_eq!((min32(f32::NAN, 2.0), min32(2.0, f32::NAN), max32(f32::NAN, -1.0)), (2.0, 2.0, -1.0));
        assert_eq!((min64(f64::NAN, 2.0), max64(3.0, f64::NAN)), (2.0, 3.0));
        assert!(min32(f32::NAN, f32::NAN).is_nan() && max64(f64::NAN, f64::NAN).is_nan());
        assert_eq!((min32(1.0, 2.0), max32(1.0, 2.0), min64(-3.0, 2.0), max64(-3.0, 2.0)), (1.0, 2.0, -3.0, 2.0));
    }
}
