//! Caches and memory: a hierarchy of set-associative caches per design, fed with every reference
//! at its physical address, and the memory behind it.
//!
//! A [`Hierarchy`] holds any number of levels. Each level serves instruction fetches, data or
//! both (`serves`), so a level may be split (an L1I beside an L1D) or unified. A reference goes
//! down its kind's path, level 1 first, until a level holds its line:
//!
//! - **Reads** (instruction fetches, loads, the load half of a modify) that miss at a level are
//!   filled from the next level (or memory) and allocated at every level that missed:
//!   non-inclusive, nothing is invalidated in the levels above when a lower level evicts.
//! - **Writes** (stores, the store half of a modify): a write-back level (`write = "back"`)
//!   allocates on a write miss (write-allocate: the line is read from below, then written) and
//!   marks the line dirty; a write-through level (`write = "through"`) passes every write on to
//!   the next level and allocates nothing on a write miss (no-write-allocate).
//! - **Writebacks**: a dirty line evicted from a write-back level is written to the next level (or
//!   memory). A write arriving from the level above (a writeback or a written-through store)
//!   counts as a write access there; if it misses in a write-back level the line is allocated
//!   dirty without being read (the level above wrote it whole), and a write-through level passes
//!   it on.
//! - Memory is the end of every path: it counts reads (fills) and writes (writebacks and
//!   written-through stores) and answers in `[memory] latency` cycles. Everything that leaves the
//!   last level goes through [`Hierarchy::memory`], the place a memory-side stage (a memory
//!   controller that translates fill and writeback addresses) plugs in.
//!
//! A level is indexed and tagged physically (`index = "physical"`, PIPT), virtually
//! (`"virtual"`, VIVT: lines are tagged with the address space as well, so processes never share
//! them), or virtually indexed and physically tagged (`"vipt"`): the set comes from the virtual
//! address and the tag from the physical one, so a cache larger than a page times its ways
//! indexes with virtual bits above the page offset and one physical line may sit in two sets.
//!
//! A level of at most [`SCAN_WAYS`] ways keeps flat per-way arrays (key, address space, payload,
//! a use stamp) and scans its set: LRU evicts the smallest last-use stamp, FIFO the smallest fill
//! stamp, and random, NRU and tree-PLRU use the TLBs' policy code. Wider levels (fully associative
//! caches) are stored as a [`Tlb`] whose "pages" are lines, with its index over wide sets. Either
//! way a line's payload is its physical line address and its dirty bit.

use crate::addr::{Asid, PageSize, Vpn};
use crate::pt::ParamError;
use crate::tlb::policy::PolicyState;
use crate::tlb::{Geometry, Policy, Tlb, TlbData};
use serde::Deserialize;

/// Most cache levels on one path.
pub const MAX_CACHE_LEVELS: usize = 8;

/// How a level treats writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WritePolicy {
    /// Write-back with write-allocate.
    #[default]
    Back,
    /// Write-through with no-write-allocate.
    Through,
}

impl WritePolicy {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            WritePolicy::Back => "back",
            WritePolicy::Through => "through",
        }
    }
}

/// Which address a level takes its set index and tag from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Indexing {
    /// Physically indexed, physically tagged (PIPT).
    #[default]
    Physical,
    /// Virtually indexed, virtually tagged (VIVT), lines tagged with the address space.
    Virtual,
    /// Virtually indexed, physically tagged.
    Vipt,
}

impl Indexing {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Indexing::Physical => "physical",
            Indexing::Virtual => "virtual",
            Indexing::Vipt => "vipt",
        }
    }
}

fn one() -> u32 {
    1
}
fn one_u64() -> u64 {
    1
}
fn yes() -> bool {
    true
}

/// Which references a TLB structure or a cache level serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Serves {
    /// Instruction fetches and data alike.
    #[default]
    Unified,
    /// Loads, stores and modifies.
    Data,
    /// Instruction fetches.
    Instruction,
}

