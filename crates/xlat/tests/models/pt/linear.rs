//! Multi-level linear page tables: nested misses through the reserved page-table TLB entries.

use std::collections::BTreeSet;
use xlat::addr::{Asid, PageSize, Pfn, VirtAddr, Vpn};
use xlat::pt::{
    Kind, LineAccounting, NestedFill, NoTlb, PageTable, PageTableConfig, Pte, WalkEnv, WalkRecord, PT_PHYS_BASE,
};

const A: Asid = Asid(3);

fn pte(pfn: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
}

/// A linear table whose nested misses climb level by level (`every_level`, talluri95's model).
fn linear(cfg: PageTableConfig) -> PageTable {
    PageTable::new(
        &PageTableConfig { kind: Kind::Linear, nested_fill: NestedFill::EveryLevel, ..cfg },
        PageSize::SIZE_4K,
    )
    .unwrap()
}

/// The same with `leaf` nested fills (Linux/ia64's VHPT miss handler).
fn leaf(cfg: PageTableConfig) -> PageTable {
    PageTable::new(&PageTableConfig { kind: Kind::Linear, nested_fill: NestedFill::Leaf, ..cfg }, PageSize::SIZE_4K)
        .unwrap()
}

fn pte_va(pt: &PageTable, level: u32, vpn: u64) -> Option<VirtAddr> {
    let PageTable::Linear(t) = pt else { panic!() };
    t.pte_va(level, Vpn(vpn))
}

/// Every page-table page translation hits.
struct AlwaysHit;

impl WalkEnv for AlwaysHit {
    fn lookup_pt_translation(&mut self, _: Asid, _: VirtAddr) -> bool {
        true
    }
    fn fill_pt_translation(&mut self, _: Asid, _: VirtAddr) {}
}

/// An unbounded set of reserved translations, logging lookups and fills.
#[derive(Default)]
struct Reserved {
    held: BTreeSet<(u32, u64)>,
    lookups: Vec<u64>,
    fills: Vec<u64>,
}

impl WalkEnv for Reserved {
    fn lookup_pt_translation(&mut self, asid: Asid, va: VirtAddr) -> bool {
        assert_eq!(va.0 % 4096, 0, "lookups are for pages");
        self.lookups.push(va.0);
        self.held.contains(&(asid.0, va.0))
    }
    fn fill_pt_translation(&mut self, asid: Asid, va: VirtAddr) {
        self.fills.push(va.0);
        self.held.insert((asid.0, va.0));
    }
}

fn walk<E: WalkEnv>(pt: &mut PageTable, vpn: u64, env: &mut E) -> (Option<Pte>, WalkRecord) {
    let mut rec = WalkRecord::default();
    let r = pt.walk(A, Vpn(vpn), env, &mut rec);
    (r, rec)
}

#[test]
fn layout_of_the_virtual_arrays() {
    let pt = linear(PageTableConfig::default());
    let PageTable::Linear(t) = &pt else { panic!() };
    assert_eq!(t.levels(), 4);
    // The top 1/256 of the 48-bit space: level 1 (2^39 bytes), level 2, level 3; the root is wired.
    let base = 0xff00_0000_0000;
    assert_eq!(t.lpt_base(), VirtAddr(base));
    let v = 0x1_2345_6789;
    assert_eq!(pte_va(&pt, 1, v), Some(VirtAddr(base + v * 8)));
    assert_eq!(pte_va(&pt, 2, v), Some(VirtAddr(base + (1 << 39) + (v >> 9) * 8)));
    assert_eq!(pte_va(&pt, 3, v), Some(VirtAddr(base + (1 << 39) + (1 << 30) + (v >> 18) * 8)));
    assert_eq!(pte_va(&pt, 4, v), None);
}

#[test]
fn without_a_tlb_every_level_nests() {
    let mut pt = linear(PageTableConfig::default());
    let v = 0x7_ffff_f123;
    pt.map(A, Vpn(v), pte(77));
    assert_eq!(pt.size().table_bytes, 4 * 4096);
    assert_eq!(pt.size().objects, 4);
    let (r, rec) = walk(&mut pt, v, &mut NoTlb);
    assert_eq!(r, Some(pte(77)));
    assert_eq!(rec.nested_misses, 3);
    assert_eq!((rec.mem_refs, rec.cache_lines), (4, 4));
    // Reads go root first, each at its entry index in a page of page-table memory.
    let idx = [v >> 27 & 511, v >> 18 & 511, v >> 9 & 511, v & 511];
    for (i, a) in rec.addrs[..4].iter().enumerate() {
        assert!(a.0 >= PT_PHYS_BASE);
        assert_eq!(a.0 % 4096, idx[i] * 8);
    }
}

