//! TLB lookups alone, per entry format: a 64-entry fully associative LRU TLB (index path) and a
//! 16-entry 4-way one (scan path), filled from the same mappings, looked up with a stream that
//! mixes repeats of a few pages (filter hits) with references spread over 512 pages.
//!
//! - `single`: base-page entries only (the engine's default);
//! - `superpage`: 16-page superpages over every other 16-page block, base pages elsewhere;
//! - `partial16`: partial-subblock entries with 16-page blocks, 12 of 16 pages valid.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::pt::Pte;
use xlat::tlb::{Format, Geometry, Policy, Tlb};

const PAGES: u64 = 512;
const N: usize = 1 << 16;

fn stream() -> Vec<u64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..N)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            if x & 3 != 0 {
                (x >> 40) % 4
            } else {
                (x >> 20) % PAGES
            }
        })
        .collect()
}

/// The mapping of `vpn` for a format's page table.
fn pte(format: Format, vpn: u64) -> Pte {
    let block = vpn / 16;
    let pfn = Pfn(0x10_000 + vpn);
    let size = |pages: u64| PageSize::from_bytes(4096 * pages).unwrap();
    match format {
        Format::Superpage if block % 2 == 0 => Pte { pfn, size: size(16), valid: 0 },
        Format::PartialSubblock { .. } => Pte { pfn, size: size(16), valid: 0x0fff | 1 << (vpn % 16) },
        _ => Pte::base(pfn, PageSize::SIZE_4K),
    }
}

fn run(t: &mut Tlb, format: Format, refs: &[u64]) -> u64 {
    let mut misses = 0;
    for &v in refs {
        if t.lookup(Asid(1), Vpn(v)).is_none() {
            misses += 1;
            t.fill(1, Vpn(v), pte(format, v));
        }
    }
    misses
}

fn bench(c: &mut Criterion) {
    let refs = stream();
    let mut g = c.benchmark_group("tlb-lookup");
    g.throughput(Throughput::Elements(N as u64));
    let formats = [
        ("single", Format::Single),
        ("superpage", Format::Superpage),
        ("partial16", Format::PartialSubblock { block_pages: 16 }),
    ];
    for (entries, ways) in [(64, 64), (16, 4)] {
        for (name, format) in formats {
            let geometry = Geometry { entries, ways, policy: Policy::Lru, seed: 1 };
            let mut t = Tlb::with_format(geometry, PageSize::SIZE_4K, format).unwrap();
            g.bench_function(format!("{name}/{entries}x{ways}"), |b| b.iter(|| run(&mut t, format, &refs)));
        }
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