impl Serves {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Serves::Unified => "unified",
            Serves::Data => "data",
            Serves::Instruction => "instruction",
        }
    }
}

/// One `[[cache]]` level.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CacheLevelConfig {
    /// Name in reports ("L1D", "L2", ...).
    pub name: String,
    /// Capacity in bytes: a multiple of `line` x `ways`.
    pub size: u64,
    /// Line size in bytes: a power of two from 4 to the base page size.
    pub line: u64,
    /// Ways per set (`ways` x `line` == `size`: fully associative; 1: direct-mapped).
    pub ways: u32,
    /// Replacement policy (default lru).
    #[serde(default)]
    pub policy: Policy,
    /// What it serves (default unified).
    #[serde(default)]
    pub serves: Serves,
    /// Level, 1 = closest to the core (default 1).
    #[serde(default = "one")]
    pub level: u32,
    /// Cycles from the request to the data when the line is found at this level (default 1).
    #[serde(default = "one_u64")]
    pub latency: u64,
    /// Write-back + write-allocate or write-through + no-write-allocate (default back).
    #[serde(default)]
    pub write: WritePolicy,
    /// Physical, virtual or VIPT indexing (default physical).
    #[serde(default)]
    pub index: Indexing,
    /// True if page-walk references look up this level (default true). Walkers that start at
    /// the second level (Itanium 2's walker reads the L2, not the L1D) set it false at level 1.
    #[serde(default = "yes")]
    pub walker: bool,
    /// Seed of the random policy (default 1).
    #[serde(default = "one_u64")]
    pub seed: u64,
    /// With several cores: one level all cores share, rather than one per core (default
    /// false; docs/multicore.md).
    #[serde(default)]
    pub shared: bool,
}

/// `[memory]`: what lies behind the last cache level.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MemoryConfig {
    /// Cycles from a request that misses every level to its data (default 100).
    pub latency: u64,
    /// Installed DRAM (with `[mtlb]`: the physical addresses above it, up to `2^pa_bits`, are
    /// shadow addresses; swanson98 §2.1).
    pub dram_bytes: Option<u64>,
    /// Physical address bits the processor exports (with `[mtlb]`).
    pub pa_bits: Option<u32>,
}

impl Default for MemoryConfig {
    fn default() -> Self {
        MemoryConfig { latency: 100, dram_bytes: None, pa_bits: None }
    }
}

/// Most lines one level may have (2^24).
pub const MAX_LINES: u64 = crate::limits::MAX_CACHE_LINES;

/// Checks the `[[cache]]` levels; errors name the key (`cache[i].size`, ...).
pub fn validate(levels: &[CacheLevelConfig], page_size: u64) -> Result<(), ParamError> {
    for (i, c) in levels.iter().enumerate() {
        let key = |k: &str| format!("cache[{i}].{k}");
        if !c.line.is_power_of_two() || c.line < 4 || c.line > page_size {
            return Err(ParamError::new(
                key("line"),
                format!("must be a power of two from 4 to the page size ({page_size}), got {}", c.line),
            ));
        }
        if c.ways == 0 {
            return Err(ParamError::new(key("ways"), "must be at least 1"));
        }
        let set_bytes = c.line * c.ways as u64;
        if c.size == 0 || c.size % set_bytes != 0 {
            return Err(ParamError::new(
                key("size"),
                format!(
                    "must be a non-zero multiple of line x ways = {} x {} = {set_bytes} bytes, got {}",
                    c.line, c.ways, c.size
                ),
            ));
        }
        if c.size / c.line > MAX_LINES {
            return Err(ParamError::new(
                key("size"),
                format!("must hold at most 2^24 lines of {} bytes, got {} bytes", c.line, c.size),
            ));
        }
        if c.policy == Policy::Plru && !c.ways.is_power_of_two() {
            return Err(ParamError::new(
                key("policy"),
                format!("\"plru\" needs a power-of-two number of ways, got {}", c.ways),
            ));
        }
        if c.level == 0 {
            return Err(ParamError::new(key("level"), "levels start at 1"));
        }
        if levels[..i].iter().any(|o| o.name == c.name) {
            return Err(ParamError::new(key("name"), format!("'{}' is used by another [[cache]]", c.name)));
        }
    }
    // Each kind's levels: none at all (a perfect cache), or 1, 2, ... without gaps, one per level.
    for (kind, wants) in [("instruction fetches", Serves::Instruction), ("data references", Serves::Data)] {
        let mut serving: Vec<(u32, usize)> = levels
            .iter()
            .enumerate()
            .filter(|(_, c)| c.serves == Serves::Unified || c.serves == wants)
            .map(|(i, c)| (c.level, i))
            .collect();
        serving.sort_unstable();
        for (k, &(level, i)) in serving.iter().enumerate() {
            if k > 0 && serving[k - 1].0 == level {
                return Err(ParamError::new(
                    format!("cache[{i}].level"),
                    format!("two caches at level {level} serve {kind}"),
                ));
            }
            if level != k as u32 + 1 {
                return Err(ParamError::new(
                    format!("cache[{i}].level"),
                    format!(
                        "level {level} serves {kind} but no cache at level {} does (levels 1, 2, ... without gaps)",
                        k + 1
                    ),
                ));
            }
        }
        if serving.len() > MAX_CACHE_LEVELS {
            return Err(ParamError::new("cache", format!("at most {MAX_CACHE_LEVELS} levels serve {kind}")));
        }
    }
    Ok(())
}

