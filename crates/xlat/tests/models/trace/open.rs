//! Opening files: compression, format detection, writers, conversion, info.

use std::path::Path;

use xlat::config::Config;
use xlat::engine::{self, RunOptions, System};
use xlat::trace::gen::{GenSpec, Generator, Pattern};
use xlat::trace::info::info;
use xlat::trace::open::{
    convert, create_writer, detect_format, format_from_name, open_reader, open_reader_inline, open_reader_with_format,
    Compression,
};
use xlat::trace::{Format, Kind, Record, TraceError, TraceReader, BATCH};

fn read_all(r: &mut dyn TraceReader) -> Result<Vec<Record>, TraceError> {
    let mut all = Vec::new();
    let mut b = Vec::new();
    while r.read_batch(&mut b, BATCH)? > 0 {
        all.extend_from_slice(&b);
    }
    Ok(all)
}

fn read_path(p: &Path, f: Option<Format>) -> Result<Vec<Record>, TraceError> {
    read_all(&mut *open_reader(p.to_str().unwrap(), f)?)
}

fn write_path(p: &Path, f: Option<Format>, recs: &[Record]) {
    let mut w = create_writer(p.to_str().unwrap(), f).unwrap();
    w.write(recs).unwrap();
    w.finish().unwrap();
}

fn acc(kind: Kind, size: u32, addr: u64) -> Record {
    Record::Access { kind, size, addr }
}

fn sample() -> Vec<Record> {
    let mut g =
        Generator::new(GenSpec { pattern: Pattern::Zipf, refs: 20_000, store_fraction: 0.3, ..GenSpec::default() })
            .unwrap();
    let mut v = read_all(&mut g).unwrap();
    for (i, r) in v.iter_mut().enumerate().step_by(5) {
        if let Record::Access { kind, addr, .. } = r {
            *kind = if i % 2 == 0 { Kind::Ifetch } else { Kind::Modify };
            *addr = 0x400000 + i as u64;
        }
    }
    v
}

fn events() -> Vec<Record> {
    vec![
        Record::Process { asid: 1 },
        acc(Kind::Load, 8, 0x1000),
        Record::Fork { child: 2 },
        Record::ContextSwitch { asid: 2 },
        Record::Map { start: 0x10000, len: 8192, flags: 3 },
        acc(Kind::Store, 4, 0x10008),
        Record::Unmap { start: 0x10000, len: 8192 },
        Record::Ipc { to: 1 },
        Record::Exit { asid: 2 },
        Record::Marker { id: 77 },
    ]
}

#[test]
fn compression_by_magic_for_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let recs = sample();
    for (fmt, ext) in [(Format::Lackey, "lackey"), (Format::Xtr, "xtr"), (Format::Champsim, "champsim")] {
        let want = if fmt == Format::Champsim {
            // What a ChampSim round trip keeps.
            let p = dir.path().join("canon.champsim");
            write_path(&p, None, &recs);
            read_path(&p, None).unwrap()
        } else {
            recs.clone()
        };
        for comp in ["", ".gz", ".zst", ".xz", ".lz4"] {
            let p = dir.path().join(format!("t.{ext}{comp}"));
            write_path(&p, None, &want);
            let bytes = std::fs::read(&p).unwrap();
            let expect = match (fmt, comp) {
                (Format::Xtr, "") | (_, ".zst") => Compression::Zstd,
                (_, ".gz") => Compression::Gzip,
                (_, ".xz") => Compression::Xz,
                (_, ".lz4") => Compression::Lz4,
                _ => Compression::None,
            };
            assert_eq!(Compression::detect(&bytes), expect, "{p:?}");
            assert_eq!(read_path(&p, None).unwrap(), want, "{p:?}");
            assert_eq!(read_path(&p, Some(fmt)).unwrap(), want, "{p:?}");
            // As a run's reader thread reads it (zstd and LZ4 frame by frame, offering their
            // decompression to other threads).
            let (mut r, _) = open_reader_inline(p.to_str().unwrap(), None).unwrap();
            assert_eq!(read_all(&mut *r).unwrap(), want, "{p:?} inline");
            // Content, not the name, decides the compression and the format (for xtr and
            // lackey; ChampSim without a name hint is recognised by plausibility).
            let q = dir.path().join(format!("renamed{comp}.bin"));
            std::fs::copy(&p, &q).unwrap();
            let (mut r, f) = open_reader_with_format(q.to_str().unwrap(), None).unwrap();
            assert_eq!(f, fmt, "{q:?}");
            assert_eq!(read_all(&mut *r).unwrap(), want);
        }
    }
}

