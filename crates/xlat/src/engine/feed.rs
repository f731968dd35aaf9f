//! The reader thread of runs and curves: it decodes the trace a few batches ahead of the
//! simulation, counts it ([`TraceCounts`]), applies the reference limit and makes each batch's
//! page words ([`page_word`](crate::trace::page_word)) at the run's lookup page size, so the
//! simulation threads only simulate. Batches come back through [`Feed::recycle`], so memory
//! stays constant whatever the trace length.

use super::probe::{Probe, FAR_NS};
use crate::trace::SpareWork;
use crate::trace::{BatchWords, Record, TraceCounts, TraceError, TraceReader, BATCH, SLOW_WORD};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TryRecvError, TrySendError};
use std::sync::Arc;
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// One batch from the reader thread.
pub(crate) struct Batch {
    records: Vec<Record>,
    /// The page word of each record at `2^shift`-byte pages.
    words: Vec<u64>,
    /// Records to use (the limit may cut the last batch).
    n: usize,
    /// Whether every record was written; if not, only those whose word is [`SLOW_WORD`]
    /// ([`BatchWords::all_records`]).
    all_records: bool,
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
            all_records: true,
            before: TraceCounts::default(),
            after: TraceCounts::default(),
        }
    }

    /// The records to simulate, for a consumer that reads every record (the feed was
    /// spawned with [`FeedSpec::all_records`]).
    pub(crate) fn records(&self) -> &[Record] {
        debug_assert!(self.all_records, "a batch of partial records read whole");
        &self.records[..self.n]
    }

    /// The records, for a consumer that reads only those whose word is [`SLOW_WORD`] (the
    /// others may be stale when the feed was spawned without [`FeedSpec::all_records`]).
    pub(crate) fn slow_records(&self) -> &[Record] {
        &self.records[..self.n]
    }

    /// How many of the first `i` records are accesses.
    pub(crate) fn accesses_before(&self, i: usize) -> u64 {
        let (records, words) = (self.slow_records(), self.words());
        (0..i).filter(|&j| words[j] != SLOW_WORD || matches!(records[j], Record::Access { .. })).count() as u64
    }

    /// Their page words.
    pub(crate) fn words(&self) -> &[u64] {
        &self.words[..self.n]
    }
}

/// The simulation's end of a reader thread ([`spawn`]), or a reader called in place
/// ([`inline`]).
pub(crate) struct Feed<'scope>(Source<'scope>);

enum Source<'scope> {
    Thread {
        /// Bundles of batches in trace order, or the error that stopped the reader
        /// ([`Feed::next`]).
        batches: Receiver<Result<Vec<Batch>, TraceError>>,
        /// The rest of the bundle received last.
        ready: RefCell<VecDeque<Batch>>,
        /// Whether to poll before sleeping (see [`POLL`]).
        poll: bool,
        /// The reader's work that the simulation takes on while no batch is ready.
        spare: Option<Arc<dyn SpareWork>>,
        /// The reader's probe of how far apart the two cores are (a reader that polls).
        probe: Option<Arc<Probe>>,
        /// Used batches go back here to be refilled.
        recycle: Sender<Batch>,
        /// True if the reference limit cut the trace (there was more).
        truncated: ScopedJoinHandle<'scope, bool>,
    },
    Inline(RefCell<Inline<'scope>>),
}

/// A feed that reads on the thread that asks for batches.
struct Inline<'a> {
    reader: &'a mut dyn TraceReader,
    counts: TraceCounts,
    spec: FeedSpec,
    /// Used batches, to be refilled.
    pool: Vec<Batch>,
    /// Once the trace has ended (or failed): whether the reference limit cut it.
    end: Option<bool>,
}

/// What a reader thread makes.
pub(crate) struct FeedSpec {
    /// Lookups are counted and page words made at pages of `2^shift` bytes (`shift >= 1`).
    pub(crate) shift: u32,
    /// Reading stops after this many references.
    pub(crate) max: u64,
    /// How many threads the run keeps busy, the reader's included (see [`POLL`]).
    pub(crate) threads: usize,
    /// Whether the consumers read every record ([`Batch::records`]), or only those whose page
    /// word is [`SLOW_WORD`] ([`Batch::slow_records`]), which the reader may then write alone.
    pub(crate) all_records: bool,
}

