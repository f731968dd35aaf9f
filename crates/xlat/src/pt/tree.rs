//! The n-ary tree under forward-mapped (radix) and multi-level linear tables.
//!
//! Both are trees of nodes indexed by fixed VPN fields (talluri95 §2: they differ in the order a
//! walk visits the levels and in how the walk reaches a node, not in what is stored). Nodes live in
//! one arena per level, addressed by `u32` indices; each node has a physical address in
//! page-table memory, kept by its slot when the node is freed and reused. A node exists exactly
//! while it covers at least one valid mapping, so the nodes of level `k` are talluri95's
//! `Nactive(pb_k)` (Table 2).
//!
//! Superpage and partial-subblock PTEs (talluri95 §4.2, §4.3) are stored in one of two ways:
//! - replicated: the PTE is written at the leaf site of every base page it covers (a
//!   partial-subblock PTE at all its block's sites, flagged, its valid vector kept in a side map
//!   keyed by (ASID, block) and read only for flagged sites); each site holds the frame of its own
//!   base page;
//! - in an upper-level entry (`intermediate` store): a superpage covering exactly what one entry of
//!   level `k ≥ 1` covers is stored in that entry, tagged by [`SUPER`] in the child index array,
//!   and no node exists below it.

use super::common::{AsidMap, IntHasher, LineTracker, PtMem, PteSlot, NIL};
use super::{Pte, WalkRecord};
use crate::addr::{Asid, Pfn, Vpn};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;

/// Tag of a child entry that holds a superpage PTE rather than a node: `SUPER | index` into the
/// tree's superpage slots. [`NIL`] also has this bit set, so test `>= SUPER` then `!= NIL`.
pub(crate) const SUPER: u32 = 1 << 31;

/// True if child entry `c` holds a superpage.
#[inline(always)]
pub(crate) fn is_super(c: u32) -> bool {
    c >= SUPER && c != NIL
}

/// Most levels a tree may have.
pub(crate) const MAX_LEVELS: usize = 16;

/// One level's arena.
#[derive(Clone, Debug)]
pub(crate) struct Level {
    /// log2 of the entries per node.
    pub(crate) bits: u32,
    /// VPN bits below this level's index field.
    pub(crate) shift: u32,
    /// Entries per node.
    pub(crate) fanout: usize,
    /// `(1 << bits) - 1`.
    pub(crate) mask: u64,
    /// Child node indices (non-leaf levels): `node * fanout + index`.
    pub(crate) children: Vec<u32>,
    /// PTEs (leaf level): `node * fanout + index`.
    pub(crate) slots: Vec<PteSlot>,
    /// Valid entries per node.
    count: Vec<u32>,
    /// Physical address of each node.
    pub(crate) phys: Vec<u64>,
    /// Freed node slots.
    free: Vec<u32>,
    /// Bytes allocated for a node in page-table memory, and its alignment.
    alloc_bytes: u64,
    /// Nodes in use.
    pub(crate) live: u64,
}

/// The nodes on the path to a VPN and where it ends.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Path {
    /// `nodes[k]`: node at level `k` ([`NIL`] from the first missing one down, and below a
    /// superpage entry).
    pub(crate) nodes: [u32; MAX_LEVELS],
    /// Level whose entry on the path holds a superpage, 0 if none.
    pub(crate) sp: usize,
    /// That entry (a [`SUPER`]-tagged value) when `sp != 0`.
    pub(crate) sp_entry: u32,
}

/// The tree of every process: one root per ASID.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    /// Levels, leaf first.
    pub(crate) levels: Vec<Level>,
    /// Bytes per entry.
    pub(crate) pte_bytes: u64,
    /// VPN bits covered by the whole tree.
    pub(crate) total_bits: u32,
    /// log2 of the base page size in bytes.
    base_shift: u32,
    /// Store superpages that fill one upper-level entry in that entry.
    intermediate: bool,
    roots: AsidMap,
    mem: PtMem,
    /// Superpages held in upper-level entries: first frame and size.
    big: Vec<PteSlot>,
    big_free: Vec<u32>,
    /// Valid vectors of partial-subblock PTEs, by (ASID, first VPN of the block).
    partials: HashMap<(u32, u64), u64, BuildHasherDefault<IntHasher>>,
}

