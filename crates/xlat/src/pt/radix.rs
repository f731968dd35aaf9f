//! Forward-mapped (radix) page tables, x86-64 style, with optional page-walk caches.
//!
//! talluri95 §2 (Figure 3): an n-ary tree indexed top-down by fixed VPN fields; intermediate
//! nodes hold pointers (PTPs) to the next level, leaves hold PTEs, and the tree is read with
//! physical addresses. A walk reads one entry per level, so it costs `nlevels` references and, in
//! talluri95's accounting, `nlevels` cache lines (Table 2). Page-walk caches (Intel's PML4E /
//! PDPTE / PDE caches) remember upper-level entries: a hit at a level skips reading that level and
//! every level above it.
//!
//! One tree per ASID. Nodes are allocated on the first map under them and freed when their last
//! valid entry goes, root included, so a level's node count is `Nactive(pb_i)` and the size is
//! Table 2's `Σ n_i × pte_bytes × Nactive(pb_i)`.
//!
//! Superpage and partial-subblock PTEs (talluri95 §4.2): replicated at every leaf site they cover
//! (`superpage_store = "replicate"`), or, for a superpage that fills one upper-level entry, held
//! in that entry (`"intermediate"`): the walk stops there, and page-walk caches never hold it.
//! [`RadixTable::walk_block`] reads a subblock-prefetch block's adjacent PTEs in one go (§4.4).

use super::common::{validate_common, LineCfg, LineTracker, NIL};
use super::tree::{Tree, MAX_LEVELS, SUPER};
use super::{BitsPerLevel, PageTableConfig, ParamError, PtSize, Pte, SuperpageStore, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Pfn, PhysAddr, Vpn};
use std::fmt;

/// Largest index field of one level (host memory per node grows as `2^bits`).
pub(crate) const MAX_LEVEL_BITS: u32 = 20;

/// Forward-mapped page table: one radix tree per ASID, optional page-walk caches.
#[derive(Clone)]
pub struct RadixTable {
    tree: Tree,
    /// Page-walk cache of each level (index = tree level, leaf 0; empty for no cache).
    pwc: Vec<Pwc>,
    has_pwc: bool,
    lines: LineCfg,
    /// Paper accounting with entries no larger than a line: every entry read is exactly one
    /// reference and one line, so walks skip the general line tracker.
    one_line_per_read: bool,
    /// Walk results while the tree is unchanged (see [`WalkMemo`]); empty when the table has
    /// page-walk caches or line accounting other than one line per read.
    memo: Box<[WalkMemo]>,
    /// Changes of the tree (maps, unmaps, removed address spaces) so far: a memoised walk is
    /// valid while this has not moved.
    generation: u64,
}

/// Memoised walks: direct-mapped by (ASID, VPN).
const MEMO_ENTRIES: usize = 512;
/// Entries read by the longest walk that is memoised.
const MEMO_READS: usize = 8;

/// One memoised walk: without page-walk caches and with one line per entry read, a walk is a
/// function of the tree alone (the entries it reads, then the PTE or nothing), so while the tree
/// is unchanged ([`RadixTable::generation`]) replaying the reads it recorded gives the walk
/// record exactly what walking again would.
#[derive(Clone, Copy, Debug)]
struct WalkMemo {
    vpn: u64,
    asid: u32,
    reads: u32,
    /// Generation the entry was made in; `u64::MAX`: empty.
    generation: u64,
    /// The PTE found, as fields (`found` false: none) so that replaying it moves no
    /// `Option<Pte>` through memory.
    found: bool,
    size: PageSize,
    pfn: u64,
    valid: u64,
    addrs: [u64; MEMO_READS],
}

const NO_MEMO: WalkMemo = WalkMemo {
    vpn: 0,
    asid: 0,
    reads: 0,
    generation: u64::MAX,
    found: false,
    size: PageSize::SIZE_4K,
    pfn: 0,
    valid: 0,
    addrs: [0; MEMO_READS],
};

#[inline(always)]
fn memo_slot(asid: Asid, vpn: Vpn) -> usize {
    (crate::addr::page_hash(vpn.0, asid.0) >> 55) as usize & (MEMO_ENTRIES - 1)
}

