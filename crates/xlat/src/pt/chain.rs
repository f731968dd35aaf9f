//! The chained hash table under hashed and clustered page tables.
//!
//! A hashed page table (talluri95 §2, Figure 4) is a clustered page table (§3, Figure 5) with a
//! subblock factor of one, so both are this one structure: an array of bucket head pointers and,
//! per page block of `s` base pages, a PTE of `tag | next | mapping[s]` (8 + 8 + `s × pte_bytes`
//! bytes) chained from its bucket. PTEs live in a slab of page-table memory, so their physical
//! addresses are stable; new PTEs go at the head of their chain.

use super::common::{LineCfg, PtMem, PteSlot, Slab, NIL};
use super::{HashFn, PageTableConfig, ParamError, PtSize, Pte, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};

/// Bytes of a bucket head pointer.
pub(crate) const BUCKET_BYTES: u64 = 8;
/// Bytes of the tag and of the next pointer of a PTE.
const WORD: u64 = 8;

/// Host-side PTE header; its `s` mappings are in [`Chained::slots`].
#[derive(Clone, Copy, Debug)]
struct Block {
    /// VPBN (VPN for a hashed table).
    tag: u64,
    asid: u32,
    next: u32,
    /// Valid mappings.
    count: u32,
    /// Physical address of the PTE.
    addr: u64,
}

/// A chained hash table of (clustered) PTEs covering `1 << sshift` base pages each.
#[derive(Clone, Debug)]
pub(crate) struct Chained {
    sshift: u32,
    pte_bytes: u64,
    /// Bytes of one PTE in Table 2's accounting: `16 + s × pte_bytes`.
    pub(crate) obj_bytes: u64,
    nbuckets: u64,
    /// `nbuckets - 1` when it is a power of two, else 0.
    pow2_mask: u64,
    hash: HashFn,
    heads: Vec<u32>,
    blocks: Vec<Block>,
    slots: Vec<PteSlot>,
    free: Vec<u32>,
    /// PTEs in use.
    pub(crate) live: u64,
    bucket_base: u64,
    mem: PtMem,
    slab: Slab,
    lines: LineCfg,
}

