//! Several cores (docs/multicore.md) against an independent reference model, on the bundled
//! real multi-threaded trace `data/churn.xtr` (and the multi-process `data/shmserve.xtr`).
//!
//! The reference below is written from docs/multicore.md's text, not from the engine: it reads
//! the trace with the library's reader and nothing else of the library (no engine, TLB, OS,
//! page-table or multicore code). It simulates thread placement (pinned, round-robin with timer
//! ticks); TLBs tagged by address space, LRU, fully or set-associative: a private level 1 per
//! core (unified, or split into instruction and data structures) and optionally a unified
//! level 2, private to each core or one shared by all (a level-2 hit fills level 1; a miss
//! everywhere fills every level; the initiator of a shootdown invalidates the shared level, and
//! no core's own flush touches it); each core's
//! dynamic ASIDs (LRU and round-robin recycling, the flush on recycle, `asid = "flush"`), and
//! shootdowns under `linux` (lazy cores skipped or interrupted, the flush ceiling), `ideal` and
//! `lazy`, with every per-core counter. The design keeps the OS model's own changes out: base
//! pages, no page cache (so no copy on write), no reservations, superpages, shadow superpages or
//! layout, and `fork_flush = "none"`. Then the only shootdowns are the trace's own address-space
//! events (docs/multicore.md, "Shootdowns"):
//!
//! - an `Unmap` of a range holding a resident page: one shootdown of the range's pages;
//! - a `Discard` (`madvise`) of a range holding a resident page: one shootdown of its pages
//!   (the pages go, unless `lazy`);
//! - a `Protect` that removes a right from pieces of the range holding a resident page: one
//!   shootdown of those pieces' pages (pieces never mapped had every right);
//! - an `Exit` shoots nothing down: the process's entries go from every core.
//!
//! A page is resident from its first touch (or its parent's, for a forked child) until it is
//! unmapped or discarded, or its process exits.

use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;
use xlat::config::Config;
use xlat::engine::System;
use xlat::stats::{SystemStats, TlbStats};
use xlat::trace::{map_flags::RIGHTS, Kind, Record};

/// A process's thread before its first `Thread` record names it.
const FIRST: u32 = u32::MAX;
const SHIFT: u32 = 12;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Policy {
    Linux,
    Ideal,
    Lazy,
}

/// One design of the grid.
#[derive(Clone, Copy, Debug)]
struct Params {
    cores: usize,
    pinned: bool,
    quantum: u64,
    /// 0: unlimited.
    asids: usize,
    lru: bool,
    /// `asid = "flush"`.
    flush: bool,
    policy: Policy,
    lazy_cores: bool,
    ceiling: u64,
    /// Level 1: one unified structure, or (`split`: the instruction structure's geometry) one
    /// for instruction fetches and one (this) for data.
    l1: Geo,
    split: Option<Geo>,
    /// A second level (unified), private to each core or shared by all.
    l2: Option<(Geo, bool)>,
}

/// A TLB's geometry: entries and ways (`ways == entries`: fully associative), LRU.
#[derive(Clone, Copy, Debug)]
struct Geo {
    entries: usize,
    ways: usize,
}

/// A fully associative TLB of `entries` entries.
const fn fa(entries: usize) -> Geo {
    Geo { entries, ways: entries }
}

impl Params {
    fn config(&self) -> Config {
        let text = format!(
            "name = \"ref\"\nasid = \"{}\"\n[os]\npage_cache = false\n[os.shootdown]\npolicy = \"{}\"\nlazy_cores = {}\n\
             flush_ceiling = {}\ninitiator_cycles = {INITIATOR}\nipi_cycles = {IPI}\nentry_cycles = {ENTRY}\n\
             flush_cycles = {FLUSH}\n[cores]\ncount = {}\nscheduler = \"{}\"\nquantum = {}\nasids_per_core = {}\n\
             asid_recycling = \"{}\"\n{}",
            if self.flush { "flush" } else { "tagged" },
            match self.policy {
                Policy::Linux => "linux",
                Policy::Ideal => "ideal",
                Policy::Lazy => "lazy",
            },
            self.lazy_cores,
            self.ceiling,
            self.cores,
            if self.pinned { "pinned" } else { "round-robin" },
            self.quantum,
            self.asids,
            if self.lru { "lru" } else { "round-robin" },
            self.tlbs(),
        );
        Config::from_toml(&text, "cores_ref").unwrap()
    }

    /// The `[[tlb]]` tables, in the reference's structure order: level 1 (unified, or
    /// instruction then data), then level 2.
    fn tlbs(&self) -> String {
        let one = |name: &str, g: Geo, extra: &str| {
            format!("[[tlb]]\nname = \"{name}\"\nentries = {}\nways = {}\n{extra}", g.entries, g.ways)
        };
        let mut out = match self.split {
            Some(i) => one("L1I", i, "serves = \"instruction\"\n") + &one("L1D", self.l1, "serves = \"data\"\n"),
            None => one("L1", self.l1, ""),
        };
        if let Some((g, shared)) = self.l2 {
            out += &one("L2", g, &format!("level = 2\nshared = {shared}\n"));
        }
        out
    }

    /// How many structures the design has.
    fn structures(&self) -> usize {
        1 + self.split.is_some() as usize + self.l2.is_some() as usize
    }
}

/// A set-associative LRU TLB of (space, page) entries: the set of page `p` is `p mod sets`;
/// each set lists its entries least recently used first, and a fill evicts only from a full set.
#[derive(Clone, Debug)]
struct Tlb {
    ways: usize,
    sets: Vec<Vec<(u32, u64)>>,
}

impl Tlb {
    fn new(g: Geo) -> Tlb {
        assert_eq!(g.entries % g.ways, 0);
        Tlb { ways: g.ways, sets: vec![Vec::new(); g.entries / g.ways] }
    }

    fn set(&mut self, page: u64) -> &mut Vec<(u32, u64)> {
        let n = self.sets.len() as u64;
        &mut self.sets[(page % n) as usize]
    }

