//! The plugin's record stream (decoding) and the per-process scheduler that turns the records
//! of several processes into one trace (both documented in `docs/tracing.md`).
//!
//! The stream is a sequence of chunks, each written by one thread of one process in one `write`
//! of at most 4096 bytes: a 12-byte header (`magic:u16 = 0x5851`, `payload_len:u16`, `pid:u32`,
//! `tid:u32`, all little-endian) and then whole records:
//!
//! | tag | payload | meaning |
//! |-----|---------|---------|
//! | `0x01` | `n:u8 vaddr:u64 size:u8 × n` | `n` instruction fetches, contiguous from `vaddr` |
//! | `0x02` | `start:u64 len:u64 flags:u32` | map |
//! | `0x03` | `start:u64 len:u64` | unmap |
//! | `0x04` | `child:u32` | fork of process `child` (a pid) |
//! | `0x05` | | exit |
//! | `0x06` | `parent:u32` | first record of a forked process |
//! | `0x07` | | first record of a new program image of the process (`execve`) |
//! | `0x08` | `n:u8 path[n]` | the process calls `execve` on `path` (empty if unreadable) |
//! | `0x09` | | that `execve` failed |
//! | `0x0b` | `dev:u64 ino:u64 offset:u64 n:u8 path[n]` | the next map maps this object (a file, or shared anonymous memory with device 0) from `offset` |
//! | `0x0c` | `end:u64 bytes:u32` | the process sends `bytes` to channel end `end` (`writev`, `sendmsg`: 0) |
//! | `0x0d` | `end:u64` | the process receives from channel end `end` |
//! | `0x0e` | `nr:u32 fd:u8 dev:u64 ino:u64 buf:u64 len:u64` | a system call; `fd` is the descriptor's kind and the data's direction (`trace::fd_kind`), `dev`/`ino` its object, `buf`/`len` the buffer (0 if none) |
//! | `0x0f` | `start:u64 len:u64 rights:u32` | `mprotect` to `rights` (read 1, write 2, exec 4) |
//! | `0x10` | `start:u64 len:u64 lazy:u8` | `madvise` that drops the range's pages (`lazy`: `MADV_FREE`) |
//! | `0x0a` | | a scheduling point: the process yields or may block (`sched_yield`, a read from a pipe or socket, a wait, a sleep, a poll, a futex wait) |
//! | `0x80`–`0xff` | `delta:i32` or `addr:u64` | data access |
//!
//! A data access tag is `0x80 | store 0x40 | modify 0x20 | short 0x10 | log2(size)`; with the
//! short bit the address is the previous data address of the chunk plus a signed 32-bit delta
//! (the previous address is 0 at the start of each chunk), otherwise it follows in full.

use std::collections::HashMap;

use crate::trace::{Kind, Record, TraceError};

/// Bytes of a chunk header.
pub const HEADER: usize = 12;
/// Chunk magic (`"QX"`).
pub const MAGIC: u16 = 0x5851;
/// Largest chunk, header included.
pub const CHUNK: usize = 4096;

const R_IFETCH: u8 = 0x01;
const R_MAP: u8 = 0x02;
const R_UNMAP: u8 = 0x03;
const R_FORK: u8 = 0x04;
const R_EXIT: u8 = 0x05;
const R_START: u8 = 0x06;
const R_EXEC: u8 = 0x07;
const R_EXEC_CALL: u8 = 0x08;
const R_EXEC_FAIL: u8 = 0x09;
const R_YIELD: u8 = 0x0a;
const R_OBJECT: u8 = 0x0b;
const R_PIPE_SEND: u8 = 0x0c;
const R_PIPE_RECV: u8 = 0x0d;
const R_SYSCALL: u8 = 0x0e;
const R_PROTECT: u8 = 0x0f;
const R_DISCARD: u8 = 0x10;
const D_STORE: u8 = 0x40;
const D_MODIFY: u8 = 0x20;
const D_SHORT: u8 = 0x10;

/// Default scheduling quantum, in references.
pub const DEFAULT_QUANTUM: u64 = 10_000;

/// Records buffered for processes other than the running one beyond which the running process
/// is considered blocked and the scheduler moves on (bounds memory).
const BACKLOG: usize = 1 << 22;

/// One traced process.
#[derive(Debug, Default)]
struct Proc {
    pid: u32,
    /// Records not yet scheduled are `queue[head..]`.
    queue: Vec<Record>,
    head: usize,
    /// Accesses in `queue`.
    refs: u64,
    /// Created by a fork whose `Fork` record has not been emitted yet: not runnable.
    waiting_for_fork: bool,
    /// No more records will come (its exit was read, or the stream ended).
    finished: bool,
    /// An `Exit` record is queued or was emitted.
    exit_seen: bool,
    /// Its `Exit` record was emitted.
    exit_emitted: bool,
    /// The image this one replaced (`execve`): it runs only once that one's exit was emitted.
    prev: Option<u32>,
    /// The thread whose records were queued last (a `Thread` record marks each change).
    thread: Option<u32>,
    /// Records ever queued and ever emitted (positions in the process's record sequence).
    pushed: u64,
    taken: u64,
    /// Scheduling points: positions (in `pushed` numbering) after which the process yields.
    yields: std::collections::VecDeque<u64>,
}

/// Counts of what the demultiplexer saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DemuxStats {
    /// Accesses.
    pub references: u64,
    /// Events (map, unmap, fork, exit, context switches, attribution).
    pub events: u64,
    /// Processes seen.
    pub processes: u32,
    /// Context switches emitted.
    pub context_switches: u64,
    /// Accesses by kind (ifetch, load, store, modify).
    pub by_kind: [u64; 4],
    /// Scheduling points (yields and calls that may block) read.
    pub yields: u64,
    /// Context switches made at scheduling points.
    pub yield_switches: u64,
    /// Chunks decoded.
    pub chunks: u64,
    /// Stream bytes decoded.
    pub bytes: u64,
}

/// Demultiplexes records by process and interleaves processes by a quantum of references.
///
/// Records are pushed per pid (in each process's program order); [`Demux::schedule`] moves
/// them to the output in scheduled order: the running process runs until it has issued
/// `quantum` references, then the next process (in ASID order, round robin) that has records
/// runs, after a `ContextSwitch` record. A running process with no buffered records keeps the
/// processor while the others have fewer than a quantum buffered (it is probably about to
/// produce more), unless the stream ended or it finished. A forked process runs only after its
/// parent's `Fork` record. The first process is announced by a `Process` record.
#[derive(Debug)]
pub struct Demux {
    procs: Vec<Proc>,
    /// Programs that processes (by pid) called `execve` on, not yet known to have failed or to
    /// be traced as a new image.
    pending_exec: HashMap<u32, String>,
    /// Programs exec'd and not traced (`PID PATH`), in order.
    untraced_execs: Vec<String>,
    by_pid: HashMap<u32, u32>,
    /// The process that last received from each channel end (a pipe's inode, a socket's own
    /// inode or address): where a message sent to that end goes.
    pipe_readers: HashMap<u64, u32>,
    /// Mapped objects by (device, inode), numbered from 1 in order of first appearance.
    objects: HashMap<(u64, u64), u32>,
    object_infos: Vec<crate::trace::ObjectInfo>,
    current: Option<u32>,
    used: u64,
    quantum: u64,
    buffered: usize,
    started: bool,
    stats: DemuxStats,
}

