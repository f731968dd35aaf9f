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
    free: Vec<Runs>,
    base: u64,
    bytes: u64,
}

/// Free regions of one size as maximal runs of adjacent regions, `start -> end` (bytes): a
/// bucket of any count, or a large region split into many small ones, is one run, so the
/// pool's memory and time grow with the runs, not with the regions in them.
#[derive(Clone, Debug, Default)]
struct Runs(std::collections::BTreeMap<u64, u64>);

impl Runs {
    /// Frees `[lo, hi)`, joined to the runs it touches.
    fn insert(&mut self, mut lo: u64, mut hi: u64) {
        if let Some((&s, &e)) = self.0.range(..=lo).next_back() {
            if e == lo {
                self.0.remove(&s);
                lo = s;
            }
        }
        if let Some(e) = self.0.remove(&hi) {
            hi = e;
        }
        self.0.insert(lo, hi);
    }

    /// True if every byte of `[lo, hi)` is free.
    fn covers(&self, lo: u64, hi: u64) -> bool {
        lo >= hi || self.0.range(..=lo).next_back().is_some_and(|(_, &e)| e >= hi)
    }

    /// Takes `[lo, hi)`, which [`Runs::covers`].
    fn take(&mut self, lo: u64, hi: u64) {
        if lo >= hi {
            return;
        }
        let (&s, &e) = self.0.range(..=lo).next_back().expect("a run covers the range");
        self.0.remove(&s);
        if s < lo {
            self.0.insert(s, lo);
        }
        if hi < e {
            self.0.insert(hi, e);
        }
    }

    /// The lowest free region of `size` bytes.
    fn pop_first(&mut self, size: u64) -> Option<u64> {
        let (s, e) = self.0.pop_first()?;
        if e - s > size {
            self.0.insert(s + size, e);
        }
        Some(s)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Free regions of `size` bytes.
    fn count(&self, size: u64) -> u64 {
        self.0.iter().map(|(s, e)| (e - s) / size).sum()
    }
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
        let mut free = vec![Runs::default(); sizes.len()];
        let mut at = base;
        let mut sorted = partition.to_vec();
        sorted.sort();
        let too_large =
            || format!("the shadow regions {partition:?} from {base:#x} run past the end of the address space");
        for (size, count) in sorted {
            // Each bucket starts aligned to its size.
            at = at.checked_next_multiple_of(size).ok_or_else(too_large)?;
            let end = count.checked_mul(size).and_then(|b| at.checked_add(b)).ok_or_else(too_large)?;
            let i = sizes.iter().position(|&s| s == size).expect("size listed");
            if end > at {
                free[i].insert(at, end);
            }
            at = end;
        }
        Ok(ShadowPool { kind: ShadowAllocator::Buckets, sizes, free, base, bytes: at - base })
    }

