//! Pinned exact counts: every built-in preset, and one design for each TLB replacement policy
//! (set-associative and fully associative), each page-table kind and each TLB entry format, all
//! run in one pass over each bundled trace (`data/demo.xtr`, `data/sort-400.lackey.zst`). What is
//! pinned is the report `xlat run --json` writes for that run (docs/output.md): every counter of
//! every design, the optional models' included, without the wall-clock `seconds` and the
//! `xlat_version`. It lives in `crates/xlat/tests/golden/TRACE.json`; any change fails the test,
//! which lists each trace, design and key that changed.
//!
//! A change that is meant (a model corrected, a preset retuned, a design added) is accepted by
//! writing the files again and reviewing the difference:
//!
//! ```sh
//! XLAT_BLESS=1 cargo test -p xlat --test models golden
//! git diff crates/xlat/tests/golden
//! ```

use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use xlat::config::{Config, TlbFormat, PRESETS};
use xlat::engine::{self, RunOptions, System};
use xlat::pt::Kind;
use xlat::report::{self, ReportInput};
use xlat::tlb::Policy;

/// Every replacement policy. The match fails to compile when a policy is added, so that it gets
/// its designs here.
fn policies() -> Vec<Policy> {
    let all = vec![Policy::Lru, Policy::Fifo, Policy::Random, Policy::Nru, Policy::Plru];
    for p in &all {
        match p {
            Policy::Lru | Policy::Fifo | Policy::Random | Policy::Nru | Policy::Plru => {}
        }
    }
    all
}

/// Every page-table kind (the match, as in [`policies`]).
fn table_kinds() -> Vec<Kind> {
    let all = vec![Kind::Radix, Kind::Linear, Kind::Hashed, Kind::Clustered, Kind::VhptShort, Kind::VhptLong];
    for k in &all {
        match k {
            Kind::Radix | Kind::Linear | Kind::Hashed | Kind::Clustered | Kind::VhptShort | Kind::VhptLong => {}
        }
    }
    all
}

/// Every TLB entry format (the match, as in [`policies`]).
fn formats() -> Vec<TlbFormat> {
    let all = vec![TlbFormat::Single, TlbFormat::Superpage, TlbFormat::PartialSubblock, TlbFormat::CompleteSubblock];
    for f in &all {
        match f {
            TlbFormat::Single | TlbFormat::Superpage | TlbFormat::PartialSubblock | TlbFormat::CompleteSubblock => {}
        }
    }
    all
}

/// The designs, in report order: the presets, then the policies (a 32-entry 4-way and a
/// 16-entry fully associative TLB over a radix table), the page-table kinds (a 16-entry 4-way LRU
/// TLB; 4 more entries reserved for page-table pages where the table needs them; a long VHPT of
/// 64 Ki entries in front of a radix table) and the entry formats (a 16-entry fully associative
/// LRU TLB over a radix table, with page reservation in blocks of 4 pages, promotion to 16 KB
/// superpages and partial-subblock PTEs; complete-subblock with and without subblock prefetch).
/// The TLBs are small so that the bundled traces' few hundred pages keep every model busy.
fn designs() -> Vec<Config> {
    let mut tomls: Vec<(String, String)> = Vec::new();
    for p in policies() {
        let p = p.name();
        for (shape, geometry) in [("4way", "entries = 32\nways = 4"), ("full", "entries = 16")] {
            let name = format!("policy-{p}-{shape}");
            let toml = format!(
                "name = \"{name}\"\n[[tlb]]\nname = \"TLB\"\n{geometry}\npolicy = \"{p}\"\n[page_table]\nkind = \"radix\"\n"
            );
            tomls.push((name, toml));
        }
    }
    for k in table_kinds() {
        let tlb = match k {
            Kind::Linear | Kind::VhptShort => "entries = 20\nreserved = 4\nways = 4",
            _ => "entries = 16\nways = 4",
        };
        let table = match k {
            Kind::VhptLong => "vhpt_entries = 65536\n",
            _ => "",
        };
        let name = format!("table-{}", k.name());
        let toml = format!(
            "name = \"{name}\"\n[[tlb]]\nname = \"TLB\"\n{tlb}\npolicy = \"lru\"\n[page_table]\nkind = \"{}\"\n{table}",
            k.name()
        );
        tomls.push((name, toml));
    }
    for f in formats() {
        let prefetch: &[bool] = if f == TlbFormat::CompleteSubblock { &[false, true] } else { &[false] };
        for &prefetch in prefetch {
            let name = format!("format-{}{}", f.name(), if prefetch { "-prefetch" } else { "" });
            let toml = format!(
                "name = \"{name}\"\n[[tlb]]\nname = \"TLB\"\nentries = 16\npolicy = \"lru\"\nformat = \"{}\"\nsubblock_factor = 4\nprefetch = {prefetch}\n\
                 [page_table]\nkind = \"radix\"\n\
                 [os]\nframe_allocator = \"buddy\"\nreservation = true\nblock_pages = 4\nsuperpages = \"promote\"\npartial_subblock = true\n",
                f.name()
            );
            tomls.push((name, toml));
        }
    }
    let mut configs: Vec<Config> = PRESETS.iter().map(|(name, _)| Config::preset(name).unwrap()).collect();
    configs.extend(tomls.iter().map(|(name, toml)| Config::from_toml(toml, name).unwrap()));
    configs
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The report of one run of every design over `trace` (a path from the repository's root, as
/// it appears in the report), without `seconds` and `xlat_version`, its keys sorted.
/// With every design's `os.page_cache` set to `page_cache`.
fn report_with(trace: &str, page_cache: bool) -> Value {
    let mut configs = designs();
    for c in &mut configs {
        c.os.page_cache = page_cache;
    }
    let mut systems: Vec<System> = configs.iter().map(|c| System::new(c).unwrap()).collect();
    let path = repo().join(trace);
    let (mut reader, format) = xlat::trace::open::open_reader_inline(path.to_str().unwrap(), None).unwrap();
    let summary = engine::run(reader.as_mut(), &mut systems, RunOptions::default(), |_| {}).unwrap();
    let input = ReportInput { trace_path: trace, format: format.name(), summary: &summary, seconds: 0.0 };
    let mut doc = report::json(&input, &systems);
    let top = doc.as_object_mut().unwrap();
    top.remove("seconds");
    top.remove("xlat_version");
    sorted(doc)
}

/// `v` with the keys of every object in order (whatever order `serde_json` keeps).
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(m) => {
            let m: BTreeMap<String, Value> = m.into_iter().map(|(k, v)| (k, sorted(v))).collect();
            Value::Object(m.into_iter().collect::<Map<String, Value>>())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(sorted).collect()),
        v => v,
    }
}

