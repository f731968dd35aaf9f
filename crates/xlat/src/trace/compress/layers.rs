//! Undoing compression: the layers a stream's content starts with, each recognised by its magic
//! number and decoded in turn, with errors that say what is cut or damaged and where.

use std::io::{self, Cursor, Read};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::lz4;
use super::Compression;

/// Most nested compression layers undone when reading.
pub const MAX_LAYERS: usize = 3;

/// Reads up to `n` bytes (fewer only at end of input).
pub(in crate::trace) fn peek_bytes(r: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut v = Vec::with_capacity(n);
    r.take(n as u64).read_to_end(&mut v)?;
    Ok(v)
}

/// Wraps `inner` in decoders for the compression layers its content starts with (up to
/// [`MAX_LAYERS`]); returns the decompressed stream and the layers found, outermost first.
pub fn decompress<'a, R: Read + Send + 'a>(inner: R) -> io::Result<(Box<dyn Read + Send + 'a>, Vec<Compression>)> {
    decompress_layers(inner, MAX_LAYERS)
}

/// [`decompress`], undoing at most `max_layers` layers.
pub(in crate::trace) fn decompress_layers<'a, R: Read + Send + 'a>(
    inner: R,
    max_layers: usize,
) -> io::Result<(Box<dyn Read + Send + 'a>, Vec<Compression>)> {
    let mut stream: Box<dyn Read + Send + 'a> = Box::new(inner);
    let mut layers = Vec::new();
    loop {
        let prefix = peek_bytes(&mut stream, 6)?;
        let c = Compression::detect(&prefix);
        let rejoined: Box<dyn Read + Send + 'a> = Box::new(Cursor::new(prefix).chain(stream));
        if c == Compression::None || layers.len() == max_layers {
            return Ok((rejoined, layers));
        }
        layers.push(c);
        stream = layer(c, rejoined, 0, 0)?;
    }
}

/// Counts the compressed bytes a decoder has consumed.
struct Counting<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

/// The error of `kind` compressed data cut or damaged near compressed byte `consumed`, with
/// `produced` bytes decompressed before it: the one wording of every decompression layer.
pub(super) fn corrupt(
    error_kind: io::ErrorKind,
    kind: Compression,
    consumed: u64,
    produced: u64,
    e: impl std::fmt::Display,
) -> io::Error {
    io::Error::new(
        error_kind,
        format!(
            "{} data is truncated or corrupt near compressed byte {consumed} ({produced} bytes decompressed): {e}",
            kind.name()
        ),
    )
}

/// A `kind` decoding layer over `inner` whose errors say where ([`Layer`]), counting from
/// `consumed` compressed and `produced` decompressed bytes before it.
pub(super) fn layer<'a, R: Read + Send + 'a>(
    kind: Compression,
    inner: R,
    consumed: u64,
    produced: u64,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    let n = Arc::new(AtomicU64::new(consumed));
    let counted = Counting { inner, n: n.clone() };
    let decoder: Box<dyn Read + Send + 'a> = match kind {
        Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(counted)),
        Compression::Zstd => Box::new(zstd::stream::read::Decoder::new(counted)?),
        Compression::Xz => Box::new(xz2::read::XzDecoder::new_multi_decoder(counted)),
        Compression::Lz4 => Box::new(lz4::Decoder::new(counted)),
        Compression::None => Box::new(counted),
    };
    Ok(Box::new(Layer { decoder, kind, consumed: n, produced }))
}

/// A decompression layer whose errors say what happened and where: a cut or damaged compressed
/// stream reads as "truncated or corrupt", with the compressed and decompressed positions.
struct Layer<'a> {
    decoder: Box<dyn Read + Send + 'a>,
    kind: Compression,
    consumed: Arc<AtomicU64>,
    produced: u64,
}

impl Read for Layer<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.decoder.read(buf) {
            Ok(k) => {
                self.produced += k as u64;
                Ok(k)
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Err(e),
            Err(e) => Err(corrupt(e.kind(), self.kind, self.consumed.load(Ordering::Relaxed), self.produced, e)),
        }
    }
}
