//! `xlat snapshot` on live processes, checked against /proc read independently here, and
//! `xlat run --snapshot` checked against talluri95's Table 2 size formulas.

use crate::common::*;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// One process of a snapshot file, parsed here without the library.
#[derive(Debug, Default)]
struct Proc {
    pid: u32,
    ppid: u32,
    rss_pages: u64,
    regions: Vec<(u64, u64, String, String)>,
    pages: BTreeSet<u64>,
}

/// A minimal reader of the documented format (`docs/snapshot-format.md`).
fn parse_snapshot(path: &Path) -> (String, Vec<Proc>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("xlat-snapshot 1"));
    let (mut taken_at, mut procs, mut ended) = (String::new(), Vec::<Proc>::new(), false);
    for l in lines {
        let w: Vec<&str> = l.split(' ').collect();
        match w[0] {
            "page_size" => assert_eq!(w[1], "4096"),
            "taken_at" => taken_at = w[1].to_string(),
            "process" => procs.push(Proc {
                pid: w[1].parse().unwrap(),
                ppid: w[2].parse().unwrap(),
                rss_pages: w[3].parse().unwrap(),
                ..Proc::default()
            }),
            "region" => procs.last_mut().unwrap().regions.push((
                u64::from_str_radix(w[1], 16).unwrap(),
                u64::from_str_radix(w[2], 16).unwrap(),
                w[3].to_string(),
                w[5..].join(" "),
            )),
            "pages" => {
                for t in &w[1..] {
                    let (s, n) = t.split_once('+').unwrap();
                    let s = u64::from_str_radix(s, 16).unwrap();
                    procs.last_mut().unwrap().pages.extend(s..s + n.parse::<u64>().unwrap());
                }
            }
            "end" => {
                assert_eq!(w[1].parse::<usize>().unwrap(), procs.len());
                ended = true;
            }
            other => panic!("unexpected line kind {other:?}"),
        }
    }
    assert!(ended, "the file ends with its 'end' line");
    (taken_at, procs)
}

/// The regions and present-or-swapped pages of a live process, read from /proc here.
fn read_proc(pid: u32) -> (Vec<(u64, u64, String)>, BTreeSet<u64>) {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let pagemap = std::fs::File::open(format!("/proc/{pid}/pagemap")).unwrap();
    let (mut regions, mut pages) = (Vec::new(), BTreeSet::new());
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (a, b) = f[0].split_once('-').unwrap();
        let (start, end) = (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap());
        regions.push((start, end, f[1].to_string()));
        if f.get(5) == Some(&"[vsyscall]") {
            continue;
        }
        for vpn in start / 4096..end / 4096 {
            let mut e = [0u8; 8];
            pagemap.read_exact_at(&mut e, vpn * 8).unwrap();
            if u64::from_le_bytes(e) >> 62 != 0 {
                pages.insert(vpn);
            }
        }
    }
    (regions, pages)
}

/// Kills a child process when dropped (a failing test leaves no process behind).
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `prog args` and waits until it is idle in its final sleep.
fn start_idle(prog: &str, args: &[&str]) -> Reaped {
    let child = Command::new(prog).args(args).stdin(Stdio::null()).spawn().expect("start the test process");
    std::thread::sleep(Duration::from_millis(300));
    Reaped(child)
}

/// Set in the environment of this test binary when it runs as the helper process below.
const HELPER_ENV: &str = "XLAT_SNAPSHOT_TEST_HELPER";

/// The helper process: this test binary run again, with only [`helper_holds_50mb`] selected.
fn helper_command() -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary's path");
    [s(&exe), "--exact", "snapshot::helper_holds_50mb", "--ignored", "--test-threads=1", "--quiet"]
        .iter()
        .map(|a| a.to_string())
        .collect()
}

/// Not a test: the process `xlat snapshot` watches. Allocates a 50 MB zeroed buffer (fresh
/// pages, not resident until written), writes one byte in each of its 12800 pages and sleeps.
#[test]
#[ignore = "helper process of peak_snapshot_of_a_command_holds_its_50mb_buffer"]
fn helper_holds_50mb() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    let mut buf = vec![0u8; 50 << 20];
    for i in (0..buf.len()).step_by(4096) {
        buf[i] = 1;
    }
    std::hint::black_box(&mut buf);
    std::thread::sleep(Duration::from_secs(2));
    std::hint::black_box(&buf);
}

