//! Hashed page tables: chains of 24-byte PTEs, exact references and lines per probe.

use std::collections::BTreeSet;
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::{
    HashFn, Kind, LineAccounting, NoTlb, PageTable, PageTableConfig, PtSize, Pte, WalkRecord, PT_PHYS_BASE,
};

const A: Asid = Asid(0);

fn pte(pfn: u64) -> Pte {
    Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
}

fn hashed(cfg: PageTableConfig) -> PageTable {
    PageTable::new(&PageTableConfig { kind: Kind::Hashed, ..cfg }, PageSize::SIZE_4K).unwrap()
}

fn walk(pt: &mut PageTable, asid: Asid, vpn: u64) -> (Option<Pte>, WalkRecord) {
    let mut rec = WalkRecord::default();
    let r = pt.walk(asid, Vpn(vpn), &mut NoTlb, &mut rec);
    (r, rec)
}

#[test]
fn default_has_4096_buckets() {
    let mut pt = hashed(PageTableConfig::default());
    let PageTable::Hashed(t) = &pt else { panic!() };
    assert_eq!(t.buckets(), 4096);
    assert_eq!(pt.size().bucket_bytes, 4096 * 8);
    pt.map(A, Vpn(1), pte(1));
    let (r, rec) = walk(&mut pt, A, 1);
    // Bucket head pointer, then the PTE (tag and mapping in one line): one line in talluri95's
    // accounting, which does not count the bucket read.
    assert_eq!((r, rec.mem_refs, rec.cache_lines), (Some(pte(1)), 2, 1));
}

#[test]
fn chain_of_known_length() {
    let mut pt = hashed(PageTableConfig { buckets: 1, ..Default::default() });
    for v in [10, 20, 30] {
        pt.map(A, Vpn(v), pte(v));
    }
    assert_eq!(pt.size(), PtSize { table_bytes: 3 * 24, bucket_bytes: 8, objects: 3 });
    // New PTEs go at the head: the chain is 30, 20, 10.
    for (v, probes) in [(30, 1), (20, 2), (10, 3)] {
        let (r, rec) = walk(&mut pt, A, v);
        assert_eq!(r, Some(pte(v)));
        assert_eq!(rec.mem_refs, 1 + probes, "vpn {v}");
        assert_eq!(rec.cache_lines, probes, "vpn {v}");
    }
    // A miss reads the whole chain.
    let (r, rec) = walk(&mut pt, A, 40);
    assert_eq!((r, rec.mem_refs, rec.cache_lines), (None, 4, 3));
    // Addresses: the bucket pointer, then each PTE probed (at its tag).
    let (_, rec) = walk(&mut pt, A, 20);
    let a: Vec<u64> = rec.addrs[..rec.n_addrs as usize].iter().map(|p| p.0).collect();
    assert_eq!(a.len(), 3);
    assert!(a.iter().all(|&x| x >= PT_PHYS_BASE));
    assert_eq!(a[1] - a[2], 24, "PTEs are packed in the order mapped");
    assert!(a[0] / 4096 != a[1] / 4096, "the bucket array has pages of its own");
    // After unmapping the head, the chain is 20, 10.
    assert_eq!(pt.unmap(A, Vpn(30)), Some(pte(30)));
    let (_, rec) = walk(&mut pt, A, 10);
    assert_eq!(rec.mem_refs, 3);
    assert_eq!(pt.size().objects, 2);
    // Unmapping from the middle keeps the rest reachable.
    pt.map(A, Vpn(50), pte(50));
    assert_eq!(pt.unmap(A, Vpn(20)), Some(pte(20)));
    assert_eq!(pt.get(A, Vpn(10)), Some(pte(10)));
    assert_eq!(pt.get(A, Vpn(50)), Some(pte(50)));
    let (_, rec) = walk(&mut pt, A, 10);
    assert_eq!(rec.mem_refs, 3);
}

