//! The page cache (`os.page_cache`): every mapping of one object page (the trace's
//! `Record::Object` identity and the page's offset in it) gets the same frame, and private
//! mappings copy on write.
//!
//! The OS keeps, per address space, the file-backed ranges the trace mapped (`Record::Object`
//! followed by `Record::Map`), changed only by maps, unmaps, forks and exits. A fault in such a
//! range takes the frame the cache holds for its (object, page): the first fault of an object
//! page reads it in (a miss, which allocates the frame), later ones find it (a hit). The cache
//! keeps its frames for the whole run, also when no mapping is left (a real page cache keeps
//! them until memory runs short; no memory pressure is modelled), so a frame of the cache is
//! never freed. Under `os.reservation` the cache also holds, per object and aligned extent of
//! `os.block_pages` object pages, the object's reservation that its pages are read into (each in
//! its properly placed frame), so every mapping that aligns with the extent can map it as a
//! superpage (the OS's part: `Os::cache_page`, `Os::fault_file_page` in os/mod.rs).
//!
//! Copy on write: a resident page of a private writable mapping (a private writable file
//! mapping's page still on the cache's frame, or any private page a fork left on a frame the
//! parent and child share) is write-protected while its frame has another holder (the cache,
//! or another process). The frames with such a page are marked in a bit set the engine tests on
//! every store ([`CowFrames::get`]: one compare when no frame is shared); a store to a marked
//! frame asks the OS ([`super::Os::write_fault`]), which copies the page to a fresh frame, remaps
//! it and shoots down its TLB entries. The last holder of a frame writes it in place without a
//! fault (Linux takes a write-protect fault that reuses the page without copying; that fault is
//! not modelled).

use crate::addr::Vpn;
use crate::trace::map_flags;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// Counters of the page cache and copy on write (in [`super::OsStats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PageCacheStats {
    /// Faults in file-backed ranges that found their object page in the cache.
    pub hits: u64,
    /// Frames the cache holds (each read in by a fault that missed; never given back).
    pub frames: u64,
}

/// A file-backed range of one address space, in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileRange {
    /// Last page of the range (the first is the map's key).
    pub last: u64,
    /// Object the trace named.
    pub object: u32,
    /// Byte offset in the object of the range's first page's first byte (may be "before" the
    /// object's start when the mapping starts inside the page: it saturates at 0).
    pub offset: u64,
    /// Copy on write: private and writable.
    pub cow: bool,
}

/// The page cache: its frames and the file-backed ranges of every address space.
#[derive(Clone, Debug, Default)]
pub(crate) struct PageCache {
    /// Bytes of a page.
    page_bytes: u64,
    /// (space, first page) -> range; ranges of one space never overlap.
    ranges: BTreeMap<(u32, u64), FileRange>,
    /// Ranges with `cow` set, over all spaces.
    pub(crate) cow_ranges: u64,
    /// (object, page of the object) -> frame.
    frames: HashMap<(u32, u64), u64>,
    /// Under `os.reservation`: (object, extent) -> first frame of the object's reservation for
    /// the aligned extent of `os.block_pages` object pages (`None`: its reservation failed, and
    /// the extent's pages take single frames).
    extents: HashMap<(u32, u64), Option<u64>>,
    /// Faults that read a page in (equal to the frames held: they are never given back).
    pub(crate) misses: u64,
    pub(crate) stats: PageCacheStats,
}

impl PageCache {
    /// Space `space` maps bytes `[start, start + len)` (`len` > 0) from byte `offset` of
    /// `object` (the pair) with `flags` (`map_flags`), over what it mapped there before; pages of `2^shift`
    /// bytes.
    pub(crate) fn map(
        &mut self,
        space: u32,
        start: u64,
        len: u64,
        (object, offset): (u32, u64),
        flags: u32,
        shift: u32,
    ) {
        let (first, last) = (start >> shift, start.saturating_add(len - 1) >> shift);
        self.unmap(space, first, last);
        let cow = flags & map_flags::SHARED == 0 && flags & map_flags::WRITE != 0;
        // The object offset of the first page's first byte.
        let offset = offset.saturating_sub(start - (first << shift));
        self.ranges.insert((space, first), FileRange { last, object, offset, cow });
        self.cow_ranges += cow as u64;
    }

    /// Pages `[first, last]` of `space` are no longer file-backed (an unmap, an exit).
    pub(crate) fn unmap(&mut self, space: u32, first: u64, last: u64) {
        // The range starting before `first` that reaches into it, then those starting inside.
        let mut cursor = first;
        if let Some((&(_, f), &r)) = self.ranges.range((space, 0)..(space, first)).next_back() {
            if r.last >= first {
                cursor = f;
            }
        }
        while cursor <= last {
            let Some((&(_, f), &r)) = self.ranges.range((space, cursor)..=(space, last)).next() else {
                break;
            };
            self.ranges.remove(&(space, f));
            self.cow_ranges -= r.cow as u64;
            if f < first {
                self.ranges.insert((space, f), FileRange { last: first - 1, ..r });
                self.cow_ranges += r.cow as u64;
            }
            if r.last > last {
                // The tail keeps its place in the object: offsets advance by the pages cut.
                let cut = last + 1 - f;
                let r2 = FileRange { offset: r.offset.saturating_add(cut.saturating_mul(self.page_bytes)), ..r };
                self.ranges.insert((space, last + 1), r2);
                self.cow_ranges += r.cow as u64;
                break;
            }
            match f.checked_add(1) {
                Some(c) => cursor = c,
                None => break,
            }
        }
    }