    /// A buddy allocator over `bytes` from `base` (both multiples of the largest size).
    pub fn buddy(base: u64, bytes: u64, sizes: &[u64]) -> Result<ShadowPool, String> {
        let sizes = check_sizes(sizes.iter().copied())?;
        let largest = *sizes.last().expect("at least one size");
        if base % largest != 0 || bytes % largest != 0 || bytes == 0 || base.checked_add(bytes).is_none() {
            return Err(format!(
                "the shadow range ({bytes} bytes from {base:#x}) must be a non-empty multiple of, and aligned to, the largest superpage ({largest} bytes), below 2^64"
            ));
        }
        let mut free = vec![Runs::default(); sizes.len()];
        free[sizes.len() - 1].insert(base, base + bytes);
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
        if let Some(a) = self.free[i].pop_first(size) {
            return Some(a);
        }
        if self.kind == ShadowAllocator::Buckets {
            return None;
        }
        // Buddy: split the smallest larger free region.
        let j = (i + 1..self.sizes.len()).find(|&j| !self.free[j].is_empty())?;
        let a = self.free[j].pop_first(self.sizes[j]).expect("non-empty");
        for k in (i..j).rev() {
            // Keep the first piece of the next size down and free the others (sizes are powers
            // of two, not necessarily adjacent ones: Figure 2's grow by 4).
            let (big, small) = (self.sizes[k + 1], self.sizes[k]);
            self.free[k].insert(a + small, a + big);
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
                let (before, after) = ((parent, a), (a + small, parent + big));
                if !(self.free[i].covers(before.0, before.1) && self.free[i].covers(after.0, after.1)) {
                    break;
                }
                self.free[i].take(before.0, before.1);
                self.free[i].take(after.0, after.1);
                a = parent;
                i += 1;
            }
        }
        self.free[i].insert(a, a + self.sizes[i]);
    }

    /// Free regions per size (ascending sizes).
    pub fn free_counts(&self) -> Vec<u64> {
        self.free.iter().zip(&self.sizes).map(|(f, &s)| f.count(s)).collect()
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
/// tail smaller than the smallest size, stays in base pages. Returns (virtual address, size),
/// one entry per superpage: for regions of bounded length ([`plan_runs`] describes any region
/// in a few runs).
pub fn plan(start: u64, end: u64, sizes: &[u64]) -> Vec<(u64, u64)> {
    let mut sorted = sizes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    plan_runs(start, end, &sorted).flat_map(|(va, size, n)| (0..n).map(move |k| (va + k * size, size))).collect()
}

/// [`plan`] as runs `(va, size, count)`: `count` superpages of `size` bytes one after another
/// from `va`. `sizes` are ascending distinct powers of two. The plan climbs the sizes while the
/// addresses gain alignment, then steps down them towards `end`, so each size makes at most two
/// runs: a region of any length takes a handful of runs.
pub fn plan_runs(start: u64, end: u64, sizes: &[u64]) -> PlanRuns<'_> {
    debug_assert!(sizes.windows(2).all(|w| w[0] < w[1]), "ascending sizes");
    let va = sizes.first().and_then(|&s| start.checked_next_multiple_of(s)).unwrap_or(end);
    PlanRuns { sizes, va, end }
}

/// The iterator of [`plan_runs`].
#[derive(Clone, Debug)]
pub struct PlanRuns<'a> {
    sizes: &'a [u64],
    va: u64,
    end: u64,
}

impl Iterator for PlanRuns<'_> {
    type Item = (u64, u64, u64);

    fn next(&mut self) -> Option<(u64, u64, u64)> {
        let (va, end) = (self.va, self.end);
        let &smallest = self.sizes.first()?;
        if va >= end || end - va < smallest {
            return None;
        }
        // The largest size aligned at `va` that fits (the smallest always does: `va` is aligned
        // to it).
        let i = self.sizes.iter().rposition(|&s| va % s == 0 && end - va >= s)?;
        let size = self.sizes[i];
        let fit = (end - va) / size;
        // The run goes on until the next size up is aligned and fits (a larger one is aligned
        // only where the next one is, and fits only where the next one does).
        let count = match self.sizes.get(i + 1) {
            Some(&up) => match va.checked_next_multiple_of(up) {
                Some(at) if at.checked_add(up).is_some_and(|e| e <= end) => (at - va) / size,
                _ => fit,
            },
            None => fit,
        };
        self.va = va + count * size;
        Some((va, size, count))
    }
}

/// `Σ_{j<n} ⌊(a·j + b) / m⌋` for `m > 0`, exact while the sum fits in 128 bits (every term
/// added on the way is part of it).
fn floor_sum(mut n: u128, mut m: u128, mut a: u128, mut b: u128) -> u128 {
    let mut sum = 0u128;
    loop {
        if a >= m {
            let pairs = if n % 2 == 0 { n / 2 * n.saturating_sub(1) } else { n * ((n - 1) / 2) };
            sum += pairs * (a / m);
            a %= m;
        }
        if b >= m {
            sum += n * (b / m);
            b %= m;
        }
        let y = a * n + b;
        if y < m {
            return sum;
        }
        n = y / m;
        b = y % m;
        std::mem::swap(&mut m, &mut a);
    }
}

