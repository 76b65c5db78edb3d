//! The host-array seam between the `mhc` command (and tests) and every device: a stage takes
//! named dense arrays and returns named dense arrays. The CPU reference ([`CpuRunner`]), the
//! CUDA device, the HIP device and the GCN simulator each implement [`StageRunner`]; `mhc run`
//! only talks to this trait. Names and shapes are the ones of `mhc run --help`, listed
//! once in [`signature`].

use crate::config::{Config, Dtype, Stage};
use crate::error::{Error, Result};
use crate::reference::{self, param_dtype};
use crate::tensor::{HostData, HostDataMut, HostTensor, HostTensorMut, Layout};
use half::bf16;
use std::collections::BTreeMap;
use std::fmt;

/// A dense row-major host array. Values are carried as f64; a device stores them in the
/// requested dtype (rounding activations once) before computing.
#[derive(Debug, Clone, PartialEq)]
pub struct Array {
    /// The dimensions, outermost first.
    pub shape: Vec<usize>,
    /// The values in row-major order: as many as the product of `shape`.
    pub data: Vec<f64>,
}

impl Array {
    /// The array of `shape` holding `data` (whose length must be the product of `shape`;
    /// checked in debug builds).
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Self {
        debug_assert_eq!(numel(&shape), Some(data.len()));
        Array { shape, data }
    }
}

/// The number of elements of `shape`, or `None` when the product overflows `usize`.
pub fn numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
}

/// Largest number of f64 values one array may hold: its bytes must not exceed `isize::MAX`,
/// the most any allocation can have.
pub const MAX_VALUES: usize = isize::MAX as usize / 8;

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

/// How a tensor is stored for a given `--dtype`: activations (`x`, `f`, `e`, `a`, `y`, `out` and
/// their gradients) in the dtype itself; parameters and coefficients in f32, or f64 when the
/// dtype is f64 (docs/math.md: never bf16).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// Stored in the requested dtype (`x`, `f`, `e`, `a`, `y`, `out` and their gradients).
    Activation,
    /// Stored in f32, or f64 next to f64 activations (parameters, coefficients and their
    /// gradients).
    Parameter,
}

impl Class {
    /// The storage type of this class next to activations stored as `dtype`.
    pub const fn storage(self, dtype: Dtype) -> Dtype {
        match self {
            Class::Activation => dtype,
            Class::Parameter => param_dtype(dtype),
        }
    }
}

/// One named input or output of a stage.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Port {
    /// The array's name in [`Named`] (and on the `mhc run` command line).
    pub name: &'static str,
    /// The leading dimension is the token count T (inferred from the first token input).
    pub tokens: bool,
    /// The other dimensions, each with the symbol it stands for (`n`, `C`, `M`, `n*C`, or ""
    /// for a constant).
    pub dims: Vec<(&'static str, usize)>,
    /// How it is stored for a given `--dtype`.
    pub class: Class,
    /// An optional input may be absent; an optional output is written only when the inputs that
    /// imply it are present.
    pub optional: bool,
}

impl Port {
    /// The full shape for `t` tokens.
    pub fn shape(&self, t: usize) -> Vec<usize> {
        let mut s = Vec::with_capacity(self.dims.len() + 1);
        if self.tokens {
            s.push(t);
        }
        s.extend(self.dims.iter().map(|d| d.1));
        s
    }
    /// Elements per token row (or in all, without a token dimension); saturates at
    /// `usize::MAX` (a row no buffer holds) for a configuration `Config::validate` refuses.
    pub fn row_len(&self) -> usize {
        self.dims.iter().try_fold(1usize, |acc, d| acc.checked_mul(d.1)).unwrap_or(usize::MAX)
    }
    /// Every gradient port is named `d<name>` and no other port starts with `d`.
    pub fn is_gradient(&self) -> bool {
        self.name.starts_with('d')
    }
    /// Whether runners refuse a NaN or infinity in this input ([`check_finite`]): parameters and
    /// the coefficients a stage reads, not activations, not gradients.
    pub fn must_be_finite(&self) -> bool {
        self.class == Class::Parameter && !self.is_gradient()
    }
    /// The shape with its symbols: `[T, n=4, C=64]`.
    pub fn pattern(&self) -> String {
        let mut parts = Vec::new();
        if self.tokens {
            parts.push("T".to_string());
        }
        for &(sym, v) in &self.dims {
            parts.push(if sym.is_empty() { v.to_string() } else { format!("{sym}={v}") });
        }
        format!("[{}]", parts.join(", "))
    }
}

