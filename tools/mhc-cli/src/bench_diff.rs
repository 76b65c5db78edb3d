//! `mhc bench-diff OLD NEW`: two benchmark records (docs/benchmarks/README.md's format, as
//! `mhc bench` writes them) side by side. For every row both hold (same stage, formulation,
//! dtype, T, n and C): each column's time in both and their ratio, what bounds the back-to-back
//! figure ([`crate::bench::b2b_limit`], in either run), and whether the variant changed. The
//! summary gives each column's range of ratios, split by that bound, so two runs of the same
//! kernels show how far they agree and a kernel change shows where it moved.

use crate::bench::{b2b_limit, B2bLimit};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Arguments of `mhc bench-diff`.
#[derive(clap::Args)]
pub struct Args {
    /// The earlier record (bench.json, or a file of docs/benchmarks/records/).
    pub old: PathBuf,
    /// The later record.
    pub new: PathBuf,
    /// Ratios further than this many percent from 1 are marked `*` and counted.
    #[arg(long, default_value_t = 5.0)]
    pub tol_pct: f64,
}

/// The identity of a row across records: stage, formulation, dtype, T, n, C.
type Key = (String, String, String, u64, u64, u64);

/// One row of a record, as far as the comparison needs it.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    variant: String,
    us_b2b: Option<f64>,
    us_graph: Option<f64>,
    limit: Option<B2bLimit>,
}

/// A parsed record: its rows by key, in the record's order, and its yardsticks.
#[derive(Debug)]
struct Record {
    label: String,
    copy_gbps: Option<f64>,
    launch_b2b: Option<f64>,
    rows: Vec<(Key, Entry)>,
}

fn field<'a>(v: &'a Value, name: &str, what: &str) -> Result<&'a Value, String> {
    v.get(name).ok_or_else(|| format!("{what}: no \"{name}\""))
}

fn text(v: &Value, name: &str, what: &str) -> Result<String, String> {
    field(v, name, what)?.as_str().map(str::to_string).ok_or_else(|| format!("{what}: \"{name}\" is not a string"))
}

fn count(v: &Value, name: &str, what: &str) -> Result<u64, String> {
    field(v, name, what)?.as_u64().ok_or_else(|| format!("{what}: \"{name}\" is not a whole number"))
}

/// A time, or none where the record holds null (a failed or unmeasured column) or no such key.
fn time(v: &Value, name: &str) -> Option<f64> {
    v.get(name).and_then(Value::as_f64).filter(|t| t.is_finite() && *t > 0.0)
}

fn parse(text_of_record: &str, label: &str) -> Result<Record, String> {
    let v: Value = serde_json::from_str(text_of_record).map_err(|e| format!("{label}: not JSON: {e}"))?;
    let launch_b2b = time(&v, "launch_us_b2b");
    // A row's dtype; a few hand-assembled records give it once for the run instead.
    let run_dtype = v.get("dtype").and_then(Value::as_str);
    let rows = field(&v, "rows", label)?.as_array().ok_or_else(|| format!("{label}: \"rows\" is not a list"))?;
    let mut out = Vec::with_capacity(rows.len());
    for (i, r) in rows.iter().enumerate() {
        let what = format!("{label}: row {i}");
        let key = (
            text(r, "stage", &what)?,
            text(r, "formulation", &what)?,
            match (r.get("dtype"), run_dtype) {
                (None, Some(d)) => d.to_string(),
                _ => text(r, "dtype", &what)?,
            },
            count(r, "T", &what)?,
            count(r, "n", &what)?,
            count(r, "C", &what)?,
        );
        let variant = text(r, "variant", &what)?;
        let (us_b2b, us_graph) = (time(r, "us_b2b"), time(r, "us_graph"));
        // Records before the `launches` key: `mhc bench` names a call of several kernels
        // "first + second".
        let launches = match r.get("launches") {
            Some(n) => n.as_u64().filter(|&n| n >= 1).ok_or_else(|| format!("{what}: \"launches\" is not >= 1"))?,
            None => variant.split(" + ").count() as u64,
        };
        let limit = match (us_b2b, launch_b2b) {
            (Some(b2b), Some(l)) => Some(b2b_limit(b2b, us_graph, launches as usize, l)),
            _ => None,
        };
        out.push((key, Entry { variant, us_b2b, us_graph, limit }));
    }
    let commit = v.get("commit").and_then(Value::as_str).unwrap_or("?");
    let date = v.get("date").and_then(Value::as_str).unwrap_or("?");
    let gpu = v.get("gpu").and_then(Value::as_str).unwrap_or("?");
    Ok(Record {
        label: format!("{label} ({gpu}, {date}, {commit})"),
        copy_gbps: time(&v, "copy_gbps"),
        launch_b2b,
        rows: out,
    })
}

fn load(path: &Path) -> Result<Record, String> {
    let s = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&s, &path.display().to_string())
}

/// The range of a column's ratios and how many lie past the tolerance.
#[derive(Debug, Default)]
struct Spread {
    n: usize,
    lo: f64,
    hi: f64,
    outside: usize,
}

