//! The TLB hierarchy: the design's structures (each a [`Tlb`] of one entry format), the path
//! of each kind of reference through them, the structure that holds page-table translations,
//! and how a translation is filled and shot down. Its counters are bumped through
//! [`SystemStats`]'s counting methods, as every other loop does.

use super::design::{Design, Path};
use super::front::Front;
use crate::addr::{Asid, PageSize, Vpn};
use crate::config::{Serves, TlbFormat};
use crate::pt::Pte;
use crate::stats::SystemStats;
use crate::tlb::{frame_of, Format, Tlb, TlbData};

/// One TLB structure of a system and what it is for.
#[derive(Clone, Debug)]
pub struct Structure {
    /// Name in reports (reserved partitions are `NAME.reserved`).
    pub name: String,
    /// Level, 1 = closest to the core.
    pub level: u32,
    /// What it serves; `None` for a reserved partition holding page-table translations.
    pub serves: Option<Serves>,
    /// Cycles per lookup.
    pub latency: u64,
    /// Entry format (reserved partitions: single).
    pub format: TlbFormat,
    /// Complete-subblock with subblock prefetch: a miss fills every mapped page of its block.
    pub prefetch: bool,
    /// The TLB itself.
    pub tlb: Tlb,
}

/// See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Tlbs {
    pub(crate) structures: Vec<Structure>,
    pub(crate) ipath: Path,
    pub(crate) dpath: Path,
    /// Structure that holds page-table translations (linear tables' walks, Mach's L2 PTEs).
    pub(crate) pt_tlb: usize,
    /// Subblock prefetch on each path [instruction, data] (block size in base pages, or 0).
    pub(crate) prefetch: [usize; 2],
    /// Scratch for a prefetching walk's mappings.
    pub(crate) block: Vec<Option<Pte>>,
    /// Which build of `Tlb::fa_lru_run` the next batch of a plain design takes, with its table
    /// of recent pages or without (a speed choice only: both do the same), from what the table
    /// cost in the last batch that took it ([`super::plain::NEAR_PROBE`]).
    pub(crate) fa_near: bool,
    /// Batches taken without the table since it was last tried.
    pub(crate) fa_since_near: u32,
    /// The build every batch takes, if fixed ([`super::System::fix_fa_lru_build`]).
    pub(crate) fa_fixed: Option<bool>,
}

impl Tlbs {
    /// The structures of `design`, empty.
    pub(crate) fn new(design: &Design) -> Tlbs {
        let structures = design
            .structures
            .iter()
            .map(|s| Structure {
                name: s.name.clone(),
                level: s.level,
                serves: s.serves,
                latency: s.latency,
                format: s.format,
                prefetch: s.prefetch,
                tlb: Tlb::with_format(s.geometry, design.page_size, s.tlb_format).expect("validated: Geometry::check"),
            })
            .collect();
        Tlbs {
            structures,
            ipath: design.ipath,
            dpath: design.dpath,
            pt_tlb: design.pt_tlb,
            prefetch: design.prefetch,
            block: vec![None; design.prefetch[0].max(design.prefetch[1])],
            fa_near: true,
            fa_since_near: 0,
            fa_fixed: None,
        }
    }

    /// The path of a kind of reference.
    #[inline(always)]
    pub(crate) fn path(&self, is_data: bool) -> Path {
        if is_data {
            self.dpath
        } else {
            self.ipath
        }
    }

    /// True if `path` is the data path (the two paths are told apart by their level-1
    /// structure, or are the same unified path).
    #[inline(always)]
    pub(crate) fn is_data_path(&self, path: Path) -> bool {
        path.levels[0] == self.dpath.levels[0]
    }