/// Over the chunks `[h + j·step, h + (j+1)·step)`, `j < n` (all below 2^64), the number of
/// `2^bits`-aligned blocks of `2^bits` bytes inside each, summed.
fn aligned_blocks(h: u64, step: u64, n: u64, bits: u32) -> u128 {
    let m = 1u128 << bits;
    let (h, step) = (h as u128, step as u128);
    if step < m || n == 0 {
        // A chunk shorter than a block holds none.
        return 0;
    }
    // Blocks in [x, x + step): ⌊(x + step) / m⌋ - ⌈x / m⌉, never negative as step >= m.
    floor_sum(n as u128, m, step, h + step) - floor_sum(n as u128, m, step, h + m - 1)
}

/// The superpages [`plan`] makes in each of the chunks `[h + j·step, h + (j+1)·step)`, `j < n`
/// (all below 2^64), counting only the sizes whose bit is set in `mask` (bit i: `sizes[i]`,
/// ascending powers of two), summed; in time independent of `n`. A piece of size `s_i` comes
/// from the part of the chunk that aligned blocks of `s_i` cover and blocks of the next size
/// up do not (the maximal superpages are the maximal aligned blocks, cut to the largest size
/// that fits in them).
pub(super) fn chunk_pieces(h: u64, step: u64, n: u64, sizes: &[u64], mask: u64) -> u128 {
    let mut total = 0u128;
    for (i, &s) in sizes.iter().enumerate() {
        if mask >> i & 1 == 0 {
            continue;
        }
        let mine = aligned_blocks(h, step, n, s.trailing_zeros());
        let above =
            sizes.get(i + 1).map_or(0, |&up| aligned_blocks(h, step, n, up.trailing_zeros()) * (up / s) as u128);
        total += mine - above;
    }
    total
}

/// When the OS builds shadow superpages (`os.shadow_superpages`, swanson98 §2.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ShadowPolicy {
    /// Never: base pages only.
    #[default]
    None,
    /// At map time, for the heap (§2.3's modified `sbrk`: the first growth of the heap maps
    /// `shadow.sbrk_initial` bytes in superpages, each later growth past them another
    /// `shadow.sbrk_increment`; the heap never shrinks below what was mapped so) and for
    /// anonymous private writable mappings of at least `shadow.min_bytes`.
    Heap,
    /// At map time, for every mapping that allows some access (the heap as with `heap`).
    All,
    /// Where the program asks: a `madvise(MADV_HUGEPAGE)` system call in the trace names the
    /// region (the paper's explicit `remap()` calls).
    Markers,
}

impl ShadowPolicy {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            ShadowPolicy::None => "none",
            ShadowPolicy::Heap => "heap",
            ShadowPolicy::All => "all",
            ShadowPolicy::Markers => "markers",
        }
    }
}

/// How a superpage gets the memory behind it (`shadow.method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ShadowMethod {
    /// swanson98: the superpage maps a shadow region; the memory controller's TLB retranslates
    /// each of its base pages to the frame the page already has (or a fresh one). Remapping
    /// flushes the pages' lines from the caches (§2.3). Needs `[mtlb]`.
    #[default]
    Remap,
    /// The conventional way (§3.3's comparison): an aligned block of contiguous frames, each
    /// resident page copied into it (`shadow.copy_page_cycles` per page).
    Copy,
}

