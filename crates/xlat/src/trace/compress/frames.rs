//! zstd or LZ4 input made of small frames, decompressed by whichever thread is free.
//!
//! xlat writes zstd as independent frames of at most [`FRAME_BYTES`] of content, each declaring
//! its content size ([`FrameWriter`]; docs/trace-format.md). Reading such a stream, the thread
//! that decodes the trace takes the frames in order ([`Frames`]), and a thread that would
//! otherwise wait for it (a run's simulation, when it is ahead of the reader) may decompress
//! the next few meanwhile ([`SpareWork::help`]): the decompression, a third of a reader's work on
//! a real program's trace, then goes to the core with time to spare. Any zstd stream reads: a
//! frame without a content size or larger than [`MAX_CONTENT`] (another tool's, or an older
//! xlat's single frame), and everything after it, is decompressed in order by the reader as one
//! stream, as before. Memory stays bounded: at most [`AHEAD`] frames wait decompressed.
//!
//! LZ4 input ([`super::lz4`]) is read the same way: frames with a content size and independent
//! blocks are taken alone (and checked against the XXH3-64 that xlat writes after each), and from
//! the first other frame on the stream is decompressed in order.

use std::collections::VecDeque;
use std::io::{self, Cursor, Read, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use super::framing::{Framed, Framer};
use super::{layers, lz4, Compression, LZ4_MAGIC, SKIPPABLE, ZSTD_MAGIC};
use crate::trace::spare::{help_once, SpareWork};

/// Content bytes per frame that [`FrameWriter`] writes: about a tenth of a millisecond of
/// decompression, small enough that the frames ahead and their content stay in the cores'
/// caches, and about as well compressed as one frame. On the benchmark's real trace (level 3)
/// 1 MiB frames made 4,600,130 bytes and 256 KiB frames 4,684,799 (1.8 % more), and a run
/// over the latter took 0.0655 s against 0.0693 s (medians of 16 alternated runs; 128 KiB
/// frames: 0.0658 s, 4,813,279 bytes), with fewer fresh pages touched for the frames.
pub const FRAME_BYTES: usize = 1 << 18;

/// Frames whose declared content is larger are read in order with the rest of the stream.
pub const MAX_CONTENT: u64 = 8 << 20;

/// Frames decompressed (or being decompressed) ahead of the one the reader is in.
const AHEAD: usize = 4;

/// Which of [`State::spare`]'s buffers: compressed frames, and their content.
const IN: usize = 0;
const OUT: usize = 1;

/// The bytes of a zstd frame header (RFC 8878, §3.1.1.1) after its descriptor `fhd`: the
/// window descriptor unless single-segment, the dictionary ID and the content size; and how
/// many of them are the content size (the last).
fn zstd_header(fhd: u8) -> (usize, usize) {
    let (fcs_flag, single) = (fhd >> 6, fhd & 0x20 != 0);
    let did = [0, 1, 2, 4][(fhd & 3) as usize];
    let fcs = match (fcs_flag, single) {
        (0, false) => 0,
        (0, true) => 1,
        (f, _) => 1 << f,
    };
    ((!single) as usize + did + fcs, fcs)
}

/// Writes what it is given as zstd frames of [`FRAME_BYTES`] of content (the last one
/// shorter), each with its content size and a checksum, at compression level 3, their literals
/// left uncompressed where Huffman coding saves little ([`Zstd`]).
pub type FrameWriter<W> = Framed<W, Zstd>;

/// One frame in this many (the first, the 17th, ...) is compressed both with its literals
/// Huffman-coded and without: the smaller, as [`RAW_LITERALS_COST`] weighs them, is written, and
/// the frames up to the next such probe are compressed that way.
pub const PROBE_EVERY: u32 = 16;

/// How much larger, in sixteenths, a frame may be with its literals stored raw rather than
/// Huffman-coded for [`FrameWriter`] to store them raw: raw literals decompress faster. On the
/// benchmark's real trace (level 3, frames of [`FRAME_BYTES`]) raw literals make the frames
/// 2.6 % larger and decompress 9 % faster (17.6 ms against 19.3 ms for the 53 MB of content;
/// zstd 1.5.7, one core of the family-26 EPYC VM), the traces of `gzip` and of the database
/// workload 0.9 % and 1.1 % larger; on the synthetic trace (uniformly random pages), whose
/// literals are random low bits, Huffman coding saves 18 %, and on lackey text 16 %, so they keep it.
pub const RAW_LITERALS_COST: u64 = 1;

/// zstd frames at level 3, each with its content size and a checksum, with literals stored raw
/// or Huffman-coded as the last probe found ([`PROBE_EVERY`]).
pub struct Zstd {
    compressor: zstd::bulk::Compressor<'static>,
    /// Frames written since the last probe.
    since_probe: u32,
    /// The probe's other frame.
    other: Vec<u8>,
}

impl Zstd {
    fn new() -> io::Result<Zstd> {
        let mut compressor = zstd::bulk::Compressor::new(3)?;
        compressor.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))?;
        compressor.set_parameter(zstd::stream::raw::CParameter::ContentSizeFlag(true))?;
        Ok(Zstd { compressor, since_probe: 0, other: Vec::new() })
    }

    /// Makes the compressor store literals raw or not (zstd's default for the level: Huffman
    /// coding).
    fn store_raw(&mut self, raw: bool) -> io::Result<()> {
        use zstd::zstd_safe::ParamSwitch;
        let mode = if raw { ParamSwitch::Disable } else { ParamSwitch::Auto };
        self.compressor.set_parameter(zstd::stream::raw::CParameter::LiteralCompressionMode(mode))?;
        Ok(())
    }

    fn compress(&mut self, content: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        out.clear();
        out.reserve(zstd::zstd_safe::compress_bound(content.len()));
        self.compressor.compress_to_buffer(content, out).map(|_| ())
    }
}

