//! Plain counters filled by the engine and read by the printers.

use serde::Serialize;

/// Counters of one TLB structure.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TlbStats {
    /// Lookups that reached this structure.
    pub accesses: u64,
    /// Lookups that found their translation here.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Valid entries replaced to make room.
    pub evictions: u64,
    /// Entries removed by shootdowns (unmap, exit, promotion) and flushes.
    pub invalidations: u64,
    /// Misses served by adding a page to an entry already present: complete-subblock *subblock
    /// misses* and partial-subblock valid-bit updates (talluri95 §4.4). The other misses are
    /// *block misses*, which allocate an entry.
    pub subblock_misses: u64,
}

impl TlbStats {
    /// `n` lookups that reached this structure, of which `misses` missed.
    #[inline(always)]
    pub(crate) fn lookups(&mut self, n: u64, misses: u64) {
        self.accesses += n;
        self.misses += misses;
    }

    /// What a fill did: `evictions` valid entries replaced, `merged` pages added to entries
    /// already present (subblock misses).
    #[inline(always)]
    pub(crate) fn filled(&mut self, evictions: u64, merged: u64) {
        self.evictions += evictions;
        self.subblock_misses += merged;
    }
}

/// Counters of page walks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WalkStats {
    /// Walks (one per last-level TLB miss).
    pub count: u64,
    /// Memory references made by walks.
    pub memory_refs: u64,
    /// Distinct cache lines touched per walk, summed.
    pub cache_lines: u64,
    /// TLB misses taken by walks themselves (linear tables).
    pub nested_misses: u64,
    /// Page-table translations inserted into a TLB: a linear table's or short VHPT's pages of
    /// PTEs after nested misses (or from the software TLB), Mach 3.0's L2 and L3 PTEs.
    pub pt_fills: u64,
    /// Page-walk-cache hits (radix).
    pub pwc_hits: u64,
    /// Walk references that hit in `[cost.cache]`.
    pub cache_hits: u64,
    /// Walk references that missed in `[cost.cache]`.
    pub cache_misses: u64,
    /// Walks that prefetched a whole block for a complete-subblock TLB (included in `count`).
    pub block_walks: u64,
    /// Cache lines of the walks that found no mapping (page faults; included in `cache_lines`).
    pub fault_lines: u64,
    /// Walks that found a superpage or partial-subblock PTE (included in `count`).
    pub superpage_walks: u64,
    /// Cache lines of those walks (included in `cache_lines`).
    pub superpage_lines: u64,
    /// Walks by the nested misses they took (0, 1, 2, 3 or more): a linear table's cascade
    /// depth (bala94: an L1U miss, then L2, then L3).
    pub by_depth: [u64; 4],
}

/// Cycles by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Cycles {
    /// TLB lookup latency.
    pub tlb: u64,
    /// Walk memory references.
    pub walk_memory: u64,
    /// Walker start-up (hardware) or traps (software).
    pub refill_overhead: u64,
    /// Page faults.
    pub page_fault: u64,
    /// TLB shootdowns (several cores): the initiators' and the targets' cycles together
    /// (`shootdowns.initiator_cycles + target_cycles`); 0 with one core.
    pub shootdown: u64,
}

impl Cycles {
    /// Sum of all causes.
    pub fn total(&self) -> u64 {
        crate::limits::sum([self.tlb, self.walk_memory, self.refill_overhead, self.page_fault, self.shootdown])
    }
}

/// What the kernel did and what `[os]`'s per-event costs make of it: `cycles` is
/// Σ count × cost over system calls, context switches, minor and major faults, flushes and IPC
/// messages ([`crate::cost::kernel`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct KernelStats {
    /// System calls.
    pub syscalls: u64,
    /// Context switches.
    pub switches: u64,
    /// Page faults (minor and major).
    pub faults: u64,
    /// Faults that read nothing in.
    pub minor_faults: u64,
    /// Faults that read a file page in.
    pub major_faults: u64,
    /// Full TLB flushes: flush-on-switch flushes and RID purges.
    pub flushes: u64,
    /// IPC messages.
    pub ipcs: u64,
    /// TLB lookups of the kernel's per-event footprint (`os.kernel_text_bytes`,
    /// `os.kernel_data_bytes`): one per page per event.
    pub tlb_lookups: u64,
    /// Those lookups that missed in every level (the entry filled from the wired mapping).
    pub tlb_misses: u64,
    /// Kernel cycles: Σ count × cost.
    pub cycles: u64,
}