    /// `child` gets copies of the file-backed ranges of `parent` (a fork).
    pub(crate) fn fork(&mut self, parent: u32, child: u32) {
        let theirs: Vec<_> = self.ranges.range((parent, 0)..=(parent, u64::MAX)).map(|(&(_, f), &r)| (f, r)).collect();
        for (f, r) in theirs {
            self.unmap(child, f, r.last);
            self.ranges.insert((child, f), r);
            self.cow_ranges += r.cow as u64;
        }
    }

    /// The range of `space` holding `vpn`, if file-backed.
    pub(crate) fn range_of(&self, space: u32, vpn: Vpn) -> Option<(u64, FileRange)> {
        let (&(_, f), &r) = self.ranges.range((space, 0)..=(space, vpn.0)).next_back()?;
        (r.last >= vpn.0).then_some((f, r))
    }

    /// The cache's key of page `vpn` of range `r` starting at page `first`.
    pub(crate) fn key(&self, first: u64, r: &FileRange, vpn: Vpn) -> (u32, u64) {
        let byte = r.offset.saturating_add((vpn.0 - first).saturating_mul(self.page_bytes));
        (r.object, byte / self.page_bytes)
    }

    /// True if some file-backed range of `space` holds a page of `[first, last]`.
    pub(crate) fn touches(&self, space: u32, first: u64, last: u64) -> bool {
        self.range_of(space, Vpn(first)).is_some() || self.ranges.range((space, first)..=(space, last)).next().is_some()
    }

    /// The reservation of object extent `extent` ((object, object page / block pages)): `None`
    /// if never asked for, `Some(None)` if it failed.
    pub(crate) fn extent(&self, extent: (u32, u64)) -> Option<Option<u64>> {
        self.extents.get(&extent).copied()
    }

    /// Records the reservation (or its failure) of object extent `extent`.
    pub(crate) fn set_extent(&mut self, extent: (u32, u64), base: Option<u64>) {
        self.extents.insert(extent, base);
    }

    /// The frame of object page `key`, if cached.
    pub(crate) fn frame(&self, key: (u32, u64)) -> Option<u64> {
        self.frames.get(&key).copied()
    }

    /// Records `pfn` as the frame of object page `key` (a miss read it in).
    pub(crate) fn insert(&mut self, key: (u32, u64), pfn: u64) {
        self.frames.insert(key, pfn);
        self.misses += 1;
        self.stats.frames += 1;
    }

    /// A cache for pages of `page_bytes` bytes.
    pub(crate) fn new(page_bytes: u64) -> PageCache {
        PageCache { page_bytes, ..PageCache::default() }
    }
}

/// The frames holding a write-protected page, as a bit set over frame numbers (empty until a
/// frame is marked).
#[derive(Clone, Debug, Default)]
pub(crate) struct CowFrames {
    bits: Vec<u64>,
    /// Frames marked.
    pub(crate) count: u64,
}

impl CowFrames {
    /// True if `pfn` is marked.
    #[inline(always)]
    pub(crate) fn get(&self, pfn: u64) -> bool {
        match self.bits.get((pfn >> 6) as usize) {
            Some(w) => w >> (pfn & 63) & 1 != 0,
            None => false,
        }
    }

    /// Marks `pfn`.
    pub(crate) fn set(&mut self, pfn: u64) {
        let i = (pfn >> 6) as usize;
        if i >= self.bits.len() {
            self.bits.resize(i + 1, 0);
        }
        let b = 1u64 << (pfn & 63);
        self.count += (self.bits[i] & b == 0) as u64;
        self.bits[i] |= b;
    }

    /// Unmarks `pfn`.
    pub(crate) fn clear(&mut self, pfn: u64) {
        if let Some(w) = self.bits.get_mut((pfn >> 6) as usize) {
            let b = 1u64 << (pfn & 63);
            self.count -= (*w & b != 0) as u64;
            *w &= !b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pages of space 1 that are file-backed, as (first, last, object offset) runs.
    fn runs(pc: &PageCache) -> Vec<(u64, u64, u64)> {
        pc.ranges.range((1, 0)..=(1, u64::MAX)).map(|(&(_, f), r)| (f, r.last, r.offset)).collect()
    }

    #[test]
    fn unmap_cuts_and_removes_ranges_ending_on_its_last_page() {
        let mut pc = PageCache::new(4096);
        // One-page range at page 2, a four-page range at pages 5..=8 from object byte 8192.
        pc.map(1, 2 << 12, 4096, (7, 0), map_flags::READ, 12);
        pc.map(1, 5 << 12, 4 << 12, (7, 8192), map_flags::READ | map_flags::WRITE, 12);
        assert_eq!(runs(&pc), [(2, 2, 0), (5, 8, 8192)]);
        assert_eq!(pc.cow_ranges, 1);
        // An unmap whose last page is the start of a range: the loop must stop there.
        pc.unmap(1, 0, 2);
        assert_eq!(runs(&pc), [(5, 8, 8192)]);
        // The middle of a range: a head and a tail whose offset moves by the pages cut.
        pc.unmap(1, 6, 6);
        assert_eq!(runs(&pc), [(5, 5, 8192), (7, 8, 8192 + 2 * 4096)]);
        assert_eq!(pc.cow_ranges, 2);
        // Exactly a range's last page, then everything.
        pc.unmap(1, 8, 8);
        assert_eq!(runs(&pc), [(5, 5, 8192), (7, 7, 8192 + 2 * 4096)]);
        pc.unmap(1, 0, u64::MAX >> 12);
        assert_eq!(runs(&pc), []);
        assert_eq!(pc.cow_ranges, 0);
    }
}