/// `[shadow]`: the constants of shadow superpages (used when `os.shadow_superpages` is not
/// `none`).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShadowConfig {
    /// `remap` (through the memory controller's TLB) or `copy` (contiguous frames).
    pub method: ShadowMethod,
    /// `buckets` (§2.4, Figure 2) or `buddy`.
    pub allocator: ShadowAllocator,
    /// Superpage sizes in bytes and how many regions of each the shadow range holds, as
    /// `[[bytes, count], ...]` (default Figure 2: 16 KB to 16 MB, 512 MB in all). With `buddy`
    /// the range is the same total, split on demand; with `copy` only the sizes matter.
    pub partition: Vec<(u64, u64)>,
    /// First shadow address (default: the installed DRAM's end, rounded up to the largest
    /// superpage).
    pub base: Option<u64>,
    /// `heap` and `all`: anonymous mappings smaller than this stay in base pages (default
    /// 256 KB).
    pub min_bytes: u64,
    /// The modified `sbrk`'s first preallocation (§3.1, vortex: 8 MB).
    pub sbrk_initial: u64,
    /// Its later increments (§3.1, vortex: 2 MB).
    pub sbrk_increment: u64,
    /// Cycles of the flush loop per cache line of a remapped page, whether the line is cached
    /// or not (default 10, from §3.3: em3d's flush of 1,120 pages visits 1,120 x 4096 / 32 =
    /// 143,360 lines in 1,497,067 cycles; at most 512 KB / 32 B = 16,384 of them can be cached,
    /// each dirty one adding `writeback_cycles` = 8, so the loop's cost per line c satisfies
    /// 143,360 c + 8 d = 1,497,067 for some 0 <= d <= 16,384: c lies in [9.53, 10.44], and 10
    /// is the only whole number there; docs/configuration.md).
    pub flush_line_cycles: u64,
    /// Cycles a flushed dirty line adds: its transfer to memory, the flush loop going on behind
    /// the write buffer (swanson98's 120 MHz Runway bus moves 8 bytes a bus cycle: a 32-byte
    /// line takes 4 bus cycles, 8 cycles of the 240 MHz core).
    pub writeback_cycles: u64,
    /// Cycles per remapped page besides the flush: finding the shadow region, the MTLB table
    /// entries, the page-table update and the TLB purge (§3.3: em3d's remap of 1120 pages
    /// spent 162,087 cycles beyond the flush, about 145 per page).
    pub page_cycles: u64,
    /// `copy`: cycles to copy one resident 4 KB page warm in the cache (§3.3: 11,400).
    pub copy_page_cycles: u64,
}

impl Default for ShadowConfig {
    fn default() -> Self {
        ShadowConfig {
            method: ShadowMethod::Remap,
            allocator: ShadowAllocator::Buckets,
            partition: FIGURE2.to_vec(),
            base: None,
            min_bytes: 256 << 10,
            sbrk_initial: 8 << 20,
            sbrk_increment: 2 << 20,
            flush_line_cycles: 10,
            writeback_cycles: 8,
            page_cycles: 145,
            copy_page_cycles: 11_400,
        }
    }
}

/// Counters of shadow superpages (JSON `shadow.*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShadowStats {
    /// Superpages created.
    pub superpages: u64,
    /// Superpages now mapped (one per process mapping one).
    pub live_superpages: u64,
    /// Superpages torn down (their range unmapped in part or whole, or their process exited).
    pub torn_down: u64,
    /// Superpages the allocator had no region (or, `copy`, no aligned block) for: their pages
    /// stay base pages.
    pub failures: u64,
    /// Base pages mapped into superpages (all pages of each superpage created).
    pub pages_remapped: u64,
    /// Of them, pages that had no frame yet and got one at creation (eager allocation).
    pub pages_allocated: u64,
    /// `copy`: resident pages copied into a superpage's frames.
    pub pages_copied: u64,
    /// Cache lines found and flushed when mappings changed.
    pub lines_flushed: u64,
    /// Of them, dirty lines written back to memory.
    pub dirty_lines: u64,
    /// Cycles of the flush loops (creation and teardown), their writebacks included.
    pub flush_cycles: u64,
    /// Of them, the loops when superpages are made (§3.3's cost of a remap).
    pub create_flush_cycles: u64,
    /// `copy`: cycles copying pages.
    pub copy_cycles: u64,
    /// Cycles of the per-page work besides flushing and copying.
    pub page_cycles: u64,
}

