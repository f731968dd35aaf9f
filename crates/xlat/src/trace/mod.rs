//! Memory-reference traces: the records every reader produces and the readers themselves.
//!
//! A trace is a stream of [`Record`]s: memory accesses plus events (process switches, map/unmap,
//! IPC, context switches, markers). Readers decode a file format into batches of records so the
//! simulation loop never sees a format, a string or an allocation per reference. All readers
//! stream: memory use is constant whatever the trace length.

pub mod champsim;
pub mod compress;
pub mod gen;
pub mod info;
pub mod lackey;
pub mod open;
mod spare;
pub mod xtr;

pub use compress::{frames, lz4};
pub use spare::SpareWork;

use std::fmt;

/// What a memory access does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Kind {
    /// Instruction fetch.
    Ifetch = 0,
    /// Data load.
    Load = 1,
    /// Data store.
    Store = 2,
    /// Read-modify-write of the same bytes (lackey `M`): one lookup per page.
    Modify = 3,
}

impl Kind {
    /// All kinds, in code order.
    pub const ALL: [Kind; 4] = [Kind::Ifetch, Kind::Load, Kind::Store, Kind::Modify];

    /// The kind with this code (`Kind as u8`), if any.
    pub fn from_code(code: u8) -> Option<Kind> {
        Kind::ALL.get(code as usize).copied()
    }

    /// True for loads, stores and modifies.
    #[inline(always)]
    pub fn is_data(self) -> bool {
        !matches!(self, Kind::Ifetch)
    }

    /// True for stores and modifies (they write).
    #[inline(always)]
    pub fn is_store(self) -> bool {
        matches!(self, Kind::Store | Kind::Modify)
    }

    /// Lower-case name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Ifetch => "ifetch",
            Kind::Load => "load",
            Kind::Store => "store",
            Kind::Modify => "modify",
        }
    }
}

/// Kinds of descriptor a [`Record::Syscall`] names.
pub mod fd_kind {
    /// No descriptor argument, or not known.
    pub const NONE: u8 = 0;
    /// A regular file or device.
    pub const FILE: u8 = 1;
    /// A pipe.
    pub const PIPE: u8 = 2;
    /// A socket.
    pub const SOCKET: u8 = 3;
    /// The low bits hold the kind.
    pub const KIND_MASK: u8 = 0x0f;
    /// Flag: the call fills the buffer from the descriptor (read, recv).
    pub const INTO_BUF: u8 = 0x10;
    /// Flag: the call sends the buffer to the descriptor (write, send).
    pub const FROM_BUF: u8 = 0x20;
}

/// The traced system call numbers and arguments the models interpret (x86-64, the architecture
/// the tracer runs).
pub mod sysno {
    /// x86-64 `mprotect(addr, length, prot)`.
    pub const MPROTECT: u16 = 10;
    /// x86-64 `madvise(addr, length, advice)`.
    pub const MADVISE: u16 = 28;
    /// The `advice` asking for transparent huge pages on a region (Linux `MADV_HUGEPAGE`): a
    /// traced [`MADVISE`](self::MADVISE) with this advice names its region as the record's
    /// `buf` and `len`.
    pub const MADV_HUGEPAGE: u64 = 14;
}

