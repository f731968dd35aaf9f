//! Several cores (docs/multicore.md) on hand-made record streams, each count worked by hand:
//! thread placement, shootdowns under each policy, ASID recycling, shared and private TLB
//! levels, and the one-line errors of bad `[cores]` and `[os.shootdown]` values.

use xlat::config::Config;
use xlat::engine::System;
use xlat::stats::SystemStats;
use xlat::trace::{Kind, Record};

fn load(page: u64) -> Record {
    Record::Access { kind: Kind::Load, size: 8, addr: page * 4096 + 16 }
}

/// A design of `extra` keys over one 64-entry L1 TLB (`tlbs` replaces it if given).
fn cfg(extra: &str, tlbs: Option<&str>) -> Config {
    let tlbs = tlbs.unwrap_or("[[tlb]]\nname = \"L1\"\nentries = 64\n");
    Config::from_toml(&format!("name = \"t\"\n{extra}\n{tlbs}"), "test").unwrap()
}

fn run(c: &Config, records: &[Record]) -> SystemStats {
    let mut s = System::new(c).unwrap();
    // In batches of three records, as a reader might cut them.
    for b in records.chunks(3) {
        s.process(b).unwrap();
    }
    s.stats()
}

/// Process 1's threads 1 and 2 run on cores 0 and 1 (pinned: threads in order of first
/// appearance); thread 1 touches page 10, thread 2 page 20 (and page 10 if `both`); then
/// thread 1 unmaps page 10.
fn unmap_trace(both: bool) -> Vec<Record> {
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }, load(10)];
    t.push(Record::Thread { tid: 2 });
    t.push(load(20));
    if both {
        t.push(load(10));
    }
    t.push(Record::Thread { tid: 1 });
    t.push(Record::Unmap { start: 10 * 4096, len: 4096 });
    t
}

fn two_cores(policy: &str) -> Config {
    cfg(&format!("[cores]\ncount = 2\nscheduler = \"pinned\"\n[os.shootdown]\npolicy = \"{policy}\"\n"), None)
}

#[test]
fn an_unmap_only_the_unmapping_core_holds_is_one_unnecessary_ipi_under_linux_and_none_under_ideal() {
    let t = unmap_trace(false);
    let linux = run(&two_cores("linux"), &t);
    let sd = linux.shootdowns.unwrap();
    assert_eq!((sd.initiated, sd.ipis, sd.necessary_ipis, sd.pages, sd.full_flushes), (1, 1, 0, 1, 0));
    assert_eq!(sd.entries_invalidated, 0, "core 1 held page 20 only");
    // Thread 1 runs on core 0 and started it; core 1 took the IPI.
    assert_eq!(linux.cores[0].shootdowns.initiated, 1);
    assert_eq!(linux.cores[0].shootdowns.ipis, 1);
    assert_eq!(linux.cores[1].shootdowns.initiated, 0);
    assert_eq!((linux.cores[0].lookups, linux.cores[1].lookups), (1, 1));
    assert_eq!((linux.cores[0].switches, linux.cores[1].switches), (1, 1));
    // The unmapping core's own entry went at once.
    assert_eq!(linux.tlb[0].invalidations, 1);
    assert_eq!(linux.cores[0].tlb[0].invalidations, 1);

    let ideal = run(&two_cores("ideal"), &t).shootdowns.unwrap();
    assert_eq!((ideal.initiated, ideal.ipis, ideal.necessary_ipis), (1, 0, 0));
    let lazy = run(&two_cores("lazy"), &t).shootdowns.unwrap();
    assert_eq!((lazy.initiated, lazy.ipis, lazy.necessary_ipis), (1, 0, 0));
}

