//! The record decoder: the tables an access tag is decoded with, the loop that decodes a run
//! of records (writing the records, page words and counts a sink asks for), and blocks decoded
//! from a stream's initial state, alone or two together.

use super::{get_u32, get_varint, tag, MARGIN, SIZE_FLAG, VERSION};
use crate::trace::{Kind, Record, Tally, SLOW_WORD};

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
pub(super) struct TagInfo {
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

const _: () = assert!(MARGIN >= 16, "decode_run reads 16-byte windows");

pub(super) enum Stop {
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
            tag::THREAD => Record::Thread { tid: get_u32(w, &mut p)? },
            tag::PROTECT => Record::Protect {
                start: get_varint(w, &mut p)?,
                len: get_varint(w, &mut p)?,
                flags: get_u32(w, &mut p)?,
            },
            _ => Record::Discard {
                start: get_varint(w, &mut p)?,
                len: get_varint(w, &mut p)?,
                lazy: match get_varint(w, &mut p)? {
                    0 => false,
                    1 => true,
                    _ => return Err("discard's lazy flag is neither 0 nor 1"),
                },
            },
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
pub(super) fn decode_run<S: Sink>(
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
                if t <= tag::THREAD || (tag::PROTECT..=tag::LAST_RECORD).contains(&t) {
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

pub(super) use with_words_sink;

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

/// How a block is to be decoded: at pages of `2^shift` bytes, every record or not
/// ([`BatchWords`](crate::trace::BatchWords)).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct Params {
    pub(super) shift: u32,
    pub(super) all_records: bool,
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
pub(super) struct BlockState {
    pub(super) la: [u64; 4],
    pub(super) ls: [u32; 4],
    pub(super) n: usize,
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
pub(super) fn decode_pair<S: Sink>(
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
pub(super) fn not_in_block(t: u8) -> String {
    if matches!(t, tag::EXTENSION | tag::END | tag::BLOCK) {
        format!("corrupt block: it holds a record other than an access or an event (tag {t:#04x})")
    } else {
        format!("unknown record tag {t:#04x} (xtr version {VERSION} defines 0x00-0x8b, 0xfe, 0xff)")
    }
}

/// What the decoder does with each record it decodes for `out[i]`, besides writing it. Passed
/// by value ([`decode_run`]), so a sink is a few plain values.
pub(super) trait Sink: Copy {
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
pub(super) struct Words<'a, const ALL: bool, const SHIFT: u32, const NT: bool> {
    /// The words of `out[i]` go to `words[i]`: a slice at least as long as `out` (checked where
    /// the sink is made), held as a pointer so that the sink is `Copy`.
    words: *mut u64,
    pub(super) tally: Tally,
    shift: u32,
    _words: std::marker::PhantomData<&'a mut [u64]>,
}

impl<'a, const ALL: bool, const SHIFT: u32, const NT: bool> Words<'a, ALL, SHIFT, NT> {
    /// A sink for decoding into `out` of at most `words.len()` records.
    pub(super) fn new(words: &'a mut [u64], shift: u32) -> Words<'a, ALL, SHIFT, NT> {
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
