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
//! Event records (`0x80..=0x88`) carry LEB128 varints; `0xfe` is a skippable extension record;
//! `0xff` ends the trace with the number of records, so a truncated file is an error.
//! Files are zstd-compressed by default; readers also accept raw streams.

use std::io::{Read, Write};

use super::ahead::{Ahead, JobState, Params, AHEAD};
use super::frames::SpareWork;
use super::open::{CompressedWriter, Compression};
use super::{BatchWords, Kind, ReaderStats, Record, Tally, TraceError, TraceReader, TraceWriter, SLOW_WORD};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

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

/// Byte length of the delta, by delta code (tag bits 2-5). Code 0: delta 0; 1..=8: positive,
/// that many bytes; 9..=15: negative, 1..=7 bytes.
static DELTA_LEN: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7];

/// The mask of an access record's delta bytes and the delta's sign (all ones when negative),
/// by delta code.
static DELTA: [(u64, u64); 16] = {
    let mut t = [(0u64, 0u64); 16];
    let mut c = 1;
    while c < 16 {
        let len = DELTA_LEN[c] as u32;
        t[c] = (if len == 8 { u64::MAX } else { (1u64 << (8 * len)) - 1 }, if c > 8 { u64::MAX } else { 0 });
        c += 1;
    }
    t
};

/// Length of an access record by tag: the tag, the delta bytes and, with bit 6, the size byte
/// (the escaped size, size byte 0, adds 4). A table of bytes: the next record's position
/// waits on this load, so it is kept as short as it can be.
const ACCESS_LEN: [u8; 128] = {
    let mut t = [0u8; 128];
    let mut tag = 0;
    while tag < 128 {
        t[tag] = 1 + DELTA_LEN[(tag >> 2) & 15] + (tag >> 6) as u8;
        tag += 1;
    }
    t
};

/// What an access tag says but its length ([`ACCESS_LEN`]) and its kind (bits 0-1), from one
/// table row: one load per field.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct TagInfo {
    /// [`DELTA`] of the tag's delta code: the mask of the delta bytes and the sign.
    mask: u64,
    neg: u64,
    /// What one reference of the tag's kind adds to [`Tally`]'s counts by kind.
    kind_one: u64,
    /// All ones if an explicit size follows (bit 6), else 0.
    pick: u32,
}

/// [`TagInfo`] by access tag.
const TAGS: [TagInfo; 128] = {
    let mut t = [TagInfo { mask: 0, neg: 0, kind_one: 0, pick: 0 }; 128];
    let mut tag = 0;
    while tag < 128 {
        let (mask, neg) = DELTA[(tag >> 2) & 15];
        let k = tag & 3;
        t[tag] = TagInfo {
            mask,
            neg,
            kind_one: 1 << (16 * k),
            pick: if tag & SIZE_FLAG as usize != 0 { u32::MAX } else { 0 },
        };
        tag += 1;
    }
    t
};

/// [`ACCESS_LEN`] and [`TAGS`] in one static, so that the decoding loop addresses both from one
/// register.
#[repr(C)]
struct AccessTables {
    tags: [TagInfo; 128],
    len: [u8; 128],
}

static ACCESS: AccessTables = AccessTables { tags: TAGS, len: ACCESS_LEN };

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

// ---------------------------------------------------------------------------------------------
// Reader

/// Buffer size.
const CAP: usize = 1 << 18;
/// Zero bytes kept after the valid data so that decoding never indexes out of the buffer.
const PAD: usize = 32;
/// Most records of a block record.
pub const MAX_BLOCK_RECORDS: u64 = 1 << 16;
/// Most bytes of a block record after its header (its records).
pub const MAX_BLOCK_BYTES: u64 = 1 << 17;
/// Records per block that [`XtrWriter`] writes (fewer in a block that an extension record or
/// the end cuts short, or whose bytes reach [`BLOCK_BYTES`]): a batch's worth.
pub const BLOCK_RECORDS: usize = super::BATCH;
/// Bytes at which [`XtrWriter`] ends a block.
const BLOCK_BYTES: usize = 1 << 16;
const _: () = assert!(MAX_BLOCK_BYTES as usize + 32 <= CAP, "a block and its header fit in the window");
/// Longest record the fast loop decodes (events: tag + 3 varints of up to 10 bytes).
pub(super) const MARGIN: usize = 32;
const _: () = assert!(MARGIN >= 16, "decode_run reads 16-byte windows");

enum Stop {
    /// Reached the batch size or the end of the safe region.
    Limit,
    /// A tag the fast loop does not handle (extension, end, unknown).
    Special,
    /// A malformed record, and how many of its bytes were looked at.
    Bad(&'static str, usize),
}

/// Decodes the payload of event record `tag` from `w` (which starts after the tag); returns
/// the record and the payload's length.
#[inline(never)]
fn decode_event(w: &[u8], tag: u8) -> Result<(Record, usize), (&'static str, usize)> {
    let mut p = 0;
    let rec = (|| -> Result<Record, &'static str> {
        Ok(match tag {
            tag::PROCESS => Record::Process { asid: get_u32(w, &mut p)? },
            tag::CONTEXT_SWITCH => Record::ContextSwitch { asid: get_u32(w, &mut p)? },
            tag::MAP => {
                Record::Map { start: get_varint(w, &mut p)?, len: get_varint(w, &mut p)?, flags: get_u32(w, &mut p)? }
            }
            tag::UNMAP => Record::Unmap { start: get_varint(w, &mut p)?, len: get_varint(w, &mut p)? },
            tag::FORK => Record::Fork { child: get_u32(w, &mut p)? },
            tag::EXIT => Record::Exit { asid: get_u32(w, &mut p)? },
            tag::IPC => Record::Ipc { to: get_u32(w, &mut p)? },
            tag::MARKER => Record::Marker { id: get_varint(w, &mut p)? },
            _ => Record::Thread { tid: get_u32(w, &mut p)? },
        })
    })()
    .map_err(|m| (m, p))?;
    Ok((rec, p))
}

