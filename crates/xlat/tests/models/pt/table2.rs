//! talluri95's Table 2 formulas (`xlat::model`) against brute-force counts written here and
//! against the simulated page tables built from the same pages.

use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use xlat::addr::{Asid, PageSize, Pfn, Vpn};
use xlat::model::{self, BlockPtes, Row};
use xlat::pt::{BitsPerLevel, HashFn, Kind, NoTlb, PageTable, PageTableConfig, Pte, WalkRecord};

const PAGE: PageSize = PageSize::SIZE_4K;

/// A page-table config: 4 KB pages, 8-byte mappings, 256-byte lines (talluri95 §6.1).
fn cfg(kind: Kind, va_bits: u32, levels: Option<u32>) -> PageTableConfig {
    PageTableConfig { kind, va_bits, levels, line_bytes: 256, ..PageTableConfig::default() }
}

/// The tables the size check covers: 4-level (48- and 64-bit) and 7-level radix, a radix table
/// with uneven levels, 4- and 6-level linear, a 3-level linear table (wired root wider than a
/// page), hashed, and clustered tables with s = 16 and s = 4.
fn configs() -> Vec<(&'static str, PageTableConfig)> {
    let mut wide4 = cfg(Kind::Radix, 64, Some(4));
    wide4.bits_per_level = Some(BitsPerLevel::Uniform(13));
    let mut uneven = cfg(Kind::Radix, 48, None);
    uneven.bits_per_level = Some(BitsPerLevel::PerLevel(vec![6, 10, 12, 8]));
    let mut s4 = cfg(Kind::Clustered, 64, None);
    s4.subblock_factor = 4;
    s4.buckets = 1000;
    s4.hash = HashFn::Mult;
    vec![
        ("radix 4-level", cfg(Kind::Radix, 48, None)),
        ("radix 7-level 64-bit", cfg(Kind::Radix, 64, Some(7))),
        ("radix 4-level 64-bit", wide4),
        ("radix uneven", uneven),
        ("linear 4-level", cfg(Kind::Linear, 48, None)),
        ("linear 6-level 64-bit", cfg(Kind::Linear, 64, None)),
        ("linear 3-level", cfg(Kind::Linear, 48, Some(3))),
        ("hashed", cfg(Kind::Hashed, 64, None)),
        ("clustered s=16", cfg(Kind::Clustered, 64, None)),
        ("clustered s=4", s4),
    ]
}

/// The table `c` describes with every page mapped to a base-page PTE, built here directly.
fn build(c: &PageTableConfig, pages: &[(u32, u64)]) -> PageTable {
    let mut t = PageTable::new(c, PAGE).expect("valid config");
    for (i, &(a, v)) in pages.iter().enumerate() {
        t.map(Asid(a), Vpn(v), Pte::base(Pfn(i as u64 + 1), PAGE));
    }
    t
}

/// Nactive the brute-force way: every aligned region of `p` pages from 0 to the highest page is
/// visited and counted if some page of the process falls in it.
fn nactive_brute(pages: &[(u32, u64)], p: u64) -> u64 {
    let asids: BTreeSet<u32> = pages.iter().map(|x| x.0).collect();
    let mut n = 0;
    for a in asids {
        let mine: Vec<u64> = pages.iter().filter(|x| x.0 == a).map(|x| x.1).collect();
        let top = *mine.iter().max().unwrap();
        let mut start = 0u64;
        while start <= top {
            if mine.iter().any(|&v| v >= start && v < start + p) {
                n += 1;
            }
            start += p;
        }
    }
    n
}

/// Nactive(2^log2) with a set of (asid, region) keys.
fn nactive_set(pages: &[(u32, u64)], log2: u32) -> u64 {
    pages.iter().map(|&(a, v)| (a, v.checked_shr(log2).unwrap_or(0))).collect::<BTreeSet<_>>().len() as u64
}

/// Region starts of 64-bit page sets: low, around 2^32 pages, near the top of a 48-bit space and
/// of a 64-bit space (VPNs below 2^52).
const BASES: [u64; 5] = [0, 0x3_f000, 1 << 32, (1 << 36) - 5000, (1 << 52) - 70_000];

/// Scattered pages: uniform VPNs in a few regions, up to 3 processes (duplicates allowed).
fn scattered() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec(
        (0u32..3, 0usize..BASES.len(), 0u64..65_536).prop_map(|(a, r, off)| (a, BASES[r] + off)),
        0..400,
    )
}