/// How a walk accounts the entries it reads.
trait EntryReads {
    fn read(&mut self, rec: &mut WalkRecord, addr: u64, bytes: u64);
    fn finish(self, rec: &mut WalkRecord);
}

/// Paper accounting with entries no larger than a line: each entry read is one reference and
/// one line, without the general line tracker.
struct OneLinePerRead(u64);

impl EntryReads for OneLinePerRead {
    #[inline(always)]
    fn read(&mut self, rec: &mut WalkRecord, addr: u64, _bytes: u64) {
        rec.push_ref(PhysAddr(addr));
        self.0 += 1;
    }
    #[inline(always)]
    fn finish(self, rec: &mut WalkRecord) {
        rec.cache_lines += self.0;
    }
}

impl EntryReads for LineTracker {
    #[inline(always)]
    fn read(&mut self, rec: &mut WalkRecord, addr: u64, bytes: u64) {
        LineTracker::read(self, rec, addr, 0, bytes);
    }
    #[inline(always)]
    fn finish(self, rec: &mut WalkRecord) {
        LineTracker::finish(self, rec);
    }
}

/// One page-walk cache: a small fully-associative LRU cache of the entries of one non-leaf level,
/// tagged by the ASID and the VPN bits that index that level and all levels above it.
#[derive(Clone, Debug, Default)]
struct Pwc {
    entries: Vec<PwcEntry>,
    clock: u64,
}

#[derive(Clone, Copy, Debug)]
struct PwcEntry {
    key: u64,
    asid: u32,
    /// Node of the level below that the cached entry points to ([`NIL`]: invalid entry).
    node: u32,
    stamp: u64,
}

impl Pwc {
    fn new(entries: usize) -> Pwc {
        Pwc { entries: vec![PwcEntry { key: 0, asid: 0, node: NIL, stamp: 0 }; entries], clock: 0 }
    }

    #[inline]
    fn lookup(&mut self, asid: u32, key: u64) -> u32 {
        for e in self.entries.iter_mut() {
            if e.key == key && e.asid == asid && e.node != NIL {
                self.clock += 1;
                e.stamp = self.clock;
                return e.node;
            }
        }
        NIL
    }

    #[inline]
    fn insert(&mut self, asid: u32, key: u64, node: u32) {
        let mut victim = 0;
        let mut oldest = u64::MAX;
        for (i, e) in self.entries.iter().enumerate() {
            if e.node == NIL {
                victim = i;
                break;
            }
            if e.stamp < oldest {
                oldest = e.stamp;
                victim = i;
            }
        }
        self.clock += 1;
        self.entries[victim] = PwcEntry { key, asid, node, stamp: self.clock };
    }

    fn invalidate(&mut self, pred: impl Fn(&PwcEntry) -> bool) {
        for e in self.entries.iter_mut() {
            if e.node != NIL && pred(e) {
                e.node = NIL;
            }
        }
    }
}

/// Resolves `levels` / `bits_per_level` into per-level index bits, leaf first.
fn geometry(cfg: &PageTableConfig, vpn_bits: u32) -> Result<Vec<u32>, ParamError> {
    let bad_levels = |msg: String| ParamError::new("page_table.levels", msg);
    let bad_bits = |msg: String| ParamError::new("page_table.bits_per_level", msg);
    if let Some(l) = cfg.levels {
        if l == 0 || l as usize > MAX_LEVELS {
            return Err(bad_levels(format!("{l} is not usable: from 1 to {MAX_LEVELS} levels")));
        }
    }
    let (bits, list) = match &cfg.bits_per_level {
        None | Some(BitsPerLevel::Uniform(_)) => {
            let b = match cfg.bits_per_level {
                Some(BitsPerLevel::Uniform(b)) => b,
                _ => 9,
            };
            if b == 0 || b > MAX_LEVEL_BITS {
                return Err(bad_bits(format!("{b} is not usable: from 1 to {MAX_LEVEL_BITS} bits per level")));
            }
            let levels = cfg.levels.unwrap_or(vpn_bits.div_ceil(b));
            if levels as usize > MAX_LEVELS {
                return Err(bad_levels(format!(
                    "{levels} levels of {b} bits would be needed to cover {vpn_bits} VPN bits; at most {MAX_LEVELS}"
                )));
            }
            (vec![b; levels as usize], false)
        }
        Some(BitsPerLevel::PerLevel(v)) => {
            if v.is_empty() || v.len() > MAX_LEVELS {
                return Err(bad_bits(format!("a list of 1 to {MAX_LEVELS} levels, got {}", v.len())));
            }
            if let Some(l) = cfg.levels {
                if l as usize != v.len() {
                    return Err(bad_bits(format!(
                        "{} entries but page_table.levels is {l}: give one entry per level, leaf first",
                        v.len()
                    )));
                }
            }
            if let Some(b) = v.iter().find(|&&b| b == 0 || b > MAX_LEVEL_BITS) {
                return Err(bad_bits(format!("{b} is not usable: from 1 to {MAX_LEVEL_BITS} bits per level")));
            }
            (v.clone(), true)
        }
    };
    let total: u32 = bits.iter().sum();
    if total < vpn_bits {
        let msg = format!(
            "{} levels with {total} index bits in all cannot cover the {vpn_bits} VPN bits of page_table.va_bits",
            bits.len()
        );
        return Err(if list { bad_bits(msg) } else { bad_levels(msg) });
    }
    if total > 64 {
        let msg = format!("{total} index bits in all; at most 64");
        return Err(if list { bad_bits(msg) } else { bad_levels(msg) });
    }
    Ok(bits)
}

