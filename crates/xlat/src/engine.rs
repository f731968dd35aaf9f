//! The simulation engine: one [`System`] per configured design, all fed by one pass over a trace.
//!
//! A design is validated once into a [`Design`] (`engine/design.rs`), then assembled into a
//! machine of parts (`engine/machine.rs`): the front of translation (`front.rs`: processes,
//! layouts, regions, protection keys), the TLB hierarchy (`tlbs.rs`), the walk and what sits in
//! front of it (`walk.rs`: page table, VHPT, software TLB), the memory side (`memory.rs`:
//! nothing, the page-table data cache, or caches and memory with the MTLB) and the OS model;
//! an OS personality (`Personality`) handles TLB misses and events on that machine. The
//! per-reference path is `System::access` -> `System::translate`: it splits an access into the
//! pages it touches, looks each up in the level-1 TLB of its kind and, on a miss, the deeper
//! levels and the personality's miss handler (kept out of line). It allocates nothing, logs
//! nothing and calls nothing through a vtable: TLBs are flat arrays, the page table and the
//! parts are closed enums, and readers hand over batches of records. Designs with no optional
//! part take the plain loop (`engine/plain.rs`), chosen once per design.
//!
//! Counters live in [`SystemStats`], bumped through its counting methods by every loop; cycles
//! are [`crate::cost::cycles`] of the statistics and the design's cost parameters.

use crate::addr::{Asid, PageSize, Vpn};
use crate::config::Config;
use crate::os::layout::LayoutFull;
use crate::os::Os;
use crate::pt::{PageTable, ParamError, PtSize};
use crate::stats::SystemStats;
use crate::trace::{Kind, Record};
use design::Path;
use machine::Machine;

pub mod contain;
mod core_set;
mod cores;
mod design;
mod error;
mod events;
pub(crate) mod feed;
mod front;
mod jobs;
mod mach3;
mod machine;
mod memory;
mod pass;
mod plain;
mod probe;
mod tlbs;
mod walk;

pub use design::Design;
pub use error::{DesignError, DesignFailure, SimError};
pub use front::GLOBAL_SPACE;
pub use jobs::{run, run_jobs};
pub use pass::{RunOptions, RunSummary};
pub use tlbs::Structure;

/// Most TLB levels on one path ([`crate::limits::MAX_TLB_LEVELS`]).
pub const MAX_LEVELS: usize = crate::limits::MAX_TLB_LEVELS;

/// The OS personality of a design: who handles a miss in every TLB level, and what the kernel
/// does on events besides the VM model's work.
#[derive(Clone, Debug)]
enum Personality {
    /// Linux-like: a walk of the page table (hardware or software refill), the VM model's
    /// faults; events are the machine's alone.
    Linux,
    /// Mach 3.0 on the R3000 (bala94): Mach's handlers, cascaded kernel misses, the STLB and
    /// PTLB, and the kernel's own references on IPC, system calls and switches.
    Mach3(Box<mach3::Kernel>),
}

/// A simulated design: its machine of parts and OS personality, with its counters.
#[derive(Clone, Debug)]
pub struct System {
    design: Design,
    m: Machine,
    personality: Personality,
    /// Why this design stopped simulating, if it did ([`run`] goes on with the others).
    failure: Option<DesignFailure>,
    /// The design takes the plain loop (`engine/plain.rs`).
    plain: bool,
    /// It keeps the plain loop while its OS watches writes ([`System::is_plain_watching`]).
    plain_watch: bool,
}

impl System {
    /// Validates `config` into a [`Design`] and builds its system.
    pub fn new(config: &Config) -> Result<System, ParamError> {
        Ok(System::from_design(&Design::new(config)?))
    }

    /// Builds the system of a validated design: it cannot fail.
    pub fn from_design(design: &Design) -> System {
        let m = Machine::new(design);
        let config = design.config();
        let personality = match config.os.personality {
            crate::os::mach3::Personality::Linux => Personality::Linux,
            crate::os::mach3::Personality::Mach3 => Personality::Mach3(Box::new(mach3::Kernel::new(design))),
        };
        let mut system =
            System { design: design.clone(), m, personality, failure: None, plain: false, plain_watch: false };
        if let Personality::Mach3(k) = &system.personality {
            system.m.stats.mach = Some(k.stats());
        }
        system.plain = system.is_plain();
        system.plain_watch = system.is_plain_watching();
        system.m.walk.rec.keep_addrs = !system.plain;
        system
    }

