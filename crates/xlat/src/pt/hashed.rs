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

use super::chain::{chained_table_methods, validate_buckets, Chained};
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

    chained_table_methods!();
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
