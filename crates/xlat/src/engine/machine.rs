//! The simulated machine of one design, assembled from its parts: the front of translation
//! ([`Front`]), the TLB hierarchy ([`Tlbs`]), the walk and what sits in front of it ([`Walk`]),
//! the memory side ([`MemorySide`]) and the Linux-like VM model ([`Os`]: demand paging,
//! reservations, superpages, shadow superpages), with the design's statistics. An OS
//! personality that handles misses itself (Mach 3.0, `engine/mach3.rs`) works on this machine
//! through its parts, never on the [`super::System`] around it.
//!
//! Every counter is bumped through [`SystemStats`]'s counting methods or in the part that owns
//! it (a walk's references in its [`crate::pt::WalkRecord`], a cache's in the cache), whichever
//! loop runs.

use super::design::{Design, Path};
use super::error::DesignError;
use super::front::Front;
use super::front::GLOBAL_SPACE;
use super::memory::MemorySide;
use super::tlbs::Tlbs;
use super::walk::{PtCensus, PtTlbEnv, Walk};
use crate::addr::{Asid, PageSize, Vpn};
use crate::os::shadow::{MemOp, Shadow, ShadowConfig, ShadowPolicy};
use crate::os::{FrameAllocator, Os, Paging, PtOp};
use crate::pt::{Pte, WalkRecord};
use crate::stats::{StlbStats, SystemStats, TlbStats};
use crate::tlb::frame_of;

/// See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Machine {
    /// The design's name, for errors.
    pub(crate) name: String,
    pub(crate) page_size: PageSize,
    pub(crate) front: Front,
    pub(crate) tlbs: Tlbs,
    pub(crate) walk: Walk,
    pub(crate) mem: MemorySide,
    pub(crate) os: Os,
    /// `[shadow]`: what making shadow superpages costs the memory side.
    pub(crate) shadow: ShadowConfig,
    pub(crate) stats: SystemStats,
    /// The kernel's per-event footprint (`os.kernel_text_bytes`, `os.kernel_data_bytes`).
    pub(crate) kernel: Option<crate::os::KernelFootprint>,
    /// Lookups by kind [instruction fetches, data], kept apart from `stats` so the plain loop
    /// can count them in registers; [`super::System::stats`] adds them up.
    pub(crate) lookups: [u64; 2],
    /// Page-table operations, TLB shootdowns and memory-side operations the OS asked for, and
    /// ranges a layout unmapped (buffers reused across faults and events).
    pub(crate) ops: Vec<PtOp>,
    pub(crate) shootdown: Vec<(Asid, Vpn, Vpn)>,
    pub(crate) mem_ops: Vec<MemOp>,
    pub(crate) unmapped: Vec<(u64, u64)>,
    /// The laid-out pieces and the spaces' page ranges of a protect or discard (scratch).
    pub(crate) pieces: Vec<(u64, u64)>,
    pub(crate) discarded: Vec<(Asid, Vpn, Vpn)>,
    /// The spaces' page ranges of an unmap (scratch).
    pub(crate) spaces: Vec<(Asid, Vpn, Vpn)>,
    /// The page-table operations applied since the OS personality last took them, for a
    /// personality whose kernel writes the PTEs itself (Mach 3.0); `None` for the others.
    pub(crate) op_log: Option<Vec<PtOp>>,
    /// The page-table translations each process holds in the TLB (linear and short-VHPT
    /// tables under the Linux-like model); sampled at switches and exits only.
    pub(crate) pt_census: Option<Box<PtCensus>>,
    /// Several cores (`[cores] count > 1`, `engine/cores.rs`); `None` with one.
    pub(crate) cores: Option<Box<super::core_set::Cores>>,
}