#[inline(always)]
fn kind_of(k: usize) -> Kind {
    // A table load: a `match` becomes a jump table here.
    Kind::ALL[k & 3]
}

/// The offset in `buf` of `p`, a pointer into it or one past its end.
#[inline(always)]
fn at(buf: &[u8], p: *const u8) -> usize {
    p as usize - buf.as_ptr() as usize
}

/// `out[i] = r`: in line for a sink that has every record written, else out of the decoding
/// loop, which then keeps no pointer into `out` (most records are not written).
#[inline(always)]
fn put<S: Sink>(out: &mut [Record], i: usize, r: Record) {
    if S::ALL {
        out[i] = r;
    } else {
        put_rare(out, i, r);
    }
}

#[cold]
#[inline(never)]
fn put_rare(out: &mut [Record], i: usize, r: Record) {
    out[i] = r;
}

/// Decodes the access record `w` starts with (tag `t`, at most [`tag::ACCESS_MAX`]) as `out[i]`
/// with the per-kind state `la` and `ls`, telling `sink`: its length, or (an escaped size of 0)
/// the bytes looked at, with nothing written.
#[inline(always)]
fn access_record<S: Sink>(
    w: &[u8; 16],
    t: u8,
    la: &mut [u64; 4],
    ls: &mut [u32; 4],
    sink: &mut S,
    out: &mut [Record],
    i: usize,
) -> Result<usize, usize> {
    let info = &ACCESS.tags[(t & 0x7f) as usize];
    // The length from the byte table, with no branch: branches on the commonest shapes (tried)
    // mispredict on real traces, whose shapes alternate, and cost more than the load they save
    // on the chain from one record to the next.
    let mut len = ACCESS.len[(t & 0x7f) as usize] as usize;
    // The kind from the tag itself rather than the table row, so that the kind's last address
    // and size are addressed as soon as the tag is read.
    let k = (t & 3) as usize;
    let raw = u64::from_le_bytes(w[1..9].try_into().unwrap()) & info.mask;
    let addr = la[k].wrapping_add((raw ^ info.neg).wrapping_sub(info.neg));
    // The explicit size byte (the record's last, if bit 6 says one follows), else the kind's
    // last size, picked without a branch (which would mispredict on traces whose sizes vary,
    // x86 instruction fetches).
    let explicit = w[(len - 1) & 15] as u32;
    let mut size = ls[k] ^ ((ls[k] ^ explicit) & info.pick);
    if size == 0 {
        size = u32::from_le_bytes(w[len & 15..][..4].try_into().unwrap());
        len += 4;
        if size == 0 {
            return Err(len);
        }
    }
    la[k] = addr;
    ls[k] = size;
    if sink.access(i, k, info, size, addr) {
        put::<S>(out, i, Record::Access { kind: kind_of(k), size, addr });
    }
    Ok(len)
}

/// Decodes records from `buf[pos..]` into `out[*n..]` while `pos < limit` and `out` has room.
/// Requires `limit + MARGIN <= buf.len()`. Returns the new position, the start of the last record
/// looked at, why it stopped, and the sink (taken and given back by value, so that its counts
/// stay in registers).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn decode_run<S: Sink>(
    buf: &[u8],
    mut pos: usize,
    limit: usize,
    last_addr: &mut [u64; 4],
    last_size: &mut [u32; 4],
    out: &mut [Record],
    n: &mut usize,
    mut sink: S,
) -> (usize, usize, Stop, S) {
    let buf = &buf[..limit + MARGIN];
    let mut la = *last_addr;
    let mut ls = *last_size;
    let mut i = *n;
    let mut start = pos;
    let stop = 'run: loop {
        // Every record is at least one byte long, so while `pos < lim` there is room for it in
        // `out`: one test a record.
        let lim = limit.min(pos + (out.len() - i));
        if pos >= lim {
            break Stop::Limit;
        }
        // The loop holds the record's address rather than `buf` and `pos`, and tests it at the
        // end, where the last record's start is `p - len`: two registers fewer.
        let (mut p, end) = (buf[pos..].as_ptr(), buf[lim..].as_ptr());
        loop {
            debug_assert!(i < out.len() && p < end);
            // SAFETY: `p < end`, which is `buf`'s byte `lim <= limit`, and `buf.len() == limit +
            // MARGIN` with `MARGIN >= 16`, so the 16 bytes from `p` are inside `buf`.
            let w: &[u8; 16] = unsafe { &*(p as *const [u8; 16]) };
            let t = w[0];
            let len = if t <= tag::ACCESS_MAX {
                match access_record(w, t, &mut la, &mut ls, &mut sink, out, i) {
                    Ok(len) => len,
                    Err(len) => {
                        pos = at(buf, p);
                        break 'run Stop::Bad("access of size 0", len);
                    }
                }
            } else {
                pos = at(buf, p);
                if t <= tag::THREAD {
                    match decode_event(&buf[pos + 1..pos + MARGIN], t) {
                        Ok((rec, len)) => {
                            put::<S>(out, i, rec);
                            sink.event(i);
                            1 + len
                        }
                        Err((m, len)) => break 'run Stop::Bad(m, 1 + len),
                    }
                } else {
                    break 'run Stop::Special;
                }
            };
            // SAFETY: `len <= MARGIN`: `p + len` is inside `buf` or one past its end.
            p = unsafe { p.add(len) };
            i += 1;
            if p >= end {
                pos = at(buf, p);
                start = pos - len;
                break;
            }
        }
    };
    // A record that stops the run is not consumed: `pos` is its start.
    if !matches!(stop, Stop::Limit) {
        start = pos;
    }
    *n = i;
    *last_addr = la;
    *last_size = ls;
    (pos, start, stop, sink)
}

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

