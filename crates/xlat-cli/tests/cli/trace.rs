//! `xlat trace` and `xlat run -- CMD`: tracing real programs with QEMU's user mode and xlat's
//! plugin (and with valgrind's lackey), the events of forking programs, online simulation, and
//! the errors when a tool is missing. `scripts/test.sh` installs `qemu-user`, `valgrind` and
//! the C compiler these tests use.

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use xlat::trace::Record;

/// A program whose own loops dominate its references (static: no dynamic loader), so that two
/// tracers' counts can be compared.
const LOOP_C: &str = r#"
static volatile unsigned long sink;
static unsigned long a[1 << 16];
static volatile unsigned long b[1 << 16];
int main(void) {
    unsigned long s = 0;
    for (int r = 0; r < 6; r++)
        for (int i = 0; i < (1 << 16); i++) {
            a[i] += (unsigned long)i * 3 + r;
            b[(i * 5) & ((1 << 16) - 1)] = s;
            s += a[(i * 7) & ((1 << 16) - 1)];
        }
    sink = s;
    return 0;
}
"#;

/// Maps 1 MB, touches it, forks a child that touches it again and exits with 3, unmaps it and
/// exits with 5.
const FORK_C: &str = r#"
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int main(void) {
    char *p = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (int i = 0; i < (1 << 20); i += 4096) p[i] = 1;
    pid_t c = fork();
    if (c == 0) {
        for (int i = 0; i < (1 << 20); i += 4096) p[i] += 2;
        _exit(3);
    }
    int st = 0;
    waitpid(c, &st, 0);
    munmap(p, 1 << 20);
    return WIFEXITED(st) && WEXITSTATUS(st) == 3 ? 5 : 1;
}
"#;

/// Maps two regions (768 KB and 64 KB), asks for huge pages on the first
/// (`madvise(MADV_HUGEPAGE)`, swanson98's `remap()`) and gives the second other advice
/// (`MADV_WILLNEED`), touches both, and prints the first region's address and length.
const MADVISE_C: &str = r#"
#include <stdio.h>
#include <sys/mman.h>
int main(void) {
    size_t big = 768 << 10, small = 64 << 10;
    char *a = mmap(0, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *b = mmap(0, small, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (a == MAP_FAILED || b == MAP_FAILED) return 1;
    madvise(a, big, MADV_HUGEPAGE);
    madvise(b, small, MADV_WILLNEED);
    for (size_t i = 0; i < big; i += 4096) a[i] = 1;
    for (size_t i = 0; i < small; i += 4096) b[i] = 2;
    printf("%lu %lu\n", (unsigned long)a, (unsigned long)big);
    return 0;
}
"#;

/// Compiles `src` once per test binary into a persistent temporary directory.
fn compile(name: &str, src: &str, extra: &[&str]) -> PathBuf {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("temporary directory"));
    let exe = dir.path().join(name);
    if !exe.exists() {
        let c = write(dir.path(), &format!("{name}.c"), src);
        let out = std::process::Command::new("cc")
            .args(["-O1", "-o"])
            .arg(&exe)
            .arg(&c)
            .args(extra)
            .output()
            .expect("cc is needed (Debian package gcc)");
        assert!(out.status.success(), "cc failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    exe
}

fn loop_program() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile("loop", LOOP_C, &["-static"])).clone()
}

fn fork_program() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile("forkmap", FORK_C, &[])).clone()
}

fn info(path: &Path) -> Value {
    parse_json(&ok(run(&["info", "--json", "-", s(path)])).stdout)
}

fn kinds(v: &Value) -> [u64; 4] {
    ["ifetch", "load", "store", "modify"].map(|k| u(v, &format!("/by_kind/{k}")))
}

/// Runs `xlat trace -o OUT -- prog args` and returns its stderr (the summary line).
fn trace(out: &Path, extra: &[&str], prog: &[&str]) -> String {
    let mut args = vec!["trace", "-o", s(out)];
    args.extend(extra);
    args.push("--");
    args.extend(prog);
    let o = ok(run(&args));
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn plugin_builds_and_traces_true() {
    let dir = tempfile::tempdir().unwrap();
    let cache = tempfile::tempdir().unwrap();
    let out = dir.path().join("true.xtr");
    // An empty cache: the plugin is compiled first.
    let o =
        ok(xlat(&["trace", "-o", s(&out), "--", "/bin/true"]).env("XDG_CACHE_HOME", cache.path()).output().unwrap());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("program exit status 0"), "{err}");
    let built: Vec<_> =
        std::fs::read_dir(cache.path().join("xlat")).unwrap().flatten().map(|e| e.file_name()).collect();
    assert!(built.len() == 1 && built[0].to_string_lossy().ends_with(".so"), "{built:?}");
    let v = info(&out);
    assert!(u(&v, "/references") > 10_000, "{v}");
    assert_eq!(u(&v, "/processes"), 1);
    assert!(u(&v, "/events/map") >= 1, "the loader maps the libraries: {v}");
    assert_eq!(u(&v, "/events/exit"), 1);
    assert!(u(&v, "/by_kind/ifetch") > u(&v, "/by_kind/load"));
}

