//! `xlat run --jobs N`: the designs spread over threads give the same report, byte for byte
//! (apart from the timing), whatever N, including a design that fails part way.

use crate::common::*;
use serde_json::Value;

fn report(args: &[&str]) -> Value {
    let out = run(args);
    let mut v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    v.as_object_mut().unwrap().remove("seconds");
    v
}

#[test]
fn results_do_not_depend_on_jobs() {
    let dir = tempfile::tempdir().unwrap();
    // A design whose 32-bit address space cannot hold the trace's addresses fails part way.
    let narrow = write(
        dir.path(),
        "narrow.toml",
        "name = \"narrow\"\n[[tlb]]\nname = \"L1\"\nentries = 32\nways = 4\n[page_table]\nkind = \"radix\"\nva_bits = 32\n",
    );
    let fa = write(dir.path(), "fa64.toml", MINIMAL);
    for trace in [demo_xtr(), lackey_fixture()] {
        let base = [
            "run",
            "-t",
            s(&trace),
            "--json",
            "-",
            "-c",
            s(&fa),
            "-c",
            s(&narrow),
            "-p",
            "x86-64",
            "-p",
            "itanium2",
            "-p",
            "ultrasparc",
            "-p",
            "pa-8000",
            "-p",
            "mach3-r3000",
        ];
        let one = report(&[&base[..], &["--jobs", "1"]].concat());
        assert_eq!(one["configs"].as_array().unwrap().len(), 7);
        assert_eq!(one["failed_designs"], 1, "the narrow design fails");
        for j in ["2", "3", "6", "16"] {
            let many = report(&[&base[..], &["--jobs", j]].concat());
            assert_eq!(one, many, "--jobs {j} on {}", trace.display());
        }
    }
    let err = expect_error(&run(&["run", "-t", s(&demo_xtr()), "-c", s(&fa), "--jobs", "0"]), "--jobs 0");
    assert!(err.contains("--jobs"), "{err}");
}