impl Framer for Zstd {
    const FRAME_BYTES: usize = FRAME_BYTES;

    fn frame(&mut self, content: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        if self.since_probe == 0 {
            let mut other = std::mem::take(&mut self.other);
            self.store_raw(false)?;
            self.compress(content, out)?;
            self.store_raw(true)?;
            self.compress(content, &mut other)?;
            let raw = other.len() as u64 * 16 <= out.len() as u64 * (16 + RAW_LITERALS_COST);
            if raw {
                std::mem::swap(out, &mut other);
            } else {
                self.store_raw(false)?;
            }
            self.other = other;
        } else {
            self.compress(content, out)?;
        }
        self.since_probe = (self.since_probe + 1) % PROBE_EVERY;
        Ok(())
    }
}

impl<W: Write> FrameWriter<W> {
    /// A writer of zstd frames into `inner`.
    pub fn new(inner: W) -> io::Result<FrameWriter<W>> {
        Ok(Framed::with(inner, Zstd::new()?))
    }
}

/// The decompressed stream of `codec` ([`Compression::Zstd`] or [`Compression::Lz4`]) input
/// `source`, frame by frame (see the module documentation), and the spare work of decompressing
/// its next frames.
pub fn frames(source: Box<dyn Read + Send>, codec: Compression) -> (Frames, Arc<dyn SpareWork>) {
    assert!(matches!(codec, Compression::Zstd | Compression::Lz4), "frames of zstd or LZ4");
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            codec,
            source: Some(source),
            back: Vec::new(),
            first: 0,
            offset: 0,
            produced: 0,
            slots: VecDeque::new(),
            end: None,
            spare: [Vec::new(), Vec::new()],
        }),
        ready: Condvar::new(),
    });
    (Frames { shared: shared.clone(), cur: Vec::new(), pos: 0, rest: None }, shared)
}

/// The reader's end of [`frames`].
pub struct Frames {
    shared: Arc<Shared>,
    /// The frame being read, from `pos`.
    cur: Vec<u8>,
    pos: usize,
    /// The rest of the stream, read in order once a frame could not be taken alone.
    rest: Option<Box<dyn Read + Send>>,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a frame is done.
    ready: Condvar,
}

struct State {
    /// What compresses the input.
    codec: Compression,
    /// The compressed input, until its end (or a frame that cannot be taken alone, or an error).
    source: Option<Box<dyn Read + Send>>,
    /// Bytes read from `source` past a frame and given back, to read before it.
    back: Vec<u8>,
    /// The number of the frame in `slots[0]` (the reader's next), counting from the first.
    first: u64,
    /// Compressed bytes read from `source`, and the content of the frames taken from it.
    offset: u64,
    produced: u64,
    /// The frames taken from `source` and not yet read, in order: decompressed, or `None`
    /// while a thread decompresses them.
    slots: VecDeque<Option<io::Result<Vec<u8>>>>,
    /// What comes after the frames in `slots` once `source` is gone.
    end: Option<End>,
    /// Buffers to reuse: for compressed frames ([`IN`]) and for their content ([`OUT`]).
    spare: [Vec<Vec<u8>>; 2],
}

enum End {
    /// The input ended after a whole frame.
    Eof,
    /// The rest of the stream, decompressed in order.
    Rest(Box<dyn Read + Send>),
    /// The input could not be read or is corrupt there.
    Failed(io::Error),
}

/// A frame taken from the input, to decompress.
struct Taken {
    /// Its number, counting from the first frame.
    seq: u64,
    /// Its compressed bytes, where they start in the input, its content size and the content
    /// before it.
    bytes: Vec<u8>,
    offset: u64,
    content: usize,
    produced: u64,
    /// The buffer to decompress it into.
    out: Vec<u8>,
    /// Its codec and where its blocks start in `bytes` (LZ4), and the XXH3-64 of its content
    /// if one came with it (LZ4).
    codec: Compression,
    blocks: usize,
    hash: Option<u64>,
}

/// A frame found in the input ([`State::take_from`]): its content size, and where its blocks
/// start and its content's XXH3-64 as [`Taken`] has them.
struct Found {
    content: usize,
    blocks: usize,
    hash: Option<u64>,
}

