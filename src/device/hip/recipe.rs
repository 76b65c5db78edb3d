//! How each forward stage runs on the gfx942 kernels, with no driver in sight: which kernels,
//! in which order, on which grid, and which buffer goes to which kernel argument. The HIP plan
//! launches these recipes; nothing here calls a runtime, so the GCN simulator's runner could
//! share it, and every part is unit-tested on a machine without a GPU.
//!
//! # Kernel arguments by name
//!
//! Each kernel's arguments are a Rust struct ([`PostArgs`], [`PreArgs`], ...) whose field names
//! are the argument names of the code object's metadata (`.args[].name`). When a kernel is
//! loaded, [`ArgLayout::resolve`] matches every field to the metadata by NAME, checks its size
//! and kind (pointer = `global_buffer`, scalar = `by_value`) and that every explicit argument of
//! the kernel is set by some field; any mismatch is an `Err` naming the argument. The resolved
//! layout is plain data (offsets in field order, O(1) per field), so a launch writes the block
//! with no string comparison and no allocation, and a kernel whose `.args` changed cannot be
//! launched with a stale layout: it fails at load, never silently misreads.
//!
//! Hidden arguments (`hidden_*` value kinds) are the runtime's: ROCclr marks them hidden in the
//! kernel signature and fills them from the launch; the launcher passes the explicit ones
//! (`kernelParams`, one pointer each). None of the current gfx942 kernels declares any.

use crate::config::{Config, Dtype, Formulation};
use mhc_loader::KernelInfo;

/// Work-items per workgroup of every gfx942 kernel (4 waves of 64).
pub const BLOCK: u32 = 256;
/// Tokens per workgroup of `mhc_pre` (one phi load feeds this many tokens).
pub const PRE_TILE: usize = 4;
/// Tokens per workgroup of `mhc_coeffs` (one wave per token).
pub const COEFFS_TILE: usize = 4;
/// Largest kernarg block the launcher builds.
pub const MAX_KERNARG: usize = 256;
/// Most explicit arguments of one kernel.
pub const MAX_ARGS: usize = 32;

/// `mhc_pre` flag: bf16 storage of the activations (else f32).
pub const PRE_BF16: u32 = 1;
/// `mhc_pre` flag: the Paper formulation (else DeepSeek-V4).
pub const PRE_PAPER: u32 = 2;
/// `mhc_pre` flag: head mode (M = n logits, sigmoid weights `h = sigma + eps_hc` into `h_pre`, no
/// Sinkhorn, `a` = the head's output).
pub const PRE_HEAD: u32 = 4;
/// `mhc_pre` flag: the post prologue of `post_pre` (writes `out = post(x)`, then reduces it).
pub const PRE_POST: u32 = 8;
/// `mhc_pre` flag: the projection reads `x gamma_k` (the pre-norm weight, [`PreArgs::gamma_k`]);
/// the sum of squares stays that of `x`.
pub const PRE_GAMMA_K: u32 = 16;
/// `mhc_coeffs` flags.
pub const COEFFS_PAPER: u32 = 1;
/// `mhc_post`, `mhc_static`, `mhc_rmsnorm` flags: bit 0 = bf16 storage.
pub const ACT_BF16: u32 = 1;

/// The kind of one kernel argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgKind {
    /// A device address (`global_buffer`, 8 bytes).
    Ptr,
    /// `by_value` u32.
    U32,
    /// `by_value` f32.
    F32,
}

impl ArgKind {
    /// Bytes of the argument in the kernarg block.
    pub const fn size(self) -> usize {
        match self {
            ArgKind::Ptr => 8,
            ArgKind::U32 | ArgKind::F32 => 4,
        }
    }
    const fn value_kind(self) -> &'static str {
        match self {
            ArgKind::Ptr => "global_buffer",
            ArgKind::U32 | ArgKind::F32 => "by_value",
        }
    }
}

/// One argument value, as the argument structs hand them to [`ArgLayout::write`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ArgValue {
    /// A device address.
    Ptr(u64),
    /// A u32 scalar.
    U32(u32),
    /// An f32 scalar.
    F32(f32),
}

impl ArgValue {
    const fn kind(self) -> ArgKind {
        match self {
            ArgValue::Ptr(_) => ArgKind::Ptr,
            ArgValue::U32(_) => ArgKind::U32,
            ArgValue::F32(_) => ArgKind::F32,
        }
    }
}

/// The argument struct of one kernel: field names = metadata argument names.
pub trait KernelArgs {
    /// The kernel these arguments are for.
    const KERNEL: Kernel;
    /// `(name, kind)` of every field, in declaration order.
    const FIELDS: &'static [(&'static str, ArgKind)];
    /// The field values, in [`Self::FIELDS`] order.
    fn values(&self) -> impl AsRef<[ArgValue]>;
}

macro_rules! arg_type {
    (ptr) => {
        u64
    };
    (u32) => {
        u32
    };
    (f32) => {
        f32
    };
}
macro_rules! arg_kind {
    (ptr) => {
        ArgKind::Ptr
    };
    (u32) => {
        ArgKind::U32
    };
    (f32) => {
        ArgKind::F32
    };
}
macro_rules! arg_value {
    (ptr, $v:expr) => {
        ArgValue::Ptr($v)
    };
    (u32, $v:expr) => {
        ArgValue::U32($v)
    };
    (f32, $v:expr) => {
        ArgValue::F32($v)
    };
}

