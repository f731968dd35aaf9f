//! Inputs and conditions that once crashed xlat, destroyed files or ran without bound, each with
//! its minimal input: now a one-line error with exit status 2, a quiet end, or a counted warning.

use crate::common::*;
use std::fs::File;
use std::process::Stdio;

/// Runs `xlat args` with standard output going to `stdout`.
fn run_to(args: &[&str], stdout: File) -> std::process::Output {
    xlat(args).stdout(stdout).stderr(Stdio::piped()).output().unwrap()
}

#[test]
fn a_full_disk_is_a_one_line_error_for_every_printing_command() {
    let demo = demo_xtr();
    for args in [
        vec!["info", s(&demo)],
        vec!["info", s(&demo), "--json", "-"],
        vec!["info", "--quick", s(&demo)],
        vec!["presets"],
        vec!["presets", "--show", "x86-64"],
        vec!["run", "-p", "x86-64", "-t", s(&demo)],
        vec!["run", "-p", "x86-64", "-t", s(&demo), "--csv", "-"],
        vec!["demo"],
        vec!["model", "--gen", "uniform:1000", "-p", "x86-64"],
        vec!["workloads", "list"],
    ] {
        let out = run_to(&args, File::options().write(true).open("/dev/full").unwrap());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.lines().count() == 1 && err.starts_with("xlat: error: standard output: cannot write"),
            "{args:?}: {err}"
        );
    }
}

#[test]
fn a_closed_pipe_ends_quietly() {
    let demo = demo_xtr();
    for args in [vec!["presets"], vec!["info", s(&demo)], vec!["run", "-p", "x86-64", "-t", s(&demo)], vec!["demo"]] {
        // The reader has gone before xlat writes a byte.
        let mut fds = [0i32; 2];
        // SAFETY: a fresh pipe; the read end is closed and the write end owned by `writer`.
        let writer = unsafe {
            assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
            libc::close(fds[0]);
            <File as std::os::fd::FromRawFd>::from_raw_fd(fds[1])
        };
        let out = xlat(&args).stdout(writer).stderr(Stdio::piped()).output().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            out.status.signal() == Some(13) || out.status.code() == Some(0),
            "{args:?}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stderr.is_empty(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
}

#[test]
fn special_files_are_written_in_place_and_inputs_never_overwritten() {
    use std::os::unix::fs::FileTypeExt;
    let dir = tempfile::tempdir().unwrap();
    let demo = demo_xtr();
    ok(run(&["convert", s(&demo), "/dev/null", "--to", "xtr"]));
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device(), "/dev/null is still a device");
    // A FIFO receives the whole output and stays a FIFO.
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let f2 = fifo.clone();
    let reader = std::thread::spawn(move || std::fs::read(&f2).unwrap());
    ok(run(&["convert", s(&demo), s(&fifo), "--to", "lackey"]));
    let text = reader.join().unwrap();
    assert_eq!(text.iter().filter(|&&b| b == b'\n').count(), 739_471, "one line per reference through the FIFO");
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // Reports never overwrite what the command reads.
    let t = dir.path().join("t.xtr");
    std::fs::copy(&demo, &t).unwrap();
    let spelt = format!("{}/../{}/t.xtr", dir.path().display(), dir.path().file_name().unwrap().to_string_lossy());
    for (flag, path) in [("--json", s(&t)), ("--csv", spelt.as_str())] {
        let e = expect_error(&run(&["run", "-p", "x86-64", "-t", s(&t), flag, path]), "report over the trace");
        assert_mentions(&e, &["cannot overwrite an input"]);
    }
    let e = expect_error(&run(&["info", s(&t), "--json", s(&t)]), "info over its trace");
    assert_mentions(&e, &["cannot overwrite an input"]);
    assert_eq!(std::fs::read(&t).unwrap(), std::fs::read(&demo).unwrap(), "the trace is intact");
}

