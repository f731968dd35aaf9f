//! `xlat run`: configs, presets, trace formats, stdin, JSON/CSV reports, --max-refs.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;

/// A design like MINIMAL with another name, TLB shape, policy and page-table kind.
fn design(name: &str, entries: u32, ways: u32, policy: &str, kind: &str) -> String {
    MINIMAL
        .replace("name = \"fa64\"", &format!("name = \"{name}\""))
        .replace("entries = 64", &format!("entries = {entries}"))
        .replace("ways = 64 ", &format!("ways = {ways} "))
        .replace("policy = \"lru\"", &format!("policy = \"{policy}\""))
        .replace("kind = \"radix\"", &format!("kind = \"{kind}\""))
}

#[test]
fn minimal_config_on_the_lackey_fixture_is_consistent() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let json = dir.path().join("out.json");
    let out = ok(run(&["run", "--config", s(&cfg), "--trace", s(&lackey_fixture()), "--json", s(&json)]));
    // Without `--json -` the table goes to stdout as well.
    assert!(stdout(&out).contains("fa64"), "the table names the design: {}", describe(&out));
    let v = read_json(&json);
    check_report(&v);

    let [i, l, st_, m] = count_lackey(lackey_text());
    assert!(i > 500_000, "the fixture is a real trace");
    assert_eq!(u(&v, "/trace/references"), i + l + st_ + m, "references == lackey reference lines");
    assert_eq!(u(&v, "/trace/by_kind/ifetch"), i);
    assert_eq!(u(&v, "/trace/by_kind/load"), l);
    assert_eq!(u(&v, "/trace/by_kind/store"), st_);
    assert_eq!(u(&v, "/trace/by_kind/modify"), m);
    assert_eq!(v["trace"]["stopped_at_max_refs"], false);
    assert_eq!(st(&v, "/trace/format"), "lackey");
    assert!(u(&v, "/trace/lookups") >= u(&v, "/trace/references"));

    let configs = v["configs"].as_array().unwrap();
    assert_eq!(configs.len(), 1);
    let c = &configs[0];
    assert_eq!(st(c, "/name"), "fa64");
    assert_eq!(u(c, "/page_size"), 4096);
    let tlb = c["tlb"].as_array().unwrap();
    assert_eq!(tlb.len(), 1);
    let t = &tlb[0];
    assert_eq!(st(t, "/name"), "L1");
    assert_eq!((u(t, "/entries"), u(t, "/ways"), u(t, "/sets")), (64, 64, 1));
    assert_eq!(st(t, "/policy"), "lru");
    assert_eq!(u(t, "/accesses"), u(&v, "/trace/lookups"));
    assert_eq!(u(t, "/hits") + u(t, "/misses"), u(t, "/accesses"));
    assert!(u(t, "/misses") > 0 && u(t, "/hits") > u(t, "/misses"));
    // One level: every miss walks the page table.
    assert_eq!(u(c, "/walks/count"), u(t, "/misses"));
    assert!(u(c, "/page_faults") > 0);
    assert!(u(c, "/walks/memory_refs") >= u(c, "/walks/count"));
    assert!(u(c, "/walks/cache_lines") > 0);
    assert_eq!(st(c, "/page_table/kind"), "radix");
    let bytes = u(c, "/page_table/bytes");
    assert!(bytes > 0 && bytes % 4096 == 0, "radix nodes are 4 KB each: {bytes}");
    // No hit latency by default: the cycles are the walks' references at memory_cycles 100.
    assert_eq!(u(c, "/cycles/tlb"), 0);
    assert_eq!(u(c, "/cycles/total"), 100 * u(c, "/walks/memory_refs"));
}

#[test]
fn lackey_fixture_demo_xtr_and_raw_xtr_give_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let raw = write(dir.path(), "raw.xtr", raw_demo_xtr());
    let designs = ["--config", s(&cfg), "-p", "x86-64", "-p", "itanium2", "-p", "ultrasparc", "-p", "pa-8000"];
    let with = |trace: &str| {
        let mut a = vec!["run", "--trace", trace];
        a.extend(designs);
        run_json(&a)
    };
    let lackey = with(s(&lackey_fixture()));
    let xtr = with(s(&demo_xtr()));
    let raw = with(s(&raw));
    check_report(&lackey);
    assert_eq!(st(&lackey, "/trace/format"), "lackey");
    assert_eq!(st(&xtr, "/trace/format"), "xtr");
    assert_eq!(st(&raw, "/trace/format"), "xtr");
    assert_eq!(lackey["configs"].as_array().unwrap().len(), 5);
    assert_eq!(counters(&lackey), counters(&xtr), "lackey fixture vs data/demo.xtr");
    assert_eq!(counters(&xtr), counters(&raw), "compressed vs raw xtr");
}

