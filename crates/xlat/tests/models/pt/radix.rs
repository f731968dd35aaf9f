//! Forward-mapped (radix) page tables: exact walk accounting, page-walk caches, node lifetime.

use xlat::addr::{Asid, PageSize, Pfn, PhysAddr, Vpn};
use xlat::pt::{
    BitsPerLevel, Kind, LineAccounting, NoTlb, PageTable, PageTableConfig, PtSize, Pte, WalkRecord, PT_PHYS_BASE,
};

const A: Asid = Asid(1);

fn pte(pfn: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
}

fn radix(cfg: PageTableConfig) -> PageTable {
    PageTable::new(&PageTableConfig { kind: Kind::Radix, ..cfg }, PageSize::SIZE_4K).unwrap()
}

fn walk(pt: &mut PageTable, asid: Asid, vpn: u64) -> (Option<Pte>, WalkRecord) {
    let mut rec = WalkRecord::default();
    let r = pt.walk(asid, Vpn(vpn), &mut NoTlb, &mut rec);
    (r, rec)
}

fn addrs(rec: &WalkRecord) -> Vec<PhysAddr> {
    rec.addrs[..rec.n_addrs as usize].to_vec()
}

/// VPN from x86-64 table indices (PML4, PDPT, PD, PT).
fn vpn4(l4: u64, l3: u64, l2: u64, l1: u64) -> u64 {
    l4 << 27 | l3 << 18 | l2 << 9 | l1
}

#[test]
fn default_is_x86_64_four_level() {
    let mut pt = radix(PageTableConfig::default());
    let PageTable::Radix(t) = &pt else { panic!() };
    assert_eq!(t.levels(), 4);
    assert_eq!(t.bits_per_level(), vec![9, 9, 9, 9]);
    let v = vpn4(0xff, 3, 7, 0x1ff);
    pt.map(A, Vpn(v), pte(42));
    assert_eq!(pt.size(), PtSize { table_bytes: 4 * 4096, bucket_bytes: 0, objects: 4 });
    let (r, rec) = walk(&mut pt, A, v);
    assert_eq!(r, Some(pte(42)));
    assert_eq!(rec.mem_refs, 4);
    assert_eq!(rec.cache_lines, 4);
    assert_eq!(rec.nested_misses, 0);
    assert_eq!(rec.pwc_hits, 0);
    let a = addrs(&rec);
    assert_eq!(a.len(), 4);
    // One entry per level, each in its own 4 KB node in page-table memory, at index * 8.
    let idx = [0xff, 3, 7, 0x1ff];
    for (i, pa) in a.iter().enumerate() {
        assert!(pa.0 >= PT_PHYS_BASE);
        assert_eq!(pa.0 % 4096, idx[i] * 8, "level read {i}");
    }
    let mut nodes: Vec<u64> = a.iter().map(|p| p.0 / 4096).collect();
    nodes.dedup();
    assert_eq!(nodes.len(), 4);
}

#[test]
fn neighbours_share_nodes_and_layout_lines() {
    let mut pt = radix(PageTableConfig { accounting: LineAccounting::Layout, ..Default::default() });
    pt.map(A, Vpn(vpn4(1, 2, 3, 4)), pte(1));
    pt.map(A, Vpn(vpn4(1, 2, 3, 5)), pte(2));
    pt.map(A, Vpn(vpn4(1, 2, 4, 0)), pte(3));
    // Leaves: 2, PD: 1, PDPT: 1, PML4: 1.
    assert_eq!(pt.size().objects, 5);
    assert_eq!(pt.size().table_bytes, 5 * 4096);
    let (r, rec) = walk(&mut pt, A, vpn4(1, 2, 3, 5));
    assert_eq!(r, Some(pte(2)));
    assert_eq!((rec.mem_refs, rec.cache_lines), (4, 4));
    // Unmapped page in an existing leaf: all four levels read, fault.
    let (r, rec) = walk(&mut pt, A, vpn4(1, 2, 3, 6));
    assert_eq!(r, None);
    assert_eq!(rec.mem_refs, 4);
    // Missing PD entry: the walk stops at the PD.
    let (r, rec) = walk(&mut pt, A, vpn4(1, 2, 9, 0));
    assert_eq!(r, None);
    assert_eq!(rec.mem_refs, 3);
    // Missing PML4 entry.
    let (r, rec) = walk(&mut pt, A, vpn4(9, 0, 0, 0));
    assert_eq!(r, None);
    assert_eq!(rec.mem_refs, 1);
    // Another process has no tree at all: nothing to read.
    let (r, rec) = walk(&mut pt, Asid(2), vpn4(1, 2, 3, 4));
    assert_eq!(r, None);
    assert_eq!(rec.mem_refs, 0);
}

