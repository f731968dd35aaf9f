//! Translation lookaside buffers: any geometry, five replacement policies, ASID and global tags,
//! and four entry formats (talluri95 §4.1, §4.4).
//!
//! A [`Tlb`] is one structure of `entries` slots split into `sets = entries / ways` sets
//! (`ways == entries` is fully associative; `entries` need not be a power of two). Each entry
//! covers an aligned run of `2^k` base pages; its tag is the VPN at its own size (`vpn >> k`) and
//! its set is that tag modulo `sets`.
//!
//! # Entry formats
//!
//! The [`Format`] of a TLB says how [`Tlb::fill`] turns a page-table mapping ([`Pte`]) into an
//! entry:
//! - [`Format::Single`]: a base-page entry, whatever the PTE's size;
//! - [`Format::Superpage`]: one entry of the superpage's size for a superpage PTE, else a base-page
//!   entry; entries of several sizes share the TLB;
//! - [`Format::PartialSubblock`]: a block entry (one tag per aligned block of `block_pages` base
//!   pages, one frame, a valid bit per base page) for a partial-subblock PTE or a superpage at
//!   least as large as the block, else a base-page entry. A fill whose block entry already exists
//!   updates its valid vector in place;
//! - [`Format::CompleteSubblock`]: a block entry with a frame and a valid bit per base page for
//!   every mapping. A miss whose block entry exists adds the page to it (a *subblock miss*); other
//!   misses allocate a new entry (a *block miss*). [`Tlb::fill_block`] loads every mapped page of
//!   the block at once (subblock prefetch).
//!
//! A fill that only updates an existing block entry (reported as [`Fill::merged`]) evicts
//! nothing and counts as a use of the entry for the replacement policy (as a hit does).
//! [`Tlb::insert`] installs a translation taken from another TLB ([`TlbData`]): its `shift` gives
//! its size and a non-zero `valid` makes it a block entry; a complete-subblock TLB stores base
//! and block-sized translations in its block entries. When several entries translate one base
//! page (possible only when mappings change without a shootdown), the one with the smallest page
//! size answers, and among equal sizes the process's own entry before a [`GLOBAL`] one.
//!
//! # Storage and lookups
//!
//! Storage is flat (`sets * ways` slots, structure of arrays); the per-page frames of
//! complete-subblock entries live in a side array (`slots * block_pages`), so the hot slot stays
//! small. A lookup probes once per entry size present in the TLB (a count is kept per size, so a
//! TLB holding only base pages probes once): it scans the set when it has at most [`SCAN_WAYS`]
//! ways and uses a hashed index (tag, size, ASID) -> slot, chained through the slots, for wider
//! sets, so a 64- or 128-entry fully associative TLB answers in a few nanoseconds. Every
//! replacement policy keeps a per-set list of slots in insertion (FIFO) or recency (LRU) order;
//! invalid slots sit at its tail so that every policy fills empty ways before it evicts.
//!
//! VPNs must be below 2^58 when entries larger than a base page are used (any 64-bit address with
//! base pages of 64 bytes or more): the size is folded into the top bits of the lookup key.

pub(crate) mod policy;

pub use policy::Policy;
use policy::PolicyState;

use crate::addr::{Asid, PageSize, Pfn, Vpn};
use crate::padded::Padded;
use crate::pt::Pte;
use crate::trace::SLOW_WORD;

/// Sets with at most this many ways are searched by scanning; wider ones through an index.
pub const SCAN_WAYS: u32 = 16;

/// ASID value of a global entry: it matches every process.
pub const GLOBAL: u32 = u32::MAX;

const INVALID: u64 = u64::MAX;
const NIL: u32 = u32::MAX;
/// The lookup key of an entry is `tag ^ (k << KEY_SHIFT)`, `k` = log2(entry pages).
const KEY_SHIFT: u32 = 58;
/// `shift` value that no entry has (the complete-subblock shift of other formats).
const NO_SHIFT: u8 = u8::MAX;

#[inline(always)]
fn key_of(tag: u64, k: u32) -> u64 {
    tag ^ ((k as u64) << KEY_SHIFT)
}

/// Mask of the low `n` bits (`n` <= 64).
#[inline(always)]
fn low_bits(n: u32) -> u64 {
    if n >= 64 {
        u64::MAX
    } else {
        (1u64 << n) - 1
    }
}

/// True if an entry with this payload translates its base page number `idx` (offset in the entry).
#[inline(always)]
fn translates(data: &TlbData, idx: u64) -> bool {
    data.valid == 0 || (idx < 64 && (data.valid >> idx) & 1 != 0)
}

/// Shape and policy of one TLB structure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Total entries (> 0).
    pub entries: u32,
    /// Ways per set; must divide `entries`. `ways == entries` is fully associative.
    pub ways: u32,
    /// Replacement policy.
    pub policy: Policy,
    /// Seed of the random policy.
    pub seed: u64,
}

/// The entry format of a TLB (talluri95 §4.1, Figure 6). See the module documentation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Format {
    /// Base-page entries only.
    #[default]
    Single,
    /// Entries of any power-of-two size of at least the base page, mixed in one TLB.
    Superpage,
    /// Block entries: one tag per aligned block of `block_pages` base pages, one frame (pages
    /// properly placed), a valid bit per base page.
    PartialSubblock {
        /// Base pages per block: a power of two, 2..=64.
        block_pages: u32,
    },
    /// Block entries: one tag per aligned block of `block_pages` base pages, a frame and a valid
    /// bit per base page.
    CompleteSubblock {
        /// Base pages per block: a power of two, 2..=64.
        block_pages: u32,
    },
}

impl Format {
    /// Base pages per block of the subblock formats; `None` for the others.
    pub fn block_pages(self) -> Option<u32> {
        match self {
            Format::Single | Format::Superpage => None,
            Format::PartialSubblock { block_pages } | Format::CompleteSubblock { block_pages } => Some(block_pages),
        }
    }
}

/// Why a geometry cannot be built. The caller adds the config key.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// `entries` is zero.
    #[error("must be at least 1, got 0")]
    ZeroEntries,
    /// `ways` is zero or does not divide `entries`.
    #[error("ways = {ways} must be at least 1 and divide entries = {entries}")]
    BadWays {
        /// Entries requested.
        entries: u32,
        /// Ways requested.
        ways: u32,
    },
    /// Tree-PLRU needs a power-of-two number of ways.
    #[error("policy \"plru\" needs a power-of-two number of ways, got {0}")]
    PlruWays(u32),
    /// A subblock format's `block_pages` is not a power of two between 2 and 64.
    #[error("block_pages must be a power of two between 2 and 64, got {0}")]
    BlockPages(u32),
}

/// What a TLB entry translates to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TlbData {
    /// Frame of the first base page of the entry's page (0 in complete-subblock entries, whose
    /// frames are per page: see [`Tlb::translations`]).
    pub pfn: u64,
    /// log2 of the entry's page size.
    pub shift: u8,
    /// Subblock valid vector over the entry's base pages (bit i = base page i); 0 when the whole
    /// entry is valid (base-page and superpage entries).
    pub valid: u64,
}

/// A translation held by the TLB, as returned by lookups and evictions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbEntry {
    /// VPN at the entry's page size.
    pub tag: u64,
    /// Owning process, or [`GLOBAL`].
    pub asid: u32,
    /// Translation payload.
    pub data: TlbData,
}

/// What a fill did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Fill {
    /// The valid entry replaced to make room, if any.
    pub evicted: Option<TlbEntry>,
    /// True if an existing block entry was updated in place (a complete-subblock *subblock
    /// miss*, or a partial-subblock valid-vector update): no entry was allocated.
    pub merged: bool,
}

/// What [`Tlb::fa_lru_run`] filled: misses, each with one new entry, and the valid entries
/// they replaced; and, in the build with the table of recent pages, the lookups the table did
/// not answer and the uses it deferred (for the choice of the build).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FaLruMisses {
    pub(crate) fills: u64,
    pub(crate) evictions: u64,
    /// Lookups the table did not answer ([`Tlb::fa_lru_run_near`]).
    pub(crate) near_misses: u64,
    /// Uses of entries that it deferred and applied to the order list.
    pub(crate) deferred: u64,
}

/// One entry's storage.
#[derive(Clone, Copy, Debug)]
struct Slot {
    /// `key_of(tag, k)`, INVALID when empty.
    key: u64,
    data: TlbData,
    asid: u32,
}

/// A TLB structure. See the module documentation.
#[derive(Clone, Debug)]
pub struct Tlb {
    geometry: Geometry,
    format: Format,
    sets: u32,
    /// The base page size.
    base: PageSize,
    /// Every slot's key (INVALID when empty), ASID and payload, `sets * ways` of them.
    slots: Vec<Slot>,
    /// Per-set list of ways: head is most recently inserted (FIFO) / used (LRU); invalid at tail.
    order: Order,
    /// `sets - 1` when `sets` is a power of two (set index by mask), else `u64::MAX` (modulo).
    set_mask: u64,
    policy: PolicyState,
    index: Option<Index>,
    globals: u32,
    /// Valid entries per size (index k: entries of 2^k base pages).
    size_count: [u32; 64],
    /// Bit k set when `size_count[k] > 0`.
    present: u64,
    /// Valid entries with a valid vector (block entries).
    blocks: u32,
    /// Shift of complete-subblock block entries (`NO_SHIFT` in other formats).
    cs_shift: u8,
    /// log2(block_pages) of the subblock formats (0 otherwise).
    block_log: u32,
    /// Per-page frames of complete-subblock entries, `block_pages` per slot.
    frames: Vec<u64>,
    /// The recent-hit filter: see [`Filter`].
    filter: Filter,
    /// The uses [`Tlb::fa_lru_run`] has not yet applied to `order`: see [`Deferred`].
    deferred: Deferred,
    /// The table of [`Tlb::fa_lru_run_near`] (fully associative LRU TLBs only), empty between
    /// runs.
    near: Option<Box<Near>>,
    /// Fully associative, LRU, base-page entries: fills take [`Tlb::fill_fa_lru`].
    fa_lru: bool,
    /// [`Tlb::fa_lru_lookup`], kept up to date by [`Tlb::refresh_fa_lru_lookup`] wherever
    /// `globals` or `present` change, so a lookup tests one flag.
    fa_lru_lookup: bool,
}

/// The two most recently hit translations, answered without touching the arrays.
///
/// The filter is keyed by the exact base VPN and ASID of a lookup and caches the slot that
/// answered it and the data returned. A hit through the filter changes no replacement state at
/// once: under FIFO and random hits change nothing anyway, and under LRU and tree-PLRU the filter
/// remembers the hit as *pending* (and which entry was hit last). Before anything else looks at or changes the
/// replacement state (a hit on another entry, an insertion, a merge, an invalidation),
/// [`Tlb::commit`] replays the pending hits in the order they happened. Every operation between
/// two commits is a filter hit, so the replay gives exactly the state that updating on every hit
/// would have given: under LRU the pending entries are the most recent of all and go to the head
/// in time order; under tree-PLRU an access sets the bits on its own path only, so replaying the
/// last access of each entry in time order leaves the same bits. NRU, whose reference bits can be
/// cleared by another entry's hit, uses one filter entry and drops it on every insertion or merge.
///
/// A filter entry is dropped when its slot is evicted or invalidated, and when a new or merged
/// entry comes to cover its VPN (the answer might change); a merge into its own slot refreshes the
/// cached data (bits are only added).
#[derive(Clone, Copy, Debug)]
struct Filter {
    tag: [u64; 2],
    asid: [u32; 2],
    slot: [u32; 2],
    data: [TlbData; 2],
    /// A hit through the entry since the last commit.
    pending: [bool; 2],
    /// The entry used (filled or hit) last: the other one, or an empty one, is replaced. When
    /// both are pending, the other one was hit earlier and is replayed first.
    last: usize,
    /// Number of entries in use (1 for NRU, else 2).
    width: usize,
}