#[test]
fn a_conversion_killed_by_a_signal_leaves_no_partial_file() {
    let dir = tempfile::tempdir().unwrap();
    let big = dir.path().join("big.xtr");
    ok(run(&["gen", "--refs", "20000000", "-o", s(&big)]));
    for sig in ["TERM", "INT"] {
        let out = dir.path().join(format!("out-{sig}.lackey.xz"));
        let mut child = xlat(&["convert", s(&big), s(&out)]).stderr(Stdio::null()).spawn().unwrap();
        let partial = dir.path().join(format!("out-{sig}.lackey.xz.xlat-partial.xz"));
        // Wait until the conversion is writing, then stop it.
        for _ in 0..200 {
            if partial.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(partial.exists(), "the conversion writes {}", partial.display());
        std::thread::sleep(std::time::Duration::from_millis(100));
        std::process::Command::new("kill").args(["-s", sig, &child.id().to_string()]).status().unwrap();
        let status = child.wait().unwrap();
        assert!(!status.success(), "{sig}: {status:?}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("big.xtr")], "{sig}: nothing but the input is left");
    }
}

fn snapshot_with_run(run: &str) -> String {
    format!("xlat-snapshot 1\npage_size 4096\ntaken_at now\nprocess 1 0 0 a\npages {run}\nend 1\n")
}

#[test]
fn huge_counts_in_a_snapshot_are_refused_before_they_allocate() {
    let dir = tempfile::tempdir().unwrap();
    for run_ in ["0+2000000000000000000", "0+10000000000"] {
        let snap = write(dir.path(), "huge.xsnap", snapshot_with_run(run_));
        for args in
            [vec!["run", "--snapshot", s(&snap), "-p", "x86-64"], vec!["model", "--snapshot", s(&snap), "-p", "x86-64"]]
        {
            let e = expect_error(&run(&args), run_);
            assert_mentions(&e, &["huge.xsnap: line 5", "resident pages"]);
        }
    }
}

#[test]
fn a_trace_given_as_a_snapshot_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let lackey = write(dir.path(), "t.lackey", lackey_text());
    for (file, what) in [
        (demo_xtr(), "an xtr trace, zstd-compressed"),
        (data("sort-400.lackey.zst"), "a lackey trace, zstd-compressed"),
        (lackey, "a lackey trace"),
    ] {
        let e = expect_error(&run(&["run", "--snapshot", s(&file), "-p", "x86-64"]), what);
        assert_mentions(&e, &["not an xlat snapshot", what, "--trace"]);
    }
}

#[test]
fn model_refuses_work_that_would_grow_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    // Chains of 244 PTEs: quadratic to build and walk.
    let e = expect_error(&run(&["model", "--gen", "uniform:1000000", "-p", "pa-8000"]), "long chains");
    assert_mentions(&e, &["page_table.buckets", "244", "at least 15625"]);
    // A million sparse pages: a 4.8 GiB radix table.
    let e = expect_error(&run(&["model", "--gen", "uniform:1000000", "-p", "x86-64"]), "huge radix table");
    assert_mentions(&e, &["GiB"]);
    // More pages than the design's memory, as `run --snapshot` says.
    let snap = write(dir.path(), "big.xsnap", snapshot_with_run("0+2000000"));
    let small = write(dir.path(), "small.toml", format!("{MINIMAL}[os]\nmemory_bytes = 1048576\n"));
    let e = expect_error(&run(&["model", "--snapshot", s(&snap), "-c", s(&small)]), "memory");
    assert_mentions(&e, &["os.memory_bytes", "physical memory exhausted"]);
    // Below the bounds the same commands run.
    ok(run(&["model", "--gen", "uniform:100000", "-p", "pa-8000"]));
}