impl ShadowStats {
    /// All cycles the OS spent on shadow superpages.
    pub fn cycles(&self) -> u64 {
        crate::limits::sum([self.flush_cycles, self.copy_cycles, self.page_cycles])
    }
}

/// What the memory side must do when shadow mappings change, applied by the engine in order
/// before the page-table operations of the same call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemOp {
    /// Flush the page at virtual `va` (physical `pa`, as the processor addresses it; `None`:
    /// not resident, so only the loop's cost) of address space `asid` from every cache level:
    /// dirty lines are written to memory, every line is invalidated.
    Flush {
        /// Address space.
        asid: u32,
        /// The page's virtual address.
        va: u64,
        /// Its physical address before the change.
        pa: Option<u64>,
        /// The page's data dies with the change (an unmap or exit): its lines are purged,
        /// invalidated without being written, at the loop's cost per line.
        purge: bool,
        /// The flush is part of making a superpage (not of tearing one down).
        create: bool,
    },
    /// Drop the lines of a page whose contents moved elsewhere (a copied page's old frame):
    /// invalidated, nothing written.
    Discard {
        /// Address space.
        asid: u32,
        /// The page's virtual address.
        va: u64,
        /// Its old physical address.
        pa: u64,
    },
    /// Set the memory controller's table entry of shadow frame `shadow` (and purge the MTLB's
    /// copy).
    Table {
        /// Shadow frame.
        shadow: u64,
        /// Real frame, or `None` to unmap.
        real: Option<u64>,
    },
}

/// One superpage mapped by one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Super {
    /// Base pages.
    pub pages: u64,
    /// First frame as the processor sees it: a shadow frame (`remap`) or the block's first
    /// real frame (`copy`).
    pub base: u64,
}

/// The OS's shadow-superpage state (inside [`super::Os`]).
#[derive(Clone, Debug)]
pub(crate) struct Shadow {
    pub policy: ShadowPolicy,
    pub cfg: ShadowConfig,
    /// Superpage sizes in base pages, ascending.
    pub sizes: Vec<u64>,
    /// Shadow regions (`remap`); `None` with `copy`.
    pub pool: Option<ShadowPool>,
    /// (asid, first vpn) -> superpage.
    pub supers: std::collections::BTreeMap<(u32, u64), Super>,
    /// Processes mapping each superpage base frame (more than one after fork).
    pub refs: std::collections::HashMap<u64, u32>,
    /// Per process: the heap's VPN range preallocated in superpages so far (first, end).
    pub heap: std::collections::HashMap<u32, (u64, u64)>,
    pub ops: Vec<MemOp>,
    pub stats: ShadowStats,
    /// Steps taken over regions and heap increments (see [`Os::shadow_steps`]).
    pub steps: u64,
}

