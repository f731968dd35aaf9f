//! Shadow superpages end to end (swanson98 §2.3-2.4, §3.3): the OS maps regions in superpages of
//! shadow addresses, the memory controller's TLB retranslates them, remaps flush the caches.
//! Expected counts are worked out here from the paper's rules and the machine's constants, not
//! read back from the engine; the property test follows every request that reaches DRAM.

use proptest::prelude::*;
use std::collections::HashMap;
use xlat::addr::{Asid, Vpn};
use xlat::config::Config;
use xlat::engine::System;
use xlat::os::shadow::{ShadowAllocator, ShadowMethod, ShadowPolicy};
use xlat::trace::map_flags::{HEAP, READ, WRITE};
use xlat::trace::{sysno, Kind, Record};

const PAGE: u64 = 4096;
const RW: u32 = READ | WRITE;

fn preset(name: &str) -> Config {
    Config::preset(name).unwrap()
}

fn access(kind: Kind, addr: u64) -> Record {
    Record::Access { kind, size: 4, addr }
}

fn madvise(buf: u64, len: u64) -> Record {
    Record::Syscall { nr: sysno::MADVISE, fd: 0, object: 0, buf, len }
}

fn run(cfg: &Config, recs: &[Record]) -> System {
    let mut s = System::new(cfg).unwrap();
    s.process(recs).unwrap();
    s
}

/// A 16 MB anonymous region read at random: 4096 pages against a 96-entry TLB's 384 KB reach.
#[test]
fn a_working_set_far_beyond_the_tlb_reach_takes_far_fewer_misses_in_shadow_superpages() {
    let base = 0x1000_0000u64;
    let mut recs = vec![Record::Map { start: base, len: 16 << 20, flags: RW }];
    let mut x = 12345u64;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        recs.push(access(Kind::Load, base + (x % (16 << 20)) / 8 * 8));
    }
    let plain = run(&preset("swanson98"), &recs);
    let shadow = run(&preset("swanson98-mtlb"), &recs);
    let (p, s) = (plain.stats(), shadow.stats());
    assert!(p.tlb[0].misses > 150_000, "{}", p.tlb[0].misses);
    assert!(s.tlb[0].misses * 100 < p.tlb[0].misses, "{} vs {}", s.tlb[0].misses, p.tlb[0].misses);
    let sh = shadow.os().shadow_stats().unwrap();
    // One 16 MB superpage (the region is 16 MB aligned), every page given a frame at once.
    assert_eq!((sh.superpages, sh.pages_remapped, sh.pages_allocated, sh.failures), (1, 4096, 4096, 0));
    assert_eq!(s.page_faults, 0);
    let m = shadow.caches().unwrap().mtlb().unwrap().stats();
    // Every fill and writeback of the program is a shadow request; the page table's are not.
    assert_eq!(m.requests, s.memory.reads + s.memory.writes);
    assert!(m.lookups * 1000 > m.requests * 999 && m.lookups < m.requests, "{m:?}");
    assert_eq!(m.unmapped, 0);
    shadow.check_translations().unwrap();
    let json = xlat::report::design_json(&shadow);
    assert_eq!(json["shadow"]["superpages"], 1);
    assert_eq!(json["shadow"]["pages_remapped"], 4096);
    assert!(json["shadow"]["flush_cycles"].as_u64().unwrap() > 0);
    assert_eq!(json["mtlb"]["lookups"], m.lookups);
    assert!(json["time"]["breakdown"]["remap"].as_u64().unwrap() > 0);
}

