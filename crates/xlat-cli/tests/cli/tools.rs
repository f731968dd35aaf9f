//! `xlat info`, `xlat gen`, `xlat presets` and `xlat demo`.

use crate::common::*;
use std::path::Path;

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn info_counts_the_references_of_both_fixtures() {
    let [i, l, st_, m] = count_lackey(lackey_text());
    let mut reports = Vec::new();
    for trace in [lackey_fixture(), demo_xtr()] {
        let v = parse_json(&ok(run(&["info", s(&trace), "--json", "-"])).stdout);
        assert_eq!(u(&v, "/references"), i + l + st_ + m, "{}", trace.display());
        assert_eq!(u(&v, "/by_kind/ifetch"), i);
        assert_eq!(u(&v, "/by_kind/load"), l);
        assert_eq!(u(&v, "/by_kind/store"), st_);
        assert_eq!(u(&v, "/by_kind/modify"), m);
        assert!(u(&v, "/distinct_pages") > 0);
        assert_eq!(u(&v, "/processes"), 1);
        assert!(u(&v, "/min_addr") < u(&v, "/max_addr"));
        reports.push(v);
    }
    for k in ["/distinct_pages", "/footprint_bytes", "/bytes_accessed", "/min_addr", "/max_addr"] {
        assert_eq!(u(&reports[0], k), u(&reports[1], k), "{k}: lackey vs xtr");
    }
    assert_eq!(u(&reports[0], "/skipped"), 25, "the lackey fixture's banner lines are skipped");

    // Text output, and standard input.
    let text = stdout(&ok(run(&["info", s(&demo_xtr())])));
    let refs = format!("{}", i + l + st_ + m);
    let line = text.lines().find(|l| l.starts_with("references")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.split_whitespace().nth(1) == Some(refs.as_str()), "{line}");
    assert!(text.contains(&format!("ifetch {i}")) && text.contains(&format!("modify {m}")), "{text}");
    let piped = stdout(&ok(run_stdin(&["info", "-"], &read(&demo_xtr()))));
    assert_eq!(piped.lines().skip(1).collect::<Vec<_>>(), text.lines().skip(1).collect::<Vec<_>>());
    assert!(piped.starts_with("trace") && piped.lines().next().unwrap().ends_with(" -"), "{piped}");
}

#[test]
fn gen_is_deterministic_for_every_pattern() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let footprint = 256 * 1024u64;
    for pattern in ["sequential", "strided", "uniform", "zipf"] {
        let gen = |name: &str, seed: &str| {
            let p = d.join(name);
            let out = ok(run(&[
                "gen",
                "--pattern",
                pattern,
                "--refs",
                "3000",
                "--footprint",
                "256K",
                "--store-fraction",
                "0.25",
                "--seed",
                seed,
                "-o",
                s(&p),
            ]));
            assert!(out.stdout.is_empty(), "{}", describe(&out));
            p
        };
        let a = gen(&format!("{pattern}-a.xtr"), "7");
        let b = gen(&format!("{pattern}-b.xtr"), "7");
        assert_eq!(read(&a), read(&b), "{pattern}: same seed, same bytes");
        if matches!(pattern, "uniform" | "zipf") {
            let c = gen(&format!("{pattern}-c.xtr"), "8");
            assert_ne!(read(&a), read(&c), "{pattern}: another seed, another trace");
        }
        let v = parse_json(&ok(run(&["info", s(&a), "--json", "-"])).stdout);
        assert_eq!(u(&v, "/references"), 3000, "{pattern}");
        assert_eq!(u(&v, "/by_kind/load") + u(&v, "/by_kind/store"), 3000, "{pattern}: data accesses only");
        assert!(u(&v, "/by_kind/store") > 0, "{pattern}: --store-fraction 0.25 gives stores");
        assert!(u(&v, "/distinct_pages") <= footprint / 4096 + 1, "{pattern}: inside the footprint");
        assert!(u(&v, "/max_addr") - u(&v, "/min_addr") < footprint, "{pattern}: inside the footprint");

        // Other formats from the name, just as deterministic.
        for ext in ["lackey", "lackey.zst", "champsim"] {
            let x = gen(&format!("{pattern}-a.{ext}"), "7");
            let y = gen(&format!("{pattern}-b.{ext}"), "7");
            assert_eq!(read(&x), read(&y), "{pattern}.{ext}");
            let w = parse_json(&ok(run(&["info", s(&x), "--json", "-"])).stdout);
            assert_eq!(u(&w, "/by_kind/load") + u(&w, "/by_kind/store"), 3000, "{pattern}.{ext}");
        }
    }
}

