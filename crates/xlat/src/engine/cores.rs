//! Several simulated cores (`[cores] count > 1`, docs/multicore.md): the scheduler that places
//! each software thread (process, thread) of the one serialized trace on a core, each core's
//! private TLB structures and cache levels, its dynamic ASIDs, and the TLB shootdowns that a
//! change of an address space sends to the other cores (`[os.shootdown]`).
//!
//! The machine keeps the running core's private structures and levels in its own fields; when
//! the trace moves to a thread on another core they are exchanged with that core's (events
//! only, never per reference). Structures and levels with `shared = true` stay where they are
//! and serve every core. A design with one core has no `Cores` and runs none of this.

use super::machine::Machine;
use crate::addr::{Asid, Vpn};
use crate::cache::{CacheStats, Level};
use crate::multicore::{AsidRecycling, Scheduler, ShootdownPolicy};
use crate::stats::{CoreStats, ShootdownStats, TlbStats};
use crate::tlb::Tlb;
use std::collections::HashMap;

use super::core_set::{Core, Cores, FIRST_THREAD};

impl Cores {
    /// The cores of a machine with these structures and caches; `None` with one core.
    pub(crate) fn new(m: &Machine, config: &crate::config::Config) -> Option<Box<Cores>> {
        let cfg = config.cores.clone();
        if cfg.count <= 1 {
            return None;
        }
        let private_tlbs: Vec<usize> = (0..m.tlbs.structures.len())
            .filter(|&t| {
                // A reserved partition belongs to its structure.
                let name = m.tlbs.structures[t].name.trim_end_matches(".reserved");
                !config.tlb.iter().any(|c| c.name == name && c.shared)
            })
            .collect();
        let private_levels: Vec<usize> =
            config.cache.iter().enumerate().filter(|(_, c)| !c.shared).map(|(i, _)| i).collect();
        let levels: Vec<Level> = match m.mem.timed() {
            Some(t) => private_levels.iter().map(|&i| t.h.levels()[i].clone()).collect(),
            None => Vec::new(),
        };
        let n_levels = m.mem.timed().map_or(0, |t| t.h.levels().len());
        let core = Core {
            tlbs: private_tlbs.iter().map(|&t| m.tlbs.structures[t].tlb.clone()).collect(),
            levels,
            thread: None,
            held: false,
            space: None,
            asids: Vec::new(),
            next_slot: 0,
            stale: Vec::new(),
            pending: Vec::new(),
            st: CoreStats {
                tlb: vec![TlbStats::default(); m.tlbs.structures.len()],
                caches: vec![CacheStats::default(); n_levels],
                ..CoreStats::default()
            },
            snap_tlb: vec![TlbStats::default(); m.tlbs.structures.len()],
            snap_lookups: [0; 2],
            snap_caches: vec![CacheStats::default(); n_levels],
        };
        let mut cores = vec![core; cfg.count as usize];
        // Before any scheduling record, the first process's first thread runs on core 0 (it
        // takes its place in the order of threads when a scheduling record names it).
        let first = (m.front.asid.0, FIRST_THREAD);
        cores[0].thread = Some(first);
        cores[0].held = true;
        Some(Box::new(Cores {
            cores,
            cfg: cfg.clone(),
            sd: config.os.shootdown.clone(),
            flush_on_switch: config.asid == crate::config::AsidMode::Flush,
            private_tlbs,
            private_levels,
            running: 0,
            threads: HashMap::new(),
            last_tid: HashMap::new(),
            current: Some(first),
            cursor: 0,
            next_tick: cfg.quantum,
            clock: 0,
            exiting: false,
        }))
    }
}

fn cache_delta(into: &mut CacheStats, a: &CacheStats, b: &CacheStats) {
    into.accesses += a.accesses - b.accesses;
    into.misses += a.misses - b.misses;
    into.read_misses += a.read_misses - b.read_misses;
    into.write_misses += a.write_misses - b.write_misses;
    into.writebacks += a.writebacks - b.writebacks;
}

