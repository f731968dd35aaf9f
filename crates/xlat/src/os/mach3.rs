//! The Mach 3.0 personality (`os.personality = "mach3"`, bala94): a microkernel whose data
//! structures and page tables live in mapped kernel virtual memory on a 32-bit MIPS R3000, and
//! what the kernel does for each IPC and system call.
//!
//! This module is the model's address arithmetic and bookkeeping; the engine
//! (`engine/mach3.rs`) runs its references through the TLB and caches. Addresses (bala94
//! Figure 1, 4 KB pages, 4-byte PTEs):
//!
//! - user space is kuseg, `[0, 2 GB)`; kernel code and the pinned root page are in unmapped
//!   memory (kseg0); kernel data, the kernel page table and the user page tables are in kseg2,
//!   from [`KSEG2`], mapped through the TLB;
//! - **L1U** PTEs map user pages: task `t`'s user page table is a linear array of 2 GB / 4 KB
//!   PTEs (2 MB) at [`Mach3::upt_va`], in kseg2;
//! - **L1K** PTEs map kernel data and **L2** PTEs map user page-table pages: both are entries of
//!   the kernel page table, a linear array over kseg2 at [`KPT_BASE`] ([`Mach3::kpt_va`]);
//! - **L3** PTEs map the kernel page table's pages; they sit in the pinned root page
//!   ([`Mach3::root_pa`]), in unmapped memory, so the cascade ends there.
//!
//! Kernel pages are wired: kernel virtual address `KSEG2 + x` is physical address
//! `kernel_phys + x` (`kernel_phys` lies above the user frames), so a kernel translation never
//! changes and never faults.

use crate::pt::ParamError;
use serde::Deserialize;
use std::collections::HashMap;

/// First address of kseg2, the mapped kernel segment.
pub const KSEG2: u64 = 0xC000_0000;
/// Top of kuseg (user space): 2 GB.
pub const KUSEG_TOP: u64 = 0x8000_0000;
/// The kernel page table: one 4-byte PTE per kseg2 page (1 GB / 4 KB x 4 = 1 MB).
pub const KPT_BASE: u64 = KSEG2;
/// Bytes of one task's user page table (2 GB / 4 KB x 4).
pub const UPT_BYTES: u64 = 2 << 20;
/// The user page tables, one [`UPT_BYTES`] slot per task.
pub const UPT_BASE: u64 = 0xC040_0000;
/// Kernel data zones (tasks, threads, IPC spaces, ports, kernel stacks, message buffers).
pub const ZONE_BASE: u64 = 0xE000_0000;
const PAGE: u64 = 4096;
const PTE_BYTES: u64 = 4;
/// Words of a task's bitmap of user page-table pages (512 pages of 4 KB in 2 MB).
const UPT_WORDS: usize = (UPT_BYTES / PAGE / 64) as usize;

/// Which personality the OS model has (`os.personality`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Personality {
    /// A monolithic kernel whose own references are not modelled (the default).
    #[default]
    Linux,
    /// Mach 3.0 on the R3000 (bala94).
    Mach3,
}

impl Personality {
    /// Name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Personality::Linux => "linux",
            Personality::Mach3 => "mach3",
        }
    }
}

/// How the cycles of a kernel TLB miss are computed (`mach3.cost_model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum CostModel {
    /// Measured averages: bala94 Table 1 (Mach) and Table 5 (STLB).
    #[default]
    Table,
    /// bala94 §6.2's trap model, `i + m x t`, with `t = miss_cycles x clock_ratio`.
    Trap,
    /// §6.2's `i + m x t` with `m` measured: each handler path runs its `i` instructions as
    /// straight-line code from its exception vector through the design's instruction cache,
    /// and `m` counts the level-1 misses of those fetches and of the handler's loads (a timed
    /// design with caches).
    Cache,
}

/// A trap path's instructions `i` and cache misses `m` (bala94 §6.2).
pub type TrapPath = [u64; 2];

