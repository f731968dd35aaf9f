//! What the machine does with a trace's events under the Linux-like VM model: process
//! switches, maps (layouts, shared text, shadow superpages), unmaps, forks, exits, objects and
//! system calls. An OS personality with handlers of its own (Mach 3.0) then sees the same
//! event ([`super::System::event`]).

use super::error::DesignError;
use super::machine::Machine;
use crate::addr::{Asid, Pfn, Vpn};
use crate::cache::Route;
use crate::os::shadow::{MemOp, ShadowPolicy};
use crate::os::{ForkFlush, Os, OutOfMemory, PtOp};
use crate::pt::Pte;
use crate::tlb::GLOBAL;
use crate::trace::Kind;
use crate::trace::Record;

impl Machine {
    /// One event record.
    pub(crate) fn event(&mut self, r: &Record) -> Result<(), DesignError> {
        if self.cores.is_some() && self.cores_event(r) {
            // A scheduling record placed its thread on a core (`engine/cores.rs`).
            match *r {
                Record::ContextSwitch { .. } => {
                    self.stats.events.context_switches += 1;
                    if self.kernel.is_some() {
                        self.kernel_footprint();
                    }
                }
                Record::Thread { .. } => self.stats.events.threads += 1,
                _ => {}
            }
            return Ok(());
        }
        let e = &mut self.stats.events;
        match *r {
            Record::Access { .. } => {}
            Record::Process { asid } => self.switch_to(asid)?,
            Record::ContextSwitch { asid } => {
                e.context_switches += 1;
                self.switch_to(asid)?;
                if self.kernel.is_some() {
                    self.kernel_footprint();
                }
            }
            Record::Map { start, len, flags } => {
                e.maps += 1;
                self.os.rights_mut().map(self.front.asid.0, start, len, flags);
                self.map(start, len, flags)?;
            }
            Record::Protect { start, len, flags } => {
                e.protects += 1;
                self.protect(start, len, flags);
            }
            Record::Discard { start, len, lazy } => {
                e.discards += 1;
                self.discard(start, len, lazy);
            }
            Record::Unmap { start, len } => {
                e.unmaps += 1;
                self.os.rights_mut().unmap(self.front.asid.0, start, len);
                let (start, len) = self.shadow_clip_unmap(start, len);
                match &mut self.front.layout {
                    None => self.unmap_laid_out(start, len),
                    Some(l) => {
                        let mut un = std::mem::take(&mut self.unmapped);
                        un.clear();
                        l.unmap(start, len, &mut un);
                        for &(lo, n) in &un {
                            self.unmap_laid_out(lo, n);
                        }
                        self.unmapped = un;
                        self.release_shared();
                    }
                }
            }
            Record::Fork { child } => {
                e.forks += 1;
                self.fork(child)?;
            }
            Record::Exit { asid } => {
                e.exits += 1;
                self.exit(asid);
            }
            Record::Object { id, offset } => {
                self.front.pending_object = Some((id, offset));
                if let Some(l) = &mut self.front.layout {
                    l.object(id, offset);
                }
            }
            Record::Ipc { .. } => {
                e.ipcs += 1;
                if self.kernel.is_some() {
                    self.kernel_footprint();
                }
            }
            Record::Syscall { nr, buf, len, .. } => {
                e.syscalls += 1;
                if self.kernel.is_some() {
                    self.kernel_footprint();
                }
                if nr == crate::trace::sysno::MADVISE && len > 0 && self.os.shadow_policy() == ShadowPolicy::Markers {
                    let asid = self.front.asid;
                    self.shadow_change(|os, ops, sd| os.shadow_region(asid, buf, buf.saturating_add(len), ops, sd))?;
                }
            }
            Record::Marker { .. } => e.markers += 1,
            Record::Thread { .. } => e.threads += 1,
        }
        Ok(())
    }

    /// The kernel's footprint for one event (a system call, context switch, IPC or page fault):
    /// its text pages fetched and its data pages loaded through the TLBs, as global entries of
    /// a wired mapping (a miss in every level fills them without a walk: the event's cycles in
    /// `[os]` pay for it), and in a timed design every line of them through the caches. Nothing
    /// is allocated.
    #[inline(never)]
    pub(crate) fn kernel_footprint(&mut self) {
        let Some(k) = self.kernel else {
            return;
        };
        self.kernel_touch(&k, crate::os::KERNEL_BASE, k.text_bytes, Kind::Ifetch);
        self.kernel_touch(&k, crate::os::KernelFootprint::DATA, k.data_bytes, Kind::Load);
    }