    fn hit(&mut self, space: u32, page: u64) -> bool {
        let set = self.set(page);
        match set.iter().position(|&e| e == (space, page)) {
            Some(i) => {
                let e = set.remove(i);
                set.push(e);
                true
            }
            None => false,
        }
    }

    /// Fills an entry; true if it evicted one.
    fn fill(&mut self, space: u32, page: u64) -> bool {
        let ways = self.ways;
        let set = self.set(page);
        let full = set.len() == ways;
        if full {
            set.remove(0);
        }
        set.push((space, page));
        full
    }

    fn drop_where(&mut self, f: impl Fn(&(u32, u64)) -> bool) -> u64 {
        let mut n = 0;
        for set in &mut self.sets {
            let before = set.len();
            set.retain(|e| !f(e));
            n += (before - set.len()) as u64;
        }
        n
    }

    fn drop_range(&mut self, space: u32, first: u64, last: u64) -> u64 {
        self.drop_where(|&(s, p)| s == space && first <= p && p <= last)
    }

    fn drop_space(&mut self, space: u32) -> u64 {
        self.drop_where(|&(s, _)| s == space)
    }
}

/// A core's own flushes, which leave the shared level alone.
#[derive(Clone, Copy, Debug)]
enum Kept {
    /// `asid = "flush"`.
    SwitchFlush,
    /// An ASID recycled.
    Recycle,
    /// A lazy core (`linux`) catching up.
    CatchUp,
    /// `lazy` ranges invalidated at a switch or tick.
    Pending,
}

/// Marks the shared level's entries that satisfy `f` as left there by flush `why`.
fn mark(shared: &Option<Tlb>, kept: &mut HashMap<(u32, u64), Kept>, why: Kept, f: impl Fn(&(u32, u64)) -> bool) {
    for &e in shared.iter().flat_map(|t| t.sets.iter().flatten()).filter(|e| f(e)) {
        kept.insert(e, why);
    }
}

/// `a.f += b.f` for each field `f` named.
macro_rules! add_fields {
    ($a:ident, $b:ident; $($f:ident),*) => {
        $($a.$f += $b.$f;)*
    };
}

/// One structure's counters.
#[derive(Clone, Debug, Default, PartialEq)]
struct Level {
    accesses: u64,
    hits: u64,
    misses: u64,
    evictions: u64,
    invalidations: u64,
}

impl Level {
    fn add(&mut self, o: &Level) {
        add_fields!(self, o; accesses, hits, misses, evictions, invalidations);
    }
}

/// What the tests compare, per core (and summed).
#[derive(Clone, Debug, Default, PartialEq)]
struct Counts {
    lookups: u64,
    ifetch_lookups: u64,
    /// Per structure, in the design's order.
    tlb: Vec<Level>,
    switches: u64,
    space_switches: u64,
    asid_flushes: u64,
    initiated: u64,
    ipis: u64,
    necessary_ipis: u64,
    full_flushes: u64,
    pages: u64,
    entries_invalidated: u64,
    initiator_cycles: u64,
    target_cycles: u64,
}

/// Shootdown costs of every design of the grid: distinct primes, so that a cost charged
/// under the wrong key or count shows.
const INITIATOR: u64 = 1009;
const IPI: u64 = 101;
const ENTRY: u64 = 7;
const FLUSH: u64 = 53;

impl Counts {
    fn add(&mut self, o: &Counts) {
        add_fields!(self, o;
            lookups, ifetch_lookups, switches, space_switches, asid_flushes, initiated, ipis,
            necessary_ipis, full_flushes, pages, entries_invalidated, initiator_cycles,
            target_cycles
        );
        self.tlb.resize(o.tlb.len().max(self.tlb.len()), Level::default());
        for (a, b) in self.tlb.iter_mut().zip(&o.tlb) {
            a.add(b);
        }
    }
}

/// How often the grid reached each mechanism (the reference's own tallies, and sums of the
/// counts), so that agreeing on it cannot be vacuous.
#[derive(Clone, Debug, Default)]
struct Seen {
    ipis: u64,
    necessary_ipis: u64,
    unnecessary_ipis: u64,
    full_flushes: u64,
    asid_flushes: u64,
    evictions: u64,
    switches: u64,
    lazy_entries: u64,
    /// `ideal` IPIs to a core that had not loaded the space.
    ideal_elsewhere: u64,
    ticks_ending: u64,
    kept: u64,
    stale_flushes: u64,
    lazy_core_ipis: u64,
    pending_at_switch: u64,
    pending_at_tick: u64,
    lru_recycles: u64,
    rr_recycles: u64,
    protects: u64,
    discards: u64,
    unmaps: u64,
    forks: u64,
    exits: u64,
    /// Level-2 hits (which fill level 1) in a private level 2, and in a shared one.
    private_l2_hits: u64,
    shared_hits: u64,
    /// Shared-level hits on an entry another core filled.
    shared_hits_of_others: u64,
    /// Shared-level entries invalidated by an initiator: a shootdown's ranges, a flush of the
    /// space above the ceiling, an exit.
    shared_shootdown: u64,
    shared_full_flush: u64,
    shared_exit: u64,
    /// Shared-level hits on entries a core's own flush left there (which it would have
    /// removed, were the level its own), by flush: [`Kept`].
    shared_kept: [u64; 4],
    /// Entries a shootdown's targets invalidated in their private level 2.
    private_l2_targets: u64,
}

impl Seen {
    fn add(&mut self, o: &Seen) {
        add_fields!(self, o;
            ideal_elsewhere, ticks_ending, kept, stale_flushes, lazy_core_ipis, pending_at_switch,
            pending_at_tick, lru_recycles, rr_recycles, protects, discards, unmaps, forks, exits,
            private_l2_hits, shared_hits, shared_hits_of_others, shared_shootdown,
            shared_full_flush, shared_exit, private_l2_targets
        );
        for (a, b) in self.shared_kept.iter_mut().zip(o.shared_kept) {
            *a += b;
        }
    }
}

