//! The GPU architectures mhc ships kernels for, with their capabilities.
//!
//! `Arch` is exhaustive: a device or code object of any other architecture is an error, never a
//! default. It is parsed from a CUDA compute capability `(major, minor)`, from a HIP
//! `gcnArchName` (`"gfx942:sramecc+:xnack-"`), from a catalogue name (`"sm_90a"`, `"gfx942"`) or
//! from a code object's ELF header (see `cubin` and `amdgpu`).

use std::fmt;
use std::str::FromStr;

/// How an AMDGPU target feature (XNACK, SRAMECC) is set, as coded in `e_flags` (v4+) and in the
/// target id (`:xnack-` = off, `:xnack+` = on, absent = any).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum FeatureMode {
    /// The processor has no such feature (e_flags code 0).
    Unsupported,
    /// The code object runs in either mode (code 1; the target id leaves the feature out).
    #[default]
    Any,
    /// Off (code 2, `-`).
    Off,
    /// On (code 3, `+`).
    On,
}

impl FeatureMode {
    /// From the two-bit e_flags code.
    pub const fn from_code(code: u32) -> Self {
        match code & 3 {
            0 => FeatureMode::Unsupported,
            1 => FeatureMode::Any,
            2 => FeatureMode::Off,
            _ => FeatureMode::On,
        }
    }

    /// Whether code built with `self` runs on a device whose mode is `device`.
    pub fn runs_on(self, device: FeatureMode) -> bool {
        match self {
            FeatureMode::Any | FeatureMode::Unsupported => true,
            FeatureMode::On | FeatureMode::Off => device == self || device == FeatureMode::Any,
        }
    }

    fn suffix(self, name: &str) -> String {
        match self {
            FeatureMode::On => format!(":{name}+"),
            FeatureMode::Off => format!(":{name}-"),
            FeatureMode::Any | FeatureMode::Unsupported => String::new(),
        }
    }
}

/// The XNACK and SRAMECC modes of an AMD code object or device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AmdFeatures {
    pub sramecc: FeatureMode,
    pub xnack: FeatureMode,
}

impl AmdFeatures {
    /// Both features "any": what llvm-mc produces without `-mattr`.
    pub const ANY: AmdFeatures = AmdFeatures { sramecc: FeatureMode::Any, xnack: FeatureMode::Any };

    /// Whether code with these features loads on a device with `device` features (ROCr's rule:
    /// "any" loads everywhere; an explicit mode must match).
    pub fn runs_on(self, device: AmdFeatures) -> bool {
        self.sramecc.runs_on(device.sramecc) && self.xnack.runs_on(device.xnack)
    }
}

/// Every architecture mhc knows. Exhaustive on purpose: adding one means reviewing every
/// `match` that decides capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Arch {
    /// NVIDIA Hopper (H100/H200), arch-specific target `sm_90a` (wgmma, TMA multicast, setmaxnreg).
    Sm90a,
    /// NVIDIA Blackwell datacenter (B200/GB200), `sm_100a` (tcgen05, TMEM).
    Sm100a,
    /// AMD CDNA2 (MI200).
    Gfx90a(AmdFeatures),
    /// AMD CDNA3 (MI300X/MI325X).
    Gfx942(AmdFeatures),
    /// AMD CDNA4 (MI350); needs LLVM >= 20 to assemble.
    Gfx950(AmdFeatures),
}

/// Which vendor's driver loads the code object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Vendor {
    Nvidia,
    Amd,
}

/// Why an architecture could not be recognised.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported architecture: {0}")]
pub struct UnsupportedArch(pub String);

impl Arch {
    /// Every architecture, with AMD features "any", in a fixed order.
    pub const ALL: [Arch; 5] = [
        Arch::Sm90a,
        Arch::Sm100a,
        Arch::Gfx90a(AmdFeatures::ANY),
        Arch::Gfx942(AmdFeatures::ANY),
        Arch::Gfx950(AmdFeatures::ANY),
    ];

