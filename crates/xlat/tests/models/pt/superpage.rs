//! Superpage and partial-subblock PTEs in clustered and hashed page tables (talluri95 §4.2–§5):
//! exact gets, walk references and lines derived by hand from the node layouts, and Table 2
//! sizes computed here from the mapped page sets.
//!
//! Layouts (8-byte words, `paper` accounting: the bucket head read is a reference but not a line,
//! every node probed starts a line and costs the lines of the words read in it):
//! - clustered base node `tag | next | mapping[16]`: 144 bytes, `mapping[i]` at byte `16 + 8i`;
//! - clustered S node (block superpage / partial-subblock) `tag | next | mapping`: 24 bytes;
//! - clustered SZ node with `n` superpages: `16 + 8n` bytes;
//! - hashed PTE `tag | next | mapping`: 24 bytes.

use std::collections::BTreeSet;
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::{Kind, NoTlb, PageTable, PageTableConfig, PtSize, Pte, SuperpageStore, WalkRecord};

const A: Asid = Asid(0);
const K4: u32 = 12;
const K8: u32 = 13;
const K16: u32 = 14;
const K64: u32 = 16;
const K256: u32 = 18;

fn pte(pfn: u64, shift: u32, valid: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::from_shift(shift).unwrap(), valid }
}

fn table(cfg: PageTableConfig) -> PageTable {
    PageTable::new(&cfg, PageSize::SIZE_4K).unwrap()
}

fn walk(pt: &mut PageTable, vpn: u64) -> (Option<Pte>, u64, u64) {
    let mut rec = WalkRecord::default();
    let r = pt.walk(A, Vpn(vpn), &mut NoTlb, &mut rec);
    (r, rec.mem_refs, rec.cache_lines)
}

fn walk_block(pt: &mut PageTable, vpn: u64, n: usize) -> (Vec<Option<Pte>>, u64, u64) {
    let mut rec = WalkRecord::default();
    let mut out = vec![None; n];
    let r = pt.walk_block(A, Vpn(vpn), &mut NoTlb, &mut rec, &mut out);
    assert_eq!(r, out[(vpn as usize) % n]);
    (out, rec.mem_refs, rec.cache_lines)
}

/// Table 2's clustered size, `24 × Nactive(s) × fss + (8s + 16) × Nactive(s) × (1 − fss)`, from
/// the pages mapped by base PTEs and those mapped by superpage / partial-subblock PTEs (each block
/// holding one kind).
fn table2_clustered(s: u64, base: &BTreeSet<u64>, sup: &BTreeSet<u64>) -> u64 {
    let blocks = |set: &BTreeSet<u64>| set.iter().map(|v| v / s).collect::<BTreeSet<_>>();
    let (b, p) = (blocks(base), blocks(sup));
    assert!(b.is_disjoint(&p));
    let nactive = (b.len() + p.len()) as u64;
    let nss = p.len() as u64; // fss × Nactive(s)
    24 * nss + (8 * s + 16) * (nactive - nss)
}

fn clustered(line_bytes: u32) -> PageTable {
    table(PageTableConfig { kind: Kind::Clustered, line_bytes, ..Default::default() })
}