impl Demux {
    /// A demultiplexer with this quantum (at least 1 reference).
    pub fn new(quantum: u64) -> Demux {
        Demux {
            procs: Vec::new(),
            pending_exec: HashMap::new(),
            untraced_execs: Vec::new(),
            by_pid: HashMap::new(),
            pipe_readers: HashMap::new(),
            objects: HashMap::new(),
            object_infos: Vec::new(),
            current: None,
            used: 0,
            quantum: quantum.max(1),
            buffered: 0,
            started: false,
            stats: DemuxStats::default(),
        }
    }

    /// The objects named by `Record::Object` so far.
    pub fn objects(&self) -> &[crate::trace::ObjectInfo] {
        &self.object_infos
    }

    /// The number of object (`dev`, `ino`), first seen at `path`.
    fn object(&mut self, dev: u64, ino: u64, path: &[u8]) -> u32 {
        let n = self.object_infos.len() as u32 + 1;
        let id = *self.objects.entry((dev, ino)).or_insert(n);
        let info = &mut self.object_infos;
        if id < n && path.first() != Some(&b'/') && info[id as usize - 1].path.starts_with("file:[") {
            // Seen first by a read or write; a map names its path.
        } else if id < n && info[id as usize - 1].path.starts_with("file:[") {
            info[id as usize - 1].path = String::from_utf8_lossy(path).into_owned();
        }
        if id == n {
            self.object_infos.push(crate::trace::ObjectInfo {
                id,
                dev,
                ino,
                path: String::from_utf8_lossy(path).into_owned(),
            });
        }
        id
    }

    /// What was seen so far.
    pub fn stats(&self) -> DemuxStats {
        DemuxStats { processes: self.procs.len() as u32, ..self.stats }
    }

    /// The ASID of `pid`, allocated in order of first appearance (the first is 0).
    pub fn asid(&mut self, pid: u32) -> u32 {
        if let Some(&a) = self.by_pid.get(&pid) {
            return a;
        }
        let a = self.procs.len() as u32;
        self.procs.push(Proc { pid, ..Proc::default() });
        self.by_pid.insert(pid, a);
        a
    }

    /// A new ASID for `pid`, whose process image was replaced (`execve`): the old one exits,
    /// and the new one runs only after the old one's `Exit` record.
    pub fn replace_image(&mut self, pid: u32) -> u32 {
        let old = self.by_pid.get(&pid).copied();
        if let Some(old) = old {
            if !self.procs[old as usize].exit_seen {
                self.push(old, Record::Exit { asid: old });
            }
            self.by_pid.remove(&pid);
        }
        let new = self.asid(pid);
        self.procs[new as usize].prev = old;
        new
    }

    /// The first image of the process whose current image is `asid` (the one a `Fork` names).
    fn first_image(&self, mut asid: u32) -> u32 {
        while let Some(p) = self.procs[asid as usize].prev {
            asid = p;
        }
        asid
    }

    /// Pids whose current image has not exited (no exit record was read).
    pub fn live_pids(&self) -> Vec<u32> {
        self.by_pid.iter().filter(|(_, &a)| !self.procs[a as usize].exit_seen).map(|(&pid, _)| pid).collect()
    }

    /// The pid of an ASID.
    pub fn pid(&self, asid: u32) -> Option<u32> {
        self.procs.get(asid as usize).map(|p| p.pid)
    }

    /// Appends a record of process `asid` (Exit records mark it finished).
    pub fn push(&mut self, asid: u32, r: Record) {
        self.push_many(asid, &[r]);
    }

    /// Appends records of process `asid` in order (Exit records mark it finished).
    pub fn push_many(&mut self, asid: u32, rs: &[Record]) {
        let p = &mut self.procs[asid as usize];
        for r in rs {
            match r {
                Record::Access { .. } => p.refs += 1,
                Record::Exit { .. } => {
                    p.exit_seen = true;
                    p.finished = true;
                }
                _ => {}
            }
        }
        // The records taken drop out of the queue here rather than as they are taken, which
        // would move the rest each time: a queue emptied by [`Demux::schedule`] (a process
        // running alone) is cleared there without any move.
        if p.head >= 1 << 16 && 2 * p.head >= p.queue.len() {
            p.queue.drain(..p.head);
            p.head = 0;
        }
        p.queue.extend_from_slice(rs);
        p.pushed += rs.len() as u64;
        self.buffered += rs.len();
    }

    /// [`Demux::push_many`], except that records the next [`Demux::schedule`] would emit first
    /// go to `out` at once, without passing through the queue: those of the running process
    /// when nothing of it is queued, no scheduling point of it is pending, the records hold no
    /// fork or exit, and either the quantum has room for all their references or no other
    /// process can run ([`Demux::alone`]: the scheduler would give this one quantum after
    /// quantum). Records go out in the same order either way, and the counts are the same.
    pub fn push_or_emit<O: Emit + ?Sized>(&mut self, asid: u32, rs: &[Record], out: &mut O) {
        if self.runs_unqueued(asid) {
            let mut by_kind = [0u64; 4];
            let mut plain = true;
            for r in rs {
                match *r {
                    Record::Access { kind, .. } => by_kind[kind as usize] += 1,
                    Record::Fork { .. } | Record::Exit { .. } => {
                        plain = false;
                        break;
                    }
                    _ => {}
                }
            }
            let refs: u64 = by_kind.iter().sum();
            let fits = self.used + refs < self.quantum;
            if plain && (fits || self.alone(asid)) {
                out.emit(rs);
                let p = &mut self.procs[asid as usize];
                p.pushed += rs.len() as u64;
                p.taken += rs.len() as u64;
                // Each quantum used up starts the next (the scheduler's `Ran::Quantum`).
                self.used = (self.used + refs) % self.quantum;
                self.stats.references += refs;
                self.stats.events += rs.len() as u64 - refs;
                for (total, k) in self.stats.by_kind.iter_mut().zip(by_kind) {
                    *total += k;
                }
                return;
            }
        }
        self.push_many(asid, rs);
    }

    /// [`Demux::yield_point`], except that a scheduling point the next [`Demux::schedule`]
    /// would pass over is not kept: one of the running process with nothing of it queued and
    /// no scheduling point of it pending, while no other process can run ([`Demux::alone`]).
    /// So a program running alone keeps sending its records straight out
    /// ([`Demux::push_or_emit`]) across its system calls.
    pub fn yield_or_pass(&mut self, asid: u32) {
        if self.runs_unqueued(asid) && self.alone(asid) {
            self.stats.yields += 1;
            return;
        }
        self.yield_point(asid);
    }

    /// True if `asid` is the running process with nothing of it queued and no scheduling point
    /// of it pending: the next [`Demux::schedule`] starts with its next records.
    fn runs_unqueued(&self, asid: u32) -> bool {
        let p = &self.procs[asid as usize];
        self.current == Some(asid) && p.head == p.queue.len() && p.yields.is_empty() && !p.waiting_for_fork
    }