/// Event counters of one simulated system.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EventStats {
    /// Context switches.
    pub context_switches: u64,
    /// Full TLB flushes (flush-on-switch systems).
    pub flushes: u64,
    /// Map events.
    pub maps: u64,
    /// Unmap events.
    pub unmaps: u64,
    /// Base pages unmapped by unmap events.
    pub pages_unmapped: u64,
    /// Forks.
    pub forks: u64,
    /// Exits.
    pub exits: u64,
    /// IPC messages.
    pub ipcs: u64,
    /// System calls.
    pub syscalls: u64,
    /// Markers.
    pub markers: u64,
    /// Thread records (the running thread of the current process changed).
    pub threads: u64,
    /// Protect events (`mprotect`).
    pub protects: u64,
    /// Protect events that removed a right from resident pages (their TLB entries were shot
    /// down); a protect that only adds rights, or finds no resident page losing one, is not one.
    pub protect_shootdowns: u64,
    /// Resident base pages that lost a right in protect events (their entries shot down).
    pub pages_protected: u64,
    /// Discard events (`madvise` that drops pages).
    pub discards: u64,
    /// Resident base pages of discard events: freed (the next touch faults a fresh page), or
    /// with `MADV_FREE` left resident with their TLB entries shot down.
    pub pages_discarded: u64,
}

/// Everything one simulated system counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SystemStats {
    /// Translation lookups (pages touched).
    pub lookups: u64,
    /// Lookups by instruction fetches.
    pub ifetch_lookups: u64,
    /// Per TLB structure, in the system's structure order.
    pub tlb: Vec<TlbStats>,
    /// Demand-paging faults (minor and major).
    pub page_faults: u64,
    /// The faults among `page_faults` that read a file page in (major faults); the others are
    /// minor. The page cache's misses (`page_cache_misses`): the faults that read an object page in.
    pub major_faults: u64,
    /// Walks.
    pub walks: WalkStats,
    /// Cycles.
    pub cycles: Cycles,
    /// Events.
    pub events: EventStats,
    /// The kernel's events and the cycles `[os]`'s per-event costs make of them
    /// ([`crate::cost::kernel`]).
    pub kernel: KernelStats,
    /// The OS model's counters (reservations, promotions, demotions, ...).
    pub os: crate::os::OsStats,
    /// Per cache level, in config order (empty without `[[cache]]`).
    pub caches: Vec<crate::cache::CacheStats>,
    /// Memory behind the caches.
    pub memory: crate::cache::MemoryStats,
    /// The timing model's result, for designs with caches, `[memory]` or `[time]`.
    pub time: Option<TimeStats>,
    /// What the timing model is computed from (timed designs).
    pub timing: TimingCounts,
    /// Pages resident at the end.
    pub resident_pages: u64,
    /// Page faults that read a file page in (page-cache misses, `os.page_cache`): the faults a
    /// kernel would take as major faults.
    pub page_cache_misses: u64,
    /// The page table's size at its peak (each field's maximum over the run) and at the end.
    pub page_table: PageTableSizes,
    /// Short VHPT with the hardware walker: walks that took a VHPT translation fault (a nested
    /// miss the walker hands to software).
    pub vhpt_faults: u64,
    /// The VHPT's counters (`vhpt-long`; `vhpt-short` with its probes the walks).
    pub vhpt: Option<crate::pt::vhpt::VhptStats>,
    /// The software TLB's counters (`[stlb]`).
    pub stlb: Option<StlbStats>,
    /// The region-ID allocator's counters (`[itanium]`).
    pub rids: Option<crate::os::regions::RidStats>,
    /// Protection-key counters (`[itanium] protection_keys`).
    pub keys: Option<crate::os::keys::KeyStats>,
    /// The layout's counters (a `[layout]` other than `identity`).
    pub layout: Option<crate::os::layout::LayoutStats>,
    /// The Mach 3.0 personality's counters (`os.personality = "mach3"`).
    pub mach: Option<crate::os::mach3::Mach3Stats>,
    /// Shadow superpages' counters (`os.shadow_superpages`).
    pub shadow: Option<crate::os::shadow::ShadowStats>,
    /// The memory-controller TLB's counters (`[mtlb]`).
    pub mtlb: Option<MtlbCounts>,
    /// Linear and short-VHPT tables: per process, the page-table translations the structure
    /// holding them had at the end of each of the process's time slices (by ASID).
    pub pt_entries: Vec<PtEntries>,
    /// Several cores (`cores.count > 1`): the TLB shootdowns of all cores together.
    pub shootdowns: Option<ShootdownStats>,
    /// Several cores: each core's counters (docs/multicore.md); empty with one core.
    pub cores: Vec<CoreStats>,
}

