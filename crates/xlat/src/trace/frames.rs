//! zstd input made of small frames, decompressed by whichever thread is free.
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

use std::collections::VecDeque;
use std::io::{self, Cursor, Read, Write};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

/// Content bytes per frame that [`FrameWriter`] writes: half a millisecond to a millisecond of
/// decompression, and small enough that several fit in memory at once, yet as well compressed
/// as one frame (the benchmark's real trace at level 3: 4,454,729 bytes in 1 MiB frames
/// against 4,454,859 in one; 4,506,555 in 256 KiB frames).
pub const FRAME_BYTES: usize = 1 << 20;

/// Frames whose declared content is larger are read in order with the rest of the stream.
pub const MAX_CONTENT: u64 = 8 << 20;

/// Frames decompressed (or being decompressed) ahead of the one the reader is in.
const AHEAD: usize = 4;

/// Which of [`State::spare`]'s buffers: compressed frames, and their content.
const IN: usize = 0;
const OUT: usize = 1;

/// zstd's frame magic number, and the range of its skippable frames' (RFC 8878, §3.1).
const ZSTD_MAGIC: u32 = 0xfd2f_b528;
const SKIPPABLE: std::ops::RangeInclusive<u32> = 0x184d_2a50..=0x184d_2a5f;

/// Work that a thread with nothing else to do may take on for a trace reader.
pub trait SpareWork: Send + Sync {
    /// Does one piece of the work if there is one ready to do; returns whether it did.
    fn help(&self) -> bool;
}

/// Writes what it is given as zstd frames of [`FRAME_BYTES`] of content (the last one
/// shorter), each with its content size and a checksum, at compression level 3.
pub struct FrameWriter<W: Write> {
    inner: W,
    buf: Vec<u8>,
    out: Vec<u8>,
    compressor: zstd::bulk::Compressor<'static>,
    /// Whether a frame was written (an empty stream is still one, empty, frame).
    wrote: bool,
}

impl<W: Write> FrameWriter<W> {
    /// A writer of frames into `inner`.
    pub fn new(inner: W) -> io::Result<FrameWriter<W>> {
        let mut compressor = zstd::bulk::Compressor::new(3)?;
        compressor.set_parameter(zstd::stream::raw::CParameter::ChecksumFlag(true))?;
        compressor.set_parameter(zstd::stream::raw::CParameter::ContentSizeFlag(true))?;
        Ok(FrameWriter { inner, buf: Vec::with_capacity(FRAME_BYTES), out: Vec::new(), compressor, wrote: false })
    }

    /// Writes the content held so far as one frame.
    fn frame(&mut self) -> io::Result<()> {
        self.out.clear();
        self.out.reserve(zstd::zstd_safe::compress_bound(self.buf.len()));
        self.compressor.compress_to_buffer(&self.buf, &mut self.out)?;
        self.inner.write_all(&self.out)?;
        self.buf.clear();
        self.wrote = true;
        Ok(())
    }

    /// Writes the last frame and returns the inner writer (not flushed).
    pub fn finish(mut self) -> io::Result<W> {
        if !self.buf.is_empty() || !self.wrote {
            self.frame()?;
        }
        Ok(self.inner)
    }
}

impl<W: Write> Write for FrameWriter<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(FRAME_BYTES - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == FRAME_BYTES {
            self.frame()?;
        }
        Ok(n)
    }

    /// Ends the frame in progress (everything written so far can then be read) and flushes.
    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.frame()?;
        }
        self.inner.flush()
    }
}

/// The decompressed stream of zstd input `source`, frame by frame (see the module
/// documentation), and the spare work of decompressing its next frames.
pub fn frames(source: Box<dyn Read + Send>) -> (Frames, Arc<dyn SpareWork>) {
    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            source: Some(source),
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
    /// The compressed input, until its end (or a frame that cannot be taken alone, or an error).
    source: Option<Box<dyn Read + Send>>,
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
}

/// The error of corrupt or cut compressed input at compressed byte `offset`, with `produced`
/// bytes decompressed before it (as the decompression layers of `open.rs` say it).
fn corrupt(offset: u64, produced: u64, e: impl std::fmt::Display) -> io::Error {
    super::open::corrupt(io::ErrorKind::InvalidData, super::open::Compression::Zstd, offset, produced, e)
}

