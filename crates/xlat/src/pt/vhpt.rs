//! Itanium's long-format virtual hash page table (VHPT) as a cache of the OS page table
//! (chapman03 §2.3.2, §3.1; gray05 §3.4).
//!
//! One hashed table of 32-byte entries (tag, translation, chain word) for all address spaces,
//! indexed by a hash of the region ID and the VPN (`xor`: the exclusive-OR of the two, "essentially"
//! the hash of the Itanium CPUs, chapman03 §3.1; `mult`: multiplicative), `entries` a power of two
//! (default 4 x the page frames, gray05 §3.4), mapped by one pinned translation (no TLB misses on
//! it). The hardware walker reads the one entry the hash selects; a matching tag refills the TLB.
//! Otherwise it traps to software, which walks the OS page table (any xlat table) and inserts
//! the translation into the entry and the TLB, evicting what was there (a *collision* when that
//! was another valid translation). Entries are per base page; the OS's unmaps purge them.

use super::{HashFn, PhysAddr, Pte, WalkRecord};
use crate::addr::{PageSize, Pfn};

/// Bytes of a long-format entry.
pub const ENTRY_BYTES: u64 = 32;

/// Physical address of the table (apart from data frames and the OS table's own memory).
pub const VHPT_PHYS_BASE: u64 = 3 << 39;

/// Counters of a VHPT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VhptStats {
    /// Hardware-walker probes.
    pub lookups: u64,
    /// Probes that found the translation.
    pub hits: u64,
    /// Probes that did not (a trap to software).
    pub misses: u64,
    /// Insertions that evicted another valid translation.
    pub collisions: u64,
    /// Entries invalidated by unmaps.
    pub invalidations: u64,
    /// Whole-table purges (RID purges).
    pub purges: u64,
}

/// The long-format VHPT. Entries are kept as parallel arrays of zeros when empty, so a large
/// table costs memory only where it is used.
#[derive(Clone, Debug)]
pub struct LongVhpt {
    /// VPN of each entry.
    vpns: Vec<u64>,
    /// RID + 1 of each entry; 0: empty.
    rids: Vec<u32>,
    /// Frame of each entry, its page-size shift in the top 6 bits.
    frames: Vec<u64>,
    hash: HashFn,
    stats: VhptStats,
}

const SHIFT_AT: u32 = 58;

impl LongVhpt {
    /// A table of `entries` (a power of two) entries.
    pub fn new(entries: u64, hash: HashFn) -> LongVhpt {
        debug_assert!(entries.is_power_of_two());
        let n = entries as usize;
        LongVhpt { vpns: vec![0; n], rids: vec![0; n], frames: vec![0; n], hash, stats: VhptStats::default() }
    }

    /// Number of entries.
    pub fn len(&self) -> u64 {
        self.vpns.len() as u64
    }

    /// Always false (a table has at least one entry).
    pub fn is_empty(&self) -> bool {
        self.vpns.is_empty()
    }

    /// Bytes of the table.
    pub fn bytes(&self) -> u64 {
        self.len() * ENTRY_BYTES
    }

    /// Counters.
    pub fn stats(&self) -> VhptStats {
        self.stats
    }

    /// The entry `(rid, vpn)` hashes to.
    #[inline]
    pub fn index(&self, rid: u32, vpn: u64) -> usize {
        let mask = self.len() - 1;
        (match self.hash {
            HashFn::Xor => (vpn ^ rid as u64) & mask,
            HashFn::Mult => {
                let bits = self.len().trailing_zeros();
                let h = (vpn ^ ((rid as u64) << 40)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                if bits == 0 {
                    0
                } else {
                    h >> (64 - bits)
                }
            }
        }) as usize
    }

    #[inline]
    fn holds(&self, i: usize, rid: u32, vpn: u64) -> bool {
        self.rids[i] == rid.wrapping_add(1) && self.vpns[i] == vpn
    }

    fn pte(&self, i: usize) -> Pte {
        let f = self.frames[i];
        Pte {
            pfn: Pfn(f & ((1 << SHIFT_AT) - 1)),
            size: PageSize::from_shift((f >> SHIFT_AT) as u32).unwrap_or(PageSize::SIZE_4K),
            valid: 0,
        }
    }

    /// The hardware walker's probe: one entry read (recorded in `rec`, one cache line).
    pub fn probe(&mut self, rid: u32, vpn: u64, rec: &mut WalkRecord) -> Option<Pte> {
        let i = self.index(rid, vpn);
        rec.push_ref(PhysAddr(VHPT_PHYS_BASE + i as u64 * ENTRY_BYTES));
        rec.cache_lines += 1;
        self.stats.lookups += 1;
        if self.holds(i, rid, vpn) {
            self.stats.hits += 1;
            Some(self.pte(i))
        } else {
            self.stats.misses += 1;
            None
        }
    }

    /// Software inserts the translation after walking the OS table.
    pub fn insert(&mut self, rid: u32, vpn: u64, pte: Pte) {
        let i = self.index(rid, vpn);
        if self.rids[i] != 0 && !self.holds(i, rid, vpn) {
            self.stats.collisions += 1;
        }
        self.rids[i] = rid.wrapping_add(1);
        self.vpns[i] = vpn;
        self.frames[i] = pte.pfn.0 | ((pte.size.shift() as u64) << SHIFT_AT);
    }

    /// The OS unmapped (or remapped) `vpn` of `rid`: its entry, if present, goes.
    pub fn invalidate(&mut self, rid: u32, vpn: u64) {
        let i = self.index(rid, vpn);
        if self.holds(i, rid, vpn) {
            self.rids[i] = 0;
            self.stats.invalidations += 1;
        }
    }

    /// Every entry goes (RIDs were renamed).
    pub fn purge(&mut self) {
        self.rids.fill(0);
        self.stats.purges += 1;
    }

    /// The translation held for `(rid, vpn)`, without accounting (tests).
    pub fn get(&self, rid: u32, vpn: u64) -> Option<Pte> {
        let i = self.index(rid, vpn);
        self.holds(i, rid, vpn).then(|| self.pte(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_hash_collides_for_neighbouring_rids_and_pages() {
        let mut v = LongVhpt::new(1024, HashFn::Xor);
        let pte = |f| Pte::base(Pfn(f), PageSize::SIZE_4K);
        let mut rec = WalkRecord::default();
        assert_eq!(v.probe(0b1011, 0x400, &mut rec), None);
        v.insert(0b1011, 0x400, pte(1));
        assert_eq!(v.probe(0b1011, 0x400, &mut rec), Some(pte(1)));
        // (rid 0b10011, vpn 0x400 ^ 0b11000) hashes to the same entry.
        assert_eq!(v.index(0b10011, 0x400 ^ 0b11000), v.index(0b1011, 0x400));
        v.insert(0b10011, 0x400 ^ 0b11000, pte(2));
        assert_eq!(v.stats().collisions, 1);
        assert_eq!(v.get(0b1011, 0x400), None);
        v.invalidate(0b10011, 0x400 ^ 0b11000);
        assert_eq!(v.stats(), VhptStats { lookups: 2, hits: 1, misses: 1, collisions: 1, invalidations: 1, purges: 0 });
        assert_eq!((rec.mem_refs, rec.cache_lines), (2, 2));
    }
}