impl Machine {
    /// The machine of a validated design, before any reference.
    pub(crate) fn new(design: &Design) -> Machine {
        let config = design.config();
        let page_size = design.page_size;
        let mut os = Os::with_paging(
            FrameAllocator::new(config.os.frame_allocator, design.frames, config.os.seed, config.os.fragmentation),
            Paging::new(&config.os, page_size).expect("validated: os"),
        );
        os.set_fork_flush(config.os.fork_flush);
        let mem = MemorySide::new(design);
        if config.os.shadow_superpages != ShadowPolicy::None {
            let range = mem.timed().and_then(|t| t.h.mtlb()).map(|m| {
                let (b, n) = m.shadow_frames();
                (b << page_size.shift(), (b + n) << page_size.shift())
            });
            let shadow = Shadow::new(config.os.shadow_superpages, &config.shadow, page_size.bytes(), range)
                .expect("validated: shadow");
            os.set_shadow(shadow);
        }
        // The page cache shares frames (under shadow superpages, outside their regions, under
        // Mach 3.0, whose memory objects every task mapping them shares, and under reservations,
        // which then belong to memory objects: os/mod.rs).
        if config.os.page_cache {
            os.set_page_cache();
        }
        let layout =
            crate::os::layout::Layout::new(&config.layout, config.itanium.as_ref().is_some_and(|i| i.shared_region))
                .map(Box::new);
        let mut regions = config.itanium.as_ref().map(|i| Box::new(crate::os::regions::Regions::new(i)));
        let tags = match &mut regions {
            Some(r) => r.spaces(0, None, &mut false).expect("validated: itanium.rid_bits"),
            None => [0; 8],
        };
        let keys = config
            .itanium
            .as_ref()
            .filter(|i| i.protection_keys)
            .map(|i| Box::new(crate::os::keys::Keys::new(i.pkrs, i.pkr_policy)));
        let tlbs = Tlbs::new(design);
        let mut stats = SystemStats { tlb: vec![TlbStats::default(); tlbs.structures.len()], ..SystemStats::default() };
        stats.stlb = config.stlb.as_ref().map(|_| StlbStats::default());
        let walk = Walk::new(design);
        let pt_census = match &walk.pt {
            crate::pt::PageTable::Linear(t) if config.os.personality != crate::os::mach3::Personality::Mach3 => t
                .pt_region_start(page_size)
                .map(|first| Box::new(PtCensus { first: first.0, since: 0, per: Vec::new() })),
            _ => None,
        };
        let mut m = Machine {
            name: config.name.clone(),
            page_size,
            front: Front {
                asid_mode: config.asid,
                asid: Asid(0),
                tags,
                vrn_shift: 61 - page_size.shift().min(61),
                global: design.global.clone(),
                extras: layout.is_some() || keys.is_some(),
                layout,
                regions,
                keys,
                pending_object: None,
            },
            tlbs,
            walk,
            mem,
            os,
            shadow: config.shadow.clone(),
            stats,
            kernel: crate::os::KernelFootprint::new(&config.os, design.frames),
            lookups: [0; 2],
            ops: Vec::new(),
            shootdown: Vec::new(),
            mem_ops: Vec::new(),
            unmapped: Vec::new(),
            pieces: Vec::new(),
            spaces: Vec::new(),
            discarded: Vec::new(),
            op_log: (config.os.personality == crate::os::mach3::Personality::Mach3).then(Vec::new),
            pt_census,
            cores: None,
        };
        m.cores = super::core_set::Cores::new(&m, config);
        m
    }

    /// Ends the running process's time slice for the page-table census: if it made a
    /// reference since its slice began, counts the page-table translations it holds.
    pub(crate) fn pt_census_sample(&mut self) {
        let Some(c) = self.pt_census.as_deref_mut() else {
            return;
        };
        let now = self.lookups[0] + self.lookups[1];
        if now > c.since {
            let n = c.count(&self.tlbs.structures[self.tlbs.pt_tlb].tlb, &self.front.tags);
            PtCensus::add(&mut c.per, self.front.asid.0, n);
        }
        c.since = now;
    }