macro_rules! kernel_args {
    ($(#[$doc:meta])* $name:ident for $kernel:expr => { $( $(#[$fdoc:meta])* $field:ident : $kind:ident ),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default, PartialEq)]
        pub struct $name {
            $( $(#[$fdoc])* pub $field: arg_type!($kind), )*
        }

        impl KernelArgs for $name {
            const KERNEL: Kernel = $kernel;
            const FIELDS: &'static [(&'static str, ArgKind)] = &[$( (stringify!($field), arg_kind!($kind)) ),*];
            fn values(&self) -> impl AsRef<[ArgValue]> {
                [$( arg_value!($kind, self.$field) ),*]
            }
        }
    };
}

kernel_args! {
    /// `mhc_post`: docs/math.md stage 4. `x_stride` is shared by `x` and `out`; `(res_si, res_sj)`
    /// are the element strides of the coefficient for (output i, input j): [`post_res_strides`].
    PostArgs for Kernel::Post => {
        /// The residual `x[T][n][C]` (storage dtype).
        x: ptr,
        /// The sublayer output `f[T][C]` (storage dtype).
        f: ptr,
        /// The post coefficients `h_post[T][n]` (f32).
        h_post: ptr,
        /// The residual mixing matrices `h_res[T][n][n]` (f32).
        h_res: ptr,
        /// The output `x'[T][n][C]` (storage dtype), rows `x_stride` apart.
        out: ptr,
        /// T, the token count.
        tokens: u32,
        /// n, the stream count (1, 2, 4, 8, 16 or 32).
        streams: u32,
        /// C, the channels per stream.
        channels: u32,
        /// Elements between token rows of `x` and of `out`.
        x_stride: u32,
        /// Elements between token rows of `f`.
        f_stride: u32,
        /// Elements between the coefficients of consecutive output streams i in a `h_res` matrix.
        res_si: u32,
        /// Elements between the coefficients of consecutive input streams j in a `h_res` matrix.
        res_sj: u32,
        /// [`ACT_BF16`]: bf16 storage of `x`, `f` and `out` (else f32).
        flags: u32,
    }
}

kernel_args! {
    /// `mhc_pre`: the whole `pre` stage in one launch; `head` with [`PRE_HEAD`]; `post_pre`
    /// with [`PRE_POST`] (a post prologue writes `out = post(x, f, post_h_post, post_h_res)`
    /// and the pre part reads it; `x_stride` is shared by `x` and `out`; the post fields are 0
    /// otherwise). `work`: `T G (M + 1)` f32 partials; `counter`: `ceil(T / 4)` u32, zero
    /// before the first launch and left zero by the kernel.
    PreArgs for Kernel::Pre => {
        /// The residual `x[T][n*C]` (storage dtype); for `post_pre`, the post's input.
        x: ptr,
        /// The projection `phi[M][n*C]` (f32; `[n][n*C]` in head mode).
        phi: ptr,
        /// The logit scales `scale[3]` (f32; `[1]` in head mode).
        scale: ptr,
        /// The logit biases `base[M]` (f32).
        base: ptr,
        /// Output `h_pre[T][n]` (f32); in head mode the head weights `h`.
        h_pre: ptr,
        /// Output `h_post[T][n]` (f32); unused in head mode.
        h_post: ptr,
        /// Output `h_res[T][n][n]` (f32); unused in head mode.
        h_res: ptr,
        /// Output: the reciprocal RMS of each token's row, `[T]` (f32).
        inv_rms: ptr,
        /// Output `a[T][C]` (storage dtype): the pre-mix; in head mode the head's output.
        a: ptr,
        /// Workspace: the split-K partials, `T G (M + 1)` f32.
        work: ptr,
        /// Workspace: one u32 arrival counter per 4-token tile, zero between launches.
        counter: ptr,
        /// T, the token count.
        tokens: u32,
        /// n, the stream count.
        streams: u32,
        /// C, the channels per stream.
        channels: u32,
        /// Elements between token rows of `x` (and of `out`).
        x_stride: u32,
        /// Elements between token rows of `a`.
        a_stride: u32,
        /// G, the workgroups that share one 4-token tile's reduction ([`pre_splits`]).
        splits: u32,
        /// Sinkhorn iterations.
        iters: u32,
        /// Added to the mean square of the row under the reciprocal square root (`inv_rms`).
        eps_norm: f32,
        /// The coefficient epsilon (Sinkhorn line sums; `h_pre` in the DeepSeek-V4 formulation; `h`
        /// in head mode).
        eps_hc: f32,
        /// [`PRE_BF16`] | [`PRE_PAPER`] | [`PRE_HEAD`] | [`PRE_POST`] | [`PRE_GAMMA_K`].
        flags: u32,
        /// `post_pre`: layer l's sublayer output `f[T][C]` (storage dtype).
        f: ptr,
        /// `post_pre`: layer l's post coefficients `h_post[T][n]` (f32).
        post_h_post: ptr,
        /// `post_pre`: layer l's residual mixing matrices `h_res[T][n][n]` (f32).
        post_h_res: ptr,
        /// `post_pre`: output `x'[T][n*C]` (storage dtype, rows `x_stride` apart; must not
        /// overlap `x`), the residual the pre part reduces.
        out: ptr,
        /// `post_pre`: elements between token rows of `f`.
        f_stride: u32,
        /// `post_pre`: [`PostArgs::res_si`].
        res_si: u32,
        /// `post_pre`: [`PostArgs::res_sj`].
        res_sj: u32,
        /// With [`PRE_GAMMA_K`]: the pre-norm weight `gamma_k[n*C]` (f32); else unread.
        gamma_k: ptr,
    }
}

kernel_args! {
    /// `mhc_coeffs`: docs/math.md stage 2 from given logits `p` (rows of `p_stride`).
    CoeffsArgs for Kernel::Coeffs => {
        /// The logits before the RMS scaling, `P[T][p_stride]` (f32).
        p: ptr,
        /// The reciprocal RMS of each token's row, `[T]` (f32).
        inv_rms: ptr,
        /// The scales of the pre, post and residual logits, `[3]` (f32; `[1]` in head mode).
        scale: ptr,
        /// The logit biases `base[M]` (f32).
        base: ptr,
        /// Output `h_pre[T][n]` (f32); in head mode the head weights `h`.
        h_pre: ptr,
        /// Output `h_post[T][n]` (f32); not written in head mode.
        h_post: ptr,
        /// Output `h_res[T][n][n]` (f32); not written in head mode.
        h_res: ptr,
        /// T, the token count.
        tokens: u32,
        /// n, the stream count.
        streams: u32,
        /// Sinkhorn iterations (at least 1).
        iters: u32,
        /// The coefficient epsilon: added to every Sinkhorn line sum, to `h_pre` in the
        /// DeepSeek-V4 formulation and to `h` in head mode.
        eps_hc: f32,
        /// [`COEFFS_PAPER`]; bit 1: head mode (M = n, `h_pre` only).
        flags: u32,
        /// Elements between rows of `p` (at least M).
        p_stride: u32,
    }
}

kernel_args! {
    /// `mhc_static`: the static layer with precomputed coefficients; `x_stride` is shared by
    /// `x` and `out`.
    StaticArgs for Kernel::Static => {
        /// The residual `x[T][n][C]` (storage dtype).
        x: ptr,
        /// The pre weights `h_pre[n]` (f32), shared by all tokens.
        h_pre: ptr,
        /// The post weights `h_post[n]` (f32), shared by all tokens.
        h_post: ptr,
        /// The residual mixing matrix `h_res[n][n]` (f32, applied untransposed), shared by all tokens.
        h_res: ptr,
        /// The F-pre-norm weights `gamma[C]` (f32).
        gamma: ptr,
        /// The output `x'[T][n][C]` (storage dtype), rows `x_stride` apart.
        out: ptr,
        /// T, the token count.
        tokens: u32,
        /// n, the stream count.
        streams: u32,
        /// C, the channels per stream.
        channels: u32,
        /// Elements between token rows of `x` and of `out`.
        x_stride: u32,
        /// Added to `mean(a^2)` under the F-pre-norm's square root.
        eps_f: f32,
        /// [`ACT_BF16`]: bf16 storage of `x` and `out` (else f32).
        flags: u32,
    }
}

kernel_args! {
    /// `mhc_rmsnorm`: `y = a gamma / rms(a)` (the metadata calls `y` `out`: `y` is a YAML bool).
    RmsNormArgs for Kernel::RmsNorm => {
        /// The pre-mix `a[T][C]` (storage dtype).
        a: ptr,
        /// The F-pre-norm weights `gamma_f[C]` (f32).
        gamma: ptr,
        /// The output `y[T][C]` (storage dtype).
        out: ptr,
        /// T, the token count.
        tokens: u32,
        /// C, the channels.
        channels: u32,
        /// Elements between token rows of `a`.
        a_stride: u32,
        /// Elements between token rows of `out`.
        y_stride: u32,
        /// Added to `mean(a^2)` under the square root.
        eps_f: f32,
        /// [`ACT_BF16`]: bf16 storage of `a` and `y` (else f32).
        flags: u32,
    }
}

kernel_args! {
    /// `mhc_expand`: the first layer's residual from the embedding, `out[t][i] = e[t]` for every
    /// stream i (a copy in the storage dtype).
    ExpandArgs for Kernel::Expand => {
        /// The embedding `e[T][C]` (storage dtype).
        e: ptr,
        /// The residual `out[T][n][C]` (storage dtype).
        out: ptr,
        /// T, the token count.
        tokens: u32,
        /// n, the stream count.
        streams: u32,
        /// C, the channels per stream.
        channels: u32,
        /// Elements between token rows of `e`.
        e_stride: u32,
        /// Elements between token rows of `out`.
        out_stride: u32,
        /// [`ACT_BF16`]: bf16 storage of `e` and `out` (else f32).
        flags: u32,
    }
}

/// The gfx942 kernels, one per embedded image; the discriminant is the cache slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// `mhc_pre`: `pre`, `post_pre` and `head` ([`PreArgs`]).
    Pre,
    /// `mhc_post` ([`PostArgs`]).
    Post,
    /// `mhc_coeffs`: the coefficients from given logits ([`CoeffsArgs`]).
    Coeffs,
    /// `mhc_static`: the static layer ([`StaticArgs`]).
    Static,
    /// `mhc_rmsnorm`: the F-pre-norm `y` ([`RmsNormArgs`]).
    RmsNorm,
    /// `mhc_expand`: the residual from the embedding ([`ExpandArgs`]).
    Expand,
}

impl Kernel {
    /// Every kernel, in slot order.
    pub const ALL: [Kernel; 6] =
        [Kernel::Pre, Kernel::Post, Kernel::Coeffs, Kernel::Static, Kernel::RmsNorm, Kernel::Expand];

    /// Index in [`Kernel::ALL`] (function and module cache slot).
    pub const fn slot(self) -> usize {
        self as usize
    }

    /// The entry symbol (the runtime resolves `<entry>.kd`).
    pub const fn entry(self) -> &'static str {
        match self {
            Kernel::Pre => "mhc_pre",
            Kernel::Post => "mhc_post",
            Kernel::Coeffs => "mhc_coeffs",
            Kernel::Static => "mhc_static",
            Kernel::RmsNorm => "mhc_rmsnorm",
            Kernel::Expand => "mhc_expand",
        }
    }

    /// The embedded image holding it: the `file` of the gfx942 catalogue rows of its entry (the
    /// catalogue is the one list of images; a kernel missing from it names no image).
    pub fn image(self) -> &'static str {
        mhc_loader::Registry::embedded()
            .ok()
            .and_then(|r| {
                r.variants()
                    .iter()
                    .find(|v| matches!(v.arch, mhc_loader::Arch::Gfx942(_)) && v.entry.entry == self.entry())
            })
            .map_or("(not in the catalogue)", |v| v.entry.file.as_str())
    }

    /// The argument fields the launcher sets.
    pub const fn fields(self) -> &'static [(&'static str, ArgKind)] {
        match self {
            Kernel::Pre => PreArgs::FIELDS,
            Kernel::Post => PostArgs::FIELDS,
            Kernel::Coeffs => CoeffsArgs::FIELDS,
            Kernel::Static => StaticArgs::FIELDS,
            Kernel::RmsNorm => RmsNormArgs::FIELDS,
            Kernel::Expand => ExpandArgs::FIELDS,
        }
    }

    /// The embedded image's bytes and this kernel's metadata, as the loader reads them.
    pub fn info(self) -> Result<(&'static [u8], KernelInfo), String> {
        let image = mhc_loader::embedded::image(self.image()).ok_or_else(|| "image not embedded".to_string())?;
        let object = mhc_loader::parse(image.bytes).map_err(|e| format!("mhc-loader cannot read it: {e}"))?;
        let info =
            object.kernel(self.entry()).cloned().ok_or_else(|| format!("no kernel {} in the image", self.entry()))?;
        Ok((image.bytes, info))
    }
}