/// §3.3's remap of touched pages: every line of every page is flushed (the loop's cycles per
/// line, derived from em3d's remap in §3.3), dirty lines are written back through the controller
/// (each adding its transfer over the bus), and the pages keep their frames behind the shadow
/// addresses; reading a flushed page again pays the controller's cycle on every fill and the
/// MTLB miss's table read once.
#[test]
fn a_remap_flushes_every_line_and_keeps_every_frame() {
    let mut cfg = preset("swanson98-mtlb");
    cfg.os.shadow_superpages = ShadowPolicy::Markers;
    // 384 KB into the 512 KB direct-mapped cache's index: no set shared with the page table.
    let base = 0x4006_0000u64;
    let mut recs = vec![Record::Map { start: base, len: 64 << 10, flags: RW }];
    for p in 0..6 {
        for line in 0..PAGE / 32 {
            let kind = if p < 4 { Kind::Store } else { Kind::Load };
            recs.push(access(kind, base + p * PAGE + line * 32));
        }
    }
    let mut s = System::new(&cfg).unwrap();
    s.process(&recs).unwrap();
    let before: Vec<u64> = (0..6).map(|p| s.os().frame(Asid(0), Vpn((base >> 12) + p)).unwrap().0).collect();
    s.caches_mut().unwrap().record_dram();
    s.process(&[madvise(base, 64 << 10)]).unwrap();
    let sh = s.os().shadow_stats().unwrap();
    let writeback = 8; // shadow.writeback_cycles: a 32-byte line over the Runway bus
    let per_line = 10; // shadow.flush_line_cycles: 1,497,067 cycles for em3d's 143,360 lines
    assert_eq!((sh.superpages, sh.pages_remapped, sh.pages_allocated), (1, 16, 10), "one 64 KB superpage");
    assert_eq!((sh.lines_flushed, sh.dirty_lines), (6 * 128, 4 * 128));
    assert_eq!(sh.flush_cycles, 16 * 128 * per_line + 4 * 128 * writeback);
    assert_eq!(sh.page_cycles, 16 * 145);
    let log = s.caches_mut().unwrap().take_dram_log();
    assert_eq!(log.len(), 4 * 128, "the dirty lines went to memory");
    for r in &log {
        assert!(r.write && before.contains(&(r.dram.unwrap() >> 12)), "{r:?}");
    }
    // The same frames behind the superpage; reading page 0 again fills through shadow addresses.
    for p in 0..6 {
        assert_eq!(s.os().frame(Asid(0), Vpn((base >> 12) + p)).unwrap().0, before[p as usize]);
    }
    let again: Vec<Record> = (0..PAGE / 32).map(|l| access(Kind::Load, base + l * 32)).collect();
    let dcache = |s: &System| s.stats().time.unwrap().dcache;
    let stalled = dcache(&s);
    s.process(&again).unwrap();
    // Each of the 128 fills: the controller's 2 cycles and memory's 60, less the 1-cycle hit;
    // the page's one MTLB miss adds its table read (mtlb.miss_cycles, Figure 4(B): 200).
    assert_eq!(dcache(&s) - stalled, 128 * (2 + 60 - 1) + 200);
    let log = s.caches_mut().unwrap().take_dram_log();
    // (Page-table memory lies apart, at 1 TB.)
    let program: Vec<_> = log.iter().filter(|r| (1 << 30..1 << 32).contains(&r.pa)).collect();
    assert_eq!(program.len(), 128, "every line of page 0 was flushed, so each one misses");
    for r in program {
        assert!(!r.write);
        assert_eq!(r.dram.unwrap() >> 12, before[0], "{r:?}");
    }
    let m = s.caches().unwrap().mtlb().unwrap().stats();
    assert_eq!((m.lookups, m.misses), (128, 1), "one MTLB miss for the page, then hits");
    s.check_translations().unwrap();
}

