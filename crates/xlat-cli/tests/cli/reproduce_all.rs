//! `xlat reproduce all`: the summary of the five reproductions, recomputed here from every paper's
//! `results.json`, and the totals docs/reproduce.md shows, compared with the summaries that
//! `xlat reproduce all` wrote into docs/results/quick/ and docs/results/full/ (every verdict in
//! them recomputed; `XLAT_BLESS=1` rewrites the docs' blocks). A fresh quick run must count the
//! same claims as the committed one.

use super::reproduce::{check_bala94, check_chapman03, check_claims, check_gray05, check_swanson98, check_talluri95};
use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

const PAPERS: &[&str] = &["talluri95", "chapman03", "gray05", "bala94", "swanson98"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))).unwrap()
}

/// The summary's table of `dir/summary.md`, checked against every paper's `results.json`
/// (verdicts recomputed) and against `summary.json`.
fn check_summary(dir: &Path, quick: bool) -> String {
    let summary = json(&dir.join("summary.json"));
    assert_eq!(summary["quick"], quick);
    let mut sums = [0u64; 5];
    for paper in PAPERS {
        let v = json(&dir.join(paper).join("results.json"));
        assert_eq!(v["paper"], *paper);
        let (independent, agrees) = check_claims(&v);
        let t = &summary["papers"][*paper];
        assert_eq!(t["independent"].as_u64(), Some(independent), "{paper}");
        assert_eq!(t["agrees"].as_u64(), Some(agrees), "{paper}");
        for (i, k) in ["independent", "agrees", "differs", "not_measured", "by_construction"].iter().enumerate() {
            assert_eq!(t[*k], v["totals"][*k], "{paper}: summary {k} as in results.json");
            sums[i] += t[*k].as_u64().unwrap();
        }
    }
    for (i, k) in ["independent", "agrees", "differs", "not_measured", "by_construction"].iter().enumerate() {
        assert_eq!(summary["total"][*k].as_u64(), Some(sums[i]), "total {k}");
    }
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let table: Vec<&str> = md.lines().filter(|l| l.starts_with('|')).collect();
    assert_eq!(table.len(), PAPERS.len() + 3, "{md}");
    table.join("\n") + "\n"
}

/// Compares (or with `XLAT_BLESS` rewrites) the block of docs/reproduce.md between
/// `<!-- summary:NAME -->` and `<!-- /summary:NAME -->` with `table`.
fn check_docs_block(name: &str, table: &str) {
    let path = repo().join("docs/reproduce.md");
    let doc = std::fs::read_to_string(&path).unwrap();
    let (open, close) = (format!("<!-- summary:{name} -->\n"), format!("<!-- /summary:{name} -->"));
    let a = doc.find(&open).unwrap_or_else(|| panic!("docs/reproduce.md has no {open}")) + open.len();
    let b = a + doc[a..].find(&close).unwrap_or_else(|| panic!("docs/reproduce.md has no {close}"));
    if doc[a..b] == *table {
        return;
    }
    if std::env::var_os("XLAT_BLESS").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &doc[..a], &doc[b..])).unwrap();
        return;
    }
    panic!("docs/reproduce.md's {name} totals differ from the generated ones (XLAT_BLESS=1 rewrites them):\n{}\nagainst\n{table}", &doc[a..b]);
}

/// The test command's one run of the five quick reproductions: every paper's outputs checked
/// against its counters, every verdict recomputed, the summary and the docs' quick totals.
#[test]
fn reproduce_all_quick_runs_the_five_and_its_summary_is_what_their_claims_recompute_to() {
    let dir = tempfile::tempdir().unwrap();
    let (cache, out) = (dir.path().join("workloads"), dir.path().join("out"));
    let o = run(&["reproduce", "all", "--quick", "--dir", s(&cache), "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    check_talluri95(&out.join("talluri95"), &stdout);
    check_chapman03(&out.join("chapman03"));
    check_gray05(&out.join("gray05"));
    check_bala94(&out.join("bala94"));
    check_swanson98(&out.join("swanson98"));
    let table = check_summary(&out, true);
    assert!(stdout.contains(&table), "the summary table is printed:\n{stdout}");
    // The committed quick run counts the same claims; which of them agree may move between
    // tracings of the programs whose processes block on each other (docs/reproduce.md, Totals).
    let fresh = json(&out.join("summary.json"));
    let committed = json(&repo().join("docs/results/quick/summary.json"));
    for paper in PAPERS {
        for k in ["independent", "not_measured", "by_construction"] {
            assert_eq!(
                fresh["papers"][*paper][k], committed["papers"][*paper][k],
                "{paper}: {k} of a fresh quick run as in docs/results/quick"
            );
        }
    }

    // --resume keeps every paper already written: nothing is simulated again.
    let summary = std::fs::read_to_string(out.join("summary.json")).unwrap();
    let o = run(&["reproduce", "all", "--quick", "--resume", "--dir", s(&cache), "--out", s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let again = String::from_utf8_lossy(&o.stdout);
    assert_eq!(again.lines().filter(|l| l.contains(": kept from ")).count(), PAPERS.len(), "{again}");
    assert_eq!(std::fs::read_to_string(out.join("summary.json")).unwrap(), summary);
}

#[test]
fn committed_results_recompute_to_their_summaries_and_the_docs() {
    for (name, quick) in [("quick", true), ("full", false)] {
        let table = check_summary(&repo().join("docs/results").join(name), quick);
        check_docs_block(name, &table);
    }
}

#[test]
fn all_refuses_one_papers_options_and_resume_needs_all() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        vec!["reproduce", "all", "--quick", "--only", "gzip", "--dir", s(dir.path())],
        vec!["reproduce", "gray05", "--quick", "--resume", "--dir", s(dir.path())],
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(e.trim_end().lines().count(), 1, "{e}");
        assert!(e.contains("--only") || e.contains("--resume"), "{e}");
    }
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing was built");
}