/// The inputs and outputs of a stage for a configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signature {
    /// The stage.
    pub stage: Stage,
    /// The arrays it reads.
    pub inputs: Vec<Port>,
    /// The arrays it writes.
    pub outputs: Vec<Port>,
}

/// `[a, b, ...]`.
pub fn shape_text(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |ports: &[Port]| {
            ports
                .iter()
                .map(|p| format!("{}{}{}", p.name, p.pattern(), if p.optional { "?" } else { "" }))
                .collect::<Vec<_>>()
                .join(" ")
        };
        write!(f, "{}: in {}; out {}", self.stage, list(&self.inputs), list(&self.outputs))
    }
}

impl Signature {
    /// The input named `name`, if the stage has one.
    pub fn input(&self, name: &str) -> Option<&Port> {
        self.inputs.iter().find(|p| p.name == name)
    }

    /// Checks `inputs` against the signature: no unknown names, every required input present,
    /// every shape as listed (T taken from the first token input present). Returns T.
    pub fn check(&self, inputs: &Named) -> Result<usize> {
        for name in inputs.keys() {
            if self.input(name).is_none() {
                let names: Vec<&str> = self.inputs.iter().map(|p| p.name).collect();
                return Err(Error::shape(
                    "inputs",
                    format!("names of stage {}: {}", self.stage, names.join(", ")),
                    format!("an input named {name:?}"),
                ));
            }
        }
        for p in &self.inputs {
            if !p.optional && !inputs.contains_key(p.name) {
                return Err(Error::shape(p.name, p.pattern(), "missing"));
            }
        }
        let mut t = None;
        for p in &self.inputs {
            let Some(a) = inputs.get(p.name) else { continue };
            if p.tokens && t.is_none() {
                if a.shape.len() != p.dims.len() + 1 {
                    return Err(Error::shape(p.name, p.pattern(), shape_text(&a.shape)));
                }
                t = Some(a.shape[0]);
            }
            let want = p.shape(t.unwrap_or(0));
            if a.shape != want {
                return Err(Error::shape(
                    p.name,
                    format!("{} = {}", p.pattern(), shape_text(&want)),
                    shape_text(&a.shape),
                ));
            }
            let Some(count) = numel(&want) else {
                return Err(Error::shape(p.name, "a shape whose element count fits in memory", shape_text(&want)));
            };
            if a.data.len() != count {
                return Err(Error::shape(
                    p.name,
                    format!("{count} values for shape {}", shape_text(&want)),
                    format!("{} values", a.data.len()),
                ));
            }
        }
        Ok(t.unwrap_or(0))
    }
}

/// The non-finite policy every runner applies (see [`Config`]'s docs): the inputs that
/// [`Port::must_be_finite`] names (parameters, and the coefficients a stage reads) must hold
/// no NaN or infinity; activations and gradients are not scanned, so a non-finite value there
/// propagates to the outputs it reaches. `index` in the error is the flat index in the array.
pub fn check_finite(sig: &Signature, inputs: &Named) -> Result<()> {
    for p in sig.inputs.iter().filter(|p| p.must_be_finite()) {
        if let Some(index) = inputs.get(p.name).and_then(|a| a.data.iter().position(|v| !v.is_finite())) {
            return Err(Error::NonFinite { tensor: p.name, index });
        }
    }
    Ok(())
}

/// Does the stage take `pre`'s parameters (and so the optional `gamma_k`/`gamma_f`)?
fn has_pre_params(stage: Stage) -> bool {
    matches!(stage, Stage::Pre | Stage::PostPre | Stage::PreBackward)
}

/// `cfg` with `gamma_k`/`gamma_f` also set when those inputs are present (`present(name)`), for
/// the stages that take them: the optional pre-norms are switched on by supplying them.
pub fn resolve_config(stage: Stage, cfg: &Config, present: impl Fn(&str) -> bool) -> Config {
    let mut cfg = *cfg;
    if has_pre_params(stage) {
        cfg.gamma_k |= present("gamma_k");
        cfg.gamma_f |= present("gamma_f");
    }
    cfg
}