    /// The architecture of a CUDA device of compute capability `major.minor`. A device runs the
    /// `a` (arch-specific) cubins only of its exact capability, so 9.0 maps to sm_90a and 10.0 to
    /// sm_100a; anything else has no kernels in this build.
    pub fn from_compute_capability(major: u32, minor: u32) -> Result<Arch, UnsupportedArch> {
        match (major, minor) {
            (9, 0) => Ok(Arch::Sm90a),
            (10, 0) => Ok(Arch::Sm100a),
            _ => Err(UnsupportedArch(format!(
                "compute capability {major}.{minor} (mhc ships sm_90a and sm_100a cubins only)"
            ))),
        }
    }

    /// Parses `sm_90a`, `sm_100a`, `gfx90a`, `gfx942`, `gfx950`, optionally followed by AMD
    /// target-id features in any order (`gfx942:sramecc+:xnack-`, as in `gcnArchName`). An
    /// `amdgcn-amd-amdhsa--` prefix (the full target id) is accepted too.
    pub fn parse(s: &str) -> Result<Arch, UnsupportedArch> {
        let bad = || UnsupportedArch(format!("{s:?}"));
        let s = s.trim();
        let s = s.strip_prefix("amdgcn-amd-amdhsa--").unwrap_or(s);
        let mut parts = s.split(':');
        let base = parts.next().unwrap_or_default();
        let mut features = AmdFeatures::ANY;
        let mut seen = (false, false);
        for feature in parts {
            let (name, mode) = match feature.as_bytes().last() {
                Some(b'+') => (&feature[..feature.len() - 1], FeatureMode::On),
                Some(b'-') => (&feature[..feature.len() - 1], FeatureMode::Off),
                _ => return Err(bad()),
            };
            match name {
                "sramecc" if !seen.0 => (features.sramecc, seen.0) = (mode, true),
                "xnack" if !seen.1 => (features.xnack, seen.1) = (mode, true),
                _ => return Err(bad()),
            }
        }
        let nvidia = |arch| if seen == (false, false) { Ok(arch) } else { Err(bad()) };
        match base {
            "sm_90a" => nvidia(Arch::Sm90a),
            "sm_100a" => nvidia(Arch::Sm100a),
            "gfx90a" => Ok(Arch::Gfx90a(features)),
            "gfx942" => Ok(Arch::Gfx942(features)),
            "gfx950" => Ok(Arch::Gfx950(features)),
            _ => Err(bad()),
        }
    }