    /// The levels beyond the first of `path` (whose level 1 missed) for `vpn` of the process
    /// `front` runs: the PTE of the first that holds it, after filling the levels above; `None`
    /// if all miss.
    #[inline]
    pub(crate) fn lookup_beyond_l1(
        &mut self,
        path: Path,
        front: &Front,
        vpn: Vpn,
        page_size: PageSize,
        stats: &mut SystemStats,
    ) -> Option<Pte> {
        stats.tlb_misses(path.first(), 1);
        let tag = front.tag(vpn);
        for k in 1..path.len as usize {
            let t = path.levels[k] as usize;
            stats.tlb_access(t);
            if let Some(data) = self.structures[t].tlb.lookup(tag, vpn) {
                let pte = pte_of(data, vpn, page_size);
                self.fill(&path.levels[..k], front.fill_tag(vpn), vpn, pte, stats);
                return Some(pte);
            }
            stats.tlb_misses(t, 1);
        }
        None
    }

    /// Installs the translation of `vpn` from its mapping in each of `levels` (all of which
    /// missed); each structure makes the entry its format allows.
    pub(crate) fn fill(&mut self, levels: &[u8], tag: u32, vpn: Vpn, pte: Pte, stats: &mut SystemStats) {
        for &t in levels {
            let t = t as usize;
            let f = self.structures[t].tlb.fill(tag, vpn, pte);
            stats.tlb_fill(t, f.evicted.is_some() as u64, f.merged as u64);
        }
    }

    /// [`Tlbs::fill`] after a prefetching walk: `block` holds the mappings of vpn's block, as
    /// large as the largest block of the path's prefetching structures. Each prefetching
    /// structure takes its own (aligned, possibly smaller) block out of it; the others take only
    /// the missing page, as after an ordinary walk.
    pub(crate) fn fill_block(
        &mut self,
        levels: &[u8],
        tag: u32,
        vpn: Vpn,
        block: &[Option<Pte>],
        stats: &mut SystemStats,
    ) {
        let first = vpn.0 & !(block.len() as u64 - 1);
        for &t in levels {
            let t = t as usize;
            let s = &mut self.structures[t];
            let f = match s.tlb.format() {
                Format::CompleteSubblock { block_pages } if s.prefetch => {
                    let b = block_pages as u64;
                    let start = ((vpn.0 & !(b - 1)) - first) as usize;
                    s.tlb.fill_block(tag, vpn, &block[start..start + b as usize])
                }
                _ => match block[(vpn.0 - first) as usize] {
                    Some(pte) => s.tlb.fill(tag, vpn, pte),
                    None => continue,
                },
            };
            stats.tlb_fill(t, f.evicted.is_some() as u64, f.merged as u64);
        }
    }

    /// Invalidates every structure's entries of `tag` in `[first, last]`.
    pub(crate) fn invalidate_range(&mut self, tag: Asid, first: Vpn, last: Vpn, stats: &mut SystemStats) {
        for (s, st) in self.structures.iter_mut().zip(&mut stats.tlb) {
            st.invalidations += s.tlb.invalidate_range(tag, first, last);
        }
    }

    /// Flushes every non-global entry (a flush on switch, a RID purge).
    pub(crate) fn flush_non_global(&mut self, stats: &mut SystemStats) {
        for (s, st) in self.structures.iter_mut().zip(&mut stats.tlb) {
            st.invalidations += s.tlb.flush_non_global();
        }
    }

    /// Flushes every entry of `space` (an exit).
    pub(crate) fn flush_asid(&mut self, space: Asid, stats: &mut SystemStats) {
        for (s, st) in self.structures.iter_mut().zip(&mut stats.tlb) {
            st.invalidations += s.tlb.flush_asid(space);
        }
    }
}

/// The mapping a TLB hit's data stands for, as a PTE for base page `vpn`.
#[inline]
pub(crate) fn pte_of(data: TlbData, vpn: Vpn, base: PageSize) -> Pte {
    Pte {
        pfn: frame_of(data, vpn, base),
        size: PageSize::from_shift(data.shift as u32).unwrap_or(base),
        valid: data.valid,
    }
}