/// §3.3's comparison: conventional superpages copy each resident page into a contiguous block.
#[test]
fn copying_into_contiguous_frames_costs_the_copy_per_resident_page() {
    let mut cfg = preset("swanson98");
    cfg.os.shadow_superpages = ShadowPolicy::Markers;
    cfg.shadow.method = ShadowMethod::Copy;
    let base = 0x4000_0000u64;
    let mut recs = vec![Record::Map { start: base, len: 64 << 10, flags: RW }];
    for p in 0..5 {
        recs.push(access(Kind::Store, base + p * PAGE));
    }
    recs.push(madvise(base, 64 << 10));
    recs.push(access(Kind::Load, base + 9 * PAGE));
    let s = run(&cfg, &recs);
    let sh = s.os().shadow_stats().unwrap();
    assert_eq!((sh.superpages, sh.pages_copied, sh.copy_cycles), (1, 5, 5 * 11_400));
    assert_eq!((sh.flush_cycles, sh.lines_flushed), (0, 0), "the old frames' lines are dropped, not flushed");
    // The block is contiguous and aligned to the superpage.
    let f0 = s.os().frame(Asid(0), Vpn(base >> 12)).unwrap().0;
    assert_eq!(f0 % 16, 0);
    for p in 0..16 {
        assert_eq!(s.os().frame(Asid(0), Vpn((base >> 12) + p)).unwrap().0, f0 + p);
    }
    s.check_translations().unwrap();
    let t = s.stats().time.unwrap();
    assert_eq!(t.remap, 5 * 11_400 + 16 * 145);
}

/// The modified sbrk (§2.3, §3.1): the heap's first growth maps `sbrk_initial` bytes, each growth
/// past them `sbrk_increment` more; a shrinking heap keeps its superpages.
#[test]
fn the_heap_grows_in_preallocated_superpages_and_never_shrinks_below_them() {
    let mut cfg = preset("swanson98-mtlb");
    cfg.shadow.sbrk_initial = 1 << 20;
    cfg.shadow.sbrk_increment = 256 << 10;
    let heap = 0x0060_0000u64; // 2 MB aligned
    let recs = vec![
        Record::Map { start: heap, len: 132 << 10, flags: RW | HEAP },
        access(Kind::Store, heap),
        Record::Map { start: heap + (132 << 10), len: 900 << 10, flags: RW | HEAP },
        Record::Unmap { start: heap + (600 << 10), len: 432 << 10 },
        Record::Map { start: heap + (600 << 10), len: 600 << 10, flags: RW | HEAP },
    ];
    let s = run(&cfg, &recs);
    let sh = s.os().shadow_stats().unwrap();
    // 1 MB from the heap's start: one 1 MB superpage; the growth to 1.2 MB: one 256 KB superpage.
    assert_eq!((sh.superpages, sh.pages_remapped, sh.torn_down), (2, 256 + 64, 0));
    assert_eq!(s.os().shadow_heap(Asid(0)), Some((heap, heap + (1 << 20) + (256 << 10))));
    assert_eq!(s.stats().events.pages_unmapped, 0, "the unmap fell inside the preallocated heap");
    let pte = s.os().mapping(Asid(0), Vpn((heap >> 12) + 300)).unwrap();
    assert_eq!(pte.size.bytes(), 256 << 10);
    s.check_translations().unwrap();
}