#[test]
fn peak_snapshot_of_a_command_holds_its_50mb_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("py.xsnap");
    let mut args = vec!["snapshot", "-o", s(&file), "--"];
    let helper = helper_command();
    args.extend(helper.iter().map(String::as_str));
    let child =
        xlat(&args).env(HELPER_ENV, "1").stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start xlat");
    let xlat_pid = child.id();
    let out = ok(child.wait_with_output().expect("xlat finishes"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("exited with status 0"), "the command's exit status is reported: {err}");
    let (taken_at, procs) = parse_snapshot(&file);
    assert_eq!(taken_at, "peak");
    assert_eq!(procs.len(), 1, "the helper runs no children");
    let p = &procs[0];
    assert_eq!(p.ppid, xlat_pid, "the command is xlat's child");
    let n = p.pages.len() as u64;
    assert!(n >= 12800, "the 50 MB buffer's 12800 touched pages are resident: {n}");
    // The page set and the kernel's resident size at that moment agree closely.
    let diff = n.abs_diff(p.rss_pages);
    assert!(diff * 20 <= p.rss_pages, "resident pages {n} vs VmRSS {} pages", p.rss_pages);
    // One anonymous region of at least 50 MB holds at least 12800 resident pages.
    let in_buffer = p
        .regions
        .iter()
        .filter(|r| r.1 - r.0 >= 50 << 20)
        .map(|r| p.pages.range(r.0 / 4096..r.1 / 4096).count())
        .max()
        .unwrap_or(0);
    assert!(in_buffer >= 12800, "resident pages in the buffer's region: {in_buffer}");
    // Every resident page lies in a mapped region.
    for &v in &p.pages {
        assert!(p.regions.iter().any(|r| r.0 / 4096 <= v && v < r.1.div_ceil(4096)), "page {v:#x} outside regions");
    }
}

#[test]
fn exit_status_of_a_failing_command_and_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("fail.xsnap");
    let out = ok(run(&["snapshot", "--at", "exit", "-o", s(&file), "--", "sh", "-c", "sleep 0.3; exit 3"]));
    assert!(String::from_utf8_lossy(&out.stderr).contains("exited with status 3"), "{}", describe(&out));
    let (taken_at, procs) = parse_snapshot(&file);
    assert_eq!(taken_at, "exit");
    assert!(!procs[0].pages.is_empty());
}

#[test]
fn pid_snapshot_matches_proc_exactly() {
    let sleeper = start_idle("sleep", &["30"]);
    let pid = sleeper.0.id();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("sleep.xsnap");
    ok(run(&["snapshot", "--pid", &pid.to_string(), "-o", s(&file)]));
    let (want_regions, want_pages) = read_proc(pid);
    let (taken_at, procs) = parse_snapshot(&file);
    assert_eq!(taken_at, "now");
    assert_eq!(procs.len(), 1);
    let p = &procs[0];
    assert_eq!((p.pid, p.ppid), (pid, std::process::id()));
    let got_regions: Vec<(u64, u64, String)> = p.regions.iter().map(|r| (r.0, r.1, r.2.clone())).collect();
    assert_eq!(got_regions, want_regions);
    assert!(want_pages.len() > 10, "sleep has resident pages");
    assert_eq!(p.pages, want_pages, "the snapshot's pages are exactly the present or swapped pages of pagemap");
}

#[test]
fn pid_snapshot_covers_the_process_tree() {
    let shell = start_idle("sh", &["-c", "sleep 30 & sleep 30 & wait"]);
    let pid = shell.0.id();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tree.xsnap");
    ok(run(&["snapshot", "--pid", &pid.to_string(), "-o", s(&file)]));
    let (_, procs) = parse_snapshot(&file);
    assert_eq!(procs.len(), 3, "the shell and its two sleeps");
    assert_eq!(procs[0].pid, pid);
    for c in &procs[1..] {
        assert_eq!(c.ppid, pid);
        assert!(!c.pages.is_empty());
        // Each child is idle too: its pages are exactly what /proc shows.
        assert_eq!(c.pages, read_proc(c.pid).1);
    }
    // Kill the sleeps with their shell.
    for c in &procs[1..] {
        let _ = Command::new("kill").arg(c.pid.to_string()).status();
    }
}