#[derive(Clone, Debug)]
struct Core {
    /// Its private structures, in the design's order: level 1, and level 2 unless shared.
    tlbs: Vec<Tlb>,
    /// The thread placed on it.
    thread: Option<(u32, u32)>,
    /// Round-robin: no timer tick has ended the placement yet.
    held: bool,
    /// The address space it has loaded.
    space: Option<u32>,
    /// Spaces holding one of its ASIDs: least recently loaded first under LRU recycling, in
    /// slot order under round-robin.
    asids: Vec<u32>,
    /// Round-robin recycling: the slot taken next.
    turn: usize,
    /// `linux`: spaces it skipped as a lazy core, flushed when it next loads them.
    stale: Vec<u32>,
    /// `lazy`: ranges to invalidate at its next switch or tick.
    pending: Vec<(u32, u64, u64)>,
    n: Counts,
}

impl Core {
    /// Applies `f` to each of its private structures, counting the entries it removes as its
    /// invalidations; returns them.
    fn drop_private(&mut self, f: impl Fn(&mut Tlb) -> u64) -> u64 {
        let mut all = 0;
        for (t, tlb) in self.tlbs.iter_mut().enumerate() {
            let n = f(tlb);
            self.n.tlb[t].invalidations += n;
            all += n;
        }
        all
    }
}

/// The reference machine.
struct Model {
    p: Params,
    cores: Vec<Core>,
    running: usize,
    /// The running process.
    process: u32,
    current: Option<(u32, u32)>,
    /// Threads in order of first appearance.
    order: HashMap<(u32, u32), usize>,
    last_tid: HashMap<u32, u32>,
    cursor: usize,
    lookups: u64,
    next_tick: u64,
    resident: BTreeSet<(u32, u64)>,
    /// Per process: mapped byte ranges [start, end) with their rights, sorted, disjoint.
    rights: HashMap<u32, Vec<(u64, u64, u32)>>,
    faults: u64,
    /// The second level when one structure is shared by every core (the design's last).
    shared: Option<Tlb>,
    /// The shared level's entries: the core that filled each.
    filled_by: HashMap<(u32, u64), usize>,
    /// Shared-level entries a core's own flush left there, by flush, until they are hit or
    /// filled again.
    kept: HashMap<(u32, u64), Kept>,
    seen: Seen,
}

impl Model {
    fn new(p: Params) -> Model {
        let mut tlbs: Vec<Tlb> = p.split.into_iter().chain([p.l1]).map(Tlb::new).collect();
        let shared = match p.l2 {
            Some((g, true)) => Some(Tlb::new(g)),
            Some((g, false)) => {
                tlbs.push(Tlb::new(g));
                None
            }
            None => None,
        };
        let core = Core {
            tlbs,
            thread: None,
            held: false,
            space: None,
            asids: Vec::new(),
            turn: 0,
            stale: Vec::new(),
            pending: Vec::new(),
            n: Counts { tlb: vec![Level::default(); p.structures()], ..Counts::default() },
        };
        let mut cores = vec![core; p.cores];
        // Before any scheduling record, process 0's first thread runs on core 0.
        cores[0].thread = Some((0, FIRST));
        cores[0].held = true;
        Model {
            p,
            cores,
            running: 0,
            process: 0,
            current: Some((0, FIRST)),
            order: HashMap::new(),
            last_tid: HashMap::new(),
            cursor: 0,
            lookups: 0,
            next_tick: p.quantum,
            resident: BTreeSet::new(),
            rights: HashMap::new(),
            faults: 0,
            shared,
            filled_by: HashMap::new(),
            kept: HashMap::new(),
            seen: Seen::default(),
        }
    }

    /// Applies `f` to the shared level, if any. Its counters, like every counter of a shared
    /// structure, are the running core's: lookups, hits, misses and evictions of the references
    /// its thread makes, and invalidations of the shootdowns it initiates (which invalidate
    /// the shared level at once, in the initiator's stead) and of the exits it runs. So per-core
    /// counts add up to the totals, as with private structures. Returns the entries removed.
    fn drop_shared(&mut self, f: impl Fn(&mut Tlb) -> u64) -> u64 {
        let Some(tlb) = &mut self.shared else {
            return 0;
        };
        let n = f(tlb);
        let t = self.p.structures() - 1;
        self.cores[self.running].n.tlb[t].invalidations += n;
        n
    }

    fn record(&mut self, r: &Record) {
        if let Record::Access { kind, size, addr } = *r {
            let first = addr >> SHIFT;
            let last = addr.saturating_add(size.max(1) as u64 - 1) >> SHIFT;
            for page in first..=last {
                self.lookup(kind != Kind::Ifetch, page);
            }
            return;
        }
        // Every other record is an event: a timer tick due is taken first.
        if self.lookups >= self.next_tick {
            self.next_tick = (self.lookups / self.p.quantum + 1) * self.p.quantum;
            for i in 0..self.cores.len() {
                self.seen.pending_at_tick += self.apply_pending(i);
                if i != self.running {
                    self.seen.ticks_ending += (self.cores[i].held && self.cores[i].thread.is_some()) as u64;
                    self.cores[i].held = false;
                }
            }
        }
        match *r {
            Record::Process { asid } | Record::ContextSwitch { asid } => {
                let tid = self.last_tid.get(&asid).copied().unwrap_or(FIRST);
                self.run((asid, tid));
            }
            Record::Thread { tid } => {
                let a = self.process;
                if self.current == Some((a, FIRST)) {
                    // The first thread is named: the same thread.
                    if let Some(o) = self.order.remove(&(a, FIRST)) {
                        self.order.entry((a, tid)).or_insert(o);
                    }
                    for k in &mut self.cores {
                        if k.thread == Some((a, FIRST)) {
                            k.thread = Some((a, tid));
                        }
                    }
                    self.current = Some((a, tid));
                    self.last_tid.insert(a, tid);
                } else {
                    self.run((a, tid));
                }
            }
            Record::Map { start, len, flags } => self.set_rights(self.process, start, len, Some(flags & RIGHTS)),
            Record::Unmap { start, len } => {
                self.set_rights(self.process, start, len, None);
                if let Some((f, l)) = pages_of(start, len) {
                    if self.drop_resident(self.process, f, l) > 0 {
                        self.seen.unmaps += 1;
                        self.shootdown(&[(self.process, f, l)]);
                    }
                }
            }
            Record::Discard { start, len, lazy } => {
                if let Some((f, l)) = pages_of(start, len) {
                    let n = match lazy {
                        true => self.resident.range((self.process, f)..=(self.process, l)).count() as u64,
                        false => self.drop_resident(self.process, f, l),
                    };
                    if n > 0 {
                        self.seen.discards += 1;
                        self.shootdown(&[(self.process, f, l)]);
                    }
                }
            }
            Record::Protect { start, len, flags } => {
                let lost = self.protect(self.process, start, len, flags & RIGHTS);
                let ranges: Vec<(u32, u64, u64)> =
                    lost.iter().filter_map(|&(s, n)| pages_of(s, n)).map(|(f, l)| (self.process, f, l)).collect();
                let resident: usize =
                    ranges.iter().map(|&(a, f, l)| self.resident.range((a, f)..=(a, l)).count()).sum();
                if resident > 0 {
                    self.seen.protects += 1;
                    self.shootdown(&ranges);
                }
            }
            Record::Fork { child } => {
                let parent = self.process;
                self.seen.forks += 1;
                let copy = self.rights.get(&parent).cloned().unwrap_or_default();
                self.rights.insert(child, copy);
                let pages: Vec<u64> = self.resident.range((parent, 0)..=(parent, u64::MAX)).map(|&(_, p)| p).collect();
                for p in pages {
                    self.resident.insert((child, p));
                }
            }
            Record::Exit { asid } => {
                self.seen.exits += 1;
                self.exit(asid);
            }
            _ => {}
        }
    }

