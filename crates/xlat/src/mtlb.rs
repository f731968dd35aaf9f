//! The memory controller's TLB (swanson98 §2.2): a memory-side stage between the last cache
//! level and DRAM that retranslates *shadow* physical addresses — legal physical addresses above
//! the installed DRAM — to real ones, so that the OS can build superpages from discontiguous
//! frames.
//!
//! Every request that leaves the caches (a fill or a writeback) passes the memory controller
//! and pays its extra cycle (`mmc_cycles`). A request to a shadow address looks its shadow page
//! up in the MTLB (`entries`, `ways`, `policy`: 128, 2, NRU by default, §3.1); a miss reads the
//! page's entry from the shadow-to-real table, a flat array of 4-byte entries in DRAM, one per
//! shadow page (§2.2: the entry at `table_base + index x 4`), which costs `miss_cycles` (by
//! default one DRAM access). The
//! controller keeps a referenced bit (set by fills only: a write-back cache hides the
//! processor's reads that hit, so it is approximate) and a dirty bit (set by writebacks: exact,
//! as only dirty lines are written back) per shadow page. The OS fills the table
//! ([`Mtlb::map`]) and purges entries it changes.
//!
//! Configuration: `[memory] dram_bytes`, `pa_bits` (the shadow range is
//! `[dram_bytes, 2^pa_bits)`) and `[mtlb]` (docs/caches.md).

use crate::addr::{Asid, PageSize, Vpn};
use crate::pt::ParamError;
use crate::tlb::{Geometry, Policy, Tlb, TlbData};
use serde::{Deserialize, Serialize};

/// `[mtlb]`: the memory-controller TLB.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MtlbConfig {
    /// Entries (swanson98 §3.1: 128).
    pub entries: u32,
    /// Ways per set (§3.1: 2).
    pub ways: u32,
    /// Replacement (§3.1: NRU).
    pub policy: Policy,
    /// Seed of the random policy.
    pub seed: u64,
    /// Cycles every memory operation spends in the controller's translation stage (§2.2: "in
    /// one cycle").
    pub mmc_cycles: u64,
    /// Physical address of the shadow-to-real table in DRAM (default: the table's size below
    /// the top of DRAM).
    pub table_base: Option<u64>,
    /// Cycles an MTLB miss adds to the request that missed: the table entry's read (default:
    /// one `[memory] latency`, a DRAM access).
    pub miss_cycles: Option<u64>,
}

impl Default for MtlbConfig {
    fn default() -> Self {
        MtlbConfig {
            entries: 128,
            ways: 2,
            policy: Policy::Nru,
            seed: 1,
            mmc_cycles: 1,
            table_base: None,
            miss_cycles: None,
        }
    }
}

/// Counters of the memory-controller TLB.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct MtlbStats {
    /// Memory requests to shadow addresses (each one MTLB lookup).
    pub lookups: u64,
    /// Lookups that found the shadow page's translation.
    pub hits: u64,
    /// Lookups that read the table.
    pub misses: u64,
    /// Memory requests that passed the controller (shadow or not).
    pub requests: u64,
    /// Requests to shadow pages the table does not map (an OS error; the request goes nowhere).
    pub unmapped: u64,
}

/// The memory-controller TLB with its shadow-to-real table and per-page bits.
#[derive(Clone, Debug)]
pub struct Mtlb {
    tlb: Tlb,
    /// Per shadow page: its real frame plus one (0: not mapped).
    table: Vec<u32>,
    referenced: Vec<u64>,
    dirty: Vec<u64>,
    /// First shadow frame (the first page above DRAM).
    shadow_base: u64,
    shift: u32,
    table_base: u64,
    mmc_cycles: u64,
    miss_cycles: Option<u64>,
    stats: MtlbStats,
}

/// What the controller made of one request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retranslation {
    /// The real physical address DRAM sees (`None`: an unmapped shadow page).
    pub dram: Option<u64>,
    /// The table entry read on an MTLB miss.
    pub table_read: Option<u64>,
    /// Cycles of the controller's stage (the table read's DRAM access apart).
    pub cycles: u64,
}

