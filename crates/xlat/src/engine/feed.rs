//! The reader thread of runs and curves: it decodes the trace a few batches ahead of the
//! simulation, counts it ([`TraceCounts`]), applies the reference limit and makes each batch's
//! page words ([`page_word`](crate::trace::page_word)) at the run's lookup page size, so the
//! simulation threads only simulate. Batches come back through [`Feed::recycle`], so memory
//! stays constant whatever the trace length.

use crate::trace::{BatchWords, Record, TraceCounts, TraceError, TraceReader, BATCH};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::{Scope, ScopedJoinHandle};

/// One batch from the reader thread.
pub(crate) struct Batch {
    records: Vec<Record>,
    /// The page word of each record at `2^shift`-byte pages.
    words: Vec<u64>,
    /// Records to use (the limit may cut the last batch).
    n: usize,
    /// The trace's counts before and after the batch.
    pub(crate) before: TraceCounts,
    pub(crate) after: TraceCounts,
}

impl Batch {
    fn new() -> Batch {
        Batch {
            records: Vec::with_capacity(BATCH),
            words: Vec::with_capacity(BATCH),
            n: 0,
            before: TraceCounts::default(),
            after: TraceCounts::default(),
        }
    }

    /// The records to simulate.
    pub(crate) fn records(&self) -> &[Record] {
        &self.records[..self.n]
    }

    /// Their page words.
    pub(crate) fn words(&self) -> &[u64] {
        &self.words[..self.n]
    }
}

/// The simulation's end of a reader thread.
pub(crate) struct Feed<'scope> {
    /// Batches in trace order, or the error that stopped the reader.
    pub(crate) batches: Receiver<Result<Batch, TraceError>>,
    /// Used batches go back here to be refilled.
    pub(crate) recycle: Sender<Batch>,
    /// True if the reference limit cut the trace (there was more).
    pub(crate) truncated: ScopedJoinHandle<'scope, bool>,
}

/// Starts the reader thread of `reader` in `scope`: counts go on from `counts` (lookups and
/// page words at pages of `2^shift` bytes, `shift >= 1`), and reading stops after `max`
/// references.
pub(crate) fn spawn<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    reader: &'scope mut dyn TraceReader,
    mut counts: TraceCounts,
    shift: u32,
    max: u64,
) -> Feed<'scope> {
    let (full_tx, batches) = mpsc::sync_channel::<Result<Batch, TraceError>>(4);
    let (recycle, empty_rx) = mpsc::channel::<Batch>();
    let truncated = scope.spawn(move || -> bool {
        loop {
            let mut b = empty_rx.try_recv().unwrap_or_else(|_| Batch::new());
            if counts.references == max {
                // At the limit: is there more trace?
                return matches!(reader.read_batch(&mut b.records, 1), Ok(n) if n > 0);
            }
            b.before = counts;
            match read_counted(reader, &mut b, &mut counts, shift, max) {
                Ok(None) => return false,
                Ok(Some(cut)) => {
                    b.after = counts;
                    if full_tx.send(Ok(b)).is_err() {
                        return false; // the simulation stopped
                    }
                    if cut {
                        return true;
                    }
                }
                Err(e) => {
                    let _ = full_tx.send(Err(e));
                    return false;
                }
            }
        }
    });
    Feed { batches, recycle, truncated }
}

/// Reads up to [`BATCH`] records into `b` and adds them to `c` (lookups at `shift`), stopping
/// at `max` references. Returns whether the limit cut the batch, or `None` at the end of the
/// trace.
fn read_counted(
    reader: &mut dyn TraceReader,
    b: &mut Batch,
    c: &mut TraceCounts,
    shift: u32,
    max: u64,
) -> Result<Option<bool>, TraceError> {
    if max == u64::MAX {
        // Without a limit, the whole batch, counted as it is decoded.
        b.n = reader.read_batch_words(&mut b.records, BATCH, BatchWords { words: &mut b.words, shift, counts: c })?;
        return Ok((b.n > 0).then_some(false));
    }
    if reader.read_batch(&mut b.records, BATCH)? == 0 {
        return Ok(None);
    }
    b.n = records_within(&b.records, max - c.references);
    c.add_words(&b.records[..b.n], shift, &mut b.words);
    Ok(Some(b.n < b.records.len()))
}

/// How many of `records` come before the reference past the first `room`.
fn records_within(records: &[Record], room: u64) -> usize {
    let mut seen = 0;
    records
        .iter()
        .position(|r| {
            seen += matches!(r, Record::Access { .. }) as u64;
            seen > room
        })
        .unwrap_or(records.len())
}
