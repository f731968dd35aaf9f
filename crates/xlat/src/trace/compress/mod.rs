//! Compression of trace files, beneath the readers and writers: which compression a stream has
//! (by its magic number), undoing it, and compressing output.
//!
//! Input compression is recognised from the first bytes of the content, never from the name:
//! gzip (`1f 8b`), zstd (`28 b5 2f fd`), xz (`fd 37 7a 58 5a 00`) and LZ4 (`04 22 4d 18`).
//! Concatenated members / frames / streams are read in sequence, and up to [`MAX_LAYERS`] nested
//! layers are undone (a gzipped `.xtr`, which is zstd inside, reads fine). Output compression
//! follows the name's suffix: `.gz`, `.zst`, `.xz` or `.lz4`; xtr is zstd-compressed inside
//! unless the name asks for another.
//!
//! [`Compression`] and the frame magic numbers are here; `layers.rs` undoes nested layers in
//! order ([`decompress`]), with errors that say where; `writer.rs` compresses
//! ([`CompressedWriter`]); [`framing`] writes content in frames of a fixed size; [`frames`]
//! writes zstd in such frames, and reads zstd and LZ4 frame by frame on whichever thread is
//! free; [`lz4`] writes LZ4 frames and reads any LZ4 stream in order.

pub mod frames;
pub mod framing;
mod layers;
pub mod lz4;
mod writer;

pub use layers::{decompress, MAX_LAYERS};
pub(super) use layers::{decompress_layers, peek_bytes};
pub use writer::CompressedWriter;

/// zstd's frame magic number (RFC 8878, §3.1.1).
const ZSTD_MAGIC: u32 = 0xfd2f_b528;
/// The LZ4 frame magic number.
pub const LZ4_MAGIC: u32 = 0x184d_2204;
/// The magic numbers of skippable frames (RFC 8878, §3.1.2; LZ4's frame format has the same
/// range).
const SKIPPABLE: std::ops::RangeInclusive<u32> = 0x184d_2a50..=0x184d_2a5f;

/// A stream compression.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    /// Not compressed.
    None,
    /// gzip (RFC 1952).
    Gzip,
    /// Zstandard.
    Zstd,
    /// xz (LZMA2).
    Xz,
    /// LZ4 frames.
    Lz4,
}

impl Compression {
    /// The compression whose magic bytes start `prefix` (6 bytes are enough), or `None`.
    pub fn detect(prefix: &[u8]) -> Compression {
        if prefix.starts_with(&[0x1f, 0x8b]) {
            Compression::Gzip
        } else if prefix.starts_with(&ZSTD_MAGIC.to_le_bytes()) {
            Compression::Zstd
        } else if prefix.starts_with(&[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00]) {
            Compression::Xz
        } else if prefix.starts_with(&LZ4_MAGIC.to_le_bytes()) {
            Compression::Lz4
        } else {
            Compression::None
        }
    }

    /// The compression a file name asks for by its suffix (`.gz`, `.zst`, `.xz`, `.lz4`).
    pub fn from_name(name: &str) -> Compression {
        let lower = name.to_ascii_lowercase();
        if lower.ends_with(".gz") {
            Compression::Gzip
        } else if lower.ends_with(".zst") || lower.ends_with(".zstd") {
            Compression::Zstd
        } else if lower.ends_with(".xz") {
            Compression::Xz
        } else if lower.ends_with(".lz4") {
            Compression::Lz4
        } else {
            Compression::None
        }
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Zstd => "zstd",
            Compression::Xz => "xz",
            Compression::Lz4 => "lz4",
        }
    }
}
