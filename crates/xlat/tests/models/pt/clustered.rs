//! Clustered page tables: one PTE per page block, lines of the tag and of the mapping word.

use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::{Kind, LineAccounting, NoTlb, PageTable, PageTableConfig, PtSize, Pte, WalkRecord};

const A: Asid = Asid(2);

fn pte(pfn: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
}

fn clustered(cfg: PageTableConfig) -> PageTable {
    PageTable::new(&PageTableConfig { kind: Kind::Clustered, ..cfg }, PageSize::SIZE_4K).unwrap()
}

fn walk(pt: &mut PageTable, vpn: u64) -> (Option<Pte>, WalkRecord) {
    let mut rec = WalkRecord::default();
    let r = pt.walk(A, Vpn(vpn), &mut NoTlb, &mut rec);
    (r, rec)
}

#[test]
fn pages_of_one_block_share_a_pte() {
    let mut pt = clustered(PageTableConfig::default());
    let PageTable::Clustered(t) = &pt else { panic!() };
    assert_eq!((t.subblock_factor(), t.buckets()), (16, 4096));
    pt.map(A, Vpn(0x100), pte(1));
    pt.map(A, Vpn(0x10a), pte(2));
    assert_eq!(pt.size(), PtSize { table_bytes: 8 * 16 + 16, bucket_bytes: 4096 * 8, objects: 1 });
    pt.map(A, Vpn(0x110), pte(3));
    assert_eq!(pt.size().objects, 2);
    assert_eq!(pt.size().table_bytes, 2 * 144);
    // The PTE lives while any page of its block is mapped.
    assert_eq!(pt.unmap(A, Vpn(0x100)), Some(pte(1)));
    assert_eq!(pt.size().objects, 2);
    assert_eq!(pt.unmap(A, Vpn(0x100)), None);
    assert_eq!(pt.unmap(A, Vpn(0x10a)), Some(pte(2)));
    assert_eq!(pt.size().objects, 1);
    assert_eq!(pt.get(A, Vpn(0x110)), Some(pte(3)));
}

#[test]
fn mapping_words_past_the_first_line_cost_a_second_line() {
    let mut pt = clustered(PageTableConfig::default());
    pt.map(A, Vpn(0x100), pte(1));
    pt.map(A, Vpn(0x105), pte(2));
    pt.map(A, Vpn(0x106), pte(3));
    pt.map(A, Vpn(0x10f), pte(4));
    // tag | next | mapping[16]: mapping[i] at byte 16 + 8i, so i <= 5 shares the tag's
    // 64-byte line and i >= 6 needs the next one: a second reference and a second line.
    for (v, lines) in [(0x100, 1), (0x105, 1), (0x106, 2), (0x10f, 2)] {
        let (r, rec) = walk(&mut pt, v);
        assert!(r.is_some());
        assert_eq!((rec.mem_refs, rec.cache_lines), (1 + lines, lines), "vpn {v:#x}");
        if lines == 2 {
            assert_eq!(rec.addrs[2].0 - rec.addrs[1].0, 16 + 8 * (v & 15));
        }
    }
    // A page not mapped in an existing block: tag and mapping word read, fault.
    let (r, rec) = walk(&mut pt, 0x107);
    assert_eq!((r, rec.mem_refs, rec.cache_lines), (None, 3, 2));
    // With talluri95's 256-byte lines the whole 144-byte PTE is one line.
    let mut pt = clustered(PageTableConfig { line_bytes: 256, ..Default::default() });
    pt.map(A, Vpn(0x10f), pte(4));
    let (_, rec) = walk(&mut pt, 0x10f);
    assert_eq!((rec.mem_refs, rec.cache_lines), (2, 1));
}

#[test]
fn chains_of_blocks() {
    for (accounting, lines_b, lines_a) in [(LineAccounting::Paper, 2, 2), (LineAccounting::Layout, 3, 3)] {
        let mut pt = clustered(PageTableConfig { buckets: 1, accounting, ..Default::default() });
        pt.map(A, Vpn(0), pte(1)); // block 0: first 144-byte PTE of the slab page
        pt.map(A, Vpn(31), pte(2)); // block 1: the second, head of the chain
                                    // Block 1, mapping[15] at byte 136: bucket, tag, mapping word = 3 references; paper =
                                    // tag line + mapping line; layout = bucket line + slab bytes 144 and 280 (lines 2, 4).
        let (r, rec) = walk(&mut pt, 31);
        assert_eq!(r, Some(pte(2)));
        assert_eq!((rec.mem_refs, rec.cache_lines), (3, lines_b), "{accounting:?}");
        // Block 0 behind block 1: bucket and one reference per PTE probed; paper = one line per
        // PTE; layout = bucket line, slab line 2 (block 1's tag and next) and line 0 (block 0's
        // tag and mapping[0]).
        let (r, rec) = walk(&mut pt, 0);
        assert_eq!(r, Some(pte(1)));
        assert_eq!((rec.mem_refs, rec.cache_lines), (3, lines_a), "{accounting:?}");
    }
}

#[test]
fn subblock_factor_one_is_a_hashed_table() {
    let mut pt = clustered(PageTableConfig { subblock_factor: 1, ..Default::default() });
    for v in 0..10 {
        pt.map(A, Vpn(v), pte(v));
    }
    assert_eq!(pt.size().table_bytes, 24 * 10);
    let (r, rec) = walk(&mut pt, 3);
    assert_eq!((r, rec.mem_refs, rec.cache_lines), (Some(pte(3)), 2, 1));
}

#[test]
fn asids_have_their_own_blocks() {
    let mut pt = clustered(PageTableConfig::default());
    pt.map(Asid(1), Vpn(0x40), pte(1));
    pt.map(Asid(2), Vpn(0x41), pte(2));
    assert_eq!(pt.size().objects, 2);
    assert_eq!(pt.get(Asid(1), Vpn(0x41)), None);
    pt.remove_asid(Asid(1));
    assert_eq!(pt.size().objects, 1);
    assert_eq!(pt.get(Asid(1), Vpn(0x40)), None);
    assert_eq!(pt.get(Asid(2), Vpn(0x41)), Some(pte(2)));
}
