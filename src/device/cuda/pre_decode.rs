//! The few-token kernels of `pre` (asm/ptx/sm90/pre_decode.ptx): one CTA per channel range for
//! all tokens (its x and phi slices loaded once), n <= 4, no gamma_f, launched cooperatively
//! (the kernel-table rows say so: CTAs wait for each other's data, so all must be resident).
//! No grid arrival counters: partial rows and h_pre are tagged words (f32 bits + the call's tag,
//! single-copy atomic), and each reader polls exactly the words it needs (the PTX header, TAGS).
//!
//! - The **mid** entries (`mhc_pre_mid_sm90_*`) serve `pre` for `1..=`[`MID_MAX_TOKENS`] tokens
//!   wherever [`mid_unsupported`] is `None` (C >= 512): CTA `s` polls and reduces only token
//!   `s`'s rows, publishes its `h_pre` (tagged, [`MID_HPRE_COPIES`] copies), and every CTA polls
//!   those and mixes its channels of every token.
//! - The **decode** entries (`mhc_pre_decode_sm90_*`) serve T <= [`DECODE_KERNEL_MAX_TOKENS`]
//!   where the mid entries cannot run ([`decode_unsupported`] is `None`, C < 512) and forced
//!   CTA counts (`PreKernel::Decode`): every CTA reduces every token's pre-logits itself (see
//!   [`decode_shape`]), which with many CTAs hammers the same sectors.

use super::kernels::PreFamily;
use super::memory::DeviceTensor;
use super::plan::{Bucket, Plan, Workspace};
use super::pre::{Checked, PreOutViews, PreParamViews, FLAG_GAMMA_K, FLAG_PAPER};
use super::stream::Stream;
use crate::config::{Config, Dtype};
use crate::error::{Error, Result};

/// Arguments of `mhc_pre_decode_sm90_*` (one `.param .align 8 .b8 p_args[144]`; offsets in the
/// header of asm/ptx/sm90/pre_decode.ptx). `gamma_k` is 0 unless flags bit 1.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
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
    /// Channels per CTA (a multiple of 8, at most [`DECODE_MAX_CPC`]).
    pub cpc: u32,
    pub iters: u32,
    /// 1 = Paper formulation, 2 = gamma_k.
    pub flags: u32,
    pub eps_norm: f32,
    pub eps_hc: f32,
    pub pad: u32,
}
const _: () = assert!(std::mem::size_of::<PreDecodeArgs>() == 144);

/// Largest T of the decode kernel (its shared x slice holds 16 token rows).
pub const DECODE_KERNEL_MAX_TOKENS: usize = 16;
/// Largest n of the decode kernel (M <= 24 logits).
pub const DECODE_MAX_N: usize = 4;
/// Most channels one decode CTA owns (the shared slices hold n x 64 elements per row).
pub const DECODE_MAX_CPC: usize = 64;
/// Most CTAs of the decode kernel (its phase-4 loads: 9 slots of 16 lanes per token).
pub const DECODE_MAX_CTAS: usize = 144;

/// Why the decode kernel cannot run `cfg` on a GPU of `sms` multiprocessors (`None`: it can).
pub(crate) fn decode_unsupported(cfg: &Config, sms: usize) -> Option<String> {
    if cfg.n > DECODE_MAX_N {
        return Some(format!("n = {} > {DECODE_MAX_N}", cfg.n));
    }
    if cfg.gamma_f {
        return Some("gamma_f (F-pre-norm needs a second grid-wide reduction): general kernel".into());
    }
    if cfg.c % 8 != 0 {
        return Some(format!("C = {} is not a multiple of 8", cfg.c));
    }
    if decode_shape(cfg, sms, 1, None).is_none() {
        return Some(format!("C = {} > {DECODE_MAX_CPC} channels x {} CTAs", cfg.c, sms.min(DECODE_MAX_CTAS)));
    }
    None
}

/// Above this many tokens the decode kernel uses the fewest CTAs it can (64 channels each):
/// every CTA reads every CTA's partial rows of every token after the grid barrier, so that
/// read grows with T x CTAs (H200, bf16 n=4, graph: T = 16, C = 4096 10.05 us over 128 CTAs,
/// 9.69 over 86, 9.46 over 64; C = 7168 11.20 over 128, 10.82 over 112; at T = 1 the count
/// does not matter: 6.63 / 6.72 / 6.71 us over 128 / 86 / 64; notes/cuda-pre.md).
pub const DECODE_FEW_CTAS_ABOVE: usize = 8;

