//! Translation lookaside buffers: any geometry, five replacement policies, ASID and global tags.
//!
//! A [`Tlb`] is one structure of `entries` slots split into `sets = entries / ways` sets
//! (`ways == entries` is fully associative; `entries` need not be a power of two). The set of a
//! translation is its tag (the VPN at the entry's page size) modulo `sets`.
//!
//! Storage is flat (`sets * ways` slots, structure of arrays). Lookups scan the set when it has at
//! most [`SCAN_WAYS`] ways and use an open-addressing index (tag, ASID) -> slot for wider sets,
//! so a 64- or 128-entry fully associative TLB answers in a few nanoseconds. Every replacement
//! policy keeps a per-set list of slots in insertion (FIFO) or recency (LRU) order; invalid slots
//! sit at its tail so that every policy fills empty ways before it evicts.
//!
//! The entry is designed to grow: each slot records its page size (superpages, talluri95), the
//! ASID it belongs to or [`GLOBAL`], and a payload ([`TlbData`]) that later models extend with
//! subblock valid bits, protection keys and region IDs without changing the lookup.

mod policy;

pub use policy::Policy;
use policy::PolicyState;

use crate::addr::{Asid, PageSize, Pfn, Vpn};

/// Sets with at most this many ways are searched by scanning; wider ones through an index.
pub const SCAN_WAYS: u32 = 16;

/// ASID value of a global entry: it matches every process.
pub const GLOBAL: u32 = u32::MAX;

const INVALID: u64 = u64::MAX;
const NIL: u32 = u32::MAX;

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
}

/// What a TLB entry translates to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TlbData {
    /// Frame of the first base page of the entry's page.
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

/// One entry's storage.
#[derive(Clone, Copy, Debug)]
struct Slot {
    tag: u64,
    data: TlbData,
    asid: u32,
}

/// A TLB structure. See the module documentation.
#[derive(Clone, Debug)]
pub struct Tlb {
    geometry: Geometry,
    sets: u32,
    /// Page sizes this TLB holds, smallest first (one until superpages are configured).
    sizes: Vec<PageSize>,
    /// Every slot's tag (INVALID when empty), ASID and payload, `sets * ways` of them.
    slots: Vec<Slot>,
    /// Per-set list of ways: head is most recently inserted (FIFO) / used (LRU); invalid at tail.
    order: Order,
    /// `sets - 1` when `sets` is a power of two (set index by mask), else `u64::MAX` (modulo).
    set_mask: u64,
    policy: PolicyState,
    index: Option<Index>,
    globals: u32,
    /// The recent-hit filter: see [`Filter`].
    filter: Filter,
}

/// The two most recently hit translations, answered without touching the arrays.
///
/// A hit through the filter changes no replacement state at once: under FIFO and random hits
/// change nothing anyway, and under LRU and tree-PLRU the filter remembers the hit as *pending*
/// with its time. Before anything else looks at or changes the replacement state (a hit on
/// another entry, an insertion, an invalidation), [`Tlb::commit`] replays the pending hits in
/// the order they happened. Every operation between two commits is a filter hit, so the replay
/// gives exactly the state that updating on every hit would have given: under LRU the pending
/// entries are the most recent of all and go to the head in time order; under tree-PLRU an
/// access sets the bits on its own path only, so replaying the last access of each entry in
/// time order leaves the same bits. NRU, whose reference bits can be cleared by another entry's
/// hit, uses one filter entry and drops it on every insertion.
#[derive(Clone, Copy, Debug)]
struct Filter {
    tag: [u64; 2],
    asid: [u32; 2],
    slot: [u32; 2],
    data: [TlbData; 2],
    /// Time of the last hit through the filter (0 = none since the last commit).
    pending: [u64; 2],
    /// Time of the last use (fill or hit): the entry used less recently is replaced.
    used: [u64; 2],
    clock: u64,
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
            pending: [0; 2],
            used: [0; 2],
            clock: 0,
            width: if policy == Policy::Nru { 1 } else { 2 },
        }
    }

    /// Forgets every entry that points at `slot`.
    #[inline(always)]
    fn drop_slot(&mut self, slot: u32) {
        for i in 0..2 {
            if self.slot[i] == slot {
                self.tag[i] = INVALID;
                self.slot[i] = NIL;
                self.pending[i] = 0;
                self.used[i] = 0;
            }
        }
    }

    fn clear(&mut self) {
        self.tag = [INVALID; 2];
        self.slot = [NIL; 2];
        self.pending = [0; 2];
        self.used = [0; 2];
    }
}