/// Clustered pages: runs of 1 to 40 consecutive pages (bursty address spaces, talluri95 §3).
fn clustered() -> impl Strategy<Value = Vec<(u32, u64)>> {
    prop::collection::vec(
        (0u32..3, 0usize..BASES.len(), 0u64..65_536, 1u64..40).prop_map(|(a, r, off, n)| {
            let start = BASES[r] + off;
            (start..start + n).map(|v| (a, v)).collect::<Vec<_>>()
        }),
        0..30,
    )
    .prop_map(|runs| runs.concat())
}

fn check_sizes(pages: &[(u32, u64)]) -> Result<(), TestCaseError> {
    let unique: Vec<(u32, u64)> = pages.iter().copied().collect::<BTreeSet<_>>().into_iter().collect();
    for (name, c) in configs() {
        // A 48-bit table sees the pages of its 2^36-page space.
        let fits = |v: u64| v.checked_shr(c.va_bits - 12).unwrap_or(0) == 0;
        let pages: Vec<(u32, u64)> = pages.iter().copied().filter(|p| fits(p.1)).collect();
        let unique: Vec<(u32, u64)> = unique.iter().copied().filter(|p| fits(p.1)).collect();
        let pages = &pages[..];
        let sim = build(&c, &unique).size();
        let row = model::evaluate(pages, &c, PAGE, BlockPtes::Base, None).expect("evaluates");
        prop_assert_eq!(row.table_bytes, sim.table_bytes as f64, "{}: formula vs simulated size", name);
        prop_assert_eq!(row.bucket_bytes, sim.bucket_bytes, "{}: bucket bytes", name);
        prop_assert_eq!(row.inputs.mapped_pages, unique.len() as u64, "{}", name);
        for n in &row.inputs.nactive {
            prop_assert_eq!(n.regions, nactive_set(&unique, n.log2_pages), "{}: Nactive(2^{})", name, n.log2_pages);
        }
        let s = model::simulate(pages, &c, PAGE, BlockPtes::Base).expect("simulates");
        prop_assert_eq!(s.table_bytes, sim.table_bytes, "{}: model::simulate size", name);
        prop_assert_eq!(s.walks, unique.len() as u64);
    }
    Ok(())
}

proptest! {
    #![proptest_config(crate::proptest_cases(48))]

    #[test]
    fn nactive_matches_brute_force(
        pages in prop::collection::vec((0u32..3, 0u64..6000), 0..200),
        p in prop::sample::select(vec![1u64, 2, 3, 7, 16, 100, 512, 4096, 10_000]),
    ) {
        prop_assert_eq!(model::nactive(&pages, p), nactive_brute(&pages, p));
        if p.is_power_of_two() {
            prop_assert_eq!(model::nactive_log2(&pages, p.trailing_zeros()), nactive_brute(&pages, p));
        }
    }

    #[test]
    fn formula_sizes_equal_simulated_scattered(pages in scattered()) {
        check_sizes(&pages)?;
    }

    #[test]
    fn formula_sizes_equal_simulated_clustered(pages in clustered()) {
        check_sizes(&pages)?;
    }

    #[test]
    fn superpage_fss_is_the_fraction_of_full_blocks(pages in clustered()) {
        // Pages per (asid, block of 16), counted here.
        let unique: BTreeSet<(u32, u64)> = pages.iter().copied().collect();
        let mut per_block: BTreeMap<(u32, u64), u64> = BTreeMap::new();
        for &(a, v) in &unique {
            *per_block.entry((a, v / 16)).or_default() += 1;
        }
        let full = per_block.values().filter(|&&n| n == 16).count() as f64;
        let active = per_block.len() as f64;
        let c = cfg(Kind::Clustered, 64, None);
        let sp = model::evaluate(&pages, &c, PAGE, BlockPtes::Superpage, None).unwrap();
        prop_assert_eq!(sp.row, Row::ClusteredSuperpage);
        let want_fss = if active == 0.0 { 0.0 } else { full / active };
        prop_assert_eq!(sp.inputs.fss, Some(want_fss));
        // 24 bytes per superpage block, 144 per other active block.
        let want = 24.0 * full + 144.0 * (active - full);
        prop_assert!((sp.table_bytes - want).abs() <= 1e-9 * want.max(1.0), "{} vs {}", sp.table_bytes, want);
        let ps = model::evaluate(&pages, &c, PAGE, BlockPtes::PartialSubblock, None).unwrap();
        prop_assert_eq!(ps.table_bytes, 24.0 * active);
        let base = model::evaluate(&pages, &c, PAGE, BlockPtes::Base, None).unwrap();
        prop_assert_eq!(base.table_bytes, 144.0 * active);
        prop_assert_eq!(base.row, Row::Clustered);
    }
}

