//! Superpage and partial-subblock PTEs in radix (forward-mapped) and linear tables (talluri95
//! §4.2–§4.4): the `replicate` and `intermediate` stores, walk costs, Table 2 sizes and the
//! subblock-prefetch walk, on hand-built address spaces and generated ones.

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use xlat::addr::{Asid, PageSize, Pfn, VirtAddr, Vpn};
use xlat::pt::{Kind, NestedFill, NoTlb, PageTable, PageTableConfig, Pte, SuperpageStore, WalkEnv, WalkRecord};

const A: Asid = Asid(2);
const PAGE: u64 = 4096;

fn size(shift: u32) -> PageSize {
    PageSize::from_shift(shift).unwrap()
}

fn base(pfn: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
}

/// A superpage PTE of `2^shift` bytes, `pfn` the frame of the page it is mapped or looked up at.
fn sp(pfn: u64, shift: u32) -> Pte {
    Pte { pfn: Pfn(pfn), size: size(shift), valid: 0 }
}

/// A partial-subblock PTE over a 16-page (64 KB) block.
fn partial(pfn: u64, valid: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: size(16), valid }
}

/// Linear tables climb level by level here (`every_level`, talluri95's model of §4.2).
fn table(kind: Kind, store: SuperpageStore, va_bits: u32, levels: Option<u32>, line_bytes: u32) -> PageTable {
    let cfg = PageTableConfig {
        kind,
        superpage_store: Some(store),
        va_bits,
        levels,
        line_bytes,
        nested_fill: NestedFill::EveryLevel,
        ..Default::default()
    };
    PageTable::new(&cfg, PageSize::SIZE_4K).unwrap()
}

fn levels(pt: &PageTable) -> u64 {
    match pt {
        PageTable::Radix(t) => t.levels() as u64,
        PageTable::Linear(t) => t.levels() as u64,
        _ => unreachable!(),
    }
}

fn walk<E: WalkEnv>(pt: &mut PageTable, vpn: u64, env: &mut E) -> (Option<Pte>, WalkRecord) {
    let mut rec = WalkRecord::default();
    let r = pt.walk(A, Vpn(vpn), env, &mut rec);
    (r, rec)
}

fn walk_block<E: WalkEnv>(pt: &mut PageTable, vpn: u64, n: usize, env: &mut E) -> (Vec<Option<Pte>>, WalkRecord) {
    let mut rec = WalkRecord::default();
    let mut out = vec![None; n];
    let r = pt.walk_block(A, Vpn(vpn), env, &mut rec, &mut out);
    assert_eq!(r, out[vpn as usize % n]);
    (out, rec)
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
    held: BTreeSet<u64>,
    lookups: Vec<u64>,
    fills: Vec<u64>,
}

impl WalkEnv for Reserved {
    fn lookup_pt_translation(&mut self, _: Asid, va: VirtAddr) -> bool {
        self.lookups.push(va.0);
        self.held.contains(&va.0)
    }
    fn fill_pt_translation(&mut self, _: Asid, va: VirtAddr) {
        self.fills.push(va.0);
        self.held.insert(va.0);
    }
}

/// The hand-built space of the replicate tests: a base page at 0x100 (in the leaf node of VPNs
/// 0..512), a 64 KB superpage over 0x200..0x210 (frames 0x1000..), and a partial-subblock PTE
/// over 0x300..0x310 (block frame 0x2000) with pages 0, 2, 13 and 15 valid (both in the leaf node
/// of VPNs 512..1024).
const PARTIAL_VALID: u64 = 1 | 1 << 2 | 1 << 13 | 1 << 15;

fn build_small(pt: &mut PageTable) {
    pt.map(A, Vpn(0x100), base(0x500));
    // Mapped through a page in the middle: the frame given is that page's.
    pt.map(A, Vpn(0x205), sp(0x1005, 16));
    pt.map(A, Vpn(0x302), partial(0x2002, PARTIAL_VALID));
}

/// What `build_small` maps, written out page by page.
fn small_expected(valid: u64) -> BTreeMap<u64, Pte> {
    let mut m = BTreeMap::new();
    m.insert(0x100, base(0x500));
    for i in 0..16 {
        m.insert(0x200 + i, sp(0x1000 + i, 16));
        if valid >> i & 1 == 1 {
            m.insert(0x300 + i, partial(0x2000 + i, valid));
        }
    }
    m
}

