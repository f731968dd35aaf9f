//! The operating-system model: processes, demand paging, physical frame allocation, page
//! reservation and page-size assignment (talluri95 §4.1, §6.1).
//!
//! The first touch of a virtual page allocates a frame and maps it in the page table (a page
//! fault). Unmapping frees the frames and shoots down TLB entries (the engine does the TLB part).
//! The OS keeps its own record of resident pages (an ordered map per system, touched only on
//! faults, unmaps, forks and exits — never on the per-reference path) so that unmapping a large
//! range costs time proportional to what is resident in it.
//!
//! With `os.reservation`, virtual memory is handled in aligned *page blocks* of
//! `os.block_pages` base pages. The first fault in a block reserves an aligned block of frames,
//! and each page of the block faulted in later goes to its *properly placed* frame
//! (`block_frame + index`). How a block is mapped is a function of its state (see
//! `docs/superpages.md`): a superpage PTE when every page is resident and properly placed (and
//! `os.superpages` is not `none`), else one partial-subblock PTE when `os.partial_subblock` is on
//! and every resident page is properly placed, else base PTEs. The OS tells the engine what the
//! page table must do as [`PtOp`]s and which TLB ranges to shoot down.

mod frames;
pub mod keys;
pub mod layout;
pub mod mach3;
mod pcache;
pub mod regions;
pub mod rights;
pub mod shadow;
mod shadow_os;

pub use frames::{AllocatorKind, FrameAllocator};
pub use pcache::PageCacheStats;

use crate::addr::{Asid, PageSize, Pfn, Vpn};
use crate::pt::{ParamError, Pte};
use std::collections::{BTreeMap, HashMap};

/// Page-size assignment policy (`os.superpages`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Superpages {
    /// Base pages only.
    #[default]
    None,
    /// Static page-size assignment: the first fault in a block whose reservation succeeds brings
    /// in and maps the whole block as one superpage.
    Static,
    /// Dynamic page-size assignment: a reserved block is promoted to a superpage when its last
    /// page becomes resident, and demoted when any of its pages is unmapped.
    Promote,
}

impl Superpages {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Superpages::None => "none",
            Superpages::Static => "static",
            Superpages::Promote => "promote",
        }
    }
}

/// What a fork does to the parent's TLB entries (`os.fork_flush`). A fork write-protects the
/// parent's private pages for copy on write, so a kernel flushes the translations the parent
/// holds: Linux's `dup_mmap` (kernel/fork.c) ends with `flush_tlb_mm` of the parent's mm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum ForkFlush {
    /// Nothing: the parent's entries stay.
    #[default]
    None,
    /// Every TLB entry of the parent's own address spaces is invalidated (a flush of its mm,
    /// as a TLB without region IDs must do); shared regions and global entries stay.
    Parent,
    /// Linux/ia64's `flush_tlb_mm` (include/asm-ia64/tlbflush.h): the parent's mm gets a new
    /// context, so its private regions get new region IDs and nothing is purged; its entries
    /// under the old RIDs can never hit again (xlat drops them at once) and the long VHPT's
    /// entries under them are dead. Shared regions keep their RIDs. Needs `[itanium]`.
    NewContext,
}

impl ForkFlush {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            ForkFlush::None => "none",
            ForkFlush::Parent => "parent",
            ForkFlush::NewContext => "new-context",
        }
    }
}

/// `[os]` section of a config.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OsConfig {
    /// Physical frame allocator.
    pub frame_allocator: AllocatorKind,
    /// Physical memory in bytes (default 4 GiB); running out is an error, not a silent wrap.
    pub memory_bytes: u64,
    /// Seed of the random allocator and of reservation failures.
    pub seed: u64,
    /// Fraction of frames the random allocator leaves free but scattered before the trace starts
    /// (0 = none): a knob for fragmented memory. Ignored by the other allocators.
    pub fragmentation: f64,
    /// Global regions, each `"START-END"` (hex with `0x` or decimal; END exclusive): their pages
    /// are mapped once for all processes (like kernel mappings) and their TLB entries are global,
    /// matching every ASID and surviving flushes on a switch.
    pub global: Vec<String>,
    /// Page reservation: the first fault in an aligned page block reserves an aligned block of
    /// `block_pages` frames, and the block's pages are placed in it (default false).
    pub reservation: bool,
    /// Base pages per page block (power of two, 2..=64; default 16): the reservation unit, the
    /// superpage size and the subblock factor of partial-subblock PTEs.
    pub block_pages: u64,
    /// Probability (0..=1, seeded by `seed`) that a reservation finds no free aligned block in
    /// fragmented memory and fails (default 0).
    pub reservation_failure: f64,
    /// Page-size assignment: `none`, `static` or `promote` (default `none`); needs `reservation`.
    pub superpages: Superpages,
    /// Map a reserved block that is not a superpage by one partial-subblock PTE (default false);
    /// needs `reservation`.
    pub partial_subblock: bool,
    /// The kernel modelled: `linux` (its references are only the footprint of
    /// `kernel_text_bytes` and `kernel_data_bytes`) or `mach3` (bala94:
    /// kernel structures and page tables in mapped memory, IPC and system-call paths).
    pub personality: mach3::Personality,
    /// Shadow superpages (swanson98 §2.3): `none`, `heap`, `all` or `markers` (default `none`);
    /// the constants are in `[shadow]`.
    pub shadow_superpages: shadow::ShadowPolicy,
    /// A page cache: every mapping of one object page shares its frame, private writable
    /// mappings and forks copy on write (default true; see `os/pcache.rs`).
    pub page_cache: bool,
    /// What a fork does to the parent's TLB entries: `none`, `parent` or `new-context`
    /// (default `none`; see [`ForkFlush`]).
    pub fork_flush: ForkFlush,
    /// Kernel cycles per system call (default 0): `kernel.cycles` and a timed design's
    /// `time.breakdown.kernel` (docs/configuration.md, "Kernel time").
    pub syscall_cycles: u64,
    /// Kernel cycles per context switch (default 0).
    pub switch_cycles: u64,
    /// Kernel cycles per minor page fault: a fault that reads nothing in (default 0).
    pub minor_fault_cycles: u64,
    /// Kernel cycles per major page fault: a fault that reads a file page in (default 0).
    pub major_fault_cycles: u64,
    /// Kernel cycles per full TLB flush: flush-on-switch flushes and RID purges (default 0).
    pub flush_cycles: u64,
    /// Kernel cycles per IPC message (default 0).
    pub ipc_cycles: u64,
    /// Bytes of kernel text fetched per kernel event (system call, switch, fault, flush, IPC),
    /// through the TLBs and caches at [`KERNEL_BASE`] (default 0: none).
    pub kernel_text_bytes: u64,
    /// Bytes of kernel data loaded per kernel event, after the text (default 0: none).
    pub kernel_data_bytes: u64,
    /// How TLB shootdowns reach other cores (`[os.shootdown]`, docs/multicore.md).
    pub shootdown: crate::multicore::ShootdownConfig,
}

/// Where the kernel references of `os.kernel_text_bytes` and `os.kernel_data_bytes` lie: a
/// global range of the address space, the text at its start and the data
/// [`crate::limits::MAX_KERNEL_FOOTPRINT`] bytes above it, each page mapped to a fixed frame
/// above the user frames (`os.memory_bytes`).
pub const KERNEL_BASE: u64 = 0xFFFF_F000_0000_0000;

