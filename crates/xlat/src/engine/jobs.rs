//! `xlat run --jobs N`: the designs spread over N simulation threads besides the reader's.
//!
//! Designs differ in cost by an order of magnitude (a TLB and a radix table against a design
//! with two cache levels and a hashed table), so the shares are made from measured times: the
//! first batches go through every design on the calling thread, each design timed, and then the
//! designs are dealt out longest first, each to the share with the least time so far. Every
//! design still sees every batch in trace order, so its results do not depend on the shares.

use super::feed::{self, Batch};
use super::{lookup_counts, process_share, RunOptions, RunSummary, SimError, System};
use crate::trace::TraceReader;
use std::collections::VecDeque;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Batches every design simulates on the calling thread, timed, before the shares are made
/// (16 batches of 4096 records: a small fraction of any trace worth spreading).
const CALIBRATION_BATCHES: usize = 16;

/// [`super::run_jobs`]: the reader thread decodes and counts; with more than one job the
/// calling thread times every design over the first batches, keeps the first share and hands
/// each later batch (shared, read-only) to `jobs - 1` workers that simulate the others (with
/// one job it simulates every design itself). Batches go back to the reader once every thread
/// is done with them.
pub(super) fn run_shares(
    reader: &mut dyn TraceReader,
    systems: &mut [System],
    opts: RunOptions,
    jobs: usize,
    mut progress: impl FnMut(u64),
) -> Result<RunSummary, SimError> {
    let counts = lookup_counts(systems);
    let shift = counts.lookup_page_size.trailing_zeros();
    let max = opts.max_refs.unwrap_or(u64::MAX);
    let mut last = counts;
    let truncated = std::thread::scope(|scope| -> Result<bool, SimError> {
        // Plain designs at the lookup page size read the page words alone (and the records that
        // take the general step); any other design reads every record.
        let all_records = systems.iter().any(|s| !s.reads_words(shift));
        let spec = feed::FeedSpec { shift, max, threads: 1 + jobs, all_records };
        // With a core for each simulation thread but none for a reader thread, the calling
        // thread reads too (and takes that much less of the designs).
        let inline = jobs > 1 && !feed::polls_with(1 + jobs) && feed::polls_with(jobs);
        let feed = if inline {
            feed::inline(&mut *reader, counts, spec)
        } else {
            feed::spawn(scope, &mut *reader, counts, spec)
        };
        let mut batches = std::iter::from_fn(|| feed.next());
        let mut cost = vec![Duration::ZERO; systems.len()];
        // Time spent reading the calibration batches (the calling thread's, when inline).
        let mut read = Duration::ZERO;
        let calibration = if jobs > 1 { CALIBRATION_BATCHES } else { 0 };
        for _ in 0..calibration {
            let t = Instant::now();
            let Some(batch) = batches.next() else { break };
            read += t.elapsed();
            let batch = batch?;
            for (s, c) in systems.iter_mut().zip(&mut cost) {
                let t = Instant::now();
                process_share([s], &batch, shift);
                *c += t.elapsed();
            }
            last = batch.after;
            progress(last.references);
            feed.recycle(batch);
        }
        let first = if inline { read } else { Duration::ZERO };
        let mut shares = partition(systems, &cost, jobs, first).into_iter();
        let mut mine = shares.next().unwrap_or_default();
        let mut workers = Vec::new();
        for mut theirs in shares {
            let (tx, rx) = mpsc::sync_channel::<Vec<Arc<Batch>>>(2);
            workers.push(tx);
            scope.spawn(move || {
                for bundle in rx.iter() {
                    for b in bundle {
                        process_share(theirs.iter_mut().map(|s| &mut **s), &b, shift);
                    }
                }
            });
        }
        // Batches go to the workers in bundles, as the feed sends them (`feed::BUNDLE`), unless
        // every thread has a core and polls.
        let bundle = if feed.polls() { 1 } else { feed::BUNDLE };
        let mut pending = Vec::with_capacity(bundle);
        let hand_over = |pending: &Vec<Arc<Batch>>| {
            for w in &workers {
                // A worker only stops when its channel closes, after the loop below.
                let _ = w.send(pending.clone());
            }
        };
        let mut in_flight = VecDeque::new();
        for batch in batches {
            let shared = Arc::new(batch?);
            pending.push(Arc::clone(&shared));
            if pending.len() == bundle {
                hand_over(&pending);
                pending.clear();
            }
            process_share(mine.iter_mut().map(|s| &mut **s), &shared, shift);
            last = shared.after;
            progress(last.references);
            in_flight.push_back(shared);
            // The oldest batches first: the workers finish them in order.
            while let Some(b) = in_flight.pop_front() {
                match Arc::try_unwrap(b) {
                    Ok(b) => feed.recycle(b),
                    Err(b) => {
                        in_flight.push_front(b);
                        break;
                    }
                }
            }
        }
        if !pending.is_empty() {
            hand_over(&pending);
        }
        drop(workers);
        Ok(feed.finish())
    })?;
    Ok(RunSummary { trace: last, reader: reader.stats(), truncated_by_limit: truncated })
}

