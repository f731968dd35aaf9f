//! The xtr reader: the header, the records decoded in place in a window of the stream, and the
//! blocks queued for other threads once a thread was offered the reader's spare work.

use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::ahead::{Ahead, JobState, AHEAD};
use super::decode::{decode_block, decode_run, not_in_block, with_words_sink, Params, Sink, Stop, Words};
use super::{
    extension, get_varint, tag, XtrHeader, ENCODING, MAGIC, MARGIN, MAX_BLOCK_BYTES, MAX_BLOCK_RECORDS,
    MAX_HEADER_FIELDS, SUPPORTED_VERSIONS, VERSION,
};
use crate::trace::spare::SpareWork;
use crate::trace::{
    refill_window, BatchWords, ObjectInfo, ReaderStats, Record, Tally, TraceCounts, TraceError, TraceNotes,
    TraceReader, SLOW_WORD,
};

/// Buffer size.
const CAP: usize = 1 << 18;
/// Zero bytes kept after the valid data so that decoding never indexes out of the buffer.
const PAD: usize = 32;

const _: () = assert!(MAX_BLOCK_BYTES as usize + 32 <= CAP, "a block and its header fit in the window");

/// Where a reader is in a block record ([`tag::BLOCK`]): the block is whole in the window,
/// which is not moved until it has been decoded.
#[derive(Clone, Copy, Debug)]
struct InBlock {
    /// Stream offset of the block's first record.
    first: u64,
    /// Records left to decode.
    left: usize,
    /// The block's end in the window.
    end: usize,
}

/// Streaming reader of xtr (the stream given must already be decompressed; see
/// [`decompress`](crate::trace::compress::decompress)).
pub struct XtrReader<R> {
    inner: R,
    name: String,
    header: XtrHeader,
    /// `CAP + PAD` bytes; `buf[end..end + PAD]` is always zero.
    buf: Box<[u8]>,
    pos: usize,
    end: usize,
    /// Stream offset of `buf[0]`.
    base: u64,
    eof: bool,
    /// The end record was read and checked.
    done: bool,
    last_addr: [u64; 4],
    last_size: [u32; 4],
    /// The block being decoded, if any.
    block: Option<InBlock>,
    /// Blocks queued for any thread to decode, once a thread was offered the reader's spare
    /// work ([`TraceReader::spare_work`]).
    ahead: Arc<Ahead>,
    helped: AtomicBool,
    /// Records of a queued block that [`TraceReader::read_batch`] has not handed out yet.
    rest: std::collections::VecDeque<Record>,
    records: u64,
    skipped: u64,
    notes: TraceNotes,
}

fn utf8(b: &[u8]) -> Option<String> {
    std::str::from_utf8(b).ok().map(str::to_string)
}

impl<R: Read> XtrReader<R> {
    /// Reads and checks the header of the xtr stream `inner`; `name` is used in errors.
    pub fn new(inner: R, name: &str) -> Result<XtrReader<R>, TraceError> {
        let mut r = XtrReader {
            inner,
            name: name.to_string(),
            header: XtrHeader {
                version: 0,
                encoding: String::new(),
                producer: String::new(),
                page_size: None,
                metadata: Vec::new(),
            },
            buf: vec![0u8; CAP + PAD].into_boxed_slice(),
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
            done: false,
            last_addr: [0; 4],
            last_size: [1; 4],
            block: None,
            ahead: Arc::new(Ahead::default()),
            helped: AtomicBool::new(false),
            rest: std::collections::VecDeque::new(),
            records: 0,
            skipped: 0,
            notes: TraceNotes::default(),
        };
        r.refill()?;
        r.header = r.parse_header()?;
        Ok(r)
    }

    /// The stream's header.
    pub fn header(&self) -> &XtrHeader {
        &self.header
    }

    fn err(&self, offset: u64, msg: impl std::fmt::Display) -> TraceError {
        TraceError::at_offset(&self.name, offset, msg)
    }

