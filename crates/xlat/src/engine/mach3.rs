//! The Mach 3.0 personality (`os.personality = "mach3"`, bala94) on the machine: TLB misses
//! handled the way Mach's handlers do on the R3000, up the page-table hierarchy of
//! [`crate::os::mach3`], with the STLB and PTLB, and the kernel's own references for IPC,
//! system calls and context switches. [`Kernel`] works on the machine's parts
//! ([`Machine`]): its TLB structures, walk record and software TLB, memory side, front and VM
//! model; it never sees the [`super::System`] around them. Nothing here runs for other designs.

use super::design::{Design, Path};
use super::error::DesignError;
use super::machine::Machine;
use crate::addr::{Asid, Vpn};
use crate::os::mach3::{CostModel, Mach3, Mach3Stats, MissType, Object, KSEG2, KUSEG_TOP};
use crate::os::PtOp;
use crate::tlb::{TlbData, GLOBAL};
use crate::trace::{fd_kind, Kind, Record};

const PAGE_SHIFT: u32 = 12;
/// PTLB roles (bala94 §3.1): kernel pages of the IPC structures (L1K), user page-table pages
/// of the message buffers and of the receiver's code and stack (L2; not its data segment,
/// which §3.1 leaves out), and kernel page-table pages of the buffers' L2 PTEs (L3).
const ROLE_L1K: [Object; 6] = [Object::Port, Object::Space, Object::Kmsg, Object::Thread, Object::Kstack, Object::Task];
const ROLES: u32 = 12;

/// The personality's state: Mach's model (its kseg2 layout, costs, task slots, PTLB table and
/// counters) and whether the kernel is running.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    mach: Mach3,
    /// The kernel is running (its references to user memory take kernel-mode paths).
    in_kernel: bool,
    /// `[ptlb]`: cycles of a prefetch and of finding the entry already present.
    ptlb_cycles: Option<(u64, u64)>,
    /// `[stlb]` is configured: the STLB's code taxes the traps it does not serve (§4.1).
    stlb: bool,
}

impl Kernel {
    /// The personality of a validated `mach3` design.
    pub(crate) fn new(design: &Design) -> Kernel {
        let config = design.config();
        // The machine's shape and the cost model's caches were checked with the config.
        let kernel_phys = config.os.memory_bytes.div_ceil(4096) * 4096;
        let mach = Mach3::new(&config.mach3, config.ptlb.as_ref(), config.stlb.is_some(), kernel_phys)
            .expect("validated: mach3");
        Kernel {
            mach,
            in_kernel: false,
            ptlb_cycles: config.ptlb.as_ref().map(|p| (p.prefetch_cycles, p.present_cycles)),
            stlb: config.stlb.is_some(),
        }
    }

    /// The personality's counters.
    pub(crate) fn stats(&self) -> Mach3Stats {
        self.mach.stats
    }

    /// The frame of user page `vpn` for a kernel reference (a copyin or copyout): the TLB, then
    /// Mach's handlers on a miss.
    fn translate(&mut self, x: &mut Machine, is_data: bool, vpn: Vpn) -> Result<u64, DesignError> {
        if let Some(pfn) = x.l1_hit(is_data, vpn) {
            return Ok(pfn);
        }
        match x.beyond_l1(is_data, vpn) {
            Ok(pfn) => Ok(pfn),
            Err(path) => self.user_miss(x, path, vpn),
        }
    }

    /// The Mach model.
    fn mach(&mut self) -> &mut Mach3 {
        &mut self.mach
    }

