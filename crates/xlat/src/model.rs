//! talluri95's analytical page-table model (appendix, Table 2) and its cross-check against the
//! simulated tables.
//!
//! Table 2 of talluri95 ("A New Page Table for 64-bit Address Spaces", SOSP 1995) approximates,
//! for each page-table organisation, the page-table size and the average number of cache lines a
//! TLB miss reads, from a few counts over the mapped pages: `Nactive(P)`, the number of aligned
//! regions of `P` base pages with at least one valid mapping. This module holds:
//!
//! - [`nactive`] / [`nactive_log2`]: `Nactive(P)` over a set of `(asid, vpn)` pages, counted per
//!   process (processes have separate trees, or separate tags in hashed and clustered tables);
//! - one pure function per Table 2 row and column ([`linear_size`], [`forward_mapped_size`],
//!   [`hashed_size`], [`clustered_fss_size`], …), each quoting its row;
//! - [`evaluate`]: the formula values for a configured table over a page set, with the inputs used
//!   (Nactive values, α, fss) in a [`ModelRow`];
//! - [`simulate`]: the same page set mapped in the simulated [`PageTable`], its Table 2 size and
//!   the average lines of a walk to every mapped page, in a [`SimRow`].
//!
//! The paper assumes 4 KB base pages, 8-byte mappings, 64-bit tags and pointers (16 bytes of tag
//! and next pointer per hashed or clustered PTE) and, in §6.1, 4096 buckets, `s = 16`, a 6-level
//! linear and a 7-level forward-mapped tree for 64-bit addresses. The functions here take the
//! configured page size, mapping size (`page_table.pte_bytes`), tree geometry, bucket count and
//! subblock factor instead, and reduce to the paper's numbers under its assumptions.
//! `docs/model.md` describes each formula and how it is checked.

use crate::addr::{Asid, PageSize, Pfn, Vpn};
use crate::pt::{Kind, NoTlb, PageTable, PageTableConfig, ParamError, PtSize, Pte, WalkRecord};
use crate::snapshot::Snapshot;
use serde::Serialize;

/// Bytes of tag plus next pointer in a hashed or clustered PTE (64-bit words, talluri95 §2).
pub const TAG_NEXT_BYTES: u64 = 16;

// ---------------------------------------------------------------------------------------------
// Nactive
// ---------------------------------------------------------------------------------------------

/// `Nactive(P)` (Table 2: "Number of virtual address regions of size P base pages that have one
/// or more valid mappings in the page table"): the number of distinct `(asid, vpn / p)` over
/// `pages`. Regions are aligned to `p` base pages; `p` need not be a power of two. Duplicates
/// are allowed. Sorted input (by ASID, then VPN) is counted in one pass without allocating;
/// other input is sorted in a copy first.
///
/// # Panics
/// If `p` is 0.
pub fn nactive(pages: &[(u32, u64)], p: u64) -> u64 {
    assert!(p > 0, "Nactive(P) needs P >= 1 base pages");
    count_regions(pages, |v| v / p)
}

/// `Nactive(2^log2_p)`: regions of `2^log2_p` base pages; `log2_p >= 64` counts one region per
/// process that has any page (the whole 64-bit VPN space).
pub fn nactive_log2(pages: &[(u32, u64)], log2_p: u32) -> u64 {
    count_regions(pages, |v| v.checked_shr(log2_p).unwrap_or(0))
}

/// Distinct `(asid, region(vpn))` for a `region` that is monotone in the VPN.
fn count_regions(pages: &[(u32, u64)], region: impl Fn(u64) -> u64) -> u64 {
    let scan = |sorted: &[(u32, u64)]| {
        let mut n = 0u64;
        let mut last: Option<(u32, u64)> = None;
        for &(a, v) in sorted {
            let key = (a, region(v));
            if last != Some(key) {
                n += 1;
                last = Some(key);
            }
        }
        n
    };
    if pages.windows(2).all(|w| w[0] <= w[1]) {
        scan(pages)
    } else {
        let mut sorted = pages.to_vec();
        sorted.sort_unstable();
        scan(&sorted)
    }
}

