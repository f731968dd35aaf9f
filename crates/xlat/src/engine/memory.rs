//! The memory side of a design: nothing (walk references cost `cost.memory_cycles` each), the
//! page-table data cache of `[cost.cache]`, or a timed design's cache hierarchy and memory
//! (`[[cache]]`, `[memory]`, `[time]`) with its memory-side stages (the MTLB of `[mtlb]` sits
//! behind the last level, inside [`Hierarchy`]). Walks, program references and the OS model's
//! own references reach memory only through here.

use super::design::Design;
use crate::cache::{Hierarchy, Route};
use crate::cost::PtCache;
use crate::pt::WalkRecord;
use crate::stats::SystemStats;
use crate::trace::Kind;

/// See the module documentation.
#[derive(Clone, Debug)]
pub(crate) enum MemorySide {
    /// Translation only: walk references are counted, not simulated.
    Untimed,
    /// `[cost.cache]`: walk references go through a cache of page-table data.
    PtCache(Box<PtCache>),
    /// A timed design.
    Timed(Box<Timed>),
}

/// The caches and memory of a timed design.
#[derive(Clone, Debug)]
pub(crate) struct Timed {
    pub(crate) h: Hierarchy,
    /// Per kind [instruction fetches, data]: the line size (log2) of the level-1 cache (the page
    /// size without one), and that level's hit latency.
    pub(crate) line_shift: [u32; 2],
    pub(crate) l1_latency: [u64; 2],
    /// `[time] core = "overlap"`: how data misses overlap (none: the blocking core).
    pub(crate) overlap: Option<crate::cost::Overlap>,
}

impl MemorySide {
    /// The memory side of `design`.
    pub(crate) fn new(design: &Design) -> MemorySide {
        let config = design.config();
        if config.timed() {
            let memory = config.memory.clone().unwrap_or_default();
            let mut h = Hierarchy::new(&config.cache, &memory).expect("validated: caches and memory");
            if let Some(m) = &config.mtlb {
                // Validated with the config: DRAM, the shadow range and the table fit.
                let (dram, bits) = (memory.dram_bytes.expect("validated"), memory.pa_bits.expect("validated"));
                h.set_mtlb(
                    crate::mtlb::Mtlb::new(m, dram, bits, design.page_size.bytes()).expect("validated: Mtlb::layout"),
                );
            }
            let shift = design.page_size.shift();
            let overlap = config
                .time
                .as_ref()
                .filter(|t| t.core == crate::config::Core::Overlap)
                .map(|t| crate::cost::Overlap::new(t.mshrs, t.window));
            return MemorySide::Timed(Box::new(Timed {
                overlap,
                line_shift: [Route::Instruction, Route::Data].map(|r| h.first_line_shift(r).unwrap_or(shift)),
                l1_latency: [Route::Instruction, Route::Data].map(|r| h.first_latency(r)),
                h,
            }));
        }
        match &config.cost.cache {
            Some(c) => MemorySide::PtCache(Box::new(PtCache::new(c).expect("validated: cost.cache"))),
            None => MemorySide::Untimed,
        }
    }

    /// The caches and memory of a timed design.
    #[inline(always)]
    pub(crate) fn timed(&self) -> Option<&Timed> {
        match self {
            MemorySide::Timed(t) => Some(t),
            _ => None,
        }
    }

    /// See [`MemorySide::timed`].
    #[inline(always)]
    pub(crate) fn timed_mut(&mut self) -> Option<&mut Timed> {
        match self {
            MemorySide::Timed(t) => Some(t),
            _ => None,
        }
    }