    /// The short name used in the catalogue, on the command line and in JSON: `sm_90a`,
    /// `sm_100a`, `gfx90a`, `gfx942`, `gfx950` (no AMD features; see [`Arch::target_id`]).
    pub const fn name(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm_90a",
            Arch::Sm100a => "sm_100a",
            Arch::Gfx90a(_) => "gfx90a",
            Arch::Gfx942(_) => "gfx942",
            Arch::Gfx950(_) => "gfx950",
        }
    }

    /// The name with AMD features, as in `gcnArchName`: `gfx942:sramecc+:xnack-`.
    pub fn target_id(self) -> String {
        match self.amd_features() {
            Some(f) => format!("{}{}{}", self.name(), f.sramecc.suffix("sramecc"), f.xnack.suffix("xnack")),
            None => self.name().to_string(),
        }
    }

    /// The folder under `asm/ptx`, `asm/gcn` and `asm/bin` holding this architecture's kernels.
    pub const fn dir(self) -> &'static str {
        match self {
            Arch::Sm90a => "sm90",
            Arch::Sm100a => "sm100",
            Arch::Gfx90a(_) => "gfx90a",
            Arch::Gfx942(_) => "gfx942",
            Arch::Gfx950(_) => "gfx950",
        }
    }

    pub const fn vendor(self) -> Vendor {
        match self {
            Arch::Sm90a | Arch::Sm100a => Vendor::Nvidia,
            Arch::Gfx90a(_) | Arch::Gfx942(_) | Arch::Gfx950(_) => Vendor::Amd,
        }
    }

    /// The XNACK/SRAMECC modes (AMD only).
    pub const fn amd_features(self) -> Option<AmdFeatures> {
        match self {
            Arch::Sm90a | Arch::Sm100a => None,
            Arch::Gfx90a(f) | Arch::Gfx942(f) | Arch::Gfx950(f) => Some(f),
        }
    }

    /// The same architecture with AMD features "any": the key used to compare families.
    pub const fn family(self) -> Arch {
        match self {
            Arch::Sm90a | Arch::Sm100a => self,
            Arch::Gfx90a(_) => Arch::Gfx90a(AmdFeatures::ANY),
            Arch::Gfx942(_) => Arch::Gfx942(AmdFeatures::ANY),
            Arch::Gfx950(_) => Arch::Gfx950(AmdFeatures::ANY),
        }
    }

    /// Whether a code object built for `self` loads on a device of architecture `device`:
    /// the same architecture, and (AMD) compatible XNACK/SRAMECC modes.
    pub fn runs_on(self, device: Arch) -> bool {
        if self.family() != device.family() {
            return false;
        }
        match (self.amd_features(), device.amd_features()) {
            (Some(code), Some(dev)) => code.runs_on(dev),
            _ => true,
        }
    }

    /// Threads that execute in lockstep: 32 (NVIDIA warp) or 64 (CDNA wave64).
    pub const fn warp_size(self) -> u32 {
        match self.vendor() {
            Vendor::Nvidia => 32,
            Vendor::Amd => 64,
        }
    }

    /// Streaming multiprocessors / compute units of the flagship part, used by the selector's
    /// cost model when the caller does not pass the device's real count.
    pub const fn default_compute_units(self) -> u32 {
        match self {
            Arch::Sm90a => 132,     // H100 SXM (H200 has the same 132)
            Arch::Sm100a => 148,    // B200
            Arch::Gfx90a(_) => 110, // MI250X per GCD
            Arch::Gfx942(_) => 304, // MI300X
            Arch::Gfx950(_) => 256, // MI355X
        }
    }

    /// Nominal DRAM bandwidth of the flagship part in bytes per microsecond (1 TB/s = 1e6 B/us),
    /// for the cost model only.
    pub const fn dram_bytes_per_us(self) -> f64 {
        match self {
            Arch::Sm90a => 3.0e6,     // H100 SXM: 2.92-3.0 TB/s measured copy (docs/benchmarks/README.md)
            Arch::Sm100a => 7.0e6,    // B200 ~8 TB/s nominal
            Arch::Gfx90a(_) => 1.6e6, // MI250X per GCD
            Arch::Gfx942(_) => 4.5e6, // MI300X ~5.3 TB/s nominal
            Arch::Gfx950(_) => 6.5e6, // MI355X
        }
    }

    /// 32-bit registers per SM (NVIDIA) or VGPRs per SIMD lane x lanes x SIMDs (AMD), the pool a
    /// block's `registers x threads` is drawn from.
    pub const fn register_file_per_unit(self) -> u32 {
        match self.vendor() {
            Vendor::Nvidia => 65536,
            // 4 SIMDs x 512 VGPRs (unified arch+acc file) x 64 lanes.
            Vendor::Amd => 4 * 512 * 64,
        }
    }

    /// Most registers one thread may use: 255 on NVIDIA, 512 (arch + acc VGPRs) on CDNA2+.
    pub const fn max_registers_per_thread(self) -> u32 {
        match self.vendor() {
            Vendor::Nvidia => 255,
            Vendor::Amd => 512,
        }
    }

    /// Most static + dynamic shared memory (LDS) one block may use, in bytes.
    pub const fn max_shared_per_block(self) -> u32 {
        match self {
            Arch::Sm90a | Arch::Sm100a => 227 * 1024,
            Arch::Gfx90a(_) | Arch::Gfx942(_) => 64 * 1024,
            Arch::Gfx950(_) => 160 * 1024,
        }
    }

    /// Shared memory (LDS) per SM/CU, in bytes.
    pub const fn shared_per_unit(self) -> u32 {
        match self {
            Arch::Sm90a | Arch::Sm100a => 228 * 1024,
            Arch::Gfx90a(_) | Arch::Gfx942(_) => 64 * 1024,
            Arch::Gfx950(_) => 160 * 1024,
        }
    }

    /// Most threads (work-items) per block.
    pub const fn max_threads_per_block(self) -> u32 {
        1024
    }

    /// Most resident threads per SM/CU.
    pub const fn max_threads_per_unit(self) -> u32 {
        match self.vendor() {
            Vendor::Nvidia => 2048,
            // 4 SIMDs x 8 waves (gfx90a+) x 64 lanes.
            Vendor::Amd => 2048,
        }
    }

    /// Most resident blocks per SM/CU.
    pub const fn max_blocks_per_unit(self) -> u32 {
        match self.vendor() {
            Vendor::Nvidia => 32,
            Vendor::Amd => 32,
        }
    }

    /// Warpgroup MMA (`wgmma`): sm_90a only.
    pub const fn has_wgmma(self) -> bool {
        matches!(self, Arch::Sm90a)
    }

    /// Tensor memory and `tcgen05.mma`: sm_100a.
    pub const fn has_tcgen05(self) -> bool {
        matches!(self, Arch::Sm100a)
    }

    /// The tensor memory accelerator (bulk async copies with a tensor map): sm_90a and later.
    pub const fn has_tma(self) -> bool {
        matches!(self, Arch::Sm90a | Arch::Sm100a)
    }

    /// Thread-block clusters and distributed shared memory.
    pub const fn has_clusters(self) -> bool {
        matches!(self, Arch::Sm90a | Arch::Sm100a)
    }

    /// Matrix fused multiply-add on CDNA (`v_mfma_*`), with the accumulation VGPR file.
    pub const fn has_mfma(self) -> bool {
        matches!(self.vendor(), Vendor::Amd)
    }

    /// Base offset of kernel parameters in constant bank 0 (`c[0][..]`), NVIDIA only.
    pub const fn param_cbank_offset(self) -> Option<u32> {
        match self {
            Arch::Sm90a => Some(0x210),
            Arch::Sm100a => Some(0x380),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.target_id())
    }
}

