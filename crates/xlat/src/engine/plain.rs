//! The per-reference loop of *plain* designs: one TLB level per reference kind, base-page
//! (`single`) entries, a page table that walks without the TLB's help (not linear), no caches,
//! no page-table data cache, and none of the optional models (layout, protection keys, regions,
//! VHPT, software TLB, Mach personality, shadow superpages, subblock prefetch, global pages).
//!
//! Most sweeps are of such designs. Their loop skips every test the general one makes for the
//! models they lack: a lookup is the level-1 TLB's inline check, and a miss is a walk, the
//! page fault if there is no mapping, and one fill. Everything else (events, faults) takes the
//! general code, so the counters are those of [`System::process_until`]'s general loop exactly;
//! `tests/models/engine/plain.rs` checks it against that loop on random traces with events.

use super::error::DesignError;
use super::System;
use crate::addr::{Asid, Vpn};
use crate::os::shadow::ShadowPolicy;
use crate::pt::{Kind as PtKind, NoTlb, PageTable};
use crate::tlb::{FaLruMisses, FilterRun, Watch, NO_WATCH};
use crate::trace::{page_word, Record, SLOW_WORD};

/// A batch of a fully associative LRU TLB's loop takes the build with the table of recent pages
/// ([`Tlb::fa_lru_run`](crate::tlb::Tlb::fa_lru_run)) while, in the last batch that took it,
/// the lookups the table did not answer and the uses it deferred to a fill or to the run's
/// end (each costing about what a lookup of the build without it costs) were at most one in
/// `NEAR_COST` of the lookups. Measured on generated traces (zipf and uniform, 0.002 % to 5 %
/// misses; docs/performance.md), the two builds took the same time at about one in 3.7.
pub(super) const NEAR_COST: u64 = 4;

/// Batches that take the build without the table before one tries it again.
pub(super) const NEAR_PROBE: u32 = 64;

impl System {
    /// True if this design may take [`System::process_plain`] (see the module documentation).
    pub(super) fn is_plain(&self) -> bool {
        let m = &self.m;
        let single = |p: &super::design::Path| {
            p.len == 1 && m.tlbs.structures[p.levels[0] as usize].format == crate::config::TlbFormat::Single
        };
        matches!(self.personality, super::Personality::Linux)
            && matches!(m.mem, super::memory::MemorySide::Untimed)
            && !m.front.extras
            && m.front.regions.is_none()
            && m.walk.vhpt.is_none()
            && m.walk.stlb.is_none()
            && m.front.global.is_empty()
            && m.kernel.is_none()
            && m.tlbs.prefetch == [0, 0]
            && self.config().os.shadow_superpages == ShadowPolicy::None
            && !matches!(self.config().page_table.kind, PtKind::Linear | PtKind::VhptShort | PtKind::VhptLong)
            && single(&m.tlbs.ipath)
            && single(&m.tlbs.dpath)
    }

    /// [`System::process_until`] of a plain design.
    pub(super) fn process_plain(&mut self, records: &[Record]) -> Result<(), (usize, DesignError)> {
        // Pages are at least 2 bytes (`Config::validate`), as `page_word` needs.
        let shift = self.m.page_size.shift();
        self.plain_loop(records, |i| page_word(&records[i], shift))
    }

    /// [`System::process_plain`] given the batch's [`page_word`]s at the design's page size,
    /// as the reader thread makes them (`words.len() == records.len()`).
    pub(super) fn process_plain_words(
        &mut self,
        records: &[Record],
        words: &[u64],
    ) -> Result<(), (usize, DesignError)> {
        let words = &words[..records.len()];
        self.plain_loop(records, |i| words[i])
    }