impl Tree {
    /// A tree with `bits[k]` index bits at level `k` (leaf first) and nodes of `alloc_bytes[k]`
    /// bytes of page-table memory (aligned to their size, at most to 4 KB), for base pages of
    /// `2^base_shift` bytes. `intermediate`: superpages that fill one entry of an upper level are
    /// stored in that entry (otherwise every superpage is replicated).
    pub(crate) fn new(bits: &[u32], pte_bytes: u64, alloc_bytes: &[u64], base_shift: u32, intermediate: bool) -> Tree {
        assert!(!bits.is_empty() && bits.len() <= MAX_LEVELS);
        let mut shift = 0;
        let levels = bits
            .iter()
            .zip(alloc_bytes)
            .map(|(&b, &bytes)| {
                let l = Level {
                    bits: b,
                    shift,
                    fanout: 1 << b,
                    mask: (1u64 << b) - 1,
                    children: Vec::new(),
                    slots: Vec::new(),
                    count: Vec::new(),
                    phys: Vec::new(),
                    free: Vec::new(),
                    alloc_bytes: bytes,
                    live: 0,
                };
                shift += b;
                l
            })
            .collect();
        Tree {
            levels,
            pte_bytes,
            total_bits: shift,
            base_shift,
            intermediate,
            roots: AsidMap::default(),
            mem: PtMem::new(),
            big: Vec::new(),
            big_free: Vec::new(),
            partials: HashMap::default(),
        }
    }

    /// Index of the top level.
    #[inline(always)]
    pub(crate) fn top(&self) -> usize {
        self.levels.len() - 1
    }

    /// True if `vpn` lies inside the space the tree covers.
    #[inline(always)]
    pub(crate) fn in_range(&self, vpn: Vpn) -> bool {
        self.total_bits >= 64 || vpn.0 >> self.total_bits == 0
    }

    /// Root node of `asid`, or [`NIL`].
    #[inline(always)]
    pub(crate) fn root(&self, asid: Asid) -> u32 {
        self.roots.get(asid.0)
    }

    /// Index of `vpn` in a node of level `k`.
    #[inline(always)]
    pub(crate) fn index(&self, k: usize, vpn: Vpn) -> usize {
        let l = &self.levels[k];
        ((vpn.0 >> l.shift) & l.mask) as usize
    }

    /// Child of entry `idx` of node `node` at non-leaf level `k`: a node, [`NIL`], or a
    /// [`SUPER`]-tagged superpage entry.
    #[inline(always)]
    pub(crate) fn child(&self, k: usize, node: u32, idx: usize) -> u32 {
        let l = &self.levels[k];
        l.children[node as usize * l.fanout + idx]
    }

    /// PTE of entry `idx` of leaf node `node`.
    #[inline(always)]
    pub(crate) fn leaf(&self, node: u32, idx: usize) -> PteSlot {
        let l = &self.levels[0];
        l.slots[node as usize * l.fanout + idx]
    }

    /// Physical address of entry `idx` of node `node` at level `k`.
    #[inline(always)]
    pub(crate) fn entry_addr(&self, k: usize, node: u32, idx: usize) -> u64 {
        self.levels[k].phys[node as usize] + idx as u64 * self.pte_bytes
    }

    /// Subblock prefetch from leaf node `leaf`: one read of the `out.len()` consecutive PTEs of the
    /// block starting at `first` (charged for the lines of those bytes), and each page's mapping.
    pub(crate) fn read_block(
        &self,
        rec: &mut WalkRecord,
        lines: &mut LineTracker,
        asid: Asid,
        leaf: u32,
        first: Vpn,
        out: &mut [Option<Pte>],
    ) {
        let idx = self.index(0, first);
        let pte = self.pte_bytes;
        lines.read(rec, self.levels[0].phys[leaf as usize], idx as u64 * pte, out.len() as u64 * pte);
        for (i, o) in out.iter_mut().enumerate() {
            *o = self.leaf_pte(asid, Vpn(first.0 + i as u64), self.leaf(leaf, idx + i));
        }
    }

    /// The mapping of `vpn` held by leaf site `slot` (looked up at `vpn`): the slot itself for a
    /// base page or replicated superpage, the block's valid vector for a partial-subblock PTE
    /// (`None` if `vpn`'s bit is clear).
    #[inline(always)]
    pub(crate) fn leaf_pte(&self, asid: Asid, vpn: Vpn, slot: PteSlot) -> Option<Pte> {
        if !slot.is_partial() {
            return slot.get();
        }
        self.partial_pte(asid, vpn, slot)
    }

