//! The simulator against a second author: OpenCL C kernels (`cross/*.cl`) compiled by clang-19
//! for gfx942 at -O2 run on the simulator, and every result is compared with a CPU computation
//! of the same thing, exactly (integers, correctly rounded float operations) or within the
//! documented ULP bound (transcendentals 1 ULP, OpenCL's 2.5 ULP division). Every case runs
//! with a seeded shuffled workgroup order and 1-ULP transcendentals; every seed is printed.
//!
//! `every_wait_state_llvm_inserted_is_required` removes each `s_nop` wait state and each
//! `s_waitcnt` LLVM emitted (one at a time) and requires the simulator to report a hazard.

#[path = "support/llvm.rs"]
mod llvm;

use gcn_sim::decode::{Enc, Op};
use gcn_sim::{launch_with, load_kernel, Kernel, Launch, Memory, Options, Order, SimError, Trans};
use mhc::reference::testing::Rng;

/// Why a case failed.
#[derive(Debug)]
enum Fail {
    /// The simulator reported a hazard or error.
    Sim(SimError),
    /// A result differs from the CPU's.
    Mismatch(String),
}

impl std::fmt::Display for Fail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fail::Sim(e) => write!(f, "simulator: {e}"),
            Fail::Mismatch(s) => write!(f, "mismatch: {s}"),
        }
    }
}

type Res = Result<(), Fail>;

fn kernel(variant: &str, name: &str) -> Kernel {
    load_kernel(llvm::image(variant), name).unwrap_or_else(|e| panic!("{variant}/{name}: {e}"))
}

/// A seed for a test, printed ([`Rng::test_seed`]).
fn seed(what: &str) -> u64 {
    Rng::test_seed(what)
}

fn opts(seed: u64) -> Options {
    Options { order: Order::Seeded(seed), trans: Trans::Ulp(seed ^ 0x5eed), xnack: false }
}

// ----------------------------------------------------------------------------------------------
// Device memory and kernel arguments