    /// References of kind `kind` to kernel bytes `[start, start + bytes)`: one TLB lookup per
    /// page, one cache reference per line (timed designs).
    fn kernel_touch(&mut self, k: &crate::os::KernelFootprint, start: u64, bytes: u64, kind: Kind) {
        if bytes == 0 {
            return;
        }
        let shift = self.page_size.shift();
        let (first, last) = (start >> shift, (start + bytes - 1) >> shift);
        let base = crate::os::KERNEL_BASE >> shift;
        let path = self.tlbs.path(kind.is_data());
        for vpn in first..=last {
            let pfn = k.first_frame + (vpn - base);
            let pte = Pte::base(Pfn(pfn), self.page_size);
            self.stats.kernel.tlb_lookups += 1;
            let mut hit = false;
            for (i, &t) in path.levels().iter().enumerate() {
                let t = t as usize;
                self.stats.tlb_access(t);
                if self.tlbs.structures[t].tlb.lookup(Asid(GLOBAL), Vpn(vpn)).is_some() {
                    self.tlbs.fill(&path.levels()[..i], GLOBAL, Vpn(vpn), pte, &mut self.stats);
                    hit = true;
                    break;
                }
                self.stats.tlb_misses(t, 1);
            }
            if !hit {
                self.stats.kernel.tlb_misses += 1;
                self.tlbs.fill(path.levels(), GLOBAL, Vpn(vpn), pte, &mut self.stats);
            }
            if let Some(t) = self.mem.timed_mut() {
                let lo = (vpn << shift).max(start);
                let hi = ((vpn << shift) + (self.page_size.bytes() - 1)).min(start + bytes - 1);
                let pa = (pfn << shift) + (lo - (vpn << shift));
                t.cache_refs(kind, lo, hi, pa, GLOBAL, &mut self.stats);
            }
        }
    }

    /// A map of the running process: the image's text names its program (shared text), the
    /// layout places the mapping, and shadow superpages may back it.
    fn map(&mut self, start: u64, len: u64, flags: u32) -> Result<(), DesignError> {
        let pending = self.front.pending_object.take();
        let object = pending.map(|(id, _)| id);
        // The image's text names the executable: with shared text, its program.
        use crate::trace::map_flags::{EXEC, IMAGE, WRITE};
        if let (Some(r), Some(obj)) = (&mut self.front.regions, object) {
            if flags & (IMAGE | EXEC) == IMAGE | EXEC && flags & WRITE == 0 {
                let mut purged = false;
                let changed = r.set_executable(self.front.asid.0, obj, &mut purged);
                if purged {
                    self.purge_rids();
                }
                match changed {
                    Ok(Some(t)) => self.front.tags = t,
                    Ok(None) => {}
                    Err(error) => return Err(DesignError::Rids { config: self.name.clone(), error }),
                }
            }
        }
        if let Some(l) = &mut self.front.layout {
            // Placing a mapping over an old one unmaps the old one's pages.
            let mut un = std::mem::take(&mut self.unmapped);
            un.clear();
            let r = l.map(start, len, flags, &mut un);
            for &(lo, n) in &un {
                self.unmap_laid_out(lo, n);
            }
            self.unmapped = un;
            self.release_shared();
            r.map_err(|error| DesignError::Layout { config: self.name.clone(), error })?;
        }
        if matches!(self.os.shadow_policy(), ShadowPolicy::Heap | ShadowPolicy::All) {
            self.shadow_map(start, len, flags)?;
        }
        if let (Some((id, offset)), true) = (pending, self.os.has_page_cache()) {
            self.map_object(start, len, flags, id, offset);
        }
        Ok(())
    }

    /// The page cache's record of a file-backed map (object `id` from byte `offset`) of the
    /// running process, at its laid-out address in the space it lands in: its own, or a region
    /// its space shares with other processes (a program's text, the shared region), whose one
    /// record serves every process that maps the object there. A map into an `os.global`
    /// region is not recorded (its pages are wired for every process).
    fn map_object(&mut self, start: u64, len: u64, flags: u32, id: u32, offset: u64) {
        if len == 0 {
            return;
        }
        let start = match &self.front.layout {
            Some(l) => start.wrapping_add(l.last_delta()),
            None => start,
        };
        let vpn = Vpn(start >> self.page_size.shift());
        if self.front.is_global(vpn) {
            return;
        }
        let space = self.front.tag(vpn);
        self.os.map_object(space, start, len, id, offset, flags);
    }

