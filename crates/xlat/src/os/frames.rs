//! Physical frame allocators: single frames for demand paging, aligned blocks of frames for
//! page reservation (`FrameAllocator::alloc_block`).

use std::collections::BTreeSet;

/// Which physical frame allocator the OS uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AllocatorKind {
    /// Frames in ascending order; freed frames are reused last-freed first. Aligned blocks come
    /// from freed blocks of the same size, else from the bump pointer moved up to the alignment
    /// (the frames skipped become free single frames).
    #[default]
    Sequential,
    /// A uniformly random free frame (seeded): physically scattered, fragmented memory. Aligned
    /// blocks: a few random aligned probes, then a scan from a random block.
    Random,
    /// A binary buddy allocator (lowest-addressed block of the smallest sufficient order), so
    /// aligned power-of-two blocks stay available for superpages and reservations.
    Buddy,
}

/// Largest buddy order: blocks of 2^MAX_ORDER frames (1 GB of 4 KB frames).
pub const MAX_ORDER: u32 = 18;

/// A physical frame allocator over `total` frames.
#[derive(Clone, Debug)]
pub struct FrameAllocator {
    total: u64,
    in_use: u64,
    imp: Imp,
}

#[derive(Clone, Debug)]
enum Imp {
    /// `blocks`: freed aligned blocks as (pages, first frame), reused last-freed first.
    Sequential {
        next: u64,
        freed: Vec<u64>,
        blocks: Vec<(u64, u64)>,
    },
    /// `no_block`: the smallest block size a full scan found no free aligned block of since the
    /// last free (0: none); taking frames never creates blocks, so larger requests fail at once.
    Random {
        used: Vec<u64>,
        state: u64,
        no_block: u64,
    },
    Buddy {
        free: Vec<BTreeSet<u64>>,
    },
}

impl FrameAllocator {
    /// An allocator of `total` frames. `fragmentation` (random allocator only) is the fraction
    /// of frames taken at random before the simulation starts.
    pub fn new(kind: AllocatorKind, total: u64, seed: u64, fragmentation: f64) -> FrameAllocator {
        let imp = match kind {
            AllocatorKind::Sequential => Imp::Sequential { next: 0, freed: Vec::new(), blocks: Vec::new() },
            AllocatorKind::Random => Imp::Random {
                used: vec![0; total.div_ceil(64) as usize],
                state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
                no_block: 0,
            },
            AllocatorKind::Buddy => {
                let mut free = vec![BTreeSet::new(); MAX_ORDER as usize + 1];
                // Carve memory into the largest aligned blocks that fit.
                let mut base = 0u64;
                while base < total {
                    let mut order = MAX_ORDER.min(base.trailing_zeros());
                    while base + (1u64 << order) > total {
                        order -= 1;
                    }
                    free[order as usize].insert(base);
                    base += 1u64 << order;
                }
                Imp::Buddy { free }
            }
        };
        let mut a = FrameAllocator { total, in_use: 0, imp };
        if kind == AllocatorKind::Random && fragmentation > 0.0 {
            let n = (total as f64 * fragmentation.min(1.0)) as u64;
            for _ in 0..n {
                a.alloc();
            }
            a.in_use = 0; // taken by "other" users: not ours to count or free
        }
        a
    }

    /// Frames in the machine.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Frames handed out and not yet freed.
    pub fn in_use(&self) -> u64 {
        self.in_use
    }

    /// One frame, or `None` when memory is exhausted.
    pub fn alloc(&mut self) -> Option<u64> {
        let f = match &mut self.imp {
            Imp::Sequential { next, freed, blocks } => {
                if let Some(f) = freed.pop() {
                    Some(f)
                } else if *next < self.total {
                    *next += 1;
                    Some(*next - 1)
                } else if let Some((pages, base)) = blocks.pop() {
                    // Memory is otherwise full: split a free block, lowest frames reused first.
                    freed.extend((base + 1..base + pages).rev());
                    Some(base)
                } else {
                    None
                }
            }
            Imp::Random { used, state, .. } => {
                let total = self.total;
                let start = xorshift(state) % total.max(1);
                // Probe forward (wrapping) from a random frame to the next free one,
                // skipping full 64-frame words.
                let mut f = start;
                let mut found = None;
                for _ in 0..total + total / 64 + 2 {
                    let w = (f / 64) as usize;
                    if used[w] == u64::MAX {
                        f = (w as u64 + 1) * 64;
                    } else if used[w] & (1 << (f % 64)) == 0 {
                        used[w] |= 1 << (f % 64);
                        found = Some(f);
                        break;
                    } else {
                        f += 1;
                    }
                    if f >= total {
                        f = 0;
                    }
                }
                found
            }
            Imp::Buddy { free } => buddy_alloc(free, 0),
        };
        if f.is_some() {
            self.in_use += 1;
        }
        f
    }