impl Machine {
    /// With several cores: the scheduling records (`Process`, `ContextSwitch`, `Thread`) place
    /// the thread they name on a core; every event first takes the timer tick if one is due.
    /// True if the record was a scheduling record (handled here).
    pub(crate) fn cores_event(&mut self, r: &crate::trace::Record) -> bool {
        use crate::trace::Record;
        let mut c = self.cores.take().expect("several cores");
        let now = self.lookups[0] + self.lookups[1];
        if now >= c.next_tick {
            c.next_tick = (now / c.cfg.quantum + 1).saturating_mul(c.cfg.quantum);
            self.tick(&mut c);
        }
        let handled = match *r {
            Record::Process { asid } | Record::ContextSwitch { asid } => {
                let tid = c.last_tid.get(&asid).copied().unwrap_or(FIRST_THREAD);
                self.run_thread(&mut c, (asid, tid));
                true
            }
            Record::Thread { tid } => {
                let asid = self.front.asid.0;
                match c.current {
                    Some((a, FIRST_THREAD)) if a == asid => {
                        // The process's first thread is named: the same thread, renamed.
                        let order = c.threads.remove(&(a, FIRST_THREAD));
                        if let Some(o) = order {
                            c.threads.entry((a, tid)).or_insert(o);
                        }
                        for core in &mut c.cores {
                            if core.thread == Some((a, FIRST_THREAD)) {
                                core.thread = Some((a, tid));
                            }
                        }
                        c.current = Some((a, tid));
                        c.last_tid.insert(a, tid);
                    }
                    _ => self.run_thread(&mut c, (asid, tid)),
                }
                true
            }
            _ => false,
        };
        self.cores = Some(c);
        handled
    }

    /// A timer tick on every core: `lazy` invalidations are done, and round-robin placements
    /// end (but the running thread's).
    fn tick(&mut self, c: &mut Cores) {
        for i in 0..c.cores.len() {
            self.apply_pending(c, i);
            if i != c.running {
                c.cores[i].held = false;
            }
        }
    }

    /// Thread `key` runs from now on.
    fn run_thread(&mut self, c: &mut Cores, key: (u32, u32)) {
        c.last_tid.insert(key.0, key.1);
        if c.current == Some(key) {
            return;
        }
        let n = c.cores.len();
        let order = c.threads.len();
        let order = *c.threads.entry(key).or_insert(order);
        let core = match c.cfg.scheduler {
            Scheduler::Pinned => order % n,
            Scheduler::RoundRobin => match c.cores.iter().position(|k| k.thread == Some(key) && k.held) {
                Some(i) => i,
                None => {
                    let i = c.cursor;
                    c.cursor = (c.cursor + 1) % n;
                    i
                }
            },
        };
        c.current = Some(key);
        if c.cores[core].thread != Some(key) {
            for (i, k) in c.cores.iter_mut().enumerate() {
                if i != core && k.thread == Some(key) {
                    k.thread = None;
                }
            }
            c.cores[core].thread = Some(key);
            c.cores[core].st.switches += 1;
            // A context switch on the core: `lazy` invalidations are done.
            self.move_to(c, core);
            self.apply_pending(c, core);
        } else {
            self.move_to(c, core);
        }
        c.cores[core].held = true;
        self.load_space(c, core, key.0);
        if self.front.asid.0 != key.0 {
            self.pt_census_sample();
            self.front.switch_to(key.0);
            let mut purged = false;
            // No regions with several cores (validated): loading tags cannot fail or purge.
            let _ = self.front.load_tags(&mut purged, &self.name);
        }
    }