/// Evaluates `$body` with each `$sink` the [`Words`] sink of its `$words` for `$all` (every
/// record written or not) and page shift `$shift`, storing as `$nt` says ([`Words`]): one build
/// of the decoding loop that writes every record, one for 4 KiB pages (the shift a constant) and
/// one for other page sizes. Several sinks (blocks decoded together) are of one type.
macro_rules! with_words_sink {
    ($all:expr, $shift:expr, $nt:tt, $($words:expr => $sink:ident),+ ; $body:expr) => {
        match ($all, $shift) {
            (true, _) => {
                $(let $sink = Words::<true, 0, $nt>::new($words, $shift);)+
                $body
            }
            (false, 12) => {
                $(let $sink = Words::<false, 12, $nt>::new($words, $shift);)+
                $body
            }
            (false, _) => {
                $(let $sink = Words::<false, 0, $nt>::new($words, $shift);)+
                $body
            }
        }
    };
}

/// Stores `w` at `p`; with `NT`, around the cache (a non-temporal store, on x86-64), for words
/// that another thread is to read: the storing thread then neither waits to own the line (which
/// the other thread read last, when the buffer was used before) nor keeps it.
#[inline(always)]
fn store_word<const NT: bool>(p: *mut u64, w: u64) {
    #[cfg(target_arch = "x86_64")]
    if NT {
        // SAFETY: as for the plain store below (the caller's); `_mm_stream_si64` is SSE2, which
        // every x86-64 processor has.
        unsafe { std::arch::x86_64::_mm_stream_si64(p as *mut i64, w as i64) };
        return;
    }
    // SAFETY: the caller's: `p` is valid for a write of a `u64`.
    unsafe { *p = w };
}

/// Orders the non-temporal stores made so far ([`store_word`]) before any later store, such as
/// the one that hands the words to another thread.
#[inline(always)]
fn fence_words<const NT: bool>() {
    #[cfg(target_arch = "x86_64")]
    if NT {
        // SAFETY: SSE, which every x86-64 processor has.
        unsafe { std::arch::x86_64::_mm_sfence() };
    }
}

/// Decodes a block's `records` records, `raw[..bytes]` (followed by at least [`MARGIN`] more
/// bytes), from a stream's initial state into `recs` and `words` as `params` say; returns their
/// counts, or what is wrong and where in the block. With `NT`, the words are for threads on
/// other cores ([`BatchWords::for_other_core`]) and are stored around this thread's cache
/// ([`store_word`]).
pub(super) fn decode_block<const NT: bool>(
    raw: &[u8],
    bytes: usize,
    records: usize,
    params: Params,
    recs: &mut Vec<Record>,
    words: &mut Vec<u64>,
) -> Result<Tally, (String, usize)> {
    let (out, ws) = block_room(raw, bytes, records, recs, words);
    let mut st = BlockState::default();
    let (pos, start, stop, tally) = with_words_sink!(params.all_records, params.shift, NT, ws => sink; {
        let (p, s, stop, sink) = decode_run(raw, 0, bytes, &mut st.la, &mut st.ls, out, &mut st.n, sink);
        (p, s, stop, sink.tally)
    });
    fence_words::<NT>();
    block_result(raw, bytes, records, (pos, start, stop), st.n, tally, recs, words)
}

/// [`decode_block`] of two blocks, `a` and `b`, whose records are decoded in turns while both
/// hold access records: two chains of record positions in flight, where one block alone is one
/// chain (each record's position waits on the previous record's tag and length, about 11
/// cycles). The rest of each block, from its first other record on, as [`decode_block`] does.
pub(super) fn decode_blocks<const NT: bool>(
    a: BlockIn<'_>,
    b: BlockIn<'_>,
    params: Params,
) -> [Result<Tally, (String, usize)>; 2] {
    let (outa, wsa) = block_room(a.raw, a.bytes, a.records, a.recs, a.words);
    let (outb, wsb) = block_room(b.raw, b.bytes, b.records, b.recs, b.words);
    let (mut sa, mut sb) = (BlockState::default(), BlockState::default());
    let (ends, tallies) = with_words_sink!(params.all_records, params.shift, NT, wsa => sinka, wsb => sinkb; {
        let (pa, pb, sinka, sinkb) =
            decode_pair((a.raw, a.bytes, &mut sa, outa, sinka), (b.raw, b.bytes, &mut sb, outb, sinkb));
        let (p, s, stop, sinka) = decode_run(a.raw, pa, a.bytes, &mut sa.la, &mut sa.ls, outa, &mut sa.n, sinka);
        let (q, t, stopb, sinkb) = decode_run(b.raw, pb, b.bytes, &mut sb.la, &mut sb.ls, outb, &mut sb.n, sinkb);
        ([(p, s, stop), (q, t, stopb)], [sinka.tally, sinkb.tally])
    });
    fence_words::<NT>();
    let [ea, eb] = ends;
    [
        block_result(a.raw, a.bytes, a.records, ea, sa.n, tallies[0], a.recs, a.words),
        block_result(b.raw, b.bytes, b.records, eb, sb.n, tallies[1], b.recs, b.words),
    ]
}

