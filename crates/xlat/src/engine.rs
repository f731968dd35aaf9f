//! The simulation engine: one [`System`] per configured design, all fed by one pass over a trace.
//!
//! The per-reference path is `System::access` -> `System::translate`: it splits an access into the
//! pages it touches, looks each up in the TLB levels that serve its kind and, on a miss in all of
//! them, walks the page table (`System::miss`, kept out of line). It allocates nothing, logs
//! nothing and calls nothing through a vtable: TLBs are flat arrays, the page table is a closed
//! enum, and readers hand over batches of records.

use crate::addr::{Asid, PageSize, Vpn};
use crate::cache::{Hierarchy, Route};
use crate::config::{AsidMode, Config, Serves, TlbFormat};
use crate::cost::{PtCache, Refill};
use crate::limits::{sum, times};
use crate::os::keys::{KeyStats, Keys};
use crate::os::layout::{Layout, LayoutFull};
use crate::os::regions::Regions;
use crate::os::shadow::{MemOp, Shadow, ShadowPolicy};
use crate::os::{FrameAllocator, Os, OutOfMemory, Paging, PtOp};
use crate::pt::vhpt::{LongVhpt, VhptStats};
use crate::pt::{Kind as PtKind, PageTable, ParamError, PtSize, Pte, WalkEnv, WalkRecord, Walker};
use crate::stats::{SystemStats, TlbStats};
use crate::tlb::{frame_of, Format, Geometry, Tlb, TlbData};
use crate::trace::{Kind, ReaderStats, Record, TraceError, TraceReader};
use feed::Batch;

pub mod contain;
pub(crate) mod feed;
mod jobs;
mod mach3;
mod plain;
mod probe;

/// The address space of global pages (`os.global`): mapped once, shared by every process.
pub const GLOBAL_SPACE: Asid = Asid(u32::MAX - 1);

/// Most TLB levels on one path.
pub const MAX_LEVELS: usize = 4;

/// One TLB structure of a system and what it is for.
#[derive(Clone, Debug)]
pub struct Structure {
    /// Name in reports (reserved partitions are `NAME.reserved`).
    pub name: String,
    /// Level, 1 = closest to the core.
    pub level: u32,
    /// What it serves; `None` for a reserved partition holding page-table translations.
    pub serves: Option<Serves>,
    /// Cycles per lookup.
    pub latency: u64,
    /// Entry format (reserved partitions: single).
    pub format: TlbFormat,
    /// Complete-subblock with subblock prefetch: a miss fills every mapped page of its block.
    pub prefetch: bool,
    /// The TLB itself.
    pub tlb: Tlb,
}

/// The structures one kind of reference goes through, level 1 first.
#[derive(Clone, Copy, Debug, Default)]
struct Path {
    levels: [u8; MAX_LEVELS],
    len: u8,
}

/// A simulated design: TLBs, page table, OS and cost model, with its counters.
#[derive(Clone, Debug)]
pub struct System {
    config: Config,
    page_size: PageSize,
    structures: Vec<Structure>,
    ipath: Path,
    dpath: Path,
    /// Structure that holds page-table translations for linear tables' walks.
    pt_tlb: usize,
    /// VPNs at or above this are outside the page table's virtual address space.
    vpn_limit: u64,
    /// Which build of `Tlb::fa_lru_run` the next batch takes, with its table of recent pages
    /// or without (a speed choice only: both do the same), from what the table cost in the
    /// last batch that took it ([`plain::NEAR_PROBE`]).
    fa_near: bool,
    /// Batches taken without the table since it was last tried.
    fa_since_near: u32,
    /// The build every batch takes, if fixed ([`System::fix_fa_lru_build`]).
    fa_fixed: Option<bool>,
    /// VPN ranges (inclusive) of the `os.global` regions.
    global: Vec<(u64, u64)>,
    pt: PageTable,
    os: Os,
    cache: Option<PtCache>,
    refill: Refill,
    asid_mode: AsidMode,
    asid: Asid,
    rec: WalkRecord,
    /// Lookups by kind: [instruction fetches, data].
    lookups: [u64; 2],
    /// Subblock prefetch on each path [instruction, data]: the block size in base pages of the
    /// complete-subblock structure that prefetches, or 0.
    prefetch: [usize; 2],
    /// Scratch for a prefetching walk's mappings.
    block: Vec<Option<Pte>>,
    /// Page-table operations and TLB shootdowns the OS asked for (buffers reused across faults).
    ops: Vec<PtOp>,
    shootdown: Vec<(Asid, Vpn, Vpn)>,
    /// Memory-side operations of shadow superpages (flushes, the controller's table).
    mem_ops: Vec<MemOp>,
    stats: SystemStats,
    /// The page table's largest size so far, field by field (it shrinks on unmaps and exits).
    pt_peak: PtSize,
    /// Why this design stopped simulating, if it did ([`run`] goes on with the others).
    failure: Option<DesignFailure>,
    /// Caches and memory of a timed design (`Config::timed`); `None`: translation only.
    caches: Option<Box<Hierarchy>>,
    /// Timed designs: instructions (instruction fetches), stall cycles of [instruction fetches,
    /// data references] beyond a level-1 cache hit, and cycles of walk references.
    instructions: u64,
    stall: [u64; 2],
    walk_cycles: u64,
    /// Per kind [instruction fetches, data] of a timed design: the line size (log2) of its
    /// level-1 cache (the page size without one), and that level's hit latency.
    line_shift: [u32; 2],
    l1_latency: [u64; 2],
    /// Where traced mappings land (`[layout]`); `None`: the trace's own addresses.
    layout: Option<Box<Layout>>,
    /// Itanium regions (`[itanium]`); `None`: one address space per process.
    regions: Option<Box<Regions>>,
    /// The address space (TLB tag, page-table key) of each virtual region of the running
    /// process, by the top three address bits: all the process's ASID without regions.
    tags: [u32; 8],
    /// VPN shift that leaves the region number (61 - page shift).
    vrn_shift: u32,
    /// Scratch: laid-out ranges a map or unmap removed.
    unmapped: Vec<(u64, u64)>,
    /// Protection keys (`[itanium] protection_keys`).
    keys: Option<Box<Keys>>,
    /// The object a `Record::Object` named for the next map.
    pending_object: Option<u32>,
    /// The software TLB (`[stlb]`) and its lookups and hits.
    stlb: Option<Box<Tlb>>,
    stlb_counts: [u64; 2],
    /// A layout or protection keys: references take `System::prepare` first.
    extras: bool,
    /// The long-format VHPT in front of the OS table (`vhpt-long`).
    vhpt: Option<Box<LongVhpt>>,
    /// VHPT designs: the hardware walker is enabled.
    hw_walker: bool,
    /// Short VHPT with the hardware walker: walks that took a VHPT translation fault (a nested
    /// miss the walker hands to software).
    vhpt_faults: u64,
    /// The Mach 3.0 personality (`os.personality = "mach3"`).
    mach: Option<Box<crate::os::mach3::Mach3>>,
    /// Mach: the kernel is running (its references to user memory take kernel-mode paths).
    in_kernel: bool,
    /// The design takes the plain loop (`engine/plain.rs`).
    plain: bool,
}

/// Why one design of a run stopped before the end of the trace, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesignFailure {
    /// What went wrong.
    pub error: DesignError,
    /// 1-based number of the access record (reference) that failed.
    pub reference: u64,
    /// 1-based number of the record (accesses and events) that failed.
    pub record: u64,
}

/// A simulation that cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// One design could not simulate the trace.
    #[error(transparent)]
    Design(#[from] DesignError),
}

/// Why one design cannot go on with a trace (the others may).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DesignError {
    /// No region ID is left for a new process.
    #[error("config '{config}': {error}")]
    Rids {
        /// Which system.
        config: String,
        /// Details.
        error: crate::os::regions::RidsExhausted,
    },
    /// The Mach personality has no room for another task.
    #[error("config '{config}': {error}")]
    Mach {
        /// Which system.
        config: String,
        /// Details.
        error: crate::os::mach3::TooManyTasks,
    },
    /// The layout has no room for a mapping.
    #[error("config '{config}': {error}")]
    Layout {
        /// Which system.
        config: String,
        /// Details.
        error: LayoutFull,
    },
    /// An address beyond the virtual address space the page table translates.
    #[error("config '{config}': address {addr:#x} lies outside the {va_bits}-bit virtual address space of its page table ({key})")]
    AddressRange {
        /// Which system.
        config: String,
        /// The address.
        addr: u64,
        /// The configured width.
        va_bits: u32,
        /// The key that sets it (`page_table.va_bits`, or `page_table.os.va_bits` where the OS
        /// table behind a VHPT is the narrower).
        key: &'static str,
    },
    /// A system ran out of physical memory.
    #[error("config '{config}': {error}")]
    OutOfMemory {
        /// Which system.
        config: String,
        /// Details.
        error: OutOfMemory,
    },
    /// A bug in xlat: the design's simulation panicked somewhere in records `first..=last`.
    #[error("config '{config}': internal error (a bug in xlat) in records {first} to {last}: {message}")]
    Internal {
        /// Which system.
        config: String,
        /// The panic's message and place.
        message: String,
        /// 1-based numbers of the first and last record of the batch it panicked in.
        first: u64,
        /// See `first`.
        last: u64,
    },
}