/// Where each argument goes in the kernarg block, resolved by name from the metadata.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArgLayout {
    /// The kernel this layout was resolved for.
    pub kernel: Kernel,
    /// `.kernarg_segment_size`.
    pub kernarg_bytes: u32,
    /// Number of fields (= explicit arguments).
    pub len: usize,
    /// Byte offset of field i (in [`Kernel::fields`] order).
    pub offsets: [u16; MAX_ARGS],
    /// Field index of the i-th explicit argument in metadata order (the order of the launch's
    /// `kernelParams`).
    pub order: [u8; MAX_ARGS],
}

impl ArgLayout {
    /// Matches `fields` to `info.params` by name (see the module docs); `Err` names the first
    /// problem: an unknown name, a size or kind mismatch, an argument no field sets, an
    /// argument outside the kernarg segment, or a block larger than [`MAX_KERNARG`].
    pub fn resolve(kernel: Kernel, info: &KernelInfo, fields: &[(&str, ArgKind)]) -> Result<ArgLayout, String> {
        let name = kernel.entry();
        if info.kernarg_bytes as usize > MAX_KERNARG {
            return Err(format!("{name}: {} kernarg bytes exceed the launcher's {MAX_KERNARG}", info.kernarg_bytes));
        }
        if fields.len() > MAX_ARGS {
            return Err(format!("{name}: more than {MAX_ARGS} arguments"));
        }
        let explicit: Vec<_> =
            info.params.iter().filter(|p| !p.kind.as_deref().unwrap_or("").starts_with("hidden_")).collect();
        let mut layout = ArgLayout {
            kernel,
            kernarg_bytes: info.kernarg_bytes,
            len: fields.len(),
            offsets: [0; MAX_ARGS],
            order: [0; MAX_ARGS],
        };
        for (i, &(field, kind)) in fields.iter().enumerate() {
            if fields[..i].iter().any(|&(f, _)| f == field) {
                return Err(format!("{name}: argument `{field}` is set twice"));
            }
            let p = explicit
                .iter()
                .find(|p| p.name.as_deref() == Some(field))
                .ok_or_else(|| format!("{name}: no kernel argument `{field}` in the metadata"))?;
            if p.size as usize != kind.size() {
                return Err(format!(
                    "{name}: argument `{field}` is {} bytes in the metadata, not {}",
                    p.size,
                    kind.size()
                ));
            }
            if let Some(k) = p.kind.as_deref() {
                if k != kind.value_kind() {
                    return Err(format!(
                        "{name}: argument `{field}` is {k} in the metadata, not {}",
                        kind.value_kind()
                    ));
                }
            }
            if p.offset as usize % kind.size() != 0 || p.offset + p.size > info.kernarg_bytes {
                return Err(format!(
                    "{name}: argument `{field}` at offset {} does not fit the {}-byte kernarg segment aligned",
                    p.offset, info.kernarg_bytes
                ));
            }
            layout.offsets[i] = p.offset as u16;
        }
        if explicit.len() != fields.len() {
            let unset: Vec<&str> = explicit
                .iter()
                .filter_map(|p| p.name.as_deref())
                .filter(|n| !fields.iter().any(|&(f, _)| f == *n))
                .collect();
            return Err(format!("{name}: kernel arguments never set by the launcher: {}", unset.join(", ")));
        }
        let mut by_offset: Vec<usize> = (0..fields.len()).collect();
        by_offset.sort_by_key(|&i| layout.offsets[i]);
        for w in by_offset.windows(2) {
            if layout.offsets[w[0]] as usize + fields[w[0]].1.size() > layout.offsets[w[1]] as usize {
                return Err(format!("{name}: arguments `{}` and `{}` overlap", fields[w[0]].0, fields[w[1]].0));
            }
        }
        for (j, i) in by_offset.into_iter().enumerate() {
            layout.order[j] = i as u8;
        }
        Ok(layout)
    }

    /// Resolves the layout of `A` against `info`.
    pub fn of<A: KernelArgs>(info: &KernelInfo) -> Result<ArgLayout, String> {
        Self::resolve(A::KERNEL, info, A::FIELDS)
    }

    /// Writes `args` into `block` (O(fields), no strings, no allocation).
    #[inline]
    pub fn write<A: KernelArgs>(&self, args: &A, block: &mut KernargBlock) -> Result<(), String> {
        let values = args.values();
        let values = values.as_ref();
        if A::KERNEL != self.kernel || values.len() != self.len {
            return Err(format!("{:?} arguments given to the layout of {}", A::KERNEL, self.kernel.entry()));
        }
        block.len = self.kernarg_bytes as usize;
        // Padding (and any argument the runtime fills) holds zeros, never stale bytes.
        block.bytes[..block.len].fill(0);
        for (i, v) in values.iter().enumerate() {
            let at = self.offsets[i] as usize;
            debug_assert_eq!(v.kind(), A::FIELDS[i].1);
            match *v {
                ArgValue::Ptr(p) => block.bytes[at..at + 8].copy_from_slice(&p.to_le_bytes()),
                ArgValue::U32(u) => block.bytes[at..at + 4].copy_from_slice(&u.to_le_bytes()),
                ArgValue::F32(f) => block.bytes[at..at + 4].copy_from_slice(&f.to_le_bytes()),
            }
        }
        Ok(())
    }

    /// Byte offsets of the explicit arguments in metadata order (one `kernelParams` entry each).
    pub fn param_offsets(&self) -> impl Iterator<Item = usize> + '_ {
        self.order[..self.len].iter().map(|&i| self.offsets[i as usize] as usize)
    }
}

/// A kernarg block (8-byte aligned, as `.kernarg_segment_align` asks).
#[derive(Debug, Clone)]
#[repr(C, align(16))]
pub struct KernargBlock {
    /// The block's storage; bytes past `len` are not passed to the kernel.
    pub bytes: [u8; MAX_KERNARG],
    /// Bytes written: the kernel's `.kernarg_segment_size`.
    pub len: usize,
}

impl Default for KernargBlock {
    fn default() -> Self {
        KernargBlock { bytes: [0; MAX_KERNARG], len: 0 }
    }
}

impl KernargBlock {
    /// The written segment (`.kernarg_segment_size` bytes).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

impl Kernel {
    /// The kernel of a catalogue row's entry symbol.
    pub fn from_entry(entry: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.entry() == entry)
    }
}

/// The kernels a call of catalogue row `variant` runs for `cfg`: the row's own and its
/// companions' (the catalogue names them: the coefficient kernel in front of the static layer,
/// the RMSNorm after `pre` where the configuration has `gamma_f`). A catalogue naming a kernel
/// this launcher does not know is a build inconsistency, reported here.
pub fn kernels_of(variant: &mhc_loader::Variant, cfg: &Config) -> Result<Vec<Kernel>, String> {
    let own =
        |entry: &str| Kernel::from_entry(entry).ok_or_else(|| format!("{}: no gfx942 kernel {entry}", variant.id()));
    let mut out = vec![own(&variant.entry.entry)?];
    let registry = mhc_loader::Registry::embedded().map_err(|e| e.to_string())?;
    for id in &variant.entry.geometry.companions {
        let c = registry.get(id).ok_or_else(|| format!("{}: companion {id} is not in the catalogue", variant.id()))?;
        let k = own(&c.entry.entry)?;
        if k == Kernel::RmsNorm && !cfg.gamma_f {
            continue;
        }
        out.push(k);
    }
    Ok(out)
}

