//! Miss curves: the misses of every TLB size and associativity in one pass over a trace
//! (`xlat curve`, docs/curve.md).
//!
//! Each page size is a *lane* that turns references into page keys exactly as a design's
//! level-1 TLB sees them (every page an access touches is one lookup, instruction fetches and
//! data alike, tagged with the running process) and feeds them to:
//! - LRU, fully associative: one [`stack::FaStack`] (exact LRU stack distances over a Fenwick
//!   tree of last-use times) gives every size up to the largest asked for;
//! - LRU, set-associative: one [`stack::SetStacks`] per number of sets, as deep as the widest
//!   associativity at that set count, gives every associativity of that set count;
//! - other policies: one engine [`Tlb`] per requested size, side by side.
//!
//! Unmaps and exits invalidate the pages they remove, as the engine's shootdowns do; the stacks
//! model invalid entries exactly (see [`stack`]). Flush-on-switch ASIDs and the OS's own
//! mappings (superpages, layouts, regions) are outside what a curve models: it is the curve of a
//! single-level TLB with tagged ASIDs and base-page entries, the default design.
//!
//! With a sampling rate `R` ([`CurveSpec::sample`]), fully associative points use spatial
//! sampling of pages (SHARDS): only pages whose key hashes below `R` are tracked, a sampled
//! stack distance `d` stands for `1 + (d - 1) / R`, and misses are scaled from the sampled lookups to all
//! of them; sizes up to [`NEAR`] entries stay exact (every page goes through a list that deep),
//! where SHARDS is least accurate. Set-associative points sample whole sets instead (a set's behaviour needs all its
//! pages); when fewer than 4 sets would be sampled, they are computed exactly.

pub mod stack;

use crate::addr::PageSize;
use crate::addr::{Asid, Pfn, Vpn};
use crate::engine::TraceCounts;
use crate::pt::{ParamError, Pte};
use crate::tlb::{Geometry, Policy, Tlb};
use crate::trace::{page_word, Kind, ReaderStats, Record, TraceError, TraceReader, SLOW_WORD};
use stack::{FaStack, SetStacks};

/// An associativity asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ways {
    /// Fully associative: as many ways as entries.
    Full,
    /// This many ways per set.
    N(u32),
}

/// What to compute.
#[derive(Clone, Debug)]
pub struct CurveSpec {
    /// TLB sizes (entries), in output order.
    pub entries: Vec<u32>,
    /// True when `entries` is a range (`A..B`): sizes a ways value cannot divide into a
    /// power-of-two number of sets are skipped for that value instead of rejected.
    pub entries_range: bool,
    /// Associativities, in output order.
    pub ways: Vec<Ways>,
    /// Replacement policy.
    pub policy: Policy,
    /// Base page sizes in bytes, one curve each.
    pub page_sizes: Vec<u64>,
    /// Spatial sampling rate in (0, 1]; `None`: exact.
    pub sample: Option<f64>,
    /// Stop after this many references.
    pub max_refs: Option<u64>,
    /// Seed of the random policy (the engine's default is 1).
    pub seed: u64,
}

/// One (entries, ways) pair's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Point {
    /// TLB entries.
    pub entries: u32,
    /// Ways per set (`entries` for fully associative).
    pub ways: u32,
    /// Misses (estimated when sampled).
    pub misses: u64,
}

/// The curve of one page size.
#[derive(Clone, Debug, PartialEq)]
pub struct PageCurve {
    /// Page size in bytes.
    pub page_size: u64,
    /// Lookups (pages touched, one per page an access spans).
    pub lookups: u64,
    /// One point per valid (entries, ways) pair, entries-major in the order asked for.
    pub points: Vec<Point>,
}

/// A curve run's result.
#[derive(Clone, Debug)]
pub struct CurveResult {
    /// Trace counts (`lookups` at the first page size).
    pub trace: TraceCounts,
    /// What the reader consumed and skipped.
    pub reader: ReaderStats,
    /// True if `max_refs` stopped the run before the trace ended.
    pub truncated_by_limit: bool,
    /// One curve per page size, in the order asked for.
    pub curves: Vec<PageCurve>,
}

impl CurveResult {
    /// Instructions: the trace's instruction fetches (the MPKI denominator).
    pub fn instructions(&self) -> u64 {
        self.trace.by_kind[Kind::Ifetch as usize]
    }