/// TLB shootdowns (docs/multicore.md): as initiator, what the core started; as target, what
/// it invalidated and paid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ShootdownStats {
    /// Shootdowns started (one per change of the address space that invalidates ranges).
    pub initiated: u64,
    /// IPIs sent.
    pub ipis: u64,
    /// IPIs whose target held an entry of the ranges.
    pub necessary_ipis: u64,
    /// Shootdowns that flushed the address space whole (above `os.shootdown.flush_ceiling`).
    pub full_flushes: u64,
    /// Pages of the ranges shot down.
    pub pages: u64,
    /// TLB entries the targets invalidated (on an IPI, or later under `lazy` and for lazy cores).
    pub entries_invalidated: u64,
    /// Cycles of the initiators.
    pub initiator_cycles: u64,
    /// Cycles of the targets.
    pub target_cycles: u64,
}

impl ShootdownStats {
    /// Adds `o`'s counters (saturating cycles).
    pub fn add(&mut self, o: &ShootdownStats) {
        self.initiated += o.initiated;
        self.ipis += o.ipis;
        self.necessary_ipis += o.necessary_ipis;
        self.full_flushes += o.full_flushes;
        self.pages = self.pages.saturating_add(o.pages);
        self.entries_invalidated += o.entries_invalidated;
        self.initiator_cycles = self.initiator_cycles.saturating_add(o.initiator_cycles);
        self.target_cycles = self.target_cycles.saturating_add(o.target_cycles);
    }
}

/// One core's counters: what happened while it ran (its TLB structures' and cache levels'
/// counters, shared ones' included), its switches and its shootdowns.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CoreStats {
    /// Translation lookups made on this core.
    pub lookups: u64,
    /// Of which by instruction fetches.
    pub ifetch_lookups: u64,
    /// Per TLB structure, in the system's structure order.
    pub tlb: Vec<TlbStats>,
    /// Per cache level, in config order.
    pub caches: Vec<crate::cache::CacheStats>,
    /// Times a thread other than the one it ran was placed on the core.
    pub switches: u64,
    /// Of which to another address space.
    pub space_switches: u64,
    /// Address spaces whose entries the core flushed to reuse their ASID (or, with
    /// `asid = "flush"`, flushes on switch).
    pub asid_flushes: u64,
    /// Its shootdowns, as initiator and as target.
    pub shootdowns: ShootdownStats,
}

impl TlbStats {
    /// Adds `a - b` (counters of one structure at two times) to these counters.
    pub(crate) fn add_delta(&mut self, a: &TlbStats, b: &TlbStats) {
        self.accesses += a.accesses - b.accesses;
        self.misses += a.misses - b.misses;
        self.evictions += a.evictions - b.evictions;
        self.invalidations += a.invalidations - b.invalidations;
        self.subblock_misses += a.subblock_misses - b.subblock_misses;
    }
}

/// The page-table translations one process held in the TLB, sampled at the end of each of its
/// time slices (a switch away from it, its exit, the end of the trace): entries tagged with one
/// of its address spaces whose page lies in the page table's own region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PtEntries {
    /// The process.
    pub asid: u32,
    /// Time slices sampled.
    pub samples: u64,
    /// Entries summed over the samples.
    pub sum: u64,
    /// Most entries in one sample.
    pub peak: u64,
}