fn check_gets(pt: &PageTable, range: std::ops::Range<u64>, expected: &BTreeMap<u64, Pte>) {
    for v in range {
        assert_eq!(pt.get(A, Vpn(v)), expected.get(&v).copied(), "vpn {v:#x}");
    }
}

#[test]
fn radix_replicate_base_superpage_and_partial() {
    // 4-level 48-bit x86-64 tree and talluri95's 7-level tree over 64-bit addresses.
    for (va_bits, lv) in [(48, None), (64, Some(7))] {
        let mut pt = table(Kind::Radix, SuperpageStore::Replicate, va_bits, lv, 64);
        let l = levels(&pt);
        assert_eq!(l, if va_bits == 48 { 4 } else { 7 });
        build_small(&mut pt);
        let want = small_expected(PARTIAL_VALID);
        check_gets(&pt, 0..0x400, &want);
        // Every site has its leaf node: a walk of any page 0..1024 reads one entry per level,
        // mapped or not, as for base pages.
        for v in [0x100, 0x200, 0x20f, 0x300, 0x301, 0x30d, 0x30f, 0x1ff, 0x3ff] {
            let (r, rec) = walk(&mut pt, v, &mut NoTlb);
            assert_eq!(r, want.get(&v).copied());
            assert_eq!((rec.mem_refs, rec.cache_lines), (l, l), "vpn {v:#x}");
        }
        // Size, 4 KB per node: Nactive(512 pages) = 2 (regions 0 and 1; the superpage and every
        // site of the partial PTE count), Nactive = 1 at every level above.
        assert_eq!(pt.size().table_bytes, (l + 1) * PAGE);
        assert_eq!(pt.size().objects, l + 1);

        // Gaining page 1, then losing page 15: the PTE of the same block and size is replaced.
        let gained = PARTIAL_VALID | 1 << 1;
        pt.map(A, Vpn(0x301), partial(0x2001, gained));
        check_gets(&pt, 0..0x400, &small_expected(gained));
        let lost = gained & !(1 << 15);
        pt.map(A, Vpn(0x300), partial(0x2000, lost));
        check_gets(&pt, 0..0x400, &small_expected(lost));
        assert_eq!(pt.size().table_bytes, (l + 1) * PAGE);

        // A page whose bit is clear is not mapped: unmapping it removes nothing.
        assert_eq!(pt.unmap(A, Vpn(0x30e)), None);
        check_gets(&pt, 0..0x400, &small_expected(lost));
        // Unmapping a valid page removes the whole partial-subblock PTE.
        assert_eq!(pt.unmap(A, Vpn(0x302)), Some(partial(0x2002, lost)));
        let mut want = small_expected(0);
        check_gets(&pt, 0..0x400, &want);
        // And the whole superpage.
        assert_eq!(pt.unmap(A, Vpn(0x20a)), Some(sp(0x100a, 16)));
        want.retain(|&v, _| v == 0x100);
        check_gets(&pt, 0..0x400, &want);
        assert_eq!(pt.size().table_bytes, l * PAGE);
        assert_eq!(pt.unmap(A, Vpn(0x100)), Some(base(0x500)));
        assert_eq!(pt.size().table_bytes, 0);
        assert_eq!(pt.size().objects, 0);
    }
}

#[test]
fn full_partial_promoted_to_a_superpage_and_back() {
    let mut pt = table(Kind::Radix, SuperpageStore::Replicate, 48, None, 64);
    pt.map(A, Vpn(0x300), partial(0x2000, 0xffff));
    // Promotion: a superpage of the same block and size replaces the partial-subblock PTE.
    pt.map(A, Vpn(0x300), sp(0x2000, 16));
    for i in 0..16 {
        assert_eq!(pt.get(A, Vpn(0x300 + i)), Some(sp(0x2000 + i, 16)));
    }
    // Demotion back to a partial-subblock PTE with one page gone.
    pt.map(A, Vpn(0x300), partial(0x2000, 0x7fff));
    assert_eq!(pt.get(A, Vpn(0x30f)), None);
    assert_eq!(pt.get(A, Vpn(0x303)), Some(partial(0x2003, 0x7fff)));
    assert_eq!(pt.unmap(A, Vpn(0x300)), Some(partial(0x2000, 0x7fff)));
    assert_eq!(pt.size().objects, 0);
}