    fn parse_header(&mut self) -> Result<XtrHeader, TraceError> {
        let b = &self.buf[..self.end];
        if b.is_empty() {
            return Err(self.err(0, "empty input: expected an xtr header (magic \"XTR\\0\")"));
        }
        let have = b.len().min(4);
        if b[..have] != MAGIC[..have] {
            return Err(self.err(
                0,
                format!(
                    "not an xtr trace: starts with {:02x?}, expected the magic 58 54 52 00 (\"XTR\\0\")",
                    &b[..have]
                ),
            ));
        }
        if b.len() < 12 {
            return Err(
                self.err(b.len() as u64, "truncated xtr header: expected 12 bytes of magic, version, flags and length")
            );
        }
        let version = u16::from_le_bytes([b[4], b[5]]);
        if !SUPPORTED_VERSIONS.contains(&version) {
            return Err(
                self.err(4, format!("unsupported xtr version {version}; this reader supports version {VERSION}"))
            );
        }
        let flags = u16::from_le_bytes([b[6], b[7]]);
        if flags != 0 {
            return Err(self.err(6, format!("unknown xtr header flags {flags:#06x}; version {version} defines none")));
        }
        let flen = u32::from_le_bytes(b[8..12].try_into().unwrap()) as usize;
        if flen > MAX_HEADER_FIELDS {
            return Err(self.err(8, format!("header fields of {flen} bytes exceed the limit of {MAX_HEADER_FIELDS}")));
        }
        if b.len() < 12 + flen {
            return Err(
                self.err(b.len() as u64, format!("truncated xtr header: expected {flen} bytes of header fields"))
            );
        }
        let fields = &b[12..12 + flen];
        let mut h = XtrHeader {
            version,
            encoding: String::new(),
            producer: String::new(),
            page_size: None,
            metadata: Vec::new(),
        };
        let mut seen: Vec<String> = Vec::new();
        let mut p = 0;
        while p < fields.len() {
            let at = 12 + p as u64;
            let take = |p: &mut usize| -> Result<String, String> {
                let n = get_varint(fields, p).map_err(str::to_string)? as usize;
                let s = fields
                    .get(*p..p.saturating_add(n))
                    .ok_or_else(|| "header field runs past the header length".to_string())?;
                *p += n;
                utf8(s).ok_or_else(|| "header field is not UTF-8".to_string())
            };
            let key = take(&mut p).map_err(|m| self.err(at, m))?;
            let value = take(&mut p).map_err(|m| self.err(at, m))?;
            if key.is_empty() || seen.contains(&key) {
                return Err(self.err(at, format!("empty or repeated header key {key:?}")));
            }
            seen.push(key.clone());
            match key.as_str() {
                "encoding" => h.encoding = value,
                "producer" => h.producer = value,
                "page_size" => {
                    h.page_size = Some(
                        value
                            .parse()
                            .map_err(|_| self.err(at, format!("page_size {value:?} is not a number of bytes")))?,
                    )
                }
                _ => h.metadata.push((key, value)),
            }
        }
        if h.encoding != ENCODING {
            return Err(self
                .err(12, format!("unknown xtr record encoding {:?}; this reader supports {ENCODING:?}", h.encoding)));
        }
        self.pos = 12 + flen;
        Ok(h)
    }

    /// Moves the unread bytes to the front and reads until the buffer is full or the input ends.
    #[inline(never)]
    fn refill(&mut self) -> Result<(), TraceError> {
        refill_window(&mut self.inner, &mut self.buf, CAP, &mut self.pos, &mut self.end, &mut self.base, &mut self.eof)
            .map_err(|(off, e)| self.err(off, format!("cannot read: {e}")))?;
        self.buf[self.end..self.end + PAD].fill(0);
        Ok(())
    }

    fn truncated(&self, offset: u64) -> TraceError {
        self.err(offset, "truncated xtr trace: the data ends inside a record or before the end-of-trace record")
    }