    /// True if every process but `asid` has exited with nothing queued: none of them can run
    /// again, and no new one can before a fork, which would be among `asid`'s later records.
    fn alone(&self, asid: u32) -> bool {
        self.procs.iter().enumerate().all(|(a, o)| a == asid as usize || (o.finished && o.head == o.queue.len()))
    }

    /// Process `asid` reached a scheduling point after the records queued so far: it yields
    /// the processor there (or blocks), and the next process with records runs.
    pub fn yield_point(&mut self, asid: u32) {
        let p = &mut self.procs[asid as usize];
        if p.yields.back() != Some(&p.pushed) {
            p.yields.push_back(p.pushed);
        }
        self.stats.yields += 1;
    }

    /// Marks `asid` as forked: it does not run before its parent's `Fork` record.
    pub fn mark_child(&mut self, asid: u32, emitted_fork: bool) {
        self.procs[asid as usize].waiting_for_fork = !emitted_fork;
    }

    /// Programs that traced processes exec'd without being traced (`PID PATH` each): the
    /// process called `execve` on it, and its stream ended with neither a failure nor a new
    /// traced image. Complete once the stream ended ([`Demux::finish_all`]).
    pub fn untraced_execs(&self) -> &[String] {
        &self.untraced_execs
    }

    /// Marks every process finished (the stream ended); those without an exit get one.
    pub fn finish_all(&mut self) {
        let mut pending: Vec<(u32, String)> = self.pending_exec.drain().collect();
        pending.sort();
        for (pid, path) in pending {
            let path = if path.is_empty() { "a program whose path could not be read".to_string() } else { path };
            self.untraced_execs.push(format!("{pid} {path}"));
        }
        for a in 0..self.procs.len() {
            let p = &mut self.procs[a];
            p.waiting_for_fork = false;
            if !p.exit_seen {
                p.exit_seen = true;
                p.queue.push(Record::Exit { asid: a as u32 });
                self.buffered += 1;
            }
            p.finished = true;
        }
    }

    fn runnable_with_records(&self, a: usize) -> bool {
        let p = &self.procs[a];
        !p.waiting_for_fork && p.head < p.queue.len() && p.prev.map_or(true, |o| self.procs[o as usize].exit_emitted)
    }

    /// The next process after `from` (round robin) that can run and has records.
    fn next_ready(&self, from: Option<u32>, min_refs: u64) -> Option<u32> {
        let n = self.procs.len();
        let start = from.map(|c| c as usize + 1).unwrap_or(0);
        (0..n)
            .map(|k| (start + k) % n)
            .find(|&a| self.runnable_with_records(a) && (min_refs == 0 || self.procs[a].refs >= min_refs))
            .map(|a| a as u32)
    }

    fn switch<O: Emit + ?Sized>(&mut self, to: u32, out: &mut O) {
        if !self.started {
            self.started = true;
            out.emit(&[Record::Process { asid: to }]);
        } else if self.current != Some(to) {
            out.emit(&[Record::ContextSwitch { asid: to }]);
            self.stats.context_switches += 1;
        }
        self.stats.events += 1;
        self.current = Some(to);
        self.used = 0;
    }

    /// Moves records of the running process to `out` until its quantum is used, it reaches a
    /// scheduling point, or its queue is empty.
    fn run_current<O: Emit + ?Sized>(&mut self, c: u32, out: &mut O) -> Ran {
        let mut forked = Vec::new();
        let budget = self.quantum - self.used;
        let p = &mut self.procs[c as usize];
        // Records up to the next scheduling point.
        while p.yields.front().is_some_and(|&y| y < p.taken) {
            p.yields.pop_front();
        }
        let stop = p.yields.front().map(|&y| (y - p.taken) as usize);
        if stop == Some(0) {
            p.yields.pop_front();
            return Ran::Yielded;
        }
        let avail = p.queue.len() - p.head;
        let q = &p.queue[p.head..p.head + stop.map_or(avail, |s| s.min(avail))];
        let (mut refs, mut events, mut end, mut exited) = (0u64, 0u64, q.len(), false);
        let by_kind = &mut self.stats.by_kind;
        for (i, r) in q.iter().enumerate() {
            match *r {
                Record::Access { kind, .. } => {
                    by_kind[kind as usize] += 1;
                    refs += 1;
                    if refs == budget {
                        end = i + 1;
                        break;
                    }
                }
                Record::Fork { child } => {
                    forked.push(child);
                    events += 1;
                }
                Record::Exit { .. } => {
                    exited = true;
                    events += 1;
                }
                _ => events += 1,
            }
        }
        out.emit(&q[..end]);
        let yielded = stop == Some(end) && end == q.len();
        if yielded {
            p.yields.pop_front();
        }
        p.head += end;
        p.taken += end as u64;
        p.exit_emitted |= exited;
        p.refs -= refs;
        if p.head == p.queue.len() {
            p.queue.clear();
            p.head = 0;
        }
        self.buffered -= end;
        self.used += refs;
        self.stats.references += refs;
        self.stats.events += events;
        for child in forked {
            self.procs[child as usize].waiting_for_fork = false;
        }
        if self.used >= self.quantum {
            Ran::Quantum
        } else if yielded {
            Ran::Yielded
        } else {
            Ran::Drained
        }
    }

    /// Emits what can be scheduled now into `out`. With `end` (the stream ended, after
    /// [`Demux::finish_all`]) everything is emitted.
    pub fn schedule<O: Emit + ?Sized>(&mut self, out: &mut O, end: bool) {
        loop {
            let c = match self.current {
                Some(c) => c,
                None => match self.next_ready(None, 0) {
                    Some(n) => {
                        self.switch(n, out);
                        n
                    }
                    None => return,
                },
            };
            if self.procs[c as usize].waiting_for_fork {
                // Only at the start: a child seen before its parent.
                match self.next_ready(Some(c), 0) {
                    Some(n) if n != c => {
                        self.switch(n, out);
                        continue;
                    }
                    _ => return,
                }
            }
            match self.run_current(c, out) {
                Ran::Quantum => {
                    // Quantum used: the next process with records, if any other.
                    self.used = 0;
                    if let Some(n) = self.next_ready(Some(c), 0) {
                        if n != c {
                            self.switch(n, out);
                        }
                    }
                    continue;
                }
                Ran::Yielded => {
                    // A scheduling point: the next process with records runs. If no other has
                    // records yet but one is alive, wait for them (it is running on the host),
                    // unless this one is a quantum ahead (the others are probably blocked on it).
                    match self.next_ready(Some(c), 0) {
                        Some(n) if n != c => {
                            self.stats.yield_switches += 1;
                            self.switch(n, out);
                        }
                        _ => {
                            let others_alive = self
                                .procs
                                .iter()
                                .enumerate()
                                .any(|(a, p)| a != c as usize && !p.finished && !p.waiting_for_fork);
                            let p = &mut self.procs[c as usize];
                            if others_alive && !end && p.refs < self.quantum && self.buffered < BACKLOG {
                                p.yields.push_front(p.taken);
                                return;
                            }
                        }
                    }
                    continue;
                }
                Ran::Drained => {}
            }
            // The running process has no buffered records.
            let finished = self.procs[c as usize].finished;
            let others_waiting = self.buffered >= BACKLOG;
            let next = if finished || end || others_waiting {
                self.next_ready(Some(c), 0)
            } else {
                self.next_ready(Some(c), self.quantum)
            };
            match next {
                Some(n) if n != c => self.switch(n, out),
                _ => return,
            }
        }
    }
}