/// `[mach3]`: the personality's constants. Every default is cited in `docs/mach3.md`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Mach3Config {
    /// `table` (bala94 Tables 1 and 5) or `trap` (§6.2: i + m x t).
    pub cost_model: CostModel,
    /// Table 1: an L1U miss whose PTE load hits the cache (the fast handler: 9 instructions
    /// and one load); in a timed design the load's cache cycles are added (30-40 on a miss).
    pub l1u_cycles: u64,
    /// §2: the instructions of the L1U fast handler (fetched under the `cache` cost model).
    pub l1u_instructions: u64,
    /// Table 1: L1K, L2, L3 and TLB-invalid misses (the generic trap handler).
    pub l1k_cycles: u64,
    /// Table 1.
    pub l2_cycles: u64,
    /// Table 1.
    pub l3_cycles: u64,
    /// Table 1.
    pub invalid_cycles: u64,
    /// Table 5 (DM STLB): hits on L1K and L3 entries.
    pub stlb_hit_cycles: u64,
    /// Table 5: L2 hits taken from user space (path 1).
    pub stlb_l2_user_hit_cycles: u64,
    /// Table 5: L2 hits taken in the kernel (path 2).
    pub stlb_l2_kernel_hit_cycles: u64,
    /// Table 5, §4.2: what an STLB miss adds to the generic handler.
    pub stlb_miss_cycles: u64,
    /// §6.2: cycles to service a cache miss at 40 MHz (t = 24).
    pub miss_cycles: u64,
    /// §6.2: the clock of the projected processor over the DECstation's 40 MHz (5 for 200 MHz);
    /// t grows with it.
    pub clock_ratio: f64,
    /// §6.2, unmodified Mach: (i, m) of the L1K, L2 and L3 ("KPT") paths.
    pub trap_l1k: TrapPath,
    /// §6.2.
    pub trap_l2: TrapPath,
    /// §6.2.
    pub trap_l3: TrapPath,
    /// §6.2, STLB: a lookup that fails, hits on L2 from user space (path 1), from the kernel
    /// (path 2), and hits on L1K or L3.
    pub trap_stlb_fail: TrapPath,
    /// §6.2.
    pub trap_stlb_l2_user: TrapPath,
    /// §6.2.
    pub trap_stlb_l2_kernel: TrapPath,
    /// §6.2.
    pub trap_stlb_l1k: TrapPath,
    /// Most tasks alive at once (user page-table slots and kernel structures).
    pub max_tasks: u32,
    /// Bytes of a task structure, a thread structure, a task's IPC space (port name table), a
    /// port with its message queue, a kernel stack and a task's kernel message buffer: each
    /// kind of object sits in its own zone, objects packed one after the other.
    pub task_bytes: u64,
    /// See `task_bytes`.
    pub thread_bytes: u64,
    /// See `task_bytes`.
    pub space_bytes: u64,
    /// See `task_bytes`.
    pub port_bytes: u64,
    /// See `task_bytes`.
    pub kstack_bytes: u64,
    /// See `task_bytes`.
    pub kmsg_bytes: u64,
    /// Words the trap path saves on (and restores from) the kernel stack.
    pub trap_words: u64,
    /// Bytes between the references that touch a kernel structure (one per cache line of the
    /// DECstation's 16-byte lines would be 16; the default touches every other line).
    pub touch_stride: u64,
    /// Bytes between the loads (and stores) of a message copy.
    pub copy_stride: u64,
    /// §4.1: cycles the STLB's code adds to every system call and interrupt (4), which branch
    /// off the generic trap handler past it; charged per system call and IPC trap when an STLB
    /// is configured.
    pub stlb_syscall_cycles: u64,
    /// §4.1, footnote 2: cycles it adds to the other traps through the generic handler (11);
    /// charged per TLB-invalid miss (a page fault) when an STLB is configured.
    pub stlb_trap_cycles: u64,
}

