//! The chained hash table under hashed and clustered page tables.
//!
//! A hashed page table (talluri95 §2, Figure 4) is a clustered page table (§3, Figure 5) with a
//! subblock factor of one, so both are this one structure: an array of bucket head pointers and
//! nodes `tag | next | mapping[n]` (8 + 8 + `n × pte_bytes` bytes) chained from their bucket.
//!
//! A node covers an aligned region of `2^span` base pages starting at `start`, split into `n`
//! mapping words of `2^unit` base pages each (`span = unit + log2 n`). The bucket is chosen by the
//! *key* `vpn >> kshift`, fixed per table, and every node of a table lies inside one key region.
//! The shapes used:
//! - clustered base node: span = log2 s, unit 0, `n = s` (`8s + 16` bytes);
//! - clustered SZ node (superpages smaller than the block): span = log2 s, unit = log2 pages;
//! - clustered S node (block-sized or larger superpage, partial-subblock): span = unit = log2 s;
//! - hashed PTE (one word, 24 bytes): span = unit = log2 pages of the mapping.
//!
//! A node *matches* a walk for `vpn` when its ASID is the walk's and `vpn` lies in its region (for
//! clustered tables: its VPBN tag equals the walk's; for hashed tables: its tag's VPN and size
//! cover `vpn`). A matching node whose word for `vpn` holds no valid mapping does not end the
//! walk: it continues down the chain (talluri95 §5). A word holds the first frame and size of its
//! mapping (base page, superpage or partial-subblock block) and, for a partial-subblock PTE, the
//! valid vector. Nodes live in slabs of page-table memory (one per node size), so their physical
//! addresses are stable; new nodes go at the head of their chain.

use super::common::{LineCfg, LineTracker, PtMem, PteSlot, Slab, NIL};
use super::{HashFn, PageTableConfig, ParamError, PtSize, Pte, WalkRecord};
use crate::addr::{Asid, PageSize, Pfn, Vpn};

/// Bytes of a bucket head pointer.
pub(crate) const BUCKET_BYTES: u64 = 8;
/// Bytes of the tag and of the next pointer of a PTE.
const WORD: u64 = 8;

/// Host-side node header; its mapping words are `words[first .. first + (1 << (span - unit))]`.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// Hash key (`start >> kshift`).
    key: u64,
    /// First base VPN of the region covered.
    start: u64,
    asid: u32,
    next: u32,
    /// log2 base pages covered by the node.
    span: u8,
    /// log2 base pages covered by one mapping word.
    unit: u8,
    /// Valid words.
    count: u32,
    first: u32,
    /// Physical address of the node.
    addr: u64,
}

impl Node {
    #[inline(always)]
    fn wshift(&self) -> u32 {
        (self.span - self.unit) as u32
    }
}

/// One mapping word: the first frame and size of its mapping, and the partial-subblock valid
/// vector (0 for base pages and superpages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Word {
    slot: PteSlot,
    valid: u64,
}

impl Word {
    /// The word storing `pte`, which maps `vpn` (`pte.pfn` is the frame of `vpn`).
    pub(crate) fn of(pte: Pte, vpn: Vpn, base_shift: u32) -> Word {
        let pages = 1u64 << (pte.size.shift() - base_shift);
        let first = pte.pfn.0 - (vpn.0 & (pages - 1));
        Word { slot: PteSlot::new(Pte { pfn: Pfn(first), size: pte.size, valid: 0 }), valid: pte.valid }
    }

    /// The PTE of `vpn` if this word maps it.
    #[inline(always)]
    fn translate(self, vpn: u64, base_shift: u32) -> Option<Pte> {
        let m = self.slot.get()?;
        let off = vpn & ((1u64 << (m.size.shift() - base_shift)) - 1);
        if self.valid != 0 && (off >= 64 || self.valid >> off & 1 == 0) {
            return None;
        }
        Some(Pte { pfn: Pfn(m.pfn.0 + off), size: m.size, valid: self.valid })
    }

    /// log2 base pages of the mapping.
    fn pages_log2(self, base_shift: u32) -> u32 {
        self.slot.get().map_or(0, |m| m.size.shift() - base_shift)
    }
}

/// Where a node sits: its bucket, index, and the word of interest.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Found {
    bucket: usize,
    node: u32,
    word: usize,
}

