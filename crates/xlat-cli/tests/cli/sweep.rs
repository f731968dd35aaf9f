//! `xlat sweep`: every row of the table against a separate `xlat run --json` of the same design;
//! reruns and killed sweeps computing only the missing points; errors.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One CSV line's fields (quoted fields may hold commas and doubled quotes).
fn csv_fields(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let (mut quoted, mut chars) = (false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                chars.next();
                fields.last_mut().unwrap().push('"');
            }
            ('"', _) => quoted = !quoted,
            (',', false) => fields.push(String::new()),
            (c, _) => fields.last_mut().unwrap().push(c),
        }
    }
    fields
}

fn read_csv(path: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = csv_fields(lines.next().unwrap());
    (header, lines.map(csv_fields).collect())
}

/// A JSON document's leaves by dotted path (lists by index), as the table spells them.
fn leaves(prefix: &str, v: &Value, out: &mut Vec<(String, String)>) {
    let join = |k: &str| if prefix.is_empty() { k.to_string() } else { format!("{prefix}.{k}") };
    match v {
        Value::Object(o) => o.iter().for_each(|(k, v)| leaves(&join(k), v, out)),
        Value::Array(a) => a.iter().enumerate().for_each(|(i, v)| leaves(&join(&i.to_string()), v, out)),
        Value::String(s) => out.push((prefix.to_string(), s.clone())),
        Value::Null => out.push((prefix.to_string(), String::new())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

fn point_files(out: &Path) -> usize {
    std::fs::read_dir(out.join("points"))
        .map(|d| d.filter(|e| e.as_ref().unwrap().file_name().to_string_lossy().ends_with(".json")).count())
        .unwrap_or(0)
}

const SWEEP: &str = r#"
base = "x86-64"
traces = ["demo.xtr", "sort-400.lackey.zst"]
[vary]
"tlb.1.entries" = [16, 64]
"page_table.kind" = ["radix", "hashed"]
[[zip]]
"tlb.0.entries" = [32, 128]
"tlb.0.ways" = [4, 8]
"#;

/// A scratch directory with the two bundled traces and the sweep file.
fn setup(sweep: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    for t in ["demo.xtr", "sort-400.lackey.zst"] {
        std::fs::copy(data(t), dir.path().join(t)).unwrap();
    }
    let file = dir.path().join("sweep.toml");
    std::fs::write(&file, sweep).unwrap();
    (dir, file)
}

#[test]
fn every_row_is_a_separate_run_of_its_design() {
    let (dir, file) = setup(SWEEP);
    let out = dir.path().join("out");
    let o = ok(run(&["sweep", s(&file), "--out", s(&out), "--jobs", "2", "--group", "3"]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("8 points x 2 traces: 16 simulated"), "{err}");
    let (header, rows) = read_csv(&out.join("results.csv"));
    assert_eq!(
        header[..7],
        ["trace", "tlb.1.entries", "page_table.kind", "tlb.0.entries", "tlb.0.ways", "name", "status"]
    );
    assert_eq!(rows.len(), 16);
    let parquet = std::fs::read(out.join("results.parquet")).unwrap();
    assert!(parquet.starts_with(b"PAR1") && parquet.ends_with(b"PAR1"), "a Parquet file");
    let preset: toml::Table =
        toml::from_str(&std::fs::read_to_string(data("../configs/x86-64.toml")).unwrap()).unwrap();
    let mut combos = std::collections::BTreeSet::new();
    for row in &rows {
        let cell = |c: &str| row[header.iter().position(|h| h == c).unwrap()].clone();
        assert_eq!(row.len(), header.len());
        assert_eq!(cell("status"), "ok");
        // The design, built here by hand from the preset's file.
        let (l1d, kind, l1i, ways): (i64, String, i64, i64) = (
            cell("tlb.1.entries").parse().unwrap(),
            cell("page_table.kind"),
            cell("tlb.0.entries").parse().unwrap(),
            cell("tlb.0.ways").parse().unwrap(),
        );
        assert!([(32, 4), (128, 8)].contains(&(l1i, ways)), "zipped, not crossed: {l1i} {ways}");
        combos.insert((cell("trace"), l1d, kind.clone(), l1i));
        let name = format!("x86-64 tlb.1.entries={l1d} page_table.kind={kind} tlb.0.entries={l1i} tlb.0.ways={ways}");
        assert_eq!(cell("name"), name);
        let mut d = preset.clone();
        d["name"] = name.clone().into();
        let tlbs = d["tlb"].as_array_mut().unwrap();
        tlbs[1].as_table_mut().unwrap().insert("entries".into(), l1d.into());
        tlbs[0].as_table_mut().unwrap().insert("entries".into(), l1i.into());
        tlbs[0].as_table_mut().unwrap().insert("ways".into(), ways.into());
        d["page_table"].as_table_mut().unwrap().insert("kind".into(), kind.into());
        let cfg = dir.path().join("design.toml");
        std::fs::write(&cfg, toml::to_string(&d).unwrap()).unwrap();
        let trace = dir.path().join(cell("trace"));
        let doc = run_json(&["run", "-c", s(&cfg), "--trace", s(&trace)]);
        let mut expected = Vec::new();
        leaves("", &doc["configs"][0], &mut expected);
        assert!(expected.len() > 100, "every counter");
        for (path, value) in &expected {
            let Some(i) = header.iter().position(|h| h == path) else { panic!("no column {path}") };
            assert_eq!(&row[i], value, "{name} over {}: {path}", cell("trace"));
        }
        // No column the run does not report (but trace, name, status and the parameters).
        let extra: Vec<&String> = header[7..].iter().filter(|h| !expected.iter().any(|(p, _)| p == *h)).collect();
        assert!(extra.is_empty(), "{extra:?}");
    }
    assert_eq!(combos.len(), 16, "every (trace, point) once");
}

#[test]
fn a_rerun_computes_only_the_missing_points() {
    let (dir, file) = setup(SWEEP);
    let out = dir.path().join("out");
    ok(run(&["sweep", s(&file), "--out", s(&out)]));
    let table = std::fs::read(out.join("results.csv")).unwrap();
    let again = ok(run(&["sweep", s(&file), "--out", s(&out)]));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains(": 0 simulated in") && err.contains("16 already done"), "{err}");
    let mut gone = 0;
    for e in std::fs::read_dir(out.join("points")).unwrap().step_by(3) {
        std::fs::remove_file(e.unwrap().path()).unwrap();
        gone += 1;
    }
    let o = ok(run(&["sweep", s(&file), "--out", s(&out)]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("{gone} simulated")) && err.contains(&format!("{} already done", 16 - gone)),
        "{err}"
    );
    assert_eq!(std::fs::read(out.join("results.csv")).unwrap(), table, "the same table");
    // A changed design is a new point; the others stay done.
    std::fs::write(&file, SWEEP.replace("[16, 64]", "[16, 64, 32]")).unwrap();
    let o = ok(run(&["sweep", s(&file), "--out", s(&out)]));
    assert!(String::from_utf8_lossy(&o.stderr).contains("8 simulated in"), "{}", describe(&o));
}

#[test]
fn a_killed_sweep_loses_no_finished_point() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("big.xtr");
    ok(run(&["gen", "-o", s(&trace), "--refs", "300000", "--footprint", "256M", "--pattern", "uniform"]));
    let sweep =
        "base = \"x86-64\"\ntraces = [\"big.xtr\"]\n[vary]\n\"tlb.1.entries\" = [4, 8, 16, 32, 64, 128, 256, 512]\n";
    let file = dir.path().join("s.toml");
    std::fs::write(&file, sweep).unwrap();
    let (killed, whole) = (dir.path().join("killed"), dir.path().join("whole"));
    let mut child = xlat(&["sweep", s(&file), "--out", s(&killed), "--jobs", "1", "--group", "1"]).spawn().unwrap();
    let start = Instant::now();
    while point_files(&killed) == 0 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    assert!(!status.success(), "killed before it finished (make the trace bigger if not)");
    let done = point_files(&killed);
    assert!((1..8).contains(&done), "{done} points finished before the kill");
    let o = ok(run(&["sweep", s(&file), "--out", s(&killed)]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(&format!("{} simulated", 8 - done)) && err.contains(&format!("{done} already done")), "{err}");
    ok(run(&["sweep", s(&file), "--out", s(&whole), "-q"]));
    assert_eq!(
        std::fs::read_to_string(killed.join("results.csv")).unwrap(),
        std::fs::read_to_string(whole.join("results.csv")).unwrap(),
        "the resumed sweep's table is the uninterrupted one's"
    );
}

/// Runs a sweep that must fail: exit status 2 and one line naming what is wrong.
fn fails(sweep: &str, expect: &[&str]) {
    let (dir, file) = setup(sweep);
    let o = run(&["sweep", s(&file), "--out", s(&dir.path().join("out"))]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    assert_eq!(err.lines().count(), 1, "one line: {err}");
    assert!(err.starts_with("xlat: error: "), "{err}");
    for e in expect {
        assert!(err.contains(e), "{e:?} in {err}");
    }
}

#[test]
fn bad_sweeps_are_one_line_errors() {
    let base = "base = \"x86-64\"\ntraces = [\"demo.xtr\"]\n";
    fails(&format!("{base}[vary]\n\"tlb.0.entriez\" = [1, 2]\n"), &["sweep.toml", "unknown parameter 'tlb.0.entriez'"]);
    fails(&format!("{base}[vary]\n\"tlb.7.entries\" = [8]\n"), &["cannot set 'tlb.7.entries'", "has 3 entries"]);
    fails(&format!("{base}[vary]\n\"tlb.0.entries\" = [0]\n"), &["'tlb.0.entries' = 0"]);
    fails(
        &format!("{base}[vary]\n\"tlb.0.entries\" = []\n"),
        &["vary.\"tlb.0.entries\": expected a list of at least one value"],
    );
    fails(
        &format!("{base}[[zip]]\n\"tlb.0.entries\" = [8, 16]\n\"tlb.0.ways\" = [8]\n"),
        &["zip group 1", "same length"],
    );
    fails(
        &format!("{base}[vary]\n\"tlb.0.entries\" = [8]\n[[zip]]\n\"tlb.0.entries\" = [8]\n"),
        &["'tlb.0.entries' is varied twice"],
    );
    fails(&format!("{base}vary_typo = 1\n"), &["sweep.toml: line 3", "unknown field `vary_typo`"]);
    fails("base = \"x86\"\ntraces = [\"demo.xtr\"]\n", &["base", "unknown preset 'x86'"]);
    fails("base = \"x86-64\"\ntraces = [\"nope.xtr\"]\n", &["trace 'nope.xtr'", "No such file"]);
    fails("base = \"x86-64\"\ntraces = [\"workload:nope\"]\n", &["nope"]);
}

#[test]
fn ray_without_the_python_package_is_a_one_line_error() {
    let (dir, file) = setup("base = \"x86-64\"\ntraces = [\"demo.xtr\"]\n");
    let o = xlat(&["sweep", s(&file), "--out", s(&dir.path().join("out")), "--ray", "auto"])
        .env("XLAT_PYTHON", dir.path().join("no-python"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--ray runs the sweep through the xlat Python package") && err.contains("no-python"), "{err}");
}

/// `[vary]` lists of `n` values over `keys`, the first value of the first key invalid
/// (`tlb.0.entries` = 0) if `bad`.
fn vary(keys: &[&str], n: usize, bad: bool) -> String {
    let mut text = String::from("base = \"x86-64\"\ntraces = [\"demo.xtr\"]\n[vary]\n");
    for (k, key) in keys.iter().enumerate() {
        let first = usize::from(!(bad && k == 0));
        let values: Vec<String> = (0..n).map(|i| ((first + i) * [8, 4, 4096, 4096, 64][k % 5]).to_string()).collect();
        text.push_str(&format!("\"{key}\" = [{}]\n", values.join(", ")));
    }
    text
}

/// A sweep of 10^8 points once made every point before checking the first (5.9 GB, then an
/// abort): now refused from its count alone, at once, under a 6 GiB memory limit; a product
/// past 2^64 too. Under the bound, an invalid first point still stops the sweep at once.
#[test]
fn a_sweep_above_the_row_bound_is_refused_before_any_point_is_made() {
    let keys = ["tlb.0.entries", "tlb.1.entries", "cache.0.size", "cache.1.size", "cache.2.size"];
    let cases: Vec<(String, Vec<&str>)> = vec![
        (vary(&keys[..4], 100, true), vec!["100 x 100 x 100 x 100", "100000000 points over 1 trace", "100000"]),
        (vary(&keys[..4], 30, true), vec!["810000 points", "at most 100000"]),
        (vary(&keys, 10_000, false), vec!["over 2^64 points", "100000"]),
        (
            vary(&keys[..2], 300, false).replace("[\"demo.xtr\"]", "[\"demo.xtr\", \"sort-400.lackey.zst\"]"),
            vec!["90000 points over 2 traces make 180000 rows"],
        ),
    ];
    for (text, want) in cases {
        let (dir, file) = setup(&text);
        let out = dir.path().join("out");
        let (o, took) = run_bounded(&["sweep", s(&file), "--out", s(&out)]);
        let err = expect_error(&o, want[0]);
        assert_mentions(&err, &want);
        assert!(took < Duration::from_secs(10), "refused after {took:?}");
        assert!(!out.exists());
    }
    // 27000 points, the first invalid: its one-line error, at once.
    let (dir, file) = setup(&vary(&keys[..3], 30, true));
    let (o, took) = run_bounded(&["sweep", s(&file), "--out", s(&dir.path().join("out"))]);
    let err = expect_error(&o, "invalid first point");
    assert_mentions(&err, &["'tlb.0.entries' = 0", "tlb[0].entries"]);
    assert!(took < Duration::from_secs(10), "the invalid first point was found after {took:?}");
}

/// Every point's name was compared with every earlier one's: 16000 points took about 30 s
/// before the sweep could start (now under 1 s). Checked here up to the missing trace that ends it.
#[test]
fn many_points_are_checked_in_linear_time() {
    let more: Vec<String> = (32..52).map(|k| (k * 4096).to_string()).collect();
    let text = vary(&["tlb.0.entries", "tlb.1.entries", "cache.0.size"], 20, false)
        .replace("\"cache.0.size\" = [", &format!("\"cache.0.size\" = [{}, ", more.join(", ")));
    let text = text.replace("[\"demo.xtr\"]", "[\"missing.xtr\"]");
    let (dir, file) = setup(&text);
    let (o, took) = run_bounded(&["sweep", s(&file), "--out", s(&dir.path().join("out"))]);
    let err = expect_error(&o, "missing trace after every point");
    assert_mentions(&err, &["trace 'missing.xtr'"]);
    assert!(took < Duration::from_secs(8), "16000 points checked in {took:?}");
}