    /// One page lookup by the running thread: level 1 of its kind; on a miss, level 2 (private
    /// or shared), whose hit fills level 1; a miss in every level walks (a fault on a page not
    /// resident) and fills every level (docs/configuration.md, `[[tlb]]`).
    fn lookup(&mut self, is_data: bool, page: u64) {
        self.lookups += 1;
        let space = self.process;
        let me = self.running;
        let k = &mut self.cores[me];
        k.n.lookups += 1;
        k.n.ifetch_lookups += !is_data as u64;
        let l1 = (self.p.split.is_some() && is_data) as usize;
        k.n.tlb[l1].accesses += 1;
        if k.tlbs[l1].hit(space, page) {
            k.n.tlb[l1].hits += 1;
            return;
        }
        k.n.tlb[l1].misses += 1;
        let l2 = self.p.structures() - 1;
        if self.p.l2.is_some() {
            k.n.tlb[l2].accesses += 1;
            let hit = match &mut self.shared {
                Some(t) => t.hit(space, page),
                None => k.tlbs[l2].hit(space, page),
            };
            if hit {
                k.n.tlb[l2].hits += 1;
                k.n.tlb[l1].evictions += k.tlbs[l1].fill(space, page) as u64;
                match self.shared {
                    Some(_) => {
                        self.seen.shared_hits += 1;
                        if let Some(why) = self.kept.remove(&(space, page)) {
                            self.seen.shared_kept[why as usize] += 1;
                        }
                        self.seen.shared_hits_of_others += (self.filled_by[&(space, page)] != me) as u64;
                    }
                    None => self.seen.private_l2_hits += 1,
                }
                return;
            }
            k.n.tlb[l2].misses += 1;
        }
        if self.resident.insert((space, page)) {
            self.faults += 1;
        }
        k.n.tlb[l1].evictions += k.tlbs[l1].fill(space, page) as u64;
        if self.p.l2.is_some() {
            let evicted = match &mut self.shared {
                Some(t) => {
                    self.filled_by.insert((space, page), me);
                    self.kept.remove(&(space, page));
                    t.fill(space, page)
                }
                None => k.tlbs[l2].fill(space, page),
            };
            k.n.tlb[l2].evictions += evicted as u64;
        }
    }

    /// Thread `t` runs from now on.
    fn run(&mut self, t: (u32, u32)) {
        self.last_tid.insert(t.0, t.1);
        if self.current == Some(t) {
            return;
        }
        let next = self.order.len();
        let k = *self.order.entry(t).or_insert(next);
        let n = self.cores.len();
        let core = if self.p.pinned {
            k % n
        } else {
            match self.cores.iter().position(|c| c.thread == Some(t) && c.held) {
                Some(i) => {
                    self.seen.kept += 1;
                    i
                }
                None => {
                    let i = self.cursor;
                    self.cursor = (i + 1) % n;
                    i
                }
            }
        };
        self.current = Some(t);
        self.running = core;
        if self.cores[core].thread != Some(t) {
            for c in &mut self.cores {
                if c.thread == Some(t) {
                    c.thread = None;
                }
            }
            self.cores[core].thread = Some(t);
            self.cores[core].n.switches += 1;
            self.seen.pending_at_switch += self.apply_pending(core);
        }
        self.cores[core].held = true;
        self.load(core, t.0);
        self.process = t.0;
    }

    /// Core `i` loads address space `space`.
    fn load(&mut self, i: usize, space: u32) {
        let (limit, lru, flush) = (self.p.asids, self.p.lru, self.p.flush);
        let seen = &mut self.seen;
        // A core's own flushes leave the shared level alone (its entries are tagged by address
        // space): the entries they would have removed are marked, to tally their hits.
        let (shared, kept) = (&self.shared, &mut self.kept);
        let mut keep = |why: Kept, space: Option<u32>| mark(shared, kept, why, |e| space.map_or(true, |s| e.0 == s));
        let k = &mut self.cores[i];
        if k.space != Some(space) {
            k.n.space_switches += 1;
            if flush {
                k.n.asid_flushes += 1;
                keep(Kept::SwitchFlush, None);
                k.drop_private(|t| t.drop_where(|_| true));
                k.asids.clear();
                k.stale.clear();
            }
        }
        k.space = Some(space);
        match k.asids.iter().position(|&s| s == space) {
            Some(j) if lru => {
                k.asids.remove(j);
                k.asids.push(space);
            }
            Some(_) => {}
            None if limit == 0 || k.asids.len() < limit => k.asids.push(space),
            None => {
                let old = if lru {
                    let old = k.asids.remove(0);
                    k.asids.push(space);
                    old
                } else {
                    let j = k.turn % k.asids.len();
                    k.turn = j + 1;
                    std::mem::replace(&mut k.asids[j], space)
                };
                k.stale.retain(|&s| s != old);
                k.n.asid_flushes += 1;
                seen.lru_recycles += lru as u64;
                seen.rr_recycles += !lru as u64;
                keep(Kept::Recycle, Some(old));
                k.drop_private(|t| t.drop_space(old));
            }
        }
        if let Some(j) = k.stale.iter().position(|&s| s == space) {
            k.stale.remove(j);
            keep(Kept::CatchUp, Some(space));
            let n = k.drop_private(|t| t.drop_space(space));
            k.n.entries_invalidated += n;
            k.n.target_cycles += FLUSH;
            seen.stale_flushes += (n > 0) as u64;
        }
    }

