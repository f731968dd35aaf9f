//! Multi-level linear page tables in virtual memory (MIPS / Alpha / VAX style).
//!
//! talluri95 §2 (Figure 2): the level-1 table is a virtual array of PTEs indexed by the VPN, the
//! PTE of `vpn` living at virtual address `base_1 + vpn × pte_bytes` in a region reserved in every
//! address space. Reading it needs the translation of that page of PTEs: the TLB entries reserved
//! for page-table pages usually hold it ([`WalkEnv::lookup_pt_translation`]), and then a miss
//! costs one reference. Otherwise it is a nested miss: the level-2 PTE mapping that page is read
//! the same way from the level-2 array, and so on up to the root, which is wired in physical
//! memory. After a nested miss resolves, each page-table page translation found on the way down is
//! installed ([`WalkEnv::fill_pt_translation`]). Cost per miss in Table 2: `1 + r × m`. That is
//! `page_table.nested_fill = "every_level"`; the default, `leaf`, is Linux/ia64's VHPT miss
//! handler (chapman03 §2.3.3, §3.1): only the leaf page of PTEs is mapped through the TLB, so a
//! miss on its translation is one nested miss that reads every upper level with physical
//! addresses (the same references and lines as a climb to the root, no TLB lookups for them)
//! and inserts the leaf page's translation alone.
//!
//! Every node is one page of PTEs (`log2(page / pte_bytes)` index bits, 9 for 4 KB pages and
//! 8-byte PTEs); the default number of levels is the smallest whose root covers all of `va_bits`:
//! 4 for 48 bits, 6 for 64 bits (five 9-bit levels and a 7-bit root, talluri95's 6-level tree).
//! Size: Table 2's `Σ 4KB × Nactive(pb_i)`, `pb_i = 2^(9i)`: a page per node present, the root
//! counted as a page even when its array is shorter.
//!
//! Superpages (talluri95 §4.2): replicated at every level-1 site they cover, or (`intermediate`)
//! held in the upper-level PTE that would map their page of PTEs; that page does not exist, so the
//! walk takes a nested miss on it and climbs to the PTE holding the superpage.

use super::common::{validate_common, LineCfg, LineTracker, NIL};
use super::radix::{fill_from_upper, tree_store, MAX_LEVEL_BITS};
use super::tree::{Path, Tree, MAX_LEVELS};
use super::{BitsPerLevel, NestedFill, PageTableConfig, ParamError, PtSize, Pte, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, VirtAddr, Vpn};
use std::fmt;

/// Multi-level linear page table: per-ASID virtual linear arrays with a wired root.
#[derive(Clone)]
pub struct LinearTable {
    tree: Tree,
    /// Virtual base address of the PTE array of each level below the root (leaf first).
    level_base: Vec<u64>,
    /// Bytes accounted per node of each level (one page; the root at least one page).
    node_bytes: Vec<u64>,
    page_mask: u64,
    lines: LineCfg,
    /// Which page-table translations a nested miss inserts (`page_table.nested_fill`).
    nested_fill: NestedFill,
}

