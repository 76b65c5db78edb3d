//! The argument blocks of the sm_90a kernels: one `#[repr(C)]` struct per kernel family, laid
//! out as the kernel's single parameter (`.param .align 8 .b8 args[N]`; offsets in the header of
//! each `asm/ptx/sm90/*.ptx`). `Pod` proves at compile time that no struct has padding, so a
//! launch copies the block as bytes; the plan checks each struct's size against the parameter
//! bytes the loader reads from the code object when it loads the kernel.

use bytemuck::{Pod, Zeroable};

/// `post` arguments (asm/ptx/sm90/post.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct PostArgs {
    pub x: u64,
    pub f: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub out: u64,
    pub x_stride: u64,
    pub f_stride: u64,
    pub out_stride: u64,
    pub items: u32,
    pub chunks: u32,
    pub cbytes: u32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<PostArgs>() == 80);

/// `head` arguments (asm/ptx/sm90/head.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct HeadArgs {
    pub x: u64,
    pub phi: u64,
    pub scale: u64,
    pub base: u64,
    pub out: u64,
    pub x_stride: u64,
    pub out_stride: u64,
    pub tokens: u32,
    pub cbytes: u32,
    pub kchunks: u32,
    pub cchunks: u32,
    pub eps_norm: f32,
    pub eps_hc: f32,
    pub inv_k: f32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<HeadArgs>() == 88);

/// `static` arguments (asm/ptx/sm90/static.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct StaticArgs {
    pub x: u64,
    pub h_pre_logits: u64,
    pub h_post_logits: u64,
    pub h_res_logits: u64,
    pub gamma: u64,
    pub out: u64,
    pub x_stride: u64,
    pub out_stride: u64,
    pub tokens: u32,
    pub cbytes: u32,
    pub cchunks: u32,
    pub iters: u32,
    pub eps_hc: f32,
    pub eps_f: f32,
    pub inv_c: f32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<StaticArgs>() == 96);

/// `expand` arguments (asm/ptx/sm90/expand.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct ExpandArgs {
    pub e: u64,
    pub out: u64,
    pub e_stride: u64,
    pub out_stride: u64,
    pub items: u32,
    pub chunks: u32,
    pub cbytes: u32,
    pub n: u32,
}
const _: () = assert!(std::mem::size_of::<ExpandArgs>() == 48);

/// `coeffs` arguments (asm/ptx/sm90/coeffs.ptx header).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct CoeffsArgs {
    pub p: u64,
    pub inv_rms: u64,
    pub scale: u64,
    pub base: u64,
    pub h_pre: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub tokens: u32,
    pub streams: u32,
    pub iters: u32,
    pub eps_hc: f32,
    pub flags: u32,
    pub p_stride: u32,
}
const _: () = assert!(std::mem::size_of::<CoeffsArgs>() == 80);

/// Arguments of `mhc_pre_sm90_*` (one `.param .align 8 .b8 p_args[232]`; offsets in the header
/// of asm/ptx/sm90/pre.ptx). Unused pointers are 0 and never dereferenced.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct PreArgs {
    pub x: u64,
    pub f: u64,
    pub h_post_in: u64,
    pub h_res_in: u64,
    pub x_out: u64,
    pub phi: u64,
    pub scale: u64,
    pub base: u64,
    pub gamma_k: u64,
    pub gamma_f: u64,
    pub a: u64,
    pub y: u64,
    pub h_pre: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub inv_rms: u64,
    pub ws_p: u64,
    pub ws_ss: u64,
    pub ws_part: u64,
    pub ws_cnt: u64,
    pub tokens: u32,
    pub n: u32,
    pub c: u32,
    pub k: u32,
    pub m: u32,
    /// Row stride of the logit buffers: M rounded up to 32 (one logit group = 4 mma n-tiles).
    pub ldp: u32,
    /// Row strides in elements.
    pub x_stride: u32,
    pub f_stride: u32,
    pub xo_stride: u32,
    pub a_stride: u32,
    pub y_stride: u32,
    /// Length of one CTA's slice of the reduction (j-space elements, a multiple of 256).
    pub kslice: u32,
    /// CTAs per 32-token tile (1 = prefill shape).
    pub splits: u32,
    pub iters: u32,
    /// 1 = Paper formulation, 2 = gamma_k, 4 = gamma_f, 8 = post (post_pre), 16 = split
    /// prefill (the last CTA of a tile finishes it alone; the others leave).
    pub flags: u32,
    pub eps_norm: f32,
    pub eps_hc: f32,
    pub eps_f: f32,
}
const _: () = assert!(std::mem::size_of::<PreArgs>() == 232);

