//! The recent-hit filter: the two most recently hit translations of a TLB, compared before
//! anything else, and the same filter held in registers over a run of lookups. Its entries and
//! their pending hits follow the invariant in the
//! [module documentation](super#fast-paths-and-their-invariant).

use super::entry::{TlbData, INVALID, NIL};
use super::policy::Policy;
use crate::addr::{Asid, Vpn};

/// The two most recently hit translations, answered without touching the arrays.
///
/// The filter is keyed by the exact base VPN and ASID of a lookup and caches the slot that answered
/// it and the data returned. A hit through the filter changes no replacement state at once: under
/// LRU and tree-PLRU the filter remembers it as *pending* (and which entry was hit last), and
/// [`Tlb::commit`](super::Tlb::commit) applies the pending hits in the order they happened before
/// anything else looks at or changes the replacement state. NRU uses one entry. When hits are
/// applied and when entries are dropped or refreshed, and why the answers and the replacement state
/// are then those of a TLB without a filter: the invariant in the [module
/// documentation](super#fast-paths-and-their-invariant).
#[derive(Clone, Copy, Debug)]
pub(super) struct Filter {
    pub(super) tag: [u64; 2],
    pub(super) asid: [u32; 2],
    pub(super) slot: [u32; 2],
    pub(super) data: [TlbData; 2],
    /// A hit through the entry since the last commit.
    pub(super) pending: [bool; 2],
    /// The entry used (filled or hit) last: the other one, or an empty one, is replaced. When
    /// both are pending, the other one was hit earlier and is replayed first.
    pub(super) last: usize,
    /// Number of entries in use (1 for NRU, else 2).
    pub(super) width: usize,
}

impl Filter {
    pub(super) fn new(policy: Policy) -> Filter {
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
    pub(super) fn hit(&mut self, asid: Asid, vpn: Vpn) -> Option<usize> {
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
    pub(super) fn drop_entry(&mut self, i: usize) {
        self.tag[i] = INVALID;
        self.slot[i] = NIL;
        self.pending[i] = false;
    }

    /// Forgets every entry that points at `slot`.
    #[inline(always)]
    pub(super) fn drop_slot(&mut self, slot: u32) {
        for i in 0..2 {
            if self.slot[i] == slot {
                self.drop_entry(i);
            }
        }
    }

    pub(super) fn clear(&mut self) {
        self.tag = [INVALID; 2];
        self.slot = [NIL; 2];
        self.pending = [false; 2];
    }
}

/// The recent-hit filter of one TLB held in registers over a run of lookups of one ASID (the
/// engine's plain loop): [`Tlb::filter_run`](super::Tlb::filter_run) takes it, [`FilterRun::hit`]
/// answers as [`Tlb::lookup`](super::Tlb::lookup) would through the filter, and
/// [`Tlb::end_filter_run`](super::Tlb::end_filter_run) puts back what the hits changed (which
/// entries are pending, which was hit last) before anything else touches the TLB.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FilterRun {
    /// The filter's tags, INVALID for an entry of another ASID (no VPN equals it).
    pub(super) tag: [u64; 2],
    pub(super) pending: [bool; 2],
    pub(super) last: usize,
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