    /// True if this design takes the batches' page words at pages of `2^shift` bytes (and
    /// only the records whose word is [`crate::trace::SLOW_WORD`]): [`System::process_plain_words`].
    pub(crate) fn reads_words(&self, shift: u32) -> bool {
        self.plain && self.m.page_size.shift() == shift && (self.plain_watch || !self.m.os.watches_writes())
    }

    /// True if this design may need every record of a batch even while it reads page words:
    /// with a page cache, stores may copy on write, which the plain loop tests on the records
    /// of stores to write-protected pages ([`System::is_plain_watching`]) or leaves to the
    /// general one ([`crate::os::Os::watches_writes`]).
    pub(crate) fn needs_records(&self) -> bool {
        self.m.os.has_page_cache()
    }

    /// True if this design takes the loop of plain designs (`engine/plain.rs`).
    pub fn is_plain_loop(&self) -> bool {
        self.plain
    }

    /// True if this design keeps the plain loop while its OS watches writes (a page cache and
    /// one fully associative LRU TLB at level 1: `engine/plain.rs`).
    #[doc(hidden)]
    pub fn plain_loop_watches_writes(&self) -> bool {
        self.plain_watch
    }

    /// Makes this design take the general loop even if it is plain (tests compare the two).
    #[doc(hidden)]
    pub fn use_general_loop(&mut self) {
        self.plain = false;
        self.plain_watch = false;
        self.m.walk.rec.keep_addrs = true;
    }

    /// Makes every batch of a plain design with a fully associative LRU TLB take the build of
    /// its loop with the table of recent pages (`true`) or the one without, rather than the
    /// faster as measured (tests compare the two).
    #[doc(hidden)]
    pub fn fix_fa_lru_build(&mut self, near: bool) {
        self.m.tlbs.fa_fixed = Some(near);
    }

    /// The validated design this system was built from.
    pub fn design(&self) -> &Design {
        &self.design
    }

    /// The config this system was built from.
    pub fn config(&self) -> &Config {
        self.design.config()
    }

    /// Base page size.
    pub fn page_size(&self) -> PageSize {
        self.m.page_size
    }

    /// The TLB structures, in stats order.
    pub fn structures(&self) -> &[Structure] {
        &self.m.tlbs.structures
    }

    /// The page table.
    pub fn page_table(&self) -> &PageTable {
        &self.m.walk.pt
    }

    /// The page table, for walks outside a run (snapshot studies).
    pub fn page_table_mut(&mut self) -> &mut PageTable {
        &mut self.m.walk.pt
    }

    /// The caches and memory of a timed design (their levels' configuration; their counters
    /// are in [`System::stats`]).
    pub fn caches(&self) -> Option<&crate::cache::Hierarchy> {
        self.m.mem.timed().map(|t| &t.h)
    }

    /// The caches and memory of a timed design, to record what reaches DRAM (checks).
    pub fn caches_mut(&mut self) -> Option<&mut crate::cache::Hierarchy> {
        self.m.mem.timed_mut().map(|t| &mut t.h)
    }

    /// A reference the OS model makes on the program's behalf at physical address `pa` in
    /// unmapped kernel memory (`MemorySide::kernel_access`, `engine/memory.rs`); returns its cycles.
    pub fn kernel_access(&mut self, kind: Kind, pa: u64) -> u64 {
        self.m.mem.kernel_access(kind, pa, &mut self.m.stats)
    }

    /// The OS model (its state: mappings, frames; its counters are in [`System::stats`]).
    pub fn os(&self) -> &Os {
        &self.m.os
    }

    /// The page table's peak size so far: each field's maximum over the run. A page table
    /// shrinks when processes unmap memory or exit, so at the end of a traced program it is
    /// usually empty; [`PageTable::size`] is the size now.
    pub fn page_table_peak(&self) -> PtSize {
        self.m.walk.peak()
    }

    /// Why this design stopped before the end of the trace, if it did.
    pub fn failure(&self) -> Option<&DesignFailure> {
        self.failure.as_ref()
    }

    /// Takes the failure out (for callers that turn it into their own error).
    pub fn take_failure(&mut self) -> Option<DesignFailure> {
        self.failure.take()
    }