#[test]
fn with_a_clock_the_report_gives_ipis_per_second_of_the_cores_time() {
    // 2 loads, each a page fault of 1,000 cycles at cpi 0 with no instructions, and one
    // shootdown of 500 + 1 x 250 cycles: 2,750 cycles, 2.75 us at 1,000 MHz, 1 IPI.
    let keys = "[cores]\ncount = 2\nscheduler = \"pinned\"\n[os.shootdown]\ninitiator_cycles = 500\nipi_cycles = 250\n\
                [time]\ncpi = 0.0\nclock_mhz = 1000\n[cost]\npage_fault_cycles = 1000\nmemory_cycles = 0\n\
                [memory]\nlatency = 0\n[page_table]\nkind = \"linear\"\n";
    let mut s = System::new(&cfg(keys, None)).unwrap();
    s.process(&unmap_trace(false)).unwrap();
    let st = s.stats();
    let t = st.time.unwrap();
    assert_eq!((t.instructions, t.faults, t.shootdown), (0, 2000, 750));
    assert_eq!(t.cycles, 2750, "{t:?}");
    let v = xlat::report::design_json(&s);
    assert_eq!(v["time"]["seconds"].as_f64(), Some(2.75e-6));
    let rate = v["shootdowns"]["ipis_per_second"].as_f64().unwrap();
    assert!((rate - 1.0 / 2.75e-6).abs() < 1e-6 * rate, "{rate}");
}

#[test]
fn shootdown_cycles_are_their_costs_times_the_counts_and_part_of_the_total() {
    let t = unmap_trace(true);
    let costs = "initiator_cycles = 1000\nipi_cycles = 10\nentry_cycles = 3\n";
    let keys = |c: &str| format!("[cores]\ncount = 2\nscheduler = \"pinned\"\n[os.shootdown]\npolicy = \"linux\"\n{c}");
    let free = run(&cfg(&keys("initiator_cycles = 0\nipi_cycles = 0\nentry_cycles = 0\nflush_cycles = 0\n"), None), &t);
    let paid = run(&cfg(&keys(costs), None), &t);
    let sd = paid.shootdowns.unwrap();
    // One shootdown with one IPI: 1000 + 1 x 10 cycles on core 0; core 1 invalidated page 10's
    // one entry: 3 cycles there.
    assert_eq!((sd.initiator_cycles, sd.target_cycles), (1010, 3));
    assert_eq!((paid.cores[0].shootdowns.initiator_cycles, paid.cores[1].shootdowns.target_cycles), (1010, 3));
    assert_eq!(paid.cycles.shootdown, 1013);
    assert_eq!(free.cycles.shootdown, 0);
    assert_eq!(paid.cycles.total(), free.cycles.total() + 1013, "the same counts otherwise");
}

#[test]
fn a_target_that_flushes_the_space_whole_pays_one_flush_not_its_entries() {
    // As below: core 1 holds pages 10-12 of process 1; thread 1 unmaps 10-11 with a ceiling of
    // 1 page, so core 1 flushes process 1 whole (3 entries): flush_cycles once, not 3 x
    // entry_cycles. Under ideal (no ceiling) it invalidates pages 10 and 11 one by one.
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }, load(10)];
    t.extend([Record::Thread { tid: 2 }, load(10), load(11), load(12)]);
    t.extend([Record::Thread { tid: 1 }, Record::Unmap { start: 10 * 4096, len: 2 * 4096 }]);
    let costs = "initiator_cycles = 1000\nipi_cycles = 10\nentry_cycles = 7\nflush_cycles = 50\n";
    let c = |p: &str| {
        cfg(&format!("[cores]\ncount = 2\nscheduler = \"pinned\"\n[os.shootdown]\npolicy = \"{p}\"\nflush_ceiling = 1\n{costs}"), None)
    };
    let sd = run(&c("linux"), &t).shootdowns.unwrap();
    assert_eq!((sd.full_flushes, sd.entries_invalidated), (1, 3));
    assert_eq!((sd.initiator_cycles, sd.target_cycles), (1010, 50));
    let sd = run(&c("ideal"), &t).shootdowns.unwrap();
    assert_eq!((sd.full_flushes, sd.entries_invalidated), (0, 2));
    assert_eq!((sd.initiator_cycles, sd.target_cycles), (1010, 14));

    // A lazy core that catches up when it loads the space again flushes it whole: core 1 runs
    // process 2, then thread 3 (core 0) unmaps page 10, then thread 2 runs again on core 1.
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }, load(10)];
    t.extend([Record::Thread { tid: 2 }, load(10), Record::Thread { tid: 3 }, load(11)]);
    t.extend([Record::Process { asid: 2 }, load(50), Record::Process { asid: 1 }]);
    t.extend([Record::Unmap { start: 10 * 4096, len: 4096 }, Record::Thread { tid: 2 }, load(10)]);
    let s = run(&c("linux"), &t);
    let sd = s.shootdowns.unwrap();
    assert_eq!((sd.ipis, sd.entries_invalidated), (0, 1));
    assert_eq!((sd.initiator_cycles, sd.target_cycles), (0, 50), "no IPI; one flush on core 1");
    assert_eq!(s.cores[1].shootdowns.target_cycles, 50);
}

