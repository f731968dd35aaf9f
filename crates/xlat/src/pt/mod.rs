//! Page tables: how translations are stored in memory and what a TLB miss costs to find one.
//!
//! Every table implements the same small surface — [`PageTable::map`], [`PageTable::unmap`],
//! [`PageTable::walk`] and [`PageTable::size`] — behind the closed enum [`PageTable`], so the
//! engine's miss path is a `match`, never a virtual call. A walk reports the memory references it
//! made and the distinct cache lines they touched (talluri95's metric) in a [`WalkRecord`].
//!
//! Tables hold the translations of all processes: forward-mapped (radix) and linear tables keep
//! one tree per ASID; hashed and clustered tables are single global tables whose tags include the
//! ASID.

pub mod clustered;
pub mod hashed;
pub mod linear;
pub mod radix;
pub mod vhpt;

mod chain;
mod common;
mod table;
mod tree;

pub use table::PageTable;

use crate::addr::{Asid, PageSize, Pfn, PhysAddr, VirtAddr, Vpn};
use serde::Deserialize;

/// A translation as stored in a page table: the mapping that contains one base page.
///
/// Three kinds, told apart by `size` and `valid` (talluri95 Figure 6):
/// - a **base-page** PTE: `size` is the base page size, `valid == 0`;
/// - a **superpage** PTE: `size` is a power-of-two multiple of the base page, `valid == 0`; the
///   superpage is aligned in virtual and physical memory and every base page in it is mapped;
/// - a **partial-subblock** PTE: `size` is the page block (subblock factor × base page) and
///   `valid != 0` has bit `i` set when base page `i` of the block is mapped; the mapped pages are
///   properly placed (page `i` in frame `block_pfn + i`).
///
/// `pfn` is always the frame of the *base page* being mapped or looked up (for a superpage or
/// partial-subblock PTE: `block_pfn + offset`), so a caller that only knows base pages can use
/// any PTE unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pte {
    /// Frame of the base page looked up (or mapped).
    pub pfn: Pfn,
    /// Size of the mapping: the base page size, a superpage size, or the page block.
    pub size: PageSize,
    /// Partial-subblock valid vector over the base pages of the block (bit i = page i); 0 for
    /// base-page and superpage PTEs.
    pub valid: u64,
}

impl Pte {
    /// A base-page PTE.
    pub fn base(pfn: Pfn, size: PageSize) -> Pte {
        Pte { pfn, size, valid: 0 }
    }

    /// True for a partial-subblock PTE.
    pub fn is_partial(&self) -> bool {
        self.valid != 0
    }
}

/// Which cache-line accounting a walk uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LineAccounting {
    /// talluri95's assumption: every PTE (or node entry) read starts a new cache line, so an
    /// object costs the lines of the words read in it (counted from its start), and distinct
    /// objects never share a line. Hash bucket pointer reads are not counted (see
    /// `docs/page-tables.md`).
    #[default]
    Paper,
    /// The real layout: lines are the distinct `line_bytes`-aligned blocks of the physical
    /// addresses actually read.
    Layout,
}

/// The kind of page table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Forward-mapped radix tree (x86-64 style).
    #[default]
    Radix,
    /// Multi-level linear table in virtual memory, upper levels reached through reserved TLB entries.
    Linear,
    /// Hashed table with chaining (tag + next + mapping per PTE).
    Hashed,
    /// Clustered hashed table: one PTE maps a page block of `subblock_factor` base pages.
    Clustered,
    /// Itanium short-format VHPT: the leaf level of the OS's forward-mapped table seen by the
    /// hardware walker as a linear virtual array of 8-byte PTEs per region (a linear table
    /// whose page-table pages need TLB entries; chapman03 §2.3.1, §3.1).
    #[serde(rename = "vhpt-short")]
    VhptShort,
    /// Itanium long-format VHPT: a hashed table of 32-byte entries in front of the OS table
    /// `[page_table.os]`, used as a cache of it (chapman03 §3.1; [`vhpt`]).
    #[serde(rename = "vhpt-long")]
    VhptLong,
}

impl Kind {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Radix => "radix",
            Kind::Linear => "linear",
            Kind::Hashed => "hashed",
            Kind::Clustered => "clustered",
            Kind::VhptShort => "vhpt-short",
            Kind::VhptLong => "vhpt-long",
        }
    }
}

/// Hash function of hashed and clustered tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum HashFn {
    /// (VPN xor ASID-scramble) mod buckets: the simple hash of the papers.
    #[default]
    Xor,
    /// Multiplicative (Fibonacci) hashing of (VPN, ASID).
    Mult,
}

