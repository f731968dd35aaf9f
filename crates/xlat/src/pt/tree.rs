//! The n-ary tree under forward-mapped (radix) and multi-level linear tables.
//!
//! Both are trees of nodes indexed by fixed VPN fields (talluri95 §2: they differ in the order a
//! walk visits the levels and in how the walk reaches a node, not in what is stored). Nodes live in
//! one arena per level, addressed by `u32` indices; each node has a physical address in
//! page-table memory, kept by its slot when the node is freed and reused. A node exists exactly
//! while it covers at least one valid mapping, so the nodes of level `k` are talluri95's
//! `Nactive(pb_k)` (Table 2).

use super::common::{AsidMap, PtMem, PteSlot, NIL};
use super::Pte;
use crate::addr::{Asid, Vpn};

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

/// The tree of every process: one root per ASID.
#[derive(Clone, Debug)]
pub(crate) struct Tree {
    /// Levels, leaf first.
    pub(crate) levels: Vec<Level>,
    /// Bytes per entry.
    pub(crate) pte_bytes: u64,
    /// VPN bits covered by the whole tree.
    pub(crate) total_bits: u32,
    roots: AsidMap,
    mem: PtMem,
}

impl Tree {
    /// A tree with `bits[k]` index bits at level `k` (leaf first) and nodes of `alloc_bytes[k]`
    /// bytes of page-table memory (aligned to their size, at most to 4 KB).
    pub(crate) fn new(bits: &[u32], pte_bytes: u64, alloc_bytes: &[u64]) -> Tree {
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
        Tree { levels, pte_bytes, total_bits: shift, roots: AsidMap::default(), mem: PtMem::new() }
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

    /// Child of entry `idx` of node `node` at non-leaf level `k`, or [`NIL`].
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

    /// The nodes on the path to `vpn`, `path[k]` at level `k` ([`NIL`] from the first missing one
    /// down). Host-side only: no accounting.
    #[inline]
    pub(crate) fn path(&self, asid: Asid, vpn: Vpn) -> [u32; MAX_LEVELS] {
        let mut path = [NIL; MAX_LEVELS];
        let mut node = self.root(asid);
        let mut k = self.top();
        loop {
            path[k] = node;
            if node == NIL || k == 0 {
                return path;
            }
            node = self.child(k, node, self.index(k, vpn));
            k -= 1;
        }
    }

    /// The mapping of `vpn`, without accounting.
    pub(crate) fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        if !self.in_range(vpn) {
            return None;
        }
        let leaf = self.path(asid, vpn)[0];
        if leaf == NIL {
            return None;
        }
        self.leaf(leaf, self.index(0, vpn)).get()
    }

    fn alloc_node(&mut self, k: usize) -> u32 {
        let l = &mut self.levels[k];
        l.live += 1;
        if let Some(n) = l.free.pop() {
            return n;
        }
        let n = l.phys.len() as u32;
        assert!(n != NIL, "page table: too many nodes");
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

    /// Maps `vpn`, allocating the nodes on its path; returns the previous mapping.
    pub(crate) fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) -> Option<Pte> {
        assert!(
            self.in_range(vpn),
            "page table: vpn {:#x} lies outside the {}-bit virtual page space the table covers (page_table.va_bits)",
            vpn.0,
            self.total_bits
        );
        let slot = PteSlot::new(pte);
        let top = self.top();
        let mut node = self.root(asid);
        if node == NIL {
            node = self.alloc_node(top);
            self.roots.set(asid.0, node);
        }
        for k in (1..=top).rev() {
            let idx = self.index(k, vpn);
            let at = node as usize * self.levels[k].fanout + idx;
            let mut child = self.levels[k].children[at];
            if child == NIL {
                child = self.alloc_node(k - 1);
                let l = &mut self.levels[k];
                l.children[at] = child;
                l.count[node as usize] += 1;
            }
            node = child;
        }
        let idx = self.index(0, vpn);
        let l = &mut self.levels[0];
        let at = node as usize * l.fanout + idx;
        let old = l.slots[at];
        if !old.is_valid() {
            l.count[node as usize] += 1;
        }
        l.slots[at] = slot;
        old.get()
    }

    /// Unmaps `vpn`, freeing the nodes left empty (calling `freed(level, node)` for each);
    /// returns the mapping removed.
    pub(crate) fn unmap(&mut self, asid: Asid, vpn: Vpn, mut freed: impl FnMut(usize, u32)) -> Option<Pte> {
        if !self.in_range(vpn) {
            return None;
        }
        let path = self.path(asid, vpn);
        let leaf = path[0];
        if leaf == NIL {
            return None;
        }
        let idx = self.index(0, vpn);
        let l = &mut self.levels[0];
        let at = leaf as usize * l.fanout + idx;
        let old = l.slots[at];
        if !old.is_valid() {
            return None;
        }
        l.slots[at] = PteSlot::EMPTY;
        l.count[leaf as usize] -= 1;
        let top = self.top();
        let mut k = 0;
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
        old.get()
    }

    /// Frees every node of `asid`.
    pub(crate) fn remove_asid(&mut self, asid: Asid) {
        let root = self.root(asid);
        if root != NIL {
            self.free_subtree(self.top(), root);
            self.roots.set(asid.0, NIL);
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
                if c != NIL {
                    self.free_subtree(k - 1, c);
                    self.levels[k].children[base + i] = NIL;
                }
            }
        }
        self.levels[k].count[node as usize] = 0;
        self.free_node(k, node);
    }
}
