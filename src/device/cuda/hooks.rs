//! Benchmark and test hooks of the CUDA plan (the `testing` feature): run `pre` or `post_pre` on
//! a kernel family the caller names instead of the plan's choice, ask which family the plan
//! runs, and read what timing builds leave in the workspace. None of this is needed to use the
//! runtime; it exists to measure and cross-check the kernels.

use super::launch::{LaunchKind, Row};
use super::memory::{DeviceTensor, DeviceTensorMut};
use super::ops::Forced;
use super::plan::{Plan, Workspace};
use super::pre::general::PreVariant;
use super::pre::{self, PostIn, PostInViews, PreOutViews, PreParamViews};
use super::stream::Stream;
use crate::error::{Error, Result};
use crate::plan::Slot;

pub use super::abi::PC_STAMP_ROUNDS;

/// Which kernel and launch shape a `pre` call runs ([`Plan::pre_with`]).
#[derive(Debug, Clone, Copy, Default)]
pub enum PreKernel {
    /// The plan's choice for T, with its measured tuning.
    #[default]
    Auto,
    /// The general kernel even where another would run. `split` forces the CTAs per 32-token
    /// tile (`Some(1)`: the prefill shape), `tuning` the K-loop variant (`None`: the measured
    /// default); with `skip_k` / `skip_mix` the outputs are NOT `pre`'s.
    General {
        /// CTAs per 32-token tile (`None`: the plan's launch shape for T).
        split: Option<usize>,
        /// The K-loop variant (`None`: the measured default).
        tuning: Option<PreVariant>,
    },
    /// The decode kernel (T <= 16; above, the plan's mid kernel) over about `ctas` CTAs
    /// (`Err(NoVariant)` where neither runs; the mid kernel needs at least T CTAs).
    Decode {
        /// About how many CTAs the grid has.
        ctas: usize,
    },
    /// The GEMM kernel at any T, also below the token counts the plan gives it, its K split
    /// `splits` ways (`None`: the plan's cost model; more than the workspace holds slabs for is
    /// `Err(Config)`).
    Gemm {
        /// K splits of the launch.
        splits: Option<usize>,
    },
    /// The plan's persistent-cluster kernel for T on at most `clusters` of its resident clusters
    /// (`Err(NoVariant)` where it runs another kernel, `Err(Config)` below the kernel's least:
    /// the pair entry needs two).
    Clusters {
        /// Most clusters the grid has.
        clusters: usize,
    },
}

impl Plan {
    /// [`Plan::pre`] on the kernel and launch shape `kernel` names.
    pub fn pre_with(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        kernel: PreKernel,
    ) -> Result<()> {
        let t = x.layout.tokens;
        let auto = self.bucket(Slot::Pre, t)?;
        self.check_workspace(ws, stream)?;
        let chk = self.check_pre(ws, x, params, out)?;
        if chk.t == 0 {
            return Ok(());
        }
        let (bucket, forced) = match kernel {
            PreKernel::Auto => (auto.clone(), Forced::default()),
            PreKernel::General { split, tuning } => {
                (self.requested(Slot::Pre, LaunchKind::Pre, t)?, Forced { split, tuning, ..Forced::default() })
            }
            PreKernel::Decode { ctas } => {
                let forced = Forced { ctas: Some(ctas), ..Forced::default() };
                match self.requested(Slot::Pre, LaunchKind::PreDecode, t) {
                    Ok(b) if t <= b.tokens_per_cta() => (b, forced),
                    _ if auto.kind.is_few_token() => (auto.clone(), forced),
                    _ => {
                        return Err(Error::NoVariant {
                            stage: "pre".into(),
                            arch: self.ctx.arch.into(),
                            shape: format!("T={t}"),
                            rejected: vec!["the plan has no decode kernel for this configuration and T".into()],
                        })
                    }
                }
            }
            PreKernel::Gemm { splits } => (
                self.requested(Slot::Pre, LaunchKind::PreGemm, t)?,
                Forced { gemm_splits: splits, ..Forced::default() },
            ),
            PreKernel::Clusters { clusters } => {
                if !self.pre_uses_cluster_kernel(t) {
                    return Err(Error::NoVariant {
                        stage: "pre".into(),
                        arch: self.ctx.arch.into(),
                        shape: format!("T={t}"),
                        rejected: vec!["the plan runs no persistent-cluster kernel at this T".into()],
                    });
                }
                let least = if auto.kind == LaunchKind::PreClusterPair { 2 } else { 1 };
                if clusters < least {
                    return Err(Error::Config {
                        what: "clusters",
                        reason: format!("{} needs at least {least} clusters, got {clusters}", auto.entry()),
                    });
                }
                (auto.clone(), Forced { clusters: Some(clusters), ..Forced::default() })
            }
        };
        let l = self.pre_launch(&bucket, ws, x, params, out, &chk, forced)?;
        l.enqueue(stream, self.overlap)
    }