/// Arguments of `mhc_pre_decode_sm90_*` (one `.param .align 8 .b8 p_args[144]`; offsets in the
/// header of asm/ptx/sm90/pre_decode.ptx). `gamma_k` is 0 unless flags bit 1.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct PreDecodeArgs {
    pub x: u64,
    pub phi: u64,
    pub scale: u64,
    pub base: u64,
    pub gamma_k: u64,
    pub a: u64,
    pub h_pre: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub inv_rms: u64,
    /// Partial rows `[S][T][32]` of tagged words (ss, then the M logits; each word = f32 bits,
    /// then the call's tag: see the PTX header, TAGS).
    pub ws_part: u64,
    /// The epoch word (u32: the previous call's tag; zero in a fresh workspace), then at +256
    /// the mid kernel's tagged h_pre `[MID_HPRE_COPIES][64][4]`.
    pub ws_sync: u64,
    pub tokens: u32,
    pub n: u32,
    pub c: u32,
    pub m: u32,
    /// Row strides in elements.
    pub x_stride: u32,
    pub a_stride: u32,
    /// Channels per CTA (a multiple of 8, at most `DECODE_MAX_CPC` (64)).
    pub cpc: u32,
    pub iters: u32,
    /// 1 = Paper formulation, 2 = gamma_k.
    pub flags: u32,
    pub eps_norm: f32,
    pub eps_hc: f32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<PreDecodeArgs>() == 144);

/// Arguments of `mhc_pre_gemm_bf16_n*` (one `.param .align 8 .b8 args[144]`; offsets in the
/// header of asm/ptx/sm90/pre_gemm.ptx).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct PreGemmArgs {
    pub x: u64,
    pub phi: u64,
    pub scale: u64,
    pub base: u64,
    pub a: u64,
    pub h_pre: u64,
    pub h_post: u64,
    pub h_res: u64,
    pub inv_rms: u64,
    /// One u32 arrival counter per token tile (zero between calls).
    pub ws_cnt: u64,
    /// Partial sums of squares `[slab][256]` f32.
    pub ws_ss: u64,
    /// Partial logits `[slab][256][NT * 128]` f32, slab = ks * tiles + tile.
    pub ws_p: u64,
    /// The epoch word, the grid's arrival counter, then per token tile its ready word and
    /// `GEMM_MIX_PARTS` (8) claim words from byte 64 (tags: never reset; zero in a fresh workspace).
    pub ws_sync: u64,
    pub tokens: u32,
    pub c: u32,
    /// Row strides in elements.
    pub x_stride: u32,
    pub a_stride: u32,
    pub ksplit: u32,
    /// Ring stages (64 K-elements each) per split.
    pub kstages: u32,
    pub iters: u32,
    /// 1 = Paper formulation.
    pub flags: u32,
    pub eps_norm: f32,
    pub eps_hc: f32,
}
const _: () = assert!(std::mem::size_of::<PreGemmArgs>() == 144);

/// The fused entry's arguments: the `pre` side as the other entry's, then layer l's post inputs
/// and `x'` (asm/ptx/sm90/gen_pre_pc.py `A_F` ..).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, Pod, Zeroable)]
pub struct PostPrePcArgs {
    /// `x` here is layer l's residual (post's input), `x_stride` its row stride.
    pub pre: PreDecodeArgs,
    pub f: u64,
    pub h_post_in: u64,
    pub h_res_in: u64,
    pub x_out: u64,
    /// Row strides in elements.
    pub f_stride: u32,
    pub x_out_stride: u32,
}
const _: () = assert!(std::mem::size_of::<PostPrePcArgs>() == 184);

/// The TMA entry's parameter bank: its one parameter (`p_args`: the other pre entry's arguments,
/// then at 192 the tensor map of x, gen_pre_pc.py `A_TMAP`) is 64-byte aligned, as a tensor map
/// must be, and sm_90's parameters start 16 bytes past a 64-byte boundary, so ptxas puts it 48
/// bytes in. The launcher points the driver at each parameter's offset in this struct (the loader
/// reads the offsets and the bank size, 368, from the cubin and checks them at load).
#[repr(C)]
#[derive(Debug, Clone, Copy, Pod, Zeroable)]
pub struct PreTmaArgs {
    pub lead: [u8; 48],
    pub pre: PreDecodeArgs,
    pub pad: [u8; 48],
    pub tmap: [u64; 16],
}
const _: () = assert!(std::mem::size_of::<PreTmaArgs>() == 368);
const _: () = assert!(std::mem::offset_of!(PreTmaArgs, tmap) == 48 + 192);