/// Validates `superpage_store` for a radix or linear table: true for `intermediate`.
pub(crate) fn tree_store(cfg: &PageTableConfig) -> Result<bool, ParamError> {
    match cfg.store() {
        SuperpageStore::Replicate => Ok(false),
        SuperpageStore::Intermediate => Ok(true),
        other => Err(ParamError::new(
            "page_table.superpage_store",
            format!("{} is not usable with a {} table: use replicate or intermediate", other.name(), cfg.kind.name()),
        )),
    }
}

/// Where the upper levels of a walk ended.
enum Down {
    /// At leaf node `0`, whose entry is still to be read.
    Leaf(u32),
    /// Before the leaf: a superpage entry (`Some`) or an invalid one (`None`).
    Done(Option<Pte>),
}

impl RadixTable {
    /// Builds the table.
    pub fn new(cfg: &PageTableConfig, page_size: PageSize) -> Result<Self, ParamError> {
        let lines = validate_common(cfg, page_size)?;
        let bits = geometry(cfg, cfg.va_bits - page_size.shift())?;
        let pte = cfg.pte_bytes as u64;
        let bytes: Vec<u64> = bits.iter().map(|&b| (1u64 << b) * pte).collect();
        let intermediate = tree_store(cfg)?;
        let tree = Tree::new(&bits, pte, &bytes, page_size.shift(), intermediate);
        if let Some(&n) = cfg.pwc.iter().find(|&&n| n > crate::limits::MAX_PWC_ENTRIES) {
            return Err(ParamError::new(
                "page_table.pwc",
                format!("at most 2^16 = {} entries per page-walk cache, got {n}", crate::limits::MAX_PWC_ENTRIES),
            ));
        }
        if cfg.pwc.len() >= bits.len() {
            return Err(ParamError::new(
                "page_table.pwc",
                format!(
                    "{} page-walk caches for a {}-level table: at most one per non-leaf level ({}), top level first",
                    cfg.pwc.len(),
                    bits.len(),
                    bits.len() - 1
                ),
            ));
        }
        let top = bits.len() - 1;
        let mut pwc = vec![Pwc::default(); bits.len()];
        for (j, &n) in cfg.pwc.iter().enumerate() {
            pwc[top - j] = Pwc::new(n as usize);
        }
        let has_pwc = cfg.pwc.iter().any(|&n| n > 0);
        let one_line_per_read = !lines.layout && (cfg.pte_bytes as u64) <= 1u64 << lines.shift;
        let memo = if one_line_per_read && !has_pwc { vec![NO_MEMO; MEMO_ENTRIES] } else { Vec::new() };
        Ok(RadixTable { tree, pwc, has_pwc, lines, one_line_per_read, memo: memo.into_boxed_slice(), generation: 0 })
    }

    /// Number of levels.
    pub fn levels(&self) -> u32 {
        self.tree.levels.len() as u32
    }