    /// The loop of a plain design over `records`, whose page words `word(i)` gives.
    #[inline(always)]
    fn plain_loop(&mut self, records: &[Record], word: impl Fn(usize) -> u64) -> Result<(), (usize, DesignError)> {
        let tlbs = [self.m.tlbs.ipath.levels[0] as usize, self.m.tlbs.dpath.levels[0] as usize];
        if tlbs[0] == tlbs[1] && self.m.tlbs.structures[tlbs[0]].tlb.is_fa_lru() {
            return self.plain_loop_fa_lru(records, word, tlbs[0]);
        }
        // One-page lookups, and those of data references, counted in registers: a count in
        // memory would chain each reference to the previous one's store. They go to
        // `self.m.lookups` before anything can read it (an event, an error, the batch's end).
        let (mut n, mut n_data) = (0u64, 0u64);
        let unified = tlbs[0] == tlbs[1];
        let len = records.len();
        // The records are only read for the words that send them down the general step (an
        // iterator over them too would cost a register the loop needs).
        let mut i = 0;
        while i < len {
            let (r, w) = (i, word(i));
            i += 1;
            if w == SLOW_WORD {
                self.add_lookups(&mut n, &mut n_data);
                self.plain_record(&records[r], tlbs).map_err(|e| (r, e))?;
                if self.m.os.watches_writes() {
                    return self.process_general(records, i);
                }
                continue;
            }
            let is_data = (w & 1) as usize;
            n += 1;
            n_data += w & 1;
            let (t, asid, vpn) = (tlbs[is_data], self.m.front.asid, Vpn(w >> 1));
            let tlb = &mut self.m.tlbs.structures[t].tlb;
            // A hit through the recent-hit filter starts a run of them (most of a real
            // program's references), answered with the filter in registers: the one filter of
            // a unified level 1, or each reference's own TLB's filter with a split one.
            let mut run = tlb.filter_run(asid);
            if run.hit(vpn.0) {
                if unified {
                    let mut runs = [run];
                    i = filter_hits(&mut runs, |_| 0, &word, i, len, &mut n, &mut n_data);
                    tlb.end_filter_run(runs[0]);
                } else {
                    let mut runs = [run; 2];
                    runs[1 - is_data] = self.m.tlbs.structures[tlbs[1 - is_data]].tlb.filter_run(asid);
                    i = filter_hits(&mut runs, |w| (w & 1) as usize, &word, i, len, &mut n, &mut n_data);
                    for (t, run) in tlbs.into_iter().zip(runs) {
                        self.m.tlbs.structures[t].tlb.end_filter_run(run);
                    }
                }
                continue;
            }
            if !tlb.hits_past_filter(asid, vpn) {
                if let Err(e) = self.plain_miss(t, asid, vpn) {
                    self.add_lookups(&mut n, &mut n_data);
                    return Err((r, e));
                }
            }
        }
        self.add_lookups(&mut n, &mut n_data);
        Ok(())
    }

    /// True if this plain design keeps its loop while its OS watches writes
    /// ([`crate::os::Os::watches_writes`]): it has a page cache and one fully associative LRU
    /// TLB at level 1 (unified), whose runs test stores ([`Tlb::fa_lru_run`]'s `WATCH`).
    pub(super) fn is_plain_watching(&self) -> bool {
        let m = &self.m;
        let (i, d) = (m.tlbs.ipath.levels[0] as usize, m.tlbs.dpath.levels[0] as usize);
        self.plain && m.os.has_page_cache() && i == d && m.tlbs.structures[i].tlb.is_fa_lru()
    }

