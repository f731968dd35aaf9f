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
}

impl Cycles {
    /// Sum of all causes.
    pub fn total(&self) -> u64 {
        crate::limits::sum([self.tlb, self.walk_memory, self.refill_overhead, self.page_fault])
    }
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
    /// Demand-paging faults.
    pub page_faults: u64,
    /// Walks.
    pub walks: WalkStats,
    /// Cycles.
    pub cycles: Cycles,
    /// Events.
    pub events: EventStats,
    /// The OS model's counters (reservations, promotions, demotions, ...).
    pub os: crate::os::OsStats,
    /// Per cache level, in config order (empty without `[[cache]]`).
    pub caches: Vec<crate::cache::CacheStats>,
    /// Memory behind the caches.
    pub memory: crate::cache::MemoryStats,
    /// The timing model's result, for designs with caches, `[memory]` or `[time]`.
    pub time: Option<TimeStats>,
}

/// Execution time of an in-order core (`docs/caches.md`): `cycles` is the sum of the five parts.
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
}

impl TimeStats {
    /// Share of the cycles spent translating (0 for no cycles).
    pub fn translation_share(&self) -> f64 {
        if self.cycles == 0 {
            0.0
        } else {
            self.translation as f64 / self.cycles as f64
        }
    }
}