/// The kernel's per-event footprint (`os.kernel_text_bytes`, `os.kernel_data_bytes`): what a
/// system call, context switch, IPC or page fault fetches and loads of the kernel, in pages
/// of a global, wired mapping. `None` for a design without one (it pays nothing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelFootprint {
    /// Bytes of text fetched from [`KERNEL_BASE`].
    pub text_bytes: u64,
    /// Bytes of data loaded from [`KERNEL_BASE`] + 1 MiB.
    pub data_bytes: u64,
    /// The frame of [`KERNEL_BASE`]'s page: the first frame above the user frames.
    pub first_frame: u64,
}

impl KernelFootprint {
    /// The footprint of a validated `[os]` section with `frames` user frames; `None` if it has
    /// none.
    pub fn new(os: &OsConfig, frames: u64) -> Option<KernelFootprint> {
        (os.kernel_text_bytes + os.kernel_data_bytes > 0).then_some(KernelFootprint {
            text_bytes: os.kernel_text_bytes,
            data_bytes: os.kernel_data_bytes,
            first_frame: frames,
        })
    }

    /// The kernel's data, [`crate::limits::MAX_KERNEL_FOOTPRINT`] bytes above its text.
    pub const DATA: u64 = KERNEL_BASE + crate::limits::MAX_KERNEL_FOOTPRINT;
}

impl OsConfig {
    /// The `global` regions as inclusive byte ranges; errors name `os.global[i]`.
    pub fn global_ranges(&self) -> Result<Vec<(u64, u64)>, ParamError> {
        let num = |t: &str| {
            let t = t.trim().replace('_', "");
            match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => t.parse::<u64>().ok(),
            }
        };
        self.global
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let bad = || {
                    ParamError::new(
                        format!("os.global[{i}]"),
                        format!("expected \"START-END\" with START < END (hex with 0x or decimal), got \"{r}\""),
                    )
                };
                let (a, b) = r.split_once('-').ok_or_else(bad)?;
                let (lo, hi) = (num(a).ok_or_else(bad)?, num(b).ok_or_else(bad)?);
                if lo >= hi {
                    return Err(bad());
                }
                Ok((lo, hi - 1))
            })
            .collect()
    }

    /// Checks the paging keys (`reservation`, `block_pages`, `reservation_failure`,
    /// `superpages`, `partial_subblock`) for base pages of `page_size` bytes; errors name the key.
    pub fn validate(&self, page_size: u64) -> Result<(), ParamError> {
        let bp = self.block_pages;
        if !(2..=64).contains(&bp) || !bp.is_power_of_two() {
            return Err(ParamError::new("os.block_pages", format!("must be a power of two from 2 to 64, got {bp}")));
        }
        if !page_size.checked_mul(bp).is_some_and(|b| b <= 1 << 62) {
            return Err(ParamError::new(
                "os.block_pages",
                format!("a block of {bp} pages of {page_size} bytes is too large"),
            ));
        }
        if !(0.0..=1.0).contains(&self.reservation_failure) {
            return Err(ParamError::new(
                "os.reservation_failure",
                format!("must be a probability in [0, 1], got {}", self.reservation_failure),
            ));
        }
        if self.superpages != Superpages::None && !self.reservation {
            return Err(ParamError::new(
                "os.superpages",
                format!(
                    "\"{}\" needs os.reservation = true (superpages are built from reserved blocks)",
                    self.superpages.name()
                ),
            ));
        }
        if self.shadow_superpages != shadow::ShadowPolicy::None && self.reservation {
            return Err(ParamError::new(
                "os.shadow_superpages",
                "shadow superpages are made of scattered frames: they need os.reservation = false",
            ));
        }
        if self.partial_subblock && !self.reservation {
            return Err(ParamError::new(
                "os.partial_subblock",
                "needs os.reservation = true (partial-subblock PTEs map properly placed pages of reserved blocks)",
            ));
        }
        Ok(())
    }
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig {
            frame_allocator: AllocatorKind::Sequential,
            memory_bytes: 4 << 30,
            seed: 1,
            fragmentation: 0.0,
            global: Vec::new(),
            reservation: false,
            block_pages: 16,
            reservation_failure: 0.0,
            superpages: Superpages::None,
            partial_subblock: false,
            personality: mach3::Personality::Linux,
            shadow_superpages: shadow::ShadowPolicy::None,
            page_cache: true,
            fork_flush: ForkFlush::None,
            syscall_cycles: 0,
            switch_cycles: 0,
            minor_fault_cycles: 0,
            major_fault_cycles: 0,
            flush_cycles: 0,
            ipc_cycles: 0,
            kernel_text_bytes: 0,
            kernel_data_bytes: 0,
            shootdown: crate::multicore::ShootdownConfig::default(),
        }
    }
}

/// The paging policy of an [`Os`], built from a validated [`OsConfig`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Paging {
    page_size: PageSize,
    reservation: bool,
    block_pages: u64,
    reservation_failure: f64,
    superpages: Superpages,
    partial_subblock: bool,
    seed: u64,
}

impl Paging {
    /// The policy of `cfg` for base pages of `page_size`; errors name the key (see
    /// [`OsConfig::validate`]).
    pub fn new(cfg: &OsConfig, page_size: PageSize) -> Result<Paging, ParamError> {
        cfg.validate(page_size.bytes())?;
        Ok(Paging {
            page_size,
            reservation: cfg.reservation,
            block_pages: cfg.block_pages,
            reservation_failure: cfg.reservation_failure,
            superpages: cfg.superpages,
            partial_subblock: cfg.partial_subblock,
            seed: cfg.seed,
        })
    }

    /// Plain demand paging with base pages of `page_size` (the default `[os]` policy).
    pub fn base_pages(page_size: PageSize) -> Paging {
        Paging::new(&OsConfig::default(), page_size).expect("the default policy is valid")
    }

    /// Base page size.
    pub fn page_size(&self) -> PageSize {
        self.page_size
    }

    /// Base pages per page block.
    pub fn block_pages(&self) -> u64 {
        self.block_pages
    }

    /// Size of a page block (a superpage, the span of a partial-subblock PTE).
    pub fn block_size(&self) -> PageSize {
        PageSize::from_shift(self.page_size.shift() + self.block_pages.trailing_zeros()).expect("validated")
    }
}

/// A page-table operation the OS asks for, applied in order by the engine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtOp {
    /// Install the mapping described by the PTE that contains the page (`pfn` is that page's
    /// frame). A superpage or partial-subblock PTE replaces one of the same block and size.
    /// Superpage and partial-subblock PTEs are named by the lowest mapped page of their block.
    Map(Asid, Vpn, Pte),
    /// Remove the whole mapping containing the page (a base PTE, superpage or partial-subblock PTE).
    Unmap(Asid, Vpn),
}

