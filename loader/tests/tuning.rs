//! Tuned tables: the embedded ones parse strictly (a malformed table fails here, not at run
//! time), and at run time a malformed entry or table costs only itself, with a warning naming it.

use mhc_loader::tuning::{tables, TunedTable, EMBEDDED_TABLES};
use mhc_loader::{Arch, Budget, Registry, Selection, Selector, Shape};

#[test]
fn every_embedded_table_parses_strictly() {
    for (name, text) in EMBEDDED_TABLES {
        let table = TunedTable::parse(name, text).unwrap_or_else(|e| panic!("{e}"));
        assert!(table.skipped().is_empty());
    }
    for table in mhc_loader::tuning::embedded_tables().unwrap() {
        assert!(table.skipped().is_empty(), "{:?}", table.skipped());
    }
}

fn entry(variant: &str, tokens: u64, extra: &str) -> String {
    format!(
        "[[entry]]\narch = \"sm_90a\"\nunits = 132\nstage = \"pre\"\ndtype = \"bf16\"\ntokens = {tokens}\nn = 4\nc = 4096\n\
         variant = \"{variant}\"\nimage_sha256 = \"{}\"\nus = 2.5\ngbps = 900.0\nerror = 1e-6\nsamples = 100\n\
         date = \"2026-11-21\"\n{extra}\n",
        "ab".repeat(32)
    )
}

#[test]
fn a_malformed_entry_is_skipped_with_a_warning_naming_it() {
    let text = format!(
        "{}{}{}{}",
        entry("good_a", 8, ""),
        entry("bad_tokens", 7, ""),
        entry("bad_field", 16, "extra = 1"),
        entry("good_b", 32, "")
    );
    assert!(TunedTable::parse("t.toml", &text).is_err(), "strict parsing refuses the table");
    let t = TunedTable::parse_lenient("t.toml", &text);
    let kept: Vec<&str> = t.entries().iter().map(|e| e.variant.as_str()).collect();
    assert_eq!(kept, ["good_a", "good_b"]);
    let skipped = t.skipped();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].contains("t.toml") && skipped[0].contains("entry 2 (bad_tokens)"), "{skipped:?}");
    assert!(skipped[0].contains("powers of two"), "{skipped:?}");
    assert!(skipped[1].contains("entry 3 (bad_field)") && skipped[1].contains("extra"), "{skipped:?}");
    assert!(!skipped.iter().any(|w| w.contains("code object")));
}

#[test]
fn a_table_that_is_not_toml_costs_only_itself() {
    let sources = [("broken.toml", "[[entry]\nthis is not toml"), ("fine.toml", "")];
    let list = tables(&sources);
    assert_eq!(list.len(), 2);
    assert!(list[0].entries().is_empty());
    assert!(list[0].skipped()[0].contains("broken.toml: ignoring the whole table"), "{:?}", list[0].skipped());
    assert!(list[1].skipped().is_empty());
    // A selector built from them still selects, and says why the table was ignored.
    let registry = Registry::embedded().unwrap();
    let mut selector = Selector::new(registry);
    for t in &list {
        selector = selector.with_table(t);
    }
    let s = selector.select(Arch::Sm90a, "post", &Shape::new(16, 4, 4096, "bf16"), &Budget::default()).unwrap();
    assert!(s.warnings.iter().any(|w| w.contains("broken.toml")), "{:?}", s.warnings);
}

#[test]
fn check_reports_stale_entries_without_slicing_past_a_hash() {
    let t = TunedTable::parse("t.toml", &entry("pre_generic_gone", 8, "")).unwrap();
    let (kept, warnings) = t.check(Registry::embedded().unwrap());
    assert!(kept.is_empty());
    assert!(warnings[0].contains("not in the catalogue"), "{warnings:?}");
}

fn parse_one(text: &str) -> TunedTable {
    TunedTable::parse("t.toml", text).unwrap()
}

