//! The cycle model: what TLB lookups, walks, traps and page faults cost.
//!
//! Every constant is a config key of `[cost]` (or `latency` of a `[[tlb]]`), documented in
//! `docs/configuration.md`. Total translation cycles are
//!
//! ```text
//!   Σ_tlb accesses(tlb) × latency(tlb)
//! + Σ_walk memory references × memory_cycles          (or each reference through [cost.cache])
//! + walks × walker_cycles                              (hardware refill)
//! + (walks + nested misses) × trap_cycles              (software refill: every miss traps)
//! + page faults × page_fault_cycles
//! ```

use crate::addr::{PageSize, Vpn};
use crate::pt::ParamError;
use crate::tlb::{Geometry, Policy, Tlb, TlbData};
use serde::Deserialize;

/// Who refills the TLB on a miss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Refill {
    /// A hardware walker: `walker_cycles` per walk plus its memory references.
    #[default]
    Hardware,
    /// A software handler: every miss (and every nested miss) traps, `trap_cycles` each.
    Software,
}

/// `[cost]` section of a config.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CostConfig {
    /// Hardware or software refill.
    pub refill: Refill,
    /// Software refill: cycles per trap (entry, handler instructions, return), per miss and per
    /// nested miss. Default 20 (bala94: the R3000 L1U handler is 9 instructions + one load).
    pub trap_cycles: u64,
    /// Hardware refill: fixed cycles per walk besides its memory references. Default 0.
    pub walker_cycles: u64,
    /// Cycles of one walk memory reference when there is no `[cost.cache]`. Default 100.
    pub memory_cycles: u64,
    /// Cycles per page fault (demand paging). Default 0: translation cost only.
    pub page_fault_cycles: u64,
    /// Optional data cache that walk references go through.
    pub cache: Option<CacheConfig>,
}

impl Default for CostConfig {
    fn default() -> Self {
        CostConfig {
            refill: Refill::Hardware,
            trap_cycles: 20,
            walker_cycles: 0,
            memory_cycles: 100,
            page_fault_cycles: 0,
            cache: None,
        }
    }
}

/// `[cost.cache]`: a set-associative LRU cache of page-table data.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Capacity in bytes (default 32 KiB).
    pub size_bytes: u64,
    /// Associativity (default 8).
    pub ways: u32,
    /// Line size in bytes (default 64).
    pub line_bytes: u64,
    /// Cycles of a hit (default 4).
    pub hit_cycles: u64,
    /// Cycles of a miss (default 100).
    pub miss_cycles: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig { size_bytes: 32 << 10, ways: 8, line_bytes: 64, hit_cycles: 4, miss_cycles: 100 }
    }
}

/// A cache model of page-table data, built on the TLB structure (lines play pages).
#[derive(Clone, Debug)]
pub struct PtCache {
    lines: Tlb,
    line_shift: u32,
    /// Cycles of a hit.
    pub hit_cycles: u64,
    /// Cycles of a miss.
    pub miss_cycles: u64,
}

impl PtCache {
    /// Builds the cache; errors name the `cost.cache.*` key.
    pub fn new(c: &CacheConfig) -> Result<PtCache, ParamError> {
        if !c.line_bytes.is_power_of_two() {
            return Err(ParamError::new(
                "cost.cache.line_bytes",
                format!("must be a power of two, got {}", c.line_bytes),
            ));
        }
        let lines = c.size_bytes / c.line_bytes;
        if lines == 0 || lines > crate::limits::MAX_CACHE_LINES {
            return Err(ParamError::new(
                "cost.cache.size_bytes",
                format!("must hold from 1 to 2^24 lines of {} bytes, got {} bytes", c.line_bytes, c.size_bytes),
            ));
        }
        let geometry = Geometry { entries: lines as u32, ways: c.ways, policy: Policy::Lru, seed: 0 };
        let tlb = Tlb::new(geometry, PageSize::from_bytes(c.line_bytes).expect("power of two"))
            .map_err(|e| ParamError::new("cost.cache.ways", e.to_string()))?;
        Ok(PtCache {
            lines: tlb,
            line_shift: c.line_bytes.trailing_zeros(),
            hit_cycles: c.hit_cycles,
            miss_cycles: c.miss_cycles,
        })
    }

    /// Accesses physical address `pa`; returns true on a hit.
    #[inline]
    pub fn access(&mut self, pa: u64) -> bool {
        let line = Vpn(pa >> self.line_shift);
        if self.lines.lookup(crate::addr::Asid(0), line).is_some() {
            return true;
        }
        self.lines.insert(0, line, TlbData::default());
        false
    }
}