/// How a table stores superpage and partial-subblock PTEs (talluri95 §4.2, §4.3, §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SuperpageStore {
    /// Radix and linear: the PTE is copied to the site of every base page it covers.
    Replicate,
    /// Radix and linear: a superpage whose size is what one entry of an upper level covers is
    /// stored in that entry; other sizes are replicated.
    Intermediate,
    /// Hashed: one hashed table per page size, searched in `search_order`.
    Multiple,
    /// Hashed: one table hashed on the VPN at `index_page`; every PTE of that region, whatever
    /// its size, chains from the same bucket.
    SuperpageIndex,
    /// Clustered: the S/SZ fields of clustered PTEs (the only way for clustered tables).
    Native,
}

impl SuperpageStore {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            SuperpageStore::Replicate => "replicate",
            SuperpageStore::Intermediate => "intermediate",
            SuperpageStore::Multiple => "multiple",
            SuperpageStore::SuperpageIndex => "superpage-index",
            SuperpageStore::Native => "native",
        }
    }
}

/// `[page_table]` section of a config. Unknown keys are rejected.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PageTableConfig {
    /// Table kind.
    pub kind: Kind,
    /// Number of levels for radix and linear tables. Default: enough 9-bit levels to cover
    /// `va_bits` above the page offset (4 for 48-bit virtual addresses and 4 KB pages).
    pub levels: Option<u32>,
    /// Index bits per level, leaf level first if a list; a single number applies to all levels.
    /// Default 9 (512 8-byte entries in a 4 KB node).
    pub bits_per_level: Option<BitsPerLevel>,
    /// Virtual address bits translated (default 48).
    pub va_bits: u32,
    /// Bytes per PTE / page-table pointer in radix and linear nodes (default 8).
    pub pte_bytes: u32,
    /// Page-walk cache entries per non-leaf level of a radix table, top level first
    /// (x86-64 preset: `[4, 32, 32]` for PML4E, PDPTE, PDE caches). Empty: no page-walk caches.
    pub pwc: Vec<u32>,
    /// Hash buckets of hashed and clustered tables (default 4096).
    pub buckets: u64,
    /// Hash function of hashed and clustered tables.
    pub hash: HashFn,
    /// Base pages per clustered PTE (default 16); a power of two.
    pub subblock_factor: u32,
    /// Cache line size in bytes for walk accounting (default 64).
    pub line_bytes: u32,
    /// Cache-line accounting (default `paper`).
    pub accounting: LineAccounting,
    /// How superpage and partial-subblock PTEs are stored. Default by kind: `replicate` for radix
    /// and linear, `multiple` for hashed, `native` for clustered.
    pub superpage_store: Option<SuperpageStore>,
    /// Hashed tables with `multiple`: page sizes in bytes, in the order a walk searches their
    /// tables. Sizes not listed are searched after, smallest first. Default: smallest first.
    pub search_order: Vec<u64>,
    /// Hashed tables with `superpage-index`: the page size in bytes whose VPN is hashed (default:
    /// `subblock_factor` base pages, 64 KB with 4 KB pages).
    pub index_page: Option<u64>,
    /// VHPT kinds: `hardware` (the walker reads the VHPT; misses in it trap to software) or
    /// `software` (walker disabled: every TLB miss traps to the software refill handler).
    pub walker: Walker,
    /// `vhpt-long`: entries (a power of two); 0 = 4 x the page frames of `os.memory_bytes`
    /// (gray05 §3.4), rounded up to a power of two.
    pub vhpt_entries: u64,
    /// `vhpt-long`: the OS page table proper (any other kind); default a radix table over the
    /// same `va_bits`.
    pub os: Option<Box<PageTableConfig>>,
    /// `linear` and `vhpt-short`: which page-table translations a nested miss inserts into
    /// the TLB (default `leaf`).
    pub nested_fill: NestedFill,
}

/// What a linear table's nested miss (a miss on the translation of a page of PTEs) does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum NestedFill {
    /// Only the leaf page of PTEs is looked up in the TLB; on a miss the handler reads the
    /// upper levels with physical addresses (no TLB lookups, nothing inserted for them) and
    /// inserts the leaf page's translation alone: one nested miss and one insertion at most
    /// (Linux/ia64's VHPT miss handler; chapman03 §2.3.3, §3.1).
    #[default]
    Leaf,
    /// Every level below the wired root is a virtual linear array whose pages need TLB
    /// entries: a nested miss climbs a level at a time while the translations miss, and every
    /// page-table page translation resolved on the way down is inserted (talluri95 §2 and
    /// Table 2's `1 + r × m`; bala94 §2's cascaded L2 and L3 misses).
    EveryLevel,
}

