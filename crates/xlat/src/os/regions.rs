//! Itanium regions and region IDs (`[itanium]`, docs/itanium.md).
//!
//! The top three bits of a (laid-out) virtual address, the virtual region number (VRN), select one
//! of eight region registers of the running process, which gives the region ID (RID) that tags
//! TLB entries (chapman03 §2.2.1). Linux/ia64 gives each process a context number and uses
//! `RID = context << 3 | VRN`, contexts allocated sequentially; chapman03 §3.1 swaps the two low
//! bytes of the context (`byte-swapped`) to spread RIDs in the long VHPT's hash. With
//! `share_text`, region 2's RID belongs to the program, not the process (§3.2): every process of
//! one program shares its text TLB entries. With `shared_region`, region 1 is one global
//! single-address-space region under a fixed RID (§3.3).
//!
//! Each region of each process — or the program's text region, or the global region — is an
//! *address space* of its own in xlat: it has a stable space number that tags TLB entries and
//! keys the page tables, so pages of a shared region are mapped once, to one set of frames,
//! for all its sharers. The RID is the space's name in the hardware: it changes when contexts
//! run out (Linux then purges the TLB and hands out fresh contexts; counted as a purge) and it is
//! what the long VHPT hashes.

use crate::pt::ParamError;
use serde::Deserialize;
use std::collections::HashMap;

/// How contexts become RIDs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RidAlloc {
    /// `context << 3 | VRN`, contexts in order (Linux/ia64).
    #[default]
    Sequential,
    /// The context's two low bytes swapped first (chapman03 §3.1).
    ByteSwapped,
}

impl RidAlloc {
    /// Name used in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            RidAlloc::Sequential => "sequential",
            RidAlloc::ByteSwapped => "byte-swapped",
        }
    }
}

/// `[itanium]` section of a config.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ItaniumConfig {
    /// Bits of a region ID (Itanium 2 implements 24; at least 4).
    pub rid_bits: u32,
    /// Context-to-RID mapping.
    pub rid_alloc: RidAlloc,
    /// Program-specific text RIDs (region 2), chapman03 §3.2.
    pub share_text: bool,
    /// Protection keys: every reference checks its page's key against the process's PKRs.
    pub protection_keys: bool,
    /// Protection key registers (Itanium 2: 16).
    pub pkrs: u32,
    /// Which PKR a key miss replaces.
    pub pkr_policy: crate::os::keys::PkrPolicy,
    /// Cycles of a key miss fault (default 160: a trap to the OS like gray05 §3.2's software
    /// refill; an assumption, the papers do not measure it).
    pub key_fault_cycles: u64,
    /// Cycles of reloading the PKRs on a context switch (default 16: one per register; an
    /// assumption, chapman03 §2.2.2 calls it "little overhead").
    pub pkr_reload_cycles: u64,
    /// Key-based sharing: region 1 is one global shared region (chapman03 §3.3).
    pub shared_region: bool,
    /// Cycles of a RID purge (flushing the TLBs when contexts run out); default 1000.
    pub purge_cycles: u64,
}

impl Default for ItaniumConfig {
    fn default() -> Self {
        ItaniumConfig {
            rid_bits: 24,
            rid_alloc: RidAlloc::Sequential,
            share_text: false,
            protection_keys: false,
            pkrs: 16,
            pkr_policy: crate::os::keys::PkrPolicy::Lru,
            key_fault_cycles: 160,
            pkr_reload_cycles: 16,
            shared_region: false,
            purge_cycles: 1000,
        }
    }
}

impl ItaniumConfig {
    /// Checks the parameters; errors name the key.
    pub fn validate(&self) -> Result<(), ParamError> {
        if !(4..=24).contains(&self.rid_bits) {
            return Err(ParamError::new(
                "itanium.rid_bits",
                format!("{} is outside 4..=24 (Itanium RIDs are 18 to 24 bits)", self.rid_bits),
            ));
        }
        if self.pkrs == 0 || self.pkrs > 64 {
            return Err(ParamError::new("itanium.pkrs", format!("{} is outside 1..=64", self.pkrs)));
        }
        Ok(())
    }
}

/// More live processes and programs than contexts: no RID for a new one even after a purge.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{live} live processes and programs use every context of {bits}-bit region IDs; a new one has none (itanium.rid_bits)")]
pub struct RidsExhausted {
    /// `rid_bits`.
    pub bits: u32,
    /// Live contexts.
    pub live: usize,
}

