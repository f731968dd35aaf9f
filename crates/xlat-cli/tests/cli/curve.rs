//! `xlat curve` end to end on the bundled real traces: every point equals a separate design of
//! `xlat run` (fully and set-associative, several page sizes, other policies), the JSON and CSV
//! contract, the sampled curve's error bound of docs/curve.md, and bad input.

use crate::common::*;
use serde_json::Value;
use std::path::Path;

/// A one-TLB design with no extras: what a curve point stands for.
fn design(entries: u32, ways: u32, policy: &str, page_size: u64) -> String {
    format!(
        "name = \"e{entries}w{ways}p{page_size}\"\npage_size = {page_size}\n[[tlb]]\nname = \"L1\"\nentries = {entries}\nways = {ways}\npolicy = \"{policy}\"\n[page_table]\nkind = \"radix\"\n"
    )
}

fn json_of(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("JSON on stdout")
}

/// Runs `xlat curve` with `args` over `trace`, then one `xlat run` of every point's design (all
/// in one pass, each its own simulation), and compares misses and lookups.
fn check_curve_equals_runs(trace: &Path, args: &[&str], policy: &str) {
    let mut a = vec!["curve", "-t", s(trace), "--json", "-", "--policy", policy];
    a.extend(args);
    let doc = json_of(&run(&a));
    let dir = tempfile::tempdir().unwrap();
    let curves = doc["curves"].as_array().unwrap();
    assert!(!curves.is_empty());
    assert_eq!(doc["points"], curves[0]["points"], "the top-level points are the first page size's");
    for c in curves {
        let ps = c["page_size"].as_u64().unwrap();
        let points = c["points"].as_array().unwrap();
        let mut run_args = vec!["run".to_string(), "-t".into(), s(trace).into(), "--json".into(), "-".into()];
        for (i, p) in points.iter().enumerate() {
            let (e, w) = (p["entries"].as_u64().unwrap() as u32, p["ways"].as_u64().unwrap() as u32);
            let f = write(dir.path(), &format!("d{ps}-{i}.toml"), design(e, w, policy, ps));
            run_args.extend(["-c".into(), s(&f).to_string()]);
        }
        let run_args: Vec<&str> = run_args.iter().map(String::as_str).collect();
        let report = json_of(&run(&run_args));
        let configs = report["configs"].as_array().unwrap();
        assert_eq!(configs.len(), points.len());
        for (p, cfg) in points.iter().zip(configs) {
            let tlb = &cfg["tlb"][0];
            assert_eq!(c["lookups"], tlb["accesses"], "lookups at page size {ps}");
            assert_eq!(
                p["misses"], tlb["misses"],
                "{} entries, {} ways, page size {ps}, {policy}: curve vs xlat run",
                p["entries"], p["ways"]
            );
            let ratio = p["misses"].as_f64().unwrap() / c["lookups"].as_f64().unwrap();
            assert!((p["miss_ratio"].as_f64().unwrap() - ratio).abs() < 1e-12);
            let instr = doc["trace"]["by_kind"]["ifetch"].as_f64().unwrap();
            assert!((p["mpki"].as_f64().unwrap() - p["misses"].as_f64().unwrap() * 1000.0 / instr).abs() < 1e-9);
        }
    }
}

#[test]
fn lru_curve_equals_separate_runs_on_the_real_traces() {
    // Fully associative over a range (including sizes that are not powers of two), and
    // set-associative, at three page sizes; both bundled files (xtr, and zstd lackey text).
    check_curve_equals_runs(&demo_xtr(), &["--entries", "1..6", "--ways", "full,1,2"], "lru");
    check_curve_equals_runs(
        &demo_xtr(),
        &["--entries", "8,16,64,128,256", "--ways", "full,4,8", "--page-size", "4096,16K,2M"],
        "lru",
    );
    check_curve_equals_runs(&lackey_fixture(), &["--entries", "16,32,128", "--ways", "4"], "lru");
    check_curve_equals_runs(
        &lackey_fixture(),
        &["--entries", "12,32,48,128", "--ways", "full", "--page-size", "8K"],
        "lru",
    );
}

#[test]
fn other_policies_equal_separate_runs() {
    for policy in ["fifo", "random", "nru", "plru"] {
        check_curve_equals_runs(&demo_xtr(), &["--entries", "16,64", "--ways", "full,4"], policy);
    }
}

