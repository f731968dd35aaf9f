//! The model's unit tests: lookups, fills of every entry format, replacement, invalidation.

use super::*;

fn tlb(entries: u32, ways: u32, policy: Policy) -> Tlb {
    Tlb::new(Geometry { entries, ways, policy, seed: 1 }, PageSize::SIZE_4K).unwrap()
}

/// A process's own entry, filled after the filter answered its page from a global entry,
/// answers from then on (own ASID before [`GLOBAL`]): the fill drops the filter's entry.
#[test]
fn a_fill_over_a_filtered_global_answer_takes_over() {
    let mut t = tlb(64, 64, Policy::Lru);
    t.insert(GLOBAL, Vpn(5), TlbData { pfn: 100, shift: 12, valid: 0 });
    assert_eq!(t.lookup(Asid(1), Vpn(5)).map(|d| d.pfn), Some(100));
    assert_eq!(t.lookup(Asid(1), Vpn(5)).map(|d| d.pfn), Some(100), "answered by the filter");
    t.fill(1, Vpn(5), Pte { pfn: Pfn(200), size: PageSize::SIZE_4K, valid: 0 });
    assert_eq!(t.lookup(Asid(1), Vpn(5)).map(|d| d.pfn), Some(200));
    assert_eq!(t.lookup(Asid(2), Vpn(5)).map(|d| d.pfn), Some(100));
}

fn access(t: &mut Tlb, asid: u32, vpn: u64) -> bool {
    if t.lookup(Asid(asid), Vpn(vpn)).is_some() {
        return true;
    }
    t.insert(asid, Vpn(vpn), TlbData { pfn: vpn + 1000, shift: 12, valid: 0 });
    false
}

#[test]
fn rejects_bad_geometry() {
    let g = |entries, ways, policy| Tlb::new(Geometry { entries, ways, policy, seed: 0 }, PageSize::SIZE_4K);
    assert_eq!(g(0, 1, Policy::Lru).unwrap_err(), GeometryError::ZeroEntries);
    assert!(matches!(g(48, 5, Policy::Lru).unwrap_err(), GeometryError::BadWays { .. }));
    assert!(matches!(g(48, 0, Policy::Lru).unwrap_err(), GeometryError::BadWays { .. }));
    assert_eq!(g(48, 12, Policy::Plru).unwrap_err(), GeometryError::PlruWays(12));
    assert!(g(48, 12, Policy::Lru).is_ok());
    assert!(g(1536, 12, Policy::Lru).is_ok());
}

#[test]
fn fully_associative_lru_evicts_least_recent() {
    for entries in [4, 64] {
        let mut t = tlb(entries, entries, Policy::Lru);
        for v in 0..entries as u64 {
            assert!(!access(&mut t, 0, v));
        }
        assert!(access(&mut t, 0, 0)); // 0 becomes most recent; 1 is LRU
        assert!(!access(&mut t, 0, 1000));
        assert!(t.probe(Asid(0), Vpn(1)).is_none());
        assert!(t.probe(Asid(0), Vpn(0)).is_some());
    }
}

#[test]
fn repeated_hit_after_an_insertion_still_updates_lru() {
    // 1 2 1 3 1 4: the second hit on 1 follows the insertion of 3, so 1 is most recent and 3
    // must be the victim of 4.
    for ways in [2, 32] {
        let mut t = tlb(ways, ways, Policy::Lru);
        for v in 0..ways as u64 - 2 {
            access(&mut t, 0, 100 + v);
        }
        for v in [1, 2, 1, 3, 1, 4] {
            access(&mut t, 0, v);
        }
        assert!(t.probe(Asid(0), Vpn(1)).is_some(), "{ways} ways");
    }
}

#[test]
fn fifo_ignores_hits() {
    let mut t = tlb(4, 4, Policy::Fifo);
    for v in 0..4 {
        access(&mut t, 0, v);
    }
    assert!(access(&mut t, 0, 0));
    access(&mut t, 0, 9); // evicts 0, the first in
    assert!(t.probe(Asid(0), Vpn(0)).is_none());
    assert!(t.probe(Asid(0), Vpn(1)).is_some());
}

#[test]
fn asids_and_globals() {
    for entries in [8, 64] {
        let mut t = tlb(entries, entries, Policy::Lru);
        access(&mut t, 1, 5);
        assert!(t.lookup(Asid(2), Vpn(5)).is_none());
        assert!(t.lookup(Asid(1), Vpn(5)).is_some());
        t.insert(GLOBAL, Vpn(7), TlbData { pfn: 1, shift: 12, valid: 0 });
        assert!(t.lookup(Asid(2), Vpn(7)).is_some());
        assert!(t.lookup(Asid(3), Vpn(7)).is_some());
        assert_eq!(t.flush_non_global(), 1);
        assert!(t.lookup(Asid(1), Vpn(5)).is_none());
        assert!(t.lookup(Asid(3), Vpn(7)).is_some());
    }
}

