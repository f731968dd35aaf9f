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
/// Pages 0..=5 of process 1, written before the fork.
const A: u64 = 0x5000_0000;
/// Pages G0..=G63 of process 1, read before the fork (to evict entries with).
const G: u64 = 0x6000_0000;

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

fn store(addr: u64) -> Record {
    Record::Access { kind: Kind::Store, size: 8, addr }
}

fn p(k: u64) -> u64 {
    A + k * PAGE + 24
}

fn g(k: u64) -> u64 {
    G + k * PAGE + 8
}

/// A 32-entry fully associative LRU TLB over a radix table, the page cache on (the default).
fn design() -> Config {
    let text = "name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = 32\npolicy = \"lru\"\n[page_table]\nkind = \"radix\"\n";
    Config::from_toml(text, "test").unwrap()
}

/// Process 1 reads G0..=G63 and writes 0..=5 (70 misses and faults; the TLB then holds, least
/// recently used first, G38..=G63 and 0..=5), and forks 7: the 70 frames are write-protected
/// and the parent's entries stay. Then (lookups, misses = walks, copies):
///
/// 1. load 5 (a hit on a protected page): 1, 0, 0;
/// 2. store 5 (a hit: the copy shoots the entry down and the store looks the page up again,
///    a miss): 2, 1, 1;
/// 3. store 5 (its own frame now): 1, 0, 0;
/// 4. load 4 twice, then store 4 (two hits on a protected page, then its copy): 4, 1, 1;
/// 5. store 2: 2, 1, 1. The TLB: G38..=G63, 0, 1, 3, 5, 4, 2;
/// 6. load G0..=G26 (27 misses: they evict G38..=G63 and 0), then 0 (a miss, walked after the
///    table's last change, so that the walk memo has it; it evicts 1), G27..=G37 (evicting 3, 5,
///    4, 2, G0..=G6), G38..=G58 (evicting G7..=G26 and 0): 60, 60, 0;
/// 7. store 0: a miss whose walk the memo answers, to a protected frame: the miss (evicting
///    G27), the copy, the miss again: 2, 2, 1;
/// 8. load 1 (a miss, memoised; it evicts G28), then G59..=G63 and G0..=G26 (32 misses, the last
///    evicting 1): 33, 33, 0;
/// 9. load 1 (a miss the memo answers: a fill of a protected page, evicting G59), store 1 (a
///    hit on that entry: its copy): 3, 2, 1.
///
/// Totals: lookups 70 + 108 = 178, misses and walks 70 + 100 = 170, 5 copies (each shooting
/// down one entry), 70 faults (the child finds the parent's pages mapped), frames 70 + 5 = 75;
/// the TLB ends with G60..=G63, G0..=G26 and 1.
fn trace() -> Vec<Record> {
    let mut t = vec![Record::Process { asid: 1 }];
    t.extend((0..64).map(|k| load(g(k))));
    t.extend((0..=5).map(|k| store(p(k))));
    t.push(Record::Fork { child: 7 });
    t.extend([load(p(5)), store(p(5)), store(p(5))]);
    t.extend([load(p(4)), load(p(4)), store(p(4)), store(p(2))]);
    t.extend((0..=26).map(|k| load(g(k))));
    t.push(load(p(0)));
    t.extend((27..=58).map(|k| load(g(k))));
    t.push(store(p(0)));
    t.push(load(p(1)));
    t.extend((59..=63).chain(0..=26).map(|k| load(g(k))));
    t.extend([load(p(1)), store(p(1))]);
    t
}

fn check(what: &str, s: &System) {
    let st: SystemStats = s.stats();
    assert!(s.failure().is_none(), "{what}");
    assert_eq!(st.os.cow_copies, 5, "{what}: copies");
    assert_eq!(st.lookups, 178, "{what}: lookups");
    assert_eq!(st.tlb[0].misses, 170, "{what}: misses");
    assert_eq!(st.walks.count, 170, "{what}: walks");
    assert_eq!(st.tlb[0].invalidations, 5, "{what}: invalidations");
    assert_eq!(st.page_faults, 70, "{what}: faults");
    assert_eq!(st.os.frames_in_use, 75, "{what}: frames");
    // The parent wrote every page but 3 after the fork: those have frames of their own.
    let frame = |asid: u32, addr: u64| s.os().frame(Asid(asid), Vpn(addr / PAGE)).expect("resident").0;
    for k in 0..=5 {
        assert_eq!(frame(1, p(k)) == frame(7, p(k)), k == 3, "{what}: page {k}");
    }
    let mut pages: Vec<u64> = s.structures()[0]
        .tlb
        .translations()
        .iter()
        .map(|&(asid, vpn, _)| {
            assert_eq!(asid, 1);
            vpn.0
        })
        .collect();
    pages.sort_unstable();
    let mut want: Vec<u64> = (60..64).chain(0..=26).map(|k| g(k) / PAGE).chain([p(1) / PAGE]).collect();
    want.sort_unstable();
    assert_eq!(pages, want, "{what}: the TLB's pages");
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
            assert!(s.is_plain_loop() && s.plain_loop_watches_writes());
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
    let mut general = System::new(&c).unwrap();
    general.use_general_loop();
    general.process(&t).unwrap();
    check("general loop", &general);
}

#[test]
fn only_a_fully_associative_lru_level_with_a_page_cache_keeps_the_plain_loop_watching() {
    let watches = |text: &str| {
        let s = System::new(&Config::from_toml(text, "test").unwrap()).unwrap();
        assert!(s.is_plain_loop(), "{text}");
        s.plain_loop_watches_writes()
    };
    let tlb = |entries: u32, extra: &str| format!("name = \"t\"\n[[tlb]]\nname = \"L1\"\nentries = {entries}\n{extra}");
    assert!(watches(&tlb(32, "")));
    assert!(!watches(&tlb(32, "[os]\npage_cache = false\n")));
    // Set associative, or too few ways for the fully associative index: the plain loop leaves
    // for the general one while the OS watches writes.
    assert!(!watches(&tlb(32, "ways = 4\n")));
    assert!(!watches(&tlb(8, "")));
    assert!(!watches(&tlb(32, "policy = \"fifo\"\n")));
}
