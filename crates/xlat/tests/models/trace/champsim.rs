//! ChampSim input_instr records.

use xlat::trace::champsim::{ChampsimReader, ChampsimWriter, RECORD_BYTES};
use xlat::trace::open::Compression;
use xlat::trace::{Kind, Record, TraceError, TraceReader, TraceWriter};

fn read_all(bytes: &[u8], batch: usize) -> Result<Vec<Record>, TraceError> {
    let mut r = ChampsimReader::new(bytes, "t.champsim");
    let mut all = Vec::new();
    let mut b = Vec::new();
    while r.read_batch(&mut b, batch)? > 0 {
        assert!(b.len() <= batch.max(1));
        all.extend_from_slice(&b);
    }
    assert_eq!(r.stats().records, all.len() as u64);
    Ok(all)
}

fn acc(kind: Kind, size: u32, addr: u64) -> Record {
    Record::Access { kind, size, addr }
}

/// A record laid out field by field as ChampSim's `input_instr`.
fn record(ip: u64, is_branch: u8, taken: u8, dst: [u64; 2], src: [u64; 4]) -> Vec<u8> {
    let mut r = Vec::with_capacity(64);
    r.extend_from_slice(&ip.to_le_bytes());
    r.push(is_branch);
    r.push(taken);
    r.extend_from_slice(&[25, 26]); // destination registers
    r.extend_from_slice(&[6, 25, 0, 0]); // source registers
    for d in dst {
        r.extend_from_slice(&d.to_le_bytes());
    }
    for s in src {
        r.extend_from_slice(&s.to_le_bytes());
    }
    assert_eq!(r.len(), RECORD_BYTES);
    r
}

#[test]
fn handcrafted_records() {
    let mut bytes = record(0x401000, 0, 0, [0x7ffd_0000_0010, 0], [0x601000, 0, 0x601008, 0]);
    bytes.extend(record(0x401004, 1, 1, [0, 0], [0, 0, 0, 0]));
    bytes.extend(record(0x401008, 0, 0, [1, 2], [3, 4, 5, 6]));
    let want = vec![
        acc(Kind::Ifetch, 1, 0x401000),
        acc(Kind::Load, 8, 0x601000),
        acc(Kind::Load, 8, 0x601008),
        acc(Kind::Store, 8, 0x7ffd_0000_0010),
        acc(Kind::Ifetch, 1, 0x401004),
        acc(Kind::Ifetch, 1, 0x401008),
        acc(Kind::Load, 8, 3),
        acc(Kind::Load, 8, 4),
        acc(Kind::Load, 8, 5),
        acc(Kind::Load, 8, 6),
        acc(Kind::Store, 8, 1),
        acc(Kind::Store, 8, 2),
    ];
    for batch in [1, 2, 3, 7, 100] {
        assert_eq!(read_all(&bytes, batch).unwrap(), want, "batch {batch}");
    }
}

#[test]
fn partial_record_is_an_error_at_its_offset() {
    let mut bytes = record(0x401000, 0, 0, [0, 0], [0; 4]);
    bytes.extend(record(0x401004, 0, 0, [0, 0], [0; 4]));
    bytes.extend_from_slice(&[1, 2, 3]);
    let e = read_all(&bytes, 100).unwrap_err().to_string();
    assert!(e.contains("t.champsim: offset 128"), "{e}");
    assert!(e.contains("3 of 64"), "{e}");
    // Only a partial record.
    let e = read_all(&bytes[..10], 100).unwrap_err().to_string();
    assert!(e.contains("offset 0"), "{e}");
}

#[test]
fn many_records_cross_buffer_boundaries() {
    let n = 20_000u64;
    let mut bytes = Vec::new();
    for i in 0..n {
        bytes.extend(record(0x400000 + 4 * i, 0, 0, [0, 0], [0x10000 + 8 * i, 0, 0, 0]));
    }
    let recs = read_all(&bytes, 4096).unwrap();
    assert_eq!(recs.len() as u64, 2 * n);
    assert_eq!(recs[2 * 19_999 + 1], acc(Kind::Load, 8, 0x10000 + 8 * 19_999));
}

#[test]
fn writer_round_trips_canonical_traces() {
    let bytes = {
        let mut b = record(0x401000, 0, 0, [0x7000, 0], [0x601000, 0x601008, 0, 0]);
        b.extend(record(0x401004, 0, 0, [0, 0], [0; 4]));
        b
    };
    let recs = read_all(&bytes, 100).unwrap();
    let mut w = ChampsimWriter::new(Vec::new(), "out", Compression::None).unwrap();
    w.write(&recs).unwrap();
    assert_eq!(w.loss(), Default::default());
    let out = w.finish_into_inner().unwrap();
    assert_eq!(read_all(&out, 100).unwrap(), recs);
    // Register and branch fields are not kept, memory operands are (in slot order).
    assert_eq!(out.len(), bytes.len());
}

#[test]
fn writer_lossy_cases() {
    let recs = vec![
        acc(Kind::Load, 4, 0x10), // before any ifetch: extra record with ip 0
        acc(Kind::Ifetch, 3, 0x400),
        acc(Kind::Store, 8, 0x20),
        acc(Kind::Load, 8, 0x30), // load after store: extra record with ip 0x400
        Record::Marker { id: 1 },
        acc(Kind::Modify, 8, 0x40),
        acc(Kind::Load, 8, 0), // address 0 dropped
    ];
    let mut w = ChampsimWriter::new(Vec::new(), "out", Compression::None).unwrap();
    w.write(&recs).unwrap();
    let loss = w.loss();
    assert_eq!(loss.events, 1);
    assert_eq!(loss.zero_addresses, 1);
    assert_eq!(loss.extra_records, 2);
    assert_eq!(loss.modifies, 1);
    assert_eq!(loss.resized, 2);
    let back = read_all(&w.finish_into_inner().unwrap(), 100).unwrap();
    assert_eq!(
        back,
        vec![
            acc(Kind::Ifetch, 1, 0),
            acc(Kind::Load, 8, 0x10),
            acc(Kind::Ifetch, 1, 0x400),
            acc(Kind::Store, 8, 0x20),
            acc(Kind::Ifetch, 1, 0x400),
            acc(Kind::Load, 8, 0x30),
            acc(Kind::Load, 8, 0x40),
            acc(Kind::Store, 8, 0x40),
        ]
    );
}
