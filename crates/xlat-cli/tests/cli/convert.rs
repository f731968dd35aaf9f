//! `xlat convert`: format inference from content and name, compression suffixes, --from/--to,
//! lossless round trips, ChampSim.

use crate::common::*;
use std::path::Path;

const GZIP: &[u8] = &[0x1f, 0x8b];
const ZSTD: &[u8] = &[0x28, 0xb5, 0x2f, 0xfd];
const XZ: &[u8] = &[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00];
const LZ4: &[u8] = &[0x04, 0x22, 0x4d, 0x18];

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// `xlat convert args...`, which must succeed; returns its stderr summary line.
fn convert(args: &[&str]) -> String {
    let mut a = vec!["convert"];
    a.extend(args);
    let out = ok(run(&a));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// `xlat info trace --json - [--format f]`.
fn info(trace: &Path, format: Option<&str>) -> serde_json::Value {
    let mut a = vec!["info", s(trace), "--json", "-"];
    if let Some(f) = format {
        a.extend(["--format", f]);
    }
    parse_json(&ok(run(&a)).stdout)
}

/// The first `n` references of the lackey fixture (with its banner lines).
fn lackey_head(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut k = 0;
    for line in lackey_text().split(|&b| b == b'\n') {
        if k == n {
            break;
        }
        k += is_ref_line(line) as usize;
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    out
}

#[test]
fn round_trip_lackey_xtr_lackey_gz_gives_identical_counters() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = write(d, "fa64.toml", MINIMAL);
    let (xtr, gz, xtr2) = (d.join("t.xtr"), d.join("t.lackey.gz"), d.join("again.xtr"));

    let msg = convert(&[s(&lackey_fixture()), s(&xtr)]);
    assert!(msg.contains("from lackey to xtr"), "{msg}");
    assert!(read(&xtr).starts_with(ZSTD), "an .xtr file is zstd-compressed inside");
    let msg = convert(&[s(&xtr), s(&gz)]);
    assert!(msg.contains("from xtr to lackey"), "{msg}");
    let gz_bytes = read(&gz);
    assert!(gz_bytes.starts_with(GZIP), "a .gz name gives gzip");
    let text = ok(run_stdin(&["convert", "-", "-", "--to", "lackey"], &gz_bytes)).stdout;
    assert_eq!(count_lackey(&text), count_lackey(lackey_text()), "the lackey output holds every reference");
    // Back to xtr: the same bytes as the first conversion (nothing was lost on the way).
    convert(&[s(&gz), s(&xtr2)]);
    assert_eq!(read(&xtr2), read(&xtr), "lackey -> xtr -> lackey.gz -> xtr is lossless");

    let designs = ["-c", s(&cfg), "-p", "x86-64", "-p", "itanium2"];
    let report = |trace: &Path| {
        let mut a = vec!["run", "-t", s(trace)];
        a.extend(designs);
        run_json(&a)
    };
    let original = report(&lackey_fixture());
    check_report(&original);
    for t in [&xtr, &gz, &xtr2] {
        assert_eq!(counters(&report(t)), counters(&original), "{}", t.display());
    }
}

#[test]
fn output_compression_and_format_follow_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = write(d, "in.lackey", lackey_head(20_000));
    let base = info(&input, None);
    assert_eq!(u(&base, "/references"), 20_000);

    let plain = d.join("plain.lackey");
    convert(&[s(&input), s(&plain)]);
    let canonical = read(&plain);
    assert!(is_ref_line(canonical.split(|&b| b == b'\n').next().unwrap()), "lackey text");
    assert_eq!(count_lackey(&canonical), count_lackey(&read(&input)));

    let cases: &[(&str, &[u8])] = &[
        ("o.lackey.gz", GZIP),
        ("o.lackey.zst", ZSTD),
        ("o.lackey.xz", XZ),
        ("O.LACKEY.ZST", ZSTD),
        ("o.lackey.txt", b""),
        ("o.xtr", ZSTD),
        ("o.xtr.gz", GZIP),
        ("o.xtr.zst", ZSTD),
        ("o.xtr.xz", XZ),
        ("o.xtr.lz4", LZ4),
        ("o.lackey.lz4", LZ4),
    ];
    for (name, magic) in cases {
        let out = d.join(name);
        convert(&[s(&input), s(&out)]);
        let bytes = read(&out);
        assert!(bytes.starts_with(magic), "{name}: starts with {:02x?}", &bytes[..6.min(bytes.len())]);
        let v = info(&out, None);
        for k in ["/references", "/by_kind/ifetch", "/by_kind/load", "/by_kind/store", "/by_kind/modify"] {
            assert_eq!(u(&v, k), u(&base, k), "{name}: {k}");
        }
        // And back to plain lackey: the same text as the direct conversion.
        let back = d.join(format!("{name}.back.lackey"));
        convert(&[s(&out), s(&back)]);
        assert_eq!(read(&back), canonical, "{name} -> lackey");
    }

    for name in ["o.champsim", "o.champsim.xz", "o.champsimtrace.gz"] {
        let out = d.join(name);
        convert(&[s(&input), s(&out)]);
        let v = info(&out, None);
        assert!(u(&v, "/references") > 0, "{name}");
        if name == "o.champsim" {
            assert_eq!(read(&out).len() % 64, 0, "whole 64-byte records");
        } else if name.ends_with(".xz") {
            assert!(read(&out).starts_with(XZ), "{name}");
        } else {
            assert!(read(&out).starts_with(GZIP), "{name}");
        }
    }
}