#[test]
fn the_default_costs_are_the_cited_measurements() {
    // Amit (2019): 661, 1,436 and 1,571 ns with 0, 1 and 3 remote targets fit a + n x b:
    // b = (910 - 775) / 2 ns, a = 775 ns - b; at 4 GHz. Molnar (2015): INVLPG 260 cycles, a
    // CR3 write 96.
    let d = xlat::multicore::ShootdownConfig::default();
    let (one, three) = (1436.0 - 661.0, 1571.0 - 661.0);
    let b = (three - one) / 2.0;
    let a = one - b;
    assert_eq!((d.initiator_cycles, d.ipi_cycles), ((a * 4.0) as u64, (b * 4.0) as u64));
    assert_eq!((d.entry_cycles, d.flush_cycles), (260, 96));
}

#[test]
fn an_unmap_both_cores_hold_is_a_necessary_ipi_and_lazy_cores_invalidate_at_their_tick() {
    let t = unmap_trace(true);
    for policy in ["linux", "ideal"] {
        let s = run(&two_cores(policy), &t);
        let sd = s.shootdowns.unwrap();
        assert_eq!((sd.ipis, sd.necessary_ipis, sd.entries_invalidated), (1, 1, 1), "{policy}");
        assert_eq!(s.cores[1].shootdowns.entries_invalidated, 1, "{policy}");
        assert_eq!(s.cores[1].tlb[0].invalidations, 1, "{policy}");
        assert_eq!(s.tlb[0].invalidations, 2, "{policy}: one entry on each core");
    }
    // Lazy: no IPI; core 1 invalidates at its next timer tick (every 4 lookups here, taken
    // at the first event after it), not before.
    let lazy =
        cfg("[cores]\ncount = 2\nscheduler = \"pinned\"\nquantum = 4\n[os.shootdown]\npolicy = \"lazy\"\n", None);
    let s = run(&lazy, &t);
    assert_eq!(s.shootdowns.unwrap().ipis, 0);
    assert_eq!(s.shootdowns.unwrap().entries_invalidated, 0, "3 lookups: no tick yet");
    let mut later = t.clone();
    later.push(load(30));
    later.push(Record::Marker { id: 0 });
    let s = run(&lazy, &later);
    assert_eq!(s.shootdowns.unwrap().entries_invalidated, 1, "the tick after 4 lookups");
    assert_eq!(s.cores[1].shootdowns.entries_invalidated, 1);
}