    /// Every counter of the design, the optional parts' included, with the cycles the cost
    /// model makes of them ([`crate::cost::cycles`], [`crate::cost::time`]): what every report
    /// reads.
    pub fn stats(&self) -> SystemStats {
        let m = &self.m;
        let mut s = m.stats.clone();
        let [ilookups, dlookups] = m.lookups;
        s.ifetch_lookups = ilookups;
        s.lookups = ilookups + dlookups;
        s.tlb[m.tlbs.ipath.first()].accesses += ilookups;
        s.tlb[m.tlbs.dpath.first()].accesses += dlookups;
        for t in &mut s.tlb {
            t.hits = t.accesses - t.misses;
        }
        let (w, rec) = (&mut s.walks, m.rec());
        w.memory_refs = rec.mem_refs;
        w.cache_lines = rec.cache_lines;
        w.nested_misses = rec.nested_misses;
        w.pwc_hits = rec.pwc_hits;
        if let Personality::Mach3(k) = &self.personality {
            let ms = k.stats();
            w.nested_misses = ms.nested;
            s.mach = Some(ms);
        }
        s.os = m.os.stats();
        s.resident_pages = m.os.resident_pages();
        s.page_cache_misses = m.os.page_cache_misses();
        // A fault that read a file page in is a major fault.
        s.major_faults = s.page_cache_misses;
        s.page_table = crate::stats::PageTableSizes { peak: m.walk.peak(), end: m.walk.pt.size() };
        s.vhpt = self.vhpt_stats();
        s.rids = m.front.regions.as_ref().map(|r| r.stats());
        s.keys = m.front.keys.as_ref().map(|k| k.stats());
        s.layout = m.front.layout.as_ref().map(|l| l.stats());
        s.shadow = m.os.shadow_stats();
        s.pt_entries = m.pt_census_now();
        if let Some(t) = m.mem.timed() {
            s.caches = t.h.stats();
            s.memory = t.h.memory_stats();
            s.mtlb = t.h.mtlb().map(|x| {
                let (referenced_pages, dirty_pages) = x.marked_pages();
                crate::stats::MtlbCounts { counts: x.stats(), referenced_pages, dirty_pages }
            });
        }
        if let Some((cores, total, caches)) = m.cores_stats() {
            s.cores = cores;
            s.shootdowns = Some(total);
            if m.mem.timed().is_some() {
                s.caches = caches;
            }
        }
        s.cycles = crate::cost::cycles(&s, self.design.cost());
        s.kernel = crate::cost::kernel(&s, self.design.cost());
        s.time = crate::cost::time(&s, &s.cycles, self.design.cost());
        s
    }

    /// The Mach personality's counters, for `os.personality = "mach3"` designs (as in
    /// [`System::stats`]).
    pub fn mach_stats(&self) -> Option<crate::os::mach3::Mach3Stats> {
        match &self.personality {
            Personality::Mach3(k) => Some(k.stats()),
            Personality::Linux => None,
        }
    }

    /// The software TLB's lookups and hits, for designs with `[stlb]` (as in [`System::stats`]).
    pub fn stlb_stats(&self) -> Option<(u64, u64)> {
        self.m.stats.stlb.map(|c| (c.lookups, c.hits))
    }

    /// The pages the software TLB holds (tests).
    pub fn stlb_entries(&self) -> Vec<u64> {
        self.m.walk.stlb.as_ref().map(|t| t.translations().iter().map(|e| e.1 .0).collect()).unwrap_or_default()
    }

    /// The protection-key counters, for designs with keys (as in [`System::stats`]).
    pub fn key_stats(&self) -> Option<crate::os::keys::KeyStats> {
        self.m.front.keys.as_ref().map(|k| k.stats())
    }

    /// The VHPT's counters (as in [`System::stats`]): the long VHPT's own; a short VHPT's
    /// probes are the hardware walker's walks, its misses the translation faults.
    pub fn vhpt_stats(&self) -> Option<crate::pt::vhpt::VhptStats> {
        let m = &self.m;
        match (&m.walk.vhpt, self.config().page_table.kind) {
            (Some(v), _) => Some(v.stats()),
            (None, crate::pt::Kind::VhptShort) => {
                let lookups = if m.walk.hw_walker { m.stats.walks.count } else { 0 };
                let misses = if m.walk.hw_walker { m.stats.vhpt_faults } else { 0 };
                Some(crate::pt::vhpt::VhptStats { lookups, hits: lookups - misses, misses, ..Default::default() })
            }
            _ => None,
        }
    }

    /// The RID allocator's counters, for designs with `[itanium]` (as in [`System::stats`]).
    pub fn rid_stats(&self) -> Option<crate::os::regions::RidStats> {
        self.m.front.regions.as_ref().map(|r| r.stats())
    }

    /// The layout's counters, for designs with a layout other than `identity` (as in
    /// [`System::stats`]).
    pub fn layout_stats(&self) -> Option<crate::os::layout::LayoutStats> {
        self.m.front.layout.as_ref().map(|l| l.stats())
    }

