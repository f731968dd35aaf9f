//! One pass of many designs over a trace: its options and summary, and how a batch is fed to
//! a share of the designs (each under [`super::contain::run`], so that a panic fails that
//! design alone).

use super::contain;
use super::error::{DesignError, DesignFailure};
use super::feed::Batch;
use super::System;
use crate::trace::{ReaderStats, TraceCounts};

/// Options of a run.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// Stop after this many references (accesses); `None`: the whole trace.
    pub max_refs: Option<u64>,
}

/// What a run read.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunSummary {
    /// Trace counts.
    pub trace: TraceCounts,
    /// What the reader consumed and skipped.
    pub reader: ReaderStats,
    /// True if `max_refs` stopped the run before the trace ended.
    pub truncated_by_limit: bool,
}

/// Empty trace counts whose lookups are at the designs' common page size (4096 if they
/// differ).
pub(super) fn lookup_counts(systems: &[System]) -> TraceCounts {
    let sizes: Vec<u64> = systems.iter().map(|s| s.m.page_size.bytes()).collect();
    let common = !sizes.is_empty() && sizes.iter().all(|&s| s == sizes[0]);
    TraceCounts { lookup_page_size: if common { sizes[0] } else { 4096 }, ..TraceCounts::default() }
}

/// Feeds `batch` to each system of `systems` that has not failed: through its page words
/// (made at pages of `2^shift` bytes) when the design can use them.
pub(super) fn process_share<'a>(systems: impl IntoIterator<Item = &'a mut System>, batch: &Batch, shift: u32) {
    let (words, before) = (batch.words(), &batch.before);
    for s in systems.into_iter().filter(|s| s.failure.is_none()) {
        let r = contain::run(|| {
            if s.reads_words(shift) {
                s.process_plain_words(batch.slow_records(), words)
            } else {
                s.process_until(batch.records())
            }
        });
        let r = r.unwrap_or_else(|message| {
            // A panic: the design's state is not to be trusted, nor is where in the batch.
            let first = before.references + before.events + 1;
            let last = first + batch.records().len().saturating_sub(1) as u64;
            Err((0, DesignError::Internal { config: s.m.name.clone(), message, first, last }))
        });
        if let Err((i, error)) = r {
            let refs_before = batch.accesses_before(i);
            s.failure = Some(DesignFailure {
                error,
                reference: before.references + refs_before + 1,
                record: before.references + before.events + i as u64 + 1,
            });
        }
    }
}
