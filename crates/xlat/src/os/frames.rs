//! Physical frame allocators.

use std::collections::BTreeSet;

/// Which physical frame allocator the OS uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum AllocatorKind {
    /// Frames in ascending order; freed frames are reused last-freed first.
    #[default]
    Sequential,
    /// A uniformly random free frame (seeded): physically scattered, fragmented memory.
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
    Sequential { next: u64, freed: Vec<u64> },
    Random { used: Vec<u64>, state: u64 },
    Buddy { free: Vec<BTreeSet<u64>> },
}

impl FrameAllocator {
    /// An allocator of `total` frames. `fragmentation` (random allocator only) is the fraction
    /// of frames taken at random before the simulation starts.
    pub fn new(kind: AllocatorKind, total: u64, seed: u64, fragmentation: f64) -> FrameAllocator {
        let imp = match kind {
            AllocatorKind::Sequential => Imp::Sequential { next: 0, freed: Vec::new() },
            AllocatorKind::Random => Imp::Random {
                used: vec![0; total.div_ceil(64) as usize],
                state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
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
            Imp::Sequential { next, freed } => {
                if let Some(f) = freed.pop() {
                    Some(f)
                } else if *next < self.total {
                    *next += 1;
                    Some(*next - 1)
                } else {
                    None
                }
            }
            Imp::Random { used, state } => {
                let total = self.total;
                let mut x = *state;
                x ^= x >> 12;
                x ^= x << 25;
                x ^= x >> 27;
                *state = x;
                let start = (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) % total.max(1);
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
            Imp::Random { used, .. } => used[(f / 64) as usize] &= !(1 << (f % 64)),
            Imp::Buddy { free } => buddy_free(free, f, 0),
        }
    }
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
}