    /// The census's samples, the running process's unfinished slice counted as if it ended now.
    pub(crate) fn pt_census_now(&self) -> Vec<crate::stats::PtEntries> {
        let Some(c) = self.pt_census.as_deref() else {
            return Vec::new();
        };
        let mut per = c.per.clone();
        if self.lookups[0] + self.lookups[1] > c.since {
            let n = c.count(&self.tlbs.structures[self.tlbs.pt_tlb].tlb, &self.front.tags);
            PtCensus::add(&mut per, self.front.asid.0, n);
        }
        per
    }

    /// The level-1 lookup of `vpn` by a reference of its kind: the frame on a hit. Level-1
    /// accesses are not counted here (they equal the lookups of the kinds the structure
    /// serves) and hits are accesses less misses: a level-1 hit costs only the TLB's inline
    /// check.
    #[inline(always)]
    pub(crate) fn l1_hit(&mut self, is_data: bool, vpn: Vpn) -> Option<u64> {
        let l1 = self.tlbs.path(is_data).first();
        let tag = self.front.tag(vpn);
        let data = self.tlbs.structures[l1].tlb.lookup(tag, vpn)?;
        Some(frame_of(data, vpn, self.page_size).0)
    }

    /// After a level-1 miss: the remaining levels of the path. The frame if one holds `vpn`,
    /// else the path, for the miss handler of the design's OS personality.
    #[inline(always)]
    pub(crate) fn beyond_l1(&mut self, is_data: bool, vpn: Vpn) -> Result<u64, Path> {
        let path = self.tlbs.path(is_data);
        match self.tlbs.lookup_beyond_l1(path, &self.front, vpn, self.page_size, &mut self.stats) {
            Some(pte) => Ok(pte.pfn.0),
            None => Err(path),
        }
    }

    /// A miss in every level under the Linux-like VM model: walk, fault in if needed, and fill
    /// every level of the path.
    #[inline(always)]
    pub(crate) fn miss(&mut self, path: Path, vpn: Vpn) -> Result<u64, DesignError> {
        let asid = self.front.space_of(vpn);
        if vpn.0 >= self.walk.vpn_limit {
            return Err(self.range_error(vpn));
        }
        let w = &mut self.walk;
        // The walk record's counters accumulate over the run (they are the walk totals); only
        // its address list is per walk.
        w.rec.begin_walk();
        let refs_before = w.rec.mem_refs;
        let lines_before = w.rec.cache_lines;
        let nested_before = w.rec.nested_misses;
        // A reserved partition counts its own lookups; page-table translations that compete in
        // a main structure show up as nested misses and evictions only, so that structure's
        // accesses stay equal to the lookups that reached it.
        let prefetch = self.tlbs.prefetch[self.tlbs.is_data_path(path) as usize];
        let pt_tlb = self.tlbs.pt_tlb;
        let dedicated = self.tlbs.structures[pt_tlb].serves.is_none();
        let mut no_stlb = StlbStats::default();
        let mut env = PtTlbEnv {
            tlb: &mut self.tlbs.structures[pt_tlb].tlb,
            stats: &mut self.stats.tlb[pt_tlb],
            dedicated,
            stlb: w.stlb.as_deref_mut(),
            stlb_counts: self.stats.stlb.as_mut().unwrap_or(&mut no_stlb),
            pt_fills: &mut self.stats.walks.pt_fills,
        };
        let mut block = std::mem::take(&mut self.tlbs.block);
        let mut vhpt_miss = None;
        let walked = if prefetch > 0 {
            self.stats.walks.block_walks += 1;
            w.pt.walk_block(asid, vpn, &mut env, &mut w.rec, &mut block[..prefetch])
        } else if let (Some(v), true) = (&mut w.vhpt, w.hw_walker) {
            // The walker probes the long VHPT; a miss traps to software, which walks the OS
            // table and inserts what it finds.
            let rid = self.front.rid_of(asid);
            match v.probe(rid, vpn.0, &mut w.rec) {
                Some(pte) => Some(pte),
                None => {
                    vhpt_miss = Some(rid);
                    w.pt.walk(asid, vpn, &mut env, &mut w.rec)
                }
            }
        } else {
            w.pt.walk(asid, vpn, &mut env, &mut w.rec)
        };
        let faulted = walked.is_none();
        let pte = match walked {
            Some(pte) => {
                self.walk_found(pte, nested_before, lines_before);
                pte
            }
            None => match self.walk_fault(asid, vpn, nested_before, lines_before) {
                Ok(pte) => pte,
                Err(e) => {
                    self.tlbs.block = block;
                    return Err(e);
                }
            },
        };
        if faulted && prefetch > 0 {
            // The fault handler leaves the block's mappings as the page table now has them.
            let first = vpn.0 & !(prefetch as u64 - 1);
            for (i, b) in block[..prefetch].iter_mut().enumerate() {
                *b = self.walk.pt.get(asid, Vpn(first + i as u64));
            }
        }
        if let (Some(rid), Some(v)) = (vhpt_miss, &mut self.walk.vhpt) {
            v.insert(rid, vpn.0, pte);
        }
        self.mem.walk_refs(&self.walk.rec, refs_before, &mut self.stats);
        let tag = self.front.fill_tag(vpn);
        if prefetch > 0 {
            self.tlbs.fill_block(path.levels(), tag, vpn, &block[..prefetch], &mut self.stats);
        } else {
            self.tlbs.fill(path.levels(), tag, vpn, pte, &mut self.stats);
        }
        self.tlbs.block = block;
        Ok(pte.pfn.0)
    }