    /// [`System::plain_loop`] of a design whose one level-1 TLB `t` (unified) is fully
    /// associative LRU: while its entries allow it, runs of references go through
    /// [`Tlb::fa_lru_run`](crate::tlb::Tlb::fa_lru_run), hits and the misses whose walk the
    /// radix table replays from its memo (a base-page PTE found, no addresses kept), and the
    /// loop here takes the rest one by one.
    ///
    /// While the OS watches writes (a design with a page cache: [`System::is_plain_watching`]),
    /// the runs test stores against the OS's write-protected frames and stop at a store to one;
    /// the references they stop at, and those the loop takes one by one then, take the general
    /// step ([`System::access`], which copies on write), so `records` must hold every record.
    #[inline(always)]
    fn plain_loop_fa_lru(
        &mut self,
        records: &[Record],
        word: impl Fn(usize) -> u64,
        t: usize,
    ) -> Result<(), (usize, DesignError)> {
        let (mut n, mut n_data) = (0u64, 0u64);
        let len = records.len();
        let mut i = 0;
        // References the runs took, and (with the table) the lookups it did not answer and the
        // uses it deferred, for the choice of the next batch's build.
        let (mut run_refs, mut near_misses, mut deferred) = (0u64, 0u64, 0u64);
        let near = self.m.tlbs.fa_fixed.unwrap_or(self.m.tlbs.fa_near);
        while i < len {
            let watching = self.m.os.watches_writes();
            if watching && !self.plain_watch {
                self.add_lookups(&mut n, &mut n_data);
                return self.process_general(records, i);
            }
            let asid = self.m.front.asid;
            let tlb = &mut self.m.tlbs.structures[t].tlb;
            // Where the run stops is a miss unless it is a slow word (or the end), or a store
            // to a write-protected page.
            let fast = tlb.fa_lru_lookup();
            if fast {
                let mut misses = FaLruMisses::default();
                let from = i;
                let os = &self.m.os;
                let watch = Watch {
                    protected: |pfn| os.is_cow_frame(pfn),
                    stores: |j: usize| matches!(records[j], Record::Access { kind, .. } if kind.is_store()),
                };
                // Four builds of one loop, exactly alike in what they do: one that answers the
                // lookups of recent pages from a table of its own (fast where most lookups are
                // of those and misses are rare: real programs), and one without it; each with
                // the test of stores or without it.
                macro_rules! run {
                    ($walk:expr) => {{
                        macro_rules! build {
                            ($near:literal, $watching:literal, $w:expr) => {
                                tlb.fa_lru_run::<$near, $watching>(
                                    asid,
                                    &word,
                                    i,
                                    len,
                                    &mut n,
                                    &mut n_data,
                                    $walk,
                                    $w,
                                    &mut misses,
                                )
                            };
                        }
                        match (near, watching) {
                            (true, false) => build!(true, false, &NO_WATCH),
                            (false, false) => build!(false, false, &NO_WATCH),
                            (true, true) => build!(true, true, &watch),
                            (false, true) => build!(false, true, &watch),
                        }
                    }};
                }
                i = match &self.m.walk.pt {
                    PageTable::Radix(r) if !self.m.walk.rec.keep_addrs => {
                        let (limit, size) = (self.m.walk.vpn_limit, self.m.page_size);
                        let mut walk = |vpn: u64| {
                            // `plain_miss` of a memoised walk that finds a base-page PTE.
                            r.memoised(asid, Vpn(vpn)).filter(|(p, _)| p.size == size && vpn < limit)
                        };
                        run!(&mut walk)
                    }
                    _ => run!(&mut |_| None),
                };
                run_refs += (i - from) as u64;
                near_misses += misses.near_misses;
                deferred += misses.deferred;
                if misses.fills > 0 {
                    self.count_memoised_misses(t, misses);
                }
                if i == len {
                    break;
                }
            }
            let (r, w) = (i, word(i));
            i += 1;
            if w == SLOW_WORD {
                self.add_lookups(&mut n, &mut n_data);
                self.plain_record(&records[r], [t, t]).map_err(|e| (r, e))?;
                continue;
            }
            if watching {
                // A store to a write-protected page, a miss the run left, or any reference
                // while the runs cannot be taken: the general step.
                self.add_lookups(&mut n, &mut n_data);
                let Record::Access { kind, size, addr } = records[r] else {
                    unreachable!("a page word is an access's")
                };
                self.access(kind, size, addr).map_err(|e| (r, e))?;
                continue;
            }
            n += 1;
            n_data += w & 1;
            let vpn = Vpn(w >> 1);
            if fast || !self.m.tlbs.structures[t].tlb.hits(asid, vpn) {
                if let Err(e) = self.plain_miss(t, asid, vpn) {
                    self.add_lookups(&mut n, &mut n_data);
                    return Err((r, e));
                }
            }
        }
        self.add_lookups(&mut n, &mut n_data);
        if self.m.tlbs.fa_fixed.is_none() {
            if near {
                if run_refs > 0 {
                    self.m.tlbs.fa_near = NEAR_COST * (near_misses + deferred) <= run_refs;
                }
            } else {
                self.m.tlbs.fa_since_near += 1;
                if self.m.tlbs.fa_since_near == NEAR_PROBE {
                    (self.m.tlbs.fa_since_near, self.m.tlbs.fa_near) = (0, true);
                }
            }
        }
        Ok(())
    }

    /// Counts, as [`System::plain_miss`] does, the `misses` of level-1 structure `t` that
    /// [`Tlb::fa_lru_run`](crate::tlb::Tlb::fa_lru_run) filled from memoised walks (which read
    /// `misses.reads` entries in all): each is a walk of depth 0 that found a base-page PTE.
    #[inline(never)]
    fn count_memoised_misses(&mut self, t: usize, misses: FaLruMisses) {
        let s = &mut self.m.stats;
        s.tlb_misses(t, misses.fills);
        s.tlb_fill(t, misses.evictions, 0);
        s.walks(0, misses.fills);
        self.m.walk.rec.replayed(misses.reads);
    }