/// One trace record. Kept small (24 bytes) because batches of them flow through the hot loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// A memory access of `size` bytes (at least 1) at virtual address `addr` by the current process.
    Access {
        /// Access kind.
        kind: Kind,
        /// Bytes accessed (>= 1).
        size: u32,
        /// Virtual address.
        addr: u64,
    },
    /// Following records belong to process `asid` (attribution only; not counted as a switch).
    Process {
        /// Address-space identifier of the process.
        asid: u32,
    },
    /// The scheduler switches to process `asid` (counted; flush-on-switch TLBs flush here).
    ContextSwitch {
        /// Address-space identifier switched to.
        asid: u32,
    },
    /// The current process maps `[start, start+len)`.
    Map {
        /// First virtual address.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// Protection and kind bits, see [`map_flags`].
        flags: u32,
    },
    /// The current process unmaps `[start, start+len)`; TLB entries for it are shot down.
    Unmap {
        /// First virtual address.
        start: u64,
        /// Length in bytes.
        len: u64,
    },
    /// The current process forks child `child` (which starts with a copy of the parent's mappings).
    Fork {
        /// ASID of the new process.
        child: u32,
    },
    /// Process `asid` exits; its mappings and TLB entries go away.
    Exit {
        /// ASID of the exiting process.
        asid: u32,
    },
    /// An IPC message from the current process to process `to` (bala94's IPC path).
    Ipc {
        /// ASID of the receiver.
        to: u32,
    },
    /// A marker (phase boundary, region of interest); `id` is free for the producer.
    Marker {
        /// Producer-defined identifier.
        id: u64,
    },
    /// The next `Map` of the current process maps object `id` from byte `offset` of it: a file
    /// (the same device and inode get the same `id` in every process of the trace) or a shared
    /// anonymous mapping. The trace's notes name each object ([`TraceNotes::objects`]).
    Object {
        /// Trace-wide object number (from 1).
        id: u32,
        /// Byte offset in the object of the mapping's first byte.
        offset: u64,
    },
    /// The current process makes system call `nr` (the traced architecture's number) on a
    /// descriptor of kind `fd` ([`fd_kind`]) open on object `object` (0: none or not known),
    /// with buffer `buf` of `len` bytes (0 if the call has none). A pipe or socket write that
    /// another traced process reads is followed by an `Ipc` record.
    ///
    /// A `madvise` record ([`sysno::MADVISE`]) with `len > 0` is a `MADV_HUGEPAGE` request
    /// over `[buf, buf + len)` (`fd` and `object` 0; other advice leaves `buf` and `len` 0): the
    /// OS models take it as a request for superpages on that region (swanson98's `remap()`).
    Syscall {
        /// System call number.
        nr: u16,
        /// Kind of the descriptor argument and the direction of the data, [`fd_kind`].
        fd: u8,
        /// Trace-wide object number of the descriptor's file or pipe (0: none).
        object: u32,
        /// Buffer address.
        buf: u64,
        /// Buffer length in bytes.
        len: u64,
    },
    /// The references that follow, until the next `Thread` or switch, are thread `tid`'s, a
    /// thread of the current process (its Linux thread ID when traced; the first thread's equals
    /// the process ID). The TLB models ignore it: threads share their process's address space.
    Thread {
        /// Thread identifier, unique within the trace's process.
        tid: u32,
    },
    /// The current process changes the rights of `[start, start+len)` to `flags` (`mprotect`;
    /// the [`map_flags`] bits `READ`, `WRITE` and `EXEC`). TLB entries of the range's resident
    /// pages are shot down when a right they had is removed; a change that only adds rights
    /// invalidates nothing.
    Protect {
        /// First virtual address.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// The new rights, [`map_flags`] `READ | WRITE | EXEC` bits.
        flags: u32,
    },
    /// The current process drops the pages of `[start, start+len)` (`madvise` with advice that
    /// frees them: `MADV_DONTNEED`, `MADV_DONTNEED_LOCKED`, `MADV_REMOVE`; `lazy` for
    /// `MADV_FREE`). The mapping stays. Without `lazy` the resident pages' frames are freed and
    /// the next touch faults a fresh page; with `lazy` the pages stay until memory runs short
    /// (never, in the OS models), but their TLB entries are shot down as Linux does when it
    /// clears their dirty bits.
    Discard {
        /// First virtual address.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// `MADV_FREE`: the pages go only under memory pressure.
        lazy: bool,
    },
}

const _: () = assert!(std::mem::size_of::<Record>() == 24, "a Record stays 24 bytes");

/// Bits of [`Record::Map`]'s `flags`.
pub mod map_flags {
    /// Readable.
    pub const READ: u32 = 1;
    /// Writable.
    pub const WRITE: u32 = 2;
    /// Executable.
    pub const EXEC: u32 = 4;
    /// Shared mapping (file or shared memory) rather than private.
    pub const SHARED: u32 = 8;
    /// Heap growth (`brk`).
    pub const HEAP: u32 = 16;
    /// The process stack.
    pub const STACK: u32 = 32;
    /// A file-backed mapping.
    pub const FILE: u32 = 64;
    /// A mapping the program image had when it started (executable, interpreter, stack).
    pub const IMAGE: u32 = 128;
    /// The access rights among the bits (what [`Record::Protect`](super::Record::Protect) sets).
    pub const RIGHTS: u32 = READ | WRITE | EXEC;
}

/// Counts a reader keeps about what it read and what it had to skip.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Bytes of (decompressed) input consumed.
    pub bytes: u64,
    /// Records produced.
    pub records: u64,
    /// Input lines or records that were not memory references and were skipped (e.g. lackey's
    /// `==pid==` banner lines).
    pub skipped: u64,
}

