//! The few-token kernels of `pre` (asm/ptx/sm90/pre_decode.ptx): one CTA per channel range for
//! all tokens (its x and phi slices loaded once), n <= 4 and n = 8, no gamma_f, launched cooperatively
//! (their catalogue rows say so: CTAs wait for each other's data, so all must be resident).
//! No grid arrival counters: partial rows and h_pre are tagged words (f32 bits + the call's tag,
//! single-copy atomic), and each reader polls exactly the words it needs (the PTX header, TAGS).
//!
//! - The **mid** entries (`mhc_pre_mid_sm90_*`) serve `pre` for `1..=`[`MID_MAX_TOKENS`] tokens
//!   wherever [`mid_limits`] allows (C >= 512): CTA `s` polls and reduces only token
//!   `s`'s rows, publishes its `h_pre` (tagged, [`MID_HPRE_COPIES`] copies), and every CTA polls
//!   those and mixes its channels of every token.
//! - The **mid_n8** entries (`mhc_pre_mid_n8_sm90_*`, `mhc_pre_mid32_n8_sm90_*`) are the mid
//!   kernel for n = 8 at T <= 16 in 16 token rows and at T = 17..32 in 32: at most [`max_cpc`]
//!   = 32 channels a CTA, 84-word partial rows ([`part_rows`]), the Sinkhorn on warp 0 (lane j
//!   mod 8 keeping column and row j).
//! - The **post_pre** entries (`mhc_post_pre_mid_sm90_*`, `mhc_post_pre_mid16_sm90_*`,
//!   `mhc_post_pre_mid_n8_sm90_*`) are the mid, mid16 and mid_n8 entries with layer l's post
//!   folded into their load phase: each CTA also loads f's slice and the coefficients, computes
//!   `x'` of its channels with the post kernel's f32 operations in its order, stores it and runs
//!   `pre` on it from shared memory ([`super::post_pre_launch`]): one launch, the outputs of
//!   `post` then `pre` bit for bit.
//! - The **decode** entries (`mhc_pre_decode_sm90_*`) serve T <= [`DECODE_KERNEL_MAX_TOKENS`]
//!   where the mid entries cannot run (C < 512) and on request (forced CTA counts): every CTA reduces every token's pre-logits itself (see
//!   [`decode_shape`]), which with many CTAs hammers the same sectors.

use super::{PostInViews, PreCall, FLAG_EARLY_PARAMS, FLAG_GAMMA_K, FLAG_PAPER};
use crate::config::Config;
use crate::device::cuda::abi::PreDecodeArgs;
pub(crate) use crate::device::cuda::abi::MID_HPRE_COPIES;
pub use crate::device::cuda::abi::{DECODE_MAX_CPC, DECODE_MAX_CTAS, DECODE_MAX_N, MID_MAX_TOKENS};
use crate::device::cuda::abi::{DECODE_ROW_WORDS, DECODE_SLICE, MID_N8_MAX_TOKENS, MID_N8_N, MID_N8_ROW_WORDS};
use crate::device::cuda::launch::{Launch, LaunchKind, Row};
use crate::device::cuda::memory::DeviceTensorMut;
use crate::error::{Error, Result};

/// Most channels one few-token CTA owns for `n` streams: its shared rows hold the n x cpc
/// elements of its slice ([`DECODE_SLICE`]), and never more than [`DECODE_MAX_CPC`] (n = 8: 32).
pub(crate) fn max_cpc(n: usize) -> usize {
    (DECODE_SLICE / n.max(1)).min(DECODE_MAX_CPC) / 8 * 8
}

/// `(tagged words per partial row, token capacity)` of the few-token kernels for `n` streams:
/// n <= 4 the decode / mid entries' 32-word rows for up to [`MID_MAX_TOKENS`] tokens, n = 8 the
/// mid_n8 entries' 84-word rows for up to 16; `None` for other n (no few-token kernel).
pub(crate) fn part_rows(n: usize) -> Option<(usize, usize)> {
    match n {
        1..=DECODE_MAX_N => Some((DECODE_ROW_WORDS, MID_MAX_TOKENS)),
        MID_N8_N => Some((MID_N8_ROW_WORDS, MID_N8_MAX_TOKENS)),
        _ => None,
    }
}

