//! Hostile descriptors through the exported C functions, on the CPU backend: seeded random
//! mutations of valid calls of every op (a new seed each run, printed for replay with
//! `MHC_TEST_SEED`). Each trial changes one to three things of one call: a
//! tensor's rows, columns or row stride (negative, zero, one off, overflowing), its dtype (out
//! of range, or another valid one), its pointer (NULL, misaligned, one element on, or an output
//! aimed at another argument's memory), or the workspace (NULL, another plan's). Whatever the
//! mix, no call panics (`MHC_ERROR_INTERNAL`); a call that fails says why in
//! `mhc_last_error()` and leaves every output byte and every input byte as it was; and the
//! unmutated call still succeeds afterwards.
//!
//! Every buffer has room for one extra row and one extra column of the widest element, so a
//! mutation that turns out valid (a longer stride on a strided tensor, a pointer one element on)
//! stays inside memory the test owns. Strides large enough to leave that room but small enough
//! to fit in memory are the caller's word by contract (the C ABI cannot see a buffer's size),
//! so the test does not draw them. `MHC_TRACE_TRIALS=1` prints each trial before its call (with
//! `--nocapture`), to name the one that crashes.

use mhc::reference::testing::Rng;
use mhc_c::ffi::*;
use mhc_c::*;
use std::ffi::{c_void, CStr};

/// The plan's shape: n = 4, C = 8 (K = 32, M = 24 logits), T = 3 tokens.
const N: usize = 4;
const C: usize = 8;
const K: usize = N * C;
const M: usize = N * N + 2 * N;
const T: usize = 3;
const TRIALS_PER_OP: usize = 3000;

/// A uniform index below `n`.
fn below(rng: &mut Rng, n: usize) -> usize {
    (rng.next_u64() % n as u64) as usize
}

/// What an argument of an op is.
#[derive(Clone, Copy, PartialEq)]
enum Role {
    Input,
    Output,
}

/// One tensor argument: its shape as the op expects it and the memory behind it (8-byte words,
/// so every element type is aligned), with an extra row and column of room.
struct Slot {
    name: &'static str,
    role: Role,
    rows: usize,
    cols: usize,
    /// Activations are stored in the plan's dtype, parameters and coefficients in f32.
    activation: bool,
    mem: Vec<u64>,
}

impl Slot {
    fn new(name: &'static str, role: Role, rows: usize, cols: usize, activation: bool) -> Slot {
        let words = (rows + 1) * (cols + 1) + 2;
        Slot { name, role, rows, cols, activation, mem: vec![0; words] }
    }

    fn dtype(&self, act: i32) -> i32 {
        if self.activation {
            act
        } else {
            mhc_dtype::MHC_DTYPE_F32 as i32
        }
    }

    fn descriptor(&mut self, act: i32) -> mhc_tensor {
        let cols = self.cols as i64;
        mhc_tensor {
            data: self.mem.as_mut_ptr() as *mut c_void,
            dtype: self.dtype(act),
            rows: self.rows as i64,
            cols,
            row_stride: cols,
        }
    }

    /// Inputs: small finite values in the dtype (f32 or bf16 bits); outputs: a fill byte.
    fn fill(&mut self, act: i32, rng: &mut Rng) {
        let bf16 = self.dtype(act) == mhc_dtype::MHC_DTYPE_BF16 as i32;
        for w in self.mem.iter_mut() {
            *w = match self.role {
                Role::Output => 0xa5a5_a5a5_a5a5_a5a5,
                Role::Input if bf16 => {
                    let h = |v: f32| (v.to_bits() >> 16) as u64;
                    (0..4).fold(0, |acc, i| acc | h(0.05 + 0.4 * (rng.uniform() as f32)) << (16 * i))
                }
                Role::Input => {
                    let (a, b) = (
                        (0.05 + 0.4 * (rng.uniform() as f32)).to_bits(),
                        (0.05 + 0.4 * (rng.uniform() as f32)).to_bits(),
                    );
                    a as u64 | (b as u64) << 32
                }
            };
        }
    }
}

/// The ops, each with its argument list.
#[derive(Clone, Copy, Debug)]
enum Op {
    Pre,
    Post,
    PostPre,
    Head,
    Static,
    Expand,
}