/// The error of corrupt or cut `codec` input at compressed byte `offset`, with `produced`
/// bytes decompressed before it (as the decompression layers say it).
fn corrupt(codec: Compression, offset: u64, produced: u64, e: impl std::fmt::Display) -> io::Error {
    layers::corrupt(io::ErrorKind::InvalidData, codec, offset, produced, e)
}

/// Reads `n` more bytes onto `v`, those given `back` first, then from `src`; false if the
/// input ended first.
fn read_onto(back: &mut Vec<u8>, src: &mut dyn Read, v: &mut Vec<u8>, n: usize) -> io::Result<bool> {
    let k = n.min(back.len());
    v.extend(back.drain(..k));
    let got = k + Read::take(&mut *src, (n - k) as u64).read_to_end(v)?;
    Ok(got == n)
}

impl State {
    /// Takes the next frame from the input if there is room for it ahead; sets `end` instead
    /// when the input ends, fails or has a frame that cannot be taken alone.
    fn take(&mut self) -> Option<Taken> {
        if self.slots.len() >= AHEAD {
            return None;
        }
        let mut src = self.source.take()?;
        let mut bytes = self.spare[IN].pop().unwrap_or_default();
        bytes.clear();
        match self.take_from(&mut src, &mut bytes) {
            Ok(Some(Found { content, blocks, hash })) => {
                let offset = self.offset;
                self.offset += bytes.len() as u64;
                let produced = self.produced;
                self.produced += content as u64;
                self.source = Some(src);
                let seq = self.first + self.slots.len() as u64;
                self.slots.push_back(None);
                let out = self.spare[OUT].pop().unwrap_or_default();
                Some(Taken { seq, bytes, offset, content, produced, out, codec: self.codec, blocks, hash })
            }
            Ok(None) if bytes.is_empty() => {
                self.end = Some(End::Eof);
                None
            }
            Ok(None) => {
                // A frame to read in order, with everything after it.
                let rest = Cursor::new(bytes).chain(Cursor::new(std::mem::take(&mut self.back))).chain(src);
                let end = match layers::layer(self.codec, rest, self.offset, self.produced) {
                    Ok(d) => End::Rest(d),
                    Err(e) => End::Failed(e),
                };
                self.end = Some(end);
                None
            }
            Err(e) => {
                self.end = Some(End::Failed(e));
                None
            }
        }
    }

    /// Reads the next frame of `src` onto `bytes` (skipping skippable frames): what it is if it
    /// declares a content size of at most [`MAX_CONTENT`] (and, LZ4, has independent blocks);
    /// `None` with `bytes` empty at the end of the input, or with the bytes read so far if the
    /// frame is to be read in order.
    fn take_from(&mut self, src: &mut dyn Read, bytes: &mut Vec<u8>) -> io::Result<Option<Found>> {
        let at = |s: &State, n: usize| s.offset + n as u64;
        let codec = self.codec;
        let corrupt = |o, p, e| corrupt(codec, o, p, e);
        loop {
            bytes.clear();
            if !read_onto(&mut self.back, src, bytes, 4)? {
                if bytes.is_empty() {
                    return Ok(None);
                }
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame's magic number"));
            }
            let magic = u32::from_le_bytes(bytes[..4].try_into().unwrap());
            if SKIPPABLE.contains(&magic) {
                if !read_onto(&mut self.back, src, bytes, 4)? {
                    return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a skippable frame"));
                }
                let len = u32::from_le_bytes(bytes[4..8].try_into().unwrap()) as u64;
                let skipped = io::copy(&mut Read::take(&mut *src, len), &mut io::sink())?;
                if skipped < len {
                    return Err(corrupt(at(self, 8) + skipped, self.produced, "cut inside a skippable frame"));
                }
                self.offset += 8 + len;
                continue;
            }
            match (codec, magic) {
                (Compression::Zstd, ZSTD_MAGIC) => {}
                (Compression::Lz4, LZ4_MAGIC) => return self.take_lz4(src, bytes),
                // Not a frame: the in-order decoder reports it as the codec's decoder does.
                _ => return Ok(None),
            }
            // The frame header (RFC 8878, §3.1.1.1): the descriptor, then the window
            // descriptor unless single-segment, the dictionary ID and the content size.
            if !read_onto(&mut self.back, src, bytes, 1)? {
                return Ok(None);
            }
            let fhd = bytes[4];
            let (header, fcs) = zstd_header(fhd);
            if fcs == 0 || !read_onto(&mut self.back, src, bytes, header)? {
                return Ok(None);
            }
            let mut v = [0u8; 8];
            v[..fcs].copy_from_slice(&bytes[5 + header - fcs..5 + header]);
            let content = u64::from_le_bytes(v) + if fcs == 2 { 256 } else { 0 };
            if content > MAX_CONTENT {
                return Ok(None);
            }
            // The blocks (§3.1.1.2), each with a 3-byte header, then the checksum if any.
            loop {
                if !read_onto(&mut self.back, src, bytes, 3)? {
                    return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame"));
                }
                let h = bytes.len() - 3;
                let b = u32::from_le_bytes([bytes[h], bytes[h + 1], bytes[h + 2], 0]);
                let (last, kind, size) = (b & 1 != 0, (b >> 1) & 3, (b >> 3) as usize);
                let payload = match kind {
                    0 | 2 => size,
                    1 => 1,
                    _ => return Err(corrupt(at(self, h), self.produced, "reserved block type")),
                };
                if !read_onto(&mut self.back, src, bytes, payload)? {
                    return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame"));
                }
                // Memory stays bounded by the content, whatever a damaged header says: no frame
                // of this content takes twice its size.
                if bytes.len() as u64 > 2 * content + (64 << 10) {
                    return Err(corrupt(at(self, 0), self.produced, "frame much larger than its content"));
                }
                if last {
                    break;
                }
            }
            if fhd & 4 != 0 && !read_onto(&mut self.back, src, bytes, 4)? {
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame's checksum"));
            }
            return Ok(Some(Found { content: content as usize, blocks: 0, hash: None }));
        }
    }

