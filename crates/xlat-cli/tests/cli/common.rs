//! Helpers shared by the end-to-end tests of the `xlat` binary.

use serde_json::{json, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The smallest config of `docs/configuration.md`, exactly as written there.
pub const MINIMAL: &str = r#"name = "fa64"
page_size = 4096
[[tlb]]
name = "L1"
entries = 64
ways = 64          # ways == entries: fully associative
policy = "lru"     # lru | fifo | random | nru | plru
[page_table]
kind = "radix"     # radix | linear | hashed | clustered
"#;

/// The presets the documentation promises.
pub const REQUIRED_PRESETS: &[&str] = &[
    "mips-r3000",
    "itanium2",
    "itanium2-linux",
    "itanium2-lvhpt",
    "itanium2-lvhpt-sharing",
    "pa-8000",
    "ultrasparc",
    "x86-64",
    "decstation-5000-240",
    "swanson98",
];

/// A file of the bundled `data/` directory.
pub fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(name)
}

/// The zstd-compressed valgrind lackey trace of `sort`.
pub fn lackey_fixture() -> PathBuf {
    data("sort-400.lackey.zst")
}

/// The same trace in xtr format.
pub fn demo_xtr() -> PathBuf {
    data("demo.xtr")
}

/// A path as a `&str` (temporary directories and the repository live at UTF-8 paths).
pub fn s(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The `xlat` binary with `args`; stdin is empty, backtraces are requested so that a leaked
/// backtrace would show.
pub fn xlat(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xlat"));
    c.args(args).env("RUST_BACKTRACE", "1").env_remove("RUST_LIB_BACKTRACE").stdin(Stdio::null());
    c
}

/// Runs `xlat args` to completion.
pub fn run(args: &[&str]) -> Output {
    xlat(args).output().expect("cannot start the xlat binary")
}

/// Runs `xlat args` under a 6 GiB limit on its address space (what a run that allocates
/// without bound meets first), and how long it took.
pub fn run_bounded(args: &[&str]) -> (Output, std::time::Duration) {
    use std::os::unix::process::CommandExt;
    let mut cmd = xlat(args);
    // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit { rlim_cur: 6 << 30, rlim_max: 6 << 30 };
            if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let start = std::time::Instant::now();
    let out = cmd.output().expect("cannot start the xlat binary");
    (out, start.elapsed())
}

/// Runs `xlat args` with `input` on standard input.
pub fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = xlat(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("cannot start the xlat binary");
    let mut stdin = child.stdin.take().expect("piped stdin");
    let data = input.to_vec();
    // A writer thread: xlat may stop reading early (error) or fill its stdout pipe meanwhile.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(&data);
    });
    let out = child.wait_with_output().expect("xlat did not finish");
    writer.join().expect("stdin writer");
    out
}

/// Exit status, stdout and stderr, for assertion messages.
pub fn describe(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stdout: String = stdout.chars().take(2000).collect();
    format!(
        "status {:?}\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Asserts that the command succeeded and returns its output.
pub fn ok(out: Output) -> Output {
    assert!(out.status.success(), "xlat failed: {}", describe(&out));
    out
}

/// Standard output as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("stdout is UTF-8")
}

/// Runs `xlat args --json -` and parses standard output.
pub fn run_json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--json", "-"]);
    parse_json(&ok(run(&all)).stdout)
}

/// Like [`run_json`] with `input` on standard input.
pub fn run_json_stdin(args: &[&str], input: &[u8]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--json", "-"]);
    parse_json(&ok(run_stdin(&all, input)).stdout)
}

/// Parses JSON bytes, with the text in the panic message if they are not JSON.
pub fn parse_json(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or_else(|e| {
        let text: String = String::from_utf8_lossy(bytes).chars().take(500).collect();
        panic!("not valid JSON ({e}): {text:?}")
    })
}

/// Reads and parses a JSON file.
pub fn read_json(path: &Path) -> Value {
    parse_json(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
}

/// A non-negative integer field (panics with the path if absent or not an integer).
pub fn u(v: &Value, pointer: &str) -> u64 {
    v.pointer(pointer).and_then(Value::as_u64).unwrap_or_else(|| panic!("no integer at {pointer} in {v:#}"))
}

/// A string field.
pub fn st<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or_else(|| panic!("no string at {pointer} in {v:#}"))
}

/// The parts of a report that depend only on the references simulated and the designs: not the
/// path, format, reader skip count or timing.
pub fn counters(v: &Value) -> Value {
    let t = &v["trace"];
    json!({
        "trace": {
            "references": t["references"],
            "lookups": t["lookups"],
            "by_kind": t["by_kind"],
            "events": t["events"],
            "lookup_page_size": t["lookup_page_size"],
            "stopped_at_max_refs": t["stopped_at_max_refs"],
        },
        "configs": v["configs"],
    })
}

/// The configs of a report by name.
pub fn config<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["configs"]
        .as_array()
        .expect("configs[]")
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no config named {name}"))
}