impl Filter {
    fn new(policy: Policy) -> Filter {
        Filter {
            tag: [INVALID; 2],
            asid: [0; 2],
            slot: [NIL; 2],
            data: [TlbData::default(); 2],
            pending: [false; 2],
            last: 1,
            width: if policy == Policy::Nru { 1 } else { 2 },
        }
    }

    /// A lookup of `vpn` of `asid` through the filter: on a hit, records it as pending and
    /// returns the entry. Both entries are compared without branching on which one matches
    /// (instruction and data pages alternate between them, which a branch per entry would
    /// mispredict).
    #[inline(always)]
    fn hit(&mut self, asid: Asid, vpn: Vpn) -> Option<usize> {
        let m0 = (vpn.0 == self.tag[0]) & (asid.0 == self.asid[0]);
        let m1 = (vpn.0 == self.tag[1]) & (asid.0 == self.asid[1]);
        if m0 | m1 {
            let i = !m0 as usize;
            self.pending[i] = true;
            self.last = i;
            return Some(i);
        }
        None
    }

    #[inline(always)]
    fn drop_entry(&mut self, i: usize) {
        self.tag[i] = INVALID;
        self.slot[i] = NIL;
        self.pending[i] = false;
    }

    /// Forgets every entry that points at `slot`.
    #[inline(always)]
    fn drop_slot(&mut self, slot: u32) {
        for i in 0..2 {
            if self.slot[i] == slot {
                self.drop_entry(i);
            }
        }
    }

    fn clear(&mut self) {
        self.tag = [INVALID; 2];
        self.slot = [NIL; 2];
        self.pending = [false; 2];
    }
}

/// The recent-hit filter of one TLB held in registers over a run of lookups of one ASID (the
/// engine's plain loop): [`Tlb::filter_run`] takes it, [`FilterRun::hit`] answers as
/// [`Tlb::lookup`] would through the filter, and [`Tlb::end_filter_run`] puts back what the
/// hits changed (which entries are pending, which was hit last) before anything else touches
/// the TLB.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FilterRun {
    /// The filter's tags, INVALID for an entry of another ASID (no VPN equals it).
    tag: [u64; 2],
    pending: [bool; 2],
    last: usize,
}

impl FilterRun {
    /// True if the filter answers a lookup of `vpn` (below 2^63); records the hit as
    /// [`Filter::hit`] does. Branch-free over which entry matches, as there.
    #[inline(always)]
    pub(crate) fn hit(&mut self, vpn: u64) -> bool {
        // One branch, on whether either entry matches (a `min`, which the compiler does not
        // split into a branch per entry as it does `m0 | m1`).
        let (d0, d1) = (vpn ^ self.tag[0], vpn ^ self.tag[1]);
        if d0.min(d1) != 0 {
            return false;
        }
        let m0 = d0 == 0;
        self.pending[0] |= m0;
        self.pending[1] |= !m0;
        self.last = !m0 as usize;
        true
    }
}

impl Geometry {
    /// Whether a TLB of this geometry and entry `format` can be built (what
    /// [`Tlb::with_format`] checks before it allocates).
    pub fn check(&self, format: Format) -> Result<(), GeometryError> {
        let Geometry { entries, ways, policy, .. } = *self;
        if entries == 0 {
            return Err(GeometryError::ZeroEntries);
        }
        if ways == 0 || entries % ways != 0 {
            return Err(GeometryError::BadWays { entries, ways });
        }
        if policy == Policy::Plru && !ways.is_power_of_two() {
            return Err(GeometryError::PlruWays(ways));
        }
        let block_pages = format.block_pages().unwrap_or(1);
        if format.block_pages().is_some() && !(block_pages.is_power_of_two() && (2..=64).contains(&block_pages)) {
            return Err(GeometryError::BlockPages(block_pages));
        }
        Ok(())
    }
}

impl Tlb {
    /// Builds an empty TLB of base-page entries ([`Format::Single`]) holding pages of `page_size`.
    pub fn new(geometry: Geometry, page_size: PageSize) -> Result<Tlb, GeometryError> {
        Tlb::with_format(geometry, page_size, Format::Single)
    }

    /// Builds an empty TLB with entries of `format` over base pages of `page_size`.
    pub fn with_format(geometry: Geometry, page_size: PageSize, format: Format) -> Result<Tlb, GeometryError> {
        geometry.check(format)?;
        let Geometry { entries, ways, policy, seed } = geometry;
        let block_pages = format.block_pages().unwrap_or(1);
        let block_log = block_pages.trailing_zeros();
        let (cs_shift, frames) = match format {
            Format::CompleteSubblock { .. } => {
                ((page_size.shift() + block_log) as u8, vec![0; entries as usize * block_pages as usize])
            }
            _ => (NO_SHIFT, Vec::new()),
        };
        let sets = entries / ways;
        let n = entries as usize;
        let fa_lru = sets == 1 && ways > SCAN_WAYS && policy == Policy::Lru && format == Format::Single;
        let mut tlb = Tlb {
            geometry,
            format,
            sets,
            base: page_size,
            slots: vec![Slot { key: INVALID, asid: 0, data: TlbData::default() }; n],
            order: Order::new(sets, ways),
            set_mask: if sets.is_power_of_two() { sets as u64 - 1 } else { u64::MAX },
            policy: PolicyState::new(policy, sets, ways, seed),
            index: (ways > SCAN_WAYS).then(|| Index::new(entries)),
            globals: 0,
            size_count: [0; 64],
            present: 0,
            blocks: 0,
            cs_shift,
            block_log,
            frames,
            filter: Filter::new(policy),
            deferred: Deferred::new(if fa_lru { n } else { 0 }),
            near: fa_lru.then(|| Box::new(Near::new())),
            fa_lru,
            fa_lru_lookup: false,
        };
        tlb.refresh_fa_lru_lookup();
        Ok(tlb)
    }

    /// The geometry this TLB was built with.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The entry format this TLB was built with.
    pub fn format(&self) -> Format {
        self.format
    }

    /// Number of sets.
    pub fn sets(&self) -> u32 {
        self.sets
    }

    /// The base page size of this TLB.
    pub fn page_size(&self) -> PageSize {
        self.base
    }

    #[inline(always)]
    fn set_of(&self, tag: u64) -> u32 {
        if self.set_mask != u64::MAX {
            (tag & self.set_mask) as u32
        } else {
            (tag % self.sets as u64) as u32
        }
    }

    /// The set of a slot (no division for fully associative TLBs).
    #[inline(always)]
    fn set_of_slot(&self, slot: u32) -> u32 {
        if self.sets == 1 {
            0
        } else {
            slot / self.geometry.ways
        }
    }

    /// log2 of the number of base pages an entry with this payload covers.
    #[inline(always)]
    fn pages_log(&self, data: &TlbData) -> u32 {
        (data.shift as u32).saturating_sub(self.base.shift())
    }

    /// Looks up base page `vpn` of `asid` (VPN in units of the TLB's base page size). On a hit,
    /// updates the replacement state and returns the translation: the entry's own data (frame of
    /// its first base page, shift, valid vector) or, for a complete-subblock entry, a base-page
    /// translation of `vpn`. [`frame_of`] gives `vpn`'s frame in every case, and the data can be
    /// [`Tlb::insert`]ed into another TLB.
    ///
    /// The repeated hit on a recent page (most references of real programs) is answered inline
    /// without touching the arrays; everything else goes through an out-of-line path.
    #[inline(always)]
    pub fn lookup(&mut self, asid: Asid, vpn: Vpn) -> Option<TlbData> {
        if let Some(i) = self.filter.hit(asid, vpn) {
            return Some(self.filter.data[i]);
        }
        self.lookup_slow(asid, vpn)
    }

    /// [`Tlb::lookup`] for a caller that needs only whether `vpn` hits (the engine's plain
    /// loop): the same lookup and the same state changes, with the fully associative LRU path
    /// inline rather than behind the out-of-line one.
    #[inline(always)]
    pub(crate) fn hits(&mut self, asid: Asid, vpn: Vpn) -> bool {
        if self.filter.hit(asid, vpn).is_some() {
            return true;
        }
        self.hits_past_filter(asid, vpn)
    }

    /// [`Tlb::hits`] of a lookup the recent-hit filter does not answer (as the caller found
    /// with a [`FilterRun`]).
    #[inline(always)]
    pub(crate) fn hits_past_filter(&mut self, asid: Asid, vpn: Vpn) -> bool {
        if self.fa_lru_lookup() {
            return self.lookup_fa_lru(asid, vpn).is_some();
        }
        self.lookup_slow(asid, vpn).is_some()
    }

    /// The filter, for a run of lookups of `asid` answered in registers (see [`FilterRun`]).
    #[inline(always)]
    pub(crate) fn filter_run(&self, asid: Asid) -> FilterRun {
        let f = &self.filter;
        let tag = [0, 1].map(|i| if f.asid[i] == asid.0 { f.tag[i] } else { INVALID });
        FilterRun { tag, pending: f.pending, last: f.last }
    }

    /// Ends a run begun with [`Tlb::filter_run`]: its hits become the filter's.
    #[inline(always)]
    pub(crate) fn end_filter_run(&mut self, run: FilterRun) {
        self.filter.pending = run.pending;
        self.filter.last = run.last;
    }

    /// True if this is a fully associative LRU TLB of base-page entries (whose lookups may take
    /// [`Tlb::fa_lru_run`] while [`Tlb::fa_lru_lookup`] holds).
    #[inline(always)]
    pub(crate) fn is_fa_lru(&self) -> bool {
        self.fa_lru
    }