fn u32s(mem: &mut Memory, name: &str, v: &[u32]) -> u64 {
    mem.alloc(name, v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

fn u64s(mem: &mut Memory, name: &str, v: &[u64]) -> u64 {
    mem.alloc(name, v.iter().flat_map(|x| x.to_le_bytes()).collect())
}

/// An output buffer poisoned with 0xcd bytes.
fn poison(mem: &mut Memory, name: &str, bytes: usize) -> u64 {
    mem.alloc(name, vec![0xcd; bytes])
}

fn read_u32(mem: &Memory, a: u64) -> Vec<u32> {
    mem.bytes(a).chunks(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

fn read_u64(mem: &Memory, a: u64) -> Vec<u64> {
    mem.bytes(a).chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect()
}

enum Arg {
    Ptr(u64),
    U32(u32),
}

/// Kernargs from the metadata: the explicit arguments by name, the hidden ones (block count,
/// group size, grid dims, offsets) for a 1-D grid of `groups` workgroups of 256. The segment is
/// padded to 16 bytes, as the runtime allocates it (LLVM widens kernarg loads to that).
fn kernargs(k: &Kernel, groups: u32, explicit: &[(&str, Arg)]) -> Vec<u8> {
    let mut b = vec![0u8; (k.kernarg_size as usize).div_ceil(16) * 16];
    let mut put = |off: usize, v: &[u8]| b[off..off + v.len()].copy_from_slice(v);
    for a in &k.args {
        match a.value_kind.as_str() {
            "global_buffer" | "by_value" => {
                let (_, v) = explicit
                    .iter()
                    .find(|(n, _)| *n == a.name)
                    .unwrap_or_else(|| panic!("{}: no value for argument {}", k.name, a.name));
                match v {
                    Arg::Ptr(p) => put(a.offset, &p.to_le_bytes()),
                    Arg::U32(x) => put(a.offset, &x.to_le_bytes()),
                }
            }
            "hidden_block_count_x" => put(a.offset, &groups.to_le_bytes()),
            "hidden_block_count_y" | "hidden_block_count_z" => put(a.offset, &1u32.to_le_bytes()),
            "hidden_group_size_x" => put(a.offset, &256u16.to_le_bytes()),
            "hidden_group_size_y" | "hidden_group_size_z" => put(a.offset, &1u16.to_le_bytes()),
            "hidden_grid_dims" => put(a.offset, &1u16.to_le_bytes()),
            _ => {}
        }
    }
    b
}

/// [`kernargs`] where the arguments not named in `explicit` are left zero (for the caller to
/// fill, e.g. 64-bit values).
fn kernargs_of(k: &Kernel, groups: u32, explicit: &[(&str, Arg)]) -> Vec<u8> {
    let names: Vec<&str> = explicit.iter().map(|(n, _)| *n).collect();
    let mut all: Vec<(&str, Arg)> = Vec::new();
    for a in &k.args {
        if matches!(a.value_kind.as_str(), "global_buffer" | "by_value") && !names.contains(&a.name.as_str()) {
            all.push((a.name.as_str(), Arg::U32(0)));
        }
    }
    for (n, v) in explicit {
        all.push((
            n,
            match v {
                Arg::Ptr(p) => Arg::Ptr(*p),
                Arg::U32(x) => Arg::U32(*x),
            },
        ));
    }
    kernargs(k, groups, &all)
}

fn run(k: &Kernel, mem: &mut Memory, groups: u32, args: &[(&str, Arg)], o: &Options) -> Res {
    let ka = kernargs(k, groups, args);
    let ka = mem.alloc("kernarg", ka);
    launch_with(k, Launch { grid: [groups, 1, 1], block: [256, 1, 1] }, ka, mem, o).map(|_| ()).map_err(Fail::Sim)
}

/// Compares `got` with `want` element by element (`eq` decides); reports the first mismatch.
fn compare<T: std::fmt::Debug>(what: &str, got: &[T], want: &[T], per: usize, eq: impl Fn(&T, &T) -> bool) -> Res {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        if !eq(g, w) {
            return Err(Fail::Mismatch(format!(
                "{what}: element {i} (work-item {}, output {}): got {g:?}, want {w:?}",
                i / per.max(1),
                i % per.max(1)
            )));
        }
    }
    Ok(())
}

fn exact<T: PartialEq>(a: &T, b: &T) -> bool {
    a == b
}

/// Bit-exact f32 comparison (NaNs compare by NaN-ness: payloads are not checked).
fn same_f32(a: &u32, b: &u32) -> bool {
    let (x, y) = (f32::from_bits(*a), f32::from_bits(*b));
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    a == b
}

fn same_f64(a: &u64, b: &u64) -> bool {
    let (x, y) = (f64::from_bits(*a), f64::from_bits(*b));
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    a == b
}

/// f32 results within `ulps` of each other (same sign, both finite or identical).
fn within_ulps(a: u32, b: u32, ulps: u32) -> bool {
    let (x, y) = (f32::from_bits(a), f32::from_bits(b));
    if x.is_nan() || y.is_nan() {
        return x.is_nan() && y.is_nan();
    }
    if !x.is_finite() || !y.is_finite() || x == 0.0 || y == 0.0 {
        return a == b || (x == 0.0 && y == 0.0);
    }
    x.is_sign_negative() == y.is_sign_negative() && (a as i64 - b as i64).unsigned_abs() <= ulps as u64
}

// ----------------------------------------------------------------------------------------------
// Input generators

/// u32 values with edge cases mixed in.
fn gen_u32(rng: &mut Rng, n: usize) -> Vec<u32> {
    const EDGE: [u32; 10] = [0, 1, 2, 31, 32, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff, 0xfffe, 0x1_0000];
    (0..n)
        .map(|_| match rng.next_u64() % 8 {
            0 => EDGE[(rng.next_u64() % EDGE.len() as u64) as usize],
            1 => (rng.next_u64() % 300) as u32,
            2 => (rng.next_u64() % 300) as u32 ^ 0xffff_ffff,
            _ => rng.next_u64() as u32,
        })
        .collect()
}

fn gen_u64(rng: &mut Rng, n: usize) -> Vec<u64> {
    const EDGE: [u64; 8] = [0, 1, 63, 64, 0xffff_ffff, 0x1_0000_0000, 0x8000_0000_0000_0000, u64::MAX];
    (0..n)
        .map(|_| match rng.next_u64() % 8 {
            0 => EDGE[(rng.next_u64() % EDGE.len() as u64) as usize],
            1 => rng.next_u64() % 5000,
            2 => rng.next_u64() >> (rng.next_u64() % 64),
            3 => rng.next_u64() as u32 as u64,
            _ => rng.next_u64(),
        })
        .collect()
}

/// f32 values: normal magnitudes over a wide range, signed zeros, denormals, infinities,
/// NaN, ties for rounding, extremes.
fn gen_f32(rng: &mut Rng, n: usize, specials: bool) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let r = rng.next_u64();
            match r % 16 {
                0 if specials => [0.0, -0.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN][(r >> 8) as usize % 5],
                1 => f32::from_bits((r >> 8) as u32 & 0x807f_ffff), // denormal (or zero)
                2 => ((r >> 8) % 41) as f32 * 0.5 - 10.0,           // ties and integers
                3 => f32::from_bits(0x7f00_0000 | (r >> 8) as u32 & 0x80ff_ffff), // huge
                4 => f32::from_bits(0x0080_0000 | (r >> 8) as u32 & 0x807f_ffff), // smallest normals
                _ => {
                    let e = ((r >> 8) % 60) as i32 - 30;
                    let m = 1.0 + ((r >> 16) & 0xffff) as f32 / 65536.0;
                    let s = if r >> 40 & 1 != 0 { -1.0 } else { 1.0 };
                    s * m * 2f32.powi(e)
                }
            }
        })
        .collect()
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

// ----------------------------------------------------------------------------------------------
// Integer ALU

fn perm(x: u32, y: u32, sel: u32) -> u32 {
    let bytes = ((x as u64) << 32) | y as u64;
    (0..4).fold(0, |acc, k| {
        let s = (sel >> (8 * k)) & 0xff;
        let b = match s {
            0..=7 => (bytes >> (8 * s)) & 0xff,
            12 => 0,
            _ => 0xff,
        } as u32;
        acc | b << (8 * k)
    })
}

fn sbfe(x: i32, off: u32, width: u32) -> i32 {
    if width == 0 {
        0
    } else {
        (((x as u32) >> off) << (32 - width)) as i32 >> (32 - width)
    }
}

fn int32_ref(x: u32, y: u32) -> Vec<u32> {
    let (sx, sy) = (x as i32, y as i32);
    let s = y & 31;
    let sh = 31 - (y & 15);
    vec![
        x.wrapping_add(y),
        x.wrapping_sub(y),
        x.wrapping_mul(y),
        ((x as u64 * y as u64) >> 32) as u32,
        ((sx as i64 * sy as i64) >> 32) as u32,
        (x & 0xff_ffff).wrapping_mul(y & 0xff_ffff),
        x << s,
        x >> s,
        (sx >> s) as u32,
        (x & y) | (!x & 0x5a5a_5a5a),
        x ^ y ^ 0x1234_5678,
        x.min(y),
        x.max(y),
        sx.min(sy) as u32,
        sx.max(sy) as u32,
        (x >> (s & 15)) & ((1u32 << (y >> 28)) - 1),
        (((x << sh) as i32) >> ((sh + (x & 7)) & 31)) as u32,
        x.count_ones(),
        if x != 0 { x.leading_zeros() } else { 32 },
        if x != 0 { x.trailing_zeros() } else { 32 },
        x.reverse_bits(),
        x.rotate_left(y & 31),
        if sx < 0 { 0u32.wrapping_sub(x) } else { x },
        (x & 0xff00_ff00) | (y & 0x00ff_00ff),
        ((x >> 8) & 0xff) + ((y >> 16) & 0xff) * 3,
        ((x as u16 as u32).wrapping_mul(y as u16 as u32).wrapping_add((x >> 16) as u16 as u32)) as u16 as u32,
        (((x >> 16) as i16 as i32 - y as i16 as i32) as i16) as i32 as u32,
        (x as i8 as i32 as u32).wrapping_add(y >> 24),
        (x << 5).wrapping_add(y),
        x.wrapping_add(y) << 3,
        x.wrapping_add(y).wrapping_add(x >> 3),
        (x << 4) | (y >> 28) | (x & 3),
        ((((x as u64) << 32) | y as u64) >> s) as u32,
        perm(x, y, 0x0c05_0104),
        if x < 1000 {
            7
        } else if sx < sy {
            11
        } else {
            13
        },
        (x == y) as u32 + (sx <= sy) as u32 * 2 + (x >= y) as u32 * 4 + (x != 0x8000_0000) as u32 * 8,
        if x < y { x.wrapping_sub(y).wrapping_mul(3) } else { x.wrapping_add(y) / 7 },
        if sx < -5 { x.wrapping_mul(9) } else { y.wrapping_mul(5).wrapping_add(1) },
        sbfe(sx, s & 15, (y >> 8) & 15) as u32,
        (((x >> 4) & 0x3ff) * 5) | (s << 27),
    ]
}

fn case_int32(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let (a, b) = (gen_u32(&mut rng, n), gen_u32(&mut rng, n));
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 40 * 4 * n);
    let (aa, ba) = (u32s(&mut mem, "a", &a), u32s(&mut mem, "b", &b));
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("b", Arg::Ptr(ba)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let want: Vec<u32> = (0..n).flat_map(|i| int32_ref(a[i], b[i])).collect();
    compare("int32_ops", &read_u32(&mem, out), &want, 40, exact)
}

fn int64_ref(x: u64, y: u64, i: u64) -> Vec<u64> {
    let (sx, sy) = (x as i64, y as i64);
    let s = (y & 63) as u32;
    vec![
        x.wrapping_add(y),
        x.wrapping_sub(y),
        x.wrapping_mul(y),
        x << s,
        x >> s,
        (sx >> s) as u64,
        x.min(y),
        sx.max(sy) as u64,
        (x & y) ^ (x | 0xf0f0_f0f0_0f0f_0f0f),
        (x as u32 as u64) * (y as u32 as u64),
        ((x as u32 as i32 as i64) * (y as u32 as i32 as i64)) as u64,
        x.wrapping_add((y as u32 as u64) * 12345),
        (x == y) as u64 | ((sx < sy) as u64) << 1 | ((x <= y) as u64) << 2 | ((x != 0) as u64) << 3,
        x.count_ones() as u64 + ((if x != 0 { x.leading_zeros() } else { 64 } as u64) << 8),
        x.wrapping_mul(0x9e37_79b9_7f4a_7c15),
        (x >> 32).wrapping_mul(y >> 32).wrapping_add(x << 17),
        (!x).wrapping_add(i),
        0u64.wrapping_sub(x),
        if x > 0xffff_ffff { x / 3 } else { x.wrapping_add(1) },
        ((x << 3).wrapping_add(i * 8)) >> 2,
    ]
}

fn case_int64(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let (a, b) = (gen_u64(&mut rng, n), gen_u64(&mut rng, n));
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 20 * 8 * n);
    let (aa, ba) = (u64s(&mut mem, "a", &a), u64s(&mut mem, "b", &b));
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("b", Arg::Ptr(ba)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let want: Vec<u64> = (0..n).flat_map(|i| int64_ref(a[i], b[i], i as u64)).collect();
    compare("int64_ops", &read_u64(&mem, out), &want, 20, exact)
}

fn div_ref(x: u64, y: u64) -> Vec<u64> {
    let y = y | 1;
    let (x32, y32) = (x as u32, y as u32);
    let (sx32, mut sy32) = (x32 as i32, y32 as i32);
    let (sx, mut sy) = (x as i64, y as i64);
    if sy == -1 {
        sy = 3;
    }
    if sy32 == -1 {
        sy32 = 3;
    }
    vec![
        (x32 / y32) as u64,
        (x32 % y32) as u64,
        (sx32 / sy32) as i64 as u64,
        (sx32 % sy32) as i64 as u64,
        x / y,
        x % y,
        (sx / sy) as u64,
        (sx % sy) as u64,
        x / ((y >> 40) | 1),
        (x32 / 7 + x32 % 13) as u64,
        (sx32 / -9) as i64 as u64,
        x / 1_000_003,
    ]
}

fn case_div(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let (a, b) = (gen_u64(&mut rng, n), gen_u64(&mut rng, n));
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 12 * 8 * n);
    let (aa, ba) = (u64s(&mut mem, "a", &a), u64s(&mut mem, "b", &b));
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("b", Arg::Ptr(ba)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let want: Vec<u64> = (0..n).flat_map(|i| div_ref(a[i], b[i])).collect();
    compare("int_div", &read_u64(&mem, out), &want, 12, exact)
}

fn case_scalar_ops(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let (kk, m) = (gen_u32(&mut rng, 1)[0], gen_u32(&mut rng, 1)[0]);
    let (big, big2) = (rng.next_u64(), rng.next_u64());
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 11 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    let mut ka = kernargs_of(k, n.div_ceil(256) as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa))]);
    for (name, v) in [("k", kk as u64), ("m", m as u64), ("big", big), ("big2", big2), ("n", n as u64)] {
        let arg = k.arg(name).expect("argument");
        ka[arg.offset..arg.offset + arg.size].copy_from_slice(&v.to_le_bytes()[..arg.size]);
    }
    let ka = mem.alloc("kernarg", ka);
    launch_with(k, Launch { grid: [n.div_ceil(256) as u32, 1, 1], block: [256, 1, 1] }, ka, &mut mem, o)
        .map_err(Fail::Sim)?;
    let d = big.wrapping_sub(kk as u64 * 3);
    let e = big.wrapping_sub(big2);
    let c = (kk < m) as u32
        + ((kk > m) as u32) * 2
        + ((kk <= m.wrapping_add(5)) as u32) * 4
        + ((kk != m) as u32) * 8
        + if kk >= m { 16 } else { 0 };
    let acc = (0..(m & 15)).fold(0u32, |acc, j| acc.wrapping_add(1000) ^ j);
    let mut want = Vec::new();
    for i in 0..n {
        let (x, y) = (a[i], a[if i + 1 < n { i + 1 } else { i }]);
        want.extend([
            d as u32,
            (d >> 32) as u32,
            if kk != 0 { kk.trailing_zeros() } else { 99 },
            c,
            kk.wrapping_add(1000).wrapping_mul(x),
            x.wrapping_add(y) << (y & 7),
            x.wrapping_sub(kk),
            kk.wrapping_sub(x),
            e as u32,
            (e >> 32) as u32,
            acc,
        ]);
    }
    compare("scalar_ops", &read_u32(&mem, out), &want, 11, exact)
}