/// Seeded random inputs of every required port of `stage` for `t` tokens (the optional weights
/// exactly when `cfg` asks for them), drawn from docs/math.md's test distributions: activations
/// N(0, 1), `phi` `phi_std` N(0, 1), `scale` U(0.01, 1), `base` 0.1 N(0, 1), weights
/// 1 + 0.1 N(0, 1); coefficients as `pre` makes them (`h_post` = 2 sigma(z) in (0, 2), `h_res`
/// rows of positive entries summing to 1); static-layer logits 0.5 N(0, 1). The ports are
/// drawn in signature order, so a seed gives the same inputs everywhere (`mhc example`, tests).
///
/// # Panics
/// When the arrays cannot be held in memory; [`try_random_inputs`] returns that as an error.
pub fn random_inputs(stage: Stage, cfg: &Config, t: usize, phi_std: f64, rng: &mut reference::testing::Rng) -> Named {
    try_random_inputs(stage, cfg, t, phi_std, rng).unwrap_or_else(|e| panic!("{e}"))
}

/// [`random_inputs`], with every size computed with checked arithmetic: an array whose
/// element count overflows, whose bytes exceed `isize::MAX`, or that cannot be allocated is an
/// `Err` naming it, before any value is drawn.
pub fn try_random_inputs(
    stage: Stage,
    cfg: &Config,
    t: usize,
    phi_std: f64,
    rng: &mut reference::testing::Rng,
) -> Result<Named> {
    let ports: Vec<Port> = signature(stage, cfg).inputs.into_iter().filter(|p| !p.optional).collect();
    let mut sizes = Vec::with_capacity(ports.len());
    let mut total = 0usize;
    for port in &ports {
        let shape = port.shape(t);
        let too_big = || {
            Error::shape(
                port.name,
                format!("at most {MAX_VALUES} values in all (8 bytes each must fit in memory)"),
                format!("shape {}", shape_text(&shape)),
            )
        };
        let len = numel(&shape).filter(|&l| l <= MAX_VALUES).ok_or_else(too_big)?;
        total = total.checked_add(len).filter(|&s| s <= MAX_VALUES).ok_or_else(too_big)?;
        sizes.push((shape, len));
    }
    let mut out = Named::new();
    for (port, (shape, len)) in ports.iter().zip(sizes) {
        let mut data = Vec::new();
        data.try_reserve_exact(len)
            .map_err(|_| Error::shape(port.name, "an array this machine can allocate", format!("{} bytes", len * 8)))?;
        let row = port.dims.last().map_or(1, |d| d.1).max(1);
        draw(port.name, len, row, phi_std, rng, &mut data);
        out.insert(port.name.to_string(), Array::new(shape, data));
    }
    Ok(out)
}

/// Appends `len` values of the input `name` to `data` (reserved by the caller), as
/// [`random_inputs`] documents them (`row`: its last dimension, the rows `h_res` normalizes).
fn draw(name: &str, len: usize, row: usize, phi_std: f64, rng: &mut reference::testing::Rng, data: &mut Vec<f64>) {
    let mut values = (0..len).map(|_| match name {
        "phi" => phi_std * rng.normal(),
        "scale" => rng.range(0.01, 1.0),
        "base" => 0.1 * rng.normal(),
        "gamma_k" | "gamma_f" | "gamma" => 1.0 + 0.1 * rng.normal(),
        "h_post" => 2.0 / (1.0 + (-rng.normal()).exp()),
        "h_res" => rng.range(0.05, 1.0),
        "logits" => 0.5 * rng.normal(),
        _ => rng.normal(),
    });
    data.extend(&mut values);
    if name == "h_res" {
        for r in data.chunks_mut(row) {
            let s: f64 = r.iter().sum();
            r.iter_mut().for_each(|e| *e /= s);
        }
    }
}