/// Where the shadow range and the controller's table lie (see [`Mtlb::layout`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShadowLayout {
    /// Shadow pages, from the first frame above the installed DRAM.
    pub pages: u64,
    /// Physical address of the shadow-to-real table in DRAM.
    pub table_base: u64,
}

impl Mtlb {
    /// The stage for `dram_bytes` of DRAM in a `pa_bits` physical space of `page_size` pages.
    pub fn new(cfg: &MtlbConfig, dram_bytes: u64, pa_bits: u32, page_size: u64) -> Result<Mtlb, ParamError> {
        let ShadowLayout { pages, table_base } = Mtlb::layout(cfg, dram_bytes, pa_bits, page_size)?;
        let shift = page_size.trailing_zeros();
        let g = Geometry { entries: cfg.entries, ways: cfg.ways, policy: cfg.policy, seed: cfg.seed };
        let tlb = Tlb::new(g, PageSize::from_bytes(page_size).expect("validated page size"))
            .map_err(|e| ParamError::new("mtlb.entries", e.to_string()))?;
        let words = (pages as usize).div_ceil(64);
        Ok(Mtlb {
            tlb,
            table: vec![0; pages as usize],
            referenced: vec![0; words],
            dirty: vec![0; words],
            shadow_base: dram_bytes >> shift,
            shift,
            table_base,
            mmc_cycles: cfg.mmc_cycles,
            miss_cycles: cfg.miss_cycles,
            stats: MtlbStats::default(),
        })
    }

    /// Checks the stage's parameters without building it: the shadow range above `dram_bytes`
    /// up to `2^pa_bits`, its table in DRAM, and the TLB's geometry. Errors name the key.
    pub fn layout(cfg: &MtlbConfig, dram_bytes: u64, pa_bits: u32, page_size: u64) -> Result<ShadowLayout, ParamError> {
        if !(12..=52).contains(&pa_bits) {
            return Err(ParamError::new("memory.pa_bits", format!("must be from 12 to 52, got {pa_bits}")));
        }
        let top = 1u64 << pa_bits;
        if dram_bytes == 0 || dram_bytes % page_size != 0 || dram_bytes >= top {
            return Err(ParamError::new(
                "memory.dram_bytes",
                format!(
                    "must be a positive multiple of the page size ({page_size}) below 2^pa_bits = {top} (the shadow range \
                     lies above it), got {dram_bytes}"
                ),
            ));
        }
        let shift = page_size.trailing_zeros();
        let pages = (top - dram_bytes) >> shift;
        if pages > 1 << 28 {
            return Err(ParamError::new(
                "memory.pa_bits",
                format!("the shadow range holds {pages} pages; at most 2^28 (a table of 1 GB) are modelled"),
            ));
        }
        let table_bytes = pages * 4;
        let table_base = match cfg.table_base {
            Some(b) if b.checked_add(table_bytes).is_some_and(|end| end <= dram_bytes) => b,
            Some(b) => {
                return Err(ParamError::new(
                    "mtlb.table_base",
                    format!("the table ({table_bytes} bytes) must lie in DRAM (below {dram_bytes}), got {b:#x}"),
                ))
            }
            None => dram_bytes.checked_sub(table_bytes).ok_or_else(|| {
                ParamError::new("memory.dram_bytes", format!("too small for the shadow table of {table_bytes} bytes"))
            })?,
        };
        if cfg.entries == 0 || cfg.ways == 0 || cfg.entries % cfg.ways != 0 {
            return Err(ParamError::new(
                "mtlb.ways",
                format!("{} ways must be at least 1 and divide mtlb.entries = {}", cfg.ways, cfg.entries),
            ));
        }
        let g = Geometry { entries: cfg.entries, ways: cfg.ways, policy: cfg.policy, seed: cfg.seed };
        g.check(crate::tlb::Format::Single).map_err(|e| ParamError::new("mtlb.entries", e.to_string()))?;
        Ok(ShadowLayout { pages, table_base })
    }