/// A chained hash table of nodes keyed by `vpn >> kshift`.
#[derive(Clone, Debug)]
pub(crate) struct Chained {
    kshift: u32,
    base_shift: u32,
    page_bytes: u64,
    pte_bytes: u64,
    nbuckets: u64,
    /// `nbuckets - 1` when it is a power of two, else 0.
    pow2_mask: u64,
    hash: HashFn,
    heads: Vec<u32>,
    nodes: Vec<Node>,
    words: Vec<Word>,
    /// Freed nodes by log2 of their word count (a freed node keeps its words and address).
    free: Vec<Vec<u32>>,
    /// One slab per node size (log2 word count).
    slabs: Vec<Option<Slab>>,
    /// Nodes in use.
    pub(crate) live: u64,
    /// Bytes of the nodes in use.
    bytes: u64,
    bucket_base: u64,
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
    if cfg.buckets == 0 || cfg.buckets > crate::limits::MAX_BUCKETS {
        return Err(ParamError::new(
            "page_table.buckets",
            format!("{} is not usable: from 1 to 2^24 = {} hash buckets", cfg.buckets, crate::limits::MAX_BUCKETS),
        ));
    }
    Ok(())
}

impl Chained {
    /// A table whose buckets are chosen by `vpn >> kshift`; `cfg.buckets` must have been validated.
    /// The bucket array is allocated from `mem` now, nodes as they are mapped.
    pub(crate) fn new(cfg: &PageTableConfig, page: PageSize, kshift: u32, lines: LineCfg, mem: &mut PtMem) -> Chained {
        let nbuckets = cfg.buckets;
        let bucket_base = mem.alloc(nbuckets * BUCKET_BYTES, page.bytes());
        Chained {
            kshift,
            base_shift: page.shift(),
            page_bytes: page.bytes(),
            pte_bytes: cfg.pte_bytes as u64,
            nbuckets,
            pow2_mask: if nbuckets.is_power_of_two() { nbuckets - 1 } else { 0 },
            hash: cfg.hash,
            heads: vec![NIL; nbuckets as usize],
            nodes: Vec::new(),
            words: Vec::new(),
            free: Vec::new(),
            slabs: Vec::new(),
            live: 0,
            bytes: 0,
            bucket_base,
            lines,
        }
    }

    /// log2 base pages per key region (the subblock factor of a clustered table).
    pub(crate) fn kshift(&self) -> u32 {
        self.kshift
    }

    /// Number of buckets.
    pub(crate) fn buckets(&self) -> u64 {
        self.nbuckets
    }

    /// Bytes of a node of `2^wshift` mapping words.
    #[inline(always)]
    fn node_bytes(&self, wshift: u32) -> u64 {
        2 * WORD + (self.pte_bytes << wshift)
    }