/// Starts the reader thread of `reader` in `scope` as `spec` says; counts go on from `counts`.
pub(crate) fn spawn<'scope, 'env>(
    scope: &'scope Scope<'scope, 'env>,
    reader: &'scope mut dyn TraceReader,
    mut counts: TraceCounts,
    spec: FeedSpec,
) -> Feed<'scope> {
    let poll = polls_with(spec.threads);
    let spare = reader.spare_work();
    let bundle = if poll { 1 } else { BUNDLE };
    // Room for the batches the reader makes while the simulation decompresses a frame for it.
    let depth = if spare.is_some() { 4.max(SPARE_DEPTH / bundle) } else { 4 };
    let (full_tx, batches) = mpsc::sync_channel::<Result<Vec<Batch>, TraceError>>(depth);
    let (recycle, empty_rx) = mpsc::channel::<Batch>();
    // With a core to itself, the reader stores the words around its cache while it finds its
    // core far from the simulation's (`probe`: after its first batches, then now and then).
    let probe = poll.then(|| Arc::new(Probe::default()));
    let asks = probe.clone();
    let truncated = scope.spawn(move || -> bool {
        let (mut for_other_core, mut sent) = (false, 0);
        let mut out = Vec::with_capacity(bundle);
        // Sends the bundle made so far (if any); false if the simulation stopped.
        let flush = |out: &mut Vec<Batch>| out.is_empty() || send(&full_tx, Ok(std::mem::take(out)), poll).is_ok();
        let more = loop {
            let b = empty_rx.try_recv().unwrap_or_else(|_| Batch::new());
            match read_next(reader, &mut counts, &spec, b, for_other_core) {
                Next::Batch(b, cut) => {
                    out.push(b);
                    if cut {
                        break true;
                    }
                    if out.len() == bundle {
                        if !flush(&mut out) {
                            return false; // the simulation stopped
                        }
                        out.reserve(bundle);
                        sent += bundle;
                        if sent % PROBE_EVERY == PROBE_AFTER {
                            if let Some(p) = &asks {
                                for_other_core = p.ask(PROBE_FIRST).is_some_and(|ns| ns > FAR_NS);
                            }
                        }
                    }
                }
                Next::End(more) => break more,
                Next::Failed(e) => {
                    if flush(&mut out) {
                        let _ = full_tx.send(Err(e));
                    }
                    return false;
                }
            }
        };
        flush(&mut out);
        more
    });
    Feed(Source::Thread { batches, ready: RefCell::new(VecDeque::new()), poll, spare, probe, recycle, truncated })
}

/// A feed of `reader` read in place by [`Feed::next`], as `spec` says (its `threads` unused);
/// counts go on from `counts`. For runs with no core to spare for a reader thread: its work
/// then takes no core from a simulation thread and no batch waits on a wake-up.
pub(crate) fn inline(reader: &mut dyn TraceReader, counts: TraceCounts, spec: FeedSpec) -> Feed<'_> {
    Feed(Source::Inline(RefCell::new(Inline { reader, counts, spec, pool: Vec::new(), end: None })))
}

impl Inline<'_> {
    /// The next batch, as the reader thread of [`spawn`] makes it.
    fn next(&mut self) -> Option<Result<Batch, TraceError>> {
        if self.end.is_some() {
            return None;
        }
        let b = self.pool.pop().unwrap_or_else(Batch::new);
        match read_next(self.reader, &mut self.counts, &self.spec, b, false) {
            Next::Batch(b, cut) => {
                if cut {
                    self.end = Some(true);
                }
                Some(Ok(b))
            }
            Next::End(more) => {
                self.end = Some(more);
                None
            }
            Next::Failed(e) => {
                self.end = Some(false);
                Some(Err(e))
            }
        }
    }
}

/// What a feed reads next ([`read_next`]).
enum Next {
    /// A batch, and whether the reference limit cut the trace at its end.
    Batch(Batch, bool),
    /// No more batches; whether the limit cut the trace (there was more).
    End(bool),
    Failed(TraceError),
}