/// A trace format xlat reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// valgrind lackey `--trace-mem=yes` text.
    Lackey,
    /// xlat's own binary format (see `docs/trace-format.md`).
    Xtr,
    /// ChampSim 64-byte `input_instr` records.
    Champsim,
}

impl Format {
    /// Name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Lackey => "lackey",
            Format::Xtr => "xtr",
            Format::Champsim => "champsim",
        }
    }

    /// Parses a command-line name.
    pub fn from_name(s: &str) -> Option<Format> {
        match s {
            "lackey" => Some(Format::Lackey),
            "xtr" => Some(Format::Xtr),
            "champsim" => Some(Format::Champsim),
            _ => None,
        }
    }
}

/// A trace that cannot be read: names the input, the byte offset (or line) and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// Malformed content at a known place.
    #[error("{source_name}: {location}: {message}")]
    Corrupt {
        /// File name (or `-` for stdin).
        source_name: String,
        /// "offset N" or "line N".
        location: String,
        /// What was found and what was expected.
        message: String,
    },
    /// The input could not be opened or read.
    #[error("{source_name}: {error}")]
    Io {
        /// File name (or `-` for stdin).
        source_name: String,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The format could not be recognised.
    #[error("{source_name}: {message}")]
    Format {
        /// File name (or `-` for stdin).
        source_name: String,
        /// Why.
        message: String,
    },
}

impl TraceError {
    /// A corrupt-content error at a byte offset.
    pub fn at_offset(source_name: &str, offset: u64, message: impl fmt::Display) -> TraceError {
        TraceError::Corrupt {
            source_name: source_name.to_string(),
            location: format!("offset {offset}"),
            message: message.to_string(),
        }
    }

    /// A corrupt-content error at a line (1-based).
    pub fn at_line(source_name: &str, line: u64, message: impl fmt::Display) -> TraceError {
        TraceError::Corrupt {
            source_name: source_name.to_string(),
            location: format!("line {line}"),
            message: message.to_string(),
        }
    }
}

/// Default number of records per batch.
pub const BATCH: usize = 4096;

/// Counts of the trace itself, independent of any design.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TraceCounts {
    /// Access records (references).
    pub references: u64,
    /// References by kind: ifetch, load, store, modify.
    pub by_kind: [u64; 4],
    /// Pages touched at `lookup_page_size` (one lookup each).
    pub lookups: u64,
    /// Page size `lookups` is counted at: the designs' common base page size, or 4096 if they differ.
    pub lookup_page_size: u64,
    /// Event records.
    pub events: u64,
    /// Accesses that run past the top of the 64-bit address space: simulated up to its last
    /// page, and counted so that the report can say so.
    pub clipped_accesses: u64,
}

/// The [`page_word`] of every record that is not an access to exactly one page.
pub const SLOW_WORD: u64 = u64::MAX;

/// A record as the page-number stream of a batch sees it, for pages of `2^shift` bytes
/// (`shift >= 1`): `vpn << 1 | is_data` for an access that touches exactly one page (its
/// number `vpn`, the last page for an access clipped at the top of the address space;
/// `is_data` for loads, stores and modifies), [`SLOW_WORD`] for any other record (an event,
/// an access that spans pages). A word equal to [`SLOW_WORD`] by chance (the top page with
/// pages of 2 bytes) only sends that access down the general path.
#[inline(always)]
pub fn page_word(r: &Record, shift: u32) -> u64 {
    match *r {
        Record::Access { kind, size, addr } => {
            let end = addr.saturating_add((size as u64).saturating_sub(1));
            let first = addr >> shift;
            if first == end >> shift {
                first << 1 | kind.is_data() as u64
            } else {
                SLOW_WORD
            }
        }
        _ => SLOW_WORD,
    }
}

/// The counts of [`TraceCounts::add`] over at most [`Tally::MAX`] records, in registers.
#[derive(Default, Clone, Copy)]
pub(crate) struct Tally {
    /// References by kind, 16 bits per kind (kind `k` at bit `16 * k`): one add per
    /// reference, where an indexed count would chain each reference to the previous one's
    /// store.
    by_kind: u64,
    /// Lookups beyond one per reference (the further pages of accesses that span pages).
    extra_lookups: u64,
    events: u64,
    clipped: u64,
}

/// What one reference of each kind adds to [`Tally::by_kind`].
const KIND_ONE: [u64; 4] = [1, 1 << 16, 1 << 32, 1 << 48];