    /// [`Tlb::hits`] of the base pages `word(i) >> 1`, `word(i + 1) >> 1`, ... of `asid` (page
    /// words of one unified TLB), each miss followed by [`Tlb::fill`] with the PTE `walk(vpn)`
    /// gives, for as long as `walk` gives one; counts the lookups (`n`, of which `n_data` have
    /// the data bit, `word & 1`) and the fills (`misses`). Returns where it stopped: at `len`, at
    /// a [`SLOW_WORD`] or at a miss that `walk` left to the caller (nothing of it done). Only
    /// while [`Tlb::fa_lru_lookup`] holds.
    ///
    /// The engine's loop of a fully associative LRU TLB on its own, the arrays borrowed once:
    /// each reference is one probe of the index (past the table of recent pages, if the build
    /// has it), then on a hit a move to the head of the order list as [`Tlb::lookup_fa_lru`]
    /// makes it, and on a miss the fill [`Tlb::fill_fa_lru`] makes. `NEAR` only changes how
    /// fast: with it, the run is [`Tlb::fa_lru_run_near`] (fast where most lookups find their
    /// page among the 64 recent ones of its table and misses are rare: real programs), and
    /// without it [`Tlb::fa_lru_run_ahead`] (fast where they do not: the table's upkeep, and
    /// the moves it defers to each fill, then cost more than it saves).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn fa_lru_run<const NEAR: bool>(
        &mut self,
        asid: Asid,
        word: &impl Fn(usize) -> u64,
        i: usize,
        len: usize,
        n: &mut u64,
        n_data: &mut u64,
        walk: &mut impl FnMut(u64) -> Option<Pte>,
        misses: &mut FaLruMisses,
    ) -> usize {
        debug_assert!(self.fa_lru_lookup());
        let io = RunIo { word, len, n, n_data, walk, misses };
        if NEAR {
            self.fa_lru_run_near(asid, i, io)
        } else {
            self.fa_lru_run_ahead(asid, i, io)
        }
    }

    /// Whether a fill of [`Tlb::fa_lru_run`] keeps the TLB as `fa_lru_lookup` needs it (a
    /// base-page entry of a process's own ASID, in a TLB without block entries), and the shift
    /// of its entries.
    #[inline(always)]
    fn fa_lru_fill_terms(&self, asid: Asid) -> (bool, u8) {
        (self.blocks == 0 && asid.0 != GLOBAL, self.base.shift() as u8)
    }

    /// [`Tlb::fa_lru_run`] with a direct-mapped table of the run's recent pages ([`Near`]):
    /// a lookup whose page is in it (most of a real program's) is a hit on its slot, one load
    /// and one compare, and its use is noted in the table; the others probe the index and enter
    /// the table. The uses go to [`Deferred`] when an entry leaves the table, before a fill and
    /// at the end, and are applied to the order list in order before a fill and at the end. The
    /// two-entry filter is committed and emptied first, as [`Tlb::fa_lru_run_ahead`] does.
    #[inline(always)]
    fn fa_lru_run_near<W, F>(&mut self, asid: Asid, mut i: usize, io: RunIo<'_, W, F>) -> usize
    where
        W: Fn(usize) -> u64,
        F: FnMut(u64) -> Option<Pte>,
    {
        let RunIo { word, len, n, n_data, walk, misses } = io;
        let (fills, shift) = self.fa_lru_fill_terms(asid);
        self.commit_fa_lru();
        self.filter.clear();
        let Tlb { index, order, slots, size_count, present, deferred, near, .. } = self;
        let Some(index) = index.as_mut() else { unreachable!("fully associative TLBs have an index") };
        let Some(near) = near.as_deref_mut() else { unreachable!("fully associative LRU TLBs have a table") };
        let start = i;
        near.clear();
        // The time of a use at position `p` (`used == p + 1`): from 1 at `start`.
        let clock = (start as u64).wrapping_neg();
        let (mut data_refs, mut fills_made, mut evictions, mut found, mut applied) = (0u64, 0u64, 0u64, 0u64, 0u64);
        while i < len {
            while i < len {
                let w = word(i);
                let e = Near::entry(w >> 1);
                // A slow word's page (`SLOW_WORD >> 1`) is no tag: tags are pages below 2^52,
                // or INVALID.
                if near.tag[e] != w >> 1 {
                    break;
                }
                data_refs += w & 1;
                i += 1;
                near.used[e] = i as u64;
            }
            if i >= len {
                break;
            }
            let w = word(i);
            if w == SLOW_WORD {
                break;
            }
            let vpn = w >> 1;
            let e = Near::entry(vpn);
            let b = index.bucket(vpn, asid.0);
            if let Some(slot) = index.find(index.head(b), vpn, asid.0, slots) {
                data_refs += w & 1;
                near.leave(e, deferred, clock);
                near.enter(e, vpn, slot, i as u64 + 1);
                found += 1;
                i += 1;
                continue;
            }
            let Some(pte) = (if fills { walk(vpn) } else { None }) else { break };
            data_refs += w & 1;
            // `fill_fa_lru` of a process's base-page entry: the tail makes room, once the list
            // has the uses recorded.
            near.leave_all(deferred, clock);
            applied += deferred.used.len() as u64;
            deferred.apply(order);
            let slot = order.tail(0);
            // The victim's page leaves the table, if it is there.
            let old = slots[slot as usize].key;
            let o = Near::entry(old);
            if near.tag[o] == old && near.slot[o] == slot {
                near.tag[o] = INVALID;
            }
            let data = TlbData { pfn: pte.pfn.0, shift, valid: 0 };
            evictions += fa_lru_refill(index, slots, size_count, present, slot, b, asid.0, vpn, data) as u64;
            order.tail_to_head(0);
            // In the table with no use since: the fill's is applied (at the head).
            near.enter(e, vpn, slot, 0);
            fills_made += 1;
            i += 1;
        }
        near.leave_all(deferred, clock);
        applied += deferred.used.len() as u64;
        deferred.apply(order);
        misses.fills += fills_made;
        misses.evictions += evictions;
        misses.near_misses += found + fills_made;
        misses.deferred += applied;
        *n += (i - start) as u64;
        *n_data += data_refs;
        i
    }

    /// [`Tlb::fa_lru_run`] without the table: the run commits the two-entry filter's pending
    /// hits and empties it first, and no lookup tests it.
    ///
    /// Each reference's probe of the index starts one reference early: its bucket and the
    /// bucket's first slot are read before the previous reference's hit or miss is known (and
    /// read again after a fill, which may change them). A mispredicted hit or miss then
    /// restarts the next lookup at the slot's key, not at the word. The list's head is held
    /// in a register.
    #[inline(always)]
    fn fa_lru_run_ahead<W, F>(&mut self, asid: Asid, mut i: usize, io: RunIo<'_, W, F>) -> usize
    where
        W: Fn(usize) -> u64,
        F: FnMut(u64) -> Option<Pte>,
    {
        let RunIo { word, len, n, n_data, walk, misses } = io;
        let (fills, shift) = self.fa_lru_fill_terms(asid);
        self.commit_fa_lru();
        self.filter.clear();
        let Tlb { index, order, slots, size_count, present, .. } = self;
        let Some(index) = index.as_mut() else { unreachable!("fully associative TLBs have an index") };
        let start = i;
        let (mut data_refs, mut fills_made, mut evictions) = (0, 0, 0);
        let mut head = order.head(0);
        // Word `i`, its bucket and the bucket's first slot (a slow word's too: it has a bucket
        // like any page, and stops the run before anything reads it).
        let mut ahead_word = if i < len { word(i) } else { 0 };
        let mut ahead_bucket = index.bucket(ahead_word >> 1, asid.0);
        let mut ahead_first = index.head(ahead_bucket);
        while i < len {
            let (w, b, first) = (ahead_word, ahead_bucket, ahead_first);
            if i + 1 < len {
                ahead_word = word(i + 1);
            }
            ahead_bucket = index.bucket(ahead_word >> 1, asid.0);
            ahead_first = index.head(ahead_bucket);
            if w == SLOW_WORD {
                break;
            }
            let vpn = w >> 1;
            if let Some(slot) = index.find(first, vpn, asid.0, slots) {
                data_refs += w & 1;
                order.move_to_head_held(&mut head, slot);
                i += 1;
                continue;
            }
            let Some(pte) = (if fills { walk(vpn) } else { None }) else { break };
            data_refs += w & 1;
            let slot = order.before(head);
            let data = TlbData { pfn: pte.pfn.0, shift, valid: 0 };
            evictions += fa_lru_refill(index, slots, size_count, present, slot, b, asid.0, vpn, data) as u64;
            head = slot;
            fills_made += 1;
            // The fill changed the chains of `b` and of the victim's bucket.
            ahead_first = index.head(ahead_bucket);
            i += 1;
        }
        order.set_head(0, head);
        misses.fills += fills_made;
        misses.evictions += evictions;
        *n += (i - start) as u64;
        *n_data += data_refs;
        i
    }

    /// True while lookups may take [`Tlb::lookup_fa_lru`]: a fully associative LRU TLB holding
    /// only base-page entries of no [`GLOBAL`] ASID.
    #[inline(always)]
    pub(crate) fn fa_lru_lookup(&self) -> bool {
        debug_assert_eq!(self.fa_lru_lookup, self.fa_lru && self.globals == 0 && self.present <= 1);
        self.fa_lru_lookup
    }

    /// Sets the flag [`Tlb::fa_lru_lookup`] reads, after `globals` or `present` changed.
    #[inline(always)]
    fn refresh_fa_lru_lookup(&mut self) {
        self.fa_lru_lookup = self.fa_lru && self.globals == 0 && self.present <= 1;
    }

    #[inline(never)]
    fn lookup_slow(&mut self, asid: Asid, vpn: Vpn) -> Option<TlbData> {
        if self.fa_lru_lookup() {
            return self.lookup_fa_lru(asid, vpn);
        }
        let (slot, data) = self.find(asid.0, vpn.0)?;
        self.commit();
        self.touch(slot);
        let data = if data.shift == self.cs_shift { self.cs_data(slot, vpn.0) } else { data };
        // Replace the less recently used filter entry (the only one under NRU).
        let f = &mut self.filter;
        let i = if f.width == 1 || f.tag[0] == INVALID {
            0
        } else if f.tag[1] == INVALID {
            1
        } else {
            1 - f.last
        };
        f.tag[i] = vpn.0;
        f.asid[i] = asid.0;
        f.slot[i] = slot;
        f.data[i] = data;
        f.last = i;
        f.pending[i] = false;
        Some(data)
    }

    /// [`Tlb::lookup_slow`] of a fully associative LRU TLB holding base-page entries of no
    /// [`GLOBAL`] ASID: one probe of the index; a hit goes to the head of the order list.
    #[inline(always)]
    fn lookup_fa_lru(&mut self, asid: Asid, vpn: Vpn) -> Option<TlbData> {
        let slot = self.index.as_ref()?.get(vpn.0, asid.0, &self.slots)?;
        self.commit_fa_lru();
        self.order.move_to_head(0, slot);
        let data = self.slots[slot as usize].data;
        // Replace an empty filter entry, else the less recently used one.
        let f = &mut self.filter;
        let i = if f.tag[f.last] == INVALID { f.last } else { 1 - f.last };
        f.tag[i] = vpn.0;
        f.asid[i] = asid.0;
        f.slot[i] = slot;
        f.data[i] = data;
        f.last = i;
        Some(data)
    }

    /// [`Tlb::commit`] of a fully associative LRU TLB: the pending hits go to the head in the
    /// order they happened.
    #[inline(always)]
    fn commit_fa_lru(&mut self) {
        let f = &mut self.filter;
        if !(f.pending[0] | f.pending[1]) {
            return;
        }
        let last = f.last;
        if f.pending[1 - last] {
            self.order.move_to_head(0, f.slot[1 - last]);
        }
        if f.pending[last] {
            self.order.move_to_head(0, f.slot[last]);
        }
        f.pending = [false; 2];
    }

    /// A use of `slot` (hit or merge) for the replacement policy. The caller has committed.
    #[inline(always)]
    fn touch(&mut self, slot: u32) {
        let set = self.set_of_slot(slot);
        match &mut self.policy {
            PolicyState::Lru => self.order.move_to_head(set, slot),
            p => p.on_hit(set, slot - set * self.geometry.ways),
        }
    }

    /// The translation a hit on `vpn` in `slot` returns.
    #[inline(always)]
    fn data_for(&self, slot: u32, vpn: u64) -> TlbData {
        let data = self.slots[slot as usize].data;
        if data.shift != self.cs_shift {
            return data;
        }
        self.cs_data(slot, vpn)
    }

    /// The base-page translation of `vpn` in complete-subblock entry `slot`.
    #[inline(never)]
    fn cs_data(&self, slot: u32, vpn: u64) -> TlbData {
        let bp = 1usize << self.block_log;
        let i = slot as usize * bp + (vpn as usize & (bp - 1));
        TlbData { pfn: self.frames[i], shift: self.base.shift() as u8, valid: 0 }
    }

    /// Replays the hits the filter answered since the last commit (see [`Filter`]).
    #[inline(always)]
    fn commit(&mut self) {
        let p = self.filter.pending;
        if !(p[0] | p[1]) {
            return;
        }
        let last = self.filter.last;
        for i in [1 - last, last] {
            if !p[i] {
                continue;
            }
            let slot = self.filter.slot[i];
            let set = self.set_of_slot(slot);
            match &mut self.policy {
                PolicyState::Lru => self.order.move_to_head(set, slot),
                PolicyState::Plru { .. } => self.policy.on_hit(set, slot - set * self.geometry.ways),
                _ => {}
            }
        }
        self.filter.pending = [false; 2];
    }

    /// The entry translating base page `vpn` of `asid`, without changing any replacement state.
    pub fn probe(&self, asid: Asid, vpn: Vpn) -> Option<TlbEntry> {
        self.find(asid.0, vpn.0).map(|(s, _)| self.entry(s))
    }

    /// The slot translating `vpn` and its data: smallest size first, own ASID before [`GLOBAL`].
    #[inline(always)]
    fn find(&self, asid: u32, vpn: u64) -> Option<(u32, TlbData)> {
        if self.present == 1 {
            // Base-page entries only.
            return self.find_at(asid, vpn, 0);
        }
        let mut sizes = self.present;
        while sizes != 0 {
            let k = sizes.trailing_zeros();
            sizes &= sizes - 1;
            if let Some(s) = self.find_at(asid, vpn, k) {
                return Some(s);
            }
        }
        None
    }

    /// The slot of size 2^k base pages translating `vpn` and its data, if any.
    #[inline(always)]
    fn find_at(&self, asid: u32, vpn: u64, k: u32) -> Option<(u32, TlbData)> {
        let tag = vpn >> k;
        let key = key_of(tag, k);
        let idx = vpn & low_bits(k);
        if let Some(index) = &self.index {
            if let Some(s) = index.get(key, asid, &self.slots) {
                let data = self.slots[s as usize].data;
                if translates(&data, idx) {
                    return Some((s, data));
                }
            }
            if self.globals > 0 {
                if let Some(s) = index.get(key, GLOBAL, &self.slots) {
                    let data = self.slots[s as usize].data;
                    if translates(&data, idx) {
                        return Some((s, data));
                    }
                }
            }
            return None;
        }
        let ways = self.geometry.ways as usize;
        let base = self.set_of(tag) as usize * ways;
        let mut global = None;
        for (w, s) in self.slots[base..base + ways].iter().enumerate() {
            if s.key == key && translates(&s.data, idx) {
                if s.asid == asid {
                    return Some(((base + w) as u32, s.data));
                }
                if s.asid == GLOBAL {
                    global = Some(((base + w) as u32, s.data));
                }
            }
        }
        global
    }

    /// The slot of the entry of exactly (`asid`, `key`), whatever its valid bits.
    fn find_exact(&self, asid: u32, tag: u64, key: u64) -> Option<u32> {
        if let Some(index) = &self.index {
            return index.get(key, asid, &self.slots);
        }
        let ways = self.geometry.ways as usize;
        let base = self.set_of(tag) as usize * ways;
        self.slots[base..base + ways].iter().position(|s| s.key == key && s.asid == asid).map(|w| (base + w) as u32)
    }

    #[inline(always)]
    fn entry(&self, slot: u32) -> TlbEntry {
        let s = self.slots[slot as usize];
        TlbEntry { tag: key_of(s.key, self.pages_log(&s.data)), asid: s.asid, data: s.data }
    }

    /// Inserts the translation `data` of base page `vpn` for `asid` (or [`GLOBAL`]), as taken
    /// from another TLB's lookup or built by the caller: `data.shift` gives the entry's size,
    /// `data.pfn` the frame of its first base page and a non-zero `data.valid` makes it a block
    /// entry. Chooses a victim by the policy (empty ways first) and returns the evicted valid
    /// entry, if any.
    ///
    /// A block entry (or, in a complete-subblock TLB, a base or block-sized translation) whose
    /// tag is already present is merged into the existing entry instead (nothing is evicted).
    /// Otherwise the caller makes sure the translation is not already present.
    #[inline(always)]
    pub fn insert(&mut self, asid: u32, vpn: Vpn, data: TlbData) -> Option<TlbEntry> {
        if data.valid == 0 && self.blocks == 0 && self.cs_shift == NO_SHIFT {
            // A whole entry and no block entry it could collide with: every base-page TLB.
            let k = self.pages_log(&data);
            return self.install(asid, vpn.0 >> k, k, data).1;
        }
        self.place(asid, vpn.0, data).evicted
    }

    /// Replaces the payload of the entry that translates `vpn` of `asid` (the one a lookup
    /// would find), without touching the replacement state; false if there is none. Caches
    /// built on this storage keep a line's dirty bit in its payload.
    pub fn set_data(&mut self, asid: Asid, vpn: Vpn, data: TlbData) -> bool {
        let Some((slot, _)) = self.find(asid.0, vpn.0) else {
            return false;
        };
        self.slots[slot as usize].data = data;
        for i in 0..2 {
            if self.filter.slot[i] == slot {
                self.filter.data[i] = data;
            }
        }
        true
    }

    /// [`Tlb::install`] of a base-page entry in a fully associative LRU TLB without block
    /// entries: the victim is the tail of the one order list (an empty way while there is one).
    #[inline(always)]
    fn fill_fa_lru(&mut self, asid: u32, vpn: u64, data: TlbData) -> Fill {
        self.commit_fa_lru();
        let slot = self.order.tail(0);
        let s = slot as usize;
        let old = self.slots[s];
        let Some(index) = &mut self.index else { unreachable!("fully associative TLBs have an index") };
        let evicted = if old.key != INVALID {
            index.remove(old.key, old.asid, slot);
            self.globals -= (old.asid == GLOBAL) as u32;
            self.filter.drop_slot(slot);
            Some(TlbEntry { tag: old.key, asid: old.asid, data: old.data })
        } else {
            self.size_count[0] += 1;
            self.present |= 1;
            None
        };
        index.insert(vpn, asid, slot);
        self.slots[s] = Slot { key: vpn, asid, data };
        self.globals += (asid == GLOBAL) as u32;
        self.refresh_fa_lru_lookup();
        self.order.move_to_head(0, slot);
        // `filter_cover` of a base-page entry: the filter entries of the victim's slot are gone
        // (an empty slot has none), so only those for `vpn` (another process's) are dropped.
        for i in 0..2 {
            if self.filter.tag[i] == vpn {
                self.filter.drop_entry(i);
            }
        }
        Fill { evicted, merged: false }
    }

    /// Installs an entry with `data` in a new slot (tag at its own size 2^k pages); returns the
    /// slot and the evicted entry.
    #[inline(always)]
    fn install(&mut self, asid: u32, tag: u64, k: u32, data: TlbData) -> (u32, Option<TlbEntry>) {
        let key = key_of(tag, k);
        debug_assert!(k == 0 || tag < 1 << KEY_SHIFT, "VPN too large for entries of several sizes");
        let set = self.set_of(tag);
        let ways = self.geometry.ways;
        // An insertion reads and changes the replacement state: bring it up to date first.
        self.commit();
        if self.filter.width == 1 {
            // NRU: the fill may clear the reference bit of the filtered entry.
            self.filter.clear();
        }
        let tail = self.order.tail(set);
        let slot = if self.slots[tail as usize].key == INVALID {
            tail
        } else {
            set * ways + self.policy.victim(set, tail - set * ways)
        };
        let s = slot as usize;
        let evicted = if self.slots[s].key != INVALID {
            let old = self.entry(slot);
            self.forget(slot);
            Some(old)
        } else {
            None
        };
        self.slots[s] = Slot { key, asid, data };
        if asid == GLOBAL {
            self.globals += 1;
        }
        self.size_count[k as usize] += 1;
        self.present |= 1 << k;
        self.refresh_fa_lru_lookup();
        self.blocks += (data.valid != 0) as u32;
        if let Some(index) = &mut self.index {
            index.insert(key, asid, slot);
        }
        self.order.move_to_head(set, slot);
        self.policy.on_fill(set, slot - set * ways);
        self.filter_cover(slot, tag, k);
        (slot, evicted)
    }

    /// After `slot` (tag at 2^k pages) was installed or changed: drops the filter entries whose
    /// VPN it covers and that point elsewhere, and refreshes those that point at it.
    #[inline(always)]
    fn filter_cover(&mut self, slot: u32, tag: u64, k: u32) {
        for i in 0..2 {
            let v = self.filter.tag[i];
            if v == INVALID {
                continue;
            }
            if self.filter.slot[i] == slot {
                let idx = v & low_bits(k);
                if translates(&self.slots[slot as usize].data, idx) {
                    self.filter.data[i] = self.data_for(slot, v);
                } else {
                    self.filter.drop_entry(i);
                }
            } else if v >> k == tag {
                self.filter.drop_entry(i);
            }
        }
    }

    /// Installs `data` (normalised: `pfn` of the entry's first page) for `vpn`, merging block
    /// entries into an existing entry of the same tag.
    fn place(&mut self, asid: u32, vpn: u64, data: TlbData) -> Fill {
        let base = self.base.shift() as u8;
        if self.cs_shift != NO_SHIFT && (data.shift == base || data.shift == self.cs_shift) {
            let bp = 1u32 << self.block_log;
            let first = vpn & !low_bits(self.block_log);
            let (valid, pfn0) = if data.shift == base {
                (1u64 << (vpn - first), data.pfn.wrapping_sub(vpn - first))
            } else if data.valid == 0 {
                (low_bits(bp), data.pfn)
            } else {
                (data.valid & low_bits(bp), data.pfn)
            };
            return self.place_block(asid, vpn, valid, |i| pfn0.wrapping_add(i));
        }
        let k = self.pages_log(&data);
        let tag = vpn >> k;
        let key = key_of(tag, k);
        let existing = if data.valid != 0 || self.blocks > 0 { self.find_exact(asid, tag, key) } else { None };
        if let Some(slot) = existing {
            // Only a block entry can be there (a whole one would have answered the lookup).
            self.commit();
            if self.filter.width == 1 {
                self.filter.clear();
            }
            let old = self.slots[slot as usize].data;
            self.slots[slot as usize].data = data;
            self.blocks = self.blocks + (data.valid != 0) as u32 - (old.valid != 0) as u32;
            let whole = |v: u64| if v == 0 { u64::MAX } else { v };
            if old.pfn != data.pfn || whole(old.valid) & !whole(data.valid) != 0 {
                // Not a pure addition of pages: cached answers may be wrong.
                self.filter.drop_slot(slot);
            }
            self.touch(slot);
            self.filter_cover(slot, tag, k);
            return Fill { evicted: None, merged: true };
        }
        Fill { evicted: self.install(asid, tag, k, data).1, merged: false }
    }

    /// Complete-subblock: adds the pages of `valid` (frame of page i: `frame(i)`) to the block
    /// entry of `vpn`'s block, allocating the entry if there is none.
    fn place_block(&mut self, asid: u32, vpn: u64, valid: u64, frame: impl Fn(u64) -> u64) -> Fill {
        let b = self.block_log;
        let bp = 1usize << b;
        let tag = vpn >> b;
        let key = key_of(tag, b);
        let (slot, fill) = match self.find_exact(asid, tag, key) {
            Some(slot) => {
                self.commit();
                if self.filter.width == 1 {
                    self.filter.clear();
                }
                self.slots[slot as usize].data.valid |= valid;
                self.touch(slot);
                (slot, Fill { evicted: None, merged: true })
            }
            None => {
                let data = TlbData { pfn: 0, shift: self.cs_shift, valid };
                let (slot, evicted) = self.install(asid, tag, b, data);
                (slot, Fill { evicted, merged: false })
            }
        };
        let at = slot as usize * bp;
        let mut bits = valid;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            self.frames[at + i] = frame(i as u64);
        }
        self.filter_cover(slot, tag, b);
        fill
    }

    /// [`Tlb::fill`] for a caller that needs only whether an entry was evicted and whether the
    /// fill merged (the engine's plain loop): the same fill, with the fully associative LRU
    /// path inline.
    #[inline(always)]
    pub(crate) fn fill_outcome(&mut self, asid: u32, vpn: Vpn, pte: Pte) -> (bool, bool) {
        if self.fa_lru && self.blocks == 0 {
            let data = TlbData { pfn: pte.pfn.0, shift: self.base.shift() as u8, valid: 0 };
            return (self.fill_fa_lru(asid, vpn.0, data).evicted.is_some(), false);
        }
        let f = self.fill(asid, vpn, pte);
        (f.evicted.is_some(), f.merged)
    }

    /// After a miss on base page `vpn` of `asid` (or [`GLOBAL`]): installs the translation of
    /// `vpn` from its page-table mapping `pte` (`pte.pfn` is the frame of `vpn` itself), as the
    /// TLB's [`Format`] dictates:
    /// - `Single`: a base-page entry;
    /// - `Superpage`: an entry of the superpage's size for a superpage PTE, else a base-page entry;
    /// - `PartialSubblock`: a block entry for a partial-subblock PTE (its valid vector) or a
    ///   superpage PTE at least as large as the block (every page valid), else a base-page entry;
    ///   if the block entry exists, its valid vector (and frame) is replaced in place;
    /// - `CompleteSubblock`: `vpn`'s frame added to its block entry, allocated if absent.
    pub fn fill(&mut self, asid: u32, vpn: Vpn, pte: Pte) -> Fill {
        let base = self.base.shift();
        let ps = pte.size.shift();
        let v = vpn.0;
        let whole =
            |k: u32| TlbData { pfn: pte.pfn.0.wrapping_sub(v & low_bits(k)), shift: (base + k) as u8, valid: 0 };
        let data = match self.format {
            Format::Single if self.fa_lru && self.blocks == 0 => {
                return self.fill_fa_lru(asid, v, TlbData { pfn: pte.pfn.0, shift: base as u8, valid: 0 });
            }
            Format::Single if self.blocks == 0 => {
                // A base-page entry and no block entry it could merge with: a new entry.
                let (_, evicted) = self.install(asid, v, 0, whole(0));
                return Fill { evicted, merged: false };
            }
            Format::Single => whole(0),
            Format::Superpage if pte.valid == 0 && ps > base => whole(ps - base),
            Format::Superpage => whole(0),
            Format::PartialSubblock { block_pages } => {
                let b = self.block_log;
                let block = TlbData {
                    pfn: pte.pfn.0.wrapping_sub(v & low_bits(b)),
                    shift: (base + b) as u8,
                    valid: if pte.valid != 0 { pte.valid & low_bits(block_pages) } else { low_bits(block_pages) },
                };
                if (pte.valid != 0 && ps == base + b) || (pte.valid == 0 && ps >= base + b) {
                    debug_assert!(translates(&block, v & low_bits(b)), "partial-subblock PTE without vpn's bit");
                    block
                } else {
                    whole(0)
                }
            }
            Format::CompleteSubblock { .. } => {
                let pfn = pte.pfn.0;
                return self.place_block(asid, v, 1u64 << (v & low_bits(self.block_log)), |_| pfn);
            }
        };
        self.place(asid, v, data)
    }

    /// After a block miss on base page `vpn` in a complete-subblock TLB with subblock prefetch:
    /// installs every mapped page of `vpn`'s aligned block at once. `ptes[i]` is the mapping of
    /// base page `i` of the block (`None`: not mapped); only its `pfn` is used. Never replaces
    /// more than one entry. In the other formats this is `fill(asid, vpn, ptes[vpn's index])`
    /// (nothing happens if that is `None`).
    ///
    /// # Panics
    /// In a complete-subblock TLB, if `ptes.len()` is not `block_pages`.
    pub fn fill_block(&mut self, asid: u32, vpn: Vpn, ptes: &[Option<Pte>]) -> Fill {
        let Format::CompleteSubblock { block_pages } = self.format else {
            if ptes.is_empty() {
                return Fill::default();
            }
            return match ptes[(vpn.0 % ptes.len() as u64) as usize] {
                Some(pte) => self.fill(asid, vpn, pte),
                None => Fill::default(),
            };
        };
        assert_eq!(ptes.len(), block_pages as usize, "fill_block needs one mapping per page of the block");
        let mut valid = 0u64;
        for (i, p) in ptes.iter().enumerate() {
            if p.is_some() {
                valid |= 1 << i;
            }
        }
        if valid == 0 {
            return Fill::default();
        }
        self.place_block(asid, vpn.0, valid, |i| ptes[i as usize].map_or(0, |p| p.pfn.0))
    }

    /// Removes the slot's translation from the index, the size counts and the last-hit filter
    /// (not from the order).
    #[inline(always)]
    fn forget(&mut self, slot: u32) {
        let s = slot as usize;
        if let Some(index) = &mut self.index {
            index.remove(self.slots[s].key, self.slots[s].asid, slot);
        }
        if self.slots[s].asid == GLOBAL {
            self.globals -= 1;
        }
        let k = self.pages_log(&self.slots[s].data) as usize;
        self.blocks -= (self.slots[s].data.valid != 0) as u32;
        self.size_count[k] -= 1;
        if self.size_count[k] == 0 {
            self.present &= !(1 << k);
        }
        self.refresh_fa_lru_lookup();
        self.filter.drop_slot(slot);
    }

    fn invalidate_slot(&mut self, slot: u32) {
        self.commit();
        self.forget(slot);
        let s = slot as usize;
        self.slots[s].key = INVALID;
        let set = self.set_of_slot(slot);
        self.policy.on_invalidate(set, slot - set * self.geometry.ways);
        self.order.move_to_tail(set, slot);
    }

    /// Invalidates, each as a whole, every entry of `asid` (exactly: global entries only when
    /// `asid` is [`GLOBAL`]) that translates a base page in `[first, last]` (VPNs at the base
    /// page size; block entries: pages whose valid bit is set); returns how many were removed.
    pub fn invalidate_range(&mut self, asid: Asid, first: Vpn, last: Vpn) -> u64 {
        let mut n = 0;
        for slot in 0..self.slots.len() as u32 {
            let s = self.slots[slot as usize];
            if s.key == INVALID || s.asid != asid.0 {
                continue;
            }
            let k = self.pages_log(&s.data);
            let lo = key_of(s.key, k) << k;
            let hi = lo + low_bits(k);
            if lo > last.0 || hi < first.0 {
                continue;
            }
            if s.data.valid != 0 {
                // Offsets in the entry of the pages in range: a..=z (< 64 for block entries).
                let a = first.0.max(lo) - lo;
                let z = last.0.min(hi) - lo;
                let in_range = if a >= 64 { 0 } else { low_bits(z.min(63) as u32 + 1) & !low_bits(a as u32) };
                if s.data.valid & in_range == 0 {
                    continue;
                }
            }
            self.invalidate_slot(slot);
            n += 1;
        }
        n
    }

    /// Invalidates every entry of `asid` (not global ones); returns how many were removed.
    pub fn flush_asid(&mut self, asid: Asid) -> u64 {
        self.invalidate_where(|a| a == asid.0)
    }

    /// Invalidates every non-global entry; returns how many were removed.
    pub fn flush_non_global(&mut self) -> u64 {
        self.invalidate_where(|a| a != GLOBAL)
    }

    fn invalidate_where(&mut self, f: impl Fn(u32) -> bool) -> u64 {
        let mut n = 0;
        for slot in 0..self.slots.len() as u32 {
            let s = slot as usize;
            if self.slots[s].key != INVALID && f(self.slots[s].asid) {
                self.invalidate_slot(slot);
                n += 1;
            }
        }
        n
    }

    /// Valid entries currently held.
    pub fn occupancy(&self) -> u32 {
        self.slots.iter().filter(|s| s.key != INVALID).count() as u32
    }

    /// All valid entries (for tests and debugging; allocates). Complete-subblock entries have
    /// `data.pfn == 0`: their frames are per page (see [`Tlb::translations`]).
    pub fn entries(&self) -> Vec<TlbEntry> {
        (0..self.slots.len() as u32).filter(|&s| self.slots[s as usize].key != INVALID).map(|s| self.entry(s)).collect()
    }

    /// Every base page every valid entry translates, as (ASID or [`GLOBAL`], VPN, frame), in
    /// slot order (for consistency checks; allocates one item per base page, so a huge
    /// superpage entry gives many).
    pub fn translations(&self) -> Vec<(u32, Vpn, Pfn)> {
        let mut out = Vec::new();
        for slot in 0..self.slots.len() as u32 {
            let s = self.slots[slot as usize];
            if s.key == INVALID {
                continue;
            }
            let k = self.pages_log(&s.data);
            let first = key_of(s.key, k) << k;
            for i in 0..=low_bits(k) {
                if translates(&s.data, i) {
                    let vpn = first + i;
                    let pfn = frame_of(self.data_for(slot, vpn), Vpn(vpn), self.base);
                    out.push((s.asid, Vpn(vpn), pfn));
                }
            }
        }
        out
    }
}