#[test]
fn stdin_gives_the_same_results_as_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let file = run_json(&["run", "-c", s(&cfg), "-p", "x86-64", "-t", s(&lackey_fixture())]);
    let zst = std::fs::read(lackey_fixture()).unwrap();
    let from_zst = run_json_stdin(&["run", "-c", s(&cfg), "-p", "x86-64", "-t", "-"], &zst);
    assert_eq!(st(&from_zst, "/trace/path"), "-");
    assert_eq!(st(&from_zst, "/trace/format"), "lackey");
    assert_eq!(counters(&from_zst), counters(&file), "compressed lackey on stdin");
    let xtr = std::fs::read(demo_xtr()).unwrap();
    let from_xtr = run_json_stdin(&["run", "-c", s(&cfg), "-p", "x86-64", "--trace", "-"], &xtr);
    assert_eq!(st(&from_xtr, "/trace/format"), "xtr");
    assert_eq!(counters(&from_xtr), counters(&file), "xtr on stdin");
    let text = run_json_stdin(&["run", "-c", s(&cfg), "-p", "x86-64", "-t", "-", "--format", "lackey"], lackey_text());
    assert_eq!(counters(&text), counters(&file), "plain lackey text on stdin, format forced");
}

#[test]
fn forcing_the_right_format_gives_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let base = ["run", "-c", s(&cfg), "--max-refs", "300000"];
    let with = |trace: &std::path::Path, format: Option<&str>| {
        let mut a = base.to_vec();
        a.extend(["-t", s(trace)]);
        if let Some(f) = format {
            a.extend(["--format", f]);
        }
        run_json(&a)
    };
    let auto = with(&lackey_fixture(), None);
    assert_eq!(counters(&with(&lackey_fixture(), Some("lackey"))), counters(&auto), "--format lackey");
    assert_eq!(counters(&with(&lackey_fixture(), Some("auto"))), counters(&auto), "--format auto");
    assert_eq!(counters(&with(&demo_xtr(), Some("xtr"))), counters(&auto), "--format xtr");
    // A lackey trace under a name that says nothing: recognised from its content.
    let plain = write(dir.path(), "trace.log", lackey_text());
    let v = with(&plain, None);
    assert_eq!(st(&v, "/trace/format"), "lackey");
    assert_eq!(counters(&v), counters(&auto), "content detection");
}

#[test]
fn many_designs_in_one_pass_match_separate_runs() {
    let dir = tempfile::tempdir().unwrap();
    let files = [
        write(dir.path(), "fa64.toml", MINIMAL),
        write(dir.path(), "fifo.toml", design("fa32-fifo-hashed", 32, 32, "fifo", "hashed")),
        write(dir.path(), "sa.toml", design("sa64x4-clustered", 64, 4, "lru", "clustered")),
        write(dir.path(), "linear.toml", design("sa128x8-nru-linear", 128, 8, "nru", "linear")),
    ];
    let presets = ["x86-64", "itanium2", "pa-8000", "ultrasparc", "x86-64-5level"];
    let trace = demo_xtr();
    let mut all = vec!["run", "-t", s(&trace)];
    for f in &files {
        all.extend(["--config", s(f)]);
    }
    for p in presets {
        all.extend(["--preset", p]);
    }
    let together = run_json(&all);
    check_report(&together);
    let names: Vec<&str> = together["configs"].as_array().unwrap().iter().map(|c| st(c, "/name")).collect();
    assert_eq!(names.len(), files.len() + presets.len(), "one entry per design: {names:?}");

    let mut alone: BTreeMap<String, Value> = BTreeMap::new();
    for f in &files {
        let v = run_json(&["run", "-c", s(f), "-t", s(&trace)]);
        assert_eq!(v["trace"]["references"], together["trace"]["references"]);
        let c = v["configs"][0].clone();
        alone.insert(st(&c, "/name").to_string(), c);
    }
    for p in presets {
        let v = run_json(&["run", "-p", p, "-t", s(&trace)]);
        assert_eq!(v["trace"]["references"], together["trace"]["references"]);
        alone.insert(p.to_string(), v["configs"][0].clone());
    }
    for (name, c) in &alone {
        assert_eq!(config(&together, name), c, "design {name}: one pass with {} designs vs alone", names.len());
    }
}