    /// The launcher `pre` runs at `tokens` tokens.
    pub fn pre_launcher(&self, tokens: usize) -> Option<LaunchKind> {
        self.bucket(Slot::Pre, tokens).ok().map(|b| b.kind)
    }

    /// The launcher of the fused `post_pre` kernel at `tokens` tokens (`None`: `post`, then `pre`).
    pub fn post_pre_launcher(&self, tokens: usize) -> Option<LaunchKind> {
        self.fused_post_pre(tokens).map(|b| b.kind)
    }

    /// Whether `pre` at `tokens` tokens runs the decode kernel.
    pub fn pre_uses_decode_kernel(&self, tokens: usize) -> bool {
        self.pre_launcher(tokens) == Some(LaunchKind::PreDecode)
    }

    /// Whether `pre` at `tokens` tokens runs the mid kernel.
    pub fn pre_uses_mid_kernel(&self, tokens: usize) -> bool {
        self.pre_launcher(tokens) == Some(LaunchKind::PreMid)
    }

    /// Whether `pre` at `tokens` tokens runs the logit-cluster kernel.
    pub fn pre_uses_logit_clusters(&self, tokens: usize) -> bool {
        self.pre_launcher(tokens) == Some(LaunchKind::PreLogitClusters)
    }

    /// Whether `pre` at `tokens` tokens runs the persistent-cluster kernel.
    pub fn pre_uses_cluster_kernel(&self, tokens: usize) -> bool {
        matches!(
            self.pre_launcher(tokens),
            Some(LaunchKind::PreCluster | LaunchKind::PreClusterTma | LaunchKind::PreClusterPair)
        )
    }

    /// Whether `pre` at `tokens` tokens runs the GEMM kernel.
    pub fn pre_uses_gemm_kernel(&self, tokens: usize) -> bool {
        self.pre_launcher(tokens) == Some(LaunchKind::PreGemm)
    }

    /// [`Plan::post_pre`] as the general kernel's fused producer: one launch (measured slower
    /// than `post` then `pre` at every shape, so the plan never chooses it).
    /// `split` forces its CTAs per 32-token tile; `batched = false` forces the per-slot producer
    /// where the batched one would run (bf16, n <= 4): both must give the same bits.
    #[allow(clippy::too_many_arguments)]
    pub fn post_pre_fused(
        &self,
        stream: &Stream,
        ws: &Workspace,
        x: &DeviceTensor<'_>,
        post: &PostInViews<'_>,
        x_out: &mut DeviceTensorMut<'_>,
        params: &PreParamViews<'_>,
        out: &mut PreOutViews<'_>,
        split: Option<usize>,
        batched: bool,
    ) -> Result<()> {
        let (cfg, dt) = (&self.ctx.cfg, self.ctx.dtype);
        let t = x.layout.tokens;
        pre::check_post_side(self.ctx.device, cfg, dt, x, post, x_out)?;
        self.check_workspace(ws, stream)?;
        pre::fits_u32("x_out", t, x_out.layout.row_stride, cfg.n * cfg.c)?;
        pre::fits_u32("f", t, post.f.layout.row_stride, cfg.c)?;
        let chk = self.check_pre(ws, x, params, out)?;
        if t == 0 {
            return Ok(());
        }
        let b = self.requested(Slot::PostPre, LaunchKind::PostPre, t)?;
        let pin = PostIn {
            f: post.f.ptr,
            f_stride: post.f.layout.row_stride,
            h_post: post.h_post.ptr,
            h_res: post.h_res.ptr,
            x_out: x_out.ptr,
            xo_stride: x_out.layout.row_stride,
            batch: batched,
        };
        let call =
            pre::PreCall { ctx: &self.ctx, b: &b, lay: &self.ws, wsp: ws.device_ptr(), x, params, out, chk: &chk };
        let l = pre::general::launch(&call, Some(pin), split, None)?;
        l.enqueue(stream, self.overlap)
    }

