//! The index of a TLB with wide sets (more than [`SCAN_WAYS`](super::SCAN_WAYS) ways): (key,
//! ASID) -> slot, hashed and chained through the slots.

use super::entry::{Slot, NIL};

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
pub(super) struct Index {
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
    pub(super) fn new(entries: u32) -> Index {
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
    pub(super) fn bucket(&self, key: u64, asid: u32) -> usize {
        (crate::addr::page_hash(key, asid) >> self.shift) as usize & self.mask
    }

    /// The chain head of bucket `b` (from [`Index::bucket`]).
    #[inline(always)]
    pub(super) fn head(&self, b: usize) -> u32 {
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
    pub(super) fn get(&self, key: u64, asid: u32, slots: &[Slot]) -> Option<u32> {
        self.find(self.head(self.bucket(key, asid)), key, asid, slots)
    }

    /// [`Index::get`] given the first slot of the key's bucket ([`Index::head`]).
    #[inline(always)]
    pub(super) fn find(&self, first: u32, key: u64, asid: u32, slots: &[Slot]) -> Option<u32> {
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
    pub(super) fn insert(&mut self, key: u64, asid: u32, slot: u32) {
        self.insert_in(self.bucket(key, asid), slot);
    }

    /// [`Index::insert`] given the key's bucket `b` ([`Index::bucket`]).
    #[inline(always)]
    pub(super) fn insert_in(&mut self, b: usize, slot: u32) {
        self.set_link(slot, [self.head(b), b as u32]);
        self.set_head(b, slot);
    }

    /// Takes out `slot`, which holds (`key`, `asid`) and is in the index.
    #[inline(always)]
    pub(super) fn remove(&mut self, key: u64, asid: u32, slot: u32) {
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
