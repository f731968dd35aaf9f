//! The xtr format: round trips, events, truncation, corruption, versions.

use proptest::prelude::*;
use xlat::trace::open::{decompress, Compression};
use xlat::trace::xtr::{encode_to_vec, tag, XtrOptions, XtrReader, XtrWriter};
use xlat::trace::{map_flags, BatchWords, Kind, Record, TraceCounts, TraceError, TraceReader, TraceWriter, SLOW_WORD};

fn read_all(bytes: &[u8], batch: usize) -> Result<Vec<Record>, TraceError> {
    let (s, _) = decompress(bytes).map_err(|e| TraceError::at_offset("t.xtr", 0, e))?;
    let mut r = XtrReader::new(s, "t.xtr")?;
    let mut all = Vec::new();
    let mut b = Vec::new();
    while r.read_batch(&mut b, batch)? > 0 {
        assert!(b.len() <= batch.max(1));
        all.extend_from_slice(&b);
    }
    assert_eq!(r.stats().records, all.len() as u64);
    // Reading after the end keeps returning 0.
    assert_eq!(r.read_batch(&mut b, batch)?, 0);
    Ok(all)
}

fn acc(kind: Kind, size: u32, addr: u64) -> Record {
    Record::Access { kind, size, addr }
}

fn all_events() -> Vec<Record> {
    vec![
        Record::Process { asid: 0 },
        Record::Process { asid: u32::MAX },
        Record::ContextSwitch { asid: 7 },
        Record::Map {
            start: 0x7f00_0000_0000,
            len: 1 << 21,
            flags: map_flags::READ | map_flags::WRITE | map_flags::SHARED,
        },
        Record::Map { start: u64::MAX, len: u64::MAX, flags: u32::MAX },
        Record::Unmap { start: 0x7f00_0000_0000, len: 4096 },
        Record::Fork { child: 8 },
        Record::Exit { asid: 8 },
        Record::Ipc { to: 3 },
        Record::Marker { id: 0 },
        Record::Marker { id: u64::MAX },
        Record::Protect { start: 0x7f00_0000_0000, len: 8192, flags: map_flags::READ },
        Record::Protect { start: u64::MAX, len: u64::MAX, flags: u32::MAX },
        Record::Discard { start: 0x7f00_0000_1000, len: 4096, lazy: false },
        Record::Discard { start: u64::MAX, len: u64::MAX, lazy: true },
    ]
}

fn mixed_trace() -> Vec<Record> {
    let mut v = Vec::new();
    let mut x = 0x1234_5678u64;
    for i in 0..5000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.push(acc(Kind::Ifetch, (x % 15 + 1) as u32, 0x400000 + 3 * i));
        if i % 3 == 0 {
            v.push(acc(Kind::Load, 8, 0x7ffd_0000_0000 - (x & 0xfff8)));
        }
        if i % 7 == 0 {
            v.push(acc(Kind::Store, 4, x));
        }
        if i % 500 == 0 {
            v.extend(all_events());
        }
    }
    v
}

#[test]
fn events_round_trip() {
    let mut recs = all_events();
    recs.insert(3, acc(Kind::Modify, 300, 0xabc));
    for c in [Compression::None, Compression::Zstd] {
        let bytes = encode_to_vec(&recs, c).unwrap();
        for batch in [1, 3, 4096] {
            assert_eq!(read_all(&bytes, batch).unwrap(), recs);
        }
    }
}

#[test]
fn empty_trace_round_trips() {
    for c in [Compression::None, Compression::Zstd] {
        assert!(read_all(&encode_to_vec(&[], c).unwrap(), 10).unwrap().is_empty());
    }
}