#[test]
fn nested_compression() {
    let dir = tempfile::tempdir().unwrap();
    // An .xtr (zstd inside) gzipped again.
    let p = dir.path().join("t.xtr");
    write_path(&p, None, &events());
    let gz = dir.path().join("t.xtr.gz");
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    std::io::Write::write_all(&mut e, &std::fs::read(&p).unwrap()).unwrap();
    std::fs::write(&gz, e.finish().unwrap()).unwrap();
    assert_eq!(read_path(&gz, None).unwrap(), events());
}

#[test]
fn at_most_three_layers_are_undone_by_every_reader() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.xtr");
    write_path(&p, None, &events());
    let mut bytes = std::fs::read(&p).unwrap();
    for layers in 2..=4 {
        bytes = zstd::encode_all(&bytes[..], 1).unwrap();
        let q = dir.path().join(format!("t{layers}.xtr"));
        std::fs::write(&q, &bytes).unwrap();
        let q = q.to_str().unwrap();
        // Through a read-ahead thread, and frame by frame as runs read.
        let ahead = open_reader(q, None).and_then(|mut r| read_all(&mut *r));
        let framed = open_reader_inline(q, None).and_then(|(mut r, _)| read_all(&mut *r));
        if layers <= 3 {
            assert_eq!(ahead.unwrap(), events());
            assert_eq!(framed.unwrap(), events());
        } else {
            assert!(ahead.is_err() && framed.is_err(), "{layers} layers");
        }
    }
}

#[test]
fn detection_rules() {
    assert_eq!(format_from_name("a/b.lackey.gz"), Some(Format::Lackey));
    assert_eq!(format_from_name("x.XTR"), Some(Format::Xtr));
    assert_eq!(format_from_name("400.perlbench-41B.champsimtrace.xz"), Some(Format::Champsim));
    assert_eq!(format_from_name("trace.bin"), None);
    assert_eq!(detect_format(b"XTR\0\x01\0", "a.lackey", None), Some(Format::Xtr));
    assert_eq!(detect_format(b"==1== Lackey\n==1==\nI  0400,4\n", "a.champsim", None), Some(Format::Lackey));
    assert_eq!(detect_format(b"hello world\n", "notes.txt", None), None);
    assert_eq!(detect_format(b"", "empty", None), Some(Format::Lackey));
    let mut rec = vec![0u8; 64];
    rec[0] = 0x10;
    rec[2] = 0x40;
    assert_eq!(detect_format(&rec, "trace.bin", Some(64)), Some(Format::Champsim));
    assert_eq!(detect_format(&rec, "trace.bin", Some(65)), None);
    rec[8] = 7; // is_branch must be 0 or 1
    assert_eq!(detect_format(&rec, "trace.bin", Some(64)), None);
}

#[test]
fn unknown_format_names_file_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mystery.dat");
    std::fs::write(&p, b"\x01\x02\x03 not a trace").unwrap();
    let e = match open_reader(p.to_str().unwrap(), None) {
        Err(e) => e,
        Ok(_) => panic!("opened"),
    };
    assert!(matches!(e, TraceError::Format { .. }));
    let e = e.to_string();
    assert!(e.contains("mystery.dat") && e.contains("lackey") && e.contains("xtr") && e.contains("champsim"), "{e}");
    let e = create_writer(dir.path().join("out.dat").to_str().unwrap(), None).err().unwrap();
    assert!(matches!(e, TraceError::Format { .. }), "{e}");
    let e = open_reader(dir.path().join("missing.xtr").to_str().unwrap(), None).err().unwrap();
    assert!(matches!(e, TraceError::Io { .. }), "{e}");
}