    /// A user page's miss in the TLB: the L1U fast handler loads the page's PTE from the task's
    /// user page table in kseg2, which may itself miss (an L2 miss, then an L3 miss); a PTE the
    /// VM system has not made valid is a TLB-invalid miss (a page fault).
    pub(super) fn user_miss(&mut self, x: &mut Machine, path: Path, vpn: Vpn) -> Result<u64, DesignError> {
        let asid = x.front.asid;
        if vpn.0 >= crate::os::mach3::KUSEG_TOP >> PAGE_SHIFT {
            return Err(DesignError::AddressRange {
                config: x.name.clone(),
                addr: vpn.0 << PAGE_SHIFT,
                va_bits: 31,
                key: "kuseg, the R3000's 2 GB user space",
            });
        }
        let slot = self.mach_slot(x, asid.0)?;
        let is_data = x.tlbs.is_data_path(path);
        let m = self.mach();
        if !is_data {
            m.code_vpn[slot as usize] = vpn.0;
        }
        m.count(MissType::L1u, 0);
        let (c, i) = (m.cfg.l1u_cycles, m.cfg.l1u_instructions);
        let mut user = c + self.handler_fetch(x, false, i);
        let pte_va = Mach3::upt_va(slot, vpn.0);
        let before = self.mach().stats.kernel_misses();
        // A page of the user page table not allocated yet has no valid L2 PTE: the L2 miss's
        // handler finds none, and the page fault that follows allocates it.
        let absent = !self.mach().upt_present(slot, vpn.0);
        self.mach_kernel_tr(x, pte_va >> PAGE_SHIFT, 1, false, absent);
        self.count_mach_walk(x, before);
        let pa = self.mach().kpa(pte_va);
        user += self.handler_load(x, pa);
        let m = self.mach();
        m.stats.miss_cycles = m.stats.miss_cycles.saturating_add(user);
        m.stats.user_cycles = m.stats.user_cycles.saturating_add(user);
        let pte = match x.walk.pt.get(asid, vpn) {
            Some(pte) => pte,
            None => {
                let stlb = self.stlb;
                let m = self.mach();
                m.stats.invalid += 1;
                let c = m.generic_cycles(MissType::Invalid);
                m.stats.miss_cycles = m.stats.miss_cycles.saturating_add(c);
                m.stats.user_cycles = m.stats.user_cycles.saturating_add(c);
                if stlb {
                    // A trap through the generic handler that the STLB's code does not serve.
                    let t = m.cfg.stlb_trap_cycles;
                    m.stats.stlb_overhead_cycles = m.stats.stlb_overhead_cycles.saturating_add(t);
                }
                x.stats.page_fault();
                x.fault(asid, vpn)?;
                // The VM system writes the PTEs the fault made, in the kernel.
                let was = std::mem::replace(&mut self.in_kernel, true);
                let r = self.pte_writes(x);
                self.in_kernel = was;
                r?;
                x.walk.pt.get(asid, vpn).expect("the fault mapped it")
            }
        };
        // The L1U entry goes to the upper partition; a kernel entry it evicts goes to the STLB.
        let s = path.levels[0] as usize;
        let f = x.tlbs.structures[s].tlb.fill(asid.0, vpn, pte);
        if let Some(e) = f.evicted {
            x.stats.tlb_fill(s, 1, 0);
            self.mach_evicted(x, e);
        }
        Ok(pte.pfn.0)
    }