/// The inputs and outputs of `stage` for `cfg`, with the names of `mhc run --help`. `gamma_k`
/// and `gamma_f` are required when the configuration sets them, optional otherwise (see
/// [`resolve_config`]); with `gamma_f`, `pre` also writes `y` and `pre-backward` takes `dy`
/// (`da` becoming optional).
pub fn signature(stage: Stage, cfg: &Config) -> Signature {
    use Class::{Activation as A, Parameter as P};
    let (n, c, k, m) = (cfg.n, cfg.c, cfg.k(), cfg.m());
    let port = |name, tokens, dims: &[(&'static str, usize)], class, optional| Port {
        name,
        tokens,
        dims: dims.to_vec(),
        class,
        optional,
    };
    let x = |name| port(name, true, &[("n", n), ("C", c)], A, false);
    let row = |name, class| port(name, true, &[("C", c)], class, false);
    let per_stream = |name| port(name, true, &[("n", n)], P, false);
    let per_pair = |name| port(name, true, &[("n", n), ("n", n)], P, false);
    let pre_params = || {
        vec![
            port("phi", false, &[("M", m), ("n*C", k)], P, false),
            port("scale", false, &[("", 3)], P, false),
            port("base", false, &[("M", m)], P, false),
            port("gamma_k", false, &[("n*C", k)], P, !cfg.gamma_k),
            port("gamma_f", false, &[("C", c)], P, !cfg.gamma_f),
        ]
    };
    let pre_outputs = || {
        let mut v = vec![row("a", A)];
        if cfg.gamma_f {
            v.push(row("y", A));
        }
        v.extend([per_stream("h_pre"), per_stream("h_post"), per_pair("h_res"), port("inv_rms", true, &[], P, false)]);
        v
    };
    let post_inputs = || vec![x("x"), row("f", A), per_stream("h_post"), per_pair("h_res")];
    let head_params = || {
        vec![
            port("phi", false, &[("n", n), ("n*C", k)], P, false),
            port("scale", false, &[("", 1)], P, false),
            port("base", false, &[("n", n)], P, false),
        ]
    };
    let static_params = || {
        vec![
            port("h_pre_logits", false, &[("n", n)], P, false),
            port("h_post_logits", false, &[("n", n)], P, false),
            port("h_res_logits", false, &[("n", n), ("n", n)], P, false),
            port("gamma", false, &[("C", c)], P, false),
        ]
    };
    // The gradient of every input, named d<input>, same shape and class.
    let grads_of = |ins: &[Port]| -> Vec<Port> {
        ins.iter()
            .filter(|p| !p.optional)
            .map(|p| Port { name: grad_name(p.name), optional: false, ..p.clone() })
            .collect()
    };
    let (inputs, outputs) = match stage {
        Stage::Pre => {
            let mut i = vec![x("x")];
            i.extend(pre_params());
            (i, pre_outputs())
        }
        Stage::Post => (post_inputs(), vec![x("out")]),
        Stage::PostPre => {
            let mut i = post_inputs();
            i.extend(pre_params());
            let mut o = vec![x("out")];
            o.extend(pre_outputs());
            (i, o)
        }
        Stage::Head => {
            let mut i = vec![x("x")];
            i.extend(head_params());
            (i, vec![row("out", A)])
        }
        Stage::Expand => (vec![row("e", A)], vec![x("x")]),
        Stage::Static => {
            let mut i = vec![x("x")];
            i.extend(static_params());
            (i, vec![x("out")])
        }
        Stage::Sinkhorn => (vec![per_pair("logits")], vec![per_pair("h_res")]),
        Stage::PreBackward => {
            let mut fwd = vec![x("x")];
            fwd.extend(pre_params());
            let o = grads_of(&fwd);
            let mut i = fwd;
            i.push(port("da", true, &[("C", c)], A, cfg.gamma_f));
            if cfg.gamma_f {
                i.push(row("dy", A));
            }
            i.push(port("dh_pre", true, &[("n", n)], P, true));
            i.extend([per_stream("dh_post"), per_pair("dh_res"), port("dinv_rms", true, &[], P, true)]);
            (i, o)
        }
        Stage::PostBackward => {
            let fwd = post_inputs();
            let o = grads_of(&fwd);
            let mut i = fwd;
            i.push(x("dout"));
            (i, o)
        }
        Stage::HeadBackward => {
            let mut fwd = vec![x("x")];
            fwd.extend(head_params());
            let o = grads_of(&fwd);
            let mut i = fwd;
            i.push(row("dout", A));
            (i, o)
        }
        Stage::StaticBackward => {
            let mut fwd = vec![x("x")];
            fwd.extend(static_params());
            let o = grads_of(&fwd);
            let mut i = fwd;
            i.push(x("dout"));
            (i, o)
        }
    };
    Signature { stage, inputs, outputs }
}

/// `d` + the input's name, as a static string.
fn grad_name(name: &str) -> &'static str {
    const NAMES: [&str; 15] = [
        "dx",
        "df",
        "dh_post",
        "dh_res",
        "dphi",
        "dscale",
        "dbase",
        "dgamma_k",
        "dgamma_f",
        "dh_pre_logits",
        "dh_post_logits",
        "dh_res_logits",
        "dgamma",
        "de",
        "dlogits",
    ];
    NAMES.iter().copied().find(|g| &g[1..] == name).unwrap_or("d")
}