    /// After a walk that found `pte`: counts the walk (its depth of nested misses since
    /// `nested_before`, its lines since `lines_before`).
    #[inline(always)]
    pub(crate) fn walk_found(&mut self, pte: Pte, nested_before: u64, lines_before: u64) {
        self.count_walk(nested_before);
        if pte.size != self.page_size {
            // A miss served by a superpage or partial-subblock PTE (talluri95 Figure 11b).
            self.stats.walks.superpage_walks += 1;
            self.stats.walks.superpage_lines += self.walk.rec.cache_lines - lines_before;
        }
    }

    /// After a walk that found no mapping: counts it, and the page fault. Returns the PTE that
    /// now translates `vpn`.
    #[inline(never)]
    pub(crate) fn walk_fault(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        nested_before: u64,
        lines_before: u64,
    ) -> Result<Pte, DesignError> {
        self.count_walk(nested_before);
        self.stats.walks.fault_lines += self.walk.rec.cache_lines - lines_before;
        self.fault(asid, vpn)?;
        self.stats.page_fault();
        if self.kernel.is_some() {
            self.kernel_footprint();
        }
        Ok(self.walk.pt.get(asid, vpn).expect("the OS maps a faulting page"))
    }

    /// Counts a walk and its depth of nested misses (since `nested_before`).
    #[inline(always)]
    fn count_walk(&mut self, nested_before: u64) {
        let depth = self.walk.rec.nested_misses - nested_before;
        self.stats.vhpt_faults += (depth > 0) as u64;
        self.stats.walks(depth, 1);
    }

    /// A page fault on `vpn` of `asid`: the OS allocates and decides the mapping; its page-table
    /// operations and TLB shootdowns are applied here.
    pub(crate) fn fault(&mut self, asid: Asid, vpn: Vpn) -> Result<(), DesignError> {
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
        r.map(|_| ()).map_err(|error| DesignError::OutOfMemory { config: self.name.clone(), error })
    }