    /// Makes sure the TLB translates kernel page `kvpn`: a lookup in the partition its entry
    /// type lives in and, on a miss, the generic trap handler (the STLB first, if any; then the
    /// page-table entry one level up, which may miss in turn). `depth` is the cascade depth of
    /// a miss here; `nested` says the generic handler is already servicing a kernel miss;
    /// `absent`: the page's PTE is not valid (a user page-table page not allocated yet), so
    /// the handler loads it and enters nothing.
    fn mach_kernel_tr(&mut self, x: &mut Machine, kvpn: u64, depth: u32, nested: bool, absent: bool) {
        let t = Mach3::kernel_type(kvpn);
        let s = if t == MissType::L2 { x.tlbs.pt_tlb } else { x.tlbs.dpath.levels[0] as usize };
        x.stats.tlb_access(s);
        if s == x.tlbs.dpath.levels[0] as usize {
            self.mach().stats.tlb_lookups += 1;
        }
        if x.tlbs.structures[s].tlb.lookup(Asid(GLOBAL), Vpn(kvpn)).is_some() {
            let m = self.mach();
            if !m.prefetched.is_empty() {
                if let Some(i) = m.prefetched.iter().position(|&v| v == kvpn) {
                    m.prefetched.swap_remove(i);
                    m.stats.ptlb_useful += 1;
                }
            }
            return;
        }
        x.stats.tlb_misses(s, 1);
        let kernel = self.in_kernel;
        let m = self.mach();
        m.count(t, depth);
        m.stats.nested += nested as u64;
        // Every handler that refills the level-1 structure is a walk (misses there == walks),
        // counted by depth with the kernel misses its own handler takes.
        let walk = s == x.tlbs.dpath.levels[0] as usize;
        let before = self.mach().stats.kernel_misses();
        let probed = match x.stats.stlb.as_mut() {
            Some(counts) => x.walk.stlb_probe(Asid(GLOBAL), Vpn(kvpn), counts),
            None => None,
        };
        if let Some(hit) = probed {
            let g = x.walk.stlb.as_deref().expect("stlb").geometry();
            let m = &mut self.mach;
            let probe = m.stlb_set_pa(kvpn % (g.entries / g.ways) as u64, g.ways as u64);
            let (c, i) = if hit {
                (m.stlb_hit_cycles(t, kernel), m.stlb_hit_path(t, kernel)[0])
            } else {
                (m.stlb_miss_cycles(), m.cfg.trap_stlb_fail[0])
            };
            let c = c + self.handler_fetch(x, true, i) + self.stlb_probe(x, probe);
            let ms = &mut self.mach().stats;
            ms.miss_cycles = ms.miss_cycles.saturating_add(c);
            if hit && !absent {
                self.mach_insert(x, s, kvpn);
                if walk {
                    self.count_mach_walk(x, before);
                }
                return;
            }
        }
        let m = self.mach();
        let (c, i) = (m.generic_cycles(t), m.generic_path(t).map_or(0, |p| p[0]));
        let c = c + self.handler_fetch(x, true, i);
        let ms = &mut self.mach().stats;
        ms.miss_cycles = ms.miss_cycles.saturating_add(c);
        let pa = if t == MissType::L3 {
            self.mach().root_pa(kvpn)
        } else {
            let pte_va = Mach3::kpt_va(kvpn);
            self.mach_kernel_tr(x, pte_va >> PAGE_SHIFT, depth + 1, true, false);
            self.mach().kpa(pte_va)
        };
        let c = self.handler_load(x, pa);
        let ms = &mut self.mach().stats;
        ms.miss_cycles = ms.miss_cycles.saturating_add(c);
        if !absent {
            self.mach_insert(x, s, kvpn);
        }
        if walk {
            self.count_mach_walk(x, before);
        }
    }

    /// Files a walk under `walks.by_depth` by the kernel misses taken since `before` (the
    /// kernel-miss count when its handler started): the nested misses of its cascade.
    fn count_mach_walk(&mut self, x: &mut Machine, before: u64) {
        let nested = self.mach().stats.kernel_misses() - before;
        x.stats.walks(nested, 1);
    }

    /// A handler's page-table load at `pa` (unmapped) through the caches of a timed design:
    /// returns its cycles beyond a hit, or under the `cache` cost model `t` if it misses the
    /// first level.
    fn handler_load(&mut self, x: &mut Machine, pa: u64) -> u64 {
        x.walk.rec.handler_reads(1);
        let c = x.mem.kernel_access(Kind::Load, pa, &mut x.stats);
        let hit = l1_walk_latency(x);
        let m = self.mach();
        if m.cfg.cost_model == CostModel::Cache {
            m.miss_penalty() * (c > hit) as u64
        } else {
            c.saturating_sub(1)
        }
    }

    /// Under the `cache` cost model, the STLB probe reads the set at `pa` through the data
    /// caches (one reference per line of the set): `t` per level-1 miss. Otherwise Table 5's
    /// and §6.2's costs include it (0).
    fn stlb_probe(&mut self, x: &mut Machine, pa: u64) -> u64 {
        let ways = x.walk.stlb.as_deref().map_or(1, |s| s.geometry().ways) as u64;
        self.cached_lines(x, Kind::Load, pa, pa + 8 * ways)
    }

    /// Under the `cache` cost model, a handler path of `i` instructions runs straight from its
    /// vector (`general`: the general exception vector, else the UTLB vector) through the
    /// instruction cache, one reference per line: returns `t` per level-1 miss (§6.2).
    fn handler_fetch(&mut self, x: &mut Machine, general: bool, i: u64) -> u64 {
        let start = self.mach().vector_pa(general);
        self.cached_lines(x, Kind::Ifetch, start, start + 4 * i)
    }

