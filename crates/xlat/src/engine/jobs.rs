//! `xlat run --jobs N`: the designs spread over N simulation threads besides the reader's.
//!
//! Designs differ in cost by an order of magnitude (a TLB and a radix table against a design
//! with two cache levels and a hashed table), so the shares are made from measured times: the
//! first batches go through every design on the calling thread, each design timed, and then the
//! designs are dealt out longest first, each to the share with the least time so far. The
//! threads go on timing their designs, and the designs are dealt again during the run when
//! their times so far call for it ([`Redeal`]). Every design still sees every batch in trace
//! order, so its results do not depend on the shares.

use super::error::SimError;
use super::feed::{self, Batch};
use super::pass::{lookup_counts, process_share, RunOptions, RunSummary};
use super::System;
use crate::trace::TraceReader;
use std::cell::Cell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

/// Runs every system over one pass of `reader`. `progress` is called after each batch with the
/// references done so far. A trace that cannot be read ends the run with an error and nothing is
/// returned: no partial report can be presented. A design that cannot simulate the trace (an
/// address outside its virtual address space, physical memory exhausted) stops on its own and
/// the others go on: its [`System::failure`] says why and where, and its counters must not be
/// reported as a result.
///
/// The reader runs on its own thread, a few batches ahead of the simulation (batches are
/// recycled, so memory stays constant): on a machine with two cores, decoding and simulating
/// overlap and a run takes about as long as the slower of the two.
pub fn run(
    reader: &mut dyn TraceReader,
    systems: &mut [System],
    opts: RunOptions,
    progress: impl FnMut(u64),
) -> Result<RunSummary, SimError> {
    run_jobs(reader, systems, opts, 1, progress)
}

/// [`run`] with the designs spread over up to `jobs` threads (besides the reader's): each
/// thread simulates its share of the designs (shares of about equal cost, measured on the
/// first batches: see `engine/jobs.rs`) over the same decoded batches, which it shares
/// read-only. Every design sees the same records in the same order whatever `jobs` is, so the
/// results are identical; `jobs <= 1` (or one design) is the single simulation thread of
/// [`run`].
pub fn run_jobs(
    reader: &mut dyn TraceReader,
    systems: &mut [System],
    opts: RunOptions,
    jobs: usize,
    progress: impl FnMut(u64),
) -> Result<RunSummary, SimError> {
    let jobs = jobs.clamp(1, systems.len().max(1));
    run_shares(reader, systems, opts, jobs, Redeal::RUNS, progress)
}

/// Batches every design simulates on the calling thread, timed, before the shares are made
/// (16 batches of 4096 records: a small fraction of any trace worth spreading).
const CALIBRATION_BATCHES: usize = 16;

/// When the shares are dealt again ([`run_shares`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct Redeal {
    /// Batches between two looks at the designs' costs so far.
    pub(super) every: usize,
    /// Deal again when the shares' longest time would be at least this much shorter (a
    /// fraction): each new deal waits for the workers to finish the batches they hold.
    pub(super) gain: f64,
    /// Tests: at every look, move each design to the next share, whatever the costs.
    pub(super) rotate: bool,
}

impl Redeal {
    /// Runs': a look every 64 batches, a new deal for a 3 % shorter longest share.
    pub(super) const RUNS: Redeal = Redeal { every: 64, gain: 0.03, rotate: false };
}

/// A design in a share: its index among the run's designs, and its system.
type Slot<'a> = (usize, &'a mut System);

/// What the calling thread sends a worker.
enum ToWorker<'a> {
    /// The designs to simulate from now on (after [`ToWorker::Return`], or at the start).
    Share(Vec<Slot<'a>>),
    /// Batches to simulate, in trace order.
    Bundle(Vec<Arc<Batch>>),
    /// Send the share back once every batch before this message is simulated.
    Return,
}

/// Each design's simulation time so far and the batches it covers, added to by whichever
/// thread simulates it: a design's cost per batch is comparable with any other's wherever
/// they ran.
struct Costs {
    nanos: Vec<AtomicU64>,
    batches: Vec<AtomicU64>,
}