#[test]
fn radix_replicate_2mb_fills_a_leaf() {
    // Replicated, a 2 MB superpage is 512 leaf sites: a full leaf node, and a normal walk.
    let mut pt = table(Kind::Radix, SuperpageStore::Replicate, 48, None, 64);
    let r = 0x40_0000;
    pt.map(A, Vpn(r + 7), sp(0x8_0007, 21));
    for i in 0..512 {
        assert_eq!(pt.get(A, Vpn(r + i)), Some(sp(0x8_0000 + i, 21)));
    }
    assert_eq!(pt.get(A, Vpn(r + 512)), None);
    let (_, rec) = walk(&mut pt, r + 100, &mut NoTlb);
    assert_eq!(rec.mem_refs, 4);
    assert_eq!(pt.size().objects, 4);
    assert_eq!(pt.unmap(A, Vpn(r + 511)), Some(sp(0x8_01ff, 21)));
    assert_eq!(pt.size().objects, 0);
}

#[test]
fn radix_intermediate_superpages_stop_the_walk() {
    for (va_bits, lv) in [(48, None), (64, Some(7))] {
        let mut pt = table(Kind::Radix, SuperpageStore::Intermediate, va_bits, lv, 64);
        let l = levels(&pt);
        // A 2 MB superpage fills one level-2 entry (covering 2^9 pages), so it is stored there
        // and has no leaf node: the tree is one node per level from the root to level 2.
        let r = 0x40_0000;
        pt.map(A, Vpn(r + 3), sp(0x8_0003, 21));
        assert_eq!(pt.size().objects, l - 1);
        assert_eq!(pt.size().table_bytes, (l - 1) * PAGE);
        for i in 0..512 {
            assert_eq!(pt.get(A, Vpn(r + i)), Some(sp(0x8_0000 + i, 21)));
        }
        // The walk reads levels l..2 and stops at the superpage entry: l - 1 references / lines,
        // the last one the entry of (r + 5) in the level-2 node, index (r >> 9) & 511 = 0.
        let (got, rec) = walk(&mut pt, r + 5, &mut NoTlb);
        assert_eq!(got, Some(sp(0x8_0005, 21)));
        assert_eq!((rec.mem_refs, rec.cache_lines), (l - 1, l - 1));
        assert_eq!(rec.addrs[(l - 2) as usize].0 % PAGE, ((r >> 9) & 511) * 8);

        // A 64 KB superpage in the next 2 MB region is replicated (not an entry's coverage):
        // a leaf node under the same level-2 node (index 1). Nactive(pb_1) = 1, others 1.
        pt.map(A, Vpn(r + 512), sp(0x9_0000, 16));
        assert_eq!(pt.size().objects, l);
        let (got, rec) = walk(&mut pt, r + 515, &mut NoTlb);
        assert_eq!(got, Some(sp(0x9_0003, 16)));
        assert_eq!(rec.mem_refs, l);

        // A 4 MB superpage is no entry's coverage either: 1024 sites over 2 new leaf nodes,
        // under a new level-2 node (0x80_0000 >> 18 = 0x20, the first superpage's is 0x10).
        let r4 = 0x80_0000;
        pt.map(A, Vpn(r4), sp(0x20_0000, 22));
        assert_eq!(pt.size().objects, l + 3);
        assert_eq!(pt.get(A, Vpn(r4 + 1023)), Some(sp(0x20_03ff, 22)));
        let (_, rec) = walk(&mut pt, r4 + 600, &mut NoTlb);
        assert_eq!(rec.mem_refs, l);

        // A 1 GB superpage fills a level-3 entry (2^18 pages): l - 2 references. In the 48-bit
        // tree 0x400_0000 is level-4 index 0, level-3 index 0x100: a new entry in the existing
        // level-3 node, so no new node at all.
        let g = 0x400_0000;
        pt.map(A, Vpn(g + 0x3_ffff), sp(0x4000_0000 + 0x3_ffff, 30));
        assert_eq!(pt.size().objects, l + 3);
        let (got, rec) = walk(&mut pt, g + 12345, &mut NoTlb);
        assert_eq!(got, Some(sp(0x4000_0000 + 12345, 30)));
        assert_eq!(rec.mem_refs, l - 2);

        // Unmapping removes whole superpages; the nodes left empty go.
        assert_eq!(pt.unmap(A, Vpn(r + 100)), Some(sp(0x8_0064, 21)));
        for i in 0..512 {
            assert_eq!(pt.get(A, Vpn(r + i)), None);
        }
        let (got, rec) = walk(&mut pt, r + 100, &mut NoTlb);
        assert_eq!((got, rec.mem_refs), (None, l - 1));
        assert_eq!(pt.unmap(A, Vpn(g)), Some(sp(0x4000_0000, 30)));
        assert_eq!(pt.unmap(A, Vpn(r4 + 5)), Some(sp(0x20_0005, 22)));
        assert_eq!(pt.size().objects, l);
        assert_eq!(pt.unmap(A, Vpn(r + 520)), Some(sp(0x9_0008, 16)));
        assert_eq!(pt.size().objects, 0);
        // Base pages where the 2 MB superpage was.
        pt.map(A, Vpn(r + 1), base(77));
        assert_eq!(walk(&mut pt, r + 1, &mut NoTlb).1.mem_refs, l);
        assert_eq!(pt.get(A, Vpn(r)), None);
    }
}

