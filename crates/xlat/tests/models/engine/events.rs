//! Engine behaviour on hand-made record streams: ASIDs, flushes, unmap shootdowns, fork, exit,
//! multi-page accesses, the reference limit, and invariants under random traces and designs.

use proptest::prelude::*;
use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::stats::SystemStats;
use xlat::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};

/// Hands out a vector of records in small batches.
struct VecReader(Vec<Record>, usize);

impl TraceReader for VecReader {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        out.clear();
        let n = (self.0.len() - self.1).min(max).min(7);
        out.extend_from_slice(&self.0[self.1..self.1 + n]);
        self.1 += n;
        Ok(n)
    }
    fn stats(&self) -> ReaderStats {
        ReaderStats::default()
    }
}

fn load(addr: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr }
}

fn cfg(extra: &str, kind: &str) -> Config {
    let text =
        format!("name = \"t\"\n{extra}\n[[tlb]]\nname = \"L1\"\nentries = 64\n[page_table]\nkind = \"{kind}\"\n");
    Config::from_toml(&text, "test").unwrap()
}

fn run_one(c: &Config, records: Vec<Record>, max_refs: Option<u64>) -> (SystemStats, engine::RunSummary) {
    let mut systems = vec![System::new(c).unwrap()];
    let summary = engine::run(&mut VecReader(records, 0), &mut systems, RunOptions { max_refs }, |_| {}).unwrap();
    (systems[0].stats(), summary)
}

fn touch(pages: std::ops::Range<u64>) -> impl Iterator<Item = Record> {
    pages.map(|p| load(p * 4096 + 16))
}

#[test]
fn tagged_entries_survive_switches_and_flush_mode_loses_them() {
    let mut t = Vec::new();
    for asid in [1, 2, 1, 2] {
        t.push(Record::ContextSwitch { asid });
        t.extend(touch(0..5));
    }
    for kind in ["radix", "linear", "hashed", "clustered"] {
        let (tagged, _) = run_one(&cfg("", kind), t.clone(), None);
        assert_eq!(tagged.tlb[0].misses, 10, "{kind}: first touch per process only");
        assert_eq!(tagged.page_faults, 10, "{kind}");
        assert_eq!(tagged.events.context_switches, 4);
        let (flushed, _) = run_one(&cfg("asid = \"flush\"", kind), t.clone(), None);
        assert_eq!(flushed.tlb[0].misses, 20, "{kind}: every switch empties the TLB");
        assert_eq!(flushed.page_faults, 10, "{kind}: frames stay mapped");
        assert_eq!(flushed.events.flushes, 4);
    }
}

#[test]
fn unmap_shoots_down_and_refaults() {
    let mut t: Vec<Record> = touch(0..4).collect();
    t.push(Record::Unmap { start: 4096, len: 2 * 4096 }); // pages 1 and 2
    t.extend(touch(0..4));
    for kind in ["radix", "linear", "hashed", "clustered"] {
        let (s, _) = run_one(&cfg("", kind), t.clone(), None);
        assert_eq!(s.events.pages_unmapped, 2, "{kind}");
        assert_eq!(s.tlb[0].invalidations, 2, "{kind}");
        assert_eq!(s.tlb[0].misses, 6, "{kind}: 4 cold + 2 unmapped");
        assert_eq!(s.page_faults, 6, "{kind}");
    }
}

#[test]
fn fork_shares_frames_and_exit_drops_entries() {
    let mut t: Vec<Record> = vec![Record::Process { asid: 1 }];
    t.extend(touch(0..3));
    t.push(Record::Fork { child: 7 });
    t.push(Record::ContextSwitch { asid: 7 });
    t.extend(touch(0..3));
    t.push(Record::Exit { asid: 7 });
    t.push(Record::ContextSwitch { asid: 1 });
    t.extend(touch(0..3));
    for kind in ["radix", "linear", "hashed", "clustered"] {
        let (s, _) = run_one(&cfg("", kind), t.clone(), None);
        assert_eq!(s.page_faults, 3, "{kind}: the child finds the parent's pages mapped");
        assert_eq!(s.tlb[0].misses, 6, "{kind}: the child misses in the TLB (other ASID)");
        if kind == "linear" {
            // The child's page-table-page translations share the main entries and go too.
            assert!(s.tlb[0].invalidations > 3, "{kind}: exit flushed the child's entries");
        } else {
            assert_eq!(s.tlb[0].invalidations, 3, "{kind}: exit flushed the child's entries");
        }
        assert_eq!(s.events.forks, 1);
        assert_eq!(s.events.exits, 1);
    }
}

