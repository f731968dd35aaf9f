//! What a run of a fully associative LRU TLB ([`Tlb::fa_lru_run`](super::Tlb::fa_lru_run))
//! keeps besides the TLB's arrays: the uses of its entries not yet applied to the order list, and
//! the table of the run's recent pages. Both hold uses that wait, under the invariant in the
//! [module documentation](super#fast-paths-and-their-invariant).

use super::entry::{INVALID, NIL};
use super::order::Order;

/// Uses of the entries of a fully associative LRU TLB that
/// [`Tlb::fa_lru_run`](super::Tlb::fa_lru_run) has recorded but not yet applied to the order list:
/// each used slot with the time of its last use. Moving a slot to the head of the list is a chain
/// of dependent loads and stores through its neighbours; recording the use is one store.
/// [`Deferred::apply`] moves the used slots to the head in the order of their last uses, before
/// anything reads the list (a fill takes its tail) and when the run ends, which under LRU gives the
/// list that moving each at its use gives (the invariant in the [module
/// documentation](super#fast-paths-and-their-invariant)).
#[derive(Debug)]
pub(super) struct Deferred {
    /// Time of each slot's last use since the last update, 0 if none.
    pub(super) time: Box<[u64]>,
    /// The slots with a time, in any order (each at most once, so `entries` of room).
    pub(super) used: Vec<u32>,
}

/// A copy keeps the room of `entries` uses (a derived clone of the vector would have only its
/// length's, and the run would allocate where it records a use: a machine with several cores
/// clones its TLBs for each core).
impl Clone for Deferred {
    fn clone(&self) -> Deferred {
        let mut used = Vec::with_capacity(self.time.len());
        used.extend_from_slice(&self.used);
        Deferred { time: self.time.clone(), used }
    }
}

impl Deferred {
    /// For a TLB of `entries` slots (0 for a TLB that never defers).
    pub(super) fn new(entries: usize) -> Deferred {
        Deferred { time: vec![0; entries].into_boxed_slice(), used: Vec::with_capacity(entries) }
    }

    /// Records a use of `slot` (below the TLB's entries) at time `t` (at least 1): later than every
    /// use recorded before it that it follows (the uses of a run of
    /// [`Tlb::fa_lru_run`](super::Tlb::fa_lru_run), recorded out of order, at their positions'
    /// times).
    #[inline(always)]
    pub(super) fn record_at(&mut self, slot: u32, t: u64) {
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
    pub(super) fn apply(&mut self, order: &mut Order) {
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

/// The table of a run of [`Tlb::fa_lru_run_near`](super::Tlb::fa_lru_run_near): the run's pages,
/// one entry each at [`Near::entry`] (direct-mapped), with their slots and their last uses not yet
/// in [`Deferred`]. On the benchmark's real trace 64 entries answer 99 % of the lookups (as a
/// 64-entry direct-mapped cache of its pages; the two-entry filter 83 %).
#[derive(Clone, Debug)]
pub(super) struct Near {
    pub(super) tag: [u64; NEAR_ENTRIES],
    pub(super) slot: [u32; NEAR_ENTRIES],
    /// The entry's last use not yet recorded, as its word's position plus one (0: none).
    pub(super) used: [u64; NEAR_ENTRIES],
    /// Bit `e` set if entry `e` holds a page.
    pub(super) valid: u64,
}

/// Entries of [`Near`].
const NEAR_ENTRIES: usize = 64;

impl Near {
    pub(super) fn new() -> Near {
        Near { tag: [INVALID; NEAR_ENTRIES], slot: [NIL; NEAR_ENTRIES], used: [0; NEAR_ENTRIES], valid: 0 }
    }

    /// Empties the table (its entries' uses recorded).
    #[inline(always)]
    pub(super) fn clear(&mut self) {
        debug_assert!(self.used.iter().all(|&u| u == 0));
        while self.valid != 0 {
            self.tag[self.valid.trailing_zeros() as usize] = INVALID;
            self.valid &= self.valid - 1;
        }
    }

    /// The entry of page `vpn`.
    #[inline(always)]
    pub(super) fn entry(vpn: u64) -> usize {
        vpn as usize & (NEAR_ENTRIES - 1)
    }

    /// Entry `e` gets page `vpn` in `slot`, last used at position `used - 1` (`used == 0`: no
    /// use to record).
    #[inline(always)]
    pub(super) fn enter(&mut self, e: usize, vpn: u64, slot: u32, used: u64) {
        self.tag[e] = vpn;
        self.slot[e] = slot;
        self.used[e] = used;
        self.valid |= 1 << e;
    }

    /// Records entry `e`'s last use, if it has one not yet recorded, in `deferred` (at time
    /// `clock + used`).
    #[inline(always)]
    pub(super) fn leave(&mut self, e: usize, deferred: &mut Deferred, clock: u64) {
        if self.used[e] != 0 {
            deferred.record_at(self.slot[e], clock.wrapping_add(self.used[e]));
            self.used[e] = 0;
        }
    }

    /// [`Near::leave`] of every entry.
    #[inline(always)]
    pub(super) fn leave_all(&mut self, deferred: &mut Deferred, clock: u64) {
        let mut v = self.valid;
        while v != 0 {
            self.leave(v.trailing_zeros() as usize, deferred, clock);
            v &= v - 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Deferred;

    #[test]
    fn a_copy_keeps_room_for_every_slot() {
        let mut d = Deferred::new(8);
        d.record_at(3, 1);
        let c = d.clone();
        assert_eq!((c.used.as_slice(), c.used.capacity() >= 8), (&[3u32][..], true));
        assert!(Deferred::new(8).clone().used.capacity() >= 8);
    }
}