#[test]
fn layout_lines_see_packed_ptes() {
    let mut pt = hashed(PageTableConfig { buckets: 1, accounting: LineAccounting::Layout, ..Default::default() });
    for v in [10, 20, 30] {
        pt.map(A, Vpn(v), pte(v));
    }
    // The three 24-byte PTEs sit in the first 72 bytes of a slab page, in the order mapped.
    // Reaching vpn 10 (the chain's tail, at byte 0) reads only words in the slab's first line.
    let (r, rec) = walk(&mut pt, A, 10);
    assert_eq!(r, Some(pte(10)));
    assert_eq!(rec.mem_refs, 4);
    let lines: BTreeSet<u64> = rec.addrs[..4].iter().map(|p| p.0 / 64).collect();
    assert_eq!(rec.cache_lines as usize, lines.len());
    assert_eq!(rec.cache_lines, 2);
    // The bucket array read counts under layout accounting; vpn 30's PTE (bytes 48..72)
    // straddles two lines: tag in the first, mapping word in the second.
    let (_, rec) = walk(&mut pt, A, 30);
    assert_eq!((rec.mem_refs, rec.cache_lines), (2, 3));
}

#[test]
fn xor_hash_is_vpn_mod_buckets() {
    // A power of two and any other count.
    for buckets in [4u64, 1000] {
        let mut pt = hashed(PageTableConfig { buckets, ..Default::default() });
        let same = [1, 1 + buckets, 1 + 2 * buckets];
        for v in same {
            pt.map(A, Vpn(v), pte(v));
        }
        pt.map(A, Vpn(2), pte(2));
        let (r, rec) = walk(&mut pt, A, 1);
        assert_eq!((r, rec.mem_refs), (Some(pte(1)), 4), "buckets {buckets}");
        let (r, rec) = walk(&mut pt, A, 2);
        assert_eq!((r, rec.mem_refs), (Some(pte(2)), 2), "buckets {buckets}");
        // An empty bucket: one reference (the head) and, in the paper's accounting, the one line
        // of the hash node the handler finds empty.
        let (r, rec) = walk(&mut pt, A, 3);
        assert_eq!((r, rec.mem_refs, rec.cache_lines), (None, 1, 1));
    }
}

#[test]
fn mult_hash_spreads_consecutive_pages() {
    let mut pt = hashed(PageTableConfig { buckets: 1000, hash: HashFn::Mult, ..Default::default() });
    for v in 0..1000 {
        pt.map(A, Vpn(v), pte(v));
    }
    let mut worst = 0;
    let mut total = 0;
    for v in 0..1000 {
        let (r, rec) = walk(&mut pt, A, v);
        assert_eq!(r, Some(pte(v)));
        worst = worst.max(rec.cache_lines);
        total += rec.cache_lines;
    }
    assert!(worst <= 8, "longest probe sequence {worst}");
    let avg = total as f64 / 1000.0;
    assert!(avg < 1.6, "average lines {avg}");
}

#[test]
fn tags_include_the_asid() {
    let mut pt = hashed(PageTableConfig { buckets: 1, ..Default::default() });
    pt.map(Asid(1), Vpn(7), pte(1));
    pt.map(Asid(2), Vpn(7), pte(2));
    assert_eq!(pt.size().table_bytes, 48);
    assert_eq!(pt.get(Asid(1), Vpn(7)), Some(pte(1)));
    let (r, rec) = walk(&mut pt, Asid(1), 7);
    assert_eq!((r, rec.mem_refs), (Some(pte(1)), 3));
    assert_eq!(walk(&mut pt, Asid(3), 7).0, None);
    pt.remove_asid(Asid(2));
    assert_eq!(pt.size().objects, 1);
    assert_eq!(pt.get(Asid(2), Vpn(7)), None);
    let (r, rec) = walk(&mut pt, Asid(1), 7);
    assert_eq!((r, rec.mem_refs), (Some(pte(1)), 2));
    // Freed PTE slots are reused.
    pt.map(Asid(4), Vpn(9), pte(4));
    assert_eq!(pt.size().objects, 2);
}
