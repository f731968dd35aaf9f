//! LZ4 frames as xlat writes and reads them (`.lz4`, and `.xtr.lz4` for a trace).
//!
//! xlat writes a stream of standard LZ4 frames (the LZ4 frame format, version 01), each of at
//! most [`FRAME_BYTES`] of content in one independent block, declaring its content size,
//! without LZ4's own checksums; after each frame comes a skippable frame ([`CHECKSUM_MAGIC`])
//! holding the XXH3-64 of that frame's content. Any LZ4 decoder reads the stream (skippable
//! frames are part of the format; `lz4 -d` skips them); xlat's reader decompresses the frames
//! on whichever thread is free, like zstd's ([`super::frames`]), and checks each against its
//! XXH3-64. Over the benchmark's 53 MB real trace, one core here decompresses the blocks with
//! `lz4_flex` in about 11 ms, and LZ4's own content checksum (XXH32) takes about 7 ms more,
//! where XXH3-64 takes about 2 ms (`lz4_flex`'s frame decoder, which also copies each block
//! out of its own buffer, took 20 ms without checksums and 27 ms with them).
//!
//! The trade against zstd: the benchmark's real trace is 1.9 times as large (9.1 MB against
//! 4.7 MB), and its content decompresses about twice as fast (docs/performance.md).

use std::io::{self, Cursor, Read, Write};

use super::framing::{Framed, Framer};
use super::{LZ4_MAGIC, SKIPPABLE};

/// Content bytes per frame that [`FrameWriter`] writes (see [`super::frames::FRAME_BYTES`] for
/// zstd's). LZ4 matches reach 64 KiB back, so larger frames compress hardly better: on the
/// benchmark's real trace, frames of 1 MiB, 256, 128 and 64 KiB made 8,857,896, 8,938,496,
/// 9,051,559 and 9,258,253 bytes, and runs over them took 0.0657, 0.0623, 0.0588 and (another
/// round) 0.0600 s against 0.0603 s for 128 KiB (medians of 16 alternated runs): smaller frames
/// stay in the cores' caches.
pub const FRAME_BYTES: usize = 1 << 17;

/// The magic number of the skippable frame after each frame xlat writes, holding the content's
/// XXH3-64 ([`CHECKSUM_TAG`], then the hash, little-endian).
pub const CHECKSUM_MAGIC: u32 = 0x184d_2a5c;
/// The first bytes of that skippable frame's content.
pub const CHECKSUM_TAG: &[u8; 4] = b"XXH3";
/// The length of that skippable frame's content.
pub const CHECKSUM_LEN: usize = 12;

/// The frame descriptor's flags that xlat writes: version 01, independent blocks, a content
/// size; no block or content checksum, no dictionary.
const FLG: u8 = 0x40 | 0x20 | 0x08;
/// The block maximum size code (4 to 7: 64 KiB to 4 MiB) of the smallest size that holds a
/// frame's whole content in one block.
const BD: u8 = {
    let mut code = 4;
    while 1 << (8 + 2 * code) < FRAME_BYTES {
        code += 1;
    }
    assert!(code <= 7, "a frame's content fits one block");
    (code as u8) << 4
};
/// The most bytes a block of the frames [`FrameWriter`] writes may hold.
pub const BLOCK_MAX: usize = 1 << (8 + 2 * (BD >> 4) as usize);
/// Set in a block's size word when the block is stored uncompressed.
const UNCOMPRESSED: u32 = 1 << 31;

/// The length of the header of a frame that can be decompressed alone: magic, descriptor
/// (flags and block size), content size and the header's checksum byte.
pub(super) const HEADER_LEN: usize = 4 + 2 + 8 + 1;

/// What a frame's header says, for a frame that can be decompressed alone with its blocks
/// independent: its content size and its largest block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Header {
    pub(super) content: u64,
    pub(super) block_max: usize,
}

/// Whether the frame whose magic and descriptor `start` (6 bytes) holds is one to read alone,
/// with a header of [`HEADER_LEN`]; any other (another version, linked blocks, a dictionary,
/// LZ4's own checksums, no content size) is read in order by a general LZ4 decoder.
pub(super) fn alone(start: &[u8]) -> bool {
    let (flg, bd) = (start[4], start[5]);
    flg >> 6 == 1 && flg & 0x20 != 0 && flg & 0x1f == 0x08 && bd & 0x8f == 0 && bd >> 4 >= 4
}

/// The header of a frame that [`alone`] accepted, `h` being its whole header; `None` if its
/// checksum byte is wrong (the general decoder then reports it).
pub(super) fn header(h: &[u8]) -> Option<Header> {
    let check = (twox_hash::XxHash32::oneshot(0, &h[4..14]) >> 8) as u8;
    (check == h[14]).then(|| Header {
        content: u64::from_le_bytes(h[6..14].try_into().unwrap()),
        block_max: 1 << (8 + 2 * (h[5] >> 4)),
    })
}

/// A block's size word: its stored length, and whether it is compressed; 0 ends the frame.
pub(super) fn block(word: [u8; 4]) -> (usize, bool) {
    let w = u32::from_le_bytes(word);
    ((w & !UNCOMPRESSED) as usize, w & UNCOMPRESSED == 0)
}

/// The XXH3-64 that a skippable frame of [`CHECKSUM_MAGIC`] with content `c` gives, if it is one.
pub(super) fn checksum(c: &[u8]) -> Option<u64> {
    (c.len() == CHECKSUM_LEN && c.starts_with(CHECKSUM_TAG)).then(|| u64::from_le_bytes(c[4..].try_into().unwrap()))
}