    /// Bytes of the long VHPT.
    pub fn vhpt_bytes(&self) -> Option<u64> {
        self.m.walk.vhpt.as_ref().map(|v| v.bytes())
    }

    /// Checks that every translation held by a TLB structure is one the page table holds (the
    /// same frame) and that the OS agrees: a TLB must never translate a page the page table does
    /// not map, whatever its entry format, after unmaps, promotions and demotions. For tests;
    /// allocates. Reserved partitions (page-table translations) are not checked.
    pub fn check_translations(&self) -> Result<(), String> {
        let mach = matches!(self.personality, Personality::Mach3(_));
        if let Personality::Mach3(k) = &self.personality {
            k.check(&self.m)?;
        }
        let pt = &self.m.walk.pt;
        for s in self.m.tlbs.structures.iter().filter(|s| s.serves.is_some()) {
            // A linear table's own pages, when they compete in a main structure, are not the
            // program's translations.
            let table_pages = match pt {
                PageTable::Linear(l) if l.lpt_base().0 != 0 => l.lpt_base().0 >> self.m.page_size.shift(),
                _ => u64::MAX,
            };
            for (asid, vpn, pfn) in s.tlb.translations() {
                if vpn.0 >= table_pages || (mach && asid == crate::tlb::GLOBAL) {
                    continue;
                }
                let space = if asid == crate::tlb::GLOBAL { GLOBAL_SPACE } else { Asid(asid) };
                let p = pt.get(space, vpn);
                if p.map(|p| p.pfn) != Some(pfn) {
                    return Err(format!(
                        "{}: TLB translates asid {asid} vpn {:#x} to frame {:#x}, the page table has {p:?}",
                        s.name, vpn.0, pfn.0
                    ));
                }
                let os = self.m.os.mapping(space, vpn);
                if os != p {
                    return Err(format!(
                        "{}: the page table maps asid {asid} vpn {:#x} as {p:?}, the OS as {os:?}",
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
        if self.plain && (self.plain_watch || !self.m.os.watches_writes()) {
            return self.process_plain(records);
        }
        self.process_general(records, 0)
    }

    /// The general loop over `records[from..]` (errors give the record's index in `records`).
    fn process_general(&mut self, records: &[Record], from: usize) -> Result<(), (usize, DesignError)> {
        for (i, r) in records.iter().enumerate().skip(from) {
            match *r {
                Record::Access { kind, size, addr } => {
                    let addr = if self.m.front.extras { self.prepare(kind, addr).map_err(|e| (i, e))? } else { addr };
                    self.access(kind, size, addr).map_err(|e| (i, e))?
                }
                ref other => self.event(other).map_err(|e| (i, e))?,
            }
        }
        Ok(())
    }

    /// A reference's address laid out and its protection key checked ([`front::Front::prepare`]).
    #[inline(always)]
    fn prepare(&mut self, kind: Kind, addr: u64) -> Result<u64, DesignError> {
        let shift = self.m.page_size.shift();
        self.m.front.prepare(kind, addr, shift).map_err(|e| self.layout_error(e))
    }

    #[cold]
    fn layout_error(&self, error: LayoutFull) -> DesignError {
        DesignError::Layout { config: self.m.name.clone(), error }
    }

    /// One access: every page from `addr` to `addr + size - 1` is one lookup, ascending; in a
    /// timed design, each line of each page then goes through the caches at its physical
    /// address.
    #[inline]
    pub fn access(&mut self, kind: Kind, size: u32, addr: u64) -> Result<(), DesignError> {
        if self.m.mem.timed().is_some() {
            return self.access_timed(kind, size, addr);
        }
        let shift = self.m.page_size.shift();
        let first = addr >> shift;
        let end = addr.saturating_add(size.max(1) as u64 - 1);
        let last = end >> shift;
        let is_data = kind.is_data();
        self.m.lookups[is_data as usize] += last - first + 1;
        let store = kind.is_store();
        for vpn in first..=last {
            let pfn = self.translate(is_data, Vpn(vpn))?;
            if store && self.m.os.is_cow_frame(pfn) {
                self.copy_on_write(Vpn(vpn), pfn)?;
            }
        }
        Ok(())
    }

    /// A store to `vpn`, translated to `pfn`, a frame holding a write-protected page: if the OS
    /// copies the page, the store takes the fault and looks the page up again (its TLB entries
    /// were shot down: a miss, a walk and a fill); returns the frame it writes.
    #[cold]
    #[inline(never)]
    fn copy_on_write(&mut self, vpn: Vpn, pfn: u64) -> Result<u64, DesignError> {
        if !self.m.write_fault(vpn)? {
            return Ok(pfn);
        }
        self.m.lookups[1] += 1;
        self.translate(true, vpn)
    }

    /// [`System::access`] of a timed design: translate each page, then send each of its lines
    /// through the caches at the physical address the translation gives.
    #[inline(always)]
    fn access_timed(&mut self, kind: Kind, size: u32, addr: u64) -> Result<(), DesignError> {
        let end = addr.saturating_add(size.max(1) as u64 - 1);
        let is_data = kind.is_data();
        let ls = self.m.mem.timed().expect("timed design").line_shift[is_data as usize];
        if addr >> ls == end >> ls {
            // Most references: one line (lines never cross pages), so one page.
            let shift = self.m.page_size.shift();
            self.m.stats.timing.instructions += !is_data as u64;
            self.m.lookups[is_data as usize] += 1;
            let mut pfn = self.translate(is_data, Vpn(addr >> shift))?;
            if kind.is_store() && self.m.os.is_cow_frame(pfn) {
                pfn = self.copy_on_write(Vpn(addr >> shift), pfn)?;
            }
            let pa = (pfn << shift) | (addr & (self.m.page_size.bytes() - 1));
            self.m.line_refs(kind, addr, pa);
            return Ok(());
        }
        self.access_lines(kind, addr, end)
    }

    /// [`System::access_timed`] of a reference that spans lines.
    #[inline(never)]
    fn access_lines(&mut self, kind: Kind, addr: u64, end: u64) -> Result<(), DesignError> {
        let shift = self.m.page_size.shift();
        let is_data = kind.is_data();
        self.m.stats.timing.instructions += !is_data as u64;
        let offset_mask = self.m.page_size.bytes() - 1;
        let first = addr >> shift;
        let last = end >> shift;
        self.m.lookups[is_data as usize] += last - first + 1;
        for vpn in first..=last {
            let mut pfn = self.translate(is_data, Vpn(vpn))?;
            if kind.is_store() && self.m.os.is_cow_frame(pfn) {
                pfn = self.copy_on_write(Vpn(vpn), pfn)?;
            }
            let lo = addr.max(vpn << shift);
            let hi = end.min((vpn << shift) | offset_mask);
            let asid = self.m.front.asid.0;
            let t = self.m.mem.timed_mut().expect("timed design");
            t.cache_refs(kind, lo, hi, (pfn << shift) | (lo & offset_mask), asid, &mut self.m.stats);
        }
        Ok(())
    }

    /// The per-lookup path; returns the frame of `vpn`.
    #[inline(always)]
    fn translate(&mut self, is_data: bool, vpn: Vpn) -> Result<u64, DesignError> {
        if let Some(pfn) = self.m.l1_hit(is_data, vpn) {
            return Ok(pfn);
        }
        self.beyond_l1(is_data, vpn)
    }

    /// A level-1 miss: the remaining levels, then the personality's miss handler.
    #[inline(never)]
    fn beyond_l1(&mut self, is_data: bool, vpn: Vpn) -> Result<u64, DesignError> {
        match self.m.beyond_l1(is_data, vpn) {
            Ok(pfn) => Ok(pfn),
            Err(path) => self.miss(path, vpn),
        }
    }

    /// A miss in every level of `path`.
    #[inline(always)]
    fn miss(&mut self, path: Path, vpn: Vpn) -> Result<u64, DesignError> {
        match &mut self.personality {
            Personality::Linux => self.m.miss(path, vpn),
            Personality::Mach3(k) => k.user_miss(&mut self.m, path, vpn),
        }
    }

    /// Maps base page `vpn` of `asid` as if the process had touched it, without any TLB or walk
    /// accounting (building page tables from address-space snapshots). Pages already mapped are
    /// left alone.
    pub fn prefault(&mut self, asid: Asid, vpn: Vpn) -> Result<(), DesignError> {
        if self.m.walk.pt.get(asid, vpn).is_some() {
            return Ok(());
        }
        self.m.fault(asid, vpn)?;
        if let Personality::Mach3(k) = &mut self.personality {
            k.absorb_ops(&mut self.m)?;
        }
        Ok(())
    }

    /// One event: the machine's work (`engine/events.rs`), then the personality's.
    fn event(&mut self, r: &Record) -> Result<(), DesignError> {
        self.m.event(r)?;
        match &mut self.personality {
            Personality::Linux => Ok(()),
            Personality::Mach3(k) => k.event(&mut self.m, r),
        }
    }
}

pub use crate::trace::TraceCounts;