#[test]
fn page_walk_caches_never_hold_a_superpage_entry() {
    let cfg = PageTableConfig {
        kind: Kind::Radix,
        superpage_store: Some(SuperpageStore::Intermediate),
        pwc: vec![4, 4, 4],
        ..Default::default()
    };
    let mut pt = PageTable::new(&cfg, PageSize::SIZE_4K).unwrap();
    let r = 0x40_0000;
    pt.map(A, Vpn(r), sp(0x8_0000, 21));
    // Cold: root, level 3, level 2 (superpage). The PML4E and PDPTE caches get the two pointers
    // read; the PDE cache gets nothing.
    let (_, rec) = walk(&mut pt, r + 1, &mut NoTlb);
    assert_eq!((rec.mem_refs, rec.pwc_hits), (3, 0));
    // Warm: the PDE cache misses, the PDPTE cache hits, the level-2 entry is read: 1 reference.
    let (got, rec) = walk(&mut pt, r + 2, &mut NoTlb);
    assert_eq!(got, Some(sp(0x8_0002, 21)));
    assert_eq!((rec.mem_refs, rec.pwc_hits), (1, 1));
    // Replace the superpage by base pages: the walk must find the new leaf node.
    pt.unmap(A, Vpn(r));
    pt.map(A, Vpn(r + 2), base(9));
    let (got, rec) = walk(&mut pt, r + 2, &mut NoTlb);
    assert_eq!(got, Some(base(9)));
    // The PDPTE entry was freed with its node, so: root, level 3, level 2, leaf.
    assert_eq!(rec.mem_refs, 4);
    let (_, rec) = walk(&mut pt, r + 2, &mut NoTlb);
    assert_eq!((rec.mem_refs, rec.pwc_hits), (1, 1));
}

#[test]
fn linear_replicate_costs_like_base_pages() {
    // 4-level (48-bit) and 6-level (64-bit) linear tables.
    for va_bits in [48, 64] {
        let mut pt = table(Kind::Linear, SuperpageStore::Replicate, va_bits, None, 64);
        let l = levels(&pt);
        assert_eq!(l, if va_bits == 48 { 4 } else { 6 });
        build_small(&mut pt);
        let want = small_expected(PARTIAL_VALID);
        check_gets(&pt, 0..0x400, &want);
        for v in [0x100, 0x207, 0x300, 0x301, 0x30f] {
            // No TLB: every level below the root nests; one reference per level.
            let (r, rec) = walk(&mut pt, v, &mut NoTlb);
            assert_eq!(r, want.get(&v).copied());
            assert_eq!((rec.mem_refs, rec.cache_lines, rec.nested_misses), (l, l, l - 1));
            // Leaf page held: one reference.
            let (r, rec) = walk(&mut pt, v, &mut AlwaysHit);
            assert_eq!(r, want.get(&v).copied());
            assert_eq!((rec.mem_refs, rec.nested_misses), (1, 0));
        }
        // One page of PTEs per level (the root counted as a page), two at level 1.
        assert_eq!(pt.size().table_bytes, (l + 1) * PAGE);
        assert_eq!(pt.unmap(A, Vpn(0x20f)), Some(sp(0x100f, 16)));
        assert_eq!(pt.unmap(A, Vpn(0x30d)), Some(partial(0x200d, PARTIAL_VALID)));
        check_gets(&pt, 0..0x400, &BTreeMap::from([(0x100, base(0x500))]));
        pt.remove_asid(A);
        assert_eq!(pt.size().objects, 0);
    }
}