impl System {
    /// Builds a system from a validated config.
    pub fn new(config: &Config) -> Result<System, ParamError> {
        config.validate()?;
        let page_size = PageSize::from_bytes(config.page_size).expect("validated");
        let mut structures = Vec::new();
        for (i, t) in config.tlb.iter().enumerate() {
            let main = t.entries - t.reserved;
            let geometry = Geometry { entries: main, ways: t.ways.unwrap_or(main), policy: t.policy, seed: t.seed };
            let format = match t.format {
                TlbFormat::Single => Format::Single,
                TlbFormat::Superpage => Format::Superpage,
                TlbFormat::PartialSubblock => Format::PartialSubblock { block_pages: t.subblock_factor },
                TlbFormat::CompleteSubblock => Format::CompleteSubblock { block_pages: t.subblock_factor },
            };
            let tlb = Tlb::with_format(geometry, page_size, format)
                .map_err(|e| ParamError::new(format!("tlb[{i}].ways"), e.to_string()))?;
            structures.push(Structure {
                name: t.name.clone(),
                level: t.level,
                serves: Some(t.serves),
                latency: t.latency,
                format: t.format,
                prefetch: t.prefetch,
                tlb,
            });
        }
        let path_for = |wants: Serves, structures: &[Structure]| {
            let mut idx: Vec<usize> = (0..structures.len())
                .filter(|&i| matches!(structures[i].serves, Some(s) if s == Serves::Unified || s == wants))
                .collect();
            idx.sort_by_key(|&i| structures[i].level);
            idx
        };
        let ipath_v = path_for(Serves::Instruction, &structures);
        let dpath_v = path_for(Serves::Data, &structures);
        let to_path = |v: &[usize]| {
            let mut p = Path::default();
            for (k, &i) in v.iter().enumerate() {
                p.levels[k] = i as u8;
            }
            p.len = v.len() as u8;
            p
        };
        // Page-table translations live in the reserved partition of the last data level if it
        // has one, else they compete in that level's main entries.
        let last_d = *dpath_v.last().expect("validated: a level-1 data TLB exists");
        let t = &config.tlb[last_d];
        let pt_tlb = if t.reserved > 0 {
            let geometry = Geometry { entries: t.reserved, ways: t.reserved, policy: t.reserved_policy, seed: t.seed };
            let tlb = Tlb::new(geometry, page_size)
                .map_err(|e| ParamError::new(format!("tlb[{last_d}].reserved"), e.to_string()))?;
            structures.push(Structure {
                name: format!("{}.reserved", t.name),
                level: t.level,
                serves: None,
                latency: 0,
                format: TlbFormat::Single,
                prefetch: false,
                tlb,
            });
            structures.len() - 1
        } else {
            last_d
        };
        // Other levels' reserved entries only shrink their main partitions.
        let pt = PageTable::new(&config.page_table, page_size)?;
        let frames = config.os.memory_bytes / config.page_size;
        let mut os = Os::with_paging(
            FrameAllocator::new(config.os.frame_allocator, frames, config.os.seed, config.os.fragmentation),
            Paging::new(&config.os, page_size)?,
        );
        // A path prefetches subblocks if one of its complete-subblock structures does.
        let prefetch_of = |v: &[usize]| {
            v.iter()
                .filter(|&&i| i < config.tlb.len() && config.tlb[i].prefetch)
                .map(|&i| config.tlb[i].subblock_factor as usize)
                .max()
                .unwrap_or(0)
        };
        let prefetch = [prefetch_of(&ipath_v), prefetch_of(&dpath_v)];
        let cache = config.cost.cache.as_ref().map(PtCache::new).transpose()?;
        let caches = if config.timed() {
            let memory = config.memory.clone().unwrap_or_default();
            let mut h = Hierarchy::new(&config.cache, &memory)?;
            if let Some(m) = &config.mtlb {
                // Validated with the config: DRAM, the shadow range and the table fit.
                let (dram, bits) = (memory.dram_bytes.expect("validated"), memory.pa_bits.expect("validated"));
                h.set_mtlb(crate::mtlb::Mtlb::new(m, dram, bits, page_size.bytes())?);
            }
            Some(Box::new(h))
        } else {
            None
        };
        if config.os.shadow_superpages != ShadowPolicy::None {
            let range = caches.as_ref().and_then(|h| h.mtlb()).map(|m| {
                let (b, n) = m.shadow_frames();
                (b << page_size.shift(), (b + n) << page_size.shift())
            });
            os.set_shadow(Shadow::new(config.os.shadow_superpages, &config.shadow, page_size.bytes(), range)?);
        }
        let n = structures.len();
        let layout =
            Layout::new(&config.layout, config.itanium.as_ref().is_some_and(|i| i.shared_region)).map(Box::new);
        let mut regions = config.itanium.as_ref().map(|i| Box::new(Regions::new(i)));
        let tags = match &mut regions {
            Some(r) => r.spaces(0, None, &mut false).map_err(|e| ParamError::new("itanium.rid_bits", e.to_string()))?,
            None => [0; 8],
        };
        let vhpt = (config.page_table.kind == PtKind::VhptLong).then(|| {
            let n = match config.page_table.vhpt_entries {
                0 => (4 * frames).max(1).next_power_of_two(),
                n => n,
            };
            Box::new(LongVhpt::new(n, config.page_table.hash))
        });
        let keys =
            config.itanium.as_ref().filter(|i| i.protection_keys).map(|i| Box::new(Keys::new(i.pkrs, i.pkr_policy)));
        let stlb = match &config.stlb {
            None => None,
            Some(c) => {
                let g = Geometry { entries: c.entries, ways: c.ways, policy: crate::tlb::Policy::Lru, seed: 1 };
                Some(Box::new(Tlb::new(g, page_size).map_err(|e| ParamError::new("stlb.entries", e.to_string()))?))
            }
        };
        let mach = match config.os.personality {
            crate::os::mach3::Personality::Linux => None,
            crate::os::mach3::Personality::Mach3 => {
                // The machine's shape and the cost model's caches were checked with the config.
                let kernel_phys = config.os.memory_bytes.div_ceil(4096) * 4096;
                Some(Box::new(crate::os::mach3::Mach3::new(
                    &config.mach3,
                    config.ptlb.as_ref(),
                    config.stlb.is_some(),
                    kernel_phys,
                )?))
            }
        };
        let mut system = System {
            plain: false,
            mach,
            in_kernel: false,
            stlb,
            stlb_counts: [0; 2],
            pending_object: None,
            extras: layout.is_some() || keys.is_some(),
            keys,
            vhpt,
            hw_walker: config.page_table.walker == Walker::Hardware,
            vhpt_faults: 0,
            layout,
            regions,
            tags,
            vrn_shift: 61 - page_size.shift().min(61),
            unmapped: Vec::new(),
            config: config.clone(),
            page_size,
            structures,
            ipath: to_path(&ipath_v),
            dpath: to_path(&dpath_v),
            pt_tlb,
            global: config
                .os
                .global_ranges()?
                .into_iter()
                .map(|(lo, hi)| (lo >> page_size.shift(), hi >> page_size.shift()))
                .collect(),
            fa_near: true,
            fa_since_near: 0,
            fa_fixed: None,
            vpn_limit: {
                let (va_bits, _) = config.page_table.translated_va_bits();
                if va_bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << va_bits) >> page_size.shift()
                }
            },
            pt,
            os,
            cache,
            refill: config.cost.refill,
            asid_mode: config.asid,
            asid: Asid(0),
            rec: WalkRecord::default(),
            lookups: [0; 2],
            prefetch,
            block: vec![None; prefetch[0].max(prefetch[1])],
            ops: Vec::new(),
            shootdown: Vec::new(),
            mem_ops: Vec::new(),
            stats: SystemStats { tlb: vec![TlbStats::default(); n], ..SystemStats::default() },
            pt_peak: PtSize::default(),
            failure: None,
            line_shift: [Route::Instruction, Route::Data]
                .map(|r| caches.as_ref().and_then(|h| h.first_line_shift(r)).unwrap_or(page_size.shift())),
            l1_latency: [Route::Instruction, Route::Data].map(|r| caches.as_ref().map_or(0, |h| h.first_latency(r))),
            caches,
            instructions: 0,
            stall: [0; 2],
            walk_cycles: 0,
        };
        system.plain = system.is_plain();
        system.rec.keep_addrs = !system.plain;
        Ok(system)
    }

    /// True if this design takes the batches' page words at pages of `2^shift` bytes (and
    /// only the records whose word is [`crate::trace::SLOW_WORD`]): [`System::process_plain_words`].
    pub(crate) fn reads_words(&self, shift: u32) -> bool {
        self.plain && self.page_size.shift() == shift
    }

    /// True if this design takes the loop of plain designs (`engine/plain.rs`).
    pub fn is_plain_loop(&self) -> bool {
        self.plain
    }

    /// Makes this design take the general loop even if it is plain (tests compare the two).
    #[doc(hidden)]
    pub fn use_general_loop(&mut self) {
        self.plain = false;
        self.rec.keep_addrs = true;
    }

    /// Makes every batch of a plain design with a fully associative LRU TLB take the build of
    /// its loop with the table of recent pages (`true`) or the one without, rather than the
    /// faster as measured (tests compare the two).
    #[doc(hidden)]
    pub fn fix_fa_lru_build(&mut self, near: bool) {
        self.fa_fixed = Some(near);
    }

    /// The config this system was built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Base page size.
    pub fn page_size(&self) -> PageSize {
        self.page_size
    }

    /// The TLB structures, in stats order.
    pub fn structures(&self) -> &[Structure] {
        &self.structures
    }

    /// The page table.
    pub fn page_table(&self) -> &PageTable {
        &self.pt
    }

    /// The page table, for walks outside a run (snapshot studies).
    pub fn page_table_mut(&mut self) -> &mut PageTable {
        &mut self.pt
    }

    /// The caches and memory of a timed design.
    pub fn caches(&self) -> Option<&Hierarchy> {
        self.caches.as_deref()
    }

    /// The caches and memory of a timed design, to record what reaches DRAM (checks).
    pub fn caches_mut(&mut self) -> Option<&mut Hierarchy> {
        self.caches.as_deref_mut()
    }

    /// A reference the OS model makes on the program's behalf (a refill handler's instruction
    /// fetch or load, a software-TLB probe) at physical address `pa` in unmapped kernel memory:
    /// it goes through the caches of its kind (data references through the walk route, whose
    /// levels a walker reads) and its cycles join the translation time. Returns those cycles;
    /// 0 in a design without caches, memory or time.
    pub fn kernel_access(&mut self, kind: Kind, pa: u64) -> u64 {
        let Some(h) = self.caches.as_mut() else {
            return 0;
        };
        let route = if kind.is_data() { Route::Walk } else { Route::Instruction };
        let mut cycles = 0;
        if kind != Kind::Store {
            cycles += h.access(route, false, pa, pa, 0);
        }
        if matches!(kind, Kind::Store | Kind::Modify) {
            cycles += h.access(route, true, pa, pa, 0);
        }
        self.walk_cycles = self.walk_cycles.saturating_add(cycles);
        cycles
    }

    /// The OS model.
    pub fn os(&self) -> &Os {
        &self.os
    }

    /// The page table's peak size so far: each field's maximum over the run. A page table
    /// shrinks when processes unmap memory or exit, so at the end of a traced program it is
    /// usually empty; [`PageTable::size`] is the size now.
    pub fn page_table_peak(&self) -> PtSize {
        let now = self.pt.size();
        PtSize {
            table_bytes: self.pt_peak.table_bytes.max(now.table_bytes),
            bucket_bytes: self.pt_peak.bucket_bytes.max(now.bucket_bytes),
            objects: self.pt_peak.objects.max(now.objects),
        }
    }

    /// Why this design stopped before the end of the trace, if it did.
    pub fn failure(&self) -> Option<&DesignFailure> {
        self.failure.as_ref()
    }

    /// Takes the failure out (for callers that turn it into their own error).
    pub fn take_failure(&mut self) -> Option<DesignFailure> {
        self.failure.take()
    }

    /// Counters, with the walk totals and cycles brought up to date.
    pub fn stats(&self) -> SystemStats {
        let mut s = self.stats.clone();
        s.ifetch_lookups = self.lookups[0];
        s.lookups = self.lookups[0] + self.lookups[1];
        s.tlb[self.ipath.levels[0] as usize].accesses += self.lookups[0];
        s.tlb[self.dpath.levels[0] as usize].accesses += self.lookups[1];
        for t in &mut s.tlb {
            t.hits = t.accesses - t.misses;
        }
        let w = &mut s.walks;
        w.memory_refs = self.rec.mem_refs;
        w.cache_lines = self.rec.cache_lines;
        w.nested_misses = self.rec.nested_misses;
        w.pwc_hits = self.rec.pwc_hits;
        let cost = &self.config.cost;
        let c = &mut s.cycles;
        c.tlb = sum(self.structures.iter().zip(&s.tlb).map(|(st, t)| times(t.accesses, st.latency)));
        c.walk_memory = match &self.cache {
            // Mach's handler costs (bala94 Table 1) include their PTE loads.
            _ if self.mach.is_some() => 0,
            Some(cache) => sum([times(w.cache_hits, cache.hit_cycles), times(w.cache_misses, cache.miss_cycles)]),
            None => times(w.memory_refs, cost.memory_cycles),
        };
        if let Some(m) = &self.mach {
            w.nested_misses = m.stats.nested;
        }
        c.refill_overhead = match (self.config.page_table.kind, self.refill) {
            // Mach: each miss type's handler (bala94 Tables 1 and 5), and the PTLB's probes.
            _ if self.mach.is_some() => {
                let m = &self.mach.as_ref().expect("mach3").stats;
                sum([m.miss_cycles, m.ptlb_cycles])
            }
            // VHPT designs: the walker (if enabled) runs on every miss; what it cannot find
            // (a long-VHPT miss, a short-VHPT translation fault) traps to software.
            (PtKind::VhptShort | PtKind::VhptLong, _) if self.hw_walker => {
                let traps = match &self.vhpt {
                    Some(v) => v.stats().misses,
                    None => self.vhpt_faults,
                };
                sum([times(w.count, cost.walker_cycles), times(traps, cost.trap_cycles)])
            }
            (PtKind::VhptShort | PtKind::VhptLong, _) => times(w.count + w.nested_misses, cost.trap_cycles),
            (_, Refill::Hardware) => times(w.count, cost.walker_cycles),
            (_, Refill::Software) => times(w.count + w.nested_misses, cost.trap_cycles),
        };
        let stlb = self.config.stlb.as_ref().filter(|_| self.mach.is_none()).map_or(0, |c| {
            let [lookups, hits] = self.stlb_counts;
            sum([times(hits, c.hit_cycles), times(lookups - hits, c.miss_cycles)])
        });
        c.refill_overhead = sum([c.refill_overhead, self.itanium_cycles(), stlb]);
        c.page_fault = times(s.page_faults, cost.page_fault_cycles);
        s.os = self.os.stats();
        if let Some(h) = &self.caches {
            s.caches = h.stats();
            s.memory = h.memory_stats();
            c.walk_memory = self.walk_cycles;
            // Level-1 TLB lookups are pipelined with the instruction; deeper levels add time.
            let firsts = [self.ipath.levels[0] as usize, self.dpath.levels[0] as usize];
            let beyond_l1: u64 = self
                .structures
                .iter()
                .zip(&s.tlb)
                .enumerate()
                .filter(|(i, (st, _))| st.level > 1 && !firsts.contains(i))
                .map(|(_, (st, t))| times(t.accesses, st.latency))
                .fold(0, u64::saturating_add);
            let cpi = self.config.time.as_ref().map_or(1.0, |t| t.cpi);
            let mut t = crate::stats::TimeStats {
                instructions: self.instructions,
                base: (self.instructions as f64 * cpi).round() as u64,
                icache: self.stall[0],
                dcache: self.stall[1],
                translation: sum([beyond_l1, c.walk_memory, c.refill_overhead]),
                faults: c.page_fault,
                remap: self.os.shadow_stats().map_or(0, |s| s.cycles()),
                cycles: 0,
            };
            t.cycles = sum([t.base, t.icache, t.dcache, t.translation, t.faults, t.remap]);
            s.time = Some(t);
        }
        s
    }

    /// Checks that every translation held by a TLB structure is one the page table holds (the
    /// same frame) and that the OS agrees: a TLB must never translate a page the page table does
    /// not map, whatever its entry format, after unmaps, promotions and demotions. For tests;
    /// allocates. Reserved partitions (page-table translations) are not checked.
    pub fn check_translations(&self) -> Result<(), String> {
        if self.mach.is_some() {
            self.mach_check()?;
        }
        for s in self.structures.iter().filter(|s| s.serves.is_some()) {
            // A linear table's own pages, when they compete in a main structure, are not the
            // program's translations.
            let table_pages = match &self.pt {
                PageTable::Linear(l) if l.lpt_base().0 != 0 => l.lpt_base().0 >> self.page_size.shift(),
                _ => u64::MAX,
            };
            for (asid, vpn, pfn) in s.tlb.translations() {
                if vpn.0 >= table_pages || (self.mach.is_some() && asid == crate::tlb::GLOBAL) {
                    continue;
                }
                let space = if asid == crate::tlb::GLOBAL { GLOBAL_SPACE } else { Asid(asid) };
                let pt = self.pt.get(space, vpn);
                if pt.map(|p| p.pfn) != Some(pfn) {
                    return Err(format!(
                        "{}: TLB translates asid {asid} vpn {:#x} to frame {:#x}, the page table has {pt:?}",
                        s.name, vpn.0, pfn.0
                    ));
                }
                let os = self.os.mapping(space, vpn);
                if os != pt {
                    return Err(format!(
                        "{}: the page table maps asid {asid} vpn {:#x} as {pt:?}, the OS as {os:?}",
                        s.name, vpn.0
                    ));
                }
            }
        }
        Ok(())
    }

    /// Feeds a batch of records.
    pub fn process(&mut self, records: &[Record]) -> Result<(), SimError> {
        self.process_until(records).map_err(|(_, e)| SimError::Design(e))
    }

    /// Feeds a batch of records; on an error, also says which record (its index in `records`).
    fn process_until(&mut self, records: &[Record]) -> Result<(), (usize, DesignError)> {
        if self.plain {
            return self.process_plain(records);
        }
        for (i, r) in records.iter().enumerate() {
            match *r {
                Record::Access { kind, size, addr } => {
                    let addr = if self.extras { self.prepare(kind, addr).map_err(|e| (i, e))? } else { addr };
                    self.access(kind, size, addr).map_err(|e| (i, e))?
                }
                ref other => self.event(other).map_err(|e| (i, e))?,
            }
        }
        Ok(())
    }

    /// One access: every page from `addr` to `addr + size - 1` is one lookup, ascending; in a
    /// timed design, each line of each page then goes through the caches at its physical
    /// address.
    #[inline]
    pub fn access(&mut self, kind: Kind, size: u32, addr: u64) -> Result<(), DesignError> {
        if self.caches.is_some() {
            return self.access_timed(kind, size, addr);
        }
        let shift = self.page_size.shift();
        let first = addr >> shift;
        let end = addr.saturating_add(size.max(1) as u64 - 1);
        let last = end >> shift;
        let is_data = kind.is_data();
        self.lookups[is_data as usize] += last - first + 1;
        for vpn in first..=last {
            self.translate(is_data, Vpn(vpn))?;
        }
        Ok(())
    }

    /// [`System::access`] of a timed design: translate each page, then send each of its lines
    /// through the caches at the physical address the translation gives.
    #[inline(always)]
    fn access_timed(&mut self, kind: Kind, size: u32, addr: u64) -> Result<(), DesignError> {
        let end = addr.saturating_add(size.max(1) as u64 - 1);
        let is_data = kind.is_data();
        if addr >> self.line_shift[is_data as usize] == end >> self.line_shift[is_data as usize] {
            // Most references: one line (lines never cross pages), so one page.
            let shift = self.page_size.shift();
            self.instructions += !is_data as u64;
            self.lookups[is_data as usize] += 1;
            let pfn = self.translate(is_data, Vpn(addr >> shift))?;
            self.line_refs(kind, addr, (pfn << shift) | (addr & (self.page_size.bytes() - 1)));
            return Ok(());
        }
        self.access_lines(kind, addr, end)
    }

    /// [`System::access_timed`] of a reference that spans lines.
    #[inline(never)]
    fn access_lines(&mut self, kind: Kind, addr: u64, end: u64) -> Result<(), DesignError> {
        let shift = self.page_size.shift();
        let is_data = kind.is_data();
        self.instructions += !is_data as u64;
        let offset_mask = self.page_size.bytes() - 1;
        let first = addr >> shift;
        let last = end >> shift;
        self.lookups[is_data as usize] += last - first + 1;
        for vpn in first..=last {
            let pfn = self.translate(is_data, Vpn(vpn))?;
            let lo = addr.max(vpn << shift);
            let hi = end.min((vpn << shift) | offset_mask);
            self.cache_refs(kind, lo, hi, (pfn << shift) | (lo & offset_mask));
        }
        Ok(())
    }

    /// The lines of bytes `lo..=hi` (one page; `pa` is `lo`'s physical address) through the
    /// caches.
    #[inline(always)]
    fn cache_refs(&mut self, kind: Kind, lo: u64, hi: u64, pa: u64) {
        let ls = self.line_shift[kind.is_data() as usize];
        let mut line = lo >> ls;
        loop {
            let va = lo.max(line << ls);
            self.line_refs(kind, va, pa + (va - lo));
            if line == hi >> ls {
                break;
            }
            line += 1;
        }
    }

    /// One line of a reference at (`va`, `pa`) through the caches: a modify is a load, then a
    /// store. Counts the cycles beyond a level-1 hit (none without a cache: a perfect one).
    #[inline(always)]
    fn line_refs(&mut self, kind: Kind, va: u64, pa: u64) {
        let k = kind.is_data() as usize;
        let route = if k == 1 { Route::Data } else { Route::Instruction };
        let l1 = self.l1_latency[k];
        let asid = self.asid.0;
        let h = self.caches.as_mut().expect("timed design");
        let mut stall = 0;
        if kind != Kind::Store {
            stall += h.access(route, false, va, pa, asid).saturating_sub(l1);
        }
        if matches!(kind, Kind::Store | Kind::Modify) {
            stall += h.access(route, true, va, pa, asid).saturating_sub(l1);
        }
        self.stall[k] = self.stall[k].saturating_add(stall);
    }

    /// The per-lookup path; returns the frame of `vpn`. Level-1 accesses are not counted here
    /// (they equal the lookups of the kinds the structure serves) and hits are accesses less
    /// misses: a level-1 hit costs only the TLB's inline check.
    #[inline(always)]
    fn translate(&mut self, is_data: bool, vpn: Vpn) -> Result<u64, DesignError> {
        let l1 = if is_data { self.dpath.levels[0] } else { self.ipath.levels[0] } as usize;
        let tag = self.tag(vpn);
        if let Some(data) = self.structures[l1].tlb.lookup(tag, vpn) {
            return Ok(frame_of(data, vpn, self.page_size).0);
        }
        self.beyond_l1(is_data, vpn)
    }

    /// A level-1 miss: the remaining levels, then the walk.
    #[inline(never)]
    fn beyond_l1(&mut self, is_data: bool, vpn: Vpn) -> Result<u64, DesignError> {
        let path = if is_data { self.dpath } else { self.ipath };
        self.stats.tlb[path.levels[0] as usize].misses += 1;
        for k in 1..path.len as usize {
            let t = path.levels[k] as usize;
            self.stats.tlb[t].accesses += 1;
            let tag = self.tag(vpn);
            if let Some(data) = self.structures[t].tlb.lookup(tag, vpn) {
                let pte = pte_of(data, vpn, self.page_size);
                self.fill(&path.levels[..k], vpn, pte);
                return Ok(pte.pfn.0);
            }
            self.stats.tlb[t].misses += 1;
        }
        self.miss(path, vpn)
    }

    /// Installs the translation of `vpn` from its mapping in each of `levels` (all of which
    /// missed); each structure makes the entry its format allows.
    fn fill(&mut self, levels: &[u8], vpn: Vpn, pte: Pte) {
        let tag = if self.is_global(vpn) { crate::tlb::GLOBAL } else { self.tag(vpn).0 };
        for &t in levels {
            let t = t as usize;
            let f = self.structures[t].tlb.fill(tag, vpn, pte);
            self.stats.tlb[t].evictions += f.evicted.is_some() as u64;
            self.stats.tlb[t].subblock_misses += f.merged as u64;
        }
    }

    /// [`System::fill`] after a prefetching walk: `block` holds the mappings of vpn's block, as
    /// large as the largest block of the path's prefetching structures. Each prefetching
    /// structure takes its own (aligned, possibly smaller) block out of it; the others take only
    /// the missing page, as after an ordinary walk.
    fn fill_block(&mut self, levels: &[u8], vpn: Vpn, block: &[Option<Pte>]) {
        let tag = if self.is_global(vpn) { crate::tlb::GLOBAL } else { self.tag(vpn).0 };
        let first = vpn.0 & !(block.len() as u64 - 1);
        for &t in levels {
            let t = t as usize;
            let s = &mut self.structures[t];
            let f = match s.tlb.format() {
                Format::CompleteSubblock { block_pages } if s.prefetch => {
                    let b = block_pages as u64;
                    let start = ((vpn.0 & !(b - 1)) - first) as usize;
                    s.tlb.fill_block(tag, vpn, &block[start..start + b as usize])
                }
                _ => match block[(vpn.0 - first) as usize] {
                    Some(pte) => s.tlb.fill(tag, vpn, pte),
                    None => continue,
                },
            };
            self.stats.tlb[t].evictions += f.evicted.is_some() as u64;
            self.stats.tlb[t].subblock_misses += f.merged as u64;
        }
    }

    /// A page fault on `vpn` of `asid`: the OS allocates and decides the mapping; its page-table
    /// operations and TLB shootdowns are applied here.
    fn fault(&mut self, asid: Asid, vpn: Vpn) -> Result<(), DesignError> {
        let mut ops = std::mem::take(&mut self.ops);
        let mut shootdown = std::mem::take(&mut self.shootdown);
        ops.clear();
        shootdown.clear();
        let r = self.os.fault(asid, vpn, &mut ops, &mut shootdown);
        if r.is_ok() {
            self.apply(&ops, &shootdown);
        }
        self.ops = ops;
        self.shootdown = shootdown;
        r.map(|_| ()).map_err(|error| DesignError::OutOfMemory { config: self.config.name.clone(), error })
    }

    /// Applies the OS's page-table operations, then invalidates the TLB entries of the ranges.
    /// The table only grows here, by maps, so its peak size is taken after them.
    fn apply(&mut self, ops: &[PtOp], shootdown: &[(Asid, Vpn, Vpn)]) {
        let mut mapped = false;
        for op in ops {
            match *op {
                PtOp::Map(asid, vpn, pte) => {
                    self.pt.map(asid, vpn, pte);
                    mapped = true;
                    self.vhpt_invalidate(asid, vpn);
                }
                PtOp::Unmap(asid, vpn) => {
                    self.pt.unmap(asid, vpn);
                    self.vhpt_invalidate(asid, vpn);
                }
            }
        }
        if mapped {
            let z = self.pt.size();
            let p = &mut self.pt_peak;
            p.table_bytes = p.table_bytes.max(z.table_bytes);
            p.bucket_bytes = p.bucket_bytes.max(z.bucket_bytes);
            p.objects = p.objects.max(z.objects);
        }
        for &(asid, first, last) in shootdown {
            let tag = if asid == GLOBAL_SPACE { Asid(crate::tlb::GLOBAL) } else { asid };
            for (s, st) in self.structures.iter_mut().zip(&mut self.stats.tlb) {
                st.invalidations += s.tlb.invalidate_range(tag, first, last);
            }
        }
    }

    /// Maps base page `vpn` of `asid` as if the process had touched it, without any TLB or walk
    /// accounting (building page tables from address-space snapshots). Pages already mapped are
    /// left alone.
    pub fn prefault(&mut self, asid: Asid, vpn: Vpn) -> Result<(), DesignError> {
        if self.pt.get(asid, vpn).is_some() {
            return Ok(());
        }
        self.fault(asid, vpn)
    }

    /// True if `vpn` lies in one of the `os.global` ranges.
    #[inline(always)]
    fn is_global(&self, vpn: Vpn) -> bool {
        !self.global.is_empty() && self.global.iter().any(|&(lo, hi)| lo <= vpn.0 && vpn.0 <= hi)
    }

    /// The address space a page belongs to: its process's (or, with regions, its region's), or
    /// the shared one of global pages.
    #[inline(always)]
    fn space_of(&self, vpn: Vpn) -> Asid {
        if self.is_global(vpn) {
            GLOBAL_SPACE
        } else {
            self.tag(vpn)
        }
    }

    /// The TLB tag of a page of the running process: its ASID, or its region's space.
    #[inline(always)]
    fn tag(&self, vpn: Vpn) -> Asid {
        Asid(self.tags[((vpn.0 >> self.vrn_shift) & 7) as usize])
    }

    /// What a reference goes through before translation in designs with a layout or
    /// protection keys: its address is laid out, and its page's key checked against the PKRs.
    #[inline(always)]
    fn prepare(&mut self, kind: Kind, addr: u64) -> Result<u64, DesignError> {
        let is_data = kind.is_data();
        let (addr, key) = match self.layout.as_deref_mut() {
            None => (addr, 0),
            Some(l) => match l.place(is_data, addr) {
                Ok(a) => (a, l.last_key(is_data)),
                Err(e) => return Err(self.layout_error(e)),
            },
        };
        if let Some(k) = self.keys.as_deref_mut() {
            // A page's key is its region's, unless it belongs to a shared-region object.
            let key = if key != 0 {
                key
            } else {
                self.tags[((addr >> self.page_size.shift() >> self.vrn_shift) & 7) as usize]
            };
            k.check(key);
        }
        Ok(addr)
    }

    /// The Mach personality's counters, for `os.personality = "mach3"` designs.
    pub fn mach_stats(&self) -> Option<crate::os::mach3::Mach3Stats> {
        self.mach.as_ref().map(|m| m.stats)
    }

    /// The pages the software TLB holds (tests).
    pub fn stlb_entries(&self) -> Vec<u64> {
        self.stlb.as_ref().map(|t| t.translations().iter().map(|e| e.1 .0).collect()).unwrap_or_default()
    }

    /// The software TLB's lookups and hits, for designs with `[stlb]`.
    pub fn stlb_stats(&self) -> Option<(u64, u64)> {
        self.stlb.as_ref().map(|_| (self.stlb_counts[0], self.stlb_counts[1]))
    }

    /// Cycles of RID purges, key miss faults and PKR reloads.
    fn itanium_cycles(&self) -> u64 {
        let Some(i) = &self.config.itanium else {
            return 0;
        };
        let purges = self.regions.as_ref().map_or(0, |r| r.stats().purges);
        let k = self.key_stats().unwrap_or_default();
        sum([times(purges, i.purge_cycles), times(k.misses, i.key_fault_cycles), times(k.reloads, i.pkr_reload_cycles)])
    }

    /// The protection-key counters, for designs with keys.
    pub fn key_stats(&self) -> Option<KeyStats> {
        self.keys.as_ref().map(|k| k.stats())
    }

    fn layout_error(&self, error: LayoutFull) -> DesignError {
        DesignError::Layout { config: self.config.name.clone(), error }
    }

    /// The OS changed the mapping of `vpn` in `space`: the long VHPT's copy goes.
    #[inline]
    fn vhpt_invalidate(&mut self, space: Asid, vpn: Vpn) {
        if let Some(v) = &mut self.vhpt {
            let rid = match &self.regions {
                Some(r) if space != GLOBAL_SPACE => r.rid_of(space.0),
                _ => space.0,
            };
            v.invalidate(rid, vpn.0);
        }
    }

    /// The long VHPT's counters, for `vhpt-long` designs; for `vhpt-short` designs with the
    /// hardware walker, its probes are the walks and its misses the translation faults.
    pub fn vhpt_stats(&self) -> Option<VhptStats> {
        match (&self.vhpt, self.config.page_table.kind) {
            (Some(v), _) => Some(v.stats()),
            (None, PtKind::VhptShort) => {
                let lookups = if self.hw_walker { self.stats.walks.count } else { 0 };
                let misses = if self.hw_walker { self.vhpt_faults } else { 0 };
                Some(VhptStats { lookups, hits: lookups - misses, misses, ..VhptStats::default() })
            }
            _ => None,
        }
    }

    /// Bytes of the long VHPT.
    pub fn vhpt_bytes(&self) -> Option<u64> {
        self.vhpt.as_ref().map(|v| v.bytes())
    }

    /// The RID allocator's counters, for designs with `[itanium]`.
    pub fn rid_stats(&self) -> Option<crate::os::regions::RidStats> {
        self.regions.as_ref().map(|r| r.stats())
    }

    /// The layout's counters, for designs with a layout other than `identity`.
    pub fn layout_stats(&self) -> Option<crate::os::layout::LayoutStats> {
        self.layout.as_ref().map(|l| l.stats())
    }

    /// Flushes every non-global TLB entry and the long VHPT (a RID purge).
    fn purge_rids(&mut self) {
        if let Some(v) = &mut self.vhpt {
            v.purge();
        }
        for (s, st) in self.structures.iter_mut().zip(&mut self.stats.tlb) {
            st.invalidations += s.tlb.flush_non_global();
        }
    }

    /// Sets the region spaces of the running process (creating it, as `parent`'s fork child or
    /// a new program, on first sight).
    fn load_tags(&mut self) -> Result<(), DesignError> {
        let asid = self.asid.0;
        self.tags = match &mut self.regions {
            None => [asid; 8],
            Some(r) => {
                let mut purged = false;
                let t = r.spaces(asid, None, &mut purged);
                if purged {
                    self.purge_rids();
                }
                t.map_err(|error| DesignError::Rids { config: self.config.name.clone(), error })?
            }
        };
        Ok(())
    }

    /// A miss in every level: walk, fault in if needed, and fill every level of the path.
    #[inline(always)]
    fn miss(&mut self, path: Path, vpn: Vpn) -> Result<u64, DesignError> {
        if self.mach.is_some() {
            return self.mach_user_miss(path, vpn);
        }
        let asid = self.space_of(vpn);
        if vpn.0 >= self.vpn_limit {
            return Err(self.range_error(vpn));
        }
        // The walk record's counters accumulate over the run (they are the walk totals); only
        // its address list is per walk.
        self.rec.begin_walk();
        let refs_before = self.rec.mem_refs;
        // A reserved partition counts its own lookups; page-table translations that compete in
        // a main structure show up as nested misses and evictions only, so that structure's
        // accesses stay equal to the lookups that reached it.
        let dedicated = self.structures[self.pt_tlb].serves.is_none();
        let pt_stats = &mut self.stats.tlb[self.pt_tlb];
        let mut env = PtTlbEnv {
            tlb: &mut self.structures[self.pt_tlb].tlb,
            stats: pt_stats,
            dedicated,
            stlb: self.stlb.as_deref_mut(),
            stlb_counts: &mut self.stlb_counts,
        };
        let lines_before = self.rec.cache_lines;
        let prefetch = self.prefetch[path_is_data(path, &self.dpath) as usize];
        let mut block = std::mem::take(&mut self.block);
        let nested_before = self.rec.nested_misses;
        let mut vhpt_miss = None;
        let walked = if prefetch > 0 {
            self.stats.walks.block_walks += 1;
            self.pt.walk_block(asid, vpn, &mut env, &mut self.rec, &mut block[..prefetch])
        } else if let (Some(v), true) = (&mut self.vhpt, self.hw_walker) {
            // The walker probes the long VHPT; a miss traps to software, which walks the OS
            // table and inserts what it finds.
            let rid = match &self.regions {
                Some(r) if asid != GLOBAL_SPACE => r.rid_of(asid.0),
                _ => asid.0,
            };
            match v.probe(rid, vpn.0, &mut self.rec) {
                Some(pte) => Some(pte),
                None => {
                    vhpt_miss = Some(rid);
                    self.pt.walk(asid, vpn, &mut env, &mut self.rec)
                }
            }
        } else {
            self.pt.walk(asid, vpn, &mut env, &mut self.rec)
        };
        let faulted = walked.is_none();
        let pte = match self.walk_outcome(walked, asid, vpn, nested_before, lines_before) {
            Ok(pte) => pte,
            Err(e) => {
                self.block = block;
                return Err(e);
            }
        };
        if faulted && prefetch > 0 {
            // The fault handler leaves the block's mappings as the page table now has them.
            let first = vpn.0 & !(prefetch as u64 - 1);
            for (i, b) in block[..prefetch].iter_mut().enumerate() {
                *b = self.pt.get(asid, Vpn(first + i as u64));
            }
        }
        if let (Some(rid), Some(v)) = (vhpt_miss, &mut self.vhpt) {
            v.insert(rid, vpn.0, pte);
        }
        if let Some(h) = &mut self.caches {
            // The walk's references read page-table entries through the data caches.
            let rec = &self.rec;
            for a in &rec.addrs[..rec.n_addrs as usize] {
                self.walk_cycles = self.walk_cycles.saturating_add(h.access(Route::Walk, false, a.0, a.0, 0));
            }
            // References beyond the recorded ones (very deep walks) read memory.
            for _ in 0..(rec.mem_refs - refs_before) - rec.n_addrs {
                self.walk_cycles = self.walk_cycles.saturating_add(h.memory(false, 0));
            }
        } else if let Some(cache) = &mut self.cache {
            let rec = &self.rec;
            let w = &mut self.stats.walks;
            for a in &rec.addrs[..rec.n_addrs as usize] {
                if cache.access(a.0) {
                    w.cache_hits += 1;
                } else {
                    w.cache_misses += 1;
                }
            }
            // References beyond the recorded ones (very deep walks) are charged as misses.
            w.cache_misses += (rec.mem_refs - refs_before) - rec.n_addrs;
        }
        if prefetch > 0 {
            self.fill_block(&path.levels[..path.len as usize], vpn, &block[..prefetch]);
        } else {
            self.fill(&path.levels[..path.len as usize], vpn, pte);
        }
        self.block = block;
        Ok(pte.pfn.0)
    }

    /// After the walk of a miss on `vpn` of `asid` (`walked`: the PTE it found): counts the
    /// walk (its depth of nested misses since `nested_before`, its lines since `lines_before`);
    /// with no mapping, the page fault. Returns the PTE that translates `vpn`.
    #[inline(always)]
    fn walk_outcome(
        &mut self,
        walked: Option<Pte>,
        asid: Asid,
        vpn: Vpn,
        nested_before: u64,
        lines_before: u64,
    ) -> Result<Pte, DesignError> {
        match walked {
            Some(pte) => {
                self.walk_found(pte, nested_before, lines_before);
                Ok(pte)
            }
            None => self.walk_fault(asid, vpn, nested_before, lines_before),
        }
    }

    /// [`System::walk_outcome`] of a walk that found `pte`. Kept apart from the `Result` so the
    /// common path moves no error-sized value.
    #[inline(always)]
    fn walk_found(&mut self, pte: Pte, nested_before: u64, lines_before: u64) {
        self.count_walk(nested_before);
        if pte.size != self.page_size {
            // A miss served by a superpage or partial-subblock PTE (talluri95 Figure 11b).
            self.stats.walks.superpage_walks += 1;
            self.stats.walks.superpage_lines += self.rec.cache_lines - lines_before;
        }
    }

    /// [`System::walk_outcome`] of a walk that found no mapping: the page fault.
    #[inline(never)]
    fn walk_fault(&mut self, asid: Asid, vpn: Vpn, nested_before: u64, lines_before: u64) -> Result<Pte, DesignError> {
        self.count_walk(nested_before);
        self.stats.walks.fault_lines += self.rec.cache_lines - lines_before;
        self.fault(asid, vpn)?;
        self.stats.page_faults += 1;
        Ok(self.pt.get(asid, vpn).expect("the OS maps a faulting page"))
    }

    /// Counts a walk and its depth of nested misses (since `nested_before`).
    #[inline(always)]
    fn count_walk(&mut self, nested_before: u64) {
        let depth = self.rec.nested_misses - nested_before;
        self.vhpt_faults += (depth > 0) as u64;
        self.stats.walks.by_depth[depth.min(3) as usize] += 1;
        self.stats.walks.count += 1;
    }

    /// The error of a reference to `vpn`, at or above the page table's virtual address space.
    #[cold]
    fn range_error(&self, vpn: Vpn) -> DesignError {
        let (va_bits, key) = self.config.page_table.translated_va_bits();
        DesignError::AddressRange { config: self.config.name.clone(), addr: vpn.base(self.page_size).0, va_bits, key }
    }

    fn switch_to(&mut self, asid: u32) -> Result<(), DesignError> {
        if asid != self.asid.0 {
            self.asid = Asid(asid);
            if let Some(l) = &mut self.layout {
                l.switch_to(asid);
            }
            if let Some(k) = &mut self.keys {
                k.switch_to(asid);
            }
            self.load_tags()?;
            if self.asid_mode == AsidMode::Flush {
                self.stats.events.flushes += 1;
                for (s, st) in self.structures.iter_mut().zip(&mut self.stats.tlb) {
                    st.invalidations += s.tlb.flush_non_global();
                }
            }
        }
        Ok(())
    }

    fn event(&mut self, r: &Record) -> Result<(), DesignError> {
        let e = &mut self.stats.events;
        match *r {
            Record::Process { asid } => return self.switch_to(asid),
            Record::ContextSwitch { asid } => {
                e.context_switches += 1;
                self.switch_to(asid)?;
                if self.mach.is_some() {
                    return self.mach_event(r);
                }
                return Ok(());
            }
            _ => {}
        }
        match *r {
            Record::Access { .. } | Record::Process { .. } | Record::ContextSwitch { .. } => {}
            Record::Map { start, len, flags } => {
                self.stats.events.maps += 1;
                let object = self.pending_object.take();
                // The image's text names the executable: with shared text, its program.
                use crate::trace::map_flags::{EXEC, IMAGE, WRITE};
                if let (Some(r), Some(obj)) = (&mut self.regions, object) {
                    if flags & (IMAGE | EXEC) == IMAGE | EXEC && flags & WRITE == 0 {
                        let mut purged = false;
                        let changed = r.set_executable(self.asid.0, obj, &mut purged);
                        if purged {
                            self.purge_rids();
                        }
                        match changed {
                            Ok(Some(t)) => self.tags = t,
                            Ok(None) => {}
                            Err(error) => return Err(DesignError::Rids { config: self.config.name.clone(), error }),
                        }
                    }
                }
                if let Some(l) = &mut self.layout {
                    // Placing a mapping over an old one unmaps the old one's pages.
                    let mut un = std::mem::take(&mut self.unmapped);
                    un.clear();
                    let r = l.map(start, len, flags, &mut un);
                    for &(lo, n) in &un {
                        self.unmap_laid_out(lo, n);
                    }
                    self.unmapped = un;
                    r.map_err(|e| self.layout_error(e))?;
                }
                if matches!(self.os.shadow_policy(), ShadowPolicy::Heap | ShadowPolicy::All) {
                    self.shadow_map(start, len, flags)?;
                }
            }
            Record::Unmap { start, len } => {
                self.stats.events.unmaps += 1;
                let (start, len) = self.shadow_clip_unmap(start, len);
                match &mut self.layout {
                    None => self.unmap_laid_out(start, len),
                    Some(l) => {
                        let mut un = std::mem::take(&mut self.unmapped);
                        un.clear();
                        l.unmap(start, len, &mut un);
                        for &(lo, n) in &un {
                            self.unmap_laid_out(lo, n);
                        }
                        self.unmapped = un;
                    }
                }
            }
            Record::Fork { child } => {
                self.stats.events.forks += 1;
                if let Some(l) = &mut self.layout {
                    l.fork(child);
                }
                let mut ops = std::mem::take(&mut self.ops);
                ops.clear();
                let parent = self.asid.0;
                let child_spaces = self.regions.as_mut().map(|r| {
                    let mut purged = false;
                    let theirs = r.spaces(child, Some(parent), &mut purged);
                    (theirs, purged)
                });
                match child_spaces {
                    None => self.os.fork_ops(self.asid, Asid(child), &mut ops),
                    Some((theirs, purged)) => {
                        if purged {
                            self.purge_rids();
                        }
                        let theirs = match theirs {
                            Ok(t) => t,
                            Err(error) => {
                                self.ops = ops;
                                return Err(DesignError::Rids { config: self.config.name.clone(), error });
                            }
                        };
                        // A purge may have renamed the parent's RIDs, never its spaces.
                        let mine = self.tags;
                        let r = self.regions.as_ref().expect("regions");
                        for vrn in 0..8 {
                            if r.is_private(child, vrn) {
                                self.os.fork_ops(Asid(mine[vrn]), Asid(theirs[vrn]), &mut ops);
                            }
                        }
                    }
                }
                self.apply(&ops, &[]);
                self.ops = ops;
            }
            Record::Exit { asid } => {
                self.stats.events.exits += 1;
                if let Some(l) = &mut self.layout {
                    l.exit(asid);
                }
                if let Some(k) = &mut self.keys {
                    k.exit(asid);
                }
                let spaces = match &mut self.regions {
                    None => vec![asid],
                    Some(r) => r.exit(asid),
                };
                for space in spaces {
                    self.unmap_range(Asid(space), Vpn(0), Vpn(u64::MAX));
                    self.os.shadow_exit(Asid(space));
                    self.pt.remove_asid(Asid(space));
                    for (s, st) in self.structures.iter_mut().zip(&mut self.stats.tlb) {
                        st.invalidations += s.tlb.flush_asid(Asid(space));
                    }
                }
                if self.mach.is_some() {
                    self.mach_event(r)?;
                }
            }
            Record::Object { id, offset } => {
                self.pending_object = Some(id);
                if let Some(l) = &mut self.layout {
                    l.object(id, offset);
                }
            }
            Record::Ipc { .. } => {
                self.stats.events.ipcs += 1;
                if self.mach.is_some() {
                    self.mach_event(r)?;
                }
            }
            Record::Syscall { nr, buf, len, .. } => {
                self.stats.events.syscalls += 1;
                if nr == crate::trace::sysno::MADVISE && len > 0 && self.os.shadow_policy() == ShadowPolicy::Markers {
                    let asid = self.asid;
                    self.shadow_change(|os, ops, sd| os.shadow_region(asid, buf, buf.saturating_add(len), ops, sd))?;
                }
                if self.mach.is_some() {
                    self.mach_event(r)?;
                }
            }
            Record::Marker { .. } => self.stats.events.markers += 1,
            Record::Thread { .. } => self.stats.events.threads += 1,
        }
        Ok(())
    }

    /// Shadow superpages at map time (`heap`, `all`): heap growth goes to the modified `sbrk`,
    /// other mappings are mapped in superpages whole (`all`, unless they allow no access) or
    /// when anonymous, private, writable and at least `shadow.min_bytes` long (`heap`).
    fn shadow_map(&mut self, start: u64, len: u64, flags: u32) -> Result<(), DesignError> {
        use crate::trace::map_flags::{EXEC, FILE, HEAP, READ, SHARED, STACK, WRITE};
        let asid = self.asid;
        let end = start.saturating_add(len);
        if flags & HEAP != 0 {
            return self.shadow_change(|os, ops, sd| os.shadow_heap_grow(asid, start, end, ops, sd).map(|_| ()));
        }
        let wanted = match self.os.shadow_policy() {
            // Not reservations without access (guard areas, reserved arenas).
            ShadowPolicy::All => flags & (READ | WRITE | EXEC) != 0,
            _ => {
                flags & (FILE | SHARED | STACK | EXEC) == 0 && flags & WRITE != 0 && len >= self.config.shadow.min_bytes
            }
        };
        if wanted {
            self.shadow_change(|os, ops, sd| os.shadow_region(asid, start, end, ops, sd).map(|_| ()))?;
        }
        Ok(())
    }

    /// An unmap of the running process, less the part of its heap the modified `sbrk`
    /// preallocated (it never gives memory back: a shrinking heap keeps its superpages).
    fn shadow_clip_unmap(&self, start: u64, len: u64) -> (u64, u64) {
        let Some((lo, hi)) = self.os.shadow_heap(self.asid) else {
            return (start, len);
        };
        let end = start.saturating_add(len);
        if start >= lo && start < hi {
            let s = hi.min(end);
            return (s, end - s);
        }
        (start, len)
    }

    /// Runs an OS change of shadow mappings, then what it asked of the memory side and the
    /// page table.
    fn shadow_change<T>(
        &mut self,
        f: impl FnOnce(&mut Os, &mut Vec<PtOp>, &mut Vec<(Asid, Vpn, Vpn)>) -> Result<T, OutOfMemory>,
    ) -> Result<(), DesignError> {
        let mut ops = std::mem::take(&mut self.ops);
        let mut shootdown = std::mem::take(&mut self.shootdown);
        ops.clear();
        shootdown.clear();
        let r = f(&mut self.os, &mut ops, &mut shootdown);
        self.apply_mem();
        self.apply(&ops, &shootdown);
        self.ops = ops;
        self.shootdown = shootdown;
        r.map(|_| ()).map_err(|error| DesignError::OutOfMemory { config: self.config.name.clone(), error })
    }

    /// Applies the OS's memory-side operations: page flushes and purges through the caches (the
    /// loop's cycles per line of the first data level, plus `shadow.writeback_cycles` per dirty
    /// line a flush writes to memory), dropped lines, and the memory controller's table.
    fn apply_mem(&mut self) {
        let mut mem = std::mem::take(&mut self.mem_ops);
        self.os.take_mem_ops(&mut mem);
        if mem.is_empty() {
            self.mem_ops = mem;
            return;
        }
        let page = self.page_size.bytes();
        let per_line = self.config.shadow.flush_line_cycles;
        for op in &mem {
            let Some(h) = self.caches.as_deref_mut() else {
                break;
            };
            match *op {
                MemOp::Flush { asid, va, pa, purge, create } => {
                    let loop_lines = h.first_line_shift(Route::Data).map_or(0, |s| page >> s);
                    let (found, dirty) = match pa {
                        Some(pa) => h.flush_page(asid, va, pa, page, !purge),
                        None => (0, 0),
                    };
                    let cycles = loop_lines * per_line + dirty * self.config.shadow.writeback_cycles;
                    self.os.shadow_flushed(found, dirty, cycles, create);
                }
                MemOp::Discard { asid, va, pa } => {
                    h.flush_page(asid, va, pa, page, false);
                }
                MemOp::Table { shadow, real } => {
                    if let Some(m) = h.mtlb_mut() {
                        m.map(shadow, real);
                    }
                }
            }
        }
        mem.clear();
        self.mem_ops = mem;
    }

    /// The running process unmaps laid-out bytes `[start, start + len)`. Pages of a region shared
    /// with other processes (a program's text, the global shared region) stay mapped for them.
    fn unmap_laid_out(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let shift = self.page_size.shift();
        let (first, last) = (Vpn(start >> shift), Vpn(start.saturating_add(len - 1) >> shift));
        // Unmapping inside a global region unmaps the shared pages for everyone.
        if self.is_global(first) {
            return self.unmap_range(GLOBAL_SPACE, first, last);
        }
        // A range lies in one region (a layout never places a mapping across two); split it if
        // not (identity layouts of odd traces).
        let mut lo = first.0;
        while lo <= last.0 {
            let vrn = ((lo >> self.vrn_shift) & 7) as usize;
            let region_end = if self.vrn_shift >= 61 { u64::MAX } else { (((vrn as u64) + 1) << self.vrn_shift) - 1 };
            let hi = last.0.min(region_end);
            let private = self.regions.as_ref().map_or(true, |r| r.is_private(self.asid.0, vrn));
            if private {
                self.unmap_range(Asid(self.tags[vrn]), Vpn(lo), Vpn(hi));
            }
            if hi == u64::MAX || hi == last.0 {
                break;
            }
            lo = hi + 1;
        }
    }

    /// Unmaps the resident pages of `asid` in `[first, last]` and shoots down their TLB entries.
    fn unmap_range(&mut self, asid: Asid, first: Vpn, last: Vpn) {
        let mut ops = std::mem::take(&mut self.ops);
        let mut shootdown = std::mem::take(&mut self.shootdown);
        ops.clear();
        shootdown.clear();
        self.stats.events.pages_unmapped += self.os.unmap_range(asid, first, last, &mut ops, &mut shootdown);
        self.apply_mem();
        self.apply(&ops, &shootdown);
        self.ops = ops;
        self.shootdown = shootdown;
    }
}