/// `(ctas, cpc)` of the decode kernel for `t` tokens: channels per CTA `cpc` (a multiple of
/// 8, at most [`DECODE_MAX_CPC`]) and `ctas = ceil(C / cpc)` <= `min(sms, 144)` (all
/// co-resident: one CTA per SM fits). Few tokens spread C over as many CTAs as allowed; more
/// than [`DECODE_FEW_CTAS_ABOVE`] use the fewest, but not fewer than T while C has T chunks of
/// 8 channels; `ctas` (benchmarks, tests) asks for about that many instead. `None` if C needs
/// more than 64 channels per CTA.
pub(crate) fn decode_shape(cfg: &Config, sms: usize, t: usize, ctas: Option<usize>) -> Option<(usize, usize)> {
    let cap = sms.clamp(1, DECODE_MAX_CTAS);
    let chunks = cfg.c.div_ceil(8);
    let fewest = chunks.div_ceil(DECODE_MAX_CPC / 8);
    // At least T CTAs where C allows it: CTA s runs the Sinkhorn of tokens s, s + S, ... in series.
    let auto = if t > DECODE_FEW_CTAS_ABOVE { fewest.max(t) } else { cap };
    let target = ctas.unwrap_or(auto).clamp(1, cap);
    let nch = chunks.div_ceil(target);
    if nch == 0 || nch * 8 > DECODE_MAX_CPC {
        return None;
    }
    let cpc = nch * 8;
    Some((cfg.c.div_ceil(cpc), cpc))
}

/// The decode kernel's entries (asm/ptx/sm90/pre_decode.ptx).
pub(crate) const DECODE_DTYPES: [(Dtype, &str); 2] =
    [(Dtype::Bf16, "mhc_pre_decode_sm90_bf16"), (Dtype::F32, "mhc_pre_decode_sm90_f32")];

/// The mid kernel's entries (asm/ptx/sm90/pre_decode.ptx, gen_pre_decode.py `entry(mid=True)`).
pub(crate) const MID_DTYPES: [(Dtype, &str); 2] =
    [(Dtype::Bf16, "mhc_pre_mid_sm90_bf16"), (Dtype::F32, "mhc_pre_mid_sm90_f32")];

/// The mid16 entries: the mid kernel in the decode entry's 16-row static shared memory (no
/// dynamic shared memory: its loads take 1.15 us instead of 1.44 at T = 1, H100 stamps).
pub(crate) const MID16_DTYPES: [(Dtype, &str); 2] =
    [(Dtype::Bf16, "mhc_pre_mid16_sm90_bf16"), (Dtype::F32, "mhc_pre_mid16_sm90_f32")];

/// Largest T the plan gives the mid16 entries: ahead of the mid entries up to here (H100, bf16,
/// in a graph, two A/B runs: C = 4096 T = 1 / 4 5.21 / 5.65 -> 5.11 / 5.42 us, C = 7168
/// 5.83 / 6.52 -> 5.54 / 6.13), not at T = 16 (6.24 -> 6.29; post_pre 8.74 -> 9.19).
pub(crate) const MID16_MAX_TOKENS: usize = 8;

/// Copies of the mid kernel's tagged h_pre in the workspace (CTA s polls copy s % 8: one
/// 32-byte sector polled by every CTA cost ~0.6 us per poll round at T = 1, H100).
pub(crate) const MID_HPRE_COPIES: usize = 8;

/// Token capacity of the mid kernel (its shared x slice and partial sums hold 64 token rows;
/// gen_pre_decode.py `MID_TOKENS`).
pub const MID_MAX_TOKENS: usize = 64;

/// Dynamic shared memory of the mid kernel: phi_s [24][260] f32, x_s [64][260] f32, red
/// [8][64][33] f32 (gen_pre_decode.py `MID_SMEM`).
pub const MID_SMEM: u32 = 24960 + 64 * 1040 + 8 * 64 * 132;

/// `(ctas, cpc)` of the mid kernel: C spread over as many CTAs as allowed (the projection's
/// FMAs grow with T), as [`decode_shape`] at one token, or about `ctas` (benchmarks, tests).
/// `None` unless every token has its own CTA (CTA s finishes token s).
pub(crate) fn mid_shape(cfg: &Config, sms: usize, t: usize, ctas: Option<usize>) -> Option<(usize, usize)> {
    decode_shape(cfg, sms, 1, ctas).filter(|&(s, _)| s >= t)
}