    /// Bucket of (`asid`, `key`).
    #[inline(always)]
    fn bucket(&self, asid: Asid, key: u64) -> usize {
        match self.hash {
            HashFn::Xor => {
                let h = key ^ scramble(asid.0);
                if self.pow2_mask != 0 || self.nbuckets == 1 {
                    (h & self.pow2_mask) as usize
                } else {
                    (h % self.nbuckets) as usize
                }
            }
            HashFn::Mult => {
                let h = (key ^ scramble(asid.0).rotate_left(29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                ((h as u128 * self.nbuckets as u128) >> 64) as usize
            }
        }
    }

    /// The first node on `vpn`'s chain that translates it, without accounting.
    #[inline]
    pub(crate) fn find(&self, asid: Asid, vpn: Vpn) -> Option<(Found, Pte)> {
        let b = self.bucket(asid, vpn.0 >> self.kshift);
        let mut i = self.heads[b];
        while i != NIL {
            let n = &self.nodes[i as usize];
            let rel = vpn.0.wrapping_sub(n.start);
            if n.asid == asid.0 && rel >> n.span == 0 {
                let w = (rel >> n.unit) as usize;
                if let Some(p) = self.words[n.first as usize + w].translate(vpn.0, self.base_shift) {
                    return Some((Found { bucket: b, node: i, word: w }, p));
                }
            }
            i = n.next;
        }
        None
    }

    /// The mapping of `vpn`, without accounting.
    pub(crate) fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.find(asid, vpn).map(|(_, p)| p)
    }

    /// The node of shape (`start`, `span`, `unit`) of `asid`, if present.
    fn node_at(&self, asid: Asid, start: u64, span: u32, unit: u32) -> Option<(usize, u32)> {
        let b = self.bucket(asid, start >> self.kshift);
        let mut i = self.heads[b];
        while i != NIL {
            let n = &self.nodes[i as usize];
            if n.asid == asid.0 && n.start == start && n.span as u32 == span && n.unit as u32 == unit {
                return Some((b, i));
            }
            i = n.next;
        }
        None
    }

    /// Stores `word` as word `(vpn - start) >> unit` of the node of shape (`start`, `span`,
    /// `unit`) of `asid`, creating the node (at the head of its chain) if needed and replacing
    /// what that word held.
    pub(crate) fn put(&mut self, asid: Asid, vpn: Vpn, span: u32, unit: u32, word: Word, mem: &mut PtMem) {
        debug_assert!(unit <= span && span <= self.kshift);
        let start = vpn.0 & !((1u64 << span) - 1);
        let i = match self.node_at(asid, start, span, unit) {
            Some((_, i)) => i,
            None => self.new_node(asid, start, span, unit, mem),
        };
        let n = self.nodes[i as usize];
        let at = n.first as usize + ((vpn.0 - start) >> unit) as usize;
        if self.words[at].slot == PteSlot::EMPTY {
            self.nodes[i as usize].count += 1;
        }
        self.words[at] = word;
    }

    fn new_node(&mut self, asid: Asid, start: u64, span: u32, unit: u32, mem: &mut PtMem) -> u32 {
        let wshift = span - unit;
        let class = wshift as usize;
        if self.free.len() <= class {
            self.free.resize(class + 1, Vec::new());
            self.slabs.resize(class + 1, None);
        }
        let i = match self.free[class].pop() {
            Some(i) => i,
            None => {
                let i = self.nodes.len() as u32;
                assert!(i != NIL, "page table: too many PTEs");
                let bytes = self.node_bytes(wshift);
                let page = self.page_bytes;
                let addr = self.slabs[class].get_or_insert_with(|| Slab::new(bytes, page)).alloc(mem);
                let first = self.words.len();
                assert!(first + (1 << wshift) < NIL as usize, "page table: too many PTEs");
                self.words.resize(first + (1 << wshift), Word::default());
                self.nodes.push(Node {
                    key: 0,
                    start: 0,
                    asid: 0,
                    next: NIL,
                    span: 0,
                    unit: 0,
                    count: 0,
                    first: first as u32,
                    addr,
                });
                i
            }
        };
        let key = start >> self.kshift;
        let b = self.bucket(asid, key);
        let head = self.heads[b];
        let n = &mut self.nodes[i as usize];
        n.key = key;
        n.start = start;
        n.asid = asid.0;
        n.next = head;
        n.span = span as u8;
        n.unit = unit as u8;
        n.count = 0;
        self.heads[b] = i;
        self.live += 1;
        self.bytes += self.node_bytes(wshift);
        i
    }

    /// Clears the word `f` found and frees its node when it was the last one valid.
    fn clear(&mut self, f: Found) {
        let n = self.nodes[f.node as usize];
        self.words[n.first as usize + f.word] = Word::default();
        self.nodes[f.node as usize].count -= 1;
        if n.count == 1 {
            self.unlink(f.bucket, f.node);
        }
    }

    /// Removes the whole mapping containing `vpn` (every copy of a mapping replicated over
    /// several nodes) and returns it as the PTE of `vpn`.
    pub(crate) fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        let (f, pte) = self.find(asid, vpn)?;
        let n = self.nodes[f.node as usize];
        let word = self.words[n.first as usize + f.word];
        let pages = word.pages_log2(self.base_shift);
        if pages <= n.unit as u32 {
            self.clear(f);
        } else {
            // Replicated once per node: clear the copy in every node of the same shape.
            let mstart = vpn.0 & !((1u64 << pages) - 1);
            for k in 0..1u64 << (pages - n.span as u32) {
                let start = mstart + (k << n.span);
                if let Some((b, i)) = self.node_at(asid, start, n.span as u32, n.unit as u32) {
                    let first = self.nodes[i as usize].first as usize;
                    for w in 0..1usize << self.nodes[i as usize].wshift() {
                        if self.words[first + w] == word {
                            self.clear(Found { bucket: b, node: i, word: w });
                            break;
                        }
                    }
                }
            }
        }
        Some(pte)
    }

    /// Removes node `i` from the chain of bucket `b` and frees it (its words already empty).
    fn unlink(&mut self, b: usize, i: u32) {
        let next = self.nodes[i as usize].next;
        if self.heads[b] == i {
            self.heads[b] = next;
        } else {
            let mut p = self.heads[b];
            while self.nodes[p as usize].next != i {
                p = self.nodes[p as usize].next;
            }
            self.nodes[p as usize].next = next;
        }
        self.release(i);
    }

    fn release(&mut self, i: u32) {
        let n = &mut self.nodes[i as usize];
        n.next = NIL;
        n.count = 0;
        let wshift = n.wshift();
        let at = n.first as usize;
        self.words[at..at + (1 << wshift)].fill(Word::default());
        self.free[wshift as usize].push(i);
        self.live -= 1;
        self.bytes -= self.node_bytes(wshift);
    }