/// Unmapping part of a superpage demotes it: the pages left go back to base PTEs of their own
/// frames, the shadow lines are flushed through the controller, the region returns to the pool.
#[test]
fn unmapping_part_of_a_superpage_demotes_it_and_frees_its_region() {
    let mut cfg = preset("swanson98-mtlb");
    cfg.os.shadow_superpages = ShadowPolicy::Markers;
    let base = 0x4000_0000u64;
    let mut recs = vec![Record::Map { start: base, len: 16 << 10, flags: RW }, madvise(base, 16 << 10)];
    for p in 0..4 {
        recs.push(access(Kind::Store, base + p * PAGE));
    }
    let mut s = run(&cfg, &recs);
    let frames: Vec<u64> = (0..4).map(|p| s.os().frame(Asid(0), Vpn((base >> 12) + p)).unwrap().0).collect();
    s.caches_mut().unwrap().record_dram();
    s.process(&[Record::Unmap { start: base + PAGE, len: PAGE }]).unwrap();
    let sh = s.os().shadow_stats().unwrap();
    assert_eq!((sh.superpages, sh.torn_down, sh.live_superpages), (1, 1, 0));
    // The three stored lines of the pages that stay are written back through the controller;
    // the unmapped page's line is purged (its data dies with it).
    assert_eq!(sh.dirty_lines, 3);
    assert_eq!(sh.lines_flushed, 4);
    // The loop visits the 4 pages' 128 lines each (10 cycles a line), and the 3 dirty lines
    // add their transfer (8 cycles each).
    assert_eq!(sh.flush_cycles - sh.create_flush_cycles, 4 * 128 * 10 + 3 * 8);
    let log = s.caches_mut().unwrap().take_dram_log();
    let mut got: Vec<u64> = log.iter().map(|r| r.dram.unwrap() >> 12).collect();
    got.sort_unstable();
    let mut want = vec![frames[0], frames[2], frames[3]];
    want.sort_unstable();
    assert_eq!(got, want);
    for p in [0, 2, 3] {
        let pte = s.os().mapping(Asid(0), Vpn((base >> 12) + p)).unwrap();
        assert_eq!((pte.size.bytes(), pte.pfn.0), (PAGE, frames[p as usize]));
    }
    assert_eq!(s.os().mapping(Asid(0), Vpn((base >> 12) + 1)), None);
    s.check_translations().unwrap();
    // The region is free again: the same shadow address serves the next 16 KB superpage.
    s.process(&[
        Record::Map { start: base + (1 << 20), len: 16 << 10, flags: RW },
        madvise(base + (1 << 20), 16 << 10),
    ])
    .unwrap();
    assert_eq!(s.os().shadow_stats().unwrap().failures, 0);
}

#[test]
fn shadow_superpages_reject_what_they_cannot_model() {
    let err = |f: &dyn Fn(&mut Config)| {
        let mut c = preset("swanson98-mtlb");
        f(&mut c);
        System::new(&c).err().map(|e| e.to_string()).unwrap_or_default()
    };
    assert!(err(&|c| c.mtlb = None).contains("shadow.method"));
    assert!(err(&|c| c.os.reservation = true).contains("os.shadow_superpages"));
    assert!(err(&|c| c.shadow.partition = vec![(4096, 4)]).contains("shadow.partition"));
    assert!(err(&|c| c.shadow.partition = vec![(1 << 30, 8)]).contains("shadow.partition"));
    assert!(err(&|c| c.shadow.sbrk_increment = 100).contains("shadow.sbrk_increment"));
    assert!(err(&|c| c.os.memory_bytes = 1 << 30).contains("os.memory_bytes"));
    let bad = Config::from_toml(
        &format!("{}\nflush_cycles = 3\n", xlat::config::PRESETS.iter().find(|p| p.0 == "swanson98-mtlb").unwrap().1),
        "x.toml",
    );
    assert!(bad.unwrap_err().to_string().contains("flush_cycles"));
}

/// Superpages of Figure 2's sizes: (bytes, regions of the shadow range).
const FIGURE2: [(u64, u64); 6] =
    [(16 << 10, 1024), (64 << 10, 256), (256 << 10, 128), (1 << 20, 64), (4 << 20, 32), (16 << 20, 16)];