/// Deals `systems` into `jobs` shares of about equal total `cost` (one per design), the first
/// share starting from `first` (the calling thread's reading, if it reads): longest first, each
/// to the share with the least so far (ties to the lower share; every design counts at least a
/// nanosecond, so no share is left empty while designs remain).
fn partition<'a>(
    systems: &'a mut [System],
    cost: &[Duration],
    jobs: usize,
    first: Duration,
) -> Vec<Vec<&'a mut System>> {
    let share_of = deal(cost, jobs, first);
    let mut shares: Vec<Vec<&mut System>> = (0..jobs).map(|_| Vec::new()).collect();
    for (s, &j) in systems.iter_mut().zip(&share_of) {
        shares[j].push(s);
    }
    shares
}

/// The share of each item of [`partition`].
fn deal(cost: &[Duration], jobs: usize, first: Duration) -> Vec<usize> {
    let mut order: Vec<usize> = (0..cost.len()).collect();
    order.sort_by(|&a, &b| cost[b].cmp(&cost[a]).then(a.cmp(&b)));
    let mut load = vec![Duration::ZERO; jobs];
    load[0] = first;
    let mut share_of = vec![0; cost.len()];
    for k in order {
        let j = (0..jobs).min_by_key(|&j| (load[j], j)).expect("at least one job");
        load[j] += cost[k].max(Duration::from_nanos(1));
        share_of[k] = j;
    }
    share_of
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn the_heaviest_design_gets_a_share_of_its_own() {
        // Contiguous halves would be 500 + 50 against 400 + 50; dealt, 500 against 500.
        assert_eq!(deal(&ms(&[500, 50, 400, 50]), 2, Duration::ZERO), vec![0, 1, 1, 1]);
        assert_eq!(deal(&ms(&[10, 10, 10, 10, 10, 10]), 3, Duration::ZERO), vec![0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn the_reading_thread_takes_less() {
        // The first share starts with the reading's time: the heaviest design goes elsewhere.
        assert_eq!(deal(&ms(&[500, 400]), 2, Duration::from_millis(200)), vec![1, 0]);
        assert_eq!(deal(&ms(&[300, 300, 100]), 2, Duration::from_millis(250)), vec![1, 0, 1]);
        assert_eq!(deal(&ms(&[300, 300, 100]), 2, Duration::ZERO), vec![0, 1, 0]);
    }

    #[test]
    fn no_share_is_empty_while_designs_remain() {
        for jobs in 1..=4 {
            let share_of = deal(&ms(&[0, 0, 0, 0]), jobs, Duration::ZERO);
            for j in 0..jobs {
                assert!(share_of.contains(&j), "{jobs}: {share_of:?}");
            }
        }
        assert_eq!(deal(&ms(&[7, 0, 0]), 3, Duration::ZERO), vec![0, 1, 2]);
    }
}