#[test]
fn every_policy_and_page_table_kind_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut files = Vec::new();
    let mut expect = Vec::new();
    for policy in ["lru", "fifo", "random", "nru", "plru"] {
        for kind in ["radix", "linear", "hashed", "clustered"] {
            let name = format!("{policy}-{kind}");
            files.push(write(dir.path(), &format!("{name}.toml"), design(&name, 64, 8, policy, kind)));
            expect.push((name, policy, kind, 64, 8));
        }
    }
    // Entries need not be a power of two; `ways` defaults to fully associative.
    files.push(write(dir.path(), "odd.toml", design("odd48x3", 48, 3, "lru", "radix")));
    expect.push(("odd48x3".into(), "lru", "radix", 48, 3));
    let no_ways = design("fa40", 40, 40, "fifo", "hashed").replace("ways = 40 ", "# no ways ");
    files.push(write(dir.path(), "fa40.toml", no_ways));
    expect.push(("fa40".into(), "fifo", "hashed", 40, 40));

    let trace = demo_xtr();
    let mut args = vec!["run", "-t", s(&trace), "--max-refs", "100000"];
    for f in &files {
        args.extend(["-c", s(f)]);
    }
    let v = run_json(&args);
    check_report(&v);
    assert_eq!(v["configs"].as_array().unwrap().len(), expect.len());
    for (name, policy, kind, entries, ways) in expect {
        let c = config(&v, &name);
        let t = &c["tlb"][0];
        assert_eq!(st(t, "/policy"), policy, "{name}");
        assert_eq!(st(c, "/page_table/kind"), kind, "{name}");
        assert_eq!((u(t, "/entries"), u(t, "/ways"), u(t, "/sets")), (entries, ways, entries / ways), "{name}");
        assert_eq!(u(c, "/walks/count"), u(t, "/misses"), "{name}: one level, every miss walks");
        assert!(u(t, "/misses") > 0, "{name}");
        assert!(u(c, "/page_table/bytes") > 0, "{name}");
    }
}

const CSV_HEADER: &str =
    "config,structure,level,serves,entries,ways,policy,accesses,hits,misses,miss_ratio,page_faults,\
walks,walk_memory_refs,walk_cache_lines,nested_misses,page_table,page_table_bytes,page_table_bytes_end,cycles_total,\
references,lookups,status,error";

/// The four columns that follow when any design in the run has caches.
const CSV_TIMED: &str = ",unit,writebacks,time_cycles,translation_share";