    /// The logit rows `P[t][0..ldp]` and `ss[t]` the last `pre` / `post_pre` of the general kernel
    /// left in `ws` for tokens `0..t` (synchronous).
    pub fn debug_logits(&self, ws: &Workspace, t: usize) -> Result<(Vec<f32>, Vec<f32>)> {
        let lay = &self.ws;
        let all: Vec<f32> = ws.buf.to_vec()?;
        let l = pre::general::ldp(&self.ctx.cfg);
        Ok((all[lay.p / 4..lay.p / 4 + t * l].to_vec(), all[lay.ss / 4..lay.ss / 4 + t].to_vec()))
    }

    /// The few-token kernel's phase stamps a timing build left from its last call at `t`
    /// tokens ([`pre::decode::stamps`]).
    pub fn debug_decode_stamps(&self, ws: &Workspace, t: usize) -> Result<Vec<[(u64, u64); 8]>> {
        let sms = self.ctx.sm_count as usize;
        let cfg = &self.ctx.cfg;
        let shape = if self.pre_uses_mid_kernel(t) {
            pre::decode::mid_shape(cfg, sms, t, None)
        } else {
            pre::decode::decode_shape(cfg, sms, t, None)
        };
        let (s, _) = shape.ok_or_else(|| Error::shape("tokens", "a decode or mid shape".to_string(), t))?;
        let all: Vec<u64> = ws.buf.to_vec()?;
        pre::decode::stamps(&self.ws, &all, cfg.n, s, t)
    }

    /// The logit-cluster kernel's phase stamps a timing build left in `ws` from its last call at
    /// `t` tokens ([`pre::lc::stamps`]), per CTA in grid order (clusters of
    /// [`pre::lc::LC_CLUSTER`]: even ones the h_res logits, odd ones h_pre / h_post and the mix).
    pub fn debug_lc_stamps(&self, ws: &Workspace, t: usize) -> Result<Vec<[u64; pre::lc::LC_STAMP_SLOTS]>> {
        let (grid, _, _) = pre::lc::shape(self.ctx.cfg.c, t, self.ctx.dtype, false);
        let all: Vec<u64> = ws.buf.to_vec()?;
        pre::lc::stamps(&self.ws, &all, grid as usize)
    }

    /// The persistent-cluster kernel's phase stamps a timing build left in `ws` from its last
    /// call at `t` tokens ([`pre::cluster::stamps`]): at the workspace's start, or for the pair
    /// entry past its exchange rows for `t` tokens.
    pub fn debug_pc_stamps(&self, ws: &Workspace, ctas: usize, t: usize) -> Result<Vec<[(u64, u64); 16]>> {
        let all: Vec<u64> = ws.buf.to_vec()?;
        let at = if self.pre_launcher(t) == Some(LaunchKind::PreClusterPair) {
            self.ws.pair + pre::cluster::pair_bytes(t)
        } else {
            0
        };
        pre::cluster::stamps(all.get(at / 8..).unwrap_or(&[]), ctas)
    }

    /// How the pair entry splits `clusters` resident clusters between the two parts of this
    /// plan's C (the kernel's rule, mirrored in `pre::cluster::pair_split`).
    pub fn pair_split(&self, clusters: usize) -> (usize, usize) {
        pre::cluster::pair_split(self.ctx.cfg.c, clusters)
    }
}