impl PtEntries {
    /// Mean entries per sample.
    pub fn mean(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.sum as f64 / self.samples as f64
        }
    }
}

/// Lookups and hits of the software TLB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StlbStats {
    /// Probes (a refill handler checks it before walking further).
    pub lookups: u64,
    /// Probes that found the translation.
    pub hits: u64,
}

/// The memory-controller TLB's counters and the pages its per-page bits mark.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MtlbCounts {
    /// Requests, lookups, hits, misses.
    pub counts: crate::mtlb::MtlbStats,
    /// Shadow pages with the referenced bit set.
    pub referenced_pages: u64,
    /// Shadow pages with the dirty bit set.
    pub dirty_pages: u64,
}

/// The page table's size at its peak and at the end of the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PageTableSizes {
    /// Each field's maximum over the run.
    pub peak: crate::pt::PtSize,
    /// At the end.
    pub end: crate::pt::PtSize,
}

/// The raw counts of a timed design's core that [`crate::cost::time`] turns into cycles.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimingCounts {
    /// Instructions (the trace's instruction fetches).
    pub instructions: u64,
    /// Stall cycles of [instruction fetches, data references] beyond a level-1 cache hit.
    pub stall: [u64; 2],
    /// Cycles of walk references (and the OS model's own references) through the caches.
    pub walk_cycles: u64,
}

impl SystemStats {
    /// A demand-paging fault.
    #[inline(always)]
    pub(crate) fn page_fault(&mut self) {
        self.page_faults += 1;
    }

    /// A lookup of structure `t` beyond the lookups of the kinds it serves at level 1 (deeper
    /// levels; the kernel's own lookups under Mach).
    #[inline(always)]
    pub(crate) fn tlb_access(&mut self, t: usize) {
        self.tlb[t].lookups(1, 0);
    }

    /// `n` misses of structure `t`.
    #[inline(always)]
    pub(crate) fn tlb_misses(&mut self, t: usize, n: u64) {
        self.tlb[t].lookups(0, n);
    }

    /// What filling structure `t` did: `evictions` valid entries replaced, `merged` pages added
    /// to entries already present (subblock misses).
    #[inline(always)]
    pub(crate) fn tlb_fill(&mut self, t: usize, evictions: u64, merged: u64) {
        self.tlb[t].filled(evictions, merged);
    }

    /// `n` walks that each took `depth` nested misses (a linear table's or Mach's cascade).
    #[inline(always)]
    pub(crate) fn walks(&mut self, depth: u64, n: u64) {
        self.walks.by_depth[depth.min(3) as usize] += n;
        self.walks.count += n;
    }
}

/// Execution time of an in-order core (`docs/caches.md`): `cycles` is the sum of the eight parts
/// (base, icache, dcache, translation, faults, remap, kernel, shootdown).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TimeStats {
    /// Instructions: the trace's instruction fetches.
    pub instructions: u64,
    /// Total cycles.
    pub cycles: u64,
    /// Instructions x base CPI.
    pub base: u64,
    /// Instruction fetches' cycles beyond a level-1 cache hit.
    pub icache: u64,
    /// Data references' cycles beyond a level-1 cache hit.
    pub dcache: u64,
    /// Translation: TLB lookups beyond level 1, walker or trap cycles, walk references through
    /// the caches and memory.
    pub translation: u64,
    /// Page faults.
    pub faults: u64,
    /// The OS making and tearing down shadow superpages (flushes, copies, per-page work).
    pub remap: u64,
    /// Kernel time: the cycles of `[os]`'s per-event costs (`kernel.cycles`).
    pub kernel: u64,
    /// TLB shootdowns of several cores (`cycles.shootdown`); 0 with one core.
    pub shootdown: u64,
}

impl TimeStats {
    /// The cycles in seconds at a clock of `clock_mhz` MHz.
    pub fn seconds(&self, clock_mhz: f64) -> f64 {
        self.cycles as f64 / (clock_mhz * 1e6)
    }

    /// Share of the cycles spent translating (0 for no cycles).
    pub fn translation_share(&self) -> f64 {
        if self.cycles == 0 {
            0.0
        } else {
            self.translation as f64 / self.cycles as f64
        }
    }
}