/// Whether the gfx942 kernels of catalogue row `variant` (and its companions) can address
/// `max_tokens` tokens of `cfg`: the per-token byte offsets they form in 32 bits, and the 32-bit
/// work-item counts of one-workgroup-per-token launches (docs/kernels/address-arithmetic.md).
/// `mhc_pre` (pre, post_pre, head) indexes its partials `((t G + g)(M + 1)) * 4` and its
/// coefficient rows `t n^2 * 4`, `t 4n`, `inv_rms` through a 30-bit vector offset, and its row
/// of phi / x `k * 4`; `mhc_post` and `mhc_coeffs` the coefficient rows `t n^2 * 4`;
/// `mhc_static` and `mhc_rmsnorm` launch 256 work-items per token; `mhc_post` and `mhc_expand`
/// address a row's channel `c * esize` through a 32-bit vector offset.
pub fn offset_limit(
    variant: &mhc_loader::Variant,
    cfg: &Config,
    dtype: Dtype,
    max_tokens: usize,
) -> Result<(), String> {
    let (n, k, t) = (cfg.n as u64, cfg.k() as u64, max_tokens as u64);
    let last = t.saturating_sub(1);
    let esize = dtype.size() as u64;
    let check = |product: u64, what: &str| -> Result<(), String> {
        if product > u32::MAX as u64 {
            return Err(format!("its 32-bit offsets reach {what} = {product} at T = {max_tokens}, over 2^32 - 1"));
        }
        Ok(())
    };
    let mut kernels = kernels_of(variant, cfg)?;
    kernels.dedup();
    for kernel in kernels {
        match kernel {
            Kernel::Pre => {
                // head mode has M = n logits
                let m = if variant.entry.launch == "gfx942_head" { n } else { n * n + 2 * n };
                check(last.saturating_mul(m + 1).saturating_mul(4), "(T - 1)(M + 1) x 4 partial bytes")?;
                check(last.saturating_mul(n * n * 4), "(T - 1) n^2 x 4 h_res bytes")?;
                if t > 1 << 30 {
                    return Err(format!("inv_rms is indexed through a 30-bit offset: T = {max_tokens} > 2^30"));
                }
                check((k + 255) * 4, "(n C + 255) x 4 bytes of a phi / x row")?;
                check((n - 1) * cfg.c as u64 * esize, "(n - 1) C x esize bytes to the last stream")?;
            }
            Kernel::Post => {
                check(last.saturating_mul(n * n * 4), "(T - 1) n^2 x 4 h_res bytes")?;
                check(cfg.c as u64 * esize, "C x esize bytes of a row")?;
            }
            Kernel::Coeffs => check(last.saturating_mul(n * n * 4), "(T - 1) n^2 x 4 h_res bytes")?,
            Kernel::Expand => check(cfg.c as u64 * esize, "C x esize bytes of a row")?,
            Kernel::Static | Kernel::RmsNorm => {
                if t > 16_777_215 {
                    return Err(format!(
                        "one workgroup of 256 per token: T = {max_tokens} work-items overflow 32 bits"
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The catalogue's gfx942 choice for `slot` of `cfg` in `dtype` up to `max_tokens` on a device
/// of `units` CUs, with the kernels' offset limits ([`offset_limit`]): what the HIP plan, the HIP
/// runner and the simulator's runner all use.
pub fn choose(
    arch: mhc_loader::Arch,
    units: u32,
    cfg: &Config,
    dtype: Dtype,
    slot: crate::plan::Slot,
    max_tokens: usize,
) -> crate::error::Result<Vec<crate::plan::Choice>> {
    let admit = |v: &mhc_loader::Variant| offset_limit(v, cfg, dtype, max_tokens);
    crate::plan::choose(arch, units, cfg, dtype, slot, max_tokens, None, &admit)
}

/// `(res_si, res_sj)` of `mhc_post`: V4 applies `h_res` transposed (`h_res[j][i]`), Paper as is.
pub const fn post_res_strides(formulation: Formulation, n: usize) -> (usize, usize) {
    match formulation {
        Formulation::DeepSeekV4 => (1, n),
        Formulation::Paper => (n, 1),
    }
}

fn u32_of(what: &str, v: usize) -> Result<u32, String> {
    u32::try_from(v).map_err(|_| format!("{what} = {v} does not fit the kernel's 32-bit argument"))
}

/// `mhc_post` and `mhc_expand`: one workgroup per 256 channels of one token.
pub fn post_grid(t: usize, c: usize) -> Result<[u32; 3], String> {
    Ok([u32_of("C / 256", c.div_ceil(BLOCK as usize))?, u32_of("T", t)?, 1])
}

/// Workgroups per 4-token tile for `mhc_pre`'s split K reduction: decode-sized calls (T <= 64)
/// split K = n C into slices of about 2048 so that T G / 4 workgroups keep the CUs busy; larger
/// T use one per tile.
pub fn pre_splits(t: usize, k: usize) -> usize {
    if t <= 64 {
        k.div_ceil(2048).clamp(1, 64)
    } else {
        1
    }
}

/// `mhc_pre`: G workgroups per 4-token tile.
pub fn pre_grid(t: usize, splits: usize) -> Result<[u32; 3], String> {
    Ok([u32_of("splits", splits)?, u32_of("T / 4", t.div_ceil(PRE_TILE))?, 1])
}

/// `mhc_coeffs`: one wave per token, 4 per workgroup.
pub fn coeffs_grid(t: usize) -> Result<[u32; 3], String> {
    Ok([u32_of("T / 4", t.div_ceil(COEFFS_TILE))?, 1, 1])
}

/// `mhc_static` and `mhc_rmsnorm`: one workgroup per token.
pub fn token_grid(t: usize) -> Result<[u32; 3], String> {
    Ok([u32_of("T", t)?, 1, 1])
}

/// Rounds up to 256 bytes (every workspace region starts 256-byte aligned).
pub const fn align256(bytes: usize) -> usize {
    bytes.div_ceil(256) * 256
}

/// Where each stage's scratch lies in the plan's workspace. The `pre` tile counters come first
/// and are touched by nothing else (they must stay zero between launches); the rest is one
/// region each stage reuses from its start (ops on one stream run in order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkspaceLayout {
    /// Bytes of `ceil(max_tokens / 4)` u32 counters at offset 0.
    pub counter_bytes: usize,
    /// Offset of the shared scratch region.
    pub scratch: usize,
    /// Total bytes.
    pub total: usize,
}

/// `mhc_pre`'s partials for `t` tokens with `m` logits: `T G (M + 1)` f32 (G = [`pre_splits`]).
pub fn pre_work_bytes(t: usize, k: usize, m: usize) -> usize {
    t * pre_splits(t, k) * (m + 1) * 4
}

/// The largest [`pre_work_bytes`] over `1..=max_tokens` (G is constant up to 64 tokens and 1
/// beyond, so the maximum is at 64 or at `max_tokens`).
pub fn max_pre_work_bytes(max_tokens: usize, k: usize, m: usize) -> usize {
    pre_work_bytes(max_tokens.min(64), k, m).max(pre_work_bytes(max_tokens, k, m))
}

/// Offsets of `head`'s scratch for `t` tokens: (work, h `[T, n]`, inv_rms `[T]`) and the end.
pub fn head_scratch(t: usize, cfg: &Config) -> [usize; 4] {
    let work = 0;
    let h = align256(pre_work_bytes(t, cfg.k(), cfg.n));
    let r = h + align256(t * cfg.n * 4);
    [work, h, r, r + align256(t * 4)]
}

/// Offsets of the static layer's scratch: (logits `[M]`, h_pre `[n]`, h_post `[n]`, h_res `[n, n]`)
/// and the end.
pub fn static_scratch(cfg: &Config) -> [usize; 5] {
    let n = cfg.n;
    let hp = align256(cfg.m() * 4);
    let hq = hp + align256(n * 4);
    let hr = hq + align256(n * 4);
    [0, hp, hq, hr, hr + align256(n * n * 4)]
}

impl WorkspaceLayout {
    /// The layout for every stage of `cfg` at up to `max_tokens` tokens.
    pub fn new(cfg: &Config, max_tokens: usize) -> Self {
        let counter_bytes = max_tokens.div_ceil(PRE_TILE) * 4;
        let scratch = align256(counter_bytes);
        let pre = max_pre_work_bytes(max_tokens, cfg.k(), cfg.m());
        let head = head_scratch(max_tokens.min(64), cfg)[3].max(head_scratch(max_tokens, cfg)[3]);
        let stat = static_scratch(cfg)[4];
        WorkspaceLayout { counter_bytes, scratch, total: scratch + align256(pre).max(head).max(stat) }
    }
}

/// The plan's constant inputs of the static layer's coefficient launch, as f32: `inv_rms = 1`,
/// `scale = [1, 1, 1]`, `base = 0 [M]` (so `mhc_coeffs` sees the raw logits, exactly).
pub fn static_constants(cfg: &Config) -> Vec<f32> {
    let mut v = vec![1.0f32; 4];
    v.resize(4 + cfg.m(), 0.0);
    v
}

/// One step of a stage on the device, in stream order.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Step {
    /// A stream-ordered device-to-device copy of `bytes` bytes.
    Copy {
        /// Destination device address.
        dst: u64,
        /// Source device address.
        src: u64,
        /// Bytes to copy.
        bytes: usize,
    },
    /// An `mhc_post` launch.
    Post {
        /// Workgroups in x, y, z (of [`BLOCK`] work-items each).
        grid: [u32; 3],
        /// Its arguments.
        args: PostArgs,
    },
    /// An `mhc_pre` launch.
    Pre {
        /// Workgroups in x, y, z (of [`BLOCK`] work-items each).
        grid: [u32; 3],
        /// Its arguments.
        args: PreArgs,
    },
    /// An `mhc_coeffs` launch.
    Coeffs {
        /// Workgroups in x, y, z (of [`BLOCK`] work-items each).
        grid: [u32; 3],
        /// Its arguments.
        args: CoeffsArgs,
    },
    /// An `mhc_static` launch.
    Static {
        /// Workgroups in x, y, z (of [`BLOCK`] work-items each).
        grid: [u32; 3],
        /// Its arguments.
        args: StaticArgs,
    },
    /// An `mhc_rmsnorm` launch.
    RmsNorm {
        /// Workgroups in x, y, z (of [`BLOCK`] work-items each).
        grid: [u32; 3],
        /// Its arguments.
        args: RmsNormArgs,
    },
    /// An `mhc_expand` launch.
    Expand {
        /// Workgroups in x, y, z (of [`BLOCK`] work-items each).
        grid: [u32; 3],
        /// Its arguments.
        args: ExpandArgs,
    },
}

/// Most steps of one stage (the static layer: three copies and two launches).
pub const MAX_STEPS: usize = 5;

/// The steps of one stage call, in order (fixed capacity: building them allocates nothing).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Steps {
    items: [Step; MAX_STEPS],
    len: usize,
}

impl Steps {
    fn new() -> Self {
        Steps { items: [Step::Copy { dst: 0, src: 0, bytes: 0 }; MAX_STEPS], len: 0 }
    }
    fn push(&mut self, s: Step) {
        self.items[self.len] = s;
        self.len += 1;
    }
    /// The steps, in stream order.
    pub fn as_slice(&self) -> &[Step] {
        &self.items[..self.len]
    }
    /// The kernels launched, in order.
    pub fn kernels(&self) -> impl Iterator<Item = Kernel> + '_ {
        self.as_slice().iter().filter_map(|s| match s {
            Step::Copy { .. } => None,
            Step::Post { .. } => Some(Kernel::Post),
            Step::Pre { .. } => Some(Kernel::Pre),
            Step::Coeffs { .. } => Some(Kernel::Coeffs),
            Step::Static { .. } => Some(Kernel::Static),
            Step::RmsNorm { .. } => Some(Kernel::RmsNorm),
            Step::Expand { .. } => Some(Kernel::Expand),
        })
    }
}

/// An activation tensor on the device: first element and row stride in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Rows {
    /// Device address of the first element.
    pub ptr: u64,
    /// Elements between token rows.
    pub stride: usize,
}

/// The device tensors of `post` (and of `post_pre`'s post part): `x` and `out` share a stride.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostIo {
    /// The residual `x[T][n*C]`.
    pub x: Rows,
    /// The sublayer output `f[T][C]`.
    pub f: Rows,
    /// The post coefficients `h_post[T][n]` (dense f32).
    pub h_post: u64,
    /// The residual mixing matrices `h_res[T][n][n]` (dense f32).
    pub h_res: u64,
    /// The output `x'[T][n*C]`, rows `x.stride` apart.
    pub out: u64,
}

/// The device tensors of `pre`: `x` its input (for `post_pre` the post's input; the pre part
/// reads the post's `out`), parameters (dense f32), outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PreIo {
    /// The residual `x[T][n*C]`.
    pub x: Rows,
    /// The projection `phi[M][n*C]`.
    pub phi: u64,
    /// The logit scales `scale[3]`.
    pub scale: u64,
    /// The logit biases `base[M]`.
    pub base: u64,
    /// The pre-norm weights `gamma_k[n*C]` (the configuration's `gamma_k`).
    pub gamma_k: Option<u64>,
    /// The F-pre-norm weights `gamma_f[C]`, present iff `y` is.
    pub gamma_f: Option<u64>,
    /// Output: the pre-mix `a[T][C]`.
    pub a: Rows,
    /// Output: the F-pre-norm `y[T][C]` (the configuration's `gamma_f`).
    pub y: Option<Rows>,
    /// Output `h_pre[T][n]`.
    pub h_pre: u64,
    /// Output `h_post[T][n]`.
    pub h_post: u64,
    /// Output `h_res[T][n][n]`.
    pub h_res: u64,
    /// Output `inv_rms[T]`.
    pub inv_rms: u64,
}