/// Checks a CSV report against the JSON report of the same run: one row per TLB structure and,
/// for a design with caches, one row per cache level after its TLB rows.
fn check_csv_against_json(csv: &str, v: &Value) {
    let configs = v["configs"].as_array().unwrap();
    let timed = configs.iter().any(|c| c.get("caches").is_some());
    let full_header = if timed { format!("{CSV_HEADER}{CSV_TIMED}") } else { CSV_HEADER.to_string() };
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some(full_header.as_str()), "CSV header");
    let header: Vec<&str> = full_header.split(',').collect();
    let rows: Vec<BTreeMap<&str, &str>> = lines
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            assert_eq!(fields.len(), header.len(), "row {l:?}");
            header.iter().copied().zip(fields).collect()
        })
        .collect();
    let count = |c: &Value, key: &str| c.get(key).and_then(Value::as_array).map_or(0, Vec::len);
    let structures: usize = configs.iter().map(|c| count(c, "tlb") + count(c, "caches")).sum();
    assert_eq!(rows.len(), structures, "one row per TLB structure and cache level");
    let mut i = 0;
    for c in configs {
        let caches = c.get("caches").and_then(Value::as_array).cloned().unwrap_or_default();
        let units = c["tlb"].as_array().unwrap().iter().map(|t| ("tlb", t)).chain(caches.iter().map(|l| ("cache", l)));
        for (unit, t) in units {
            let r = &rows[i];
            i += 1;
            let what = format!("{} {unit} {}", st(c, "/name"), st(t, "/name"));
            assert_eq!(r["config"], st(c, "/name"));
            assert_eq!(r["structure"], st(t, "/name"));
            assert_eq!(r["serves"], st(t, "/serves"), "{what}");
            assert_eq!(r["policy"], st(t, "/policy"), "{what}");
            assert_eq!(r["page_table"], st(c, "/page_table/kind"));
            let entries = if unit == "tlb" { u(t, "/entries") } else { u(t, "/sets") * u(t, "/ways") };
            assert_eq!(r["entries"], entries.to_string(), "entries of {what}");
            for (col, ptr) in [("level", "/level"), ("ways", "/ways")].into_iter().chain([
                ("accesses", "/accesses"),
                ("hits", "/hits"),
                ("misses", "/misses"),
            ]) {
                assert_eq!(r[col], u(t, ptr).to_string(), "{col} of {what}");
            }
            for (col, ptr) in [
                ("page_faults", "/page_faults"),
                ("walks", "/walks/count"),
                ("walk_memory_refs", "/walks/memory_refs"),
                ("walk_cache_lines", "/walks/cache_lines"),
                ("nested_misses", "/walks/nested_misses"),
                ("page_table_bytes", "/page_table/bytes"),
                ("page_table_bytes_end", "/page_table/bytes_end"),
                ("cycles_total", "/cycles/total"),
            ] {
                assert_eq!(r[col], u(c, ptr).to_string(), "{col} of {}", st(c, "/name"));
            }
            assert_eq!(r["references"], u(v, "/trace/references").to_string());
            // The design's own lookups (at its page size), not trace.lookups.
            assert_eq!(r["lookups"], u(c, "/lookups").to_string());
            assert_eq!((r["status"], r["error"]), ("ok", ""));
            if timed {
                assert_eq!(r["unit"], unit, "{what}");
                let writebacks = if unit == "cache" { u(t, "/writebacks").to_string() } else { String::new() };
                assert_eq!(r["writebacks"], writebacks, "{what}");
                match c.get("time") {
                    Some(_) => {
                        assert_eq!(r["time_cycles"], u(c, "/time/cycles").to_string(), "{what}");
                        let share: f64 = r["translation_share"].parse().unwrap();
                        let json = c["time"]["translation_share"].as_f64().unwrap();
                        assert!((share - json).abs() < 1e-6, "{what}: {share} vs {json}");
                    }
                    None => assert_eq!((r["time_cycles"], r["translation_share"]), ("", ""), "{what}"),
                }
            }
        }
    }
}

#[test]
fn csv_has_a_header_and_one_row_per_structure() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let (csv, json) = (dir.path().join("out.csv"), dir.path().join("out.json"));
    let trace = demo_xtr();
    let args = ["run", "-c", s(&cfg), "-p", "x86-64", "-p", "itanium2", "-t", s(&trace), "--max-refs", "50000", "-q"];
    let mut a = args.to_vec();
    a.extend(["--csv", s(&csv), "--json", s(&json)]);
    let out = ok(run(&a));
    assert!(out.stdout.is_empty(), "-q prints no table");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(
        text.lines().count(),
        1 + 1 + (3 + 4) + (4 + 4),
        "header + fa64 (1 TLB) + x86-64 (3 TLBs, 4 caches) + itanium2 (4 TLBs, 4 caches):\n{text}"
    );
    assert!(
        text.lines().any(|l| l.starts_with("fa64,") && l.ends_with(",tlb,,,")),
        "untimed rows leave time empty:\n{text}"
    );
    check_csv_against_json(&text, &read_json(&json));

    // `--csv -` writes the same CSV on stdout and nothing else.
    let mut a = args.to_vec();
    a.extend(["--csv", "-"]);
    assert_eq!(stdout(&ok(run(&a))), text);

    // A design with a reserved partition: it is a structure of its own, with its own row.
    let small = write(dir.path(), "small.lackey", lackey_32bit(20_000));
    let out = ok(run(&["run", "-p", "mips-r3000", "-t", s(&small), "--csv", "-", "--json", s(&json)]));
    let text = stdout(&out);
    let v = read_json(&json);
    check_report(&v);
    assert_eq!(text.lines().count(), 3, "{text}");
    assert!(text.lines().any(|l| l.starts_with("mips-r3000,TLB.reserved,")), "{text}");
    check_csv_against_json(&text, &v);
}

