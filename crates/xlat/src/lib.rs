//! xlat: a trace-driven simulator of TLBs, page tables and the OS policies around them.
//!
//! Layers, bottom up (see `ARCHITECTURE.md`):
//! - [`addr`]: strong address types.
//! - [`trace`]: trace records, readers and writers (lackey, `.xtr`, ChampSim), generators.
//! - [`tracer`]: tracing a running program (QEMU plugin or valgrind lackey) into records.
//! - [`tlb`]: TLB structures and replacement policies.
//! - [`pt`]: page tables (radix, linear, hashed, clustered) and walk accounting.
//! - [`os`]: processes, demand paging and physical frame allocators.
//! - [`cost`]: the cycle model of translation.
//! - [`cache`]: cache hierarchies and memory, fed with physical addresses; the timing model.
//! - [`config`]: TOML configs and built-in presets, validated into a [`engine::System`].
//! - [`engine`]: one simulated system per config; many of them fed by one pass over a trace.
//! - [`curve`]: misses of every TLB size and associativity in one pass (stack distances).
//! - [`stats`]: plain counters the engine fills and the printers read.
//! - [`report`]: table, JSON and CSV printers.
//! - [`workloads`]: the reproducible suite of real programs, traced and snapshotted.
//! - [`sweep`]: design-space sweeps: points by parameter path, kept by content hash, one table.
//!
//! A design, a few references and their counts:
//!
//! ```
//! use xlat::config::Config;
//! use xlat::engine::System;
//! use xlat::trace::{Kind, Record};
//!
//! let toml = r#"
//! name = "fa2"
//! [[tlb]]
//! name = "L1"
//! entries = 2
//! policy = "lru"
//! [page_table]
//! kind = "radix"
//! "#;
//! let mut sys = System::new(&Config::from_toml(toml, "example")?)?;
//! // Pages 1, 2, 1, 3, 2: the third page evicts page 2 (least recently used), so the last
//! // reference misses again.
//! let refs: Vec<Record> =
//!     [1u64, 2, 1, 3, 2].iter().map(|p| Record::Access { kind: Kind::Load, size: 8, addr: p << 12 }).collect();
//! sys.process(&refs)?;
//! let s = sys.stats();
//! assert_eq!((s.tlb[0].accesses, s.tlb[0].misses), (5, 4));
//! assert_eq!(s.page_faults, 3);
//! // Four walks: the first finds no table at all for this process and reads nothing, the other
//! // three read one entry in each of the 4 levels.
//! assert_eq!((s.walks.count, s.walks.memory_refs), (4, 12));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs)]

pub mod addr;
pub mod cache;
pub mod config;
pub mod cost;
pub mod curve;
pub mod engine;
pub mod limits;
pub mod model;
#[cfg(test)]
mod module_graph;
pub mod mtlb;
pub mod multicore;
pub mod os;
pub mod output;
mod padded;
pub mod plot;
pub mod pt;
pub mod report;
pub mod reproduce;
pub mod snapshot;
pub mod stats;
pub mod sweep;
pub mod tlb;
pub mod trace;
pub mod tracer;
pub mod workloads;