    /// `lazy`: core `i` invalidates the ranges queued for it; returns the entries.
    fn apply_pending(&mut self, i: usize) -> u64 {
        let k = &mut self.cores[i];
        let mut all = 0;
        for (a, f, l) in std::mem::take(&mut k.pending) {
            // Entries refilled in the shared level since the shootdown (which invalidated it
            // there) stay.
            mark(&self.shared, &mut self.kept, Kept::Pending, |&(s, p)| s == a && f <= p && p <= l);
            let n = k.drop_private(|t| t.drop_range(a, f, l));
            k.n.entries_invalidated += n;
            k.n.target_cycles += ENTRY * n;
            all += n;
        }
        all
    }

    /// One shootdown of `ranges` (one space's), started by the running core.
    fn shootdown(&mut self, ranges: &[(u32, u64, u64)]) {
        let me = self.running;
        let space = ranges[0].0;
        assert!(ranges.iter().all(|r| r.0 == space));
        let pages: u64 = ranges.iter().map(|&(_, f, l)| l - f + 1).sum();
        let full = self.p.policy == Policy::Linux && pages > self.p.ceiling;
        // The initiator invalidates the ranges at once in its own structures and in the shared
        // level.
        for &(a, f, l) in ranges {
            self.cores[me].drop_private(|t| t.drop_range(a, f, l));
            self.seen.shared_shootdown += self.drop_shared(|t| t.drop_range(a, f, l));
        }
        {
            let k = &mut self.cores[me];
            k.n.initiated += 1;
            k.n.pages += pages;
            k.n.full_flushes += full as u64;
        }
        let (mut ipis, mut necessary) = (0, 0);
        for i in 0..self.cores.len() {
            if i == me {
                continue;
            }
            let k = &mut self.cores[i];
            let private_l2 = self.p.l2.is_some() && self.shared.is_none();
            let l2_before = k.n.tlb.last().unwrap().invalidations;
            let loaded = k.space == Some(space);
            // `linux`: it runs one of the space's threads (a core whose thread moved away runs
            // none, and keeps the space loaded lazily).
            let runs = loaded && k.thread.is_some_and(|t| t.0 == space);
            let may_hold = loaded || k.asids.contains(&space);
            // Targets invalidate their private structures only: the initiator did the shared level.
            let drop_ranges =
                |k: &mut Core| ranges.iter().map(|&(a, f, l)| k.drop_private(|t| t.drop_range(a, f, l))).sum::<u64>();
            match self.p.policy {
                Policy::Linux => {
                    if runs || (may_hold && self.p.lazy_cores) {
                        self.seen.lazy_core_ipis += !runs as u64;
                        let mut n = drop_ranges(k);
                        ipis += 1;
                        necessary += (n > 0) as u64;
                        if full {
                            n += k.drop_private(|t| t.drop_space(space));
                        }
                        k.n.entries_invalidated += n;
                        k.n.target_cycles += if full { FLUSH } else { ENTRY * n };
                    } else if may_hold && !k.stale.contains(&space) {
                        k.stale.push(space);
                    }
                }
                Policy::Ideal => {
                    let n = drop_ranges(k);
                    if n > 0 {
                        self.seen.ideal_elsewhere += !loaded as u64;
                        ipis += 1;
                        necessary += 1;
                        k.n.entries_invalidated += n;
                        k.n.target_cycles += ENTRY * n;
                    }
                }
                Policy::Lazy => {
                    if may_hold {
                        k.pending.extend_from_slice(ranges);
                    }
                }
            }
            if private_l2 {
                self.seen.private_l2_targets += k.n.tlb.last().unwrap().invalidations - l2_before;
            }
        }
        let k = &mut self.cores[me];
        k.n.ipis += ipis;
        k.n.necessary_ipis += necessary;
        if ipis > 0 {
            k.n.initiator_cycles += INITIATOR + IPI * ipis;
        }
        if full {
            k.drop_private(|t| t.drop_space(space));
            self.seen.shared_full_flush += self.drop_shared(|t| t.drop_space(space));
        }
    }

    /// Process `asid` exits: its pages and entries go everywhere, no shootdown.
    fn exit(&mut self, asid: u32) {
        self.rights.remove(&asid);
        self.drop_resident(asid, 0, u64::MAX);
        self.seen.shared_exit += self.drop_shared(|t| t.drop_space(asid));
        for k in &mut self.cores {
            k.drop_private(|t| t.drop_space(asid));
            k.asids.retain(|&s| s != asid);
            k.stale.retain(|&s| s != asid);
            k.pending.retain(|&(a, ..)| a != asid);
            if k.thread.is_some_and(|t| t.0 == asid) {
                k.thread = None;
                k.held = false;
            }
            if k.space == Some(asid) {
                k.space = None;
            }
        }
        if self.current.is_some_and(|t| t.0 == asid) {
            self.current = None;
        }
        self.order.retain(|t, _| t.0 != asid);
        self.last_tid.remove(&asid);
    }