#[test]
fn linear_intermediate_takes_the_nested_miss_on_the_base_pte_page() {
    for va_bits in [48, 64] {
        let mut pt = table(Kind::Linear, SuperpageStore::Intermediate, va_bits, None, 64);
        let l = levels(&pt);
        let r = 0x40_0000;
        pt.map(A, Vpn(r), sp(0x8_0000, 21));
        // No page of level-1 PTEs exists for the superpage: l - 1 pages of PTEs.
        assert_eq!(pt.size().table_bytes, (l - 1) * PAGE);
        let page = |pt: &PageTable, level: u32| {
            let PageTable::Linear(t) = pt else { panic!() };
            t.pte_va(level, Vpn(r + 9)).unwrap().0 & !(PAGE - 1)
        };
        // No TLB: the level-1 page (absent), and levels 2 .. l-1 miss: l - 1 nested misses; the
        // walk reads the root and comes down to the level-2 PTE holding the superpage: l - 1
        // references.
        let (got, rec) = walk(&mut pt, r + 9, &mut NoTlb);
        assert_eq!(got, Some(sp(0x8_0009, 21)));
        assert_eq!((rec.mem_refs, rec.cache_lines, rec.nested_misses), (l - 1, l - 1, l - 1));
        // Every translation held: still a nested miss on the level-1 page, then 1 reference.
        let (got, rec) = walk(&mut pt, r + 9, &mut AlwaysHit);
        assert_eq!(got, Some(sp(0x8_0009, 21)));
        assert_eq!((rec.mem_refs, rec.nested_misses), (1, 1));
        // Reserved entries: the first walk looks up levels 1 .. l-1 and fills levels l-1 .. 2
        // (never the level-1 page, which does not exist).
        let mut env = Reserved::default();
        walk(&mut pt, r + 9, &mut env);
        let lookups: Vec<u64> = (1..l as u32).map(|k| page(&pt, k)).collect();
        let fills: Vec<u64> = (2..l as u32).rev().map(|k| page(&pt, k)).collect();
        assert_eq!(env.lookups, lookups);
        assert_eq!(env.fills, fills);
        // Then: nested miss on the level-1 page, level-2 page held: 1 nested miss, 1 reference.
        let (got, rec) = walk(&mut pt, r + 511, &mut env);
        assert_eq!(got, Some(sp(0x8_01ff, 21)));
        assert_eq!((rec.mem_refs, rec.nested_misses), (1, 1));
        // A base page of a table under the same level-2 page: 1 nested miss, 2 references.
        pt.map(A, Vpn(r + 512), base(5));
        assert_eq!(pt.size().table_bytes, l * PAGE);
        let (got, rec) = walk(&mut pt, r + 512, &mut env);
        assert_eq!((got, rec.mem_refs, rec.nested_misses), (Some(base(5)), 2, 1));
        assert_eq!(pt.unmap(A, Vpn(r + 3)), Some(sp(0x8_0003, 21)));
        assert_eq!(pt.get(A, Vpn(r + 3)), None);
        assert_eq!(pt.size().table_bytes, l * PAGE);
    }
}