impl FromStr for Arch {
    type Err = UnsupportedArch;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Arch::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_capabilities_and_gcn_arch_names() {
        assert_eq!(Arch::from_compute_capability(9, 0), Ok(Arch::Sm90a));
        assert_eq!(Arch::from_compute_capability(10, 0), Ok(Arch::Sm100a));
        assert!(Arch::from_compute_capability(8, 9).is_err());
        assert!(Arch::from_compute_capability(12, 0).is_err());
        for a in Arch::ALL {
            assert_eq!(Arch::parse(a.name()), Ok(a));
        }
        let dev = Arch::parse("gfx942:sramecc+:xnack-").unwrap();
        assert_eq!(dev, Arch::Gfx942(AmdFeatures { sramecc: FeatureMode::On, xnack: FeatureMode::Off }));
        assert_eq!(dev.target_id(), "gfx942:sramecc+:xnack-");
        assert_eq!(Arch::parse("xnack-:gfx942").ok(), None);
        assert_eq!(Arch::parse("gfx942:xnack-:sramecc+"), Ok(dev));
        assert_eq!(Arch::parse("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-"), Ok(dev));
        for bad in ["", "sm_90", "sm_90a:xnack+", "gfx942:xnack", "gfx942:xnack+:xnack-", "gfx1100", "gfx942:foo+"] {
            assert!(Arch::parse(bad).is_err(), "{bad:?} parsed");
        }
        assert!(Arch::Sm90a.has_wgmma() && !Arch::Sm100a.has_wgmma() && Arch::Sm100a.has_tcgen05());
        assert!(dev.has_mfma() && !Arch::Sm90a.has_mfma());
        assert_eq!(dev.warp_size(), 64);
        assert_eq!(Arch::Sm100a.param_cbank_offset(), Some(0x380));
    }

    #[test]
    fn code_object_features_must_suit_the_device() {
        let any = Arch::Gfx942(AmdFeatures::ANY);
        let dev = Arch::parse("gfx942:sramecc+:xnack-").unwrap();
        let xnack_on = Arch::parse("gfx942:xnack+").unwrap();
        assert!(any.runs_on(dev));
        assert!(!xnack_on.runs_on(dev));
        assert!(dev.runs_on(dev));
        assert!(!any.runs_on(Arch::Gfx90a(AmdFeatures::ANY)));
        assert!(!Arch::Sm90a.runs_on(Arch::Sm100a));
    }
}