/// Above this many tokens the decode kernel uses the fewest CTAs it can (64 channels each):
/// every CTA reads every CTA's partial rows of every token after the grid barrier, so that
/// read grows with T x CTAs (H200, bf16 n=4, graph: T = 16, C = 4096 10.05 us over 128 CTAs,
/// 9.69 over 86, 9.46 over 64; C = 7168 11.20 over 128, 10.82 over 112; at T = 1 the count
/// does not matter: 6.63 / 6.72 / 6.71 us over 128 / 86 / 64; docs/kernels/pre.md).
pub const DECODE_FEW_CTAS_ABOVE: usize = 8;

/// `(ctas, cpc)` of the decode kernel for `t` tokens: channels per CTA `cpc` (a multiple of
/// 8, at most [`max_cpc`]) and `ctas = ceil(C / cpc)` <= `min(sms, 144)` (all
/// co-resident: one CTA per SM fits). Few tokens spread C over as many CTAs as allowed; more
/// than [`DECODE_FEW_CTAS_ABOVE`] use the fewest, but not fewer than T while C has T chunks of
/// 8 channels; `ctas` (benchmarks, tests) asks for about that many instead. `None` if C needs
/// more than [`max_cpc`] channels per CTA.
pub(crate) fn decode_shape(cfg: &Config, sms: usize, t: usize, ctas: Option<usize>) -> Option<(usize, usize)> {
    let cap = sms.clamp(1, DECODE_MAX_CTAS);
    let chunks = cfg.c.div_ceil(8);
    let most = max_cpc(cfg.n);
    let fewest = chunks.div_ceil(most / 8);
    // At least T CTAs where C allows it: CTA s runs the Sinkhorn of tokens s, s + S, ... in series.
    let auto = if t > DECODE_FEW_CTAS_ABOVE { fewest.max(t) } else { cap };
    let target = ctas.unwrap_or(auto).clamp(1, cap);
    let nch = chunks.div_ceil(target);
    if nch == 0 || nch * 8 > most {
        return None;
    }
    let cpc = nch * 8;
    Some((cfg.c.div_ceil(cpc), cpc))
}

/// `(ctas, cpc)` of the mid kernel: C spread over as many CTAs as allowed (the projection's
/// FMAs grow with T), as [`decode_shape`] at one token, or about `ctas` (benchmarks, tests).
/// `None` unless every token has its own CTA (CTA s finishes token s).
pub(crate) fn mid_shape(cfg: &Config, sms: usize, t: usize, ctas: Option<usize>) -> Option<(usize, usize)> {
    decode_shape(cfg, sms, 1, ctas).filter(|&(s, _)| s >= t)
}

/// The plan's launch of `t` tokens on `sms` SMs in words (`mhc inspect --explain`); `mid`: a
/// mid entry (CTA s finishes token s), else the decode entry.
pub(crate) fn account(cfg: &Config, sms: usize, t: usize, mid: bool) -> String {
    let shape = if mid { mid_shape(cfg, sms, t, None) } else { decode_shape(cfg, sms, t, None) };
    let Some((ctas, cpc)) = shape else {
        return format!("no launch: C = {} needs more than {} channels a CTA\n", cfg.c, max_cpc(cfg.n));
    };
    let rule = if mid {
        "C over as many CTAs as allowed, at least one a token".to_string()
    } else if t > DECODE_FEW_CTAS_ABOVE {
        format!(
            "T > {DECODE_FEW_CTAS_ABOVE}: the fewest CTAs of at most {} channels, not fewer than T where C allows",
            max_cpc(cfg.n)
        )
    } else {
        "C over as many CTAs as allowed".to_string()
    };
    format!(
        "{ctas} co-resident CTAs (at most min(SMs, {DECODE_MAX_CTAS}) = {}) of {cpc} channels \
         ({rule})\n",
        sms.clamp(1, DECODE_MAX_CTAS)
    )
}

/// The device's limits of the decode kernel for `cfg` on a GPU of `sms` multiprocessors: C must
/// spread over at most `min(sms, 144)` co-resident CTAs of at most [`max_cpc`] channels.
/// (n, dtype, C granule and options are the catalogue's to check.)
pub(crate) fn decode_limits(cfg: &Config, sms: usize) -> std::result::Result<(), String> {
    if decode_shape(cfg, sms, 1, None).is_none() {
        let most = max_cpc(cfg.n);
        return Err(format!("C = {} > {most} channels x {} CTAs at n = {}", cfg.c, sms.min(DECODE_MAX_CTAS), cfg.n));
    }
    Ok(())
}