    /// Index bits of each level, leaf first.
    pub fn bits_per_level(&self) -> Vec<u32> {
        self.tree.levels.iter().map(|l| l.bits).collect()
    }

    /// See [`super::PageTable::map`].
    pub fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        self.generation += 1;
        self.tree.map(asid, vpn, pte);
    }

    /// See [`super::PageTable::unmap`].
    pub fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.generation += 1;
        let pwc = &mut self.pwc;
        let top = self.tree.top();
        self.tree.unmap(asid, vpn, |k, node| {
            // The entry one level up that pointed to the freed node may be cached.
            if k < top {
                pwc[k + 1].invalidate(|e| e.node == node);
            }
        })
    }

    /// See [`super::PageTable::get`].
    pub fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.tree.get(asid, vpn)
    }

    /// See [`super::PageTable::walk`]. Reads one entry per level, top-down, starting below the
    /// deepest page-walk cache hit.
    #[inline(always)]
    pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, _env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
        let t = &self.tree;
        if !t.in_range(vpn) {
            return None;
        }
        if t.root(asid) == NIL {
            // No mapping at all in this address space: the walk has no tree to read.
            return None;
        }
        if !self.memo.is_empty() {
            return self.walk_memoised(asid, vpn, rec);
        }
        let (k, node) = self.start(asid, vpn, rec);
        if self.one_line_per_read {
            let mut reads = OneLinePerRead(0);
            let r = self.read_down(asid, vpn, k, node, rec, &mut reads);
            reads.finish(rec);
            r
        } else {
            let mut reads = self.lines.tracker(rec);
            let r = self.read_down(asid, vpn, k, node, rec, &mut reads);
            reads.finish(rec);
            r
        }
    }

    /// The walk of (`asid`, `vpn`) if [`RadixTable::walk`] would replay it from the memo and it
    /// finds a PTE: the PTE and the entries the walk reads (one reference and one line each),
    /// which the caller adds to its walk record as the replay would (with no addresses kept).
    /// Changes nothing; `None` when the walk must be made by [`RadixTable::walk`].
    #[inline(always)]
    pub(crate) fn memoised(&self, asid: Asid, vpn: Vpn) -> Option<(Pte, u32)> {
        let m = self.memo.get(memo_slot(asid, vpn))?;
        if m.generation == self.generation && m.vpn == vpn.0 && m.asid == asid.0 && m.found {
            // Only `walk` makes memo entries, past its range and root tests, and every change
            // of the tree (which alone moves a root) starts a new generation: `walk` would
            // pass those tests again.
            debug_assert!(self.tree.in_range(vpn) && self.tree.root(asid) != NIL);
            return Some((Pte { pfn: Pfn(m.pfn), size: m.size, valid: m.valid }, m.reads));
        }
        None
    }

    /// [`RadixTable::walk`] of a table without page-walk caches and with one line per entry
    /// read: replays the memoised walk of (`asid`, `vpn`) if the tree has not changed since it
    /// was made, else walks and memoises it.
    #[inline(always)]
    fn walk_memoised(&mut self, asid: Asid, vpn: Vpn, rec: &mut WalkRecord) -> Option<Pte> {
        let i = memo_slot(asid, vpn);
        let m = &self.memo[i];
        if m.generation == self.generation && m.vpn == vpn.0 && m.asid == asid.0 {
            let n = m.reads as usize;
            if rec.keep_addrs {
                for &a in &m.addrs[..n] {
                    rec.push_ref(PhysAddr(a));
                }
            } else {
                rec.mem_refs += n as u64;
            }
            rec.cache_lines += n as u64;
            return m.found.then_some(Pte { pfn: Pfn(m.pfn), size: m.size, valid: m.valid });
        }
        let (refs, lines, first) = (rec.mem_refs, rec.cache_lines, rec.n_addrs as usize);
        let top = self.tree.top();
        let root = self.tree.root(asid);
        let mut reads = OneLinePerRead(0);
        let r = self.read_down(asid, vpn, top, root, rec, &mut reads);
        reads.finish(rec);
        let n = (rec.mem_refs - refs) as usize;
        // Memoised only when every read was recorded with its address (the record keeps the
        // first MAX_WALK_REFS of a run of walks) and the walk is short enough to keep.
        if n <= MEMO_READS && rec.n_addrs as usize - first == n && rec.cache_lines - lines == n as u64 {
            let m = &mut self.memo[i];
            m.vpn = vpn.0;
            m.asid = asid.0;
            m.reads = n as u32;
            m.generation = self.generation;
            m.found = r.is_some();
            if let Some(p) = r {
                (m.pfn, m.size, m.valid) = (p.pfn.0, p.size, p.valid);
            }
            for (d, a) in m.addrs.iter_mut().zip(&rec.addrs[first..first + n]) {
                *d = a.0;
            }
        }
        r
    }

    /// Reads one entry per level from level `k` (node `node`) down to the leaf PTE.
    #[inline(always)]
    fn read_down<R: EntryReads>(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        k: usize,
        node: u32,
        rec: &mut WalkRecord,
        reads: &mut R,
    ) -> Option<Pte> {
        match self.read_upper(asid, vpn, k, node, rec, reads) {
            Down::Done(r) => r,
            Down::Leaf(node) => {
                let t = &self.tree;
                let idx = t.index(0, vpn);
                reads.read(rec, t.entry_addr(0, node, idx), t.pte_bytes);
                t.leaf_pte(asid, vpn, t.leaf(node, idx))
            }
        }
    }

    /// Reads one entry per level from level `k` (node `node`) down to level 1, filling the
    /// page-walk caches of the pointers read (deeper ones were probed first and missed). Stops
    /// at an invalid entry or a superpage entry, which is never cached as a pointer.
    #[inline(always)]
    fn read_upper<R: EntryReads>(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        mut k: usize,
        mut node: u32,
        rec: &mut WalkRecord,
        reads: &mut R,
    ) -> Down {
        let t = &self.tree;
        while k > 0 {
            let idx = t.index(k, vpn);
            reads.read(rec, t.entry_addr(k, node, idx), t.pte_bytes);
            let child = t.child(k, node, idx);
            if child >= SUPER {
                return Down::Done(if child == NIL { None } else { Some(t.super_pte(child, vpn)) });
            }
            if self.has_pwc {
                let c = &mut self.pwc[k];
                if !c.entries.is_empty() {
                    c.insert(asid.0, vpn.0 >> t.levels[k].shift, child);
                }
            }
            node = child;
            k -= 1;
        }
        Down::Leaf(node)
    }

    /// Probes the page-walk caches: the level to start reading at and its node.
    #[inline(always)]
    fn start(&mut self, asid: Asid, vpn: Vpn, rec: &mut WalkRecord) -> (usize, u32) {
        let t = &self.tree;
        let mut k = t.top();
        let mut node = t.root(asid);
        if self.has_pwc && node != NIL {
            for lvl in 1..=k {
                let c = &mut self.pwc[lvl];
                if c.entries.is_empty() {
                    continue;
                }
                let hit = c.lookup(asid.0, vpn.0 >> t.levels[lvl].shift);
                if hit != NIL {
                    rec.pwc_hits += 1;
                    node = hit;
                    k = lvl - 1;
                    break;
                }
            }
        }
        (k, node)
    }

    /// See [`super::PageTable::walk_block`]. A block of at most one leaf node's entries: the
    /// walk of `vpn` down to its leaf node (page-walk caches as in [`RadixTable::walk`]), then
    /// one read of the block's `out.len()` consecutive PTEs, charged for the lines of those
    /// bytes. A walk ending above the leaf (invalid or superpage entry) costs what it read and
    /// gives every page of the block the same answer. Larger blocks: one walk per page.
    pub fn walk_block<E: WalkEnv>(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        env: &mut E,
        rec: &mut WalkRecord,
        out: &mut [Option<Pte>],
    ) -> Option<Pte> {
        let n = out.len() as u64;
        debug_assert!(n.is_power_of_two());
        if n > self.tree.levels[0].fanout as u64 || !self.tree.in_range(vpn) || self.tree.root(asid) == NIL {
            return super::walk_block_each(vpn, out, |v, env: &mut E| self.walk(asid, v, env, rec), env);
        }
        let first = vpn.0 & !(n - 1);
        let (k, node) = self.start(asid, vpn, rec);
        let mut reads = self.lines.tracker(rec);
        let end = self.read_upper(asid, vpn, k, node, rec, &mut reads);
        match end {
            Down::Done(r) => fill_from_upper(r, vpn, first, out),
            Down::Leaf(node) => self.tree.read_block(rec, &mut reads, asid, node, Vpn(first), out),
        }
        reads.finish(rec);
        out[(vpn.0 - first) as usize]
    }

    /// See [`super::PageTable::remove_asid`].
    pub fn remove_asid(&mut self, asid: Asid) {
        self.generation += 1;
        self.tree.remove_asid(asid);
        for c in &mut self.pwc {
            c.invalidate(|e| e.asid == asid.0);
        }
    }

    /// See [`super::PageTable::size`]: `Σ 2^bits_i × pte_bytes` over the nodes present.
    pub fn size(&self) -> PtSize {
        let mut s = PtSize::default();
        for l in &self.tree.levels {
            s.table_bytes += l.live * ((1u64 << l.bits) * self.tree.pte_bytes);
            s.objects += l.live;
        }
        s
    }
}

