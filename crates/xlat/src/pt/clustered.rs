//! Clustered page tables (talluri95 §3, §5, Figures 5, 7 and 8).
//!
//! A hashed page table with subblocking: nodes of a page block of `s` base pages (the subblock
//! factor) chained from the bucket of (ASID, VPBN). Four node kinds share the chains:
//! - base node: `tag | next | mapping[s]`, `8s + 16` bytes, one word per base page;
//! - S node (partial-subblock PTE, or a superpage of the block's size): `tag | next | mapping`,
//!   24 bytes, one word holding the block's first frame and the valid vector (one valid bit
//!   for a superpage);
//! - SZ node (superpages smaller than the block): `16 + 8 × (s / pages)` bytes, one word per
//!   superpage of that size in the block;
//! - superpages larger than the block are replicated once per block: one 24-byte S node in every
//!   block of the superpage.
//!
//! A block may have several nodes on its chain (e.g. an SZ node and a base node); a walk that
//! matches the tag but finds no valid mapping of the page in that node goes on down the chain.
//!
//! References and lines: the bucket head pointer is one reference (not a `paper` line, as for
//! hashed tables). Each node probed starts a new line (talluri95 §6.1): a probe that does not match
//! reads the tag and next words, one reference and one line; a matching node costs the lines of
//! its tag word and of the mapping word read (`mapping[boff]` in a base node, `mapping[0]` in an
//! S node, `mapping[boff / pages]` in an SZ node), so a node larger than a line may cost two
//! references and two lines (§3). Size: the sum of the node bytes, which is Table 2's
//! `24 × Nactive(s) × fss + (8s + 16) × Nactive(s) × (1 − fss)` when every block has one node;
//! bucket heads (8 bytes each) are reported separately.

use super::chain::{validate_buckets, Chained, Word};
use super::common::{validate_common, PtMem};
use super::{walk_block_each, PageTableConfig, ParamError, PtSize, Pte, SuperpageStore, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};
use std::fmt;

/// Largest subblock factor accepted.
const MAX_SUBBLOCK: u32 = 1 << 16;

/// Clustered page table: one chained hash table of page-block nodes for every process.
#[derive(Clone)]
pub struct ClusteredTable {
    t: Chained,
    mem: PtMem,
    base_shift: u32,
}

impl ClusteredTable {
    /// Builds the table. `page_table.superpage_store` must be `native` (or unset).
    pub fn new(cfg: &PageTableConfig, page_size: PageSize) -> Result<Self, ParamError> {
        let lines = validate_common(cfg, page_size)?;
        validate_buckets(cfg)?;
        let s = cfg.subblock_factor;
        if !s.is_power_of_two() || s > MAX_SUBBLOCK {
            return Err(ParamError::new(
                "page_table.subblock_factor",
                format!("{s} is not usable: base pages per page block must be a power of two from 1 to {MAX_SUBBLOCK}"),
            ));
        }
        if cfg.store() != SuperpageStore::Native {
            return Err(ParamError::new(
                "page_table.superpage_store",
                format!(
                    "\"{}\" is not usable with clustered tables: they store superpages and partial-subblock \
                     PTEs natively (\"native\")",
                    cfg.store().name()
                ),
            ));
        }
        let mut mem = PtMem::new();
        let t = Chained::new(cfg, page_size, s.trailing_zeros(), lines, &mut mem);
        Ok(ClusteredTable { t, mem, base_shift: page_size.shift() })
    }

    /// Subblock factor `s`: base pages per page block.
    pub fn subblock_factor(&self) -> u32 {
        1 << self.t.kshift()
    }

    /// Number of hash buckets.
    pub fn buckets(&self) -> u64 {
        self.t.buckets()
    }

    /// Load factor α: nodes per bucket.
    pub fn load_factor(&self) -> f64 {
        self.t.live as f64 / self.t.buckets() as f64
    }

    /// See [`super::PageTable::map`]: a base page goes to its block's base node, a superpage
    /// smaller than the block to the block's SZ node of that size, a block-sized superpage or a
    /// partial-subblock PTE to the block's S node (replacing it), a larger superpage to the S node
    /// of every block it covers.
    pub fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        let ss = self.t.kshift();
        let pages = pte.size.shift() - self.base_shift;
        let word = Word::of(pte, vpn, self.base_shift);
        if pte.is_partial() || pages >= ss {
            let mstart = vpn.0 & !((1u64 << pages) - 1);
            let blocks = if pages > ss { 1u64 << (pages - ss) } else { 1 };
            for k in 0..blocks {
                self.t.put(asid, Vpn(mstart + (k << ss)), ss, ss, word, &mut self.mem);
            }
        } else {
            self.t.put(asid, vpn, ss, pages, word, &mut self.mem);
        }
    }

    /// See [`super::PageTable::unmap`]: removes the whole mapping containing `vpn` (every copy of a
    /// superpage larger than the block).
    pub fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.t.unmap(asid, vpn)
    }

    /// See [`super::PageTable::get`].
    pub fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        self.t.get(asid, vpn)
    }

    /// See [`super::PageTable::walk`]: the bucket head pointer, then per node probed its tag and
    /// next pointer, or on a tag match the mapping word of the page.
    #[inline]
    pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, _env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
        self.t.walk_alone(asid, vpn, rec)
    }

    /// See [`super::PageTable::walk_block`]: for a block of `s` pages, one chain walk reading all
    /// the mapping words of the block's nodes (talluri95 §4.4: the mappings are adjacent); other
    /// block lengths take one walk per page.
    pub fn walk_block<E: WalkEnv>(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        env: &mut E,
        rec: &mut WalkRecord,
        out: &mut [Option<Pte>],
    ) -> Option<Pte> {
        if out.len() as u64 == 1u64 << self.t.kshift() {
            self.t.walk_block(asid, vpn, rec, out)
        } else {
            walk_block_each(vpn, out, |v, env: &mut E| self.walk(asid, v, env, rec), env)
        }
    }

    /// See [`super::PageTable::remove_asid`].
    pub fn remove_asid(&mut self, asid: Asid) {
        self.t.remove_asid(asid)
    }

    /// See [`super::PageTable::size`]: `objects` counts nodes.
    pub fn size(&self) -> PtSize {
        self.t.size()
    }
}

impl fmt::Debug for ClusteredTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusteredTable")
            .field("subblock_factor", &self.subblock_factor())
            .field("buckets", &self.buckets())
            .field("size", &self.size())
            .finish()
    }
}