    /// Adds the lookups [`System::plain_loop`] counted (`n`, of which `n_data` of data
    /// references) to `self.m.lookups`, and zeroes them.
    #[inline(always)]
    fn add_lookups(&mut self, n: &mut u64, n_data: &mut u64) {
        self.m.lookups[0] += *n - *n_data;
        self.m.lookups[1] += *n_data;
        (*n, *n_data) = (0, 0);
    }

    /// A record of a plain design that is not a one-page access: an event, or an access
    /// that spans pages (one lookup per page, ascending, in level-1 structure `tlbs[is_data]`;
    /// the general step while the OS watches writes, as a store may copy on write).
    #[inline(never)]
    fn plain_record(&mut self, r: &Record, tlbs: [usize; 2]) -> Result<(), DesignError> {
        let Record::Access { kind, size, addr } = *r else {
            return self.event(r);
        };
        if self.m.os.watches_writes() {
            return self.access(kind, size, addr);
        }
        let shift = self.m.page_size.shift();
        let is_data = kind.is_data() as usize;
        let (first, last) = (addr >> shift, addr.saturating_add((size as u64).saturating_sub(1)) >> shift);
        let t = tlbs[is_data];
        self.m.lookups[is_data] += last - first + 1;
        let asid = self.m.front.asid;
        for vpn in first..=last {
            if !self.m.tlbs.structures[t].tlb.hits(asid, Vpn(vpn)) {
                self.plain_miss(t, asid, Vpn(vpn))?;
            }
        }
        Ok(())
    }

    /// A miss of a plain design in level-1 structure `t`: the walk, a fault if `vpn` is not
    /// mapped, and the fill. Counts as [`super::machine::Machine::miss`] does.
    #[inline(never)]
    fn plain_miss(&mut self, t: usize, asid: Asid, vpn: Vpn) -> Result<(), DesignError> {
        self.m.stats.tlb_misses(t, 1);
        if vpn.0 >= self.m.walk.vpn_limit {
            return Err(self.m.range_error(vpn));
        }
        self.m.walk.rec.begin_walk();
        let lines_before = self.m.walk.rec.cache_lines;
        let nested_before = self.m.walk.rec.nested_misses;
        // The radix table's walk inline (most sweeps use it), the others through the dispatch;
        // each way to a PTE fills on its own path, so the PTE stays in registers.
        let walked = match &mut self.m.walk.pt {
            PageTable::Radix(r) => r.walk(asid, vpn, &mut NoTlb, &mut self.m.walk.rec),
            pt => pt.walk(asid, vpn, &mut NoTlb, &mut self.m.walk.rec),
        };
        if let Some(pte) = walked {
            self.m.walk_found(pte, nested_before, lines_before);
            self.plain_fill(t, asid, vpn, pte);
            return Ok(());
        }
        let pte = self.m.walk_fault(asid, vpn, nested_before, lines_before)?;
        self.plain_fill(t, asid, vpn, pte);
        Ok(())
    }

    /// The fill of [`System::plain_miss`].
    #[inline(always)]
    fn plain_fill(&mut self, t: usize, asid: Asid, vpn: Vpn, pte: crate::pt::Pte) {
        let (evicted, merged) = self.m.tlbs.structures[t].tlb.fill_outcome(asid.0, vpn, pte);
        self.m.stats.tlb_fill(t, evicted as u64, merged as u64);
    }
}

/// Takes references `word(i)` from `i` while the filter `runs[pick(word)]` answers each,
/// counting them (`n`, of which `n_data` data references); returns where it stopped.
#[inline(always)]
fn filter_hits<const N: usize>(
    runs: &mut [FilterRun; N],
    pick: impl Fn(u64) -> usize,
    word: &impl Fn(usize) -> u64,
    mut i: usize,
    len: usize,
    n: &mut u64,
    n_data: &mut u64,
) -> usize {
    while i < len {
        let w = word(i);
        if !runs[pick(w)].hit(w >> 1) {
            break;
        }
        *n += 1;
        *n_data += w & 1;
        i += 1;
    }
    i
}
