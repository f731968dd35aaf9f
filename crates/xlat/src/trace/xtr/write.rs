//! The xtr writer: accesses delta-encoded into blocks of records, events and extension records,
//! the end record, inside the compression the options ask for.

use std::io::Write;

use super::{
    extension, put_varint, tag, XtrOptions, BLOCK_BYTES, BLOCK_RECORDS, ENCODING, MAGIC, MARGIN, MAX_HEADER_FIELDS,
    SIZE_FLAG, VERSION,
};
use crate::trace::compress::{CompressedWriter, Compression};
use crate::trace::{Kind, Record, TraceError, TraceWriter};

/// Writes xtr (zstd-compressed unless the options say otherwise).
///
/// The end-of-trace record is written by [`TraceWriter::finish`] /
/// [`XtrWriter::finish_into_inner`]; a writer dropped without finishing leaves a file that
/// readers reject as truncated.
pub struct XtrWriter<W: Write> {
    out: CompressedWriter<W>,
    name: String,
    buf: Vec<u8>,
    last_addr: [u64; 4],
    last_size: [u32; 4],
    records: u64,
    /// The block being made: `count` records in `block[..blen]` (the rest room for the longest
    /// record).
    block: Vec<u8>,
    blen: usize,
    count: usize,
}

const FLUSH_AT: usize = 1 << 16;

#[inline(always)]
fn byte_len(v: u64) -> usize {
    ((71 - v.leading_zeros()) / 8) as usize
}

/// Writes the encoding of one access at `out[p..]` (which must have 16 bytes of room) and
/// returns the position after it. Fixed-width stores, no per-byte pushes.
#[inline(always)]
fn encode_access(
    out: &mut [u8],
    p: usize,
    la: &mut [u64; 4],
    ls: &mut [u32; 4],
    kind: Kind,
    size: u32,
    addr: u64,
) -> usize {
    let k = kind as usize;
    let delta = addr.wrapping_sub(la[k]);
    la[k] = addr;
    let mag = delta.wrapping_neg();
    let (code, bytes, len) = if (delta as i64) < 0 && mag < 1 << 56 {
        let len = byte_len(mag);
        (8 + len, mag, len)
    } else {
        let len = byte_len(delta);
        (len, delta, len)
    };
    let explicit = size != ls[k];
    ls[k] = size;
    let mut w = [0u8; 16];
    w[0] = k as u8 | (code as u8) << 2 | if explicit { SIZE_FLAG } else { 0 };
    w[1..9].copy_from_slice(&bytes.to_le_bytes());
    let mut n = 1 + len;
    if explicit {
        if size <= 255 {
            w[n & 15] = size as u8;
            n += 1;
        } else {
            // w[n] stays 0: the escape.
            w[(n + 1) & 15..][..4].copy_from_slice(&size.to_le_bytes());
            n += 5;
        }
    }
    out[p..p + 16].copy_from_slice(&w);
    p + n
}

fn encode_event(buf: &mut Vec<u8>, r: &Record) {
    match *r {
        Record::Access { .. } => unreachable!(),
        Record::Process { asid } => {
            buf.push(tag::PROCESS);
            put_varint(buf, asid as u64);
        }
        Record::ContextSwitch { asid } => {
            buf.push(tag::CONTEXT_SWITCH);
            put_varint(buf, asid as u64);
        }
        Record::Map { start, len, flags } => {
            buf.push(tag::MAP);
            put_varint(buf, start);
            put_varint(buf, len);
            put_varint(buf, flags as u64);
        }
        Record::Unmap { start, len } => {
            buf.push(tag::UNMAP);
            put_varint(buf, start);
            put_varint(buf, len);
        }
        Record::Fork { child } => {
            buf.push(tag::FORK);
            put_varint(buf, child as u64);
        }
        Record::Exit { asid } => {
            buf.push(tag::EXIT);
            put_varint(buf, asid as u64);
        }
        Record::Ipc { to } => {
            buf.push(tag::IPC);
            put_varint(buf, to as u64);
        }
        Record::Marker { id } => {
            buf.push(tag::MARKER);
            put_varint(buf, id);
        }
        Record::Thread { tid } => {
            buf.push(tag::THREAD);
            put_varint(buf, tid as u64);
        }
        Record::Protect { start, len, flags } => {
            buf.push(tag::PROTECT);
            put_varint(buf, start);
            put_varint(buf, len);
            put_varint(buf, flags as u64);
        }
        Record::Discard { start, len, lazy } => {
            buf.push(tag::DISCARD);
            put_varint(buf, start);
            put_varint(buf, len);
            put_varint(buf, lazy as u64);
        }
        Record::Object { .. } | Record::Syscall { .. } => unreachable!("written as an extension"),
    }
}

