//! `xlat model`: Table 2 formulas beside the simulated tables, on a handmade snapshot.

use crate::common::*;
use std::path::{Path, PathBuf};

/// Two processes: ASID 0 maps pages 0x400..0x414 and 0x7f000..0x7f003, ASID 1 pages 0x10, 0x11.
const SNAPSHOT: &str = "xlat-snapshot 1
page_size 4096
taken_at now
process 100 1 25 prog a
region 400000 414000 rw-p 0
region 7f000000 7f003000 r--p 0 /lib/x.so
pages 400+20 7f000+3
process 101 100 2 prog b
region 10000 12000 rw-p 0
pages 10+2
end 2
";

/// talluri95 §6.1: 64-bit addresses, 4096 buckets, s = 16, 256-byte lines.
fn design(dir: &Path, name: &str, kind: &str) -> PathBuf {
    let path = dir.join(format!("{name}.toml"));
    let text = format!(
        "name = \"{name}\"\n[[tlb]]\nname = \"L1\"\nentries = 64\npolicy = \"lru\"\n[page_table]\nkind = \"{kind}\"\n\
         va_bits = 64\nbuckets = 4096\nsubblock_factor = 16\nline_bytes = 256\n"
    );
    std::fs::write(&path, text).unwrap();
    path
}

fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let snap = dir.path().join("s.xsnap");
    std::fs::write(&snap, SNAPSHOT).unwrap();
    let h = design(dir.path(), "hashed64", "hashed");
    let c = design(dir.path(), "clustered64", "clustered");
    (dir, snap, h, c)
}

#[test]
fn prints_formula_and_simulated_columns() {
    let (_dir, snap, h, c) = setup();
    let out = ok(run(&["model", "--snapshot", s(&snap), "--config", s(&h), "--config", s(&c), "--preset", "x86-64"]));
    let text = stdout(&out);
    let header = text.lines().nth(1).expect("a header line");
    for col in ["bytes formula", "bytes simulated", "lines formula", "lines simulated"] {
        assert!(header.contains(col), "missing column {col:?}:\n{text}");
    }
    // Sizes counted by hand: 25 pages -> 25 hashed PTEs of 24 bytes; page blocks of 16:
    // 0x40, 0x41 and 0x7f00 (ASID 0), 0x1 (ASID 1) -> 4 clustered PTEs of 144 bytes.
    let row = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or_else(|| panic!("{name}:\n{text}"));
    let cells: Vec<&str> = row("hashed64").split_whitespace().collect();
    assert!(cells.windows(2).any(|w| w == ["600", "600"]), "formula and simulated 600 bytes: {cells:?}");
    let cells: Vec<&str> = row("clustered64").split_whitespace().collect();
    assert!(cells.windows(2).any(|w| w == ["576", "576"]), "formula and simulated 576 bytes: {cells:?}");
    assert!(row("x86-64").contains("Forward-mapped"));
}

#[test]
fn json_has_both_sides() {
    let (_dir, snap, h, c) = setup();
    let out = ok(run(&[
        "model",
        "--snapshot",
        s(&snap),
        "-c",
        s(&h),
        "-c",
        s(&c),
        "--ptes",
        "partial-subblock",
        "--json",
        "-",
    ]));
    let doc = parse_json(&out.stdout);
    let designs = doc["designs"].as_array().unwrap();
    assert_eq!(designs.len(), 2);
    let (hd, cd) = (&designs[0], &designs[1]);
    assert_eq!(hd["formula"]["table_bytes"].as_f64(), Some(600.0));
    assert_eq!(hd["simulated"]["table_bytes"].as_u64(), Some(600));
    assert_eq!(hd["formula"]["row"], "hashed");
    assert_eq!(hd["mapped_pages"], 25);
    // α = 25 / 4096; 1 + α/2 lines.
    assert_eq!(hd["formula"]["lines"].as_f64(), Some(1.0 + 25.0 / 4096.0 / 2.0));
    // Partial-subblock PTEs for all 4 active blocks: fss = 1, 24 bytes each.
    assert_eq!(cd["formula"]["row"], "clustered-superpage");
    assert_eq!(cd["formula"]["inputs"]["fss"].as_f64(), Some(1.0));
    assert_eq!(cd["formula"]["table_bytes"].as_f64(), Some(96.0));
    assert_eq!(cd["formula"]["bucket_bytes"], 8 * 4096);
    assert!(cd["simulated"]["table_bytes"].as_u64().is_some());
}

#[test]
fn generated_pages() {
    let (_dir, _snap, h, _c) = setup();
    let doc = parse_json(&ok(run(&["model", "--gen", "uniform:1000:3", "-c", s(&h), "--json", "-"])).stdout);
    let d = &doc["designs"][0];
    assert_eq!(d["mapped_pages"], 1000);
    assert_eq!(d["formula"]["table_bytes"].as_f64(), Some(24_000.0));
    assert_eq!(d["simulated"]["table_bytes"].as_u64(), Some(24_000));
}

#[test]
fn bad_input_exits_2_with_one_line() {
    let (dir, snap, h, _c) = setup();
    let missing = dir.path().join("missing.xsnap");
    let garbage = dir.path().join("garbage.xsnap");
    std::fs::write(&garbage, "not a snapshot\n").unwrap();
    for args in [
        vec!["model", "--snapshot", s(&missing), "-c", s(&h)],
        vec!["model", "--snapshot", s(&garbage), "-c", s(&h)],
        vec!["model", "--snapshot", s(&snap), "--preset", "no-such-preset"],
        vec!["model", "--snapshot", s(&snap), "-c", s(&h), "--ptes", "huge"],
        vec!["model", "--snapshot", s(&snap), "-c", s(&h), "--fss", "2"],
        vec!["model", "--snapshot", s(&snap)],
        vec!["model", "-c", s(&h)],
        vec!["model", "--gen", "zipf:10", "-c", s(&h)],
        vec!["model", "--snapshot", s(&snap), "-c", s(&h), "--bogus"],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: one line: {err}");
        assert!(err.starts_with("xlat: error: "), "{args:?}: {err}");
    }
}