#[test]
fn a_hit_costs_one_reference() {
    let mut pt = linear(PageTableConfig::default());
    pt.map(A, Vpn(100), pte(1));
    let (r, rec) = walk(&mut pt, 100, &mut AlwaysHit);
    assert_eq!(r, Some(pte(1)));
    assert_eq!((rec.mem_refs, rec.cache_lines, rec.nested_misses), (1, 1, 0));
    // A page not mapped in a page of PTEs that exists: one reference, fault.
    let (r, rec) = walk(&mut pt, 101, &mut AlwaysHit);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (None, 1, 0));
}

#[test]
fn nested_misses_fill_the_reserved_entries() {
    let mut pt = linear(PageTableConfig::default());
    let v = 0x12_3456_789a & ((1 << 36) - 1);
    pt.map(A, Vpn(v), pte(5));
    pt.map(A, Vpn(v + 1), pte(6));
    pt.map(A, Vpn(v + 512), pte(7));
    let page = |level: u32, vpn: u64| pte_va(&pt, level, vpn).unwrap().0 & !4095;
    let (p1, p2, p3) = (page(1, v), page(2, v), page(3, v));
    let p1_next = page(1, v + 512);

    let mut env = Reserved::default();
    let (r, rec) = walk(&mut pt, v, &mut env);
    assert_eq!(r, Some(pte(5)));
    assert_eq!((rec.mem_refs, rec.nested_misses), (4, 3));
    assert_eq!(env.lookups, vec![p1, p2, p3]);
    // Filled on the way down: the level-2 page first, the level-1 page last.
    assert_eq!(env.fills, vec![p3, p2, p1]);

    // Now the level-1 page is held: one reference.
    let (r, rec) = walk(&mut pt, v + 1, &mut env);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (Some(pte(6)), 1, 0));
    // Next page of PTEs: one nested miss, resolved from the held level-2 page.
    let (r, rec) = walk(&mut pt, v + 512, &mut env);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (Some(pte(7)), 2, 1));
    assert_eq!(env.fills.last(), Some(&p1_next));
}

#[test]
fn faults_stop_at_the_missing_page_of_ptes() {
    let mut pt = linear(PageTableConfig::default());
    pt.map(A, Vpn(0), pte(1));
    // The next page of PTEs does not exist; the level-2 page mapping it does (vpn 0's).
    let far = 1 << 9;
    let mut env = Reserved::default();
    let (r, rec) = walk(&mut pt, far, &mut env);
    assert_eq!(r, None);
    // With nothing held, the level-1, 2 and 3 lookups miss; the walk reads the root, level 3,
    // then level 2, whose entry for the missing page of PTEs is invalid.
    assert_eq!(rec.nested_misses, 3);
    assert_eq!(rec.mem_refs, 3);
    // Only the pages that exist got translations.
    assert_eq!(env.fills.len(), 2);
    // An address space with no mapping at all has no root to read.
    let mut rec = WalkRecord::default();
    assert_eq!(pt.walk(Asid(9), Vpn(0), &mut NoTlb, &mut rec), None);
    assert_eq!(rec.mem_refs, 0);
}

#[test]
fn stale_reserved_entries_count_as_misses() {
    let mut pt = linear(PageTableConfig::default());
    pt.map(A, Vpn(0), pte(1));
    pt.map(A, Vpn(1 << 20), pte(2));
    pt.unmap(A, Vpn(1 << 20));
    // The env still claims the freed pages of PTEs are mapped; the table climbs to the
    // level-3 page (which still exists) and faults at its invalid entry.
    let (r, rec) = walk(&mut pt, 1 << 20, &mut AlwaysHit);
    assert_eq!(r, None);
    assert_eq!((rec.nested_misses, rec.mem_refs), (2, 1));
}

#[test]
fn sixty_four_bit_space_uses_six_levels() {
    let mut pt = linear(PageTableConfig { va_bits: 64, ..Default::default() });
    let PageTable::Linear(t) = &pt else { panic!() };
    assert_eq!(t.levels(), 6);
    assert_eq!(t.lpt_base(), VirtAddr(0xff00_0000_0000_0000));
    let top = (1u64 << 52) - 1;
    pt.map(A, Vpn(top), pte(1));
    // Five pages of PTEs and the 128-entry root, counted as a page (Table 2).
    assert_eq!(pt.size().table_bytes, 6 * 4096);
    let (r, rec) = walk(&mut pt, top, &mut NoTlb);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (Some(pte(1)), 6, 5));
}