/// Scrambles the ASID before it is combined with the VPN/VPBN (0 stays 0, so a single process
/// hashes exactly as talluri95's `h(VPN)`).
#[inline(always)]
fn scramble(asid: u32) -> u64 {
    (asid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// Validates `page_table.buckets`.
pub(crate) fn validate_buckets(cfg: &PageTableConfig) -> Result<(), ParamError> {
    if cfg.buckets == 0 || cfg.buckets > 1 << 32 {
        return Err(ParamError::new(
            "page_table.buckets",
            format!("{} is not usable: from 1 to 2^32 hash buckets", cfg.buckets),
        ));
    }
    Ok(())
}

impl Chained {
    /// A table with subblock factor `1 << sshift`; `cfg.buckets` must have been validated.
    pub(crate) fn new(cfg: &PageTableConfig, page: PageSize, sshift: u32, lines: LineCfg) -> Chained {
        let pte_bytes = cfg.pte_bytes as u64;
        let obj_bytes = 2 * WORD + (pte_bytes << sshift);
        let nbuckets = cfg.buckets;
        let mut mem = PtMem::new();
        let bucket_base = mem.alloc(nbuckets * BUCKET_BYTES, page.bytes());
        Chained {
            sshift,
            pte_bytes,
            obj_bytes,
            nbuckets,
            pow2_mask: if nbuckets.is_power_of_two() { nbuckets - 1 } else { 0 },
            hash: cfg.hash,
            heads: vec![NIL; nbuckets as usize],
            blocks: Vec::new(),
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
            bucket_base,
            mem,
            slab: Slab::new(obj_bytes, page.bytes()),
            lines,
        }
    }

    /// Subblock factor.
    pub(crate) fn s(&self) -> u64 {
        1 << self.sshift
    }

    /// Number of buckets.
    pub(crate) fn buckets(&self) -> u64 {
        self.nbuckets
    }

    /// Bucket of (`asid`, `tag`).
    #[inline(always)]
    fn bucket(&self, asid: Asid, tag: u64) -> usize {
        match self.hash {
            HashFn::Xor => {
                let h = tag ^ scramble(asid.0);
                if self.pow2_mask != 0 || self.nbuckets == 1 {
                    (h & self.pow2_mask) as usize
                } else {
                    (h % self.nbuckets) as usize
                }
            }
            HashFn::Mult => {
                let h = (tag ^ scramble(asid.0).rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                ((h as u128 * self.nbuckets as u128) >> 64) as usize
            }
        }
    }

    /// Block index of (`asid`, `tag`) and its bucket, without accounting.
    #[inline]
    fn find(&self, asid: Asid, tag: u64) -> (usize, u32) {
        let b = self.bucket(asid, tag);
        let mut i = self.heads[b];
        while i != NIL {
            let blk = &self.blocks[i as usize];
            if blk.tag == tag && blk.asid == asid.0 {
                break;
            }
            i = blk.next;
        }
        (b, i)
    }

    #[inline(always)]
    fn split(&self, vpn: Vpn) -> (u64, usize) {
        (vpn.0 >> self.sshift, (vpn.0 & (self.s() - 1)) as usize)
    }

    pub(crate) fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        let (tag, boff) = self.split(vpn);
        let (_, i) = self.find(asid, tag);
        if i == NIL {
            return None;
        }
        self.slots[((i as usize) << self.sshift) + boff].get()
    }

    pub(crate) fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        let slot = PteSlot::new(pte);
        let (tag, boff) = self.split(vpn);
        let (b, mut i) = self.find(asid, tag);
        if i == NIL {
            i = match self.free.pop() {
                Some(i) => i,
                None => {
                    let i = self.blocks.len() as u32;
                    assert!(i != NIL, "page table: too many PTEs");
                    let addr = self.slab.alloc(&mut self.mem);
                    self.blocks.push(Block { tag: 0, asid: 0, next: NIL, count: 0, addr });
                    self.slots.resize(self.slots.len() + (1 << self.sshift), PteSlot::EMPTY);
                    i
                }
            };
            let blk = &mut self.blocks[i as usize];
            blk.tag = tag;
            blk.asid = asid.0;
            blk.count = 0;
            blk.next = self.heads[b];
            self.heads[b] = i;
            self.live += 1;
        }
        let at = ((i as usize) << self.sshift) + boff;
        if !self.slots[at].is_valid() {
            self.blocks[i as usize].count += 1;
        }
        self.slots[at] = slot;
    }

    pub(crate) fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        let (tag, boff) = self.split(vpn);
        let (b, i) = self.find(asid, tag);
        if i == NIL {
            return None;
        }
        let at = ((i as usize) << self.sshift) + boff;
        let old = self.slots[at];
        if !old.is_valid() {
            return None;
        }
        self.slots[at] = PteSlot::EMPTY;
        let blk = &mut self.blocks[i as usize];
        blk.count -= 1;
        if blk.count == 0 {
            self.unlink(b, i);
        }
        old.get()
    }

    /// Removes block `i` from the chain of bucket `b` and frees it (its mappings already empty).
    fn unlink(&mut self, b: usize, i: u32) {
        let next = self.blocks[i as usize].next;
        if self.heads[b] == i {
            self.heads[b] = next;
        } else {
            let mut p = self.heads[b];
            while self.blocks[p as usize].next != i {
                p = self.blocks[p as usize].next;
            }
            self.blocks[p as usize].next = next;
        }
        self.blocks[i as usize].next = NIL;
        self.free.push(i);
        self.live -= 1;
    }

    pub(crate) fn remove_asid(&mut self, asid: Asid) {
        let s = 1usize << self.sshift;
        for b in 0..self.heads.len() {
            let mut prev = NIL;
            let mut i = self.heads[b];
            while i != NIL {
                let next = self.blocks[i as usize].next;
                if self.blocks[i as usize].asid == asid.0 {
                    if prev == NIL {
                        self.heads[b] = next;
                    } else {
                        self.blocks[prev as usize].next = next;
                    }
                    let at = (i as usize) << self.sshift;
                    self.slots[at..at + s].fill(PteSlot::EMPTY);
                    let blk = &mut self.blocks[i as usize];
                    blk.count = 0;
                    blk.next = NIL;
                    self.free.push(i);
                    self.live -= 1;
                } else {
                    prev = i;
                }
                i = next;
            }
        }
    }

    /// Walks the chain: reads the bucket's head pointer, then for each PTE probed its tag and
    /// either its next pointer or, on a tag match, the mapping word needed. References and lines
    /// are counted by [`super::common::LineTracker`].
    #[inline]
    pub(crate) fn walk(&self, asid: Asid, vpn: Vpn, rec: &mut WalkRecord) -> Option<Pte> {
        let (tag, boff) = self.split(vpn);
        let b = self.bucket(asid, tag);
        let mut lines = self.lines.tracker(rec);
        lines.read_aux(rec, self.bucket_base + b as u64 * BUCKET_BYTES, BUCKET_BYTES);
        let mut i = self.heads[b];
        while i != NIL {
            let blk = &self.blocks[i as usize];
            if blk.tag == tag && blk.asid == asid.0 {
                lines.read(rec, blk.addr, 0, WORD);
                let off = 2 * WORD + boff as u64 * self.pte_bytes;
                lines.read(rec, blk.addr, off, self.pte_bytes);
                lines.finish(rec);
                return self.slots[((i as usize) << self.sshift) + boff].get();
            }
            lines.read(rec, blk.addr, 0, 2 * WORD);
            i = blk.next;
        }
        lines.finish(rec);
        None
    }

    /// Table 2 size: `obj_bytes` per PTE, bucket heads separately.
    pub(crate) fn size(&self) -> PtSize {
        PtSize {
            table_bytes: self.live * self.obj_bytes,
            bucket_bytes: self.nbuckets * BUCKET_BYTES,
            objects: self.live,
        }
    }
}