/// Counters of an [`Os`] (events so far and the live state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct OsStats {
    /// Reservations made.
    pub reservations: u64,
    /// Reservations that failed (the fragmentation knob or no free aligned block).
    pub reservation_failures: u64,
    /// Blocks promoted to a superpage from base or partial-subblock PTEs.
    pub promotions: u64,
    /// Superpages demoted because one of their pages was unmapped.
    pub demotions: u64,
    /// Superpage PTEs now mapped (one per process mapping it).
    pub superpages: u64,
    /// Partial-subblock PTEs now mapped.
    pub partial_subblock_ptes: u64,
    /// Reservations now held (a reservation shared by fork counts once).
    pub live_reservations: u64,
    /// Resident base pages of all processes.
    pub resident_pages: u64,
    /// Resident base pages that sit in their properly placed frame of a reservation.
    pub placed_pages: u64,
    /// Frames taken from the allocator (whole reserved blocks included).
    pub frames_in_use: u64,
    /// The page cache's counters (`os.page_cache`).
    pub page_cache: PageCacheStats,
    /// Pages copied on a write to a frame they shared (private file pages, pages a fork shares).
    pub cow_copies: u64,
}

/// Physical memory ran out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("physical memory exhausted after {frames} frames: os.memory_bytes is too small for this trace's footprint")]
pub struct OutOfMemory {
    /// Frames in the machine.
    pub frames: u64,
}

/// How a page block is mapped in the page table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Nothing resident.
    None,
    /// One base PTE per resident page.
    Base,
    /// One partial-subblock PTE.
    Partial,
    /// One superpage PTE.
    Super,
}

/// One process's page block (reservation on only), while it has resident pages.
#[derive(Clone, Copy, Debug)]
struct Block {
    /// First frame of the block's reservation, if it has one.
    resv: Option<u64>,
    /// Resident pages (bit i = page i of the block).
    resident: u64,
    /// Resident pages in their properly placed frame of `resv`.
    placed: u64,
    /// How the block is mapped now.
    kind: Kind,
}

/// A reservation: an aligned block of frames shared by the page blocks that refer to it. A
/// process's reservation (anonymous memory) is given back when no page block refers to it and
/// no page holds a frame of it; an object's (the page cache's, for one extent of an object) is
/// held by the cache for the whole run.
#[derive(Clone, Copy, Debug)]
struct Resv {
    /// Page blocks referring to it (more than one after fork), and the page cache for an
    /// object's.
    refs: u32,
    /// Frames of the block held by some page (bit i = frame `base + i`).
    used: u64,
    /// An object's reservation: its frames hold the object's pages only.
    object: bool,
}

/// Resident pages and frame ownership of one simulated system.
#[derive(Clone, Debug)]
pub struct Os {
    frames: FrameAllocator,
    paging: Paging,
    /// Mask of a full page block.
    full: u64,
    /// (asid, vpn) -> frame, for every resident base page.
    resident: BTreeMap<(u32, u64), u64>,
    /// Sharers of the frames that more than one page maps (fork shares frames between parent
    /// and child); a resident frame not in this map has exactly one.
    shared: HashMap<u64, u32>,
    /// (asid, vpn / block_pages) -> block, for blocks with resident pages (reservation on).
    blocks: BTreeMap<(u32, u64), Block>,
    /// First frame -> reservation.
    resv: HashMap<u64, Resv>,
    /// Generator of reservation failures.
    rng: u64,
    stats: OsStats,
    /// Scratch vectors of the base-page entry points.
    scratch_ops: Vec<PtOp>,
    scratch_sd: Vec<(Asid, Vpn, Vpn)>,
    /// Shadow superpages (swanson98), when `os.shadow_superpages` is not `none`.
    shadow: Option<Box<shadow::Shadow>>,
    /// The page cache, when `os.page_cache` is on (see [`Os::set_page_cache`]).
    pcache: Option<Box<pcache::PageCache>>,
    /// Frames holding a write-protected page (copy on write).
    cow: pcache::CowFrames,
    /// What a fork does to the parent's TLB entries (`os.fork_flush`).
    fork_flush: ForkFlush,
    /// The access rights of each process's mapped ranges (what a protection change removes).
    rights: rights::Rights,
}

/// Mask of bits `lo..=hi`.
fn bit_range(lo: u64, hi: u64) -> u64 {
    (u64::MAX >> (63 - hi)) & (u64::MAX << lo)
}

/// Indices of the set bits of `m`, lowest first.
fn bits(mut m: u64) -> impl Iterator<Item = u64> {
    std::iter::from_fn(move || {
        (m != 0).then(|| {
            let i = m.trailing_zeros() as u64;
            m &= m - 1;
            i
        })
    })
}

impl Os {
    /// An OS with base-page demand paging (4 KB PTEs) on `frames`. The engine's current entry
    /// points ([`Os::fault_in`], [`Os::evict_range`], [`Os::fork`]) use it.
    pub fn new(frames: FrameAllocator) -> Os {
        Os::with_paging(frames, Paging::base_pages(PageSize::SIZE_4K))
    }

    /// An OS with the paging policy `paging` on `frames`.
    pub fn with_paging(frames: FrameAllocator, paging: Paging) -> Os {
        let bp = paging.block_pages;
        Os {
            frames,
            paging,
            full: bit_range(0, bp - 1),
            resident: BTreeMap::new(),
            shared: HashMap::new(),
            blocks: BTreeMap::new(),
            resv: HashMap::new(),
            rng: (paging.seed ^ 0x5EED_0FF1_CE00_u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            stats: OsStats::default(),
            scratch_ops: Vec::new(),
            scratch_sd: Vec::new(),
            shadow: None,
            pcache: None,
            cow: pcache::CowFrames::default(),
            fork_flush: ForkFlush::None,
            rights: rights::Rights::default(),
        }
    }
}

impl Os {
    /// The paging policy.
    pub fn paging(&self) -> &Paging {
        &self.paging
    }

    /// Turns on the page cache and copy on write (`os.page_cache`). Under `os.reservation`,
    /// reservations belong to memory objects (Navarro et al., OSDI 2002, §4): a file page is
    /// read into the object's reservation for its aligned extent, so every mapping of it shares
    /// one properly placed frame, and a process's anonymous memory and copies on write go to
    /// its own reserved blocks. Under shadow superpages, the pages of a shadow region are the
    /// region's (placed by it, never faulted from the cache) and are not write-protected: a
    /// fork shares them as without the cache.
    pub fn set_page_cache(&mut self) {
        self.pcache = Some(Box::new(pcache::PageCache::new(self.paging.page_size.bytes())));
    }

    /// Sets what a fork does to the parent's TLB entries (`os.fork_flush`).
    pub fn set_fork_flush(&mut self, f: ForkFlush) {
        self.fork_flush = f;
    }

    /// What a fork does to the parent's TLB entries.
    pub fn fork_flush(&self) -> ForkFlush {
        self.fork_flush
    }

    /// True if page `vpn` of `asid` lies in a shadow superpage.
    fn in_shadow_superpage(&self, asid: Asid, vpn: Vpn) -> bool {
        self.shadow.is_some() && self.shadow_pte(asid, vpn).is_some()
    }

    /// True if this OS has a page cache.
    pub fn has_page_cache(&self) -> bool {
        self.pcache.is_some()
    }

    /// Space `space` maps laid-out bytes `[start, start + len)` from byte `offset` of object
    /// `object` (the trace's `Record::Object`) with `flags` (`map_flags`): a file-backed range
    /// of the page cache. Nothing without a page cache.
    pub fn map_object(&mut self, space: Asid, start: u64, len: u64, object: u32, offset: u64, flags: u32) {
        if let (Some(pc), true) = (&mut self.pcache, len > 0) {
            pc.map(space.0, start, len, (object, offset), flags, self.paging.page_size.shift());
        }
    }

