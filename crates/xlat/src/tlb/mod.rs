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
//!
//! # Files
//!
//! This file holds the model: the [`Tlb`], its lookups, fills and invalidations, and the
//! replacement bookkeeping they share. Below it, `entry.rs` holds what a slot holds (the entry
//! formats, [`TlbData`], the lookup key), `order.rs` the per-set order lists, `index.rs` the index
//! of wide sets, `policy.rs` the policies' own state, and the state of the fast paths:
//! `filter.rs` the recent-hit filter and `near.rs` what a fully associative LRU run keeps. Above
//! it, `fast.rs` holds the fast paths of the engine's plain loop; the model never calls them.
//!
//! # Fast paths and their invariant
//!
//! Three shortcuts answer most lookups without the general path:
//! - the recent-hit filter: the two most recently hit translations, compared before anything
//!   else ([`Tlb::lookup`]), also held in registers over a run of lookups (`Tlb::filter_run`);
//! - fully associative LRU TLBs of base-page entries (more than [`SCAN_WAYS`] ways, LRU,
//!   [`Format::Single`]): while such a TLB holds no [`GLOBAL`] entry and nothing larger than a
//!   base page, a lookup is one probe of the index (`Tlb::lookup_fa_lru`), and while it holds no
//!   block entry, a fill takes the tail of its one order list (`Tlb::fill_fa_lru`);
//! - runs of such a TLB (`Tlb::fa_lru_run`): the engine's loop hands over a run of page words,
//!   looked up either in a direct-mapped table of the run's recent pages whose uses reach the
//!   order list later, or in the index one reference ahead.
//!
//! One invariant binds them to the model: every answer is the one the arrays give, and the
//! replacement state is, whenever anything reads or changes it, the state that applying each use
//! of an entry at once would have made. Every operation of the model keeps its three parts,
//! and they are all that the shortcuts assume:
//! 1. Uses may wait, in order. The replacement state (the order lists and the policy's state)
//!    may lag behind the uses of entries: hits the filter answered (*pending* in it) and, during a
//!    run, the uses in the run's table and in `Deferred`. Before anything reads or changes that
//!    state (a lookup past the filter, an insertion, a merge, an invalidation, a run's fill), the
//!    waiting uses are applied in the order they were made (`Tlb::commit`,
//!    `Tlb::commit_fa_lru`, `Deferred::apply`). Every waiting use is a hit on an entry that is
//!    there, which gives the same state as applying it at once: under LRU the used entries are
//!    the most recent of all, in that order; under tree-PLRU a use sets the bits of its own path
//!    only, so the last use of each entry, in order, sets the same bits; FIFO and random ignore
//!    hits. NRU, where another entry's use may clear a reference bit, keeps one filter entry and
//!    drops it at every insertion or merge.
//! 2. A cached answer follows its slot. A filter entry (and an entry of a run's table) names the
//!    slot that answered and, in the filter, the data returned. It is dropped when that slot is
//!    evicted or invalidated, when a merge into it does more than add pages, and when a new or
//!    merged entry comes to cover its page (a smaller entry, or the process's own, may answer
//!    instead); it is refreshed when its slot gains pages or new data ([`Tlb::set_data`]).
//! 3. The fully associative shortcut holds only while its terms do. `Tlb::fa_lru_lookup` is true
//!    exactly when the TLB is of that kind and holds no global entry and nothing larger than a
//!    base page; every change of the counts behind it (`globals`, `present`) refreshes it. A run
//!    fills only entries that keep it true (its process's own base-page entries, in a TLB
//!    without block entries) and leaves any other miss to its caller.

mod entry;
mod fast;
mod filter;
mod index;
mod near;
mod order;
pub(crate) mod policy;
#[cfg(test)]
mod tests;

pub use entry::{Format, TlbData, TlbEntry, GLOBAL};
pub(crate) use fast::{FaLruMisses, Watch, NO_WATCH};
pub(crate) use filter::FilterRun;
pub use policy::Policy;

use entry::{key_of, low_bits, translates, Slot, INVALID, KEY_SHIFT, NO_SHIFT};
use filter::Filter;
use index::Index;
use near::{Deferred, Near};
use order::Order;
use policy::PolicyState;

use crate::addr::{Asid, PageSize, Pfn, Vpn};
use crate::pt::Pte;

/// Sets with at most this many ways are searched by scanning; wider ones through an index.
pub const SCAN_WAYS: u32 = 16;

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

/// What a fill did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Fill {
    /// The valid entry replaced to make room, if any.
    pub evicted: Option<TlbEntry>,
    /// True if an existing block entry was updated in place (a complete-subblock *subblock
    /// miss*, or a partial-subblock valid-vector update): no entry was allocated.
    pub merged: bool,
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

    /// Valid entries whose (ASID or [`GLOBAL`], first base page) satisfies `f`; allocates
    /// nothing.
    pub fn count_where(&self, f: impl Fn(u32, u64) -> bool) -> u64 {
        let mut n = 0;
        for s in self.slots.iter() {
            if s.key != INVALID {
                let k = self.pages_log(&s.data);
                n += f(s.asid, key_of(s.key, k) << k) as u64;
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

/// Frame of base page `vpn` given a TLB hit's data (any entry format: for block entries the
/// pages are properly placed, and complete-subblock lookups return base-page translations).
#[inline(always)]
pub fn frame_of(data: TlbData, vpn: Vpn, base: PageSize) -> Pfn {
    let k = data.shift as u32 - base.shift();
    Pfn(data.pfn + (vpn.0 & low_bits(k)))
}
