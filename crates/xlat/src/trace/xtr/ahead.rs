//! The blocks of an xtr stream, decoded by whichever thread is free.
//!
//! Each block record of an xtr stream ([`tag::BLOCK`](super::tag::BLOCK)) starts from a stream's initial
//! state, so it can be decoded without the records before it. A reader that was asked for its
//! [`SpareWork`] (a run's reader thread) queues the next few blocks as [`Job`]s of raw bytes; a
//! thread that would otherwise wait for the reader (the simulation, when it is ahead, or an idle
//! `--jobs` worker) decodes the next waiting one into a batch's records, page words and counts,
//! and the reader hands the batches out in trace order, decoding those nobody took itself. On a
//! real program's trace, where decoding is most of the reader's work and the simulation has time
//! to spare, the decoding is so shared between the cores. Memory stays bounded: at most
//! [`AHEAD`] blocks wait.

use super::decode::{decode_block, decode_blocks, BlockIn, Params};
use crate::trace::spare::{help_once, SpareWork};
use crate::trace::{Record, Tally};
use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};

/// Blocks queued ahead of the batch the reader hands out next.
pub(super) const AHEAD: usize = 8;

/// What a block decodes into: a batch's records (all of them, or those whose word is
/// [`SLOW_WORD`](crate::trace::SLOW_WORD)), their page words, and their counts.
pub(super) struct Decoded {
    pub(super) records: Vec<Record>,
    pub(super) words: Vec<u64>,
    pub(super) tally: Tally,
}

/// A queued block.
pub(super) struct Job {
    /// Its place in the queue's order.
    seq: u64,
    /// The block's records, followed by [`MARGIN`](super::MARGIN) zero bytes (empty while a
    /// helper decodes it).
    pub(super) raw: Vec<u8>,
    /// Bytes of records in `raw`, and how many records they are.
    pub(super) bytes: usize,
    pub(super) records: usize,
    /// Stream offset of the block's first record.
    pub(super) offset: u64,
    pub(super) params: Params,
    pub(super) state: JobState,
}

pub(super) enum JobState {
    Waiting,
    /// A helper is decoding it.
    Taken,
    /// Decoded, or what is wrong and its offset in the stream.
    Done(Result<Decoded, (String, u64)>),
}

/// The queue, shared by the reader and its helpers.
#[derive(Default)]
pub(super) struct Ahead {
    state: Mutex<Queue>,
}

#[derive(Default)]
pub(super) struct Queue {
    pub(super) jobs: VecDeque<Job>,
    next_seq: u64,
    /// Buffers to reuse: raw blocks, and record and word vectors.
    raws: Vec<Vec<u8>>,
    outs: Vec<(Vec<Record>, Vec<u64>)>,
}

impl Queue {
    /// Queues a block at the end.
    pub(super) fn push(&mut self, raw: Vec<u8>, bytes: usize, records: usize, offset: u64, params: Params) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.jobs.push_back(Job { seq, raw, bytes, records, offset, params, state: JobState::Waiting });
    }

    /// A buffer for a raw block.
    pub(super) fn raw_buffer(&mut self) -> Vec<u8> {
        self.raws.pop().unwrap_or_default()
    }

    /// Puts the result of the taken job `seq` in its place, with its raw buffer back.
    fn done(&mut self, seq: u64, raw: Vec<u8>, result: Result<Decoded, (String, u64)>) {
        let job = self.jobs.iter_mut().find(|j| j.seq == seq).expect("a taken job stays queued until it is done");
        job.raw = raw;
        job.state = JobState::Done(result);
    }

    /// Gives back a job's raw buffer and a batch's vectors.
    pub(super) fn recycle(&mut self, raw: Vec<u8>, out: (Vec<Record>, Vec<u64>)) {
        self.raws.push(raw);
        self.outs.push(out);
    }
}

/// A job taken to be decoded outside the lock.
pub(super) struct Taken {
    seq: u64,
    raw: Vec<u8>,
    bytes: usize,
    records: usize,
    offset: u64,
    params: Params,
    out: (Vec<Record>, Vec<u64>),
}