    /// Makes at least `n` bytes available at `pos` unless the input ends first.
    fn want(&mut self, n: usize) -> Result<(), TraceError> {
        if self.end - self.pos < n && !self.eof {
            self.refill()?;
        }
        Ok(())
    }

    /// Handles an extension, end or unknown tag at `pos`.
    #[inline(never)]
    fn special(&mut self) -> Result<Option<Record>, TraceError> {
        self.want(MARGIN)?;
        let start = self.pos;
        let off = self.base + start as u64;
        let t = self.buf[start];
        let mut p = start + 1;
        match t {
            tag::EXTENSION => {
                let ty = get_varint(&self.buf, &mut p).map_err(|m| self.err(off, m))?;
                let len = get_varint(&self.buf, &mut p).map_err(|m| self.err(off, m))?;
                if p > self.end {
                    return Err(self.truncated(off));
                }
                self.pos = p;
                if matches!(
                    ty,
                    extension::UNTRACED_EXEC | extension::OBJECT | extension::OBJECT_INFO | extension::SYSCALL
                ) && len <= 4096
                {
                    self.want(len as usize)?;
                    if self.end - self.pos < len as usize {
                        return Err(self.truncated(off));
                    }
                    let payload = self.buf[self.pos..self.pos + len as usize].to_vec();
                    let payload = &payload[..];
                    self.pos += len as usize;
                    let name = self.name.clone();
                    let bad = |m: &str| TraceError::at_offset(&name, off, format!("object record: {m}"));
                    let mut q = 0;
                    match ty {
                        extension::UNTRACED_EXEC => {
                            self.notes.untraced_execs.push(String::from_utf8_lossy(payload).into_owned())
                        }
                        extension::OBJECT => {
                            let id = get_varint(payload, &mut q).map_err(bad)?;
                            let offset = get_varint(payload, &mut q).map_err(bad)?;
                            if q > payload.len() || id > u32::MAX as u64 {
                                return Err(bad("cut short or id out of range"));
                            }
                            return Ok(Some(Record::Object { id: id as u32, offset }));
                        }
                        extension::SYSCALL => {
                            let bad = |m: &str| TraceError::at_offset(&name, off, format!("syscall record: {m}"));
                            let mut v = [0u64; 5];
                            for x in &mut v {
                                *x = get_varint(payload, &mut q).map_err(bad)?;
                            }
                            if q > payload.len()
                                || v[0] > u16::MAX as u64
                                || v[1] > u8::MAX as u64
                                || v[2] > u32::MAX as u64
                            {
                                return Err(bad("cut short or a field out of range"));
                            }
                            return Ok(Some(Record::Syscall {
                                nr: v[0] as u16,
                                fd: v[1] as u8,
                                object: v[2] as u32,
                                buf: v[3],
                                len: v[4],
                            }));
                        }
                        _ => {
                            let id = get_varint(payload, &mut q).map_err(bad)?;
                            let dev = get_varint(payload, &mut q).map_err(bad)?;
                            let ino = get_varint(payload, &mut q).map_err(bad)?;
                            if q > payload.len() || id > u32::MAX as u64 {
                                return Err(bad("cut short or id out of range"));
                            }
                            let path = String::from_utf8_lossy(&payload[q..]).into_owned();
                            self.notes.objects.push(ObjectInfo { id: id as u32, dev, ino, path });
                        }
                    }
                    return Ok(None);
                }
                let mut left = len;
                while left > 0 {
                    if self.pos == self.end {
                        self.refill()?;
                        if self.pos == self.end {
                            return Err(self.truncated(off));
                        }
                    }
                    let n = left.min((self.end - self.pos) as u64);
                    self.pos += n as usize;
                    left -= n;
                }
                self.skipped += 1;
                Ok(None)
            }
            tag::BLOCK => {
                let records = get_varint(&self.buf, &mut p).map_err(|m| self.err(off, m))?;
                let bytes = get_varint(&self.buf, &mut p).map_err(|m| self.err(off, m))?;
                if p > self.end {
                    return Err(self.truncated(off));
                }
                if records == 0 || records > MAX_BLOCK_RECORDS || bytes < records || bytes > MAX_BLOCK_BYTES {
                    return Err(self.err(
                        off,
                        format!(
                            "corrupt block: {records} records in {bytes} bytes (expected 1 to {MAX_BLOCK_RECORDS} \
                             records, a byte of tag each at least, and at most {MAX_BLOCK_BYTES} bytes)"
                        ),
                    ));
                }
                let (head, records, bytes) = (p - start, records as usize, bytes as usize);
                // The whole block in the window (it moves the unread bytes to its front).
                self.want(head + bytes)?;
                let start = self.pos;
                if self.end - start < head + bytes {
                    return Err(self.truncated(off));
                }
                let first = self.base + (start + head) as u64;
                self.block = Some(InBlock { first, left: records, end: start + head + bytes });
                self.pos = start + head;
                // Each block starts from the state of a stream's start.
                self.last_addr = [0; 4];
                self.last_size = [1; 4];
                Ok(None)
            }
            tag::END => {
                let count = get_varint(&self.buf, &mut p).map_err(|m| self.err(off, m))?;
                if p > self.end {
                    return Err(self.truncated(off));
                }
                if count != self.records {
                    return Err(self.err(
                        off,
                        format!("end-of-trace record counts {count} records but {} were read", self.records),
                    ));
                }
                self.pos = p;
                self.want(1)?;
                if self.pos < self.end {
                    return Err(self.err(self.base + self.pos as u64, "data after the end-of-trace record"));
                }
                self.done = true;
                Ok(None)
            }
            _ => Err(self.err(
                off,
                format!("unknown record tag {t:#04x} (xtr version {VERSION} defines 0x00-0x8b, 0xfe, 0xff)"),
            )),
        }
    }
}