/// Uses of the entries of a fully associative LRU TLB that [`Tlb::fa_lru_run`] has recorded
/// but not yet applied to the order list: each used slot with the time of its last use. Moving
/// a slot to the head of the list is a chain of dependent loads and stores through its
/// neighbours; recording the use is one store. The list is brought up to date
/// ([`Deferred::apply`]) before anything reads it (a fill takes its tail) and when the run ends,
/// by moving the used slots to the head in the order of their last uses: under LRU that is
/// exactly the list that moving each at its use gives, the slots used since the last update
/// being the most recent of all, in that order, and the others keeping theirs.
#[derive(Clone, Debug)]
struct Deferred {
    /// Time of each slot's last use since the last update, 0 if none.
    time: Box<[u64]>,
    /// The slots with a time, in any order (each at most once, so `entries` of room).
    used: Vec<u32>,
}

impl Deferred {
    /// For a TLB of `entries` slots (0 for a TLB that never defers).
    fn new(entries: usize) -> Deferred {
        Deferred { time: vec![0; entries].into_boxed_slice(), used: Vec::with_capacity(entries) }
    }

    /// Records a use of `slot` (below the TLB's entries) at time `t` (at least 1): later than
    /// every use recorded before it that it follows (the uses of a run of [`Tlb::fa_lru_run`],
    /// recorded out of order, at their positions' times).
    #[inline(always)]
    fn record_at(&mut self, slot: u32, t: u64) {
        debug_assert!(t >= 1);
        let s = &mut self.time[slot as usize];
        if *s == 0 {
            // At most once per slot between updates: within the capacity.
            debug_assert!(self.used.len() < self.used.capacity());
            self.used.push(slot);
        }
        *s = t;
    }