/// Why the mid kernel cannot run `cfg` on a GPU of `sms` multiprocessors (`None`: it can): the
/// decode kernel's limits, and C must give every one of [`MID_MAX_TOKENS`] tokens a CTA. Where
/// it runs it is also ahead of the persistent-cluster kernel (H100, bf16, C = 4096, T = 17 / 32
/// / 64: 11.4 / 11.7 / 13.5 us per call against pre_pc's 14.4 / 14.5 / 14.9).
pub(crate) fn mid_unsupported(cfg: &Config, sms: usize) -> Option<String> {
    if let Some(why) = decode_unsupported(cfg, sms) {
        return Some(why);
    }
    if mid_shape(cfg, sms, MID_MAX_TOKENS, None).is_none() {
        return Some(format!(
            "C = {} spreads over fewer than {MID_MAX_TOKENS} CTAs of >= 8 channels (or {sms} SMs)",
            cfg.c
        ));
    }
    None
}

impl Plan {
    /// The argument block shared by the decode and the persistent-cluster `pre` kernels, without
    /// the decode kernel's workspace and channel split (0 here).
    pub(super) fn pre_decode_args(
        &self,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &PreOutViews<'_>,
        chk: &Checked,
    ) -> PreDecodeArgs {
        let cfg = &self.cfg;
        PreDecodeArgs {
            x: x.ptr,
            phi: params.phi.ptr,
            scale: params.scale.ptr,
            base: params.base.ptr,
            gamma_k: chk.gamma_k,
            a: out.a.ptr,
            h_pre: out.h_pre.ptr,
            h_post: out.h_post.ptr,
            h_res: out.h_res.ptr,
            inv_rms: out.inv_rms.ptr,
            ws_part: 0,
            ws_sync: 0,
            tokens: chk.t as u32,
            n: cfg.n as u32,
            c: cfg.c as u32,
            m: cfg.m() as u32,
            x_stride: x.layout.row_stride as u32,
            a_stride: out.a.layout.row_stride as u32,
            cpc: 0,
            iters: cfg.sinkhorn_iters,
            flags: chk.flags & (FLAG_PAPER | FLAG_GAMMA_K),
            eps_norm: cfg.eps_norm as f32,
            eps_hc: cfg.eps_hc as f32,
            pad: 0,
        }
    }