    fn drop_resident(&mut self, space: u32, first: u64, last: u64) -> u64 {
        let gone: Vec<(u32, u64)> = self.resident.range((space, first)..=(space, last)).copied().collect();
        for g in &gone {
            self.resident.remove(g);
        }
        gone.len() as u64
    }

    /// Sets the rights of bytes `[start, start + len)` of `space` (`None`: unmapped).
    fn set_rights(&mut self, space: u32, start: u64, len: u64, rights: Option<u32>) {
        let end = start.saturating_add(len);
        if end <= start {
            return;
        }
        let v = self.rights.entry(space).or_default();
        let mut out = Vec::with_capacity(v.len() + 2);
        for &(s, e, r) in v.iter() {
            if e <= start || s >= end {
                out.push((s, e, r));
                continue;
            }
            if s < start {
                out.push((s, start, r));
            }
            if e > end {
                out.push((end, e, r));
            }
        }
        if let Some(r) = rights {
            out.push((start, end, r));
        }
        out.sort_unstable();
        *v = out;
    }

    /// `mprotect`: sets the rights and returns the byte pieces `(start, len)` that lost a right
    /// (never-mapped bytes had every right), touching pieces joined.
    fn protect(&mut self, space: u32, start: u64, len: u64, new: u32) -> Vec<(u64, u64)> {
        let end = start.saturating_add(len);
        if end <= start {
            return Vec::new();
        }
        let v = self.rights.get(&space).cloned().unwrap_or_default();
        let mut lost: Vec<(u64, u64)> = Vec::new();
        let mut lose = |lo: u64, hi: u64| match lost.last_mut() {
            Some(last) if last.1 == lo => last.1 = hi,
            _ => lost.push((lo, hi)),
        };
        let mut at = start;
        for &(s, e, r) in v.iter().filter(|&&(s, e, _)| e > start && s < end) {
            let (lo, hi) = (s.max(start), e.min(end));
            if lo > at && RIGHTS & !new != 0 {
                lose(at, lo);
            }
            if r & !new != 0 {
                lose(lo, hi);
            }
            at = hi;
        }
        if at < end && RIGHTS & !new != 0 {
            lose(at, end);
        }
        self.set_rights(space, start, len, Some(new));
        lost.into_iter().map(|(lo, hi)| (lo, hi - lo)).collect()
    }

    fn counts(&self) -> Vec<Counts> {
        self.cores.iter().map(|k| k.n.clone()).collect()
    }
}

/// The pages of bytes `[start, start + len)`, if any.
fn pages_of(start: u64, len: u64) -> Option<(u64, u64)> {
    if len == 0 {
        return None;
    }
    let (f, l) = (start >> SHIFT, start.saturating_add(len - 1) >> SHIFT);
    // One address space per process: every page of a range is in the same region.
    assert_eq!(f >> (61 - SHIFT), l >> (61 - SHIFT), "a range across regions");
    Some((f, l))
}

/// The engine's counters of one structure in the reference's terms.
fn level(t: &TlbStats) -> Level {
    Level {
        accesses: t.accesses,
        hits: t.hits,
        misses: t.misses,
        evictions: t.evictions,
        invalidations: t.invalidations,
    }
}

/// The engine's counters in the reference's terms.
fn engine_counts(s: &SystemStats) -> Vec<Counts> {
    s.cores
        .iter()
        .map(|c| Counts {
            lookups: c.lookups,
            ifetch_lookups: c.ifetch_lookups,
            tlb: c.tlb.iter().map(level).collect(),
            switches: c.switches,
            space_switches: c.space_switches,
            asid_flushes: c.asid_flushes,
            initiated: c.shootdowns.initiated,
            ipis: c.shootdowns.ipis,
            necessary_ipis: c.shootdowns.necessary_ipis,
            full_flushes: c.shootdowns.full_flushes,
            pages: c.shootdowns.pages,
            entries_invalidated: c.shootdowns.entries_invalidated,
            initiator_cycles: c.shootdowns.initiator_cycles,
            target_cycles: c.shootdowns.target_cycles,
        })
        .collect()
}

fn churn() -> &'static [Record] {
    static T: OnceLock<Vec<Record>> = OnceLock::new();
    T.get_or_init(|| crate::bundled_records("churn.xtr"))
}

fn shmserve() -> &'static [Record] {
    static T: OnceLock<Vec<Record>> = OnceLock::new();
    T.get_or_init(|| crate::bundled_records("shmserve.xtr"))
}

/// `p` over `records` in the reference and in the engine (in batches of 4,096 records).
fn both(records: &[Record], p: Params) -> (Model, SystemStats) {
    let mut model = Model::new(p);
    for r in records {
        model.record(r);
    }
    let mut sys = System::new(&p.config()).unwrap();
    for b in records.chunks(4096) {
        sys.process(b).unwrap();
    }
    (model, sys.stats())
}

/// Runs `p` through the engine and the reference; panics with the first difference. Returns
/// the reference's per-core counts.
fn compare(records: &[Record], p: Params, seen: &mut Seen) -> Vec<Counts> {
    let (model, s) = both(records, p);
    let want = model.counts();
    let got = engine_counts(&s);
    for (i, (w, g)) in want.iter().zip(&got).enumerate() {
        assert_eq!(g, w, "core {i} of {p:?} (left: engine, right: reference)");
    }
    let mut total = Counts::default();
    want.iter().for_each(|c| total.add(c));
    let sd = s.shootdowns.unwrap();
    assert_eq!(s.lookups, total.lookups, "{p:?}");
    assert_eq!(s.tlb.iter().map(level).collect::<Vec<_>>(), total.tlb, "{p:?} (left: engine, right: reference)");
    assert_eq!(
        (sd.initiated, sd.ipis, sd.necessary_ipis, sd.full_flushes, sd.pages, sd.entries_invalidated),
        (total.initiated, total.ipis, total.necessary_ipis, total.full_flushes, total.pages, total.entries_invalidated),
        "{p:?}"
    );
    assert_eq!(s.page_faults, model.faults, "{p:?}");
    assert_eq!((sd.initiator_cycles, sd.target_cycles), (total.initiator_cycles, total.target_cycles), "{p:?}");
    assert_eq!(s.cycles.shootdown, total.initiator_cycles + total.target_cycles, "{p:?}");
    seen.add(&model.seen);
    want
}