/// Counters of one cache level.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct CacheStats {
    /// Line accesses that reached this level: reads, writes, and writes from the level above.
    pub accesses: u64,
    /// Accesses that found their line here.
    pub hits: u64,
    /// Accesses that did not.
    pub misses: u64,
    /// Misses of reads (instruction fetches, loads, fills for the level above).
    pub read_misses: u64,
    /// Misses of writes (stores, writebacks and written-through stores from above).
    pub write_misses: u64,
    /// Dirty lines evicted and written to the next level.
    pub writebacks: u64,
}

/// Counters of memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MemoryStats {
    /// Line reads (fills of the last level, or of a level with nothing below it).
    pub reads: u64,
    /// Line writes (writebacks and written-through stores).
    pub writes: u64,
}

/// Levels with at most this many ways scan their set; wider ones use a [`Tlb`]'s index.
pub const SCAN_WAYS: u32 = 16;

/// An empty way.
const EMPTY: u64 = u64::MAX;

/// One way of a set.
#[derive(Clone, Copy, Debug)]
struct Way {
    key: u64,
    payload: u64,
    /// Last use (LRU) or fill (FIFO).
    stamp: u64,
    asid: u32,
}

/// Lines of a level of few ways: flat arrays, `ways` per set.
#[derive(Clone, Debug)]
struct Sets {
    ways: usize,
    sets: u64,
    /// `sets - 1` for a power-of-two number of sets, else `u64::MAX` (modulo).
    mask: u64,
    /// Per way: key, address space, payload and stamp together (one bounds check, one line).
    ways_: Vec<Way>,
    clock: u64,
    /// Stamp on hits too (LRU).
    lru: bool,
    /// Random, NRU, tree-PLRU; `None` for LRU and FIFO (the stamps).
    policy: Option<PolicyState>,
    /// Per route (instruction, data, walk; 3: requests from the level above), the slot of the
    /// line it hit last: a hint, checked against the slot's key, so an evicted line is never
    /// found through it.
    hint: [usize; 4],
    /// The line each route hit before its last one (a second hint).
    hint2: [usize; 4],
}

impl Sets {
    fn new(sets: u64, ways: u32, policy: Policy, seed: u64) -> Sets {
        let n = (sets * ways as u64) as usize;
        Sets {
            ways: ways as usize,
            sets,
            mask: if sets.is_power_of_two() { sets - 1 } else { u64::MAX },
            ways_: vec![Way { key: EMPTY, asid: 0, payload: 0, stamp: 0 }; n],
            clock: 0,
            lru: policy == Policy::Lru,
            policy: match policy {
                Policy::Lru | Policy::Fifo => None,
                p => Some(PolicyState::new(p, sets as u32, ways, seed)),
            },
            hint: [0; 4],
            hint2: [0; 4],
        }
    }

