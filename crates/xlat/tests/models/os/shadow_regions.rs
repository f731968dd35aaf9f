//! swanson98 §2.4: the shadow-region allocators (Figure 2's buckets, a buddy system) and the
//! mapping algorithm, checked against what the paper states and against a reference written
//! here (a byte-granular ownership map of the shadow range).

use std::collections::BTreeMap;
use xlat::os::shadow::{plan, ShadowPool, FIGURE2};

const KB: u64 = 1024;
const MB: u64 = 1024 * KB;
const BASE: u64 = 1 << 30;

/// The reference: which 16 KB units of the range are handed out; an allocation must be aligned
/// to its size, inside the range, and overlap nothing handed out.
struct Owner {
    units: BTreeMap<u64, u64>,
}

impl Owner {
    fn take(&mut self, a: u64, size: u64, (base, bytes): (u64, u64)) {
        assert_eq!(a % size, 0, "{a:#x} aligned to {size}");
        assert!(a >= base && a + size <= base + bytes, "{a:#x} inside the range");
        for u in (a..a + size).step_by(16 * KB as usize) {
            assert!(self.units.insert(u, size).is_none(), "{a:#x} ({size}) overlaps");
        }
    }
    fn give(&mut self, a: u64, size: u64) {
        for u in (a..a + size).step_by(16 * KB as usize) {
            assert_eq!(self.units.remove(&u), Some(size));
        }
    }
}

#[test]
fn figure2_buckets_hold_512_mb_and_run_out_per_size() {
    let mut p = ShadowPool::buckets(BASE, &FIGURE2).unwrap();
    assert_eq!(p.range(), (BASE, 512 * MB), "Figure 2 partitions 512 MB");
    assert_eq!(p.free_counts(), vec![1024, 256, 128, 64, 32, 16]);
    let mut o = Owner { units: BTreeMap::new() };
    let mut got = Vec::new();
    for _ in 0..16 {
        let a = p.alloc(16 * MB).unwrap();
        o.take(a, 16 * MB, p.range());
        got.push(a);
    }
    assert_eq!(p.alloc(16 * MB), None, "buckets do not split or borrow");
    for _ in 0..1024 {
        let a = p.alloc(16 * KB).unwrap();
        o.take(a, 16 * KB, p.range());
    }
    assert_eq!(p.alloc(16 * KB), None);
    assert_eq!(p.alloc(12 * KB), None, "not a superpage size");
    p.free(got[3], 16 * MB);
    assert_eq!(p.alloc(16 * MB), Some(got[3]));
}

#[test]
fn the_buddy_allocator_splits_and_recombines() {
    let sizes: Vec<u64> = FIGURE2.iter().map(|s| s.0).collect();
    let mut p = ShadowPool::buddy(BASE, 64 * MB, &sizes).unwrap();
    let mut o = Owner { units: BTreeMap::new() };
    let mut live: Vec<(u64, u64)> = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    for step in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x % 3 != 0 || live.is_empty() {
            let size = sizes[(x >> 8) as usize % 5];
            // The reference says whether a region of that size is free anywhere (aligned).
            let fits = (0..64 * MB / size).any(|k| {
                let a = BASE + k * size;
                (a..a + size).step_by(16 * KB as usize).all(|u| !o.units.contains_key(&u))
            });
            match p.alloc(size) {
                Some(a) => {
                    o.take(a, size, p.range());
                    live.push((a, size));
                }
                None => {
                    assert!(!fits, "step {step}: a free {size}-byte region exists but the buddy allocator found none")
                }
            }
        } else {
            let (a, size) = live.swap_remove((x >> 8) as usize % live.len());
            o.give(a, size);
            p.free(a, size);
        }
    }
    for (a, size) in live.drain(..) {
        p.free(a, size);
    }
    assert_eq!(p.free_counts(), vec![0, 0, 0, 0, 0, 4], "everything recombines into the 16 MB regions");
}

#[test]
fn regions_map_to_maximal_aligned_superpages() {
    let sizes: Vec<u64> = FIGURE2.iter().map(|s| s.0).collect();
    // §2.4: from the first 16 KB-aligned address; a remnant below 16 KB stays in base pages.
    assert_eq!(plan(0x4000, 0x8000, &sizes), vec![(0x4000, 16 * KB)]);
    assert_eq!(plan(0x1000, 0x4fff, &sizes), vec![]);
    assert_eq!(plan(0, 16 * MB + 20 * KB, &sizes), vec![(0, 16 * MB), (16 * MB, 16 * KB)]);
    // A region from 12 KB to 5 MB: 16 KB x 3, then 64 KB x 3, 256 KB x 3, 1 MB x 4, 4 KB left.
    let p = plan(12 * KB, 5 * MB + 4 * KB, &sizes);
    let count = |s| p.iter().filter(|e| e.1 == s).count();
    assert_eq!([count(16 * KB), count(64 * KB), count(256 * KB), count(MB), count(4 * MB)], [3, 3, 3, 4, 0]);
    // Against a brute force over random regions: the pieces tile [first aligned, end - tail)
    // without gaps, each is aligned to its size, none could be larger, and the tail is < 16 KB.
    let mut x = 99u64;
    for _ in 0..2000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let start = ((x >> 20) % (64 * MB)) & !0xfff;
        let end = start + (x >> 40) % (40 * MB) + 4096;
        let p = plan(start, end, &sizes);
        let mut va = start.div_ceil(16 * KB) * 16 * KB;
        for &(a, s) in &p {
            assert_eq!(a, va);
            assert_eq!(a % s, 0);
            assert!(sizes.iter().all(|&b| b <= s || a % b != 0 || a + b > end), "{a:#x}: {s} is not maximal");
            va += s;
        }
        assert!(end.saturating_sub(va) < 16 * KB || va < start, "{start:#x}..{end:#x}: tail from {va:#x}");
    }
}