/// The device's limits of a mid entry with `rows` token rows (its catalogue tile): the decode
/// kernel's, and C must give every token it may serve (`rows`, at most the capacity of
/// [`part_rows`]: 64, n = 8: 32) a CTA. Where it runs it is also ahead of the persistent-cluster
/// kernel (H100, bf16, C = 4096, T = 17 / 32 / 64: 11.4 / 11.7 / 13.5 us per call against
/// pre_pc's 14.4 / 14.5 / 14.9).
pub(crate) fn mid_limits(cfg: &Config, sms: usize, rows: usize) -> std::result::Result<(), String> {
    decode_limits(cfg, sms)?;
    let (_, capacity) = part_rows(cfg.n).ok_or_else(|| format!("no few-token kernel for n = {}", cfg.n))?;
    let tokens = rows.min(capacity);
    if mid_shape(cfg, sms, tokens, None).is_none() {
        return Err(format!("C = {} spreads over fewer than {tokens} CTAs of >= 8 channels (or {sms} SMs)", cfg.c));
    }
    Ok(())
}

/// The argument block shared by the few-token and the persistent-cluster `pre` kernels, without
/// the few-token kernels' workspace and channel split (0 here).
pub(crate) fn args(call: &PreCall<'_, '_>) -> PreDecodeArgs {
    let PreCall { ctx, x, params, out, chk, .. } = *call;
    let cfg = &ctx.cfg;
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
        flags: chk.flags & (FLAG_PAPER | FLAG_GAMMA_K | FLAG_EARLY_PARAMS),
        eps_norm: cfg.eps_norm as f32,
        eps_hc: cfg.eps_hc as f32,
        pad: 0,
    }
}

/// The decode or mid kernel's launch of `call` (its row): its token rows must hold T, and C
/// must spread over the CTAs the kernel needs; `ctas` asks for about that many. `post` (the
/// post_pre entries): layer l's post inputs and `x_out`, passed after the `pre` arguments.
pub(crate) fn launch(
    call: &PreCall<'_, '_>,
    ctas: Option<usize>,
    post: Option<(&PostInViews<'_>, &DeviceTensorMut<'_>)>,
) -> Result<Launch> {
    let PreCall { ctx, b, lay, wsp, chk, .. } = *call;
    let cfg = &ctx.cfg;
    let t = chk.t;
    let sms = ctx.sm_count as usize;
    let mid = matches!(b.kind, LaunchKind::PreMid | LaunchKind::PostPreMid);
    // The token rows its shared memory holds (the row's tile).
    if t > b.tokens_per_cta() {
        let stage = if b.kind == LaunchKind::PostPreMid { crate::Stage::PostPre } else { crate::Stage::Pre };
        return Err(ctx.refused(stage, b.entry(), format!("T = {t} exceeds its {} token rows", b.tokens_per_cta())));
    }
    let shape = if mid { mid_shape(cfg, sms, t, ctas) } else { decode_shape(cfg, sms, t, ctas) };
    let (grid, cpc) = shape.ok_or_else(|| {
        let want = if mid { format!("at least T = {t} CTAs of") } else { "enough CTAs for".into() };
        Error::shape("ctas", format!("{want} <= {} channels each", max_cpc(cfg.n)), ctas.unwrap_or(0))
    })?;
    let mut a = args(call);
    a.ws_part = wsp + lay.dpart as u64;
    a.ws_sync = wsp + lay.dsync as u64;
    a.cpc = cpc as u32;
    let (grid, shared) = (grid as u32, b.dynamic_shared_max());
    Ok(match post {
        Some((post, x_out)) => Launch::new(b, grid, b.threads(), shared, &super::post_pre_args(a, post, x_out)),
        None => Launch::new(b, grid, b.threads(), shared, &a),
    })
}

