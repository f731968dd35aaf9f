//! Bad input: every case exits with status 2, prints exactly one line on stderr naming the file
//! and the offset, line or key and what was expected, and writes no report (no table, no JSON,
//! no CSV).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Output;

/// A scratch directory with the minimal config and the paths a run would write its reports to.
struct Scratch {
    dir: tempfile::TempDir,
    cfg: PathBuf,
    json: PathBuf,
    csv: PathBuf,
}

impl Scratch {
    fn new() -> Scratch {
        let dir = tempfile::tempdir().unwrap();
        let cfg = write(dir.path(), "fa64.toml", MINIMAL);
        let json = dir.path().join("report.json");
        let csv = dir.path().join("report.csv");
        Scratch { dir, cfg, json, csv }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn file(&self, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        write(self.path(), name, contents)
    }

    /// `xlat run` of `designs` over `trace` asking for JSON and CSV files (and the table).
    fn run_with(&self, designs: &[&str], trace: &Path, extra: &[&str]) -> Output {
        let mut a = vec!["run", "-t", s(trace), "--json", s(&self.json), "--csv", s(&self.csv)];
        a.extend(designs);
        a.extend(extra);
        run(&a)
    }

    /// Runs the minimal config over `trace` and checks the failure is clean and writes nothing.
    fn fails(&self, trace: &Path, extra: &[&str], what: &str) -> String {
        let out = self.run_with(&["--config", s(&self.cfg)], trace, extra);
        self.check(&out, what)
    }

    /// Checks a clean failure that wrote no report.
    fn check(&self, out: &Output, what: &str) -> String {
        let err = expect_error(out, what);
        assert_absent(&self.json);
        assert_absent(&self.csv);
        err
    }
}

/// The number after "offset " in an error message.
fn offset_in(msg: &str) -> u64 {
    let rest = msg.split("offset ").nth(1).unwrap_or_else(|| panic!("no offset in {msg:?}"));
    rest.split(|c: char| !c.is_ascii_digit()).next().unwrap().parse().unwrap_or_else(|_| panic!("{msg:?}"))
}

// ---------------------------------------------------------------------------------------------
// Traces

#[test]
fn truncated_compressed_xtr_fails_cleanly() {
    let sc = Scratch::new();
    let demo = std::fs::read(demo_xtr()).unwrap();
    let n = demo.len();
    for cut in [n / 2, n / 4, 3 * n / 4, n - 1, n - 16, 100, 10, 6, 3] {
        let name = format!("cut-{cut}.xtr");
        let p = sc.file(&name, &demo[..cut]);
        let err = sc.fails(&p, &[], &name);
        assert_mentions(&err, &[&name]);
        assert!(err.contains("offset "), "{err}");
        let err = expect_error(&run(&["info", s(&p)]), "info");
        assert_mentions(&err, &[&name]);
    }
}

#[test]
fn truncated_compressed_xtr_says_where_and_what_was_expected() {
    let sc = Scratch::new();
    let demo = std::fs::read(demo_xtr()).unwrap();
    for cut in [demo.len() / 2, demo.len() - 11] {
        let p = sc.file("cut.xtr", &demo[..cut]);
        let err = sc.fails(&p, &[], "cut compressed xtr");
        assert!(err.contains("truncated"), "{err}");
        assert!(offset_in(&err) <= cut as u64 || err.contains("decompressed"), "offset outside the file: {err}");
    }
}

#[test]
fn truncated_raw_xtr_names_the_offset() {
    let sc = Scratch::new();
    let raw = raw_demo_xtr();
    assert!(raw.starts_with(b"XTR\0"), "raw xtr starts with the magic");
    let whole = sc.file("whole.xtr", &raw);
    ok(run(&["run", "-c", s(&sc.cfg), "-t", s(&whole), "--max-refs", "1000", "-q"]));
    let n = raw.len();
    for cut in [n / 2, n / 3, n - 1, n - 2, 20, 12, 9, 4] {
        let name = format!("raw-{cut}.xtr");
        let p = sc.file(&name, &raw[..cut]);
        let err = sc.fails(&p, &[], &name);
        assert_mentions(&err, &[&name, "truncated"]);
        assert!(offset_in(&err) <= cut as u64, "the offset lies in the file: {err}");
    }
    // The header says how many bytes were expected.
    let err = sc.fails(&sc.file("hdr.xtr", &raw[..20]), &[], "header cut");
    assert_mentions(&err, &["hdr.xtr", "offset 20", "expected"]);
}

#[test]
fn corrupt_bytes_in_the_middle_fail_cleanly() {
    let sc = Scratch::new();
    let demo = std::fs::read(demo_xtr()).unwrap();
    let mut bad = demo.clone();
    let mid = bad.len() / 2;
    for b in &mut bad[mid..mid + 64] {
        *b ^= 0x5a;
    }
    let p = sc.file("corrupt.xtr", &bad);
    let err = sc.fails(&p, &[], "corrupt compressed xtr");
    assert_mentions(&err, &["corrupt.xtr", "offset "]);

    let raw = raw_demo_xtr();
    let mid = raw.len() / 2;
    let mut tag = raw.clone();
    tag[mid..mid + 32].fill(0x99);
    let err = sc.fails(&sc.file("tag.xtr", &tag), &[], "unknown record tag");
    assert_mentions(&err, &["tag.xtr", "offset ", "0x99", "tag"]);
    let off = offset_in(&err);
    assert!((mid as u64..mid as u64 + 32).contains(&off), "offset {off} is where the bad bytes are: {err}");

    let mut ff = raw.clone();
    ff[mid..mid + 32].fill(0xff);
    let err = sc.fails(&sc.file("ff.xtr", &ff), &[], "0xff bytes");
    assert_mentions(&err, &["ff.xtr", "offset "]);

    let mut magic = raw.clone();
    magic[0] = b'Y';
    let err = sc.fails(&sc.file("magic.xtr", &magic), &[], "bad magic");
    assert_mentions(&err, &["magic.xtr", "offset 0", "XTR"]);

    let mut version = raw.clone();
    version[4] = 9;
    let err = sc.fails(&sc.file("version.xtr", &version), &[], "bad version");
    assert_mentions(&err, &["version.xtr", "offset 4", "version 9"]);
}

#[test]
fn wrong_format_forced_fails_cleanly() {
    let sc = Scratch::new();
    // ChampSim records read out of lackey text: whatever the reason given, no report.
    sc.fails(&lackey_fixture(), &["--format", "champsim"], "--format champsim on lackey");
    let err = sc.fails(&lackey_fixture(), &["--format", "xtr"], "--format xtr on lackey");
    assert_mentions(&err, &["sort-400.lackey.zst", "offset 0", "XTR"]);
    let err = sc.fails(&demo_xtr(), &["--format", "lackey"], "--format lackey on xtr");
    assert_mentions(&err, &["demo.xtr", "line "]);
    let err = expect_error(&run(&["info", s(&lackey_fixture()), "--format", "champsim"]), "info as champsim");
    assert_mentions(&err, &["sort-400.lackey.zst", "offset ", "ChampSim"]);
}

#[test]
fn champsim_forced_on_lackey_names_the_trace() {
    let sc = Scratch::new();
    let err = sc.fails(&lackey_fixture(), &["--format", "champsim"], "--format champsim on lackey");
    assert_mentions(&err, &["sort-400.lackey.zst", "offset "]);
}

#[test]
fn champsim_forced_on_lackey_text_is_never_accepted() {
    let sc = Scratch::new();
    let text = &lackey_text()[..64 * 1000];
    let p = sc.file("t.lackey", text);
    let out = sc.run_with(&["-p", "pa-8000"], &p, &["--format", "champsim"]);
    sc.check(&out, "run -p pa-8000 --format champsim on lackey text");
    expect_error(&run(&["info", s(&p), "--format", "champsim"]), "info --format champsim on lackey text");
}

#[test]
fn lackey_forced_on_binary_is_an_error() {
    let sc = Scratch::new();
    let (bytes, _) = small_champsim(2000);
    let p = sc.file("t.champsim", bytes);
    sc.fails(&p, &["--format", "lackey"], "--format lackey on champsim");
}

#[test]
fn unknown_format_fails_cleanly() {
    let sc = Scratch::new();
    // Deterministic binary noise that starts like nothing xlat knows.
    let mut x: u32 = 12345;
    let noise: Vec<u8> = (0..5000)
        .map(|_| {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            (x >> 16) as u8
        })
        .collect();
    let mut garbage = vec![0u8, 1, 2, 3];
    garbage.extend(noise);
    let text = b"hello\nthis is not a trace\nI am a sentence, not a reference\n".to_vec();
    for (name, contents) in [("garbage.bin", garbage), ("notes.txt", text)] {
        let p = sc.file(name, &contents);
        let err = sc.fails(&p, &[], name);
        assert_mentions(&err, &[name, "cannot tell the trace format", "expected", "lackey", "xtr", "champsim"]);
        expect_error(&run(&["info", s(&p)]), "info");
        let out = sc.path().join("never.xtr");
        expect_error(&run(&["convert", s(&p), s(&out)]), "convert");
        assert_absent(&out);
    }
}

#[test]
fn empty_xtr_fails_cleanly() {
    let sc = Scratch::new();
    let p = sc.file("empty.xtr", b"");
    let err = sc.fails(&p, &[], "empty .xtr");
    assert_mentions(&err, &["empty.xtr", "offset 0", "empty", "expected"]);
    let err = sc.fails(&p, &["--format", "xtr"], "empty, --format xtr");
    assert_mentions(&err, &["empty.xtr", "offset 0"]);
}

#[test]
fn empty_file_is_an_error() {
    let sc = Scratch::new();
    for name in ["empty", "empty.lackey"] {
        let p = sc.file(name, b"");
        let err = sc.fails(&p, &[], name);
        assert_mentions(&err, &[name, "empty"]);
    }
    let out = run_stdin(&["run", "-c", s(&sc.cfg), "-t", "-", "--json", s(&sc.json)], b"");
    sc.check(&out, "empty stdin");
}

#[test]
fn nonexistent_trace_fails_cleanly() {
    let sc = Scratch::new();
    let p = sc.path().join("no-such-trace.xtr");
    let err = sc.fails(&p, &[], "missing trace");
    assert_mentions(&err, &["no-such-trace.xtr"]);
    let err = expect_error(&run(&["info", s(&p)]), "info");
    assert_mentions(&err, &["no-such-trace.xtr"]);
    let out = sc.path().join("out.lackey");
    let err = expect_error(&run(&["convert", s(&p), s(&out)]), "convert");
    assert_mentions(&err, &["no-such-trace.xtr"]);
    assert_absent(&out);
}

#[test]
fn malformed_lackey_reference_names_the_line() {
    let sc = Scratch::new();
    let cases: &[(&str, &str, &str)] = &[
        ("I  04013a74,6\n L 04031aa0,1\n S 04031zz0,8\n", "line 3", "hexadecimal"),
        ("==1== banner\nI  04013a74,6\n L 04031aa0\n", "line 3", "','"),
        ("I  04013a74,6\n M 04031aa0,0\n", "line 2", "size"),
        ("I  04013a74,6\n L04031aa0,4\n", "line 2", "blank"),
        ("I  04013a74,6\nI  ,4\n L 1,1\n", "line 2", "address"),
        ("I  04013a74,6\n S 04031aa0,8 junk\n", "line 2", "after the size"),
        ("I  04013a74,6\n L 04031aa0,\n", "line 2", "size"),
        ("I  0401", "line 1", "','"),
    ];
    for (i, (text, line, what)) in cases.iter().enumerate() {
        let name = format!("bad{i}.lackey");
        let p = sc.file(&name, text);
        let err = sc.fails(&p, &[], &name);
        assert_mentions(&err, &[&format!("{name}: {line}:"), what]);
    }
    // On stdin the file is named `-`.
    let out = run_stdin(&["run", "-c", s(&sc.cfg), "-t", "-", "--json", s(&sc.json)], cases[0].0.as_bytes());
    let err = sc.check(&out, "stdin");
    assert_mentions(&err, &["-: line 3:"]);
}

#[test]
fn malformed_line_deep_in_a_real_trace_writes_no_report() {
    let sc = Scratch::new();
    let text = lackey_text();
    let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    let bad = lines.len() * 2 / 3;
    let mut out = Vec::with_capacity(text.len());
    for (i, l) in lines.iter().enumerate() {
        if i == bad {
            out.extend_from_slice(b" L 0402g000,8");
        } else {
            out.extend_from_slice(l);
        }
        if i + 1 < lines.len() {
            out.push(b'\n');
        }
    }
    let p = sc.file("late.lackey", &out);
    let err = sc.fails(&p, &[], "late bad line");
    assert_mentions(&err, &[&format!("late.lackey: line {}:", bad + 1), "0402g000"]);
}

// ---------------------------------------------------------------------------------------------
// Configs

/// Runs the demo trace (first references only) with the config `text` written to `v.toml`.
fn config_fails(sc: &Scratch, text: &str, what: &str) -> String {
    let p = sc.file("v.toml", text);
    let out = sc.run_with(&["--config", s(&p)], &demo_xtr(), &["--max-refs", "1000"]);
    let err = sc.check(&out, what);
    assert_mentions(&err, &["v.toml"]);
    err
}

#[test]
fn bad_config_keys_and_types_name_the_line_and_key() {
    let sc = Scratch::new();
    let cases: &[(&str, &str, &[&str])] = &[
        ("ways = 64 ", "wayz = 64 ", &["line 6", "wayz", "unknown field"]),
        ("[page_table]", "[page_table]\nlevelz = 4", &["line 9", "levelz", "unknown field"]),
        ("page_size = 4096", "page_size = 4096\ncolour = \"red\"", &["line 3", "colour"]),
        ("entries = 64", "entries = \"64\"", &["line 5", "expected u32"]),
        ("page_size = 4096", "page_size = \"4K\"", &["line 2", "expected u64"]),
        ("name = \"fa64\"", "name = 5", &["line 1", "expected a string"]),
        ("entries = 64", "entries = -1", &["line 5", "-1"]),
        ("policy = \"lru\"", "policy = \"lfu\"", &["line 7", "lfu", "lru", "plru"]),
        ("kind = \"radix\"", "kind = \"inverted\"", &["line 9", "inverted", "radix", "hashed", "clustered"]),
        ("policy = \"lru\"", "policy = 3", &["line 7"]),
        ("entries = 64", "entries = 64.5", &["line 5"]),
        ("name = \"fa64\"\n", "", &["name"]),
        ("name = \"L1\"\n", "", &["name"]),
    ];
    for (from, to, parts) in cases {
        assert!(MINIMAL.contains(from), "{from}");
        let err = config_fails(&sc, &MINIMAL.replacen(from, to, 1), &format!("{from} -> {to}"));
        assert_mentions(&err, parts);
    }
}

#[test]
fn misspelt_table_is_reported_at_the_top_level() {
    let sc = Scratch::new();
    let err = config_fails(&sc, &MINIMAL.replace("[page_table]", "[page_tabel]"), "[page_tabel]");
    assert_mentions(&err, &["line 8", "page_tabel"]);
    assert!(!err.contains("in []"), "{err}");
}

#[test]
fn impossible_config_values_name_the_key() {
    let sc = Scratch::new();
    let cases: &[(&str, &str, &[&str])] = &[
        ("ways = 64 ", "ways = 48 ", &["tlb[0].ways", "divide", "48"]),
        ("ways = 64 ", "ways = 0 ", &["tlb[0].ways"]),
        ("page_size = 4096", "page_size = 4000", &["page_size", "power of two", "4000"]),
        ("page_size = 4096", "page_size = 0", &["page_size", "power of two"]),
        ("entries = 64", "entries = 0", &["tlb[0].entries", "from 1 to"]),
        ("entries = 64", "entries = 100000000", &["tlb[0].entries", "from 1 to"]),
        ("kind = \"radix\"", "kind = \"radix\"\n[os]\nmemory_bytes = 1125899906842624", &["os.memory_bytes"]),
        ("kind = \"radix\"", "kind = \"radix\"\n[cost.cache]\nsize_bytes = 1099511627776", &["cost.cache.size_bytes"]),
        ("ways = 64 ", "ways = 6 ", &["tlb[0]"]),
        ("kind = \"radix\"", "kind = \"hashed\"\nbuckets = 0", &["buckets", "0"]),
        ("kind = \"radix\"", "kind = \"clustered\"\nbuckets = 0", &["buckets", "0"]),
    ];
    for (from, to, parts) in cases {
        let err = config_fails(&sc, &MINIMAL.replacen(from, to, 1), &format!("{from} -> {to}"));
        assert_mentions(&err, parts);
    }
    // plru needs a power-of-two number of ways (6 divides 48, so only the policy is wrong).
    let plru = MINIMAL
        .replace("entries = 64", "entries = 48")
        .replace("ways = 64 ", "ways = 6 ")
        .replace("\"lru\"", "\"plru\"");
    let err = config_fails(&sc, &plru, "plru with 6 ways");
    assert_mentions(&err, &["tlb[0].policy", "plru", "power-of-two", "6"]);
    // No TLB at all.
    let none = "name = \"x\"\ntlb = []\n";
    let err = config_fails(&sc, none, "no tlb");
    assert_mentions(&err, &["tlb"]);
}

#[test]
fn impossible_itanium_designs_name_the_key() {
    let sc = Scratch::new();
    // MINIMAL ends inside [page_table] (kind = "radix").
    let cases: Vec<(&str, &[&str])> = vec![
        ("\n[itanium]\nrid_bits = 30\n", &["itanium.rid_bits", "30", "4..=24"]),
        ("\n[itanium]\npkrs = 0\n", &["itanium.pkrs", "1..=64"]),
        ("\n[itanium]\nshared_region = true\n", &["itanium.shared_region", "itanium-linux"]),
        ("\n[itanium]\nrid_alloc = \"random\"\n", &["random", "sequential", "byte-swapped"]),
        ("\n[itanium]\nregions = 8\n", &["regions", "unknown field"]),
        ("\n[layout]\nkind = \"flat\"\n", &["flat", "identity", "compact32"]),
        ("\n[layout]\nkind = \"compact32\"\nalign = 1000\n", &["layout.align", "power of two"]),
        ("\n[layout]\nkind = \"compact32\"\nsize = 8589934592\n", &["layout.size", "4 GiB"]),
        ("walker = \"software\"\n", &["page_table.walker", "vhpt-short", "cost.refill"]),
        ("vhpt_entries = 1000\n", &["page_table.vhpt_entries", "power of two"]),
    ];
    for (extra, parts) in cases {
        let text = format!("{MINIMAL}{extra}");
        let err = config_fails(&sc, &text, extra);
        assert_mentions(&err, parts);
    }
    // Key-based sharing needs per-page keys: not with the short VHPT.
    let short = MINIMAL.replace("kind = \"radix\"", "kind = \"vhpt-short\"\nva_bits = 64")
        + "\n[layout]\nkind = \"itanium-linux\"\n[itanium]\nshared_region = true\nprotection_keys = true\n";
    let err = config_fails(&sc, &short, "short VHPT with key-based sharing");
    assert_mentions(&err, &["itanium.shared_region", "vhpt-long"]);
}

#[test]
fn impossible_cache_hierarchies_name_the_key() {
    let sc = Scratch::new();
    let level = |name: &str, size: u64, line: u64, ways: u32, serves: &str, level: u32| {
        format!(
            "[[cache]]\nname = \"{name}\"\nsize = {size}\nline = {line}\nways = {ways}\nserves = \"{serves}\"\nlevel = {level}\n"
        )
    };
    let cases: Vec<(String, &[&str])> = vec![
        (level("L1", 16000, 64, 4, "data", 1), &["cache[0].size", "multiple of line x ways", "256", "16000"]),
        (level("L1", 0, 64, 4, "data", 1), &["cache[0].size", "non-zero"]),
        (level("L1", 16384, 48, 4, "data", 1), &["cache[0].line", "power of two", "48"]),
        (level("L1", 16384, 8192, 1, "data", 1), &["cache[0].line", "page size", "8192"]),
        (level("L1", 16384, 64, 0, "data", 1), &["cache[0].ways", "at least 1"]),
        (level("L1", 16384, 64, 4, "data", 0), &["cache[0].level", "levels start at 1"]),
        (level("L2", 262144, 64, 8, "unified", 2), &["cache[0].level", "level 2", "no cache at level 1"]),
        (
            level("L1D", 16384, 64, 4, "data", 1) + &level("L2I", 262144, 64, 8, "instruction", 2),
            &["cache[1].level", "instruction fetches", "no cache at level 1"],
        ),
        (
            level("L1", 16384, 64, 4, "data", 1) + &level("L1b", 16384, 64, 4, "unified", 1),
            &["cache[1].level", "two caches at level 1 serve data references"],
        ),
        (
            level("L1", 16384, 64, 4, "data", 1) + &level("L1", 16384, 64, 4, "instruction", 1),
            &["cache[1].name", "'L1'"],
        ),
        (
            level("L1", 24576, 64, 6, "data", 1).replace("level = 1", "level = 1\npolicy = \"plru\""),
            &["cache[0].policy", "plru", "6"],
        ),
        (level("L1", 16384, 64, 4, "data", 1) + "[cost.cache]\n", &["cost.cache", "remove"]),
        ("[time]\ncpi = -1.0\n".to_string(), &["time.cpi", "-1"]),
        (level("L1", 16384, 64, 4, "everything", 1), &["everything", "unified", "instruction"]),
        (
            level("L1", 16384, 64, 4, "data", 1).replace("level = 1", "level = 1\nwrite = \"around\""),
            &["around", "back", "through"],
        ),
        (level("L1", 16384, 64, 4, "data", 1).replace("level = 1", "level = 1\nindex = \"pivt\""), &["pivt", "vipt"]),
        (
            level("L1", 16384, 64, 4, "data", 1).replace("level = 1", "level = 1\nsize_bytes = 3"),
            &["size_bytes", "unknown field"],
        ),
        ("[memory]\nlatency = \"fast\"\n".to_string(), &["line 11", "[memory]", "expected u64"]),
    ];
    for (extra, parts) in cases {
        let text = format!("{MINIMAL}{extra}");
        let err = config_fails(&sc, &text, &extra);
        assert_mentions(&err, parts);
    }
}

#[test]
fn missing_config_and_unknown_preset_fail_cleanly() {
    let sc = Scratch::new();
    let missing = sc.path().join("missing.toml");
    let out = sc.run_with(&["--config", s(&missing)], &demo_xtr(), &[]);
    let err = sc.check(&out, "missing config");
    assert_mentions(&err, &["missing.toml"]);

    let out = sc.run_with(&["--preset", "vax-11"], &demo_xtr(), &[]);
    let err = sc.check(&out, "unknown preset");
    assert_mentions(&err, &["vax-11", "preset"]);
    let err = expect_error(&run(&["presets", "--show", "vax-11"]), "presets --show");
    assert_mentions(&err, &["vax-11"]);

    let out = sc.run_with(&[], &demo_xtr(), &[]);
    let err = sc.check(&out, "no design");
    assert_mentions(&err, &["--config", "--preset"]);
}

#[test]
fn duplicate_design_names_fail_cleanly() {
    let sc = Scratch::new();
    let other =
        sc.file("other.toml", MINIMAL.replace("entries = 64", "entries = 32").replace("ways = 64 ", "ways = 32 "));
    let out = sc.run_with(&["-c", s(&sc.cfg), "-c", s(&other)], &demo_xtr(), &[]);
    let err = sc.check(&out, "two configs named fa64");
    assert_mentions(&err, &["fa64", "name"]);

    let out = sc.run_with(&["-p", "x86-64", "-p", "x86-64"], &demo_xtr(), &[]);
    let err = sc.check(&out, "the same preset twice");
    assert_mentions(&err, &["x86-64"]);

    let shown = stdout(&ok(run(&["presets", "--show", "x86-64"])));
    let file = sc.file("x86.toml", shown);
    let out = sc.run_with(&["-c", s(&file), "-p", "x86-64"], &demo_xtr(), &[]);
    let err = sc.check(&out, "config and preset with one name");
    assert_mentions(&err, &["x86-64"]);
}

#[test]
fn a_32_bit_design_on_a_64_bit_trace_names_va_bits() {
    let sc = Scratch::new();
    // A 32-bit design without a layout that fits the trace in (layout.kind = "compact32", or
    // "sparse32" as the mips-r3000 preset has) cannot run a 64-bit trace.
    let narrow = sc.file("narrow.toml", MINIMAL.replace("kind = \"radix\"", "kind = \"radix\"\nva_bits = 32"));
    let out = sc.run_with(&["-c", s(&narrow)], &demo_xtr(), &[]);
    let err = sc.check(&out, "va_bits = 32");
    // The only design failed: nothing is reported, and the error names the trace and where.
    assert_mentions(&err, &["fa64", "va_bits", "32-bit", "demo.xtr", "reference 3 (record 3)"]);
    // (Alongside designs that accept the trace, those are reported:
    // run::one_failing_design_does_not_abort_the_others.)
    let compact = sc.file(
        "compact.toml",
        MINIMAL.replace("kind = \"radix\"", "kind = \"radix\"\nva_bits = 32") + "\n[layout]\nkind = \"compact32\"\n",
    );
    let out = sc.run_with(&["-c", s(&compact), "-p", "mips-r3000"], &demo_xtr(), &[]);
    assert!(out.status.success(), "compact32 packs the trace: {}", String::from_utf8_lossy(&out.stderr));
}

// ---------------------------------------------------------------------------------------------
// convert, gen, usage

#[test]
fn convert_bad_input_fails_cleanly() {
    let sc = Scratch::new();
    let demo = std::fs::read(demo_xtr()).unwrap();
    let half = sc.file("half.xtr", &demo[..demo.len() / 2]);
    let bad = sc.file("bad.lackey", "I  04013a74,6\n L 04031aa0,1\n S 04031zz0,8\n");
    for (input, out, parts) in
        [(&half, "o1.lackey", &["half.xtr", "offset "][..]), (&bad, "o2.xtr", &["bad.lackey", "line 3"][..])]
    {
        let o = sc.path().join(out);
        let err = expect_error(&run(&["convert", s(input), s(&o)]), out);
        assert_mentions(&err, parts);
    }
    // The output name must say the format (or --to must).
    let o = sc.path().join("out.bin");
    let err = expect_error(&run(&["convert", s(&demo_xtr()), s(&o)]), "unknown output format");
    assert_mentions(&err, &["out.bin", "expected"]);
    assert_absent(&o);
    let err = expect_error(&run(&["convert", s(&demo_xtr()), "-"]), "stdout without --to");
    assert_mentions(&err, &["-"]);
    // Converting a file onto itself would destroy it.
    let copy = sc.file("copy.xtr", &demo);
    let err = expect_error(&run(&["convert", s(&copy), s(&copy)]), "same file");
    assert_mentions(&err, &["copy.xtr", "same file"]);
    assert_eq!(std::fs::read(&copy).unwrap(), demo, "the input is untouched");
}

#[test]
fn failed_convert_writes_no_output_file() {
    let sc = Scratch::new();
    let demo = std::fs::read(demo_xtr()).unwrap();
    let half = sc.file("half.xtr", &demo[..demo.len() / 2]);
    let bad = sc.file("bad.lackey", "I  04013a74,6\n L 04031aa0,1\n S 04031zz0,8\n");
    for (input, out) in [(&half, "o1.lackey"), (&bad, "o2.xtr")] {
        let o = sc.path().join(out);
        expect_error(&run(&["convert", s(input), s(&o)]), out);
        assert_absent(&o);
    }
}

#[test]
fn gen_bad_arguments_fail_cleanly() {
    let sc = Scratch::new();
    let o = sc.path().join("g.xtr");
    for (args, parts) in [
        (&["--footprint", "0"][..], &["--footprint"][..]),
        (&["--store-fraction", "2"][..], &["--store-fraction", "2"][..]),
        (&["--access-size", "0"][..], &["--access-size"][..]),
    ] {
        let mut a = vec!["gen", "--refs", "100", "-o", s(&o)];
        a.extend(args);
        let err = expect_error(&run(&a), &format!("{args:?}"));
        assert_mentions(&err, parts);
        assert_absent(&o);
    }
    let bad_dir = sc.path().join("no-such-dir").join("g.xtr");
    let err = expect_error(&run(&["gen", "--refs", "10", "-o", s(&bad_dir)]), "unwritable output");
    assert_mentions(&err, &["no-such-dir"]);
}

#[test]
fn usage_errors_are_one_line() {
    let sc = Scratch::new();
    let o = sc.path().join("g.xtr");
    for args in [
        vec!["run", "-c", s(&sc.cfg)],
        vec!["run", "-c", s(&sc.cfg), "-t", s(&demo_xtr()), "--format", "elf"],
        vec!["run", "-c", s(&sc.cfg), "-t", s(&demo_xtr()), "--max-refs", "many"],
        vec!["gen", "--footprint", "12Q", "-o", s(&o)],
        vec!["gen", "--pattern", "spiral", "-o", s(&o)],
    ] {
        expect_error(&run(&args), &format!("{args:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// What a new user meets first: help that says what to do next.

#[test]
fn missing_input_names_every_way_to_give_one() {
    let err = expect_error(&run(&["run", "-p", "x86-64"]), "run without input");
    assert_mentions(&err, &["nothing to simulate", "--trace", "--snapshot", "-- CMD", "`xlat run --help`"]);
    let err = expect_error(&run(&["model", "-p", "x86-64"]), "model without pages");
    assert_mentions(&err, &["nothing to model", "--snapshot", "--gen", "`xlat model --help`"]);
}

#[test]
fn command_line_errors_point_to_the_subcommand_s_help() {
    let err = expect_error(&run(&["run", "--bogus"]), "unknown flag of run");
    assert!(err.ends_with("(see `xlat run --help`)"), "{err}");
    let err = expect_error(&run(&["info"]), "info without a trace");
    assert!(err.ends_with("(see `xlat info --help`)"), "{err}");
    let err = expect_error(&run(&["frobnicate"]), "unknown command");
    assert!(err.ends_with("(see `xlat --help`)"), "{err}");
}

#[test]
fn a_misspelt_preset_gets_a_suggestion() {
    let err = expect_error(&run(&["run", "-p", "x86_64", "-t", s(&demo_xtr())]), "misspelt preset");
    assert_mentions(&err, &["unknown preset 'x86_64'", "did you mean 'x86-64'?", "xlat presets"]);
    let err = expect_error(&run(&["presets", "--show", "itanium"]), "misspelt preset to show");
    assert_mentions(&err, &["did you mean 'itanium2'"]);
}

#[test]
fn a_part_of_a_preset_s_name_suggests_the_preset() {
    let err = expect_error(&run(&["run", "--preset", "r3000", "-t", s(&demo_xtr())]), "part of a preset name");
    assert_mentions(&err, &["unknown preset 'r3000'", "did you mean 'mips-r3000' or 'mach3-r3000'?", "xlat presets"]);
    let err = expect_error(&run(&["presets", "--show", "5level"]), "suffix of a preset name");
    assert_mentions(&err, &["did you mean 'x86-64-5level'?"]);
}

#[test]
fn a_tlb_is_named_the_same_way_in_every_error() {
    let sc = Scratch::new();
    let second = format!("{MINIMAL}\n[[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 512\nwayz = 4\n");
    let cfg = sc.file("two.toml", &second);
    let err = sc.fails(&demo_xtr(), &["-c", s(&cfg)], "unknown key in the second TLB");
    assert_mentions(&err, &["in tlb[1]:", "wayz"]);
    let bad = sc.file("bad.toml", second.replace("wayz = 4", "ways = 5"));
    let err = sc.fails(&demo_xtr(), &["-c", s(&bad)], "impossible ways in the second TLB");
    assert_mentions(&err, &["tlb[1].ways"]);
}

#[test]
fn top_level_help_says_what_xlat_is_and_how_to_start() {
    let help = stdout(&ok(run(&["--help"])));
    assert_mentions(&help, &["trace-driven simulator of TLBs", "xlat demo", "xlat run --preset", "xlat trace -o"]);
}

#[test]
fn cut_or_corrupt_lz4_xtr_fails_cleanly() {
    let sc = Scratch::new();
    let whole = sc.path().join("demo.xtr.lz4");
    ok(run(&["convert", s(&demo_xtr()), s(&whole)]));
    ok(run(&["run", "-c", s(&sc.cfg), "-t", s(&whole), "-q"]));
    let lz = std::fs::read(&whole).unwrap();
    assert!(lz.starts_with(&[0x04, 0x22, 0x4d, 0x18]), "LZ4 frames");
    let n = lz.len();
    for cut in [n / 2, n / 4, n - 1, n - 16, 100, 10, 5, 3] {
        let name = format!("cut-{cut}.xtr.lz4");
        let p = sc.file(&name, &lz[..cut]);
        let err = sc.fails(&p, &[], &name);
        assert_mentions(&err, &[&name, "offset "]);
        let err = expect_error(&run(&["info", s(&p)]), "info");
        assert_mentions(&err, &[&name]);
    }
    // Bytes damaged in the middle: LZ4 may decode them, the frame's XXH3-64 does not match.
    let mut bad = lz.clone();
    let mid = n / 2;
    for b in &mut bad[mid..mid + 8] {
        *b ^= 0x21;
    }
    let p = sc.file("corrupt.xtr.lz4", &bad);
    let err = sc.fails(&p, &[], "corrupt lz4 xtr");
    assert_mentions(&err, &["corrupt.xtr.lz4", "lz4 data is truncated or corrupt"]);
    let err = expect_error(&run(&["info", s(&p)]), "info");
    assert_mentions(&err, &["corrupt.xtr.lz4", "lz4 data"]);
}

#[test]
fn a_trace_or_program_without_its_flag_gets_a_hint() {
    let err = expect_error(&run(&["run", "--preset", "x86-64", "data/demo.xtr"]), "a trace without --trace");
    assert_mentions(&err, &["unexpected argument 'data/demo.xtr'", "`--trace data/demo.xtr`", "`-- CMD ARGS`"]);
    assert!(err.ends_with("(see `xlat run --help`)"), "{err}");
    let err = expect_error(&run(&["trace", "-o", "T.xtr", "ls"]), "a program without --");
    assert_mentions(&err, &["unexpected argument 'ls'", "`xlat trace -o T.xtr -- ls`"]);
    assert!(err.ends_with("(see `xlat trace --help`)"), "{err}");
    let err = expect_error(&run(&["curve", "data/demo.xtr"]), "curve of a trace without --trace");
    assert_mentions(&err, &["`--trace data/demo.xtr`"]);
    let err = expect_error(&run(&["run", "--bogus"]), "an unknown flag");
    assert!(!err.contains("--trace --bogus") && !err.contains("-- CMD"), "no hint for a flag: {err}");
}