impl LinearTable {
    /// Builds the table.
    pub fn new(cfg: &PageTableConfig, page_size: PageSize) -> Result<Self, ParamError> {
        let lines = validate_common(cfg, page_size)?;
        let pte = cfg.pte_bytes as u64;
        let page = page_size.bytes();
        let b = page_size.shift() - pte.trailing_zeros();
        match cfg.bits_per_level {
            None => {}
            Some(BitsPerLevel::Uniform(x)) if x == b => {}
            _ => {
                return Err(ParamError::new(
                    "page_table.bits_per_level",
                    format!(
                        "linear tables have page-sized nodes, so {b} bits per level \
                         (log2 of {page}-byte pages / {pte}-byte PTEs); leave it unset"
                    ),
                ))
            }
        }
        let vpn_bits = cfg.va_bits - page_size.shift();
        let min_levels = vpn_bits.div_ceil(b);
        let levels = cfg.levels.unwrap_or(min_levels);
        if levels == 0 || levels > min_levels || levels as usize > MAX_LEVELS {
            return Err(ParamError::new(
                "page_table.levels",
                format!(
                    "{levels} is not usable: a linear table over {vpn_bits} VPN bits with {b}-bit levels \
                     has 1 to {} levels",
                    min_levels.min(MAX_LEVELS as u32)
                ),
            ));
        }
        let top_bits = vpn_bits - b * (levels - 1);
        if top_bits > MAX_LEVEL_BITS {
            return Err(ParamError::new(
                "page_table.levels",
                format!(
                    "{levels} levels leave a wired root of 2^{top_bits} PTEs; use more levels \
                     (root index at most {MAX_LEVEL_BITS} bits)"
                ),
            ));
        }
        let mut bits = vec![b; levels as usize - 1];
        bits.push(top_bits);
        let mut node_bytes = vec![page; levels as usize - 1];
        node_bytes.push(((1u64 << top_bits) * pte).max(page));
        let intermediate = tree_store(cfg)?;
        let tree = Tree::new(&bits, pte, &node_bytes, page_size.shift(), intermediate);

        // Virtual layout: the arrays of levels 1..top, packed from the start of a power-of-two
        // region at the top of the address space.
        let arrays: Vec<u64> = (0..levels - 1).map(|k| (1u64 << (vpn_bits - b * k)) * pte).collect();
        let region: u64 = arrays.iter().sum();
        let lpt_base = if region == 0 {
            0
        } else {
            let top_of_space = if cfg.va_bits == 64 { 0 } else { 1u64 << cfg.va_bits };
            top_of_space.wrapping_sub(region.next_power_of_two())
        };
        let mut level_base = Vec::with_capacity(arrays.len());
        let mut at = lpt_base;
        for a in &arrays {
            level_base.push(at);
            at = at.wrapping_add(*a);
        }
        Ok(LinearTable {
            tree,
            level_base,
            node_bytes,
            page_mask: page_size.offset_mask(),
            lines,
            nested_fill: cfg.nested_fill,
        })
    }

    /// What a nested miss inserts (`page_table.nested_fill`).
    pub fn nested_fill(&self) -> NestedFill {
        self.nested_fill
    }

    /// Number of levels (the last is the wired root).
    pub fn levels(&self) -> u32 {
        self.tree.levels.len() as u32
    }

    /// Virtual address of the level-1 PTE array (`LPT_BASE`): the PTE of `vpn` is at
    /// `lpt_base() + vpn × pte_bytes`. Zero for a one-level (all wired) table.
    pub fn lpt_base(&self) -> VirtAddr {
        VirtAddr(self.level_base.first().copied().unwrap_or(0))
    }

    /// The first page of the virtual region that holds the arrays below the root: every
    /// page-table page translation this table asks the TLB for lies at or above it. `None` for a
    /// one-level (all wired) table.
    pub fn pt_region_start(&self, page_size: PageSize) -> Option<Vpn> {
        self.level_base.first().map(|&b| VirtAddr(b).vpn(page_size))
    }

    /// Virtual address of the level-`level` PTE (1 = leaf) on the path to `vpn`; `None` for the
    /// root level, which is read with physical addresses.
    pub fn pte_va(&self, level: u32, vpn: Vpn) -> Option<VirtAddr> {
        let k = (level as usize).checked_sub(1)?;
        let base = *self.level_base.get(k)?;
        Some(VirtAddr(base + (vpn.0 >> self.tree.levels[k].shift) * self.tree.pte_bytes))
    }

    #[inline(always)]
    fn pt_page(&self, k: usize, vpn: Vpn) -> VirtAddr {
        let va = self.level_base[k] + (vpn.0 >> self.tree.levels[k].shift) * self.tree.pte_bytes;
        VirtAddr(va & !self.page_mask)
    }