#[test]
fn max_refs_limits_the_references() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let limited = |trace: &std::path::Path, n: &str| run_json(&["run", "-c", s(&cfg), "-t", s(trace), "--max-refs", n]);

    let a = limited(&lackey_fixture(), "1000");
    check_report(&a);
    assert_eq!(u(&a, "/trace/references"), 1000);
    assert_eq!(a["trace"]["stopped_at_max_refs"], true);
    let b = limited(&demo_xtr(), "1000");
    assert_eq!(counters(&a), counters(&b), "the same first 1000 references in both formats");

    // The same counters as a trace holding exactly those 1000 references.
    let mut head = Vec::new();
    let mut n = 0;
    for line in lackey_text().split(|&b| b == b'\n') {
        if n == 1000 {
            break;
        }
        n += is_ref_line(line) as usize;
        head.extend_from_slice(line);
        head.push(b'\n');
    }
    let [i, l, st_, m] = count_lackey(&head);
    assert_eq!(u(&a, "/trace/by_kind/ifetch"), i);
    assert_eq!(u(&a, "/trace/by_kind/load"), l);
    assert_eq!(u(&a, "/trace/by_kind/store"), st_);
    assert_eq!(u(&a, "/trace/by_kind/modify"), m);
    let head = write(dir.path(), "head.lackey", head);
    let whole = run_json(&["run", "-c", s(&cfg), "-t", s(&head)]);
    assert_eq!(whole["trace"]["stopped_at_max_refs"], false);
    assert_eq!(whole["configs"], a["configs"]);

    // A limit beyond the end of the trace changes nothing.
    let all = limited(&demo_xtr(), "100000000");
    assert_eq!(all["trace"]["stopped_at_max_refs"], false);
    assert_eq!(u(&all, "/trace/references"), count_lackey(lackey_text()).iter().sum::<u64>());
}

#[test]
fn outputs_go_where_they_are_asked_to() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(dir.path(), "fa64.toml", MINIMAL);
    let trace = demo_xtr();
    let base = ["run", "-c", s(&cfg), "-p", "x86-64", "-t", s(&trace), "--max-refs", "20000"];

    // Default: a table naming every design on stdout, a speed line on stderr.
    let out = ok(run(&base));
    let table = stdout(&out);
    assert!(table.contains("fa64") && table.contains("x86-64"), "{table}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("simulated 2 designs"), "{}", describe(&out));

    // `--json -`: only JSON on stdout.
    let mut a = base.to_vec();
    a.extend(["--json", "-"]);
    let v = parse_json(&ok(run(&a)).stdout);
    check_report(&v);
    assert_eq!(v["configs"].as_array().unwrap().len(), 2);

    // Files and -q: nothing on stdout, both files complete.
    let (json, csv) = (dir.path().join("r.json"), dir.path().join("r.csv"));
    let mut a = base.to_vec();
    a.extend(["-q", "--json", s(&json), "--csv", s(&csv)]);
    let out = ok(run(&a));
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    assert_eq!(counters(&read_json(&json)), counters(&v));
    check_csv_against_json(&std::fs::read_to_string(&csv).unwrap(), &v);
}