#[test]
fn clustered_variants_get_walk_and_size() {
    let mut pt = clustered(64);
    // Block 0x10: two base pages (a base node).
    pt.map(A, Vpn(0x100), pte(1000, K4, 0));
    pt.map(A, Vpn(0x10a), pte(1010, K4, 0));
    // Block 0x11: a 64 KB superpage in frames 0x2000.. (an S node), mapped through page 3.
    pt.map(A, Vpn(0x113), pte(0x2003, K64, 0));
    // Block 0x12: a partial-subblock PTE, pages 0, 2, 15 in frames 0x3000 + i.
    pt.map(A, Vpn(0x120), pte(0x3000, K64, 0x8005));
    // Blocks 0x14..0x17: a 256 KB superpage in frames 0x8000.., replicated per block.
    pt.map(A, Vpn(0x140), pte(0x8000, K256, 0));

    let base: BTreeSet<u64> = [0x100, 0x10a].into();
    let sup: BTreeSet<u64> = (0x110..0x120).chain([0x120, 0x122, 0x12f]).chain(0x140..0x180).collect();
    // Every page: mapped as the model says, with pfn = mapping's first frame + offset.
    for v in 0x0f0..0x190u64 {
        let want = match v {
            0x100 => Some(pte(1000, K4, 0)),
            0x10a => Some(pte(1010, K4, 0)),
            0x110..=0x11f => Some(pte(0x2000 + (v - 0x110), K64, 0)),
            0x120 | 0x122 | 0x12f => Some(pte(0x3000 + (v - 0x120), K64, 0x8005)),
            0x140..=0x17f => Some(pte(0x8000 + (v - 0x140), K256, 0)),
            _ => None,
        };
        assert_eq!(pt.get(A, Vpn(v)), want, "vpn {v:#x}");
        assert_eq!(walk(&mut pt, v).0, want, "vpn {v:#x}");
        assert_eq!(want.is_some(), base.contains(&v) || sup.contains(&v));
    }
    // Sizes: one base node (144) and 1 + 1 + 4 S nodes (24 each).
    let size = pt.size();
    assert_eq!(size.table_bytes, table2_clustered(16, &base, &sup));
    assert_eq!(size, PtSize { table_bytes: 144 + 6 * 24, bucket_bytes: 4096 * 8, objects: 7 });

    // Walks (each block alone in its bucket: ASID 0 and the xor hash put VPBN b in bucket b).
    // Base page 10: bucket head (1 ref), tag in line 0, mapping[10] at byte 96 in line 1.
    assert_eq!(walk(&mut pt, 0x10a), (Some(pte(1010, K4, 0)), 3, 2));
    // Base page 0: mapping[0] at byte 16 shares the tag's line.
    assert_eq!(walk(&mut pt, 0x100), (Some(pte(1000, K4, 0)), 2, 1));
    // S nodes: tag and mapping[0] at byte 16, one line, whatever the page.
    assert_eq!(walk(&mut pt, 0x11f), (Some(pte(0x200f, K64, 0)), 2, 1));
    assert_eq!(walk(&mut pt, 0x12f), (Some(pte(0x300f, K64, 0x8005)), 2, 1));
    assert_eq!(walk(&mut pt, 0x165), (Some(pte(0x8025, K256, 0)), 2, 1));
    // A page whose valid bit is clear: the same reads, then the (empty) rest of the chain.
    assert_eq!(walk(&mut pt, 0x121), (None, 2, 1));
    // Base page 1 of block 0x10 unmapped: tag and mapping[1] (line 0): a fault.
    assert_eq!(walk(&mut pt, 0x101), (None, 2, 1));

    // Partial-subblock PTE gains page 1, then loses page 0: the S node is replaced, not added.
    pt.map(A, Vpn(0x121), pte(0x3001, K64, 0x8007));
    assert_eq!(pt.get(A, Vpn(0x121)), Some(pte(0x3001, K64, 0x8007)));
    assert_eq!(pt.get(A, Vpn(0x120)), Some(pte(0x3000, K64, 0x8007)));
    pt.map(A, Vpn(0x121), pte(0x3001, K64, 0x8006));
    assert_eq!(pt.get(A, Vpn(0x120)), None);
    assert_eq!(pt.get(A, Vpn(0x12f)), Some(pte(0x300f, K64, 0x8006)));
    assert_eq!(pt.size().objects, 7);
    // Promotion to a 64 KB superpage replaces it too.
    pt.map(A, Vpn(0x12f), pte(0x300f, K64, 0));
    assert_eq!(pt.get(A, Vpn(0x125)), Some(pte(0x3005, K64, 0)));
    assert_eq!(pt.size().objects, 7);

    // Unmapping any page of the 256 KB superpage removes all four copies.
    assert_eq!(pt.unmap(A, Vpn(0x17f)), Some(pte(0x803f, K256, 0)));
    for v in 0x140..0x180 {
        assert_eq!(pt.get(A, Vpn(v)), None);
    }
    let base: BTreeSet<u64> = [0x100, 0x10a].into();
    let sup: BTreeSet<u64> = (0x110..0x130).collect();
    assert_eq!(pt.size().table_bytes, table2_clustered(16, &base, &sup));
    assert_eq!(pt.size().objects, 3);
    // Unmapping a block superpage frees its node; the base node lives on.
    assert_eq!(pt.unmap(A, Vpn(0x110)), Some(pte(0x2000, K64, 0)));
    assert_eq!(pt.unmap(A, Vpn(0x110)), None);
    assert_eq!(pt.size().objects, 2);
    pt.remove_asid(A);
    assert_eq!(pt.size().objects, 0);
    assert_eq!(pt.size().table_bytes, 0);
}