impl<R: Read + Send> XtrReader<R> {
    /// Decodes into `out[*n..]` until it is full or the trace ends.
    /// With `at_block`, stops before a block record instead (for [`XtrReader::fill`]).
    fn decode_into<S: Sink>(
        &mut self,
        out: &mut [Record],
        n: &mut usize,
        sink: &mut S,
        at_block: bool,
    ) -> Result<(), TraceError> {
        while !self.done && *n < out.len() {
            if let Some(mut b) = self.block {
                let before = *n;
                let take = *n + b.left.min(out.len() - *n);
                let room = &mut out[..take];
                let (pos, start, stop, s) =
                    decode_run(&self.buf, self.pos, b.end, &mut self.last_addr, &mut self.last_size, room, n, *sink);
                *sink = s;
                self.pos = pos;
                self.records += (*n - before) as u64;
                b.left -= *n - before;
                let off = self.base + start as u64;
                match stop {
                    Stop::Limit => {}
                    Stop::Special => return Err(self.err(off, not_in_block(self.buf[start]))),
                    Stop::Bad(m, _) => return Err(self.err(off, format!("corrupt block: {m}"))),
                }
                if pos > b.end || (b.left > 0 && pos == b.end) || (b.left == 0 && pos < b.end) {
                    return Err(self.err(b.first, "corrupt block: its records and its length disagree"));
                }
                self.block = (b.left > 0).then_some(b);
                continue;
            }
            if self.end - self.pos < MARGIN && !self.eof {
                self.refill()?;
            }
            if self.pos >= self.end {
                return Err(self.truncated(self.base + self.end as u64));
            }
            let limit = if self.eof { self.end } else { self.end - MARGIN + 1 };
            let before = *n;
            let (pos, start, stop, s) =
                decode_run(&self.buf, self.pos, limit, &mut self.last_addr, &mut self.last_size, out, n, *sink);
            *sink = s;
            self.pos = pos;
            self.records += (*n - before) as u64;
            if pos > self.end {
                return Err(self.truncated(self.base + start as u64));
            }
            match stop {
                Stop::Limit => {}
                Stop::Special => {
                    self.pos = start;
                    if at_block && self.buf[start] == tag::BLOCK {
                        return Ok(());
                    }
                    if let Some(r) = self.special()? {
                        out[*n] = r;
                        sink.event(*n);
                        *n += 1;
                    }
                }
                Stop::Bad(m, len) => {
                    let off = self.base + start as u64;
                    if start + len > self.end {
                        return Err(self.truncated(off));
                    }
                    return Err(self.err(off, format!("corrupt record: {m}")));
                }
            }
        }
        Ok(())
    }
}