impl Mach3Config {
    /// Checks the personality's layout and the PTLB's size without building them: the kernel
    /// zones of `max_tasks` tasks must fit in kseg2. Returns the zones' start addresses.
    pub fn zones(&self, ptlb: Option<&PtlbConfig>) -> Result<[u64; 6], ParamError> {
        let c = self;
        for (key, v) in [
            ("mach3.task_bytes", c.task_bytes),
            ("mach3.thread_bytes", c.thread_bytes),
            ("mach3.space_bytes", c.space_bytes),
            ("mach3.port_bytes", c.port_bytes),
            ("mach3.kstack_bytes", c.kstack_bytes),
            ("mach3.kmsg_bytes", c.kmsg_bytes),
            ("mach3.touch_stride", c.touch_stride),
            ("mach3.copy_stride", c.copy_stride),
        ] {
            if v == 0 || v > 1 << 20 {
                return Err(ParamError::new(key, format!("must be from 1 to 1048576 bytes, got {v}")));
            }
        }
        if c.max_tasks == 0 || (c.max_tasks as u64) * UPT_BYTES > ZONE_BASE - UPT_BASE {
            return Err(ParamError::new(
                "mach3.max_tasks",
                format!("must be from 1 to {}, got {}", (ZONE_BASE - UPT_BASE) / UPT_BYTES, c.max_tasks),
            ));
        }
        let mut zones = [0; 6];
        let mut at = ZONE_BASE;
        for (i, bytes) in [c.task_bytes, c.thread_bytes, c.space_bytes, c.port_bytes, c.kstack_bytes, c.kmsg_bytes]
            .into_iter()
            .enumerate()
        {
            zones[i] = at;
            at += (bytes * c.max_tasks as u64).div_ceil(PAGE) * PAGE;
        }
        if at > 1u64 << 32 {
            return Err(ParamError::new(
                "mach3.max_tasks",
                "the kernel zones of that many tasks do not fit in kseg2; lower max_tasks or the object sizes",
            ));
        }
        if let Some(p) = ptlb {
            if p.entries == 0 || !p.entries.is_power_of_two() || p.entries > crate::limits::MAX_TLB_ENTRIES {
                return Err(ParamError::new(
                    "ptlb.entries",
                    format!("must be a power of two from 1 to 16777216, got {}", p.entries),
                ));
            }
        }
        Ok(zones)
    }

    /// Checks the costs and counts against docs/configuration.md's bounds (whether or not the
    /// personality is in use: a config never carries a value xlat could not run).
    pub fn check_bounds(&self) -> Result<(), ParamError> {
        let c = self;
        crate::limits::all_cycles([
            ("mach3.l1u_cycles", c.l1u_cycles),
            ("mach3.l1k_cycles", c.l1k_cycles),
            ("mach3.l2_cycles", c.l2_cycles),
            ("mach3.l3_cycles", c.l3_cycles),
            ("mach3.invalid_cycles", c.invalid_cycles),
            ("mach3.stlb_hit_cycles", c.stlb_hit_cycles),
            ("mach3.stlb_l2_user_hit_cycles", c.stlb_l2_user_hit_cycles),
            ("mach3.stlb_l2_kernel_hit_cycles", c.stlb_l2_kernel_hit_cycles),
            ("mach3.stlb_miss_cycles", c.stlb_miss_cycles),
            ("mach3.miss_cycles", c.miss_cycles),
            ("mach3.stlb_syscall_cycles", c.stlb_syscall_cycles),
            ("mach3.stlb_trap_cycles", c.stlb_trap_cycles),
        ])?;
        for (key, [i, m]) in [
            ("mach3.trap_l1k", c.trap_l1k),
            ("mach3.trap_l2", c.trap_l2),
            ("mach3.trap_l3", c.trap_l3),
            ("mach3.trap_stlb_fail", c.trap_stlb_fail),
            ("mach3.trap_stlb_l2_user", c.trap_stlb_l2_user),
            ("mach3.trap_stlb_l2_kernel", c.trap_stlb_l2_kernel),
            ("mach3.trap_stlb_l1k", c.trap_stlb_l1k),
        ] {
            crate::limits::all_cycles([(key, i), (key, m)])?;
        }
        for (key, v) in [("mach3.trap_words", c.trap_words), ("mach3.l1u_instructions", c.l1u_instructions)] {
            if v > 1 << 20 {
                return Err(ParamError::new(key, format!("must be at most 2^20 = 1048576, got {v}")));
            }
        }
        if !(c.clock_ratio > 0.0 && c.clock_ratio <= 1000.0) {
            return Err(ParamError::new("mach3.clock_ratio", format!("must be in (0, 1000], got {}", c.clock_ratio)));
        }
        Ok(())
    }
}

impl Default for Mach3Config {
    fn default() -> Self {
        Mach3Config {
            cost_model: CostModel::Table,
            l1u_cycles: 10,
            l1u_instructions: 9,
            l1k_cycles: 512,
            l2_cycles: 555,
            l3_cycles: 407,
            invalid_cycles: 338,
            stlb_hit_cycles: 105,
            stlb_l2_user_hit_cycles: 114,
            stlb_l2_kernel_hit_cycles: 160,
            stlb_miss_cycles: 70,
            miss_cycles: 24,
            clock_ratio: 1.0,
            trap_l1k: [167, 14],
            trap_l2: [207, 14],
            trap_l3: [161, 10],
            trap_stlb_fail: [29, 2],
            trap_stlb_l2_user: [61, 2],
            trap_stlb_l2_kernel: [76, 3],
            trap_stlb_l1k: [52, 2],
            max_tasks: 128,
            task_bytes: 512,
            thread_bytes: 1024,
            space_bytes: 512,
            port_bytes: 128,
            kstack_bytes: 4096,
            kmsg_bytes: 8192,
            trap_words: 32,
            touch_stride: 32,
            copy_stride: 16,
            stlb_syscall_cycles: 4,
            stlb_trap_cycles: 11,
        }
    }
}