#[test]
fn gen_writes_xtr_when_the_name_has_no_format() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("synthetic.trace");
    ok(run(&["gen", "--refs", "100", "--footprint", "64K", "-o", s(&p)]));
    let v = parse_json(&ok(run(&["info", s(&p), "--json", "-"])).stdout);
    assert_eq!(u(&v, "/references"), 100);
}

fn as_args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// The names `xlat presets` lists (first word of the lines that do not start with a blank).
fn preset_names() -> Vec<String> {
    let text = stdout(&ok(run(&["presets"])));
    text.lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

#[test]
fn presets_lists_the_documented_machines() {
    let names = preset_names();
    for p in REQUIRED_PRESETS {
        assert!(names.iter().any(|n| n == p), "`xlat presets` lists {p}: {names:?}");
    }
}

#[test]
fn presets_columns_line_up_for_every_name() {
    let text = stdout(&ok(run(&["presets"])));
    let names = preset_names();
    let longest = names.iter().map(String::len).max().unwrap();
    assert!(longest > 14, "a name longer than the old column: {names:?}");
    for line in text.lines() {
        // The second column starts one past the longest name on every line.
        let (first, second) = line.split_at(longest + 1);
        assert!(first.ends_with(' ') && !second.starts_with(' '), "misaligned: {line:?}");
    }
}

#[test]
fn presets_show_prints_toml_that_run_accepts_with_the_same_results() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // mips-r3000 is a 32-bit design: use the part of the real trace below 4 GB.
    let trace = write(d, "low.lackey", lackey_32bit(60_000));
    let names = preset_names();
    let mut with_configs = vec!["run".to_string(), "-t".into(), s(&trace).into()];
    let mut with_presets = with_configs.clone();
    for name in &names {
        let out = ok(run(&["presets", "--show", name]));
        let toml = stdout(&out);
        assert!(toml.contains(&format!("name = \"{name}\"")), "{name}:\n{toml}");
        let file = write(d, &format!("{name}.toml"), &toml);
        with_configs.extend(["--config".into(), s(&file).to_string()]);
        with_presets.extend(["--preset".into(), name.clone()]);
    }
    let a = run_json(&as_args(&with_configs));
    let b = run_json(&as_args(&with_presets));
    check_report(&a);
    assert_eq!(a["configs"].as_array().unwrap().len(), names.len());
    assert_eq!(counters(&a), counters(&b), "--config `presets --show` output vs --preset");
    for name in &names {
        let c = config(&a, name);
        assert!(u(c, "/lookups") > 0 && u(c, "/walks/count") > 0, "{name} simulated something");
    }
}

#[test]
fn demo_runs_with_no_arguments_and_compares_designs() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(run(&["demo"]));
    let table = stdout(&out);
    let json = dir.path().join("demo.json");
    ok(run(&["demo", "-q", "--json", s(&json)]));
    let v = read_json(&json);
    check_report(&v);
    let names: Vec<&str> = v["configs"].as_array().unwrap().iter().map(|c| st(c, "/name")).collect();
    assert!(names.len() >= 3, "several designs: {names:?}");
    for n in &names {
        assert!(table.contains(n), "the table names {n}:\n{table}");
    }
    // One column per design, in blocks of columns that fit 100 characters.
    let columns: usize =
        table.lines().filter(|l| l.starts_with("config")).map(|l| l.split_whitespace().count() - 1).sum();
    assert_eq!(columns, names.len(), "one column per design:\n{table}");
    // The demo runs the bundled trace: the same counters as `run` on data/demo.xtr.
    assert_eq!(u(&v, "/trace/references"), count_lackey(lackey_text()).iter().sum::<u64>());
    let x86 = run_json(&["run", "-p", "x86-64", "-t", s(&demo_xtr())]);
    assert_eq!(config(&v, "x86-64"), config(&x86, "x86-64"));
}

#[test]
fn demo_names_its_trace_once() {
    let table = stdout(&ok(run(&["demo"])));
    let line = table.lines().find(|l| l.starts_with("trace ")).unwrap_or_else(|| panic!("{table}"));
    assert!(line.starts_with("trace data/demo.xtr (bundled, xtr):"), "{line}");
    let run_table = stdout(&ok(run(&["run", "-p", "x86-64", "-t", s(&demo_xtr())])));
    assert!(run_table.lines().any(|l| l.starts_with("trace ") && l.contains(".xtr (xtr):")), "{run_table}");
}

#[test]
fn demo_json_on_stdout_is_valid_json() {
    let out = ok(run(&["demo", "--json", "-"]));
    let v = parse_json(&out.stdout);
    check_report(&v);
    assert!(v["configs"].as_array().unwrap().len() >= 3);
    let out = ok(run(&["demo", "--csv", "-"]));
    assert!(stdout(&out).starts_with("config,structure,"), "{}", describe(&out));
}