/// A rendered table parses back to the same entries, and rendering is a function of the
/// entries alone (order in, extra whitespace): the same measurements give the same file.
#[test]
fn a_rendered_table_reads_back_and_is_deterministic() {
    let a = parse_one(&format!(
        "{}{}",
        entry("pre_sm90_general", 64, "formulation = \"paper\"\ncost_model = \"pre_sm90_mid\"\ncost_model_us = 7.25\n"),
        entry("pre_sm90_mid", 8, "runner_up = \"pre_sm90_general\"\nrunner_up_margin_pct = 3.5\ngpu = \"H100\"\n")
    ));
    let b = TunedTable::from_entries("t.toml", a.entries().iter().rev().cloned().collect()).unwrap();
    let text = a.render("Tuned table for sm_90a\n\nwritten by mhc tune");
    assert_eq!(text, b.render("Tuned table for sm_90a\n\nwritten by mhc tune"));
    assert!(text.starts_with("# Tuned table for sm_90a\n#\n# written by mhc tune\n"));
    let back = parse_one(&text);
    assert_eq!(back.entries().len(), 2);
    // Sorted by key: tokens 8 before 64.
    assert_eq!(back.entries()[0].variant, "pre_sm90_mid");
    assert_eq!(back.entries()[1].formulation.as_deref(), Some("paper"));
    assert_eq!(back.entries()[1].cost_model_us, Some(7.25));
    assert_eq!(back.entries()[0].runner_up_margin_pct, Some(3.5));
}

/// `from_entries` refuses what a strict parse refuses, naming the entry.
#[test]
fn from_entries_validates() {
    let a = parse_one(&entry("pre_sm90_general", 64, ""));
    let mut e = a.entries()[0].clone();
    e.formulation = Some("v5".into());
    let err = TunedTable::from_entries("t.toml", vec![e]).unwrap_err().to_string();
    assert!(err.contains("formulation"), "{err}");
    let twice = vec![a.entries()[0].clone(), a.entries()[0].clone()];
    assert!(TunedTable::from_entries("t.toml", twice).unwrap_err().to_string().contains("second entry"));
}

/// A tuned entry steers the selector only for its key: its formulation (or either), and the
/// SM count it was measured on; an entry from a part with another SM count is named in the
/// warnings and the cost model's choice stands.
#[test]
fn a_tuned_entry_applies_to_its_formulation_and_sm_count_only() {
    let reg = Registry::embedded().unwrap();
    let arch = Arch::parse("sm_90a").unwrap();
    let shape = Shape::new(300, 4, 4096, "bf16").with_formulation("v4");
    let base = Selector::new(reg).with_units(132);
    let sel = base.select(arch, "pre", &shape, &Budget::default()).unwrap();
    assert!(sel.candidates.len() >= 2, "{}", sel.explain());
    let model = sel.candidates[0].id.clone();
    let other = sel.candidates[1].id.clone();
    let sha = reg.get(&other).unwrap().image_sha256.clone();
    let table = |formulation: &str, units: u32| {
        let text = entry(&other, 512, formulation).replace("image_sha256 = \"", "image_sha256 = \"X");
        let text =
            text.replace(&format!("X{}", "ab".repeat(32)), &sha).replace("units = 132", &format!("units = {units}"));
        TunedTable::parse("t.toml", &text).unwrap()
    };
    let pick = |t: &TunedTable| {
        let s = Selector::new(reg).with_units(132).with_table(t);
        let sel = s.select(arch, "pre", &shape, &Budget::default()).unwrap();
        (sel.variant.id().to_string(), sel.warnings.clone(), sel.explain())
    };
    let (id, warnings, explain) = pick(&table("formulation = \"v4\"", 132));
    assert_eq!(id, other, "{explain}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(explain.contains("the cost model would choose: ") && explain.contains(&model), "{explain}");
    assert_eq!(pick(&table("", 132)).0, other, "an entry without a formulation answers either");
    assert_eq!(pick(&table("formulation = \"paper\"", 132)).0, model, "another formulation's entry");
    let (id, warnings, _) = pick(&table("formulation = \"v4\"", 114));
    assert_eq!(id, model);
    assert!(warnings.iter().any(|w| w.contains("114 units") && w.contains("132")), "{warnings:?}");
}

/// The embedded registry's choice for `stage` at `shape` with `table` on a 132-SM GPU named
/// `gpu` (or none), or the rejections when it chooses no row.
/// What the cost model alone selects on a 132-SM sm_90a part.
fn untuned(stage: &str, shape: &Shape) -> Selection<'static> {
    let reg = Registry::embedded().unwrap();
    Selector::new(reg).with_units(132).select(Arch::parse("sm_90a").unwrap(), stage, shape, &Budget::default()).unwrap()
}

fn choice(stage: &str, shape: &Shape, table: &TunedTable, gpu: Option<&str>) -> Result<String, String> {
    let reg = Registry::embedded().unwrap();
    let mut s = Selector::new(reg).with_units(132).with_table(table);
    if let Some(g) = gpu {
        s = s.with_device(g);
    }
    let arch = Arch::parse("sm_90a").unwrap();
    s.select(arch, stage, shape, &Budget::default()).map(|sel| sel.variant.id().to_string()).map_err(|e| e.to_string())
}