#[test]
fn qemu_counts_match_lackey_within_one_percent() {
    let prog = loop_program();
    let dir = tempfile::tempdir().unwrap();
    let q = dir.path().join("q.xtr");
    trace(&q, &[], &[s(&prog)]);
    let lk = dir.path().join("l.lackey");
    let status = std::process::Command::new("valgrind")
        .args(["--tool=lackey", "--trace-mem=yes"])
        .arg(format!("--log-file={}", lk.display()))
        .arg(&prog)
        .status()
        .expect("valgrind is needed (Debian package valgrind)");
    assert!(status.success());
    let (qk, lkk) = (kinds(&info(&q)), count_lackey(&std::fs::read(&lk).unwrap()));
    for k in 0..4 {
        let (a, b) = (qk[k] as f64, lkk[k] as f64);
        assert!(
            (a - b).abs() <= 0.01 * b.max(1.0),
            "kind {k}: qemu {} vs lackey {} (all: {qk:?} vs {lkk:?})",
            qk[k],
            lkk[k]
        );
    }
    assert!(lkk[2] > 300_000 && lkk[3] > 300_000, "the program stores and modifies: {lkk:?}");
}

#[test]
fn lackey_backend_streams_the_same_references_as_valgrind() {
    let prog = loop_program();
    let dir = tempfile::tempdir().unwrap();
    let l = dir.path().join("l.xtr");
    let err = trace(&l, &["--backend", "lackey"], &[s(&prog)]);
    assert!(err.contains("slower"), "{err}");
    let v = info(&l);
    let k = kinds(&v);
    assert!(k[0] > 4_000_000 && k[2] > 300_000, "{k:?}");
    assert_eq!(u(&v, "/processes"), 1);
    assert_eq!(u(&v, "/events/map"), 0, "lackey reports no maps");
}

#[test]
fn lackey_children_gives_an_exec_d_image_its_own_asid() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("ex.xtr");
    trace(&out, &["--backend", "lackey", "--children"], &["/bin/sh", "-c", "exec /bin/true"]);
    let v = info(&out);
    assert_eq!(u(&v, "/processes"), 2, "sh and the /bin/true it became: {v}");
    assert_eq!(u(&v, "/events/exit"), 2);
}

/// Prints its first argument, maps 1 MB and touches it, then runs `argv[2]` (default 12) rounds
/// of loops with loads, stores and read-modify-writes (dynamically linked: the exec shim is
/// preloaded into it under `--children`).
const EXEC_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
static unsigned long a[1 << 16];
static volatile unsigned long b[1 << 16];
int main(int argc, char **argv) {
    char *p = mmap(0, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    for (int i = 0; i < (1 << 20); i += 4096) p[i] = 1;
    int rounds = argc > 2 ? atoi(argv[2]) : 12;
    unsigned long s = 0;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < (1 << 16); i++) {
            a[i] += (unsigned long)i * 3 + r;
            b[(i * 5) & ((1 << 16) - 1)] = s;
            s += a[(i * 7) & ((1 << 16) - 1)] + b[(i * 3) & ((1 << 16) - 1)];
        }
    printf("exec-probe %s %lu\n", argc > 1 ? argv[1] : "-", s & 0xff);
    return 0;
}
"#;

fn exec_program() -> PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| compile("execprobe", EXEC_C, &[])).clone()
}

/// What a trace holds per ASID, read record by record.
#[derive(Debug, Default)]
struct PerAsid {
    kinds: std::collections::BTreeMap<u32, [u64; 4]>,
    /// (asid, len) of every map.
    maps: Vec<(u32, u64)>,
    /// (parent, child).
    forks: Vec<(u32, u32)>,
    /// Exits in order.
    exits: Vec<u32>,
    /// Position (record index) of the first record run under each ASID.
    first_run: std::collections::BTreeMap<u32, usize>,
    /// Position of each ASID's exit.
    exit_at: std::collections::BTreeMap<u32, usize>,
}

fn per_asid(path: &Path) -> PerAsid {
    use xlat::trace::{open::open_reader, Record};
    let mut r = open_reader(s(path), None).unwrap();
    let mut buf = Vec::new();
    let mut p = PerAsid::default();
    let (mut asid, mut at) = (0u32, 0usize);
    while r.read_batch(&mut buf, 4096).unwrap() > 0 {
        for rec in &buf {
            match *rec {
                Record::Process { asid: a } | Record::ContextSwitch { asid: a } => {
                    asid = a;
                    p.first_run.entry(a).or_insert(at);
                }
                Record::Access { kind, .. } => p.kinds.entry(asid).or_default()[kind as usize] += 1,
                Record::Map { len, .. } => p.maps.push((asid, len)),
                Record::Fork { child } => p.forks.push((asid, child)),
                Record::Exit { asid: a } => {
                    p.exits.push(a);
                    p.exit_at.insert(a, at);
                }
                _ => {}
            }
            at += 1;
        }
    }
    p
}

fn within_one_percent(got: [u64; 4], want: [u64; 4]) -> bool {
    (0..4).all(|k| (got[k] as f64 - want[k] as f64).abs() <= 0.01 * (want[k] as f64).max(1.0))
}