/// Where [`Demux::schedule`] puts the records it schedules, in order.
pub trait Emit {
    /// Appends `records`.
    fn emit(&mut self, records: &[Record]);
}

impl Emit for Vec<Record> {
    fn emit(&mut self, records: &[Record]) {
        self.extend_from_slice(records);
    }
}

/// How far the running process ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ran {
    /// It used its quantum.
    Quantum,
    /// It reached a scheduling point.
    Yielded,
    /// Its queue is empty.
    Drained,
}

/// Decodes the plugin's chunk stream into a [`Demux`].
#[derive(Debug)]
pub struct StreamDecoder {
    name: String,
    /// Bytes of the stream decoded so far (for error offsets).
    offset: u64,
    /// The records of the chunk being decoded.
    tmp: Vec<Record>,
}

impl StreamDecoder {
    /// A decoder; `name` is used in errors.
    pub fn new(name: &str) -> StreamDecoder {
        StreamDecoder { name: name.to_string(), offset: 0, tmp: Vec::with_capacity(CHUNK) }
    }

    /// Decodes the whole chunks at the start of `data` into `demux`; returns the bytes used
    /// (an incomplete chunk at the end is left for the next call).
    pub fn decode(&mut self, data: &[u8], demux: &mut Demux) -> Result<usize, TraceError> {
        self.decode_with(data, demux, None::<&mut Vec<Record>>)
    }

    /// [`StreamDecoder::decode`] that puts the records [`Demux::schedule`] would emit first
    /// straight into `out` ([`Demux::push_or_emit`]): the same records in the same order, one
    /// copy fewer. The caller then schedules into `out` as after `decode`.
    pub fn decode_into<O: Emit + ?Sized>(
        &mut self,
        data: &[u8],
        demux: &mut Demux,
        out: &mut O,
    ) -> Result<usize, TraceError> {
        self.decode_with(data, demux, Some(out))
    }

    fn decode_with<O: Emit + ?Sized>(
        &mut self,
        data: &[u8],
        demux: &mut Demux,
        mut out: Option<&mut O>,
    ) -> Result<usize, TraceError> {
        let mut pos = 0;
        while data.len() - pos >= HEADER {
            let h = &data[pos..pos + HEADER];
            let magic = u16::from_le_bytes([h[0], h[1]]);
            let len = u16::from_le_bytes([h[2], h[3]]) as usize;
            let pid = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
            let tid = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
            if magic != MAGIC || HEADER + len > CHUNK {
                return Err(TraceError::at_offset(
                    &self.name,
                    self.offset,
                    format!("bad chunk header (magic {magic:#06x}, length {len}) in the plugin stream"),
                ));
            }
            if data.len() - pos < HEADER + len {
                break;
            }
            self.chunk(pid, tid, &data[pos + HEADER..pos + HEADER + len], demux, &mut out)?;
            pos += HEADER + len;
            self.offset += (HEADER + len) as u64;
            demux.stats.chunks += 1;
            demux.stats.bytes += (HEADER + len) as u64;
        }
        Ok(pos)
    }

    fn bad(&self, at: usize, what: &str) -> TraceError {
        TraceError::at_offset(&self.name, self.offset + (HEADER + at) as u64, what)
    }

    fn chunk<O: Emit + ?Sized>(
        &mut self,
        pid: u32,
        tid: u32,
        p: &[u8],
        demux: &mut Demux,
        out: &mut Option<&mut O>,
    ) -> Result<(), TraceError> {
        let mut tmp = std::mem::take(&mut self.tmp);
        tmp.clear();
        let r = self.chunk_into(pid, tid, p, demux, &mut tmp, out);
        if r.is_ok() {
            let asid = demux.asid(pid);
            push(demux, asid, &tmp, out);
        }
        self.tmp = tmp;
        r
    }