impl Shadow {
    /// The state for `policy` and `cfg` over base pages of `page_bytes`; `shadow_range` is the
    /// memory controller's shadow range `[start, end)` (needed by `remap`). Errors name the key.
    pub fn new(
        policy: ShadowPolicy,
        cfg: &ShadowConfig,
        page_bytes: u64,
        shadow_range: Option<(u64, u64)>,
    ) -> Result<Shadow, crate::pt::ParamError> {
        use crate::pt::ParamError;
        let bad = |key: &str, m: String| ParamError::new(key, m);
        if cfg.partition.is_empty()
            || cfg.partition.iter().any(|&(s, n)| !s.is_power_of_two() || s <= page_bytes || s >= 1 << 40 || n == 0)
        {
            return Err(bad(
                "shadow.partition",
                format!(
                    "expected [[bytes, count], ...] with sizes powers of two above the page size ({page_bytes}) and \
                     counts > 0, got {:?}",
                    cfg.partition
                ),
            ));
        }
        let mut sizes: Vec<u64> = cfg.partition.iter().map(|p| p.0).collect();
        sizes.sort_unstable();
        if sizes.windows(2).any(|w| w[0] == w[1]) {
            return Err(bad("shadow.partition", "each superpage size may appear once".into()));
        }
        for (key, v) in [("shadow.sbrk_initial", cfg.sbrk_initial), ("shadow.sbrk_increment", cfg.sbrk_increment)] {
            if v == 0 || v % page_bytes != 0 {
                return Err(bad(key, format!("must be a positive multiple of the page size ({page_bytes}), got {v}")));
            }
        }
        let largest = *sizes.last().expect("non-empty");
        let pool = match cfg.method {
            ShadowMethod::Copy => None,
            ShadowMethod::Remap => {
                let (lo, hi) = shadow_range.ok_or_else(|| {
                    bad(
                        "shadow.method",
                        "\"remap\" maps superpages to shadow addresses that the memory controller's TLB \
                         retranslates: it needs [mtlb] (with [[cache]] levels and memory.dram_bytes, pa_bits)"
                            .into(),
                    )
                })?;
                let base = cfg.base.unwrap_or(lo.div_ceil(largest) * largest);
                let total: u64 = cfg.partition.iter().map(|&(s, n)| s.saturating_mul(n)).fold(0, u64::saturating_add);
                let pool = match cfg.allocator {
                    ShadowAllocator::Buckets => ShadowPool::buckets(base, &cfg.partition),
                    ShadowAllocator::Buddy => ShadowPool::buddy(base, total.div_ceil(largest) * largest, &sizes),
                }
                .map_err(|m| bad("shadow.base", m))?;
                let (b, n) = pool.range();
                if b < lo || b.checked_add(n).map_or(true, |end| end > hi) {
                    return Err(bad(
                        "shadow.partition",
                        format!(
                            "the shadow regions [{b:#x}, {:#x}) must lie in the shadow range [{lo:#x}, {hi:#x}) \
                             above the installed DRAM (memory.dram_bytes .. 2^memory.pa_bits)",
                            b.saturating_add(n)
                        ),
                    ));
                }
                Some(pool)
            }
        };
        Ok(Shadow {
            policy,
            cfg: cfg.clone(),
            sizes: sizes.iter().map(|s| s / page_bytes).collect(),
            pool,
            supers: Default::default(),
            refs: Default::default(),
            heap: Default::default(),
            ops: Vec::new(),
            stats: ShadowStats::default(),
            steps: 0,
        })
    }

    /// The superpage of `asid` holding `vpn`: (first vpn, superpage).
    pub fn covering(&self, asid: u32, vpn: u64) -> Option<(u64, Super)> {
        let (&(a, first), &s) = self.supers.range(..=(asid, vpn)).next_back()?;
        (a == asid && vpn < first + s.pages).then_some((first, s))
    }

    /// Superpages of `asid` overlapping `[first, last]`, as (first vpn, superpage).
    pub fn overlapping(&self, asid: u32, first: u64, last: u64) -> Vec<(u64, Super)> {
        let mut v: Vec<(u64, Super)> = self.covering(asid, first).into_iter().collect();
        let from = first.saturating_add(1);
        if from <= last {
            v.extend(self.supers.range((asid, from)..=(asid, last)).map(|(&(_, f), &s)| (f, s)));
        }
        v
    }

    /// The end (first VPN past it) of the last superpage of `asid` overlapping `[first, last]`.
    pub(super) fn overlap_end(&self, asid: u32, first: u64, last: u64) -> Option<u64> {
        let (&(a, f), s) = self.supers.range(..=(asid, last)).next_back()?;
        // Superpages do not overlap: if the last one starting by `last` ends before `first`, so
        // do all before it.
        (a == asid && f + s.pages > first).then_some(f + s.pages)
    }