    /// Under the `cache` cost model, references to every line of `[start, end)` (unmapped):
    /// `t` for each that misses the first level. 0 under the other models.
    fn cached_lines(&mut self, x: &mut Machine, kind: Kind, start: u64, end: u64) -> u64 {
        let m = self.mach();
        if m.cfg.cost_model != CostModel::Cache {
            return 0;
        }
        let t = m.miss_penalty();
        let k = (kind != Kind::Ifetch) as usize;
        // The cost model is validated to need a timed design.
        let timed = x.mem.timed().expect("validated: mach3.cost_model = \"cache\" needs caches");
        let (shift, hit) = (timed.line_shift[k], if k == 0 { timed.l1_latency[0] } else { l1_walk_latency(x) });
        let mut line = start >> shift;
        let mut misses = 0;
        while line << shift < end {
            misses += (x.mem.kernel_access(kind, (line << shift).max(start), &mut x.stats) > hit) as u64;
            line += 1;
        }
        misses * t
    }

    /// Inserts the (wired) translation of kernel page `kvpn` into structure `s`; what that
    /// evicts of the kernel's entries goes to the STLB.
    fn mach_insert(&mut self, x: &mut Machine, s: usize, kvpn: u64) {
        let m = &self.mach;
        let data = TlbData { pfn: m.kpa(kvpn << PAGE_SHIFT) >> PAGE_SHIFT, shift: PAGE_SHIFT as u8, valid: 0 };
        // L2 and L3 PTEs map pages of page tables; L1K PTEs map kernel data.
        x.stats.walks.pt_fills += (Mach3::kernel_type(kvpn) != MissType::L1k) as u64;
        if let Some(e) = x.tlbs.structures[s].tlb.insert(GLOBAL, Vpn(kvpn), data) {
            x.stats.tlb_fill(s, 1, 0);
            self.mach_evicted(x, e);
        }
    }

    /// An entry left the TLB: a kernel one (L1K, L2, L3) goes to the STLB (bala94 §4).
    fn mach_evicted(&mut self, x: &mut Machine, e: crate::tlb::TlbEntry) {
        if e.asid == GLOBAL {
            if let Some(stlb) = x.walk.stlb.as_deref_mut() {
                stlb.insert(GLOBAL, Vpn(e.tag), e.data);
            }
            let m = self.mach();
            if let Some(i) = m.prefetched.iter().position(|&v| v == e.tag) {
                m.prefetched.swap_remove(i);
            }
        }
    }

    /// The slot of task `asid`.
    fn mach_slot(&mut self, x: &mut Machine, asid: u32) -> Result<u32, DesignError> {
        let name = &x.name;
        self.mach.slot(asid).map_err(|e| DesignError::Mach { config: name.clone(), error: e })
    }

    /// One reference of the kernel to its own data at `kva` (kseg2).
    fn kref(&mut self, x: &mut Machine, kind: Kind, kva: u64) {
        self.mach().stats.references += 1;
        self.kernel_data(x, kind, kva);
    }

    /// A kernel reference at `kva` (kseg2) through the TLB and the caches, uncounted.
    fn kernel_data(&mut self, x: &mut Machine, kind: Kind, kva: u64) {
        self.mach_kernel_tr(x, kva >> PAGE_SHIFT, 0, false, false);
        if x.mem.timed().is_some() {
            let pa = self.mach().kpa(kva);
            x.line_refs(kind, kva, pa);
        }
    }

    /// The kernel stores the PTEs of the page-table operations applied since it last looked
    /// (`Machine::op_log`): each L1U PTE in its task's user page table, which may take an L2
    /// miss in the kernel; a page of the user page table not allocated before is allocated
    /// first, storing its L2 PTE in the kernel page table (which may take an L3 miss outside
    /// any handler). The caller sets `in_kernel`.
    fn pte_writes(&mut self, x: &mut Machine) -> Result<(), DesignError> {
        let Some(mut log) = x.op_log.take() else {
            return Ok(());
        };
        let mut r = Ok(());
        for op in &log {
            let (asid, vpn) = match *op {
                PtOp::Map(a, v, _) | PtOp::Unmap(a, v) => (a, v.0),
            };
            if vpn >= KUSEG_TOP >> PAGE_SHIFT {
                continue;
            }
            let slot = match self.mach_slot(x, asid.0) {
                Ok(s) => s,
                Err(e) => {
                    r = Err(e);
                    break;
                }
            };
            let pte_va = Mach3::upt_va(slot, vpn);
            if matches!(op, PtOp::Map(..)) && self.mach().upt_allocate(slot, vpn) {
                self.pte_write(x, Mach3::kpt_va(pte_va >> PAGE_SHIFT));
            }
            self.pte_write(x, pte_va);
        }
        log.clear();
        x.op_log = Some(log);
        r
    }