/// Decompresses the blocks of a frame, `blocks` (from the first block's size word to the end
/// mark), into `out`, which must hold exactly the content; then checks it against `hash`.
pub(super) fn decompress(blocks: &[u8], out: &mut [u8], hash: Option<u64>) -> Result<(), String> {
    let (mut p, mut n) = (0, 0);
    loop {
        let word = blocks.get(p..p + 4).ok_or("cut inside a frame")?;
        let (len, compressed) = block(word.try_into().unwrap());
        p += 4;
        if len == 0 && compressed {
            break;
        }
        let data = blocks.get(p..p + len).ok_or("cut inside a frame")?;
        n += if compressed {
            lz4_flex::block::decompress_into(data, &mut out[n..]).map_err(|e| e.to_string())?
        } else {
            out.get_mut(n..n + len).ok_or("content longer than its frame declares")?.copy_from_slice(data);
            len
        };
        p += len;
    }
    if n != out.len() {
        return Err("content shorter than its frame declares".into());
    }
    if hash.is_some_and(|h| h != twox_hash::XxHash3_64::oneshot(out)) {
        return Err("the content's XXH3-64 differs from the one written after it".into());
    }
    Ok(())
}

/// Writes what it is given as LZ4 frames of [`FRAME_BYTES`] of content (the last one
/// shorter), each followed by its content's XXH3-64 (see the module documentation).
pub type FrameWriter<W> = Framed<W, Lz4>;

impl<W: Write> FrameWriter<W> {
    /// A writer of LZ4 frames into `inner`.
    pub fn new(inner: W) -> FrameWriter<W> {
        Framed::with(inner, Lz4)
    }
}

/// LZ4 frames as [`FrameWriter`] writes them.
pub struct Lz4;

impl Framer for Lz4 {
    const FRAME_BYTES: usize = FRAME_BYTES;

    fn frame(&mut self, content: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        out.extend_from_slice(&LZ4_MAGIC.to_le_bytes());
        out.extend_from_slice(&[FLG, BD]);
        out.extend_from_slice(&(content.len() as u64).to_le_bytes());
        out.push((twox_hash::XxHash32::oneshot(0, &out[4..14]) >> 8) as u8);
        if !content.is_empty() {
            let at = out.len();
            out.resize(at + 4 + lz4_flex::block::get_maximum_output_size(content.len()), 0);
            let n = lz4_flex::block::compress_into(content, &mut out[at + 4..]).map_err(io::Error::other)?;
            if n < content.len() {
                out[at..at + 4].copy_from_slice(&(n as u32).to_le_bytes());
                out.truncate(at + 4 + n);
            } else {
                out.truncate(at);
                out.extend_from_slice(&(content.len() as u32 | UNCOMPRESSED).to_le_bytes());
                out.extend_from_slice(content);
            }
        }
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&CHECKSUM_MAGIC.to_le_bytes());
        out.extend_from_slice(&(CHECKSUM_LEN as u32).to_le_bytes());
        out.extend_from_slice(CHECKSUM_TAG);
        out.extend_from_slice(&twox_hash::XxHash3_64::oneshot(content).to_le_bytes());
        Ok(())
    }
}

/// An LZ4 stream decompressed in order, frame after frame, skipping skippable frames: for
/// frames that [`super::frames`] does not take alone. Each frame goes through `lz4_flex`'s
/// decoder, which checks LZ4's own checksums where a frame has them (xlat's XXH3-64 frames are
/// skipped unchecked here), and reads exactly the frame's bytes.
pub struct Decoder<R: Read> {
    state: Option<State<R>>,
}

enum State<R: Read> {
    /// Between frames.
    Between(R),
    /// In a frame, whose magic number was read to recognise it.
    In(Box<lz4_flex::frame::FrameDecoder<io::Chain<Cursor<[u8; 4]>, R>>>),
}

impl<R: Read> Decoder<R> {
    /// A decoder of the LZ4 stream `inner`.
    pub fn new(inner: R) -> Decoder<R> {
        Decoder { state: Some(State::Between(inner)) }
    }
}

/// Reads as much of `buf` as `r` has; the count read (short only at the end of the input).
fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl<R: Read> Read for Decoder<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match self.state.take() {
                None => return Err(io::Error::other("an earlier error ended the LZ4 stream")),
                Some(State::In(mut d)) => {
                    let n = d.read(buf)?;
                    if n > 0 {
                        self.state = Some(State::In(d));
                        return Ok(n);
                    }
                    self.state = Some(State::Between(d.into_inner().into_inner().1));
                }
                Some(State::Between(mut r)) => {
                    let mut magic = [0u8; 4];
                    match read_full(&mut r, &mut magic)? {
                        0 => {
                            self.state = Some(State::Between(r));
                            return Ok(0);
                        }
                        4 => {}
                        _ => {
                            return Err(io::Error::new(
                                io::ErrorKind::UnexpectedEof,
                                "cut inside a frame's magic number",
                            ))
                        }
                    }
                    let m = u32::from_le_bytes(magic);
                    if SKIPPABLE.contains(&m) {
                        let mut len = [0u8; 4];
                        let len =
                            if read_full(&mut r, &mut len)? == 4 { u32::from_le_bytes(len) as u64 } else { u64::MAX };
                        if len == u64::MAX || io::copy(&mut (&mut r).take(len), &mut io::sink())? < len {
                            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut inside a skippable frame"));
                        }
                        self.state = Some(State::Between(r));
                    } else if m == LZ4_MAGIC {
                        let d = lz4_flex::frame::FrameDecoder::new(Cursor::new(magic).chain(r));
                        self.state = Some(State::In(Box::new(d)));
                    } else {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "not an LZ4 frame"));
                    }
                }
            }
        }
    }
}
