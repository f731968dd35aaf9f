//! lackey text: parsing, skipped lines, errors with line numbers, writing.

use xlat::trace::lackey::{LackeyReader, LackeyWriter};
use xlat::trace::open::Compression;
use xlat::trace::{Kind, Record, TraceError, TraceReader, TraceWriter};

fn read_all(text: &[u8], batch: usize) -> Result<(Vec<Record>, xlat::trace::ReaderStats), TraceError> {
    let mut r = LackeyReader::new(text, "t.lackey");
    let mut all = Vec::new();
    let mut b = Vec::new();
    while r.read_batch(&mut b, batch)? > 0 {
        assert!(b.len() <= batch.max(1));
        all.extend_from_slice(&b);
    }
    Ok((all, r.stats()))
}

fn err(text: &str) -> String {
    read_all(text.as_bytes(), 4096).unwrap_err().to_string()
}

fn acc(kind: Kind, size: u32, addr: u64) -> Record {
    Record::Access { kind, size, addr }
}

const VALGRIND: &str = "\
==28507== Lackey, an example Valgrind tool
==28507== Copyright (C) 2002-2017, and GNU GPL'd, by Nicholas Nethercote.
==28507== Using Valgrind-3.13.0 and LibVEX; rerun with -h for copyright info
==28507== Command: ./a.out
==28507==
I  04000bd0,3
I  04000bd3,5
 S 1ffefffd78,8
I  04000ea0,4
 L 04225e70,8
 M 04226c48,4
hello from the program

==28507==
==28507== Counted 1 call to main()
";

#[test]
fn valgrind_output_with_banners() {
    let (recs, st) = read_all(VALGRIND.as_bytes(), 4096).unwrap();
    assert_eq!(
        recs,
        vec![
            acc(Kind::Ifetch, 3, 0x04000bd0),
            acc(Kind::Ifetch, 5, 0x04000bd3),
            acc(Kind::Store, 8, 0x1ffefffd78),
            acc(Kind::Ifetch, 4, 0x04000ea0),
            acc(Kind::Load, 8, 0x04225e70),
            acc(Kind::Modify, 4, 0x04226c48),
        ]
    );
    // 5 banner lines, program output, blank line, 2 trailing banners.
    assert_eq!(st.skipped, 9);
    assert_eq!(st.records, 6);
    assert_eq!(st.bytes, VALGRIND.len() as u64);
}

#[test]
fn batch_sizes_do_not_matter() {
    let (all, _) = read_all(VALGRIND.as_bytes(), 4096).unwrap();
    for b in [0, 1, 2, 5] {
        assert_eq!(read_all(VALGRIND.as_bytes(), b).unwrap().0, all);
    }
}

#[test]
fn hex_prefixes_crlf_tabs_and_unterminated_last_line() {
    let text = b"I  0x400,2\r\n L\t0X1F,8  \n S 00000000deadbeef,4294967295";
    let (recs, st) = read_all(text, 10).unwrap();
    assert_eq!(
        recs,
        vec![acc(Kind::Ifetch, 2, 0x400), acc(Kind::Load, 8, 0x1f), acc(Kind::Store, u32::MAX, 0xdeadbeef),]
    );
    assert_eq!(st.skipped, 0);
    assert_eq!(st.bytes, text.len() as u64);
}

#[test]
fn malformed_lines_name_their_line() {
    let cases = [
        ("==1==\nI  0400d7d4,8\n L 0422zz,8\n", "line 3", "hexadecimal"),
        ("I  0400d7d4\n", "line 1", "size"),
        ("I  0400d7d4,\n", "line 1", "size"),
        ("I  0400d7d4,0\n", "line 1", "size 0"),
        ("\n\nI  ,8\n", "line 3", "address"),
        (" L 10,8\n S 10,8 x\n", "line 2", "after the size"),
        (" M 11112222333344445,8\n", "line 1", "64 bits"),
        ("I  10,99999999999\n", "line 1", "size"),
        ("I0400,8\n", "line 1", "blank"),
        (" L\n", "line 1", "blank"),
    ];
    for (text, line, what) in cases {
        let e = err(text);
        assert!(e.starts_with("t.lackey: "), "{e}");
        assert!(e.contains(line) && e.contains(what), "{text:?}: {e}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn cut_off_last_line() {
    // Cut in the middle of the size: still a valid reference.
    let (recs, _) = read_all(b"I  0400d7d4,8\n L 04222cac,1", 10).unwrap();
    assert_eq!(recs[1], acc(Kind::Load, 1, 0x04222cac));
    // Cut before the size: error at line 2.
    for cut in [" L 04222cac,", " L 04222cac", " L 0", " L ", " L"] {
        let text = format!("I  0400d7d4,8\n{cut}");
        let e = err(&text);
        assert!(e.contains("line 2"), "{cut:?}: {e}");
    }
}

#[test]
fn lines_that_are_not_references_are_skipped() {
    let (recs, st) =
        read_all(b"==1== x\nInstrumenting\n Load average\nI  0400d7d4,8\nSummary: 3\n--1-- y\n\n\t\n", 10).unwrap();
    assert_eq!(recs, vec![acc(Kind::Ifetch, 8, 0x0400d7d4)]);
    assert_eq!(st.skipped, 7);
    // Only such lines, and not one reference: not a lackey trace, not an empty one.
    let e = err("Instrumenting\n Load average\nSummary: 3\n==1== x\n--1-- y\n\n\t\n");
    assert!(e.contains("line 7") && e.contains("not a lackey trace"), "{e}");
}

#[test]
fn writer_round_trips_and_drops_events() {
    let recs = vec![
        acc(Kind::Ifetch, 15, 0x400000),
        Record::Process { asid: 2 },
        acc(Kind::Load, 1, 0),
        acc(Kind::Store, 64, u64::MAX),
        Record::Marker { id: 9 },
        acc(Kind::Modify, 8, 0x7fff_ffff_f000),
    ];
    let mut w = LackeyWriter::new(Vec::new(), "out", Compression::None).unwrap();
    w.write(&recs).unwrap();
    assert_eq!(w.dropped(), 2);
    assert_eq!(w.written(), 4);
    let text = w.finish_into_inner().unwrap();
    assert_eq!(
        std::str::from_utf8(&text).unwrap(),
        "I  00400000,15\n L 00000000,1\n S ffffffffffffffff,64\n M 7ffffffff000,8\n"
    );
    let (back, _) = read_all(&text, 3).unwrap();
    let accesses: Vec<Record> = recs.into_iter().filter(|r| matches!(r, Record::Access { .. })).collect();
    assert_eq!(back, accesses);

    // Writing what was read gives the same text again.
    let mut w2 = Box::new(LackeyWriter::new(Vec::new(), "out", Compression::None).unwrap());
    w2.write(&back).unwrap();
    assert_eq!(w2.finish_into_inner().unwrap(), text);
}

#[test]
fn long_trace_crosses_buffer_boundaries() {
    // Several MB so that lines straddle refills at every phase.
    let mut w = LackeyWriter::new(Vec::new(), "big", Compression::None).unwrap();
    let recs: Vec<Record> = (0..300_000u64)
        .map(|i| acc(Kind::ALL[(i % 4) as usize], (i % 17 + 1) as u32, i.wrapping_mul(0x9e3779b97f4a7c15) >> (i % 40)))
        .collect();
    w.write(&recs).unwrap();
    let text = w.finish_into_inner().unwrap();
    assert!(text.len() > 2 << 20);
    let (back, st) = read_all(&text, 4096).unwrap();
    assert_eq!(back, recs);
    assert_eq!(st.bytes, text.len() as u64);
}