#[test]
fn json_and_csv_contract() {
    let dir = tempfile::tempdir().unwrap();
    let (j, c) = (dir.path().join("c.json"), dir.path().join("c.csv"));
    let out = run(&[
        "curve",
        "-t",
        s(&demo_xtr()),
        "--entries",
        "8,16,32,64",
        "--ways",
        "full,4",
        "--json",
        s(&j),
        "--csv",
        s(&c),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&j).unwrap()).unwrap();
    assert_eq!(doc["page_size"], 4096);
    assert!(doc["trace"]["references"].as_u64().unwrap() > 0);
    let points = doc["points"].as_array().unwrap();
    let pairs: Vec<(u64, u64)> =
        points.iter().map(|p| (p["entries"].as_u64().unwrap(), p["ways"].as_u64().unwrap())).collect();
    assert_eq!(pairs, [(8, 8), (8, 4), (16, 16), (16, 4), (32, 32), (32, 4), (64, 64), (64, 4)]);
    for p in points {
        for k in ["misses", "miss_ratio", "mpki"] {
            assert!(p[k].is_number(), "{k} in {p}");
        }
    }
    let csv = std::fs::read_to_string(&c).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..5], ["entries", "ways", "misses", "miss_ratio", "mpki"]);
    for (line, p) in lines.zip(points) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f[0], p["entries"].to_string());
        assert_eq!(f[1], p["ways"].to_string());
        assert_eq!(f[2], p["misses"].to_string());
    }
    // The table names every point too.
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.lines().filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit())).count(), 8);
}

/// The polylines of an SVG (`stroke` colour, points), in document order.
fn polylines(svg: &str) -> Vec<(String, Vec<(i32, i32)>)> {
    let attr = |tag: &str, name: &str| -> String {
        let at = tag.find(&format!(" {name}=\"")).unwrap_or_else(|| panic!("{name} in {tag}")) + name.len() + 3;
        tag[at..at + tag[at..].find('"').unwrap()].to_string()
    };
    svg.split("<polyline")
        .skip(1)
        .map(|rest| {
            let tag = &rest[..rest.find("/>").unwrap()];
            let points = attr(tag, "points")
                .split_whitespace()
                .map(|p| {
                    let (x, y) = p.split_once(',').unwrap();
                    (x.parse().unwrap(), y.parse().unwrap())
                })
                .collect();
            (attr(tag, "stroke"), points)
        })
        .collect()
}

/// The texts of an SVG's `<text>` elements.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .map(|t| t[t.find('>').unwrap() + 1..t.find("</text>").unwrap()].trim().to_string())
        .collect()
}

/// Every computed point is drawn: one polyline per associativity and page size, through as
/// many points as the CSV has for it (a fully associative point of n entries lies on the
/// n-way line too), left to right; everything else drawn as a line is a 2-point segment.
#[test]
fn plot_draws_a_line_through_every_point_of_each_curve() {
    let dir = tempfile::tempdir().unwrap();
    let (svg, csv) = (dir.path().join("mrc.svg"), dir.path().join("mrc.csv"));
    let out = run(&[
        "curve",
        "-q",
        "-t",
        s(&demo_xtr()),
        "--entries",
        "1..300",
        "--ways",
        "full,1,4",
        "--page-size",
        "4096,2M",
        "--plot",
        s(&svg),
        "--csv",
        s(&csv),
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<svg"));
    let rows: Vec<Vec<u64>> = std::fs::read_to_string(&csv)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            vec![f[0].parse().unwrap(), f[1].parse().unwrap(), f[5].parse().unwrap()]
        })
        .collect();
    let mut want = Vec::new();
    for page in [4096, 2 << 20] {
        for ways in [0, 1, 4] {
            let on = |r: &&Vec<u64>| r[2] == page && if ways == 0 { r[0] == r[1] } else { r[1] == ways };
            want.push(rows.iter().filter(on).count());
        }
    }
    // Per page size, 300 fully associative sizes, direct-mapped at the powers of two 1 to 256
    // (a range gives a way count the sizes it splits into a power of two of sets), 4-way at 4
    // to 256.
    assert_eq!(want, vec![300, 9, 7, 300, 9, 7]);
    let lines: Vec<_> = polylines(&text).into_iter().filter(|(_, p)| p.len() > 2).collect();
    assert_eq!(lines.iter().map(|(_, p)| p.len()).collect::<Vec<_>>(), want);
    for (_, p) in &lines {
        assert!(p.windows(2).all(|w| w[0].0 <= w[1].0), "drawn left to right");
    }
    let mut colours: Vec<&String> = lines.iter().map(|(c, _)| c).collect();
    colours.sort();
    colours.dedup();
    assert_eq!(colours.len(), 6, "a colour per line");
    // The entries axis is base-2 logarithmic: its labels are the powers of two, evenly spaced.
    let t = texts(&text);
    for e in ["1", "2", "4", "8", "16", "32", "64", "128", "256"] {
        assert!(t.iter().any(|x| x == e), "x label {e} in {t:?}");
    }
    assert!(!t.iter().any(|x| x == "3" || x == "100"), "{t:?}");
}