fn put_str(buf: &mut Vec<u8>, s: &str) {
    put_varint(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

impl<W: Write> XtrWriter<W> {
    /// Writes a zstd-compressed xtr stream with default options to `inner`.
    pub fn new(inner: W, name: &str) -> Result<XtrWriter<W>, TraceError> {
        XtrWriter::with_options(inner, name, XtrOptions::default())
    }

    /// Writes an xtr stream to `inner` as `opts` say; `name` is used in errors.
    pub fn with_options(inner: W, name: &str, opts: XtrOptions) -> Result<XtrWriter<W>, TraceError> {
        let mut fields = Vec::new();
        put_str(&mut fields, "encoding");
        put_str(&mut fields, ENCODING);
        put_str(&mut fields, "producer");
        put_str(&mut fields, &opts.producer);
        if let Some(ps) = opts.page_size {
            put_str(&mut fields, "page_size");
            put_str(&mut fields, &ps.to_string());
        }
        let mut keys = vec!["encoding", "producer", "page_size"];
        for (k, v) in &opts.metadata {
            if k.is_empty() || keys.contains(&k.as_str()) {
                return Err(TraceError::Format {
                    source_name: name.to_string(),
                    message: format!("xtr metadata key {k:?} is empty, reserved or repeated"),
                });
            }
            keys.push(k);
            put_str(&mut fields, k);
            put_str(&mut fields, v);
        }
        if fields.len() > MAX_HEADER_FIELDS {
            return Err(TraceError::Format {
                source_name: name.to_string(),
                message: format!("xtr header fields exceed {MAX_HEADER_FIELDS} bytes"),
            });
        }
        let mut buf = Vec::with_capacity(FLUSH_AT + 64 + fields.len());
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        buf.extend_from_slice(&0u16.to_le_bytes());
        buf.extend_from_slice(&(fields.len() as u32).to_le_bytes());
        buf.extend_from_slice(&fields);
        let out = CompressedWriter::new(inner, opts.compression)
            .map_err(|e| TraceError::Io { source_name: name.to_string(), error: e })?;
        Ok(XtrWriter {
            out,
            name: name.to_string(),
            buf,
            last_addr: [0; 4],
            last_size: [1; 4],
            records: 0,
            block: vec![0; BLOCK_BYTES + 2 * MARGIN],
            blen: 0,
            count: 0,
        })
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Writes an extension record of type `ty` (skipped by readers that do not know it).
    pub fn write_extension(&mut self, ty: u64, payload: &[u8]) -> Result<(), TraceError> {
        self.end_block();
        self.buf.push(tag::EXTENSION);
        put_varint(&mut self.buf, ty);
        put_varint(&mut self.buf, payload.len() as u64);
        self.buf.extend_from_slice(payload);
        self.flush_if_full()
    }

    /// Writes the block being made (if it holds a record) as a block record, and starts the
    /// next from a stream's initial state.
    fn end_block(&mut self) {
        if self.count == 0 {
            return;
        }
        self.buf.push(tag::BLOCK);
        put_varint(&mut self.buf, self.count as u64);
        put_varint(&mut self.buf, self.blen as u64);
        self.buf.extend_from_slice(&self.block[..self.blen]);
        self.count = 0;
        self.blen = 0;
        self.last_addr = [0; 4];
        self.last_size = [1; 4];
    }

    fn flush_buf(&mut self) -> Result<(), TraceError> {
        if let Err(e) = self.out.write_all(&self.buf) {
            return Err(TraceError::Io { source_name: self.name.clone(), error: e });
        }
        self.buf.clear();
        Ok(())
    }

    #[inline]
    fn flush_if_full(&mut self) -> Result<(), TraceError> {
        if self.buf.len() >= FLUSH_AT {
            self.flush_buf()?;
        }
        Ok(())
    }

    /// Writes the end-of-trace record, ends the compression and returns the inner writer.
    pub fn finish_into_inner(mut self) -> Result<W, TraceError> {
        self.end_block();
        self.buf.push(tag::END);
        put_varint(&mut self.buf, self.records);
        self.flush_buf()?;
        let name = self.name;
        self.out.finish().map_err(|e| TraceError::Io { source_name: name, error: e })
    }
}

impl<W: Write> TraceWriter for XtrWriter<W> {
    /// Writes the records in blocks of [`BLOCK_RECORDS`] ([`tag::BLOCK`]), and objects and
    /// system calls as extension records between blocks.
    fn write(&mut self, records: &[Record]) -> Result<(), TraceError> {
        let mut event = Vec::with_capacity(MARGIN);
        for r in records {
            match *r {
                Record::Access { kind, size, addr } => {
                    self.blen = encode_access(
                        &mut self.block,
                        self.blen,
                        &mut self.last_addr,
                        &mut self.last_size,
                        kind,
                        size,
                        addr,
                    );
                }
                Record::Object { .. } | Record::Syscall { .. } => {
                    // An extension record, not counted (older readers skip it).
                    event.clear();
                    let ty = match *r {
                        Record::Object { id, offset } => {
                            put_varint(&mut event, id as u64);
                            put_varint(&mut event, offset);
                            extension::OBJECT
                        }
                        Record::Syscall { nr, fd, object, buf, len } => {
                            for v in [nr as u64, fd as u64, object as u64, buf, len] {
                                put_varint(&mut event, v);
                            }
                            extension::SYSCALL
                        }
                        _ => unreachable!(),
                    };
                    self.write_extension(ty, &event)?;
                    continue;
                }
                ref ev => {
                    event.clear();
                    encode_event(&mut event, ev);
                    self.block[self.blen..self.blen + event.len()].copy_from_slice(&event);
                    self.blen += event.len();
                }
            }
            self.records += 1;
            self.count += 1;
            if self.count == BLOCK_RECORDS || self.blen >= BLOCK_BYTES {
                self.end_block();
                self.flush_if_full()?;
            }
        }
        Ok(())
    }

    fn finish(self: Box<Self>) -> Result<(), TraceError> {
        self.finish_into_inner().map(|_| ())
    }
}

/// Encodes `records` as a complete xtr stream in memory (`compression` around it).
pub fn encode_to_vec(records: &[Record], compression: Compression) -> Result<Vec<u8>, TraceError> {
    let opts = XtrOptions { compression, ..XtrOptions::default() };
    let mut w = XtrWriter::with_options(Vec::new(), "<memory>", opts)?;
    w.write(records)?;
    w.finish_into_inner()
}