/// The grid of one trace, designs of one level: every count of cores (2, 4, 8), scheduler,
/// policy, ASIDs per core (unlimited, 1, 2, 6) and recycling, with the other keys turning over
/// within it (lazy cores and the flush ceiling of 33 or 2 pages in all four pairs, 16 or 64
/// entries, a quantum of 700, 5,000 or 4,000,000 lookups), and a few designs that flush on
/// every space switch.
fn grid() -> Vec<Params> {
    let mut out = Vec::new();
    let mut i = 0usize;
    for cores in [2, 4, 8] {
        for pinned in [false, true] {
            for policy in [Policy::Linux, Policy::Ideal, Policy::Lazy] {
                for asids in [0, 1, 2, 6] {
                    for lru in [true, false] {
                        out.push(Params {
                            cores,
                            pinned,
                            quantum: [700, 5000, 4_000_000][i % 3],
                            asids,
                            lru,
                            flush: false,
                            policy,
                            lazy_cores: i % 2 == 1,
                            ceiling: if (i / 2) % 2 == 0 { 33 } else { 2 },
                            l1: fa(if (i / 4) % 2 == 0 { 64 } else { 16 }),
                            split: None,
                            l2: None,
                        });
                        i += 1;
                    }
                }
            }
        }
    }
    for policy in [Policy::Linux, Policy::Ideal, Policy::Lazy] {
        out.push(Params { flush: true, policy, ..BASE });
        out.push(Params { flush: true, policy, cores: 2, pinned: true, l1: fa(16), ..BASE });
    }
    out
}

const BASE: Params = Params {
    cores: 4,
    pinned: false,
    quantum: 5000,
    asids: 6,
    lru: true,
    flush: false,
    policy: Policy::Linux,
    lazy_cores: false,
    ceiling: 33,
    l1: fa(64),
    split: None,
    l2: None,
};

/// The grid of designs of two levels: 2 and 4 cores, both schedulers, every policy, ASIDs per
/// core unlimited, 2 (LRU and round-robin) or 6 (round-robin), each with the second level
/// private and shared, the other keys turning over within it: level 1 of 8 entries fully
/// associative, 16 entries 4-way, or (the study's) split into a 128-entry 8-way instruction
/// and a 64-entry 4-way data structure; level 2 of 32 entries 4-way, 64 fully associative or
/// (the study's STLB) 1,536 entries 12-way; lazy cores both ways, ceilings of 33 and 2 pages,
/// quanta of 700, 5,000 and 4,000,000 lookups. And flush on every space switch under each
/// policy, private and shared.
fn grid2() -> Vec<Params> {
    let mut out = Vec::new();
    let mut i = 0usize;
    for cores in [2, 4] {
        for pinned in [false, true] {
            for policy in [Policy::Linux, Policy::Ideal, Policy::Lazy] {
                for (asids, lru) in [(0, true), (2, true), (2, false), (6, false)] {
                    let (l1, split) =
                        [(fa(8), None), (Geo { entries: 16, ways: 4 }, None), (STUDY_L1D, Some(STUDY_L1I))][i % 3];
                    let l2 = [Geo { entries: 32, ways: 4 }, fa(64), STUDY_STLB][(i / 3) % 3];
                    for shared in [false, true] {
                        out.push(Params {
                            cores,
                            pinned,
                            quantum: [700, 5000, 4_000_000][(i / 2) % 3],
                            asids,
                            lru,
                            flush: false,
                            policy,
                            lazy_cores: i % 2 == 1,
                            ceiling: if (i / 4) % 2 == 0 { 33 } else { 2 },
                            l1,
                            split,
                            l2: Some((l2, shared)),
                        });
                    }
                    i += 1;
                }
            }
        }
    }
    for policy in [Policy::Linux, Policy::Ideal, Policy::Lazy] {
        for shared in [false, true] {
            let l2 = Some((Geo { entries: 32, ways: 4 }, shared));
            out.push(Params { flush: true, policy, l1: fa(8), l2, ..BASE });
            out.push(Params { flush: true, policy, cores: 2, pinned: true, l1: fa(8), l2, ..BASE });
        }
    }
    out
}

/// The study's level-1 instruction and data structures and STLB (`xlat reproduce shootdowns`).
const STUDY_L1I: Geo = Geo { entries: 128, ways: 8 };
const STUDY_L1D: Geo = Geo { entries: 64, ways: 4 };
const STUDY_STLB: Geo = Geo { entries: 1536, ways: 12 };

/// Runs `designs` on `records`, each through the engine and the reference; then (the caller)
/// checks that the grid reached every mechanism (so that agreeing cannot be vacuous).
fn check_grid(records: &[Record], designs: &[Params]) -> Seen {
    let mut seen = Seen::default();
    for &p in designs {
        let counts = compare(records, p, &mut seen);
        let sum = |f: fn(&Counts) -> u64| counts.iter().map(f).sum::<u64>();
        let (ipis, necessary) = (sum(|c| c.ipis), sum(|c| c.necessary_ipis));
        seen.ipis += ipis;
        seen.necessary_ipis += necessary;
        seen.unnecessary_ipis += ipis - necessary;
        seen.full_flushes += sum(|c| c.full_flushes);
        seen.asid_flushes += sum(|c| c.asid_flushes);
        seen.evictions += sum(|c| c.tlb.iter().map(|t| t.evictions).sum());
        seen.switches += sum(|c| c.switches);
        if p.policy == Policy::Lazy {
            seen.lazy_entries += sum(|c| c.entries_invalidated);
        }
    }
    eprintln!("{seen:?}");
    seen
}

