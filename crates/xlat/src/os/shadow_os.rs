//! The OS's part of shadow superpages (swanson98 §2.3-2.4): making them when a region is
//! mapped, at the modified `sbrk` or at a marker, and tearing them down on unmap, exit and
//! fork, as page-table operations and memory-side operations the engine applies. The
//! allocator and the mapping plan are `os/shadow.rs`.

use super::shadow::*;
use super::{Os, OutOfMemory, PtOp};
use crate::addr::{Asid, PageSize, Pfn, Vpn};
use crate::pt::Pte;

impl Os {
    /// This OS with shadow superpages (`os.shadow_superpages` other than `none`).
    pub(crate) fn set_shadow(&mut self, s: Shadow) {
        self.shadow = Some(Box::new(s));
    }

    /// When this OS builds shadow superpages.
    pub fn shadow_policy(&self) -> ShadowPolicy {
        self.shadow.as_ref().map_or(ShadowPolicy::None, |s| s.policy)
    }

    /// Shadow-superpage counters, if the OS builds them.
    pub fn shadow_stats(&self) -> Option<ShadowStats> {
        self.shadow.as_ref().map(|s| ShadowStats { live_superpages: s.supers.len() as u64, ..s.stats })
    }

    /// Steps the model has taken to walk the regions and heap increments asked for: runs of
    /// superpages, superpages tried one by one, increments looked at, counts of many increments
    /// at once (the work on each page of a superpage made or torn down is not among them).
    /// However long the regions, it grows with the superpages made and the superpages already
    /// there, not with the bytes.
    pub fn shadow_steps(&self) -> u64 {
        self.shadow.as_ref().map_or(0, |s| s.steps)
    }

    /// Moves the memory-side operations asked for since the last call into `out` (cleared
    /// first).
    pub fn take_mem_ops(&mut self, out: &mut Vec<MemOp>) {
        out.clear();
        if let Some(s) = &mut self.shadow {
            std::mem::swap(out, &mut s.ops);
        }
    }

    /// The engine's account of a flush: lines found, dirty lines written, cycles, and whether
    /// it was part of making a superpage.
    pub fn shadow_flushed(&mut self, lines: u64, dirty: u64, cycles: u64, create: bool) {
        if let Some(s) = &mut self.shadow {
            s.stats.lines_flushed += lines;
            s.stats.dirty_lines += dirty;
            s.stats.flush_cycles = s.stats.flush_cycles.saturating_add(cycles);
            if create {
                s.stats.create_flush_cycles = s.stats.create_flush_cycles.saturating_add(cycles);
            }
        }
    }

    /// The shadow superpage of `asid` holding `vpn`: its PTE for `vpn`.
    pub(crate) fn shadow_pte(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        let (first, s) = self.shadow.as_ref()?.covering(asid.0, vpn.0)?;
        let shift = self.paging.page_size.shift() + s.pages.trailing_zeros();
        Some(Pte {
            pfn: Pfn(s.base + (vpn.0 - first)),
            size: PageSize::from_shift(shift).expect("validated superpage size"),
            valid: 0,
        })
    }

    /// The heap's bytes `[start, end)` preallocated in superpages for `asid` (§2.3's modified
    /// `sbrk`), if any.
    pub fn shadow_heap(&self, asid: Asid) -> Option<(u64, u64)> {
        self.shadow.as_ref()?.heap.get(&asid.0).copied()
    }