    #[cold]
    fn partial_pte(&self, asid: Asid, vpn: Vpn, slot: PteSlot) -> Option<Pte> {
        let p = slot.get()?;
        let log2 = p.size.shift() - self.base_shift;
        let block = vpn.0 >> log2 << log2;
        let valid = self.partials.get(&(asid.0, block)).copied().unwrap_or(0);
        if valid >> (vpn.0 - block) & 1 == 0 {
            return None;
        }
        Some(Pte { valid, ..p })
    }

    /// The superpage PTE of [`SUPER`]-tagged entry `entry`, with the frame of `vpn`.
    #[inline]
    pub(crate) fn super_pte(&self, entry: u32, vpn: Vpn) -> Pte {
        let p = self.big[(entry & !SUPER) as usize].get().expect("page table: empty superpage entry");
        let mask = (1u64 << (p.size.shift() - self.base_shift)) - 1;
        Pte { pfn: Pfn(p.pfn.0 + (vpn.0 & mask)), ..p }
    }

    /// The nodes on the path to `vpn`. Host-side only: no accounting.
    #[inline]
    pub(crate) fn path(&self, asid: Asid, vpn: Vpn) -> Path {
        let mut path = Path { nodes: [NIL; MAX_LEVELS], sp: 0, sp_entry: NIL };
        let mut node = self.root(asid);
        let mut k = self.top();
        loop {
            path.nodes[k] = node;
            if node == NIL || k == 0 {
                return path;
            }
            let c = self.child(k, node, self.index(k, vpn));
            if is_super(c) {
                path.sp = k;
                path.sp_entry = c;
                return path;
            }
            node = c;
            k -= 1;
        }
    }