/// Host storage of one tensor in its storage type.
#[derive(Debug, Clone)]
enum Store {
    F32(Vec<f32>),
    Bf16(Vec<bf16>),
    F64(Vec<f64>),
}

impl Store {
    /// `values` rounded once to `dtype`.
    fn from_f64(dtype: Dtype, values: &[f64]) -> Self {
        match dtype {
            Dtype::F32 => Store::F32(values.iter().map(|&v| v as f32).collect()),
            Dtype::Bf16 => Store::Bf16(values.iter().map(|&v| crate::bf16_nearest(v)).collect()),
            Dtype::F64 => Store::F64(values.to_vec()),
        }
    }
    /// `len` NaNs: an element a stage fails to write shows up in every comparison.
    fn poisoned(dtype: Dtype, len: usize) -> Self {
        Store::from_f64(dtype, &vec![f64::NAN; len])
    }
    fn data(&self) -> HostData<'_> {
        match self {
            Store::F32(v) => HostData::F32(v),
            Store::Bf16(v) => HostData::Bf16(v),
            Store::F64(v) => HostData::F64(v),
        }
    }
    fn data_mut(&mut self) -> HostDataMut<'_> {
        match self {
            Store::F32(v) => HostDataMut::F32(v),
            Store::Bf16(v) => HostDataMut::Bf16(v),
            Store::F64(v) => HostDataMut::F64(v),
        }
    }
    fn to_f64(&self) -> Vec<f64> {
        let d = self.data();
        (0..d.len()).map(|i| d.get(i)).collect()
    }
}

/// The inputs of one call, stored in their storage types.
struct Inputs {
    t: usize,
    stores: BTreeMap<&'static str, (Store, usize)>,
}

impl Inputs {
    fn new(sig: &Signature, dtype: Dtype, inputs: &Named, t: usize) -> Self {
        let mut stores = BTreeMap::new();
        for p in &sig.inputs {
            if let Some(a) = inputs.get(p.name) {
                stores.insert(p.name, (Store::from_f64(p.class.storage(dtype), &a.data), p.row_len()));
            }
        }
        Inputs { t, stores }
    }
    /// A required input (the signature check guarantees presence) as T dense rows.
    fn t(&self, name: &str) -> HostTensor<'_> {
        self.opt_t(name).expect("checked by the signature")
    }
    fn opt_t(&self, name: &str) -> Option<HostTensor<'_>> {
        self.stores.get(name).map(|(s, row)| HostTensor::new(s.data(), Layout::dense(self.t, *row)))
    }
    fn d(&self, name: &str) -> HostData<'_> {
        self.opt_d(name).expect("checked by the signature")
    }
    fn opt_d(&self, name: &str) -> Option<HostData<'_>> {
        self.stores.get(name).map(|(s, _)| s.data())
    }
}

/// The outputs of one call, allocated (poisoned) from the signature.
struct Outputs {
    t: usize,
    stores: BTreeMap<&'static str, (Store, Port)>,
}