#[test]
fn radix_block_walk_reads_the_block_in_one_go() {
    for line in [64u64, 256] {
        let mut pt = table(Kind::Radix, SuperpageStore::Replicate, 48, None, line as u32);
        build_small(&mut pt);
        let want = small_expected(PARTIAL_VALID);
        // Three upper entries, then the 16 PTEs of block 0x300: bytes [0x300*8, +128) of the
        // leaf node, 2 lines of 64 bytes or 1 of 256.
        let (out, rec) = walk_block(&mut pt, 0x302, 16, &mut NoTlb);
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, want.get(&(0x300 + i as u64)).copied());
        }
        let leaf_lines = 128 / line.min(128);
        assert_eq!((rec.mem_refs, rec.cache_lines), (3 + leaf_lines, 3 + leaf_lines));
        let leaf: Vec<u64> = rec.addrs[3..rec.n_addrs as usize].iter().map(|a| a.0 % PAGE).collect();
        let expect: Vec<u64> = (0..leaf_lines).map(|j| (0x300 * 8 + j * line) % PAGE).collect();
        assert_eq!(leaf, expect);
        // A 32-page block: 256 bytes, 4 lines of 64 or 1 of 256.
        let (out, rec) = walk_block(&mut pt, 0x21f, 32, &mut NoTlb);
        for (i, o) in out.iter().enumerate() {
            assert_eq!(*o, want.get(&(0x200 + i as u64)).copied());
        }
        assert_eq!(rec.mem_refs, 3 + 256 / line);
    }
    // Intermediate: a block inside a 2 MB superpage costs the walk to its entry (3 references).
    let mut pt = table(Kind::Radix, SuperpageStore::Intermediate, 48, None, 64);
    let r = 0x40_0000;
    pt.map(A, Vpn(r), sp(0x8_0000, 21));
    pt.map(A, Vpn(r + 512), sp(0x9_0000, 21));
    let (out, rec) = walk_block(&mut pt, r + 37, 16, &mut NoTlb);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(*o, Some(sp(0x8_0020 + i as u64, 21)));
    }
    assert_eq!(rec.mem_refs, 3);
    // Blocks larger than a leaf node: one walk per page (1024 walks of 3 references).
    let (out, rec) = walk_block(&mut pt, r + 3, 1024, &mut NoTlb);
    assert_eq!(out[600], Some(sp(0x9_0000 + 88, 21)));
    assert_eq!(rec.mem_refs, 3 * 1024);
    // Nothing under the block: the walk reads the root and stops at the invalid level-3 entry
    // ((0x100 >> 18) & 511 = 0, the superpages' is 0x10), all None.
    let (out, rec) = walk_block(&mut pt, 0x100, 16, &mut NoTlb);
    assert!(out.iter().all(|o| o.is_none()));
    assert_eq!(rec.mem_refs, 2);
}

#[test]
fn linear_block_walk_reaches_the_leaf_page_as_a_walk_does() {
    let mut pt = table(Kind::Linear, SuperpageStore::Replicate, 48, None, 64);
    build_small(&mut pt);
    let want = small_expected(PARTIAL_VALID);
    // Leaf page held: no nested miss, then the 128 bytes of the block: 2 references.
    let (out, rec) = walk_block(&mut pt, 0x30f, 16, &mut AlwaysHit);
    for (i, o) in out.iter().enumerate() {
        assert_eq!(*o, want.get(&(0x300 + i as u64)).copied());
    }
    assert_eq!((rec.mem_refs, rec.cache_lines, rec.nested_misses), (2, 2, 0));
    // No TLB: 3 nested misses, root, level 3, level 2 read, then the block.
    let (out, rec) = walk_block(&mut pt, 0x200, 16, &mut NoTlb);
    assert_eq!(out[15], Some(sp(0x100f, 16)));
    assert_eq!((rec.mem_refs, rec.nested_misses), (5, 3));
    // Intermediate 2 MB superpage: 1 nested miss (the absent leaf page) and 1 reference.
    let mut pt = table(Kind::Linear, SuperpageStore::Intermediate, 48, None, 64);
    pt.map(A, Vpn(0x40_0000), sp(0x8_0000, 21));
    let (out, rec) = walk_block(&mut pt, 0x40_0010, 16, &mut AlwaysHit);
    assert_eq!(out[0], Some(sp(0x8_0010, 21)));
    assert_eq!((rec.mem_refs, rec.nested_misses), (1, 1));
}