#[test]
fn qemu_children_traces_every_exec_d_image() {
    let prog = exec_program();
    let dir = tempfile::tempdir().unwrap();
    // The program traced directly, as the reference for its counts.
    let direct = dir.path().join("direct.xtr");
    trace(&direct, &[], &[s(&prog), "x"]);
    let want = per_asid(&direct).kinds[&0];
    assert!(want[2] > 500_000 && want[3] > 500_000, "the program stores and modifies: {want:?}");

    let out = dir.path().join("sh.xtr");
    let script = format!("{p} a; {p} b | cat", p = s(&prog));
    let o = ok(run(&["trace", "--children", "--quantum", "5000", "-o", s(&out), "--", "/bin/sh", "-c", &script]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("exec-probe a ") && text.contains("exec-probe b "), "{text}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("program exit status 0") && err.contains("7 processes"), "{err}");
    // sh; three forks of it; each replaced by an exec'd image (the program twice, cat).
    let v = info(&out);
    assert_eq!(u(&v, "/processes"), 7, "{v}");
    assert_eq!(u(&v, "/events/fork"), 3, "{v}");
    assert_eq!(u(&v, "/events/exit"), 7, "every image exits once: {v}");
    let p = per_asid(&out);
    assert_eq!(p.exits.len(), 7);
    // The program's 1 MB map: once per run, in two different images.
    let big: Vec<u32> = p.maps.iter().filter(|m| m.1 == 1 << 20).map(|m| m.0).collect();
    assert_eq!(big.len(), 2, "{:?}", p.maps);
    assert_ne!(big[0], big[1]);
    for a in &big {
        // An exec'd image: not sh (0), not a forked process (the fork child ran sh's code).
        assert!(*a != 0 && p.forks.iter().all(|f| f.1 != *a), "asid {a}: {:?}", p.forks);
        assert!(within_one_percent(p.kinds[a], want), "asid {a}: {:?} vs {want:?} traced directly", p.kinds[a]);
        // The image replaced by the exec ended before the new one ran.
        let forked = p.forks.iter().map(|f| f.1).filter(|c| p.exit_at[c] < p.first_run[a]).count();
        assert!(forked >= 1, "an old image exits before asid {a} runs: {p:?}");
    }
    // Each forked child exits (its image was replaced) and was forked by sh.
    for f in &p.forks {
        assert_eq!(f.0, 0, "{:?}", p.forks);
        assert!(p.exit_at.contains_key(&f.1));
    }
}

#[test]
fn qemu_children_runs_scripts_through_their_interpreter() {
    let prog = exec_program();
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "probe.sh", format!("#!/bin/sh\n{} s 1\n", s(&prog)));
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = dir.path().join("script.xtr");
    let o = ok(run(&["trace", "--children", "-o", s(&out), "--", "/bin/sh", "-c", &format!("{}; true", s(&script))]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("exec-probe s "));
    // sh, its fork, the script's sh, its fork, the program.
    let p = per_asid(&out);
    assert_eq!(p.exits.len(), 5, "{p:?}");
    assert_eq!(p.maps.iter().filter(|m| m.1 == 1 << 20).count(), 1);
}

#[test]
fn without_children_exec_d_programs_are_not_traced_and_the_shim_is_not_loaded() {
    let prog = exec_program();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("plain.xtr");
    let script = format!("echo \"preload=$LD_PRELOAD shim=$XLAT_EXEC_SHIM\"; {} a 1 | cat", s(&prog));
    let o = ok(run(&["trace", "-o", s(&out), "--", "/bin/sh", "-c", &script]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains(" shim=\n") && !text.contains("xlat_exec_shim"), "{text}");
    assert!(text.contains("exec-probe a "), "{text}");
    // sh and its two forks; the exec'd programs ran untraced.
    let p = per_asid(&out);
    assert_eq!(p.exits.len(), 3, "{p:?}");
    assert!(p.maps.iter().all(|m| m.1 != 1 << 20), "{:?}", p.maps);
    // With --children the guest has the shim preloaded.
    let o = ok(run(&["trace", "--children", "-o", s(&out), "--", "/bin/sh", "-c", "echo \"preload=$LD_PRELOAD\""]));
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("preload=/") && text.contains("xlat_exec_shim"), "{text}");
}

/// Statically linked: runs `sh -c "PROG n 1; true"` with `execl` (no preloaded shim can wrap it).
const STATIC_EXEC_C: &str = r#"
#include <stdio.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s n 1; true", argc > 1 ? argv[1] : "false");
    execl("/bin/sh", "sh", "-c", cmd, (char *)0);
    return 9;
}
"#;

#[test]
fn qemu_children_cannot_follow_the_exec_of_a_static_program() {
    let prog = exec_program();
    let caller = compile("staticexec", STATIC_EXEC_C, &["-static"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("static.xtr");
    let o = ok(run(&["trace", "--children", "-o", s(&out), "--", s(&caller), s(&prog)]));
    // The shell and the program ran (natively): the shim, inherited through LD_PRELOAD, stays
    // inert outside QEMU, so only the static caller's image is traced.
    assert!(String::from_utf8_lossy(&o.stdout).contains("exec-probe n "));
    let p = per_asid(&out);
    assert_eq!(p.exits, vec![0], "{p:?}");
    assert!(p.maps.iter().all(|m| m.1 != 1 << 20), "{:?}", p.maps);
}

#[test]
fn online_children_run_equals_trace_then_run() {
    let prog = exec_program();
    let dir = tempfile::tempdir().unwrap();
    let tee = dir.path().join("tee.xtr");
    let script = format!("{p} a 1; {p} b 1 | cat", p = s(&prog));
    let args = ["run", "-p", "x86-64", "--children", "--quantum", "500", "--tee", s(&tee), "--json", "-", "--"];
    let online = parse_json(&ok(run(&[&args[..], &["/bin/sh", "-c", &script]].concat())).stdout);
    check_report(&online);
    let offline = run_json(&["run", "-p", "x86-64", "-t", s(&tee)]);
    assert_eq!(counters(&online), counters(&offline));
    assert_eq!(per_asid(&tee).exits.len(), 7);
}

#[test]
fn forking_program_gets_asids_and_events() {
    let prog = fork_program();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fork.xtr");
    let err = trace(&out, &["--quantum", "1000"], &[s(&prog)]);
    assert!(err.contains("program exit status 5"), "{err}");
    assert!(err.contains("2 processes"), "{err}");
    let v = info(&out);
    assert_eq!(u(&v, "/processes"), 2, "{v}");
    assert_eq!(v["asids"], serde_json::json!([0, 1]));
    assert_eq!(u(&v, "/events/fork"), 1);
    assert_eq!(u(&v, "/events/exit"), 2);
    assert_eq!(u(&v, "/events/process"), 1);
    assert!(u(&v, "/events/context_switch") >= 2, "{v}");
    assert!(u(&v, "/events/map") >= 2 && u(&v, "/events/unmap") >= 1, "{v}");
    // The 1 MB mapping and its unmapping are there, with the length asked for.
    let text = ok(run(&["convert", s(&out), "-", "--to", "lackey"]));
    assert!(!text.stdout.is_empty());
}

#[test]
fn map_and_unmap_events_carry_the_program_s_ranges() {
    use xlat::trace::{open::open_reader, Record};
    let prog = fork_program();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("fork.xtr");
    trace(&out, &[], &[s(&prog)]);
    let mut r = open_reader(s(&out), None).unwrap();
    let mut buf = Vec::new();
    let (mut maps, mut unmaps, mut asid, mut forks) = (Vec::new(), Vec::new(), 0u32, Vec::new());
    while r.read_batch(&mut buf, 4096).unwrap() > 0 {
        for rec in &buf {
            match *rec {
                Record::Process { asid: a } | Record::ContextSwitch { asid: a } => asid = a,
                Record::Map { start, len, .. } => maps.push((asid, start, len)),
                Record::Unmap { start, len } => unmaps.push((asid, start, len)),
                Record::Fork { child } => forks.push((asid, child)),
                _ => {}
            }
        }
    }
    assert_eq!(forks, vec![(0, 1)]);
    let big: Vec<_> = maps.iter().filter(|m| m.2 == 1 << 20).collect();
    assert_eq!(big.len(), 1, "one 1 MB map: {maps:?}");
    assert_eq!(big[0].0, 0, "mapped by the parent");
    assert!(unmaps.iter().any(|u| u.0 == 0 && u.1 == big[0].1 && u.2 == 1 << 20), "{unmaps:?}");
}

/// `madvise(addr, length, MADV_HUGEPAGE)` becomes a `Syscall` record naming the region
/// (`buf` = addr, `len` = length, no descriptor), inside the `Map` of that region; `madvise`
/// with other advice names none.
#[test]
fn madvise_hugepage_names_its_region() {
    use xlat::trace::sysno;
    let prog = compile("madvise", MADVISE_C, &[]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("madvise.xtr");
    let printed = stdout(&ok(run(&["trace", "-o", s(&out), "--", s(&prog)])));
    let v: Vec<u64> = printed.split_whitespace().map(|w| w.parse().unwrap()).collect();
    let (addr, length) = (v[0], v[1]);
    let recs = records(&out);
    let madvises: Vec<(u8, u32, u64, u64)> = recs
        .iter()
        .filter_map(|r| match *r {
            Record::Syscall { nr, fd, object, buf, len } if nr == sysno::MADVISE => Some((fd, object, buf, len)),
            _ => None,
        })
        .collect();
    assert_eq!(madvises.len(), 2, "{madvises:?}");
    assert_eq!(madvises[0], (0, 0, addr, length), "the MADV_HUGEPAGE call names its region");
    assert_eq!(madvises[1], (0, 0, 0, 0), "other advice names none");
    // The region is the one the program mapped (one Map record of its length), mapped before.
    let advised =
        recs.iter().position(|r| matches!(r, Record::Syscall { nr, len, .. } if *nr == sysno::MADVISE && *len > 0));
    let mapped =
        recs.iter().position(|r| matches!(*r, Record::Map { start, len, .. } if start == addr && len == length));
    assert!(mapped.is_some() && mapped < advised, "a Map of [{addr:#x}, +{length}) before the madvise");
}

/// Every record of an xtr file.
fn records(path: &Path) -> Vec<Record> {
    let mut r = xlat::trace::open::open_reader(s(path), None).unwrap();
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    while r.read_batch(&mut buf, 4096).unwrap() > 0 {
        all.extend_from_slice(&buf);
    }
    all
}

#[test]
fn online_run_equals_trace_then_run() {
    let prog = fork_program();
    let dir = tempfile::tempdir().unwrap();
    let tee = dir.path().join("tee.xtr");
    let args = ["run", "-p", "x86-64", "-p", "itanium2", "--quantum", "500", "--tee", s(&tee), "--json", "-", "--"];
    let online = parse_json(&ok(run(&[&args[..], &[s(&prog)]].concat())).stdout);
    check_report(&online);
    let offline = run_json(&["run", "-p", "x86-64", "-p", "itanium2", "-t", s(&tee)]);
    assert_eq!(counters(&online), counters(&offline));
    assert!(u(&online, "/trace/references") > 100_000);
}

#[test]
fn exit_status_of_a_killed_program_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("k.xtr");
    let err = trace(&out, &[], &["/bin/sh", "-c", "kill -9 $$"]);
    assert!(err.contains("program exit status signal 9"), "{err}");
    assert_eq!(u(&info(&out), "/events/exit"), 1, "an exit is added for the killed process");
}

#[test]
fn online_run_needs_exactly_one_source() {
    let out = run(&["run", "-p", "x86-64", "-t", "x.xtr", "--", "/bin/true"]);
    expect_error(&out, "--trace and a command");
    let out = run(&["run", "-p", "x86-64"]);
    expect_error(&out, "no source");
}

/// A directory holding only the listed tools (symlinks to the real ones), for a PATH that
/// lacks the others.
fn bin_dir_with(tools: &[&str]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for t in tools {
        let real = xlat::tracer::find_in_path(t).unwrap_or_else(|| panic!("{t} is needed"));
        std::os::unix::fs::symlink(real, d.path().join(t)).unwrap();
    }
    d
}

#[test]
fn missing_tools_give_one_line_errors_naming_the_package() {
    let empty = bin_dir_with(&[]);
    let cache = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out_path = dir.path().join("x.xtr");
    let with_path = |path: &Path, extra: &[&str]| {
        let mut args = vec!["trace", "-o", s(&out_path)];
        args.extend(extra);
        args.extend(["--", "/bin/true"]);
        xlat(&args).env("PATH", path).env("XDG_CACHE_HOME", cache.path()).output().unwrap()
    };
    let e = expect_error(&with_path(empty.path(), &[]), "no qemu");
    assert_mentions(&e, &["qemu-x86_64", "qemu-user"]);
    let e = expect_error(&with_path(empty.path(), &["--backend", "lackey"]), "no valgrind");
    assert_mentions(&e, &["valgrind", "apt-get install valgrind"]);
    // QEMU present, no compiler and nothing cached.
    let qemu_only = bin_dir_with(&["qemu-x86_64"]);
    let e = expect_error(&with_path(qemu_only.path(), &[]), "no cc");
    assert_mentions(&e, &["cc", "gcc"]);
    assert_absent(&out_path);
    let e = expect_error(&run(&["trace", "-o", s(&out_path), "--", "no-such-program-xlat"]), "no program");
    assert_mentions(&e, &["no-such-program-xlat", "not found"]);
    assert_absent(&out_path);
}

/// Two worker threads, each writing its own 64 KB buffer, joined by the main thread.
const THREADS_C: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
static void *work(void *arg) {
    volatile char *b = malloc(65536);
    for (int r = 0; r < 20; r++)
        for (int i = 0; i < 65536; i += 64) b[i] = (char)r;
    return (void *)b;
}
int main(void) {
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], 0, work, 0);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    puts("joined");
    return 0;
}
"#;

/// Every thread of a traced program is named by `Thread` records on its process's ASID.
#[test]
fn threads_of_a_process_are_recorded_as_thread_events() {
    let prog = compile("threads", THREADS_C, &["-pthread"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("threads.xtr");
    trace(&out, &[], &[s(&prog)]);
    let v = info(&out);
    assert_eq!(u(&v, "/processes"), 1, "{v}");
    assert!(u(&v, "/threads") >= 3, "main thread and two workers: {v}");
    assert!(u(&v, "/events/thread") >= 3, "{v}");
    // Thread IDs, in the records themselves: three distinct ones.
    let mut r = xlat::trace::open::open_reader(s(&out), None).unwrap();
    let mut buf = Vec::new();
    let mut tids = std::collections::BTreeSet::new();
    while r.read_batch(&mut buf, 4096).unwrap() > 0 {
        for rec in &buf {
            if let xlat::trace::Record::Thread { tid } = *rec {
                tids.insert(tid);
            }
        }
    }
    assert!(tids.len() >= 3, "{tids:?}");
    // The simulation counts them as events and nothing else.
    let run_v = run_json(&["run", "-p", "x86-64", "-t", s(&out)]);
    assert_eq!(u(&run_v, "/configs/0/events/threads"), u(&v, "/events/thread"));
}

/// Two worker threads, each mapping a buffer of its own size ((i + 2) * 16 pages), writing it,
/// making it read-only, dropping its first half (MADV_DONTNEED) and its second (MADV_FREE),
/// reading it, and unmapping it.
const THREAD_EVENTS_C: &str = r#"
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
static void *work(void *arg) {
    size_t len = ((uintptr_t)arg + 2) * 16 * 4096;
    volatile char *b = mmap(0, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return 0;
    for (size_t i = 0; i < len; i += 4096) b[i] = 1;
    mprotect((void *)b, len, PROT_READ);
    madvise((void *)b, len / 2, MADV_DONTNEED);
    madvise((void *)(b + len / 2), len / 2, MADV_FREE);
    long sum = 0;
    for (size_t i = 0; i < len; i += 4096) sum += b[i];
    munmap((void *)b, len);
    return (void *)sum;
}
int main(void) {
    pthread_t t[2];
    for (uintptr_t i = 0; i < 2; i++) pthread_create(&t[i], 0, work, (void *)i);
    for (int i = 0; i < 2; i++) pthread_join(t[i], 0);
    puts("joined");
    return 0;
}
"#;

/// Each thread's mprotect and madvise calls become Protect and Discard records of exactly its
/// range, attributed to it: the Thread record in force at its Map is in force at its Protect,
/// both Discards and its Unmap.
#[test]
fn threads_protects_and_discards_are_recorded_on_the_thread_that_made_them() {
    use xlat::trace::map_flags::{READ, WRITE};
    use xlat::trace::Record;
    let prog = compile("thread-events", THREAD_EVENTS_C, &["-pthread"]);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("te.xtr");
    trace(&out, &[], &[s(&prog)]);
    let v = info(&out);
    assert_eq!(u(&v, "/processes"), 1, "{v}");
    assert!(u(&v, "/threads") >= 3, "{v}");
    assert!(u(&v, "/events/protect") >= 2 && u(&v, "/events/discard") >= 4, "{v}");
    let mut r = xlat::trace::open::open_reader(s(&out), None).unwrap();
    let mut buf = Vec::new();
    let mut recs = Vec::new();
    while r.read_batch(&mut buf, 4096).unwrap() > 0 {
        recs.extend(buf.iter().filter(|r| !matches!(r, Record::Access { .. })).copied());
    }
    let mut tid = None;
    let mut seen = Vec::new();
    for worker in 0..2u64 {
        let len = (worker + 2) * 16 * 4096;
        let mut start = None;
        let mut events = Vec::new();
        for rec in &recs {
            match *rec {
                Record::Thread { tid: t } => tid = Some(t),
                Record::Map { start: s, len: l, flags } if l == len && flags & (READ | WRITE) == READ | WRITE => {
                    start = Some(s);
                    events.push(("map", s, l, tid));
                }
                Record::Protect { start: s, len: l, flags } if Some(s) == start => {
                    assert_eq!((l, flags), (len, READ));
                    events.push(("protect", s, l, tid));
                }
                Record::Discard { start: s, len: l, lazy } => {
                    if Some(s) == start {
                        assert!(!lazy && l == len / 2, "{rec:?}");
                        events.push(("dontneed", s, l, tid));
                    } else if start.map(|x| x + len / 2) == Some(s) {
                        assert!(lazy && l == len / 2, "{rec:?}");
                        events.push(("free", s, l, tid));
                    }
                }
                Record::Unmap { start: s, len: l } if Some(s) == start && l == len => {
                    events.push(("unmap", s, l, tid));
                }
                _ => {}
            }
        }
        let kinds: Vec<&str> = events.iter().map(|e| e.0).collect();
        assert_eq!(kinds, ["map", "protect", "dontneed", "free", "unmap"], "worker {worker}: {events:?}");
        let t = events[0].3;
        assert!(t.is_some() && events.iter().all(|e| e.3 == t), "worker {worker}: one thread: {events:?}");
        seen.push(t);
    }
    assert_ne!(seen[0], seen[1], "each worker on its own thread");
    // A run counts them: a protect takes write from resident pages, the discards drop them.
    let run_v = run_json(&["run", "-p", "x86-64", "-t", s(&out)]);
    assert_eq!(u(&run_v, "/configs/0/events/protects"), u(&v, "/events/protect"));
    assert_eq!(u(&run_v, "/configs/0/events/discards"), u(&v, "/events/discard"));
    assert!(u(&run_v, "/configs/0/events/pages_protected") >= (32 + 48), "{run_v}");
    assert!(u(&run_v, "/configs/0/events/pages_discarded") >= (32 + 48), "{run_v}");
}

/// Without --children, an exec'd program runs untraced: one warning line names it, the trace's
/// metadata records it, and a run over the trace says so again.
#[test]
fn an_exec_d_program_that_is_not_followed_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("sh.xtr");
    let err = trace(&out, &[], &["/bin/sh", "-c", "ls / > /dev/null; true"]);
    let warn: Vec<&str> = err.lines().filter(|l| l.starts_with("xlat: warning:")).collect();
    assert_eq!(warn.len(), 1, "{err}");
    assert!(warn[0].contains("exec'd /usr/bin/ls") && warn[0].contains("--children"), "{err}");
    let v = info(&out);
    let untraced = v["untraced_execs"].as_array().unwrap();
    assert!(untraced.len() == 1 && untraced[0].as_str().unwrap().ends_with(" /usr/bin/ls"), "{v}");
    let o = ok(run(&["run", "-p", "x86-64", "-t", s(&out), "-q"]));
    assert!(String::from_utf8_lossy(&o.stderr).contains("exec'd /usr/bin/ls, which was not traced"));
    // An exec that fails is no such thing; with --children nothing is missing.
    let err = trace(&out, &[], &["/bin/sh", "-c", "/nonexistent/prog 2>/dev/null; true"]);
    assert!(!err.contains("warning"), "{err}");
    let err = trace(&out, &["--children"], &["/bin/sh", "-c", "ls / > /dev/null; true"]);
    assert!(!err.contains("warning"), "{err}");
    assert!(info(&out)["untraced_execs"].as_array().unwrap().is_empty());
}

/// A `#!` script is followed into the programs it execs by default.
#[test]
fn a_script_command_is_followed_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let script = write(dir.path(), "shim.sh", "#!/bin/sh\nexec /usr/bin/true \"$@\"\n");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = dir.path().join("s.xtr");
    let err = trace(&out, &[], &[s(&script)]);
    assert!(err.contains("is a script (#!)") && !err.contains("warning"), "{err}");
    assert!(info(&out)["untraced_execs"].as_array().unwrap().is_empty());
    let err = trace(&out, &["--no-children"], &[s(&script)]);
    assert!(err.contains("exec'd /usr/bin/true, which is not traced"), "{err}");
}

/// Two processes that each map one file after forking: the trace names the file as one object
/// in both (an `Object` record before each `Map`), `xlat info` lists it, and a design with a
/// shared region places both mappings at one address (one window).
#[test]
fn a_file_mapped_by_two_processes_is_one_object() {
    const SRC: &str = r#"
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 8 * 16384) != 0) return 1;
    close(fd);
    pid_t pid = fork();
    fd = open(argv[1], O_RDONLY);
    volatile char *m = mmap(0, 8 * 16384, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) return 1;
    int sum = 0;
    for (int i = 0; i < 20; i++) for (int p = 0; p < 8; p++) sum += m[p * 16384];
    if (pid == 0) _exit(sum);
    int st;
    wait(&st);
    return 0;
}
"#;
    let exe = compile("twomaps", SRC, &[]);
    let dir = tempfile::tempdir().unwrap();
    let (out, file) = (dir.path().join("t.xtr"), dir.path().join("data.bin"));
    trace(&out, &[], &[s(&exe), s(&file)]);
    let info = stdout(&ok(run(&["info", s(&out)])));
    assert!(info.lines().any(|l| l.contains("maps") && l.ends_with("data.bin")), "{info}");
    let (mut r, _) = xlat::trace::open::open_reader_inline(s(&out), None).unwrap();
    let (mut recs, mut b) = (Vec::new(), Vec::new());
    while r.read_batch(&mut b, 4096).unwrap() > 0 {
        recs.extend_from_slice(&b);
    }
    let data_id = r.notes().objects.iter().find(|o| o.path.ends_with("data.bin")).expect("named").id;
    // The program's own text comes first, as an image mapping of the executable.
    let first_map = recs.iter().position(|r| matches!(r, xlat::trace::Record::Map { .. })).unwrap();
    assert!(
        matches!(recs[first_map], xlat::trace::Record::Map { flags, .. } if flags & xlat::trace::map_flags::IMAGE != 0 && flags & xlat::trace::map_flags::EXEC != 0),
        "{:?}",
        &recs[..first_map + 1]
    );
    assert!(r.notes().objects[0].path.ends_with("twomaps"), "{:?}", r.notes().objects);
    let mut maps = 0;
    for (i, rec) in recs.iter().enumerate() {
        if let xlat::trace::Record::Object { id, offset } = *rec {
            assert!(matches!(recs[i + 1], xlat::trace::Record::Map { .. }), "an Object record precedes its Map");
            if id == data_id {
                assert_eq!(offset, 0);
                maps += 1;
            }
        }
    }
    assert_eq!(maps, 2, "mapped once in each process");
    let v = run_json(&["run", "-p", "itanium2-lvhpt-sharing", "-t", s(&out)]);
    let c = config(&v, "itanium2-lvhpt-sharing");
    // The shared region holds one window per object: libraries and the data file once each,
    // however many processes (and segments) map them.
    use xlat::trace::map_flags::{FILE, SHARED, WRITE};
    let shareable = recs
        .iter()
        .filter(|r| matches!(r, xlat::trace::Record::Map { flags, .. } if flags & SHARED != 0 || (flags & FILE != 0 && flags & WRITE == 0)))
        .count() as u64;
    let windows = u(c, "/layout/shared_objects");
    assert!(
        windows <= r.notes().objects.len() as u64 && windows < shareable,
        "{windows} windows, {shareable} shareable maps"
    );
}