/// A block to decode ([`decode_blocks`]): its records `raw[..bytes]` (followed by at least
/// [`MARGIN`] more bytes), how many they are, and where they go.
pub(super) struct BlockIn<'a> {
    pub(super) raw: &'a [u8],
    pub(super) bytes: usize,
    pub(super) records: usize,
    pub(super) recs: &'a mut Vec<Record>,
    pub(super) words: &'a mut Vec<u64>,
}

/// The per-kind state of a block being decoded and the records decoded so far.
struct BlockState {
    la: [u64; 4],
    ls: [u32; 4],
    n: usize,
}

impl Default for BlockState {
    /// A stream's initial state.
    fn default() -> BlockState {
        BlockState { la: [0; 4], ls: [1; 4], n: 0 }
    }
}

/// Room for a block's `records` records and words in `recs` and `words`.
fn block_room<'a>(
    raw: &[u8],
    bytes: usize,
    records: usize,
    recs: &'a mut Vec<Record>,
    words: &'a mut Vec<u64>,
) -> (&'a mut [Record], &'a mut [u64]) {
    assert!(raw.len() >= bytes + MARGIN && records <= Tally::MAX);
    if recs.len() < records {
        recs.resize(records, Record::Marker { id: 0 });
    }
    if words.len() < records {
        words.resize(records, SLOW_WORD);
    }
    (&mut recs[..records], &mut words[..records])
}

/// What a block's decoding came to: where it stopped (`decode_run`'s position, last record's
/// start and why) after `n` records.
#[allow(clippy::too_many_arguments)]
fn block_result(
    raw: &[u8],
    bytes: usize,
    records: usize,
    (pos, start, stop): (usize, usize, Stop),
    n: usize,
    tally: Tally,
    recs: &mut Vec<Record>,
    words: &mut Vec<u64>,
) -> Result<Tally, (String, usize)> {
    match stop {
        Stop::Limit => {}
        Stop::Special => return Err((not_in_block(raw[start]), start)),
        Stop::Bad(m, _) => return Err((format!("corrupt block: {m}"), start)),
    }
    if pos != bytes || n != records {
        // At the block's first record.
        return Err(("corrupt block: its records and its length disagree".into(), 0));
    }
    recs.truncate(records);
    words.truncate(records);
    Ok(tally)
}

/// The paired loop of [`decode_blocks`]: one access record of each block a step, from each
/// block's start, while both blocks have one next and room for it. Returns where each block
/// stopped (the start of a record not decoded, or its end) and the sinks.
#[inline(always)]
#[allow(clippy::type_complexity)]
fn decode_pair<S: Sink>(
    (ra, ba, sa, outa, mut sinka): (&[u8], usize, &mut BlockState, &mut [Record], S),
    (rb, bb, sb, outb, mut sinkb): (&[u8], usize, &mut BlockState, &mut [Record], S),
) -> (usize, usize, S, S) {
    let (ra, rb) = (&ra[..ba + MARGIN], &rb[..bb + MARGIN]);
    let (mut pa, mut pb) = (ra.as_ptr(), rb.as_ptr());
    let (mut ia, mut ib) = (sa.n, sb.n);
    debug_assert!(ia == 0 && ib == 0);
    'pair: loop {
        // As in `decode_run`: each record is at least one byte long, so while a position is
        // below its end there is room for its record in `out`. The ends move on as records
        // are decoded (a record is about 3 bytes long, so the first ends are about a third of
        // the way), until one is its block's end or its `out` is full.
        let (posa, posb) = (at(ra, pa), at(rb, pb));
        let (lima, limb) = (ba.min(posa + (outa.len() - ia)), bb.min(posb + (outb.len() - ib)));
        if posa >= lima || posb >= limb {
            break;
        }
        let (enda, endb) = (ra[lima..].as_ptr(), rb[limb..].as_ptr());
        while pa < enda && pb < endb {
            // SAFETY: `p < end`, at most byte `bytes` of the block, which `MARGIN >= 16` more
            // bytes follow: the 16 bytes from `p` are inside it.
            let (wa, wb): (&[u8; 16], &[u8; 16]) = unsafe { (&*(pa as *const [u8; 16]), &*(pb as *const [u8; 16])) };
            let (ta, tb) = (wa[0], wb[0]);
            if (ta | tb) > tag::ACCESS_MAX {
                break 'pair;
            }
            let Ok(la) = access_record(wa, ta, &mut sa.la, &mut sa.ls, &mut sinka, outa, ia) else { break 'pair };
            // SAFETY: `la <= MARGIN`: `pa + la` is inside the block's slice or one past its end.
            pa = unsafe { pa.add(la) };
            ia += 1;
            let Ok(lb) = access_record(wb, tb, &mut sb.la, &mut sb.ls, &mut sinkb, outb, ib) else { break 'pair };
            // SAFETY: as for `pa`.
            pb = unsafe { pb.add(lb) };
            ib += 1;
        }
    }
    (sa.n, sb.n) = (ia, ib);
    (at(ra, pa), at(rb, pb), sinka, sinkb)
}

/// What is wrong with tag `t` met inside a block.
#[cold]
fn not_in_block(t: u8) -> String {
    if matches!(t, tag::EXTENSION | tag::END | tag::BLOCK) {
        format!("corrupt block: it holds a record other than an access or an event (tag {t:#04x})")
    } else {
        format!("unknown record tag {t:#04x} (xtr version {VERSION} defines 0x00-0x89, 0xfe, 0xff)")
    }
}

/// What the decoder does with each record it decodes for `out[i]`, besides writing it. Passed
/// by value ([`decode_run`]), so a sink is a few plain values.
trait Sink: Copy {
    /// Whether [`Sink::access`] always returns true.
    const ALL: bool;
    /// An access of kind code `k` (`kind as usize`), tag row `info` and `size >= 1`; returns
    /// whether its record is to be written.
    fn access(&mut self, i: usize, k: usize, info: &TagInfo, size: u32, addr: u64) -> bool;
    fn event(&mut self, i: usize);
}

/// Nothing ([`TraceReader::read_batch`]).
impl Sink for () {
    const ALL: bool = true;
    #[inline(always)]
    fn access(&mut self, _: usize, _: usize, _: &TagInfo, _: u32, _: u64) -> bool {
        true
    }
    #[inline(always)]
    fn event(&mut self, _: usize) {}
}

/// Counts each record and writes its page word ([`TraceReader::read_batch_words`]); writes
/// every access record if `ALL`, else those whose word is [`SLOW_WORD`] alone
/// ([`BatchWords::all_records`]).
/// `SHIFT` is the page shift if not 0 (a constant in the loop: the 4 KiB pages of nearly every
/// run), else `shift`. With `NT`, the words are stored around the cache ([`store_word`]).
#[derive(Clone, Copy)]
struct Words<'a, const ALL: bool, const SHIFT: u32, const NT: bool> {
    /// The words of `out[i]` go to `words[i]`: a slice at least as long as `out` (checked where
    /// the sink is made), held as a pointer so that the sink is `Copy`.
    words: *mut u64,
    tally: Tally,
    shift: u32,
    _words: std::marker::PhantomData<&'a mut [u64]>,
}