#[test]
fn layout_lines_merge_small_nodes_in_one_line() {
    // Two levels of 1 bit with 4-byte entries: 8-byte nodes, packed next to each other in
    // page-table memory, so one walk reads two entries in the same 64-byte line.
    let cfg = PageTableConfig {
        va_bits: 14,
        bits_per_level: Some(BitsPerLevel::Uniform(1)),
        pte_bytes: 4,
        ..Default::default()
    };
    for (accounting, lines) in [(LineAccounting::Paper, 2), (LineAccounting::Layout, 1)] {
        let mut pt = radix(PageTableConfig { accounting, ..cfg.clone() });
        pt.map(A, Vpn(3), pte(1));
        let (r, rec) = walk(&mut pt, A, 3);
        assert_eq!(r, Some(pte(1)));
        assert_eq!((rec.mem_refs, rec.cache_lines), (2, lines), "{accounting:?}");
        assert_eq!(rec.addrs[0].0 / 64, rec.addrs[1].0 / 64);
        assert_eq!(pt.size().table_bytes, 2 * 8);
    }
}

#[test]
fn paper_lines_count_entries_larger_than_a_line() {
    let mut pt = radix(PageTableConfig {
        pte_bytes: 16,
        line_bytes: 8,
        va_bits: 47,
        bits_per_level: Some(BitsPerLevel::Uniform(8)),
        ..Default::default()
    });
    // 35 VPN bits in 8-bit levels: 5 levels, 4 KB nodes of 256 16-byte entries.
    let PageTable::Radix(t) = &pt else { panic!() };
    assert_eq!(t.levels(), 5);
    pt.map(A, Vpn(12345), pte(9));
    // Each 16-byte entry spans two 8-byte lines: two line-sized references per level.
    let (_, rec) = walk(&mut pt, A, 12345);
    assert_eq!((rec.mem_refs, rec.cache_lines), (10, 10));
    assert_eq!(pt.size().table_bytes, 5 * 4096);
}

#[test]
fn page_walk_caches_skip_upper_levels() {
    let mut pt = radix(PageTableConfig { pwc: vec![4, 32, 32], ..Default::default() });
    let v = vpn4(5, 6, 7, 8);
    pt.map(A, Vpn(v), pte(1));
    pt.map(A, Vpn(v + 1), pte(2));
    pt.map(A, Vpn(vpn4(5, 6, 100, 0)), pte(3));
    pt.map(A, Vpn(vpn4(5, 200, 0, 0)), pte(4));
    pt.map(A, Vpn(vpn4(300, 0, 0, 0)), pte(5));

    let (r, rec) = walk(&mut pt, A, v);
    assert_eq!(r, Some(pte(1)));
    assert_eq!((rec.mem_refs, rec.cache_lines, rec.pwc_hits), (4, 4, 0));
    // Same 2 MB region: PDE cache hit, only the leaf PTE is read.
    let (r, rec) = walk(&mut pt, A, v + 1);
    assert_eq!(r, Some(pte(2)));
    assert_eq!((rec.mem_refs, rec.cache_lines, rec.pwc_hits), (1, 1, 1));
    assert!(rec.addrs[0].0 >= PT_PHYS_BASE);
    // Same 1 GB region, other PD entry: PDPTE cache hit, PD entry and PTE read.
    let (r, rec) = walk(&mut pt, A, vpn4(5, 6, 100, 0));
    assert_eq!(r, Some(pte(3)));
    assert_eq!((rec.mem_refs, rec.pwc_hits), (2, 1));
    // Same 512 GB region: PML4E cache hit.
    let (r, rec) = walk(&mut pt, A, vpn4(5, 200, 0, 0));
    assert_eq!(r, Some(pte(4)));
    assert_eq!((rec.mem_refs, rec.pwc_hits), (3, 1));
    // Elsewhere: full walk.
    let (r, rec) = walk(&mut pt, A, vpn4(300, 0, 0, 0));
    assert_eq!(r, Some(pte(5)));
    assert_eq!((rec.mem_refs, rec.pwc_hits), (4, 0));
    // Caches are per ASID.
    pt.map(Asid(2), Vpn(v), pte(6));
    let (r, rec) = walk(&mut pt, Asid(2), v);
    assert_eq!(r, Some(pte(6)));
    assert_eq!((rec.mem_refs, rec.pwc_hits), (4, 0));
}