/// `[ptlb]`: bala94 §3's prefetch TLB, a hashed table in unmapped memory of the TLB entries an
/// IPC between two protection domains used, prefetched into the TLB on later IPCs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PtlbConfig {
    /// Entries of the table (bala94: 4K).
    pub entries: u32,
    /// Cycles to prefetch an entry into the TLB (§3.3: about 60).
    pub prefetch_cycles: u64,
    /// Cycles to probe the TLB and find the entry already there (§3.3: about 25).
    pub present_cycles: u64,
    /// Prefetch L3 entries too; `auto`: unless an STLB is configured (§5).
    pub l3: Option<bool>,
}

impl Default for PtlbConfig {
    fn default() -> Self {
        PtlbConfig { entries: 4096, prefetch_cycles: 60, present_cycles: 25, l3: None }
    }
}

/// Kinds of TLB misses under Mach (bala94 §2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissType {
    /// A user page (the fast handler).
    L1u,
    /// A kernel data page.
    L1k,
    /// A user page-table page.
    L2,
    /// A kernel page-table page.
    L3,
    /// A user page the VM system has not made valid (first touch).
    Invalid,
}

/// What the model counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Mach3Stats {
    /// References the kernel made on the program's behalf (structures and message copies).
    pub references: u64,
    /// IPC messages handled.
    pub ipc: u64,
    /// System calls handled.
    pub syscalls: u64,
    /// Lookups the kernel's references and handlers made in the TLB's main (level-1)
    /// structure, on top of the program's `lookups`.
    pub tlb_lookups: u64,
    /// Misses by type: L1U, L1K, L2, L3, invalid.
    pub l1u: u64,
    /// See `l1u`.
    pub l1k: u64,
    /// See `l1u`.
    pub l2: u64,
    /// See `l1u`.
    pub l3: u64,
    /// See `l1u`.
    pub invalid: u64,
    /// Kernel misses (L1K, L2, L3) taken while the generic trap handler serviced another one.
    pub nested: u64,
    /// Misses by cascade depth: 0 for the miss the reference took, 1 for a miss its handler's
    /// PTE load took, and so on.
    pub by_depth: [u64; 4],
    /// Cycles of TLB miss handling (all types, STLB paths included; PTLB cycles apart).
    pub miss_cycles: u64,
    /// The part of `miss_cycles` spent on L1U and TLB-invalid misses (the fast handler, with
    /// its measured cache misses under the `cache` model, and the VM system); the rest is the
    /// kernel misses' penalty.
    pub user_cycles: u64,
    /// PTLB: entries prefetched into the TLB, those found already there, prefetched entries a
    /// lookup then used, and entries recorded.
    pub ptlb_prefetches: u64,
    /// See `ptlb_prefetches`.
    pub ptlb_present: u64,
    /// See `ptlb_prefetches`.
    pub ptlb_useful: u64,
    /// See `ptlb_prefetches`.
    pub ptlb_recorded: u64,
    /// Cycles of the PTLB on the IPC path.
    pub ptlb_cycles: u64,
    /// Cycles the STLB's code adds to the traps it does not serve (system calls, IPC traps and
    /// page faults; bala94 §4.1).
    pub stlb_overhead_cycles: u64,
    /// PTEs the kernel wrote: L1U PTEs of pages it mapped or unmapped, and L2 PTEs of user
    /// page-table pages it allocated or freed (references apart from `references`).
    pub pte_writes: u64,
}

impl Mach3Stats {
    /// Kernel misses so far: L1K, L2 and L3.
    pub fn kernel_misses(&self) -> u64 {
        self.l1k + self.l2 + self.l3
    }
}

/// One PTLB slot: the pair of domains, the role of the entry and its kernel page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct PtlbSlot {
    pair: u64,
    role: u32,
    vpn: u64,
}