/// The plan's workspace on the device: its address and layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scratch {
    /// Device address of the workspace.
    pub base: u64,
    /// Where each stage's scratch lies in it.
    pub layout: WorkspaceLayout,
}

impl Scratch {
    fn counter(&self) -> u64 {
        self.base
    }
    fn at(&self, offset: usize) -> u64 {
        self.base + (self.layout.scratch + offset) as u64
    }
}

fn act_flag(dtype: Dtype) -> u32 {
    if dtype == Dtype::Bf16 {
        ACT_BF16
    } else {
        0
    }
}

fn pre_flags(cfg: &Config, dtype: Dtype) -> u32 {
    let mut flags = if dtype == Dtype::Bf16 { PRE_BF16 } else { 0 };
    if cfg.formulation == Formulation::Paper {
        flags |= PRE_PAPER;
    }
    flags
}

fn post_args(cfg: &Config, dtype: Dtype, t: usize, io: &PostIo) -> Result<PostArgs, String> {
    let (si, sj) = post_res_strides(cfg.formulation, cfg.n);
    Ok(PostArgs {
        x: io.x.ptr,
        f: io.f.ptr,
        h_post: io.h_post,
        h_res: io.h_res,
        out: io.out,
        tokens: u32_of("T", t)?,
        streams: u32_of("n", cfg.n)?,
        channels: u32_of("C", cfg.c)?,
        x_stride: u32_of("x row stride", io.x.stride)?,
        f_stride: u32_of("f row stride", io.f.stride)?,
        res_si: si as u32,
        res_sj: sj as u32,
        flags: act_flag(dtype),
    })
}

/// `post`: one `mhc_post` launch.
pub fn post_steps(cfg: &Config, dtype: Dtype, t: usize, io: &PostIo) -> Result<Steps, String> {
    let mut s = Steps::new();
    s.push(Step::Post { grid: post_grid(t, cfg.c)?, args: post_args(cfg, dtype, t, io)? });
    Ok(s)
}

/// `expand`: one `mhc_expand` launch, `e[T][C]` into each of the n streams of `out[T][n*C]`.
pub fn expand_steps(cfg: &Config, dtype: Dtype, t: usize, e: Rows, out: Rows) -> Result<Steps, String> {
    let mut s = Steps::new();
    let args = ExpandArgs {
        e: e.ptr,
        out: out.ptr,
        tokens: u32_of("T", t)?,
        streams: u32_of("n", cfg.n)?,
        channels: u32_of("C", cfg.c)?,
        e_stride: u32_of("e row stride", e.stride)?,
        out_stride: u32_of("out row stride", out.stride)?,
        flags: act_flag(dtype),
    };
    s.push(Step::Expand { grid: post_grid(t, cfg.c)?, args });
    Ok(s)
}

/// `pre` (or, with `post`, `post_pre`): one `mhc_pre` launch (G = `splits` workgroups per
/// 4-token tile, [`pre_splits`] unless a test forces another count;
/// its post prologue on for `post_pre`), then `mhc_rmsnorm` when `io.y` is present.
pub fn pre_steps(
    cfg: &Config,
    dtype: Dtype,
    t: usize,
    splits: usize,
    ws: &Scratch,
    io: &PreIo,
    post: Option<&PostIo>,
) -> Result<Steps, String> {
    let g = splits.max(1);
    let mut flags = pre_flags(cfg, dtype);
    if io.gamma_k.is_some() {
        flags |= PRE_GAMMA_K;
    }
    let p = match post {
        Some(p) => {
            flags |= PRE_POST;
            post_args(cfg, dtype, t, p)?
        }
        None => PostArgs::default(),
    };
    let args = PreArgs {
        x: io.x.ptr,
        phi: io.phi,
        scale: io.scale,
        base: io.base,
        h_pre: io.h_pre,
        h_post: io.h_post,
        h_res: io.h_res,
        inv_rms: io.inv_rms,
        a: io.a.ptr,
        work: ws.at(0),
        counter: ws.counter(),
        tokens: u32_of("T", t)?,
        streams: u32_of("n", cfg.n)?,
        channels: u32_of("C", cfg.c)?,
        x_stride: u32_of("x row stride", io.x.stride)?,
        a_stride: u32_of("a row stride", io.a.stride)?,
        splits: u32_of("splits", g)?,
        iters: cfg.sinkhorn_iters,
        eps_norm: cfg.eps_norm as f32,
        eps_hc: cfg.eps_hc as f32,
        flags,
        f: p.f,
        post_h_post: p.h_post,
        post_h_res: p.h_res,
        out: p.out,
        f_stride: p.f_stride,
        res_si: p.res_si,
        res_sj: p.res_sj,
        gamma_k: io.gamma_k.unwrap_or(0),
    };
    if let Some(p) = post {
        if p.x != io.x {
            return Err("post_pre: the post's x must be the pre's x".into());
        }
        // Workgroups of other k slices still read x while the prologue writes `out`: in place
        // (or any overlap) would let one workgroup read another's output as its input.
        let span = |r: Rows| {
            let elems = (t.max(1) - 1) * r.stride + cfg.k();
            (r.ptr, r.ptr + (elems * dtype.size()) as u64)
        };
        let (x0, x1) = span(p.x);
        let (o0, o1) = span(Rows { ptr: p.out, stride: p.x.stride });
        if x0 < o1 && o0 < x1 {
            return Err("post_pre: out must not overlap x (the post prologue reads x across workgroups)".into());
        }
    }
    let mut s = Steps::new();
    s.push(Step::Pre { grid: pre_grid(t, g)?, args });
    match (io.y, io.gamma_f) {
        (Some(y), Some(gamma)) => s.push(Step::RmsNorm {
            grid: token_grid(t)?,
            args: RmsNormArgs {
                a: io.a.ptr,
                gamma,
                out: y.ptr,
                tokens: args.tokens,
                channels: args.channels,
                a_stride: args.a_stride,
                y_stride: u32_of("y row stride", y.stride)?,
                eps_f: cfg.eps_f as f32,
                flags: act_flag(dtype),
            },
        }),
        (None, None) => {}
        _ => return Err("y and gamma_f go together".into()),
    }
    Ok(s)
}