/// Reads the next batch of `reader` into `b` as `spec` says, counts going on in `counts`: the
/// one step of both a reader thread and an inline feed. `for_other_core` if the caller is a
/// reader thread with a core to itself (one that polls) far from the simulation's
/// ([`super::probe`]), whose words are then stored around its cache
/// ([`BatchWords::for_other_core`]).
fn read_next(
    reader: &mut dyn TraceReader,
    counts: &mut TraceCounts,
    spec: &FeedSpec,
    mut b: Batch,
    for_other_core: bool,
) -> Next {
    let FeedSpec { shift, max, all_records, .. } = *spec;
    if counts.references == max {
        // At the limit: is there more trace?
        return Next::End(matches!(reader.read_batch(&mut b.records, 1), Ok(n) if n > 0));
    }
    b.before = *counts;
    match read_counted(reader, &mut b, counts, shift, max, all_records, for_other_core) {
        Ok(None) => Next::End(false),
        Ok(Some(cut)) => {
            b.after = *counts;
            Next::Batch(b, cut)
        }
        Err(e) => Next::Failed(e),
    }
}

/// Batches the channel from a reader thread holds (at least 4 bundles) when the simulation may
/// take on its spare work. The simulation helps whenever it finds no batch ready, so the
/// channel must hold more than the reader makes while it decompresses a frame itself (a frame
/// of 1 MiB, as xlat wrote them when this was measured, took 0.5 to 1 ms; 16 was no better
/// with frames of 256 KiB): with 16, a
/// simulation that is the slower thread (the synthetic benchmark trace) ran dry then and took
/// on the next frame, and its run took 133 ms against 117 ms with 32 (medians of 9); 64 was no
/// better on either benchmark trace.
const SPARE_DEPTH: usize = 32;

/// Batches a reader sends at once to a simulation that does not poll (more threads than cores):
/// each handoff that finds the other thread asleep costs a wake-up and two context switches,
/// so they are made once per bundle, not once per batch.
pub(crate) const BUNDLE: usize = 8;

/// How long the reader and the simulation each wait for the other by polling before they
/// sleep. Each batch passes from one thread to the other, and a thread that sleeps must be
/// woken by the other with a system call, which costs the waker more than a short poll costs
/// the waiter: with sleeping alone, the reader of the synthetic benchmark trace (whose
/// simulation is the slower thread) slept on most batches and the wake-ups fell on the
/// simulation thread, about 8% of its run (docs/performance.md). The poll is bounded, so a
/// thread whose partner is much slower still sleeps most of the wait, and between polls the
/// thread yields its core, so that a machine running more threads than it has cores gives the
/// core to another (a busy spin instead made three runs at once on two cores take twice as
/// long).
const POLL: Duration = Duration::from_micros(200);

/// Whether a pipeline of `threads` busy threads polls before sleeping: only with a core for
/// each.
pub(crate) fn polls_with(threads: usize) -> bool {
    threads <= cores()
}

/// The cores this process may use (1 if unknown).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Calls `attempt` until it gives a value, for up to [`POLL`] (yielding the core between
/// calls); `None` if it never did.
fn poll<R>(mut attempt: impl FnMut() -> Option<R>) -> Option<R> {
    let mut start = None;
    loop {
        if let Some(r) = attempt() {
            return Some(r);
        }
        // The clock only once the first attempt failed (most batches pass at once).
        if start.get_or_insert_with(Instant::now).elapsed() > POLL {
            return None;
        }
        std::thread::yield_now();
    }
}

/// Sends `msg` on `tx`, polling (if `polls`) while the channel is full before waiting asleep.
/// Fails if the receiver is gone.
fn send<T>(tx: &SyncSender<T>, msg: T, polls: bool) -> Result<(), ()> {
    let mut msg = Some(msg);
    let mut attempt = || match tx.try_send(msg.take()?) {
        Ok(()) => Some(Ok(())),
        Err(TrySendError::Disconnected(_)) => Some(Err(())),
        Err(TrySendError::Full(m)) => {
            msg = Some(m);
            None
        }
    };
    if let Some(r) = if polls { poll(&mut attempt) } else { attempt() } {
        return r;
    }
    tx.send(msg.expect("a full channel gives the message back")).map_err(|_| ())
}