/// A program that forks (a shell's command substitution), traced with QEMU: its processes exit
/// before the trace ends, and the page table is reported at its peak, not as the empty table the
/// exits leave behind.
#[test]
fn traced_multi_process_program_reports_its_page_table_at_its_peak() {
    let dir = tempfile::tempdir().unwrap();
    let xtr = dir.path().join("sh.xtr");
    ok(run(&["trace", "-o", s(&xtr), "--", "/bin/sh", "-c", "x=$(echo a); echo $x > /dev/null"]));
    let info = parse_json(&ok(run(&["info", s(&xtr), "--json", "-"])).stdout);
    assert!(u(&info, "/processes") >= 2, "the shell forks: {info}");
    let v = run_json(&["run", "-p", "x86-64", "-p", "talluri95", "-t", s(&xtr)]);
    check_report(&v);
    for name in ["x86-64", "talluri95"] {
        let pt = &config(&v, name)["page_table"];
        assert!(u(pt, "/bytes") > 0, "{name}: peak page-table bytes: {pt}");
        assert_eq!(u(pt, "/bytes_end"), 0, "{name}: every process exited: {pt}");
        assert!(u(pt, "/objects") > 0 && u(pt, "/objects_end") == 0, "{name}: {pt}");
    }
    let table = stdout(&ok(run(&["run", "-p", "x86-64", "-t", s(&xtr)])));
    let peak = u(&config(&v, "x86-64")["page_table"], "/bytes");
    assert!(table.lines().any(|l| l.starts_with("  bytes at peak") && l.ends_with(&format!(" {peak}"))), "{table}");
    assert!(table.lines().any(|l| l.starts_with("  bytes at end") && l.ends_with(" 0")), "{table}");
}

/// A design that cannot simulate the trace (a 32-bit machine, 64-bit addresses) fails alone: the
/// others are reported exactly as when run without it, the failed one is marked failed with its
/// reason in the table, JSON and CSV, and the command exits with status 2.
#[test]
fn one_failing_design_does_not_abort_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv) = (dir.path().join("o.json"), dir.path().join("o.csv"));
    let trace = demo_xtr();
    // A 32-bit machine without a layout that packs 64-bit traces (mips-r3000 has one).
    let narrow = write(
        dir.path(),
        "narrow.toml",
        MINIMAL
            .replace("name = \"fa64\"", "name = \"narrow32\"")
            .replace("kind = \"radix\"", "kind = \"radix\"\nva_bits = 32"),
    );
    let alone = run_json(&["run", "-p", "x86-64", "-p", "talluri95", "-t", s(&trace)]);
    let out = run(&[
        "run",
        "-p",
        "x86-64",
        "-c",
        s(&narrow),
        "-p",
        "talluri95",
        "-t",
        s(&trace),
        "--json",
        s(&json),
        "--csv",
        s(&csv),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap();
    assert!(last.starts_with("xlat: error: 1 of 3 designs failed"), "{err}");
    assert_mentions(last, &["narrow32", "demo.xtr", "reference 3", "page_table.va_bits", "32-bit"]);
    let table = stdout(&out);
    assert!(table.lines().any(|l| l.starts_with("status") && l.contains("FAILED")), "{table}");
    assert!(table.lines().any(|l| l.starts_with("FAILED narrow32:") && l.contains("reference 3")), "{table}");

    let v = read_json(&json);
    assert_eq!(v["complete"], false);
    assert_eq!(u(&v, "/failed_designs"), 1);
    let failed = config(&v, "narrow32");
    assert_eq!(st(failed, "/status"), "failed");
    assert_eq!(u(failed, "/failed_at/reference"), 3);
    assert!(failed.get("tlb").is_none(), "a failed design reports no counters: {failed}");
    for name in ["x86-64", "talluri95"] {
        assert_eq!(st(config(&v, name), "/status"), "ok");
        assert_eq!(config(&v, name), config(&alone, name), "{name}: same as without the failed design");
    }
    let text = std::fs::read_to_string(&csv).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    let row = text.lines().find(|l| l.starts_with("narrow32,")).expect("a row for the failed design");
    let cells: Vec<&str> = row.splitn(header.len(), ',').collect();
    assert_eq!(cells.len(), header.len(), "{row}");
    let status = header.iter().position(|h| *h == "status").unwrap();
    assert_eq!(cells[status], "failed");
    assert!(cells[status + 1].contains("reference 3"), "{row}");
    assert!(text.lines().filter(|l| l.starts_with("x86-64,")).all(|l| l.contains(",ok,")), "{text}");
}

/// The table says how many entries a TLB has and how associative it is, in words.
#[test]
fn the_table_prints_entries_and_ways() {
    let table = stdout(&ok(run(&["run", "-p", "x86-64", "-p", "talluri95", "-t", s(&demo_xtr())])));
    let line =
        |label: &str| table.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("{table}")).to_string();
    assert!(line("tlb #1").contains("L1I 128-entry 8-way lru"), "{table}");
    assert!(line("tlb #1").contains("64-entry full lru"), "{table}");
    assert!(line("tlb #3").contains("STLB 1536-entry 12-way lru"), "{table}");
}