/// The prefetch TLB: a direct-mapped hashed table of (domain pair, role) -> kernel page.
#[derive(Clone, Debug)]
pub struct Ptlb {
    slots: Vec<Option<PtlbSlot>>,
    bits: u32,
}

impl Ptlb {
    /// An empty table of `entries` (a power of two).
    pub fn new(entries: u32) -> Ptlb {
        Ptlb { slots: vec![None; entries as usize], bits: entries.trailing_zeros() }
    }

    fn index(&self, pair: u64, role: u32) -> usize {
        // Fibonacci hashing: the product's top bits depend on every bit of the key.
        let h = crate::addr::fib_hash(pair.rotate_left(16) ^ role as u64);
        if self.bits == 0 {
            0
        } else {
            (h >> (64 - self.bits)) as usize
        }
    }

    /// The kernel page recorded for `role` of `pair`, if the slot still holds it.
    pub fn get(&self, pair: u64, role: u32) -> Option<u64> {
        match self.slots[self.index(pair, role)] {
            Some(s) if s.pair == pair && s.role == role => Some(s.vpn),
            _ => None,
        }
    }

    /// Records `vpn` for `role` of `pair` (replacing whatever the slot held).
    pub fn put(&mut self, pair: u64, role: u32, vpn: u64) {
        let i = self.index(pair, role);
        self.slots[i] = Some(PtlbSlot { pair, role, vpn });
    }

    /// Drops every entry of a pair that involves `slot` (a task that exits; its page tables go).
    pub fn invalidate_task(&mut self, slot: u32) {
        for s in &mut self.slots {
            if let Some(e) = s {
                if (e.pair >> 32) as u32 == slot || e.pair as u32 == slot {
                    *s = None;
                }
            }
        }
    }
}

/// The personality's state: task slots, per-task IPC bookkeeping, the PTLB and the counters.
#[derive(Clone, Debug)]
pub struct Mach3 {
    /// The constants.
    pub cfg: Mach3Config,
    /// Physical address of kseg2's first byte.
    pub kernel_phys: u64,
    /// Task slots by ASID.
    slots: HashMap<u32, u32>,
    free: Vec<u32>,
    next: u32,
    /// Per slot: the last buffer the task read a pipe or socket into (laid out), its length,
    /// its last instruction-fetch and data miss pages.
    pub recv_buf: Vec<(u64, u64)>,
    /// See `recv_buf`.
    pub code_vpn: Vec<u64>,
    /// Per slot: the pages of its user page table that are allocated (valid L2 PTEs), one bit
    /// per page of the 2 MB table.
    upt_pages: Vec<[u64; UPT_WORDS]>,
    /// The last send buffer (laid out) and length of a write or send of the running task, for
    /// the IPC that follows it.
    pub send_buf: (u64, u64),
    /// The PTLB, if configured, and whether it prefetches L3 entries.
    pub ptlb: Option<Ptlb>,
    /// See `ptlb`.
    pub ptlb_l3: bool,
    /// Kernel pages prefetched by the PTLB and not yet used or evicted.
    pub prefetched: Vec<u64>,
    /// Counters.
    pub stats: Mach3Stats,
    /// Zone bases: tasks, threads, spaces, ports, kernel stacks, kmsgs.
    zones: [u64; 6],
}

/// Kernel objects of a task, in zone order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Object {
    /// The task structure.
    Task = 0,
    /// Its (one) thread's structure.
    Thread = 1,
    /// Its IPC space (port name table).
    Space = 2,
    /// Its port and message queue.
    Port = 3,
    /// Its thread's kernel stack.
    Kstack = 4,
    /// Its kernel message buffer.
    Kmsg = 5,
}

/// Tasks have no slot left.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("more than mach3.max_tasks = {max} tasks alive at once")]
pub struct TooManyTasks {
    /// The limit.
    pub max: u32,
}