    /// Core `to` becomes the running core: the running core's private structures and levels
    /// go to its store, `to`'s come out of its own.
    fn move_to(&mut self, c: &mut Cores, to: usize) {
        let from = c.running;
        if from == to {
            return;
        }
        // The running core's counters since it started running.
        {
            let k = &mut c.cores[from];
            for (t, s) in self.stats.tlb.iter().enumerate() {
                k.st.tlb[t].add_delta(s, &k.snap_tlb[t]);
            }
            k.st.ifetch_lookups += self.lookups[0] - k.snap_lookups[0];
            k.st.lookups += (self.lookups[0] + self.lookups[1]) - (k.snap_lookups[0] + k.snap_lookups[1]);
            if let Some(t) = self.mem.timed() {
                for (i, s) in t.h.stats().iter().enumerate() {
                    cache_delta(&mut k.st.caches[i], s, &k.snap_caches[i]);
                }
            }
        }
        for (j, &t) in c.private_tlbs.iter().enumerate() {
            std::mem::swap(&mut self.tlbs.structures[t].tlb, &mut c.cores[from].tlbs[j]);
            std::mem::swap(&mut self.tlbs.structures[t].tlb, &mut c.cores[to].tlbs[j]);
        }
        if let Some(t) = self.mem.timed_mut() {
            for (j, &i) in c.private_levels.iter().enumerate() {
                std::mem::swap(t.h.level_mut(i), &mut c.cores[from].levels[j]);
                std::mem::swap(t.h.level_mut(i), &mut c.cores[to].levels[j]);
            }
        }
        c.running = to;
        let k = &mut c.cores[to];
        k.snap_tlb.clone_from(&self.stats.tlb);
        k.snap_lookups = self.lookups;
        if let Some(t) = self.mem.timed() {
            k.snap_caches = t.h.stats();
        }
    }

    /// Applies `f` to core `core`'s private TLB structures (the machine's if it runs),
    /// counting the entries it removes as invalidations of that core; returns them.
    fn on_core_tlbs(&mut self, c: &mut Cores, core: usize, mut f: impl FnMut(&mut Tlb) -> u64) -> u64 {
        let mut all = 0;
        for (j, &t) in c.private_tlbs.iter().enumerate() {
            let n = if core == c.running {
                // Counted by the running core's own counters.
                f(&mut self.tlbs.structures[t].tlb)
            } else {
                let n = f(&mut c.cores[core].tlbs[j]);
                c.cores[core].st.tlb[t].invalidations += n;
                // Not the running core's: kept out of its counters.
                c.cores[c.running].snap_tlb[t].invalidations += n;
                n
            };
            self.stats.tlb[t].invalidations += n;
            all += n;
        }
        all
    }

    /// Core `core` (running) loads address space `space`: flush on switch, or its dynamic
    /// ASIDs (a new space takes a free one, else recycles one and flushes its entries); and
    /// the entries of a space it was not interrupted for are flushed now.
    fn load_space(&mut self, c: &mut Cores, core: usize, space: u32) {
        c.clock += 1;
        let clock = c.clock;
        if c.cores[core].space != Some(space) {
            c.cores[core].st.space_switches += 1;
            if self.flush_on_switch_core(c, core) {
                c.cores[core].asids.clear();
            }
        }
        c.cores[core].space = Some(space);
        let k = &mut c.cores[core];
        if let Some(a) = k.asids.iter_mut().find(|a| a.0 == space) {
            a.1 = clock;
        } else {
            let limit = c.cfg.asids_per_core as usize;
            if limit == 0 || k.asids.len() < limit {
                k.asids.push((space, clock));
            } else {
                let slot = match c.cfg.asid_recycling {
                    AsidRecycling::Lru => (0..k.asids.len()).min_by_key(|&i| k.asids[i].1).expect("at least one ASID"),
                    AsidRecycling::RoundRobin => {
                        let s = k.next_slot % k.asids.len();
                        k.next_slot = s + 1;
                        s
                    }
                };
                let old = k.asids[slot].0;
                k.asids[slot] = (space, clock);
                k.stale.retain(|&s| s != old);
                k.st.asid_flushes += 1;
                self.on_core_tlbs(c, core, |t| t.flush_asid(Asid(old)));
            }
        }
        if let Some(i) = c.cores[core].stale.iter().position(|&s| s == space) {
            c.cores[core].stale.swap_remove(i);
            let n = self.on_core_tlbs(c, core, |t| t.flush_asid(Asid(space)));
            self.count_target(c, core, n, true);
        }
    }

