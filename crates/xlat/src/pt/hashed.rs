//! Hashed page tables with chaining (talluri95 §2, Figure 4).
//!
//! One global table for all processes: each PTE holds a tag (VPN and ASID), a next pointer and
//! the mapping, 24 bytes with 8-byte words. A walk hashes (ASID, VPN) to a bucket, reads the
//! bucket's head pointer and follows the chain until a tag matches: one memory reference for the
//! head pointer and one per PTE probed. In talluri95's accounting the first PTE is reached
//! directly by the hash (its Figure 4 indexes an array of hash nodes) and every PTE probed starts
//! a new cache line, so `paper` lines leave the head-pointer read out and a successful search
//! costs `1 + α/2` lines on average (Table 2, α = `Nactive(1) / buckets`); `layout` lines count
//! it. Size: `24 × Nactive(1)` bytes of PTEs, bucket heads (8 bytes each) reported separately.

use super::chain::{validate_buckets, Chained};
use super::common::validate_common;
use super::{PageTableConfig, ParamError, PtSize, Pte, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};
use std::fmt;

/// Hashed page table: one chained hash table of 24-byte PTEs for every process.
#[derive(Clone)]
pub struct HashedTable {
    t: Chained,
}

impl HashedTable {
    /// Builds the table.
    pub fn new(cfg: &PageTableConfig, page_size: PageSize) -> Result<Self, ParamError> {
        let lines = validate_common(cfg, page_size)?;
        validate_buckets(cfg)?;
        Ok(HashedTable { t: Chained::new(cfg, page_size, 0, lines) })
    }

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
    /// See [`super::PageTable::walk`]: the bucket head pointer, then per PTE probed its tag and
    /// its next pointer (or, on a match, its mapping).
    #[inline]
    pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, _env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
        self.t.walk(asid, vpn, rec)
    }
    /// See [`super::PageTable::remove_asid`].
    pub fn remove_asid(&mut self, asid: Asid) {
        self.t.remove_asid(asid)
    }
    /// See [`super::PageTable::size`].
    pub fn size(&self) -> PtSize {
        self.t.size()
    }
}

impl fmt::Debug for HashedTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HashedTable")
            .field("buckets", &self.buckets())
            .field("pte_bytes", &self.t.obj_bytes)
            .field("size", &self.size())
            .finish()
    }
}