#[test]
fn linux_flushes_the_space_whole_above_the_ceiling_and_skips_lazy_cores_unless_asked() {
    // Core 1 holds 3 pages of process 1; thread 1 unmaps 2 of them with a ceiling of 1 page:
    // a full flush of process 1 on both cores.
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }, load(10)];
    t.extend([Record::Thread { tid: 2 }, load(10), load(11), load(12)]);
    t.extend([Record::Thread { tid: 1 }, Record::Unmap { start: 10 * 4096, len: 2 * 4096 }]);
    let c = cfg("[cores]\ncount = 2\nscheduler = \"pinned\"\n[os.shootdown]\nflush_ceiling = 1\n", None);
    let sd = run(&c, &t).shootdowns.unwrap();
    assert_eq!((sd.ipis, sd.necessary_ipis, sd.full_flushes, sd.pages, sd.entries_invalidated), (1, 1, 1, 2, 3));

    // Process 1's threads 1 and 3 run on core 0, thread 2 on core 1 (pinned); then process 2
    // runs on core 1, which keeps process 1's ASID: a lazy core for process 1. Thread 3
    // unmaps page 10, which core 1 holds.
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }, load(10)];
    t.extend([Record::Thread { tid: 2 }, load(10), Record::Thread { tid: 3 }, load(11)]);
    t.extend([Record::Process { asid: 2 }, load(50), Record::Process { asid: 1 }]);
    t.push(Record::Unmap { start: 10 * 4096, len: 4096 });
    let skip = cfg("[cores]\ncount = 2\nscheduler = \"pinned\"\n", None);
    let s = run(&skip, &t).shootdowns.unwrap();
    assert_eq!((s.ipis, s.entries_invalidated), (0, 0), "no IPI to a lazy core");
    // When thread 2 runs again on core 1, core 1 flushes process 1's entries (page 10), and
    // its lookup of page 10 misses.
    let mut back = t.clone();
    back.extend([Record::Thread { tid: 2 }, load(10)]);
    let s = run(&skip, &back);
    assert_eq!(s.shootdowns.unwrap().entries_invalidated, 1);
    assert_eq!((s.cores[1].tlb[0].misses, s.cores[1].tlb[0].invalidations), (3, 1));
    let asked = cfg("[cores]\ncount = 2\nscheduler = \"pinned\"\n[os.shootdown]\nlazy_cores = true\n", None);
    let s = run(&asked, &t).shootdowns.unwrap();
    assert_eq!((s.ipis, s.necessary_ipis, s.entries_invalidated), (1, 1, 1), "lazy cores interrupted");
}

#[test]
fn a_core_whose_thread_moved_away_is_lazy_under_linux() {
    // Three cores, round-robin, a tick at every event after a lookup. Thread 1 of process 1
    // runs on core 0 and touches page 10; thread 2 takes core 1 and touches page 20; the tick
    // at the next record ends core 0's placement, so thread 1 takes the next core in turn,
    // core 2, and core 0 runs no thread (it keeps process 1 loaded, lazily, as an idle Linux
    // CPU does). Thread 1 unmaps page 10: core 1 runs thread 2, an IPI that finds nothing;
    // core 0 is skipped, and flushes process 1's entries (page 10's) when thread 3 is placed
    // on it; its lookup of page 10 then misses.
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }, load(10)];
    t.extend([Record::Thread { tid: 2 }, load(20), Record::Thread { tid: 1 }]);
    t.push(Record::Unmap { start: 10 * 4096, len: 4096 });
    t.extend([Record::Thread { tid: 3 }, load(10)]);
    let keys = |lazy: bool| format!("[cores]\ncount = 3\nquantum = 1\n[os.shootdown]\nlazy_cores = {lazy}\n");
    let s = run(&cfg(&keys(false), None), &t);
    let sd = s.shootdowns.unwrap();
    assert_eq!((sd.initiated, sd.ipis, sd.necessary_ipis, sd.entries_invalidated), (1, 1, 0, 1));
    assert_eq!(s.cores[2].shootdowns.initiated, 1, "thread 1 moved to core 2");
    assert_eq!((s.cores[0].switches, s.cores[0].space_switches), (2, 1), "thread 1, then thread 3");
    assert_eq!((s.cores[0].tlb[0].misses, s.cores[0].tlb[0].invalidations), (2, 1));
    assert_eq!(s.cores[0].shootdowns.entries_invalidated, 1, "flushed when thread 3 came");
    // Lazy cores interrupted: core 0 takes an IPI for page 10 at once.
    let s = run(&cfg(&keys(true), None), &t);
    let sd = s.shootdowns.unwrap();
    assert_eq!((sd.ipis, sd.necessary_ipis, sd.entries_invalidated), (2, 1, 1));
    assert_eq!((s.cores[0].tlb[0].misses, s.cores[0].tlb[0].invalidations), (2, 1));
}

