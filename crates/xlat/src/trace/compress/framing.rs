//! Content written in frames of a fixed size, one after another: what zstd's frames
//! ([`frames::FrameWriter`](super::frames::FrameWriter)) and LZ4's
//! ([`lz4::FrameWriter`](super::lz4::FrameWriter)) have in common.

use std::io::{self, Write};

/// What makes a frame of content: zstd's ([`Zstd`](super::frames::Zstd)) or LZ4's
/// ([`Lz4`](super::lz4::Lz4)).
pub trait Framer {
    /// Content bytes per frame.
    const FRAME_BYTES: usize;
    /// Puts the frame of `content` in `out` (empty on entry).
    fn frame(&mut self, content: &[u8], out: &mut Vec<u8>) -> io::Result<()>;
}

/// Writes what it is given as frames of `F::FRAME_BYTES` of content (the last one shorter):
/// [`FrameWriter`](super::frames::FrameWriter) for zstd, [`FrameWriter`](super::lz4::FrameWriter) for
/// LZ4.
pub struct Framed<W: Write, F: Framer> {
    inner: W,
    buf: Vec<u8>,
    out: Vec<u8>,
    framer: F,
    /// Whether a frame was written (an empty stream is still one, empty, frame).
    wrote: bool,
}

impl<W: Write, F: Framer> Framed<W, F> {
    /// A writer of `framer`'s frames into `inner`.
    pub(super) fn with(inner: W, framer: F) -> Framed<W, F> {
        Framed { inner, buf: Vec::with_capacity(F::FRAME_BYTES), out: Vec::new(), framer, wrote: false }
    }

    /// Writes the content held so far as one frame.
    fn frame(&mut self) -> io::Result<()> {
        self.out.clear();
        self.framer.frame(&self.buf, &mut self.out)?;
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

impl<W: Write, F: Framer> Write for Framed<W, F> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = data.len().min(F::FRAME_BYTES - self.buf.len());
        self.buf.extend_from_slice(&data[..n]);
        if self.buf.len() == F::FRAME_BYTES {
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