#[test]
fn an_access_touches_every_page_it_spans() {
    let t = vec![
        Record::Access { kind: Kind::Store, size: 16, addr: 4096 - 8 }, // pages 0 and 1
        Record::Access { kind: Kind::Ifetch, size: 3 * 4096, addr: 8192 }, // pages 2, 3, 4
        Record::Access { kind: Kind::Modify, size: 1, addr: 4095 },     // page 0
    ];
    let (s, summary) = run_one(&cfg("", "radix"), t, None);
    assert_eq!(summary.trace.references, 3);
    assert_eq!(summary.trace.lookups, 6);
    assert_eq!(s.lookups, 6);
    assert_eq!(s.ifetch_lookups, 3);
    assert_eq!(s.tlb[0].misses, 5);
}

#[test]
fn max_refs_stops_and_says_so() {
    let t: Vec<Record> = touch(0..100).collect();
    let (s, summary) = run_one(&cfg("", "radix"), t.clone(), Some(30));
    assert_eq!(summary.trace.references, 30);
    assert!(summary.truncated_by_limit);
    assert_eq!(s.lookups, 30);
    let (_, all) = run_one(&cfg("", "radix"), t, Some(100));
    assert!(!all.truncated_by_limit, "the limit equals the trace length");
}

#[test]
fn linear_table_takes_nested_misses_through_reserved_entries() {
    // 40 pages spread 2 MB apart: each needs its own page of level-1 PTEs (512 PTEs per page).
    let t: Vec<Record> = (0..40).map(|i| load(i << 21)).collect();
    let text = "name = \"lin\"\n[[tlb]]\nname = \"TLB\"\nentries = 64\nreserved = 8\n[page_table]\nkind = \"linear\"\n";
    let c = Config::from_toml(text, "test").unwrap();
    let (s, _) = run_one(&c, t.clone(), None);
    assert_eq!(s.tlb.len(), 2, "main + reserved partition");
    assert_eq!(s.tlb[0].misses, 40);
    assert!(s.walks.nested_misses >= 40, "each walk misses on its PTE page: {}", s.walks.nested_misses);
    assert_eq!(s.tlb[1].misses, s.walks.nested_misses, "nested misses are reserved-partition misses");
    // Touching the same pages again: all hits in the 56 main entries, no walks.
    let mut twice = t.clone();
    twice.extend(t);
    let (s2, _) = run_one(&c, twice, None);
    assert_eq!(s2.walks.count, s.walks.count);
}

#[test]
fn software_refill_charges_traps_per_miss_and_nested_miss() {
    let t: Vec<Record> = touch(0..10).collect();
    let text = "name = \"sw\"\n[[tlb]]\nname = \"TLB\"\nentries = 64\nlatency = 0\n[page_table]\nkind = \"radix\"\n[cost]\nrefill = \"software\"\ntrap_cycles = 7\nmemory_cycles = 3\n";
    let (s, _) = run_one(&Config::from_toml(text, "test").unwrap(), t, None);
    assert_eq!(s.walks.count, 10);
    assert_eq!(s.cycles.refill_overhead, 70);
    assert_eq!(s.cycles.walk_memory, 3 * s.walks.memory_refs);
    assert_eq!(s.cycles.total(), 70 + 3 * s.walks.memory_refs);
}