#[test]
fn large_mixed_trace_round_trips_and_is_compact() {
    let recs = mixed_trace();
    let raw = encode_to_vec(&recs, Compression::None).unwrap();
    let zst = encode_to_vec(&recs, Compression::Zstd).unwrap();
    assert_eq!(&zst[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    assert!(zst.len() < raw.len());
    assert_eq!(read_all(&raw, 4096).unwrap(), recs);
    assert_eq!(read_all(&zst, 777).unwrap(), recs);
}

#[test]
fn header_fields() {
    let opts = XtrOptions {
        compression: Compression::None,
        producer: "unit test".into(),
        page_size: Some(16384),
        metadata: vec![("workload".into(), "gups".into()), ("cmd".into(), "a=b c".into())],
    };
    let mut w = XtrWriter::with_options(Vec::new(), "t", opts).unwrap();
    w.write(&[acc(Kind::Load, 8, 1)]).unwrap();
    let bytes = w.finish_into_inner().unwrap();
    assert_eq!(&bytes[..4], b"XTR\0");
    assert_eq!(&bytes[4..8], &[1, 0, 0, 0]);
    let r = XtrReader::new(&bytes[..], "t").unwrap();
    let h = r.header();
    assert_eq!(h.version, 1);
    assert_eq!(h.encoding, "delta1");
    assert_eq!(h.producer, "unit test");
    assert_eq!(h.page_size, Some(16384));
    assert_eq!(h.metadata[0], ("workload".to_string(), "gups".to_string()));
    assert_eq!(h.metadata.len(), 2);

    let bad = XtrOptions { metadata: vec![("producer".into(), "x".into())], ..XtrOptions::default() };
    assert!(XtrWriter::with_options(Vec::new(), "t", bad).is_err());
}

#[test]
fn truncation_at_every_cut_point_is_an_error() {
    let mut recs = mixed_trace();
    recs.truncate(400);
    recs.extend(all_events());
    let raw = encode_to_vec(&recs, Compression::None).unwrap();
    for cut in 0..raw.len() {
        match read_all(&raw[..cut], 64) {
            Ok(v) => panic!("cut at {cut} of {} read Ok with {} records", raw.len(), v.len()),
            Err(e) => {
                let e = e.to_string();
                assert!(e.starts_with("t.xtr: offset "), "{e}");
                assert!(!e.contains('\n'));
            }
        }
    }
    // The last record before the trailer cut in half names its offset.
    let e = read_all(&raw[..raw.len() - 3], 64).unwrap_err().to_string();
    assert!(e.contains("truncated"), "{e}");
}

#[test]
fn truncated_compressed_files_are_errors() {
    let recs = mixed_trace();
    let zst = encode_to_vec(&recs, Compression::Zstd).unwrap();
    let step = (zst.len() / 300).max(1);
    for cut in (0..zst.len()).step_by(step).chain(zst.len() - 20..zst.len()) {
        if let Ok(v) = read_all(&zst[..cut], 4096) {
            panic!("cut at {cut} of {} read Ok with {} records", zst.len(), v.len());
        }
    }
}

#[test]
fn trailing_garbage_and_wrong_count() {
    let recs = vec![acc(Kind::Load, 8, 1), acc(Kind::Load, 8, 2)];
    let mut raw = encode_to_vec(&recs, Compression::None).unwrap();
    raw.push(0);
    let e = read_all(&raw, 10).unwrap_err().to_string();
    assert!(e.contains("after the end-of-trace"), "{e}");
    raw.pop();
    // The trailer is [0xff, 2]: claim 3 records.
    let n = raw.len();
    assert_eq!(&raw[n - 2..], &[tag::END, 2]);
    raw[n - 1] = 3;
    let e = read_all(&raw, 10).unwrap_err().to_string();
    assert!(e.contains("counts 3 records but 2"), "{e}");
}

#[test]
fn unknown_tag_names_its_offset() {
    let recs = vec![acc(Kind::Load, 8, 1), acc(Kind::Load, 8, 2), acc(Kind::Load, 8, 3)];
    let mut raw = encode_to_vec(&recs, Compression::None).unwrap();
    let header = 12 + u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
    // A block's header (tag, 3 records, 7 bytes), then the records: [tag, delta, size] then
    // [tag, delta] x2. Corrupt the second tag.
    assert_eq!(raw[header..header + 3], [tag::BLOCK, 3, 7]);
    let at = header + 3 + 3;
    raw[at] = 0x9a;
    let e = read_all(&raw, 10).unwrap_err().to_string();
    assert!(e.contains(&format!("offset {at}")), "{e}");
    assert!(e.contains("unknown record tag 0x9a"), "{e}");
}

#[test]
fn wrong_version_magic_and_flags() {
    let raw = encode_to_vec(&[acc(Kind::Load, 8, 1)], Compression::None).unwrap();
    let mut v = raw.clone();
    v[4] = 9;
    let e = read_all(&v, 10).unwrap_err().to_string();
    assert!(e.contains("unsupported xtr version 9") && e.contains("supports version 1"), "{e}");
    let mut v = raw.clone();
    v[0] = b'Y';
    let e = read_all(&v, 10).unwrap_err().to_string();
    assert!(e.contains("not an xtr trace"), "{e}");
    let mut v = raw.clone();
    v[6] = 1;
    assert!(read_all(&v, 10).unwrap_err().to_string().contains("flags"));
    let e = read_all(&[], 10).unwrap_err().to_string();
    assert!(e.contains("offset 0"), "{e}");
}

#[test]
fn corrupt_varint_and_u32_range() {
    let raw = encode_to_vec(&[Record::Fork { child: 1 }], Compression::None).unwrap();
    let header = 12 + u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
    // Replace the Fork's varint with a value above u32::MAX, then the trailer.
    let mut v = raw[..header].to_vec();
    v.extend_from_slice(&[tag::FORK, 0xff, 0xff, 0xff, 0xff, 0x7f, tag::END, 1]);
    let e = read_all(&v, 10).unwrap_err().to_string();
    assert!(e.contains(&format!("offset {header}")) && e.contains("32 bits"), "{e}");
    let mut v = raw[..header].to_vec();
    v.extend_from_slice(&[tag::MARKER]);
    v.extend_from_slice(&[0xff; 11]);
    v.extend_from_slice(&[0; 40]);
    let e = read_all(&v, 10).unwrap_err().to_string();
    assert!(e.contains("varint"), "{e}");
}

/// The protect and discard records (tags 0x8a, 0x8b): cut short, or with a lazy flag other
/// than 0 or 1, or rights beyond 32 bits, each is a one-line error naming the record's offset.
#[test]
fn protect_and_discard_records_cut_or_corrupt_name_their_offset() {
    let raw = encode_to_vec(&[Record::Fork { child: 1 }], Compression::None).unwrap();
    let header = 12 + u32::from_le_bytes(raw[8..12].try_into().unwrap()) as usize;
    let stream = |body: &[u8]| [&raw[..header], body].concat();
    // Whole records read back (outside a block too).
    let ok = stream(&[tag::PROTECT, 0x80, 0x20, 0x80, 0x40, 1, tag::DISCARD, 0x80, 0x20, 0x80, 0x20, 1, tag::END, 2]);
    assert_eq!(
        read_all(&ok, 10).unwrap(),
        vec![
            Record::Protect { start: 0x1000, len: 0x2000, flags: map_flags::READ },
            Record::Discard { start: 0x1000, len: 0x1000, lazy: true },
        ]
    );
    // Cut inside either record: an error at the record's offset.
    for body in [&[tag::PROTECT, 0x80, 0x20, 0x80][..], &[tag::DISCARD, 0x80, 0x20, 0x80, 0x20][..]] {
        let e = read_all(&stream(body), 10).unwrap_err().to_string();
        assert!(e.starts_with(&format!("t.xtr: offset {header}: ")) && !e.contains('\n'), "{e}");
        assert!(e.contains("truncated"), "{e}");
    }
    let e = read_all(&stream(&[tag::DISCARD, 1, 1, 2, tag::END, 1]), 10).unwrap_err().to_string();
    assert!(e.starts_with(&format!("t.xtr: offset {header}: ")) && e.contains("lazy flag"), "{e}");
    let e = read_all(&stream(&[tag::PROTECT, 1, 1, 0xff, 0xff, 0xff, 0xff, 0x7f, tag::END, 1]), 10)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with(&format!("t.xtr: offset {header}: ")) && e.contains("32 bits"), "{e}");
    // The next tag after them is still unknown.
    let e = read_all(&stream(&[0x8c, tag::END, 0]), 10).unwrap_err().to_string();
    assert!(e.contains(&format!("offset {header}")) && e.contains("unknown record tag 0x8c"), "{e}");
}

#[test]
fn dropped_writer_leaves_a_truncated_file() {
    let mut buf = Vec::new();
    {
        let opts = XtrOptions { compression: Compression::None, ..XtrOptions::default() };
        let mut w = XtrWriter::with_options(&mut buf, "t", opts).unwrap();
        w.write(&vec![acc(Kind::Load, 8, 1); 100_000]).unwrap();
        // Dropped without finish: whatever was flushed has no trailer.
    }
    assert!(!buf.is_empty());
    assert!(read_all(&buf, 4096).is_err());
}

fn record_strategy() -> impl Strategy<Value = Record> {
    let kind = (0u8..4).prop_map(|k| Kind::from_code(k).unwrap());
    // Repeated sizes (no size byte) and addresses near each other (one-byte deltas either way):
    // the shapes the decoder takes by branches.
    let size = prop_oneof![1u32..=16, Just(4u32), Just(4096u32), 1u32..=u32::MAX];
    let addr = prop_oneof![0u64..0x200, 0u64..0x10000, any::<u64>()];
    prop_oneof![
        8 => (kind, size, addr).prop_map(|(kind, size, addr)| Record::Access { kind, size, addr }),
        1 => any::<u32>().prop_map(|asid| Record::Process { asid }),
        1 => any::<u32>().prop_map(|asid| Record::ContextSwitch { asid }),
        1 => (any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(start, len, flags)| Record::Map { start, len, flags }),
        1 => (any::<u64>(), any::<u64>()).prop_map(|(start, len)| Record::Unmap { start, len }),
        1 => any::<u32>().prop_map(|child| Record::Fork { child }),
        1 => any::<u32>().prop_map(|asid| Record::Exit { asid }),
        1 => any::<u32>().prop_map(|to| Record::Ipc { to }),
        1 => any::<u64>().prop_map(|id| Record::Marker { id }),
        1 => (any::<u64>(), any::<u64>(), any::<u32>())
            .prop_map(|(start, len, flags)| Record::Protect { start, len, flags }),
        1 => (any::<u64>(), any::<u64>(), any::<bool>()).prop_map(|(start, len, lazy)| Record::Discard { start, len, lazy }),
    ]
}

/// The counts of `records` as the engine defines them, worked out here with 128-bit
/// arithmetic: one reference per access, one lookup per page of `2^shift` bytes it touches up
/// to the top of the address space (accesses running past it are counted as clipped), one
/// event per other record.
fn expected_counts(records: &[Record], shift: u32) -> TraceCounts {
    let mut c = TraceCounts::default();
    for r in records {
        match *r {
            Record::Access { kind, size, addr } => {
                c.references += 1;
                c.by_kind[kind as usize] += 1;
                let end = addr as u128 + size.max(1) as u128 - 1;
                let top = u64::MAX as u128;
                c.clipped_accesses += (end > top) as u64;
                c.lookups += ((end.min(top) >> shift) - ((addr as u128) >> shift) + 1) as u64;
            }
            _ => c.events += 1,
        }
    }
    c
}

/// The page word of `r` by its definition (see `xlat::trace::page_word`), in 128-bit
/// arithmetic: an access within one page of `2^shift` bytes (clipped at the top of the
/// address space) is its page number times two, plus one for data; anything else is all ones.
fn expected_word(r: &Record, shift: u32) -> u64 {
    match *r {
        Record::Access { kind, size, addr } => {
            let end = (addr as u128 + size.max(1) as u128 - 1).min(u64::MAX as u128);
            let page = (addr as u128) >> shift;
            if end >> shift == page {
                (page * 2 + (kind != Kind::Ifetch) as u128) as u64
            } else {
                u64::MAX
            }
        }
        _ => u64::MAX,
    }
}

/// The counts keep their kinds apart however long the slice counted at once.
#[test]
fn long_batches_count_exactly() {
    let mut recs = vec![Record::Access { kind: Kind::Ifetch, size: 4, addr: 0x1000 }; 70_000];
    recs.extend(vec![Record::Access { kind: Kind::Store, size: 8, addr: 0x2000 }; 66_000]);
    let mut a = TraceCounts::default();
    a.add(&recs, 12);
    let mut b = TraceCounts::default();
    let mut words = Vec::new();
    b.add_words(&recs, 12, &mut words);
    for c in [a, b] {
        assert_eq!(c.by_kind, [70_000, 0, 66_000, 0]);
        assert_eq!(c, expected_counts(&recs, 12));
    }
    assert_eq!(words.len(), recs.len());
    assert_eq!((words[0], words[70_000]), (2, 5));
    // The xtr reader's own counting, asked for more records than one call may count.
    let bytes = encode_to_vec(&recs, Compression::None).unwrap();
    let mut r = XtrReader::new(&bytes[..], "t.xtr").unwrap();
    let (mut c, mut out, mut w) = (TraceCounts::default(), Vec::new(), Vec::new());
    while r
        .read_batch_words(
            &mut out,
            1 << 20,
            BatchWords { words: &mut w, shift: 12, counts: &mut c, all_records: true, for_other_core: false },
        )
        .unwrap()
        > 0
    {
        assert_eq!(w.len(), out.len());
    }
    assert_eq!(c, expected_counts(&recs, 12));
}

proptest! {
    #![proptest_config(crate::proptest_cases(ProptestConfig::default().cases))]

    /// The counts the engine's reader threads keep ([`TraceCounts::add`] over each batch read,
    /// or the xtr reader's own as it decodes) and the page words are those of the definition,
    /// whatever the batch size, over records read back from xtr.
    #[test]
    fn batch_counts_follow_the_definition(
        mut recs in prop::collection::vec(record_strategy(), 0..400),
        near_top in prop::collection::vec((0usize..400, 1u32..=8192, 0u64..8192), 0..4),
        objects in prop::collection::vec((0usize..400, any::<u32>(), any::<u64>()), 0..4),
        batch in 1usize..50,
        shift in prop::sample::select(vec![12u32, 21, 30]),
        zstd in any::<bool>(),
        mode in 0u8..4,
    ) {
        for (at, size, below) in near_top {
            recs.insert(at.min(recs.len()), Record::Access { kind: Kind::Load, size, addr: u64::MAX - below });
        }
        for (at, id, offset) in objects {
            recs.insert(at.min(recs.len()), Record::Object { id, offset });
        }
        let c = if zstd { Compression::Zstd } else { Compression::None };
        let bytes = encode_to_vec(&recs, c).unwrap();
        let (s, _) = decompress(&bytes[..]).unwrap();
        let mut r = XtrReader::new(s, "t.xtr").unwrap();
        let (mut all, mut b) = (Vec::new(), Vec::new());
        let mut counts = TraceCounts::default();
        let mut words = vec![7; 3];
        // Mode 3 asks for the records whose word is SLOW_WORD alone; the others are left as
        // they were, and this marker shows it.
        let stale = Record::Marker { id: u64::MAX };
        loop {
            // Modes 2 and 3: the reader counts and writes the page words as it decodes.
            let n = if mode >= 2 {
                b.clear();
                b.resize(batch, stale);
                let all_records = mode == 2;
                r.read_batch_words(&mut b, batch, BatchWords { words: &mut words, shift, counts: &mut counts, all_records, for_other_core: false }).unwrap()
            } else {
                r.read_batch(&mut b, batch).unwrap()
            };
            prop_assert_eq!(n, b.len());
            if n == 0 {
                break;
            }
            match mode {
                0 => counts.add(&b, shift),
                1 => counts.add_words(&b, shift, &mut words),
                _ => {}
            }
            let at = all.len();
            let expected: Vec<Record> = recs[at..at + n].to_vec();
            if mode > 0 {
                let expected_words: Vec<u64> = expected.iter().map(|r| expected_word(r, shift)).collect();
                prop_assert_eq!(&words, &expected_words);
            }
            if mode == 3 {
                for (j, (got, want)) in b.iter().zip(&expected).enumerate() {
                    if words[j] == SLOW_WORD {
                        prop_assert_eq!(got, want);
                    } else {
                        prop_assert_eq!(got, &stale, "record {} written though its word is not SLOW_WORD", at + j);
                    }
                }
                all.extend_from_slice(&expected);
            } else {
                all.extend_from_slice(&b);
            }
        }
        prop_assert_eq!(&all, &recs);
        prop_assert_eq!(counts, expected_counts(&recs, shift));
    }
}

proptest! {
    #![proptest_config(crate::proptest_cases(ProptestConfig::default().cases))]

    #[test]
    fn arbitrary_records_round_trip(
        recs in prop::collection::vec(record_strategy(), 0..400),
        batch in 1usize..50,
        zstd in any::<bool>(),
    ) {
        let c = if zstd { Compression::Zstd } else { Compression::None };
        let bytes = encode_to_vec(&recs, c).unwrap();
        prop_assert_eq!(read_all(&bytes, batch).unwrap(), recs);
    }

    #[test]
    fn arbitrary_cuts_never_read_ok(
        recs in prop::collection::vec(record_strategy(), 1..100),
        frac in 0.0f64..1.0,
    ) {
        let bytes = encode_to_vec(&recs, Compression::None).unwrap();
        let cut = (bytes.len() as f64 * frac) as usize;
        prop_assert!(read_all(&bytes[..cut], 7).is_err());
    }

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let mut v = encode_to_vec(&[], Compression::None).unwrap();
        v.pop();
        v.pop();
        v.extend_from_slice(&bytes);
        let _ = read_all(&v, 13);
    }
}