impl Outputs {
    fn new(sig: &Signature, dtype: Dtype, t: usize) -> Result<Self> {
        let mut stores = BTreeMap::new();
        for p in &sig.outputs {
            let shape = p.shape(t);
            let len = numel(&shape).filter(|&l| l <= MAX_VALUES).ok_or_else(|| {
                Error::shape(p.name, "an output whose element count fits in memory", shape_text(&shape))
            })?;
            stores.insert(p.name, (Store::poisoned(p.class.storage(dtype), len), p.clone()));
        }
        Ok(Outputs { t, stores })
    }
    /// Takes the stores of `names` out, to be lent mutably all at once.
    fn take<const N: usize>(&mut self, names: [&'static str; N]) -> [Option<(Store, Port)>; N] {
        names.map(|n| self.stores.remove(n))
    }
    fn put<const N: usize>(&mut self, taken: [Option<(Store, Port)>; N]) {
        for (s, p) in taken.into_iter().flatten() {
            self.stores.insert(p.name, (s, p));
        }
    }
    fn into_named(self) -> Named {
        let t = self.t;
        self.stores.into_iter().map(|(name, (s, p))| (name.to_string(), Array::new(p.shape(t), s.to_f64()))).collect()
    }
}

/// A taken output as T dense rows.
fn tm(t: usize, o: &mut Option<(Store, Port)>) -> Option<HostTensorMut<'_>> {
    o.as_mut().map(|(s, p)| {
        let row = p.row_len();
        HostTensorMut::new(s.data_mut(), Layout::dense(t, row))
    })
}

/// A taken parameter-shaped output.
fn dm(o: &mut Option<(Store, Port)>) -> Option<HostDataMut<'_>> {
    o.as_mut().map(|(s, _)| s.data_mut())
}

fn need<T>(v: Option<T>) -> T {
    v.expect("allocated from the signature")
}

/// The CPU reference as a device: stores the inputs in the requested dtype (bf16 rounds the
/// activations once; parameters and coefficients stay f32, or f64 with `--dtype f64`), computes
/// in f64 arithmetic with [`crate::reference`], and stores the outputs the same way.
#[derive(Debug, Clone, Copy, Default)]
pub struct CpuRunner;

impl StageRunner for CpuRunner {
    fn name(&self) -> String {
        "cpu (f64 reference)".into()
    }