    /// The kernel stores a PTE at `kva`.
    fn pte_write(&mut self, x: &mut Machine, kva: u64) {
        self.mach().stats.pte_writes += 1;
        self.kernel_data(x, Kind::Store, kva);
    }

    /// Takes the page-table operations of pages mapped without any accounting (address-space
    /// snapshots): their user page-table pages are allocated, with no reference.
    pub(super) fn absorb_ops(&mut self, x: &mut Machine) -> Result<(), DesignError> {
        let Some(mut log) = x.op_log.take() else {
            return Ok(());
        };
        let mut r = Ok(());
        for op in &log {
            if let PtOp::Map(a, v, _) = *op {
                if v.0 < KUSEG_TOP >> PAGE_SHIFT {
                    match self.mach_slot(x, a.0) {
                        Ok(slot) => {
                            self.mach().upt_allocate(slot, v.0);
                        }
                        Err(e) => {
                            r = Err(e);
                            break;
                        }
                    }
                }
            }
        }
        log.clear();
        x.op_log = Some(log);
        r
    }

    /// The kernel touches `bytes` of object `o` of the task in `slot`.
    fn touch(&mut self, x: &mut Machine, kind: Kind, o: Object, slot: u32) {
        let m = self.mach();
        let (va, bytes, stride) = (m.object_va(o, slot), m.object_bytes(o), m.cfg.touch_stride);
        let mut off = 0;
        while off < bytes {
            self.kref(x, kind, va + off);
            off += stride;
        }
    }

    /// The kernel saves (or restores) the trap frame on the kernel stack of the task in `slot`.
    fn trap_frame(&mut self, x: &mut Machine, kind: Kind, slot: u32) {
        let m = self.mach();
        let (top, words) = (m.object_va(Object::Kstack, slot) + m.object_bytes(Object::Kstack), m.cfg.trap_words);
        for w in 1..=words.min(m.object_bytes(Object::Kstack) / 4) {
            self.kref(x, kind, top - 4 * w);
        }
    }

    /// The kernel references user memory `[addr, addr + len)` of the running task (a copyin or
    /// copyout): through the TLB as user references, in kernel mode.
    fn user_copy(&mut self, x: &mut Machine, kind: Kind, addr: u64, len: u64) -> Result<(), DesignError> {
        let stride = self.mach().cfg.copy_stride;
        let mut off = 0;
        while off < len {
            // A buffer ends at the top of the address space.
            let Some(a) = addr.checked_add(off) else {
                break;
            };
            self.mach().stats.references += 1;
            let l1 = x.tlbs.dpath.levels[0] as usize;
            x.stats.tlb_access(l1);
            self.mach().stats.tlb_lookups += 1;
            let pfn = self.translate(x, true, Vpn(a >> PAGE_SHIFT))?;
            if x.mem.timed().is_some() {
                x.line_refs(kind, a, (pfn << PAGE_SHIFT) | (a & 0xfff));
            }
            let Some(next) = off.checked_add(stride) else {
                break;
            };
            off = next;
        }
        Ok(())
    }

    /// A kernel-to-user copy between kmsg and a user buffer: `len` bytes, one load and one
    /// store per `copy_stride` bytes.
    fn msg_copy(
        &mut self,
        x: &mut Machine,
        to_kmsg: bool,
        kmsg: u64,
        kmsg_bytes: u64,
        user: u64,
        len: u64,
    ) -> Result<(), DesignError> {
        let stride = self.mach().cfg.copy_stride;
        let mut off = 0;
        while off < len {
            let k = kmsg + off % kmsg_bytes;
            let Some(u) = user.checked_add(off) else {
                break;
            };
            if to_kmsg {
                self.user_copy(x, Kind::Load, u, 1)?;
                self.kref(x, Kind::Store, k);
            } else {
                self.kref(x, Kind::Load, k);
                self.user_copy(x, Kind::Store, u, 1)?;
            }
            let Some(next) = off.checked_add(stride) else {
                break;
            };
            off = next;
        }
        Ok(())
    }