    /// See [`super::PageTable::map`].
    pub fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        self.tree.map(asid, vpn, pte);
    }

    /// See [`super::PageTable::unmap`].
    pub fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.tree.unmap(asid, vpn, |_, _| {})
    }

    /// See [`super::PageTable::get`].
    pub fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.tree.get(asid, vpn)
    }

    /// See [`super::PageTable::walk`]. `every_level`: climbs from the level-1 PTE while the
    /// translation of the page holding the needed PTE misses (one nested miss each), reads the
    /// PTE at the level where it hits (or at the wired root), then reads back down, installing
    /// each page-table page translation it resolved. `leaf`: looks up the leaf page's
    /// translation only; on a miss (one nested miss) reads down from the root and installs that
    /// one translation.
    ///
    /// A superpage held in an upper-level entry (`intermediate` store) has no page of PTEs below
    /// it: the climb takes the nested miss on the base PTE's page, like any missing page, and the
    /// walk stops at the entry holding the superpage.
    ///
    /// A hit in `env` for a page-table page that no longer exists (the table freed it, the reserved
    /// TLB entry was not shot down) is treated as the miss it would be after a shootdown.
    #[inline]
    pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
        if !self.tree.in_range(vpn) {
            return None;
        }
        let path = self.tree.path(asid, vpn);
        let mut lines = self.lines.tracker(rec);
        let r = match self.read_down(asid, vpn, &path, env, rec, &mut lines) {
            Ok(leaf) => {
                let t = &self.tree;
                let idx = t.index(0, vpn);
                lines.read(rec, t.entry_addr(0, leaf, idx), 0, t.pte_bytes);
                t.leaf_pte(asid, vpn, t.leaf(leaf, idx))
            }
            Err(r) => r,
        };
        lines.finish(rec);
        r
    }

    /// The climb and the reads down to the leaf page of `vpn`: `Ok(leaf node)` with the leaf
    /// entry still to read, or `Err(answer)` when the walk ends above it (nothing mapped, or a
    /// superpage entry).
    #[inline(always)]
    fn read_down<E: WalkEnv>(
        &self,
        asid: Asid,
        vpn: Vpn,
        path: &Path,
        env: &mut E,
        rec: &mut WalkRecord,
        lines: &mut LineTracker,
    ) -> Result<u32, Option<Pte>> {
        let t = &self.tree;
        let top = t.top();
        let nodes = &path.nodes;
        let every_level = self.nested_fill == NestedFill::EveryLevel;
        let mut k = 0;
        if every_level {
            while k < top {
                if env.lookup_pt_translation(asid, self.pt_page(k, vpn)) && nodes[k] != NIL {
                    break;
                }
                rec.nested_misses += 1;
                k += 1;
            }
        } else if top > 0 && !(env.lookup_pt_translation(asid, self.pt_page(0, vpn)) && nodes[0] != NIL) {
            // One nested miss; the handler reads the upper levels physically from the root.
            rec.nested_misses += 1;
            k = top;
        }
        if nodes[k] == NIL {
            // Only the root can be missing here: the address space has no mapping at all.
            return Err(None);
        }
        while k > 0 {
            let idx = t.index(k, vpn);
            lines.read(rec, t.entry_addr(k, nodes[k], idx), 0, t.pte_bytes);
            if k == path.sp {
                return Err(Some(t.super_pte(path.sp_entry, vpn)));
            }
            if nodes[k - 1] == NIL {
                return Err(None);
            }
            k -= 1;
            if every_level || k == 0 {
                env.fill_pt_translation(asid, self.pt_page(k, vpn));
            }
        }
        Ok(nodes[0])
    }

    /// See [`super::PageTable::walk_block`]. A block of at most one page of PTEs: the walk of
    /// `vpn` down to its page of PTEs (nested misses included, as in [`LinearTable::walk`]), then
    /// one read of the block's `out.len()` consecutive PTEs, charged for the lines of those bytes.
    /// A walk ending above the leaf (invalid or superpage entry) costs what it read and gives
    /// every page of the block the same answer. Larger blocks: one walk per page.
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
        if n > self.tree.levels[0].fanout as u64 || !self.tree.in_range(vpn) {
            return super::walk_block_each(vpn, out, |v, env: &mut E| self.walk(asid, v, env, rec), env);
        }
        let first = vpn.0 & !(n - 1);
        let path = self.tree.path(asid, vpn);
        let mut lines = self.lines.tracker(rec);
        match self.read_down(asid, vpn, &path, env, rec, &mut lines) {
            Err(r) => fill_from_upper(r, vpn, first, out),
            Ok(leaf) => self.tree.read_block(rec, &mut lines, asid, leaf, Vpn(first), out),
        }
        lines.finish(rec);
        out[(vpn.0 - first) as usize]
    }

    /// See [`super::PageTable::remove_asid`].
    pub fn remove_asid(&mut self, asid: Asid) {
        self.tree.remove_asid(asid);
    }

    /// See [`super::PageTable::size`]: a page per node present (Table 2).
    pub fn size(&self) -> PtSize {
        let mut s = PtSize::default();
        for (l, bytes) in self.tree.levels.iter().zip(&self.node_bytes) {
            s.table_bytes += l.live * bytes;
            s.objects += l.live;
        }
        s
    }
}

impl fmt::Debug for LinearTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LinearTable")
            .field("levels", &self.levels())
            .field("lpt_base", &self.lpt_base())
            .field("pte_bytes", &self.tree.pte_bytes)
            .field("size", &self.size())
            .finish()
    }
}
