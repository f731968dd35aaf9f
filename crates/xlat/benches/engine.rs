//! Simulation throughput: records already in memory, so this measures the engine alone.
//!
//! - `fa64-lru-radix/synthetic`: 1M uniform references over 107 pages (about 40% misses in a
//!   64-entry fully associative TLB), the miss-heavy case.
//! - `fa64-lru-radix/real`: the bundled real trace (`data/demo.xtr`).
//! - `x86-64/real`: the x86-64 preset (L1I, L1D, STLB, radix with page-walk caches).
//! - `talluri95-{single,superpage,partial-subblock,complete-subblock}/real`: the talluri95 preset
//!   (64-entry FA TLB, clustered table) with each TLB entry format and the OS support it needs
//!   (page reservation with promotion, partial-subblock PTEs, subblock prefetch): the superpage and
//!   subblock cases must keep at least half the single-page-size throughput.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xlat::config::Config;
use xlat::engine::System;
use xlat::trace::{Kind, Record, BATCH};

const FA64: &str = r#"
name = "fa64"
[[tlb]]
name = "L1"
entries = 64
ways = 64
policy = "lru"
[page_table]
kind = "radix"
"#;

fn synthetic(n: usize, pages: u64) -> Vec<Record> {
    let mut x = 0x1234_5678_9abc_def1u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let page = (x >> 20) % pages;
            Record::Access { kind: Kind::Load, size: 8, addr: 0x1000_0000 + page * 4096 + (x & 0xff8) }
        })
        .collect()
}

fn real() -> Vec<Record> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../data/demo.xtr");
    let mut r = xlat::trace::open::open_reader(path, None).expect("demo trace");
    let mut all = Vec::new();
    let mut buf = Vec::new();
    while r.read_batch(&mut buf, BATCH).expect("valid trace") > 0 {
        all.extend_from_slice(&buf);
    }
    all
}

fn lookups(records: &[Record]) -> u64 {
    records
        .iter()
        .map(|r| match *r {
            Record::Access { size, addr, .. } => ((addr + size as u64 - 1) >> 12) - (addr >> 12) + 1,
            _ => 0,
        })
        .sum()
}

fn bench(c: &mut Criterion) {
    let fa64 = Config::from_toml(FA64, "bench").unwrap();
    let x86 = Config::preset("x86-64").unwrap();
    let cases = [("fa64-lru-radix/synthetic", &fa64, synthetic(1 << 20, 107)), ("fa64-lru-radix/real", &fa64, real())];
    let real_records = cases[1].2.clone();
    let talluri = |format: &str, tlb: &str, os: &str| {
        let text = format!(
            "name = \"talluri95-{format}\"\n[[tlb]]\nname = \"TLB\"\nentries = 64\npolicy = \"lru\"\nformat = \"{format}\"\n{tlb}\n\
             [page_table]\nkind = \"clustered\"\nva_bits = 64\nline_bytes = 256\n\
             [os]\nframe_allocator = \"buddy\"\nmemory_bytes = 17179869184\n{os}"
        );
        Config::from_toml(&text, "bench").unwrap()
    };
    let designs = [
        talluri("single", "", ""),
        talluri("superpage", "", "reservation = true\nsuperpages = \"promote\""),
        talluri("partial-subblock", "", "reservation = true\npartial_subblock = true"),
        talluri("complete-subblock", "prefetch = true", ""),
    ];
    let names: Vec<String> = designs.iter().map(|d| format!("{}/real", d.name)).collect();
    let mut g = c.benchmark_group("engine");
    g.sample_size(20);
    for (name, cfg, records) in cases
        .iter()
        .map(|(n, c, r)| (*n, *c, r))
        .chain([("x86-64/real", &x86, &real_records)])
        .chain(designs.iter().zip(&names).map(|(d, n)| (n.as_str(), d, &real_records)))
    {
        g.throughput(Throughput::Elements(lookups(records)));
        g.bench_function(name, |b| {
            b.iter_batched(
                || System::new(cfg).unwrap(),
                |mut sys| {
                    for chunk in records.chunks(BATCH) {
                        sys.process(chunk).unwrap();
                    }
                    sys
                },
                criterion::BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
