//! `[cores]` and `[os.shootdown]` through the command: bad values are one-line errors naming
//! the key (exit 2); the JSON report has `cores[]` and `shootdowns` for designs with several
//! cores, and `--per-core` prints each core's rows.

use crate::common::*;

const L1: &str = "[[tlb]]\nname = \"L1\"\nentries = 64\n";

fn design(dir: &std::path::Path, name: &str, keys: &str) -> std::path::PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, format!("name = \"{name}\"\n{keys}{L1}")).unwrap();
    p
}

#[test]
fn bad_cores_and_shootdown_values_exit_2_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo_xtr();
    for (keys, key) in [
        ("[cores]\ncount = 0\n", "cores.count"),
        ("[cores]\nasids_per_core = 9999\n", "cores.asids_per_core"),
        ("[os.shootdown]\npolicy = \"eager\"\n", "shootdown"),
        ("[os.shootdown]\nentry_cycles = 99999999999\n", "os.shootdown.entry_cycles"),
        ("[os.shootdown]\nflush_cycles = 99999999999\n", "os.shootdown.flush_cycles"),
    ] {
        let c = design(dir.path(), "bad", keys);
        let out = run(&["run", "-c", s(&c), "-t", s(&demo)]);
        assert_eq!(out.status.code(), Some(2), "{keys}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{keys}: {err}");
        assert!(err.contains(key), "{keys}: {err}");
    }
}

#[test]
fn several_cores_report_each_core_and_the_shootdowns() {
    let dir = tempfile::tempdir().unwrap();
    let one = design(dir.path(), "one", "");
    let four = design(dir.path(), "four", "[cores]\ncount = 4\n");
    let demo = demo_xtr();
    let v = run_json(&["run", "-c", s(&one), "-c", s(&four), "-t", s(&demo)]);
    let (a, b) = (config(&v, "one"), config(&v, "four"));
    assert!(a.get("cores").is_none() && a.get("shootdowns").is_none());
    let cores = b["cores"].as_array().unwrap();
    assert_eq!(cores.len(), 4);
    // Every lookup is made on some core.
    let sum: u64 = cores.iter().map(|c| c["lookups"].as_u64().unwrap()).sum();
    assert_eq!(sum, u(b, "/lookups"));
    let misses: u64 = cores.iter().map(|c| c["tlb"][0]["misses"].as_u64().unwrap()).sum();
    assert_eq!(misses, u(b, "/tlb/0/misses"));
    let initiated: u64 = cores.iter().map(|c| c["shootdowns"]["initiated"].as_u64().unwrap()).sum();
    assert_eq!(initiated, u(b, "/shootdowns/initiated"));
    let out = ok(run(&["run", "-c", s(&four), "-t", s(&demo), "--per-core"]));
    let text = stdout(&out);
    assert!(text.contains("four (per core):"), "{text}");
    assert_eq!(text.lines().skip_while(|l| !l.starts_with("four (per core)")).count(), 6, "{text}");
}

#[test]
fn a_clock_gives_seconds_from_the_cycles() {
    let dir = tempfile::tempdir().unwrap();
    let clocked = design(dir.path(), "clocked", "[time]\ncpi = 2.0\nclock_mhz = 500\n");
    let plain = design(dir.path(), "plain", "[time]\ncpi = 2.0\n");
    let demo = demo_xtr();
    let v = run_json(&["run", "-c", s(&clocked), "-c", s(&plain), "-t", s(&demo)]);
    let (a, b) = (config(&v, "clocked"), config(&v, "plain"));
    // 500 MHz: 2 ns a cycle; the same cycles with and without a clock.
    let cycles = u(a, "/time/cycles");
    assert!(cycles > 0);
    assert_eq!(cycles, u(b, "/time/cycles"));
    assert_eq!(a["time"]["seconds"].as_f64().unwrap(), cycles as f64 / 5e8);
    assert_eq!(a["time"]["clock_mhz"].as_f64(), Some(500.0));
    assert!(b["time"].get("seconds").is_none() && b["time"].get("clock_mhz").is_none());
    // The table shows the seconds row.
    let out = ok(run(&["run", "-c", s(&clocked), "-t", s(&demo)]));
    let text = stdout(&out);
    let want = format!("{:.6}", cycles as f64 / 5e8);
    assert!(text.lines().any(|l| l.trim_start().starts_with("seconds") && l.contains(&want)), "{text}");
    for bad in ["0", "-1.0", "2e6", "nan"] {
        let c = design(dir.path(), "bad", &format!("[time]\nclock_mhz = {bad}\n"));
        let out = run(&["run", "-c", s(&c), "-t", s(&demo)]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("time.clock_mhz") && err.trim_end().lines().count() == 1, "{bad}: {err}");
    }
}