/// Fills `out` (the block from `first`) from a walk that ended above the leaf with `r`: nothing
/// mapped, or a superpage containing the whole block.
pub(crate) fn fill_from_upper(r: Option<Pte>, vpn: Vpn, first: u64, out: &mut [Option<Pte>]) {
    for (i, o) in out.iter_mut().enumerate() {
        *o = r.map(|p| Pte { pfn: crate::addr::Pfn(p.pfn.0 - (vpn.0 - first) + i as u64), ..p });
    }
}

impl fmt::Debug for RadixTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RadixTable")
            .field("bits_per_level", &self.bits_per_level())
            .field("pte_bytes", &self.tree.pte_bytes)
            .field("pwc", &self.pwc.iter().map(|c| c.entries.len()).collect::<Vec<_>>())
            .field("size", &self.size())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Pfn;
    use crate::pt::NoTlb;

    /// Memoised walks give the record and result of walking the tree again: a table with the
    /// memo against the same table whose walks always read the tree, over random maps, unmaps,
    /// removed address spaces and walks (also walks run back to back in one record, past its
    /// address capacity).
    #[test]
    fn memoised_walks_equal_tree_walks() {
        let cfg = PageTableConfig::default();
        let mut memo = RadixTable::new(&cfg, PageSize::SIZE_4K).unwrap();
        assert!(!memo.memo.is_empty());
        let mut plain = memo.clone();
        plain.memo = Box::new([]);
        let mut x = 0x1234_5678_9abc_def1u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut ra, mut rb) = (WalkRecord::default(), WalkRecord::default());
        let mut hits = 0;
        for step in 0..20_000 {
            let r = next();
            let asid = Asid((r % 3) as u32);
            // Pages spread over several leaf nodes and upper-level entries.
            let vpn = Vpn((r >> 8) % 16 + ((r >> 20) % 2) * 512 + ((r >> 30) % 2) * (1 << 27));
            match (r >> 40) % 64 {
                0 => {
                    let p = Pte::base(Pfn(step), PageSize::SIZE_4K);
                    memo.map(asid, vpn, p);
                    plain.map(asid, vpn, p);
                }
                1 => assert_eq!(memo.unmap(asid, vpn), plain.unmap(asid, vpn)),
                2 if step % 97 == 0 => {
                    memo.remove_asid(asid);
                    plain.remove_asid(asid);
                }
                _ => {
                    if (r >> 50) % 8 != 0 {
                        ra.begin_walk();
                        rb.begin_walk();
                    }
                    let before = memo.generation;
                    let i = memo_slot(asid, vpn);
                    let cached =
                        memo.memo[i].generation == before && memo.memo[i].vpn == vpn.0 && memo.memo[i].asid == asid.0;
                    hits += cached as u32;
                    let a = memo.walk(asid, vpn, &mut NoTlb, &mut ra);
                    let b = plain.walk(asid, vpn, &mut NoTlb, &mut rb);
                    assert_eq!(a, b, "step {step}");
                    assert_eq!(
                        (ra.mem_refs, ra.cache_lines, ra.n_addrs, &ra.addrs[..]),
                        (rb.mem_refs, rb.cache_lines, rb.n_addrs, &rb.addrs[..]),
                        "step {step}"
                    );
                }
            }
        }
        assert!(hits > 1000, "the memo answered {hits} walks");
    }
}