    /// Laid-out address of a buffer the trace names, or `None` if it cannot be placed.
    fn mach_place(&mut self, x: &mut Machine, addr: u64) -> Option<u64> {
        match x.front.layout.as_deref_mut() {
            None => Some(addr),
            Some(l) => l.place(true, addr).ok(),
        }
    }

    /// The events the personality acts on; the engine handles the rest as usual.
    pub(super) fn event(&mut self, x: &mut Machine, r: &Record) -> Result<(), DesignError> {
        // The PTEs the event's page-table operations changed (an unmap, a fork's copies, an
        // exit's teardown), written by the kernel.
        if x.op_log.as_ref().is_some_and(|l| !l.is_empty()) {
            self.in_kernel = true;
            let r = self.pte_writes(x);
            self.in_kernel = false;
            r?;
        }
        match *r {
            Record::Syscall { fd, buf, len, .. } => self.mach_syscall(x, fd, buf, len),
            Record::Ipc { to } => self.mach_ipc(x, to),
            Record::ContextSwitch { .. } => {
                // The switch runs on the new thread's kernel stack and structures.
                let slot = self.mach_slot(x, x.front.asid.0)?;
                self.in_kernel = true;
                self.touch(x, Kind::Load, Object::Thread, slot);
                self.trap_frame(x, Kind::Load, slot);
                self.in_kernel = false;
                Ok(())
            }
            Record::Exit { asid } => {
                self.task_exit(x, asid);
                Ok(())
            }
            _ => Ok(()),
        }
    }

    /// Task `asid` exits: the kernel frees its user page-table pages (storing their L2 PTEs
    /// in the kernel page table) and flushes their entries from the TLB and the STLB.
    fn task_exit(&mut self, x: &mut Machine, asid: u32) {
        if let Some(slot) = self.mach.slot_of(asid) {
            let pages = self.mach.upt_allocated(slot);
            self.in_kernel = true;
            for &p in &pages {
                self.pte_write(x, Mach3::kpt_va(p));
            }
            self.in_kernel = false;
            let base =
                (crate::os::mach3::UPT_BASE >> PAGE_SHIFT) + slot as u64 * (crate::os::mach3::UPT_BYTES >> PAGE_SHIFT);
            let last = base + (crate::os::mach3::UPT_BYTES >> PAGE_SHIFT) - 1;
            x.tlbs.invalidate_range(Asid(GLOBAL), Vpn(base), Vpn(last), &mut x.stats);
            if let Some(stlb) = x.walk.stlb.as_deref_mut() {
                stlb.invalidate_range(Asid(GLOBAL), Vpn(base), Vpn(last));
            }
            let m = self.mach();
            m.prefetched.retain(|&v| v < base || v > last);
        }
        self.mach().exit(asid);
    }

    /// The STLB's code on a system call or IPC trap (§4.1).
    fn stlb_syscall_tax(&mut self) {
        if self.stlb {
            let m = self.mach();
            let t = m.cfg.stlb_syscall_cycles;
            m.stats.stlb_overhead_cycles = m.stats.stlb_overhead_cycles.saturating_add(t);
        }
    }

    /// A system call: the trap saves and restores its frame on the kernel stack and reads the
    /// thread and task; a file read or write copies its buffer; a pipe or socket call notes its
    /// buffer for the IPC that follows it (send) or that it waits for (receive).
    fn mach_syscall(&mut self, x: &mut Machine, fd: u8, buf: u64, len: u64) -> Result<(), DesignError> {
        let slot = self.mach_slot(x, x.front.asid.0)?;
        self.mach().stats.syscalls += 1;
        self.stlb_syscall_tax();
        self.in_kernel = true;
        self.trap_frame(x, Kind::Store, slot);
        self.touch(x, Kind::Load, Object::Thread, slot);
        self.touch(x, Kind::Load, Object::Task, slot);
        let kind = fd & fd_kind::KIND_MASK;
        let dir = fd & (fd_kind::INTO_BUF | fd_kind::FROM_BUF);
        let placed = if len > 0 && dir != 0 { self.mach_place(x, buf) } else { None };
        let r = match (placed, kind) {
            (Some(b), fd_kind::PIPE | fd_kind::SOCKET) => {
                let m = self.mach();
                if dir & fd_kind::INTO_BUF != 0 {
                    m.recv_buf[slot as usize] = (b, len);
                } else {
                    m.send_buf = (b, len);
                }
                Ok(())
            }
            (Some(b), _) => {
                let kind = if dir & fd_kind::INTO_BUF != 0 { Kind::Store } else { Kind::Load };
                self.user_copy(x, kind, b, len)
            }
            (None, _) => Ok(()),
        };
        self.trap_frame(x, Kind::Load, slot);
        self.in_kernel = false;
        r
    }