    /// True while a store may have to copy a page (some frame holds a write-protected page, or
    /// some private writable file range may fault one in): the engine then tests stores
    /// ([`Os::is_cow_frame`]), which the loop of plain designs cannot.
    pub fn watches_writes(&self) -> bool {
        self.cow.count > 0 || self.pcache.as_ref().is_some_and(|p| p.cow_ranges > 0)
    }

    /// True if frame `pfn` holds a write-protected page: a store to it may copy
    /// ([`Os::write_fault`]). One compare when no frame does.
    #[inline(always)]
    pub fn is_cow_frame(&self, pfn: u64) -> bool {
        self.cow.get(pfn)
    }

    /// Page faults that read a file page in (page-cache misses).
    pub fn page_cache_misses(&self) -> u64 {
        self.pcache.as_ref().map_or(0, |p| p.misses)
    }

    /// The page cache's frame for faulting page `vpn` of `asid` if it lies in a file-backed
    /// range (read in on a miss), counted as one more holder of the frame; `None` for anonymous
    /// memory.
    fn cache_frame(&mut self, asid: Asid, vpn: Vpn) -> Result<Option<u64>, OutOfMemory> {
        match self.file_page(asid, vpn) {
            Some((key, cow)) => self.cache_page(key, cow).map(Some),
            None => Ok(None),
        }
    }

    /// The page-cache key of page `vpn` of `asid` and whether its mapping copies on write, if
    /// the page lies in a file-backed range.
    fn file_page(&self, asid: Asid, vpn: Vpn) -> Option<((u32, u64), bool)> {
        let pc = self.pcache.as_deref()?;
        let (first, r) = pc.range_of(asid.0, vpn)?;
        Some((pc.key(first, &r, vpn), r.cow))
    }

    /// The frame of object page `key` for a page that faults on it (read in on a miss),
    /// counted as one more holder of the frame and write-protected if `cow`. Under
    /// `os.reservation` a page read in goes to its properly placed frame of the object's
    /// reservation for its extent (reserved by the extent's first miss).
    fn cache_page(&mut self, key: (u32, u64), cow: bool) -> Result<u64, OutOfMemory> {
        let pc = self.pcache.as_deref_mut().expect("page cache");
        let pfn = match pc.frame(key) {
            Some(f) => {
                pc.stats.hits += 1;
                f
            }
            None => {
                let placed = match self.paging.reservation {
                    true => {
                        let bp = self.paging.block_pages;
                        let extent = (key.0, key.1 / bp);
                        let base = match self.pcache.as_deref().expect("page cache").extent(extent) {
                            Some(b) => b,
                            None => {
                                let b = self.try_reserve(true);
                                self.pcache.as_deref_mut().expect("page cache").set_extent(extent, b);
                                b
                            }
                        };
                        base.map(|b| {
                            let j = key.1 % bp;
                            self.resv.get_mut(&b).expect("object reservation").used |= 1u64 << j;
                            b + j
                        })
                    }
                    false => None,
                };
                let f = match placed {
                    Some(f) => f,
                    None => self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?,
                };
                self.pcache.as_deref_mut().expect("page cache").insert(key, f);
                f
            }
        };
        // The cache holds the frame besides the page.
        *self.shared.entry(pfn).or_insert(1) += 1;
        if cow {
            self.cow.set(pfn);
        }
        Ok(pfn)
    }