    /// The first shadow frame and the number of shadow pages.
    pub fn shadow_frames(&self) -> (u64, u64) {
        (self.shadow_base, self.table.len() as u64)
    }

    /// Physical address of the shadow-to-real table in DRAM.
    pub fn table_base(&self) -> u64 {
        self.table_base
    }

    /// True if `pa` is a shadow address.
    #[inline]
    pub fn is_shadow(&self, pa: u64) -> bool {
        (pa >> self.shift).wrapping_sub(self.shadow_base) < self.table.len() as u64
    }

    /// The OS maps shadow frame `shadow` to real frame `real` (or unmaps it with `None`),
    /// purging the MTLB's copy of the old entry.
    pub fn map(&mut self, shadow: u64, real: Option<u64>) {
        let i = (shadow - self.shadow_base) as usize;
        self.table[i] = real.map_or(0, |r| u32::try_from(r + 1).expect("a real frame below 2^32 pages"));
        self.tlb.invalidate_range(Asid(0), Vpn(i as u64), Vpn(i as u64));
    }

    /// The real frame shadow frame `shadow` maps to, from the table.
    pub fn real_frame(&self, shadow: u64) -> Option<u64> {
        let e = *self.table.get(shadow.checked_sub(self.shadow_base)? as usize)?;
        (e != 0).then(|| e as u64 - 1)
    }

    /// One request at physical address `pa` (`write`: a writeback).
    #[inline]
    pub fn access(&mut self, write: bool, pa: u64) -> Retranslation {
        self.stats.requests += 1;
        if !self.is_shadow(pa) {
            return Retranslation { dram: Some(pa), table_read: None, cycles: self.mmc_cycles };
        }
        self.stats.lookups += 1;
        let i = (pa >> self.shift) - self.shadow_base;
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        if write {
            self.dirty[w] |= bit;
        } else {
            self.referenced[w] |= bit;
        }
        let offset = pa & ((1 << self.shift) - 1);
        if let Some(d) = self.tlb.lookup(Asid(0), Vpn(i)) {
            self.stats.hits += 1;
            return Retranslation {
                dram: Some(d.pfn << self.shift | offset),
                table_read: None,
                cycles: self.mmc_cycles,
            };
        }
        self.stats.misses += 1;
        let read = Some(self.table_base + 4 * i);
        let e = self.table[i as usize];
        if e == 0 {
            self.stats.unmapped += 1;
            return Retranslation { dram: None, table_read: read, cycles: self.mmc_cycles };
        }
        let real = e as u64 - 1;
        self.tlb.insert(0, Vpn(i), TlbData { pfn: real, shift: self.shift as u8, valid: 0 });
        Retranslation { dram: Some(real << self.shift | offset), table_read: read, cycles: self.mmc_cycles }
    }

    /// Cycles a miss adds (`mtlb.miss_cycles`; `None`: one memory latency).
    pub fn miss_cycles(&self) -> Option<u64> {
        self.miss_cycles
    }

    /// Counters.
    pub fn stats(&self) -> MtlbStats {
        self.stats
    }

    /// Shadow pages with their referenced bit set, and with their dirty bit set.
    pub fn marked_pages(&self) -> (u64, u64) {
        let ones = |v: &[u64]| v.iter().map(|w| w.count_ones() as u64).sum();
        (ones(&self.referenced), ones(&self.dirty))
    }

    /// The referenced and dirty bits of shadow frame `shadow`.
    pub fn bits(&self, shadow: u64) -> (bool, bool) {
        let i = shadow - self.shadow_base;
        let (w, bit) = ((i / 64) as usize, 1u64 << (i % 64));
        (self.referenced[w] & bit != 0, self.dirty[w] & bit != 0)
    }

    /// Geometry of the MTLB.
    pub fn geometry(&self) -> Geometry {
        self.tlb.geometry()
    }
}