    /// The heap of `asid` grew to cover `[start, end)`: the modified `sbrk` maps
    /// `shadow.sbrk_initial` bytes in superpages at its first growth and
    /// `shadow.sbrk_increment` more each time it grows past what is mapped. Increments that
    /// can make no superpage (every size they would use has no region left, none overlaps a
    /// superpage already there) are counted together, so a growth of any length costs time in
    /// proportion to the superpages made, not to the bytes.
    pub fn shadow_heap_grow(
        &mut self,
        asid: Asid,
        start: u64,
        end: u64,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<(), OutOfMemory> {
        let Some(mut sh) = self.shadow.take() else {
            return Ok(());
        };
        let r = self.shadow_heap_grow_in(&mut sh, asid, start, end, ops, shootdown);
        self.shadow = Some(sh);
        r
    }

    fn shadow_heap_grow_in(
        &mut self,
        sh: &mut Shadow,
        asid: Asid,
        start: u64,
        end: u64,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<(), OutOfMemory> {
        let (initial, step) = (sh.cfg.sbrk_initial, sh.cfg.sbrk_increment);
        let (lo, mut hi) = sh.heap.get(&asid.0).copied().unwrap_or((start, start));
        let mut dry = 0u64;
        while hi < end {
            sh.steps += 1;
            if hi == lo {
                let next = hi.saturating_add(initial);
                sh.heap.insert(asid.0, (lo, next));
                self.shadow_region_in(sh, asid, hi, next, &mut dry, ops, shootdown)?;
                hi = next;
                continue;
            }
            // Whole increments that start before `end` and end by 2^64 (the last one below
            // 2^64 is cut short there).
            let n = ((u64::MAX - hi) / step).min((end - hi).div_ceil(step));
            let idle = self.idle_increments(sh, asid, hi, n, dry);
            if idle > 0 {
                let shift = self.paging.page_size.shift();
                let sizes: Vec<u64> = sh.sizes.iter().map(|p| p << shift).collect();
                let all = u64::MAX >> (64 - sizes.len());
                let failed = chunk_pieces(hi, step, idle, &sizes, all);
                sh.stats.failures = sh.stats.failures.saturating_add(u64::try_from(failed).unwrap_or(u64::MAX));
                hi += idle * step;
                sh.heap.insert(asid.0, (lo, hi));
                continue;
            }
            let next = hi.saturating_add(step);
            sh.heap.insert(asid.0, (lo, next));
            self.shadow_region_in(sh, asid, hi, next, &mut dry, ops, shootdown)?;
            hi = next;
        }
        Ok(())
    }

    /// How many of the `n` increments of the heap of `asid` from `hi` make no superpage and
    /// change nothing, from the first: each superpage they would make is of a size in `dry`
    /// (bit i: `sizes[i]`; its allocator found no region since the last superpage made) and
    /// overlaps no superpage already mapped.
    fn idle_increments(&self, sh: &mut Shadow, asid: Asid, hi: u64, n: u64, dry: u64) -> u64 {
        let shift = self.paging.page_size.shift();
        let step = sh.cfg.sbrk_increment;
        let first = hi >> shift;
        if n == 0 || sh.covering(asid.0, first).is_some() {
            return 0;
        }
        // Up to the increment holding the next superpage mapped.
        let mut limit = n;
        if let Some((&(a, f), _)) = sh.supers.range((asid.0, first + 1)..=(asid.0, u64::MAX)).next() {
            debug_assert_eq!(a, asid.0);
            limit = limit.min(((f << shift) - hi) / step);
        }
        let sizes: Vec<u64> = sh.sizes.iter().map(|p| p << shift).collect();
        let live = !dry & (u64::MAX >> (64 - sizes.len()));
        if live == 0 || limit == 0 {
            return limit;
        }
        // The first increment with a superpage of a size that may find a region: gallop, then
        // halve (the count of such superpages only grows with the increments taken).
        let steps = &mut sh.steps;
        let mut any = |k: u64| {
            *steps += 1;
            chunk_pieces(hi, step, k, &sizes, live) > 0
        };
        if any(1) {
            return 0;
        }
        let (mut idle, mut busy) = (1u64, None);
        while busy.is_none() && idle < limit {
            let k = idle.saturating_mul(2).min(limit);
            if any(k) {
                busy = Some(k);
            } else {
                idle = k;
            }
        }
        let Some(mut busy) = busy else {
            return limit;
        };
        while busy - idle > 1 {
            let mid = idle + (busy - idle) / 2;
            if any(mid) {
                busy = mid;
            } else {
                idle = mid;
            }
        }
        idle
    }

    /// Maps the virtual bytes `[start, end)` of `asid` in superpages by §2.4's algorithm:
    /// from the first address aligned to the smallest superpage, maximal superpages; what
    /// lies before it and a tail smaller than the smallest superpage stay base pages, as do
    /// superpages that would overlap one already there or that find no shadow region (or,
    /// `copy`, no aligned block of frames). Every page of a superpage gets a frame now (the
    /// one it has, or a fresh one); `remap` flushes the pages' lines from the caches and fills
    /// the memory controller's table, `copy` copies the resident pages into the new frames.
    /// Returns the superpages made.
    pub fn shadow_region(
        &mut self,
        asid: Asid,
        start: u64,
        end: u64,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<u64, OutOfMemory> {
        let Some(mut sh) = self.shadow.take() else {
            return Ok(0);
        };
        let r = self.shadow_region_in(&mut sh, asid, start, end, &mut 0, ops, shootdown);
        self.shadow = Some(sh);
        r
    }

    /// [`Os::shadow_region`] on the state taken out of the OS. `dry` (bit i: size i) holds the
    /// sizes whose allocation failed since the last superpage was made: until one is made, an
    /// allocation of such a size fails again and changes nothing (no region or block is freed
    /// meanwhile), so the superpages of a run of that size are counted as failures together
    /// and a region of any length costs time in proportion to the superpages made.
    #[allow(clippy::too_many_arguments)]
    fn shadow_region_in(
        &mut self,
        sh: &mut Shadow,
        asid: Asid,
        start: u64,
        end: u64,
        dry: &mut u64,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<u64, OutOfMemory> {
        let shift = self.paging.page_size.shift();
        let sizes: Vec<u64> = sh.sizes.iter().map(|p| p << shift).collect();
        let mut made = 0;
        for (run_va, bytes, count) in plan_runs(start, end, &sizes) {
            sh.steps += 1;
            let size_bit = 1u64 << sizes.iter().position(|&s| s == bytes).expect("a planned size");
            let (run_first, pages) = (run_va >> shift, bytes >> shift);
            let mut k = 0;
            while k < count {
                sh.steps += 1;
                let first = run_first + k * pages;
                if *dry & size_bit != 0 {
                    let failed = sh.unmapped_pieces(asid.0, first, pages, count - k);
                    sh.stats.failures = sh.stats.failures.saturating_add(failed);
                    break;
                }
                // A superpage already there: on past it.
                if let Some(past) = sh.overlap_end(asid.0, first, first + (pages - 1)) {
                    k = (k + 1).max((past - run_first).div_ceil(pages));
                    continue;
                }
                k += 1;
                let base = match sh.cfg.method {
                    ShadowMethod::Remap => sh.pool.as_mut().expect("remap has a pool").alloc(bytes).map(|a| a >> shift),
                    ShadowMethod::Copy => self.frames.alloc_block(pages),
                };
                let Some(base) = base else {
                    sh.stats.failures += 1;
                    *dry |= size_bit;
                    continue;
                };
                *dry = 0;
                let mut copied = 0;
                for j in 0..pages {
                    let vpn = first + j;
                    let va = vpn << shift;
                    let old = self.resident.get(&(asid.0, vpn)).copied();
                    if old.is_some() {
                        ops.push(PtOp::Unmap(asid, Vpn(vpn)));
                    }
                    match sh.cfg.method {
                        ShadowMethod::Remap => {
                            let real = match old {
                                Some(f) => f,
                                None => {
                                    let f = self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?;
                                    self.resident.insert((asid.0, vpn), f);
                                    sh.stats.pages_allocated += 1;
                                    f
                                }
                            };
                            sh.ops.push(MemOp::Flush {
                                asid: asid.0,
                                va,
                                pa: old.map(|f| f << shift),
                                purge: false,
                                create: true,
                            });
                            sh.ops.push(MemOp::Table { shadow: base + j, real: Some(real) });
                        }
                        ShadowMethod::Copy => {
                            match old {
                                Some(f) => {
                                    sh.ops.push(MemOp::Discard { asid: asid.0, va, pa: f << shift });
                                    self.release(f);
                                    copied += 1;
                                }
                                None => sh.stats.pages_allocated += 1,
                            }
                            self.resident.insert((asid.0, vpn), base + j);
                        }
                    }
                }
                let size = PageSize::from_shift(shift + pages.trailing_zeros()).expect("validated superpage size");
                ops.push(PtOp::Map(asid, Vpn(first), Pte { pfn: Pfn(base), size, valid: 0 }));
                shootdown.push((asid, Vpn(first), Vpn(first + pages - 1)));
                sh.supers.insert((asid.0, first), Super { pages, base });
                *sh.refs.entry(base).or_insert(0) += 1;
                let st = &mut sh.stats;
                st.superpages += 1;
                st.pages_remapped += pages;
                st.pages_copied += copied;
                st.copy_cycles = st.copy_cycles.saturating_add(crate::limits::times(copied, sh.cfg.copy_page_cycles));
                st.page_cycles = st.page_cycles.saturating_add(crate::limits::times(pages, sh.cfg.page_cycles));
                made += 1;
            }
        }
        Ok(made)
    }

    /// Before unmapping `[first, last]` of `asid`: tears down the superpages overlapping it.
    /// Their pages that stay resident go back to base PTEs of their real frames; with `remap`
    /// the lines cached under the shadow addresses are flushed (through the controller, whose
    /// table still maps them) for the pages that stay and purged (dropped: their data dies) for
    /// the pages unmapped, so no stale shadow line outlives the mapping; once no process maps
    /// the region, its table entries are cleared and the region returns to the pool.
    pub(crate) fn shadow_teardown(
        &mut self,
        asid: Asid,
        first: Vpn,
        last: Vpn,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) {
        let Some(sh) = self.shadow.as_deref_mut() else {
            return;
        };
        let shift = self.paging.page_size.shift();
        for (f, s) in sh.overlapping(asid.0, first.0, last.0) {
            sh.supers.remove(&(asid.0, f));
            ops.push(PtOp::Unmap(asid, Vpn(f)));
            shootdown.push((asid, Vpn(f), Vpn(f + s.pages - 1)));
            for j in 0..s.pages {
                let vpn = f + j;
                let stays = vpn < first.0 || vpn > last.0;
                if sh.cfg.method == ShadowMethod::Remap {
                    sh.ops.push(MemOp::Flush {
                        asid: asid.0,
                        va: vpn << shift,
                        pa: Some((s.base + j) << shift),
                        purge: !stays,
                        create: false,
                    });
                }
                if stays {
                    if let Some(&fr) = self.resident.get(&(asid.0, vpn)) {
                        ops.push(PtOp::Map(asid, Vpn(vpn), Pte::base(Pfn(fr), self.paging.page_size)));
                    }
                }
            }
            let refs = sh.refs.get_mut(&s.base).expect("a mapped superpage has references");
            *refs -= 1;
            if *refs == 0 {
                sh.refs.remove(&s.base);
                if let Some(pool) = &mut sh.pool {
                    for j in 0..s.pages {
                        sh.ops.push(MemOp::Table { shadow: s.base + j, real: None });
                    }
                    pool.free(s.base << shift, s.pages << shift);
                }
            }
            sh.stats.torn_down += 1;
        }
    }

    /// Fork: the child maps the parent's superpages too (the same shadow regions or frame
    /// blocks). Returns true if `vpn` of `parent` is in one (its base PTE is not wanted).
    pub(crate) fn shadow_fork(&mut self, parent: Asid, child: Asid, ops: &mut Vec<PtOp>) {
        let Some(sh) = self.shadow.as_deref_mut() else {
            return;
        };
        let shift = self.paging.page_size.shift();
        let theirs: Vec<(u64, Super)> =
            sh.supers.range((parent.0, 0)..=(parent.0, u64::MAX)).map(|(&(_, f), &s)| (f, s)).collect();
        for (f, s) in theirs {
            if !sh.overlapping(child.0, f, f + s.pages - 1).is_empty() {
                continue;
            }
            // Only when the child's pages are the parent's (they were copied by this fork).
            if (0..s.pages).any(|j| self.resident.get(&(child.0, f + j)) != self.resident.get(&(parent.0, f + j))) {
                continue;
            }
            for j in 0..s.pages {
                ops.push(PtOp::Unmap(child, Vpn(f + j)));
            }
            let size = PageSize::from_shift(shift + s.pages.trailing_zeros()).expect("validated superpage size");
            ops.push(PtOp::Map(child, Vpn(f), Pte { pfn: Pfn(s.base), size, valid: 0 }));
            sh.supers.insert((child.0, f), s);
            *sh.refs.entry(s.base).or_insert(0) += 1;
        }
        if let Some(&h) = sh.heap.get(&parent.0) {
            sh.heap.entry(child.0).or_insert(h);
        }
    }

    /// A process exited: forget its heap preallocation.
    pub(crate) fn shadow_exit(&mut self, asid: Asid) {
        if let Some(sh) = self.shadow.as_deref_mut() {
            sh.heap.remove(&asid.0);
        }
    }
}
