//! `xlat reproduce talluri95 --quick`: builds six small workloads of the suite (traced with QEMU,
//! snapshotted natively), runs every design of the paper over them, and writes the figures and
//! the report. The paper's claims are checked here as inequalities on the measured numbers in
//! `results.json` — computed in this test from the raw counters, not read from the report's own
//! verdicts.

mod common;

use common::*;
use serde_json::Value;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn quick_reproduction_writes_every_figure_and_its_claims_hold_on_the_measurements() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("workloads");
    let out = dir.path().join("out");
    let o = run(&["reproduce", "talluri95", "--quick", "--dir", s(&cache), "--out", s(&out)]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{stderr}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.starts_with("talluri95: 6 workloads"), "{stdout}");

    for stem in ["figure9", "figure10", "figure11a", "figure11b", "figure11c", "figure11d", "tlb-misses"] {
        for ext in ["csv", "svg", "png"] {
            let p = out.join(format!("{stem}.{ext}"));
            let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            match ext {
                "png" => assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n"),
                "svg" => assert!(String::from_utf8_lossy(&bytes).contains("<svg")),
                _ => assert!(bytes.iter().filter(|&&b| b == b'\n').count() >= 2, "{stem}.csv has rows"),
            }
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Claims") && report.contains("![Figure 9"), "{report}");

    let v: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let ws = v["results"]["workloads"].as_array().unwrap();
    assert_eq!(ws.len(), 6);
    assert!(ws.iter().any(|w| w["processes"].as_u64().unwrap() > 1), "a multiprogrammed workload is included");
    let sp_walks = |w: &Value| w["cells"][1][3]["superpage_walks"].as_u64().unwrap();
    assert!(ws.iter().any(|w| sp_walks(w) > 100), "some misses go to superpages");
    let (single, superpage, partial, complete) = (0, 1, 2, 3);
    let (linear, forward, hashed, clustered) = (0, 1, 2, 3);
    for w in ws {
        let name = w["name"].as_str().unwrap();
        // Figure 9 and 10 (sizes from the snapshot, in bytes).
        let b = &w["sizes"]["bytes"];
        let by = |k: &str| b[k].as_u64().unwrap_or_else(|| panic!("{name}: no size {k}"));
        assert!(by("clustered") < by("hashed"), "{name}: clustered smaller than hashed");
        let best = by("linear-6").min(by("forward-mapped")).min(by("hashed"));
        assert!(by("clustered") < best, "{name}: clustered smaller than the best conventional table");
        assert!(by("clustered-partial-subblock") <= by("clustered-superpage"), "{name}");
        assert!(by("clustered-superpage") <= by("clustered"), "{name}");
        assert!(by("clustered-partial-subblock") < by("clustered"), "{name}: partial-subblock PTEs shrink it");
        assert!(by("hashed-superpage") <= by("hashed"), "{name}");
        assert!(by("linear-1") <= by("linear-6"), "{name}");

        // Figure 11: cells[tlb][table], lines per miss to mapped pages, recomputed here.
        let cell = |t: usize, p: usize| &w["cells"][t][p];
        let u = |c: &Value, k: &str| c[k].as_u64().unwrap();
        let lpm = |t: usize, p: usize| {
            let base = cell(t, clustered);
            let mapped = u(base, "misses") - u(base, "page_faults");
            let c = cell(t, p);
            let lines = (u(c, "cache_lines") - u(c, "fault_lines")) as f64 / mapped as f64;
            assert!((lines - f(&c["lines_per_miss"])).abs() < 1e-9, "{name}: lines_per_miss as documented");
            lines
        };
        for t in [single, superpage, partial, complete] {
            // TLB misses do not depend on the page table (the linear design has 56 entries).
            assert_eq!(u(cell(t, forward), "misses"), u(cell(t, clustered), "misses"), "{name} tlb {t}");
            assert_eq!(u(cell(t, hashed), "misses"), u(cell(t, clustered), "misses"), "{name} tlb {t}");
            assert!(u(cell(t, linear), "misses") >= u(cell(t, clustered), "misses"), "{name}: 56 < 64 entries");
            if u(cell(t, clustered), "misses") >= u(cell(t, clustered), "page_faults") + 100 {
                // Forward-mapped: one line per level of the 7-level tree.
                assert!((lpm(t, forward) - 7.0).abs() < 0.05, "{name} tlb {t}: {}", lpm(t, forward));
                // Clustered: about one line per miss, with every TLB.
                assert!(lpm(t, clustered) <= 1.5, "{name} tlb {t}: clustered {}", lpm(t, clustered));
            }
        }
        // Hashed: a miss to a superpage PTE searches the 4 KB table first, then the 64 KB one (at
        // least two lines); clustered finds it in one node.
        let (h, c) = (cell(superpage, hashed), cell(superpage, clustered));
        assert_eq!(u(h, "superpage_walks"), u(c, "superpage_walks"), "{name}: same misses to superpages");
        if u(h, "superpage_walks") > 0 {
            let per = |x: &Value| u(x, "superpage_lines") as f64 / u(x, "superpage_walks") as f64;
            assert!(per(h) >= 2.0, "{name}: hashed lines per superpage miss {}", per(h));
            assert!(per(c) < per(h), "{name}: clustered {} hashed {}", per(c), per(h));
        }
        if u(cell(complete, clustered), "misses") >= u(cell(complete, clustered), "page_faults") + 100 {
            // Prefetch: 16 searches of the hashed table, one clustered node.
            assert!(lpm(complete, hashed) > 8.0, "{name}: hashed prefetch {}", lpm(complete, hashed));
            assert!(lpm(complete, hashed) > 4.0 * lpm(complete, clustered), "{name}");
        }
        // Superpage and subblock TLBs never miss more than the single-page-size TLB.
        let m = |t: usize| u(cell(t, clustered), "misses");
        assert!(m(superpage) <= m(single) && m(partial) <= m(single) && m(complete) <= m(single), "{name}");
        assert!(m(complete) <= u(&w["complete_subblock_no_prefetch"], "misses"), "{name}: prefetch removes misses");
        assert!(m(partial) < m(single), "{name}: partial subblocking removes misses");
    }
    let claims = v["claims"].as_array().unwrap();
    assert!(claims.len() >= 9, "{} claims", claims.len());
    for c in claims {
        assert!(report.contains(c["paper"].as_str().unwrap()), "every claim is in the report");
    }
}

#[test]
fn unknown_paper_and_missing_workload_are_one_line_errors() {
    let o = run(&["reproduce", "nopaper"]);
    assert_eq!(o.status.code(), Some(2));
    let dir = tempfile::tempdir().unwrap();
    let o = run(&["reproduce", "talluri95", "--quick", "--only", "nosuch", "--dir", s(dir.path())]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(e.contains("nosuch"), "{e}");
    let o = run(&["reproduce", "talluri95", "--quick", "--reservation-failure", "1.5", "--dir", s(dir.path())]);
    assert_eq!(o.status.code(), Some(2));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("--reservation-failure") && e.trim_end().lines().count() == 1, "{e}");
    assert!(std::fs::read_dir(dir.path()).unwrap().next().is_none(), "nothing was built");
}