fn arb_design() -> impl Strategy<Value = String> {
    (
        prop::sample::select(vec![(1u32, 1u32), (4, 4), (8, 2), (12, 3), (64, 64), (32, 4)]),
        prop::sample::select(vec!["lru", "fifo", "random", "nru", "plru"]),
        prop::sample::select(vec!["radix", "linear", "hashed", "clustered"]),
        prop::bool::ANY,
        prop::sample::select(vec!["tagged", "flush"]),
    )
        .prop_filter("plru needs power-of-two ways", |((_, w), p, _, _, _)| *p != "plru" || w.is_power_of_two())
        .prop_map(|((entries, ways), policy, kind, two_levels, asid)| {
            let mut s = format!(
                "name = \"p\"\nasid = \"{asid}\"\n[[tlb]]\nname = \"L1\"\nentries = {entries}\nways = {ways}\npolicy = \"{policy}\"\n"
            );
            if two_levels {
                s += "[[tlb]]\nname = \"L2\"\nentries = 64\nways = 4\nlevel = 2\n";
            }
            s + &format!("[page_table]\nkind = \"{kind}\"\n")
        })
}

fn arb_trace() -> impl Strategy<Value = Vec<Record>> {
    let rec = prop_oneof![
        8 => (0u64..40, 0u64..4096, 1u32..64, 0u8..4).prop_map(|(p, off, size, k)| Record::Access {
            kind: Kind::from_code(k).unwrap(), size, addr: (p << 12) * 37 + off }),
        1 => (1u32..4).prop_map(|asid| Record::ContextSwitch { asid }),
        1 => (0u64..40, 1u64..3).prop_map(|(p, n)| Record::Unmap { start: (p << 12) * 37, len: n << 12 }),
    ];
    prop::collection::vec(rec, 1..400)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, failure_persistence: None, ..ProptestConfig::default() })]
    #[test]
    fn counters_are_consistent(design in arb_design(), trace in arb_trace()) {
        let c = Config::from_toml(&design, "prop").unwrap();
        let (s, summary) = run_one(&c, trace, None);
        for t in &s.tlb {
            prop_assert_eq!(t.hits + t.misses, t.accesses);
        }
        prop_assert_eq!(s.lookups, summary.trace.lookups);
        prop_assert_eq!(s.tlb[0].accesses, s.lookups);
        let last = if s.tlb.len() > 1 && c.tlb.len() > 1 { s.tlb[1].misses } else { s.tlb[0].misses };
        prop_assert_eq!(s.walks.count, last);
        prop_assert!(s.page_faults <= s.walks.count);
    }
}

