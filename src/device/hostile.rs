//! Randomised arguments for the property tests of every device's view checks (no device
//! needed: the checks only read pointers, lengths, dtypes and layouts). A test builds a valid
//! call from [`Arg`]s, and [`trials`] mutates it and re-derives the contract for every call the
//! checks accept.

use crate::config::Dtype;
use crate::device::view::{DeviceTensor, DeviceTensorMut, PreOutViews, PreParamViews};
use crate::error::Result;
use crate::reference::testing::Rng;
use crate::tensor::Layout;

/// One argument of a randomised call: what the op expects of it, and the view given.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Arg {
    dtype: Dtype,
    rows: usize,
    row_len: usize,
    /// A dense f32 parameter (any rows x row_len product) rather than rows of an activation.
    param: bool,
    output: bool,
    ptr: u64,
    len: usize,
    given_dtype: Dtype,
    layout: Layout,
}

impl Arg {
    /// Argument `i` of a call, valid: dense rows at its own 256 MiB-aligned address.
    fn new(i: u64, dtype: Dtype, rows: usize, row_len: usize, param: bool, output: bool) -> Arg {
        let layout = Layout::dense(rows, row_len);
        let (ptr, len) = (0x1000_0000 * (i + 1), rows * row_len);
        Arg { dtype, rows, row_len, param, output, ptr, len, given_dtype: dtype, layout }
    }
    /// An activation (input or output) of `rows` rows of `row_len`.
    pub(crate) fn act(i: u64, dtype: Dtype, rows: usize, row_len: usize, output: bool) -> Arg {
        Arg::new(i, dtype, rows, row_len, false, output)
    }
    /// A dense f32 parameter of `rows x row_len` values.
    pub(crate) fn param(i: u64, rows: usize, row_len: usize) -> Arg {
        Arg::new(i, Dtype::F32, rows, row_len, true, false)
    }
    /// Dense f32 coefficient rows (one per token).
    pub(crate) fn coef(i: u64, rows: usize, row_len: usize, output: bool) -> Arg {
        Arg::new(i, Dtype::F32, rows, row_len, false, output)
    }
    pub(crate) fn view<B>(&self) -> DeviceTensor<'static, B> {
        // SAFETY: the view is only validated, never dereferenced or launched on.
        unsafe { DeviceTensor::from_raw(self.ptr, self.len, self.given_dtype, self.layout) }
    }
    pub(crate) fn view_mut<B>(&self) -> DeviceTensorMut<'static, B> {
        // SAFETY: as above.
        unsafe { DeviceTensorMut::from_raw(self.ptr, self.len, self.given_dtype, self.layout) }
    }
    fn bytes(&self) -> (u64, u64) {
        let n = self.layout.required_len().unwrap() as u64 * self.given_dtype.size() as u64;
        (self.ptr, self.ptr + n)
    }
    /// What an accepted argument must satisfy, re-derived from the contract.
    fn assert_accepted(&self, what: &str) {
        let l = self.layout;
        assert_eq!(self.given_dtype, self.dtype, "{what}: dtype");
        if self.param {
            assert_eq!(l.tokens * l.row_len, self.rows * self.row_len, "{what}: element count");
            assert!(l.tokens <= 1 || l.row_stride == l.row_len, "{what}: dense");
        } else {
            assert_eq!((l.tokens, l.row_len), (self.rows, self.row_len), "{what}: rows");
            assert!(l.row_stride >= l.row_len && l.row_stride <= u32::MAX as usize, "{what}: stride");
        }
        let need = l.required_len().expect("an accepted layout fits in memory");
        assert!(need <= self.len, "{what}: {need} elements needed, {} held", self.len);
        let size = self.given_dtype.size() as u64;
        assert!(self.ptr != 0 && self.ptr % size == 0, "{what}: pointer {:#x}", self.ptr);
    }
}