/// Thread records round-trip, and an untraced-exec extension record reaches the reader's notes
/// without being a record.
#[test]
fn thread_records_and_untraced_exec_notes_round_trip() {
    use xlat::trace::xtr::extension;
    let recs = vec![
        Record::Process { asid: 0 },
        Record::Thread { tid: 4242 },
        Record::Access { kind: Kind::Load, size: 8, addr: 0x1000 },
        Record::Thread { tid: u32::MAX },
        Record::Access { kind: Kind::Store, size: 4, addr: 0x2000 },
    ];
    let mut w = XtrWriter::new(Vec::new(), "t").unwrap();
    w.write(&recs).unwrap();
    w.write_extension(extension::UNTRACED_EXEC, b"4243 /usr/bin/python3.11").unwrap();
    w.write_extension(99, b"unknown to this reader").unwrap();
    let bytes = w.finish_into_inner().unwrap();
    let (stream, _) = decompress(std::io::Cursor::new(bytes)).unwrap();
    let mut r = XtrReader::new(stream, "t").unwrap();
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while r.read_batch(&mut buf, 2).unwrap() > 0 {
        all.extend_from_slice(&buf);
    }
    assert_eq!(all, recs);
    assert_eq!(r.notes().untraced_execs, vec!["4243 /usr/bin/python3.11".to_string()]);
    assert_eq!(r.stats().skipped, 1, "the unknown extension is skipped");
}