impl Feed<'_> {
    /// The next batch, or `None` once the reader has sent its last: polling (if the feed
    /// polls) while none is ready, then waiting asleep.
    pub(crate) fn next(&self) -> Option<Result<Batch, TraceError>> {
        let (batches, ready, poll, spare, probe) = match &self.0 {
            Source::Thread { batches, ready, poll, spare, probe, .. } => (batches, ready, *poll, spare, probe),
            Source::Inline(i) => return i.borrow_mut().next(),
        };
        serve(probe);
        let mut ready = ready.borrow_mut();
        if let Some(b) = ready.pop_front() {
            return Some(Ok(fetched(b, poll)));
        }
        let attempt = || match batches.try_recv() {
            Ok(b) => Some(Some(b)),
            Err(TryRecvError::Disconnected) => Some(None),
            Err(TryRecvError::Empty) => {
                // The reader may be probing rather than reading.
                serve(probe);
                None
            }
        };
        // While no batch is ready, the reader's spare work (decompressing the input ahead),
        // then polling (if it polls) and sleeping.
        let work = || {
            let got = attempt();
            if got.is_some() {
                return got;
            }
            while spare.as_ref().is_some_and(|s| s.help()) {
                if let Some(r) = attempt() {
                    return Some(r);
                }
            }
            None
        };
        let got = if poll { self::poll(work) } else { work() };
        let bundle = match got {
            Some(r) => r,
            None => batches.recv().ok(),
        }?;
        match bundle {
            Ok(bundle) => {
                ready.extend(bundle);
                ready.pop_front().map(|b| Ok(fetched(b, poll)))
            }
            Err(e) => Some(Err(e)),
        }
    }

    /// Whether the feed polls (see [`POLL`]): a reader thread, and a core for each of the
    /// run's threads.
    pub(crate) fn polls(&self) -> bool {
        matches!(self.0, Source::Thread { poll: true, .. })
    }

    /// Gives a used batch back to be refilled.
    pub(crate) fn recycle(&self, b: Batch) {
        match &self.0 {
            Source::Thread { recycle, .. } => {
                let _ = recycle.send(b);
            }
            Source::Inline(i) => i.borrow_mut().pool.push(b),
        }
    }

    /// Ends the feed (the reader thread's, if any): whether the reference limit cut the trace.
    pub(crate) fn finish(self) -> bool {
        match self.0 {
            Source::Thread { truncated, batches, .. } => {
                // A reader still sending (the simulation stopped early) stops at its next send.
                drop(batches);
                truncated.join().unwrap_or(false)
            }
            Source::Inline(i) => i.into_inner().end.unwrap_or(false),
        }
    }
}

/// Batches a polling reader sends before it probes how far apart its core and the
/// simulation's are ([`super::probe`]): by then the two threads run on cores of their own.
const PROBE_AFTER: usize = 16;

/// Batches between a polling reader's probes after the first: a VM's placement of its vCPUs
/// can change during a long run (about 17 M references, 70 ms of the real benchmark trace's run
/// on the Xeon VM, between probes).
const PROBE_EVERY: usize = 4096;

/// How long the probing reader waits for the simulation's first answer: the simulation
/// answers between batches.
const PROBE_FIRST: Duration = Duration::from_millis(20);

/// Answers the reader's probe, if it has one under way ([`Probe::serve`]).
#[inline]
fn serve(probe: &Option<Arc<Probe>>) {
    if let Some(p) = probe {
        p.serve();
    }
}