/// `--log-y` makes the miss-ratio axis logarithmic: its labels are successive powers of ten
/// (a linear axis labels equal steps from 0); without it the axis starts at 0.
#[test]
fn log_y_labels_the_miss_ratio_axis_in_powers_of_ten() {
    let dir = tempfile::tempdir().unwrap();
    let (lin, log) = (dir.path().join("lin.svg"), dir.path().join("log.svg"));
    let t = demo_xtr();
    let args = ["curve", "-q", "-t", s(&t), "--entries", "1..512", "--plot"];
    let out = run(&[&args[..], &[s(&lin)]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = run(&[&args[..], &[s(&log), "--log-y"]].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (lin, log) = (texts(&std::fs::read_to_string(&lin).unwrap()), texts(&std::fs::read_to_string(&log).unwrap()));
    // The fully associative curve of the bundled trace runs from 55% at 1 entry to 0.03% at 512.
    for v in ["0.1", "1", "10"] {
        assert!(log.iter().any(|x| x == v), "log label {v} in {log:?}");
    }
    assert!(!log.iter().any(|x| x == "0" || x == "20"), "{log:?}");
    for v in ["0", "10", "20", "30"] {
        assert!(lin.iter().any(|x| x == v), "linear label {v} in {lin:?}");
    }
    assert!(!lin.iter().any(|x| x == "0.1"), "{lin:?}");
}

/// The bound docs/curve.md states for `--sample 0.1` on the bundled trace: every fully
/// associative size from 1 to 256 within 0.005 of the exact miss ratio.
#[test]
fn sampled_curve_error_stays_under_the_documented_bound() {
    let exact = json_of(&run(&["curve", "-t", s(&demo_xtr()), "--entries", "1..256", "--json", "-"]));
    for rate in ["0.1", "0.25"] {
        let approx =
            json_of(&run(&["curve", "-t", s(&demo_xtr()), "--entries", "1..256", "--sample", rate, "--json", "-"]));
        let (e, a) = (exact["points"].as_array().unwrap(), approx["points"].as_array().unwrap());
        assert_eq!(e.len(), 256);
        assert_eq!(e.len(), a.len());
        for (x, y) in e.iter().zip(a) {
            let err = (x["miss_ratio"].as_f64().unwrap() - y["miss_ratio"].as_f64().unwrap()).abs();
            assert!(
                err < 0.005,
                "rate {rate}, {} entries: exact {} sampled {}",
                x["entries"],
                x["miss_ratio"],
                y["miss_ratio"]
            );
        }
    }
}

#[test]
fn bad_input_is_one_line_and_status_2() {
    let t = demo_xtr();
    let dir = tempfile::tempdir().unwrap();
    let bad_trace = write(dir.path(), "bad.xtr", b"XTR\x01garbage that is not a trace");
    let json = dir.path().join("out.json");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--entries", "8,x"], "--entries"),
        (vec!["--entries", "0"], "--entries"),
        (vec!["--entries", "64..8"], "--entries"),
        (vec!["--policy", "mru"], "--policy"),
        (vec!["--ways", "0"], "--ways"),
        (vec!["--entries", "4", "--ways", "8"], "8 ways exceed 4 entries"),
        (vec!["--entries", "48", "--ways", "4"], "power of two"),
        (vec!["--page-size", "3000"], "--page-size"),
        (vec!["--sample", "1.5"], "--sample"),
        (vec!["--plot", "x.pdf"], "--plot"),
        (vec!["--log-y"], "--log-y"),
        (vec!["--plot", "x.svg", "--log-y=yes"], "--log-y"),
    ];
    for (extra, want) in cases {
        let mut a = vec!["curve", "-t", s(&t), "--json", s(&json)];
        a.extend(&extra);
        let err = expect_error(&run(&a), &format!("{extra:?}"));
        assert!(err.contains(want), "{extra:?}: {err}");
        assert_absent(&json);
    }
    let err = expect_error(&run(&["curve", "-t", s(&bad_trace), "--json", s(&json)]), "bad trace");
    assert!(err.contains("bad.xtr"), "{err}");
    assert_absent(&json);
    let err = expect_error(&run(&["curve", "-t", s(&dir.path().join("missing.xtr"))]), "missing trace");
    assert!(err.contains("missing.xtr"), "{err}");
}

/// Curves that once exhausted memory or ran for hours: a one-line error naming the flag, the
/// total and the bound, at once, under a 6 GiB memory limit; and the largest LRU curve, which
/// stays one cheap pass.
#[test]
fn curves_above_their_bounds_are_refused_at_once() {
    let t = demo_xtr();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("out.json");
    let cases: &[(&[&str], &[&str])] = &[
        // Every size to 100000 with FIFO: one TLB per size, until memory ran out.
        (&["--entries", "1..100000", "--policy", "fifo"], &["--entries", "100000 TLBs", "more than 256"]),
        // Every size to 4096: 4096 lookups per reference.
        (&["--entries", "1..4096", "--policy", "fifo"], &["--entries", "4096 TLBs", "more than 256"]),
        (&["--entries", "1048576", "--policy", "random", "--page-size", "4K,8K,16K,32K,64K"], &["5242880 entries"]),
        // 2 sets of 524288 ways: each reference searched a stack that deep.
        (&["--entries", "1048576", "--ways", "524288"], &["--ways", "524288 deep", "16384"]),
        (&["--entries", "1..1048576", "--page-size", "4K,8K,16K"], &["--entries", "2097152"]),
    ];
    for (extra, want) in cases {
        let mut a = vec!["curve", "-t", s(&t), "--json", s(&json)];
        a.extend(extra.iter());
        let (out, took) = run_bounded(&a);
        let err = expect_error(&out, &format!("{extra:?}"));
        assert_mentions(&err, want);
        assert!(took.as_secs() < 10, "{extra:?}: refused after {took:?}");
        assert_absent(&json);
    }
    // At the bound of side-by-side TLBs; and every size to 2^20 with LRU.
    let (out, _) =
        run_bounded(&["curve", "-q", "-t", s(&t), "--entries", "1..256", "--policy", "fifo", "--json", s(&json)]);
    assert!(out.status.success(), "{}", describe(&out));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["points"].as_array().unwrap().len(), 256);
    let (out, took) = run_bounded(&["curve", "-q", "-t", s(&t), "--entries", "1..1048576", "--max-refs", "100000"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(took.as_secs() < 60, "every size to 2^20 took {took:?}");
}

/// The default sizes start at 1: a way count above some of them skips those for it (one line on
/// standard error, none under `-q`) instead of refusing the curve; listed sizes still conflict.
#[test]
fn default_sizes_skip_those_below_an_associativity() {
    let t = demo_xtr();
    let out = run(&["curve", "-t", s(&t), "--ways", "full,4", "--csv", "-"]);
    assert!(out.status.success(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let notes: Vec<&str> = err.lines().filter(|l| l.contains("skipped")).collect();
    assert_eq!(notes.len(), 1, "one note of the skipped sizes: {err:?}");
    assert_mentions(notes[0], &["1,2 for 4 ways"]);
    let csv = stdout(&out);
    let rows: Vec<(u32, u32)> = csv
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[0].parse().unwrap(), f[1].parse().unwrap())
        })
        .collect();
    let full = rows.iter().filter(|(e, w)| e == w).count();
    let four: Vec<u32> = rows.iter().filter(|(e, w)| *w == 4 && *e != 4).map(|(e, _)| *e).collect();
    assert_eq!(full, 13, "every default size fully associative: {csv}");
    assert_eq!(four, (3..=12).map(|k| 1u32 << k).collect::<Vec<_>>(), "4 ways from 8 entries (4 is the full one)");
    let quiet = run(&["curve", "-q", "-t", s(&t), "--ways", "full,4"]);
    assert!(quiet.status.success(), "{}", describe(&quiet));
    assert!(quiet.stderr.is_empty(), "-q is silent: {}", describe(&quiet));
    let plain = run(&["curve", "-q", "-t", s(&t)]);
    assert!(plain.status.success() && plain.stderr.is_empty(), "{}", describe(&plain));
    let listed = run(&["curve", "-t", s(&t), "--entries", "1,8", "--ways", "4"]);
    assert_mentions(&expect_error(&listed, "listed sizes below the ways"), &["4 ways exceed 1 entries"]);
}