    /// The running process forks `child`: the child's spaces (with regions, its private
    /// regions' own) get copies of the parent's mappings, and the parent's translations are
    /// flushed as `os.fork_flush` says.
    fn fork(&mut self, child: u32) -> Result<(), DesignError> {
        if let Some(l) = &mut self.front.layout {
            l.fork(child);
        }
        let mut ops = std::mem::take(&mut self.ops);
        ops.clear();
        let parent = self.front.asid.0;
        // The fork write-protects the parent's private pages, so the kernel flushes the
        // parent's translations (`os.fork_flush`): its own spaces' entries are shot down below,
        // and under `new-context` its private regions get new RIDs first (the child's context
        // comes after). Shared regions and global entries stay.
        let mut shootdown = std::mem::take(&mut self.shootdown);
        shootdown.clear();
        let flush = self.os.fork_flush();
        if flush != ForkFlush::None {
            let tags = self.front.tags;
            for vrn in 0..8 {
                if self.front.is_private(vrn) && !tags[..vrn].contains(&tags[vrn]) {
                    shootdown.push((Asid(tags[vrn]), Vpn(0), Vpn(u64::MAX)));
                }
            }
        }
        if let (ForkFlush::NewContext, Some(r)) = (flush, self.front.regions.as_mut()) {
            let mut purged = false;
            let renewed = r.renew(parent, &mut purged);
            if purged {
                self.purge_rids();
            }
            if let Err(error) = renewed {
                self.ops = ops;
                self.shootdown = shootdown;
                return Err(DesignError::Rids { config: self.name.clone(), error });
            }
        }
        self.os.rights_mut().fork(parent, child);
        let child_spaces = self.front.regions.as_mut().map(|r| {
            let mut purged = false;
            let theirs = r.spaces(child, Some(parent), &mut purged);
            (theirs, purged)
        });
        match child_spaces {
            None => self.os.fork_ops(self.front.asid, Asid(child), &mut ops),
            Some((theirs, purged)) => {
                if purged {
                    self.purge_rids();
                }
                let theirs = match theirs {
                    Ok(t) => t,
                    Err(error) => {
                        self.ops = ops;
                        self.shootdown = shootdown;
                        return Err(DesignError::Rids { config: self.name.clone(), error });
                    }
                };
                // A purge may have renamed the parent's RIDs, never its spaces.
                let mine = self.front.tags;
                let r = self.front.regions.as_ref().expect("regions");
                for vrn in 0..8 {
                    if r.is_private(child, vrn) {
                        self.os.fork_ops(Asid(mine[vrn]), Asid(theirs[vrn]), &mut ops);
                    }
                }
            }
        }
        self.apply(&ops, &shootdown);
        self.ops = ops;
        self.shootdown = shootdown;
        Ok(())
    }

    /// Process `asid` exits: its spaces' pages are unmapped and their TLB entries flushed.
    fn exit(&mut self, asid: u32) {
        if asid == self.front.asid.0 {
            self.pt_census_sample();
        }
        if let Some(l) = &mut self.front.layout {
            l.exit(asid);
        }
        self.release_shared();
        self.os.rights_mut().exit(asid);
        if let Some(k) = &mut self.front.keys {
            k.exit(asid);
        }
        let spaces = match &mut self.front.regions {
            None => vec![asid],
            Some(r) => r.exit(asid),
        };
        if let Some(c) = &mut self.cores {
            c.exiting = true;
        }
        for space in spaces {
            self.unmap_range(Asid(space), Vpn(0), Vpn(u64::MAX));
            self.os.shadow_exit(Asid(space));
            self.walk.pt.remove_asid(Asid(space));
            self.tlbs.flush_asid(Asid(space), &mut self.stats);
        }
        if let Some(c) = &mut self.cores {
            c.exiting = false;
        }
        if self.cores.is_some() {
            self.cores_exit(asid);
        }
    }

    /// Shadow superpages at map time (`heap`, `all`): heap growth goes to the modified `sbrk`,
    /// other mappings are mapped in superpages whole (`all`, unless they allow no access) or
    /// when anonymous, private, writable and at least `shadow.min_bytes` long (`heap`).
    fn shadow_map(&mut self, start: u64, len: u64, flags: u32) -> Result<(), DesignError> {
        use crate::trace::map_flags::{EXEC, FILE, HEAP, READ, SHARED, STACK, WRITE};
        let asid = self.front.asid;
        let end = start.saturating_add(len);
        if flags & HEAP != 0 {
            return self.shadow_change(|os, ops, sd| os.shadow_heap_grow(asid, start, end, ops, sd).map(|_| ()));
        }
        let wanted = match self.os.shadow_policy() {
            // Not reservations without access (guard areas, reserved arenas).
            ShadowPolicy::All => flags & (READ | WRITE | EXEC) != 0,
            _ => flags & (FILE | SHARED | STACK | EXEC) == 0 && flags & WRITE != 0 && len >= self.shadow.min_bytes,
        };
        if wanted {
            self.shadow_change(|os, ops, sd| os.shadow_region(asid, start, end, ops, sd).map(|_| ()))?;
        }
        Ok(())
    }