impl Tlb {
    /// Builds an empty TLB holding pages of `page_size`.
    pub fn new(geometry: Geometry, page_size: PageSize) -> Result<Tlb, GeometryError> {
        let Geometry { entries, ways, policy, seed } = geometry;
        if entries == 0 {
            return Err(GeometryError::ZeroEntries);
        }
        if ways == 0 || entries % ways != 0 {
            return Err(GeometryError::BadWays { entries, ways });
        }
        if policy == Policy::Plru && !ways.is_power_of_two() {
            return Err(GeometryError::PlruWays(ways));
        }
        let sets = entries / ways;
        let n = entries as usize;
        Ok(Tlb {
            geometry,
            sets,
            sizes: vec![page_size],
            slots: vec![Slot { tag: INVALID, asid: 0, data: TlbData::default() }; n],
            order: Order::new(sets, ways),
            set_mask: if sets.is_power_of_two() { sets as u64 - 1 } else { u64::MAX },
            policy: PolicyState::new(policy, sets, ways, seed),
            index: (ways > SCAN_WAYS).then(|| Index::new(entries)),
            globals: 0,
            filter: Filter::new(policy),
        })
    }

    /// The geometry this TLB was built with.
    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// Number of sets.
    pub fn sets(&self) -> u32 {
        self.sets
    }