#[test]
fn clustered_block_with_several_nodes() {
    let mut pt = clustered(64);
    // Block 0x13, mapped in this order (new nodes go to the head of the chain):
    // an 8 KB superpage at pages 2-3 (SZ node of 8 words: 16 + 64 = 80 bytes),
    // a base page at page 8 (base node, 144 bytes),
    // a 16 KB superpage at pages 12-15 (SZ node of 4 words: 48 bytes).
    // Chain: SZ16 -> base -> SZ8.
    pt.map(A, Vpn(0x133), pte(0x4003, K8, 0));
    pt.map(A, Vpn(0x138), pte(0x5000, K4, 0));
    pt.map(A, Vpn(0x13c), pte(0x6000, K16, 0));
    assert_eq!(pt.size(), PtSize { table_bytes: 80 + 144 + 48, bucket_bytes: 4096 * 8, objects: 3 });
    for v in 0x130..0x140u64 {
        let want = match v {
            0x132 | 0x133 => Some(pte(0x4000 + (v - 0x130), K8, 0)),
            0x138 => Some(pte(0x5000, K4, 0)),
            0x13c..=0x13f => Some(pte(0x6000 + (v - 0x13c), K16, 0)),
            _ => None,
        };
        assert_eq!(pt.get(A, Vpn(v)), want, "vpn {v:#x}");
    }
    // Page 3: SZ16 word 0 (byte 16, line 0) invalid; base mapping[3] (byte 40, line 0) invalid;
    // SZ8 word 1 (byte 24, line 0) valid: bucket + 3 one-line probes.
    assert_eq!(walk(&mut pt, 0x133), (Some(pte(0x4003, K8, 0)), 4, 3));
    // Page 13: SZ16 word 3 at byte 40 (line 0), found at the head.
    assert_eq!(walk(&mut pt, 0x13d), (Some(pte(0x6001, K16, 0)), 2, 1));
    // Page 8: SZ16 word 2 invalid (1 reference, 1 line), base mapping[8] at byte 80 (tag line
    // 0 and line 1: 2 references, 2 lines).
    assert_eq!(walk(&mut pt, 0x138), (Some(pte(0x5000, K4, 0)), 4, 3));
    // Page 0: mapped nowhere; every node's tag line read and the chain ends.
    assert_eq!(walk(&mut pt, 0x130), (None, 4, 3));
    // Subblock prefetch of the block: every node of the chain, tag and all its words:
    // SZ16 [0, 48) one line; base [0, 144) three lines; SZ8 [0, 80) two lines.
    let (out, refs, lines) = walk_block(&mut pt, 0x135, 16);
    assert_eq!((refs, lines), (1 + 1 + 3 + 2, 6));
    for (i, o) in out.iter().enumerate() {
        assert_eq!(*o, pt.get(A, Vpn(0x130 + i as u64)), "page {i}");
    }
    // Unmap the 8 KB superpage: its SZ node goes (80 bytes), both pages unmapped.
    assert_eq!(pt.unmap(A, Vpn(0x132)), Some(pte(0x4002, K8, 0)));
    assert_eq!((pt.get(A, Vpn(0x132)), pt.get(A, Vpn(0x133))), (None, None));
    assert_eq!(pt.size().table_bytes, 144 + 48);
    // Page 8 is still found after the SZ16 node; page 3 now costs the two remaining nodes.
    assert_eq!(walk(&mut pt, 0x138), (Some(pte(0x5000, K4, 0)), 4, 3));
    assert_eq!(walk(&mut pt, 0x133), (None, 3, 2));
}