#[test]
fn invalidation_frees_ways_first() {
    let mut t = tlb(4, 4, Policy::Random);
    for v in 0..4 {
        access(&mut t, 0, v);
    }
    assert_eq!(t.invalidate_range(Asid(0), Vpn(2), Vpn(2)), 1);
    assert_eq!(t.occupancy(), 3);
    access(&mut t, 0, 50);
    // The empty way was filled: nothing else was evicted.
    for v in [0, 1, 3, 50] {
        assert!(t.probe(Asid(0), Vpn(v)).is_some(), "{v}");
    }
}

#[test]
fn index_survives_churn() {
    // Exercise the index's chains (insertions, and removals from the head, middle and end
    // of a chain) against a naive model.
    let mut t = tlb(128, 128, Policy::Lru);
    let mut x = 12345u64;
    let mut model: Vec<u64> = Vec::new();
    for _ in 0..20000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let v = x % 300;
        let hit = access(&mut t, 0, v);
        let pos = model.iter().position(|&m| m == v);
        assert_eq!(hit, pos.is_some());
        if let Some(p) = pos {
            model.remove(p);
        } else if model.len() == 128 {
            model.pop();
        }
        model.insert(0, v);
    }
}

fn ftlb(entries: u32, ways: u32, format: Format) -> Tlb {
    Tlb::with_format(Geometry { entries, ways, policy: Policy::Lru, seed: 1 }, PageSize::SIZE_4K, format).unwrap()
}

fn size(pages: u64) -> PageSize {
    PageSize::from_bytes(4096 * pages).unwrap()
}

fn base_pte(pfn: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
}

#[test]
fn rejects_bad_block_pages() {
    let g = Geometry { entries: 8, ways: 8, policy: Policy::Lru, seed: 0 };
    for bp in [0, 1, 3, 12, 128] {
        for f in [Format::PartialSubblock { block_pages: bp }, Format::CompleteSubblock { block_pages: bp }] {
            assert_eq!(Tlb::with_format(g, PageSize::SIZE_4K, f).unwrap_err(), GeometryError::BlockPages(bp));
        }
    }
    for bp in [2, 16, 64] {
        let t = Tlb::with_format(g, PageSize::SIZE_4K, Format::CompleteSubblock { block_pages: bp }).unwrap();
        assert_eq!(t.format(), Format::CompleteSubblock { block_pages: bp });
    }
    assert_eq!(Tlb::new(g, PageSize::SIZE_4K).unwrap().format(), Format::Single);
}

#[test]
fn single_fills_base_entries_from_any_pte() {
    for entries in [8, 64] {
        let mut t = ftlb(entries, entries, Format::Single);
        // A 16-page superpage PTE for vpn 0x35 (frame of vpn itself: 0x1005).
        let f = t.fill(3, Vpn(0x35), Pte { pfn: Pfn(0x1005), size: size(16), valid: 0 });
        assert_eq!(f, Fill { evicted: None, merged: false });
        assert_eq!(t.lookup(Asid(3), Vpn(0x35)), Some(TlbData { pfn: 0x1005, shift: 12, valid: 0 }));
        assert!(t.lookup(Asid(3), Vpn(0x34)).is_none());
        // A partial-subblock PTE also gives a base entry.
        t.fill(3, Vpn(0x42), Pte { pfn: Pfn(0x2002), size: size(4), valid: 0b0101 });
        assert!(t.lookup(Asid(3), Vpn(0x40)).is_none());
        assert_eq!(t.translations(), vec![(3, Vpn(0x35), Pfn(0x1005)), (3, Vpn(0x42), Pfn(0x2002))]);
    }
}

#[test]
fn superpage_entries_of_mixed_sizes() {
    for (entries, ways) in [(8, 8), (8, 2), (64, 64)] {
        let mut t = ftlb(entries, ways, Format::Superpage);
        // 16-page superpage at vpn 0x30..0x3f, frames 0x1000..; miss on 0x35.
        t.fill(1, Vpn(0x35), Pte { pfn: Pfn(0x1005), size: size(16), valid: 0 });
        let e = t.probe(Asid(1), Vpn(0x3f)).unwrap();
        assert_eq!(e, TlbEntry { tag: 3, asid: 1, data: TlbData { pfn: 0x1000, shift: 16, valid: 0 } });
        for v in 0x30..0x40 {
            let d = t.lookup(Asid(1), Vpn(v)).unwrap();
            assert_eq!(frame_of(d, Vpn(v), PageSize::SIZE_4K), Pfn(0x1000 + v - 0x30));
        }
        assert!(t.lookup(Asid(1), Vpn(0x40)).is_none());
        assert!(t.lookup(Asid(2), Vpn(0x30)).is_none());
        // A partial-subblock PTE is a base entry here; a base entry sits beside the superpage.
        t.fill(1, Vpn(0x41), Pte { pfn: Pfn(0x501), size: size(4), valid: 0b11 });
        assert_eq!(t.probe(Asid(1), Vpn(0x41)).unwrap().data.shift, 12);
        assert!(t.lookup(Asid(1), Vpn(0x40)).is_none());
        assert_eq!(t.occupancy(), 2);
        assert_eq!(t.translations().len(), 17);
        // Invalidating one page removes the whole superpage.
        assert_eq!(t.invalidate_range(Asid(1), Vpn(0x3a), Vpn(0x3a)), 1);
        assert!(t.lookup(Asid(1), Vpn(0x30)).is_none());
        assert!(t.lookup(Asid(1), Vpn(0x41)).is_some());
    }
}