// ----------------------------------------------------------------------------------------------
// Float ALU

/// IEEE minNum / maxNum with -0 < +0 (the VALU's v_min_f32 / v_max_f32).
fn fmin(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { a } else { b };
    }
    a.min(b)
}

fn fmax(a: f32, b: f32) -> f32 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { b } else { a };
    }
    a.max(b)
}

/// v_med3_f32 (ISA: with a NaN input, the minimum of the three).
fn fmed3(a: f32, b: f32, c: f32) -> f32 {
    if a.is_nan() || b.is_nan() || c.is_nan() {
        return fmin(fmin(a, b), c);
    }
    fmax(fmin(a, b), fmin(fmax(a, b), c))
}

fn ldexp(x: f32, e: i32) -> f32 {
    ((x as f64) * 2f64.powi(e)) as f32
}

fn frexp(x: f32) -> (f32, i32) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let e = (x.abs() as f64).log2().floor() as i32 + 1;
    (ldexp(x, -e), e)
}

fn fract(x: f32) -> f32 {
    if x.is_infinite() {
        return f32::NAN;
    }
    (x - x.floor()).min(f32::from_bits(0x3f7f_ffff))
}

fn f32_ref(x: f32, y: f32, z: f32) -> Vec<u32> {
    let u = |v: f32| v.to_bits();
    let cvt_i = |v: f32| if v.is_nan() { 0 } else { v as i32 as u32 };
    let cvt_u = |v: f32| if v.is_nan() { 0 } else { v as u32 };
    vec![
        u(x + y),
        u(x - y),
        u(x * y),
        u(x.mul_add(y, z)),
        u((-x).mul_add(y, 2.0)),
        u(fmin(x, y)),
        u(fmax(x, z)),
        u(x.abs() * 3.0),
        u(-y.abs() + x),
        u(x.floor()),
        u(y.ceil()),
        u(z.trunc()),
        u(x.round_ties_even()),
        u(x.copysign(y)),
        cvt_i(x),
        cvt_u(y.abs()),
        u(z.to_bits() as i32 as f32),
        u(z.to_bits() as f32),
        u(ldexp(x, (y.to_bits() & 15) as i32 - 8)),
        u(x * 0.5 + 1.0),
        u(if x.abs() < 4.0 { 1.0 } else { 2.0 }),
        (x.abs() < y.abs()) as u32
            | ((-x > z) as u32) << 1
            | ((x <= y) as u32) << 2
            | ((x == z) as u32) << 3
            | ((x != y) as u32) << 4
            | ((x >= -z.abs()) as u32) << 5,
        x.is_nan() as u32
            | (y.is_infinite() as u32) << 1
            | (z.is_finite() as u32) << 2
            | (x.is_normal() as u32) << 3
            | (y.to_bits() >> 31) << 4,
        u(if x < y { z } else { x * 2.0 }),
        u(x.abs().mul_add(-y, z.abs())),
        u(fmax(fmin(x, 1.0), -1.0)),
        u(x * y - z),
        u(fmed3(x, y, z)),
        u(fmax(fmax(x, y), z)),
        u(fmin(fmin(x, y), z)),
        u((y.to_bits() & 0xff) as f32 + ((y.to_bits() >> 16) & 0xff) as f32),
        if x > 0.0 && x < 1e9 { x as u32 } else { 0 },
        u(fract(x)),
        u(frexp(y).0),
        frexp(y).1 as u32,
        (x < y) as u32 | ((x.is_nan() || z.is_nan()) as u32) << 1,
    ]
}

fn case_f32(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let (a, b, c) = (gen_f32(&mut rng, n, true), gen_f32(&mut rng, n, true), gen_f32(&mut rng, n, true));
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 36 * 4 * n);
    let aa = u32s(&mut mem, "a", &bits(&a));
    let ba = u32s(&mut mem, "b", &bits(&b));
    let ca = u32s(&mut mem, "c", &bits(&c));
    let args = [
        ("out", Arg::Ptr(out)),
        ("a", Arg::Ptr(aa)),
        ("b", Arg::Ptr(ba)),
        ("c", Arg::Ptr(ca)),
        ("n", Arg::U32(n as u32)),
    ];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let want: Vec<u32> = (0..n).flat_map(|i| f32_ref(a[i], b[i], c[i])).collect();
    let bitwise = [14usize, 15, 20, 21, 22, 31, 34, 35];
    let got = read_u32(&mem, out);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = if bitwise.contains(&(i % 36)) { g == w } else { same_f32(g, w) };
        if !ok {
            let wi = i / 36;
            return Err(Fail::Mismatch(format!(
                "f32_ops output {} of work-item {wi} (x={:e} y={:e} z={:e}): got 0x{g:08x}, want 0x{w:08x}",
                i % 36,
                a[wi],
                b[wi],
                c[wi]
            )));
        }
    }
    Ok(())
}

fn fmin64(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { a } else { b };
    }
    a.min(b)
}

fn fmax64(a: f64, b: f64) -> f64 {
    if a.is_nan() {
        return b;
    }
    if b.is_nan() {
        return a;
    }
    if a == b {
        return if a.is_sign_negative() { b } else { a };
    }
    a.max(b)
}

fn f64_ref(x: f64, y: f64, z: f32) -> Vec<u64> {
    let u = |v: f64| v.to_bits();
    vec![
        u(x + y),
        u(x - y),
        u(x * y),
        u(x.mul_add(y, z as f64)),
        u(fmin64(x, y)),
        u(fmax64(x.abs(), y)),
        u(z as f64),
        (x as f32).to_bits() as u64,
        (if y.is_nan() { 0 } else { y as i32 }) as i64 as u64,
        u(z.to_bits() as i32 as f64),
        u(x.floor() + y.trunc()),
        (x < y) as u64 | ((x.abs() > 2.0) as u64) << 1 | ((x == y) as u64) << 2,
        u(x * 8.0),
        u(z.to_bits() as f64),
    ]
}