    pub(crate) fn remove_asid(&mut self, asid: Asid) {
        for b in 0..self.heads.len() {
            let mut prev = NIL;
            let mut i = self.heads[b];
            while i != NIL {
                let next = self.nodes[i as usize].next;
                if self.nodes[i as usize].asid == asid.0 {
                    if prev == NIL {
                        self.heads[b] = next;
                    } else {
                        self.nodes[prev as usize].next = next;
                    }
                    self.release(i);
                } else {
                    prev = i;
                }
                i = next;
            }
        }
    }

    /// Walks `vpn`'s chain as a miss handler would: reads the bucket's head pointer, then for each
    /// node probed its tag and either its next pointer (no match) or, on a match, the mapping
    /// word of `vpn`; a match whose word does not map `vpn` goes on down the chain (its next
    /// pointer shares the tag's line). References and lines go to `lines`.
    #[inline]
    pub(crate) fn walk(&self, asid: Asid, vpn: Vpn, rec: &mut WalkRecord, lines: &mut LineTracker) -> Option<Pte> {
        let b = self.bucket(asid, vpn.0 >> self.kshift);
        lines.read_aux(rec, self.bucket_base + b as u64 * BUCKET_BYTES, BUCKET_BYTES);
        let mut i = self.heads[b];
        if i == NIL {
            lines.empty_chain();
        }
        while i != NIL {
            let n = &self.nodes[i as usize];
            let rel = vpn.0.wrapping_sub(n.start);
            if n.asid == asid.0 && rel >> n.span == 0 {
                let w = rel >> n.unit;
                lines.read(rec, n.addr, 0, WORD);
                lines.read(rec, n.addr, 2 * WORD + w * self.pte_bytes, self.pte_bytes);
                if let Some(p) = self.words[n.first as usize + w as usize].translate(vpn.0, self.base_shift) {
                    return Some(p);
                }
                // On down the chain: the next pointer (in the tag's line under `paper` lines).
                lines.read(rec, n.addr, WORD, WORD);
            } else {
                lines.read(rec, n.addr, 0, 2 * WORD);
            }
            i = n.next;
        }
        None
    }

    /// A one-table walk with its own line tracker.
    #[inline]
    pub(crate) fn walk_alone(&self, asid: Asid, vpn: Vpn, rec: &mut WalkRecord) -> Option<Pte> {
        let mut lines = self.lines.tracker(rec);
        let r = self.walk(asid, vpn, rec, &mut lines);
        lines.finish(rec);
        r
    }

    /// Subblock prefetch (talluri95 §4.4) in a table whose nodes each cover the whole key region
    /// (clustered): `out` has `2^kshift` entries. One chain walk reads, in each node of the block,
    /// its tag and all its mapping words, and stops once every page of the block is resolved (or
    /// at the end of the chain). Returns the mapping of `vpn`.
    pub(crate) fn walk_block(
        &self,
        asid: Asid,
        vpn: Vpn,
        rec: &mut WalkRecord,
        out: &mut [Option<Pte>],
    ) -> Option<Pte> {
        debug_assert_eq!(out.len() as u64, 1u64 << self.kshift);
        let key = vpn.0 >> self.kshift;
        let first = key << self.kshift;
        out.fill(None);
        let mut remaining = out.len();
        let mut lines = self.lines.tracker(rec);
        let b = self.bucket(asid, key);
        lines.read_aux(rec, self.bucket_base + b as u64 * BUCKET_BYTES, BUCKET_BYTES);
        let mut i = self.heads[b];
        if i == NIL {
            lines.empty_chain();
        }
        while i != NIL && remaining > 0 {
            let n = &self.nodes[i as usize];
            if n.asid == asid.0 && n.key == key {
                let nw = 1u64 << n.wshift();
                lines.read(rec, n.addr, 0, WORD);
                lines.read(rec, n.addr, 2 * WORD, nw * self.pte_bytes);
                let base = (n.start - first) as usize;
                for (k, o) in out[base..base + (1usize << n.span)].iter_mut().enumerate() {
                    if o.is_none() {
                        let w = self.words[n.first as usize + (k >> n.unit)];
                        *o = w.translate(n.start + k as u64, self.base_shift);
                        remaining -= o.is_some() as usize;
                    }
                }
                if remaining > 0 {
                    lines.read(rec, n.addr, WORD, WORD);
                }
            } else {
                lines.read(rec, n.addr, 0, 2 * WORD);
            }
            i = n.next;
        }
        lines.finish(rec);
        out[(vpn.0 - first) as usize]
    }

    /// Table 2 size: the bytes of the nodes in use, bucket heads separately.
    pub(crate) fn size(&self) -> PtSize {
        PtSize { table_bytes: self.bytes, bucket_bytes: self.nbuckets * BUCKET_BYTES, objects: self.live }
    }
}