/// A deterministic page set: a dense run, a sparse scatter and pages near the top of user space.
fn page_set(seed: u64) -> BTreeSet<u64> {
    let mut x = seed | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut s: BTreeSet<u64> = (0x400..0x400 + 3000).collect();
    for _ in 0..1500 {
        s.insert(0x5500_0000 + next() % 200_000);
    }
    for _ in 0..200 {
        s.insert((1 << 35) - 1 - next() % 5000);
    }
    s
}

/// Writes the page sets as a snapshot file by hand: bare VPNs and runs mixed.
fn handmade(procs: &[BTreeSet<u64>]) -> String {
    let mut t = String::from("xlat-snapshot 1\n# handmade\npage_size 4096\ntaken_at now\n");
    for (i, pages) in procs.iter().enumerate() {
        t += &format!("process {} 1 {} test-{i}\nregion 400000 800000000 rw-p 0\n", 100 + i, pages.len());
        let v: Vec<u64> = pages.iter().copied().collect();
        let mut j = 0;
        let mut line = Vec::new();
        while j < v.len() {
            let mut k = j;
            while k + 1 < v.len() && v[k + 1] == v[k] + 1 {
                k += 1;
            }
            line.push(if k == j { format!("{:x}", v[j]) } else { format!("{:x}+{}", v[j], k - j + 1) });
            if line.len() == 7 {
                t += &format!("pages {}\n", line.join(" "));
                line.clear();
            }
            j = k + 1;
        }
        if !line.is_empty() {
            t += &format!("pages {}\n", line.join(" "));
        }
    }
    t + &format!("end {}\n", procs.len())
}

#[test]
fn run_snapshot_sizes_follow_table_2() {
    let procs = [page_set(7), page_set(99)];
    let dir = tempfile::tempdir().unwrap();
    let file = write(dir.path(), "hand.xsnap", handmade(&procs));
    let cfg = |kind: &str| {
        write(
            dir.path(),
            &format!("{kind}.toml"),
            MINIMAL.replace("fa64", kind).replace("\"radix\"", &format!("\"{kind}\"")),
        )
    };
    let (r, h, c) = (cfg("radix"), cfg("hashed"), cfg("clustered"));
    let v = run_json(&["run", "--snapshot", s(&file), "-c", s(&r), "-c", s(&h), "-c", s(&c)]);

    let total: u64 = procs.iter().map(|p| p.len() as u64).sum();
    assert_eq!(u(&v, "/snapshot/resident_pages"), total);
    assert_eq!(v["snapshot"]["processes"].as_array().unwrap().len(), 2);
    assert_eq!(u(&v, "/snapshot/processes/1/resident_pages"), procs[1].len() as u64);

    // Hashed: one 24-byte PTE per page.
    let hashed = config(&v, "hashed");
    assert_eq!(st(hashed, "/page_table/kind"), "hashed");
    assert_eq!(u(hashed, "/page_table/bytes"), 24 * total);
    assert_eq!(u(hashed, "/page_table/objects"), total);
    assert_eq!(u(hashed, "/page_table/bucket_bytes"), 4096 * 8);

    // Clustered: one (8s + 16)-byte PTE per distinct 16-page block of each process.
    let blocks: u64 = procs.iter().map(|p| p.iter().map(|v| v / 16).collect::<BTreeSet<_>>().len() as u64).sum();
    let clustered = config(&v, "clustered");
    assert_eq!(u(clustered, "/page_table/bytes"), (8 * 16 + 16) * blocks);
    assert_eq!(u(clustered, "/page_table/objects"), blocks);

    // Radix: a 4 KB node per distinct prefix at each of the 4 levels of each process's tree.
    let nodes: u64 = procs
        .iter()
        .map(|p| (1..=4).map(|l| p.iter().map(|v| v >> (9 * l)).collect::<BTreeSet<_>>().len() as u64).sum::<u64>())
        .sum();
    let radix = config(&v, "radix");
    assert_eq!(u(radix, "/page_table/bytes"), 4096 * nodes);
    assert_eq!(u(radix, "/page_table/objects"), nodes);
    assert_eq!(u(radix, "/page_table/bucket_bytes"), 0);
    // Every walk of a 4-level tree reads one entry per level.
    assert_eq!(v.pointer("/configs/0/walk/refs_per_page").and_then(|x| x.as_f64()), Some(4.0));
    assert_eq!(radix["walk"]["lines_per_page"].as_f64(), Some(4.0));
    assert_eq!(u(radix, "/walk/walks"), total);
    let hashed_refs = hashed["walk"]["refs_per_page"].as_f64().unwrap();
    assert!(hashed_refs >= 1.0, "a hashed walk reads at least one PTE: {hashed_refs}");

    // The text table shows every design side by side.
    let out = stdout(&ok(run(&["run", "--snapshot", s(&file), "-c", s(&r), "-c", s(&h), "-c", s(&c)])));
    let bytes_row = out.lines().find(|l| l.starts_with("page_table.bytes")).expect("a page_table.bytes row");
    for want in [4096 * nodes, 24 * total, 144 * blocks] {
        assert!(bytes_row.contains(&want.to_string()), "{bytes_row}");
    }
}