    /// With `asid = "flush"`: core `core` flushes its private structures (it loads another
    /// space). True if it did.
    fn flush_on_switch_core(&mut self, c: &mut Cores, core: usize) -> bool {
        if !c.flush_on_switch {
            return false;
        }
        self.stats.events.flushes += 1;
        c.cores[core].st.asid_flushes += 1;
        self.on_core_tlbs(c, core, |t| t.flush_non_global());
        c.cores[core].stale.clear();
        true
    }

    /// `n` entries a target core invalidated for a shootdown, one by one or (`whole`) by
    /// flushing the address space: its counters and cycles (`entry_cycles` per entry, or
    /// `flush_cycles` per flush).
    fn count_target(&mut self, c: &mut Cores, core: usize, n: u64, whole: bool) {
        let cost = if whole { c.sd.flush_cycles } else { crate::limits::times(n, c.sd.entry_cycles) };
        let s = &mut c.cores[core].st.shootdowns;
        s.entries_invalidated += n;
        s.target_cycles = s.target_cycles.saturating_add(cost);
    }

    /// `lazy`: core `core` invalidates the ranges shot down since its last switch or tick.
    fn apply_pending(&mut self, c: &mut Cores, core: usize) {
        if c.cores[core].pending.is_empty() {
            return;
        }
        let pending = std::mem::take(&mut c.cores[core].pending);
        let mut n = 0;
        for &(tag, first, last) in &pending {
            n += self.on_core_tlbs(c, core, |t| t.invalidate_range(tag, first, last));
        }
        self.count_target(c, core, n, false);
    }

    /// The other cores' part of one shootdown of `ranges` (the running core, the initiator,
    /// has invalidated them in its own and the shared structures). Returns true if the
    /// initiator flushes the spaces whole instead (`linux` above the ceiling), which the
    /// caller then does.
    pub(crate) fn cores_shootdown(&mut self, ranges: &[(Asid, Vpn, Vpn)]) -> bool {
        let mut c = self.cores.take().expect("several cores");
        if c.exiting {
            self.cores = Some(c);
            return false;
        }
        let global = super::front::GLOBAL_SPACE;
        let tag_of = |a: Asid| if a == global { Asid(crate::tlb::GLOBAL) } else { a };
        let pages = ranges.iter().fold(0u64, |p, &(_, f, l)| p.saturating_add((l.0 - f.0).saturating_add(1)));
        let policy = c.sd.policy;
        let full = policy == ShootdownPolicy::Linux && pages > c.sd.flush_ceiling;
        let me = c.running;
        let mut sent = ShootdownStats { initiated: 1, pages, full_flushes: full as u64, ..Default::default() };
        for core in 0..c.cores.len() {
            if core == me {
                continue;
            }
            // Could hold an entry of a range: it loaded the space, or holds its ASID.
            let holds =
                |k: &Core, a: Asid| a == global || k.space == Some(a.0) || k.asids.iter().any(|&(s, _)| s == a.0);
            match policy {
                ShootdownPolicy::Linux => {
                    let k = &c.cores[core];
                    // Active: it runs one of the space's threads. A core whose thread moved to
                    // another core runs none: it keeps the space loaded, lazily.
                    let runs = |a: Asid| k.space == Some(a.0) && k.thread.is_some_and(|(p, _)| p == a.0);
                    let active = ranges.iter().any(|&(a, ..)| a == global || runs(a));
                    let lazy = !active && ranges.iter().any(|&(a, ..)| holds(k, a));
                    if active || (lazy && c.sd.lazy_cores) {
                        let mut n = 0;
                        for &(a, f, l) in ranges {
                            n += self.on_core_tlbs(&mut c, core, |t| t.invalidate_range(tag_of(a), f, l));
                        }
                        let held = n > 0;
                        if full {
                            for &(a, ..) in ranges {
                                n += self.on_core_tlbs(&mut c, core, |t| t.flush_asid(tag_of(a)));
                            }
                        }
                        sent.ipis += 1;
                        sent.necessary_ipis += held as u64;
                        self.count_target(&mut c, core, n, full);
                    } else if lazy {
                        for &(a, ..) in ranges {
                            if holds(&c.cores[core], a) && !c.cores[core].stale.contains(&a.0) {
                                c.cores[core].stale.push(a.0);
                            }
                        }
                    }
                }
                ShootdownPolicy::Ideal => {
                    let mut n = 0;
                    for &(a, f, l) in ranges {
                        n += self.on_core_tlbs(&mut c, core, |t| t.invalidate_range(tag_of(a), f, l));
                    }
                    if n > 0 {
                        sent.ipis += 1;
                        sent.necessary_ipis += 1;
                        self.count_target(&mut c, core, n, false);
                    }
                }
                ShootdownPolicy::Lazy => {
                    for &(a, f, l) in ranges {
                        if holds(&c.cores[core], a) {
                            c.cores[core].pending.push((tag_of(a), f, l));
                        }
                    }
                }
            }
        }
        if sent.ipis > 0 {
            sent.initiator_cycles =
                crate::limits::sum([c.sd.initiator_cycles, crate::limits::times(sent.ipis, c.sd.ipi_cycles)]);
        }
        // Cycles of the targets' IPIs are their entries' (counted above).
        c.cores[me].st.shootdowns.add(&sent);
        self.cores = Some(c);
        full
    }