fn slots(op: Op, gamma: bool) -> Vec<Slot> {
    use Role::*;
    let s = Slot::new;
    let pre_params = |v: &mut Vec<Slot>| {
        v.push(s("phi", Input, M, K, false));
        v.push(s("scale", Input, 1, 3, false));
        v.push(s("base", Input, 1, M, false));
        if gamma {
            v.push(s("gamma_k", Input, 1, K, false));
            v.push(s("gamma_f", Input, 1, C, false));
        }
    };
    let pre_outs = |v: &mut Vec<Slot>| {
        v.push(s("a", Output, T, C, true));
        if gamma {
            v.push(s("y", Output, T, C, true));
        }
        v.push(s("h_pre", Output, T, N, false));
        v.push(s("h_post", Output, T, N, false));
        v.push(s("h_res", Output, T, N * N, false));
        v.push(s("inv_rms", Output, T, 1, false));
    };
    let mut v = vec![];
    match op {
        Op::Pre => {
            v.push(s("x", Input, T, K, true));
            pre_params(&mut v);
            pre_outs(&mut v);
        }
        Op::Post => {
            v.push(s("x", Input, T, K, true));
            v.push(s("f", Input, T, C, true));
            v.push(s("h_post", Input, T, N, false));
            v.push(s("h_res", Input, T, N * N, false));
            v.push(s("out", Output, T, K, true));
        }
        Op::PostPre => {
            v.push(s("x", Input, T, K, true));
            v.push(s("f", Input, T, C, true));
            v.push(s("h_post_in", Input, T, N, false));
            v.push(s("h_res_in", Input, T, N * N, false));
            v.push(s("x_out", Output, T, K, true));
            pre_params(&mut v);
            pre_outs(&mut v);
        }
        Op::Head => {
            v.push(s("x", Input, T, K, true));
            v.push(s("phi", Input, N, K, false));
            v.push(s("scale", Input, 1, 1, false));
            v.push(s("base", Input, 1, N, false));
            v.push(s("out", Output, T, C, true));
        }
        Op::Static => {
            v.push(s("x", Input, T, K, true));
            v.push(s("h_pre_logits", Input, 1, N, false));
            v.push(s("h_post_logits", Input, 1, N, false));
            v.push(s("h_res_logits", Input, N, N, false));
            v.push(s("gamma", Input, 1, C, false));
            v.push(s("out", Output, T, K, true));
        }
        Op::Expand => {
            v.push(s("e", Input, T, C, true));
            v.push(s("out", Output, T, K, true));
        }
    }
    v
}

/// One plan with its workspace, and a second plan's workspace to hand it by mistake.
struct Env {
    device: *mut mhc_device,
    plan: *mut mhc_plan,
    ws: *mut mhc_workspace,
    other_plan: *mut mhc_plan,
    other_ws: *mut mhc_workspace,
    act: i32,
    gamma: bool,
}

fn ok(status: mhc_status, what: &str) {
    assert_eq!(status, mhc_status::MHC_SUCCESS, "{what}: {}", last_error());
}

fn last_error() -> String {
    // SAFETY: the library returns a NUL-terminated string that lives until the thread's next call.
    unsafe { CStr::from_ptr(mhc_last_error()) }.to_string_lossy().into_owned()
}

impl Env {
    fn new(act: mhc_dtype, gamma: bool) -> Env {
        let mut cfg = api::default_config(N as u32, C as u32);
        cfg.gamma_k = gamma as u8;
        cfg.gamma_f = gamma as u8;
        let (mut device, mut plan, mut ws) = (std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null_mut());
        let (mut other_plan, mut other_ws) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: every out-pointer is a local; the handles are destroyed in `drop`.
        unsafe {
            ok(mhc_device_create(mhc_backend::MHC_BACKEND_CPU as i32, 0, &mut device), "device");
            ok(mhc_plan_create(device, &cfg, act as i32, 16, &mut plan), "plan");
            ok(mhc_workspace_create(plan, &mut ws), "workspace");
            ok(mhc_plan_create(device, &cfg, act as i32, 16, &mut other_plan), "second plan");
            ok(mhc_workspace_create(other_plan, &mut other_ws), "second workspace");
        }
        Env { device, plan, ws, other_plan, other_ws, act: act as i32, gamma }
    }