/// A client and a server exchanging messages through pipes: each write another traced process
/// reads becomes an `Ipc` event to that process, after the `Syscall` record of the write (its
/// pipe, buffer and length); the reads are recorded with their buffers too.
#[test]
fn a_client_and_server_exchange_ipc_messages_with_their_system_calls() {
    use xlat::trace::fd_kind;
    for (transport, kind) in [("pipe", fd_kind::PIPE), ("unix", fd_kind::SOCKET), ("tcp", fd_kind::SOCKET)] {
        let prog = xlat::workloads::program("bigmsg").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("bigmsg.xtr");
        trace(&out, &[], &[s(&prog), "3000", "20", transport]);
        let v = info(&out);
        assert_eq!(u(&v, "/processes"), 2, "{transport}: {v}");
        let mut reads = 0;
        let mut ipcs = Vec::new();
        for (cur, rec, last_syscall) in with_syscalls(&out) {
            match rec {
                Record::Syscall { fd, len, buf, object, .. } if fd == kind | fd_kind::INTO_BUF => {
                    reads += 1;
                    assert!(buf != 0 && len > 0 && object > 0);
                }
                Record::Ipc { to } => {
                    let (fd, len, b, _) = last_syscall.expect("a send comes before its message");
                    assert_eq!(fd, kind | fd_kind::FROM_BUF, "{transport}: the message follows its send");
                    assert!(len > 0 && len <= 3000 && b != 0);
                    ipcs.push((cur, to));
                }
                _ => {}
            }
        }
        // 20 messages each way (the first may go before its receiver has received once).
        assert!(ipcs.len() >= 38, "{transport}: {ipcs:?}");
        assert!(ipcs.iter().all(|&(from, to)| from != to && from < 2 && to < 2), "{transport}: {ipcs:?}");
        assert!(ipcs.iter().any(|&(f, _)| f == 0) && ipcs.iter().any(|&(f, _)| f == 1), "{transport}");
        assert!(reads >= 40, "{transport}");
        assert_eq!(u(&v, "/events/ipc"), ipcs.len() as u64);
        assert!(u(&v, "/events/syscall") > 80, "{v}");
    }
}

