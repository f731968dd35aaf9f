//! The cycle model: what TLB lookups, walks, traps and page faults cost.
//!
//! Every constant is a config key of `[cost]` (or `latency` of a `[[tlb]]`), documented in
//! `docs/configuration.md`. Total translation cycles ([`cycles`], a function of a design's
//! statistics and its [`CostParams`] only) are
//!
//! ```text
//!   Σ_tlb accesses(tlb) × latency(tlb)
//! + Σ_walk memory references × memory_cycles          (or each reference through [cost.cache];
//!                                                      a timed design: their cycles through its
//!                                                      caches and memory)
//! + refill overhead, by RefillCost:
//!     walks × walker_cycles                            (hardware refill)
//!     (walks + nested misses) × trap_cycles            (software refill: every miss traps)
//!     walks × walker_cycles + VHPT misses × trap_cycles (a VHPT walked by the hardware walker)
//!     the personality's handler and PTLB cycles        (Mach 3.0, bala94 Tables 1 and 5)
//!   + STLB hits × hit_cycles + STLB misses × miss_cycles
//!   + RID purges × purge_cycles + key misses × key_fault_cycles + PKR reloads × pkr_reload_cycles
//! + page faults × page_fault_cycles                   (the translation model's demand paging)
//! + shootdown initiator cycles + target cycles         (several cores only: docs/multicore.md)
//! ```
//!
//! Kernel cycles ([`kernel`]: `kernel.cycles`, reported for every design, timed or not) are the
//! `[os]` section's per-event costs times the events counted:
//!
//! ```text
//!   syscalls × syscall_cycles + context switches × switch_cycles
//! + minor faults × minor_fault_cycles + major faults × major_fault_cycles
//! + (flush-on-switch flushes + RID purges) × flush_cycles + IPC messages × ipc_cycles
//! ```
//!
//! A fault is charged either as translation (`cost.page_fault_cycles`) or as kernel time
//! (`os.minor_fault_cycles`, `os.major_fault_cycles`), and a RID purge either as translation
//! (`itanium.purge_cycles`) or as kernel time (`os.flush_cycles`): validation refuses a design
//! that sets both of a pair, so nothing is counted twice.
//!
//! A timed design's execution time ([`time`]) adds the core's base cycles and cache stalls to the
//! translation cycles that do not overlap the instruction (TLB levels beyond the first), the
//! page-fault cycles, the shadow-superpage remapping cycles, the kernel cycles and the
//! shootdown cycles.
//!
//! A `[[tlb]]`'s `latency` defaults to 0: a first-level hit, which the pipeline overlaps, costs
//! nothing in any design unless the design says otherwise. A design whose first-level structures
//! have a latency charges hit latency: [`hit_latency_cycles`] is that part of the `tlb` term, and
//! the report marks it in the design's column.

use crate::addr::{PageSize, Vpn};
use crate::limits::{sum, times};
use crate::pt::ParamError;
use crate::tlb::{Geometry, Policy, Tlb, TlbData};
use serde::Deserialize;

/// Who refills the TLB on a miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Refill {
    /// A hardware walker: `walker_cycles` per walk plus its memory references.
    #[default]
    Hardware,
    /// A software handler: every miss (and every nested miss) traps, `trap_cycles` each.
    Software,
}

/// `[cost]` section of a config.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// Hardware or software refill.
    pub refill: Refill,
    /// Software refill: cycles per trap (entry, handler instructions, return), per miss and per
    /// nested miss. Default 20 (bala94: the R3000 L1U handler is 9 instructions + one load).
    pub trap_cycles: u64,
    /// Hardware refill: fixed cycles per walk besides its memory references. Default 0.
    pub walker_cycles: u64,
    /// Cycles of one walk memory reference when there is no `[cost.cache]`. Default 100.
    pub memory_cycles: u64,
    /// Cycles per page fault (demand paging). Default 0: translation cost only.
    pub page_fault_cycles: u64,
    /// Optional data cache that walk references go through.
    pub cache: Option<CacheConfig>,
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            refill: Refill::Hardware,
            trap_cycles: 20,
            walker_cycles: 0,
            memory_cycles: 100,
            page_fault_cycles: 0,
            cache: None,
        }
    }
}

/// `[cost.cache]`: a set-associative LRU cache of page-table data.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Capacity in bytes (default 32 KiB).
    pub size_bytes: u64,
    /// Associativity (default 8).
    pub ways: u32,
    /// Line size in bytes (default 64).
    pub line_bytes: u64,
    /// Cycles of a hit (default 4).
    pub hit_cycles: u64,
    /// Cycles of a miss (default 100).
    pub miss_cycles: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { size_bytes: 32 << 10, ways: 8, line_bytes: 64, hit_cycles: 4, miss_cycles: 100 }
    }
}