    /// Applies the recorded uses, if any, to `order` (one set), oldest first.
    #[inline(always)]
    fn apply(&mut self, order: &mut Order) {
        if !self.used.is_empty() {
            self.apply_all(order);
        }
    }

    #[inline(never)]
    fn apply_all(&mut self, order: &mut Order) {
        let Deferred { time, used } = self;
        used.sort_unstable_by_key(|&s| time[s as usize]);
        for &s in used.iter() {
            order.move_to_head(0, s);
            time[s as usize] = 0;
        }
        used.clear();
    }
}

/// The table of a run of [`Tlb::fa_lru_run_near`]: the run's pages, one entry each at
/// [`Near::entry`] (direct-mapped), with their slots and their last uses not yet in
/// [`Deferred`]. On the benchmark's real trace 64 entries answer 99 % of the lookups (as a
/// 64-entry direct-mapped cache of its pages; the two-entry filter 83 %).
#[derive(Clone, Debug)]
struct Near {
    tag: [u64; NEAR_ENTRIES],
    slot: [u32; NEAR_ENTRIES],
    /// The entry's last use not yet recorded, as its word's position plus one (0: none).
    used: [u64; NEAR_ENTRIES],
    /// Bit `e` set if entry `e` holds a page.
    valid: u64,
}