#[test]
fn page_walk_caches_forget_freed_nodes() {
    let mut pt = radix(PageTableConfig { pwc: vec![4, 32, 32], ..Default::default() });
    let v = vpn4(5, 6, 7, 8);
    pt.map(A, Vpn(v), pte(1));
    pt.map(A, Vpn(vpn4(5, 6, 9, 0)), pte(2));
    walk(&mut pt, A, v);
    assert_eq!(pt.unmap(A, Vpn(v)), Some(pte(1)));
    // The leaf was freed; the PDE cache must not lead to it. PDPTE hit: only the PD entry is
    // read, and it is now invalid.
    let (r, rec) = walk(&mut pt, A, v);
    assert_eq!(r, None);
    assert_eq!((rec.mem_refs, rec.pwc_hits), (1, 1));
    // A leaf for another region reuses the freed node; the stale PDE must not reach it.
    pt.map(A, Vpn(vpn4(5, 6, 20, 8)), pte(3));
    let (r, rec) = walk(&mut pt, A, v);
    assert_eq!((r, rec.mem_refs), (None, 1));
    let (r, _) = walk(&mut pt, A, vpn4(5, 6, 20, 8));
    assert_eq!(r, Some(pte(3)));
    pt.map(A, Vpn(vpn4(5, 6, 7, 3)), pte(3));
    let (r, _) = walk(&mut pt, A, vpn4(5, 6, 7, 3));
    assert_eq!(r, Some(pte(3)));
    pt.remove_asid(A);
    let (r, rec) = walk(&mut pt, A, vpn4(5, 6, 7, 3));
    assert_eq!((r, rec.mem_refs), (None, 0));
}

#[test]
fn unmap_frees_empty_nodes_up_to_the_root() {
    let mut pt = radix(PageTableConfig::default());
    let vs = [vpn4(0, 0, 0, 1), vpn4(0, 0, 0, 2), vpn4(0, 0, 1, 0), vpn4(1, 0, 0, 0)];
    for (i, v) in vs.iter().enumerate() {
        pt.map(A, Vpn(*v), pte(i as u64));
    }
    // root + 2 PDPT + 2 PD + 3 PT
    assert_eq!(pt.size().objects, 8);
    assert_eq!(pt.unmap(A, Vpn(vs[0])), Some(pte(0)));
    assert_eq!(pt.size().objects, 8);
    assert_eq!(pt.unmap(A, Vpn(vs[0])), None);
    pt.unmap(A, Vpn(vs[1]));
    assert_eq!(pt.size().objects, 7);
    pt.unmap(A, Vpn(vs[3]));
    assert_eq!(pt.size().objects, 4);
    pt.unmap(A, Vpn(vs[2]));
    assert_eq!(pt.size(), PtSize::default());
    // Replacing a mapping keeps one entry.
    pt.map(A, Vpn(7), pte(1));
    pt.map(A, Vpn(7), pte(2));
    assert_eq!(pt.get(A, Vpn(7)), Some(pte(2)));
    assert_eq!(pt.unmap(A, Vpn(7)), Some(pte(2)));
    assert_eq!(pt.size().objects, 0);
}

