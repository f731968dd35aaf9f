//! The library's integration tests, one test binary grouped by model, so that a test is found by
//! its path (`cargo test -p xlat --test models pt::hashed`, `... tlb::formats`, `... golden`):
//!
//! - `golden`: exact counts of every preset and of one design per TLB policy, page-table kind and
//!   TLB entry format on both bundled traces, pinned in `tests/golden/` (`XLAT_BLESS=1` rewrites);
//! - `tlb`: entry formats, replacement policies and superpage / subblock TLBs against reference
//!   models, the software TLB;
//! - `pt`: each page-table kind's walks and sizes, superpage and partial-subblock PTEs, parameters,
//!   talluri95's Table 2 formulas, property tests;
//! - `cache`: cache hierarchies and the timing model, the memory controller's TLB;
//! - `os`: demand paging, reservation and superpages, the Mach 3.0 personality, shadow superpages;
//! - `engine`: events, ASIDs and shootdowns, the plain designs' loop, Itanium layouts and regions;
//! - `trace`: every reader and writer, compression and detection, the generator;
//! - `curve`, `plot`: `xlat curve` and the charts of reproductions;
//! - `fuzz`: seeded mutation fuzzing of every input and of event records.
//!
//! A property test that fails keeps its shrunk case beside its source file
//! (`NAME.proptest-regressions`, see [`proptest_cases`]), where every later run replays it first.

use proptest::test_runner::{Config as ProptestConfig, FileFailurePersistence};

mod cache;
mod curve;
mod engine;
mod fuzz;
mod golden;
mod os;
mod plot;
mod pt;
mod tlb;
mod trace;

/// Every record of the bundled trace `data/NAME`, read with the library's reader.
fn bundled_records(name: &str) -> Vec<xlat::trace::Record> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data").join(name);
    let (mut r, _) = xlat::trace::open::open_reader_inline(path.to_str().unwrap(), None).unwrap();
    let mut out = Vec::new();
    let mut batch = Vec::new();
    while r.read_batch(&mut batch, 4096).unwrap() > 0 {
        out.extend_from_slice(&batch);
    }
    out
}

/// Proptest's settings with `cases` cases per property, its failing cases kept in
/// `NAME.proptest-regressions` beside the test's source file `NAME.rs`. (Proptest's default
/// puts them under a `proptest-regressions/` tree beside the directory of this `main.rs`.)
fn proptest_cases(cases: u32) -> ProptestConfig {
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("proptest-regressions"))),
        ..ProptestConfig::default()
    }
}