#[test]
fn other_stores_are_rejected() {
    for kind in [Kind::Radix, Kind::Linear] {
        for store in [SuperpageStore::Multiple, SuperpageStore::SuperpageIndex, SuperpageStore::Native] {
            let cfg = PageTableConfig { kind, superpage_store: Some(store), ..Default::default() };
            let e = PageTable::new(&cfg, PageSize::SIZE_4K).unwrap_err();
            assert_eq!(e.key, "page_table.superpage_store");
        }
    }
}

// ---- Generated address spaces against a plain map ----

/// 2 MB regions the generated mappings fall in: two neighbours under one level-2 node, and one
/// under another level-4 entry.
const REGIONS: [u64; 3] = [0, 0x200, (1 << 27) | 0x1000];

#[derive(Clone, Debug)]
enum Op {
    /// asid, region, block (of 16 pages), page in block
    Base(u32, usize, u64, u64),
    /// asid, region, block: a 64 KB superpage
    Super64(u32, usize, u64),
    /// asid, region, block, valid vector (non-zero)
    Partial(u32, usize, u64, u64),
    /// asid, region: a 2 MB superpage
    Super2m(u32, usize),
    /// asid, region, block, page
    Unmap(u32, usize, u64, u64),
    Exit(u32),
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    let op = (0u8..40, 0u32..2, 0usize..REGIONS.len(), 0u64..32, 0u64..16, 1u64..1 << 16).prop_map(
        |(what, a, r, b, p, valid)| match what {
            0..=9 => Op::Base(a, r, b, p),
            10..=15 => Op::Super64(a, r, b),
            16..=25 => Op::Partial(a, r, b, valid),
            26..=28 => Op::Super2m(a, r),
            29..=38 => Op::Unmap(a, r, b, p),
            _ => Op::Exit(a),
        },
    );
    prop::collection::vec(op, 1..40)
}

/// One mapping of the model: first VPN, pages, first frame, valid vector (0: all pages).
#[derive(Clone, Copy, Debug)]
struct M {
    first: u64,
    pages: u64,
    pfn: u64,
    valid: u64,
}

impl M {
    fn has(&self, v: u64) -> bool {
        v >= self.first && v < self.first + self.pages && (self.valid == 0 || self.valid >> (v - self.first) & 1 == 1)
    }
}

/// The model: mappings by (asid, first VPN), and the frame of every mapped page.
#[derive(Default)]
struct Model {
    maps: BTreeMap<(u32, u64), M>,
    frames: HashMap<(u32, u64), u64>,
}

impl Model {
    fn overlapping(&self, asid: u32, first: u64, pages: u64) -> Vec<M> {
        self.maps
            .values()
            .zip(self.maps.keys())
            .filter(|(m, k)| k.0 == asid && m.first < first + pages && first < m.first + m.pages)
            .map(|(m, _)| *m)
            .collect()
    }

    fn remove(&mut self, asid: u32, m: M) {
        self.maps.remove(&(asid, m.first));
        for v in m.first..m.first + m.pages {
            self.frames.remove(&(asid, v));
        }
    }

    fn insert(&mut self, asid: u32, m: M) {
        self.maps.insert((asid, m.first), m);
        for v in m.first..m.first + m.pages {
            if m.has(v) {
                self.frames.insert((asid, v), m.pfn + v - m.first);
            }
        }
    }
}

/// Table 2 size from the model: a node of level k (leaf 0, covering 2^(9(k+1)) pages) exists for
/// every aligned region holding a site: every page a mapping covers, except that a superpage
/// stored in a level-s entry has no sites below level s.
fn model_nodes(model: &Model, intermediate: bool) -> u64 {
    (0..4u32)
        .map(|k| {
            let mut regions = BTreeSet::new();
            for (&(a, _), m) in &model.maps {
                let in_entry = intermediate && m.valid == 0 && m.pages == 512;
                if in_entry && k == 0 {
                    continue;
                }
                for v in m.first..m.first + m.pages {
                    regions.insert((a, v >> (9 * (k + 1))));
                }
            }
            regions.len() as u64
        })
        .sum()
}