#[test]
fn hand_counted_sizes() {
    // ASID 0: pages 0, 1, 511, 512; ASID 1: page 2^30. Counted by hand:
    // Nactive(1) = 5; Nactive(16) = 4 ({0..15}, {496..511}, {512..527}, ASID 1's);
    // Nactive(512) = 3; Nactive(2^18) = 2; Nactive(2^27) = Nactive(2^36) = 2.
    let pages = [(0, 0), (0, 1), (0, 511), (0, 512), (1, 1 << 30)];
    let hashed = model::evaluate(&pages, &cfg(Kind::Hashed, 64, None), PAGE, BlockPtes::Base, None).unwrap();
    assert_eq!(hashed.table_bytes, 24.0 * 5.0);
    assert_eq!(hashed.bucket_bytes, 8 * 4096);
    assert_eq!(hashed.inputs.alpha, Some(5.0 / 4096.0));
    let clus = model::evaluate(&pages, &cfg(Kind::Clustered, 64, None), PAGE, BlockPtes::Base, None).unwrap();
    assert_eq!(clus.table_bytes, 144.0 * 4.0);
    // x86-64's 4 levels over 48 bits: 4 KB per node, nodes 3 + 2 + 2 + 2.
    let radix = model::evaluate(&pages, &cfg(Kind::Radix, 48, None), PAGE, BlockPtes::Base, None).unwrap();
    assert_eq!(radix.table_bytes, 4096.0 * (3.0 + 2.0 + 2.0 + 2.0));
    assert_eq!((radix.row, radix.lines), (Row::ForwardMapped, 4.0));
    // The same as a linear table, and its "linear with hashed" variant: (4 KB + 24) × 3.
    let linear = model::evaluate(&pages, &cfg(Kind::Linear, 48, None), PAGE, BlockPtes::Base, None).unwrap();
    assert_eq!(linear.table_bytes, 4096.0 * 9.0);
    assert_eq!(linear.linear_with_hashed_bytes, Some((4096 + 24) * 3));
    assert_eq!(linear.lines, 4.0, "1 + r·m with r = 1, m = 3 (no TLB)");
    let rm = model::evaluate(&pages, &cfg(Kind::Linear, 48, None), PAGE, BlockPtes::Base, Some((0.1, 2.0))).unwrap();
    assert!((rm.lines - 1.2).abs() < 1e-12);
}

#[test]
fn pages_outside_the_address_space_are_an_error() {
    let e = model::evaluate(&[(0, 1 << 36)], &cfg(Kind::Radix, 48, None), PAGE, BlockPtes::Base, None).unwrap_err();
    assert_eq!(e.key, "page_table.va_bits");
    let e = model::simulate(&[(0, 1 << 36)], &cfg(Kind::Hashed, 48, None), PAGE, BlockPtes::Base).unwrap_err();
    assert_eq!(e.key, "page_table.va_bits");
    let mut bad = cfg(Kind::Clustered, 64, None);
    bad.subblock_factor = 3;
    let e = model::evaluate(&[], &bad, PAGE, BlockPtes::Base, None).unwrap_err();
    assert_eq!(e.key, "page_table.subblock_factor");
}

#[test]
fn tree_walks_cost_what_the_formulas_say() {
    // Without page-walk caches or a TLB, every walk reads one entry per level: Table 2's
    // `nlevels` for forward-mapped tables, and `1 + r·m` with r = 1, m = levels − 1 for linear.
    let mut rng = SplitMix(7);
    let pages: Vec<(u32, u64)> = (0..500).map(|_| ((rng.next() % 2) as u32, rng.next() >> 30)).collect();
    for (c, levels) in [
        (cfg(Kind::Radix, 64, Some(7)), 7.0),
        (cfg(Kind::Radix, 48, None), 4.0),
        (cfg(Kind::Linear, 64, None), 6.0),
        (cfg(Kind::Linear, 48, None), 4.0),
    ] {
        let pages: Vec<(u32, u64)> = pages.iter().map(|&(a, v)| (a, v >> (64 - c.va_bits))).collect();
        let row = model::evaluate(&pages, &c, PAGE, BlockPtes::Base, None).unwrap();
        assert_eq!(row.lines, levels);
        let sim = model::simulate(&pages, &c, PAGE, BlockPtes::Base).unwrap();
        assert_eq!(sim.lines, levels, "{:?}", c.kind);
    }
}

/// splitmix64: a seeded generator for the page sets of the load-factor checks.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Average lines of a walk to every page of `pages`, walked here on a table built here.
fn average_walk_lines(c: &PageTableConfig, pages: &[(u32, u64)]) -> f64 {
    let mut t = build(c, pages);
    let mut rec = WalkRecord::default();
    let mut lines = 0;
    for &(a, v) in pages {
        rec.reset();
        assert!(t.walk(Asid(a), Vpn(v), &mut NoTlb, &mut rec).is_some());
        lines += rec.cache_lines;
    }
    lines as f64 / pages.len() as f64
}

