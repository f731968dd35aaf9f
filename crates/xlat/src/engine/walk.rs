//! The walk and what sits in front of it: the page table (a closed enum over radix, linear,
//! hashed, clustered and VHPT tables), Itanium's long-format VHPT walked by the hardware
//! walker, and the software TLB (`[stlb]`, bala94 §4) a refill handler probes before a walk
//! cascades. The page-table translations a linear table's walk needs are looked up in the TLB
//! hierarchy's page-table structure through [`PtTlbEnv`]. The walk's own counters (references,
//! lines, nested misses) accumulate in its [`WalkRecord`], which only the walk changes.

use super::design::Design;
use crate::addr::{Asid, Vpn};
use crate::os::PtOp;
use crate::pt::vhpt::LongVhpt;
use crate::pt::{PageTable, PtSize, WalkEnv, WalkRecord, Walker};
use crate::stats::{StlbStats, TlbStats};
use crate::tlb::{Geometry, Tlb, TlbData};

/// See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Walk {
    pub(crate) pt: PageTable,
    /// The long-format VHPT in front of the OS table (`vhpt-long`).
    pub(crate) vhpt: Option<Box<LongVhpt>>,
    /// VHPT designs: the hardware walker is enabled.
    pub(crate) hw_walker: bool,
    /// The software TLB (`[stlb]`).
    pub(crate) stlb: Option<Box<Tlb>>,
    pub(crate) rec: WalkRecord,
    /// VPNs at or above this are outside the page table's virtual address space.
    pub(crate) vpn_limit: u64,
    /// The width of that space and the key that sets it, for errors.
    pub(crate) pt_va_bits: (u32, &'static str),
    /// The page table's largest size so far, field by field (it shrinks on unmaps and exits).
    pub(crate) pt_peak: PtSize,
}

impl Walk {
    /// The page table and what sits in front of it, empty.
    pub(crate) fn new(design: &Design) -> Walk {
        let config = design.config();
        let stlb = config.stlb.as_ref().map(|c| {
            let g = Geometry { entries: c.entries, ways: c.ways, policy: crate::tlb::Policy::Lru, seed: 1 };
            Box::new(Tlb::new(g, design.page_size).expect("validated: stlb"))
        });
        Walk {
            pt: PageTable::new(&config.page_table, design.page_size).expect("validated: page_table"),
            vhpt: design.vhpt_entries.map(|n| Box::new(LongVhpt::new(n, config.page_table.hash))),
            hw_walker: config.page_table.walker == Walker::Hardware,
            stlb,
            rec: WalkRecord::default(),
            vpn_limit: design.vpn_limit,
            pt_va_bits: config.page_table.translated_va_bits(),
            pt_peak: PtSize::default(),
        }
    }

    /// Applies the OS's page-table operations (`rid_of`: the region ID the VHPT keys a space's
    /// pages by); the long VHPT's copy of each changed mapping goes. The table only grows here,
    /// by maps, so its peak size is taken after them.
    pub(crate) fn apply(&mut self, ops: &[PtOp], rid_of: impl Fn(Asid) -> u32) {
        let mut mapped = false;
        for op in ops {
            let (asid, vpn) = match *op {
                PtOp::Map(asid, vpn, pte) => {
                    self.pt.map(asid, vpn, pte);
                    mapped = true;
                    (asid, vpn)
                }
                PtOp::Unmap(asid, vpn) => {
                    self.pt.unmap(asid, vpn);
                    (asid, vpn)
                }
            };
            if let Some(v) = &mut self.vhpt {
                v.invalidate(rid_of(asid), vpn.0);
            }
        }
        if mapped {
            let z = self.pt.size();
            let p = &mut self.pt_peak;
            p.table_bytes = p.table_bytes.max(z.table_bytes);
            p.bucket_bytes = p.bucket_bytes.max(z.bucket_bytes);
            p.objects = p.objects.max(z.objects);
        }
    }

    /// The page table's peak size so far: each field's maximum over the run.
    pub(crate) fn peak(&self) -> PtSize {
        let now = self.pt.size();
        PtSize {
            table_bytes: self.pt_peak.table_bytes.max(now.table_bytes),
            bucket_bytes: self.pt_peak.bucket_bytes.max(now.bucket_bytes),
            objects: self.pt_peak.objects.max(now.objects),
        }
    }

