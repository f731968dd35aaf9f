//! Compressed output: a writer that compresses what it is given as a file name's suffix asks.

use std::io::{self, Write};

use super::{frames, lz4, Compression};

/// A writer that compresses what it is given (or not); [`CompressedWriter::finish`] ends the
/// compressed stream and returns the inner writer.
pub struct CompressedWriter<W: Write> {
    enc: Enc<W>,
}

enum Enc<W: Write> {
    Plain(W),
    Gzip(flate2::write::GzEncoder<W>),
    Zstd(frames::FrameWriter<W>),
    Xz(xz2::write::XzEncoder<W>),
    Lz4(lz4::FrameWriter<W>),
}

impl<W: Write> CompressedWriter<W> {
    /// Compresses into `inner` with `c` (zstd level 3 in frames of 256 KiB of content, each with
    /// its content size and checksum, literals raw where Huffman coding saves little
    /// ([`frames::FrameWriter`]), gzip level 6, xz preset
    /// 6, LZ4 frames of 128 KiB each followed by its XXH3-64 ([`lz4::FrameWriter`]);
    /// always single-threaded).
    pub fn new(inner: W, c: Compression) -> io::Result<CompressedWriter<W>> {
        let enc = match c {
            Compression::None => Enc::Plain(inner),
            Compression::Gzip => Enc::Gzip(flate2::write::GzEncoder::new(inner, flate2::Compression::default())),
            Compression::Zstd => Enc::Zstd(frames::FrameWriter::new(inner)?),
            Compression::Xz => Enc::Xz(xz2::write::XzEncoder::new(inner, 6)),
            Compression::Lz4 => Enc::Lz4(lz4::FrameWriter::new(inner)),
        };
        Ok(CompressedWriter { enc })
    }

    /// Ends the compressed stream, flushes and returns the inner writer.
    pub fn finish(self) -> io::Result<W> {
        let mut w = match self.enc {
            Enc::Plain(w) => w,
            Enc::Gzip(e) => e.finish()?,
            Enc::Zstd(e) => e.finish()?,
            Enc::Xz(e) => e.finish()?,
            Enc::Lz4(e) => e.finish()?,
        };
        w.flush()?;
        Ok(w)
    }
}

impl<W: Write> Write for CompressedWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.enc {
            Enc::Plain(w) => w.write(buf),
            Enc::Gzip(e) => e.write(buf),
            Enc::Zstd(e) => e.write(buf),
            Enc::Xz(e) => e.write(buf),
            Enc::Lz4(e) => e.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.enc {
            Enc::Plain(w) => w.write_all(buf),
            Enc::Gzip(e) => e.write_all(buf),
            Enc::Zstd(e) => e.write_all(buf),
            Enc::Xz(e) => e.write_all(buf),
            Enc::Lz4(e) => e.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.enc {
            Enc::Plain(w) => w.flush(),
            Enc::Gzip(e) => e.flush(),
            Enc::Zstd(e) => e.flush(),
            Enc::Xz(e) => e.flush(),
            Enc::Lz4(e) => e.flush(),
        }
    }
}
