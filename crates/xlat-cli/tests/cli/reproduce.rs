//! What each paper's `--quick` reproduction must write, checked on the outputs of the test
//! command's one `xlat reproduce all --quick` run (`reproduce_all`): its figures, the counters in
//! `results.json` against one another, and every claim's verdict recomputed from its `expect` and
//! `measured` by [`check_claims`], written here apart from `xlat::reproduce::claim`. The
//! reproductions' own one-line errors are tested here too.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Recomputes every claim's verdict of a `results.json` from its `expect`, `measured` and the
/// paper's `tolerance` (written here apart from `xlat::reproduce::claim`), checks the totals, and
/// that every verdict but `agrees` says why. Returns the totals (independent, agrees).
pub fn check_claims(v: &Value) -> (u64, u64) {
    let t = v["tolerance"].as_f64().expect("a tolerance per paper");
    let claims = v["claims"].as_array().expect("claims");
    let mut ids = std::collections::HashSet::new();
    let (mut agrees, mut differs, mut unmeasured, mut given) = (0, 0, 0, 0);
    for c in claims {
        let id = c["id"].as_str().expect("an id");
        assert!(ids.insert(id.to_string()), "claim ids are unique: {id}");
        for k in ["source", "paper"] {
            assert!(!c[k].as_str().unwrap_or("").is_empty(), "{id}: {k}");
        }
        let measured = c["measured"].as_array().expect("measured is a list");
        let e = &c["expect"];
        let holds = if measured.is_empty() {
            None
        } else if let Some(order) = e["order"].as_array() {
            let mut groups: Vec<(Value, Value)> = Vec::new();
            for m in measured {
                let g = (m["workload"].clone(), m["point"].clone());
                if !groups.contains(&g) {
                    groups.push(g);
                }
            }
            Some(groups.iter().all(|(w, p)| {
                let vals: Vec<Option<f64>> = order
                    .iter()
                    .map(|s| {
                        measured
                            .iter()
                            .find(|m| &m["workload"] == w && &m["point"] == p && &m["series"] == s)
                            .map(|m| f(&m["value"]))
                    })
                    .collect();
                vals.iter().all(|x| x.is_some()) && vals.windows(2).all(|x| x[0] < x[1])
            }))
        } else {
            let (lo, hi) = if let Some(value) = e["value"].as_f64() {
                let tol = f(&e["tol"]);
                (Some(value - tol), Some(value + tol))
            } else {
                (e["lo"].as_f64(), e["hi"].as_f64())
            };
            assert!(lo.is_some() || hi.is_some(), "{id}: an expectation with a bound");
            let lo = lo.map_or(f64::NEG_INFINITY, |l| l - t * l.abs());
            let hi = hi.map_or(f64::INFINITY, |h| h + t * h.abs());
            Some(measured.iter().all(|m| (lo..=hi).contains(&f(&m["value"]))))
        };
        let verdict = c["verdict"].as_str().unwrap();
        match verdict {
            "by-construction" => given += 1,
            "not-measured" => {
                assert!(measured.is_empty(), "{id}: not measured yet holds measurements");
                unmeasured += 1
            }
            "agrees" => {
                assert_eq!(holds, Some(true), "{id}: agrees, but the measured values do not lie in the range");
                agrees += 1
            }
            "differs" => {
                assert_eq!(holds, Some(false), "{id}: differs, but the measured values lie in the range");
                differs += 1
            }
            other => panic!("{id}: verdict {other}"),
        }
        if verdict != "agrees" {
            assert!(!c["why"].as_str().unwrap_or("").trim().is_empty(), "{id}: {verdict} says why");
        }
    }
    let totals = &v["totals"];
    let n = |k: &str| totals[k].as_u64().unwrap_or_else(|| panic!("totals.{k}"));
    assert_eq!(
        (n("independent"), n("agrees"), n("differs"), n("not_measured"), n("by_construction")),
        (agrees + differs + unmeasured, agrees, differs, unmeasured, given),
        "totals"
    );
    (agrees + differs + unmeasured, agrees)
}