    /// The software TLB's probe of kernel page `vpn` by a refill handler (Mach's): counted,
    /// and its read of the STLB in unmapped memory is one of the walk's references.
    pub(crate) fn stlb_probe(&mut self, asid: Asid, vpn: Vpn, counts: &mut StlbStats) -> Option<bool> {
        let stlb = self.stlb.as_deref_mut()?;
        counts.lookups += 1;
        self.rec.handler_reads(1);
        let hit = stlb.lookup(asid, vpn).is_some();
        counts.hits += hit as u64;
        Some(hit)
    }
}

/// Per process, how many entries of the structure holding page-table translations hold that
/// process's (chapman03 §2.3.3 counts them per process): sampled at the end of each time slice
/// in which it made a reference. Made only for designs whose table asks the TLB for its own
/// pages (linear, short VHPT) and that run the Linux-like VM model.
#[derive(Clone, Debug)]
pub(crate) struct PtCensus {
    /// Pages at or above this hold PTEs (the table's own region).
    pub(crate) first: u64,
    /// Lookups made before the running process's slice began.
    pub(crate) since: u64,
    /// Per process, sorted by ASID.
    pub(crate) per: Vec<crate::stats::PtEntries>,
}

impl PtCensus {
    /// Adds a sample of `n` entries for process `asid`.
    pub(crate) fn add(per: &mut Vec<crate::stats::PtEntries>, asid: u32, n: u64) {
        let i = match per.binary_search_by_key(&asid, |e| e.asid) {
            Ok(i) => i,
            Err(i) => {
                per.insert(i, crate::stats::PtEntries { asid, ..Default::default() });
                i
            }
        };
        let e = &mut per[i];
        e.samples += 1;
        e.sum += n;
        e.peak = e.peak.max(n);
    }

    /// The page-table translations of the process whose spaces are `tags` held by `tlb`.
    pub(crate) fn count(&self, tlb: &Tlb, tags: &[u32; 8]) -> u64 {
        let first = self.first;
        tlb.count_where(|asid, vpn| vpn >= first && tags.contains(&asid))
    }
}

/// Walk environment over the structure holding page-table translations.
pub(crate) struct PtTlbEnv<'a> {
    pub(crate) tlb: &'a mut Tlb,
    pub(crate) stats: &'a mut TlbStats,
    /// True for a reserved partition (its lookups are its own counters).
    pub(crate) dedicated: bool,
    /// The software TLB behind it, and its counters.
    pub(crate) stlb: Option<&'a mut Tlb>,
    pub(crate) stlb_counts: &'a mut StlbStats,
    /// Page-table translations inserted (`walks.pt_fills`).
    pub(crate) pt_fills: &'a mut u64,
}

impl WalkEnv for PtTlbEnv<'_> {
    fn lookup_pt_translation(&mut self, asid: Asid, va: crate::addr::VirtAddr) -> bool {
        let vpn = va.vpn(self.tlb.page_size());
        let hit = self.tlb.lookup(asid, vpn).is_some();
        if self.dedicated {
            self.stats.lookups(1, !hit as u64);
        }
        if hit {
            return true;
        }
        // The refill handler checks the software TLB before walking further up (bala94 §4): a
        // hit refills the TLB from it, without a cascade.
        let Some(stlb) = self.stlb.as_deref_mut() else {
            return false;
        };
        self.stlb_counts.lookups += 1;
        if stlb.lookup(asid, vpn).is_none() {
            return false;
        }
        self.stlb_counts.hits += 1;
        self.fill_pt_translation(asid, va);
        true
    }

    fn fill_pt_translation(&mut self, asid: Asid, va: crate::addr::VirtAddr) {
        let vpn = va.vpn(self.tlb.page_size());
        let data = TlbData { pfn: 0, shift: self.tlb.page_size().shift() as u8, valid: 0 };
        *self.pt_fills += 1;
        if let Some(e) = self.tlb.insert(asid.0, vpn, data) {
            self.stats.filled(1, 0);
            // What the TLB evicts goes to the software TLB.
            if let Some(stlb) = self.stlb.as_deref_mut() {
                stlb.insert(e.asid, Vpn(e.tag), e.data);
            }
        }
    }
}
