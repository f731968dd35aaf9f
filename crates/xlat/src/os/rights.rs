//! The access rights of each process's mapped ranges (read, write, exec), as its maps,
//! `mprotect`s and unmaps set them, so that a protection change can tell whether it removes a
//! right (its pages' TLB entries must go) or only adds rights (nothing to invalidate).
//!
//! Ranges are kept in the trace's addresses, per process. A range the trace never mapped (the
//! program image and stack that the loader mapped before tracing began, say) counts as having
//! had every right: a protection change there invalidates unless it keeps them all.

use std::collections::{BTreeMap, HashMap};

use crate::trace::map_flags::RIGHTS;

/// Rights per mapped range of every process.
#[derive(Clone, Debug, Default)]
pub struct Rights {
    /// asid -> start -> (end, rights), ranges disjoint and non-empty.
    spaces: HashMap<u32, BTreeMap<u64, (u64, u32)>>,
}

impl Rights {
    /// Removes `[start, end)` from `space`, splitting the ranges it cuts; calls `each(lo, hi,
    /// rights)` for every piece removed.
    fn cut(space: &mut BTreeMap<u64, (u64, u32)>, start: u64, end: u64, mut each: impl FnMut(u64, u64, u32)) {
        // The range that starts before `start` and reaches into it.
        if let Some((&s, &(e, r))) = space.range(..start).next_back() {
            if e > start {
                space.insert(s, (start, r));
                if e > end {
                    space.insert(end, (e, r));
                }
                each(start, e.min(end), r);
            }
        }
        let inside: Vec<(u64, (u64, u32))> = space.range(start..end).map(|(&s, &v)| (s, v)).collect();
        for (s, (e, r)) in inside {
            space.remove(&s);
            if e > end {
                space.insert(end, (e, r));
            }
            each(s, e.min(end), r);
        }
    }

    /// Process `asid` maps `[start, start + len)` with the rights among `flags`.
    pub fn map(&mut self, asid: u32, start: u64, len: u64, flags: u32) {
        let end = start.saturating_add(len);
        if end <= start {
            return;
        }
        let space = self.spaces.entry(asid).or_default();
        Self::cut(space, start, end, |_, _, _| {});
        space.insert(start, (end, flags & RIGHTS));
    }

    /// Process `asid` unmaps `[start, start + len)`.
    pub fn unmap(&mut self, asid: u32, start: u64, len: u64) {
        let end = start.saturating_add(len);
        if let (true, Some(space)) = (end > start, self.spaces.get_mut(&asid)) {
            Self::cut(space, start, end, |_, _, _| {});
        }
    }

    /// Process `asid` sets the rights of `[start, start + len)` to those among `flags`; appends
    /// to `lost` the pieces `(start, len)` that lose a right they had (pieces never mapped
    /// count as having had all three), in address order.
    pub fn protect(&mut self, asid: u32, start: u64, len: u64, flags: u32, lost: &mut Vec<(u64, u64)>) {
        let end = start.saturating_add(len);
        if end <= start {
            return;
        }
        let new = flags & RIGHTS;
        let space = self.spaces.entry(asid).or_default();
        let mut at = start;
        Self::cut(space, start, end, |lo, hi, old| {
            if lo > at && RIGHTS & !new != 0 {
                lost.push((at, lo - at)); // a gap: never mapped
            }
            if old & !new != 0 {
                lost.push((lo, hi - lo));
            }
            at = hi;
        });
        if at < end && RIGHTS & !new != 0 {
            lost.push((at, end - at));
        }
        // Neighbouring pieces that lose rights are one range.
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(lost.len());
        for &(s, n) in lost.iter() {
            match merged.last_mut() {
                Some((ps, pn)) if *ps + *pn == s => *pn += n,
                _ => merged.push((s, n)),
            }
        }
        *lost = merged;
        space.insert(start, (end, new));
    }

    /// The rights of address `addr` of `asid`, if a map or protect of the trace set them.
    pub fn at(&self, asid: u32, addr: u64) -> Option<u32> {
        let (_, &(e, r)) = self.spaces.get(&asid)?.range(..=addr).next_back()?;
        (addr < e).then_some(r)
    }

    /// `child` starts with a copy of `parent`'s ranges.
    pub fn fork(&mut self, parent: u32, child: u32) {
        let copy = self.spaces.get(&parent).cloned().unwrap_or_default();
        self.spaces.insert(child, copy);
    }

    /// Process `asid` exits.
    pub fn exit(&mut self, asid: u32) {
        self.spaces.remove(&asid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::map_flags::{EXEC, READ, WRITE};

    #[test]
    fn protect_reports_only_pieces_that_lose_a_right() {
        let mut r = Rights::default();
        r.map(1, 0x1000, 0x4000, READ | WRITE); // [0x1000, 0x5000) rw
        r.map(1, 0x5000, 0x1000, READ); // [0x5000, 0x6000) r
        let mut lost = Vec::new();
        // Read-only over both: only the rw piece loses a right.
        r.protect(1, 0x1000, 0x5000, READ, &mut lost);
        assert_eq!(lost, vec![(0x1000, 0x4000)]);
        assert_eq!(r.at(1, 0x2000), Some(READ));
        // Adding rights loses nothing.
        lost.clear();
        r.protect(1, 0x2000, 0x1000, READ | WRITE | EXEC, &mut lost);
        assert!(lost.is_empty());
        assert_eq!(
            (r.at(1, 0x1fff), r.at(1, 0x2000), r.at(1, 0x3000)),
            (Some(READ), Some(READ | WRITE | EXEC), Some(READ))
        );
        // A range never mapped (a gap beyond 0x6000) counts as having had every right.
        lost.clear();
        r.protect(1, 0x5000, 0x3000, READ, &mut lost);
        assert_eq!(lost, vec![(0x6000, 0x2000)]);
        // Neighbouring losing pieces merge; an unmap forgets the range.
        lost.clear();
        r.protect(1, 0x2000, 0x2000, 0, &mut lost);
        assert_eq!(lost, vec![(0x2000, 0x2000)]);
        r.unmap(1, 0x1000, 0x10000);
        assert_eq!(r.at(1, 0x1000), None);
    }

    #[test]
    fn fork_copies_and_exit_forgets() {
        let mut r = Rights::default();
        r.map(1, 0, 0x1000, READ | WRITE);
        r.fork(1, 2);
        let mut lost = Vec::new();
        r.protect(2, 0, 0x1000, READ | WRITE, &mut lost);
        assert!(lost.is_empty(), "the child had the parent's rights");
        r.exit(2);
        assert_eq!(r.at(2, 0), None);
        assert_eq!(r.at(1, 0), Some(READ | WRITE));
    }
}