/// A heap mapping of most of a 47-bit address space (and a second one after it) under the
/// modified sbrk: the 8 MB at the heap's 16 MB-aligned start make two 4 MB superpages, each 2 MB
/// increment two 1 MB superpages until the 64 regions of 1 MB are gone; every later increment
/// fails. The model counts those failures without planning each increment: its steps stay a
/// few per superpage made, whatever the mapping's length.
#[test]
fn a_heap_mapping_of_half_the_address_space_counts_its_failures_without_walking_them() {
    let heap = 0x1000_0000u64;
    let len = 0x7f00_0000_0000u64;
    let one = vec![Record::Map { start: heap, len, flags: RW | HEAP }, access(Kind::Store, heap + 0x1234)];
    let mut two = one.clone();
    two.insert(1, Record::Map { start: heap + len, len, flags: RW | HEAP });
    let cfg = preset("swanson98-mtlb");
    let mut steps = Vec::new();
    for (maps, recs) in [(1, one), (2, two)] {
        let s = run(&cfg, &recs);
        let sh = s.os().shadow_stats().unwrap();
        let increments = (maps * len - (8 << 20)) / (2 << 20);
        let pieces = 2 + 2 * increments;
        assert_eq!((sh.superpages, sh.failures), (2 + 64, pieces - 66), "{maps} maps");
        assert_eq!(sh.pages_allocated, 2 * 1024 + 64 * 256);
        assert_eq!(s.os().shadow_heap(Asid(0)), Some((heap, heap + maps * len)));
        assert_eq!(s.stats().page_faults, 0, "the store falls in the first superpage");
        s.check_translations().unwrap();
        steps.push(s.os().shadow_steps());
    }
    assert!(steps[0] < 1000, "{steps:?}");
    assert!(steps[1] < steps[0] + 100, "a second mapping adds no superpage and few steps: {steps:?}");
}

/// A `MADV_HUGEPAGE` of 2^64 - 1 bytes from 2^47 (the region ends at the top of the address
/// space): the 16 regions of 16 MB go to its first superpages, the rest of its 16 MB
/// superpages fail and are counted together; the tail below 2^64 steps down through 4 MB, 1 MB,
/// 256 KB, 64 KB and 16 KB superpages, three of each. No allocation grows with the region.
#[test]
fn an_madvise_to_the_end_of_the_address_space_maps_what_the_shadow_range_holds() {
    let start = 1u64 << 47;
    let big = ((1u64 << 63) - (1 << 46)) / (8 << 20) - 1; // 16 MB superpages in [2^47, 2^64 - 16 MB)
    for (method, allocator) in [
        (ShadowMethod::Remap, ShadowAllocator::Buckets),
        (ShadowMethod::Remap, ShadowAllocator::Buddy),
        (ShadowMethod::Copy, ShadowAllocator::Buckets),
    ] {
        let mut cfg = preset("swanson98-mtlb");
        cfg.os.shadow_superpages = ShadowPolicy::Markers;
        cfg.shadow.method = method;
        cfg.shadow.allocator = allocator;
        let s = run(&cfg, &[madvise(start, u64::MAX), access(Kind::Store, start + 8)]);
        let sh = s.os().shadow_stats().unwrap();
        let tail = 5 * 3;
        assert_eq!(sh.superpages + sh.failures, big + tail, "{method:?} {allocator:?}");
        let made = match (method, allocator) {
            // Figure 2's buckets: all 16 of 16 MB, and the tail (each bucket has three left).
            (ShadowMethod::Remap, ShadowAllocator::Buckets) => 16 + tail,
            // A buddy range of 512 MB: 32 of 16 MB, then nothing is left for the tail.
            (ShadowMethod::Remap, ShadowAllocator::Buddy) => 32,
            // Contiguous frames: 63 blocks of 16 MB in the 1008 MB of frames, none left over.
            _ => 63,
        };
        assert_eq!(sh.superpages, made, "{method:?} {allocator:?}");
        assert_eq!(s.stats().page_faults, 0, "{method:?} {allocator:?}");
        assert!(s.os().shadow_steps() < 1000, "{method:?} {allocator:?}: {} steps", s.os().shadow_steps());
        s.check_translations().unwrap();
    }
    // Sizes the tail would use are the figure's.
    assert_eq!(
        FIGURE2.iter().map(|p| p.0).collect::<Vec<_>>(),
        preset("swanson98-mtlb").shadow.partition.iter().map(|p| p.0).collect::<Vec<_>>()
    );
}