#[test]
fn clustered_prefetch_reads_the_block() {
    for (line_bytes, base_refs) in [(64, 4), (256, 2)] {
        let mut pt = clustered(line_bytes);
        pt.map(A, Vpn(0x100), pte(1000, K4, 0));
        pt.map(A, Vpn(0x10a), pte(1010, K4, 0));
        pt.map(A, Vpn(0x110), pte(0x2000, K64, 0));
        pt.map(A, Vpn(0x12f), pte(0x300f, K64, 0x8001));
        // Base node: bucket, then [0, 144): lines 0..2 of 64 bytes, or one 256-byte line.
        let (out, refs, lines) = walk_block(&mut pt, 0x10a, 16);
        assert_eq!((refs, lines), (base_refs, base_refs - 1), "{line_bytes}");
        let want: Vec<Option<Pte>> = (0..16)
            .map(|i| match i {
                0 => Some(pte(1000, K4, 0)),
                10 => Some(pte(1010, K4, 0)),
                _ => None,
            })
            .collect();
        assert_eq!(out, want);
        // S node: one word, one line, the whole block.
        let (out, refs, lines) = walk_block(&mut pt, 0x115, 16);
        assert_eq!((refs, lines), (2, 1));
        assert!(out.iter().enumerate().all(|(i, o)| *o == Some(pte(0x2000 + i as u64, K64, 0))));
        let (out, refs, lines) = walk_block(&mut pt, 0x120, 16);
        assert_eq!((refs, lines), (2, 1));
        assert_eq!(out[0], Some(pte(0x3000, K64, 0x8001)));
        assert_eq!(out[15], Some(pte(0x300f, K64, 0x8001)));
        assert!(out[1..15].iter().all(|o| o.is_none()));
        // Another block length: one walk per page (4 walks of bucket + one line each).
        let (out, refs, lines) = walk_block(&mut pt, 0x113, 4);
        assert_eq!((refs, lines), (8, 4));
        assert_eq!(out[3], Some(pte(0x2003, K64, 0)));
    }
}

fn hashed(store: SuperpageStore, buckets: u64, search_order: Vec<u64>) -> PageTable {
    table(PageTableConfig {
        kind: Kind::Hashed,
        superpage_store: Some(store),
        buckets,
        search_order,
        ..Default::default()
    })
}