/// An entry made for one GPU answers only on that GPU, and there before an entry for every
/// GPU; a selection made without a GPU's name ignores it.
#[test]
fn a_device_entry_applies_to_its_gpu_and_first() {
    let reg = Registry::embedded().unwrap();
    let shape = Shape::new(300, 4, 4096, "bf16").with_formulation("v4");
    let sel = untuned("pre", &shape);
    let (model, other) = (sel.candidates[0].id.clone(), sel.candidates[1].id.clone());
    let row = |variant: &str, extra: &str| {
        let sha = &reg.get(variant).unwrap().image_sha256;
        entry(variant, 512, extra).replace(&"ab".repeat(32), sha)
    };
    let only_a = TunedTable::parse("t.toml", &row(&other, "device = \"GPU A\"")).unwrap();
    assert_eq!(choice("pre", &shape, &only_a, Some("GPU A")).unwrap(), other);
    assert_eq!(choice("pre", &shape, &only_a, Some("GPU B")).unwrap(), model, "another GPU's entry");
    assert_eq!(choice("pre", &shape, &only_a, None).unwrap(), model, "no GPU named: no GPU's entry");
    let both = format!("{}{}", row(&other, ""), row(&model, "device = \"GPU A\""));
    let both = TunedTable::parse("t.toml", &both).unwrap();
    assert_eq!(choice("pre", &shape, &both, Some("GPU A")).unwrap(), model, "the GPU's own entry first");
    assert_eq!(choice("pre", &shape, &both, Some("GPU B")).unwrap(), other, "then the entry for every GPU");
    for bad in ["device = \"\"", "device = \" GPU A\""] {
        assert!(TunedTable::parse("t.toml", &row(&other, bad)).is_err(), "{bad} was accepted");
    }
}

/// A `post_pre` entry of `post+pre` rejects every fused row, so the plan runs post, then pre;
/// it names the fused row it beat and goes stale with that row's image.
#[test]
fn a_post_then_pre_entry_rejects_the_fused_rows() {
    let reg = Registry::embedded().unwrap();
    let shape = Shape::new(256, 4, 4096, "bf16").with_formulation("v4");
    let fused = untuned("post_pre", &shape).variant.id().to_string();
    let sha = reg.get(&fused).unwrap().image_sha256.clone();
    let text = |sha: &str, extra: &str| {
        entry("post+pre", 256, extra).replace("stage = \"pre\"", "stage = \"post_pre\"").replace(&"ab".repeat(32), sha)
    };
    let beat = format!("cost_model = \"{fused}\"\ncost_model_us = 20.1\ngpu = \"GPU A\"");
    let table = TunedTable::parse("t.toml", &text(&sha, &beat)).unwrap();
    let why = choice("post_pre", &shape, &table, None).unwrap_err();
    assert!(why.contains(&format!("rejected {fused}: the tuned table chose post, then pre")), "{why}");
    assert!(why.contains("2.50 us against 20.10 us"), "{why}");
    // Other token buckets keep the fused row, and so does a call that asks for its launcher.
    assert_eq!(choice("post_pre", &shape.clone().at(300), &table, None).unwrap(), fused);
    let launcher = reg.get(&fused).unwrap().entry.launch.clone();
    let asked = Selector::new(reg).with_units(132).with_table(&table).select(
        Arch::parse("sm_90a").unwrap(),
        "post_pre",
        &shape.clone().with_launch(&launcher),
        &Budget::default(),
    );
    let asked = asked.unwrap();
    assert_eq!(asked.variant.id(), fused);
    assert!(asked.warnings.is_empty(), "{:?}", asked.warnings);
    // The fused row's image changed: the entry is stale, the fused row runs.
    let stale = TunedTable::parse("t.toml", &text(&"cd".repeat(32), &beat)).unwrap();
    assert_eq!(choice("post_pre", &shape, &stale, None).unwrap(), fused);
    // Without the row it beat, or for another stage, the entry is malformed.
    assert!(TunedTable::parse("t.toml", &text(&sha, "")).is_err());
    let other_stage = text(&sha, &beat).replace("stage = \"post_pre\"", "stage = \"pre\"");
    assert!(TunedTable::parse("t.toml", &other_stage).is_err());
}