#[test]
fn accesses_past_the_top_of_the_address_space_are_not_silently_clipped() {
    let dir = tempfile::tempdir().unwrap();
    // In any format, such an access is simulated up to the last page, counted and said.
    let lackey = write(dir.path(), "top.lackey", "I  0400d7d4,8\n L ffffffffffff0000,4294967295\n");
    let out = ok(run(&["run", "-p", "itanium2", "-t", s(&lackey), "--json", "-"]));
    assert_eq!(u(&parse_json(&out.stdout), "/trace/clipped_accesses"), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("top.lackey: 1 access run past the top of the 64-bit address space"), "{err}");
    let xtr = dir.path().join("top.xtr");
    let records = [
        xlat::trace::Record::Access { kind: xlat::trace::Kind::Load, size: 8, addr: 0x1000 },
        xlat::trace::Record::Access { kind: xlat::trace::Kind::Load, size: u32::MAX, addr: u64::MAX - 0xffff },
    ];
    let mut w = xlat::trace::open::create_writer(s(&xtr), None).unwrap();
    w.write(&records).unwrap();
    w.finish().unwrap();
    let out = ok(run(&["run", "-p", "itanium2", "-t", s(&xtr), "--json", "-"]));
    let v = parse_json(&out.stdout);
    assert_eq!(u(&v, "/trace/clipped_accesses"), 1);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning") && err.contains("1 access run past the top"), "{err}");
}

#[test]
fn input_that_is_not_lackey_is_not_an_empty_trace() {
    let dir = tempfile::tempdir().unwrap();
    // Deterministic binary junk, with newlines so that it reads as "lines".
    let junk: Vec<u8> = (0u32..4000).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let garbage = write(dir.path(), "garbage.lackey", &junk);
    let e = expect_error(&run(&["convert", s(&garbage), s(&dir.path().join("g.xtr"))]), "binary as lackey");
    assert_mentions(&e, &["garbage.lackey", "not a lackey trace"]);
    assert_absent(&dir.path().join("g.xtr"));
    // Binary bytes where a reference is expected are named, not dumped.
    let bin = write(dir.path(), "b.lackey", b"I  \x01\x02\xfe\xffzz\n");
    let e = expect_error(&run(&["info", s(&bin), "--format", "lackey"]), "binary reference line");
    assert_mentions(&e, &["b.lackey: line 1", "binary data"]);
    assert!(!e.contains("\\x"), "no escaped bytes: {e}");
}

#[test]
fn two_complete_subblock_levels_with_different_blocks_simulate() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = write(
        dir.path(),
        "cs.toml",
        "name = \"cs\"\n[[tlb]]\nname = \"L1\"\nentries = 16\nformat = \"complete-subblock\"\nsubblock_factor = 16\n\
         prefetch = true\n[[tlb]]\nname = \"L2\"\nlevel = 2\nentries = 64\nformat = \"complete-subblock\"\n\
         subblock_factor = 64\nprefetch = true\n[page_table]\nkind = \"clustered\"\n",
    );
    let one = write(dir.path(), "one.lackey", "I  0400d7d4,8\n");
    let v = run_json(&["run", "-c", s(&cfg), "-t", s(&one)]);
    assert_eq!(u(&v, "/configs/0/walks/count"), 1);
}

#[test]
fn a_config_error_without_a_place_names_its_line() {
    let dir = tempfile::tempdir().unwrap();
    let deep = format!("{MINIMAL}[{}]\nx = 1\n", vec!["a"; 300].join("."));
    let cfg = write(dir.path(), "deep.toml", &deep);
    let e = expect_error(&run(&["run", "-c", s(&cfg), "-t", s(&demo_xtr())]), "deep header");
    let line = MINIMAL.lines().count() + 1;
    assert_mentions(&e, &[&format!("deep.toml: line {line}:")]);
}

fn preset_text(name: &str) -> String {
    std::fs::read_to_string(format!("{}/../../configs/{name}.toml", env!("CARGO_MANIFEST_DIR"))).unwrap()
}