// ---------------------------------------------------------------------------------------------
// Table 2, one function per cell
// ---------------------------------------------------------------------------------------------

/// Hash-table load factor α (Table 2: "Load factor on hash table = Nactive(1)/#buckets" for
/// hashed tables, "Nactive(s)/#buckets" for clustered tables): `n / buckets`.
pub fn load_factor(n: u64, buckets: u64) -> f64 {
    n as f64 / buckets as f64
}

/// Multi-level linear, lines per TLB miss: "1 + r * m", where `r` is the "TLB miss ratio for
/// accesses to translations to the first-level linear page table" and `m` the "average number of
/// cache lines accessed per TLB miss to first-level linear page table".
pub fn linear_lines(r: f64, m: f64) -> f64 {
    1.0 + r * m
}

/// Multi-level linear, size: "Σ_{i=1,nlevels} 4KB × Nactive(pb_i)", `pb_i = 2^(9i)`.
///
/// `nactive[i-1]` is `Nactive(pb_i)` for level `i` (leaf first), every node a page of
/// `page_bytes`; the top level is the wired root, covering the whole VPN space (so its
/// `Nactive` is the number of processes). Generalised for a root wider than a page (fewer
/// levels than the minimum tree): the top level's node takes `root_bytes` (= `page_bytes` in
/// the paper's minimum-height tree).
pub fn linear_size(page_bytes: u64, root_bytes: u64, nactive: &[u64]) -> u64 {
    let Some((top, below)) = nactive.split_last() else { return 0 };
    below.iter().map(|n| page_bytes * n).sum::<u64>() + root_bytes * top
}

/// Linear with hashed upper level, size: "(4KB + 24) × Nactive(512)" — "A hash table (24 byte
/// PTEs) stores translations to the first-level linear page table". `n_first` is
/// `Nactive(page_bytes / pte_bytes)` (512 for 4 KB pages and 8-byte mappings), and a hashed PTE
/// is `16 + pte_bytes` bytes (24). Lines per miss are [`linear_lines`] as for the multi-level
/// table. Not simulated in xlat: [`evaluate`] reports it beside linear tables.
pub fn linear_hashed_size(page_bytes: u64, pte_bytes: u64, n_first: u64) -> u64 {
    (page_bytes + TAG_NEXT_BYTES + pte_bytes) * n_first
}

/// Forward-mapped, lines per TLB miss: "nlevels" (one cache line per tree level, §6.1).
pub fn forward_mapped_lines(nlevels: u32) -> f64 {
    nlevels as f64
}

/// Forward-mapped, size: "Σ_{i=1,nlevels} n_i × 8 × Nactive(pb_i)", `pb_i = 2^(9i)`.
///
/// Generalised to the configured geometry: `levels[i-1] = (n_i, Nactive(pb_i))` leaf first,
/// with `n_i = 2^(bits of level i)` entries per node and `pb_i = 2^(b_1 + … + b_i)`; entries are
/// `pte_bytes` (8 in the paper).
pub fn forward_mapped_size(pte_bytes: u64, levels: &[(u64, u64)]) -> u64 {
    levels.iter().map(|&(n, active)| n * pte_bytes * active).sum()
}

/// Hashed, lines per TLB miss: "1 + α/2", α = Nactive(1)/#buckets: the PTEs a successful search
/// probes on average, assuming uniform hashing (Knuth, cited by talluri95).
pub fn hashed_lines(alpha: f64) -> f64 {
    1.0 + alpha / 2.0
}

/// Hashed, size: "24 × Nactive(1)" ("Each PTE is 24 bytes": tag, next and an 8-byte mapping;
/// `16 + pte_bytes` in general).
pub fn hashed_size(pte_bytes: u64, n1: u64) -> u64 {
    (TAG_NEXT_BYTES + pte_bytes) * n1
}