/// Heap increments that cannot hold a superpage, or whose superpages' sizes have no region
/// left, are skipped together; increments meeting superpages already there are planned one by
/// one (their superpages are not tried, nor counted as failures). A 20 KB increment holds a
/// 16 KB superpage only where it starts at most 4 KB before a 16 KB boundary.
#[test]
fn heap_increments_of_odd_sizes_are_counted_as_if_planned_one_by_one() {
    let heap = 0x1000_0000u64;
    let len = 1u64 << 46;
    for (step, initial) in [(20u64 << 10, 16u64 << 10), (4 << 10, 12 << 10), (16 << 10, 8 << 20), (3 << 20, 4 << 10)] {
        let mut cfg = preset("swanson98-mtlb");
        cfg.os.shadow_superpages = ShadowPolicy::All;
        cfg.shadow.sbrk_increment = step;
        cfg.shadow.sbrk_initial = initial;
        // A superpage made ahead of the heap, inside its future range.
        let ahead = heap + (64 << 20);
        let recs = vec![
            Record::Map { start: ahead, len: 1 << 20, flags: RW },
            Record::Map { start: heap, len, flags: RW | HEAP },
        ];
        let s = run(&cfg, &recs);
        let sh = s.os().shadow_stats().unwrap();
        // Each increment planned alone, over every size.
        let sizes: Vec<u64> = FIGURE2.iter().map(|p| p.0).collect();
        let mut pieces = 0u64;
        let mut covered = 0u64;
        let mut a = heap;
        let piece_count = |a: u64, e: u64| xlat::os::shadow::plan_runs(a, e, &sizes).map(|r| r.2).sum::<u64>();
        let overlapping = |a: u64, e: u64| {
            xlat::os::shadow::plan_runs(a, e, &sizes)
                .flat_map(|(va, sz, n)| (0..n).map(move |k| (va + k * sz, sz)))
                .filter(|&(va, sz)| va < ahead + (1 << 20) && ahead < va + sz)
                .count() as u64
        };
        // The first growth, then the increments: an increment holds as many superpages as the
        // one 16 MB further on; those over the superpage ahead skip the pieces it overlaps.
        let first_end = a + initial;
        pieces += piece_count(a, first_end);
        covered += overlapping(a, first_end);
        a = first_end;
        let n = (heap + len - a).div_ceil(step);
        // Increments repeat every lcm(step, 16 MB) bytes; count one period and multiply.
        let period = {
            let g = gcd(step, 16 << 20);
            (16u64 << 20) / g
        };
        let per_period: u64 = (0..period.min(n)).map(|j| piece_count(a + j * step, a + (j + 1) * step)).sum();
        let full = n / period;
        pieces += per_period * full;
        pieces += (full * period..n).map(|j| piece_count(a + j * step, a + (j + 1) * step)).sum::<u64>();
        for j in (ahead - a) / step..=(ahead + (1 << 20) - 1 - a) / step {
            covered += overlapping(a + j * step, a + (j + 1) * step);
        }
        // The superpage ahead is made first (1 MB), so the heap's pieces over it are skipped.
        assert_eq!(sh.superpages + sh.failures + covered, pieces + 1, "step {step} initial {initial}");
        assert!(s.os().shadow_steps() < 20_000, "step {step}: {} steps", s.os().shadow_steps());
        s.check_translations().unwrap();
    }
}

