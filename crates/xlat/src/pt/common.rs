//! Pieces shared by the page-table models: page-table memory, packed PTE slots, per-ASID roots,
//! cache-line accounting of a walk, and validation of the shared config keys.

use super::{LineAccounting, PageTableConfig, ParamError, Pte, WalkRecord, PT_PHYS_BASE};
use crate::addr::{PageSize, Pfn, PhysAddr};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// "No node / no entry" in the `u32` index arrays of the models.
pub(crate) const NIL: u32 = u32::MAX;

/// Bump allocator of page-table memory: hands out physical addresses from [`PT_PHYS_BASE`] up,
/// apart from the frames the OS model gives to data. Addresses are never returned; the models reuse
/// the slots (and thus the addresses) of freed nodes and PTEs themselves.
#[derive(Clone, Debug)]
pub(crate) struct PtMem {
    next: u64,
}

impl PtMem {
    pub(crate) fn new() -> PtMem {
        PtMem { next: PT_PHYS_BASE }
    }

    /// `bytes` of page-table memory aligned to `align` (a power of two).
    pub(crate) fn alloc(&mut self, bytes: u64, align: u64) -> u64 {
        debug_assert!(align.is_power_of_two());
        let at = (self.next + align - 1) & !(align - 1);
        self.next = at + bytes.max(1);
        at
    }
}

/// Carves fixed-size objects (hashed / clustered PTEs) out of page-sized chunks of [`PtMem`], as a
/// kernel slab allocator would: objects never straddle a chunk.
#[derive(Clone, Debug)]
pub(crate) struct Slab {
    stride: u64,
    chunk: u64,
    align: u64,
    cur: u64,
    end: u64,
}

impl Slab {
    /// Objects of `obj_bytes`, packed at 8-byte alignment, from chunks of at least one `page`.
    pub(crate) fn new(obj_bytes: u64, page: u64) -> Slab {
        let stride = (obj_bytes + 7) & !7;
        let chunk = stride.div_ceil(page) * page;
        Slab { stride, chunk, align: page, cur: 0, end: 0 }
    }

    /// Physical address of a fresh object.
    pub(crate) fn alloc(&mut self, mem: &mut PtMem) -> u64 {
        if self.cur + self.stride > self.end {
            self.cur = mem.alloc(self.chunk, self.align);
            self.end = self.cur + self.chunk;
        }
        let at = self.cur;
        self.cur += self.stride;
        at
    }
}

/// A PTE packed in one word for the models' host-side arrays: `pfn << 8 | 0x80 | shift`, 0 when
/// invalid. Halves the host memory of sparse radix trees compared with `Option<Pte>`.
///
/// Bit 6 (`0x40`) marks a site of a partial-subblock PTE ([`PteSlot::partial`]): the word then
/// holds the frame and size only, and the table keeps the valid vector elsewhere.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct PteSlot(u64);

const PARTIAL_FLAG: u64 = 0x40;

impl PteSlot {
    pub(crate) const EMPTY: PteSlot = PteSlot(0);

    /// Packs `pte`. Panics if its frame number does not fit in 56 bits (no 64-bit physical
    /// address with pages of 256 bytes or more needs more).
    #[inline]
    pub(crate) fn new(pte: Pte) -> PteSlot {
        assert!(pte.pfn.0 < 1 << 56, "page table: frame number {:#x} does not fit in a PTE", pte.pfn.0);
        PteSlot(pte.pfn.0 << 8 | 0x80 | pte.size.shift() as u64)
    }

    /// Packs the frame and size of a partial-subblock `pte`, flagged as partial (the valid vector
    /// is not stored). Panics like [`PteSlot::new`].
    #[inline]
    pub(crate) fn partial(pte: Pte) -> PteSlot {
        PteSlot(PteSlot::new(pte).0 | PARTIAL_FLAG)
    }

    /// True for a slot made by [`PteSlot::partial`].
    #[inline(always)]
    pub(crate) fn is_partial(self) -> bool {
        self.0 & PARTIAL_FLAG != 0
    }

    #[inline(always)]
    pub(crate) fn is_valid(self) -> bool {
        self.0 != 0
    }

    #[inline(always)]
    pub(crate) fn get(self) -> Option<Pte> {
        if self.0 == 0 {
            return None;
        }
        let size = PageSize::from_shift((self.0 & 0x3f) as u32)?;
        Some(Pte { pfn: Pfn(self.0 >> 8), size, valid: 0 })
    }
}

/// Integer hasher for the sparse part of [`AsidMap`] (multiplicative, like FxHash).
#[derive(Default, Clone, Copy)]
pub(crate) struct IntHasher(u64);