impl NestedFill {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            NestedFill::Leaf => "leaf",
            NestedFill::EveryLevel => "every_level",
        }
    }
}

/// Who refills the TLB in a VHPT design.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Walker {
    /// The hardware walker (Itanium's VHPT walker).
    #[default]
    Hardware,
    /// Software refill only (walker disabled).
    Software,
}

impl Walker {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Walker::Hardware => "hardware",
            Walker::Software => "software",
        }
    }
}

impl PageTableConfig {
    /// The OS table of a `vhpt-long` design.
    pub fn os_table(&self) -> PageTableConfig {
        match &self.os {
            Some(o) => (**o).clone(),
            None => {
                PageTableConfig { va_bits: self.va_bits, line_bytes: self.line_bytes, ..PageTableConfig::default() }
            }
        }
    }

    /// The virtual address bits every table of a design translates, and the key that sets them:
    /// a long-format VHPT hashes any address, but the OS table behind it covers only its own
    /// `va_bits`, so the narrower of the two bounds the addresses a design can simulate.
    pub fn translated_va_bits(&self) -> (u32, &'static str) {
        if self.kind == Kind::VhptLong {
            let os = self.os_table().va_bits;
            if os < self.va_bits {
                return (os, "page_table.os.va_bits");
            }
        }
        (self.va_bits, "page_table.va_bits")
    }

    /// The superpage store in effect for this kind.
    pub fn store(&self) -> SuperpageStore {
        self.superpage_store.unwrap_or(match self.kind {
            Kind::Radix | Kind::Linear | Kind::VhptShort | Kind::VhptLong => SuperpageStore::Replicate,
            Kind::Hashed => SuperpageStore::Multiple,
            Kind::Clustered => SuperpageStore::Native,
        })
    }
}

/// Bits per level: one number for all levels or a list, leaf level first.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum BitsPerLevel {
    /// The same for every level.
    Uniform(u32),
    /// Per level, leaf first.
    PerLevel(Vec<u32>),
}

impl Default for PageTableConfig {
    fn default() -> Self {
        PageTableConfig {
            kind: Kind::Radix,
            levels: None,
            bits_per_level: None,
            va_bits: 48,
            pte_bytes: 8,
            pwc: Vec::new(),
            buckets: 4096,
            hash: HashFn::Xor,
            subblock_factor: 16,
            line_bytes: 64,
            accounting: LineAccounting::Paper,
            superpage_store: None,
            search_order: Vec::new(),
            index_page: None,
            walker: Walker::Hardware,
            vhpt_entries: 0,
            os: None,
            nested_fill: NestedFill::Leaf,
        }
    }
}

/// A configuration value that cannot be used, naming the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ParamError {
    /// Dotted config key, e.g. `page_table.buckets`.
    pub key: String,
    /// What was wrong and what is expected.
    pub message: String,
}

impl ParamError {
    /// Builds an error for `key`.
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> ParamError {
        ParamError { key: key.into(), message: message.into() }
    }
}

/// Physical address where page-table memory starts. Nodes, PTEs and bucket arrays are given
/// addresses from here up by a bump allocator, apart from the frames the OS model hands to data,
/// so a data-cache model can tell page-table reads apart and see their real layout.
pub const PT_PHYS_BASE: u64 = 1 << 40;

/// Most memory references one walk may record individually (deeper walks are still counted).
pub const MAX_WALK_REFS: usize = 64;

/// What one walk did. Filled by [`PageTable::walk`]; reset by the caller before each walk.
#[derive(Clone, Copy, Debug)]
pub struct WalkRecord {
    /// Memory references made (PTE/PTP/tag/bucket reads): one per cache line of a page-table
    /// object read, the object taken to start on a line boundary (see `docs/page-tables.md`).
    pub mem_refs: u64,
    /// Distinct cache lines touched, under the configured [`LineAccounting`].
    pub cache_lines: u64,
    /// Nested TLB misses taken by the walk itself (linear tables: misses on page-table pages).
    pub nested_misses: u64,
    /// Page-walk-cache hits (radix).
    pub pwc_hits: u64,
    /// Physical addresses read, in order (first [`MAX_WALK_REFS`]); for the data-cache cost model.
    pub addrs: [PhysAddr; MAX_WALK_REFS],
    /// Number of valid entries in `addrs`.
    pub n_addrs: u64,
    /// Lines seen by the current walk under layout accounting (scratch; a walk touching more
    /// distinct lines than this counts the rest as new).
    pub(crate) seen: [u64; 32],
    pub(crate) n_seen: u32,
    /// False when nothing reads `addrs` (designs without caches): replayed walks then only
    /// count their references.
    pub(crate) keep_addrs: bool,
}