impl Ahead {
    pub(super) fn lock(&self) -> MutexGuard<'_, Queue> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the first waiting job of `q`, if any.
    pub(super) fn take(q: &mut Queue) -> Option<Taken> {
        let job = q.jobs.iter_mut().find(|j| matches!(j.state, JobState::Waiting))?;
        job.state = JobState::Taken;
        let (seq, bytes, records, offset, params) = (job.seq, job.bytes, job.records, job.offset, job.params);
        let raw = std::mem::take(&mut job.raw);
        let out = q.outs.pop().unwrap_or_default();
        Some(Taken { seq, raw, bytes, records, offset, params, out })
    }

    /// Decodes a taken job (without the lock) and puts the result in its place; `for_others`
    /// if its batch goes to threads on other cores (a reader with a core to itself,
    /// [`BatchWords::for_other_core`](crate::trace::BatchWords::for_other_core)), whose words
    /// [`decode_block`] then
    /// stores around this thread's cache.
    pub(super) fn finish(&self, t: Taken, for_others: bool) {
        let Taken { seq, raw, bytes, records, offset, params, out: (mut recs, mut words) } = t;
        let result = if for_others {
            decode_block::<true>(&raw, bytes, records, params, &mut recs, &mut words)
        } else {
            decode_block::<false>(&raw, bytes, records, params, &mut recs, &mut words)
        };
        self.lock().done(seq, raw, decoded(result, recs, words, offset));
    }

    /// The first job nobody has taken and, if one is waiting too, the next: the reader, which
    /// decodes the blocks nobody took, and a helper decode two at a time when they can
    /// ([`Ahead::finish_taken`]).
    pub(super) fn take_two(q: &mut Queue) -> Option<(Taken, Option<Taken>)> {
        Ahead::take(q).map(|t| (t, Ahead::take(q)))
    }

    /// Decodes what [`Ahead::take_two`] took (without the lock): two jobs together, or one.
    pub(super) fn finish_taken(&self, (t, u): (Taken, Option<Taken>), for_others: bool) {
        match u {
            Some(u) => self.finish_two(t, u, for_others),
            None => self.finish(t, for_others),
        }
    }

    /// [`Ahead::finish`] of two taken jobs, decoded together ([`decode_blocks`]).
    fn finish_two(&self, a: Taken, b: Taken, for_others: bool) {
        if a.params != b.params {
            self.finish(a, for_others);
            self.finish(b, for_others);
            return;
        }
        let Taken { seq: sa, raw: ra, bytes: ba, records: na, offset: oa, params, out: (mut ra_recs, mut ra_words) } =
            a;
        let Taken { seq: sb, raw: rb, bytes: bb, records: nb, offset: ob, out: (mut rb_recs, mut rb_words), .. } = b;
        let ina = BlockIn { raw: &ra, bytes: ba, records: na, recs: &mut ra_recs, words: &mut ra_words };
        let inb = BlockIn { raw: &rb, bytes: bb, records: nb, recs: &mut rb_recs, words: &mut rb_words };
        let [resa, resb] =
            if for_others { decode_blocks::<true>(ina, inb, params) } else { decode_blocks::<false>(ina, inb, params) };
        let (da, db) = (decoded(resa, ra_recs, ra_words, oa), decoded(resb, rb_recs, rb_words, ob));
        let mut q = self.lock();
        q.done(sa, ra, da);
        q.done(sb, rb, db);
    }
}

/// A block's decoding as a job's result: its batch, or what is wrong and where in the stream
/// (the block's records start at `offset`).
fn decoded(
    result: Result<Tally, (String, usize)>,
    records: Vec<Record>,
    words: Vec<u64>,
    offset: u64,
) -> Result<Decoded, (String, u64)> {
    result.map(|tally| Decoded { records, words, tally }).map_err(|(m, at)| (m, offset + at as u64))
}

impl SpareWork for Ahead {
    /// Decodes the first block nobody has taken, if one is queued, and the next with it in
    /// turns if two are ([`Ahead::take_two`]).
    fn help(&self) -> bool {
        // The helper is, in a run, a thread that reads the batch: the words stay in its cache.
        help_once(&self.state, Ahead::take_two, |taken| self.finish_taken(taken, false))
    }
}