    /// The decode kernel's launch (bucket `b` is its row) on views [`Plan::pre_checked`]
    /// accepted (`chk`, T > 0); `ctas` overrides the CTA count.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn pre_decode_launch(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        b: &Bucket,
        ctas: Option<usize>,
        chk: &Checked,
    ) -> Result<()> {
        let cfg = &self.cfg;
        let t = chk.t;
        let sms = self.dev.sm_count() as usize;
        let mid = b.desc.pre_family == PreFamily::Mid;
        let shape = if mid { mid_shape(cfg, sms, t, ctas) } else { decode_shape(cfg, sms, t, ctas) };
        let (grid, cpc) = shape.ok_or_else(|| {
            let want = if mid { format!("at least T = {t} CTAs of") } else { "enough CTAs for".into() };
            Error::shape("ctas", format!("{want} <= {DECODE_MAX_CPC} channels each"), ctas.unwrap_or(0))
        })?;
        let wsp = ws.device_ptr();
        let mut args = self.pre_decode_args(x, params, out, chk);
        args.ws_part = wsp + chk.lay.dpart as u64;
        args.ws_sync = wsp + chk.lay.dsync as u64;
        args.cpc = cpc as u32;
        let shared = b.desc.max_dynamic_shared;
        self.launch(stream, b, grid as u32, b.desc.threads, shared, &args)
    }

    /// Timing builds only (`EXP=stamps python3 asm/ptx/sm90/gen_pre_decode.py`, then `mhc asm`):
    /// the decode (or mid) kernel's phase stamps from its last call at `t` tokens, per CTA 8
    /// pairs (%globaltimer ns, %clock64 cycles): kernel start, phi/x in shared memory,
    /// projection done, partial rows stored, thread 0's own poll of its token's rows done (at
    /// once in a CTA without a token); then decode: own token's rows reduced, Sinkhorn done
    /// (thread 0), mix done (thread 32); mid: own token's rows reduced (thread 32), every
    /// token's h_pre seen (thread 32), mix done (thread 32). In a normal build the words are
    /// meaningless.
    #[doc(hidden)]
    pub fn debug_decode_stamps(&self, ws: &Workspace, t: usize) -> Result<Vec<[(u64, u64); 8]>> {
        let sms = self.dev.sm_count() as usize;
        let mid = self.pre_uses_mid_kernel(t);
        let shape = if mid { mid_shape(&self.cfg, sms, t, None) } else { decode_shape(&self.cfg, sms, t, None) };
        let (s, _) = shape.ok_or_else(|| Error::shape("tokens", "a decode or mid shape".to_string(), t))?;
        let lay = super::pre::ws_layout(&self.cfg, self.dtype, self.max_tokens);
        let all: Vec<u64> = ws.buf.to_vec()?;
        let base = (lay.dpart + s * t * 256) / 8;
        if all.len() < base + 16 * s {
            // The stamps sit after the partial rows: a plan for more tokens leaves room for them.
            return Err(Error::shape(
                "workspace",
                format!(">= {} bytes for the stamps", (base + 16 * s) * 8),
                ws.bytes(),
            ));
        }
        Ok((0..s)
            .map(|c| std::array::from_fn(|k| (all[base + 16 * c + 2 * k], all[base + 16 * c + 2 * k + 1])))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_shape_covers_c_once_within_the_kernel_limits() {
        for sms in [1, 8, 114, 132, 200] {
            for c in [8, 64, 72, 1280, 1288, 4096, 7168, 8448, 8456, 16384] {
                let cfg = Config::new(4, c);
                let supported = decode_unsupported(&cfg, sms).is_none();
                for t in [1, 8, 9, 16] {
                    for ctas in [None, Some(1), Some(64), Some(1000)] {
                        match decode_shape(&cfg, sms, t, ctas) {
                            Some((s, cpc)) => {
                                assert!(supported, "C={c} sms={sms}: a shape for an unsupported C");
                                assert!(cpc % 8 == 0 && cpc <= DECODE_MAX_CPC);
                                assert!(s >= 1 && s <= sms.min(DECODE_MAX_CTAS), "C={c} sms={sms}: {s} CTAs");
                                assert!(s * cpc >= c && (s - 1) * cpc < c, "C={c}: every CTA owns a channel");
                            }
                            None => assert!(ctas.is_some() || !supported, "C={c} sms={sms} t={t}"),
                        }
                    }
                }
            }
        }
        let cfg = Config::new(4, 4096);
        assert_eq!(decode_shape(&cfg, 132, 1, None), Some((128, 32)));
        assert_eq!(decode_shape(&cfg, 132, 16, None), Some((64, 64)));
        assert_eq!(decode_shape(&Config::new(4, 7168), 132, 16, None), Some((112, 64)));
        assert_eq!(decode_shape(&Config::new(4, 1280), 132, 16, None), Some((20, 64)));
        assert_eq!(decode_shape(&Config::new(4, 256), 132, 16, None), Some((16, 16)));
        assert_eq!(decode_shape(&Config::new(4, 64), 132, 16, None), Some((8, 8)));
        assert!(decode_unsupported(&Config::new(4, 8456), 132).is_some());
        assert!(decode_unsupported(&Config::new(8, 1280), 132).is_some());
        let gf = Config { gamma_f: true, ..Config::new(4, 1280) };
        assert!(decode_unsupported(&gf, 132).is_some());
    }

    #[test]
    fn mid_shape_gives_every_token_a_cta() {
        for sms in [64, 114, 132, 144] {
            for c in [512, 520, 1280, 1288, 4096, 7168, 8448] {
                let cfg = Config::new(4, c);
                // Supported wherever C splits into >= 64 CTAs of <= 64 channels (whole chunks of 8).
                let nch = c.div_ceil(8).div_ceil(sms);
                let supported = nch * 8 <= DECODE_MAX_CPC && c.div_ceil(8).div_ceil(nch) >= MID_MAX_TOKENS;
                assert_eq!(mid_unsupported(&cfg, sms).is_none(), supported, "C={c} sms={sms}");
                if !supported {
                    continue;
                }
                for t in [17, 33, 64] {
                    let (s, cpc) = mid_shape(&cfg, sms, t, None).unwrap();
                    assert!(s >= t && s <= sms && cpc <= DECODE_MAX_CPC && s * cpc >= c, "C={c} sms={sms} t={t}");
                }
            }
        }
        assert_eq!(mid_shape(&Config::new(4, 4096), 132, 64, None), Some((128, 32)));
        assert_eq!(mid_shape(&Config::new(4, 7168), 132, 64, None), Some((128, 56)));
        assert_eq!(mid_shape(&Config::new(4, 4096), 132, 40, Some(32)), None);
        assert!(mid_unsupported(&Config::new(4, 520), 64).is_some());
        assert!(mid_unsupported(&Config::new(4, 512), 132).is_none());
        assert!(mid_unsupported(&Config::new(4, 504), 132).is_some());
        assert!(mid_unsupported(&Config::new(4, 4096), 60).is_some());
        assert!(mid_unsupported(&Config::new(8, 4096), 132).is_some());
        assert!(mid_unsupported(&Config::new(4, 4096), 132).is_none());
        assert_eq!(MID_SMEM as usize, 24960 + MID_MAX_TOKENS * 1040 + 8 * MID_MAX_TOKENS * 132);
    }
}