/// Clustered, lines per TLB miss: "1 + α/2", α = Nactive(s)/#buckets (a clustered PTE taken to
/// fit one cache line).
pub fn clustered_lines(alpha: f64) -> f64 {
    1.0 + alpha / 2.0
}

/// Clustered, size: "(8s + 16) × Nactive(s)" (`s × pte_bytes + 16` in general).
pub fn clustered_size(s: u64, pte_bytes: u64, ns: u64) -> u64 {
    (s * pte_bytes + TAG_NEXT_BYTES) * ns
}

/// Clustered with superpage / partial-subblock PTEs, size:
/// "(24 × Nactive(s) × fss) + ((8s + 16) × Nactive(s) × (1 − fss))", where fss is the "Fraction
/// of page blocks (Nactive(s)) that use superpage or partial-subblock clustered PTEs" (one
/// mapping word: `16 + pte_bytes` bytes). Lines per miss are [`clustered_lines`].
pub fn clustered_fss_size(s: u64, pte_bytes: u64, ns: u64, fss: f64) -> f64 {
    let n = ns as f64;
    (TAG_NEXT_BYTES + pte_bytes) as f64 * n * fss + (s * pte_bytes + TAG_NEXT_BYTES) as f64 * n * (1.0 - fss)
}

// ---------------------------------------------------------------------------------------------
// Page-block PTE classification (fss)
// ---------------------------------------------------------------------------------------------

/// How the page blocks (aligned groups of `s` base pages) of a clustered table are mapped, which
/// fixes Table 2's fss.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BlockPtes {
    /// Base-page (complete-subblock) clustered PTEs only: fss = 0.
    Base,
    /// A superpage PTE for every fully populated block, base-page PTEs for the others: fss = the
    /// fraction of active blocks whose `s` pages are all mapped.
    Superpage,
    /// A partial-subblock PTE for every active block: fss = 1.
    PartialSubblock,
    /// fss given explicitly (from 0 to 1).
    Fraction(f64),
}

impl BlockPtes {
    /// Parses `base`, `superpage` or `partial-subblock`.
    pub fn from_name(name: &str) -> Option<BlockPtes> {
        match name {
            "base" => Some(BlockPtes::Base),
            "superpage" => Some(BlockPtes::Superpage),
            "partial-subblock" => Some(BlockPtes::PartialSubblock),
            _ => None,
        }
    }

    /// Name in reports (`fraction` for an explicit fss).
    pub fn name(self) -> &'static str {
        match self {
            BlockPtes::Base => "base",
            BlockPtes::Superpage => "superpage",
            BlockPtes::PartialSubblock => "partial-subblock",
            BlockPtes::Fraction(_) => "fraction",
        }
    }
}

/// Active page blocks of `2^log2_s` base pages whose pages are all in `pages` (per process).
pub fn full_blocks(pages: &[(u32, u64)], log2_s: u32) -> u64 {
    let mut sorted = pages.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let s = 1u64.checked_shl(log2_s).unwrap_or(0);
    let mut full = 0u64;
    let mut i = 0;
    while i < sorted.len() {
        let key = (sorted[i].0, sorted[i].1 >> log2_s);
        let mut j = i;
        while j < sorted.len() && (sorted[j].0, sorted[j].1 >> log2_s) == key {
            j += 1;
        }
        if s != 0 && (j - i) as u64 == s {
            full += 1;
        }
        i = j;
    }
    full
}

/// Table 2's fss for `pages` in page blocks of `s` base pages (a power of two).
///
/// The classification assumes page reservation (talluri95 §6.1) placed every block properly —
/// each mapped page `i` of a block in frame `block_frame + i` — so every fully populated block
/// can be a superpage and every active block a partial-subblock PTE. An explicit fraction must
/// lie in `[0, 1]`.
pub fn fss(pages: &[(u32, u64)], s: u64, ptes: BlockPtes) -> Result<f64, ParamError> {
    Ok(match ptes {
        BlockPtes::Base => 0.0,
        BlockPtes::PartialSubblock => 1.0,
        BlockPtes::Superpage => {
            let log2_s = s.trailing_zeros();
            let active = nactive_log2(pages, log2_s);
            if active == 0 {
                0.0
            } else {
                full_blocks(pages, log2_s) as f64 / active as f64
            }
        }
        BlockPtes::Fraction(f) => {
            if !(0.0..=1.0).contains(&f) {
                return Err(ParamError::new("model.fss", format!("{f} is not usable: a fraction from 0 to 1")));
            }
            f
        }
    })
}