fn case_f64(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let widen = |v: Vec<f32>, rng: &mut Rng| -> Vec<f64> {
        v.into_iter().map(|x| x as f64 * (1.0 + (rng.next_u64() % 1000) as f64 * 1e-7)).collect()
    };
    let a = {
        let v = gen_f32(&mut rng, n, true);
        widen(v, &mut rng)
    };
    let b = {
        let v = gen_f32(&mut rng, n, true);
        widen(v, &mut rng)
    };
    let c = gen_f32(&mut rng, n, true);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 14 * 8 * n);
    let aa = u64s(&mut mem, "a", &a.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let ba = u64s(&mut mem, "b", &b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let ca = u32s(&mut mem, "c", &bits(&c));
    let args = [
        ("out", Arg::Ptr(out)),
        ("a", Arg::Ptr(aa)),
        ("b", Arg::Ptr(ba)),
        ("c", Arg::Ptr(ca)),
        ("n", Arg::U32(n as u32)),
    ];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let want: Vec<u64> = (0..n).flat_map(|i| f64_ref(a[i], b[i], c[i])).collect();
    let got = read_u64(&mem, out);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = if [7, 8, 11].contains(&(i % 14)) { g == w } else { same_f64(g, w) };
        if !ok {
            let wi = i / 14;
            return Err(Fail::Mismatch(format!(
                "f64_ops output {} of work-item {wi} (x={:e} y={:e} z={:e}): got 0x{g:016x}, want 0x{w:016x}",
                i % 14,
                a[wi],
                b[wi],
                c[wi]
            )));
        }
    }
    Ok(())
}

// ----------------------------------------------------------------------------------------------
// Global memory widths, scalar loads, buffers

fn case_loads(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let src: Vec<u8> = (0..64 * n).map(|_| rng.next_u64() as u8).collect();
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 16 * 4 * n);
    let sa = mem.alloc("src", src.clone());
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("out", Arg::Ptr(out)), ("src", Arg::Ptr(sa)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let mut want = Vec::new();
    for i in 0..n {
        let p = &src[64 * i..64 * i + 64];
        let u16_at = |o: usize| u16::from_le_bytes([p[o], p[o + 1]]) as u32;
        let u32_at = |o: usize| u32::from_le_bytes([p[o], p[o + 1], p[o + 2], p[o + 3]]);
        want.extend([
            p[1] as u32,
            p[3] as i8 as i32 as u32,
            u16_at(2),
            u16_at(6) as u16 as i16 as i32 as u32,
            u32_at(8),
            u32_at(16) ^ u32_at(20),
            u32_at(36).wrapping_add(u32_at(40).wrapping_mul(3)).wrapping_add(u32_at(44).wrapping_mul(5)),
            u32_at(48).wrapping_sub(u32_at(52)).wrapping_add(u32_at(56)).wrapping_sub(u32_at(60)),
            u16_at(10) | u16_at(18) << 16,
            p[7] as u32 | (p[13] as u32) << 8 | (p[17] as u32) << 16 | (p[19] as u32) << 24,
            u32_at(8),
            u32_at(12),
            u16_at(62) + p[62] as u32,
            u32_at(60),
            u32_at(44),
            u32_at(20),
        ]);
    }
    compare("loads", &read_u32(&mem, out), &want, 16, exact)
}

fn case_stores(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut mem = Memory::new();
    let dst = poison(&mut mem, "dst", 64 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("dst", Arg::Ptr(dst)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let mut want = vec![0xcdu8; 64 * n];
    for (i, &x) in a.iter().enumerate() {
        let p = &mut want[64 * i..64 * i + 64];
        let mut put = |o: usize, v: &[u8]| p[o..o + v.len()].copy_from_slice(v);
        put(0, &[x as u8]);
        put(3, &[(x >> 8) as u8]);
        put(4, &((x >> 3) as u16).to_le_bytes());
        put(8, &x.wrapping_mul(7).to_le_bytes());
        put(16, &x.to_le_bytes());
        put(20, &(!x).to_le_bytes());
        put(24, &x.wrapping_add(1).to_le_bytes());
        put(28, &x.wrapping_add(2).to_le_bytes());
        put(32, &x.wrapping_add(3).to_le_bytes());
        for (q, v) in [x, x << 1, x << 2, x << 3].iter().enumerate() {
            put(48 + 4 * q, &v.to_le_bytes());
        }
        put(16, &(((x as u64) << 32) | (x ^ 0xffff) as u64).to_le_bytes());
        put(6, &((x >> 16) as u16).to_le_bytes());
        put(62, &(x.wrapping_add(i as u32) as u16).to_le_bytes());
        put(61, &[i as u8]);
    }
    compare("stores", mem.bytes(dst), &want, 64, exact)
}

fn case_scalar_loads(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let table = gen_u32(&mut rng, 32);
    let kk = rng.next_u64() as u32;
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 4 * n);
    let ta = u32s(&mut mem, "table", &table);
    let args = [("out", Arg::Ptr(out)), ("table", Arg::Ptr(ta)), ("k", Arg::U32(kk)), ("n", Arg::U32(n as u32))];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let want: Vec<u32> = (0..n as u32)
        .map(|i| {
            let mut acc = (0..16u32).fold(0u32, |acc, j| acc.wrapping_add(table[j as usize].wrapping_mul(i + j)));
            acc ^= table[16 + (kk & 7) as usize];
            acc.wrapping_add(table[24]).wrapping_add(table[25]).wrapping_add(table[26]).wrapping_add(table[27])
        })
        .collect();
    compare("scalar_loads", &read_u32(&mem, out), &want, 1, exact)
}

fn case_buffers(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let bytes = 4 * n + 64;
    let buf = gen_u32(&mut rng, bytes / 4);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 16 * n);
    let ba = u32s(&mut mem, "buf", &buf);
    let dst = poison(&mut mem, "dst", 4 * n);
    let args = [
        ("out", Arg::Ptr(out)),
        ("buf", Arg::Ptr(ba)),
        ("bytes", Arg::U32(bytes as u32)),
        ("dst", Arg::Ptr(dst)),
        ("n", Arg::U32(n as u32)),
    ];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let byte = |o: usize| (buf[o / 4] >> (8 * (o % 4))) & 0xff;
    let mut want = Vec::new();
    for i in 0..n {
        let v = buf[i];
        let (v2x, v2y) = (buf[2 * (i / 2)], buf[2 * (i / 2) + 1]);
        let v4 = &buf[4 * (i / 4)..4 * (i / 4) + 4];
        let h = byte(2 * i + 22) | byte(2 * i + 23) << 8;
        let tail = bytes - 8 + 4 * (i & 3);
        want.extend([
            v.wrapping_add(v2x).wrapping_add(v2y.wrapping_mul(3)),
            v4[0] ^ v4[1] ^ v4[2] ^ v4[3],
            byte(i + 3) | h << 8,
            if tail + 4 <= bytes { buf[tail / 4] } else { 0 },
        ]);
    }
    compare("buffers", &read_u32(&mem, out), &want, 4, exact)?;
    let want_dst: Vec<u32> = buf[..n].iter().map(|v| v.wrapping_mul(3)).collect();
    compare("buffers (store)", &read_u32(&mem, dst), &want_dst, 1, exact)
}

// ----------------------------------------------------------------------------------------------
// LDS

fn case_lds_widths(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let groups = n.div_ceil(256);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 10 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(k, &mut mem, groups as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], o)?;
    let mut want = Vec::new();
    for g in 0..groups {
        let xs: Vec<u32> = (0..256).map(|l| a.get(g * 256 + l).copied().unwrap_or(0)).collect();
        let mut w = [0u32; 1024];
        let mut bytes = [0u8; 1024];
        let mut shorts = [0u16; 512];
        for (l, &x) in xs.iter().enumerate() {
            w[l] = x;
            w[256 + l] = x.wrapping_mul(3);
            w[512 + 4 * (l & 63) + (l >> 6)] = !x;
            bytes[l * 4 + 1] = (x >> 8) as u8;
            bytes[l * 4] = x as u8;
            shorts[l * 2 + 1] = (x >> 16) as u16;
        }
        for l in 0..256 {
            if g * 256 + l >= n {
                break;
            }
            let m = 255 - l;
            let q = xs[(l * 7) & 255];
            let r2 = ((q as u64) << 32) | (q >> 1) as u64;
            let v = xs[(l + 1) & 255];
            let r3 = [v, v.wrapping_add(1), v.wrapping_add(2), v.wrapping_add(3)];
            want.extend([
                w[m].wrapping_add(w[256 + ((l + 64) & 255)]),
                w[512 + 4 * (m & 63) + (m >> 6)],
                r2 as u32,
                (r2 >> 32) as u32,
                r3[0]
                    .wrapping_add(r3[1].wrapping_mul(2))
                    .wrapping_add(r3[2].wrapping_mul(4))
                    .wrapping_add(r3[3].wrapping_mul(8)),
                bytes[m * 4 + 1] as u32 | (bytes[m * 4] as u32) << 8,
                shorts[((l + 3) & 255) * 2 + 1] as i16 as i32 as u32,
                w[(l * 2) & 255].wrapping_add(w[((l * 2) & 255) + 1]).wrapping_add(w[(l + 64) & 255].wrapping_mul(2)),
                r3[3],
                bytes[m * 4 + 1] as i8 as i32 as u32,
            ]);
        }
    }
    compare("lds_widths", &read_u32(&mem, out), &want, 10, exact)
}