#[test]
fn global_pages_are_shared_by_every_process_and_survive_flushes() {
    // Pages 0..4 are private; pages 0x100..0x104 lie in the global region.
    let mut t = Vec::new();
    for asid in [1, 2, 1, 2] {
        t.push(Record::ContextSwitch { asid });
        t.extend(touch(0..4));
        t.extend(touch(0x100..0x104));
    }
    let global = "os.global = [\"0x100000-0x104000\"]";
    for (extra, private_misses) in [("", 8), ("asid = \"flush\"", 16)] {
        let c = Config::from_toml(
            &format!(
                "name = \"g\"\n{extra}\n[[tlb]]\nname = \"L1\"\nentries = 64\n[os]\nglobal = [\"0x100000-0x104000\"]\n"
            ),
            "test",
        )
        .unwrap();
        let (s, _) = run_one(&c, t.clone(), None);
        // The global pages miss once in all (first touch by process 1), the private ones once
        // per process (tagged) or after every switch (flush).
        assert_eq!(s.tlb[0].misses, private_misses + 4, "{extra} {global}");
        assert_eq!(s.page_faults, 8 + 4, "private pages per process, global pages once");
    }
    let e = Config::from_toml(
        "name = \"g\"\n[[tlb]]\nname = \"L1\"\nentries = 4\n[os]\nglobal = [\"0x20-0x10\"]\n",
        "g.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("g.toml: line 6: os.global[0]:"), "{e}");
}

/// Table 2 sizes of the tables holding `spaces` (one set of VPNs per live process), worked out
/// here from the pages alone: a radix node per distinct prefix at each of four 9-bit levels (4 KB
/// each), a 24-byte hashed PTE per page, an `8s + 16`-byte clustered PTE per 16-page block.
fn reference_bytes(kind: &str, spaces: &[Vec<u64>]) -> u64 {
    use std::collections::BTreeSet;
    spaces
        .iter()
        .map(|vpns| match kind {
            "radix" => {
                let nodes: usize =
                    [27, 18, 9].iter().map(|&sh| vpns.iter().map(|v| v >> sh).collect::<BTreeSet<_>>().len()).sum();
                (1 + nodes as u64) * 4096
            }
            "hashed" => vpns.len() as u64 * 24,
            "clustered" => vpns.iter().map(|v| v >> 4).collect::<BTreeSet<_>>().len() as u64 * (8 * 16 + 16),
            _ => unreachable!(),
        })
        .sum()
}

#[test]
fn page_table_size_is_reported_at_its_peak_and_at_the_end() {
    // Process 1 touches a run of pages and a far page, forks 2 (which shares its table's pages
    // and touches more), then 1 exits; later 2 exits too. The peak is while both are alive.
    let p1: Vec<u64> = (0..40).chain([0x12345]).collect();
    let p2_own: Vec<u64> = (0x8000..0x8020).collect();
    let mut t = vec![Record::Process { asid: 1 }];
    t.extend(p1.iter().map(|&p| load(p * 4096)));
    t.push(Record::Fork { child: 2 });
    t.push(Record::ContextSwitch { asid: 2 });
    t.extend(p2_own.iter().map(|&p| load(p * 4096)));
    let both_alive = t.len();
    t.push(Record::Exit { asid: 1 });
    t.extend(touch(0x9000..0x9001));
    let one_left = t.len();
    t.push(Record::Exit { asid: 2 });
    let p2: Vec<u64> = p1.iter().chain(&p2_own).copied().collect();
    let p2_late: Vec<u64> = p2.iter().copied().chain([0x9000]).collect();
    for kind in ["radix", "hashed", "clustered"] {
        let peak = reference_bytes(kind, &[p1.clone(), p2.clone()]);
        for (cut, end) in
            [(both_alive, peak), (one_left, reference_bytes(kind, std::slice::from_ref(&p2_late))), (t.len(), 0)]
        {
            let mut systems = vec![System::new(&cfg("", kind)).unwrap()];
            let records = t[..cut].to_vec();
            engine::run(&mut VecReader(records, 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
            let s = &systems[0];
            assert_eq!(s.page_table().size().table_bytes, end, "{kind}: size at the end of {cut} records");
            assert_eq!(s.page_table_peak().table_bytes, peak, "{kind}: peak over {cut} records");
        }
    }
}

#[test]
fn a_failing_design_stops_alone_and_says_where() {
    // The 32-bit design cannot translate the 11th reference; the 48-bit one simulates everything
    // and counts exactly what it counts alone.
    let mut t: Vec<Record> = vec![Record::Process { asid: 0 }];
    t.extend(touch(0..10));
    t.push(Record::Marker { id: 1 });
    t.push(load(1 << 40));
    t.extend(touch(0..20));
    let narrow = cfg("", "radix");
    let mut narrow = narrow;
    narrow.name = "narrow".into();
    narrow.page_table.va_bits = 32;
    let wide = cfg("", "radix");
    let (alone, _) = run_one(&wide, t.clone(), None);
    let mut systems = vec![System::new(&narrow).unwrap(), System::new(&wide).unwrap()];
    let summary = engine::run(&mut VecReader(t.clone(), 0), &mut systems, RunOptions::default(), |_| {}).unwrap();
    assert_eq!(summary.trace.references, 31);
    let f = systems[0].failure().expect("the 32-bit design fails");
    assert_eq!((f.reference, f.record), (11, 13), "{f:?}");
    assert!(f.error.to_string().contains("0x10000000000 lies outside the 32-bit"), "{}", f.error);
    assert!(systems[1].failure().is_none());
    assert_eq!(systems[1].stats(), alone);
}

/// Hand-worked: one page touched (1 cold miss, 1 fault), protected read-only (it had read and
/// write: a right lost), touched again: exactly one more miss, no more faults.
#[test]
fn a_protect_that_removes_a_right_costs_one_more_miss() {
    use xlat::trace::map_flags::{READ, WRITE};
    let t = vec![
        Record::Map { start: 0, len: 4 * 4096, flags: READ | WRITE },
        load(16),
        load(4096 + 16),
        Record::Protect { start: 0, len: 4096, flags: READ },
        load(16),
        load(4096 + 16),
    ];
    for kind in ["radix", "linear", "hashed", "clustered"] {
        let (s, _) = run_one(&cfg("", kind), t.clone(), None);
        assert_eq!(s.tlb[0].misses, 3, "{kind}: 2 cold + the protected page");
        assert_eq!(s.page_faults, 2, "{kind}: the page stays resident");
        assert_eq!(s.tlb[0].invalidations, 1, "{kind}");
        assert_eq!((s.events.protects, s.events.protect_shootdowns, s.events.pages_protected), (1, 1, 1), "{kind}");
    }
}

/// A protect that only adds rights (read -> read/write/exec), or keeps them, invalidates
/// nothing: the second pass hits.
#[test]
fn a_protect_that_only_adds_rights_invalidates_nothing() {
    use xlat::trace::map_flags::{EXEC, READ, WRITE};
    let t = vec![
        Record::Map { start: 0, len: 2 * 4096, flags: READ },
        load(16),
        load(4096 + 16),
        Record::Protect { start: 0, len: 2 * 4096, flags: READ | WRITE | EXEC },
        Record::Protect { start: 0, len: 4096, flags: READ | WRITE | EXEC },
        load(16),
        load(4096 + 16),
    ];
    let (s, _) = run_one(&cfg("", "radix"), t, None);
    assert_eq!(s.tlb[0].misses, 2, "cold misses only");
    assert_eq!(s.tlb[0].invalidations, 0);
    assert_eq!((s.events.protects, s.events.protect_shootdowns, s.events.pages_protected), (2, 0, 0));
}

/// A range the trace never mapped counts as having had every right; a protect over pages none
/// of which is resident shoots nothing down.
#[test]
fn a_protect_of_unmapped_or_untouched_pages() {
    use xlat::trace::map_flags::READ;
    let t = vec![
        load(16),
        Record::Protect { start: 0, len: 4096, flags: READ }, // never mapped: a right lost
        Record::Protect { start: 8 * 4096, len: 4096, flags: 0 }, // not resident
        load(16),
    ];
    let (s, _) = run_one(&cfg("", "radix"), t, None);
    assert_eq!(s.tlb[0].misses, 2);
    assert_eq!((s.events.protects, s.events.protect_shootdowns, s.events.pages_protected), (2, 1, 1));
}

/// Hand-worked: four pages touched (4 misses, 4 faults); pages 1 and 2 discarded (frames
/// freed, mapping kept); the four touched again: 2 more misses and 2 more faults. With
/// MADV_FREE (lazy) the pages stay: 2 more misses, no fault.
#[test]
fn a_discard_frees_the_pages_and_the_next_touch_faults() {
    for (lazy, faults) in [(false, 6), (true, 4)] {
        let mut t: Vec<Record> = touch(0..4).collect();
        t.push(Record::Discard { start: 4096, len: 2 * 4096, lazy });
        t.extend(touch(0..4));
        for kind in ["radix", "linear", "hashed", "clustered"] {
            let (s, _) = run_one(&cfg("", kind), t.clone(), None);
            assert_eq!(s.tlb[0].misses, 6, "{kind} lazy {lazy}: 4 cold + 2 discarded");
            assert_eq!(s.page_faults, faults, "{kind} lazy {lazy}");
            assert_eq!(s.tlb[0].invalidations, 2, "{kind} lazy {lazy}");
            assert_eq!((s.events.discards, s.events.pages_discarded), (1, 2), "{kind} lazy {lazy}");
            assert_eq!(s.events.pages_unmapped, 0, "{kind}: a discard is no unmap");
        }
    }
}