    /// The base page size of this TLB.
    pub fn page_size(&self) -> PageSize {
        self.sizes[0]
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

    /// Looks up base page `vpn` of `asid` (VPN in units of the TLB's base page size). On a hit,
    /// updates the replacement state and returns the entry's data.
    ///
    /// The repeated hit on the previous slot (most references of real programs) is answered
    /// inline without touching the arrays; everything else goes through an out-of-line path.
    #[inline(always)]
    pub fn lookup(&mut self, asid: Asid, vpn: Vpn) -> Option<TlbData> {
        let f = &mut self.filter;
        for i in 0..2 {
            if vpn.0 == f.tag[i] && asid.0 == f.asid[i] {
                f.clock += 1;
                f.pending[i] = f.clock;
                f.used[i] = f.clock;
                return Some(f.data[i]);
            }
        }
        self.lookup_slow(asid, vpn)
    }

    #[inline(never)]
    fn lookup_slow(&mut self, asid: Asid, vpn: Vpn) -> Option<TlbData> {
        let tag = vpn.0;
        let slot = self.find(asid.0, tag)?;
        self.commit();
        let set = self.set_of_slot(slot);
        match &mut self.policy {
            PolicyState::Lru => self.order.move_to_head(set, slot),
            p => p.on_hit(set, slot - set * self.geometry.ways),
        }
        let data = self.slots[slot as usize].data;
        // Replace the less recently used filter entry (the only one under NRU).
        let f = &mut self.filter;
        let i = if f.width == 1 || f.used[0] <= f.used[1] { 0 } else { 1 };
        f.clock += 1;
        f.tag[i] = tag;
        f.asid[i] = asid.0;
        f.slot[i] = slot;
        f.data[i] = data;
        f.used[i] = f.clock;
        f.pending[i] = 0;
        Some(data)
    }

    /// Replays the hits the filter answered since the last commit (see [`Filter`]).
    #[inline(always)]
    fn commit(&mut self) {
        let p = self.filter.pending;
        if p[0] == 0 && p[1] == 0 {
            return;
        }
        let order = if p[1] != 0 && (p[0] == 0 || p[1] < p[0]) { [1, 0] } else { [0, 1] };
        for i in order {
            if self.filter.pending[i] == 0 {
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
        self.filter.pending = [0; 2];
    }

    /// Looks for the translation without changing any replacement state.
    pub fn probe(&self, asid: Asid, vpn: Vpn) -> Option<TlbEntry> {
        self.find(asid.0, vpn.0).map(|s| self.entry(s))
    }

    #[inline(always)]
    fn find(&self, asid: u32, tag: u64) -> Option<u32> {
        if let Some(index) = &self.index {
            if let Some(s) = index.get(tag, asid) {
                return Some(s);
            }
            if self.globals > 0 {
                return index.get(tag, GLOBAL);
            }
            return None;
        }
        let ways = self.geometry.ways as usize;
        let base = self.set_of(tag) as usize * ways;
        for (w, s) in self.slots[base..base + ways].iter().enumerate() {
            if s.tag == tag && (s.asid == asid || s.asid == GLOBAL) {
                return Some((base + w) as u32);
            }
        }
        None
    }

    fn entry(&self, slot: u32) -> TlbEntry {
        let s = self.slots[slot as usize];
        TlbEntry { tag: s.tag, asid: s.asid, data: s.data }
    }

    /// Inserts the translation of base page `vpn` for `asid` (or [`GLOBAL`]), choosing a victim
    /// by the policy (empty ways first). Returns the evicted valid entry, if any. The caller
    /// makes sure the translation is not already present.
    #[inline(always)]
    pub fn insert(&mut self, asid: u32, vpn: Vpn, data: TlbData) -> Option<TlbEntry> {
        let tag = vpn.0;
        let set = self.set_of(tag);
        let ways = self.geometry.ways;
        // An insertion reads and changes the replacement state: bring it up to date first.
        self.commit();
        if self.filter.width == 1 {
            // NRU: the fill may clear the reference bit of the filtered entry.
            self.filter.clear();
        }
        let tail = self.order.tail(set);
        let slot = if self.slots[tail as usize].tag == INVALID {
            tail
        } else {
            set * ways + self.policy.victim(set, tail - set * ways)
        };
        let s = slot as usize;
        let evicted = if self.slots[s].tag != INVALID {
            let old = self.entry(slot);
            self.forget(slot);
            Some(old)
        } else {
            None
        };
        self.slots[s] = Slot { tag, asid, data };
        if asid == GLOBAL {
            self.globals += 1;
        }
        if let Some(index) = &mut self.index {
            index.insert(tag, asid, slot);
        }
        self.order.move_to_head(set, slot);
        self.policy.on_fill(set, slot - set * ways);
        evicted
    }

    /// Removes the slot's translation from the index and the last-hit filter (not from the order).
    #[inline(always)]
    fn forget(&mut self, slot: u32) {
        let s = slot as usize;
        if let Some(index) = &mut self.index {
            index.remove(self.slots[s].tag, self.slots[s].asid);
        }
        if self.slots[s].asid == GLOBAL {
            self.globals -= 1;
        }
        self.filter.drop_slot(slot);
    }

    fn invalidate_slot(&mut self, slot: u32) {
        self.commit();
        self.forget(slot);
        let s = slot as usize;
        self.slots[s].tag = INVALID;
        let set = self.set_of_slot(slot);
        self.policy.on_invalidate(set, slot - set * self.geometry.ways);
        self.order.move_to_tail(set, slot);
    }

    /// Invalidates every entry of `asid` (not global ones) whose base pages intersect
    /// `[first, last]` (VPNs at the base page size); returns how many were removed.
    pub fn invalidate_range(&mut self, asid: Asid, first: Vpn, last: Vpn) -> u64 {
        let mut n = 0;
        for slot in 0..self.slots.len() as u32 {
            let s = slot as usize;
            if self.slots[s].tag == INVALID || self.slots[s].asid != asid.0 {
                continue;
            }
            let k = (self.slots[s].data.shift as u32).saturating_sub(self.sizes[0].shift());
            let lo = self.slots[s].tag << k;
            let hi = lo + (1u64 << k) - 1;
            if lo <= last.0 && hi >= first.0 {
                self.invalidate_slot(slot);
                n += 1;
            }
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
            if self.slots[s].tag != INVALID && f(self.slots[s].asid) {
                self.invalidate_slot(slot);
                n += 1;
            }
        }
        n
    }

    /// Valid entries currently held.
    pub fn occupancy(&self) -> u32 {
        self.slots.iter().filter(|s| s.tag != INVALID).count() as u32
    }

    /// All valid entries (for tests and debugging; allocates).
    pub fn entries(&self) -> Vec<TlbEntry> {
        (0..self.slots.len() as u32).filter(|&s| self.slots[s as usize].tag != INVALID).map(|s| self.entry(s)).collect()
    }
}

/// Per-set doubly linked lists of slots (head: most recent; tail: next victim), as one array of
/// `[prev, next]` links and one of `[head, tail]` ends.
#[derive(Clone, Debug)]
struct Order {
    links: Vec<[u32; 2]>,
    ends: Vec<[u32; 2]>,
}

impl Order {
    /// Every set ordered so that way 0 is at the tail: empty ways fill in index order.
    fn new(sets: u32, ways: u32) -> Order {
        let mut links = vec![[NIL; 2]; (sets * ways) as usize];
        let mut ends = vec![[NIL; 2]; sets as usize];
        for s in 0..sets {
            let base = s * ways;
            for w in 0..ways {
                let slot = (base + w) as usize;
                links[slot] = [if w + 1 < ways { base + w + 1 } else { NIL }, if w > 0 { base + w - 1 } else { NIL }];
            }
            ends[s as usize] = [base + ways - 1, base];
        }
        Order { links, ends }
    }

    #[inline(always)]
    fn tail(&self, set: u32) -> u32 {
        self.ends[set as usize][1]
    }

    #[inline(always)]
    fn unlink(&mut self, set: u32, slot: u32) {
        let [p, n] = self.links[slot as usize];
        if p != NIL {
            self.links[p as usize][1] = n;
        } else {
            self.ends[set as usize][0] = n;
        }
        if n != NIL {
            self.links[n as usize][0] = p;
        } else {
            self.ends[set as usize][1] = p;
        }
    }

    #[inline(always)]
    fn move_to_head(&mut self, set: u32, slot: u32) {
        let h = self.ends[set as usize][0];
        if h == slot {
            return;
        }
        self.unlink(set, slot);
        let h = self.ends[set as usize][0];
        self.links[slot as usize] = [NIL, h];
        if h != NIL {
            self.links[h as usize][0] = slot;
        } else {
            self.ends[set as usize][1] = slot;
        }
        self.ends[set as usize][0] = slot;
    }

    fn move_to_tail(&mut self, set: u32, slot: u32) {
        if self.ends[set as usize][1] == slot {
            return;
        }
        self.unlink(set, slot);
        let t = self.ends[set as usize][1];
        self.links[slot as usize] = [t, NIL];
        if t != NIL {
            self.links[t as usize][1] = slot;
        } else {
            self.ends[set as usize][0] = slot;
        }
        self.ends[set as usize][1] = slot;
    }
}

/// Open-addressing (linear probing, backward-shift deletion) map from (tag, ASID) to slot, one
/// 16-byte cell per entry so a probe touches one cache line. The capacity is a power of two and
/// every position is reduced with `len - 1`, so the compiler can see each index is in bounds.
#[derive(Clone, Debug)]
struct Index {
    cells: Box<[Cell]>,
}

#[derive(Clone, Copy, Debug)]
struct Cell {
    tag: u64,
    asid: u32,
    slot: u32,
}

const EMPTY: Cell = Cell { tag: INVALID, asid: 0, slot: NIL };

impl Index {
    fn new(entries: u32) -> Index {
        let cap = (entries as usize * 4).next_power_of_two().max(16);
        Index { cells: vec![EMPTY; cap].into_boxed_slice() }
    }

    #[inline(always)]
    fn mask(&self) -> usize {
        self.cells.len() - 1
    }

    #[inline(always)]
    fn home(&self, tag: u64, asid: u32) -> usize {
        let h = (tag ^ ((asid as u64) << 40)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (h >> 32) as usize & self.mask()
    }

    #[inline(always)]
    fn get(&self, tag: u64, asid: u32) -> Option<u32> {
        let m = self.mask();
        let mut i = self.home(tag, asid);
        loop {
            let c = self.cells[i & m];
            if c.tag == tag && c.asid == asid {
                return Some(c.slot);
            }
            if c.tag == INVALID {
                return None;
            }
            i = (i + 1) & m;
        }
    }

    #[inline(always)]
    fn insert(&mut self, tag: u64, asid: u32, slot: u32) {
        let m = self.mask();
        let mut i = self.home(tag, asid);
        while self.cells[i & m].tag != INVALID {
            i = (i + 1) & m;
        }
        self.cells[i & m] = Cell { tag, asid, slot };
    }

    #[inline(always)]
    fn remove(&mut self, tag: u64, asid: u32) {
        let m = self.mask();
        let mut i = self.home(tag, asid);
        loop {
            let c = self.cells[i & m];
            if c.tag == INVALID {
                return;
            }
            if c.tag == tag && c.asid == asid {
                break;
            }
            i = (i + 1) & m;
        }
        // Backward-shift deletion keeps probe sequences unbroken without tombstones.
        let mut hole = i & m;
        let mut j = (i + 1) & m;
        loop {
            let c = self.cells[j & m];
            if c.tag == INVALID {
                break;
            }
            let home = self.home(c.tag, c.asid);
            // Move j into the hole if its home does not lie cyclically in (hole, j].
            if (j.wrapping_sub(home) & m) >= (j.wrapping_sub(hole) & m) {
                self.cells[hole & m] = c;
                hole = j;
            }
            j = (j + 1) & m;
        }
        self.cells[hole & m] = EMPTY;
    }
}

/// Frame of base page `vpn` given a TLB hit's data (for entries larger than the base page).
#[inline(always)]
pub fn frame_of(data: TlbData, vpn: Vpn, base: PageSize) -> Pfn {
    let k = data.shift as u32 - base.shift();
    Pfn(data.pfn + (vpn.0 & ((1u64 << k) - 1)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tlb(entries: u32, ways: u32, policy: Policy) -> Tlb {
        Tlb::new(Geometry { entries, ways, policy, seed: 1 }, PageSize::SIZE_4K).unwrap()
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
        // Exercise backward-shift deletion against a naive model.
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
}