    fn chunk_into<O: Emit + ?Sized>(
        &mut self,
        pid: u32,
        tid: u32,
        p: &[u8],
        demux: &mut Demux,
        tmp: &mut Vec<Record>,
        out: &mut Option<&mut O>,
    ) -> Result<(), TraceError> {
        let new = !demux.by_pid.contains_key(&pid);
        let mut asid = demux.asid(pid);
        // A chunk of another thread than the last one of this process: say so. (An exec below
        // starts a new image, whose first chunk names its thread again.)
        let thread_mark = |asid: u32, tmp: &mut Vec<Record>, demux: &mut Demux| {
            let p = &mut demux.procs[asid as usize];
            if p.thread != Some(tid) {
                p.thread = Some(tid);
                tmp.push(Record::Thread { tid });
            }
        };
        thread_mark(asid, tmp, demux);
        let mut last = 0u64;
        let mut i = 0;
        let u64_at = |i: usize| u64::from_le_bytes(p[i..i + 8].try_into().expect("8 bytes"));
        let u32_at = |i: usize| u32::from_le_bytes(p[i..i + 4].try_into().expect("4 bytes"));
        let trunc = "record cut by the end of its chunk in the plugin stream";
        while i < p.len() {
            let tag = p[i];
            if tag & 0x80 != 0 {
                let kind = if tag & D_MODIFY != 0 {
                    Kind::Modify
                } else if tag & D_STORE != 0 {
                    Kind::Store
                } else {
                    Kind::Load
                };
                let size = 1u32 << (tag & 7);
                let addr = if tag & D_SHORT != 0 {
                    if i + 5 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let d = u32_at(i + 1) as i32 as i64 as u64;
                    i += 5;
                    last.wrapping_add(d)
                } else {
                    if i + 9 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let a = u64_at(i + 1);
                    i += 9;
                    a
                };
                last = addr;
                tmp.push(Record::Access { kind, size, addr });
                continue;
            }
            match tag {
                R_IFETCH => {
                    if i + 10 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let n = p[i + 1] as usize;
                    let mut addr = u64_at(i + 2);
                    if i + 10 + n > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    for &s in &p[i + 10..i + 10 + n] {
                        let size = s.max(1) as u32;
                        tmp.push(Record::Access { kind: Kind::Ifetch, size, addr });
                        addr = addr.wrapping_add(size as u64);
                    }
                    i += 10 + n;
                }
                R_MAP => {
                    if i + 21 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    tmp.push(Record::Map { start: u64_at(i + 1), len: u64_at(i + 9), flags: u32_at(i + 17) });
                    i += 21;
                }
                R_UNMAP => {
                    if i + 17 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    tmp.push(Record::Unmap { start: u64_at(i + 1), len: u64_at(i + 9) });
                    i += 17;
                }
                R_PROTECT => {
                    if i + 21 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let flags = u32_at(i + 17);
                    if flags & !crate::trace::map_flags::RIGHTS != 0 {
                        return Err(
                            self.bad(i, &format!("protect record with rights {flags:#x} beyond read, write and exec"))
                        );
                    }
                    tmp.push(Record::Protect { start: u64_at(i + 1), len: u64_at(i + 9), flags });
                    i += 21;
                }
                R_DISCARD => {
                    if i + 18 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let lazy = match p[i + 17] {
                        0 => false,
                        1 => true,
                        v => return Err(self.bad(i, &format!("discard record with lazy flag {v} (0 or 1)"))),
                    };
                    tmp.push(Record::Discard { start: u64_at(i + 1), len: u64_at(i + 9), lazy });
                    i += 18;
                }
                R_FORK => {
                    if i + 5 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let child_pid = u32_at(i + 1);
                    let unseen = !demux.by_pid.contains_key(&child_pid);
                    // The forked process, even if it already replaced its image.
                    let child = demux.asid(child_pid);
                    let child = demux.first_image(child);
                    if unseen {
                        demux.mark_child(child, false);
                    }
                    tmp.push(Record::Fork { child });
                    i += 5;
                }
                R_EXIT => {
                    tmp.push(Record::Exit { asid });
                    i += 1;
                }
                R_EXEC => {
                    // The process replaced its image: what came before is the old image's. A pid
                    // first seen here (its parent was not traced) starts with this image.
                    if !(new && tmp.iter().all(|r| matches!(r, Record::Thread { .. }))) {
                        push(demux, asid, tmp, out);
                        tmp.clear();
                        asid = demux.replace_image(pid);
                        thread_mark(asid, tmp, demux);
                    }
                    demux.pending_exec.remove(&pid);
                    i += 1;
                }
                R_EXEC_CALL => {
                    let n = *p.get(i + 1).ok_or_else(|| self.bad(i, trunc))? as usize;
                    let path = p.get(i + 2..i + 2 + n).ok_or_else(|| self.bad(i, trunc))?;
                    demux.pending_exec.insert(pid, String::from_utf8_lossy(path).into_owned());
                    i += 2 + n;
                }
                R_EXEC_FAIL => {
                    demux.pending_exec.remove(&pid);
                    i += 1;
                }
                R_OBJECT => {
                    if i + 26 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let n = p[i + 25] as usize;
                    let path = p.get(i + 26..i + 26 + n).ok_or_else(|| self.bad(i, trunc))?;
                    let id = demux.object(u64_at(i + 1), u64_at(i + 9), path);
                    tmp.push(Record::Object { id, offset: u64_at(i + 17) });
                    i += 26 + n;
                }
                R_PIPE_SEND => {
                    if i + 13 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    // A message to the process that receives from that end, once one has.
                    if let Some(&to) = demux.pipe_readers.get(&u64_at(i + 1)) {
                        if to != asid {
                            tmp.push(Record::Ipc { to });
                        }
                    }
                    i += 13;
                }
                R_PIPE_RECV => {
                    if i + 9 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    demux.pipe_readers.insert(u64_at(i + 1), asid);
                    i += 9;
                }
                R_SYSCALL => {
                    if i + 38 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    let fd = p[i + 5];
                    let (dev, ino) = (u64_at(i + 6), u64_at(i + 14));
                    let object = match fd & crate::trace::fd_kind::KIND_MASK {
                        0 => 0,
                        k => {
                            let what = ["", "file", "pipe", "socket"][k.min(3) as usize];
                            demux.object(dev, ino, format!("{what}:[{ino}]").as_bytes())
                        }
                    };
                    tmp.push(Record::Syscall {
                        nr: u32_at(i + 1).min(u16::MAX as u32) as u16,
                        fd,
                        object,
                        buf: u64_at(i + 22),
                        len: u64_at(i + 30),
                    });
                    i += 38;
                }
                R_YIELD => {
                    // Records of this chunk decoded so far go first.
                    push(demux, asid, tmp, out);
                    tmp.clear();
                    // With an output, a point the scheduler would pass over is not kept.
                    match out {
                        Some(_) => demux.yield_or_pass(asid),
                        None => demux.yield_point(asid),
                    }
                    i += 1;
                }
                R_START => {
                    if i + 5 > p.len() {
                        return Err(self.bad(i, trunc));
                    }
                    // A child whose first chunk comes before its parent's Fork record waits
                    // for it; one created by that record already waits or was released.
                    if new {
                        demux.mark_child(asid, false);
                    }
                    i += 5;
                }
                _ => return Err(self.bad(i, &format!("unknown record tag {tag:#04x} in the plugin stream"))),
            }
        }
        Ok(())
    }
}