#[test]
fn fewer_levels_make_a_larger_wired_root() {
    let mut pt = linear(PageTableConfig {
        va_bits: 32,
        levels: Some(1),
        accounting: LineAccounting::Layout,
        ..Default::default()
    });
    pt.map(A, Vpn(0xabcde), pte(1));
    // One level: the whole 2^20-entry array is wired, no translation needed.
    assert_eq!(pt.size().table_bytes, 8 << 20);
    let (r, rec) = walk(&mut pt, 0xabcde, &mut NoTlb);
    assert_eq!((r, rec.mem_refs, rec.nested_misses, rec.cache_lines), (Some(pte(1)), 1, 0, 1));
}

#[test]
fn remove_asid_and_per_asid_tables() {
    let mut pt = linear(PageTableConfig::default());
    pt.map(A, Vpn(5), pte(1));
    pt.map(Asid(4), Vpn(5), pte(2));
    assert_eq!(pt.size().objects, 8);
    pt.remove_asid(A);
    assert_eq!(pt.size().objects, 4);
    assert_eq!(pt.get(A, Vpn(5)), None);
    assert_eq!(pt.get(Asid(4), Vpn(5)), Some(pte(2)));
}

#[test]
fn leaf_mode_looks_up_and_fills_the_leaf_page_only() {
    // 48-bit space, 4 levels: the root is wired, levels 1-3 are virtual arrays.
    let mut pt = leaf(PageTableConfig::default());
    let v = 0x12_3456_789a & ((1 << 36) - 1);
    pt.map(A, Vpn(v), pte(5));
    pt.map(A, Vpn(v + 1), pte(6));
    pt.map(A, Vpn(v + 512), pte(7));
    let page = |level: u32, vpn: u64| pte_va(&pt, level, vpn).unwrap().0 & !4095;
    let (p1, p1_next) = (page(1, v), page(1, v + 512));

    let mut env = Reserved::default();
    let (r, rec) = walk(&mut pt, v, &mut env);
    assert_eq!(r, Some(pte(5)));
    // One nested miss; root, level-3 and level-2 entries read physically, then the PTE.
    assert_eq!((rec.mem_refs, rec.cache_lines, rec.nested_misses), (4, 4, 1));
    assert_eq!(env.lookups, vec![p1]);
    assert_eq!(env.fills, vec![p1]);
    // Root first, each read at its entry's index, as in the climbing walk.
    let idx = [v >> 27 & 511, v >> 18 & 511, v >> 9 & 511, v & 511];
    for (i, a) in rec.addrs[..4].iter().enumerate() {
        assert_eq!(a.0 % 4096, idx[i] * 8);
    }
    // The leaf page is held: one reference.
    let (r, rec) = walk(&mut pt, v + 1, &mut env);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (Some(pte(6)), 1, 0));
    // The next page of PTEs: no level-2 translation to hit, so the whole path again (4
    // references, where every_level reads 2), still one nested miss and one fill.
    let (r, rec) = walk(&mut pt, v + 512, &mut env);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (Some(pte(7)), 4, 1));
    assert_eq!(env.fills, vec![p1, p1_next]);
    assert_eq!(env.lookups, vec![p1, p1, p1_next]);
}

#[test]
fn leaf_mode_faults_and_stale_entries() {
    let mut pt = leaf(PageTableConfig::default());
    pt.map(A, Vpn(0), pte(1));
    // The next page of PTEs does not exist: root, level 3, then level 2's invalid entry; no fill.
    let mut env = Reserved::default();
    let (r, rec) = walk(&mut pt, 1 << 9, &mut env);
    assert_eq!((r, rec.nested_misses, rec.mem_refs), (None, 1, 3));
    assert!(env.fills.is_empty());
    // A claimed translation of a freed page of PTEs is a miss: one nested miss, then root and
    // level 3 (whose entry is invalid) are read.
    pt.map(A, Vpn(1 << 20), pte(2));
    pt.unmap(A, Vpn(1 << 20));
    let (r, rec) = walk(&mut pt, 1 << 20, &mut AlwaysHit);
    assert_eq!((r, rec.nested_misses, rec.mem_refs), (None, 1, 2));
    // Without any TLB, six levels: one nested miss where every_level takes five, the same six
    // references.
    let mut pt = leaf(PageTableConfig { va_bits: 64, ..Default::default() });
    let top = (1u64 << 52) - 1;
    pt.map(A, Vpn(top), pte(1));
    let (r, rec) = walk(&mut pt, top, &mut NoTlb);
    assert_eq!((r, rec.mem_refs, rec.nested_misses), (Some(pte(1)), 6, 1));
}