fn case_lds_atomics(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let groups = n.div_ceil(256);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 6 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(k, &mut mem, groups as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], o)?;
    let got = read_u32(&mem, out);
    let mut want = Vec::new();
    for g in 0..groups {
        let xs: Vec<u32> = (0..256).map(|l| a.get(g * 256 + l).copied().unwrap_or(0)).collect();
        for l in 0..256 {
            if g * 256 + l >= n {
                break;
            }
            let slot = xs[l] & 15;
            let same: Vec<u32> = xs.iter().copied().filter(|x| x & 15 == slot).collect();
            want.extend([
                1,
                same.len() as u32,
                same.iter().copied().max().unwrap_or(0),
                same.iter().copied().min().unwrap_or(u32::MAX),
                same.iter().fold(0, |a, b| a ^ b),
                256,
            ]);
        }
    }
    compare("lds_atomics", &got, &want, 6, exact)
}

fn case_lds_cross_lane(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let groups = n.div_ceil(256);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 5 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(k, &mut mem, groups as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], o)?;
    let x = |i: usize| a.get(i).copied().unwrap_or(0);
    let mut want = Vec::new();
    for i in 0..n {
        let lane = i & 63;
        let w0 = i - lane;
        let qd = [3, 2, 1, 2];
        let perm_src = (0..64).find(|&s| (s * 5) & 63 == lane).unwrap();
        want.extend([
            x(w0 + ((lane & !3) | qd[lane & 3])),
            x(w0 + ((lane & 32) | ((lane & 31) ^ 1))),
            x(w0 + ((lane & 32) | (lane & 0x10) | 3)),
            x(w0 + perm_src),
            x(w0 + ((lane + 17) & 63)),
        ]);
    }
    compare("lds_cross_lane", &read_u32(&mem, out), &want, 5, exact)
}

// ----------------------------------------------------------------------------------------------
// Cross-lane VALU

fn case_dpp(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let groups = n.div_ceil(256);
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut mem = Memory::new();
    let total = groups * 256;
    let out = poison(&mut mem, "out", 14 * 4 * total);
    let aa = u32s(&mut mem, "a", &a);
    run(k, &mut mem, groups as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], o)?;
    let x = |i: usize| a.get(i).copied().unwrap_or(0);
    let mut want = Vec::new();
    for i in 0..n {
        let lane = i & 63;
        let (w0, row, l) = (i - lane, lane & !15, lane & 15);
        let xv = |src: usize| x(w0 + src);
        let y = x(i).wrapping_mul(3).wrapping_add(1);
        let row_of = lane / 16;
        want.extend([
            xv((lane & !3) | (3 - (lane & 3))),
            if l >= 1 { xv(lane - 1) } else { 0 },
            if l >= 8 { xv(lane - 8) } else { y },
            if row_of % 2 == 1 { xv(row | ((l + 16 - 5) & 15)) } else { y },
            if lane < 63 { xv(lane + 1) } else { y },
            if lane > 0 { xv(lane - 1) } else { y },
            xv((lane + 1) & 63),
            xv((lane + 63) & 63),
            if (l / 4) % 2 == 0 { xv(row | (15 - l)) } else { y },
            xv(row | (l & 8) | (7 - (l & 7))),
            if row_of % 2 == 1 { xv(row - 1) } else { y },
            if row_of >= 2 { xv(31) } else { y },
            (if l < 15 { xv(lane + 1) } else { 0 }).wrapping_add(x(i)),
            if l == 15 { xv(row) ^ y } else { 0 },
        ]);
    }
    let got = read_u32(&mem, out);
    compare("dpp", &got[..14 * n], &want, 14, exact)
}

fn case_lanes(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let groups = n.div_ceil(256);
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 10 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(k, &mut mem, groups as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], o)?;
    let x = |i: usize| a.get(i).copied().unwrap_or(0);
    let mut want = Vec::new();
    for i in 0..n {
        let lane = i & 63;
        let w0 = i - lane;
        let first = x(w0);
        let sel = first & 63;
        let kk = ((first >> 7) & 63) as usize;
        let ball: u64 = (0..64).filter(|&j| x(w0 + j) & 3 == 1).fold(0, |m, j| m | 1 << j);
        let odd_first = (0..64).map(|j| x(w0 + j)).find(|v| v & 1 != 0).unwrap_or(0);
        want.extend([
            lane as u32,
            first,
            x(w0 + 5),
            x(w0 + sel as usize),
            x(w0 + kk) ^ first,
            ball as u32,
            (ball >> 32) as u32,
            (ball & ((1u64 << lane) - 1)).count_ones(),
            if x(i) & 1 != 0 { odd_first } else { 0 },
            sel,
        ]);
    }
    compare("lanes", &read_u32(&mem, out), &want, 10, exact)
}

fn case_wave_reduce(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let groups = n.div_ceil(256);
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 2 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(k, &mut mem, groups as u32, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], o)?;
    let x = |i: usize| a.get(i).copied().unwrap_or(0);
    let mut want = Vec::new();
    for i in 0..n {
        let w0 = i - (i & 63);
        let vals: Vec<u32> = (0..64).map(|j| x(w0 + j)).collect();
        want.extend([vals.iter().fold(0u32, |s, v| s.wrapping_add(*v)), *vals.iter().max().unwrap()]);
    }
    compare("wave_reduce", &read_u32(&mem, out), &want, 2, exact)
}

fn case_sdwa(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n: usize = if small { 300 } else { 700 };
    let mut rng = Rng::new(seed);
    let (a, b) = (gen_u32(&mut rng, n), gen_u32(&mut rng, n));
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 8 * 4 * n);
    let (aa, ba) = (u32s(&mut mem, "a", &a), u32s(&mut mem, "b", &b));
    let args = [("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("b", Arg::Ptr(ba)), ("n", Arg::U32(n as u32))];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let mut want = Vec::new();
    for i in 0..n {
        let (x, y) = (a[i], b[i]);
        let by = |v: u32, k: u32| (v >> (8 * k)) & 0xff;
        let hw = |v: u32, k: u32| (v >> (16 * k)) & 0xffff;
        let bytewise =
            |f: &dyn Fn(u32, u32) -> u32| (0..4).fold(0, |acc, k| acc | (f(by(x, k), by(y, k)) & 0xff) << (8 * k));
        let halfwise =
            |f: &dyn Fn(u32, u32) -> u32| (0..2).fold(0, |acc, k| acc | (f(hw(x, k), hw(y, k)) & 0xffff) << (16 * k));
        want.extend([
            bytewise(&|p, q| p + q),
            halfwise(&|p, q| p * q),
            halfwise(&|p, q| p.wrapping_sub(q)),
            (x >> 16).wrapping_add(y & 0xffff),
            (x >> 24).wrapping_mul((y >> 8) & 0xff).wrapping_add(x & 0xff),
            (x >> 16) | (y & 0xffff) << 16,
            (x >> 24) | ((y >> 16) & 0xff) << 8 | ((x >> 8) & 0xff) << 16 | (y & 0xff) << 24,
            ((x >> 16) as i16 as i32 * (y >> 16) as i16 as i32) as u32,
        ]);
    }
    compare("sdwa", &read_u32(&mem, out), &want, 8, exact)
}

// ----------------------------------------------------------------------------------------------
// Control flow

fn divergent_ref(x: u32, n: u32) -> [u32; 2] {
    let mut acc = x;
    for j in 0..(x & 31) {
        acc = acc.wrapping_mul(3).wrapping_add(j);
        if acc & 0xff == 0x5a {
            break;
        }
    }
    let mut r = if x & 1 != 0 {
        if x & 2 != 0 {
            acc ^ 0xdead_beef
        } else {
            acc.wrapping_add(17)
        }
    } else if (x >> 8) % 3 == 0 {
        acc.wrapping_mul(acc)
    } else {
        !acc
    };
    match (x >> 4) & 7 {
        0 => r = r.wrapping_add(1),
        1 => r ^= 2,
        3 => r = r.wrapping_mul(5),
        6 => r >>= 3,
        _ => r = r.wrapping_sub(7),
    }
    let (mut k, mut v) = (0u32, x);
    while k < n / 256 + 3 {
        v = (v >> 1) ^ (0u32.wrapping_sub(v & 1) & 0xedb8_8320);
        if v < 0x100_0000 {
            break;
        }
        k += 1;
    }
    [r, v.wrapping_add(k)]
}

fn case_divergent(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 2 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let want: Vec<u32> = a.iter().flat_map(|&x| divergent_ref(x, n as u32)).collect();
    compare("divergent", &read_u32(&mem, out), &want, 2, exact)
}

fn case_uniform(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 600 };
    let mut rng = Rng::new(seed);
    let m = 6 + (rng.next_u64() % 9) as u32;
    let s = rng.next_u64() as u32;
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 4 * n);
    let args = [("out", Arg::Ptr(out)), ("m", Arg::U32(m)), ("seed", Arg::U32(s)), ("n", Arg::U32(n as u32))];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let mut h = s;
    for a in 0..m {
        let mut b = a;
        while b < m {
            h = (h ^ (a * 7 + b)).wrapping_mul(0x0100_0193);
            b += 3;
        }
        if h & 0x10 != 0 {
            h = h.wrapping_add(a);
        } else {
            h = h.rotate_left(3);
        }
    }
    let want: Vec<u32> = (0..n as u32).map(|i| h.wrapping_add(i.wrapping_mul(m | 1))).collect();
    compare("uniform", &read_u32(&mem, out), &want, 1, exact)
}

