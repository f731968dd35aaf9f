//! Trace layer throughput: lackey parsing (bytes/s), xtr decoding (records/s, raw and
//! zstd-compressed, from memory), xtr encoding and the synthetic generators (records/s).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use std::io::Cursor;
use std::sync::Arc;
use xlat::trace::gen::{GenSpec, Generator, Pattern, Rng};
use xlat::trace::lackey::{LackeyReader, LackeyWriter};

use xlat::trace::open::{decompress, reader_from_stream, Compression};
use xlat::trace::xtr::{encode_to_vec, XtrReader};
use xlat::trace::{Format, Kind, Record, TraceReader, TraceWriter, BATCH};

/// A program-like mix: sequential instruction fetches of x86-like lengths with occasional
/// jumps, ~40% of instructions loading from stack or heap, ~15% storing.
fn program_like(n: usize) -> Vec<Record> {
    const LENGTHS: [u32; 8] = [1, 2, 3, 3, 4, 5, 5, 7];
    let mut rng = Rng::new(3);
    let mut v = Vec::with_capacity(n);
    let mut pc = 0x0040_0000u64;
    let mut stack = 0x7ffd_f000_0000u64;
    let mut heap = 0x0060_0000u64;
    while v.len() < n {
        let r = rng.next_u64();
        let size = LENGTHS[(r & 7) as usize];
        v.push(Record::Access { kind: Kind::Ifetch, size, addr: pc });
        pc += size as u64;
        if r >> 60 == 0 {
            pc = 0x0040_0000 + ((r >> 20) & 0xf_ffff);
        }
        let d = (r >> 8) & 0xff;
        if d < 100 {
            let addr = if d < 50 {
                stack.wrapping_add((r >> 32) & 0x1f8).wrapping_sub(0x100)
            } else {
                heap += 8 * ((r >> 40) & 3);
                heap
            };
            v.push(Record::Access { kind: Kind::Load, size: 8, addr });
        } else if d < 140 {
            stack = stack.wrapping_add(((r >> 48) & 0x3f) * 8).wrapping_sub(0x100);
            v.push(Record::Access { kind: Kind::Store, size: [4, 8][(r >> 30) as usize & 1], addr: stack });
        }
    }
    v.truncate(n);
    v
}

fn drain(r: &mut dyn TraceReader, batch: &mut Vec<Record>) -> u64 {
    let mut n = 0;
    while r.read_batch(batch, BATCH).unwrap() > 0 {
        n += batch.len() as u64;
        black_box(&batch[batch.len() - 1]);
    }
    n
}

fn lackey(c: &mut Criterion) {
    let recs = program_like(2_000_000);
    let mut w = LackeyWriter::new(Vec::new(), "bench", Compression::None).unwrap();
    w.write(&recs).unwrap();
    let mut text = b"==1== Lackey, an example Valgrind tool\n".to_vec();
    text.extend(w.finish_into_inner().unwrap());
    let mut g = c.benchmark_group("lackey");
    g.throughput(Throughput::Bytes(text.len() as u64));
    g.sample_size(20);
    let mut batch = Vec::with_capacity(BATCH);
    g.bench_function("parse", |b| {
        b.iter(|| {
            let mut r = LackeyReader::new(&text[..], "bench");
            assert_eq!(drain(&mut r, &mut batch), recs.len() as u64);
        })
    });
    g.finish();
}

fn xtr(c: &mut Criterion) {
    let n = 4_000_000;
    let recs = program_like(n);
    let raw = encode_to_vec(&recs, Compression::None).unwrap();
    let zst = encode_to_vec(&recs, Compression::Zstd).unwrap();
    eprintln!(
        "xtr: {n} records, raw {:.2} bytes/record, zstd {:.2} bytes/record",
        raw.len() as f64 / n as f64,
        zst.len() as f64 / n as f64
    );
    let mut g = c.benchmark_group("xtr");
    g.throughput(Throughput::Elements(n as u64));
    g.sample_size(20);
    let mut batch = Vec::with_capacity(BATCH);
    g.bench_function("decode_raw", |b| {
        b.iter(|| {
            let mut r = XtrReader::new(&raw[..], "bench").unwrap();
            assert_eq!(drain(&mut r, &mut batch), n as u64);
        })
    });
    g.bench_function("decode_zstd", |b| {
        b.iter(|| {
            let (s, _) = decompress(&zst[..]).unwrap();
            let mut r = XtrReader::new(s, "bench").unwrap();
            assert_eq!(drain(&mut r, &mut batch), n as u64);
        })
    });
    g.bench_function("zstd_decompress_only", |b| {
        b.iter(|| {
            let mut d = zstd::stream::read::Decoder::new(&zst[..]).unwrap();
            assert_eq!(std::io::copy(&mut d, &mut std::io::sink()).unwrap(), raw.len() as u64);
        })
    });
    let shared: Arc<[u8]> = zst.clone().into();
    g.bench_function("decode_zstd_read_ahead", |b| {
        b.iter(|| {
            let input = Box::new(Cursor::new(shared.clone()));
            let (mut r, _) = reader_from_stream(input, "bench", Some(Format::Xtr), None, true).unwrap();
            assert_eq!(drain(&mut *r, &mut batch), n as u64);
        })
    });
    g.bench_function("encode_raw", |b| b.iter(|| black_box(encode_to_vec(&recs, Compression::None).unwrap().len())));
    g.finish();
}

fn generators(c: &mut Criterion) {
    let n = 4_000_000u64;
    let mut g = c.benchmark_group("gen");
    g.throughput(Throughput::Elements(n));
    g.sample_size(20);
    let mut batch = Vec::with_capacity(BATCH);
    for (name, pattern, footprint) in [
        ("sequential", Pattern::Sequential, 1u64 << 30),
        ("uniform", Pattern::Uniform, 1 << 30),
        ("zipf_32MiB", Pattern::Zipf, 1 << 25),
        ("zipf_1GiB", Pattern::Zipf, 1 << 30),
        ("zipf_64GiB", Pattern::Zipf, 1 << 36),
    ] {
        let spec = GenSpec { pattern, refs: n, footprint, store_fraction: 0.3, ..GenSpec::default() };
        g.bench_function(name, |b| {
            b.iter(|| {
                let mut r = Generator::new(spec).unwrap();
                assert_eq!(drain(&mut r, &mut batch), n);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, lackey, xtr, generators);
criterion_main!(benches);