// ---------------------------------------------------------------------------------------------
// Evaluating a configured table
// ---------------------------------------------------------------------------------------------

/// Which Table 2 row a [`ModelRow`] comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Row {
    /// "Multi-level Linear".
    MultiLevelLinear,
    /// "Forward-mapped".
    ForwardMapped,
    /// "Hashed".
    Hashed,
    /// "Clustered".
    Clustered,
    /// "Clustered with Superpage / Partial-subblock".
    ClusteredSuperpage,
}

impl Row {
    /// The row's name as in Table 2.
    pub fn title(self) -> &'static str {
        match self {
            Row::MultiLevelLinear => "Multi-level Linear",
            Row::ForwardMapped => "Forward-mapped",
            Row::Hashed => "Hashed",
            Row::Clustered => "Clustered",
            Row::ClusteredSuperpage => "Clustered with Superpage / Partial-subblock",
        }
    }
}

/// One `Nactive(P)` value used by a formula, `P = 2^log2_pages` base pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NactiveValue {
    /// log2 of the region size in base pages (64 or more: the whole VPN space).
    pub log2_pages: u32,
    /// Active regions, summed over processes.
    pub regions: u64,
}

/// The inputs a formula used.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ModelInputs {
    /// Distinct mapped `(asid, vpn)` pages.
    pub mapped_pages: u64,
    /// Processes with at least one page.
    pub processes: u64,
    /// `Nactive(P)` values, in the order the formula uses them (tree levels leaf first).
    pub nactive: Vec<NactiveValue>,
    /// Tree levels (radix, linear).
    pub levels: Option<u32>,
    /// Entries per node of each level, leaf first (radix).
    pub entries_per_node: Vec<u64>,
    /// Mapping bytes (`page_table.pte_bytes`).
    pub pte_bytes: u64,
    /// Hash buckets (hashed, clustered).
    pub buckets: Option<u64>,
    /// Subblock factor (clustered).
    pub s: Option<u64>,
    /// Load factor α (hashed, clustered).
    pub alpha: Option<f64>,
    /// fss (clustered with superpage / partial-subblock PTEs).
    pub fss: Option<f64>,
    /// Linear: TLB miss ratio of first-level page-table translations.
    pub r: Option<f64>,
    /// Linear: cache lines per such miss.
    pub m: Option<f64>,
}

/// The formula values for one configured table over a page set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelRow {
    /// The Table 2 row.
    pub row: Row,
    /// Average cache lines per TLB miss.
    pub lines: f64,
    /// Page-table size in bytes (PTEs and nodes; exact integers except with a fractional fss).
    pub table_bytes: f64,
    /// Hash bucket array, `8 × buckets` (hashed, clustered; 0 otherwise), apart as in Table 2.
    pub bucket_bytes: u64,
    /// Linear tables: Table 2's "Linear with Hashed" size for the same pages (not simulated).
    pub linear_with_hashed_bytes: Option<u64>,
    /// What the formula used.
    pub inputs: ModelInputs,
}