/// A cache model of page-table data, built on the TLB structure (lines play pages).
#[derive(Clone, Debug)]
pub struct PtCache {
    lines: Tlb,
    line_shift: u32,
    /// Cycles of a hit.
    pub hit_cycles: u64,
    /// Cycles of a miss.
    pub miss_cycles: u64,
}

impl PtCache {
    /// Builds the cache; errors name the `cost.cache.*` key.
    pub fn new(c: &CacheConfig) -> Result<PtCache, ParamError> {
        if !c.line_bytes.is_power_of_two() {
            return Err(ParamError::new(
                "cost.cache.line_bytes",
                format!("must be a power of two, got {}", c.line_bytes),
            ));
        }
        let lines = c.size_bytes / c.line_bytes;
        if lines == 0 || lines > crate::limits::MAX_CACHE_LINES {
            return Err(ParamError::new(
                "cost.cache.size_bytes",
                format!("must hold from 1 to 2^24 lines of {} bytes, got {} bytes", c.line_bytes, c.size_bytes),
            ));
        }
        let geometry = Geometry { entries: lines as u32, ways: c.ways, policy: Policy::Lru, seed: 0 };
        let tlb = Tlb::new(geometry, PageSize::from_bytes(c.line_bytes).expect("power of two"))
            .map_err(|e| ParamError::new("cost.cache.ways", e.to_string()))?;
        Ok(PtCache {
            lines: tlb,
            line_shift: c.line_bytes.trailing_zeros(),
            hit_cycles: c.hit_cycles,
            miss_cycles: c.miss_cycles,
        })
    }

    /// Accesses physical address `pa`; returns true on a hit.
    #[inline]
    pub fn access(&mut self, pa: u64) -> bool {
        let line = Vpn(pa >> self.line_shift);
        if self.lines.lookup(crate::addr::Asid(0), line).is_some() {
            return true;
        }
        self.lines.insert(0, line, TlbData::default());
        false
    }
}

/// Who pays for a TLB refill besides its memory references: the term `refill_overhead` of the
/// cycle model, chosen once per design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefillCost {
    /// A hardware walker: `walker_cycles` per walk.
    Walker,
    /// A software handler: `trap_cycles` per walk and per nested miss.
    Traps,
    /// A VHPT walked by the hardware walker: `walker_cycles` per walk, and `trap_cycles` per
    /// walk it cannot finish (a long-VHPT miss, a short-VHPT translation fault).
    VhptWalker,
    /// The OS personality's handlers count their own cycles (Mach 3.0: bala94 Tables 1 and 5,
    /// and the PTLB's probes); their loads are part of those costs.
    Handlers,
}

/// Everything the cycle model needs of a design besides its statistics: the `[cost]` section,
/// each TLB structure's latency, and the costs of the optional parts. Built once, with the
/// design ([`crate::engine::Design`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CostParams {
    /// `[cost]`.
    pub cost: CostConfig,
    /// Per TLB structure, in stats order: cycles per lookup, and whether the lookup adds time
    /// to a timed design (levels beyond the first, which is pipelined with the instruction).
    pub tlb_latency: Vec<(u64, bool)>,
    /// What a refill costs besides its references.
    pub refill: RefillCost,
    /// The software TLB's cycles per hit and per miss (`[stlb]`, outside Mach's handlers).
    pub stlb: Option<(u64, u64)>,
    /// Itanium's cycles per RID purge, protection-key miss fault and PKR reload.
    pub itanium: Option<[u64; 3]>,
    /// Timed designs: the base CPI of `[time]`.
    pub cpi: Option<f64>,
    /// Timed designs with `[time] clock_mhz`: the clock in MHz.
    pub clock_mhz: Option<f64>,
    /// `[os]`'s kernel cycles per event.
    pub kernel: KernelCosts,
}

/// `[os]`'s kernel cycles per event (all 0: no kernel time).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelCosts {
    /// Per system call.
    pub syscall: u64,
    /// Per context switch.
    pub switch: u64,
    /// Per minor page fault.
    pub minor_fault: u64,
    /// Per major page fault.
    pub major_fault: u64,
    /// Per full TLB flush or RID purge.
    pub flush: u64,
    /// Per IPC message.
    pub ipc: u64,
}