/// `head`: one `mhc_pre` launch in head mode (M = n, sigmoid weights into the workspace, no
/// Sinkhorn, the collapse into `out`). `phi [n, nC]`, `scale [1]`, `base [n]`.
#[allow(clippy::too_many_arguments)]
pub fn head_steps(
    cfg: &Config,
    dtype: Dtype,
    t: usize,
    splits: usize,
    ws: &Scratch,
    x: Rows,
    phi: u64,
    scale: u64,
    base: u64,
    out: Rows,
) -> Result<Steps, String> {
    let g = splits.max(1);
    let [work, h, r, _] = head_scratch(t, cfg);
    let h = ws.at(h);
    let args = PreArgs {
        x: x.ptr,
        phi,
        scale,
        base,
        h_pre: h,
        // Unused in head mode; pointed at the weights so no stray address reaches the kernel.
        h_post: h,
        h_res: h,
        inv_rms: ws.at(r),
        a: out.ptr,
        work: ws.at(work),
        counter: ws.counter(),
        tokens: u32_of("T", t)?,
        streams: u32_of("n", cfg.n)?,
        channels: u32_of("C", cfg.c)?,
        x_stride: u32_of("x row stride", x.stride)?,
        a_stride: u32_of("out row stride", out.stride)?,
        splits: u32_of("splits", g)?,
        iters: cfg.sinkhorn_iters,
        eps_norm: cfg.eps_norm as f32,
        eps_hc: cfg.eps_hc as f32,
        flags: pre_flags(cfg, dtype) | PRE_HEAD,
        ..PreArgs::default()
    };
    let mut s = Steps::new();
    s.push(Step::Pre { grid: pre_grid(t, g)?, args });
    Ok(s)
}