    /// Returns frame `f` to the allocator.
    pub fn free(&mut self, f: u64) {
        self.in_use -= 1;
        match &mut self.imp {
            Imp::Sequential { freed, .. } => freed.push(f),
            Imp::Random { used, no_block, .. } => {
                used[(f / 64) as usize] &= !(1 << (f % 64));
                *no_block = 0;
            }
            Imp::Buddy { free } => buddy_free(free, f, 0),
        }
    }

    /// A free block of `pages` frames (a power of two) aligned to `pages`: its first frame, or
    /// `None` when the allocator has no such block free. Every frame of the block counts as in
    /// use until [`FrameAllocator::free_block`]; single frames are never taken from it.
    pub fn alloc_block(&mut self, pages: u64) -> Option<u64> {
        if !pages.is_power_of_two() || pages > self.total {
            return None;
        }
        let total = self.total;
        let b = match &mut self.imp {
            Imp::Sequential { next, freed, blocks } => {
                if let Some(at) = blocks.iter().rposition(|&(p, _)| p == pages) {
                    Some(blocks.remove(at).1)
                } else {
                    let base = next.next_multiple_of(pages);
                    if base.checked_add(pages).is_some_and(|end| end <= total) {
                        // The frames skipped to reach the alignment stay free as single frames.
                        freed.extend((*next..base).rev());
                        *next = base + pages;
                        Some(base)
                    } else {
                        None
                    }
                }
            }
            Imp::Random { used, state, no_block } => {
                if *no_block != 0 && pages >= *no_block {
                    None
                } else {
                    let found = random_block(used, state, total, pages);
                    if found.is_none() {
                        *no_block = pages;
                    }
                    found
                }
            }
            Imp::Buddy { free } => {
                let order = pages.trailing_zeros();
                if order > MAX_ORDER {
                    None
                } else {
                    buddy_alloc(free, order)
                }
            }
        };
        if b.is_some() {
            self.in_use += pages;
        }
        b
    }

    /// Returns the block of `pages` frames starting at `base` (from [`FrameAllocator::alloc_block`]).
    pub fn free_block(&mut self, base: u64, pages: u64) {
        self.in_use -= pages;
        match &mut self.imp {
            Imp::Sequential { blocks, .. } => blocks.push((pages, base)),
            Imp::Random { used, no_block, .. } => {
                set_bits(used, base, pages, false);
                *no_block = 0;
            }
            Imp::Buddy { free } => buddy_free(free, base, pages.trailing_zeros()),
        }
    }
}

/// Next value of a xorshift64* generator.
fn xorshift(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *state = x;
    x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11
}

/// True if frames `base .. base + pages` are all free (`base` aligned to `pages`).
fn block_free(used: &[u64], base: u64, pages: u64) -> bool {
    if pages >= 64 {
        used[(base / 64) as usize..((base + pages) / 64) as usize].iter().all(|&w| w == 0)
    } else {
        let mask = ((1u64 << pages) - 1) << (base % 64);
        used[(base / 64) as usize] & mask == 0
    }
}

/// Marks frames `base .. base + pages` used or free (`base` aligned to `pages`).
fn set_bits(used: &mut [u64], base: u64, pages: u64, on: bool) {
    if pages >= 64 {
        for w in &mut used[(base / 64) as usize..((base + pages) / 64) as usize] {
            *w = if on { u64::MAX } else { 0 };
        }
    } else {
        let mask = ((1u64 << pages) - 1) << (base % 64);
        let w = &mut used[(base / 64) as usize];
        *w = if on { *w | mask } else { *w & !mask };
    }
}