#[test]
fn partial_subblock_fill_rules() {
    for entries in [8, 64] {
        let mut t = ftlb(entries, entries, Format::PartialSubblock { block_pages: 4 });
        // Block 0x10 (vpn 0x40..0x43), pages 0 and 2 mapped, block frame 0x800.
        let f = t.fill(0, Vpn(0x42), Pte { pfn: Pfn(0x802), size: size(4), valid: 0b0101 });
        assert!(!f.merged && f.evicted.is_none());
        assert_eq!(t.lookup(Asid(0), Vpn(0x40)), Some(TlbData { pfn: 0x800, shift: 14, valid: 0b0101 }));
        assert!(t.lookup(Asid(0), Vpn(0x41)).is_none());
        // Page 1 faulted in since: the entry's vector is updated in place.
        let f = t.fill(0, Vpn(0x41), Pte { pfn: Pfn(0x801), size: size(4), valid: 0b0111 });
        assert_eq!(f, Fill { evicted: None, merged: true });
        assert_eq!(t.occupancy(), 1);
        // The filter held page 0: its cached data follows the update.
        assert_eq!(t.lookup(Asid(0), Vpn(0x40)).unwrap().valid, 0b0111);
        assert_eq!(frame_of(t.lookup(Asid(0), Vpn(0x41)).unwrap(), Vpn(0x41), PageSize::SIZE_4K), Pfn(0x801));
        assert!(t.lookup(Asid(0), Vpn(0x43)).is_none());
        // A superpage at least as large as the block gives a full block entry.
        t.fill(0, Vpn(0x85), Pte { pfn: Pfn(0x905), size: size(8), valid: 0 });
        assert_eq!(t.probe(Asid(0), Vpn(0x86)).unwrap().data, TlbData { pfn: 0x904, shift: 14, valid: 0b1111 });
        assert!(t.probe(Asid(0), Vpn(0x81)).is_none());
        // A base PTE and a smaller superpage give base entries.
        t.fill(0, Vpn(0x90), base_pte(7));
        t.fill(0, Vpn(0xa1), Pte { pfn: Pfn(0x31), size: size(2), valid: 0 });
        assert_eq!(t.probe(Asid(0), Vpn(0xa1)).unwrap().data, TlbData { pfn: 0x31, shift: 12, valid: 0 });
        assert!(t.probe(Asid(0), Vpn(0xa0)).is_none());
        // Invalidation of an unmapped page of a block entry leaves it; a mapped one removes it.
        assert_eq!(t.invalidate_range(Asid(0), Vpn(0x43), Vpn(0x43)), 0);
        assert_eq!(t.invalidate_range(Asid(0), Vpn(0x43), Vpn(0x44)), 0);
        assert_eq!(t.invalidate_range(Asid(0), Vpn(0x3f), Vpn(0x40)), 1);
        assert!(t.lookup(Asid(0), Vpn(0x41)).is_none());
    }
}