/// Seven processes on core 0 of two (pinned; each real process's first appearance followed by
/// a filler process's, which goes to core 1), each touching page 5; then `tail` (processes).
fn asid_trace(first: &[u32], tail: &[u32]) -> Vec<Record> {
    let mut t = Vec::new();
    for (i, &p) in first.iter().enumerate() {
        t.extend([Record::ContextSwitch { asid: p }, load(5)]);
        t.extend([Record::ContextSwitch { asid: 100 + i as u32 }, load(5)]);
    }
    for &p in tail {
        t.extend([Record::ContextSwitch { asid: p }, load(5)]);
    }
    t
}

fn asid_cfg(asids: u32, recycling: &str) -> Config {
    cfg(
        &format!(
            "[cores]\ncount = 2\nscheduler = \"pinned\"\nasids_per_core = {asids}\nasid_recycling = \"{recycling}\"\n"
        ),
        None,
    )
}

#[test]
fn a_seventh_process_on_a_core_of_six_asids_recycles_the_least_recently_used() {
    // Core 0: processes 1, 3, 5, 7, 9, 11 take its six ASIDs; 13 recycles process 1's (least
    // recently used) and flushes its entry; 11 still hits; 1 misses and recycles 3's.
    let t = asid_trace(&[1, 3, 5, 7, 9, 11, 13], &[11, 1]);
    let s = run(&asid_cfg(6, "lru"), &t);
    let c0 = &s.cores[0];
    assert_eq!(c0.asid_flushes, 2);
    assert_eq!(c0.tlb[0].misses, 8, "7 first touches and process 1's again");
    assert_eq!(c0.tlb[0].invalidations, 2);
    assert_eq!(c0.lookups, 9);
    assert_eq!(s.cores[1].tlb[0].misses, 7);
    assert_eq!(s.cores[1].asid_flushes, 1, "its seven fillers: the seventh recycles one");
    // The two ends: unlimited ASIDs keep every entry; one ASID flushes on every space switch.
    let unlimited = run(&asid_cfg(0, "lru"), &t);
    assert_eq!((unlimited.cores[0].tlb[0].misses, unlimited.cores[0].asid_flushes), (7, 0));
    let one = run(&asid_cfg(1, "lru"), &t);
    assert_eq!((one.cores[0].tlb[0].misses, one.cores[0].asid_flushes), (9, 8));
    let flush = cfg("asid = \"flush\"\n[cores]\ncount = 2\nscheduler = \"pinned\"\n", None);
    let f = run(&flush, &t);
    assert_eq!(f.cores[0].tlb[0].misses, 9);
}

#[test]
fn round_robin_recycling_takes_the_next_asid_in_turn() {
    // Six processes fill core 0's ASIDs; process 1 runs again (its use refreshed); 13 then
    // takes LRU's victim, process 3, or the next slot in turn, process 1's.
    let t = asid_trace(&[1, 3, 5, 7, 9, 11], &[1, 13, 1]);
    // The tail's processes 1 and 13: 13 is new, so it goes by order of first appearance: the
    // 13th thread, core 0.
    let lru = run(&asid_cfg(6, "lru"), &t);
    assert_eq!((lru.cores[0].tlb[0].misses, lru.cores[0].asid_flushes), (7, 1));
    let rr = run(&asid_cfg(6, "round-robin"), &t);
    assert_eq!((rr.cores[0].tlb[0].misses, rr.cores[0].asid_flushes), (8, 2));
}