impl Costs {
    fn new(n: usize) -> Costs {
        Costs {
            nanos: (0..n).map(|_| AtomicU64::new(0)).collect(),
            batches: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Simulates `batch` on each design of `share`, timing each.
    fn simulate(&self, share: &mut [Slot<'_>], batch: &Batch, shift: u32) {
        for (k, s) in share.iter_mut() {
            let t = Instant::now();
            process_share([&mut **s], batch, shift);
            self.nanos[*k].fetch_add(t.elapsed().as_nanos() as u64, Ordering::Relaxed);
            self.batches[*k].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Each design's mean time per batch so far.
    fn per_batch(&self) -> Vec<Duration> {
        let load = |v: &AtomicU64| v.load(Ordering::Relaxed);
        self.nanos.iter().zip(&self.batches).map(|(n, b)| Duration::from_nanos(load(n) / load(b).max(1))).collect()
    }
}

/// How a run of `jobs` simulation threads reads a trace whose reader keeps `outside` threads of
/// its own busy (online, the tracer's thread and the traced program), on `cores` cores: the
/// busy threads in all, which decide whether the run's threads poll for one another
/// ([`feed::FeedSpec::threads`]), and whether the calling thread reads too rather than a reader
/// thread (when the simulation threads have a core each but the reader would not).
///
/// Polling where the cores are all taken costs every thread: online on 2 cores, the reader
/// thread's polls (yields and clock reads) took about 1.2 s of CPU time in a 7 s run of `gzip`
/// under the x86-64 preset, and the run took 5.8 s without them (docs/performance.md).
fn reading(jobs: usize, outside: usize, cores: usize) -> (usize, bool) {
    let threads = 1 + jobs + outside;
    (threads, jobs > 1 && threads > cores && jobs + outside <= cores)
}

/// [`super::run_jobs`]: the reader thread decodes and counts; with more than one job the
/// calling thread times every design over the first batches, keeps the first share and hands
/// each later batch (shared, read-only) to `jobs - 1` workers that simulate the others (with
/// one job it simulates every design itself). Batches go back to the reader once every thread
/// is done with them. Every [`Redeal::every`] batches the shares are dealt again from each
/// design's time per batch so far, if that shortens the longest share enough: the workers give
/// their designs back once they have simulated every batch sent before, and the designs go out
/// again, so that each still sees every batch once and in trace order.
pub(super) fn run_shares(
    reader: &mut dyn TraceReader,
    systems: &mut [System],
    opts: RunOptions,
    jobs: usize,
    redeal: Redeal,
    mut progress: impl FnMut(u64),
) -> Result<RunSummary, SimError> {
    let counts = lookup_counts(systems);
    let shift = counts.lookup_page_size.trailing_zeros();
    let max = opts.max_refs.unwrap_or(u64::MAX);
    let mut last = counts;
    let costs = Costs::new(systems.len());
    let truncated = std::thread::scope(|scope| -> Result<bool, SimError> {
        // Plain designs at the lookup page size read the page words alone (and the records that
        // take the general step); any other design reads every record, as does a design with a
        // page cache (stores may copy on write, which only the general step sees).
        let all_records = systems.iter().any(|s| !s.reads_words(shift) || s.needs_records());
        let (threads, inline) = reading(jobs, reader.busy_threads(), feed::cores());
        let spec = feed::FeedSpec { shift, max, threads, all_records };
        let spare = reader.spare_work();
        let feed = if inline {
            feed::inline(&mut *reader, counts, spec)
        } else {
            feed::spawn(scope, &mut *reader, counts, spec)
        };
        // The calling thread's reading so far (when inline): its time and batches.
        let (read, read_batches) = (Cell::new(Duration::ZERO), Cell::new(0u32));
        let next = || {
            let t = Instant::now();
            let b = feed.next();
            if inline {
                read.set(read.get() + t.elapsed());
                read_batches.set(read_batches.get() + 1);
            }
            b
        };
        let read_per_batch = || read.get() / read_batches.get().max(1);
        let mut all: Vec<Slot<'_>> = systems.iter_mut().enumerate().collect();
        if jobs == 1 {
            while let Some(batch) = next() {
                let batch = batch?;
                process_share(all.iter_mut().map(|(_, s)| &mut **s), &batch, shift);
                last = batch.after;
                progress(last.references);
                feed.recycle(batch);
            }
            return Ok(feed.finish());
        }
        for _ in 0..CALIBRATION_BATCHES {
            let Some(batch) = next() else { break };
            let batch = batch?;
            costs.simulate(&mut all, &batch, shift);
            last = batch.after;
            progress(last.references);
            feed.recycle(batch);
        }
        let mut share_of = deal(&costs.per_batch(), jobs, read_per_batch());
        let (back_tx, back) = mpsc::channel::<Vec<Slot<'_>>>();
        let mut workers = Vec::new();
        for _ in 1..jobs {
            let (tx, rx) = mpsc::sync_channel::<ToWorker<'_>>(2);
            workers.push(tx);
            let (costs, back_tx, spare) = (&costs, back_tx.clone(), spare.clone());
            scope.spawn(move || {
                let mut share = Vec::new();
                // While nothing is sent, the reader's spare work (decompressing the input ahead).
                let next = || loop {
                    match rx.try_recv() {
                        Ok(msg) => return Some(msg),
                        Err(mpsc::TryRecvError::Disconnected) => return None,
                        Err(mpsc::TryRecvError::Empty) if spare.as_ref().is_some_and(|s| s.help()) => {}
                        Err(mpsc::TryRecvError::Empty) => return rx.recv().ok(),
                    }
                };
                while let Some(msg) = next() {
                    match msg {
                        ToWorker::Share(s) => share = s,
                        ToWorker::Bundle(bundle) => {
                            for b in bundle {
                                costs.simulate(&mut share, &b, shift);
                            }
                        }
                        ToWorker::Return => {
                            if back_tx.send(std::mem::take(&mut share)).is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
        drop(back_tx);
        let mut mine = hand_out(&mut all, &share_of, &workers);
        // Batches go to the workers in bundles, as the feed sends them (`feed::BUNDLE`), unless
        // every thread has a core and polls.
        let bundle = if feed.polls() { 1 } else { feed::BUNDLE };
        let mut pending = Vec::with_capacity(bundle);
        let hand_over = |pending: &mut Vec<Arc<Batch>>| {
            if !pending.is_empty() {
                for w in &workers {
                    let _ = w.send(ToWorker::Bundle(pending.clone()));
                }
                pending.clear();
            }
        };
        let mut in_flight = VecDeque::new();
        let mut since = 0;
        while let Some(batch) = next() {
            let shared = Arc::new(batch?);
            pending.push(Arc::clone(&shared));
            if pending.len() == bundle {
                hand_over(&mut pending);
            }
            costs.simulate(&mut mine, &shared, shift);
            last = shared.after;
            progress(last.references);
            in_flight.push_back(shared);
            since += 1;
            if since == redeal.every {
                since = 0;
                let proposal = if redeal.rotate {
                    Some(share_of.iter().map(|&j| (j + 1) % jobs).collect())
                } else {
                    let (cost, first) = (costs.per_batch(), read_per_batch());
                    let proposal = deal(&cost, jobs, first);
                    let (now, then) = (longest(&cost, &share_of, jobs, first), longest(&cost, &proposal, jobs, first));
                    (then.as_secs_f64() < now.as_secs_f64() * (1.0 - redeal.gain)).then_some(proposal)
                };
                if let Some(proposal) = proposal.filter(|p| *p != share_of) {
                    // Every worker gives its share back once it has simulated what it holds.
                    hand_over(&mut pending);
                    for w in &workers {
                        let _ = w.send(ToWorker::Return);
                    }
                    all = std::mem::take(&mut mine);
                    for _ in 1..jobs {
                        // A worker stops only when its channel closes (or if it panicked, which
                        // the scope passes on).
                        all.extend(back.recv().expect("a worker gives its share back"));
                    }
                    share_of = proposal;
                    mine = hand_out(&mut all, &share_of, &workers);
                }
            }
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
        hand_over(&mut pending);
        drop(workers);
        Ok(feed.finish())
    })?;
    Ok(RunSummary { trace: last, reader: reader.stats(), truncated_by_limit: truncated })
}

/// Deals `all` out as `share_of` says: returns the calling thread's share (the first) and
/// sends each worker its own.
fn hand_out<'a>(
    all: &mut Vec<Slot<'a>>,
    share_of: &[usize],
    workers: &[mpsc::SyncSender<ToWorker<'a>>],
) -> Vec<Slot<'a>> {
    let mut shares: Vec<Vec<Slot<'a>>> = (0..=workers.len()).map(|_| Vec::new()).collect();
    for slot in all.drain(..) {
        shares[share_of[slot.0]].push(slot);
    }
    let mut shares = shares.into_iter();
    let mine = shares.next().unwrap_or_default();
    for (w, theirs) in workers.iter().zip(shares) {
        // A worker only stops when its channel closes, at the run's end.
        let _ = w.send(ToWorker::Share(theirs));
    }
    mine
}

/// The longest of `jobs` shares' total `cost` when design `k` is in share `share_of[k]`, the
/// first share starting from `first`.
fn longest(cost: &[Duration], share_of: &[usize], jobs: usize, first: Duration) -> Duration {
    let mut load = vec![Duration::ZERO; jobs];
    load[0] = first;
    for (c, &j) in cost.iter().zip(share_of) {
        load[j] += *c;
    }
    load.into_iter().max().unwrap_or_default()
}

/// The share of each design whose `cost` is given, for `jobs` shares of about equal total
/// cost, the first share starting from `first` (the calling thread's reading, if it reads):
/// longest first, each to the share with the least so far (ties to the lower share; every
/// design counts at least a nanosecond, so no share is left empty while designs remain).
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
    use crate::config::Config;
    use crate::engine::DesignFailure;
    use crate::trace::open::Compression;
    use crate::trace::xtr::{encode_to_vec, XtrReader};
    use crate::trace::{Kind, Record};

    /// Three processes taking turns over pages in two regions, the last quarter of the trace
    /// also above 4 GiB (where a design with a 32-bit address space fails).
    fn trace() -> Vec<u8> {
        let mut records: Vec<Record> = (1..=3).map(|asid| Record::Process { asid }).collect();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let refs = 150_000;
        for i in 0..refs {
            if i % 7_000 == 0 {
                records.push(Record::ContextSwitch { asid: 1 + (i / 7_000) % 3 });
            }
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = x % 600 + if i > refs * 3 / 4 && x % 5 == 0 { 1 << 21 } else { 0 };
            let kind = [Kind::Ifetch, Kind::Load, Kind::Store, Kind::Ifetch][(x >> 40) as usize % 4];
            records.push(Record::Access { kind, size: 8, addr: 0x40_0000 + (page << 12) + (x >> 50) % 4088 });
        }
        encode_to_vec(&records, Compression::None).unwrap()
    }

    /// A reader that says it keeps `outside` threads busy (as an online run's does).
    struct Busy<R> {
        reader: R,
        outside: usize,
    }

    impl<R: TraceReader> TraceReader for Busy<R> {
        fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, crate::trace::TraceError> {
            self.reader.read_batch(out, max)
        }
        fn read_batch_words(
            &mut self,
            out: &mut Vec<Record>,
            max: usize,
            w: crate::trace::BatchWords<'_>,
        ) -> Result<usize, crate::trace::TraceError> {
            self.reader.read_batch_words(out, max, w)
        }
        fn stats(&self) -> crate::trace::ReaderStats {
            self.reader.stats()
        }
        fn spare_work(&self) -> Option<Arc<dyn crate::trace::SpareWork>> {
            self.reader.spare_work()
        }
        fn busy_threads(&self) -> usize {
            self.outside
        }
    }

    /// Each design's counters and failure after `run_shares` with `jobs` and `redeal`.
    fn results(trace: &[u8], jobs: usize, redeal: Redeal) -> Vec<(crate::stats::SystemStats, Option<DesignFailure>)> {
        results_with(trace, jobs, redeal, 0)
    }

    /// [`results`] with a reader that keeps `outside` threads of its own busy.
    fn results_with(
        trace: &[u8],
        jobs: usize,
        redeal: Redeal,
        outside: usize,
    ) -> Vec<(crate::stats::SystemStats, Option<DesignFailure>)> {
        let narrow = "name = \"narrow\"\n[[tlb]]\nname = \"L1\"\nentries = 32\nways = 4\n[page_table]\nkind = \"radix\"\nva_bits = 32\n";
        let fa = "name = \"fa\"\n[[tlb]]\nname = \"L1\"\nentries = 64\nways = 64\n[page_table]\nkind = \"radix\"\n";
        let mut configs = vec![Config::from_toml(narrow, "narrow").unwrap(), Config::from_toml(fa, "fa").unwrap()];
        configs.extend(["x86-64", "itanium2", "mach3-r3000", "ultrasparc"].map(|p| Config::preset(p).unwrap()));
        let mut systems: Vec<System> = configs.iter().map(|c| System::new(c).unwrap()).collect();
        let reader = XtrReader::new(std::io::Cursor::new(trace.to_vec()), "t").unwrap();
        let mut reader = Busy { reader, outside };
        let summary = run_shares(&mut reader, &mut systems, RunOptions::default(), jobs, redeal, |_| {}).unwrap();
        assert!(summary.trace.references > 150_000 * 99 / 100);
        systems.iter().map(|s| (s.stats(), s.failure.clone())).collect()
    }

    #[test]
    fn designs_moved_between_threads_give_the_results_of_one() {
        let trace = trace();
        let one = results(&trace, 1, Redeal::RUNS);
        assert!(one[0].1.is_some() && one[1..].iter().all(|r| r.1.is_none()), "only the narrow design fails");
        // Every design moves at every look (after each batch, or every third), whatever the
        // costs; and the runs' own looks.
        for jobs in [2, 3] {
            for redeal in [
                Redeal { every: 1, gain: 0.0, rotate: true },
                Redeal { every: 3, gain: 0.0, rotate: true },
                Redeal { every: 1, gain: 0.0, rotate: false },
                Redeal::RUNS,
            ] {
                assert!(results(&trace, jobs, redeal) == one, "--jobs {jobs}, {redeal:?}");
            }
        }
    }

    #[test]
    fn threads_busy_outside_the_run_count_against_its_cores() {
        // A file on 2 cores: a reader thread and one simulation thread have a core each (they
        // poll); online, the tracer's thread and the traced program take the cores too.
        assert_eq!(reading(1, 0, 2), (2, false));
        assert!(reading(1, 2, 2).0 > 2 && reading(1, 2, 4).0 <= 4);
        // Two simulation threads on 2 cores read in the calling thread, unless the cores are
        // taken anyway.
        assert_eq!(reading(2, 0, 2), (3, true));
        assert_eq!(reading(2, 2, 2), (5, false));
        assert_eq!(reading(2, 2, 4), (5, true));
        assert_eq!(reading(2, 2, 8), (5, false));
        // Results do not depend on it: with more busy threads than any machine has cores, the
        // run's threads never poll and batches go out in bundles.
        let trace = trace();
        for jobs in [1, 2] {
            assert!(
                results_with(&trace, jobs, Redeal::RUNS, 1 << 20) == results(&trace, 1, Redeal::RUNS),
                "--jobs {jobs}"
            );
        }
    }

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