/// One core runs none of the cores' machinery (no ASID limit, no flush above the ceiling, a
/// shared level is one like any other): the counts of a single-core design.
fn check_one_core(records: &[Record]) {
    let two = |g: Geo, shared| Params { l1: fa(8), l2: Some((g, shared)), ..BASE };
    for p in [
        Params { l1: fa(16), ..BASE },
        BASE,
        two(Geo { entries: 32, ways: 4 }, false),
        two(Geo { entries: 32, ways: 4 }, true),
        Params { l1: STUDY_L1D, split: Some(STUDY_L1I), ..two(STUDY_STLB, true) },
    ] {
        let p = Params { cores: 1, asids: 0, ceiling: 1 << 40, ..p };
        let (model, s) = both(records, p);
        let c = &model.counts()[0];
        assert!(s.cores.is_empty() && s.shootdowns.is_none());
        assert_eq!((s.lookups, s.page_faults), (c.lookups, model.faults), "one core, {p:?}");
        assert_eq!(s.tlb.iter().map(level).collect::<Vec<_>>(), c.tlb, "one core, {p:?}");
    }
}

/// Asserts that the grid reached each of `what` (its mechanisms by name).
fn reached(seen: &Seen, what: &[&str]) {
    for &w in what {
        let n = match w {
            "IPIs" => seen.ipis,
            "necessary IPIs" => seen.necessary_ipis,
            "unnecessary IPIs" => seen.unnecessary_ipis,
            "full flushes" => seen.full_flushes,
            "ASID flushes" => seen.asid_flushes,
            "evictions" => seen.evictions,
            "switches" => seen.switches,
            "invalidations under lazy" => seen.lazy_entries,
            "ideal IPIs to a core with another space loaded" => seen.ideal_elsewhere,
            "timer ticks that ended a placement" => seen.ticks_ending,
            "round-robin placements kept" => seen.kept,
            "lazy cores skipped, flushed at their next load" => seen.stale_flushes,
            "lazy cores interrupted" => seen.lazy_core_ipis,
            "lazy invalidations at a switch" => seen.pending_at_switch,
            "lazy invalidations at a tick" => seen.pending_at_tick,
            "LRU recycles" => seen.lru_recycles,
            "round-robin recycles" => seen.rr_recycles,
            "shootdowns of a protect" => seen.protects,
            "shootdowns of a discard" => seen.discards,
            "shootdowns of an unmap" => seen.unmaps,
            "forks" => seen.forks,
            "exits" => seen.exits,
            "private level-2 hits" => seen.private_l2_hits,
            "shared-level hits" => seen.shared_hits,
            "shared-level hits on another core's entry" => seen.shared_hits_of_others,
            "shared-level invalidations by a shootdown" => seen.shared_shootdown,
            "shared-level invalidations by a full flush" => seen.shared_full_flush,
            "shared-level invalidations by an exit" => seen.shared_exit,
            "shared-level hits on entries a flush on switch left" => seen.shared_kept[Kept::SwitchFlush as usize],
            "shared-level hits on entries an ASID recycle left" => seen.shared_kept[Kept::Recycle as usize],
            "shared-level hits on entries a lazy core's catch-up left" => seen.shared_kept[Kept::CatchUp as usize],
            "shared-level hits on entries late lazy invalidations left" => seen.shared_kept[Kept::Pending as usize],
            "private level-2 invalidations by targets" => seen.private_l2_targets,
            _ => panic!("{w}?"),
        };
        assert!(n > 0, "no {w} in the grid: {seen:?}");
    }
}

/// What every trace's grid reaches: one process's threads on several cores.
const THREADS: &[&str] = &[
    "IPIs",
    "necessary IPIs",
    "unnecessary IPIs",
    "full flushes",
    "ASID flushes",
    "evictions",
    "switches",
    "invalidations under lazy",
    "timer ticks that ended a placement",
    "round-robin placements kept",
    "lazy invalidations at a switch",
    "lazy invalidations at a tick",
    "shootdowns of a discard",
    "shootdowns of an unmap",
    "exits",
];

/// What only several processes reach: ASIDs recycled, lazy cores, `ideal` reaching a core
/// that runs another process.
const PROCESSES: &[&str] = &[
    "ideal IPIs to a core with another space loaded",
    "lazy cores skipped, flushed at their next load",
    "lazy cores interrupted",
    "LRU recycles",
    "round-robin recycles",
    "shootdowns of a protect",
    "forks",
];

#[test]
fn churn_every_counter_of_the_grid_equals_the_reference() {
    check_one_core(churn());
    let seen = check_grid(churn(), &grid());
    reached(&seen, THREADS);
    reached(&seen, &["shootdowns of a protect"]);
}

#[test]
fn shmserve_every_counter_of_the_grid_equals_the_reference() {
    check_one_core(shmserve());
    let seen = check_grid(shmserve(), &grid());
    reached(&seen, THREADS);
    reached(&seen, PROCESSES);
}

/// What the designs of two levels reach besides: hits in each kind of level 2, the shared
/// level serving one core's misses with another's entries, invalidated by initiators (a
/// shootdown's ranges, a flush above the ceiling, an exit), and serving hits from entries a
/// core's own flush left there; targets invalidating a private level 2.
const TWO_LEVELS: &[&str] = &[
    "private level-2 hits",
    "shared-level hits",
    "shared-level hits on another core's entry",
    "shared-level invalidations by a shootdown",
    "shared-level invalidations by a full flush",
    "shared-level invalidations by an exit",
    "shared-level hits on entries a flush on switch left",
    "shared-level hits on entries a lazy core's catch-up left",
    "private level-2 invalidations by targets",
];

#[test]
fn churn_two_levels_private_and_shared_equal_the_reference() {
    let seen = check_grid(churn(), &grid2());
    reached(&seen, THREADS);
    reached(&seen, TWO_LEVELS);
}

#[test]
fn shmserve_two_levels_private_and_shared_equal_the_reference() {
    let seen = check_grid(shmserve(), &grid2());
    reached(&seen, THREADS);
    reached(&seen, PROCESSES);
    reached(&seen, TWO_LEVELS);
    // Several processes: ASIDs recycled, and `lazy` invalidations that leave entries the shared
    // level then serves (those churn's leave are gone before any hit).
    reached(
        &seen,
        &[
            "shared-level hits on entries an ASID recycle left",
            "shared-level hits on entries late lazy invalidations left",
        ],
    );
}