/// `--json FILE|-` means the same for `run`, `info` and `model`: a file, or standard output
/// instead of the text.
#[test]
fn json_takes_a_file_or_dash_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let trace = demo_xtr();
    for (args, file) in [
        (vec!["info", s(&trace)], "info.json"),
        (vec!["info", "--quick", s(&trace)], "quick.json"),
        (vec!["model", "--gen", "uniform:100", "-p", "x86-64"], "model.json"),
        (vec!["run", "-p", "x86-64", "-t", s(&trace)], "run.json"),
    ] {
        let path = dir.path().join(file);
        let mut a = args.clone();
        a.extend(["--json", s(&path)]);
        let text = stdout(&ok(run(&a)));
        assert!(!text.is_empty(), "{a:?}: the text report still goes to standard output");
        let in_file = read_json(&path);
        let mut a = args.clone();
        a.extend(["--json", "-"]);
        let on_stdout = parse_json(&ok(run(&a)).stdout);
        let strip = |mut v: Value| {
            v.as_object_mut().unwrap().remove("seconds");
            v
        };
        assert_eq!(strip(in_file), strip(on_stdout), "{a:?}");
    }
}

/// Cycles mean one thing in every column: a hand-written TLB without `latency` and a preset of
/// the same TLB (talluri95's 64-entry fully associative LRU TLB) charge no cycles for hits; a
/// design that sets `latency = 2` on it charges exactly 2 per lookup more than without, and its
/// column (only its) says so.
#[test]
fn hit_latency_is_zero_by_default_and_marked_where_charged() {
    let dir = tempfile::tempdir().unwrap();
    let plain = write(dir.path(), "fa64.toml", MINIMAL);
    let slow = MINIMAL
        .replace("name = \"fa64\"", "name = \"fa64-slow\"")
        .replace("policy = \"lru\" ", "latency = 2\npolicy = \"lru\" ");
    let slow = write(dir.path(), "slow.toml", slow);
    let json = dir.path().join("out.json");
    let t = lackey_fixture();
    let out = run(&[
        "run",
        "--config",
        s(&plain),
        "--config",
        s(&slow),
        "--preset",
        "talluri95",
        "--trace",
        s(&t),
        "--json",
        s(&json),
    ]);
    assert!(out.status.success(), "{}", describe(&out));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let lookups = v["trace"]["lookups"].as_u64().unwrap();
    assert_eq!(lookups, 739_689);
    let c = |i: usize| &v["configs"][i];
    // The same TLB: the same hits, and no cycles for them in either design.
    assert_eq!(c(0)["tlb"][0]["hits"], c(2)["tlb"][0]["hits"]);
    for i in [0, 2] {
        assert_eq!(c(i)["cycles"]["tlb"], 0, "{}", c(i)["name"]);
        assert_eq!(c(i)["cycles"]["hit_latency"], 0, "{}", c(i)["name"]);
    }
    // latency = 2: 2 cycles per lookup, all of them hit latency, nothing else changed.
    assert_eq!(c(1)["cycles"]["tlb"].as_u64(), Some(2 * lookups));
    assert_eq!(c(1)["cycles"]["hit_latency"].as_u64(), Some(2 * lookups));
    assert_eq!(c(1)["cycles"]["total"].as_u64().unwrap() - c(0)["cycles"]["total"].as_u64().unwrap(), 2 * lookups);
    let table = String::from_utf8(out.stdout).unwrap();
    let row = table.lines().find(|l| l.starts_with("  of which L1 hit latency")).expect("a hit-latency row");
    assert_eq!(row.split_whitespace().skip(5).collect::<Vec<_>>(), vec![(2 * lookups).to_string()]);
    assert!(table.lines().any(|l| l.starts_with("translation cycles ")), "{table}");
    // Without a design that charges it, the row is not there.
    let out = run(&["run", "--config", s(&plain), "--preset", "talluri95", "--trace", s(&t)]);
    assert!(!String::from_utf8(out.stdout).unwrap().contains("hit latency"));
}