#[test]
fn hashed_multiple_tables() {
    let mut pt = hashed(SuperpageStore::Multiple, 4096, vec![]);
    // The base-page table exists from the start; others come with their first PTE.
    assert_eq!(pt.size(), PtSize { table_bytes: 0, bucket_bytes: 4096 * 8, objects: 0 });
    pt.map(A, Vpn(0x100), pte(1, K4, 0));
    pt.map(A, Vpn(0x101), pte(2, K4, 0));
    pt.map(A, Vpn(0x115), pte(0x2005, K64, 0));
    pt.map(A, Vpn(0x122), pte(0x3002, K64, 0x0005));
    pt.map(A, Vpn(0x134), pte(0x4000, K8, 0));
    // 5 PTEs of 24 bytes in three tables (4 KB, 8 KB, 64 KB).
    assert_eq!(pt.size(), PtSize { table_bytes: 5 * 24, bucket_bytes: 3 * 4096 * 8, objects: 5 });
    let PageTable::Hashed(t) = &pt else { panic!() };
    assert_eq!(t.table_sizes(), vec![4096, 8192, 65536]);
    for v in 0xf0..0x150u64 {
        let want = match v {
            0x100 => Some(pte(1, K4, 0)),
            0x101 => Some(pte(2, K4, 0)),
            0x110..=0x11f => Some(pte(0x2000 + (v - 0x110), K64, 0)),
            0x120 | 0x122 => Some(pte(0x3000 + (v - 0x120), K64, 5)),
            0x134 | 0x135 => Some(pte(0x4000 + (v - 0x134), K8, 0)),
            _ => None,
        };
        assert_eq!(pt.get(A, Vpn(v)), want, "vpn {v:#x}");
        assert_eq!(walk(&mut pt, v).0, want, "vpn {v:#x}");
    }
    // Smallest first: 4 KB table (bucket 0x11a, empty), 8 KB table (bucket 0x8d, empty),
    // 64 KB table (bucket 0x11, the PTE): 3 bucket reads + 1 probe; lines: the two empty hash
    // nodes and the PTE.
    assert_eq!(walk(&mut pt, 0x11a), (Some(pte(0x200a, K64, 0)), 4, 3));
    // A base page: found in the first table.
    assert_eq!(walk(&mut pt, 0x101), (Some(pte(2, K4, 0)), 2, 1));
    // An 8 KB page: the base table's bucket is empty, then the 8 KB PTE.
    assert_eq!(walk(&mut pt, 0x135), (Some(pte(0x4001, K8, 0)), 3, 2));
    // A clear bit of the partial-subblock PTE: every table searched (two empty), the 64 KB PTE
    // probed.
    assert_eq!(walk(&mut pt, 0x121), (None, 4, 3));
    // Unmap the whole 64 KB superpage through one of its pages.
    assert_eq!(pt.unmap(A, Vpn(0x11f)), Some(pte(0x200f, K64, 0)));
    assert!((0x110..0x120).all(|v| pt.get(A, Vpn(v)).is_none()));
    assert_eq!(pt.size().objects, 4);
    // The partial-subblock PTE gains page 1 by being re-mapped.
    pt.map(A, Vpn(0x121), pte(0x3001, K64, 0x0007));
    assert_eq!(pt.get(A, Vpn(0x121)), Some(pte(0x3001, K64, 7)));
    assert_eq!(pt.size().objects, 4);
    let PageTable::Hashed(t) = &pt else { panic!() };
    assert!((t.load_factor() - 4.0 / (3.0 * 4096.0)).abs() < 1e-12);
}