    /// [`State::take_from`] of an LZ4 frame, whose magic number `bytes` holds: its header and
    /// blocks, and the skippable frame with its XXH3-64 if one follows.
    fn take_lz4(&mut self, src: &mut dyn Read, bytes: &mut Vec<u8>) -> io::Result<Option<Found>> {
        let at = |s: &State, n: usize| s.offset + n as u64;
        let corrupt = |o, p, e| corrupt(Compression::Lz4, o, p, e);
        // A cut header is an error here: the general decoder would read it as the end.
        let cut = |s: &State, n| corrupt(at(s, n), s.produced, "cut inside a frame's header");
        if !read_onto(&mut self.back, src, bytes, 2)? {
            return Err(cut(self, bytes.len()));
        }
        if !lz4::alone(bytes) {
            return Ok(None);
        }
        if !read_onto(&mut self.back, src, bytes, lz4::HEADER_LEN - 6)? {
            return Err(cut(self, bytes.len()));
        }
        let Some(h) = lz4::header(bytes).filter(|h| h.content <= MAX_CONTENT) else { return Ok(None) };
        loop {
            if !read_onto(&mut self.back, src, bytes, 4)? {
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame"));
            }
            let w = bytes.len() - 4;
            let (size, compressed) = lz4::block(bytes[w..].try_into().unwrap());
            if size == 0 && compressed {
                break;
            }
            if size > h.block_max {
                return Err(corrupt(at(self, w), self.produced, "block larger than its frame allows"));
            }
            if !read_onto(&mut self.back, src, bytes, size)? {
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame"));
            }
            // Memory stays bounded by the content, whatever a damaged header says.
            if bytes.len() as u64 > 2 * h.content + (64 << 10) {
                return Err(corrupt(at(self, 0), self.produced, "frame much larger than its content"));
            }
        }
        // The XXH3-64 that xlat writes after the frame, kept in `bytes` (it ends the frame's
        // compressed bytes); anything else is given back.
        let end = bytes.len();
        let mut hash = None;
        if read_onto(&mut self.back, src, bytes, 8)?
            && u32::from_le_bytes(bytes[end..end + 4].try_into().unwrap()) == lz4::CHECKSUM_MAGIC
            && u32::from_le_bytes(bytes[end + 4..end + 8].try_into().unwrap()) as usize == lz4::CHECKSUM_LEN
        {
            if !read_onto(&mut self.back, src, bytes, lz4::CHECKSUM_LEN)? {
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a skippable frame"));
            }
            hash = lz4::checksum(&bytes[end + 8..]);
        }
        if hash.is_none() {
            let mut rest = bytes.split_off(end);
            rest.append(&mut self.back);
            self.back = rest;
        }
        Ok(Some(Found { content: h.content as usize, blocks: lz4::HEADER_LEN, hash }))
    }
}

impl Taken {
    /// Decompresses the frame: its content, or the error that says where it is corrupt.
    fn decompress(mut self) -> (io::Result<Vec<u8>>, Vec<u8>) {
        if self.codec == Compression::Lz4 {
            // The buffer keeps its length from one frame to the next (frames are alike): no
            // zeroing but the first time.
            self.out.resize(self.content, 0);
            let r = lz4::decompress(&self.bytes[self.blocks..], &mut self.out, self.hash)
                .map(|()| self.out)
                .map_err(|e| corrupt(Compression::Lz4, self.offset, self.produced, e));
            return (r, self.bytes);
        }
        self.out.clear();
        self.out.reserve(self.content);
        thread_local! {
            static DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { std::cell::RefCell::new(None) };
        }
        let r = DCTX
            .with_borrow_mut(|d| {
                if d.is_none() {
                    *d = Some(zstd::bulk::Decompressor::new()?);
                }
                d.as_mut().expect("made above").decompress_to_buffer(&self.bytes, &mut self.out)
            })
            .map_err(|e| corrupt(Compression::Zstd, self.offset, self.produced, e))
            .and_then(|n| {
                if n == self.content {
                    Ok(self.out)
                } else {
                    Err(corrupt(
                        Compression::Zstd,
                        self.offset,
                        self.produced,
                        "content shorter than its frame declares",
                    ))
                }
            });
        (r, self.bytes)
    }
}