/// Hashed and clustered walks to uniformly random pages cost `1 + α/2` lines on average.
///
/// Tolerance: the formula is the expected PTEs probed by a successful search under uniform
/// hashing (Knuth: `1 + (n − 1)/2m`). With `m` buckets and chain lengths close to Poisson(α),
/// the average over the `n = αm` keys is `1 + Σ C(c_b, 2) / n`, whose standard deviation is
/// `sqrt((α + 1/2) / m)`; averaged over `SEEDS` independent page sets it shrinks by
/// `sqrt(SEEDS)`. The check allows 5 standard deviations (1.2× that for clustered tables, whose
/// average over pages weights each block by its 1 to 16 mapped pages), plus `1/2m` for the
/// `n − 1`. Lines are talluri95's 256 bytes, so a 144-byte clustered PTE is one line.
#[test]
fn hashed_and_clustered_lines_follow_one_plus_alpha_over_two() {
    const SEEDS: u64 = 8;
    for kind in [Kind::Hashed, Kind::Clustered] {
        for hash in [HashFn::Xor, HashFn::Mult] {
            for alpha in [0.25, 0.5, 1.0, 2.0] {
                let mut c = cfg(kind, 64, None);
                c.hash = hash;
                let m = c.buckets as f64;
                let keys = (alpha * m) as usize;
                let (mut sim, mut formula) = (0.0, 0.0);
                for seed in 0..SEEDS {
                    let mut rng = SplitMix(seed * 1000 + (alpha * 8.0) as u64);
                    let mut pages = BTreeSet::new();
                    let mut blocks = BTreeSet::new();
                    while blocks.len() < keys {
                        // A uniform VPN (hashed) or page block (clustered) below 2^40.
                        let r = rng.next() >> 24;
                        if kind == Kind::Hashed {
                            if blocks.insert(r) {
                                pages.insert((0u32, r));
                            }
                        } else if blocks.insert(r >> 4) {
                            let block = (r >> 4) << 4;
                            let n = 1 + rng.next() % 16;
                            for _ in 0..n {
                                pages.insert((0u32, block + rng.next() % 16));
                            }
                        }
                    }
                    let pages: Vec<(u32, u64)> = pages.into_iter().collect();
                    let row = model::evaluate(&pages, &c, PAGE, BlockPtes::Base, None).unwrap();
                    assert_eq!(row.inputs.alpha, Some(keys as f64 / m));
                    formula += row.lines;
                    let here = average_walk_lines(&c, &pages);
                    let sim_row = model::simulate(&pages, &c, PAGE, BlockPtes::Base).unwrap();
                    assert_eq!(sim_row.lines, here, "model::simulate walks the same");
                    sim += here;
                }
                let (sim, formula) = (sim / SEEDS as f64, formula / SEEDS as f64);
                let sd = ((alpha + 0.5) / m).sqrt() / (SEEDS as f64).sqrt();
                let weight = if kind == Kind::Clustered { 1.2 } else { 1.0 };
                let tol = 5.0 * sd * weight + 0.5 / m;
                assert!(
                    (sim - formula).abs() <= tol,
                    "{kind:?} {hash:?} α = {alpha}: simulated {sim:.4} vs 1 + α/2 = {formula:.4} (tolerance {tol:.4})"
                );
            }
        }
    }
}

/// The clustered-with-fss size equals a simulated clustered table that stores superpage and
/// partial-subblock PTEs (24 bytes: tag, next, one mapping word).
#[test]
fn fss_formula_equals_simulated_block_ptes() {
    let mut pages = Vec::new();
    for (a, start, n) in [(0u32, 0u64, 40u64), (0, 100, 3), (1, 1 << 30, 64), (1, 5000, 16), (2, 77, 1)] {
        pages.extend((start..start + n).map(|v| (a, v)));
    }
    let c = cfg(Kind::Clustered, 64, None);
    for ptes in [BlockPtes::Superpage, BlockPtes::PartialSubblock] {
        let row = model::evaluate(&pages, &c, PAGE, ptes, None).unwrap();
        let sim = model::simulate(&pages, &c, PAGE, ptes).unwrap();
        assert_eq!(sim.block_ptes, ptes.name(), "the table kept the block PTEs");
        // The formula is evaluated in floating point (fss is a fraction): exact up to rounding.
        assert_eq!(row.table_bytes.round(), sim.table_bytes as f64, "{ptes:?}");
        assert!((row.table_bytes - sim.table_bytes as f64).abs() < 1e-6, "{ptes:?}");
    }
}