/// Checks the documented fields and invariants of a JSON report (`docs/output.md`).
pub fn check_report(v: &Value) {
    assert_eq!(v["complete"], true);
    let refs = u(v, "/trace/references");
    let lookups = u(v, "/trace/lookups");
    let by_kind: u64 = ["ifetch", "load", "store", "modify"].iter().map(|k| u(v, &format!("/trace/by_kind/{k}"))).sum();
    assert_eq!(by_kind, refs, "by_kind sums to references");
    assert!(lookups >= refs, "every reference is at least one lookup");
    assert!(v["trace"]["stopped_at_max_refs"].is_boolean());
    let configs = v["configs"].as_array().expect("configs[]");
    assert!(!configs.is_empty());
    for c in configs {
        let name = st(c, "/name");
        let tlbs = c["tlb"].as_array().unwrap_or_else(|| panic!("{name}: tlb[]"));
        assert!(!tlbs.is_empty(), "{name}: at least one TLB");
        for t in tlbs {
            let tn = st(t, "/name");
            assert_eq!(u(t, "/hits") + u(t, "/misses"), u(t, "/accesses"), "{name}/{tn}: hits + misses == accesses");
        }
        // Every lookup goes to exactly one level-1 structure of the reference's kind.
        let l1: u64 =
            tlbs.iter().filter(|t| t["level"] == 1 && t["serves"] != "page-table").map(|t| u(t, "/accesses")).sum();
        // Under the mach3 personality the kernel's own lookups come on top (docs/mach3.md).
        let kernel = c["kernel"]["tlb_lookups"].as_u64().unwrap_or(0);
        let data_l1 = tlbs.iter().any(|t| t["level"] == 1 && (t["serves"] == "unified" || t["serves"] == "data"));
        if data_l1 {
            assert_eq!(l1, u(c, "/lookups") + kernel, "{name}: level-1 accesses == lookups (+ the kernel's)");
        } else {
            // Data starts at level 2 behind a level-1 instruction TLB (a micro-ITLB): that level
            // sees the data lookups and the instruction lookups the micro-ITLB missed.
            let (itlb, next) = (
                tlbs.iter().find(|t| t["level"] == 1).unwrap(),
                tlbs.iter().find(|t| t["level"] == 2 && t["serves"] == "unified").unwrap(),
            );
            assert_eq!(u(itlb, "/accesses"), u(c, "/ifetch_lookups"), "{name}: the micro-ITLB sees every fetch");
            assert_eq!(
                u(next, "/accesses"),
                u(c, "/data_lookups") + u(itlb, "/misses"),
                "{name}: data lookups and micro-ITLB misses"
            );
        }
        assert_eq!(u(c, "/ifetch_lookups") + u(c, "/data_lookups"), u(c, "/lookups"), "{name}: lookups by kind");
        // A shared region moves objects to other offsets within a page (docs/output.md).
        let moved = c["layout"]["shared_objects"].as_u64().unwrap_or(0) > 0;
        if u(c, "/page_size") == u(v, "/trace/lookup_page_size") && !moved {
            // A store that copied its page on write looks it up again (docs/configuration.md,
            // `os.page_cache`): one lookup more per copy.
            let retried = c["os"]["cow_copies"].as_u64().expect("os.cow_copies");
            assert_eq!(u(c, "/lookups"), lookups + retried, "{name}: lookups == trace.lookups + os.cow_copies");
        }
        let depths: u64 =
            c["walks"]["by_depth"].as_array().expect("walks.by_depth").iter().map(|d| d.as_u64().unwrap()).sum();
        assert_eq!(depths, u(c, "/walks/count"), "{name}: walks.by_depth sums to walks.count");
        // walks.count == misses of the last level of each path.
        let path_tlbs: Vec<&Value> = tlbs.iter().filter(|t| t["serves"] != "page-table").collect();
        let last_misses: u64 = path_tlbs
            .iter()
            .filter(|t| {
                !path_tlbs.iter().any(|o| {
                    u(o, "/level") == u(t, "/level") + 1 && (o["serves"] == "unified" || o["serves"] == t["serves"])
                })
            })
            .map(|t| u(t, "/misses"))
            .sum();
        assert_eq!(u(c, "/walks/count"), last_misses, "{name}: walks.count == last-level misses");
        assert!(u(c, "/walks/memory_refs") >= u(c, "/walks/count"), "{name}: a walk reads memory");
        u(c, "/walks/cache_lines");
        assert!(u(c, "/page_faults") <= u(c, "/walks/count"), "{name}: a fault needs a walk");
        let kind = st(c, "/page_table/kind");
        assert!(
            ["radix", "linear", "hashed", "clustered", "vhpt-short", "vhpt-long"].contains(&kind),
            "{name}: page_table.kind {kind}"
        );
        u(c, "/page_table/bytes");
        u(c, "/cycles/total");
    }
}