    /// An unmap of the running process, less the part of its heap the modified `sbrk`
    /// preallocated (it never gives memory back: a shrinking heap keeps its superpages).
    fn shadow_clip_unmap(&self, start: u64, len: u64) -> (u64, u64) {
        let Some((lo, hi)) = self.os.shadow_heap(self.front.asid) else {
            return (start, len);
        };
        let end = start.saturating_add(len);
        if start >= lo && start < hi {
            let s = hi.min(end);
            return (s, end - s);
        }
        (start, len)
    }

    /// Runs an OS change of shadow mappings, then what it asked of the memory side and the
    /// page table.
    fn shadow_change<T>(
        &mut self,
        f: impl FnOnce(&mut Os, &mut Vec<PtOp>, &mut Vec<(Asid, Vpn, Vpn)>) -> Result<T, OutOfMemory>,
    ) -> Result<(), DesignError> {
        let mut ops = std::mem::take(&mut self.ops);
        let mut shootdown = std::mem::take(&mut self.shootdown);
        ops.clear();
        shootdown.clear();
        let r = f(&mut self.os, &mut ops, &mut shootdown);
        self.apply_mem();
        self.apply(&ops, &shootdown);
        self.ops = ops;
        self.shootdown = shootdown;
        r.map(|_| ()).map_err(|error| DesignError::OutOfMemory { config: self.name.clone(), error })
    }

    /// Applies the OS's memory-side operations: page flushes and purges through the caches (the
    /// loop's cycles per line of the first data level, plus `shadow.writeback_cycles` per dirty
    /// line a flush writes to memory), dropped lines, and the memory controller's table.
    fn apply_mem(&mut self) {
        let mut mem = std::mem::take(&mut self.mem_ops);
        self.os.take_mem_ops(&mut mem);
        if mem.is_empty() {
            self.mem_ops = mem;
            return;
        }
        let page = self.page_size.bytes();
        let per_line = self.shadow.flush_line_cycles;
        for op in &mem {
            let Some(t) = self.mem.timed_mut() else {
                break;
            };
            let h = &mut t.h;
            match *op {
                MemOp::Flush { asid, va, pa, purge, create } => {
                    let loop_lines = h.first_line_shift(Route::Data).map_or(0, |s| page >> s);
                    let (found, dirty) = match pa {
                        Some(pa) => h.flush_page(asid, va, pa, page, !purge),
                        None => (0, 0),
                    };
                    let cycles = loop_lines * per_line + dirty * self.shadow.writeback_cycles;
                    self.os.shadow_flushed(found, dirty, cycles, create);
                }
                MemOp::Discard { asid, va, pa } => {
                    h.flush_page(asid, va, pa, page, false);
                }
                MemOp::Table { shadow, real } => {
                    if let Some(m) = h.mtlb_mut() {
                        m.map(shadow, real);
                    }
                }
            }
        }
        mem.clear();
        self.mem_ops = mem;
    }

    /// The shared-region windows (`[itanium] shared_region`) that no process maps any more lose
    /// their pages, for every process: munmap removes the page-table entries of what it unmaps,
    /// and with the last mapping gone no page table holds the window's pages.
    fn release_shared(&mut self) {
        let mut released = std::mem::take(&mut self.unmapped);
        released.clear();
        if let Some(l) = &mut self.front.layout {
            l.take_released(&mut released);
        }
        let shift = self.page_size.shift();
        for &(start, len) in &released {
            if len == 0 {
                continue;
            }
            let (first, last) = (Vpn(start >> shift), Vpn(start.saturating_add(len - 1) >> shift));
            let space = self.front.tag(first);
            self.unmap_range(space, first, last);
        }
        self.unmapped = released;
    }

    /// The running process unmaps laid-out bytes `[start, start + len)`. Pages of a region shared
    /// with other processes (a program's text, the global shared region) stay mapped for them.
    fn unmap_laid_out(&mut self, start: u64, len: u64) {
        if len == 0 {
            return;
        }
        let shift = self.page_size.shift();
        let (first, last) = (Vpn(start >> shift), Vpn(start.saturating_add(len - 1) >> shift));
        // Unmapping inside a global region unmaps the shared pages for everyone.
        let mut spaces = std::mem::take(&mut self.spaces);
        spaces.clear();
        self.front.spaces(first, last, &mut spaces);
        for &(asid, lo, hi) in &spaces {
            self.unmap_range(asid, lo, hi);
        }
        self.spaces = spaces;
    }