    /// A hit on `slot`, for the policy.
    #[inline(always)]
    fn use_slot(&mut self, slot: usize) {
        if self.lru {
            self.clock += 1;
            self.ways_[slot].stamp = self.clock;
        } else if let Some(p) = &mut self.policy {
            let set = slot / self.ways;
            p.on_hit(set as u32, (slot - set * self.ways) as u32);
        }
    }

    #[inline(always)]
    fn set_of(&self, key: u64) -> u64 {
        if self.mask != u64::MAX {
            key & self.mask
        } else {
            key % self.sets
        }
    }

    /// The slot holding `key` of `asid`, used (for the policy) if found.
    #[inline(always)]
    fn lookup(&mut self, asid: u32, key: u64, hint: usize) -> Option<usize> {
        let h = hint & 3;
        let slot = self.hint[h];
        let w = &self.ways_[slot];
        if w.key == key && w.asid == asid {
            self.use_slot(slot);
            return Some(slot);
        }
        self.lookup_set(asid, key, h)
    }

    #[inline(never)]
    fn lookup_set(&mut self, asid: u32, key: u64, h: usize) -> Option<usize> {
        let second = self.hint2[h];
        let w = &self.ways_[second];
        let slot = if w.key == key && w.asid == asid {
            second
        } else {
            let base = self.set_of(key) as usize * self.ways;
            base + self.ways_[base..base + self.ways].iter().position(|w| w.key == key && w.asid == asid)?
        };
        self.hint2[h] = self.hint[h];
        self.hint[h] = slot;
        self.use_slot(slot);
        Some(slot)
    }

    /// Installs `key`: an empty way first, else the policy's victim, which is returned as
    /// (key, asid, payload).
    fn insert(&mut self, asid: u32, key: u64, payload: u64) -> Option<(u64, u32, u64)> {
        let set = self.set_of(key);
        let base = set as usize * self.ways;
        let set_ways = &self.ways_[base..base + self.ways];
        let way = match set_ways.iter().position(|w| w.key == EMPTY) {
            Some(w) => w,
            None => match &mut self.policy {
                Some(p) => p.victim(set as u32, 0) as usize,
                None => (0..self.ways).min_by_key(|&w| set_ways[w].stamp).expect("ways >= 1"),
            },
        };
        let slot = base + way;
        let old = self.ways_[slot];
        let victim = (old.key != EMPTY).then_some((old.key, old.asid, old.payload));
        self.clock += 1;
        self.ways_[slot] = Way { key, asid, payload, stamp: self.clock };
        if let Some(p) = &mut self.policy {
            p.on_fill(set as u32, way as u32);
        }
        victim
    }
}

/// A level's storage. (The scanned variant, the hot one, is kept inline.)
#[derive(Clone, Debug)]
#[allow(clippy::large_enum_variant)]
enum Lines {
    Sets(Sets),
    Wide(Box<Tlb>),
}

impl Lines {
    /// Looks up the line holding `key` of `asid` (a use, for the policy); on a hit returns its
    /// payload as it was, and marks the line dirty if `dirty`.
    #[inline(always)]
    fn lookup(&mut self, asid: Asid, key: Vpn, dirty: bool, hint: usize) -> Option<u64> {
        match self {
            Lines::Sets(s) => s.lookup(asid.0, key.0, hint).map(|slot| {
                let before = s.ways_[slot].payload;
                if dirty {
                    s.ways_[slot].payload = before | DIRTY;
                }
                before
            }),
            Lines::Wide(t) => {
                let data = t.lookup(asid, key)?;
                if dirty && data.pfn & DIRTY == 0 {
                    t.set_data(asid, key, TlbData { pfn: data.pfn | DIRTY, ..data });
                }
                Some(data.pfn)
            }
        }
    }