    fn run(&self, stage: Stage, cfg: &Config, dtype: Dtype, inputs: &Named) -> Result<Named> {
        let cfg = resolve_config(stage, cfg, |name| inputs.contains_key(name));
        cfg.validate()?;
        let sig = signature(stage, &cfg);
        let t = sig.check(inputs)?;
        check_finite(&sig, inputs)?;
        let ins = Inputs::new(&sig, dtype, inputs, t);
        let mut outs = Outputs::new(&sig, dtype, t)?;
        let pre_params = || reference::PreParams {
            phi: ins.d("phi"),
            scale: ins.d("scale"),
            base: ins.d("base"),
            gamma_k: ins.opt_d("gamma_k"),
            gamma_f: ins.opt_d("gamma_f"),
        };
        let post_inputs =
            || reference::PostInputs { x: ins.t("x"), f: ins.t("f"), h_post: ins.t("h_post"), h_res: ins.t("h_res") };
        let head_params = || reference::HeadParams { phi: ins.d("phi"), scale: ins.d("scale"), base: ins.d("base") };
        let static_params = || reference::StaticParams {
            h_pre_logits: ins.d("h_pre_logits"),
            h_post_logits: ins.d("h_post_logits"),
            h_res_logits: ins.d("h_res_logits"),
            gamma: ins.d("gamma"),
        };
        const PRE_OUT: [&str; 6] = ["a", "y", "h_pre", "h_post", "h_res", "inv_rms"];
        fn pre_views(t: usize, o: &mut [Option<(Store, Port)>; 6]) -> reference::PreOutputs<'_> {
            let [a, y, h_pre, h_post, h_res, inv_rms] = o;
            reference::PreOutputs {
                a: need(tm(t, a)),
                y: tm(t, y),
                h_pre: need(tm(t, h_pre)),
                h_post: need(tm(t, h_post)),
                h_res: need(tm(t, h_res)),
                inv_rms: need(tm(t, inv_rms)),
            }
        }
        match stage {
            Stage::Pre => {
                let mut o = outs.take(PRE_OUT);
                reference::pre::<f64>(&cfg, &ins.t("x"), &pre_params(), &mut pre_views(t, &mut o))?;
                outs.put(o);
            }
            Stage::Post => {
                let mut o = outs.take(["out"]);
                reference::post::<f64>(&cfg, &post_inputs(), &mut need(tm(t, &mut o[0])))?;
                outs.put(o);
            }
            Stage::PostPre => {
                let mut o = outs.take(["out"]);
                let mut p = outs.take(PRE_OUT);
                reference::post_pre::<f64>(
                    &cfg,
                    &post_inputs(),
                    &pre_params(),
                    &mut need(tm(t, &mut o[0])),
                    &mut pre_views(t, &mut p),
                )?;
                outs.put(o);
                outs.put(p);
            }
            Stage::Head => {
                let mut o = outs.take(["out"]);
                reference::head::<f64>(&cfg, &ins.t("x"), &head_params(), &mut need(tm(t, &mut o[0])))?;
                outs.put(o);
            }
            Stage::Expand => {
                let mut o = outs.take(["x"]);
                reference::expand(&cfg, &ins.t("e"), &mut need(tm(t, &mut o[0])))?;
                outs.put(o);
            }
            Stage::Static => {
                let mut o = outs.take(["out"]);
                reference::static_layer::<f64>(&cfg, &ins.t("x"), &static_params(), &mut need(tm(t, &mut o[0])))?;
                outs.put(o);
            }
            Stage::Sinkhorn => {
                let mut o = outs.take(["h_res"]);
                reference::sinkhorn::<f64>(&cfg, &ins.t("logits"), &mut need(tm(t, &mut o[0])))?;
                outs.put(o);
            }
            Stage::PreBackward => {
                let mut o = outs.take(["dx", "dphi", "dscale", "dbase", "dgamma_k", "dgamma_f"]);
                let up = reference::PreUpstream {
                    da: ins.opt_t("da"),
                    dy: ins.opt_t("dy"),
                    dh_pre: ins.opt_t("dh_pre"),
                    dh_post: ins.t("dh_post"),
                    dh_res: ins.t("dh_res"),
                    dinv_rms: ins.opt_t("dinv_rms"),
                };
                {
                    let [dx, dphi, dscale, dbase, dgk, dgf] = &mut o;
                    let mut g = reference::PreGrads {
                        dx: need(tm(t, dx)),
                        dphi: need(dm(dphi)),
                        dscale: need(dm(dscale)),
                        dbase: need(dm(dbase)),
                        dgamma_k: dm(dgk),
                        dgamma_f: dm(dgf),
                    };
                    reference::pre_backward::<f64>(&cfg, &ins.t("x"), &pre_params(), &up, &mut g)?;
                }
                outs.put(o);
            }
            Stage::PostBackward => {
                let mut o = outs.take(["dx", "df", "dh_post", "dh_res"]);
                {
                    let [dx, df, dhp, dhr] = &mut o;
                    let mut g = reference::PostGrads {
                        dx: need(tm(t, dx)),
                        df: need(tm(t, df)),
                        dh_post: need(tm(t, dhp)),
                        dh_res: need(tm(t, dhr)),
                    };
                    reference::post_backward::<f64>(&cfg, &post_inputs(), &ins.t("dout"), &mut g)?;
                }
                outs.put(o);
            }
            Stage::HeadBackward => {
                let mut o = outs.take(["dx", "dphi", "dscale", "dbase"]);
                {
                    let [dx, dphi, dscale, dbase] = &mut o;
                    let mut g = reference::HeadGrads {
                        dx: need(tm(t, dx)),
                        dphi: need(dm(dphi)),
                        dscale: need(dm(dscale)),
                        dbase: need(dm(dbase)),
                    };
                    reference::head_backward::<f64>(&cfg, &ins.t("x"), &head_params(), &ins.t("dout"), &mut g)?;
                }
                outs.put(o);
            }
            Stage::StaticBackward => {
                let mut o = outs.take(["dx", "dh_pre_logits", "dh_post_logits", "dh_res_logits", "dgamma"]);
                {
                    let [dx, dhp, dhpo, dhr, dg] = &mut o;
                    let mut g = reference::StaticGrads {
                        dx: need(tm(t, dx)),
                        dh_pre_logits: need(dm(dhp)),
                        dh_post_logits: need(dm(dhpo)),
                        dh_res_logits: need(dm(dhr)),
                        dgamma: need(dm(dg)),
                    };
                    reference::static_backward::<f64>(&cfg, &ins.t("x"), &static_params(), &ins.t("dout"), &mut g)?;
                }
                outs.put(o);
            }
        }
        Ok(outs.into_named())
    }
}