impl Mach3 {
    /// The personality for `cfg`, with kseg2 at physical `kernel_phys`.
    pub fn new(
        cfg: &Mach3Config,
        ptlb: Option<&PtlbConfig>,
        stlb: bool,
        kernel_phys: u64,
    ) -> Result<Mach3, ParamError> {
        let zones = cfg.zones(ptlb)?;
        let c = cfg;
        let ptlb_cfg = ptlb;
        let ptlb = ptlb.map(|p| Ptlb::new(p.entries));
        let n = c.max_tasks as usize;
        Ok(Mach3 {
            cfg: c.clone(),
            kernel_phys,
            slots: HashMap::new(),
            free: Vec::new(),
            next: 0,
            recv_buf: vec![(0, 0); n],
            code_vpn: vec![0; n],
            upt_pages: vec![[0; UPT_WORDS]; n],
            send_buf: (0, 0),
            ptlb_l3: ptlb_cfg.is_some_and(|p| p.l3.unwrap_or(!stlb)),
            ptlb,
            prefetched: Vec::new(),
            stats: Mach3Stats::default(),
            zones,
        })
    }

    /// The slot of task `asid`, given one on first sight.
    pub fn slot(&mut self, asid: u32) -> Result<u32, TooManyTasks> {
        if let Some(&s) = self.slots.get(&asid) {
            return Ok(s);
        }
        let s = match self.free.pop() {
            Some(s) => s,
            None if self.next < self.cfg.max_tasks => {
                self.next += 1;
                self.next - 1
            }
            None => return Err(TooManyTasks { max: self.cfg.max_tasks }),
        };
        let i = s as usize;
        self.recv_buf[i] = (0, 0);
        self.code_vpn[i] = 0;
        self.upt_pages[i] = [0; UPT_WORDS];
        self.slots.insert(asid, s);
        Ok(s)
    }

    /// Task `asid` exits: its slot is free again and the PTLB forgets its pairs.
    pub fn exit(&mut self, asid: u32) {
        if let Some(s) = self.slots.remove(&asid) {
            self.free.push(s);
            if let Some(p) = &mut self.ptlb {
                p.invalidate_task(s);
            }
        }
    }

    /// Whether the page of `slot`'s user page table holding user page `vpn`'s PTE is allocated.
    pub fn upt_present(&self, slot: u32, vpn: u64) -> bool {
        let p = (vpn * PTE_BYTES / PAGE) as usize;
        self.upt_pages[slot as usize][p / 64] >> (p % 64) & 1 != 0
    }

    /// Allocates the page of `slot`'s user page table holding user page `vpn`'s PTE; true if
    /// it was not allocated before.
    pub fn upt_allocate(&mut self, slot: u32, vpn: u64) -> bool {
        let p = (vpn * PTE_BYTES / PAGE) as usize;
        let w = &mut self.upt_pages[slot as usize][p / 64];
        let new = *w >> (p % 64) & 1 == 0;
        *w |= 1 << (p % 64);
        new
    }

    /// The allocated pages of `slot`'s user page table, as kseg2 page numbers.
    pub fn upt_allocated(&self, slot: u32) -> Vec<u64> {
        let base = (UPT_BASE + slot as u64 * UPT_BYTES) / PAGE;
        let words = &self.upt_pages[slot as usize];
        (0..UPT_WORDS * 64).filter(|&p| words[p / 64] >> (p % 64) & 1 != 0).map(|p| base + p as u64).collect()
    }

    /// The slot of task `asid`, if it has one.
    pub fn slot_of(&self, asid: u32) -> Option<u32> {
        self.slots.get(&asid).copied()
    }

    /// Kernel virtual address of object `o` of the task in `slot`.
    pub fn object_va(&self, o: Object, slot: u32) -> u64 {
        let c = &self.cfg;
        let bytes =
            [c.task_bytes, c.thread_bytes, c.space_bytes, c.port_bytes, c.kstack_bytes, c.kmsg_bytes][o as usize];
        self.zones[o as usize] + slot as u64 * bytes
    }

    /// Bytes of object `o`.
    pub fn object_bytes(&self, o: Object) -> u64 {
        let c = &self.cfg;
        [c.task_bytes, c.thread_bytes, c.space_bytes, c.port_bytes, c.kstack_bytes, c.kmsg_bytes][o as usize]
    }

    /// Kernel virtual address of the L1U PTE of user page `vpn` of the task in `slot`.
    pub fn upt_va(slot: u32, vpn: u64) -> u64 {
        UPT_BASE + slot as u64 * UPT_BYTES + vpn * PTE_BYTES
    }

    /// Kernel virtual address of the kernel page-table entry (L1K or L2) of kseg2 page `kvpn`.
    pub fn kpt_va(kvpn: u64) -> u64 {
        KPT_BASE + (kvpn - (KSEG2 / PAGE)) * PTE_BYTES
    }

