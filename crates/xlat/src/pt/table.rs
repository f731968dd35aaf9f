//! The page table of a design: the closed enum over the models, each call a `match`.

use super::{clustered, hashed, linear, radix, Kind, PageTableConfig, ParamError, PtSize, Pte, WalkEnv, WalkRecord};
use crate::addr::{Asid, PageSize, Vpn};

/// The page table of one simulated system (all processes), a closed set of models.
#[derive(Clone, Debug)]
pub enum PageTable {
    /// Forward-mapped radix tree.
    Radix(radix::RadixTable),
    /// Multi-level linear table.
    Linear(linear::LinearTable),
    /// Hashed table.
    Hashed(hashed::HashedTable),
    /// Clustered table.
    Clustered(clustered::ClusteredTable),
}

macro_rules! each_table {
    ($self:expr, $t:ident => $body:expr) => {
        match $self {
            PageTable::Radix($t) => $body,
            PageTable::Linear($t) => $body,
            PageTable::Hashed($t) => $body,
            PageTable::Clustered($t) => $body,
        }
    };
}

impl PageTable {
    /// Builds the configured table for base pages of `page_size`. Invalid parameters name the key.
    pub fn new(cfg: &PageTableConfig, page_size: PageSize) -> Result<PageTable, ParamError> {
        Ok(match cfg.kind {
            Kind::Radix => PageTable::Radix(radix::RadixTable::new(cfg, page_size)?),
            Kind::Linear | Kind::VhptShort => PageTable::Linear(linear::LinearTable::new(cfg, page_size)?),
            Kind::VhptLong => {
                let os = cfg.os_table();
                if matches!(os.kind, Kind::VhptShort | Kind::VhptLong) {
                    return Err(ParamError::new(
                        "page_table.os.kind",
                        "the OS table behind a long VHPT is radix, linear, hashed or clustered",
                    ));
                }
                PageTable::new(&os, page_size).map_err(|e| {
                    ParamError::new(format!("page_table.os.{}", e.key.trim_start_matches("page_table.")), e.message)
                })?
            }
            Kind::Hashed => PageTable::Hashed(hashed::HashedTable::new(cfg, page_size)?),
            Kind::Clustered => PageTable::Clustered(clustered::ClusteredTable::new(cfg, page_size)?),
        })
    }

    /// Which kind this is.
    pub fn kind(&self) -> Kind {
        match self {
            PageTable::Radix(_) => Kind::Radix,
            PageTable::Linear(_) => Kind::Linear,
            PageTable::Hashed(_) => Kind::Hashed,
            PageTable::Clustered(_) => Kind::Clustered,
        }
    }

    /// Maps base page `vpn` of `asid` to `pte` (replacing any previous mapping).
    pub fn map(&mut self, asid: Asid, vpn: Vpn, pte: Pte) {
        each_table!(self, t => t.map(asid, vpn, pte))
    }

    /// Removes the mapping of base page `vpn` of `asid`, returning it if there was one.
    pub fn unmap(&mut self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        each_table!(self, t => t.unmap(asid, vpn))
    }

    /// The mapping of `vpn`, without any accounting (for the OS model and tests).
    pub fn get(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        each_table!(self, t => t.get(asid, vpn))
    }

    /// Walks the table for base page `vpn` of `asid` as the miss handler would, adding the
    /// memory references, cache lines and nested misses to `rec` (which the caller resets).
    /// Returns the mapping, or `None` if the page is not mapped (a page fault).
    #[inline]
    pub fn walk<E: WalkEnv>(&mut self, asid: Asid, vpn: Vpn, env: &mut E, rec: &mut WalkRecord) -> Option<Pte> {
        each_table!(self, t => t.walk(asid, vpn, env, rec))
    }

    /// The walk of a complete-subblock TLB's block miss with subblock prefetch (talluri95 §4.4):
    /// fetches into `out[i]` the mapping of base page `i` of the aligned block of `out.len()`
    /// (a power of two) base pages containing `vpn`, adding what that costs in this table to
    /// `rec`. Returns the mapping of `vpn` itself.
    #[inline]
    pub fn walk_block<E: WalkEnv>(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        env: &mut E,
        rec: &mut WalkRecord,
        out: &mut [Option<Pte>],
    ) -> Option<Pte> {
        each_table!(self, t => t.walk_block(asid, vpn, env, rec, out))
    }

    /// Removes every mapping of `asid` (process exit).
    pub fn remove_asid(&mut self, asid: Asid) {
        each_table!(self, t => t.remove_asid(asid))
    }

    /// Current size in Table 2 accounting.
    pub fn size(&self) -> PtSize {
        each_table!(self, t => t.size())
    }
}