    /// A store to page `vpn` of the running process found it on a frame holding a
    /// write-protected page ([`Os::is_cow_frame`]): the OS copies it if it is (copy on write),
    /// remapping it and shooting down its TLB entries. True if it did (the store then looks the
    /// page up again).
    #[cold]
    #[inline(never)]
    pub(crate) fn write_fault(&mut self, vpn: Vpn) -> Result<bool, DesignError> {
        let space = self.front.space_of(vpn);
        let mut ops = std::mem::take(&mut self.ops);
        let mut shootdown = std::mem::take(&mut self.shootdown);
        ops.clear();
        shootdown.clear();
        let r = self.os.write_fault(space, vpn, &mut ops, &mut shootdown);
        if let Ok(Some(_)) = r {
            self.apply(&ops, &shootdown);
        }
        self.ops = ops;
        self.shootdown = shootdown;
        r.map(|p| p.is_some()).map_err(|error| DesignError::OutOfMemory { config: self.name.clone(), error })
    }

    /// Applies the OS's page-table operations, then invalidates the TLB entries of the ranges.
    pub(crate) fn apply(&mut self, ops: &[PtOp], shootdown: &[(Asid, Vpn, Vpn)]) {
        let front = &self.front;
        self.walk.apply(ops, |space| front.rid_of(space));
        if let Some(log) = &mut self.op_log {
            log.extend_from_slice(ops);
        }
        for &(asid, first, last) in shootdown {
            let tag = if asid == GLOBAL_SPACE { Asid(crate::tlb::GLOBAL) } else { asid };
            self.tlbs.invalidate_range(tag, first, last, &mut self.stats);
        }
        if self.cores.is_some() && !shootdown.is_empty() {
            self.apply_cores(shootdown);
        }
    }

    /// With several cores: one shootdown of `shootdown`'s ranges reaches the other cores; the
    /// running core flushes the spaces whole if the policy says so.
    #[cold]
    #[inline(never)]
    fn apply_cores(&mut self, shootdown: &[(Asid, Vpn, Vpn)]) {
        if self.cores_shootdown(shootdown) {
            for &(asid, ..) in shootdown {
                let tag = if asid == GLOBAL_SPACE { Asid(crate::tlb::GLOBAL) } else { asid };
                self.tlbs.flush_asid(tag, &mut self.stats);
            }
        }
    }

    /// The error of a reference to `vpn`, at or above the page table's virtual address space.
    #[cold]
    pub(crate) fn range_error(&self, vpn: Vpn) -> DesignError {
        let (va_bits, key) = self.walk.pt_va_bits;
        DesignError::AddressRange { config: self.name.clone(), addr: vpn.base(self.page_size).0, va_bits, key }
    }

    /// Flushes every non-global TLB entry and the long VHPT (a RID purge).
    pub(crate) fn purge_rids(&mut self) {
        if let Some(v) = &mut self.walk.vhpt {
            v.purge();
        }
        self.tlbs.flush_non_global(&mut self.stats);
    }

    /// Sets the region spaces of the running process (creating it on first sight).
    pub(crate) fn load_tags(&mut self) -> Result<(), DesignError> {
        let mut purged = false;
        let r = self.front.load_tags(&mut purged, &self.name);
        if purged {
            self.purge_rids();
        }
        r
    }

    /// Process `asid` runs from now on.
    pub(crate) fn switch_to(&mut self, asid: u32) -> Result<(), DesignError> {
        if asid != self.front.asid.0 {
            self.pt_census_sample();
            self.front.switch_to(asid);
            self.load_tags()?;
            if self.front.asid_mode == crate::config::AsidMode::Flush {
                self.stats.events.flushes += 1;
                self.tlbs.flush_non_global(&mut self.stats);
            }
        }
        Ok(())
    }

    /// One line of a reference at (`va`, `pa`) through the caches of a timed design, for the
    /// running process.
    #[inline(always)]
    pub(crate) fn line_refs(&mut self, kind: crate::trace::Kind, va: u64, pa: u64) {
        let asid = self.front.asid.0;
        let t = self.mem.timed_mut().expect("timed design");
        t.line_refs(kind, va, pa, asid, &mut self.stats);
    }

    /// The walk record (its totals are the walk counters).
    pub(crate) fn rec(&self) -> &WalkRecord {
        &self.walk.rec
    }
}