// ----------------------------------------------------------------------------------------------
// Atomics

/// The values returned by a sequence of operations on one location, in any order, plus its
/// final value, are consistent with some order: for counters, the returned values are a
/// permutation of 0..count.
fn check_permutation(what: &str, mut got: Vec<u64>) -> Res {
    got.sort_unstable();
    for (i, v) in got.iter().enumerate() {
        if *v != i as u64 {
            return Err(Fail::Mismatch(format!("{what}: returned values are not 0..{}: {v} at {i}", got.len())));
        }
    }
    Ok(())
}

fn case_atomics32(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut init = vec![0u32; 32];
    init[9] = 0x1234_5678;
    init[11] = u32::MAX;
    init[12] = i32::MIN as u32;
    init[13] = i32::MAX as u32;
    init[14] = u32::MAX;
    for q in 0..4 {
        init[19 + q] = 0xabcd_0000 + q as u32;
    }
    init[26] = 1_000_000;
    let mut mem = Memory::new();
    let ctr = u32s(&mut mem, "ctr", &init);
    let ret = poison(&mut mem, "ret", 2 * 4 * n);
    let aa = u32s(&mut mem, "a", &a);
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("ctr", Arg::Ptr(ctr)), ("ret", Arg::Ptr(ret)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let c = read_u32(&mem, ctr);
    let r = read_u32(&mem, ret);
    for slot in 0..8 {
        let got: Vec<u64> = (0..n).filter(|&i| a[i] & 7 == slot).map(|i| r[2 * i] as u64).collect();
        check_permutation(&format!("atomics32 fetch_add slot {slot}"), got)?;
        let count = (0..n).filter(|&i| a[i] & 7 == slot).count() as u32;
        compare("atomics32 counter", &[c[slot as usize]], &[count], 1, exact)?;
    }
    let and_all = a.iter().enumerate().fold(u32::MAX, |m, (i, x)| m & (x | 1 << (i & 31)));
    let or_all = a.iter().enumerate().fold(0, |m, (i, x)| m | (x & 1 << (i & 31)));
    let fsum = a.iter().map(|x| (x & 255) as f32).sum::<f32>();
    let want = [
        a.iter().fold(0u32, |s, x| s.wrapping_add(*x)),
        a.iter().fold(0x1234_5678u32, |s, x| s.wrapping_sub(x >> 4)),
        *a.iter().max().unwrap(),
        *a.iter().min().unwrap(),
        a.iter().map(|&x| x as i32).max().unwrap() as u32,
        a.iter().map(|&x| x as i32).min().unwrap() as u32,
        and_all,
        or_all,
        a.iter().fold(0, |s, x| s ^ x),
        fsum.to_bits(),
    ];
    compare("atomics32 ctr[8..18]", &c[8..18], &want, 1, exact)?;
    // Exchanges: the returned values and the final one are the initial value and every x.
    for q in 0..4 {
        let mut seen: Vec<u32> = (0..n).filter(|i| i & 3 == q).map(|i| r[2 * i + 1]).collect();
        seen.push(c[19 + q]);
        let mut put: Vec<u32> = (0..n).filter(|i| i & 3 == q).map(|i| a[i]).collect();
        put.push(init[19 + q]);
        seen.sort_unstable();
        put.sort_unstable();
        compare(&format!("atomics32 exchange chain {q}"), &seen, &put, 1, exact)?;
    }
    let cas_sum = a.iter().fold(0u32, |s, x| s.wrapping_add(x & 15));
    compare("atomics32 ctr[23..27]", &c[23..27], &[n as u32, cas_sum, n as u32, 1_000_000 - n as u32], 1, exact)
}

fn case_atomics64(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let a = gen_u64(&mut rng, n);
    let mut init = vec![0u64; 16];
    init[6] = i64::MAX as u64;
    let mut mem = Memory::new();
    let ctr = u64s(&mut mem, "ctr", &init);
    let ret = poison(&mut mem, "ret", 8 * n);
    let aa = u64s(&mut mem, "a", &a);
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("ctr", Arg::Ptr(ctr)), ("ret", Arg::Ptr(ret)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let c = read_u64(&mem, ctr);
    let r = read_u64(&mem, ret);
    for slot in 0..4 {
        check_permutation(
            &format!("atomics64 slot {slot}"),
            (0..n).filter(|&i| a[i] & 3 == slot).map(|i| r[i]).collect(),
        )?;
        compare(
            "atomics64 counter",
            &[c[slot as usize]],
            &[(0..n).filter(|&i| a[i] & 3 == slot).count() as u64],
            1,
            exact,
        )?;
    }
    let want = [
        a.iter().fold(0u64, |s, x| s.wrapping_add(*x)),
        *a.iter().max().unwrap(),
        a.iter().map(|&x| x as i64).min().unwrap() as u64,
        a.iter().fold(0, |s, x| s ^ x),
        a.iter().enumerate().fold(0, |m, (i, x)| m | (x & 1 << (i & 63))),
        a.iter().fold(0u64, |s, x| s.wrapping_add(x >> 60)),
    ];
    compare("atomics64 ctr[4..10]", &c[4..10], &want, 1, exact)
}

fn case_split_sum_with(k: &Kernel, o: &Options, seed: u64, groups: usize) -> Res {
    let n = groups * 256 - 37;
    let mut rng = Rng::new(seed);
    let a = gen_u32(&mut rng, n);
    let mut mem = Memory::new();
    let partial = poison(&mut mem, "partial", 4 * groups);
    let counter = u32s(&mut mem, "counter", &[0]);
    let result = poison(&mut mem, "result", 4);
    let aa = u32s(&mut mem, "a", &a);
    let args = [
        ("partial", Arg::Ptr(partial)),
        ("counter", Arg::Ptr(counter)),
        ("result", Arg::Ptr(result)),
        ("a", Arg::Ptr(aa)),
        ("n", Arg::U32(n as u32)),
    ];
    run(k, &mut mem, groups as u32, &args, o)?;
    let want = (0..groups).fold(0u32, |t, g| {
        let part = (g * 256..(g * 256 + 256).min(n)).fold(0u32, |s, i| s.wrapping_add(a[i].wrapping_mul(i as u32 + 1)));
        t.wrapping_add(part.wrapping_mul(g as u32 + 1))
    });
    compare("split_sum", &[read_u32(&mem, result)[0], read_u32(&mem, counter)[0]], &[want, 0], 1, exact)
}

fn case_split_sum(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    // Small: enough workgroups that the last one's loop over the partials runs its unrolled
    // body.
    case_split_sum_with(k, o, seed, if small { 11 } else { 23 })
}

// ----------------------------------------------------------------------------------------------
// Transcendentals, division, denormals

fn trans_ref(x: f32) -> Vec<u32> {
    let t = |v: f64| (v as f32).to_bits();
    let xd = x as f64;
    let s = (x * 0.01) as f64;
    vec![
        t(xd.exp2()),
        t(xd.abs().log2()),
        t(1.0 / xd),
        t(1.0 / xd.abs().sqrt()),
        t(xd.abs().sqrt()),
        t((s * std::f64::consts::TAU).sin()),
        t((s * std::f64::consts::TAU).cos()),
        x.abs().sqrt().to_bits(),
    ]
}

fn case_trans(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let a: Vec<f32> =
        gen_f32(&mut rng, n, true).into_iter().map(|x| if x.abs() > 120.0 { x.fract() * 100.0 } else { x }).collect();
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 8 * 4 * n);
    let aa = u32s(&mut mem, "a", &bits(&a));
    run(
        k,
        &mut mem,
        n.div_ceil(256) as u32,
        &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))],
        o,
    )?;
    let want: Vec<u32> = a.iter().flat_map(|&x| trans_ref(x)).collect();
    let got = read_u32(&mem, out);
    // The hardware units are accurate to 1 ULP: exact results in Trans::Exact mode, within 1
    // ULP in Trans::Ulp mode; the correctly rounded sqrt LLVM builds on v_sqrt_f32 is exact in
    // both.
    let tol = if matches!(o.trans, Trans::Exact) { 0 } else { 1 };
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        let ok = if i % 8 == 7 { same_f32(g, w) } else { within_ulps(*g, *w, tol) };
        if !ok {
            return Err(Fail::Mismatch(format!(
                "trans output {} of x = {:e}: got {:e} (0x{g:08x}), want {:e} (0x{w:08x}), {tol} ULP allowed",
                i % 8,
                a[i / 8],
                f32::from_bits(*g),
                f32::from_bits(*w)
            )));
        }
    }
    Ok(())
}