impl KernelCosts {
    /// The costs of an `[os]` section.
    pub fn of(os: &crate::os::OsConfig) -> KernelCosts {
        KernelCosts {
            syscall: os.syscall_cycles,
            switch: os.switch_cycles,
            minor_fault: os.minor_fault_cycles,
            major_fault: os.major_fault_cycles,
            flush: os.flush_cycles,
            ipc: os.ipc_cycles,
        }
    }
}

/// The kernel's events and their cycles (the second formula at the top of this module), from a
/// design's statistics and its [`CostParams`]; the footprint's TLB counts are what the engine
/// counted.
pub fn kernel(s: &crate::stats::SystemStats, p: &CostParams) -> crate::stats::KernelStats {
    let k = &p.kernel;
    let e = &s.events;
    // Copy-on-write faults (`os.cow_copies`) are minor faults of the kernel's too.
    let faults = s.page_faults.saturating_add(s.os.cow_copies);
    let major = s.major_faults.min(faults);
    let mut out = crate::stats::KernelStats {
        syscalls: e.syscalls,
        switches: e.context_switches,
        faults,
        minor_faults: faults - major,
        major_faults: major,
        flushes: e.flushes.saturating_add(s.rids.map_or(0, |r| r.purges)),
        ipcs: e.ipcs,
        tlb_lookups: s.kernel.tlb_lookups,
        tlb_misses: s.kernel.tlb_misses,
        cycles: 0,
    };
    out.cycles = sum([
        times(out.syscalls, k.syscall),
        times(out.switches, k.switch),
        times(out.minor_faults, k.minor_fault),
        times(out.major_faults, k.major_fault),
        times(out.flushes, k.flush),
        times(out.ipcs, k.ipc),
    ]);
    out
}

/// Translation cycles by cause, from a design's statistics (the formula at the top of this
/// module): a function of the counters and [`CostParams`] only.
pub fn cycles(s: &crate::stats::SystemStats, p: &CostParams) -> crate::stats::Cycles {
    let (w, cost) = (&s.walks, &p.cost);
    let tlb = sum(p.tlb_latency.iter().zip(&s.tlb).map(|(&(latency, _), t)| times(t.accesses, latency)));
    let walk_memory = match (p.cpi.is_some(), p.refill, &cost.cache) {
        // A timed design's walk references went through its caches and memory.
        (true, _, _) => s.timing.walk_cycles,
        (false, RefillCost::Handlers, _) => 0,
        (false, _, Some(c)) => sum([times(w.cache_hits, c.hit_cycles), times(w.cache_misses, c.miss_cycles)]),
        (false, _, None) => times(w.memory_refs, cost.memory_cycles),
    };
    let refill = match p.refill {
        RefillCost::Handlers => s.mach.map_or(0, |m| sum([m.miss_cycles, m.ptlb_cycles, m.stlb_overhead_cycles])),
        RefillCost::VhptWalker => {
            let traps = s.vhpt.map_or(0, |v| v.misses);
            sum([times(w.count, cost.walker_cycles), times(traps, cost.trap_cycles)])
        }
        RefillCost::Traps => times(w.count + w.nested_misses, cost.trap_cycles),
        RefillCost::Walker => times(w.count, cost.walker_cycles),
    };
    let stlb = match (p.stlb, s.stlb) {
        (Some((hit, miss)), Some(c)) => sum([times(c.hits, hit), times(c.lookups - c.hits, miss)]),
        _ => 0,
    };
    let itanium = p.itanium.map_or(0, |[purge, key_fault, reload]| {
        let (r, k) = (s.rids.unwrap_or_default(), s.keys.unwrap_or_default());
        sum([times(r.purges, purge), times(k.misses, key_fault), times(k.reloads, reload)])
    });
    crate::stats::Cycles {
        tlb,
        walk_memory,
        refill_overhead: sum([refill, itanium, stlb]),
        page_fault: times(s.page_faults, cost.page_fault_cycles),
        shootdown: s.shootdowns.map_or(0, |d| sum([d.initiator_cycles, d.target_cycles])),
    }
}

/// The part of the `tlb` term of [`cycles`] that first-level lookups make (the structures the
/// pipeline overlaps, whose hits cost nothing by default): Σ accesses × latency over them. Not 0
/// only for a design that charges hit latency.
pub fn hit_latency_cycles(s: &crate::stats::SystemStats, p: &CostParams) -> u64 {
    sum(p.tlb_latency.iter().zip(&s.tlb).filter(|(l, _)| !l.1).map(|(&(latency, _), t)| times(t.accesses, latency)))
}