/// `b`, its page words asked for from the reader's core or from memory at once (`polls`: a
/// reader thread with a core to itself), so that the simulation does not wait for them line by
/// line: its loop reads them in order, but the lines come from another core's cache or, stored
/// around it, from memory. On the Xeon VM, the real benchmark trace's run took 0.0725 s so
/// against 0.0755 s with plain stores, and 0.0765 against 0.0936 s with the words stored
/// around the cache (medians of 16 alternated runs, docs/performance.md).
#[inline]
fn fetched(b: Batch, polls: bool) -> Batch {
    #[cfg(target_arch = "x86_64")]
    if polls {
        for line in b.words().chunks(8) {
            // SAFETY: SSE, which every x86-64 processor has; a prefetch reads nothing.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(line.as_ptr() as *const i8)
            };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = polls;
    b
}

/// Reads up to [`BATCH`] records into `b` and adds them to `c` (lookups at `shift`), stopping
/// at `max` references; every record, or (unless `all_records`) perhaps only those whose word is
/// [`SLOW_WORD`]. Returns whether the limit cut the batch, or `None` at the end of the trace.
fn read_counted(
    reader: &mut dyn TraceReader,
    b: &mut Batch,
    c: &mut TraceCounts,
    shift: u32,
    max: u64,
    all_records: bool,
    for_other_core: bool,
) -> Result<Option<bool>, TraceError> {
    if max == u64::MAX {
        // Without a limit, the whole batch, counted as it is decoded.
        let w = BatchWords { words: &mut b.words, shift, counts: c, all_records, for_other_core };
        b.n = reader.read_batch_words(&mut b.records, BATCH, w)?;
        b.all_records = all_records;
        return Ok((b.n > 0).then_some(false));
    }
    b.all_records = true;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::gen::{GenSpec, Generator, Pattern};

    /// Every batch's counts and page words, and whether the limit cut the trace.
    fn drain(feed: Feed<'_>) -> (Vec<(TraceCounts, TraceCounts, Vec<u64>)>, bool) {
        let mut seen = Vec::new();
        while let Some(b) = feed.next() {
            let b = b.expect("a generated trace reads");
            seen.push((b.before, b.after, b.words().to_vec()));
            feed.recycle(b);
        }
        (seen, feed.finish())
    }

    #[test]
    fn an_inline_feed_gives_what_a_reader_thread_gives() {
        // Uniform 6-byte accesses over 3 pages: some span two pages (slow words). The limits:
        // none, inside a batch, at a batch's end, past the trace's end.
        let refs = 10 * BATCH as u64 + 123;
        let spec =
            GenSpec { pattern: Pattern::Uniform, refs, footprint: 3 << 12, access_size: 6, ..GenSpec::default() };
        for max in [u64::MAX, 5 * BATCH as u64 + 17, 4 * BATCH as u64, refs, refs + 1] {
            for all_records in [false, true] {
                let feed_spec = |threads| FeedSpec { shift: 12, max, threads, all_records };
                let (mut a, mut b) = (Generator::new(spec).unwrap(), Generator::new(spec).unwrap());
                let inline = drain(inline(&mut a, TraceCounts::default(), feed_spec(2)));
                // One thread for the whole run: the reader thread does not poll and bundles.
                let thread = std::thread::scope(|scope| {
                    drain(spawn(scope, &mut b, TraceCounts::default(), feed_spec(usize::MAX)))
                });
                assert_eq!(inline.1, max < refs, "max {max}: cut");
                assert_eq!(inline, thread, "max {max}, all records {all_records}");
                assert!(inline.0.len() > 3);
            }
        }
    }

    #[test]
    fn a_polling_reader_that_probes_gives_what_an_inline_feed_gives() {
        // A reader with a core to itself (one thread in all: it polls) probes the cores after
        // `PROBE_AFTER` batches, and the simulation's side answers between batches; whatever
        // the probe finds (or if it gives up), the batches are the same.
        let refs = 3 * PROBE_AFTER as u64 * BATCH as u64 + 77;
        let spec =
            GenSpec { pattern: Pattern::Uniform, refs, footprint: 5 << 12, access_size: 6, ..GenSpec::default() };
        let feed_spec = || FeedSpec { shift: 12, max: u64::MAX, threads: 1, all_records: false };
        let (mut a, mut b) = (Generator::new(spec).unwrap(), Generator::new(spec).unwrap());
        let inline = drain(inline(&mut a, TraceCounts::default(), feed_spec()));
        let thread = std::thread::scope(|scope| {
            let feed = spawn(scope, &mut b, TraceCounts::default(), feed_spec());
            assert!(feed.polls());
            drain(feed)
        });
        assert_eq!(inline.0.len(), 3 * PROBE_AFTER + 1);
        assert_eq!(inline, thread);
    }
}