/// Division inputs: the general mix plus quotients near the top of the range and denormal
/// quotients (v_div_scale's scaled paths), and denormal operands.
fn gen_div(rng: &mut Rng, n: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut a, mut b) = (gen_f32(rng, n, true), gen_f32(rng, n, true));
    for i in 0..n {
        match rng.next_u64() % 8 {
            0 => {
                a[i] = 3.0e38 * (0.5 + (i % 7) as f32 * 0.07);
                b[i] = 0.75 + (i % 5) as f32 * 0.13;
            }
            1 => {
                a[i] = 1.0e-30 * (1.0 + (i % 11) as f32 * 0.1);
                b[i] = 3.0e10 * (1.0 + (i % 3) as f32 * 0.3);
            }
            2 => b[i] = f32::from_bits(1 + (rng.next_u64() as u32 & 0x7f_ffff)),
            _ => {}
        }
    }
    (a, b)
}

/// |got - q| in ULPs of the f32 result (q exact in f64).
fn ulp_error(got: f32, q: f64) -> f64 {
    let r = q as f32;
    let ulp = (f32::from_bits(r.abs().to_bits() + 1) - r.abs()) as f64;
    (got as f64 - q).abs() / ulp
}

#[derive(Clone, Copy, PartialEq)]
enum Div {
    CorrectlyRounded,
    Fast,
    FlushToZero,
}

