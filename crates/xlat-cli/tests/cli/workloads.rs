//! The workload suite: the manifest, the input generators, and `xlat workloads build|list` on
//! two small workloads (traced with QEMU; `scripts/test.sh` installs what they need).

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use xlat::workloads::{self, Manifest, Size, KINDS};

fn manifest_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../workloads/manifest.toml")
}

fn manifest() -> Manifest {
    Manifest::load(&manifest_path()).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn manifest_has_at_least_ten_workloads_with_both_sizes() {
    let m = manifest();
    assert!(m.workload.len() >= 10, "{} workloads", m.workload.len());
    for w in &m.workload {
        assert!(w.small.n >= 1 && w.full.n > w.small.n, "{}: small {} full {}", w.name, w.small.n, w.full.n);
        assert!(!w.description.is_empty() && !w.package.is_empty(), "{}", w.name);
        // A generated input, or (the suite's own programs) the size as a parameter.
        let reads = if w.setup.kind == "none" { "{n}" } else { "{input}" };
        assert!(w.command.iter().any(|a| a.contains(reads)), "{}: the command never reads {reads}", w.name);
    }
    // Multi-process workloads are traced with their children, with QEMU.
    for name in ["pipeline", "make", "gcc"] {
        let w = m.workload.iter().find(|w| w.name == name).unwrap_or_else(|| panic!("no {name}"));
        assert!(w.backend == "qemu" && w.children, "{name}");
    }
    // The hash depends on the size.
    let w = &m.workload[0];
    assert_ne!(w.hash(Size::Small), w.hash(Size::Full));
}

#[test]
fn manifest_errors_name_the_file_and_the_key() {
    let bad = "[[workload]]\nname = \"x\"\ndescription = \"d\"\npackage = \"p\"\ncommand = [\"true\"]\n\
               setup = { kind = \"text\" }\nsmall = { n = 1 }\nfull = { n = 2 }\ncolour = 3\n";
    let e = Manifest::parse(bad, "m.toml").unwrap_err().to_string();
    assert!(e.contains("m.toml") && e.contains("colour"), "{e}");
    let bad_kind = bad.replace("colour = 3\n", "").replace("\"text\"", "\"poetry\"");
    let e = Manifest::parse(&bad_kind, "m.toml").unwrap_err().to_string();
    assert!(e.contains("m.toml") && e.contains("setup.kind") && e.contains("poetry"), "{e}");
}

#[test]
fn generators_are_deterministic() {
    for kind in KINDS.iter().filter(|&&k| k != "none") {
        let a = workloads::generate(kind, 7, 20);
        assert!(!a.is_empty() && a.iter().all(|(_, b)| !b.is_empty()), "{kind}");
        assert_eq!(a, workloads::generate(kind, 7, 20), "{kind}: two runs differ");
        assert_ne!(a, workloads::generate(kind, 8, 20), "{kind}: the seed changes nothing");
    }
    // Sizes: lines of text, KiB of bytes.
    let text = workloads::generate("text", 1, 100);
    assert_eq!(text[0].1.iter().filter(|&&b| b == b'\n').count(), 100);
    assert_eq!(workloads::generate("binary", 1, 3)[0].1.len(), 3 * 1024);
    assert!(workloads::generate("none", 1, 3).is_empty(), "no input for the suite's own programs");
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

fn succeeds(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(out.status.success(), "{cmd:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn generated_inputs_are_valid() {
    let d = tempfile::tempdir().unwrap();
    let c = write(d.path(), "gen.c", &workloads::generate("c_source", 3, 60)[0].1);
    succeeds(Command::new("cc").args(["-fsyntax-only", "-Wall", "-Werror", "-Wno-unused-variable"]).arg(&c));
    let mk = d.path().join("make.d");
    std::fs::create_dir(&mk).unwrap();
    for (name, bytes) in workloads::generate("makefile", 3, 2) {
        write(&mk, &name, &bytes);
    }
    succeeds(Command::new("make").args(["-s", "-C", s(&mk)]));
    assert!(mk.join("summary.txt").is_file());
    let sql = write(d.path(), "gen.sql", &workloads::generate("sql", 3, 200)[0].1);
    succeeds(Command::new("sqlite3").args([":memory:", &format!(".read {}", s(&sql))]));
    for kind in ["python", "sparse_heap"] {
        let py = write(d.path(), "gen.py", &workloads::generate(kind, 3, 4)[0].1);
        succeeds(Command::new("python3").arg(&py));
    }
}

#[test]
fn build_two_workloads_then_skip_then_list() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cache");
    let build = ["workloads", "build", "--size", "small", "--only", "gzip,sort", "--dir", s(&dir)];
    ok(run(&build));
    for name in ["gzip", "sort"] {
        let side = read_json(&dir.join(format!("{name}.json")));
        let info = run_json_info(&dir.join(format!("{name}.xtr")));
        let refs = u(&side, "/references");
        assert!(refs > 0, "{name}: no references");
        assert_eq!(refs, u(&info, "/references"), "{name}: sidecar and `xlat info` differ");
        assert_eq!(u(&side, "/distinct_pages"), u(&info, "/distinct_pages"), "{name}");
        assert_eq!(side["exit_status"], "0", "{name}");
        // A snapshot is taken unless the program ended within the first sampling interval.
        let snapped = u(&side, "/snapshot_processes") > 0;
        assert_eq!(dir.join(format!("{name}.xsnap")).is_file(), snapped, "{name}: snapshot file vs sidecar");
    }
    let t = Instant::now();
    let again = ok(run(&build));
    let err = String::from_utf8_lossy(&again.stderr);
    assert!(err.contains("gzip: up to date") && err.contains("sort: up to date"), "{err}");
    assert!(t.elapsed().as_secs_f64() < 5.0, "the second build was not skipped");
    let list = stdout(&ok(run(&["workloads", "list", "--size", "small", "--dir", s(&dir)])));
    let line = |name: &str| list.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or("").to_string();
    let gzip_refs = u(&read_json(&dir.join("gzip.json")), "/references").to_string();
    assert!(line("gzip").contains(&gzip_refs), "{list}");
    assert!(line("xz").contains("not built"), "{list}");
    assert!(list.lines().count() >= 12, "{list}");
}

fn run_json_info(path: &Path) -> serde_json::Value {
    parse_json(&ok(run(&["info", "--json", "-", s(path)])).stdout)
}

#[test]
fn missing_programs_name_the_package() {
    let d = tempfile::tempdir().unwrap();
    let m = write(
        d.path(),
        "m.toml",
        b"[[workload]]\nname = \"ghost\"\ndescription = \"d\"\npackage = \"ghost-pkg\"\n\
          command = [\"no-such-program-xlat\", \"{input}\"]\nsetup = { kind = \"text\" }\n\
          small = { n = 1 }\nfull = { n = 2 }\n",
    );
    let dir = d.path().join("cache");
    let args = ["workloads", "build", "--manifest", s(&m), "--dir", s(&dir)];
    let out = run(&args);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("no-such-program-xlat") && err.contains("ghost-pkg"), "{err}");
    let mut skip = args.to_vec();
    skip.push("--skip-missing");
    let out = ok(run(&skip));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("warning: skipped") && err.contains("ghost-pkg"), "{err}");
    let out = run(&["workloads", "build", "--only", "nope", "--dir", s(&dir)]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}

/// Records of an xtr file.
fn records(path: &Path) -> Vec<xlat::trace::Record> {
    let (mut r, _) = xlat::trace::open::open_reader_inline(s(path), None).unwrap();
    let (mut out, mut batch) = (Vec::new(), Vec::new());
    while r.read_batch(&mut batch, 4096).unwrap() > 0 {
        out.extend_from_slice(&batch);
    }
    out
}

/// The suite's own C programs: `extreme` forks its children after mapping a shared file of p
/// pages that each child reads once per pass, yielding after each pass; `ctx-ring` passes a
/// token round a ring of processes. Their traces switch processes where they yield or block.
#[test]
fn the_suites_c_programs_share_pages_and_switch_where_they_yield() {
    use xlat::trace::{map_flags, Record};
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cache");
    ok(run(&[
        "workloads",
        "build",
        "--size",
        "small",
        "--only",
        "extreme,ctx-ring",
        "--no-snapshot",
        "--dir",
        s(&dir),
    ]));
    let m = manifest();
    let extreme = m.workload.iter().find(|w| w.name == "extreme").unwrap();
    let pages = extreme.small.n;
    let (nproc, passes) = (8u64, 10u64);
    let info = run_json_info(&dir.join("extreme.xtr"));
    assert_eq!(u(&info, "/processes"), nproc + 1, "the parent and its n children");
    let t = records(&dir.join("extreme.xtr"));
    // The shared mapping: p pages of 16 KB, MAP_SHARED, in the parent (the first process),
    // before any fork.
    let parent = t.iter().find_map(|r| match *r {
        Record::Process { asid } => Some(asid),
        _ => None,
    });
    let (start, len) = t
        .iter()
        .take_while(|r| !matches!(r, Record::Fork { .. }))
        .find_map(|r| match *r {
            Record::Map { start, len, flags } if flags & map_flags::SHARED != 0 => Some((start, len)),
            _ => None,
        })
        .expect("a shared mapping in the parent before the forks");
    assert_eq!(len, pages * 16384);
    let mut cur = parent.expect("a first process");
    let mut touched: std::collections::BTreeMap<u32, std::collections::BTreeSet<u64>> = Default::default();
    let (mut forks, mut switches) = (0u64, 0u64);
    for r in &t {
        match *r {
            Record::Process { asid } => cur = asid,
            Record::ContextSwitch { asid } => {
                cur = asid;
                switches += 1;
            }
            Record::Fork { .. } => forks += 1,
            Record::Access { addr, kind, .. } if kind.is_data() && addr >= start && addr < start + len => {
                touched.entry(cur).or_default().insert((addr - start) / 16384);
            }
            _ => {}
        }
    }
    assert_eq!(forks, nproc);
    assert_eq!(touched.len() as u64, nproc, "every child reads the mapping: {touched:?}");
    assert!(!touched.contains_key(&parent.unwrap_or(0)), "the parent only maps the file");
    assert!(touched.values().all(|p| p.len() as u64 == pages), "each child reads all p pages");
    // One scheduling point per pass and child: most of them switch (a few find no other child
    // ready); a quantum of 10,000 references alone would give a handful.
    assert!(switches >= nproc * passes / 2, "{switches} switches");

    let info = run_json_info(&dir.join("ctx-ring.xtr"));
    assert_eq!(u(&info, "/processes"), 8);
    assert!(u(&info, "/events/context_switch") >= 700, "{info}");
    let t = records(&dir.join("ctx-ring.xtr"));
    let switches = t.iter().filter(|r| matches!(r, Record::ContextSwitch { .. })).count();
    let procs: std::collections::BTreeSet<u32> = t
        .iter()
        .filter_map(|r| match *r {
            Record::Process { asid } | Record::ContextSwitch { asid } => Some(asid),
            _ => None,
        })
        .collect();
    assert_eq!(procs.len(), 8);
    // 100 rounds of 8 passes: a switch at each (the token is the only thing that runs).
    assert!(switches >= 700, "{switches} switches");
    // Each pass writes the token into the next process's pipe: an Ipc event to it (ASIDs in
    // fork order: process i reads pipe i and writes pipe i + 1).
    let (mut cur, mut ipcs) = (0u32, 0u32);
    for r in &t {
        match *r {
            Record::Process { asid } | Record::ContextSwitch { asid } => cur = asid,
            Record::Ipc { to } => {
                assert_eq!(to, (cur + 1) % 8, "process {cur} writes to the next one");
                ipcs += 1;
            }
            _ => {}
        }
    }
    assert!(ipcs >= 790, "{ipcs} messages of 800");
}

/// A token passed round a ring of 16 processes with no working set: each pass is a few hundred
/// references, so the receiver of a message can reach its own next scheduling point before the
/// sender does. The tracer flushes the sender's records at the send, so the receiver's never
/// reach xlat first, and the trace runs the processes in ring order on any host, loaded or not
/// (before that flush, every such trace had from 3 to over 100 switches out of order).
#[test]
fn a_ring_of_processes_with_no_working_set_switches_in_ring_order() {
    use xlat::trace::Record;
    let d = tempfile::tempdir().unwrap();
    let prog = stdout(&ok(run(&["workloads", "program", "ctx-ring"]))).trim().to_string();
    let xtr = d.path().join("ring.xtr");
    let (nproc, rounds) = (16u32, 30u32);
    ok(run(&["trace", "-o", s(&xtr), "--", &prog, &nproc.to_string(), "0", &rounds.to_string()]));
    let to: Vec<u32> = records(&xtr)
        .iter()
        .filter_map(|r| match *r {
            Record::ContextSwitch { asid } => Some(asid),
            _ => None,
        })
        .collect();
    // The children start in fork order, then the parent sends the first token: from the first
    // switch back to the parent on, every switch goes to the next process of the ring, through
    // every round and the exits.
    let start = to.iter().position(|&a| a == 0).expect("the parent runs again");
    let ring = &to[start..];
    let wrong: Vec<usize> = (1..ring.len()).filter(|&i| ring[i] != (ring[i - 1] + 1) % nproc).collect();
    assert!(wrong.is_empty(), "switches out of ring order at {wrong:?} of {ring:?}");
    // The first round ends with that switch back to the parent; each later one is nproc switches.
    assert!(ring.len() as u32 >= nproc * (rounds - 1), "{} switches", ring.len());
}

/// The suite's programs run by hand (`xlat workloads program NAME` under `xlat trace`) with
/// other parameters: `extreme -c` in `both` mode, where each child maps the file itself (as in
/// chapman03) and both calls a function at the start of each page and reads a byte of it.
#[test]
fn extreme_by_hand_each_child_maps_the_file_and_executes_its_pages() {
    use std::collections::{BTreeMap, BTreeSet};
    use xlat::trace::{map_flags, Record};
    let d = tempfile::tempdir().unwrap();
    let out = ok(run(&["workloads", "program", "extreme"]));
    let prog = stdout(&out).trim().to_string();
    assert!(Path::new(&prog).is_file(), "{prog}");
    let (nproc, pages, passes) = (3u64, 16u64, 4u64);
    let (data, xtr) = (d.path().join("extreme.dat"), d.path().join("extreme.xtr"));
    let (n, p, i) = (nproc.to_string(), pages.to_string(), passes.to_string());
    ok(run(&["trace", "-o", s(&xtr), "--", &prog, "-c", s(&data), &n, &p, "both", &i]));
    assert!(!data.exists(), "the program removes its file");
    let (mut cur, mut parent) = (0u32, None);
    let mut object = BTreeMap::new();
    // Each child's shared mapping: (start, len, object).
    let mut maps: BTreeMap<u32, (u64, u64, u32)> = BTreeMap::new();
    let mut fetched: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    let mut read: BTreeMap<u32, BTreeSet<u64>> = BTreeMap::new();
    for r in records(&xtr) {
        match r {
            Record::Process { asid } | Record::ContextSwitch { asid } => {
                cur = asid;
                parent.get_or_insert(asid);
            }
            Record::Object { id, .. } => {
                object.insert(cur, id);
            }
            Record::Map { start, len, flags } => {
                let id = object.remove(&cur).unwrap_or(0);
                if flags & map_flags::SHARED != 0 {
                    assert!(flags & map_flags::EXEC != 0, "exec mode maps the file executable: {flags:#x}");
                    assert!(maps.insert(cur, (start, len, id)).is_none(), "one shared mapping per process");
                }
            }
            Record::Access { addr, kind, .. } => {
                if let Some(&(start, _, _)) = maps.get(&cur).filter(|m| addr >= m.0 && addr < m.0 + m.1) {
                    let set = if kind.is_data() { &mut read } else { &mut fetched };
                    set.entry(cur).or_default().insert((addr - start) / 16384);
                }
            }
            _ => {}
        }
    }
    assert!(!maps.contains_key(&parent.unwrap()), "with -c the parent does not map the file");
    assert_eq!(maps.len() as u64, nproc, "{maps:?}");
    let ids: BTreeSet<u32> = maps.values().map(|m| m.2).collect();
    assert!(ids.len() == 1 && !ids.contains(&0), "every child maps the same file object: {maps:?}");
    assert!(maps.values().all(|m| m.1 == pages * 16384), "{maps:?}");
    for set in [&fetched, &read] {
        assert_eq!(set.len() as u64, nproc, "{set:?}");
        assert!(set.values().all(|p| p.len() as u64 == pages), "each child touches all p pages: {set:?}");
    }
}

/// swanson98's programs (`radix`, `em3d`, `compress`) build, run natively with small arguments,
/// check their own results and say so; bad arguments are a usage error (status 2).
#[test]
fn swanson98_programs_run_natively_and_check_their_results() {
    let cases: [(&str, &[&str], &str); 4] = [
        ("radix", &["20000"], "sorted"),
        ("radix", &["5000", "16", "2147483648"], "8 passes"),
        ("em3d", &["300", "10", "5"], "checked"),
        ("compress", &["40", "2"], "decompressed equal"),
    ];
    for (name, args, says) in cases {
        let prog = workloads::program(name).unwrap_or_else(|e| panic!("{e}"));
        let out = Command::new(&prog).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{name} {args:?}: {}", describe(&out));
        assert_eq!(text.lines().count(), 1, "{name}: one summary line: {text}");
        assert!(text.starts_with(&format!("{name}: ")) && text.contains(says), "{name} {args:?}: {text}");
        assert!(!text.contains("WRONG"), "{text}");
        let bad = Command::new(&prog).arg("0").output().unwrap();
        assert_eq!(bad.status.code(), Some(2), "{name} 0: {}", describe(&bad));
    }
}

/// gray05's DBT-2 stand-in builds, runs natively, checks that its stock balances and prints the
/// items ordered: 1 MiB is 4096 records; 1000 transactions of 10 items of 1-8 each order between
/// 10,000 and 80,000 items. A bad size is a usage error (status 2).
#[test]
fn warehouse_runs_natively_and_checks_its_stock() {
    let prog = workloads::program("warehouse").unwrap_or_else(|e| panic!("{e}"));
    let out = Command::new(&prog).args(["1", "1000"]).output().unwrap();
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 1, "{text}");
    let words: Vec<&str> = text.split_whitespace().collect();
    assert_eq!(words[..5], ["warehouse:", "4096", "records,", "1000", "transactions,"], "{text}");
    let items: u64 = words[5].parse().unwrap();
    assert!((10_000..=80_000).contains(&items), "{text}");
    for bad in [&["0", "10"][..], &["1"][..]] {
        let o = Command::new(&prog).args(bad).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", describe(&o));
    }
}