/// Random allocator: a free aligned block of `pages` frames, found by a few random probes and
/// then a scan (wrapping) from a random block, skipping full 64-frame words.
fn random_block(used: &mut [u64], state: &mut u64, total: u64, pages: u64) -> Option<u64> {
    let blocks = total / pages;
    if blocks == 0 {
        return None;
    }
    for _ in 0..8 {
        let base = (xorshift(state) % blocks) * pages;
        if block_free(used, base, pages) {
            set_bits(used, base, pages, true);
            return Some(base);
        }
    }
    let mut k = xorshift(state) % blocks;
    let mut seen = 0;
    while seen < blocks {
        let base = k * pages;
        let step = if pages < 64 && used[(base / 64) as usize] == u64::MAX {
            // Skip to the first block of the next word (or to the end).
            ((base / 64 + 1) * 64 / pages - k).min(blocks - k)
        } else if block_free(used, base, pages) {
            set_bits(used, base, pages, true);
            return Some(base);
        } else {
            1
        };
        seen += step;
        k += step;
        if k >= blocks {
            k = 0;
        }
    }
    None
}

fn buddy_alloc(free: &mut [BTreeSet<u64>], order: u32) -> Option<u64> {
    let from = (order..=MAX_ORDER).find(|&o| !free[o as usize].is_empty())?;
    let block = free[from as usize].pop_first().expect("non-empty");
    // Split down, keeping the lower half and freeing the upper halves.
    for o in (order..from).rev() {
        free[o as usize].insert(block + (1u64 << o));
    }
    Some(block)
}