    /// The `trace` object of a curve's JSON (docs/curve.md) for the trace at `path` read as
    /// `format`.
    pub fn trace_json(&self, path: &str, format: &str) -> serde_json::Value {
        let t = &self.trace;
        let by_kind: serde_json::Map<String, serde_json::Value> =
            Kind::ALL.iter().map(|k| (k.name().to_string(), t.by_kind[*k as usize].into())).collect();
        let first = &self.curves[0];
        serde_json::json!({
            "path": path,
            "format": format,
            "references": t.references,
            "by_kind": by_kind,
            "instructions": self.instructions(),
            "lookups": first.lookups,
            "lookup_page_size": first.page_size,
            "events": t.events,
            "clipped_accesses": t.clipped_accesses,
            "skipped": self.reader.skipped,
            "stopped_at_max_refs": self.truncated_by_limit,
        })
    }
}

/// Why a curve could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum CurveError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// A parameter is unusable.
    #[error(transparent)]
    Param(#[from] ParamError),
    /// More processes than the page keys can tell apart.
    #[error("the trace has more than {0} processes, more than a curve at this page size can tell apart")]
    Processes(u32),
}

/// Largest TLB size a curve takes (entries).
pub const MAX_SIZE: u32 = 1 << 20;

/// Most points one curve computes, over all its page sizes: the table, JSON and CSV hold each.
pub const MAX_POINTS: u64 = 1 << 21;

/// Policies other than LRU simulate each point on its own TLB, side by side, and every reference
/// looks up every one of them: at most this many TLBs.
pub const MAX_TLBS: u64 = 256;

/// Policies other than LRU: at most this many entries in all their TLBs together (each entry
/// takes about 80 bytes).
pub const MAX_TLB_ENTRIES: u64 = 1 << 22;

/// Set-associative LRU keeps, for each number of sets at each page size, one stack per set as
/// deep as the widest associativity at that set count, and a reference searches and shifts its
/// set's stack at each of them: at most this much depth summed over them.
pub const MAX_SET_DEPTH: u64 = 1 << 14;

/// Set-associative LRU: at most this many stack slots (sets times depth, 8 bytes each) in all.
pub const MAX_SET_SLOTS: u64 = 1 << 26;

/// What a curve holds and does, from its points ([`CurveSpec::cost`]); [`CurveSpec::pairs`]
/// refuses a curve above any of the bounds [`MAX_POINTS`], [`MAX_TLBS`], [`MAX_TLB_ENTRIES`],
/// [`MAX_SET_DEPTH`] and [`MAX_SET_SLOTS`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Points over all page sizes.
    pub points: u64,
    /// TLBs simulated side by side (policies other than LRU).
    pub tlbs: u64,
    /// Their entries, all together.
    pub tlb_entries: u64,
    /// Set-associative LRU: the depth of the per-set stacks, summed over set counts and page
    /// sizes (what one reference may search).
    pub set_depth: u64,
    /// Set-associative LRU: their slots (sets times depth), all together.
    pub set_slots: u64,
}

/// The sizes of a curve when none are given: the powers of two from 1 to 4096, taken as a range
/// (a size that an associativity does not fit is skipped for it, so every power-of-two
/// `--ways` works with them).
pub fn default_entries() -> (Vec<u32>, bool) {
    ((0..=12).map(|k| 1u32 << k).collect(), true)
}

/// Parses `--entries`: a comma list of sizes (`8,16,32`), or a range `A..B` (every size from A to
/// B inclusive). Returns the sizes and whether it was a range.
pub fn parse_entries(s: &str) -> Result<(Vec<u32>, bool), ParamError> {
    let bad = |what: &str| {
        ParamError::new(
            "--entries",
            format!("expected sizes like 8,16,32,64 or a range like 1..4096, got '{}' ({what})", shorten(s)),
        )
    };
    let num = |t: &str| -> Result<u32, ParamError> {
        let n: u32 = t.trim().parse().map_err(|_| bad(&format!("'{}' is not a number", shorten(t.trim()))))?;
        if n == 0 {
            return Err(bad("a TLB has at least 1 entry"));
        }
        if n > MAX_SIZE {
            return Err(bad(&format!("at most {MAX_SIZE} entries")));
        }
        Ok(n)
    };
    if let Some((a, b)) = s.split_once("..") {
        let (a, b) = (num(a)?, num(b.trim_start_matches('='))?);
        if a > b {
            return Err(bad("the range is empty"));
        }
        return Ok(((a..=b).collect(), true));
    }
    let mut v = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in s.split(',') {
        let n = num(t)?;
        if seen.insert(n) {
            v.push(n);
        }
    }
    Ok((v, false))
}