    /// Calls `op` with descriptors `d` (in the order of [`slots`]) and workspace `ws`.
    ///
    /// # Safety
    /// Every descriptor the library accepts spans memory of its slot.
    unsafe fn call(&self, op: Op, d: &[mhc_tensor], ws: *const mhc_workspace) -> mhc_status {
        let stream = std::ptr::null_mut();
        let none = mhc_tensor::NONE;
        let g = self.gamma;
        let params = |i: usize| mhc_pre_params {
            phi: d[i],
            scale: d[i + 1],
            base: d[i + 2],
            gamma_k: if g { d[i + 3] } else { none },
            gamma_f: if g { d[i + 4] } else { none },
        };
        let outs = |i: usize| {
            let y = if g { d[i + 1] } else { none };
            let j = i + 1 + g as usize;
            mhc_pre_outputs { a: d[i], y, h_pre: d[j], h_post: d[j + 1], h_res: d[j + 2], inv_rms: d[j + 3] }
        };
        let np = if g { 5 } else { 3 };
        // SAFETY: the caller's contract.
        unsafe {
            match op {
                Op::Pre => mhc_pre(self.plan, ws, stream, &d[0], &params(1), &outs(1 + np)),
                Op::Post => mhc_post(self.plan, stream, &d[0], &d[1], &d[2], &d[3], &d[4]),
                Op::PostPre => {
                    let post = mhc_post_inputs { f: d[1], h_post: d[2], h_res: d[3] };
                    mhc_post_pre(self.plan, ws, stream, &d[0], &post, &d[4], &params(5), &outs(5 + np))
                }
                Op::Head => mhc_head(self.plan, ws, stream, &d[0], &d[1], &d[2], &d[3], &d[4]),
                Op::Static => {
                    let p =
                        mhc_static_params { h_pre_logits: d[1], h_post_logits: d[2], h_res_logits: d[3], gamma: d[4] };
                    mhc_static_layer(self.plan, ws, stream, &d[0], &p, &d[5])
                }
                Op::Expand => mhc_expand(self.plan, stream, &d[0], &d[1]),
            }
        }
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // SAFETY: the handles were made in `new` and are destroyed once, workspaces first.
        unsafe {
            mhc_workspace_destroy(self.ws);
            mhc_workspace_destroy(self.other_ws);
            mhc_plan_destroy(self.plan);
            mhc_plan_destroy(self.other_plan);
            mhc_device_destroy(self.device);
        }
    }
}

/// Applies one random mutation to the descriptors (or the workspace); returns what it did.
fn mutate(rng: &mut Rng, slots: &[Slot], d: &mut [mhc_tensor], ws: &mut usize) -> String {
    let i = below(rng, d.len());
    let (name, cols) = (slots[i].name, slots[i].cols as i64);
    let t = &mut d[i];
    let pick = |rng: &mut Rng, v: &[i64]| v[below(rng, v.len())];
    match below(rng, 7) {
        0 => {
            let v = pick(rng, &[-1, i64::MIN, 0, t.rows.wrapping_sub(1), t.rows.wrapping_add(1), i64::MAX, 1 << 62]);
            t.rows = v;
            format!("{name}.rows = {v}")
        }
        1 => {
            let v = pick(rng, &[-1, i64::MIN, 0, cols - 1, cols + 1, i64::MAX, 1 << 62]);
            t.cols = v;
            format!("{name}.cols = {v}")
        }
        2 => {
            // No stride between cols + 1 and one that overflows: see the module doc.
            let v = pick(rng, &[-1, i64::MIN, 0, cols - 1, cols + 1, i64::MAX, i64::MAX / 2, 1 << 62]);
            t.row_stride = v;
            format!("{name}.row_stride = {v}")
        }
        3 => {
            let v = pick(rng, &[-1, 3, 99, i32::MIN as i64, 0, 1, 2]) as i32;
            let v = if v == t.dtype { 99 } else { v };
            t.dtype = v;
            format!("{name}.dtype = {v}")
        }
        4 => {
            // From the slot's own memory, whatever an earlier mutation left in the descriptor.
            let base = slots[i].mem.as_ptr() as *mut u8;
            let (p, what) = match below(rng, 3) {
                0 => (std::ptr::null_mut(), "NULL"),
                1 => (base.wrapping_add(1) as *mut c_void, "misaligned by a byte"),
                _ => (base.wrapping_add(8) as *mut c_void, "one word on"),
            };
            t.data = p;
            format!("{name}.data {what}")
        }
        5 => {
            // An output aimed at another argument's memory: always an overlap.
            let outs: Vec<usize> = (0..slots.len()).filter(|&j| slots[j].role == Role::Output).collect();
            let o = outs[below(rng, outs.len())];
            let other = (o + 1 + below(rng, slots.len() - 1)) % slots.len();
            d[o].data = d[other].data;
            format!("{} aimed at {}", slots[o].name, slots[other].name)
        }
        _ => {
            *ws = 1 + below(rng, 2);
            ["", "workspace NULL", "another plan's workspace"][*ws].to_string()
        }
    }
}