fn buddy_free(free: &mut [BTreeSet<u64>], mut block: u64, mut order: u32) {
    while order < MAX_ORDER {
        let buddy = block ^ (1u64 << order);
        if !free[order as usize].remove(&buddy) {
            break;
        }
        block &= !(1u64 << order);
        order += 1;
    }
    free[order as usize].insert(block);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn every_allocator_hands_out_each_frame_once() {
        for kind in [AllocatorKind::Sequential, AllocatorKind::Random, AllocatorKind::Buddy] {
            for total in [1u64, 7, 100, 1000] {
                let mut a = FrameAllocator::new(kind, total, 3, 0.0);
                let got: Vec<u64> = std::iter::from_fn(|| a.alloc()).collect();
                assert_eq!(got.len() as u64, total, "{kind:?} {total}");
                assert!(got.iter().all(|&f| f < total));
                assert_eq!(got.iter().collect::<HashSet<_>>().len() as u64, total);
                for f in got {
                    a.free(f);
                }
                assert_eq!(a.in_use(), 0);
                assert_eq!(std::iter::from_fn(|| a.alloc()).count() as u64, total);
            }
        }
    }

    #[test]
    fn sequential_is_ascending_and_buddy_coalesces() {
        let mut s = FrameAllocator::new(AllocatorKind::Sequential, 8, 0, 0.0);
        assert_eq!((0..4).map(|_| s.alloc().unwrap()).collect::<Vec<_>>(), vec![0, 1, 2, 3]);
        let mut b = FrameAllocator::new(AllocatorKind::Buddy, 1 << 10, 0, 0.0);
        let x: Vec<u64> = (0..4).map(|_| b.alloc().unwrap()).collect();
        assert_eq!(x, vec![0, 1, 2, 3]);
        for f in x {
            b.free(f);
        }
        if let Imp::Buddy { free } = &b.imp {
            assert_eq!(free[10].len(), 1, "all blocks coalesced back");
        }
    }

    #[test]
    fn random_scatters_frames() {
        let mut r = FrameAllocator::new(AllocatorKind::Random, 1 << 16, 9, 0.0);
        let v: Vec<u64> = (0..100).map(|_| r.alloc().unwrap()).collect();
        let ascending = v.windows(2).filter(|w| w[1] == w[0] + 1).count();
        assert!(ascending < 10, "random frames should rarely be consecutive");
        let mut frag = FrameAllocator::new(AllocatorKind::Random, 1000, 9, 0.5);
        assert_eq!(std::iter::from_fn(|| frag.alloc()).count(), 500);
    }

    const KINDS: [AllocatorKind; 3] = [AllocatorKind::Sequential, AllocatorKind::Random, AllocatorKind::Buddy];

    /// Frames of `n` aligned blocks of `pages` and `n` single frames, interleaved, checked for
    /// alignment and overlap (every frame at most once, all inside memory).
    fn mixed(a: &mut FrameAllocator, pages: u64, n: usize) -> (Vec<u64>, Vec<u64>) {
        let (mut blocks, mut singles) = (Vec::new(), Vec::new());
        let mut owner = HashSet::new();
        let before = a.in_use();
        for _ in 0..n {
            if let Some(b) = a.alloc_block(pages) {
                assert_eq!(b % pages, 0, "block {b} not aligned to {pages}");
                assert!(b + pages <= a.total());
                for f in b..b + pages {
                    assert!(owner.insert(f), "frame {f} of block {b} handed out twice");
                }
                blocks.push(b);
            }
            if let Some(f) = a.alloc() {
                assert!(owner.insert(f), "single frame {f} handed out twice");
                singles.push(f);
            }
        }
        assert_eq!(a.in_use() - before, owner.len() as u64);
        (blocks, singles)
    }

    #[test]
    fn blocks_are_aligned_and_never_overlap_single_frames() {
        for kind in KINDS {
            for pages in [2u64, 16, 64, 128] {
                let mut a = FrameAllocator::new(kind, 1 << 16, 5, 0.0);
                // Some singles first, so blocks must skip to an alignment.
                for _ in 0..3 {
                    a.alloc().unwrap();
                }
                let (blocks, singles) = mixed(&mut a, pages, 20);
                assert_eq!(blocks.len(), 20, "{kind:?} {pages}");
                assert_eq!(singles.len(), 20);
            }
        }
    }

    #[test]
    fn blocks_run_out_and_singles_then_fill_the_rest() {
        for kind in KINDS {
            let total = 1000u64; // 62 whole blocks of 16, 8 frames left over
            let mut a = FrameAllocator::new(kind, total, 11, 0.0);
            let blocks: Vec<u64> = std::iter::from_fn(|| a.alloc_block(16)).collect();
            assert_eq!(blocks.len(), 62, "{kind:?}");
            assert_eq!(blocks.iter().collect::<HashSet<_>>().len(), 62);
            assert!(blocks.iter().all(|&b| b % 16 == 0 && b + 16 <= total));
            let singles: Vec<u64> = std::iter::from_fn(|| a.alloc()).collect();
            assert_eq!(singles.len(), 8, "{kind:?}: only the frames outside blocks are left");
            assert!(singles.iter().all(|&f| f >= 992), "{kind:?}: {singles:?}");
            assert_eq!(a.in_use(), total);
            assert_eq!(a.alloc_block(2), None);
            // Freeing one block makes exactly one block (or 16 singles) available again.
            a.free_block(blocks[7], 16);
            assert_eq!(a.in_use(), total - 16);
            assert_eq!(a.alloc_block(16), Some(blocks[7]), "{kind:?}: freed block reused");
            assert_eq!(a.alloc_block(16), None);
            a.free_block(blocks[3], 16);
            let singles: Vec<u64> = std::iter::from_fn(|| a.alloc()).collect();
            let mut sorted = singles.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (blocks[3]..blocks[3] + 16).collect::<Vec<_>>(), "{kind:?}");
            assert_eq!(a.in_use(), total);
        }
    }

    #[test]
    fn freed_single_frames_form_blocks_again_except_in_sequential() {
        for kind in [AllocatorKind::Random, AllocatorKind::Buddy] {
            let mut a = FrameAllocator::new(kind, 64, 2, 0.0);
            let all: Vec<u64> = std::iter::from_fn(|| a.alloc()).collect();
            assert_eq!(a.alloc_block(4), None);
            assert_eq!(all.len(), 64);
            for f in [8, 9, 10, 11, 13] {
                a.free(f);
            }
            assert_eq!(a.alloc_block(8), None, "{kind:?}");
            assert_eq!(a.alloc_block(4), Some(8), "{kind:?}");
            assert_eq!(a.alloc_block(2), None, "{kind:?}: frame 13's buddy 12 is in use");
        }
    }

    #[test]
    fn random_blocks_are_scattered_and_found_by_scan_when_rare() {
        let mut r = FrameAllocator::new(AllocatorKind::Random, 1 << 16, 4, 0.0);
        let v: Vec<u64> = (0..50).map(|_| r.alloc_block(16).unwrap()).collect();
        assert!(v.windows(2).filter(|w| w[1] == w[0] + 16).count() < 5);
        // Fragmented memory: every block but one has a frame taken.
        let mut f = FrameAllocator::new(AllocatorKind::Random, 4096, 4, 0.0);
        let all: Vec<u64> = std::iter::from_fn(|| f.alloc()).collect();
        for &x in &all {
            if x % 16 != 0 || (3200..3216).contains(&x) {
                f.free(x);
            }
        }
        assert_eq!(f.alloc_block(16), Some(3200));
        assert_eq!(f.alloc_block(16), None);
        assert_eq!(f.alloc_block(32), None);
        assert!(f.alloc_block(8).is_some(), "smaller blocks are still free");
    }
}
