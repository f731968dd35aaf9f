//! Shadow superpages (swanson98 §2.3-2.4): the OS's side of superpages built from
//! discontiguous frames. Shadow physical address ranges are preallocated in buckets by
//! superpage size (§2.4, Figure 2: 512 MB split into 1024 16 KB regions, 256 of 64 KB, 128 of
//! 256 KB, 64 of 1 MB, 32 of 4 MB and 16 of 16 MB), or split and recombined by a buddy
//! allocator; a virtual region is mapped from its first superpage-aligned address with maximal
//! superpages, remnants smaller than the smallest superpage left as base pages.
//!
//! This module is the allocator and the mapping plan; the memory controller's retranslation is
//! `crate::mtlb`.

/// How shadow regions are handed out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ShadowAllocator {
    /// Fixed buckets per superpage size (§2.4).
    #[default]
    Buckets,
    /// A buddy system over the whole shadow range: a larger free region is split for a smaller
    /// request, freed buddies recombine (§2.4's suggested alternative).
    Buddy,
}

/// swanson98 Figure 2: (superpage bytes, count) partitioning 512 MB of shadow space.
pub const FIGURE2: [(u64, u64); 6] =
    [(16 << 10, 1024), (64 << 10, 256), (256 << 10, 128), (1 << 20, 64), (4 << 20, 32), (16 << 20, 16)];

/// The shadow range's allocator: regions of superpage sizes at shadow physical addresses.
#[derive(Clone, Debug)]
pub struct ShadowPool {
    kind: ShadowAllocator,
    /// Superpage sizes, ascending (bytes, powers of two).
    sizes: Vec<u64>,
    /// Free regions per size (index as `sizes`), lowest address taken first.
    free: Vec<std::collections::BTreeSet<u64>>,
    base: u64,
    bytes: u64,
}

impl ShadowPool {
    /// Buckets laid out one size after another from `base` (aligned to the largest size), the
    /// smallest size first.
    pub fn buckets(base: u64, partition: &[(u64, u64)]) -> Result<ShadowPool, String> {
        let sizes = check_sizes(partition.iter().map(|p| p.0))?;
        let largest = *sizes.last().expect("at least one size");
        if base % largest != 0 {
            return Err(format!(
                "the shadow base {base:#x} must be aligned to the largest superpage ({largest} bytes)"
            ));
        }
        let mut free = vec![std::collections::BTreeSet::new(); sizes.len()];
        let mut at = base;
        let mut sorted = partition.to_vec();
        sorted.sort();
        for (size, count) in sorted {
            // Each bucket starts aligned to its size.
            at = at.div_ceil(size) * size;
            let i = sizes.iter().position(|&s| s == size).expect("size listed");
            for k in 0..count {
                free[i].insert(at + k * size);
            }
            at += count * size;
        }
        Ok(ShadowPool { kind: ShadowAllocator::Buckets, sizes, free, base, bytes: at - base })
    }

    /// A buddy allocator over `bytes` from `base` (both multiples of the largest size).
    pub fn buddy(base: u64, bytes: u64, sizes: &[u64]) -> Result<ShadowPool, String> {
        let sizes = check_sizes(sizes.iter().copied())?;
        let largest = *sizes.last().expect("at least one size");
        if base % largest != 0 || bytes % largest != 0 || bytes == 0 {
            return Err(format!(
                "the shadow range ({bytes} bytes from {base:#x}) must be a non-empty multiple of, and aligned to, the largest superpage ({largest} bytes)"
            ));
        }
        let mut free = vec![std::collections::BTreeSet::new(); sizes.len()];
        let top = sizes.len() - 1;
        for k in 0..bytes / largest {
            free[top].insert(base + k * largest);
        }
        Ok(ShadowPool { kind: ShadowAllocator::Buddy, sizes, free, base, bytes })
    }

    /// The superpage sizes, ascending.
    pub fn sizes(&self) -> &[u64] {
        &self.sizes
    }

    /// The shadow range the pool covers: (base, bytes).
    pub fn range(&self) -> (u64, u64) {
        (self.base, self.bytes)
    }

    /// A free region of `size` bytes (one of `sizes`), or none left.
    pub fn alloc(&mut self, size: u64) -> Option<u64> {
        let i = self.sizes.iter().position(|&s| s == size)?;
        if let Some(a) = self.free[i].pop_first() {
            return Some(a);
        }
        if self.kind == ShadowAllocator::Buckets {
            return None;
        }
        // Buddy: split the smallest larger free region.
        let j = (i + 1..self.sizes.len()).find(|&j| !self.free[j].is_empty())?;
        let a = self.free[j].pop_first().expect("non-empty");
        for k in (i..j).rev() {
            // Keep the first piece of the next size down and free the others (sizes are powers
            // of two, not necessarily adjacent ones: Figure 2's grow by 4).
            let (big, small) = (self.sizes[k + 1], self.sizes[k]);
            for p in 1..big / small {
                self.free[k].insert(a + p * small);
            }
        }
        Some(a)
    }

    /// Returns a region of `size` bytes at `addr`.
    pub fn free(&mut self, addr: u64, size: u64) {
        let Some(mut i) = self.sizes.iter().position(|&s| s == size) else {
            return;
        };
        let mut a = addr;
        if self.kind == ShadowAllocator::Buddy {
            // Recombine: when every piece of the enclosing larger region is free, merge.
            while i + 1 < self.sizes.len() {
                let (big, small) = (self.sizes[i + 1], self.sizes[i]);
                let parent = self.base + (a - self.base) / big * big;
                let pieces: Vec<u64> = (0..big / small).map(|p| parent + p * small).filter(|&p| p != a).collect();
                if !pieces.iter().all(|p| self.free[i].contains(p)) {
                    break;
                }
                for p in pieces {
                    self.free[i].remove(&p);
                }
                a = parent;
                i += 1;
            }
        }
        self.free[i].insert(a);
    }

    /// Free regions per size (ascending sizes).
    pub fn free_counts(&self) -> Vec<u64> {
        self.free.iter().map(|f| f.len() as u64).collect()
    }
}

fn check_sizes(sizes: impl Iterator<Item = u64>) -> Result<Vec<u64>, String> {
    let mut v: Vec<u64> = sizes.collect();
    v.sort_unstable();
    v.dedup();
    if v.is_empty() || v.iter().any(|s| !s.is_power_of_two() || *s < 8192) {
        return Err(format!("superpage sizes must be powers of two of at least 8 KB, got {v:?}"));
    }
    Ok(v)
}

/// swanson98 §2.4's mapping algorithm over the virtual region `[start, end)`: from the first
/// address aligned to the smallest superpage size, maximal superpages (the largest size whose
/// alignment the address has and that fits before `end`); what lies before that address, and a
/// tail smaller than the smallest size, stays in base pages. Returns (virtual address, size).
pub fn plan(start: u64, end: u64, sizes: &[u64]) -> Vec<(u64, u64)> {
    let Some(&smallest) = sizes.iter().min() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut va = start.div_ceil(smallest) * smallest;
    while va < end && end - va >= smallest {
        let size =
            sizes.iter().copied().filter(|&s| va % s == 0 && end - va >= s).max().expect("the smallest size fits");
        out.push((va, size));
        va += size;
    }
    out
}
