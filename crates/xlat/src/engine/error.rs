//! Why a run or one design of it cannot go on.

use crate::os::layout::LayoutFull;
use crate::os::OutOfMemory;
use crate::trace::TraceError;

/// Why one design of a run stopped before the end of the trace, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DesignFailure {
    /// What went wrong.
    pub error: DesignError,
    /// 1-based number of the access record (reference) that failed.
    pub reference: u64,
    /// 1-based number of the record (accesses and events) that failed.
    pub record: u64,
}

/// A simulation that cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] TraceError),
    /// One design could not simulate the trace.
    #[error(transparent)]
    Design(#[from] DesignError),
}

/// Why one design cannot go on with a trace (the others may).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DesignError {
    /// No region ID is left for a new process.
    #[error("config '{config}': {error}")]
    Rids {
        /// Which system.
        config: String,
        /// Details.
        error: crate::os::regions::RidsExhausted,
    },
    /// The Mach personality has no room for another task.
    #[error("config '{config}': {error}")]
    Mach {
        /// Which system.
        config: String,
        /// Details.
        error: crate::os::mach3::TooManyTasks,
    },
    /// The layout has no room for a mapping.
    #[error("config '{config}': {error}")]
    Layout {
        /// Which system.
        config: String,
        /// Details.
        error: LayoutFull,
    },
    /// An address beyond the virtual address space the page table translates.
    #[error("config '{config}': address {addr:#x} lies outside the {va_bits}-bit virtual address space of its page table ({key})")]
    AddressRange {
        /// Which system.
        config: String,
        /// The address.
        addr: u64,
        /// The configured width.
        va_bits: u32,
        /// The key that sets it (`page_table.va_bits`, or `page_table.os.va_bits` where the OS
        /// table behind a VHPT is the narrower).
        key: &'static str,
    },
    /// A system ran out of physical memory.
    #[error("config '{config}': {error}")]
    OutOfMemory {
        /// Which system.
        config: String,
        /// Details.
        error: OutOfMemory,
    },
    /// A bug in xlat: the design's simulation panicked somewhere in records `first..=last`.
    #[error("config '{config}': internal error (a bug in xlat) in records {first} to {last}: {message}")]
    Internal {
        /// Which system.
        config: String,
        /// The panic's message and place.
        message: String,
        /// 1-based numbers of the first and last record of the batch it panicked in.
        first: u64,
        /// See `first`.
        last: u64,
    },
}
