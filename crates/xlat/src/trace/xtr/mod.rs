//! xlat's own binary trace format, `.xtr` (specified in `docs/trace-format.md`).
//!
//! In brief, the (decompressed) stream is:
//!
//! ```text
//! header   "XTR\0"  version:u16le  flags:u16le  fields_len:u32le  fields (key/value strings)
//! records  tag byte + payload, repeated
//! trailer  0xff  record_count:varint        (then end of data)
//! ```
//!
//! Access records (tag `0..=0x7f`) pack the kind (bits 0-1), a delta code (bits 2-5) and an
//! "explicit size" flag (bit 6) into the tag. The delta code gives the sign and the byte length
//! (0 to 8) of the difference between this address and the previous address of the same kind;
//! those bytes follow the tag little-endian, then (if bit 6 is set) the size as one byte, or
//! `0` and a `u32le` for sizes above 255. Without bit 6 the size repeats the previous size of
//! that kind. Decoding therefore needs one table lookup and one unaligned 8-byte load per
//! access, with no loop over varint bytes, and no branch on a record's shape.
//!
//! Event records (`0x80..=0x88`, `0x8a..=0x8b`) carry LEB128 varints; `0x89` is a block; `0xfe` is a skippable extension record;
//! `0xff` ends the trace with the number of records, so a truncated file is an error.
//! Files are zstd-compressed by default; readers also accept raw streams.
//!
//! `decode.rs` is the record decoder (tables, the decoding loops, blocks decoded alone or two
//! together), `read.rs` the reader ([`XtrReader`]), `write.rs` the writer ([`XtrWriter`]) and
//! `ahead.rs` the queue of blocks that any thread may decode.

mod ahead;
mod decode;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub use read::XtrReader;
pub use write::{encode_to_vec, XtrWriter};

use super::compress::Compression;

/// The four bytes every xtr stream starts with.
pub const MAGIC: &[u8; 4] = b"XTR\0";
/// The version this code writes.
pub const VERSION: u16 = 1;
/// The versions this code reads.
pub const SUPPORTED_VERSIONS: &[u16] = &[1];
/// The record encoding this code reads and writes (header key `encoding`).
pub const ENCODING: &str = "delta1";
/// Longest header field block accepted (bytes).
pub const MAX_HEADER_FIELDS: usize = 1 << 16;

/// Record tags.
pub mod tag {
    /// Largest access tag; access tags are `0..=ACCESS_MAX`.
    pub const ACCESS_MAX: u8 = 0x7f;
    /// `Record::Process { asid }`: varint asid.
    pub const PROCESS: u8 = 0x80;
    /// `Record::ContextSwitch { asid }`: varint asid.
    pub const CONTEXT_SWITCH: u8 = 0x81;
    /// `Record::Map { start, len, flags }`: three varints.
    pub const MAP: u8 = 0x82;
    /// `Record::Unmap { start, len }`: two varints.
    pub const UNMAP: u8 = 0x83;
    /// `Record::Fork { child }`: varint child.
    pub const FORK: u8 = 0x84;
    /// `Record::Exit { asid }`: varint asid.
    pub const EXIT: u8 = 0x85;
    /// `Record::Ipc { to }`: varint to.
    pub const IPC: u8 = 0x86;
    /// `Record::Marker { id }`: varint id.
    pub const MARKER: u8 = 0x87;
    /// `Record::Thread { tid }`: varint tid (added within version 1; the last event tag).
    pub const THREAD: u8 = 0x88;
    /// A block of access and event records decoded from a stream's initial state
    /// ([`super::BLOCK_RECORDS`]).
    pub const BLOCK: u8 = 0x89;
    /// `Record::Protect { start, len, flags }`: three varints (added within version 1).
    pub const PROTECT: u8 = 0x8a;
    /// `Record::Discard { start, len, lazy }`: three varints, `lazy` 0 or 1 (added within
    /// version 1; the last event tag).
    pub const DISCARD: u8 = 0x8b;
    /// The largest tag an access or event record may have.
    pub const LAST_RECORD: u8 = DISCARD;
    /// Extension record: varint type, varint length, that many payload bytes. Readers that do
    /// not know the type skip it (counted in `ReaderStats::skipped`).
    pub const EXTENSION: u8 = 0xfe;
    /// End of trace: varint number of records (accesses and events) before it.
    pub const END: u8 = 0xff;
}