/// A buddy range of one 256 GB region and 8 KB superpages: each `MADV_HUGEPAGE` of 8 KB splits
/// the region down to 8 KB and each unmap recombines it whole. The free regions of a size are
/// kept as runs, so neither costs 2^25 regions (it took half a minute and a gigabyte of memory
/// when they were kept one by one).
#[test]
fn a_huge_buddy_region_split_to_the_smallest_superpage_and_back_costs_a_run_per_size() {
    let mut cfg = preset("swanson98-mtlb");
    cfg.os.shadow_superpages = ShadowPolicy::Markers;
    cfg.shadow.allocator = ShadowAllocator::Buddy;
    cfg.shadow.partition = vec![(8 << 10, 1), (1 << 38, 1)];
    let memory = cfg.memory.as_mut().unwrap();
    memory.dram_bytes = Some(4 << 30);
    memory.pa_bits = Some(40);
    let base = 0x4000_0000u64;
    let mut recs = Vec::new();
    for _ in 0..4 {
        recs.extend([madvise(base, 8 << 10), access(Kind::Store, base), Record::Unmap { start: base, len: 8 << 10 }]);
    }
    let s = run(&cfg, &recs);
    let sh = s.os().shadow_stats().unwrap();
    assert_eq!((sh.superpages, sh.torn_down, sh.failures, sh.live_superpages), (4, 4, 0, 0));
    s.check_translations().unwrap();
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// What the property test does: events and accesses over a few regions.
#[derive(Clone, Debug)]
enum Op {
    Touch { region: u8, page: u16, store: bool },
    Grow { pages: u16 },
    MapAnon { region: u8, pages: u16 },
    Advise { region: u8, page: u16, pages: u16 },
    Unmap { region: u8, page: u16, pages: u16 },
    Fork,
    Switch,
    ExitChild,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..4, 0u16..256, any::<bool>()).prop_map(|(region, page, store)| Op::Touch { region, page, store }),
        1 => (1u16..80).prop_map(|pages| Op::Grow { pages }),
        1 => (1u8..4, 1u16..256).prop_map(|(region, pages)| Op::MapAnon { region, pages }),
        1 => (0u8..4, 0u16..256, 1u16..128).prop_map(|(region, page, pages)| Op::Advise { region, page, pages }),
        1 => (0u8..4, 0u16..256, 1u16..64).prop_map(|(region, page, pages)| Op::Unmap { region, page, pages }),
        1 => Just(Op::Fork),
        1 => Just(Op::Switch),
        1 => Just(Op::ExitChild),
    ]
}

/// Region 0 is the heap, 1-3 anonymous areas 16 MB apart.
fn region_base(r: u8) -> u64 {
    0x0100_0000 * (r as u64 + 1)
}