impl<R: Read + Send> TraceReader for XtrReader<R> {
    /// The records are written in place: `out` keeps its length between batches (it is only
    /// shortened to the records read), so a recycled batch is never cleared or copied.
    fn read_batch(&mut self, out: &mut Vec<Record>, max: usize) -> Result<usize, TraceError> {
        // At most 64 Ki records a call (fewer than asked for is allowed), so that `out` stays
        // small whatever `max` is.
        let max = max.clamp(1, 1 << 16);
        if out.len() < max {
            out.resize(max, Record::Marker { id: 0 });
        }
        if self.rest.is_empty() && !self.ahead.lock().jobs.is_empty() {
            // Blocks were queued for `read_batch_words`: their records, in order.
            let (mut words, mut counts) = (Vec::new(), TraceCounts::default());
            let params = Params { shift: 12, all_records: true };
            self.serve(out, &mut words, &mut counts, params, false)?;
            self.rest.extend(out.drain(..));
        }
        if !self.rest.is_empty() {
            out.clear();
            out.extend(self.rest.drain(..max.min(self.rest.len())));
            return Ok(out.len());
        }
        let mut n = 0;
        let result = self.decode_into(&mut out[..max], &mut n, &mut (), false);
        out.truncate(n);
        result.map(|()| n)
    }

    /// Counts and writes the page words as it decodes, in place as [`XtrReader::read_batch`]
    /// writes records. Once the reader's spare work was asked for, blocks go through the queue
    /// that other threads help decode (the `ahead` module).
    fn read_batch_words(&mut self, out: &mut Vec<Record>, max: usize, w: BatchWords<'_>) -> Result<usize, TraceError> {
        let max = max.clamp(1, Tally::MAX);
        if !self.rest.is_empty() {
            out.clear();
            out.extend(self.rest.drain(..max.min(self.rest.len())));
            w.counts.add_words(out, w.shift, w.words);
            return Ok(out.len());
        }
        if !self.helped.load(Ordering::Relaxed) {
            return self.decode_words(out, max, w, false);
        }
        let BatchWords { words, shift, counts, all_records, for_other_core } = w;
        let params = Params { shift, all_records };
        loop {
            self.fill(max, params)?;
            if let Some(n) = self.serve(out, words, counts, params, for_other_core)? {
                return Ok(n);
            }
            // Up to the next block.
            let w = BatchWords { words: &mut *words, shift, counts: &mut *counts, all_records, for_other_core };
            let n = self.decode_words(out, max, w, true)?;
            if n > 0 || self.done {
                return Ok(n);
            }
        }
    }

    fn stats(&self) -> ReaderStats {
        ReaderStats { bytes: self.base + self.pos as u64, records: self.records, skipped: self.skipped }
    }

    fn notes(&self) -> TraceNotes {
        self.notes.clone()
    }

    fn spare_work(&self) -> Option<Arc<dyn SpareWork>> {
        self.helped.store(true, Ordering::Relaxed);
        Some(self.ahead.clone())
    }
}