/// `s` as an error line quotes it: cut to a length that fits the line, control characters
/// (a line break) escaped.
fn shorten(s: &str) -> String {
    const MAX: usize = 60;
    let mut out = String::new();
    for c in s.chars().take(MAX) {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    if s.chars().nth(MAX).is_some() {
        out.push_str("...");
    }
    out
}

/// Parses `--ways`: a comma list of way counts and `full`.
pub fn parse_ways(s: &str) -> Result<Vec<Ways>, ParamError> {
    let mut v = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for t in s.split(',').map(str::trim) {
        let w = if t == "full" {
            Ways::Full
        } else {
            match t.parse::<u32>() {
                Ok(0) => return Err(ParamError::new("--ways", "0 ways: a set has at least 1 way")),
                Ok(n) => Ways::N(n),
                Err(_) => {
                    return Err(ParamError::new(
                        "--ways",
                        format!("expected way counts and `full` like full,1,2,4,8, got '{}'", shorten(t)),
                    ))
                }
            }
        };
        if seen.insert(w) {
            v.push(w);
        }
    }
    Ok(v)
}

/// Parses `--policy`.
pub fn parse_policy(s: &str) -> Result<Policy, ParamError> {
    [Policy::Lru, Policy::Fifo, Policy::Random, Policy::Nru, Policy::Plru]
        .into_iter()
        .find(|p| p.name() == s)
        .ok_or_else(|| {
            ParamError::new(
                "--policy",
                format!("unknown policy '{}': expected lru, fifo, random, nru or plru", shorten(s)),
            )
        })
}

/// Why `e` entries of `w` ways are not a TLB of `policy`, if they are not.
fn unfit(e: u32, w: u32, policy: Policy) -> Option<String> {
    let sets = e / w.max(1);
    if w > e {
        Some(format!("{w} ways exceed {e} entries"))
    } else if e % w != 0 {
        Some(format!("{w} ways do not divide {e} entries"))
    } else if !sets.is_power_of_two() {
        Some(format!("{e} entries of {w} ways make {sets} sets, expected a power of two"))
    } else if policy == Policy::Plru && !w.is_power_of_two() {
        Some(format!("plru needs a power-of-two number of ways, got {w}"))
    } else {
        None
    }
}

impl CurveSpec {
    /// The (entries, ways) pairs to compute, checked: entries-major, in the order asked for. A
    /// size listed twice counts once. A curve above one of the bounds of [`Cost`] is refused
    /// before anything is allocated for it.
    pub fn pairs(&self) -> Result<Vec<(u32, u32)>, ParamError> {
        if self.entries.is_empty() {
            return Err(ParamError::new("--entries", "no size given"));
        }
        if self.ways.is_empty() {
            return Err(ParamError::new("--ways", "no associativity given"));
        }
        let mut entries = Vec::with_capacity(self.entries.len().min(MAX_SIZE as usize));
        let mut place = std::collections::HashMap::new();
        for &e in &self.entries {
            if !(1..=MAX_SIZE).contains(&e) {
                return Err(ParamError::new("--entries", format!("expected sizes from 1 to {MAX_SIZE}, got {e}")));
            }
            if let std::collections::hash_map::Entry::Vacant(v) = place.entry(e) {
                v.insert(entries.len());
                entries.push(e);
            }
        }
        for w in &self.ways {
            if *w == Ways::N(0) {
                return Err(ParamError::new("--ways", "0 ways: a set has at least 1 way"));
            }
        }
        let page_sizes = self.page_sizes.len().max(1) as u64;
        let too_many = |pairs: u64| {
            ParamError::new(
                "--entries",
                format!(
                    "at least {} points ({pairs} pairs of size and associativity at each of {page_sizes} page size{}), more than the {MAX_POINTS} a curve computes: list fewer sizes, associativities or page sizes",
                    pairs.saturating_mul(page_sizes),
                    if page_sizes == 1 { "" } else { "s" }
                ),
            )
        };
        let max_pairs = MAX_POINTS / page_sizes;
        let mut used = vec![false; self.ways.len()];
        // (place of the size, place of the associativity, ways).
        let mut found: Vec<(usize, usize, u32)> = Vec::new();
        if self.entries_range {
            // Only the sizes each associativity fits: every size for `full`, `n` times a power of
            // two for `n` ways (no search through every size for every associativity).
            for (i, w) in self.ways.iter().enumerate() {
                match *w {
                    Ways::Full => {
                        for (p, &e) in entries.iter().enumerate() {
                            if unfit(e, e, self.policy).is_none() {
                                found.push((p, i, e));
                            }
                        }
                    }
                    Ways::N(n) => {
                        let mut e = n as u64;
                        while e <= MAX_SIZE as u64 {
                            if let Some(&p) = place.get(&(e as u32)) {
                                if unfit(e as u32, n, self.policy).is_none() {
                                    found.push((p, i, n));
                                }
                            }
                            e *= 2;
                        }
                    }
                }
                if found.len() as u64 > max_pairs + self.ways.len() as u64 {
                    return Err(too_many(found.len() as u64));
                }
            }
            found.sort_unstable_by_key(|&(p, i, _)| (p, i));
        } else {
            for (p, &e) in entries.iter().enumerate() {
                for (i, w) in self.ways.iter().enumerate() {
                    let w = match *w {
                        Ways::Full => e,
                        Ways::N(n) => n,
                    };
                    if let Some(msg) = unfit(e, w, self.policy) {
                        return Err(ParamError::new("--ways", msg));
                    }
                    found.push((p, i, w));
                }
                if found.len() as u64 > max_pairs + self.ways.len() as u64 {
                    return Err(too_many(found.len() as u64));
                }
            }
        }
        let mut pairs = Vec::with_capacity(found.len());
        let mut fa_at = usize::MAX;
        for &(p, i, w) in &found {
            used[i] = true;
            let e = entries[p];
            // `full` and an explicit way count can name the same pair: once.
            if e == w {
                if fa_at == p {
                    continue;
                }
                fa_at = p;
            }
            pairs.push((e, w));
        }
        drop(found);
        if let Some(i) = used.iter().position(|u| !u) {
            let w = match self.ways[i] {
                Ways::Full => "full".to_string(),
                Ways::N(n) => n.to_string(),
            };
            return Err(ParamError::new(
                "--ways",
                format!("{w} ways fit none of the sizes of --entries (ways must divide entries into a power-of-two number of sets)"),
            ));
        }
        if pairs.len() as u64 > max_pairs {
            return Err(too_many(pairs.len() as u64));
        }
        if self.page_sizes.is_empty() {
            return Err(ParamError::new("--page-size", "no page size given"));
        }
        for &p in &self.page_sizes {
            if !p.is_power_of_two() || !(1024..=(1 << 40)).contains(&p) {
                return Err(ParamError::new(
                    "--page-size",
                    format!("expected a power of two from 1024 to 2^40 bytes, got {p}"),
                ));
            }
        }
        if let Some(i) = (1..self.page_sizes.len()).find(|&i| self.page_sizes[..i].contains(&self.page_sizes[i])) {
            return Err(ParamError::new("--page-size", format!("page size {} is given twice", self.page_sizes[i])));
        }
        if let Some(r) = self.sample {
            if !(r > 0.0 && r <= 1.0) {
                return Err(ParamError::new("--sample", format!("expected a rate in (0, 1], got {r}")));
            }
            if self.policy != Policy::Lru {
                return Err(ParamError::new(
                    "--sample",
                    format!(
                        "sampling applies to LRU stack distances; policy {} is simulated exactly",
                        self.policy.name()
                    ),
                ));
            }
        }
        self.check_cost(&self.cost(&pairs))?;
        Ok(pairs)
    }

    /// What the curve of `pairs` (from [`CurveSpec::pairs`]) holds and does.
    pub fn cost(&self, pairs: &[(u32, u32)]) -> Cost {
        let p = self.page_sizes.len() as u64;
        let mut c = Cost { points: pairs.len() as u64 * p, ..Cost::default() };
        if self.policy != Policy::Lru {
            c.tlbs = c.points;
            c.tlb_entries = pairs.iter().map(|&(e, _)| e as u64).sum::<u64>() * p;
        } else {
            // The deepest associativity at each number of sets (a power of two: by its log).
            let mut depth = [0u64; 64];
            for &(e, w) in pairs.iter().filter(|(e, w)| e != w) {
                let k = (e / w).trailing_zeros() as usize;
                depth[k] = depth[k].max(w as u64);
            }
            c.set_depth = depth.iter().sum::<u64>() * p;
            c.set_slots = depth.iter().enumerate().map(|(k, d)| d << k).sum::<u64>() * p;
        }
        c
    }

    /// Refuses a curve above one of the bounds of [`Cost`].
    fn check_cost(&self, c: &Cost) -> Result<(), ParamError> {
        let (policy, what) = (self.policy.name(), "list fewer sizes, associativities or page sizes");
        if c.points > MAX_POINTS {
            return Err(ParamError::new(
                "--entries",
                format!("{} points over all page sizes, more than the {MAX_POINTS} a curve computes: {what}", c.points),
            ));
        }
        if c.tlbs > MAX_TLBS {
            return Err(ParamError::new(
                "--entries",
                format!(
                    "policy {policy} simulates each size, associativity and page size on its own TLB, side by side: {} TLBs, more than {MAX_TLBS}: {what} (powers of two, say), or use --policy lru, which gives every size in one pass",
                    c.tlbs
                ),
            ));
        }
        if c.tlb_entries > MAX_TLB_ENTRIES {
            return Err(ParamError::new(
                "--entries",
                format!(
                    "policy {policy} simulates each size on its own TLB, side by side: {} entries in all, more than {MAX_TLB_ENTRIES}: {what}",
                    c.tlb_entries
                ),
            ));
        }
        if c.set_depth > MAX_SET_DEPTH {
            return Err(ParamError::new(
                "--ways",
                format!(
                    "set-associative LRU searches a stack as deep as the widest associativity at each number of sets and page size: {} deep in all, more than {MAX_SET_DEPTH}: list fewer or narrower associativities (`full` has no such bound)",
                    c.set_depth
                ),
            ));
        }
        if c.set_slots > MAX_SET_SLOTS {
            return Err(ParamError::new(
                "--ways",
                format!(
                    "set-associative LRU keeps the entries of the largest size at each number of sets and page size: {} in all, more than {MAX_SET_SLOTS}: {what} (`full` has no such bound)",
                    c.set_slots
                ),
            ));
        }
        Ok(())
    }
}

/// A hash of a key, uniform over `u64` (for sampling).
#[inline(always)]
fn mix(k: u64) -> u64 {
    let mut x = k.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The fully associative LRU stack of a lane, with its sampling filter.
struct FaLane {
    stack: FaStack,
    /// Keys whose hash is below this are tracked (`u64::MAX`: all).
    threshold: u64,
    /// Lookups tracked.
    tracked: u64,
    /// Cache of the last key's sampling decision.
    last: u64,
    last_in: bool,
    /// Sampled curves: the exact stack of every page, [`NEAR`] deep, for the small sizes.
    near: Option<SetStacks>,
}

/// Sizes up to this are exact in sampled curves (their distances come from a list this deep).
pub const NEAR: u32 = 32;

/// Per-set stacks of one set count, with its set-sampling filter.
struct SetLane {
    sets: u32,
    stacks: SetStacks,
    /// Sampled sets (empty: every set).
    sampled: Vec<bool>,
    tracked: u64,
}

/// Everything computed at one page size.
struct Lane {
    page_size: PageSize,
    shift: u32,
    /// Keys are `vpn | dense_asid << asid_shift`.
    asid_shift: u32,
    /// Dense index -> ASID.
    asids: Vec<u32>,
    max_asids: u32,
    cur: u64,
    cur_asid: u32,
    /// The rights of each process's mapped ranges: a protect invalidates the pages that lose one.
    rights: crate::os::rights::Rights,
    /// Ranges a protect took a right from (scratch).
    lost: Vec<(u64, u64)>,
    lookups: u64,
    fa: Option<FaLane>,
    sets: Vec<SetLane>,
    /// Other policies: (entries, ways, TLB, misses).
    tlbs: Vec<(u32, u32, Tlb, u64)>,
    rate: f64,
    /// The last two distinct keys looked up, most recent first, since the last invalidation
    /// ([`stack::EMPTY`]: none). The most recent is at the top of its set in every set lane;
    /// the other is at the top of its own set, or second in a set it shares with the first.
    recent: [u64; 2],
    /// Every lane is exact LRU (no sampling, no other policy): runs of references to the two
    /// recent pages are counted in registers ([`Lane::pair_run`]).
    pair_runs: bool,
}

impl Lane {
    fn new(spec: &CurveSpec, pairs: &[(u32, u32)], page_bytes: u64) -> Lane {
        let page_size = PageSize::from_bytes(page_bytes).expect("validated");
        let shift = page_size.shift();
        let asid_shift = 64 - shift;
        let max_asids = (1u32 << shift.min(20)) - 2;
        let rate = spec.sample.unwrap_or(1.0);
        let threshold = if spec.sample.is_some() && rate < 1.0 { (rate * u64::MAX as f64) as u64 } else { u64::MAX };
        let (mut fa, mut sets, mut tlbs) = (None, Vec::<SetLane>::new(), Vec::new());
        if spec.policy == Policy::Lru {
            let fa_max = pairs.iter().filter(|(e, w)| e == w).map(|p| p.0).max();
            fa = fa_max.map(|m| FaLane {
                stack: FaStack::new(m),
                threshold,
                tracked: 0,
                last: stack::EMPTY,
                last_in: false,
                near: (threshold != u64::MAX).then(|| SetStacks::new(1, NEAR.min(m))),
            });
            for &(e, w) in pairs.iter().filter(|(e, w)| e != w) {
                let s = e / w;
                match sets.iter_mut().find(|l| l.sets == s) {
                    Some(l) => {
                        if w as usize + 2 > l.stacks.hist.len() {
                            l.stacks = SetStacks::new(s, w);
                        }
                    }
                    None => {
                        let k = (s as f64 * rate).round() as u32;
                        let sampled = if rate < 1.0 && k >= 4 {
                            (0..s).map(|i| mix(i as u64 ^ 0x5e75) < threshold).collect()
                        } else {
                            Vec::new()
                        };
                        sets.push(SetLane { sets: s, stacks: SetStacks::new(s, w), sampled, tracked: 0 });
                    }
                }
            }
        } else {
            for &(e, w) in pairs {
                let g = Geometry { entries: e, ways: w, policy: spec.policy, seed: spec.seed };
                tlbs.push((e, w, Tlb::new(g, page_size).expect("validated geometry"), 0));
            }
        }
        let pair_runs = tlbs.is_empty()
            && fa.as_ref().map_or(true, |f| f.threshold == u64::MAX)
            && sets.iter().all(|s| s.sampled.is_empty());
        Lane {
            page_size,
            shift,
            asid_shift,
            asids: vec![0],
            max_asids,
            cur: 0,
            cur_asid: 0,
            rights: Default::default(),
            lost: Vec::new(),
            lookups: 0,
            fa,
            sets,
            pair_runs,
            tlbs,
            rate,
            recent: [stack::EMPTY; 2],
        }
    }

    fn dense(&mut self, asid: u32) -> Result<u64, CurveError> {
        if let Some(i) = self.asids.iter().position(|&a| a == asid) {
            return Ok(i as u64);
        }
        if self.asids.len() as u32 >= self.max_asids {
            return Err(CurveError::Processes(self.max_asids));
        }
        self.asids.push(asid);
        Ok(self.asids.len() as u64 - 1)
    }

    /// Simulates `records`, through `words` (their page words at this lane's page size, made by
    /// the reader thread) if given.
    fn process(&mut self, records: &[Record], words: Option<&[u64]>) -> Result<(), CurveError> {
        match words {
            Some(w) => {
                let w = &w[..records.len()];
                self.process_words(records, |i| w[i])
            }
            None => {
                let shift = self.shift;
                self.process_words(records, |i| page_word(&records[i], shift))
            }
        }
    }

    /// The loop of [`Lane::process`] over `records`, whose page words `word(i)` gives.
    #[inline(always)]
    fn process_words(&mut self, records: &[Record], word: impl Fn(usize) -> u64) -> Result<(), CurveError> {
        let mut i = 0;
        while i < records.len() {
            let w = word(i);
            i += 1;
            if w == SLOW_WORD {
                self.record(&records[i - 1])?;
                continue;
            }
            // Most references: one page, and one of the two looked up last.
            if self.pair_runs {
                let key = (w >> 1) | self.cur;
                if (key == self.recent[0] || key == self.recent[1])
                    && self.fa.as_ref().map_or(true, |fa| fa.stack.top() == self.recent)
                {
                    let key = |j: usize| Some(word(j)).filter(|&w| w != SLOW_WORD).map(|w| w >> 1);
                    i = self.pair_run(i - 1, records.len(), key);
                    continue;
                }
            }
            self.lookups += 1;
            self.lookup(w >> 1);
        }
        Ok(())
    }

    /// [`Lane::lookup`] of page `vpn(j)` for `j` from `i` while each is one of the two recent
    /// pages (most references of real programs, which alternate between an instruction page
    /// and a data page), counted in registers; returns the first `j` that is not (or `n`).
    /// `vpn` gives `None` to stop. The lanes take the counts at the end: in each set lane
    /// whose sets hold both pages in one set, a reference to the page that was not the last
    /// one is at depth 2 (at depth 1 otherwise), and the two swap places when the run ends on
    /// the other page; in the fully associative stack, as in a set shared by both.
    #[inline(always)]
    fn pair_run(&mut self, mut i: usize, n: usize, vpn: impl Fn(usize) -> Option<u64>) -> usize {
        let cur = self.cur;
        let [mut a, mut b] = self.recent;
        let (mut same, mut switch) = (0u64, 0u64);
        while i < n {
            match vpn(i).map(|v| v | cur) {
                Some(k) if k == a => same += 1,
                Some(k) if k == b => {
                    switch += 1;
                    (a, b) = (b, a);
                }
                _ => break,
            }
            i += 1;
        }
        self.lookups += same + switch;
        if let Some(fa) = &mut self.fa {
            fa.stack.add_top_run(same, switch);
        }
        let [x, y] = self.recent;
        for s in &mut self.sets {
            s.tracked += same + switch;
            s.stacks.add_pair_run(x, y, same, switch);
        }
        self.recent = [a, b];
        i
    }

    /// A record that is not a one-page access.
    #[inline(never)]
    fn record(&mut self, r: &Record) -> Result<(), CurveError> {
        let shift = self.shift;
        match *r {
            Record::Access { size, addr, .. } => {
                let first = addr >> shift;
                let last = addr.saturating_add((size as u64).saturating_sub(1)) >> shift;
                self.lookups += last - first + 1;
                for vpn in first..=last {
                    self.lookup(vpn);
                }
            }
            Record::Process { asid } | Record::ContextSwitch { asid } if asid != self.cur_asid => {
                self.cur = self.dense(asid)? << self.asid_shift;
                self.cur_asid = asid;
            }
            Record::Unmap { start, len } if len > 0 => {
                self.rights.unmap(self.cur_asid, start, len);
                self.invalidate_bytes(start, len);
            }
            // The pages go (or, with MADV_FREE, their entries), as in the engine.
            Record::Discard { start, len, .. } if len > 0 => self.invalidate_bytes(start, len),
            Record::Map { start, len, flags } => self.rights.map(self.cur_asid, start, len, flags),
            Record::Protect { start, len, flags } => {
                let mut lost = std::mem::take(&mut self.lost);
                lost.clear();
                self.rights.protect(self.cur_asid, start, len, flags, &mut lost);
                for &(s, n) in &lost {
                    self.invalidate_bytes(s, n);
                }
                self.lost = lost;
            }
            Record::Fork { child } => self.rights.fork(self.cur_asid, child),
            Record::Exit { asid } => {
                self.rights.exit(asid);
                let d = self.dense(asid)? << self.asid_shift;
                let mask = (1u64 << self.asid_shift) - 1;
                self.invalidate(Asid(asid), 0, u64::MAX, move |k| k & !mask == d);
            }
            _ => {}
        }
        Ok(())
    }

    /// Invalidates the running process's pages of bytes `[start, start + len)` (`len > 0`).
    fn invalidate_bytes(&mut self, start: u64, len: u64) {
        let shift = self.shift;
        let (lo, hi) = (start >> shift, start.saturating_add(len - 1) >> shift);
        let (cur, mask) = (self.cur, (1u64 << self.asid_shift) - 1);
        self.invalidate(Asid(self.cur_asid), lo, hi, move |k| k & !mask == cur && (lo..=hi).contains(&(k & mask)));
    }

    /// One lookup of page `vpn` of the running process.
    #[inline(always)]
    fn lookup(&mut self, vpn: u64) {
        let key = vpn | self.cur;
        // The page looked up last (no invalidation since) hits again in every TLB of any
        // policy without changing what any of them will do: it is skipped.
        let repeat = key == self.recent[0];
        if !repeat {
            self.recent = [key, self.recent[0]];
        }
        if let Some(fa) = &mut self.fa {
            if fa.threshold == u64::MAX {
                fa.stack.access(key);
            } else {
                fa.near.as_mut().expect("sampled").access(key);
                if key != fa.last {
                    fa.last = key;
                    fa.last_in = mix(key) < fa.threshold;
                }
                if fa.last_in {
                    fa.tracked += 1;
                    fa.stack.access(key);
                }
            }
        }
        for s in &mut self.sets {
            if s.sampled.is_empty() || s.sampled[s.stacks.set_of(key)] {
                s.tracked += 1;
                s.stacks.access(key);
            }
        }
        if repeat {
            return;
        }
        for (_, _, tlb, misses) in &mut self.tlbs {
            let (asid, v) = (Asid(self.cur_asid), Vpn(vpn));
            if tlb.lookup(asid, v).is_none() {
                *misses += 1;
                tlb.fill(asid.0, v, Pte { pfn: Pfn(vpn), size: self.page_size, valid: 0 });
            }
        }
    }

    /// Invalidates pages `lo..=hi` of `asid` (`f` selects their keys).
    fn invalidate(&mut self, asid: Asid, lo: u64, hi: u64, f: impl Fn(u64) -> bool + Copy) {
        self.recent = [stack::EMPTY; 2];
        if let Some(fa) = &mut self.fa {
            for k in fa.stack.keys_where(f) {
                fa.stack.invalidate(k);
            }
            fa.last = stack::EMPTY;
        }
        for s in &mut self.sets {
            s.stacks.invalidate_where(f);
        }
        for (_, _, tlb, _) in &mut self.tlbs {
            tlb.invalidate_range(asid, Vpn(lo), Vpn(hi));
        }
    }

    fn finish(self, pairs: &[(u32, u32)]) -> PageCurve {
        let scale = |tracked: u64, misses: f64| -> u64 {
            if tracked == 0 {
                0
            } else {
                (misses * self.lookups as f64 / tracked as f64).round() as u64
            }
        };
        // Hits up to each distance, so that each point is one subtraction.
        let fa_hits =
            self.fa.as_ref().map(|fa| (cumulative(&fa.stack.hist), fa.near.as_ref().map(|n| cumulative(&n.hist))));
        let set_hits: Vec<Vec<u64>> = self.sets.iter().map(|s| cumulative(&s.stacks.hist)).collect();
        let points = pairs
            .iter()
            .enumerate()
            .map(|(i, &(e, w))| {
                let misses = if !self.tlbs.is_empty() {
                    // One TLB per pair, in order.
                    debug_assert_eq!((self.tlbs[i].0, self.tlbs[i].1), (e, w));
                    self.tlbs[i].3
                } else if e == w {
                    let fa = self.fa.as_ref().expect("an FA stack for FA pairs");
                    let (hits, near) = fa_hits.as_ref().expect("an FA stack for FA pairs");
                    if fa.threshold == u64::MAX {
                        self.lookups - hits[e as usize]
                    } else if e <= NEAR {
                        self.lookups - near.as_ref().expect("sampled")[e as usize]
                    } else {
                        // A sampled distance d counts the page itself and d - 1 sampled pages
                        // between its uses, which stand for (d - 1) / R pages: a hit at size e
                        // when 1 + (d - 1) / R <= e.
                        let reach =
                            ((1.0 + (e - 1) as f64 * self.rate + 1e-9).floor() as usize).min(fa.stack.hist.len() - 2);
                        scale(fa.tracked, (fa.tracked - hits[reach]) as f64)
                    }
                } else {
                    let k = self.sets.iter().position(|s| s.sets == e / w).expect("stacks for each set count");
                    let s = &self.sets[k];
                    scale(s.tracked, (s.tracked - set_hits[k][w as usize]) as f64)
                };
                Point { entries: e, ways: w, misses }
            })
            .collect();
        PageCurve { page_size: self.page_size.bytes(), lookups: self.lookups, points }
    }
}

/// `c[d]`: the references of histogram `hist` at distances 1 to `d` (`hist[0]` is unused).
fn cumulative(hist: &[u64]) -> Vec<u64> {
    let mut c = Vec::with_capacity(hist.len());
    let mut sum = 0u64;
    c.push(0);
    for &h in hist.iter().skip(1) {
        sum += h;
        c.push(sum);
    }
    c
}

/// Computes the curves of `spec` in one pass over `reader` (read on its own thread). `progress`
/// is called after each batch with the references done so far.
pub fn curve(
    reader: &mut dyn TraceReader,
    spec: &CurveSpec,
    mut progress: impl FnMut(u64),
) -> Result<CurveResult, CurveError> {
    let pairs = spec.pairs()?;
    let mut lanes: Vec<Lane> = spec.page_sizes.iter().map(|&p| Lane::new(spec, &pairs, p)).collect();
    let max = spec.max_refs.unwrap_or(u64::MAX);
    let shift = spec.page_sizes[0].trailing_zeros();
    let mut counts = TraceCounts { lookup_page_size: spec.page_sizes[0], ..TraceCounts::default() };
    let truncated = std::thread::scope(|scope| -> Result<bool, CurveError> {
        // Lanes at the first page size read the page words alone (and the records that take
        // the general step); the others read every record.
        let all_records = lanes.iter().any(|l| l.shift != shift);
        let spec = crate::engine::feed::FeedSpec { shift, max, threads: 2, all_records };
        let feed = crate::engine::feed::spawn(scope, &mut *reader, counts, spec);
        while let Some(batch) = feed.next() {
            let batch = batch?;
            let words = batch.words();
            for lane in &mut lanes {
                if lane.shift == shift {
                    lane.process(batch.slow_records(), Some(words))?;
                } else {
                    lane.process(batch.records(), None)?;
                }
            }
            counts = batch.after;
            progress(counts.references);
            feed.recycle(batch);
        }
        Ok(feed.finish())
    })?;
    let curves = lanes.into_iter().map(|l| l.finish(&pairs)).collect();
    Ok(CurveResult { trace: counts, reader: reader.stats(), truncated_by_limit: truncated, curves })
}