/// The methods a table built on [`Chained`] (field `t`) shares with the others: every
/// [`super::PageTable`] operation goes straight to the chained table.
macro_rules! chained_table_methods {
    () => {
        /// Number of hash buckets.
        pub fn buckets(&self) -> u64 {
            self.t.buckets()
        }

        /// Load factor α: PTEs per bucket.
        pub fn load_factor(&self) -> f64 {
            self.t.live as f64 / self.t.buckets() as f64
        }

        /// See [`super::PageTable::map`].
        pub fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
            self.t.map(asid, vpn, pte)
        }
        /// See [`super::PageTable::unmap`].
        pub fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
            self.t.unmap(asid, vpn)
        }
        /// See [`super::PageTable::get`].
        pub fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
            self.t.get(asid, vpn)
        }
        /// See [`super::PageTable::walk`]: the bucket head pointer, then per PTE probed its tag
        /// and its next pointer (or, on a match, the mapping needed).
        #[inline]
        pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, _env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
            self.t.walk(asid, vpn, rec)
        }
        /// See [`super::PageTable::walk_block`]: one walk per base page of the block for now.
        pub fn walk_block<E: WalkEnv>(
            &mut self,
            asid: Asid,
            vpn: Vpn,
            env: &mut E,
            rec: &mut WalkRecord,
            out: &mut [Option<Pte>],
        ) -> Option<Pte> {
            super::walk_block_each(vpn, out, |v, env: &mut E| self.walk(asid, v, env, rec), env)
        }
        /// See [`super::PageTable::remove_asid`].
        pub fn remove_asid(&mut self, asid: Asid) {
            self.t.remove_asid(asid)
        }
        /// See [`super::PageTable::size`].
        pub fn size(&self) -> PtSize {
            self.t.size()
        }
    };
}
pub(crate) use chained_table_methods;