#[test]
fn one_tree_per_asid_and_remove_asid() {
    let mut pt = radix(PageTableConfig::default());
    for asid in 0..3 {
        pt.map(Asid(asid), Vpn(0x1234), pte(asid as u64));
    }
    assert_eq!(pt.size().objects, 12);
    pt.remove_asid(Asid(1));
    assert_eq!(pt.size().objects, 8);
    assert_eq!(pt.get(Asid(1), Vpn(0x1234)), None);
    assert_eq!(pt.get(Asid(2), Vpn(0x1234)), Some(pte(2)));
    // Large ASIDs work as well as small ones.
    pt.map(Asid(1 << 30), Vpn(5), pte(5));
    let (r, rec) = walk(&mut pt, Asid(1 << 30), 5);
    assert_eq!((r, rec.mem_refs), (Some(pte(5)), 4));
}

#[test]
fn five_level_x86_64() {
    let mut pt = radix(PageTableConfig { va_bits: 57, pwc: vec![2, 4, 32, 32], ..Default::default() });
    let PageTable::Radix(t) = &pt else { panic!() };
    assert_eq!(t.levels(), 5);
    let top = (1u64 << 45) - 1;
    pt.map(A, Vpn(top), pte(1));
    pt.map(A, Vpn(0), pte(2));
    assert_eq!(pt.size().objects, 9);
    let (r, rec) = walk(&mut pt, A, top);
    assert_eq!((r, rec.mem_refs, rec.cache_lines), (Some(pte(1)), 5, 5));
    let (r, rec) = walk(&mut pt, A, top);
    assert_eq!((r, rec.mem_refs, rec.pwc_hits), (Some(pte(1)), 1, 1));
    // Beyond va_bits: not mapped, nothing read.
    let (r, rec) = walk(&mut pt, A, 1 << 45);
    assert_eq!((r, rec.mem_refs), (None, 0));
}

#[test]
fn per_level_bits_two_level_32_bit() {
    // i386 without PAE: 10 + 10 bits, 4-byte entries, 4 KB nodes.
    let mut pt = radix(PageTableConfig {
        va_bits: 32,
        bits_per_level: Some(BitsPerLevel::PerLevel(vec![10, 10])),
        pte_bytes: 4,
        ..Default::default()
    });
    pt.map(A, Vpn(0xfffff), pte(1));
    pt.map(A, Vpn(0x00400), pte(2));
    assert_eq!(pt.size().table_bytes, 3 * 4096);
    let (r, rec) = walk(&mut pt, A, 0xfffff);
    assert_eq!((r, rec.mem_refs), (Some(pte(1)), 2));
    assert_eq!(rec.addrs[0].0 % 4096, 0x3ff * 4);
    assert_eq!(rec.addrs[1].0 % 4096, 0x3ff * 4);
}

#[test]
#[should_panic(expected = "va_bits")]
fn mapping_beyond_va_bits_panics() {
    let mut pt = radix(PageTableConfig::default());
    pt.map(A, Vpn(1 << 36), pte(1));
}

#[test]
fn talluri95_seven_level_64_bit_tree() {
    // talluri95 §6.1: "Forward-mapped page tables use a seven-level tree as in Figure 3".
    let mut pt = radix(PageTableConfig { va_bits: 64, levels: Some(7), ..Default::default() });
    let v = (1u64 << 52) - 1;
    pt.map(A, Vpn(v), pte(1));
    pt.map(A, Vpn(v - 512), pte(2));
    // Table 2: Σ 512 × 8 × Nactive(2^(9i)) = 4 KB × (2 + 6).
    assert_eq!(pt.size().table_bytes, 8 * 4096);
    let (r, rec) = walk(&mut pt, A, v);
    assert_eq!((r, rec.mem_refs, rec.cache_lines), (Some(pte(1)), 7, 7));
}