/// Space number of the global shared region.
pub const GLOBAL_REGION_SPACE: u32 = 1;

/// Counters of the RID allocator.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RidStats {
    /// RIDs handed out (eight per context; the global RID counts once).
    pub allocated: u64,
    /// Purges: contexts ran out, every TLB entry was flushed and live spaces got fresh RIDs.
    pub purges: u64,
}

/// A process: its context and the space of each region.
#[derive(Clone, Copy, Debug)]
struct Proc {
    ctx: u64,
    spaces: [u32; 8],
    program: u32,
}

/// Region registers and RID allocation for every process of one design.
#[derive(Clone, Debug)]
pub struct Regions {
    cfg: ItaniumConfig,
    procs: HashMap<u32, Proc>,
    /// Program -> (context, text space) under `share_text`.
    programs: HashMap<u32, (u64, u32)>,
    /// The program of each executable (by the trace's object number of its text).
    by_object: HashMap<u32, u32>,
    next_program: u32,
    /// RID of each space (index = space number); `u32::MAX` when the space is gone.
    rid: Vec<u32>,
    next_ctx: u64,
    stats: RidStats,
}

impl Regions {
    /// The allocator of a design with `[itanium]`.
    pub fn new(cfg: &ItaniumConfig) -> Regions {
        // Space 0 is unused; space 1 is the global region, RID 1 (context 0, VRN 1).
        let mut rid = vec![u32::MAX; 2];
        rid[GLOBAL_REGION_SPACE as usize] = 1;
        Regions {
            cfg: cfg.clone(),
            procs: HashMap::new(),
            programs: HashMap::new(),
            by_object: HashMap::new(),
            next_program: 0,
            rid,
            next_ctx: 1,
            stats: RidStats { allocated: cfg.shared_region as u64, purges: 0 },
        }
    }

    /// Counters.
    pub fn stats(&self) -> RidStats {
        self.stats
    }

    /// The RID that names `space` now.
    #[inline]
    pub fn rid_of(&self, space: u32) -> u32 {
        self.rid.get(space as usize).copied().unwrap_or(u32::MAX)
    }

    fn contexts(&self) -> u64 {
        1 << (self.cfg.rid_bits - 3)
    }

    fn rid(&self, ctx: u64, vrn: u32) -> u32 {
        let c = match self.cfg.rid_alloc {
            RidAlloc::Sequential => ctx,
            RidAlloc::ByteSwapped => (ctx & !0xffff) | ((ctx & 0xff) << 8) | ((ctx >> 8) & 0xff),
        };
        (((c << 3) | vrn as u64) & ((1 << self.cfg.rid_bits) - 1)) as u32
    }

    /// A fresh context; when they run out, a purge (returns true: the caller flushes the TLBs and
    /// anything else tagged by RID) and every live space gets its new RID.
    fn context(&mut self, purged: &mut bool) -> Result<u64, RidsExhausted> {
        if self.next_ctx >= self.contexts() {
            self.purge();
            *purged = true;
            if self.next_ctx >= self.contexts() {
                return Err(RidsExhausted { bits: self.cfg.rid_bits, live: self.procs.len() + self.programs.len() });
            }
        }
        let c = self.next_ctx;
        self.next_ctx += 1;
        self.stats.allocated += 8;
        Ok(c)
    }

    fn purge(&mut self) {
        self.stats.purges += 1;
        self.next_ctx = 1;
        let mut procs: Vec<u32> = self.procs.keys().copied().collect();
        procs.sort_unstable();
        let mut programs: Vec<u32> = self.programs.keys().copied().collect();
        programs.sort_unstable();
        // Live contexts beyond the RIDs keep their old names until they exit; the caller fails
        // the design before one is used (a new context finds none).
        for p in programs {
            let c = self.next_ctx;
            self.next_ctx += 1;
            let (ctx, space) = self.programs.get_mut(&p).expect("listed");
            *ctx = c;
            let space = *space;
            self.rid[space as usize] = self.rid(c, 2);
        }
        for a in procs {
            let c = self.next_ctx;
            self.next_ctx += 1;
            let p = self.procs.get_mut(&a).expect("listed");
            p.ctx = c;
            let spaces = p.spaces;
            for (vrn, s) in spaces.iter().enumerate() {
                if self.is_private(a, vrn) {
                    self.rid[*s as usize] = self.rid(c, vrn as u32);
                }
            }
        }
    }