/// Timing builds only (`--experiment stamps` of the PTX generator, then `mhc asm`): the few-token
/// kernel's phase stamps from its last call at `t` tokens on `s` CTAs, read from the workspace
/// words `all`, per CTA 8 pairs (%globaltimer ns, %clock64 cycles): kernel start, phi/x in
/// shared memory, projection done, partial rows stored, thread 0's own poll of its token's rows
/// done (at once in a CTA without a token); then decode: own token's rows reduced, Sinkhorn
/// done (thread 0), mix done (thread 32); mid: own token's rows reduced (thread 32), every
/// token's h_pre seen (thread 32), mix done (thread 32). In a normal build the words are
/// meaningless.
#[cfg(feature = "testing")]
pub(crate) fn stamps(lay: &super::WsLayout, all: &[u64], n: usize, s: usize, t: usize) -> Result<Vec<[(u64, u64); 8]>> {
    let (words, _) = part_rows(n).ok_or_else(|| Error::shape("n", "a few-token kernel's n".to_string(), n))?;
    let base = (lay.dpart + s * t * words * 8) / 8;
    if all.len() < base + 16 * s {
        // The stamps sit after the partial rows: a plan for more tokens leaves room for them.
        return Err(Error::shape(
            "workspace",
            format!(">= {} bytes for the stamps", (base + 16 * s) * 8),
            all.len() * 8,
        ));
    }
    Ok((0..s).map(|c| std::array::from_fn(|k| (all[base + 16 * c + 2 * k], all[base + 16 * c + 2 * k + 1]))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_shape_covers_c_once_within_the_kernel_limits() {
        for sms in [1, 8, 114, 132, 200] {
            for c in [8, 64, 72, 1280, 1288, 4096, 7168, 8448, 8456, 16384] {
                let cfg = Config::new(4, c);
                let supported = decode_limits(&cfg, sms).is_ok();
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
        assert!(decode_limits(&Config::new(4, 8456), 132).is_err());
        // n = 8: the shared rows hold 8 x 32 elements of the slice
        assert_eq!(max_cpc(8), 32);
        assert_eq!((max_cpc(1), max_cpc(3), max_cpc(4)), (DECODE_MAX_CPC, DECODE_MAX_CPC, DECODE_MAX_CPC));
        assert_eq!(decode_shape(&Config::new(8, 1280), 132, 1, None), Some((80, 16)));
        assert_eq!(decode_shape(&Config::new(8, 4096), 132, 16, None), Some((128, 32)));
        assert_eq!(decode_shape(&Config::new(8, 4224), 132, 1, None), Some((132, 32)));
        assert_eq!(decode_shape(&Config::new(8, 4232), 132, 1, None), None);
        assert!(mid_limits(&Config::new(8, 4224), 132, 32).is_ok());
        assert!(mid_limits(&Config::new(8, 4232), 132, 16).is_err());
        assert!(mid_limits(&Config::new(8, 512), 16, 16).is_ok(), "16 CTAs hold the mid_n8 entries' 16 tokens");
        assert!(mid_limits(&Config::new(8, 512), 16, 32).is_err(), "the mid32_n8 entries need 32 CTAs");
        assert!(mid_limits(&Config::new(8, 512), 132, 32).is_ok(), "64 CTAs of 8 channels");
        assert!(mid_limits(&Config::new(16, 1280), 132, 16).is_err());
    }

    #[test]
    fn mid_shape_gives_every_token_a_cta() {
        for sms in [64, 114, 132, 144] {
            for c in [512, 520, 1280, 1288, 4096, 7168, 8448] {
                let cfg = Config::new(4, c);
                // Supported wherever C splits into >= 64 CTAs of <= 64 channels (whole chunks of 8).
                let nch = c.div_ceil(8).div_ceil(sms);
                let supported = nch * 8 <= DECODE_MAX_CPC && c.div_ceil(8).div_ceil(nch) >= MID_MAX_TOKENS;
                assert_eq!(mid_limits(&cfg, sms, MID_MAX_TOKENS).is_ok(), supported, "C={c} sms={sms}");
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
        assert!(mid_limits(&Config::new(4, 520), 64, MID_MAX_TOKENS).is_err());
        assert!(mid_limits(&Config::new(4, 512), 132, MID_MAX_TOKENS).is_ok());
        assert!(mid_limits(&Config::new(4, 504), 132, MID_MAX_TOKENS).is_err());
        assert!(mid_limits(&Config::new(4, 4096), 60, MID_MAX_TOKENS).is_err());
        assert!(mid_limits(&Config::new(4, 4096), 132, MID_MAX_TOKENS).is_ok());
    }
}