/// Reads `n` more bytes of `src` onto `v`; false if the input ended first.
fn read_onto(src: &mut dyn Read, v: &mut Vec<u8>, n: usize) -> io::Result<bool> {
    let got = Read::take(&mut *src, n as u64).read_to_end(v)?;
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
            Ok(Some(content)) => {
                let offset = self.offset;
                self.offset += bytes.len() as u64;
                let produced = self.produced;
                self.produced += content as u64;
                self.source = Some(src);
                let seq = self.first + self.slots.len() as u64;
                self.slots.push_back(None);
                let out = self.spare[OUT].pop().unwrap_or_default();
                Some(Taken { seq, bytes, offset, content, produced, out })
            }
            Ok(None) if bytes.is_empty() => {
                self.end = Some(End::Eof);
                None
            }
            Ok(None) => {
                // A frame to read in order, with everything after it.
                let rest = Cursor::new(bytes).chain(src);
                let end = match super::open::zstd_layer(rest, self.offset, self.produced) {
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

    /// Reads the next frame of `src` onto `bytes` (skipping skippable frames): its content size
    /// if it declares one of at most [`MAX_CONTENT`]; `None` with `bytes` empty at the end of
    /// the input, or with the bytes read so far if the frame is to be read in order.
    fn take_from(&mut self, src: &mut dyn Read, bytes: &mut Vec<u8>) -> io::Result<Option<usize>> {
        let at = |s: &State, n: usize| s.offset + n as u64;
        loop {
            bytes.clear();
            if !read_onto(src, bytes, 4)? {
                if bytes.is_empty() {
                    return Ok(None);
                }
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame's magic number"));
            }
            let magic = u32::from_le_bytes(bytes[..4].try_into().unwrap());
            if SKIPPABLE.contains(&magic) {
                if !read_onto(src, bytes, 4)? {
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
            if magic != ZSTD_MAGIC {
                // Not a frame: the in-order decoder reports it as zstd does.
                return Ok(None);
            }
            // The frame header (RFC 8878, §3.1.1.1): the descriptor, then the window
            // descriptor unless single-segment, the dictionary ID and the content size.
            if !read_onto(src, bytes, 1)? {
                return Ok(None);
            }
            let fhd = bytes[4];
            let (fcs_flag, single) = (fhd >> 6, fhd & 0x20 != 0);
            let did = [0, 1, 2, 4][(fhd & 3) as usize];
            let fcs = match (fcs_flag, single) {
                (0, false) => 0,
                (0, true) => 1,
                (f, _) => 1 << f,
            };
            let header = (!single) as usize + did + fcs;
            if fcs == 0 || !read_onto(src, bytes, header)? {
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
                if !read_onto(src, bytes, 3)? {
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
                if !read_onto(src, bytes, payload)? {
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
            if fhd & 4 != 0 && !read_onto(src, bytes, 4)? {
                return Err(corrupt(at(self, bytes.len()), self.produced, "cut inside a frame's checksum"));
            }
            return Ok(Some(content as usize));
        }
    }
}

impl Taken {
    /// Decompresses the frame: its content, or the error that says where it is corrupt.
    fn decompress(mut self) -> (io::Result<Vec<u8>>, Vec<u8>) {
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
            .map_err(|e| corrupt(self.offset, self.produced, e))
            .and_then(|n| {
                if n == self.content {
                    Ok(self.out)
                } else {
                    Err(corrupt(self.offset, self.produced, "content shorter than its frame declares"))
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

/// One piece of spare work: takes it from `state` with `take` if the lock is free (never
/// waiting for it), then does it with `finish` outside the lock; whether there was one.
pub(super) fn help_once<S, T>(
    state: &Mutex<S>,
    take: impl FnOnce(&mut S) -> Option<T>,
    finish: impl FnOnce(T),
) -> bool {
    let t = match state.try_lock() {
        Ok(mut s) => take(&mut s),
        Err(_) => None,
    };
    t.map(finish).is_some()
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
    fn content(n: usize, seed: u64) -> Vec<u8> {
        let (mut x, mut v) = (seed | 1, Vec::with_capacity(n));
        while v.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let run = (x % 64) as usize;
            v.extend((0..run).map(|i| (i as u8).wrapping_mul(4)));
            v.extend_from_slice(&x.to_le_bytes()[..(x >> 61) as usize]);
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
        let (mut r, spare) = frames(Box::new(Cursor::new(stream)));
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
            // Frames of 1 MiB of content (an empty stream is one empty frame), each with its
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
        let (mut r, _) = super::frames(Box::new(Cursor::new(bad)));
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
}
