//! Copy on write on the loop of plain designs: a design with one fully associative LRU TLB and
//! a page cache keeps the plain loop while its OS watches writes, and its runs must stop at
//! every store to a write-protected page (a TLB hit, a miss the walk memo answers, a page the
//! run itself filled) and at no other reference. The counts below are worked out by hand.

use xlat::addr::{Asid, Vpn};
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::stats::SystemStats;
use xlat::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};

const PAGE: u64 = 4096;
const A: u64 = 0x5000_0000;

fn p(k: u64) -> u64 {
    A + k * PAGE + 24
}

fn load(k: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr: p(k) }
}

fn store(k: u64) -> Record {
    Record::Access { kind: Kind::Store, size: 8, addr: p(k) }
}

/// A 4-entry fully associative LRU TLB over a radix table, the page cache on (the default).
fn design() -> Config {
    let text = "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 4\npolicy = \"lru\"\n[page_table]\nkind = \"radix\"\n";
    Config::from_toml(text, "test").unwrap()
}

/// Process 1 writes its pages 0..=5 (anonymous), forks 7 (the six frames now write-protected,
/// the parent's TLB entries kept), then, TLB contents from least to most recently used:
///
/// | step | references | TLB after | lookups, misses (= walks), copies |
/// |---|---|---|---|
/// | 0 | store 0..=5 | 2 3 4 5 | 6, 6, 0 (6 faults) |
/// | 1 | load 5 (hit, protected) | 2 3 4 5 | 1, 0, 0 |
/// | 2 | store 5 (hit: copy, the entry shot down, the store's lookup again) | 2 3 4 5 | 2, 1, 1 |
/// | 3 | store 5 (its own frame now) | 2 3 4 5 | 1, 0, 0 |
/// | 4 | load 4, load 4 | 2 3 5 4 | 2, 0, 0 |
/// | 5 | store 4 (hit after two loads of it) | 2 3 5 4 | 2, 1, 1 |
/// | 6 | store 2 (hit, least recent) | 3 5 4 2 | 2, 1, 1 |
/// | 7 | load 0, 1, 3, 5, 4 (each a miss) | 1 3 5 4 | 5, 5, 0 |
/// | 8 | store 0 (a miss whose walk the memo has: the table is unchanged since step 6) | 3 5 4 0 | 2, 2, 1 |
/// | 9 | load 1, 3, 5, 2, 4 (each a miss) | 3 5 2 4 ... then 5 2 4 1 is step 10 | 5, 5, 0 |
/// | 10 | load 1 (a miss the memo answers: walked in step 9), store 1 (a hit on that fill) | 5 2 4 1 | 3, 2, 1 |
///
/// Step 9 in detail: 1 evicts 3 (5 4 0 1), 3 evicts 5 (4 0 1 3), 5 evicts 4 (0 1 3 5), 2 evicts
/// 0 (1 3 5 2), 4 evicts 1 (3 5 2 4); step 10's load of 1 evicts 3. Step 7: 0 evicts 3 (5 4 2
/// 0), 1 evicts 5, 3 evicts 4, 5 evicts 2, 4 evicts 0 (1 3 5 4); step 8's miss on 0 evicts 1.
/// Each copy shoots down one entry. Totals: lookups 6 + 25 = 31, misses and walks 6 + 17 = 23,
/// copies 5, invalidations 5, page faults 6 (the child finds the parent's pages mapped), frames
/// 6 + 5 = 11.
fn trace() -> Vec<Record> {
    let mut t = vec![Record::Process { asid: 1 }];
    t.extend((0..=5).map(store));
    t.push(Record::Fork { child: 7 });
    t.extend([load(5), store(5), store(5), load(4), load(4), store(4), store(2)]);
    t.extend([0, 1, 3, 5, 4].map(load));
    t.push(store(0));
    t.extend([1, 3, 5, 2, 4].map(load));
    t.extend([load(1), store(1)]);
    t
}

fn check(what: &str, s: &System) {
    let st: SystemStats = s.stats();
    assert!(s.failure().is_none(), "{what}");
    assert_eq!(st.os.cow_copies, 5, "{what}: copies");
    assert_eq!(st.lookups, 31, "{what}: lookups");
    assert_eq!(st.tlb[0].misses, 23, "{what}: misses");
    assert_eq!(st.walks.count, 23, "{what}: walks");
    assert_eq!(st.tlb[0].invalidations, 5, "{what}: invalidations");
    assert_eq!(st.page_faults, 6, "{what}: faults");
    assert_eq!(st.os.frames_in_use, 11, "{what}: frames");
    // The parent wrote every page but 3 after the fork: those have frames of their own.
    let frame = |asid: u32, k: u64| s.os().frame(Asid(asid), Vpn(p(k) / PAGE)).expect("resident").0;
    for k in 0..=5 {
        assert_eq!(frame(1, k) == frame(7, k), k == 3, "{what}: page {k}");
    }
    let mut pages: Vec<u64> = s.structures()[0]
        .tlb
        .translations()
        .iter()
        .map(|&(asid, vpn, _)| {
            assert_eq!(asid, 1);
            vpn.0 - A / PAGE
        })
        .collect();
    pages.sort_unstable();
    assert_eq!(pages, [1, 2, 4, 5], "{what}: the TLB's pages");
    s.check_translations().unwrap();
}

struct VecReader(Vec<Record>, usize, usize);

impl TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max).min(self.2);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> ReaderStats {
        ReaderStats::default()
    }
}

#[test]
fn plain_runs_stop_at_stores_to_write_protected_pages() {
    let c = design();
    let t = trace();
    // Fed directly (the loop makes the page words), whichever build of the run every batch
    // takes, in one batch or in batches of 1 to 7 records.
    for build in [None, Some(true), Some(false)] {
        for chunk in [t.len(), 1, 2, 3, 7] {
            let mut s = System::new(&c).unwrap();
            assert!(s.is_plain_loop());
            if let Some(near) = build {
                s.fix_fa_lru_build(near);
            }
            for records in t.chunks(chunk) {
                s.process(records).unwrap();
            }
            check(&format!("process, build {build:?}, batches of {chunk}"), &s);
        }
    }
    // Through `engine::run`, which hands the plain loop its reader's page words.
    for build in [None, Some(true), Some(false)] {
        let mut s = System::new(&c).unwrap();
        if let Some(near) = build {
            s.fix_fa_lru_build(near);
        }
        let mut systems = vec![s];
        engine::run(&mut VecReader(t.clone(), 0, usize::MAX), &mut systems, RunOptions::default(), |_| {}).unwrap();
        check(&format!("run, build {build:?}"), &systems[0]);
    }
    // And the general loop, for the same counts.
    let mut g = System::new(&c).unwrap();
    g.use_general_loop();
    g.process(&t).unwrap();
    check("general loop", &g);
}