fn case_fdiv_with(k: &Kernel, o: &Options, seed: u64, small: bool, mode: Div) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let (a, b) = gen_div(&mut rng, n);
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 5 * 4 * n);
    let (aa, ba) = (u32s(&mut mem, "a", &bits(&a)), u32s(&mut mem, "b", &bits(&b)));
    let args = [("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("b", Arg::Ptr(ba)), ("n", Arg::U32(n as u32))];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let got = read_u32(&mem, out);
    let ftz = |v: f32| if mode == Div::FlushToZero && v.is_subnormal() { 0.0f32.copysign(v) } else { v };
    for i in 0..n {
        let (x, y) = (ftz(a[i]), ftz(b[i]));
        let want = [ftz(x / y), ftz(1.0 / y), ftz(x.abs().sqrt()), ftz(x * y), ftz(ftz(x + y) / ftz(x - y))];
        let exact_q = [
            x as f64 / y as f64,
            1.0 / y as f64,
            (x.abs() as f64).sqrt(),
            0.0,
            (ftz(x + y) as f64) / (ftz(x - y) as f64),
        ];
        for j in 0..5 {
            let g = f32::from_bits(got[5 * i + j]);
            let w = want[j];
            // LLVM's correctly rounded division refines v_rcp_f32 assuming it is correctly
            // rounded where the refinement lands on a tie (1 / (1 - 2^-24)); with 1-ULP
            // reciprocals the quotient is within 1 ULP. Its sqrt fixup needs only 1 ULP.
            let ulp_rcp = !matches!(o.trans, Trans::Exact) && j != 2 && j != 3;
            let ok = if ulp_rcp && mode != Div::Fast && g.is_finite() && w.is_finite() {
                within_ulps(g.to_bits(), w.to_bits(), 1)
            } else if mode != Div::Fast || j == 3 || !w.is_finite() || !g.is_finite() {
                same_f32(&g.to_bits(), &w.to_bits())
            } else {
                // OpenCL: 2.5 ULP for division, 3 ULP for sqrt without the correctly rounded flag.
                ulp_error(g, exact_q[j]) <= if j == 2 { 3.0 } else { 2.5 }
            };
            if !ok {
                return Err(Fail::Mismatch(format!(
                    "fdiv output {j} of x = {:e} ({:#010x}), y = {:e} ({:#010x}): got {g:e} ({:#010x}), want {w:e} ({:#010x})",
                    a[i],
                    a[i].to_bits(),
                    b[i],
                    b[i].to_bits(),
                    g.to_bits(),
                    w.to_bits()
                )));
            }
        }
    }
    Ok(())
}

fn case_fdiv_cr(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    case_fdiv_with(k, o, seed, small, Div::CorrectlyRounded)
}

fn case_fdiv_fast(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    case_fdiv_with(k, o, seed, small, Div::Fast)
}

fn case_fdiv_ftz(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    case_fdiv_with(k, o, seed, small, Div::FlushToZero)
}

fn case_ddiv(k: &Kernel, o: &Options, seed: u64, small: bool) -> Res {
    let n = if small { 300 } else { 1000 };
    let mut rng = Rng::new(seed);
    let gen = |rng: &mut Rng| -> Vec<f64> {
        gen_f32(rng, n, true).into_iter().map(|x| x as f64 * (1.0 + (rng.next_u64() % 997) as f64 / 1031.0)).collect()
    };
    let (a, b) = (gen(&mut rng), gen(&mut rng));
    let mut mem = Memory::new();
    let out = poison(&mut mem, "out", 2 * 8 * n);
    let aa = u64s(&mut mem, "a", &a.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let ba = u64s(&mut mem, "b", &b.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    let args = [("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("b", Arg::Ptr(ba)), ("n", Arg::U32(n as u32))];
    run(k, &mut mem, n.div_ceil(256) as u32, &args, o)?;
    let want: Vec<u64> = (0..n).flat_map(|i| [(a[i] / b[i]).to_bits(), a[i].abs().sqrt().to_bits()]).collect();
    compare("ddiv", &read_u64(&mem, out), &want, 2, same_f64)
}

// ----------------------------------------------------------------------------------------------
// The cases and their tests

type CaseFn = fn(&Kernel, &Options, u64, bool) -> Res;

/// (variant, kernel, check) of every case.
const CASES: &[(&str, &str, CaseFn)] = &[
    ("int", "int32_ops", case_int32),
    ("int", "int64_ops", case_int64),
    ("int", "int_div", case_div),
    ("int", "scalar_ops", case_scalar_ops),
    ("float", "f32_ops", case_f32),
    ("float", "f64_ops", case_f64),
    ("mem", "loads", case_loads),
    ("mem", "stores", case_stores),
    ("mem", "scalar_loads", case_scalar_loads),
    ("mem", "buffers", case_buffers),
    ("lds", "lds_widths", case_lds_widths),
    ("lds", "lds_atomics", case_lds_atomics),
    ("lds", "lds_cross_lane", case_lds_cross_lane),
    ("lanes", "dpp", case_dpp),
    ("lanes", "lanes", case_lanes),
    ("lanes", "wave_reduce", case_wave_reduce),
    ("lanes", "sdwa", case_sdwa),
    ("flow", "divergent", case_divergent),
    ("flow", "uniform", case_uniform),
    ("atomics", "atomics32", case_atomics32),
    ("atomics", "atomics64", case_atomics64),
    ("atomics", "split_sum", case_split_sum),
    ("trans", "trans", case_trans),
    ("fdiv_cr", "fdiv", case_fdiv_cr),
    ("fdiv_cr", "ddiv", case_ddiv),
    ("fdiv_fast", "fdiv", case_fdiv_fast),
    ("fdiv_ftz", "fdiv", case_fdiv_ftz),
];

/// Runs a case with correctly rounded transcendentals and XNACK replay on, and with 1-ULP
/// transcendentals (a seeded dispatch order in both).
fn check_case(variant: &str, name: &str) {
    let (_, _, f) = CASES.iter().find(|(v, n, _)| *v == variant && *n == name).expect("case");
    let k = kernel(variant, name);
    let s = seed(&format!("{variant}/{name}"));
    for o in [Options { order: Order::Seeded(s), trans: Trans::Exact, xnack: true }, opts(s)] {
        if let Err(e) = f(&k, &o, s, false) {
            panic!("{variant}/{name} (seed {s}, {:?}): {e}", o.trans);
        }
    }
}

macro_rules! cases {
    ($($test:ident $variant:literal $name:literal;)*) => {
        $(
            #[test]
            fn $test() {
                check_case($variant, $name);
            }
        )*
    };
}

cases! {
    int32_alu "int" "int32_ops";
    int64_alu "int" "int64_ops";
    integer_division "int" "int_div";
    uniform_scalar_arithmetic "int" "scalar_ops";
    f32_alu_and_compares_with_modifiers "float" "f32_ops";
    f64_alu "float" "f64_ops";
    global_loads_of_every_width "mem" "loads";
    global_stores_of_every_width "mem" "stores";
    scalar_loads_of_a_uniform_table "mem" "scalar_loads";
    buffer_loads_and_stores "mem" "buffers";
    lds_loads_and_stores_of_every_width "lds" "lds_widths";
    lds_atomics "lds" "lds_atomics";
    lds_swizzle_permute_bpermute "lds" "lds_cross_lane";
    dpp_controls "lanes" "dpp";
    readlane_readfirstlane_mbcnt_ballot "lanes" "lanes";
    wave_reduction_with_dpp_and_bpermute "lanes" "wave_reduce";
    sdwa_byte_and_word_arithmetic "lanes" "sdwa";
    divergent_control_flow "flow" "divergent";
    uniform_scalar_loops "flow" "uniform";
    global_atomics_32 "atomics" "atomics32";
    global_atomics_64 "atomics" "atomics64";
    split_reduction_with_release_and_acquire "atomics" "split_sum";
    transcendentals_within_one_ulp "trans" "trans";
    correctly_rounded_division_and_sqrt "fdiv_cr" "fdiv";
    f64_division_and_sqrt "fdiv_cr" "ddiv";
    opencl_division_within_2_5_ulp "fdiv_fast" "fdiv";
    division_with_denormals_flushed "fdiv_ftz" "fdiv";
}

/// The 1-ULP mode is reproducible from its seed, differs between seeds, and moves results by
/// at most one ULP from the correctly rounded ones (and does move some).
#[test]
fn one_ulp_transcendentals_are_deterministic_per_seed() {
    let k = kernel("trans", "trans");
    let n = 512;
    let mut rng = Rng::new(7);
    let a: Vec<f32> = (0..n).map(|_| rng.range(-20.0, 20.0) as f32).collect();
    let outputs = |trans: Trans| {
        let mut mem = Memory::new();
        let out = poison(&mut mem, "out", 8 * 4 * n);
        let aa = u32s(&mut mem, "a", &bits(&a));
        let o = Options { order: Order::InOrder, trans, xnack: false };
        run(&k, &mut mem, 2, &[("out", Arg::Ptr(out)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))], &o)
            .unwrap_or_else(|e| panic!("{e}"));
        read_u32(&mem, out)
    };
    let exact = outputs(Trans::Exact);
    let one = outputs(Trans::Ulp(11));
    assert_eq!(one, outputs(Trans::Ulp(11)), "same seed, same results");
    assert_ne!(one, outputs(Trans::Ulp(12)), "another seed moves other results");
    let moved = exact.iter().zip(&one).filter(|(e, o)| e != o).count();
    assert!(moved > n / 4, "only {moved} results moved");
    assert!(exact.iter().zip(&one).all(|(e, o)| within_ulps(*e, *o, 1)), "a result moved by more than 1 ULP");
}

/// Atomics count as stores in the launch statistics, whether or not they return the old value:
/// the loads and bytes read of `atomics64` are its two plain loads (`a[i]` and the relaxed load
/// of the compare-and-swap location) whatever its fetch-and-ops and compare-and-swaps return.
#[test]
fn atomics_count_as_stores_in_the_statistics() {
    let k = kernel("atomics", "atomics64");
    let n = 64; // one active wave of the one workgroup
    let mut rng = Rng::new(3);
    let a = gen_u64(&mut rng, n);
    let mut mem = Memory::new();
    let ctr = u64s(&mut mem, "ctr", &[0; 16]);
    let ret = poison(&mut mem, "ret", 8 * n);
    let aa = u64s(&mut mem, "a", &a);
    let args = [("ctr", Arg::Ptr(ctr)), ("ret", Arg::Ptr(ret)), ("a", Arg::Ptr(aa)), ("n", Arg::U32(n as u32))];
    let ka = mem.alloc("kernarg", kernargs(&k, 1, &args));
    let o = Options { order: Order::InOrder, trans: Trans::Exact, xnack: false };
    let s = launch_with(&k, Launch { grid: [1, 1, 1], block: [256, 1, 1] }, ka, &mut mem, &o)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.vmem_load, 2, "{s:?}");
    assert_eq!(s.global_bytes_read, 2 * 8 * n as u64, "{s:?}");
    // The store of ret[i], the returning fetch_add of every lane, five single-lane fetch-and-ops
    // (LLVM combines the wave's operands on a uniform address) and at least one compare-and-swap.
    assert!(s.vmem_store >= 8, "{s:?}");
    assert!(s.global_bytes_written >= (2 * 8 * n + 5 * 8 + 8) as u64, "{s:?}");
}

// ----------------------------------------------------------------------------------------------
// Every wait state LLVM inserted is needed

/// The mutants of a kernel: for every `s_nop N` it executes, one with a wait state fewer
/// (`s_nop N-1`, or dropped when N = 0), and for every `s_waitcnt`, one with it replaced by
/// `s_nop 0` (same wait states, no waiting). (Instructions after the last `s_endpgm` are
/// alignment padding and are skipped.)
fn mutants(k: &Kernel) -> Vec<(String, Kernel)> {
    let end = k.insts.iter().rposition(|i| i.op == Op::SEndpgm).unwrap_or(k.insts.len());
    let mut out = Vec::new();
    for (idx, inst) in k.insts[..end].iter().enumerate() {
        let text = gcn_sim::decode::disassemble(inst);
        match inst.op {
            Op::SNop => {
                let mut insts = k.insts.clone();
                if inst.imm & 0xf == 0 {
                    insts.remove(idx);
                } else {
                    insts[idx].imm -= 1;
                }
                out.push((format!("+0x{:x} `{text}` one wait state short", inst.offset), k.with_insts(insts)));
            }
            Op::SWaitcnt => {
                let mut insts = k.insts.clone();
                insts[idx].op = Op::SNop;
                insts[idx].imm = 0;
                insts[idx].enc = Enc::Sopp;
                out.push((format!("+0x{:x} `{text}` removed", inst.offset), k.with_insts(insts)));
            }
            _ => {}
        }
    }
    out
}

#[test]
fn every_wait_state_llvm_inserted_is_required() {
    let s = seed("wait-state mutants");
    // XNACK on: LLVM compiles for `xnack any` and breaks soft clauses for it.
    let o = Options { order: Order::InOrder, trans: Trans::Exact, xnack: true };
    let mut missed = Vec::new();
    let mut total = 0;
    let mut done = std::collections::HashSet::new();
    for (variant, name, f) in CASES {
        if !done.insert((*variant, *name)) {
            continue;
        }
        let k = kernel(variant, name);
        // The unmodified kernel passes on these inputs.
        if let Err(e) = f(&k, &o, s, true) {
            panic!("{variant}/{name} (seed {s}) fails unmodified: {e}");
        }
        for (what, m) in mutants(&k) {
            total += 1;
            // A few inputs, so that data-dependent paths run (the first report ends it).
            let mut last = None;
            for s in [s, s ^ 1, s ^ 2] {
                match f(&m, &o, s, true) {
                    Err(Fail::Sim(SimError::Hazard { .. })) => {
                        last = None;
                        break;
                    }
                    other => last = Some(other),
                }
            }
            if let Some(other) = last {
                missed.push(format!("{variant}/{name} {what}: {other:?}"));
            }
        }
    }
    println!("{total} wait-state mutants, {} not reported", missed.len());
    assert!(missed.is_empty(), "removing these was not reported as a hazard:\n{}", missed.join("\n"));
}