    /// Physical address of the L3 PTE (in the pinned root page) of kernel page-table page
    /// `kvpn`.
    pub fn root_pa(&self, kvpn: u64) -> u64 {
        self.kernel_phys + (1 << 30) + (kvpn - KPT_BASE / PAGE) * PTE_BYTES
    }

    /// Physical address of kseg2 address `kva`.
    pub fn kpa(&self, kva: u64) -> u64 {
        self.kernel_phys + (kva - KSEG2)
    }

    /// The type of a TLB miss on kseg2 page `kvpn`: L3 for the kernel page table's pages, L2
    /// for user page tables', L1K for kernel data.
    pub fn kernel_type(kvpn: u64) -> MissType {
        let va = kvpn * PAGE;
        if va < UPT_BASE {
            MissType::L3
        } else if va < ZONE_BASE {
            MissType::L2
        } else {
            MissType::L1k
        }
    }

    /// The `(i, m)` cost of a trap path under the trap model, in cycles.
    /// Under the `cache` model only `i`: the engine adds `m x t` as it measures `m`.
    pub fn trap(&self, p: TrapPath) -> u64 {
        match self.cfg.cost_model {
            CostModel::Cache => p[0],
            _ => p[0] + p[1] * self.miss_penalty(),
        }
    }

    /// §6.2's `t`: cycles to service a cache miss at the projected clock.
    pub fn miss_penalty(&self) -> u64 {
        (self.cfg.miss_cycles as f64 * self.cfg.clock_ratio).round() as u64
    }

    /// Physical address of the handler code entered at the UTLB-miss vector (`general`: false,
    /// the L1U fast handler) or at the general exception vector (the generic handler; its paths
    /// share their first instructions): unmapped kernel text, 0x80 apart as on the R3000.
    pub fn vector_pa(&self, general: bool) -> u64 {
        self.kernel_phys + (1 << 30) + 0x1_0000 + if general { 0x80 } else { 0 }
    }

    /// Physical address of the STLB's set `set` (`ways` entries of 8 bytes each: the tag word
    /// and the PTE), in unmapped kernel memory.
    pub fn stlb_set_pa(&self, set: u64, ways: u64) -> u64 {
        self.kernel_phys + (1 << 30) + 0x20_0000 + set * ways * 8
    }

    /// The generic handler's path for a miss of `t` (§6.2's `(i, m)`); L1U and TLB-invalid
    /// misses have none (the fast handler; the VM system).
    pub fn generic_path(&self, t: MissType) -> Option<TrapPath> {
        match t {
            MissType::L1k => Some(self.cfg.trap_l1k),
            MissType::L2 => Some(self.cfg.trap_l2),
            MissType::L3 => Some(self.cfg.trap_l3),
            MissType::L1u | MissType::Invalid => None,
        }
    }

    /// The STLB path of a hit on a miss of `t` (`kernel`: taken while in the kernel).
    pub fn stlb_hit_path(&self, t: MissType, kernel: bool) -> TrapPath {
        match (t, kernel) {
            (MissType::L2, false) => self.cfg.trap_stlb_l2_user,
            (MissType::L2, true) => self.cfg.trap_stlb_l2_kernel,
            _ => self.cfg.trap_stlb_l1k,
        }
    }

    /// Cycles of the generic handler for a miss of `t` (without STLB).
    pub fn generic_cycles(&self, t: MissType) -> u64 {
        let c = &self.cfg;
        match (c.cost_model, t) {
            (_, MissType::L1u) => c.l1u_cycles,
            (_, MissType::Invalid) => c.invalid_cycles,
            (CostModel::Table, MissType::L1k) => c.l1k_cycles,
            (CostModel::Table, MissType::L2) => c.l2_cycles,
            (CostModel::Table, MissType::L3) => c.l3_cycles,
            (_, MissType::L1k) => self.trap(c.trap_l1k),
            (_, MissType::L2) => self.trap(c.trap_l2),
            (_, MissType::L3) => self.trap(c.trap_l3),
        }
    }

    /// Cycles of an STLB hit on a miss of `t` (`kernel`: taken while in the kernel).
    pub fn stlb_hit_cycles(&self, t: MissType, kernel: bool) -> u64 {
        let c = &self.cfg;
        match (c.cost_model, t, kernel) {
            (CostModel::Table, MissType::L2, false) => c.stlb_l2_user_hit_cycles,
            (CostModel::Table, MissType::L2, true) => c.stlb_l2_kernel_hit_cycles,
            (CostModel::Table, _, _) => c.stlb_hit_cycles,
            (_, MissType::L2, false) => self.trap(c.trap_stlb_l2_user),
            (_, MissType::L2, true) => self.trap(c.trap_stlb_l2_kernel),
            (_, _, _) => self.trap(c.trap_stlb_l1k),
        }
    }