#[test]
fn complete_subblock_block_and_subblock_misses() {
    for entries in [2, 64] {
        let mut t = ftlb(entries, entries, Format::CompleteSubblock { block_pages: 4 });
        assert!(!t.fill(0, Vpn(0x41), base_pte(77)).merged); // block miss
        assert_eq!(t.lookup(Asid(0), Vpn(0x41)), Some(TlbData { pfn: 77, shift: 12, valid: 0 }));
        assert!(t.lookup(Asid(0), Vpn(0x42)).is_none());
        let f = t.fill(0, Vpn(0x42), Pte { pfn: Pfn(5), size: size(4), valid: 0b0110 });
        assert_eq!(f, Fill { evicted: None, merged: true }); // subblock miss
        assert_eq!(t.lookup(Asid(0), Vpn(0x42)), Some(TlbData { pfn: 5, shift: 12, valid: 0 }));
        assert_eq!(t.probe(Asid(0), Vpn(0x41)).unwrap().data, TlbData { pfn: 0, shift: 14, valid: 0b0110 });
        assert_eq!(t.translations(), vec![(0, Vpn(0x41), Pfn(77)), (0, Vpn(0x42), Pfn(5))]);
        // Prefetch: one block miss loads every mapped page, one entry.
        let ptes = [Some(base_pte(10)), None, Some(base_pte(30)), Some(base_pte(40))];
        let f = t.fill_block(0, Vpn(0x82), &ptes);
        assert!(!f.merged);
        assert_eq!(t.occupancy(), 2.min(entries));
        for (v, pfn) in [(0x80, 10), (0x82, 30), (0x83, 40)] {
            assert_eq!(t.lookup(Asid(0), Vpn(v)).map(|d| d.pfn), Some(pfn));
        }
        assert!(t.lookup(Asid(0), Vpn(0x81)).is_none());
        // Page 1 mapped later: a subblock miss that merges.
        let ptes = [Some(base_pte(10)), Some(base_pte(20)), Some(base_pte(30)), Some(base_pte(40))];
        assert!(t.fill_block(0, Vpn(0x81), &ptes).merged);
        assert_eq!(t.lookup(Asid(0), Vpn(0x81)).map(|d| d.pfn), Some(20));
    }
}

#[test]
fn complete_subblock_insert_merges_base_translations() {
    let mut t = ftlb(4, 4, Format::CompleteSubblock { block_pages: 8 });
    assert!(t.insert(0, Vpn(9), TlbData { pfn: 90, shift: 12, valid: 0 }).is_none());
    t.insert(0, Vpn(10), TlbData { pfn: 100, shift: 12, valid: 0 });
    assert_eq!(t.occupancy(), 1);
    // A partial-subblock translation of the next block: frames block_pfn + i.
    t.insert(0, Vpn(17), TlbData { pfn: 200, shift: 15, valid: 0b1010 });
    assert_eq!(
        t.translations(),
        vec![(0, Vpn(9), Pfn(90)), (0, Vpn(10), Pfn(100)), (0, Vpn(17), Pfn(201)), (0, Vpn(19), Pfn(203))]
    );
}

#[test]
fn block_entries_from_insert_merge_with_same_tag() {
    // A single-format L1 receiving partial-subblock and superpage data from an L2.
    for entries in [4, 64] {
        let mut t = ftlb(entries, entries, Format::Single);
        t.insert(0, Vpn(0x40), TlbData { pfn: 0x800, shift: 14, valid: 0b0001 });
        assert!(t.lookup(Asid(0), Vpn(0x41)).is_none());
        assert!(t.insert(0, Vpn(0x41), TlbData { pfn: 0x800, shift: 14, valid: 0b0011 }).is_none());
        assert_eq!(t.occupancy(), 1);
        assert!(t.lookup(Asid(0), Vpn(0x41)).is_some());
        // A superpage of the block's size replaces the block entry.
        t.insert(0, Vpn(0x42), TlbData { pfn: 0x800, shift: 14, valid: 0 });
        assert_eq!(t.occupancy(), 1);
        assert!(t.lookup(Asid(0), Vpn(0x43)).is_some());
    }
}

#[test]
fn smallest_entry_answers_and_filter_follows() {
    // A base entry and a superpage entry both translate vpn 0x31: the base one answers, also
    // when the superpage was cached in the filter first.
    for entries in [8, 64] {
        let mut t = ftlb(entries, entries, Format::Superpage);
        t.fill(0, Vpn(0x30), Pte { pfn: Pfn(0x100), size: size(16), valid: 0 });
        assert_eq!(t.lookup(Asid(0), Vpn(0x31)).unwrap().shift, 16);
        t.insert(0, Vpn(0x31), TlbData { pfn: 0x555, shift: 12, valid: 0 });
        assert_eq!(t.lookup(Asid(0), Vpn(0x31)).unwrap().pfn, 0x555);
        assert_eq!(t.probe(Asid(0), Vpn(0x31)).unwrap().data.shift, 12);
    }
}

#[test]
fn merge_counts_as_use_under_lru() {
    // 2-entry LRU partial TLB: A (block 0), B (block 1); a merge into A makes B the victim.
    let mut t = ftlb(2, 2, Format::PartialSubblock { block_pages: 4 });
    t.fill(0, Vpn(0), Pte { pfn: Pfn(0x10), size: size(4), valid: 0b1 });
    t.fill(0, Vpn(4), Pte { pfn: Pfn(0x20), size: size(4), valid: 0b1 });
    assert!(t.fill(0, Vpn(1), Pte { pfn: Pfn(0x11), size: size(4), valid: 0b11 }).merged);
    let f = t.fill(0, Vpn(8), Pte { pfn: Pfn(0x30), size: size(4), valid: 0b1 });
    assert_eq!(f.evicted.map(|e| e.tag), Some(1));
}