impl Spread {
    fn add(&mut self, ratio: f64, tol: f64) {
        if self.n == 0 {
            (self.lo, self.hi) = (ratio, ratio);
        }
        self.n += 1;
        self.lo = self.lo.min(ratio);
        self.hi = self.hi.max(ratio);
        if (ratio - 1.0).abs() * 100.0 > tol {
            self.outside += 1;
        }
    }

    fn line(&self, what: &str, tol: f64) -> String {
        if self.n == 0 {
            return format!("{what}: no row");
        }
        format!("{what}: {} rows, new / old {:.3} .. {:.3}, {} beyond {tol}%", self.n, self.lo, self.hi, self.outside)
    }
}

/// The comparison as text: the row table, then the summary.
fn diff(old: &Record, new: &Record, tol: f64) -> String {
    let olds: BTreeMap<&Key, &Entry> = old.rows.iter().map(|(k, e)| (k, e)).collect();
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("old: {}", old.label));
    line(format!("new: {}", new.label));
    let show = |v: Option<f64>, unit: &str| v.map_or("-".to_string(), |v| format!("{v:.2}{unit}"));
    line(format!(
        "copy bandwidth GB/s: {} -> {}; smallest kernel back-to-back us: {} -> {}",
        show(old.copy_gbps, ""),
        show(new.copy_gbps, ""),
        show(old.launch_b2b, ""),
        show(new.launch_b2b, "")
    ));
    line(format!(
        "{:<8} {:<5} {:<4} {:>5} {:>3} {:>5} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>6}  variant",
        "stage",
        "form",
        "dtype",
        "T",
        "n",
        "C",
        "b2b_old",
        "b2b_new",
        "ratio",
        "graph_old",
        "graph_new",
        "ratio",
        "b2b_by"
    ));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(b / a),
        _ => None,
    };
    let mark = |r: Option<f64>| match r {
        Some(r) => format!("{r:.3}{}", if (r - 1.0).abs() * 100.0 > tol { "*" } else { " " }),
        None => "-".to_string(),
    };
    let (mut gpu_b2b, mut host_b2b, mut graph) = (Spread::default(), Spread::default(), Spread::default());
    let (mut matched, mut changed) = (0usize, 0usize);
    let mut seen = std::collections::BTreeSet::new();
    for (key, e) in &new.rows {
        let Some(o) = olds.get(key) else { continue };
        matched += 1;
        seen.insert(key);
        let host = o.limit == Some(B2bLimit::Host) || e.limit == Some(B2bLimit::Host);
        let same_variant = o.variant == e.variant;
        let (rb, rg) = (ratio(o.us_b2b, e.us_b2b), ratio(o.us_graph, e.us_graph));
        if same_variant {
            if let Some(r) = rb {
                if host { &mut host_b2b } else { &mut gpu_b2b }.add(r, tol);
            }
            if let Some(r) = rg {
                graph.add(r, tol);
            }
        } else {
            changed += 1;
        }
        let variant = if same_variant { e.variant.clone() } else { format!("{} (was {})", e.variant, o.variant) };
        line(format!(
            "{:<8} {:<5} {:<4} {:>5} {:>3} {:>5} {:>9} {:>9} {:>7} {:>9} {:>9} {:>7} {:>6}  {variant}",
            key.0,
            key.1,
            key.2,
            key.3,
            key.4,
            key.5,
            show(o.us_b2b, ""),
            show(e.us_b2b, ""),
            mark(rb),
            show(o.us_graph, ""),
            show(e.us_graph, ""),
            mark(rg),
            if host { "host" } else { "gpu" },
        ));
    }
    // A record may repeat a key (hand-assembled records): count rows, never subtract past zero.
    let only_new = new.rows.len() - matched;
    let only_old = old.rows.iter().filter(|(k, _)| !seen.contains(k)).count();
    line(format!(
        "{matched} rows in both ({changed} with another variant, left out of the ranges below); {only_old} only in old, {only_new} only in new"
    ));
    line(gpu_b2b.line("back-to-back, gpu-bound", tol));
    line(host_b2b.line("back-to-back, host-bound (the host's launch rate)", tol));
    line(graph.line("graph replay", tol));
    out
}