/// True if `path` is the data path (the two paths are told apart by their level-1 structure,
/// or are the same unified path).
#[inline(always)]
fn path_is_data(path: Path, dpath: &Path) -> bool {
    path.levels[0] == dpath.levels[0]
}

/// The mapping a TLB hit's data stands for, as a PTE for base page `vpn`.
#[inline]
fn pte_of(data: TlbData, vpn: Vpn, base: PageSize) -> Pte {
    Pte {
        pfn: frame_of(data, vpn, base),
        size: PageSize::from_shift(data.shift as u32).unwrap_or(base),
        valid: data.valid,
    }
}

/// Walk environment over the structure holding page-table translations.
struct PtTlbEnv<'a> {
    tlb: &'a mut Tlb,
    stats: &'a mut TlbStats,
    /// True for a reserved partition (its lookups are its own counters).
    dedicated: bool,
    /// The software TLB behind it, and its [lookups, hits].
    stlb: Option<&'a mut Tlb>,
    stlb_counts: &'a mut [u64; 2],
}

impl WalkEnv for PtTlbEnv<'_> {
    fn lookup_pt_translation(&mut self, asid: Asid, va: crate::addr::VirtAddr) -> bool {
        let vpn = va.vpn(self.tlb.page_size());
        let hit = self.tlb.lookup(asid, vpn).is_some();
        if self.dedicated {
            self.stats.accesses += 1;
            self.stats.misses += !hit as u64;
        }
        if hit {
            return true;
        }
        // The refill handler checks the software TLB before walking further up (bala94 §4): a
        // hit refills the TLB from it, without a cascade.
        let Some(stlb) = self.stlb.as_deref_mut() else {
            return false;
        };
        self.stlb_counts[0] += 1;
        if stlb.lookup(asid, vpn).is_none() {
            return false;
        }
        self.stlb_counts[1] += 1;
        self.fill_pt_translation(asid, va);
        true
    }

    fn fill_pt_translation(&mut self, asid: Asid, va: crate::addr::VirtAddr) {
        let vpn = va.vpn(self.tlb.page_size());
        let data = TlbData { pfn: 0, shift: self.tlb.page_size().shift() as u8, valid: 0 };
        if let Some(e) = self.tlb.insert(asid.0, vpn, data) {
            self.stats.evictions += 1;
            // What the TLB evicts goes to the software TLB.
            if let Some(stlb) = self.stlb.as_deref_mut() {
                stlb.insert(e.asid, Vpn(e.tag), e.data);
            }
        }
    }
}