#[test]
fn run_snapshot_errors_are_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.xsnap", handmade(&[page_set(3)]));
    // A 32-bit design cannot hold pages near 2^47.
    let e = expect_error(&run(&["run", "--snapshot", s(&good), "--preset", "mips-r3000"]), "va_bits");
    assert_mentions(&e, &["config 'mips-r3000'", "32-bit", "page_table.va_bits", "process 100"]);
    // A file cut short names the file and the line after its last.
    let text = handmade(&[page_set(3)]);
    let cut = &text[..text.rfind("end").unwrap()];
    let lines = cut.lines().count();
    let bad = write(dir.path(), "cut.xsnap", cut);
    let e = expect_error(&run(&["run", "--snapshot", s(&bad), "--preset", "x86-64"]), "truncated");
    assert_mentions(&e, &[s(&bad), &format!("line {}", lines + 1), "truncated"]);
    let bad = write(dir.path(), "v2.xsnap", "xlat-snapshot 2\n");
    let e = expect_error(&run(&["run", "--snapshot", s(&bad), "--preset", "x86-64"]), "version");
    assert_mentions(&e, &["v2.xsnap: line 1", "version 2"]);
    let bad = write(dir.path(), "junk.xsnap", text.replace("pages 400+3000", "pages 400+x"));
    let e = expect_error(&run(&["run", "--snapshot", s(&bad), "--preset", "x86-64"]), "malformed");
    assert_mentions(&e, &["junk.xsnap: line 7", "400+x"]);
    let e = expect_error(&run(&["run", "--snapshot", s(&good), "--trace", "t.xtr", "--preset", "x86-64"]), "both");
    assert_mentions(&e, &["--snapshot", "--trace"]);
    let e =
        expect_error(&run(&["run", "--snapshot", s(&dir.path().join("none.xsnap")), "--preset", "x86-64"]), "missing");
    assert_mentions(&e, &["none.xsnap"]);
    let e = expect_error(&run(&["snapshot", "-o", s(&dir.path().join("x")), "--", "/nonexistent/prog"]), "spawn");
    assert_mentions(&e, &["/nonexistent/prog"]);
    assert_absent(&dir.path().join("x"));
    let e = expect_error(&run(&["snapshot", "--pid", "4294967", "-o", s(&dir.path().join("y"))]), "no pid");
    assert_mentions(&e, &["process 4294967"]);
    assert_absent(&dir.path().join("y"));
}

/// With `--snapshot` as with a trace, a design that cannot hold the pages fails alone: the others
/// are reported as when run without it, and the command exits with status 2.
#[test]
fn run_snapshot_reports_the_designs_that_did_not_fail() {
    let dir = tempfile::tempdir().unwrap();
    let good = write(dir.path(), "good.xsnap", handmade(&[page_set(3)]));
    let alone = parse_json(&ok(run(&["run", "--snapshot", s(&good), "-p", "x86-64", "--json", "-"])).stdout);
    let json = dir.path().join("o.json");
    let out = run(&["run", "--snapshot", s(&good), "-p", "mips-r3000", "-p", "x86-64", "--json", s(&json)]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.starts_with("xlat: error: 1 of 2 designs failed") && err.lines().count() == 1, "{err}");
    assert_mentions(&err, &["good.xsnap", "mips-r3000", "page_table.va_bits"]);
    let table = stdout(&out);
    assert!(table.lines().any(|l| l.starts_with("FAILED ") && l.contains("mips-r3000")), "{table}");
    let v = read_json(&json);
    assert_eq!(v["configs"], alone["configs"], "x86-64 as when run alone");
    assert!(v["failed"][0].as_str().unwrap().contains("mips-r3000"), "{v}");
}