/// The execution time of a timed design's in-order core (`docs/caches.md`), from its
/// statistics (their `kernel` made by [`kernel`] first) and the translation cycles [`cycles`]
/// made of them; `None` for an untimed design.
pub fn time(
    s: &crate::stats::SystemStats,
    c: &crate::stats::Cycles,
    p: &CostParams,
) -> Option<crate::stats::TimeStats> {
    let cpi = p.cpi?;
    let beyond_l1 =
        sum(p.tlb_latency.iter().zip(&s.tlb).filter(|(l, _)| l.1).map(|(&(latency, _), t)| times(t.accesses, latency)));
    let k = &s.timing;
    let mut t = crate::stats::TimeStats {
        instructions: k.instructions,
        base: (k.instructions as f64 * cpi).round() as u64,
        icache: k.stall[0],
        dcache: k.stall[1],
        translation: sum([beyond_l1, c.walk_memory, c.refill_overhead]),
        faults: c.page_fault,
        remap: s.shadow.map_or(0, |s| s.cycles()),
        kernel: s.kernel.cycles,
        shootdown: c.shootdown,
        cycles: 0,
    };
    t.cycles = sum([t.base, t.icache, t.dcache, t.translation, t.faults, t.remap, t.kernel, t.shootdown]);
    Some(t)
}

/// The `overlap` core's data-cache misses (`[time] core = "overlap"`, docs/caches.md): a simple
/// interval model of non-blocking loads on a stall-on-use core.
///
/// A *miss* is a data line reference that costs more than a level-1 hit; its *stall* is that
/// excess (what the blocking core charges). Misses form groups in trace order: a miss joins the
/// open group if the group holds fewer than `mshrs` misses and the miss's instruction lies fewer
/// than `window` instructions after the instruction of the group's first miss; otherwise it
/// opens a new group. A group costs the stall of its longest miss, so a miss that joins adds
/// only what it exceeds the group's longest so far by. With `mshrs = 1` every miss is a group:
/// the blocking core's charge.
///
/// Three words of state, O(1) per miss, nothing per hit; built once per design.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Overlap {
    mshrs: u32,
    window: u64,
    /// The open group: its first miss's instruction, its misses (0: none open), its longest
    /// stall.
    first: u64,
    count: u32,
    longest: u64,
}

impl Overlap {
    /// A core with `mshrs` outstanding misses and a window of `window` instructions (both at
    /// least 1, validated with the config).
    pub fn new(mshrs: u32, window: u64) -> Overlap {
        Overlap { mshrs: mshrs.max(1), window: window.max(1), first: 0, count: 0, longest: 0 }
    }