    /// The spaces and page ranges of the running process's trace bytes `[start, start + len)`,
    /// laid out (without changing the layout) and split by region as [`Machine::unmap_laid_out`]
    /// splits them, appended to `out` (`pieces`: scratch). Pieces in a global region name
    /// [`GLOBAL_SPACE`](super::front::GLOBAL_SPACE).
    fn spaces_of(&self, start: u64, len: u64, pieces: &mut Vec<(u64, u64)>, out: &mut Vec<(Asid, Vpn, Vpn)>) {
        pieces.clear();
        match &self.front.layout {
            None => pieces.push((start, len)),
            Some(l) => l.translate(start, len, pieces),
        }
        let shift = self.page_size.shift();
        for &(start, len) in pieces.iter() {
            if len == 0 {
                continue;
            }
            let (first, last) = (Vpn(start >> shift), Vpn(start.saturating_add(len - 1) >> shift));
            self.front.spaces(first, last, out);
        }
    }

    /// The running process sets the rights of `[start, start + len)` to `flags`'s. The pieces
    /// that lose a right have their resident pages' TLB entries shot down, in one shootdown
    /// (the page table keeps its entries: the models' PTEs carry no rights). A change that only
    /// adds rights invalidates nothing, as Linux on x86 does (`pte_needs_flush()`,
    /// arch/x86/include/asm/tlbflush.h, since Linux 6.0: an upgrade needs no flush, the
    /// hardware rechecks a stricter entry against the page table on a fault).
    fn protect(&mut self, start: u64, len: u64, flags: u32) {
        let asid = self.front.asid.0;
        let mut lost = std::mem::take(&mut self.unmapped);
        lost.clear();
        self.os.rights_mut().protect(asid, start, len, flags, &mut lost);
        let mut sd = std::mem::take(&mut self.shootdown);
        sd.clear();
        let mut pieces = std::mem::take(&mut self.pieces);
        for &(s, n) in &lost {
            self.spaces_of(s, n, &mut pieces, &mut sd);
        }
        self.pieces = pieces;
        self.unmapped = lost;
        let pages: u64 = sd.iter().map(|&(a, f, l)| self.os.resident_in(a, f, l)).sum();
        if pages > 0 {
            self.stats.events.protect_shootdowns += 1;
            self.stats.events.pages_protected += pages;
            self.apply(&[], &sd);
        }
        self.shootdown = sd;
    }

    /// The running process drops the pages of `[start, start + len)` and keeps the mapping:
    /// their frames are freed (the next touch faults a fresh page) and their TLB entries shot
    /// down, in one shootdown. `lazy` (`MADV_FREE`): the pages stay (they would go only under
    /// memory pressure, which the models do not have), but their entries are shot down, as
    /// Linux clears the pages' dirty bits and flushes them.
    fn discard(&mut self, start: u64, len: u64, lazy: bool) {
        let (start, len) = self.shadow_clip_unmap(start, len);
        let mut ranges = std::mem::take(&mut self.discarded);
        ranges.clear();
        let mut pieces = std::mem::take(&mut self.pieces);
        self.spaces_of(start, len, &mut pieces, &mut ranges);
        self.pieces = pieces;
        let mut ops = std::mem::take(&mut self.ops);
        let mut sd = std::mem::take(&mut self.shootdown);
        ops.clear();
        sd.clear();
        let mut pages = 0;
        for &(a, f, l) in &ranges {
            if lazy {
                let n = self.os.resident_in(a, f, l);
                if n > 0 {
                    sd.push((a, f, l));
                }
                pages += n;
            } else {
                pages += self.os.discard_range(a, f, l, &mut ops, &mut sd);
            }
        }
        self.stats.events.pages_discarded += pages;
        self.apply_mem();
        if !ops.is_empty() || !sd.is_empty() {
            self.apply(&ops, &sd);
        }
        self.ops = ops;
        self.shootdown = sd;
        self.discarded = ranges;
    }

    /// Unmaps the resident pages of `asid` in `[first, last]` and shoots down their TLB entries.
    fn unmap_range(&mut self, asid: Asid, first: Vpn, last: Vpn) {
        let mut ops = std::mem::take(&mut self.ops);
        let mut shootdown = std::mem::take(&mut self.shootdown);
        ops.clear();
        shootdown.clear();
        self.stats.events.pages_unmapped += self.os.unmap_range(asid, first, last, &mut ops, &mut shootdown);
        self.apply_mem();
        self.apply(&ops, &shootdown);
        self.ops = ops;
        self.shootdown = shootdown;
    }
}