impl Default for WalkRecord {
    fn default() -> Self {
        WalkRecord {
            mem_refs: 0,
            cache_lines: 0,
            nested_misses: 0,
            pwc_hits: 0,
            addrs: [PhysAddr(0); MAX_WALK_REFS],
            n_addrs: 0,
            seen: [0; 32],
            n_seen: 0,
            keep_addrs: true,
        }
    }
}

impl WalkRecord {
    /// Clears the record for the next walk.
    #[inline]
    pub fn reset(&mut self) {
        self.mem_refs = 0;
        self.cache_lines = 0;
        self.nested_misses = 0;
        self.pwc_hits = 0;
        self.n_addrs = 0;
    }

    /// Starts another walk without clearing the counters: they keep accumulating over walks
    /// (the engine's totals), only the recorded addresses start afresh.
    #[inline]
    pub fn begin_walk(&mut self) {
        self.n_addrs = 0;
    }

    /// A walk the page table replayed from its memo without keeping addresses (a plain
    /// design's fully associative run): `reads` references on as many lines.
    #[inline]
    pub fn replayed(&mut self, reads: u64) {
        self.begin_walk();
        self.mem_refs += reads;
        self.cache_lines += reads;
    }

    /// `n` references of a software refill handler (an OS personality's own walk: Mach's PTE
    /// loads and software-TLB probes), at addresses the personality charges itself.
    #[inline]
    pub fn handler_reads(&mut self, n: u64) {
        self.mem_refs += n;
    }

    /// Records one memory reference of `bytes` bytes at `addr` (does not touch `cache_lines`).
    #[inline]
    pub fn push_ref(&mut self, addr: PhysAddr) {
        self.mem_refs += 1;
        if (self.n_addrs as usize) < MAX_WALK_REFS {
            self.addrs[self.n_addrs as usize] = addr;
            self.n_addrs += 1;
        }
    }
}

/// The environment a walk runs in: lets a linear table translate the virtual addresses of its
/// own PTE pages through the TLB's reserved entries.
pub trait WalkEnv {
    /// Looks up the translation of page-table page `va` of process `asid` in the TLB entries that
    /// hold page-table translations. Returns true on a hit; on a miss the caller (the table) walks
    /// one level up, and then calls [`WalkEnv::fill_pt_translation`].
    fn lookup_pt_translation(&mut self, asid: Asid, va: VirtAddr) -> bool;
    /// Installs the translation of page-table page `va` after a nested miss.
    fn fill_pt_translation(&mut self, asid: Asid, va: VirtAddr);
}

/// Subblock prefetch as independent walks: one full walk per base page of the block (what a
/// table with no adjacency between the PTEs of neighbouring pages must do; talluri95 §4.4: "multiple
/// hash probes"). Tables that keep those PTEs together override it.
pub(crate) fn walk_block_each<E: WalkEnv>(
    vpn: Vpn,
    out: &mut [Option<Pte>],
    mut walk: impl FnMut(Vpn, &mut E) -> Option<Pte>,
    env: &mut E,
) -> Option<Pte> {
    debug_assert!(out.len().is_power_of_two());
    let first = vpn.0 & !(out.len() as u64 - 1);
    for (i, o) in out.iter_mut().enumerate() {
        *o = walk(Vpn(first + i as u64), env);
    }
    out[(vpn.0 - first) as usize]
}

/// A [`WalkEnv`] with no TLB: every page-table page translation misses (tests, size studies).
pub struct NoTlb;

impl WalkEnv for NoTlb {
    fn lookup_pt_translation(&mut self, _asid: Asid, _va: VirtAddr) -> bool {
        false
    }
    fn fill_pt_translation(&mut self, _asid: Asid, _va: VirtAddr) {}
}

/// Size of a page table in bytes, in talluri95's Table 2 accounting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PtSize {
    /// Bytes of PTEs and nodes: 4 KB per radix/linear node (`2^bits * pte_bytes` in general),
    /// 24 B per hashed PTE, `8s + 16` B per clustered PTE.
    pub table_bytes: u64,
    /// Bytes of hash bucket arrays (hashed and clustered), reported separately as in the paper.
    pub bucket_bytes: u64,
    /// Nodes (radix/linear) or PTEs (hashed/clustered) allocated.
    pub objects: u64,
}