/// Changes one thing of one argument: a pointer (NULL, misaligned, onto another argument),
/// the storage length, the dtype, or a layout field (off by one, zero, far too large).
pub(crate) fn mutate(rng: &mut Rng, args: &mut [Arg]) {
    let i = (rng.next_u64() % args.len() as u64) as usize;
    let j = (rng.next_u64() % args.len() as u64) as usize;
    let pick = |rng: &mut Rng, v: &[usize]| v[(rng.next_u64() % v.len() as u64) as usize];
    let other = args[j].ptr;
    let a = &mut args[i];
    match rng.next_u64() % 6 {
        0 => a.ptr = [0, a.ptr + 1, a.ptr + 2, other, other + 8][(rng.next_u64() % 5) as usize],
        1 => a.len = pick(rng, &[0, a.len.saturating_sub(1), a.len.saturating_add(64), usize::MAX]),
        2 => a.given_dtype = [Dtype::F32, Dtype::Bf16, Dtype::F64][(rng.next_u64() % 3) as usize],
        3 => a.layout.tokens = pick(rng, &[0, 1, a.rows + 1, a.rows.saturating_sub(1), 1 << 40]),
        4 => a.layout.row_len = pick(rng, &[0, 1, a.row_len + 1, a.row_len.saturating_sub(1), 1 << 40]),
        _ => {
            let l = a.layout.row_len;
            a.layout.row_stride = pick(rng, &[0, l.saturating_sub(1), l + 1, l + 64, 1 << 33, usize::MAX / 3]);
            a.len = a.len.max(a.layout.required_len().unwrap_or(0).min(1 << 20));
        }
    }
}

/// Runs `trials` calls of `call` on `valid` with one to three mutations each (none on trial
/// 0, which must be accepted): nothing may panic, and every accepted call's arguments must
/// satisfy the contract, outputs overlapping no other argument. Returns (refused, accepted).
pub(crate) fn trials(
    rng: &mut Rng,
    what: &str,
    valid: &[Arg],
    trials: usize,
    call: impl Fn(&[Arg]) -> Result<()>,
) -> (usize, usize) {
    let (mut refused, mut accepted) = (0, 0);
    for trial in 0..trials {
        let mut a = valid.to_vec();
        if trial > 0 {
            for _ in 0..1 + rng.next_u64() % 3 {
                mutate(rng, &mut a);
            }
        }
        let r = call(&a);
        if trial == 0 {
            assert!(r.is_ok(), "{what}: the valid call was refused: {r:?}");
        }
        if r.is_err() {
            refused += 1;
            continue;
        }
        accepted += 1;
        for (i, x) in a.iter().enumerate() {
            x.assert_accepted(&format!("{what} trial {trial} argument {i}"));
        }
        for (i, o) in a.iter().enumerate().filter(|(_, o)| o.output) {
            for (j, other) in a.iter().enumerate().filter(|&(j, _)| j != i) {
                let ((a0, a1), (b0, b1)) = (o.bytes(), other.bytes());
                assert!(a1 <= b0 || b1 <= a0, "{what} trial {trial}: output {i} overlaps argument {j}");
            }
        }
    }
    (refused, accepted)
}

/// The arguments of a valid `pre` call with both optional weights, in the order of [`pre_views`]:
/// x, phi, scale, base, gamma_k, gamma_f, then the outputs a, y, h_pre, h_post, h_res, inv_rms.
pub(crate) fn pre_args(dtype: Dtype, n: usize, c: usize, t: usize) -> Vec<Arg> {
    let (k, m) = (n * c, n * n + 2 * n);
    vec![
        Arg::act(0, dtype, t, k, false),
        Arg::param(1, m, k),
        Arg::param(2, 1, 3),
        Arg::param(3, 1, m),
        Arg::param(4, 1, k),
        Arg::param(5, 1, c),
        Arg::act(6, dtype, t, c, true),
        Arg::act(7, dtype, t, c, true),
        Arg::coef(8, t, n, true),
        Arg::coef(9, t, n, true),
        Arg::coef(10, t, n * n, true),
        Arg::coef(11, t, 1, true),
    ]
}

/// `pre`'s parameter and output views of [`pre_args`] (x is `a[0]`).
pub(crate) fn pre_views<B>(a: &[Arg]) -> (PreParamViews<'static, B>, PreOutViews<'static, B>) {
    let params = PreParamViews {
        phi: a[1].view(),
        scale: a[2].view(),
        base: a[3].view(),
        gamma_k: Some(a[4].view()),
        gamma_f: Some(a[5].view()),
    };
    let out = PreOutViews {
        a: a[6].view_mut(),
        y: Some(a[7].view_mut()),
        h_pre: a[8].view_mut(),
        h_post: a[9].view_mut(),
        h_res: a[10].view_mut(),
        inv_rms: a[11].view_mut(),
    };
    (params, out)
}

/// The shape of the randomised calls, (n, C, T), and its configuration with both optional
/// weights (so every optional argument is present and checked).
pub(crate) const SHAPE: (usize, usize, usize) = (4, 40, 3);

pub(crate) fn config() -> crate::config::Config {
    let mut cfg = crate::config::Config::new(SHAPE.0, SHAPE.1);
    cfg.gamma_k = true;
    cfg.gamma_f = true;
    cfg
}