#[test]
fn a_shared_l2_tlb_serves_the_other_cores_misses_and_private_ones_do_not() {
    let tlbs = |shared: bool| {
        format!(
            "[[tlb]]\nname = \"L1\"\nentries = 4\n[[tlb]]\nname = \"L2\"\nentries = 64\nlevel = 2\nshared = {shared}\n"
        )
    };
    // Threads 1 and 2 of process 1 on cores 0 and 1 each touch pages 0 to 3.
    let mut t = vec![Record::Process { asid: 1 }, Record::Thread { tid: 1 }];
    t.extend((0..4).map(load));
    t.push(Record::Thread { tid: 2 });
    t.extend((0..4).map(load));
    let c = |shared| cfg("[cores]\ncount = 2\nscheduler = \"pinned\"\n", Some(&tlbs(shared)));
    let shared = run(&c(true), &t);
    assert_eq!((shared.tlb[1].accesses, shared.tlb[1].hits, shared.tlb[1].misses), (8, 4, 4));
    assert_eq!(shared.walks.count, 4);
    assert_eq!((shared.cores[1].tlb[0].misses, shared.cores[1].tlb[1].hits), (4, 4));
    let private = run(&c(false), &t);
    assert_eq!((private.tlb[1].accesses, private.tlb[1].hits, private.tlb[1].misses), (8, 0, 8));
    assert_eq!(private.walks.count, 8);
    assert_eq!(private.page_faults, 4, "one page table: the second core's walks find the pages");
}

#[test]
fn one_thread_on_several_cores_counts_as_on_one() {
    let mut t = vec![Record::Process { asid: 1 }];
    for i in 0..200u64 {
        t.push(load(i * 7 % 90));
        if i % 50 == 49 {
            t.push(Record::Unmap { start: (i % 90) * 4096, len: 3 * 4096 });
        }
    }
    let one = run(&cfg("", None), &t);
    let eight = run(&cfg("[cores]\ncount = 8\n", None), &t);
    assert_eq!(one.tlb, eight.tlb);
    assert_eq!((one.walks, one.page_faults), (eight.walks, eight.page_faults));
    let sd = eight.shootdowns.unwrap();
    assert_eq!((sd.initiated, sd.ipis), (4, 0), "no other core ever ran process 1");
    assert!(one.cores.is_empty() && one.shootdowns.is_none());
}

#[test]
fn bad_core_and_shootdown_values_name_their_key() {
    for (text, key) in [
        ("[cores]\ncount = 0\n", "cores.count"),
        ("[cores]\ncount = 100000\n", "cores.count"),
        ("[cores]\nquantum = 0\n", "cores.quantum"),
        ("[cores]\nasids_per_core = 5000\n", "cores.asids_per_core"),
        ("[cores]\nscheduler = \"fifo\"\n", "[cores]"),
        ("[cores]\nthreads = 2\n", "threads"),
        ("[os.shootdown]\npolicy = \"eager\"\n", "shootdown"),
        ("[os.shootdown]\nipi_cycles = 99999999999\n", "os.shootdown.ipi_cycles"),
        ("[os.shootdown]\nflush_ceiling = 99999999999999\n", "os.shootdown.flush_ceiling"),
        ("[cores]\ncount = 2\n[os]\npersonality = \"mach3\"\n", "cores.count"),
    ] {
        let full = format!("name = \"t\"\n{text}[[tlb]]\nname = \"L1\"\nentries = 64\n");
        let e = match Config::from_toml(&full, "test") {
            Err(e) => e.to_string(),
            Ok(c) => System::new(&c).expect_err("rejected").to_string(),
        };
        assert!(e.contains(key) && !e.contains('\n'), "{text}: {e}");
    }
}