impl Shared {
    /// Decompresses frame `t` and puts it in its slot.
    fn finish(&self, t: Taken) {
        let seq = t.seq;
        let (r, bytes) = t.decompress();
        let mut s = self.lock();
        // The reader does not go past a frame still being decompressed, so its slot is there
        // (unless an earlier frame was corrupt, which ends the stream).
        if let Some(slot) = seq.checked_sub(s.first).and_then(|i| s.slots.get_mut(i as usize)) {
            *slot = Some(r);
        }
        s.keep(IN, bytes);
        drop(s);
        self.ready.notify_all();
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays whole whatever a panicking thread was doing (it only moves buffers
        // and results in and out); the panic itself is passed on by the thread's owner.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    /// Keeps `buf` for reuse as a buffer of kind `which` ([`IN`] or [`OUT`]), up to a few.
    fn keep(&mut self, which: usize, buf: Vec<u8>) {
        if self.spare[which].len() <= AHEAD && buf.capacity() > 0 {
            self.spare[which].push(buf);
        }
    }
}

impl SpareWork for Shared {
    /// Decompresses the next frame not yet taken, if there is room for it ahead; never waits
    /// for the lock (the reader may hold it while it reads the input).
    fn help(&self) -> bool {
        help_once(&self.state, State::take, |t| self.finish(t))
    }
}

impl Read for Frames {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.pos < self.cur.len() {
                let n = out.len().min(self.cur.len() - self.pos);
                out[..n].copy_from_slice(&self.cur[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if let Some(rest) = &mut self.rest {
                return rest.read(out);
            }
            if out.is_empty() {
                return Ok(0);
            }
            let mut s = self.shared.lock();
            s.keep(OUT, std::mem::take(&mut self.cur));
            self.pos = 0;
            loop {
                match s.slots.front() {
                    Some(Some(_)) => {
                        let r = s.slots.pop_front().flatten().expect("a decompressed frame");
                        s.first += 1;
                        match r {
                            Ok(buf) => {
                                self.cur = buf;
                                break;
                            }
                            Err(e) => {
                                // Nothing after a corrupt frame is read.
                                let again = io::Error::new(e.kind(), e.to_string());
                                s.source = None;
                                s.slots.clear();
                                s.end = Some(End::Failed(e));
                                return Err(again);
                            }
                        }
                    }
                    // Another thread is decompressing it.
                    Some(None) => s = self.shared.ready.wait(s).unwrap_or_else(|e| e.into_inner()),
                    None => match s.take() {
                        Some(t) => {
                            drop(s);
                            self.shared.finish(t);
                            s = self.shared.lock();
                        }
                        None => match s.end.take() {
                            Some(End::Rest(r)) => {
                                self.rest = Some(r);
                                break;
                            }
                            Some(End::Failed(e)) => {
                                // Every later read fails the same way.
                                let again = io::Error::new(e.kind(), e.to_string());
                                s.end = Some(End::Failed(e));
                                return Err(again);
                            }
                            Some(End::Eof) | None => {
                                s.end = Some(End::Eof);
                                return Ok(0);
                            }
                        },
                    },
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` bytes that compress about as a trace does: runs of small steps, now and then a jump.
    pub(super) fn content(n: usize, seed: u64) -> Vec<u8> {
        content_masked(n, seed, 0xff)
    }

    /// [`content`] with the jumps' bytes masked by `mask`: the lower it is, the more Huffman
    /// coding saves on them.
    fn content_masked(n: usize, seed: u64, mask: u8) -> Vec<u8> {
        let (mut x, mut v) = (seed | 1, Vec::with_capacity(n));
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let run = (x % 64) as usize;
            v.extend((0..run).map(|i| (i as u8).wrapping_mul(4)));
            v.extend(x.to_le_bytes()[..(x >> 61) as usize].iter().map(|b| b & mask));
        }
        v.truncate(n);
        v
    }

    fn framed(data: &[u8]) -> Vec<u8> {
        let mut w = FrameWriter::new(Vec::new()).unwrap();
        // In uneven pieces, as a writer's buffer flushes.
        for piece in data.chunks(100_003) {
            w.write_all(piece).unwrap();
        }
        w.finish().unwrap()
    }

    /// The frame starts of a stream of zstd frames.
    fn starts(stream: &[u8]) -> Vec<usize> {
        let (mut at, mut v) = (0, Vec::new());
        while at < stream.len() {
            v.push(at);
            at += zstd::zstd_safe::find_frame_compressed_size(&stream[at..]).unwrap();
        }
        v
    }

    /// Reads `stream` through [`frames`], with `helpers` other threads taking on its spare work
    /// all along.
    fn read(stream: Vec<u8>, helpers: usize) -> io::Result<Vec<u8>> {
        read_as(stream, helpers, Compression::Zstd)
    }

    /// [`read`] of `codec` frames.
    fn read_as(stream: Vec<u8>, helpers: usize, codec: Compression) -> io::Result<Vec<u8>> {
        let (mut r, spare) = frames(Box::new(Cursor::new(stream)), codec);
        let done = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Relaxed) {
                        if !spare.help() {
                            std::thread::yield_now();
                        }
                    }
                });
            }
            let mut out = Vec::new();
            let r = r.read_to_end(&mut out).map(|_| out);
            done.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        })
    }

    #[test]
    fn frames_of_content_read_back_whoever_decompresses_them() {
        for n in [0, 1, FRAME_BYTES, 3 * FRAME_BYTES + 12_345] {
            let data = content(n, n as u64 + 1);
            let stream = framed(&data);
            // Frames of `FRAME_BYTES` of content (an empty stream is one empty frame), each with its
            // content size, which any zstd decoder reads as one stream.
            let frames = starts(&stream);
            assert_eq!(frames.len(), n.div_ceil(FRAME_BYTES).max(1), "{n} bytes");
            for &f in &frames {
                assert!(zstd::zstd_safe::get_frame_content_size(&stream[f..]).unwrap().is_some());
            }
            assert_eq!(zstd::stream::decode_all(&stream[..]).unwrap(), data);
            for helpers in [0, 1, 3] {
                assert!(read(stream.clone(), helpers).unwrap() == data, "{n} bytes, {helpers} helpers");
            }
        }
    }

    /// How the literals of the first block of each frame of `stream` are stored (RFC 8878,
    /// §3.1.1.3.1.1): 0 raw, 2 Huffman-coded, ...; `None` for a frame whose first block is not
    /// compressed.
    fn literal_kinds(stream: &[u8]) -> Vec<Option<u8>> {
        starts(stream)
            .into_iter()
            .map(|f| {
                let block = f + 5 + zstd_header(stream[f + 4]).0;
                let kind = (stream[block] >> 1) & 3;
                (kind == 2).then(|| stream[block + 3] & 3)
            })
            .collect()
    }

    #[test]
    fn literals_stay_raw_where_huffman_coding_saves_little() {
        // Jumps' bytes below 128: zstd's default Huffman-codes the literals, which saves 4 % of
        // the frame; the writer stores them raw. Below 64 it saves 8 %: the writer keeps the
        // coding. Both read back.
        let (raw, coded) = (content_masked(3 * FRAME_BYTES, 7, 0x7f), content_masked(3 * FRAME_BYTES, 7, 0x3f));
        assert_eq!(literal_kinds(&zstd::bulk::compress(&raw[..FRAME_BYTES], 3).unwrap()), [Some(2)]);
        for (data, kind) in [(&raw, 0), (&coded, 2)] {
            let stream = framed(data);
            assert_eq!(literal_kinds(&stream), vec![Some(kind); 3], "literals stored as {kind}");
            assert!(read(stream, 1).unwrap() == *data);
        }
        // The choice holds until the next probe: the second kind of content after 8 frames of
        // the first is Huffman-coded up to the 17th frame and stored raw from it on.
        let n = PROBE_EVERY as usize;
        let mixed = [content_masked(8 * FRAME_BYTES, 9, 0x3f), content_masked((n - 5) * FRAME_BYTES, 9, 0x7f)].concat();
        let stream = framed(&mixed);
        let kinds = literal_kinds(&stream);
        assert_eq!(kinds.len(), n + 3);
        assert_eq!(kinds[..n], vec![Some(2); n][..]);
        assert_eq!(kinds[n..], [Some(0); 3]);
        assert!(read(stream, 0).unwrap() == mixed);
        // Against zstd's default (Huffman-coded literals, no checksums), the raw frames are at
        // most `RAW_LITERALS_COST` sixteenths larger, checksums aside.
        let huffman: usize = raw.chunks(FRAME_BYTES).map(|c| zstd::bulk::compress(c, 3).unwrap().len()).sum();
        let written = framed(&raw).len();
        assert!(
            written as u64 * 16 <= huffman as u64 * (16 + RAW_LITERALS_COST) + 16 * 3 * 4,
            "{written} against {huffman}"
        );
        assert!(written > huffman + 3 * 4, "{written} against {huffman}");
    }

    #[test]
    fn any_zstd_stream_reads() {
        let (a, b, c) = (content(2_500_000, 1), content(1_500_000, 2), content(9 << 20, 3));
        // A streamed frame (no content size), skippable frames, a frame larger than
        // `MAX_CONTENT`, and frames of a `FrameWriter` before and after them.
        let streamed = zstd::stream::encode_all(&b[..], 3).unwrap();
        assert!(zstd::zstd_safe::get_frame_content_size(&streamed).unwrap().is_none());
        let large = zstd::bulk::compress(&c, 1).unwrap();
        let skippable = [&0x184d_2a53u32.to_le_bytes()[..], &5u32.to_le_bytes(), b"xlat!"].concat();
        let stream = [framed(&a), skippable.clone(), streamed, framed(&a), large, skippable, framed(&b)].concat();
        let want = [&a[..], &b, &a, &c, &b].concat();
        for helpers in [0, 2] {
            assert!(read(stream.clone(), helpers).unwrap() == want, "{helpers} helpers");
        }
    }

    #[test]
    fn a_cut_or_corrupt_stream_fails_and_says_where() {
        let data = content(3 * FRAME_BYTES + 777, 9);
        let stream = framed(&data);
        let frames = starts(&stream);
        // A byte of the second frame's blocks damaged: the error names where the frame starts,
        // and nothing of it or after it is read.
        let mut bad = stream.clone();
        bad[frames[1] + 100] ^= 0x5a;
        for helpers in [0, 2] {
            let e = read(bad.clone(), helpers).unwrap_err().to_string();
            let want =
                format!("zstd data is truncated or corrupt near compressed byte {} ({} bytes", frames[1], FRAME_BYTES);
            assert!(e.starts_with(&want), "{e}");
        }
        let (mut r, _) = super::frames(Box::new(Cursor::new(bad)), Compression::Zstd);
        let mut out = vec![0; 2 * FRAME_BYTES];
        r.read_exact(&mut out[..FRAME_BYTES]).unwrap();
        assert!(r.read(&mut out).is_err() && r.read(&mut out).is_err(), "the error stays");
        // Cut anywhere: an error, or (cut between frames) the content of the whole frames.
        for cut in (0..stream.len()).step_by(997).chain(frames.iter().flat_map(|&f| [f, f + 1, f + 4, f + 9])) {
            match read(stream[..cut].to_vec(), 1) {
                Ok(out) => {
                    assert!(frames.contains(&cut) || cut == 0, "cut at {cut} read whole");
                    assert!(data.starts_with(&out) && out.len() % FRAME_BYTES == 0);
                }
                Err(e) => assert!(e.to_string().contains("truncated or corrupt"), "cut at {cut}: {e}"),
            }
        }
        // A frame that declares 10 bytes of content and goes on with block after block.
        let mut long = [&ZSTD_MAGIC.to_le_bytes()[..], &[0x20, 10]].concat();
        for _ in 0..40 {
            long.extend_from_slice(&((4096u32 << 3).to_le_bytes()[..3]));
            long.extend_from_slice(&[7; 4096]);
        }
        let e = read([&stream[..], &long].concat(), 0).unwrap_err().to_string();
        assert!(e.contains(&format!("near compressed byte {}", stream.len())) && e.contains("much larger"), "{e}");
        // Bytes after the frames that are not a frame.
        let e = read([&stream[..], b"not zstd"].concat(), 0).unwrap_err().to_string();
        let near = e.split("near compressed byte ").nth(1).and_then(|r| r.split(' ').next()?.parse::<usize>().ok());
        assert!(near.is_some_and(|n| (stream.len()..=stream.len() + 8).contains(&n)), "{e}");
    }

    /// `data` as xlat writes LZ4 ([`lz4::FrameWriter`]), in uneven pieces.
    fn lz4_framed(data: &[u8]) -> Vec<u8> {
        let mut w = lz4::FrameWriter::new(Vec::new());
        for piece in data.chunks(100_003) {
            w.write_all(piece).unwrap();
        }
        w.finish().unwrap()
    }

    /// The starts of the LZ4 frames of `stream` (xlat's: one block, then the XXH3-64 frame).
    fn lz4_starts(stream: &[u8]) -> Vec<usize> {
        let (mut at, mut v) = (0, Vec::new());
        while at < stream.len() {
            v.push(at);
            assert_eq!(u32::from_le_bytes(stream[at..at + 4].try_into().unwrap()), LZ4_MAGIC);
            at += 15;
            loop {
                let (len, compressed) = lz4::block(stream[at..at + 4].try_into().unwrap());
                at += 4;
                if len == 0 && compressed {
                    break;
                }
                at += len;
            }
            assert_eq!(u32::from_le_bytes(stream[at..at + 4].try_into().unwrap()), lz4::CHECKSUM_MAGIC);
            at += 8 + lz4::CHECKSUM_LEN;
        }
        v
    }

    /// What the in-order LZ4 decoder ([`lz4::Decoder`]) makes of `stream`.
    fn lz4_decoded(stream: &[u8]) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        lz4::Decoder::new(stream).read_to_end(&mut out).map(|_| out)
    }

    #[test]
    fn lz4_frames_read_back_whoever_decompresses_them_and_any_decoder_reads_them() {
        let b = lz4::FRAME_BYTES;
        // Random bytes too, which LZ4 stores uncompressed.
        let noise: Vec<u8> =
            (0..b + 5000).map(|i| ((i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8).collect();
        for data in [vec![], content(1, 2), content(b, 3), content(3 * b + 12_345, 4), noise] {
            let stream = lz4_framed(&data);
            assert_eq!(lz4_starts(&stream).len(), data.len().div_ceil(b).max(1), "{} bytes", data.len());
            assert!(lz4_decoded(&stream).unwrap() == data, "{} bytes", data.len());
            for helpers in [0, 1, 3] {
                assert!(read_as(stream.clone(), helpers, Compression::Lz4).unwrap() == data, "{} bytes", data.len());
            }
        }
    }

    #[test]
    fn any_lz4_stream_reads() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameEncoder, FrameInfo};
        let (a, b) = (content(500_000, 5), content(300_000, 6));
        let encode = |info: FrameInfo, data: &[u8]| {
            let mut e = FrameEncoder::with_frame_info(info, Vec::new());
            e.write_all(data).unwrap();
            e.finish().unwrap()
        };
        // Another encoder's frames: with LZ4's own checksums and no content size (read in order
        // from there on), and with a content size and independent 64 KiB blocks (taken alone).
        let checked = encode(FrameInfo::new().content_checksum(true).block_checksums(true), &b);
        let sized = encode(
            FrameInfo::new()
                .content_size(Some(a.len() as u64))
                .block_size(BlockSize::Max64KB)
                .block_mode(BlockMode::Independent),
            &a,
        );
        let skippable = [&0x184d_2a53u32.to_le_bytes()[..], &5u32.to_le_bytes(), b"xlat!"].concat();
        for (stream, want) in [
            ([sized.clone(), lz4_framed(&b), skippable.clone(), sized.clone()].concat(), [&a[..], &b, &a].concat()),
            ([lz4_framed(&a), checked, skippable, lz4_framed(&b)].concat(), [&a[..], &b, &b].concat()),
        ] {
            assert!(lz4_decoded(&stream).unwrap() == want);
            for helpers in [0, 2] {
                assert!(read_as(stream.clone(), helpers, Compression::Lz4).unwrap() == want, "{helpers} helpers");
            }
        }
    }

    #[test]
    fn a_cut_or_corrupt_lz4_stream_fails_and_says_where() {
        let b = lz4::FRAME_BYTES;
        let data = content(3 * b + 777, 9);
        let stream = lz4_framed(&data);
        let frames = lz4_starts(&stream);
        let read = |s: Vec<u8>, helpers| read_as(s, helpers, Compression::Lz4);
        let at = |n: usize| format!("lz4 data is truncated or corrupt near compressed byte {n} ({} bytes", b);
        // A literal byte of the second frame damaged (its block's first sequence starts with
        // literals): LZ4 decodes it, and its XXH3-64 says it.
        let mut bad = stream.clone();
        let mut lit = frames[1] + 20;
        match bad[lit - 1] >> 4 {
            0 => panic!("the block starts with literals"),
            15 => {
                // The literal count goes on in bytes of 255 and one below.
                while bad[lit] == 255 {
                    lit += 1;
                }
                lit += 1;
            }
            _ => {}
        }
        bad[lit] ^= 0x01;
        assert!(lz4_decoded(&bad).is_ok_and(|out| out != data), "a general decoder misses it");
        for helpers in [0, 2] {
            let e = read(bad.clone(), helpers).unwrap_err().to_string();
            assert!(e.starts_with(&at(frames[1])) && e.contains("XXH3-64"), "{e}");
        }
        // Its checksum damaged: the same.
        let mut bad = stream.clone();
        bad[frames[2] - 1] ^= 0x80;
        let e = read(bad, 0).unwrap_err().to_string();
        assert!(e.starts_with(&at(frames[1])) && e.contains("XXH3-64"), "{e}");
        // A block that says it is longer than its frame allows.
        let mut bad = stream.clone();
        bad[frames[1] + 15..frames[1] + 19].copy_from_slice(&(lz4::BLOCK_MAX as u32 + 1).to_le_bytes());
        let e = read(bad, 0).unwrap_err().to_string();
        assert!(e.contains(&format!("near compressed byte {}", frames[1] + 15)) && e.contains("larger than"), "{e}");
        // Cut anywhere: an error, or (cut between frames) the content of the whole frames.
        let ends: Vec<usize> = frames[1..].iter().copied().chain([stream.len()]).collect();
        for cut in
            (0..stream.len()).step_by(991).chain(frames.iter().flat_map(|&f| [f, f + 1, f + 4, f + 9, f + 15, f + 17]))
        {
            match read(stream[..cut].to_vec(), 1) {
                Ok(out) => {
                    assert!(ends.contains(&cut) || frames.contains(&cut), "cut at {cut} read whole");
                    assert!(data.starts_with(&out) && (out.len() % b == 0 || out.len() == data.len()));
                }
                Err(e) => assert!(e.to_string().contains("truncated or corrupt"), "cut at {cut}: {e}"),
            }
        }
        // Bytes after the frames that are not a frame.
        let e = read([&stream[..], b"not lz4"].concat(), 0).unwrap_err().to_string();
        assert!(e.contains("truncated or corrupt"), "{e}");
    }
}