impl<'a, const ALL: bool, const SHIFT: u32, const NT: bool> Words<'a, ALL, SHIFT, NT> {
    /// A sink for decoding into `out` of at most `words.len()` records.
    fn new(words: &'a mut [u64], shift: u32) -> Words<'a, ALL, SHIFT, NT> {
        debug_assert!(SHIFT == 0 || SHIFT == shift);
        Words { words: words.as_mut_ptr(), tally: Tally::default(), shift, _words: std::marker::PhantomData }
    }
}

impl<const ALL: bool, const SHIFT: u32, const NT: bool> Sink for Words<'_, ALL, SHIFT, NT> {
    const ALL: bool = ALL;
    #[inline(always)]
    fn access(&mut self, i: usize, k: usize, info: &TagInfo, size: u32, addr: u64) -> bool {
        let shift = if SHIFT != 0 { SHIFT } else { self.shift };
        // The data bit (kind 0, instruction fetches, is the one kind that is not data)
        // computed rather than loaded: loads are the scarcer resource in this loop.
        let w = self.tally.access_coded(k, info.kind_one, (k as u64 + 3) >> 2, size, addr, shift);
        // SAFETY: `i < out.len() <= words.len()` ([`Words::new`], `read_batch_words`).
        store_word::<NT>(unsafe { self.words.add(i) }, w);
        ALL || w == SLOW_WORD
    }
    #[inline(always)]
    fn event(&mut self, i: usize) {
        // SAFETY: as in `access`.
        store_word::<NT>(unsafe { self.words.add(i) }, self.tally.event());
    }
}

/// Streaming reader of xtr (the stream given must already be decompressed; see
/// [`super::open::decompress`]).
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
    notes: super::TraceNotes,
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
            notes: super::TraceNotes::default(),
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
        super::refill_window(
            &mut self.inner,
            &mut self.buf,
            CAP,
            &mut self.pos,
            &mut self.end,
            &mut self.base,
            &mut self.eof,
        )
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
                            self.notes.objects.push(super::ObjectInfo { id: id as u32, dev, ino, path });
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
                format!("unknown record tag {t:#04x} (xtr version {VERSION} defines 0x00-0x89, 0xfe, 0xff)"),
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
            let (mut words, mut counts) = (Vec::new(), super::TraceCounts::default());
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

    fn notes(&self) -> super::TraceNotes {
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
        counts: &mut super::TraceCounts,
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

// ---------------------------------------------------------------------------------------------
// Writer

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
        Record::Object { .. } | Record::Syscall { .. } => unreachable!("written as an extension"),
    }
}

