//! Opening trace files: format detection, readers and writers over files, conversion. The
//! compression around a trace is undone (and made) by [`compress`](super::compress), whose
//! [`Compression`], [`CompressedWriter`] and [`decompress`] are also here.
//!
//! # Format detection
//!
//! [`open_reader`] decides the format in this order (the first rule that applies wins):
//!
//! 1. the format given explicitly;
//! 2. content starting with the xtr magic `XTR\0` → xtr;
//! 3. text content (no control bytes other than tab, CR, LF) whose first lines (up to 64 KiB,
//!    banners and other text allowed) contain a well-formed lackey reference → lackey;
//! 4. the name: `*.xtr`, `*.lackey` (or `*.lackey.txt`), and any name containing `.champsim`
//!    (e.g. `*.champsim`, `*.champsimtrace.xz`), after stripping `.gz`, `.zst` or `.xz`;
//! 5. binary content that looks like ChampSim records: at least one whole 64-byte record, the
//!    first 16 records all have a non-zero `ip`, `is_branch` and `branch_taken` in {0, 1} and
//!    every address below 2^57, and (for an uncompressed file) a length that is a multiple of 64;
//! 6. empty content → an empty lackey trace;
//! 7. otherwise [`TraceError::Format`] naming the file and the formats expected.

use std::fs::File;
use std::io::{self, BufWriter, Cursor, Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use super::champsim::{ChampsimReader, ChampsimWriter};
pub use super::compress::{decompress, CompressedWriter, Compression, MAX_LAYERS};
use super::compress::{decompress_layers, frames, peek_bytes};
use super::lackey::{LackeyReader, LackeyWriter};
use super::spare::{Both, SpareWork};
use super::xtr::{XtrOptions, XtrReader, XtrWriter};
use super::{BatchWords, Format, ReaderStats, Record, TraceError, TraceReader, TraceWriter, BATCH};

/// Bytes of (decompressed) content examined to recognise the format.
pub const DETECT_PREFIX: usize = 64 * 1024;

/// Bytes per read-ahead chunk.
const AHEAD_CHUNK: usize = 1 << 18;
/// Chunks decoded ahead of the reader.
const AHEAD_DEPTH: usize = 4;

/// A reader that pulls `inner` on a background thread, up to 4 chunks of
/// 256 KiB ahead, so that decompression overlaps decoding. Memory stays bounded.
///
/// The thread ends when `inner` ends or fails, or when the `ReadAhead` is dropped (at its
/// next chunk).
pub struct ReadAhead {
    rx: Receiver<io::Result<(Vec<u8>, usize)>>,
    recycle: SyncSender<Vec<u8>>,
    cur: Vec<u8>,
    off: usize,
    len: usize,
    done: bool,
}

impl ReadAhead {
    /// Starts reading `inner` on a new thread.
    pub fn new<R: Read + Send + 'static>(mut inner: R) -> io::Result<ReadAhead> {
        let (tx, rx) = sync_channel::<io::Result<(Vec<u8>, usize)>>(AHEAD_DEPTH);
        let (recycle, recycled) = sync_channel::<Vec<u8>>(AHEAD_DEPTH + 2);
        std::thread::Builder::new().name("xlat-read-ahead".into()).spawn(move || loop {
            let mut buf = recycled.try_recv().unwrap_or_else(|_| vec![0u8; AHEAD_CHUNK]);
            let mut n = 0;
            let res = loop {
                if n == buf.len() {
                    break Ok(());
                }
                match inner.read(&mut buf[n..]) {
                    Ok(0) => break Ok(()),
                    Ok(k) => n += k,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            // A chunk shorter than the buffer marks the end; an exactly full last chunk is
            // followed by an empty one.
            let last = n < buf.len() || res.is_err();
            let msg = res.map(|()| (buf, n));
            if tx.send(msg).is_err() || last {
                return;
            }
        })?;
        Ok(ReadAhead { rx, recycle, cur: Vec::new(), off: 0, len: 0, done: false })
    }
}

impl Read for ReadAhead {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.off == self.len {
            if self.done || out.is_empty() {
                return Ok(0);
            }
            if !self.cur.is_empty() {
                let _ = self.recycle.try_send(std::mem::take(&mut self.cur));
            }
            match self.rx.recv() {
                Ok(Ok((buf, n))) => {
                    self.done = n < buf.len();
                    self.cur = buf;
                    self.off = 0;
                    self.len = n;
                }
                Ok(Err(e)) => {
                    self.done = true;
                    return Err(e);
                }
                Err(_) => {
                    self.done = true;
                    return Err(io::Error::other("read-ahead thread stopped"));
                }
            }
        }
        let n = out.len().min(self.len - self.off);
        out[..n].copy_from_slice(&self.cur[self.off..self.off + n]);
        self.off += n;
        Ok(n)
    }
}

fn io_err(path: &str, error: io::Error) -> TraceError {
    TraceError::Io { source_name: path.to_string(), error }
}

/// Opens `path` (`-` for stdin) as a raw byte stream; also returns the file's length if known.
pub fn open_input(path: &str) -> Result<(Box<dyn Read + Send>, Option<u64>), TraceError> {
    if path == "-" {
        return Ok((Box::new(io::stdin()), None));
    }
    let f = File::open(path).map_err(|e| io_err(path, e))?;
    let len = f.metadata().ok().filter(|m| m.is_file()).map(|m| m.len());
    Ok((Box::new(f), len))
}

/// Creates `path` (`-` for stdout) as a buffered raw byte sink.
pub fn create_output(path: &str) -> Result<Box<dyn Write + Send>, TraceError> {
    if path == "-" {
        return Ok(Box::new(BufWriter::with_capacity(1 << 16, io::stdout())));
    }
    let f = File::create(path).map_err(|e| io_err(path, e))?;
    Ok(Box::new(BufWriter::with_capacity(1 << 16, f)))
}

/// Strips one compression suffix (`.gz`, `.zst`, `.zstd`, `.xz`, `.lz4`) from a lower-cased name.
fn strip_compression(lower: &str) -> &str {
    for s in [".gz", ".zst", ".zstd", ".xz", ".lz4"] {
        if let Some(stem) = lower.strip_suffix(s) {
            return stem;
        }
    }
    lower
}

/// The format a file name implies: `*.xtr`, `*.lackey`, `*.lackey.txt`, or a name containing
/// `.champsim` (such as `*.champsimtrace.xz`); compression suffixes are ignored.
pub fn format_from_name(name: &str) -> Option<Format> {
    let lower = name.to_ascii_lowercase();
    let stem = strip_compression(&lower);
    if stem.ends_with(".xtr") {
        Some(Format::Xtr)
    } else if stem.ends_with(".lackey") || stem.ends_with(".lackey.txt") {
        Some(Format::Lackey)
    } else if stem.contains(".champsim") {
        Some(Format::Champsim)
    } else {
        None
    }
}

/// True if `prefix` (the start of a decompressed trace) looks like lackey text: no control
/// bytes other than tab/CR/LF, and a well-formed lackey reference among its lines.
pub fn looks_like_lackey(prefix: &[u8]) -> bool {
    if prefix.iter().any(|&b| b < 0x20 && b != b'\t' && b != b'\n' && b != b'\r' || b == 0x7f) {
        return false;
    }
    prefix.split(|&b| b == b'\n').any(|line| super::lackey::parse_line(line).is_some_and(|r| r.is_ok()))
}

/// True if `prefix` looks like ChampSim `input_instr` records (see the module docs; `len` is
/// the uncompressed length when known).
pub fn looks_like_champsim(prefix: &[u8], len: Option<u64>) -> bool {
    if len.is_some_and(|l| l == 0 || l % 64 != 0) || prefix.len() < 64 {
        return false;
    }
    const LIMIT: u64 = 1 << 57;
    prefix.chunks_exact(64).take(16).all(|r| {
        let word = |i: usize| u64::from_le_bytes(r[i..i + 8].try_into().unwrap());
        let ip = word(0);
        ip != 0 && ip < LIMIT && r[8] <= 1 && r[9] <= 1 && (16..64).step_by(8).all(|i| word(i) < LIMIT)
    })
}

/// Recognises the format of a trace named `name` whose decompressed content starts with
/// `prefix` (see the module docs for the rules); `len` is the uncompressed length if known.
pub fn detect_format(prefix: &[u8], name: &str, len: Option<u64>) -> Option<Format> {
    if prefix.starts_with(super::xtr::MAGIC) {
        return Some(Format::Xtr);
    }
    if looks_like_lackey(prefix) {
        return Some(Format::Lackey);
    }
    if let Some(f) = format_from_name(name) {
        return Some(f);
    }
    if looks_like_champsim(prefix, len) {
        return Some(Format::Champsim);
    }
    if prefix.is_empty() {
        return Some(Format::Lackey);
    }
    None
}

fn unknown_format(path: &str, what: &str) -> TraceError {
    TraceError::Format {
        source_name: path.to_string(),
        message: format!(
            "cannot tell the trace format {what}: expected lackey (valgrind --tool=lackey \
             --trace-mem=yes text), xtr (xlat binary) or champsim (64-byte input_instr records); \
             name the file *.lackey, *.xtr or *.champsim[.xz], or give the format explicitly"
        ),
    }
}

/// Builds a reader of `format` (detected from the content and `name` if `None`) over an already
/// opened byte stream, undoing any compression (on a [`ReadAhead`] thread). Returns the reader
/// and the format used.
pub fn reader_from_stream(
    stream: Box<dyn Read + Send>,
    name: &str,
    format: Option<Format>,
    len: Option<u64>,
    read_ahead: bool,
) -> Result<(Box<dyn TraceReader>, Format), TraceError> {
    let cannot = |e: io::Error| TraceError::at_offset(name, 0, format!("cannot read: {e}"));
    let mut stream = stream;
    let prefix = peek_bytes(&mut stream, 4).map_err(cannot)?;
    let stream: Box<dyn Read + Send> = Box::new(Cursor::new(prefix.clone()).chain(stream));
    let outer = Compression::detect(&prefix);
    // Read by a run's reader thread: zstd or LZ4 frames that other threads may decompress. LZ4
    // is always read frame by frame, so that every reader checks the frames' XXH3-64.
    let framed = outer == Compression::Lz4 || (outer == Compression::Zstd && !read_ahead);
    let (mut stream, layers, spare) = if framed {
        let (frames, spare) = frames::frames(stream, outer);
        let (stream, inner) = decompress_layers(frames, MAX_LAYERS - 1).map_err(cannot)?;
        (stream, [vec![outer], inner].concat(), (!read_ahead).then_some(spare))
    } else {
        let (stream, layers) = decompress(stream).map_err(cannot)?;
        (stream, layers, None)
    };
    if read_ahead && !layers.is_empty() {
        stream = Box::new(ReadAhead::new(stream).map_err(|e| io_err(name, e))?);
    }
    let len = if layers.is_empty() { len } else { None };
    let format = match format {
        Some(f) => f,
        None => {
            let prefix = peek_bytes(&mut stream, DETECT_PREFIX)
                .map_err(|e| TraceError::at_offset(name, 0, format!("cannot read: {e}")))?;
            let f =
                detect_format(&prefix, name, len).ok_or_else(|| unknown_format(name, "from its content or name"))?;
            stream = Box::new(Cursor::new(prefix).chain(stream));
            f
        }
    };
    let reader: Box<dyn TraceReader> = match format {
        Format::Lackey => Box::new(LackeyReader::new(stream, name)),
        Format::Xtr => Box::new(XtrReader::new(stream, name)?),
        Format::Champsim => Box::new(ChampsimReader::new(stream, name)),
    };
    let reader = match spare {
        Some(spare) => Box::new(WithSpareWork { reader, spare }),
        None => reader,
    };
    Ok((reader, format))
}

/// A reader whose input other threads may decompress ([`TraceReader::spare_work`]).
struct WithSpareWork {
    reader: Box<dyn TraceReader>,
    spare: Arc<dyn SpareWork>,
}

impl TraceReader for WithSpareWork {
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        self.reader.read_batch(out, max)
    }
    fn read_batch_words(&mut self, out: &mut Vec<Record>, max: usize, w: BatchWords<'_>) -> Result<usize, TraceError> {
        self.reader.read_batch_words(out, max, w)
    }
    fn stats(&self) -> ReaderStats {
        self.reader.stats()
    }
    fn notes(&self) -> super::TraceNotes {
        self.reader.notes()
    }
    /// The reader's own spare work (decoding blocks) first, then decompressing frames.
    fn spare_work(&self) -> Option<Arc<dyn SpareWork>> {
        Some(match self.reader.spare_work() {
            Some(own) => Arc::new(Both(own, self.spare.clone())),
            None => self.spare.clone(),
        })
    }
}