/// The static layer: the three logit tensors gathered into the workspace (copies), their
/// coefficients computed once by `mhc_coeffs` (Paper start and order, on one "token" with
/// `inv_rms = 1`, `scale = 1`, `base = 0` from `consts` = [`static_constants`]: the raw
/// logits), then `mhc_static` for every token. `x` and `out` share a stride.
#[allow(clippy::too_many_arguments)]
pub fn static_steps(
    cfg: &Config,
    dtype: Dtype,
    t: usize,
    ws: &Scratch,
    consts: u64,
    x: Rows,
    logits: [u64; 3],
    gamma: u64,
    out: u64,
) -> Result<Steps, String> {
    let n = cfg.n;
    let [lg, hp, hq, hr, _] = static_scratch(cfg);
    let mut s = Steps::new();
    s.push(Step::Copy { dst: ws.at(lg), src: logits[0], bytes: n * 4 });
    s.push(Step::Copy { dst: ws.at(lg + n * 4), src: logits[1], bytes: n * 4 });
    s.push(Step::Copy { dst: ws.at(lg + 8 * n), src: logits[2], bytes: n * n * 4 });
    let coeffs = CoeffsArgs {
        p: ws.at(lg),
        inv_rms: consts,
        scale: consts + 4,
        base: consts + 16,
        h_pre: ws.at(hp),
        h_post: ws.at(hq),
        h_res: ws.at(hr),
        tokens: 1,
        streams: u32_of("n", n)?,
        iters: cfg.sinkhorn_iters,
        eps_hc: cfg.eps_hc as f32,
        flags: COEFFS_PAPER,
        p_stride: u32_of("M", cfg.m())?,
    };
    s.push(Step::Coeffs { grid: coeffs_grid(1)?, args: coeffs });
    s.push(Step::Static {
        grid: token_grid(t)?,
        args: StaticArgs {
            x: x.ptr,
            h_pre: coeffs.h_pre,
            h_post: coeffs.h_post,
            h_res: coeffs.h_res,
            gamma,
            out,
            tokens: u32_of("T", t)?,
            streams: u32_of("n", n)?,
            channels: u32_of("C", cfg.c)?,
            x_stride: u32_of("x row stride", x.stride)?,
            eps_f: cfg.eps_f as f32,
            flags: act_flag(dtype),
        },
    });
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn every_kernel() -> Vec<(Kernel, KernelInfo)> {
        Kernel::ALL.iter().map(|&k| (k, k.info().unwrap_or_else(|e| panic!("{k:?}: {e}")).1)).collect()
    }

    #[test]
    fn every_embedded_gfx942_kernel_has_its_arguments_set_by_name() {
        for (k, info) in every_kernel() {
            let layout = ArgLayout::resolve(k, &info, k.fields()).unwrap_or_else(|e| panic!("{e}"));
            // Every explicit metadata argument is set, at the metadata's offset and size.
            let explicit: Vec<_> =
                info.params.iter().filter(|p| !p.kind.as_deref().unwrap_or("").starts_with("hidden_")).collect();
            assert_eq!(explicit.len(), k.fields().len(), "{k:?}");
            for (i, &(name, kind)) in k.fields().iter().enumerate() {
                let p = explicit.iter().find(|p| p.name.as_deref() == Some(name)).unwrap();
                assert_eq!(layout.offsets[i] as u32, p.offset, "{k:?} {name}");
                assert_eq!(kind.size() as u32, p.size, "{k:?} {name}");
            }
            // kernelParams order = metadata order.
            let offs: Vec<usize> = layout.param_offsets().collect();
            let meta: Vec<usize> = explicit.iter().map(|p| p.offset as usize).collect();
            assert_eq!(offs, meta, "{k:?}");
            assert_eq!(layout.kernarg_bytes, info.kernarg_bytes);
            assert!(info.max_threads >= BLOCK, "{k:?} max_threads {}", info.max_threads);
        }
    }

    #[test]
    fn written_blocks_hold_each_value_at_its_metadata_offset() {
        let (_, info) = Kernel::Post.info().unwrap();
        let layout = ArgLayout::of::<PostArgs>(&info).unwrap();
        let args = PostArgs {
            x: 0x1111_2222_3333_4440,
            f: 0xaaaa_bbbb_cccc_dd00,
            h_post: 0x10,
            h_res: 0x20,
            out: 0x30,
            tokens: 17,
            streams: 4,
            channels: 4104,
            x_stride: 4 * 4104,
            f_stride: 4104,
            res_si: 1,
            res_sj: 4,
            flags: ACT_BF16,
        };
        let mut block = KernargBlock { bytes: [0xee; MAX_KERNARG], len: 0 };
        layout.write(&args, &mut block).unwrap();
        assert_eq!(block.as_bytes().len(), info.kernarg_bytes as usize);
        let at = |name: &str| info.params.iter().find(|p| p.name.as_deref() == Some(name)).unwrap().offset as usize;
        let u64_at = |o: usize| u64::from_le_bytes(block.bytes[o..o + 8].try_into().unwrap());
        let u32_at = |o: usize| u32::from_le_bytes(block.bytes[o..o + 4].try_into().unwrap());
        assert_eq!(u64_at(at("x")), args.x);
        assert_eq!(u64_at(at("f")), args.f);
        assert_eq!(u32_at(at("channels")), 4104);
        assert_eq!(u32_at(at("res_sj")), 4);
        assert_eq!(u32_at(at("flags")), 1);
        // Every byte of the segment was written (no byte left at the 0xee fill).
        assert!(!block.as_bytes().contains(&0xee));
        assert!(block.bytes[block.len..].iter().all(|&b| b == 0xee), "wrote past the segment");

        let (_, info) = Kernel::Pre.info().unwrap();
        let layout = ArgLayout::of::<PreArgs>(&info).unwrap();
        let mut block = KernargBlock { bytes: [0xee; MAX_KERNARG], len: 0 };
        let args = PreArgs { eps_norm: 1e-6, eps_hc: 2.5e-3, counter: 0x00de_adbe_ef00, ..PreArgs::default() };
        layout.write(&args, &mut block).unwrap();
        let f32_at = |name: &str| {
            let o = info.params.iter().find(|p| p.name.as_deref() == Some(name)).unwrap().offset as usize;
            f32::from_le_bytes(block.bytes[o..o + 4].try_into().unwrap())
        };
        assert_eq!(f32_at("eps_hc"), 2.5e-3);
        assert_eq!(f32_at("eps_norm"), 1e-6);
        assert!(!block.as_bytes().contains(&0xee), "an argument byte was not written");
        // A layout of another kernel refuses these arguments.
        let (_, post) = Kernel::Post.info().unwrap();
        let other = ArgLayout::of::<PostArgs>(&post).unwrap();
        assert!(other.write(&args, &mut block).is_err());
    }

    #[test]
    fn unknown_missing_resized_and_retyped_arguments_are_errors() {
        let (_, info) = Kernel::Post.info().unwrap();
        let mut fields: Vec<(&str, ArgKind)> = Kernel::Post.fields().to_vec();
        // An unknown name.
        fields[0].0 = "x_typo";
        let e = ArgLayout::resolve(Kernel::Post, &info, &fields).unwrap_err();
        assert!(e.contains("no kernel argument `x_typo`"), "{e}");
        // A metadata argument no field sets.
        let fields: Vec<_> = Kernel::Post.fields().iter().copied().filter(|f| f.0 != "flags").collect();
        let e = ArgLayout::resolve(Kernel::Post, &info, &fields).unwrap_err();
        assert!(e.contains("never set") && e.contains("flags"), "{e}");
        // A size mismatch (a pointer declared as u32) and a kind mismatch (u32 vs f32 is the same
        // size and kind: by_value; a pointer declared by_value is caught).
        let mut fields: Vec<_> = Kernel::Post.fields().to_vec();
        fields[0].1 = ArgKind::U32;
        let e = ArgLayout::resolve(Kernel::Post, &info, &fields).unwrap_err();
        assert!(e.contains("`x` is 8 bytes"), "{e}");
        // Metadata that changed under the launcher: an argument renamed in the code object.
        let mut renamed = info.clone();
        renamed.params.iter_mut().find(|p| p.name.as_deref() == Some("res_si")).unwrap().name = Some("si".into());
        let e = ArgLayout::resolve(Kernel::Post, &renamed, Kernel::Post.fields()).unwrap_err();
        assert!(e.contains("res_si"), "{e}");
        // A kernarg segment shorter than the arguments.
        let mut short = info.clone();
        short.kernarg_bytes = 64;
        assert!(ArgLayout::resolve(Kernel::Post, &short, Kernel::Post.fields()).is_err());
        // A field listed twice.
        let mut twice: Vec<_> = Kernel::Post.fields().to_vec();
        twice.push(("x", ArgKind::Ptr));
        assert!(ArgLayout::resolve(Kernel::Post, &info, &twice).unwrap_err().contains("twice"));
        // Hidden arguments are the runtime's: a layout still resolves with one appended.
        let mut hidden = info.clone();
        hidden.params.push(mhc_loader::Param {
            ordinal: 99,
            offset: info.kernarg_bytes,
            size: 4,
            name: None,
            kind: Some("hidden_block_count_x".into()),
        });
        hidden.kernarg_bytes += 8;
        assert!(ArgLayout::resolve(Kernel::Post, &hidden, Kernel::Post.fields()).is_ok());
    }

    fn io(t: usize, cfg: &Config, gamma_f: bool) -> PreIo {
        let _ = t;
        PreIo {
            x: Rows { ptr: 0x1000_0000, stride: cfg.k() + 8 },
            phi: 0x2000_0000,
            scale: 0x2100_0000,
            base: 0x2200_0000,
            gamma_k: None,
            gamma_f: gamma_f.then_some(0x2300_0000),
            a: Rows { ptr: 0x3000_0000, stride: cfg.c + 16 },
            y: gamma_f.then_some(Rows { ptr: 0x3100_0000, stride: cfg.c + 32 }),
            h_pre: 0x4000_0000,
            h_post: 0x4100_0000,
            h_res: 0x4200_0000,
            inv_rms: 0x4300_0000,
        }
    }

    fn scratch(cfg: &Config, max_tokens: usize) -> Scratch {
        Scratch { base: 0x9000_0000, layout: WorkspaceLayout::new(cfg, max_tokens) }
    }

    /// Every pointer a kernel argument holds lies in a region the test handed in (or is 0 where
    /// the kernel ignores it), and workspace pointers stay inside the workspace.
    fn inside_workspace(ws: &Scratch, p: u64) -> bool {
        p >= ws.base && p < ws.base + ws.layout.total as u64
    }

    #[test]
    fn pre_and_post_pre_wire_every_buffer_to_its_argument() {
        let cfg = Config::new(4, 4104).with_formulation(Formulation::Paper);
        let (t, ws) = (17, scratch(&cfg, 64));
        let pio = io(t, &cfg, true);
        let steps = pre_steps(&cfg, Dtype::Bf16, t, pre_splits(t, cfg.k()), &ws, &pio, None).unwrap();
        assert_eq!(steps.kernels().collect::<Vec<_>>(), [Kernel::Pre, Kernel::RmsNorm]);
        let [Step::Pre { grid, args }, Step::RmsNorm { grid: g2, args: r }] = steps.as_slice() else { panic!() };
        assert_eq!(*grid, [9, 5, 1]); // K = 16416: ceil(K / 2048) = 9 slices
        assert_eq!((args.x, args.x_stride as usize), (pio.x.ptr, pio.x.stride));
        assert_eq!((args.a, args.a_stride as usize), (pio.a.ptr, pio.a.stride));
        assert_eq!(
            [args.h_pre, args.h_post, args.h_res, args.inv_rms],
            [pio.h_pre, pio.h_post, pio.h_res, pio.inv_rms]
        );
        assert_eq!([args.phi, args.scale, args.base], [pio.phi, pio.scale, pio.base]);
        assert_eq!(args.counter, ws.base);
        assert!(inside_workspace(&ws, args.work) && args.work >= ws.base + ws.layout.counter_bytes as u64);
        let work_end = args.work + pre_work_bytes(t, cfg.k(), cfg.m()) as u64;
        assert!(work_end <= ws.base + ws.layout.total as u64);
        assert_eq!(args.flags, PRE_BF16 | PRE_PAPER);
        assert_eq!((args.f, args.out, args.post_h_post, args.post_h_res), (0, 0, 0, 0));
        assert_eq!((args.splits, args.tokens, args.streams, args.channels, args.iters), (9, 17, 4, 4104, 20));
        assert_eq!(*g2, [17, 1, 1]);
        assert_eq!(
            (r.a, r.a_stride as usize, r.out, r.y_stride as usize),
            (pio.a.ptr, pio.a.stride, 0x3100_0000, cfg.c + 32)
        );
        assert_eq!((r.gamma, r.flags), (0x2300_0000, ACT_BF16));

        // post_pre: the same launch with the post prologue on, reading x and writing `out`.
        let post = PostIo {
            x: pio.x,
            f: Rows { ptr: 0x5000_0000, stride: 4200 },
            h_post: 0x5100_0000,
            h_res: 0x5200_0000,
            out: 0x6000_0000,
        };
        let pio = io(t, &cfg, false);
        let steps = pre_steps(&cfg, Dtype::F32, t, pre_splits(t, cfg.k()), &ws, &pio, Some(&post)).unwrap();
        assert_eq!(steps.kernels().collect::<Vec<_>>(), [Kernel::Pre]);
        let [Step::Pre { args, .. }] = steps.as_slice() else { panic!() };
        assert_eq!(args.flags, PRE_POST | PRE_PAPER);
        assert_eq!(
            (args.x, args.f, args.post_h_post, args.post_h_res, args.out),
            (pio.x.ptr, 0x5000_0000, 0x5100_0000, 0x5200_0000, 0x6000_0000)
        );
        assert_eq!((args.f_stride, args.res_si, args.res_sj), (4200, 4, 1));
        assert_eq!(args.gamma_k, 0, "no gamma_k: the kernel never reads the pointer");
        // gamma_k: flag bit 4 and the pointer, in both entries.
        let gio = PreIo { gamma_k: Some(0x2400_0000), ..pio };
        for post in [None, Some(&post)] {
            let steps = pre_steps(&cfg, Dtype::F32, t, pre_splits(t, cfg.k()), &ws, &gio, post).unwrap();
            let [Step::Pre { args, .. }] = steps.as_slice() else { panic!() };
            assert_eq!((args.flags & PRE_GAMMA_K, args.gamma_k), (PRE_GAMMA_K, 0x2400_0000));
        }
        let other_x = PostIo { x: Rows { ptr: 0x7000_0000, ..pio.x }, ..post };
        assert!(pre_steps(&cfg, Dtype::F32, t, pre_splits(t, cfg.k()), &ws, &pio, Some(&other_x)).is_err());
        // In place, or overlapping by one element, is refused; adjacent is fine.
        let bytes = ((t - 1) * pio.x.stride + cfg.k()) as u64 * 4;
        for (out, ok) in
            [(pio.x.ptr, false), (pio.x.ptr + bytes - 4, false), (pio.x.ptr + bytes, true), (pio.x.ptr - bytes, true)]
        {
            let p = PostIo { out, ..post };
            assert_eq!(
                pre_steps(&cfg, Dtype::F32, t, pre_splits(t, cfg.k()), &ws, &pio, Some(&p)).is_ok(),
                ok,
                "out at x + {}",
                out as i64 - pio.x.ptr as i64
            );
        }
        // y without gamma_f (or the reverse) is refused.
        let half = PreIo { gamma_f: None, ..io(t, &cfg, true) };
        assert!(pre_steps(&cfg, Dtype::F32, t, pre_splits(t, cfg.k()), &ws, &half, None).is_err());
    }

    #[test]
    fn post_head_and_static_wire_every_buffer_to_its_argument() {
        let cfg = Config::new(8, 1032);
        let post = PostIo {
            x: Rows { ptr: 0x1000, stride: 8 * 1032 + 64 },
            f: Rows { ptr: 0x2000, stride: 1040 },
            h_post: 0x3000,
            h_res: 0x4000,
            out: 0x5000,
        };
        let steps = post_steps(&cfg, Dtype::Bf16, 3, &post).unwrap();
        let [Step::Post { grid, args }] = steps.as_slice() else { panic!() };
        assert_eq!(*grid, [5, 3, 1]);
        assert_eq!((args.x, args.f, args.h_post, args.h_res, args.out), (0x1000, 0x2000, 0x3000, 0x4000, 0x5000));
        assert_eq!(
            (args.x_stride, args.f_stride, args.res_si, args.res_sj, args.flags),
            (8 * 1032 + 64, 1040, 1, 8, ACT_BF16)
        );

        let ws = scratch(&cfg, 100);
        let (x, out) = (Rows { ptr: 0x1000, stride: 8 * 1032 }, Rows { ptr: 0x8000, stride: 1032 + 8 });
        let steps = head_steps(&cfg, Dtype::F32, 100, 1, &ws, x, 0x2000, 0x3000, 0x4000, out).unwrap();
        let [Step::Pre { grid, args }] = steps.as_slice() else { panic!() };
        assert_eq!(*grid, [1, 25, 1]);
        assert_eq!(args.flags, PRE_HEAD);
        assert_eq!((args.a, args.a_stride), (0x8000, 1040));
        assert_eq!((args.h_post, args.h_res), (args.h_pre, args.h_pre));
        for p in [args.h_pre, args.inv_rms, args.work] {
            assert!(inside_workspace(&ws, p) && p >= ws.base + ws.layout.scratch as u64);
        }
        assert!(args.inv_rms + 400 <= ws.base + ws.layout.total as u64);
        assert_eq!(args.f, 0);

        let steps =
            static_steps(&cfg, Dtype::Bf16, 7, &ws, 0xc000, x, [0xa000, 0xb000, 0xd000], 0xe000, 0xf000).unwrap();
        assert_eq!(steps.kernels().collect::<Vec<_>>(), [Kernel::Coeffs, Kernel::Static]);
        let s = steps.as_slice();
        let Step::Copy { dst: d0, src: 0xa000, bytes: 32 } = s[0] else { panic!("{:?}", s[0]) };
        let Step::Copy { dst: d1, src: 0xb000, bytes: 32 } = s[1] else { panic!("{:?}", s[1]) };
        let Step::Copy { dst: d2, src: 0xd000, bytes: 256 } = s[2] else { panic!("{:?}", s[2]) };
        // The logits land contiguous: [h_pre n | h_post n | h_res n n] = M floats.
        assert_eq!((d1 - d0, d2 - d0), (32, 64));
        let Step::Coeffs { grid, args: k } = s[3] else { panic!() };
        assert_eq!(grid, [1, 1, 1]);
        assert_eq!((k.p, k.p_stride, k.tokens, k.flags), (d0, cfg.m() as u32, 1, COEFFS_PAPER));
        assert_eq!((k.inv_rms, k.scale, k.base), (0xc000, 0xc004, 0xc010));
        let Step::Static { grid, args: st } = s[4] else { panic!() };
        assert_eq!(grid, [7, 1, 1]);
        assert_eq!((st.h_pre, st.h_post, st.h_res), (k.h_pre, k.h_post, k.h_res));
        assert_eq!((st.x, st.gamma, st.out, st.x_stride, st.flags), (0x1000, 0xe000, 0xf000, 8 * 1032, ACT_BF16));
        // Coefficient outputs do not overlap the logits or each other, and stay in the workspace.
        let regions = [(d0, cfg.m() * 4), (k.h_pre, 32), (k.h_post, 32), (k.h_res, 256)];
        for (i, &(a, la)) in regions.iter().enumerate() {
            assert!(inside_workspace(&ws, a) && a + la as u64 <= ws.base + ws.layout.total as u64);
            for &(b, lb) in &regions[i + 1..] {
                assert!(a + la as u64 <= b || b + lb as u64 <= a, "overlap");
            }
        }
        // Every step's kernel arguments fill their metadata layout.
        for step in s {
            let mut block = KernargBlock::default();
            let ok = match step {
                Step::Coeffs { args, .. } => {
                    ArgLayout::of::<CoeffsArgs>(&Kernel::Coeffs.info().unwrap().1).unwrap().write(args, &mut block)
                }
                Step::Static { args, .. } => {
                    ArgLayout::of::<StaticArgs>(&Kernel::Static.info().unwrap().1).unwrap().write(args, &mut block)
                }
                _ => Ok(()),
            };
            ok.unwrap();
        }
    }

    #[test]
    fn grids_follow_the_kernels_tiles() {
        assert_eq!(post_grid(1, 4096).unwrap(), [16, 1, 1]);
        assert_eq!(post_grid(17, 4104).unwrap(), [17, 17, 1]);
        assert_eq!(post_grid(8192, 7168).unwrap(), [28, 8192, 1]);
        // Decode: K = 4 x 4096 = 16384 split in 8 slices of 2048; T = 17 -> 5 tiles of 4.
        assert_eq!(pre_splits(17, 16384), 8);
        assert_eq!(pre_grid(17, 8).unwrap(), [8, 5, 1]);
        assert_eq!(pre_splits(1, 4 * 7168), 14);
        assert_eq!(pre_splits(64, 32 * 7168), 64);
        assert_eq!(pre_splits(65, 16384), 1);
        assert_eq!(pre_splits(3, 100), 1);
        assert_eq!(pre_grid(8192, 1).unwrap(), [1, 2048, 1]);
        assert_eq!(coeffs_grid(1).unwrap(), [1, 1, 1]);
        assert_eq!(coeffs_grid(9).unwrap(), [3, 1, 1]);
        assert_eq!(token_grid(5).unwrap(), [5, 1, 1]);
        assert!(post_grid(1 << 33, 64).is_err());
        assert_eq!(post_res_strides(Formulation::DeepSeekV4, 4), (1, 4));
        assert_eq!(post_res_strides(Formulation::Paper, 4), (4, 1));
    }

    #[test]
    fn workspace_regions_hold_every_stage_and_keep_counters_apart() {
        for (n, c, t) in [(4, 4096, 1), (4, 4096, 17), (4, 4096, 64), (4, 4096, 65), (32, 7168, 8192), (1, 8, 3)] {
            let cfg = Config::new(n, c);
            let ws = WorkspaceLayout::new(&cfg, t);
            assert_eq!(ws.counter_bytes, t.div_ceil(4) * 4);
            assert!(ws.scratch >= ws.counter_bytes && ws.scratch % 256 == 0);
            for tt in [1, t.min(64), t] {
                let g = pre_splits(tt, cfg.k());
                assert!(ws.scratch + tt * g * (cfg.m() + 1) * 4 <= ws.total, "pre n={n} C={c} T={tt}");
                assert!(ws.scratch + head_scratch(tt, &cfg)[3] <= ws.total, "head");
            }
            assert!(ws.scratch + static_scratch(&cfg)[4] <= ws.total);
        }
        // The split maximum is at 64 tokens when max_tokens is just above it.
        assert_eq!(max_pre_work_bytes(65, 16384, 24), pre_work_bytes(64, 16384, 24));
        let k = static_constants(&Config::new(4, 64));
        assert_eq!(k.len(), 4 + 24);
        assert_eq!(&k[..4], &[1.0; 4]);
        assert!(k[4..].iter().all(|&v| v == 0.0));
    }

    /// The plan refuses a T its kernels' 32-bit offsets cannot address (docs/kernels/
    /// address-arithmetic.md): `mhc_pre`'s partials at n = 32 from T = 985,990, `mhc_post`'s
    /// h_res rows from T = 1,048,577; one token fewer is served.
    #[test]
    fn token_counts_past_the_32_bit_offsets_are_refused() {
        use crate::plan::Slot;
        let arch = mhc_loader::Arch::Gfx942(mhc_loader::AmdFeatures::ANY);
        let at = |slot: Slot, n: usize, c: usize, t: usize| {
            let ranges = choose(arch, 304, &Config::new(n, c), Dtype::F32, slot, t).unwrap();
            crate::plan::Ranges(ranges).at(slot, "gfx942", t).map(|v| v.id().to_string())
        };
        assert_eq!(at(Slot::Pre, 32, 4096, 985_989).unwrap(), "pre_gfx942");
        let e = at(Slot::Pre, 32, 4096, 985_990).unwrap_err().to_string();
        assert!(e.contains("32-bit offsets") && e.contains("985990"), "{e}");
        assert!(at(Slot::Post, 32, 64, 1_048_576).is_ok());
        assert!(at(Slot::Post, 32, 64, 1_048_577).unwrap_err().to_string().contains("h_res"));
        assert!(at(Slot::Static, 4, 64, 16_777_215).is_ok());
        assert!(at(Slot::Static, 4, 64, 16_777_216).unwrap_err().to_string().contains("work-items"));
    }

    #[test]
    fn rows_name_their_kernels() {
        let cfg = Config::new(4, 64);
        let reg = mhc_loader::Registry::embedded().unwrap();
        let row = |id: &str| reg.get(id).unwrap();
        assert_eq!(kernels_of(row("post_gfx942"), &cfg).unwrap(), [Kernel::Post]);
        assert_eq!(kernels_of(row("static_gfx942"), &cfg).unwrap(), [Kernel::Static, Kernel::Coeffs]);
        let f = Config { gamma_f: true, ..cfg };
        assert_eq!(kernels_of(row("post_pre_gfx942"), &f).unwrap(), [Kernel::Pre, Kernel::RmsNorm]);
        assert_eq!(kernels_of(row("post_pre_gfx942"), &cfg).unwrap(), [Kernel::Pre]);
        assert_eq!(kernels_of(row("head_gfx942"), &cfg).unwrap(), [Kernel::Pre]);
    }
}