impl Hasher for IntHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.write_u64(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

const DENSE_ASIDS: u32 = 1 << 16;

/// ASID -> `u32` (a root node index); [`NIL`] when absent. Small ASIDs index a vector directly,
/// others go through a hash map, so the miss path does no hashing in the common case.
#[derive(Clone, Debug, Default)]
pub(crate) struct AsidMap {
    dense: Vec<u32>,
    sparse: HashMap<u32, u32, BuildHasherDefault<IntHasher>>,
}

impl AsidMap {
    #[inline]
    pub(crate) fn get(&self, asid: u32) -> u32 {
        if asid < DENSE_ASIDS {
            self.dense.get(asid as usize).copied().unwrap_or(NIL)
        } else {
            self.sparse.get(&asid).copied().unwrap_or(NIL)
        }
    }

    pub(crate) fn set(&mut self, asid: u32, v: u32) {
        if asid < DENSE_ASIDS {
            if self.dense.len() <= asid as usize {
                self.dense.resize(asid as usize + 1, NIL);
            }
            self.dense[asid as usize] = v;
        } else if v == NIL {
            self.sparse.remove(&asid);
        } else {
            self.sparse.insert(asid, v);
        }
    }
}

/// Counts the memory references and cache lines of one walk.
///
/// Every read names the *object* it falls in (a node entry, a hashed or clustered PTE) by the
/// object's physical base address, an offset and a length. Objects are laid out as talluri95
/// assumes for its metric, starting on a line boundary: a read costs one memory reference per
/// line of `[off, off + len)` (relative to the object) not already read in that object, recorded
/// at the first address read in that line. So reading a hashed PTE's tag and next pointer is one
/// reference, and a clustered PTE's mapping word is a second one only when it lies past the tag's
/// line.
///
/// Cache lines: under [`LineAccounting::Paper`] they are these per-object lines (distinct objects
/// never share a line); reads outside talluri95's metric ([`LineTracker::read_aux`], the hash
/// bucket array) are references but not lines. Under [`LineAccounting::Layout`] lines are the
/// distinct `line_bytes`-aligned blocks of all physical addresses read during the walk.
pub(crate) struct LineTracker {
    shift: u32,
    layout: bool,
    lines: u32,
    obj: u64,
    obj_last: u64,
}

impl LineTracker {
    /// A tracker for one walk recording into `rec` (whose layout line set it clears).
    #[inline(always)]
    pub(crate) fn new(line_shift: u32, layout: bool, rec: &mut WalkRecord) -> LineTracker {
        rec.n_seen = 0;
        LineTracker { shift: line_shift, layout, lines: 0, obj: u64::MAX, obj_last: 0 }
    }

    /// A read of `len` bytes at `base + off`, inside the object starting at `base`. Reads within
    /// one object come in increasing offset order.
    #[inline(always)]
    pub(crate) fn read(&mut self, rec: &mut WalkRecord, base: u64, off: u64, len: u64) {
        let first = off >> self.shift;
        let last = (off + len - 1) >> self.shift;
        let from = if base != self.obj {
            self.obj = base;
            first
        } else {
            first.max(self.obj_last + 1)
        };
        for line in from..=last {
            rec.push_ref(PhysAddr(base + off.max(line << self.shift)));
            if !self.layout {
                self.lines += 1;
            }
            self.obj_last = line;
        }
        if self.layout {
            self.layout_lines(rec, base + off, len);
        }
    }

    /// A read outside talluri95's metric (the hash bucket array): a memory reference, a cache
    /// line only under layout accounting.
    #[inline(always)]
    pub(crate) fn read_aux(&mut self, rec: &mut WalkRecord, addr: u64, len: u64) {
        rec.push_ref(PhysAddr(addr));
        self.obj = u64::MAX;
        if self.layout {
            self.layout_lines(rec, addr, len);
        }
    }

    /// A hash chain found empty: under [`LineAccounting::Paper`] a miss handler that searches
    /// a hashed or clustered table reads the hash node the bucket holds (talluri95's Figure 4
    /// table is an array of hash nodes) and finds no match — one cache line, as the first PTE
    /// probed would have cost. Under `layout` the bucket read already counted its line.
    #[inline(always)]
    pub(crate) fn empty_chain(&mut self) {
        if !self.layout {
            self.lines += 1;
        }
    }

    #[inline(always)]
    fn layout_lines(&mut self, rec: &mut WalkRecord, addr: u64, len: u64) {
        let first = addr >> self.shift;
        let last = (addr + len - 1) >> self.shift;
        for line in first..=last {
            let n = rec.n_seen as usize;
            if !rec.seen[..n].contains(&line) {
                self.lines += 1;
                if n < rec.seen.len() {
                    rec.seen[n] = line;
                    rec.n_seen += 1;
                }
            }
        }
    }

    /// Adds the walk's lines to `rec`.
    #[inline(always)]
    pub(crate) fn finish(self, rec: &mut WalkRecord) {
        rec.cache_lines += self.lines as u64;
    }
}

/// Cache-line geometry of a table, validated.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineCfg {
    pub(crate) shift: u32,
    pub(crate) layout: bool,
}

impl LineCfg {
    #[inline(always)]
    pub(crate) fn tracker(self, rec: &mut WalkRecord) -> LineTracker {
        LineTracker::new(self.shift, self.layout, rec)
    }
}