    /// Removes the line holding `key` of `asid`, if present: its payload.
    fn remove(&mut self, asid: Asid, key: Vpn) -> Option<u64> {
        match self {
            Lines::Sets(s) => {
                let base = s.set_of(key.0) as usize * s.ways;
                let w = s.ways_[base..base + s.ways].iter().position(|w| w.key == key.0 && w.asid == asid.0)?;
                let way = &mut s.ways_[base + w];
                way.key = EMPTY;
                Some(way.payload)
            }
            Lines::Wide(t) => {
                let data = t.lookup(asid, key)?;
                t.invalidate_range(asid, key, key);
                Some(data.pfn)
            }
        }
    }

    fn insert(&mut self, asid: Asid, key: Vpn, payload: u64, shift: u32) -> Option<(u64, u32, u64)> {
        match self {
            Lines::Sets(s) => s.insert(asid.0, key.0, payload),
            Lines::Wide(t) => t
                .insert(asid.0, key, TlbData { pfn: payload, shift: shift as u8, valid: 0 })
                .map(|v| (v.tag, v.asid, v.data.pfn)),
        }
    }
}

/// One level of a hierarchy.
#[derive(Clone, Debug)]
pub struct Level {
    /// Name in reports.
    pub name: String,
    /// Level number.
    pub level: u32,
    /// What it serves.
    pub serves: Serves,
    /// Cycles of a hit.
    pub latency: u64,
    /// Write policy.
    pub write: WritePolicy,
    /// Indexing.
    pub index: Indexing,
    /// Whether walk references look it up.
    pub walker: bool,
    /// Size in bytes.
    pub size: u64,
    /// Line size in bytes.
    pub line: u64,
    /// Ways per set.
    pub ways: u32,
    /// Number of sets.
    pub sets: u64,
    /// Replacement policy.
    pub policy: Policy,
    line_shift: u32,
    lines: Lines,
    stats: CacheStats,
}

impl Level {
    /// The lookup key and tag space of the line holding (`va`, `pa`) for address space `asid`.
    #[inline(always)]
    fn key(&self, va: u64, pa: u64, asid: u32) -> (Asid, Vpn) {
        match self.index {
            Indexing::Physical => (Asid(0), Vpn(pa >> self.line_shift)),
            Indexing::Virtual => (Asid(asid), Vpn(va >> self.line_shift)),
            // The set (key modulo sets) comes from the virtual line, the rest from the physical.
            Indexing::Vipt => (Asid(0), Vpn((pa >> self.line_shift) * self.sets + (va >> self.line_shift) % self.sets)),
        }
    }
}

/// The levels one kind of reference goes through, level 1 first.
#[derive(Clone, Copy, Debug, Default)]
struct CachePath {
    levels: [u8; MAX_CACHE_LEVELS],
    len: u8,
    route: u8,
}

impl CachePath {
    fn of(v: &[usize], route: Route) -> CachePath {
        let mut p = CachePath { route: route as u8, ..CachePath::default() };
        for (k, &i) in v.iter().enumerate() {
            p.levels[k] = i as u8;
        }
        p.len = v.len() as u8;
        p
    }

    #[inline(always)]
    fn get(&self, k: usize) -> Option<usize> {
        (k < self.len as usize).then(|| self.levels[k] as usize)
    }
}

/// A dirty line's payload bit; the rest of the payload is the physical line address.
const DIRTY: u64 = 1;

/// A design's caches and memory. See the module documentation.
#[derive(Clone, Debug)]
pub struct Hierarchy {
    levels: Vec<Level>,
    /// Paths of instruction fetches, data references and walk references.
    paths: [CachePath; 3],
    memory_latency: u64,
    memory: MemoryStats,
    /// The first level of each path, or `NO_LEVEL`.
    first: [u8; 3],
    /// The memory controller's TLB (`[mtlb]`), between the last level and DRAM.
    mtlb: Option<Box<crate::mtlb::Mtlb>>,
    /// Cycles an MTLB miss adds (its table read): `mtlb.miss_cycles`, or the memory latency.
    mtlb_miss: u64,
    /// Every request that reached DRAM, when recorded ([`Hierarchy::record_dram`]).
    dram_log: Option<Vec<DramRequest>>,
}

