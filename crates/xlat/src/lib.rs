//! xlat: a trace-driven simulator of TLBs, page tables and the OS policies around them.
//!
//! Layers, bottom up (see `ARCHITECTURE.md`):
//! - [`addr`]: strong address types.
//! - [`trace`]: trace records, readers and writers (lackey, `.xtr`, ChampSim), generators.
//! - [`tlb`]: TLB structures and replacement policies.
//! - [`pt`]: page tables (radix, linear, hashed, clustered) and walk accounting.
//! - [`os`]: processes, demand paging and physical frame allocators.
//! - [`cost`]: the cycle model.
//! - [`config`]: TOML configs and built-in presets, validated into a [`engine::System`].
//! - [`engine`]: one simulated system per config; many of them fed by one pass over a trace.
//! - [`stats`]: plain counters the engine fills and the printers read.
//! - [`report`]: table, JSON and CSV printers.
#![warn(missing_docs)]

pub mod addr;
pub mod config;
pub mod cost;
pub mod engine;
pub mod os;
pub mod pt;
pub mod report;
pub mod stats;
pub mod tlb;
pub mod trace;
