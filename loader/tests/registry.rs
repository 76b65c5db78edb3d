//! The catalogue against the embedded images, `mhc asm --update-catalogue`'s rewrite, the tuned
//! tables, and every selection path on fake variants (including a decoy that is cheap on paper
//! but must never win where it does not apply).

use mhc_loader::catalogue::{self, rewrite_expectations};
use mhc_loader::select::{Choice, Reason};
use mhc_loader::tuning::{bucket, TunedTable};
use mhc_loader::{AmdFeatures, Arch, Budget, Registry, Selector, Shape};

/// Every catalogue entry matches its embedded image: symbol present, resources and kernarg size
/// as recorded, sha256 as recorded. On failure it prints the line to paste (or run
/// `mhc asm --update-catalogue`).
#[test]
fn every_variant_matches_its_embedded_image() {
    let entries = catalogue::parse(catalogue::EMBEDDED_CATALOGUE).unwrap();
    let mut problems = Vec::new();
    for v in &entries {
        let Some(img) = mhc_loader::embedded::image(&v.file) else {
            problems.push(format!("{}: {} is not embedded (run `mhc asm`)", v.id, v.file));
            continue;
        };
        match catalogue::measure(img.bytes, &v.entry) {
            Ok(actual) if actual == v.expect => {}
            Ok(actual) => problems.push(format!(
                "{}: recorded {:?}\n  the image gives: {}\n  (run `mhc asm --update-catalogue`)",
                v.id,
                v.expect,
                catalogue::expect_line(&actual)
            )),
            Err(e) => problems.push(format!("{}: {e}", v.id)),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The registry builds from the same data (arch and launch bounds consistent too).
    let registry = Registry::embedded().unwrap();
    assert_eq!(registry.variants().len(), entries.len());
    for v in registry.variants() {
        assert_eq!(v.image_sha256, v.entry.expect.sha256);
        assert!(v.arch.runs_on(v.entry.arch()) || v.entry.arch().runs_on(v.arch));
    }
}

#[test]
fn the_embedded_tuned_tables_are_valid() {
    let registry = Registry::embedded().unwrap();
    for table in mhc_loader::tuning::embedded_tables().unwrap() {
        let (_, warnings) = table.check(registry);
        assert!(warnings.is_empty(), "{}: {warnings:?}", table.name);
    }
}

#[test]
fn update_catalogue_rewrites_only_the_expect_lines() {
    let cubin = std::fs::read(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/fx_sm90.cubin")).unwrap();
    let text = "# keep me\n[[variant]]\nid = \"a\"\nstage = \"post\"\nformulations = [\"v4\"]\narch = \"sm_90a\"\n\
        file = \"asm/bin/sm90/fx.cubin\"\nentry = \"fx_smem\"\ndtypes = [\"f32\"]\nn = [4]\n\
        c = { multiple_of = 1, min = 1, max = 10 }\ntokens = { min = 1, max = 10 }\ntile = { tokens = 1 }\n\
        threads = 128\nlaunch = \"post\"\nwhy = \"test\"\n\n# the next section\n[[variant]]\nid = \"b\" # comment\nstage = \"post\"\nformulations = [\"v4\"]\n\
        arch = \"sm_90a\"\nfile = \"asm/bin/sm90/fx.cubin\"\nentry = \"fx_vadd\"\ndtypes = [\"f32\"]\nn = [4]\n\
        c = { multiple_of = 1, min = 1, max = 10 }\ntokens = { min = 1, max = 10 }\ntile = { tokens = 1 }\n\
        threads = 256\nlaunch = \"post\"\nwhy = \"test\"\nexpect = { registers = 1, shared_bytes = 0, local_bytes = 0, kernarg_bytes = 0, sha256 = \"\" }\n";
    let (new, report) =
        rewrite_expectations(text, |f| (f == "asm/bin/sm90/fx.cubin").then_some(cubin.as_slice())).unwrap();
    assert_eq!(report.len(), 2);
    let v = catalogue::parse(&new).unwrap();
    assert_eq!((v[0].expect.registers, v[0].expect.shared_bytes, v[0].expect.local_bytes), (14, 1024, 64));
    assert_eq!((v[1].expect.registers, v[1].expect.kernarg_bytes), (12, 28));
    assert_eq!(v[1].expect.sha256, mhc_loader::sha256_hex(&cubin));
    assert!(new.starts_with("# keep me\n") && new.contains("id = \"b\" # comment"));
    // A missing expect line goes after the table's last key, not after the comment that
    // opens the next section.
    let a_expect = new.lines().position(|l| l.starts_with("expect")).unwrap();
    assert_eq!(new.lines().nth(a_expect - 1), Some("why = \"test\""));
    assert!(new.contains("\n\n# the next section\n[[variant]]"));
    // Idempotent, and every other line untouched.
    let (again, _) = rewrite_expectations(&new, |_| Some(cubin.as_slice())).unwrap();
    assert_eq!(again, new);
    let strip = |s: &str| s.lines().filter(|l| !l.starts_with("expect")).collect::<Vec<_>>().join("\n");
    assert_eq!(strip(&new), strip(text));
    // An image that lacks the entry symbol is named.
    let err = rewrite_expectations(&text.replace("fx_vadd", "nope"), |_| Some(cubin.as_slice())).unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");
}

// Fake variants for the selector: three real candidates for `pre` on sm_90a and a decoy.
//  * pre_split:   decode variant, split-K over 16 blocks, meant for T <= 64.
//  * pre_tile:    prefill variant, 64 tokens per block, meant for T >= 65, C % 64 == 0.
//  * pre_generic: one token per block, any C; 40 registers, two passes over x.
//  * pre_decoy:   claims a huge tile (looks cheapest) but only supports n = 8, bf16 and v4, and
//                 uses 200 registers; it must never be chosen where those do not hold.
//  * post_x:      another stage.
//  * pre_amd:     gfx942.
const FAKE: &str = r#"
[[variant]]
id = "pre_split"
stage = "pre"
formulations = ["v4", "paper"]
arch = "sm_90a"
file = "asm/bin/sm90/pre.cubin"
entry = "pre_split"
dtypes = ["f32", "bf16"]
n = [1, 2, 4, 8]
c = { multiple_of = 8, min = 64, max = 65536 }
tokens = { min = 1, max = 256 }
prefer_tokens = { min = 1, max = 64 }
tile = { tokens = 1, split = 16 }
threads = 256
launch = "fake"
why = "decode: split the K reduction over many blocks"
expect = { registers = 64, shared_bytes = 8192, local_bytes = 0, kernarg_bytes = 96, sha256 = "" }

[[variant]]
id = "pre_tile"
stage = "pre"
formulations = ["v4", "paper"]
arch = "sm_90a"
file = "asm/bin/sm90/pre.cubin"
entry = "pre_tile"
dtypes = ["f32", "bf16"]
n = [4]
c = { multiple_of = 64, min = 64, max = 65536 }
tokens = { min = 1, max = 100000000 }
prefer_tokens = { min = 65, max = 100000000 }
tile = { tokens = 64 }
threads = 256
launch = "fake"
why = "prefill: 64-token tiles with mma"
expect = { registers = 168, shared_bytes = 100000, local_bytes = 0, kernarg_bytes = 96, sha256 = "" }

[[variant]]
id = "pre_generic"
stage = "pre"
formulations = ["v4", "paper"]
arch = "sm_90a"
file = "asm/bin/sm90/pre.cubin"
entry = "pre_generic"
dtypes = ["f32", "bf16"]
n = [1, 2, 4, 8, 16, 32]
c = { multiple_of = 1, min = 1, max = 1000000 }
tokens = { min = 1, max = 100000000 }
tile = { tokens = 1 }
threads = 128
x_passes = 2
launch = "fake"
why = "fallback for any n and C"
expect = { registers = 40, shared_bytes = 0, local_bytes = 0, kernarg_bytes = 96, sha256 = "" }

[[variant]]
id = "pre_decoy"
stage = "pre"
formulations = ["v4"]
arch = "sm_90a"
file = "asm/bin/sm90/pre.cubin"
entry = "pre_decoy"
dtypes = ["bf16"]
n = [8]
c = { multiple_of = 1, min = 1, max = 1000000 }
tokens = { min = 1, max = 100000000 }
tile = { tokens = 100000 }
threads = 128
x_passes = 0
launch = "fake"
why = "decoy: cheapest on paper, narrow constraints"
expect = { registers = 200, shared_bytes = 0, local_bytes = 0, kernarg_bytes = 96, sha256 = "" }

[[variant]]
id = "post_x"
stage = "post"
formulations = ["v4", "paper"]
arch = "sm_90a"
file = "asm/bin/sm90/post.cubin"
entry = "post_x"
dtypes = ["f32", "bf16"]
n = [4]
c = { multiple_of = 1, min = 1, max = 1000000 }
tokens = { min = 1, max = 100000000 }
tile = { tokens = 1 }
threads = 256
launch = "fake"
why = "another stage"
expect = { registers = 32, shared_bytes = 0, local_bytes = 0, kernarg_bytes = 64, sha256 = "" }

[[variant]]
id = "pre_amd"
stage = "pre"
formulations = ["v4", "paper"]
arch = "gfx942"
file = "asm/bin/gfx942/pre.hsaco"
entry = "pre_amd"
dtypes = ["f32", "bf16"]
n = [1, 2, 4, 8, 16, 32]
c = { multiple_of = 1, min = 1, max = 1000000 }
tokens = { min = 1, max = 100000000 }
tile = { tokens = 1 }
threads = 256
launch = "fake"
why = "AMD"
expect = { registers = 32, shared_bytes = 0, local_bytes = 0, kernarg_bytes = 96, sha256 = "" }
"#;

fn fake() -> Registry {
    let text = FAKE.replace("sha256 = \"\"", &format!("sha256 = \"{}\"", "ab".repeat(32)));
    Registry::from_expectations(&text).unwrap()
}

fn pick(reg: &Registry, shape: &Shape, budget: &Budget) -> String {
    Selector::new(reg).select(Arch::Sm90a, "pre", shape, budget).unwrap().variant.id().to_string()
}

#[test]
fn the_cost_model_follows_the_token_count() {
    let reg = fake();
    let none = Budget::default();
    // Decode: the split variant; prefill: the tiled one; both beat the two-pass fallback.
    assert_eq!(pick(&reg, &Shape::new(7, 4, 4096, "bf16"), &none), "pre_split");
    assert_eq!(pick(&reg, &Shape::new(8192, 4, 4096, "bf16"), &none), "pre_tile");
    // C = 4100 is not a multiple of 8 or 64: only the fallback is left.
    let s = Selector::new(&reg).select(Arch::Sm90a, "pre", &Shape::new(7, 4, 4100, "bf16"), &none).unwrap();
    assert_eq!(s.variant.id(), "pre_generic");
    assert!(s
        .rejected
        .iter()
        .any(|r| r.id == "pre_split" && r.reason == Reason::CMultiple { c: 4100, multiple_of: 8 }));
    // n = 16: neither split (n <= 8) nor tile (n = 4).
    assert_eq!(pick(&reg, &Shape::new(7, 16, 4096, "f32"), &none), "pre_generic");
}

#[test]
fn the_decoy_never_wins_outside_its_constraints() {
    let reg = fake();
    let none = Budget::default();
    for (t, n, c, dtype) in [(7, 4, 4096, "bf16"), (8192, 8, 4096, "f32"), (1, 8, 64, "bf16")] {
        let mut shape = Shape::new(t, n, c, dtype);
        if (n, dtype) == (8, "bf16") {
            shape = shape.with_formulation("paper");
        }
        let s = Selector::new(&reg).select(Arch::Sm90a, "pre", &shape, &none).unwrap();
        assert_ne!(s.variant.id(), "pre_decoy", "{shape}: {}", s.explain());
        assert!(s.rejected.iter().any(|r| r.id == "pre_decoy"));
    }
    // Where it applies it is the cheapest by the model (one wave, no x traffic) ...
    let shape = Shape::new(8192, 8, 4096, "bf16");
    assert_eq!(pick(&reg, &shape, &none), "pre_decoy");
    // ... unless the register budget excludes its 200 registers.
    let tight = Budget { max_registers_per_thread: Some(128), max_shared_bytes: None };
    let s = Selector::new(&reg).select(Arch::Sm90a, "pre", &shape, &tight).unwrap();
    assert_ne!(s.variant.id(), "pre_decoy");
    assert!(s.rejected.contains(&mhc_loader::select::Rejection {
        id: "pre_decoy".into(),
        reason: Reason::RegisterBudget { uses: 200, budget: 128 }
    }));
}

#[test]
fn budgets_architecture_and_ranges_are_filters() {
    let reg = fake();
    let shape = Shape::new(8192, 4, 4096, "bf16");
    // The tiled variant needs 100000 B of shared memory.
    let s = Selector::new(&reg)
        .select(Arch::Sm90a, "pre", &shape, &Budget { max_shared_bytes: Some(65536), max_registers_per_thread: None })
        .unwrap();
    assert_ne!(s.variant.id(), "pre_tile");
    assert!(s.rejected.iter().any(|r| r.reason == Reason::SharedBudget { uses: 100000, budget: 65536 }));
    // 168 registers x 256 threads overflows the 64K register file.
    let s = Selector::new(&reg).select(Arch::Sm90a, "pre", &shape, &Budget::default()).unwrap();
    assert_eq!(s.variant.id(), "pre_tile", "{}", s.explain());
    // Token range: the split variant runs T <= 256 only.
    assert!(s.rejected.iter().any(|r| r.id == "pre_split" && matches!(r.reason, Reason::Tokens { t: 8192, .. })));
    // Architecture: on gfx942 only the AMD variant applies; the NVIDIA ones are counted, not
    // listed (nothing about them concerns this device).
    let dev = Arch::parse("gfx942:sramecc+:xnack-").unwrap();
    let s = Selector::new(&reg).select(dev, "pre", &shape, &Budget::default()).unwrap();
    assert_eq!(s.variant.id(), "pre_amd");
    assert!(s.rejected.is_empty() && s.other_arches == 4, "{}", s.explain());
    // Formulation and dtype.
    let s = Selector::new(&reg)
        .select(Arch::Sm90a, "pre", &Shape::new(8192, 8, 64, "bf16").with_formulation("paper"), &Budget::default())
        .unwrap();
    assert!(s.rejected.iter().any(|r| r.id == "pre_decoy" && matches!(r.reason, Reason::Formulation { .. })));
    let s = Selector::new(&reg).select(Arch::Sm90a, "pre", &Shape::new(8, 8, 64, "f32"), &Budget::default()).unwrap();
    assert!(s.rejected.iter().any(|r| r.id == "pre_decoy" && matches!(r.reason, Reason::Dtype { .. })));
}

#[test]
fn register_file_limit_rejects_oversized_blocks() {
    let text = FAKE
        .replace("registers = 40,", "registers = 255,")
        .replace("threads = 128\nx_passes = 2", "threads = 512\nx_passes = 2");
    let reg = Registry::from_expectations(&text).unwrap();
    let s = Selector::new(&reg).select(Arch::Sm90a, "pre", &Shape::new(7, 16, 4096, "f32"), &Budget::default());
    let err = s.unwrap_err();
    assert!(err.rejected.iter().any(|r| r.id == "pre_generic" && matches!(r.reason, Reason::RegisterFile { .. })));
}

#[test]
fn no_variant_lists_every_rejection() {
    let reg = fake();
    let err =
        Selector::new(&reg).select(Arch::Sm90a, "pre", &Shape::new(7, 3, 4096, "f32"), &Budget::default()).unwrap_err();
    assert_eq!(err.rejected.len(), 4, "{err}");
    assert_eq!(err.other_arches, 1, "pre_amd is for another architecture");
    let text = err.to_string();
    for id in ["pre_split", "pre_tile", "pre_generic", "pre_decoy"] {
        assert!(text.contains(id), "{text}");
    }
    assert!(text.contains("n=3 not supported"), "{text}");
    assert!(text.contains("1 variants of other stages"), "{text}");
    let err = Selector::new(&reg).select(Arch::Sm90a, "nonexistent", &Shape::new(7, 4, 64, "f32"), &Budget::default());
    assert!(err.unwrap_err().to_string().contains("no variant of this stage exists"));
}

#[test]
fn ties_break_by_catalogue_order_and_results_are_deterministic() {
    // Two identical variants: the first in the catalogue wins, every time.
    let block = FAKE.split("[[variant]]").nth(3).unwrap();
    let text = format!("[[variant]]{}[[variant]]{}", block, block.replace("pre_generic", "pre_generic_twin"));
    let reg = Registry::from_expectations(&text).unwrap();
    for _ in 0..3 {
        let s =
            Selector::new(&reg).select(Arch::Sm90a, "pre", &Shape::new(5, 4, 100, "f32"), &Budget::default()).unwrap();
        assert_eq!(s.variant.id(), "pre_generic");
        assert_eq!(s.candidates[0].cost_us, s.candidates[1].cost_us);
    }
}

fn table(variant: &str, sha: &str, tokens: u64) -> String {
    format!(
        "[[entry]]\narch = \"sm_90a\"\nunits = 132\nstage = \"pre\"\ndtype = \"bf16\"\ntokens = {tokens}\nn = 4\nc = 4096\n\
         variant = \"{variant}\"\nimage_sha256 = \"{sha}\"\nus = 2.5\ngbps = 900.0\nerror = 1e-6\nsamples = 100\ndate = \"2026-11-21\"\n"
    )
}

#[test]
fn tuned_entries_override_the_model_when_admissible_and_fresh() {
    let reg = fake();
    let sha = "ab".repeat(32);
    let shape = Shape::new(7, 4, 4096, "bf16");
    // The model picks pre_split at T = 7; the table (bucket 8) says pre_generic.
    let t = TunedTable::parse("t.toml", &table("pre_generic", &sha, bucket(7))).unwrap();
    let sel = Selector::new(&reg).with_table(&t);
    let s = sel.select(Arch::Sm90a, "pre", &shape, &Budget::default()).unwrap();
    assert_eq!(s.variant.id(), "pre_generic");
    assert!(matches!(&s.choice, Choice::Tuned(e) if e.us == 2.5));
    assert!(s.explain().contains("by the tuned table"));
    // Another SM count is another key: the model decides.
    let s = sel.clone().with_units(114).select(Arch::Sm90a, "pre", &shape, &Budget::default()).unwrap();
    assert_eq!((s.variant.id(), &s.choice), ("pre_split", &Choice::CostModel));
    // T = 9 falls in bucket 16: not this entry.
    let s = sel.select(Arch::Sm90a, "pre", &Shape::new(9, 4, 4096, "bf16"), &Budget::default()).unwrap();
    assert_eq!(s.variant.id(), "pre_split");
    // A tuned variant that fails this call's filters is ignored with a warning.
    let t = TunedTable::parse("t.toml", &table("pre_tile", &sha, 8)).unwrap();
    let s = Selector::new(&reg)
        .with_table(&t)
        .select(Arch::Sm90a, "pre", &shape, &Budget { max_shared_bytes: Some(16384), max_registers_per_thread: None })
        .unwrap();
    assert_eq!(s.variant.id(), "pre_split");
    assert!(s.warnings.iter().any(|w| w.contains("pre_tile") && w.contains("not admissible")), "{:?}", s.warnings);
    // A stale image hash: dropped with a warning, the model decides.
    let t = TunedTable::parse("t.toml", &table("pre_generic", &"cd".repeat(32), 8)).unwrap();
    let sel = Selector::new(&reg).with_table(&t);
    assert_eq!(sel.warnings().len(), 1);
    assert!(sel.warnings()[0].contains("changed since it was measured"), "{:?}", sel.warnings());
    let s = sel.select(Arch::Sm90a, "pre", &shape, &Budget::default()).unwrap();
    assert_eq!((s.variant.id(), &s.choice), ("pre_split", &Choice::CostModel));
    assert_eq!(s.warnings.len(), 1);
    // Unknown variants too.
    let t = TunedTable::parse("t.toml", &table("gone", &sha, 8)).unwrap();
    assert!(Selector::new(&reg).with_table(&t).warnings()[0].contains("not in the catalogue"));
}

#[test]
fn tuned_tables_are_validated() {
    let sha = "ab".repeat(32);
    let good = table("pre_generic", &sha, 8);
    TunedTable::parse("t", &good).unwrap();
    for (from, to) in [
        ("tokens = 8", "tokens = 7"),
        ("c = 4096", "c = 4000"),
        ("n = 4", "n = 33"),
        ("us = 2.5", "us = -1.0"),
        ("us = 2.5", "us = nan"),
        ("samples = 100", "samples = 0"),
        ("date = \"2026-11-21\"", "date = \"21.11.2026\""),
        ("arch = \"sm_90a\"", "arch = \"sm_80\""),
        ("dtype = \"bf16\"", "dtype = \"f16\""),
        ("units = 132", "units = 0"),
        ("samples = 100", "samples = 100\nextra = 1"),
    ] {
        let bad = good.replace(from, to);
        assert!(TunedTable::parse("t", &bad).is_err(), "{from} -> {to} was accepted");
    }
    let sha_bad = good.replace(&sha, &"AB".repeat(32));
    assert!(TunedTable::parse("t", &sha_bad).is_err());
    let twice = format!("{good}{good}");
    assert!(TunedTable::parse("t", &twice).unwrap_err().to_string().contains("same key"));
}

#[test]
fn explain_is_readable() {
    let reg = fake();
    let s = Selector::new(&reg)
        .select(
            Arch::Sm90a,
            "pre",
            &Shape::new(7, 4, 4096, "bf16").with_formulation("v4"),
            &Budget { max_registers_per_thread: Some(128), max_shared_bytes: None },
        )
        .unwrap();
    let text = s.explain();
    for needle in [
        "select stage pre on sm_90a (132 units) for T=7 n=4 C=4096 bf16 v4, at most 128 registers/thread",
        "chosen: pre_split",
        "by the cost model",
        "why it exists: decode",
        "candidates (estimated cost):",
        "rejected pre_tile: uses 168 registers per thread, over the budget of 128",
        "rejected pre_decoy: n=4 not supported (has [8])",
        "(1 variants of this stage for other architectures not considered)",
        "(1 variants of other stages not considered)",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    assert!(text.lines().all(|l| l.len() < 140), "{text}");
    // A selection that rejected nothing does not claim that nothing exists.
    let gfx = mhc_loader::select(
        Arch::Gfx942(AmdFeatures::ANY),
        "expand",
        &Shape::new(4, 3, 300, "bf16"),
        &Budget::default(),
    )
    .unwrap();
    assert!(gfx.rejected.is_empty() && !gfx.explain().contains("no variant of this stage exists"), "{}", gfx.explain());
}

#[test]
fn the_embedded_coeffs_variants_are_selectable() {
    // n <= 4: the per-thread kernel; n >= 8: the shuffle kernel (both measured faster than the
    // shared-memory warp kernel, which is kept for comparison: run only when asked for).
    for (arch, t, n, entry) in [
        (Arch::Sm90a, 7, 4, "mhc_coeffs_thread"),
        (Arch::Sm90a, 8192, 1, "mhc_coeffs_thread"),
        (Arch::Sm90a, 1, 8, "mhc_coeffs_shfl"),
        (Arch::Sm90a, 8192, 32, "mhc_coeffs_shfl"),
        (Arch::Sm100a, 7, 32, "mhc_coeffs_shfl"),
        (Arch::Sm100a, 7, 2, "mhc_coeffs_thread"),
    ] {
        let s = mhc_loader::select(arch, "coeffs", &Shape::new(t, n, 4096, "bf16"), &Budget::default()).unwrap();
        assert_eq!(s.variant.entry.entry, entry, "{}", s.explain());
        assert_eq!(s.variant.arch, arch);
        assert_eq!(s.variant.resources.kernarg_bytes, 80, "CoeffsArgs is 80 bytes");
        assert!(s.rejected.iter().any(|r| r.id.ends_with("_warp") && r.reason == Reason::OnRequest));
    }
}

/// A rank puts a variant ahead of the cost model, among the variants that pass the filters
/// only; options the call has reject variants that lack them; the device's own limits
/// (`admit`) reject with the launcher's reason.
#[test]
fn rank_options_and_device_limits_decide_before_the_cost_model() {
    let none = Budget::default();
    let ranked = FAKE.replace("entry = \"pre_generic\"", "entry = \"pre_generic\"\nrank = 5\noptions = [\"gamma_k\"]");
    let text = ranked.replace("sha256 = \"\"", &format!("sha256 = \"{}\"", "ab".repeat(32)));
    let reg = Registry::from_expectations(&text).unwrap();
    let sel = Selector::new(&reg);
    // Cheaper by the model, but of lower rank: the fallback wins wherever it passes.
    let s = sel.select(Arch::Sm90a, "pre", &Shape::new(8192, 4, 4096, "bf16"), &none).unwrap();
    assert_eq!(s.variant.id(), "pre_generic", "{}", s.explain());
    assert_eq!(s.candidates[0].rank, 5);
    // The account names the rank, not the cost model, as what chose it.
    let text = s.explain();
    assert!(
        text.contains("by its rank (5, measured ahead of the cost model, which estimates pre_tile lowest"),
        "{text}"
    );
    assert!(!text.contains("by the cost model"), "{text}");
    // gamma_k is an option only the fallback has.
    let s = sel.select(Arch::Sm90a, "pre", &Shape::new(7, 4, 4096, "bf16").with_option("gamma_k"), &none).unwrap();
    assert_eq!(s.variant.id(), "pre_generic");
    assert!(s
        .rejected
        .iter()
        .any(|r| r.id == "pre_split" && r.reason == Reason::Option { option: "gamma_k".into(), supported: vec![] }));
    // gamma_f: nobody has it.
    let e = sel.select(Arch::Sm90a, "pre", &Shape::new(7, 4, 4096, "bf16").with_option("gamma_f"), &none).unwrap_err();
    assert!(e.to_string().contains("gamma_f not supported"), "{e}");
    // The device refuses the fallback: the cost model decides among the rest.
    let admit = |v: &mhc_loader::Variant| {
        if v.id() == "pre_generic" {
            Err("needs more SMs".to_string())
        } else {
            Ok(())
        }
    };
    let s = sel.select_with(Arch::Sm90a, "pre", &Shape::new(7, 4, 4096, "bf16"), &none, &admit).unwrap();
    assert_eq!(s.variant.id(), "pre_split");
    assert!(s.rejected.iter().any(|r| r.id == "pre_generic" && r.reason.to_string() == "needs more SMs"));
}

/// Buckets cover every token count once, in order, each the selector's own answer there.
#[test]
fn buckets_are_the_selection_at_every_token_count() {
    let reg = fake();
    let sel = Selector::new(&reg);
    let none = Budget::default();
    let shape = Shape::new(1, 4, 4096, "bf16");
    let buckets = sel.buckets(Arch::Sm90a, "pre", &shape, &none, 100_000, &|_| Ok(()));
    assert_eq!(buckets.last().unwrap().max_tokens, u64::MAX);
    assert!(buckets.windows(2).all(|w| w[0].max_tokens < w[1].max_tokens));
    let id = |b: &mhc_loader::TokenBucket| b.selection.as_ref().unwrap().variant.id().to_string();
    assert!(buckets.windows(2).all(|w| id(&w[0]) != id(&w[1])));
    let at = |t: u64| id(buckets.iter().find(|b| t <= b.max_tokens).unwrap());
    for t in [1, 2, 63, 64, 65, 100, 256, 257, 1000, 4096, 100_000] {
        assert_eq!(at(t), pick(&reg, &shape.at(t), &none), "T = {t}");
    }
    // Counts where nothing passes are ranges of their own, with the reasons.
    let split_only = |v: &mhc_loader::Variant| if v.id() == "pre_split" { Ok(()) } else { Err("not here".into()) };
    let gaps = sel.buckets(Arch::Sm90a, "pre", &shape, &none, 1000, &split_only);
    assert_eq!(gaps.len(), 2, "pre_split to 256 tokens, then nothing");
    assert_eq!((gaps[0].max_tokens, id(&gaps[0]).as_str()), (256, "pre_split"));
    assert!(gaps[1].selection.as_ref().unwrap_err().to_string().contains("T=1000 outside its token range"));
    assert!(sel.buckets(Arch::Sm90a, "nope", &shape, &none, 64, &|_| Ok(()))[0].selection.is_err());
}