/// Like [`open_reader`], also returning the format that was used.
pub fn open_reader_with_format(
    path: &str,
    format: Option<Format>,
) -> Result<(Box<dyn TraceReader>, Format), TraceError> {
    let (stream, len) = open_input(path)?;
    reader_from_stream(stream, path, format, len, true)
}

/// Like [`open_reader_with_format`], without the decompression read-ahead thread: for callers
/// that already read on a thread of their own (the engine's [`crate::engine::run`]), where a
/// third thread on a two-core machine costs more than it gives.
pub fn open_reader_inline(path: &str, format: Option<Format>) -> Result<(Box<dyn TraceReader>, Format), TraceError> {
    let (stream, len) = open_input(path)?;
    reader_from_stream(stream, path, format, len, false)
}

/// Opens `path` (`-` for stdin) for reading. Compression (gzip, zstd, xz, LZ4) is detected from the
/// content's magic bytes; the format from `format` if given, else from the content, else the name.
pub fn open_reader(path: &str, format: Option<Format>) -> Result<Box<dyn TraceReader>, TraceError> {
    open_reader_with_format(path, format).map(|(r, _)| r)
}

/// The format an output named `path` gets when none is given.
fn output_format(path: &str, format: Option<Format>) -> Result<Format, TraceError> {
    format.or_else(|| format_from_name(path)).ok_or_else(|| unknown_format(path, "to write from the name"))
}