    /// Cycles an STLB miss adds to the generic handler.
    pub fn stlb_miss_cycles(&self) -> u64 {
        match self.cfg.cost_model {
            CostModel::Table => self.cfg.stlb_miss_cycles,
            CostModel::Trap | CostModel::Cache => self.trap(self.cfg.trap_stlb_fail),
        }
    }

    /// Counts a miss of type `t` at cascade depth `depth`.
    pub fn count(&mut self, t: MissType, depth: u32) {
        let s = &mut self.stats;
        match t {
            MissType::L1u => s.l1u += 1,
            MissType::L1k => s.l1k += 1,
            MissType::L2 => s.l2 += 1,
            MissType::L3 => s.l3 += 1,
            MissType::Invalid => s.invalid += 1,
        }
        s.by_depth[depth.min(3) as usize] += 1;
    }

    /// The pair key of an IPC from slot `from` to slot `to`.
    pub fn pair(from: u32, to: u32) -> u64 {
        ((from as u64) << 32) | to as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_follow_figure_1() {
        // The L1U PTE of user page 0x12345 of slot 3 is in the slot's 2 MB user page table.
        let va = Mach3::upt_va(3, 0x12345);
        assert_eq!(va, UPT_BASE + 3 * UPT_BYTES + 0x12345 * 4);
        assert_eq!(Mach3::kernel_type(va / PAGE), MissType::L2);
        // Its L2 PTE is in the kernel page table, whose pages are L3-mapped.
        let l2 = Mach3::kpt_va(va / PAGE);
        assert_eq!(Mach3::kernel_type(l2 / PAGE), MissType::L3);
        assert!(l2 < UPT_BASE);
        assert_eq!(Mach3::kernel_type(ZONE_BASE / PAGE), MissType::L1k);
    }

    #[test]
    fn trap_model_matches_section_6_2_at_200_mhz() {
        let cfg = Mach3Config { cost_model: CostModel::Trap, clock_ratio: 5.0, ..Mach3Config::default() };
        let m = Mach3::new(&cfg, None, false, 1 << 32).unwrap();
        assert_eq!(m.generic_cycles(MissType::L1k), 1847);
        assert_eq!(m.generic_cycles(MissType::L2), 1887);
        assert_eq!(m.generic_cycles(MissType::L3), 1361);
        assert_eq!(m.stlb_miss_cycles(), 269);
        assert_eq!(m.stlb_hit_cycles(MissType::L2, false), 301);
        assert_eq!(m.stlb_hit_cycles(MissType::L2, true), 436);
        assert_eq!(m.stlb_hit_cycles(MissType::L1k, true), 292);
    }

    #[test]
    fn slots_are_reused_and_limited() {
        let cfg = Mach3Config { max_tasks: 2, ..Mach3Config::default() };
        let mut m = Mach3::new(&cfg, None, false, 1 << 32).unwrap();
        assert_eq!(m.slot(10), Ok(0));
        assert_eq!(m.slot(11), Ok(1));
        assert_eq!(m.slot(12), Err(TooManyTasks { max: 2 }));
        m.exit(10);
        assert_eq!(m.slot(12), Ok(0));
    }

    #[test]
    fn ptlb_slots_hold_one_pair_role_each() {
        let mut p = Ptlb::new(4096);
        let pair = Mach3::pair(1, 2);
        assert_eq!(p.get(pair, 0), None);
        p.put(pair, 0, 0xE0001);
        assert_eq!(p.get(pair, 0), Some(0xE0001));
        assert_eq!(p.get(Mach3::pair(2, 1), 0), None);
        // Pairs and roles spread over the table: 64 keys take nearly as many slots.
        let slots: std::collections::HashSet<usize> = (0..4)
            .flat_map(|a| (0..4).flat_map(move |b| (0..4).map(move |r| (a, b, r))))
            .map(|(a, b, r)| p.index(Mach3::pair(a, b), r))
            .collect();
        assert!(slots.len() >= 56, "{} slots", slots.len());
        p.invalidate_task(2);
        assert_eq!(p.get(pair, 0), None);
    }
}
