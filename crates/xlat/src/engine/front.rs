//! The front of translation: which process runs, where its references land (`[layout]`), the
//! address space (TLB tag, page-table key) of each of its regions (Itanium region IDs), its
//! global pages (`os.global`) and its protection keys. It turns a traced address into the
//! (tag, page) the TLBs look up, and is the only part that knows processes.

use super::error::DesignError;
use crate::addr::{Asid, Vpn};
use crate::config::AsidMode;
use crate::os::keys::Keys;
use crate::os::layout::{Layout, LayoutFull};
use crate::os::regions::Regions;
use crate::trace::Kind;

/// The address space of global pages (`os.global`): mapped once, shared by every process.
pub const GLOBAL_SPACE: Asid = Asid(u32::MAX - 1);

/// See the module documentation.
#[derive(Clone, Debug)]
pub(crate) struct Front {
    pub(crate) asid_mode: AsidMode,
    /// The running process.
    pub(crate) asid: Asid,
    /// The address space (TLB tag, page-table key) of each virtual region of the running
    /// process, by the top three address bits: all the process's ASID without regions.
    pub(crate) tags: [u32; 8],
    /// VPN shift that leaves the region number (61 - page shift).
    pub(crate) vrn_shift: u32,
    /// VPN ranges (inclusive) of the `os.global` regions.
    pub(crate) global: Vec<(u64, u64)>,
    /// Where traced mappings land (`[layout]`); `None`: the trace's own addresses.
    pub(crate) layout: Option<Box<Layout>>,
    /// Itanium regions (`[itanium]`); `None`: one address space per process.
    pub(crate) regions: Option<Box<Regions>>,
    /// Protection keys (`[itanium] protection_keys`).
    pub(crate) keys: Option<Box<Keys>>,
    /// A layout or protection keys: references take [`Front::prepare`] first.
    pub(crate) extras: bool,
    /// The object and byte offset a `Record::Object` named for the next map.
    pub(crate) pending_object: Option<(u32, u64)>,
}

impl Front {
    /// True if `vpn` lies in one of the `os.global` ranges.
    #[inline(always)]
    pub(crate) fn is_global(&self, vpn: Vpn) -> bool {
        !self.global.is_empty() && self.global.iter().any(|&(lo, hi)| lo <= vpn.0 && vpn.0 <= hi)
    }

    /// The address space a page belongs to: its process's (or, with regions, its region's), or
    /// the shared one of global pages.
    #[inline(always)]
    pub(crate) fn space_of(&self, vpn: Vpn) -> Asid {
        if self.is_global(vpn) {
            GLOBAL_SPACE
        } else {
            self.tag(vpn)
        }
    }

    /// The TLB tag of a page of the running process: its ASID, or its region's space.
    #[inline(always)]
    pub(crate) fn tag(&self, vpn: Vpn) -> Asid {
        Asid(self.tags[((vpn.0 >> self.vrn_shift) & 7) as usize])
    }

    /// The tag a translation of `vpn` is filled under: the global one for global pages.
    #[inline(always)]
    pub(crate) fn fill_tag(&self, vpn: Vpn) -> u32 {
        if self.is_global(vpn) {
            crate::tlb::GLOBAL
        } else {
            self.tag(vpn).0
        }
    }

    /// The region ID the VHPT hashes a page of `space` under.
    #[inline(always)]
    pub(crate) fn rid_of(&self, space: Asid) -> u32 {
        match &self.regions {
            Some(r) if space != GLOBAL_SPACE => r.rid_of(space.0),
            _ => space.0,
        }
    }

    /// What a reference goes through before translation in designs with a layout or
    /// protection keys: its address is laid out, and its page's key checked against the PKRs.
    #[inline(always)]
    pub(crate) fn prepare(&mut self, kind: Kind, addr: u64, page_shift: u32) -> Result<u64, LayoutFull> {
        let is_data = kind.is_data();
        let (addr, key) = match self.layout.as_deref_mut() {
            None => (addr, 0),
            Some(l) => {
                let a = l.place(is_data, addr)?;
                (a, l.last_key(is_data))
            }
        };
        if let Some(k) = self.keys.as_deref_mut() {
            // A page's key is its region's, unless it belongs to a shared-region object.
            let key = if key != 0 { key } else { self.tags[((addr >> page_shift >> self.vrn_shift) & 7) as usize] };
            k.check(key);
        }
        Ok(addr)
    }

    /// Switches the layout and keys to process `asid` (the caller then loads its tags).
    pub(crate) fn switch_to(&mut self, asid: u32) {
        self.asid = Asid(asid);
        if let Some(l) = &mut self.layout {
            l.switch_to(asid);
        }
        if let Some(k) = &mut self.keys {
            k.switch_to(asid);
        }
    }

    /// The region spaces of the running process (creating it on first sight); `purged` says
    /// the RID allocator purged every RID to make room.
    pub(crate) fn load_tags(&mut self, purged: &mut bool, name: &str) -> Result<(), DesignError> {
        let asid = self.asid.0;
        self.tags = match &mut self.regions {
            None => [asid; 8],
            Some(r) => {
                r.spaces(asid, None, purged).map_err(|error| DesignError::Rids { config: name.into(), error })?
            }
        };
        Ok(())
    }

    /// True if region `vrn` of the running process is its own (not shared text or the global
    /// shared region).
    #[inline]
    pub(crate) fn is_private(&self, vrn: usize) -> bool {
        self.regions.as_ref().map_or(true, |r| r.is_private(self.asid.0, vrn))
    }

    /// The spaces of the running process's laid-out pages `[first, last]`, split by region (a
    /// layout never places a mapping across two; identity layouts of odd traces may), appended to
    /// `out`: a range in a global region names [`GLOBAL_SPACE`] whole, pieces in regions shared
    /// with other processes (a program's text) are left out.
    pub(crate) fn spaces(&self, first: Vpn, last: Vpn, out: &mut Vec<(Asid, Vpn, Vpn)>) {
        if self.is_global(first) {
            out.push((GLOBAL_SPACE, first, last));
            return;
        }
        let vrn_shift = self.vrn_shift;
        let mut lo = first.0;
        while lo <= last.0 {
            let vrn = ((lo >> vrn_shift) & 7) as usize;
            let region_end = if vrn_shift >= 61 { u64::MAX } else { (((vrn as u64) + 1) << vrn_shift) - 1 };
            let hi = last.0.min(region_end);
            if self.is_private(vrn) {
                out.push((Asid(self.tags[vrn]), Vpn(lo), Vpn(hi)));
            }
            if hi == u64::MAX || hi == last.0 {
                break;
            }
            lo = hi + 1;
        }
    }
}