impl Tally {
    /// Most records one tally may count (the 16-bit fields of `by_kind`).
    pub(crate) const MAX: usize = u16::MAX as usize;

    /// Counts `r`; returns its [`page_word`].
    #[inline(always)]
    pub(crate) fn count(&mut self, r: &Record, shift: u32) -> u64 {
        match *r {
            Record::Access { kind, size, addr } => self.access(kind, size, addr, shift),
            _ => self.event(),
        }
    }

    /// Counts an event; returns its [`page_word`].
    #[inline(always)]
    pub(crate) fn event(&mut self) -> u64 {
        self.events += 1;
        SLOW_WORD
    }

    /// Counts an access; returns its [`page_word`]. An access within one page (nearly all)
    /// changes only the count of its kind; the others take [`Tally::spanning`].
    #[inline(always)]
    pub(crate) fn access(&mut self, kind: Kind, size: u32, addr: u64, shift: u32) -> u64 {
        // A size of 0 (never a record's) ends where one of 1 does.
        let k = kind as usize;
        self.access_coded(k, KIND_ONE[k & 3], kind.is_data() as u64, size.max(1), addr, shift)
    }

    /// [`Tally::access`] of kind code `k` (`kind as usize`, below 4), given `KIND_ONE[k]`, the
    /// data bit (`k != 0`) and `size >= 1`, as a decoder's table has them.
    #[inline(always)]
    pub(crate) fn access_coded(&mut self, k: usize, kind_one: u64, data: u64, size: u32, addr: u64, shift: u32) -> u64 {
        debug_assert!(k < 4 && size >= 1 && kind_one == KIND_ONE[k] && data == (k != 0) as u64);
        self.by_kind += kind_one;
        // Within its page if its offset there plus its size stays in the page (which also
        // sends an access that wraps round the top of the address space to `spanning`).
        let mask = (1u64 << shift) - 1;
        if (addr & mask) + size as u64 <= mask + 1 {
            return (addr >> shift) << 1 | data;
        }
        self.spanning(Kind::ALL[k & 3], addr, addr.wrapping_add(size as u64 - 1), shift)
    }

    /// [`Tally::access`] of an access that spans pages or runs past the top of the address
    /// space (`end` wrapped round): clipped there, one lookup per page.
    #[cold]
    #[inline(never)]
    fn spanning(&mut self, kind: Kind, addr: u64, end: u64, shift: u32) -> u64 {
        let over = end < addr;
        self.clipped += over as u64;
        let end = if over { u64::MAX } else { end };
        let (first, last) = (addr >> shift, end >> shift);
        self.extra_lookups += last - first;
        if first == last {
            first << 1 | kind.is_data() as u64
        } else {
            SLOW_WORD
        }
    }
}

impl TraceCounts {
    /// Adds `records`: each access is a reference of its kind and one lookup per page of
    /// `2^shift` bytes it touches (an access past the top of the address space is clipped
    /// there, and counted); every other record is an event.
    pub fn add(&mut self, records: &[Record], shift: u32) {
        for chunk in records.chunks(Tally::MAX) {
            let mut t = Tally::default();
            for r in chunk {
                t.count(r, shift);
            }
            self.add_tally(&t);
        }
    }

    /// [`TraceCounts::add`], and the [`page_word`] of each record at `shift` (`>= 1`) in
    /// `words` (cleared first): the page-number stream the engine's plain loop reads.
    pub fn add_words(&mut self, records: &[Record], shift: u32, words: &mut Vec<u64>) {
        words.clear();
        for chunk in records.chunks(Tally::MAX) {
            let mut t = Tally::default();
            words.extend(chunk.iter().map(|r| t.count(r, shift)));
            self.add_tally(&t);
        }
    }

    pub(crate) fn add_tally(&mut self, t: &Tally) {
        let mut references = 0;
        for (k, c) in self.by_kind.iter_mut().enumerate() {
            let n = t.by_kind >> (16 * k) & 0xffff;
            *c += n;
            references += n;
        }
        self.references += references;
        // One lookup per reference, and the further pages of those that span pages.
        self.lookups += references + t.extra_lookups;
        self.events += t.events;
        self.clipped_accesses += t.clipped;
    }
}