/// Entries of [`Near`].
const NEAR_ENTRIES: usize = 64;

impl Near {
    fn new() -> Near {
        Near { tag: [INVALID; NEAR_ENTRIES], slot: [NIL; NEAR_ENTRIES], used: [0; NEAR_ENTRIES], valid: 0 }
    }

    /// Empties the table (its entries' uses recorded).
    #[inline(always)]
    fn clear(&mut self) {
        debug_assert!(self.used.iter().all(|&u| u == 0));
        while self.valid != 0 {
            self.tag[self.valid.trailing_zeros() as usize] = INVALID;
            self.valid &= self.valid - 1;
        }
    }

    /// The entry of page `vpn`.
    #[inline(always)]
    fn entry(vpn: u64) -> usize {
        vpn as usize & (NEAR_ENTRIES - 1)
    }

    /// Entry `e` gets page `vpn` in `slot`, last used at position `used - 1` (`used == 0`: no
    /// use to record).
    #[inline(always)]
    fn enter(&mut self, e: usize, vpn: u64, slot: u32, used: u64) {
        self.tag[e] = vpn;
        self.slot[e] = slot;
        self.used[e] = used;
        self.valid |= 1 << e;
    }

    /// Records entry `e`'s last use, if it has one not yet recorded, in `deferred` (at time
    /// `clock + used`).
    #[inline(always)]
    fn leave(&mut self, e: usize, deferred: &mut Deferred, clock: u64) {
        if self.used[e] != 0 {
            deferred.record_at(self.slot[e], clock.wrapping_add(self.used[e]));
            self.used[e] = 0;
        }
    }

    /// [`Near::leave`] of every entry.
    #[inline(always)]
    fn leave_all(&mut self, deferred: &mut Deferred, clock: u64) {
        let mut v = self.valid;
        while v != 0 {
            self.leave(v.trailing_zeros() as usize, deferred, clock);
            v &= v - 1;
        }
    }
}

/// What a run of [`Tlb::fa_lru_run`] reads and counts (its arguments of those names).
struct RunIo<'a, W, F> {
    word: &'a W,
    len: usize,
    n: &'a mut u64,
    n_data: &'a mut u64,
    walk: &'a mut F,
    misses: &'a mut FaLruMisses,
}

/// The fill of [`Tlb::fa_lru_run`]: `slot` (the tail) gets the base-page entry of `vpn` of
/// `asid`, whose bucket in `index` is `b`, in place of what it held (taken out of the index).
/// Returns whether that was an entry (else the slot was empty, now counted). The caller moves
/// the slot to the head.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn fa_lru_refill(
    index: &mut Index,
    slots: &mut [Slot],
    size_count: &mut [u32; 64],
    present: &mut u64,
    slot: u32,
    b: usize,
    asid: u32,
    vpn: u64,
    data: TlbData,
) -> bool {
    let s = slot as usize;
    let old = &slots[s];
    let evicted = old.key != INVALID;
    if evicted {
        debug_assert_ne!(old.asid, GLOBAL, "fa_lru_lookup holds only without global entries");
        index.remove(old.key, old.asid, slot);
    } else {
        size_count[0] += 1;
        *present |= 1;
    }
    index.insert_in(b, slot);
    slots[s] = Slot { key: vpn, asid, data };
    evicted
}

/// Per-set circular doubly linked lists of slots (head: most recent; tail, the head's `prev`:
/// next victim), as one array of `[prev, next]` links and one of heads. Every way of a set is
/// always on its list, so no link is ever missing: moving the tail to the head (every fill of a
/// full LRU set) or the head to the tail only moves the head.
#[derive(Clone, Debug)]
struct Order {
    links: Padded<[u32; 2]>,
    heads: Padded<u32>,
}

impl Order {
    /// Every set ordered so that way 0 is at the tail: empty ways fill in index order.
    fn new(sets: u32, ways: u32) -> Order {
        let mut links = vec![[NIL; 2]; (sets * ways) as usize];
        let mut heads = vec![NIL; sets as usize];
        for s in 0..sets {
            let base = s * ways;
            for w in 0..ways {
                // From the head (way `ways - 1`) down to the tail (way 0), and round.
                links[(base + w) as usize] = [base + (w + 1) % ways, base + (w + ways - 1) % ways];
            }
            heads[s as usize] = base + ways - 1;
        }
        Order { links: links.into(), heads: heads.into() }
    }

    #[inline(always)]
    fn tail(&self, set: u32) -> u32 {
        self.before(self.heads[set as usize])
    }

    /// [`Order::move_to_head`] of the tail of `set`'s list: the head moves one back.
    #[inline(always)]
    fn tail_to_head(&mut self, set: u32) {
        self.heads[set as usize] = self.tail(set);
    }

    /// Takes `slot` (neither the head nor the tail) out of its list and puts it back between
    /// the tail `t` and the head `h`.
    #[inline(always)]
    fn relink(&mut self, slot: u32, t: u32, h: u32) {
        let [p, n] = self.links[slot as usize];
        self.links[p as usize][1] = n;
        self.links[n as usize][0] = p;
        self.links[slot as usize] = [t, h];
        self.links[t as usize][1] = slot;
        self.links[h as usize][0] = slot;
    }

    #[inline(always)]
    fn move_to_head(&mut self, set: u32, slot: u32) {
        let mut head = self.heads[set as usize];
        self.move_to_head_held(&mut head, slot);
        self.heads[set as usize] = head;
    }

    /// [`Order::move_to_head`] of the set whose head is `head`, held by the caller (written
    /// back with [`Order::set_head`]).
    #[inline(always)]
    fn move_to_head_held(&mut self, head: &mut u32, slot: u32) {
        let h = *head;
        if h == slot {
            return;
        }
        let t = self.links[h as usize][0];
        if t != slot {
            self.relink(slot, t, h);
        }
        *head = slot;
    }

    #[inline(always)]
    fn head(&self, set: u32) -> u32 {
        self.heads[set as usize]
    }

    #[inline(always)]
    fn set_head(&mut self, set: u32, head: u32) {
        self.heads[set as usize] = head;
    }

    /// The tail of the list whose head is `head`.
    #[inline(always)]
    fn before(&self, head: u32) -> u32 {
        self.links[head as usize][0]
    }

    fn move_to_tail(&mut self, set: u32, slot: u32) {
        let h = self.heads[set as usize];
        let t = self.links[h as usize][0];
        if t == slot {
            return;
        }
        if h == slot {
            self.heads[set as usize] = self.links[h as usize][1];
        } else {
            self.relink(slot, t, h);
        }
    }
}

/// Map from (key, ASID) to the slot holding that entry: a chained hash table whose chains run
/// through the slots themselves (`next`), the keys being the slots' own. A lookup reads the
/// bucket and then the slot, whose data a hit needs anyway; an insertion is two stores, and a
/// removal (of a known slot: the victim of a fill) unlinks it from a chain of about one, in the
/// bucket the insertion recorded (no hash of the victim's key). The bucket count is a power of
/// two, four per entry.
///
/// Neither array is bounds-checked: both are a power of two long and indexed under their mask
/// (a bucket always; a slot, which is below `entries`, to keep every access inside the array).
#[derive(Clone, Debug)]
struct Index {
    /// `heads.len() - 1`.
    mask: usize,
    /// `64 - log2(heads.len())`: a bucket is the top bits of the key's hash.
    shift: u32,
    /// First slot of each bucket's chain (NIL: empty).
    heads: Box<[u32]>,
    /// `next.len() - 1`.
    next_mask: usize,
    /// For each slot, the next slot in the chain of its bucket (NIL: the last) and the bucket,
    /// `entries` rounded up to a power of two long.
    next: Box<[[u32; 2]]>,
}

impl Index {
    fn new(entries: u32) -> Index {
        let buckets = (entries as usize * 4).next_power_of_two().max(16);
        let n = (entries as usize).next_power_of_two();
        Index {
            mask: buckets - 1,
            shift: 64 - buckets.trailing_zeros(),
            heads: vec![NIL; buckets].into_boxed_slice(),
            next_mask: n - 1,
            next: vec![[NIL, 0]; n].into_boxed_slice(),
        }
    }

    /// The bucket of (`key`, `asid`): the top bits of a multiplicative (Fibonacci) hash, which
    /// spread consecutive pages (most of a program's) over distinct buckets. The 107
    /// consecutive pages of the benchmark's synthetic trace share none of the 256 buckets of a
    /// 64-entry TLB this way, where bits 32 and up of the same product put 19 of them in
    /// buckets already taken (docs/performance.md).
    #[inline(always)]
    fn bucket(&self, key: u64, asid: u32) -> usize {
        (crate::addr::page_hash(key, asid) >> self.shift) as usize & self.mask
    }

    /// The chain head of bucket `b` (from [`Index::bucket`]).
    #[inline(always)]
    fn head(&self, b: usize) -> u32 {
        // SAFETY: `heads.len()` is `mask + 1` (`new`), and `b & mask` is below it.
        unsafe { *self.heads.get_unchecked(b & self.mask) }
    }

    #[inline(always)]
    fn set_head(&mut self, b: usize, slot: u32) {
        // SAFETY: as in `head`.
        unsafe { *self.heads.get_unchecked_mut(b & self.mask) = slot }
    }

    /// The slot after `slot` in its chain, and the chain's bucket.
    #[inline(always)]
    fn link(&self, slot: u32) -> [u32; 2] {
        debug_assert!((slot as usize) <= self.next_mask);
        // SAFETY: `next.len()` is `next_mask + 1` (`new`), and the masked index is below it.
        unsafe { *self.next.get_unchecked(slot as usize & self.next_mask) }
    }

    /// The slot after `slot` in its chain.
    #[inline(always)]
    fn next(&self, slot: u32) -> u32 {
        self.link(slot)[0]
    }

    #[inline(always)]
    fn set_link(&mut self, slot: u32, link: [u32; 2]) {
        debug_assert!((slot as usize) <= self.next_mask);
        // SAFETY: as in `link`.
        unsafe { *self.next.get_unchecked_mut(slot as usize & self.next_mask) = link }
    }

    #[inline(always)]
    fn set_next(&mut self, slot: u32, after: u32) {
        debug_assert!((slot as usize) <= self.next_mask);
        // SAFETY: as in `link`.
        unsafe { self.next.get_unchecked_mut(slot as usize & self.next_mask)[0] = after }
    }

    /// The slot of (`key`, `asid`) among `slots`.
    #[inline(always)]
    fn get(&self, key: u64, asid: u32, slots: &[Slot]) -> Option<u32> {
        self.find(self.head(self.bucket(key, asid)), key, asid, slots)
    }

    /// [`Index::get`] given the first slot of the key's bucket ([`Index::head`]).
    #[inline(always)]
    fn find(&self, first: u32, key: u64, asid: u32, slots: &[Slot]) -> Option<u32> {
        let mut s = first;
        while s != NIL {
            let e = &slots[s as usize];
            if e.key == key && e.asid == asid {
                return Some(s);
            }
            s = self.next(s);
        }
        None
    }

    /// Enters `slot`, which holds (`key`, `asid`) and is not in the index.
    #[inline(always)]
    fn insert(&mut self, key: u64, asid: u32, slot: u32) {
        self.insert_in(self.bucket(key, asid), slot);
    }

    /// [`Index::insert`] given the key's bucket `b` ([`Index::bucket`]).
    #[inline(always)]
    fn insert_in(&mut self, b: usize, slot: u32) {
        self.set_link(slot, [self.head(b), b as u32]);
        self.set_head(b, slot);
    }

