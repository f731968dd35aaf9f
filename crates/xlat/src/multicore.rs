//! The configuration of several simulated cores (`[cores]`) and of TLB shootdowns
//! (`[os.shootdown]`): docs/multicore.md. The engine's part is `engine/cores.rs`.

use crate::pt::ParamError;
use serde::Deserialize;

/// Most simulated cores (`cores.count`).
pub const MAX_CORES: u32 = 256;

/// Most dynamic ASIDs per core (`cores.asids_per_core`): x86's 12-bit PCID.
pub const MAX_ASIDS_PER_CORE: u32 = 4096;

/// How software threads are placed on cores.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scheduler {
    /// A thread that needs a core takes the next one in turn; placements end at timer ticks.
    #[default]
    RoundRobin,
    /// Thread k (in order of first appearance) always runs on core k mod count.
    Pinned,
}

impl Scheduler {
    /// The name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            Scheduler::RoundRobin => "round-robin",
            Scheduler::Pinned => "pinned",
        }
    }
}

/// Which dynamic ASID of a core a new address space takes when all are in use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AsidRecycling {
    /// The least recently used.
    #[default]
    Lru,
    /// The next in turn, as Linux's `choose_new_asid` does (arch/x86/mm/tlb.c).
    RoundRobin,
}

/// `[cores]`: the simulated cores and how threads are placed on them.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CoresConfig {
    /// Cores (default 1: one core, no scheduling).
    pub count: u32,
    /// How threads are placed on cores (default round-robin).
    pub scheduler: Scheduler,
    /// References (page lookups) between timer ticks (default 4,000,000: an assumption, Linux's
    /// 4 ms tick at HZ=250 at one lookup per nanosecond).
    pub quantum: u64,
    /// Dynamic ASIDs per core; 0: unlimited (default 6, Linux's TLB_NR_DYN_ASIDS,
    /// arch/x86/include/asm/tlbflush.h).
    pub asids_per_core: u32,
    /// Which ASID a new address space takes on a core whose ASIDs are all in use (default lru).
    pub asid_recycling: AsidRecycling,
}

impl Default for CoresConfig {
    fn default() -> Self {
        CoresConfig {
            count: 1,
            scheduler: Scheduler::RoundRobin,
            quantum: 4_000_000,
            asids_per_core: 6,
            asid_recycling: AsidRecycling::Lru,
        }
    }
}

impl CoresConfig {
    /// Checks the values serde cannot; errors name the key.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.count == 0 || self.count > MAX_CORES {
            return Err(ParamError::new("cores.count", format!("must be from 1 to {MAX_CORES}, got {}", self.count)));
        }
        if self.quantum == 0 || self.quantum > 1 << 40 {
            return Err(ParamError::new(
                "cores.quantum",
                format!("must be from 1 to 2^40 references, got {}", self.quantum),
            ));
        }
        if self.asids_per_core > MAX_ASIDS_PER_CORE {
            return Err(ParamError::new(
                "cores.asids_per_core",
                format!("must be at most {MAX_ASIDS_PER_CORE} (0: unlimited), got {}", self.asids_per_core),
            ));
        }
        Ok(())
    }
}

/// `os.shootdown.policy`: which cores a TLB shootdown interrupts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ShootdownPolicy {
    /// IPIs to every other core in the address space's active mask; a full flush of the
    /// address space above `flush_ceiling` pages.
    #[default]
    Linux,
    /// IPIs only to the cores whose TLBs hold a page of the ranges.
    Ideal,
    /// No IPIs: each other core invalidates at its next switch or timer tick (LATR).
    Lazy,
}

impl ShootdownPolicy {
    /// The name in configs and reports.
    pub fn name(self) -> &'static str {
        match self {
            ShootdownPolicy::Linux => "linux",
            ShootdownPolicy::Ideal => "ideal",
            ShootdownPolicy::Lazy => "lazy",
        }
    }
}

/// `[os.shootdown]`: how a change of the address space reaches the other cores' TLBs.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShootdownConfig {
    /// Which cores are interrupted (default linux).
    pub policy: ShootdownPolicy,
    /// `linux`: also interrupt cores that hold the address space's ASID while running another
    /// (lazy cores; default false: they flush it when they next switch to it).
    pub lazy_cores: bool,
    /// `linux`: above this many pages a shootdown flushes the address space's entries whole
    /// (default 33, Linux's tlb_single_page_flush_ceiling, arch/x86/mm/tlb.c).
    pub flush_ceiling: u64,
    /// Cycles of the initiating core per shootdown that sends an IPI (default 2830: 707.5 ns
    /// at 4 GHz, from Amit's 2019 measurements; docs/configuration.md).
    pub initiator_cycles: u64,
    /// Cycles of the initiating core per IPI it sends and waits for (default 270: 67.5 ns at
    /// 4 GHz, from the same measurements).
    pub ipi_cycles: u64,
    /// Cycles per TLB entry a target core invalidates one by one (default 260: one INVLPG,
    /// Molnar's 2015 measurement).
    pub entry_cycles: u64,
    /// Cycles of a target core per flush of an address space's entries whole: `linux` above
    /// `flush_ceiling`, and a lazy core catching up when it loads the space (default 96: one
    /// CR3 write, Molnar's 2015 measurement).
    pub flush_cycles: u64,
}

/// Amit's 2019 figures (ns per MADV_DONTNEED and touch of one page on a Haswell, with 1, 2 and
/// 4 threads: 661, 1,436 and 1,571 ns) fit `initiator + n x ipi` for n remote targets:
/// 1,436 - 661 = 775 ns for one target, 1,571 - 661 = 910 ns for three, so 67.5 ns per
/// target and 707.5 ns besides. The initiator spins for them, so they are time, converted
/// at the x86-64 preset's clock assumption (4 GHz).
const AMIT_INITIATOR_NS: f64 = 707.5;
const AMIT_IPI_NS: f64 = 67.5;
const DEFAULT_CLOCK_GHZ: f64 = 4.0;

impl Default for ShootdownConfig {
    fn default() -> Self {
        ShootdownConfig {
            policy: ShootdownPolicy::Linux,
            lazy_cores: false,
            flush_ceiling: 33,
            initiator_cycles: (AMIT_INITIATOR_NS * DEFAULT_CLOCK_GHZ) as u64,
            ipi_cycles: (AMIT_IPI_NS * DEFAULT_CLOCK_GHZ) as u64,
            entry_cycles: 260,
            flush_cycles: 96,
        }
    }
}

impl ShootdownConfig {
    /// Checks the values serde cannot; errors name the key.
    pub fn validate(&self) -> Result<(), ParamError> {
        if self.flush_ceiling > 1 << 40 {
            return Err(ParamError::new(
                "os.shootdown.flush_ceiling",
                format!("must be at most 2^40 pages, got {}", self.flush_ceiling),
            ));
        }
        crate::limits::all_cycles([
            ("os.shootdown.initiator_cycles", self.initiator_cycles),
            ("os.shootdown.ipi_cycles", self.ipi_cycles),
            ("os.shootdown.entry_cycles", self.entry_cycles),
            ("os.shootdown.flush_cycles", self.flush_cycles),
        ])
    }
}
