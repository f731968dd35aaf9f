//! The format's tests: records written and read back, blocks decoded by one thread, by helpers
//! and two at a time, and malformed input.

use std::sync::atomic::{AtomicBool, Ordering};

use super::decode::{decode_block, decode_blocks, decode_pair, BlockIn, BlockState, Params, Words};
use super::*;
use crate::trace::compress::{decompress, Compression};
use crate::trace::{
    BatchWords, Kind, Record, Tally, TraceCounts, TraceError, TraceReader, TraceWriter, BATCH, SLOW_WORD,
};

fn decode(bytes: &[u8]) -> Result<Vec<Record>, TraceError> {
    let (s, _) = decompress(bytes).unwrap();
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
) -> Result<(Vec<Record>, Vec<u64>, TraceCounts), TraceError> {
    let (mut recs, mut words, mut counts) = (Vec::new(), Vec::new(), TraceCounts::default());
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
    let (s, _) = decompress(raw).unwrap();
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
            let mut counts = TraceCounts::default();
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
            let (mut out, mut w, mut counts) = (Vec::new(), Vec::new(), TraceCounts::default());
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
                            let mut c = TraceCounts::default();
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
    use crate::trace::{fd_kind, sysno};
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