    /// Process `space` exits: every core flushes its entries, frees its ASID and forgets its
    /// threads.
    pub(crate) fn cores_exit(&mut self, space: u32) {
        let mut c = self.cores.take().expect("several cores");
        for core in 0..c.cores.len() {
            self.on_core_tlbs(&mut c, core, |t| t.flush_asid(Asid(space)));
            let k = &mut c.cores[core];
            k.asids.retain(|&(s, _)| s != space);
            k.stale.retain(|&s| s != space);
            k.pending.retain(|&(a, ..)| a.0 != space);
            if k.thread.is_some_and(|(a, _)| a == space) {
                k.thread = None;
                k.held = false;
            }
            if k.space == Some(space) {
                k.space = None;
            }
        }
        if c.current.is_some_and(|(a, _)| a == space) {
            c.current = None;
        }
        c.threads.retain(|&(a, _), _| a != space);
        c.last_tid.remove(&space);
        self.cores = Some(c);
    }

    /// Each core's counters now (the running core's up to this moment), and the shootdowns'
    /// totals; the cache totals of all cores (their private levels' added up).
    pub(crate) fn cores_stats(&self) -> Option<(Vec<CoreStats>, ShootdownStats, Vec<CacheStats>)> {
        let c = self.cores.as_deref()?;
        let mut out: Vec<CoreStats> = c.cores.iter().map(|k| k.st.clone()).collect();
        let k = &c.cores[c.running];
        let o = &mut out[c.running];
        for (t, s) in self.stats.tlb.iter().enumerate() {
            o.tlb[t].add_delta(s, &k.snap_tlb[t]);
        }
        o.ifetch_lookups += self.lookups[0] - k.snap_lookups[0];
        o.lookups += (self.lookups[0] + self.lookups[1]) - (k.snap_lookups[0] + k.snap_lookups[1]);
        if let Some(t) = self.mem.timed() {
            for (i, s) in t.h.stats().iter().enumerate() {
                cache_delta(&mut o.caches[i], s, &k.snap_caches[i]);
            }
        }
        let (ifirst, dfirst) = (self.tlbs.ipath.first(), self.tlbs.dpath.first());
        let mut total = ShootdownStats::default();
        let mut caches = vec![CacheStats::default(); o.caches.len()];
        for o in &mut out {
            o.tlb[ifirst].accesses += o.ifetch_lookups;
            o.tlb[dfirst].accesses += o.lookups - o.ifetch_lookups;
            for t in &mut o.tlb {
                t.hits = t.accesses - t.misses;
            }
            for (sum, x) in caches.iter_mut().zip(&mut o.caches) {
                x.hits = x.accesses - x.misses;
                cache_delta(sum, x, &CacheStats::default());
            }
            total.add(&o.shootdowns);
        }
        for x in &mut caches {
            x.hits = x.accesses - x.misses;
        }
        Some((out, total, caches))
    }
}