/// One request that reached DRAM (recorded for checks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DramRequest {
    /// A write (writeback) rather than a fill.
    pub write: bool,
    /// The physical address the caches used (a shadow address or a real one).
    pub pa: u64,
    /// The address DRAM saw (`None`: a shadow page the controller's table does not map).
    pub dram: Option<u64>,
}

/// No level on a path.
const NO_LEVEL: usize = u8::MAX as usize;

/// Which path a reference takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Instruction fetches.
    Instruction = 0,
    /// Loads and stores.
    Data = 1,
    /// Page-walk (and refill-handler) references to page-table entries: the data levels whose
    /// `walker` is true.
    Walk = 2,
}

impl Hierarchy {
    /// Builds the hierarchy of validated `[[cache]]` levels.
    pub fn new(configs: &[CacheLevelConfig], memory: &MemoryConfig) -> Result<Hierarchy, ParamError> {
        let mut levels = Vec::with_capacity(configs.len());
        for (i, c) in configs.iter().enumerate() {
            let n = c.size / c.line;
            let sets = n / c.ways as u64;
            let lines = if c.ways <= SCAN_WAYS {
                Lines::Sets(Sets::new(sets, c.ways, c.policy, c.seed))
            } else {
                let geometry = Geometry { entries: n as u32, ways: c.ways, policy: c.policy, seed: c.seed };
                Lines::Wide(Box::new(
                    Tlb::new(geometry, PageSize::from_bytes(c.line).expect("validated"))
                        .map_err(|e| ParamError::new(format!("cache[{i}].ways"), e.to_string()))?,
                ))
            };
            levels.push(Level {
                name: c.name.clone(),
                level: c.level,
                serves: c.serves,
                latency: c.latency,
                write: c.write,
                index: c.index,
                walker: c.walker,
                size: c.size,
                line: c.line,
                ways: c.ways,
                sets,
                policy: c.policy,
                line_shift: c.line.trailing_zeros(),
                lines,
                stats: CacheStats::default(),
            });
        }
        let path = |wants: Serves, walk: bool| {
            let mut v: Vec<usize> = (0..levels.len())
                .filter(|&i| levels[i].serves == Serves::Unified || levels[i].serves == wants)
                .filter(|&i| !walk || levels[i].walker)
                .collect();
            v.sort_by_key(|&i| levels[i].level);
            v
        };
        let paths = [
            CachePath::of(&path(Serves::Instruction, false), Route::Instruction),
            CachePath::of(&path(Serves::Data, false), Route::Data),
            CachePath::of(&path(Serves::Data, true), Route::Walk),
        ];
        let first = paths.map(|p| p.get(0).map_or(NO_LEVEL as u8, |i| i as u8));
        Ok(Hierarchy {
            levels,
            paths,
            memory_latency: memory.latency,
            memory: MemoryStats::default(),
            first,
            mtlb: None,
            mtlb_miss: 0,
            dram_log: None,
        })
    }

    /// The levels, in config order.
    pub fn levels(&self) -> &[Level] {
        &self.levels
    }

    /// Level `i` (config order), to exchange a core's private level for another's.
    pub(crate) fn level_mut(&mut self, i: usize) -> &mut Level {
        &mut self.levels[i]
    }

    /// Counters per level, in config order (hits brought up to date).
    pub fn stats(&self) -> Vec<CacheStats> {
        self.levels.iter().map(|l| CacheStats { hits: l.stats.accesses - l.stats.misses, ..l.stats }).collect()
    }

    /// Memory counters.
    pub fn memory_stats(&self) -> MemoryStats {
        self.memory
    }

    /// Memory latency in cycles.
    pub fn memory_latency(&self) -> u64 {
        self.memory_latency
    }