proptest! {
    #![proptest_config(crate::proptest_cases(48))]

    /// Every request that reaches DRAM goes to the frame the OS gave the page: a fill for an
    /// access to the accessed page's frame, a writeback to the frame of the page whose line it
    /// is (through a shadow address or not), across remaps, demotions, forks and exits; and the
    /// TLBs, the page table and the OS always agree.
    #[test]
    fn every_request_reaching_dram_is_the_frame_the_os_gave_the_page(
        ops in proptest::collection::vec(op(), 1..160),
        policy in prop_oneof![Just(ShadowPolicy::Heap), Just(ShadowPolicy::All), Just(ShadowPolicy::Markers)],
        method in prop_oneof![Just(ShadowMethod::Remap), Just(ShadowMethod::Copy)],
    ) {
        let mut cfg = preset("swanson98-mtlb");
        cfg.os.shadow_superpages = policy;
        cfg.shadow.method = method;
        cfg.shadow.min_bytes = 64 << 10;
        cfg.shadow.sbrk_initial = 128 << 10;
        cfg.shadow.sbrk_increment = 64 << 10;
        cfg.shadow.partition = vec![(16 << 10, 6), (64 << 10, 4), (256 << 10, 2)];
        cfg.cache[0].size = 8192; // many evictions and writebacks
        cfg.tlb[0].entries = 8;
        let mut s = System::new(&cfg).unwrap();
        s.caches_mut().unwrap().record_dram();
        let mut brk = region_base(0);
        let (mut child, mut next_child, mut cur) = (None::<u32>, 1u32, 0u32);
        // Dirty lines: the processor's line address -> the page that wrote it.
        let mut dirty: HashMap<u64, (u32, u64)> = HashMap::new();
        let dram = 1u64 << 30;
        for op in ops {
            let rec = match op {
                Op::Touch { region, page, store } => {
                    let addr = region_base(region) + page as u64 * PAGE + (page as u64 * 96) % PAGE;
                    access(if store { Kind::Store } else { Kind::Load }, addr)
                }
                Op::Grow { pages } => {
                    let r = Record::Map { start: brk, len: pages as u64 * PAGE, flags: RW | HEAP };
                    brk += pages as u64 * PAGE;
                    r
                }
                Op::MapAnon { region, pages } => Record::Map { start: region_base(region), len: pages as u64 * PAGE, flags: RW },
                Op::Advise { region, page, pages } => madvise(region_base(region) + page as u64 * PAGE, pages as u64 * PAGE),
                Op::Unmap { region, page, pages } => Record::Unmap { start: region_base(region) + page as u64 * PAGE, len: pages as u64 * PAGE },
                Op::Fork => {
                    if child.is_some() || cur != 0 { continue; }
                    child = Some(next_child);
                    next_child += 1;
                    Record::Fork { child: next_child - 1 }
                }
                Op::Switch => {
                    let Some(c) = child else { continue };
                    cur = if cur == 0 { c } else { 0 };
                    Record::ContextSwitch { asid: cur }
                }
                Op::ExitChild => {
                    let Some(c) = child.take() else { continue };
                    if cur == c {
                        s.process(&[Record::ContextSwitch { asid: 0 }]).unwrap();
                        cur = 0;
                    }
                    Record::Exit { asid: c }
                }
            };
            // What each dirty line's writeback must reach, as the OS maps its page before the record.
            let expect: HashMap<u64, Option<u64>> = dirty
                .iter()
                .map(|(&line, &(a, v))| (line, s.os().frame(Asid(a), Vpn(v)).map(|f| f.0)))
                .collect();
            s.caches_mut().unwrap().take_dram_log();
            s.process(&[rec]).unwrap();
            let log = s.caches_mut().unwrap().take_dram_log();
            for r in &log {
                let frame = r.dram.map(|d| d >> 12);
                if r.write {
                    let line = r.pa >> 5;
                    let owner = expect.get(&line).copied().flatten();
                    // A shadow line always has its page's frame; a real line of a page since freed
                    // (base pages are not flushed on unmap) is not checked.
                    if (dram..1 << 32).contains(&r.pa) || owner.is_some() {
                        prop_assert_eq!(frame, owner, "writeback {:?}", r);
                    }
                    dirty.remove(&line);
                } else if let Record::Access { addr, .. } = rec {
                    let pte = s.os().mapping(Asid(cur), Vpn(addr >> 12)).unwrap();
                    let cpu_line = ((pte.pfn.0 << 12) | (addr & 0xfff)) >> 5;
                    if r.pa >> 5 == cpu_line {
                        prop_assert_eq!(frame, s.os().frame(Asid(cur), Vpn(addr >> 12)).map(|f| f.0), "fill {:?}", r);
                    }
                }
            }
            if let Record::Access { kind: Kind::Store, addr, .. } = rec {
                let pte = s.os().mapping(Asid(cur), Vpn(addr >> 12)).unwrap();
                dirty.insert(((pte.pfn.0 << 12) | (addr & 0xfff)) >> 5, (cur, addr >> 12));
            }
            // Flushed lines are gone from the cache: forget them (a remap changes the line address).
            if !matches!(rec, Record::Access { .. }) {
                dirty.retain(|_, &mut (a, v)| s.os().mapping(Asid(a), Vpn(v)).is_some());
            }
            prop_assert!(s.check_translations().is_ok(), "{:?}", s.check_translations());
            let m = s.caches().unwrap().mtlb().unwrap();
            prop_assert_eq!(m.stats().unmapped, 0);
            // The controller's table maps each shadow page to the frame of the page mapped to it.
            for (a, v) in s.os().resident_list() {
                let pte = s.os().mapping(Asid(a), Vpn(v)).unwrap();
                let real = s.os().frame(Asid(a), Vpn(v)).unwrap().0;
                if pte.pfn.0 << 12 >= dram {
                    prop_assert_eq!(m.real_frame(pte.pfn.0), Some(real));
                } else {
                    prop_assert_eq!(pte.pfn.0, real);
                }
            }
        }
    }
}