    /// The mapping of `vpn`, without accounting.
    pub(crate) fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        if !self.in_range(vpn) {
            return None;
        }
        let p = self.path(asid, vpn);
        if p.sp != 0 {
            return Some(self.super_pte(p.sp_entry, vpn));
        }
        let leaf = p.nodes[0];
        if leaf == NIL {
            return None;
        }
        self.leaf_pte(asid, vpn, self.leaf(leaf, self.index(0, vpn)))
    }

    fn alloc_node(&mut self, k: usize) -> u32 {
        let l = &mut self.levels[k];
        l.live += 1;
        if let Some(n) = l.free.pop() {
            return n;
        }
        let n = l.phys.len() as u32;
        assert!(n < SUPER, "page table: too many nodes");
        let align = l.alloc_bytes.next_power_of_two().clamp(8, 4096);
        l.phys.push(self.mem.alloc(l.alloc_bytes, align));
        l.count.push(0);
        if k == 0 {
            l.slots.resize(l.slots.len() + l.fanout, PteSlot::EMPTY);
        } else {
            l.children.resize(l.children.len() + l.fanout, NIL);
        }
        n
    }

    fn free_node(&mut self, k: usize, n: u32) {
        let l = &mut self.levels[k];
        debug_assert_eq!(l.count[n as usize], 0);
        l.live -= 1;
        l.free.push(n);
    }

    /// The node at level `level` on the path to `vpn`, allocating the missing ones. Panics if the
    /// path runs into a superpage entry above that level (the caller unmaps overlaps first).
    fn ensure_node(&mut self, asid: Asid, vpn: Vpn, level: usize) -> u32 {
        let top = self.top();
        let mut node = self.root(asid);
        if node == NIL {
            node = self.alloc_node(top);
            self.roots.set(asid.0, node);
        }
        for k in (level + 1..=top).rev() {
            let idx = self.index(k, vpn);
            let at = node as usize * self.levels[k].fanout + idx;
            let mut child = self.levels[k].children[at];
            if child == NIL {
                child = self.alloc_node(k - 1);
                let l = &mut self.levels[k];
                l.children[at] = child;
                l.count[node as usize] += 1;
            } else if is_super(child) {
                panic!("page table: vpn {:#x} lies inside a mapped superpage; unmap it first", vpn.0);
            }
            node = child;
        }
        node
    }

    /// log2 of the base pages `pte` covers.
    fn pages_log2(&self, pte: &Pte) -> u32 {
        let s = pte.size.shift();
        assert!(s >= self.base_shift, "page table: a {} PTE is smaller than the base page", pte.size);
        s - self.base_shift
    }

    /// Installs the mapping described by `pte` that contains `vpn` (base page, superpage or
    /// partial-subblock PTE; see [`super::PageTable::map`]), allocating the nodes it needs.
    pub(crate) fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        assert!(
            self.in_range(vpn),
            "page table: vpn {:#x} lies outside the {}-bit virtual page space the table covers (page_table.va_bits)",
            vpn.0,
            self.total_bits
        );
        let log2 = self.pages_log2(&pte);
        assert!(
            log2 <= self.total_bits && (!pte.is_partial() || log2 <= 6),
            "page table: a {} PTE does not fit the table",
            pte.size
        );
        let off = vpn.0 & ((1u64 << log2) - 1);
        let first_pfn = pte.pfn.0.checked_sub(off).expect("page table: superpage frame is not aligned");
        if !pte.is_partial() && self.intermediate && log2 > 0 {
            if let Some(k) = (1..self.levels.len()).find(|&k| self.levels[k].shift == log2) {
                self.map_entry(asid, vpn, k, Pte { pfn: Pfn(first_pfn), ..pte });
                return;
            }
        }
        if log2 == 0 {
            let node = self.ensure_node(asid, vpn, 0);
            self.set_sites(asid, node, vpn, 1, PteSlot::new(pte), None);
            return;
        }
        // Replicated at every site covered.
        let first = vpn.0 - off;
        let n = 1u64 << log2;
        let key = if pte.is_partial() {
            self.partials.insert((asid.0, first), pte.valid);
            Some((asid.0, first))
        } else {
            None
        };
        let fanout = self.levels[0].fanout as u64;
        let mut at = first;
        while at < first + n {
            let chunk = n.min(fanout);
            let node = self.ensure_node(asid, Vpn(at), 0);
            for i in 0..chunk {
                let site = Pte { pfn: Pfn(first_pfn + (at - first) + i), size: pte.size, valid: 0 };
                let slot = if key.is_some() { PteSlot::partial(site) } else { PteSlot::new(site) };
                self.set_sites(asid, node, Vpn(at + i), 1, slot, key);
            }
            at += chunk;
        }
    }

    /// Writes `slot` at the `n` sites of leaf `node` from `vpn` on, counting new valid entries and
    /// dropping the valid vector of a partial-subblock PTE being overwritten (unless it is `keep`).
    #[inline]
    fn set_sites(&mut self, asid: Asid, node: u32, vpn: Vpn, n: u64, slot: PteSlot, keep: Option<(u32, u64)>) {
        let idx = self.index(0, vpn);
        for i in 0..n as usize {
            let l = &mut self.levels[0];
            let at = node as usize * l.fanout + idx + i;
            let old = l.slots[at];
            l.slots[at] = slot;
            if !old.is_valid() {
                l.count[node as usize] += 1;
            } else if old.is_partial() {
                let log2 = old.get().map_or(0, |p| p.size.shift() - self.base_shift);
                let v = vpn.0 + i as u64;
                let k = (asid.0, v >> log2 << log2);
                if keep != Some(k) {
                    self.partials.remove(&k);
                }
            }
        }
    }

    /// Stores superpage `pte` (frame: its first) in the entry of level `k` on the path to `vpn`.
    fn map_entry(&mut self, asid: Asid, vpn: Vpn, k: usize, pte: Pte) {
        let node = self.ensure_node(asid, vpn, k);
        let idx = self.index(k, vpn);
        let at = node as usize * self.levels[k].fanout + idx;
        let old = self.levels[k].children[at];
        let i = if old == NIL {
            self.levels[k].count[node as usize] += 1;
            match self.big_free.pop() {
                Some(i) => i,
                None => {
                    self.big.push(PteSlot::EMPTY);
                    assert!(self.big.len() < SUPER as usize, "page table: too many superpages");
                    self.big.len() as u32 - 1
                }
            }
        } else if is_super(old) {
            old & !SUPER
        } else {
            panic!(
                "page table: the {} superpage at vpn {:#x} overlaps mapped pages; unmap them first",
                pte.size, vpn.0
            );
        };
        self.big[i as usize] = PteSlot::new(pte);
        self.levels[k].children[at] = SUPER | i;
    }

    /// Removes the whole mapping containing `vpn`, freeing the nodes left empty (calling
    /// `freed(level, node)` for each); returns the mapping removed, with the frame of `vpn`. A page
    /// whose bit is clear in a partial-subblock PTE is not mapped: nothing is removed.
    pub(crate) fn unmap(&mut self, asid: Asid, vpn: Vpn, mut freed: impl FnMut(usize, u32)) -> Option<Pte> {
        if !self.in_range(vpn) {
            return None;
        }
        let path = self.path(asid, vpn);
        if path.sp != 0 {
            let pte = self.super_pte(path.sp_entry, vpn);
            let k = path.sp;
            let node = path.nodes[k];
            let idx = self.index(k, vpn);
            let l = &mut self.levels[k];
            l.children[node as usize * l.fanout + idx] = NIL;
            l.count[node as usize] -= 1;
            let i = path.sp_entry & !SUPER;
            self.big[i as usize] = PteSlot::EMPTY;
            self.big_free.push(i);
            self.prune(asid, vpn, &path.nodes, k, &mut freed);
            return Some(pte);
        }
        let leaf = path.nodes[0];
        if leaf == NIL {
            return None;
        }
        let slot = self.leaf(leaf, self.index(0, vpn));
        let pte = self.leaf_pte(asid, vpn, slot)?;
        let log2 = pte.size.shift() - self.base_shift;
        let first = vpn.0 >> log2 << log2;
        if slot.is_partial() {
            self.partials.remove(&(asid.0, first));
        }
        let fanout = self.levels[0].fanout as u64;
        let n = 1u64 << log2;
        let mut at = first;
        while at < first + n {
            let chunk = n.min(fanout);
            let p = if at == first { path } else { self.path(asid, Vpn(at)) };
            let leaf = p.nodes[0];
            if leaf != NIL {
                let idx = self.index(0, Vpn(at));
                let l = &mut self.levels[0];
                for i in 0..chunk as usize {
                    let s = &mut l.slots[leaf as usize * l.fanout + idx + i];
                    if s.is_valid() {
                        *s = PteSlot::EMPTY;
                        l.count[leaf as usize] -= 1;
                    }
                }
                self.prune(asid, Vpn(at), &p.nodes, 0, &mut freed);
            }
            at += chunk;
        }
        Some(pte)
    }

    /// Frees the empty nodes on `path` from level `k` up, clearing their parents' entries.
    fn prune(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        path: &[u32; MAX_LEVELS],
        mut k: usize,
        freed: &mut impl FnMut(usize, u32),
    ) {
        let top = self.top();
        while self.levels[k].count[path[k] as usize] == 0 {
            self.free_node(k, path[k]);
            freed(k, path[k]);
            if k == top {
                self.roots.set(asid.0, NIL);
                break;
            }
            let parent = path[k + 1];
            let pidx = self.index(k + 1, vpn);
            let l = &mut self.levels[k + 1];
            l.children[parent as usize * l.fanout + pidx] = NIL;
            l.count[parent as usize] -= 1;
            k += 1;
        }
    }

    /// Frees every node of `asid`.
    pub(crate) fn remove_asid(&mut self, asid: Asid) {
        let root = self.root(asid);
        if root != NIL {
            self.free_subtree(self.top(), root);
            self.roots.set(asid.0, NIL);
        }
        if !self.partials.is_empty() {
            self.partials.retain(|k, _| k.0 != asid.0);
        }
    }

    fn free_subtree(&mut self, k: usize, node: u32) {
        let fanout = self.levels[k].fanout;
        let base = node as usize * fanout;
        if k == 0 {
            self.levels[0].slots[base..base + fanout].fill(PteSlot::EMPTY);
        } else {
            for i in 0..fanout {
                let c = self.levels[k].children[base + i];
                if is_super(c) {
                    self.big[(c & !SUPER) as usize] = PteSlot::EMPTY;
                    self.big_free.push(c & !SUPER);
                    self.levels[k].children[base + i] = NIL;
                } else if c != NIL {
                    self.free_subtree(k - 1, c);
                    self.levels[k].children[base + i] = NIL;
                }
            }
        }
        self.levels[k].count[node as usize] = 0;
        self.free_node(k, node);
    }
}