fn run_ops(kind: Kind, store: SuperpageStore, ops: &[Op]) {
    let mut pt = table(kind, store, 48, None, 64);
    let mut model = Model::default();
    for (n, op) in ops.iter().enumerate() {
        let stamp = (n as u64 + 1) << 40;
        let (asid, region) = match *op {
            Op::Base(a, r, ..) | Op::Super64(a, r, _) | Op::Partial(a, r, ..) | Op::Super2m(a, r) => (a, r),
            Op::Unmap(a, r, ..) => (a, r),
            Op::Exit(a) => {
                pt.remove_asid(Asid(a));
                let gone: Vec<M> = model.maps.iter().filter(|(k, _)| k.0 == a).map(|(_, m)| *m).collect();
                for m in gone {
                    model.remove(a, m);
                }
                (a, 0)
            }
        };
        let r0 = REGIONS[region];
        let new = match *op {
            Op::Base(_, _, b, p) => Some(M { first: r0 + b * 16 + p, pages: 1, pfn: stamp, valid: 0 }),
            Op::Super64(_, _, b) => Some(M { first: r0 + b * 16, pages: 16, pfn: stamp, valid: 0 }),
            Op::Partial(_, _, b, valid) => Some(M { first: r0 + b * 16, pages: 16, pfn: stamp, valid }),
            Op::Super2m(..) => Some(M { first: r0, pages: 512, pfn: stamp, valid: 0 }),
            _ => None,
        };
        if let Some(mut m) = new {
            // Overlaps are unmapped first, except a superpage / partial PTE of the same block and
            // size, which the new one replaces (a partial PTE keeps its frames: properly placed).
            for o in model.overlapping(asid, m.first, m.pages) {
                let replaced = m.pages > 1 && o.first == m.first && o.pages == m.pages;
                if replaced {
                    if m.valid != 0 && o.valid != 0 {
                        m.pfn = o.pfn;
                    }
                    model.remove(asid, o);
                } else {
                    let at = (o.first..o.first + o.pages).find(|&v| o.has(v)).unwrap();
                    let got = pt.unmap(Asid(asid), Vpn(at));
                    assert_eq!(got.map(|p| p.pfn.0), Some(o.pfn + at - o.first));
                    model.remove(asid, o);
                }
            }
            // Mapped through a random-ish page of it, with that page's frame.
            let at = m.first + (n as u64 * 7) % m.pages;
            let shift = 12 + m.pages.trailing_zeros();
            pt.map(Asid(asid), Vpn(at), Pte { pfn: Pfn(m.pfn + at - m.first), size: size(shift), valid: m.valid });
            model.insert(asid, m);
        }
        if let Op::Unmap(_, _, b, p) = *op {
            let v = r0 + b * 16 + p;
            let got = pt.unmap(Asid(asid), Vpn(v));
            let hit = model.maps.iter().find(|(k, m)| k.0 == asid && m.has(v)).map(|(_, m)| *m);
            assert_eq!(got.map(|p| p.pfn.0), hit.map(|m| m.pfn + v - m.first));
            if let Some(m) = hit {
                model.remove(asid, m);
            }
        }
        // Every page of the space against the plain map; walks of the region touched.
        for a in 0..2u32 {
            for &r in &REGIONS {
                for v in r..r + 512 {
                    let got = pt.get(Asid(a), Vpn(v)).map(|p| p.pfn.0);
                    assert_eq!(got, model.frames.get(&(a, v)).copied(), "asid {a} vpn {v:#x} after {op:?}");
                }
            }
        }
        for v in r0..r0 + 512 {
            let mut rec = WalkRecord::default();
            let got = pt.walk(Asid(asid), Vpn(v), &mut NoTlb, &mut rec).map(|p| p.pfn.0);
            assert_eq!(got, model.frames.get(&(asid, v)).copied());
        }
        let nodes = model_nodes(&model, store == SuperpageStore::Intermediate);
        assert_eq!(pt.size().objects, nodes, "after {op:?}");
        assert_eq!(pt.size().table_bytes, nodes * PAGE);
    }
}

proptest! {
    #![proptest_config(crate::proptest_cases(24))]

    #[test]
    fn mixed_mappings_agree_with_a_plain_map(ops in ops()) {
        for kind in [Kind::Radix, Kind::Linear] {
            for store in [SuperpageStore::Replicate, SuperpageStore::Intermediate] {
                run_ops(kind, store, &ops);
            }
        }
    }
}