/// The decompressed lackey fixture (decoded once per test binary).
pub fn lackey_text() -> &'static [u8] {
    static TEXT: OnceLock<Vec<u8>> = OnceLock::new();
    TEXT.get_or_init(|| {
        let f = std::fs::File::open(lackey_fixture()).expect("lackey fixture");
        zstd::stream::decode_all(f).expect("decompress the lackey fixture")
    })
}

/// References by kind (ifetch, load, store, modify) of lackey text, counted line by line.
pub fn count_lackey(text: &[u8]) -> [u64; 4] {
    let mut n = [0u64; 4];
    for line in text.split(|&b| b == b'\n') {
        if line.starts_with(b"I ") {
            n[0] += 1;
        } else if line.starts_with(b" L") {
            n[1] += 1;
        } else if line.starts_with(b" S") {
            n[2] += 1;
        } else if line.starts_with(b" M") {
            n[3] += 1;
        }
    }
    n
}

/// True for a lackey reference line.
pub fn is_ref_line(line: &[u8]) -> bool {
    line.starts_with(b"I ") || line.starts_with(b" L") || line.starts_with(b" S") || line.starts_with(b" M")
}

/// The address of a lackey reference line.
pub fn ref_addr(line: &[u8]) -> u64 {
    let text = std::str::from_utf8(line).expect("ASCII line");
    let hex = text[2..].trim_start().split(',').next().expect("address");
    u64::from_str_radix(hex, 16).expect("hex address")
}

/// A lackey trace of the first `n` references of the fixture whose addresses fit in 32 bits
/// (so that 32-bit designs such as mips-r3000 accept it), with the fixture's banner.
pub fn lackey_32bit(n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut kept = 0;
    for line in lackey_text().split(|&b| b == b'\n') {
        if kept == n {
            break;
        }
        if is_ref_line(line) {
            if ref_addr(line) >> 32 != 0 {
                continue;
            }
            kept += 1;
        }
        out.extend_from_slice(line);
        out.push(b'\n');
    }
    assert_eq!(kept, n, "the fixture has enough 32-bit references");
    out
}

/// The uncompressed (raw) form of the demo xtr trace.
pub fn raw_demo_xtr() -> Vec<u8> {
    let f = std::fs::File::open(demo_xtr()).expect("demo.xtr");
    zstd::stream::decode_all(f).expect("decompress demo.xtr")
}

/// One 64-byte ChampSim `input_instr` record.
pub fn champsim_record(ip: u64, loads: &[u64], stores: &[u64]) -> [u8; 64] {
    assert!(loads.len() <= 4 && stores.len() <= 2);
    let mut r = [0u8; 64];
    r[0..8].copy_from_slice(&ip.to_le_bytes());
    for (i, a) in stores.iter().enumerate() {
        r[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    for (i, a) in loads.iter().enumerate() {
        r[32 + 8 * i..40 + 8 * i].copy_from_slice(&a.to_le_bytes());
    }
    r
}

/// A deterministic ChampSim trace of `n` instructions; also returns (ifetches, loads, stores).
pub fn small_champsim(n: usize) -> (Vec<u8>, [u64; 3]) {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut bytes = Vec::with_capacity(64 * n);
    let mut counts = [0u64; 3];
    for i in 0..n {
        let ip = 0x40_0000 + 4 * i as u64 + (next() % 3);
        let nl = (next() % 5) as usize;
        let ns = (next() % 3) as usize;
        let addr = |r: u64| 0x1000_0000 + (r % (8 << 20)) / 8 * 8;
        let loads: Vec<u64> = (0..nl).map(|_| addr(next())).collect();
        let stores: Vec<u64> = (0..ns).map(|_| addr(next())).collect();
        bytes.extend_from_slice(&champsim_record(ip, &loads, &stores));
        counts[0] += 1;
        counts[1] += nl as u64;
        counts[2] += ns as u64;
    }
    (bytes, counts)
}

/// Writes `contents` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, contents: impl AsRef<[u8]>) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, contents).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    p
}

/// Asserts a clean failure: exit status exactly 2, nothing on standard output, and exactly one
/// line on standard error (`xlat: error: ...`, no panic, no backtrace). Returns that line.
pub fn expect_error(out: &Output, what: &str) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{what}: expected exit status 2; {}", describe(out));
    assert!(out.stdout.is_empty(), "{what}: something was printed on stdout; {}", describe(out));
    assert!(err.ends_with('\n') && err.matches('\n').count() == 1, "{what}: stderr is not exactly one line: {err:?}");
    for bad in ["panicked", "backtrace", "internal error", "RUST_BACKTRACE", "stack backtrace"] {
        assert!(!err.contains(bad), "{what}: stderr mentions {bad:?}: {err:?}");
    }
    assert!(err.starts_with("xlat: error: "), "{what}: unexpected stderr: {err:?}");
    err.trim_end().to_string()
}

/// Asserts that `msg` contains every one of `parts`.
pub fn assert_mentions(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "error message {msg:?} does not mention {p:?}");
    }
}

/// Asserts that no file was written at `path`.
pub fn assert_absent(path: &Path) {
    assert!(!path.exists(), "{} was written although the command failed", path.display());
}