pub fn main(args: Args) -> Result<(), String> {
    if !(args.tol_pct.is_finite() && args.tol_pct >= 0.0) {
        return Err(format!("--tol-pct must be a percentage >= 0 (got {})", args.tol_pct));
    }
    let (old, new) = (load(&args.old)?, load(&args.new)?);
    print!("{}", diff(&old, &new, args.tol_pct));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A test row: stage, T, variant, us_b2b, us_graph.
    type TestRow<'a> = (&'a str, u64, &'a str, Option<f64>, Option<f64>);

    fn record(launch: f64, rows: &[TestRow<'_>]) -> String {
        let rows: Vec<Value> = rows
            .iter()
            .map(|&(stage, t, variant, b2b, graph)| {
                serde_json::json!({"stage": stage, "formulation": "v4", "dtype": "bf16", "T": t, "n": 4, "C": 4096,
                    "variant": variant, "us_b2b": b2b, "us_graph": graph})
            })
            .collect();
        serde_json::json!({"gpu": "G", "date": "2026-01-01", "commit": "abc", "copy_gbps": 3000.0,
            "launch_us_b2b": launch, "rows": rows})
        .to_string()
    }

    /// Ratios are new / old; a row is host-bound when either run says so; a changed variant is
    /// shown but kept out of the ranges; rows in one record only are counted.
    #[test]
    fn ratios_bounds_and_variants() {
        let old = parse(
            &record(
                4.0,
                &[
                    ("pre", 1, "k", Some(7.0), Some(5.0)),
                    ("post", 1, "p", Some(4.0), Some(1.1)),
                    ("pre", 8192, "k", Some(200.0), None),
                    ("head", 1, "h", Some(6.0), Some(5.5)),
                    ("expand", 1, "e", Some(3.0), Some(1.0)),
                ],
            ),
            "old",
        )
        .unwrap();
        let new = parse(
            &record(
                3.8,
                &[
                    ("pre", 1, "k", Some(7.07), Some(5.05)),
                    ("post", 1, "p", Some(5.0), Some(1.1)),
                    ("pre", 8192, "k", Some(180.0), None),
                    ("head", 1, "h2", Some(3.0), Some(2.5)),
                    ("static", 1, "s", Some(3.0), None),
                ],
            ),
            "new",
        )
        .unwrap();
        let text = diff(&old, &new, 5.0);
        assert!(text.contains("4 rows in both (1 with another variant"), "{text}");
        assert!(text.contains("1 only in old, 1 only in new"), "{text}");
        assert!(text.contains("back-to-back, gpu-bound: 2 rows, new / old 0.900 .. 1.010, 1 beyond 5%"), "{text}");
        assert!(
            text.contains("host-bound (the host's launch rate): 1 rows, new / old 1.250 .. 1.250, 1 beyond"),
            "{text}"
        );
        assert!(text.contains("graph replay: 2 rows, new / old 1.000 .. 1.010, 0 beyond"), "{text}");
        assert!(text.contains("h2 (was h)"), "{text}");
        assert!(text.lines().any(|l| l.starts_with("pre ") && l.contains("0.900*")), "{text}");
    }

    /// A key repeated in one record (a hand-assembled one) is compared, not a crash.
    #[test]
    fn repeated_keys() {
        let old = parse(&record(4.0, &[("pre", 1, "k", Some(7.0), None)]), "old").unwrap();
        let new =
            parse(&record(4.0, &[("pre", 1, "k", Some(7.0), None), ("pre", 1, "k", Some(7.7), None)]), "new").unwrap();
        let text = diff(&old, &new, 5.0);
        assert!(
            text.contains(
                "2 rows in both (0 with another variant, left out of the ranges below); 0 only in old, 0 only in new"
            ),
            "{text}"
        );
        let text = diff(&new, &old, 5.0);
        assert!(text.contains("1 rows in both") && text.contains("0 only in old, 0 only in new"), "{text}");
    }

    /// A call of two kernels ("a + b") needs twice the launch time before it counts as gpu-bound;
    /// a `launches` key takes precedence.
    #[test]
    fn launches_per_call() {
        let two = parse(&record(4.0, &[("post_pre", 1, "a + b", Some(9.0), Some(9.0))]), "r").unwrap();
        assert_eq!(two.rows[0].1.limit, Some(B2bLimit::Host));
        let one = parse(&record(4.0, &[("post_pre", 1, "fused", Some(9.0), Some(9.0))]), "r").unwrap();
        assert_eq!(one.rows[0].1.limit, Some(B2bLimit::Gpu));
        let mut v: Value =
            serde_json::from_str(&record(4.0, &[("post_pre", 1, "a + b", Some(9.0), Some(9.0))])).unwrap();
        v["rows"][0]["launches"] = 1.into();
        assert_eq!(parse(&v.to_string(), "r").unwrap().rows[0].1.limit, Some(B2bLimit::Gpu));
    }

    /// Malformed records are refused with what is wrong, never a panic.
    #[test]
    fn malformed_records_are_errors() {
        assert!(parse("{", "r").unwrap_err().contains("not JSON"));
        assert!(parse("{}", "r").unwrap_err().contains("no \"rows\""));
        assert!(parse(r#"{"rows": 3}"#, "r").unwrap_err().contains("not a list"));
        let e = parse(r#"{"rows": [{"stage": "pre", "formulation": "v4", "T": 1}]}"#, "r").unwrap_err();
        assert!(e.contains("row 0") && e.contains("dtype"), "{e}");
        let e = parse(r#"{"dtype": "bf16", "rows": [{"stage": "pre"}]}"#, "r").unwrap_err();
        assert!(e.contains("row 0") && e.contains("formulation"), "{e}");
        let mut v: Value = serde_json::from_str(&record(4.0, &[("pre", 1, "k", Some(1.0), None)])).unwrap();
        v["rows"][0]["launches"] = 0.into();
        assert!(parse(&v.to_string(), "r").unwrap_err().contains("launches"));
        v["rows"][0]["T"] = (-1).into();
        assert!(parse(&v.to_string(), "r").unwrap_err().contains("\"T\""));
    }
}