/// Traced, the programs ask for superpages (`madvise(MADV_HUGEPAGE)`, the paper's `remap()`)
/// on exactly their large regions: radix on the one mapping of its key and rank arrays, compress
/// on its tables and its three buffers, each a `Map` record of the same range made before.
#[test]
fn swanson98_programs_advise_huge_pages_on_their_mapped_regions() {
    use xlat::trace::{sysno, Record};
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("cache");
    ok(run(&["workloads", "build", "--size", "small", "--only", "radix,compress", "--no-snapshot", "--dir", s(&dir)]));
    let m = manifest();
    let small = |name: &str| m.workload.iter().find(|w| w.name == name).unwrap().small.n;
    for (name, regions) in [("radix", 1), ("compress", 4)] {
        let (mut maps, mut advised) = (Vec::new(), Vec::new());
        for r in records(&dir.join(format!("{name}.xtr"))) {
            match r {
                Record::Map { start, len, .. } => maps.push((start, len)),
                Record::Syscall { nr, fd, object, buf, len } if nr == sysno::MADVISE && len > 0 => {
                    assert_eq!((fd, object), (0, 0), "{name}: no descriptor");
                    let mapped = maps.iter().any(|&(s, l)| s == buf && l == len);
                    assert!(mapped, "{name}: madvise [{buf:#x}, +{len}) is not a mapping made before: {maps:?}");
                    advised.push(len);
                }
                _ => {}
            }
        }
        assert_eq!(advised.len(), regions, "{name}: {advised:?}");
        let out = std::fs::read_to_string(dir.join(format!("{name}.out"))).unwrap();
        match name {
            // Both key arrays (n 4-byte keys each) and the ranks in one region.
            "radix" => assert!(advised[0] > 2 * 4 * small(name), "{advised:?}"),
            // The tables (htab of 69001 longs, codetab of 69001 shorts), then three buffers of n
            // thousand characters.
            _ => {
                assert!(advised[0] >= 69001 * 10, "{advised:?}");
                assert!(advised[1..].iter().all(|&l| l == advised[1] && l >= 1000 * small(name)), "{advised:?}");
            }
        }
        assert!(out.contains("sorted") || out.contains("decompressed equal"), "{name}: {out}");
    }
}