#[test]
fn from_and_to_override_the_names() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let input = write(d, "in.lackey", lackey_head(5_000));
    let canonical = d.join("canonical.lackey");
    convert(&[s(&input), s(&canonical)]);

    // --to beats a name that says nothing.
    let dat = d.join("out.dat");
    let msg = convert(&[s(&input), s(&dat), "--to", "xtr"]);
    assert!(msg.contains("to xtr"), "{msg}");
    assert!(read(&dat).starts_with(ZSTD));
    // ... and the xtr content is recognised whatever the name.
    let back = d.join("back.txt");
    let msg = convert(&[s(&dat), s(&back), "--to", "lackey"]);
    assert!(msg.contains("from xtr to lackey"), "{msg}");
    assert_eq!(read(&back), read(&canonical));

    // Lackey content under an .xtr name: the content decides, and --from says the same.
    let misnamed = write(d, "misnamed.xtr", read(&input));
    for extra in [&[][..], &["--from", "lackey"][..]] {
        let out = d.join("from-misnamed.lackey");
        let mut a = vec![s(&misnamed), s(&out)];
        a.extend(extra);
        let msg = convert(&a);
        assert!(msg.contains("from lackey"), "{msg}");
        assert_eq!(read(&out), read(&canonical), "{extra:?}");
    }

    // --to beats a name that says something else.
    let odd = d.join("really-champsim.lackey");
    convert(&[s(&input), s(&odd), "--to", "champsim"]);
    assert_eq!(read(&odd).len() % 64, 0);
    let v = info(&odd, Some("champsim"));
    assert!(u(&v, "/references") > 0);

    // --from beats the content: lackey text read as xtr is an error, not a conversion.
    let out = d.join("never.lackey");
    let err = expect_error(&run(&["convert", s(&input), s(&out), "--from", "xtr"]), "--from xtr on lackey text");
    assert_mentions(&err, &["in.lackey", "XTR"]);
}

#[test]
fn champsim_traces_convert_and_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (bytes, [ifetch, loads, stores]) = small_champsim(600);
    let cs = write(d, "t.champsim", &bytes);
    let unnamed = write(d, "t.bin", &bytes);

    for (p, what) in [(&cs, "by name"), (&unnamed, "by content")] {
        let v = info(p, None);
        assert_eq!(u(&v, "/by_kind/ifetch"), ifetch, "{what}");
        assert_eq!(u(&v, "/by_kind/load"), loads, "{what}");
        assert_eq!(u(&v, "/by_kind/store"), stores, "{what}");
        assert_eq!(u(&v, "/by_kind/modify"), 0, "{what}");
        assert_eq!(u(&v, "/references"), ifetch + loads + stores, "{what}");
    }

    // Through xtr and through lackey and back: the same bytes.
    let (xtr, lackey) = (d.join("t.xtr"), d.join("t.lackey"));
    let msg = convert(&[s(&unnamed), s(&xtr)]);
    assert!(msg.contains("from champsim to xtr"), "{msg}");
    assert!(msg.contains(&format!("converted {} records", ifetch + loads + stores)), "{msg}");
    convert(&[s(&cs), s(&lackey)]);
    let text = read(&lackey);
    assert_eq!(count_lackey(&text), [ifetch, loads, stores, 0]);
    for (from, name) in [(&xtr, "back1.champsim"), (&lackey, "back2.champsim")] {
        let back = d.join(name);
        convert(&[s(from), s(&back)]);
        assert_eq!(read(&back), bytes, "champsim -> {} -> champsim", from.display());
    }
    let xz = d.join("t.champsim.xz");
    convert(&[s(&xtr), s(&xz)]);
    assert!(read(&xz).starts_with(XZ));

    let cfg = write(d, "fa64.toml", MINIMAL);
    let report = |t: &Path| run_json(&["run", "-c", s(&cfg), "-p", "x86-64", "-t", s(t)]);
    let base = report(&cs);
    check_report(&base);
    assert_eq!(st(&base, "/trace/format"), "champsim");
    assert_eq!(u(&base, "/trace/references"), ifetch + loads + stores);
    for t in [&unnamed, &xtr, &lackey, &xz] {
        assert_eq!(counters(&report(t)), counters(&base), "{}", t.display());
    }

    // lackey -> champsim is lossy (sizes, modifies) but must give a readable trace.
    let real = write(d, "real.lackey", lackey_head(10_000));
    let lossy = d.join("real.champsim");
    convert(&[s(&real), s(&lossy)]);
    assert_eq!(read(&lossy).len() % 64, 0);
    let v = report(&lossy);
    check_report(&v);
    assert!(u(&v, "/trace/references") >= 10_000 - count_lackey(&read(&real))[3]);
}

#[test]
fn convert_reads_stdin_and_writes_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let from_file = d.join("file.xtr");
    convert(&[s(&lackey_fixture()), s(&from_file)]);
    let from_stdin = d.join("stdin.xtr");
    ok(run_stdin(&["convert", "-", s(&from_stdin)], &read(&lackey_fixture())));
    assert_eq!(read(&from_stdin), read(&from_file), "stdin and file give the same xtr");

    let out = ok(run(&["convert", s(&demo_xtr()), "-", "--to", "lackey"]));
    assert!(out.stderr.is_empty(), "nothing but the trace when writing to stdout: {}", describe(&out));
    assert_eq!(count_lackey(&out.stdout), count_lackey(lackey_text()));
}