    /// Takes out `slot`, which holds (`key`, `asid`) and is in the index.
    #[inline(always)]
    fn remove(&mut self, key: u64, asid: u32, slot: u32) {
        let [after, b] = self.link(slot);
        let b = b as usize;
        debug_assert_eq!(b, self.bucket(key, asid), "slot {slot} recorded in another bucket");
        let mut s = self.head(b);
        if s == slot {
            self.set_head(b, after);
            return;
        }
        while self.next(s) != slot {
            s = self.next(s);
        }
        self.set_next(s, after);
    }
}

/// Frame of base page `vpn` given a TLB hit's data (any entry format: for block entries the
/// pages are properly placed, and complete-subblock lookups return base-page translations).
#[inline(always)]
pub fn frame_of(data: TlbData, vpn: Vpn, base: PageSize) -> Pfn {
    let k = data.shift as u32 - base.shift();
    Pfn(data.pfn + (vpn.0 & low_bits(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlb(entries: u32, ways: u32, policy: Policy) -> Tlb {
        Tlb::new(Geometry { entries, ways, policy, seed: 1 }, PageSize::SIZE_4K).unwrap()
    }

    /// A process's own entry, filled after the filter answered its page from a global entry,
    /// answers from then on (own ASID before [`GLOBAL`]): the fill drops the filter's entry.
    #[test]
    fn a_fill_over_a_filtered_global_answer_takes_over() {
        let mut t = tlb(64, 64, Policy::Lru);
        t.insert(GLOBAL, Vpn(5), TlbData { pfn: 100, shift: 12, valid: 0 });
        assert_eq!(t.lookup(Asid(1), Vpn(5)).map(|d| d.pfn), Some(100));
        assert_eq!(t.lookup(Asid(1), Vpn(5)).map(|d| d.pfn), Some(100), "answered by the filter");
        t.fill(1, Vpn(5), Pte { pfn: Pfn(200), size: PageSize::SIZE_4K, valid: 0 });
        assert_eq!(t.lookup(Asid(1), Vpn(5)).map(|d| d.pfn), Some(200));
        assert_eq!(t.lookup(Asid(2), Vpn(5)).map(|d| d.pfn), Some(100));
    }

    fn access(t: &mut Tlb, asid: u32, vpn: u64) -> bool {
        if t.lookup(Asid(asid), Vpn(vpn)).is_some() {
            return true;
        }
        t.insert(asid, Vpn(vpn), TlbData { pfn: vpn + 1000, shift: 12, valid: 0 });
        false
    }

    #[test]
    fn rejects_bad_geometry() {
        let g = |entries, ways, policy| Tlb::new(Geometry { entries, ways, policy, seed: 0 }, PageSize::SIZE_4K);
        assert_eq!(g(0, 1, Policy::Lru).unwrap_err(), GeometryError::ZeroEntries);
        assert!(matches!(g(48, 5, Policy::Lru).unwrap_err(), GeometryError::BadWays { .. }));
        assert!(matches!(g(48, 0, Policy::Lru).unwrap_err(), GeometryError::BadWays { .. }));
        assert_eq!(g(48, 12, Policy::Plru).unwrap_err(), GeometryError::PlruWays(12));
        assert!(g(48, 12, Policy::Lru).is_ok());
        assert!(g(1536, 12, Policy::Lru).is_ok());
    }

    #[test]
    fn fully_associative_lru_evicts_least_recent() {
        for entries in [4, 64] {
            let mut t = tlb(entries, entries, Policy::Lru);
            for v in 0..entries as u64 {
                assert!(!access(&mut t, 0, v));
            }
            assert!(access(&mut t, 0, 0)); // 0 becomes most recent; 1 is LRU
            assert!(!access(&mut t, 0, 1000));
            assert!(t.probe(Asid(0), Vpn(1)).is_none());
            assert!(t.probe(Asid(0), Vpn(0)).is_some());
        }
    }

    /// [`Tlb::fa_lru_run`] against [`Tlb::hits`] and [`Tlb::fill`] one reference at a time, on
    /// runs of two processes over 3, 40 or 200 pages (filter hits, index hits, long runs of
    /// misses that evict the filter's entries), slow words, and walks that leave some misses
    /// to the caller.
    #[test]
    fn fa_lru_run_equals_lookups_and_fills() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let pte = |vpn: u64| Pte { pfn: Pfn(vpn * 3 + 7), size: PageSize::SIZE_4K, valid: 0 };
        for entries in [32u32, 64] {
            let mut fast = tlb(entries, entries, Policy::Lru);
            let mut reference = fast.clone();
            let (mut fills, mut left) = (0u64, 0u64);
            for _ in 0..400 {
                let asid = Asid(1 + rnd(2) as u32);
                let pages = [3, 40, 200][rnd(3) as usize];
                let len = rnd(500) as usize;
                let words: Vec<u64> =
                    (0..len).map(|_| if rnd(60) == 0 { SLOW_WORD } else { rnd(pages) << 1 | rnd(2) }).collect();
                let refuse = rnd(2) == 0;
                let mut i = 0;
                while i < words.len() {
                    let (mut n, mut n_data, mut m) = (0, 0, FaLruMisses::default());
                    let mut walk = |v: u64| (!refuse || v % 5 != 0).then(|| pte(v));
                    // Either build of the loop, changing from run to run as the engine's choice
                    // does.
                    let word = |k: usize| words[k];
                    let j = if rnd(2) == 0 {
                        fast.fa_lru_run::<true>(asid, &word, i, words.len(), &mut n, &mut n_data, &mut walk, &mut m)
                    } else {
                        fast.fa_lru_run::<false>(asid, &word, i, words.len(), &mut n, &mut n_data, &mut walk, &mut m)
                    };
                    let (mut misses, mut evictions) = (0, 0);
                    for &w in &words[i..j] {
                        assert_ne!(w, SLOW_WORD);
                        if !reference.hits(asid, Vpn(w >> 1)) {
                            misses += 1;
                            evictions += reference.fill(asid.0, Vpn(w >> 1), pte(w >> 1)).evicted.is_some() as u64;
                        }
                    }
                    assert_eq!((n, n_data), ((j - i) as u64, words[i..j].iter().map(|w| w & 1).sum()));
                    assert_eq!((m.fills, m.evictions), (misses, evictions));
                    fills += misses;
                    if j == words.len() {
                        break;
                    }
                    // A slow word, or a miss the walk left: both TLBs take it the general way.
                    let w = words[j];
                    if w != SLOW_WORD {
                        left += 1;
                        for t in [&mut fast, &mut reference] {
                            assert!(!t.hits(asid, Vpn(w >> 1)));
                            t.fill(asid.0, Vpn(w >> 1), pte(w >> 1));
                        }
                    }
                    // Lookups between runs, as the engine makes them for the references of a
                    // slow word: pages the run looked up lately, so that the filter's entries
                    // are hit there and are pending (one, both, in either order) when the next
                    // run starts.
                    for _ in 0..rnd(4) {
                        let w = words[j - rnd((j - i + 1) as u64) as usize];
                        if w == SLOW_WORD {
                            continue;
                        }
                        let vpn = Vpn(w >> 1);
                        let hit = fast.hits(asid, vpn);
                        assert_eq!(hit, reference.hits(asid, vpn));
                        if !hit {
                            for t in [&mut fast, &mut reference] {
                                t.fill(asid.0, vpn, pte(vpn.0));
                            }
                        }
                    }
                    i = j + 1;
                }
                assert_eq!(fast.translations(), reference.translations());
            }
            assert!(fills > 10_000 && left > 1_000, "{fills} fills, {left} misses left to the caller");
        }
    }

    #[test]
    fn repeated_hit_after_an_insertion_still_updates_lru() {
        // 1 2 1 3 1 4: the second hit on 1 follows the insertion of 3, so 1 is most recent and 3
        // must be the victim of 4.
        for ways in [2, 32] {
            let mut t = tlb(ways, ways, Policy::Lru);
            for v in 0..ways as u64 - 2 {
                access(&mut t, 0, 100 + v);
            }
            for v in [1, 2, 1, 3, 1, 4] {
                access(&mut t, 0, v);
            }
            assert!(t.probe(Asid(0), Vpn(1)).is_some(), "{ways} ways");
        }
    }

    #[test]
    fn fifo_ignores_hits() {
        let mut t = tlb(4, 4, Policy::Fifo);
        for v in 0..4 {
            access(&mut t, 0, v);
        }
        assert!(access(&mut t, 0, 0));
        access(&mut t, 0, 9); // evicts 0, the first in
        assert!(t.probe(Asid(0), Vpn(0)).is_none());
        assert!(t.probe(Asid(0), Vpn(1)).is_some());
    }

    #[test]
    fn asids_and_globals() {
        for entries in [8, 64] {
            let mut t = tlb(entries, entries, Policy::Lru);
            access(&mut t, 1, 5);
            assert!(t.lookup(Asid(2), Vpn(5)).is_none());
            assert!(t.lookup(Asid(1), Vpn(5)).is_some());
            t.insert(GLOBAL, Vpn(7), TlbData { pfn: 1, shift: 12, valid: 0 });
            assert!(t.lookup(Asid(2), Vpn(7)).is_some());
            assert!(t.lookup(Asid(3), Vpn(7)).is_some());
            assert_eq!(t.flush_non_global(), 1);
            assert!(t.lookup(Asid(1), Vpn(5)).is_none());
            assert!(t.lookup(Asid(3), Vpn(7)).is_some());
        }
    }

    #[test]
    fn invalidation_frees_ways_first() {
        let mut t = tlb(4, 4, Policy::Random);
        for v in 0..4 {
            access(&mut t, 0, v);
        }
        assert_eq!(t.invalidate_range(Asid(0), Vpn(2), Vpn(2)), 1);
        assert_eq!(t.occupancy(), 3);
        access(&mut t, 0, 50);
        // The empty way was filled: nothing else was evicted.
        for v in [0, 1, 3, 50] {
            assert!(t.probe(Asid(0), Vpn(v)).is_some(), "{v}");
        }
    }

    #[test]
    fn index_survives_churn() {
        // Exercise the index's chains (insertions, and removals from the head, middle and end
        // of a chain) against a naive model.
        let mut t = tlb(128, 128, Policy::Lru);
        let mut x = 12345u64;
        let mut model: Vec<u64> = Vec::new();
        for _ in 0..20000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = x % 300;
            let hit = access(&mut t, 0, v);
            let pos = model.iter().position(|&m| m == v);
            assert_eq!(hit, pos.is_some());
            if let Some(p) = pos {
                model.remove(p);
            } else if model.len() == 128 {
                model.pop();
            }
            model.insert(0, v);
        }
    }

    fn ftlb(entries: u32, ways: u32, format: Format) -> Tlb {
        Tlb::with_format(Geometry { entries, ways, policy: Policy::Lru, seed: 1 }, PageSize::SIZE_4K, format).unwrap()
    }

    fn size(pages: u64) -> PageSize {
        PageSize::from_bytes(4096 * pages).unwrap()
    }

    fn base_pte(pfn: u64) -> Pte {
        Pte { pfn: Pfn(pfn), size: PageSize::SIZE_4K, valid: 0 }
    }

    #[test]
    fn rejects_bad_block_pages() {
        let g = Geometry { entries: 8, ways: 8, policy: Policy::Lru, seed: 0 };
        for bp in [0, 1, 3, 12, 128] {
            for f in [Format::PartialSubblock { block_pages: bp }, Format::CompleteSubblock { block_pages: bp }] {
                assert_eq!(Tlb::with_format(g, PageSize::SIZE_4K, f).unwrap_err(), GeometryError::BlockPages(bp));
            }
        }
        for bp in [2, 16, 64] {
            let t = Tlb::with_format(g, PageSize::SIZE_4K, Format::CompleteSubblock { block_pages: bp }).unwrap();
            assert_eq!(t.format(), Format::CompleteSubblock { block_pages: bp });
        }
        assert_eq!(Tlb::new(g, PageSize::SIZE_4K).unwrap().format(), Format::Single);
    }

    #[test]
    fn single_fills_base_entries_from_any_pte() {
        for entries in [8, 64] {
            let mut t = ftlb(entries, entries, Format::Single);
            // A 16-page superpage PTE for vpn 0x35 (frame of vpn itself: 0x1005).
            let f = t.fill(3, Vpn(0x35), Pte { pfn: Pfn(0x1005), size: size(16), valid: 0 });
            assert_eq!(f, Fill { evicted: None, merged: false });
            assert_eq!(t.lookup(Asid(3), Vpn(0x35)), Some(TlbData { pfn: 0x1005, shift: 12, valid: 0 }));
            assert!(t.lookup(Asid(3), Vpn(0x34)).is_none());
            // A partial-subblock PTE also gives a base entry.
            t.fill(3, Vpn(0x42), Pte { pfn: Pfn(0x2002), size: size(4), valid: 0b0101 });
            assert!(t.lookup(Asid(3), Vpn(0x40)).is_none());
            assert_eq!(t.translations(), vec![(3, Vpn(0x35), Pfn(0x1005)), (3, Vpn(0x42), Pfn(0x2002))]);
        }
    }

    #[test]
    fn superpage_entries_of_mixed_sizes() {
        for (entries, ways) in [(8, 8), (8, 2), (64, 64)] {
            let mut t = ftlb(entries, ways, Format::Superpage);
            // 16-page superpage at vpn 0x30..0x3f, frames 0x1000..; miss on 0x35.
            t.fill(1, Vpn(0x35), Pte { pfn: Pfn(0x1005), size: size(16), valid: 0 });
            let e = t.probe(Asid(1), Vpn(0x3f)).unwrap();
            assert_eq!(e, TlbEntry { tag: 3, asid: 1, data: TlbData { pfn: 0x1000, shift: 16, valid: 0 } });
            for v in 0x30..0x40 {
                let d = t.lookup(Asid(1), Vpn(v)).unwrap();
                assert_eq!(frame_of(d, Vpn(v), PageSize::SIZE_4K), Pfn(0x1000 + v - 0x30));
            }
            assert!(t.lookup(Asid(1), Vpn(0x40)).is_none());
            assert!(t.lookup(Asid(2), Vpn(0x30)).is_none());
            // A partial-subblock PTE is a base entry here; a base entry sits beside the superpage.
            t.fill(1, Vpn(0x41), Pte { pfn: Pfn(0x501), size: size(4), valid: 0b11 });
            assert_eq!(t.probe(Asid(1), Vpn(0x41)).unwrap().data.shift, 12);
            assert!(t.lookup(Asid(1), Vpn(0x40)).is_none());
            assert_eq!(t.occupancy(), 2);
            assert_eq!(t.translations().len(), 17);
            // Invalidating one page removes the whole superpage.
            assert_eq!(t.invalidate_range(Asid(1), Vpn(0x3a), Vpn(0x3a)), 1);
            assert!(t.lookup(Asid(1), Vpn(0x30)).is_none());
            assert!(t.lookup(Asid(1), Vpn(0x41)).is_some());
        }
    }

    #[test]
    fn partial_subblock_fill_rules() {
        for entries in [8, 64] {
            let mut t = ftlb(entries, entries, Format::PartialSubblock { block_pages: 4 });
            // Block 0x10 (vpn 0x40..0x43), pages 0 and 2 mapped, block frame 0x800.
            let f = t.fill(0, Vpn(0x42), Pte { pfn: Pfn(0x802), size: size(4), valid: 0b0101 });
            assert!(!f.merged && f.evicted.is_none());
            assert_eq!(t.lookup(Asid(0), Vpn(0x40)), Some(TlbData { pfn: 0x800, shift: 14, valid: 0b0101 }));
            assert!(t.lookup(Asid(0), Vpn(0x41)).is_none());
            // Page 1 faulted in since: the entry's vector is updated in place.
            let f = t.fill(0, Vpn(0x41), Pte { pfn: Pfn(0x801), size: size(4), valid: 0b0111 });
            assert_eq!(f, Fill { evicted: None, merged: true });
            assert_eq!(t.occupancy(), 1);
            // The filter held page 0: its cached data follows the update.
            assert_eq!(t.lookup(Asid(0), Vpn(0x40)).unwrap().valid, 0b0111);
            assert_eq!(frame_of(t.lookup(Asid(0), Vpn(0x41)).unwrap(), Vpn(0x41), PageSize::SIZE_4K), Pfn(0x801));
            assert!(t.lookup(Asid(0), Vpn(0x43)).is_none());
            // A superpage at least as large as the block gives a full block entry.
            t.fill(0, Vpn(0x85), Pte { pfn: Pfn(0x905), size: size(8), valid: 0 });
            assert_eq!(t.probe(Asid(0), Vpn(0x86)).unwrap().data, TlbData { pfn: 0x904, shift: 14, valid: 0b1111 });
            assert!(t.probe(Asid(0), Vpn(0x81)).is_none());
            // A base PTE and a smaller superpage give base entries.
            t.fill(0, Vpn(0x90), base_pte(7));
            t.fill(0, Vpn(0xa1), Pte { pfn: Pfn(0x31), size: size(2), valid: 0 });
            assert_eq!(t.probe(Asid(0), Vpn(0xa1)).unwrap().data, TlbData { pfn: 0x31, shift: 12, valid: 0 });
            assert!(t.probe(Asid(0), Vpn(0xa0)).is_none());
            // Invalidation of an unmapped page of a block entry leaves it; a mapped one removes it.
            assert_eq!(t.invalidate_range(Asid(0), Vpn(0x43), Vpn(0x43)), 0);
            assert_eq!(t.invalidate_range(Asid(0), Vpn(0x43), Vpn(0x44)), 0);
            assert_eq!(t.invalidate_range(Asid(0), Vpn(0x3f), Vpn(0x40)), 1);
            assert!(t.lookup(Asid(0), Vpn(0x41)).is_none());
        }
    }

    #[test]
    fn complete_subblock_block_and_subblock_misses() {
        for entries in [2, 64] {
            let mut t = ftlb(entries, entries, Format::CompleteSubblock { block_pages: 4 });
            assert!(!t.fill(0, Vpn(0x41), base_pte(77)).merged); // block miss
            assert_eq!(t.lookup(Asid(0), Vpn(0x41)), Some(TlbData { pfn: 77, shift: 12, valid: 0 }));
            assert!(t.lookup(Asid(0), Vpn(0x42)).is_none());
            let f = t.fill(0, Vpn(0x42), Pte { pfn: Pfn(5), size: size(4), valid: 0b0110 });
            assert_eq!(f, Fill { evicted: None, merged: true }); // subblock miss
            assert_eq!(t.lookup(Asid(0), Vpn(0x42)), Some(TlbData { pfn: 5, shift: 12, valid: 0 }));
            assert_eq!(t.probe(Asid(0), Vpn(0x41)).unwrap().data, TlbData { pfn: 0, shift: 14, valid: 0b0110 });
            assert_eq!(t.translations(), vec![(0, Vpn(0x41), Pfn(77)), (0, Vpn(0x42), Pfn(5))]);
            // Prefetch: one block miss loads every mapped page, one entry.
            let ptes = [Some(base_pte(10)), None, Some(base_pte(30)), Some(base_pte(40))];
            let f = t.fill_block(0, Vpn(0x82), &ptes);
            assert!(!f.merged);
            assert_eq!(t.occupancy(), 2.min(entries));
            for (v, pfn) in [(0x80, 10), (0x82, 30), (0x83, 40)] {
                assert_eq!(t.lookup(Asid(0), Vpn(v)).map(|d| d.pfn), Some(pfn));
            }
            assert!(t.lookup(Asid(0), Vpn(0x81)).is_none());
            // Page 1 mapped later: a subblock miss that merges.
            let ptes = [Some(base_pte(10)), Some(base_pte(20)), Some(base_pte(30)), Some(base_pte(40))];
            assert!(t.fill_block(0, Vpn(0x81), &ptes).merged);
            assert_eq!(t.lookup(Asid(0), Vpn(0x81)).map(|d| d.pfn), Some(20));
        }
    }

    #[test]
    fn complete_subblock_insert_merges_base_translations() {
        let mut t = ftlb(4, 4, Format::CompleteSubblock { block_pages: 8 });
        assert!(t.insert(0, Vpn(9), TlbData { pfn: 90, shift: 12, valid: 0 }).is_none());
        t.insert(0, Vpn(10), TlbData { pfn: 100, shift: 12, valid: 0 });
        assert_eq!(t.occupancy(), 1);
        // A partial-subblock translation of the next block: frames block_pfn + i.
        t.insert(0, Vpn(17), TlbData { pfn: 200, shift: 15, valid: 0b1010 });
        assert_eq!(
            t.translations(),
            vec![(0, Vpn(9), Pfn(90)), (0, Vpn(10), Pfn(100)), (0, Vpn(17), Pfn(201)), (0, Vpn(19), Pfn(203))]
        );
    }

    #[test]
    fn block_entries_from_insert_merge_with_same_tag() {
        // A single-format L1 receiving partial-subblock and superpage data from an L2.
        for entries in [4, 64] {
            let mut t = ftlb(entries, entries, Format::Single);
            t.insert(0, Vpn(0x40), TlbData { pfn: 0x800, shift: 14, valid: 0b0001 });
            assert!(t.lookup(Asid(0), Vpn(0x41)).is_none());
            assert!(t.insert(0, Vpn(0x41), TlbData { pfn: 0x800, shift: 14, valid: 0b0011 }).is_none());
            assert_eq!(t.occupancy(), 1);
            assert!(t.lookup(Asid(0), Vpn(0x41)).is_some());
            // A superpage of the block's size replaces the block entry.
            t.insert(0, Vpn(0x42), TlbData { pfn: 0x800, shift: 14, valid: 0 });
            assert_eq!(t.occupancy(), 1);
            assert!(t.lookup(Asid(0), Vpn(0x43)).is_some());
        }
    }

    #[test]
    fn smallest_entry_answers_and_filter_follows() {
        // A base entry and a superpage entry both translate vpn 0x31: the base one answers, also
        // when the superpage was cached in the filter first.
        for entries in [8, 64] {
            let mut t = ftlb(entries, entries, Format::Superpage);
            t.fill(0, Vpn(0x30), Pte { pfn: Pfn(0x100), size: size(16), valid: 0 });
            assert_eq!(t.lookup(Asid(0), Vpn(0x31)).unwrap().shift, 16);
            t.insert(0, Vpn(0x31), TlbData { pfn: 0x555, shift: 12, valid: 0 });
            assert_eq!(t.lookup(Asid(0), Vpn(0x31)).unwrap().pfn, 0x555);
            assert_eq!(t.probe(Asid(0), Vpn(0x31)).unwrap().data.shift, 12);
        }
    }

    #[test]
    fn merge_counts_as_use_under_lru() {
        // 2-entry LRU partial TLB: A (block 0), B (block 1); a merge into A makes B the victim.
        let mut t = ftlb(2, 2, Format::PartialSubblock { block_pages: 4 });
        t.fill(0, Vpn(0), Pte { pfn: Pfn(0x10), size: size(4), valid: 0b1 });
        t.fill(0, Vpn(4), Pte { pfn: Pfn(0x20), size: size(4), valid: 0b1 });
        assert!(t.fill(0, Vpn(1), Pte { pfn: Pfn(0x11), size: size(4), valid: 0b11 }).merged);
        let f = t.fill(0, Vpn(8), Pte { pfn: Pfn(0x30), size: size(4), valid: 0b1 });
        assert_eq!(f.evicted.map(|e| e.tag), Some(1));
    }
}