/// Types of extension records (`0xfe`).
pub mod extension {
    /// A program a traced process exec'd that was not traced: UTF-8 `PID PATH`.
    pub const UNTRACED_EXEC: u64 = 1;
    /// `Record::Object { id, offset }`: varint id, varint offset. Not counted in the end
    /// record's total, so readers that skip it still agree with it.
    pub const OBJECT: u64 = 2;
    /// What an object is: varint id, varint device, varint inode, UTF-8 path (the rest).
    pub const OBJECT_INFO: u64 = 3;
    /// `Record::Syscall { nr, fd, object, buf, len }`: five varints. Not counted in the end
    /// record's total.
    pub const SYSCALL: u64 = 4;
}

/// Bit 6 of an access tag: an explicit size follows the delta.
const SIZE_FLAG: u8 = 0x40;

/// The decoded header of an xtr stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XtrHeader {
    /// Format version.
    pub version: u16,
    /// Record encoding (`delta1`).
    pub encoding: String,
    /// What wrote the file (header key `producer`), empty if absent.
    pub producer: String,
    /// Base page size hint in bytes (header key `page_size`), if present.
    pub page_size: Option<u64>,
    /// Every other header field, in file order.
    pub metadata: Vec<(String, String)>,
}

/// How an [`XtrWriter`] writes.
#[derive(Clone, Debug)]
pub struct XtrOptions {
    /// Compression around the stream (default zstd level 3).
    pub compression: Compression,
    /// Header `producer` value.
    pub producer: String,
    /// Header `page_size` value (omitted if `None`).
    pub page_size: Option<u64>,
    /// Further header fields. Keys must be non-empty and differ from `encoding`, `producer`
    /// and `page_size`.
    pub metadata: Vec<(String, String)>,
}

impl Default for XtrOptions {
    fn default() -> XtrOptions {
        XtrOptions {
            compression: Compression::Zstd,
            producer: concat!("xlat ", env!("CARGO_PKG_VERSION")).to_string(),
            page_size: Some(4096),
            metadata: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Varints

#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Reads a LEB128 varint at `*p` (at most 10 bytes); bytes past the slice read as 0.
#[inline]
fn get_varint(b: &[u8], p: &mut usize) -> Result<u64, &'static str> {
    let mut v = 0u64;
    for i in 0..10 {
        let byte = b.get(*p).copied().unwrap_or(0);
        *p += 1;
        if i == 9 && byte > 1 {
            return Err("varint overflows 64 bits");
        }
        v |= ((byte & 0x7f) as u64) << (7 * i);
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes")
}

#[inline]
fn get_u32(b: &[u8], p: &mut usize) -> Result<u32, &'static str> {
    let v = get_varint(b, p)?;
    u32::try_from(v).map_err(|_| "value does not fit 32 bits")
}

/// Appends `v` as an LEB128 varint (for extension payloads).
pub fn put_varint_pub(buf: &mut Vec<u8>, v: u64) {
    put_varint(buf, v)
}

// ---------------------------------------------------------------------------------------------
// Blocks

/// Most records of a block record.
pub const MAX_BLOCK_RECORDS: u64 = 1 << 16;
/// Most bytes of a block record after its header (its records).
pub const MAX_BLOCK_BYTES: u64 = 1 << 17;
/// Records per block that [`XtrWriter`] writes (fewer in a block that an extension record or
/// the end cuts short, or whose bytes reach [`BLOCK_BYTES`]): a batch's worth.
pub const BLOCK_RECORDS: usize = super::BATCH;
/// Bytes at which [`XtrWriter`] ends a block.
const BLOCK_BYTES: usize = 1 << 16;

/// Longest record the fast loop decodes (events: tag + 3 varints of up to 10 bytes).
const MARGIN: usize = 32;