/// A system call's descriptor kind, length, buffer and object.
type Call = (u8, u64, u64, u32);

/// Every record of a trace with the process it belongs to and the last system call before it.
fn with_syscalls(path: &std::path::Path) -> Vec<(u32, Record, Option<Call>)> {
    let mut r = xlat::trace::open::open_reader(s(path), None).unwrap();
    let mut buf = Vec::new();
    let (mut cur, mut last, mut all) = (u32::MAX, None, Vec::new());
    while r.read_batch(&mut buf, 4096).unwrap() > 0 {
        for rec in &buf {
            if let Record::Process { asid } | Record::ContextSwitch { asid } = *rec {
                cur = asid;
            }
            all.push((cur, *rec, last));
            if let Record::Syscall { fd, len, buf, object, .. } = *rec {
                last = Some((fd, len, buf, object));
            }
        }
    }
    all
}

#[test]
fn database_clients_over_unix_sockets_get_their_replies_from_the_server() {
    // mdb over Unix sockets: 3 clients send 10 requests each over one SOCK_SEQPACKET pair to the
    // server (process 0), which replies over each client's own stream pair.
    let prog = xlat::workloads::program("mdb").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (out, db) = (dir.path().join("mdb.xtr"), dir.path().join("mdb.dat"));
    trace(&out, &[], &[s(&prog), "3", "64", "256", "10", "4", s(&db), "unix"]);
    // (from, to) -> messages, and the socket each reply leaves by -> the clients it reaches.
    let (mut ipcs, mut by_socket) = (std::collections::BTreeMap::new(), std::collections::BTreeMap::new());
    for (cur, rec, last) in with_syscalls(&out) {
        if let Record::Ipc { to } = rec {
            *ipcs.entry((cur, to)).or_insert(0u32) += 1;
            let (fd, _, _, object) = last.expect("a send comes before its message");
            assert_eq!(fd, xlat::trace::fd_kind::SOCKET | xlat::trace::fd_kind::FROM_BUF);
            if cur == 0 {
                by_socket.entry(object).or_insert_with(std::collections::BTreeSet::new).insert(to);
            }
        }
    }
    // Every message goes between the server and a client; each reply socket reaches one client,
    // a different one for each socket.
    let replies: u32 = (1..=3).map(|c| ipcs.get(&(0, c)).copied().unwrap_or(0)).sum();
    let requests: u32 = (1..=3).map(|c| ipcs.get(&(c, 0)).copied().unwrap_or(0)).sum();
    assert_eq!(ipcs.values().sum::<u32>(), replies + requests, "{ipcs:?}");
    assert!(replies >= 27 && requests >= 27, "30 each way, bar a first message sent early: {ipcs:?}");
    assert_eq!(by_socket.len(), 3, "{by_socket:?}");
    let reached: std::collections::BTreeSet<u32> = by_socket.values().flatten().copied().collect();
    assert!(by_socket.values().all(|c| c.len() == 1) && reached.len() == 3, "{by_socket:?}");
}