impl<R: Read + Send> XtrReader<R> {
    /// Decodes up to `max` records here, making what `w` asks for (stopping before a block
    /// record if `at_block`).
    fn decode_words(
        &mut self,
        out: &mut Vec<Record>,
        max: usize,
        w: BatchWords<'_>,
        at_block: bool,
    ) -> Result<usize, TraceError> {
        if out.len() < max {
            out.resize(max, Record::Marker { id: 0 });
        }
        if w.words.len() < max {
            w.words.resize(max, SLOW_WORD);
        }
        let mut n = 0;
        let (words, shift) = (&mut w.words[..max], w.shift);
        // `out[..max]` and `words` (of length `max`): the sink's bound.
        let batch = &mut out[..max];
        let (result, tally) = with_words_sink!(w.all_records, shift, false, words => sink; {
            let mut sink = sink;
            (self.decode_into(batch, &mut n, &mut sink, at_block), sink.tally)
        });
        out.truncate(n);
        w.words.truncate(n);
        result?;
        w.counts.add_tally(&tally);
        Ok(n)
    }

    /// Queues the block records that come next (up to [`AHEAD`] waiting), each of at most `max`
    /// records, for any thread to decode as `params` say. A larger block is decoded here, in
    /// place, as is any other record; a malformed block header is reported here.
    fn fill(&mut self, max: usize, params: Params) -> Result<(), TraceError> {
        while !self.done && self.block.is_none() && self.ahead.lock().jobs.len() < AHEAD {
            self.want(MARGIN)?;
            if self.pos >= self.end || self.buf[self.pos] != tag::BLOCK {
                return Ok(());
            }
            let mut p = self.pos + 1;
            let head = get_varint(&self.buf, &mut p).and_then(|r| Ok((r, get_varint(&self.buf, &mut p)?)));
            let (records, bytes) = match head {
                Ok((r, b)) if p <= self.end && r >= 1 && r <= max as u64 && b >= r && b <= MAX_BLOCK_BYTES => {
                    (r as usize, b as usize)
                }
                // Decoded in place from here, or reported.
                _ => return self.special().map(|_| ()),
            };
            let head = p - self.pos;
            self.want(head + bytes)?;
            if self.end - self.pos < head + bytes {
                return Err(self.truncated(self.base + self.pos as u64));
            }
            let start = self.pos + head;
            let mut raw = self.ahead.lock().raw_buffer();
            raw.clear();
            raw.extend_from_slice(&self.buf[start..start + bytes]);
            raw.resize(bytes + MARGIN, 0);
            self.ahead.lock().push(raw, bytes, records, self.base + start as u64, params);
            self.pos = start + bytes;
        }
        Ok(())
    }

    /// Hands out the first queued block as a batch (`None` if none is queued): decoded by a
    /// helper, or else here. While a helper decodes it, this thread decodes the next waiting one.
    fn serve(
        &mut self,
        out: &mut Vec<Record>,
        words: &mut Vec<u64>,
        counts: &mut TraceCounts,
        params: Params,
        for_other_core: bool,
    ) -> Result<Option<usize>, TraceError> {
        let ahead = self.ahead.clone();
        let job = loop {
            let mut q = ahead.lock();
            match q.jobs.front().map(|j| &j.state) {
                None => return Ok(None),
                Some(JobState::Done(_)) => break q.jobs.pop_front().expect("a front job"),
                Some(_) => match Ahead::take_two(&mut q) {
                    Some(taken) => {
                        drop(q);
                        ahead.finish_taken(taken, for_other_core);
                    }
                    None => {
                        drop(q);
                        std::thread::yield_now();
                    }
                },
            }
        };
        let JobState::Done(result) = job.state else { unreachable!("popped when done") };
        let mut d = result.map_err(|(m, off)| self.err(off, m))?;
        if job.params != params {
            // Queued for other parameters (not within a run): decoded again for these.
            d.tally = decode_block::<false>(&job.raw, job.bytes, job.records, params, &mut d.records, &mut d.words)
                .map_err(|(m, at)| self.err(job.offset + at as u64, m))?;
        }
        std::mem::swap(out, &mut d.records);
        std::mem::swap(words, &mut d.words);
        counts.add_tally(&d.tally);
        self.records += job.records as u64;
        ahead.lock().recycle(job.raw, (d.records, d.words));
        Ok(Some(job.records))
    }
}