#[test]
fn lackey_to_xtr_to_lackey() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("in.lackey");
    let text = "==9== Lackey\nI  04000bd0,3\n S 1ffefffd78,8\n L 04225e70,8\n M 04226c48,4\nI  04000bd3,15\n";
    std::fs::write(&src, text).unwrap();
    let x = dir.path().join("mid.xtr");
    let back = dir.path().join("out.lackey");
    let s = convert(src.to_str().unwrap(), x.to_str().unwrap(), None, None).unwrap();
    assert_eq!((s.from, s.to, s.records, s.accesses, s.input.skipped), (Format::Lackey, Format::Xtr, 5, 5, 1));
    let s = convert(x.to_str().unwrap(), back.to_str().unwrap(), None, None).unwrap();
    assert_eq!((s.from, s.to, s.records), (Format::Xtr, Format::Lackey, 5));
    let out = std::fs::read_to_string(&back).unwrap();
    assert_eq!(out, text.split_once('\n').unwrap().1);
    assert_eq!(read_path(&src, None).unwrap(), read_path(&back, None).unwrap());
}

#[test]
fn convert_counts_dropped_events_and_refuses_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("ev.xtr");
    write_path(&x, None, &events());
    let l = dir.path().join("ev.lackey.zst");
    let s = convert(x.to_str().unwrap(), l.to_str().unwrap(), None, None).unwrap();
    assert_eq!((s.records, s.accesses, s.events, s.dropped_events), (10, 2, 8, 8));
    let x2 = dir.path().join("ev2.xtr");
    let s = convert(x.to_str().unwrap(), x2.to_str().unwrap(), None, None).unwrap();
    assert_eq!(s.dropped_events, 0);
    assert_eq!(read_path(&x2, None).unwrap(), events());
    assert!(convert(x.to_str().unwrap(), x.to_str().unwrap(), None, None).is_err());
}

#[test]
fn info_summarises() {
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("ev.xtr");
    write_path(&x, None, &events());
    let mut r = open_reader(x.to_str().unwrap(), None).unwrap();
    let i = info(&mut *r).unwrap();
    assert_eq!(i.records, 10);
    assert_eq!(i.references, 2);
    assert_eq!(i.by_kind.load, 1);
    assert_eq!(i.by_kind.store, 1);
    assert_eq!(i.asids, vec![1, 2]);
    assert_eq!(i.processes, 2);
    assert_eq!(i.distinct_pages, 2);
    assert_eq!(i.events.total(), 8);
    assert_eq!(i.events.fork, 1);
    assert_eq!(i.min_addr, Some(0x1000));
    assert_eq!(i.max_addr, Some(0x1000b));
    let json = serde_json::to_string(&i).unwrap();
    assert!(json.contains("\"distinct_pages\":2"), "{json}");
}

#[test]
fn a_trace_in_many_zstd_frames_runs_as_it_reads() {
    // About 7 MB of xtr: 7 frames of zstd, which a run's simulation threads decompress ahead
    // of its reader while they wait for it.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("t.xtr");
    let spec = GenSpec { pattern: Pattern::Zipf, refs: 1_200_000, footprint: 64 << 20, seed: 5, ..GenSpec::default() };
    let recs = read_all(&mut Generator::new(spec).unwrap()).unwrap();
    write_path(&p, None, &recs);
    let path = p.to_str().unwrap();
    let (mut framed, _) = open_reader_inline(path, None).unwrap();
    assert!(framed.spare_work().is_some(), "a zstd file read in frames");
    assert!(read_all(&mut *framed).unwrap() == recs);
    let fa = "name = \"fa\"\n[[tlb]]\nname = \"L1\"\nentries = 64\nways = 64\n[page_table]\nkind = \"radix\"\n";
    let configs = [Config::from_toml(fa, "fa").unwrap(), Config::preset("x86-64").unwrap()];
    let run = |r: &mut dyn TraceReader, jobs: usize| {
        let mut systems: Vec<System> = configs.iter().map(|c| System::new(c).unwrap()).collect();
        engine::run_jobs(r, &mut systems, RunOptions::default(), jobs, |_| {}).unwrap();
        systems.iter().map(|s| s.stats()).collect::<Vec<_>>()
    };
    let want = {
        let mut systems: Vec<System> = configs.iter().map(|c| System::new(c).unwrap()).collect();
        for s in &mut systems {
            s.process(&recs).unwrap();
        }
        systems.iter().map(|s| s.stats()).collect::<Vec<_>>()
    };
    for jobs in [1, 2] {
        assert!(run(&mut *open_reader_inline(path, None).unwrap().0, jobs) == want, "--jobs {jobs}");
    }
}
