//! The state of several simulated cores (`[cores] count > 1`, docs/multicore.md): each core's
//! spare private structures and levels, placement, ASIDs and counters. What the cores do (the
//! scheduler, the swap, the shootdowns) is in `engine/cores.rs`, which works on the machine;
//! the machine holds this state, so the two need not name each other.

use crate::addr::{Asid, Vpn};
use crate::cache::{CacheStats, Level};
use crate::multicore::{CoresConfig, ShootdownConfig};
use crate::stats::{CoreStats, TlbStats};
use crate::tlb::Tlb;
use std::collections::HashMap;

/// The thread of a process whose references came before its first `Thread` record.
pub(super) const FIRST_THREAD: u32 = u32::MAX;

/// One simulated core.
#[derive(Clone, Debug)]
pub(super) struct Core {
    /// Its private TLB structures while another core runs (a spare while it runs).
    pub(super) tlbs: Vec<Tlb>,
    /// Its private cache levels while another core runs (a spare while it runs).
    pub(super) levels: Vec<Level>,
    /// The thread placed on it.
    pub(super) thread: Option<(u32, u32)>,
    /// Round-robin: the placement holds (until a timer tick ends it).
    pub(super) held: bool,
    /// The address space loaded.
    pub(super) space: Option<u32>,
    /// Address spaces holding one of its dynamic ASIDs, with their last use.
    pub(super) asids: Vec<(u32, u64)>,
    /// Round-robin recycling: the ASID slot a new address space takes next.
    pub(super) next_slot: usize,
    /// Address spaces whose entries it must flush when it next loads them (a shootdown it was
    /// not interrupted for: a lazy core under `linux`).
    pub(super) stale: Vec<u32>,
    /// `lazy`: ranges to invalidate at its next switch or timer tick.
    pub(super) pending: Vec<(Asid, Vpn, Vpn)>,
    /// Its counters so far (those of its running time up to its last switch away).
    pub(super) st: CoreStats,
    /// The machine's counters when it last started running.
    pub(super) snap_tlb: Vec<TlbStats>,
    pub(super) snap_lookups: [u64; 2],
    pub(super) snap_caches: Vec<CacheStats>,
}

/// The cores of a design (`engine/cores.rs` holds what they do).
#[derive(Clone, Debug)]
pub(crate) struct Cores {
    pub(super) cfg: CoresConfig,
    pub(super) sd: ShootdownConfig,
    /// `asid = "flush"`: a core flushes its private structures when it loads another space.
    pub(super) flush_on_switch: bool,
    /// Indexes of the private TLB structures and cache levels.
    pub(super) private_tlbs: Vec<usize>,
    pub(super) private_levels: Vec<usize>,
    pub(super) cores: Vec<Core>,
    pub(super) running: usize,
    /// Each thread's order of first appearance.
    pub(super) threads: HashMap<(u32, u32), usize>,
    /// Each process's current thread.
    pub(super) last_tid: HashMap<u32, u32>,
    /// The thread running now.
    pub(super) current: Option<(u32, u32)>,
    /// Round-robin: the core the next placement takes.
    pub(super) cursor: usize,
    /// The lookup count at which the next timer tick is due.
    pub(super) next_tick: u64,
    /// Use stamps of ASIDs.
    pub(super) clock: u64,
    /// An exit is tearing its address space down: its unmaps shoot nothing down.
    pub(crate) exiting: bool,
}