    fn new_space(&mut self, rid: u32) -> u32 {
        self.rid.push(rid);
        (self.rid.len() - 1) as u32
    }

    /// True if region `vrn` of process `asid` is its own (not the program's text or the global
    /// region).
    pub fn is_private(&self, asid: u32, vrn: usize) -> bool {
        let shared = (vrn == 2 && self.cfg.share_text) || (vrn == 1 && self.cfg.shared_region);
        !shared && self.procs.contains_key(&asid)
    }

    /// The region spaces of process `asid`, creating it (a new program's first process, or a
    /// fork's child of `parent`) on first sight. `purged` is set when contexts ran out.
    pub fn spaces(&mut self, asid: u32, parent: Option<u32>, purged: &mut bool) -> Result<[u32; 8], RidsExhausted> {
        if let Some(p) = self.procs.get(&asid) {
            return Ok(p.spaces);
        }
        let program = match parent.and_then(|p| self.procs.get(&p)) {
            Some(p) => p.program,
            None => {
                self.next_program += 1;
                self.next_program
            }
        };
        // The program's text context first, then the process's: a purge while allocating the
        // second renames the first with every other live space.
        let text = if self.cfg.share_text {
            Some(match self.programs.get(&program) {
                Some(&(_, space)) => space,
                None => {
                    let c = self.context(purged)?;
                    let r = self.rid(c, 2);
                    let space = self.new_space(r);
                    self.programs.insert(program, (c, space));
                    space
                }
            })
        } else {
            None
        };
        let ctx = self.context(purged)?;
        let mut spaces = [0u32; 8];
        for (vrn, s) in spaces.iter_mut().enumerate() {
            *s = match (vrn, text) {
                (1, _) if self.cfg.shared_region => GLOBAL_REGION_SPACE,
                (2, Some(t)) => t,
                _ => {
                    let r = self.rid(ctx, vrn as u32);
                    self.new_space(r)
                }
            };
        }
        self.procs.insert(asid, Proc { ctx, spaces, program });
        Ok(spaces)
    }

    /// Process `asid` runs the executable whose text is trace object `object` (its image's text
    /// mapping): under `share_text` it joins that program, whose text space every process of the
    /// executable shares, even when exec'd separately. Returns its new spaces if they changed.
    pub fn set_executable(
        &mut self,
        asid: u32,
        object: u32,
        purged: &mut bool,
    ) -> Result<Option<[u32; 8]>, RidsExhausted> {
        if !self.cfg.share_text {
            return Ok(None);
        }
        let Some(p) = self.procs.get(&asid).copied() else {
            return Ok(None);
        };
        let program = match self.by_object.get(&object) {
            Some(&prog) => prog,
            None => {
                // The first process of this executable names the program it already has.
                self.by_object.insert(object, p.program);
                p.program
            }
        };
        if program == p.program {
            return Ok(None);
        }
        let space = match self.programs.get(&program) {
            Some(&(_, space)) => space,
            None => {
                let c = self.context(purged)?;
                let r = self.rid(c, 2);
                let space = self.new_space(r);
                self.programs.insert(program, (c, space));
                space
            }
        };
        let q = self.procs.get_mut(&asid).expect("present");
        q.program = program;
        q.spaces[2] = space;
        Ok(Some(q.spaces))
    }

    /// Process `asid` gets a new context (Linux/ia64's `flush_tlb_mm`, at a fork): its private
    /// spaces are renamed with the new context's RIDs; the program's text and the global
    /// region keep theirs. `purged` is set when contexts ran out.
    pub fn renew(&mut self, asid: u32, purged: &mut bool) -> Result<(), RidsExhausted> {
        if !self.procs.contains_key(&asid) {
            return Ok(());
        }
        let ctx = self.context(purged)?;
        let p = self.procs.get_mut(&asid).expect("present");
        p.ctx = ctx;
        let spaces = p.spaces;
        for (vrn, s) in spaces.iter().enumerate() {
            if self.is_private(asid, vrn) {
                self.rid[*s as usize] = self.rid(ctx, vrn as u32);
            }
        }
        Ok(())
    }