/// The records of process `asid` decoded so far, to `demux` ([`Demux::push_or_emit`] if the
/// decoder has an output).
fn push<O: Emit + ?Sized>(demux: &mut Demux, asid: u32, rs: &[Record], out: &mut Option<&mut O>) {
    match out {
        Some(out) => demux.push_or_emit(asid, rs, &mut **out),
        None => demux.push_many(asid, rs),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A chunk of `pid`'s main thread holding `payload`.
    fn chunk(pid: u32, payload: &[u8]) -> Vec<u8> {
        thread_chunk(pid, pid, payload)
    }

    /// A chunk of thread `tid` of `pid` holding `payload`.
    fn thread_chunk(pid: u32, tid: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&MAGIC.to_le_bytes());
        v.extend_from_slice(&(payload.len() as u16).to_le_bytes());
        v.extend_from_slice(&pid.to_le_bytes());
        v.extend_from_slice(&tid.to_le_bytes());
        v.extend_from_slice(payload);
        v
    }

    /// `n` 8-byte loads from `base` (the first in full, then short deltas of +8).
    fn loads(base: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0x80 | 3];
        v.extend_from_slice(&base.to_le_bytes());
        for _ in 1..n {
            v.push(0x80 | D_SHORT | 3);
            v.extend_from_slice(&8i32.to_le_bytes());
        }
        v
    }

    fn decode_all(stream: &[u8], quantum: u64) -> (Vec<Record>, Demux) {
        let mut d = Demux::new(quantum);
        let mut dec = StreamDecoder::new("test");
        let mut out = Vec::new();
        let used = dec.decode(stream, &mut d).unwrap();
        assert_eq!(used, stream.len());
        d.schedule(&mut out, false);
        d.finish_all();
        d.schedule(&mut out, true);
        // Each image's first chunk names its thread; the tests of threads look at these below.
        out.retain(|r| !matches!(r, Record::Thread { .. }));
        (out, d)
    }

    /// Two processes pushed in pieces while the scheduler takes part of their queues each time
    /// (a scheduling point leaves the first's queue part-taken past 64 Ki records, so that it is
    /// compacted as it grows): each process's accesses come out whole and in order, none lost
    /// or repeated.
    #[test]
    fn queues_compacted_as_they_grow_keep_every_record_in_order() {
        let mut d = Demux::new(10_000);
        let (a, b) = (d.asid(100), d.asid(200));
        let access = |base: u64, i: u64| Record::Access { kind: Kind::Load, size: 8, addr: base + 8 * i };
        let mut out = Vec::new();
        let (mut na, mut nb) = (0u64, 0u64);
        let mut compacted = 0;
        for round in 0..12u64 {
            // Up to a scheduling point, then fewer than a quantum after it: the scheduler stops
            // there (the other process being alive) and leaves those queued.
            let (pa, tail, pb) = (90_000 + 7_001 * (round % 3), 3_000 + 1_001 * (round % 4), 2_000 + 3 * round);
            let ra: Vec<Record> = (na..na + pa).map(|i| access(0x1000_0000, i)).collect();
            let before = d.procs[a as usize].head;
            d.push_many(a, &ra);
            compacted += (before > 0 && d.procs[a as usize].head == 0) as u32;
            d.yield_point(a);
            let ra: Vec<Record> = (na + pa..na + pa + tail).map(|i| access(0x1000_0000, i)).collect();
            d.push_many(a, &ra);
            let rb: Vec<Record> = (nb..nb + pb).map(|i| access(0x2000_0000, i)).collect();
            d.push_many(b, &rb);
            (na, nb) = (na + pa + tail, nb + pb);
            d.schedule(&mut out, false);
        }
        assert!(compacted >= 5, "compacted {compacted} times");
        d.finish_all();
        d.schedule(&mut out, true);
        let mut now = None;
        let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
        for r in &out {
            match *r {
                Record::Process { asid } | Record::ContextSwitch { asid } => now = Some(asid),
                Record::Access { addr, .. } if now == Some(a) => got_a.push(addr),
                Record::Access { addr, .. } if now == Some(b) => got_b.push(addr),
                Record::Access { .. } => panic!("an access before any process"),
                _ => {}
            }
        }
        assert_eq!(got_a, (0..na).map(|i| 0x1000_0000 + 8 * i).collect::<Vec<_>>());
        assert_eq!(got_b, (0..nb).map(|i| 0x2000_0000 + 8 * i).collect::<Vec<_>>());
    }

    /// A stream of three processes taking turns in chunks of random length: pid 10 forks 11,
    /// which forks 12 and later execs; all of them map, run threads, yield now and then and
    /// exit. Chunks of a process come in its program order, each child's after its fork.
    fn busy_stream(seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut rand = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        // Chunks left to write per process; a process is started (its fork written) or not.
        let (mut left, mut started) = ([40u32, 30, 20], [true, false, false]);
        let (mut forked, mut exec) = ([false; 2], false);
        let mut stream = Vec::new();
        let mut base = 0x10_0000u64;
        while left.iter().any(|&l| l > 0) {
            let k = rand(3) as usize;
            if left[k] == 0 || !started[k] {
                continue;
            }
            let pid = 10 + k as u32;
            let mut c = Vec::new();
            if k > 0 && left[k] == [40, 30, 20][k] {
                c.push(R_START);
                c.extend_from_slice(&(pid - 1).to_le_bytes());
            }
            for _ in 0..1 + rand(4) {
                match rand(10) {
                    0 if k < 2 && !forked[k] => {
                        forked[k] = true;
                        started[k + 1] = true;
                        c.push(R_FORK);
                        c.extend_from_slice(&(pid + 1).to_le_bytes());
                    }
                    1 => c.push(R_YIELD),
                    2 if k == 1 && !exec && left[1] < 15 => {
                        exec = true;
                        c.push(R_EXEC);
                    }
                    3 => {
                        c.push(R_MAP);
                        c.extend_from_slice(&base.to_le_bytes());
                        c.extend_from_slice(&0x1000u64.to_le_bytes());
                        c.extend_from_slice(&3u32.to_le_bytes());
                    }
                    4 => {
                        c.push(R_IFETCH);
                        c.push(3);
                        c.extend_from_slice(&base.to_le_bytes());
                        c.extend_from_slice(&[4, 2, 7]);
                    }
                    // Chunks of exactly a quantum's references (1 or 2) too.
                    _ => c.extend(loads(base, [1, 2, 1 + rand(150) as usize][rand(3) as usize])),
                }
                base += 0x1_0000;
            }
            left[k] -= 1;
            if left[k] == 0 {
                c.push(R_EXIT);
            }
            stream.extend(thread_chunk(pid, pid + rand(2) as u32 * 100, &c));
        }
        stream
    }

    /// The pump of a backend: the stream read in pieces, each decoded and scheduled (with the
    /// records the scheduler would emit first going out at once, if `direct`).
    fn pump(stream: &[u8], pieces: usize, quantum: u64, direct: bool) -> (Vec<Record>, DemuxStats, usize) {
        let (mut d, mut dec) = (Demux::new(quantum), StreamDecoder::new("test"));
        let (mut out, mut early) = (Vec::new(), 0);
        let mut have = 0;
        for end in (1..=pieces).map(|k| stream.len() * k / pieces) {
            let before = out.len();
            let used = if direct {
                dec.decode_into(&stream[have..end], &mut d, &mut out).unwrap()
            } else {
                dec.decode(&stream[have..end], &mut d).unwrap()
            };
            early += out.len() - before;
            have += used;
            d.schedule(&mut out, false);
        }
        assert_eq!(have, stream.len());
        d.finish_all();
        d.schedule(&mut out, true);
        (out, d.stats(), early)
    }

    #[test]
    fn records_emitted_while_decoding_come_out_as_the_scheduler_would_emit_them() {
        let (mut early, mut all) = (0, 0);
        for seed in 1..=12u64 {
            let stream = busy_stream(seed);
            for pieces in [1, 7, 60, 400] {
                for quantum in [1, 2, 50, 700, 1_000_000] {
                    let (queued, stats, none) = pump(&stream, pieces, quantum, false);
                    assert_eq!(none, 0);
                    let (direct, direct_stats, e) = pump(&stream, pieces, quantum, true);
                    assert!(direct == queued, "seed {seed}, {pieces} pieces, quantum {quantum}");
                    assert_eq!(direct_stats, stats, "seed {seed}, {pieces} pieces, quantum {quantum}");
                    assert_eq!(stats.processes, 4, "three processes and a new image");
                    (early, all) = (early + e, all + queued.len());
                }
            }
        }
        // Some records go out at once here (none before the first schedule, nor while others
        // can run, with a quantum of 1 or 2); a process running alone sends nearly all of them
        // so, across its scheduling points and the ends of its quanta too.
        assert!(early * 20 > all, "{early} of {all} records emitted while decoding");
        let alone: Vec<u8> =
            (0..200).flat_map(|k| chunk(10, &[loads(0x1000 * k, 100), vec![R_YIELD]].concat())).collect();
        // Quanta of 150 references: it runs on past each end of one.
        let (out, _, early) = pump(&alone, 50, 150, true);
        assert!(early * 100 > out.len() * 95, "{early} of {} records emitted while decoding", out.len());
    }

    fn decode_with_threads(stream: &[u8]) -> Vec<Record> {
        let mut d = Demux::new(1_000_000);
        let mut out = Vec::new();
        StreamDecoder::new("test").decode(stream, &mut d).unwrap();
        d.finish_all();
        d.schedule(&mut out, true);
        out
    }

    #[test]
    fn a_thread_record_marks_each_change_of_thread_within_a_process() {
        let mut stream = Vec::new();
        for (tid, base) in [(10, 0x1000), (10, 0x2000), (11, 0x3000), (10, 0x4000)] {
            stream.extend(thread_chunk(10, tid, &loads(base, 2)));
        }
        let out = decode_with_threads(&stream);
        let threads: Vec<(usize, u32)> = out
            .iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Record::Thread { tid } => Some((i, *tid)),
                _ => None,
            })
            .collect();
        // Process, Thread 10, 4 loads, Thread 11, 2 loads, Thread 10, 2 loads, Exit.
        assert_eq!(threads, vec![(1, 10), (6, 11), (9, 10)], "{out:?}");
        assert_eq!(out.iter().filter(|r| matches!(r, Record::Access { .. })).count(), 8);
    }

    #[test]
    fn an_exec_that_is_neither_followed_nor_failed_is_reported_untraced() {
        let call = |path: &str| {
            let mut v = vec![R_EXEC_CALL, path.len() as u8];
            v.extend_from_slice(path.as_bytes());
            v
        };
        // pid 10 execs /bin/true natively (its stream just ends); pid 11's exec fails; pid 12's
        // is followed (a new image announces itself).
        let mut stream = chunk(10, &[loads(0x1000, 1), call("/bin/true")].concat());
        stream.extend(chunk(11, &[call("/nonexistent"), vec![R_EXEC_FAIL], vec![R_EXIT]].concat()));
        stream.extend(chunk(12, &call("/usr/bin/qemu-x86_64")));
        stream.extend(chunk(12, &[vec![R_EXEC], loads(0x2000, 1), vec![R_EXIT]].concat()));
        let mut d = Demux::new(100);
        StreamDecoder::new("test").decode(&stream, &mut d).unwrap();
        d.finish_all();
        assert_eq!(d.untraced_execs(), &["10 /bin/true".to_string()]);
    }

    #[test]
    fn decodes_every_record_kind() {
        let mut p = vec![R_IFETCH, 3];
        p.extend_from_slice(&0x1000u64.to_le_bytes());
        p.extend_from_slice(&[2, 5, 1]);
        p.push(0x80 | D_STORE | D_SHORT | 2);
        p.extend_from_slice(&0x2000i32.to_le_bytes());
        p.push(0x80 | D_MODIFY | D_SHORT);
        p.extend_from_slice(&(-0x10i32).to_le_bytes());
        p.push(R_MAP);
        p.extend_from_slice(&0x7000u64.to_le_bytes());
        p.extend_from_slice(&0x3000u64.to_le_bytes());
        p.extend_from_slice(&3u32.to_le_bytes());
        p.push(R_UNMAP);
        p.extend_from_slice(&0x7000u64.to_le_bytes());
        p.extend_from_slice(&0x1000u64.to_le_bytes());
        p.push(R_EXIT);
        let (out, d) = decode_all(&chunk(42, &p), 100);
        let a = |kind, size, addr| Record::Access { kind, size, addr };
        assert_eq!(
            out,
            vec![
                Record::Process { asid: 0 },
                a(Kind::Ifetch, 2, 0x1000),
                a(Kind::Ifetch, 5, 0x1002),
                a(Kind::Ifetch, 1, 0x1007),
                a(Kind::Store, 4, 0x2000),
                a(Kind::Modify, 1, 0x1ff0),
                Record::Map { start: 0x7000, len: 0x3000, flags: 3 },
                Record::Unmap { start: 0x7000, len: 0x1000 },
                Record::Exit { asid: 0 },
            ]
        );
        assert_eq!(d.stats().by_kind, [3, 0, 1, 1]);
        assert_eq!(d.pid(0), Some(42));
    }

    #[test]
    fn a_write_to_a_pipe_someone_reads_is_a_message_to_them() {
        let recv = |ino: u64| {
            let mut v = vec![R_PIPE_RECV];
            v.extend_from_slice(&ino.to_le_bytes());
            v
        };
        let send = |ino: u64| {
            let mut v = vec![R_PIPE_SEND];
            v.extend_from_slice(&ino.to_le_bytes());
            v.extend_from_slice(&8u32.to_le_bytes());
            v
        };
        // 10 writes pipe 5 before anyone reads it (no message), 11 reads it, 10 writes again (a
        // message to 11); 11 writing pipe 5 itself is no message.
        let mut stream = chunk(10, &send(5));
        stream.extend(chunk(11, &recv(5)));
        stream.extend(chunk(10, &send(5)));
        stream.extend(chunk(11, &send(5)));
        let (out, _) = decode_all(&stream, 100);
        let ipcs: Vec<&Record> = out.iter().filter(|r| matches!(r, Record::Ipc { .. })).collect();
        assert_eq!(ipcs, vec![&Record::Ipc { to: 1 }]);
        let mut dec = StreamDecoder::new("t");
        assert!(dec.decode(&chunk(10, &send(5)[..9]), &mut Demux::new(10)).is_err(), "cut short");
    }

    #[test]
    fn objects_get_one_number_per_file_in_every_process() {
        let object = |dev: u64, ino: u64, off: u64, path: &[u8]| {
            let mut v = vec![R_OBJECT];
            for x in [dev, ino, off] {
                v.extend_from_slice(&x.to_le_bytes());
            }
            v.push(path.len() as u8);
            v.extend_from_slice(path);
            v.push(R_MAP);
            v.extend_from_slice(&0x7000u64.to_le_bytes());
            v.extend_from_slice(&0x2000u64.to_le_bytes());
            v.extend_from_slice(&(1u32 | 64).to_le_bytes());
            v
        };
        let mut stream = chunk(10, &object(3, 77, 0, b"/lib/a.so"));
        stream.extend(chunk(11, &object(3, 78, 0, b"/lib/b.so")));
        stream.extend(chunk(11, &object(3, 77, 4096, b"/lib/a.so")));
        let (out, d) = decode_all(&stream, 100);
        let objects: Vec<(u32, u64)> = out
            .iter()
            .filter_map(|r| match *r {
                Record::Object { id, offset } => Some((id, offset)),
                _ => None,
            })
            .collect();
        assert_eq!(objects, vec![(1, 0), (2, 0), (1, 4096)]);
        let names: Vec<&str> = d.objects().iter().map(|o| o.path.as_str()).collect();
        assert_eq!(names, ["/lib/a.so", "/lib/b.so"]);
        // Each Object record comes right before its Map.
        for (i, r) in out.iter().enumerate() {
            if matches!(r, Record::Object { .. }) {
                assert!(matches!(out[i + 1], Record::Map { .. }), "{out:?}");
            }
        }
        // Cut short: an error with an offset.
        let mut bad = object(3, 77, 0, b"/lib/a.so");
        bad.truncate(20);
        let mut dec = StreamDecoder::new("t");
        let e = dec.decode(&chunk(10, &bad), &mut Demux::new(10)).unwrap_err().to_string();
        assert!(e.contains("offset"), "{e}");
    }

    #[test]
    fn processes_switch_at_scheduling_points_before_their_quantum() {
        // Two forked processes that each yield after every 2 references, with a large quantum:
        // the trace switches at every yield once both have records.
        let mut start = vec![R_START];
        start.extend_from_slice(&10u32.to_le_bytes());
        let mut parent = vec![R_FORK];
        parent.extend_from_slice(&11u32.to_le_bytes());
        let mut stream = chunk(10, &parent);
        stream.extend(chunk(11, &start));
        for round in 0..3u64 {
            for pid in [10u32, 11] {
                let mut c = loads(0x1000 * (pid as u64) + round * 0x100, 2);
                c.push(R_YIELD);
                stream.extend(chunk(pid, &c));
            }
        }
        let (out, d) = decode_all(&stream, 1000);
        let switches: Vec<usize> =
            out.iter().enumerate().filter(|(_, r)| matches!(r, Record::ContextSwitch { .. })).map(|(i, _)| i).collect();
        assert_eq!(d.stats().yields, 6);
        assert!(switches.len() >= 5, "a switch at each yield: {out:?}");
        // Between two switches, one process issues the 2 references of one pass (the last
        // switches go to the exits).
        for w in switches[..6].windows(2) {
            let refs = out[w[0]..w[1]].iter().filter(|r| matches!(r, Record::Access { .. })).count();
            assert_eq!(refs, 2, "{out:?}");
        }
        // A truncated chunk after a yield is still an error with an offset, not a panic.
        let mut bad = chunk(10, &[R_YIELD, 0x80 | 3]);
        bad.truncate(bad.len());
        let mut dec = StreamDecoder::new("t");
        assert!(dec.decode(&bad, &mut Demux::new(10)).is_err());
    }

    #[test]
    fn processes_are_interleaved_by_quantum_and_children_wait_for_their_fork() {
        // The child's first chunk comes before the parent's fork record.
        let mut start = vec![R_START];
        start.extend_from_slice(&10u32.to_le_bytes());
        start.extend(loads(0x9000, 5));
        let mut parent = loads(0x1000, 3);
        parent.push(R_FORK);
        parent.extend_from_slice(&11u32.to_le_bytes());
        parent.extend(loads(0x1000, 4));
        let mut stream = chunk(10, &loads(0x500, 1));
        stream.extend(chunk(11, &start));
        stream.extend(chunk(10, &parent));
        let (out, d) = decode_all(&stream, 2);
        assert_eq!(d.stats().processes, 2);
        let fork_at = out.iter().position(|r| *r == Record::Fork { child: 1 }).expect("fork emitted");
        let first_child = out.iter().position(|r| *r == Record::ContextSwitch { asid: 1 }).expect("child runs");
        assert!(fork_at < first_child, "{out:?}");
        // A process is switched out after a quantum of references (it keeps running while no
        // other process can run).
        let mut run = 0;
        for (i, r) in out.iter().enumerate() {
            match r {
                Record::Access { .. } => run += 1,
                Record::ContextSwitch { .. } => {
                    let exited = matches!(out[i - 1], Record::Exit { .. });
                    assert!(run % 2 == 0 || exited, "switched after a whole quantum or an exit: {out:?}");
                    run = 0;
                }
                _ => {}
            }
        }
        assert!(out.iter().filter(|r| matches!(r, Record::ContextSwitch { .. })).count() >= 3, "{out:?}");
        let refs = out.iter().filter(|r| matches!(r, Record::Access { .. })).count();
        assert_eq!(refs, 1 + 5 + 3 + 4);
        assert_eq!(out.iter().filter(|r| matches!(r, Record::Exit { .. })).count(), 2);
    }

    #[test]
    fn an_exec_record_starts_a_new_image_that_runs_after_the_old_one_exits() {
        // The forked child (pid 11) runs, then execs; its new image's records arrive before
        // the parent's Fork record.
        let mut start = vec![R_START];
        start.extend_from_slice(&10u32.to_le_bytes());
        start.extend(loads(0x9000, 2));
        let mut image = vec![R_EXEC];
        image.extend(loads(0x5000, 3));
        let mut parent = loads(0x1000, 1);
        parent.push(R_FORK);
        parent.extend_from_slice(&11u32.to_le_bytes());
        parent.extend(loads(0x1000, 2));
        let mut stream = chunk(10, &loads(0x500, 1));
        stream.extend(chunk(11, &start));
        stream.extend(chunk(11, &image));
        stream.extend(chunk(10, &parent));
        let (out, d) = decode_all(&stream, 100);
        assert_eq!(d.stats().processes, 3);
        assert_eq!((d.pid(1), d.pid(2)), (Some(11), Some(11)));
        // The Fork names the forked process (its first image), and the order is: parent up to
        // the fork, the child's first image and its exit, then its new image.
        let pos = |r: Record| out.iter().position(|x| *x == r).unwrap_or_else(|| panic!("{r:?} in {out:?}"));
        let fork = pos(Record::Fork { child: 1 });
        let old_exit = pos(Record::Exit { asid: 1 });
        let new_runs = pos(Record::ContextSwitch { asid: 2 });
        let new_first = pos(Record::Access { kind: Kind::Load, size: 8, addr: 0x5000 });
        let old_first = pos(Record::Access { kind: Kind::Load, size: 8, addr: 0x9000 });
        assert!(fork < old_first && old_first < old_exit && old_exit < new_runs && new_runs < new_first, "{out:?}");
        assert_eq!(out.iter().filter(|r| matches!(r, Record::Exit { .. })).count(), 3);
        // A pid first seen with an exec record (its parent untraced) has one image.
        let mut lone = vec![R_EXEC];
        lone.extend(loads(0x7000, 2));
        let (out, d) = decode_all(&chunk(30, &lone), 100);
        assert_eq!(d.stats().processes, 1);
        assert_eq!(out.iter().filter(|r| matches!(r, Record::Access { .. })).count(), 2);
    }

    #[test]
    fn corrupt_streams_are_errors_with_offsets() {
        let mut d = Demux::new(10);
        let mut dec = StreamDecoder::new("s");
        let e = dec.decode(&chunk(1, &[0x42]), &mut d).unwrap_err().to_string();
        assert!(e.contains("unknown record tag 0x42") && e.contains("offset 12"), "{e}");
        let mut dec = StreamDecoder::new("s");
        let e = dec.decode(&chunk(1, &[0x80, 1, 2]), &mut d).unwrap_err().to_string();
        assert!(e.contains("cut by the end of its chunk"), "{e}");
        let mut bad = chunk(1, &[R_EXIT]);
        bad[0] = 0;
        let mut dec = StreamDecoder::new("s");
        assert!(dec.decode(&bad, &mut d).unwrap_err().to_string().contains("bad chunk header"));
        // An incomplete chunk is left for later.
        let whole = chunk(1, &loads(0, 3));
        let mut dec = StreamDecoder::new("s");
        assert_eq!(dec.decode(&whole[..whole.len() - 1], &mut Demux::new(10)).unwrap(), 0);
    }
}
