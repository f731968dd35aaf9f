//! The operating-system model: processes, demand paging and physical frame allocation.
//!
//! The first touch of a virtual page allocates a frame and maps it in the page table (a page
//! fault). Unmapping frees the frames and shoots down TLB entries (the engine does the TLB part).
//! The OS keeps its own record of resident pages (an ordered map per system, touched only on
//! faults, unmaps, forks and exits — never on the per-reference path) so that unmapping a large
//! range costs time proportional to what is resident in it.

mod frames;

pub use frames::{AllocatorKind, FrameAllocator};

use crate::addr::{Asid, Pfn, Vpn};
use std::collections::{BTreeMap, HashMap};

/// `[os]` section of a config.
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OsConfig {
    /// Physical frame allocator.
    pub frame_allocator: AllocatorKind,
    /// Physical memory in bytes (default 4 GiB); running out is an error, not a silent wrap.
    pub memory_bytes: u64,
    /// Seed of the random allocator.
    pub seed: u64,
    /// Fraction of frames the random allocator leaves free but scattered before the trace starts
    /// (0 = none): a knob for fragmented memory. Ignored by the other allocators.
    pub fragmentation: f64,
    /// Global regions, each `"START-END"` (hex with `0x` or decimal; END exclusive): their pages
    /// are mapped once for all processes (like kernel mappings) and their TLB entries are global,
    /// matching every ASID and surviving flushes on a switch.
    pub global: Vec<String>,
}

impl OsConfig {
    /// The `global` regions as inclusive byte ranges; errors name `os.global[i]`.
    pub fn global_ranges(&self) -> Result<Vec<(u64, u64)>, crate::pt::ParamError> {
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
                    crate::pt::ParamError::new(
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
}

impl Default for OsConfig {
    fn default() -> Self {
        OsConfig {
            frame_allocator: AllocatorKind::Sequential,
            memory_bytes: 4 << 30,
            seed: 1,
            fragmentation: 0.0,
            global: Vec::new(),
        }
    }
}

/// Physical memory ran out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("physical memory exhausted after {frames} frames: os.memory_bytes is too small for this trace's footprint")]
pub struct OutOfMemory {
    /// Frames in the machine.
    pub frames: u64,
}

/// Resident pages and frame ownership of one simulated system.
#[derive(Clone, Debug)]
pub struct Os {
    frames: FrameAllocator,
    /// (asid, vpn) -> frame, for every resident base page.
    resident: BTreeMap<(u32, u64), u64>,
    /// Sharers of the frames that more than one page maps (fork shares frames between parent
    /// and child); a resident frame not in this map has exactly one.
    shared: HashMap<u64, u32>,
}

impl Os {
    /// An OS with an empty machine of `frames` frames.
    pub fn new(frames: FrameAllocator) -> Os {
        Os { frames, resident: BTreeMap::new(), shared: HashMap::new() }
    }

    /// Allocates a frame for a faulting page and records it as resident.
    pub fn fault_in(&mut self, asid: Asid, vpn: Vpn) -> Result<Pfn, OutOfMemory> {
        let pfn = self.frames.alloc().ok_or(OutOfMemory { frames: self.frames.total() })?;
        self.resident.insert((asid.0, vpn.0), pfn);
        Ok(Pfn(pfn))
    }

    /// Removes the resident pages of `asid` in `[first, last]`, freeing frames no one else
    /// shares; returns the VPNs removed (the caller unmaps them from the page table).
    pub fn evict_range(&mut self, asid: Asid, first: Vpn, last: Vpn) -> Vec<Vpn> {
        let keys: Vec<(u32, u64)> =
            self.resident.range((asid.0, first.0)..=(asid.0, last.0)).map(|(k, _)| *k).collect();
        for k in &keys {
            let pfn = self.resident.remove(k).expect("key just listed");
            self.release(pfn);
        }
        keys.into_iter().map(|(_, v)| Vpn(v)).collect()
    }

    fn release(&mut self, pfn: u64) {
        match self.shared.get_mut(&pfn) {
            Some(n) if *n > 2 => *n -= 1,
            Some(_) => {
                self.shared.remove(&pfn);
            }
            None => self.frames.free(pfn),
        }
    }

    /// Gives `child` the parent's resident pages, sharing the frames; returns them.
    pub fn fork(&mut self, parent: Asid, child: Asid) -> Vec<(Vpn, Pfn)> {
        let pages: Vec<(u64, u64)> =
            self.resident.range((parent.0, 0)..=(parent.0, u64::MAX)).map(|(&(_, v), &p)| (v, p)).collect();
        for &(v, p) in &pages {
            if self.resident.insert((child.0, v), p).is_none() {
                *self.shared.entry(p).or_insert(1) += 1;
            }
        }
        pages.into_iter().map(|(v, p)| (Vpn(v), Pfn(p))).collect()
    }

    /// Resident base pages of all processes.
    pub fn resident_pages(&self) -> u64 {
        self.resident.len() as u64
    }

    /// Frames in use.
    pub fn frames_in_use(&self) -> u64 {
        self.frames.in_use()
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
}