    /// The references of the walk `rec` just made (`refs_before`: its reference count before
    /// the walk): through the caches of a timed design, or the page-table data cache. Without
    /// either, `cost.memory_cycles` each, from the walk totals.
    #[inline]
    pub(crate) fn walk_refs(&mut self, rec: &WalkRecord, refs_before: u64, stats: &mut SystemStats) {
        let beyond = (rec.mem_refs - refs_before) - rec.n_addrs;
        match self {
            MemorySide::Untimed => {}
            MemorySide::Timed(t) => {
                // The walk's references read page-table entries through the data caches.
                let c = &mut stats.timing.walk_cycles;
                for a in &rec.addrs[..rec.n_addrs as usize] {
                    *c = c.saturating_add(t.h.access(Route::Walk, false, a.0, a.0, 0));
                }
                // References beyond the recorded ones (very deep walks) read memory.
                for _ in 0..beyond {
                    *c = c.saturating_add(t.h.memory(false, 0));
                }
            }
            MemorySide::PtCache(cache) => {
                let w = &mut stats.walks;
                for a in &rec.addrs[..rec.n_addrs as usize] {
                    if cache.access(a.0) {
                        w.cache_hits += 1;
                    } else {
                        w.cache_misses += 1;
                    }
                }
                // References beyond the recorded ones (very deep walks) are charged as misses.
                w.cache_misses += beyond;
            }
        }
    }

    /// A reference the OS model makes on the program's behalf (a refill handler's instruction
    /// fetch or load, a software-TLB probe) at physical address `pa` in unmapped kernel memory:
    /// it goes through the caches of its kind (data references through the walk route, whose
    /// levels a walker reads) and its cycles join the translation time. Returns those cycles;
    /// 0 in a design without caches, memory or time.
    pub(crate) fn kernel_access(&mut self, kind: Kind, pa: u64, stats: &mut SystemStats) -> u64 {
        let Some(t) = self.timed_mut() else {
            return 0;
        };
        let route = if kind.is_data() { Route::Walk } else { Route::Instruction };
        let mut cycles = 0;
        if kind != Kind::Store {
            cycles += t.h.access(route, false, pa, pa, 0);
        }
        if matches!(kind, Kind::Store | Kind::Modify) {
            cycles += t.h.access(route, true, pa, pa, 0);
        }
        stats.timing.walk_cycles = stats.timing.walk_cycles.saturating_add(cycles);
        cycles
    }
}

impl Timed {
    /// One line of a reference at (`va`, `pa`) through the caches: a modify is a load, then a
    /// store. Counts the cycles beyond a level-1 hit (none without a cache: a perfect one); in
    /// the `overlap` core a data line's are what its miss adds to its group's.
    #[inline(always)]
    pub(crate) fn line_refs(&mut self, kind: Kind, va: u64, pa: u64, asid: u32, stats: &mut SystemStats) {
        let k = kind.is_data() as usize;
        let route = if k == 1 { Route::Data } else { Route::Instruction };
        let l1 = self.l1_latency[k];
        let mut stall = 0;
        if kind != Kind::Store {
            stall += self.h.access(route, false, va, pa, asid).saturating_sub(l1);
        }
        if matches!(kind, Kind::Store | Kind::Modify) {
            stall += self.h.access(route, true, va, pa, asid).saturating_sub(l1);
        }
        if k == 1 && stall != 0 {
            if let Some(o) = &mut self.overlap {
                stall = o.miss(stats.timing.instructions, stall);
            }
        }
        stats.timing.stall[k] = stats.timing.stall[k].saturating_add(stall);
    }

    /// The lines of bytes `lo..=hi` (one page; `pa` is `lo`'s physical address) through the
    /// caches.
    #[inline(always)]
    pub(crate) fn cache_refs(&mut self, kind: Kind, lo: u64, hi: u64, pa: u64, asid: u32, stats: &mut SystemStats) {
        let ls = self.line_shift[kind.is_data() as usize];
        let mut line = lo >> ls;
        loop {
            let va = lo.max(line << ls);
            self.line_refs(kind, va, pa + (va - lo), asid, stats);
            if line == hi >> ls {
                break;
            }
            line += 1;
        }
    }
}