    /// Latency of a hit at the first level of `route` (0 when the route has no cache: a perfect
    /// cache).
    pub fn first_latency(&self, route: Route) -> u64 {
        self.paths[route as usize].get(0).map_or(0, |i| self.levels[i].latency)
    }

    /// True if `route` goes through at least one level.
    #[inline(always)]
    pub fn has_path(&self, route: Route) -> bool {
        self.paths[route as usize].len > 0
    }

    /// The line size of the first level of `route` (accesses are split at its line boundaries);
    /// `None` without levels.
    #[inline(always)]
    pub fn first_line_shift(&self, route: Route) -> Option<u32> {
        self.paths[route as usize].get(0).map(|i| self.levels[i].line_shift)
    }

    /// One read or write of the line holding (`va`, `pa`) of address space `asid` by `route`.
    /// Returns the cycles until its data is there: the latency of the level that held the line,
    /// or memory's. A route without levels answers at once (0 cycles: a perfect cache). Writes
    /// that go on to a lower level do not wait for it (write buffers): a write costs the latency
    /// of the first level, unless it allocates its line there (a write-allocate miss reads it).
    #[inline(always)]
    pub fn access(&mut self, route: Route, write: bool, va: u64, pa: u64, asid: u32) -> u64 {
        let i = self.first[route as usize] as usize;
        if i == NO_LEVEL {
            // Walks without a cache to look up read memory; the other routes have a perfect cache.
            return if route == Route::Walk { self.memory(write, pa) } else { 0 };
        }
        // The common case inline: a level-1 hit that changes nothing but the replacement state.
        // Anything else starts over out of line; looking the line up again there changes no
        // state (a second use of the entry just used, or a second miss).
        let l = &mut self.levels[i];
        if !write || l.write == WritePolicy::Back {
            let (tag_space, key) = l.key(va, pa, asid);
            if l.lines.lookup(tag_space, key, write, route as usize).is_some() {
                l.stats.accesses += 1;
                return l.latency;
            }
        }
        self.at(self.paths[route as usize], 0, write, false, va, pa, asid)
    }

    /// An access at level `k` of `path`; `from_above` marks a write arriving from the level
    /// above (a writeback or a written-through store). (Plain arguments: this is the per-line
    /// path, recursive over the levels.)
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn at(&mut self, path: CachePath, k: usize, write: bool, from_above: bool, va: u64, pa: u64, asid: u32) -> u64 {
        let Some(i) = path.get(k) else {
            return self.memory(write, pa);
        };
        let l = &mut self.levels[i];
        let (tag_space, key) = l.key(va, pa, asid);
        let st = &mut l.stats;
        st.accesses += 1;
        let hint = if k == 0 { path.route as usize } else { 3 };
        if l.lines.lookup(tag_space, key, write && l.write == WritePolicy::Back, hint).is_some() {
            if write && l.write == WritePolicy::Through {
                let latency = l.latency;
                self.at(path, k + 1, true, true, va, pa, asid);
                return latency;
            }
            return l.latency;
        }
        st.misses += 1;
        if write {
            st.write_misses += 1;
        } else {
            st.read_misses += 1;
        }
        let (latency, shift, write_policy) = (l.latency, l.line_shift, l.write);
        if write && write_policy == WritePolicy::Through {
            // No-write-allocate: the write goes on; the writer does not wait for it.
            self.at(path, k + 1, true, true, va, pa, asid);
            return latency;
        }
        // Allocate. A write from above brings the whole line; anything else reads it from below,
        // one request per line of the next level within this level's line.
        let line_bytes = 1u64 << shift;
        let (line_va, line_pa) = (va & !(line_bytes - 1), pa & !(line_bytes - 1));
        let served = if from_above {
            latency
        } else {
            let next_shift = path.get(k + 1).map_or(shift, |n| self.levels[n].line_shift);
            let step = 1u64 << next_shift.min(shift);
            let mut worst = 0;
            let mut off = 0;
            while off < line_bytes {
                worst = worst.max(self.at(path, k + 1, false, false, line_va + off, line_pa + off, asid));
                off += step;
            }
            worst
        };
        let l = &mut self.levels[i];
        let dirty = if write && write_policy == WritePolicy::Back { DIRTY } else { 0 };
        let payload = (line_pa >> shift << 1) | dirty;
        if let Some((victim_key, victim_asid, victim_payload)) = l.lines.insert(tag_space, key, payload, shift) {
            if victim_payload & DIRTY != 0 {
                self.levels[i].stats.writebacks += 1;
                let victim_pa = (victim_payload >> 1) << shift;
                // Virtually tagged lines also know their virtual address (their key).
                let victim_va = match self.levels[i].index {
                    Indexing::Virtual => victim_key << shift,
                    _ => victim_pa,
                };
                self.at(path, k + 1, true, true, victim_va, victim_pa, victim_asid);
            }
        }
        served.max(latency)
    }