pub use crate::trace::TraceCounts;

/// Options of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Stop after this many references (accesses); `None`: the whole trace.
    pub max_refs: Option<u64>,
}

/// What a run read.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunSummary {
    /// Trace counts.
    pub trace: TraceCounts,
    /// What the reader consumed and skipped.
    pub reader: ReaderStats,
    /// True if `max_refs` stopped the run before the trace ended.
    pub truncated_by_limit: bool,
}

/// Runs every system over one pass of `reader`. `progress` is called after each batch with the
/// references done so far. A trace that cannot be read ends the run with an error and nothing is
/// returned: no partial report can be presented. A design that cannot simulate the trace (an
/// address outside its virtual address space, physical memory exhausted) stops on its own and
/// the others go on: its [`System::failure`] says why and where, and its counters must not be
/// reported as a result.
///
/// The reader runs on its own thread, a few batches ahead of the simulation (batches are
/// recycled, so memory stays constant): on a machine with two cores, decoding and simulating
/// overlap and a run takes about as long as the slower of the two.
pub fn run(
    reader: &mut dyn TraceReader,
    systems: &mut [System],
    opts: RunOptions,
    progress: impl FnMut(u64),
) -> Result<RunSummary, SimError> {
    run_jobs(reader, systems, opts, 1, progress)
}