/// talluri95's quick outputs in `out` (`stdout`: what `xlat reproduce` printed).
pub fn check_talluri95(out: &Path, stdout: &str) {
    assert!(stdout.lines().any(|l| l.starts_with("talluri95: 6 workloads")), "{stdout}");

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
    // Every verdict recomputed from `expect` and `measured`; every claim is independent evidence
    // (none rests on a model input), and at this size each one is measured.
    let (independent, _) = check_claims(&v);
    assert!(independent >= 12, "{independent} independent claims");
    let claims = v["claims"].as_array().unwrap();
    for c in claims {
        let id = c["id"].as_str().unwrap();
        assert!(id.starts_with("talluri95."), "{id}");
        assert_ne!(c["verdict"], "by-construction", "{id}");
        assert_ne!(c["verdict"], "not-measured", "{id}: {}", c["why"]);
        assert!(report.contains(c["paper"].as_str().unwrap()), "every claim is in the report");
    }
    // Figure 11's claims leave out the workloads with too few misses, and say so.
    let left = v["results"]["left_out"].as_object().expect("left_out");
    for (id, why) in left {
        assert!(claims.iter().any(|c| c["id"] == id.as_str()), "{id}");
        assert!(why.as_str().unwrap().starts_with("left out"), "{id}: {why}");
        assert!(report.contains(&format!("`{id}`: left out")), "{id} is named in the report");
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

/// The runs of a chapman03 or gray05 `results.json`.
fn runs(out: &std::path::Path) -> (Vec<Value>, Value) {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    (v["results"]["runs"].as_array().unwrap().clone(), v)
}

fn check_outputs(out: &std::path::Path, stems: &[&str], claims: usize) {
    for stem in stems {
        for ext in ["csv", "svg"] {
            let p = out.join(format!("{stem}.{ext}"));
            assert!(p.is_file(), "{}", p.display());
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    let (_, v) = runs(out);
    let cs = v["claims"].as_array().unwrap();
    assert_eq!(cs.len(), claims);
    for c in cs {
        assert!(report.contains(c["paper"].as_str().unwrap()), "every claim is in the report");
    }
}

/// `xlat reproduce chapman03 --quick`: extreme and ctx-ring traced at a few points, the Itanium
/// presets over them; the paper's claims as inequalities on the raw counters.
pub fn check_chapman03(out: &Path) {
    check_outputs(out, &["figure2", "figure2-random", "figure2-itlb", "table3"], 28);
    let (runs, v) = runs(out);
    // Every verdict recomputed from expect and measured; the quick plan measures all 27
    // independent claims (one more, the long VHPT's page-table entries, is by construction).
    let (independent, _) = check_claims(&v);
    assert_eq!(independent, 27);
    assert_eq!(v["totals"]["not_measured"], 0, "the quick plan covers every claim: {}", v["totals"]);
    assert_eq!(v["totals"]["by_construction"], 1);
    let random = &v["claims_random_l2d"];
    assert_eq!(random["claims"].as_array().map(Vec::len), Some(4), "Figure 2's claims with a random L2 DTLB");
    let get = |e: &str, x: u64, y: u64, d: &str| {
        runs.iter()
            .find(|r| r["experiment"] == e && u(r, "/x") == x && u(r, "/y") == y && r["design"] == d)
            .unwrap_or_else(|| panic!("no run {e} {x} {y} {d}"))
            .clone()
    };
    let cyc = |e: &str, x: u64, y: u64, d: &str| u(&get(e, x, y, d), "/cycles") as f64;
    let saved = |e: &str, p: u64, n: u64| 1.0 - cyc(e, p, n, "itanium2-lvhpt-sharing") / cyc(e, p, n, "itanium2-lvhpt");
    for (p, factor) in [(16, 2), (64, 4)] {
        // While the pages fit: the 8 processes share the data TLB's entries (at 16 pages the 8
        // private copies still almost fit the 128-entry level-2 data TLB).
        let (shared, private) = (get("fig2", p, 8, "itanium2-lvhpt-sharing"), get("fig2", p, 8, "itanium2-lvhpt"));
        assert!(u(&shared, "/l2_dtlb_misses") * factor < u(&private, "/l2_dtlb_misses"), "p={p}: {shared} {private}");
        assert!(u(&shared, "/key_misses") > 0, "key-based sharing checks keys");
    }
    // Figure 2: a large share of the runtime saved while fitting (the paper: about half; with
    // the presets' kernel time, a 9,633-cycle switch at every yield, about a quarter here, and
    // the claim differs, as the report says); less past the reach.
    // Four quick runs on a quiet machine saved 0.262-0.269 here and 0.228-0.238 with 4
    // processes below; under load the traced interleaving yields more often (more switches at
    // 9,633 cycles each) and one run fell below 0.2 with 4 processes: the bounds leave room.
    assert!(saved("fig2", 64, 8) >= 0.15, "{}", saved("fig2", 64, 8));
    assert!(saved("fig2", 512, 8) > 0.0 && saved("fig2", 512, 8) < saved("fig2", 64, 8));
    // Sharing helps with 4 processes as with 8 (how much it depends on n is the report's
    // claim; the traces' interleaving varies a little from run to run, so only this is fixed).
    assert!(saved("fig2-n", 64, 4) > 0.15 && saved("fig2-n", 64, 8) > 0.15);
    // Table 3, where xlat differs (explained in the report): with 16 processes and no working
    // set the short VHPT is faster, its page-table pages costing one TLB entry each (Linux's
    // VHPT miss handler inserts only the leaf page).
    assert!(cyc("table3", 16, 0, "itanium2-lvhpt") > cyc("table3", 16, 0, "itanium2-linux"));
    // Where xlat differs (explained in the report): the short VHPT is faster on extreme.
    assert!(cyc("fig2", 512, 8, "itanium2-lvhpt") > cyc("fig2", 512, 8, "itanium2-linux"));
    // §3.1: sequential RIDs collide in the hash, byte-swapped ones far less.
    let coll = |d: &str| runs.iter().filter(|r| r["design"] == d).map(|r| u(r, "/vhpt_collisions")).sum::<u64>();
    assert!(coll("itanium2-lvhpt-sequential") > 2 * coll("itanium2-lvhpt").max(1));
    // The ITLB variant: with sharing, the executed pages' ITLB entries are shared while they fit.
    let (shared, private) =
        (get("fig2-itlb", 64, 8, "itanium2-lvhpt-sharing"), get("fig2-itlb", 64, 8, "itanium2-lvhpt"));
    assert!(u(&shared, "/l2_itlb_misses") * 4 < u(&private, "/l2_itlb_misses"), "{shared} {private}");
    // Figure 2 with a random level-2 data TLB too.
    assert!(cyc("fig2", 64, 8, "itanium2-lvhpt-sharing-l2d-random") < cyc("fig2", 64, 8, "itanium2-lvhpt-l2d-random"));
    // Table 1: every map of vmloop's file is new translations, which the long VHPT's walker
    // misses and traps on; §4.3: vmloop forks.
    for e in ["table1-mmap", "table1-fault"] {
        let long = get(e, 32, 10, "itanium2-lvhpt");
        assert!(u(&long, "/vhpt_misses") >= 10 * 32, "each of 10 maps misses on each of 32 pages: {long}");
    }
    assert!(cyc("fork", 32, 20, "itanium2-linux") > 0.0);
    // §2.2.2: with one PKR every switch between keys is a key miss; 16 hold every key used.
    for e in ["pkrs-extreme", "pkrs-ring"] {
        let m = |k: u64| u(&get(e, k, 0, &format!("itanium2-lvhpt-sharing-pkrs{k}")), "/key_misses");
        assert!(m(1) > m(16) && m(16) == m(64), "{e}: {} {} {}", m(1), m(16), m(64));
    }
    // §2.3.3: the short VHPT's page-table pages are in the TLB, the long VHPT's never.
    for r in runs.iter().filter(|r| r["experiment"] == "table3") {
        if r["design"] == "itanium2-linux" {
            assert!(u(r, "/pt_fills") > 0 && u(r, "/pt_processes") > 0, "{r}");
            assert!(r["pt_entries_peak_mean"].as_f64().unwrap() >= 1.0, "{r}");
        } else {
            assert_eq!((u(r, "/pt_fills"), u(r, "/pt_processes")), (0, 0), "{r}");
        }
    }
}

/// `xlat reproduce gray05 --quick`: five workloads of the suite (warehouse with DBT-2's TLB
/// pressure) under the short VHPT with and without the hardware walker, the long VHPT with and
/// without TLB-entry sharing, and the two formats' walks through a cache of page-table data.
pub fn check_gray05(out: &Path) {
    check_outputs(out, &["runtime", "pte-lines"], 7);
    let (runs, v) = runs(out);
    // Every verdict recomputed; all six independent claims are measured at quick size
    // (warehouse is in the quick set).
    let (independent, _) = check_claims(&v);
    assert_eq!(independent, 6);
    assert_eq!(v["totals"]["not_measured"], 0, "{}", v["totals"]);
    let ws: Vec<String> =
        v["results"]["workloads"].as_array().unwrap().iter().map(|w| w.as_str().unwrap().to_string()).collect();
    assert_eq!(ws, ["gzip", "sort", "sqlite3", "pipeline", "warehouse"]);
    let get = |w: &str, d: &str| runs.iter().find(|r| r["workload"] == w && r["design"] == d).unwrap().clone();
    let per_refill = |d: &str| {
        let (c, n) = runs
            .iter()
            .filter(|r| r["design"] == d)
            .fold((0, 0), |(c, n), r| (c + u(r, "/refill_cycles"), n + u(r, "/walks")));
        c as f64 / n as f64
    };
    assert!(per_refill("short-hardware") < per_refill("short-software") / 2.0);
    for w in &ws {
        let c = |d: &str| u(&get(w, d), "/cycles");
        assert!(c("short-software") > c("short-hardware"), "{w}: the walker saves time");
        assert!(c("long-4x") as f64 <= 1.10 * c("short-hardware") as f64, "{w}");
        // The untimed designs count the lines their walks fetch, and no time.
        for d in ["short-pt-lines", "long-pt-lines"] {
            let r = get(w, d);
            assert_eq!(u(&r, "/cycles"), 0, "{w} {d}");
            assert!(u(&r, "/walk_line_fetches") > 0 && u(&r, "/walk_line_fetches") <= u(&r, "/walk_refs"), "{w} {d}");
        }
        // A long VHPT walk reads one entry, and a miss walks the OS table too.
        let l = get(w, "long-pt-lines");
        assert_eq!(u(&l, "/vhpt_lookups"), u(&l, "/walks"), "{w}");
        assert!(u(&l, "/walk_refs") > u(&l, "/walks"), "{w}");
    }
    // Sharing by protection key takes key misses; the private designs none.
    assert!(ws
        .iter()
        .all(|w| u(&get(w, "long-4x-sharing"), "/key_misses") > 0 && u(&get(w, "long-4x"), "/key_misses") == 0));
    // warehouse: over 30,000 TLB misses a second at 900 MHz, i.e. a miss every 30,000 cycles.
    let h = get("warehouse", "short-hardware");
    assert!(u(&h, "/walks") * 30_000 > u(&h, "/cycles"), "{h}");
    assert!(u(&h, "/walks") > 50 * u(&get("sqlite3", "short-hardware"), "/walks"));
}

pub fn check_bala94(out: &Path) {
    check_outputs(out, &["kernel-misses"], 28);
    let (runs, v) = runs(out);
    // Every verdict recomputed from its numbers; 26 independent claims (the trap model's two
    // are its own inputs), each measured on the quick inputs.
    let (independent, _) = check_claims(&v);
    assert!(independent >= 14, "{independent}");
    assert_eq!(v["totals"]["by_construction"], 2);
    assert_eq!(v["totals"]["not_measured"], 0, "every workload takes 1,000 kernel misses but the control");
    let get = |w: &str, d: &str| runs.iter().find(|r| r["workload"] == w && r["design"] == d).unwrap().clone();
    let kernel = |w: &str, d: &str| {
        let r = get(w, d);
        u(&r, "/l1k") + u(&r, "/l2") + u(&r, "/l3")
    };
    for w in ["mdb", "mdb-1", "ctx-ring", "bigmsg"] {
        let mach = get(w, "mach");
        assert!(u(&mach, "/ipc") > 0 && u(&mach, "/kernel_references") > 0, "{w}: {mach}");
        // The kernel's references depend on the trace only.
        assert_eq!(u(&mach, "/kernel_references"), u(&get(w, "ptlb+stlb"), "/kernel_references"));
        // A cascade needs an L2 or L1K miss first; the STLB cuts cascades short.
        assert!(u(&mach, "/nested") <= u(&mach, "/l2") + u(&mach, "/l1k"));
        // Compulsory L3 misses stay: a short trace may have no others (the traced interleaving
        // of the processes varies from run to run).
        assert!(u(&get(w, "stlb-dm4k"), "/nested") <= u(&mach, "/nested"), "{w}");
        assert!(u(&get(w, "stlb-dm4k"), "/stlb_hits") >= u(&get(w, "stlb-dm1k"), "/stlb_hits"));
        assert!(u(&get(w, "ptlb"), "/ptlb_useful") <= u(&get(w, "ptlb"), "/ptlb_prefetches"));
    }
    let nested = |d: &str| ["mdb", "ctx-ring"].iter().map(|w| u(&get(w, d), "/nested")).sum::<u64>();
    assert!(nested("stlb-dm4k") < nested("mach"), "the STLB cuts cascades short");
    // Prefetching on the IPC path removes kernel misses where IPC is frequent.
    for w in ["mdb", "ctx-ring"] {
        assert!(kernel(w, "ptlb") * 4 <= kernel(w, "mach") * 3, "{w}: {} vs {}", kernel(w, "ptlb"), kernel(w, "mach"));
        assert!(u(&get(w, "ptlb"), "/ptlb_useful") > 0);
    }
    // Without IPC (gzip), the PTLB does nothing; with a few messages (a shell pipeline traced
    // with its children), little.
    assert_eq!(u(&get("gzip", "mach"), "/ipc"), 0);
    assert_eq!(kernel("gzip", "ptlb"), kernel("gzip", "mach"));
    assert_eq!(u(&get("gzip", "ptlb"), "/ptlb_prefetches"), 0);
    let pipeline = get("pipeline", "mach");
    assert!(u(&pipeline, "/ipc") > 0 && u(&pipeline, "/ipc") * 10 < u(&pipeline, "/syscalls"), "{pipeline}");
    // Little: no more removed than the 25.2% of the paper's least IPC-bound program (mab).
    let (p, m) = (kernel("pipeline", "ptlb"), kernel("pipeline", "mach"));
    assert!(p * 1000 >= m * 748, "pipeline: {p} kernel misses with the PTLB against {m}");
    // §6.2: a faster clock makes each kernel miss dearer, and the STLB's paths far cheaper.
    let per = |d: &str| {
        let r = get("mdb", d);
        (u(&r, "/miss_cycles") - u(&r, "/user_cycles")) as f64 / kernel("mdb", d) as f64
    };
    assert!(per("mach-200mhz") > 3.0 * per("mach"));
    assert!(per("stlb-dm4k-200mhz") * 3.0 < per("mach-200mhz"));
    // With m measured by the caches: every kernel miss runs at least the shortest generic path
    // (161 instructions), and the STLB's paths are shorter.
    assert!(per("mach-cached-200mhz") >= 161.0, "{}", per("mach-cached-200mhz"));
    assert!(per("stlb-dm4k-cached-200mhz") < per("mach-cached-200mhz"));
}

/// `xlat reproduce swanson98 --quick`: radix, em3d, compress (which ask for superpages with
/// madvise) and sqlite3 (superpages from the modified sbrk) through the swanson98 machine with
/// and without the MTLB; the mechanism's effects as inequalities on the raw counters.
pub fn check_swanson98(out: &Path) {
    // Every claim once, judged with the overlapping core (the paper's stall-on-use machine).
    check_outputs(out, &["figure3-runtime", "figure3-tlb-share", "figure3-runtime-overlap", "figure4-em3d"], 21);
    let (runs, v) = runs(out);
    let (independent, _) = check_claims(&v);
    // 17 independent claims (4 rest on model inputs); at --quick two of them are not measured:
    // radix at 256 entries (the 256-entry TLB runs at full size) and the referenced bits' error
    // (xlat's OS never resets them).
    assert_eq!(independent, 17);
    let claims = v["claims"].as_array().unwrap();
    let verdict = |id: &str| claims.iter().find(|c| c["id"] == id).unwrap()["verdict"].clone();
    assert_eq!(verdict("swanson98.s3.4.radix-256"), "not-measured");
    assert_eq!(verdict("swanson98.s2.5.referenced-bits-approximate"), "not-measured");
    assert_eq!(verdict("swanson98.s3.3.copy-per-page"), "by-construction");
    assert_eq!(v["totals"]["not_measured"], 2);
    // The 5-20% range has both bounds, and the blocking core's values are in the report.
    let gain = claims.iter().find(|c| c["id"] == "swanson98.s6.mtlb-gain").unwrap();
    assert_eq!(gain["expect"], serde_json::json!({"lo": 0.05, "hi": 0.2}));
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Sensitivity to the core"), "{report}");
    let find = |w: &str, d: &str, core: &str| {
        runs.iter().find(|r| r["workload"] == w && r["design"] == d && r["core"] == core).unwrap().clone()
    };
    let get = |w: &str, d: &str| find(w, d, "blocking");
    // The overlapping core runs the same references through the same caches; only its data
    // stalls shrink.
    for r in runs.iter().filter(|r| r["core"] == "blocking") {
        let (w, d) = (r["workload"].as_str().unwrap(), r["design"].as_str().unwrap());
        let o = find(w, d, "overlap");
        for k in ["/instructions", "/tlb_misses", "/cache_misses", "/memory_reads", "/mtlb_misses"] {
            assert_eq!(u(r, k), u(&o, k), "{w} {d} {k}");
        }
        assert!(u(&o, "/cycles") <= u(r, "/cycles"), "{w} {d}");
    }
    for w in ["radix", "em3d", "compress", "sqlite3"] {
        for n in [64, 96, 128] {
            let (base, mtlb) = (get(w, &n.to_string()), get(w, &format!("{n}+mtlb")));
            // Without shadow superpages nothing reaches the MTLB's table.
            assert_eq!((u(&base, "/mtlb_lookups"), u(&base, "/superpage_count")), (0, 0), "{w} {n}");
            assert!(u(&mtlb, "/superpage_count") > 0 && u(&mtlb, "/mtlb_lookups") > 0, "{w} {n}: {mtlb}");
            assert!(u(&mtlb, "/mtlb_misses") <= u(&mtlb, "/mtlb_lookups"));
            // Superpages take CPU TLB misses away.
            assert!(u(&mtlb, "/tlb_misses") < u(&base, "/tlb_misses"), "{w} {n}");
            // The program's own work is the same.
            assert_eq!(u(&mtlb, "/instructions"), u(&base, "/instructions"));
        }
        // Without an MTLB a larger CPU TLB never takes more misses.
        let misses = |d: &str| u(&get(w, d), "/tlb_misses");
        assert!(misses("64") >= misses("96") && misses("96") >= misses("128"), "{w}");
    }
    // The data of radix, em3d and compress sits in superpages: their misses collapse.
    for w in ["radix", "em3d", "compress"] {
        let (base, mtlb) = (u(&get(w, "64"), "/tlb_misses"), u(&get(w, "64+mtlb"), "/tlb_misses"));
        assert!(mtlb * 5 < base, "{w}: {mtlb} vs {base}");
    }
    // em3d remaps its initialised graph (§3.3): the flush finds dirty lines; copying moves
    // every resident page at the configured cost.
    let e = get("em3d", "96+mtlb");
    assert!(u(&e, "/create_flush_cycles") > 128 * u(&e, "/pages_remapped"), "{e}");
    let c = get("em3d", "96+copy");
    assert!(u(&c, "/pages_copied") > 0 && u(&c, "/copy_cycles") == 11_400 * u(&c, "/pages_copied"), "{c}");
    assert_eq!(u(&c, "/mtlb_lookups"), 0);
    // em3d's MTLB miss rate and cache miss rate, recomputed from the counters of the judged core.
    let hit = claims.iter().find(|c| c["id"] == "swanson98.s3.5.em3d-mtlb-hit").unwrap();
    let m = find("em3d", "128+mtlb", "overlap");
    let at128 = hit["measured"].as_array().unwrap().iter().find(|x| x["point"] == "128+mtlb").unwrap();
    let want = u(&m, "/mtlb_misses") as f64 / u(&m, "/mtlb_lookups") as f64;
    assert!((at128["value"].as_f64().unwrap() - want).abs() < 1e-12);
    let b = find("em3d", "96", "overlap");
    let cache = claims.iter().find(|c| c["id"] == "swanson98.s3.5.em3d-cache-hit").unwrap();
    let want = 1.0 - u(&b, "/cache_hits") as f64 / u(&b, "/cache_accesses") as f64;
    assert!((cache["measured"][0]["value"].as_f64().unwrap() - want).abs() < 1e-12);
    assert_eq!(u(&b, "/cache_hits") + u(&b, "/cache_misses"), u(&b, "/cache_accesses"));
    // Figure 4: a larger, more associative MTLB misses less.
    assert!(u(&get("em3d", "128+mtlb-256x4"), "/mtlb_misses") <= u(&get("em3d", "128+mtlb"), "/mtlb_misses"));
}