fn hostile_trials(act: mhc_dtype, gamma: bool, seed: u64) {
    let env = Env::new(act, gamma);
    let mut rng = Rng::new(seed);
    let (mut accepted, mut refused) = (0usize, 0usize);
    for op in [Op::Pre, Op::Post, Op::PostPre, Op::Head, Op::Static, Op::Expand] {
        let mut slots = slots(op, gamma);
        for trial in 0..TRIALS_PER_OP {
            for s in slots.iter_mut() {
                s.fill(env.act, &mut rng);
            }
            let mut d: Vec<mhc_tensor> = slots.iter_mut().map(|s| s.descriptor(env.act)).collect();
            // Every 50th trial: the call as it should be, which must succeed.
            let mut ws = 0usize;
            let changes: Vec<String> = if trial % 50 == 0 {
                vec![]
            } else {
                (0..1 + below(&mut rng, 3)).map(|_| mutate(&mut rng, &slots, &mut d, &mut ws)).collect()
            };
            let ws_ptr = [env.ws, std::ptr::null_mut(), env.other_ws][ws];
            let before: Vec<Vec<u64>> = slots.iter().map(|s| s.mem.clone()).collect();
            if std::env::var_os("MHC_TRACE_TRIALS").is_some() {
                eprintln!("{op:?} {trial} {changes:?}");
            }
            // SAFETY: every descriptor points into its slot's memory with room for an extra
            // row and column, or is one the library must refuse (module doc).
            let status = unsafe { env.call(op, &d, ws_ptr) };
            let what = format!("{op:?} (trial {trial}, {:?} gamma={gamma}): {changes:?}", act);
            assert_ne!(status, mhc_status::MHC_ERROR_INTERNAL, "{what} panicked: {}", last_error());
            if changes.is_empty() {
                ok(status, &what);
            }
            if status == mhc_status::MHC_SUCCESS {
                accepted += 1;
                continue;
            }
            refused += 1;
            assert!(!last_error().is_empty(), "{what}: failed ({status:?}) without a message");
            for (s, b) in slots.iter().zip(&before) {
                assert!(s.mem == *b, "{what}: failed ({status:?}: {}) but changed {}", last_error(), s.name);
            }
        }
    }
    eprintln!("{act:?} gamma={gamma}: {refused} calls refused, {accepted} accepted");
    // The mutations must mostly be refused, and the unmutated calls accepted.
    assert!(refused > accepted, "refused {refused}, accepted {accepted}");
    assert!(accepted >= 6 * TRIALS_PER_OP / 50, "accepted {accepted}");
}

#[test]
fn hostile_descriptors_never_panic_and_never_write_on_failure_f32() {
    hostile_trials(mhc_dtype::MHC_DTYPE_F32, false, Rng::test_seed("c-abi-hostile-f32"));
}

#[test]
fn hostile_descriptors_never_panic_and_never_write_on_failure_bf16_with_gammas() {
    hostile_trials(mhc_dtype::MHC_DTYPE_BF16, true, Rng::test_seed("c-abi-hostile-bf16"));
}