/// Sorted, duplicate-free copy of `pages`.
fn normalized(pages: &[(u32, u64)]) -> Vec<(u32, u64)> {
    let mut v = pages.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// Longest average hash chain [`simulate`] builds and walks: each walk follows its chain and
/// each insertion searches it, so the work grows as pages² / buckets.
pub const MAX_AVERAGE_CHAIN: u64 = 64;

/// Refuses hashed and clustered tables whose chains would be so long on average (more than
/// [`MAX_AVERAGE_CHAIN`] PTEs per bucket) that building and walking them takes quadratic time.
/// `pages` is sorted.
fn check_chains(pages: &[(u32, u64)], cfg: &PageTableConfig) -> Result<(), ParamError> {
    let ptes = match cfg.kind {
        Kind::Hashed => pages.len() as u64,
        Kind::Clustered => {
            let s = cfg.subblock_factor as u64;
            pages.windows(2).filter(|w| (w[0].0, w[0].1 / s) != (w[1].0, w[1].1 / s)).count() as u64
                + !pages.is_empty() as u64
        }
        _ => return Ok(()),
    };
    if ptes > MAX_AVERAGE_CHAIN * cfg.buckets {
        return Err(ParamError::new(
            "page_table.buckets",
            format!(
                "{ptes} PTEs in {} buckets make chains of {} on average; simulating them takes time that grows as PTEs² / buckets, so xlat model stops at {MAX_AVERAGE_CHAIN} per bucket: raise page_table.buckets to at least {}",
                cfg.buckets,
                ptes / cfg.buckets,
                ptes.div_ceil(MAX_AVERAGE_CHAIN)
            ),
        ));
    }
    Ok(())
}

/// Checks that every page lies in the table's `va_bits` address space.
fn check_range(pages: &[(u32, u64)], cfg: &PageTableConfig, page_size: PageSize) -> Result<(), ParamError> {
    let vpn_bits = cfg.va_bits.saturating_sub(page_size.shift());
    if let Some(&(a, v)) = pages.iter().find(|&&(_, v)| v.checked_shr(vpn_bits).unwrap_or(0) != 0) {
        return Err(ParamError::new(
            "page_table.va_bits",
            format!(
                "page {v:#x} of ASID {a} lies outside the {}-bit address space: raise page_table.va_bits",
                cfg.va_bits
            ),
        ));
    }
    Ok(())
}

/// Table 2's values for the table `cfg` describes, over `pages` (`(asid, vpn)` base pages of
/// `page_size`, in any order, duplicates ignored).
///
/// - radix: the forward-mapped row with the configured geometry (page-walk caches ignored);
/// - linear: the multi-level linear row, with [`ModelRow::linear_with_hashed_bytes`] beside it;
///   `r_m = (r, m)` for the lines, or by default `r = 1` and `m = levels − 1` (no TLB entries
///   for page-table pages: every access to a first-level PTE misses and climbs to the root,
///   one line per level), which is what a walk without a TLB does;
/// - hashed: the hashed row (`ptes` does not apply);
/// - clustered: the clustered row with `ptes` = [`BlockPtes::Base`], otherwise the superpage /
///   partial-subblock row with fss from [`fss`].
///
/// Errors: the table's configuration (as [`PageTable::new`] checks it), pages outside
/// `va_bits`, or an explicit fss outside `[0, 1]`.
pub fn evaluate(
    pages: &[(u32, u64)],
    cfg: &PageTableConfig,
    page_size: PageSize,
    ptes: BlockPtes,
    r_m: Option<(f64, f64)>,
) -> Result<ModelRow, ParamError> {
    // The table's own checks, and its resolved geometry.
    let table = PageTable::new(cfg, page_size)?;
    check_range(pages, cfg, page_size)?;
    let pages = normalized(pages);
    let pte_bytes = cfg.pte_bytes as u64;
    let mut inputs = ModelInputs {
        mapped_pages: pages.len() as u64,
        processes: nactive_log2(&pages, 64),
        pte_bytes,
        ..ModelInputs::default()
    };
    let na = |log2: u32| NactiveValue { log2_pages: log2, regions: nactive_log2(&pages, log2) };
    let mut bucket_bytes = 0;
    let mut linear_with_hashed_bytes = None;
    let (row, lines, table_bytes) = match &table {
        PageTable::Radix(t) => {
            let bits = t.bits_per_level();
            let mut pb = 0u32;
            let mut levels = Vec::with_capacity(bits.len());
            for &b in &bits {
                pb += b;
                let v = na(pb);
                inputs.nactive.push(v);
                inputs.entries_per_node.push(1u64 << b);
                levels.push((1u64 << b, v.regions));
            }
            inputs.levels = Some(bits.len() as u32);
            let size = forward_mapped_size(pte_bytes, &levels);
            (Row::ForwardMapped, forward_mapped_lines(bits.len() as u32), size as f64)
        }
        PageTable::Linear(t) => {
            let nlevels = t.levels();
            let page = page_size.bytes();
            let b = page_size.shift() - pte_bytes.trailing_zeros();
            let vpn_bits = cfg.va_bits - page_size.shift();
            let top_bits = vpn_bits.saturating_sub(b * (nlevels - 1));
            let root_bytes = ((1u64 << top_bits) * pte_bytes).max(page);
            let mut counts = Vec::with_capacity(nlevels as usize);
            for i in 1..=nlevels {
                // The wired root covers the whole VPN space (pb_top = 2^(9·nlevels) in the
                // paper's minimum tree, the same regions; more with a root wider than a page).
                let v = na(if i == nlevels { vpn_bits } else { b * i });
                inputs.nactive.push(v);
                counts.push(v.regions);
            }
            inputs.levels = Some(nlevels);
            let (r, m) = r_m.unwrap_or(if nlevels > 1 { (1.0, (nlevels - 1) as f64) } else { (0.0, 0.0) });
            inputs.r = Some(r);
            inputs.m = Some(m);
            linear_with_hashed_bytes = Some(linear_hashed_size(page, pte_bytes, nactive_log2(&pages, b)));
            (Row::MultiLevelLinear, linear_lines(r, m), linear_size(page, root_bytes, &counts) as f64)
        }
        PageTable::Hashed(t) => {
            let v = na(0);
            inputs.nactive.push(v);
            let alpha = load_factor(v.regions, t.buckets());
            inputs.buckets = Some(t.buckets());
            inputs.alpha = Some(alpha);
            bucket_bytes = 8 * t.buckets();
            (Row::Hashed, hashed_lines(alpha), hashed_size(pte_bytes, v.regions) as f64)
        }
        PageTable::Clustered(t) => {
            let s = t.subblock_factor() as u64;
            let v = na(s.trailing_zeros());
            inputs.nactive.push(v);
            let alpha = load_factor(v.regions, t.buckets());
            inputs.buckets = Some(t.buckets());
            inputs.s = Some(s);
            inputs.alpha = Some(alpha);
            bucket_bytes = 8 * t.buckets();
            if ptes == BlockPtes::Base {
                (Row::Clustered, clustered_lines(alpha), clustered_size(s, pte_bytes, v.regions) as f64)
            } else {
                let f = fss(&pages, s, ptes)?;
                inputs.fss = Some(f);
                let size = clustered_fss_size(s, pte_bytes, v.regions, f);
                (Row::ClusteredSuperpage, clustered_lines(alpha), size)
            }
        }
    };
    Ok(ModelRow { row, lines, table_bytes, bucket_bytes, linear_with_hashed_bytes, inputs })
}

// ---------------------------------------------------------------------------------------------
// The simulated table over the same pages
// ---------------------------------------------------------------------------------------------

/// The simulated table built from a page set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SimRow {
    /// Table 2 size of the simulated table.
    pub table_bytes: u64,
    /// Bucket array bytes.
    pub bucket_bytes: u64,
    /// Nodes or PTEs.
    pub objects: u64,
    /// Walks made: one to every mapped page.
    pub walks: u64,
    /// Cache lines of all walks (the configured accounting).
    pub walk_lines: u64,
    /// Memory references of all walks.
    pub walk_refs: u64,
    /// Average cache lines per walk.
    pub lines: f64,
    /// How blocks were stored: `base`, or the [`BlockPtes`] asked for when the table kept
    /// superpage / partial-subblock PTEs (clustered tables that support them).
    pub block_ptes: &'static str,
}