/// `Record::Object` travels as an extension record (readers that do not know it skip it, and the
/// end record does not count it); the object table is an extension of its own.
#[test]
fn object_records_round_trip_as_extensions_that_older_readers_skip() {
    use xlat::trace::xtr::extension;
    let records = vec![
        Record::Process { asid: 0 },
        Record::Object { id: 1, offset: 0 },
        Record::Map { start: 0x7f00_0000_0000, len: 8192, flags: map_flags::READ | map_flags::FILE },
        acc(Kind::Load, 8, 0x7f00_0000_0010),
        Record::Object { id: u32::MAX, offset: u64::MAX },
        Record::Map { start: 0x7f10_0000_0000, len: 4096, flags: map_flags::READ | map_flags::SHARED },
    ];
    let mut w = XtrWriter::with_options(Vec::new(), "t", XtrOptions::default()).unwrap();
    w.write(&records).unwrap();
    let mut info = Vec::new();
    for v in [1u64, 2049, 77] {
        xlat::trace::xtr::put_varint_pub(&mut info, v);
    }
    info.extend_from_slice(b"/lib/x.so");
    w.write_extension(extension::OBJECT_INFO, &info).unwrap();
    let bytes = w.finish_into_inner().unwrap();
    let (s, _) = decompress(&bytes[..]).unwrap();
    let mut r = XtrReader::new(s, "t.xtr").unwrap();
    let (mut all, mut b) = (Vec::new(), Vec::new());
    while r.read_batch(&mut b, 2).unwrap() > 0 {
        all.extend_from_slice(&b);
    }
    assert_eq!(all, records);
    assert_eq!(r.stats().records, 4, "objects are not counted");
    let notes = r.notes();
    assert_eq!(notes.objects.len(), 1);
    assert_eq!((notes.objects[0].id, notes.objects[0].dev, notes.objects[0].ino), (1, 2049, 77));
    assert_eq!(notes.objects[0].path, "/lib/x.so");
    // A cut object payload is an error naming the offset, not a panic or a clean end.
    let mut w = XtrWriter::with_options(Vec::new(), "t", XtrOptions::default()).unwrap();
    w.write_extension(extension::OBJECT, &[0x80]).unwrap();
    let bytes = w.finish_into_inner().unwrap();
    let e = read_all(&bytes, 4).unwrap_err().to_string();
    assert!(e.contains("offset"), "{e}");
}