    /// Of `count` superpages of `pages` pages each from VPN `first`, those that overlap no
    /// superpage of `asid` (the ones a plan would try to make).
    pub(super) fn unmapped_pieces(&self, asid: u32, first: u64, pages: u64, count: u64) -> u64 {
        if count == 0 {
            return 0;
        }
        let last = first + (count * pages - 1);
        let (mut covered, mut next) = (0, 0);
        for (f, s) in self.overlapping(asid, first, last) {
            let a = ((f.max(first) - first) / pages).max(next);
            let z = ((f + (s.pages - 1)).min(last) - first) / pages;
            if a <= z {
                covered += z - a + 1;
                next = z + 1;
            }
        }
        count - covered
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §2.4's algorithm one superpage at a time, as first written.
    fn plan_one_by_one(start: u64, end: u64, sizes: &[u64]) -> Vec<(u64, u64)> {
        let smallest = sizes[0];
        let mut out = Vec::new();
        let mut va = start.div_ceil(smallest) * smallest;
        while va < end && end - va >= smallest {
            let size = sizes.iter().copied().filter(|&s| va % s == 0 && end - va >= s).max().unwrap();
            out.push((va, size));
            va += size;
        }
        out
    }

    use crate::trace::gen::Rng;

    const SIZE_SETS: [&[u64]; 4] = [
        &[16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20],
        &[8 << 10],
        &[8 << 10, 1 << 20],
        &[16 << 10, 32 << 10, 64 << 10, 1 << 30],
    ];

    /// The pool as first written: every free region kept one by one.
    struct OneByOne {
        buddy: bool,
        sizes: Vec<u64>,
        free: Vec<std::collections::BTreeSet<u64>>,
        base: u64,
    }

    impl OneByOne {
        fn alloc(&mut self, size: u64) -> Option<u64> {
            let i = self.sizes.iter().position(|&s| s == size)?;
            if let Some(a) = self.free[i].pop_first() {
                return Some(a);
            }
            if !self.buddy {
                return None;
            }
            let j = (i + 1..self.sizes.len()).find(|&j| !self.free[j].is_empty())?;
            let a = self.free[j].pop_first().unwrap();
            for k in (i..j).rev() {
                let (big, small) = (self.sizes[k + 1], self.sizes[k]);
                for p in 1..big / small {
                    self.free[k].insert(a + p * small);
                }
            }
            Some(a)
        }

        fn free(&mut self, addr: u64, size: u64) {
            let mut i = self.sizes.iter().position(|&s| s == size).unwrap();
            let mut a = addr;
            while self.buddy && i + 1 < self.sizes.len() {
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
            self.free[i].insert(a);
        }
    }

    #[test]
    fn runs_of_free_regions_allocate_as_regions_kept_one_by_one() {
        let partition = [(16u64 << 10, 40), (64 << 10, 9), (256 << 10, 5), (1 << 20, 3), (16 << 20, 3)];
        let sizes: Vec<u64> = partition.iter().map(|p| p.0).collect();
        let base = 1u64 << 30;
        for buddy in [false, true] {
            let mut r = Rng::new(if buddy { 5 } else { 3 });
            let mut pool = if buddy {
                ShadowPool::buddy(base, 48 << 20, &sizes).unwrap()
            } else {
                ShadowPool::buckets(base, &partition).unwrap()
            };
            let mut old = OneByOne { buddy, sizes: sizes.clone(), free: vec![Default::default(); sizes.len()], base };
            if buddy {
                for k in 0..3 {
                    old.free[4].insert(base + k * (16 << 20));
                }
            } else {
                let mut at = base;
                for (i, &(size, count)) in partition.iter().enumerate() {
                    at = at.div_ceil(size) * size;
                    for k in 0..count {
                        old.free[i].insert(at + k * size);
                    }
                    at += count * size;
                }
            }
            let mut held: Vec<(u64, u64)> = Vec::new();
            for step in 0..20_000 {
                if held.is_empty() || r.next_u64() % 5 < 3 {
                    let size = sizes[(r.next_u64() % sizes.len() as u64) as usize];
                    let got = pool.alloc(size);
                    assert_eq!(got, old.alloc(size), "step {step}");
                    if let Some(a) = got {
                        held.push((a, size));
                    }
                } else {
                    let (a, size) = held.swap_remove((r.next_u64() % held.len() as u64) as usize);
                    pool.free(a, size);
                    old.free(a, size);
                }
                let counts: Vec<u64> = old.free.iter().map(|f| f.len() as u64).collect();
                assert_eq!(pool.free_counts(), counts, "step {step}");
            }
        }
    }

    /// A buddy range of one 2^39-byte region split down to 8 KB keeps a run per size, not 2^26
    /// regions, and recombines whole.
    #[test]
    fn splitting_a_huge_region_down_to_the_smallest_size_takes_a_run_per_size() {
        let mut pool = ShadowPool::buddy(1 << 40, 1 << 39, &[8 << 10, 1 << 39]).unwrap();
        let a = pool.alloc(8 << 10).unwrap();
        assert_eq!(pool.free_counts(), vec![(1 << 26) - 1, 0]);
        assert_eq!(pool.free.iter().map(|f| f.0.len()).sum::<usize>(), 1);
        pool.free(a, 8 << 10);
        assert_eq!(pool.free_counts(), vec![0, 1]);
    }

    #[test]
    fn runs_are_the_plan() {
        let mut r = Rng::new(7);
        for sizes in SIZE_SETS {
            for _ in 0..3000 {
                let start = (r.next_u64() % (96 << 20)) & !0xfff;
                let end = start + r.next_u64() % (72 << 20);
                let runs: Vec<_> = plan_runs(start, end, sizes).collect();
                assert!(runs.len() <= 2 * sizes.len(), "{runs:?}");
                let flat: Vec<_> = runs.iter().flat_map(|&(va, s, n)| (0..n).map(move |k| (va + k * s, s))).collect();
                assert_eq!(flat, plan_one_by_one(start, end, sizes), "{start:#x}..{end:#x}");
            }
        }
        // The top of the address space: nothing past 2^64, no overflow.
        let sizes = SIZE_SETS[0];
        assert_eq!(plan_runs(u64::MAX - 100, u64::MAX, sizes).count(), 0);
        let top: Vec<_> = plan_runs(1 << 47, u64::MAX, sizes).collect();
        assert_eq!(top[0], (1 << 47, 16 << 20, ((1u64 << 63) - (1 << 46)) / (8 << 20) - 1));
        assert_eq!(top.iter().map(|r| r.2).sum::<u64>(), top[0].2 + 5 * 3);
    }

    #[test]
    fn pieces_of_many_chunks_are_counted_without_planning_each() {
        let mut r = Rng::new(11);
        for sizes in SIZE_SETS {
            let all = u64::MAX >> (64 - sizes.len());
            for _ in 0..400 {
                let h = (r.next_u64() % (1 << 36)) & !0xfff;
                let step = [4096, 16 << 10, 2 << 20, 3 << 20, 20 << 10, 8 << 20, 64 << 20][(r.next_u64() % 7) as usize];
                let n = r.next_u64() % 40;
                let mask = if r.next_u64() % 2 == 0 { all } else { r.next_u64() & all };
                let mut want = 0u128;
                for j in 0..n {
                    let a = h + j * step;
                    for (_, s) in plan_one_by_one(a, a + step, sizes) {
                        let i = sizes.iter().position(|&x| x == s).unwrap();
                        want += (mask >> i & 1) as u128;
                    }
                }
                assert_eq!(chunk_pieces(h, step, n, sizes, mask), want, "{h:#x} {step} {n} {mask:b}");
            }
        }
        // Every chunk up to 2^64: no overflow, and as many 2 MB pieces as fit.
        let sizes = SIZE_SETS[0];
        let n = (u64::MAX - (1 << 21)) / (2 << 20);
        let got = chunk_pieces(1 << 21, 2 << 20, n, sizes, 1 << 3);
        assert_eq!(got, 2 * n as u128);
        assert_eq!(floor_sum(10, 7, 3, 5), (0..10).map(|j| (3 * j + 5) / 7).sum::<u128>());
    }
}