/// True if `table` keeps a PTE of `size` base pages given once for the whole block (the
/// superpage / partial-subblock contract of `docs/superpages.md`), probed on a scratch copy.
fn keeps_block_ptes(cfg: &PageTableConfig, page_size: PageSize, s: u64, partial: bool) -> bool {
    let Some(block) = PageSize::from_shift(page_size.shift() + s.trailing_zeros()) else { return false };
    if s < 2 || (partial && s > 64) {
        return false;
    }
    let Ok(mut t) = PageTable::new(cfg, page_size) else { return false };
    let (valid, want_mapped, want_unmapped) = if partial { (0b101, 2, Some(1)) } else { (0, s - 1, None) };
    t.map(Asid(0), Vpn(0), Pte { pfn: Pfn(0), size: block, valid });
    let mapped_ok = t.get(Asid(0), Vpn(want_mapped)).map(|p| p.pfn) == Some(Pfn(want_mapped));
    let unmapped_ok = want_unmapped.map_or(true, |v| t.get(Asid(0), Vpn(v)).is_none());
    mapped_ok && unmapped_ok
}

/// Builds the table `cfg` describes (page-walk caches removed), maps every page of `pages` and
/// walks to each once with no TLB ([`NoTlb`]), in ASID then VPN order.
///
/// Frames are given block by block in VPN order, properly placed (page `i` of a block in frame
/// `block_frame + i`). With `ptes` other than [`BlockPtes::Base`], a clustered table that keeps
/// superpage / partial-subblock PTEs (checked on a scratch table) gets a superpage PTE per fully
/// populated block, or a partial-subblock PTE per active block; every other table, and an
/// explicit fraction, gets base-page PTEs ([`SimRow::block_ptes`] says which).
pub fn simulate(
    pages: &[(u32, u64)],
    cfg: &PageTableConfig,
    page_size: PageSize,
    ptes: BlockPtes,
) -> Result<SimRow, ParamError> {
    let mut cfg = cfg.clone();
    cfg.pwc.clear();
    let mut pt = PageTable::new(&cfg, page_size)?;
    check_range(pages, &cfg, page_size)?;
    let pages = normalized(pages);
    check_chains(&pages, &cfg)?;
    let s = cfg.subblock_factor as u64;
    let mode = match (cfg.kind, ptes) {
        (Kind::Clustered, BlockPtes::Superpage) if keeps_block_ptes(&cfg, page_size, s, false) => ptes,
        (Kind::Clustered, BlockPtes::PartialSubblock) if keeps_block_ptes(&cfg, page_size, s, true) => ptes,
        _ => BlockPtes::Base,
    };
    // Blocks of s pages for frame placement (s = 1 for tables without page blocks works too).
    let sb = if cfg.kind == Kind::Clustered { s } else { 16 };
    let block = PageSize::from_shift(page_size.shift() + sb.trailing_zeros());
    let mut i = 0;
    let mut next_block_frame = 0u64;
    while i < pages.len() {
        let (asid, first) = pages[i];
        let key = first / sb;
        let mut j = i;
        let mut valid = 0u64;
        while j < pages.len() && pages[j].0 == asid && pages[j].1 / sb == key {
            if sb <= 64 {
                valid |= 1 << (pages[j].1 % sb);
            }
            j += 1;
        }
        let frame = next_block_frame;
        next_block_frame += sb;
        let base = key * sb;
        let full = (j - i) as u64 == sb;
        match (mode, block) {
            (BlockPtes::Superpage, Some(size)) if full => {
                pt.map(Asid(asid), Vpn(base), Pte { pfn: Pfn(frame), size, valid: 0 });
            }
            (BlockPtes::PartialSubblock, Some(size)) => {
                let off = first - base;
                pt.map(Asid(asid), Vpn(first), Pte { pfn: Pfn(frame + off), size, valid });
            }
            _ => {
                for &(_, v) in &pages[i..j] {
                    pt.map(Asid(asid), Vpn(v), Pte::base(Pfn(frame + (v - base)), page_size));
                }
            }
        }
        i = j;
    }
    let mut rec = WalkRecord::default();
    let (mut walk_lines, mut walk_refs) = (0u64, 0u64);
    for &(a, v) in &pages {
        rec.reset();
        let found = pt.walk(Asid(a), Vpn(v), &mut NoTlb, &mut rec);
        debug_assert!(found.is_some(), "a mapped page is found");
        walk_lines += rec.cache_lines;
        walk_refs += rec.mem_refs;
    }
    let PtSize { table_bytes, bucket_bytes, objects } = pt.size();
    let walks = pages.len() as u64;
    Ok(SimRow {
        table_bytes,
        bucket_bytes,
        objects,
        walks,
        walk_lines,
        walk_refs,
        lines: walk_lines as f64 / walks.max(1) as f64,
        block_ptes: mode.name(),
    })
}