    /// A miss of `stall` cycles (> 0) by instruction number `at` (non-decreasing): the cycles
    /// it adds to the core's time.
    #[inline]
    pub fn miss(&mut self, at: u64, stall: u64) -> u64 {
        if self.count != 0 && self.count < self.mshrs && at.wrapping_sub(self.first) < self.window {
            self.count += 1;
            let added = stall.saturating_sub(self.longest);
            self.longest = self.longest.max(stall);
            return added;
        }
        (self.first, self.count, self.longest) = (at, 1, stall);
        stall
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{StlbStats, SystemStats, TlbStats};

    /// Two structures (a level-1 of latency 1, a level-2 of latency 7), hardware refill.
    fn params(refill: RefillCost) -> CostParams {
        CostParams {
            cost: CostConfig {
                walker_cycles: 5,
                trap_cycles: 20,
                memory_cycles: 100,
                page_fault_cycles: 1000,
                ..CostConfig::default()
            },
            tlb_latency: vec![(1, false), (7, true)],
            refill,
            stlb: None,
            itanium: None,
            cpi: None,
            clock_mhz: None,
            kernel: KernelCosts::default(),
        }
    }

    fn stats() -> SystemStats {
        let mut s = SystemStats {
            tlb: vec![
                TlbStats { accesses: 1000, misses: 40, ..TlbStats::default() },
                TlbStats { accesses: 40, misses: 10, ..TlbStats::default() },
            ],
            page_faults: 3,
            ..SystemStats::default()
        };
        s.walks.count = 10;
        s.walks.memory_refs = 37;
        s.walks.nested_misses = 4;
        s
    }

    #[test]
    fn each_refill_model_is_its_formula() {
        let s = stats();
        // Σ accesses × latency = 1000 × 1 + 40 × 7; 37 references × 100; 3 faults × 1000.
        let (tlb, memory, faults) = (1280, 3700, 3000);
        let walker = cycles(&s, &params(RefillCost::Walker));
        assert_eq!(
            walker,
            crate::stats::Cycles {
                tlb,
                walk_memory: memory,
                refill_overhead: 10 * 5,
                page_fault: faults,
                shootdown: 0
            }
        );
        assert_eq!(walker.total(), 1280 + 3700 + 50 + 3000);
        // Of the tlb term, the level-1 structure's 1000 lookups × 1 are hit latency.
        assert_eq!(hit_latency_cycles(&s, &params(RefillCost::Walker)), 1000);
        // Software refill: every walk and every nested miss traps.
        assert_eq!(cycles(&s, &params(RefillCost::Traps)).refill_overhead, (10 + 4) * 20);
        // A VHPT walker: each walk, and a trap for each VHPT miss.
        let mut v = s.clone();
        v.vhpt = Some(crate::pt::vhpt::VhptStats { lookups: 10, hits: 7, misses: 3, ..Default::default() });
        assert_eq!(cycles(&v, &params(RefillCost::VhptWalker)).refill_overhead, 10 * 5 + 3 * 20);
        // Handlers count their own cycles, loads included: no walk memory term.
        let mut m = s.clone();
        m.mach = Some(crate::os::mach3::Mach3Stats { miss_cycles: 900, ptlb_cycles: 11, ..Default::default() });
        let h = cycles(&m, &params(RefillCost::Handlers));
        assert_eq!((h.walk_memory, h.refill_overhead), (0, 911));
    }

    #[test]
    fn shootdown_cycles_count_in_the_total_and_in_time() {
        let mut s = stats();
        let p = params(RefillCost::Walker);
        let before = cycles(&s, &p);
        assert_eq!(before.shootdown, 0, "no cores, no shootdown cycles");
        s.shootdowns =
            Some(crate::stats::ShootdownStats { initiator_cycles: 700, target_cycles: 45, ..Default::default() });
        let c = cycles(&s, &p);
        // 700 cycles of the initiators and 45 of the targets, on top of the same other terms.
        assert_eq!(c.shootdown, 745);
        assert_eq!(c.total(), before.total() + 745);
        let mut timed = p.clone();
        timed.cpi = Some(1.0);
        let t = time(&s, &c, &timed).unwrap();
        assert_eq!(t.shootdown, 745);
        let t0 = time(&s, &before, &timed).unwrap();
        assert_eq!(t.cycles, t0.cycles + 745);
    }

    #[test]
    fn optional_parts_add_their_terms() {
        let mut s = stats();
        s.stlb = Some(StlbStats { lookups: 8, hits: 6 });
        s.rids = Some(crate::os::regions::RidStats { purges: 2, ..Default::default() });
        s.keys = Some(crate::os::keys::KeyStats { misses: 5, reloads: 4, ..Default::default() });
        let mut p = params(RefillCost::Walker);
        p.stlb = Some((3, 30));
        p.itanium = Some([1000, 50, 9]);
        // 10 walks × 5, STLB 6 × 3 + 2 × 30, purges 2 × 1000, key faults 5 × 50, reloads 4 × 9.
        assert_eq!(cycles(&s, &p).refill_overhead, 50 + 18 + 60 + 2000 + 250 + 36);
        // A page-table cache charges its hits and misses instead of memory_cycles.
        let mut c = s.clone();
        (c.walks.cache_hits, c.walks.cache_misses) = (30, 7);
        let mut pc = params(RefillCost::Walker);
        pc.cost.cache = Some(CacheConfig { hit_cycles: 4, miss_cycles: 100, ..CacheConfig::default() });
        assert_eq!(cycles(&c, &pc).walk_memory, 30 * 4 + 7 * 100);
    }

    #[test]
    fn a_timed_core_adds_base_stalls_and_translation_beyond_level_1() {
        let mut s = stats();
        s.timing.instructions = 500;
        s.timing.stall = [120, 340];
        s.timing.walk_cycles = 77;
        let mut p = params(RefillCost::Walker);
        p.cpi = Some(1.5);
        let c = cycles(&s, &p);
        // A timed design's walks cost what they took through its caches.
        assert_eq!(c.walk_memory, 77);
        let t = time(&s, &c, &p).expect("timed");
        // Level-2 lookups (40 × 7) add time; level 1 is pipelined.
        assert_eq!(t.translation, 40 * 7 + 77 + 50);
        assert_eq!((t.base, t.icache, t.dcache, t.faults), (750, 120, 340, 3000));
        assert_eq!(t.cycles, 750 + 120 + 340 + (280 + 77 + 50) + 3000);
        assert!(time(&s, &c, &params(RefillCost::Walker)).is_none());
    }
}