/// Sizes and costs past their bounds (docs/configuration.md, "Bounds") are one-line errors
/// naming the key, before anything large is allocated, in a run beside a healthy design.
#[test]
fn sizes_and_costs_past_their_bounds_are_refused_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo_xtr();
    // The long-VHPT preset with the OS table left at 48 bits: the itanium-linux layout's
    // regions need 64.
    let lvhpt = preset_text("itanium2-lvhpt");
    let (head, tail) = lvhpt.split_once("\n[page_table.os]").unwrap();
    let narrow_os = format!("{head}\n[page_table.os]{}", tail.replacen("va_bits = 64", "", 1));
    let cases: Vec<(String, &str)> = vec![
        (narrow_os, "page_table.os.va_bits: layout.kind = \"itanium-linux\""),
        (format!("{}\n[stlb]\nentries = 1073741824\n", preset_text("mips-r3000")), "stlb.entries"),
        ("name = \"h\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[page_table]\nkind = \"hashed\"\nbuckets = 1073741824\n".into(), "page_table.buckets"),
        ("name = \"h\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[page_table]\nkind = \"hashed\"\nbuckets = 4294967296\n".into(), "page_table.buckets"),
        ("name = \"c\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[time]\ncpi = 1e300\n".into(), "time.cpi"),
        (preset_text("decstation-5000-240").replace("[memory]\nlatency = ", "[memory]\nlatency = 9007199254740992 # "), "memory.latency"),
        ("name = \"f\"\n[[tlb]]\nname = \"L1\"\nentries = 64\n[cost]\npage_fault_cycles = 100000000000000000\n".into(), "cost.page_fault_cycles"),
    ];
    for (i, (text, key)) in cases.iter().enumerate() {
        let f = write(dir.path(), &format!("c{i}.toml"), text);
        let (out, took) = run_bounded(&["run", "--config", s(&f), "--preset", "x86-64", "--trace", s(&demo)]);
        let err = expect_error(&out, key);
        // The file, the line of the key (or of its table) when the file writes it, the key.
        let at = err.split_once(&format!("{}: ", f.display())).map(|(_, rest)| rest).unwrap_or("");
        let at = match at.strip_prefix("line ").and_then(|r| r.split_once(": ")) {
            Some((n, rest)) if n.bytes().all(|b| b.is_ascii_digit()) => rest,
            _ => at,
        };
        assert!(at.starts_with(key), "{key}: {err}");
        // Refused at validation: nothing near the time of a run with the big table.
        assert!(took.as_secs() < 20, "{key}: {took:?}");
    }
}

/// A design at every size bound at once (TLB entries and cache lines at their design totals, a
/// long VHPT of 2^26 entries over a hashed table of 2^24 buckets, 2^32 frames) and every cost at
/// 2^32 builds and runs the bundled trace in a 6 GiB address space, its totals whole.
#[test]
fn the_largest_accepted_design_runs_in_six_gib() {
    let dir = tempfile::tempdir().unwrap();
    let text = "name = \"largest\"\n\
        [[tlb]]\nname = \"L1\"\nentries = 16777216\nways = 4\nlatency = 4294967296\n\
        [[tlb]]\nname = \"L2\"\nentries = 16777200\nways = 8\nlevel = 2\nlatency = 4294967296\n\
        [page_table]\nkind = \"vhpt-long\"\nvhpt_entries = 67108864\n\
        [page_table.os]\nkind = \"hashed\"\nbuckets = 16777216\n\
        [[cache]]\nname = \"L1\"\nsize = 1073741824\nline = 64\nways = 8\nlatency = 4294967296\n\
        [[cache]]\nname = \"L2\"\nsize = 1073741824\nline = 64\nways = 16\nlevel = 2\n\
        [memory]\nlatency = 4294967296\n[time]\ncpi = 1000\n\
        [cost]\npage_fault_cycles = 4294967296\ntrap_cycles = 4294967296\nwalker_cycles = 4294967296\n\
        [os]\nmemory_bytes = 17592186044416\n[stlb]\nentries = 16\nways = 1\n";
    let f = write(dir.path(), "largest.toml", text);
    let json = dir.path().join("out.json");
    let (out, _) = run_bounded(&["run", "--config", s(&f), "--trace", s(&demo_xtr()), "--json", s(&json)]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let v = read_json(&json);
    check_report(&v);
    let c = &v["configs"][0];
    let t = &c["time"];
    for part in ["base", "icache", "dcache", "translation", "faults"] {
        assert!(u(t, "/cycles") >= u(t, &format!("/breakdown/{part}")), "time.cycles below {part}");
    }
    assert!(t["translation_share"].as_f64().unwrap() <= 1.0);
    for part in ["tlb", "walk_memory", "refill_overhead", "page_fault"] {
        assert!(u(c, "/cycles/total") >= u(c, &format!("/cycles/{part}")), "cycles.total below {part}");
    }
}