/// `mhc_plan_set_overlap` takes the three `mhc_overlap` values (a CPU plan has no dependent
/// launch and keeps working), and refuses any other value and a NULL plan with
/// `MHC_ERROR_INVALID_ARGUMENT` and a message.
#[test]
fn plan_overlap_values() {
    let env = Env::new(mhc_dtype::MHC_DTYPE_F32, false);
    // SAFETY: `env.plan` is a live plan no other thread uses.
    unsafe {
        for o in [mhc_overlap::MHC_OVERLAP_OFF, mhc_overlap::MHC_OVERLAP_LAUNCH, mhc_overlap::MHC_OVERLAP_WEIGHTS] {
            ok(mhc_plan_set_overlap(env.plan, o as i32), "a valid overlap");
        }
        for bad in [-1, 3, i32::MAX] {
            assert_eq!(mhc_plan_set_overlap(env.plan, bad), mhc_status::MHC_ERROR_INVALID_ARGUMENT, "overlap {bad}");
            assert!(last_error().contains("MHC_OVERLAP_OFF"), "{}", last_error());
        }
        assert_eq!(mhc_plan_set_overlap(std::ptr::null_mut(), 1), mhc_status::MHC_ERROR_INVALID_ARGUMENT);
        assert!(mhc_plan_supports(env.plan, mhc_stage::MHC_STAGE_PRE as i32) == mhc_status::MHC_SUCCESS);
    }
}

/// `mhc_plan_create_tuned` with NULL is `mhc_plan_create`; a table for a plan whose kernels no
/// table steers (the CPU reference) is `MHC_ERROR_UNSUPPORTED` with a message and no handle;
/// NULL handles are refused as for `mhc_plan_create`.
#[test]
fn plan_create_tuned_arguments() {
    let env = Env::new(mhc_dtype::MHC_DTYPE_F32, false);
    let cfg = api::default_config(N as u32, C as u32);
    let table = c"/nonexistent/sm_90a.toml";
    // SAFETY: every out-pointer is a local; the plans made are destroyed here.
    unsafe {
        let mut plan = std::ptr::null_mut();
        ok(
            mhc_plan_create_tuned(env.device, &cfg, mhc_dtype::MHC_DTYPE_F32 as i32, 16, std::ptr::null(), &mut plan),
            "NULL",
        );
        assert!(!plan.is_null());
        mhc_plan_destroy(plan);
        let mut plan = std::ptr::dangling_mut::<mhc_plan>();
        let status =
            mhc_plan_create_tuned(env.device, &cfg, mhc_dtype::MHC_DTYPE_F32 as i32, 16, table.as_ptr(), &mut plan);
        assert_eq!(status, mhc_status::MHC_ERROR_UNSUPPORTED);
        assert!(plan.is_null(), "no handle on failure");
        assert!(last_error().contains("CUDA plans"), "{}", last_error());
        let status = mhc_plan_create_tuned(
            std::ptr::null(),
            &cfg,
            mhc_dtype::MHC_DTYPE_F32 as i32,
            16,
            table.as_ptr(),
            &mut plan,
        );
        assert_eq!(status, mhc_status::MHC_ERROR_INVALID_ARGUMENT);
        let status = mhc_plan_create_tuned(
            env.device,
            &cfg,
            mhc_dtype::MHC_DTYPE_F32 as i32,
            16,
            table.as_ptr(),
            std::ptr::null_mut(),
        );
        assert_eq!(status, mhc_status::MHC_ERROR_INVALID_ARGUMENT);
    }
}

/// `mhc_plan_tuning_warnings` of a CPU plan is the empty string: `*needed` 1 with or without a
/// buffer; a NULL buffer with a length, a NULL plan or a NULL `needed` is refused.
#[test]
fn plan_tuning_warnings_arguments() {
    let env = Env::new(mhc_dtype::MHC_DTYPE_F32, false);
    // SAFETY: the buffers are locals of the stated lengths.
    unsafe {
        let mut needed = 0usize;
        ok(mhc_plan_tuning_warnings(env.plan, std::ptr::null_mut(), 0, &mut needed), "size query");
        assert_eq!(needed, 1);
        let mut buf = [b'x' as std::ffi::c_char; 8];
        ok(mhc_plan_tuning_warnings(env.plan, buf.as_mut_ptr(), buf.len(), &mut needed), "into a buffer");
        assert_eq!((needed, buf[0]), (1, 0));
        let null = std::ptr::null_mut();
        assert_eq!(mhc_plan_tuning_warnings(env.plan, null, 8, &mut needed), mhc_status::MHC_ERROR_INVALID_ARGUMENT);
        assert_eq!(
            mhc_plan_tuning_warnings(std::ptr::null(), null, 0, &mut needed),
            mhc_status::MHC_ERROR_INVALID_ARGUMENT
        );
        assert_eq!(
            mhc_plan_tuning_warnings(env.plan, null, 0, std::ptr::null_mut()),
            mhc_status::MHC_ERROR_INVALID_ARGUMENT
        );
    }
}
