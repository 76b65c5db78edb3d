//! Tuned tables: the embedded ones parse strictly (a malformed table fails here, not at run
//! time), and at run time a malformed entry or table costs only itself, with a warning naming it.

use mhc_loader::tuning::{tables, TunedTable, EMBEDDED_TABLES};
use mhc_loader::{Arch, Budget, Registry, Selector, Shape};

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