/// Validates the keys every kind uses (`va_bits`, `pte_bytes`, `line_bytes`).
pub(crate) fn validate_common(cfg: &PageTableConfig, page: PageSize) -> Result<LineCfg, ParamError> {
    if cfg.va_bits <= page.shift() || cfg.va_bits > 64 {
        return Err(ParamError::new(
            "page_table.va_bits",
            format!(
                "{} is not usable: virtual address bits must be above the page offset ({} bits) and at most 64",
                cfg.va_bits,
                page.shift()
            ),
        ));
    }
    let pte = cfg.pte_bytes as u64;
    if !pte.is_power_of_two() || !(4..=64).contains(&pte) || pte >= page.bytes() {
        return Err(ParamError::new(
            "page_table.pte_bytes",
            format!(
                "{} is not usable: PTE size must be a power of two from 4 to 64 bytes, smaller than a page",
                cfg.pte_bytes
            ),
        ));
    }
    if !cfg.line_bytes.is_power_of_two() || cfg.line_bytes < 8 {
        return Err(ParamError::new(
            "page_table.line_bytes",
            format!("{} is not usable: the cache line size must be a power of two of at least 8 bytes", cfg.line_bytes),
        ));
    }
    Ok(LineCfg { shift: cfg.line_bytes.trailing_zeros(), layout: cfg.accounting == LineAccounting::Layout })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec() -> WalkRecord {
        WalkRecord::default()
    }

    #[test]
    fn paper_lines_count_per_object() {
        let mut r = rec();
        let mut t = LineTracker::new(6, false, &mut r);
        // 144-byte clustered PTE: tag and next at 0..16 (one reference), mapping word 10 at
        // 16 + 80 = 96, in the object's second line (another).
        t.read(&mut r, 0x1008, 0, 8);
        t.read(&mut r, 0x1008, 8, 8);
        t.read(&mut r, 0x1008, 96, 8);
        // A second object in the same physical line still costs its own line.
        t.read(&mut r, 0x1010, 0, 8);
        t.read_aux(&mut r, 0x5000, 8);
        // A 16-byte entry over 8-byte lines: two references.
        let mut t2 = LineTracker::new(3, false, &mut r);
        t2.read(&mut r, 0x2000, 0, 16);
        t.finish(&mut r);
        assert_eq!(r.cache_lines, 3);
        t2.finish(&mut r);
        assert_eq!(r.cache_lines, 5);
        assert_eq!(r.mem_refs, 6);
        let a: Vec<u64> = r.addrs[..6].iter().map(|p| p.0).collect();
        assert_eq!(a, vec![0x1008, 0x1008 + 96, 0x1010, 0x5000, 0x2000, 0x2008]);
    }

    #[test]
    fn layout_lines_are_distinct_aligned_blocks() {
        let mut r = rec();
        let mut t = LineTracker::new(6, true, &mut r);
        t.read(&mut r, 0x1008, 0, 8);
        t.read(&mut r, 0x1008, 8, 8);
        t.read(&mut r, 0x1008, 96, 8); // 0x1068 -> line 0x41
        t.read(&mut r, 0x1010, 0, 8); // line 0x40 again
        t.read_aux(&mut r, 0x103c, 8); // straddles 0x40 / 0x41
        t.finish(&mut r);
        assert_eq!(r.cache_lines, 2);
        assert_eq!(r.mem_refs, 4);
    }

    #[test]
    fn pte_slots_round_trip() {
        let pte = Pte { pfn: Pfn(0xabc_def), size: PageSize::SIZE_4K, valid: 0 };
        assert_eq!(PteSlot::new(pte).get(), Some(pte));
        assert_eq!(PteSlot::EMPTY.get(), None);
        let big = Pte { pfn: Pfn(7), size: PageSize::from_shift(30).unwrap(), valid: 0 };
        assert_eq!(PteSlot::new(big).get(), Some(big));
        assert!(!PteSlot::new(big).is_partial());
        let part = Pte { pfn: Pfn(0x1234), size: PageSize::from_shift(16).unwrap(), valid: 0b101 };
        let s = PteSlot::partial(part);
        assert!(s.is_valid() && s.is_partial());
        assert_eq!(s.get(), Some(Pte { valid: 0, ..part }));
    }

    #[test]
    fn asid_map_dense_and_sparse() {
        let mut m = AsidMap::default();
        assert_eq!(m.get(3), NIL);
        m.set(3, 7);
        m.set(1 << 20, 9);
        assert_eq!(m.get(3), 7);
        assert_eq!(m.get(1 << 20), 9);
        m.set(1 << 20, NIL);
        assert_eq!(m.get(1 << 20), NIL);
    }

    #[test]
    fn slab_objects_do_not_straddle_chunks() {
        let mut mem = PtMem::new();
        let mut s = Slab::new(144, 4096);
        let addrs: Vec<u64> = (0..60).map(|_| s.alloc(&mut mem)).collect();
        for a in &addrs {
            assert!(*a >= PT_PHYS_BASE);
            assert_eq!(a / 4096, (a + 143) / 4096);
        }
        let mut sorted = addrs.clone();
        sorted.dedup();
        assert_eq!(sorted.len(), 60);
    }
}