    /// A store to resident page `vpn` of `asid`, whose frame [`Os::is_cow_frame`] marked: if
    /// the page is write-protected (a private page whose frame has another holder), copies it to
    /// a fresh frame, appends the remap to `ops` and the page to `shootdown`, and returns the new
    /// frame; `None` if the page writes its frame in place (a shared mapping's, or the frame's
    /// last holder).
    pub fn write_fault(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<Option<Pfn>, OutOfMemory> {
        let Some(pc) = &self.pcache else {
            return Ok(None);
        };
        let Some(&pfn) = self.resident.get(&(asid.0, vpn.0)) else {
            return Ok(None);
        };
        if !self.shared.contains_key(&pfn)
            || !pc.range_of(asid.0, vpn).map_or(true, |(_, r)| r.cow)
            || self.in_shadow_superpage(asid, vpn)
        {
            return Ok(None);
        }
        if self.paging.reservation {
            return self.copy_into_reservation(asid, vpn, pfn, ops, shootdown).map(|f| Some(Pfn(f)));
        }
        let new = self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?;
        self.release(pfn);
        self.resident.insert((asid.0, vpn.0), new);
        self.stats.cow_copies += 1;
        ops.push(PtOp::Map(asid, vpn, Pte::base(Pfn(new), self.paging.page_size)));
        shootdown.push((asid, vpn, vpn));
        Ok(Some(Pfn(new)))
    }

    /// A copy on write of page `vpn` of `asid` (on frame `old`) under `os.reservation`: the
    /// copy goes to its properly placed frame of the block's own reservation if the block has
    /// one that no other block refers to and that frame is free; otherwise the block moves to
    /// a new reservation of its own (the block's other pages then sit outside it, so it is
    /// mapped by base PTEs until they are copied too), or if that fails the copy takes a single
    /// frame. The block's mapping follows its new state (a superpage is demoted). Returns the
    /// copy's frame.
    fn copy_into_reservation(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        old: u64,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<u64, OutOfMemory> {
        let bp = self.paging.block_pages;
        let (vb, i) = (vpn.0 / bp, vpn.0 % bp);
        let bit = 1u64 << i;
        let mut b = self.blocks[&(asid.0, vb)];
        let (old_kind, old_res) = (b.kind, b.resident);
        let own = b.resv.filter(|base| {
            let r = &self.resv[base];
            !r.object && r.refs == 1 && r.used & bit == 0
        });
        let own = match own {
            Some(base) => Some(base),
            None => match self.try_reserve(false) {
                Some(new) => {
                    if let Some(prev) = b.resv.replace(new) {
                        self.drop_reservation(prev);
                    }
                    self.stats.placed_pages -= b.placed.count_ones() as u64;
                    b.placed = 0;
                    Some(new)
                }
                None => None,
            },
        };
        let new = match own {
            Some(base) => {
                self.resv.get_mut(&base).expect("live reservation").used |= bit;
                base + i
            }
            None => self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?,
        };
        self.release(old);
        self.resident.insert((asid.0, vpn.0), new);
        self.stats.cow_copies += 1;
        if b.placed & bit != 0 {
            self.stats.placed_pages -= 1;
            b.placed &= !bit;
        }
        if own.is_some() {
            b.placed |= bit;
            self.stats.placed_pages += 1;
        }
        let reshaped = self.remap(asid, vb, old_kind, old_res, &mut b, ops);
        if old_kind == Kind::Base && b.kind == Kind::Base {
            // The page stays a base page, on its new frame.
            ops.push(PtOp::Map(asid, vpn, self.base_pte(asid, vpn.0)));
        }
        match reshaped {
            true => shootdown.push((asid, Vpn(vb * bp), Vpn(vb * bp + (bp - 1)))),
            false => shootdown.push((asid, vpn, vpn)),
        }
        self.blocks.insert((asid.0, vb), b);
        Ok(new)
    }

    /// A page fault on base page `vpn` of `asid`: allocates its frame (and maybe a reservation,
    /// or the whole block for static superpages), records it, and appends to `ops` what the page
    /// table must do to reflect the OS's mappings — a base PTE, a grown partial-subblock PTE (a
    /// `Map` replacing the old one), or on promotion `Unmap`s of the old PTEs then the `Map` of
    /// the superpage. Appends to `shootdown` the (asid, first, last) VPN ranges whose TLB entries
    /// must go (a promotion: the block). Returns `vpn`'s frame. A page already resident keeps its
    /// frame and gets its mapping re-emitted.
    pub fn fault(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> Result<Pfn, OutOfMemory> {
        if let Some(&pfn) = self.resident.get(&(asid.0, vpn.0)) {
            if let Some(pte) = self.mapping(asid, vpn) {
                ops.push(PtOp::Map(asid, vpn, pte));
            }
            return Ok(Pfn(pfn));
        }
        if !self.paging.reservation {
            let pfn = match self.pcache.is_some() {
                true => self.cache_frame(asid, vpn)?,
                false => None,
            };
            let pfn = match pfn {
                Some(p) => p,
                None => self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?,
            };
            self.resident.insert((asid.0, vpn.0), pfn);
            ops.push(PtOp::Map(asid, vpn, Pte::base(Pfn(pfn), self.paging.page_size)));
            return Ok(Pfn(pfn));
        }
        let bp = self.paging.block_pages;
        let (vb, i) = (vpn.0 / bp, vpn.0 % bp);
        let first = vb * bp;
        let file = if self.pcache.is_some() { self.file_page(asid, vpn) } else { None };
        let mut b = match self.blocks.get(&(asid.0, vb)) {
            Some(&b) => b,
            None => {
                let resv = match file {
                    // A file page: the block refers to the object's reservation for the page's
                    // extent when the virtual block and the extent align.
                    Some((key, _)) => {
                        let r = self.object_reservation(key).filter(|_| key.1 % bp == i);
                        if let Some(base) = r {
                            self.resv.get_mut(&base).expect("live reservation").refs += 1;
                        }
                        r
                    }
                    // Anonymous memory: a reservation of the block's own.
                    None => self.try_reserve(false),
                };
                Block { resv, resident: 0, placed: 0, kind: Kind::None }
            }
        };
        let (old_kind, old_res) = (b.kind, b.resident);
        let bit = 1u64 << i;
        if let Some((key, cow)) = file {
            let pfn = self.fault_file_page(asid, vpn, &mut b, key, cow)?;
            if self.remap(asid, vb, old_kind, old_res, &mut b, ops) {
                shootdown.push((asid, Vpn(first), Vpn(first + (bp - 1))));
            }
            self.blocks.insert((asid.0, vb), b);
            return Ok(Pfn(pfn));
        }
        // Anonymous memory: the block's own reservation (never an object's).
        let own = b.resv.filter(|base| !self.resv[base].object);
        let used = own.map(|base| self.resv[&base].used);
        let pfn = match (own, used) {
            // Static page-size assignment: bring in the whole block when it can be a superpage
            // (and no page of it is a file's).
            (Some(base), Some(used))
                if self.paging.superpages == Superpages::Static
                    && b.placed == b.resident
                    && used & self.full & !b.resident == 0
                    && !self.pcache.as_deref().is_some_and(|pc| pc.touches(asid.0, first, first + (bp - 1))) =>
            {
                let missing = self.full & !b.resident;
                for j in bits(missing) {
                    self.resident.insert((asid.0, first + j), base + j);
                }
                self.resv.get_mut(&base).expect("live reservation").used |= missing;
                b.resident |= missing;
                b.placed |= missing;
                self.stats.placed_pages += missing.count_ones() as u64;
                base + i
            }
            (Some(base), Some(used)) if used & bit == 0 => {
                self.resv.get_mut(&base).expect("live reservation").used |= bit;
                b.resident |= bit;
                b.placed |= bit;
                self.stats.placed_pages += 1;
                self.resident.insert((asid.0, vpn.0), base + i);
                base + i
            }
            _ => {
                // No reservation, or its frame for this page is held by a process sharing it.
                let pfn = self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?;
                b.resident |= bit;
                self.resident.insert((asid.0, vpn.0), pfn);
                pfn
            }
        };
        if self.remap(asid, vb, old_kind, old_res, &mut b, ops) {
            shootdown.push((asid, Vpn(first), Vpn(first + (bp - 1))));
        }
        self.blocks.insert((asid.0, vb), b);
        Ok(Pfn(pfn))
    }

    /// The object's reservation for the extent holding object page `key` (made by the extent's
    /// first page read in: it may be made here, for a page about to be read in), or `None` if it
    /// failed.
    fn object_reservation(&mut self, key: (u32, u64)) -> Option<u64> {
        let extent = (key.0, key.1 / self.paging.block_pages);
        if let Some(b) = self.pcache.as_deref().expect("page cache").extent(extent) {
            return b;
        }
        let b = self.try_reserve(true);
        self.pcache.as_deref_mut().expect("page cache").set_extent(extent, b);
        b
    }

    /// A fault on file page `vpn` of `asid` (object page `key`) in block `b` under
    /// `os.reservation`: the page takes the cache's frame, properly placed in `b` if the frame
    /// is the block's reservation's frame for it. With static page-size assignment, a block
    /// placed in the object's reservation that one file range covers brings in its every page.
    fn fault_file_page(
        &mut self,
        asid: Asid,
        vpn: Vpn,
        b: &mut Block,
        key: (u32, u64),
        cow: bool,
    ) -> Result<u64, OutOfMemory> {
        let bp = self.paging.block_pages;
        let (first, i) = (vpn.0 - vpn.0 % bp, vpn.0 % bp);
        let mut pages = 1u64 << i;
        if self.paging.superpages == Superpages::Static
            && b.placed == b.resident
            && key.1 % bp == i
            && b.resv.is_some()
            && self.pcache.as_deref().expect("page cache").extent((key.0, key.1 / bp)) == Some(b.resv)
        {
            let pc = self.pcache.as_deref().expect("page cache");
            if let Some((f, r)) = pc.range_of(asid.0, Vpn(first)) {
                if r.last >= first + (bp - 1) && pc.key(f, &r, Vpn(first)) == (key.0, key.1 - i) {
                    pages = self.full & !b.resident;
                }
            }
        }
        let mut pfn = 0;
        for j in bits(pages) {
            // Pages other than `vpn`'s are read only in the aligned case above.
            let f = self.cache_page(if j == i { key } else { (key.0, key.1 - i + j) }, cow)?;
            self.resident.insert((asid.0, first + j), f);
            b.resident |= 1u64 << j;
            if f >= j && b.resv == Some(f - j) {
                b.placed |= 1u64 << j;
                self.stats.placed_pages += 1;
            }
            if j == i {
                pfn = f;
            }
        }
        Ok(pfn)
    }

    /// Unmaps the resident pages of `asid` in `[first, last]`: `Unmap` ops for the mappings
    /// touched, `Map` ops re-mapping the pages of a demoted superpage or shrunk partial-subblock
    /// PTE that stay resident; frees frames and reservations no one else holds. `shootdown` gets
    /// every range whose TLB entries must go: `[first, last]` when a page was removed, and whole
    /// blocks whose mapping changed kind (demotions). Returns the number of base pages removed.
    pub fn unmap_range(
        &mut self,
        asid: Asid,
        first: Vpn,
        last: Vpn,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> u64 {
        self.drop_pages(asid, first, last, ops, shootdown, true)
    }

    /// Drops the resident pages of `asid` in `[first, last]` as [`Os::unmap_range`] does, but
    /// the mapping stays (`madvise(MADV_DONTNEED)`): the page cache keeps the range's object, so
    /// the next touch of a file page finds the file's page again and of an anonymous page a
    /// fresh one. Returns the number of base pages dropped.
    pub fn discard_range(
        &mut self,
        asid: Asid,
        first: Vpn,
        last: Vpn,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
    ) -> u64 {
        self.drop_pages(asid, first, last, ops, shootdown, false)
    }

    /// Resident base pages of `asid` in `[first, last]`.
    pub fn resident_in(&self, asid: Asid, first: Vpn, last: Vpn) -> u64 {
        self.resident.range((asid.0, first.0)..=(asid.0, last.0)).count() as u64
    }

    /// The access rights of each process's mapped ranges.
    pub fn rights_mut(&mut self) -> &mut rights::Rights {
        &mut self.rights
    }

    fn drop_pages(
        &mut self,
        asid: Asid,
        first: Vpn,
        last: Vpn,
        ops: &mut Vec<PtOp>,
        shootdown: &mut Vec<(Asid, Vpn, Vpn)>,
        unmap: bool,
    ) -> u64 {
        let mut removed = 0u64;
        let mut cursor = first.0;
        let bp = self.paging.block_pages;
        if self.shadow.is_some() {
            self.shadow_teardown(asid, first, last, ops, shootdown);
        }
        if let (Some(pc), true) = (&mut self.pcache, unmap) {
            pc.unmap(asid.0, first.0, last.0);
        }
        while cursor <= last.0 {
            let Some((&(_, v), &pfn)) = self.resident.range((asid.0, cursor)..=(asid.0, last.0)).next() else {
                break;
            };
            if !self.paging.reservation {
                self.resident.remove(&(asid.0, v));
                self.release(pfn);
                ops.push(PtOp::Unmap(asid, Vpn(v)));
                removed += 1;
                match v.checked_add(1) {
                    Some(c) => cursor = c,
                    None => break,
                }
                continue;
            }
            let vb = v / bp;
            let bfirst = vb * bp;
            let blast = bfirst + (bp - 1);
            let mut b = self.blocks[&(asid.0, vb)];
            let (old_kind, old_res) = (b.kind, b.resident);
            let gone = b.resident & bit_range(first.0.max(bfirst) - bfirst, last.0.min(blast) - bfirst);
            for j in bits(gone) {
                let pfn = self.resident.remove(&(asid.0, bfirst + j)).expect("resident page of the block");
                self.release(pfn);
            }
            removed += gone.count_ones() as u64;
            self.stats.placed_pages -= (b.placed & gone).count_ones() as u64;
            b.resident &= !gone;
            b.placed &= !gone;
            if self.remap(asid, vb, old_kind, old_res, &mut b, ops) {
                shootdown.push((asid, Vpn(bfirst), Vpn(blast)));
            }
            if b.resident == 0 {
                self.blocks.remove(&(asid.0, vb));
                if let Some(base) = b.resv {
                    self.drop_reservation(base);
                }
            } else {
                self.blocks.insert((asid.0, vb), b);
            }
            match blast.checked_add(1) {
                Some(c) => cursor = c,
                None => break,
            }
        }
        if removed > 0 {
            shootdown.push((asid, first, last));
        }
        removed
    }

    /// Fork: `child` gets the parent's resident pages, sharing their frames (and reservations),
    /// with the same kinds of mappings (a parent superpage is a superpage in the child, etc.);
    /// appends the child's `Map` ops. Blocks (or, without reservation, pages) the child already
    /// has are left as they are.
    pub fn fork_ops(&mut self, parent: Asid, child: Asid, ops: &mut Vec<PtOp>) {
        if parent == child {
            return;
        }
        let mut cursor = 0u64;
        if let Some(pc) = &mut self.pcache {
            pc.fork(parent.0, child.0);
        }
        if !self.paging.reservation {
            while let Some((&(_, v), &pfn)) = self.resident.range((parent.0, cursor)..=(parent.0, u64::MAX)).next() {
                if let std::collections::btree_map::Entry::Vacant(e) = self.resident.entry((child.0, v)) {
                    e.insert(pfn);
                    *self.shared.entry(pfn).or_insert(1) += 1;
                    if let Some(pc) = &self.pcache {
                        // Both copies of a private page are write-protected now (not a shadow
                        // region's page: the child shares its superpage).
                        if pc.range_of(parent.0, Vpn(v)).map_or(true, |(_, r)| r.cow)
                            && !self.in_shadow_superpage(parent, Vpn(v))
                        {
                            self.cow.set(pfn);
                        }
                    }
                    ops.push(PtOp::Map(child, Vpn(v), Pte::base(Pfn(pfn), self.paging.page_size)));
                }
                match v.checked_add(1) {
                    Some(c) => cursor = c,
                    None => break,
                }
            }
            self.shadow_fork(parent, child, ops);
            return;
        }
        let bp = self.paging.block_pages;
        while let Some((&(_, vb), &b)) = self.blocks.range((parent.0, cursor)..=(parent.0, u64::MAX)).next() {
            if !self.blocks.contains_key(&(child.0, vb)) {
                for j in bits(b.resident) {
                    let v = vb * bp + j;
                    let pfn = self.resident[&(parent.0, v)];
                    self.resident.insert((child.0, v), pfn);
                    *self.shared.entry(pfn).or_insert(1) += 1;
                    // Both copies of a private page are write-protected now.
                    if self
                        .pcache
                        .as_deref()
                        .is_some_and(|pc| pc.range_of(parent.0, Vpn(v)).map_or(true, |(_, r)| r.cow))
                    {
                        self.cow.set(pfn);
                    }
                }
                if let Some(base) = b.resv {
                    self.resv.get_mut(&base).expect("live reservation").refs += 1;
                }
                self.stats.placed_pages += b.placed.count_ones() as u64;
                let mut c = Block { kind: Kind::None, ..b };
                self.remap(child, vb, Kind::None, 0, &mut c, ops);
                self.blocks.insert((child.0, vb), c);
            }
            match vb.checked_add(1) {
                Some(c) => cursor = c,
                None => break,
            }
        }
    }

    /// The mapping the OS holds for `vpn` of `asid` (what the page table must return), with
    /// `pfn` the frame of `vpn`; `None` if the page is not resident.
    pub fn mapping(&self, asid: Asid, vpn: Vpn) -> Option<Pte> {
        let pfn = Pfn(*self.resident.get(&(asid.0, vpn.0))?);
        if !self.paging.reservation {
            if self.shadow.is_some() {
                if let Some(pte) = self.shadow_pte(asid, vpn) {
                    return Some(pte);
                }
            }
            return Some(Pte::base(pfn, self.paging.page_size));
        }
        let b = &self.blocks[&(asid.0, vpn.0 / self.paging.block_pages)];
        let size = self.paging.block_size();
        Some(match b.kind {
            Kind::Partial => Pte { pfn, size, valid: b.resident },
            Kind::Super => Pte { pfn, size, valid: 0 },
            Kind::Base | Kind::None => Pte::base(pfn, self.paging.page_size),
        })
    }

    /// The real frame the OS gave resident page `vpn` of `asid` (for a page of a shadow
    /// superpage, the frame the memory controller's table maps its shadow page to).
    pub fn frame(&self, asid: Asid, vpn: Vpn) -> Option<Pfn> {
        self.resident.get(&(asid.0, vpn.0)).map(|&f| Pfn(f))
    }

    /// First frame of the reservation of the block holding `vpn` of `asid`, if the block has
    /// resident pages and a reservation.
    pub fn reservation(&self, asid: Asid, vpn: Vpn) -> Option<Pfn> {
        if !self.paging.reservation {
            return None;
        }
        self.blocks.get(&(asid.0, vpn.0 / self.paging.block_pages))?.resv.map(Pfn)
    }

    /// Counters: events so far and the live state.
    pub fn stats(&self) -> OsStats {
        OsStats {
            live_reservations: self.resv.len() as u64,
            resident_pages: self.resident.len() as u64,
            frames_in_use: self.frames.in_use(),
            page_cache: self.pcache.as_ref().map(|p| p.stats).unwrap_or_default(),
            ..self.stats
        }
    }

    /// Allocates a frame for a faulting page and records it as resident (base-page paging: the
    /// caller maps it as a base PTE).
    pub fn fault_in(&mut self, asid: Asid, vpn: Vpn) -> Result<Pfn, OutOfMemory> {
        let (mut ops, mut sd) = (std::mem::take(&mut self.scratch_ops), std::mem::take(&mut self.scratch_sd));
        let r = self.fault(asid, vpn, &mut ops, &mut sd);
        ops.clear();
        sd.clear();
        (self.scratch_ops, self.scratch_sd) = (ops, sd);
        r
    }

    /// Removes the resident pages of `asid` in `[first, last]`, freeing frames no one else
    /// shares; returns the VPNs removed (base-page paging: the caller unmaps them from the page
    /// table).
    pub fn evict_range(&mut self, asid: Asid, first: Vpn, last: Vpn) -> Vec<Vpn> {
        let (mut ops, mut sd) = (Vec::new(), Vec::new());
        self.unmap_range(asid, first, last, &mut ops, &mut sd);
        ops.into_iter().filter_map(|op| if let PtOp::Unmap(_, v) = op { Some(v) } else { None }).collect()
    }

    /// Gives `child` the parent's resident pages, sharing the frames; returns them (base-page
    /// paging: the caller maps them as base PTEs).
    pub fn fork(&mut self, parent: Asid, child: Asid) -> Vec<(Vpn, Pfn)> {
        let mut ops = Vec::new();
        self.fork_ops(parent, child, &mut ops);
        ops.into_iter().filter_map(|op| if let PtOp::Map(_, v, p) = op { Some((v, p.pfn)) } else { None }).collect()
    }

    /// Resident base pages of all processes.
    pub fn resident_pages(&self) -> u64 {
        self.resident.len() as u64
    }

    /// Every resident base page as (ASID, VPN), in order (allocates; for building snapshots of the
    /// simulated address spaces).
    pub fn resident_list(&self) -> Vec<(u32, u64)> {
        self.resident.keys().copied().collect()
    }

    /// Frames in use.
    pub fn frames_in_use(&self) -> u64 {
        self.frames.in_use()
    }

    /// A new reservation for a block faulted in for the first time (or, if `object`, for an
    /// object's extent whose first page the cache reads in), or `None` when it fails. It starts
    /// with one reference: the block's, or the cache's. A process's block that refers to an
    /// object's reservation adds one.
    fn try_reserve(&mut self, object: bool) -> Option<u64> {
        let p = self.paging.reservation_failure;
        let fails = p > 0.0 && {
            let mut x = self.rng;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.rng = x;
            let u = ((x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64) / (1u64 << 53) as f64;
            u < p
        };
        match if fails { None } else { self.frames.alloc_block(self.paging.block_pages) } {
            Some(base) => {
                self.resv.insert(base, Resv { refs: 1, used: 0, object });
                self.stats.reservations += 1;
                Some(base)
            }
            None => {
                self.stats.reservation_failures += 1;
                None
            }
        }
    }

    /// One page stops holding `pfn`: the frame goes back to its reservation (reservations are
    /// aligned, so the one holding a frame starts at the frame rounded down to a block), or to
    /// the allocator, when no one else holds it.
    fn release(&mut self, pfn: u64) {
        match self.shared.get_mut(&pfn) {
            Some(n) if *n > 2 => *n -= 1,
            Some(_) => {
                self.shared.remove(&pfn);
                // One holder left: it writes the frame in place.
                self.cow.clear(pfn);
            }
            None => {
                let base = pfn & !(self.paging.block_pages - 1);
                match self.resv.get_mut(&base) {
                    Some(r) if self.paging.reservation => {
                        r.used &= !(1u64 << (pfn - base));
                        self.free_if_unused(base);
                    }
                    _ => self.frames.free(pfn),
                }
            }
        }
    }

    /// A page block referring to reservation `base` has no resident page left, or was moved to
    /// another reservation (a copy on write).
    fn drop_reservation(&mut self, base: u64) {
        self.resv.get_mut(&base).expect("live reservation").refs -= 1;
        self.free_if_unused(base);
    }

    /// Gives reservation `base` back when no block refers to it and no page holds a frame of
    /// it (a block moved to a reservation of its own by a copy on write may leave pages on the
    /// old one's frames).
    fn free_if_unused(&mut self, base: u64) {
        let r = self.resv[&base];
        if r.refs == 0 && r.used == 0 {
            debug_assert!(!r.object, "the cache holds its reservations");
            self.resv.remove(&base);
            self.frames.free_block(base, self.paging.block_pages);
        }
    }

    /// The mapping kind a block's state calls for.
    fn kind_of(&self, b: &Block) -> Kind {
        if b.resident == 0 {
            Kind::None
        } else if b.resv.is_none() || b.placed != b.resident {
            Kind::Base
        } else if b.resident == self.full && self.paging.superpages != Superpages::None {
            Kind::Super
        } else if self.paging.partial_subblock {
            Kind::Partial
        } else {
            Kind::Base
        }
    }

    /// Brings block `vb` of `asid` from its mapping `old` of pages `old_res` to the mapping its
    /// new state calls for, appending the page-table ops. Returns true when mappings of pages
    /// that stay resident changed kind (the block's TLB entries must be shot down).
    fn remap(&mut self, asid: Asid, vb: u64, old: Kind, old_res: u64, b: &mut Block, ops: &mut Vec<PtOp>) -> bool {
        let new = self.kind_of(b);
        let first = vb * self.paging.block_pages;
        let (added, gone) = (b.resident & !old_res, old_res & !b.resident);
        b.kind = new;
        match (old, new) {
            (Kind::Base, Kind::Base) => {
                for j in bits(gone) {
                    ops.push(PtOp::Unmap(asid, Vpn(first + j)));
                }
                for j in bits(added) {
                    ops.push(PtOp::Map(asid, Vpn(first + j), self.base_pte(asid, first + j)));
                }
                false
            }
            (Kind::Partial, Kind::Partial) => {
                if gone != 0 {
                    ops.push(PtOp::Unmap(asid, Vpn(first + old_res.trailing_zeros() as u64)));
                }
                self.push_block_map(asid, first, b, ops);
                false
            }
            _ => {
                match old {
                    Kind::None => {}
                    Kind::Base => {
                        for j in bits(old_res) {
                            ops.push(PtOp::Unmap(asid, Vpn(first + j)));
                        }
                    }
                    Kind::Partial | Kind::Super => {
                        ops.push(PtOp::Unmap(asid, Vpn(first + old_res.trailing_zeros() as u64)))
                    }
                }
                match new {
                    Kind::None => {}
                    Kind::Base => {
                        for j in bits(b.resident) {
                            ops.push(PtOp::Map(asid, Vpn(first + j), self.base_pte(asid, first + j)));
                        }
                    }
                    Kind::Partial | Kind::Super => self.push_block_map(asid, first, b, ops),
                }
                let s = &mut self.stats;
                match old {
                    Kind::Partial => s.partial_subblock_ptes -= 1,
                    Kind::Super => s.superpages -= 1,
                    _ => {}
                }
                match new {
                    Kind::Partial => s.partial_subblock_ptes += 1,
                    Kind::Super => s.superpages += 1,
                    _ => {}
                }
                let reshaped = old != Kind::None && new != Kind::None;
                if reshaped && new == Kind::Super {
                    s.promotions += 1;
                }
                if reshaped && old == Kind::Super {
                    s.demotions += 1;
                }
                reshaped
            }
        }
    }

    /// A base PTE for resident page `vpn` of `asid`.
    fn base_pte(&self, asid: Asid, vpn: u64) -> Pte {
        Pte::base(Pfn(self.resident[&(asid.0, vpn)]), self.paging.page_size)
    }

    /// The `Map` of a block's superpage or partial-subblock PTE, named by its lowest page.
    fn push_block_map(&self, asid: Asid, first: u64, b: &Block, ops: &mut Vec<PtOp>) {
        let j = b.resident.trailing_zeros() as u64;
        let base = b.resv.expect("superpage and partial-subblock blocks are reserved");
        let valid = if b.kind == Kind::Partial { b.resident } else { 0 };
        ops.push(PtOp::Map(asid, Vpn(first + j), Pte { pfn: Pfn(base + j), size: self.paging.block_size(), valid }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fault_unmap_and_fork_share_frames() {
        let mut os = Os::new(FrameAllocator::new(AllocatorKind::Sequential, 16, 0, 0.0));
        let a = os.fault_in(Asid(1), Vpn(10)).unwrap();
        let b = os.fault_in(Asid(1), Vpn(11)).unwrap();
        assert_ne!(a, b);
        let shared = os.fork(Asid(1), Asid(2));
        assert_eq!(shared.len(), 2);
        assert_eq!(os.frames_in_use(), 2);
        assert_eq!(os.evict_range(Asid(1), Vpn(0), Vpn(100)), vec![Vpn(10), Vpn(11)]);
        assert_eq!(os.frames_in_use(), 2, "child still holds the frames");
        os.evict_range(Asid(2), Vpn(11), Vpn(11));
        assert_eq!(os.frames_in_use(), 1);
        assert_eq!(os.resident_pages(), 1);
    }

    #[test]
    fn running_out_of_memory_is_an_error() {
        let mut os = Os::new(FrameAllocator::new(AllocatorKind::Buddy, 2, 0, 0.0));
        os.fault_in(Asid(0), Vpn(0)).unwrap();
        os.fault_in(Asid(0), Vpn(1)).unwrap();
        assert!(os.fault_in(Asid(0), Vpn(2)).is_err());
    }

    fn parse(text: &str) -> OsConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn paging_keys_parse_and_default_to_base_pages() {
        let d = OsConfig::default();
        assert!(!d.reservation && !d.partial_subblock);
        assert_eq!((d.block_pages, d.reservation_failure, d.superpages), (16, 0.0, Superpages::None));
        assert_eq!(d.validate(4096), Ok(()));
        let c = parse(
            "reservation = true\nblock_pages = 8\nreservation_failure = 0.25\nsuperpages = \"promote\"\n\
             partial_subblock = true",
        );
        assert!(c.reservation && c.partial_subblock);
        assert_eq!((c.block_pages, c.reservation_failure, c.superpages), (8, 0.25, Superpages::Promote));
        assert_eq!(c.validate(4096), Ok(()));
        assert_eq!(parse("superpages = \"static\"").superpages, Superpages::Static);
        assert!(toml::from_str::<OsConfig>("superpages = \"dynamic\"").is_err());
        assert!(toml::from_str::<OsConfig>("reservations = true").is_err());
    }

    #[test]
    fn bad_paging_values_name_their_key() {
        let key = |text: &str| parse(text).validate(4096).unwrap_err().key;
        for bad in ["block_pages = 1", "block_pages = 12", "block_pages = 128", "block_pages = 0"] {
            assert_eq!(key(&format!("reservation = true\n{bad}")), "os.block_pages", "{bad}");
        }
        assert_eq!(key("reservation_failure = 1.5"), "os.reservation_failure");
        assert_eq!(key("reservation_failure = -0.1"), "os.reservation_failure");
        assert_eq!(key("reservation_failure = nan"), "os.reservation_failure");
        assert_eq!(key("superpages = \"static\""), "os.superpages");
        assert_eq!(key("superpages = \"promote\""), "os.superpages");
        assert_eq!(key("partial_subblock = true"), "os.partial_subblock");
        let huge = parse("reservation = true\nblock_pages = 64");
        assert_eq!(huge.validate(1 << 60).unwrap_err().key, "os.block_pages");
        assert_eq!(parse("reservation_failure = 1.0").validate(4096), Ok(()));
    }

    #[test]
    fn base_page_paging_emits_base_ptes() {
        let mut os = Os::new(FrameAllocator::new(AllocatorKind::Sequential, 16, 0, 0.0));
        let (mut ops, mut sd) = (Vec::new(), Vec::new());
        let p = os.fault(Asid(3), Vpn(7), &mut ops, &mut sd).unwrap();
        assert_eq!(ops, vec![PtOp::Map(Asid(3), Vpn(7), Pte::base(p, PageSize::SIZE_4K))]);
        assert!(sd.is_empty());
        assert_eq!(os.mapping(Asid(3), Vpn(7)), Some(Pte::base(p, PageSize::SIZE_4K)));
        assert_eq!(os.mapping(Asid(3), Vpn(8)), None);
        ops.clear();
        assert_eq!(os.unmap_range(Asid(3), Vpn(0), Vpn(u64::MAX), &mut ops, &mut sd), 1);
        assert_eq!(ops, vec![PtOp::Unmap(Asid(3), Vpn(7))]);
        assert_eq!(sd, vec![(Asid(3), Vpn(0), Vpn(u64::MAX))]);
        assert_eq!(os.stats().frames_in_use, 0);
    }
}