    /// Process `asid` exits: its private spaces, to be torn down (shared ones stay).
    pub fn exit(&mut self, asid: u32) -> Vec<u32> {
        let mut out = Vec::new();
        if let Some(p) = self.procs.get(&asid).copied() {
            for vrn in 0..8 {
                if self.is_private(asid, vrn) {
                    out.push(p.spaces[vrn]);
                    self.rid[p.spaces[vrn] as usize] = u32::MAX;
                }
            }
            self.procs.remove(&asid);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rids_are_context_and_region_and_byte_swapped_spreads_them() {
        let mut r = Regions::new(&ItaniumConfig::default());
        let mut purged = false;
        let a = r.spaces(10, None, &mut purged).unwrap();
        let b = r.spaces(11, Some(10), &mut purged).unwrap();
        assert_eq!((r.rid_of(a[3]), r.rid_of(b[3])), ((1 << 3) | 3, (2 << 3) | 3));
        assert_ne!(a[2], b[2], "text is per process without share_text");
        let mut r = Regions::new(&ItaniumConfig { rid_alloc: RidAlloc::ByteSwapped, ..ItaniumConfig::default() });
        let a = r.spaces(10, None, &mut purged).unwrap();
        assert_eq!(r.rid_of(a[3]), (0x100 << 3) | 3);
        assert!(!purged);
    }

    #[test]
    fn shared_text_and_global_region_are_one_space_for_all() {
        let cfg = ItaniumConfig { share_text: true, shared_region: true, ..ItaniumConfig::default() };
        let mut r = Regions::new(&cfg);
        let mut purged = false;
        let a = r.spaces(0, None, &mut purged).unwrap();
        let b = r.spaces(1, Some(0), &mut purged).unwrap();
        let c = r.spaces(2, None, &mut purged).unwrap();
        assert_eq!(a[2], b[2]);
        assert_ne!(a[2], c[2], "another program");
        assert_eq!((a[1], c[1]), (GLOBAL_REGION_SPACE, GLOBAL_REGION_SPACE));
        assert_ne!(a[3], b[3]);
        assert_eq!(r.exit(1).len(), 6, "regions 0, 3-7 are the child's own");
    }

    #[test]
    fn running_out_of_contexts_purges_and_renames() {
        let mut r = Regions::new(&ItaniumConfig { rid_bits: 5, ..ItaniumConfig::default() });
        let mut purged = false;
        let spaces: Vec<[u32; 8]> = (0..3).map(|a| r.spaces(a, None, &mut purged).unwrap()).collect();
        assert!(!purged, "contexts 1..3 of 4");
        r.exit(0);
        let d = r.spaces(3, None, &mut purged).unwrap();
        assert!(purged);
        assert_eq!(r.stats().purges, 1);
        let rids: Vec<u32> = [spaces[1][3], spaces[2][3], d[3]].iter().map(|&s| r.rid_of(s)).collect();
        let mut u = rids.clone();
        u.sort_unstable();
        u.dedup();
        assert_eq!(u.len(), 3, "live spaces keep distinct RIDs after the purge: {rids:?}");
    }

    #[test]
    fn a_new_context_renames_private_regions_only() {
        let cfg = ItaniumConfig { share_text: true, shared_region: true, ..ItaniumConfig::default() };
        let mut r = Regions::new(&cfg);
        let mut purged = false;
        let a = r.spaces(7, None, &mut purged).unwrap();
        let before: Vec<u32> = a.iter().map(|&s| r.rid_of(s)).collect();
        r.renew(7, &mut purged).unwrap();
        assert!(!purged);
        // Contexts 1 (text) and 2 (the process) were taken: the new one is 3.
        for (vrn, &s) in a.iter().enumerate() {
            let want = match vrn {
                1 => 1,
                2 => (1 << 3) | 2,
                _ => (3 << 3) | vrn as u32,
            };
            assert_eq!(r.rid_of(s), want, "region {vrn} (was {})", before[vrn]);
        }
    }

    #[test]
    fn more_live_processes_than_contexts_is_an_error_naming_the_key() {
        let mut r = Regions::new(&ItaniumConfig { rid_bits: 4, ..ItaniumConfig::default() });
        let mut purged = false;
        r.spaces(0, None, &mut purged).unwrap();
        let e = r.spaces(1, None, &mut purged).unwrap_err();
        assert!(purged);
        assert!(e.to_string().contains("itanium.rid_bits"), "{e}");
    }
}
