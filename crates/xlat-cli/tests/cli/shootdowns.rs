//! `xlat reproduce shootdowns`: every ratio of results.json recomputed here from the raw
//! counters it stores, the report's first table rebuilt from them, and docs/multicore.md's
//! "Study" tables compared with the committed quick run (docs/results/shootdowns/;
//! `XLAT_BLESS=1` rewrites the docs' block).

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const CORES: [u64; 5] = [1, 2, 4, 8, 16];
const POLICIES: [&str; 3] = ["linux", "ideal", "lazy"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

fn num(r: &Value, k: &str) -> u64 {
    r[k].as_u64().unwrap_or_else(|| panic!("{k} in {r}"))
}

/// Checks every run's and every shared-STLB ratio against its counters; returns the runs.
fn check_results(v: &Value) -> Vec<Value> {
    assert_eq!(v["study"], "shootdowns");
    let res = &v["results"];
    assert_eq!(res["rate_unit"], "per million lookups");
    let runs = res["runs"].as_array().unwrap().clone();
    let workloads: Vec<&str> = res["workloads"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    // 1 core once, 3 policies and a shared STLB on each of 2, 4, 8, 16 cores.
    assert_eq!(runs.len(), workloads.len() * (1 + 4 * 4));
    for r in &runs {
        let (ipis, nec, lookups) = (num(r, "ipis"), num(r, "necessary_ipis"), num(r, "lookups"));
        assert!(nec <= ipis, "{r}");
        assert!(lookups > 0, "{r}");
        let rate = ipis as f64 * 1e6 / lookups as f64;
        assert!(close(r["ipis_per_mlookup"].as_f64().unwrap(), rate), "{r}: {rate}");
        // Per second of the cores' time at the study's clock.
        let (cycles, mhz) = (num(r, "cycles"), res["clock_mhz"].as_f64().unwrap());
        assert!(cycles > 0, "{r}");
        let per_s = ipis as f64 / (cycles as f64 / (mhz * 1e6));
        assert!(close(r["ipis_per_second"].as_f64().unwrap(), per_s), "{r}: {per_s}");
        let share = if ipis == 0 { 0.0 } else { (ipis - nec) as f64 / ipis as f64 };
        assert!(close(r["unnecessary_share"].as_f64().unwrap(), share), "{r}: {share}");
        // The share of the cores' time in shootdowns.
        let sd = num(r, "shootdown_cycles");
        assert!(sd <= cycles, "{r}");
        assert!(close(r["shootdown_share"].as_f64().unwrap(), sd as f64 / cycles as f64), "{r}");
        let cores = num(r, "cores");
        if cores == 1 {
            assert_eq!(sd, 0, "one core pays no shootdown: {r}");
        }
        if cores == 1 || r["policy"] == "lazy" {
            assert_eq!(ipis, 0, "one core and lazy send no IPI: {r}");
        }
        if cores == 1 {
            assert_eq!(num(r, "initiated"), 0, "{r}");
        }
        // The same trace and limit: every design of a workload makes the same lookups.
        let first = runs.iter().find(|x| x["workload"] == r["workload"]).unwrap();
        assert_eq!(lookups, num(first, "lookups"), "{r}");
    }
    let find = |w: &str, d: &str| runs.iter().find(|r| r["workload"] == w && r["design"] == d).cloned();
    let shared = res["shared_llt"].as_array().unwrap();
    assert_eq!(shared.len(), workloads.len() * 4);
    for x in shared {
        let (w, n) = (x["workload"].as_str().unwrap(), num(x, "cores"));
        let p = num(&find(w, &format!("c{n}-linux")).unwrap(), "llt_misses");
        let s = num(&find(w, &format!("c{n}-shared")).unwrap(), "llt_misses");
        assert_eq!((num(x, "private_misses"), num(x, "shared_misses")), (p, s), "{x}");
        let e = if p == 0 { 0.0 } else { (p as f64 - s as f64) / p as f64 };
        assert!(close(x["eliminated_share"].as_f64().unwrap(), e), "{x}: {e}");
    }
    runs
}

/// The report's first table (IPIs per million lookups, unnecessary share), rebuilt from the
/// raw counters.
fn ipi_table(runs: &[Value], workloads: &[&str]) -> String {
    let mut t = String::from("| workload | policy | 1 | 2 | 4 | 8 | 16 |\n|---|---|---:|---:|---:|---:|---:|\n");
    for w in workloads {
        for p in POLICIES {
            t += &format!("| {w} | {p} |");
            for n in CORES {
                let d = if n == 1 { "c1-linux".to_string() } else { format!("c{n}-{p}") };
                let r = runs.iter().find(|r| r["workload"] == *w && r["design"] == d).unwrap();
                let (ipis, nec, lookups) = (num(r, "ipis"), num(r, "necessary_ipis"), num(r, "lookups"));
                if ipis == 0 {
                    t += " 0 |";
                } else {
                    let share = 100.0 * (ipis - nec) as f64 / ipis as f64;
                    t += &format!(" {:.1} ({share:.0}%) |", ipis as f64 * 1e6 / lookups as f64);
                }
            }
            t += "\n";
        }
    }
    t
}

/// The tables block of a report.md.
fn tables_block(report: &str) -> &str {
    let (open, close) = ("<!-- study:tables -->\n", "<!-- /study:tables -->");
    let a = report.find(open).expect("report.md has its tables block") + open.len();
    &report[a..a + report[a..].find(close).unwrap()]
}

fn check_report(dir: &Path) -> String {
    let v = read_json(&dir.join("results.json"));
    let runs = check_results(&v);
    let workloads: Vec<&str> =
        v["results"]["workloads"].as_array().unwrap().iter().map(|w| w.as_str().unwrap()).collect();
    let report = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let block = tables_block(&report).to_string();
    let table = ipi_table(&runs, &workloads);
    assert!(block.contains(&table), "the report's first table is its counters':\n{block}\nagainst\n{table}");
    block
}

#[test]
fn quick_study_ratios_recompute_from_its_counters() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, out) = (dir.path().join("workloads"), dir.path().join("out"));
    let o = run(&["reproduce", "shootdowns", "--quick", "--dir", s(&cache), "--out", s(&out)]);
    assert!(o.status.success(), "{}", describe(&o));
    let block = check_report(&out);
    let text = stdout(&o);
    assert!(text.contains(&block), "the tables are printed:\n{text}");
    assert!(text.starts_with("shootdowns: 3 workloads, 17 designs each"), "{text}");
    for f in ["ipis.svg", "unnecessary.csv", "shared-stlb.svg"] {
        assert!(out.join(f).is_file(), "{f}");
    }
    // The published figures stand beside the measured ones.
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for p in ["900 K/s", "98%", "70.8%", "7-79%"] {
        assert!(report.contains(p), "{p}");
    }
}

#[test]
fn committed_study_recomputes_and_is_the_docs_block() {
    let block = check_report(&repo().join("docs/results/shootdowns"));
    let path = repo().join("docs/multicore.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (open, close) = ("<!-- study:quick -->\n", "<!-- /study:quick -->");
    let a = doc.find(open).expect("docs/multicore.md has its study block") + open.len();
    let b = a + doc[a..].find(close).unwrap();
    if doc[a..b] == block {
        return;
    }
    if std::env::var_os("XLAT_BLESS").is_some() {
        std::fs::write(&path, format!("{}{block}{}", &doc[..a], &doc[b..])).unwrap();
        return;
    }
    panic!("docs/multicore.md's study differs from docs/results/shootdowns (XLAT_BLESS=1 rewrites it)");
}

#[test]
fn shootdowns_refuses_resume() {
    let o = run(&["reproduce", "shootdowns", "--resume"]);
    assert_eq!(o.status.code(), Some(2), "{}", describe(&o));
}