/// Builds a writer of `format` over an already created byte sink; `compression` as in
/// [`create_writer`] (xtr uses zstd when given [`Compression::None`]).
pub fn writer_to_sink(
    sink: Box<dyn Write + Send>,
    name: &str,
    format: Format,
    compression: Compression,
) -> Result<Box<dyn TraceWriter>, TraceError> {
    Ok(match format {
        Format::Lackey => Box::new(LackeyWriter::new(sink, name, compression)?),
        Format::Champsim => Box::new(ChampsimWriter::new(sink, name, compression)?),
        Format::Xtr => {
            let compression = match compression {
                Compression::None => Compression::Zstd,
                c => c,
            };
            let opts = XtrOptions { compression, ..XtrOptions::default() };
            Box::new(XtrWriter::with_options(sink, name, opts)?)
        }
    })
}

/// Creates `path` (`-` for stdout) for writing in `format` (default: inferred from the name);
/// compression follows the name's suffix (`.gz`, `.zst`, `.xz`, `.lz4`; `.xtr` is zstd-compressed
/// inside).
pub fn create_writer(path: &str, format: Option<Format>) -> Result<Box<dyn TraceWriter>, TraceError> {
    let format = output_format(path, format)?;
    let sink = create_output(path)?;
    writer_to_sink(sink, path, format, Compression::from_name(path))
}