    /// An IPC from the running task to task `to` (Mach's `mach_msg` path): prefetch what the
    /// PTLB recorded for the pair, trap, look the destination port up in the sender's IPC space,
    /// copy the message into a kernel message buffer, hand off to the receiver (its thread,
    /// task and kernel stack), copy the message out to the buffer it receives into, and record
    /// the TLB entries the path used in the PTLB.
    fn mach_ipc(&mut self, x: &mut Machine, to: u32) -> Result<(), DesignError> {
        let from = x.front.asid.0;
        if to == from {
            return Ok(());
        }
        let fs = self.mach_slot(x, from)?;
        let ts = self.mach_slot(x, to)?;
        let pair = Mach3::pair(fs, ts);
        self.mach().stats.ipc += 1;
        self.stlb_syscall_tax();
        if self.mach().ptlb.is_some() {
            self.ptlb_prefetch(x, pair);
        }
        self.in_kernel = true;
        self.trap_frame(x, Kind::Store, fs);
        self.touch(x, Kind::Load, Object::Thread, fs);
        self.touch(x, Kind::Load, Object::Task, fs);
        self.touch(x, Kind::Load, Object::Space, fs);
        self.touch(x, Kind::Modify, Object::Port, ts);
        let m = self.mach();
        let (sbuf, slen) = std::mem::take(&mut m.send_buf);
        let (kmsg, kbytes) = (m.object_va(Object::Kmsg, fs), m.object_bytes(Object::Kmsg));
        let (rbuf, rlen) = m.recv_buf[ts as usize];
        let mut r = self.msg_copy(x, true, kmsg, kbytes, sbuf, slen);
        // Hand-off: the receiver's thread runs in the kernel on its own stack, in its own
        // address space.
        self.touch(x, Kind::Modify, Object::Thread, ts);
        self.touch(x, Kind::Load, Object::Task, ts);
        let (asid, tags) = (x.front.asid, x.front.tags);
        x.front.asid = Asid(to);
        x.front.tags = [to; 8];
        self.trap_frame(x, Kind::Load, ts);
        if r.is_ok() {
            r = self.msg_copy(x, false, kmsg, kbytes, rbuf, slen.min(rlen));
        }
        x.front.asid = asid;
        x.front.tags = tags;
        self.in_kernel = false;
        if self.mach().ptlb.is_some() {
            // The receiver's stack: the kernel knows its stack pointer from its trap frame;
            // here, where its layout placed the stack.
            let stack = x.front.layout.as_deref().and_then(|l| l.stack_addr(to));
            self.ptlb_record(x, pair, fs, ts, sbuf, rbuf, stack);
        }
        r
    }

    /// The kernel pages of each PTLB role of an IPC from slot `fs` to slot `ts`.
    fn ptlb_roles(&self, fs: u32, ts: u32, sbuf: u64, rbuf: u64, stack: Option<u64>) -> [Option<u64>; ROLES as usize] {
        let m = &self.mach;
        let mut v = [None; ROLES as usize];
        for (i, o) in ROLE_L1K.iter().enumerate() {
            let slot = if matches!(o, Object::Space | Object::Kmsg) { fs } else { ts };
            v[i] = Some(m.object_va(*o, slot) >> PAGE_SHIFT);
        }
        let upt = |slot: u32, va: u64| Mach3::upt_va(slot, va >> PAGE_SHIFT) >> PAGE_SHIFT;
        let user = |x: u64| (x != 0).then_some(x);
        v[6] = user(sbuf).map(|b| upt(fs, b));
        v[7] = user(rbuf).map(|b| upt(ts, b));
        v[8] = user(m.code_vpn[ts as usize]).map(|p| upt(ts, p << PAGE_SHIFT));
        v[9] = stack.map(|a| upt(ts, a));
        if m.ptlb_l3 {
            v[10] = v[6].map(|p| Mach3::kpt_va(p) >> PAGE_SHIFT);
            v[11] = v[7].map(|p| Mach3::kpt_va(p) >> PAGE_SHIFT);
        }
        v
    }

