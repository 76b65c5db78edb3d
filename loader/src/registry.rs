//! The variant registry: the catalogue's entries joined with what the loader reads from their
//! images. [`Registry::embedded`] is the one the runtime uses (built once, cached);
//! [`Registry::load_static`] takes any catalogue text and image source; [`Registry::from_expectations`]
//! builds fake registries from catalogue text alone (selector tests).

use crate::arch::Arch;
use crate::catalogue::{self, VariantEntry};
use crate::image::{CodeObject, KernelInfo};
use crate::Error;
use std::collections::BTreeMap;
use std::sync::OnceLock;

/// What the selector needs to know about a variant's kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resources {
    /// Registers per thread as reported (NVIDIA REGCOUNT; AMD arch VGPRs).
    pub registers: u32,
    /// Registers per thread as allocated: NVIDIA rounds to 8; AMD the descriptor's VGPR
    /// allocation (arch + acc). Used for the register-file and occupancy checks.
    pub registers_allocated: u32,
    pub shared_bytes: u32,
    pub local_bytes: u32,
    pub kernarg_bytes: u32,
    pub max_threads: u32,
}

impl Resources {
    fn from_kernel(k: &KernelInfo) -> Resources {
        let registers_allocated = match &k.amd {
            Some(a) => a.vgpr_alloc,
            None => k.registers.div_ceil(8) * 8,
        };
        Resources {
            registers: k.registers,
            registers_allocated,
            shared_bytes: k.shared_bytes,
            local_bytes: k.local_bytes,
            kernarg_bytes: k.kernarg_bytes,
            max_threads: k.max_threads,
        }
    }
}

/// One variant: its catalogue entry, architecture, resources and image hash.
#[derive(Debug, Clone)]
pub struct Variant {
    pub entry: VariantEntry,
    pub arch: Arch,
    pub resources: Resources,
    /// Lowercase hex SHA-256 of the image (empty for fake variants without an image).
    pub image_sha256: String,
    /// The embedded image (None for fake variants).
    pub image: Option<&'static [u8]>,
    /// Full kernel information (None for fake variants).
    pub kernel: Option<KernelInfo>,
}

impl Variant {
    pub fn id(&self) -> &str {
        &self.entry.id
    }
}

/// Every variant, in catalogue order (the order that breaks selection ties).
#[derive(Debug, Clone, Default)]
pub struct Registry {
    variants: Vec<Variant>,
}

static EMBEDDED: OnceLock<Result<Registry, Error>> = OnceLock::new();

impl Registry {
    /// The registry of the embedded catalogue and images, built on first use. An error here
    /// means the build is inconsistent (a test catches it before release).
    pub fn embedded() -> Result<&'static Registry, Error> {
        EMBEDDED
            .get_or_init(|| {
                Registry::load_static(catalogue::EMBEDDED_CATALOGUE, |path| {
                    crate::embedded::image(path).map(|i| i.bytes)
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// Joins `catalogue_text` with the images `image(path)` returns (static, e.g. embedded).
    pub fn load_static(catalogue_text: &str, image: impl Fn(&str) -> Option<&'static [u8]>) -> Result<Registry, Error> {
        let entries = catalogue::parse(catalogue_text)?;
        let mut parsed: BTreeMap<String, CodeObject> = BTreeMap::new();
        let mut variants = Vec::with_capacity(entries.len());
        for entry in entries {
            let bad = |reason: String| Error::BadCodeObject { image: entry.file.clone(), reason };
            let bytes = image(&entry.file)
                .ok_or_else(|| bad(format!("variant {:?}: image is not embedded (run `mhc asm`)", entry.id)))?;
            if !parsed.contains_key(&entry.file) {
                let object = crate::parse(bytes).map_err(|e| bad(e.0))?;
                parsed.insert(entry.file.clone(), object);
            }
            let object = &parsed[&entry.file];
            let arch = entry.arch();
            if !object.arch.runs_on(arch) && !arch.runs_on(object.arch) {
                return Err(bad(format!(
                    "variant {:?} says {} but the image is for {}",
                    entry.id, entry.arch, object.arch
                )));
            }
            let kernel = object
                .kernel(&entry.entry)
                .ok_or_else(|| bad(format!("variant {:?}: no kernel {:?} in the image", entry.id, entry.entry)))?
                .clone();
            check_threads(&entry, &kernel).map_err(bad)?;
            variants.push(Variant {
                arch: object.arch,
                resources: Resources::from_kernel(&kernel),
                image_sha256: crate::sha256_hex(bytes),
                image: Some(bytes),
                kernel: Some(kernel),
                entry,
            });
        }
        Ok(Registry { variants })
    }

    /// A registry whose resources come from each entry's `expect` table, with no images: for
    /// selector tests and for tools that only read the catalogue.
    pub fn from_expectations(catalogue_text: &str) -> Result<Registry, Error> {
        let variants = catalogue::parse(catalogue_text)?
            .into_iter()
            .map(|entry| {
                let e = &entry.expect;
                let resources = Resources {
                    registers: e.registers,
                    registers_allocated: e.registers.div_ceil(8) * 8,
                    shared_bytes: e.shared_bytes,
                    local_bytes: e.local_bytes,
                    kernarg_bytes: e.kernarg_bytes,
                    max_threads: entry.threads,
                };
                Variant {
                    arch: entry.arch(),
                    resources,
                    image_sha256: e.sha256.clone(),
                    image: None,
                    kernel: None,
                    entry,
                }
            })
            .collect();
        Ok(Registry { variants })
    }

    pub fn variants(&self) -> &[Variant] {
        &self.variants
    }

    pub fn get(&self, id: &str) -> Option<&Variant> {
        self.variants.iter().find(|v| v.entry.id == id)
    }

    /// Catalogue position of a variant (the tie-break order).
    pub fn position(&self, id: &str) -> Option<usize> {
        self.variants.iter().position(|v| v.entry.id == id)
    }
}

/// The catalogue's block size must be launchable: within `.maxntid` and equal to `.reqntid`.
fn check_threads(entry: &VariantEntry, k: &KernelInfo) -> Result<(), String> {
    if let Some([x, y, z]) = k.required_threads {
        if x * y * z != entry.threads {
            return Err(format!(
                "variant {:?}: threads = {} but the kernel requires {x}x{y}x{z}",
                entry.id, entry.threads
            ));
        }
    }
    if entry.threads > k.max_threads {
        return Err(format!(
            "variant {:?}: threads = {} exceeds the kernel's limit {}",
            entry.id, entry.threads, k.max_threads
        ));
    }
    Ok(())
}