/// The resident pages of `snap` as `(asid, vpn)` base pages of `page_size`, ASID = the
/// process's index. A page of `page_size` is mapped if any snapshot page inside it is resident;
/// a snapshot page larger than `page_size` maps every page it covers. Sorted, no duplicates.
pub fn snapshot_pages(snap: &Snapshot, page_size: PageSize) -> Result<Vec<(u32, u64)>, ParamError> {
    let from = PageSize::from_bytes(snap.page_size)
        .ok_or_else(|| {
            ParamError::new("page_size", format!("snapshot page size {} is not a power of two", snap.page_size))
        })?
        .shift();
    let to = page_size.shift();
    let mut out = Vec::with_capacity(snap.resident_pages() as usize);
    for (i, p) in snap.processes.iter().enumerate() {
        let a = i as u32;
        if from >= to {
            let k = from - to;
            for &v in &p.resident {
                let first = v.checked_shl(k).filter(|f| f >> k == v).ok_or_else(|| {
                    ParamError::new("page_size", format!("snapshot page {v:#x} is beyond a 64-bit address space"))
                })?;
                out.extend((0..1u64 << k).map(|j| (a, first + j)));
            }
        } else {
            out.extend(p.resident.iter().map(|&v| (a, v >> (to - from))));
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nactive_counts_regions_per_process() {
        // Pages 0, 1, 511, 512 of ASID 0 and page 0 of ASID 1: regions of 1, 16, 512 pages.
        let pages = [(0, 0), (0, 1), (0, 511), (0, 512), (1, 0)];
        assert_eq!(nactive(&pages, 1), 5);
        assert_eq!(nactive(&pages, 16), 4); // {0-15}, {496-511}, {512-527} and ASID 1's
        assert_eq!(nactive(&pages, 512), 3);
        assert_eq!(nactive_log2(&pages, 64), 2);
        // Unsorted, with duplicates.
        assert_eq!(nactive(&[(0, 512), (1, 0), (0, 0), (0, 512)], 512), 3);
        // Non-power-of-two regions: 0..=2 and 3..=5.
        assert_eq!(nactive(&[(0, 2), (0, 3), (0, 5)], 3), 2);
    }

    #[test]
    fn paper_constants() {
        // §3: with s = 16 a clustered PTE costs as much as six hashed PTEs (144 = 6 × 24).
        assert_eq!(clustered_size(16, 8, 1), 144);
        assert_eq!(hashed_size(8, 6), 144);
        assert_eq!(linear_hashed_size(4096, 8, 1), 4096 + 24);
        assert_eq!(clustered_fss_size(16, 8, 4, 0.25), 24.0 + 3.0 * 144.0);
        assert_eq!(full_blocks(&(0..40).map(|v| (0, v)).collect::<Vec<_>>(), 4), 2);
    }

    #[test]
    fn explicit_fss_is_checked() {
        let e = fss(&[], 16, BlockPtes::Fraction(1.5)).unwrap_err();
        assert_eq!(e.key, "model.fss");
        assert_eq!(fss(&[], 16, BlockPtes::Fraction(0.5)).unwrap(), 0.5);
    }
}
