//! Clustered page tables (talluri95 §3, Figure 5).
//!
//! A hashed page table with subblocking: one PTE per page block of `s` base pages (the subblock
//! factor), holding one tag (ASID and VPBN), one next pointer and `s` mapping words, `8s + 16`
//! bytes. A walk splits the VPN into VPBN and block offset, hashes (ASID, VPBN), follows the chain
//! until a tag matches and reads `mapping[boff]`. A block's PTE exists while any of its pages is
//! mapped and is freed when the last one is unmapped, so the size is Table 2's
//! `(8s + 16) × Nactive(s)`; bucket heads (8 bytes each) are reported separately.
//!
//! References and lines: the bucket head pointer is one reference (not a `paper` line, as for
//! hashed tables). Each PTE probed starts a new line (talluri95 §6.1): a probe that does not match
//! reads the tag and next words, one reference and one line; the matching PTE costs the lines of
//! its tag word and of the mapping word read, so a PTE larger than a line may cost two references
//! and two lines (§3: "it may place the VPBN tag and mapping information in two different cache
//! lines"). With 256-byte lines (the paper's) and `s = 16` the 144-byte PTE fits one line and a
//! walk costs `1 + α/2` lines on average.

use super::chain::{chained_table_methods, validate_buckets, Chained};
use super::common::validate_common;
use super::{PageTableConfig, ParamError, PtSize, Pte, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};
use std::fmt;

/// Largest subblock factor accepted.
const MAX_SUBBLOCK: u32 = 1 << 16;

/// Clustered page table: one chained hash table of page-block PTEs for every process.
#[derive(Clone)]
pub struct ClusteredTable {
    t: Chained,
}

impl ClusteredTable {
    /// Builds the table.
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
        Ok(ClusteredTable { t: Chained::new(cfg, page_size, s.trailing_zeros(), lines) })
    }

    /// Subblock factor `s`: base pages per page block.
    pub fn subblock_factor(&self) -> u32 {
        self.t.s() as u32
    }

    chained_table_methods!();
}

impl fmt::Debug for ClusteredTable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClusteredTable")
            .field("subblock_factor", &self.subblock_factor())
            .field("buckets", &self.buckets())
            .field("pte_bytes", &self.t.obj_bytes)
            .field("size", &self.size())
            .finish()
    }
}