    /// Prefetches into the TLB the entries the PTLB holds for `pair`.
    fn ptlb_prefetch(&mut self, x: &mut Machine, pair: u64) {
        let Some((prefetch, present)) = self.ptlb_cycles else {
            return;
        };
        for role in 0..ROLES {
            let Some(kvpn) = self.mach().ptlb.as_ref().and_then(|p| p.get(pair, role)) else {
                continue;
            };
            let s =
                if Mach3::kernel_type(kvpn) == MissType::L2 { x.tlbs.pt_tlb } else { x.tlbs.dpath.levels[0] as usize };
            if x.tlbs.structures[s].tlb.probe(Asid(GLOBAL), Vpn(kvpn)).is_some() {
                let m = self.mach();
                m.stats.ptlb_present += 1;
                m.stats.ptlb_cycles = m.stats.ptlb_cycles.saturating_add(present);
            } else {
                self.mach_insert(x, s, kvpn);
                let m = self.mach();
                m.stats.ptlb_prefetches += 1;
                m.stats.ptlb_cycles = m.stats.ptlb_cycles.saturating_add(prefetch);
                m.prefetched.push(kvpn);
            }
        }
    }

    /// Records in the PTLB the entries of `pair`'s roles that the TLB holds after the IPC path.
    #[allow(clippy::too_many_arguments)]
    fn ptlb_record(&mut self, x: &mut Machine, pair: u64, fs: u32, ts: u32, sbuf: u64, rbuf: u64, stack: Option<u64>) {
        let roles = self.ptlb_roles(fs, ts, sbuf, rbuf, stack);
        for (role, kvpn) in roles.iter().enumerate() {
            let Some(kvpn) = *kvpn else { continue };
            let s =
                if Mach3::kernel_type(kvpn) == MissType::L2 { x.tlbs.pt_tlb } else { x.tlbs.dpath.levels[0] as usize };
            if x.tlbs.structures[s].tlb.probe(Asid(GLOBAL), Vpn(kvpn)).is_none() {
                continue;
            }
            let m = self.mach();
            let p = m.ptlb.as_mut().expect("ptlb");
            if p.get(pair, role as u32) != Some(kvpn) {
                p.put(pair, role as u32, kvpn);
                m.stats.ptlb_recorded += 1;
            }
        }
    }

    /// Checks the kernel's TLB and STLB entries: each translates its kseg2 page to the wired
    /// frame. For tests.
    pub(super) fn check(&self, x: &Machine) -> Result<(), String> {
        let m = &self.mach;
        let check = |name: &str, asid: u32, vpn: u64, pfn: u64| {
            if asid != GLOBAL || vpn < KSEG2 >> PAGE_SHIFT {
                return Err(format!("{name}: a kernel entry for vpn {vpn:#x} of asid {asid} is not a kseg2 page"));
            }
            if pfn != m.kpa(vpn << PAGE_SHIFT) >> PAGE_SHIFT {
                return Err(format!("{name}: kseg2 page {vpn:#x} translates to frame {pfn:#x}"));
            }
            Ok(())
        };
        for s in x.tlbs.structures.iter() {
            for (asid, vpn, pfn) in s.tlb.translations() {
                if vpn.0 >= KSEG2 >> PAGE_SHIFT || asid == GLOBAL {
                    check(&s.name, asid, vpn.0, pfn.0)?;
                }
            }
        }
        if let Some(stlb) = &x.walk.stlb {
            for (asid, vpn, pfn) in stlb.translations() {
                check("stlb", asid, vpn.0, pfn.0)?;
            }
        }
        Ok(())
    }
}

/// The level-1 latency of the caches a handler's loads go through.
fn l1_walk_latency(x: &Machine) -> u64 {
    x.mem.timed().map_or(0, |t| t.h.first_latency(crate::cache::Route::Walk))
}