/// Appends `v` as an LEB128 varint (for extension payloads).
pub fn put_varint_pub(buf: &mut Vec<u8>, v: u64) {
    put_varint(buf, v)
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

#[cfg(test)]
mod tests {
    use super::super::BATCH;
    use super::*;

    fn decode(bytes: &[u8]) -> Result<Vec<Record>, TraceError> {
        let (s, _) = super::super::open::decompress(bytes).unwrap();
        let mut r = XtrReader::new(s, "t")?;
        let mut all = Vec::new();
        let mut b = Vec::new();
        while r.read_batch(&mut b, 5)? > 0 {
            all.extend_from_slice(&b);
        }
        Ok(all)
    }

    #[test]
    fn delta_codes() {
        let recs: Vec<Record> = [0u64, 1, 0, u64::MAX, 1 << 56, (1 << 56) + 1, 0, 1 << 63, 255, 256]
            .iter()
            .enumerate()
            .map(|(i, &a)| Record::Access { kind: Kind::ALL[i % 4], size: [1, 8, 255, 256, u32::MAX][i % 5], addr: a })
            .collect();
        for c in [Compression::None, Compression::Zstd] {
            assert_eq!(decode(&encode_to_vec(&recs, c).unwrap()).unwrap(), recs);
        }
    }

    #[test]
    fn sequential_ifetch_is_two_bytes() {
        let recs: Vec<Record> =
            (0..100).map(|i| Record::Access { kind: Kind::Ifetch, size: 4, addr: 0x1000 + 4 * i }).collect();
        let raw = encode_to_vec(&recs, Compression::None).unwrap();
        let header = 12 + raw[8] as usize;
        // The block's header (tag, 100, 202 in two bytes); the first record: tag, 2 delta bytes,
        // size byte; then 2 bytes each; then END + varint.
        assert_eq!(raw[header..header + 4], [tag::BLOCK, 100, 202 & 0x7f | 0x80, 1]);
        assert_eq!(raw.len(), header + 4 + 4 + 99 * 2 + 2);
    }

    /// A trace of every shape in blocks: accesses of each kind (some across pages), events, and
    /// extension records that end blocks early.
    fn blocky_trace() -> Vec<Record> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut recs = Vec::new();
        for i in 0..30_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let kind = Kind::ALL[(x % 4) as usize];
            recs.push(Record::Access { kind, size: [4, 8, 1, 300, 8192][(x >> 8) as usize % 5], addr: x >> 20 });
            match i % 997 {
                5 => recs.push(Record::ContextSwitch { asid: (i % 3) as u32 }),
                9 => recs.push(Record::Map { start: x, len: 1 << 20, flags: 3 }),
                _ => {}
            }
            if i % 5003 == 7 {
                recs.push(Record::Object { id: 2, offset: i });
            }
        }
        recs
    }

    /// What each batch of `r` gives with `read_batch_words` as `params` say, in batches of
    /// `max`: the records (those whose word is slow, unless all are), the words and the counts;
    /// the words for another core if `for_other_core`.
    fn batches(
        r: &mut dyn TraceReader,
        max: usize,
        params: Params,
        for_other_core: bool,
    ) -> Result<(Vec<Record>, Vec<u64>, super::super::TraceCounts), TraceError> {
        let (mut recs, mut words, mut counts) = (Vec::new(), Vec::new(), super::super::TraceCounts::default());
        let (mut out, mut w) = (Vec::new(), Vec::new());
        loop {
            let bw = BatchWords {
                words: &mut w,
                shift: params.shift,
                counts: &mut counts,
                all_records: params.all_records,
                for_other_core,
            };
            let n = r.read_batch_words(&mut out, max, bw)?;
            if n == 0 {
                return Ok((recs, words, counts));
            }
            assert!(n <= max && out.len() == n && w.len() == n);
            for (rec, &word) in out.iter().zip(&w) {
                recs.push(if params.all_records || word == SLOW_WORD { *rec } else { Record::Marker { id: 0 } });
            }
            words.extend_from_slice(&w);
        }
    }

    /// Reads `raw` with `helpers` threads calling the reader's spare work all along.
    fn with_helpers<T>(raw: &[u8], helpers: usize, read: impl FnOnce(&mut dyn TraceReader) -> T) -> T {
        let (s, _) = super::super::open::decompress(raw).unwrap();
        let mut r = XtrReader::new(s, "t").unwrap();
        let spare = r.spare_work().expect("an xtr reader decodes blocks for others");
        let stop = AtomicBool::new(false);
        std::thread::scope(|scope| {
            for _ in 0..helpers {
                scope.spawn(|| {
                    while !stop.load(Ordering::Relaxed) {
                        if !spare.help() {
                            std::thread::yield_now();
                        }
                    }
                });
            }
            let out = read(&mut r);
            stop.store(true, Ordering::Relaxed);
            out
        })
    }

    #[test]
    fn blocks_decoded_by_helpers_give_what_one_thread_gives() {
        let recs = blocky_trace();
        for c in [Compression::None, Compression::Zstd] {
            let raw = encode_to_vec(&recs, c).unwrap();
            assert_eq!(decode(&raw).unwrap(), recs);
            for (shift, all_records) in [(12, false), (12, true), (13, false), (21, true)] {
                let params = Params { shift, all_records };
                // The reference: the records' words and counts by the generic definition.
                let mut counts = super::super::TraceCounts::default();
                let mut want_words = Vec::new();
                let plain: Vec<Record> = recs.iter().copied().filter(|r| !matches!(r, Record::Object { .. })).collect();
                counts.add_words(&recs, shift, &mut want_words);
                let want_recs: Vec<Record> = recs
                    .iter()
                    .zip(&want_words)
                    .map(|(r, &w)| if all_records || w == SLOW_WORD { *r } else { Record::Marker { id: 0 } })
                    .collect();
                assert!(plain.len() < recs.len());
                assert!(shift != 12 || want_words.iter().filter(|&&w| w == SLOW_WORD).count() > 1000);
                // Batches of a block (queued), and smaller than a block (decoded in place); the
                // words stored through the cache or around it (for another core).
                for (max, helpers, other) in
                    [(BATCH, 0, false), (BATCH, 0, true), (BATCH, 1, true), (BATCH, 3, false), (1000, 2, true)]
                {
                    let got = with_helpers(&raw, helpers, |r| batches(r, max, params, other).unwrap());
                    let case = format!("{c:?} shift {shift} max {max} helpers {helpers} other core {other}");
                    assert!(got.1 == want_words, "{case}: words");
                    assert!(got.0 == want_recs, "{case}: records");
                    assert_eq!(got.2, counts, "{case}: counts");
                }
            }
            // `read_batch` after `read_batch_words` queued blocks: the records go on in order.
            let got = with_helpers(&raw, 1, |r| {
                let (mut out, mut w, mut counts) = (Vec::new(), Vec::new(), super::super::TraceCounts::default());
                let params = Params { shift: 12, all_records: true };
                let bw = BatchWords {
                    words: &mut w,
                    shift: 12,
                    counts: &mut counts,
                    all_records: params.all_records,
                    for_other_core: true,
                };
                let mut all = Vec::new();
                r.read_batch_words(&mut out, BATCH, bw).unwrap();
                all.extend_from_slice(&out);
                while r.read_batch(&mut out, 700).unwrap() > 0 {
                    assert!(out.len() <= 700);
                    all.extend_from_slice(&out);
                }
                all
            });
            assert!(got == recs, "{c:?}: read_batch after read_batch_words");
        }
    }

    /// The body of the first block record of `recs` written as xtr (uncompressed), and how
    /// many records it holds.
    fn block_body(recs: &[Record]) -> (Vec<u8>, usize) {
        let raw = encode_to_vec(recs, Compression::None).unwrap();
        let header = 12 + u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
        assert_eq!(raw[header], tag::BLOCK);
        let mut p = header + 1;
        let n = get_varint(&raw, &mut p).unwrap() as usize;
        let bytes = get_varint(&raw, &mut p).unwrap() as usize;
        (raw[p..p + bytes].to_vec(), n)
    }

    #[test]
    fn the_paired_loop_runs_until_a_block_ends() {
        // Two blocks of access records only, about 3 bytes each: the paired loop takes the
        // records of both in turns until the shorter one ends (not only as many bytes as it
        // has records, where the room it first knows of runs out).
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut block = |n: usize| {
            let recs: Vec<Record> = (0..n)
                .map(|_| {
                    let r = next();
                    let kind = Kind::ALL[(r & 3) as usize];
                    Record::Access { kind, size: 1 + (r >> 8) as u32 % 8, addr: 0x40_0000 + (r >> 16) % 0x10_0000 }
                })
                .collect();
            let (body, count) = block_body(&recs);
            assert_eq!(count, n);
            let bytes = body.len();
            assert!(bytes > 2 * n, "records of more than 2 bytes on average");
            ([&body[..], &[0; MARGIN][..]].concat(), bytes, n)
        };
        let (a, b) = (block(3000), block(2000));
        let (mut oa, mut ob) = (vec![Record::Marker { id: 0 }; a.2], vec![Record::Marker { id: 0 }; b.2]);
        let (mut wa, mut wb) = (vec![0; a.2], vec![0; b.2]);
        let (mut sa, mut sb) = (BlockState::default(), BlockState::default());
        let (sinka, sinkb) = (Words::<false, 12, false>::new(&mut wa, 12), Words::<false, 12, false>::new(&mut wb, 12));
        let (pa, pb, _, _) = decode_pair((&a.0, a.1, &mut sa, &mut oa, sinka), (&b.0, b.1, &mut sb, &mut ob, sinkb));
        assert_eq!((pb, sb.n), (b.1, b.2), "the shorter block decoded to its end in the paired loop");
        assert!(sa.n >= b.2 && pa < a.1, "the longer one as far");
    }

    #[test]
    fn blocks_decoded_in_pairs_give_what_each_gives_alone() {
        // Block bodies: records of a generated trace (accesses of every kind and size, the
        // escaped size 300, events) cut at several lengths, a block whose records start with
        // an event, an empty one, and corrupt ones (an escaped size of 0 after good records, a
        // record count one too high, an extension inside).
        let recs = blocky_trace();
        let good = [0x49, 0x00, 0x10, 0x04, 0x25, 0x08];
        let mut blocks: Vec<(Vec<u8>, usize)> = [1, 2, 7, 100, 998, 2000, 4096]
            .iter()
            .zip([0, 3, 11, 500, 1000, 5000, 20_000])
            .map(|(&n, from)| block_body(&recs[from..from + n]))
            .collect();
        blocks.push(block_body(&[Record::ContextSwitch { asid: 1 }, recs[0], recs[1]]));
        blocks.push((Vec::new(), 0));
        blocks.push(([&good[..], &good[..], &[0x45, 0x00, 0, 0, 0, 0][..]].concat(), 5));
        blocks.push((good.to_vec(), 3));
        blocks.push(([&good[..], &[tag::EXTENSION, 9, 0][..]].concat(), 3));
        assert!(blocks.iter().any(|(b, _)| b.contains(&0x40)), "an escaped or explicit size");
        let params = Params { shift: 12, all_records: false };
        let alone = |(b, n): &(Vec<u8>, usize)| {
            let raw = [&b[..], &[0; MARGIN]].concat();
            let (mut recs, mut words) = (Vec::new(), Vec::new());
            let r = decode_block::<false>(&raw, b.len(), *n, params, &mut recs, &mut words);
            r.map(|t| (t, recs, words))
        };
        for a in &blocks {
            for b in &blocks {
                let (rawa, rawb) = ([&a.0[..], &[0; MARGIN]].concat(), [&b.0[..], &[0; MARGIN]].concat());
                let (mut ra, mut wa, mut rb, mut wb) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
                let [ta, tb] = decode_blocks::<false>(
                    BlockIn { raw: &rawa, bytes: a.0.len(), records: a.1, recs: &mut ra, words: &mut wa },
                    BlockIn { raw: &rawb, bytes: b.0.len(), records: b.1, recs: &mut rb, words: &mut wb },
                    params,
                );
                let pair = [ta.map(|t| (t, ra, wa)), tb.map(|t| (t, rb, wb))];
                for ((got, want), which) in pair.into_iter().zip([alone(a), alone(b)]).zip(["a", "b"]) {
                    match (got, want) {
                        (Ok((tg, rg, wg)), Ok((tw, rw, ww))) => {
                            let counts = |t: Tally| {
                                let mut c = super::super::TraceCounts::default();
                                c.add_tally(&t);
                                c
                            };
                            assert!(
                                counts(tg) == counts(tw) && wg == ww,
                                "{which}: counts or words ({} and {} records)",
                                a.1,
                                b.1
                            );
                            // The records whose word is slow (the others are not written).
                            for ((x, y), w) in rg.iter().zip(&rw).zip(&wg) {
                                assert!(*w != SLOW_WORD || x == y, "{which}: a slow record");
                            }
                        }
                        (Err(e), Err(f)) => assert_eq!(e, f, "{which}"),
                        (g, w) => panic!("{which}: {:?} against {:?}", g.map(|x| x.2), w.map(|x| x.2)),
                    }
                }
            }
        }
    }

    /// A raw stream of `body` after a header, ended by an end record counting `count`.
    fn stream(body: &[u8], count: u64) -> Vec<u8> {
        let mut raw = encode_to_vec(&[], Compression::None).unwrap();
        raw.truncate(raw.len() - 2);
        raw.extend_from_slice(body);
        raw.extend_from_slice(&[tag::END, count as u8]);
        raw
    }

    #[test]
    fn malformed_blocks_are_errors_at_their_offset_whoever_decodes_them() {
        let good = [0x49, 0x00, 0x10, 0x04, 0x25, 0x08]; // two loads, 6 bytes
        let block = |records: u8, bytes: u8, body: &[u8]| [&[tag::BLOCK, records, bytes][..], body].concat();
        let header = stream(&[], 0).len() - 2;
        let cases: Vec<(Vec<u8>, u64, &str, usize)> = vec![
            // One record more than the block holds.
            (block(3, 6, &good), 2, "records and its length disagree", 0),
            // One byte more than its records.
            (block(2, 7, &[&good[..], &[0x04]].concat()), 2, "records and its length disagree", 0),
            // An extension record inside.
            (block(3, 9, &[&good[..], &[tag::EXTENSION, 9, 0]].concat()), 3, "other than an access or an event", 6),
            // Nothing in it, or more than it may hold.
            (block(0, 0, &[]), 0, "corrupt block: 0 records", usize::MAX),
            ([&[tag::BLOCK, 1, 0x81, 0x80, 0x10][..], &[0; 8]].concat(), 1, "at most 131072 bytes", usize::MAX),
            // Cut short.
            (block(2, 9, &good), 2, "truncated", usize::MAX),
        ];
        for (body, count, want, at) in cases {
            let raw = stream(&body, count);
            let check = |e: TraceError| {
                let m = e.to_string();
                assert!(m.contains(want), "{m}");
                if at != usize::MAX {
                    // The offset of the record at fault: the block's records start after its
                    // 3-byte header.
                    assert!(m.contains(&format!("offset {}", header + 3 + at)), "{m}");
                }
            };
            check(decode(&raw).unwrap_err());
            for (helpers, other) in [(0, false), (0, true), (2, true)] {
                let params = Params { shift: 12, all_records: false };
                check(with_helpers(&raw, helpers, |r| batches(r, BATCH, params, other)).unwrap_err());
            }
        }
        // The same block, well formed, reads.
        assert_eq!(decode(&stream(&block(2, 6, &good), 2)).unwrap().len(), 2);
    }

    /// The worked example of docs/trace-format.md.
    #[test]
    fn documented_example() {
        let recs = [
            Record::Access { kind: Kind::Load, size: 4, addr: 0x1000 },
            Record::Access { kind: Kind::Load, size: 4, addr: 0x0ff8 },
        ];
        let raw = encode_to_vec(&recs, Compression::None).unwrap();
        let header = 12 + u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
        // In a block of 2 records and 6 bytes.
        assert_eq!(&raw[header..], &[tag::BLOCK, 2, 6, 0x49, 0x00, 0x10, 0x04, 0x25, 0x08, tag::END, 2]);
    }

    /// System call records keep their buffer and length: a descriptor call's, and a
    /// `madvise(MADV_HUGEPAGE)`'s region (64-bit addresses and lengths).
    #[test]
    fn syscall_records_round_trip_with_their_regions() {
        use super::super::{fd_kind, sysno};
        let a = Record::Access { kind: Kind::Load, size: 8, addr: 0x7f12_3456_7000 };
        let recs = vec![
            a,
            Record::Syscall { nr: sysno::MADVISE, fd: 0, object: 0, buf: 0x7f12_3400_0000, len: 8 << 20 },
            Record::Syscall { nr: sysno::MADVISE, fd: 0, object: 0, buf: 0, len: 0 },
            Record::Syscall { nr: 1, fd: fd_kind::PIPE | fd_kind::FROM_BUF, object: 3, buf: u64::MAX, len: u64::MAX },
            a,
        ];
        for c in [Compression::None, Compression::Zstd] {
            assert_eq!(decode(&encode_to_vec(&recs, c).unwrap()).unwrap(), recs);
        }
    }

    #[test]
    fn extension_records_are_skipped() {
        let mut w = XtrWriter::with_options(
            Vec::new(),
            "t",
            XtrOptions { compression: Compression::None, ..XtrOptions::default() },
        )
        .unwrap();
        let a = Record::Access { kind: Kind::Load, size: 8, addr: 42 };
        w.write(&[a]).unwrap();
        w.write_extension(7, &vec![0xab; 300_000]).unwrap();
        w.write(&[a]).unwrap();
        let bytes = w.finish_into_inner().unwrap();
        assert_eq!(decode(&bytes).unwrap(), vec![a, a]);
    }
}