#[test]
fn hashed_search_order_changes_the_lines() {
    // One bucket per table: a table searched costs its bucket read and its whole chain.
    // Base table chain: 0x102, 0x101, 0x100 (newest first); 64 KB table: the superpage.
    for (order, sp, base_head, base_tail) in [
        // 4 KB first: the superpage costs the base chain (3 probes, 3 lines) and its own PTE.
        (vec![4096, 65536], (6, 4), (2, 1), (4, 3)),
        // 64 KB first: the superpage is one probe; base pages pay a probe of the 64 KB table.
        (vec![65536, 4096], (2, 1), (4, 2), (6, 4)),
    ] {
        let mut pt = hashed(SuperpageStore::Multiple, 1, order.clone());
        for v in [0x100, 0x101, 0x102] {
            pt.map(A, Vpn(v), pte(v, K4, 0));
        }
        pt.map(A, Vpn(0x110), pte(0x2000, K64, 0));
        let (r, refs, lines) = walk(&mut pt, 0x114);
        assert_eq!((r, (refs, lines)), (Some(pte(0x2004, K64, 0)), sp), "{order:?}");
        let (r, refs, lines) = walk(&mut pt, 0x102);
        assert_eq!((r, (refs, lines)), (Some(pte(0x102, K4, 0)), base_head), "{order:?}");
        let (r, refs, lines) = walk(&mut pt, 0x100);
        assert_eq!((r, (refs, lines)), (Some(pte(0x100, K4, 0)), base_tail), "{order:?}");
        // Subblock prefetch of 16 pages: 16 independent walks over both tables, the 3 base pages
        // found and the other 13 searching everything.
        let (out, refs, lines) = walk_block(&mut pt, 0x101, 16);
        let (mut r_want, mut l_want) = (0, 0);
        for i in 0..16u64 {
            let (_, r, l) = walk(&mut pt, 0x100 + i);
            r_want += r;
            l_want += l;
        }
        // Misses: both buckets and both chains (1 + 3 + 1 + 1 refs, 3 + 1 lines).
        let miss = (6, 4);
        assert_eq!(walk(&mut pt, 0x10f), (None, miss.0, miss.1));
        let (h, t) = (base_head, base_tail);
        let mid = if order[0] == 4096 { (3, 2) } else { (5, 3) };
        assert_eq!((r_want, l_want), (h.0 + mid.0 + t.0 + 13 * miss.0, h.1 + mid.1 + t.1 + 13 * miss.1));
        assert_eq!((refs, lines), (r_want, l_want));
        assert_eq!(out.iter().filter(|o| o.is_some()).count(), 3);
    }
    // An 8 KB table not listed is searched after the listed ones.
    let mut pt = hashed(SuperpageStore::Multiple, 1, vec![65536, 4096]);
    pt.map(A, Vpn(0x200), pte(0x200, K8, 0));
    pt.map(A, Vpn(0x110), pte(0x2000, K64, 0));
    let PageTable::Hashed(t) = &pt else { panic!() };
    assert_eq!(t.table_sizes(), vec![65536, 4096, 8192]);
    // 64 KB (probe, no match), 4 KB (empty: its hash node's line), 8 KB (match): 3 buckets + 2
    // probes, 3 lines.
    assert_eq!(walk(&mut pt, 0x201), (Some(pte(0x201, K8, 0)), 5, 3));
}

#[test]
fn hashed_superpage_index_chains() {
    let cfg = PageTableConfig {
        kind: Kind::Hashed,
        superpage_store: Some(SuperpageStore::SuperpageIndex),
        ..Default::default()
    };
    let mut pt = table(cfg);
    // Region 0x10 (64 KB, bucket 0x10): base 0x100, base 0x101, a 16 KB superpage at 0x104,
    // base 0x10f. Chain: 0x10f, 16K, 0x101, 0x100.
    pt.map(A, Vpn(0x100), pte(1, K4, 0));
    pt.map(A, Vpn(0x101), pte(2, K4, 0));
    pt.map(A, Vpn(0x104), pte(0x500, K16, 0));
    pt.map(A, Vpn(0x10f), pte(3, K4, 0));
    // Region 0x30: a partial-subblock PTE (pages 0 and 2).
    pt.map(A, Vpn(0x300), pte(0x7000, K64, 0b101));
    // A 256 KB superpage: larger than the index page, in its own table.
    pt.map(A, Vpn(0x200), pte(0x8000, K256, 0));
    assert_eq!(pt.size(), PtSize { table_bytes: 6 * 24, bucket_bytes: 2 * 4096 * 8, objects: 6 });
    // 0x100 is last in its chain: 3 non-matching probes (tag + next) and the match.
    assert_eq!(walk(&mut pt, 0x100), (Some(pte(1, K4, 0)), 5, 4));
    assert_eq!(walk(&mut pt, 0x106), (Some(pte(0x502, K16, 0)), 3, 2));
    assert_eq!(walk(&mut pt, 0x10f), (Some(pte(3, K4, 0)), 2, 1));
    // Unmapped page of the region: the whole chain, then the (empty) 256 KB bucket.
    assert_eq!(walk(&mut pt, 0x108), (None, 6, 5));
    // Partial-subblock PTE: a set bit and a clear one.
    assert_eq!(walk(&mut pt, 0x302), (Some(pte(0x7002, K64, 0b101)), 2, 1));
    assert_eq!(walk(&mut pt, 0x301), (None, 3, 2));
    // 256 KB page: the index bucket (empty), then the 256 KB table.
    assert_eq!(walk(&mut pt, 0x215), (Some(pte(0x8015, K256, 0)), 3, 2));
    // Gaining page 1 replaces the partial PTE; unmapping the 16 KB superpage shortens the chain.
    pt.map(A, Vpn(0x301), pte(0x7001, K64, 0b111));
    assert_eq!(pt.get(A, Vpn(0x301)), Some(pte(0x7001, K64, 0b111)));
    assert_eq!(pt.unmap(A, Vpn(0x107)), Some(pte(0x503, K16, 0)));
    assert!((0x104..0x108).all(|v| pt.get(A, Vpn(v)).is_none()));
    assert_eq!(walk(&mut pt, 0x100), (Some(pte(1, K4, 0)), 4, 3));
    assert_eq!(pt.unmap(A, Vpn(0x23f)), Some(pte(0x803f, K256, 0)));
    assert_eq!(pt.size().objects, 4);
}