/// [`run`] with the designs spread over up to `jobs` threads (besides the reader's): each
/// thread simulates its share of the designs (shares of about equal cost, measured on the
/// first batches: see `engine/jobs.rs`) over the same decoded batches, which it shares
/// read-only. Every design sees the same records in the same order whatever `jobs` is, so the
/// results are identical; `jobs <= 1` (or one design) is the single simulation thread of
/// [`run`].
pub fn run_jobs(
    reader: &mut dyn TraceReader,
    systems: &mut [System],
    opts: RunOptions,
    jobs: usize,
    progress: impl FnMut(u64),
) -> Result<RunSummary, SimError> {
    let jobs = jobs.clamp(1, systems.len().max(1));
    jobs::run_shares(reader, systems, opts, jobs, jobs::Redeal::RUNS, progress)
}

/// Empty trace counts whose lookups are at the designs' common page size (4096 if they
/// differ).
fn lookup_counts(systems: &[System]) -> TraceCounts {
    let sizes: Vec<u64> = systems.iter().map(|s| s.page_size.bytes()).collect();
    let common = !sizes.is_empty() && sizes.iter().all(|&s| s == sizes[0]);
    TraceCounts { lookup_page_size: if common { sizes[0] } else { 4096 }, ..TraceCounts::default() }
}

/// Feeds `batch` to each system of `systems` that has not failed: through its page words
/// (made at pages of `2^shift` bytes) when the design can use them.
fn process_share<'a>(systems: impl IntoIterator<Item = &'a mut System>, batch: &Batch, shift: u32) {
    let (words, before) = (batch.words(), &batch.before);
    for s in systems.into_iter().filter(|s| s.failure.is_none()) {
        let r = contain::run(|| {
            if s.reads_words(shift) {
                s.process_plain_words(batch.slow_records(), words)
            } else {
                s.process_until(batch.records())
            }
        });
        let r = r.unwrap_or_else(|message| {
            // A panic: the design's state is not to be trusted, nor is where in the batch.
            let first = before.references + before.events + 1;
            let last = first + batch.records().len().saturating_sub(1) as u64;
            Err((0, DesignError::Internal { config: s.config.name.clone(), message, first, last }))
        });
        if let Err((i, error)) = r {
            let refs_before = batch.accesses_before(i);
            s.failure = Some(DesignFailure {
                error,
                reference: before.references + refs_before + 1,
                record: before.references + before.events + i as u64 + 1,
            });
        }
    }
}