/// Every leaf of `v` under its path (`trace.by_kind.load`, `tlb[0].misses`).
fn leaves(path: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                leaves(&if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, v, out);
            }
        }
        Value::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                leaves(&format!("{path}[{i}]"), v, out);
            }
        }
        v => {
            out.insert(path.to_string(), v.clone());
        }
    }
}

/// The leaves of a report by part: the run's own (key "") and each design's, by name.
fn parts(doc: &Value) -> BTreeMap<String, BTreeMap<String, Value>> {
    let mut parts = BTreeMap::new();
    let mut run = doc.clone();
    let configs = run.as_object_mut().and_then(|m| m.remove("configs")).unwrap_or(Value::Null);
    let mut own = BTreeMap::new();
    leaves("", &run, &mut own);
    parts.insert(String::new(), own);
    for c in configs.as_array().into_iter().flatten() {
        let mut l = BTreeMap::new();
        leaves("", c, &mut l);
        parts.insert(c["name"].as_str().unwrap_or("?").to_string(), l);
    }
    parts
}

/// One line per difference between the pinned report and this run's: `DESIGN: KEY: pinned A,
/// now B`, designs that appeared or went, and the design order if only that changed.
fn differences(pinned: &Value, now: &Value) -> Vec<String> {
    let (a, b) = (parts(pinned), parts(now));
    let mut out = Vec::new();
    for name in a.keys().chain(b.keys()).collect::<BTreeSet<_>>() {
        let design = if name.is_empty() { "(the run)" } else { name.as_str() };
        match (a.get(name), b.get(name)) {
            (Some(_), None) => out.push(format!("{design}: pinned, but no longer run")),
            (None, Some(_)) => out.push(format!("{design}: run, but not pinned")),
            (Some(x), Some(y)) => {
                for key in x.keys().chain(y.keys()).collect::<BTreeSet<_>>() {
                    match (x.get(key), y.get(key)) {
                        (Some(p), Some(n)) if p != n => out.push(format!("{design}: {key}: pinned {p}, now {n}")),
                        (Some(p), None) => out.push(format!("{design}: {key}: pinned {p}, now absent")),
                        (None, Some(n)) => out.push(format!("{design}: {key}: not pinned, now {n}")),
                        _ => {}
                    }
                }
            }
            (None, None) => unreachable!(),
        }
    }
    if out.is_empty() && pinned != now {
        out.push("the designs' order changed".to_string());
    }
    out
}

/// Compares the run over `trace` with `tests/golden/NAME.json`, or writes it under `XLAT_BLESS`.
fn check(trace: &str) {
    check_with(trace, true);
}

/// [`check`] of the designs with `os.page_cache` set to `page_cache` (only `true` is written
/// under `XLAT_BLESS`).
fn check_with(trace: &str, page_cache: bool) {
    let now = report_with(trace, page_cache);
    let name = Path::new(trace).file_name().unwrap().to_str().unwrap();
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.json"));
    let mut text = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b" ");
    serde::Serialize::serialize(&now, &mut serde_json::Serializer::with_formatter(&mut text, formatter)).unwrap();
    text.push(b'\n');
    if std::env::var_os("XLAT_BLESS").is_some() {
        if !page_cache {
            return;
        }
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(&file, &text).unwrap();
        eprintln!("wrote {}", file.display());
        return;
    }
    let pinned: Value = match std::fs::read(&file) {
        Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", file.display())),
        Err(e) => panic!("{}: {e}; XLAT_BLESS=1 cargo test -p xlat --test models golden writes it", file.display()),
    };
    let diff = differences(&pinned, &now);
    if !diff.is_empty() {
        const SHOWN: usize = 60;
        let mut msg = format!("{trace}: {} differences from {}:\n", diff.len(), file.display());
        for line in diff.iter().take(SHOWN) {
            msg += &format!("  {trace}: {line}\n");
        }
        if diff.len() > SHOWN {
            msg += &format!("  ... and {} more\n", diff.len() - SHOWN);
        }
        msg += "if the change is meant: XLAT_BLESS=1 cargo test -p xlat --test models golden, then review git diff";
        panic!("{msg}");
    }
}

#[test]
fn demo_xtr() {
    check("data/demo.xtr");
}

#[test]
fn sort_400_lackey_zst() {
    check("data/sort-400.lackey.zst");
}

/// Without the page cache the pinned counts are the same: the bundled traces map no object
/// and fork no process, so the page cache reads nothing in and nothing is copied.
#[test]
fn page_cache_off_demo_xtr() {
    check_with("data/demo.xtr", false);
}

#[test]
fn page_cache_off_sort_400_lackey_zst() {
    check_with("data/sort-400.lackey.zst", false);
}