fn err_key(cfg: PageTableConfig) -> String {
    PageTable::new(&cfg, PageSize::SIZE_4K).unwrap_err().key
}

#[test]
fn store_keys_are_checked() {
    let c = PageTableConfig { kind: Kind::Clustered, ..Default::default() };
    for store in [SuperpageStore::Replicate, SuperpageStore::Multiple, SuperpageStore::SuperpageIndex] {
        assert_eq!(
            err_key(PageTableConfig { superpage_store: Some(store), ..c.clone() }),
            "page_table.superpage_store"
        );
    }
    table(PageTableConfig { superpage_store: Some(SuperpageStore::Native), ..c });
    let h = PageTableConfig { kind: Kind::Hashed, ..Default::default() };
    for store in [SuperpageStore::Replicate, SuperpageStore::Intermediate, SuperpageStore::Native] {
        assert_eq!(
            err_key(PageTableConfig { superpage_store: Some(store), ..h.clone() }),
            "page_table.superpage_store"
        );
    }
    for order in [vec![4096, 4096], vec![2048], vec![4096, 12288], vec![0]] {
        assert_eq!(err_key(PageTableConfig { search_order: order, ..h.clone() }), "page_table.search_order");
    }
    table(PageTableConfig { search_order: vec![65536, 4096, 1 << 30], ..h.clone() });
    let ix = PageTableConfig { superpage_store: Some(SuperpageStore::SuperpageIndex), ..h };
    for bytes in [0, 2048, 3 << 12, 1 << 48] {
        assert_eq!(err_key(PageTableConfig { index_page: Some(bytes), ..ix.clone() }), "page_table.index_page");
    }
    for bytes in [4096, 1 << 21] {
        table(PageTableConfig { index_page: Some(bytes), ..ix.clone() });
    }
}

#[test]
fn hashed_tables_share_page_table_memory() {
    // Layout lines: the tables' bucket arrays and PTE slabs are distinct pages of page-table
    // memory (base buckets, base PTEs, 64 KB buckets, 64 KB PTEs, in the order first used), so a
    // walk through both tables touches four distinct lines; `paper` lines count the two PTEs.
    for (accounting, lines) in [(xlat::pt::LineAccounting::Paper, 2), (xlat::pt::LineAccounting::Layout, 4)] {
        let mut pt = table(PageTableConfig {
            kind: Kind::Hashed,
            buckets: 1,
            accounting,
            search_order: vec![4096, 65536],
            ..Default::default()
        });
        pt.map(A, Vpn(0x100), pte(1, K4, 0));
        pt.map(A, Vpn(0x110), pte(0x2000, K64, 0));
        let mut rec = WalkRecord::default();
        let r = pt.walk(A, Vpn(0x111), &mut NoTlb, &mut rec);
        assert_eq!((r, rec.mem_refs, rec.cache_lines), (Some(pte(0x2001, K64, 0)), 4, lines), "{accounting:?}");
        let pages: BTreeSet<u64> = rec.addrs[..4].iter().map(|a| a.0 >> 12).collect();
        assert_eq!(pages.len(), 4);
        assert_eq!(rec.addrs[0].0, xlat::pt::PT_PHYS_BASE);
    }
}