    /// A request that left the last level: a read (fill) or a write (writeback or written-through
    /// store) of the line at physical address `pa`. A memory-side stage (a memory controller
    /// translating the addresses of fills and writebacks) goes here.
    #[inline]
    pub fn memory(&mut self, write: bool, pa: u64) -> u64 {
        if write {
            self.memory.writes += 1;
        } else {
            self.memory.reads += 1;
        }
        let (cycles, dram) = match self.mtlb.as_deref_mut() {
            None => (self.memory_latency, Some(pa)),
            Some(m) => {
                // The controller's cycle, and on an MTLB miss the table entry's read.
                let r = m.access(write, pa);
                (r.cycles + self.memory_latency + self.mtlb_miss * r.table_read.is_some() as u64, r.dram)
            }
        };
        if let Some(log) = &mut self.dram_log {
            log.push(DramRequest { write, pa, dram });
        }
        cycles
    }

    /// Starts recording every request that reaches DRAM (for checks; allocates per request).
    pub fn record_dram(&mut self) {
        self.dram_log.get_or_insert_with(Vec::new);
    }

    /// The requests recorded since the last call.
    pub fn take_dram_log(&mut self) -> Vec<DramRequest> {
        self.dram_log.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Flushes the page of `bytes` at (`va`, `pa`) of address space `asid` from every level:
    /// each of its lines found is invalidated and, when `write_back` and dirty, written to
    /// memory (once per level holding it dirty: a request through [`Hierarchy::memory`] and its
    /// memory-side stage). Returns (lines found, dirty lines written).
    pub fn flush_page(&mut self, asid: u32, va: u64, pa: u64, bytes: u64, write_back: bool) -> (u64, u64) {
        let (mut found, mut dirty) = (0, 0);
        for i in 0..self.levels.len() {
            let shift = self.levels[i].line_shift;
            let mut off = 0;
            while off < bytes {
                let l = &mut self.levels[i];
                let (space, key) = l.key(va + off, pa + off, asid);
                if let Some(payload) = l.lines.remove(space, key) {
                    found += 1;
                    if write_back && payload & DIRTY != 0 {
                        dirty += 1;
                        self.memory(true, (payload >> 1) << shift);
                    }
                }
                off += 1 << shift;
            }
        }
        (found, dirty)
    }

    /// Puts the memory controller's TLB between the last level and DRAM.
    pub fn set_mtlb(&mut self, m: crate::mtlb::Mtlb) {
        self.mtlb_miss = m.miss_cycles().unwrap_or(self.memory_latency);
        self.mtlb = Some(Box::new(m));
    }

    /// The memory controller's TLB, if any.
    pub fn mtlb(&self) -> Option<&crate::mtlb::Mtlb> {
        self.mtlb.as_deref()
    }

    /// See [`Hierarchy::mtlb`] (the OS maps shadow pages through it).
    pub fn mtlb_mut(&mut self) -> Option<&mut crate::mtlb::Mtlb> {
        self.mtlb.as_deref_mut()
    }
}