/// What [`convert`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConvertStats {
    /// Input format (given or detected).
    pub from: Format,
    /// Output format.
    pub to: Format,
    /// Records read.
    pub records: u64,
    /// Of which memory accesses.
    pub accesses: u64,
    /// Of which events (every non-access record).
    pub events: u64,
    /// Events the output format cannot represent and that were dropped (all events for lackey
    /// and champsim output, none for xtr).
    pub dropped_events: u64,
    /// The reader's final counters (bytes read, lines skipped).
    pub input: ReaderStats,
}

/// Copies the trace `input` to `output` (`-` for stdin / stdout), converting formats.
///
/// `from` defaults to detection as in [`open_reader`], `to` to the output name as in
/// [`create_writer`]. Lossy conversions are described in `docs/trace-format.md`.
pub fn convert(
    input: &str,
    output: &str,
    from: Option<Format>,
    to: Option<Format>,
) -> Result<ConvertStats, TraceError> {
    convert_with_progress(input, output, from, to, |_| {})
}

/// [`convert`], calling `progress` after each batch with the records converted so far.
pub fn convert_with_progress(
    input: &str,
    output: &str,
    from: Option<Format>,
    to: Option<Format>,
    mut progress: impl FnMut(u64),
) -> Result<ConvertStats, TraceError> {
    if input != "-" && output != "-" {
        if let (Ok(a), Ok(b)) = (std::fs::canonicalize(input), std::fs::canonicalize(output)) {
            if a == b {
                return Err(TraceError::Format {
                    source_name: output.to_string(),
                    message: "output is the same file as the input".to_string(),
                });
            }
        }
    }
    let to = output_format(output, to)?;
    let (mut reader, from) = open_reader_with_format(input, from)?;
    let mut writer = create_writer(output, Some(to))?;
    let mut stats =
        ConvertStats { from, to, records: 0, accesses: 0, events: 0, dropped_events: 0, input: ReaderStats::default() };
    let mut batch = Vec::with_capacity(BATCH);
    while reader.read_batch(&mut batch, BATCH)? > 0 {
        let accesses = batch.iter().filter(|r| matches!(r, Record::Access { .. })).count() as u64;
        stats.records += batch.len() as u64;
        stats.accesses += accesses;
        stats.events += batch.len() as u64 - accesses;
        writer.write(&batch)?;
        progress(stats.records);
    }
    writer.finish()?;
    if to != Format::Xtr {
        stats.dropped_events = stats.events;
    }
    stats.input = reader.stats();
    Ok(stats)
}