/// What the engine's reader thread makes of a batch besides its records
/// ([`TraceReader::read_batch_words`]): the records are added to `counts`
/// ([`TraceCounts::add`] at `shift`) and their [`page_word`]s at `shift` (`>= 1`) written to
/// `words` (cleared first).
pub struct BatchWords<'a> {
    /// The page words, one per record read.
    pub words: &'a mut Vec<u64>,
    /// log2 of the page size of the words and of the counted lookups.
    pub shift: u32,
    /// The trace's counts so far.
    pub counts: &'a mut TraceCounts,
    /// Whether every record is wanted. If not, a reader may write only the records whose word
    /// is [`SLOW_WORD`] (events, and accesses that span pages or wrap round): the others are
    /// then left as they were in `out`, and the caller goes by the words alone there (the
    /// xtr reader saves a quarter of its stores so).
    pub all_records: bool,
    /// Whether the words are for a thread on another core (a run's reader thread with a core
    /// to itself hands them to its simulation). A reader may then store them around its cache,
    /// so that it neither waits to own lines that the other core read last nor keeps them.
    pub for_other_core: bool,
}

/// A streaming source of records.
///
/// Readers are called once per batch (not per record), so a boxed reader costs nothing
/// measurable. `read_batch` clears `out`, fills it with up to `max` records and returns how
/// many it wrote; 0 means the trace ended cleanly. A truncated or corrupt trace returns an error
/// instead, never a silent end.
pub trait TraceReader: Send {
    /// Fills `out` (after clearing it) with up to `max` records.
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError>;
    /// [`TraceReader::read_batch`] that also makes what `w` asks for of the records read. A
    /// reader that decodes accesses itself may do it as it decodes them.
    fn read_batch_words(&mut self, out: &mut Vec<Record>, max: usize, w: BatchWords<'_>) -> Result<usize, TraceError> {
        let n = self.read_batch(out, max)?;
        w.counts.add_words(out, w.shift, w.words);
        Ok(n)
    }
    /// What the reader has consumed and skipped so far.
    fn stats(&self) -> ReaderStats;
    /// What the trace says about itself beyond its records, read so far (xtr metadata).
    fn notes(&self) -> TraceNotes {
        TraceNotes::default()
    }
    /// Work of this reader that another thread may do while it would otherwise wait for the
    /// reader's next batch (decompressing the input ahead: [`frames`]).
    fn spare_work(&self) -> Option<std::sync::Arc<dyn SpareWork>> {
        None
    }
    /// Threads outside the run that keep a core busy while it reads: a tracer's thread and the
    /// traced program, a thread decompressing ahead. A run counts them with its own to decide
    /// whether its threads have a core each and may poll for one another.
    fn busy_threads(&self) -> usize {
        0
    }
}

/// What a trace records about how it was made, beyond its records.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceNotes {
    /// Programs that traced processes exec'd and that were not traced (`PID PATH` each): the
    /// trace lacks their references.
    pub untraced_execs: Vec<String>,
    /// The objects `Record::Object` names.
    pub objects: Vec<ObjectInfo>,
}

/// A mapped object of a trace: what `Record::Object { id }` stands for.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object's number in the trace.
    pub id: u32,
    /// Device of the file (0 for shared anonymous memory).
    pub dev: u64,
    /// Inode of the file (shared anonymous memory: a number of its own).
    pub ino: u64,
    /// Path when mapped (empty if unknown or anonymous).
    pub path: String,
}

/// A sink of records (used by `xlat convert`, `xlat gen` and tracing backends).
pub trait TraceWriter {
    /// Writes records in order.
    fn write(&mut self, records: &[Record]) -> Result<(), TraceError>;
    /// Flushes and closes the output (writes any trailer).
    fn finish(self: Box<Self>) -> Result<(), TraceError>;
}

/// The byte window of a binary reader: moves the unread bytes `buf[*pos..*end]` to the front
/// (adding what was consumed to `*base`, the stream offset of `buf[0]`) and reads from `inner`
/// until `buf[..cap]` is full or the input ends (`*eof`). A read error comes back with the stream
/// offset where it happened, for the caller's message.
pub(crate) fn refill_window<R: std::io::Read>(
    inner: &mut R,
    buf: &mut [u8],
    cap: usize,
    pos: &mut usize,
    end: &mut usize,
    base: &mut u64,
    eof: &mut bool,
) -> Result<(), (u64, std::io::Error)> {
    buf.copy_within(*pos..*end, 0);
    *base += *pos as u64;
    *end -= *pos;
    *pos = 0;
    while *end < cap && !*eof {
        match inner.read(&mut buf[*end..cap]) {
            Ok(0) => *eof = true,
            Ok(n) => *end += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((*base + *end as u64, e)),
        }
    }
    Ok(())
}
